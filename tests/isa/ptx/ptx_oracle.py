"""Helpers of the PTX ISA tests: which kernels are compiled how, and ptxas as the accept/reject oracle."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gputwin.verify.reliability import PTX_SOURCES

KERNELS = PTX_SOURCES   # our CUDA kernels: the reliability suite's PTX corpus, shipped as package data
VENDOR_PTX = Path(__file__).resolve().parents[3].parent / "shared" / "vendor" / "ptx"
HAVE_CUDA = bool(shutil.which("nvcc") and shutil.which("ptxas"))
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="nvcc/ptxas (CUDA 13) not installed")

# (kernel, arch, extra nvcc flags): every kernel for sm_80 and sm_90 at -O3, plus -G / -lineinfo builds of a few.
VARIANTS = [(k.stem, a, "-O3") for k in sorted(KERNELS.glob("*.cu")) for a in ("sm_80", "sm_90")] + \
  [("calls", "sm_90", "-G"), ("control", "sm_90", "-G"), ("half_ops", "sm_90", "-O3 -lineinfo"),
   ("warp", "sm_80", "-O0")]


def variant_id(v: tuple[str, str, str]) -> str:
  extra = v[2].replace(" ", "").replace("-O3", "").lstrip("-")
  return f"{v[0]}-{v[1]}" + (f"-{extra}" if extra else "")


def ptxas(path: Path | str, arch: str) -> tuple[bool | None, str]:
  """(accepted, first error line) from `ptxas -arch=ARCH -o /dev/null path`; accepted is None when ptxas crashed
  (it segfaults on a few malformed inputs, e.g. `st.param` through a register in an .entry): no verdict."""
  r = subprocess.run(["ptxas", f"-arch={arch}", "-o", "/dev/null", str(path)], capture_output=True, text=True)
  err = next((l for l in r.stderr.splitlines() if "error" in l or "fatal" in l), "")
  return (None if r.returncode < 0 else r.returncode == 0), err


def ptxas_line(err: str) -> int | None:
  """The line number ptxas names in an error ("ptxas f.ptx, line 12; error : ...")."""
  m = re.search(r"line (\d+);", err)
  return int(m.group(1)) if m else None
