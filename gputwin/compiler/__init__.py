"""gputwin.compiler: kernel IR, Python frontend, passes with opt-bisect, and AMD backends (direct assembly, LLVM).

  @gputwin.compiler.kernel def saxpy(a: f32, x: Ptr[f32], ...): ...
  c = gputwin.compiler.compile(saxpy, "gfx1100", backend="direct")   # -> Compiled(code_object=bytes, asm=...)
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
TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")


@dataclass
class Compiled:
  """A compiled kernel: `code_object` loads with gputwin.isa.codeobj.load_code_object and runs with
  gputwin.emu.launch(code_object, name, ...)."""
  name: str
  arch: str
  backend: str
  code_object: bytes
  asm: str
  ir: ir.Kernel
  llvm_ir: str = ""


def to_ir(k) -> ir.Kernel:
  if isinstance(k, KernelFunction): return k.ir
  if isinstance(k, ir.Kernel): return ir.clone(k)
  if isinstance(k, str): return ir.parse(k)
  if callable(k): return kernel(k).ir
  raise CompileError(f"cannot compile {k!r}: expected a @kernel function, IR text or an ir.Kernel")


def compile(k, arch: str, *, backend: str = "direct", optimize: bool = True, disable: tuple[str, ...] = (),
            opt_bisect_limit: int | None = None, print_after_all: bool = False,
            log: Callable[[str], None] | None = None, max_vgprs: int | None = None) -> Compiled:
  """Frontend -> passes -> backend. `disable` names passes to skip; `opt_bisect_limit` runs only the first N pass
  applications (LLVM's -opt-bisect-limit); `log` receives BISECT lines and IR dumps."""
  from gputwin.compiler import passes
  from gputwin.isa.targets import target
  if backend not in BACKENDS: raise CompileError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
  try: target(arch)
  except Exception as e: raise CompileError(f"unknown target {arch!r}: {e}") from None
  k0 = to_ir(k)
  kk = passes.optimize(k0, opt_bisect_limit=opt_bisect_limit, print_after_all=print_after_all, log=log,
                       disable=disable) if optimize else k0
  from gputwin.compiler import limits
  limits.check(kk, arch)
  # code generation is required (as LLVM's required passes, it is never skipped by opt-bisect) but still logged
  stages = ("isel", "regalloc", "waitcnt") if backend == "direct" else ("llvm-codegen",)
  if opt_bisect_limit is not None and log:
    for st in stages: log(f"BISECT: running required pass {backend}-{st} on kernel @{kk.name} ({arch})")
  if backend == "direct":
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


__all__ = ["kernel", "compile", "Compiled", "KernelFunction", "Ptr", "CompileError", "BACKENDS", "TARGETS", "ir",
           "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "boolean", *BUILTINS]
from gputwin.compiler.frontend import *  # noqa: E402,F401,F403  (the kernel built-ins: global_id, barrier, ...)
