"""numpy semantics that compiled pcode calls: bit views, conversions, masked stores, memory and register-file
access, and the manual's built-in functions (isNAN, fma, f32_to_f16, ...).

Every value is a numpy array (or numpy scalar) of raw bits or IEEE floats, broadcastable to (waves, lanes).
Types travel as (kind, bits) pairs fixed at compile time: kind is u/i/b/f/bf/bool, bits the width.
Integer ops wrap at the container width (numpy does that); widths that are not 8/16/32/64 are re-wrapped by `wr`.
Values wider than 64 bits (b128 loads, the 1201-bit 2/PI constant) are object arrays of Python ints, except
zero-extended 65..128-bit unsigned arithmetic, which stays on two uint64 words (`Wide`) while it only adds,
multiplies, wraps and slices.
"""
from __future__ import annotations

import ctypes
import functools
import math
from fractions import Fraction

import numpy as np

from gputwin.errors import PcodeError

U = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_LITTLE = np.little_endian  # a uint64 viewed as two uint32 is (lo, hi)
I = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
F = {16: np.float16, 32: np.float32, 64: np.float64}


def cbits(bits: int) -> int:
  return 1 if bits == 1 else 8 if bits <= 8 else 16 if bits <= 16 else 32 if bits <= 32 else 64 if bits <= 64 else 0


def dtype(kind: str, bits: int):
  if kind == "bool":
    return np.bool_
  if kind == "f":
    return F[bits]
  if kind == "bf":
    return np.float32
  c = cbits(bits)
  if c == 0:
    return object
  return (I if kind == "i" else U)[max(c, 8)]


def zero(kind: str, bits: int):
  d = dtype(kind, bits)
  return d(0) if d is not object else np.array(0, dtype=object)


def typed(v, kind: str, bits: int):
  """A Python constant as a numpy scalar of the type (ints wrapped)."""
  d = dtype(kind, bits)
  if kind in ("f", "bf"):
    with np.errstate(over="ignore"):
      return d(v) if kind == "f" else rbf(np.float32(v))
  if d is object:
    return np.array(int(v) & ((1 << bits) - 1), dtype=object)
  if kind == "bool":
    return np.bool_(v & 1 if isinstance(v, int) else v)
  v = int(v) & ((1 << bits) - 1)
  if kind == "i" and v >> (bits - 1):
    v -= 1 << bits
  return d(v)


def arr(x):
  return x if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x)


# --------------------------------------------------------------------------------------------- bit views
def ubits(x, kind: str, bits: int):
  """Raw unsigned bits of a typed value (container-sized)."""
  if kind == "f":
    return arr(x).view(U[bits])
  if kind == "bf":
    return (arr(x).astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
  if kind == "bool":
    return arr(x).astype(np.uint8)
  if kind == "i":
    c = cbits(bits)
    if c == 0:
      return np.asarray(x, dtype=object) & ((1 << bits) - 1)
    return arr(x).view(U[max(c, 8)]) & U[max(c, 8)]((1 << bits) - 1) if bits != c else arr(x).view(U[c])
  if kind == "int":
    return np.asarray(int(x) & ((1 << 64) - 1), dtype=np.uint64)
  return arr(x)


# ------------------------------------------------------------------------------------ 65..128-bit unsigned
_M32, _S32 = np.uint64(0xffffffff), np.uint64(32)


def _mul64(a, b):
  """Full 128-bit product of uint64 arrays as (low, high) words, from 32-bit partial products."""
  al, ah, bl, bh = a & _M32, a >> _S32, b & _M32, b >> _S32
  ll, lh, hl = al * bl, al * bh, ah * bl
  mid = (ll >> _S32) + (lh & _M32) + (hl & _M32)
  return a * b, ah * bh + (lh >> _S32) + (hl >> _S32) + (mid >> _S32)


class Wide:
  """An unsigned value of 65..128 bits as two uint64 words (value = lo + hi * 2**64, kept mod 2**128).

  Compiled pcode holds such values (`65'U(S0) * 65'U(S1) + S2` in V_MAD_U64_U32) as object arrays of Python ints,
  which costs a Python operation per lane. `resize` makes a Wide instead when it zero-extends a numpy array; add,
  multiply, `wr` and `sl` stay on numpy words, and any other use sees the same object array as before
  (`__array__`, or `obj()` for Python operators), so results are identical."""
  __slots__ = ("lo", "hi", "nb")

  def __init__(self, lo, hi, nb: int = 128):
    self.lo, self.hi, self.nb = lo, hi, nb  # nb: the value is known to be below 2**nb (hi is 0 when nb <= 64)

  shape = property(lambda self: np.broadcast_shapes(np.shape(self.lo), np.shape(self.hi)))
  ndim = property(lambda self: len(self.shape))

  def obj(self):
    return (np.asarray(self.hi).astype(object) << 64) | np.asarray(self.lo).astype(object)

  def __array__(self, dtype=None, copy=None):
    o = np.broadcast_to(self.obj(), self.shape)
    return o if dtype is None else o.astype(dtype)

  def __add__(self, o):
    if not isinstance(o, Wide):
      return self.obj() + o
    if max(self.nb, o.nb) < 64:  # no carry out of the low word (32-bit operands zero-extended, mostly)
      return Wide(self.lo + o.lo, np.uint64(0), max(self.nb, o.nb) + 1)
    lo = self.lo + o.lo
    return Wide(lo, self.hi + o.hi + (lo < self.lo), min(max(self.nb, o.nb) + 1, 128))

  def __mul__(self, o):
    if not isinstance(o, Wide):
      return self.obj() * o
    if self.nb + o.nb <= 64:  # the product fits the low word: 65'U(S0) * 65'U(S1) of 32-bit sources
      return Wide(self.lo * o.lo, np.uint64(0), self.nb + o.nb)
    lo, hi = _mul64(self.lo, o.lo)
    return Wide(lo, hi + self.lo * o.hi + self.hi * o.lo, min(self.nb + o.nb, 128))

  def __radd__(self, o):
    return o + self.obj()

  def __rmul__(self, o):
    return o * self.obj()

  def __getattr__(self, name):  # other methods: the object-array form; numpy protocols go through __array__
    if name.startswith("__"):
      raise AttributeError(name)
    return getattr(self.obj(), name)

  def __rshift__(self, o): return self.obj() >> o
  def __lshift__(self, o): return self.obj() << o
  def __and__(self, o): return self.obj() & o
  def __or__(self, o): return self.obj() | o
  def __xor__(self, o): return self.obj() ^ o
  def __sub__(self, o): return self.obj() - o
  def __rsub__(self, o): return o - self.obj()
  def __rand__(self, o): return o & self.obj()
  def __ror__(self, o): return o | self.obj()
  def __invert__(self): return ~self.obj()
  def __neg__(self): return -self.obj()
  def __eq__(self, o): return self.obj() == o
  def __ne__(self, o): return self.obj() != o
  def __lt__(self, o): return self.obj() < o
  def __le__(self, o): return self.obj() <= o
  def __gt__(self, o): return self.obj() > o
  def __ge__(self, o): return self.obj() >= o
  def __floordiv__(self, o): return self.obj() // o
  def __mod__(self, o): return self.obj() % o
  __hash__ = None

  def bits(self, lo: int, w: int):
    """Bits [lo + w - 1 : lo] (w <= 64) as uint64."""
    if lo >= 64:
      r = self.hi >> np.uint64(lo - 64) if lo > 64 else self.hi
    elif lo + w <= 64:
      r = self.lo >> np.uint64(lo) if lo else self.lo
    else:
      r = (self.lo >> np.uint64(lo)) | (self.hi << np.uint64(64 - lo))
    return r & np.uint64((1 << w) - 1) if w < 64 else r


def dwords(v, n: int) -> list:
  """Raw bits `v` (an integer array, an object array of Python ints, or a Wide) as its `n` low dwords, lowest first:
  uint64 arrays (object arrays for object input) whose low 32 bits are the dword, for a caller's uint32 cast."""
  if isinstance(v, Wide):
    lo, hi = np.asarray(v.lo, np.uint64), np.asarray(v.hi, np.uint64)
    shp = np.broadcast_shapes(lo.shape, hi.shape)
    m = np.uint64(0xffffffff)
    return [np.broadcast_to(p, shp) for p in (lo & m, lo >> np.uint64(32), hi & m, hi >> np.uint64(32))][:n]
  v = np.asarray(v)
  if n == 1:
    return [v]
  return [(v >> (32 * k)) & 0xffffffff if v.dtype == object else v.astype(np.uint64) >> np.uint64(32 * k)
          for k in range(n)]


def resize(u, bits: int, to: int, sign: bool = False):
  """Unsigned container of `bits` -> unsigned container of `to` (truncate, or extend with zeros/sign)."""
  cf, ct = cbits(bits), cbits(to)
  cf, ct = (max(cf, 8) if cf else 0), (max(ct, 8) if ct else 0)
  if ct == 0 and cf and to <= 128 and not (sign and bits > 1) and isinstance(u, np.ndarray):
    return Wide(u.astype(np.uint64), np.uint64(0), 8 * u.dtype.itemsize)
  if ct == 0 or cf == 0:
    o = np.asarray(u).astype(object)
    if sign and bits > 1:
      o = np.where((o >> (bits - 1)) & 1, o - (1 << bits), o)
    return o & ((1 << to) - 1) if ct == 0 else (o & ((1 << to) - 1)).astype(np.uint64).astype(U[ct])
  if sign and to > bits > 1:
    r = sext(u, bits, ct).view(U[ct])
    return r if isinstance(r, np.ndarray) else U[ct](r)
  return u if cf == ct else u.astype(U[ct])


def sext(u, bits: int, c: int):
  sh = c - bits
  return (u.astype(U[c]) << U[c](sh)).view(I[c]) >> I[c](sh)


def bc(x, fk: str, fb: int, tk: str, tb: int):
  """Reinterpret the bits of a `fk fb` value as `tk tb` (the manual's `.u32`/`.f16` views): truncate or
  zero-extend the raw bits, then view them as the new type."""
  if fk in ("u", "b") and tk == "f" and fb == tb:
    return arr(x).view(F[tb])
  if fk == "f" and tk in ("u", "b") and fb == tb:
    return arr(x).view(U[tb])
  u = ubits(x, fk, fb)
  u = resize(u, fb if fk != "int" else 64, tb, sign=(fk == "i" and tb > fb))
  return from_bits(u, tk, tb)


def from_bits(u, tk: str, tb: int):
  c = cbits(tb)
  if tk == "bool":
    return (u & 1).astype(np.bool_) if c else np.asarray(u & 1).astype(np.bool_)
  if c and tb != c and tb > 1:
    u = u & U[c]((1 << tb) - 1)
  if tk == "f":
    return u.view(F[tb])
  if tk == "bf":
    return (u.astype(np.uint32) << np.uint32(16)).view(np.float32)
  if tk == "i":
    if c == 0:
      o = np.asarray(u, dtype=object)
      return np.where(o >> (tb - 1) & 1, o - (1 << tb), o)
    return u.view(I[c]) if tb == c else sext(u, tb, c)
  return u


def wr(x, kind: str, bits: int):
  """Re-wrap a result whose width is not a container width (u24, i4, b128 ...)."""
  c = cbits(bits)
  if isinstance(x, Wide) and kind != "i" and bits <= 128:
    return Wide(x.lo, x.hi & np.uint64((1 << (bits - 64)) - 1), min(x.nb, bits))
  if c == 0:
    o = np.asarray(x, dtype=object) & ((1 << bits) - 1)
    return from_bits(o, kind, bits) if kind == "i" else o
  if c == bits:
    return x
  return from_bits(ubits(x, "u", c) & U[c]((1 << bits) - 1), kind, bits)


# -------------------------------------------------------------------------------------------- conversions
def cv(x, fk: str, fb: int, tk: str, tb: int):
  """Value conversion (`64'U(x)`, `32'F(i)`, `32'I(f)`): ints sign/zero-extend or wrap; floats round to nearest
  even; float->int truncates toward zero and saturates, NaN -> 0 (the manual's cvt rules)."""
  if tk == "int":
    return x
  if fk == "int":
    return typed(x, tk, tb) if np.ndim(x) == 0 and not isinstance(x, np.ndarray) else cv(np.int64(x), "i", 64, tk, tb)
  fl, tl = fk in ("f", "bf"), tk in ("f", "bf")
  if fl and tl:
    if tk == "bf":
      return rbf(arr(x).astype(np.float64) if fk == "f" and fb == 64 else arr(x).astype(np.float32), fb == 64)
    return fcvt(arr(x), fb if fk == "f" else 32, tb)
  if fl:
    return f2i(x, tk, tb)
  if tl:
    if fk == "bool":
      x = arr(x).astype(np.uint8)
    c = cbits(fb)
    if c == 0:
      v = np.vectorize(lambda i: float(int(i)), otypes=[np.float64])(x)
      return v.astype(F[tb]) if tk == "f" else rbf(v, True)
    if tk == "bf":
      return rbf(arr(x).astype(np.float64), True)
    if tb == 16 and c >= 32:  # int -> f16 in one rounding (via f64 is exact for <= 53-bit ints)
      return arr(x).astype(np.float64).astype(np.float16)
    return arr(x).astype(F[tb])
  if tk == "bool":
    return (ubits(x, fk, fb) & 1).astype(np.bool_)
  u = ubits(x, fk, fb)
  return from_bits(resize(u, fb, tb, sign=(fk == "i" and tb > fb)), tk, tb)


_FMT = {16: (10, 5), 32: (23, 8), 64: (52, 11)}


def fcvt(x, fb: int, tb: int):
  """Float -> float, rounding to nearest even; NaNs keep sign, quiet bit and the top payload bits (numpy's cast
  would quiet a signalling NaN, but the manual tests isSignalNAN(64'F(x)) after widening)."""
  with np.errstate(over="ignore", invalid="ignore"):
    r = x.astype(F[tb]) if fb != 64 or tb != 16 else f64_to_f32_odd(x).astype(np.float16)
  if not np.isnan(x).any():
    return r
  (mf, ef), (mt, et) = _FMT[fb], _FMT[tb]
  u = x.view(U[fb]).astype(np.uint64)
  sign = (u >> np.uint64(fb - 1)) << np.uint64(tb - 1)
  man = u & np.uint64((1 << mf) - 1)
  man = man << np.uint64(mt - mf) if mt >= mf else man >> np.uint64(mf - mt)
  man = np.where(man == 0, np.uint64(1 << (mt - 1)), man)  # payload lost entirely: make it a quiet NaN
  nan = (sign | (np.uint64((1 << et) - 1) << np.uint64(mt)) | man).astype(U[tb]).view(F[tb])
  return np.where(np.isnan(x), nan, r)


def f2i(x, tk: str, tb: int):
  v = arr(x).astype(np.float64)
  lo, hi = (-(2 ** (tb - 1)), 2 ** (tb - 1) - 1) if tk == "i" else (0, 2 ** tb - 1)
  with np.errstate(invalid="ignore"):
    t = np.trunc(v)
    t = np.where(np.isnan(t), 0.0, t)
  if tb <= 32:
    return np.clip(t, lo, hi).astype(np.int64).astype(dtype(tk, tb))
  big = t >= hi
  small = t <= lo
  r = np.where(big | small, 0.0, t)
  out = r.astype(np.int64 if tk == "i" else np.uint64) if tk == "i" else np.where(r < 0, 0, r).astype(np.uint64)
  out = np.where(big, dtype(tk, tb)(hi), out)
  return np.where(small, dtype(tk, tb)(lo), out).astype(dtype(tk, tb))


def rbf(x, from64: bool = False):
  """Round to bfloat16 (nearest even; NaN stays NaN and quiet), kept in a float32 container."""
  x = arr(x)
  if from64 or x.dtype == np.float64:  # round-to-odd to f32 first, so the second rounding is exact
    x = f64_to_f32_odd(x.astype(np.float64))
  u = x.astype(np.float32).view(np.uint32)
  r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
  nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
  r = np.where(nan, (u | np.uint32(0x00400000)) & np.uint32(0xFFFF0000), r)
  return r.astype(np.uint32).view(np.float32)


_FOPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}
_QUIET = {2: np.uint16(1 << 9), 4: np.uint32(1 << 22), 8: np.uint64(1 << 51)}  # the quiet bit, by float bytes
_DEFAULT_NAN = {2: np.uint16(0xfe00), 4: np.uint32(0xffc00000), 8: np.uint64(0xfff8000000000000)}  # x86's


def fop(o: str, x, y):
  """x o y for floats, o in + - * /, with x86's NaN rule applied here: the first NaN operand, quieted; else (an
  invalid operation) the default NaN, which is negative. numpy's loops do not keep it: its SIMD loops move a scalar
  operand to the front (so the NaN depended on the batch shape), and its f16 loops pick by CPU (an AVX512-FP16
  host returned the second operand)."""
  return fnan(_FOPS[o](x, y), x, y)


def fnan(r, *xs):
  """r with each NaN replaced by x86's choice from the operands xs (arrays or scalars of r's type): see fop."""
  n = np.isnan(r)
  if not n.any():
    return r
  d = np.asarray(r).dtype
  u = U[8 * d.itemsize]
  out = np.broadcast_to(_DEFAULT_NAN[d.itemsize].view(d), np.shape(r))
  for x in reversed(xs):
    x = np.asarray(x).astype(d, copy=False)
    out = np.where(np.isnan(x), (x.view(u) | _QUIET[d.itemsize]).view(d), out)
  return np.where(n, out, r).astype(d, copy=False)


def f64_to_f32_odd(d):
  """f64 -> f32 with round-to-odd (sticky low bit): the intermediate that makes a second rounding correct."""
  with np.errstate(over="ignore", invalid="ignore"):
    f = d.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != d) & np.isfinite(d) & np.isfinite(back)
    toward = np.where(back > d, np.float32(0) if False else -np.inf, np.inf).astype(np.float32)
    t = np.where(inexact, np.nextafter(f, toward.astype(np.float32)), f).astype(np.float32)
    # of the two f32 neighbours bracketing d, take the one with an odd significand
    pick = np.where(inexact & ((f.view(np.uint32) & np.uint32(1)) == np.uint32(0)), t, f)
    return pick.astype(np.float32)


# ------------------------------------------------------------------------------------------ integer ops
def idiv(a, b):
  """C division: truncates toward zero; x/0 -> all ones (unsigned) or 0, never a Python exception."""
  a, b = arr(a), arr(b)
  if a.dtype == object or b.dtype == object:
    return np.vectorize(lambda x, y: 0 if y == 0 else abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1),
                        otypes=[object])(a, b)
  with np.errstate(all="ignore"):
    if a.dtype.kind == "u":
      return np.where(b == 0, ~a.dtype.type(0), a // np.where(b == 0, 1, b).astype(b.dtype)).astype(a.dtype)
    q = np.abs(a.astype(np.int64)) // np.where(b == 0, 1, np.abs(b.astype(np.int64)))
    q = np.where((a < 0) != (b < 0), -q, q)
    return np.where(b == 0, 0, q).astype(a.dtype)


def irem(a, b):
  with np.errstate(all="ignore"):
    return (arr(a) - idiv(a, b) * arr(b)).astype(arr(a).dtype)


def shl(a, s, bits: int):
  a, s = arr(a), arr(s)
  if a.dtype == object:
    return np.vectorize(lambda x, y: (int(x) << int(y)) & ((1 << bits) - 1), otypes=[object])(a, s)
  c = a.dtype.itemsize * 8
  if bits == c and s.dtype.kind == "u" and (s.size == 1 or s.dtype.itemsize <= a.dtype.itemsize) and s.max() < c:
    return a << s.astype(a.dtype)  # fast path: every shift amount in range (the manual masks most of them)
  s64 = s.astype(np.uint64)
  r = a << np.minimum(s64, c - 1).astype(a.dtype)
  return np.where(s64 >= bits, a.dtype.type(0), r) if bits == c else wr(np.where(s64 >= bits, a.dtype.type(0), r),
                                                                        "i" if a.dtype.kind == "i" else "u", bits)


def shr(a, s, bits: int):
  a, s = arr(a), arr(s)
  if a.dtype == object:
    return np.vectorize(lambda x, y: int(x) >> int(y), otypes=[object])(a, s)
  c = a.dtype.itemsize * 8
  if s.dtype.kind == "u" and (s.size == 1 or s.dtype.itemsize <= a.dtype.itemsize) and s.max() < c:
    return a >> s.astype(a.dtype)
  s64 = s.astype(np.uint64)
  r = a >> np.minimum(s64, c - 1).astype(a.dtype)
  if a.dtype.kind == "i":
    return r
  return np.where(s64 >= c, a.dtype.type(0), r)


def sl(x, lo, w: int):
  """Bits [lo + w - 1 : lo] of raw bits x, as an unsigned container of width w."""
  if isinstance(x, Wide) and np.ndim(lo) == 0 and 1 < w <= 64:
    return arr(x.bits(int(lo), w)).astype(U[max(cbits(w), 8)], copy=False)
  if isinstance(x, Wide) and np.ndim(lo) == 0 and w == 1:
    return arr(x.bits(int(lo), 1)).astype(np.bool_)  # bits() masked it to one bit
  x = arr(x)
  lo = int(lo) if np.ndim(lo) == 0 else arr(lo)
  if x.dtype == object or (cbits(w) == 0):
    o = np.asarray(x, dtype=object)
    mask = (1 << w) - 1
    r = (o >> lo) & mask if np.ndim(lo) == 0 else \
      np.vectorize(lambda a, b: (int(a) >> int(b)) & mask, otypes=[object])(o, lo)
    if cbits(w) == 0:
      return r
    return np.asarray(r).astype(np.uint64).astype(U[max(cbits(w), 8)]) if w > 1 else np.asarray(r).astype(np.bool_)
  c = x.dtype.itemsize * 8
  if np.ndim(lo) == 0 and lo >= c:
    r = np.zeros_like(x)
  elif np.ndim(lo) == 0:
    r = x >> x.dtype.type(lo) if lo else x
  else:
    r = shr(x, np.asarray(lo).astype(np.uint64) if np.ndim(lo) else x.dtype.type(lo), c)
  if w == 1:
    return (r & x.dtype.type(1)).astype(np.bool_)
  cw = max(cbits(w), 8)
  r = r.astype(U[cw]) if cw != c else r
  return r & U[cw]((1 << w) - 1) if w != cw else r


def rev(x, w: int):
  x = arr(x)
  c = max(cbits(w), 8)
  out = np.zeros(x.shape, dtype=U[c])
  for i in range(w):
    out |= ((x >> U[c](i)) & U[c](1)).astype(U[c]) << U[c](w - 1 - i)
  return out


def bt(x, i):
  """Bit i of x. `VCC.u64[laneId]` on a per-wave mask unpacks all lane bits at once."""
  x = arr(x)
  if np.ndim(i) == 2 and np.shape(i)[0] == 1 and x.dtype in (np.uint32, np.uint64) and x.ndim == 2 and \
     x.shape[-1] == 1 and np.shape(i)[1] <= x.dtype.itemsize * 8 and (np.asarray(i) == np.arange(np.shape(i)[1])).all():
    bits = np.unpackbits(np.ascontiguousarray(x).view(np.uint8), axis=-1, bitorder="little")
    return bits[:, :np.shape(i)[1]].astype(bool)
  return sl(x, i, 1)


def ins(old, v, lo, w: int, ob: int):
  """`old` (raw, `ob` bits) with bits [lo + w - 1 : lo] replaced by raw value v."""
  if isinstance(old, Wide) and np.ndim(lo) == 0 and ob <= 128 and arr(v).dtype != object:
    lo = int(lo)  # a field within one word: insert into that word, the other stays as it is
    if lo + w <= 64:
      return Wide(ins(old.lo, v, lo, w, 64), old.hi)
    if lo >= 64:
      return Wide(old.lo, ins(old.hi, v, lo - 64, w, ob - 64))
  old = arr(old)
  c = cbits(ob)
  if c == 0 or old.dtype == object:
    o, vv = np.asarray(old, dtype=object), np.asarray(v).astype(object) & ((1 << w) - 1)
    lo_ = np.asarray(lo).astype(object)
    mask = ((1 << w) - 1) << lo_
    return (o & ~mask | (vv << lo_)) & ((1 << ob) - 1)
  d = U[max(c, 8)]
  if old.dtype != d:
    old = old.astype(d)
  m = d((1 << w) - 1) if w < 64 else d(~0 & ((1 << 64) - 1))
  vv = arr(v)
  if w == 8 * old.itemsize and np.ndim(lo) == 0 and int(lo) == 0 and (old.ndim == 0 or old.shape == vv.shape):
    return vv.astype(d, copy=False)  # the whole value replaced (loads): no merge; compiled pcode never writes in place
  if w == 32 and c == 64 and _LITTLE and np.ndim(lo) == 0 and int(lo) in (0, 32) and old.ndim and \
     old.shape == np.broadcast_shapes(old.shape, vv.shape) and vv.dtype.kind in "ui" and vv.dtype.itemsize <= 4:
    out = np.array(old, order="C")  # a dword of a 64-bit value (DS_LOAD_2ADDR's RETURN_DATA): copy, write one half
    out.view(np.uint32).reshape(out.shape + (2,))[..., int(lo) // 32] = vv  # integer casts keep the low 32 bits
    return out
  vv = vv.astype(d) if vv.dtype.kind == "u" and vv.dtype.itemsize * 8 <= w else vv.astype(d) & m  # fits: no mask
  if np.ndim(lo) == 0:  # vv is a new array (astype copies): shift it and merge the kept bits into it in place
    lo = int(lo)
    if lo:
      vv <<= d(lo)
    keep = old & d(~(((1 << w) - 1) << lo) & ((1 << (8 * d().itemsize)) - 1))
    if isinstance(vv, np.ndarray) and keep.shape == vv.shape:
      vv |= keep
      return vv
    return keep | vv
  lo_ = arr(lo).astype(d)
  return (old & ~(m << lo_)) | (vv << lo_)


def cat(*parts):
  """{a, b, ...}: parts are (raw value, width), most significant first."""
  total = sum(w for _, w in parts)
  c = cbits(total)
  d = U[max(c, 8)] if c else object
  out, off = None, 0
  for v, w in reversed(parts):
    vv = np.asarray(v).astype(d) if d is not object else np.asarray(v).astype(object)
    part = vv << (d(off) if d is not object else off)
    out = part if out is None else out | part
    off += w
  return out


# -------------------------------------------------------------------------------------- masks and stores
def band(m, c):
  return c if m is None else m & c


def andnot(m, c):
  return np.logical_not(c) if m is None else m & np.logical_not(c)


def anyt(m) -> bool:
  return m is None or bool(np.any(m))


def mg(m, new, old):
  """Masked store: lanes where m is false keep the old value."""
  if m is None:
    return new
  if np.ndim(m) == 0:
    return new if m else old
  return np.where(m, new, old)


def sbit(x, i, v, m, xb: int):
  """x[i] = v for raw x of xb bits. A per-wave x written with a per-lane index (`D0.u64[laneId] = ...`) gathers
  every active lane's bit, as the lanes would one after another."""
  x = arr(x)
  L = np.shape(i)[-1] if np.ndim(i) == 2 else 0
  if L in (32, 64) and xb == 64 and np.shape(i)[0] == 1 and np.ndim(v) == 2 and np.shape(v)[-1] == L and \
     (x.ndim == 0 or x.shape[-1] == 1) and (i == np.arange(L)).all():  # the VOPC pattern: pack lane bits
    vv = np.broadcast_to(arr(v).astype(bool), np.broadcast_shapes(np.shape(v), np.shape(m) if m is not None else ()))
    bits = np.packbits(vv & m if m is not None else vv, axis=-1, bitorder="little")
    bits = np.ascontiguousarray(bits).view(np.uint32 if L == 32 else np.uint64).astype(np.uint64)
    if m is None:
      return bits if L == 64 else (x.astype(np.uint64) & np.uint64(~0xFFFFFFFF & (2**64 - 1))) | bits
    mm = np.packbits(np.broadcast_to(m, vv.shape), axis=-1, bitorder="little")
    mm = np.ascontiguousarray(mm).view(np.uint32 if L == 32 else np.uint64).astype(np.uint64)
    return (x.astype(np.uint64) & ~mm) | bits
  c = cbits(xb)
  d = U[max(c, 8)] if c else object
  i = arr(i).astype(np.uint64 if d is not object else object)
  one = d(1) if d is not object else 1
  bitv = (arr(v).astype(d) & one) << i.astype(d) if d is not object else (np.asarray(v).astype(object) & 1) << i
  clr = one << i.astype(d) if d is not object else 1 << i
  if m is not None:
    mm = arr(m)
    bitv = np.where(mm, bitv, d(0) if d is not object else 0)
    clr = np.where(mm, clr, d(0) if d is not object else 0)
  xs = x.shape
  lane_index = np.ndim(i) == 2 and np.shape(i)[0] == 1 and (np.asarray(i) == np.arange(np.shape(i)[1])).all()
  if bitv.ndim >= 1 and ((x.ndim == 0 and lane_index) or (x.ndim == bitv.ndim and x.shape[-1] == 1)) and \
     bitv.shape[-1] > 1:
    bitv = np.bitwise_or.reduce(bitv, axis=-1, keepdims=True)
    clr = np.bitwise_or.reduce(np.broadcast_to(clr, bitv.shape[:-1] + (np.shape(clr)[-1] if np.ndim(clr) else 1,)),
                               axis=-1, keepdims=True)
    if x.ndim == 0:
      xs = bitv.shape
  out = (x.astype(d) & ~clr) | bitv if d is not object else (x & ~clr) | bitv
  return out.reshape(np.broadcast_shapes(xs, out.shape)) if out.shape != xs and x.ndim else out


def sel(c, a, b):
  if np.ndim(c) == 0:
    return a if c else b
  return np.where(c, a, b)


DEFAULTS = {"WAVE_MODE.IEEE": 1}  # compute waves run with MODE.IEEE set (LLVM's amdgpu-ieee default)


_LD: dict = {}  # bits -> (container type, its dtype)


def ld(st: dict, name: str, bits: int):
  """A state register as its container type; absent registers read as 0 (or their documented default)."""
  v = st.get(name)
  t = _LD.get(bits)
  if t is None:
    c = cbits(bits)
    d = (U[max(c, 8)] if bits > 1 else U[8]) if c else object
    t = _LD[bits] = (d, np.dtype(d))
  d, dd = t
  if type(v) is np.ndarray and v.dtype == dd:  # the common case: already the container type
    return v
  if v is None:
    if d is object and bits <= 128 and not DEFAULTS.get(name, 0):  # a 65..128-bit zero as two words (see Wide)
      return Wide(np.uint64(0), np.uint64(0))
    return d(DEFAULTS.get(name, 0)) if d is not object else np.array(0, dtype=object)
  if isinstance(v, Wide) and d is object and bits <= 128:  # stays two uint64 words (see Wide)
    return v
  v = arr(v)
  if v.dtype != d:
    v = v.astype(d) if d is not object else v.astype(object)
  return v


def iu(x, m=None) -> int:
  """A loop bound the manual treats as uniform: must be the same in every active lane (m)."""
  if np.ndim(x) == 0:
    return int(x)
  a = np.asarray(x)
  if m is not None and np.ndim(m):
    shp = np.broadcast_shapes(a.shape, np.shape(m))
    a = np.broadcast_to(a, shp)[np.broadcast_to(m, shp)]
    if a.size == 0:
      return 0
  if not (a == a.flat[0]).all():
    raise PcodeError("loop bound differs between lanes; pcode loops need uniform bounds")
  return int(a.flat[0])


# --------------------------------------------------------------------------------------- arrays, regfiles
def newarr(n: int, kind: str, bits: int):
  return np.zeros((n,), dtype=dtype(kind, bits))


def ag(a, i):
  if np.ndim(i) == 0:
    return a[..., int(i)]
  idx = np.clip(arr(i).astype(np.int64), 0, a.shape[-1] - 1)  # lanes masked off may hold any index
  shp = np.broadcast_shapes(a.shape[:-1], idx.shape)
  return np.take_along_axis(np.broadcast_to(a, shp + a.shape[-1:]), np.broadcast_to(idx, shp)[..., None], -1)[..., 0]


def aset(a, i, v, m):
  v = arr(v)
  shp = np.broadcast_shapes(a.shape[:-1], np.shape(i), v.shape, np.shape(m) if m is not None else ())
  out = np.array(np.broadcast_to(a, shp + a.shape[-1:]))
  if np.ndim(i) == 0 and m is None:
    out[..., int(i)] = v.astype(out.dtype)
    return out
  idx = np.broadcast_to(np.clip(arr(i).astype(np.int64), 0, a.shape[-1] - 1), shp)[..., None]
  old = np.take_along_axis(out, idx, -1)[..., 0]
  new = mg(m, np.broadcast_to(v, shp).astype(out.dtype), old)
  np.put_along_axis(out, idx, np.broadcast_to(new, shp)[..., None], -1)
  return out


class Ctx:
  """Per-call context: lane ids, wave size, memory, register files, hooks for address helpers."""
  __slots__ = ("lane", "wave32", "mem", "regs", "sub", "rmode")

  def __init__(self, lane, wave32, mem, regs, sub=None):
    self.lane, self.wave32, self.mem, self.regs, self.sub = lane, wave32, mem, regs, sub
    self.rmode = 0  # MODE.FP_ROUND as the body sets it: 0 nearest even, 3 toward zero


def regfile(ctx: Ctx, name: str):
  r = ctx.regs.get(name)
  if r is None:
    raise PcodeError(f"this instruction accesses {name}[...]: pass the register file as state[{name!r}]")
  return r


def _check(f, name: str, ix) -> None:
  for d, j in enumerate(ix):
    j = np.asarray(j)
    if j.size and (j.min() < 0 or j.max() >= f.shape[d]):
      raise PcodeError(f"{name} index {int(j.max()) if j.max() >= f.shape[d] else int(j.min())} out of range: "
                       f"the register file passed in state[{name!r}] has shape {f.shape}")


def rrd(ctx: Ctx, name: str, idx, bits: int):
  """VGPR[lane][reg] (file shaped (waves, lanes, regs)) or SGPR[reg] (file shaped (waves, regs))."""
  f = regfile(ctx, name)
  n = bits // 32 if bits > 32 else 1
  parts = []
  for k in range(n):
    ix = list(idx)
    ix[-1] = arr(ix[-1]).astype(np.int64) + k
    if f.ndim == len(ix) + 1:  # per-wave file: index the wave too; results are at least (waves, 1)
      ix = [np.arange(f.shape[0])[:, None]] + ix
    ix = tuple(arr(j).astype(np.int64) for j in ix)
    _check(f, name, ix)
    parts.append(f[ix])
  v = parts[0] if n == 1 else cat(*[(p, 32) for p in reversed(parts)])
  return v if bits >= 32 else sl(v, 0, bits)


def rwr(ctx: Ctx, name: str, idx, v, bits: int, m):
  f = regfile(ctx, name)
  n = bits // 32 if bits > 32 else 1
  for k in range(n):
    ix = list(idx)
    ix[-1] = arr(ix[-1]).astype(np.int64) + k
    if f.ndim == len(ix) + 1:
      ix = [np.arange(f.shape[0])[:, None]] + ix
    part = sl(v, 32 * k, 32) if n > 1 else arr(v).astype(f.dtype)
    if bits < 32:
      old = f[tuple(arr(j).astype(np.int64) for j in ix)]
      part = ins(old, v, 0, bits, 32)
    ixs = np.broadcast_arrays(*[arr(j).astype(np.int64) for j in ix], arr(part), *(() if m is None else (arr(m),)))
    sel = ixs[-1] if m is not None else np.ones(ixs[0].shape, bool)
    _check(f, name, [j[sel] for j in ixs[:len(ix)]])
    f[tuple(j[sel] for j in ixs[:len(ix)])] = ixs[len(ix)][sel].astype(f.dtype)


def mrd(ctx: Ctx, addr, bits: int, m):
  if ctx.mem is None:
    raise PcodeError("this instruction accesses MEM: pass a memory object (see gputwin.pcode.Memory)")
  addr = arr(addr).astype(np.uint64, copy=False)
  if m is None:  # every lane active: no boolean gather/scatter of addresses and results
    return np.asarray(ctx.mem.read(addr.reshape(-1), bits)).reshape(addr.shape)
  shp = np.broadcast_shapes(addr.shape, np.shape(m))
  mask = np.broadcast_to(m, shp)
  a = np.broadcast_to(addr, shp)
  if mask.all():
    return np.asarray(ctx.mem.read(a.reshape(-1), bits)).reshape(shp)
  out = np.zeros(shp, dtype=U[max(cbits(bits), 8)] if cbits(bits) else object)
  if mask.any():
    out[mask] = ctx.mem.read(a[mask], bits)
  return out


def mwr(ctx: Ctx, addr, v, bits: int, m):
  if ctx.mem is None:
    raise PcodeError("this instruction accesses MEM: pass a memory object (see gputwin.pcode.Memory)")
  addr = arr(addr).astype(np.uint64, copy=False)
  shp = np.broadcast_shapes(addr.shape, np.shape(v), np.shape(m) if m is not None else ())
  mask = np.broadcast_to(True if m is None else m, shp)
  if m is None or mask.all():
    ctx.mem.write(np.broadcast_to(addr, shp).reshape(-1), np.broadcast_to(arr(v), shp).reshape(-1), bits)
  elif mask.any():
    ctx.mem.write(np.broadcast_to(addr, shp)[mask], np.broadcast_to(arr(v), shp)[mask], bits)


# ------------------------------------------------------------------------------------------------ built-ins
# Each built-in is fn(ret, tys, *args): ret is the (kind, bits) result type, tys the argument types.
BUILTINS: dict = {}


def builtin(*names):
  def deco(fn):
    for n in names:
      BUILTINS[n] = fn
    return fn
  return deco


def fbits(x):
  """(raw unsigned bits, exponent bits, mantissa bits) of a float array."""
  x = arr(x)
  b = {2: (16, 5, 10), 4: (32, 8, 23), 8: (64, 11, 52)}[x.dtype.itemsize]
  return x.view(U[b[0]]), b[1], b[2]


@builtin("isNAN")
def _isnan(ret, tys, x): return np.isnan(x)


@builtin("isINF")
def _isinf(ret, tys, x): return np.isinf(x)


@builtin("isSignalNAN", "isQuietNAN")
def _nanq(ret, tys, x, quiet=None):
  u, e, m = fbits(x)
  q = (u >> u.dtype.type(m - 1)) & u.dtype.type(1)
  return np.isnan(x) & (q == (1 if quiet else 0))


BUILTINS["isQuietNAN"] = lambda ret, tys, x: _nanq(ret, tys, x, quiet=True)


@builtin("isDENORM")
def _isdenorm(ret, tys, x):
  u, e, m = fbits(x)
  return ((u >> u.dtype.type(m)) & u.dtype.type((1 << e) - 1) == 0) & (u & u.dtype.type((1 << m) - 1) != 0)


@builtin("cvtToQuietNAN")
def _quiet(ret, tys, x):
  u, e, m = fbits(x)
  return np.where(np.isnan(x), (u | u.dtype.type(1 << (m - 1))), u).view(arr(x).dtype)


@builtin("sign")
def _sign(ret, tys, x):
  if tys[0][0] in ("f", "bf"):
    return np.signbit(x)
  return (ubits(x, tys[0][0], tys[0][1]) >> (tys[0][1] - 1)) & 1 == 1


@builtin("abs")
def _abs(ret, tys, x):
  if tys[0][0] == "i":
    return np.abs(x)  # wraps at the minimum like the hardware
  return np.abs(x)


@builtin("floor")
def _floor(ret, tys, x): return np.floor(x)


@builtin("trunc")
def _trunc(ret, tys, x): return np.trunc(x)


@builtin("fract")
def _fract(ret, tys, x):
  with np.errstate(invalid="ignore"):
    r = x - np.floor(x)
    one_below = np.nextafter(arr(x).dtype.type(1), arr(x).dtype.type(0))
    return np.where(np.isinf(x), arr(x).dtype.type(np.nan), np.minimum(r, one_below))


@builtin("sqrt")
def _sqrt(ret, tys, x): return np.sqrt(x)


# The transcendentals: the C library's f64 function (numpy's own loops are SIMD approximations chosen by CPU), rounded
# once to the operand's type. The LLVM backend calls the same functions (llvm.py Lower._libm).
_LIBC = ctypes.CDLL(None)  # this process's symbols, the C math library's among them


def libc_address(name: str) -> int:
  """The address of the C library function `name` the numpy backend calls (the LLVM backend binds its calls to it)."""
  return ctypes.cast(getattr(_LIBC, name), ctypes.c_void_p).value
LIBM = {"sin": 1, "cos": 1, "log2": 1, "exp2": 1, "tanh": 1, "pow": 2}  # function -> argument count


def _libm_fn(name: str):
  fn = getattr(_LIBC, name)
  fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double] * LIBM[name]
  return np.frompyfunc(fn, LIBM[name], 1)


_LIBM_UFUNCS = {n: _libm_fn(n) for n in LIBM}


def _transcendental(name, *xs):
  """`name` (a C library function, or an f64 function of numpy's that IEEE fixes) over xs in f64, rounded once to
  the first operand's type."""
  d = arr(xs[0]).dtype
  fn = _LIBM_UFUNCS[name] if isinstance(name, str) else name
  with np.errstate(all="ignore"):
    r = np.asarray(fn(*(arr(x).astype(np.float64) for x in xs))).astype(np.float64)
    return r if d == np.float64 else f64_to_f32_odd(r).astype(d) if d == np.float16 else r.astype(d)


@builtin("sin")
def _sin(ret, tys, x): return _transcendental("sin", x)


@builtin("cos")
def _cos(ret, tys, x): return _transcendental("cos", x)


@builtin("log2")
def _log2(ret, tys, x): return _transcendental("log2", x)


@builtin("pow")
def _pow(ret, tys, x, y): return _transcendental("pow", x, y)


@builtin("fma")
def _fma(ret, tys, a, b, c):
  """Fused multiply-add with a single rounding. f16/f32: the product is exact in f64 and the f64 sum is made
  round-to-odd, so rounding it to the narrow type is exact. f64: exact rational arithmetic per element."""
  dt = arr(a).dtype if isinstance(a, np.ndarray) or isinstance(a, np.generic) else np.dtype(np.float64)
  if dt == np.float64:
    def one(x, y, z):
      x, y, z = float(x), float(y), float(z)
      if not all(map(math.isfinite, (x, y, z))) or x == 0 or y == 0:  # exact zero products, infinities, NaNs: the
        return x * y + z  # float ops give the IEEE result (a product that underflows to 0 is not exact: below)
      r = Fraction(x) * Fraction(y) + Fraction(z)
      if r == 0:
        return x * y + z  # keeps the sign rules for exact zero
      try:
        return float(r)  # Fraction -> float rounds correctly to nearest even
      except OverflowError:
        return math.inf if r > 0 else -math.inf
    return fnan(np.vectorize(one, otypes=[np.float64])(a, b, c), fop("*", a, b), c)
  return fnan(_fma_narrow(a, b, c, dt), fop("*", a, b), c)  # (NaNs: fop's rule, the product then the sum)


def _fma_narrow(a, b, c, dt):
  """_fma for f16/f32 (dt): the exact f64 product plus c, made round-to-odd where it matters, rounded to dt."""
  with np.errstate(all="ignore"):
    if isinstance(a, np.ndarray) and a.shape == np.broadcast_shapes(a.shape, np.shape(b), np.shape(c)):
      s = a.astype(np.float64)  # a new array: multiply and add in place (the product is recomputed if needed below)
      s *= b  # exact: 2 x 24 significand bits fit in 53 (b is widened exactly)
      s += c
    else:
      s = np.multiply(a, b, dtype=np.float64)
      if isinstance(s, np.ndarray) and np.broadcast_shapes(s.shape, np.shape(c)) == s.shape:
        np.add(s, c, out=s)
      else:
        s = np.add(s, c, dtype=np.float64)
    r = s.astype(dt)
    # only a sum that lands exactly between two narrow values can round twice wrongly: such a sum has its low
    # 28 (f32) / 41 (f16) significand bits clear and is not itself representable
    low = np.uint64((1 << (28 if dt == np.float32 else 41)) - 1)
    tail = np.bitwise_and(s.view(np.uint64), low)
    if np.count_nonzero(tail) == tail.size:
      return r
    if isinstance(s, np.ndarray) and s.ndim and s.flags.c_contiguous and r.flags.c_contiguous:
      return _fma_fix(a, b, c, s, r, np.flatnonzero(tail == 0), dt)
    cand = tail == 0
    cand &= (r.astype(np.float64) != s) & np.isfinite(s)
    if not cand.any():
      return r
    z = arr(c).astype(np.float64)
    p = np.multiply(a, b, dtype=np.float64)
    bb = s - p
    err = (p - (s - bb)) + (z - bb)  # TwoSum: s + err == p + z exactly
    odd = (s.view(np.uint64) & np.uint64(1)) == np.uint64(1)
    adj = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
    s = np.where((err != 0) & ~odd & np.isfinite(s), adj, s)
    return s.astype(dt)


def _fma_fix(a, b, c, s, r, cand, dt):
  """_fma's double-rounding fix on the candidate elements only (flat indices into s): the same arithmetic as the
  whole-array form, element by element, so the same bits; a sum with many ties (saxpy by 1.5) no longer costs
  twenty passes over the whole batch."""
  sf, rf = np.take(s.reshape(-1), cand), np.take(r.reshape(-1), cand)
  keep = (rf.astype(np.float64) != sf) & np.isfinite(sf)
  if not keep.any():
    return r
  cand, sf = cand[keep], sf[keep]

  def pick(x):  # x at the candidates, for the shapes operands come in: lanes, one value per wave, a constant
    x = arr(x)
    if x.ndim == 0:
      return x
    if x.shape == s.shape:
      return np.take(x.reshape(-1), cand)
    if s.ndim == 2 and x.shape == (s.shape[0], 1):
      return np.take(x.reshape(-1), cand // s.shape[1])
    return np.broadcast_to(x, s.shape)[np.unravel_index(cand, s.shape)]  # a view of a broadcast: no full copy
  p = np.multiply(pick(a), pick(b), dtype=np.float64)
  z = pick(c).astype(np.float64)
  bb = sf - p
  err = (p - (sf - bb)) + (z - bb)  # TwoSum: sf + err == p + z exactly
  odd = (sf.view(np.uint64) & np.uint64(1)) == np.uint64(1)
  adj = np.nextafter(sf, np.where(err > 0, np.inf, -np.inf))
  r.reshape(-1)[cand] = np.where((err != 0) & ~odd, adj, sf).astype(dt)
  return r


@builtin("ldexp")
def _ldexp(ret, tys, x, e):
  x = arr(x)
  d = x.dtype
  r = np.ldexp(x.astype(np.float64), np.clip(arr(e).astype(np.int64), -4000, 4000).astype(np.int32))
  if d == np.float64:
    return r
  with np.errstate(over="ignore"):
    return f64_to_f32_odd(r).astype(d) if d == np.float16 else r.astype(d)


@builtin("exponent")
def _exponent(ret, tys, x):
  u, e, m = fbits(x)
  return ((u >> u.dtype.type(m)) & u.dtype.type((1 << e) - 1)).astype(np.int32)


@builtin("mantissa")
def _mantissa(ret, tys, x):
  """The significand scaled into [0.5, 1.0) with the input's sign (frexp), as V_FREXP_MANT describes."""
  m, _ = np.frexp(x)
  return m.astype(arr(x).dtype)


@builtin("signext")
def _signext(ret, tys, x):
  return cv(x, "i" if tys[0][0] in ("u", "b", "i") else tys[0][0], tys[0][1], "i", 64)


@builtin("signext_from_bit")
def _sext_bit(ret, tys, x, n):
  k, b = tys[0]
  u = ubits(x, k, b).astype(np.uint64)
  n = arr(n).astype(np.uint64)
  sgn = (u >> np.where(n == 0, 0, n - 1).astype(np.uint64)) & np.uint64(1)
  mask = np.where(n >= 64, np.uint64(0), ~np.uint64(0) << np.minimum(n, 63).astype(np.uint64))
  r = np.where((sgn == 1) & (n > 0), u | mask, u & ~mask)
  return from_bits(resize(r, 64, b), ret[0], ret[1])


@builtin("countbits", "bitCount", "count_ones")
def _popcount(ret, tys, x):
  u = ubits(x, tys[0][0], tys[0][1]).astype(np.uint64)
  c = np.zeros(np.shape(u), dtype=np.uint32)
  for i in range(tys[0][1]):
    c += ((u >> np.uint64(i)) & np.uint64(1)).astype(np.uint32)
  return c


@builtin("reverse_bits")
def _revbits(ret, tys, x): return rev(ubits(x, tys[0][0], tys[0][1]), tys[0][1]).astype(dtype(*ret))


@builtin("MIN")
def _min(ret, tys, a, b): return np.minimum(a, b)


@builtin("MAX")
def _max(ret, tys, a, b): return np.maximum(a, b)


@builtin("ABSDIFF")
def _absdiff(ret, tys, a, b):
  a, b = arr(a), arr(b)
  return np.where(a > b, a - b, b - a).astype(a.dtype)


@builtin("s_nop", "nop")
def _nop(ret, tys, *args):
  """The manual's explicit no-operation (e.g. V_PERMLANE64 in wave32): nothing changes."""
  return np.uint32(0)


@builtin("s_ff1_i32_b32", "s_ff1_i32_b64")
def _ff1(ret, tys, x):
  """Index of the lowest set bit, -1 when none (RDNA3 renamed S_FF1_* to S_CTZ_*; the helper keeps the old name)."""
  u = ubits(x, tys[0][0], tys[0][1]).astype(np.uint64)
  low = u & (~u + np.uint64(1))
  with np.errstate(divide="ignore", invalid="ignore"):
    idx = np.where(u == 0, -1, np.log2(np.where(low == 0, 1, low).astype(np.float64)).astype(np.int64))
  return idx.astype(np.int32)


@builtin("v_cvt_i16_f32", "v_cvt_u16_f32")
def _cvt16(ret, tys, x):
  return f2i(x, ret[0], 16)


@builtin("ds_swizzle")
def _ds_swizzle(ret, tys, offset, data, exec_bits):
  """DS_SWIZZLE_B32 lane selection over a whole wave: data is (waves, lanes); see the erratum in errata.py."""
  data = arr(data)
  L = data.shape[-1]
  off = np.broadcast_to(arr(offset).astype(np.int64), data.shape)[..., 0]
  i = np.arange(L)
  out = np.zeros(data.shape, dtype=np.uint32)
  active = ((arr(exec_bits).astype(np.uint64).reshape(-1, 1) >> i.astype(np.uint64)) & np.uint64(1)) == 1
  active = np.broadcast_to(active, data.shape)
  for w in range(data.shape[0]):
    o = int(off[w])
    if o >= 0xE000:  # FFT: bit-reversed lane within 32, shifted by the mask's population, OR the mask bits
      mask = o & 0x1F
      rev = np.array([int(f"{k & 0x1F:05b}"[::-1], 2) for k in i])
      j = (rev >> bin(mask).count("1")) | (i & mask) | (i & 0x20)
    elif o >= 0xC000:
      raise PcodeError(f"DS_SWIZZLE_B32 rotate mode (offset {o:#x}) is not supported")
    elif o & 0x8000:  # quad permute: lane 4k + m reads 4k + offset[2m + 1 : 2m]
      j = (i & ~3) | ((o >> (2 * (i & 3))) & 3)
    else:  # bit mask within each half of 32 lanes
      j = ((((i & 0x1F) & (o & 0x1F)) | ((o >> 5) & 0x1F)) ^ ((o >> 10) & 0x1F)) | (i & 0x20)
    j = j % L
    out[w] = np.where(active[w, j], data[w, j], 0)
  return out


@builtin("isEven")
def _iseven(ret, tys, x):
  return np.fmod(np.trunc(arr(x).astype(np.float64)), 2.0) == 0


# The small float formats: exponent bits, mantissa bits, bias, and how the top codes read (the sign is the bit above
# them). fp8/bf8 are OCP's E4M3 ("fn": no infinities, S.1111.111 is NaN, largest 448) and E5M2 ("ieee": S.11111.00 is
# infinity, S.11111.xx NaN); the "fnuz" ones (gfx942's FP8/BF8) have one NaN, 0x80, no infinities and no -0; fp6,
# bf6 and fp4 are the OCP Microscaling (MX) v1.0 element formats E2M3, E3M2 and E2M1 ("mx": every code finite,
# largest 7.5, 28 and 6). The x_to_y conversions take the 8-bit ones (`conversion`); gfx950's F8F6F4 MFMA all.
FP8 = {"fp8": (4, 3, 7, "fn"), "bf8": (5, 2, 15, "ieee"), "fp8fnuz": (4, 3, 8, "fnuz"), "bf8fnuz": (5, 2, 16, "fnuz"),
       "fp6": (2, 3, 1, "mx"), "bf6": (3, 2, 3, "mx"), "fp4": (2, 1, 1, "mx")}


def fp8_top(fmt: str) -> int:
  """The code of the largest finite value."""
  eb, mb, _, kind = FP8[fmt]
  return {"fn": 0x7e, "ieee": (((1 << eb) - 2) << mb) | ((1 << mb) - 1), "fnuz": 0x7f}[kind]


def fp8_special(fmt: str, negative: bool, nan: bool) -> int:
  """The code a NaN input (nan) or a value past the largest finite one (overflow, infinities included) converts to:
  OCP keeps the sign (E4M3's NaN, E5M2's NaN 0x7e / infinity 0x7c), the fnuz formats have only 0x80."""
  eb, mb, _, kind = FP8[fmt]
  if kind == "fnuz":
    return 0x80
  code = 0x7f if kind == "fn" else (((1 << eb) - 1) << mb) | (1 << (mb - 1) if nan else 0)
  return code | (0x80 if negative else 0)


def fp8_spec(fmt: str) -> tuple[int, int, float]:
  """(significand bits, minimum exponent, largest finite value), as RFMT gives them for rounding."""
  eb, mb, bias, _ = FP8[fmt]
  return mb + 1, 1 - bias, fp8_value(fmt, fp8_top(fmt))


def fp8_value(fmt: str, code: int) -> float:
  """The value of one code (NaN, +-inf as they are)."""
  eb, mb, bias, kind = FP8[fmt]
  s, e, m = code >> (eb + mb), code >> mb & ((1 << eb) - 1), code & ((1 << mb) - 1)
  if (kind == "fnuz" and code == 0x80) or (kind == "fn" and code & 0x7f == 0x7f) or \
     (kind == "ieee" and e == (1 << eb) - 1 and m):
    return math.nan
  if kind == "ieee" and e == (1 << eb) - 1:
    return -math.inf if s else math.inf
  v = math.ldexp(m, 1 - bias - mb) if e == 0 else math.ldexp(m | 1 << mb, e - bias - mb)
  return -v if s else v


@functools.cache
def _fp8_table(fmt: str) -> np.ndarray:
  """f32 bits of every code: exact values; a NaN code reads as the quiet NaN with the code's top bit as its sign."""
  n = 2 << FP8[fmt][0] + FP8[fmt][1]
  out = np.array([fp8_value(fmt, c) for c in range(n)], np.float32).view(np.uint32)
  nan = np.isnan(out.view(np.float32))
  out[nan] = 0x7fc00000 | (np.arange(n, dtype=np.uint32)[nan] >> 7 << 31)
  return out


def fp8_decode(x, fmt: str):
  """Codes -> f32 (exact)."""
  return _fp8_table(fmt)[np.asarray(x).astype(np.uint8)].view(np.float32)


def fp8_encode(x, fmt: str):
  """Floats -> codes, rounded to nearest even, not saturated: past the largest finite value (after rounding) is
  fp8_special's overflow code, as is an infinity; a NaN is its NaN code; fnuz formats turn -0 into 0."""
  top = fp8_top(fmt)
  pos = _fp8_table(fmt)[:top + 1].view(np.float32).astype(np.float64)  # codes 0..top ascending
  ext = np.append(pos, 2 * pos[-1] - pos[-2])  # and the first value past the top, as if the exponent went on
  x = np.asarray(x)
  a = np.abs(x.astype(np.float64))
  i = np.clip(np.searchsorted(ext, a, side="right") - 1, 0, len(ext) - 2)
  mid = (ext[i] + ext[i + 1]) / 2
  k = i + ((a > mid) | ((a == mid) & (i % 2 == 1)))  # ties to the even code (its mantissa's low bit)
  neg = np.signbit(x)
  fnuz = FP8[fmt][3] == "fnuz"
  code = np.where(neg & ~(fnuz & (k == 0)), 0x80, 0) | k
  code = np.where(k > top, np.where(neg, fp8_special(fmt, True, False), fp8_special(fmt, False, False)), code)
  code = np.where(np.isnan(a), np.where(neg, fp8_special(fmt, True, True), fp8_special(fmt, False, True)), code)
  return code.astype(np.uint8)


_FLOATS, _INTS = ("f32", "f16", "f64", "bf16"), ("u32", "i32", "u16", "i16")


def conversion(name: str) -> str | None:
  """How `convert` does the x_to_y conversion `name`, None where it does not (pcode.unsupported_calls' coverage)."""
  src, dst = name.split("_to_")[:2]
  if src in FP8 and dst == "f32" and sum(FP8[src][:2]) == 7:
    return "fp8 decode"
  if src == "f32" and dst in FP8 and sum(FP8[dst][:2]) == 7:
    return "fp8 encode"
  if dst in ("snorm", "unorm"):
    return "norm"
  if src in _INTS + ("u4", "i4", "u8", "i8") and not dst.startswith(("f", "bf")):
    return "integer"
  if src in _FLOATS and dst in _FLOATS:
    return "ieee"
  if (src in _FLOATS and dst in _INTS + ("u8",)) or (src in _INTS and dst in ("f32", "f16", "f64")):
    return "value"
  return None


def convert(name: str, ret, tys, *args):
  """x_to_y(...) conversions: value conversion, except the *norm forms (scale and saturate)."""
  how, (src, dst) = conversion(name), name.split("_to_")[:2]
  x = args[0]
  k, b = tys[0]
  if how == "fp8 decode":
    return fp8_decode(ubits(x, k, b), src)
  if how == "fp8 encode" and k == "f":
    return fp8_encode(x, dst)
  if how == "norm":
    v = arr(x).astype(np.float64)
    lo, sc = (-1.0, 32767.0) if dst == "snorm" else (0.0, 65535.0)
    v = np.where(np.isnan(v), 0.0, np.clip(v, lo, 1.0))
    r = np.round(v * sc)  # numpy rounds half to even
    return r.astype(np.int64).astype(np.int16 if dst == "snorm" else np.uint16)
  if how == "integer":
    sk, sb = src[0], int(src[1:])
    return cv(from_bits(resize(ubits(x, k, b), b, sb), sk, sb), sk, sb, *ret)
  if how == "ieee":
    r = cv(x, k, b, *ret)  # an IEEE conversion quiets a signalling NaN (casts like 64'F(x) keep it)
    return _quiet(ret, tys, r) if ret[0] == "f" else r
  if how == "value":
    return cv(x, k, b, *ret)
  raise PcodeError(f"conversion {name} is not supported by gputwin.pcode yet")


def toward_zero(x, r):
  """Turn a round-to-nearest result r of exact value x into the round-toward-zero one."""
  xd, rd = arr(x).astype(np.float64), arr(r).astype(np.float64)
  fix = np.isfinite(xd) & (np.abs(rd) > np.abs(xd))
  return np.where(fix, np.nextafter(r, arr(r).dtype.type(0)), r).astype(arr(r).dtype) if fix.any() else r


def call(ctx: Ctx, name: str, ret, tys, *args):
  """Dispatch a built-in; names not implemented here go to a hook on the memory object (CalcDsAddr, ...)."""
  fn = BUILTINS.get(name)
  if fn is not None:
    return fn(ret, tys, *args)
  if "_to_" in name and "scale" not in name and "_sr" not in name.lower():
    r = convert(name, ret, tys, *args)
    if ret[0] == "f" and tys[0][0] in ("f", "bf"):
      tz = np.asarray(ctx.rmode) == 3  # (per lane: an inactive lane keeps the mode it came with)
      r = np.where(tz, toward_zero(args[0], r), r) if tz.any() else r
    return r
  if ctx.sub is not None and name.startswith(("v_", "s_")):
    return ctx.sub(name, ret, tys, args)
  hook = getattr(ctx.mem, name, None) if ctx.mem is not None else None
  if hook is not None:
    return hook(*args)
  raise PcodeError(f"built-in {name}() is not supported by gputwin.pcode (no implementation and no hook "
                   f"`{name}` on the memory object)")


# ------------------------------------------------------------------------------- PTX numerics (pcode/ptx.py)
# Built-ins the PTX bodies call (AMD bodies call none of them): IEEE directed roundings, one-rounding conversions into
# f16/bf16/f32/f64/tf32/e4m3/e5m2, rounding to integral values, denormal flushing and the .approx functions.
# Directed roundings are exact: the exact result as a Fraction (sqrt: an integer square root with a sticky bit),
# rounded once (`round_exact`).
RFMT = {"f16": (11, -14, 65504.0), "bf16": (8, -126, float.fromhex("0x1.fep127")),
        "f32": (24, -126, float.fromhex("0x1.fffffep127")), "f64": (53, -1022, float.fromhex("0x1.fffffffffffffp1023")),
        "tf32": (11, -126, float.fromhex("0x1.ffcp127")), "e4m3": fp8_spec("fp8"), "e5m2": fp8_spec("bf8")}


def round_exact(q: Fraction, fmt: str, mode: str) -> float:
  """The exact value q rounded once into format fmt (significand bits, minimum exponent, largest finite value) with
  mode rn (ties to even), rna (ties away), rz, rm or rp; overflow gives inf or the largest finite value per mode."""
  p, emin, top = RFMT[fmt]
  if q == 0:
    return 0.0
  neg, a = q < 0, abs(q)
  e = a.numerator.bit_length() - a.denominator.bit_length()
  if Fraction(2) ** e > a:
    e -= 1
  ulp = Fraction(2) ** (max(e, emin) - p + 1)
  n, rem = divmod(a, ulp)
  half = Fraction(1, 2) * ulp
  n += {"rn": rem > half or (rem == half and n % 2 == 1), "rna": rem >= half, "rz": False,
        "rm": neg and rem > 0, "rp": not neg and rem > 0}[mode]
  v = n * ulp
  if v > Fraction(top):
    big = mode in ("rn", "rna") or (mode == "rm" and neg) or (mode == "rp" and not neg)
    v = math.inf if big else top
  v = float(v)
  return -v if neg else v


def _ptx_fmt(kind: str, bits: int) -> str:
  return "bf16" if kind == "bf" else f"f{bits}"


def _ptx_out(vals: list, shape, kind: str, bits: int):
  out = np.array(vals, dtype=np.float64).reshape(shape)
  with np.errstate(over="ignore"):
    return out.astype(np.float32) if kind == "bf" else out.astype(F[bits])


def _exact_sqrt(q: Fraction) -> Fraction:
  """sqrt(q) to far more bits than any format keeps, with a sticky half-unit when it is not exact."""
  k = 1200
  num = q.numerator * (1 << (2 * k)) // q.denominator
  r = math.isqrt(num)
  exact = r * r == num and q.numerator * (1 << (2 * k)) % q.denominator == 0
  return (Fraction(r) + (0 if exact else Fraction(1, 2))) / (1 << k)


def _ptx_arith(op: str, mode: str, ret, tys, *args):
  kind, bits = ret
  fmt = _ptx_fmt(kind, bits)
  xs = [np.asarray(a, dtype=np.float64) for a in args]
  shape = np.broadcast_shapes(*(x.shape for x in xs))
  xs = [np.broadcast_to(x, shape).reshape(-1) for x in xs]
  with np.errstate(all="ignore"):  # the IEEE result of the special cases (NaN, inf, x/0) is the same in every mode
    a, b = xs[0], xs[1] if len(xs) > 1 else None
    spec = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
            "rcp": lambda: 1.0 / a, "sqrt": lambda: np.sqrt(a), "fma": lambda: a * b + xs[2]}[op]()
  out = []
  for i in range(len(xs[0])):
    v = [float(x[i]) for x in xs]
    if not all(map(math.isfinite, v)) or (op in ("div", "rcp") and v[-1] == 0) or (op == "sqrt" and v[0] <= 0) or \
       (op == "fma" and not math.isfinite(v[0] * v[1]) and v[0] != 0 and v[1] != 0 and False):
      out.append(float(spec[i]))
      continue
    f = [Fraction(x) for x in v]
    if op in ("add", "sub", "fma"):
      x, y = (f[0], f[1] if op == "add" else -f[1]) if op != "fma" else (f[0] * f[1], f[2])
      sx = math.copysign(1, v[0]) < 0 if op != "fma" else (math.copysign(1, v[0]) < 0) != (math.copysign(1, v[1]) < 0)
      sy = (math.copysign(1, v[1]) < 0) != (op == "sub") if op != "fma" else math.copysign(1, v[2]) < 0
      q = x + y
      if q == 0:  # an exact zero: -0 only for -0 + -0, or for any exact cancellation when rounding down
        out.append(-0.0 if (x == 0 and y == 0 and sx and sy) or (mode == "rm" and not (x == 0 and y == 0 and
                                                                                         not sx and not sy)) else 0.0)
        continue
    elif op == "mul":
      q = f[0] * f[1]
      if q == 0:
        out.append(float(spec[i]))
        continue
    elif op in ("div", "rcp"):
      q = (f[0] / f[1]) if op == "div" else 1 / f[0]
      if q == 0:
        out.append(float(spec[i]))
        continue
    else:  # sqrt of a positive number
      q = _exact_sqrt(f[0])
    out.append(round_exact(q, fmt, mode))
  return _ptx_out(out, shape, kind, bits)


for _op in ("add", "sub", "mul", "fma", "div", "sqrt", "rcp"):
  for _m in ("rn", "rz", "rm", "rp"):
    BUILTINS[f"{_op}_{_m}"] = (lambda o, m: lambda ret, tys, *a: _ptx_arith(o, m, ret, tys, *a))(_op, _m)


def _encode8(v: float, fmt: str) -> int:
  """An fp8 value (already rounded into the format, or +-inf / NaN) as its e4m3/e5m2 byte, saturated to the
  largest finite value (.satfinite): NaN -> 0x7f."""
  p, emin, top = RFMT[fmt]
  if math.isnan(v):
    return 0x7f
  s = 0x80 if math.copysign(1, v) < 0 else 0
  a = min(abs(v), top)
  m = p - 1
  if a == 0:
    return s
  e = math.frexp(a)[1] - 1
  if e < emin:
    return s | int(a / 2.0 ** (emin - m))
  return s | ((e - emin + 1) << m) | int((a / 2.0 ** e - 1) * (1 << m))


def _ptx_round(mode: str, fmt: str, ret, tys, x):
  k, b = tys[0]
  x = np.asarray(x)
  shape = x.shape
  out = []
  for v in x.reshape(-1):
    if k in ("f", "bf"):
      v = float(v)
      r = v if not math.isfinite(v) or v == 0 else round_exact(Fraction(v), fmt, mode)
    else:
      r = round_exact(Fraction(int(v)), fmt, mode)
    out.append(_encode8(r, fmt) if fmt in ("e4m3", "e5m2") else r)
  if fmt in ("e4m3", "e5m2"):
    return np.array(out, dtype=np.uint8).reshape(shape)
  rk, rb = ret
  return _ptx_out(out, shape, rk, rb)


for _m in ("rn", "rna", "rz", "rm", "rp"):
  for _f in RFMT:
    BUILTINS[f"round_{_m}_{_f}"] = (lambda m, f: lambda ret, tys, x: _ptx_round(m, f, ret, tys, x))(_m, _f)

for _m, _fn in (("rn", np.rint), ("rz", np.trunc), ("rm", np.floor), ("rp", np.ceil)):
  BUILTINS[f"rint_{_m}"] = (lambda fn: lambda ret, tys, x: fn(x))(_fn)


@builtin("ftz")
def _ftz(ret, tys, x):
  """A denormal (of the value's own format; bf16 shares f32's exponent range) flushed to zero of the same sign."""
  x = arr(x)
  return np.where(_isdenorm(ret, tys, x), np.copysign(x.dtype.type(0), x), x).astype(x.dtype)


# .approx: evaluated in f64 (the C library's functions, IEEE for sqrt and division), rounded once to the operand's type
APPROX = {"sin": "sin", "cos": "cos", "lg2": "log2", "ex2": "exp2", "tanh": "tanh", "sqrt": np.sqrt,
          "rcp": lambda v: 1.0 / v, "rsqrt": lambda v: 1.0 / np.sqrt(v)}
for _n, _fn in APPROX.items():
  BUILTINS[f"approx_{_n}"] = (lambda fn: lambda ret, tys, x: _transcendental(fn, x))(_fn)
