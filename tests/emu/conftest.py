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


@pytest.fixture
def tier_runs(monkeypatch, tmp_path):
  """Run fn() interpreted (GPUTWIN_JIT=0) and with every block compiled at first sight (force), on a native cache of
  its own: per tier (its result or None, the GputwinError it raised or None, the native block runs it made)."""
  from gputwin.emu.native import STATS
  from gputwin.errors import GputwinError
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))

  def both(fn):
    out = []
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      runs = STATS["runs"]
      try:
        res, err = fn(), None
      except GputwinError as e:
        res, err = None, e
      out.append((res, err, STATS["runs"] - runs))
    return out
  return both
