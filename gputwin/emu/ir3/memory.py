"""ir3 effective addresses (isaspec ir3-cat6.xml): global `g[base+off]` (64-bit register pair or const),
`g[base+index<<shift+off]` (ldg.a/stg.a), shared `l[reg+off]` and private `p[reg+off]` byte offsets, bindless IBOs
(SSBOs: the descriptor index of `.base0` is the buffer's binding, the coordinate counts elements of the access type)
and UBOs (ldc: vec4 offset + component). The launch binds IBOs and UBOs (`Engine.res`: kind -> [(va, bytes)]); an
access outside its buffer faults there, naming the buffer, like an access outside guest memory.
"""
from __future__ import annotations

import numpy as np

from gputwin.emu.ir3.decode import A0, CONST, CONST_DWORDS, G0, SHARED
from gputwin.emu.program import Op
from gputwin.errors import GPUPageFault

U32, U64 = np.uint32, np.uint64


def _lanes(eng, v, ix) -> np.ndarray:
  return np.broadcast_to(np.asarray(v), (eng.nwaves(ix), eng.L))


def buffer(eng, op: Op, kind: str, idx, ix, m, nbytes: int, offset: np.ndarray) -> np.ndarray:
  """Addresses of `nbytes` at byte `offset` (per fiber) of the bound buffer `idx` (one index, or one per fiber) of
  `kind`; faults for an unbound index or an access past the buffer's end."""
  table = eng.res.get(kind, {})
  access = "write" if "w" in op.sem.mem and "r" not in op.sem.mem else "read"

  def fault(bad, va, detail):
    w, lane = (int(x[0]) for x in np.nonzero(bad))
    e = GPUPageFault(int(np.broadcast_to(va, bad.shape)[w, lane]), nbytes, access, detail=detail(w, lane))
    e.thread = (int(np.arange(eng.W)[ix][w]), lane)
    raise e
  off = np.asarray(offset).astype(np.int64)
  if np.ndim(idx) == 0 or np.size(idx) == 1:  # one buffer (an immediate or uniform index): scalars
    i = int(np.asarray(idx).reshape(-1)[0])
    if i not in table:
      fault(m, 0, lambda w, lane: f"{kind.upper()} {i} is not bound")
    base, size = table[i]
  else:
    idx = _lanes(eng, idx, ix).astype(np.int64)
    base, size = np.zeros(idx.shape, U64), np.zeros(idx.shape, np.int64)
    for i in np.unique(idx[m]).tolist():
      if i not in table:
        fault(m & (idx == i), 0, lambda w, lane, i=i: f"{kind.upper()} {i} is not bound")
      base[idx == i], size[idx == i] = table[i]
  bad = m & ((off < 0) | (off + nbytes > size))
  if bad.any():
    at = lambda v, w, lane: int(np.broadcast_to(v, m.shape)[w, lane])
    fault(bad, np.asarray(base, U64) + off.astype(U64), lambda w, lane: (
      f"{kind.upper()} {at(idx, w, lane)} byte offset {at(off, w, lane)} is past its {at(size, w, lane)} bytes"))
  return np.asarray(base, U64) + np.where(m, off, 0).astype(U64)


def memop(eng, op: Op, ix, m, st) -> None:
  i, space = op.info, op.info["space"]
  b = i.get("buffer")
  if b is not None:  # IBO / UBO (binding.Buffer): coord * scale + offset bytes into the bound buffer
    off = _lanes(eng, eng.fetch(b.coord, ix), ix).astype(np.int64) * b.scale + b.offset
    a = buffer(eng, op, b.kind, eng.fetch(b.index, ix), ix, m, b.nbytes, off)
    return eng.run_body(op, ix, m, st, eng.mem, a)
  plan = i.get("address")
  base = _lanes(eng, eng.address(plan, ix) if plan is not None else eng.fetch(i["base"], ix), ix)
  if space == "global":
    a = base.astype(U64) + (U64(0) if plan is not None else U64(i["off"] & 0xffffffffffffffff))
    if "index" in i:
      a = a + (_lanes(eng, eng.fetch(i["index"], ix), ix).astype(U64) << U64(i["shift"]))
    try:
      return eng.run_body(op, ix, m, st, eng.mem, a)
    except GPUPageFault as e:
      bad = m & (a <= U64(e.va)) & (U64(e.va) < a + U64(max(e.size, 1)))
      w, lane = (int(x[0]) for x in np.nonzero(bad if bad.any() else m))
      e.thread = (int(np.arange(eng.W)[ix][w]), lane)
      raise
  off = (base.astype(np.int64) + (0 if plan is not None else i["off"])) & 0xffffffff
  if space == "shared":
    try:
      return eng.run_body(op, ix, m, st, eng.lds, eng.lds_address(op, ix, m, off.astype(U32)))
    except GPUPageFault as e:  # (its VA: the fiber's offset, or its base past the LDS reach): name that fiber
      hit = m & ((off == e.va) | ((off & eng.lds.offset_mask) == e.va))
      w, lane = (int(x[0]) for x in np.nonzero(hit if hit.any() else m))
      e.thread = (int(np.arange(eng.W)[ix][w]), lane)
      raise
  return eng.run_scratch(op, ix, m, st, off.astype(U64))


def _a0(eng, ix) -> np.ndarray:
  """a0.x per fiber, as the signed 16-bit index it is."""
  a0 = eng.V[ix, A0].astype(np.int64) & 0xffff
  return np.where(a0 >= 0x8000, a0 - 0x10000, a0)


def register_index(eng, ix, m: np.ndarray, off: int, half: bool, access: str) -> np.ndarray:
  """r<a0.x + off> per fiber: the (half) register number, an error for an active fiber outside the register file."""
  n = _a0(eng, ix) + off
  if (m & ((n < 0) | (n >= (2 * SHARED if half else SHARED)))).any():
    raise GPUPageFault(0, 4, access, detail=f"r<a0.x + {off}> is outside the register file")
  return n


def relative(eng, op: Op, file: str, off: int, half: bool) -> np.ndarray:
  """r<a0.x + off> / c<a0.x + off> per fiber: a0.x (signed 16 bits) plus the offset names a register (or half
  register) or const dword; outside the file is an error."""
  ix, m = eng._last_ix, eng.exec_mask(eng._last_ix)
  if file == "s":
    n = _a0(eng, ix) + off
    if (m & ((n < 0) | (n >= CONST_DWORDS))).any():
      raise GPUPageFault(0, 4, "read", detail=f"c<a0.x + {off}> is outside the const file")
    v = eng.S[ix][np.arange(eng.nwaves(ix))[:, None], CONST + np.clip(n, 0, CONST_DWORDS - 1)]
    return v & U32(0xffff) if half else v
  n = np.clip(register_index(eng, ix, m, off, half, "read"), 0, (2 * SHARED if half else SHARED) - 1)
  rows = G0 + (n // 2 if half else n)
  V = eng.V[ix]
  v = V[np.arange(V.shape[0])[:, None], rows, np.arange(eng.L)[None, :]]
  if half:
    v = np.where(n & 1, v >> U32(16), v & U32(0xffff))
  return v
