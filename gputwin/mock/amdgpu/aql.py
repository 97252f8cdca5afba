"""An AQL kernel dispatch packet as the CP's firmware turns it into a dispatch: registers for `run_dispatch`.

The packet names a kernel descriptor (kernel_object) instead of registers. The CP reads it and programs what a PM4
client would: COMPUTE_PGM_LO/HI (kernel_object + kernel_code_entry_byte_offset), RSRC1/2/3 from the descriptor with
RSRC2.LDS_SIZE from the packet's group_segment_size, the workgroup size, COMPUTE_TMPRING_SIZE from the queue's
`amd_queue_t`, wave32 from the descriptor, and the user SGPRs the descriptor enables in ABI order (private segment
buffer = amd_queue_t.scratch_resource_descriptor, dispatch ptr = the packet, queue ptr = the amd_queue_t, kernarg
segment ptr, dispatch id = the packet index, flat scratch init, private segment size) followed by preloaded
kernargs. The grid counts work-items; it becomes workgroups here, rounded up: a grid that is not a multiple of the
workgroup size (HSA allows it) ends in a partial workgroup along that dimension, which the CP programs as
COMPUTE_NUM_THREAD_*.NUM_THREAD_PARTIAL with COMPUTE_DISPATCH_INITIATOR.PARTIAL_TG_EN (dispatch.run_dispatch).

The amd_queue_t is found the way the CP finds it: the queue's read pointer is amd_queue_t.read_dispatch_id and the
dword after it (read_dispatch_id_field_base_byte_offset) says how far that field lies from the struct's start.
"""
from __future__ import annotations
import struct
from gputwin.abi import aql as A
from gputwin.abi import pm4 as P
from gputwin.emu.amd.abi import user_sgprs
from gputwin.errors import LaunchError
from gputwin.isa.kd import KD_SIZE, KernelDescriptor
from gputwin.isa.targets import target
from gputwin.mock.amdgpu.dispatch import LDS_GRANULE, PARTIAL_TG_EN, SCRATCH_GRANULE


def queue_base(vm, rptr_va: int) -> int:
  """The amd_queue_t whose read_dispatch_id is at rptr_va."""
  return rptr_va - vm.read_u32(rptr_va + A.QUEUE_READ_DISPATCH_ID_FIELD_BASE_BYTE_OFFSET - A.QUEUE_READ_DISPATCH_ID)


def dispatch_registers(vm, arch: str, lds_limit: int, raw: bytes, packet_va: int, index: int,
                       queue: int) -> tuple[dict, tuple[int, int, int]]:
  """(registers, grid in workgroups) for the kernel dispatch packet `raw` (64 bytes at packet_va, packet number
  `index`). LaunchError for a packet no dispatch can be made of; GPUPageFault when the descriptor, the queue or the
  kernargs are not mapped."""
  p = dict(zip(A.DISPATCH_FIELDS, A.DISPATCH.unpack(raw)))
  bad = lambda why: LaunchError(f"[{arch}] kernel dispatch packet {index}: {why}", arch)
  dims = p["setup"] & 3
  wg = tuple(p[f"workgroup_size_{d}"] for d in "xyz")
  grid = tuple(p[f"grid_size_{d}"] for d in "xyz")
  if not dims: raise bad("setup.dimensions is 0 (1 to 3)")
  if 0 in wg: raise bad(f"workgroup size {wg[0]}x{wg[1]}x{wg[2]} has a zero dimension")
  partial = tuple(g % w or w for g, w in zip(grid, wg))   # work-items of the last workgroup along each dimension
  ko = p["kernel_object"]
  if ko % 64: raise bad(f"kernel_object {ko:#x} is not 64-byte aligned (a kernel descriptor is)")
  kd_raw = vm.read(ko, KD_SIZE)
  kd = KernelDescriptor.decode(kd_raw, arch)
  rsrc3, rsrc1, rsrc2 = struct.unpack_from("<3I", kd_raw, 44)
  pc = (ko + kd.kernel_code_entry_byte_offset - (1 << 64 if kd.kernel_code_entry_byte_offset >> 63 else 0)) \
       & (2**64 - 1)
  if pc % 256: raise bad(f"the kernel code at {pc:#x} (kernel_object {ko:#x} + kernel_code_entry_byte_offset) is "
                         f"not 256-byte aligned")
  lds = p["group_segment_size"]
  if lds > lds_limit: raise bad(f"group_segment_size {lds} is more than the {lds_limit} bytes of LDS a workgroup has")
  granule = LDS_GRANULE[target(arch).major]
  tmpring = vm.read_u32(queue + A.QUEUE_COMPUTE_TMPRING_SIZE)
  lanes = 32 if kd.enable_wavefront_size32 else 64
  per_lane = ((tmpring >> 12) & 0x3FFFF) * SCRATCH_GRANULE // lanes
  if max(p["private_segment_size"], kd.private_segment_fixed_size) > per_lane:
    raise bad(f"private_segment_size {max(p['private_segment_size'], kd.private_segment_fixed_size)} bytes per "
              f"work-item is more than the queue's scratch (amd_queue_t.compute_tmpring_size {tmpring:#x}: {per_lane} "
              f"bytes per lane)")
  srd = int.from_bytes(vm.read(queue + A.QUEUE_SCRATCH_RESOURCE_DESCRIPTOR, 16), "little")
  values = {"enable_sgpr_private_segment_buffer": srd, "enable_sgpr_dispatch_ptr": packet_va,
            "enable_sgpr_queue_ptr": queue, "enable_sgpr_kernarg_segment_ptr": p["kernarg_address"],
            "enable_sgpr_dispatch_id": index,
            "enable_sgpr_flat_scratch_init": vm.read_u64(queue + A.QUEUE_SCRATCH_BACKING_MEMORY_LOCATION),
            "enable_sgpr_private_segment_size": p["private_segment_size"]}
  user = user_sgprs(kd, values)
  if kd.kernarg_preload_spec_length:
    user += list(struct.unpack(f"<{kd.kernarg_preload_spec_length}I", vm.read(
      p["kernarg_address"] + 4 * kd.kernarg_preload_spec_offset, 4 * kd.kernarg_preload_spec_length)))
  if len(user) > 16: raise bad(f"the kernel descriptor asks for {len(user)} user SGPRs (COMPUTE_USER_DATA has 16)")
  regs = {"COMPUTE_PGM_LO": (pc >> 8) & 0xFFFFFFFF, "COMPUTE_PGM_HI": pc >> 40, "COMPUTE_PGM_RSRC1": rsrc1,
          "COMPUTE_PGM_RSRC2": (rsrc2 & ~(0x1FF << 15)) | (-(-lds // granule) << 15), "COMPUTE_PGM_RSRC3": rsrc3,
          "COMPUTE_TMPRING_SIZE": tmpring,
          "COMPUTE_DISPATCH_INITIATOR": P.DISPATCH_COMPUTE_SHADER_EN | P.DISPATCH_FORCE_START_AT_000 |
                                        (P.DISPATCH_CS_W32_EN if kd.enable_wavefront_size32 else 0) |
                                        (PARTIAL_TG_EN if partial != wg else 0),
          **{f"COMPUTE_NUM_THREAD_{d}": w | (p << 16 if partial != wg else 0) for d, w, p in zip("XYZ", wg, partial)},
          **{f"COMPUTE_USER_DATA_{i}": u for i, u in enumerate(user)}}
  return regs, tuple(-(-g // w) for g, w in zip(grid, wg))
