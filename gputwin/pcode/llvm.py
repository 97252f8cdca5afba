"""The LLVM backend of the pcode IR, beside the numpy one (compile.py + runtime.py): a typed `Program` (ir.py) lowered
to LLVM IR text, operation by operation as runtime.py evaluates it (wrapping, shifts past the width, conversions,
x86's NaN rules as numpy follows them). What it cannot match bit for bit it declines (`Unsupported`).

The lowering knows nothing of an executor: a body's state names (S0, D0, VCC, SCC, ADDR ...) are allocas the caller
fills before and reads after the body (`Lower.state`), `laneId` is the caller's `%lane32`, and memory and the
effective-address built-ins come through a `Binding` the caller implements (gputwin.emu.native does, for the native
tier). `host(program, lanes)` compiles one body alone into a host function over arrays of lanes (tests compare it
with the numpy backend: tests/pcode/test_backends.py).
"""
from __future__ import annotations

import ctypes
import itertools
import struct
from typing import Protocol

import numpy as np

from gputwin.pcode.analysis import lane_bit_of
from gputwin.pcode.ir import Program, Ty, locals_of, lv_ty
from gputwin.pcode.runtime import DEFAULTS
from gputwin.pcode.runtime import APPROX, FP8, LIBM, RFMT, fp8_spec, fp8_special, libc_address
from gputwin.pcode.runtime import typed as rt_typed

# The C library functions bodies call (the transcendentals in f64, ldexp), name -> argument types (a double result):
# called by names bound to the very functions the numpy backend calls (runtime.libc_address), not by their own names,
# which a process may bind to something else (llvmlite's add_symbol is process-wide: a host-code test services `log2`
# with numpy's)
LIBC, C_FUNCTIONS = "gputwin.libm.", {**{n: ("double",) * k for n, k in LIBM.items()}, "ldexp": ("double", "i32")}
QUIET = {16: 1 << 9, 32: 1 << 22, 64: 1 << 51}  # the quiet bit of a NaN, by float width
DEFAULT_NAN = {16: 0xfe00, 32: 0xffc00000, 64: 0xfff8000000000000}  # x86's result of an invalid operation
TBAA_BASE = 10  # metadata numbers of the access tags (Fn.tbaa); the module's author emits them
SCALAR = "!1"  # loop metadata (with !2): LLVM must not vectorise that loop; the module's author emits both


class Unsupported(Exception):
  """The LLVM backend cannot express this exactly (a caller falls back to the numpy backend)."""


def lty(t: Ty) -> str:
  if t.kind == "bool":
    return "i1"
  if t.kind == "f":
    return {16: "half", 32: "float", 64: "double"}[t.bits]
  if t.kind == "bf":  # (runtime.py keeps bf16 values rounded in an f32 container; so does this backend)
    return "float"
  if t.kind == "int":
    return "i64"
  if t.kind == "arr":  # a local array (`declare tmp : 32'B[64]`): its elements' raw bits, one i64 each
    return f"[{t.bits} x i64]"
  return f"i{t.bits}"


def fconst(v: float, bits: int) -> str:
  if bits == 16:
    return "0xH%04X" % struct.unpack("<H", struct.pack("<e", v))[0]
  if bits == 32:  # LLVM writes float constants as the double of the same value
    v = struct.unpack("<f", struct.pack("<f", v))[0]
  return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]



class Fn:
  """LLVM IR text of one function: numbered temporaries, labels, allocas hoisted to the entry block."""

  def __init__(self, tags: dict | None = None):
    self.tags = {} if tags is None else tags  # TBAA: what a load or store touches (the module's author numbers them)
    self.on = None  # this lane's active bit, in a lane loop
    self.lines: list[str] = []
    self.allocas: list[str] = []
    self.pro: list[str] = []  # the entry block's own lines (loads of loop invariants), after the allocas
    self.cached: dict[int, str] = {}
    self.n = 0

  def t(self) -> str:
    self.n += 1
    return f"%t{self.n}"

  def label(self, base: str = "L") -> str:
    self.n += 1
    return f"{base}{self.n}"

  def emit(self, s: str) -> None:
    self.lines.append("  " + s)

  def put(self, label: str) -> None:
    self.lines.append(f"{label}:")

  def op(self, s: str) -> str:
    r = self.t()
    self.emit(f"{r} = {s}")
    return r

  def alloca(self, ty: str) -> str:
    self.n += 1
    r = f"%a{self.n}"
    self.allocas.append(f"  {r} = alloca {ty}")
    return r

  def conv(self, v: str, fb: int, tb: int, sign: bool = False) -> str:
    """An i{fb} value as i{tb}: truncated, or sign/zero-extended."""
    if fb == tb:
      return v
    if tb < fb:
      return self.op(f"trunc i{fb} {v} to i{tb}")
    return self.op(f"{'sext' if sign else 'zext'} i{fb} {v} to i{tb}")

  def gep(self, base: str, off: str) -> str:
    return self.op(f"getelementptr i8, ptr {base}, i64 {off}")

  def tbaa(self, what) -> str:
    """The access tag of `what`: a register row ("v", 3), guest memory, LDS, SCC... Different things never
    overlap, so LLVM may keep registers in host registers across stores to others and vectorise without checks."""
    return f"!tbaa !{TBAA_BASE + 2 * self.tags.setdefault(what, len(self.tags)) + 1}"

  def ld(self, ty: str, ptr: str, what, align: str = "") -> str:
    return self.op(f"load {ty}, ptr {ptr}{align}, {self.tbaa(what)}")

  def st(self, ty: str, v: str, ptr: str, what, align: str = "") -> None:
    self.emit(f"store {ty} {v}, ptr {ptr}{align}, {self.tbaa(what)}")


class Binding(Protocol):
  """What a body's memory accesses and address built-ins mean where it runs (the emulator implements it)."""
  space: str  # the access tag (Fn.tbaa) of this body's memory

  def access(self, addr: str, nbytes: int, write: bool) -> str:
    """The host pointer of bytes [addr, addr + nbytes) (addr: an i64 value); may branch to %fault."""

  def address(self) -> str | None:
    """The effective address (an i64 value) the Calc*Addr built-ins answer, or None where there is none."""

  def reg(self, name: str, index: tuple, bits: int, write: bool) -> str:
    """The host pointer of register file `name` at `index` (the body's IR expressions: VGPR[lane][reg]), `bits`
    wide; raises Unsupported where the binding cannot prove the access the interpreter's (a register file it lacks,
    an index it cannot bound)."""

  # optional: across(name, args, t) -> str, a built-in that reads other lanes (ds_swizzle), or Unsupported


class Lower:
  """One pcode body as LLVM IR, for one lane (`%lane32`) of a wave of `lanes`, as compile.py + runtime.py evaluate
  it. The caller declares `state` (name -> (alloca, bits)) and `vars` (locals: name -> (alloca, Ty)), fills the
  inputs, calls `block(program.body)`, then reads the outputs from `state`."""

  def __init__(self, f: Fn, program: Program, lanes: int, bind: Binding):
    self.f, self.program, self.L, self.bind = f, program, lanes, bind
    self.rmode: int | None = 0  # ROUND_MODE as the body set it last (a constant), None: the wave's own (unknown)
    if "ROUND_MODE" in program.inputs or "ROUND_MODE" in program.outputs:
      self.rmode = None
    self.nested = 0  # inside a branch, a loop or a lambda (where a store to ROUND_MODE may not happen)
    self.vars: dict[str, tuple[str, Ty]] = {}
    self.state: dict[str, tuple[str, int]] = {}
    self.loop_exit: list[str] = []
    self.returns: list[tuple[str, Ty, str]] = []  # in an inlined lambda: (result alloca, its type, exit label)
    self.lanebit: dict[str, tuple[str, str]] = {}  # a lane mask held as this lane's bit: name -> (bit, written?)

  # ---------------------------------------------------------------- value helpers
  def raw(self, v: str, t: Ty) -> tuple[str, int]:
    """ubits: the raw unsigned bits of a typed value, and their width."""
    if t.kind == "f":
      return self.f.op(f"bitcast {lty(t)} {v} to i{t.bits}"), t.bits
    if t.kind == "bf":  # the container's upper half
      u = self.f.op(f"bitcast float {v} to i32")
      return self.f.op(f"trunc i32 {self.f.op(f'lshr i32 {u}, 16')} to i16"), 16
    if t.kind == "bool":
      return self.f.op(f"zext i1 {v} to i8"), 8
    return v, (64 if t.kind == "int" else t.bits)

  def from_bits(self, u: str, ub: int, t: Ty) -> str:
    if t.kind == "bool":
      b = self.f.conv(u, ub, 8, False) if ub != 8 else u
      return self.f.op(f"trunc i8 {b} to i1")  # the low bit, as numpy's astype(bool) of a 0/1 container
    u = self.f.conv(u, ub, t.bits if t.kind != "int" else 64, False)
    if t.kind == "f":
      return self.f.op(f"bitcast i{t.bits} {u} to {lty(t)}")
    if t.kind == "bf":
      w = self.f.conv(u, 16, 32)
      return self.f.op(f"bitcast i32 {self.f.op(f'shl i32 {w}, 16')} to float")
    return u

  def coerce(self, v: str, s: Ty, t: Ty) -> str:
    """Bring an operand to the operation's type the way numpy's mixed-type arithmetic ends up (same kind family)."""
    if s == t or (s.kind in "uib" and t.kind in "uib" and s.bits == t.bits):
      return v
    if s.isf or t.isf:
      if s.isf and t.isf and s.bits == t.bits and s.kind == t.kind:
        return v
      if s.kind == "int" and t.isf:
        return self.f.op(f"sitofp i64 {v} to {lty(t)}")
      raise Unsupported(f"mixed {s}/{t}")
    sb = 1 if s.kind == "bool" else 64 if s.kind == "int" else s.bits
    tb = 1 if t.kind == "bool" else 64 if t.kind == "int" else t.bits
    return self.f.conv(v, sb, tb, s.kind in ("i", "int"))

  # ---------------------------------------------------------------- expressions
  def ex(self, e) -> str:
    op, a, t = e.op, e.args, e.ty
    f = self.f
    if op == "const":
      if t.kind == "f":
        return fconst(float(a[0]), t.bits)
      if t.kind == "bool":
        return "true" if int(a[0]) & 1 else "false"
      if t.kind == "bf":
        return fconst(float(rt_typed(a[0], "bf", 16)), 32)
      if t.kind == "arr":
        raise Unsupported(t.kind)
      bits = 64 if t.kind == "int" else t.bits
      v = int(a[0]) & ((1 << bits) - 1)
      return str(v - (1 << bits) if v >> (bits - 1) else v)
    if op == "var":
      p, vt = self.vars[a[0]]
      return f.op(f"load {lty(vt)}, ptr {p}")
    if op == "loopvar":
      p, vt = self.vars["@" + a[0]]
      return f.op(f"load i64, ptr {p}")
    if op == "state":
      p, w = self.state[a[0]]
      v = f.op(f"load i{w}, ptr {p}")
      if t.kind == "bool":
        return f.op(f"trunc i{w} {v} to i1")
      tb = 64 if t.kind == "int" else t.bits
      v = self.f.conv(v, w, tb, False)
      return self.from_bits(v, tb, t) if t.isf else v
    if op == "wave":
      if a[0] == "laneId":
        return "%lane32" if t.bits == 32 else self.f.conv("%lane32", 32, t.bits, False)
      return "true" if (a[0] == "wave32") == (self.L == 32) else "false"
    if op in ("bitcast", "cvt"):
      return self.convert(op, self.ex(a[0]), a[0].ty, t)
    if op == "bin":
      o, x, y = a
      if o == "**":  # (2.0 ** 64 in V_DIV_FMAS_F64): constants only, folded as numpy's power computes them
        return self.power(x, y, t)
      xv, yv = self.coerce(self.ex(x), x.ty, t), self.coerce(self.ex(y), y.ty, t)
      lt = lty(t)
      if t.kind == "bf":  # runtime: rbf(fop(...)), the f32 operation rounded to bf16
        if o not in "+-*/":
          raise Unsupported(f"operator {o} on bf16")
        r = f.op(f"{ {'+': 'fadd', '-': 'fsub', '*': 'fmul', '/': 'fdiv'}[o]} float {xv}, {yv}")
        return rbf(self.f, self.nan_rule(F32, [xv, yv], r))
      if t.isf and o in "+-*/":
        r = f.op(f"{ {'+': 'fadd', '-': 'fsub', '*': 'fmul', '/': 'fdiv'}[o]} {lt} {xv}, {yv}")
        return self.nan_rule(t, [xv, yv], r)
      if o in "/%" and t.kind in "uib" and t.bits in (8, 16, 32, 64) and not (t.kind == "i" and t.bits == 64):
        return self.divide(o, xv, yv, t)
      if t.isf:
        ins = {"%": "frem"}.get(o)
      elif t.kind == "bool":
        ins = {"&": "and", "|": "or", "^": "xor", "&&": "and", "||": "or"}.get(o)
      else:
        ins = {"+": "add", "-": "sub", "*": "mul", "&": "and", "|": "or", "^": "xor"}.get(o)
      if ins is None:
        raise Unsupported(f"operator {o} on {t}")
      return f.op(f"{ins} {lt} {xv}, {yv}")
    if op == "cmp":
      o, x, y = a
      ct = self.common(x.ty, y.ty)
      xv, yv = self.coerce(self.ex(x), x.ty, ct), self.coerce(self.ex(y), y.ty, ct)
      if ct.isf:
        pred = {"==": "oeq", "!=": "une", "<": "olt", ">": "ogt", "<=": "ole", ">=": "oge", "<>": "one"}[o]
        return f.op(f"fcmp {pred} {lty(ct)} {xv}, {yv}")
      sg = ct.kind in ("i", "int")
      pred = {"==": "eq", "!=": "ne", "<>": "ne", "<": "slt" if sg else "ult", ">": "sgt" if sg else "ugt",
              "<=": "sle" if sg else "ule", ">=": "sge" if sg else "uge"}[o]
      return f.op(f"icmp {pred} {lty(ct)} {xv}, {yv}")
    if op == "logic":
      x, y = self.ex(a[1]), self.ex(a[2])
      return f.op(f"{'and' if a[0] == '&&' else 'or'} i1 {x}, {y}")
    if op == "not":
      return f.op(f"xor i1 {self.ex(a[0])}, true")
    if op == "inv":
      v = self.coerce(self.ex(a[0]), a[0].ty, t)
      return f.op(f"xor {lty(t)} {v}, -1" if t.kind != "bool" else f"xor i1 {v}, true")
    if op == "neg":
      v = self.coerce(self.ex(a[0]), a[0].ty, t)
      return f.op(f"fneg {lty(t)} {v}") if t.isf else f.op(f"sub {lty(t)} 0, {v}")
    if op == "sel":
      c = self.ex(a[0])
      x, y = self.coerce(self.ex(a[1]), a[1].ty, t), self.coerce(self.ex(a[2]), a[2].ty, t)
      return self.select(c, x, y, t)
    if op == "shift":
      o, x, y = a
      if t.isf or t.kind == "bool":
        raise Unsupported("shift of a non-integer")
      xv = self.coerce(self.ex(x), x.ty, t)
      bits = 64 if t.kind == "int" else t.bits
      s = self.u64(self.ex(y), y.ty)
      if t.kind == "int":
        sn = self.f.conv(s, 64, bits, False)
        return f.op(f"{'shl' if o == '<<' else 'ashr'} i64 {xv}, {sn}")
      if o == ">>" and t.kind == "i":  # arithmetic: amounts past the width keep the sign
        cl = f.op(f"select i1 {f.op(f'icmp uge i64 {s}, {bits}')}, i64 {bits - 1}, i64 {s}")
        return f.op(f"ashr i{bits} {xv}, {self.f.conv(cl, 64, bits, False)}")
      return self.shift("shl" if o == "<<" else "lshr", xv, bits, s)
    if op == "bit" and self.lanebit and lane_bit_of(a[0], a[1]) in self.lanebit:
      return f.op(f"load i1, ptr {self.lanebit[lane_bit_of(a[0], a[1])][0]}")
    if op in ("slice", "bit"):
      x = a[0]
      u, ub = self.raw(self.ex(x), x.ty)
      lo = self.u64(self.ex(a[1]), a[1].ty)
      w = a[2] if op == "slice" else 1
      if ub < 64:
        u, ub = self.f.conv(u, ub, 64, False), 64
      r = self.shift("lshr", u, ub, lo)
      if t.kind == "bool":
        return f.op(f"trunc i{ub} {r} to i1")
      r = self.f.conv(r, ub, w)
      return self.from_bits(r, w, t) if t.bits == w else self.f.conv(r, w, t.bits, False)
    if op == "concat":
      total = sum(p.ty.bits for p in a)
      acc, off = "0", 0
      for p in reversed(a):
        u, ub = self.raw(self.ex(p), p.ty)
        if p.ty.kind == "bool":
          u, ub = self.f.conv(u, 8, 1, False), 1
        u = self.f.conv(u, ub, total, False) if ub != total else u
        if off:
          u = f.op(f"shl i{total} {u}, {off}")
        acc = f.op(f"or i{total} {acc}, {u}")
        off += p.ty.bits
      return self.from_bits(acc, total, t) if t.bits == total else acc
    if op == "rev":
      u, ub = self.raw(self.ex(a[0]), a[0].ty)
      return f.op(f"call i{ub} @llvm.bitreverse.i{ub}(i{ub} {u})")
    if op == "call":
      return self.call(a[0], a[1], t)
    if op == "lcall":
      return self.lcall(a[0], a[1])
    if op == "mem":
      return self.mem_read(self.ex(a[0]), a[0].ty, a[1], t)
    if op == "aget":
      return self.aget(a[0], a[1], t)
    if op == "reg":  # a register by number (readlane's VGPR[lane][SRC0]): where the binding says
      v = f.op(f"load i{a[2]}, ptr {self.bind.reg(a[0], a[1], a[2], False)}")
      return self.from_bits(v, a[2], t) if t.kind != "bool" and t.bits == a[2] else self.coerce(v, Ty("b", a[2]), t)
    raise Unsupported(f"IR op {op}")

  def divide(self, o: str, x: str, y: str, t: Ty) -> str:
    """runtime.idiv / irem: C's truncating division (signed through i64, so never overflowing), x / 0 all ones
    (unsigned) or 0 (signed); x % y = x - (x / y) * y, wrapping."""
    f, b = self.f, t.bits
    zero_div = f.op(f"icmp eq i{b} {y}, 0")
    safe = f.op(f"select i1 {zero_div}, i{b} 1, i{b} {y}")
    if t.kind == "i":
      q = f.conv(f.op(f"sdiv i64 {f.conv(x, b, 64, True)}, {f.conv(safe, b, 64, True)}"), 64, b)
      q = f.op(f"select i1 {zero_div}, i{b} 0, i{b} {q}")
    else:
      q = f.op(f"select i1 {zero_div}, i{b} -1, i{b} {f.op(f'udiv i{b} {x}, {safe}')}")
    return q if o == "/" else f.op(f"sub i{b} {x}, {f.op(f'mul i{b} {q}, {y}')}")

  def power(self, x, y, t: Ty) -> str:
    if x.op != "const" or y.op != "const" or not t.isf or x.ty.kind == "bf" or y.ty.kind == "bf":
      raise Unsupported(f"operator ** on {t}")
    with np.errstate(all="ignore"):
      r = np.power(rt_typed(x.args[0], x.ty.kind, x.ty.bits), rt_typed(y.args[0], y.ty.kind, y.ty.bits))
    return fconst(float(r), t.bits)

  def lcall(self, key, args) -> str:
    """A lambda of the body (`GT_NEG_ZERO = lambda(a, b) (...)`), inlined: its parameters and locals are allocas of
    their own, a `return` stores the result and leaves (the first one reached wins; none: 0, as compile.py)."""
    params, body, rt = self.program.lambdas[key]
    f, saved = self.f, self.vars
    vals = [self.ex(x) for x in args]
    self.vars = dict(saved)
    for nm, x, v in zip(params, args, vals):
      self.vars[nm] = (f.alloca(lty(x.ty)), x.ty)
      f.emit(f"store {lty(x.ty)} {v}, ptr {self.vars[nm][0]}")
    for nm, lt in locals_of(body).items():
      if nm not in params:
        self.vars[nm] = (f.alloca(lty(lt)), lt)
        f.emit(f"store {lty(lt)} {zero(lt)}, ptr {self.vars[nm][0]}")
    ret, end = f.alloca(lty(rt)), f.label("ret")
    f.emit(f"store {lty(rt)} {zero(rt)}, ptr {ret}")
    self.returns.append((ret, rt, end))
    self.nested += 1
    try:
      self.block(body)
    finally:
      self.nested -= 1
      self.returns.pop()
      self.vars = saved
    f.emit(f"br label %{end}")
    f.put(end)
    return f.op(f"load {lty(rt)}, ptr {ret}")

  def finite(self, v: str, t: Ty) -> str:
    f, lt = self.f, lty(t)
    a = f.op(f"call {lt} @llvm.fabs.f{t.bits}({lt} {v})")
    return f.op(f"fcmp olt {lt} {a}, {fconst(float('inf'), t.bits)}")

  def select(self, c: str, x: str, y: str, t: Ty) -> str:
    """c ? x : y. Floats are chosen by their bits: LLVM may fold `isnan(v) ? NaN : v` to `v`, any NaN being as
    good as another to it, where the pcode picks one NaN (PTX's canonical NaN, x86's)."""
    f, lt = self.f, lty(t)
    if not t.isf:
      return f.op(f"select i1 {c}, {lt} {x}, {lt} {y}")
    b = 32 if t.kind == "bf" else t.bits
    xb, yb = f.op(f"bitcast {lt} {x} to i{b}"), f.op(f"bitcast {lt} {y} to i{b}")
    return f.op(f"bitcast i{b} {f.op(f'select i1 {c}, i{b} {xb}, i{b} {yb}')} to {lt}")

  def nan_rule(self, t: Ty, ins: list[str], r: str) -> str:
    """IEEE results of an x86 SSE operation as numpy computes them, whatever operand order LLVM picks: the first
    NaN input, quieted; else, when the result is NaN (invalid operation), the default NaN, which is negative."""
    f, lt, b = self.f, lty(t), t.bits
    default = f.op(f"bitcast i{b} {DEFAULT_NAN[b] - (1 << b)} to {lt}")  # negative: the literal is signed
    out = self.select(f.op(f"fcmp uno {lt} {r}, {r}"), default, r, t)
    for x in reversed(ins):
      out = self.select(f.op(f"fcmp uno {lt} {x}, {x}"), self.quieted(x, t), out, t)
    return out

  def quieted(self, x: str, t: Ty) -> str:
    """x with its quiet bit set (a signalling NaN made quiet; other values are the caller's to exclude)."""
    f, lt, b = self.f, lty(t), t.bits
    bits = f.op(f"bitcast {lt} {x} to i{b}")
    return f.op(f"bitcast i{b} {f.op(f'or i{b} {bits}, {QUIET[b]}')} to {lt}")

  def shift(self, ins: str, v: str, bits: int, amount: str) -> str:
    """v shifted by an i64 amount the way numpy shifts (0 once the amount reaches the width; LLVM: poison)."""
    f = self.f
    if amount.lstrip("-").isdigit():
      k = int(amount)
      return "0" if not 0 <= k < bits else f.op(f"{ins} i{bits} {v}, {k}") if k else v
    big = f.op(f"icmp uge i64 {amount}, {bits}")
    safe = self.f.conv(f.op(f"select i1 {big}, i64 0, i64 {amount}"), 64, bits, False)
    return f.op(f"select i1 {big}, i{bits} 0, i{bits} {f.op(f'{ins} i{bits} {v}, {safe}')}")

  def u64(self, v: str, t: Ty) -> str:
    """An index or shift amount as uint64 (numpy's s.astype(np.uint64): negative values become huge)."""
    if t.kind in ("f", "bf"):
      raise Unsupported("float index")
    if t.kind == "bool":
      return self.f.op(f"zext i1 {v} to i64")
    return self.f.conv(v, 64 if t.kind == "int" else t.bits, 64, t.kind in ("i", "int"))

  @staticmethod
  def common(x: Ty, y: Ty) -> Ty:
    if x == y:
      return x
    if x.kind == "int":
      return y
    if y.kind == "int":
      return x
    if x.isf or y.isf:
      if x.isf and y.isf and x.bits == y.bits and x.kind == y.kind:
        return x
      raise Unsupported(f"compare {x}/{y}")
    if x.kind == "bool" or y.kind == "bool":
      raise Unsupported(f"compare {x}/{y}")
    if (x.kind == "i") == (y.kind == "i"):
      return x if x.bits >= y.bits else y
    return Ty("i", max(x.bits, y.bits) + 1)  # numpy compares mixed signedness by value

  def convert(self, op: str, v: str, s: Ty, t: Ty) -> str:
    f = self.f
    if op == "cvt" and (s.kind == "bf" or t.kind == "bf") and s != t:
      return self.convert_bf(v, s, t)
    if op == "bitcast":
      if s.isf and t.isf and s.bits == t.bits:
        return v
      u, ub = self.raw(v, s)
      sb = 64 if s.kind == "int" else s.bits
      if s.kind == "bool":
        u, ub, sb = self.f.conv(u, 8, 1, False), 1, 1
      tb = 1 if t.kind == "bool" else 64 if t.kind == "int" else t.bits
      u = self.f.conv(u, ub if ub != sb else sb, tb, s.kind == "i" and tb > sb)
      return self.from_bits(u, tb, t) if t.kind != "bool" else f.op(f"trunc i{tb} {u} to i1") if tb > 1 else u
    # value conversion (runtime.cv)
    if t.kind == "int":
      return self.coerce(v, s, Ty("int", 64)) if not s.isf else self.fp_to_int(v, s, Ty("i", 64))
    if s.kind == "int" and not t.isf:
      return self.f.conv(v, 64, 1 if t.kind == "bool" else t.bits, True) if t.kind != "bool" else \
        f.op(f"trunc i64 {v} to i1")
    if s.isf and t.isf:
      return self.fp_to_fp(v, s.bits, t.bits)
    if s.isf:
      return self.fp_to_int(v, s, t)
    if t.isf:
      if s.kind == "bool":
        return f.op(f"uitofp i1 {v} to {lty(t)}")
      sb = 64 if s.kind == "int" else s.bits
      if sb > 64:
        raise Unsupported("wide int -> float")
      return f.op(f"{'sitofp' if s.kind in ('i', 'int') else 'uitofp'} i{sb} {v} to {lty(t)}")
    if t.kind == "bool":
      u, ub = self.raw(v, s)
      if s.kind == "bool":
        return v
      return f.op(f"trunc i{ub} {u} to i1")
    u, ub = self.raw(v, s)
    if s.kind == "bool":
      u, ub = self.f.conv(u, 8, 1, False), 1
    return self.f.conv(u, ub, t.bits, s.kind == "i" and t.bits > s.bits)

  def convert_named(self, name: str, x, t: Ty) -> str:
    """runtime.convert: the manual's x_to_y(...) conversions (round to nearest even: bodies that set ROUND_MODE are
    not compiled here)."""
    f = self.f
    src, dst = name.split("_to_")[:2]
    s = x.ty
    if src in FP8 and dst == "f32" and s.kind in "uib" and s.bits == 8 and t.kind == "f" and t.bits == 32:
      return fp8_decode(f, self.ex(x), src)
    if src == "f32" and dst in FP8 and s.kind == "f" and s.bits == 32 and t.kind in "uib" and t.bits == 8:
      return self.fp8_encode(self.ex(x), dst)
    if dst in ("snorm", "unorm") and s.kind == "f" and t.kind in "uib" and t.bits == 16:
      return self.to_norm(self.ex(x), s, dst == "snorm")
    fl = ("f32", "f16", "f64", "bf16")
    if src in fl and dst in fl and s.isf and t.isf and (s.kind == "bf") == (src == "bf16") and \
       (t.kind == "bf") == (dst == "bf16"):
      v = self.ex(x)
      r = self.convert("cvt", v, s, t)
      if t.kind == "bf":  # (rounded to bf16, a NaN quiet: runtime.rbf)
        return r
      r = self.select(f.op(f"fcmp uno {lty(t)} {r}, {r}"), self.quieted(r, t), r, t)  # an IEEE conversion quiets
      if self.rmode is None:
        raise Unsupported("ROUND_MODE of the wave")  # (the native tier has no MODE register)
      return self.toward_zero(v, s, r, t) if self.rmode == 3 else r
    if s.kind == "bf" or t.kind == "bf" or dst in ("snorm", "unorm", "bf16") or src == "bf16":
      raise Unsupported(name)
    if src in ("u4", "i4", "u8", "i8", "u16", "i16", "u32", "i32") and not dst.startswith("f"):
      sk, sb = src[0], int(src[1:])
      u, ub = self.raw(self.ex(x), s)
      if s.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      mid = Ty(sk, sb)
      return self.convert("cvt", self.from_bits(self.f.conv(u, ub, sb, False), sb, mid), mid, t)
    if src in ("f32", "f16", "f64") and dst in ("u32", "i32", "u16", "i16", "u8") and s.kind == "f":
      return self.convert("cvt", self.ex(x), s, t)
    if src in ("u32", "i32", "u16", "i16") and dst in ("f32", "f16", "f64") and s.kind in "uib":
      if t.bits == 16 and s.bits > 24:
        raise Unsupported("int -> f16 (one rounding)")
      return self.convert("cvt", self.ex(x), s, t)
    raise Unsupported(name)

  def toward_zero(self, x: str, s: Ty, r: str, t: Ty) -> str:
    """runtime.toward_zero (ROUND_MODE = ROUND_TOWARD_ZERO): the nearest-even result r of finite x stepped one ulp
    toward zero where it is larger in magnitude than x (an infinity becomes the largest finite value)."""
    f, d = self.f, Ty("f", 64)
    xd, rd = (v if lty(vt) == "double" else f.op(f"fpext {lty(vt)} {v} to double") for v, vt in ((x, s), (r, t)))
    ax, ar = (f.op(f"call double @llvm.fabs.f64(double {v})") for v in (xd, rd))
    fix = f.op(f"and i1 {self.finite(xd, d)}, {f.op(f'fcmp ogt double {ar}, {ax}')}")
    u = f.op(f"bitcast {lty(t)} {r} to i{t.bits}")
    return self.select(fix, f.op(f"bitcast i{t.bits} {f.op(f'sub i{t.bits} {u}, 1')} to {lty(t)}"), r, t)

  def fp_to_fp(self, v: str, fb: int, tb: int) -> str:
    """runtime.fcvt: round to nearest even; a NaN keeps sign, quiet bit and top payload bits (not quieted)."""
    f = self.f
    if fb == tb:
      return v
    st, tt = {16: "half", 32: "float", 64: "double"}[fb], {16: "half", 32: "float", 64: "double"}[tb]
    if fb == 64 and tb == 16:  # (LLVM's own f64 -> f16 is a libcall the host process may not have)
      r = to_half(self.f, v)
    else:
      r = f.op(f"{'fpext' if tb > fb else 'fptrunc'} {st} {v} to {tt}")
    (mf, _), (mt, et) = {16: (10, 5), 32: (23, 8), 64: (52, 11)}[fb], {16: (10, 5), 32: (23, 8), 64: (52, 11)}[tb]
    u = self.f.conv(f.op(f"bitcast {st} {v} to i{fb}"), fb, 64)
    sign = f.op(f"shl i64 {f.op(f'lshr i64 {u}, {fb - 1}')}, {tb - 1}")
    man = f.op(f"and i64 {u}, {(1 << mf) - 1}")
    man = f.op(f"shl i64 {man}, {mt - mf}") if mt >= mf else f.op(f"lshr i64 {man}, {mf - mt}")
    z = f.op(f"icmp eq i64 {man}, 0")
    man = f.op(f"select i1 {z}, i64 {1 << (mt - 1)}, i64 {man}")
    nb = f.op(f"or i64 {f.op(f'or i64 {sign}, {((1 << et) - 1) << mt}')}, {man}")
    nb = self.f.conv(nb, 64, tb, False)
    nan = f.op(f"bitcast i{tb} {nb} to {tt}")
    isn = f.op(f"fcmp uno {st} {v}, {v}")
    return self.select(isn, nan, r, Ty("f", tb))

  def convert_bf(self, v: str, s: Ty, t: Ty) -> str:
    """runtime.cv to or from bf16: from bf16 as from its f32 container; to bf16 rbf of the value in f32 (f16: exact),
    of f64 rounded to odd into f32 first, of an integer through f64."""
    f = self.f
    if s.kind == "bf":
      return self.convert("cvt", v, F32, t) if t.kind != "bf" else v
    if s.kind == "f":
      x = v if s.bits == 32 else odd32(self.f, v) if s.bits == 64 else f.op(f"fpext half {v} to float")
      return rbf(self.f, x)
    if s.kind == "bool" or s.kind in "uib" and s.bits > 64:
      raise Unsupported(f"{s} -> bf16")
    sb = 64 if s.kind == "int" else s.bits
    return rbf(self.f, odd32(self.f, f.op(f"{'sitofp' if s.kind in ('i', 'int') else 'uitofp'} i{sb} {v} to double")))

  def to_norm(self, v: str, s: Ty, signed: bool) -> str:
    """runtime.convert's *_to_snorm/unorm: x in f64, NaN -> 0, clamped to [-1 or 0, 1], times 32767 or 65535 (exact),
    rounded half to even, as 16 bits."""
    f = self.f
    d = v if s.bits == 64 else f.op(f"fpext {lty(s)} {v} to double")
    d = f.op(f"select i1 {f.op(f'fcmp uno double {d}, {d}')}, double 0.0, double {d}")
    d = f.op(f"call double @llvm.maxnum.f64(double {d}, double {fconst(-1.0 if signed else 0.0, 64)})")
    d = f.op(f"call double @llvm.minnum.f64(double {d}, double {fconst(1.0, 64)})")
    d = f.op(f"fmul double {d}, {fconst(32767.0 if signed else 65535.0, 64)}")
    r = f.op(f"fptosi double {f.op(f'call double @llvm.roundeven.f64(double {d})')} to i64")
    return f.conv(r, 64, 16)

  def fp_to_int(self, v: str, s: Ty, t: Ty) -> str:
    """runtime.f2i: truncate toward zero, NaN -> 0, saturate (widths <= 32, and 64)."""
    f = self.f
    tb = 1 if t.kind == "bool" else t.bits
    if t.kind == "bool" or 32 < tb < 64 or tb > 64 or t.kind not in ("i", "u", "b"):
      raise Unsupported(f"float -> {t}")
    d = v if s.bits == 64 else f.op(f"fpext {lty(s)} {v} to double")
    tr = f.op(f"call double @llvm.trunc.f64(double {d})")
    isn = f.op(f"fcmp uno double {tr}, {tr}")
    tr = f.op(f"select i1 {isn}, double 0.0, double {tr}")
    lo, hi = (-(2 ** (tb - 1)), 2 ** (tb - 1) - 1) if t.kind == "i" else (0, 2 ** tb - 1)
    if tb == 64:  # the bounds' doubles are 2**63 / 2**64 / -2**63: at or past them the result saturates
      big = f.op(f"fcmp oge double {tr}, {fconst(float(hi), 64)}")
      small = f.op(f"fcmp ole double {tr}, {fconst(float(lo), 64)}")
      mid = f.op(f"select i1 {f.op(f'or i1 {big}, {small}')}, double 0.0, double {tr}")
      i = f.op(f"{'fptosi' if t.kind == 'i' else 'fptoui'} double {mid} to i64")
      i = f.op(f"select i1 {big}, i64 {hi - (1 << 64) if hi >> 63 else hi}, i64 {i}")
      return f.op(f"select i1 {small}, i64 {lo}, i64 {i}")
    tr = f.op(f"call double @llvm.maxnum.f64(double {tr}, double {fconst(float(lo), 64)})")
    tr = f.op(f"call double @llvm.minnum.f64(double {tr}, double {fconst(float(hi), 64)})")
    i = f.op(f"fptosi double {tr} to i64")
    return self.f.conv(i, 64, tb, False)

  def call(self, name: str, args, t: Ty) -> str:
    f = self.f
    ea = self.bind.address() if name.startswith("Calc") and name.endswith("Addr") and not t.isf else None
    if ea is not None:
      for x in args:  # the executor's effective address answers, whatever the arguments
        self.ex(x)
      return self.coerce(ea, Ty("u", 64), t)
    if "_to_" in name and "scale" not in name and "_sr" not in name.lower() and len(args) == 1:
      return self.convert_named(name, args[0], t)
    if name in ("isSignalNAN", "isQuietNAN") and args[0].ty.kind == "f" and t.kind == "bool":
      x, xt = self.ex(args[0]), args[0].ty  # runtime._nanq: a NaN whose quiet bit is clear / set
      q = f.op(f"icmp ne i{xt.bits} {f.op(f'and i{xt.bits} {self.raw(x, xt)[0]}, {QUIET[xt.bits]}')}, 0")
      q = q if name == "isQuietNAN" else f.op(f"xor i1 {q}, true")
      return f.op(f"and i1 {f.op(f'fcmp uno {lty(xt)} {x}, {x}')}, {q}")
    if name == "cvtToQuietNAN" and args[0].ty.kind == "f" and t == args[0].ty:
      x = self.ex(args[0])
      return self.select(f.op(f"fcmp uno {lty(t)} {x}, {x}"), self.quieted(x, t), x, t)
    if name == "sign" and t.kind == "bool" and args[0].ty.kind in ("f", "bf", "u", "i", "b"):
      u, ub = self.raw(self.ex(args[0]), args[0].ty)  # runtime._sign: the top bit
      return f.op(f"icmp slt i{ub} {u}, 0")
    if name == "abs" and t == args[0].ty and t.kind in ("f", "i", "u", "b"):
      x, lt = self.ex(args[0]), lty(t)
      if t.kind == "f":
        return f.op(f"call {lt} @llvm.fabs.f{t.bits}({lt} {x})")
      if t.kind != "i":  # numpy's abs of an unsigned value is the value
        return x
      return f.op(f"select i1 {f.op(f'icmp slt {lt} {x}, 0')}, {lt} {f.op(f'sub {lt} 0, {x}')}, {lt} {x}")
    if name in ("isNAN", "isINF") and args[0].ty.isf:
      xt = args[0].ty if args[0].ty.kind == "f" else F32  # (bf16: its f32 container)
      x, lt = self.ex(args[0]), lty(xt)
      if name == "isNAN":
        return f.op(f"fcmp uno {lt} {x}, {x}")
      a = f.op(f"call {lt} @llvm.fabs.f{xt.bits}({lt} {x})")
      return f.op(f"fcmp oeq {lt} {a}, {fconst(float('inf'), xt.bits)}")
    if name == "signext_from_bit" and len(args) == 2 and args[0].ty.kind in "uib" and not t.isf:
      # runtime._sext_bit: the low n bits of x sign-extended from bit n-1 (n == 0: all zeros), as 64 bits
      u, ub = self.raw(self.ex(args[0]), args[0].ty)
      u = self.f.conv(u, ub, 64, False)
      n = self.u64(self.ex(args[1]), args[1].ty)
      pos = f.op(f"select i1 {f.op(f'icmp eq i64 {n}, 0')}, i64 0, i64 {f.op(f'sub i64 {n}, 1')}")
      sgn = f.op(f"trunc i64 {self.shift('lshr', u, 64, pos)} to i1")
      mask = self.shift("shl", "-1", 64, n)
      neg = f.op(f"and i1 {sgn}, {f.op(f'icmp ugt i64 {n}, 0')}")
      low = f.op(f"and i64 {u}, {f.op(f'xor i64 {mask}, -1')}")
      r = f.op(f"select i1 {neg}, i64 {f.op(f'or i64 {u}, {mask}')}, i64 {low}")
      b = args[0].ty.bits
      return self.from_bits(self.f.conv(r, 64, b, False), b, t) if t.bits == b else \
          self.f.conv(self.f.conv(r, 64, b, False), b, t.bits, False)
    if name == "signext" and len(args) == 1 and not t.isf and not args[0].ty.isf:
      s = args[0].ty
      sb = 64 if s.kind == "int" else s.bits
      return self.f.conv(self.ex(args[0]), sb, 64 if t.kind == "int" else t.bits, True)
    xt = args[0].ty if args else t
    if name.startswith("rint_") and name[5:] in RINT and xt.isf and t == xt:
      ct = F32 if t.kind == "bf" else t  # (bf16: its f32 container, whose integral values are bf16 values)
      x, lt = self.ex(args[0]), lty(ct)  # runtime's rint_*: numpy's rint/trunc/floor/ceil (a NaN comes out quiet)
      return self.nan_rule(ct, [x], f.op(f"call {lt} @llvm.{RINT[name[5:]]}.f{ct.bits}({lt} {x})"))
    op, _, mode = name.partition("_")
    if op in PTX_ARITY and mode in SET_ROUNDING:
      return self.ptx_arith(op, mode, args, t)
    if name == ("round_rn_bf16" if t.kind == "bf" else f"round_rn_f{t.bits}") and t.isf and len(args) == 1 and \
       xt.kind in "iu" and xt.bits <= 32:  # runtime._ptx_round from an integer: exact in f64, rounded once
      d = f.op(f"{'sitofp' if xt.kind == 'i' else 'uitofp'} i{xt.bits} {self.ex(args[0])} to double")
      return rbf(self.f, odd32(self.f, d)) if t.kind == "bf" else self.narrow(d, t)
    rnd, _, fmt = mode.partition("_")
    if op == "round" and rnd in ROUNDINGS and fmt in RFMT and len(args) == 1:
      return self.ptx_round(rnd, fmt, args[0], t)
    if name.startswith("approx_") and name[7:] in APPROX and len(args) == 1 and xt.kind == "f" and t == xt:
      fn, x = APPROX[name[7:]], self.ex(args[0])
      if isinstance(fn, str):
        return self.libm(fn, [x], [xt], t)
      d = x if t.bits == 64 else f.op(f"fpext {lty(t)} {x} to double")
      r = {"sqrt": lambda: f.op(f"call double @llvm.sqrt.f64(double {d})"),
           "rcp": lambda: f.op(f"fdiv double 1.0, {d}"),
           "rsqrt": lambda: f.op(f"fdiv double 1.0, {f.op(f'call double @llvm.sqrt.f64(double {d})')}")}[name[7:]]()
      return self.narrow(r, t)
    if xt.kind == "f" and name in LIBM and len(args) == LIBM[name]:
      return self.libm(name, [self.ex(x) for x in args], [x.ty for x in args], t)
    if name == "ftz" and xt.kind == "bf" and t == xt:  # (a bf16 denormal is one of its f32 container)
      return self._ftz([self.ex(args[0])], [F32], F32)
    if xt.kind == "f" and name in FLOAT_BUILTINS and len(args) == FLOAT_BUILTINS[name]:
      return getattr(self, "_" + name)([self.ex(x) for x in args], [x.ty for x in args], t)
    if name in ("v_cvt_i16_f32", "v_cvt_u16_f32") and xt.kind == "f" and t.kind in "uib" and t.bits == 16:
      return self.fp_to_int(self.ex(args[0]), xt, Ty("i" if name[6] == "i" else "u", 16))  # runtime._cvt16
    if name in ("s_ff1_i32_b32", "s_ff1_i32_b64") and xt.kind in "uib" and t.kind in "uib" and t.bits == 32:
      u, ub = self.raw(self.ex(args[0]), xt)  # runtime._ff1: the lowest set bit's index, -1 for none
      z = f.op(f"call i64 @llvm.cttz.i64(i64 {self.f.conv(u, ub, 64)}, i1 false)")
      return f.conv(f.op(f"select i1 {f.op(f'icmp eq i64 {z}, 64')}, i64 -1, i64 {z}"), 64, 32)
    if name in ("s_nop", "nop"):  # runtime._nop: the manual's explicit no-operation (V_PERMLANE64 in wave32)
      for x in args:
        self.ex(x)
      return zero(t) if t.kind != "int" else "0"
    if name.startswith(("v_", "s_")):
      return self.helper(name, args, t)
    across = getattr(self.bind, "across", None)  # a built-in reading other lanes (ds_swizzle): the executor's
    if across is not None:
      return across(name, args, t)
    raise Unsupported(f"built-in {name}")

  # ---------------------------------------------------------------- float built-ins (runtime.py's, bit for bit)
  def libm(self, name: str, v, ts, t):
    """runtime._transcendental: the C library's f64 function (a call LLVM may not treat as the built-in it knows:
    no folding, no rewriting pow(2, x) to exp2), rounded once to t."""
    if any(x != t for x in ts):
      raise Unsupported(f"{name} types")
    f = self.f
    ds = [x if t.bits == 64 else f.op(f"fpext {lty(t)} {x} to double") for x in v]
    return self.narrow(f.op(f"call double @{LIBC}{name}({', '.join('double ' + d for d in ds)}) nounwind"), t)

  def narrow(self, d: str, t: Ty) -> str:
    """An f64 value rounded once to float type t."""
    return d if t.bits == 64 else to_half(self.f, d) if t.bits == 16 else self.f.op(f"fptrunc double {d} to float")

  def _sqrt(self, v, ts, t):
    """runtime._sqrt: IEEE (correctly rounded; f16 through f32, which rounds it once), x86's NaNs."""
    (x,), (xt,) = v, ts
    if t != xt:
      raise Unsupported("sqrt type")
    lt = lty(t)
    return self.nan_rule(t, [x], self.f.op(f"call {lt} @llvm.sqrt.f{t.bits}({lt} {x})"))

  def _round(self, name: str, v, ts, t):
    (x,), (xt,) = v, ts
    if t != xt:
      raise Unsupported(f"{name} type")
    lt = lty(t)
    r = self.f.op(f"call {lt} @llvm.{name}.f{t.bits}({lt} {x})")
    if t.bits != 16:  # (f16: numpy's loop goes through f32, whose rounding quiets a NaN)
      return r
    return self.nan_rule(t, [x], r)

  def _trunc(self, v, ts, t):
    return self._round("trunc", v, ts, t)

  def _floor(self, v, ts, t):
    return self._round("floor", v, ts, t)

  def _exponent(self, v, ts, t):
    """runtime._exponent: the biased exponent field, as i32."""
    (x,), (xt,) = v, ts
    if t.kind not in "uib" or t.bits != 32:
      raise Unsupported("exponent type")
    m, e = MANT[xt.bits]
    u, ub = self.raw(x, xt)
    return self.f.conv(self.f.op(f"and i{ub} {self.f.op(f'lshr i{ub} {u}, {m}')}, {(1 << e) - 1}"), ub, 32)

  def _mantissa(self, v, ts, t):
    """runtime._mantissa (numpy's frexp): the significand in [0.5, 1.0) with x's sign, a denormal normalised;
    zeros, infinities and NaNs as they are (f16's loop goes through f32 and quiets a NaN)."""
    (x,), (xt,) = v, ts
    if t != xt:
      raise Unsupported("mantissa type")
    f, b = self.f, t.bits
    m, e = MANT[b]
    u, _ = self.raw(x, t)
    ex = f.op(f"and i{b} {f.op(f'lshr i{b} {u}, {m}')}, {(1 << e) - 1}")
    man = f.op(f"and i{b} {u}, {(1 << m) - 1}")
    lz = f.op(f"call i{b} @llvm.ctlz.i{b}(i{b} {man}, i1 false)")
    sh = f.op(f"sub i{b} {lz}, {b - 1 - m}")  # (a denormal's leading 1 moved up to the hidden bit)
    den = f.op(f"and i{b} {f.op(f'shl i{b} {man}, {sh}')}, {(1 << m) - 1}")
    normal = f.op(f"and i1 {f.op(f'icmp ne i{b} {ex}, 0')}, {f.op(f'icmp ne i{b} {ex}, {(1 << e) - 1}')}")
    sub = f.op(f"and i1 {f.op(f'icmp eq i{b} {ex}, 0')}, {f.op(f'icmp ne i{b} {man}, 0')}")
    frac = f.op(f"select i1 {normal}, i{b} {man}, i{b} {den}")
    sign = f.op(f"and i{b} {u}, {1 << (b - 1)}")
    r = f.op(f"or i{b} {f.op(f'or i{b} {sign}, {((1 << (e - 1)) - 2) << m}')}, {frac}")
    r = f.op(f"select i1 {f.op(f'or i1 {normal}, {sub}')}, i{b} {r}, i{b} {u}")
    r = self.from_bits(r, b, t)
    return self.nan_rule(t, [x], r) if b == 16 else r

  def _isDENORM(self, v, ts, t):
    """runtime._isdenorm: exponent field 0, significand not."""
    (x,), (xt,) = v, ts
    f, b = self.f, xt.bits
    m, _ = MANT[b]
    u, _ = self.raw(x, xt)
    sub = f.op(f"icmp ult i{b} {f.op(f'and i{b} {u}, {(1 << (b - 1)) - 1}')}, {1 << m}")
    man = f.op(f"and i{b} {u}, {(1 << m) - 1}")
    return f.op(f"and i1 {sub}, {f.op(f'icmp ne i{b} {man}, 0')}")

  def _ftz(self, v, ts, t):
    """runtime._ftz: a denormal flushed to zero of the same sign."""
    (x,), (xt,) = v, ts
    if t != xt:
      raise Unsupported("ftz type")
    f, b = self.f, t.bits
    u, _ = self.raw(x, t)
    z = self.from_bits(f.op(f"and i{b} {u}, {1 << (b - 1)}"), b, t)
    return self.select(self._isDENORM(v, ts, Ty("bool", 1)), z, x, t)

  def _ldexp(self, v, ts, t):
    """runtime._ldexp: x * 2**e in f64 (e clamped to +-4000), rounded once into x's type; a NaN x comes out quieted."""
    (x, e), (xt, et) = v, ts
    if t != xt or et.isf or et.kind == "bool":
      raise Unsupported("ldexp type")
    f = self.f
    d = x if t.bits == 64 else f.op(f"fpext {lty(t)} {x} to double")
    n = self.coerce(e, et, Ty("i", 64)) if et.kind != "int" else e
    n = f.op(f"call i64 @llvm.smax.i64(i64 {f.op(f'call i64 @llvm.smin.i64(i64 {n}, i64 4000)')}, i64 -4000)")
    r = self.ldexp(d, f.conv(n, 64, 32))
    return self.select(f.op(f"fcmp uno {lty(t)} {x}, {x}"), self.quieted(x, t), self.narrow(r, t), t)

  def ldexp(self, d: str, e: str) -> str:
    """d * 2**e (a double, an i32) rounded once: the C library's ldexp."""
    return self.f.op(f"call double @{LIBC}ldexp(double {d}, i32 {e})")

  def _isEven(self, v, ts, t):
    """runtime._iseven: fmod(trunc(x as f64), 2) == 0 (false for infinities and NaNs)."""
    (x,), (xt,) = v, ts
    if t.kind != "bool":
      raise Unsupported("isEven type")
    f = self.f
    d = x if xt.bits == 64 else f.op(f"fpext {lty(xt)} {x} to double")
    r = f.op(f"frem double {f.op(f'call double @llvm.trunc.f64(double {d})')}, 2.0")
    return f.op(f"fcmp oeq double {r}, 0.0")

  def _fma(self, v, ts, t):
    """runtime._fma: one rounding (f64: LLVM's fma; f16: the exact f64 product plus c, made round-to-odd, then
    narrowed; f32: LLVM's fma), NaNs as x86's f64 product then sum give them: a, then b, then c, quieted."""
    if any(x != t for x in ts):
      raise Unsupported("fma types")
    a, b, c = v
    f, lt = self.f, lty(t)
    if t.bits == 64:  # runtime._fma: exact for finite inputs with non-zero factors, else x * y + z (the same bits)
      r = f.op(f"call double @llvm.fma.f64(double {a}, double {b}, double {c})")
      fin = f.op(f"and i1 {f.op(f'and i1 {self.finite(a, t)}, {self.finite(b, t)}')}, {self.finite(c, t)}")
      p = self.nan_rule(t, [a, b], f.op(f"fmul double {a}, {b}"))
      z = f.op(f"or i1 {f.op(f'fcmp oeq double {a}, 0.0')}, {f.op(f'fcmp oeq double {b}, 0.0')}")
      two = f.op(f"or i1 {f.op(f'xor i1 {fin}, true')}, {z}")
      return self.select(two, self.nan_rule(t, [p, c], f.op(f"fadd double {p}, {c}")), r, t)
    if t.bits == 32:
      r = f.op(f"call float @llvm.fma.f32(float {a}, float {b}, float {c})")
    else:
      ad, bd, cd = (f.op(f"fpext half {x} to double") for x in (a, b, c))
      r = to_half(self.f, self.sum_odd(f.op(f"fmul double {ad}, {bd}"), cd))  # (the product is exact: 2 x 11 bits)
    # NaNs: x86's f64 product then sum (a, then b, then c)
    p = self.nan_rule(t, [a, b], f.op(f"fmul {lt} {a}, {b}"))
    return self.nan_rule(t, [p, c], r)

  def sum_odd(self, x: str, y: str) -> str:
    """x + y (doubles) rounded to odd: TwoSum's exact error decides the sticky low bit. Infinities and NaNs come out
    as the plain sum's."""
    f = self.f
    s = f.op(f"fadd double {x}, {y}")
    bb = f.op(f"fsub double {s}, {x}")  # TwoSum: s + err == x + y exactly
    da = f.op(f"fsub double {x}, {f.op(f'fsub double {s}, {bb}')}")
    err = f.op(f"fadd double {da}, {f.op(f'fsub double {y}, {bb}')}")
    sb = f.op(f"bitcast double {s} to i64")
    even = f.op(f"icmp eq i64 {f.op(f'and i64 {sb}, 1')}, 0")
    up = f.op(f"icmp eq i1 {f.op(f'fcmp olt double {err}, 0.0')}, {f.op(f'icmp slt i64 {sb}, 0')}")
    odd = f.op(f"add i64 {sb}, {f.op(f'select i1 {up}, i64 1, i64 -1')}")
    fin = self.finite(s, Ty("f", 64))
    fix = f.op(f"and i1 {f.op(f'and i1 {even}, {fin}')}, {f.op(f'fcmp one double {err}, 0.0')}")
    return f.op(f"bitcast i64 {f.op(f'select i1 {fix}, i64 {odd}, i64 {sb}')} to double")

  # ---------------------------------------------------------------- PTX's directed roundings (runtime._ptx_*)
  def ptx_arith(self, op: str, mode: str, args, t: Ty) -> str:
    """runtime._ptx_arith: the exact result rounded once with `mode`. f32/f64: the host's own operation under that
    rounding (`@gputwin.rounded`, which sets the host's rounding mode around LLVM's constrained operations and
    restores round to nearest); f16/bf16 (add, sub, mul, fma): the exact double, rounded to odd, then once into the
    format (`round_once`). NaNs: x86's rule, as the numpy backend computes the special cases in f64."""
    if len(args) != PTX_ARITY[op] or any(x.ty != t for x in args) or not t.isf:
      raise Unsupported(f"{op}_{mode} types")
    f, lt, ct = self.f, lty(t), F32 if t.kind == "bf" else t
    v = [self.ex(x) for x in args]
    a, b = v[0], v[1] if len(v) > 1 else None
    p = self.nan_rule(ct, v[:2], f.op(f"fmul {lt} {a}, {b}")) if op == "fma" else None  # (only its NaN counts)
    if t.kind == "f" and t.bits in (32, 64):
      xs = {"sub": lambda: [a, f.op(f"fneg {lt} {b}")], "rcp": lambda: [fconst(1.0, t.bits), a]}.get(op, lambda: v)()
      ins = {"add": "fadd", "sub": "fadd", "mul": "fmul", "div": "fdiv", "rcp": "fdiv"}.get(op, op)
      code = [r[0] for r in ROUNDED].index(ins)
      xs = (xs + [zero(t)] * 3)[:3]
      r = f.op(f"call {lt} @gputwin.rounded.f{t.bits}(i32 {code}, i32 {SET_ROUNDING[mode]}, "
               f"{', '.join(f'{lt} {x}' for x in xs)})")
      if op != "fma":
        return self.nan_rule(t, v, r)
      if t.bits == 64:  # runtime: x * y + z in f64 unless every input is finite
        fin = f.op(f"and i1 {f.op(f'and i1 {self.finite(a, t)}, {self.finite(b, t)}')}, {self.finite(v[2], t)}")
        r = self.select(fin, r, f.op(f"fadd double {p}, {v[2]}"), t)
      return self.nan_rule(t, [p, v[2]], r)
    if op not in ("add", "sub", "mul", "fma") or t.bits != 16:
      raise Unsupported(f"{op}_{mode} on {t}")
    d = [f.op(f"fpext {lt} {x} to double") for x in v]
    x = f.op(f"fmul double {d[0]}, {d[1]}") if op in ("mul", "fma") else d[0]
    y = {"add": lambda: d[1], "sub": lambda: f.op(f"fneg double {d[1]}"), "mul": lambda: "-0.0",
         "fma": lambda: d[2]}[op]()  # (x + -0 is x, -0 too)
    s = self.sum_odd(x, y)  # exact products of 11-bit significands; the sum rounded to odd
    if mode == "rm" and op != "mul":  # an exact zero of a sum is -0 unless both terms are +0
      nx, ny = f.op(f"fneg double {x}"), f.op(f"fneg double {y}")
      neg0 = f.op(f"fneg double {f.op(f'fadd double {nx}, {ny}')}")
      s = self.select(f.op(f"fcmp oeq double {s}, 0.0"), neg0, s, Ty("f", 64))
    normal = f.op(f"and i1 {self.finite(s, Ty('f', 64))}, {f.op(f'fcmp one double {s}, 0.0')}")
    r = self.select(normal, self.round_once(*self.decompose(s), "bf16" if t.kind == "bf" else "f16", mode), s,
                    Ty("f", 64))
    r = f.op(f"fptrunc double {r} to float") if t.kind == "bf" else self.narrow(r, t)
    xs = [p, v[2]] if op == "fma" else v
    return self.nan_rule(ct, xs, r)

  def ptx_round(self, mode: str, fmt: str, x, t: Ty) -> str:
    """runtime._ptx_round: a float or integer rounded once into fmt with mode (zeros, infinities and NaNs as they
    are); e4m3/e5m2: the byte, saturated to the largest finite value, NaN 0x7f."""
    f, xt = self.f, x.ty
    v = self.ex(x)
    if xt.kind in ("i", "u", "b", "int") and (xt.kind == "int" or xt.bits <= 64):
      sb, sg = (64, True) if xt.kind == "int" else (xt.bits, xt.kind == "i")
      w = f.conv(v, sb, 64, sg)
      neg = f.op(f"icmp slt i64 {w}, 0") if sg else "false"
      mag = f.op(f"select i1 {neg}, i64 {f.op(f'sub i64 0, {w}')}, i64 {w}")  # (-2**63: 2**63 unsigned)
      nz = f.op(f"icmp ne i64 {mag}, 0")
      r = self.round_once(neg, f.op(f"select i1 {nz}, i64 {mag}, i64 1"), "0", fmt, mode)
      d = self.select(nz, r, "0.0", Ty("f", 64))
    elif xt.isf:
      d = v if xt.kind == "f" and xt.bits == 64 else f.op(f"fpext {lty(xt)} {v} to double")
      normal = f.op(f"and i1 {self.finite(d, Ty('f', 64))}, {f.op(f'fcmp one double {d}, 0.0')}")
      special = self.select(f.op(f"fcmp uno double {d}, {d}"), self.quieted(d, Ty("f", 64)), d, Ty("f", 64))
      d = self.select(normal, self.round_once(*self.decompose(d), fmt, mode), special, Ty("f", 64))
    else:
      raise Unsupported(f"round_{mode}_{fmt} of {xt}")
    if fmt in ("e4m3", "e5m2"):
      return self.encode8(d, fmt)
    return f.op(f"fptrunc double {d} to float") if t.kind == "bf" or t.bits == 32 else self.narrow(d, t)

  def fp8_encode(self, x: str, fmt: str) -> str:
    """runtime.fp8_encode: an f32 rounded to nearest even into an 8-bit format, not saturated (past the largest
    finite value: fp8_special's overflow code; a NaN: its NaN code; fnuz: no -0)."""
    f = self.f
    p, emin, top = fp8_spec(fmt)
    mb, f64 = p - 1, Ty("f", 64)
    d = f.op(f"fpext float {x} to double")
    nz = f.op(f"and i1 {self.finite(d, f64)}, {f.op(f'fcmp one double {d}, 0.0')}")
    r = self.select(nz, self.round_once(*self.decompose(d), fmt, "rn", (p, emin, top)), d, f64)  # 0, inf as they are
    a = f.op(f"call double @llvm.fabs.f64(double {r})")
    mag = f.conv(self.code8(a, mb, emin), 64, 8)
    neg = f.op(f"icmp slt i64 {f.op(f'bitcast double {d} to i64')}, 0")
    fnuz = FP8[fmt][3] == "fnuz"
    signed = f.op(f"or i8 {mag}, {f.op(f'select i1 {neg}, i8 -128, i8 0')}")
    code = f.op(f"select i1 {f.op(f'icmp eq i8 {mag}, 0')}, i8 0, i8 {signed}") if fnuz else signed
    over, isnan = f.op(f"fcmp ogt double {a}, {fconst(top, 64)}"), f.op(f"fcmp uno double {d}, {d}")
    for cond, nan in ((over, False), (isnan, True)):
      lo, hi = fp8_special(fmt, False, nan), fp8_special(fmt, True, nan)
      special = f.op(f"select i1 {neg}, i8 {hi - 256 if hi > 127 else hi}, i8 {lo - 256 if lo > 127 else lo}")
      code = f.op(f"select i1 {cond}, i8 {special}, i8 {code}")
    return code

  def decompose(self, d: str) -> tuple[str, str, str]:
    """A finite non-zero double as (negative, significand, exponent): (-1)**negative * significand * 2**exponent."""
    f = self.f
    u = f.op(f"bitcast double {d} to i64")
    ex = f.op(f"and i64 {f.op(f'lshr i64 {u}, 52')}, 2047")
    man = f.op(f"and i64 {u}, {(1 << 52) - 1}")
    sub = f.op(f"icmp eq i64 {ex}, 0")
    m = f.op(f"select i1 {sub}, i64 {man}, i64 {f.op(f'or i64 {man}, {1 << 52}')}")
    return f.op(f"icmp slt i64 {u}, 0"), m, f.op(f"select i1 {sub}, i64 -1074, i64 {f.op(f'sub i64 {ex}, 1075')}")

  def round_once(self, neg: str, m: str, e: str, fmt: str, mode: str, spec: tuple | None = None) -> str:
    """runtime.round_exact in integers: (-1)**neg * m * 2**e (m a non-zero i64 taken unsigned, e an i64) rounded once
    into fmt with mode, as a double (every format fits in one): the significand cut to the format's precision at its
    exponent (or the denormal one), incremented as the mode and the bits cut off say; past the largest finite value,
    infinity or that value as the mode says. A double rounded to odd stands for the exact value it came from."""
    f = self.f
    p, emin, top = spec or RFMT[fmt]  # (spec: another format's, runtime.fp8_spec)
    lz = f.op(f"call i64 @llvm.ctlz.i64(i64 {m}, i1 false)")
    big = f.op(f"add i64 {e}, {f.op(f'sub i64 63, {lz}')}")  # m * 2**e is in [2**big, 2**(big + 1))
    u = f.op(f"sub i64 {f.op(f'call i64 @llvm.smax.i64(i64 {big}, i64 {emin})')}, {p - 1}")  # the result's ulp
    s = f.op(f"sub i64 {u}, {e}")  # bits cut off
    sc = f.op(f"call i64 @llvm.smax.i64(i64 {s}, i64 0)")
    sc = f.op(f"call i64 @llvm.umin.i64(i64 {sc}, i64 64)")
    n = self.shift("lshr", m, 64, sc)
    kept = self.shift("shl", "-1", 64, sc)
    low = f.op(f"and i64 {m}, {f.op(f'xor i64 {kept}, -1')}")
    low = f.op(f"select i1 {f.op(f'icmp sgt i64 {s}, 64')}, i64 1, i64 {low}")  # far below half an ulp: sticky only
    half = self.shift("shl", "1", 64, f.op(f"sub i64 {sc}, 1"))  # (0 when nothing is cut)
    inexact = f.op(f"icmp ne i64 {low}, 0")
    above = f.op(f"icmp ugt i64 {low}, {half}")
    tie = f.op(f"and i1 {f.op(f'icmp eq i64 {low}, {half}')}, {inexact}")
    odd = f.op(f"trunc i64 {n} to i1")
    inc = {"rn": lambda: f.op(f"or i1 {above}, {f.op(f'and i1 {tie}, {odd}')}"),
           "rna": lambda: f.op(f"or i1 {above}, {tie}"), "rz": lambda: "false",
           "rm": lambda: f.op(f"and i1 {neg}, {inexact}"),
           "rp": lambda: f.op(f"and i1 {f.op(f'xor i1 {neg}, true')}, {inexact}")}[mode]()
    n = f.op(f"add i64 {n}, {f.op(f'zext i1 {inc} to i64')}")
    x = f.conv(f.op(f"select i1 {f.op(f'icmp sgt i64 {s}, 0')}, i64 {u}, i64 {e}"), 64, 32)
    v = self.ldexp(f.op(f"uitofp i64 {n} to double"), x)
    inf, fin = fconst(float("inf"), 64), fconst(top, 64)
    over = {"rn": inf, "rna": inf, "rz": fin}.get(mode) or \
        self.select(neg, *((inf, fin) if mode == "rm" else (fin, inf)), Ty("f", 64))  # toward the mode's infinity
    v = self.select(f.op(f"fcmp ogt double {v}, {fin}"), over, v, Ty("f", 64))
    sign = f.op(f"shl i64 {f.op(f'zext i1 {neg} to i64')}, 63")
    w = f.op(f"or i64 {f.op(f'bitcast double {v} to i64')}, {sign}")
    return f.op(f"bitcast i64 {w} to double")

  def code8(self, a: str, m: int, emin: int) -> str:
    """The i64 code of a double `a` >= 0 that a format of `m` mantissa bits and minimum exponent `emin` holds exactly:
    exponent field and mantissa, or the denormal's multiple of its ulp."""
    f = self.f
    au = f.op(f"bitcast double {a} to i64")
    ex = f.op(f"sub i64 {f.op(f'lshr i64 {au}, 52')}, 1023")
    field = f.op(f"shl i64 {f.op(f'add i64 {ex}, {1 - emin}')}, {m}")
    frac = f.op(f"lshr i64 {f.op(f'and i64 {au}, {(1 << 52) - 1}')}, {52 - m}")
    normal = f.op(f"or i64 {field}, {frac}")
    den = f.op(f"fptoui double {f.op(f'fmul double {a}, {fconst(2.0 ** (m - emin), 64)}')} to i64")  # exact
    return f.op(f"select i1 {f.op(f'icmp slt i64 {ex}, {emin}')}, i64 {den}, i64 {normal}")

  def encode8(self, d: str, fmt: str) -> str:
    """runtime._encode8: a double already in e4m3/e5m2 (or an infinity, a NaN) as its byte, saturated to the largest
    finite value; NaN 0x7f."""
    f = self.f
    p, emin, top = RFMT[fmt]
    m = p - 1
    u = f.op(f"bitcast double {d} to i64")
    a = f.op(f"call double @llvm.fabs.f64(double {d})")
    code = self.code8(f.op(f"call double @llvm.minnum.f64(double {a}, double {fconst(top, 64)})"), m, emin)
    top_byte = f.op(f"lshr i64 {u}, 56")  # (its sign, as bit 7)
    code = f.op(f"or i64 {code}, {f.op(f'and i64 {top_byte}, 128')}")
    return f.op(f"select i1 {f.op(f'fcmp uno double {d}, {d}')}, i8 127, i8 {f.conv(code, 64, 8)}")

  # ---------------------------------------------------------------- another instruction's body as a helper
  def helper(self, name: str, args, t: Ty) -> str:
    """`v_max_f32(a, b)` inside V_MAX3_F32: that instruction's body inlined (pcode.Semantics._sub): its S0.. the
    raw bits of the arguments, its other inputs their defaults, its D0 the result, resized to `t`."""
    from gputwin.pcode import semantics  # (the package imports this module)
    from gputwin.errors import PcodeError
    try:
      p = semantics(self.program.arch, name.upper()).program
    except PcodeError as e:
      raise Unsupported(f"built-in {name}") from e
    if "D0" not in p.outputs or set(p.outputs) - {"D0"} or p.mem or p.regfiles or p.lambdas and p is self.program:
      raise Unsupported(f"helper {name}")
    f = self.f
    vals = [self.raw(self.ex(x), x.ty) for x in args]
    sub = Lower(f, p, self.L, self.bind)
    for nm, w in {**p.inputs, "D0": p.outputs["D0"]}.items():
      sub.state[nm] = (f.alloca(f"i{w}"), w)
      k = int(nm[1:]) if nm[:1] == "S" and nm[1:].isdigit() else None
      if k is not None and k < len(vals):
        u, ub = vals[k]
        if args[k].ty.kind == "bool":
          u, ub = f.conv(u, 8, 1), 1
        f.emit(f"store i{w} {f.conv(u, ub, w)}, ptr {sub.state[nm][0]}")
      else:
        f.emit(f"store i{w} {default_bits(nm, w)}, ptr {sub.state[nm][0]}")
    for nm, lt in locals_of(p.body).items():
      sub.vars[nm] = (f.alloca(lty(lt)), lt)
      f.emit(f"store {lty(lt)} {zero(lt)}, ptr {sub.vars[nm][0]}")
    sub.block(p.body)
    ptr, w = sub.state["D0"]
    d = f.op(f"load i{w}, ptr {ptr}")
    tb = 1 if t.kind == "bool" else 64 if t.kind == "int" else t.bits
    return self.from_bits(f.conv(d, w, tb), tb, t) if t.kind != "bool" else f.op(f"trunc i{w} {d} to i1")

  # ---------------------------------------------------------------- memory (pcode MEM[...])
  def mem_read(self, addr: str, at: Ty, bits: int, t: Ty) -> str:
    f = self.f
    a = self.u64(addr, at)
    if bits > 64:  # dword by dword, as the emulator's memory reads them (each dword checked on its own)
      acc = "0"
      for k in range(bits // 32):
        p = self.bind.access(f.op(f"add i64 {a}, {4 * k}"), 4, False)
        z = self.f.conv(f.ld("i32", p, self.bind.space, ", align 1"), 32, bits, False)
        acc = f.op(f"or i{bits} {acc}, {f.op(f'shl i{bits} {z}, {32 * k}') if k else z}")
      r, rb = acc, bits
    else:
      nb = max(bits // 8, 1)
      r = f.ld(f"i{8 * nb}", self.bind.access(a, nb, False), self.bind.space, ", align 1")
      rb = 8 * nb
    return self.from_bits(r, rb, t) if t.bits == rb or t.kind == "bool" else self.f.conv(r, rb, t.bits, False)

  def mem_write(self, addr: str, at: Ty, val: str, vt: Ty, bits: int) -> None:
    f = self.f
    a = self.u64(addr, at)
    u, ub = self.raw(val, vt)
    if bits > 64:
      u = self.f.conv(u, ub, bits, False)
      for k in range(bits // 32):
        w = self.f.conv(f.op(f"lshr i{bits} {u}, {32 * k}") if k else u, bits, 32, False)
        f.st("i32", w, self.bind.access(f.op(f"add i64 {a}, {4 * k}"), 4, True), self.bind.space, ", align 1")
      return
    nb = max(bits // 8, 1)
    u = self.f.conv(u, ub, 8 * nb, False)
    f.st(f"i{8 * nb}", u, self.bind.access(a, nb, True), self.bind.space, ", align 1")

  # ---------------------------------------------------------------- statements
  def block(self, stmts) -> None:
    for st in stmts:
      self.stmt(st)

  def stmt(self, st) -> None:
    op, a, f = st.op, st.args, self.f
    if op == "note":
      return
    if op == "eval":
      self.ex(a[0])
    elif op == "assign":
      lv, val = a
      if val.op == "array":  # (re)declared: all zeros (runtime.newarr)
        if lv[0] != "var" or lv[1] not in self.vars or val.ty.kind in ("arr", "bf") or val.ty.bits > 64:
          raise Unsupported("arrays")
        p, t = self.vars[lv[1]]
        f.emit(f"store {lty(t)} zeroinitializer, ptr {p}")
        return
      self.store(lv, self.ex(val), val.ty)
      root = lv
      while root[0] in ("as", "slice", "bit"):
        root = root[1]
      if root[:2] == ("state", "ROUND_MODE"):  # a constant stored unconditionally rounds the conversions that follow
        self.rmode = int(val.args[0]) if val.op == "const" and root is lv and not self.nested else None
    elif op == "if":
      arms, els = a
      for k, (c, body) in enumerate(arms):  # a test of the wave size is known here: only its arm is lowered
        if c.op == "wave" and c.args[0] in ("wave32", "wave64"):
          if (c.args[0] == "wave32") == (self.L == 32):
            return self.block(body)
          return self.stmt(type(st)("if", (arms[k + 1:], els), st.at)) if arms[k + 1:] else self.block(els)
      end = f.label("endif")
      self.nested += 1
      for c, body in arms:
        cv = self.ex(c)
        yes, no = f.label("then"), f.label("else")
        f.emit(f"br i1 {cv}, label %{yes}, label %{no}")
        f.put(yes)
        self.block(body)
        f.emit(f"br label %{end}")
        f.put(no)
      self.block(els)
      self.nested -= 1
      f.emit(f"br label %{end}")
      f.put(end)
    elif op == "for":
      var, lo, hi, body = a
      p = self.vars.setdefault("@" + var, (f.alloca("i64"), Ty("int", 64)))[0]
      lov, hiv = self.u64(self.ex(lo), lo.ty), self.u64(self.ex(hi), hi.ty)
      f.emit(f"store i64 {lov}, ptr {p}")
      head, bod, end = f.label("for"), f.label("body"), f.label("endfor")
      f.emit(f"br label %{head}")
      f.put(head)
      i = f.op(f"load i64, ptr {p}")
      go = f.op(f"icmp sle i64 {i}, {hiv}")
      f.emit(f"br i1 {go}, label %{bod}, label %{end}")
      f.put(bod)
      self.loop_exit.append(end)
      self.nested += 1
      self.block(body)
      self.nested -= 1
      self.loop_exit.pop()
      i2 = f.op(f"add i64 {f.op(f'load i64, ptr {p}')}, 1")
      f.emit(f"store i64 {i2}, ptr {p}")
      f.emit(f"br label %{head}")
      f.put(end)
    elif op == "break":
      if not self.loop_exit:
        raise Unsupported("break outside a loop")
      f.emit(f"br label %{self.loop_exit[-1]}")
      f.put(f.label("dead"))
    elif op == "return":
      if not self.returns:
        raise Unsupported("return outside a lambda")
      ptr, rt, end = self.returns[-1]
      f.emit(f"store {lty(rt)} {self.coerce(self.ex(a[0]), a[0].ty, rt)}, ptr {ptr}")
      f.emit(f"br label %{end}")
      f.put(f.label("dead"))
    else:
      raise Unsupported(f"statement {op}")

  def element(self, name: str, idx) -> str:
    """The host pointer of local array `name`'s element at index expression idx, clamped into the array as
    runtime.ag/aset clamp it (lanes masked off there may hold any index)."""
    f = self.f
    p, t = self.vars[name]
    i = self.u64(self.ex(idx), idx.ty)
    i = f.op(f"call i64 @llvm.smax.i64(i64 {f.op(f'call i64 @llvm.smin.i64(i64 {i}, i64 {t.bits - 1})')}, i64 0)")
    return f.op(f"getelementptr {lty(t)}, ptr {p}, i64 0, i64 {i}")

  def aget(self, name: str, idx, t: Ty) -> str:
    if t.kind in ("arr", "bf", "int") or t.bits > 64:
      raise Unsupported("arrays")
    v = self.f.op(f"load i64, ptr {self.element(name, idx)}")
    return self.from_bits(v, 64, t) if t.kind != "bool" else self.f.op(f"trunc i64 {v} to i1")

  def lv_read(self, lv) -> tuple[str, Ty]:
    k = lv[0]
    if k == "aset":
      return self.aget(lv[1], lv[2], lv[3]), lv[3]
    if k == "var":
      p, t = self.vars[lv[1]]
      return self.f.op(f"load {lty(t)}, ptr {p}"), t
    if k == "state":
      p, w = self.state[lv[1]]
      return self.f.op(f"load i{w}, ptr {p}"), Ty("b", w)
    if k == "as":
      v, t = self.lv_read(lv[1])
      return self.convert("bitcast", v, t, lv[2]), lv[2]
    raise Unsupported(f"read of {k}")

  def store(self, lv, val: str, vt: Ty) -> None:
    f, k = self.f, lv[0]
    if k == "aset":
      t = lv[3]
      if t.kind in ("arr", "bf", "int") or t.bits > 64:
        raise Unsupported("arrays")
      u, ub = self.raw(self.coerce(val, vt, t) if vt != t else val, t)
      if t.kind == "bool":
        u, ub = f.conv(u, 8, 1), 1
      f.emit(f"store i64 {f.conv(u, ub, 64)}, ptr {self.element(lv[1], lv[2])}")
      return
    if k == "var":
      if lv[1] not in self.vars:
        raise Unsupported(f"unknown local {lv[1]}")
      p, t = self.vars[lv[1]]
      f.emit(f"store {lty(t)} {self.coerce(val, vt, t) if vt != t else val}, ptr {p}")
    elif k == "state":
      p, w = self.state[lv[1]]
      u, ub = self.raw(val, vt)
      if vt.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      f.emit(f"store i{w} {self.f.conv(u, ub, w, vt.kind == 'i')}, ptr {p}")
    elif k == "as":
      t, inner = lv[2], lv[1]
      bt = lv_ty(inner)
      u, ub = self.raw(val if vt == t else self.coerce(val, vt, t), t)
      if t.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      if bt.bits == ub or (t.kind == "bool" and bt.kind in "ub"):
        self.store(inner, self.from_bits(self.f.conv(u, ub, bt.bits, False), bt.bits, bt) if bt.kind != "bool"
                   else u, bt)
      else:
        old, ot = self.lv_read(inner)
        ou, ob = self.raw(old, ot)
        self.store(inner, self.from_bits(self.insert(ou, ob, u, ub, "0", t.bits), ob, bt), bt)
    elif k == "bit" and self.lanebit and lane_bit_of(lv[1], lv[2]) in self.lanebit and vt.kind == "bool":
      bit, written = self.lanebit[lane_bit_of(lv[1], lv[2])]
      f.emit(f"store i1 {val}, ptr {bit}")
      f.emit(f"store i1 true, ptr {written}")
    elif k in ("slice", "bit"):
      inner = lv[1]
      bt = lv_ty(inner)
      old, ot = self.lv_read(inner)
      ou, ob = self.raw(old, ot)
      w = lv[3] if k == "slice" else 1
      u, ub = self.raw(val, vt)
      if vt.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      lo = self.u64(self.ex(lv[2]), lv[2].ty)
      new = self.insert(ou, ob, u, ub, lo, w)
      self.store(inner, self.from_bits(new, ob, bt) if bt.kind not in ("u", "b") else new, bt)
    elif k == "mem":
      self.mem_write(self.ex(lv[1]), lv[1].ty, val, vt, lv[2])
    elif k == "reg":  # writelane's VGPR[lane][VDST] = S0
      u, ub = self.raw(val, vt)
      if vt.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      ptr = self.bind.reg(lv[1], lv[2], lv[3], True)
      f.emit(f"store i{lv[3]} {self.f.conv(u, ub, lv[3], vt.kind == 'i')}, ptr {ptr}")
    elif k == "concat":
      total = sum(lv_ty(p).bits for p in lv[1])
      u, ub = self.raw(val, vt)
      u = self.f.conv(u, ub, total, False)
      off = 0
      for part in reversed(lv[1]):
        pt = lv_ty(part)
        pv = self.f.conv(f.op(f"lshr i{total} {u}, {off}") if off else u, total, pt.bits, False)
        self.store(part, self.from_bits(pv, pt.bits, pt) if pt.kind not in ("u", "b") else pv,
                   pt if pt.kind not in ("u", "b") else Ty("u", pt.bits))
        off += pt.bits
    else:
      raise Unsupported(f"store to {k}")

  def insert(self, old: str, ob: int, v: str, vb: int, lo: str, w: int) -> str:
    """runtime.ins: old with bits [lo + w - 1 : lo] replaced by v (masked to w bits)."""
    f = self.f
    v = self.f.conv(v, vb, ob, False) if vb != ob else v
    mask = (1 << w) - 1 if w < ob else (1 << ob) - 1
    v = f.op(f"and i{ob} {v}, {mask}")
    if lo != "0":
      v = self.shift("shl", v, ob, lo)
      m = self.shift("shl", str(mask), ob, lo)
    else:
      m = str(mask)
    keep = f.op(f"and i{ob} {old}, {f.op(f'xor i{ob} {m}, -1')}")
    return f.op(f"or i{ob} {keep}, {v}")




MANT = {16: (10, 5), 32: (23, 8), 64: (52, 11)}  # significand and exponent bits by float width
F32 = Ty("f", 32)
# the float built-ins Lower emits (its `_name` methods), with their argument counts
FLOAT_BUILTINS = {"sqrt": 1, "trunc": 1, "floor": 1, "exponent": 1, "mantissa": 1, "ldexp": 2, "isEven": 1,
                  "isDENORM": 1, "ftz": 1, "fma": 3}
RINT = {"rn": "roundeven", "rz": "trunc", "rm": "floor", "rp": "ceil"}  # PTX's rint_* built-ins: LLVM's roundings
PTX_ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "rcp": 1}  # PTX's {op}_{mode} built-ins
SET_ROUNDING = {"rz": 0, "rn": 1, "rp": 2, "rm": 3}  # a PTX rounding as llvm.set.rounding numbers it
ROUNDINGS = ("rn", "rna", "rz", "rm", "rp")  # PTX's round_{mode}_{format} built-ins (runtime.round_exact's modes)


def rbf(f: Fn, v: str) -> str:
  """runtime.rbf: an f32 value rounded to bf16 (nearest even), in its f32 container; a NaN stays NaN, quiet."""
  u = f.op(f"bitcast float {v} to i32")
  lsb = f.op(f"and i32 {f.op(f'lshr i32 {u}, 16')}, 1")
  up = f.op(f"add i32 {u}, 32767")
  r = f.op(f"and i32 {f.op(f'add i32 {up}, {lsb}')}, -65536")
  nan = f.op(f"icmp ugt i32 {f.op(f'and i32 {u}, 2147483647')}, 2139095040")
  q = f.op(f"and i32 {f.op(f'or i32 {u}, 4194304')}, -65536")
  return f.op(f"bitcast i32 {f.op(f'select i1 {nan}, i32 {q}, i32 {r}')} to float")


def to_half(f: Fn, d: str) -> str:
  """A double rounded once to f16 (nearest even): rounded to odd into f32 first, which makes the second rounding
  exact."""
  return f.op(f"fptrunc float {odd32(f, d)} to half")


def odd32(f: Fn, d: str) -> str:
  """runtime.f64_to_f32_odd: a double rounded to f32 with a sticky low bit (round to odd)."""
  r = f.op(f"fptrunc double {d} to float")
  back = f.op(f"fpext float {r} to double")
  fd, fb = (f.op(f"call double @llvm.fabs.f64(double {x})") for x in (d, back))
  finite = f.op(f"fcmp olt double {fb}, {fconst(float('inf'), 64)}")
  inexact = f.op(f"and i1 {f.op(f'fcmp one double {back}, {d}')}, {finite}")
  u = f.op(f"bitcast float {r} to i32")
  step = f.op(f"select i1 {f.op(f'fcmp ogt double {fd}, {fb}')}, i32 1, i32 -1")  # toward d (sign-magnitude)
  low = f.op(f"and i32 {u}, 1")
  odd = f.op(f"and i1 {inexact}, {f.op(f'icmp eq i32 {low}, 0')}")
  u = f.op(f"select i1 {odd}, i32 {f.op(f'add i32 {u}, {step}')}, i32 {u}")
  return f.op(f"bitcast i32 {u} to float")


def fp8_decode(f: Fn, v: str, fmt: str) -> str:
  """runtime.fp8_decode: a code (an i8, its low 1 + eb + mb bits) as its f32 value, exactly: (2**mb + m) *
  2**(e - bias - mb), denormals m * 2**(1 - bias - mb); a NaN code is the quiet NaN with the code's top bit as its
  sign."""
  eb, mb, bias, kind = FP8[fmt]
  b = f.conv(v, 8, 32)
  e = f.op(f"and i32 {f.op(f'lshr i32 {b}, {mb}')}, {(1 << eb) - 1}")
  m = f.op(f"and i32 {b}, {(1 << mb) - 1}")
  sub = f.op(f"icmp eq i32 {e}, 0")
  sig = f.op(f"select i1 {sub}, i32 {m}, i32 {f.op(f'or i32 {m}, {1 << mb}')}")
  k = f.op(f"select i1 {sub}, i32 {128 - bias - mb}, i32 {f.op(f'add i32 {e}, {127 - bias - mb}')}")  # biased
  scale = f.op(f"bitcast i32 {f.op(f'shl i32 {k}, 23')} to float")
  mag = f.op(f"fmul float {f.op(f'uitofp i32 {sig} to float')}, {scale}")
  sign = f.op(f"and i32 {f.op(f'shl i32 {b}, {31 - eb - mb}')}, {1 << 31}")
  bits = f.op(f"or i32 {f.op(f'bitcast float {mag} to i32')}, {sign}")
  if kind == "mx":  # (every code finite)
    return f.op(f"bitcast i32 {bits} to float")
  if kind == "ieee":  # the top exponent: infinity (m == 0) or NaN
    inf = f.op(f"and i1 {f.op(f'icmp eq i32 {e}, {(1 << eb) - 1}')}, {f.op(f'icmp eq i32 {m}, 0')}")
    bits = f.op(f"select i1 {inf}, i32 {f.op(f'or i32 {sign}, {0x7f800000}')}, i32 {bits}")
    nan = f.op(f"and i1 {f.op(f'icmp eq i32 {e}, {(1 << eb) - 1}')}, {f.op(f'icmp ne i32 {m}, 0')}")
  else:
    nan = f.op(f"icmp eq i32 {b}, 128") if kind == "fnuz" else f.op(f"icmp eq i32 {f.op(f'and i32 {b}, 127')}, 127")
  bits = f.op(f"select i1 {nan}, i32 {f.op(f'or i32 {sign}, {0x7fc00000}')}, i32 {bits}")
  return f.op(f"bitcast i32 {bits} to float")


def default_bits(name: str, w: int) -> int:
  """The raw value of a state register nobody gave (runtime.DEFAULTS: WAVE_MODE.IEEE is 1), in w bits."""
  return DEFAULTS.get(name, 0) & ((1 << w) - 1)


def zero(t: Ty) -> str:
  return "0.0" if t.isf else "false" if t.kind == "bool" else "zeroinitializer" if t.kind == "arr" else "0"


# ------------------------------------------------------------------------------------------------ host code
_NATIVE = None


def native():
  """(llvmlite.binding, host target machine, MCJIT engine), made once per process."""
  global _NATIVE
  if _NATIVE is None:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = target_machine()
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    for name in C_FUNCTIONS:  # (process-wide names no one else defines: another add_symbol of `log2` cannot move them)
      llvm.add_symbol(LIBC + name, libc_address(name))
    _NATIVE = (llvm, tm, ee)
  return _NATIVE


def undefined_symbols(obj: bytes) -> list[str]:
  """The names a host ELF64 object (little-endian) imports: its symbol table's undefined entries."""
  if obj[:6] != b"\x7fELF\x02\x01":
    return []
  shoff, = struct.unpack_from("<Q", obj, 0x28)
  shentsize, shnum = struct.unpack_from("<HH", obj, 0x3a)
  secs = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
  out = []
  for _, kind, _, _, off, size, link, _, _, ent in secs:
    if kind != 2:  # SHT_SYMTAB
      continue
    stroff = secs[link][4]
    for at in range(off + ent, off + size, ent):  # (entry 0 is the null symbol)
      name, _, _, shndx = struct.unpack_from("<IBBH", obj, at)
      if shndx == 0 and name:
        out.append(obj[stroff + name:obj.index(b"\0", stroff + name)].decode())
  return out


IMPORTS = frozenset(LIBC + n for n in C_FUNCTIONS) | {"memcpy", "memmove", "memset"}  # what host code may call


def checked(obj: bytes) -> bytes:
  """Host object code that imports only C library functions (IMPORTS) this process has; else RuntimeError naming the
  others. MCJIT aborts the process on an unresolved symbol, and LLVM lowers some operations to compiler-rt calls
  (f64 -> f16 is __truncdfhf2 on hosts without AVX512-FP16) that only some processes happen to have loaded."""
  llvm = native()[0]
  bad = [n for n in undefined_symbols(obj) if n not in IMPORTS or not llvm.address_of_symbol(n)]
  if bad:
    raise RuntimeError(f"host code imports {', '.join(bad)}, not a C library function this process has")
  return obj


def target_machine(opt: int = 2):
  """A new target machine for the host CPU (a thread compiling on its own needs its own); `opt`: LLVM's code
  generation level (0: the fast instruction selector)."""
  import llvmlite.binding as llvm
  return llvm.Target.from_default_triple().create_target_machine(
    cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=opt, reloc="default",
    codemodel="jitdefault")


class _Flat:
  """The binding of a body run alone: memory is one host byte buffer (%mem, %size bytes; an access outside it
  stops the function and returns the lane + 1), the effective address is the caller's %ea[lane]."""
  space = "mem"

  def __init__(self, f: Fn):
    self.f = f

  def access(self, addr: str, nbytes: int, write: bool) -> str:
    f = self.f
    end = f.op(f"add i64 {addr}, {nbytes}")
    bad = f.op(f"or i1 {f.op(f'icmp ugt i64 {end}, %size')}, {f.op(f'icmp ult i64 {end}, {addr}')}")
    ok = f.label("ok")
    f.emit(f"br i1 {bad}, label %fault, label %{ok}")
    f.put(ok)
    return f.gep("%mem", addr)

  def address(self) -> str | None:
    return self.f.op(f"load i64, ptr {self.f.op('getelementptr i64, ptr %ea, i64 %lane')}")

  def reg(self, name: str, index: tuple, bits: int, write: bool) -> str:
    raise Unsupported("register files")  # (a body alone has none)


class HostFn:
  """One body as a host function over n lanes: `fn(state, exec, mem, address)` with state name -> uint64[n] raw
  bits (missing names read their default; wider than 64 bits: object arrays of ints), exec bool[n], mem a uint8
  buffer MEM[...] indexes (changed in place) and address uint64[n], what the Calc*Addr built-ins answer. Returns the
  outputs masked to their widths, where inactive lanes keep the value given (or 0), as `Semantics.__call__` does.
  Lanes run one after another, in lane order."""

  def __init__(self, program: Program, names: dict[str, int], cfn):
    self.program, self.names, self._cfn = program, names, cfn

  def __call__(self, state: dict, exec, mem: np.ndarray | None = None, address=None) -> dict:
    m = np.ascontiguousarray(exec, dtype=np.uint8)
    n = m.shape[0]
    bufs = []
    for nm, w in self.names.items():
      given = state.get(nm, default_bits(nm, w) if nm in self.program.inputs else 0)
      vals = [int(x) for x in np.broadcast_to(np.asarray(given, dtype=object), (n,))]
      words = (w + 63) // 64
      bufs.append(np.array([[v >> (64 * k) & (2 ** 64 - 1) for k in range(words)] for v in vals], np.uint64))
    mem = np.zeros(0, np.uint8) if mem is None else mem
    ea = np.ascontiguousarray(np.broadcast_to(np.asarray(0 if address is None else address, np.uint64), (n,)))
    ptrs = (ctypes.c_void_p * len(bufs))(*[b.ctypes.data for b in bufs])
    lane = self._cfn(ctypes.addressof(ptrs), m.ctypes.data, n, mem.ctypes.data, mem.nbytes, ea.ctypes.data)
    if lane:
      raise IndexError(f"{self.program.inst}: lane {lane - 1} accessed memory outside the {mem.nbytes}-byte buffer")
    out = {}
    for (nm, w), b in zip(self.names.items(), bufs):
      if nm in self.program.outputs:
        out[nm] = b[:, 0] & np.uint64((1 << w) - 1) if w <= 64 else \
            np.array([sum(int(x) << (64 * k) for k, x in enumerate(r)) for r in b], dtype=object)
    return out


def _host_ir(fname: str, program: Program, lanes: int, tags: dict) -> tuple[str, dict[str, int]]:
  """@fname(ptr io, ptr exec, i64 n, ptr mem, i64 size, ptr ea) -> i64: for each active lane in order, the body
  over that lane's io[k][lane] (each name as ceil(bits / 64) u64 words); 0, or the faulting lane + 1."""
  f = Fn(tags)
  lw = Lower(f, program, lanes, _Flat(f))
  names = dict(program.inputs)
  for nm, w in program.outputs.items():
    names[nm] = max(names.get(nm, 0), w)
  if any(w > 128 for w in names.values()):
    raise Unsupported("state wider than 128 bits")
  for nm, w in names.items():
    lw.state[nm] = (f.alloca(f"i{w}"), w)
  for nm, t in locals_of(program.body).items():
    lw.vars[nm] = (f.alloca(lty(t)), t)
  f.emit("br label %head")
  f.put("head")
  f.emit("%lane = phi i64 [0, %entry], [%lane.n, %next]")
  f.emit(f"br i1 {f.op('icmp ult i64 %lane, %n')}, label %check, label %done")
  f.put("check")
  f.emit("%lane32 = trunc i64 %lane to i32")
  on = f.op(f"load i8, ptr {f.gep('%exec', '%lane')}")
  f.emit(f"br i1 {f.op(f'icmp ne i8 {on}, 0')}, label %run, label %next")
  f.put("run")
  rows = {}
  for k, (nm, w) in enumerate(names.items()):
    words = (w + 63) // 64
    row = f.op(f"load ptr, ptr {f.op(f'getelementptr ptr, ptr %io, i64 {k}')}")
    rows[nm] = p = f.op(f"getelementptr i{64 * words}, ptr {row}, i64 %lane")
    f.emit(f"store i{w} {f.conv(f.op(f'load i{64 * words}, ptr {p}, align 8'), 64 * words, w)}, ptr {lw.state[nm][0]}")
  for nm, (p, t) in lw.vars.items():
    f.emit(f"store {lty(t)} {zero(t)}, ptr {p}")
  lw.block(program.body)
  for nm in program.outputs:
    ptr, w = lw.state[nm]
    words = (w + 63) // 64
    f.emit(f"store i{64 * words} {f.conv(f.op(f'load i{w}, ptr {ptr}'), w, 64 * words)}, ptr {rows[nm]}, align 8")
  f.emit("br label %next")
  f.put("next")
  f.emit("%lane.n = add i64 %lane, 1")
  f.emit("br label %head")
  f.put("done")
  f.emit("ret i64 0")
  head = [f"define i64 @{fname}(ptr %io, ptr %exec, i64 %n, ptr %mem, i64 %size, ptr %ea) {{", "entry:"]
  tail = ["fault:", "  %at = add i64 %lane, 1", "  ret i64 %at", "}", ""]
  return "\n".join(head + f.allocas + f.pro + f.lines + tail), names


ROUNDED = (("fadd", "%a, %b"), ("fmul", "%a, %b"), ("fdiv", "%a, %b"), ("sqrt", "%a"), ("fma", "%a, %b, %c"))


def rounded(bits: int) -> str:
  """@gputwin.rounded.f{bits}(op, mode, a, b, c): ROUNDED[op] of a, b (, c) rounded as llvm.set.rounding's `mode`
  numbers it (SET_ROUNDING), the host's rounding mode round to nearest again after. LLVM's constrained operations
  under a rounding mode set at run time, in a function of its own: strictfp, as LLVM requires of every operation in
  a function that changes the mode, and never inlined into its callers, whose operations assume round to nearest."""
  t = {32: "float", 64: "double"}[bits]
  arms = "".join(f"""{op}:
  %{op}.r = call {t} @llvm.experimental.constrained.{op}.f{bits}({args.replace("%", t + " %")}, \
metadata !"round.dynamic", metadata !"fpexcept.ignore") strictfp
  br label %done
""" for op, args in ROUNDED)
  return "".join(f"declare {t} @llvm.experimental.constrained.{op}.f{bits}({', '.join([t] * (args.count('%')))}, "
                 "metadata, metadata)\n" for op, args in ROUNDED) + f"""\
define internal {t} @gputwin.rounded.f{bits}(i32 %op, i32 %mode, {t} %a, {t} %b, {t} %c) noinline strictfp {{
  call void @llvm.set.rounding(i32 %mode) strictfp
  switch i32 %op, label %fma [{" ".join(f"i32 {k}, label %{op}" for k, (op, _) in enumerate(ROUNDED[:-1]))}]
{arms}done:
  %r = phi {t} {", ".join(f"[%{op}.r, %{op}]" for op, _ in ROUNDED)}
  call void @llvm.set.rounding(i32 1) strictfp
  ret {t} %r
}}
"""


INTRINSICS = """\
declare i64 @llvm.ctpop.i64(i64)
declare i64 @llvm.cttz.i64(i64, i1)
declare i64 @llvm.ctlz.i64(i64, i1)
declare i64 @llvm.umin.i64(i64, i64)
declare i64 @llvm.umax.i64(i64, i64)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare i16 @llvm.ctlz.i16(i16, i1)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
declare half @llvm.sqrt.f16(half)
declare float @llvm.sqrt.f32(float)
declare double @llvm.sqrt.f64(double)
declare half @llvm.trunc.f16(half)
declare half @llvm.floor.f16(half)
declare double @llvm.roundeven.f64(double)
declare half @llvm.roundeven.f16(half)
declare float @llvm.roundeven.f32(float)
declare half @llvm.ceil.f16(half)
declare float @llvm.ceil.f32(float)
declare double @llvm.ceil.f64(double)
declare float @llvm.fma.f32(float, float, float)
declare double @llvm.fma.f64(double, double, double)
declare double @llvm.trunc.f64(double)
declare float @llvm.trunc.f32(float)
declare float @llvm.floor.f32(float)
declare double @llvm.floor.f64(double)
declare float @llvm.fabs.f32(float)
declare double @llvm.fabs.f64(double)
declare half @llvm.fabs.f16(half)
declare double @llvm.maxnum.f64(double, double)
declare double @llvm.minnum.f64(double, double)
declare i8 @llvm.bitreverse.i8(i8)
declare i16 @llvm.bitreverse.i16(i16)
declare i32 @llvm.bitreverse.i32(i32)
declare i64 @llvm.bitreverse.i64(i64)
declare void @llvm.set.rounding(i32)
""" + "".join(f"declare double @{LIBC}{n}({', '.join(a)})\n" for n, a in C_FUNCTIONS.items()) + \
  "".join(rounded(b) for b in (32, 64))  # what Lower may call


def _metadata(tags: dict) -> str:
  out = [f'!{TBAA_BASE - 1} = !{{!"gputwin"}}']
  for what, i in tags.items():
    t = TBAA_BASE + 2 * i
    out += [f'!{t} = !{{!"{what}", !{TBAA_BASE - 1}, i64 0}}', f"!{t + 1} = !{{!{t}, !{t}, i64 0}}"]
  return "\n".join(out) + "\n"


def compile_host(programs: dict[str, Program], lanes: int, speed: int = 2) -> tuple[dict[str, HostFn], dict[str, str]]:
  """Many bodies as host functions in one module (one compile, optimised at `speed` 0-3, the native tier's 2 by
  default): ({name: HostFn}, {declined name: why})."""
  llvm, tm, ee = native()
  fns, declined, tags, funcs = {}, {}, {}, []
  for name, p in programs.items():
    k = next(_SEQ)  # (symbol names are process-wide in the engine)
    try:
      text, names = _host_ir(f"body{k}", p, lanes, tags)
    except Unsupported as e:
      declined[name] = str(e) or type(e).__name__
      continue
    funcs.append(text)
    fns[name] = (k, p, names)
  mod = llvm.parse_assembly(INTRINSICS + "\n".join(funcs) + _metadata(tags))
  mod.verify()
  pto = llvm.create_pipeline_tuning_options(speed_level=speed)
  pb = llvm.create_pass_builder(tm, pto)
  pb.getModulePassManager().run(mod, pb)
  ee.add_object_file(llvm.ObjectFileRef.from_data(checked(tm.emit_object(mod))))
  ee.finalize_object()
  proto = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64] * 2)
  out = {name: HostFn(p, names, proto(ee.get_function_address(f"body{k}"))) for name, (k, p, names) in fns.items()}
  return out, declined


_SEQ = itertools.count()


def host(program: Program, lanes: int) -> HostFn:
  """One body alone as a host function over arrays of lanes (raises Unsupported where the backend declines it)."""
  fns, declined = compile_host({program.inst: program}, lanes)
  if declined:
    raise Unsupported(next(iter(declined.values())))
  return fns[program.inst]
