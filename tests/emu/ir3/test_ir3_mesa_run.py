"""Real Mesa ir3 compiler output (shared/vendor/ir3/kernels: 8 compute shaders x a630/a660/a730) runs on the emulator
and matches numpy references of the GLSL sources written here, on the interpreter and with the native tier."""
from pathlib import Path

import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch

KERNELS = Path("/work/shared/vendor/ir3/kernels")
GPUS = ("a630", "a660", "a730")
pytestmark = pytest.mark.skipif(not KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")
M32 = 0xffffffff


def _rng(seed=1):
  return np.random.default_rng(seed)


def saxpy():
  n = 200
  x = _rng().standard_normal(256).astype(np.float32)
  y = _rng(2).standard_normal(256).astype(np.float32)
  ubo = np.zeros(16, np.uint32)
  ubo[0], ubo[1] = np.float32(1.75).view(np.uint32), n
  ref = y.copy()
  ref[:n] = np.float32(1.75) * x[:n] + y[:n]  # one mad.f32: the product rounded, then the sum (not fused)
  return 4, {0: x, 1: y, 4: ubo}, lambda: np.testing.assert_array_equal(y, ref)


def _intmix_ref(a, b):
  out = []
  for x, bb in zip(a.tolist(), b.tolist()):
    y = bb | 1
    sx = x - (1 << 32) if x >> 31 else x
    sb = bb - (1 << 32) if bb >> 31 else bb
    sy = ((sb >> 4) & ~1) | 2
    sh = bb & 31
    q = abs(sx) // abs(sy) * (1 if (sx < 0) == (sy < 0) else -1)
    r = sx % sy  # glslang compiles GLSL's int `%` to OpSMod (the .spv holds opcode 139): the divisor's sign
    out += [x // y, x % y, q & M32, r & M32, (x << sh) & M32, x >> sh, (sx >> sh) & M32, bin(x).count("1"),
            min(x, y) ^ (max(sx, sy) & M32), (x * y) >> 32, ((sx * sy) >> 32) & M32, (x * y + min(sx, sy)) & M32]
  return np.array(out, np.uint32)


def intmix():
  n = 128
  a = _rng().integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
  b = _rng(2).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
  a[:4], b[:4] = [0, M32, 0x80000000, 7], [0, M32, 0x7fffffff, 0xfffffff0]
  o = np.zeros(12 * n, np.uint32)
  ref = _intmix_ref(a, b)
  return n // 64, {0: a, 1: b, 2: o}, lambda: np.testing.assert_array_equal(o, ref)


def f16math():
  n = 64
  v = (_rng().standard_normal((n, 4)) * 3).astype(np.float32)
  o = np.zeros((n, 4), np.float32)
  h = v.astype(np.float16)
  r = np.clip(h * h + np.float16(0.5) * h, np.float16(-2), np.float16(100)).astype(np.float16)
  d = (h.astype(np.float32) * r.astype(np.float32)).sum(axis=1)
  ref = np.stack([np.abs(h[:, 0]) - h[:, 1], d, np.sqrt(np.abs(h[:, 2])), r[:, 3]], axis=1).astype(np.float32)
  return 1, {0: v, 1: o}, lambda: np.testing.assert_allclose(o, ref, rtol=1.5e-2, atol=6e-2)


def reduce_shared():
  g = 3
  v = _rng().standard_normal(128 * g).astype(np.float32)
  o = np.zeros(g, np.float32)
  s = v.reshape(g, 128).copy()
  stride = 64
  while stride:
    s[:, :stride] = s[:, :stride] + s[:, stride:2 * stride]
    stride //= 2
  return g, {0: v, 1: o}, lambda: np.testing.assert_array_equal(o, s[:, 0])


def subgroup():
  g = 2
  v = _rng().integers(0, 1 << 20, 128 * g).astype(np.uint32)
  o = np.zeros((128 * g, 4), np.uint32)
  w = v.reshape(g, 128).astype(np.uint64)
  ref = np.stack([np.repeat(w.sum(axis=1), 128), np.repeat((w & 1).sum(axis=1), 128), np.repeat(w[:, 0], 128),
                  (np.cumsum(w, axis=1) - w).reshape(-1)], axis=1).astype(np.uint32)
  return g, {0: v, 1: o}, lambda: np.testing.assert_array_equal(o, ref)


def divergence():
  n = 128
  v = _rng().integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
  o = np.zeros(n, np.uint32)
  ref = []
  for x in v.tolist():
    acc = 3 * x & M32 if x % 2 == 0 else x ^ 0x55
    for j in range(min(x & 7, 5)):
      for k in range(j):
        if (acc + k) & 3 == 0:
          continue
        acc = (acc + k * j + 1) & M32
    ref.append(acc)
  return n // 64, {0: v, 1: o}, lambda: np.testing.assert_array_equal(o, np.array(ref, np.uint32))


def int64():
  n = 64
  v = _rng().integers(0, 1 << 64, (n, 2), dtype=np.uint64)
  v[0], v[1] = [0, 0], [(1 << 64) - 1, 1 << 63]
  o = np.zeros(8 * n, np.uint64)
  M = (1 << 64) - 1
  ref = []
  for a, b in v.tolist():
    s = b & 63
    sa, sb = a - (1 << 64) if a >> 63 else a, b - (1 << 64) if b >> 63 else b
    ref += [(a + b) & M, (a - b) & M, (a * b) & M, (a << s) & M, a >> s, (sa >> s) & M, min(a, b),
            int(sa < sb) | (((a ^ b) << 1) & M)]
  return 1, {0: v, 1: o}, lambda: np.testing.assert_array_equal(o, np.array(ref, np.uint64))


def _bitops_ref(x, y):
  def ext(v, off, bits, signed):
    f = (v >> off) & ((1 << bits) - 1)
    return (f - (1 << bits) if signed and f >> (bits - 1) else f) & M32
  rev = lambda v: int(f"{v:032b}"[::-1], 2)
  off, bits = y & 15, ((y >> 4) & 15) + 1
  m = ((1 << bits) - 1) << off
  sy = y - (1 << 32) if y >> 31 else y
  smsb = (sy if sy >= 0 else ~sy).bit_length() - 1
  return [ext(x, off, bits, False), ext(x, off, bits, True), (x & ~m | (y << off) & m) & M32,
          x.bit_length() - 1 & M32, smsb & M32, ((x & -x).bit_length() - 1) & M32, rev(x),
          ext(y, 3, 7, False) | rev(y) & 0xff000000]


def bitops():
  n = 64
  v = _rng().integers(0, 1 << 32, (n, 2), dtype=np.uint64).astype(np.uint32)
  v[0], v[1], v[2] = [0, 0], [M32, M32], [1, 0x7fffffff]
  o = np.zeros(8 * n, np.uint32)
  ref = np.array([r for x, y in v.tolist() for r in _bitops_ref(x, y)], np.uint32)
  return 1, {0: v, 1: o}, lambda: np.testing.assert_array_equal(o, ref)


CASES = {f.__name__: f for f in (saxpy, intmix, f16math, reduce_shared, subgroup, divergence, int64, bitops)}


@pytest.mark.parametrize("adreno", GPUS)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("tier", ["interp", "native"])
def test_mesa_kernel(name, adreno, tier, monkeypatch):
  monkeypatch.setenv("GPUTWIN_JIT", "0" if tier == "interp" else "1")
  grid, args, check = CASES[name]()
  # the interpreter with every checker on (none may fire on Mesa's code), the native tier without (it needs them off)
  launch(KERNELS / adreno / f"{name}.bin", "main", grid=(grid,), args=args, arch=adreno, checks=tier == "interp")
  check()
