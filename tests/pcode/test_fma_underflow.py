"""A fused multiply-add whose product underflows is still one rounding: fma(-2**-1074, 0.5, 2**-1074) is the tie
2**-1075, which rounds to even, +0 (IEEE 754-2019 5.4.1 fusedMultiplyAdd). Both pcode backends once took a product
that rounded to zero for an exact zero and added it to the addend (2**-1074). Oracle: fractions."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from gputwin.pcode import semantics

TINY = 5e-324  # 2**-1074
CASES = [(-TINY, 0.5, TINY), (TINY, 0.5, TINY), (TINY, TINY, 0.0), (-TINY, TINY, -0.0), (1e-200, 1e-200, TINY),
         (3 * TINY, 0.5, 0.0), (-TINY, 0.25, TINY)]


def exact(a, b, c) -> float:
  r = Fraction(a) * Fraction(b) + Fraction(c)
  return float(r) if r else a * b + c  # Fraction -> float rounds to nearest even, subnormals included


def bits(x) -> np.ndarray:
  return np.array([[x]], np.float64).view(np.uint64)


@pytest.mark.parametrize("family,name", [("rdna3", "V_FMA_F64"), ("cdna", "V_FMA_F64"), ("ptx", "fma.rn.f64")])
def test_fma_f64_rounds_once_when_the_product_underflows(family, name):
  sem = semantics(family, name)
  for a, b, c in CASES:
    got = sem({"S0": bits(a), "S1": bits(b), "S2": bits(c)})["D0"].view(np.float64)[0, 0]
    assert got == exact(a, b, c) and np.signbit(got) == np.signbit(exact(a, b, c)), (a, b, c, got)
  try:
    from gputwin.pcode.llvm import Unsupported, host
  except ImportError:
    pytest.skip("llvmlite not installed")
  try:
    fn = host(sem.program, 1)
  except Unsupported as e:
    pytest.skip(f"the LLVM backend declines {name}: {e}")
  for a, b, c in CASES:
    out = fn({"S0": bits(a)[0], "S1": bits(b)[0], "S2": bits(c)[0]}, np.ones(1, bool))["D0"]
    got = np.asarray(out, np.uint64).view(np.float64)[0]
    assert got == exact(a, b, c) and np.signbit(got) == np.signbit(exact(a, b, c)), ("llvm", a, b, c, got)
