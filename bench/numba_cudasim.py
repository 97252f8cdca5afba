"""The PTX matmul of bench/run.py (kernels.cu, nvcc 13 for sm_90) against the same algorithm on numba's CUDA
simulator, which runs one Python thread per CUDA thread (numba is pip-installed when missing).

    python bench/numba_cudasim.py [--json] [--n 64] [--modes checks,native,interp]

Rows: numba's seconds for one n x n launch and ours (best of 5 warm launches, in each of run.py's MODES), both
checked against numpy on small-integer inputs (every sum exact in any order).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (bench/run.py: build, MODES, the timed launch)

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
A, B = (np.random.default_rng(s).integers(-4, 5, n * n).astype(np.float32) for s in (0, 1))
C = np.zeros(n * n, np.float32)
t = time.perf_counter()
matmul[(n // T, n // T), (T, T)](A, B, C, np.int32(n))
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "correct": bool(np.array_equal(C, (A.reshape(n, n) @ B.reshape(n, n)).ravel()))}))
'''


def numba_matmul(n: int) -> dict | None:
  if importlib.util.find_spec("numba") is None:
    if subprocess.run([sys.executable, "-m", "pip", "install", "-q", "numba"]).returncode:
      return None
  r = subprocess.run([sys.executable, "-c", NUMBA, str(n)], capture_output=True, text=True, timeout=3600)
  return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--json", action="store_true")
  p.add_argument("--n", type=int, default=64)
  p.add_argument("--modes", default=",".join(run.MODES))
  a = p.parse_args()
  nb = numba_matmul(a.n)
  if nb is None:
    print("bench: numba's CUDA simulator is not available", file=sys.stderr)
    return 1
  from gputwin.emu.core import keep_heap
  keep_heap()
  A, B = (np.random.default_rng(s).integers(-4, 5, (a.n, a.n)).astype(np.float32) for s in (0, 1))
  rows = []
  with tempfile.TemporaryDirectory(prefix="gputwin-cudasim-") as tmp:
    code = run.build("sm_90", Path(tmp))
    if code is None:
      return 1
    for mode in a.modes.split(","):
      checks, tier = run.MODES[mode]
      os.environ["GPUTWIN_JIT"] = tier
      best = None
      for _ in range(6):  # a warm-up, then best of 5
        case = dict(code=code, entry="matmul", grid=(a.n // 16, a.n // 16, 1), block=(16, 16, 1), shader=None,
                    args=[A, B, np.zeros((a.n, a.n), np.float32), np.int32(a.n)])
        secs, _ = run._timed_launch("sm_90", case, checks)
        best = (secs, case) if best is None or secs < best[0] else best
      secs, case = best
      rows.append(dict(kernel=f"matmul {a.n}", mode=mode, seconds=secs, numba_seconds=nb["seconds"],
                       numba_correct=nb["correct"], speedup=nb["seconds"] / secs,
                       correct=bool(np.array_equal(case["args"][2], A @ B))))
  for r in rows if not a.json else ():
    print(f"{r['kernel']} {r['mode']:6s} ours {r['seconds']:.4f} s  numba cudasim {r['numba_seconds']:.2f} s "
          f"({'ok' if r['numba_correct'] else 'WRONG'})  {r['speedup']:,.0f}x  {'ok' if r['correct'] else 'WRONG'}")
  if a.json:
    print(json.dumps(rows, indent=1))
  return 0 if all(r["correct"] and r["numba_correct"] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
