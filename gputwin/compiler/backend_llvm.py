"""LLVM backend: kernel IR -> LLVM IR text -> llvmlite (LLVM's AMDGPU target) -> AMD HSA code object.

Structured `if`/`for` become basic blocks with phis. Everything LLVM leaves undefined is made defined here so
the result matches the host reference: division by zero (-> 0) and INT_MIN / -1 (-> wraps), shift amounts
(masked), float -> int casts (llvm.fpto[su]i.sat). Work-group sizes and counts come from the code object v5
implicit kernel arguments (hidden_block_count_*, hidden_group_size_*), as clang's HIP does.

`Lowering` is target-neutral except for a few hooks a subclass (a target flavour) overrides: `module` (triple,
calling convention, attributes), `ids`, `math`, `barrier`, `scope` (atomic syncscope) and `alloca`.
backend_nvptx.py's NVPTX flavour reuses everything else (address spaces 1/3/5 are global/shared/local on both).
"""
from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gputwin.compiler import ir
from gputwin.compiler.ir import Block, Kernel, Op, Type, Value
from gputwin.errors import CompileError

_SPACE = {"global": 1, "local": 3, "private": 5}


def lty(t: Type) -> str:
  if t.is_ptr: return f"ptr addrspace({_SPACE[t.space]})"
  s = t.scalar
  base = "i1" if s.is_bool else f"i{s.bits}" if s.is_int else "bfloat" if s.kind == "bf" else \
    {16: "half", 32: "float", 64: "double"}[s.bits]
  return f"<{t.lanes} x {base}>" if t.is_vec else base


def _flit(v: float, t: Type) -> str:
  if t.kind == "bf":
    return f"0xR{struct.unpack('<I', struct.pack('<f', v))[0] >> 16:04X}"
  if t.bits == 16:
    import numpy as np
    return f"0xH{int(np.array([v], np.float16).view(np.uint16)[0]):04X}"
  return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


def intr(name: str, t: Type) -> str:
  """Overloaded intrinsic suffix: llvm.smin.i32, llvm.sqrt.v4f32 ..."""
  s = t.scalar
  sfx = (f"i{s.bits}" if s.is_int else "bf16" if s.kind == "bf" else f"f{s.bits}")
  return f"llvm.{name}.{f'v{t.lanes}' if t.is_vec else ''}{sfx}"


@dataclass
class Lowering:
  k: Kernel
  arch: str
  wave: int

  def __post_init__(self):
    self.lines: list[str] = []
    self.decls: set[str] = set()
    self.globals: list[str] = []
    self.n = 0
    self.label = ".entry"
    self.names: dict[int, str] = {}
    self.allocas: list[str] = []

  def tmp(self) -> str:
    self.n += 1
    return f"%.t{self.n}"    # a leading dot: never a Python identifier, so never a parameter's name

  def v(self, x: Value) -> str: return self.names[id(x)]

  def bind(self, x: Value, s: str) -> None: self.names[id(x)] = s

  def emit(self, s: str) -> None: self.lines.append("  " + s)

  def block(self, label: str) -> None:
    self.lines.append(f"{label}:")
    self.label = label

  def new_label(self, hint: str) -> str:
    self.n += 1
    return f".{hint}{self.n}"

  def declare(self, s: str) -> None: self.decls.add(s)

  def call(self, ret: str, name: str, args: list[tuple[str, str]]) -> str:
    self.declare(f"declare {ret} @{name}({', '.join(t for t, _ in args)})")
    r = self.tmp()
    self.emit(f"{r} = call {ret} @{name}({', '.join(f'{t} {a}' for t, a in args)})")
    return r

  def splat(self, t: Type, scalar: str) -> str:
    """A constant operand of type t (scalar or vector splat) from a scalar literal string."""
    return f"<{', '.join(f'{lty(t.scalar)} {scalar}' for _ in range(t.lanes))}>" if t.is_vec else scalar

  # -- kernel ------------------------------------------------------------------------------------------------------
  def kernel(self) -> str:
    ps = []
    for p in self.k.params:
      nm = f"%{p.name}"          # the argument's name reaches the code object metadata (.args[].name)
      self.bind(p, nm)
      ps.append(f"{lty(p.type)} {nm}")
    self.block(".entry")
    body_start = len(self.lines)
    self.region(self.k.body)
    self.emit("ret void")
    self.lines[body_start:body_start] = ["  " + a for a in self.allocas]
    return self.module(ps)

  # -- target hooks (AMDGPU here; backend_nvptx.py overrides them) -------------------------------------------------
  def module(self, ps: list[str]) -> str:
    """The module text around the generated body: triple, globals, the kernel's signature, declarations."""
    feats = "+wavefrontsize32" if self.wave == 32 else "+wavefrontsize64"
    head = [f'target triple = "amdgcn-amd-amdhsa"', ""] + self.globals + [""]
    return "\n".join(head + [f"define amdgpu_kernel void @{self.k.name}({', '.join(ps)}) #0 {{"] + self.lines +
                     ["}", ""] + sorted(self.decls) +
                     [f'attributes #0 = {{ "amdgpu-flat-work-group-size"="1,1024" "target-cpu"="{self.arch}" '
                      f'"target-features"="{feats}" }}', ""])

  def region(self, b: Block) -> list[str]:
    for op in b.ops:
      if op.opcode == "yield": return [self.v(x) for x in op.operands]
      self.op(op)
    return []

  def op(self, op: Op) -> None:
    cls, code = ir.op_class(op), op.opcode
    a = [self.v(x) for x in op.operands]
    ts = [x.type for x in op.operands]
    t = op.results[0].type if op.results else None
    r = None
    if cls == "const":
      val = op.attrs["value"]
      lit = ("true" if val else "false") if t.is_bool else str(val) if t.is_int else _flit(val, t)
      r = self.tmp()
      # materialise through an identity so the constant has a name (keeps the generator uniform)
      self.emit(f"{r} = {'or' if not t.is_float else 'fadd'} {lty(t)} {lit}, "
                f"{('false' if t.is_bool else '0') if not t.is_float else _flit(-0.0, t)}")
    elif cls == "id": r = self.ids(code)
    elif cls == "binary": r = self.binary(code, a[0], a[1], t)
    elif cls == "cmp":
      s = ts[0].scalar
      pred = ({"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"} if s.is_float else
              {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"} if s.is_signed else
              {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"})[code]
      r = self.tmp()
      self.emit(f"{r} = {'fcmp' if s.is_float else 'icmp'} {pred} {lty(ts[0])} {a[0]}, {a[1]}")
    elif cls == "unary":
      r = self.tmp()
      if code == "neg":
        self.emit(f"{r} = fneg {lty(t)} {a[0]}" if t.scalar.is_float else f"{r} = sub {lty(t)} {self.splat(t, '0')}, "
                                                                             f"{a[0]}")
      elif code == "not":
        self.emit(f"{r} = xor {lty(t)} {a[0]}, {self.splat(t, 'true' if t.scalar.is_bool else '-1')}")
      else:
        r = self.call(lty(t), intr("fabs", t), [(lty(t), a[0])]) if t.scalar.is_float else \
          self.call(lty(t), intr("abs", t), [(lty(t), a[0]), ("i1", "false")])
    elif cls == "math": r = self.math(op, code, a[0], t)
    elif cls == "fma": r = self.call(lty(t), intr("fma", t), [(lty(t), x) for x in a])
    elif cls == "select":
      r = self.tmp()
      self.emit(f"{r} = select {lty(ts[0])} {a[0]}, {lty(t)} {a[1]}, {lty(t)} {a[2]}")
    elif code == "cast": r = self.cast(a[0], ts[0], t)
    elif code == "bitcast":
      r = self.tmp()
      self.emit(f"{r} = bitcast {lty(ts[0])} {a[0]} to {lty(t)}")
    elif cls == "vector":
      cur = "poison"
      for i, x in enumerate(a):
        r = self.tmp()
        self.emit(f"{r} = insertelement {lty(t)} {cur}, {lty(t.scalar)} {x}, i32 {i}")
        cur = r
    elif cls == "extract":
      r = self.tmp()
      self.emit(f"{r} = extractelement {lty(ts[0])} {a[0]}, i32 {op.attrs['lane']}")
    elif cls == "alloc":
      n, et = op.attrs["count"], lty(t.elem)
      if code == "shared":
        g = f"@lds.{op.result.name}"
        self.globals.append(f"{g} = internal addrspace(3) global [{n} x {et}] poison, align 16")
        r = g
      else:
        r = f"%.priv.{op.result.name}"
        self.allocas += self.alloca(r, f"[{n} x {et}]")
    elif cls in ("load", "store", "atomic"): r = self.memory(op, a, ts, t)
    elif cls == "barrier": self.barrier()
    elif code == "if": self.if_(op, a)
    elif code == "for": self.for_(op, a)
    else: raise CompileError(f"LLVM backend: no lowering for {code}", loc=op.loc)
    if r is not None and op.results and code not in ("if", "for"): self.bind(op.result, r)

  def math(self, op: Op, code: str, x: str, t: Type) -> str:
    if t.scalar.kind == "f" and t.scalar.bits == 64 and code in ("exp", "exp2", "log", "log2", "sin", "cos"):
      # LLVM's AMDGPU target has no f64 transcendentals (ROCm-Device-Libs provides them) and aborts on them
      raise CompileError(f"f64 {code} is not supported (no AMD instruction; compute in f32 and cast)", loc=op.loc)
    if code == "rsqrt":
      s = self.call(lty(t), intr("sqrt", t), [(lty(t), x)])
      r = self.tmp()
      self.emit(f"{r} = fdiv {lty(t)} {self.splat(t, _flit(1.0, t.scalar))}, {s}")
      return r
    return self.call(lty(t), intr(code, t), [(lty(t), x)])

  def alloca(self, r: str, ty: str) -> list[str]:
    """Entry-block lines defining `r`, a `ptr addrspace(5)` to a private array of LLVM type `ty`."""
    return [f"{r} = alloca {ty}, align 16, addrspace(5)"]

  def barrier(self) -> None:
    self.emit('fence syncscope("workgroup") release')
    self.call("void", "llvm.amdgcn.s.barrier", [])
    self.lines[-1] = "  call void @llvm.amdgcn.s.barrier()"
    self.emit('fence syncscope("workgroup") acquire')

  def scope(self, pt: Type) -> str:
    """The syncscope of an atomic through a pointer of type pt."""
    return "agent" if pt.space == "global" else "workgroup"

  def ids(self, code: str) -> str:
    kind, d = code.rsplit(".", 1)
    if kind in ("workitem.id", "workgroup.id"):
      return self.call("i32", f"llvm.amdgcn.{kind}.{d}", [])
    base = self.call("ptr addrspace(4)", "llvm.amdgcn.implicitarg.ptr", [])
    i = "xyz".index(d)
    off, w = (12 + 2 * i, 16) if kind == "workgroup.size" else (4 * i, 32)
    g, v = self.tmp(), self.tmp()
    self.emit(f"{g} = getelementptr i8, ptr addrspace(4) {base}, i64 {off}")
    self.emit(f"{v} = load i{w}, ptr addrspace(4) {g}, align {w // 8}")
    if w == 32: return v
    r = self.tmp()
    self.emit(f"{r} = zext i16 {v} to i32")
    return r

  def binary(self, code: str, x: str, y: str, t: Type) -> str:
    s, T = t.scalar, lty(t)
    r = self.tmp()
    if s.is_float:
      if code in ("min", "max"): return self.call(T, intr(f"{code}num", t), [(T, x), (T, y)])
      if code == "rem" and s.kind == "bf":   # no bf16 frem in LLVM's AMDGPU target: in f32, as the reference
        f32 = ir.f32.vec(t.lanes)
        return self.cast(self.binary("rem", self.cast(x, t, f32), self.cast(y, t, f32), f32), f32, t)
      self.emit(f"{r} = {dict(add='fadd', sub='fsub', mul='fmul', div='fdiv', rem='frem')[code]} {T} {x}, {y}")
      return r
    if code in ("min", "max"):
      return self.call(T, intr(("s" if s.is_signed else "u") + code, t), [(T, x), (T, y)])
    if code in ("shl", "shr"):
      m = self.tmp()
      self.emit(f"{m} = and {T} {y}, {self.splat(t, str(s.bits - 1))}")
      self.emit(f"{r} = {'shl' if code == 'shl' else 'ashr' if s.is_signed else 'lshr'} {T} {x}, {m}")
      return r
    if code in ("div", "rem"):  # defined results where LLVM has UB: x/0 -> 0, INT_MIN/-1 -> wraps
      z, bad, safe, q = self.tmp(), self.tmp(), self.tmp(), self.tmp()
      C = lambda v: self.splat(t, v)
      cmpt = lty(ir.boolean.vec(t.lanes))
      self.emit(f"{z} = icmp eq {T} {y}, {C('0')}")
      if s.is_signed:
        m1, zm = self.tmp(), self.tmp()
        self.emit(f"{m1} = icmp eq {T} {y}, {C('-1')}")
        self.emit(f"{zm} = or {cmpt} {z}, {m1}")
        self.emit(f"{safe} = select {cmpt} {zm}, {T} {C('1')}, {T} {y}")
        self.emit(f"{q} = {'sdiv' if code == 'div' else 'srem'} {T} {x}, {safe}")
        if code == "div":
          ng, q2 = self.tmp(), self.tmp()
          self.emit(f"{ng} = sub {T} {C('0')}, {x}")
          self.emit(f"{q2} = select {cmpt} {m1}, {T} {ng}, {T} {q}")
          q = q2
        else:
          q2 = self.tmp()
          self.emit(f"{q2} = select {cmpt} {m1}, {T} {C('0')}, {T} {q}")
          q = q2
      else:
        self.emit(f"{safe} = select {cmpt} {z}, {T} {C('1')}, {T} {y}")
        self.emit(f"{q} = {'udiv' if code == 'div' else 'urem'} {T} {x}, {safe}")
      self.emit(f"{r} = select {cmpt} {z}, {T} {C('0')}, {T} {q}")
      return r
    op = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or", "xor": "xor"}[code]
    self.emit(f"{r} = {op} {T} {x}, {y}")
    return r

  def cast(self, x: str, src: Type, dst: Type) -> str:
    s, d = src.scalar, dst.scalar
    S, D = lty(src), lty(dst)
    r = self.tmp()
    if d.is_bool:
      self.emit(f"{r} = {'fcmp une' if s.is_float else 'icmp ne'} {S} {x}, "
                f"{self.splat(src, _flit(0.0, s) if s.is_float else 'false' if s.is_bool else '0')}")
    elif s.is_bool: self.emit(f"{r} = {'uitofp' if d.is_float else 'zext'} {S} {x} to {D}")
    elif s.is_int and d.is_int:
      kind = "trunc" if d.bits < s.bits else "sext" if d.bits > s.bits and s.is_signed else \
        "zext" if d.bits > s.bits else "bitcast"
      if kind == "bitcast": return x
      self.emit(f"{r} = {kind} {S} {x} to {D}")
    elif s.is_int and d.is_float:
      if d.kind == "bf":  # via f32, as the reference does
        f = self.cast(x, src, ir.f32.vec(src.lanes))
        return self.cast(f, ir.f32.vec(src.lanes), dst)
      self.emit(f"{r} = {'sitofp' if s.is_signed else 'uitofp'} {S} {x} to {D}")
    elif s.is_float and d.is_int:
      return self.call(D, f"llvm.fpto{'s' if d.is_signed else 'u'}i.sat.{intr('x', dst)[7:]}."
                          f"{intr('x', src)[7:]}", [(S, x)])
    else:
      kind = "fpext" if d.bits > s.bits else "fptrunc" if d.bits < s.bits else None
      if kind is None:  # f16 <-> bf16: through f32
        f = self.cast(x, src, ir.f32.vec(src.lanes))
        return self.cast(f, ir.f32.vec(src.lanes), dst)
      self.emit(f"{r} = {kind} {S} {x} to {D}")
    return r

  def address(self, p: str, pt: Type, idx: str, it: Type) -> str:
    i64 = self.tmp()
    self.emit(f"{i64} = {'sext' if it.is_signed else 'zext'} {lty(it)} {idx} to i64" if it.bits < 64 else
              f"{i64} = add i64 {idx}, 0")
    g = self.tmp()
    self.emit(f"{g} = getelementptr {lty(pt.elem)}, {lty(pt)} {p}, i64 {i64}")
    return g

  def memory(self, op: Op, a: list[str], ts: list[Type], t: Type | None) -> str | None:
    pt = ts[0]
    g = self.address(a[0], pt, a[1], ts[1])
    if op.opcode == "load":
      r = self.tmp()
      self.emit(f"{r} = load {lty(t)}, {lty(pt)} {g}, align {t.nbytes if t.is_vec else pt.elem.nbytes}")
      return r
    vt = ts[2]
    if op.opcode == "store":
      self.emit(f"store {lty(vt)} {a[2]}, {lty(pt)} {g}, align {vt.nbytes if vt.is_vec else pt.elem.nbytes}")
      return None
    kind = op.opcode.split(".")[1]
    rmw = {"add": "fadd" if vt.is_float else "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
           "xchg": "xchg", "min": "min" if vt.is_signed else "umin", "max": "max" if vt.is_signed else "umax"}[kind]
    scope = self.scope(pt)
    r = self.tmp()
    self.emit(f'{r} = atomicrmw {rmw} {lty(pt)} {g}, {lty(vt)} {a[2]} syncscope("{scope}") monotonic, '
              f'align {vt.nbytes}')
    return r

  def if_(self, op: Op, a: list[str]) -> None:
    lt, le, lm = self.new_label("then"), self.new_label("else"), self.new_label("endif")
    self.emit(f"br i1 {a[0]}, label %{lt}, label %{le}")
    self.block(lt)
    yt = self.region(op.regions[0])
    self.emit(f"br label %{lm}")
    from_t = self.label
    self.block(le)
    ye = self.region(op.regions[1])
    self.emit(f"br label %{lm}")
    from_e = self.label
    self.block(lm)
    for r, x, y in zip(op.results, yt, ye):
      nm = self.tmp()
      self.emit(f"{nm} = phi {lty(r.type)} [ {x}, %{from_t} ], [ {y}, %{from_e} ]")
      self.bind(r, nm)

  def for_(self, op: Op, a: list[str]) -> None:
    body = op.regions[0]
    T = lty(body.args[0].type)
    pre, hdr, lb, exit_ = self.label, self.new_label("loop"), self.new_label("body"), self.new_label("endloop")
    self.emit(f"br label %{hdr}")
    self.block(hdr)
    phis = [self.tmp() for _ in body.args]
    at = len(self.lines)
    cond = self.tmp()
    signed = body.args[0].type.is_signed
    self.emit(f"{cond} = icmp {'slt' if signed else 'ult'} {T} {phis[0]}, {a[1]}")
    self.emit(f"br i1 {cond}, label %{lb}, label %{exit_}")
    for arg, p in zip(body.args, phis): self.bind(arg, p)
    self.block(lb)
    ys = self.region(body)
    nxt, wrapped, go = self.tmp(), self.tmp(), self.tmp()
    self.emit(f"{nxt} = add {T} {phis[0]}, {a[2]}")
    # an induction variable that wraps past the type's maximum ends the loop (as in the reference)
    self.emit(f"{wrapped} = icmp {'slt' if signed else 'ult'} {T} {nxt}, {a[0]}")
    latch = self.label
    self.emit(f"br i1 {wrapped}, label %{exit_}, label %{hdr}")
    inc = [nxt] + ys
    self.lines[at:at] = [f"  {p} = phi {lty(x.type)} [ {init}, %{pre} ], [ {n}, %{latch} ]"
                         for p, x, init, n in zip(phis, body.args, [a[0]] + a[3:], inc)]
    self.block(exit_)
    for i, r in enumerate(op.results):
      nm = self.tmp()
      self.emit(f"{nm} = phi {lty(r.type)} [ {phis[i + 1]}, %{hdr} ], [ {ys[i]}, %{latch} ]")
      self.bind(r, nm)


def llvm_ir(k: Kernel, arch: str, wave: int | None = None) -> str:
  """The LLVM IR text for kernel `k` on `arch`."""
  from gputwin.isa.targets import target
  return Lowering(k, arch, wave or target(arch).wave).kernel()


def parse_ir(text: str, tm, k: Kernel, arch: str, what: str = "LLVM backend"):
  """The verified module of generated LLVM IR text with `tm`'s data layout (without it AMDGPU instruction selection
  fails on divergent branches); LLVM rejecting it (a generator bug) is a CompileError naming the kernel."""
  import llvmlite.binding as llvm
  try:
    mod = llvm.parse_assembly(text)
    mod.verify()
  except RuntimeError as e:
    raise CompileError(f"{what} produced invalid LLVM IR for @{k.name} ({arch}): {e}", loc=k.loc, arch=arch) from None
  mod.data_layout = str(tm.target_data)
  return mod


_INIT = False


def _tm(arch: str, wave: int):
  global _INIT
  import llvmlite.binding as llvm
  if not _INIT:
    llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
    _INIT = True
  return llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(
    cpu=arch, features="+wavefrontsize32" if wave == 32 else "+wavefrontsize64", opt=2, reloc="pic")


def compile_llvm(k: Kernel, arch: str, *, wave: int | None = None, link: bool = True) -> tuple[bytes, str, str]:
  """-> (code object bytes, assembly text, LLVM IR text). The object is linked with ld.lld-22 when available
  (a loadable .hsaco); otherwise the relocatable object, which gputwin.isa.codeobj also loads."""
  from gputwin.isa.targets import target
  from gputwin.compiler import limits
  wave = wave or target(arch).wave
  limits.check(k, arch)     # LLVM reports these by exiting the process
  text = llvm_ir(k, arch, wave)
  tm = _tm(arch, wave)
  # code generation rewrites the module in place (control-flow annotation), so each emission gets a fresh parse
  asm = tm.emit_assembly(parse_ir(text, tm, k, arch))
  obj = tm.emit_object(parse_ir(text, tm, k, arch))
  lld = shutil.which("ld.lld-22") or shutil.which("ld.lld")
  if link and lld:
    with tempfile.TemporaryDirectory() as d:
      o, co = Path(d) / "k.o", Path(d) / "k.co"
      o.write_bytes(obj)
      p = subprocess.run([lld, "-shared", "--no-undefined", "-o", str(co), str(o)], capture_output=True, text=True)
      if p.returncode == 0: return co.read_bytes(), asm, text
  return obj, asm, text
