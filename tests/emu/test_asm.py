"""Hand-written assembly per family, expected values from numpy."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.verify.reliability import kernel  # noqa: F401  (the kernel template; other tests import it from here)


def test_salu_valu_dpp_gfx1100():
  co = kernel("gfx1100", """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_cvt_f32_u32 v2, v0
  v_mov_b32_dpp v3, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
  v_add_f32 v2, v2, v3
  s_mov_b32 s4, 7
  s_mul_i32 s4, s4, 6
  v_cvt_f32_i32 v4, s4
  v_fma_f32 v2, -v2, |v4|, 0.5
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v2, s[2:3]""")
  out = np.zeros(32, np.float32)
  launch(co, "k", grid=1, block=32, args=[out])
  i = np.arange(32, dtype=np.float32)
  shr = np.where(np.arange(32) % 16 == 0, 0, i - 1).astype(np.float32)
  np.testing.assert_array_equal(out, (-(i + shr) * np.float32(42) + np.float32(0.5)).astype(np.float32))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_lds_and_branch_wave64(arch):
  """LDS store/load across lanes (reverse), a data-dependent branch, 64-bit VALU; wave64 on both families."""
  if arch == "gfx942":
    body = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  ds_write_b32 v1, v0
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_sub_u32 v2, 63, v0
  v_lshlrev_b32 v2, 2, v2
  ds_read_b32 v3, v2
  s_waitcnt lgkmcnt(0)
  v_cmp_gt_u32 vcc, 32, v0
  s_and_saveexec_b64 s[4:5], vcc
  s_cbranch_execz .Lskip
  v_add_u32 v3, 1000, v3
.Lskip:
  s_or_b64 exec, exec, s[4:5]
  v_mov_b32 v6, v3
  v_mov_b32 v7, 0
  v_lshlrev_b64 v[4:5], 33, v[6:7]
  v_lshlrev_b32 v6, 3, v0
  s_waitcnt lgkmcnt(0)
  global_store_dwordx2 v6, v[4:5], s[2:3]"""
  else:
    body = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  ds_store_b32 v1, v0
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_sub_nc_u32 v2, 63, v0
  v_lshlrev_b32 v2, 2, v2
  ds_load_b32 v3, v2
  s_waitcnt lgkmcnt(0)
  v_cmp_gt_u32 vcc, 32, v0
  s_and_saveexec_b64 s[4:5], vcc
  s_cbranch_execz .Lskip
  v_add_nc_u32 v3, 1000, v3
.Lskip:
  s_or_b64 exec, exec, s[4:5]
  v_mov_b32 v6, v3
  v_mov_b32 v7, 0
  v_lshlrev_b64 v[4:5], 33, v[6:7]
  v_lshlrev_b32 v6, 3, v0
  s_waitcnt lgkmcnt(0)
  global_store_b64 v6, v[4:5], s[2:3]"""
  co = kernel(arch, body, wave32=False, lds=256)
  out = np.zeros(64, np.uint64)
  launch(co, "k", grid=1, block=64, args=[out])
  i = np.arange(64, dtype=np.uint64)
  want = (63 - i) + np.where(i < 32, 1000, 0).astype(np.uint64)
  np.testing.assert_array_equal(out, want << np.uint64(33))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_cndmask_takes_float_modifiers_bitwise(arch):
  """V_CNDMASK_B32's sources are untyped, yet VOP3 neg/abs act on their sign bit (LLVM selects fneg through it):
  lanes with VCC=0 pick -|x|, lanes with VCC=1 pick x; expected values from numpy."""
  if arch == "gfx942":
    body = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_cvt_f32_i32 v3, v0
  v_subrev_f32 v3, 20.0, v3
  v_and_b32 v4, 1, v0
  v_cmp_eq_u32 vcc, 1, v4
  v_cndmask_b32_e64 v2, -|v3|, v3, vcc
  s_waitcnt lgkmcnt(0)
  global_store_dword v1, v2, s[2:3]"""
    n = 64
  else:
    body = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_cvt_f32_i32 v3, v0
  v_subrev_f32 v3, 20.0, v3
  v_and_b32 v4, 1, v0
  v_cmp_eq_u32 vcc_lo, 1, v4
  v_cndmask_b32_e64 v2, -|v3|, v3, vcc_lo
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v2, s[2:3]"""
    n = 32
  out = np.zeros(n, np.float32)
  launch(kernel(arch, body), "k", grid=1, block=n, args=[out])
  x = np.arange(n, dtype=np.float32) - np.float32(20)
  np.testing.assert_array_equal(out, np.where(np.arange(n) % 2 == 1, x, -np.abs(x)))


def test_pk_mov_b32_op_sel_gfx942():
  """V_PK_MOV_B32: D.lo = src0 dword op_sel[0], D.hi = src1 dword op_sel[1] (CDNA3 ISA, VOP3P); also with D = src1.
  Found by `gputwin fuzz --seed 7` on clang-22 code (gputwin/verify/FINDINGS.md #4)."""
  body = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 4, v0
  v_add_u32 v10, 10, v0
  v_add_u32 v11, 11, v0
  v_add_u32 v12, 12, v0
  v_add_u32 v13, 13, v0
  v_pk_mov_b32 v[16:17], v[10:11], v[12:13] op_sel:[1,0]
  v_pk_mov_b32 v[18:19], v[10:11], v[12:13] op_sel:[0,1]
  v_pk_mov_b32 v[12:13], v[10:11], v[12:13] op_sel:[1,1]
  s_waitcnt lgkmcnt(0)
  global_store_dwordx4 v1, v[16:19], s[2:3]
  v_add_u32 v1, 0x400, v1
  global_store_dwordx2 v1, v[12:13], s[2:3]"""
  out = np.zeros(64 * 4 * 2, np.uint32)  # lane l stores 16 bytes at 16*l, then 8 bytes at 0x400 + 16*l
  launch(kernel("gfx942", body, vgprs=24), "k", grid=1, block=64, args=[out])
  i = np.arange(64, dtype=np.uint32)
  np.testing.assert_array_equal(out[:256].reshape(64, 4), np.stack([i + 11, i + 12, i + 10, i + 13], 1))
  np.testing.assert_array_equal(out[256:].reshape(64, 4)[:, :2], np.stack([i + 11, i + 13], 1))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_pk_f32_inline_constant(arch):
  """CDNA V_PK_*_F32 with an inline constant: the constant is the f32 value in the low dword and the high dword
  reads 0, so clang-22's splat `v_pk_add_f32 v[a:b], v[a:b], 0.5 op_sel_hi:[1,0]` adds 0.5 to both elements (the
  emulator took the f64 bit pattern, whose low dword is 0, and added nothing). Found by `gputwin fuzz --seed 2027`,
  program 987 (gputwin/verify/FINDINGS.md #6)."""
  body = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 5, v0
  v_cvt_f32_u32 v2, v0
  v_sub_f32 v3, 0, v2
  v_mov_b32 v4, v2
  v_mov_b32 v5, v3
  v_mov_b32 v6, v2
  v_mov_b32 v7, v3
  v_mov_b32 v8, v2
  v_mov_b32 v9, v3
  v_pk_add_f32 v[2:3], v[2:3], 0.5 op_sel_hi:[1,0]
  v_pk_mul_f32 v[4:5], v[4:5], -4.0 op_sel_hi:[1,0]
  v_pk_add_f32 v[6:7], v[6:7], 1.0
  v_pk_fma_f32 v[8:9], v[8:9], 2.0, 0.5 op_sel_hi:[1,0,0]
  s_waitcnt lgkmcnt(0)
  global_store_dwordx4 v1, v[2:5], s[2:3]
  global_store_dwordx4 v1, v[6:9], s[2:3] offset:16"""
  out = np.zeros(64 * 8, np.float32)
  launch(kernel(arch, body), "k", grid=1, block=64, args=[out])
  x = np.arange(64, dtype=np.float32)
  f = np.float32
  want = np.stack([x + f(0.5), -x + f(0.5), x * f(-4), -x * f(-4),
                   x + f(1), -x,  # op_sel_hi:[1,1]: the high element reads the constant's high dword, 0
                   x * f(2) + f(0.5), -x * f(2) + f(0.5)], 1)
  np.testing.assert_array_equal(out.reshape(64, 8), want)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_pk_f32_neg_lo_hi_on_vgprs(tier_runs, arch):
  """CDNA V_PK_*_F32 on VGPR pairs with neg_lo / neg_hi: each flips the sign of one element of a 64-bit operand. The
  interpreter built its modifier mask 32 bits wide when only neg_lo was set and cut the high element to 0."""
  body = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 5, v0
  v_cvt_f32_u32 v2, v0
  v_add_f32 v3, 0.5, v2
  v_pk_add_f32 v[4:5], v[2:3], v[2:3] neg_lo:[1,0]
  v_pk_add_f32 v[6:7], v[2:3], v[2:3] neg_hi:[0,1]
  v_pk_mul_f32 v[8:9], v[2:3], v[2:3] neg_lo:[0,1] neg_hi:[1,0]
  v_pk_fma_f32 v[10:11], v[2:3], v[2:3], v[2:3] neg_lo:[0,0,1]
  s_waitcnt lgkmcnt(0)
  global_store_dwordx4 v1, v[4:7], s[2:3]
  global_store_dwordx4 v1, v[8:11], s[2:3] offset:16"""
  co = kernel(arch, body)

  def go():
    out = np.zeros(64 * 8, np.float32)
    launch(co, "k", grid=1, block=64, args=[out])
    return out.reshape(64, 8)
  (interp, e0, _), (native, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  lo = np.arange(64, dtype=np.float32)
  hi = lo + np.float32(0.5)
  want = np.stack([-lo + lo, hi + hi, lo + lo, hi - hi, lo * -lo, -hi * hi, lo * lo - lo, hi * hi + hi], 1)
  np.testing.assert_array_equal(interp, want)
  np.testing.assert_array_equal(native, want)


def test_accvgpr_moves_and_sdwa_sgpr_gfx942():
  """V_ACCVGPR_WRITE/MOV/READ run their (errata) pcode `D0.b32 = S0.b32` on the operands isa decodes (AccVGPR a0 is
  no longer the immediate 256); an SDWA source with the s0 bit reads an SGPR. Expected values: numpy."""
  body = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_add_u32 v2, 7, v0
  v_accvgpr_write_b32 a1, v2
  v_accvgpr_mov_b32 a3, a1
  v_accvgpr_read_b32 v4, a3
  s_mov_b32 s5, 0x30000
  v_add_u32_sdwa v5, s5, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD
  v_add_u32 v4, v4, v5
  s_waitcnt lgkmcnt(0)
  global_store_dword v1, v4, s[2:3]"""
  out = np.zeros(64, np.uint32)
  launch(kernel("gfx942", body), "k", grid=1, block=64, args=[out])
  i = np.arange(64, dtype=np.uint32)
  np.testing.assert_array_equal(out, (i + 7) + (3 + i))


def test_vopd_literal_apertures_and_atomic_without_return_gfx1100():
  """VOPD with a literal half (v_dual_fmaak_f32) binds both halves from isa's operand list; src_shared_base is a
  register (the aperture's high half), not an inline constant; a global atomic without glc writes no VGPR."""
  body = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_cvt_f32_u32 v2, v0
  v_mov_b32 v3, 2.0
  v_mov_b32 v7, 0
  v_mov_b32 v5, v2
  v_mov_b32 v6, 2.0
  v_dual_fmac_f32 v7, v2, v3 :: v_dual_fmaak_f32 v4, v5, v6, 0x3f800000
  s_mov_b64 s[6:7], src_shared_base
  v_mov_b32 v8, s7
  v_mov_b32 v9, 5
  v_mov_b32 v10, 0x1234
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v10, s[2:3] offset:384
  global_atomic_add_u32 v1, v9, s[2:3] offset:384
  v_cvt_u32_f32 v4, v4
  v_cvt_u32_f32 v7, v7
  global_store_b32 v1, v4, s[2:3]
  global_store_b32 v1, v7, s[2:3] offset:128
  global_store_b32 v1, v8, s[2:3] offset:256"""
  out = np.zeros(128, np.uint32)
  launch(kernel("gfx1100", body), "k", grid=1, block=32, args=[out])
  i = np.arange(32, dtype=np.uint32)
  from gputwin.emu.amd.decode import SHARED_HI
  np.testing.assert_array_equal(out[:32], 2 * i + 1)
  np.testing.assert_array_equal(out[32:64], 2 * i)
  np.testing.assert_array_equal(out[64:96], np.full(32, SHARED_HI))
  np.testing.assert_array_equal(out[96:], np.full(32, 0x1234 + 5))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_ds_atomic_and_byte_store_add_the_offset(arch):
  """DS atomics and 8-bit stores address ADDR + OFFSET like the B32 forms (RDNA3 texts omit it: pcode erratum)."""
  s_load, st = ("s_load_b64", "global_store_b32") if arch == "gfx1100" else ("s_load_dwordx2", "global_store_dword")
  ds_store, ds_load, ds_b8 = ("ds_store_b32", "ds_load_b32", "ds_store_b8") if arch == "gfx1100" else \
    ("ds_write_b32", "ds_read_b32", "ds_write_b8")
  body = f"""
  {s_load} s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_cvt_f32_u32 v2, v0
  v_mov_b32 v3, 0.5
  v_mov_b32 v5, 0x7f
  {ds_store} v1, v2 offset:1024
  {ds_b8} v1, v5 offset:1025
  s_waitcnt lgkmcnt(0)
  ds_add_f32 v1, v3 offset:1024
  s_waitcnt lgkmcnt(0)
  {ds_load} v4, v1 offset:1024
  s_waitcnt lgkmcnt(0)
  {st} v1, v4, s[2:3]"""
  out = np.zeros(64, np.uint32)
  launch(kernel(arch, body, lds=2048, wave32=False), "k", grid=1, block=64, args=[out])
  want = (np.arange(64, dtype=np.float32).view(np.uint32) & ~np.uint32(0xff00)) | np.uint32(0x7f00)
  np.testing.assert_array_equal(out, (want.view(np.float32) + np.float32(0.5)).view(np.uint32))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_movrel_destination_is_relative_to_m0(arch):
  """s_movreld / v_movreld write register DST + M0 (the ISA: `SGPR[DST + M0] = S0`), s_movrels / v_movrels read
  SRC0 + M0; M0 = 2 here, so s5 -> s7 and v5 -> v7 (gfx9 has no v_movrel*: scalar only there)."""
  store = "global_store_b32 v1, v3, s[2:3]" if arch == "gfx1100" else "global_store_dword v1, v3, s[2:3]"
  vector = "v_movreld_b32 v5, v2\n  v_movrels_b32 v3, v5" if arch == "gfx1100" else "v_mov_b32 v3, v2"  # (gfx9: none)
  co = kernel(arch, f"""
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b32 m0, 2
  s_mov_b32 s10, 0x1234
  s_mov_b32 s7, 0
  s_movreld_b32 s5, s10
  s_movrels_b32 s6, s5
  v_lshlrev_b32 v1, 2, v0
  v_mov_b32 v7, 0
  v_add_nc_u32 v2, 0x100, v0
  {vector}
  v_add_nc_u32 v3, s6, v3
  v_add_nc_u32 v3, s7, v3
  s_waitcnt lgkmcnt(0)
  {store}""".replace("v_add_nc_u32", "v_add_nc_u32" if arch == "gfx1100" else "v_add_u32")
    .replace("s_load_b64", "s_load_b64" if arch == "gfx1100" else "s_load_dwordx2"))
  n = 32 if arch == "gfx1100" else 64
  out = np.zeros(n, np.uint32)
  launch(co, "k", grid=1, block=n, args=[out])
  np.testing.assert_array_equal(out, 0x100 + np.arange(n, dtype=np.uint32) + 2 * 0x1234)


ADDTID = {  # (store, load, plain load, plain store, global store, wait) spellings: RDNA3/4 and CDNA
  "gfx1100": ("ds_store_addtid_b32", "ds_load_addtid_b32", "ds_load_b32", "ds_store_b32", "global_store_b32",
              "s_load_b64", "s_waitcnt lgkmcnt(0)"),
  "gfx1200": ("ds_store_addtid_b32", "ds_load_addtid_b32", "ds_load_b32", "ds_store_b32", "global_store_b32",
              "s_load_b64", "s_wait_kmcnt 0\n  s_wait_dscnt 0"),
  "gfx942": ("ds_write_addtid_b32", "ds_read_addtid_b32", "ds_read_b32", "ds_write_b32", "global_store_dword",
             "s_load_dwordx2", "s_waitcnt lgkmcnt(0)"),
}


@pytest.mark.parametrize("arch", sorted(ADDTID))
def test_ds_addtid(tier_runs, arch):
  """DS_*_ADDTID_B32 address LDS at M0[15:0] + offset + lane id * 4 (the manuals' formula; llvm-mc-22 gives them the
  data VGPR and offset:N, no address). M0's upper half is set and must not count. Lane l stores 3l + 7 with ADDTID at
  0x40 + 16 + 4l, and a plain load reads it back there; a plain store of 5l + 1 at 0x200 + 4l is read by an ADDTID
  load with M0 = 0x1f0, offset:16. Before: stopped as unmodelled (the vendor text read its offset fields and DATA0 as
  zero locals)."""
  st, ld, pld, pst, gst, sld, wait = ADDTID[arch]
  body = f"""
  {sld} s[2:3], s[0:1], 0x0
  s_mov_b32 m0, 0x70040
  v_mul_u32_u24 v1, 3, v0
  v_add_nc_u32 v1, 7, v1
  {st} v1 offset:16
  v_lshlrev_b32 v2, 2, v0
  v_mul_u32_u24 v4, 5, v0
  v_add_nc_u32 v4, 1, v4
  {pst} v2, v4 offset:0x200
  {wait}
  {pld} v3, v2 offset:0x50
  s_mov_b32 m0, 0x1f0
  {ld} v5 offset:16
  {wait}
  v_lshlrev_b32 v6, 3, v0
  {gst} v6, v3, s[2:3]
  {gst} v6, v5, s[2:3] offset:4"""
  if arch == "gfx942":
    body = body.replace("v_add_nc_u32", "v_add_u32")
  n = 64 if arch == "gfx942" else 32
  co = kernel(arch, body, lds=0x400, wave32=arch != "gfx942")

  def go():
    out = np.zeros((n, 2), np.uint32)
    launch(co, "k", grid=1, block=n, args=[out])
    return out
  (interp, e0, _), (native, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  lane = np.arange(n, dtype=np.uint32)
  want = np.stack([3 * lane + 7, 5 * lane + 1], 1)
  np.testing.assert_array_equal(interp, want)
  np.testing.assert_array_equal(native, want)
  # M0 near the end of the 0x400-byte allocation: the lanes past it fault, the same located error on both tiers
  co = kernel(arch, body.replace("s_mov_b32 m0, 0x1f0", "s_mov_b32 m0, 0x3e0"), lds=0x400, wave32=arch != "gfx942")
  (_, e0, _), (_, e1, _) = tier_runs(go)
  assert e0 is not None and str(e0) == str(e1) and "LDS" in str(e0) and ld in str(e0), (e0, e1)


DOT2ACC = {"gfx1100": ("bf16",), "gfx1200": ("f16", "bf16")}


@pytest.mark.parametrize("arch,t", [(a, t) for a, ts in DOT2ACC.items() for t in ts])
def test_vopd_dot2acc(tier_runs, arch, t):
  """VOPD's v_dual_dot2acc_f32_{f16,bf16}: D0 += the two products of S0's and S1's halves, each sum rounded to f32 (its
  family's VOP3P v_dot2_f32 text with D0 as the accumulator); the other half, a mov, runs alongside. Against numpy's
  f32 arithmetic (a product of two 16-bit floats is exact in f32). Before: 'no pseudocode for V_DOT2ACC_F32_...'."""
  wait = ("s_waitcnt lgkmcnt(0)", "s_waitcnt vmcnt(0)") if arch == "gfx1100" else ("s_wait_kmcnt 0", "s_wait_loadcnt 0")
  body = f"""
  s_load_b64 s[2:3], s[0:1], 0x0
  {wait[0]}
  v_lshlrev_b32 v7, 4, v0
  global_load_b128 v[2:5], v7, s[2:3]
  {wait[1]}
  v_dual_dot2acc_f32_{t} v4, v2, v3 :: v_dual_mov_b32 v9, v5
  global_store_b32 v7, v9, s[2:3] offset:512
  global_store_b32 v7, v4, s[2:3] offset:516"""
  co = kernel(arch, body, extra="  .amdhsa_float_denorm_mode_32 3\n")
  rng = np.random.default_rng(5)
  h = rng.standard_normal((32, 4)).astype(np.float32)  # two pairs of 16-bit floats, the accumulator, a tag
  if t == "f16":
    a, b = h[:, :2].astype(np.float16), h[:, 2:].astype(np.float16)
    av, bv = a.view(np.uint32)[:, 0], b.view(np.uint32)[:, 0]
    f = lambda x: x.astype(np.float32)  # noqa: E731
  else:
    a, b = (h[:, :2].view(np.uint32) >> 16).astype(np.uint16), (h[:, 2:].view(np.uint32) >> 16).astype(np.uint16)
    av, bv = a.view(np.uint32)[:, 0], b.view(np.uint32)[:, 0]
    f = lambda x: (x.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
  acc = rng.standard_normal(32).astype(np.float32)

  def go():
    buf = np.zeros(256, np.uint32)
    rows = buf[:128].reshape(32, 4)
    rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = av, bv, acc.view(np.uint32), np.arange(32) + 100
    launch(co, "k", grid=1, block=32, args=[buf])
    return buf[128:].reshape(32, 4)[:, :2].copy()
  (r0, e0, _), (r1, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  want = (acc + f(a[:, 0]) * f(b[:, 0])) + f(a[:, 1]) * f(b[:, 1])
  np.testing.assert_array_equal(r0[:, 1], want.view(np.uint32))
  np.testing.assert_array_equal(r0[:, 0], np.arange(32) + 100)
  np.testing.assert_array_equal(r1, r0)
  assert runs > 0
