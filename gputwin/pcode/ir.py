"""Typed IR for pcode: the parser's AST with every expression typed, names resolved, constants folded and dead
stores to locals removed.

Types are `Ty(kind, bits)`: kind `u`/`i` (unsigned/signed integer), `b` (raw bits, behaves as unsigned), `f` (IEEE
float: 16, 32, 64), `bf` (bfloat16), `bool` (a 1-bit truth value) and `int` (an untyped integer constant or loop
counter, which takes the type of the other operand, as in the manual). Registers the body reads before writing are
*state inputs*; registers it writes are *state outputs*; `inputs`/`outputs` give each one's width in bits.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputwin.errors import PcodeError
from gputwin.pcode.parser import Node


@dataclass(frozen=True, slots=True)
class Ty:
  kind: str
  bits: int

  def __repr__(self) -> str: return {"int": "int", "bool": "bool"}.get(self.kind, f"{self.kind}{self.bits}")

  @property
  def isf(self) -> bool: return self.kind in ("f", "bf")


INT, BOOL = Ty("int", 64), Ty("bool", 1)
U32, U64, I32, F32, F64 = Ty("u", 32), Ty("u", 64), Ty("i", 32), Ty("f", 32), Ty("f", 64)


@dataclass(frozen=True, slots=True)
class E:
  """A typed IR expression: `op` with `args` (sub-expressions or plain values) and its result type."""
  op: str
  args: tuple
  ty: Ty

  def __repr__(self) -> str:
    if self.op in ("const", "var", "state", "loopvar"):
      return f"{self.args[0]!r}:{self.ty!r}" if self.op == "const" else f"{self.args[0]}:{self.ty!r}"
    return f"{self.op}[{self.ty!r}]({', '.join(map(repr, self.args))})"


@dataclass(frozen=True, slots=True)
class S:
  """A statement: assign(lval, expr), if(arms, else), for(var, lo, hi, body), while, break, return, note, eval."""
  op: str
  args: tuple
  at: tuple[int, int] = (0, 0)

  def __repr__(self) -> str: return f"{self.op}({', '.join(map(repr, self.args))})"


@dataclass
class Program:
  arch: str
  inst: str
  body: tuple
  inputs: dict[str, int]  # state register -> width in bits (read before written)
  outputs: dict[str, int]  # state register -> width in bits (written)
  regfiles: set[str] = field(default_factory=set)  # VGPR/SGPR/... accessed by index (whole-wave access)
  mem: str = ""  # "", "r", "w", "rw": how the body uses MEM
  calls: set[str] = field(default_factory=set)  # built-ins and hooks called
  lambdas: dict = field(default_factory=dict)  # (name, arg types) -> (params, body, return type)
  per_lane: bool = False  # reads laneId: one instance per lane (else a body that indexes VGPR runs per wave)


# Constants the manual uses by name. DENORM is a class, not a value: `x == DENORM.f32` means isDENORM(x).
# V_DIV_FIXUP returns +-UNDERFLOW when |num/den| < 2**-150 (f32) / 2**-1075 (f64), i.e. below half the smallest
# denormal, which rounds to zero; OVERFLOW is returned when it is above the largest finite value, i.e. infinity.
CONSTS = {"PI": (3.141592653589793, F64), "INF": (float("inf"), F64), "NAN": (float("nan"), F64),
          "MAX_FLOAT_F32": (3.4028234663852886e38, F64), "UNDERFLOW_F32": (0.0, F32),
          "OVERFLOW_F32": (float("inf"), F32), "UNDERFLOW_F64": (0.0, F64),
          "OVERFLOW_F64": (float("inf"), F64), "ROUND_NEAREST_EVEN": (0, INT), "ROUND_TOWARD_ZERO": (3, INT),
          "true": (1, BOOL), "false": (0, BOOL),
          # SDWA operand selects (SDWA_SRC0_SEL == BYTE1): llvm-mc-22 encodes src0_sel:BYTE_1 as 1, WORD_1 as 5
          **{f"BYTE{i}": (i, INT) for i in range(4)}, "WORD0": (4, INT), "WORD1": (5, INT), "DWORD": (6, INT)}
REGFILES = {"VGPR": 2, "SGPR": 1, "TTMP": 1, "HW_REGISTERS": 1, "WAVE_BARRIER_COMPLETE": 1, "BARRIER_STATE": 1,
            "CVT_OFF_TABLE": 1, "LDS": 1}
HALVES = {"EXEC_LO": ("EXEC", 0), "EXEC_HI": ("EXEC", 32), "VCC_LO": ("VCC", 0), "VCC_HI": ("VCC", 32)}
WAVE_NAMES = {"WAVE32": "wave32", "WAVE64": "wave64", "wave32": "wave32", "wave64": "wave64", "laneId": "laneId",
              "laneID": "laneId"}
# Registers an instruction architecturally writes. Any other upper-case name whose first use assigns it whole
# (`C = S2.i32`, `TTBL = {...}`, `ADDR = S0.u32` in DS_CONDXCHG32) is a temporary, not a state output.
# D2/D3 (PTX vector loads) and CC (PTX's carry flag) are outputs of PTX bodies (pcode/ptx.py).
ARCH_OUT = {"D0", "D1", "D2", "D3", "CC", "SCC", "VCC", "EXEC", "PC", "M0", "RETURN_DATA", "VDATA", "SDATA",
            "ROUND_MODE", "VDST", "SDST", "TRAPSTS", "WAVE_STATUS", "MODE", "WAVE_MODE", "NUM_VGPRS", "VSKIP",
            "HW_REGISTERS", "TTMP"}


def first_uses(n, out: dict) -> dict:
  """name -> 'w' if its first use (in text order, right-hand sides first) assigns the whole name, else 'r'."""
  if isinstance(n, tuple):
    for a in n:
      first_uses(a, out)
  elif isinstance(n, Node):
    if n.op == "assign":
      lhs, _, rhs = n.args
      first_uses(rhs, out)
      if lhs.op == "name" and n.args[1] == "=":
        out.setdefault(lhs.args[0], "w")
      else:
        first_uses(lhs, out)
    elif n.op == "name":
      out.setdefault(n.args[0], "r")
    elif n.op == "lambda":
      pass
    else:
      first_uses(n.args, out)
  return out


def dtype_bits(bits: int) -> int:
  """Container width for a value of `bits` bits (numpy has 8/16/32/64; wider values are Python ints)."""
  return 1 if bits == 1 else 8 if bits <= 8 else 16 if bits <= 16 else 32 if bits <= 32 else 64 if bits <= 64 else 0


def ty_of(kind: str, bits: int) -> Ty:
  if kind == "fp" or (kind == "bf" and bits != 16):
    return Ty("b", bits)  # fp8/bf8/fp6/fp4: raw encodings handled by the converters
  if kind == "f" and bits not in (16, 32, 64):
    raise ValueError(f"no {bits}-bit float")
  return Ty(kind, bits)


def promote(a: Ty, b: Ty) -> Ty:
  """The manual's usual arithmetic conversions: float wins, then the wider integer; unsigned wins at equal width."""
  if a.kind == "int" and b.kind == "int":
    return INT
  if a.kind == "int" or b.kind == "int":
    t = b if a.kind == "int" else a
    return U32 if t.kind == "bool" else t
  if a.isf or b.isf:
    fs = [t for t in (a, b) if t.isf]
    if len(fs) == 2 and a.kind != b.kind:
      return Ty("f", max(32, a.bits, b.bits))
    return max(fs, key=lambda t: t.bits)
  if a.kind == "bool" and b.kind == "bool":
    return BOOL
  a, b = (U32 if a.kind == "bool" else a), (U32 if b.kind == "bool" else b)
  if a.bits != b.bits:
    return a if a.bits > b.bits else b
  return a if a.kind in "ub" else b if b.kind in "ub" else a


def const(v, ty: Ty) -> E: return E("const", (v,), ty)


def uniform(e) -> bool:
  """Built only from constants, loop counters and the wave size: a Python value at run time."""
  if isinstance(e, E):
    if e.op in ("const", "loopvar") or (e.op == "wave" and e.args[0] != "laneId"):
      return True
    if e.op in ("var", "state", "mem", "reg", "call", "lcall", "aget", "wave"):
      return False
    return all(uniform(a) for a in e.args)
  return True


def is_const(e: E) -> bool: return e.op == "const"


def linear(n: Node) -> tuple[int, dict] | None:
  """`i * 32 + 31` -> (31, {'i': 32}): lets the width of a slice with symbolic bounds be known statically."""
  if n.op == "const" and isinstance(n.args[0], int):
    return n.args[0], {}
  if n.op == "name":
    return 0, {n.args[0]: 1}
  if n.op == "cast":
    return linear(n.args[0])
  if n.op == "bin" and n.args[0] in ("+", "-", "*"):
    a, b = linear(n.args[1]), linear(n.args[2])
    if a is None or b is None:
      return None
    if n.args[0] == "*":
      if a[1] and b[1]:
        return None
      (k, _), (c, d) = (a, b) if not a[1] else (b, a)
      return k * c, {x: k * y for x, y in d.items()}
    s = 1 if n.args[0] == "+" else -1
    d = dict(a[1])
    for x, y in b[1].items():
      d[x] = d.get(x, 0) + s * y
    return a[0] + s * b[0], {x: y for x, y in d.items() if y}
  return 0, {repr(n): 1}  # any other subtree is an opaque atom


def slice_width(hi: Node, lo: Node) -> int | None:
  a, b = linear(hi), linear(lo)
  if a is None or b is None:
    return None
  d = {x: a[1].get(x, 0) - b[1].get(x, 0) for x in set(a[1]) | set(b[1])}
  return a[0] - b[0] + 1 if not any(d.values()) else None


# ------------------------------------------------------------------------------------------ built-in types


def _conv_ty(tok: str) -> Ty:
  m = re.fullmatch(r"(u|i|f|b|bf|fp)(\d+)(?:fnuz)?", tok)  # (fp8fnuz/bf8fnuz: gfx942's 8-bit floats, runtime.FP8)
  if tok == "snorm":
    return Ty("i", 16)
  if tok == "unorm":
    return Ty("u", 16)
  return ty_of(m.group(1), int(m.group(2))) if m else Ty("b", 32)


def call_ty(name: str, args: list[E]) -> Ty:
  """Result type of a built-in, from its name the way the manual spells them."""
  a0 = args[0].ty if args else U32
  if name in ("isNAN", "isINF", "isSignalNAN", "isQuietNAN", "isDENORM", "isEven", "sign", "InWorkgroup", "IsM0"):
    return BOOL
  if name in ("abs", "floor", "trunc", "fract", "sqrt", "sin", "cos", "log2", "cvtToQuietNAN", "fma", "ldexp",
              "mantissa", "reverse_bits", "pow", "ABSDIFF", "signext_from_bit", "rcp", "rsq", "exp2"):
    t = a0 if a0.kind != "int" else I32
    return Ty("i", t.bits) if name == "signext_from_bit" and t.kind != "f" else t
  if name in ("MIN", "MAX"):
    return promote(args[0].ty, args[1].ty) if len(args) > 1 else a0
  if name == "exponent":
    return I32
  if name == "signext":
    return Ty("i", 64)
  if name in ("countbits", "bitCount", "count_ones", "ChannelOffsetX", "ChannelOffsetY", "ChannelOffsetZ",
              "ChannelOffsetW", "v_sad_u8", "v_msad_u8"):
    return U32
  if name.startswith("Calc") and name.endswith("Addr"):
    return U64
  m = re.fullmatch(r"([a-z0-9]+)_to_([a-z0-9]+)(?:_sr)?(?:_scale)?(?:_SR)?", name)
  if m:
    return _conv_ty(m.group(2))
  if re.fullmatch(r"(?:add|sub|mul|fma|div|sqrt|rcp|rint)_r[nzmp]|ftz|approx_[a-z0-9]+", name):  # PTX numerics
    return a0 if a0.kind != "int" else F32
  m = re.fullmatch(r"round_r(?:n|na|z|m|p)_([a-z0-9]+)", name)  # PTX cvt: one rounding into a format
  if m:
    return {"tf32": F32, "e4m3": Ty("b", 8), "e5m2": Ty("b", 8)}.get(m.group(1)) or _conv_ty(m.group(1))
  if name.startswith(("v_", "s_")):
    toks = re.findall(r"_((?:u|i|f|b|bf)\d+)", name)
    return _conv_ty(toks[0]) if toks else U32
  return Ty("b", 32)


# -------------------------------------------------------------------------------------------- lowering
_STATE_NAME = re.compile(r"[A-Z][A-Z0-9_]*$")


class Lower:
  """AST -> typed IR. One instance per body; `lower()` returns a Program."""

  def __init__(self, ast: Node, arch: str, inst: str, operand_bits: dict[str, int] | None = None):
    self.ast, self.arch, self.inst = ast, arch, inst
    self.operand_bits = operand_bits or {}  # vendor operand table: field (upper-case) -> width in bits
    self.vars: dict[str, Ty] = {}
    self.arrays: dict[str, tuple[Ty, int]] = {}
    self.declared_state: dict[str, Ty] = {}
    self.state_arrays: dict[str, tuple[Ty, int]] = {}
    self._want_lval = False
    self.loopvars: list[str] = []
    self.lambda_src: dict[str, tuple] = {}
    self.params: list[dict[str, Ty]] = []
    self.rets: list[list[E]] = []
    self.prog = Program(arch, inst, (), {}, {})
    self.hints: dict[str, int] = {}
    self._hint(ast)
    self.temps = {k for k, v in first_uses(ast, {}).items() if v == "w" and k not in ARCH_OUT}

  def fail(self, msg: str, at=(0, 0)) -> PcodeError: return PcodeError(msg, self.arch, self.inst, *at)

  def _hint(self, n) -> None:
    """Width of each register: the widest typed access or highest constant slice bit anywhere in the body."""
    if isinstance(n, tuple):
      for a in n:
        self._hint(a)
      return
    if not isinstance(n, Node):
      return
    if n.op == "index" and n.args[0].op == "name" and n.args[0].args[0] == "MEM":
      a = n.args[1]  # an untyped register used as a memory address (`MEM[ADDR]`) is a 64-bit address
      for nm in ([a] if a.op == "name" else [x for x in a.args if isinstance(x, Node) and x.op == "name"]):
        self.hints[nm.args[0]] = max(self.hints.get(nm.args[0], 0), 64)
    base = n.args[0] if n.op in ("as", "slice", "slicew", "index") else None
    if isinstance(base, Node) and base.op == "name":
      w = n.args[2] if n.op == "as" else 0
      if n.op == "slice" and n.args[1].op == "const" and isinstance(n.args[1].args[0], int):
        w = n.args[1].args[0] + 1
      if n.op == "index" and n.args[1].op == "const" and isinstance(n.args[1].args[0], int):
        w = n.args[1].args[0] + 1
      nm = base.args[0]
      self.hints[nm] = max(self.hints.get(nm, 0), w)
    for a in n.args:
      self._hint(a)

  def width(self, name: str) -> int:
    if name in self.declared_state:
      return max(self.declared_state[name].bits, self.hints.get(name, 0))
    w = self.hints.get(name, 0) or (64 if name in ("EXEC", "VCC", "PC") else 32)  # masks and PC are 64-bit
    w = max(w, self.operand_bits.get(name, 0))  # ADDR of a GLOBAL op is a 64-bit VGPR pair even if never typed
    return 32 if w <= 32 else 64 if w <= 64 else w

  def lower(self) -> Program:
    self.prog.body = self.block(self.ast)
    return self.prog

  # ---------------------------------------------------------------- statements
  def block(self, b: Node) -> tuple:
    out = []
    for st in b.args:
      out.extend(self.stmt(st))
    return tuple(out)

  def stmt(self, n: Node) -> list:
    op, a = n.op, n.args
    if op == "block":
      return list(self.block(n))
    if op == "note":
      return [S("note", (a[0],), n.at)]
    if op == "declare":
      name, (k, bits), cnt = a
      ty = ty_of(k, bits) if bits != 1 else BOOL
      if cnt is not None and name in ARCH_OUT:  # `declare RETURN_DATA : 32'U[2]`: a register viewed as elements
        self.state_arrays[name] = (ty, cnt)
        self.declared_state[name] = Ty("b", ty.bits * cnt)
        return []
      if cnt is not None:
        self.arrays[name] = (ty, cnt)
        return [S("assign", (("var", name, Ty("arr", cnt)), E("array", (cnt,), ty)), n.at)]
      if _STATE_NAME.match(name):
        self.declared_state[name] = ty
      else:
        self.vars[name] = ty
        return [S("assign", (("var", name, ty), const(0, ty)), n.at)]
      return []
    if op == "lambda":
      self.lambda_src[a[0]] = (a[1], a[2])
      return []
    if op == "if":
      arms = tuple((self.cond(c), self.block(b)) for c, b in a[0])
      return [S("if", (arms, self.block(a[1])), n.at)]
    if op == "for":
      var, lo, hi, body = a
      lo_e, hi_e = self.ex(lo), self.ex(hi)
      self.loopvars.append(var)
      try:
        b = self.block(body)
      finally:
        self.loopvars.pop()
      return [S("for", (var, lo_e, hi_e, b), n.at)]
    if op == "while":
      return [S("while", (self.cond(a[0]), self.block(a[1])), n.at)]
    if op == "break":
      return [S("break", (), n.at)]
    if op == "return":
      if not self.rets:
        raise self.fail("return outside a lambda", n.at)
      e = self.ex(a[0])
      self.rets[-1].append(e)
      return [S("return", (e,), n.at)]
    if op == "callstmt":
      return [S("eval", (self.ex(a[0]),), n.at)]
    if op == "assign":
      lhs, aop, rhs = a
      new_local = lhs.op == "name" and not self.is_state(lhs.args[0], write=True) and lhs.args[0] not in self.vars
      if new_local and aop == "=":
        e = self.ex(rhs)
        ty = I32 if e.ty.kind == "int" else e.ty
        self.vars[lhs.args[0]] = ty
        return [S("assign", (("var", lhs.args[0], ty), self.conv(e, ty)), n.at)]
      val = self.ex(rhs)
      if aop != "=":
        val = self.binop(aop[:-1], self.ex(lhs), val, n.at)
      return [S("assign", self.store(lhs, val), n.at)]
    raise self.fail(f"cannot lower statement {op}", n.at)

  def is_state(self, name: str, write: bool = False) -> bool:
    if name in self.vars or name in self.arrays or any(name in p for p in self.params) or name in self.loopvars:
      return False
    if name in self.temps and name not in self.declared_state:
      return False
    return bool(_STATE_NAME.match(name)) or name in self.declared_state or not write

  def store(self, lhs: Node, val: E) -> tuple:
    """-> (lvalue, value converted to the lvalue's type)."""
    lv = self.lval(lhs)
    if lv[0] == "state" and lv[1] not in self.declared_state and val.ty.kind != "int" and val.ty.bits > lv[2].bits:
      lv = ("state", lv[1], Ty("b", val.ty.bits))  # `RETURN_DATA = tmp` with a 64-bit tmp: the register is 64-bit
      self.prog.outputs[lv[1]] = max(self.prog.outputs.get(lv[1], 0), val.ty.bits)
    return lv, self.conv(val, lv_ty(lv), bits=True)

  def lval(self, n: Node) -> tuple:
    op, a = n.op, n.args
    if op == "name":
      nm = a[0]
      if nm in self.loopvars or nm in WAVE_NAMES:
        raise self.fail(f"cannot assign to {nm}", n.at)
      if self.is_state(nm, write=True):
        w = self.width(nm)
        self.prog.outputs[nm] = max(self.prog.outputs.get(nm, 0), w)
        return ("state", nm, Ty("b", w) if nm not in self.declared_state else self.declared_state[nm])
      if nm not in self.vars:
        self.vars[nm] = Ty("b", self.width(nm))
      return ("var", nm, self.vars[nm])
    if op == "field":
      rf = self.field_of_file(n)
      if rf:
        return ("reg",) + rf[1:]
      nm = self.field_name(n)
      self.prog.outputs[nm] = 32
      return ("state", nm, Ty("b", 32))
    if op == "as":
      base = self.lval(a[0])
      t = ty_of(a[1], a[2]) if a[2] != 1 else BOOL
      if base[0] in ("mem", "reg"):  # `MEM[addr].b32 = ...`: the view sets the access width
        return base[:-1] + (t.bits,) if t.kind in ("u", "b", "i") else ("as", base[:-1] + (t.bits,), t)
      return ("as", base, t)
    if op in ("slice", "slicew"):
      base = self.lval(self.raw_base(a[0]))
      lo, w = self.slice_bounds(n)
      return ("slice", base, lo, w)
    if op == "index":
      self._want_lval = True
      try:
        ar = self.indexed(n)
      finally:
        self._want_lval = False
      if ar is not None:
        return ar
      idx, base = self.ex(a[1]), a[0].args[0] if a[0].op == "as" else a[0]
      if base.op == "name" and self.is_state(base.args[0], write=True) and base.args[0] not in self.prog.outputs \
          and not (idx.op == "wave" and idx.args[0] == "laneId") and not _uses(idx, "loopvar"):
        # `D0.u32[S0.u32[4 : 0]] = 1'0U` (S_BITSET0/1): one bit stored, the others kept, so the register is read.
        # Per-lane bits (`D0.u64[laneId]`: VOPC, carry-outs) and bits a loop sets one by one (`D0.u64[i * 2]`,
        # S_BITREPLICATE) stay write-only, as before.
        nm = base.args[0]
        self.prog.inputs[nm] = max(self.prog.inputs.get(nm, 0), self.width(nm))
      return ("bit", self.lval(a[0]), idx)
    if op == "concat":
      parts = [self.lval(p) for p in a]
      return ("concat", tuple(parts))
    raise self.fail(f"cannot assign to this expression ({op})", n.at)

  def indexed(self, n: Node) -> tuple | None:
    """Array element, register-file element or MEM access, as an lvalue tuple; None for a bit index."""
    base, idx = n.args
    if base.op == "name" and base.args[0] in self.arrays:
      ty, cnt = self.arrays[base.args[0]]
      return ("aset", base.args[0], self.ex(idx), ty)
    if base.op == "name" and base.args[0] in self.state_arrays:  # element i of a register = bits [i*w +: w]
      ty, _ = self.state_arrays[base.args[0]]
      lo = self.binop("*", self.conv(self.ex(idx), I32), const(ty.bits, I32), n.at)
      return ("slice", self.lval(base), lo, ty.bits) if self._want_lval else \
        ("sget", E("slice", (self.name(base.args[0], n.at), lo, ty.bits), Ty("b", ty.bits)), ty)
    if base.op == "name" and base.args[0] == "MEM":
      if self._want_lval:  # a store; reads mark "r" where the access is read (loads were reported "rw")
        self.prog.mem = "".join(sorted(set(self.prog.mem) | {"w"}))
      return ("mem", self.ex(idx), 32)
    chain, b = [idx], base
    while b.op == "index":
      chain.insert(0, b.args[1])
      b = b.args[0]
    if b.op == "name" and b.args[0] in REGFILES and len(chain) == REGFILES[b.args[0]] and not self.vars.get(b.args[0]):
      self.prog.regfiles.add(b.args[0])
      return ("reg", b.args[0], tuple(self.ex(c) for c in chain), 32)
    return None

  def field_of_file(self, n: Node) -> tuple | None:
    """`BARRIER_STATE[i].signalCnt`: a field of a register-file entry is an entry of the file 'NAME.field'."""
    b = n.args[0]
    if b.op == "index" and b.args[0].op == "name" and REGFILES.get(b.args[0].args[0]) == 1:
      name = f"{b.args[0].args[0]}.{n.args[1]}"
      self.prog.regfiles.add(name)
      return ("reg", name, (self.ex(b.args[1]),), 32)
    return None

  def field_name(self, n: Node) -> str:
    b = n.args[0]
    parts = [n.args[1]]
    while b.op == "field":
      parts.insert(0, b.args[1])
      b = b.args[0]
    if b.op != "name":
      raise self.fail(f"unsupported field access .{n.args[1]}", n.at)
    return ".".join([b.args[0]] + parts)

  def slice_bounds(self, n: Node) -> tuple[E, int]:
    if n.op == "slicew":
      w = self.ex(n.args[2])
      if not is_const(w):
        raise self.fail("slice width must be constant", n.at)
      return self.ex(n.args[1]), int(w.args[0])
    hi, lo = n.args[1], n.args[2]
    w = slice_width(hi, lo)
    if w is None:
      h, l_ = self.ex(hi), self.ex(lo)
      if is_const(h) and is_const(l_):
        w = int(h.args[0]) - int(l_.args[0]) + 1
      else:
        raise self.fail("slice width must be constant", n.at)
    if w <= 0:
      raise self.fail(f"empty slice (width {w})", n.at)
    return self.ex(lo), w

  def reversed_slice(self, n: Node) -> int | None:
    """`S0.u32[0 : 31]`: a slice written low-to-high means the bits reversed; returns its width."""
    if n.op == "slice" and n.args[1].op == "const" and n.args[2].op == "const":
      hi, lo = n.args[1].args[0], n.args[2].args[0]
      return lo - hi + 1 if isinstance(hi, int) and isinstance(lo, int) and hi < lo else None
    return None

  def raw_base(self, n: Node) -> Node:
    """`X.u32[63 : 32]` on a register slices the register itself: the manual writes the view type loosely."""
    if n.op == "as" and n.args[0].op == "name" and n.args[1] in ("u", "i", "b") and self.is_state(n.args[0].args[0]):
      return n.args[0]
    return n

  # ---------------------------------------------------------------- expressions
  def cond(self, n: Node) -> E: return self.conv(self.ex(n), BOOL)

  def ex(self, n: Node) -> E:
    op, a = n.op, n.args
    if op == "const":
      v, k, bits = a
      if isinstance(v, float) or k == "f":
        return const(float(v), Ty("f", bits or 64))
      if k in (None, "x"):
        return E("const", (v,), INT) if k is None else E("const", (v, "hex"), INT)
      t = ty_of(k, bits) if bits != 1 else BOOL
      return const(wrap(v, t), t)
    if op == "name":
      return self.name(a[0], n.at)
    if op == "field":
      rf = self.field_of_file(n)
      if rf:
        return E("reg", rf[1:], Ty("b", 32))
      nm = self.field_name(n)
      self.prog.inputs.setdefault(nm, 32)
      return E("state", (nm,), Ty("b", 32))
    if op == "as":
      e = self.ex(a[0])
      t = ty_of(a[1], a[2]) if a[2] != 1 else BOOL
      if e.op in ("mem", "reg") and t.kind != "bool":
        return E(e.op, e.args[:-1] + (t.bits,), Ty("b", t.bits)) if t.kind == "b" else \
          self.bitcast(E(e.op, e.args[:-1] + (t.bits,), Ty("b", t.bits)), t)
      if e.op == "special":
        return E("special", (e.args[0], t), t)
      return self.bitcast(e, t)
    if op == "cast":
      e = self.ex(a[0])
      t = ty_of(a[1], a[2]) if a[2] != 1 else BOOL
      if t.isf and e.op == "const" and len(e.args) > 1 and e.args[1] == "hex":  # 32'F(0xffc00000): a bit pattern
        return self.bitcast(const(e.args[0], Ty("b", t.bits)), t)
      if t.isf and e.ty.kind == "b" and e.ty.bits == t.bits:  # 32'F({ S0.b16, 16'0U }): raw bits of that width
        return self.bitcast(e, t)
      return self.conv(e, t)
    if op in ("slice", "slicew"):
      rw = self.reversed_slice(n)
      if rw is not None:
        e = self.raw(self.ex(a[0]))
        return E("rev", (E("slice", (e, self.ex(a[1]), rw), Ty("b", rw)), rw), Ty("b", rw))
      e = self.ex(self.raw_base(a[0]))
      lo, w = self.slice_bounds(n)
      return self.fold(E("slice", (self.raw(e), lo, w), Ty("b", w) if w > 1 else BOOL))
    if op == "index":
      ix = self.indexed(n)
      if ix is not None:
        if ix[0] == "sget":
          return self.bitcast(ix[1], ix[2])
        if ix[0] == "aset":
          return E("aget", (ix[1], ix[2]), ix[3])
        if ix[0] == "mem":
          self.prog.mem = "".join(sorted(set(self.prog.mem) | {"r"}))
          return E("mem", (ix[1], 32), Ty("b", 32))
        return E("reg", (ix[1], ix[2], 32), Ty("b", 32))
      e = self.ex(a[0])
      return self.fold(E("bit", (self.raw(e), self.conv(self.ex(a[1]), I32)), BOOL))
    if op == "concat":
      parts = tuple(self.raw(self.ex(p)) for p in a)
      return self.fold(E("concat", parts, Ty("b", sum(p.ty.bits for p in parts))))
    if op == "un":
      o, e = a[0], self.ex(a[1])
      if o == "+":
        return e
      if o == "!":
        return self.fold(E("not", (self.conv(e, BOOL),), BOOL))
      if o == "~":
        t = e.ty if e.ty.kind != "int" else I32
        return self.fold(E("inv", (self.conv(e, t),), t))
      t = e.ty if e.ty.kind not in ("bool",) else I32
      return self.fold(E("neg", (self.conv(e, t),), t))
    if op == "bin":
      return self.binop(a[0], self.ex(a[1]), self.ex(a[2]), n.at)
    if op == "sel":
      c, x, y = self.cond(a[0]), self.ex(a[1]), self.ex(a[2])
      t = promote(x.ty, y.ty)
      if t.kind == "int" and not (uniform(c) and uniform(x) and uniform(y)):
        t = I32
      return self.fold(E("sel", (c, self.conv(x, t), self.conv(y, t)), t))
    if op == "call":
      name, args = a
      if name in self.lambda_src:
        return self.lcall(name, [self.ex(x) for x in args], n.at)
      if name in ("MEM", "LDS", "GS_REGS"):
        raise self.fail(f"{name}(...) is prose, not pcode; needs an errata entry", n.at)
      if name.startswith("Calc") and name.endswith("Addr"):  # address hooks get whole operand registers:
        args = [x.args[0] if x.op == "as" and x.args[0].op == "name" and x.args[0].args[0] in self.operand_bits
                else x for x in args]  # `SBASE.b32` would cut a 64-bit base
      es = [self.ex(x) for x in args]
      self.prog.calls.add(name)
      return E("call", (name, tuple(es)), call_ty(name, es))
    raise self.fail(f"cannot lower expression {op}", n.at)

  def name(self, nm: str, at) -> E:
    for p in reversed(self.params):
      if nm in p:
        return E("var", (nm,), p[nm])
    if nm in self.loopvars:
      return E("loopvar", (nm,), INT)
    if nm in self.vars:
      return E("var", (nm,), self.vars[nm])
    if nm in HALVES and nm not in self.prog.outputs:  # EXEC_LO is EXEC[31 : 0]
      base, lo = HALVES[nm]
      st = self.name(base, at)
      return E("slice", (st, const(lo, INT), 32), Ty("b", 32))
    if nm in WAVE_NAMES:
      w = WAVE_NAMES[nm]
      self.prog.per_lane |= w == "laneId"
      return E("wave", (w,), U32 if w == "laneId" else BOOL)
    if nm in CONSTS:
      v, t = CONSTS[nm]
      return const(v, t)
    if nm in ("DENORM",):
      return E("special", (nm, F64), F64)
    if nm in self.arrays:
      raise self.fail(f"array {nm} used without an index", at)
    if nm == "MEM":
      raise self.fail("MEM used without an address", at)
    t = self.declared_state.get(nm) or Ty("b", self.width(nm))
    if nm not in self.prog.outputs:
      self.prog.inputs[nm] = max(self.prog.inputs.get(nm, 0), t.bits)
    return E("state", (nm,), t)

  def lcall(self, name: str, args: list[E], at) -> E:
    params, body = self.lambda_src[name]
    if len(params) != len(args):
      raise self.fail(f"{name} takes {len(params)} arguments, got {len(args)}", at)
    args = [self.conv(x, I32) if x.ty.kind == "int" else x for x in args]
    key = (name, tuple(x.ty for x in args))
    if key not in self.prog.lambdas:
      self.params.append(dict(zip(params, (x.ty for x in args))))
      self.rets.append([])
      saved = dict(self.vars)
      try:
        b = self.block(body)
      finally:
        self.params.pop()
        rets = self.rets.pop()
        self.vars = saved
      if not rets:
        raise self.fail(f"lambda {name} never returns", at)
      t = rets[0].ty
      for r in rets[1:]:
        t = promote(t, r.ty)
      t = I32 if t.kind == "int" else t
      self.prog.lambdas[key] = (tuple(params), b, t)
    return E("lcall", (key, tuple(args)), self.prog.lambdas[key][2])

  def binop(self, o: str, x: E, y: E, at) -> E:
    if o in ("&&", "||"):
      return self.fold(E("logic", (o, self.conv(x, BOOL), self.conv(y, BOOL)), BOOL))
    if y.op == "special" or x.op == "special":  # `x == DENORM.f32`: a class test
      v = x if y.op == "special" else y
      e = E("call", ("isDENORM", (v,)), BOOL)
      self.prog.calls.add("isDENORM")
      return e if o == "==" else E("not", (e,), BOOL)
    if o in ("<<", ">>"):
      t = x.ty if x.ty.kind != "int" else (INT if y.ty.kind == "int" else Ty("i", max(32, y.ty.bits)))
      t = U32 if t.kind == "bool" else t
      return self.fold(E("shift", (o, self.conv(x, t), self.conv(y, U32 if y.ty.kind != "int" else INT)), t))
    if o == "**":
      t = promote(x.ty, y.ty)
      t = t if t.isf else F64
      return self.fold(E("bin", (o, self.conv(x, t), self.conv(y, t)), t))
    t = promote(x.ty, y.ty)
    if o in ("==", "!=", "<>", "<", ">", "<=", ">="):
      if t.kind == "int" and not (is_const(x) and is_const(y)) and "loopvar" not in (x.op, y.op):
        t = I32
      return self.fold(E("cmp", (o, self.conv(x, t), self.conv(y, t)), BOOL))
    if t.kind == "bool":
      t = BOOL if o in ("&", "|", "^") else U32
    return self.fold(E("bin", (o, self.conv(x, t), self.conv(y, t)), t))

  # ---------------------------------------------------------------- conversions
  def raw(self, e: E) -> E:
    """The bits of a value (floats reinterpreted), for slices, bit tests and concatenation."""
    t = e.ty
    if t.kind in ("u", "b", "bool"):
      return e
    if t.kind == "int":
      return self.conv(e, I32 if e.op != "const" or -2**31 <= e.args[0] < 2**32 else Ty("i", 64), bits=True)
    return self.bitcast(e, Ty("b", t.bits))

  def bitcast(self, e: E, t: Ty) -> E:
    if e.ty == t:
      return e
    if e.ty.isf and t.isf and e.ty.bits != t.bits:  # `INF.f32`, `NAN.f16`: the constant in that format
      return self.conv(e, t)
    if e.ty.kind == "int":
      e = self.conv(e, Ty("i" if t.kind == "i" else "u", t.bits) if t.kind != "bool" else U32)
    return self.fold(E("bitcast", (e,), t))

  def conv(self, e: E, t: Ty, bits: bool = False) -> E:
    """Value conversion (`64'U(x)`, `32'F(i)`); with bits=True float<->int moves the bit pattern instead (stores)."""
    if e.ty == t or t.kind == "int":
      return e
    if bits and (e.ty.isf != t.isf) and e.ty.kind not in ("int", "bool"):
      return self.bitcast(e, t)
    return self.fold(E("cvt", (e,), t))

  def fold(self, e: E) -> E:
    return fold(e)


def lv_ty(lv: tuple) -> Ty:
  k = lv[0]
  if k in ("var", "state"):
    return lv[2] if lv[2].kind != "arr" else Ty("b", 32)
  if k == "as":
    return lv[2]
  if k == "slice":
    return Ty("b", lv[3]) if lv[3] > 1 else BOOL
  if k == "bit":
    return BOOL
  if k == "aset":
    return lv[3]
  if k in ("mem", "reg"):
    return Ty("b", lv[-1])
  if k == "concat":
    return Ty("b", sum(lv_ty(p).bits for p in lv[1]))
  raise ValueError(k)


def wrap(v: int, t: Ty) -> int:
  if t.kind == "bool":
    return v & 1
  if t.kind in ("u", "b"):
    return v & ((1 << t.bits) - 1)
  if t.kind == "i":
    v &= (1 << t.bits) - 1
    return v - (1 << t.bits) if v >> (t.bits - 1) else v
  return v


_PYOPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "&": lambda a, b: a & b,
          "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
          "<": lambda a, b: a < b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}


def fold(e: E) -> E:
  """Constant folding over integer constants (exact, wrapped to the result type). Floats are left to run time,
  where numpy rounds them like the hardware."""
  a = e.args
  if e.op in ("bin", "cmp") and is_const(a[1]) and is_const(a[2]) and a[0] in _PYOPS:
    x, y = a[1].args[0], a[2].args[0]
    if isinstance(x, int) and isinstance(y, int) and not a[1].ty.isf:
      r = _PYOPS[a[0]](x, y)
      return const(int(r), BOOL) if e.op == "cmp" else const(wrap(r, e.ty), e.ty)
  if e.op == "shift" and is_const(a[1]) and is_const(a[2]) and e.ty.kind in ("int", "u", "b", "i"):
    x, s = a[1].args[0], a[2].args[0]
    if e.ty.kind != "int" and s >= e.ty.bits:
      return const(0 if a[0] == "<<" or x >= 0 else -1, e.ty)
    return const(wrap(x << s if a[0] == "<<" else x >> s, e.ty), e.ty)
  if e.op == "cvt" and is_const(a[0]) and isinstance(a[0].args[0], int) and e.ty.kind in ("u", "i", "b", "bool"):
    return const(wrap(a[0].args[0], e.ty), e.ty)
  if e.op == "cvt" and is_const(a[0]) and isinstance(a[0].args[0], int) and e.ty.kind == "f":
    return const(float(a[0].args[0]), e.ty)
  if e.op == "bitcast" and is_const(a[0]) and isinstance(a[0].args[0], int) and e.ty.kind in ("u", "b", "bool"):
    return const(wrap(a[0].args[0], e.ty), e.ty)
  if e.op == "logic" and is_const(a[1]) and is_const(a[2]):
    x, y = bool(a[1].args[0]), bool(a[2].args[0])
    return const(int(x and y if a[0] == "&&" else x or y), BOOL)
  if e.op == "not" and is_const(a[0]):
    return const(int(not a[0].args[0]), BOOL)
  if e.op == "neg" and is_const(a[0]):
    v = a[0].args[0]
    return const(-v if isinstance(v, float) else wrap(-v, e.ty), e.ty)
  if e.op == "inv" and is_const(a[0]) and isinstance(a[0].args[0], int):
    return const(wrap(~a[0].args[0], e.ty), e.ty)
  if e.op == "sel" and is_const(a[0]):
    return a[1] if a[0].args[0] else a[2]
  if e.op == "slice" and is_const(a[0]) and is_const(a[1]) and isinstance(a[0].args[0], int):
    return const((a[0].args[0] >> a[1].args[0]) & ((1 << a[2]) - 1), e.ty)
  return e


# ------------------------------------------------------------------------------------------ dead stores
def reads(x, out: set) -> set:
  """Names of locals read anywhere inside an expression/statement tree."""
  if isinstance(x, E):
    if x.op in ("var",):
      out.add(x.args[0])
    if x.op == "aget":
      out.add(x.args[0])
    for a in x.args:
      reads(a, out)
  elif isinstance(x, (tuple, list)):
    if x and x[0] in ("as", "slice", "bit", "aset") and isinstance(x[0], str):  # partial store reads the base
      base = x
      while base[0] in ("as", "slice", "bit"):
        base = base[1]
      if base[0] in ("var", "aset"):
        out.add(base[1])
    for a in x:
      reads(a, out)
  elif isinstance(x, S):
    reads(x.args, out)
  return out


def remove_dead_stores(prog: Program) -> Program:
  """Drop whole assignments to locals that nothing reads (e.g. `prev_mode = ROUND_MODE` kept only for a comment).
  Stores to state, memory and register files always stay."""
  used = reads(prog.body, set())
  for _, b, _ in prog.lambdas.values():
    reads(b, used)

  def keep(st: S) -> S | None:
    if st.op == "assign":
      lv, val = st.args
      if lv[0] == "var" and lv[1] not in used and not _has_effect(val):
        return None
      return st
    if st.op == "if":
      arms = tuple((c, tuple(filter(None, map(keep, b)))) for c, b in st.args[0])
      return S("if", (arms, tuple(filter(None, map(keep, st.args[1])))), st.at)
    if st.op in ("for", "while"):
      return S(st.op, st.args[:-1] + (tuple(filter(None, map(keep, st.args[-1]))),), st.at)
    return st
  prog.body = tuple(filter(None, map(keep, prog.body)))
  return prog


def _uses(e, op: str) -> bool:
  """Whether an expression tree contains a node `op`."""
  return isinstance(e, E) and (e.op == op or any(_uses(a, op) for a in e.args))


def _has_effect(e) -> bool:
  if isinstance(e, E):
    return e.op in ("mem", "call", "lcall") or any(_has_effect(a) for a in e.args)
  if isinstance(e, tuple):
    return any(_has_effect(a) for a in e)
  return False


def locals_of(stmts, out: dict | None = None) -> dict:
  """Local variables a body assigns (name -> type), in order of first assignment, nested blocks included."""
  out = {} if out is None else out
  for st in stmts:
    if st.op == "assign":
      lv = st.args[0]
      while lv[0] in ("as", "slice", "bit"):
        lv = lv[1]
      if lv[0] == "var":
        out.setdefault(lv[1], lv[2])
    elif st.op == "if":
      for _, b in st.args[0]:
        locals_of(b, out)
      locals_of(st.args[1], out)
    elif st.op in ("for", "while"):
      locals_of(st.args[-1], out)
  return out


def lower(ast: Node, arch: str = "", inst: str = "", operand_bits: dict[str, int] | None = None) -> Program:
  return remove_dead_stores(Lower(ast, arch, inst, operand_bits).lower())


def dump(prog: Program) -> str:
  """Readable listing of the typed IR (for `gputwin pcode --show`)."""
  out = [f"inputs  {prog.inputs}", f"outputs {prog.outputs}"]
  if prog.regfiles:
    out.append(f"regfiles {sorted(prog.regfiles)} (whole-wave access)")
  if prog.mem:
    out.append(f"memory  {prog.mem}")

  def lv(x) -> str:
    k = x[0]
    if k in ("var", "state"):
      return f"{x[1]}:{x[2]!r}"
    if k == "as":
      return f"{lv(x[1])}.{x[2]!r}"
    if k == "slice":
      return f"{lv(x[1])}[{x[2]!r} +: {x[3]}]"
    if k == "bit":
      return f"{lv(x[1])}[{x[2]!r}]"
    if k == "aset":
      return f"{x[1]}[{x[2]!r}]"
    if k == "mem":
      return f"MEM[{x[1]!r}].b{x[2]}"
    if k == "reg":
      return f"{x[1]}" + "".join(f"[{i!r}]" for i in x[2]) + f".b{x[3]}"
    if k == "concat":
      return "{" + ", ".join(map(lv, x[1])) + "}"
    return repr(x)

  def block(stmts, ind: int) -> None:
    p = "  " * ind
    for s in stmts:
      a = s.args
      if s.op == "assign":
        out.append(f"{p}{lv(a[0])} = {a[1]!r}")
      elif s.op == "if":
        for i, (c, b) in enumerate(a[0]):
          out.append(f"{p}{'if' if i == 0 else 'elsif'} {c!r}")
          block(b, ind + 1)
        if a[1]:
          out.append(f"{p}else")
          block(a[1], ind + 1)
        out.append(f"{p}endif")
      elif s.op == "for":
        out.append(f"{p}for {a[0]} in {a[1]!r} : {a[2]!r}")
        block(a[3], ind + 1)
        out.append(f"{p}endfor")
      elif s.op == "while":
        out.append(f"{p}while {a[0]!r}")
        block(a[1], ind + 1)
        out.append(f"{p}endwhile")
      else:
        out.append(f"{p}{s.op} {' '.join(map(repr, a))}".rstrip())
  for (name, tys), (params, body, ret) in prog.lambdas.items():
    out.append(f"lambda {name}({', '.join(f'{p}:{t!r}' for p, t in zip(params, tys))}) -> {ret!r}")
    block(body, 1)
  out.append("body")
  block(prog.body, 1)
  return "\n".join(out)
