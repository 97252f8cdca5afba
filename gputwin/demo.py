"""`gputwin demo`: the main job on an embedded default.

1. Kernels: the compiler's embedded demo kernels (saxpy, reduction, tiled matmul, softmax) are compiled for
   every AMD and NVIDIA target with both backends (direct assembly/PTX and LLVM), launched through the HCQ runtime
   on a mock device (AMD: KFD, PM4 ring -> command processor -> emulator; NVIDIA: RM/UVM, GPFIFO -> QMD -> PTX
   emulator) and compared with numpy.
2. ISA: one hand-written saxpy per target is assembled, disassembled and re-assembled; where llvm-mc-22 is
   installed gputwin's bytes are also compared with its encoding.
3. NVIDIA: an embedded CUDA file (saxpy, a warp-shuffle block reduction, a recursive call) compiled by nvcc for
   sm_80 and sm_90 (skipped, not failed, without nvcc) runs through the runtime on a mock NVIDIA GPU and is
   compared with numpy.
Exits non-zero on any mismatch.
"""
from __future__ import annotations

import shutil
import subprocess
import time

from gputwin.isa.targets import TARGETS, target

# One saxpy body per ISA spelling. Loads: kernarg s[0:1] -> x ptr s[4:5], y ptr s[6:7], a in s8.
_RDNA3 = """
  s_load_b128 s[4:7], s[0:1], 0x0
  s_load_b32 s8, s[0:1], 0x10
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[4:5]
  global_load_b32 v3, v1, s[6:7]
  s_waitcnt vmcnt(0)
  v_fmac_f32 v3, s8, v2
  global_store_b32 v1, v3, s[6:7]
  s_endpgm
"""
_RDNA4 = _RDNA3.replace("s_waitcnt lgkmcnt(0)", "s_wait_kmcnt 0x0").replace("s_waitcnt vmcnt(0)", "s_wait_loadcnt 0x0")
_CDNA = """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_load_dword s8, s[0:1], 0x10
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_dword v2, v1, s[4:5]
  global_load_dword v3, v1, s[6:7]
  s_waitcnt vmcnt(0)
  v_fmac_f32 v3, s8, v2
  global_store_dword v1, v3, s[6:7]
  s_endpgm
"""
KERNELS = {"rdna3": _RDNA3, "rdna4": _RDNA4, "cdna": _CDNA}


def llvm_mc_bytes(text: str, arch: str) -> bytes | None:
  """Encode with llvm-mc-22 (None when it is not installed)."""
  exe = shutil.which("llvm-mc-22")
  if exe is None:
    return None
  out = subprocess.run([exe, "-triple=amdgcn", f"-mcpu={arch}", "-show-encoding"], input=text, text=True,
                       capture_output=True, check=True).stdout
  enc = [ln.split("encoding: [", 1)[1].split("]", 1)[0] for ln in out.splitlines() if "encoding: [" in ln]
  return bytes(int(b, 16) for e in enc for b in e.split(","))


def run_kernels(console) -> int:
  """Compile -> runtime -> mock KFD / RM / kgsl -> emulator for every demo kernel x target x backend (Adreno: the ir3
  backend, direct only); returns failures."""
  from rich.table import Table

  from gputwin import runtime
  from gputwin.compiler import BACKENDS, NV_TARGETS, TARGETS as COMPILER_TARGETS
  IR3_DEMO = ("a630", "a730")     # Adreno: the ir3 backend (direct only) -> runtime/qcom -> mock kgsl -> emulator
  from gputwin.compiler.examples import DEMO, check_example
  table = Table(title="gputwin demo: compiled kernels on mock GPUs (runtime -> PM4 / GPFIFO -> emulator) vs numpy",
                caption="ulp: largest distance from numpy's float64 result (sums in another order)")
  for col in ("target", "backend", *DEMO, "ms"):
    table.add_column(col, justify="right" if col == "ms" else "left")
  failures = 0
  from gputwin.compiler.backend_ir3 import shader_for
  for name in (*COMPILER_TARGETS, *NV_TARGETS, *IR3_DEMO):
    dev = runtime.open(f"mock:{name}")
    ir3 = name in IR3_DEMO
    launch = (lambda co, k, dev=dev, **kw: dev.launch(co, k, shader=shader_for(co), **kw)) if ir3 else dev.launch
    try:
      for backend in ("direct",) if ir3 else BACKENDS:
        cells, t0 = [], time.perf_counter()
        for k in DEMO:
          try:
            r = check_example(k, name, backend, launch)
            what = f"{r['max_ulp']} ulp" if "max_ulp" in r else "exact"
            cells.append(f"[green]ok[/] {what}" if r["ok"] else f"[red]WRONG[/] {what}")
            failures += not r["ok"]
          except Exception as e:  # report per cell, keep going
            failures += 1
            cells.append(f"[red]{type(e).__name__}: {str(e)[:60]}")
        table.add_row(name, backend, *cells, f"{(time.perf_counter() - t0) * 1e3:.0f}")
    finally:
      dev.close()
  console.print(table)
  return failures


def run_ptx(console) -> int:
  """The embedded CUDA kernels: nvcc -> PTX -> runtime -> mock NVIDIA GPU (sm_80, sm_90) vs numpy; returns
  failures."""
  import numpy as np
  from rich.table import Table

  from gputwin import runtime
  from gputwin.verify.hw import DEMO_CUDA
  table = Table(title="gputwin demo: CUDA kernels, nvcc -> PTX -> runtime -> mock RM/UVM -> GPFIFO/QMD -> emulator "
                "vs numpy")
  for col in ("target", "saxpy", "block_sum", "fibs", "ms"):
    table.add_column(col, justify="right" if col == "ms" else "left")
  if shutil.which("nvcc") is None:
    table.add_row("sm_80, sm_90", "[yellow]nvcc not installed: skipped", "", "", "")
    console.print(table)
    return 0
  from gputwin.verify.runner import nvcc_ptx
  rng, failures = np.random.default_rng(0), 0
  x, y = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4096).astype(np.float32)
  ints = rng.integers(-1000, 1000, 8 * 256).astype(np.int32)
  fib = [0, 1]
  while len(fib) < 16:
    fib.append(fib[-1] + fib[-2])
  for arch in ("sm_80", "sm_90"):
    t0, cells = time.perf_counter(), []
    try:
      with runtime.open(f"mock:{arch}") as dev:
        prg = dev.load(nvcc_ptx(DEMO_CUDA, arch))
        y1, sums, fibs = y.copy(), np.zeros(8, np.int32), np.zeros(64, np.int32)
        for kernel, grid, block, args, ok in (
            ("saxpy", 16, 256, [np.float32(2), x, y1, np.int32(4096)],
             lambda: np.array_equal(y1, np.float32(2) * x + y)),  # (nvcc fuses it: by 2 the product is exact either way)
            ("block_sum", 8, 256, [ints, sums], lambda: np.array_equal(sums, ints.reshape(8, 256).sum(axis=1))),
            ("fibs", 1, 64, [fibs], lambda: fibs.tolist() == [fib[t % 16] for t in range(64)])):
          dev.launch(prg, kernel, grid=grid, block=block, args=args)
          cells.append("[green]ok" if ok() else "[red]WRONG")
          failures += not ok()
    except Exception as e:  # report per target, keep going
      failures += 1
      cells = [f"[red]{type(e).__name__}: {str(e)[:60]}", "", ""]
    table.add_row(arch, *cells, f"{(time.perf_counter() - t0) * 1e3:.0f}")
  console.print(table)
  return failures


def run_demo(console=None) -> int:
  from rich.console import Console
  console = console or Console()
  failures = run_kernels(console) + run_isa(console) + run_ptx(console)
  console.print("[green]all kernels and targets agree" if not failures else f"[red]{failures} failure(s)")
  return 1 if failures else 0


def run_isa(console) -> int:
  from rich.table import Table

  from gputwin.isa import assemble, disassemble
  table = Table(title="gputwin demo: embedded saxpy kernel, assemble -> disassemble -> assemble")
  for col in ("target", "ISA", "instructions", "bytes", "round trip", "vs llvm-mc-22", "ms"):
    table.add_column(col, justify="right" if col in ("instructions", "bytes", "ms") else "left")
  failures = 0
  for name in TARGETS:
    tgt = target(name)
    t0 = time.perf_counter()
    try:
      code = assemble(KERNELS[tgt.family], name)
      lines = disassemble(code, name)
      again = assemble("\n".join(lines), name)
      rt = "[green]ok" if again == code else "[red]MISMATCH"
      ref = llvm_mc_bytes(KERNELS[tgt.family], name)
      vs = "[yellow]not installed" if ref is None else ("[green]identical" if ref == code else "[red]DIFFERS")
      failures += (again != code) + (ref is not None and ref != code)
      table.add_row(name, tgt.isa, str(len(lines)), str(len(code)), rt, vs, f"{(time.perf_counter() - t0) * 1e3:.1f}")
    except Exception as e:  # report per target, keep going
      failures += 1
      table.add_row(name, tgt.isa, "-", "-", f"[red]{type(e).__name__}", f"[red]{e}", "-")
  console.print(table)
  return failures
