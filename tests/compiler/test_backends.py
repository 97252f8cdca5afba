"""Every example kernel x target x backend: the code object loads (our loader; llvm-mc-22 accepts the direct
backend's assembly) and, run on the emulator, equals the host reference.

Float bounds (units in the last place, float32), vs the host reference:
  add/sub/mul/fma/min/max/casts: 0 (both backends; no contraction is done or allowed)
  division: direct backend <= 2 (reciprocal + one Newton step); LLVM: correctly rounded (0)
  exp/log/sin/cos/sqrt: hardware approximations, <= 4 ulp per call; a kernel's bound is `Example.ulps`
Integers and bools: bit-exact.
"""
import numpy as np
import pytest

from gputwin.compiler import compile
from gputwin.compiler.examples import EXAMPLES, ulp_diff
from gputwin.isa.codeobj import load_code_object

from _compiler_helpers import BACKENDS, LLVM_MC, TARGETS, known_emu_bug, llvm_mc_accepts, run_both

WAVE = {"gfx1100": 32, "gfx1200": 32, "gfx942": 64, "gfx950": 64}


@pytest.fixture(scope="module")
def compiled():
  cache = {}
  def get(name, arch, backend):
    key = (name, arch, backend)
    if key not in cache: cache[key] = compile(EXAMPLES[name].kernel, arch, backend=backend)
    return cache[key]
  return get


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_code_object(compiled, name, arch, backend):
  c = compiled(name, arch, backend)
  co = load_code_object(c.code_object, arch=arch)
  k = co.kernel(name)
  assert k.wave_size == WAVE[arch]
  user = [a for a in k.user_args]
  assert [a.name for a in user] == [p.name for p in c.ir.params]
  assert [a.value_kind for a in user] == ["global_buffer" if p.type.is_ptr else "by_value" for p in c.ir.params]
  lds = sum(-(-o.attrs["count"] * o.result.type.elem.nbytes // 16) * 16 for o in c.ir.walk() if o.opcode == "shared")
  assert (k.group_segment_size >= lds) if backend == "llvm" else (k.group_segment_size == lds)
  if backend == "direct" and LLVM_MC:
    assert llvm_mc_accepts(c.asm, arch) == ""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_runs_like_reference(compiled, name, arch, backend):
  ex = EXAMPLES[name]
  c = compiled(name, arch, backend)
  args, grid, block = ex.inputs(np.random.default_rng(11))
  suspect = known_emu_bug(c.asm) if backend == "llvm" else None
  try:
    ref, emu = run_both(c, args, grid, block)
  except Exception as e:
    if suspect: pytest.xfail(f"{suspect} ({type(e).__name__})")
    raise
  for o in ex.outputs:
    if ref[o].dtype.kind == "f":
      worst = int(ulp_diff(emu[o], ref[o]).max())
      if worst > ex.ulps and suspect: pytest.xfail(f"{suspect}: {worst} ulp")
      assert worst <= ex.ulps, f"{name} {arch} {backend}: {worst} ulp (bound {ex.ulps})"
    else:
      if not np.array_equal(emu[o], ref[o]) and suspect: pytest.xfail(suspect)
      np.testing.assert_array_equal(emu[o], ref[o])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_demo_kernels_match_numpy(compiled, arch, backend):
  """The demo set against numpy directly (not only the reference), as `gputwin demo` will check it."""
  from _compiler_helpers import emulator
  launch = emulator()
  for name in ("saxpy", "reduce_sum", "matmul"):
    ex = EXAMPLES[name]
    c = compiled(name, arch, backend)
    args, grid, block = ex.inputs(np.random.default_rng(5))
    want = ex.oracle([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    launch(c.code_object, name, grid=grid, block=block, args=args, arch=arch, checks={"waitcnt", "lds_race"})
    for o, w in zip(ex.outputs, want): np.testing.assert_allclose(args[o], w, rtol=1e-4, atol=1e-5)
