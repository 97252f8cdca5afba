"""Checkers in the native tier (issue 20): a launch with checkers on runs compiled blocks, each checker still catches
its seeded bug with the same error text as the interpreter (GPUTWIN_JIT=0), and the checkers' state a native block
leaves behind is what the interpreter's would be (a bug in an interpreted block after native ones is still found)."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuCheckError
from tests.emu.cases import CASES as SUITE, EXTRA
from tests.emu.test_asm import kernel
from tests.emu.test_checks_errors import GFX12_LOAD, GOOD, LDS_RACE, MFMA, MFMA_F32, RAW

pytest.importorskip("llvmlite")


@pytest.fixture
def tiers(tier_runs):
  """Run `fn` interpreted and with every block compiled at first sight; (error text or None, result) of each, and how
  many native block runs the second made (checker errors and faults: the text must be the same)."""
  def both(fn):
    (r0, e0, _), (r1, e1, n) = tier_runs(fn)
    return None if e0 is None else str(e0), None if e1 is None else str(e1), r0, r1, n
  return both


def _k(body, arch="gfx1100", n=64, lds=0, grid=1, checks=True, **kw):
  co = kernel(arch, body, lds=lds, **kw)

  def go():
    out = np.zeros(n * grid, np.int32)
    launch(co, "k", grid=grid, block=n, args=[out], checks=checks)
    return out
  return go


SPLIT = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[2:3]
  {read_early}
  s_branch .Lnext
.Lnext:
  {wait}
  v_add_nc_u32 v2, v2, v0
  {interp}
  global_store_b32 v1, v2, s[2:3]"""

# both waves read LDS[0] in one instruction, then wave 1 writes it with no barrier between: wave 0's read races it
TWO_READERS = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_mov_b32 v1, 0
  ds_load_b32 v2, v1
  s_waitcnt lgkmcnt(0)
  v_cmp_le_u32 vcc_lo, 32, v0
  s_and_saveexec_b32 s4, vcc_lo
  ds_store_b32 v1, v0
  s_or_b32 exec_lo, exec_lo, s4
  v_lshlrev_b32 v3, 2, v0
  global_store_b32 v3, v2, s[2:3]"""

# S_MEMTIME is a scalar memory instruction: its time returns like a load's data, counted by lgkmcnt
MEMTIME = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_memtime s[4:5]
  {wait}
  v_mov_b32 v2, s4
  s_waitcnt lgkmcnt(0)
  global_store_dword v1, v2, s[2:3]"""

# S_SENDMSG_RTN's answer (the time) returns like a scalar load's data: lgkmcnt on RDNA3, kmcnt on RDNA4 (LLVM's
# SQ_MESSAGE event; clang-22 waits for __builtin_readsteadycounter() that way)
RTN = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_sendmsg_rtn_b64 s[4:5], sendmsg(MSG_RTN_GET_REALTIME)
  {wait}
  v_mov_b32 v2, s4
  {kwait}
  global_store_b32 v1, v2, s[2:3]"""
RTN_WAIT = {"gfx1100": ("s_waitcnt lgkmcnt(0)", "lgkmcnt"), "gfx1200": ("s_wait_kmcnt 0", "kmcnt")}

CASES = {
  **{f"realtime_waitcnt_{a}": _k(RTN.format(wait="", kwait=w), arch=a) for a, (w, _) in RTN_WAIT.items()},
  "lds_race_two_readers": _k(TWO_READERS, lds=64),
  "waitcnt": _k(GOOD.replace("  s_waitcnt lgkmcnt(0)\n", "")),
  "uninit": _k(GOOD.replace("global_store_b32 v1, v0", "global_store_b32 v1, v7")),
  "lds_race_raw": _k(RAW.format(sync=""), lds=256),
  "lds_race_ww": _k(LDS_RACE.format(sync=""), lds=128),
  # a load in one native block, its result read in the next: the pending load crosses blocks
  "waitcnt_across_blocks": _k(SPLIT.format(read_early="", wait="", interp="")),
  # ... and first read by v_readfirstlane (cross-lane: interpreted, or a block of its own)
  "waitcnt_native_then_interp": _k(SPLIT.format(read_early="", wait="v_readfirstlane_b32 s8, v2", interp="")),
  "uninit_across_blocks": _k(SPLIT.format(read_early="", wait="s_waitcnt vmcnt(0)",
                                          interp="v_add_nc_u32 v3, v9, v2")),
  "lds_race_many_workgroups": _k(RAW.format(sync=""), lds=256, grid=8),
  # a fault in a native block: the interpreter's lane and address (the first faulting lane of the first wave)
  "oob_fault": _k(GOOD.replace("v_lshlrev_b32 v1, 2, v0", "v_lshlrev_b32 v1, 9, v0"), n=256, grid=4),
  # clamp on an integer result is saturation, not modelled: a located error on both tiers, not a float clamp
  "integer_clamp": _k(GOOD.replace("  s_waitcnt lgkmcnt(0)\n", "  v_add_nc_u32 v0, v0, v1 clamp\n  s_waitcnt lgkmcnt(0)\n"),
                      n=32),
  "gfx1200_loadcnt": _k(GFX12_LOAD.format(kwait="s_wait_kmcnt 0", wait=""), arch="gfx1200", n=32),
  "gfx1200_kmcnt": _k(GFX12_LOAD.format(kwait="", wait="s_wait_loadcnt 0"), arch="gfx1200", n=32),
  "mfma_hazard": _k(MFMA.format(nops=""), arch="gfx942", checks={"hazard"}, wave32=False),
  "mfma_hazard_passes": _k(MFMA_F32.format(zero="\n".join(f"  v_accvgpr_write_b32 a{i}, 0" for i in range(16)),
                                           nops="s_nop 7\n  s_nop 7"), arch="gfx942", checks={"hazard"},
                           vgprs=48, wave32=False),
  "memtime_waitcnt": _k(MEMTIME.format(wait=""), arch="gfx942", wave32=False),
}


def test_two_readers_of_one_dword_in_one_access():
  """The reader table keeps "many readers" for a dword two waves read in one instruction (it kept the last lane's
  wave, and missed wave 0's read racing wave 1's later write)."""
  with pytest.raises(EmuCheckError, match=r"ds_store_b32 v1, v0: LDS race: wave 1 writes LDS\[0x0\]"):
    _k(TWO_READERS, lds=64)()


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_bug_same_error_on_both_tiers(tiers, name):
  e0, e1, _, _, _ = tiers(CASES[name])
  assert e0 is not None, f"{name}: the interpreter's checker did not fire"
  assert e1 == e0


@pytest.mark.parametrize("arch", sorted(RTN_WAIT))
def test_realtime_read_before_its_wait(tiers, arch):
  """The time S_SENDMSG_RTN_B64 returns is read before the counter its answer comes back on (lgkmcnt, kmcnt) was
  waited for: the waitcnt checker names that counter on both tiers (before: the instruction stopped as unsupported)."""
  e0, e1, _, _, _ = tiers(CASES[f"realtime_waitcnt_{arch}"])
  assert e0 is not None and f"outstanding: missing s_waitcnt {RTN_WAIT[arch][1]}" in e0, e0
  assert e1 == e0


CLEAN = {
  "good": _k(GOOD, n=32),
  "lds_barrier": _k(RAW.format(sync="s_barrier"), lds=256, grid=4),
  "split_waited": _k(SPLIT.format(read_early="", wait="s_waitcnt vmcnt(0)", interp=""), grid=4),
  "gfx1200_waited": _k(GFX12_LOAD.format(kwait="s_wait_kmcnt 0", wait="s_wait_loadcnt 0"), arch="gfx1200", n=32),
  "mfma_waited": _k(MFMA.format(nops="s_nop 7"), arch="gfx942", checks={"hazard"}, wave32=False),
  "memtime_waited": _k(MEMTIME.format(wait="s_waitcnt lgkmcnt(0)"), arch="gfx942", wave32=False),
  **{f"realtime_waited_{a}": _k(RTN.format(wait=w, kwait=""), arch=a) for a, (w, _) in RTN_WAIT.items()},
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_clean_kernel_runs_natively_with_checkers(tiers, name):
  e0, e1, r0, r1, runs = tiers(CLEAN[name])
  assert e0 is None and e1 is None
  np.testing.assert_array_equal(r1, r0)
  assert runs > 0, "no block ran natively with the checkers on"


def test_clang_suite_kernels_natively_with_checkers(tiers, clang_co):
  """The clang-22 suite's saxpy on every wave: no false report, the same result, native blocks ran."""
  co = clang_co("gfx1100")
  rng = np.random.default_rng(5)
  x, y = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4096).astype(np.float32)

  def go():
    out = np.zeros_like(x)
    launch(co, "saxpy", grid=16, block=256, args=[out, x, y, 2.0, 4096])
    return out
  e0, e1, r0, r1, runs = tiers(go)
  assert e0 is None and e1 is None and runs > 0
  np.testing.assert_array_equal(r1, r0)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("name", sorted({**SUITE, **EXTRA}))
def test_suite_kernels_native_with_checkers(clang_co, monkeypatch, tmp_path, arch, name):
  """Every clang-22 suite kernel in the default mode (checkers on): no false report, the interpreter's outputs and
  counts, and every wave-instruction native (a clock read too: on gfx9 S_MEMTIME, which waits like a load)."""
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  case = {**SUITE, **EXTRA}[name]
  co = clang_co(arch, case().get("src", "suite"))
  runs = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    c = case()
    st = launch(co, name, grid=c["grid"], block=c["block"], args=c["args"], checks=True)
    runs.append((st, [np.array(a, copy=True) for a in c["args"] if isinstance(a, np.ndarray)]))
  (st_i, out_i), (st_n, out_n) = runs
  assert (st_i.instructions, st_i.lane_instructions) == (st_n.instructions, st_n.lane_instructions)
  assert all(a.tobytes() == b.tobytes() for a, b in zip(out_i, out_n))
  assert st_n.native_instructions == st_n.instructions, \
      f"{st_n.native_instructions} of {st_n.instructions} wave-instructions native"
