"""Host CPU targets in the verification tools: `gputwin fuzz --ir` runs the compiler tests' random IR programs on
x86_64 and aarch64 under unicorn against the reference; `gputwin bisect passes --good-arch x86_64` bisects a GPU
build against the kernel on a host CPU."""
import numpy as np

from gputwin.cli import main
from gputwin.compiler import ir
from gputwin.compiler.examples import EXAMPLES
from gputwin.verify import bisect
from gputwin.verify.fuzz import IR_TARGETS, ir_backends


def test_fuzz_ir_runs_host_targets(capsys):
  assert {"x86_64", "aarch64"} <= set(IR_TARGETS)
  assert ir_backends("x86_64") == ("llvm",) and ir_backends("a630") == ("direct",)
  assert main(["fuzz", "--ir", "--count", "3", "--arch", "x86_64", "--arch", "aarch64", "--seed", "2", "-j", "1"]) == 0
  out = capsys.readouterr().out
  assert "x86_64/llvm" in out and "aarch64/llvm" in out


def _peephole(k):
  """A miscompile on its second application: the first i32 add becomes a sub."""
  k.peepholes = getattr(k, "peepholes", 0) + 1
  if k.peepholes == 2:
    for o in k.walk():
      if o.opcode == "add" and o.result.type == ir.i32:
        o.opcode = "sub"
        return True
  return False


def test_bisect_passes_against_a_host_target():
  ex = EXAMPLES["int_ops"]
  args, grid, block = ex.inputs(np.random.default_rng(0))
  pipeline = ("simplify", "peephole", "constfold", "peephole", "dce")
  v = bisect.bisect_passes(ex.kernel, "aarch64", args=args, grid=grid, block=block, outputs=list(ex.outputs),
                           pipeline=pipeline, passes={"peephole": _peephole}, good_arch="x86_64")
  assert (v.limit, v.name) == (4, "peephole") and "first bad pass application: (4) peephole" in v.report("int_ops")
  clean = bisect.bisect_passes(ex.kernel, "gfx1100", args=args, grid=grid, block=block, outputs=list(ex.outputs),
                               good_arch="aarch64")
  assert clean.limit is None
