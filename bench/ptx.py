"""NVIDIA PTX on the emulator: saxpy 1M and a 16x16-tiled shared-memory matmul, compiled by nvcc 13 for sm_90, run
warm in each mode and checked against numpy; then the same matmul algorithm on numba's CUDA simulator (installed with
pip when missing), which runs one Python thread per CUDA thread.

    python bench/ptx.py [--json] [--n 256] [--numba-n 64] [--no-numba] [--modes checks,native,interp]

Rows: warp-instructions, best-of-5 warm seconds per mode (MODES, as bench/run.py), the share the native tier ran, numpy seconds (best
of 5, in the same run), the first launch's seconds; and for numba: its seconds and ours (checkers on) for the same
matmul, both checked against numpy.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

NUMBA = r'''
import os, sys, time, json
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
from numba import cuda, float32
T = 16
@cuda.jit
def matmul(A, B, C, n):
    As = cuda.shared.array((T, T), float32)
    Bs = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * T + ty, cuda.blockIdx.x * T + tx
    acc = float32(0.0)
    for k0 in range(0, n, T):
        As[ty, tx] = A[row * n + k0 + tx]
        Bs[ty, tx] = B[(k0 + ty) * n + col]
        cuda.syncthreads()
        for k in range(T):
            acc += As[ty, k] * Bs[k, tx]
        cuda.syncthreads()
    C[row * n + col] = acc
n = int(sys.argv[1])
rng = np.random.default_rng(0)
A = rng.integers(-4, 5, n * n).astype(np.float32); B = rng.integers(-4, 5, n * n).astype(np.float32)
C = np.zeros(n * n, np.float32)
t = time.perf_counter()
matmul[(n // T, n // T), (T, T)](A, B, C, np.int32(n))
dt = time.perf_counter() - t
ok = bool(np.array_equal(C.reshape(n, n), A.reshape(n, n) @ B.reshape(n, n)))
print(json.dumps({"seconds": dt, "correct": ok}))
'''


# what a row measures: (checkers on?, GPUTWIN_JIT), as bench/run.py: checks = launch() as it defaults (interpreter),
# native = checks off with every block compiled at first sight (first_launch pays the compile), interp = tier off
MODES = {"checks": (True, "auto"), "native": (False, "force"), "interp": (False, "0")}


def compile_ptx(out: Path, arch: str = "sm_90") -> Path:
  p = out / f"bench-{arch}.ptx"
  subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-O3", str(HERE / "kernels.cu"), "-o", str(p)], check=True)
  return p


def cases(n: int):
  rng = np.random.default_rng(0)
  N = 1 << 20
  x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
  a = np.float32(1.5)
  A = rng.integers(-4, 5, (n, n)).astype(np.float32)  # small integers: every sum is exact in any order
  B = rng.integers(-4, 5, (n, n)).astype(np.float32)
  return {
    "saxpy": dict(args=lambda: [a, x, y.copy(), np.int32(N)], grid=N // 256, block=256, out=2,
                  ref=lambda: (np.float32(a) * x + y), exact=False),
    "matmul": dict(args=lambda: [A, B, np.zeros((n, n), np.float32), np.int32(n)], grid=(n // 16, n // 16),
                   block=(16, 16), out=2, ref=lambda: A @ B, exact=True)}


def run_case(ptx: Path, kernel: str, case: dict, checks: bool, reps: int = 5):
  from gputwin.emu import launch
  best = None
  for _ in range(reps):
    args = case["args"]()
    t = time.perf_counter()
    st = launch(ptx, kernel, grid=case["grid"], block=case["block"], args=args, arch="sm_90", checks=checks)
    dt = time.perf_counter() - t
    if best is None or dt < best[0]:
      best = (dt, st, args)
  dt, st, args = best
  ref, got = case["ref"](), args[case["out"]]
  ok = np.array_equal(got, ref) if case["exact"] else np.allclose(got, ref, rtol=1e-6, atol=1e-6)
  return dt, st, ok


def _timed(fn) -> float:
  t = time.perf_counter()
  fn()
  return time.perf_counter() - t


def numba_matmul(n: int) -> dict | None:
  try:
    import numba  # noqa: F401
  except ImportError:
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "numba"], capture_output=True, text=True)
    if r.returncode:
      return None
  with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(NUMBA)
  try:
    r = subprocess.run([sys.executable, f.name, str(n)], capture_output=True, text=True, timeout=3600)
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
  finally:
    os.unlink(f.name)


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--json", action="store_true")
  ap.add_argument("--n", type=int, default=256)
  ap.add_argument("--numba-n", type=int, default=64)
  ap.add_argument("--no-numba", action="store_true")
  ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
  a = ap.parse_args()
  modes = {m: MODES[m] for m in a.modes.split(",")}
  from gputwin.emu.core import keep_heap
  keep_heap()
  rows = []
  with tempfile.TemporaryDirectory() as d:
    ptx = compile_ptx(Path(d))
    for kernel, case in cases(a.n).items():
      for mode, (checks, jit) in modes.items():
        os.environ["GPUTWIN_JIT"] = jit
        t = time.perf_counter()
        run_case(ptx, kernel, case, checks, reps=1)  # warm: parse, bind, compile pcode bodies (and native blocks)
        warm = time.perf_counter() - t
        dt, st, ok = run_case(ptx, kernel, case, checks)
        npsec = min(_timed(case["ref"]) for _ in range(5))
        rows.append(dict(kernel=kernel, mode=mode, warp_instructions=st.instructions, seconds=dt,
                         minst_per_s=st.instructions / dt / 1e6, native_share=st.native_instructions / st.instructions,
                         numpy_seconds=npsec, vs_numpy=dt / npsec, first_launch=warm, correct=bool(ok)))
    if not a.no_numba:
      nb = numba_matmul(a.numba_n)
      if nb is not None:
        case = cases(a.numba_n)["matmul"]
        for mode, (checks, jit) in modes.items():
          os.environ["GPUTWIN_JIT"] = jit
          run_case(ptx, "matmul", case, checks, reps=1)
          dt, st, ok = run_case(ptx, "matmul", case, checks)
          rows.append(dict(kernel=f"matmul {a.numba_n} vs numba cudasim", mode=mode, seconds=dt,
                           numba_seconds=nb["seconds"], numba_correct=nb["correct"], speedup=nb["seconds"] / dt,
                           correct=bool(ok)))
  if a.json:
    print(json.dumps(rows, indent=1))
  else:
    for r in rows:
      print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
  return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
