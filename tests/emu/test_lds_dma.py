"""Loads straight into LDS on CDNA (global_load_lds_dword{,x3,x4}, scratch_load_lds_dword, buffer loads with the lds
bit): lane l's data lands at M0 + the instruction offset + l * bytes, no VGPR is written (before: the buffer forms
silently wrote the VGPR the vdata field names, the others stopped as unsupported). Oracles: clang-22's code for
__builtin_amdgcn_global_load_lds / raw_ptr_buffer_load_lds, whose LLVM contract is that layout, read back with plain
LDS loads; the ISA guides' out-of-range buffer read (0). Both tiers, checkers on."""
import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuFault
from gputwin.verify.reliability import kernel


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_clang_global_load_lds(tier_runs, clang_co, arch):
  co = clang_co(arch, "lds_dma").read_bytes()
  n = 256
  x = (np.arange(n + 4, dtype=np.uint32) * 2654435761).astype(np.uint32)

  def go():
    out = np.zeros(2 * n, np.uint32)
    launch(co, "global_dword", grid=n // 64, block=64, args=[out, x])
    return out
  (interp, e0, _), (native, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for got in (interp, native):
    np.testing.assert_array_equal(got[0::2], x[:n])  # the plain load
    np.testing.assert_array_equal(got[1::2], x[4:n + 4])  # offset:16 moves both addresses
  assert runs > 0


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_checkers_on_only_the_loads_into_lds_interpreted(clang_co, monkeypatch, tmp_path, arch):
  """Checkers on (every block compiled): the loads into LDS run interpreted (the checkers follow the bytes they
  write), and once each has retired (s_waitcnt vmcnt(0) before the barrier) the blocks reading the tile run natively:
  every wave-instruction but the two global_load_lds of each of the four waves (before: 56 of 96 native)."""
  monkeypatch.setenv("GPUTWIN_JIT", "force")
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  co, n = clang_co(arch, "lds_dma").read_bytes(), 256
  x = np.arange(n + 4, dtype=np.uint32)
  out = np.zeros(2 * n, np.uint32)
  st = launch(co, "global_dword", grid=n // 64, block=64, args=[out, x])
  np.testing.assert_array_equal(out[0::2], x[:n])
  assert st.instructions - st.native_instructions == 2 * 4, (st.native_instructions, st.instructions)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_clang_buffer_load_lds_and_out_of_range(tier_runs, clang_co, arch):
  """buffer_load_dword ... offen lds through a V# of 256 dwords: a fifth workgroup's lanes read out of range (0)."""
  co = clang_co(arch, "lds_dma").read_bytes()
  x = np.arange(1000, 1256, dtype=np.uint32)

  def go():
    out = np.full(2 * 320, 7, np.uint32)
    launch(co, "buffer_dword", grid=5, block=64, args=[out, x])
    return out
  (interp, e0, _), (native, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for got in (interp, native):
    np.testing.assert_array_equal(got[0::2], np.concatenate([x, np.zeros(64, np.uint32)]))


def test_clang_global_load_lds_dwordx4_gfx950(tier_runs, clang_co):
  co = clang_co("gfx950", "lds_dma").read_bytes()
  x = np.random.default_rng(1).integers(0, 2 ** 32, 4 * 128, dtype=np.uint32)

  def go():
    out = np.zeros(4 * 128, np.uint32)
    launch(co, "global_dwordx4", grid=2, block=64, args=[out, x])
    return out
  (interp, e0, _), (native, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for got in (interp, native):
    np.testing.assert_array_equal(got, x)


# M0 (an LDS byte address) and the offset both move the LDS destination; scratch_load_lds_dword from private memory;
# the lanes' data contiguous from M0 + offset, read back by each lane from its own slot
M0 = """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_mov_b32 v3, 0
  s_waitcnt lgkmcnt(0)
  s_mov_b32 m0, {m0}
  global_load_lds_dword v1, s[4:5] offset:8
  v_add_u32 v4, 0x5a5a0000, v0
  scratch_store_dword v1, v4, off
  s_mov_b32 m0, 0x300
  s_waitcnt vmcnt(0)
  scratch_load_lds_dword v1, off offset:0
  s_waitcnt vmcnt(0)
  v_add_u32 v2, 0x108, v1
  ds_read_b32 v6, v2
  v_add_u32 v2, 0x300, v1
  ds_read_b32 v7, v2
  v_lshlrev_b32 v8, 3, v0
  s_waitcnt lgkmcnt(0)
  global_store_dwordx2 v8, v[6:7], s[6:7]"""


def _m0_co(m0: int) -> bytes:
  return kernel("gfx942", M0.format(m0=m0), vgprs=16, lds=0x400,
                extra="  .amdhsa_private_segment_fixed_size 256\n  .amdhsa_enable_private_segment 1\n")


def _m0_kernel(m0: int):
  co = _m0_co(m0)
  x = np.arange(3000, 3070, dtype=np.uint32)

  def go():
    out = np.zeros((64, 2), np.uint32)
    launch(co, "k", grid=1, block=64, args=[x, out])
    return out
  return go, x


def test_m0_offset_and_scratch(tier_runs):
  go, x = _m0_kernel(0x100)
  (interp, e0, _), (native, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for got in (interp, native):
    np.testing.assert_array_equal(got[:, 0], x[2:66])  # global + 8 bytes, LDS at 0x100 + 8 + 4l
    np.testing.assert_array_equal(got[:, 1], 0x5a5a0000 + np.arange(64, dtype=np.uint32))  # scratch -> LDS 0x300


def test_past_the_allocation_faults_on_both_tiers(tier_runs):
  """M0 near the end of the 1 KiB allocation: lanes past it fault, the same located error on both tiers."""
  go, _ = _m0_kernel(0x3f0)
  (_, e0, _), (_, e1, _) = tier_runs(go)
  assert isinstance(e0, EmuFault) and "global_load_lds_dword" in str(e0) and "LDS" in str(e0), e0
  assert str(e1) == str(e0)


@pytest.mark.parametrize("text", ["global_load_lds_ubyte v1, s[4:5]", "buffer_load_ushort v1, s[4:7], 0 offen lds"])
def test_sub_dword_loads_into_lds_stop_with_the_reason(text):
  co = kernel("gfx942", f"  s_load_dwordx4 s[4:7], s[0:1], 0x0\n  s_waitcnt lgkmcnt(0)\n  {text}", vgprs=16, lds=256)
  with pytest.raises(Exception, match=r"gfx942.*byte or short load into LDS"):
    launch(co, "k", grid=1, block=64, args=[np.zeros(64, np.uint32)])


# waitcnt: the load into LDS lands when vmcnt retires it. {wait} before reading back the bytes it writes ({read}: the
# same bytes, or others, which a double-buffered loop reads while the next tile is in flight)
WAIT = """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  s_mov_b32 m0, 0x100
  global_load_lds_dword v1, s[4:5]
  v_add_u32 v2, {read}, v1
  {wait}
  ds_read_b32 v5, v2
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_dword v1, v5, s[6:7]"""


@pytest.mark.parametrize("read,wait,bad", [("0x100", "", True), ("0x100", "s_waitcnt vmcnt(0)", False),
                                           ("0", "", False), ("0x1fc", "", True)])
def test_waitcnt_on_loads_into_lds(tier_runs, read, wait, bad):
  co = kernel("gfx942", WAIT.format(read=read, wait=wait), vgprs=16, lds=0x300)
  x = np.arange(64, dtype=np.uint32) + 5

  def go():
    out = np.zeros(64, np.uint32)
    launch(co, "k", grid=2, block=64, args=[x, out])
    return out
  (interp, e0, _), (native, e1, _) = tier_runs(go)
  assert str(e1) == str(e0)
  if bad:
    assert e0 is not None and "ds_read_b32" in str(e0) and "load into LDS" in str(e0) and "vmcnt" in str(e0), e0
  else:
    assert e0 is None, e0
    want = x if read == "0x100" else np.zeros(64, np.uint32)
    np.testing.assert_array_equal(interp, want)
    np.testing.assert_array_equal(native, want)


def _no_checks(co, name, grid, out, src, first=False):
  """A launch with the checkers off: (its output, wave-instructions run natively, all of them). `first`: the kernel
  takes (src, out), else (out, src)."""
  def go():
    o = out.copy()
    st = launch(co, name, grid=grid, block=64, args=[src, o] if first else [o, src], checks=False)
    return o, st.native_instructions, st.instructions
  return go


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_loads_into_lds_run_natively_without_checkers(tier_runs, clang_co, arch):
  """Checkers off: a load into LDS runs inside its native block (codegen deliver: the data to M0 + offset + lane *
  bytes through the LDS window's checks), every instruction native, the layout LLVM's contract gives (the buffer
  form's out-of-range lanes: zeros). (Checkers on, a block ends before one: test_clang_global_load_lds.)"""
  co = clang_co(arch, "lds_dma").read_bytes()
  x = (np.arange(512, dtype=np.uint32) * 2654435761).astype(np.uint32)
  cases = [("global_dword", 4, np.zeros(512, np.uint32), x[:260],
            lambda o: (o[0::2], o[1::2]), (x[:256], x[4:260])),
           ("buffer_dword", 5, np.full(640, 7, np.uint32), x[:256],
            lambda o: (o[0::2],), (np.concatenate([x[:256], np.zeros(64, np.uint32)]),))]
  if arch == "gfx950":
    cases.append(("global_dwordx4", 2, np.zeros(512, np.uint32), x, lambda o: (o,), (x,)))
  for name, grid, out, src, parts, want in cases:
    (interp, e0, _), (native, e1, _) = tier_runs(_no_checks(co, name, grid, out, src))
    assert e0 is None and e1 is None, (name, e0, e1)
    for got in (interp, native):
      for g, w in zip(parts(got[0]), want):
        np.testing.assert_array_equal(g, w)
    assert interp[1] == 0 and native[1] == native[2], (name, native[1:])


def test_m0_scratch_and_the_allocation_end_natively(tier_runs):
  """The M0/offset/scratch kernel and the one whose lanes run past the allocation, checkers off: the same results,
  the same located error."""
  x = np.arange(3000, 3070, dtype=np.uint32)
  for m0 in (0x100, 0x3f0):
    (interp, e0, _), (native, e1, _) = tier_runs(_no_checks(_m0_co(m0), "k", 1, np.zeros((64, 2), np.uint32), x, True))
    assert str(e0) == str(e1), (e0, e1)
    if m0 == 0x100:
      for got in (interp, native):
        np.testing.assert_array_equal(got[0][:, 0], x[2:66])
        np.testing.assert_array_equal(got[0][:, 1], 0x5a5a0000 + np.arange(64, dtype=np.uint32))
      assert native[1] == native[2]
    else:
      assert isinstance(e1, EmuFault) and "global_load_lds_dword" in str(e1), e1
