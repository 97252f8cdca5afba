"""Our CUDA kernels (kernels/*.cu) compiled by nvcc to PTX once per source, target and nvcc version (skipped
without nvcc), kept in the pytest cache."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture(scope="session")
def ptx(request, tmp_path_factory):
  """ptx(name, arch) -> path of kernels/<name>.cu compiled with `nvcc -ptx -arch=<arch> -O3`."""
  if not shutil.which("nvcc"):
    pytest.skip("nvcc (CUDA 13) not installed")
  cache = getattr(request.config, "cache", None)
  out = cache.mkdir("gputwin-ptx-tensor") if cache is not None else tmp_path_factory.mktemp("ptx")
  version = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout

  def get(name: str, arch: str = "sm_90") -> Path:
    src = (KERNELS / f"{name}.cu").read_text()
    dst = out / f"{name}-{arch}-{hashlib.sha1((src + arch + version).encode()).hexdigest()[:12]}.ptx"
    if not dst.exists():
      tmp = dst.with_suffix(f".{os.getpid()}.tmp")  # (xdist workers build the same files at once)
      r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-O3", str(KERNELS / f"{name}.cu"), "-o", str(tmp)],
                         capture_output=True, text=True)
      assert r.returncode == 0, f"nvcc failed on {name}.cu ({arch}):\n{r.stderr}"
      tmp.replace(dst)
    return dst
  return get
