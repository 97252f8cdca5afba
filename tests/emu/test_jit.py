"""The native tier (emu/native/) against the numpy interpreter: bit-identical architectural state.

1. Every opcode the tier accepts, as random valid encodings (gputwin.isa.strategies), on random register files
   seeded with IEEE special values: registers, SCC, PC, memory and faults must match the interpreter exactly.
2. Every clang-22 kernel of the suite on every target: outputs equal numpy's and the interpreter's bits, with the
   same wave- and lane-instruction counts, and every wave-instruction native (dynlds's clock reads too).
"""
import zlib

import numpy as np
import pytest

from gputwin.emu import core, native
from gputwin.emu.memory import GuestMemory
from gputwin.emu.frontend import for_arch
from gputwin.emu.program import Program
from gputwin.errors import GPUPageFault
from gputwin.isa import strategies
from gputwin.isa.targets import target as target_info
from tests.emu.cases import CASES, EXTRA
from tests.emu.conftest import TARGETS
from tests.emu.test_clang import _check

pytest.importorskip("llvmlite")

ENDPGM = {"rdna3": bytes.fromhex("0000b0bf"), "rdna4": bytes.fromhex("0000b0bf"), "cdna": bytes.fromhex("000081bf")}
SPECIAL = np.array([0, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fa00001,
                    0xffc12345, 0x00000001, 0x807fffff, 0x7f7fffff, 0x3c00, 0x7e00, 0xfc00, 0x8001, 0xffffffff,
                    0x7fffffff, 0x00010000, 0x4b000000, 0x5f000000, 0xdf000000, 0x3fffffff, 31, 32, 63, 64, 1, 2],
                   np.uint32)
BASE = 0x10000  # guest VA of the one mapped data page (registers point into it a quarter of the time)


def _fill(rng, shape):
  x = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
  pick = rng.random(shape)
  x = np.where(pick < 0.35, SPECIAL[rng.integers(0, len(SPECIAL), shape)], x)
  small = rng.integers(0, 0x800, shape).astype(np.uint32) & ~np.uint32(3)
  x = np.where((pick >= 0.35) & (pick < 0.5), small, x)  # small values: LDS offsets, shift amounts
  return np.where((pick >= 0.5) & (pick < 0.6), np.uint32(BASE) + small, x)  # in the mapped page


def _engine(prog, L, seed):
  rng = np.random.default_rng(seed)
  mem = GuestMemory("gpu0")
  buf = mem.map(BASE, rng.integers(0, 256, 0x1000, dtype=np.uint8))
  W = 2
  eng = core.Engine(prog, mem, W, L, 256, 0, 4096, 0, np.arange(W), None)
  eng.V[:] = _fill(rng, eng.V.shape)
  eng.S[:, :106] = _fill(rng, (W, 106))
  hi = rng.integers(0, 2, W).astype(bool)  # 64-bit registers pairs that address the mapped page
  eng.S[hi, 1:106:2] = 0
  eng.S[:, 106:108] = rng.integers(0, 1 << 32, (W, 2), dtype=np.uint64).astype(np.uint32)  # VCC
  eng.S[:, 124:128] = 0
  eng.S[:, prog_m0(prog)] = rng.integers(0, 64, W)
  ex = rng.integers(0, 1 << 32, (W, 2), dtype=np.uint64).astype(np.uint32)
  ex[0] = 0xffffffff  # one wave with every lane on
  eng.S[:, 126:126 + L // 32] = ex[:, :L // 32]
  eng.lds.buf[:] = rng.integers(0, 256, len(eng.lds.buf), dtype=np.uint8)
  eng.scc[:] = rng.integers(0, 2, W)
  eng.pc[:] = prog.base
  eng._exec = None
  return eng, buf


def prog_m0(prog):
  return 124 if prog.family == "cdna" else 125


def both_tiers(prog, blk, L, seed, prepare=None) -> list[tuple[str, object]]:
  """The block `blk` of `prog` run on a fresh random engine (seeded) by the interpreter (its ops in turn), then by
  the native tier: ("ok", state), ("fault", text) or ("error", text: the interpreter rejects some random operand
  combinations) for each. `prepare(eng, op, rng)`: set the engine up further first."""
  results = []
  for mode in ("interp", "native"):
    eng, buf = _engine(prog, L, seed)
    if prepare is not None:
      prepare(eng, blk.ops[0], np.random.default_rng(seed))
    try:
      if mode == "interp":  # (the block: the op, and the s_endpgm after it unless the op branches)
        for o in blk.ops:
          core.step(eng, o, slice(None))
      else:
        native.Native(eng).run(blk, slice(None))
      results.append(("ok", _state(eng, buf)))
    except (GPUPageFault, core.Stop) as e:
      f = e if isinstance(e, GPUPageFault) else e.fault
      results.append(("fault", str(f) if f is not None else str(e)))
    except Exception as e:
      results.append(("error", f"{type(e).__name__}: {e}"))
  return results


def _state(eng, buf):
  return (eng.V.copy(), eng.S.copy(), eng.scc.copy(), eng.pc.copy(), buf.copy(), eng.lds.buf.copy(), eng.count,
          eng.lane_count)


def compiled_encodings(arch: str, seeds: int = 1, pick=lambda op: True, lean: bool = False):
  """(strategy sample, program, op, block, wave size, seed) for each random encoding of `arch` the interpreter binds,
  `pick` accepts and the native tier compiles into a block starting with it (the op, then s_endpgm unless it
  branches); `lean`: its cold compile (tier.py: masked functions only, the cheaper pipeline)."""
  fam = target_info(arch).family
  L = 32 if arch.startswith("gfx1") else 64
  for seed in range(seeds):
    for s in strategies.batch(arch, seed=seed, wave=L, tame=80):
      if s.encoding.split("_")[0] in ("EXP", "VEXPORT", "MIMG", "VIMAGE", "VSAMPLE", "MTBUF"):
        continue
      prog = Program(s.data + ENDPGM[fam] * 4, 0x1000, arch, fam, L, for_arch(arch))
      try:
        op = prog.op(0x1000)
      except Exception:  # encodings the interpreter cannot bind (not this tier's business)
        continue
      if not pick(op):
        continue
      try:
        native.supported(op, fam)
      except native.Unsupported:
        continue
      blk = native.compile_block(prog, 0x1000, L, lean=lean)
      if blk is not None and blk.ops[0] is op and blk.nv <= 256 and blk.ns <= 256:
        yield s, prog, op, blk, L, seed


@pytest.mark.parametrize("arch, lean", [(a, False) for a in TARGETS] + [("gfx1100", True), ("gfx942", True)])
def test_each_opcode_native_equals_interpreter(arch, lean):
  tested, both, mismatches = 0, 0, []
  for s, prog, op, blk, L, seed in compiled_encodings(arch, lean=lean):
    if op.kind == "nop" or blk.na > 1:
      continue
    tested += 1
    (ka, a), (kb, b) = both_tiers(prog, blk, L, zlib.crc32(s.data) + seed)
    if ka == "error":
      continue
    both += 1
    # a fault must happen at the same instruction; which lane's address is reported first may differ (the
    # interpreter checks every lane of the group before any access, the native tier goes lane by lane)
    same = ka == kb and (all(np.array_equal(x, y) for x, y in zip(a, b)) if ka == "ok" else True)
    if not same:
      what = f"{ka}/{kb}: {a if ka != 'ok' else ''} / {b if kb != 'ok' else ''}"
      if ka == kb == "ok":
        names = ("VGPR", "SGPR", "SCC", "PC", "memory", "LDS", "count", "lanes")
        what = ",".join(n for n, x, y in zip(names, a, b) if not np.array_equal(x, y))
      mismatches.append(f"{s.encoding} {'/'.join(s.opcodes)} {s.data.hex()}: {what}")
  assert not native.FAILED, native.FAILED[:3]
  print(f"{arch}: {both} encodings on both tiers ({tested} compiled)")
  assert both > 800, f"only {both} of {tested} opcodes ran on both tiers"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:60])


def _run(co, name, c, monkeypatch, mode):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  from gputwin.emu import launch
  st = launch(co, name, grid=c["grid"], block=c["block"], args=c["args"], checks=False)
  outs = [np.array(a, copy=True) for a in c["args"] if isinstance(a, np.ndarray)]
  return st, outs


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES) + sorted(EXTRA))
def test_kernels_native_equals_interpreter(clang_co, monkeypatch, arch, name):
  co = clang_co(arch, {**CASES, **EXTRA}[name]().get("src", "suite"))
  c = {**CASES, **EXTRA}[name]()
  st_i, out_i = _run(co, name, c, monkeypatch, "0")
  c = {**CASES, **EXTRA}[name]()
  st_n, out_n = _run(co, name, c, monkeypatch, "force")
  ran = st_n.native_instructions
  assert ran == st_n.instructions, f"only {ran} of {st_n.instructions} wave-instructions ran natively"
  assert st_i.native_instructions == 0
  for a, b in zip(out_i, out_n):
    assert a.tobytes() == b.tobytes()
  assert (st_i.instructions, st_i.lane_instructions) == (st_n.instructions, st_n.lane_instructions)
  _check(c, arch)


def test_native_faults_are_reported_like_the_interpreters(monkeypatch):
  """A guest fault inside a compiled block: the same error class, kernel, PC and instruction as interpreted."""
  from gputwin.emu import launch
  from gputwin.errors import EmuFault
  from tests.emu.test_checks_errors import GOOD
  from tests.emu.test_asm import kernel
  cases = [(GOOD.replace("v_lshlrev_b32 v1, 2, v0", "v_lshlrev_b32 v1, 12, v0"), 0, r"global_store_b32"),
           ("  v_lshlrev_b32 v1, 2, v0\n  ds_store_b32 v1, v0 offset:64", 64, r"ds_store_b32.*LDS")]
  for body, lds, what in cases:
    msgs = []
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      before = native.STATS["runs"]
      with pytest.raises(EmuFault, match=r"gfx1100.*kernel k.*PC 0x.*" + what) as e:
        launch(kernel("gfx1100", body, lds=lds), "k", grid=1, block=32, args=[np.zeros(32, np.int32)], checks=False)
      assert (native.STATS["runs"] > before) == (mode == "force")
      msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_tier_waits_until_a_block_is_hot(clang_co, monkeypatch):
  """A small dispatch never compiles; a block compiles once waves x length passes GPUTWIN_JIT_AFTER (1: in place)."""
  from gputwin.emu import launch
  co = clang_co("gfx1100", "suite", "-O1")  # a program no other test ran (compiled blocks live with the program)
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", "0")  # (blocks another process compiled run from their first sight)
  monkeypatch.setenv("GPUTWIN_JIT", "1")
  monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1000000000")
  before = dict(native.STATS)
  c = CASES["saxpy"]()
  launch(co, "saxpy", grid=c["grid"], block=c["block"], args=c["args"], checks=False)
  assert native.STATS["blocks"] == before["blocks"] and native.STATS["runs"] == before["runs"]
  _check(c)
  monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1")
  c = CASES["saxpy"]()
  launch(co, "saxpy", grid=c["grid"], block=c["block"], args=c["args"], checks=False)
  assert native.STATS["runs"] > before["runs"]
  _check(c)


def _fuzz_native(monkeypatch, tmp_path, seed, count):
  """Random UB-free OpenCL programs (gputwin fuzz) with every block compiled: outputs equal the host's."""
  import shutil
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    pytest.skip("clang-22 / ld.lld-22 not installed (CI installs them: .ci/run)")
  from gputwin.verify import fuzz
  monkeypatch.setattr(fuzz, "CHECKS", False)  # checkers keep the interpreter; the tier runs without them
  monkeypatch.setenv("GPUTWIN_JIT", "force")
  before = native.STATS["wave_instructions"]
  res = fuzz.fuzz(seed, count, fuzz.TARGETS, batch=count, jobs=1, reduce_mismatches=False, save_to=tmp_path)
  assert native.STATS["wave_instructions"] > before and not native.FAILED
  bad = [f"{o.target} #{o.index}: {o.status} {o.detail}" for o in res if o.status not in ("ok", "known-bug")]
  assert not bad, "\n".join(bad[:10])


def test_fuzzed_programs_native_equal_host(monkeypatch, tmp_path):
  _fuzz_native(monkeypatch, tmp_path, 2027, 3)


@pytest.mark.slow
def test_fuzzed_programs_native_equal_host_many(monkeypatch, tmp_path):
  _fuzz_native(monkeypatch, tmp_path, 7, 25)


# ------------------------------------------------------------------------------ probed memory access
# A plain global or LDS access first probes its wave: every active lane in the region the last wave hit (LDS: in the
# allocation) and lanes `stride` apart -> one vectorised loop without checks; in the region but scattered -> a loop
# without checks; anything else (a lane would fault) -> the exact lane-by-lane path. Each pattern must give the
# interpreter's bits (and numpy's values), a fault the interpreter's exact error.
PATTERNS = {  # byte offset of work-item t's access (v0 = t, 2 waves of 32), gfx1100 VALU -> (asm, numpy)
  "contiguous": ("v_lshlrev_b32 v1, 2, v0", lambda t: 4 * t),
  "reversed": ("v_sub_nc_u32 v1, 63, v0\n  v_lshlrev_b32 v1, 2, v1", lambda t: 4 * (63 - t)),
  "strided": ("v_lshlrev_b32 v1, 3, v0", lambda t: 8 * t),
  "broadcast": ("v_mov_b32 v1, 12", lambda t: 12 + 0 * t),
  "past_the_end": ("v_lshlrev_b32 v1, 2, v0\n  v_add_nc_u32 v1, 0x110, v1", lambda t: 4 * t + 0x110),
}


def _probe_kernel(pattern: str, half: bool, lds: bool):
  from tests.emu.test_asm import kernel
  if lds:  # LDS[4t] = 7t + 3 for the 64 work-items (the rest of the 512 bytes 0), then the patterned read
    load = """  v_lshlrev_b32 v5, 2, v0
  v_mad_u32_u24 v6, v0, 7, 3
  ds_store_b32 v5, v6
  s_waitcnt lgkmcnt(0)
  s_barrier
  ds_load_b32 v2, v1"""
  else:
    load = "  global_load_b32 v2, v1, s[4:5]"
  return kernel("gfx1100", f"""
  s_load_b128 s[4:7], s[0:1], 0x0
  {PATTERNS[pattern][0]}
  v_lshlrev_b32 v3, 2, v0
  s_waitcnt lgkmcnt(0)
{"  v_cmpx_gt_u32 48, v0" if half else ""}
{load}
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_b32 v3, v2, s[6:7]""", lds=512 if lds else 0)


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("half", [False, True], ids=["all", "partial-exec"])
@pytest.mark.parametrize("lds", [False, True], ids=["global", "lds"])
def test_probed_accesses_equal_interpreter(monkeypatch, pattern, half, lds):
  from gputwin.emu import launch
  from gputwin.errors import EmuFault
  co = _probe_kernel(pattern, half, lds)
  src = np.arange(128, dtype=np.int32) * 5 + 1
  results = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    before, outs = native.STATS["runs"], []
    try:
      for _ in range(2):  # the second launch finds its blocks compiled and its engine's register files reused
        dst = np.full(64, -9, np.int32)
        launch(co, "k", grid=1, block=64, args=[src, dst], checks=False)
        outs.append(dst.tobytes())
      results.append(("ok", outs))
    except EmuFault as e:
      results.append(("fault", str(e)))
    assert (native.STATS["runs"] > before) == (mode == "force")
  assert results[0] == results[1]
  t = np.arange(64)
  off = PATTERNS[pattern][1](t)
  if pattern == "past_the_end" and not half:  # work-items 60.. read past the 512 bytes
    assert results[0][0] == "fault" and ("LDS" in results[0][1]) == lds, results[0]
    return
  lds_bytes = np.zeros(128, np.int32)
  lds_bytes[:64] = np.where(t < 48, 7 * t + 3, 0) if half else 7 * t + 3  # (EXEC is cut before the LDS stores)
  want = (lds_bytes if lds else src)[np.minimum(off // 4, 127)]
  if half:
    want = np.where(t < 48, want, -9)
  for o in results[0][1]:
    np.testing.assert_array_equal(np.frombuffer(o, np.int32), want)


def test_dispatch_starts_from_zeroed_registers(monkeypatch):
  """Register files are reused (the next batch, the next dispatch of the same shape) with only their written rows
  cleared: a register the kernel reads before writing must read 0 every time, natively or interpreted (and v0,
  which the kernel changes, the work-item ids again)."""
  from gputwin.emu import api, launch
  from tests.emu.test_asm import kernel
  co = kernel("gfx1100", """
  s_load_b64 s[4:5], s[0:1], 0x0
  s_lshl_b32 s3, s2, 6
  v_add_nc_u32 v1, s3, v0
  v_lshlrev_b32 v1, 2, v1
  v_add_nc_u32 v2, s20, v5
  v_mov_b32 v5, 0x77
  s_mov_b32 s20, 0x88
  v_add_nc_u32 v0, 1, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v2, s[4:5]""", sgprs=24, extra="  .amdhsa_system_sgpr_workgroup_id_x 1\n")
  groups = api.BATCH_LANES // 64  # one full batch of 2-wave workgroups (no LDS, checkers off)
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    for n in (groups, 2 * groups):  # the first leaves its engine to the second, which then restarts it
      out = np.full(n * 64, -1, np.int32)
      launch(co, "k", grid=n, block=64, args=[out], checks=False)
      assert (out == 0).all(), np.unique(out)


def test_array_arguments(monkeypatch):
  """Writeable contiguous arrays are mapped in place; the same array twice, a read-only or a strided one is copied
  (copy semantics, as before): results must not depend on which."""
  from gputwin.emu import launch
  from tests.emu.test_asm import kernel
  co = kernel("gfx1100", """
  s_load_b128 s[4:7], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[4:5]
  s_waitcnt vmcnt(0)
  v_add_nc_u32 v2, 1, v2
  global_store_b32 v1, v2, s[6:7]""")
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    a = np.arange(32, dtype=np.int32)
    launch(co, "k", grid=1, block=32, args=[a, a], checks=False)  # the same array: two guest copies
    np.testing.assert_array_equal(a, np.arange(32) + 1)
    src = np.arange(32, dtype=np.int32)
    src.flags.writeable = False
    out = np.zeros(64, np.int32)[::2]  # strided
    launch(co, "k", grid=1, block=32, args=[src, out], checks=False)
    np.testing.assert_array_equal(out, np.arange(32) + 1)
    np.testing.assert_array_equal(src, np.arange(32))


def test_fault_in_a_restarted_batch(monkeypatch):
  """A fault in the second batch of a run(): the interpreter's error, and the waves the fault kept from starting
  still got their deferred setup (v0 = work-item ids, rows the first batch wrote cleared), as the interpreter shows."""
  from gputwin.emu import api
  from gputwin.emu.api import Emulator
  from gputwin.errors import EmuFault
  from tests.emu.test_asm import kernel
  groups = api.BATCH_LANES // 64  # 2-wave workgroups: one full batch each (no LDS, checkers off)
  co = kernel("gfx1100", f"""
  s_load_b64 s[4:5], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_add_nc_u32 v6, 0x55, v0
  s_cmp_eq_u32 s2, {groups + 7}
  s_cselect_b32 s3, 0x40000000, 0
  v_add_nc_u32 v1, s3, v1
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[4:5]
  v_add_nc_u32 v0, 1, v0
  v_mov_b32 v7, 9""", sgprs=24, extra="  .amdhsa_system_sgpr_workgroup_id_x 1\n")
  seen = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    d = Emulator(co).prepare("k", grid=2 * groups, block=64, args=[np.zeros(64, np.int32)], checks=False)
    assert d.per_batch == groups
    with pytest.raises(EmuFault, match=r"global_load_b32") as e:
      d.run()
    last = d.base_wave + d.eng.W - 1  # a wave of the faulting batch that the fault kept from starting natively
    seen.append((str(e.value), d.reg(last, "v0").tolist(), d.reg(last, "v7").tolist()))
  assert seen[0] == seen[1]  # v7: written by the whole first batch, after the load
  assert seen[1][1] == list(range(32, 64)) and seen[1][2] == [0] * 32, seen[1][1:]


def test_lds_fault_past_4096_workgroups(monkeypatch):
  """A kernel without LDS runs 8192 one-wave workgroups per batch (checkers off), past the 12-bit workgroup slot
  of LDS addresses: an LDS access still faults as "past its 0-byte allocation", natively and interpreted alike."""
  from gputwin.emu import api
  from gputwin.emu.api import Emulator
  from gputwin.errors import EmuFault
  from tests.emu.test_asm import kernel
  co = kernel("gfx1100", """
  s_cmp_eq_u32 s2, 5000
  s_cselect_b32 exec_lo, -1, 0
  v_lshlrev_b32 v1, 2, v0
  ds_load_b32 v2, v1
  s_waitcnt lgkmcnt(0)""", sgprs=24, extra="  .amdhsa_system_sgpr_workgroup_id_x 1\n")
  seen = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    d = Emulator(co).prepare("k", grid=api.BATCH_LANES // 32, block=32, checks=False)
    assert d.per_batch == api.BATCH_LANES // 32
    with pytest.raises(EmuFault, match=r"0-byte allocation") as e:
      d.run()
    seen.append((str(e.value), d.reg(5000, "v1").tolist(), d.reg(4999, "v1").tolist()))
  assert seen[0] == seen[1], seen
  assert seen[0][1:] == ([4 * k for k in range(32)], [0] * 32)  # only workgroup 5000 had lanes on


@pytest.mark.parametrize("ieee", [0, 1])
def test_ieee_mode_of_the_kernel_descriptor_in_both_tiers(monkeypatch, ieee):
  """WAVE_MODE.IEEE is the kernel descriptor's in both tiers (one table, binding.SPECIAL_INPUTS): V_MAX_F32 of a
  signalling NaN and 1.0 is the NaN made quiet with IEEE on, 1.0 with it off (the manual's pseudocode), and the
  native tier gives the interpreter's bits."""
  from tests.emu.test_asm import kernel
  co = kernel("gfx1100", """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[2:3]
  s_waitcnt vmcnt(0)
  v_max_f32 v3, v2, 1.0
  v_add_f32 v4, v2, 1.0
  global_store_b32 v1, v3, s[2:3]
  global_store_b32 v1, v4, s[2:3] offset:128""", extra=f"  .amdhsa_ieee_mode {ieee}\n")
  data = np.array([0x7fa00001, 0x7fc00000, 0x3f000000, 0xff800000] * 8, np.uint32)
  outs = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    buf = np.concatenate([data, np.zeros(32, np.uint32)])
    from gputwin.emu import launch
    launch(co, "k", grid=1, block=32, args=[buf], checks=False)
    outs.append(buf)
  assert outs[0].tobytes() == outs[1].tobytes()
  assert outs[0][0] == (0x7fe00001 if ieee else 0x3f800000) and outs[0][2] == 0x3f800000
