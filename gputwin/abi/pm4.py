"""PM4 type-3 and SDMA packet formats as data: opcodes, register offsets, field positions, and builders.

Facts from ../shared/vendor/kfd/linux-6.12.107 (nvd.h for gfx10-12, soc15d.h for gfx9, kfd_pm4_headers_ai.h for the
RELEASE_MEM ordinals, sdma_v6_0_0_pkt_open.h / vega10_sdma_pkt_open.h for SDMA). The compute SH registers are given as
dword offsets from PACKET3_SET_SH_REG_START (0x2c00): the block starts with COMPUTE_DISPATCH_INITIATOR at 0x200 and
follows the order of the compute registers mirrored in the MQD (v9_structs.h / v11_structs.h, `compute_*` fields):
MQD ordinal n of that block is SH offset 0x200 + n - 1. The same offsets hold on gfx9, gfx11 and gfx12.

Both sides use this module: the command processor (gputwin.mock.amdgpu.gpu) decodes with it and the runtime
(gputwin.runtime.hcq) encodes with it, so a packet has one definition; it imports nothing of gputwin.
"""
from __future__ import annotations

# ---------------------------------------------------------------- PM4 type-3
PACKET3_SET_SH_REG_START = 0x2C00
NOP, INDIRECT_BUFFER, DISPATCH_DIRECT, WRITE_DATA, WAIT_REG_MEM = 0x10, 0x3F, 0x15, 0x37, 0x3C
EVENT_WRITE, RELEASE_MEM, ACQUIRE_MEM, SET_SH_REG, COPY_DATA = 0x46, 0x49, 0x58, 0x76, 0x40
PRED_EXEC = 0x23
PM4_NAMES = {NOP: "NOP", INDIRECT_BUFFER: "INDIRECT_BUFFER", DISPATCH_DIRECT: "DISPATCH_DIRECT",
             WRITE_DATA: "WRITE_DATA", WAIT_REG_MEM: "WAIT_REG_MEM", EVENT_WRITE: "EVENT_WRITE",
             RELEASE_MEM: "RELEASE_MEM", ACQUIRE_MEM: "ACQUIRE_MEM", SET_SH_REG: "SET_SH_REG", COPY_DATA: "COPY_DATA",
             PRED_EXEC: "PRED_EXEC"}

# compute SH registers: name -> dword offset from SET_SH_REG_START (MQD ordinal + 0x1ff)
_MQD_ORDER = ["DISPATCH_INITIATOR", "DIM_X", "DIM_Y", "DIM_Z", "START_X", "START_Y", "START_Z", "NUM_THREAD_X",
              "NUM_THREAD_Y", "NUM_THREAD_Z", "PIPELINESTAT_ENABLE", "PERFCOUNT_ENABLE", "PGM_LO", "PGM_HI",
              "TBA_LO", "TBA_HI", "TMA_LO", "TMA_HI", "PGM_RSRC1", "PGM_RSRC2", "VMID", "RESOURCE_LIMITS",
              "STATIC_THREAD_MGMT_SE0", "STATIC_THREAD_MGMT_SE1", "TMPRING_SIZE"]
REG = {f"COMPUTE_{n}": 0x200 + i for i, n in enumerate(_MQD_ORDER)}
REG["COMPUTE_PGM_RSRC3"] = 0x200 + 41 - 1                                # v11_structs.h: compute_pgm_rsrc3, ordinal 41
REG.update({f"COMPUTE_USER_DATA_{i}": 0x200 + 65 - 1 + i for i in range(16)})   # compute_user_data_0, ordinal 65
REG_NAME = {v: k for k, v in REG.items()}

# COMPUTE_DISPATCH_INITIATOR bits
DISPATCH_COMPUTE_SHADER_EN, DISPATCH_FORCE_START_AT_000, DISPATCH_CS_W32_EN = 1 << 0, 1 << 2, 1 << 15
# RELEASE_MEM / EVENT_WRITE
CACHE_FLUSH_AND_INV_TS_EVENT, BOTTOM_OF_PIPE_TS, CS_PARTIAL_FLUSH = 0x14, 0x28, 0x07
DATA_SEL_NONE, DATA_SEL_32, DATA_SEL_64, DATA_SEL_GPU_CLOCK, DATA_SEL_SYS_CLOCK = 0, 1, 2, 3, 4
INT_SEL_NONE, INT_SEL_INT, INT_SEL_INT_AFTER_WRITE = 0, 1, 2
# WAIT_REG_MEM function (also SDMA POLL_REGMEM): 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >
COMPARE = {0: lambda a, b: True, 1: lambda a, b: a < b, 2: lambda a, b: a <= b, 3: lambda a, b: a == b,
           4: lambda a, b: a != b, 5: lambda a, b: a >= b, 6: lambda a, b: a > b}
WAIT_MEM_SPACE_MEM = 1 << 4
WRITE_DATA_DST_MEM = 5 << 8                                              # memory (async, direct)
IB_VALID = 1 << 23
# COPY_DATA control (nvd.h PACKET3_COPY_DATA 0x40; field values from the pinned tinygrad wheel's autogen/am/pm4_nv.py)
COPY_SRC_MEMORY, COPY_SRC_PERFCOUNTERS, COPY_SRC_IMMEDIATE, COPY_SRC_GPU_CLOCK = 2, 4, 5, 9
COPY_DST_MEMORY, COPY_COUNT_64, COPY_WR_CONFIRM = 5 << 8, 1 << 16, 1 << 20
# SQ performance counter 0 (regSQ_PERFCOUNTER0_LO/HI, the same dword offset in gc 9.4.3, 11.0.0 and 12.0.0: the
# wheel's autogen/am/regs.py); the mock GPU counts SQ_INSTS (wave-instructions) in it
SQ_PERFCOUNTER0_LO = 0x31C0


def header(op: int, body: int) -> int:
  """PACKET3(op, n): type 3 in [31:30], n = body dwords - 1 in [29:16], opcode in [15:8], shader type compute [1]."""
  return (3 << 30) | (((body - 1) & 0x3FFF) << 16) | (op << 8) | (1 << 1)


def pkt(op: int, *body: int) -> list[int]: return [header(op, len(body)), *(b & 0xFFFFFFFF for b in body)]
def lo_hi(v: int) -> tuple[int, int]: return v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF


def set_sh_reg(name: str, *values: int) -> list[int]: return pkt(SET_SH_REG, REG[name], *values)
def dispatch_direct(x: int, y: int, z: int, initiator: int) -> list[int]: return pkt(DISPATCH_DIRECT, x, y, z,
                                                                                     initiator)
def indirect_buffer(va: int, ndw: int) -> list[int]: return pkt(INDIRECT_BUFFER, va & ~3 & 0xFFFFFFFF, va >> 32,
                                                                 IB_VALID | ndw)
def acquire_mem() -> list[int]: return pkt(ACQUIRE_MEM, 0, 0xFFFFFFFF, 0xFF, 0, 0, 10, 0x3FF)   # all VA, all caches
def event_write(event: int, index: int = 4) -> list[int]: return pkt(EVENT_WRITE, event | (index << 8))
def copy_data(src_sel: int, src: int, va: int) -> list[int]:
  """64 bits from `src` (a register offset, a memory address or immediate data per `src_sel`) to memory at va."""
  return pkt(COPY_DATA, src_sel | COPY_DST_MEMORY | COPY_COUNT_64 | COPY_WR_CONFIRM, *lo_hi(src), *lo_hi(va))


def write_data(va: int, *dwords: int) -> list[int]: return pkt(WRITE_DATA, WRITE_DATA_DST_MEM, *lo_hi(va), *dwords)


def release_mem(va: int, data: int = 0, data_sel: int = DATA_SEL_64, int_sel: int = INT_SEL_NONE,
                ctxid: int = 0) -> list[int]:
  """End-of-pipe write (after all prior dispatches) of data / a GPU clock to va, optionally followed by an interrupt
  carrying ctxid (KFD's event id: the interrupt handler signals that event)."""
  return pkt(RELEASE_MEM, CACHE_FLUSH_AND_INV_TS_EVENT | (5 << 8), (data_sel << 29) | (int_sel << 24),
             *lo_hi(va), *lo_hi(data), ctxid)


def wait_reg_mem(va: int, ref: int, mask: int = 0xFFFFFFFF, func: int = 5, interval: int = 4) -> list[int]:
  return pkt(WAIT_REG_MEM, WAIT_MEM_SPACE_MEM | func, va & 0xFFFFFFFC, va >> 32, ref, mask, interval)


def pred_exec(xcc_mask: int, ndw: int) -> list[int]:
  """Run the next ndw dwords only on the XCCs in xcc_mask (DEVICE_SELECT [31:24], EXEC_COUNT [13:0])."""
  return pkt(PRED_EXEC, (xcc_mask << 24) | ndw)


def nop(n: int = 1) -> list[int]:
  """n dwords of padding (a NOP packet of n dwords; n == 1 is a header with count 0x3FFF, i.e. no body)."""
  return [0xFFFF1000] if n == 1 else pkt(NOP, *[0] * (n - 1))


# ---------------------------------------------------------------- SDMA (4.x, 5.x, 6.x, 7.x share these packets)
SDMA_OP_NOP, SDMA_OP_COPY, SDMA_OP_FENCE, SDMA_OP_TRAP, SDMA_OP_POLL_REGMEM = 0, 1, 5, 6, 8
SDMA_OP_CONST_FILL, SDMA_OP_TIMESTAMP = 11, 13
SDMA_SUBOP_COPY_LINEAR, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = 0, 2
SDMA_NAMES = {SDMA_OP_NOP: "NOP", SDMA_OP_COPY: "COPY_LINEAR", SDMA_OP_FENCE: "FENCE", SDMA_OP_TRAP: "TRAP",
              SDMA_OP_POLL_REGMEM: "POLL_REGMEM", SDMA_OP_CONST_FILL: "CONSTANT_FILL", SDMA_OP_TIMESTAMP: "TIMESTAMP"}
# body dwords after the header (the SDMA header carries no length)
SDMA_SIZE = {SDMA_OP_NOP: 0, SDMA_OP_COPY: 6, SDMA_OP_FENCE: 3, SDMA_OP_TRAP: 1, SDMA_OP_POLL_REGMEM: 5,
             SDMA_OP_CONST_FILL: 4, SDMA_OP_TIMESTAMP: 2}


def sdma_copy_max(arch: str) -> int:
  """Bytes one COPY_LINEAR moves: the COUNT field is bytes - 1, 22 bits on SDMA 4.x (gfx9), 30 bits on 5.x+."""
  return 1 << (22 if arch.startswith("gfx9") else 30)


def sdma_hdr(op: int, sub: int = 0, extra: int = 0) -> int: return op | (sub << 8) | (extra << 16)
def sdma_copy(dst: int, src: int, n: int) -> list[int]:
  return [sdma_hdr(SDMA_OP_COPY, SDMA_SUBOP_COPY_LINEAR), n - 1, 0, *lo_hi(src), *lo_hi(dst)]
def sdma_fence(va: int, data: int) -> list[int]: return [sdma_hdr(SDMA_OP_FENCE), *lo_hi(va), data & 0xFFFFFFFF]
def sdma_trap(ctx: int) -> list[int]: return [sdma_hdr(SDMA_OP_TRAP), ctx & 0x0FFFFFFF]
def sdma_timestamp(va: int) -> list[int]:
  return [sdma_hdr(SDMA_OP_TIMESTAMP, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL), *lo_hi(va)]
def sdma_fill(dst: int, value: int, n: int) -> list[int]:
  return [sdma_hdr(SDMA_OP_CONST_FILL, 0, 2 << 14), *lo_hi(dst), value & 0xFFFFFFFF, n - 1]   # fillsize 2: dwords
def sdma_poll(va: int, ref: int, mask: int = 0xFFFFFFFF, func: int = 5, interval: int = 10, retry: int = 0xFFF):
  return [sdma_hdr(SDMA_OP_POLL_REGMEM, 0, (func << 12) | (1 << 15)), *lo_hi(va), ref, mask, interval | (retry << 16)]
