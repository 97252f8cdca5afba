"""Reference semantics written independently of gputwin.pcode: Python ints, fractions.Fraction and struct only.

Floats are handled as exact rationals and rounded here by our own round-to-nearest-even, so no reference shares
numpy's (or gputwin's) rounding code.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

# (precision incl. hidden bit, min normal exponent, max exponent, total bits, exponent bits)
FMT = {16: (11, -14, 15, 16, 5), 32: (24, -126, 127, 32, 8), 64: (53, -1022, 1023, 64, 11)}
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def to_float(bits: int, w: int) -> float:
  """Bits -> Python float (exact; f16/f32 are subsets of f64)."""
  if w == 64:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]
  if w == 32:
    return struct.unpack("<f", struct.pack("<I", bits))[0]
  return struct.unpack("<e", struct.pack("<H", bits))[0]


def is_nan_bits(bits: int, w: int) -> bool:
  p, _, _, _, e = FMT[w]
  return (bits >> (p - 1)) & ((1 << e) - 1) == (1 << e) - 1 and bits & ((1 << (p - 1)) - 1) != 0


def is_snan_bits(bits: int, w: int) -> bool:
  p = FMT[w][0]
  return is_nan_bits(bits, w) and not (bits >> (p - 2)) & 1


def encode(sign: int, mag: Fraction | float, w: int) -> int:
  """Round |value| to nearest even in format w and return the bit pattern (inf on overflow)."""
  p, emin, emax, _, e = FMT[w]
  if mag == math.inf:
    return (sign << (w - 1)) | (((1 << e) - 1) << (p - 1))
  mag = Fraction(mag)
  if mag == 0:
    return sign << (w - 1)
  ex = mag.numerator.bit_length() - mag.denominator.bit_length()
  if Fraction(2) ** ex > mag:
    ex -= 1
  while Fraction(2) ** (ex + 1) <= mag:
    ex += 1
  ex = max(ex, emin)
  q = mag / Fraction(2) ** (ex - (p - 1))  # significand in units of the last place
  n, r = divmod(q.numerator, q.denominator)
  if 2 * r > q.denominator or (2 * r == q.denominator and n & 1):
    n += 1
  if n >= 1 << p:
    n >>= 1
    ex += 1
  if ex > emax:
    return (sign << (w - 1)) | (((1 << e) - 1) << (p - 1))
  if n < 1 << (p - 1):  # subnormal
    return (sign << (w - 1)) | n
  return (sign << (w - 1)) | ((ex + ((1 << (e - 1)) - 1)) << (p - 1)) | (n - (1 << (p - 1)))


def round_to(x: Fraction | float, w: int, zero_sign: int = 0) -> int:
  if isinstance(x, float) and math.isnan(x):
    return -1  # "some NaN"
  if isinstance(x, float) and math.isinf(x):
    return encode(int(x < 0), math.inf, w)
  if x == 0:
    return zero_sign << (w - 1)
  return encode(int(x < 0), abs(Fraction(x)), w)


def arith(op: str, w: int, *bits: int) -> int:
  """IEEE add/sub/mul/div/fma of format w on bit patterns, one rounding; -1 means 'a NaN'."""
  xs = [to_float(b, w) for b in bits]
  if any(math.isnan(x) for x in xs):
    return -1
  f = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "fma": lambda a, b, c: a * b + c}[op]
  approx = f(*xs)  # Python float: right for infinities, invalid cases (NaN) and the sign of zero sums of zeros
  if math.isnan(approx) or any(math.isinf(x) for x in xs):
    return round_to(approx, w)
  exact = f(*map(Fraction, xs))
  if exact == 0:
    zero_terms = (xs[0] * xs[1] == 0 and xs[2] == 0) if op == "fma" else (op == "mul" or xs[0] == 0 == xs[1])
    return (int(math.copysign(1, approx) < 0) if zero_terms else 0) << (w - 1)
  return round_to(exact, w)


def to_int_sat(x: float, bits: int, signed: bool) -> int:
  """Float -> int: NaN -> 0, truncate toward zero, saturate."""
  if math.isnan(x):
    return 0
  lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
  if math.isinf(x):
    return hi if x > 0 else lo
  return min(max(int(x), lo), hi)


def sx(v: int, bits: int) -> int:
  v &= (1 << bits) - 1
  return v - (1 << bits) if v >> (bits - 1) else v


def fclass(bits: int, w: int) -> int:
  """V_CMP_CLASS bit index: 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal,
  8 +normal, 9 +inf (the manual's class mask order)."""
  if is_nan_bits(bits, w):
    return 0 if is_snan_bits(bits, w) else 1
  x = to_float(bits, w)
  neg = bits >> (w - 1)
  p, emin = FMT[w][0], FMT[w][1]
  if math.isinf(x):
    return 2 if neg else 9
  if x == 0:
    return 5 if neg else 6
  den = abs(x) < 2.0 ** emin
  return (4 if den else 3) if neg else (7 if den else 8)
