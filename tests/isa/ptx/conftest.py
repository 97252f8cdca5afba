"""Shared by the PTX ISA tests: our CUDA kernels compiled by nvcc 13 to PTX once per session (skipped without nvcc or
ptxas)."""
from __future__ import annotations

import hashlib
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ptx_oracle import HAVE_CUDA, KERNELS, VARIANTS, variant_id


@pytest.fixture(scope="session")
def ptx_modules(request, tmp_path_factory) -> dict[tuple[str, str, str], Path]:
  """Every VARIANT compiled with `nvcc -ptx` (two at a time): {variant: path of the .ptx}. Outputs are kept in the
  pytest cache keyed by source, flags and nvcc version, so a rerun compiles only what changed."""
  if not HAVE_CUDA: pytest.skip("nvcc/ptxas (CUDA 13) not installed")
  cache = getattr(request.config, "cache", None)
  out = cache.mkdir("gputwin-ptx") if cache is not None else tmp_path_factory.mktemp("ptx")
  nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
  def build(v):
    name, arch, flags = v
    src = (KERNELS / f"{name}.cu").read_text()
    key = hashlib.sha1("\0".join((src, arch, flags, nvcc)).encode()).hexdigest()[:12]
    dst = out / f"{variant_id(v)}-{key}.ptx"
    if not dst.exists():
      tmp = dst.with_suffix(f".{os.getpid()}.tmp")  # (xdist workers build the same files at once)
      r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", *flags.split(), str(KERNELS / f"{name}.cu"), "-o", str(tmp)],
                         capture_output=True, text=True)
      assert r.returncode == 0, f"nvcc failed on {name}.cu ({arch} {flags}):\n{r.stderr}"
      tmp.replace(dst)
    return v, dst
  with ThreadPoolExecutor(2) as ex: return dict(ex.map(build, VARIANTS))
