"""The IR's text form round-trips and the verifier rejects malformed IR with a message that says what and where."""
import pytest

from gputwin.compiler import ir, passes
from gputwin.compiler.examples import EXAMPLES
from gputwin.errors import CompileError

GOOD = """kernel @k(%a: f32, %x: global<f32>, %n: i32) {
  %0: i32 = workitem.id.x
  %c: bool = lt %0, %n
  %one: i32 = const 1
  %h: f16 = const 0.5
  %b: bf16 = const -2.0
  %big: u64 = const 18446744073709551615
  %s: local<f32> = shared 64
  %p: private<i32> = alloca 4
  %r: f32 = if %c {
    %v: f32 = load %x, %0  # k.py:3:5
    yield %v
  } else {
    yield %a
  }
  %acc: f32, %q: i32 = for %i: i32 = %0, %n, %one iter(%t: f32 = %r, %u: i32 = %n) {
    %t2: f32 = add %t, %a
    barrier
    yield %t2, %u
  }
  %v4: f32x4 = load %x, %0
  %e: f32 = extract %v4, 3
  %w: f32x2 = vector %e, %acc
  %si: local<i32> = shared 8
  %old: i32 = atomic.add %si, %0, %q
  store %x, %0, %e
}
"""


def test_round_trip_handwritten():
  k = ir.parse(GOOD)
  assert str(k) == GOOD
  assert str(ir.parse(str(k))) == GOOD


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_round_trip_examples(name):
  for k in (EXAMPLES[name].kernel.ir, passes.optimize(EXAMPLES[name].kernel.ir)):
    text = str(k)
    assert str(ir.parse(text)) == text
    assert any(op.loc and op.loc.line for op in ir.parse(text).walk())   # Python locations survive


BAD = [
  ("%z: i32 = add %0, %nope", "use of undefined value %nope"),
  ("%z: i32 = add %0, %a", "operands must have the same type, got i32, f32"),
  ("%z: f32 = lt %0, %n", "lt yields bool, not f32"),
  ("%z: i32 = add %0", "add takes 2 operand(s), got 1"),
  ("%z: i8 = const 300", "const 300 out of range for i8"),
  ("%z: i32 = const 1.5", "bad i32 literal"),
  ("store %n, %0, %a", "store needs a pointer as first operand"),
  ("store %x, %a, %a", "store index must be a scalar integer"),
  ("store %x, %0, %n", "store through global<f32> moves f32"),
  ("if %0 {\n  }", "if condition must be bool, got i32"),
  ("%z: i32 = if %c {\n    yield %0\n  }", "if with results needs an else region"),
  ("%z: i32 = if %c {\n    yield %a\n  } else {\n    yield %0\n  }", "yield of (f32) where the region yields (i32)"),
  ("yield %0", "yield must end an if/for region"),
  ("%0: i32 = const 1", "%0 defined twice"),
  ("%z: f32 = sqrt %0", "sqrt needs a float operand"),
  ("%z: i32 = shl %a, %a", "operands must have the same type"),
  ("%z: f32 = shl %a, %a", "shl needs integer operands"),
  ("%z: i32 = frob %0", "unknown opcode 'frob'"),
  ("%z: i32 = extract %0, 1", "extract needs a vector"),
  ("%z: i32 = atomic.add %x, %0, %a", "its result must be f32, not i32"),
  ("%z: global<f32> = shared 4", "shared yields a local pointer"),
  ("%z: i32x5 = const 1", "vector of 5 lanes"),
]


@pytest.mark.parametrize("line,msg", BAD)
def test_verifier_rejects(line, msg):
  text = f"kernel @k(%a: f32, %x: global<f32>, %n: i32) {{\n  %0: i32 = workitem.id.x\n  %c: bool = lt %0, %n\n" \
         f"  {line}\n}}\n"
  with pytest.raises(CompileError) as e:
    ir.parse(text)
  assert msg in str(e.value), str(e.value)


def test_verifier_names_location_and_op():
  text = "kernel @k(%a: f32, %n: i32) {\n  %z: i32 = add %n, %a  # prog.py:7:3\n}\n"
  with pytest.raises(CompileError) as e:
    ir.parse(text)
  s = str(e.value)
  assert s.startswith("prog.py:7:3: error: invalid IR in kernel @k") and "%z: i32 = add %n, %a" in s
  assert e.value.loc.line == 7


def test_use_outside_region_is_rejected():
  text = ("kernel @k(%n: i32) {\n  %c: bool = const true\n  if %c {\n    %v: i32 = add %n, %n\n  }\n"
          "  %w: i32 = add %v, %n\n}\n")
  with pytest.raises(CompileError, match="%v is not defined before this use"):
    ir.parse(text)
