"""The clang-22 kernel suite (kernels/suite.cl): inputs, launch shapes and numpy oracles, shared by tests and bench."""
from __future__ import annotations

import numpy as np


def _rng(seed=0):
  return np.random.default_rng(seed)


def saxpy(n=300):
  r = _rng(1)
  x, y = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
  out = np.zeros(n, np.float32)
  return dict(grid=-(-n // 64), block=64, args=[out, x, y, np.float32(1.75), n],
              check=lambda: (out, (np.float64(1.75) * x + y).astype(np.float32)))


def half_math(n=200):
  r = _rng(2)
  a, b = r.standard_normal(n).astype(np.float16), r.standard_normal(n).astype(np.float16)
  out = np.zeros(n, np.float16)
  return dict(grid=-(-n // 64), block=64, args=[out, a, b, n],
              check=lambda: (out, (a.astype(np.float32) * b + np.float32(1.5)).astype(np.float16)))


def int_ops(n=256):
  r = _rng(3)
  a = r.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
  b = r.integers(1, 1000, n).astype(np.int32) * r.choice([-1, 1], n).astype(np.int32)
  q, rem, bits = np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.uint32)
  u = a.view(np.uint32)

  def want():
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    qq = (np.abs(a64) // np.abs(b64) * np.sign(a64) * np.sign(b64)).astype(np.int32)  # C truncating division
    rr = (a.astype(np.int64) - qq.astype(np.int64) * b).astype(np.int32)
    pc = np.array([bin(int(v)).count("1") for v in u], np.uint32)
    clz = np.array([32 - int(v | 1).bit_length() for v in u], np.uint32)
    bb = (pc << np.uint32(24)) ^ (u >> np.uint32(3)) ^ (u << np.uint32(7)) ^ clz
    bb ^= b.view(np.uint32) & np.uint32(0xff00)
    return np.concatenate([q, rem, bits.view(np.int32)]), np.concatenate([qq, rr, bb.view(np.int32)])
  return dict(grid=-(-n // 64), block=64, args=[q, rem, bits, a, b, n], check=want)


def udiv64(n=128):
  r = _rng(4)
  a = r.integers(0, 2**63, n, dtype=np.uint64)
  b = r.integers(1, 2**40, n, dtype=np.uint64)
  out = np.zeros(n, np.uint64)
  return dict(grid=-(-n // 64), block=64, args=[out, a, b, n], check=lambda: (out, a // b + a % np.uint64(7)))


def fdiv(n=256):
  r = _rng(5)
  a = r.standard_normal(n).astype(np.float32) * 1e3
  b = r.standard_normal(n).astype(np.float32)
  out = np.zeros(n, np.float32)
  return dict(grid=-(-n // 64), block=64, args=[out, a, b, n], check=lambda: (out, a / b), rtol=3e-7)


def reduce(groups=3, block=128):
  r = _rng(6)
  x = r.integers(-100, 100, groups * block).astype(np.float32)
  out = np.zeros(groups, np.float32)
  return dict(grid=groups, block=block, args=[out, x], check=lambda: (out, x.reshape(groups, block).sum(axis=1)))


def matmul(N=32):
  r = _rng(7)
  A = r.integers(-4, 5, (N, N)).astype(np.float32)
  B = r.integers(-4, 5, (N, N)).astype(np.float32)
  C = np.zeros((N, N), np.float32)
  return dict(grid=(N // 16, N // 16), block=(16, 16), args=[C, A, B, N], check=lambda: (C, A @ B))


def histogram(n=500):
  r = _rng(8)
  x = r.integers(0, 1 << 20, n).astype(np.int32)
  hist, mx = np.zeros(16, np.int32), np.zeros(1, np.int32)
  return dict(grid=-(-n // 64), block=64, args=[hist, mx, x, n],
              check=lambda: (np.concatenate([hist, mx]),
                             np.concatenate([np.bincount(x & 15, minlength=16), [x.max()]]).astype(np.int32)))


def collatz(n=100):
  out = np.zeros(n, np.int32)

  def steps(v):
    s = 0
    while v != 1:
      v, s = (3 * v + 1 if v & 1 else v >> 1), s + 1
    return s
  return dict(grid=-(-n // 64), block=64, args=[out, n],
              check=lambda: (out, np.array([steps(i + 1) for i in range(n)], np.int32)))


def math(n=128):
  r = _rng(9)
  a = (r.standard_normal(n) * 3).astype(np.float32)
  out = np.zeros(4 * n, np.float32)

  def want():
    w = np.zeros((n, 4), np.float32)
    w[:, 0] = np.sqrt(np.abs(a))
    w[:, 1] = np.floor(a) + np.minimum(a, np.float32(0.25)) * np.copysign(np.float32(2), a)
    w[:, 2] = np.float32(1) / a
    w[:, 3] = np.trunc(a * np.float32(100)) + (a - np.floor(a))
    return out.reshape(n, 4), w
  return dict(grid=-(-n // 64), block=64, args=[out, a, n], check=want, rtol=1e-6)


def dmath(n=100):
  a = _rng(10).standard_normal(n)
  out = np.zeros(n)
  return dict(grid=-(-n // 64), block=64, args=[out, a, n], check=lambda: (out, a * a + 0.5 * a - 3.0), rtol=1e-14)


def private_array(n=96):
  idx = _rng(11).integers(0, 1000, n).astype(np.int32)
  out = np.zeros(n, np.int32)
  return dict(grid=-(-n // 32), block=32, args=[out, idx, n],
              check=lambda: (out, ((idx & 63) * np.arange(n)).astype(np.int32)))


def ids3d(grid=(2, 3, 2), block=(4, 2, 2)):
  G = [g * b for g, b in zip(grid, block)]
  out = np.zeros(G[2] * G[1] * G[0], np.uint32)

  def want():
    Z, Y, X = np.meshgrid(np.arange(G[2]), np.arange(G[1]), np.arange(G[0]), indexing="ij")
    x, y, z, gx, gy, gz = X % block[0], Y % block[1], Z % block[2], X // block[0], Y // block[1], Z // block[2]
    v = (x | y << 4 | z << 8 | gx << 12 | gy << 16 | gz << 20) ^ (block[0] << 24)
    return out, v.reshape(-1).astype(np.uint32)
  return dict(grid=grid, block=block, args=[out], check=want)


def narrow(n=100):
  r = _rng(13)
  a8 = r.integers(-128, 128, n).astype(np.int8)
  b16 = r.integers(-32768, 32768, n).astype(np.int16)
  c8, s16 = np.zeros(n, np.int8), np.zeros(n, np.int16)
  return dict(grid=-(-n // 64), block=64, args=[c8, s16, a8, b16, n],
              check=lambda: (np.concatenate([c8.astype(np.int32), s16]),
                             np.concatenate([(a8.astype(np.int32) * 3 - 7).astype(np.int8).astype(np.int32),
                                             ((b16 >> 2) + a8).astype(np.int16)])))


def convert(n=100):
  r = _rng(14)
  a = r.integers(-10**6, 10**6, n).astype(np.int32)
  b = r.standard_normal(n) * 100
  f, k, d = np.zeros(n, np.float32), np.zeros(n, np.int32), np.zeros(n)

  def want():
    return (np.concatenate([f.astype(np.float64), k, d]),
            np.concatenate([(a.astype(np.float32) * np.float32(0.5)).astype(np.float64),
                            np.trunc(b * 3.0).astype(np.int32),
                            b / (a | 1).astype(np.float64) + a]))
  return dict(grid=-(-n // 64), block=64, args=[f, k, d, a, b, n], check=want, rtol=1e-15)


def local_atomics(groups=3, block=64):
  x = _rng(15).integers(0, 1000, groups * block).astype(np.int32)
  out = np.zeros(groups * 8, np.int32)
  return dict(grid=groups, block=block, args=[out, x],
              check=lambda: (out, np.concatenate([np.bincount(g & 7, minlength=8) for g in x.reshape(groups, block)])))


def cross_lane(groups=2, block=64):
  x = _rng(16).integers(0, 1000, groups * block).astype(np.int32)
  out = np.zeros(groups * block, np.int32)

  def want(L):
    first = x.reshape(-1, L)[:, :1].repeat(L, axis=1).reshape(-1)
    return out, (first * 1000 + x[np.arange(len(x)) ^ 1]).astype(np.int32)
  return dict(grid=groups, block=block, args=[out, x], check=want, wave_dependent=True)


def nested(n=128):
  x = _rng(17).integers(0, 1000, n).astype(np.int32)
  out = np.zeros(n, np.int32)

  def ref(v):
    acc = 0
    for k in range(v & 15):
      if k & 1:
        acc += k * v
      elif k % 3 == 0:
        acc ^= k
        if acc > 100:
          break
      else:
        acc -= 1
    return acc
  return dict(grid=-(-n // 64), block=64, args=[out, x, n],
              check=lambda: (out, np.array([ref(int(v)) for v in x], np.int32)))


def calls(n=100):
  tbl = np.arange(16, dtype=np.int32) * 3
  out = np.zeros(n, np.int32)
  return dict(grid=2, block=64, args=[out, tbl, n], check=lambda: (out, tbl[np.arange(n) & 15] * np.arange(n) + 1))


def generic_ptr(groups=2, block=64):
  out = np.zeros(groups * block, np.int32)
  t = np.arange(groups * block) % block
  return dict(grid=groups, block=block, args=[out], check=lambda: (out, (t + 5) * 100 + t + np.where(t % 2 == 0, 7, 0)))


def subgroup(groups=2, block=64):
  n = groups * block
  x = (np.arange(n) * 3 + 1).astype(np.int32)
  out, a64, af = np.zeros(3 * n, np.int32), np.zeros(1, np.int64), np.zeros(1, np.float32)

  def want(L):
    i = np.arange(n)
    shr = np.where(i % 16 == 0, -1, x[i - 1])
    quad = x[(i & ~3) + 3 - (i & 3)]
    lo = np.minimum(i % L, 32)  # mbcnt_lo: active lanes below me, counting lanes 0..31 only
    got = np.concatenate([out, a64.view(np.int32), af.view(np.int32)])
    return got, np.concatenate([np.stack([shr, quad, lo], 1).reshape(-1).astype(np.int32),
                                np.array([(x.astype(np.int64) << 20).sum()]).view(np.int32),
                                np.array([np.float32((x & 7).sum())]).view(np.int32)])
  return dict(grid=groups, block=block, args=[out, x, a64, af], check=want, wave_dependent=True)


def mixed(n=96):
  r = _rng(18)
  a4 = r.integers(-50, 50, (n, 4)).astype(np.float32)
  h2 = r.integers(-8, 8, (n, 2)).astype(np.float16)
  rec = np.zeros(n, np.dtype([("x", "<f4"), ("k", "<i4"), ("s", "<i2"), ("c", "i1"), ("pad", "V1")]))
  rec["x"], rec["k"] = r.integers(0, 100, n) / 4, r.integers(-2**31, 2**31 - 1, n)
  rec["s"], rec["c"] = r.integers(-2**15, 2**15, n), r.integers(-128, 128, n)
  by = r.integers(0, 256, 3 * n).astype(np.uint8)
  o4, hh, u = np.zeros((n, 4), np.float32), h2.copy(), np.zeros(n, np.uint64)

  def want():
    M, w = (1 << 64) - 1, []
    for i in range(n):
      k, s_, c = int(rec["k"][i]), int(rec["s"][i]), int(rec["c"][i])
      v = ((k << 33) ^ (s_ & M) ^ ((c & M) << 8) ^ int(np.float32(rec["x"][i]) * np.float32(4))) & M
      v = (v + (128 - (v | 1).bit_length()) + int(by[3 * i + 1]) * 65536) & M
      v = [v ^ 0x1234, (v * 3) & M, v >> 5, ~v & M][i & 3]
      w.append((v + ((((i * 0x9e3779b97f4a7c15) & M) * 0x100000001) >> 64)) & M)
    o = a4 * np.float32([2, -1, 0.5, 3]) + a4[:, ::-1]
    hw = (h2.astype(np.float32) * h2 + np.float32([1, -2])).astype(np.float16)
    return (np.concatenate([o4.view(np.uint8).ravel(), hh.view(np.uint8).ravel(), u.view(np.uint8)]),
            np.concatenate([o.view(np.uint8).ravel(), hw.view(np.uint8).ravel(),
                            np.array(w, np.uint64).view(np.uint8)]))
  return dict(grid=-(-n // 64), block=64, args=[o4, a4, hh, rec, u, by, n], check=want)


def math2(n=64):
  r = _rng(19)
  a = (r.standard_normal(n) * 10).astype(np.float32)
  b = r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
  f, d, u = np.zeros(6 * n, np.float32), np.zeros(2 * n), np.zeros(4 * n, np.uint32)

  def bfe(v, o, w, signed=False):
    x = (v >> o) & ((1 << w) - 1)
    return (x - (1 << w) if signed and x >> (w - 1) else x) & 0xffffffff

  def want():
    x = a.astype(np.float64)
    F = np.stack([2 ** (x * 0.25), np.log2(np.abs(x) + 1), 1 / np.sqrt(np.abs(x) + 0.5), np.sin(2 * np.pi * x * 0.01),
                  np.ldexp(a, (b & 7).astype(np.int32) - 3), a.astype(np.float16)], 1)
    D = np.stack([np.sqrt(np.abs(x) + 2), np.trunc(x * 1e6) / 3 + (x * x - 1)], 1)
    U = []
    for v in b.tolist():
      nv = ~v & 0xffffffff
      align = (((v << 32) | ((v * 7) & 0xffffffff)) >> 11) & 0xffffffff
      perm = sum((((v << 32) | nv) >> (8 * sel) & 0xff) << (8 * k) for k, sel in enumerate([0, 1, 4, 5]))
      sad = sum(abs((v >> (8 * k) & 0xff) - (nv >> (8 * k) & 0xff)) for k in range(4)) + 3
      U.append([int(f"{v:032b}"[::-1], 2), bfe(v, 3, 9) ^ bfe(v, 5, 7, True), (align + perm) & 0xffffffff,
                2 * bin(v).count("1") + sad])
    # hardware transcendental approximations: compare to 1e-5 relative; exact results bit for bit
    ok = np.allclose(f.reshape(n, 6)[:, :4], F[:, :4], rtol=1e-5, atol=1e-6)
    got = np.concatenate([[ok], f.reshape(n, 6)[:, 4:].ravel(), d, u.astype(np.float64)])
    return got, np.concatenate([[True], F[:, 4:].ravel(), D.ravel(), np.array(U, np.float64).ravel()])
  return dict(grid=1, block=n, args=[f, d, u, a, b], check=want)


def lds_vec(groups=2):
  i4 = _rng(20).integers(-20, 20, (groups * 64, 4)).astype(np.float32)
  o4 = np.zeros_like(i4)
  blocks = i4.reshape(groups, 64, 4)
  rev = blocks[:, ::-1].reshape(-1, 4)
  acc = blocks[:, :, 0].sum(axis=1).repeat(64)[:, None]
  return dict(grid=groups, block=64, args=[o4, i4], check=lambda: (o4, rev + acc))


def dynlds(groups=2, block=64):
  x = _rng(21).standard_normal(groups * block).astype(np.float32)
  out = np.zeros_like(x)
  return dict(grid=groups, block=block, args=[out, x, block * 4], src="dynlds",
              check=lambda: (out, x.reshape(groups, block)[:, ::-1].ravel()))


CASES = {f.__name__: f for f in (saxpy, half_math, int_ops, udiv64, fdiv, reduce, matmul, histogram, collatz, math,
                                 dmath,
                                 private_array, ids3d,
                                 narrow, convert, local_atomics, cross_lane, nested, calls,
                                 generic_ptr, subgroup, mixed, math2, lds_vec)}
EXTRA = {"dynlds": dynlds}  # kernels with their own source file (kernels/<src>.cl)
