"""Questions about a typed pcode body (ir.py) that the emulator and the LLVM backend both ask: which memory it
touches and how its addresses are formed, whether it writes memory, loops, or touches a lane mask only at its own
lane's bit. Answers come from the IR, never from the pcode text.
"""
from __future__ import annotations

import functools
import operator

from gputwin.pcode.ir import E, Program, locals_of


def statements(body, in_loop: bool = False):
  """Every statement of a body, nested ones included, with whether it sits inside a for/while."""
  for st in body:
    yield st, in_loop
    if st.op == "if":
      for _, b in st.args[0]:
        yield from statements(b, in_loop)
      yield from statements(st.args[1], in_loop)
    elif st.op in ("for", "while"):
      yield from statements(st.args[-1], True)


def root(lv: tuple) -> tuple:
  """The lvalue a partial store (`as`, slice, bit) lands in."""
  while lv[0] in ("as", "slice", "bit"):
    lv = lv[1]
  return lv


def _written(body, bits: dict[str, int]) -> tuple[dict, set]:
  """(state register -> the bits every path through the body writes, the registers some statement writes bit ranges
  of)."""
  sliced: set[str] = set()

  def written(body, acc: dict) -> dict:  # name -> bits every path so far writes
    for st in body:
      if st.op == "assign":
        lv = st.args[0]
        while lv[0] == "as":
          lv = lv[1]
        if lv[0] == "state":
          acc[lv[1]] = (1 << bits.get(lv[1], 64)) - 1
        elif lv[0] == "slice" and root(lv)[0] == "state":
          name, lo = root(lv)[1], lv[2]
          sliced.add(name)
          base = lv[1]
          while base[0] == "as":
            base = base[1]
          if base[0] == "state" and getattr(lo, "op", None) == "const":
            acc[name] = acc.get(name, 0) | ((1 << lv[3]) - 1) << int(lo.args[0])
      elif st.op == "if":
        paths = [written(b, dict(acc)) for _, b in st.args[0]] + [written(st.args[1], dict(acc))]
        acc = {k: functools.reduce(operator.and_, (p.get(k, 0) for p in paths)) for k in paths[0]}
      elif st.op in ("for", "while"):  # (its slices count; what it writes is not taken as written on every path)
        written(st.args[-1], dict(acc))
    return acc

  return written(body, {}), sliced


def sliced_outputs(body, bits: dict[str, int]) -> set[str]:
  """State registers (of widths `bits`) that some path through the body writes only part of, by bit ranges
  (`D0[15 : 0].b16 = ...` in one branch, `D0[31 : 16]` in the other): the bits left keep their old value, which the
  caller passes in."""
  done, sliced = _written(body, bits)
  return {n for n in sliced if ~done.get(n, 0) & ((1 << bits.get(n, 64)) - 1)}


def written_bits(body, name: str, bits: int) -> int:
  """The bits of state register `name` (`bits` wide) that every path through the body writes (a mask; 0: none)."""
  return _written(body, {name: bits})[0].get(name, 0)


def peel(e, ops):
  """e without the wrappers named in ops (e.g. bitcasts)."""
  while getattr(e, "op", None) in ops:
    e = e.args[0]
  return e


def lane_bit_of(x, idx) -> str | None:
  """`X.u64[laneId]` (as an expression's operands or an lvalue's): the state name X, else None."""
  if isinstance(x, tuple):  # lvalue
    while x[0] == "as":
      x = x[1]
    base = x[1] if x[0] == "state" else None
  else:
    x = peel(x, ("bitcast",))
    base = x.args[0] if x.op == "state" else None
  i = peel(idx, ("cvt", "bitcast"))
  return base if base is not None and i.op == "wave" and i.args[0] == "laneId" else None


def mem_accesses(body) -> list[tuple]:
  """(address expression, bits) of every MEM[...] a body reads or writes, in order."""
  out = []

  def walk(x):
    if isinstance(x, tuple):
      if x and x[0] == "mem" and len(x) == 3 and hasattr(x[1], "op"):  # an lvalue
        out.append((x[1], x[2]))
      for y in x:
        walk(y)
    elif hasattr(x, "op"):
      if x.op == "mem":
        out.append((x.args[0], x.args[1]))
      walk(x.args)

  for st, _ in statements(body):
    walk(st.args)
  return out


def writes_memory(body) -> bool:
  """Does some statement store to MEM[...] (a store, or the write half of an atomic)?"""
  return any(st.op == "assign" and root(st.args[0])[0] == "mem" for st, _ in statements(body))


def writes_regfile(body, name: str) -> bool:
  """Does some statement store through register file `name` (VGPR[lane][reg] = ..., SGPR[reg] = ...)?"""
  return any(st.op == "assign" and root(st.args[0])[0] == "reg" and root(st.args[0])[1] == name
             for st, _ in statements(body))


def _names(e, out: set, avars=frozenset()) -> set:
  """State names an expression reads (None for locals other than the address ones, memory, calls and lane ids: not
  known before the body)."""
  if hasattr(e, "op"):
    if e.op == "var" and e.args[0] in avars:
      return out
    if e.op == "state":
      out.add(e.args[0])
    elif e.op in ("var", "mem", "call", "lcall", "wave"):
      out.add(None)
    for a in e.args:
      for b in (a if isinstance(a, tuple) else (a,)):
        _names(b, out, avars)
  return out


def adds_offset(body) -> bool:
  """Does the body add the instruction's offset field(s) itself (`MEM[ADDR + OFFSET.u32]`), rather than leave them
  to the effective address (the arguments of CalcDsAddr ...)?"""
  found = []

  def walk(x):
    if isinstance(x, tuple):
      for y in x:
        walk(y)
    elif hasattr(x, "op") and not is_address_call(x):
      if x.op == "state" and x.args[0] in ("OFFSET", "OFFSET0", "OFFSET1"):
        found.append(x)
      walk(x.args)

  for st, _ in statements(body):
    walk(st.args)
  return bool(found)


def is_address_call(e) -> bool:
  """A call of one of the manual's effective-address built-ins (CalcGlobalAddr, CalcDsAddr, ...)."""
  return e.op == "call" and str(e.args[0]).startswith("Calc") and str(e.args[0]).endswith("Addr")


def addr_vars(body) -> set:
  """Locals a body sets only from one address built-in call (RDNA4's `addr = CalcGlobalAddr(...)`): the effective
  address, as ADDR is."""
  sets = {}
  for st, _ in statements(body):
    if st.op == "assign" and root(st.args[0])[0] == "var":
      sets.setdefault(root(st.args[0])[1], []).append(st)
  return {nm for nm, sts in sets.items() if len({repr(st.args[1]) for st in sts}) == 1 and all(
          st.args[0][0] == "var" and st in body for st in sts)  # (RDNA4 DS bodies set it again, the same way)
          and is_address_call(sts[0].args[1])}


def is_addr(e, avars=frozenset()) -> bool:
  """The effective address: state ADDR (possibly zero-extended: its value is below 2**32) or an address local."""
  while e.op in ("cvt", "bitcast") and e.ty.bits >= e.args[0].ty.bits and e.args[0].ty.kind in ("u", "b"):
    e = e.args[0]
  return e.op == "state" and e.args[0] == "ADDR" or e.op == "var" and e.args[0] in avars


def addr_offset(idx, avars=frozenset()):
  """K of an access at `ADDR + K` (None: the access is at ADDR), K the sum of the other terms of a chain of 64-bit
  additions (`ADDR + OFFSET.u32 + 4U`: DS_LOAD_B128's later dwords); raises ValueError for other shapes."""
  if is_addr(idx, avars):
    return None
  terms = _terms(idx)
  at = [k for k, t in enumerate(terms) if is_addr(t, avars)]
  if len(terms) < 2 or len(at) != 1:
    raise ValueError("not ADDR + K")
  rest = terms[:at[0]] + terms[at[0] + 1:]
  k = rest[0]
  for t in rest[1:]:
    k = E("bin", ("+", k, t), idx.ty)
  return k


def _terms(e) -> list:
  """The terms of a chain of 64-bit additions (wrapping: any grouping gives the same sum)."""
  if e.op == "bin" and e.args[0] == "+" and e.ty.bits == 64 and e.ty.kind in "ub":
    return _terms(e.args[1]) + _terms(e.args[2])
  return [e]


def stride(p: Program) -> int:
  """Bytes between consecutive lanes' addresses when a wave accesses memory contiguously: the bytes one lane moves,
  or for two-address DS ops (OFFSET0 / OFFSET1) those of one of its accesses."""
  nbs = [max(bits // 8, 1) for _, bits in mem_accesses(p.body)]
  return nbs[0] if {"OFFSET0", "OFFSET1"} <= set(p.inputs) else sum(nbs)


def plain_mem(p: Program) -> bool:
  """Straight-line assignments with no locals, whose MEM addresses read only inputs the body never writes (global
  and LDS loads and stores): every address is known before the body runs, so a probe can check them all first."""
  avars = addr_vars(p.body)
  if set(locals_of(p.body)) - avars or any(st.op not in ("assign", "note") for st in p.body) or \
     not mem_accesses(p.body):
    return False
  for idx, _ in mem_accesses(p.body):
    try:
      k = addr_offset(idx, avars)
    except ValueError:
      return False
    names = _names(idx, set(), avars)
    if None in names or names & set(p.outputs):
      return False
    if k is not None and _names(k, set()) - {"OFFSET", "OFFSET0", "OFFSET1"}:  # K: fields, the same in every lane
      return False
  return True


def has_loop(body) -> bool:
  return any(st.op in ("for", "while") for st, _ in statements(body))


def bit_written(body, name: str) -> bool:
  """Is state `name` only written lane by lane (`D0.u64[laneId] = ...`, outside loops), as VOPC and carry-outs do?"""
  writes = [(st.args[0][0], loop) for st, loop in statements(body)
            if st.op == "assign" and root(st.args[0])[:2] == ("state", name)]
  return bool(writes) and all(kind == "bit" and not loop for kind, loop in writes)


def lane_bit_only(body, name: str, need_write: bool = True) -> bool:
  """Does the body touch state `name` only as `name.u64[laneId]` (read or written as a bool), and write it?"""
  ok, wrote = [True], [False]

  def expr(e):
    if not hasattr(e, "op"):
      return
    if e.op == "bit" and lane_bit_of(e.args[0], e.args[1]) == name:
      expr(e.args[1])
      return
    if e.op == "state" and e.args[0] == name:
      ok[0] = False
      return
    for a in e.args:
      for b in (a if isinstance(a, tuple) else (a,)):
        expr(b)

  def lval(lv):
    if lv[0] == "bit" and lane_bit_of(lv[1], lv[2]) == name:
      wrote[0] = True
      return
    if lv[0] == "state" and lv[1] == name:
      ok[0] = False
    for a in lv[1:]:
      if isinstance(a, tuple) and a and isinstance(a[0], str):
        lval(a)
      else:
        expr(a)

  for st, _ in statements(body):
    if st.op in ("for", "while"):
      ok[0] = False
    elif st.op == "assign":
      lval(st.args[0])
      expr(st.args[1])
      lv = st.args[0]
      if lv[0] == "bit" and lane_bit_of(lv[1], lv[2]) == name and st.args[1].ty.kind != "bool":
        ok[0] = False
    elif st.op == "if":
      for c, _ in st.args[0]:
        expr(c)
    elif st.op == "eval":
      expr(st.args[0])
  return ok[0] and (wrote[0] or not need_write)


# Built-ins that read a float's encoding rather than its value: class tests (V_CMP_CLASS), frexp, V_DIV_SCALE's
# range checks. A body calling one sees a denormal operand as it is.
ENCODING_READS = frozenset({"exponent", "mantissa", "isDENORM"})


def _exprs(x):
  """Every expression under a statement, expression or tuple of them."""
  if isinstance(x, E):
    yield x
    for a in x.args:
      yield from _exprs(a)
  elif isinstance(x, tuple) or hasattr(x, "args") and not isinstance(x, str):
    for a in (x if isinstance(x, tuple) else x.args):
      yield from _exprs(a)


def float_arithmetic(p: Program) -> bool:
  """Does the body compute with float values (a float +, -, *, /, a comparison of floats, a built-in returning a
  float) and never read a float's encoding (ENCODING_READS)? The float operands and result of such an instruction are
  what the AMD MODE register's FP_DENORM bits flush (emu/amd/decode.py); moves, selects and bit operations on
  floats, and class tests, see denormals as they are."""
  found = False
  for e in _exprs((p.body, tuple(b for _, b, _ in p.lambdas.values()))):
    if e.op == "call" and e.args[0] in ENCODING_READS:
      return False
    found = found or (e.op in ("bin", "call") and e.ty.isf) or (
      e.op == "cmp" and any(isinstance(a, E) and a.ty.isf for a in e.args[1:]))
  return found
