import shutil, subprocess
from pathlib import Path
import pytest

TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")
SOURCES = {"suite": Path(__file__).parents[1] / "emu" / "kernels" / "suite.cl",
           "dynlds": Path(__file__).parents[1] / "emu" / "kernels" / "dynlds.cl",
           "small": Path(__file__).parent / "kernels.cl"}


@pytest.fixture(scope="session")
def clang_co(tmp_path_factory):
  """(arch, "suite" | "small") -> bytes of the clang-22 + ld.lld-22 code object (compiled once per session)."""
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    pytest.skip("clang-22 / ld.lld-22 not installed (CI installs them: .ci/run)")
  d, cache = tmp_path_factory.mktemp("rtclang"), {}

  def get(arch, name="small"):
    if (arch, name) not in cache:
      o, co = d / f"{name}-{arch}.o", d / f"{name}-{arch}.co"
      subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}",
                      "-nogpulib", "-O2", "-c", str(SOURCES[name]), "-o", str(o)], check=True, capture_output=True)
      subprocess.run(["ld.lld-22", "-shared", str(o), "-o", str(co)], check=True, capture_output=True)
      cache[arch, name] = co.read_bytes()
    return cache[arch, name]
  return get
