"""Adreno ir3 on the emulator: Mesa's own compiler output for saxpy (1M) and the shared-memory tree reduction
(../shared/vendor/ir3/kernels, a630 and a730), and a 16x16-tiled shared-memory f32 matmul written in ir3 assembly
here, each run warm in every mode and checked against numpy.

    python bench/ir3.py [--json] [--n 128] [--targets a630,a730] [--modes checks,native,interp]

Rows: wave-instructions, best-of-3 warm seconds per mode (`MODES`, as bench/ptx.py), the share the native tier ran,
numpy seconds (best of 5, same run), the first launch's seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

KERNELS = Path(__file__).resolve().parents[2] / "shared" / "vendor" / "ir3" / "kernels"
MODES = {"checks": (True, "auto"), "native": (False, "force"), "interp": (False, "0")}
M32 = 0xffffffff


def _ld(d, c, b):
  return f"ldib.b.untyped.1d.u32.1.imm.base0 {d}, {c}, {b}\n"


def matmul_text(n: int) -> str:
  """C = A @ B (n x n f32, n a multiple of 16): 16x16 workgroups stage a tile of A and of B in shared memory (bytes
  0..1023 and 1024..2047), `bar`, 16 mad.f32 per fiber, `bar`, next tile."""
  inner = "".join(f"ldl.u32 r5.x, l[r1.w{f'+{4 * k}' if k else ''}], 1\nldl.u32 r5.y, l[r2.x+{1024 + 64 * k}], 1\n"
                  f"(ss)mad.f32 r3.x, r5.x, r5.y, r3.x\n" for k in range(16))
  lg = n.bit_length() - 1
  return ("shl.b r1.x, r48.y, 4\nadd.u r1.x, r1.x, r0.y\nshl.b r1.y, r48.x, 4\nadd.u r1.y, r1.y, r0.x\n"
          "shl.b r1.z, r0.y, 4\nadd.u r1.z, r1.z, r0.x\nshl.b r1.z, r1.z, 2\nshl.b r1.w, r0.y, 6\n"
          "shl.b r2.x, r0.x, 2\nmov.u32u32 r2.y, 0\nmov.u32u32 r3.x, 0\n"
          "tile:\n"
          f"shl.b r2.z, r1.x, {lg}\nadd.u r2.z, r2.z, r2.y\nadd.u r2.z, r2.z, r0.x\n"
          f"add.u r2.w, r2.y, r0.y\nshl.b r2.w, r2.w, {lg}\nadd.u r2.w, r2.w, r1.y\n" +
          _ld("r4.x", "r2.z", 0) + _ld("r4.y", "r2.w", 1) +
          "(sy)stl.u32 l[r1.z], r4.x, 1\nstl.u32 l[r1.z+1024], r4.y, 1\n(ss)bar\n" + inner +
          f"bar\nadd.u r2.y, r2.y, 16\ncmps.u.lt p0.x, r2.y, {n}\nbr p0.x, #tile\n"
          f"shl.b r2.z, r1.x, {lg}\nadd.u r2.z, r2.z, r1.y\n"
          "stib.b.untyped.1d.u32.1.imm.base0 r3.x, r2.z, 2\nend\n")


def cases(arch: str, n: int):
  from gputwin.isa.ir3 import assemble, listing
  rng = np.random.default_rng(0)
  out = {}
  if KERNELS.is_dir():
    N = 1 << 20
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    ubo = np.zeros(16, np.uint32)
    ubo[0], ubo[1] = np.float32(1.5).view(np.uint32), N
    out["saxpy"] = dict(code=KERNELS / arch / "saxpy.bin", shader=None, grid=(N // 64,),
                        args=lambda: {0: x, 1: y.copy(), 4: ubo}, out=1, ref=lambda: np.float32(1.5) * x + y)
    G = 2048
    v = rng.standard_normal(128 * G).astype(np.float32)
    out["reduce"] = dict(code=KERNELS / arch / "reduce_shared.bin", shader=None, grid=(G,),
                         args=lambda: {0: v, 1: np.zeros(G, np.float32)}, out=1,
                         ref=lambda: v.reshape(G, 128).sum(axis=1), tol=1e-4)
  A = rng.integers(-4, 5, (n, n)).astype(np.float32)  # small integers: every sum is exact in any order
  B = rng.integers(-4, 5, (n, n)).astype(np.float32)
  code = assemble(matmul_text(n), arch)
  sh = listing.Shader.explicit(arch, code, local_size=(16, 16, 1), shared_size=2048)
  out["matmul"] = dict(code=code, shader=sh, grid=(n // 16, n // 16), args=lambda: {0: A, 1: B, 2: np.zeros((n, n),
                       np.float32)}, out=2, ref=lambda: A @ B)
  return out


def _launch(case, arch, checks):
  from gputwin.emu.ir3.launch import launch
  args = case["args"]()
  st = launch(case["code"], "main", grid=case["grid"], args=args, arch=arch, shader=case["shader"], checks=checks)
  got, want = args[case["out"]], case["ref"]()
  tol = case.get("tol", 0)
  ok = np.allclose(got, want, rtol=tol, atol=tol) if tol else np.array_equal(got, want)
  if not ok:
    raise SystemExit(f"{arch}: wrong result")
  return st


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--json", action="store_true")
  p.add_argument("--n", type=int, default=128)
  p.add_argument("--targets", default="a630,a730")
  p.add_argument("--modes", default=",".join(MODES))
  a = p.parse_args()
  rows = []
  for arch in a.targets.split(","):
    for name, case in cases(arch, a.n).items():
      row = dict(kernel=name, target=arch)
      for mode in a.modes.split(","):
        checks, jit = MODES[mode]
        os.environ["GPUTWIN_JIT"] = jit
        t = time.perf_counter()
        st = _launch(case, arch, checks)
        row[f"{mode}_first_launch_seconds"] = time.perf_counter() - t
        best = None
        for _ in range(3):
          st = _launch(case, arch, checks)
          best = st if best is None or st.seconds < best.seconds else best
        row.update({f"{mode}_seconds": best.seconds, f"{mode}_native_share":
                    best.native_instructions / max(best.instructions, 1), "wave_instructions": best.instructions,
                    "wave_size": best.wave_size})
      args = case["args"]()
      ts = []
      for _ in range(5):
        t = time.perf_counter()
        case["ref"]() if name != "saxpy" else np.float32(1.5) * args[0] + args[1]
        ts.append(time.perf_counter() - t)
      row["numpy_seconds"] = min(ts)
      rows.append(row)
  if a.json:
    print(json.dumps(rows, indent=1))
    return 0
  modes = a.modes.split(",")
  print("| kernel | target | wave | wave-inst | " + " | ".join(f"{m}: s (M/s)" for m in modes) +
        " | native share | numpy s | native vs numpy |")
  print("|---" * (6 + len(modes)) + "|")
  for r in rows:
    cells = [f"{r[f'{m}_seconds']:.4f} ({r['wave_instructions'] / r[f'{m}_seconds'] / 1e6:.1f})" for m in modes]
    share = r.get("native_native_share", 0)
    vs = f"{r['native_seconds'] / r['numpy_seconds']:.0f}x" if "native_seconds" in r else "-"
    print(f"| {r['kernel']} | {r['target']} | {r['wave_size']} | {r['wave_instructions']:,} | " + " | ".join(cells) +
          f" | {share:.0%} | {r['numpy_seconds'] * 1e3:.3f} ms | {vs} |")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
