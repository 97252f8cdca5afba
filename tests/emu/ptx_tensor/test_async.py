"""cp.async and mbarrier (kernels/async.cu) on the PTX emulator, checked against numpy and the rules of PTX ISA 9.0
9.7.9.25.3 (cp.async, its groups) and 9.7.13.15 (mbarrier phases, arrivals, transaction counts)."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.emu.ptx.tensor import AsyncCopies
from gputwin.errors import GputwinError


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cp_async_double_buffer_zero_fill(ptx, arch):
  rng = np.random.default_rng(7)
  ntiles, tail = 3, 8
  g = rng.integers(1, 100, ntiles * 128).astype(np.int32)
  out = np.zeros(ntiles * 128, np.int32)
  launch(ptx("async", arch), "cp_async_double", grid=1, block=32, args=[out, g, np.int32(ntiles), np.int32(tail)],
         arch=arch)
  tiles = g.reshape(ntiles, 128).copy()
  tiles[:, 128 - tail // 4:] = 0  # thread 31's copies read 16 - tail bytes: the rest is zero-filled
  want = tiles + 1000 * np.roll(tiles, -5, axis=1)
  np.testing.assert_array_equal(out.reshape(ntiles, 128), want)


def test_cp_async_ignore_src_and_src_size(ptx):
  g = (np.arange(128, dtype=np.int64) * 0x01010101 + 0x10203040).astype(np.uint32).view(np.int32)
  out = np.zeros(128, np.int32)
  launch(ptx("async"), "cp_async_small", grid=1, block=64, args=[out, g])
  t = np.arange(64)
  np.testing.assert_array_equal(out[:64], np.where(t % 4 == 1, 0, g[:64]))  # ignore-src true: zeros
  want = g[64:].view(np.uint8).reshape(32, 8).copy()
  want[np.arange(8)[None, :] >= (np.arange(32) % 9)[:, None]] = 0  # bytes past src-size: zeros
  np.testing.assert_array_equal(out[64:].view(np.uint8).reshape(32, 8), want)


@pytest.mark.parametrize("checks", [False, True])
def test_cp_async_native(ptx, monkeypatch, checks):
  """cp.async in the native tier (GPUTWIN_JIT=force) with the checkers off: the copies (a register src-size, bytes
  past it zero-filled), their groups and the __syncwarp()s run natively, every warp-instruction, with the
  interpreter's results; with the checkers on the cp.* run interpreted (the copies in flight are the async
  checker's). A misaligned destination (thread 5's) stops with the same error on both tiers."""
  rng = np.random.default_rng(8)
  ntiles, tail = 3, 8
  g = rng.integers(1, 100, ntiles * 128).astype(np.int32)
  got = []
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    out = np.zeros(ntiles * 128, np.int32)
    st = launch(ptx("async"), "cp_async_double", grid=1, block=32, args=[out, g, np.int32(ntiles), np.int32(tail)],
                checks=checks)
    got.append((out, st))
  (a, _), (b, st) = got
  np.testing.assert_array_equal(a, b)
  copies = 3 * ntiles + 2  # cp.async ntiles, commit_group ntiles + 1, wait_group ntiles, wait_all
  interpreted = st.instructions - st.native_instructions
  assert interpreted == 0 if not checks else interpreted >= copies, (interpreted, st.instructions)
  g = (np.arange(128, dtype=np.int64) * 0x01010101 + 0x10203040).astype(np.uint32).view(np.int32)
  outs = []
  for jit in ("0", "force"):  # 4- and 8-byte .ca copies, ignore-src (a predicate) and a register src-size
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    outs.append(np.zeros(128, np.int32))
    st = launch(ptx("async"), "cp_async_small", grid=1, block=64, args=[outs[-1], g], checks=checks)
  np.testing.assert_array_equal(*outs)
  assert (st.native_instructions == st.instructions) != checks, (st.native_instructions, st.instructions)
  body = "  cp.async.cg.shared.global [%r2], [%rd1], 16;"
  errs = []
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    with pytest.raises(GputwinError) as e:
      launch(warp(body), "k", grid=1, block=32, args=[np.zeros(16 * 32, np.uint32)], checks=False)
    errs.append(str(e.value))
  assert errs[0] == errs[1] and "16-aligned" in errs[0], errs


def test_mbarrier_producer_consumer(ptx):
  rounds = 5
  x = np.arange(rounds * 32, dtype=np.int32) * 7 - 40
  out = np.zeros(rounds * 32, np.int32)
  launch(ptx("async"), "mbarrier_pc", grid=2, block=64, args=[out, x, np.int32(rounds)])
  r, lane = np.divmod(np.arange(rounds * 32), 32)
  np.testing.assert_array_equal(out, x[r * 32 + (lane + r) % 32] * 3 + r)


def test_mbarrier_transaction_count(ptx):
  out = np.zeros(32, np.uint32)
  launch(ptx("async"), "mbarrier_tx", grid=1, block=32, args=[out])
  # thread 0's arrival (the one expected) leaves the phase open while 64 bytes are owed (done0 = 0, one arrival
  # pending in its state); four complete_tx of 16 close it (done1), and the state's phase is seen complete (done2)
  want = np.full(32, 0b010, np.uint32)
  want[0] = 0b110 | 1 << 8
  np.testing.assert_array_equal(out, want)


def test_async_groups_follow_wait_group():
  """cp.async.wait_group N: every committed group but the N most recent is complete; uncommitted copies stay."""
  c = AsyncCopies(1, 2)
  w, l0, l1 = np.array([0]), np.array([0]), np.array([1])
  for k in range(3):  # thread 0: groups 0, 1, 2 of one copy each
    c.issue(w, l0, np.array([16 * k]), 16)
    c.committed[0, 0] += 1
  c.issue(w, l0, np.array([64]), 4)  # not committed yet
  c.issue(w, l1, np.array([128]), 8)
  c.wait(w, l0, 1)
  np.testing.assert_array_equal(c.in_flight(0, 0), [[32, 16], [64, 4]])
  np.testing.assert_array_equal(c.in_flight(0, 1), [[128, 8]])
  c.wait(w, l0, 0)
  np.testing.assert_array_equal(c.in_flight(0, 0), [[64, 4]])


def one_thread(body: str, regs: str = "") -> str:
  return f""".version 8.7
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out) {{
  .shared .align 8 .b64 bar;
  .shared .align 16 .b8 sbuf[64];
  .reg .b64 %rd<8>; .reg .b32 %r<8>; .reg .pred %p<8>; {regs}
  ld.param.u64 %rd1, [out];
{body}
  ret;
}}
"""


def warp(body: str) -> str:
  """A kernel of one warp: thread t's source %rd1 = out + 16t, destination %r2 = sbuf + 16t (thread 5's 8 more)."""
  return one_thread("""  .shared .align 16 .b8 wbuf[1024];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd1, %rd1, %rd2;
  mov.u32 %r2, wbuf;
  shl.b32 %r3, %r1, 4;
  add.u32 %r2, %r2, %r3;
  setp.eq.u32 %p1, %r1, 5;
  selp.u32 %r4, 8, 0, %p1;
  add.u32 %r2, %r2, %r4;
""" + body)


def test_mbarrier_arrive_drop_and_counts():
  """arrive_drop lowers the expected count of later phases too; arrive with a count; pending_count of a state."""
  body = """
  mbarrier.init.shared::cta.b64 [bar], 3;
  mbarrier.arrive_drop.shared::cta.b64 %rd2, [bar];
  mbarrier.pending_count.b64 %r1, %rd2;
  mbarrier.arrive.shared::cta.b64 %rd3, [bar], 1;
  mbarrier.test_wait.parity.shared::cta.b64 %p1, [bar], 0;
  mbarrier.arrive.shared::cta.b64 %rd4, [bar], 1;
  mbarrier.test_wait.parity.shared::cta.b64 %p2, [bar], 0;
  mbarrier.pending_count.b64 %r2, %rd4;
  mbarrier.arrive.shared::cta.b64 %rd5, [bar], 2;
  mbarrier.test_wait.parity.shared::cta.b64 %p3, [bar], 1;
  mbarrier.test_wait.shared::cta.b64 %p4, [bar], %rd5;
  selp.u32 %r3, 1, 0, %p1; selp.u32 %r4, 1, 0, %p2; selp.u32 %r5, 1, 0, %p3; selp.u32 %r6, 1, 0, %p4;
  st.global.v4.u32 [%rd1], {%r3, %r4, %r5, %r6};
  st.global.v2.u32 [%rd1+16], {%r1, %r2};"""
  out = np.zeros(6, np.uint32)
  launch(one_thread(body), "k", grid=1, block=1, args=[out])
  # 3 expected; drop: 2 pending, 2 expected from now on; arrive: 1 pending (phase 0 open); arrive: phase 0
  # completes, 2 pending again; arrive(2): phase 1 completes, which the state taken in it sees
  np.testing.assert_array_equal(out, [0, 1, 1, 1, 3, 1])


@pytest.mark.parametrize("body, match", [
  ("  cp.async.cg.shared.global [sbuf+8], [%rd1], 16;", "16-aligned"),
  ("  cp.async.ca.shared.global [sbuf], [%rd1], 2;", "cp-size 2"),
  ("  mbarrier.init.shared::cta.b64 [sbuf+4], 1;", "8-aligned"),
])
def test_async_errors(body, match):
  with pytest.raises(GputwinError, match=match):
    launch(one_thread(body), "k", grid=1, block=1, args=[np.zeros(16, np.uint32)])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_libcu_barrier_and_memcpy_async(ptx, arch):
  x = np.arange(256, dtype=np.int32) * 3 - 100
  out = np.zeros(256, np.int32)
  launch(ptx("libcu", arch), "cuda_barrier", grid=2, block=128, args=[out, x], arch=arch)
  t = np.arange(128)
  s = x.reshape(2, 128) * 2
  np.testing.assert_array_equal(out.reshape(2, 128), s[:, 127 - (t + 1) % 128] + (t + 1) % 128)
  out[:] = 0
  launch(ptx("libcu", arch), "cuda_memcpy_async", grid=2, block=128, args=[out, x], arch=arch)
  np.testing.assert_array_equal(out.reshape(2, 128), x.reshape(2, 128)[:, ::-1])
