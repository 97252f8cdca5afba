"""`gputwin compile` as the lead wires it: gputwin.compiler.tool.compile_main(argv)."""
import subprocess
import textwrap

import pytest

from gputwin.compiler.tool import compile_main
from gputwin.isa.codeobj import load_code_object

from _compiler_helpers import LLVM_MC

SRC = textwrap.dedent("""
    from gputwin.compiler import kernel, Ptr, f32, i32, global_id

    @kernel
    def scale(x: Ptr[f32], n: i32):
      i = global_id(0)
      if i < n:
        x[i] = x[i] * 8.0

    @kernel
    def double(x: Ptr[i32], n: i32):
      i = global_id(0)
      if i < n:
        x[i] = x[i] * 2
    """)


@pytest.fixture
def src(tmp_path):
  p = tmp_path / "k.py"
  p.write_text(SRC)
  return p


@pytest.mark.parametrize("backend", ["direct", "llvm"])
def test_code_object_per_kernel(src, tmp_path, backend, capsys):
  out = tmp_path / "out.co"
  assert compile_main([str(src), "--arch", "gfx942", "--backend", backend, "-o", str(out)]) == 0
  for name in ("scale", "double"):
    co = load_code_object((tmp_path / f"out.{name}.co").read_bytes(), arch="gfx942")
    assert co.kernel(name).wave_size == 64


def test_assembly_to_stdout_is_valid(src, capsys):
  assert compile_main([str(src), "--arch", "gfx1200", "--kernel", "scale", "-S"]) == 0
  asm = capsys.readouterr().out
  assert ".amdhsa_kernel scale" in asm and "global_load_b32" in asm
  if LLVM_MC:
    p = subprocess.run([LLVM_MC, "--triple=amdgcn-amd-amdhsa", "-mcpu=gfx1200", "-filetype=obj", "-o", "/dev/null"],
                       input=asm, text=True, capture_output=True)
    assert p.returncode == 0, p.stderr


def test_opt_bisect_and_print_after_all(src, capsys):
  assert compile_main([str(src), "--arch", "gfx1100", "--kernel", "double", "--opt-bisect-limit", "3",
                       "--print-after-all", "--emit-ir"]) == 0
  cap = capsys.readouterr()
  assert "BISECT: running pass (3) strength on kernel @double" in cap.err
  assert "BISECT: NOT running pass (4) cse on kernel @double" in cap.err
  assert "; *** IR Dump After strength (3) on @double ***" in cap.err
  assert "IR Dump After cse" not in cap.err
  assert cap.out.startswith("kernel @double(") and "shl" in cap.out   # strength ran: x*2 -> x<<1


def test_compile_error_exit_status_and_location(tmp_path, capsys):
  p = tmp_path / "bad.py"
  p.write_text(SRC + "\n@kernel\ndef bad(x: Ptr[f32]):\n  x[0] = 1\n  while True:\n    pass\n")
  assert compile_main([str(p), "--arch", "gfx1100", "--kernel", "bad"]) == 1
  err = capsys.readouterr().err
  line = SRC.count("\n") + 5
  assert f"bad.py:{line}:3: error: `while` loops are not supported" in err


def test_ir_file_input(tmp_path, capsys):
  p = tmp_path / "k.ir"
  p.write_text("kernel @k(%x: global<i32>) {\n  %0: i32 = workitem.id.x\n  store %x, %0, %0\n}\n")
  assert compile_main([str(p), "--arch", "gfx950", "-o", str(tmp_path / "k.co")]) == 0
  assert load_code_object((tmp_path / "k.co").read_bytes()).kernel("k")
