"""gputwin fuzz on NVIDIA targets: the same random programs rendered as CUDA C, nvcc -ptx for sm_80 / sm_90, run on
the PTX emulator, compared bit for bit with the clang-22 host build (the oracle: C run sequentially per phase)."""
import re
import shutil
import subprocess

import numpy as np
import pytest

from gputwin.cli import main
from gputwin.verify import fuzz


@pytest.fixture(scope="session")
def nvcc():
  if not (shutil.which("nvcc") and shutil.which("clang-22")):
    pytest.skip("nvcc (CUDA 13) / clang-22 not installed")


def test_ci_sized_run_per_arch_has_no_mismatch(nvcc, tmp_path):
  res = fuzz.fuzz(2026, 8, fuzz.NV_TARGETS, batch=8, jobs=2, save_to=tmp_path)
  assert sorted({o.target for o in res}) == ["sm_80", "sm_90"] and len(res) == 16
  bad = [o for o in res if o.status != "ok"]
  assert not bad, "\n".join(f"{o.status} {o.target} {o.index}: {o.detail}" for o in bad)


def test_cuda_rendering_uses_cuda_primitives():
  p = next(q for q in (fuzz.generate(3, i, cuda=True) for i in range(50))
           if {"xchg", "atomic", "warp"} <= {s.kind for s in q.walk()})
  src = fuzz.device_source([p], d=fuzz.CUDA)
  assert f'extern "C" __global__ void fz{p.index}(' in src and "__shared__ uint lds[64], lacc[4];" in src
  assert "static __device__ inline uint udv" in src and "__syncthreads()" in src and "__builtin_amdgcn" not in src
  assert any(f"atomic{op.capitalize()}(&" in src for op in fuzz.ATOMICS) and "_sync(0xffffffffu, " in src
  assert fuzz.generate(3, 7) == fuzz.generate(3, 7, cuda=False)  # AMD programs do not change with the option


def test_cuda_programs_are_ub_free_and_use_every_warp_operation_and_intrinsic(tmp_path):
  if not shutil.which("clang-22"):
    pytest.skip("clang-22 not installed")
  progs = [fuzz.generate(14, i, cuda=True) for i in range(12)]
  names = {s.a[0] for p in progs for s in p.walk() if s.kind == "warp"}
  assert names == set(fuzz.SHUFFLES) | set(fuzz.REDUCTIONS)
  src = fuzz.host_source(progs)
  body = src[src.index("static void fz"):]
  assert all(re.search(r"__\w+\(", f).group() in body for f in fuzz.INTRINSICS[0] + fuzz.INTRINSICS[1])
  (tmp_path / "u.c").write_text(src)
  subprocess.run(["clang-22", "-x", "c", "-O1", "-w", "-fsanitize=undefined", "-fno-sanitize-recover=all",
                  str(tmp_path / "u.c"), *fuzz.HOST_LIBS, "-o", str(tmp_path / "u")], check=True, capture_output=True)
  r = subprocess.run([str(tmp_path / "u")], input=b"".join(fuzz.inputs(14, i).tobytes() for i in range(12)),
                     capture_output=True)
  assert r.returncode == 0 and not r.stderr, r.stderr[-500:]


def test_a_miscompiled_atomic_is_caught_reduced_and_replayed(nvcc, tmp_path, monkeypatch):
  """atomicMax rendered as atomicMin (a stand-in for a wrong compiler or emulator): the host's max accumulator
  disagrees, ddmin keeps only what the mismatch needs, and the saved .cu/.c/.json case replays from its sources."""
  real = fuzz.render_device
  monkeypatch.setattr(fuzz, "render_device",
                      lambda p, keep=None, d=fuzz.OPENCL: real(p, keep, d).replace("atomicMax(", "atomicMin("))
  p = next(q for q in (fuzz.generate(5, i) for i in range(100))
           if any(s.kind == "atomic" and s.a[1] == 3 for s in q.walk()) and 5 < sum(1 for _ in q.walk()) <= 8)
  x = fuzz.inputs(5, p.index)
  assert fuzz.verdict(p, None, "sm_80", x).startswith("mismatch")
  keep = fuzz.reduce(p, "sm_80", x)
  assert len(keep) < sum(1 for _ in p.walk()) and any(s.id in keep and s.kind == "atomic" for s in p.walk())
  stem = fuzz.save_regression(p, keep, "sm_80", x, "test", tmp_path)
  assert "atomicMin(" in stem.with_suffix(".cu").read_text() and stem.with_suffix(".c").exists()
  monkeypatch.undo()
  h, g, mod = fuzz.replay(stem)
  assert isinstance(mod, fuzz.PtxModule) and isinstance(g, np.ndarray) and not np.array_equal(h, g)


def test_flushed_denormals_are_caught(nvcc, monkeypatch):
  """Seed 2027 program 49 makes a denormal: with the IEEE flags host and emulator agree; built with -ftz=true (f32
  instructions get .ftz, which the emulator honours and the host C does not) they differ."""
  p, x = fuzz.generate(2027, 49, cuda=True), fuzz.inputs(2027, 49)
  assert fuzz.verdict(p, None, "sm_90", x) == "ok"
  monkeypatch.setattr(fuzz, "NVCC_FLAGS", tuple(f.replace("-ftz=false", "-ftz=true") for f in fuzz.NVCC_FLAGS))
  assert fuzz.verdict(p, None, "sm_90", x).startswith("mismatch f0")


def test_cli_target_show_and_errors(nvcc, capsys, monkeypatch):
  assert main(["fuzz", "--count", "2", "--target", "sm_80", "--save", "", "-j", "1", "--seed", "5"]) == 0
  assert "sm_80" in capsys.readouterr().out
  assert main(["fuzz", "--show", "3", "--target", "sm_90"]) == 0
  out = capsys.readouterr().out
  assert 'extern "C" __global__ void fz3' in out and "static void fz3" in out
  assert main(["fuzz", "--count", "1", "--target", "sm_75"]) == 2
  assert "unknown NVIDIA target(s) sm_75" in capsys.readouterr().err
  monkeypatch.setattr(fuzz, "NVCC", "nvcc-not-installed")
  assert main(["fuzz", "--count", "1", "--target", "sm_90"]) == 2
  assert "nvcc-not-installed not found" in capsys.readouterr().err


def test_nvcc_failure_is_pinned_to_its_program(nvcc, monkeypatch):
  real = fuzz.render_device
  monkeypatch.setattr(fuzz, "render_device",
                      lambda p, keep=None, d=fuzz.OPENCL: real(p, keep, d) + ("\n#error seeded" * (p.index == 1)))
  res = fuzz.run_batch((3, 0, 3, ("sm_90",)))
  assert [(o.index, o.status) for o in res] == [(0, "ok"), (1, "compile-error"), (2, "ok")]
  assert "seeded" in res[1].detail


@pytest.mark.slow
@pytest.mark.parametrize("arch", fuzz.NV_TARGETS)
def test_thousand_programs_per_arch(nvcc, arch, tmp_path):
  """The issue's full NVIDIA run (also: gputwin fuzz --target sm_90 --count 1000)."""
  res = fuzz.fuzz(7, 1000, (arch,), batch=50, save_to=tmp_path)
  bad = [o for o in res if o.status != "ok"]
  assert not bad, "\n".join(f"{o.status} {o.target} {o.index}: {o.detail}" for o in bad[:20])
