"""The Adreno ir3 backend (gputwin.compiler.backend_ir3): every example x a630/a730 compiles, its flags pass the
checker on the decoded machine code, gputwin.emu.launch (every checker on, the `sync` checker included) equals the
example's numpy oracle and the host reference, and gputwin.runtime.open("mock:a630"/"mock:a730").launch gives the
same bytes. Edge-case kernels (division, casts, math, atomics, control flow, ids) run against the reference; a
removed (sy)/(ss) or delay nop is caught by the checker and by the emulator's sync checker; what the backend rejects
is a short explicit list of CompileErrors."""
import numpy as np
import pytest

from gputwin.compiler import (Ptr, atomic_add, atomic_and, atomic_max, atomic_min, atomic_or, atomic_sub, atomic_xchg,
                              atomic_xor, barrier, ceil, compile, cos, exp, exp2, f16, f32, floor, fma, global_id, i32,
                              kernel, log, log2, num_workgroups, private, reference, rsqrt, shared, sin, sqrt, trunc,
                              u32, workgroup_id, workgroup_size, workitem_id)
from gputwin.compiler.backend_ir3 import check
from gputwin.compiler.examples import EXAMPLES, ulp_diff
from gputwin.errors import CompileError, EmuCheckError
from gputwin.isa.ir3 import assemble

GPUS = ("a630", "a730")
REJECTED: dict[str, str] = {}      # example -> reason (none today: every example compiles for ir3)
_CACHE: dict = {}


def compiled(k, arch):
  key = (id(k), arch)
  if key not in _CACHE: _CACHE[key] = compile(k, arch)
  return _CACHE[key]


def emu_launch(c, args, grid, block, **kw):
  from gputwin.emu import launch
  return launch(c.code_object, c.name, grid=grid, block=block, args=args, arch=c.arch, shader=c.shader, **kw)


def copies(args):
  return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def run_both(c, args, grid, block):
  ref, got = copies(args), copies(args)
  reference.launch(c.ir, grid=grid, block=block, args=ref)
  emu_launch(c, got, grid, block, checks=True)
  return ref, got


def assert_same(ref, got, outs, ulps=0, what=""):
  for o in outs:
    if ref[o].dtype.kind == "f":
      worst = int(ulp_diff(got[o], ref[o]).max())
      assert worst <= ulps, f"{what} arg {o}: {worst} ulp (bound {ulps})"
    else:
      np.testing.assert_array_equal(got[o], ref[o], err_msg=f"{what} arg {o}")


# --------------------------------------------------------------------------------------------------------------
# the examples

def test_rejected_examples_are_few_and_explicit():
  assert set(REJECTED) <= set(EXAMPLES) and len(REJECTED) <= 2


@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("name", sorted(set(EXAMPLES) - set(REJECTED)))
def test_example_matches_numpy_and_runtime(name, arch):
  import gputwin.runtime as rt
  ex = EXAMPLES[name]
  c = compiled(ex.kernel, arch)
  assert c.shader.local_size is None and c.shader.wave_size == 64 and check(c.code_object, arch) == len(
    c.code_object) // 8
  assert assemble(c.asm, arch) == c.code_object
  args, grid, block = ex.inputs(np.random.default_rng(3))
  want = ex.oracle(copies(args))
  ref, got = run_both(c, args, grid, block)
  for o, w in zip(ex.outputs, want):
    if w.dtype.kind == "f": assert np.allclose(got[o], w, rtol=1e-4, atol=1e-5), (name, o)
    else: np.testing.assert_array_equal(got[o], w)
  assert_same(ref, got, ex.outputs, ex.ulps, f"{name} {arch}")
  dev_args = copies(args)
  with rt.open(f"mock:{arch}") as dev:
    dev.launch(c.code_object, c.name, grid=grid, block=block, args=dev_args, shader=c.shader)
  for a, b in zip(got, dev_args):
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name


def test_reject_list_examples_raise():
  for name, why in REJECTED.items():
    with pytest.raises(CompileError, match=why):
      compile(EXAMPLES[name].kernel, "a630")


# --------------------------------------------------------------------------------------------------------------
# edge cases against the reference

@kernel
def divmod_k(x: Ptr[i32], y: Ptr[i32], q: Ptr[i32], r: Ptr[i32], uq: Ptr[u32], ur: Ptr[u32], n: i32):
  i = global_id(0)
  if i < n:
    a = x[i]
    b = y[i]
    q[i] = a // b
    r[i] = a % b
    uq[i] = u32(a) // u32(b)
    ur[i] = u32(a) % u32(b) + u32(a) % 7


@pytest.mark.parametrize("arch", GPUS)
def test_integer_division_edges(arch):
  n = 128
  rng = np.random.default_rng(5)
  x = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
  y = rng.integers(-300, 300, n).astype(np.int32)
  x[:6] = [-(1 << 31), -(1 << 31), 7, -7, 0, (1 << 31) - 1]
  y[:6] = [-1, 0, 0, 2, -3, -(1 << 31)]
  y[6:12] = [1, -1, (1 << 31) - 1, -(1 << 31), 3, -3]
  outs = [np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.uint32), np.zeros(n, np.uint32)]
  c = compiled(divmod_k, arch)
  ref, got = run_both(c, [x, y, *outs, n], (2,), (64,))
  assert_same(ref, got, (2, 3, 4, 5), 0, "divmod")


@kernel
def floats_k(x: Ptr[f32], y: Ptr[f32], o: Ptr[f32], z: Ptr[i32], w: Ptr[u32], n: i32):
  i = global_id(0)
  if i < n:
    a = x[i]
    b = y[i]
    o[i * 8] = a / b
    o[i * 8 + 1] = sqrt(abs(a))
    o[i * 8 + 2] = floor(a) + ceil(b) - trunc(a * 3.0)
    o[i * 8 + 3] = max(min(a, b), -0.5)
    o[i * 8 + 4] = f32(i32(a * 100.0)) + f32(u32(i))
    o[i * 8 + 5] = -a if a < b else b - a
    o[i * 8 + 6] = f32(a != b) + f32(a >= b) * 2.0
    o[i * 8 + 7] = b * 0.25 - a
    z[i] = i32(a * 1e9)
    w[i] = u32(b * 3e9)


@pytest.mark.parametrize("arch", GPUS)
def test_float_ops_exact(arch):
  n = 96
  rng = np.random.default_rng(6)
  x = (rng.standard_normal(n) * 4).astype(np.float32)
  y = (rng.standard_normal(n) * 4).astype(np.float32)
  x[:4] = [np.nan, 0.0, -0.0, 5.0]
  y[:4] = [1.0, np.nan, 0.0, 3e9]
  c = compiled(floats_k, arch)
  args = [x, y, np.zeros(8 * n, np.float32), np.zeros(n, np.int32), np.zeros(n, np.uint32), n]
  ref, got = run_both(c, args, (2,), (64,))
  assert_same(ref, got, (3, 4), 0, "casts")
  r, g = ref[2].reshape(n, 8), got[2].reshape(n, 8)
  # division is x * rcp(y): within 1 ulp of the correctly rounded quotient; the rest is exact
  assert int(ulp_diff(g[:, 0], r[:, 0]).max()) <= 1
  assert int(ulp_diff(g[:, 1:], r[:, 1:]).max()) == 0


@kernel
def math_k(x: Ptr[f32], o: Ptr[f32], n: i32):
  i = global_id(0)
  if i < n:
    a = x[i]
    o[i * 6] = exp(a)
    o[i * 6 + 1] = log(abs(a) + 0.5)
    o[i * 6 + 2] = exp2(a)
    o[i * 6 + 3] = log2(abs(a) + 0.25)
    o[i * 6 + 4] = rsqrt(abs(a) + 1.0)
    o[i * 6 + 5] = sin(a) + cos(a)


@pytest.mark.parametrize("arch", GPUS)
def test_math_bounds(arch):
  n = 128
  x = np.concatenate([np.linspace(-30, 30, n - 2), [np.nan, 100.0]]).astype(np.float32)
  c = compiled(math_k, arch)
  ref, got = run_both(c, [x, np.zeros(6 * n, np.float32), n], (2,), (64,))
  r, g = ref[1].reshape(n, 6), got[1].reshape(n, 6)
  assert int(ulp_diff(g[:, 0], r[:, 0]).max()) <= 2           # exp: Cody-Waite without fma
  assert int(ulp_diff(g[:, 1], r[:, 1]).max()) <= 2           # log: log2 * ln 2
  assert int(ulp_diff(g[:, 2:5], r[:, 2:5]).max()) <= 1
  assert np.allclose(g[:, 5], r[:, 5], atol=2e-5, equal_nan=True)


@kernel
def atomics_k(x: Ptr[u32], g: Ptr[u32], s: Ptr[i32], old: Ptr[u32], n: i32):
  h = shared(i32, 8)
  tid = workitem_id(0)
  i = global_id(0)
  if tid < 8:
    h[tid] = 0
  barrier()
  if i < n:
    v = x[i]
    old[i] = atomic_add(g, 0, 1)
    atomic_sub(g, 1, v & 7)
    atomic_max(g, 2, v)
    atomic_min(g, 3, v)
    atomic_and(g, 4, v | 0xff)
    atomic_or(g, 5, v & 0x1010)
    atomic_xor(g, 6, v)
    atomic_xchg(g, 7, 5)
    atomic_add(h, tid % 8, i32(v & 15))
    atomic_max(h, 1, i32(v) - 2000000000)
    atomic_min(h, 2, i32(v))
  barrier()
  if tid < 8:
    atomic_add(s, tid, h[tid])


@pytest.mark.parametrize("arch", GPUS)
def test_atomics(arch):
  n = 200
  x = np.random.default_rng(7).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
  g = np.array([0, 1 << 20, 0, 0xffffffff, 0xffffffff, 0, 0, 3], np.uint32)
  c = compiled(atomics_k, arch)
  ref, got = run_both(c, [x, g, np.zeros(8, np.int32), np.zeros(n, np.uint32), n], (4,), (64,))
  assert_same(ref, got, (1, 2), 0, "atomics")
  np.testing.assert_array_equal(np.sort(got[3]), np.arange(n, dtype=np.uint32))


@kernel
def flow_k(x: Ptr[i32], o: Ptr[i32], p: Ptr[i32]):
  tx = workitem_id(0)
  ty = workitem_id(1)
  tz = workitem_id(2)
  lin = (tz * workgroup_size(1) + ty) * workgroup_size(0) + tx
  wg = (workgroup_id(2) * num_workgroups(1) + workgroup_id(1)) * num_workgroups(0) + workgroup_id(0)
  g = wg * (workgroup_size(0) * workgroup_size(1) * workgroup_size(2)) + lin
  v = x[g]
  acc = 0
  cnt = 0
  for k in range(v & 15):
    if (acc + k) % 3 == 0:
      acc = acc * 2 + k
    else:
      for j in range(k):
        acc = acc + j
      cnt = cnt + 1
  o[g] = acc
  p[g] = cnt * 1000 + lin


@pytest.mark.parametrize("arch", GPUS)
def test_divergent_loops_and_3d_ids(arch):
  grid, block = (2, 1, 2), (4, 4, 2)
  n = 4 * 32
  x = np.random.default_rng(8).integers(0, 1 << 20, n).astype(np.int32)
  c = compiled(flow_k, arch)
  ref, got = run_both(c, [x, np.zeros(n, np.int32), np.zeros(n, np.int32)], grid, block)
  assert_same(ref, got, (1, 2), 0, "flow")


def test_random_programs_agree():
  """test_fuzz's program generator (divergent ifs and loops, casts, int division, atomics, shared memory): the
  programs the backend accepts (the others use 8/16/64-bit types) equal the reference bit for bit on a630."""
  import sys
  from pathlib import Path

  from hypothesis import HealthCheck, given, settings, strategies as st
  sys.path.insert(0, str(Path(__file__).parent))
  from test_fuzz import Gen, N, inputs, same
  ran = []

  @settings(max_examples=12, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
  @given(data=st.data())
  def prog(data):
    k = Gen(data).kernel()
    try: c = compile(k, "a630")
    except CompileError as e:
      assert "is not supported on a630" in str(e), str(e)
      return
    ref, got = run_both(c, inputs(2), 1, N)
    same(ref, got, f"a630:\n{k}\n{c.asm}")
    ran.append(k.name)
  prog()
  assert len(ran) >= 6


# --------------------------------------------------------------------------------------------------------------
# the legality checker and the emulator's sync checker agree that every flag matters

def _drop(text: str, what: str, where: str = "") -> str:
  """The text with `what` removed from the first instruction line having `where` (default: `what`; not a barrier,
  whose flags are forced)."""
  lines = text.splitlines()
  j = next(i for i, ln in enumerate(lines) if (where or what) in ln and "bar" not in ln and "fence" not in ln)
  lines[j] = lines[j].replace(what, "", 1)
  return "\n".join(lines) + "\n"


@pytest.mark.parametrize("flag, where", [("(sy)", "(sy)"), ("(ss)", "(ss)add.f")])   # a load / shared-load result
def test_missing_flag_is_caught(flag, where):
  ex = EXAMPLES["reduce_sum"]
  c = compiled(ex.kernel, "a630")
  bad = assemble(_drop(c.asm, flag, where), "a630")
  with pytest.raises(CompileError, match="without " + flag.replace("(", r"\(").replace(")", r"\)")):
    check(bad, "a630")
  args, grid, block = ex.inputs(np.random.default_rng(1))
  with pytest.raises(EmuCheckError, match="without"):
    from gputwin.emu import launch
    launch(bad, "reduce_sum", grid=grid, block=block, args=args, arch="a630", shader=c.shader, checks=True)


def test_missing_delay_is_caught():
  c = compiled(EXAMPLES["saxpy"].kernel, "a630")
  lines = c.asm.splitlines()
  j = next(i for i, ln in enumerate(lines) if ln.endswith("nop") and "(" in ln and "rpt" in ln)
  bad = assemble("\n".join(lines[:j] + lines[j + 1:]) + "\n", "a630")
  with pytest.raises(CompileError, match="slot"):
    check(bad, "a630")


def test_war_hazard_is_caught():
  """An SFU reads its source late: overwriting it before an (ss) is a hazard (Mesa's legalize places (ss) there)."""
  bad = assemble("rcp r1.x, r2.x\nmov.u32u32 r2.x, 0\n(ss)add.f r1.y, r1.x, r1.x\nend\n", "a630")
  with pytest.raises(CompileError, match="overwrites"):
    check(bad, "a630")
  assert check(assemble("rcp r1.x, r2.x\n(ss)mov.u32u32 r2.x, 0\nadd.f r1.y, r1.x, r1.x\nend\n", "a630"), "a630") == 4


# --------------------------------------------------------------------------------------------------------------
# launch interface and rejections

def test_positional_and_dict_args_agree():
  ex = EXAMPLES["saxpy"]
  c = compiled(ex.kernel, "a730")
  args, grid, block = ex.inputs(np.random.default_rng(2))
  a = copies(args)
  emu_launch(c, a, grid, block)
  sh, d = c.shader.bind(copies(args), block)
  from gputwin.emu import launch
  launch(c.code_object, "saxpy", grid=grid, args=d, arch="a730", shader=sh)
  np.testing.assert_array_equal(a[2], d[1])
  assert [p.kind for p in c.shader.params] == ["ubo", "ssbo", "ssbo", "ubo"]


def test_block_required_for_variable_local_size():
  from gputwin.errors import LaunchError
  ex = EXAMPLES["saxpy"]
  c = compiled(ex.kernel, "a630")
  args, grid, _ = ex.inputs(np.random.default_rng(2))
  with pytest.raises(LaunchError, match="block"):
    emu_launch(c, args, grid, None)


@kernel
def fma_k(x: Ptr[f32]):
  i = global_id(0)
  x[i] = fma(x[i], x[i], 1.0)


@kernel
def half_k(x: Ptr[f16]):
  i = global_id(0)
  x[i] = x[i] + f16(1.0)


@kernel
def private_k(x: Ptr[f32]):
  p = private(f32, 4)
  i = global_id(0)
  p[i % 4] = x[i]
  x[i] = p[0]


@kernel
def divergent_barrier_k(x: Ptr[f32]):
  i = global_id(0)
  if x[i] > 0.0:
    barrier()
  x[i] = 1.0


@kernel
def fmod_k(x: Ptr[f32], y: Ptr[f32]):
  i = global_id(0)
  x[i] = x[i] % y[i]


@pytest.mark.parametrize("arch", ["a630", "a730"])
def test_float_rem_is_exact_fmod(arch):
  """f32 `%` by backend_ptx's exact long division: C fmod bit for bit (NaN for y = 0 or x = inf, x's sign)."""
  c = compile(fmod_k, arch)
  rng = np.random.default_rng(3)
  x, y = (rng.standard_normal(128) * 100).astype(np.float32), (rng.standard_normal(128) * 3).astype(np.float32)
  x[:5], y[:5] = [np.inf, 5.0, -7.5, 0.0, 1e30], [2.0, 0.0, 2.0, -0.0, 3e-30]
  ref = np.fmod(x, y)
  emu_launch(c, [x, y], 2, 64)
  nan = np.isnan(ref)
  assert (np.isnan(x) == nan).all() and np.array_equal(x[~nan].view(np.uint32), ref[~nan].view(np.uint32))


@pytest.mark.parametrize("k, why", [(fma_k, "fma"), (half_k, "f16"), (private_k, "private memory"),
                                    (divergent_barrier_k, "barrier under thread-dependent")])
def test_rejections_are_compile_errors(k, why):
  with pytest.raises(CompileError, match=why):
    compile(k, "a630")


def test_llvm_backend_refused_for_ir3():
  with pytest.raises(CompileError, match="direct"):
    compile(EXAMPLES["saxpy"].kernel, "a630", backend="llvm")
