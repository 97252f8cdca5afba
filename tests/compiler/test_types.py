"""The IR's other types (f16, bf16, f64, i8-i64, private arrays) through the LLVM backend on the emulator, against
the host reference bit for bit; the direct backend refuses them with a located error instead of guessing."""
import numpy as np
import pytest

from gputwin.compiler import (Ptr, barrier, bf16, compile, f16, f32, f64, global_id, i8, i16, i32, i64, kernel,
                              private, shared, sqrt, u8, u16, u32, u64, workitem_id)
from gputwin.errors import CompileError

from _compiler_helpers import TARGETS, known_emu_bug, run_both


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


@kernel
def t_narrow(x: Ptr[i8], y: Ptr[u8], z: Ptr[i16], w: Ptr[u16], f: Ptr[f32], n: i32):
  """8/16-bit integers in the direct backend: wrap-around, shifts modulo the width, saturating float casts, LDS."""
  i = global_id(0)
  a = x[i]
  b = y[i]
  c = z[i]
  d = w[i]
  x[i] = a * 3 + i8(b) - (a >> 2) + (a << 3) + abs(a) + (-a) // 3
  y[i] = (b * b) ^ u8(i) + (b >> 1) + u8(c) + b % 7
  z[i] = max(c * 7, i16(a)) + i16(f[i] * 1000.0) + c // i16(b | 1)
  w[i] = d * 3 + u16(f[i] * 100.0) - (d << 4) + u16(a)
  sh = shared(i16, 64)
  sh[workitem_id(0)] = c
  barrier()
  f[i] = f32(sh[63 - workitem_id(0)]) + f32(b > u8(100))


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_narrow_integers(arch, backend):
  rng = np.random.default_rng(0)
  args = [rng.integers(-128, 128, 64).astype(np.int8), rng.integers(0, 256, 64).astype(np.uint8),
          rng.integers(-32768, 32768, 64).astype(np.int16), rng.integers(0, 65536, 64).astype(np.uint16),
          (rng.standard_normal(64) * 100).astype(np.float32), 64]
  ref, emu = run_both(compile(t_narrow, arch, backend=backend), args, 1, 64)
  for r, e in zip(ref[:5], emu[:5]): np.testing.assert_array_equal(e, r)


@kernel
def t_half(x: Ptr[f16], y: Ptr[f16], z: Ptr[f32], w: Ptr[u16], n: i32):
  """f16 in the direct backend: arithmetic rounded through f16 after each op, LDS, casts, bitcasts."""
  i = global_id(0)
  a = x[i]
  b = y[i]
  c = a * b + a / (b + f16(3.0)) - max(a, b)
  s = shared(f16, 64)
  s[workitem_id(0)] = c
  barrier()
  d = s[63 - workitem_id(0)]
  y[i] = sqrt(abs(d)) + f16(i) * f16(0.125) + f16(z[i])
  z[i] = f32(c) + f32(bitcast(f16, w[i]))
  w[i] = bitcast(u16, -d) + u16(a > b)


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_half(arch, backend):
  rng = np.random.default_rng(0)
  args = [(rng.standard_normal(64) * 10).astype(np.float16), (rng.standard_normal(64) * 10).astype(np.float16),
          (rng.standard_normal(64) * 1000).astype(np.float32), rng.integers(0, 0x7b00, 64).astype(np.uint16), 64]
  c = compile(t_half, arch, backend=backend)
  suspect = known_emu_bug(c.asm) if backend == "llvm" else None
  try:
    ref, emu = run_both(c, args, 1, 64)
  except Exception as e:
    if suspect: pytest.xfail(f"{suspect}: {type(e).__name__}")
    raise
  for r, e in zip(ref[:4], emu[:4]): np.testing.assert_array_equal(e.view(np.uint8), r.view(np.uint8))


@kernel
def t_wide(x: Ptr[i64], y: Ptr[u64], z: Ptr[i32], n: i32):
  """64-bit integers in the direct backend (VGPR pairs): carries, 64-bit shifts and compares, mixed-width casts."""
  i = global_id(0)
  a = x[i]
  b = y[i]
  c = a * 3 - (a >> 7) + i64(i) * 1000000007 + (a << 33) - abs(a) + (-a)
  d = (b * b) ^ (b >> 5) | u64(z[i]) + u64(i32(c) < 0) + max(b, u64(12345)) + min(b, u64(i))
  x[i] = c if c > a else a + i64(u32(z[i]))
  y[i] = d + u64(~a)
  z[i] = i32(c) + i32(d >> 40) + i32(a == i64(b))
  s = i64(0)
  for k in range(3):
    s = s + a * i64(k)
  x[i + 64] = s


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_wide_integers(arch, backend):
  rng = np.random.default_rng(0)
  args = [rng.integers(-2**63, 2**63 - 1, 128, dtype=np.int64), rng.integers(0, 2**64 - 1, 64, dtype=np.uint64),
          rng.integers(-2**31, 2**31 - 1, 64).astype(np.int32), 64]
  ref, emu = run_both(compile(t_wide, arch, backend=backend), args, 1, 64)
  for r, e in zip(ref[:3], emu[:3]): np.testing.assert_array_equal(e, r)


@kernel
def t_brain(x: Ptr[bf16], y: Ptr[bf16], z: Ptr[f32], w: Ptr[u16], n: i32):
  """bf16 in the direct backend: the f32 of the value, rounded to nearest even on the top half after each op."""
  i = global_id(0)
  a = x[i]
  c = a * y[i] + a / (y[i] + bf16(3.0)) - max(a, y[i])
  s = shared(bf16, 64)
  s[workitem_id(0)] = c
  barrier()
  d = s[63 - workitem_id(0)]
  y[i] = sqrt(abs(d)) + bf16(i) * bf16(0.125) + bf16(z[i]) + bf16(f16(z[i]))
  z[i] = f32(c) + f32(bitcast(bf16, w[i]))
  w[i] = bitcast(u16, -d) + u16(a > y[i])


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_bfloat(arch, backend):
  rng = np.random.default_rng(0)
  bits = lambda a: (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
  args = [bits(rng.standard_normal(64) * 10), bits(rng.standard_normal(64) * 10),
          (rng.standard_normal(64) * 1000).astype(np.float32), rng.integers(0, 0x7f00, 64).astype(np.uint16), 64]
  c = compile(t_brain, arch, backend=backend)
  suspect = known_emu_bug(c.asm) if backend == "llvm" else None
  try:
    ref, emu = run_both(c, args, 1, 64)
  except Exception as e:
    if suspect: pytest.xfail(f"{suspect}: {type(e).__name__}")
    raise
  for r, e in zip(ref[:4], emu[:4]): np.testing.assert_array_equal(e.view(np.uint8), r.view(np.uint8))


@kernel
def t_double(x: Ptr[f64], y: Ptr[f64], z: Ptr[f32], w: Ptr[i32], n: i32):
  """f64 in the direct backend: VGPR pairs, Newton-refined division, casts to and from f32/i32."""
  i = global_id(0)
  a = x[i]
  b = y[i]
  c = a * b + a - b * 0.5 + min(a, b) - max(a, -b) + fma(a, b, 1.0) + f64(i) + f64(z[i]) - abs(a)
  q = a / b
  x[i] = c if c > a else -c
  y[i] = q + sqrt(abs(b)) + floor(a) + trunc(b) + ceil(a)
  z[i] = f32(c) + f32(q > 1.0)
  w[i] = i32(a * 1e9) + i32(u32(b))


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_double(arch, backend):
  """Bit-exact on the emulator (its v_rcp_f64/v_sqrt_f64 are exact; hardware's are ~1 ulp before refinement)."""
  rng = np.random.default_rng(0)
  args = [rng.standard_normal(64) * 10, rng.standard_normal(64) * 10,
          (rng.standard_normal(64) * 1000).astype(np.float32), np.zeros(64, np.int32), 64]
  ref, emu = run_both(compile(t_double, arch, backend=backend), args, 1, 64)
  for r, e in zip(ref[:4], emu[:4]): np.testing.assert_array_equal(e, r)


@pytest.mark.parametrize("kf", [t_u8, t_i16, t_f16, t_bf16, t_f64], ids=lambda k: k.name)
def test_direct_backend_other_types(kf):
  for arch in ("gfx1100", "gfx942"):
    ref, emu = run_both(compile(kf, arch, backend="direct"), _data(kf, np.random.default_rng(4)), 1, 64)
    np.testing.assert_array_equal(emu[1], ref[1])


@pytest.mark.parametrize("kf", [t_i64, t_private], ids=lambda k: k.name)
def test_direct_backend_refuses_with_location(kf):
  with pytest.raises(CompileError) as e:
    compile(kf, "gfx1100", backend="direct")
  assert "--backend llvm" in str(e.value) and e.value.loc is not None and e.value.loc.line > 0, str(e.value)


def test_direct_backend_saturating_casts():
  for arch in ("gfx1100", "gfx942"):
    c = compile(t_saturate, arch, backend="direct")
    ref, emu = run_both(c, _data(t_saturate, np.random.default_rng(4)), 1, 64)
    np.testing.assert_array_equal(emu[1], ref[1])


VECTOR_IR = """kernel @vec(%x: global<f32>, %y: global<i32>, %z: global<f32>, %w: global<i32>) {
  %t: i32 = workitem.id.x
  %four: i32 = const 4
  %b: i32 = mul %t, %four
  %v: f32x4 = load %x, %b
  %u: f32x4 = load %z, %b
  %s: f32x4 = add %v, %u
  %m: f32x4 = mul %s, %v
  %mx: f32x4 = max %m, %u
  %c: boolx4 = lt %v, %u
  %sel: f32x4 = select %c, %mx, %s
  %q: f32x4 = sqrt %sel
  %e: f32 = extract %q, 2
  %n: f32x4 = neg %q
  store %z, %b, %n
  %two: i32 = const 2
  %bi: i32 = mul %t, %two
  %iv: i32x2 = load %y, %bi
  %sh: i32x2 = shl %iv, %iv
  %d: i32x2 = div %sh, %iv
  %fi: f32x2 = cast %d
  %ib: i32x2 = bitcast %fi
  %xo: i32x2 = xor %ib, %d
  store %w, %bi, %xo
  %e2: i32 = bitcast %e
  store %w, %t, %e2
}
"""


@pytest.mark.parametrize("arch", TARGETS)
def test_vector_ir_on_llvm_backend(arch):
  """Short-vector arithmetic, compares, selects, casts and vector memory ops (IR text; the frontend has no vector
  syntax yet): LLVM backend on the emulator vs the reference, NaNs from sqrt of negatives included."""
  from gputwin.compiler import ir
  from gputwin.compiler.examples import ulp_diff
  rng = np.random.default_rng(0)
  args = [np.abs(rng.standard_normal(256)).astype(np.float32), rng.integers(-100, 100, 128).astype(np.int32),
          rng.standard_normal(256).astype(np.float32), np.zeros(128, np.int32)]
  ref, emu = run_both(compile(ir.parse(VECTOR_IR), arch, backend="llvm"), args, 1, 64)
  np.testing.assert_array_equal(emu[3], ref[3])
  assert ulp_diff(emu[2], ref[2]).max() == 0
  with pytest.raises(CompileError, match="use --backend llvm"):
    compile(ir.parse(VECTOR_IR), arch, backend="direct")


def test_reference_float_to_64bit_int_casts_saturate_like_c_sat():
  """The reference's f64 -> u64/i64 casts: truncation toward zero, saturating at the type's range, NaN -> 0 (what
  llvm.fpto[su]i.sat and PTX cvt.rzi give), checked against Python's exact integers over the whole range."""
  from gputwin.compiler.ir import parse_type
  from gputwin.compiler.reference import _cast
  x = np.array([2.0**63, 1.5 * 2**63, 2.0**64 - 2048, 2.0**64, 1e30, -1.0, -2.0**63, -1e30, np.nan, 3.7, -3.7])
  for t, lo, hi in (("u64", 0, 2**64 - 1), ("i64", -2**63, 2**63 - 1)):
    want = [0 if v != v else min(max(int(v), lo), hi) for v in x]
    assert [int(v) for v in _cast(x, parse_type("f64"), parse_type(t))] == want, t
