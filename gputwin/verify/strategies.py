"""Hypothesis strategies for verification tests: random valid instructions per target (gputwin.isa.strategies, less
what the decoder rejects) and kernel inputs (arrays and scalars by element type)."""
from __future__ import annotations

import numpy as np

from gputwin.errors import DecodeError
from gputwin.isa import decode
from gputwin.isa import strategies as isa_strategies
from gputwin.isa.strategies import words  # noqa: F401  (re-exported)

__all__ = ["instruction", "words", "instructions", "array", "scalar", "kernel_inputs"]


_TYPES = {"f16": "f2", "f32": "f4", "f64": "f8", "i8": "i1", "u8": "u1", "i16": "i2", "u16": "u2", "i32": "i4",
          "u32": "u4", "i64": "i8", "u64": "u8"}


def _dtype(t) -> np.dtype:
  """gputwin/vendor names (f16, u32 ...) or anything numpy takes."""
  return np.dtype(_TYPES.get(t, t) if isinstance(t, str) else t)


def instruction(target: str, encoding: str | None = None, opcode: str | None = None, **kw):
  """One random instruction (isa.strategies.Sample) of `target` that decodes: the isa builder, which feeds the
  llvm-mc fuzzers, also explores field values the decoder rejects (a 4-dword SMEM base past the last SGPR, ...)."""
  def decodes(sample) -> bool:
    try:
      decode(sample.data, target)
      return True
    except DecodeError:
      return False
  return isa_strategies.instruction(target, encoding, opcode, **kw).filter(decodes)


def instructions(target: str, n: int = 8, **kw):
  """Lists of 1..n random valid instructions (isa.strategies.Sample) of `target`."""
  from hypothesis import strategies as st
  return st.lists(instruction(target, **kw), min_size=1, max_size=n)


def array(dtype, n: int | tuple = 64, *, finite: bool = True, bits: bool = False):
  """A numpy array of `dtype` ("f16", "u32" or a numpy dtype) and shape `n`. Floats: finite values by default
  (bits=True: any bit pattern, NaNs and denormals included — what an emulator-vs-device test wants)."""
  from hypothesis.extra import numpy as hnp
  dt = _dtype(dtype)
  shape = (n,) if isinstance(n, int) else tuple(n)
  if dt.kind == "f" and bits:
    return hnp.arrays(np.dtype(f"u{dt.itemsize}"), shape).map(lambda a: a.view(dt))
  if dt.kind == "f":
    from hypothesis import strategies as st
    return hnp.arrays(dt, shape, elements=st.floats(width=8 * dt.itemsize, allow_nan=not finite,
                                                      allow_infinity=not finite))
  return hnp.arrays(dt, shape)


def scalar(dtype, lo=None, hi=None):
  """A numpy scalar of `dtype` (integers within [lo, hi] when given)."""
  from hypothesis import strategies as st
  dt = _dtype(dtype)
  if dt.kind == "f":
    return st.floats(width=8 * dt.itemsize, allow_nan=False, allow_infinity=False).map(dt.type)
  info = np.iinfo(dt)
  return st.integers(info.min if lo is None else lo, info.max if hi is None else hi).map(dt.type)


def kernel_inputs(signature, n: int = 64):
  """Arguments for a kernel signature like ("f32*", "f32*", "i32"): arrays of n elements for pointers, scalars
  otherwise; returns a strategy for the argument list."""
  from hypothesis import strategies as st
  return st.tuples(*[array(s[:-1], n) if s.endswith("*") else scalar(s) for s in signature]).map(list)
