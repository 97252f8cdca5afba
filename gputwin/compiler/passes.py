"""Optimisation passes over the kernel IR, each named and individually switchable, plus an LLVM-style
opt-bisect: every pass *application* gets a number (1, 2, ...) and `opt_bisect_limit=N` runs only the first N.

  PASSES         name -> function(kernel) -> bool (changed); all mutate the kernel in place
  PIPELINE       the default order (a pass may appear more than once: each appearance is its own application)
  optimize(k, ...)  clone, run the pipeline, log "BISECT: running pass (3) cse on kernel @saxpy" lines when bisecting

Constant folding evaluates through the host reference's own op semantics, so folding can never disagree with
the oracle.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from gputwin.compiler import ir
from gputwin.compiler.ir import Block, Builder, Kernel, Op, Value
from gputwin.compiler.reference import evaluate

# ---------------------------------------------------------------------------------------------------------------
# helpers


def uses(k: Kernel) -> dict[int, int]:
  n: dict[int, int] = {}
  for op in k.walk():
    for v in op.operands: n[id(v)] = n.get(id(v), 0) + 1
  return n


def replace_uses(k: Kernel, m: dict[int, Value]) -> None:
  if not m: return
  def look(v: Value) -> Value:
    while id(v) in m: v = m[id(v)]
    return v
  for op in k.walk(): op.operands = [look(v) for v in op.operands]


def const_of(v: Value):
  o = v.owner
  return o.attrs["value"] if isinstance(o, Op) and o.opcode == "const" else None


def _blocks(b: Block):
  yield b
  for op in b.ops:
    for r in op.regions: yield from _blocks(r)


def _has_effects(op: Op) -> bool:
  if ir.op_class(op) in ir.SIDE_EFFECTS: return True
  return any(_has_effects(o) for r in op.regions for o in r.ops)


# ---------------------------------------------------------------------------------------------------------------
# constant folding

def constfold(k: Kernel) -> bool:
  changed, b = False, Builder(k)
  for blk in list(_blocks(k.body)):
    new = []
    for op in blk.ops:
      cls = ir.op_class(op)
      if cls in ("binary", "cmp", "unary", "math", "fma", "select", "cast") and not op.result.type.is_vec:
        vals = [const_of(v) for v in op.operands]
        if cls == "select" and vals[0] is not None:  # select with a known condition
          replace_uses(k, {id(op.result): op.operands[1 if vals[0] else 2]}); changed = True; continue
        if all(v is not None for v in vals) and not any(o.type.is_vec for o in op.operands):
          c = Op("const", [], [op.result], {"value": ir.normalize(evaluate(op, vals), op.result.type)}, [], op.loc)
          op.result.owner = c
          new.append(c); changed = True; continue
      if op.opcode == "if" and const_of(op.operands[0]) is not None:
        taken = op.regions[0 if const_of(op.operands[0]) else 1]
        ops = taken.ops
        if ops and ops[-1].opcode == "yield":
          replace_uses(k, {id(r): v for r, v in zip(op.results, ops[-1].operands)})
          ops = ops[:-1]
        new.extend(ops); changed = True; continue
      if op.opcode == "for":
        lo, hi = const_of(op.operands[0]), const_of(op.operands[1])
        if lo is not None and hi is not None and lo >= hi:
          replace_uses(k, {id(r): v for r, v in zip(op.results, op.operands[3:])}); changed = True; continue
      new.append(op)
    blk.ops = new
  return changed


# ---------------------------------------------------------------------------------------------------------------
# algebraic simplification

_COMMUTATIVE = {"add", "mul", "and", "or", "xor", "min", "max", "eq", "ne"}


def simplify(k: Kernel) -> bool:
  """Identities that hold bit-exactly for every input, NaN and -0.0 included (so no x*0 or x+0.0 for floats)."""
  changed, m = False, {}
  for op in k.walk():
    if op.opcode in _COMMUTATIVE and const_of(op.operands[0]) is not None and const_of(op.operands[1]) is None:
      op.operands.reverse(); changed = True
    if len(op.results) != 1 or op.regions or not op.operands: continue
    a, t = op.operands, op.result.type
    c1 = const_of(a[1]) if len(a) > 1 else None
    rep = None
    if _identity(op.opcode, t, c1): rep = a[0]
    elif op.opcode in ("and", "or", "min", "max") and a[0] is a[1]: rep = a[0]
    elif op.opcode == "select" and a[1] is a[2]: rep = a[1]
    elif op.opcode in ("neg", "not") and isinstance(a[0].owner, Op) and a[0].owner.opcode == op.opcode:
      rep = a[0].owner.operands[0]
    elif op.opcode in ("cast", "bitcast") and a[0].type == t: rep = a[0]
    elif not t.is_vec and (t.is_int or t.is_bool) and ((op.opcode in ("sub", "xor") and a[0] is a[1]) or
                                                      (op.opcode in ("mul", "and") and c1 is not None and c1 == 0)):
      op.opcode, op.operands, op.attrs = "const", [], {"value": ir.normalize(0, t)}
      changed = True
      continue
    if rep is not None and rep.type == t:
      m[id(op.result)] = rep; changed = True
  replace_uses(k, m)
  return changed


def _identity(code: str, t, c) -> bool:
  """Is `x code c` == x for every x of type t?"""
  if c is None: return False
  if t.scalar.is_float:
    return (code == "add" and _negzero(c)) or (code == "sub" and c == 0 and not _negzero(c)) or \
      (code in ("mul", "div") and c == 1.0)
  ones = True if t.is_bool else -1 if t.is_signed else (1 << t.bits) - 1
  return (code in ("add", "sub", "or", "xor", "shl", "shr") and c == 0) or (code in ("mul", "div") and c == 1) or \
    (code == "and" and c == ones)


def _negzero(x) -> bool: return isinstance(x, float) and x == 0 and np.copysign(1, x) < 0


# ---------------------------------------------------------------------------------------------------------------
# strength reduction

def strength(k: Kernel) -> bool:
  """Integer multiply/divide/remainder by a power of two -> shifts and masks (signed division rounds toward zero,
  so it gets the usual bias: add 2^n - 1 to negative dividends first)."""
  changed, b = False, Builder(k)
  for blk in list(_blocks(k.body)):
    new = []
    for op in blk.ops:
      t = op.result.type if op.results else None
      c = const_of(op.operands[1]) if op.opcode in ("mul", "div", "rem") else None
      if t is None or not t.is_int or t.is_vec or c is None or c <= 1 or c & (c - 1):
        new.append(op); continue
      sh, x = c.bit_length() - 1, op.operands[0]
      b.block, b.loc = Block(), op.loc
      kc = b.const(sh, t)
      if op.opcode == "mul": r = b.emit("shl", [x, kc], t)
      elif not t.is_signed:
        r = b.emit("shr", [x, kc], t) if op.opcode == "div" else b.emit("and", [x, b.const(c - 1, t)], t)
      else:
        ut = ir.Type("u", t.bits)
        sign = b.emit("shr", [x, b.const(t.bits - 1, t)], t)
        bias = b.emit("bitcast", [b.emit("shr", [b.emit("bitcast", [sign], ut), b.const(t.bits - sh, ut)], ut)], t)
        q = b.emit("shr", [b.emit("add", [x, bias], t), kc], t)
        r = q if op.opcode == "div" else b.emit("sub", [x, b.emit("shl", [q, kc], t)], t)
      new.extend(b.block.ops)
      replace_uses(k, {id(op.result): r}); changed = True
    blk.ops = new
  return changed


# ---------------------------------------------------------------------------------------------------------------
# common subexpression elimination (scoped: a value computed outside a region is reused inside it)

def cse(k: Kernel) -> bool:
  m: dict[int, Value] = {}

  def key(op: Op):
    look = lambda v: id(m.get(id(v), v))
    return (op.opcode, tuple(look(v) for v in op.operands), tuple(sorted((a, repr(v)) for a, v in op.attrs.items())),
            tuple(str(r.type) for r in op.results))

  def run(b: Block, seen: dict):
    seen = dict(seen)
    for op in b.ops:
      for r in op.regions: run(r, seen)
      if ir.op_class(op) in ir.PURE and not op.regions and len(op.results) == 1:
        kk = key(op)
        if kk in seen: m[id(op.result)] = seen[kk]
        else: seen[kk] = op.result
  run(k.body, {})
  replace_uses(k, m)
  return bool(m)


# ---------------------------------------------------------------------------------------------------------------
# dead code elimination

def dce(k: Kernel) -> bool:
  """Remove ops whose results are unused and that have no side effects (loads and allocations included)."""
  changed = False
  while True:
    n, removed = uses(k), False
    for blk in _blocks(k.body):
      keep = []
      for op in blk.ops:
        dead = op.opcode != "yield" and not _has_effects(op) and all(n.get(id(r), 0) == 0 for r in op.results)
        if dead: removed = True
        else: keep.append(op)
      blk.ops = keep
    if not removed: return changed
    changed = True


# ---------------------------------------------------------------------------------------------------------------
# loop unrolling

UNROLL_MAX_TRIPS, UNROLL_MAX_OPS = 8, 400


def _clone_ops(ops: list[Op], m: dict[int, Value], b: Builder) -> list[Op]:
  out = []
  for op in ops:
    no = Op(op.opcode, [m.get(id(v), v) for v in op.operands], [], dict(op.attrs), [], op.loc)
    no.regions = []
    for r in op.regions:
      nb = Block([b.value(a.type, a.name.rstrip("0123456789_") or "v") for a in r.args])
      m.update({id(a): na for a, na in zip(r.args, nb.args)})
      nb.ops = _clone_ops(r.ops, m, b)
      no.regions.append(nb)
    no.results = [Value(b.name(r.name.rstrip("0123456789_") or "v"), r.type, no) for r in op.results]
    m.update({id(r): nr for r, nr in zip(op.results, no.results)})
    out.append(no)
  return out


def unroll(k: Kernel) -> bool:
  """Fully unroll `for` loops with constant bounds and at most UNROLL_MAX_TRIPS iterations (innermost first)."""
  changed, b = False, Builder(k)
  for blk in reversed(list(_blocks(k.body))):
    new = []
    for op in blk.ops:
      if op.opcode != "for" or any(const_of(v) is None for v in op.operands[:3]):
        new.append(op); continue
      lo, hi, st = (const_of(v) for v in op.operands[:3])
      trips = range(lo, hi, st) if st > 0 else range(0)
      body = op.regions[0]
      if len(trips) > UNROLL_MAX_TRIPS or len(trips) * sum(1 for _ in ir.walk(body)) > UNROLL_MAX_OPS:
        new.append(op); continue
      carried = list(op.operands[3:])
      for i in trips:
        b.block, b.loc = Block(), op.loc
        m = {id(body.args[0]): b.const(i, body.args[0].type)}
        m.update({id(a): v for a, v in zip(body.args[1:], carried)})
        ops = b.block.ops + _clone_ops(body.ops, m, b)
        y = ops.pop()
        carried = list(y.operands)
        new.extend(ops)
      replace_uses(k, {id(r): v for r, v in zip(op.results, carried)})
      changed = True
    blk.ops = new
  return changed


# ---------------------------------------------------------------------------------------------------------------
# memory-op vectorisation

def _split_index(v: Value) -> tuple[Value, int]:
  o = v.owner
  if isinstance(o, Op) and o.opcode == "add" and const_of(o.operands[1]) is not None:
    return o.operands[0], const_of(o.operands[1])
  return v, 0


def _multiple_of(v: Value, n: int, depth: int = 4) -> bool:
  """Is v (an integer) provably a multiple of n?"""
  c = const_of(v)
  if c is not None: return c % n == 0
  o = v.owner
  if depth == 0 or not isinstance(o, Op): return False
  a = o.operands
  if o.opcode == "mul": return any(_multiple_of(x, n, depth - 1) for x in a)
  if o.opcode == "shl" and const_of(a[1]) is not None: return (1 << const_of(a[1])) % n == 0 or \
      _multiple_of(a[0], n, depth - 1)
  if o.opcode in ("add", "sub"): return all(_multiple_of(x, n, depth - 1) for x in a)
  return False


def vectorize(k: Kernel) -> bool:
  """Merge runs of 4 (else 2) loads or stores of consecutive 32-bit elements p[b+c..b+c+n-1] into one vector
  access. Legal only when nothing between the first and last op of the run writes memory or synchronises (pure
  ops, and other loads for a run of loads; global pointers may alias), and b+c is provably a multiple of n
  (aligned access)."""
  changed, b = False, Builder(k)
  for blk in list(_blocks(k.body)):
    i, new = 0, []
    ops = blk.ops
    while i < len(ops):
      op = ops[i]
      if op.opcode not in ("load", "store") or op.operands[0].type.elem.bits != 32 or \
         (op.results and op.result.type.is_vec) or (op.opcode == "store" and op.operands[2].type.is_vec):
        new.append(op); i += 1; continue
      base, c0 = _split_index(op.operands[1])
      run, j, between = [op], i + 1, []
      while j < len(ops) and len(run) < 4:
        o = ops[j]
        if o.opcode == op.opcode and o.operands[0] is op.operands[0] and not (o.results and o.result.type.is_vec):
          bb, cc = _split_index(o.operands[1])
          if bb is base and cc == c0 + len(run): run.append(o); j += 1; continue
          break
        if (ir.op_class(o) not in ir.PURE or o.regions) and not (o.opcode == op.opcode == "load"): break
        between.append(o); j += 1
      n = 4 if len(run) >= 4 else 2 if len(run) >= 2 else 1
      if n == 1 or not (_multiple_of(base, n) and c0 % n == 0):
        new.append(op); i += 1; continue
      run = run[:n]
      last = ops.index(run[-1])
      mid = [o for o in ops[i + 1:last] if o not in run]
      t = op.operands[0].type.elem.vec(n)
      b.block, b.loc = Block(), op.loc
      if op.opcode == "load":
        vec = b.emit("load", [op.operands[0], op.operands[1]], t)
        m = {id(r.result): b.emit("extract", [vec], t.scalar, {"lane": lane}) for lane, r in enumerate(run)}
        new.extend(b.block.ops + mid)
        replace_uses(k, m)
      else:
        # values stored later in the run may be computed by the pure ops between: emit the vector store after them
        vec = b.emit("vector", [r.operands[2] for r in run], t)
        b.emit("store", [op.operands[0], op.operands[1], vec])
        new.extend(mid + b.block.ops)
      i, changed = last + 1, True
    blk.ops = new
  return changed


# ---------------------------------------------------------------------------------------------------------------
# pass manager with opt-bisect

PASSES: dict[str, Callable[[Kernel], bool]] = {
  "simplify": simplify, "constfold": constfold, "strength": strength, "cse": cse, "dce": dce, "unroll": unroll,
  "vectorize": vectorize}
PIPELINE = ("simplify", "constfold", "strength", "cse", "dce", "unroll", "constfold", "simplify", "cse", "vectorize",
            "dce")


def optimize(k: Kernel, *, pipeline: tuple[str, ...] | None = None, disable: tuple[str, ...] = (),
             opt_bisect_limit: int | None = None, print_after_all: bool = False,
             log: Callable[[str], None] | None = None,
             passes: dict[str, Callable] | None = None) -> Kernel:
  """Run the pipeline on a copy of `k`. `disable` skips passes by name (not counted as applications);
  `opt_bisect_limit` = N runs only applications 1..N (LLVM: -opt-bisect-limit); -1 or None runs all.
  `log` receives the BISECT lines (when bisecting) and the IR dumps (print_after_all)."""
  table = dict(PASSES, **(passes or {}))
  k = ir.clone(k)
  count = 0
  for name in pipeline or PIPELINE:
    if name not in table: raise ValueError(f"unknown pass {name!r} (known: {', '.join(table)})")
    if name in disable: continue
    count += 1
    run = opt_bisect_limit is None or opt_bisect_limit < 0 or count <= opt_bisect_limit
    if opt_bisect_limit is not None and log:
      log(f"BISECT: {'running' if run else 'NOT running'} pass ({count}) {name} on kernel @{k.name}")
    if not run: continue
    table[name](k)
    ir.verify(k)
    if print_after_all and log: log(f"; *** IR Dump After {name} ({count}) on @{k.name} ***\n{ir.print_kernel(k)}")
  return k


def applications(pipeline: tuple[str, ...] | None = None, disable: tuple[str, ...] = ()) -> list[tuple[int, str]]:
  """The numbered pass applications the pipeline would run: [(1, 'simplify'), (2, 'constfold'), ...]."""
  names = [n for n in (pipeline or PIPELINE) if n not in disable]
  return list(enumerate(names, 1))
