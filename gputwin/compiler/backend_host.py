"""Host CPU backend: kernel IR -> LLVM IR -> llvmlite (LLVM's X86 / AArch64 targets) -> an ELF relocatable object
that gputwin.emu.host runs under unicorn (`gputwin.emu.launch(c.code_object, name, ..., arch="aarch64")`).

backend_llvm's generator with host hooks: the body is an internal function `NAME.body(params..., ptr %.ids)` whose
ids are loads from a 12 x i32 record (work-item id, workgroup id, workgroup size, workgroup count: x, y, z each);
the exported `void NAME(ptr args, ptr dims, i64 first, i64 count)` loads the parameters from a packed argument block
(each at its natural alignment: pointers 8 bytes, bool 1), and runs work-items `first .. first + count - 1` (linear
over the grid, x fastest, dims = block x, y, z then grid x, y, z as u32, then an i64 where each work-item's index
is stored before it runs, for fault reports) one after another. A barrier is a call to
`__gputwin_barrier`, private arrays are zeroed stack slots (as in the reference), shared arrays internal globals
(the launcher gives each workgroup zeroed ones). libm calls LLVM makes (sinf, fmodf, __truncsfhf2 ...) are left
undefined: the launcher services them. The kernel's parameter layout travels in a `.gputwin.kernels` section (one
JSON line per kernel); the IR op each instruction came from, as DWARF line info (line = the op's index in
`ir.walk` order), which `-S` prints beside capstone's disassembly.
"""
from __future__ import annotations

import json

from gputwin.compiler import ir, limits
from gputwin.compiler.backend_llvm import Lowering, intr, lty, parse_ir
from gputwin.compiler.ir import Kernel, Op, Type
from gputwin.emu.host.arch import ARCHES, host_arch
from gputwin.errors import CompileError

IDS = ("workitem.id", "workgroup.id", "workgroup.size", "num_workgroups")  # the .ids record, 3 x i32 each
BARRIER = "__gputwin_barrier"


def param_layout(k: Kernel) -> tuple[list, int]:
  """[(name, IR type text, offset, size)] of the argument block, and its size."""
  out, off = [], 0
  for p in k.params:
    size = 8 if p.type.is_ptr else 1 if p.type.is_bool else p.type.nbytes
    off = -(-off // size) * size
    out.append((p.name, str(p.type), off, size))
    off += size
  return out, off


class HostLowering(Lowering):
  """backend_llvm's generator with host hooks (module, ids, barrier, alloca, math) and a DWARF line per IR op."""

  def __post_init__(self):
    super().__post_init__()
    self.line = {id(op): i + 1 for i, op in enumerate(ir.walk(self.k.body))}
    self.cur: int | None = None
    self.dbg: dict[int, int] = {}     # IR line -> metadata id of its DILocation

  def op(self, op: Op) -> None:
    saved, self.cur = self.cur, self.line.get(id(op))
    try:
      super().op(op)
    finally:
      self.cur = saved

  def emit(self, s: str) -> None:
    if self.cur is not None:
      s += f", !dbg !{self.dbg.setdefault(self.cur, 10 + len(self.dbg))}"
    super().emit(s)

  def ids(self, code: str) -> str:
    kind, d = code.rsplit(".", 1)
    g, v = self.tmp(), self.tmp()
    self.emit(f"{g} = getelementptr inbounds i32, ptr %.ids, i64 {3 * IDS.index(kind) + 'xyz'.index(d)}")
    self.emit(f"{v} = load i32, ptr {g}, align 4")
    return v

  def barrier(self) -> None:
    self.declare(f"declare void @{BARRIER}()")
    self.emit(f"call void @{BARRIER}()")

  def alloca(self, r: str, ty: str) -> list[str]:
    return [f"{r}.gen = alloca {ty}, align 16", f"store {ty} zeroinitializer, ptr {r}.gen, align 16",
            f"{r} = addrspacecast ptr {r}.gen to ptr addrspace(5)"]

  def math(self, op: Op, code: str, x: str, t: Type) -> str:
    if code != "rsqrt" and t.scalar.kind == "f" and t.scalar.bits == 64:   # libm has the f64 functions
      return self.call(lty(t), intr(code, t), [(lty(t), x)])
    if code == "rsqrt" and t.scalar.kind == "bf":   # one bf16 rounding, of the f32 1/sqrt (as the reference)
      f32 = ir.f32.vec(t.lanes)
      return self.cast(super().math(op, code, self.cast(x, t, f32), f32), f32, t)
    return super().math(op, code, x, t)

  def module(self, ps: list[str]) -> str:
    k, name = self.k, self.k.name
    layout, size = param_layout(k)
    meta = json.dumps({"kernel": name, "params": layout, "args_size": size, "private": _bytes(k, "alloca"),
                       "shared": _bytes(k, "shared"), "barrier": any(op.opcode == "barrier" for op in k.walk())})
    meta = meta.encode() + b"\n"
    esc = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}" for c in meta)
    body = [f'define internal void @"{name}.body"({", ".join(ps + ["ptr %.ids"])}) !dbg !4 {{'] + self.lines + ["}"]
    return "\n".join([f'target triple = "{host_arch(self.arch).triple}"', ""] + self.globals + [
      f'@"gputwin.kernel.{name}" = internal constant [{len(meta)} x i8] c"{esc}", section ".gputwin.kernels", align 1',
      f'@llvm.used = appending global [1 x ptr] [ptr @"gputwin.kernel.{name}"], section "llvm.metadata"', ""] +
      body + [""] + self.entry(layout) + [""] + sorted(self.decls) + [""] + self.debug_info())

  def entry(self, layout) -> list[str]:
    """`void NAME(ptr args, ptr dims, i64 first, i64 count)`: the work-item loop around the body."""
    name = self.k.name
    L = [f'define void @"{name}"(ptr %.args, ptr %.dims, i64 %.first, i64 %.count) {{', "entry:"]
    call = []
    for i, (p, (_, _, off, _)) in enumerate(zip(self.k.params, layout)):
      t = lty(p.type)
      L.append(f"  %a{i}.p = getelementptr inbounds i8, ptr %.args, i64 {off}")
      if p.type.is_bool:
        L += [f"  %a{i}.b = load i8, ptr %a{i}.p, align 1", f"  %a{i} = trunc i8 %a{i}.b to i1"]
      else:
        L.append(f"  %a{i} = load {t}, ptr %a{i}.p, align 1")
      call.append(f"{t} %a{i}")
    ids = ("lx", "ly", "lz", "wx", "wy", "wz")    # work-item id, workgroup id: x, y, z
    L.append("  %ids = alloca [12 x i32], align 4")
    for j, d in enumerate(("bx", "by", "bz", "gx", "gy", "gz")):   # sizes: stored once
      L += [f"  %{d}.p = getelementptr inbounds i32, ptr %.dims, i64 {j}", f"  %{d} = load i32, ptr %{d}.p",
            f"  %{d}.q = getelementptr inbounds i32, ptr %ids, i64 {6 + j}", f"  store i32 %{d}, ptr %{d}.q",
            f"  %{d}.64 = zext i32 %{d} to i64"]
    # the first work-item's ids by division, the next ones by counting up with carries (x fastest)
    L += ["  %bxy = mul i64 %bx.64, %by.64", "  %n = mul i64 %bxy, %bz.64", "  %g = udiv i64 %.first, %n",
          "  %l = urem i64 %.first, %n", "  %lx.0 = urem i64 %l, %bx.64", "  %l2 = udiv i64 %l, %bx.64",
          "  %ly.0 = urem i64 %l2, %by.64", "  %lz.0 = udiv i64 %l2, %by.64", "  %wx.0 = urem i64 %g, %gx.64",
          "  %g2 = udiv i64 %g, %gx.64", "  %wy.0 = urem i64 %g2, %gy.64", "  %wz.0 = udiv i64 %g2, %gy.64",
          "  %end = add i64 %.first, %.count"]
    L += [f"  %{v}.i = trunc i64 %{v}.0 to i32" for v in ids] + ["  br label %loop", "loop:",
          "  %t = phi i64 [ %.first, %entry ], [ %t1, %loop ]"]
    L += [f"  %{v} = phi i32 [ %{v}.i, %entry ], [ %{v}.n, %loop ]" for v in ids]
    L += ["  %cur = getelementptr inbounds i64, ptr %.dims, i64 3", "  store volatile i64 %t, ptr %cur"]
    for j, v in enumerate(ids):
      L += [f"  %{v}.q = getelementptr inbounds i32, ptr %ids, i64 {j}", f"  store i32 %{v}, ptr %{v}.q"]
    L += [f'  call void @"{name}.body"({", ".join(call + ["ptr %ids"])})', "  %t1 = add i64 %t, 1"]
    carry = "true"
    for v, d in zip(ids, ("bx", "by", "bz", "gx", "gy", "gz")):
      L += [f"  %{v}.c = zext i1 {carry} to i32", f"  %{v}.a = add i32 %{v}, %{v}.c",
            f"  %{v}.w = icmp eq i32 %{v}.a, %{d}", f"  %{v}.n = select i1 %{v}.w, i32 0, i32 %{v}.a"]
      carry = f"%{v}.w"
    L += ["  %more = icmp ult i64 %t1, %end", "  br i1 %more, label %loop, label %done", "done:", "  ret void", "}"]
    return L

  def debug_info(self) -> list[str]:
    name = self.k.name
    return ["!llvm.dbg.cu = !{!0}", "!llvm.module.flags = !{!1, !2}",
            '!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !3, producer: "gputwin", isOptimized: true, '
            "runtimeVersion: 0, emissionKind: LineTablesOnly)",
            '!1 = !{i32 2, !"Debug Info Version", i32 3}', '!2 = !{i32 7, !"Dwarf Version", i32 4}',
            f'!3 = !DIFile(filename: "{name}.ir", directory: ".")',
            f'!4 = distinct !DISubprogram(name: "{name}", scope: !3, file: !3, line: 1, type: !5, scopeLine: 1, '
            "spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0)", "!5 = !DISubroutineType(types: !6)",
            "!6 = !{}"] + [f"!{m} = !DILocation(line: {line}, scope: !4)" for line, m in self.dbg.items()]


def _bytes(k: Kernel, opcode: str) -> int:
  return sum(-(-op.attrs["count"] * op.result.type.elem.nbytes // 16) * 16 for op in k.walk() if op.opcode == opcode)


def llvm_ir(k: Kernel, arch: str) -> str:
  """The LLVM IR text for kernel `k` on host target `arch`."""
  return HostLowering(k, arch, 1).kernel()


_TM: dict = {}


def _tm(arch: str):
  import llvmlite.binding as llvm
  if arch not in _TM:
    llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
    a = host_arch(arch)
    _TM[arch] = llvm.Target.from_triple(a.triple).create_target_machine(cpu=a.cpu, opt=2, reloc="pic",
                                                                        codemodel="small")
  return _TM[arch]


def compile_host(k: Kernel, arch: str) -> tuple[bytes, str, str]:
  """Kernel IR (optimised) -> (ELF relocatable object, capstone listing with IR lines, LLVM IR text)."""
  from gputwin.emu.host.disasm import listing
  if arch not in ARCHES:
    raise CompileError(f"unknown host target {arch!r} (known: {', '.join(ARCHES)})")
  limits.check(k, arch)
  text = llvm_ir(k, arch)
  tm = _tm(arch)
  obj = tm.emit_object(parse_ir(text, tm, k, arch, "host backend"))
  ops = [ir.print_op(op).splitlines()[0].strip() for op in ir.walk(k.body)]
  return obj, listing(obj, arch, lines={i + 1: s for i, s in enumerate(ops)}), text


__all__ = ["compile_host", "llvm_ir", "param_layout"]
