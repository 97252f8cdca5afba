"""LLVM aborts the whole process on some inputs (f64 transcendentals, LDS overflow, bf16 frem...). Every op x
scalar type the verifier accepts must compile on both backends or raise CompileError. Runs in a subprocess so an
abort is a test failure naming the last case, not a dead test run. Slow (every combination): `-m slow`."""
import subprocess
import sys
from pathlib import Path

import pytest

from _compiler_helpers import TARGETS


@pytest.mark.slow
@pytest.mark.parametrize("arch", TARGETS)
def test_every_op_and_type_compiles_or_is_refused(arch):
  p = subprocess.run([sys.executable, str(Path(__file__).with_name("op_matrix.py")), arch], capture_output=True,
                     text=True, timeout=600)
  last = p.stderr.strip().splitlines()[-1:] if p.stderr else []
  assert p.returncode == 0, f"aborted at {last}: {p.stderr[-500:]}"
  n, ok = map(int, p.stdout.split())
  assert ok >= 0.85 * n, (n, ok)
