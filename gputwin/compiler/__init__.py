"""gputwin.compiler: kernel IR, Python frontend, passes with opt-bisect, and backends for AMD (direct assembly, LLVM)
and NVIDIA PTX (direct PTX text, LLVM's NVPTX target).

  @gputwin.compiler.kernel def saxpy(a: f32, x: Ptr[f32], ...): ...
  c = gputwin.compiler.compile(saxpy, "gfx1100", backend="direct")   # -> Compiled(code_object=bytes, asm=...)
  c = gputwin.compiler.compile(saxpy, "sm_90", backend="llvm")       # -> Compiled(code_object=PTX bytes, ptx=text)
  gputwin.compiler.reference.launch(saxpy.ir, grid=..., block=..., args=[...])   # the numpy oracle
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gputwin.compiler import ir
from gputwin.compiler.frontend import (BUILTINS, KernelFunction, Ptr, bf16, boolean, f16, f32, f64, i8, i16, i32, i64,
                                       kernel, u8, u16, u32, u64)
from gputwin.errors import CompileError

BACKENDS = ("direct", "llvm")
TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")      # AMD
NV_TARGETS = ("sm_80", "sm_90")                            # NVIDIA (PTX)
IR3_TARGETS = ("a630", "a660", "a730", "a740")             # Qualcomm Adreno (ir3; direct backend only)
HOST_TARGETS = ("x86_64", "aarch64")                       # host CPUs (LLVM backend only; run under unicorn)
ALL_TARGETS = TARGETS + NV_TARGETS + IR3_TARGETS + HOST_TARGETS


@dataclass
class Compiled:
  """A compiled kernel, run with gputwin.emu.launch(c.code_object, c.name, ..., arch=c.arch).
  AMD: `code_object` is an HSA code object (gputwin.isa.codeobj.load_code_object), `asm` its assembly.
  NVIDIA (sm_*): `code_object` is the PTX module as ASCII bytes (what gputwin.emu.launch and the runtime take, and
  what `ptxas -arch=sm_XX` assembles), `asm` and `ptx` the same text.
  Adreno (a630 a660 a730 a740): `code_object` is ir3 machine code, `asm` its text, `shader` the launch metadata
  (gputwin.isa.ir3.listing.Shader; pass it as gputwin.emu.launch(..., shader=c.shader)).
  Host CPUs (x86_64 aarch64): `code_object` is an ELF relocatable object (gputwin.emu.host runs it under unicorn),
  `asm` capstone's listing of it with the IR op each instruction came from."""
  name: str
  arch: str
  backend: str
  code_object: bytes
  asm: str
  ir: ir.Kernel
  llvm_ir: str = ""
  shader: object = None

  @property
  def ptx(self) -> str:
    """The PTX module text (NVIDIA targets; '' for AMD)."""
    return self.asm if self.arch in NV_TARGETS else ""


def to_ir(k) -> ir.Kernel:
  if isinstance(k, KernelFunction): return k.ir
  if isinstance(k, ir.Kernel): return ir.clone(k)
  if isinstance(k, str): return ir.parse(k)
  if callable(k): return kernel(k).ir
  raise CompileError(f"cannot compile {k!r}: expected a @kernel function, IR text or an ir.Kernel")


def compile(k, arch: str, *, backend: str | None = None, optimize: bool = True, disable: tuple[str, ...] = (),
            opt_bisect_limit: int | None = None, print_after_all: bool = False,
            log: Callable[[str], None] | None = None, max_vgprs: int | None = None) -> Compiled:
  """Frontend -> passes -> backend. `disable` names passes to skip; `opt_bisect_limit` runs only the first N pass
  applications (LLVM's -opt-bisect-limit); `log` receives BISECT lines and IR dumps. `backend` defaults to the
  target's first: direct for GPUs, llvm for host CPUs."""
  from gputwin.compiler import passes
  from gputwin.isa.targets import target
  host = arch in HOST_TARGETS
  backend = backend or ("llvm" if host else "direct")
  if backend not in BACKENDS: raise CompileError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
  nv = arch in NV_TARGETS
  if arch in IR3_TARGETS:
    if backend != "direct": raise CompileError(f"{arch}: only backend='direct' targets ir3 (no LLVM backend)")
    disable = tuple(disable) + ("vectorize",)   # (32-bit scalars only: ldib/stib one element at a time)
  elif host:
    if backend != "llvm": raise CompileError(f"{arch}: only backend='llvm' targets host CPUs (no direct backend)")
  elif not nv:
    try: target(arch)
    except Exception: raise CompileError(f"unknown target {arch!r} (known: {', '.join(ALL_TARGETS)})") from None
  k0 = to_ir(k)
  kk = passes.optimize(k0, opt_bisect_limit=opt_bisect_limit, print_after_all=print_after_all, log=log,
                       disable=disable) if optimize else k0
  from gputwin.compiler import limits
  limits.check(kk, arch)
  # code generation is required (as LLVM's required passes, it is never skipped by opt-bisect) but still logged
  stages = ("ir3-isel", "ir3-regalloc", "ir3-legalize") if arch in IR3_TARGETS else \
    (("ptx-emit",) if backend == "direct" else ("nvptx-codegen",)) if nv else ("host-codegen",) if host else \
    ("isel", "regalloc", "waitcnt") if backend == "direct" else ("llvm-codegen",)
  if opt_bisect_limit is not None and log:
    for st in stages: log(f"BISECT: running required pass {backend}-{st} on kernel @{kk.name} ({arch})")
  if arch in IR3_TARGETS:
    from gputwin.compiler.backend_ir3 import compile_ir3
    mc, asm, sh = compile_ir3(kk, arch)
    out = Compiled(kk.name, arch, backend, mc, asm, kk, shader=sh)
  elif host:
    from gputwin.compiler.backend_host import compile_host
    obj, asm, text = compile_host(kk, arch)
    if print_after_all and log: log(f"; *** LLVM IR for @{kk.name} ({arch}) ***\n{text}")
    out = Compiled(kk.name, arch, backend, obj, asm, kk, text)
  elif nv and backend == "direct":
    from gputwin.compiler.backend_ptx import compile_ptx
    text = compile_ptx(kk, arch)
    out = Compiled(kk.name, arch, backend, text.encode(), text, kk)
  elif nv:
    from gputwin.compiler.backend_nvptx import compile_nvptx
    text, lir = compile_nvptx(kk, arch)
    if print_after_all and log: log(f"; *** LLVM IR for @{kk.name} ({arch}) ***\n{lir}")
    out = Compiled(kk.name, arch, backend, text.encode(), text, kk, lir)
  elif backend == "direct":
    from gputwin.compiler.backend_direct import compile_direct
    co, asm = compile_direct(kk, arch, max_vgprs=max_vgprs)
    out = Compiled(kk.name, arch, backend, co, asm, kk)
  else:
    from gputwin.compiler.backend_llvm import compile_llvm
    co, asm, text = compile_llvm(kk, arch)
    if print_after_all and log: log(f"; *** LLVM IR for @{kk.name} ({arch}) ***\n{text}")
    out = Compiled(kk.name, arch, backend, co, asm, kk, text)
  if print_after_all and log: log(f"; *** Machine code after {'+'.join(stages)} on @{kk.name} ({arch}) ***\n{asm}")
  return out


__all__ = ["kernel", "compile", "Compiled", "KernelFunction", "Ptr", "CompileError", "BACKENDS", "TARGETS",
           "NV_TARGETS", "IR3_TARGETS", "HOST_TARGETS", "ALL_TARGETS", "ir",
           "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "boolean", *BUILTINS]
from gputwin.compiler.frontend import *  # noqa: E402,F401,F403  (the kernel built-ins: global_id, barrier, ...)
