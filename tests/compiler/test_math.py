"""Math built-ins on the emulator against the host reference (numpy), with the documented float32 bounds.

The emulator evaluates v_rcp/v_sqrt/v_exp/v_log/v_sin exactly (pcode), so the bounds measure what our lowering
adds: range reduction for exp (x * log2 e: error grows with |x|, <= 16 ulp for |x| <= 40) and sin/cos (x / 2pi:
absolute error <= 2e-5 for |x| <= 40). Real hardware adds the instruction's own error (1 ulp for v_rcp/v_sqrt/
v_exp/v_log per the ISA guides)."""
import numpy as np
import pytest

from gputwin.compiler import compile
from gputwin.compiler.examples import ulp_diff
from gputwin.compiler.frontend import translate_source

from _compiler_helpers import TARGETS, run_both

SRC = """
def all_math(x: Ptr[f32], y: Ptr[f32], z: Ptr[f32]):
  i = global_id(0)
{body}
"""
#        op        expression                  ulp bound direct, llvm (None: absolute bound instead)
BOUNDS = {"div": ("x[i] / y[i]", 0, 0), "sqrt": ("sqrt(x[i])", 0, 0), "rsqrt": ("rsqrt(x[i])", 1, 1),
          "exp": ("exp(y[i])", 16, 2), "exp2": ("exp2(y[i])", 0, 0), "log": ("log(x[i])", 1, 1),
          "log2": ("log2(x[i])", 0, 0), "floor": ("floor(y[i])", 0, 0), "ceil": ("ceil(y[i])", 0, 0),
          "trunc": ("trunc(y[i])", 0, 0), "fma": ("fma(x[i], y[i], x[i])", 0, 0), "abs": ("abs(y[i])", 0, 0),
          "min": ("min(x[i], y[i])", 0, 0), "sin": ("sin(y[i])", None, None), "cos": ("cos(y[i])", None, None)}


def inputs():
  rng = np.random.default_rng(0)
  x = (np.abs(rng.standard_normal(256)) * 10 ** rng.uniform(-6, 6, 256)).astype(np.float32) + np.float32(1e-30)
  y = (rng.standard_normal(256) * 10).astype(np.float32).clip(-40, 40)
  return [x, y, np.zeros(256, np.float32)]


N = 256


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_math_bounds(arch, backend):
  from gputwin.compiler import frontend
  body = "\n".join(f"  z[{j} * {N} + i] = {expr}" for j, (expr, _, _) in enumerate(BOUNDS.values()))
  c = compile(translate_source(SRC.format(body=body), path="<math>", consts=vars(frontend)), arch, backend=backend)
  x, y, _ = inputs()
  ref, emu = run_both(c, [x, y, np.zeros(N * len(BOUNDS), np.float32)], N // 64, 64)
  for j, (op, (expr, ud, ul)) in enumerate(BOUNDS.items()):
    got, want = emu[2][j * N:(j + 1) * N], ref[2][j * N:(j + 1) * N]
    bound = ud if backend == "direct" else ul
    if bound is None:
      assert float(np.abs(got - want).max()) <= 2e-5, op
    else:
      assert int(ulp_diff(got, want).max()) <= bound, (op, int(ulp_diff(got, want).max()), bound)
