"""The ir3 control and cross-fiber events (gputwin.pcode.ir3 EVENTS): what a body names with a call the machine
implements, for the fibers `sel` standing at the instruction (`m`: those its guard lets run). Each returns the fibers
that move on to the next instruction; the others got a new PC here.
"""
from __future__ import annotations

import numpy as np

from gputwin.emu import core
from gputwin.emu.binding import Stop
from gputwin.emu.ir3 import memory
from gputwin.emu.ir3.decode import CONST, CONST_DWORDS, G0, NUM_A1, TMP, reg, step
from gputwin.emu.program import Op
from gputwin.errors import GPUPageFault
from gputwin.pcode.ir3 import BYTES

U32 = np.uint32
_A1 = reg(NUM_A1)


def _first(m: np.ndarray) -> np.ndarray:
  """The lowest fiber of each wave's mask (none where the mask is empty)."""
  out = np.zeros_like(m)
  rows = m.any(axis=1)
  out[np.nonzero(rows)[0], np.argmax(m, axis=1)[rows]] = True
  return out


def _jump(eng, ix, go: np.ndarray, target: int) -> None:
  core.move(eng, ix, (target, go))


def _uniform(eng, s, ix, m) -> np.ndarray:
  """A per-wave value from the first fiber of m (a register read by one fiber, e.g. in the preamble)."""
  v = np.broadcast_to(np.asarray(eng.fetch(s, ix)), m.shape)
  return v[np.arange(m.shape[0]), np.argmax(m, axis=1)]


def run(eng, op: Op, ix, sel, m) -> np.ndarray:
  k = op.kind
  if k == "nop" or not m.any() and k != "pred":
    return sel
  if k == "rpt":  # (rptN) / r<a0.x>: the repetitions one after another, each a plain instruction
    for part in op.info["parts"]:
      eng.execute(part, ix)
      if "dst_rel" in part.info:
        _store_relative(eng, part, ix, m)
    return sel
  if k == "par":  # swz/gat/sct: every source read first, then each converted and written
    vals = [np.array(np.broadcast_to(eng.fetch(a, ix), m.shape)) for a, _ in op.info["moves"]]  # (copies, not views)
    for v, (_, d) in zip(vals, op.info["moves"]):
      eng.store(d, np.asarray(op.sem({"S0": v}, exec=m, lanes=eng.L)["D0"]), ix, m)
    return sel
  if k == "shfl":
    _shfl(eng, op, ix, m)
    return sel
  t = int(op.ins["TARGET"].value) if "TARGET" in op.ins else None
  if k in ("call", "ret"):
    return _call_ret(eng, op, ix, sel, m, t)
  if k == "getone":  # one fiber (the lowest active) falls through; the others jump
    go = m & ~_first(m)
    _jump(eng, ix, go, t)
    return sel & ~go
  if k == "getlast":  # the first cluster with active fibers: all but its last active one jump
    c = op.info["cluster"]
    L = m.shape[1]
    cl = m.reshape(m.shape[0], L // c, c)
    first = np.argmax(cl.any(axis=2), axis=1)
    inc = np.zeros_like(cl)
    inc[np.arange(cl.shape[0]), first] = cl[np.arange(cl.shape[0]), first]
    last = np.zeros_like(inc)
    pos = c - 1 - np.argmax(inc[:, :, ::-1], axis=2)
    w, g = np.nonzero(inc.any(axis=2))
    last[w, g, pos[w, g]] = True
    go = (inc & ~last).reshape(m.shape)
    _jump(eng, ix, go, t)
    return sel & ~go
  if k == "pred":  # predt/predf read p0.x of every fiber (not only the active ones); prede enables them all
    b = op.info["lowered"]  # (decode._enable: the enable row's new value, for every fiber)
    out = b.sem({n: eng.fetch(s, ix) for n, s in b.ins.items()}, lanes=eng.L, wave64=eng.L == 64)
    eng.store(b.outs["D0"], out["D0"], ix, None)
    return sel
  if k == "bany":  # every active fiber jumps when p is set in any (all) of them
    p = np.broadcast_to(np.asarray(eng.fetch(op.info["pred"], ix)) & 1, m.shape).astype(bool)
    hit = ((p | ~m).all(axis=1) if op.info["all"] else (p & m).any(axis=1))[:, None] & m
    _jump(eng, ix, hit, t)
    return sel & ~hit
  if k == "movmsk":  # the active-fiber mask, 32 fibers a register
    for r in range(op.info["w"] // 32):
      part = m[:, 32 * r:32 * (r + 1)]
      bits = (part.astype(np.uint64) << np.arange(part.shape[1], dtype=np.uint64)).sum(axis=1) if part.size else \
          np.zeros(m.shape[0], np.uint64)
      eng.store(step(op.outs["D0"], r, False), np.broadcast_to(bits.astype(U32)[:, None], m.shape), ix, m)
    return sel
  if k == "brcst":
    _brcst(eng, op, ix, m)
    return sel
  if k == "stc":  # N registers of one fiber -> const dwords DST.. (a1.x-relative form: + a1.x components)
    dst = op.info["dst"] + (int(_uniform(eng, _A1, ix, m)[0]) if op.info["rel"] else 0)
    _const_range(dst, op.info["n"], op)
    W = np.arange(eng.W)[ix]
    for r in range(op.info["n"]):
      eng.S[W, CONST + dst + r] = _uniform(eng, step(op.ins["S0"], r, False), ix, m)
    eng.mark("s", CONST + dst, op.info["n"])  # (the next batch's restart clears them, the launch restores the file)
    return sel
  if k == "ldck" and "lowered" in op.info:  # its destination known: the load the native tier runs (decode._const_load)
    memory.memop(eng, op.info["lowered"], ix, m, {})
    return sel
  if k == "ldck":  # N vec4 of a UBO -> const components a1.x.. (ldc.k <doc>), once per distinct (source, target)
    n = op.info["n"] * 4
    one = _first(m)
    off = _uniform(eng, op.ins["S0"], ix, m).astype(np.int64) * 16
    a = memory.buffer(eng, op, "ubo", _uniform(eng, op.ins["S1"], ix, m)[:, None], ix, one, 4 * n, off[:, None])
    dst = _uniform(eng, _A1, ix, m).astype(np.int64) & 0xffff
    rows = one.any(axis=1)
    W, va = np.arange(eng.W)[ix][rows], a[one]  # (one address per wave that runs it)
    for v, d in set(zip(va.tolist(), dst[rows].tolist())):
      _const_range(d, n, op)
      eng.S[W[(va == v) & (dst[rows] == d)], CONST + d:CONST + d + n] = np.frombuffer(eng.mem.read_bytes(v, 4 * n),
                                                                                       U32)
      eng.mark("s", CONST + d, n)
    return sel
  if k == "id":  # getfiberid / getwid / getspid
    v = {"fiberid": lambda: np.broadcast_to(np.arange(eng.L, dtype=U32)[None], m.shape),
         "wid": lambda: np.broadcast_to((np.arange(eng.W)[ix] - np.searchsorted(eng.wg, eng.wg[ix]))
                                        .astype(U32)[:, None], m.shape),
         "spid": lambda: np.zeros(m.shape, U32)}[op.info["id"]]()
    eng.store(op.outs["D0"], v, ix, m)
    return sel
  if k == "resinfo":  # the bound IBO's size in elements of the access type (1d), by a register's index (decode._cat6)
    idx = np.broadcast_to(np.asarray(eng.fetch(op.info["ibo"], ix)), m.shape).astype(np.int64)
    size = np.zeros(m.shape, np.int64)
    for i in np.unique(idx[m]).tolist():
      size[idx == i] = eng.res.get("ibo", {}).get(i, (0, 0))[1]
    eng.store(op.outs["D0"], (size // BYTES.get(op.info["t"], 4)).astype(U32), ix, m)
    return sel
  raise AssertionError(k)


def _const_range(d: int, n: int, op: Op) -> None:
  if d < 0 or d + n > CONST_DWORDS:
    raise GPUPageFault(0, 4 * n, "write", detail=f"{op.text}: const dwords [{d}, {d + n}) are outside the const file")


STACK = 16  # call depth per fiber


def _call_ret(eng, op: Op, ix, sel, m, target):
  """call pushes each fiber's next PC on its own return stack (STACK deep) and jumps; ret pops it. The stacks live on
  the engine, made at the first call of a batch."""
  if not hasattr(eng, "ir3_stack"):
    eng.ir3_stack, eng.ir3_depth = np.zeros((eng.W, eng.L, STACK), np.int64), np.zeros((eng.W, eng.L), np.int64)
  W = np.arange(eng.W)[ix]
  d = eng.ir3_depth[W]
  w, lane = np.nonzero(m)
  if op.kind == "call":
    if (m & (d >= STACK)).any():
      raise Stop("unsupported", f"call stack deeper than {STACK}", int(W[0]), op)
    eng.ir3_stack[W[w], lane, d[w, lane]] = op.pc + op.size
    eng.ir3_depth[W] = d + m
    _jump(eng, ix, m, target)
  else:
    if (m & (d == 0)).any():
      raise Stop("unsupported", "ret with no call to return to", int(W[0]), op)
    eng.ir3_depth[W] = d - m
    eng.lpc[W[w], lane] = eng.ir3_stack[W[w], lane, d[w, lane] - 1]
  return sel & ~m


def _shfl(eng, op: Op, ix, m) -> None:
  """shfl.MODE (ir3-cat6.xml <doc>): xor/up/down as Vulkan's subgroupShuffleXor/Up/Down, rdown as subgroupRotate,
  rup as a rotate by -delta, over the wave; the delta (S1) is the first active fiber's (it must be dynamically
  uniform). A source fiber outside the wave (up/down past its ends) gives the fiber its own value (our choice: the
  docs leave it undefined, as Vulkan does)."""
  W, L = m.shape
  v = np.broadcast_to(np.asarray(eng.fetch(op.ins["S0"], ix)), m.shape)
  d = _uniform(eng, op.ins["S1"], ix, m).astype(np.int64)[:, None]
  lane = np.arange(L)[None, :]
  j = {"xor": lane ^ d, "up": lane - d, "down": lane + d, "rdown": (lane + d) % L, "rup": (lane - d) % L}[
    op.info["mode"]]
  j = np.where((j >= 0) & (j < L), j, lane)
  eng.store(op.outs["D0"], np.take_along_axis(v, j, axis=1), ix, m)


def _brcst(eng, op: Op, ix, m) -> None:
  """brcst.active.wC (ir3-cat5.xml <doc>): in each cluster of C fibers, fibers C/2..C-1 get S0 of the highest active
  fiber among 0..C/2-1; with none active there, D0 stays."""
  c = op.info["cluster"]
  h = c // 2
  W, L = m.shape
  v = np.broadcast_to(np.asarray(eng.fetch(op.ins["S0"], ix)), m.shape).reshape(W, L // c, c)
  lo = m.reshape(W, L // c, c)[:, :, :h]
  has = lo.any(axis=2)
  src = h - 1 - np.argmax(lo[:, :, ::-1], axis=2)
  val = np.take_along_axis(v[:, :, :h], src[:, :, None], axis=2)  # (W, clusters, 1)
  out = np.broadcast_to(val, (W, L // c, c)).reshape(W, L)
  upper = np.zeros((W, L // c, c), bool)
  upper[:, :, h:] = has[:, :, None]
  eng.store(op.outs["D0"], np.ascontiguousarray(out), ix, m & upper.reshape(W, L))


def _store_relative(eng, part: Op, ix, m) -> None:
  """A move to r<a0.x + n>: the value the move left in row TMP, stored per fiber at its register."""
  off, half = part.info["dst_rel"]
  n = memory.register_index(eng, ix, m, off, half, "write")
  v = eng.V[ix, TMP]
  w, lane = np.nonzero(m)
  rows = G0 + (n[w, lane] // 2 if half else n[w, lane])
  W = np.arange(eng.W)[ix][w]
  old = eng.V[W, rows, lane]
  if half:
    hi = (n[w, lane] & 1).astype(bool)
    x = v[w, lane]
    new = np.where(hi, (old & U32(0xffff)) | (x << U32(16)), (old & U32(0xffff0000)) | (x & U32(0xffff)))
  else:
    new = v[w, lane]
  eng.V[W, rows, lane] = new
  eng.written["v"] = -1
