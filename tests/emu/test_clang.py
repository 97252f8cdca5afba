"""clang-22 OpenCL kernels on every target, against numpy; batched and serial give identical bits and traces."""
import numpy as np
import pytest

from gputwin.emu import launch
from tests.emu.cases import CASES, EXTRA
from tests.emu.conftest import TARGETS


def _check(c, arch="gfx1100"):
  got, want = c["check"](32 if arch.startswith("gfx1") else 64) if c.get("wave_dependent") else c["check"]()
  if got.dtype.kind == "f" and c.get("rtol"):
    np.testing.assert_allclose(got, want, rtol=c["rtol"])
  else:
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES) + sorted(EXTRA))
def test_kernel_matches_numpy(clang_co, arch, name):
  c = {**CASES, **EXTRA}[name]()
  st = launch(clang_co(arch, c.get("src", "suite")), name, grid=c["grid"], block=c["block"], args=c["args"])
  _check(c, arch)
  assert st.instructions > 0 and st.lane_instructions >= st.instructions


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", ["saxpy", "int_ops", "reduce", "matmul", "histogram", "collatz", "private_array",
                                  "nested", "local_atomics", "cross_lane", "ids3d", "convert", "calls",
                                  "generic_ptr", "subgroup", "dynlds", "lds_vec"])
def test_batched_equals_serial(clang_co, arch, name):
  runs = []
  for serial in (False, True):
    c, tr = {**CASES, **EXTRA}[name](), []
    launch(clang_co(arch, c.get("src", "suite")), name, grid=c["grid"], block=c["block"], args=c["args"],
           serial=serial, trace=tr)
    per_wave = {}
    for w, pc, text, changed in tr:
      per_wave.setdefault(w, []).append((pc, text, changed))
    runs.append(([np.array(a, copy=True) for a in c["args"] if isinstance(a, np.ndarray)], per_wave))
  (out_b, tr_b), (out_s, tr_s) = runs
  for a, b in zip(out_b, out_s):
    assert a.tobytes() == b.tobytes()
  if name != "histogram":  # atomic return values depend on the interleaving; outputs must not
    assert tr_b == tr_s


@pytest.mark.parametrize("arch", TARGETS)
def test_wmma_mfma(clang_co, arch):
  """WMMA (gfx1100, gfx1200) / MFMA with AccVGPRs (gfx942, gfx950): one wave, 16x16 f16 in, f32 out."""
  r = np.random.default_rng(12)
  A, B = (r.integers(-3, 4, (16, 16)).astype(np.float16) for _ in range(2))
  C = r.integers(-5, 5, (16, 16)).astype(np.float32)
  D = np.zeros((16, 16), np.float32)
  for serial in (False, True):
    launch(clang_co(arch, "matrix"), "mma16", grid=1, block=32 if arch.startswith("gfx1") else 64, args=[D, A, B, C],
           serial=serial)
    np.testing.assert_array_equal(D, A.astype(np.float32) @ B.astype(np.float32) + C)


@pytest.mark.parametrize("name", ["reduce", "matmul", "histogram"])
def test_many_batches(clang_co, monkeypatch, name):
  """Dispatches larger than one batch run batch after batch (forced here with a tiny batch size)."""
  from gputwin.emu import core
  monkeypatch.setattr(core, "MAX_WAVES", 4)
  c = CASES[name]()
  st = launch(clang_co("gfx1100"), name, grid=c["grid"], block=c["block"], args=c["args"])
  _check(c)
  assert st.workgroups == int(np.prod(c["grid"]))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200"])
@pytest.mark.parametrize("name", ["saxpy", "int_ops", "reduce", "matmul", "histogram", "collatz", "subgroup", "mixed",
                                  "cross_lane"])
def test_rdna_wave64(clang_co, arch, name):
  """RDNA runs wave64 too (-mwavefrontsize64): same kernels, 64-lane EXEC/VCC pairs."""
  c = CASES[name]()
  st = launch(clang_co(arch, "suite", "-mwavefrontsize64"), name, grid=c["grid"], block=c["block"], args=c["args"])
  assert st.wave_size == 64
  _check(c, "gfx9")  # the wave-size-dependent oracles take 64 lanes


def test_mfma_32x32_and_wmma_int8(clang_co):
  """More matrix shapes and types: CDNA 32x32x8 f16 into 16 AccVGPRs, RDNA3 signed int8 WMMA."""
  r = np.random.default_rng(13)
  A, B = r.integers(-3, 4, (32, 8)).astype(np.float16), r.integers(-3, 4, (8, 32)).astype(np.float16)
  C, D = r.integers(-5, 5, (32, 32)).astype(np.float32), np.zeros((32, 32), np.float32)
  for arch in ("gfx942", "gfx950"):
    launch(clang_co(arch, "matrix"), "mma32", grid=1, block=64, args=[D, A, B, C])
    np.testing.assert_array_equal(D, A.astype(np.float32) @ B.astype(np.float32) + C)
  A8, B8 = (r.integers(-128, 128, (16, 16)).astype(np.int8) for _ in range(2))
  C8, D8 = r.integers(-1000, 1000, (16, 16)).astype(np.int32), np.zeros((16, 16), np.int32)
  launch(clang_co("gfx1100", "matrix"), "wmma_i8", grid=1, block=32, args=[D8, A8, B8, C8])
  np.testing.assert_array_equal(D8, A8.astype(np.int32) @ B8.astype(np.int32) + C8)
