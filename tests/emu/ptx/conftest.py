"""The CUDA kernel suite of the PTX emulator: kernels/*.cu compiled by nvcc to PTX for sm_80 and sm_90, once per
session (skipped without nvcc/ptxas)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

KERNELS = Path(__file__).parent / "kernels"
ARCHS = ("sm_80", "sm_90")
FLAGS = ("-O3",)
HAVE_CUDA = bool(shutil.which("nvcc") and shutil.which("ptxas"))
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="nvcc/ptxas (CUDA 13) not installed")


def sources() -> list[str]: return sorted(p.stem for p in KERNELS.glob("*.cu"))


@pytest.fixture(scope="session")
def ptx(request, tmp_path_factory) -> dict[tuple[str, str], Path]:
  """{(file stem, arch): path of `nvcc -ptx -arch=ARCH -O3 kernels/<stem>.cu`}. Kept in the pytest cache keyed by
  source, arch, flags and nvcc version, so a rerun compiles only what changed."""
  if not HAVE_CUDA: pytest.skip("nvcc/ptxas (CUDA 13) not installed")
  cache = getattr(request.config, "cache", None)
  out = cache.mkdir("gputwin-emu-ptx") if cache is not None else tmp_path_factory.mktemp("emu-ptx")
  nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout

  def build(job):
    name, arch = job
    src = KERNELS / f"{name}.cu"
    key = hashlib.sha1("\0".join((src.read_text(), arch, *FLAGS, nvcc)).encode()).hexdigest()[:12]
    dst = out / f"{name}-{arch}-{key}.ptx"
    if not dst.exists():
      tmp = dst.with_suffix(f".{os.getpid()}.tmp")  # (xdist workers build the same files at once)
      r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", *FLAGS, str(src), "-o", str(tmp)], capture_output=True,
                         text=True)
      assert r.returncode == 0, f"nvcc failed on {src.name} ({arch}):\n{r.stderr}"
      tmp.replace(dst)
    return job, dst
  with ThreadPoolExecutor(2) as ex: return dict(ex.map(build, [(s, a) for s in sources() for a in ARCHS]))
