"""Calls between PTX functions (PTX ISA 9.0 9.7.13.8 `call`, 9.7.13.9 `ret`, 7.1 "Function declarations"): each
thread has a call stack in its local window. A call saves the callee's registers and its .param area (a recursive
call reuses both), copies the caller's argument variables into the callee's formal parameters, and gives the callee
a frame for its `.local` variables; ret copies the return parameters into the call site's variables and restores.

Frame at the thread's stack pointer (`Image.sp_row`), all 32-bit words:
    [callee register rows][callee .param area][return PC][call-site PC] | callee .local frame (frame_row points here)
"""
from __future__ import annotations

import numpy as np

from gputwin.emu.program import Op
from gputwin.emu.ptx.image import Function, Image
from gputwin.errors import GPUPageFault

U32, U64 = np.uint32, np.uint64


def save_words(fn: Function) -> int:
  lo, hi = fn.param_span
  return len(fn.rows) + (hi - lo + 3) // 4 + 2


def _lanes(eng, ix, m):
  """Flat (waves, lanes) indices of the lanes in `m` and their local-window slot bases."""
  waves = np.arange(eng.W)[ix]
  w, l = np.nonzero(m)
  slot = (waves[w].astype(U64) * U64(eng.L) + l.astype(U64)) * U64(eng.scratch.stride)
  return waves[w], l, slot


def _copy(eng, slot, src: int, dst: int, n: int) -> None:
  for k in range(0, n, 4):
    eng.scratch.scatter(slot + U64(dst + k), eng.scratch.gather(slot + U64(src + k), 4), 4)


def call(eng, op: Op, ix, m) -> None:
  img: Image = op.inst.image
  fn: Function = op.info["callee"]
  if not m.any():
    return
  w, l, slot = _lanes(eng, ix, m)
  eng.scratch_used = True
  sp = eng.V[w, img.sp_row, l].astype(U64)
  words = save_words(fn)
  frame = (sp + U64(4 * words + 15)) & ~U64(15)
  top = frame + U64(-(-fn.frame_size // 16) * 16)
  if int(top.max()) > eng.scratch.size:
    raise GPUPageFault(int(top.max()), 4, "write", getattr(eng.mem, "device", ""),
                       f"call stack overflow calling {fn.name}: {eng.scratch.size} bytes of local memory per thread")
  a = slot + sp
  for k, r in enumerate(fn.rows):  # the callee's registers (its frame row too)
    eng.scratch.scatter(a + U64(4 * k), eng.V[w, r, l], 4)
  lo, hi = fn.param_span
  off = 4 * len(fn.rows)
  for k in range(0, hi - lo, 4):
    eng.scratch.scatter(a + U64(off + k), eng.scratch.gather(slot + U64(lo + k), 4), 4)
  off += 4 * ((hi - lo + 3) // 4)
  eng.scratch.scatter(a + U64(off), np.full(len(w), op.pc + 1, U32), 4)
  eng.scratch.scatter(a + U64(off + 4), np.full(len(w), op.pc, U32), 4)
  for arg, formal in zip(op.info["args"], fn.params):
    _copy(eng, slot, arg.offset, formal.offset, min(arg.size, formal.size))
  eng.V[w, fn.frame_row, l] = frame.astype(U32)
  eng.V[w, fn.frame_row + 1, l] = 0
  eng.V[w, img.sp_row, l] = top.astype(U32)
  eng.mark("v", fn.frame_row, 2)
  eng.mark("v", img.sp_row)
  eng.lpc[w, l] = fn.entry


def ret(eng, op: Op, ix, m) -> None:
  """Return from the `.func` `op` is in to the call site (a kernel's own `ret` binds as exit: decode.build_op)."""
  img: Image = op.inst.image
  fn = img.functions[op.inst.func]
  if not m.any():
    return
  w, l, slot = _lanes(eng, ix, m)
  frame = eng.V[w, fn.frame_row, l].astype(U64)
  words = save_words(fn)
  sp = _sp_before(frame, words)
  a = slot + sp
  lo, hi = fn.param_span
  off = 4 * len(fn.rows)
  pw = 4 * ((hi - lo + 3) // 4)
  back = eng.scratch.gather(a + U64(off + pw), 4).astype(np.int64)
  site = eng.scratch.gather(a + U64(off + pw + 4), 4).astype(np.int64)
  for s in np.unique(site):  # the return values, into each call site's variables
    sel = site == s
    cop = eng.prog.op(int(s))
    for r, formal in zip(cop.info["rets"], fn.rets):
      _copy(eng, slot[sel], formal.offset, r.offset, min(r.size, formal.size))
  for k in range(0, hi - lo, 4):
    eng.scratch.scatter(slot + U64(lo + k), eng.scratch.gather(a + U64(off + k), 4), 4)
  for k, r in enumerate(fn.rows):
    eng.V[w, r, l] = eng.scratch.gather(a + U64(4 * k), 4)
    eng.mark("v", r)
  eng.V[w, img.sp_row, l] = sp.astype(U32)
  eng.mark("v", img.sp_row)
  eng.lpc[w, l] = back


def _sp_before(frame, words: int):
  """The stack pointer a call started from, given the callee frame it made: the save area is 4 * words bytes right
  below the frame, which starts 16-aligned; the caller's sp was 16-aligned too (every frame top is), so it is the
  frame minus the save area rounded up to 16."""
  return frame - U64(-(-4 * words // 16) * 16)
