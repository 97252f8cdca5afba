"""PTX effective addresses (PTX ISA 9.0 ch. 5 "State Spaces", 6.4.1 "Addresses as Operands"): `[reg+off]`,
`[var+off]`, `[imm]` in the instruction's state space, or generic addresses routed per lane through the shared and
local windows (decode.SHARED_BASE/LOCAL_BASE); then the shared machine runs the body on the space (Engine.run_body,
lds_address, run_scratch). Global and const variables are guest memory; a kernel's .param buffer too; a function's
.param and .local live in each thread's local window."""
from __future__ import annotations

import numpy as np

from gputwin.emu.program import Op
from gputwin.emu.ptx.decode import LOCAL_BASE, SHARED_BASE, WINDOW
from gputwin.errors import GPUPageFault

U32, U64 = np.uint32, np.uint64
SPACE = {"mem": "global", "lds": "shared", "scratch": "local", "split": "generic"}  # Address.space -> state space


def base_address(eng, op: Op, ix) -> tuple[np.ndarray, str]:
  """(addresses (waves, lanes), the state space they are in) of a memory instruction's `[...]` operand: its plan
  (op.info["address"], decode.plan), evaluated by the machine."""
  p = op.info["address"]
  return np.broadcast_to(eng.address(p, ix), (eng.nwaves(ix), eng.L)), SPACE[p.space]


def windows(a: np.ndarray, m) -> tuple:
  """Generic addresses `a` of threads `m`, by window (PTX ISA 9.0 5.1.7): (threads, space, address in the space)
  for shared, local and global (everything outside the two windows)."""
  sh = (a >= U64(SHARED_BASE)) & (a < U64(SHARED_BASE + WINDOW))
  lo = (a >= U64(LOCAL_BASE)) & (a < U64(LOCAL_BASE + WINDOW))
  return ((m & sh, "shared", a - U64(SHARED_BASE)), (m & lo, "local", a - U64(LOCAL_BASE)),
          (m & ~sh & ~lo, "global", a))


def memop(eng, op: Op, ix, m, st) -> None:
  a, space = base_address(eng, op, ix)
  for m, space, a in (windows(a, m) if space == "generic" else ((m, space, a),)):
    if m.any():
      _run(eng, op, ix, m, st, a, space)


def _run(eng, op, ix, m, st, a, space) -> None:
  st = dict(st)
  op = op.info.get("by_space", {}).get(space, op)  # (the body for this space, where the meaning depends on it)
  try:
    if space == "shared":
      return eng.run_body(op, ix, m, st, eng.lds, eng.lds_address(op, ix, m, (a & U64(0xffffffff)).astype(U32)))
    if space == "local":
      return eng.run_scratch(op, ix, m, st, a)
    eng.run_body(op, ix, m, st, eng.mem, a)
  except GPUPageFault as e:  # name the first thread whose access faulted, and the space
    bad = m & _hits(a, e, space)
    if not bad.any():
      bad = m
    j, lane = (int(x[0]) for x in np.nonzero(bad))
    e.thread = (int(np.arange(eng.W)[ix][j]), lane)
    e.args = (f"{e.args[0]} ({space} address {int(a[j, lane]):#x})",) if e.args else e.args
    raise


def _hits(a, e: GPUPageFault, space: str) -> np.ndarray:
  """The lanes whose access contains the faulting address (windows report the offset in the slot)."""
  va, n = U64(e.va), U64(max(e.size, 1))
  if space == "global":
    return (a <= va) & (va < a + n)
  off = a & U64(0xffffffff)
  return (off <= va) & (va < off + n)
