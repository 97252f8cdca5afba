"""Issue 22, gputwin.emu.launch on AMD targets: bad shapes and descriptors are LaunchErrors naming the limit, a runaway
kernel meets a default watchdog, and every stop inside a kernel (a register past the allocation, a pcode built-in or
matrix layout the model lacks, typed buffers) is a gputwin error naming target, kernel, wave, PC and instruction."""
import numpy as np
import pytest

import gputwin.emu.api as api
from gputwin.emu import launch
from gputwin.errors import EmuError, GputwinError, LaunchError
from tests.emu.test_asm import kernel


def _launch(arch, body, *, grid=1, block=None, vgprs=16, lds=0, extra="", **kw):
  block = block or (64 if arch.startswith("gfx9") else 32)
  out = np.zeros(max(64, block), np.int32)
  co = kernel(arch, body, vgprs=vgprs, lds=lds, extra=extra, wave32=not arch.startswith("gfx9"))
  launch(co, "k", grid=grid, block=block, args=[out], **kw)
  return out


def _located(e: EmuError, arch: str, inst: str):
  """The error names target, kernel, wave, PC and instruction, in its text and its attributes."""
  assert e.arch == arch and e.kernel == "k" and e.wave >= 0 and e.pc > 0 and inst in e.inst, (e, e.inst)
  assert f"[{arch}] kernel k, wave {e.wave}, PC {e.pc:#x}: {e.inst}" in str(e)


# ---------------------------------------------------------------------------------- registers past the allocation
@pytest.mark.parametrize("arch,body,inst", [
  ("gfx1100", "  v_mov_b32 v200, 1", "v200"),
  ("gfx1100", "  v_add_f32 v1, v2, v180", "v180"),
  ("gfx942", "  v_mov_b32 v200, 1", "v200"),
  ("gfx1200", "  v_mov_b32 v4, 0\n  v_mov_b32 v5, 0\n  global_load_b64 v[40:41], v[4:5], off", "v[40:41]"),
])
@pytest.mark.parametrize("jit", ["0", "force"])
def test_register_past_allocation_is_a_located_launch_error(arch, body, inst, jit, monkeypatch):
  """An IndexError from the register file (or a silently short slice) before; now a LaunchError at the
  instruction, on both tiers (the native tier declines blocks past the allocation and the interpreter stops)."""
  monkeypatch.setenv("GPUTWIN_JIT", jit)
  with pytest.raises(LaunchError, match=r"past the kernel's allocation of 24 VGPRs") as e:
    _launch(arch, body, checks=False)
  _located(e.value, arch, inst)


def test_buffer_atomics_gfx1200():
  """gfx12 VBUFFER names the V# operand rsrc (MUBUF: srsrc): buffer ops raised KeyError 'srsrc'. Checked against
  numpy: atomic add without and with return, a load and a store through one V#."""
  body = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_wait_kmcnt 0
  s_mov_b32 s4, s2
  s_and_b32 s5, s3, 0xffff
  s_mov_b32 s6, 256
  s_mov_b32 s7, 0
  v_lshlrev_b32 v1, 2, v0
  v_mov_b32 v2, 5
  buffer_atomic_add_u32 v2, v1, s[4:7], null offen
  v_mov_b32 v3, 7
  buffer_atomic_add_u32 v3, v1, s[4:7], null offen th:TH_ATOMIC_RETURN
  s_wait_loadcnt 0
  buffer_load_b32 v4, v1, s[4:7], null offen offset:128
  s_wait_loadcnt 0
  v_add_nc_u32 v4, v4, v3
  buffer_store_b32 v4, v1, s[4:7], null offen offset:128"""
  out = np.arange(64, dtype=np.int32)
  launch(kernel("gfx1200", body, vgprs=8), "k", grid=1, block=32, args=[out])
  i = np.arange(32)
  np.testing.assert_array_equal(out[:32], i + 12)
  np.testing.assert_array_equal(out[32:], 32 + i + (i + 5))


# ---------------------------------------------------------------------------------- shapes and descriptors
def test_grid_past_u32_is_a_launch_error():
  with pytest.raises(LaunchError, match=r"4294967296 work-items in dimension x exceeds 4294967295"):
    _launch("gfx1100", "  s_nop 0", grid=1 << 22, block=1024)
  with pytest.raises(LaunchError, match=r"dimension y"):
    _launch("gfx1100", "  s_nop 0", grid=(1, 1 << 32), block=1)


@pytest.mark.parametrize("arch,size", [("gfx1100", 1 << 30), ("gfx942", 1 << 30), ("gfx942", 131072),
                                       ("gfx1200", (1 << 32) - 1)])
def test_private_segment_past_wave_scratch_is_a_launch_error(arch, size):
  """A 1 GiB private segment tried to allocate 32 GiB of scratch (MemoryError); the hardware's limit is the scratch
  of one wave (COMPUTE_TMPRING_SIZE.WAVESIZE: 8191 KiB on gfx9, 32767 x 256 bytes on gfx11/12)."""
  with pytest.raises(LaunchError, match=r"private segment of \d+ bytes .* past the \d+ bytes a wave's scratch"):
    _launch(arch, "  s_nop 0", extra=f"  .amdhsa_private_segment_fixed_size {size}\n")


def test_largest_private_segment_runs():
  _launch("gfx1100", "  s_nop 0", extra=f"  .amdhsa_private_segment_fixed_size {32767 * 256 // 32}\n")


@pytest.mark.parametrize("arch,lds,ok", [("gfx1100", 65536, True), ("gfx1100", 65537, False),
                                         ("gfx1100", (1 << 32) - 1, False), ("gfx950", 163840, True),
                                         ("gfx942", 1 << 31, False)])
def test_lds_limit(arch, lds, ok):
  """clang-22: 'local memory (N) exceeds limit (65536)' (163840 on gfx950); the launch says the same."""
  if ok:
    _launch(arch, "  s_nop 0", lds=lds)
  else:
    with pytest.raises(LaunchError, match=r"bytes of LDS .* exceed the"):
      _launch(arch, "  s_nop 0", lds=lds)


# ---------------------------------------------------------------------------------- the default watchdog
LOOPS = ["l:\n  s_branch l", "l:\n  v_add_nc_u32 v1, v1, 1\n  s_add_u32 s5, s5, 1\n  s_branch l"]


@pytest.mark.parametrize("body", LOOPS, ids=["branch", "body"])
def test_default_watchdog_stops_a_runaway_kernel(body, monkeypatch):
  """No max_instructions: each batch may run WATCHDOG_PER_WAVE wave-instructions per wave; the stop is located
  and reads the same on both tiers."""
  assert api.WATCHDOG_PER_WAVE == 1 << 20  # the default; shrunk below so the test takes milliseconds
  monkeypatch.setattr(api, "WATCHDOG_PER_WAVE", 3000)
  msgs = set()
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    with pytest.raises(EmuError, match=r"more than 18000 wave-instructions executed by a batch of 6 waves "
                                       r"\(the default watchdog: 3000 per wave") as e:
      _launch("gfx1100", body, grid=3, block=64, checks=False)
    _located(e.value, "gfx1100", "s_branch")
    msgs.add(str(e.value))
  assert len(msgs) == 1


def test_explicit_budget_overrides_the_default(monkeypatch):
  monkeypatch.setattr(api, "WATCHDOG_PER_WAVE", 10)
  _launch("gfx1100", "  s_mov_b32 s5, 40\nl:\n  s_sub_u32 s5, s5, 1\n  s_cmp_lg_u32 s5, 0\n  s_cbranch_scc1 l",
          max_instructions=10000)
  with pytest.raises(EmuError, match=r"more than 50 wave-instructions executed \(max_instructions"):
    _launch("gfx1100", LOOPS[0], max_instructions=50)


# ---------------------------------------------------------------------------------- located stops inside a kernel
MTBUF = r"typed buffer access \(MTBUF\)"
STOPS = [
  ("gfx1100", "  s_mov_b32 m0, 0x7fff\n  v_movrels_b32 v1, v2", "v_movrels_b32", r"VGPR index \d+ out of range"),
  ("gfx1100", "  s_mov_b32 m0, 0x7fff\n  s_movrels_b32 s1, s2", "s_movrels_b32", r"SGPR index \d+ out of range"),
  ("gfx942", "  v_mov_b32 v1, 0\n  v_cvt_sr_fp8_f32 v2, v1, v1", "v_cvt_sr_fp8_f32", "float32"),
  ("gfx1200", "  v_mov_b32 v1, 0\n  v_cvt_sr_bf8_f32 v2, v1, v1 byte_sel:2", "v_cvt_sr_bf8_f32", "float32"),
  ("gfx942", "  v_mov_b32 v1, 0\n  global_load_lds_ubyte v1, s[0:1]", "global_load_lds_ubyte", "byte or short load"),
  ("gfx1200", "  s_sendmsg_rtn_b32 s2, sendmsg(MSG_RTN_GET_DOORBELL)", "s_sendmsg_rtn_b32", "MSG_RTN_GET_DOORBELL"),
  ("gfx950", "  v_mov_b32 v1, 0\n  v_cvt_scalef32_f32_fp8 v2, v1, v1", "v_cvt_scalef32_f32_fp8", "fp8_to_f32_scale"),
  ("gfx942", "  v_mov_b32 v0, 0\n  v_mov_b32 v1, 0\n  v_mfma_f32_4x4x1_16b_f32 a[0:3], v0, v1, 0 cbsz:1 abid:2",
   "v_mfma_f32_4x4x1_16b_f32", r"cbsz:1 abid:2 not modelled"),
  ("gfx950", "".join(f"  v_mov_b32 v{r}, 0\n" for r in range(16)) +
   "  v_mfma_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[8:15], v[0:3] cbsz:5", "v_mfma_f32_16x16x128_f8f6f4",
   "formats cbsz:5 blgp:0 abid:0 not modelled"),  # (llvm-mc-22 takes CBSZ 5-7; the CDNA4 guide names 0-4)
  ("gfx1100", "  s_load_b128 s[4:7], s[0:1], 0x0\n  s_waitcnt lgkmcnt(0)\n"
              "  tbuffer_load_format_x v1, v0, s[4:7], 0 offen", "tbuffer_load_format_x", MTBUF),
  ("gfx942", "  s_load_dwordx4 s[4:7], s[0:1], 0x0\n  s_waitcnt lgkmcnt(0)\n"
             "  tbuffer_load_format_x v1, v0, s[4:7], 0 offen", "tbuffer_load_format_x", MTBUF),
]


@pytest.mark.parametrize("arch,body,inst,why", STOPS, ids=[s[2] for s in STOPS])
def test_unmodelled_features_stop_with_a_location(arch, body, inst, why):
  """These raised PcodeError('[] :0:0: ...') or a bare GputwinError with no target, PC or instruction (or an
  AttributeError for MTBUF on gfx11); now the launch stops at the instruction and says what is missing."""
  with pytest.raises(EmuError, match=why) as e:
    _launch(arch, body)
  _located(e.value, arch, inst)
  assert "[] :0:0" not in str(e.value)


def test_unmodelled_conversion_stops_before_its_operands():
  """gfx950's scaled fp6 conversion of two 16-dword sources with neg: the operand fetch raised OverflowError (a
  Python error, no location) before the missing conversion was reached; now the instruction stops as unsupported,
  naming the conversion."""
  with pytest.raises(EmuError, match=r"conversion f32_to_fp6_scale\(\) is not modelled") as e:
    _launch("gfx950", "".join(f"  v_mov_b32 v{i}, -1\n" for i in range(16)) +  # (all ones: past an int64)
            "  v_cvt_scalef32_2xpk16_fp6_f32 v[0:5], -v[0:15], -v[0:15], v1", checks=False)
  _located(e.value, "gfx950", "v_cvt_scalef32_2xpk16_fp6_f32")


def test_far_branch_past_the_code_lands_where_the_offset_says():
  """s_branch 0x7fff jumped to itself (the vendor pcode scales SIMM16 in 16 bits) and 0x8000 fell through; now
  both leave the code at PC + 4 + simm16 * 4 and the launch says so."""
  for simm, delta in ((0x7fff, 4 + 0x7fff * 4), (0x8000, 4 - 0x8000 * 4)):
    with pytest.raises(EmuError, match="outside the code") as e:
      _launch("gfx1100", f"  s_branch {simm:#x}")
    assert e.value.pc - 0x1400 == delta  # the kernel's entry: 0x1400 in code objects we assemble


def test_errors_leave_the_emulator_usable():
  with pytest.raises(GputwinError):
    _launch("gfx1100", "  v_mov_b32 v250, 1")
  np.testing.assert_array_equal(_launch("gfx1100", """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v0, s[2:3]""")[:32], np.arange(32))


def test_global_addtid():
  """GLOBAL_*_ADDTID_B32 (no VGPR address: SGPR_ADDR + INST_OFFSET + laneID * 4) fell through to the buffer path
  (KeyError 'srsrc'); checked against numpy."""
  body = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  global_load_addtid_b32 v1, s[2:3] offset:8
  s_waitcnt vmcnt(0)
  v_add_nc_u32 v1, v1, 100
  global_store_addtid_b32 v1, s[2:3] offset:256"""
  out = np.arange(128, dtype=np.int32)
  launch(kernel("gfx1100", body), "k", grid=1, block=32, args=[out])
  np.testing.assert_array_equal(out[64:96], np.arange(2, 34) + 100)
  np.testing.assert_array_equal(out[:64], np.arange(64))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942"])
def test_ds_swizzle(arch):
  """DS_SWIZZLE_B32 reads no LDS: it ran down the LDS path and its built-in got a scalar (IndexError). Now a
  cross-lane op on the ADDR register llvm-mc-22 encodes; each offset mode against its numpy formula."""
  gfx9, n = arch.startswith("gfx9"), 64 if arch.startswith("gfx9") else 32
  i = np.arange(n)
  for sw, want in (("swizzle(QUAD_PERM,1,0,3,2)", i ^ 1), ('swizzle(BITMASK_PERM,"00p00")', i & ~0x1f | i & 4),
                   ("swizzle(SWAP,16)", i ^ 16)):
    body = f"""
  {"s_load_dwordx2" if gfx9 else "s_load_b64"} s[2:3], s[0:1], 0x0
  {"v_add_u32" if gfx9 else "v_add_nc_u32"} v1, 1000, v0
  ds_swizzle_b32 v2, v1 offset:{sw}
  {"s_wait_dscnt 0" if arch == "gfx1200" else "s_waitcnt lgkmcnt(0)"}
  v_lshlrev_b32 v3, 2, v0
  {"s_wait_kmcnt 0" if arch == "gfx1200" else "s_waitcnt lgkmcnt(0)"}
  {"global_store_dword" if gfx9 else "global_store_b32"} v3, v2, s[2:3]"""
    out = np.zeros(n, np.int32)
    launch(kernel(arch, body, wave32=not gfx9), "k", grid=1, block=n, args=[out])
    np.testing.assert_array_equal(out, 1000 + want, err_msg=sw)
