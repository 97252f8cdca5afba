"""IEEE 754-2019 maximum / minimum bodies (a NaN operand gives a quiet NaN, +0 is above -0) against numpy, every pair
of special values and random ones: RDNA4's V_MAXIMUM*/V_MINIMUM* and CDNA4's three-operand forms, whose helpers
(v_maximum_f32, v_maximum3_f16 ...) the CDNA4 guide calls but never defines (pcode errata HELPERS). The same bodies
run in kernels on both tiers in tests/emu/test_ieee_extremes.py."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.pcode import semantics

from .conftest import checked

F32 = [0x0, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00123, 0x1,
       0x80000400, 0x7f7fffff, 0x3f800001]
F16 = [0x0, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x1, 0x8200, 0x7bff, 0x3c01]


def pairs(bits: int, n: int, seed: int = 7):
  """n pairs of float bits (uint32 / uint16): every pair of the specials first, then random picks of them and of
  normal values."""
  rng = np.random.default_rng(seed)
  u, f = (np.uint32, np.float32) if bits == 32 else (np.uint16, np.float16)
  s = np.array(F32 if bits == 32 else F16, u)
  a, b = np.repeat(s, len(s)), np.tile(s, len(s))
  pool = np.concatenate([s, rng.standard_normal(16).astype(f).view(u)])
  a = np.concatenate([a, rng.choice(pool, n - len(a))])
  b = np.concatenate([b, rng.choice(pool, n - len(b))])
  return a.view(f), b.view(f)


def extreme(kind: str, x, y):
  """numpy's IEEE 754-2019 maximum / minimum of float arrays (NaN where either is NaN)."""
  both0 = (x == 0) & (y == 0)
  if kind == "max":
    v, z = np.where(x > y, x, y), np.where(np.signbit(x) & np.signbit(y), -0.0, 0.0)
  else:
    v, z = np.where(x < y, x, y), np.where(np.signbit(x) | np.signbit(y), -0.0, 0.0)
  return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(both0, z, v)).astype(x.dtype)


def check(got, want, what: str) -> None:
  """Bits equal, or both NaN and the result quiet (the quiet bit: the mantissa's top)."""
  u = np.uint32 if want.dtype == np.float32 else np.uint16
  got = np.ascontiguousarray(got).view(u)
  quiet = u(1 << (22 if u is np.uint32 else 9))
  nan = np.isnan(want)
  bad = np.flatnonzero(np.where(nan, ~np.isnan(got.view(want.dtype)) | ((got & quiet) == 0), got != want.view(u)))
  assert not len(bad), [(what, int(i), hex(int(got[i])), hex(int(want.view(u)[i]))) for i in bad[:6]]


def _run(fam: str, name: str, *srcs) -> np.ndarray:
  out = semantics(fam, name)({f"S{i}": s.astype(np.uint32)[None, :] for i, s in enumerate(srcs)})
  return np.asarray(out["D0"]).reshape(-1).astype(np.uint32)


CASES = [("rdna4", k, w, n) for k in ("MAXIMUM", "MINIMUM") for w in (32, 16) for n in (2, 3)] + \
        [("cdna", k, w, 3) for k in ("MAXIMUM", "MINIMUM") for w in (32, 16)]


@pytest.mark.parametrize("fam,kind,bits,n", CASES)
def test_maximum_minimum(fam, kind, bits, n):
  a, b = pairs(bits, 512)
  c = np.roll(a, 37)
  u = np.uint32 if bits == 32 else np.uint16
  one = lambda x, y: extreme(kind[:3].lower(), x, y)  # noqa: E731
  want = one(a, b) if n == 2 else one(one(a, b), c)
  srcs = (a, b, c)[:n]
  if fam == "cdna" and bits == 16:  # V_PK_*3_F16: two lanes' halves in one word
    name = f"V_PK_{kind}3_F16"
    words = [x.view(u).reshape(-1, 2).astype(np.uint32) for x in srcs]
    got = _run(fam, name, *[w[:, 0] | w[:, 1] << 16 for w in words])
    got = np.stack([got & 0xffff, got >> 16], axis=1).reshape(-1).astype(u)
  else:
    name = f"V_{kind}{'3' * (n == 3)}_F{bits}"
    got = (_run(fam, name, *[x.view(u) for x in srcs]) & ((1 << bits) - 1)).astype(u)
  check(got, want, name)
  checked(fam, name, "IEEE 754-2019 maximum/minimum: every pair of specials (NaN, sNaN, +-0, inf, denormals) vs "
          "numpy")
