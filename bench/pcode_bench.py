"""Lane-ops/s of compiled vendor semantics for simple VALU ops over 1M lanes (waves of 32, EXEC all on and
half on). Run: python bench/pcode_bench.py [--lanes N]. Target: >= 100M lane-ops/s for simple f32/int ops."""
from __future__ import annotations

import argparse
import time

import numpy as np

from gputwin.pcode import semantics

OPS = [("rdna3", "V_ADD_F32"), ("rdna3", "V_MUL_F32"), ("rdna3", "V_FMA_F32"), ("rdna3", "V_ADD_NC_U32"),
       ("rdna3", "V_AND_B32"), ("rdna3", "V_LSHLREV_B32"), ("rdna3", "V_MUL_LO_U32"), ("rdna3", "V_CNDMASK_B32"),
       ("rdna3", "V_CMP_LT_F32"), ("rdna3", "V_MAX_F32"), ("cdna", "V_ADD_F32"), ("rdna4", "V_ADD_F32")]


def bench(fam: str, name: str, lanes: int, exec_mask, reps: int = 5) -> float:
  W = lanes // 32
  rng = np.random.default_rng(0)
  st = {k: rng.random((W, 32), dtype=np.float32).view(np.uint32) for k in ("S0", "S1", "S2", "D0")}
  st["VCC"] = rng.integers(0, 2**32, (W, 1), dtype=np.uint64)
  if "_CMP" in name:  # VOPC writes a per-wave lane mask (SGPR pair), shaped (waves, 1)
    st["D0"] = np.zeros((W, 1), np.uint64)
  sem = semantics(fam, name)
  sem(st, exec=exec_mask)
  best = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    sem(st, exec=exec_mask)
    best = min(best, time.perf_counter() - t)
  return lanes / best


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--lanes", type=int, default=1 << 20)
  n = ap.parse_args().lanes
  W = n // 32
  full, half = np.ones((W, 32), bool), (np.arange(W * 32).reshape(W, 32) % 2) == 0
  print(f"{'instruction':24} {'EXEC all':>14} {'EXEC half':>14}   (lane-ops/s, {n} lanes)")
  for fam, name in OPS:
    a, b = bench(fam, name, n, full), bench(fam, name, n, half)
    print(f"{fam + ':' + name:24} {a / 1e6:12.0f}M {b / 1e6:12.0f}M")


if __name__ == "__main__":
  main()
