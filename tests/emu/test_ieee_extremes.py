"""IEEE 754-2019 maximum and minimum (a NaN operand gives a quiet NaN, +0 is above -0; not IEEE 754-2008's
maxNum, which drops a quiet NaN) on CDNA4 and RDNA4, both tiers, against numpy: clang-22's code for
__builtin_elementwise_maximum/minimum and gfx950's three-operand forms with three different operands."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.verify.reliability import kernel
from tests.pcode.test_ieee_extremes import check as _check, extreme as _extreme, pairs

N = 256  # lanes


def _inputs():
  a, b = pairs(32, N)
  p, q = pairs(16, 2 * N)  # two halves per lane
  return a, b, p, q


@pytest.mark.parametrize("arch", ["gfx950", "gfx1200"])
def test_clang_elementwise_maximum_minimum(tier_runs, clang_co, arch):
  co = clang_co(arch, "extremes").read_bytes()
  a, b, p, q = _inputs()

  def go():
    o, r = np.zeros(2 * N, np.float32), np.zeros(2 * N, np.float32)  # r: a half2 per word
    launch(co, "extremes", grid=N // 64, block=64, args=[o, a, b, r, p.view(np.float32), q.view(np.float32)])
    return o, r.view(np.float16)
  (interp, e0, _), (native, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for o, r in (interp, native):
    _check(o[0::2], _extreme("max", a, b), "max f32")
    _check(o[1::2], _extreme("min", a, b), "min f32")
    r = r.reshape(N, 2, 2)  # lane, (max, min), half
    _check(r[:, 0].reshape(-1), _extreme("max", p, q), "pk max f16")
    _check(r[:, 1].reshape(-1), _extreme("min", p, q), "pk min f16")
  for x, y in zip(interp, native):
    np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
  assert runs > 0


THREE = """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  v_lshlrev_b32 v1, 2, v0
  v_lshlrev_b32 v9, 4, v0
  s_waitcnt lgkmcnt(0)
  global_load_dword v2, v1, s[4:5]
  global_load_dword v3, v1, s[4:5] offset:256
  global_load_dword v4, v1, s[4:5] offset:512
  global_load_dword v5, v1, s[6:7]
  global_load_dword v6, v1, s[6:7] offset:256
  global_load_dword v7, v1, s[6:7] offset:512
  s_waitcnt vmcnt(0)
  v_maximum3_f32 v10, v2, v3, v4
  v_minimum3_f32 v11, v2, -v3, |v4|
  v_pk_maximum3_f16 v12, v5, v6, v7
  v_pk_minimum3_f16 v13, v5, v6, v7
  global_store_dwordx4 v9, v[10:13], s[8:9]"""


def test_gfx950_three_operands(tier_runs):
  """gfx950's v_maximum3_f32 / v_minimum3_f32 (with source modifiers) and v_pk_maximum3_f16 / v_pk_minimum3_f16 on
  three different operands, against two IEEE maximum/minimum steps in numpy. The descriptor keeps f32 denormals
  (llvm-mc's default FLOAT_DENORM_MODE_32 is 0: flushed, and gfx9+ min/max follow the mode: test_denormals.py)."""
  co = kernel("gfx950", THREE, vgprs=16, extra="  .amdhsa_float_denorm_mode_32 3\n")
  a, b, p, q = _inputs()
  sel = np.random.default_rng(3).permutation(N)[:64]  # 64 of the pairs, and a third operand from others
  x = np.concatenate([a[sel], b[sel], a[np.roll(sel, 5)]])  # a, b, c: rows of 64 lanes
  h = np.concatenate([p[:128], q[:128], np.roll(q, 3)[:128]]).view(np.float32)  # two halves per lane

  def go():
    out = np.zeros((64, 4), np.uint32)
    launch(co, "k", grid=1, block=64, args=[x, h, out])
    return out
  (interp, e0, _), (native, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  a3, b3, c3 = x.reshape(3, 64)
  ph = h.reshape(3, 64).view(np.float16)  # (3 sources, 64 lanes x 2 halves)
  mx = lambda u, v, w: _extreme("max", _extreme("max", u, v), w)  # noqa: E731
  mn = lambda u, v, w: _extreme("min", _extreme("min", u, v), w)  # noqa: E731
  for got in (interp, native):
    _check(got[:, 0].view(np.float32), mx(a3, b3, c3), "max3 f32")
    _check(got[:, 1].view(np.float32), mn(a3, -b3, np.abs(c3)), "min3 f32 modifiers")
    _check(got[:, 2].copy().view(np.float16), mx(*ph), "pk max3 f16")
    _check(got[:, 3].copy().view(np.float16), mn(*ph), "pk min3 f16")
  np.testing.assert_array_equal(interp, native)
  assert runs > 0
