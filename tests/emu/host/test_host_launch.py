"""gputwin.emu.host: the unicorn launcher's contract (the one gputwin.emu.launch has for GPUs): bad accesses are
emulated faults naming the address, the work-item and capstone's text of the instruction, never a crash of this
process; a budget stops runaway kernels; arguments are checked against the kernel's parameters; barriers order
work-items' phases. libm services are checked against exact arithmetic (fractions) and IEEE rounding."""
from fractions import Fraction

import numpy as np
import pytest

from gputwin.compiler import compile, ir
from gputwin.emu import launch
from gputwin.errors import EmuError, EmuFault, LaunchError

ARCHES = ("x86_64", "aarch64")


def kern(text: str, arch: str):
  return compile(ir.parse(text), arch)


STORE_AT = """kernel @poke(%y: global<i32>, %off: i32) {
  %i: i32 = workitem.id.x
  %j: i32 = add %i, %off
  store %y, %j, %i
}
"""


@pytest.mark.parametrize("arch", ARCHES)
def test_wild_store_is_an_emulated_fault_at_its_address(arch):
  c = kern(STORE_AT, arch)
  wild = 0x5000_0000    # a guest address nothing is mapped at: the kernel stores to wild + 4 * (i + 1)
  with pytest.raises(EmuFault) as e:
    launch(c.code_object, "poke", grid=1, block=4, args=[wild, 1], arch=arch)
  f = e.value
  assert (f.va, f.size, f.access) == (wild + 4, 4, "write")
  assert f"{wild + 4:#x}" in str(f) and "work-item (0, 0, 0)" in str(f)
  assert f.inst.split()[0] in ("str", "mov", "movl") and f.inst in str(f)   # capstone's text of the store
  y = np.zeros(8, np.int32)                  # the process and the launcher carry on
  launch(c.code_object, "poke", grid=1, block=8, args=[y, 0], arch=arch)
  assert y.tolist() == list(range(8))


@pytest.mark.parametrize("arch", ARCHES)
def test_store_into_code_is_a_protection_fault(arch):
  from gputwin.emu.host.launch import IMAGE
  c = kern(STORE_AT, arch)
  with pytest.raises(EmuFault, match="protected") as e:
    launch(c.code_object, "poke", grid=1, block=2, args=[IMAGE, 0], arch=arch)
  assert (e.value.va, e.value.access) == (IMAGE, "write")


@pytest.mark.parametrize("arch", ARCHES)
def test_past_the_end_and_before_the_start_of_a_buffer_fault(arch):
  c = kern(STORE_AT, arch)
  y = np.zeros(10, np.int32)
  with pytest.raises(EmuFault, match="write of 4 bytes") as e:
    launch(c.code_object, "poke", grid=1, block=4, args=[y, 7], arch=arch)   # work-item 3 writes y[10]
  assert "work-item (3, 0, 0)" in str(e.value)
  with pytest.raises(EmuFault, match="before the start of a buffer") as e:
    launch(c.code_object, "poke", grid=1, block=4, args=[y, -1], arch=arch)  # work-item 0 writes y[-1]
  assert "work-item (0, 0, 0)" in str(e.value)


@pytest.mark.parametrize("arch", ARCHES)
def test_budget_stops_a_runaway_loop(arch):
  c = kern("""kernel @spin(%y: global<i32>) {
  %i: i32 = workitem.id.x
  %lo: i32 = const 0
  %hi: i32 = const 2000000000
  %st: i32 = const 1
  %r: i32 = for %k: i32 = %lo, %hi, %st iter(%acc: i32 = %i) {
    %v: i32 = load %y, %i
    %w: i32 = add %acc, %v
    yield %w
  }
  store %y, %i, %r
}
""", arch)
  with pytest.raises(EmuError, match="more than 20000 host instructions"):
    launch(c.code_object, "spin", grid=1, block=2, args=[np.zeros(2, np.int32)], arch=arch, max_instructions=20000)


def test_arguments_are_checked():
  c = kern(STORE_AT, "aarch64")
  with pytest.raises(LaunchError, match="takes 2 arguments"):
    launch(c.code_object, "poke", grid=1, block=4, args=[np.zeros(4, np.int32)], arch="aarch64")
  with pytest.raises(LaunchError, match="wants a numpy array"):
    launch(c.code_object, "poke", grid=1, block=4, args=[1.5, 0], arch="aarch64")
  with pytest.raises(LaunchError, match="not in this object"):
    launch(c.code_object, "nope", grid=1, block=4, args=[], arch="aarch64")


@pytest.mark.parametrize("arch", ARCHES)
def test_barriers_order_phases_and_trace_records_instructions(arch):
  """Each work-item reads its neighbour's shared slot after a barrier, in 2 workgroups with a 2-D block."""
  c = kern("""kernel @rot(%y: global<i32>) {
  %s: local<i32> = shared 12
  %t: i32 = workitem.id.x
  %u: i32 = workitem.id.y
  %g: i32 = workgroup.id.x
  %three: i32 = const 3
  %one: i32 = const 1
  %twelve: i32 = const 12
  %a: i32 = mul %u, %three
  %l: i32 = add %a, %t
  %h: i32 = mul %g, %twelve
  %v: i32 = add %h, %l
  store %s, %l, %v
  barrier
  %n: i32 = add %l, %one
  %m: i32 = rem %n, %twelve
  %r: i32 = load %s, %m
  %o: i32 = add %h, %l
  store %y, %o, %r
}
""", arch)
  y, trace = np.zeros(24, np.int32), []
  stats = launch(c.code_object, "rot", grid=2, block=(3, 4), args=[y], arch=arch, trace=trace)
  want = np.array([g * 12 + (l + 1) % 12 for g in range(2) for l in range(12)])
  np.testing.assert_array_equal(y, want)
  assert stats.workgroups == 2 and stats.waves == 24 and len(trace) == stats.instructions
  assert {t[0] for t in trace} == set(range(24))


def _exact_round_f32(q: Fraction) -> np.float32:
  """q rounded to the nearest float32 (ties to even), by search over the two neighbours."""
  f = np.float32(float(q))
  cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
  return min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.array([c]).view(np.uint32)[0]) & 1))


def test_fma_service_rounds_once():
  from gputwin.emu.host.libm import SERVICES
  fmaf = SERVICES["fmaf"][2]
  rng = np.random.default_rng(1)
  x = (rng.standard_normal(2000) * 8).astype(np.float32)
  y = (rng.standard_normal(2000) * 8).astype(np.float32)
  z = -(x.astype(np.float64) * y).astype(np.float32)    # cancellation: where double rounding shows
  z[::2] = (rng.standard_normal(1000) * 1e-3).astype(np.float32)
  for a, b, c in zip(x, y, z):
    assert fmaf(a, b, c) == _exact_round_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def test_bf16_service_rounds_to_nearest_even():
  from gputwin.emu.host.libm import bf16_bits
  for bits, want in ((0x3f808000, 0x3f80), (0x3f818000, 0x3f82), (0x3f808001, 0x3f81), (0x7f7fffff, 0x7f80),
                     (0xff800000, 0xff80)):
    assert bf16_bits(np.array([bits], np.uint32).view(np.float32)[0]) == want
  assert bf16_bits(np.float64(1.0 + 2.0 ** -8 + 2.0 ** -40)) == 0x3f81   # f64: one rounding (f32 first would tie)
  assert bf16_bits(np.float32("nan")) & 0x7fc0 == 0x7fc0


@pytest.mark.parametrize("arch", ARCHES)
def test_barrier_in_divergent_loop_releases_the_fibers_still_running(arch):
  """Work-item i loops i % 4 times over a barrier: fibers that finished no longer hold the others back."""
  c = kern("""kernel @div(%y: global<i32>) {
  %i: i32 = workitem.id.x
  %three: i32 = const 3
  %lo: i32 = const 0
  %st: i32 = const 1
  %hi: i32 = and %i, %three
  %r: i32 = for %k: i32 = %lo, %hi, %st iter(%acc: i32 = %lo) {
    barrier
    %w: i32 = add %acc, %k
    yield %w
  }
  %g: i32 = workgroup.id.x
  %eight: i32 = const 8
  %o: i32 = mul %g, %eight
  %p: i32 = add %o, %i
  store %y, %p, %r
}
""", arch)
  y = np.full(16, -1, np.int32)
  launch(c.code_object, "div", grid=2, block=8, args=[y], arch=arch)
  assert y.tolist() == [sum(range(i % 8 % 4)) for i in range(16)]


def test_mutated_objects_are_gputwin_errors_never_host_crashes():
  """Truncated and bit-flipped objects: each launch runs, or fails with a GputwinError (malformed ELF or metadata,
  an emulated fault or trap, a budget stop), never another exception."""
  import random
  from gputwin.compiler import examples
  from gputwin.errors import GputwinError
  obj = compile(examples.saxpy, "aarch64").code_object
  rng = random.Random(7)
  for trial in range(300):
    b = bytearray(obj)
    if trial % 3 == 0:
      b = b[:rng.randrange(len(b))]
    else:
      for _ in range(rng.randrange(1, 8)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    try:
      launch(bytes(b), "saxpy", grid=1, block=16, args=[np.float32(2), np.ones(16, np.float32),
                                                       np.ones(16, np.float32), 16], arch="aarch64",
             max_instructions=50000)
    except GputwinError:
      pass
