"""AMD effective addresses (the ISA guides' "Memory" chapters): SMEM, DS, global/flat (with the shared and private
apertures), scratch and buffer (V#) addresses from the encoding's base registers and offsets; the shared machine
then runs the body on the space they land in (Engine.run_body, lds_address, run_scratch)."""
from __future__ import annotations

import numpy as np

from gputwin.emu.amd.decode import PRIVATE_HI, SHARED_HI
from gputwin.emu.program import Op
from gputwin.errors import GputwinError
from gputwin.pcode.runtime import dwords

U32, U64 = np.uint32, np.uint64
M32, M64 = 0xffffffff, 0xffffffffffffffff
# the V# (buffer resource, 4 SGPRs) fields MUBUF addressing reads, (first bit, width) of its 128 bits (RDNA3/RDNA4/
# CDNA3 ISA guides, "Buffer Resource"); the native tier emits the same fields (codegen.Compiler.buffer_vsharp)
VSHARP = {"base": (0, 48), "stride": (48, 14), "num_records": (64, 32)}


def memop(eng, op: Op, ix, m, st) -> None:
  """Effective addresses per the encoding (AMD ISA "Memory" chapters: the plan decode.py made, binding.Address), then
  the pcode body reads/writes them."""
  plan = op.info.get("address")
  if plan is None and op.mem != "buffer":
    raise GputwinError(f"no address plan for this {op.mem} access")
  if plan is None:
    return _buffer(eng, op, ix, m, st)
  a = eng.address(plan, ix)
  if plan.space == "mem" and not op.vector:  # SMEM: one address per wave
    return eng.run_body(op, ix, None, st, eng.mem, a)
  if plan.space == "lds":
    base = np.broadcast_to(a, (eng.nwaves(ix), eng.L)).astype(U32, copy=False)
    return eng.run_body(op, ix, m, st, eng.lds, eng.lds_address(op, ix, m, base))
  if plan.space == "scratch":
    return eng.run_scratch(op, ix, m, st, np.broadcast_to(a, (eng.nwaves(ix), eng.L)))
  if plan.space == "split":  # flat: the shared and private apertures route lanes to LDS and scratch
    hi = (a >> U64(32)).astype(U32)
    sh, pr = (hi == U32(SHARED_HI)) & m, (hi == U32(PRIVATE_HI)) & m
    parts = [(k, lanes) for k, lanes in (("lds", sh), ("scratch", pr), ("mem", m & ~sh & ~pr)) if lanes.any()]
    for i, (k, lanes) in enumerate(parts):  # one body run per space; the checkers count the last one (one issue)
      last = i == len(parts) - 1
      if k == "lds":
        lds = eng.lds_address(op, ix, lanes, (a & U64(M32)).astype(U32))
        eng.run_body(op, ix, lanes, dict(st, OFFSET=U32(0)), eng.lds, lds, last)
      elif k == "scratch":
        eng.run_scratch(op, ix, lanes, dict(st), a & U64(M32), last)
      else:
        eng.run_body(op, ix, lanes, st, eng.mem, a, last)
    if parts:
      return
  eng.run_body(op, ix, m, st, eng.mem, a)


def deliver(eng, op: Op, ix, m, out: dict) -> dict:
  """A load into LDS (decode.TO_LDS: the load-to-LDS opcodes, MUBUF's lds bit): lane l's data goes to LDS at M0 + the
  instruction offset + l * bytes (op.info["deliver"]: the bytes a lane moves; the wave's data lands contiguous, in the
  workgroup's allocation: past it faults), and no VGPR is written. The outputs left for Engine.retire."""
  out = dict(out)
  v, nb, n = out.pop("VDATA"), op.info["deliver"], eng.nwaves(ix)
  base = eng.S[ix, eng.sp["m0"]][:, None] + U32(op.info.get("offset", 0) & M32) + \
      np.arange(eng.L, dtype=U32)[None, :] * U32(nb)  # (32-bit: wraps as LDS addresses do)
  on = np.broadcast_to(True if m is None else m, (n, eng.L))
  a = eng.lds_address(op, ix, on, base)[on]
  for k, p in enumerate(dwords(v, nb // 4)):
    eng.lds.scatter(a + U64(4 * k), np.broadcast_to(p, (n, eng.L))[on].astype(U64).astype(U32), 4)
  return out


class _Nowhere:
  """The space of buffer lanes out of the V#'s range: reads are 0, writes are dropped (the ISA guides' "Buffer
  Instructions": an out-of-range read returns zero, a write is ignored; an atomic's pre-op value is then 0)."""
  device = ""

  @staticmethod
  def gather(addr, nbytes):
    return np.zeros(np.size(addr), {1: np.uint8, 2: np.uint16, 4: U32, 8: U64}[nbytes])

  @staticmethod
  def scatter(addr, vals, nbytes):
    pass


NOWHERE = _Nowhere()


def _buffer(eng, op, ix, m, st):
  """MUBUF: base/stride/num_records from the V# in 4 SGPRs; out-of-range lanes load 0 and store nothing (the range
  is checked once per instruction, at its first byte)."""
  info = op.info
  d = eng.S[ix, info["srsrc"]:info["srsrc"] + 4].astype(object)
  v = d[:, 0] | d[:, 1] << 32 | d[:, 2] << 64 | d[:, 3] << 96
  base, stride, nrec = ((v >> lo & (1 << n) - 1).astype(U64) for lo, n in VSHARP.values())
  so = eng.S[ix, info["soffset"]].astype(U64) if info["soffset"] is not None else U64(info["soffset_k"])
  v0 = eng.V[ix, info["vaddr"]].astype(U64) if info["vaddr"] is not None else 0
  idx = v0 if info["idxen"] else U64(0)
  voff = (eng.V[ix, info["vaddr"] + (1 if info["idxen"] else 0)].astype(U64) if info["offen"] else U64(0))
  off = voff + U64(info["offset"])
  inrange = np.where(stride[:, None] == 0, off < nrec[:, None], idx < nrec[:, None])
  a = base[:, None] + (so if np.ndim(so) == 0 else so[:, None]) + off + idx * stride[:, None]
  out = m & ~inrange
  if out.any():  # their body runs on NOWHERE: destinations get 0, memory is untouched (not counted: one issue)
    eng.run_body(op, ix, out, dict(st), NOWHERE, a, False)
  eng.run_body(op, ix, m & inrange, st, eng.mem, a)

