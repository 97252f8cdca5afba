"""Register liveness of a PTX kernel and a packed register layout from it.

nvcc writes SSA-like PTX: a `.reg` per value (`%f<57>`), most of them live for a few instructions. The image gives
each its own row of the register file; `pack` lets registers whose live ranges never overlap share rows, so a warp
touches a few rows instead of one per value (the native tier then stores fewer rows, and LLVM drops a store a later
one to the same row overwrites). The `uninit` checker, which tracks rows, still sees every read of a register
nothing wrote: such a register is live from the kernel's entry to that read, so no register written on the way
shares its row.

    flow(prog, fn)   # {pc: (rows read, rows every thread running it writes, successors)}, live rows at each PC
    pack(img, prog)  # an Image whose kernels' registers share rows, or None when nothing can
"""
from __future__ import annotations

import copy
from dataclasses import replace

from gputwin.emu.program import Src


def rows(srcs) -> int:
  """The register rows (a bit mask) of the operands among `srcs`."""
  out = 0
  for x in srcs:
    if isinstance(x, Src) and x.file == "v":
      out |= ((1 << x.dwords) - 1) << x.index
  return out


def _reads(op) -> int:
  g = op.info.get("guard")
  guard = 0 if g is None else 1 << g[0]
  if op.kind == "tensor":
    return _tensor_reads(op.info) | guard
  a = op.info.get("address")
  return rows(list(op.ins.values()) + list(op.old.values()) + list(a.terms if a is not None else ()) +
              [op.info.get("members")] + list(op.info.get("bar") or ()) + list(op.info.get("src") or ())) | guard


def _tensor_reads(info: dict) -> int:
  """The rows a warp-level tensor or async instruction (ptx/tensor.py) reads: its source fragments, the registers
  of its `[...]` operands, and its scalar operands (stride, counts, mbarrier state, cp.async's src-size/ignore)."""
  do, regs = info.get("do"), info.get("regs") or []
  read = [s for rs in regs[1:] for s in rs] if do in ("mma", "wmma_mma") else \
      list(regs) if do in ("wmma_store", "stmatrix") else []
  for at in (info.get(k) for k in ("at", "dst", "src")):
    if at is not None:
      read += list(at.info["address"].terms)
  return rows(read + [info.get(k) for k in ("stride", "count", "tx", "state", "src_size", "ignore")])


def _writes(op) -> int:
  """Every row `op` may write (whatever its kind: bar.red writes its D0 when the barrier completes; a tensor op's
  `dst` is a memory operand, what it writes is op.outs)."""
  if op.kind == "tensor":
    return rows(op.outs.values())
  return rows(list(op.outs.values()) + list(op.info.get("dst") or ()))


def flow(prog, fn):
  """({pc: (rows read, rows written by every thread that runs it, successor PCs in the function)}, {pc: live rows
  before it}) of kernel `fn` (backward liveness to a fixed point: a thread writes each output of an instruction it
  runs unless a guard may skip it; a warp-level tensor instruction runs with all of its warp's threads at it, so its
  reads of other lanes' fragments see rows live there too), or None for code the analysis does not see through
  (calls)."""
  ops = {}
  for pc in range(fn.entry, fn.end):
    op = prog.op(pc)
    if op.kind in ("call", "ret"):
      return None
    g = op.info.get("guard")
    writes = rows(op.info["dst"]) if op.kind == "pack" else \
        rows(op.outs.values()) if op.kind in ("alu", "mem", "tensor") else 0
    t = op.ins.get("TARGET")
    jump = op.kind in ("alu", "mem") and "PC" in (op.sem.outputs if op.sem is not None else ())
    succ = [] if op.kind in ("end", "unsupported", "bad") and g is None else \
        list(op.info["table"]) if op.kind == "brx" else [t.value] if jump and g is None else \
        [t.value, pc + 1] if jump else [pc + 1]
    ops[pc] = (_reads(op), 0 if g is not None else writes, [s for s in succ if fn.entry <= s < fn.end])
  live = dict.fromkeys(ops, 0)
  changed = True
  while changed:  # live-in = reads | (live-out & ~writes)
    changed = False
    for pc in reversed(ops):
      reads, kills, succ = ops[pc]
      out = 0
      for s in succ:
        out |= live[s]
      v = reads | (out & ~kills)
      if v != live[pc]:
        live[pc], changed = v, True
  return ops, live


def _rows_of(fn, img) -> dict[int, tuple[int, int]]:
  """The function's `.reg` registers: first row -> (rows, 32-bit rows each element) for every name in its scopes."""
  out = {}
  for loc in img.code[fn.entry:fn.end]:
    for v in loc.names.values():
      if v[0] == "reg":
        out[v[1]] = v[2]
  return out


def _mapping(prog, img, fn) -> dict[int, int] | None:
  """Register first row -> the row it shares for kernel `fn`: registers of one width whose live ranges do not
  overlap, greedily in order of first definition. None when the kernel is not packable (calls, tensor or cross-lane
  operations, vector registers)."""
  got = flow(prog, fn)
  if got is None:
    return None
  ops, live = got
  regs = _rows_of(fn, img)
  if sum(regs.values()) != len(fn.rows) - 2:  # (vector registers take more rows than their name's; frame rows: 2)
    return None
  clash = {}  # row -> rows it may not share with (a bit mask)

  def add(mask: int, other: int) -> None:
    while mask:
      r = (mask & -mask).bit_length() - 1
      clash[r] = clash.get(r, 0) | other
      mask &= mask - 1
  add(live[fn.entry], live[fn.entry])  # (read before any write: each keeps its cleared row)
  for pc, (reads, _, succ) in ops.items():
    op = prog.op(pc)
    if op.sem is not None and op.sem.cross_lane:
      return None
    out = 0
    for s in succ:
      out |= live[s]
    w = _writes(op)
    add(w, out | reads | w)  # a result clashes with what lives past it and with its own sources
    add(out | reads, w)
  first = {}
  for pc in ops:
    w = _writes(prog.op(pc))
    for r in regs:
      if w >> r & 1:
        first.setdefault(r, pc)
  width = lambda r: regs[r]
  mask = lambda r: ((1 << regs[r]) - 1) << r
  slots: list[tuple[int, int, int]] = []  # (row, width, rows of the registers placed there)
  out = {}
  for r in sorted(regs, key=lambda r: (first.get(r, -1), r)):
    c = 0
    m = mask(r)
    while m:
      b = (m & -m).bit_length() - 1
      c |= clash.get(b, 0)
      m &= m - 1
    for i, (row, wd, held) in enumerate(slots):
      if wd == width(r) and not c & held:
        slots[i] = (row, wd, held | mask(r))
        out[r] = row
        break
    else:
      slots.append((r, width(r), mask(r)))
      out[r] = r
  return out


def pack(img, prog, kernels=None):
  """A copy of Image `img` whose kernels' registers (the entry kernels named in `kernels`; None: all) share rows
  where their live ranges allow (`prog`: its decoded program), or None when no kernel packs (a module with calls
  keeps its layout: a call saves its callee's rows)."""
  if img.calls:
    return None
  moved = {}  # per kernel (their rows may overlap: Image.local_rows), applied to its own code
  for fn in img.functions.values():
    if fn.kind == "entry" and (kernels is None or fn.name in kernels):
      m = _mapping(prog, img, fn)
      if m and any(a != b for a, b in m.items()):
        moved[fn.name] = {a: b for a, b in m.items() if a != b}
  if not moved:
    return None
  out = copy.copy(img)
  names = {}

  def remap(d: dict, m: dict) -> dict:
    got = names.get(id(d))
    if got is None:
      got = names[id(d)] = (d, {k: ("reg", m.get(v[1], v[1])) + tuple(v[2:]) if v[0] == "reg" else v
                                for k, v in d.items()})
    return got[1]
  out.code = [replace(loc, names=remap(loc.names, moved.get(loc.func, {})), image=out) for loc in img.code]
  return out
