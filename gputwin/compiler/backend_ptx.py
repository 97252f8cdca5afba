"""Direct PTX backend: kernel IR -> PTX text for sm_80 / sm_90 (no LLVM), plus the IR lowering both NVIDIA backends
share (`lower`).

Two steps:
1. `lower(k)` rewrites what PTX has no instruction for into plain IR, so the LLVM/NVPTX backend
   (backend_nvptx.py) gets the very same sequences: f16/bf16 arithmetic and math in f32 then rounded by a cast
   (exact for + - * / sqrt: f32 has at least 2p+2 bits; fma through f64 and back, as the reference rounds it);
   `exp` as 2^n * 2^f with a two-part log2(e) (argument clamped, NaN passed through), `log` as log2 * ln 2, `sin`
   and `cos` reduced to [-pi, pi] with a three-part 2*pi (Cody-Waite, fma) before the hardware approximation
   (`attrs["reduced"]`); vector math one lane at a time.
2. `compile_ptx(k, arch)` emits PTX ISA 8.0 text. Values live in virtual registers by class (`%p` pred, `%r` b32,
   `%rd` b64, `%f` f32, `%fd` f64; `%h` b16 scratch); i8/u8/i16/u16 are kept sign-/zero-extended in 32 bits and
   re-extended after each op; f16/bf16 are kept as the equal f32 value (converted at loads, stores, casts and
   bitcasts); vectors are one register per lane. Where PTX leaves a result undefined or differs from the IR's
   meaning (reference.py), the guard is explicit: x/0 -> 0 and INT_MIN/-1 wraps (divisor replaced, result
   selected), shift amounts masked to width-1, float->int `cvt.rzi` (saturating, NaN -> 0, as the reference), float
   min/max `min.f32` (the non-NaN operand), add/sub/mul/div `.rn` (never contracted into fma), rsqrt as
   sqrt.rn + div.rn (correctly rounded twice, like the reference), atomic sub as add of the negation.

Control flow: `if`/`for` become branches. A region holding a barrier under a condition or loop bounds that may
differ between threads (`varying`: computed from workitem.id, loads or atomics) is run by every thread of the CTA
with a predicate instead (side effects and loads guarded by `@%p`, results selected), and a `for` holding a barrier
iterates while any thread of the CTA is active (`barrier.red.or.pred`), so every thread reaches every
`barrier.sync` as in the reference's lock-step model. Ids: %tid, %ctaid, %ntid, %nctaid (grid counts CTAs).
Memory: parameters are `.param .u64` global addresses (`cvta.to.global`), `shared` a `.shared` array, `alloca` a
`.local` array; element addresses are base + index * size in 64 bits.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from gputwin.compiler import ir, limits
from gputwin.compiler.ir import Block, Kernel, Op, Type, Value
from gputwin.errors import CompileError

ARCHES = ("sm_80", "sm_90")
PTX_VERSION = "8.0"             # sm_90 needs PTX ISA 7.8+; ptxas 13 reads up to 9.0


def check_arch(arch: str) -> None:
  if arch not in ARCHES: raise CompileError(f"unknown NVIDIA target {arch!r} (known: {', '.join(ARCHES)})")


# ---------------------------------------------------------------------------------------------------------------
# IR lowering shared by both NVIDIA backends

_F32 = lambda v: float(np.float32(v))
_LOG2E_HI = _F32(1 / math.log(2))
_LOG2E_LO = _F32(1 / math.log(2) - _LOG2E_HI)
_2PI = [_F32(2 * math.pi)]
_2PI.append(_F32(2 * math.pi - _2PI[0]))
_2PI.append(_F32(2 * math.pi - _2PI[0] - _2PI[1]))   # (the residual of the float64 2*pi: enough for |x| <= 1e4)
_NARROW = ("f16", "bf16")


def lower(k: Kernel) -> Kernel:
  """A copy of `k` with the rewrites described in the module docstring; the reference gives it the same meaning
  (up to the accuracy of exp2/log2/sin/cos)."""
  return ir.rewrite(k, _rewrite)


def _rewrite(b: ir.Builder, op: Op) -> bool:
  cls, code = ir.op_class(op), op.opcode
  if cls not in ("binary", "math", "fma"): return False
  t = op.result.type
  if not t.scalar.is_float: return False
  if t.is_vec:   # one lane at a time
    lanes = []
    for j in range(t.lanes):
      xs = [b.emit("extract", [v], v.type.scalar, {"lane": j}) for v in op.operands]
      lanes.append(b.emit(code, xs, t.scalar, dict(op.attrs)))
    ir.redefine(b, op, "vector", lanes)
    return True
  s = str(t)
  if s in _NARROW:
    wide = ir.f64 if cls == "fma" else ir.f32
    xs = [b.emit("cast", [v], wide) for v in op.operands]
    r = b.emit(code, xs, wide, dict(op.attrs))
    if cls == "fma" and s == "bf16": r = b.emit("cast", [r], ir.f32)   # the reference: f64 -> f32 -> bf16
    ir.redefine(b, op, "cast", [r])
    return True
  if code == "rem":
    ir.redefine(b, op, "select", fmod(b, *op.operands, t))
    return True
  if s == "f32" and code in ("exp", "log", "sin", "cos") and not op.attrs.get("reduced"):
    x = op.operands[0]
    c = lambda v: b.const(v, ir.f32)
    if code == "log":
      ir.redefine(b, op, "mul", [b.emit("log2", [x], ir.f32), c(_F32(math.log(2)))])
    elif code == "exp":
      xc = b.emit("min", [b.emit("max", [x, c(-104.0)], ir.f32), c(89.0)], ir.f32)
      n = b.emit("floor", [b.emit("add", [b.emit("mul", [xc, c(_LOG2E_HI)], ir.f32), c(0.5)], ir.f32)], ir.f32)
      f = b.emit("fma", [xc, c(_LOG2E_HI), b.emit("neg", [n], ir.f32)], ir.f32)
      f = b.emit("fma", [xc, c(_LOG2E_LO), f], ir.f32)
      nh = b.emit("floor", [b.emit("mul", [n, c(0.5)], ir.f32)], ir.f32)
      e = b.emit("mul", [b.emit("exp2", [f], ir.f32), b.emit("exp2", [nh], ir.f32)], ir.f32)
      e = b.emit("mul", [e, b.emit("exp2", [b.emit("sub", [n, nh], ir.f32)], ir.f32)], ir.f32)
      ir.redefine(b, op, "select", [b.emit("ne", [x, x], ir.boolean), x, e])
    else:
      kk = b.emit("floor", [b.emit("fma", [x, c(_F32(1 / (2 * math.pi))), c(0.5)], ir.f32)], ir.f32)
      nk = b.emit("neg", [kk], ir.f32)
      r = x
      for part in _2PI: r = b.emit("fma", [nk, c(part), r], ir.f32)
      ir.redefine(b, op, code, [r], {"reduced": True})
    return True
  return False


def fmod(b: ir.Builder, x: Value, y: Value, t: Type) -> list[Value]:
  """Exact float remainder (C fmod, the reference's np.fmod) by binary long division; returns the operands of the
  final `select`. s = |y| * 2^k is the largest such multiple <= r = |x| (k from the exponent bits, |y|'s scaled into
  the normal range first); then k+1 steps of `if r >= s: r -= s` (exact: s <= r < 2s) and s /= 2 (exact down to
  |y|). NaN operands, y = 0 and x = inf give NaN; |x| < |y| gives x; the result takes x's sign."""
  it, w, mb = (ir.i32, 32, 23) if t.bits == 32 else (ir.i64, 64, 52)
  bias, scale = (1 << (w - mb - 2)) - 1, 64 if w == 32 else 128
  e = lambda *a: b.emit(*a)
  c = lambda v, ty=t: b.const(v, ty)
  ci = lambda v: b.const(v, ir.i32)

  def pow2(j: Value) -> Value:        # 2^j for 0 <= j <= bias, from its bits
    jj = e("cast", [j], it)
    return e("bitcast", [e("shl", [e("add", [jj, b.const(bias, it)], it), b.const(mb, it)], it)], t)

  def expo(v: Value) -> Value:        # floor(log2 v) for finite v > 0, as i32
    def raw(u: Value) -> Value:
      bits = e("shr", [e("bitcast", [u], it), b.const(mb, it)], it)
      return e("cast", [e("and", [bits, b.const((1 << (w - mb - 1)) - 1, it)], it)], ir.i32)
    sub = e("lt", [v, c(2.0 ** (1 - bias))], ir.boolean)
    scaled = e("sub", [raw(e("mul", [v, c(2.0 ** scale)], t)), ci(scale)], ir.i32)
    return e("sub", [e("select", [sub, scaled, raw(v)], ir.i32), ci(bias)], ir.i32)

  ax, ay = e("abs", [x], t), e("abs", [y], t)
  nan = e("or", [e("or", [e("ne", [x, x], ir.boolean), e("ne", [y, y], ir.boolean)], ir.boolean),
                 e("or", [e("eq", [ay, c(0.0)], ir.boolean), e("eq", [ax, c(math.inf)], ir.boolean)], ir.boolean)],
           ir.boolean)
  small = e("lt", [ax, ay], ir.boolean)
  k = e("sub", [expo(ax), expo(ay)], ir.i32)
  k = e("select", [e("or", [nan, small], ir.boolean), ci(0), k], ir.i32)
  k1 = e("div", [k, ci(3)], ir.i32)
  k2 = e("div", [e("sub", [k, k1], ir.i32), ci(2)], ir.i32)
  k3 = e("sub", [e("sub", [k, k1], ir.i32), k2], ir.i32)
  sv = e("mul", [e("mul", [e("mul", [ay, pow2(k1)], t), pow2(k2)], t), pow2(k3)], t)
  over = e("gt", [sv, ax], ir.boolean)
  sv = e("select", [over, e("mul", [sv, c(0.5)], t), sv], t)
  k = e("select", [over, e("sub", [k, ci(1)], ir.i32), k], ir.i32)
  hi = e("select", [e("or", [nan, small], ir.boolean), ci(0), e("add", [k, ci(1)], ir.i32)], ir.i32)
  body = Block([b.value(ir.i32, "j"), b.value(t, "r"), b.value(t, "s")])
  outer, b.block = b.block, body
  _, r, s = body.args
  r2 = e("select", [e("ge", [r, s], ir.boolean), e("sub", [r, s], t), r], t)
  body.ops.append(b.make("yield", [r2, e("mul", [s, c(0.5)], t)]))
  b.block = outer
  loop = b.make("for", [ci(0), hi, ci(1), ax, sv], [t, t], regions=[body])
  b.block.ops.append(loop)
  r = loop.results[0]
  sign = e("lt", [e("bitcast", [x], it), b.const(0, it)], ir.boolean)    # -0.0 too
  signed = e("select", [sign, e("neg", [r], t), r], t)
  return [nan, c(math.nan), e("select", [small, x, signed], t)]


# ---------------------------------------------------------------------------------------------------------------
# PTX emission

def ptype(t: Type) -> str:
  """The PTX type of a scalar IR type in memory and in instruction suffixes."""
  s = t.scalar
  if s.is_bool: return "pred"
  if s.is_int: return f"{'s' if s.is_signed else 'u'}{s.bits}"
  if s.kind == "bf": return "bf16"
  return f"f{s.bits}"


def _cls(t: Type) -> str:
  """Register class of a scalar IR type: p, r (b32), rd (b64), f (f32, also f16/bf16 values), fd (f64)."""
  s = t.scalar
  if s.is_ptr: return "rd"
  if s.is_bool: return "p"
  if s.is_int: return "rd" if s.bits == 64 else "r"
  return "fd" if s.bits == 64 else "f"


_DECL = {"p": "pred", "r": "b32", "rd": "b64", "f": "f32", "fd": "f64", "h": "b16"}


def _fimm(v: float, bits: int) -> str:
  return f"0f{struct.unpack('<I', struct.pack('<f', v))[0]:08X}" if bits == 32 else \
    f"0d{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


def has_barrier(op: Op) -> bool:
  """Whether a barrier sits anywhere in op's regions."""
  return any(o.opcode == "barrier" for r in op.regions for o in ir.walk(r))


def varying(k: Kernel) -> set[int]:
  """ids of the values that may differ between the threads of a CTA: from workitem.id, loads and atomics, and
  everything computed from them or chosen by control flow that depends on them (a fixed point over loops)."""
  var: set[int] = set()

  def mark(vals) -> None:
    for v in vals: var.add(id(v))

  def visit(b: ir.Block) -> None:
    for op in b.ops:
      cls = ir.op_class(op)
      if op.opcode.startswith("workitem.id") or cls in ("load", "atomic") or any(id(v) in var for v in op.operands
                                                                                   if cls not in ("if", "for")):
        mark(op.results)
      if cls == "if":
        for r in op.regions: visit(r)
        if id(op.operands[0]) in var: mark(op.results)
        for i, r in enumerate(op.results):
          if any(rg.ops and id(rg.ops[-1].operands[i]) in var for rg in op.regions if rg.ops): var.add(id(r))
      elif cls == "for":
        body = op.regions[0]
        if any(id(v) in var for v in op.operands[:3]): mark(body.args + op.results)
        ys = body.ops[-1].operands if body.ops and body.ops[-1].opcode == "yield" else []
        for a, init, r, y in zip(body.args[1:], op.operands[3:], op.results, ys):
          if id(init) in var or id(y) in var: mark([a, r])
        visit(body)

  while True:
    n = len(var)
    visit(k.body)
    if len(var) == n: return var


class _Emit:
  def __init__(self, k: Kernel, arch: str):
    self.k, self.arch = k, arch
    self.body: list[str] = []
    self.decls: list[str] = []
    self.count = {c: 0 for c in _DECL}
    self.regs: dict[int, list[str]] = {}
    self.mask: str | None = None      # predicate of the threads active in a barrier-holding region
    self.labels = 0
    self.depot: str | None = None     # base register of the .local depot holding every `alloca`
    self.depot_size = 0
    self.varying = varying(k)

  # -- registers, lines --------------------------------------------------------------------------------------------
  def reg(self, c: str) -> str:
    self.count[c] += 1
    return f"%{c}{self.count[c]}"

  def i(self, s: str, guard: bool = False, dest: str | None = None) -> None:
    """One instruction; `guard` predicates it on the active mask of a barrier-holding region, after giving its
    destination `dest` a value for the masked-off threads (they select it away, but it must be written)."""
    if guard and self.mask and dest: self.zero(dest)
    self.body.append(f"\t{'@' + self.mask + ' ' if guard and self.mask else ''}{s};")

  def zero(self, r: str) -> None:
    c = r[1:].rstrip("0123456789")
    self.i(f"setp.ne.u32 {r}, 0, 0" if c == "p" else f"mov.b{_DECL[c][1:]} {r}, 0")

  def label(self, hint: str) -> str:
    self.labels += 1
    return f"$L_{hint}{self.labels}"

  def place(self, lab: str) -> None: self.body.append(f"{lab}:")

  def v(self, x: Value) -> list[str]: return self.regs[id(x)]

  def s(self, x: Value) -> str: return self.regs[id(x)][0]

  def new(self, t: Type) -> list[str]: return [self.reg(_cls(t)) for _ in range(t.lanes)]

  def err(self, msg: str, op: Op | None = None) -> CompileError:
    return CompileError(f"PTX backend: {msg}", loc=op.loc if op is not None else None, arch=self.arch,
                        kernel=self.k.name)

  # -- kernel ------------------------------------------------------------------------------------------------------
  def kernel(self) -> str:
    k = self.k
    if not k.name.isidentifier(): raise self.err(f"kernel name {k.name!r} is not a PTX identifier")
    params = []
    for n, p in enumerate(k.params):
      pn = f"{k.name}_param_{n}"
      if p.type.is_ptr:
        params.append(f".param .u64 {pn}")
        raw, r = self.reg("rd"), self.reg("rd")
        self.i(f"ld.param.u64 {raw}, [{pn}]")
        self.i(f"cvta.to.global.u64 {r}, {raw}")
        self.regs[id(p)] = [r]
      else:
        t = p.type
        if t.is_vec: raise self.err(f"vector parameter %{p.name} is not supported")
        pt = "u8" if t.is_bool else "b16" if str(t) in _NARROW else ptype(t)
        params.append(f".param .{pt} {pn}")
        self.regs[id(p)] = [self.load_value(t, lambda d, pt=pt, pn=pn: f"ld.param.{pt} {d}, [{pn}]")]
    self.region(k.body)
    self.i("ret")
    if self.depot:
      self.decls.append(f"\t.local .align 16 .b8 __local_depot[{self.depot_size}];")
      self.body.insert(0, f"\tmov.u64 {self.depot}, __local_depot;")
    regs = [f"\t.reg .{_DECL[c]} %{c}<{n + 1}>;" for c, n in self.count.items() if n]
    return "\n".join([f"//\n// Generated by gputwin.compiler (direct PTX backend) for kernel @{k.name}\n//",
                      f".version {PTX_VERSION}", f".target {self.arch}", ".address_size 64", "",
                      f".visible .entry {k.name}(", ",\n".join(f"\t{p}" for p in params), ")", "{"] + regs +
                     self.decls + self.body + ["}", ""])

  def region(self, b: Block) -> list[Value]:
    for op in b.ops:
      if op.opcode == "yield": return op.operands
      try:
        self.op(op)
      except CompileError as e:
        if e.loc is None and op.loc: raise CompileError(e.msg, loc=op.loc, arch=self.arch, kernel=self.k.name) from None
        raise
    return []

  # -- one op ------------------------------------------------------------------------------------------------------
  def op(self, op: Op) -> None:
    cls, code = ir.op_class(op), op.opcode
    t = op.results[0].type if op.results else None
    if cls in ("if", "for"):
      ctl = op.operands[:1] if code == "if" else op.operands[:3]
      if self.mask is not None and not has_barrier(op):   # skipped as a whole by the masked-off threads
        skip, saved, at = self.label("skip"), self.mask, len(self.body)
        self.i(f"@!{self.mask} bra {skip}")
        self.mask = None
        (self.if_ if code == "if" else self.for_)(op)
        self.mask = saved
        self.place(skip)
        branch = self.body[at:]   # the results get a value for the threads that skip, before the branch
        del self.body[at:]
        for r in op.results:
          for reg in self.v(r): self.zero(reg)
        self.body += branch
      elif has_barrier(op) and (self.mask is not None or any(id(v) in self.varying for v in ctl)):
        (self.if_masked if code == "if" else self.for_masked)(op)
      else: (self.if_ if code == "if" else self.for_)(op)   # taken alike by the whole CTA when it holds a barrier
      return
    if cls == "barrier":
      self.i("barrier.sync 0")
      return
    if cls in ("load", "store", "atomic"):
      out = self.memory(op)
    elif cls == "alloc": out = [self.alloc(op)]
    elif cls == "vector": out = [r for x in op.operands for r in self.v(x)]
    elif cls == "extract": out = [self.v(op.operands[0])[op.attrs["lane"]]]
    elif cls == "const": out = [self.const(op.attrs["value"], t)]
    elif cls == "id":
      kind, d = code.rsplit(".", 1)
      sreg = {"workitem.id": "tid", "workgroup.id": "ctaid", "workgroup.size": "ntid", "num_workgroups": "nctaid"}[kind]
      r = self.reg("r")
      self.i(f"mov.u32 {r}, %{sreg}.{d}")
      out = [r]
    else:
      # element-wise ops: one lane at a time (a scalar select condition applies to every lane)
      out = []
      for j in range(t.lanes):
        xs = [self.v(x)[j if x.type.lanes > 1 else 0] for x in op.operands]
        ts = [x.type.scalar for x in op.operands]
        out.append(self.scalar(op, cls, code, xs, ts, t.scalar))
    if op.results: self.regs[id(op.result)] = out

  def scalar(self, op: Op, cls: str, code: str, xs: list[str], ts: list[Type], t: Type) -> str:
    if cls == "binary": return self.binary(op, code, xs[0], xs[1], t)
    if cls == "cmp": return self.cmp(code, xs[0], xs[1], ts[0])
    if cls == "unary": return self.unary(code, xs[0], t)
    if cls == "math": return self.math(op, code, xs[0], t)
    if cls == "fma":
      if t.bits not in (32, 64) or t.kind != "f": raise self.err(f"{t} fma reached code generation", op)
      d = self.reg(_cls(t))
      self.i(f"fma.rn.f{t.bits} {d}, {xs[0]}, {xs[1]}, {xs[2]}")
      return d
    if cls == "select": return self.select(xs[0], xs[1], xs[2], t)
    if code == "cast": return self.cast(op, xs[0], ts[0], t)
    if code == "bitcast": return self.bitcast(op, xs[0], ts[0], t)
    raise self.err(f"no lowering for {code}", op)

  # -- helpers -----------------------------------------------------------------------------------------------------
  def norm(self, r: str, t: Type) -> str:
    """Re-extend a sub-32-bit integer held in 32 bits (sign for i8/i16, zero for u8/u16)."""
    if not t.is_int or t.bits >= 32: return r
    d = self.reg("r")
    self.i(f"cvt.{'s' if t.is_signed else 'u'}32.{ptype(t)} {d}, {r}")
    return d

  def itype(self, t: Type) -> str:
    """Instruction type of an integer held in a register: sub-32-bit values compute as 32-bit."""
    return f"{'s' if t.is_signed else 'u'}{max(t.bits, 32)}"

  def const(self, v, t: Type) -> str:
    d = self.reg(_cls(t))
    if t.is_bool: self.i(f"setp.ne.u32 {d}, {int(bool(v))}, 0")
    elif t.is_int: self.i(f"mov.b{64 if t.bits == 64 else 32} {d}, {int(v)}{'U' if int(v) >= 1 << 63 else ''}")
    else: self.i(f"mov.f{64 if t.bits == 64 else 32} {d}, {_fimm(float(v), 64 if t.bits == 64 else 32)}")
    return d

  def select(self, c: str, a: str, b: str, t: Type) -> str:
    d = self.reg(_cls(t))
    if t.is_bool:
      self.i(self._psel(d, a, b, c))
      return d
    ty = {"r": "b32", "rd": "b64", "f": "f32", "fd": "f64"}[_cls(t)]
    self.i(f"selp.{ty} {d}, {a}, {b}, {c}")
    return d

  def pred_to_u32(self, p: str) -> str:
    d = self.reg("r")
    self.i(f"selp.u32 {d}, 1, 0, {p}")
    return d

  def binary(self, op: Op, code: str, x: str, y: str, t: Type) -> str:
    if t.is_bool:
      d = self.reg("p")
      self.i(f"{code}.pred {d}, {x}, {y}")
      return d
    d = self.reg(_cls(t))
    if t.is_float:
      if t.kind != "f" or t.bits not in (32, 64): raise self.err(f"{t} {code} reached code generation", op)
      ft = f"f{t.bits}"
      if code in ("add", "sub", "mul", "div"): self.i(f"{code}.rn.{ft} {d}, {x}, {y}")
      elif code in ("min", "max"): self.i(f"{code}.{ft} {d}, {x}, {y}")
      else: raise self.err(f"float {code} reached code generation (backend_ptx.lower expands it)", op)
      return d
    it, w = self.itype(t), max(t.bits, 32)
    if code in ("add", "sub"): self.i(f"{code}.{it} {d}, {x}, {y}")
    elif code == "mul": self.i(f"mul.lo.{it} {d}, {x}, {y}")
    elif code in ("min", "max"): self.i(f"{code}.{it} {d}, {x}, {y}")
    elif code in ("and", "or", "xor"): self.i(f"{code}.b{w} {d}, {x}, {y}")
    elif code in ("shl", "shr"):
      m = self.reg("r")
      if w == 64:
        lo = self.reg("r")
        self.i(f"cvt.u32.u64 {lo}, {y}")
        y = lo
      self.i(f"and.b32 {m}, {y}, {t.bits - 1}")
      self.i(f"{code}.{'b' + str(w) if code == 'shl' else it} {d}, {x}, {m}")
    elif code in ("div", "rem"):
      return self.divrem(code, x, y, t)
    else: raise self.err(f"no lowering for {t} {code}", op)
    return self.norm(d, t)

  def divrem(self, code: str, x: str, y: str, t: Type) -> str:
    """x/0 -> 0 (and x%0 -> 0); INT_MIN / -1 wraps to INT_MIN, INT_MIN % -1 -> 0 (PTX leaves both undefined)."""
    it, c = self.itype(t), _cls(t)
    z, safe, q, d = self.reg("p"), self.reg(c), self.reg(c), self.reg(c)
    self.i(f"setp.eq.{it} {z}, {y}, 0")
    if t.is_signed:
      m1, bad = self.reg("p"), self.reg("p")
      self.i(f"setp.eq.{it} {m1}, {y}, -1")
      self.i(f"or.pred {bad}, {z}, {m1}")
      self.i(f"selp.{it} {safe}, 1, {y}, {bad}")
      self.i(f"{code}.{it} {q}, {x}, {safe}")
      alt = self.reg(c)
      if code == "div": self.i(f"neg.{it} {alt}, {x}")
      else: self.i(f"mov.{it} {alt}, 0")
      q2 = self.reg(c)
      self.i(f"selp.{it} {q2}, {alt}, {q}, {m1}")
      q = q2
    else:
      self.i(f"selp.{it} {safe}, 1, {y}, {z}")
      self.i(f"{code}.{it} {q}, {x}, {safe}")
    self.i(f"selp.{it} {d}, 0, {q}, {z}")
    return self.norm(d, t)

  def cmp(self, code: str, x: str, y: str, t: Type) -> str:
    if t.is_bool: x, y, t = self.pred_to_u32(x), self.pred_to_u32(y), ir.u32
    d = self.reg("p")
    cc = "neu" if code == "ne" and t.is_float else code
    ty = f"f{64 if t.bits == 64 else 32}" if t.is_float else self.itype(t)
    self.i(f"setp.{cc}.{ty} {d}, {x}, {y}")
    return d

  def unary(self, code: str, x: str, t: Type) -> str:
    d = self.reg(_cls(t))
    if t.is_bool:
      self.i(f"not.pred {d}, {x}")
      return d
    if t.is_float:
      self.i(f"{code}.f{64 if t.bits == 64 else 32} {d}, {x}")   # sign bit only: exact for f16/bf16 values too
      return d
    it, w = self.itype(t), max(t.bits, 32)
    if code == "not": self.i(f"not.b{w} {d}, {x}")
    elif code == "neg": self.i(f"neg.{it} {d}, {x}")
    elif not t.is_signed: return x
    else:   # max(x, -x): |INT_MIN| wraps to INT_MIN as in the reference (PTX's abs leaves it unspecified)
      n = self.reg(_cls(t))
      self.i(f"neg.{it} {n}, {x}")
      self.i(f"max.{it} {d}, {x}, {n}")
    return self.norm(d, t)

  def math(self, op: Op, code: str, x: str, t: Type) -> str:
    if t.kind != "f" or t.bits not in (32, 64): raise self.err(f"{t} {code} reached code generation", op)
    ft, d = f"f{t.bits}", self.reg(_cls(t))
    if code in ("floor", "ceil", "trunc"):
      self.i(f"cvt.{dict(floor='rmi', ceil='rpi', trunc='rzi')[code]}.{ft}.{ft} {d}, {x}")
    elif code == "sqrt": self.i(f"sqrt.rn.{ft} {d}, {x}")
    elif code == "rsqrt":
      s = self.reg(_cls(t))
      self.i(f"sqrt.rn.{ft} {s}, {x}")
      self.i(f"div.rn.{ft} {d}, {_fimm(1.0, t.bits)}, {s}")
    elif t.bits == 64:
      raise self.err(f"f64 {code} is not supported (PTX has no f64 {code}; compute in f32 and cast)", op)
    else:
      self.i(f"{dict(exp2='ex2', log2='lg2', sin='sin', cos='cos')[code]}.approx.f32 {d}, {x}")
    return d

  # -- casts -------------------------------------------------------------------------------------------------------
  def narrow(self, x: str, s: Type, d: Type) -> str:
    """An f32/f64 register (or integer of type s) rounded to d (f16/bf16), returned as the equal f32 value."""
    h = self.reg("h")
    self.i(f"cvt.rn.{ptype(d)}.{ptype(s) if not s.is_float else 'f' + str(s.bits)} {h}, {x}")
    return self.widen16(h, d)

  def widen16(self, h: str, t: Type) -> str:
    """b16 bits of an f16/bf16 -> the equal f32 (bf16 by a shift, which every target has)."""
    f = self.reg("f")
    if t.kind == "bf":
      r = self.reg("r")
      self.i(f"cvt.u32.u16 {r}, {h}")
      self.i(f"shl.b32 {r}, {r}, 16")
      self.i(f"mov.b32 {f}, {r}")
    else: self.i(f"cvt.f32.f16 {f}, {h}")
    return f

  def bits16(self, f: str, t: Type) -> str:
    """An f32 register holding an f16/bf16 value -> its b16 bits (exact)."""
    h = self.reg("h")
    self.i(f"cvt.rn.{ptype(t)}.f32 {h}, {f}")
    return h

  def cast(self, op: Op, x: str, s: Type, d: Type) -> str:
    if d.is_bool:
      p = self.reg("p")
      self.i(f"setp.neu.f{64 if s.bits == 64 else 32} {p}, {x}, {_fimm(0.0, 64 if s.bits == 64 else 32)}"
             if s.is_float else f"setp.ne.{self.itype(s)} {p}, {x}, 0" if s.is_int else f"mov.pred {p}, {x}")
      return p
    if s.is_bool:
      x, s = self.pred_to_u32(x), ir.u32
    if s.is_int and d.is_int:
      if d.bits == s.bits or (max(d.bits, 32) == max(s.bits, 32)): return self.norm(x, d) if d.bits < 32 else x
      r = self.reg(_cls(d))
      self.i(f"cvt.{self.itype(d)}.{self.itype(s)} {r}, {x}")
      return self.norm(r, d)
    if s.is_int and d.is_float:
      st = self.itype(s)
      if d.kind == "bf":
        # the reference: int -> f64 -> f32 -> bf16
        if s.bits == 64:
          w = self.reg("fd")
          self.i(f"cvt.rn.f64.{st} {w}, {x}")
          f = self.reg("f")
          self.i(f"cvt.rn.f32.f64 {f}, {w}")
        else:
          f = self.reg("f")
          self.i(f"cvt.rn.f32.{st} {f}, {x}")
        return self.narrow(f, ir.f32, d)
      if d.bits == 16: return self.narrow(x, Type(s.kind, max(s.bits, 32)), d)
      r = self.reg(_cls(d))
      self.i(f"cvt.rn.f{d.bits}.{st} {r}, {x}")
      return r
    if s.is_float and d.is_int:
      # cvt.rzi saturates and maps NaN to 0, as the reference does; 8/16-bit: to 32 bits, then clamped
      sf = f"f{64 if s.bits == 64 else 32}"
      r = self.reg(_cls(d))
      self.i(f"cvt.rzi.{self.itype(d)}.{sf} {r}, {x}")
      if d.bits < 32:
        lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.is_signed else (0, (1 << d.bits) - 1)
        c = self.reg("r")
        self.i(f"max.s32 {c}, {r}, {lo}" if d.is_signed else f"mov.b32 {c}, {r}")
        r = self.reg("r")
        self.i(f"min.{self.itype(d)} {r}, {c}, {hi}")
      return r
    # float -> float (f16/bf16 values are f32 here)
    sb, db = (64 if s.bits == 64 else 32), (64 if d.bits == 64 else 32)
    if d.kind == "bf" and sb == 64:   # the reference: f64 -> f32 -> bf16
      f = self.reg("f")
      self.i(f"cvt.rn.f32.f64 {f}, {x}")
      return self.narrow(f, ir.f32, d)
    if d.bits == 16: return x if str(s) == str(d) else self.narrow(x, Type("f", sb), d)
    if sb == db: return x
    r = self.reg(_cls(d))
    self.i(f"cvt.{'rn.' if db < sb else ''}f{db}.f{sb} {r}, {x}")
    return r

  def bitcast(self, op: Op, x: str, s: Type, d: Type) -> str:
    if str(s) == str(d): return x
    if s.is_bool or d.is_bool: raise self.err(f"bitcast {s} -> {d} is not supported", op)
    if s.bits == 16 or d.bits == 16:
      # via b16 bits: f16/bf16 values from/to their bits, 16-bit integers truncated/extended
      if s.is_float: h = self.bits16(x, s)
      else:
        h = self.reg("h")
        self.i(f"cvt.u16.u32 {h}, {x}")
      if d.is_float: return self.widen16(h, d)
      r = self.reg("r")
      self.i(f"cvt.{self.itype(d)}.{ptype(d)} {r}, {h}")
      return r
    if s.bits == 8: return self.norm(x, d)
    r = self.reg(_cls(d))
    self.i(f"mov.b{s.bits} {r}, {x}")
    return r

  # -- memory ------------------------------------------------------------------------------------------------------
  def alloc(self, op: Op) -> str:
    """`shared`: a .shared array of its own; `alloca`: a slice of the one .local depot (as nvcc lays them out)."""
    size = -(-op.attrs["count"] * op.result.type.elem.nbytes // 16) * 16
    r = self.reg("rd")
    if op.opcode == "shared":
      name = f"__shared_{len(self.decls)}"
      self.decls.append(f"\t.shared .align 16 .b8 {name}[{size}];")
      self.i(f"mov.u64 {r}, {name}")
    else:
      if self.depot is None: self.depot = self.reg("rd")
      self.i(f"add.s64 {r}, {self.depot}, {self.depot_size}")
      self.depot_size += size
    return r

  def address(self, base: str, idx: str, it: Type, size: int) -> str:
    off, a = self.reg("rd"), self.reg("rd")
    if it.bits == 64: self.i(f"mul.lo.s64 {off}, {idx}, {size}")
    else: self.i(f"mul.wide.{'s' if it.is_signed else 'u'}32 {off}, {idx}, {size}")
    self.i(f"add.s64 {a}, {base}, {off}")
    return a

  def load_value(self, t: Type, ld) -> str:
    """Emit a load of one scalar of type t through `ld(dest) -> instruction`, converting to its register form."""
    if t.is_bool:
      r, p = self.reg("r"), self.reg("p")
      self.i(ld(r), guard=True, dest=r)
      self.i(f"setp.ne.u32 {p}, {r}, 0")
      return p
    if str(t) in _NARROW:
      h = self.reg("h")
      self.i(ld(h), guard=True, dest=h)
      return self.widen16(h, t)
    d = self.reg(_cls(t))
    self.i(ld(d), guard=True, dest=d)
    return d

  def memory(self, op: Op) -> list[str]:
    p, idx = op.operands[0], op.operands[1]
    pt = p.type
    et = pt.elem
    space = {"global": "global", "local": "shared", "private": "local"}[pt.space]
    base = self.address(self.s(p), self.s(idx), idx.type, et.nbytes)
    mt = "u8" if et.is_bool else "b16" if str(et) in _NARROW else ptype(et)
    at = lambda j: f"[{base}+{j * et.nbytes}]" if j else f"[{base}]"
    if op.opcode == "load":
      return [self.load_value(et, lambda d, j=j: f"ld.{space}.{mt} {d}, {at(j)}") for j in range(op.result.type.lanes)]
    vals = self.v(op.operands[2])
    if op.opcode == "store":
      for j, v in enumerate(vals):
        if et.is_bool: v = self.pred_to_u32(v)
        elif str(et) in _NARROW: v = self.bits16(v, et)
        self.i(f"st.{space}.{mt} {at(j)}, {v}", guard=True)
      return []
    kind = op.opcode.split(".")[1]
    if et.bits < 32:
      raise self.err(f"{op.opcode} on {et} is not supported (PTX atomics are 32/64-bit)", op)
    x, w = vals[0], et.bits
    if kind == "sub":
      n = self.reg(_cls(et))
      self.i(f"neg.s{w} {n}, {x}")
      x, kind = n, "add"
    if et.is_float and kind == "xchg":
      xi, oi, d = self.reg("r" if w == 32 else "rd"), self.reg("r" if w == 32 else "rd"), self.reg(_cls(et))
      self.i(f"mov.b{w} {xi}, {x}")
      self.i(f"atom.{space}.exch.b{w} {oi}, [{base}], {xi}", guard=True, dest=oi)
      self.i(f"mov.b{w} {d}, {oi}")
      return [d]
    ty = {"add": ptype(et), "min": ptype(et), "max": ptype(et)}.get(kind, f"b{w}")
    if kind == "add" and et.is_int: ty = f"u{w}"
    d = self.reg(_cls(et))
    self.i(f"atom.{space}.{'exch' if kind == 'xchg' else kind}.{ty} {d}, [{base}], {x}", guard=True, dest=d)
    return [d]

  # -- control flow ------------------------------------------------------------------------------------------------
  def copy(self, dst: list[list[str]], src: list[list[str]], types: list[Type], guard: str | None = None) -> None:
    """Parallel copy of yielded values into result registers (through temporaries: a yield may swap them)."""
    tmp = []
    for rs, t in zip(src, types):
      row = []
      for r in rs:
        c = self.reg(_cls(t))
        self.i(self.mov(c, r, t))
        row.append(c)
      tmp.append(row)
    for ds, rs, t in zip(dst, tmp, types):
      for d, r in zip(ds, rs):
        self.i(self.mov(d, r, t) if guard is None else self.sel(d, r, d, guard, t))

  def mov(self, d: str, r: str, t: Type) -> str:
    return f"mov.{_DECL[_cls(t)]} {d}, {r}"

  def sel(self, d: str, a: str, b: str, c: str, t: Type) -> str:
    if t.scalar.is_bool:   # (a & c) | (b & !c) on predicates
      return f"@{c} mov.pred {d}, {a}" if b == d else self._psel(d, a, b, c)
    return f"selp.{_DECL[_cls(t)]} {d}, {a}, {b}, {c}"

  def _psel(self, d, a, b, c) -> str:
    self.i(f"mov.pred {d}, {b}")
    return f"@{c} mov.pred {d}, {a}"

  def if_(self, op: Op) -> None:
    c = self.s(op.operands[0])
    res = [self.new(r.type) for r in op.results]
    types = [r.type.scalar for r in op.results]
    els, end = self.label("else"), self.label("endif")
    has_else = bool(op.regions[1].ops)
    self.i(f"@!{c} bra {els if has_else else end}")
    ys = self.region(op.regions[0])
    self.copy(res, [self.v(y) for y in ys], types)
    if has_else:
      self.i(f"bra.uni {end}")
      self.place(els)
      ys = self.region(op.regions[1])
      self.copy(res, [self.v(y) for y in ys], types)
    self.place(end)
    for r, regs in zip(op.results, res): self.regs[id(r)] = regs

  def if_masked(self, op: Op) -> None:
    """Every thread walks both regions (they hold a barrier); each runs its side effects under its own mask."""
    c = self.s(op.operands[0])
    saved = self.mask
    mt, me = self.reg("p"), self.reg("p")
    if saved: self.i(f"and.pred {mt}, {saved}, {c}")
    else: self.i(f"mov.pred {mt}, {c}")
    nc = self.reg("p")
    self.i(f"not.pred {nc}, {c}")
    if saved: self.i(f"and.pred {me}, {saved}, {nc}")
    else: self.i(f"mov.pred {me}, {nc}")
    self.mask = mt
    yt = [self.v(y) for y in self.region(op.regions[0])]
    self.mask = me
    ye = [self.v(y) for y in self.region(op.regions[1])]
    self.mask = saved
    for r, a, b in zip(op.results, yt, ye):
      out = []
      for x, y in zip(a, b):
        d = self.reg(_cls(r.type))
        s = self.sel(d, x, y, c, r.type)
        self.i(s)
        out.append(d)
      self.regs[id(r)] = out

  def _loop_head(self, op: Op):
    body = op.regions[0]
    lo, hi, st = (self.s(x) for x in op.operands[:3])
    it = body.args[0].type
    iv = self.reg(_cls(it))
    self.i(self.mov(iv, lo, it))
    carried = []
    for a, init in zip(body.args[1:], op.operands[3:]):
      regs = self.new(a.type)
      for d, r in zip(regs, self.v(init)): self.i(self.mov(d, r, a.type))
      carried.append(regs)
    self.regs[id(body.args[0])] = [iv]
    for a, regs in zip(body.args[1:], carried): self.regs[id(a)] = regs
    return body, lo, hi, st, it, iv, carried

  def for_(self, op: Op) -> None:
    body, lo, hi, st, it, iv, carried = self._loop_head(op)
    ty = self.itype(it)
    top, end = self.label("loop"), self.label("endloop")
    p = self.reg("p")
    self.place(top)
    self.i(f"setp.lt.{ty} {p}, {iv}, {hi}")
    self.i(f"@!{p} bra {end}")
    ys = self.region(body)
    self.copy(carried, [self.v(y) for y in ys], [a.type.scalar for a in body.args[1:]])
    nxt = self.reg(_cls(it))
    self.i(f"add.{ty} {nxt}, {iv}, {st}")
    nxt = self.norm(nxt, it)
    self.i(self.mov(iv, nxt, it))
    w = self.reg("p")   # an induction variable that wraps past the type's maximum ends the loop (the reference)
    self.i(f"setp.lt.{ty} {w}, {iv}, {lo}")
    self.i(f"@!{w} bra {top}")
    self.place(end)
    for r, regs in zip(op.results, carried): self.regs[id(r)] = regs

  def for_masked(self, op: Op) -> None:
    """A loop holding a barrier: it runs while any thread of the CTA is active, each thread under its mask."""
    body, lo, hi, st, it, iv, carried = self._loop_head(op)
    ty = self.itype(it)
    saved = self.mask
    act, anyp = self.reg("p"), self.reg("p")
    self.i(f"setp.lt.{ty} {act}, {iv}, {hi}")
    if saved: self.i(f"and.pred {act}, {act}, {saved}")
    top, end = self.label("loop"), self.label("endloop")
    self.place(top)
    self.i(f"barrier.red.or.pred {anyp}, 0, {act}")
    self.i(f"@!{anyp} bra {end}")
    self.mask = act
    ys = self.region(body)
    self.mask = saved
    self.copy(carried, [self.v(y) for y in ys], [a.type.scalar for a in body.args[1:]], guard=act)
    nxt = self.reg(_cls(it))
    self.i(f"add.{ty} {nxt}, {iv}, {st}")
    nxt = self.norm(nxt, it)
    self.i(f"selp.{_DECL[_cls(it)]} {iv}, {nxt}, {iv}, {act}")
    a1, a2 = self.reg("p"), self.reg("p")
    self.i(f"setp.lt.{ty} {a1}, {iv}, {hi}")
    self.i(f"setp.ge.{ty} {a2}, {iv}, {lo}")
    self.i(f"and.pred {act}, {act}, {a1}")
    self.i(f"and.pred {act}, {act}, {a2}")
    self.i(f"bra.uni {top}")
    self.place(end)
    for r, regs in zip(op.results, carried): self.regs[id(r)] = regs


def compile_ptx(k: Kernel, arch: str) -> str:
  """Kernel IR (optimised, target-neutral) -> PTX module text for `arch` (sm_80, sm_90)."""
  check_arch(arch)
  limits.check(k, arch)
  return _Emit(lower(k), arch).kernel()


__all__ = ["compile_ptx", "lower", "varying", "has_barrier", "ptype", "ARCHES", "PTX_VERSION", "check_arch"]
