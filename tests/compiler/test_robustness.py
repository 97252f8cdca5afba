"""Mutated kernel sources (lines dropped or duplicated, operators, names and literals swapped) either compile or
raise CompileError with a location; they never crash the frontend, the passes or either backend."""
import inspect
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.compiler import compile
from gputwin.compiler import examples as ex_mod
from gputwin.compiler.examples import EXAMPLES
from gputwin.compiler.frontend import translate_source
from gputwin.errors import CompileError

SOURCES = {n: inspect.getsource(e.kernel.fn) for n, e in EXAMPLES.items()}
SWAPS = [("+", "-"), ("*", "/"), ("<", ">="), ("0.0", "0"), ("f32", "i32"), ("i32", "u32"), ("range(", "range(-"),
         ("tid", "n"), ("[", "[1.5 + "), ("barrier()", "barrier(1)"), ("if ", "while "), ("//", "/"), (":", ""),
         ("0", "1 << 40"), ("shared(", "shared(f64, "), ("= ", "= -"), ("(0)", "(3)"), ("x[i]", "x")]


def mutate(src: str, rnd: random.Random, k: int) -> str:
  lines = src.splitlines()
  for _ in range(k):
    op = rnd.choice([0, 1, 2, 2, 2, 2])      # mostly token swaps: they keep the indentation valid
    j = rnd.randrange(2, len(lines))
    if op == 0: del lines[j]
    elif op == 1: lines.insert(j, lines[rnd.randrange(2, len(lines))])
    else:
      a, b = rnd.choice(SWAPS)
      hits = [i for i in range(2, len(lines)) if a in lines[i]]
      if hits:
        j = rnd.choice(hits)
        lines[j] = lines[j].replace(a, b, 1)
  return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(SOURCES)), seed=st.integers(0, 2**32 - 1), k=st.integers(1, 4))
def test_mutants_never_crash(name, seed, k):
  src = mutate(SOURCES[name], random.Random(seed), k)
  try:
    kern = translate_source(src, path="mutant.py", consts=vars(ex_mod))
  except CompileError as e:
    assert e.loc is not None and e.loc.file == "mutant.py" and e.loc.line >= 1, str(e)
    return
  for arch, backend in (("gfx1100", "direct"), ("gfx942", "direct"), ("gfx1200", "llvm")):
    try:
      c = compile(kern, arch, backend=backend)
      assert c.code_object[:4] == b"\x7fELF"
    except CompileError as e:
      assert "error" in str(e)


def test_syntax_error_is_located():
  with pytest.raises(CompileError, match=r"^m\.py:12:\d+: error: syntax error"):
    translate_source("def k(x: Ptr[f32]):\n  x[0] = (1 +\n", path="m.py", first_line=11)
