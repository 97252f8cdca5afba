"""Guarded (predicated) instructions in the native tier with the checkers on: an instruction whose guard holds for no
thread standing at it is skipped by the interpreter, checks and all (core.step_simt), so a native block records
which of its guard classes ran (codegen.guard_classes, Native.ran) and the checkers' state moves only for those
(checks.Checks.ran). The oracle is the interpreter (GPUTWIN_JIT=0) on the same launch: the same error text, or the
same output bits and instruction counts; the native tier runs blocks the interpreter does not, and it runs them."""
import random

import numpy as np
import pytest

from gputwin.emu import launch as emu_launch
from gputwin.emu.ir3.launch import launch
from gputwin.emu.native import tier
from gputwin.isa import ir3
from gputwin.isa.ir3 import listing
from tests.emu.ir3.test_ir3_mesa_run import CASES as MESA_CASES, KERNELS

pytest.importorskip("llvmlite")

GID = "shl.b r0.w, r48.x, 6\nadd.u r0.w, r0.w, r0.x\n"  # global id (local size 64); two workgroups: r0.w 0..127


@pytest.fixture
def tiers(tier_runs):
  """Run fn() interpreted and with every block compiled at first sight: per tier (("ok", result) or ("error", text),
  native block runs)."""
  def both(fn):
    return [(("ok", r) if e is None else ("error", f"{type(e).__name__}: {e}"), n) for r, e, n in tier_runs(fn)]
  return both


def _ir3(body: str, gpu: str = "a630", grid: int = 2):
  """An ir3 program after the global id in r0.w: IBO 0 holds 3 * i, IBO 1 (zeros) is what it stores; returns the
  stored bits and the instruction counts."""
  code = ir3.assemble(GID + body + "end\n", gpu)

  def go():
    bufs = {0: np.arange(64 * grid, dtype=np.uint32) * 3, 1: np.zeros(64 * grid, np.uint32)}
    st = launch(code, "main", grid=(grid,), args=bufs, arch=gpu, shader=listing.Shader.explicit(gpu, code),
                checks=True, max_instructions=4000)
    return bufs[1].tobytes(), st.instructions, st.lane_instructions
  return go


# p0.x holds for r0.w < LIM; a guarded write of r1.x in one native block, read unguarded in the next (a jump between)
WRITE_THEN_READ = """cmps.u.lt p0.x, r0.w, {lim}
predt
mov.u32u32 r1.x, r0.w
prede
jump #next
next:
add.u r1.y, r1.x, 1
stib.b.untyped.1d.u32.1.imm.base0 r1.y, r0.w, 1
"""
# ... read under the same guard in the same block (the write covers it), then by everyone in the next block
SAME_CLASS = """cmps.u.lt p0.x, r0.w, {lim}
predt
mov.u32u32 r1.x, r0.w
add.u r1.y, r1.x, 1
stib.b.untyped.1d.u32.1.imm.base0 r1.y, r0.w, 1
prede
jump #next
next:
add.u r1.z, r1.x, 2
stib.b.untyped.1d.u32.1.imm.base0 r1.z, r0.w, 1
"""
# a guarded read of r1.z, which nothing writes
GUARDED_READ = """mov.u32u32 r1.x, 1
jump #next
next:
cmps.u.lt p0.x, r0.w, {lim}
predt
add.u r1.y, r1.z, 1
prede
stib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 1
"""
# a guarded ldib into r1.x, read in the next block without the (sy) that waits for it
MISSING_SY = """mov.u32u32 r1.x, 0
cmps.u.lt p0.x, r0.w, {lim}
predt
ldib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 0
prede
jump #next
next:
add.u r1.y, r1.x, 1
stib.b.untyped.1d.u32.1.imm.base0 r1.y, r0.w, 1
"""
# a guarded (sy) that clears the pending ldib result only when its region runs
GUARDED_SY = """cmps.u.lt p0.x, r0.w, 200
predt
ldib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 0
prede
cmps.u.lt p0.x, r0.w, {lim}
predt
(sy)mov.u32u32 r1.z, 3
prede
jump #next
next:
add.u r1.y, r1.x, 1
stib.b.untyped.1d.u32.1.imm.base0 r1.y, r0.w, 1
"""

# (program, LIM, whether the interpreter reports it): LIM 0 runs the region for no thread, 1 for thread 0 of
# workgroup 0 alone (both waves then run it for the checkers: they stand at it together), 200 for every thread
SEEDED = {
  "write skipped, read in the next block": (WRITE_THEN_READ, 0, "add.u r1.y, r1.x, 1: reads v16 (S0), which was never"),
  "write by one thread covers both waves": (WRITE_THEN_READ, 1, None),
  "write by every thread": (WRITE_THEN_READ, 200, None),
  "same-class read, region skipped": (SAME_CLASS, 0, "add.u r1.z, r1.x, 2: reads v16 (S0), which was never"),
  "same-class read, region runs": (SAME_CLASS, 1, None),
  "guarded read skipped": (GUARDED_READ, 0, None),
  "guarded read runs": (GUARDED_READ, 1, "add.u r1.y, r1.z, 1: reads v18 (S0), which was never written"),
  "guarded load skipped": (MISSING_SY, 0, None),
  "guarded load runs": (MISSING_SY, 1, "add.u r1.y, r1.x, 1: reads r1.x, which the instruction at PC 0x28 writes "
                        "asynchronously, without the (sy) that waits for it"),
  "guarded (sy) skipped": (GUARDED_SY, 0, "add.u r1.y, r1.x, 1: reads r1.x, which the instruction at PC 0x20 "
                           "writes asynchronously, without the (sy) that waits for it"),
  "guarded (sy) runs": (GUARDED_SY, 1, None),
}


@pytest.mark.parametrize("chip", ["a630", "a730"])
@pytest.mark.parametrize("name", sorted(SEEDED))
def test_guarded_regions_check_as_interpreted(tiers, chip, name):
  body, lim, bug = SEEDED[name]
  (a, _), (b, runs) = tiers(_ir3(body.format(lim=lim), chip))
  assert a == b
  assert a[0] == ("error" if bug else "ok"), a
  if bug:
    assert bug in a[1], a
  assert runs > 0, "no block ran natively"


@pytest.mark.parametrize("chip", ["a630", "a730"])
def test_predicated_region_runs_natively_with_checkers(tiers, monkeypatch, chip):
  """The region (predt, guarded mov and add, prede) is part of one native block with the checkers on: every
  instruction of this clean program runs natively."""
  (a, _), (b, runs) = tiers(_ir3(SAME_CLASS.format(lim=1), chip))
  assert a == b and a[0] == "ok"
  monkeypatch.setenv("GPUTWIN_JIT", "force")
  code = ir3.assemble(GID + SAME_CLASS.format(lim=1) + "end\n", chip)
  bufs = {0: np.zeros(128, np.uint32), 1: np.zeros(128, np.uint32)}
  st = launch(code, "main", grid=(2,), args=bufs, arch=chip, shader=listing.Shader.explicit(chip, code), checks=True)
  assert st.native_instructions == st.instructions, (st.native_instructions, st.instructions)


# ------------------------------------------------------------------------------------------------ random programs
def _program(r: random.Random) -> str:
  """Predicate set-ups (thresholds every, some or no thread passes), regions, jumps between blocks, guarded or plain
  ALU ops with and without (sy)/(ss), IBO loads and stores; r1.x..w start written, r2.x..w not."""
  regs = [f"r{i}.{c}" for i in (1, 2) for c in "xyzw"]
  src = lambda: r.choice(regs[:4] * 3 + regs[4:] + ["r0.w"])
  out, region, labels = [GID, "mov.u32u32 r1.x, r0.x\nmov.u32u32 r1.y, 5\nmov.u32u32 r1.z, r0.w\nmov.u32u32 r1.w, 1\n"
                         "cmps.u.lt p0.x, r0.w, 64\n"], False, 0
  for _ in range(r.randint(4, 16)):
    k = r.random()
    if k < 0.15:
      out.append(f"cmps.u.{r.choice(['lt', 'ge'])} p0.x, r0.w, {r.choice([0, 1, 40, 64, 100, 200])}\n")
    elif k < 0.3:
      p = r.choice(["predt", "predf", "prede"])
      out.append(p + "\n")
      region = p != "prede"
    elif k < 0.4 and not region:
      out.append(f"jump #l{labels}\nl{labels}:\n")
      labels += 1
    elif k < 0.55:
      out.append(f"ldib.b.untyped.1d.u32.1.imm.base0 {r.choice(regs)}, r0.w, 0\n")
    elif k < 0.65:
      out.append(f"stib.b.untyped.1d.u32.1.imm.base0 {src()}, r0.w, 1\n")
    else:
      op, flag = r.choice(["add.u", "xor.b", "max.s", "add.f"]), r.choice(["", "(sy)", "(sy)", "(ss)"])
      out.append(f"{flag}{op} {r.choice(regs)}, {src()}, {r.choice([src(), '3'])}\n")
  return "".join(out)[len(GID):] + "prede\n"


@pytest.mark.parametrize("chip", ["a630", "a730"])
def test_random_guarded_programs_check_as_interpreted(tiers, chip):
  """Template-built random programs, two waves: both tiers end the same way (the same checker text, or the same
  bits and counts); many run native blocks before a checker stops them, or to the end."""
  r = random.Random(f"checks-native-guards/{chip}")
  bad, seen = [], {"ok": 0, "error": 0}
  for _ in range(50):
    body = _program(r)
    (a, _), (b, runs) = tiers(_ir3(body, chip))
    if a != b:
      bad.append((body, a, b))
    seen[a[0]] += runs > 0
  assert not bad, bad[:2]
  assert not tier.FAILED, tier.FAILED[:3]
  assert seen["ok"] > 10 and seen["error"] > 5, seen


# ------------------------------------------------------------------------------------------------ Mesa kernels
@pytest.mark.skipif(not KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")
@pytest.mark.parametrize("adreno", ["a630", "a730"])
@pytest.mark.parametrize("name", ["saxpy", "reduce_shared"])
def test_mesa_kernels_with_checkers_run_as_natively_as_without(monkeypatch, tmp_path, adreno, name):
  """Mesa's saxpy (predt, guarded ldib/mad/stib, prede) and reduce_shared (a predicated region between barriers at
  every step): with the checkers on, both tiers give numpy's bits and the same counts, and the native tier runs as
  many instructions as with the checkers off."""
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  got = []
  for jit, checks in (("0", True), ("force", True), ("force", False)):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    grid, args, check = MESA_CASES[name]()
    st = launch(KERNELS / adreno / f"{name}.bin", "main", grid=(grid,), args=args, arch=adreno, checks=checks)
    check()
    got.append(((st.instructions, st.lane_instructions), [a.tobytes() for a in args.values()],
                st.native_instructions))
  assert got[0][:2] == got[1][:2] == got[2][:2]
  assert got[1][2] == got[2][2] > 0, (got[1][2], got[2][2])


# ------------------------------------------------------------------------------------------------ PTX
PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 out, .param .u32 lim)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r5, [lim];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, %r5;
  @%p1 add.u32 %r2, %r1, 7;
  bra.uni NEXT;
NEXT:
  add.u32 %r3, %r2, %r1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd3, %rd2, %rd3;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""


@pytest.mark.parametrize("lim", [0, 1, 128])
def test_ptx_guarded_write_checks_as_interpreted(tiers, tmp_path, lim):
  """PTX `@%p1 add` in one native block, its result read in the next by every thread of four warps: reported when
  no thread ran it, not when one did (every warp standing there runs it for the checkers)."""
  path = tmp_path / "k.ptx"
  path.write_text(PTX)

  def go():
    out = np.zeros(128, np.int32)
    st = emu_launch(str(path), "k", grid=1, block=128, args=[out, np.int32(lim)], arch="sm_90")
    return out.tobytes(), st.instructions, st.lane_instructions
  (a, _), (b, runs) = tiers(go)
  assert a == b
  assert (a[0] == "error") == (lim == 0), a
  if lim == 0:
    assert "add.u32 %r3, %r2, %r1: reads v" in a[1] and "which was never written" in a[1], a
  assert runs > 0
