"""The command-line tools on NVIDIA code: `gputwin run` on a .ptx, `gputwin trace` and `gputwin diff` on a .cu
(nvcc 13 compiles it per --arch). Skipped without nvcc."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) not installed")


def test_run_a_ptx_kernel_and_save_its_buffers(tmp_path, capsys):
  from gputwin.emu.tool import run_main
  ptx = tmp_path / "m.ptx"
  subprocess.run(["nvcc", "-ptx", "-arch=sm_90", "-O3", str(HERE / "machine.cu"), "-o", str(ptx)], check=True)
  rc = run_main([str(ptx), "--arch", "sm_90", "--kernel", "fibk", "--block", "32", "--arg", "out:i32:32",
                 "--out", str(tmp_path / "o"), "--trace", str(tmp_path / "t.txt")])
  assert rc == 0
  fib = lambda n: n if n < 2 else fib(n - 1) + fib(n - 2)
  assert np.load(tmp_path / "o" / "out.npy").tolist() == [fib(t % 12) for t in range(32)]
  lines = (tmp_path / "t.txt").read_text().splitlines()
  assert lines and all(line.startswith("wave") for line in lines) and any("call.uni" in line for line in lines)


def test_trace_a_cuda_source_as_jsonl(tmp_path):
  from gputwin.verify.tool import trace_main
  out = tmp_path / "t.jsonl"
  rc = trace_main([str(HERE / "machine.cu"), "--arch", "sm_80", "--kernel", "half_shfl", "--block", "64",
                   "--arg", "out:i32:64", "-o", str(out)])
  assert rc == 0
  recs = [json.loads(x) for x in out.read_text().splitlines()]
  shfl = [r for r in recs if r["inst"].startswith("shfl.sync")]
  assert len(shfl) == 2 and all(r["wave"] in (0, 1) for r in shfl)  # one per warp: the half-warp runs it once


def test_diff_the_same_source_on_two_targets(capsys):
  from gputwin.verify.tool import diff_main
  rc = diff_main([str(HERE / "machine.cu"), "--arch", "sm_90", "--arch-b", "sm_80", "--mode", "values",
                  "--kernel", "diverge", "--block", "64", "--arg", "out:i32:64"])
  assert rc == 0 and "identical" in capsys.readouterr().out


@pytest.mark.arch("sm_80", "sm_90")
def test_the_gpu_fixture_runs_nvidia_targets_through_the_mock_driver(gpu, tmp_path):
  ptx = tmp_path / "m.ptx"
  subprocess.run(["nvcc", "-ptx", f"-arch={gpu.arch}", "-O3", str(HERE / "machine.cu"), "-o", str(ptx)], check=True)
  out = np.zeros(64, np.int32)
  gpu.launch(ptx, "half_shfl", grid=1, block=64, args=[out])
  t = np.arange(64)
  assert out.tolist() == np.where(t % 32 < 16, (t ^ 1) * 10, -t * 10).tolist()
