"""Each checker catches a seeded bug (and stays silent on the clang suite, see test_clang); bad input gives a clear
gputwin error naming target, kernel, PC and instruction, and the next launch works."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import CodeObjectError, EmuCheckError, EmuError, EmuFault, EmuTrap, GPUPageFault, LaunchError
from tests.emu.test_asm import kernel

GOOD = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v0, s[2:3]"""


def _run(body, n=32, lds=0, **kw):
  out = np.zeros(n, np.int32)
  launch(kernel("gfx1100", body, lds=lds), "k", grid=1, block=n, args=[out], **kw)
  return out


def test_good_kernel_runs():
  np.testing.assert_array_equal(_run(GOOD), np.arange(32))


def test_waitcnt_checker():
  bad = GOOD.replace("  s_waitcnt lgkmcnt(0)\n", "")
  with pytest.raises(EmuCheckError, match=r"gfx1100.*kernel k.*PC 0x.*global_store_b32.*s\[2:3\].*lgkmcnt"):
    _run(bad)
  np.testing.assert_array_equal(_run(bad, checks=False), np.arange(32))  # switchable; the emulator itself is eager


# launched with 0: both waves end with a load into v2 outstanding; with 1: both load v3 (never read), wave 1 loads v2
# and waits for both, wave 0 does not, and both store v2 after a barrier (wave 0 with its load of v3 outstanding)
LOAD_OR_READ = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_load_b32 s4, s[0:1], 0x8
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  s_cmp_eq_u32 s4, 0
  s_cbranch_scc0 .Lread
  global_load_b32 v2, v1, s[2:3]
  s_endpgm
.Lread:
  global_load_b32 v3, v1, s[2:3]
  v_readfirstlane_b32 s5, v0
  s_cmp_lt_u32 s5, 32
  s_cbranch_scc1 .Lstore
  global_load_b32 v2, v1, s[2:3]
  s_waitcnt vmcnt(0)
.Lstore:
  s_barrier
  global_store_b32 v1, v2, s[2:3]"""


@pytest.mark.parametrize("jit", ["0", "force"])
def test_waitcnt_state_starts_clean_each_launch(jit, monkeypatch):
  """A launch that ends with loads outstanding leaves nothing pending for the next launch of the kernel (whose
  register files, and the checkers' tables, are the first's reused): there wave 0 reads v2, which wave 1 loaded
  and waited for and wave 0 did not load (only the waitcnt checker on): no error, on both tiers."""
  monkeypatch.setenv("GPUTWIN_JIT", jit)
  co, out = kernel("gfx1100", LOAD_OR_READ), np.zeros(64, np.int32)
  launch(co, "k", grid=1, block=64, args=[out, np.int32(0)])
  launch(co, "k", grid=1, block=64, args=[out, np.int32(1)], checks={"waitcnt"})


def test_uninit_checker():
  with pytest.raises(EmuCheckError, match=r"reads v7 .*never written"):
    _run(GOOD.replace("global_store_b32 v1, v0", "global_store_b32 v1, v7"))


def test_oob_is_page_fault():
  body = GOOD.replace("v_lshlrev_b32 v1, 2, v0", "v_lshlrev_b32 v1, 12, v0")
  with pytest.raises(EmuFault, match=r"gfx1100.*kernel k.*PC 0x.*global_store_b32") as e:
    _run(body)
  assert isinstance(e.value, GPUPageFault) and e.value.va > 0


def test_lds_oob_is_page_fault():
  with pytest.raises(EmuFault, match="LDS"):
    _run("  v_lshlrev_b32 v1, 2, v0\n  ds_store_b32 v1, v0 offset:64", lds=64)


LDS_RACE = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_and_b32 v1, 31, v0
  v_lshlrev_b32 v1, 2, v1
  ds_store_b32 v1, v0
  s_waitcnt lgkmcnt(0)
  {sync}
  v_xor_b32 v2, 4, v1
  ds_load_b32 v3, v2
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v4, 2, v0
  global_store_b32 v4, v3, s[2:3]"""


RAW = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  ds_store_b32 v1, v0
  s_waitcnt lgkmcnt(0)
  {sync}
  v_xor_b32 v2, 0x80, v1
  ds_load_b32 v3, v2
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v3, s[2:3]"""


def test_lds_race_read_after_write():
  """Wave 1 reads what wave 0 wrote (lane ^ 32) with no s_barrier between: a race; with one: the swapped ids."""
  with pytest.raises(EmuCheckError, match="LDS race"):
    _run(RAW.format(sync=""), n=64, lds=256)
  np.testing.assert_array_equal(_run(RAW.format(sync="s_barrier"), n=64, lds=256), np.arange(64) ^ 32)


def test_lds_race_checker():
  with pytest.raises(EmuCheckError, match="LDS race"):
    _run(LDS_RACE.format(sync=""), n=64, lds=128)
  _run(LDS_RACE.format(sync="s_barrier"), n=64, lds=256, checks={"waitcnt", "uninit"})


def test_trap_and_recovery():
  with pytest.raises(EmuTrap, match=r"kernel k.*s_trap"):
    _run(GOOD + "\n  s_trap 2")
  np.testing.assert_array_equal(_run(GOOD), np.arange(32))


def test_runaway_loop_watchdog():
  with pytest.raises(EmuError, match=r"max-instructions.*|more than 1000"):
    _run("  .Lloop:\n  s_branch .Lloop", max_instructions=1000)
  np.testing.assert_array_equal(_run(GOOD), np.arange(32))


def test_pc_outside_code():
  with pytest.raises(EmuError, match=r"PC 0x.*outside the code"):
    _run("  s_mov_b64 s[4:5], 0x4\n  s_setpc_b64 s[4:5]")


def test_bad_inputs():
  with pytest.raises(CodeObjectError):
    launch(b"\x7fELF garbage", "k", grid=1, block=32, args=[])
  co = kernel("gfx1100", GOOD)
  with pytest.raises(CodeObjectError):
    launch(co[:200], "k", grid=1, block=32, args=[])
  with pytest.raises(LaunchError, match=r"no kernel 'nope'.*k"):
    launch(co, "nope", grid=1, block=32, args=[np.zeros(32, np.int32)])
  with pytest.raises(LaunchError, match="grid"):
    launch(co, "k", grid=0, block=32, args=[np.zeros(32, np.int32)])


def test_arg_mismatch(clang_co):
  co = clang_co("gfx1100")
  x = np.zeros(4, np.float32)
  with pytest.raises(LaunchError, match="takes 5 arguments"):
    launch(co, "saxpy", grid=1, block=32, args=[x, x])
  with pytest.raises(LaunchError, match="pointer"):
    launch(co, "saxpy", grid=1, block=32, args=[x, 1.0, x, 2.0, 4])
  with pytest.raises(LaunchError, match="by-value"):
    launch(co, "saxpy", grid=1, block=32, args=[x, x, x, x, 4])


MFMA = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_mov_b32 v2, v0
  v_mov_b32 v0, 0x3c003c00
  v_mov_b32 v1, v0
  v_accvgpr_write_b32 a0, 0
  v_accvgpr_write_b32 a1, 0
  v_accvgpr_write_b32 a2, 0
  v_accvgpr_write_b32 a3, 0
  v_mfma_f32_16x16x16_f16 a[0:3], v[0:1], v[0:1], a[0:3]
  {nops}
  v_accvgpr_read_b32 v4, a0
  v_lshlrev_b32 v5, 2, v2
  s_waitcnt lgkmcnt(0)
  global_store_dword v5, v4, s[2:3]"""


def test_mfma_hazard_checker():
  co = lambda nops: kernel("gfx942", MFMA.format(nops=nops), wave32=False)
  out = np.zeros(64, np.float32)
  with pytest.raises(EmuCheckError, match="MFMA hazard"):
    launch(co(""), "k", grid=1, block=64, args=[out], checks={"hazard"})
  launch(co("s_nop 7"), "k", grid=1, block=64, args=[out], checks={"hazard"})
  assert (out == 16).all()  # A = B = ones(16x16) f16: every element of A @ B is 16


MFMA_F32 = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_mov_b32 v2, v0
  v_mov_b32 v0, 1.0
  v_mov_b32 v1, 1.0
{zero}
  v_mfma_f32_32x32x2_f32 a[0:15], v0, v1, a[0:15]
  {nops}
  v_accvgpr_read_b32 v4, a0
  v_lshlrev_b32 v5, 2, v2
  s_waitcnt lgkmcnt(0)
  global_store_dword v5, v4, s[2:3]"""


def test_mfma_hazard_uses_each_opcodes_passes():
  """v_mfma_f32_32x32x2_f32 takes 16 passes (llvm-mca-22, isa/data/matrix.json): 16 wait states are too few, 18 do."""
  zero = "\n".join(f"  v_accvgpr_write_b32 a{i}, 0" for i in range(16))
  co = lambda nops: kernel("gfx942", MFMA_F32.format(zero=zero, nops=nops), vgprs=48, wave32=False)
  out = np.zeros(64, np.float32)
  with pytest.raises(EmuCheckError, match=r"MFMA hazard: .*16 wait states.*16 passes need 18"):
    launch(co("s_nop 7\n  s_nop 7"), "k", grid=1, block=64, args=[out], checks={"hazard"})
  launch(co("s_nop 7\n  s_nop 7\n  s_nop 1"), "k", grid=1, block=64, args=[out], checks={"hazard"})
  assert (out == 2).all()  # A (32x2) = B (2x32) = ones: every element of A @ B is 2


GFX12_LOAD = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  {kwait}
  global_load_b32 v2, v1, s[2:3]
  {wait}
  v_add_nc_u32 v2, v2, v0
  global_store_b32 v1, v2, s[2:3]"""


@pytest.mark.parametrize("kwait, wait, missing", [
  ("s_wait_kmcnt 0", "", "loadcnt"),
  ("", "s_wait_loadcnt 0", "kmcnt"),
  ("s_wait_kmcnt 0", "s_wait_loadcnt_dscnt 0x100", "loadcnt"),  # SIMM16[13:8] = loadcnt 1: the load may be pending
  ("s_wait_kmcnt 0", "s_wait_storecnt 0", "loadcnt"),
  ("s_wait_kmcnt 0", "s_wait_loadcnt 0", None),
  ("s_wait_kmcnt 0", "s_wait_loadcnt_dscnt 0x3f", None),  # loadcnt 0, dscnt 63
])
def test_waitcnt_checker_gfx12_counters(kwait, wait, missing):
  """gfx12 SMEM counts on kmcnt, global loads on loadcnt; each s_wait_* retires the counters its row names."""
  x = np.arange(32, dtype=np.int32) * 3
  co = kernel("gfx1200", GFX12_LOAD.format(kwait=kwait, wait=wait))
  if missing:
    with pytest.raises(EmuCheckError, match=rf"gfx1200.*missing s_waitcnt {missing}"):
      launch(co, "k", grid=1, block=32, args=[x.copy()])
  else:
    out = x.copy()
    launch(co, "k", grid=1, block=32, args=[out])
    np.testing.assert_array_equal(out, x + np.arange(32))


def test_instruction_the_target_lacks():
  """A gfx1200-only s_wait_loadcnt patched into gfx1100 code: decode error naming target, kernel and PC."""
  co = bytearray(kernel("gfx1100", GOOD.replace("  s_waitcnt lgkmcnt(0)\n", "  s_nop 0\n  s_waitcnt lgkmcnt(0)\n")))
  nop = (0xbf800000).to_bytes(4, "little")
  co[co.index(nop):co.index(nop) + 4] = (0xbfc00000).to_bytes(4, "little")
  with pytest.raises(EmuError, match=r"\[gfx1100\] kernel k, wave 0, PC 0x[0-9a-f]+.*cannot decode.*0xbfc00000"):
    launch(bytes(co), "k", grid=1, block=32, args=[np.zeros(32, np.int32)])
  np.testing.assert_array_equal(_run(GOOD), np.arange(32))


SMFMAC = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v20, 4, v0
  v_mov_b32 v1, 0x44
{init}
  s_waitcnt lgkmcnt(0)
  global_load_dwordx4 v[8:11], v20, s[2:3]
  {wait}
  v_smfmac_f32_16x16x32_f16 v[8:11], v[12:13], v[4:7], v1
  s_nop 7
  global_store_dwordx4 v20, v[8:11], s[2:3]"""


@pytest.mark.parametrize("wait,init,want", [
  ("", "".join(f"  v_mov_b32 v{r}, 0\n" for r in (4, 5, 6, 7, 12, 13)), r"reads v8 \(D0\).*missing s_waitcnt vmcnt"),
  ("s_waitcnt vmcnt(0)", "".join(f"  v_mov_b32 v{r}, 0\n" for r in (4, 5, 6, 7)), r"reads v\[12:13\] \(S0\).*never"),
  ("s_waitcnt vmcnt(0)", "".join(f"  v_mov_b32 v{r}, 0\n" for r in (4, 5, 6, 7, 12, 13)), None),
])
def test_sparse_accumulator_is_a_read(wait, init, want):
  """SMFMAC reads its destination as the accumulator (pcode errata: `+ D`): loading it without the wait is a
  waitcnt error like any other read."""
  _wave64_expect(kernel("gfx942", SMFMAC.format(wait=wait, init=init), vgprs=24, wave32=False), want)


def _wave64_expect(co, want: str | None) -> None:
  """Launch one wave64 of `co` (its kernel k writes a 256-float buffer): the checker error `want`, or none."""
  out = np.zeros(256, np.float32)
  if want:
    with pytest.raises(EmuCheckError, match=want):
      launch(co, "k", grid=1, block=64, args=[out])
  else:
    launch(co, "k", grid=1, block=64, args=[out])


SCALED_MFMA = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v30, 4, v0
{init}
  s_waitcnt lgkmcnt(0)
  global_load_dword v21, v30, s[2:3]
  {wait}
  v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v20, v21 op_sel:[1,0,0] op_sel_hi:[0,1,0]
  s_nop 7
  s_nop 7
  global_store_dwordx4 v30, v[0:3], s[2:3]"""
_ZERO = lambda regs: "".join(f"  v_mov_b32 v{r}, 0\n" for r in regs)


@pytest.mark.parametrize("wait,init,want", [
  ("", _ZERO(range(21)), r"reads v21 \(S4\).*missing s_waitcnt vmcnt"),
  ("s_waitcnt vmcnt(0)", _ZERO(range(20)), r"reads v20 \(S3\).*never"),
  ("s_waitcnt vmcnt(0)", _ZERO(range(21)), None),
], ids=["no-wait", "never-written", "clean"])
def test_scaled_mfma_scales_are_reads(wait, init, want):
  """gfx950's V_MFMA_SCALE reads its two scale VGPRs (pcode errata: S3, S4): loading one without the wait, or never
  writing one, is an error like any other read."""
  _wave64_expect(kernel("gfx950", SCALED_MFMA.format(wait=wait, init=init), vgprs=32, wave32=False), want)
