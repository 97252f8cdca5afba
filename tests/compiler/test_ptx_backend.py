"""The NVIDIA PTX backends (direct text emission; LLVM's NVPTX target): every example and the edge-case kernels below
compile for sm_80 and sm_90, `ptxas` accepts every module, and gputwin.emu.launch(..., arch="sm_90") gives the host
reference's results: integers and bools bit-exact, floats within the example's ulp bound (0: bit-exact), as
test_backends.py checks the AMD backends. Oracles: the reference (its docstring is the IR's meaning), numpy, and
ptxas from the CUDA toolkit."""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from gputwin.compiler import (NV_TARGETS, Ptr, atomic_add, atomic_and, atomic_max, atomic_min, atomic_or, atomic_sub,
                              atomic_xchg, atomic_xor, barrier, bf16, bitcast, ceil, compile, cos, exp, exp2, f16, f32,
                              f64, floor, fma, global_id, i8, i16, i32, i64, ir, kernel, log, log2, num_workgroups,
                              private, reference, rsqrt, shared, sin, sqrt, trunc, u16, u32, u64, workgroup_id,
                              workgroup_size, workitem_id)
from gputwin.compiler.examples import EXAMPLES, ulp_diff
from gputwin.errors import CompileError

PTXAS = shutil.which("ptxas") or ("/usr/local/bin/ptxas" if Path("/usr/local/bin/ptxas").exists() else None)
BACKENDS = ("direct", "llvm")
_CACHE: dict = {}


def compiled(k, arch="sm_90", backend="direct"):
  """Module-level compile cache: each (kernel, target, backend) is compiled once per test session."""
  key = (id(k), arch, backend)
  if key not in _CACHE: _CACHE[key] = compile(k, arch, backend=backend)
  return _CACHE[key]


def ptxas_errors(text: str, arch: str) -> str:
  """'' when ptxas assembles the module for `arch`, else its messages."""
  with tempfile.TemporaryDirectory() as d:
    p = Path(d) / "k.ptx"
    p.write_text(text)
    r = subprocess.run([PTXAS, f"-arch={arch}", "-o", str(Path(d) / "k.cubin"), str(p)], capture_output=True,
                       text=True)
  return r.stderr if r.returncode else ""


def run_both(c, args, grid, block):
  """(reference args, emulator args) after running `c` on both; arrays copied so the inputs stay untouched."""
  from gputwin.emu import launch
  ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
  emu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
  reference.launch(c.ir, grid=grid, block=block, args=ref)
  launch(c.code_object, c.name, grid=grid, block=block, args=emu, arch=c.arch)
  return ref, emu


def assert_same(ref, emu, outs, ulps=0, what=""):
  for o in outs:
    if ref[o].dtype.kind == "f":
      worst = int(ulp_diff(emu[o], ref[o]).max())
      assert worst <= ulps, f"{what} arg {o}: {worst} ulp (bound {ulps})"
    else:
      np.testing.assert_array_equal(emu[o], ref[o], err_msg=f"{what} arg {o}")


# --------------------------------------------------------------------------------------------------------------
# the examples

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", NV_TARGETS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_compiles_and_ptxas_accepts(name, arch, backend):
  c = compiled(EXAMPLES[name].kernel, arch, backend)
  assert c.code_object == c.ptx.encode() and c.ptx == c.asm
  assert f".target {arch}" in c.ptx and f".entry {name}" in c.ptx
  if PTXAS: assert ptxas_errors(c.ptx, arch) == ""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_like_reference(name, backend):
  ex = EXAMPLES[name]
  c = compiled(ex.kernel, "sm_90", backend)
  args, grid, block = ex.inputs(np.random.default_rng(11))
  ref, emu = run_both(c, args, grid, block)
  assert_same(ref, emu, ex.outputs, ex.ulps, f"{name} sm_90 {backend}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_demo_kernels_match_numpy_on_sm80(backend):
  """The demo set on sm_80 against numpy directly, as `gputwin demo` checks it (check_example)."""
  from gputwin.compiler.examples import DEMO, check_example
  from gputwin.emu import launch
  for name in DEMO:
    row = check_example(name, "sm_80", backend, lambda co, k, **kw: launch(co, k, arch="sm_80", **kw))
    assert row["ok"], (name, row)


# --------------------------------------------------------------------------------------------------------------
# where PTX and the IR differ: each kernel against the reference, bit for bit

@kernel
def k_int32(a: Ptr[i32], b: Ptr[i32], o: Ptr[i32], p: Ptr[u32], n: i32):
  """Division by zero, INT_MIN / -1, shifts by >= 32 and negative amounts, |INT_MIN|, unsigned division."""
  i = global_id(0)
  if i < n:
    x = a[i]
    y = b[i]
    o[i * 6] = x // y
    o[i * 6 + 1] = x % y
    o[i * 6 + 2] = x << y
    o[i * 6 + 3] = x >> y
    o[i * 6 + 4] = abs(x) + (-x)
    o[i * 6 + 5] = min(x, y) * 3 - max(x, y)
    ux = u32(x)
    uy = u32(y)
    p[i * 3] = ux // uy
    p[i * 3 + 1] = ux % uy
    p[i * 3 + 2] = (ux >> uy) + (ux << (uy + u32(1)))


@kernel
def k_int_other(a: Ptr[i64], b: Ptr[i64], o: Ptr[i64], q: Ptr[u64], s: Ptr[i8], t: Ptr[u16], n: i32):
  """64-bit and 8/16-bit integers: the same edge cases, wrap-around, sign and zero extension."""
  i = global_id(0)
  if i < n:
    x = a[i]
    y = b[i]
    o[i * 4] = x // y
    o[i * 4 + 1] = x % y
    o[i * 4 + 2] = (x << y) ^ (x >> (y + i64(7)))
    o[i * 4 + 3] = abs(x) * 3 + min(x, y)
    q[i * 2] = u64(x) // u64(y) + (u64(x) >> u64(y))
    q[i * 2 + 1] = u64(x) % u64(y)
    c = i8(x)
    d = i8(y)
    s[i * 3] = c // d
    s[i * 3 + 1] = (c << d) + (c >> d)
    s[i * 3 + 2] = c * d - abs(c)
    e = u16(x)
    f = u16(y)
    t[i * 2] = e // f + (e << f)
    t[i * 2 + 1] = e * f - (e >> u16(3))


def _int_inputs(n=64):
  rng = np.random.default_rng(3)
  a = rng.integers(-2**31, 2**31, n, dtype=np.int64)
  b = rng.integers(-40, 70, n, dtype=np.int64)
  a[:10] = [-2**31, -2**31, 7, -7, 0, 2**31 - 1, -128, 255, 1, -1]
  b[:10] = [-1, 0, 0, 32, 33, -1, -1, 8, 64, 63]
  return a, b


def test_int32_edges():
  a, b = _int_inputs()
  args = [a.astype(np.int32), b.astype(np.int32), np.zeros(6 * 64, np.int32), np.zeros(3 * 64, np.uint32), 64]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_int32, backend=backend), args, 1, 64)
    assert_same(ref, emu, (2, 3), what=backend)


def test_int64_and_narrow_edges():
  a, b = _int_inputs()
  a = a * 3_000_000_007
  a[:2] = -2**63
  args = [a, b, np.zeros(4 * 64, np.int64), np.zeros(2 * 64, np.uint64), np.zeros(3 * 64, np.int8),
          np.zeros(2 * 64, np.uint16), 64]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_int_other, backend=backend), args, 1, 64)
    assert_same(ref, emu, (2, 3, 4, 5), what=backend)


@kernel
def k_float_edges(x: Ptr[f32], y: Ptr[f32], d: Ptr[f64], oi: Ptr[i32], ou: Ptr[u32], on: Ptr[i8], ow: Ptr[u16],
                  ol: Ptr[i64], oq: Ptr[u64], of: Ptr[f32], ob: Ptr[i32], n: i32):
  """float -> int out of range, inf and NaN (saturate, NaN -> 0); NaN min/max (the other operand); unordered `ne`;
  division by zero; f64 -> int."""
  i = global_id(0)
  if i < n:
    v = x[i]
    w = y[i]
    oi[i * 2] = i32(v)
    oi[i * 2 + 1] = i32(d[i])
    ou[i] = u32(v)
    on[i] = i8(v)
    ow[i] = u16(v)
    ol[i] = i64(v)
    oq[i] = u64(d[i])
    of[i * 4] = min(v, w)
    of[i * 4 + 1] = max(v, w)
    of[i * 4 + 2] = v / w
    of[i * 4 + 3] = fma(v, w, 1.0)
    ob[i] = i32(v != w) * 4 + i32(v < w) * 2 + i32(v == w)


def test_float_edges():
  rng = np.random.default_rng(4)
  x = (rng.standard_normal(64) * 1e3).astype(np.float32)
  y = (rng.standard_normal(64) * 10).astype(np.float32)
  x[:12] = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -0.5, 255.7, 127.5, -129.0, 70000.0, 2.0**63]
  y[:12] = [1.0, np.nan, 0.0, -0.0, np.nan, 2.0, 0.0, np.nan, 1.0, 3.0, np.inf, -2.0]
  d = x.astype(np.float64) * 1.5
  d[:3] = [np.nan, 1e300, -1.0]
  d[11] = 2.0**62   # (the reference clamps every f64 -> u64 to 2**63 - 1024: values in [2**63, 2**64) are avoided)
  args = [x, y, d, np.zeros(128, np.int32), np.zeros(64, np.uint32), np.zeros(64, np.int8), np.zeros(64, np.uint16),
          np.zeros(64, np.int64), np.zeros(64, np.uint64), np.zeros(256, np.float32), np.zeros(64, np.int32), 64]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_float_edges, backend=backend), args, 1, 64)
    assert_same(ref, emu, range(3, 11), what=backend)


@kernel
def k_half(x: Ptr[f16], y: Ptr[bf16], z: Ptr[f32], w: Ptr[u16], h: Ptr[f64], n: i32):
  """f16 and bf16: each op rounded once to the format (via f32), fma through f64 (as the reference), casts from
  ints, f64 and each other, bitcasts, sqrt, min/max, shared memory."""
  i = global_id(0)
  a = x[i]
  b = y[i]
  c = a * a + a / (a + f16(3.0)) - max(a, f16(-1.5))
  e = b * b - b / (b - bf16(5.0)) + min(b, bf16(0.75))
  s = shared(f16, 64)
  s[workitem_id(0)] = c
  barrier()
  t = s[63 - workitem_id(0)]
  x[i] = sqrt(abs(t)) + f16(i) * f16(0.125) + fma(a, t, f16(0.5)) + f16(h[i])
  y[i] = fma(b, e, bf16(1.0)) + bf16(i * 977) + bf16(h[i]) + bf16(a) + floor(e)
  z[i] = f32(c) + f32(e) + f32(bitcast(f16, w[i])) + f32(i16(c))
  w[i] = bitcast(u16, -t) + bitcast(u16, e) + u16(a > f16(b))


def test_half_and_bfloat():
  rng = np.random.default_rng(5)
  x = (rng.standard_normal(64) * 8).astype(np.float16)
  yb = ((rng.standard_normal(64) * 8).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
  w = rng.integers(0, 0x7c00, 64).astype(np.uint16)
  h = rng.standard_normal(64) * 300
  args = [x, yb, np.zeros(64, np.float32), w, h, 64]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_half, backend=backend), args, 1, 64)
    assert_same(ref, emu, (0, 1, 2, 3), what=backend)


@kernel
def k_atomics(g: Ptr[i32], u: Ptr[u32], l: Ptr[i64], f: Ptr[f32], x: Ptr[i32], o: Ptr[i32], n: i32):
  """Every atomic on global memory (order-independent final values) and on shared memory; xchg returns the old
  value, so each thread's swap is checked by the sum it leaves."""
  i = global_id(0)
  t = workitem_id(0)
  v = x[i]
  atomic_add(g, 0, v)
  atomic_sub(g, 1, v)
  atomic_min(g, 2, v)
  atomic_max(g, 3, v)
  atomic_and(g, 4, v | 0x10000)
  atomic_or(g, 5, v & 0x0ff0)
  atomic_xor(g, 6, v)
  atomic_min(u, 0, u32(v))
  atomic_max(u, 1, u32(v))
  atomic_add(l, 0, i64(v) * 1000003)
  atomic_min(l, 1, i64(v) * -77)
  atomic_add(f, 0, f32(v & 1023))
  old = atomic_xchg(g, 7, v)
  atomic_add(g, 8, old)
  s = shared(i32, 4)
  if t < 4:
    s[t] = 0
  barrier()
  atomic_add(s, t % 4, v & 255)
  atomic_max(s, 3, v)
  barrier()
  if t < 4:
    o[workgroup_id(0) * 4 + t] = s[t]


def test_atomics():
  rng = np.random.default_rng(6)
  x = rng.integers(-2**31, 2**31, 192, dtype=np.int64).astype(np.int32)
  g = np.array([5, 5, 2**31 - 1, -2**31, -1, 0, 0x1234, 17, 0], np.int32)
  args = [g, np.array([2**32 - 1, 0], np.uint32), np.array([0, 2**62], np.int64), np.zeros(1, np.float32), x,
          np.zeros(12, np.int32), 192]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_atomics, backend=backend), args, 3, 64)
    # the exchange chain's final word and the sum of the old values: together they are the initial value plus
    # every thread's value, in whatever order the swaps happened
    assert (int(emu[0][7]) + int(emu[0][8]) - 17 - int(x.astype(np.int64).sum())) % 2**32 == 0
    emu[0][7:9], ref[0][7:9] = 0, 0
    assert_same(ref, emu, (0, 1, 2, 3, 5), what=backend)


@kernel
def k_frem(x: Ptr[f32], y: Ptr[f32], o: Ptr[f32], a: Ptr[f64], b: Ptr[f64], p: Ptr[f64], h: Ptr[f16], n: i32):
  """Float remainder: PTX has none (NVPTX's frem is x - trunc(x/y)*y, inexact); lowered to exact long division."""
  i = global_id(0)
  if i < n:
    o[i] = x[i] % y[i]
    p[i] = a[i] % b[i]
    h[i] = h[i] % f16(0.3)


def test_float_remainder_is_exact():
  rng = np.random.default_rng(12)
  x = (rng.standard_normal(128) * 10.0 ** rng.integers(-40, 38, 128)).astype(np.float32)
  y = (rng.standard_normal(128) * 10.0 ** rng.integers(-44, 38, 128)).astype(np.float32)
  special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -4.0, 2.0]
  x[:100], y[:100] = np.repeat(special, 10), np.tile(special, 10)
  a, b = x.astype(np.float64) * 1e150, y.astype(np.float64) * 1e-100
  args = [x, y, np.zeros(128, np.float32), a, b, np.zeros(128), (rng.standard_normal(128) * 100).astype(np.float16),
          128]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_frem, backend=backend), args, 2, 64)
    for o in (2, 5, 6):   # bit for bit, signed zeros included
      same = (emu[o].view(np.uint8).reshape(128, -1) == ref[o].view(np.uint8).reshape(128, -1)).all(1)
      assert (same | (np.isnan(emu[o]) & np.isnan(ref[o]))).all(), (backend, o)
  with np.errstate(invalid="ignore"):
    np.testing.assert_array_equal(ref[2], np.fmod(x, y))     # the reference is C's fmod


@kernel
def k_private(x: Ptr[i32], y: Ptr[f32], n: i32):
  """Private (.local) arrays indexed by thread-dependent values."""
  i = global_id(0)
  p = private(i32, 8)
  q = private(f32, 4)
  for k in range(8):
    p[k] = x[i] * k
  for k in range(4):
    q[k] = f32(p[(k * 3 + i) % 8])
  s = 0.0
  for k in range(4):
    s = s + q[(i + k) % 4] * f32(k)
  y[i] = s


def test_private_memory():
  args = [np.random.default_rng(7).integers(-1000, 1000, 64).astype(np.int32), np.zeros(64, np.float32), 64]
  for backend in BACKENDS:
    ref, emu = run_both(compiled(k_private, backend=backend), args, 1, 64)
    assert_same(ref, emu, (1,), what=backend)


@kernel
def k_divergent_barrier(x: Ptr[i32], y: Ptr[i32]):
  """Barriers under thread-dependent control flow: the reference runs a workgroup in lock-step, so threads that do
  not take the branch (or leave the loop early) still pass every barrier."""
  s = shared(i32, 64)
  t = workitem_id(0)
  g = global_id(0)
  s[t] = x[g]
  barrier()
  if t < 40:
    v = s[(t + 1) % 64]
    barrier()
    s[t] = v * 2
  else:
    v = s[t] + 1
  barrier()
  acc = v
  for j in range(0, t % 5):
    acc += s[(t + j * 7) % 64]
    barrier()
    if t % 2 == 0:
      s[t] = acc
    barrier()
  y[g] = acc + s[63 - t]


@pytest.mark.parametrize("backend", BACKENDS)
def test_barriers_in_divergent_control_flow(backend):
  """Both backends predicate the regions (every thread reaches every barrier; the emulator's divergence and race
  checkers are on), so the results are the reference's."""
  args = [np.random.default_rng(8).integers(-1000, 1000, 128).astype(np.int32), np.zeros(128, np.int32)]
  c = compiled(k_divergent_barrier, backend=backend)
  ref, emu = run_both(c, args, 2, 64)
  assert_same(ref, emu, (1,), what=backend)
  assert "barrier.red.or.pred" in c.ptx


@kernel
def k_ids(o: Ptr[i32]):
  t = workitem_id(0) + workitem_id(1) * workgroup_size(0) + workitem_id(2) * workgroup_size(0) * workgroup_size(1)
  w = workgroup_id(0) + workgroup_id(1) * num_workgroups(0) + workgroup_id(2) * num_workgroups(0) * num_workgroups(1)
  j = (w * workgroup_size(0) * workgroup_size(1) * workgroup_size(2) + t) * 4
  o[j] = global_id(0) * 1000000 + global_id(1) * 1000 + global_id(2)
  o[j + 1] = workitem_id(0) * 100 + workitem_id(1) * 10 + workitem_id(2)
  o[j + 2] = workgroup_id(0) * 100 + workgroup_id(1) * 10 + workgroup_id(2)
  o[j + 3] = (workgroup_size(0) * 100 + workgroup_size(1) * 10 + workgroup_size(2)) * 1000 + \
    num_workgroups(0) * 100 + num_workgroups(1) * 10 + num_workgroups(2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ids_3d_grid_counts_ctas(backend):
  """%tid/%ctaid/%ntid/%nctaid in three dimensions; the grid counts CTAs (workgroups) on both sides."""
  args = [np.zeros(2 * 3 * 2 * 4 * 2 * 3 * 4, np.int32)]
  ref, emu = run_both(compiled(k_ids, backend=backend), args, (2, 3, 2), (4, 2, 3))
  assert_same(ref, emu, (0,), what=backend)
  assert emu[0].reshape(-1, 4)[-1, 3] == 423232    # numpy-free spot check: the last thread's sizes


@kernel
def k_math(x: Ptr[f32], y: Ptr[f32], n: i32):
  i = global_id(0)
  if i < n:
    v = x[i]
    a = abs(v)
    y[i * 11] = exp(v)
    y[i * 11 + 1] = log(a)
    y[i * 11 + 2] = sin(v)
    y[i * 11 + 3] = cos(v)
    y[i * 11 + 4] = exp2(v)
    y[i * 11 + 5] = log2(a)
    y[i * 11 + 6] = sqrt(a)
    y[i * 11 + 7] = rsqrt(a)
    y[i * 11 + 8] = floor(v)
    y[i * 11 + 9] = ceil(v)
    y[i * 11 + 10] = trunc(v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_math_accuracy(backend):
  """Against numpy in float64: sqrt, rsqrt (sqrt.rn then div.rn, like the reference) and rounding exact; exp2/
  log2 <= 1 ulp, exp/log <= 2 ulp on the emulator (its .approx results are correctly rounded); sin/cos absolute
  error <= 2e-5 for |x| <= 40 (range-reduced with a three-part 2*pi); inf, NaN and 0 as IEEE says."""
  rng = np.random.default_rng(9)
  x = (rng.uniform(-40, 40, 256)).astype(np.float32)
  x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, -103.0, 1e-40]
  y = np.zeros(256 * 11, np.float32)
  from gputwin.emu import launch
  c = compiled(k_math, backend=backend)
  launch(c.code_object, "k_math", grid=4, block=64, args=[x, y, 256], arch="sm_90")
  y = y.reshape(256, 11)
  x64, a64 = x.astype(np.float64), np.abs(x.astype(np.float64))
  with np.errstate(all="ignore"):
    want = [np.exp(x64), np.log(a64), np.sin(x64), np.cos(x64), np.exp2(x64), np.log2(a64), np.sqrt(a64),
            1 / np.sqrt(a64.astype(np.float32)).astype(np.float64), np.floor(x64), np.ceil(x64), np.trunc(x64)]
  bounds = [2, 2, None, None, 1, 1, 0, 0, 0, 0, 0]
  for j, (w, bound) in enumerate(zip(want, bounds)):
    w32 = w.astype(np.float32)
    if bound is None:
      err = np.abs(y[:, j].astype(np.float64) - w)
      assert np.nanmax(err[5:]) <= 2e-5 and np.isnan(y[2:5, j]).all() and y[0, j] == w32[0], (j, np.nanmax(err))
    else:
      assert ulp_diff(y[:, j], w32).max() <= bound, (j, ulp_diff(y[:, j], w32).max())


VECTOR_IR = """
kernel @k_vec(%x: global<f32>, %y: global<i32>, %z: global<f32>, %w: global<i32>) {
  %t: i32 = workitem.id.x
  %c4: i32 = const 4
  %c2: i32 = const 2
  %i4: i32 = mul %t, %c4
  %i2: i32 = mul %t, %c2
  %a: f32x4 = load %x, %i4
  %b: i32x2 = load %y, %i2
  %s: f32x4 = sqrt %a
  %e: f32x4 = exp %a
  %m: f32x4 = mul %s, %e
  %one: f32 = const 1.5
  %v1: f32x4 = vector %one, %one, %one, %one
  %lt: boolx4 = lt %m, %v1
  %sel: f32x4 = select %lt, %m, %v1
  store %z, %i4, %sel
  %sh: i32x2 = shl %b, %b
  %d: i32x2 = div %sh, %b
  %fi: f32x2 = cast %d
  %ib: i32x2 = bitcast %fi
  %xo: i32x2 = xor %ib, %d
  store %w, %i2, %xo
}
"""


def test_vector_ir():
  """Short vectors (IR text; the frontend has none): lane by lane, NaNs from sqrt of negatives included."""
  rng = np.random.default_rng(10)
  args = [rng.standard_normal(256).astype(np.float32), rng.integers(-40, 40, 128).astype(np.int32),
          np.zeros(256, np.float32), np.zeros(128, np.int32)]
  for backend in BACKENDS:
    c = compile(ir.parse(VECTOR_IR), "sm_90", backend=backend)
    if PTXAS: assert ptxas_errors(c.ptx, "sm_90") == ""
    ref, emu = run_both(c, args, 1, 64)
    assert_same(ref, emu, (3,), what=backend)
    assert_same(ref, emu, (2,), ulps=2, what=backend)


@pytest.mark.skipif(not PTXAS, reason="ptxas not installed")
@pytest.mark.parametrize("arch", NV_TARGETS)
def test_ptxas_accepts_the_edge_case_kernels(arch):
  for k in (k_int32, k_int_other, k_float_edges, k_half, k_atomics, k_frem, k_private, k_divergent_barrier, k_ids,
            k_math):
    for backend in BACKENDS:
      assert ptxas_errors(compiled(k, arch, backend).ptx, arch) == "", (k.name, backend)


def test_random_programs_agree():
  """test_fuzz's program generator (divergent ifs and loops, casts, narrow ints, f16, atomics, shared memory):
  reference = direct PTX = LLVM PTX on the emulator, and ptxas accepts both; then programs with shared-memory
  exchanges and barriers at any depth of divergent control flow."""
  from hypothesis import HealthCheck, given, settings, strategies as st
  sys.path.insert(0, str(Path(__file__).parent))
  from test_fuzz import Gen, N, inputs, same

  class Barriers(Gen):
    def ops(self, count, depth):
      for _ in range(count):
        kind = self.draw(st.sampled_from(["int", "float", "cmp", "select", "cast", "load", "lds", "lds"] +
                                         (["if", "for", "if", "for"] if depth < 3 else [])))
        getattr(self, kind)(depth)

  profile = settings(max_examples=5, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(HealthCheck))

  def check(k, backends):
    for backend in backends:
      c = compile(k, "sm_90", backend=backend)
      ref, emu = run_both(c, inputs(2), 1, N)
      same(ref, emu, f"{backend} sm_90:\n{k}")
      if PTXAS: assert ptxas_errors(c.ptx, "sm_90") == ""

  @profile
  @given(data=st.data())
  def plain(data): check(Gen(data).kernel(), BACKENDS)

  @profile
  @given(data=st.data())
  def barriers(data): check(Barriers(data).kernel(), BACKENDS)

  plain()
  barriers()


# --------------------------------------------------------------------------------------------------------------
# errors

@kernel
def k_sin64(x: Ptr[f64]):
  x[0] = sin(x[1])


@kernel
def k_big_shared(x: Ptr[f32]):
  s = shared(f32, 13000)
  s[workitem_id(0)] = 1.0
  x[0] = s[0]


@kernel
def k_atomic16(x: Ptr[i16]):
  atomic_add(x, 0, i16(1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kf, msg", [(k_sin64, "f64 sin"), (k_big_shared, "static shared memory"),
                                     (k_atomic16, "atomic.add on i16 is not supported")])
def test_unsupported_constructs_are_located_errors(kf, msg, backend):
  with pytest.raises(CompileError, match=rf"\[sm_90\] .*test_ptx_backend\.py:\d+:\d+: error: .*{msg}"):
    compile(kf, "sm_90", backend=backend)


def test_unknown_target_lists_the_known_ones():
  with pytest.raises(CompileError, match="sm_80, sm_90"):
    compile(k_sin64, "sm_75")


def test_cli_writes_ptx(tmp_path):
  from gputwin.compiler.tool import compile_main
  src = tmp_path / "k.py"
  src.write_text("from gputwin.compiler import kernel, Ptr, f32, i32, global_id\n\n@kernel\n"
                 "def scale(x: Ptr[f32], n: i32):\n  i = global_id(0)\n  if i < n:\n    x[i] = x[i] * 8.0\n")
  for backend in BACKENDS:
    assert compile_main([str(src), "--arch", "sm_80", "--backend", backend]) == 0
    text = (tmp_path / "k.sm_80.ptx").read_text()
    assert ".target sm_80" in text and ".entry scale" in text
    from gputwin.emu import launch
    x = np.arange(100, dtype=np.float32)
    launch(text, "scale", grid=2, block=64, args=[x, 100], arch="sm_80")
    np.testing.assert_array_equal(x, np.arange(100, dtype=np.float32) * 8)
