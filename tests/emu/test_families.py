"""Hand-written assembly per instruction family and target; every expected value is computed with numpy."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuCheckError
from tests.emu.test_asm import kernel

I32 = np.arange(32)
PRIV = "  .amdhsa_private_segment_fixed_size 128\n  .amdhsa_enable_private_segment 1\n"


def run(arch, body, n=32, outs=1, ins=(), wave32=True, lds=0, extra="", **kw):
  o = [np.zeros(n, np.uint32) for _ in range(outs)]
  launch(kernel(arch, body, wave32=wave32, lds=lds, vgprs=32, sgprs=32, extra=extra), "k", grid=1, block=n,
         args=o + list(ins), **kw)
  return o


def f16(x):
  return np.float16(x).view(np.uint16).astype(np.uint32)


def test_salu_readlane_writelane_gfx1100():
  o, = run("gfx1100", """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b32 s4, -1
  s_mov_b32 s5, 5
  s_add_u32 s6, s4, 3
  s_addc_u32 s7, s5, 0
  s_mov_b32 s12, 0x12345678
  s_bfe_u32 s8, s12, 0x80008
  s_cmp_lt_i32 s4, 0
  s_movk_i32 s14, 222
  s_cselect_b32 s9, 111, s14
  s_lshl_b32 s10, s5, 4
  s_ctz_i32_b32 s11, 0x100
  v_mov_b32 v2, 0
  v_writelane_b32 v2, s6, 0
  v_writelane_b32 v2, s7, 1
  v_writelane_b32 v2, s8, 2
  v_writelane_b32 v2, s9, 3
  v_writelane_b32 v2, s10, 4
  v_writelane_b32 v2, s11, 5
  v_readlane_b32 s13, v2, 2
  v_writelane_b32 v2, s13, 6
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v2, s[2:3]""")
  carry = (0xffffffff + 3) >> 32
  want = [(0xffffffff + 3) & 0xffffffff, 5 + carry, (0x12345678 >> 8) & 0xff, 111, 5 << 4, 8, (0x12345678 >> 8) & 0xff]
  np.testing.assert_array_equal(o[:7], want)


def test_valu_true16_and_packed_f16_gfx1100():
  o = run("gfx1100", """
  s_load_b128 s[4:7], s[0:1], 0x0
  v_cvt_f32_u32 v3, v0
  v_cvt_f16_f32 v4.l, v3
  v_mov_b16 v4.h, 0x4000
  v_mul_f16 v5.l, v4.l, v4.h
  v_add_f16 v5.h, v4.l, v4.l
  v_pk_fma_f16 v6, v4, v4, v4 op_sel:[1,0,0] op_sel_hi:[1,1,1]
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v5, s[4:5]
  global_store_b32 v1, v6, s[6:7]""", outs=2)
  np.testing.assert_array_equal(o[0], f16(2 * I32) | f16(2 * I32) << 16)
  np.testing.assert_array_equal(o[1], f16(3 * I32) | f16(np.full(32, 6)) << 16)  # lo: hi*lo+lo, hi: hi*hi+hi


def test_vopd_and_dpp8_gfx1100():
  o = run("gfx1100", """
  s_load_b128 s[4:7], s[0:1], 0x0
  v_cvt_f32_u32 v2, v0
  v_mov_b32 v9, v2
  v_dual_mul_f32 v3, 2.0, v2 :: v_dual_add_f32 v4, 1.0, v9
  v_dual_mov_b32 v2, v3 :: v_dual_mov_b32 v5, v2
  v_mov_b32_dpp v6, v0 dpp8:[7,6,5,4,3,2,1,0]
  v_add_nc_u32 v6, v6, v5
  v_lshlrev_b32 v1, 2, v0
  v_add_f32 v7, v2, v4
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v7, s[4:5]
  global_store_b32 v1, v6, s[6:7]""", outs=2)
  np.testing.assert_array_equal(o[0].view(np.float32), 3 * I32 + 1)  # v2 = 2i, v4 = i + 1
  np.testing.assert_array_equal(o[1], (I32 ^ 7) + np.float32(I32).view(np.uint32))  # VOPD reads before it writes


def test_sdwa_dpp16_f64_gfx942():
  o = run("gfx942", """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  v_cvt_f32_u32 v3, v0
  v_mov_b32_dpp v4, v3 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf
  v_mov_b32 v5, 0x1020304
  v_add_u32_sdwa v6, v5, v0 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:DWORD
  v_cvt_f64_f32 v[8:9], v4
  v_add_f64 v[8:9], v[8:9], v[8:9]
  v_cvt_f32_f64 v7, v[8:9]
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_dword v1, v7, s[4:5]
  global_store_dword v1, v6, s[6:7]""", n=64, outs=2, wave32=False)
  i = np.arange(64)
  np.testing.assert_array_equal(o[0].view(np.float32), 2.0 * ((i & ~3) + 3 - (i & 3)))
  np.testing.assert_array_equal(o[1], (0x03 + i) << 16)


def test_global_flat_scratch_buffer_gfx1100():
  inp = (np.arange(33) * 7 + 1).astype(np.uint32)
  o = run("gfx1100", """
  s_load_b256 s[4:11], s[0:1], 0x0
  s_load_b64 s[16:17], s[0:1], 0x20
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[16:17] offset:4
  v_mov_b32 v11, s17
  v_add_co_u32 v10, vcc_lo, s16, v1
  v_add_co_ci_u32_e32 v11, vcc_lo, 0, v11, vcc_lo
  flat_load_b32 v3, v[10:11]
  v_mul_lo_u32 v12, v0, 3
  scratch_store_b32 v1, v12, off
  scratch_load_b32 v4, v1, off
  s_mov_b32 s12, s16
  s_and_b32 s13, s17, 0xffff
  s_movk_i32 s14, 0x84
  s_mov_b32 s15, 0
  buffer_load_b32 v5, v1, s[12:15], 0 offen offset:8
  s_waitcnt vmcnt(0)
  global_store_b32 v1, v2, s[4:5]
  global_store_b32 v1, v3, s[6:7]
  global_store_b32 v1, v4, s[8:9]
  global_store_b32 v1, v5, s[10:11]""", outs=4, ins=[inp], extra=PRIV)
  np.testing.assert_array_equal(o[0], inp[1:])
  np.testing.assert_array_equal(o[1], inp[:32])
  np.testing.assert_array_equal(o[2], 3 * I32)
  np.testing.assert_array_equal(o[3], np.where(4 * I32 + 8 < 0x84, inp[np.minimum(I32 + 2, 32)], 0))  # V# range check


def test_atomics_gfx1100():
  o = run("gfx1100", """
  s_load_b256 s[4:11], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_mov_b32 v2, 1
  v_mov_b32 v3, 0
  s_waitcnt lgkmcnt(0)
  global_atomic_add_u32 v4, v3, v2, s[4:5] glc
  ds_store_b32 v3, v3
  ds_add_rtn_u32 v5, v3, v2
  v_add_nc_u32 v7, 100, v0
  v_mov_b32 v8, 0
  global_atomic_cmpswap_b32 v9, v3, v[7:8], s[4:5] offset:4 glc
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_b32 v1, v4, s[6:7]
  global_store_b32 v1, v5, s[8:9]
  global_store_b32 v1, v9, s[10:11]""", outs=4, lds=64)
  assert o[0][0] == 32 and o[0][1] == 100  # 32 increments; the first lane's compare-swap wins
  np.testing.assert_array_equal(np.sort(o[1]), I32)  # every old value returned exactly once
  np.testing.assert_array_equal(np.sort(o[2]), I32)
  assert sorted(o[3].tolist()) == [0] + [100] * 31


GFX12 = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_load_b64 s[4:5], s[0:1], 0x8
  v_lshlrev_b32 v1, 2, v0
  s_wait_kmcnt 0
  global_load_b32 v2, v1, s[4:5]
  {wait}
  v_add_nc_u32 v2, v2, v0
  global_store_b32 v1, v2, s[2:3]"""


def test_gfx1200_loadcnt_checker_and_wave32():
  inp = np.arange(32, dtype=np.uint32) * 5
  o, = run("gfx1200", GFX12.format(wait="s_wait_loadcnt 0"), ins=[inp])
  np.testing.assert_array_equal(o, inp + I32)
  with pytest.raises(EmuCheckError, match="loadcnt"):
    run("gfx1200", GFX12.format(wait=""), ins=[inp])


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_sopk_both_families(arch):
  """SOPK: the CDNA bodies name the immediate S0 (s_movk) or S1 (s_cmpk), RDNA names it SIMM16."""
  g9 = arch.startswith("gfx9")
  o, = run(arch, f"""
  s_load_{'dwordx2' if g9 else 'b64'} s[2:3], s[0:1], 0x0
  s_movk_i32 s4, 0x100
  s_addk_i32 s4, 0x10
  s_mulk_i32 s4, 3
  s_cmpk_eq_u32 s4, 0x330
  s_cselect_b32 s5, 1, 2
  s_cmpk_lg_u32 s4, 0x330
  s_cselect_b32 s6, 1, 2
  s_movk_i32 s7, 0x8000
  v_mov_b32 v2, 0
  v_writelane_b32 v2, s4, 0
  v_writelane_b32 v2, s5, 1
  v_writelane_b32 v2, s6, 2
  v_writelane_b32 v2, s7, 3
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  {'global_store_dword' if g9 else 'global_store_b32'} v1, v2, s[2:3]""", n=64 if g9 else 32, wave32=not g9)
  assert o[:4].tolist() == [0x330, 1, 2, 0xffff8000]
