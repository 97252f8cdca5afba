"""hypothesis-generated IR programs (integer and float arithmetic, compares, selects, casts, divergent ifs and
loops, global loads/stores/atomics, shared memory with barriers): identical results on the host reference, the
direct backend and the LLVM backend, run on
the emulator, for all four targets. Derandomised and CI-sized; HYPOTHESIS_PROFILE=long runs more."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.compiler import compile, ir, passes, reference
from gputwin.compiler.examples import ulp_diff
from gputwin.compiler.ir import Block, Builder, Kernel

from _compiler_helpers import TARGETS, known_emu_bug, run_both

N = 64          # work-items: one wave64 or two wave32s
LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
INT_OPS = ("add", "sub", "mul", "and", "or", "xor", "shl", "shr", "min", "max", "div", "rem")
FLOAT_OPS = ("add", "sub", "mul", "min", "max")
FCONST = (0.5, -1.25, 3.0, 0.001, -7.5, 100.0)


class Gen:
  """Draws one program with a Builder; values are kept in per-type pools so every op is well-typed."""

  def __init__(self, data):
    self.d = data
    self.b = Builder()

  def draw(self, s): return self.d.draw(s)

  def pick(self, t):
    return self.draw(st.sampled_from(self.pool[str(t)]))

  def add(self, v):
    self.pool[str(v.type)].append(v)
    return v

  def kernel(self) -> Kernel:
    b = self.b
    params = [b.value(ir.ptr("global", ir.i32), "x"), b.value(ir.ptr("global", ir.f32), "y"),
              b.value(ir.ptr("global", ir.i32), "oi"), b.value(ir.ptr("global", ir.f32), "of"),
              b.value(ir.ptr("global", ir.i32), "oa"), b.value(ir.i32, "n")]
    k = Kernel("fuzz", params, Block())
    b.block = k.body
    self.x, self.y, self.oi, self.of, self.oa, n = params
    self.atomic_kind = self.draw(st.sampled_from(["add", "min", "max", "and", "or", "xor"]))
    self.smem = {t: b.emit("shared", [], ir.ptr("local", t), {"count": N}) for t in (ir.i32, ir.f32)}
    self.pool = {"i32": [n], "u32": [], "f32": [], "bool": [], "i8": [], "u16": [], "f16": [], "i64": []}
    self.tid = b.emit("workitem.id.x", [], ir.i32)
    self.add(self.tid)
    self.add(b.emit("load", [self.x, self.tid], ir.i32))
    self.add(b.emit("load", [self.y, self.tid], ir.f32))
    self.add(b.const(self.draw(st.integers(-2**31, 2**31 - 1)), ir.i32))
    self.add(b.const(self.draw(st.integers(0, 2**32 - 1)), ir.u32))
    self.add(b.const(self.draw(st.sampled_from(FCONST)), ir.f32))
    self.add(b.emit("lt", [self.tid, self.pick(ir.i32)], ir.boolean))
    for t in (ir.i8, ir.u16): self.add(b.emit("cast", [self.pick(ir.i32)], t))   # narrow integers wrap
    self.add(b.emit("cast", [self.pick(ir.f32)], ir.f16))
    self.add(b.emit("cast", [self.pick(ir.i32)], ir.i64))
    self.ops(self.draw(st.integers(4, 14)), depth=0)
    for j, t in enumerate((ir.i32, ir.u32)):
      v = self.pick(t)
      if t == ir.u32: v = b.emit("bitcast", [v], ir.i32)
      idx = b.emit("add", [b.emit("mul", [self.tid, b.const(2, ir.i32)], ir.i32), b.const(j, ir.i32)], ir.i32)
      b.emit("store", [self.oi, idx, v])
    b.emit("store", [self.of, self.tid, self.pick(ir.f32)])
    return ir.verify(k)

  def ops(self, count, depth):
    for _ in range(count):
      kind = self.draw(st.sampled_from(["int", "int", "float", "cmp", "select", "cast", "load", "atomic"] +
                                       (["if", "for"] if depth < 2 else []) + (["lds"] if depth == 0 else [])))
      getattr(self, kind)(depth)

  def int(self, depth):
    t = self.draw(st.sampled_from([ir.i32, ir.u32, ir.i8, ir.u16, ir.i64]))
    ops = INT_OPS[:-2] if t == ir.i64 else INT_OPS     # no 64-bit division in the direct backend
    self.add(self.b.emit(self.draw(st.sampled_from(ops)), [self.pick(t), self.pick(t)], t))

  def float(self, depth):
    t = self.draw(st.sampled_from([ir.f32, ir.f32, ir.f16]))
    self.add(self.b.emit(self.draw(st.sampled_from(FLOAT_OPS)), [self.pick(t), self.pick(t)], t))

  def cmp(self, depth):
    t = self.draw(st.sampled_from([ir.i32, ir.f32, ir.i8, ir.u16, ir.i64] + ([ir.u32] if self.pool["u32"] else [])))
    self.add(self.b.emit(self.draw(st.sampled_from(ir.CMP)), [self.pick(t), self.pick(t)], ir.boolean))

  def select(self, depth):
    t = self.draw(st.sampled_from([ir.i32, ir.f32, ir.i8, ir.u16, ir.i64]))
    self.add(self.b.emit("select", [self.pick(ir.boolean), self.pick(t), self.pick(t)], t))

  def cast(self, depth):
    src, dst = self.draw(st.sampled_from([(ir.i32, ir.f32), (ir.f32, ir.i32), (ir.i32, ir.u32), (ir.u32, ir.f32),
                                          (ir.f32, ir.u32), (ir.boolean, ir.i32), (ir.i8, ir.i32), (ir.u16, ir.i32),
                                          (ir.i32, ir.i8), (ir.f32, ir.i8), (ir.u16, ir.f32), (ir.i8, ir.u16),
                                          (ir.f16, ir.f32), (ir.f32, ir.f16), (ir.f16, ir.i32), (ir.i8, ir.f16),
                                          (ir.i64, ir.i32), (ir.u16, ir.i64), (ir.i64, ir.boolean)]))
    if not self.pool[str(src)]: return
    self.add(self.b.emit("cast", [self.pick(src)], dst))

  def load(self, depth):
    idx = self.b.emit("and", [self.pick(ir.i32), self.b.const(N - 1, ir.i32)], ir.i32)
    p, t = self.draw(st.sampled_from([(self.x, ir.i32), (self.y, ir.f32)]))
    self.add(self.b.emit("load", [p, idx], t))

  def lds(self, depth):
    """Exchange a value through shared memory: store at tid, barrier (top level only), load at another lane."""
    t = self.draw(st.sampled_from([ir.i32, ir.f32]))
    self.b.emit("store", [self.smem[t], self.tid, self.pick(t)])
    self.b.emit("barrier", [])
    idx = self.b.emit("and", [self.pick(ir.i32), self.b.const(N - 1, ir.i32)], ir.i32)
    self.add(self.b.emit("load", [self.smem[t], idx], t))
    self.b.emit("barrier", [])      # nobody overwrites the array before everyone has read it

  def atomic(self, depth):
    """Order-independent global atomics (the final memory is compared, the old value is not used): one kind per
    program, since e.g. add and min on the same word do not commute."""
    kind = self.atomic_kind
    idx = self.b.emit("and", [self.pick(ir.i32), self.b.const(7, ir.i32)], ir.i32)
    self.b.emit(f"atomic.{kind}", [self.oa, idx, self.pick(ir.i32)], ir.i32)

  def region(self, block: Block, count, depth, carry_types, inner=None):
    """Generate ops into `block` with the current pools visible; returns the values to yield."""
    saved_block, saved_pool = self.b.block, {k: list(v) for k, v in self.pool.items()}
    self.b.block = block
    for a in inner or []: self.add(a)
    self.ops(count, depth + 1)
    ys = [self.pick(t) for t in carry_types]
    self.b.block, self.pool = saved_block, saved_pool
    return ys

  def _if(self, depth):
    types = self.draw(st.lists(st.sampled_from([ir.i32, ir.f32]), min_size=0, max_size=2))
    then, els = Block(), Block()
    yt = self.region(then, self.draw(st.integers(1, 4)), depth, types)
    ye = self.region(els, self.draw(st.integers(0, 3)), depth, types)
    if types:
      then.ops.append(self.b.make("yield", yt))
      els.ops.append(self.b.make("yield", ye))
    op = self.b.make("if", [self.pick(ir.boolean)], types, regions=[then, els])
    self.b.block.ops.append(op)
    for r in op.results: self.add(r)

  def _for(self, depth):
    lo = self.b.const(0, ir.i32)
    hi = self.b.const(self.draw(st.integers(0, 5)), ir.i32) if self.draw(st.booleans()) else \
      self.b.emit("and", [self.tid, self.b.const(3, ir.i32)], ir.i32)      # divergent trip counts
    step = self.b.const(1, ir.i32)
    types = self.draw(st.lists(st.sampled_from([ir.i32, ir.f32]), min_size=1, max_size=2))
    inits = [self.pick(t) for t in types]
    body = Block([self.b.value(ir.i32, "i")] + [self.b.value(t, "c") for t in types])
    ys = self.region(body, self.draw(st.integers(1, 4)), depth, types, inner=body.args)
    body.ops.append(self.b.make("yield", ys))
    op = self.b.make("for", [lo, hi, step] + inits, types, regions=[body])
    self.b.block.ops.append(op)
    for r in op.results: self.add(r)


setattr(Gen, "if", Gen._if)      # `ops` dispatches on the drawn keyword
setattr(Gen, "for", Gen._for)


def inputs(seed):
  rng = np.random.default_rng(seed)
  x = rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32)
  x[:8] = [0, 1, -1, 2**31 - 1, -2**31, 7, -7, 64]
  y = (rng.standard_normal(N) * 10).astype(np.float32)
  y[:4] = [0.0, -0.0, 1.5, -2.5]
  return [x, y, np.zeros(2 * N, np.int32), np.zeros(N, np.float32), np.arange(8, dtype=np.int32) * 12345, 37]


def same(ref, got, what):
  np.testing.assert_array_equal(got[2], ref[2], err_msg=what)
  np.testing.assert_array_equal(got[4], ref[4], err_msg=what + " (atomics)")
  assert ulp_diff(got[3], ref[3]).max() == 0, f"{what}: floats differ: {got[3]} vs {ref[3]}"


PROFILE = settings(max_examples=60 if LONG else 8, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))


@PROFILE
@given(st.data())
def test_passes_preserve_random_programs(data):
  k = Gen(data).kernel()
  ref = inputs(1)
  reference.launch(k, grid=1, block=N, args=ref)
  opt = inputs(1)
  reference.launch(passes.optimize(k), grid=1, block=N, args=opt)
  same(ref, opt, f"optimised IR differs:\n{k}")
  assert str(ir.parse(str(k))) == str(k)


@pytest.mark.parametrize("arch", TARGETS)
@PROFILE
@given(data=st.data())
def test_backends_agree_on_random_programs(arch, data):
  k = Gen(data).kernel()
  for backend in ("direct", "llvm"):
    c = compile(k, arch, backend=backend)
    try:
      ref, emu = run_both(c, inputs(2), 1, N)
      same(ref, emu, f"{backend} {arch}:\n{c.ir}")
    except Exception:
      why = known_emu_bug(c.asm) if backend == "llvm" else None
      if why: continue   # a known emulator bug, reproduced in test_emu_repro.py
      raise
