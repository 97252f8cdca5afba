"""Every pass alone preserves the host reference's results; each does what its name says; opt-bisect finds a
deliberately broken pass application."""
import numpy as np
import pytest

from gputwin.compiler import ir, passes, reference
from gputwin.compiler.examples import EXAMPLES


def outputs(k, name, seed=3):
  ex = EXAMPLES[name]
  args, grid, block = ex.inputs(np.random.default_rng(seed))
  reference.launch(k, grid=grid, block=block, args=args)
  return [args[o] for o in ex.outputs]


@pytest.mark.parametrize("pname", sorted(passes.PASSES))
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_pass_alone_preserves_semantics(pname, name):
  k = EXAMPLES[name].kernel.ir
  want = outputs(k, name)
  got = outputs(passes.optimize(k, pipeline=("unroll", pname) if pname == "vectorize" else (pname,)), name)
  for w, g in zip(want, got): np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_pipeline_preserves_semantics(name):
  k = EXAMPLES[name].kernel.ir
  for w, g in zip(outputs(k, name), outputs(passes.optimize(k), name)): np.testing.assert_array_equal(g, w)


def ops(k): return [o.opcode for o in k.walk()]


K = """kernel @k(%x: global<i32>, %y: global<u32>, %n: i32) {
  %0: i32 = workitem.id.x
  %two: i32 = const 2
  %three: i32 = const 3
  %five: i32 = add %two, %three
  %a: i32 = mul %0, %five
  %b: i32 = mul %0, %five
  %c: i32 = add %a, %b
  %eight: i32 = const 8
  %d: i32 = mul %c, %eight
  %q: i32 = div %d, %eight
  %one: i32 = const 1
  %e: i32 = mul %q, %one
  %z: i32 = const 0
  %f: i32 = add %e, %z
  %dead: i32 = mul %f, %f
  %lo: i32 = const 0
  %hi: i32 = const 4
  %s: i32 = for %i: i32 = %lo, %hi, %one iter(%acc: i32 = %f) {
    %t: i32 = add %acc, %i
    yield %t
  }
  store %x, %0, %s
}
"""


def test_each_pass_does_its_job():
  k = ir.parse(K)
  cf = passes.optimize(k, pipeline=("constfold",))
  assert any(o.opcode == "const" and o.attrs["value"] == 5 for o in cf.walk())
  muls = lambda pipeline: ops(passes.optimize(k, pipeline=pipeline)).count("mul")
  assert muls(("cse", "dce")) < muls(("dce",))
  assert "mul" in ops(k) and ops(passes.optimize(k, pipeline=("constfold", "strength"))).count("shl") >= 1
  simp = passes.optimize(k, pipeline=("simplify", "dce"))
  assert len(list(simp.walk())) < len(list(k.walk()))
  assert "for" not in ops(passes.optimize(k, pipeline=("unroll",)))
  d = passes.optimize(k, pipeline=("dce",))
  assert not any(r.name == "dead" for o in d.walk() for r in o.results)
  for kk in (cf, simp, d):
    x = np.zeros(64, np.int32)
    reference.launch(kk, grid=1, block=64, args=[x, np.zeros(1, np.uint32), 0])
    assert x.tolist() == [10 * t + 6 for t in range(64)]


def test_vectorize_merges_aligned_runs_only():
  m = passes.optimize(EXAMPLES["matmul"].kernel.ir)
  vec = [o for o in m.walk() if o.opcode == "load" and o.result.type.is_vec]
  assert len(vec) == 2 and all(str(o.result.type) == "f32x4" for o in vec)
  unaligned = """kernel @u(%x: global<f32>, %y: global<f32>) {
  %0: i32 = workitem.id.x
  %one: i32 = const 1
  %i1: i32 = add %0, %one
  %a: f32 = load %x, %0
  %b: f32 = load %x, %i1
  %s: f32 = add %a, %b
  store %y, %0, %s
}
"""
  assert not any(o.opcode == "extract" for o in passes.optimize(ir.parse(unaligned)).walk())  # %0 may be odd


def test_vectorize_respects_intervening_store():
  text = """kernel @v(%x: global<f32>, %y: global<f32>) {
  %0: i32 = workitem.id.x
  %four: i32 = const 4
  %b: i32 = mul %0, %four
  %one: i32 = const 1
  %b1: i32 = add %b, %one
  %a: f32 = load %x, %b
  store %y, %b, %a
  %c: f32 = load %x, %b1
  store %y, %b1, %c
}
"""
  out = passes.optimize(ir.parse(text), pipeline=("vectorize",))
  assert [o.opcode for o in out.walk()].count("load") == 2   # a store between (y may alias x): left alone


def test_opt_bisect_log_and_limit():
  k = EXAMPLES["saxpy"].kernel.ir
  lines = []
  passes.optimize(k, opt_bisect_limit=2, log=lines.append)
  assert lines[0] == "BISECT: running pass (1) simplify on kernel @saxpy"
  assert lines[1] == "BISECT: running pass (2) constfold on kernel @saxpy"
  assert lines[2] == "BISECT: NOT running pass (3) strength on kernel @saxpy"
  assert len(lines) == len(passes.PIPELINE)
  assert str(passes.optimize(k, opt_bisect_limit=0)) == str(k)
  dumps = []
  passes.optimize(k, print_after_all=True, log=dumps.append)
  assert [d.splitlines()[0] for d in dumps] == [f"; *** IR Dump After {n} ({i}) on @saxpy ***"
                                                 for i, n in passes.applications()]


def test_disable_pass_by_name():
  k = EXAMPLES["matmul"].kernel.ir
  assert any(o.opcode == "for" and o.regions[0].args[0].name == "j" for o in passes.optimize(k, disable=("unroll",))
             .walk())


def test_bisect_finds_injected_miscompile():
  """A 'peephole' pass that is wrong only on its third application (it turns the first add into a sub). Bisecting
  on the reference's verdict must land on exactly that pass application."""
  calls = {"n": 0}

  def peephole(k):
    calls["n"] += 1
    if calls["n"] == 3:
      for o in k.walk():
        if o.opcode == "add" and o.result.type == ir.i32:
          o.opcode = "sub"
          return True
    return False
  pipeline = ("simplify", "peephole", "constfold", "peephole", "strength", "cse", "peephole", "dce", "peephole")
  bad_application = 7        # third appearance of peephole, counted over all applications
  ex = EXAMPLES["int_ops"]
  k = ex.kernel.ir
  want = outputs(k, "int_ops")

  def good(limit):
    calls["n"] = 0
    try:
      got = outputs(passes.optimize(k, pipeline=pipeline, opt_bisect_limit=limit, passes={"peephole": peephole}),
                    "int_ops")
    except reference.ReferenceError:   # e.g. the miscompile made an index go out of bounds
      return False
    return all(np.array_equal(g, w) for g, w in zip(got, want))
  lo, hi = 0, len(pipeline)       # good(lo) holds, good(hi) fails
  assert good(lo) and not good(hi)
  while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if good(mid) else (lo, mid)
  assert hi == bad_application
  assert passes.applications(pipeline)[hi - 1] == (bad_application, "peephole")
