"""Reproducers of the bugs in gputwin/verify/FINDINGS.md, outside this package: xfail while they are there,
plain regression tests once fixed."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.verify import runner

SELECT_ABS = """
static inline float fdv(float a, float b) { return b == 0.0f ? a : a / b; }
__kernel void k(__global uint *out, __global const float *in) {
  uint lid = __builtin_amdgcn_workitem_id_x();
  out[lid] = __builtin_bit_cast(uint, __builtin_fabsf(fdv(-4294967264.0f, in[lid])));
}
"""
DIVIDE = """
__kernel void k(__global float *out, __global const float *a, __global const float *b) {
  uint i = __builtin_amdgcn_workitem_id_x();
  out[i] = a[i] / b[i];
}
"""


def test_select_keeps_abs_modifier(clang):
  """FINDINGS.md #1, fixed in the emulator (efe9448): now a regression test."""
  co = runner.clang_cl(SELECT_ABS, "gfx1100", flags=("-O2", "-cl-fp32-correctly-rounded-divide-sqrt"))
  x, out = np.array([-100, 100, 0, 3] * 8, np.float32), np.zeros(32, np.uint32)
  launch(co, "k", grid=1, block=32, args=[out, x])
  want = np.abs(np.where(x == 0, np.float32(-4294967264.0), np.float32(-4294967264.0) / np.where(x == 0, 1, x)))
  np.testing.assert_array_equal(out.view(np.float32), want)


def test_division_with_denormal_quotient(clang):
  """FINDINGS.md #2, fixed by the V_DIV_FMAS_F32 erratum (pcode/errata.py): now a regression test."""
  co = runner.clang_cl(DIVIDE, "gfx942", flags=("-O2", "-cl-fp32-correctly-rounded-divide-sqrt"))
  a, b = np.full(64, -3.35e-38, np.float32), np.full(64, 219.5, np.float32)
  a[1], a[2], b[2], a[3], b[3] = 1e-39, 3.0, 7.0, 1e30, 1.0
  out = np.zeros(64, np.float32)
  launch(co, "k", grid=1, block=64, args=[out, a, b])
  np.testing.assert_array_equal(out, a / b)


def test_pk_mov_op_sel(clang):  # FINDINGS.md #4, fixed by a pcode erratum (V_PK_MOV_B32's .u32-typed pairs)
  from pathlib import Path
  from gputwin.verify import fuzz
  h, g, _ = fuzz.replay(Path(__file__).parent / "regressions" / "gfx942-s7-p269")
  np.testing.assert_array_equal(g, h)


@pytest.mark.xfail(reason="FINDINGS.md #5: clang-22 turns a select on +0.0 into v_min_f32 (signed zeros)", strict=True)
def test_clang_keeps_select_on_zero(clang):
  src = "__kernel void k(__global float *o, __global const float *x) { uint i = __builtin_amdgcn_workitem_id_x();" \
        " o[i] = x[i] < 0.0f ? x[i] : 0.0f; }"
  assert "v_min_f32" not in runner.clang_cl(src, "gfx942", asm=True).decode()
