"""The IR's other types (f16, bf16, f64, i8-i64, private arrays) through the LLVM backend on the emulator, against
the host reference bit for bit; the direct backend refuses them with a located error instead of guessing."""
import numpy as np
import pytest

from gputwin.compiler import (Ptr, bf16, compile, f16, f32, f64, global_id, i16, i32, i64, kernel, private,
                              sqrt, u8, u32)
from gputwin.errors import CompileError

from _compiler_helpers import TARGETS, run_both


@kernel
def t_f16(x: Ptr[f16], y: Ptr[f16], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = x[i] * f16(1.5) + f16(0.25)


@kernel
def t_bf16(x: Ptr[bf16], y: Ptr[bf16], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = bf16(f32(x[i]) * 3.0) - x[i]


@kernel
def t_i64(x: Ptr[i64], y: Ptr[i64], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = x[i] * 3 - (x[i] >> 7) + i64(i) // 3


@kernel
def t_u8(x: Ptr[u8], y: Ptr[u8], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = x[i] * 7 + u8(i)


@kernel
def t_i16(x: Ptr[i16], y: Ptr[i16], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = max(x[i] * 3, i16(-5)) // 5


@kernel
def t_f64(x: Ptr[f64], y: Ptr[f64], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = sqrt(abs(x[i])) * 2.0 + x[i] / 3.0


@kernel
def t_private(x: Ptr[i32], y: Ptr[i32], n: i32):
  i = global_id(0)
  p = private(i32, 4)
  for k in range(4):
    p[k] = x[i] + k
  s = 0
  for k in range(4):
    s += p[(k + i) % 4] * k
  y[i] = s


@kernel
def t_saturate(x: Ptr[f32], y: Ptr[i32], n: i32):
  i = global_id(0)
  y[i] = i32(x[i] * 1e9) + i32(u32(x[i] * 3e9))


def _data(kf, rng, n=64):
  if kf is t_bf16:
    bits = (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return [bits, np.zeros(n, np.uint16), n]
  src, dst = {t_f16: (np.float16,) * 2, t_i64: (np.int64,) * 2, t_u8: (np.uint8,) * 2, t_i16: (np.int16,) * 2,
              t_f64: (np.float64,) * 2, t_private: (np.int32,) * 2, t_saturate: (np.float32, np.int32)}[kf]
  x = (rng.standard_normal(n) * 100).astype(src) if np.dtype(src).kind == "f" else \
    rng.integers(np.iinfo(src).min, np.iinfo(src).max, n, dtype=src)
  return [x, np.zeros(n, dst), n]


KERNELS = [t_f16, t_bf16, t_i64, t_u8, t_i16, t_f64, t_private, t_saturate]


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("kf", KERNELS, ids=lambda k: k.name)
def test_llvm_backend_types_bit_exact(kf, arch):
  c = compile(kf, arch, backend="llvm")
  ref, emu = run_both(c, _data(kf, np.random.default_rng(4)), 1, 64)
  np.testing.assert_array_equal(emu[1], ref[1])


@pytest.mark.parametrize("kf", [k for k in KERNELS if k is not t_saturate], ids=lambda k: k.name)
def test_direct_backend_refuses_with_location(kf):
  with pytest.raises(CompileError) as e:
    compile(kf, "gfx1100", backend="direct")
  assert "--backend llvm" in str(e.value) and e.value.loc is not None and e.value.loc.line > 0, str(e.value)


def test_direct_backend_saturating_casts():
  for arch in ("gfx1100", "gfx942"):
    c = compile(t_saturate, arch, backend="direct")
    ref, emu = run_both(c, _data(t_saturate, np.random.default_rng(4)), 1, 64)
    np.testing.assert_array_equal(emu[1], ref[1])
