"""The kernel IR: typed SSA with structured control flow (MLIR scf-like `if`/`for` regions that yield values).

Target-neutral on purpose: no registers, no wave size, no address arithmetic. A global/local/private pointer is an
opaque base; memory ops take (pointer, element index), so a backend chooses its own addressing (AMD: 64-bit
VGPR address or LDS offset; PTX: ld.global/ld.shared; ir3: ldg/ldl; host: plain pointers).

Text form (printer and parser round-trip; `# file:line:col` comments carry Python source locations):

  kernel @saxpy(%a: f32, %x: global<f32>, %y: global<f32>, %n: i32) {
    %0: i32 = workitem.id.x
    %c: bool = lt %0, %n
    if %c {
      %v: f32 = load %x, %0
      store %y, %0, %v
    }
    %s: f32 = for %i: i32 = %lo, %hi, %st iter(%acc: f32 = %init) {
      ...
      yield %acc2
    }
  }
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterator

from gputwin.errors import CompileError

# ---------------------------------------------------------------------------------------------------------------
# Types

SPACES = ("global", "local", "private")


@dataclass(frozen=True)
class Type:
  """kind: 'i' signed int, 'u' unsigned int, 'f' IEEE float, 'bf' bfloat16, 'bool', 'ptr'.
  lanes > 1 makes a short vector (2, 3, 4, 8, 16). A pointer has a space and an element type."""
  kind: str
  bits: int = 0
  lanes: int = 1
  space: str = ""
  elem: Type | None = None

  def __str__(self) -> str:
    if self.kind == "ptr": return f"{self.space}<{self.elem}>"
    s = "bool" if self.kind == "bool" else f"{self.kind}{self.bits}"
    return s if self.lanes == 1 else f"{s}x{self.lanes}"

  __repr__ = __str__
  @property
  def is_int(self) -> bool: return self.kind in ("i", "u")
  @property
  def is_signed(self) -> bool: return self.kind == "i"
  @property
  def is_float(self) -> bool: return self.kind in ("f", "bf")
  @property
  def is_bool(self) -> bool: return self.kind == "bool"
  @property
  def is_ptr(self) -> bool: return self.kind == "ptr"
  @property
  def is_vec(self) -> bool: return self.lanes > 1
  @property
  def scalar(self) -> Type: return Type(self.kind, self.bits) if self.lanes > 1 else self
  def vec(self, n: int) -> Type: return Type(self.kind, self.bits, n) if n > 1 else self.scalar
  @property
  def nbytes(self) -> int: return 8 if self.is_ptr else max(1, self.bits // 8) * self.lanes


def _t(k, b): return Type(k, b)


i8, i16, i32, i64 = (_t("i", b) for b in (8, 16, 32, 64))
u8, u16, u32, u64 = (_t("u", b) for b in (8, 16, 32, 64))
f16, f32, f64, bf16 = _t("f", 16), _t("f", 32), _t("f", 64), _t("bf", 16)
boolean = Type("bool", 1)
SCALARS = {str(t): t for t in (i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, boolean)}
VEC_LANES = (2, 3, 4, 8, 16)


def ptr(space: str, elem: Type) -> Type: return Type("ptr", 64, 1, space, elem)


_TYPE_RE = re.compile(r"^(global|local|private)<(.+)>$|^([a-z]+?\d*)(?:x(\d+))?$")


def parse_type(s: str) -> Type:
  s = s.strip()
  m = _TYPE_RE.match(s)
  if m and m.group(1): return ptr(m.group(1), parse_type(m.group(2)))
  if m and m.group(3) in SCALARS:
    t, n = SCALARS[m.group(3)], int(m.group(4) or 1)
    if n != 1 and n not in VEC_LANES: raise CompileError(f"vector of {n} lanes (allowed: {VEC_LANES})")
    return t.vec(n) if n > 1 else t
  raise CompileError(f"unknown type {s!r}")


# ---------------------------------------------------------------------------------------------------------------
# Values, ops, blocks

@dataclass(frozen=True)
class Loc:
  file: str = ""
  line: int = 0
  col: int = 0
  def __str__(self) -> str: return f"{self.file}:{self.line}:{self.col}"


class Value:
  __slots__ = ("name", "type", "owner")

  def __init__(self, name: str, type: Type, owner: object = None):
    self.name, self.type, self.owner = name, type, owner

  def __repr__(self) -> str: return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Block:
  args: list[Value] = field(default_factory=list)
  ops: list[Op] = field(default_factory=list)


@dataclass(eq=False)
class Op:
  opcode: str
  operands: list[Value]
  results: list[Value] = field(default_factory=list)
  attrs: dict = field(default_factory=dict)
  regions: list[Block] = field(default_factory=list)
  loc: Loc | None = None

  @property
  def result(self) -> Value: return self.results[0]

  def __repr__(self) -> str: return print_op(self).strip()


@dataclass(eq=False)
class Kernel:
  name: str
  params: list[Value]
  body: Block
  loc: Loc | None = None

  def walk(self) -> Iterator[Op]: return walk(self.body)
  def __str__(self) -> str: return print_kernel(self)


def walk(block: Block) -> Iterator[Op]:
  """Every op, pre-order, nested regions included."""
  for op in block.ops:
    yield op
    for r in op.regions: yield from walk(r)


# ---------------------------------------------------------------------------------------------------------------
# Opcode table: opcode -> (class, operand count or -1). Classes drive the verifier, passes and backends.

BINARY = ("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr")
CMP = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "not", "abs")
MATH = ("sqrt", "rsqrt", "exp", "exp2", "log", "log2", "sin", "cos", "floor", "ceil", "trunc")
IDS = tuple(f"{k}.{d}" for k in ("workitem.id", "workgroup.id", "workgroup.size", "num_workgroups") for d in "xyz")
ATOMICS = tuple(f"atomic.{k}" for k in ("add", "sub", "min", "max", "and", "or", "xor", "xchg"))
OPCODES = {**{o: ("binary", 2) for o in BINARY}, **{o: ("cmp", 2) for o in CMP}, **{o: ("unary", 1) for o in UNARY},
           **{o: ("math", 1) for o in MATH}, **{o: ("id", 0) for o in IDS}, **{o: ("atomic", 3) for o in ATOMICS},
           "fma": ("fma", 3), "select": ("select", 3), "cast": ("cast", 1), "bitcast": ("cast", 1),
           "const": ("const", 0), "vector": ("vector", -1), "extract": ("extract", 1), "load": ("load", 2),
           "store": ("store", 3), "shared": ("alloc", 0), "alloca": ("alloc", 0), "barrier": ("barrier", 0),
           "if": ("if", 1), "for": ("for", -1), "yield": ("yield", -1)}
PURE = {"binary", "cmp", "unary", "math", "id", "fma", "select", "cast", "const", "vector", "extract"}
SIDE_EFFECTS = {"store", "atomic", "barrier"}


def op_class(op: Op) -> str: return OPCODES[op.opcode][0]


# ---------------------------------------------------------------------------------------------------------------
# Builder: the one way passes and the frontend make ops (fresh names, result types)

class Builder:
  """Makes ops with fresh, unique value names (so printed IR always re-parses) at the current source location;
  `emit` appends to `block`, `make` only builds (for ops whose regions are filled in later)."""

  def __init__(self, kernel: Kernel | None = None):
    self.n = 0
    self.block: Block | None = kernel.body if kernel else None
    self.loc: Loc | None = None
    self.taken: set[str] = set()
    if kernel:
      self.taken |= {p.name for p in kernel.params}
      for op in kernel.walk():
        self.taken |= {v.name for v in op.results} | {a.name for r in op.regions for a in r.args}

  def name(self, hint: str = "") -> str:
    while True:
      s = hint if hint and hint not in self.taken else f"{hint or ''}{self.n}"
      self.n += 1
      if s not in self.taken:
        self.taken.add(s)
        return s

  def value(self, type: Type, hint: str = "", owner=None) -> Value: return Value(self.name(hint), type, owner)

  def make(self, opcode: str, operands: list[Value], types: list[Type] = (), attrs: dict | None = None,
           regions: list[Block] | None = None, hint: str = "") -> Op:
    op = Op(opcode, list(operands), [], dict(attrs or {}), list(regions or []), self.loc)
    op.results = [Value(self.name(hint), t, op) for t in types]
    return op

  def emit(self, opcode: str, operands: list[Value], type: Type | None = None, attrs: dict | None = None,
           hint: str = "") -> Value | None:
    op = self.make(opcode, operands, [type] if type else [], attrs, hint=hint)
    self.block.ops.append(op)
    return op.results[0] if type else None

  def const(self, value, type: Type) -> Value: return self.emit("const", [], type, {"value": normalize(value, type)})


def normalize(v, t: Type):
  """A Python constant as type `t` holds it: ints wrapped to width, floats rounded to the format."""
  import numpy as np
  if t.is_bool: return bool(v)
  if t.is_int:
    v, m = int(v), (1 << t.bits)
    v &= m - 1
    return v - m if t.is_signed and v >= m >> 1 else v
  v = float(v)
  if t.kind == "bf": return float(bf16_round(np.array([v], np.float32))[0])
  return float({16: np.float16, 32: np.float32, 64: np.float64}[t.bits](v))


def bf16_round(x):
  """float32 array -> float32 array rounded to bfloat16 (round to nearest even; NaN stays NaN)."""
  import numpy as np
  x = np.asarray(x, np.float32)
  b = x.view(np.uint32).astype(np.uint64)
  r = ((b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000).astype(np.uint32)
  return np.where(np.isnan(x), x, r.view(np.float32))


# ---------------------------------------------------------------------------------------------------------------
# Printer

def _lit(v) -> str:
  if isinstance(v, bool): return "true" if v else "false"
  if isinstance(v, float):
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
  return str(v)


def print_op(op: Op, ind: str = "") -> str:
  res = ", ".join(f"%{r.name}: {r.type}" for r in op.results)
  head = f"{ind}{res + ' = ' if res else ''}{op.opcode}"
  loc = f"  # {op.loc}" if op.loc and op.loc.line else ""
  args = ", ".join(f"%{v.name}" for v in op.operands)
  if op.opcode == "const": return f"{head} {_lit(op.attrs['value'])}{loc}\n"
  if op.opcode in ("shared", "alloca"): return f"{head} {op.attrs['count']}{loc}\n"
  if op.opcode == "extract": return f"{head} {args}, {op.attrs['lane']}{loc}\n"
  if op.opcode == "if":
    s = f"{head} {args} {{{loc}\n{print_block(op.regions[0], ind + '  ')}{ind}}}"
    if op.regions[1].ops: s += f" else {{\n{print_block(op.regions[1], ind + '  ')}{ind}}}"
    return s + "\n"
  if op.opcode == "for":
    b = op.regions[0]
    it = ", ".join(f"%{a.name}: {a.type} = %{v.name}" for a, v in zip(b.args[1:], op.operands[3:]))
    lo, hi, st = (f"%{v.name}" for v in op.operands[:3])
    return (f"{head} %{b.args[0].name}: {b.args[0].type} = {lo}, {hi}, {st}{f' iter({it})' if it else ''} {{{loc}\n"
            f"{print_block(b, ind + '  ')}{ind}}}\n")
  return f"{head}{' ' + args if args else ''}{loc}\n"


def print_block(b: Block, ind: str) -> str: return "".join(print_op(o, ind) for o in b.ops)


def print_kernel(k: Kernel) -> str:
  ps = ", ".join(f"%{p.name}: {p.type}" for p in k.params)
  loc = f"  # {k.loc}" if k.loc and k.loc.line else ""
  return f"kernel @{k.name}({ps}) {{{loc}\n{print_block(k.body, '  ')}}}\n"


# ---------------------------------------------------------------------------------------------------------------
# Parser (line-oriented: one op per line; region openers end with '{', closers are '}' or '} else {')

_LOC_RE = re.compile(r"\s*#\s*(.*):(\d+):(\d+)\s*$")
_NAME = r"%([\w.]+)"


class _Parser:
  def __init__(self, text: str):
    self.lines = text.splitlines()
    self.i = 0
    self.env: dict[str, Value] = {}

  def err(self, msg: str) -> CompileError:
    ln = self.lines[self.i - 1] if 0 < self.i <= len(self.lines) else ""
    return CompileError(f"<ir>:{self.i}: {msg}\n  {ln.strip()}")

  def next(self) -> tuple[str, Loc | None]:
    while self.i < len(self.lines):
      raw = self.lines[self.i]
      self.i += 1
      m = _LOC_RE.search(raw)
      loc = Loc(m.group(1), int(m.group(2)), int(m.group(3))) if m else None
      s = raw[:m.start()] if m else raw.split("#", 1)[0] if raw.lstrip().startswith("#") else raw
      if s.strip(): return s.strip(), loc
    raise self.err("unexpected end of input")

  def define(self, name: str, t: Type, owner=None) -> Value:
    if name in self.env: raise self.err(f"%{name} defined twice")
    v = self.env[name] = Value(name, t, owner)
    return v

  def use(self, tok: str) -> Value:
    tok = tok.strip()
    if not tok.startswith("%") or tok[1:] not in self.env: raise self.err(f"use of undefined value {tok}")
    return self.env[tok[1:]]

  def decl(self, s: str) -> tuple[str, Type]:
    m = re.fullmatch(_NAME + r"\s*:\s*(.+)", s.strip())
    if not m: raise self.err(f"expected '%name: type', got {s.strip()!r}")
    try: return m.group(1), parse_type(m.group(2))
    except CompileError as e: raise self.err(str(e)) from None

  def kernel(self) -> Kernel:
    line, loc = self.next()
    m = re.fullmatch(r"kernel\s+@([\w.]+)\s*\((.*)\)\s*\{", line)
    if not m: raise self.err("expected 'kernel @name(params) {'")
    params = [self.define(*self.decl(p)) for p in _split(m.group(2))]
    body, end = self.block()
    if end != "}": raise self.err("unexpected 'else' at kernel level")
    return Kernel(m.group(1), params, body, loc)

  def block(self, args: list[Value] = ()) -> tuple[Block, str]:
    b = Block(list(args))
    while True:
      line, loc = self.next()
      if line.startswith("}"): return b, line
      b.ops.append(self.op(line, loc))

  def op(self, line: str, loc: Loc | None) -> Op:
    res: list[tuple[str, Type]] = []
    m = re.match(r"((?:%[\w.]+\s*:\s*[^=,]+?(?:\s*,\s*)?)+)\s*=\s*(?=[a-z])", line)
    if m:
      res = [self.decl(d) for d in _split(m.group(1))]
      line = line[m.end():]
    opcode, _, rest = line.partition(" ")
    rest = rest.strip()
    if opcode not in OPCODES: raise self.err(f"unknown opcode {opcode!r}")
    op = Op(opcode, [], [], {}, [], loc)
    if opcode == "if":
      if not rest.endswith("{"): raise self.err("expected '{' after if condition")
      op.operands = [self.use(rest[:-1])]
      then, end = self.block()
      els = Block()
      if re.fullmatch(r"\}\s*else\s*\{", end): els, end = self.block()
      if end != "}": raise self.err("expected '}'")
      op.regions = [then, els]
    elif opcode == "for":
      m = re.fullmatch(_NAME + r"\s*:\s*(\S+)\s*=\s*(%[\w.]+)\s*,\s*(%[\w.]+)\s*,\s*(%[\w.]+)(?:\s+iter\((.*)\))?\s*\{",
                       rest)
      if not m: raise self.err("expected 'for %i: T = %lo, %hi, %step [iter(%a: T = %init, ...)] {'")
      bounds = [self.use(m.group(k)) for k in (3, 4, 5)]
      inits, bargs = [], []
      for it in _split(m.group(6) or ""):
        d, _, v = it.rpartition("=")
        inits.append(self.use(v))
        bargs.append(self.decl(d))
      iv = self.define(m.group(1), parse_type(m.group(2)))
      args = [iv] + [self.define(n, t) for n, t in bargs]
      body, end = self.block(args)
      if end != "}": raise self.err("expected '}' closing for")
      op.operands, op.regions = bounds + inits, [body]
    else:
      toks = _split(rest)
      if opcode == "const":
        if len(toks) != 1 or not res: raise self.err("const takes one literal")
        op.attrs["value"] = _parse_lit(toks[0], res[0][1], self)
      elif opcode in ("shared", "alloca"):
        op.attrs["count"] = int(toks[0]) if len(toks) == 1 and toks[0].isdigit() else _bad(self, "expected a count")
      elif opcode == "extract":
        if len(toks) != 2 or not toks[1].isdigit(): raise self.err("extract takes %vector, lane")
        op.operands, op.attrs["lane"] = [self.use(toks[0])], int(toks[1])
      else:
        op.operands = [self.use(t) for t in toks]
    op.results = [self.define(n, t, op) for n, t in res]
    return op


def _bad(p: _Parser, msg: str): raise p.err(msg)


def _split(s: str) -> list[str]:
  """Split on top-level commas (types contain no commas; parenthesised iter lists are handled by the regex)."""
  out, depth, cur = [], 0, ""
  for c in s:
    depth += c in "(<" and 1 or c in ")>" and -1 or 0
    if c == "," and depth == 0: out.append(cur); cur = ""
    else: cur += c
  return [x.strip() for x in out + [cur] if x.strip()]


def _parse_lit(tok: str, t: Type, p: _Parser):
  try:
    if t.is_bool: return {"true": True, "false": False}[tok]
    if t.is_int: return int(tok, 0)
    return float(tok)
  except (KeyError, ValueError):
    raise p.err(f"bad {t} literal {tok!r}") from None


def parse(text: str) -> Kernel:
  """Parse one kernel from its text form; the result is verified."""
  p = _Parser(text)
  k = p.kernel()
  verify(k)
  return k


# ---------------------------------------------------------------------------------------------------------------
# Verifier

def verify(k: Kernel) -> Kernel:
  """Reject malformed IR: undefined or twice-defined values, wrong operand counts or types, misplaced yields.
  The message names the op, its source location and the rule it breaks."""
  defined: set[int] = set()
  names: set[str] = set()

  def err(op: Op | None, msg: str) -> CompileError:
    text = f"\n  {print_op(op).strip()}" if op is not None else ""
    return CompileError(f"invalid IR in kernel @{k.name}: {msg}{text}", loc=op.loc if op is not None else None)

  def define(v: Value, op):
    if id(v) in defined or v.name in names: raise err(op, f"%{v.name} defined twice")
    defined.add(id(v)); names.add(v.name)

  for p in k.params:
    define(p, None)
    if p.type.is_ptr and p.type.space != "global": raise err(None, f"parameter %{p.name}: only global pointers")

  def block(b: Block, yields: list[Type] | None, scope: set[int]):
    scope = set(scope)
    for a in b.args: define(a, None); scope.add(id(a))
    for i, op in enumerate(b.ops):
      for v in op.operands:
        if id(v) not in scope: raise err(op, f"%{v.name} is not defined before this use (or not visible here)")
      check(op, yields, last=i == len(b.ops) - 1)
      for r in op.regions:
        ys = [t.type for t in op.results]
        block(r, ys, scope)
      for v in op.results: define(v, op); scope.add(id(v))
    if yields and (not b.ops or b.ops[-1].opcode != "yield"):
      raise err(b.ops[-1] if b.ops else None, f"region must end with yield of {len(yields)} value(s)")

  def same(op, ts, what="operands"):
    if len({str(t) for t in ts}) > 1: raise err(op, f"{what} must have the same type, got {', '.join(map(str, ts))}")

  def check(op: Op, yields, last: bool):
    cls, n = OPCODES[op.opcode]
    ots = [v.type for v in op.operands]
    rts = [v.type for v in op.results]
    if n >= 0 and len(ots) != n: raise err(op, f"{op.opcode} takes {n} operand(s), got {len(ots)}")
    want_results = {"store": 0, "barrier": 0, "yield": 0, "if": None, "for": None}.get(op.opcode, 1)
    if want_results is not None and len(rts) != want_results:
      raise err(op, f"{op.opcode} has {want_results} result(s), got {len(rts)}")
    r = rts[0] if rts else None
    if cls in ("binary", "cmp", "unary", "math", "fma", "select", "cast", "extract", "vector", "const"):
      if any(t.is_ptr for t in ots) or (r and r.is_ptr): raise err(op, f"{op.opcode} does not take pointers")
    if cls in ("binary", "fma"):
      same(op, ots + [r])
      s = r.scalar
      if op.opcode in ("and", "or", "xor") and not (s.is_int or s.is_bool):
        raise err(op, f"{op.opcode} needs integer or bool operands, got {r}")
      if op.opcode in ("shl", "shr") and not s.is_int: raise err(op, f"{op.opcode} needs integer operands, got {r}")
      if op.opcode in ("add", "sub", "mul", "div", "rem", "min", "max") and s.is_bool:
        raise err(op, f"{op.opcode} does not take bool")
      if cls == "fma" and not s.is_float: raise err(op, "fma needs float operands")
    elif cls == "cmp":
      same(op, ots)
      if r != boolean.vec(ots[0].lanes): raise err(op, f"{op.opcode} yields {boolean.vec(ots[0].lanes)}, not {r}")
    elif cls == "unary":
      same(op, ots + [r])
      if op.opcode == "not" and not (r.scalar.is_int or r.scalar.is_bool): raise err(op, "not needs int or bool")
      if op.opcode in ("neg", "abs") and r.scalar.is_bool: raise err(op, f"{op.opcode} does not take bool")
    elif cls == "math":
      if not ots[0].scalar.is_float: raise err(op, f"{op.opcode} needs a float operand, got {ots[0]}")
      same(op, ots + [r])
    elif cls == "select":
      if ots[0] != boolean.vec(r.lanes) and ots[0] != boolean:
        raise err(op, f"select condition must be bool, got {ots[0]}")
      same(op, ots[1:] + [r])
    elif cls == "cast":
      if ots[0].lanes != r.lanes: raise err(op, f"{op.opcode} cannot change lane count ({ots[0]} -> {r})")
      if op.opcode == "bitcast" and ots[0].nbytes != r.nbytes: raise err(op, f"bitcast {ots[0]} -> {r} changes size")
    elif cls == "const":
      if r.is_vec: raise err(op, "const must be scalar (build vectors with `vector`)")
      v = op.attrs.get("value")
      if v is None or (r.is_float and not isinstance(v, float)) or (r.is_int and (isinstance(v, bool) or
                                                                                   not isinstance(v, int))):
        raise err(op, f"const value {v!r} does not match {r}")
      if r.is_int and normalize(v, r) != v: raise err(op, f"const {v} out of range for {r}")
    elif cls == "vector":
      if r.lanes != len(ots) or not ots: raise err(op, f"vector of {len(ots)} values cannot be {r}")
      same(op, ots + [r.scalar], "vector elements")
    elif cls == "extract":
      if not ots[0].is_vec or not 0 <= op.attrs.get("lane", -1) < ots[0].lanes or r != ots[0].scalar:
        raise err(op, f"extract needs a vector and a lane in range, yielding its element type")
    elif cls == "id":
      if r != i32: raise err(op, f"{op.opcode} yields i32")
    elif cls in ("load", "store", "atomic"):
      p, idx = ots[0], ots[1]
      if not p.is_ptr: raise err(op, f"{op.opcode} needs a pointer as first operand, got {p}")
      if not idx.is_int or idx.is_vec: raise err(op, f"{op.opcode} index must be a scalar integer, got {idx}")
      val = r if cls == "load" else ots[2]
      if val.scalar != p.elem or val.lanes not in (1,) + VEC_LANES:
        raise err(op, f"{op.opcode} through {p} moves {p.elem} (or a vector of it), not {val}")
      if cls == "atomic":
        if r != val: raise err(op, f"{op.opcode} returns the old value: its result must be {val}, not {r}")
        if val.is_vec or not (val.is_int or (val.is_float and op.opcode in ("atomic.add", "atomic.xchg"))):
          raise err(op, f"{op.opcode} on {val} not supported")
        if p.space == "private": raise err(op, "atomics on private memory make no sense")
    elif cls == "alloc":
      if not (r.is_ptr and r.space == ("local" if op.opcode == "shared" else "private")):
        raise err(op, f"{op.opcode} yields a {'local' if op.opcode == 'shared' else 'private'} pointer, not {r}")
      if not isinstance(op.attrs.get("count"), int) or op.attrs["count"] <= 0: raise err(op, "count must be > 0")
    elif cls == "if":
      if ots[0] != boolean: raise err(op, f"if condition must be bool, got {ots[0]}")
      if len(op.regions) != 2: raise err(op, "if has a then and an else region")
      if rts and not op.regions[1].ops: raise err(op, "if with results needs an else region")
      if any(r.args for r in op.regions): raise err(op, "if regions take no arguments")
    elif cls == "for":
      if len(ots) < 3 or len(op.regions) != 1: raise err(op, "for takes lo, hi, step and a body")
      same(op, ots[:3] + [op.regions[0].args[0].type], "loop bounds and induction variable")
      if not ots[0].is_int or ots[0].is_vec: raise err(op, f"loop bounds must be scalar integers, got {ots[0]}")
      b = op.regions[0]
      if len(b.args) != len(ots) - 2 or len(rts) != len(ots) - 3:
        raise err(op, "for needs one block argument and one result per iter value")
      for a, v, rr in zip(b.args[1:], ots[3:], rts):
        if not (a.type == v == rr): raise err(op, f"iter value %{a.name}: {a.type} initialised with {v}")
    elif cls == "yield":
      if yields is None or not last: raise err(op, "yield must end an if/for region")
      if [str(t) for t in ots] != [str(t) for t in yields]:
        raise err(op, f"yield of ({', '.join(map(str, ots))}) where the region yields ({', '.join(map(str, yields))})")

  block(k.body, None, set(id(p) for p in k.params))
  return k


def clone(k: Kernel) -> Kernel:
  """Deep copy (fresh Value and Op objects, same names and locations) so passes can work on a copy."""
  m: dict[int, Value] = {}
  cp = lambda v, owner=None: m.setdefault(id(v), Value(v.name, v.type, owner))

  def blk(b: Block) -> Block:
    nb = Block([cp(a) for a in b.args])
    for op in b.ops:
      no = Op(op.opcode, [m[id(v)] for v in op.operands], [], dict(op.attrs), [], op.loc)
      no.regions = [blk(r) for r in op.regions]
      no.results = [cp(r, no) for r in op.results]
      nb.ops.append(no)
    return nb
  params = [cp(p) for p in k.params]
  return Kernel(k.name, params, blk(k.body), k.loc)


def rewrite(k: Kernel, rule) -> Kernel:
  """A copy of `k` in which every op `rule(builder, op)` rewrites (it emits replacement ops into the builder's block,
  the last defining the op's result with `redefine`, and returns True) is replaced by those ops, themselves rewritten
  again (an f16 exp becomes an f32 exp becomes exp2 ...); verified."""
  k = clone(k)
  b = Builder(k)

  def expand(op: Op) -> list[Op]:
    for r in op.regions: r.ops = [o for x in r.ops for o in expand(x)]
    b.block, b.loc = Block(), op.loc
    if not rule(b, op): return [op]
    return [o for x in b.block.ops for o in expand(x)]
  k.body.ops = [o for x in k.body.ops for o in expand(x)]
  verify(k)
  return k


def redefine(b: Builder, op: Op, opcode: str, operands: list[Value], attrs: dict | None = None) -> None:
  """The last op of a rewrite: it defines the original op's result value."""
  new = Op(opcode, list(operands), [op.result], dict(attrs or {}), [], op.loc)
  op.result.owner = new
  b.block.ops.append(new)
