"""Emulator throughput and cold start, measured as ratios in one run (issue 8).

    python bench/run.py [--json] [--targets gfx1100,gfx942] [--kernels saxpy,matmul] [--modes checks,native,interp]
                        [--no-cold]

Compiles bench/kernels.cl with clang-22 for each target, runs every kernel on the emulator (results checked
against numpy) and reports wave-/lane-instructions, launch seconds (warm), cold start (first launch of a
never-seen kernel in a fresh process whose gputwin compile caches are empty but whose vendor tables are
cached: first-launch time minus a second identical launch), peak RSS, and numpy doing the same math. For the
native mode also the first launch of the full kernel in a fresh process with an empty native-code cache (and the
LLVM compile seconds in it) and in a second fresh process with that cache warm.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")
WAVE = {"gfx1100": 32, "gfx1200": 32, "gfx942": 64, "gfx950": 64}


def _saxpy(rng, wave):
  n = 1 << 20
  x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  a = np.float32(1.5)
  ref = lambda: a * x + y  # clang contracts to one fma: a 1-ulp difference from numpy's mul+add is expected
  return dict(args=[a, x, y.copy()], grid=(n // 256, 1, 1), block=(256, 1, 1), ref=ref, out=2, tol=1e-6)


def _matmul(rng, wave):
  n = 256
  A, B = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
  return dict(args=[A, B, np.zeros((n, n), np.float32), np.int32(n)], grid=(n // 16, n // 16, 1), block=(16, 16, 1),
              ref=lambda: A @ B, out=2, tol=1e-3)


def _reduce(rng, wave):
  n = 1 << 18
  x = rng.standard_normal(n).astype(np.float32)
  return dict(args=[x, np.zeros(n // 256, np.float32)], grid=(n // 256, 1, 1), block=(256, 1, 1),
              ref=lambda: x.reshape(-1, 256).sum(axis=1), out=1, tol=1e-4)


def _gemm(rng, wave):
  m = n = 128
  k = 64
  A, B = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((n, k)).astype(np.float16)
  return dict(args=[A, B, np.zeros((m, n), np.float32), np.int32(k), np.int32(n)], grid=(m // 16, n // 16, 1),
              block=(wave, 1, 1), ref=lambda: A.astype(np.float32) @ B.astype(np.float32).T, out=2, tol=1e-3)


CASES = {"saxpy": _saxpy, "matmul": _matmul, "reduce": _reduce, "gemm": _gemm}


def compile_kernels(arch: str, out: Path) -> Path:
  o, co = out / f"bench-{arch}.o", out / f"bench-{arch}.co"
  subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib",
                  "-O2", "-w", "-c", str(HERE / "kernels.cl"), "-o", str(o)], check=True)
  subprocess.run(["ld.lld-22", "-shared", str(o), "-o", str(co)], check=True)
  return co


def _timed_launch(co, kernel, case, checks=True):
  from gputwin.emu import launch
  t = time.perf_counter()
  st = launch(str(co), kernel, grid=case["grid"], block=case["block"], args=case["args"], checks=checks)
  return time.perf_counter() - t, st


# what a row measures: (checkers on?, GPUTWIN_JIT). The checkers observe every instruction, so they run on the
# numpy interpreter; without them the native tier (emu/native/) runs what it can compile.
MODES = {"checks": (True, "force"), "native": (False, "force"), "interp": (False, "0")}


def _best(co, kernel, arch, checks, reps=5):
  """Best of `reps` warm launches, each on fresh arguments (kernels write their outputs in place)."""
  best = None
  for _ in range(reps):
    case = CASES[kernel](np.random.default_rng(0), WAVE[arch])
    secs, st = _timed_launch(co, kernel, case, checks)
    if best is None or secs < best[0]:
      best = (secs, st, case)
  return best


def _numpy_seconds(case, reps=5) -> float:
  best = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    case["ref"]()
    best = min(best, time.perf_counter() - t)
  return best


def cold_child(co: str, kernel: str, arch: str) -> None:
  """Runs in a fresh process: first vs second launch of one workgroup of the kernel."""
  from gputwin.emu.core import keep_heap
  keep_heap()  # as in main(): the allocator setting gputwin's commands use (opt-in, process-wide)
  case = CASES[kernel](np.random.default_rng(0), WAVE[arch])
  case["grid"] = (1, 1, 1)
  first, _ = _timed_launch(co, kernel, case)
  second, _ = _timed_launch(co, kernel, case)
  print(json.dumps({"first": first, "second": second}))


def first_child(co: str, kernel: str, arch: str, mode: str) -> None:
  """Runs in a fresh process: the first launch of the full kernel, and what the native tier compiled or loaded."""
  from gputwin.emu.core import keep_heap
  from gputwin.emu.native import STATS
  keep_heap()
  checks, tier = MODES[mode]
  os.environ["GPUTWIN_JIT"] = tier
  first, _ = _timed_launch(co, kernel, CASES[kernel](np.random.default_rng(1), WAVE[arch]), checks)
  out = dict(STATS, first=first)
  if mode == "native":  # the same blocks' cold (lean) compile, as the default mode compiles a block first
    from gputwin.emu.native import Tier, compile_block
    before = dict(STATS)
    for prog, st in list(Tier.programs.items()):
      for (pc, lanes), blk in list(st.blocks.items()):
        if blk is not None:
          compile_block(prog, pc, lanes, lean=True)
    out["lean"] = {k: STATS[k] - before[k] for k in ("compile_seconds", "compiled_vector_instructions")}
  print(json.dumps(out))


FIRSTS = ("first_launch_seconds", "compile_seconds", "compile_ms_per_vector_instruction",
          "lean_compile_ms_per_vector_instruction", "warm_cache_first_launch_seconds", "warm_cache_compiles")


def first_launches(co: Path, kernel: str, arch: str, mode: str, vendor_cache: Path) -> dict:
  """FIRSTS: the first launch in a fresh process with empty compile caches (vendor tables cached) and its compiles,
  then the first launch in another fresh process with the caches the first one filled (the native tier's included)."""
  out = []
  with tempfile.TemporaryDirectory(prefix="gputwin-first-") as d:
    for p in vendor_cache.glob("amd-tables-*.pkl"):
      shutil.copy(p, d)
    env = {k: v for k, v in os.environ.items() if k != "GPUTWIN_NATIVE_CACHE"}
    env["GPUTWIN_CACHE"] = d
    for _ in range(2):
      r = subprocess.run([sys.executable, __file__, "--first-child", str(co), kernel, arch, mode], env=env,
                         capture_output=True, text=True, check=True)
      out.append(json.loads(r.stdout.strip().splitlines()[-1]))
  cold, warm = out
  per = lambda d: 1e3 * d["compile_seconds"] / max(d["compiled_vector_instructions"], 1)
  return dict(zip(FIRSTS, (cold["first"], cold["compile_seconds"], per(cold), per(cold["lean"]), warm["first"],
                           warm["compiles"])))


def cold_start(co: Path, kernel: str, arch: str, vendor_cache: Path, runs: int = 3) -> float:
  """Best of `runs` fresh processes (a 2-core machine shared with other work moves single samples by 2x)."""
  best = float("inf")
  for _ in range(runs):
    with tempfile.TemporaryDirectory(prefix="gputwin-cold-") as d:
      for p in vendor_cache.glob("amd-tables-*.pkl"):  # vendor tables cached, compile caches empty
        shutil.copy(p, d)
      env = dict(os.environ, GPUTWIN_CACHE=d)
      r = subprocess.run([sys.executable, __file__, "--cold-child", str(co), kernel, arch], env=env,
                         capture_output=True, text=True, check=True)
      t = json.loads(r.stdout.strip().splitlines()[-1])
      best = min(best, max(t["first"] - t["second"], 0.0))
  return best


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--json", action="store_true")
  p.add_argument("--targets", default=",".join(TARGETS))
  p.add_argument("--kernels", default=",".join(CASES))
  p.add_argument("--no-cold", action="store_true", help="skip the fresh-process cold-start measurement")
  p.add_argument("--modes", default=",".join(MODES),
                 help="checks (checkers on: interpreter), native (checkers off: native tier), interp (checkers off, "
                      "interpreter only)")
  p.add_argument("--no-checks", action="store_true", help="same as --modes native,interp")
  p.add_argument("--cold-child", nargs=3, help=argparse.SUPPRESS)
  p.add_argument("--first-child", nargs=4, help=argparse.SUPPRESS)
  a = p.parse_args()
  if a.cold_child:
    cold_child(*a.cold_child)
    return 0
  if a.first_child:
    first_child(*a.first_child)
    return 0
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    print("bench: skipped: clang-22 and ld.lld-22 are needed (apt-get install -y clang-22 lld-22)", file=sys.stderr)
    return 0
  from gputwin.emu.native import STATS
  from gputwin.emu.core import keep_heap
  keep_heap()  # the allocator setting gputwin's commands use (opt-in, process-wide; GPUTWIN_MALLOPT=0: off)
  from gputwin.isa import vendor
  vendor.all_tables()
  vendor_cache = vendor.cache_root()
  modes = ["native", "interp"] if a.no_checks else a.modes.split(",")
  rows = []
  with tempfile.TemporaryDirectory(prefix="gputwin-bench-") as tmp:
    os.environ["GPUTWIN_NATIVE_CACHE"] = str(Path(tmp) / "native")  # this process compiles what it runs
    for arch in a.targets.split(","):
      co = compile_kernels(arch, Path(tmp))
      for kernel in a.kernels.split(","):
        cold = None if a.no_cold else cold_start(co, kernel, arch, vendor_cache)
        for mode in modes:
          checks, tier = MODES[mode]
          firsts = first_launches(co, kernel, arch, mode, vendor_cache) if mode == "native" and not a.no_cold else \
              dict.fromkeys(FIRSTS)
          os.environ["GPUTWIN_JIT"] = tier
          c0 = STATS["compile_seconds"]
          first, _ = _timed_launch(co, kernel, CASES[kernel](np.random.default_rng(1), WAVE[arch]), checks)  # warm-up
          compile_secs = STATS["compile_seconds"] - c0
          n0 = STATS["wave_instructions"]
          secs, st, case = _best(co, kernel, arch, checks)
          native = (STATS["wave_instructions"] - n0) / 5
          np_secs = _numpy_seconds(case)
          ok = bool(np.allclose(case["args"][case["out"]], case["ref"](), rtol=case["tol"], atol=case["tol"]))
          rows.append(dict(kernel=kernel, target=arch, mode=mode, checks=checks, wave_instructions=st.instructions,
                           lane_instructions=st.lane_instructions, seconds=secs,
                           wave_instructions_per_second=st.instructions / secs, native_share=native / st.instructions,
                           warmup_launch_seconds=first, native_compile_seconds=compile_secs, **firsts,
                           cold_start_seconds=cold, numpy_seconds=np_secs, vs_numpy=secs / max(np_secs, 1e-9),
                           correct=ok, peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
          if not a.json:
            r = rows[-1]
            cs = "-" if cold is None else f"{cold * 1e3:.0f} ms"
            fl = "" if r["compile_seconds"] is None else (
              f"  first {r['first_launch_seconds']:.2f} s (compile {r['compile_seconds']:.2f} s, "
              f"{r['compile_ms_per_vector_instruction']:.1f} ms/vector-inst, lean "
              f"{r['lean_compile_ms_per_vector_instruction']:.1f}), warm-cache first "
              f"{r['warm_cache_first_launch_seconds']:.3f} s ({r['warm_cache_compiles']} compiles)")
            print(f"{kernel:7s} {arch:8s} {mode:6s} {r['wave_instructions']:>9d} wave-inst {r['lane_instructions']:>11d} "
                  f"lane-inst {secs:8.4f} s {r['wave_instructions_per_second'] / 1e6:7.2f} M wave-inst/s  "
                  f"native {r['native_share']:4.0%}  cold {cs:>7s}  numpy {np_secs * 1e3:7.3f} ms  "
                  f"x{r['vs_numpy']:7.1f}  rss {r['peak_rss_mib']:.0f} MiB  {'ok' if ok else 'WRONG'}{fl}", flush=True)
  if a.json:
    print(json.dumps(rows, indent=1))
  return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
