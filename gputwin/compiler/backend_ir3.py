"""ir3 backend: kernel IR -> Adreno ir3 assembly (Mesa's disassembly syntax) -> machine code through
gputwin.isa.ir3.assemble, for a630 / a660 (a6xx) and a730 / a740 (a7xx), with the launch metadata as a
gputwin.isa.ir3.listing.Shader.

Launch interface (`Compiled.shader`): wave64, local id in r0.xyz, workgroup id in the shared r48.xyz (Mesa's
convention), local size decided at launch (`local_size=None`: the kernel reads it, and the grid size, from
`struct ir3_driver_params_cs` in the const file). Pointer parameters are SSBOs 0, 1, 2... in IR order (bindless
IBOs, `.base0`); scalar parameters are packed 4-byte aligned in IR order into UBO `PARAM_UBO`, whose range the
driver pushes to the const file at c0 (bool: a uint32 0/1). `Shader.params` records that, so a positional
argument list launches it: gputwin.emu.launch(c.code_object, name, grid=, block=, args=[...], arch=, shader=c.shader).

Steps:
1. `lower(k)`: IR -> IR for what ir3 has no instruction for: 32-bit integer div/rem by non-powers of two as binary
   long division (a 32-step `for`; x/0 -> 0, remainder sign of the dividend), `exp` as 2^n * 2^(r log2 e) with a
   Cody-Waite split of ln 2 (no fma needed), `log` as log2 * ln 2.
2. Instruction selection into virtual registers (one per 32-bit value; bool is 0/1): cat2/cat3 ALU (`mull.u` +
   2 x `madsh.m16` for 32-bit multiply), cat4 SFU (rcp, sqrt, rsq, exp2, log2, sin, cos; float division is
   x * rcp(y)), cov for int<->float (`(even)` rounding int->float, truncating saturating float->int), ldib/stib
   `.base0` for buffers (element index of u32), ldl/stl (byte offsets) for shared memory, atomic.b.* (old value
   in rN, data tied in the next register) and atomic.*.l, `fence.r.w` + `bar.g` for barriers. Control flow:
   per-fiber `br p0.x` / `jump` with `(jp)` on the first instruction at every branch target.
3. Register allocation: liveness over the CFG, linear scan of the live ranges over r0.x-r47.w (component
   granularity; workitem ids precoloured in r0.x-z), no spilling (too many live values is a CompileError).
4. Legalisation (`legalize`): over the physical order of blocks (a wave runs both sides of a divergent branch),
   a fixed point of per-block states places (sy) before the first read or overwrite of a register a memory
   load/atomic writes, (ss) the same for SFU results and shared loads (shared atomics: both) and before the
   overwrite of a source an SFU or cat6 instruction may still be reading (WAR, as Mesa's legalize), and `(rptN)nop`
   so an ALU result is read at least 3 slots later by ALU and 6 by SFU/memory/flow instructions (Mesa's
   ir3_delayslots without the cat3-src3 shortcut).
5. `check(code, arch)` proves the flags on the assembled machine code, independently of the emitter's records: it
   decodes every word with the emulator's decoder (gputwin.emu.ir3: each instruction's reads, writes and sync
   class) and redoes the dataflow over the decoded branches; any uncovered read raises CompileError.

Supported: i32, u32, f32, bool scalars; global/shared 32-bit elements. Rejected with a CompileError naming op and
target: other types (f16, bf16, f64, 8/16/64-bit integers, vectors), fma (ir3's mad.f32 rounds twice), private
memory (alloca), float atomics, a barrier under thread-dependent control flow. f32 `%` is backend_ptx's exact fmod.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from gputwin.compiler import ir, limits
from gputwin.compiler.ir import Block, Kernel, Op, Type, Value
from gputwin.errors import CompileError

ARCHES = ("a630", "a660", "a730", "a740")
PARAM_UBO = 15          # the UBO binding holding the scalar parameters
NREG = 48 * 4           # r0.x .. r47.w (regids)
ALU_DELAY, OTHER_DELAY = 3, 6
_F32 = lambda v: float(np.float32(v))


def check_arch(arch: str) -> None:
  if arch not in ARCHES: raise CompileError(f"unknown Adreno target {arch!r} (known: {', '.join(ARCHES)})")


# ---------------------------------------------------------------------------------------------------------------
# IR lowering

def lower(k: Kernel) -> Kernel:
  """A copy of `k` with integer div/rem, exp and log rewritten (module docstring)."""
  return ir.rewrite(k, _rewrite)


def _rewrite(b: ir.Builder, op: Op) -> bool:
  code = op.opcode
  if not op.results or op.result.type.is_vec: return False
  t = op.result.type
  e = b.emit
  if code in ("div", "rem") and t.is_int and t.bits == 32:
    ir.redefine(b, op, "select", _divrem(b, *op.operands, t, code == "rem"))
    return True
  if code == "rem" and str(t) == "f32":  # exact fmod by binary long division (backend_ptx's sequence)
    from gputwin.compiler.backend_ptx import fmod
    ir.redefine(b, op, "select", fmod(b, *op.operands, t))
    return True
  if str(t) != "f32" or code not in ("exp", "log"): return False
  x = op.operands[0]
  c = lambda v: b.const(v, ir.f32)
  if code == "log":
    ir.redefine(b, op, "mul", [e("log2", [x], ir.f32), c(_F32(math.log(2)))])
    return True
  # exp(x) = 2^n * exp2(r * log2 e), n = round(x log2 e), r = x - n ln2 with ln2 = C1 + C2 (C1 has 9 significant
  # bits, so n * C1 is exact for |n| < 2^15 and x - n*C1 is exact); the 2^n split in two halves never overflows
  xc = e("min", [e("max", [x, c(-104.0)], ir.f32), c(89.0)], ir.f32)
  n = e("floor", [e("add", [e("mul", [xc, c(_F32(1 / math.log(2)))], ir.f32), c(0.5)], ir.f32)], ir.f32)
  r = e("sub", [xc, e("mul", [n, c(0.693359375)], ir.f32)], ir.f32)
  r = e("sub", [r, e("mul", [n, c(_F32(math.log(2) - 0.693359375))], ir.f32)], ir.f32)
  v = e("exp2", [e("mul", [r, c(_F32(1 / math.log(2)))], ir.f32)], ir.f32)
  nh = e("floor", [e("mul", [n, c(0.5)], ir.f32)], ir.f32)
  v = e("mul", [e("mul", [v, e("exp2", [nh], ir.f32)], ir.f32), e("exp2", [e("sub", [n, nh], ir.f32)], ir.f32)],
        ir.f32)
  ir.redefine(b, op, "select", [e("ne", [x, x], ir.boolean), x, v])
  return True


def _divrem(b: ir.Builder, x: Value, y: Value, t: Type, rem: bool) -> list[Value]:
  """32-bit quotient or remainder (truncating, x/0 -> 0) by restoring binary long division on the magnitudes;
  returns the operands of the final select."""
  e = b.emit
  u = ir.u32
  cu = lambda v: b.const(v, u)
  zero = e("eq", [y, b.const(0, t)], ir.boolean)
  if t.is_signed:
    nx, ny = e("lt", [x, b.const(0, t)], ir.boolean), e("lt", [y, b.const(0, t)], ir.boolean)
    ax, ay = e("bitcast", [e("abs", [x], t)], u), e("bitcast", [e("abs", [y], t)], u)
  else:
    ax, ay = x, y
  body = Block([b.value(ir.i32, "j"), b.value(u, "q"), b.value(u, "r")])
  outer, b.block = b.block, body
  j, q, r = body.args
  bit = e("sub", [b.const(31, ir.i32), j], ir.i32)
  top = e("shr", [r, cu(31)], u)
  nb = e("and", [e("shr", [ax, e("bitcast", [bit], u)], u), cu(1)], u)
  r2 = e("or", [e("shl", [r, cu(1)], u), nb], u)
  ge = e("or", [e("ne", [top, cu(0)], ir.boolean), e("ge", [r2, ay], ir.boolean)], ir.boolean)
  r3 = e("select", [ge, e("sub", [r2, ay], u), r2], u)
  q2 = e("or", [e("shl", [q, cu(1)], u), e("cast", [ge], u)], u)
  body.ops.append(b.make("yield", [q2, r3]))
  b.block = outer
  loop = b.make("for", [b.const(0, ir.i32), b.const(32, ir.i32), b.const(1, ir.i32), cu(0), cu(0)], [u, u],
                regions=[body])
  b.block.ops.append(loop)
  q, r = loop.results
  if t.is_signed:
    q, r = e("bitcast", [q], t), e("bitcast", [r], t)
    if rem: res = e("select", [nx, e("neg", [r], t), r], t)
    else: res = e("select", [e("ne", [nx, ny], ir.boolean), e("neg", [q], t), q], t)
  else:
    res = r if rem else q
  return [zero, b.const(0, t), res]


# ---------------------------------------------------------------------------------------------------------------
# Machine instructions over virtual registers

class V:
  """A virtual register of `size` consecutive regids (`fixed`: precoloured)."""
  __slots__ = ("n", "size", "fixed")

  def __init__(self, n: int, size: int = 1, fixed: int | None = None): self.n, self.size, self.fixed = n, size, fixed
  def __repr__(self) -> str: return f"v{self.n}"


class Ins:
  """One instruction: `fmt` with {0}, {1}, ... naming `ops` (defs then uses: (V, component) pairs or physical
  operand text such as 'p0.x', 'r48.x', 'c2.y'). kind: alu (cat1-3), sfu (cat4), ldsy (memory loads/atomics:
  (sy)), ldss (shared loads: (ss)), atoml (shared atomics: both), mem (stores, fence), flow, bar, end, label."""
  __slots__ = ("kind", "fmt", "defs", "uses", "flags", "pre", "target", "label")

  def __init__(self, kind, fmt, defs=(), uses=(), target=None, label=None):
    self.kind, self.fmt, self.defs, self.uses = kind, fmt, list(defs), list(uses)
    self.flags: set[str] = set()
    self.pre = 0                   # nop slots placed before it
    self.target, self.label = target, label


def _r(x) -> tuple:
  return x if isinstance(x, tuple) or isinstance(x, str) else (x, 0)


def regname(rid: int) -> str: return f"r{rid >> 2}.{'xyzw'[rid & 3]}"


def cname(dword: int) -> str: return f"c{dword >> 2}.{'xyzw'[dword & 3]}"


def imm(v: int) -> str:
  v &= 0xffffffff
  return str(v) if v <= 4096 else f"0x{v:x}"


def f32bits(v: float) -> int: return struct.unpack("<I", struct.pack("<f", v))[0]


class _Emit:
  def __init__(self, k: Kernel, arch: str):
    self.k, self.arch = k, arch
    self.code: list[Ins] = []
    self.nv = 0
    self.vals: dict[int, object] = {}     # id(Value) -> V, or ("ssbo", binding) / ("shared", byte base)
    self.labels = 0
    self.shared = 0
    self.params: list = []
    self.has_barrier = False
    self.varying = None

  def err(self, msg: str, op: Op | None = None) -> CompileError:
    return CompileError(f"ir3 backend: {msg}", loc=op.loc if op is not None else None, arch=self.arch,
                        kernel=self.k.name)

  def v(self, size: int = 1, fixed: int | None = None) -> V:
    self.nv += 1
    return V(self.nv, size, fixed)

  def i(self, kind, fmt, defs=(), uses=(), target=None) -> Ins:
    ins = Ins(kind, fmt, [_r(d) for d in defs], [_r(u) for u in uses], target)
    self.code.append(ins)
    return ins

  def label(self, hint: str) -> str:
    self.labels += 1
    return f"{hint}{self.labels}"

  def place(self, lab: str) -> None: self.code.append(Ins("label", "", label=lab))

  def mov(self, d, s) -> None: self.i("alu", "mov.u32u32 {0}, {1}", [d], [s])

  def const(self, bits: int) -> V:
    d = self.v()
    self.i("alu", f"mov.u32u32 {{0}}, {imm(bits)}", [d])
    return d

  def get(self, x: Value) -> V:
    r = self.vals[id(x)]
    if not isinstance(r, V): raise self.err(f"%{x.name} ({x.type}) is a pointer used as a value")
    return r

  # -- kernel ------------------------------------------------------------------------------------------------------
  def kernel(self):
    k = self.k
    from gputwin.compiler.backend_ptx import has_barrier, varying
    self.varying = varying(k)
    self.has_barrier_fn = has_barrier
    used = {id(v) for op in k.walk() for v in op.operands}
    nptr = sum(p.type.is_ptr for p in k.params)
    if nptr > PARAM_UBO: raise self.err(f"{nptr} buffer parameters (at most {PARAM_UBO})")
    off = binding = 0
    for p in k.params:
      if p.type.is_ptr:
        if p.type.elem.is_vec or p.type.elem.bits != 32 or p.type.elem.is_bool:
          raise self.err(f"parameter %{p.name}: {p.type} buffers are not supported (32-bit elements only)")
        self.vals[id(p)] = ("ssbo", binding)
        self.params.append(("ssbo", binding, 0, ""))
        binding += 1
      else:
        self.scalar_type(p.type, None, f"parameter %{p.name}")
        self.params.append(("ubo", PARAM_UBO, off, "bool" if p.type.is_bool else str(np.dtype(_np(p.type)))))
        if id(p) in used:
          d = self.v()
          self.mov(d, cname(off // 4))
          self.vals[id(p)] = d
        off += 4
    self.param_bytes = off
    self.dp = -(-off // 16) * 4              # driver params (dwords) right after the pushed parameter range
    self.ids: dict[str, V] = {}
    for op in k.walk():
      if op.opcode.startswith("workitem.id."):
        c = "xyz".index(op.opcode[-1])
        if op.opcode not in self.ids: self.ids[op.opcode] = self.v(fixed=c)
    self.region(k.body)
    self.i("end", "end")

  def scalar_type(self, t: Type, op: Op | None, what: str = "") -> None:
    if t.is_vec or not (t.is_bool or (t.bits == 32 and (t.is_int or t.kind == "f"))):
      raise self.err(f"{what or op.opcode}: type {t} is not supported on {self.arch} (i32, u32, f32, bool only)", op)

  def region(self, b: Block) -> list[Value]:
    for op in b.ops:
      if op.opcode == "yield": return op.operands
      self.op(op)
    return []

  def op(self, op: Op) -> None:
    cls, code = ir.op_class(op), op.opcode
    for r in op.results:
      if not r.type.is_ptr: self.scalar_type(r.type, op)
    for x in op.operands:
      if not x.type.is_ptr: self.scalar_type(x.type, op)
    if cls == "if": return self.if_(op)
    if cls == "for": return self.for_(op)
    if cls == "barrier":
      self.has_barrier = True
      self.i("mem", "fence.r.w")
      ins = self.i("bar", "bar.g")
      ins.flags |= {"ss", "sy"}
      return
    if cls == "alloc":
      if code == "alloca": raise self.err(f"private memory (alloca) is not supported on {self.arch}", op)
      if op.result.type.elem.bits != 32 or op.result.type.elem.is_bool:
        raise self.err(f"shared {op.result.type.elem} arrays are not supported (32-bit elements only)", op)
      self.vals[id(op.result)] = ("shared", self.shared)
      self.shared += -(-op.attrs["count"] * 4 // 16) * 16
      return
    if cls in ("load", "store", "atomic"): return self.memory(op)
    if cls == "const":
      t, v = op.result.type, op.attrs["value"]
      self.vals[id(op.result)] = self.const(f32bits(v) if t.is_float else int(v))
      return
    if cls == "id":
      kind, c = code[:-2], "xyz".index(code[-1])
      if kind == "workitem.id":
        self.vals[id(op.result)] = self.ids[code]
        return
      d = self.v()
      src = {"workgroup.id": f"r{48}.{'xyz'[c]}", "num_workgroups": cname(self.dp + c),
             "workgroup.size": cname(self.dp + 8 + c)}[kind]
      self.mov(d, src)
      self.vals[id(op.result)] = d
      return
    xs = [self.get(x) for x in op.operands]
    t = op.operands[0].type if op.operands else op.result.type
    d = self.v()
    self.vals[id(op.result)] = d
    if cls == "binary": self.binary(op, code, d, *xs, t)
    elif cls == "cmp":
      k = "f" if t.is_float else "s" if t.is_signed else "u"
      self.i("alu", f"cmps.{k}.{code} {{0}}, {{1}}, {{2}}", [d], xs)
    elif cls == "unary":
      if code == "not":
        if t.is_bool: self.i("alu", "xor.b {0}, {1}, 1", [d], xs)
        else: self.i("alu", "not.b {0}, {1}", [d], xs)
      else:
        self.i("alu", f"absneg.{'f' if t.is_float else 's'} {{0}}, ({code})" + "{1}", [d], xs)
    elif cls == "math":
      if code in ("floor", "ceil", "trunc"): self.i("alu", f"{code}.f {{0}}, {{1}}", [d], xs)
      else: self.i("sfu", f"{dict(rsqrt='rsq').get(code, code)} {{0}}, {{1}}", [d], xs)
    elif cls == "select": self.i("alu", "sel.b32 {0}, {2}, {1}, {3}", [d], xs)
    elif cls == "cast": self.cast(op, d, xs[0], op.operands[0].type, op.result.type)
    elif cls == "fma": raise self.err(f"fma on {self.arch}: ir3's mad.f32 rounds the product (not fused)", op)
    else: raise self.err(f"{code} is not supported on {self.arch}", op)

  def binary(self, op: Op, code: str, d: V, x: V, y: V, t: Type) -> None:
    if t.is_float:
      if code in ("add", "mul", "min", "max"): self.i("alu", f"{code}.f {{0}}, {{1}}, {{2}}", [d], [x, y])
      elif code == "sub": self.i("alu", "add.f {0}, {1}, (neg){2}", [d], [x, y])
      elif code == "div":
        rc = self.v()
        self.i("sfu", "rcp {0}, {1}", [rc], [y])
        self.i("alu", "mul.f {0}, {1}, {2}", [d], [x, rc])
      else: raise self.err(f"f32 {code} reached code generation", op)
      return
    s = "s" if t.is_signed else "u"
    if code in ("add", "sub"): self.i("alu", f"{code}.u {{0}}, {{1}}, {{2}}", [d], [x, y])
    elif code == "mul":
      self.i("alu", "mull.u {0}, {1}, {2}", [d], [x, y])
      self.i("alu", "madsh.m16 {0}, {1}, {2}, {3}", [d], [x, y, d])
      self.i("alu", "madsh.m16 {0}, {1}, {2}, {3}", [d], [y, x, d])
    elif code in ("and", "or", "xor"): self.i("alu", f"{code}.b {{0}}, {{1}}, {{2}}", [d], [x, y])
    elif code == "shl": self.i("alu", "shl.b {0}, {1}, {2}", [d], [x, y])
    elif code == "shr": self.i("alu", f"{'ashr' if t.is_signed else 'shr'}.b {{0}}, {{1}}, {{2}}", [d], [x, y])
    elif code in ("min", "max"): self.i("alu", f"{code}.{s} {{0}}, {{1}}, {{2}}", [d], [x, y])
    else: raise self.err(f"{t} {code} reached code generation", op)

  def cast(self, op: Op, d: V, x: V, s: Type, t: Type) -> None:
    if op.opcode == "bitcast" or str(s) == str(t) or (s.is_int and t.is_int) or (s.is_bool and t.is_int):
      return self.mov(d, x)
    if t.is_bool:
      if s.is_float: self.i("alu", "cmps.f.ne {0}, {1}, {2}", [d], [x, self.const(0)])
      else: self.i("alu", "cmps.u.ne {0}, {1}, 0", [d], [x])
      return
    if t.is_float:
      self.i("alu", f"cov.{'s' if s.is_signed else 'u'}32f32 (even){{0}}, {{1}}", [d], [x])
    else:
      self.i("alu", f"cov.f32{'s' if t.is_signed else 'u'}32 {{0}}, {{1}}", [d], [x])

  # -- memory ------------------------------------------------------------------------------------------------------
  def memory(self, op: Op) -> None:
    p, idx = op.operands[0], op.operands[1]
    space, base = self.vals[id(p)]
    et = p.type.elem
    if idx.type.bits != 32: raise self.err(f"{op.opcode} with a {idx.type} index (32-bit indices only)", op)
    ix = self.get(idx)
    cls, code = ir.op_class(op), op.opcode
    if cls == "atomic":
      kind = code.split(".")[1]
      if et.is_float: raise self.err(f"{code} on {et} is not supported on {self.arch} (integer atomics only)", op)
      x = self.get(op.operands[2])
      if kind == "sub":
        n = self.v()
        self.i("alu", "absneg.s {0}, (neg){1}", [n], [x])
        x, kind = n, "add"
      ty = "s32" if kind in ("min", "max") and et.is_signed else "u32"
    if space == "ssbo":
      if cls == "load":
        d = self.v()
        self.i("ldsy", f"ldib.b.untyped.1d.u32.1.imm.base0 {{0}}, {{1}}, {base}", [d], [ix])
        self.vals[id(op.result)] = d
      elif cls == "store":
        self.i("mem", f"stib.b.untyped.1d.u32.1.imm.base0 {{0}}, {{1}}, {base}", [], [self.get(op.operands[2]), ix])
      else:
        pr = self.v(2)
        self.mov((pr, 1), x)
        self.i("ldsy", f"atomic.b.{kind}.untyped.1d.{ty}.1.imm.base0 {{0}}, {{2}}, {base}", [(pr, 0)],
               [(pr, 1), ix])
        self.vals[id(op.result)] = pr
      return
    a = self.v()
    self.i("alu", "shl.b {0}, {1}, 2", [a], [ix])
    if base and (cls == "atomic" or base > 1024):
      a2 = self.v()
      self.i("alu", "add.u {0}, {1}, {2}", [a2], [a, self.const(base)])
      a, base = a2, 0
    off = f"+{base}" if base else ""
    if cls == "load":
      d = self.v()
      self.i("ldss", f"ldl.u32 {{0}}, l[{{1}}{off}], 1", [d], [a])
      self.vals[id(op.result)] = d
    elif cls == "store":
      self.i("mem", f"stl.u32 l[{{0}}{off}], {{1}}, 1", [], [a, self.get(op.operands[2])])
    else:
      d = self.v()
      self.i("atoml", f"atomic.{kind}.untyped.1d.{ty}.1.l {{0}}, l[{{1}}], {{2}}", [d], [a, x])
      self.vals[id(op.result)] = d

  # -- control flow ------------------------------------------------------------------------------------------------
  def copy(self, dst: list[V], src: list[V]) -> None:
    """Parallel copy (through temporaries when a source is also a destination)."""
    pairs = [(d, s) for d, s in zip(dst, src) if d is not s]
    if any(s in dst for _, s in pairs):
      tmp = []
      for _, s in pairs:
        t = self.v()
        self.mov(t, s)
        tmp.append(t)
      pairs = [(d, t) for (d, _), t in zip(pairs, tmp)]
    for d, s in pairs: self.mov(d, s)

  def if_(self, op: Op) -> None:
    if self.has_barrier_fn(op) and id(op.operands[0]) in self.varying:
      raise self.err(f"a barrier under thread-dependent control flow is not supported on {self.arch}", op)
    c = self.get(op.operands[0])
    res = [self.v() for _ in op.results]
    els, end = self.label("else"), self.label("endif")
    has_else = bool(op.regions[1].ops)
    self.i("alu", "cmps.u.eq {0}, {1}, 0", ["p0.x"], [c])
    self.i("flow", f"br p0.x, #{els if has_else else end}", [], ["p0.x"], target=els if has_else else end)
    self.copy(res, [self.get(y) for y in self.region(op.regions[0])])
    if has_else:
      self.i("flow", f"jump #{end}", target=end)
      self.place(els)
      self.copy(res, [self.get(y) for y in self.region(op.regions[1])])
    self.place(end)
    for r, v in zip(op.results, res): self.vals[id(r)] = v

  def for_(self, op: Op) -> None:
    body = op.regions[0]
    if self.has_barrier_fn(op) and any(id(v) in self.varying for v in op.operands[:3]):
      raise self.err(f"a barrier in a loop with thread-dependent bounds is not supported on {self.arch}", op)
    lo, hi, st = (self.get(x) for x in op.operands[:3])
    it = body.args[0].type
    s = "s" if it.is_signed else "u"
    iv = self.v()
    self.mov(iv, lo)
    carried = [self.v() for _ in body.args[1:]]
    for d, x in zip(carried, op.operands[3:]): self.mov(d, self.get(x))
    self.vals[id(body.args[0])] = iv
    for a, d in zip(body.args[1:], carried): self.vals[id(a)] = d
    top, end = self.label("loop"), self.label("endloop")
    self.place(top)
    self.i("alu", f"cmps.{s}.ge {{0}}, {{1}}, {{2}}", ["p0.x"], [iv, hi])
    self.i("flow", f"br p0.x, #{end}", [], ["p0.x"], target=end)
    self.copy(carried, [self.get(y) for y in self.region(body)])
    self.i("alu", "add.u {0}, {1}, {2}", [iv], [iv, st])
    # an induction variable that wraps past the type's maximum ends the loop (the reference)
    self.i("alu", f"cmps.{s}.lt {{0}}, {{1}}, {{2}}", ["p0.x"], [iv, lo])
    self.i("flow", f"br p0.x, #{end}", [], ["p0.x"], target=end)
    self.i("flow", f"jump #{top}", target=top)
    self.place(end)
    for r, d in zip(op.results, carried): self.vals[id(r)] = d


def _np(t: Type):
  return {"i": np.int32, "u": np.uint32, "f": np.float32}[t.kind] if not t.is_bool else np.uint32


# ---------------------------------------------------------------------------------------------------------------
# CFG, liveness, register allocation

def blocks(code: list, succ_of) -> tuple[list[tuple[int, int]], dict[str, int], list[list[int]]]:
  """Basic blocks [start, end) of an instruction list (leaders: labels, and the instruction after a branch),
  the block of each label, and each block's successors from `succ_of(last_instruction, next_block, label_block)`."""
  starts = sorted({0} | {i for i, x in enumerate(code) if x.kind == "label"} |
                  {i + 1 for i, x in enumerate(code) if x.kind in ("flow", "end") and i + 1 < len(code)})
  bl = [(s, e) for s, e in zip(starts, starts[1:] + [len(code)]) if s < e]
  lab = {}
  for j, (s, e) in enumerate(bl):
    for i in range(s, e):
      if code[i].kind == "label": lab[code[i].label] = j
  succ = [succ_of(code[e - 1], j + 1 if j + 1 < len(bl) else None, lab) for j, (s, e) in enumerate(bl)]
  return bl, lab, succ


def _logical(last, nxt, lab):
  out = []
  if last.target is not None: out.append(lab[last.target])
  if nxt is not None and last.kind != "end" and not (last.kind == "flow" and last.fmt.startswith("jump")):
    out.append(nxt)
  return out


def _physical(last, nxt, lab):
  """What a wave may run next: the branch target and the next block in memory (the other side of a divergent
  branch runs after this one), except after `end`."""
  out = [lab[last.target]] if last.target is not None else []
  if nxt is not None and last.kind != "end": out.append(nxt)
  return out


def allocate(code: list[Ins], err) -> int:
  """Linear scan over live ranges (liveness over the logical CFG) into regids; returns the highest regid used."""
  bl, _, succ = blocks(code, _logical)
  vs = lambda ops: [o[0] for o in ops if isinstance(o, tuple)]
  gen, kill = [], []
  for s, e in bl:
    g, k = set(), set()
    for x in code[s:e]:
      g |= {v for v in vs(x.uses) if v not in k}
      k |= set(vs(x.defs))
    gen.append(g); kill.append(k)
  live_in = [set() for _ in bl]
  live_out = [set() for _ in bl]
  changed = True
  while changed:
    changed = False
    for j in reversed(range(len(bl))):
      out = set().union(*(live_in[t] for t in succ[j])) if succ[j] else set()
      inn = gen[j] | (out - kill[j])
      if out != live_out[j] or inn != live_in[j]: live_out[j], live_in[j], changed = out, inn, True
  span: dict[V, list[int]] = {}
  def touch(v, i):
    s = span.setdefault(v, [i, i])
    s[0], s[1] = min(s[0], i), max(s[1], i)
  for j, (s, e) in enumerate(bl):
    live = set(live_out[j])
    for v in live: touch(v, e - 1)
    for i in range(e - 1, s - 1, -1):
      x = code[i]
      for v in vs(x.defs): touch(v, i)
      live -= set(vs(x.defs))
      live |= set(vs(x.uses))
      for v in live: touch(v, i)
    for v in live: touch(v, s)
  for v in span:
    if v.fixed is not None and v in live_in[0]: span[v][0] = -1     # an input: live from the start
  fixed = [(v.fixed, *span[v]) for v in span if v.fixed is not None]
  order = sorted((v for v in span if v.fixed is None), key=lambda v: (span[v][0], v.n))
  where: dict[V, int] = {v: v.fixed for v in span if v.fixed is not None}
  active: list[tuple[int, int, int]] = list(fixed)   # (regid, start, end) per occupied regid
  for v in order:
    s, e = span[v]
    busy = {r for r, a, b in active if not (b < s or a > e)}
    r = next((r for r in range(NREG - v.size + 1) if all(r + k not in busy for k in range(v.size))), None)
    if r is None: raise err(f"too many live values: more than {NREG} 32-bit registers (r0.x-r47.w) needed")
    where[v] = r
    for k in range(v.size): active.append((r + k, s, e))
    active = [a for a in active if a[2] >= s]
  top = -1
  for x in code:
    ops = []
    for o in x.defs + x.uses:
      if isinstance(o, tuple):
        rid = where[o[0]] + o[1]
        top = max(top, rid)
        ops.append(rid)
      else: ops.append(o)
    x.defs, x.uses = ops[:len(x.defs)], ops[len(x.defs):]
  return top


# ---------------------------------------------------------------------------------------------------------------
# Legalisation: (ss)/(sy) flags and nop delay slots

_SY, _SS = "sy", "ss"
CAT6 = ("ldsy", "ldss", "atoml", "mem")
ASYNC_READ = ("sfu", "ldsy", "ldss", "atoml", "mem")   # read their sources late: a later write needs (ss) (WAR)


def _producer(kind: str) -> set[str]:
  return {"ldsy": {_SY}, "ldss": {_SS}, "sfu": {_SS}, "atoml": {_SS, _SY}}.get(kind, set())


def legalize(code: list[Ins]) -> None:
  """Place flags and nop slots (in place) until a fixed point over the physical block order."""
  bl, _, succ = blocks(code, _physical)
  preds = [[] for _ in bl]
  for j, ss in enumerate(succ):
    for t in ss: preds[t].append(j)
  empty = (frozenset(), frozenset(), (), frozenset())
  state_in = [empty for _ in bl]
  out = [None] * len(bl)

  def merge(states):
    sy, ss, dl, war = set(), set(), {}, set()
    for a, b, c, w in states:
      sy |= a; ss |= b; war |= w
      for k, e in c: dl[k] = min(dl.get(k, 99), e)
    return frozenset(sy), frozenset(ss), tuple(sorted(dl.items(), key=str)), frozenset(war)

  work = list(range(len(bl)))
  while work:
    j = work.pop(0)
    ins = merge([out[p] for p in preds[j] if out[p] is not None]) if j else empty
    if out[j] is not None and ins == state_in[j]: continue
    state_in[j] = ins
    sy, ss, dl, war = set(ins[0]), set(ins[1]), dict(ins[2]), set(ins[3])
    s, e = bl[j]
    for x in code[s:e]:
      if x.kind == "label": continue
      touched = [o for o in x.uses + x.defs if not (isinstance(o, str) and o[0] in "rc")]
      if any(o in sy for o in touched): x.flags.add(_SY)
      if any(o in ss for o in touched) or any(o in war for o in x.defs): x.flags.add(_SS)
      if _SY in x.flags: sy.clear()
      if _SS in x.flags: ss.clear(); war.clear()
      if x.kind in ASYNC_READ: war |= {o for o in x.uses if not (isinstance(o, str) and o[0] in "rc")}
      req = ALU_DELAY if x.kind == "alu" else 0 if x.kind == "end" else OTHER_DELAY
      need = max([req - dl[o] for o in x.uses if o in dl] + [0])
      x.pre = max(x.pre, need)
      adv = x.pre + 1
      dl = {k: v + adv for k, v in dl.items() if v + adv < OTHER_DELAY}
      for d in x.defs:
        dl.pop(d, None); sy.discard(d); ss.discard(d)
        p = _producer(x.kind)
        if _SY in p: sy.add(d)
        if _SS in p: ss.add(d)
        if x.kind == "alu": dl[d] = 0
    new = (frozenset(sy), frozenset(ss), tuple(sorted(dl.items(), key=str)), frozenset(war))
    if new != out[j]:
      out[j] = new
      work += [t for t in succ[j] if t not in work]


def render(code: list[Ins]) -> str:
  """Text in Mesa's syntax: nop slots as (rptN)nop, flags in Mesa's order (sy)(ss)(jp), (jp) on the first
  instruction at every branch target."""
  targets = {x.target for x in code if x.target is not None}
  lines, jp = [], False
  for x in code:
    if x.kind == "label":
      if x.label in targets:
        lines.append(f"{x.label}:")
        jp = True
      continue
    ops = [regname(o) if isinstance(o, int) else o for o in x.defs + x.uses]
    sync = "".join(f"({f})" for f in ("sy", "ss") if f in x.flags)
    on_nop = x.kind in CAT6 and x.fmt.split(".")[0] not in ("fence",) and _SS in x.flags
    pre = max(x.pre, 1) if on_nop else x.pre     # (cat6 encodings have no (ss): it goes on a nop before them)
    while pre > 0:
      n = min(pre, 8)
      pre -= n
      fl = (sync if on_nop and not pre else "") + ("(jp)" if jp else "")
      lines.append(f"{fl}{f'(rpt{n - 1})' if n > 1 else ''}nop")
      jp = False
    fl = ("" if on_nop else sync) + ("(jp)" if jp else "")
    lines.append(fl + x.fmt.format(*ops))
    jp = False
  return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# The checker: flags and delays proven on the decoded machine code

def check(code: bytes, arch: str, kernel: str = "") -> int:
  """Prove (ss)/(sy) and the delay slots of assembled ir3 code: decode every word with the emulator's decoder (reads,
  writes, sync class, branch targets) and run a forward dataflow over the physical successors; raises CompileError
  naming the PC and instruction of the first read (or overwrite) of a register still pending, or read too early
  after an ALU write. Returns the number of instructions checked."""
  from gputwin.emu.ir3.decode import P0
  from gputwin.emu.ir3.launch import program
  from gputwin.emu.program import Src
  prog, _ = program(bytes(code), arch, 64)
  n = len(code) // 8
  ops = [prog.op(8 * i) for i in range(n)]
  names = [o.inst.inst.name for o in ops]
  fields = [o.inst.inst.fields for o in ops]

  def regs(o, outs: bool) -> set:
    parts = o.info.get("parts", [o])
    xs = [x for p in parts for x in (p.outs.values() if outs else p.ins.values())]
    if not outs:
      xs += [o.info.get(k) for k in ("base", "coord", "index", "ibo", "ubo", "pred")]
      g = o.info.get("guard")
      if g is not None and o.inst.inst.name == "br": xs.append(Src("v", g[0]))
    out = set()
    for x in xs:
      if isinstance(x, Src) and x.file == "v" and x.index >= P0:
        for k in range(max(x.dwords, 1)): out.add(x.index + k)
    return out

  def target(o):
    t = o.ins.get("TARGET")
    return t.value // 8 if t is not None and o.inst.inst.name in ("br", "jump") else None

  starts = sorted({0} | {t for o in ops if (t := target(o)) is not None} |
                  {i + 1 for i in range(n) if names[i] in ("br", "jump", "end") and i + 1 < n})
  bl = [(s, e) for s, e in zip(starts, starts[1:] + [n])]
  bix = {s: j for j, (s, e) in enumerate(bl)}
  succ = []
  for j, (s, e) in enumerate(bl):
    last = ops[e - 1]
    t = target(last)
    succ.append(([bix[t]] if t is not None else []) + ([j + 1] if j + 1 < len(bl) and names[e - 1] != "end" else []))
  empty = ({}, {}, {}, {})
  outs = [None] * len(bl)
  ins = [None] * len(bl)
  work = [0]
  preds = [[p for p in range(len(bl)) if j in succ[p]] for j in range(len(bl))]

  def fail(i, msg):
    raise CompileError(f"ir3 legality check: PC {8 * i:#x} `{ops[i].text}`: {msg}", arch=arch, kernel=kernel)

  while work:
    j = work.pop(0)
    st = [outs[p] for p in preds[j] if outs[p] is not None] + ([empty] if j == 0 else [])
    sy, ss, dl, war = {}, {}, {}, {}
    for a, b, c, w in st:
      sy.update(a); ss.update(b); war.update(w)
      for k, v in c.items(): dl[k] = min(dl.get(k, 99), v)
    key = (tuple(sorted(sy)), tuple(sorted(ss)), tuple(sorted(dl.items())), tuple(sorted(war)))
    if ins[j] == key and outs[j] is not None: continue
    ins[j] = key
    s, e = bl[j]
    for i in range(s, e):
      o = ops[i]
      if o.info.get("sy"): sy.clear()
      if o.info.get("ss"): ss.clear(); war.clear()
      rd, wr = regs(o, False), regs(o, True)
      for r in wr:
        if r in war: fail(i, f"overwrites row {r}, a source the instruction at PC {8 * war[r]:#x} may still read, "
                             "without (ss)")
      for r in rd | wr:
        if r in sy: fail(i, f"register row {r} is written by the load/atomic at PC {8 * sy[r]:#x} without (sy)")
        if r in ss: fail(i, f"register row {r} is written by the SFU/shared load at PC {8 * ss[r]:#x} without (ss)")
      alu = o.info.get("cat") in (1, 2, 3)
      req = ALU_DELAY if alu else 0 if names[i] == "end" else OTHER_DELAY
      for r in rd:
        if r in dl and dl[r] < req: fail(i, f"reads row {r} {dl[r]} slot(s) after an ALU write ({req} needed)")
      adv = 1 + int(fields[i].get("REPEAT", 0) or 0)
      dl = {k: v + adv for k, v in dl.items() if v + adv < OTHER_DELAY}
      sync = o.info.get("sync")
      for r in wr:
        dl.pop(r, None); sy.pop(r, None); ss.pop(r, None)
        if sync in ("sy", "either"): sy[r] = i
        if sync in ("ss", "either"): ss[r] = i
        if alu: dl[r] = 0
      if o.info.get("cat") in (4, 5, 6): war.update({r: i for r in rd})
    if outs[j] != (sy, ss, dl, war):
      outs[j] = (dict(sy), dict(ss), dict(dl), dict(war))
      work += [t for t in succ[j] if t not in work]
  return n


# ---------------------------------------------------------------------------------------------------------------

def compile_ir3(k: Kernel, arch: str):
  """Kernel IR (optimised) -> (machine code, assembly text, listing.Shader) for `arch`."""
  from gputwin.isa.ir3 import assemble, listing
  check_arch(arch)
  limits.check(k, arch)
  em = _Emit(lower(k), arch)
  em.kernel()
  code = em.code
  top = allocate(code, em.err)
  legalize(code)
  text = render(code)
  try:
    mc = assemble(text, arch)
  except Exception as e:   # our own text must assemble: a backend bug, reported with the listing
    raise CompileError(f"ir3 backend produced text the assembler rejects: {e}\n{text}", arch=arch,
                       kernel=k.name) from None
  check(mc, arch, k.name)
  nconst = em.dp + 16
  params = tuple(listing.Param(*p) for p in em.params)
  ubo = (listing.UboRange(PARAM_UBO, 0, 0, -(-em.param_bytes // 16) * 16),) if em.param_bytes else ()
  sh = listing.Shader.explicit(
    arch, mc, local_size=None, wave_size=64, shared_size=em.shared, constlen=nconst // 4, ubo_ranges=ubo,
    allocs=((("ubo_ranges", 0, em.dp),) if em.dp else ()) + (("driver_params", em.dp, 16),),
    max_reg=top >> 2, max_half_reg=-1, max_const=nconst // 4 - 1, has_barrier=em.has_barrier,
    num_ssbos=sum(p[0] == "ssbo" for p in em.params), num_ibos=sum(p[0] == "ssbo" for p in em.params),
    params=params)
  _SHADERS[mc] = sh
  while len(_SHADERS) > 64: _SHADERS.pop(next(iter(_SHADERS)))
  return mc, text, sh


_SHADERS: dict[bytes, object] = {}     # the launch metadata of recently compiled machine code


def shader_for(code: bytes):
  """The Shader of machine code this process compiled recently (None if unknown): for launch helpers that get
  only `code_object` (examples.check_example), e.g. dev.launch(co, k, shader=shader_for(co), ...)."""
  return _SHADERS.get(bytes(code))


__all__ = ["compile_ir3", "shader_for", "lower", "legalize", "check", "allocate", "ARCHES", "PARAM_UBO", "check_arch"]
