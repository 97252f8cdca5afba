"""Our CUDA kernels, compiled by nvcc to PTX, run on the PTX emulator and checked against numpy/fractions oracles
(cases.py); the batched and serial schedules and both execution tiers give the same bits; and before any of that,
ptxas and our parser accept every module nvcc writes."""
from __future__ import annotations

import copy
import subprocess

import numpy as np
import pytest

from gputwin.isa.ptx import parse
from gputwin import errors
from tests.emu.ptx.cases import BY_ID, CASES, FAULTS, Case, Tol
from tests.emu.ptx.conftest import ARCHS, needs_cuda, sources


def run(case: Case, arch: str, ptx, **kw) -> tuple[list, dict]:
  """Launch `case` on a fresh copy of its inputs: (args after the launch, the oracle's expectations)."""
  from gputwin.emu import launch
  args = case.build(case.rng())
  want = case.ref(copy.deepcopy(args))
  stats = launch(ptx[case.file, arch], case.kernel, grid=case.grid, block=case.block, args=args, arch=arch,
                 shared_bytes=case.shared_bytes, **kw)
  assert stats.instructions > 0
  return args, want


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Distance in float32 ulps (the bit patterns in two's-complement order; NaN is infinitely far)."""
  def order(v):
    i = v.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)
  return np.where(np.isnan(a) | np.isnan(b), np.inf, np.abs(order(a) - order(b)))


def compare(case: Case, got: list, want: dict) -> None:
  """got (the launch's args) against the oracle: bits (NaN matches any NaN), Tol, or the case's verifier."""
  if "verify" in want: return want["verify"](got, want)
  for i, w in want.items():
    g, w, where = np.asarray(got[i]).ravel(), np.asarray(w).ravel(), f"{case.id} arg {i}"
    how = case.check.get(i, "bits") if isinstance(case.check, dict) else case.check
    assert (g.dtype, g.shape) == (w.dtype, w.shape), f"{where}: oracle {w.dtype}{w.shape}, output {g.dtype}{g.shape}"
    if isinstance(how, Tol):
      segs = len(how.ulp)
      for k, (gk, wk, u, at) in enumerate(zip(g.reshape(segs, -1), w.reshape(segs, -1), how.ulp, how.atol)):
        bad = np.flatnonzero(~((ulps(gk, wk) <= u) | (np.abs(gk.astype(np.float64) - wk) <= at)))
        assert not bad.size, f"{where} op {k}: {bad.size} beyond bounds at {bad[:8]}: {gk[bad[:4]]} vs {wk[bad[:4]]}"
      continue
    same = g.view(f"u{g.itemsize}") == w.view(f"u{w.itemsize}")
    if g.dtype.kind == "f": same |= np.isnan(g) & np.isnan(w)
    bad = np.flatnonzero(~same)
    assert not bad.size, f"{where}: {bad.size}/{g.size} differ, first at {bad[:8]}: got {g[bad[:4]]} want {w[bad[:4]]}"


def outputs(args: list) -> list[np.ndarray]: return [a.copy() for a in args if isinstance(a, np.ndarray)]


PARAMS = [pytest.param(c, a, id=f"{c.id}-{a}") for c in CASES for a in c.archs]


@needs_cuda
@pytest.mark.parametrize("case,arch", PARAMS)
def test_kernel(case, arch, ptx):
  got, want = run(case, arch, ptx)
  compare(case, got, want)


# Deterministic results (no order-dependent atomics returns, no spin-waits, which a one-warp-at-a-time schedule
# cannot make progress on).
SCHEDULE = ["warp_shfl_down", "block_reduce", "atomic_minmax", "hist_shared", "lookback_scan", "diverge_shuffle",
            "cp_async_pipeline", "mma_gemm"]


@needs_cuda
@pytest.mark.parametrize("name", SCHEDULE)
def test_serial_matches_default(name, ptx):
  case = BY_ID[name]
  batched, _ = run(case, "sm_90", ptx)
  serial, want = run(case, "sm_90", ptx, serial=True)
  for a, b in zip(outputs(batched), outputs(serial)): assert a.tobytes() == b.tobytes(), f"{name}: serial differs"
  compare(case, serial, want)


TIERS = ["ew_f32", "int_bits", "matmul_tiled", "warp_shfl_xor", "divergent_loops", "math_exact", "wmma_gemm",
         "recursion", "block_votes", "spin_flag", "lookback_scan"]  # (blocks ending in branches, exits, barriers)


@needs_cuda
@pytest.mark.parametrize("name", TIERS)
def test_jit_tiers_agree(name, ptx, monkeypatch):
  case, results = BY_ID[name], []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    got, want = run(case, "sm_80", ptx, checks=False)  # (checkers observe every instruction: interpreter only)
    compare(case, got, want)
    results.append(outputs(got))
  for a, b in zip(*results): assert a.tobytes() == b.tobytes(), f"{name}: GPUTWIN_JIT=0 and force differ"


@needs_cuda
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.kernel)
def test_fault(fault, ptx):
  """A bad kernel stops with the named gputwin error, which says which kernel."""
  from gputwin.emu import launch
  with pytest.raises(getattr(errors, fault.error)) as e:
    launch(ptx[fault.file, "sm_90"], fault.kernel, grid=fault.grid, block=fault.block, args=fault.args(), arch="sm_90")
  assert fault.kernel in str(e.value)


@needs_cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sources())
def test_parses(name, arch, ptx):
  """ptxas (sm_90) assembles what nvcc wrote, our parser reads it, and every kernel in it has a case."""
  path = ptx[name, arch]
  r = subprocess.run(["ptxas", "-arch=sm_90", "-o", "/dev/null", str(path)], capture_output=True, text=True)
  assert r.returncode == 0, f"ptxas rejects {path.name}: {r.stderr}"
  m = parse(path.read_text(), str(path))
  cased = {c.kernel for c in [*CASES, *FAULTS] if c.file == name}
  assert set(m.kernels) == cased, f"{name}.cu: kernels {set(m.kernels)}, cases {cased}"
  assert all(f.instructions() for f in m.kernels.values())
