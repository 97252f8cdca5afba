import shutil
import subprocess
from pathlib import Path

import pytest

TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")
KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture(scope="session")
def clang_co(tmp_path_factory):
  """(arch, source name) -> path of kernels/<name>.cl compiled by clang-22 + ld.lld-22 (once per session)."""
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    pytest.skip("clang-22 / ld.lld-22 not installed (CI installs them: .ci/run)")
  d, cache = tmp_path_factory.mktemp("clang"), {}

  def get(arch, name="suite", *flags):
    if (arch, name, flags) not in cache:
      tag = "".join(f.strip("-") for f in flags)
      o, co = d / f"{name}-{arch}{tag}.o", d / f"{name}-{arch}{tag}.co"
      subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}",
                      "-nogpulib", "-O2", *flags, "-c", str(KERNELS / f"{name}.cl"), "-o", str(o)],
                     check=True, capture_output=True)
      subprocess.run(["ld.lld-22", "-shared", str(o), "-o", str(co)], check=True, capture_output=True)
      cache[arch, name, flags] = co
    return cache[arch, name, flags]
  return get
