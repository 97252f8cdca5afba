"""/dev/kgsl-3d0 ABI: the msm_kgsl UAPI (KGSL 3.14, Qualcomm's 2022-2023 kernels) as data: argument structs, ioctl
numbers, property/flag values.

Written from the facts of ../shared/vendor/kgsl/.../msm_kgsl.h. Structs are one-line field specs (gputwin.abi.ioc) read
left to right as the C struct lays out on arm64/x86-64 LP64: `unsigned long`, `__kernel_size_t` and user pointers are
8 bytes (`u64`/`ptr`), `int` and enums 4. Ioctl numbers use the asm-generic _IOC encoding with type KGSL_IOC_TYPE (9),
as the header's _IOW/_IOR/_IOWR(KGSL_IOC_TYPE, nr, struct) do. The driver dispatches on _IOC_NR only; it copies in
min(_IOC_SIZE of its own command, of the user's) bytes when both say IOC_WRITE and copies out on success when both say
IOC_READ. tests/mock/kgsl/test_kgsl_abi.py checks every struct, number and constant here against the header with a C
compiler. Used by gputwin.mock.kgsl and the QCOM runtime.
"""
from __future__ import annotations
import ctypes
from gputwin.abi.ioc import IOC_READ, IOC_WRITE, declarer, ioc

KGSL_VERSION_MAJOR, KGSL_VERSION_MINOR = 3, 14
KGSL_IOC_TYPE = 0x09

# ---- context flags (KGSL_CONTEXT_*; the KGSL_CMDBATCH_* / KGSL_DRAWOBJ_* submit flags share the low bits)
KGSL_CONTEXT_SAVE_GMEM, KGSL_CONTEXT_NO_GMEM_ALLOC, KGSL_CONTEXT_SUBMIT_IB_LIST = 0x1, 0x2, 0x4
KGSL_CONTEXT_CTX_SWITCH, KGSL_CONTEXT_PREAMBLE, KGSL_CONTEXT_TRASH_STATE = 0x8, 0x10, 0x20
KGSL_CONTEXT_PER_CONTEXT_TS, KGSL_CONTEXT_USER_GENERATED_TS, KGSL_CONTEXT_END_OF_FRAME = 0x40, 0x80, 0x100
KGSL_CONTEXT_NO_FAULT_TOLERANCE, KGSL_CONTEXT_SYNC, KGSL_CONTEXT_PWR_CONSTRAINT = 0x200, 0x400, 0x800
KGSL_CONTEXT_PRIORITY_MASK, KGSL_CONTEXT_PRIORITY_SHIFT, KGSL_CONTEXT_PRIORITY_UNDEF = 0xF000, 12, 0
KGSL_CONTEXT_IFH_NOP, KGSL_CONTEXT_SECURE, KGSL_CONTEXT_NO_SNAPSHOT, KGSL_CONTEXT_SPARSE = 0x10000, 0x20000, 0x40000, \
  0x80000
KGSL_CONTEXT_PREEMPT_STYLE_MASK, KGSL_CONTEXT_PREEMPT_STYLE_SHIFT = 0x0E000000, 25
KGSL_CONTEXT_PREEMPT_STYLE_DEFAULT, KGSL_CONTEXT_PREEMPT_STYLE_RINGBUFFER = 0, 1
KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN = 2
KGSL_CONTEXT_TYPE_MASK, KGSL_CONTEXT_TYPE_SHIFT = 0x01F00000, 20
(KGSL_CONTEXT_TYPE_ANY, KGSL_CONTEXT_TYPE_GL, KGSL_CONTEXT_TYPE_CL, KGSL_CONTEXT_TYPE_C2D, KGSL_CONTEXT_TYPE_RS,
 KGSL_CONTEXT_TYPE_VK) = range(6)
KGSL_CONTEXT_TYPE_UNKNOWN = 0x1E
KGSL_CONTEXT_INVALIDATE_ON_FAULT, KGSL_CONTEXT_LPAC, KGSL_CONTEXT_FAULT_INFO = 0x10000000, 0x20000000, 0x40000000
KGSL_CONTEXT_INVALID = 0xFFFFFFFF
KGSL_CMDBATCH_MEMLIST, KGSL_CMDBATCH_MARKER, KGSL_CMDBATCH_SUBMIT_IB_LIST = 0x1, 0x2, 0x4
KGSL_CMDBATCH_CTX_SWITCH, KGSL_CMDBATCH_PROFILING, KGSL_CMDBATCH_PROFILING_KTIME = 0x8, 0x10, 0x20
KGSL_CMDBATCH_END_OF_FRAME, KGSL_CMDBATCH_SYNC, KGSL_CMDBATCH_PWR_CONSTRAINT = 0x100, 0x400, 0x800
KGSL_CMDBATCH_SPARSE, KGSL_CMDBATCH_START_RECURRING, KGSL_CMDBATCH_STOP_RECURRING = 0x1000, 0x100000, 0x200000
# kgsl_command_object.flags
KGSL_CMDLIST_IB, KGSL_CMDLIST_CTXTSWITCH_PREAMBLE, KGSL_CMDLIST_IB_PREAMBLE = 0x1, 0x2, 0x4
KGSL_OBJLIST_MEMOBJ, KGSL_OBJLIST_PROFILE = 0x8, 0x10
KGSL_CMD_SYNCPOINT_TYPE_TIMESTAMP, KGSL_CMD_SYNCPOINT_TYPE_FENCE, KGSL_CMD_SYNCPOINT_TYPE_TIMELINE = 0, 1, 2

# ---- memory flags (64-bit in GPUOBJ_*, the low 32 in GPUMEM_*)
KGSL_MEMFLAGS_SECURE, KGSL_MEMFLAGS_GPUREADONLY, KGSL_MEMFLAGS_GPUWRITEONLY = 1 << 3, 1 << 24, 1 << 25
KGSL_MEMFLAGS_FORCE_32BIT, KGSL_MEMFLAGS_USE_CPU_MAP, KGSL_MEMFLAGS_SPARSE_PHYS = 1 << 32, 1 << 28, 1 << 29
KGSL_MEMFLAGS_SPARSE_VIRT, KGSL_MEMFLAGS_IOCOHERENT, KGSL_MEMFLAGS_GUARD_PAGE = 1 << 30, 1 << 31, 1 << 33
KGSL_MEMFLAGS_VBO, KGSL_MEMFLAGS_VBO_NO_MAP_ZERO = 1 << 34, 1 << 35
KGSL_SPARSE_BIND_MULTIPLE_TO_PHYS, KGSL_SPARSE_BIND, KGSL_SPARSE_UNBIND = 0x400000000, 0x1, 0x2
KGSL_CACHEMODE_MASK, KGSL_CACHEMODE_SHIFT = 0x0C000000, 26
KGSL_CACHEMODE_WRITECOMBINE, KGSL_CACHEMODE_UNCACHED, KGSL_CACHEMODE_WRITETHROUGH, KGSL_CACHEMODE_WRITEBACK = range(4)
KGSL_MEMTYPE_MASK, KGSL_MEMTYPE_SHIFT = 0x0000FF00, 8
KGSL_MEMTYPE_OBJECTANY, KGSL_MEMTYPE_COMMAND, KGSL_MEMTYPE_KERNEL = 0, 16, 255
KGSL_MEMTYPE_CL, KGSL_MEMTYPE_CL_BUFFER_MAP, KGSL_MEMTYPE_CL_BUFFER_NOMAP, KGSL_MEMTYPE_CL_KERNEL_STACK = 10, 11, 12, 15
KGSL_MEMALIGN_MASK, KGSL_MEMALIGN_SHIFT = 0x00FF0000, 16
KGSL_USER_MEM_TYPE_PMEM, KGSL_USER_MEM_TYPE_ASHMEM, KGSL_USER_MEM_TYPE_ADDR, KGSL_USER_MEM_TYPE_ION = 0, 1, 2, 3
KGSL_USER_MEM_TYPE_DMABUF, KGSL_USER_MEM_TYPE_MAX = 3, 7
KGSL_MEMFLAGS_USERMEM_MASK, KGSL_MEMFLAGS_USERMEM_SHIFT = 0xE0, 5
def KGSL_USERMEM_FLAG(t: int) -> int: return (t + 1) << KGSL_MEMFLAGS_USERMEM_SHIFT
KGSL_MEMFLAGS_NOT_USERMEM = 0
KGSL_MEMFLAGS_USERMEM_PMEM, KGSL_MEMFLAGS_USERMEM_ASHMEM = KGSL_USERMEM_FLAG(0), KGSL_USERMEM_FLAG(1)
KGSL_MEMFLAGS_USERMEM_ADDR, KGSL_MEMFLAGS_USERMEM_ION = KGSL_USERMEM_FLAG(2), KGSL_USERMEM_FLAG(3)
KGSL_FLAGS_NORMALMODE, KGSL_FLAGS_SAFEMODE, KGSL_FLAGS_INITIALIZED0, KGSL_FLAGS_INITIALIZED = 0, 1, 2, 4
KGSL_FLAGS_STARTED, KGSL_FLAGS_ACTIVE, KGSL_FLAGS_SOFT_RESET, KGSL_FLAGS_PER_CONTEXT_TIMESTAMPS = 8, 0x10, 0x100, 0x200
KGSL_SYNCOBJ_SERVER_TIMEOUT = 2000
KGSL_UBWC_NONE, KGSL_UBWC_1_0, KGSL_UBWC_2_0, KGSL_UBWC_3_0, KGSL_UBWC_4_0 = range(5)
(KGSL_CTX_STAT_NO_ERROR, KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT, KGSL_CTX_STAT_INNOCENT_CONTEXT_RESET_EXT,
 KGSL_CTX_STAT_UNKNOWN_CONTEXT_RESET_EXT) = range(4)
KGSL_TIMESTAMP_CONSUMED, KGSL_TIMESTAMP_RETIRED, KGSL_TIMESTAMP_QUEUED = 1, 2, 3

# ---- properties (kgsl_device_getproperty.type)
KGSL_PROP_DEVICE_INFO, KGSL_PROP_DEVICE_SHADOW, KGSL_PROP_DEVICE_POWER, KGSL_PROP_SHMEM = 0x1, 0x2, 0x3, 0x4
KGSL_PROP_SHMEM_APERTURES, KGSL_PROP_MMU_ENABLE, KGSL_PROP_INTERRUPT_WAITS, KGSL_PROP_VERSION = 0x5, 0x6, 0x7, 0x8
KGSL_PROP_GPU_RESET_STAT, KGSL_PROP_PWRCTRL, KGSL_PROP_PWR_CONSTRAINT, KGSL_PROP_UCHE_GMEM_VADDR = 0x9, 0xE, 0x12, 0x13
KGSL_PROP_SP_GENERIC_MEM, KGSL_PROP_UCODE_VERSION, KGSL_PROP_GPMU_VERSION = 0x14, 0x15, 0x16
KGSL_PROP_HIGHEST_BANK_BIT, KGSL_PROP_DEVICE_BITNESS, KGSL_PROP_DEVICE_QDSS_STM = 0x17, 0x18, 0x19
KGSL_PROP_MIN_ACCESS_LENGTH, KGSL_PROP_UBWC_MODE, KGSL_PROP_DEVICE_QTIMER = 0x1A, 0x1B, 0x20
KGSL_PROP_L3_PWR_CONSTRAINT, KGSL_PROP_SECURE_BUFFER_ALIGNMENT, KGSL_PROP_SECURE_CTXT_SUPPORT = 0x22, 0x23, 0x24
KGSL_PROP_SPEED_BIN, KGSL_PROP_GAMING_BIN, KGSL_PROP_QUERY_CAPABILITIES = 0x25, 0x26, 0x27
KGSL_PROP_CONTEXT_PROPERTY, KGSL_PROP_GPU_MODEL, KGSL_PROP_VK_DEVICE_ID = 0x28, 0x29, 0x2A
KGSL_PROP_IS_LPAC_ENABLED, KGSL_PROP_GPU_VA64_SIZE, KGSL_PROP_IS_RAYTRACING_ENABLED = 0x2B, 0x2C, 0x2D
KGSL_PROP_IS_FASTBLEND_ENABLED, KGSL_PROP_UCHE_TRAP_BASE, KGSL_PROP_IS_AQE_ENABLED = 0x2E, 0x2F, 0x30
KGSL_PROP_GPU_SECURE_VA_SIZE, KGSL_PROP_GPU_SECURE_VA_INUSE = 0x31, 0x32
KGSL_QUERY_CAPS_PROPERTIES, KGSL_CONTEXT_PROP_FAULTS = 1, 1
KGSL_PERFCOUNTER_GROUP_CP, KGSL_PERFCOUNTER_GROUP_SP, KGSL_PERFCOUNTER_GROUP_ALWAYSON = 0x0, 0xA, 0x1B
KGSL_PERFCOUNTER_GROUP_MAX, KGSL_PERFCOUNTER_NOT_USED, KGSL_PERFCOUNTER_BROKEN = 0x37, 0xFFFFFFFF, 0xFFFFFFFE
KGSL_IBDESC_MEMLIST, KGSL_IBDESC_PROFILING_BUFFER = 0x1, 0x2
KGSL_CONSTRAINT_NONE, KGSL_CONSTRAINT_PWRLEVEL, KGSL_CONSTRAINT_L3_NONE, KGSL_CONSTRAINT_L3_PWRLEVEL = 0, 1, 2, 3
KGSL_CONSTRAINT_PWR_MIN, KGSL_CONSTRAINT_PWR_MAX = 0, 1
KGSL_GPUMEM_CACHE_CLEAN, KGSL_GPUMEM_CACHE_INV, KGSL_GPUMEM_CACHE_RANGE = 1, 2, 1 << 31
KGSL_GPUMEM_CACHE_TO_GPU, KGSL_GPUMEM_CACHE_FROM_GPU, KGSL_GPUMEM_CACHE_FLUSH = 1, 2, 3
KGSL_GPUOBJ_ALLOC_METADATA_MAX, KGSL_GPUOBJ_FREE_ON_EVENT = 64, 1
KGSL_GPU_EVENT_TIMESTAMP, KGSL_GPU_EVENT_FENCE = 1, 2
KGSL_TIMESTAMP_EVENT_GENLOCK, KGSL_TIMESTAMP_EVENT_FENCE = 1, 2
KGSL_GPUOBJ_SET_INFO_METADATA, KGSL_GPUOBJ_SET_INFO_TYPE = 1, 2
KGSL_GPUMEM_RANGE_OP_BIND, KGSL_GPUMEM_RANGE_OP_UNBIND, KGSL_GPUMEM_BIND_ASYNC, KGSL_GPUMEM_BIND_FENCE_OUT = 1, 2, 1, 2
KGSL_GPU_AUX_COMMAND_BIND, KGSL_GPU_AUX_COMMAND_TIMELINE, KGSL_GPU_AUX_COMMAND_SYNC = 1, 2, 0x400
KGSL_TIMELINE_WAIT_ALL, KGSL_TIMELINE_WAIT_ANY = 1, 2
KGSL_FAULT_TYPE_NO_FAULT, KGSL_FAULT_TYPE_PAGEFAULT, KGSL_FAULT_TYPE_MAX = 0, 1, 2
KGSL_PAGEFAULT_TYPE_NONE, KGSL_PAGEFAULT_TYPE_READ, KGSL_PAGEFAULT_TYPE_WRITE = 0, 1, 2
KGSL_PAGEFAULT_TYPE_TRANSLATION, KGSL_PAGEFAULT_TYPE_PERMISSION, KGSL_PAGEFAULT_TYPE_EXTERNAL = 4, 8, 0x10
KGSL_PAGEFAULT_TYPE_TRANSACTION_STALLED = 0x20

# ---- struct declarations (gputwin.abi.ioc specs; LP64: unsigned long / size_t / pointers are u64)
struct = declarer(globals())
S = struct
S("kgsl_devinfo", "u32 device_id chip_id mmu_enabled; u64 gmem_gpubaseaddr; u32 gpu_id; u64 gmem_sizebytes")
S("kgsl_devmemstore", "u32 soptimestamp sbz eoptimestamp sbz2 preempted sbz3 ref_wait_ts sbz4 current_context sbz5")
S("kgsl_capabilities_properties", "u64 list; u32 count")
S("kgsl_capabilities", "u64 data size; u32 querytype")
S("kgsl_shadowprop", "u64 gpuaddr size; u32 flags")
S("kgsl_qdss_stm_prop", "u64 gpuaddr size")
S("kgsl_qtimer_prop", "u64 gpuaddr size")
S("kgsl_version", "u32 drv_major drv_minor dev_major dev_minor")
S("kgsl_sp_generic_mem", "u64 local pvt")
S("kgsl_ucode_version", "u32 pfp pm4")
S("kgsl_gpmu_version", "u32 major minor features")
S("kgsl_context_property", "u64 data; u32 size type contextid")
S("kgsl_context_property_fault", "s32 faults; u32 timestamp")
S("kgsl_gpu_model", "char gpu_model[32]")
S("kgsl_ibdesc", "u64 gpuaddr __pad sizedwords; u32 ctrl")
S("kgsl_cmdbatch_profiling_buffer", "u64 wall_clock_s wall_clock_ns gpu_ticks_queued gpu_ticks_submitted"
  " gpu_ticks_retired")
S("kgsl_device_getproperty", "u32 type; ptr value; u64 sizebytes")
S("kgsl_device_waittimestamp", "u32 timestamp timeout")
S("kgsl_device_waittimestamp_ctxtid", "u32 context_id timestamp timeout")
S("kgsl_ringbuffer_issueibcmds", "u32 drawctxt_id; u64 ibdesc_addr; u32 numibs timestamp flags")
S("kgsl_cmdstream_readtimestamp", "u32 type timestamp")
S("kgsl_cmdstream_freememontimestamp", "u64 gpuaddr; u32 type timestamp")
S("kgsl_drawctxt_create", "u32 flags drawctxt_id")
S("kgsl_drawctxt_destroy", "u32 drawctxt_id")
S("kgsl_map_user_mem", "int fd; u64 gpuaddr len offset hostptr; u32 memtype flags")
S("kgsl_cmdstream_readtimestamp_ctxtid", "u32 context_id type timestamp")
S("kgsl_cmdstream_freememontimestamp_ctxtid", "u32 context_id; u64 gpuaddr; u32 type timestamp")
S("kgsl_sharedmem_from_pmem", "int pmem_fd; u64 gpuaddr; u32 len offset")
S("kgsl_sharedmem_free", "u64 gpuaddr")
S("kgsl_cff_user_event", "u8 cff_opcode; u32 op1 op2 op3 op4 op5 __pad[2]")
S("kgsl_gmem_desc", "u32 x y width height pitch")
S("kgsl_buffer_desc", "ptr hostptr; u64 gpuaddr; int size; u32 format pitch enabled")
S("kgsl_bind_gmem_shadow", "u32 drawctxt_id; kgsl_gmem_desc gmem_desc; u32 shadow_x shadow_y;"
  " kgsl_buffer_desc shadow_buffer; u32 buffer_id")
S("kgsl_sharedmem_from_vmalloc", "u64 gpuaddr; u32 hostptr flags")
S("kgsl_drawctxt_set_bin_base_offset", "u32 drawctxt_id offset")
S("kgsl_cmdwindow_write", "u32 target addr data")
S("kgsl_gpumem_alloc", "u64 gpuaddr size; u32 flags")
S("kgsl_cff_syncmem", "u64 gpuaddr len; u32 __pad[2]")
S("kgsl_timestamp_event", "int type; u32 timestamp context_id; ptr priv; u64 len")
S("kgsl_timestamp_event_genlock", "int handle")
S("kgsl_timestamp_event_fence", "int fence_fd")
S("kgsl_gpumem_alloc_id", "u32 id flags; u64 size mmapsize gpuaddr __pad[2]")
S("kgsl_gpumem_free_id", "u32 id __pad")
S("kgsl_gpumem_get_info", "u64 gpuaddr; u32 id flags; u64 size mmapsize useraddr __pad[4]")
S("kgsl_gpumem_sync_cache", "u64 gpuaddr; u32 id op; u64 offset length")
S("kgsl_perfcounter_get", "u32 groupid countable offset offset_hi __pad")
S("kgsl_perfcounter_put", "u32 groupid countable __pad[2]")
S("kgsl_perfcounter_query", "u32 groupid; ptr countables; u32 count max_counters __pad[2]")
S("kgsl_perfcounter_read_group", "u32 groupid countable; u64 value")
S("kgsl_perfcounter_read", "ptr reads; u32 count __pad[2]")
S("kgsl_gpumem_sync_cache_bulk", "ptr id_list; u32 count op __pad[2]")
S("kgsl_cmd_syncpoint_timestamp", "u32 context_id timestamp")
S("kgsl_cmd_syncpoint_fence", "int fd")
S("kgsl_cmd_syncpoint_timeline", "u64 timelines; u32 count timelines_size")
S("kgsl_cmd_syncpoint", "int type; ptr priv; u64 size")
S("kgsl_submit_commands", "u32 context_id flags; ptr cmdlist; u32 numcmds; ptr synclist; u32 numsyncs timestamp"
  " __pad[4]")
S("kgsl_device_constraint", "u32 type context_id; ptr data; u64 size")
S("kgsl_device_constraint_pwrlevel", "u32 level")
S("kgsl_syncsource_create", "u32 id __pad[3]")
S("kgsl_syncsource_destroy", "u32 id __pad[3]")
S("kgsl_syncsource_create_fence", "u32 id; int fence_fd; u32 __pad[4]")
S("kgsl_syncsource_signal_fence", "u32 id; int fence_fd; u32 __pad[4]")
S("kgsl_cff_sync_gpuobj", "u64 offset length; u32 id")
S("kgsl_gpuobj_alloc", "u64 size flags va_len mmapsize; u32 id metadata_len; u64 metadata")
S("kgsl_gpuobj_free", "u64 flags priv; u32 id type len")
S("kgsl_gpu_event_timestamp", "u32 context_id timestamp")
S("kgsl_gpu_event_fence", "int fd")
S("kgsl_gpuobj_info", "u64 gpuaddr flags size va_len va_addr; u32 id")
S("kgsl_gpuobj_import", "u64 priv priv_len flags; u32 type id")
S("kgsl_gpuobj_import_dma_buf", "int fd")
S("kgsl_gpuobj_import_useraddr", "u64 virtaddr")
S("kgsl_gpuobj_sync_obj", "u64 offset length; u32 id op")
S("kgsl_gpuobj_sync", "u64 objs; u32 obj_len count")
S("kgsl_command_object", "u64 offset gpuaddr size; u32 flags id")
S("kgsl_command_syncpoint", "u64 priv size; u32 type")
S("kgsl_gpu_command", "u64 flags cmdlist; u32 cmdsize numcmds; u64 objlist; u32 objsize numobjs; u64 synclist;"
  " u32 syncsize numsyncs context_id timestamp")
S("kgsl_preemption_counters_query", "u64 counters; u32 size_user size_priority_level max_priority_level")
S("kgsl_gpuobj_set_info", "u64 flags metadata; u32 id metadata_len type")
S("kgsl_sparse_phys_alloc", "u64 size pagesize flags; u32 id")
S("kgsl_sparse_phys_free", "u32 id")
S("kgsl_sparse_virt_alloc", "u64 size pagesize flags gpuaddr; u32 id")
S("kgsl_sparse_virt_free", "u32 id")
S("kgsl_sparse_binding_object", "u64 virtoffset physoffset size flags; u32 id")
S("kgsl_sparse_bind", "u64 list; u32 id size count")
S("kgsl_gpu_sparse_command", "u64 flags sparselist synclist; u32 sparsesize numsparse syncsize numsyncs context_id"
  " timestamp id")
S("kgsl_gpumem_bind_range", "u64 child_offset target_offset length; u32 child_id op")
S("kgsl_gpumem_bind_ranges", "u64 ranges; u32 ranges_nents ranges_size id flags; int fence_id; u32 padding")
S("kgsl_gpu_aux_command_bind", "u64 rangeslist numranges rangesize; u32 target padding")
S("kgsl_gpu_aux_command_generic", "u64 priv size; u32 type padding")
S("kgsl_gpu_aux_command", "u64 flags cmdlist; u32 cmdsize numcmds; u64 synclist; u32 syncsize numsyncs context_id"
  " timestamp")
S("kgsl_timeline_create", "u64 seqno; u32 id padding")
S("kgsl_timeline_val", "u64 seqno; u32 timeline padding")
S("kgsl_timeline_wait", "u64 tv_sec tv_nsec timelines; u32 count timelines_size flags padding")
S("kgsl_timeline_signal", "u64 timelines; u32 count timelines_size")
S("kgsl_timeline_fence_get", "u64 seqno; u32 timeline; int handle")
S("kgsl_gpu_aux_command_timeline", "u64 timelines; u32 count timelines_size")
S("kgsl_pagefault_report", "u64 fault_addr reserved[2]; u32 fault_type __pad")
S("kgsl_fault", "u64 fault; u32 type count size padding")
S("kgsl_fault_report", "u64 faultlist; u32 faultnents faultsize context_id padding")
S("kgsl_recurring_command", "u64 flags cmdlist; u32 cmdsize numcmds; u64 objlist; u32 objsize numobjs context_id"
  " padding")

# ---- the ioctls: IOCTL_KGSL_<name> = _IO{R,W,WR}(KGSL_IOC_TYPE, nr, struct)
_R, _W, _RW = IOC_READ, IOC_WRITE, IOC_READ | IOC_WRITE
_TABLE = [
  ("DEVICE_GETPROPERTY", _RW, 0x02, "kgsl_device_getproperty"),
  ("DEVICE_WAITTIMESTAMP", _W, 0x06, "kgsl_device_waittimestamp"),
  ("DEVICE_WAITTIMESTAMP_CTXTID", _W, 0x07, "kgsl_device_waittimestamp_ctxtid"),
  ("RINGBUFFER_ISSUEIBCMDS", _RW, 0x10, "kgsl_ringbuffer_issueibcmds"),
  ("CMDSTREAM_READTIMESTAMP", _RW, 0x11, "kgsl_cmdstream_readtimestamp"),
  ("CMDSTREAM_FREEMEMONTIMESTAMP", _W, 0x12, "kgsl_cmdstream_freememontimestamp"),
  ("DRAWCTXT_CREATE", _RW, 0x13, "kgsl_drawctxt_create"),
  ("DRAWCTXT_DESTROY", _W, 0x14, "kgsl_drawctxt_destroy"),
  ("MAP_USER_MEM", _RW, 0x15, "kgsl_map_user_mem"),
  ("CMDSTREAM_READTIMESTAMP_CTXTID", _RW, 0x16, "kgsl_cmdstream_readtimestamp_ctxtid"),
  ("CMDSTREAM_FREEMEMONTIMESTAMP_CTXTID", _W, 0x17, "kgsl_cmdstream_freememontimestamp_ctxtid"),
  ("SHAREDMEM_FROM_PMEM", _RW, 0x20, "kgsl_sharedmem_from_pmem"),
  ("SHAREDMEM_FREE", _W, 0x21, "kgsl_sharedmem_free"),
  ("DRAWCTXT_BIND_GMEM_SHADOW", _W, 0x22, "kgsl_bind_gmem_shadow"),
  ("SHAREDMEM_FROM_VMALLOC", _RW, 0x23, "kgsl_sharedmem_from_vmalloc"),
  ("SHAREDMEM_FLUSH_CACHE", _W, 0x24, "kgsl_sharedmem_free"),
  ("DRAWCTXT_SET_BIN_BASE_OFFSET", _W, 0x25, "kgsl_drawctxt_set_bin_base_offset"),
  ("CMDWINDOW_WRITE", _W, 0x2E, "kgsl_cmdwindow_write"),
  ("GPUMEM_ALLOC", _RW, 0x2F, "kgsl_gpumem_alloc"),
  ("CFF_SYNCMEM", _W, 0x30, "kgsl_cff_syncmem"),
  ("CFF_USER_EVENT", _W, 0x31, "kgsl_cff_user_event"),
  ("SETPROPERTY", _W, 0x32, "kgsl_device_getproperty"),
  ("TIMESTAMP_EVENT", _RW, 0x33, "kgsl_timestamp_event"),
  ("GPUMEM_ALLOC_ID", _RW, 0x34, "kgsl_gpumem_alloc_id"),
  ("GPUMEM_FREE_ID", _RW, 0x35, "kgsl_gpumem_free_id"),
  ("GPUMEM_GET_INFO", _RW, 0x36, "kgsl_gpumem_get_info"),
  ("GPUMEM_SYNC_CACHE", _W, 0x37, "kgsl_gpumem_sync_cache"),
  ("PERFCOUNTER_GET", _RW, 0x38, "kgsl_perfcounter_get"),
  ("PERFCOUNTER_PUT", _W, 0x39, "kgsl_perfcounter_put"),
  ("PERFCOUNTER_QUERY", _RW, 0x3A, "kgsl_perfcounter_query"),
  ("PERFCOUNTER_READ", _RW, 0x3B, "kgsl_perfcounter_read"),
  ("GPUMEM_SYNC_CACHE_BULK", _RW, 0x3C, "kgsl_gpumem_sync_cache_bulk"),
  ("SUBMIT_COMMANDS", _RW, 0x3D, "kgsl_submit_commands"),
  ("SYNCSOURCE_CREATE", _RW, 0x40, "kgsl_syncsource_create"),
  ("SYNCSOURCE_DESTROY", _RW, 0x41, "kgsl_syncsource_destroy"),
  ("SYNCSOURCE_CREATE_FENCE", _RW, 0x42, "kgsl_syncsource_create_fence"),
  ("SYNCSOURCE_SIGNAL_FENCE", _RW, 0x43, "kgsl_syncsource_signal_fence"),
  ("CFF_SYNC_GPUOBJ", _W, 0x44, "kgsl_cff_sync_gpuobj"),
  ("GPUOBJ_ALLOC", _RW, 0x45, "kgsl_gpuobj_alloc"),
  ("GPUOBJ_FREE", _W, 0x46, "kgsl_gpuobj_free"),
  ("GPUOBJ_INFO", _RW, 0x47, "kgsl_gpuobj_info"),
  ("GPUOBJ_IMPORT", _RW, 0x48, "kgsl_gpuobj_import"),
  ("GPUOBJ_SYNC", _W, 0x49, "kgsl_gpuobj_sync"),
  ("GPU_COMMAND", _RW, 0x4A, "kgsl_gpu_command"),
  ("PREEMPTIONCOUNTER_QUERY", _RW, 0x4B, "kgsl_preemption_counters_query"),
  ("GPUOBJ_SET_INFO", _W, 0x4C, "kgsl_gpuobj_set_info"),
  ("SPARSE_PHYS_ALLOC", _RW, 0x50, "kgsl_sparse_phys_alloc"),
  ("SPARSE_PHYS_FREE", _W, 0x51, "kgsl_sparse_phys_free"),
  ("SPARSE_VIRT_ALLOC", _RW, 0x52, "kgsl_sparse_virt_alloc"),
  ("SPARSE_VIRT_FREE", _W, 0x53, "kgsl_sparse_virt_free"),
  ("SPARSE_BIND", _W, 0x54, "kgsl_sparse_bind"),
  ("GPU_SPARSE_COMMAND", _RW, 0x55, "kgsl_gpu_sparse_command"),
  ("GPUMEM_BIND_RANGES", _RW, 0x56, "kgsl_gpumem_bind_ranges"),
  ("GPU_AUX_COMMAND", _RW, 0x57, "kgsl_gpu_aux_command"),
  ("TIMELINE_CREATE", _RW, 0x58, "kgsl_timeline_create"),
  ("TIMELINE_WAIT", _W, 0x59, "kgsl_timeline_wait"),
  ("TIMELINE_QUERY", _RW, 0x5A, "kgsl_timeline_val"),
  ("TIMELINE_SIGNAL", _W, 0x5B, "kgsl_timeline_signal"),
  ("TIMELINE_FENCE_GET", _RW, 0x5C, "kgsl_timeline_fence_get"),
  ("TIMELINE_DESTROY", _W, 0x5D, "c_uint32"),
  ("GET_FAULT_REPORT", _RW, 0x5E, "kgsl_fault_report"),
  ("RECURRING_COMMAND", _RW, 0x5F, "kgsl_recurring_command"),
]
c_uint32 = ctypes.c_uint32   # TIMELINE_DESTROY's argument is a bare __u32


def kgsl_ioc(d: int, nr: int, T) -> int: return ioc(d, KGSL_IOC_TYPE, nr, ctypes.sizeof(T))


IOCTL_NUMBERS: dict[str, int] = {n: kgsl_ioc(d, nr, globals()[t]) for n, d, nr, t in _TABLE}
IOCTLS: list[tuple[str, int, int, type]] = [(n, nr, d, globals()[t]) for n, d, nr, t in _TABLE]
IOCTL_BY_NR: dict[int, tuple[str, int, int, type]] = {row[1]: row for row in IOCTLS}
globals().update({f"IOCTL_KGSL_{n}": v for n, v in IOCTL_NUMBERS.items()})
# earlier encodings of the same numbers the header keeps for binary compatibility (dispatch is by _IOC_NR)
_G = globals()
IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_OLD = kgsl_ioc(_R, 0x11, _G["kgsl_cmdstream_readtimestamp"])
IOCTL_KGSL_CMDSTREAM_FREEMEMONTIMESTAMP_OLD = kgsl_ioc(_R, 0x12, _G["kgsl_cmdstream_freememontimestamp"])
IOCTL_KGSL_TIMESTAMP_EVENT_OLD = kgsl_ioc(_W, 0x31, _G["kgsl_timestamp_event"])

# ---- facts of the driver's memory model userspace relies on (kgsl_device.h / kgsl_sharedmem.h, not the UAPI)
KGSL_MEMSTORE_GLOBAL = 0      # context id 0: the device-global memstore slot; contexts count from 1


def KGSL_MEMSTORE_OFFSET(ctxt_id: int, field: str) -> int:
  """Byte offset of `field` of context `ctxt_id`'s kgsl_devmemstore in the memstore (the header's macro)."""
  T = _G["kgsl_devmemstore"]
  return ctxt_id * ctypes.sizeof(T) + getattr(T, field).offset


def KGSL_CONTEXT_PRIORITY(flags: int) -> int:
  return (flags & KGSL_CONTEXT_PRIORITY_MASK) >> KGSL_CONTEXT_PRIORITY_SHIFT


def KGSL_CONTEXT_TYPE(flags: int) -> int: return (flags & KGSL_CONTEXT_TYPE_MASK) >> KGSL_CONTEXT_TYPE_SHIFT
def KGSL_MEMALIGN(flags: int) -> int: return (flags & KGSL_MEMALIGN_MASK) >> KGSL_MEMALIGN_SHIFT
def KGSL_CACHEMODE(flags: int) -> int: return (flags & KGSL_CACHEMODE_MASK) >> KGSL_CACHEMODE_SHIFT


def timestamp_cmp(a: int, b: int) -> int:
  """kgsl's 32-bit timestamp order with wraparound: >0 when a is after b, 0 equal, <0 before."""
  d = (a - b) & 0xFFFFFFFF
  return 0 if d == 0 else (1 if d < 0x80000000 else -1)
