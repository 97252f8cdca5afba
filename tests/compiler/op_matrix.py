"""Every op x scalar type the verifier accepts: both backends compile it or raise CompileError, never abort.
Run as a script (by test_no_abort.py): prints each case to stderr before compiling it, then "cases compiled"."""
import sys
from gputwin.compiler import compile, ir
from gputwin.errors import CompileError
arch = sys.argv[1]
types = [t for t in ir.SCALARS if t != "bool"]
def prog(body, t, r):
  return (f"kernel @m(%x: global<{t}>, %y: global<{r}>) {{\n  %i: i32 = workitem.id.x\n  %a: {t} = load %x, %i\n"
          f"  %b: {t} = load %x, %i\n{body}  store %y, %i, %r\n}}\n")
cases = []
for t in types:
  for op in ir.BINARY: cases.append(prog(f"  %r: {t} = {op} %a, %b\n", t, t))
  for op in ir.UNARY + ir.MATH: cases.append(prog(f"  %r: {t} = {op} %a\n", t, t))
  for op in ir.CMP: cases.append(prog(f"  %c: bool = {op} %a, %b\n  %r: i32 = cast %c\n", t, "i32"))
  cases.append(prog(f"  %r: {t} = fma %a, %b, %a\n", t, t))
  for d in types: cases.append(prog(f"  %r: {d} = cast %a\n", t, d))
  for op in ir.ATOMICS: cases.append(prog(f"  %r: {t} = {op} %x, %i, %a\n", t, t))
n = ok = 0
for text in cases:
  try: k = ir.parse(text)
  except CompileError: continue
  for be in ("llvm", "direct"):
    n += 1
    print(be, text.splitlines()[4], flush=True, file=sys.stderr)
    try: compile(k, arch, backend=be); ok += 1
    except CompileError: pass
print(n, ok)
