"""Emulator throughput on the clang-22 suite kernels (issue 8 targets): python bench/emu_speed.py [arch] [N]."""
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gputwin.emu import launch  # noqa: E402

arch = sys.argv[1] if len(sys.argv) > 1 else "gfx1100"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 256
if not shutil.which("clang-22"):
  sys.exit("clang-22 not installed: skipping")
d = Path(tempfile.mkdtemp())
src = Path(__file__).resolve().parents[1] / "tests/emu/kernels/suite.cl"
subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}",
                "-nogpulib", "-O2", "-c", str(src), "-o", str(d / "k.o")], check=True, capture_output=True)
subprocess.run(["ld.lld-22", "-shared", str(d / "k.o"), "-o", str(d / "k.co")], check=True)
r = np.random.default_rng(0)
A, B = r.standard_normal((N, N)).astype(np.float32), r.standard_normal((N, N)).astype(np.float32)
C = np.zeros((N, N), np.float32)
launch(str(d / "k.co"), "matmul", grid=(1, 1), block=(16, 16), args=[C[:16, :16].copy(), A, B, 16], checks=False)  # warm
st = launch(str(d / "k.co"), "matmul", grid=(N // 16, N // 16), block=(16, 16), args=[C, A, B, N], checks=False)
t = time.perf_counter(); A @ B; tn = time.perf_counter() - t
print(f"matmul {N}x{N} {arch}: {st.instructions} wave-inst, {st.seconds:.2f}s, "
      f"{st.instructions / st.seconds / 1e6:.2f} M wave-inst/s, max err {np.abs(C - A @ B).max():.2e}")
n = 1 << 20
x, y, out = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32), np.zeros(n, np.float32)
launch(str(d / "k.co"), "saxpy", grid=1, block=256, args=[out, x, y, np.float32(2), 256], checks=False)  # warm
st = launch(str(d / "k.co"), "saxpy", grid=n // 256, block=256, args=[out, x, y, np.float32(2), n], checks=False)
t = time.perf_counter(); np.float32(2) * x + y; tn = time.perf_counter() - t
print(f"saxpy 1M {arch}: {st.instructions} wave-inst, {st.seconds:.2f}s ({st.seconds / tn:.0f}x numpy)")
