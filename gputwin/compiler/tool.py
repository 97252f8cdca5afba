"""`gputwin compile FILE.py --arch gfx1100|sm_90 [--backend direct|llvm] [-S] [--print-after-all]
[--opt-bisect-limit N] [-o out.co]`: compile every @kernel in a Python file (or one kernel from a `.ir` text file).
AMD targets write a code object (.co); NVIDIA targets (sm_80, sm_90) write the PTX module (.ptx, also what -S prints);
host CPUs (x86_64, aarch64) an ELF object (.o; -S prints capstone's disassembly with the IR op of each instruction).

Entry point for cli.py: `compile_main(argv) -> exit status` (or `add_arguments(parser)` + `run(namespace)`).
Diagnostics (BISECT lines, IR dumps) go to stderr like LLVM's; -S writes assembly instead of a code object.
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from gputwin.errors import CompileError, GputwinError


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
  from gputwin.compiler import ALL_TARGETS, BACKENDS
  from gputwin.compiler.passes import PASSES
  p.add_argument("file", help="Python file with @kernel functions, or a .ir file (kernel IR text)")
  p.add_argument("--arch", required=True, help=f"target ({', '.join(ALL_TARGETS)})")
  p.add_argument("--backend", choices=BACKENDS, default=None, help="default: direct (GPUs), llvm (host CPUs)")
  p.add_argument("--kernel", action="append", help="compile only this kernel (repeatable)")
  p.add_argument("-S", dest="asm", action="store_true", help="write assembly (.s) instead of a code object")
  p.add_argument("--emit-ir", action="store_true", help="write the optimised kernel IR (.ir) instead")
  p.add_argument("--emit-llvm", action="store_true", help="write LLVM IR (.ll) (LLVM backend)")
  p.add_argument("--print-after-all", action="store_true", help="dump the IR after every pass application")
  p.add_argument("--opt-bisect-limit", type=int, default=None, metavar="N",
                 help="run only the first N pass applications (-1: all), printing each as BISECT: ...")
  p.add_argument("--disable-pass", action="append", default=[], choices=sorted(PASSES), help="skip this pass")
  p.add_argument("-O0", dest="O0", action="store_true", help="no optimisation passes")
  p.add_argument("-o", dest="output", help="output file (with several kernels: NAME is inserted before the suffix)")
  return p


def kernels(path: Path) -> list:
  from gputwin.compiler import ir
  from gputwin.compiler.frontend import KernelFunction
  if path.suffix == ".ir": return [ir.parse(path.read_text())]
  try:
    ns = runpy.run_path(str(path), run_name="__gputwin_compile__")
  except CompileError:
    raise
  except Exception as e:
    raise GputwinError(f"{path}: cannot import: {type(e).__name__}: {e}") from None
  ks = [v for v in ns.values() if isinstance(v, KernelFunction)]
  if not ks: raise GputwinError(f"{path}: no @kernel functions found")
  return ks


def run(ns: argparse.Namespace, out=None, err=None) -> int:
  from gputwin.compiler import HOST_TARGETS, compile
  out, err = out or sys.stdout, err or sys.stderr
  path = Path(ns.file)
  ks = kernels(path)
  names = [getattr(k, "name", None) for k in ks]
  if ns.kernel:
    missing = set(ns.kernel) - set(names)
    if missing: raise GputwinError(f"{path}: no kernel named {', '.join(sorted(missing))} (have {', '.join(names)})")
    ks = [k for k in ks if k.name in ns.kernel]
  log = lambda s: print(s, file=err)
  for k in ks:
    c = compile(k, ns.arch, backend=ns.backend, optimize=not ns.O0, disable=tuple(ns.disable_pass),
                opt_bisect_limit=ns.opt_bisect_limit, print_after_all=ns.print_after_all, log=log)
    if ns.emit_ir: data, sfx = str(c.ir).encode(), ".ir"
    elif ns.emit_llvm:
      if c.backend != "llvm": raise GputwinError("--emit-llvm needs --backend llvm")
      data, sfx = c.llvm_ir.encode(), ".ll"
    elif ns.asm: data, sfx = c.asm.encode(), ".s"
    elif c.ptx: data, sfx = c.code_object, ".ptx"
    elif c.shader is not None: data, sfx = c.code_object, ".bin"    # ir3 machine code (launch with c.shader)
    elif c.arch in HOST_TARGETS: data, sfx = c.code_object, ".o"   # ELF relocatable object (gputwin.emu.host)
    else: data, sfx = c.code_object, ".co"
    if ns.output == "-" or (ns.output is None and sfx not in (".co", ".ptx", ".bin", ".o")):
      out.write(data.decode())
      continue
    dst = Path(ns.output) if ns.output else path.with_name(f"{path.stem}.{ns.arch}{sfx}")
    if len(ks) > 1: dst = dst.with_name(f"{dst.stem}.{c.name}{dst.suffix or sfx}")
    dst.write_bytes(data)
    log(f"{c.name}: {c.backend} {ns.arch} -> {dst} ({len(data)} bytes)")
  return 0


def compile_main(argv: list[str] | None = None) -> int:
  """`gputwin compile ...` as a function: returns the exit status; errors print as `file:line:col: error: ...`."""
  p = add_arguments(argparse.ArgumentParser(prog="gputwin compile", description=__doc__.split("\n\n")[0]))
  ns = p.parse_args(argv)
  try:
    return run(ns)
  except GputwinError as e:
    print(str(e), file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(compile_main())
