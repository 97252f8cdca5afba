"""AMD memory-model rules on both tiers (interpreted, GPUTWIN_JIT=0, and every block native, force), checked against
the ISA guides' statements rather than against one tier:

1. Buffer (MUBUF) accesses out of the V#'s range: a load returns 0, a store or an atomic writes nothing, an atomic
   with return gives 0 (RDNA3/CDNA3 ISA guides, buffer "Range Checking": out-of-range reads return zero, writes are
   ignored), on gfx1100 and gfx942. (The guides check dword-x2/x3/x4 accesses per dword and format accesses and
   atomics all or nothing; the emulator checks every buffer access at its first byte, so these tests use one
   dword.)
2. Scratch past a lane's private segment: a GPUPageFault naming scratch and the segment size, on a power-of-two
   segment too (where the window's slots are back to back).
3. The wait-count checker counts a flat instruction whose lanes reach global memory and LDS once (one issue).
"""
import numpy as np
import pytest

from tests.emu.test_asm import kernel

pytest.importorskip("llvmlite")

V_SHARP = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_load_b64 s[4:5], s[0:1], 0x8
  s_mov_b32 s6, {nrec}
  s_mov_b32 s7, 0
  v_lshlrev_b32 v1, 2, v0
  v_mov_b32 v2, 0xdeadbeef
  v_mov_b32 v3, 0xdeadbeef
  v_mov_b32 v8, 7
  s_waitcnt lgkmcnt(0)
  s_or_b32 s5, s5, {stride}
  buffer_load_b32 v2, {addr}, s[4:7], 0 {mode}
{store}  v_mov_b32 v3, 1
  buffer_atomic_add_u32 v3, {addr}, s[4:7], 0 {mode} glc
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 v4, 3, v0
  global_store_b64 v4, v[2:3], s[2:3]"""
BUFFERS = {  # V# (num_records, stride << 16 in dword 1) and addressing: the first 4 lanes' dwords are in range
  # raw: the store at +64 bytes puts every lane out of the 16-byte range
  "raw_offen": dict(nrec=16, stride=0, addr="v1", mode="offen",
                    store="  buffer_store_b32 v8, v1, s[4:7], 0 offen offset:64\n"),
  "structured_idxen": dict(nrec=4, stride=4 << 16, addr="v0", mode="idxen", store=""),
}


CDNA = [("s_load_b64", "s_load_dwordx2"), ("buffer_load_b32", "buffer_load_dword"), ("store_b32", "store_dword"),
        ("buffer_atomic_add_u32", "buffer_atomic_add"), (" glc", " sc0"), ("global_store_b64", "global_store_dwordx2")]


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("case", sorted(BUFFERS))
def test_buffer_out_of_range_reads_zero_writes_nothing(tier_runs, arch, case):
  """32 lanes load and atomically add (raw: and store at +64 bytes, out of range for every lane) through a V# whose
  range covers 4 lanes (raw: 16 bytes; structured: 4 records, index past them for lanes 4+): the other lanes' load
  and atomic return 0 (their registers held 0xdeadbeef before), and memory past the range keeps its bytes."""
  from gputwin.emu import launch
  src = V_SHARP.format(**BUFFERS[case])
  for rdna, cdna in CDNA if arch == "gfx942" else ():
    src = src.replace(rdna, cdna)
  co = kernel(arch, src)

  def go():
    out, data = np.zeros(64, np.uint32), np.arange(100, 164, dtype=np.uint32)
    launch(co, "k", grid=1, block=32, args=[out, data])
    return out, data
  (r0, e0, _), (r1, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  assert runs > 0
  lane = np.arange(32)
  orig = np.arange(100, 164, dtype=np.uint32)
  want = np.where(lane < 4, orig[:32], 0).astype(np.uint32)
  for out, data in (r0, r1):
    np.testing.assert_array_equal(out[0::2], want)  # the loads
    np.testing.assert_array_equal(out[1::2], want)  # the atomics' pre-op values
    keep = orig.copy()
    keep[:4] += 1  # in range: the atomic added 1
    np.testing.assert_array_equal(data, keep)


PRIVATE = "  .amdhsa_private_segment_fixed_size 128\n  .amdhsa_enable_private_segment 1\n"
SCRATCH = {  # a 128-byte private segment (a power of two): lanes store at 4 * lane + 64 (lanes 16+ are past it)
  "b32_past_segment": ("  v_lshlrev_b32 v1, 2, v0\n  scratch_store_b32 v1, v0, off offset:64", 64 + 4 * 16),
  # lane 0's 8-byte store starts in the segment and its second dword (0x80) is past it
  "b64_reaching_past": ("  v_mov_b32 v1, 0\n  v_mov_b32 v3, v0\n  scratch_store_b64 v1, v[2:3], off offset:124", 128),
  # lane 0 reads from far past the segment (4 KiB: many lanes' slots on)
  "load_far_past": ("  v_mov_b32 v1, 0x1000\n  scratch_load_b32 v2, v1, off\n  s_waitcnt vmcnt(0)", 0x1000),
}


@pytest.mark.parametrize("case", sorted(SCRATCH))
def test_scratch_past_power_of_two_segment_faults(tier_runs, case):
  """Grid 2, block 64 on gfx1100 (four waves of 32): an access past a lane's 128-byte private segment is a page
  fault at its private offset naming the scratch allocation, with the same text on both tiers; nothing lands in
  another lane's slot and no host error escapes."""
  from gputwin.emu import launch
  from gputwin.errors import GPUPageFault
  body, at = SCRATCH[case]
  co = kernel("gfx1100", body, extra=PRIVATE)

  def go():
    launch(co, "k", grid=2, block=64, args=[np.zeros(4, np.int32)], checks=False)
  (_, e0, _), (_, e1, _) = tier_runs(go)
  assert e0 is not None and "scratch offset past its 128-byte allocation" in str(e0), e0
  assert f"at VA {at:#x}" in str(e0), e0
  assert isinstance(e0, GPUPageFault) or isinstance(getattr(e0, "__cause__", None), GPUPageFault) or \
    "page fault" in str(e0)
  assert str(e0) == str(e1)


def test_scratch_in_segment_lanes_keep_their_slots(tier_runs):
  """The last dword of a 128-byte segment, written by every lane and read back: each lane reads its own value."""
  from gputwin.emu import launch
  co = kernel("gfx1100", """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_mov_b32 v1, 0
  v_lshlrev_b32 v4, 2, v0
  v_add_nc_u32 v3, 5, v0
  scratch_store_b32 v1, v3, off offset:124
  v_mov_b32 v5, 0
  scratch_store_b32 v1, v5, off offset:0
  scratch_load_b32 v2, v1, off offset:124
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_b32 v4, v2, s[2:3]""", extra=PRIVATE)

  def go():
    out = np.zeros(64, np.uint32)
    launch(co, "k", grid=1, block=64, args=[out])
    return out
  (r0, e0, _), (r1, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for r in (r0, r1):
    np.testing.assert_array_equal(r, np.arange(64, dtype=np.uint32) + 5)


FLAT_SPLIT = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b64 s[4:5], src_shared_base
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v1, 2, v0
  ds_store_b32 v1, v0
  v_add_co_u32 v2, vcc_lo, s2, v1
  v_mov_b32 v3, s3
  v_add_co_ci_u32_e32 v3, vcc_lo, 0, v3, vcc_lo
  v_cmp_le_u32 vcc_lo, 16, v0
  v_cndmask_b32 v2, v2, v1, vcc_lo
  v_mov_b32 v4, s5
  v_cndmask_b32 v3, v3, v4, vcc_lo
  s_waitcnt lgkmcnt(0)
{body}
  global_store_b32 v1, v9, s[2:3]"""
WAITS = {  # (instructions, whether the waitcnt checker must report a missing wait); lanes 0-15 global, 16-31 LDS
  # one load issued before the flat one; vmcnt(1) leaves only the flat load outstanding: v6 is ready
  "vm_older_ready": ("  global_load_b32 v6, v1, s[2:3]\n  flat_load_b32 v5, v[2:3]\n  s_waitcnt vmcnt(1)\n"
                     "  v_mov_b32 v9, v6", False),
  # vmcnt(2) with two loads outstanding waits for nothing: v6 may still be in flight
  "vm_older_missing": ("  global_load_b32 v6, v1, s[2:3]\n  flat_load_b32 v5, v[2:3]\n  s_waitcnt vmcnt(2)\n"
                       "  v_mov_b32 v9, v6", True),
  # a DS load before the flat one; lgkmcnt(2) with two outstanding waits for nothing
  "lgkm_older_missing": ("  ds_load_b32 v6, v1\n  flat_load_b32 v5, v[2:3]\n  s_waitcnt vmcnt(0) lgkmcnt(2)\n"
                         "  v_mov_b32 v9, v6", True),
  "lgkm_older_ready": ("  ds_load_b32 v6, v1\n  flat_load_b32 v5, v[2:3]\n  s_waitcnt vmcnt(0) lgkmcnt(1)\n"
                       "  v_mov_b32 v9, v6", False),
}


@pytest.mark.parametrize("case", sorted(WAITS))
def test_flat_split_counts_once(tier_runs, case):
  """A flat load with lanes in global memory and in LDS is one outstanding vector-memory (and LGKM) instruction:
  partial waits after it report a missing wait exactly when the ISA's counters say so, identically on both tiers."""
  from gputwin.emu import launch
  body, missing = WAITS[case]
  co = kernel("gfx1100", FLAT_SPLIT.format(body=body), lds=128)

  def go():
    out = np.arange(32, dtype=np.uint32)
    launch(co, "k", grid=1, block=32, args=[out], checks=True)
    return out
  (r0, e0, _), (r1, e1, _) = tier_runs(go)
  assert str(e0) == str(e1), (e0, e1)
  assert (e0 is not None) == missing, e0
  if missing:
    assert "missing s_waitcnt" in str(e0) and "v6" in str(e0), e0
