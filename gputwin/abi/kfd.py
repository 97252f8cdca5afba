"""/dev/kfd ABI, KFD ioctl API 1.17 (Linux 6.12): argument structs, ioctl numbers and flag values.

Written from the facts of include/uapi/linux/kfd_ioctl.h (see ../shared/vendor/kfd/); every struct is declared as a
one-line field spec, `"u64 a b; u32 c d"`, read left to right exactly as the C struct lays out (natural alignment, as
x86-64 gcc does). Ioctl numbers are computed with the asm-generic _IOC encoding, like the header's AMDKFD_IOWR(nr, T).
Both the real driver seam (gputwin.runtime.kernel.OSKernel) and the mock (driver.py) use these same definitions.
"""
from __future__ import annotations
import ctypes
from gputwin.abi.ioc import (IOC_DIR, IOC_NONE, IOC_NR, IOC_READ, IOC_SIZE, IOC_TYPE, IOC_WRITE,  # noqa: F401
                             declarer, ioc)

def _IOR(t, nr, T): return ioc(IOC_READ, t, nr, ctypes.sizeof(T))
def _IOW(t, nr, T): return ioc(IOC_WRITE, t, nr, ctypes.sizeof(T))
def _IOWR(t, nr, T): return ioc(IOC_READ | IOC_WRITE, t, nr, ctypes.sizeof(T))

KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION = 1, 17
AMDKFD_IOCTL_BASE = ord("K")

# ---- struct declarations (gputwin.abi.ioc specs)
struct = declarer(globals())
S = struct
S("kfd_ioctl_get_version_args", "u32 major_version minor_version")
S("kfd_ioctl_create_queue_args", "u64 ring_base_address write_pointer_address read_pointer_address doorbell_offset;"
  "u32 ring_size gpu_id queue_type queue_percentage queue_priority queue_id;"
  "u64 eop_buffer_address eop_buffer_size ctx_save_restore_address;"
  "u32 ctx_save_restore_size ctl_stack_size sdma_engine_id pad")
S("kfd_ioctl_destroy_queue_args", "u32 queue_id pad")
S("kfd_ioctl_update_queue_args", "u64 ring_base_address; u32 queue_id ring_size queue_percentage queue_priority")
S("kfd_ioctl_set_cu_mask_args", "u32 queue_id num_cu_mask; u64 cu_mask_ptr")
S("kfd_ioctl_get_queue_wave_state_args",
  "u64 ctl_stack_address; u32 ctl_stack_used_size save_area_used_size queue_id pad")
S("kfd_ioctl_get_available_memory_args", "u64 available; u32 gpu_id pad")
S("kfd_dbg_device_info_entry",
  "u64 exception_status lds_base lds_limit scratch_base scratch_limit gpuvm_base gpuvm_limit;"
  "u32 gpu_id location_id vendor_id device_id revision_id subsystem_vendor_id subsystem_device_id fw_version"
  " gfx_target_version simd_count max_waves_per_simd array_count simd_arrays_per_engine num_xcc capability debug_prop")
S("kfd_ioctl_set_memory_policy_args", "u64 alternate_aperture_base alternate_aperture_size;"
  "u32 gpu_id default_policy alternate_policy pad")
S("kfd_ioctl_get_clock_counters_args", "u64 gpu_clock_counter cpu_clock_counter system_clock_counter system_clock_freq;"
  "u32 gpu_id pad")
S("kfd_process_device_apertures",
  "u64 lds_base lds_limit scratch_base scratch_limit gpuvm_base gpuvm_limit; u32 gpu_id pad")
NUM_OF_SUPPORTED_GPUS = 7
S("kfd_ioctl_get_process_apertures_args", f"kfd_process_device_apertures process_apertures[{NUM_OF_SUPPORTED_GPUS}];"
  "u32 num_of_nodes pad")
S("kfd_ioctl_get_process_apertures_new_args", "u64 kfd_process_device_apertures_ptr; u32 num_of_nodes pad")
S("kfd_ioctl_dbg_register_args", "u32 gpu_id pad")
S("kfd_ioctl_dbg_unregister_args", "u32 gpu_id pad")
S("kfd_ioctl_dbg_address_watch_args", "u64 content_ptr; u32 gpu_id buf_size_in_bytes")
S("kfd_ioctl_dbg_wave_control_args", "u64 content_ptr; u32 gpu_id buf_size_in_bytes")
S("kfd_ioctl_create_event_args", "u64 event_page_offset;"
  "u32 event_trigger_data event_type auto_reset node_id event_id event_slot_index")
S("kfd_ioctl_destroy_event_args", "u32 event_id pad")
S("kfd_ioctl_set_event_args", "u32 event_id pad")
S("kfd_ioctl_reset_event_args", "u32 event_id pad")
S("kfd_memory_exception_failure", "u32 NotPresent ReadOnly NoExecute imprecise")
S("kfd_hsa_memory_exception_data", "kfd_memory_exception_failure failure; u64 va; u32 gpu_id ErrorType")
S("kfd_hsa_hw_exception_data", "u32 reset_type reset_cause memory_lost gpu_id")
S("kfd_hsa_signal_event_data", "u64 last_event_age")
S("_kfd_event_data_u",
  "kfd_hsa_memory_exception_data memory_exception_data; kfd_hsa_hw_exception_data hw_exception_data;"
  "kfd_hsa_signal_event_data signal_event_data", union=True)
S("kfd_event_data", "_kfd_event_data_u u; u64 kfd_event_data_ext; u32 event_id pad", anon=("u",))
S("kfd_ioctl_wait_events_args", "u64 events_ptr; u32 num_events wait_for_all timeout wait_result")
S("kfd_ioctl_set_scratch_backing_va_args", "u64 va_addr; u32 gpu_id pad")
S("kfd_ioctl_get_tile_config_args", "u64 tile_config_ptr macro_tile_config_ptr;"
  "u32 num_tile_configs num_macro_tile_configs gpu_id gb_addr_config num_banks num_ranks")
S("kfd_ioctl_set_trap_handler_args", "u64 tba_addr tma_addr; u32 gpu_id pad")
S("kfd_ioctl_acquire_vm_args", "u32 drm_fd gpu_id")
S("kfd_ioctl_alloc_memory_of_gpu_args", "u64 va_addr size handle mmap_offset; u32 gpu_id flags")
S("kfd_ioctl_free_memory_of_gpu_args", "u64 handle")
S("kfd_ioctl_map_memory_to_gpu_args", "u64 handle device_ids_array_ptr; u32 n_devices n_success")
S("kfd_ioctl_unmap_memory_from_gpu_args", "u64 handle device_ids_array_ptr; u32 n_devices n_success")
S("kfd_ioctl_alloc_queue_gws_args", "u32 queue_id num_gws first_gws pad")
S("kfd_ioctl_get_dmabuf_info_args", "u64 size metadata_ptr; u32 metadata_size gpu_id flags dmabuf_fd")
S("kfd_ioctl_import_dmabuf_args", "u64 va_addr handle; u32 gpu_id dmabuf_fd")
S("kfd_ioctl_export_dmabuf_args", "u64 handle; u32 flags dmabuf_fd")
S("kfd_ioctl_smi_events_args", "u32 gpuid anon_fd")
S("kfd_ioctl_criu_args", "u64 devices bos priv_data priv_data_size; u32 num_devices num_bos num_objects pid op")
S("kfd_criu_device_bucket", "u32 user_gpu_id actual_gpu_id drm_fd pad")
S("kfd_criu_bo_bucket", "u64 addr size offset restored_offset; u32 gpu_id alloc_flags dmabuf_fd pad")
S("kfd_ioctl_svm_attribute", "u32 type value")
S("kfd_ioctl_svm_args", "u64 start_addr size; u32 op nattr")  # followed by nattr kfd_ioctl_svm_attribute (flexible)
S("kfd_ioctl_set_xnack_mode_args", "s32 xnack_enabled")
S("kfd_runtime_info", "u64 r_debug; u32 runtime_state ttmp_setup")
S("kfd_ioctl_runtime_enable_args", "u64 r_debug; u32 mode_mask capabilities_mask")
S("kfd_queue_snapshot_entry", "u64 exception_status ring_base_address write_pointer_address read_pointer_address"
  " ctx_save_restore_address; u32 queue_id gpu_id ring_size queue_type ctx_save_restore_area_size reserved")
S("kfd_ioctl_dbg_trap_enable_args", "u64 exception_mask rinfo_ptr; u32 rinfo_size dbg_fd")
S("kfd_ioctl_dbg_trap_send_runtime_event_args", "u64 exception_mask; u32 gpu_id queue_id")
S("kfd_ioctl_dbg_trap_set_exceptions_enabled_args", "u64 exception_mask")
S("kfd_ioctl_dbg_trap_set_wave_launch_override_args", "u32 override_mode enable_mask support_request_mask pad")
S("kfd_ioctl_dbg_trap_set_wave_launch_mode_args", "u32 launch_mode pad")
S("kfd_ioctl_dbg_trap_suspend_queues_args", "u64 exception_mask queue_array_ptr; u32 num_queues grace_period")
S("kfd_ioctl_dbg_trap_resume_queues_args", "u64 queue_array_ptr; u32 num_queues pad")
S("kfd_ioctl_dbg_trap_set_node_address_watch_args", "u64 address; u32 mode mask gpu_id id")
S("kfd_ioctl_dbg_trap_clear_node_address_watch_args", "u32 gpu_id id")
S("kfd_ioctl_dbg_trap_set_flags_args", "u32 flags pad")
S("kfd_ioctl_dbg_trap_query_debug_event_args", "u64 exception_mask; u32 gpu_id queue_id")
S("kfd_ioctl_dbg_trap_query_exception_info_args",
  "u64 info_ptr; u32 info_size source_id exception_code clear_exception")
S("kfd_ioctl_dbg_trap_queue_snapshot_args", "u64 exception_mask snapshot_buf_ptr; u32 num_queues entry_size")
S("kfd_ioctl_dbg_trap_device_snapshot_args", "u64 exception_mask snapshot_buf_ptr; u32 num_devices entry_size")
S("_kfd_ioctl_dbg_trap_u", "kfd_ioctl_dbg_trap_enable_args enable;"
  "kfd_ioctl_dbg_trap_send_runtime_event_args send_runtime_event;"
  "kfd_ioctl_dbg_trap_set_exceptions_enabled_args set_exceptions_enabled;"
  "kfd_ioctl_dbg_trap_set_wave_launch_override_args launch_override;"
  "kfd_ioctl_dbg_trap_set_wave_launch_mode_args launch_mode; kfd_ioctl_dbg_trap_suspend_queues_args suspend_queues;"
  "kfd_ioctl_dbg_trap_resume_queues_args resume_queues;"
  "kfd_ioctl_dbg_trap_set_node_address_watch_args set_node_address_watch;"
  "kfd_ioctl_dbg_trap_clear_node_address_watch_args clear_node_address_watch;"
  "kfd_ioctl_dbg_trap_set_flags_args set_flags; kfd_ioctl_dbg_trap_query_debug_event_args query_debug_event;"
  "kfd_ioctl_dbg_trap_query_exception_info_args query_exception_info;"
  "kfd_ioctl_dbg_trap_queue_snapshot_args queue_snapshot; kfd_ioctl_dbg_trap_device_snapshot_args device_snapshot",
  union=True)
S("kfd_ioctl_dbg_trap_args", "u32 pid op; _kfd_ioctl_dbg_trap_u u", anon=("u",))

# ---- the ioctls as the header defines them: AMDKFD_IOC_<name> = AMDKFD_IOR/IOW/IOWR(nr, struct <args>)
_TABLE = [
  ("GET_VERSION", _IOR, 0x01, "kfd_ioctl_get_version_args"),
  ("CREATE_QUEUE", _IOWR, 0x02, "kfd_ioctl_create_queue_args"),
  ("DESTROY_QUEUE", _IOWR, 0x03, "kfd_ioctl_destroy_queue_args"),
  ("SET_MEMORY_POLICY", _IOW, 0x04, "kfd_ioctl_set_memory_policy_args"),
  ("GET_CLOCK_COUNTERS", _IOWR, 0x05, "kfd_ioctl_get_clock_counters_args"),
  ("GET_PROCESS_APERTURES", _IOR, 0x06, "kfd_ioctl_get_process_apertures_args"),
  ("UPDATE_QUEUE", _IOW, 0x07, "kfd_ioctl_update_queue_args"),
  ("CREATE_EVENT", _IOWR, 0x08, "kfd_ioctl_create_event_args"),
  ("DESTROY_EVENT", _IOW, 0x09, "kfd_ioctl_destroy_event_args"),
  ("SET_EVENT", _IOW, 0x0A, "kfd_ioctl_set_event_args"),
  ("RESET_EVENT", _IOW, 0x0B, "kfd_ioctl_reset_event_args"),
  ("WAIT_EVENTS", _IOWR, 0x0C, "kfd_ioctl_wait_events_args"),
  ("DBG_REGISTER_DEPRECATED", _IOW, 0x0D, "kfd_ioctl_dbg_register_args"),
  ("DBG_UNREGISTER_DEPRECATED", _IOW, 0x0E, "kfd_ioctl_dbg_unregister_args"),
  ("DBG_ADDRESS_WATCH_DEPRECATED", _IOW, 0x0F, "kfd_ioctl_dbg_address_watch_args"),
  ("DBG_WAVE_CONTROL_DEPRECATED", _IOW, 0x10, "kfd_ioctl_dbg_wave_control_args"),
  ("SET_SCRATCH_BACKING_VA", _IOWR, 0x11, "kfd_ioctl_set_scratch_backing_va_args"),
  ("GET_TILE_CONFIG", _IOWR, 0x12, "kfd_ioctl_get_tile_config_args"),
  ("SET_TRAP_HANDLER", _IOW, 0x13, "kfd_ioctl_set_trap_handler_args"),
  ("GET_PROCESS_APERTURES_NEW", _IOWR, 0x14, "kfd_ioctl_get_process_apertures_new_args"),
  ("ACQUIRE_VM", _IOW, 0x15, "kfd_ioctl_acquire_vm_args"),
  ("ALLOC_MEMORY_OF_GPU", _IOWR, 0x16, "kfd_ioctl_alloc_memory_of_gpu_args"),
  ("FREE_MEMORY_OF_GPU", _IOW, 0x17, "kfd_ioctl_free_memory_of_gpu_args"),
  ("MAP_MEMORY_TO_GPU", _IOWR, 0x18, "kfd_ioctl_map_memory_to_gpu_args"),
  ("UNMAP_MEMORY_FROM_GPU", _IOWR, 0x19, "kfd_ioctl_unmap_memory_from_gpu_args"),
  ("SET_CU_MASK", _IOW, 0x1A, "kfd_ioctl_set_cu_mask_args"),
  ("GET_QUEUE_WAVE_STATE", _IOWR, 0x1B, "kfd_ioctl_get_queue_wave_state_args"),
  ("GET_DMABUF_INFO", _IOWR, 0x1C, "kfd_ioctl_get_dmabuf_info_args"),
  ("IMPORT_DMABUF", _IOWR, 0x1D, "kfd_ioctl_import_dmabuf_args"),
  ("ALLOC_QUEUE_GWS", _IOWR, 0x1E, "kfd_ioctl_alloc_queue_gws_args"),
  ("SMI_EVENTS", _IOWR, 0x1F, "kfd_ioctl_smi_events_args"),
  ("SVM", _IOWR, 0x20, "kfd_ioctl_svm_args"),
  ("SET_XNACK_MODE", _IOWR, 0x21, "kfd_ioctl_set_xnack_mode_args"),
  ("CRIU_OP", _IOWR, 0x22, "kfd_ioctl_criu_args"),
  ("AVAILABLE_MEMORY", _IOWR, 0x23, "kfd_ioctl_get_available_memory_args"),
  ("EXPORT_DMABUF", _IOWR, 0x24, "kfd_ioctl_export_dmabuf_args"),
  ("RUNTIME_ENABLE", _IOWR, 0x25, "kfd_ioctl_runtime_enable_args"),
  ("DBG_TRAP", _IOWR, 0x26, "kfd_ioctl_dbg_trap_args"),
]
AMDKFD_COMMAND_START, AMDKFD_COMMAND_END = 0x01, 0x27
IOCTL_NUMBERS: dict[str, int] = {n: io(AMDKFD_IOCTL_BASE, nr, globals()[t]) for n, io, nr, t in _TABLE}
IOCTLS: list[tuple[str, int, int, type]] = [(n, nr, IOC_DIR(IOCTL_NUMBERS[n]), globals()[t]) for n, _, nr, t in _TABLE]
IOCTL_BY_NR: dict[int, tuple[str, int, int, type]] = {row[1]: row for row in IOCTLS}
globals().update({f"AMDKFD_IOC_{n}": v for n, v in IOCTL_NUMBERS.items()})

# ---- values carried in the structs
KFD_IOC_QUEUE_TYPE_COMPUTE, KFD_IOC_QUEUE_TYPE_SDMA, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL = 0, 1, 2
KFD_IOC_QUEUE_TYPE_SDMA_XGMI, KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID = 3, 4
KFD_MAX_QUEUE_PERCENTAGE, KFD_MAX_QUEUE_PRIORITY, KFD_MIN_QUEUE_RING_SIZE = 100, 15, 1024
KFD_IOC_CACHE_POLICY_COHERENT, KFD_IOC_CACHE_POLICY_NONCOHERENT = 0, 1
KFD_INVALID_FD = 0xFFFFFFFF

(KFD_IOC_EVENT_SIGNAL, KFD_IOC_EVENT_NODECHANGE, KFD_IOC_EVENT_DEVICESTATECHANGE, KFD_IOC_EVENT_HW_EXCEPTION,
 KFD_IOC_EVENT_SYSTEM_EVENT, KFD_IOC_EVENT_DEBUG_EVENT, KFD_IOC_EVENT_PROFILE_EVENT, KFD_IOC_EVENT_QUEUE_EVENT,
 KFD_IOC_EVENT_MEMORY) = range(9)
KFD_IOC_WAIT_RESULT_COMPLETE, KFD_IOC_WAIT_RESULT_TIMEOUT, KFD_IOC_WAIT_RESULT_FAIL = 0, 1, 2
KFD_SIGNAL_EVENT_LIMIT = 4096
KFD_HW_EXCEPTION_WHOLE_GPU_RESET, KFD_HW_EXCEPTION_PER_ENGINE_RESET = 0, 1
KFD_HW_EXCEPTION_GPU_HANG, KFD_HW_EXCEPTION_ECC = 0, 1
KFD_MEM_ERR_NO_RAS, KFD_MEM_ERR_SRAM_ECC, KFD_MEM_ERR_POISON_CONSUMED, KFD_MEM_ERR_GPU_HANG = 0, 1, 2, 3

KFD_IOC_ALLOC_MEM_FLAGS_VRAM = 1 << 0
KFD_IOC_ALLOC_MEM_FLAGS_GTT = 1 << 1
KFD_IOC_ALLOC_MEM_FLAGS_USERPTR = 1 << 2
KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL = 1 << 3
KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP = 1 << 4
KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE = 1 << 31
KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE = 1 << 30
KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC = 1 << 29
KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE = 1 << 28
KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM = 1 << 27
KFD_IOC_ALLOC_MEM_FLAGS_COHERENT = 1 << 26
KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED = 1 << 25
KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT = 1 << 24
KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS = 1 << 23
KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL, KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL = 0, 4

KFD_IOC_DBG_TRAP_ENABLE, KFD_IOC_DBG_TRAP_DISABLE = 0, 1
KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK = 1, 2

# ---- kernel-internal encodings userspace relies on (kfd_priv.h; not in the UAPI header but part of the contract):
# /dev/kfd mmap offsets carry a type in bits 63:62 and the gpu_id in bits 61:46; memory handles are gpu_id << 32 | idr.
KFD_GPU_ID_HASH_WIDTH = 16
KFD_MMAP_TYPE_SHIFT = 62
KFD_MMAP_TYPE_MASK = 0x3 << KFD_MMAP_TYPE_SHIFT
KFD_MMAP_TYPE_DOORBELL, KFD_MMAP_TYPE_EVENTS = 0x3 << KFD_MMAP_TYPE_SHIFT, 0x2 << KFD_MMAP_TYPE_SHIFT
KFD_MMAP_TYPE_RESERVED_MEM, KFD_MMAP_TYPE_MMIO = 0x1 << KFD_MMAP_TYPE_SHIFT, 0x0
KFD_MMAP_GPU_ID_SHIFT = 46
KFD_MMAP_GPU_ID_MASK = ((1 << KFD_GPU_ID_HASH_WIDTH) - 1) << KFD_MMAP_GPU_ID_SHIFT
def KFD_MMAP_GPU_ID(gpu_id: int) -> int: return (gpu_id << KFD_MMAP_GPU_ID_SHIFT) & KFD_MMAP_GPU_ID_MASK
def KFD_MMAP_GET_GPU_ID(offset: int) -> int: return (offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT
def MAKE_HANDLE(gpu_id: int, idr: int) -> int: return (gpu_id << 32) + idr
def GET_GPU_ID(handle: int) -> int: return handle >> 32
def GET_IDR_HANDLE(handle: int) -> int: return handle & 0xFFFFFFFF
KFD_MAX_NUM_OF_QUEUES_PER_PROCESS = 1024
KFD_EVENT_TIMEOUT_IMMEDIATE, KFD_EVENT_TIMEOUT_INFINITE = 0, 0xFFFFFFFF
KFD_FIRST_NONSIGNAL_EVENT_ID = 0x80000000   # non-signal events get ids from here (kfd_events.c)
UNSIGNALED_EVENT_SLOT = 0xFFFFFFFFFFFFFFFF  # value of an idle slot in the signal-event page

# gfx9+ process apertures (kfd_flat_memory.c): LDS and scratch live in the VA hole, selected by address bits 63:48.
LDS_APP_BASE_V9, SCRATCH_APP_BASE_V9 = 0x1 << 48, 0x2 << 48
def APP_APERTURE_LIMIT(base: int) -> int: return (base & 0xFFFFFFFF00000000) | 0xFFFFFFFF
GPUVM_BASE = 1 << 16                 # AMDGPU_VA_RESERVED_BOTTOM
GPUVM_SIZE = 0x0000800000000000      # 47-bit user VA: min(max_pfn << 12, AMDGPU_GMC_HOLE_START)
