"""LLVM PTX backend: kernel IR -> LLVM IR -> llvmlite (LLVM's NVPTX target) -> PTX text for sm_80 / sm_90.

The IR is first lowered like the direct PTX backend's (backend_ptx.lower: f16/bf16 arithmetic in f32, exp/log/sin/
cos range reduction), then backend_llvm's generator writes LLVM IR with this file's target hooks: the `ptx_kernel`
calling convention, ids from `llvm.nvvm.read.ptx.sreg.{tid,ctaid,ntid,nctaid}`, the barrier as
`llvm.nvvm.barrier.cta.sync.all(0)` (PTX `barrier.sync 0`), exp2/log2/sin/cos as the `llvm.nvvm.*.approx.f`
intrinsics (NVPTX selects none of llvm.exp2/llvm.sin; it aborts), atomics at `device`/`block` scope. The generator
already gives x/0, INT_MIN/-1, oversized shifts and float->int casts the reference's meaning; `fdiv`/`llvm.sqrt`
become `div.rn`/`sqrt.rn` (NVPTX's defaults) and nothing is contracted (no fast-math flags).

A barrier under control flow that depends on the thread (`backend_ptx.varying`) would be left divergent by LLVM,
which deadlocks or is undefined on NVIDIA hardware; such regions are predicated as in the direct backend: both
sides of an `if` are emitted in line under an i1 mask (loads, stores, atomics and barrier-free nested control flow
branch around on it; results are selected), and a `for` runs while any thread of the CTA is active
(`llvm.nvvm.barrier.cta.red.or.all`, PTX `barrier.red.or.pred`).
"""
from __future__ import annotations

from gputwin.compiler import ir
from gputwin.compiler.backend_llvm import Lowering, lty, parse_ir
from gputwin.compiler import limits
from gputwin.compiler.backend_ptx import PTX_VERSION, has_barrier, check_arch, lower, varying
from gputwin.compiler.ir import Kernel, Op, Type
from gputwin.errors import CompileError

TRIPLE = "nvptx64-nvidia-cuda"
_SREG = {"workitem.id": "tid", "workgroup.id": "ctaid", "workgroup.size": "ntid", "num_workgroups": "nctaid"}
_APPROX = {"exp2": "ex2", "log2": "lg2", "sin": "sin", "cos": "cos"}


class NVLowering(Lowering):
  """backend_llvm's generator with NVPTX's hooks."""

  def module(self, ps: list[str]) -> str:
    head = [f'target triple = "{TRIPLE}"', ""] + self.globals + [""]
    return "\n".join(head + [f"define ptx_kernel void @{self.k.name}({', '.join(ps)}) {{"] + self.lines +
                     ["}", ""] + sorted(self.decls) + [""])

  def __post_init__(self):
    super().__post_init__()
    self.mask: str | None = None     # i1: the threads active in a predicated (barrier-holding, divergent) region
    self.var = varying(self.k)

  def op(self, op: Op) -> None:
    try:
      cls = ir.op_class(op)
      ctl = op.operands[:1] if cls == "if" else op.operands[:3]
      if self.mask and (cls in ("load", "store", "atomic") or cls in ("if", "for") and not has_barrier(op)):
        self.guarded(op)
      elif cls in ("if", "for") and has_barrier(op) and (self.mask or any(id(v) in self.var for v in ctl)):
        (self.if_masked if cls == "if" else self.for_masked)(op)
      else: super().op(op)
    except CompileError as e:   # name the op's source line and the target
      if e.loc is None or not e.arch:
        raise CompileError(e.msg, loc=e.loc or op.loc, arch=self.arch, kernel=self.k.name) from None
      raise

  # -- predicated regions ------------------------------------------------------------------------------------------
  def guarded(self, op: Op) -> None:
    """`op` only for the threads in the mask: a branch around it; its results are zero for the others."""
    do, join, pre = self.new_label("do"), self.new_label("join"), self.label
    self.emit(f"br i1 {self.mask}, label %{do}, label %{join}")
    self.block(do)
    saved, self.mask = self.mask, None
    self.op(op)
    self.mask = saved
    end = self.label
    self.emit(f"br label %{join}")
    self.block(join)
    for r in op.results:
      phi = self.tmp()
      self.emit(f"{phi} = phi {lty(r.type)} [ {self.v(r)}, %{end} ], [ zeroinitializer, %{pre} ]")
      self.bind(r, phi)

  def and_mask(self, c: str) -> str:
    if self.mask is None: return c
    r = self.tmp()
    self.emit(f"{r} = and i1 {self.mask}, {c}")
    return r

  def if_masked(self, op: Op) -> None:
    c, saved = self.v(op.operands[0]), self.mask
    nc = self.tmp()
    self.emit(f"{nc} = xor i1 {c}, true")
    mt, me = self.and_mask(c), self.and_mask(nc)
    self.mask = mt
    yt = self.region(op.regions[0])
    self.mask = me
    ye = self.region(op.regions[1])
    self.mask = saved
    for r, x, y in zip(op.results, yt, ye):
      nm = self.tmp()
      self.emit(f"{nm} = select i1 {c}, {lty(r.type)} {x}, {lty(r.type)} {y}")
      self.bind(r, nm)

  def for_masked(self, op: Op) -> None:
    body = op.regions[0]
    a = [self.v(x) for x in op.operands]
    it = body.args[0].type
    T, lt, ge = lty(it), "slt" if it.is_signed else "ult", "sge" if it.is_signed else "uge"
    act0 = self.tmp()
    self.emit(f"{act0} = icmp {lt} {T} {a[0]}, {a[1]}")
    act0 = self.and_mask(act0)
    pre, hdr, lb, exit_ = self.label, self.new_label("loop"), self.new_label("body"), self.new_label("endloop")
    self.emit(f"br label %{hdr}")
    self.block(hdr)
    phis, act = [self.tmp() for _ in body.args], self.tmp()
    at = len(self.lines)
    anyp = self.call("i1", "llvm.nvvm.barrier.cta.red.or.all", [("i32", "0"), ("i1", act)])
    self.emit(f"br i1 {anyp}, label %{lb}, label %{exit_}")
    for arg, p in zip(body.args, phis): self.bind(arg, p)
    self.block(lb)
    saved, self.mask = self.mask, act
    ys = self.region(body)
    self.mask = saved
    nxt = [self.tmp() for _ in range(6)]
    self.emit(f"{nxt[0]} = add {T} {phis[0]}, {a[2]}")
    self.emit(f"{nxt[1]} = select i1 {act}, {T} {nxt[0]}, {T} {phis[0]}")
    self.emit(f"{nxt[2]} = icmp {lt} {T} {nxt[1]}, {a[1]}")
    self.emit(f"{nxt[3]} = icmp {ge} {T} {nxt[1]}, {a[0]}")   # wrapped past the type's maximum: done
    self.emit(f"{nxt[4]} = and i1 {nxt[2]}, {nxt[3]}")
    self.emit(f"{nxt[5]} = and i1 {act}, {nxt[4]}")
    carried = []
    for x, y, p in zip(body.args[1:], ys, phis[1:]):
      c = self.tmp()
      self.emit(f"{c} = select i1 {act}, {lty(x.type)} {y}, {lty(x.type)} {p}")
      carried.append(c)
    latch = self.label
    self.emit(f"br label %{hdr}")
    self.lines[at:at] = [f"  {p} = phi {lty(x.type)} [ {init}, %{pre} ], [ {n}, %{latch} ]" for p, x, init, n in
                         zip(phis, body.args, [a[0]] + a[3:], [nxt[1]] + carried)] + \
                        [f"  {act} = phi i1 [ {act0}, %{pre} ], [ {nxt[5]}, %{latch} ]"]
    self.block(exit_)
    for r, p in zip(op.results, phis[1:]): self.bind(r, p)

  def ids(self, code: str) -> str:
    kind, d = code.rsplit(".", 1)
    return self.call("i32", f"llvm.nvvm.read.ptx.sreg.{_SREG[kind]}.{d}", [])

  def math(self, op: Op, code: str, x: str, t: Type) -> str:
    s = t.scalar
    if code in _APPROX:
      if s.bits != 32 or t.is_vec:
        raise CompileError(f"{t} {code} is not supported on PTX (no f64 {code} instruction; compute in f32 and cast)",
                           loc=op.loc)
      return self.call("float", f"llvm.nvvm.{_APPROX[code]}.approx.f", [("float", x)])
    return super().math(op, code, x, t)

  def alloca(self, r: str, ty: str) -> list[str]:
    # NVPTX allocates in the generic space (its data layout has no alloca address space); cast to .local
    return [f"{r}.gen = alloca {ty}, align 16", f"{r} = addrspacecast ptr {r}.gen to ptr addrspace(5)"]

  def barrier(self) -> None:
    self.declare("declare void @llvm.nvvm.barrier.cta.sync.all(i32)")
    self.emit("call void @llvm.nvvm.barrier.cta.sync.all(i32 0)")

  def scope(self, pt: Type) -> str:
    return "device" if pt.space == "global" else "block"


_INIT = False


def _tm(arch: str):
  global _INIT
  import llvmlite.binding as llvm
  if not _INIT:
    llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
    _INIT = True
  return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=f"+ptx{PTX_VERSION.replace('.', '')}",
                                                                opt=2)


def llvm_ir(k: Kernel, arch: str) -> str:
  """The LLVM IR text for kernel `k` (already lowered) on `arch`."""
  return NVLowering(k, arch, 32).kernel()


def compile_nvptx(k: Kernel, arch: str) -> tuple[str, str]:
  """Kernel IR (optimised, target-neutral) -> (PTX text, LLVM IR text)."""
  check_arch(arch)
  limits.check(k, arch)
  text = llvm_ir(lower(k), arch)
  tm = _tm(arch)
  return tm.emit_assembly(parse_ir(text, tm, k, arch, "LLVM PTX backend")), text


__all__ = ["compile_nvptx", "llvm_ir", "TRIPLE"]
