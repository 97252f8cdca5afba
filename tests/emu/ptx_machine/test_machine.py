"""The shared machine under the PTX frontend: per-thread PCs (divergence, reconvergence, independent thread
scheduling), `.sync` rendezvous, barriers with exit, calls with recursion, serial == batched, and the errors a buggy
kernel gets (checkers, faults, watchdog). Kernels: machine.cu, compiled by nvcc 13 (skipped without it); references
are numpy or plain Python."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuCheckError, EmuError, EmuFault, LaunchError

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) not installed")


@pytest.fixture(scope="module", params=["sm_80", "sm_90"])
def ptx(request, tmp_path_factory):
  out = tmp_path_factory.mktemp("ptx") / f"machine_{request.param}.ptx"
  subprocess.run(["nvcc", "-ptx", f"-arch={request.param}", "-O3", str(HERE / "machine.cu"), "-o", str(out)],
                 check=True, capture_output=True)
  return out, request.param


def run(ptx, kernel, **kw):
  path, arch = ptx
  return launch(path, kernel, arch=arch, **kw)


def test_divergent_loops_reconverge(ptx):
  out = np.zeros(64, np.int32)
  run(ptx, "diverge", grid=1, block=64, args=[out])
  ref = []
  for t in range(64):
    a = 0
    for i in range(t):
      a = a + i if i & 1 else a ^ (i * 3)
    ref.append(a)
  assert out.tolist() == ref


def test_shuffle_among_a_member_mask_inside_divergent_code(ptx):
  out = np.zeros(64, np.int32)
  run(ptx, "half_shfl", grid=1, block=64, args=[out])
  t = np.arange(64)
  ref = np.where(t % 32 < 16, (t ^ 1) * 10, -t * 10)
  assert out.tolist() == ref.tolist()


def test_spin_wait_between_warps_finishes(ptx):
  out, flag = np.zeros(64, np.int32), np.zeros(1, np.int32)
  run(ptx, "spin_warps", grid=1, block=64, args=[out, flag])
  s = sum(range(200))
  assert out.tolist() == [s + t for t in range(32)] + [s] * 32 and flag[0] == s


def test_spin_wait_inside_one_warp_finishes(ptx):
  out = np.zeros(32, np.int32)
  run(ptx, "spin_lanes", grid=1, block=32, args=[out])
  assert out[0] == 7 and out[31] == 1


def test_exit_releases_the_barrier(ptx):
  out = np.full(128, -1, np.int32)
  run(ptx, "early_exit", grid=1, block=128, args=[out, np.int32(100)])
  assert out[:100].tolist() == list(range(99, -1, -1)) and (out[100:] == -1).all()


def test_recursive_calls(ptx):
  out = np.zeros(96, np.int32)
  fib = lambda n: n if n < 2 else fib(n - 1) + fib(n - 2)
  run(ptx, "fibk", grid=1, block=96, args=[out])
  assert out.tolist() == [fib(t % 12) for t in range(96)]


@pytest.mark.parametrize("kernel,block,args", [("diverge", 64, lambda: [np.zeros(64, np.int32)]),
                                               ("fibk", 64, lambda: [np.zeros(64, np.int32)]),
                                               ("half_shfl", 64, lambda: [np.zeros(64, np.int32)])])
def test_serial_schedule_gives_the_same_bits_and_traces(ptx, kernel, block, args):
  a, b = args(), args()
  ta, tb = [], []
  run(ptx, kernel, grid=2, block=block, args=a, trace=ta)
  run(ptx, kernel, grid=2, block=block, args=b, trace=tb, serial=True)
  assert all(np.array_equal(x, y) for x, y in zip(a, b))
  per = lambda t: sorted(t, key=lambda r: r[0])  # per-warp order is the program order either way
  assert [r[:3] for r in per(ta)] == [r[:3] for r in per(tb)]


def test_shared_memory_race_is_reported(ptx):
  with pytest.raises(EmuCheckError, match="LDS|race|shared"):
    run(ptx, "race", grid=1, block=64, args=[np.zeros(64, np.int32)])
  run(ptx, "race", grid=1, block=64, args=[np.zeros(64, np.int32)], checks=False)  # unchecked, it runs


# warp 1 writes s[lane] (mode 0 or 2), warp 0 reads it (mode 1 or 2), no barrier between: a race only in mode 2
MODES = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 mode)
{
  .reg .pred %p<4>; .reg .b32 %r<8>; .reg .b64 %rd<4>;
  .shared .align 4 .b32 s[32];
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [mode];
  mov.u32 %r2, %tid.x;
  and.b32 %r3, %r2, 31;
  shl.b32 %r4, %r3, 2;
  mov.u32 %r5, s;
  add.u32 %r5, %r5, %r4;
  setp.ge.u32 %p1, %r2, 32;
  setp.ne.u32 %p2, %r1, 1;
  and.pred %p3, %p1, %p2;
  @%p3 st.shared.u32 [%r5], %r2;
  setp.ne.u32 %p2, %r1, 0;
  not.pred %p1, %p1;
  and.pred %p3, %p1, %p2;
  mov.u32 %r6, 0;
  @%p3 ld.shared.u32 %r6, [%r5];
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
}
"""


@pytest.mark.parametrize("mode", ["0", "force"])
@pytest.mark.parametrize("epochs", [None, 2])
def test_the_race_checker_sees_no_access_of_an_earlier_launch(mode, epochs, monkeypatch):
  """A launch starts on the register files and race tables of the last one of its shape (checks.attach): its
  barrier epochs go on past every one the table holds, so a write of the last launch (warp 1, mode 0) is no race
  with a read of this one (warp 0, mode 1), while both in one launch (mode 2) are. (`epochs` 2: every table's
  epochs reach checks.EPOCHS, its int32 entries' limit, and the next launch starts a zeroed one.)"""
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  if epochs is not None:
    monkeypatch.setattr("gputwin.emu.checks.EPOCHS", epochs)
  go = lambda m: launch(MODES, "k", grid=1, block=64, args=[np.zeros(64, np.uint32), np.uint32(m)], arch="sm_90")
  for m in (0, 1, 0, 1):
    go(m)
  with pytest.raises(EmuCheckError, match="LDS race"):
    go(2)
  go(1)


def test_thread_outside_its_member_mask_is_reported(ptx):
  with pytest.raises(EmuCheckError, match="not in its own member mask"):
    run(ptx, "bad_mask", grid=1, block=32, args=[np.zeros(32, np.int32)])


def test_divergent_aligned_barrier_is_reported(ptx):
  with pytest.raises(EmuError, match="divergent|barrier"):
    run(ptx, "divergent_barrier", grid=1, block=32, args=[np.zeros(32, np.int32), np.int32(16)])


def test_out_of_bounds_names_cta_thread_and_address(ptx):
  out = np.zeros(256, np.float32)
  with pytest.raises(EmuFault) as e:
    run(ptx, "oob", grid=2, block=128, args=[out, np.int32(16)])
  msg = str(e.value)
  assert "CTA (1,0,0)" in msg and "thread (112,0,0)" in msg and "st.global" in msg and e.value.access == "write"


def test_runaway_loop_stops_at_the_watchdog(ptx):
  with pytest.raises(EmuError, match="max-instructions"):
    run(ptx, "runaway", grid=1, block=32, args=[np.zeros(2, np.int32), np.int32(5)], max_instructions=20000)


def test_bad_launches(ptx):
  with pytest.raises(LaunchError, match="no kernel 'nope'"):
    run(ptx, "nope", grid=1, block=32, args=[])
  with pytest.raises(LaunchError, match="takes 1 arguments"):
    run(ptx, "diverge", grid=1, block=32, args=[])
  with pytest.raises(LaunchError, match="exceeds 1024"):
    run(ptx, "diverge", grid=1, block=2048, args=[np.zeros(1, np.int32)])


@pytest.mark.parametrize("seed", [0, 1])
def test_barrier_reductions(ptx, seed):
  x = np.random.default_rng(seed).integers(-3, 100, 96).astype(np.int32)
  if seed:
    x[5] = 77
  out = np.zeros(96, np.int32)
  run(ptx, "bar_red", grid=1, block=96, args=[out, x])
  ref = (x > 10).sum() * 4 + 2 * (x >= 0).all() + (x == 77).any()
  assert (out == ref).all()


def test_reading_a_cp_async_destination_before_the_wait_is_reported(ptx):
  x = np.arange(32, dtype=np.float32)
  with pytest.raises(EmuCheckError, match="cp.async"):
    run(ptx, "no_wait", grid=1, block=32, args=[np.zeros(32, np.float32), x])


def test_cta_scoped_atomics_across_ctas_are_reported(ptx):
  c = np.zeros(5, np.int32)
  run(ptx, "block_scoped", grid=4, block=32, args=[c, np.int32(0)])
  assert c.tolist() == [0, 32, 32, 32, 32]
  with pytest.raises(EmuCheckError, match="CTAs 0 and 1.*cta"):
    run(ptx, "block_scoped", grid=4, block=32, args=[np.zeros(5, np.int32), np.int32(1)])


@pytest.mark.parametrize("kernel, grid, block, args", [
  ("race", 1, 64, lambda: [np.zeros(64, np.int32)]),
  ("late_write", 1, 64, lambda: [np.zeros(64, np.int32)]),
  ("bad_mask", 1, 32, lambda: [np.zeros(32, np.int32)]),
  ("divergent_barrier", 1, 32, lambda: [np.zeros(32, np.int32), np.int32(16)]),
  ("oob", 2, 128, lambda: [np.zeros(256, np.float32), np.int32(16)]),
])
def test_checker_and_fault_text_is_the_same_on_both_tiers(ptx, monkeypatch, tmp_path, kernel, grid, block, args):
  """With the checkers on (the default) native blocks run too (emu/checks.py `native`); a seeded bug or a fault in
  them reads exactly as the interpreter reports it."""
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  texts = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    with pytest.raises((EmuError, EmuFault)) as e:
      run(ptx, kernel, grid=grid, block=block, args=args())
    texts.append(str(e.value))
  assert texts[0] == texts[1]


@pytest.mark.parametrize("kernel, grid, block, args", [
  ("diverge", 1, 64, lambda: [np.zeros(64, np.int32)]),
  ("race", 1, 64, lambda: [np.zeros(64, np.int32)]),
  ("tree_sum", 4, 64, lambda: [np.zeros(4, np.int32), np.arange(256, dtype=np.int32)]),
])
def test_instruction_counts_are_the_same_on_both_tiers(ptx, monkeypatch, tmp_path, kernel, grid, block, args):
  """Warp- and thread-instructions a launch reports do not depend on the tier: threads of a warp waiting inside a
  native block join the ones reaching them (core._inside), and a nop counts the threads running it."""
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  got = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    st = run(ptx, kernel, grid=grid, block=block, args=args(), checks=False)
    got.append((st.instructions, st.lane_instructions))
  assert got[0] == got[1]


def test_threads_waiting_at_a_barrier_join_the_native_block(ptx, monkeypatch, tmp_path):
  """tree_sum's diverged steps: the threads that skip the add stand at the barrier ending its block (and at the
  kernel's exit, after `if (t == 0)`); the block runs natively for the others and they arrive or exit together
  (core._inside, _tail), so every warp-instruction is native, with the interpreter's counts and numpy's sums."""
  from gputwin.emu.native import STATS
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  x = np.arange(4 * 64, dtype=np.int32) * 7 - 100
  got = {}
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    out = np.zeros(4, np.int32)
    before = STATS["wave_instructions"]
    st = run(ptx, "tree_sum", grid=4, block=64, args=[out, x], checks=False)
    assert (out == x.reshape(4, 64).sum(axis=1)).all()
    got[mode] = (st.instructions, st.lane_instructions, STATS["wave_instructions"] - before)
  assert got["0"][:2] == got["force"][:2]
  assert got["force"][2] == got["force"][0], got  # (the final t == 0 store's warp: the others exit with it)
