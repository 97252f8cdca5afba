"""Control flow inside native blocks on the PTX machine: guarded arithmetic (`@%p`, `@!%p`), blocks that end with a
guarded or uniform branch (forward, and backward past the fair scheduler's yield budget) or a guarded exit. The
compiled tier (GPUTWIN_JIT=force) must give the interpreter's bits (GPUTWIN_JIT=0) and both numpy's."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu import launch

K = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 n, .param .u32 m)
{
  .reg .pred %p<4>; .reg .b32 %r<12>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [n]; ld.param.u32 %r7, [m];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mad.lo.s32 %r2, %r3, 64, %r2;
  mul.wide.u32 %rd2, %r2, 4; add.s64 %rd3, %rd1, %rd2;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 exit;
  and.b32 %r4, %r2, %r7;
  mov.u32 %r5, 0; mov.u32 %r6, 0;
loop:
  add.s32 %r5, %r5, %r2;
  setp.eq.u32 %p2, %r6, 3;
  @%p2 add.s32 %r5, %r5, 1000;
  @!%p2 xor.b32 %r5, %r5, 5;
  add.s32 %r6, %r6, 1;
  setp.le.u32 %p3, %r6, %r4;
  @%p3 bra loop;
  st.global.u32 [%rd3], %r5;
  ret;
}
"""


def reference(n: int, m: int, size: int) -> np.ndarray:
  out = np.full(size, -1, np.int64)
  for g in range(min(n, size)):
    r5 = 0
    for r6 in range((g & m) + 1):
      r5 = (r5 + g) & 0xffffffff
      r5 = (r5 + 1000) & 0xffffffff if r6 == 3 else r5 ^ 5
    out[g] = r5
  return out.astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("n,m", [(200, 127), (256, 0), (256, 5)])
def test_guards_branches_and_exits_in_native_blocks(n, m, monkeypatch):
  got = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    out = np.full(256, -1, np.int32)
    st = launch(K, "k", grid=4, block=64, args=[out, np.uint32(n), np.uint32(m)], arch="sm_90", checks=False)
    assert (out == reference(n, m, 256)).all(), mode
    assert (mode == "force") == (st.native_instructions == st.instructions)  # every instruction compiled
    got.append((out.tobytes(), st.instructions, st.lane_instructions))
  assert got[0] == got[1]


H = """.version 9.0
.target sm_90
.address_size 64
.visible .entry h(.param .u64 out, .param .u64 inp)
{
  .reg .pred %p<2>; .reg .b32 %r<10>; .reg .b64 %rd<6>;
  .shared .align 4 .b8 s[512];
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [inp];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mad.lo.s32 %r3, %r2, 128, %r1;
  mul.wide.u32 %rd3, %r3, 4; add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r4, [%rd4];
  shl.b32 %r5, %r1, 2; mov.u32 %r6, s; add.s32 %r6, %r6, %r5;
  st.shared.u32 [%r6], %r4;
  bar.sync 0;
  setp.ge.u32 %p1, %r1, 64;
  @%p1 bra L1;
  ld.shared.u32 %r7, [%r6+256]; add.s32 %r4, %r4, %r7; st.shared.u32 [%r6], %r4;
L1:
  bar.sync 0;
  setp.ge.u32 %p1, %r1, 20;
  @%p1 bra L2;
  ld.shared.u32 %r7, [%r6+80]; add.s32 %r4, %r4, %r7; st.shared.u32 [%r6], %r4;
L2:
  bar.sync 0;
  setp.lt.u32 %p1, %r4, 1900;
  @%p1 bra L3;
  mul.lo.u32 %r4, %r4, 3;
L3:
  bar.sync 0;
  add.s64 %rd5, %rd1, %rd3; st.global.u32 [%rd5], %r4;
  ret;
}
"""


def test_if_then_bodies_before_a_barrier_native(monkeypatch):
  """`@%p bra L; body; L: bar.sync` with whole warps taking the branch, some lanes of a warp, or none: the scheduler
  runs the body for the threads that go on and lets every thread arrive at once (core._hammock). A second launch
  (the bodies compiled) gives the interpreter's outputs and counts, and numpy's values."""
  inp = np.random.default_rng(5).integers(0, 1000, 3 * 128).astype(np.uint32)
  s0 = inp.reshape(3, 128).astype(np.int64)
  v = s0.copy()
  v[:, :64] += s0[:, 64:]
  s1 = v.copy()
  v[:, :20] += s1[:, 20:40]
  v = np.where(v < 1900, v, v * 3)
  got = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    for _ in range(2):
      out = np.zeros(3 * 128, np.uint32)
      st = launch(H, "h", grid=3, block=128, args=[out, inp], arch="sm_90", checks=False)
    np.testing.assert_array_equal(out, v.reshape(-1).astype(np.uint32))
    assert (mode == "force") == (st.native_instructions == st.instructions)
    got.append((st.instructions, st.lane_instructions))
  assert got[0] == got[1]


WARPSYNC = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>;
  .shared .align 4 .b32 s[64];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, s;
  add.u32 %r4, %r3, %r2;
  mul.lo.u32 %r5, %r1, 3;
  st.shared.u32 [%r4], %r5;
  bar.warp.sync -1;
  xor.b32 %r6, %r2, 4;
  add.u32 %r6, %r3, %r6;
  ld.shared.u32 %r7, [%r6];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""


@pytest.mark.parametrize("checks", [False, True])
@pytest.mark.parametrize("block", [64, 48])
def test_warp_sync_native_for_whole_warps(monkeypatch, checks, block):
  """bar.warp.sync (__syncwarp) with a full member mask: each thread reads its neighbour's (lane ^ 1) shared word
  written before it. With every thread of a warp there it runs natively (a nop: every member has arrived), the
  checkers on or off; a warp of 16 threads (block 48) meets it interpreted (the rendezvous decides). Both tiers
  give numpy's values and the same counts."""
  runs = []
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    out = np.zeros(block, np.uint32)
    st = launch(WARPSYNC, "k", grid=1, block=block, args=[out], arch="sm_90", checks=checks)
    np.testing.assert_array_equal(out, 3 * (np.arange(block) ^ 1))
    runs.append(st)
  a, b = runs
  assert (a.instructions, a.lane_instructions) == (b.instructions, b.lane_instructions)
  if block % 32 == 0:
    assert b.native_instructions == b.instructions
  else:  # (the full warp's block natively; the partial warp's from the bar.warp.sync on interpreted)
    assert 0 < b.native_instructions < b.instructions
