"""The C runtime calls compiled host code makes (libm, compiler-rt's float conversions), serviced by the launcher
instead of linked: each undefined symbol is a stub the launcher answers from the registers of the C calling
convention. Math is numpy's (the reference interpreter's library: the same functions on one-element arrays, the
transcendentals in f64 rounded once, as the reference computes them);
conversions round to nearest even as IEEE 754 says; fma is exact before its one rounding (fractions)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

F = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _ufunc(fn, t):
  return lambda x: fn(np.array([x], F[t]))[0]


def _wide(fn, t):
  """A transcendental as the reference computes it: in f64, rounded once to t (numpy's f32 loops are SIMD
  approximations that differ by CPU)."""
  return lambda x: F[t](fn(np.array([x], np.float64))[0])


def _to_odd(exact: Fraction, r):
  """r (a float rounded to nearest from `exact`) made round-to-odd: a second rounding to a narrower format
  (f64 -> f32, f32 -> bf16) is then the one correct rounding of `exact`."""
  if Fraction(float(r)) != exact and not int(np.array([r]).view(f"u{r.itemsize}")[0]) & 1:
    r = np.nextafter(r, r.dtype.type(np.inf) if exact > Fraction(float(r)) else r.dtype.type(-np.inf))
  return r


def _fma(t):
  def fma(x, y, z):
    x, y, z = (F[t](v) for v in (x, y, z))
    near = F[t](np.float64(x) * np.float64(y) + np.float64(z))
    if not all(np.isfinite(v) for v in (x, y, z)) or near == 0 or not np.isfinite(near):
      return near   # inf/NaN operands, zero (its sign) or overflow: no double rounding to avoid
    exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    r = np.float64(float(exact))   # Fraction -> float is correctly rounded: f64's answer
    return r if t == "f64" else F[t](_to_odd(exact, r))
  return fma


def bf16_bits(x) -> int:
  """Round an f32 or f64 to bfloat16 bits (nearest even, one rounding; NaN stays a quiet NaN)."""
  x = np.asarray(x)
  if np.isnan(x):
    return 0x7fc0 | (0x8000 if np.signbit(x) else 0)
  f = np.float32(x)
  if x.dtype == np.float64 and np.isfinite(f):
    f = _to_odd(Fraction(float(x)), f)
  b = int(np.array([f]).view(np.uint32)[0])
  return (b + 0x7fff + (b >> 16 & 1)) >> 16 & 0xffff


# symbol -> (argument types, result type, function of the float arguments); "*T" arguments are pointers the
# function's results (a tuple) are stored through, in order
SERVICES = {}
for _t, _sfx in (("f32", "f"), ("f64", "")):
  for _name, _fn in (("sin", np.sin), ("cos", np.cos), ("exp", np.exp), ("exp2", np.exp2), ("log", np.log),
                     ("log2", np.log2)):
    SERVICES[_name + _sfx] = ((_t,), _t, _wide(_fn, _t))
  for _name, _fn in (("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc), ("sqrt", np.sqrt)):
    SERVICES[_name + _sfx] = ((_t,), _t, _ufunc(_fn, _t))
  for _name, _fn in (("fmod", np.fmod), ("fmin", np.fmin), ("fmax", np.fmax)):
    SERVICES[_name + _sfx] = ((_t, _t), _t, (lambda f, t: lambda x, y: f(np.array([x], F[t]), np.array([y], F[t]))[0])
                              (_fn, _t))
  SERVICES["fma" + _sfx] = ((_t, _t, _t), _t, _fma(_t))
  SERVICES["sincos" + _sfx] = ((_t, "*" + _t, "*" + _t), None,   # results stored through the pointers
                               (lambda t: lambda x: (_wide(np.sin, t)(x), _wide(np.cos, t)(x)))(_t))
SERVICES.update({
  "__truncsfhf2": (("f32",), "f16", np.float16), "__truncdfhf2": (("f64",), "f16", np.float16),
  "__extendhfsf2": (("f16",), "f32", np.float32), "__gnu_h2f_ieee": (("f16",), "f32", np.float32),
  "__gnu_f2h_ieee": (("f32",), "f16", np.float16),
  "__truncsfbf2": (("f32",), "bf16", bf16_bits), "__truncdfbf2": (("f64",), "bf16", bf16_bits),
})
