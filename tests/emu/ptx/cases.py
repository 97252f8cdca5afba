"""The CUDA kernel suite of the PTX emulator: one declarative list of cases (kernels/<file>.cu, launch shape, inputs
from a fixed seed, an independent numpy/fractions oracle, and how each output is compared).

Oracles are exact wherever the ISA is: IEEE ops in numpy's correctly rounded float16/32/64 arithmetic (+ - * / sqrt;
float16 through float32 is innocuous double rounding, 24 >= 2*11+2), fused and directed-rounding ops through
`fractions.Fraction` and `rnd` below, integer-valued floats where an order is the GPU's choice, and the GPU's order
replicated in numpy where it is fixed by the program (trees, butterflies). Only MUFU approximations use tolerances.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Union

import numpy as np

ARCHS = ("sm_80", "sm_90")
Dim = Union[int, tuple[int, ...]]
FULL = 0xFFFFFFFF


# ---- exact rounding of rationals (the oracle for fma, directed rounding and conversions)
FORMATS = {"f16": (10, -14, 15), "bf16": (7, -126, 127), "f32": (23, -126, 127), "f64": (52, -1022, 1023)}


def rnd(q: Fraction, fmt: str = "f32", mode: str = "rn") -> float:
  """q rounded to `fmt` (explicit mantissa bits, emin, emax) in IEEE mode rn (ties to even), rz, rd or ru; subnormals
  kept, overflow per IEEE (rn -> inf; directed modes -> inf or the largest finite). An exact zero of a sum is -0 only
  under rd (IEEE 754 6.3)."""
  man, emin, emax = FORMATS[fmt]
  if q == 0: return -0.0 if mode == "rd" else 0.0
  neg, a = q < 0, abs(q)
  e = a.numerator.bit_length() - a.denominator.bit_length()
  if Fraction(2) ** e > a: e -= 1
  ulp = Fraction(2) ** (max(e, emin) - man)
  n, rem = divmod(a, ulp)
  up = {"rn": rem > ulp / 2 or (rem == ulp / 2 and n % 2 == 1), "rz": False,
        "rd": neg and rem > 0, "ru": not neg and rem > 0}[mode]
  v = (n + up) * ulp
  big = (2 - Fraction(2) ** -man) * Fraction(2) ** emax
  if v > big: v = math.inf if mode == "rn" or (mode == "ru" and not neg) or (mode == "rd" and neg) else big
  return -float(v) if neg else float(v)


def F(x) -> Fraction: return Fraction(float(x))


def vround(fn, *xs, fmt="f32", mode="rn", dtype=np.float32) -> np.ndarray:
  """Elementwise exact op: fn on Fractions of the inputs, rounded once. With an inf/NaN input, fn in float64 (IEEE
  special cases need no rounding); an exact zero under rn takes its sign from float64 (IEEE 754 6.3: x*y + z with
  x*y exact or a signed zero)."""
  def one(v):
    f = [float(t) for t in v]
    if not all(map(math.isfinite, f)): return fn(*f)
    q = fn(*map(Fraction, f))
    return math.copysign(0.0, fn(*f)) if q == 0 and mode == "rn" else rnd(q, fmt, mode)
  with np.errstate(all="ignore"): return np.array([one(v) for v in zip(*xs)], dtype)


def bf16_bits(x) -> np.ndarray:
  """float32 values that are bf16 -> their 16-bit patterns (exact: the low half is zero)."""
  u = np.asarray(x, np.float32).view(np.uint32)
  assert not (u & 0xFFFF).any()
  return (u >> 16).astype(np.uint16)


def bf16_vals(bits) -> np.ndarray: return (bits.astype(np.uint32) << 16).view(np.float32)


def wrap(v, dtype) -> np.ndarray:
  """Python ints -> two's complement wrap into dtype."""
  bits = np.iinfo(dtype).bits
  u = np.array([int(x) % (1 << bits) for x in v], np.uint64 if bits == 64 else np.uint32)
  return u.view(np.dtype(dtype)) if bits in (32, 64) else u.astype(dtype)


def cdiv(a: int, b: int) -> int: return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C: toward zero


def crem(a: int, b: int) -> int: return a - cdiv(a, b) * b


# ---- how outputs are compared
@dataclass(frozen=True)
class Tol:
  """Approximate: an element passes within `ulp` float32 ulps or `atol` absolutely; per equal-length segment of the
  output when given as tuples (one bound per op)."""
  ulp: tuple[float, ...]
  atol: tuple[float, ...]


Check = Union[str, Tol]  # "bits" (equal bit patterns; a NaN matches any NaN) or Tol


@dataclass(frozen=True)
class Case:
  """kernel of kernels/<file>.cu on grid x block; `build(rng)` makes the args, `ref(args)` sees a copy of them taken
  before the launch and returns {arg index: expected}, or {"verify": f(args after, _)} where the values depend on the
  schedule (atomics' returns); `check` says how to compare (one Check for every output, or {index: Check})."""
  file: str
  kernel: str
  grid: Dim
  block: Dim
  build: Callable[[np.random.Generator], list]
  ref: Callable[[list], dict]
  check: Check | dict = "bits"
  shared_bytes: int = 0
  archs: tuple[str, ...] = ARCHS
  name: str = ""

  @property
  def id(self) -> str: return self.name or self.kernel

  def rng(self) -> np.random.Generator: return np.random.default_rng(zlib.crc32(self.id.encode()))


def spread(r, n, lo=-3, hi=3, dtype=np.float32) -> np.ndarray:
  """Nonzero values of both signs over decades 10^lo..10^hi."""
  return (r.standard_normal(n) * 10.0 ** r.uniform(lo, hi, n)).astype(dtype)


def segs(*parts) -> np.ndarray: return np.concatenate([np.asarray(p).ravel() for p in parts])


# ---- elementwise
def b_ew(dtype, n=300):
  def build(r):
    a, b, c = (spread(r, n, dtype=dtype) for _ in range(3))
    big, tiny, sub = np.finfo(dtype).max / 4, np.finfo(dtype).smallest_normal, np.finfo(dtype).smallest_subnormal
    # IEEE special cases first: inf - inf, 0 / 0, x / -0, signed zeros, subnormal operands and results, overflow
    a[:12] = [np.inf, np.inf, np.nan, 0.0, -0.0, tiny, big, -sub, 1.0, 5.0, tiny * 3, -np.inf]
    b[:12] = [np.inf, -np.inf, 1.0, 0.0, 0.0, 0.75, 10.0, 0.5, 0.0, -0.0, -tiny * 2.5, 2.0]
    c[:12] = [1.0, 1.0, 1.0, -0.0, 0.0, -tiny, 1.0, sub, 1.0, 1.0, 3.0, np.inf]
    # fma's single rounding: a*b + c computed in float64 and then rounded to the type gets these wrong (the exact
    # value is a hair past a float32 midpoint / below float64's precision)
    a[12:16], b[12:16] = [1 + 2**-12, -(1 + 2**-12), 1 + 2**-27, 1 + 2**-27], [1 + 2**-12, 1 + 2**-12, 1 + 2**-27, 3.0]
    c[12:16] = [2.0**-80, -2.0**-80, -(1 + 2**-26), 2.0**-100]
    return [np.zeros(7 * n, dtype), a, b, c, np.int32(n)]
  return build


def r_ew(args):
  _, a, b, c, n = args
  fmt = "f32" if a.dtype == np.float32 else "f64"
  with np.errstate(all="ignore"):
    last = (-a) * a.dtype.type(0.5) + np.abs(b) if fmt == "f32" else a.astype(np.float32).astype(np.float64) + \
      np.arange(n)
    return {0: segs(a + b, a - b, a * b, a / b, vround(lambda x, y, z: x * y + z, a, b, c, fmt=fmt, dtype=a.dtype),
                    np.sqrt(np.abs(a)), last)}


def b_f16(r, n=256):
  a, b, c = (r.standard_normal(n).astype(np.float16).view(np.uint16) for _ in range(3))
  return [np.zeros(8 * n, np.uint16), a, b, c, np.int32(n)]


def r_f16(args):
  _, a, b, c, n = args
  x, y = a.view(np.float16), b.view(np.float16)
  fma = vround(lambda p, q, s: p * q + s, x, y, c.view(np.float16), fmt="f16", dtype=np.float16)
  return {0: segs(*(v.view(np.uint16) for v in (x + y, x - y, x * y, fma, -x, np.maximum(x, y), np.minimum(x, y))),
                  (x < y).astype(np.uint16))}


def b_f16x2(r, n=200):
  a, b, c = (r.standard_normal(2 * n).astype(np.float16).view(np.uint32) for _ in range(3))
  return [np.zeros(4 * n, np.uint32), a, b, c, np.int32(n)]


def r_f16x2(args):
  _, a, b, c, n = args
  x, y, z = (v.view(np.float16) for v in (a, b, c))
  fma = vround(lambda p, q, s: p * q + s, x, y, z, fmt="f16", dtype=np.float16)
  return {0: segs(*(v.view(np.uint32) for v in (x + y, x * y, fma, x - y)))}


def b_bf16(r, n=256):
  a, b, c = (bf16_bits([rnd(F(v), "bf16") for v in spread(r, n, -2, 2)]) for _ in range(3))
  f = spread(r, n, -5, 5)
  f[:16] = ((np.arange(16, dtype=np.uint32) + 0x3F80) << 16 | 0x8000).view(np.float32)  # exact ties
  return [np.zeros(6 * n, np.uint16), a, b, c, f, np.int32(n)]


def r_bf16(args):
  _, a, b, c, f, n = args
  x, y, z = bf16_vals(a), bf16_vals(b), bf16_vals(c)
  bf = lambda fn, *v: bf16_bits(vround(fn, *v, fmt="bf16"))
  times3 = np.array([rnd(F(rnd(F(v) * 3, "f32")), "bf16") for v in x], np.float32)  # f32 product, then to bf16
  return {0: segs(bf(lambda p, q: p + q, x, y), bf(lambda p, q: p - q, x, y), bf(lambda p, q: p * q, x, y),
                  bf(lambda p, q, s: p * q + s, x, y, z), bf(lambda p: p, f), bf16_bits(times3))}


# ---- integers
I32_MIN, I64_MIN = -2**31, -2**63


def b_divrem(r, n=256):
  a = r.integers(I32_MIN + 1, 2**31, n, dtype=np.int64)
  a[:8] = [0, 1, -1, 2**31 - 1, I32_MIN + 1, 7, -7, 100]
  b = np.where(r.random(n) < 0.5, r.integers(1, 1000, n), r.integers(1, 2**31, n)) * r.choice([-1, 1], n)
  b[:8] = [1, -1, 3, -2, 2**31 - 1, -7, 7, -(2**31 - 1)]
  return [np.zeros(7 * n, np.int32), a.astype(np.int32), b.astype(np.int32), np.int32(n)]


def r_divrem(args):
  _, a, b, n = args
  A, B = [int(v) for v in a], [int(v) for v in b]
  U, V = [v % 2**32 for v in A], [v % 2**32 for v in B]
  rows = [[cdiv(x, y) for x, y in zip(A, B)], [crem(x, y) for x, y in zip(A, B)], [x // y for x, y in zip(U, V)],
          [x % y for x, y in zip(U, V)], [cdiv(x, 7) for x in A], [crem(x, -5) for x in A], [x // 10 for x in U]]
  return {0: wrap(sum(rows, []), np.int32)}


def b_bits(r, n=256):
  a, b, s = (r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
  a[:6] = [0, 0xFFFFFFFF, 0x80000000, 1, 0x00F0F000, 0x7FFFFFFF]
  s[:8] = [0, 31, 32, 33, 63, 64, 0x8888, 0xFFFF]
  return [np.zeros(16 * n, np.uint32), a, b, s, np.int32(n)]


def prmt(x: int, y: int, s: int) -> int:
  """PTX ISA prmt.b32 generic form: byte i picks byte (ctl & 7) of {y, x}; ctl bit 3 replicates its sign."""
  t, out = y << 32 | x, 0
  for i in range(4):
    ctl = s >> 4 * i & 0xF
    byte = t >> 8 * (ctl & 7) & 0xFF
    if ctl & 8: byte = 0xFF if byte & 0x80 else 0
    out |= byte << 8 * i
  return out


def r_bits(args):
  _, a, b, s, n = args
  M = 2**32 - 1
  pc = lambda v: bin(v).count("1")
  clz = lambda v, w=32: w - v.bit_length()
  rows = [[] for _ in range(16)]
  for x, y, sh in zip(*(map(int, v) for v in (a, b, s))):
    hl, k, kc = (y << 32) | x, sh & 31, min(sh & 63, 32)
    sx = x - (1 << 32) if x >> 31 else x
    vals = [pc(x), clz(x), int(f"{x:032b}"[::-1], 2), prmt(x, y, sh & 0x7777), prmt(x, y, sh),
            (hl << k) >> 32 & M, (hl >> k) & M, (hl << kc) >> 32 & M, (hl >> kc) & M, ((x << k) | (x >> (32 - k))) & M,
            (x << k) & M, (sx >> k) & M, x >> k, (x & -x).bit_length(), (x & ~y) ^ (x | (y >> 3)),
            pc(x) + pc(y) + clz(y, 64)]
    for row, v in zip(rows, vals): row.append(v)
  return {0: wrap(sum(rows, []), np.uint32)}


def b_mul(r, n=256):
  a, b, c = (r.integers(I32_MIN + 1, 2**31, n, dtype=np.int64).astype(np.int32) for _ in range(3))
  a[:4], b[:4] = [-1, 2**31 - 1, -128, 0x7F7F7F7F], [-1, 2**31 - 1, -128, 0x80808081 - 2**32]
  return [np.zeros(12 * n, np.int32), a, b, c, np.int32(n)]


def r_mul(args):
  _, a, b, c, n = args
  sb = lambda v, i, w=8: ((v >> w * i) & (1 << w) - 1) - ((v >> (w * i + w - 1) & 1) << w)  # signed field
  ub = lambda v, i: (v >> 8 * i) & 0xFF
  rows = [[] for _ in range(12)]
  for x, y, z in zip(*(map(int, v) for v in (a, b, c))):
    ux, uy = x % 2**32, y % 2**32
    vals = [(x * y) >> 32, (ux * uy) >> 32, z + sum(sb(ux, i) * sb(uy, i) for i in range(4)),
            z + sum(ub(ux, i) * ub(uy, i) for i in range(4)), z + sb(ux, 0, 16) * sb(uy, 0) + sb(ux, 1, 16) * sb(uy, 1),
            x * y + z, (x >> 8) * (y >> 8), (x + y) >> 1, (x + y + 1) >> 1, abs(x - y) + z, min(x, y) ^ max(x, z),
            abs(y)]
    for row, v in zip(rows, vals): row.append(v)
  return {0: wrap(sum(rows, []), np.int32)}


def b_i64(r, n=256):
  a = r.integers(I64_MIN + 1, 2**63, n, dtype=np.int64)
  b = np.where(r.random(n) < 0.5, r.integers(1, 2**20, n), r.integers(1, 2**63, n, dtype=np.int64))
  b *= r.choice([-1, 1], n)
  a[:4], b[:4] = [0, -1, 2**63 - 1, I64_MIN + 1], [-1, 3, -2, 2**63 - 1]
  return [np.zeros(10 * n, np.int64), a, b.astype(np.int64), np.int32(n)]


def r_i64(args):
  _, a, b, n = args
  M = 2**64 - 1
  rows = [[] for _ in range(10)]
  for x, y in zip(map(int, a), map(int, b)):
    ux, uy = x % 2**64, y % 2**64
    vals = [cdiv(x, y), crem(x, y), ux // uy, ux % uy, ux * uy + 12345, (x * y) >> 64, (ux * uy) >> 64, x >> (y & 63),
            (ux >> (y & 63)) ^ ((ux << (x & 63)) & M), int(f"{ux:064b}"[::-1], 2) + (x < y)]
    for row, v in zip(rows, vals): row.append(v)
  return {0: wrap(sum(rows, []), np.int64)}


# ---- matmul, reductions, scans
def b_matmul(r, M=32, N=48, K=64):
  A, B = (r.integers(-8, 9, s).astype(np.float32) for s in ((M, K), (K, N)))
  return [np.zeros((M, N), np.float32), A, B, np.int32(M), np.int32(N), np.int32(K)]


def b_reduce(r, groups=4, block=256):
  return [np.zeros(groups, np.float32), r.standard_normal(groups * block).astype(np.float32)]


def r_reduce(args):
  s = args[1].reshape(len(args[0]), -1).copy()
  stride = s.shape[1] // 2
  while stride:
    s[:, :stride] = s[:, :stride] + s[:, stride:2 * stride]
    stride //= 2
  return {0: s[:, 0]}


def lanes(x) -> np.ndarray: return np.asarray(x).reshape(-1, 32)


def r_shfl_down(args):
  v = lanes(args[1]).copy()
  for off in (16, 8, 4, 2, 1):
    t = v.copy()
    t[:, :32 - off] = v[:, off:]  # lanes past the end read their own value
    v = v + t
  return {0: v.ravel()}


def r_shfl_xor(args):
  v, idx = lanes(args[2]).copy(), np.arange(32)
  for m in (1, 2, 4, 8, 16): v = v + v[:, idx ^ m]
  w = lanes(np.arange(args[2].size, dtype=np.int64)).copy()
  for m in (1, 2, 4): w = np.maximum(w, (w * 3 % 17)[:, idx ^ m])
  return {0: v.ravel(), 1: w.ravel().astype(np.int32)}


def r_scan_up(args):
  x = lanes(args[1]).astype(np.int64)
  full, seg = np.cumsum(x, 1), np.cumsum(x.reshape(-1, 16), 1).reshape(-1, 32)
  return {0: np.stack([full, seg], -1).ravel().astype(np.int32)}


def r_shfl_idx(args):
  x, s = lanes(args[2]), lanes(args[3])
  lane, rows = np.arange(32), np.arange(x.shape[0])[:, None]
  full, seg = x[rows, s & 31], x[rows, (lane & ~7) + (s & 7)]
  w = (x.astype(np.int64) << 32) ^ np.arange(x.size).reshape(x.shape)
  return {0: np.stack([full, seg], -1).ravel(), 1: w[rows, 31 - (s & 31)].ravel()}


def r_block_scan(args): return {0: np.cumsum(args[1].reshape(-1, 256), 1).ravel().astype(np.int32)}


# ---- warp votes
def b_vote(r, n=128):
  x = r.integers(-89, 90, n).astype(np.int32)
  x[5], x[32 + 9] = 95, -95  # warp 0: one lane > 90; warp 1: one lane <= -90
  x[64:96][x[64:96] == 0] = 1  # warp 2: no zeros
  x[7], x[96 + 7] = 0, 0
  return [np.zeros(6 * n, np.uint32), x, np.int32(n)]


def ballot(p) -> np.ndarray:
  """Per-warp ballot of a (warps, 32) bool array, broadcast back to every lane."""
  m = (np.asarray(p, np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)
  return np.repeat(m, 32)


def r_vote(args):
  x = lanes(args[1])
  up = np.arange(32) >= 16
  half = np.where(np.tile(up, len(x)), ballot(((x & 2) != 0) & up), ballot(((x & 4) != 0) & ~up))
  return {0: segs(ballot(x > 0), ballot(x > 90) != 0, ballot(x > -90) == FULL, ballot(x != 0) == FULL,
                  ballot((x & 1) != 0), half).astype(np.uint32)}


def b_match(r, n=128):
  key = r.integers(0, 4, n).astype(np.int32)
  key[32 + 3] |= 0x100  # warp 1 disagrees on bit 8, the others agree
  key64 = (r.integers(0, 3, n).astype(np.int64) << 33) + 5
  return [np.zeros(4 * n, np.uint32), key, key64, np.int32(n)]


def r_match(args):
  k, k64 = lanes(args[1]), lanes(args[2])
  same = lambda v: np.array([sum(1 << j for j in range(32) if w[j] == w[i]) for w in v for i in range(32)])
  allsame = np.repeat([((w & 0x100) == (w[0] & 0x100)).all() for w in k], 32)
  return {0: segs(same(k), same(k64), np.where(allsame, FULL, 0), allsame).astype(np.uint32)}


def r_redux(args):
  x = lanes(args[1]).astype(np.uint64)
  s = lanes(args[1].view(np.int32)).astype(np.int64)
  rep = lambda v: np.repeat(np.asarray(v, np.int64) & FULL, 32)
  andv = np.bitwise_and.reduce(x, 1)
  orv, xorv = np.bitwise_or.reduce(x, 1), np.bitwise_xor.reduce(x, 1)
  odd = np.tile(np.arange(32) & 1, len(x)).astype(bool)
  part = np.where(odd, rep(x[:, 1::2].sum(1)), rep((x[:, 0::2] >> 4).sum(1)))
  return {0: segs(rep(x.sum(1)), rep(x.min(1)), rep(x.max(1)), rep(s.min(1)), rep(s.max(1)), rep(andv ^ orv),
                  rep(xorv), part).astype(np.uint32)}


def b_block_votes(r):
  x = r.integers(-99, 96, 3 * 128).astype(np.int32)
  x[128 + 17], x[256 + 40] = -100, 99  # block 1: not all > -100; block 2: one > 95
  return [np.full(9, -1, np.int32), x]


def r_block_votes(args):
  x = args[1].reshape(3, 128)
  return {0: np.stack([(x > 0).sum(1), (x > -100).all(1), (x > 95).any(1)], 1).ravel().astype(np.int32)}


# ---- atomics
def r_incdec(args):
  ctr, _, n, lim = args
  n, lim, inc, dec, v, d = int(n), int(lim), [], [], int(ctr[0]), int(ctr[1])
  for _ in range(n):
    inc.append(v)
    v = 0 if v >= lim else v + 1
    dec.append(d)
    d = lim if d == 0 or d > lim else d - 1
  ids = list(range(1000, 1000 + n))
  def check(got, want):
    g_ctr, g_olds = got[0], got[1].reshape(3, n)
    assert list(g_ctr[:2]) == [v, d], f"final inc/dec counters {list(g_ctr[:2])}, want {[v, d]}"
    assert sorted(g_olds[0]) == sorted(inc), "atomicInc: the old values are not the inc sequence"
    assert sorted(g_olds[1]) == sorted(dec), "atomicDec: the old values are not the dec sequence"
    assert sorted([*g_olds[2], g_ctr[2]]) == sorted([int(ctr[2]), *ids]), "atomicExch lost or duplicated a value"
  return {"verify": check}


def r_minmax(args):
  r, u, r64, x, n = args
  v = [int(t) for t in x]
  andv, orv, xorv = -1, 0, 0
  for i, t in enumerate(v):
    andv &= ~(1 << (i & 31)) | t
    orv |= t & (1 << (i & 31))
    xorv ^= t
  uv = [t % 2**32 for t in v]
  return {0: wrap([min(v + [int(r[0])]), max(v + [int(r[1])]), andv, orv, xorv, int(r[5]) - sum(v)], np.int32),
          1: wrap([min(uv + [int(u[0])]), max(uv + [int(u[1])])], np.uint32),
          2: np.array([min(min(v) * 1000003, int(r64[0])), max(max(v) * 1000003, int(r64[1]))], np.int64)}


def b_cas(r, n=200):
  x = (r.standard_normal(n) * 100).astype(np.float32)
  return [np.array([-np.inf], np.float32), np.zeros(1, np.float32), np.zeros(1, np.float64), np.zeros(1, np.uint64),
          x, np.int32(n)]


def r_cas(args):
  mx, _, _, _, x, n = args
  ints = np.rint(x).astype(np.float64)  # rintf: ties to even, like np.rint
  return {0: np.array([max(mx[0], x.max())], np.float32), 1: np.array([ints.sum()], np.float32),
          2: np.array([(ints * 0.25).sum()]), 3: wrap([sum((i + 1) << 33 for i in range(int(n)))], np.uint64)}


# ---- control flow
def r_loops(args):
  out = []
  for x in map(int, args[1]):
    v, steps, odd = x, 0, 0
    while v != 1:
      steps += 1
      if steps > 500: break
      if v & 1: v, odd = (3 * v + 1) % 2**32, odd + 1
      else: v >>= 1
    acc = 0
    for k in range(x & 63):
      if k % 3 == 1: continue
      if acc > 200: break
      acc += k ^ (x >> 8 & 7)
    out += [steps, odd, acc]
  return {0: np.array(out, np.int32)}


def r_diverge(args):
  out = []
  for w in lanes(args[1]):
    v = []
    for lane, t in enumerate(map(int, w)):
      if lane & 1:
        t = t * 3 + 1
        t = t - lane if t & 4 else t ^ 0x55
      elif lane < 20:
        k = 0
        while k < (t & 7): t, k = t + k, k + 1
      else: t = -t
      v.append(t)
    a = [v[l ^ 1] for l in range(32)]
    m = sum(v[l] > a[l] for l in range(32))
    out += [v[l] + 7 * a[l] - v[(l + 5) & 31] + m for l in range(32)]
  return {0: np.array(out, np.int32)}


def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)


def ack(m, n): return n + 1 if m == 0 else ack(m - 1, 1) if n == 0 else ack(m - 1, ack(m, n - 1))


def r_recursion(args): return {0: np.array([(fib(v % 12), ack(v % 3, v % 4)) for v in map(int, args[1])], np.int32)}


GRID3, BLOCK3 = (3, 2, 2), (4, 2, 3)


def r_ids3d(args):
  rows = [(bx, by, bz, tx, ty, tz, 30202, 40203)
          for bz in range(GRID3[2]) for by in range(GRID3[1]) for bx in range(GRID3[0])
          for tz in range(BLOCK3[2]) for ty in range(BLOCK3[1]) for tx in range(BLOCK3[0])]
  return {0: np.array(rows, np.int32).ravel()}


def r_spin(args):
  out = []
  for w in lanes(args[1]):
    v = [int(t) % 2**32 for t in w]
    for _ in range(50): v = [(t * 1103515245 + 12345) % 2**32 for t in v]
    out += v[::-1]
  return {0: wrap(out, np.int32)}


def r_local(args):
  out = []
  for v in (int(t) % 2**32 for t in args[1]):
    buf = [((v * (k + 1)) % 2**32) ^ k for k in range(24)]
    for k in range(8): buf[(v >> 3 * k) % 24] += k
    out += [buf[v % 24], buf[(v >> 5) % 24] - buf[(v >> 9) % 24]]
  return {0: wrap(out, np.int32)}


CTABLE, CSCALE = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3], [0.5, -2.25]  # memspace.cu's initialisers
GTABLE = [100 * (k + 1) for k in range(8)]


def r_const(args):
  k = args[2]
  return {0: (np.take(CTABLE, k & 15) * np.take(CSCALE, k >> 4 & 1)).astype(np.float32),
          1: (np.take(GTABLE, k & 7) + np.take(CTABLE, (k >> 2) & 15)).astype(np.int32)}


def r_counter(args):
  n = int(args[1])
  def check(got, want):
    t = np.sort(got[0].astype(np.int64))
    assert (t == t[0] + np.arange(n)).all(), f"global_counter: tickets are not {n} consecutive numbers: {t[:8]}..."
  return {"verify": check}


# ---- shared memory, groups, async copies, tensor cores, look-back scan
def r_carve(args):
  x, y = args[1].reshape(2, -1), args[2].reshape(2, -1)
  return {0: (np.roll(x, -1, 1) * 2.0 + np.roll(y, 1, 1)).ravel()}


def r_tile16(args):
  out = []
  for g, w in enumerate(np.asarray(args[1]).reshape(-1, 16)):
    v = [int(t) for t in w]
    for r in range(16):
      out += [sum(v), max(v), v[r + 3] if r + 3 < 16 else v[r], v[(r + 5) % 16], v[r - 1] if r else v[r],
              (g % 4) * 100 + r]
  return {0: np.array(out, np.int32)}


def b_pipeline(r, blocks=2, ntiles=5):
  return [np.zeros(blocks * 128, np.float32), r.integers(-8, 9, blocks * ntiles * 128 * 4).astype(np.float32),
          np.int32(ntiles)]


def r_pipeline(args):
  out, g, ntiles = args
  g = g.reshape(-1, int(ntiles), 128, 4).astype(np.float64)
  t, acc = np.arange(128), np.zeros((g.shape[0], 128))
  for k in range(int(ntiles)):
    v = g[:, k, (t + k) & 127]
    acc += (v[..., 0] - v[..., 1]) * (k + 1) + v[..., 2] * v[..., 3]
  return {0: acc.ravel().astype(np.float32)}


def r_zfill(args):
  g = args[1].astype(np.int64)
  s = np.concatenate([np.where(np.arange(128) % 3 == 0, 0, g[:128]), g[128:]])
  return {0: np.concatenate([s[::-1][:128] + 3 * s[:128], s[128:]]).astype(np.int32)}


def b_mma(r):
  A, B = r.integers(-3, 4, (32, 32)).astype(np.float16), r.integers(-3, 4, (32, 16)).astype(np.float16)
  return [np.zeros((32, 16), np.float32), A, B]


def b_wmma(r):
  A, B = (r.integers(-3, 4, (32, 32)).astype(np.float16) for _ in range(2))
  return [np.zeros(32 * 32, np.float32), np.zeros(32 * 32, np.float32), A, B,
          r.integers(-50, 51, (32, 32)).astype(np.float32)]


def r_wmma(args):
  _, _, A, B, C0 = args
  P = A.astype(np.float64) @ B.astype(np.float64).T  # B is stored column-major
  return {0: P.astype(np.float32).ravel(), 1: (P + C0).T.astype(np.float32).ravel()}


def b_lookback(r, tiles=6):
  z = lambda k: np.zeros(k, np.int32)
  return [z(tiles * 128), r.integers(-50, 51, tiles * 128).astype(np.int32), z(tiles), z(tiles), z(tiles), z(1)]


def r_lookback(args):
  x, tiles = args[1], len(args[2])
  inc = np.cumsum(x).astype(np.int32)
  agg = x.reshape(tiles, 128).sum(1).astype(np.int32)
  agg[0] = 0  # tile 0 publishes its prefix only
  return {0: inc, 2: np.full(tiles, 2, np.int32), 3: agg, 4: inc[127::128], 5: np.array([tiles], np.int32)}


# ---- math built-ins
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.5000002, 0.49999997, 3e9, -3e9,
           5e9, -1e10, 2147483520.0, -2147483648.0, 4294967040.0, 0.0, 1e-40, -1e-40, 0.9999999, 1.0000001, -0.3]


def b_math(r, n=256):
  a, b = spread(r, n, -6, 5.5), spread(r, n, -6, 5.5)
  a[:4] = [65504.0, 65520.0, 65519.996, 6e-8]  # f16 max, first rounding to inf, just below, f16 subnormal
  s = (r.standard_normal(n) * 10.0 ** r.integers(0, 3, n)).astype(np.float32)
  s[:len(SPECIAL)] = SPECIAL
  s[len(SPECIAL)] = np.uint32(0xFFC00001).view(np.float32)  # a negative NaN with payload
  c = spread(r, n, -2, 2)
  c[r.random(n) < 0.2] = np.nan
  k = r.integers(I32_MIN, 2**31, n).astype(np.int32)
  k[:3] = [16777217, -16777219, I32_MIN]
  return [np.zeros(18 * n, np.float32), np.zeros(10 * n, np.int32), a, b, s, c, k, np.int32(n)]


def cvt_int(v, fn, lo, hi) -> np.ndarray:
  """PTX cvt float -> integer: round by fn, clamp to the destination range, NaN -> 0."""
  with np.errstate(invalid="ignore"):
    t = np.clip(fn(v.astype(np.float64)), lo, hi)
  return np.where(np.isnan(t), 0, t).astype(np.int64)


def r_math(args):
  _, _, a, b, s, c, k, n = args
  f16 = lambda v: np.array([rnd(F(t), "f16") for t in v], np.float16)
  with np.errstate(invalid="ignore"):
    sat = np.where(np.isnan(s) | (s <= 0), np.float32(0), np.where(s > 1, np.float32(1), s))
    f = segs(np.sqrt(np.abs(a)), a / b, vround(lambda x, y: x * y, a, b, mode="rz"),
             vround(lambda x, y: x + y, a, b, mode="rd"), vround(lambda x, y: x + y, a, b, mode="ru"),
             vround(lambda x, y: x * y + x, a, b, mode="rz"), np.rint(s), np.trunc(s), np.floor(s), np.ceil(s),
             np.copysign(s, c), np.fmin(s, c), np.fmax(s, c), sat,
             np.array([rnd(Fraction(int(t)), "f32", "rz") for t in k], np.float32), k.astype(np.float32),
             f16(a).astype(np.float32), np.sqrt(np.abs(b))).astype(np.float32)
  i = segs(*(cvt_int(s, fn, I32_MIN, 2**31 - 1) for fn in (np.trunc, np.rint, np.floor, np.ceil)),
           wrap(cvt_int(s, np.trunc, 0, 2**32 - 1), np.int32), f16(a).view(np.uint16), np.isnan(s), np.isinf(s),
           np.isfinite(c), np.signbit(s))
  return {0: f, 1: wrap(i, np.int32)}


def b_approx(r, n=256):
  return [np.zeros(8 * n, np.float32), r.uniform(-3, 3, n).astype(np.float32), r.uniform(0.25, 8, n).astype(np.float32),
          np.int32(n)]


def r_approx(args):
  _, a, b, _ = args
  x, y = a.astype(np.float64), b.astype(np.float64)
  return {0: segs(np.exp(x), np.log(y), np.sin(x), np.cos(x), 1 / np.sqrt(y), x / y, np.exp2(x),
                  np.log2(y)).astype(np.float32)}


# Error bounds of the CUDA C Programming Guide (Intrinsic Functions / Single-Precision Mathematical Functions), plus
# one ulp for rounding the float64 reference to float32: __expf 2 + floor(|1.173 x|) ulp (|x| <= 3: 5); __logf 2^-21.41
# absolute on [0.5, 2], else 3 ulp; __sinf/__cosf 2^-21.41 absolute on [-pi, pi]; rsqrtf, __fdividef, exp2f 2 ulp;
# __log2f 2^-22 absolute on [0.5, 2], else 2 ulp.
APPROX = Tol(ulp=(6, 4, 0, 0, 3, 3, 3, 3),
             atol=(0, 2**-21.41 + 2**-24, 2**-21.41 + 2**-24, 2**-21.41 + 2**-24, 0, 0, 0, 2**-22 + 2**-24))


# Argument specs: Z zeroed, I random integers in [lo, hi), N standard normals; anything else is passed as is (arrays
# copied, so a case's fixed inputs stay fixed).
def Z(n, t=np.int32): return lambda r: np.zeros(n, t)
def I(n, lo, hi, t=np.int32): return lambda r: r.integers(lo, hi, n).astype(t)
def N(n, t=np.float32): return lambda r: r.standard_normal(n).astype(t)


def A(*spec) -> Callable[[np.random.Generator], list]:
  return lambda r: [s(r) if callable(s) else s.copy() if isinstance(s, np.ndarray) else s for s in spec]


f32, i32, u32, i64, u64 = np.float32, np.int32, np.uint32, np.int64, np.uint64
HIST = A(Z(37), I(1000, 0, 2**31), i32(1000), i32(37))
LOOPS = lambda r: [np.zeros(600, i32), np.r_[[0, 1, 27, 2**32 - 1], r.integers(1, 10**5, 196)].astype(u32), i32(200)]
MINMAX = A(np.array([2**31 - 1, I32_MIN, -1, 0, 0, 9], i32), np.array([FULL, 0], u32), np.array([2**63 - 1, I64_MIN]),
           I(256, I32_MIN, 2**31), i32(256))

CASES: list[Case] = [
  # elementwise IEEE in every float type
  Case("elementwise", "ew_f32", 3, 128, b_ew(np.float32), r_ew),
  Case("elementwise", "ew_f64", 3, 128, b_ew(np.float64), r_ew),
  Case("elementwise", "ew_f16", 2, 128, b_f16, r_f16),
  Case("elementwise", "ew_f16x2", 2, 128, b_f16x2, r_f16x2),
  Case("elementwise", "ew_bf16", 4, 64, b_bf16, r_bf16),
  # integer corner cases
  Case("intops", "int_divrem", 2, 128, b_divrem, r_divrem),
  Case("intops", "int_bits", 2, 128, b_bits, r_bits),
  Case("intops", "int_mul", 4, 64, b_mul, r_mul),
  Case("intops", "int64_ops", 2, 128, b_i64, r_i64),
  # shared memory and barriers, shuffles, votes, scans
  Case("matmul", "matmul_tiled", (3, 2), (16, 16), b_matmul, lambda a: {0: (a[1] @ a[2]).astype(f32)}),
  Case("reduce", "block_reduce", 4, 256, b_reduce, r_reduce, shared_bytes=256 * 4),
  Case("reduce", "warp_shfl_down", 2, 64, A(Z(128, f32), N(128)), r_shfl_down),
  Case("reduce", "warp_shfl_xor", 2, 64, A(Z(128, f32), Z(128), N(128)), r_shfl_xor),
  Case("reduce", "warp_scan_up", 2, 64, A(Z(256), I(128, -10**6, 10**6)), r_scan_up),
  Case("reduce", "warp_shfl_idx", 2, 64, A(Z(256), Z(128, i64), I(128, -10**6, 10**6), I(128, -40, 80)), r_shfl_idx),
  Case("reduce", "block_scan", 3, 256, A(Z(768), I(768, -1000, 1000)), r_block_scan),
  Case("vote", "warp_vote", 2, 64, b_vote, r_vote),
  Case("vote", "warp_match", 2, 64, b_match, r_match),
  Case("vote", "block_votes", 3, 128, b_block_votes, r_block_votes),
  Case("vote", "warp_redux", 2, 64, A(Z(8 * 128, u32), I(128, 0, 2**32, u32), i32(128)), r_redux),
  # atomics
  Case("atomics", "hist_global", 4, 64, HIST, lambda a: {0: np.bincount(a[1] % 37, minlength=37).astype(i32)}),
  Case("atomics", "hist_shared", 3, 128, A(Z(64, u32), I(1000, 0, 2**31), i32(1000)),
       lambda a: {0: np.bincount(a[1] & 63, minlength=64).astype(u32)}),
  Case("atomics", "cas_fmax", 4, 64, b_cas, r_cas),
  Case("atomics", "atomic_incdec", 2, 64, A(np.array([0, 5, 7], u32), Z(300, u32), i32(100), u32(17)), r_incdec),
  Case("atomics", "atomic_minmax", 4, 64, MINMAX, r_minmax),
  # control flow
  Case("control", "divergent_loops", 4, 64, LOOPS, r_loops),
  Case("control", "diverge_shuffle", 2, 64, A(Z(128), I(128, -1000, 1000)), r_diverge),
  Case("control", "recursion", 1, 64, A(Z(128), I(64, 0, 1000), i32(64)), r_recursion),
  Case("control", "ids3d", GRID3, BLOCK3, A(np.full(288 * 8, -1, i32)), r_ids3d),
  Case("control", "local_array", 2, 64, A(Z(200), I(100, I32_MIN, 2**31), i32(100)), r_local),
  Case("control", "spin_flag", 2, 64, A(Z(64), I(64, I32_MIN, 2**31)), r_spin),
  # module-scope variables: .const tables, an initialised .global array, a .global counter
  Case("memspace", "const_table", 2, 64, A(Z(128, f32), Z(128), I(128, 0, 64), i32(128)), r_const),
  Case("memspace", "global_counter", 4, 64, A(Z(200, u32), i32(200)), r_counter),
  # dynamic shared memory, cooperative groups
  Case("dynsmem", "dyn_reverse", 3, 96, A(Z(288, f32), N(288)), lambda a: {0: a[1].reshape(3, 96)[:, ::-1].ravel()},
       shared_bytes=96 * 4),
  Case("dynsmem", "dyn_carve", 2, 64, A(Z(128, np.float64), N(128, np.float64), I(128, -10**6, 10**6)), r_carve,
       shared_bytes=64 * 8 + 64 * 4),
  Case("coop", "tile16", 2, 64, A(Z(128 * 6), I(128, -1000, 1000)), r_tile16),
  # async copies, tensor cores
  Case("async", "cp_async_pipeline", 2, 128, b_pipeline, r_pipeline),
  Case("async", "cp_async_zfill", 1, 128, A(Z(256), I(256, -10**6, 10**6)), r_zfill),
  Case("mma", "mma_gemm", 1, 128, b_mma, lambda a: {0: (a[1].astype(np.float64) @ a[2]).astype(f32)}),
  Case("wmma", "wmma_gemm", 1, 128, b_wmma, r_wmma),
  # cross-CTA look-back scan (flags, fences, volatile)
  Case("lookback", "lookback_scan", 6, 128, b_lookback, r_lookback),
  # math built-ins: exact, then approximate within documented bounds
  Case("math", "math_exact", 2, 128, b_math, r_math),
  Case("math", "math_approx", 2, 128, b_approx, r_approx, check=APPROX),
]


@dataclass(frozen=True)
class Fault:
  """A kernel that must stop with gputwin.errors.<error> (naming the kernel)."""
  file: str
  kernel: str
  grid: Dim
  block: Dim
  args: Callable[[], list]
  error: str


FAULTS = [
  Fault("faults", "oob_store", 1, 32, lambda: [np.zeros(4, np.int32), np.int64(1 << 40)], "EmuFault"),
  Fault("faults", "trap_on_negative", 1, 32, lambda: [np.zeros(32, np.int32), np.arange(32, dtype=np.int32) - 20],
        "EmuTrap"),
]

BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "case ids are unique"
