"""Real hardware against the emulator, bit for bit: `python -m gputwin.verify.hw nv`.

    python -m gputwin.verify.hw nv                       # /dev/nvidia0 through gputwin.runtime.nv (needs the driver)
    python -m gputwin.verify.hw nv --device mock:sm_90   # the same script on the mock driver
    python -m gputwin.verify.hw nv --prepare DIR --arch sm_90   # build PTX (nvcc) + program images (ptxas) into DIR
    python -m gputwin.verify.hw nv --from DIR            # on a machine with only the driver: use DIR's images
(default DIR: $GPUTWIN_HW_DIR, else build/hw in the checkout)

Runs the CUDA kernel suite (tests/emu/ptx: kernels/*.cu, the cases of cases.py) and `gputwin demo`'s CUDA kernels
through our own runtime (RM/UVM ioctls, GPFIFO, QMDs: the same code that drives the mock) and through
gputwin.emu.launch, and prints one row per kernel: identical bytes, or where they differ; plus whether the GPU's
output passes the suite's oracle (for kernels whose output depends on the schedule, atomics' returned values, the
oracle decides). Without NVIDIA hardware (no /dev/nvidiactl) it says so and exits 0.
"""
from __future__ import annotations

import argparse
import copy
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "emu" / "ptx" / "kernels"
# the CUDA kernels `gputwin demo` runs (saxpy, a warp-shuffle block reduction, a recursive call); compared here too
DEMO_CUDA = r"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void block_sum(const int *x, int *out) {
  __shared__ int part[32];
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) { int s = 0; for (int w = 0; w < blockDim.x / 32; w++) s += part[w]; out[blockIdx.x] = s; }
}
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
extern "C" __global__ void fibs(int *out) { out[threadIdx.x] = fib(threadIdx.x % 16); }
"""


def _sources() -> dict[str, str]:
  """CUDA sources by name: the suite's files and the demo's kernels (DEMO_CUDA)."""
  out = {p.stem: p.read_text() for p in sorted(KERNELS.glob("*.cu"))}
  out["demo"] = DEMO_CUDA
  return out


def prepare(d: Path, arch: str, ptxas: bool = True) -> dict[str, tuple[str, bytes]]:
  """{source: (PTX, program image)} for `arch`: read from `d` when there, else compiled (nvcc -ptx -O3, then
  gputwin.isa.ptx.cubin.build: ptxas for a real GPU) and written there."""
  from gputwin.isa.ptx import cubin
  from gputwin.verify.runner import nvcc_ptx
  d.mkdir(parents=True, exist_ok=True)
  out = {}
  for name, src in _sources().items():
    p, c = d / f"{name}-{arch}.ptx", d / f"{name}-{arch}{'.cubin' if ptxas else '.mock.elf'}"
    if not p.exists(): p.write_text(nvcc_ptx(src, arch))
    if not c.exists(): c.write_bytes(cubin.build(p.read_text(), arch, ptxas=ptxas))
    out[name] = (p.read_text(), c.read_bytes())
  return out


def _cases(arch: str) -> list:
  """(source, kernel, grid, block, shared bytes, args builder, oracle or None) per kernel."""
  sys.path.insert(0, str(ROOT))
  from tests.emu.ptx.cases import CASES
  out = [(c.file, c.kernel, c.grid, c.block, c.shared_bytes, (lambda c=c: c.build(c.rng())), c)
         for c in CASES if arch in c.archs]
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4096).astype(np.float32)
  ints = rng.integers(-1000, 1000, 8 * 256).astype(np.int32)
  fib = [0, 1]
  while len(fib) < 16: fib.append(fib[-1] + fib[-2])
  out += [("demo", "saxpy", 16, 256, 0, lambda: [np.float32(2), x.copy(), y.copy(), np.int32(4096)],
           lambda g: np.array_equal(g[2], np.float32(2) * x + y)),   # (by 2 the product is exact: fused or not)
          ("demo", "block_sum", 8, 256, 0, lambda: [ints.copy(), np.zeros(8, np.int32)],
           lambda g: np.array_equal(g[1], ints.reshape(8, 256).sum(axis=1))),
          ("demo", "fibs", 1, 64, 0, lambda: [np.zeros(64, np.int32)],
           lambda g: g[0].tolist() == [fib[t % 16] for t in range(64)])]
  return out


def _oracle(case, got) -> str:
  if case is None: return ""
  if callable(case): return "ok" if case(got) else "FAIL"
  try: from tests.emu.ptx.test_kernels import compare   # (needs pytest)
  except ImportError: return "n/a"
  want = case.ref(copy.deepcopy(case.build(case.rng())))
  try:
    compare(case, got, want)
    return "ok"
  except AssertionError as e:
    return f"FAIL: {str(e).splitlines()[0][:80]}"


def _diff(a: list, b: list) -> str:
  """'' when every array argument has the same bytes, else where the first difference is."""
  for i, (x, y) in enumerate((x, y) for x, y in zip(a, b) if isinstance(x, np.ndarray)):
    if x.tobytes() != y.tobytes():
      bad = np.flatnonzero(x.view(np.uint8).ravel() != y.view(np.uint8).ravel()) // x.itemsize
      j = int(bad[0])
      return (f"array {i}: {len(np.unique(bad))}/{x.size} elements differ, first [{j}]: "
              f"gpu {x.ravel()[j]!r} emu {y.ravel()[j]!r}")
  return ""


def run(device: str, data: Path | None, only: set[str] | None = None) -> int:
  from rich.console import Console
  from rich.table import Table
  import gputwin.runtime as rt
  from gputwin.emu import launch
  con = Console()
  dev = rt.open(device)
  real = getattr(dev, "real", False)
  try:
    arch = dev.arch
    have_cc = shutil.which("nvcc") and shutil.which("ptxas")
    if data is None and not have_cc:
      con.print("[red]no nvcc/ptxas here: pass --from DIR made with --prepare DIR on a machine that has them")
      return 2
    progs = prepare(data or Path(os.environ.get("GPUTWIN_HW_DIR", ROOT / "build" / "hw")), arch, ptxas=real)
    t = Table(title=f"{dev} vs gputwin.emu.launch ({arch}): bytes of every output array")
    for col in ("source", "kernel", "GPU vs emulator", "oracle (GPU)", "ms"): t.add_column(col)
    same = differ = failed = 0
    for src, kern, grid, block, shared, build, case in _cases(arch):
      if only and kern not in only and src not in only: continue
      text, image = progs[src]
      t0, a = time.perf_counter(), build()
      b = copy.deepcopy(a)
      try:
        dev.launch(image, kern, grid=grid, block=block, args=a, shared_bytes=shared)
        launch(text, kern, grid=grid, block=block, args=b, arch=arch, shared_bytes=shared, checks=False)
        d = _diff(a, b)
        verdict = "[green]identical" if not d else f"[yellow]{d}"
        same, differ = same + (not d), differ + bool(d)
        orc = _oracle(case, a)
      except Exception as e:   # one row per kernel, keep going (a faulted channel: reopen the device)
        failed += 1
        verdict, orc = f"[red]{type(e).__name__}: {str(e)[:100]}", ""
        if isinstance(e, rt.QueueFault):
          dev.close()
          dev = rt.open(device)
      t.add_row(src, kern, verdict, orc, f"{(time.perf_counter() - t0) * 1e3:.0f}")
    con.print(t)
    con.print(f"{same} identical, {differ} differ, {failed} failed ({'real GPU' if real else 'mock'} {device})")
    return 0 if not (differ or failed) else 1
  finally:
    dev.close()


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m gputwin.verify.hw", description=__doc__.split("\n")[0])
  p.add_argument("vendor", choices=["nv"], help="which hardware (NVIDIA: nv)")
  p.add_argument("--device", default="nv", help="runtime device string (default nv = /dev/nvidia0)")
  p.add_argument("--from", dest="data", type=Path, help="directory of prepared PTX and program images")
  p.add_argument("--prepare", type=Path, help="only build PTX + program images into this directory")
  p.add_argument("--arch", default="sm_90", help="target for --prepare")
  p.add_argument("--only", help="comma-separated kernel or source names")
  a = p.parse_args(argv)
  if a.prepare:
    prepare(a.prepare, a.arch)
    print(f"prepared {a.arch} PTX and program images in {a.prepare}")
    return 0
  if not a.device.startswith("mock:") and not os.path.exists("/dev/nvidiactl"):
    print("gputwin.verify.hw nv: no NVIDIA GPU on this machine (/dev/nvidiactl absent): skipped")
    return 0
  return run(a.device, a.data, set(a.only.split(",")) if a.only else None)


if __name__ == "__main__":
  sys.exit(main())
