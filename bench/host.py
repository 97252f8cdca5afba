"""Host CPU targets under unicorn (gputwin.emu.host): the compiler's saxpy, block reduction and tiled matmul
(gputwin/compiler/examples.py) compiled for x86_64 and aarch64, run once each under unicorn and checked against the
numpy reference's results. An oracle, not a fast path: the row is host instructions per second.

    python bench/host.py [--json] [--saxpy N] [--reduce N] [--matmul N] [--targets x86_64,aarch64]

Rows: host instructions (= lane-instructions: a work-item is a lane), seconds of the launch (including the
unicorn engine's setup and the copies), M instructions/s, the first launch's compile seconds.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def cases(sizes: dict):
  from gputwin.compiler import examples
  rng = np.random.default_rng(0)
  n = sizes["saxpy"]
  x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  yield "saxpy", examples.saxpy, (n // 256,), (256,), lambda: [np.float32(1.5), x, y.copy(), n], 2, \
      np.float32(1.5) * x + y
  n = sizes["reduce"]
  v = rng.standard_normal(n).astype(np.float32)
  yield "reduce", examples.reduce_sum, (n // examples.BLOCK,), (examples.BLOCK,), \
      lambda: [v, np.zeros(n // examples.BLOCK, np.float32), n], 1, v.reshape(-1, examples.BLOCK).sum(1)
  n, t = sizes["matmul"], examples.TILE
  a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
  yield "matmul", examples.matmul, (n // t, n // t), (t, t), lambda: [a, b, np.zeros((n, n), np.float32), n, n, n], \
      2, a @ b


def main(argv=None) -> int:
  from gputwin.compiler import compile
  from gputwin.emu import launch
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--json", action="store_true")
  p.add_argument("--saxpy", type=int, default=1 << 20)
  p.add_argument("--reduce", type=int, default=1 << 16)
  p.add_argument("--matmul", type=int, default=128)
  p.add_argument("--targets", default="x86_64,aarch64")
  a = p.parse_args(argv)
  rows = []
  for name, k, grid, block, args, out, want in cases(vars(a)):
    for arch in a.targets.split(","):
      t0 = time.perf_counter()
      c = compile(k, arch)
      compile_s = time.perf_counter() - t0
      got = args()
      st = launch(c.code_object, c.name, grid=grid, block=block, args=got, arch=arch)
      ok = bool(np.allclose(got[out], want, rtol=1e-3, atol=1e-3))
      rows.append(dict(kernel=name, target=arch, items=st.waves, instructions=st.instructions, seconds=st.seconds,
                       mips=st.instructions / st.seconds / 1e6, compile_s=compile_s, ok=ok))
  if a.json:
    print(json.dumps(rows, indent=1))
    return 0
  print("| kernel | target | work-items | host instructions | s | M instructions/s | compile s | = numpy |")
  print("|---|---|---|---|---|---|---|---|")
  for r in rows:
    print(f"| {r['kernel']} | {r['target']} | {r['items']:,} | {r['instructions']:,} | {r['seconds']:.2f} | "
          f"{r['mips']:.1f} | {r['compile_s']:.2f} | {'yes' if r['ok'] else 'NO'} |")
  return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
  raise SystemExit(main())
