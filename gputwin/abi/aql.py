"""AQL (HSA Architected Queuing Language) queues as AMD's command processor reads them: 64-byte packets in a ring,
the `amd_queue_t` the queue's read/write dispatch ids live in, and the `amd_signal_t` a completion signal points at.

Facts from the HSA runtime headers as the pinned tinygrad wheel carries them (tinygrad/runtime/autogen/hsa.py:
hsa_kernel_dispatch_packet_t, hsa_barrier_and_packet_t, amd_queue_t, amd_signal_t, hsa_packet_type_t, the header bit
positions) and ROCr's amd_aql_pm4_ib_packet.h (the vendor-specific packet carrying a PM4 INDIRECT_BUFFER). Offsets are
bytes from the start of the struct. Packets are little-endian; the header is the low 16 bits of dword 0.

Both sides use this module (builders for clients and tests, offsets for the mock CP); it imports nothing of gputwin.
"""
from __future__ import annotations
import struct

PACKET_SIZE = 64
# hsa_packet_type_t (header bits 7:0)
VENDOR_SPECIFIC, INVALID, KERNEL_DISPATCH, BARRIER_AND, AGENT_DISPATCH, BARRIER_OR = range(6)
TYPE_NAMES = {VENDOR_SPECIFIC: "VENDOR_SPECIFIC", INVALID: "INVALID", KERNEL_DISPATCH: "KERNEL_DISPATCH",
              BARRIER_AND: "BARRIER_AND", AGENT_DISPATCH: "AGENT_DISPATCH", BARRIER_OR: "BARRIER_OR"}
# hsa_packet_header_t bit positions; hsa_fence_scope_t
HEADER_BARRIER, HEADER_ACQUIRE_FENCE_SCOPE, HEADER_RELEASE_FENCE_SCOPE = 8, 9, 11
FENCE_SCOPE_NONE, FENCE_SCOPE_AGENT, FENCE_SCOPE_SYSTEM = 0, 1, 2
SYSTEM_HEADER = (1 << HEADER_BARRIER) | (FENCE_SCOPE_SYSTEM << HEADER_ACQUIRE_FENCE_SCOPE) | \
                (FENCE_SCOPE_SYSTEM << HEADER_RELEASE_FENCE_SCOPE)   # barrier + system-scope fences, as clients send

# hsa_kernel_dispatch_packet_t: header, setup (bits 1:0 dimensions), workgroup_size_x/y/z, reserved0,
# grid_size_x/y/z (work-items), private_segment_size, group_segment_size (bytes per work-item / workgroup),
# kernel_object (the kernel descriptor's address), kernarg_address, reserved2, completion_signal
DISPATCH = struct.Struct("<HHHHHHIIIIIQQQQ")
DISPATCH_FIELDS = ("header setup workgroup_size_x workgroup_size_y workgroup_size_z reserved0 grid_size_x grid_size_y "
                   "grid_size_z private_segment_size group_segment_size kernel_object kernarg_address reserved2 "
                   "completion_signal").split()
# hsa_barrier_and_packet_t / hsa_barrier_or_packet_t: header, reserved0 (16), reserved1 (32), dep_signal[5] at 8,
# reserved2 (64), completion_signal at 56
BARRIER_DEP_SIGNALS, BARRIER_DEPS = 8, 5
COMPLETION_SIGNAL = 56   # the same offset in every packet type
# amd_aql_pm4_ib_packet_t (ROCr): header, pm4_ib_format (AMD_AQL_FORMAT_PM4_IB) in the high half of dword 0, a PM4
# INDIRECT_BUFFER command in dwords 1-4, dw_count_remain (10: the reserved dwords and the signal after it) in dword 5
AMD_AQL_FORMAT_PM4_IB, PM4_IB_DW_COUNT_REMAIN = 1, 10

# amd_signal_t
SIGNAL_KIND, SIGNAL_VALUE, SIGNAL_EVENT_MAILBOX_PTR, SIGNAL_EVENT_ID = 0, 8, 16, 24
SIGNAL_START_TS, SIGNAL_END_TS = 32, 40
AMD_SIGNAL_KIND_USER = 1
# amd_queue_t (256 bytes): hsa_queue_t at 0, then AMD's fields
QUEUE_WRITE_DISPATCH_ID, QUEUE_READ_DISPATCH_ID, QUEUE_READ_DISPATCH_ID_FIELD_BASE_BYTE_OFFSET = 56, 128, 136
QUEUE_COMPUTE_TMPRING_SIZE, QUEUE_SCRATCH_RESOURCE_DESCRIPTOR, QUEUE_SCRATCH_BACKING_MEMORY_LOCATION = 140, 144, 160
QUEUE_SCRATCH_WAVE64_LANE_BYTE_SIZE, QUEUE_PROPERTIES, AMD_QUEUE_SIZE = 176, 180, 256
AMD_QUEUE_PROPERTIES_IS_PTR64, AMD_QUEUE_PROPERTIES_ENABLE_PROFILING = 1 << 1, 1 << 3


def header(typ: int, barrier: bool = True, acquire: int = FENCE_SCOPE_SYSTEM, release: int = FENCE_SCOPE_SYSTEM) -> int:
  return typ | (int(barrier) << HEADER_BARRIER) | (acquire << HEADER_ACQUIRE_FENCE_SCOPE) | \
         (release << HEADER_RELEASE_FENCE_SCOPE)


def dispatch_packet(kernel_object: int, kernarg_address: int, grid: tuple[int, int, int],
                    workgroup: tuple[int, int, int], private_segment_size: int = 0, group_segment_size: int = 0,
                    completion_signal: int = 0, hdr: int | None = None, dims: int = 3) -> bytes:
  """A kernel dispatch packet; `grid` counts work-items (HSA), not workgroups."""
  return DISPATCH.pack(header(KERNEL_DISPATCH) if hdr is None else hdr, dims, *workgroup, 0, *grid,
                       private_segment_size, group_segment_size, kernel_object, kernarg_address, 0, completion_signal)


def pm4_ib_packet(ib: list[int], completion_signal: int = 0, hdr: int | None = None) -> bytes:
  """AMD's vendor-specific packet running a PM4 indirect buffer: `ib` is the 4-dword INDIRECT_BUFFER command."""
  assert len(ib) == 4, "the PM4_IB packet carries exactly one INDIRECT_BUFFER command (4 dwords)"
  first = (header(VENDOR_SPECIFIC) if hdr is None else hdr) | (AMD_AQL_FORMAT_PM4_IB << 16)
  return struct.pack("<6I8IQ", first, *ib, PM4_IB_DW_COUNT_REMAIN, *[0] * 8, completion_signal)


def barrier_packet(deps: list[int], completion_signal: int = 0, typ: int = BARRIER_AND) -> bytes:
  """A BARRIER_AND / BARRIER_OR packet waiting on up to 5 signals (amd_signal_t addresses; 0: no signal)."""
  assert len(deps) <= BARRIER_DEPS
  return struct.pack("<HHI5QQQ", header(typ), 0, 0, *deps, *[0] * (BARRIER_DEPS - len(deps)), 0, completion_signal)
