"""The FP8/BF8 conversion bodies (pcode errata: FP8_FNUZ picks gfx942's formats on the cdna family) against
ml_dtypes' float8 types, all 256 codes and f32 values around every rounding boundary; the same bodies run in
kernels on both tiers in tests/emu/test_fp8.py."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.pcode import semantics

from .conftest import checked

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the float8 oracle) is not installed")

TYPES = {(False, "FP8"): ml_dtypes.float8_e4m3fn, (False, "BF8"): ml_dtypes.float8_e5m2,
         (True, "FP8"): ml_dtypes.float8_e4m3fnuz, (True, "BF8"): ml_dtypes.float8_e5m2fnuz}
CASES = [(fam, fnuz, ty) for fam, fnuzs in (("cdna", (False, True)), ("rdna4", (False,))) for fnuz in fnuzs
         for ty in ("FP8", "BF8")]


def _floats() -> np.ndarray:
  """f32 values: every 8-bit value, the midpoints between neighbours and a hair either side, specials, random."""
  vals = []
  for t in TYPES.values():
    v = np.arange(256, dtype=np.uint8).view(t).astype(np.float64)
    v = np.unique(v[np.isfinite(v)])
    mid = (v[1:] + v[:-1]) / 2
    vals += [v, mid, np.nextafter(mid.astype(np.float32), np.float32(np.inf)),
             np.nextafter(mid.astype(np.float32), np.float32(-np.inf)), 2 * v[-1:], 3e38 * np.ones(1)]
  rng = np.random.default_rng(3)
  vals += [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45]),
           rng.standard_normal(512) * np.exp2(rng.integers(-20, 18, 512))]
  x = np.concatenate([np.asarray(a, np.float64) for a in vals]).astype(np.float32)
  return np.concatenate([x, -x])


@pytest.mark.parametrize("fam,fnuz,ty", CASES)
def test_decode_every_code(fam, fnuz, ty):
  codes = np.arange(256, dtype=np.uint32)
  word = (codes | codes << 8 | codes << 16 | codes << 24)[None, :]
  want = codes.astype(np.uint8).view(TYPES[fnuz, ty]).astype(np.float32).view(np.uint32)
  name = f"V_CVT_F32_{ty}"
  sem = semantics(fam, name)
  for sel in range(4):  # SDWA_SEL (cdna) / OPSEL with its reversed bits (rdna4) pick each byte
    state = {"S0": word, "FP8_FNUZ": np.uint32(fnuz), "SDWA_SRC0_SEL": np.uint32(sel),
             "OPSEL": np.uint32((sel & 1) << 1 | sel >> 1)}
    got = np.asarray(sem(state)["D0"]).reshape(-1).view(np.uint32)
    np.testing.assert_array_equal(got, want)
  checked(fam, name, f"every code from every byte vs ml_dtypes ({'FNUZ' if fnuz else 'OCP'})")


@pytest.mark.parametrize("fam,fnuz,ty", CASES)
def test_encode_rounds_to_nearest_even(fam, fnuz, ty):
  x = _floats()
  y = np.roll(x, 1)
  name = f"V_CVT_PK_{ty}_F32"
  sem = semantics(fam, name)
  t = TYPES[fnuz, ty]
  old = np.full(x.shape, 0xa5a5a5a5, np.uint32)[None, :]
  for hi in (0, 1):  # OPSEL[3]: which half of D0; the other keeps its bits
    state = {"S0": x.view(np.uint32)[None, :], "S1": y.view(np.uint32)[None, :], "D0": old,
             "FP8_FNUZ": np.uint32(fnuz), "OPSEL": np.uint32(hi << 3)}
    got = np.asarray(sem(state)["D0"]).reshape(-1).astype(np.uint32)
    with np.errstate(all="ignore"):
      pair = x.astype(t).view(np.uint8).astype(np.uint32) | y.astype(t).view(np.uint8).astype(np.uint32) << 8
    want = (0xa5a50000 | pair) if not hi else (0xa5a5 | pair << 16)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(float(x[i]), float(y[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
  checked(fam, name, f"RNE, overflow, NaN, -0 vs ml_dtypes; the kept half ({'FNUZ' if fnuz else 'OCP'})")
