"""Emulator throughput, cold start and first launches for every ISA, measured as ratios in one run (issues 8, 20).

    python bench/run.py [--json] [--targets gfx1100,sm_90,a630] [--kernels saxpy,matmul] [--modes checks,native,interp]
                        [--no-cold]

Builds each target's kernels (AMD gfx1100/gfx1200/gfx942/gfx950: kernels.cl with clang-22; NVIDIA sm_90: kernels.cu
to PTX with nvcc 13; Adreno a630/a730: Mesa's ir3 output in ../shared/vendor/ir3/kernels and `ir3_matmul`'s
assembly), runs every kernel on the emulator in each mode (results checked against numpy) and reports wave-/lane-
instructions, launch seconds (warm), the share run natively, cold start (first launch of a never-seen kernel in a
fresh process whose gputwin compile caches are empty but whose vendor tables are cached: first-launch time minus a
second identical launch), peak RSS, and numpy doing the same math. For the native mode also the first launch of the
full kernel in a fresh process with an empty native-code cache (and the LLVM compile seconds in it) and in a second
fresh process with that cache warm. Ends with bench/README.md's table (`--json`: the rows instead).
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

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy single-threaded, as the emulator: before numpy loads
# its BLAS (with a thread per core, a busy core stalls a 256x256 matmul from ~0.2 ms to 10-30 ms)
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
IR3_MESA = HERE.parents[1] / "shared" / "vendor" / "ir3" / "kernels"  # Mesa's ir3 output (saxpy, reduce_shared)
TARGETS = {"gfx1100": "amd", "gfx1200": "amd", "gfx942": "amd", "gfx950": "amd", "sm_90": "ptx", "a630": "ir3",
           "a730": "ir3"}
WAVE = {"gfx942": 64, "gfx950": 64}  # (32 elsewhere) the gemm kernels run one wave per workgroup


def _saxpy(rng, arch, code):
  n = 1 << 20
  x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  a = np.float32(1.5)
  ref = lambda: a * x + y  # clang and nvcc contract to one fma: a 1-ulp difference from numpy's mul+add is expected
  if TARGETS[arch] == "ir3":  # Mesa's saxpy.comp: a and n in UBO 4, local size 64
    ubo = np.zeros(16, np.uint32)
    ubo[0], ubo[1] = a.view(np.uint32), n
    return dict(code=Path(code) / "saxpy.bin", args={0: x, 1: y.copy(), 4: ubo}, grid=(n // 64, 1, 1), ref=ref,
                out=1, tol=1e-6)
  return dict(args=[a, x, y.copy()] + [np.int32(n)] * (TARGETS[arch] == "ptx"), grid=(n // 256, 1, 1),
              block=(256, 1, 1), ref=ref, out=2, tol=1e-6)


def _matmul(rng, arch, code):
  n = 256
  A, B = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
  case = dict(grid=(n // 16, n // 16, 1), ref=lambda: A @ B, out=2, tol=1e-3)
  if TARGETS[arch] == "ir3":
    from gputwin.isa.ir3 import assemble, listing
    code = assemble(ir3_matmul(n), arch)
    return dict(case, code=code, shader=listing.Shader.explicit(arch, code, local_size=(16, 16, 1), shared_size=2048),
                args={0: A, 1: B, 2: np.zeros((n, n), np.float32)})
  return dict(case, args=[A, B, np.zeros((n, n), np.float32), np.int32(n)], block=(16, 16, 1))


def _reduce(rng, arch, code):
  n = 1 << 18
  x = rng.standard_normal(n).astype(np.float32)
  if TARGETS[arch] == "ir3":  # Mesa's reduce_shared.comp: local size 128
    return dict(code=Path(code) / "reduce_shared.bin", args={0: x, 1: np.zeros(n // 128, np.float32)},
                grid=(n // 128, 1, 1), ref=lambda: x.reshape(-1, 128).sum(axis=1), out=1, tol=1e-4)
  return dict(args=[x, np.zeros(n // 256, np.float32)], grid=(n // 256, 1, 1), block=(256, 1, 1),
              ref=lambda: x.reshape(-1, 256).sum(axis=1), out=1, tol=1e-4)


def _gemm(rng, arch, code):
  m = n = 128
  k = 64
  A, B = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((n, k)).astype(np.float16)
  return dict(args=[A, B, np.zeros((m, n), np.float32), np.int32(k), np.int32(n)], grid=(m // 16, n // 16, 1),
              block=(WAVE.get(arch, 32), 1, 1), ref=lambda: A.astype(np.float32) @ B.astype(np.float32).T, out=2,
              tol=1e-3)


CASES = {"saxpy": _saxpy, "matmul": _matmul, "reduce": _reduce, "gemm": _gemm}
KERNELS = {"amd": tuple(CASES), "ptx": tuple(CASES), "ir3": ("saxpy", "matmul", "reduce")}  # (ir3: no matrix unit)


def make_case(arch: str, kernel: str, code: str, seed: int) -> dict:
  """What one launch of `kernel` on `arch` needs (code, entry, grid, block, args, shader) and how to check it (the
  numpy reference `ref`, the output `args[out]`, tolerance `tol`); `code` is what `build` made for the target."""
  case = CASES[kernel](np.random.default_rng(seed), arch, code)
  case.setdefault("code", code)
  return dict(dict(entry="main" if TARGETS[arch] == "ir3" else kernel, block=None, shader=None), **case)


def ir3_matmul(n: int) -> str:
  """ir3 assembly of C = A @ B (n x n f32, n a multiple of 16; IBOs 0, 1, 2): 16x16 workgroups stage a tile of A
  and of B in shared memory (bytes 0..1023 and 1024..2047), `bar`, 16 mad.f32 per fiber, `bar`, next tile."""
  ld = lambda d, c, b: f"ldib.b.untyped.1d.u32.1.imm.base0 {d}, {c}, {b}\n"
  inner = "".join(f"ldl.u32 r5.x, l[r1.w{f'+{4 * k}' if k else ''}], 1\nldl.u32 r5.y, l[r2.x+{1024 + 64 * k}], 1\n"
                  f"(ss)mad.f32 r3.x, r5.x, r5.y, r3.x\n" for k in range(16))
  lg = n.bit_length() - 1
  return ("shl.b r1.x, r48.y, 4\nadd.u r1.x, r1.x, r0.y\nshl.b r1.y, r48.x, 4\nadd.u r1.y, r1.y, r0.x\n"
          "shl.b r1.z, r0.y, 4\nadd.u r1.z, r1.z, r0.x\nshl.b r1.z, r1.z, 2\nshl.b r1.w, r0.y, 6\n"
          "shl.b r2.x, r0.x, 2\nmov.u32u32 r2.y, 0\nmov.u32u32 r3.x, 0\n"
          "tile:\n"
          f"shl.b r2.z, r1.x, {lg}\nadd.u r2.z, r2.z, r2.y\nadd.u r2.z, r2.z, r0.x\n"
          f"add.u r2.w, r2.y, r0.y\nshl.b r2.w, r2.w, {lg}\nadd.u r2.w, r2.w, r1.y\n" +
          ld("r4.x", "r2.z", 0) + ld("r4.y", "r2.w", 1) +
          "(sy)stl.u32 l[r1.z], r4.x, 1\nstl.u32 l[r1.z+1024], r4.y, 1\n(ss)bar\n" + inner +
          f"bar\nadd.u r2.y, r2.y, 16\ncmps.u.lt p0.x, r2.y, {n}\nbr p0.x, #tile\n"
          f"shl.b r2.z, r1.x, {lg}\nadd.u r2.z, r2.z, r1.y\n"
          "stib.b.untyped.1d.u32.1.imm.base0 r3.x, r2.z, 2\nend\n")


def build(arch: str, out: Path) -> str | None:
  """The target's code, or None (said on stderr) when its compiler or kernels are missing: AMD a code object from
  kernels.cl (clang-22, ld.lld-22), sm_90 a PTX module from kernels.cu (nvcc), ir3 the folder of Mesa's output."""
  family, tools = TARGETS[arch], {"amd": ("clang-22", "ld.lld-22"), "ptx": ("nvcc",), "ir3": ()}[TARGETS[arch]]
  missing = [t for t in tools if not shutil.which(t)] + ([str(IR3_MESA)] * (family == "ir3" and not IR3_MESA.is_dir()))
  if missing:
    print(f"bench: {arch} skipped: {', '.join(missing)} missing", file=sys.stderr)
    return None
  if family == "ir3":
    return str(IR3_MESA / arch)
  if family == "ptx":
    ptx = out / f"bench-{arch}.ptx"
    subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-O3", str(HERE / "kernels.cu"), "-o", str(ptx)], check=True)
    return str(ptx)
  o, co = out / f"bench-{arch}.o", out / f"bench-{arch}.co"
  subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib",
                  "-O2", "-w", "-c", str(HERE / "kernels.cl"), "-o", str(o)], check=True)
  subprocess.run(["ld.lld-22", "-shared", str(o), "-o", str(co)], check=True)
  return str(co)


def _timed_launch(arch, case, checks=True):
  from gputwin.emu import launch
  t = time.perf_counter()
  st = launch(case["code"], case["entry"], grid=case["grid"], block=case["block"], args=case["args"], arch=arch,
              shader=case["shader"], checks=checks)
  return time.perf_counter() - t, st


# what a row measures: (checkers on?, GPUTWIN_JIT). checks is launch() as it defaults, its blocks compiled at first
# sight like native's (the checkers run in the native tier; ir3's (ss)/(sy) sync checker keeps the interpreter).
MODES = {"checks": (True, "force"), "native": (False, "force"), "interp": (False, "0")}


def _best(arch, kernel, code, checks, reps=5):
  """Best of `reps` warm launches, each on fresh arguments (kernels write their outputs in place)."""
  best = None
  for _ in range(reps):
    case = make_case(arch, kernel, code, 0)
    secs, st = _timed_launch(arch, case, checks)
    if best is None or secs < best[0]:
      best = (secs, st, case)
  return best


def _numpy_seconds(case, reps=20) -> float:
  best = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    case["ref"]()
    best = min(best, time.perf_counter() - t)
  return best


def cold_child(code: str, kernel: str, arch: str) -> None:
  """Runs in a fresh process: first vs second launch of one workgroup of the kernel."""
  from gputwin.emu.core import keep_heap
  keep_heap()  # as in main(): the allocator setting gputwin's commands use (opt-in, process-wide)
  case = make_case(arch, kernel, code, 0)
  case["grid"] = (1, 1, 1)
  first, _ = _timed_launch(arch, case)
  second, _ = _timed_launch(arch, case)
  print(json.dumps({"first": first, "second": second}))


def first_child(code: str, kernel: str, arch: str, mode: str) -> None:
  """Runs in a fresh process: the first launch of the full kernel, and what the native tier compiled or loaded."""
  from gputwin.emu.core import keep_heap
  from gputwin.emu.native import STATS
  keep_heap()
  checks, tier = MODES[mode]
  os.environ["GPUTWIN_JIT"] = tier
  first, _ = _timed_launch(arch, make_case(arch, kernel, code, 1), checks)
  out = dict(STATS, first=first)
  if mode == "native":  # the same blocks' cold (lean) compile, as the default mode compiles a block first
    from gputwin.emu.native import Tier, compile_block
    before = dict(STATS)
    for prog, st in list(Tier.programs.items()):
      for (pc, lanes, log, *_), blk in list(st.blocks.items()):
        if blk is not None:
          compile_block(prog, pc, lanes, lean=True, log=log)
    out["lean"] = {k: STATS[k] - before[k] for k in ("compile_seconds", "compiled_vector_instructions")}
  print(json.dumps(out))


def _bytecode() -> None:
  """Compiles gputwin's modules to bytecode once per run (into __pycache__, as an installed package has them), for
  the fresh processes, which may write it too: a host may set PYTHONDONTWRITEBYTECODE, as this one does, and then
  every fresh process compiled the modules a launch imports (~50 ms of a cold start)."""
  subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "gputwin")], check=True,
                 capture_output=True, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})


def _fresh(flag: str, code: str, kernel: str, arch: str, vendor_cache: Path, runs: int, *rest: str) -> list[dict]:
  """`runs` fresh processes running this script with `flag`, in turn, sharing one gputwin cache folder that starts
  with the vendor tables only (every compile cache empty); each one's last stdout line, parsed."""
  out = []
  with tempfile.TemporaryDirectory(prefix="gputwin-fresh-") as d:
    for p in vendor_cache.glob("*-tables-*.pkl"):
      shutil.copy(p, d)
    # (as a user's process starts: the default tier, whatever mode the row measured last set here)
    env = {k: v for k, v in os.environ.items() if k not in ("GPUTWIN_NATIVE_CACHE", "PYTHONDONTWRITEBYTECODE",
                                                            "GPUTWIN_JIT")}
    env["GPUTWIN_CACHE"] = d
    for _ in range(runs):
      r = subprocess.run([sys.executable, __file__, flag, code, kernel, arch, *rest], env=env, capture_output=True,
                         text=True, check=True)
      out.append(json.loads(r.stdout.strip().splitlines()[-1]))
  return out


FIRSTS = ("first_launch_seconds", "compile_seconds", "compile_ms_per_vector_instruction",
          "lean_compile_ms_per_vector_instruction", "warm_cache_first_launch_seconds", "warm_cache_compiles")


def first_launches(code: str, kernel: str, arch: str, mode: str, vendor_cache: Path) -> dict:
  """FIRSTS: the first launch in a fresh process with empty compile caches (vendor tables cached) and its compiles,
  then the first launch in another fresh process with the caches the first one filled (the native tier's included)."""
  cold, warm = _fresh("--first-child", code, kernel, arch, vendor_cache, 2, mode)
  per = lambda d: 1e3 * d["compile_seconds"] / d["compiled_vector_instructions"] if d["compiled_vector_instructions"] \
      else None  # (nothing compiled: a kernel the tier leaves to the interpreter)
  return dict(zip(FIRSTS, (cold["first"], cold["compile_seconds"], per(cold), per(cold["lean"]), warm["first"],
                           warm["compiles"])))


def cold_start(code: str, kernel: str, arch: str, vendor_cache: Path, runs: int = 3) -> float:
  """Best of `runs` fresh processes, each with empty compile caches (a 2-core machine shared with other work moves
  single samples by 2x)."""
  return min(max(t["first"] - t["second"], 0.0)
             for _ in range(runs) for t in _fresh("--cold-child", code, kernel, arch, vendor_cache, 1))


def measure(arch: str, kernel: str, code: str, mode: str, cold, vendor_cache: Path | None) -> dict:
  """One row: `kernel` on `arch` in `mode`, warm (best of 5 after a warm-up launch) and, when `vendor_cache` is
  given and the mode is native, its first launches in fresh processes."""
  from gputwin.emu.native import STATS
  checks, tier = MODES[mode]
  firsts = first_launches(code, kernel, arch, mode, vendor_cache) if mode == "native" and vendor_cache else \
      dict.fromkeys(FIRSTS)
  os.environ["GPUTWIN_JIT"] = tier
  c0 = STATS["compile_seconds"]
  first, _ = _timed_launch(arch, make_case(arch, kernel, code, 1), checks)  # warm-up
  compile_secs = STATS["compile_seconds"] - c0
  secs, st, case = _best(arch, kernel, code, checks)
  np_secs = _numpy_seconds(case)
  ok = bool(np.allclose(case["args"][case["out"]], case["ref"](), rtol=case["tol"], atol=case["tol"]))
  return dict(kernel=kernel, target=arch, mode=mode, checks=checks, wave_size=st.wave_size,
              wave_instructions=st.instructions, lane_instructions=st.lane_instructions, seconds=secs,
              wave_instructions_per_second=st.instructions / secs,
              native_share=st.native_instructions / max(st.instructions, 1), warmup_launch_seconds=first,
              native_compile_seconds=compile_secs, **firsts, cold_start_seconds=cold, numpy_seconds=np_secs,
              vs_numpy=secs / max(np_secs, 1e-9), correct=ok,
              peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _ms(v, digits: int = 1) -> str:
  return "-" if v is None else f"{v:.{digits}f}"


def _line(r: dict) -> str:
  cs = "-" if r["cold_start_seconds"] is None else f"{r['cold_start_seconds'] * 1e3:.0f} ms"
  fl = "" if r["compile_seconds"] is None else (
    f"  first {r['first_launch_seconds']:.2f} s (compile {r['compile_seconds']:.2f} s, "
    f"{_ms(r['compile_ms_per_vector_instruction'])} ms/vector-inst, lean "
    f"{_ms(r['lean_compile_ms_per_vector_instruction'])}), warm-cache first "
    f"{r['warm_cache_first_launch_seconds']:.3f} s ({r['warm_cache_compiles']} compiles)")
  return (f"{r['kernel']:7s} {r['target']:8s} {r['mode']:6s} {r['wave_instructions']:>9d} wave-inst "
          f"{r['lane_instructions']:>11d} lane-inst {r['seconds']:8.4f} s "
          f"{r['wave_instructions_per_second'] / 1e6:7.2f} M wave-inst/s  native {r['native_share']:6.1%}  "
          f"cold {cs:>7s}  numpy {r['numpy_seconds'] * 1e3:7.3f} ms  x{r['vs_numpy']:7.1f}  "
          f"rss {r['peak_rss_mib']:.0f} MiB  {'ok' if r['correct'] else 'WRONG'}{fl}")


def table(rows: list[dict]) -> str:
  """bench/README.md's table: one line per kernel and target, the modes side by side."""
  by = {}
  for r in rows:
    by.setdefault((r["kernel"], r["target"]), {})[r["mode"]] = r
  modes = [m for m in MODES if any(m in v for v in by.values())]
  s = lambda r: "-" if r is None else f"{r['seconds']:.4f} ({r['wave_instructions_per_second'] / 1e6:.1f})"
  head = ["kernel", "target", "wave", "wave-inst"] + [f"{m}: s (M/s)" for m in modes] + [
    "checks / native", "native share: checks, native", "numpy ms", "native vs numpy", "cold start",
    "first launch (compile)", "compile ms/vector-inst: full, lean", "warm-cache first launch", "= numpy"]
  out = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
  for (kernel, arch), v in by.items():
    any_r, c, n = next(iter(v.values())), v.get("checks"), v.get("native")
    share = ", ".join(f"{v[m]['native_share']:.1%}" if m in v else "-" for m in ("checks", "native"))
    first = ("-",) * 3 if n is None or n["first_launch_seconds"] is None else (
      f"{n['first_launch_seconds']:.2f} s ({n['compile_seconds']:.2f} s)",
      f"{_ms(n['compile_ms_per_vector_instruction'], 0)}, {_ms(n['lean_compile_ms_per_vector_instruction'], 0)}",
      f"{n['warm_cache_first_launch_seconds'] * 1e3:.0f} ms ({n['warm_cache_compiles']} compiles)")
    cells = [kernel, arch, str(any_r["wave_size"]), f"{any_r['wave_instructions']:,}"] + [s(v.get(m)) for m in modes]
    cells += ["-" if c is None or n is None else f"{c['seconds'] / n['seconds']:.1f}x", share,
              f"{any_r['numpy_seconds'] * 1e3:.3f}", "-" if n is None else f"{n['vs_numpy']:.0f}x",
              "-" if any_r["cold_start_seconds"] is None else f"{any_r['cold_start_seconds'] * 1e3:.0f} ms", *first,
              "yes" if all(r["correct"] for r in v.values()) else "NO"]
    out.append("| " + " | ".join(cells) + " |")
  return "\n".join(out)


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--json", action="store_true")
  p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset of " + ",".join(TARGETS))
  p.add_argument("--kernels", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES) +
                 " (a target without the kernel skips it)")
  p.add_argument("--no-cold", action="store_true", help="skip the fresh-process measurements (cold start, first "
                 "launches)")
  p.add_argument("--modes", default=",".join(MODES),
                 help="checks (checkers on, as launch() defaults), native (checkers off), interp (checkers off, "
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
  modes = ["native", "interp"] if a.no_checks else a.modes.split(",")
  targets, kernels = a.targets.split(","), a.kernels.split(",")
  bad = [x for x in targets if x not in TARGETS] + [k for k in kernels if k not in CASES] + \
      [m for m in modes if m not in MODES]
  if bad:
    p.error(f"unknown {', '.join(bad)}")
  from gputwin.emu.core import keep_heap
  keep_heap()  # the allocator setting gputwin's commands use (opt-in, process-wide; GPUTWIN_MALLOPT=0: off)
  from gputwin.isa import vendor
  vendor.all_tables()
  vendor_cache = vendor.cache_root()
  if not a.no_cold:
    _bytecode()
  rows = []
  with tempfile.TemporaryDirectory(prefix="gputwin-bench-") as tmp:
    os.environ["GPUTWIN_NATIVE_CACHE"] = str(Path(tmp) / "native")  # this process compiles what it runs
    for arch in targets:
      code = build(arch, Path(tmp))
      for kernel in [k for k in kernels if k in KERNELS[TARGETS[arch]]] if code else ():
        cold = None if a.no_cold else cold_start(code, kernel, arch, vendor_cache)
        got = [measure(arch, kernel, code, mode, cold, None if a.no_cold else vendor_cache) for mode in modes]
        best = min(r["numpy_seconds"] for r in got)  # (numpy's BLAS threads stall on busy cores: samples swing 100x)
        for r in got:
          r.update(numpy_seconds=best, vs_numpy=r["seconds"] / max(best, 1e-9))
        rows += got
        if not a.json:
          print("\n".join(map(_line, got)), flush=True)
  print(json.dumps(rows, indent=1) if a.json else "\n" + table(rows))
  return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
