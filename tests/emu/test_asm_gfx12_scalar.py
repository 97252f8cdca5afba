"""gfx12 scalar float code clang-22 emits (FINDINGS.md #6): hand-written assembly, expected values from numpy/IEEE."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.pcode import semantics
from tests.emu.test_asm import kernel

EXEC = 0xa8fd5bb6  # lane 0 inactive, as in seed 2027 program 189


def _run(body, n_out, stats=None):
  out = np.zeros(32 * n_out, np.uint32)
  st = launch(kernel("gfx1200", body), "k", grid=1, block=32, args=[out])
  if stats is not None:
    stats.append(st)
  return out.reshape(n_out, 32)


@pytest.mark.parametrize("value,bit", [(0x7149f2ca, 31), (0xf149f2ca, 31), (0xffffffff, 0), (0x12345678, 4)])
def test_s_bitset_keeps_other_bits(value, bit):
  """s_bitset0/1 store one bit of D0: the rest of the old D0 stays (clang-22's SALU fabs is `s_bitset0_b32 s, 31`;
  the emulator used to pass no old D0, so |1e30| came out 0)."""
  out = _run(f"""
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b32 s4, {value:#x}
  s_mov_b32 s5, {value:#x}
  s_mov_b32 s6, {bit}
  s_mov_b64 s[8:9], {value:#x}
  s_bitset0_b32 s4, s6
  s_bitset1_b32 s5, s6
  s_bitset0_b64 s[8:9], 33
  v_mov_b32 v2, s4
  v_mov_b32 v3, s5
  v_mov_b32 v4, s8
  v_mov_b32 v5, s9
  v_lshlrev_b32 v1, 2, v0
  s_wait_kmcnt 0
  global_store_b32 v1, v2, s[2:3]
  global_store_b32 v1, v3, s[2:3] offset:128
  global_store_b32 v1, v4, s[2:3] offset:256
  global_store_b32 v1, v5, s[2:3] offset:384""", 4)
  v64 = np.uint64(value)  # s_mov_b64 of a 32-bit literal zero-extends
  assert (out[0] == value & ~(1 << bit) & 0xffffffff).all()
  assert (out[1] == value | 1 << bit).all()
  assert (out[2] == np.uint32(v64 & np.uint64(0xffffffff))).all()
  assert (out[3] == np.uint32((v64 & ~np.uint64(1 << 33)) >> np.uint64(32))).all()


def test_s_bitset_reads_d0_in_every_family():
  for fam in ("rdna3", "rdna4", "cdna"):
    for name in ("S_BITSET0_B32", "S_BITSET1_B32", "S_BITSET0_B64", "S_BITSET1_B64"):
      assert "D0" in semantics(fam, name).inputs, (fam, name)
    assert "D0" not in semantics(fam, "S_BITREPLICATE_B64_B32").inputs  # writes every bit


def test_salu_f32_fabs_of_product():
  """The p406 sequence itself: s_cvt_f32_i32, s_mul_f32 with a literal, s_bitset0 as fabs, then into a VGPR."""
  out = _run("""
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b32 s4, 1
  s_mov_b32 s5, -3
  s_cvt_f32_i32 s4, s4
  s_cvt_f32_i32 s5, s5
  s_mul_f32 s4, s4, 0x7149f2ca
  s_mul_f32 s5, s5, 0x7149f2ca
  s_bitset0_b32 s4, 31
  s_bitset0_b32 s5, 31
  v_mov_b32 v2, s4
  v_mov_b32 v3, s5
  v_lshlrev_b32 v1, 2, v0
  s_wait_kmcnt 0
  global_store_b32 v1, v2, s[2:3]
  global_store_b32 v1, v3, s[2:3] offset:128""", 2)
  e = np.float32(1e30)
  assert (out[0] == np.abs(np.float32(1) * e).view(np.uint32)).all()
  assert (out[1] == np.abs(np.float32(-3) * e).view(np.uint32)).all()


@pytest.mark.parametrize("jit", ["0", "force"])
@pytest.mark.parametrize("exec_lo", [EXEC, 0])
def test_pseudo_scalar_trans_ignores_exec(monkeypatch, jit, exec_lo):
  """v_s_rcp_f32/v_s_sqrt_f32 (VALU, SGPR in and out): one result per wave whatever EXEC is. With EXEC lane 0 off
  the emulator used to write lane 0's untouched value (0) -- clang-22's udiv by a uniform value inside divergent
  code (`v_s_rcp_f32 s3, s0` under s_and_saveexec, seed 2027 program 189). The native tier (force) runs every
  instruction, the pseudo-scalar ones too, EXEC empty or not."""
  monkeypatch.setenv("GPUTWIN_JIT", jit)
  stats = []
  out = _run(f"""
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b32 s4, 4.0
  s_mov_b32 s5, 0x40400000
  s_mov_b32 exec_lo, {exec_lo:#x}
  v_s_rcp_f32 s6, s4
  v_s_rcp_f32 s7, s5
  v_s_sqrt_f32 s8, s5
  s_mov_b32 exec_lo, -1
  v_mov_b32 v2, s6
  v_mov_b32 v3, s7
  v_mov_b32 v4, s8
  v_lshlrev_b32 v1, 2, v0
  s_wait_kmcnt 0
  global_store_b32 v1, v2, s[2:3]
  global_store_b32 v1, v3, s[2:3] offset:128
  global_store_b32 v1, v4, s[2:3] offset:256""", 3, stats)
  assert stats[0].native_instructions == (stats[0].instructions if jit == "force" else 0)
  assert (out[0] == np.float32(0.25).view(np.uint32)).all()
  assert (out[1] == (np.float32(1) / np.float32(3)).view(np.uint32)).all()
  assert (out[2] == np.sqrt(np.float32(3)).view(np.uint32)).all()


def test_vcmp_to_sgpr_still_masks_lanes():
  """A VALU write of an SGPR lane mask stays per lane: inactive lanes' bits are 0 (not the pseudo-scalar rule)."""
  out = _run(f"""
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b32 s4, 7
  s_mov_b32 exec_lo, {EXEC:#x}
  v_cmp_eq_u32_e64 s6, s4, s4
  s_mov_b32 exec_lo, -1
  v_mov_b32 v2, s6
  v_lshlrev_b32 v1, 2, v0
  s_wait_kmcnt 0
  global_store_b32 v1, v2, s[2:3]""", 1)
  assert (out[0] == EXEC).all()
