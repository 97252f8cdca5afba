"""Emulator bugs a real client (tinygrad 0.14 on `gputwin exec`) exposed, reduced to kernels and checked against
numpy in f64 (exact here) rounded once, as IEEE fma does.

V_FMA_MIX*: tinygrad's `Tensor([1.0], dtype=half).sin()` (LLVM-22, gfx1100 true16) reduces its argument with
`v_fma_mix_f32 v5, v3, s6, v1 op_sel_hi:[0,0,1]` (k * -pi + f16 x) and `v_fma_mixhi_f16 v0, v2, s7, 0`; it printed
-0.0 instead of 0.8413: the body read every source as 0 (pcode erratum), OPSEL/OPSEL_HI were unbound, neg_hi (abs)
and neg were dropped, and MIXLO/MIXHI wrote the wrong half and cleared the other (emu/amd/decode.py)."""
import shutil
import subprocess

import numpy as np
import pytest

from gputwin.emu import launch
from tests.emu.test_asm import kernel

N = 32


# out[lane] = 4 dwords: the tinygrad reduction step, its negated/abs/high-half twin, and the two f16 halves written
# into a register whose other half must survive; x[lane] = (f16 lo, f16 hi); k = lane; s8 = f32 -pi, s9 = f32 2**-62
REDUCED = """
  s_load_b128 s[4:7], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_lshlrev_b32 v10, 4, v0
  v_cvt_f32_u32 v3, v0
  s_mov_b32 s8, 0xc0490fdb
  s_mov_b32 s9, 0x20800000
  {wait_k}
  global_load_b32 v2, v1, s[6:7]
  {wait_v}
  v_fma_mix_f32 v4, v3, s8, v2 op_sel_hi:[0,0,1]
  v_fma_mix_f32 v5, -v3, |s8|, -|v2| op_sel:[0,0,1] op_sel_hi:[0,0,1]
  v_mov_b32 v6, v2
  v_fma_mixhi_f16 v6, v4, s9, 0 op_sel_hi:[0,0,0]
  v_mov_b32 v7, v2
  v_fma_mixlo_f16 v7, v2, -v2, v5 op_sel:[1,0,0] op_sel_hi:[1,1,0]
  global_store_b128 v10, v[4:7], s[4:5]"""


def _reduced_reference(x: np.ndarray) -> np.ndarray:
  lo, hi = x[0::2].astype(np.float64), x[1::2].astype(np.float64)
  k, npi = np.arange(N, dtype=np.float64), np.float64(np.float32(-np.pi))
  v4 = (k * npi + lo).astype(np.float32)
  v5 = (-k * -npi - np.abs(hi)).astype(np.float32)
  v6 = x.reshape(N, 2).copy()
  v6[:, 1] = (v4.astype(np.float64) * 2.0 ** -62).astype(np.float16)
  v7 = x.reshape(N, 2).copy()
  v7[:, 0] = (hi * -lo + v5.astype(np.float64)).astype(np.float16)
  return np.concatenate([v4.view(np.uint32)[:, None], v5.view(np.uint32)[:, None], v6.view(np.uint32),
                         v7.view(np.uint32)], axis=1)


@pytest.mark.parametrize("jit", ["off", "force"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200"])
def test_fma_mix_reduced_from_tinygrad_half_sin(arch, jit, monkeypatch):
  """Both tiers: the interpreter (with checkers) and every block compiled to host code (checkers off)."""
  from gputwin.emu import native
  monkeypatch.setenv("GPUTWIN_JIT", jit)
  before = native.STATS["wave_instructions"]
  x = np.random.default_rng(19).standard_normal(2 * N).astype(np.float16)
  x[:2] = (1.0, -1.0)  # tinygrad's failing input: lane 0 computes 0 * -pi + 1.0
  out = np.zeros((N, 4), np.uint32)
  waits = dict(wait_k="s_waitcnt lgkmcnt(0)", wait_v="s_waitcnt vmcnt(0)") if arch == "gfx1100" else \
    dict(wait_k="s_wait_kmcnt 0", wait_v="s_wait_loadcnt 0")
  launch(kernel(arch, REDUCED.format(**waits)), "k", grid=1, block=N, args=[out, x], checks=jit == "off")
  ref = _reduced_reference(x)
  assert (native.STATS["wave_instructions"] > before) == (jit == "force")
  assert out[0, 0] == np.float32(1.0).view(np.uint32)
  np.testing.assert_array_equal(out, ref)


MIX_CL = r"""
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())
kernel void mix(global float *out, global half2 *outh, global const half *a, global const float *b,
                global const half2 *c) {
  int i = GID;
  half2 cc = c[i];
  out[i] = fma((float)a[i], b[i], -(float)cc.y);
  half2 p = outh[i];
  p.y = (half)fma((float)a[i], -b[i], fabs((float)cc.x));
  outh[i] = p;
}
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942", "gfx950"])
def test_clang_fma_mix(arch, tmp_path):
  """clang-22 selects v_fma_mix_f32 (op_sel, neg) and v_fma_mixlo_f16 (neg, abs) for OpenCL fma() of mixed
  precision; fma rounds once on every target (CDNA's V_MAD_MIX text would round twice)."""
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22") and shutil.which("llvm-objdump-22")):
    pytest.skip("clang-22 / ld.lld-22 / llvm-objdump-22 not installed (CI installs them: .ci/run)")
  src, o, co = tmp_path / "mix.cl", tmp_path / "mix.o", tmp_path / "mix.co"
  src.write_text(MIX_CL)
  subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib",
                  "-O2", "-c", str(src), "-o", str(o)], check=True, capture_output=True)
  subprocess.run(["ld.lld-22", "-shared", str(o), "-o", str(co)], check=True, capture_output=True)
  dis = subprocess.run(["llvm-objdump-22", "-d", f"--mcpu={arch}", str(co)], check=True, capture_output=True,
                       text=True).stdout
  assert "v_fma_mix_f32" in dis and "v_fma_mixlo_f16" in dis  # the kernel exercises what it is meant to
  rng = np.random.default_rng(7)
  n = 64
  a, b = rng.standard_normal(n).astype(np.float16), rng.standard_normal(n).astype(np.float32)
  c = rng.standard_normal(2 * n).astype(np.float16)
  out, outh = np.zeros(n, np.float32), rng.standard_normal(2 * n).astype(np.float16)
  keep = outh.copy()
  launch(str(co), "mix", grid=1, block=n, args=[out, outh, a, b, c])
  A, B, C = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
  np.testing.assert_array_equal(out, (A * B - C[1::2]).astype(np.float32))
  keep[1::2] = (A * -B + np.abs(C[0::2])).astype(np.float16)
  np.testing.assert_array_equal(outh, keep)
