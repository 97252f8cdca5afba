"""`gputwin exec --trace DIR`: every DISPATCH_DIRECT a client makes, written to DIR so `gputwin run` replays it.

A dispatch is registers, not a code object; what a replay needs is recovered from the GPU's memory at launch:
- the kernel descriptor: the 64-byte KD in the program's BO whose kernel_code_entry_byte_offset points at
  COMPUTE_PGM_LO/HI (a client uploads the code object's loaded image: .rodata with the KDs, .text);
- the kernarg segment: the user SGPRs (COMPUTE_USER_DATA_*) at the KD's kernarg_segment_ptr slot, kernarg_size bytes;
- the arguments: a kernarg qword that points into a GPU mapping is a buffer pointer (its contents from that address
  to the end of the mapping or the next pointer argument into it are saved), every other dword a 32-bit value.

DIR/<pid>-<n>/ holds `kernel.co` (the code from PGM to the end of its BO and the KD, as a code object with `.args`
metadata: global_buffer / by_value, named a0, a1, ...), `before/aK.npy` (uint8 buffers at launch), `after/aK.npy`
(after the dispatch) and `dispatch.json` (arch, grid, block, registers, argument VAs, and `command`: the
`gputwin run` line that replays it; compare its `--out` directory with after/). Limits: data the code reads relative
to its PC outside [PGM, end of BO), and memory a kernel reaches other than through its pointer arguments (below the
pointer, or through pointers stored in memory), are not captured; two arguments with the same address replay as two
buffers. `gputwin exec --trace` sets $GPUTWIN_EXEC_TRACE.
"""
from __future__ import annotations
import itertools, json, os
from pathlib import Path
import numpy as np
from gputwin.isa.codeobj import KernelSpec, build_code_object
from gputwin.isa.kd import KD_SIZE, KernelDescriptor
from gputwin.isa.kernargs import MAX_KERNARG_SIZE
from gputwin.mock.vm import GPUAddressSpace

ENV = "GPUTWIN_EXEC_TRACE"
_SEQ = itertools.count()


def find_kd(vm: GPUAddressSpace, pc: int, arch: str) -> KernelDescriptor | None:
  """The kernel descriptor in the BO holding `pc` whose code entry is `pc`, or None."""
  m = vm.find(pc)
  if m is None or m.size < KD_SIZE: return None
  raw = m.bo.view[:m.size - m.size % KD_SIZE]
  entry = np.frombuffer(raw, "<i8")[2::KD_SIZE // 8]  # kernel_code_entry_byte_offset at KD + 16
  hit = np.nonzero(m.va + KD_SIZE * np.arange(len(entry), dtype=np.int64) + entry == pc)[0]
  return KernelDescriptor.decode(bytes(raw[KD_SIZE * hit[0]:KD_SIZE * (hit[0] + 1)]), arch) if len(hit) else None


class Recording:
  def __init__(self, path: Path, buffers: list[tuple[str, int, int]]):
    self.path, self.buffers = path, buffers

  def after(self, vm: GPUAddressSpace) -> None:
    """Save the pointer arguments' buffers as the dispatch left them."""
    (self.path / "after").mkdir(exist_ok=True)
    for name, va, size in self.buffers:
      np.save(self.path / "after" / f"{name}.npy", np.frombuffer(vm.read(va, size), np.uint8))


def before(vm: GPUAddressSpace, arch: str, regs: dict[str, int], grid: tuple, block: tuple, pc: int,
           user: list[int]) -> Recording | None:
  """Record one dispatch at launch when $GPUTWIN_EXEC_TRACE names a directory; None otherwise or when the program's
  kernel descriptor cannot be found (then only dispatch.json is written, without a replay command)."""
  root = os.environ.get(ENV)
  if not root: return None
  n = next(_SEQ)
  path = Path(root) / f"{os.getpid()}-{n:04d}"
  (path / "before").mkdir(parents=True, exist_ok=True)
  info = dict(arch=arch, grid=list(grid), block=list(block), pc=pc, regs={k: regs[k] for k in sorted(regs)})
  if regs.get("COMPUTE_DISPATCH_INITIATOR", 0) & 2:   # PARTIAL_TG_EN
    info["partial"] = "the last workgroups are partial (NUM_THREAD_PARTIAL in regs); the replay runs whole ones"
  kd = find_kd(vm, pc, arch)
  if kd is None:
    info["note"] = "no kernel descriptor in the program's BO points at PGM: not replayable"
    (path / "dispatch.json").write_text(json.dumps(info, indent=1))
    return None
  slot = {name: (first, count) for name, first, count in kd.sgpr_layout()}.get("kernarg_segment_ptr")
  kernarg = user[slot[0]] | user[slot[0] + 1] << 32 if slot else 0
  mk = vm.find(kernarg) if kernarg else None  # the descriptor's size is a claim: read what is mapped, within the limit
  raw = vm.read(kernarg, min(kd.kernarg_size, MAX_KERNARG_SIZE, mk.end - kernarg)) if mk else b""
  args, off = [], 0
  while off + 4 <= len(raw):
    q = int.from_bytes(raw[off:off + 8], "little") if off % 8 == 0 and off + 8 <= len(raw) else 0
    m = vm.find(q) if q else None
    if m is not None:
      args.append(dict(name=f"a{len(args)}", offset=off, size=8, kind="global_buffer", va=q, end=m.va + m.size))
      off += 8
    else:
      value = int.from_bytes(raw[off:off + 4], "little")
      args.append(dict(name=f"a{len(args)}", offset=off, size=4, kind="by_value", value=value))
      off += 4
  buffers, ptrs = [], sorted({a["va"] for a in args if "va" in a})
  for a in args:  # a buffer ends at its mapping's end or at the next pointer argument into the same mapping
    if "va" in a:
      end = min([p for p in ptrs if a["va"] < p < a["end"]] + [a.pop("end")])
      a["bytes"] = end - a["va"]
      np.save(path / "before" / f"{a['name']}.npy", np.frombuffer(vm.read(a["va"], a["bytes"]), np.uint8))
      buffers.append((a["name"], a["va"], a["bytes"]))
  m = vm.find(pc)
  code = bytes(m.bo.view[pc - m.va:m.size])
  kname = f"dispatch{n}"
  meta = {".args": [{".name": a["name"], ".offset": a["offset"], ".size": a["size"], ".value_kind": a["kind"],
                     **({".address_space": "global"} if a["kind"] == "global_buffer" else {})} for a in args],
          ".kernarg_segment_size": kd.kernarg_size}
  (path / "kernel.co").write_bytes(build_code_object(arch, code, [KernelSpec(kname, 0, kd, meta)]))
  spec = [f"--arg {a['name']}:u8:{path / 'before' / (a['name'] + '.npy')}" if a["kind"] == "global_buffer" else
          f"--arg {a['name']}:u32={a['value']}" for a in args]
  info.update(kernel=kname, kernarg=kernarg, args=args, command=" ".join(
    [f"gputwin run {path / 'kernel.co'} --arch {arch} --kernel {kname} --grid {','.join(map(str, grid))} "
     f"--block {','.join(map(str, block))}", *spec, f"--out {path / 'replay'}"]))
  (path / "dispatch.json").write_text(json.dumps(info, indent=1))
  return Recording(path, buffers)
