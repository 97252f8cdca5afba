"""AMD scratch, buffer (MUBUF/VBUFFER through a V#) and flat accesses in the native tier (emu/native/), against the
numpy interpreter: bit-identical registers, memory, LDS, scratch window and counts, faults at the same instruction.

1. Random encodings (gputwin.isa.strategies) of every SCRATCH_*, BUFFER_* and FLAT_* opcode the tier compiles, on
   all four targets, their lanes' addresses steered into the private segment (a few lanes past it), a V#'s range
   (some lanes out of it, which load 0 and store nothing) and the flat apertures (global, LDS and private lanes mixed).
2. clang-22 kernels with private arrays, a call with its stack in scratch, and generic pointers through the LDS and
   private apertures: every wave-instruction native, outputs equal numpy's and the interpreter's.
3. Faults: a private offset past the segment, an unmapped flat address, flat addresses past the LDS allocation or
   the private segment: the same error text on both tiers.
4. The race checker on flat accesses that reach LDS: the same race (or none) on both tiers.
"""
import zlib

import numpy as np
import pytest

from gputwin.emu import core, native
from gputwin.emu.amd.decode import PRIVATE_HI, SHARED_HI
from gputwin.emu.memory import GuestMemory
from gputwin.emu.program import Src
from gputwin.errors import GPUPageFault
from tests.emu.cases import CASES
from tests.emu.conftest import TARGETS
from tests.emu.test_jit import BASE, _fill, compiled_encodings, prog_m0

pytest.importorskip("llvmlite")

# bytes of private segment per lane in the random-encoding engines: a power of two, the case where the window's slots
# would be back to back without core.scratch_stride's margin (an access past the segment faults on both tiers)
PRIV = 64
NAMES = ("VGPR", "SGPR", "SCC", "PC", "memory", "LDS", "scratch", "scratch_used", "count", "lanes")


def _engine(prog, L, seed):
  """Two waves on random register files (test_jit's fill), a mapped data page, random LDS and scratch window."""
  rng = np.random.default_rng(seed)
  mem = GuestMemory("gpu0")
  buf = mem.map(BASE, rng.integers(0, 256, 0x1000, dtype=np.uint8))
  W = 2
  eng = core.Engine(prog, mem, W, L, 256, 0, 4096, PRIV, np.arange(W), None)
  eng.V[:] = _fill(rng, eng.V.shape)
  eng.S[:, :106] = _fill(rng, (W, 106))
  eng.S[:, 106:108] = rng.integers(0, 1 << 32, (W, 2), dtype=np.uint64).astype(np.uint32)  # VCC
  eng.S[:, 124:128] = 0
  eng.S[:, prog_m0(prog)] = rng.integers(0, 64, W)
  ex = rng.integers(0, 1 << 32, (W, 2), dtype=np.uint64).astype(np.uint32)
  ex[0] = 0xffffffff  # one wave with every lane on
  eng.S[:, 126:126 + L // 32] = ex[:, :L // 32]
  eng.lds.buf[:] = rng.integers(0, 256, len(eng.lds.buf), dtype=np.uint8)
  eng.scratch.buf[:] = rng.integers(0, 256, len(eng.scratch.buf), dtype=np.uint8)
  eng.scc[:] = rng.integers(0, 2, W)
  eng.pc[:] = prog.base
  eng._exec = None
  return eng, buf


def _state(eng, buf):
  return (eng.V.copy(), eng.S.copy(), eng.scc.copy(), eng.pc.copy(), buf.copy(), eng.lds.buf.copy(),
          eng.scratch.buf.copy(), eng.scratch_used, eng.count, eng.lane_count)


def _put(eng, plan, want):
  """Registers of address plan `plan` such that it evaluates to `want` ((waves, lanes) uint64, before its offset):
  the first VGPR term takes it whole, other terms 0 (without a VGPR term the SGPRs take lane 0's)."""
  W, L = want.shape
  want = (want - np.uint64(plan.offset % (1 << 64))) & np.uint64((1 << plan.width) - 1)
  vterm = next((t for t in plan.terms if t.file == "v"), None)
  for t in plan.terms:
    for k in range(t.dwords):
      if t is vterm:
        eng.V[:, t.index + k] = (want >> np.uint64(32 * k)).astype(np.uint32)
      elif t.file == "v":
        eng.V[:, t.index + k] = 0
      else:
        eng.S[:, t.index + k] = 0 if vterm is not None else (want[:, 0] >> np.uint64(32 * k)).astype(np.uint32)
  eng._exec = None


def _steer(eng, op, rng):
  """Scratch: private offsets in the segment (1 lane in 16 at its last dword or past it); flat: each lane in global
  memory, LDS or the private segment at one of 8 (private: 3) slots 16 bytes apart; buffer: a V# over the mapped page
  (stride 0 or 16, num_records cutting some lanes off), index and offset registers, soffset."""
  W, L = eng.V.shape[0], eng.L
  slot = 16 * rng.integers(0, PRIV // 16 if op.mem == "scratch" else 8, (W, L)).astype(np.uint64)
  if op.mem == "scratch":
    edge = np.uint64(PRIV - 4) + np.uint64(4) * rng.integers(0, 2, (W, L)).astype(np.uint64)
    _put(eng, op.info["address"], np.where(rng.random((W, L)) < 1 / 16, edge, slot))
  elif op.mem == "flat":
    win = rng.integers(0, 3, (W, L))
    hi = np.array([0, SHARED_HI, PRIVATE_HI], np.uint64)[win] << np.uint64(32)
    slot = np.where(win == 2, slot % np.uint64(PRIV // 16 * 16), slot)
    _put(eng, op.info["address"], hi | np.where(win == 0, np.uint64(BASE), np.uint64(0)) + slot)
  elif op.mem == "buffer":
    i = op.info
    if i["soffset"] is not None:
      eng.S[:, i["soffset"]] = rng.integers(0, 2, W) * 16
    stride = int(rng.choice([0, 16]))
    if i["vaddr"] is not None:
      eng.V[:, i["vaddr"]] = rng.integers(0, 12, (W, L)) * (1 if i["idxen"] else 16)
      if i["idxen"] and i["offen"]:
        eng.V[:, i["vaddr"] + 1] = rng.integers(0, 4, (W, L)) * 4
    nrec = rng.integers(8, 12) if stride else rng.integers(96, 160)
    r = i["srsrc"]
    eng.S[:, r], eng.S[:, r + 1], eng.S[:, r + 2], eng.S[:, r + 3] = BASE, stride << 16, nrec, 0
    eng._exec = None


def _tiers(prog, blk, L, seed):
  """The block on the interpreter (its ops in turn), then natively, from the same steered random state."""
  out = []
  for mode in ("interp", "native"):
    eng, buf = _engine(prog, L, seed)
    _steer(eng, blk.ops[0], np.random.default_rng(seed))
    try:
      if mode == "interp":
        for o in blk.ops:
          core.step(eng, o, slice(None))
      else:
        native.Native(eng).run(blk, slice(None))
      out.append(("ok", _state(eng, buf)))
    except (GPUPageFault, core.Stop) as e:
      f = e if isinstance(e, GPUPageFault) else e.fault
      out.append(("fault", str(f) if f is not None else str(e)))
    except Exception as e:
      out.append(("error", f"{type(e).__name__}: {e}"))
  return out


def _compare(arch, kind, seeds=1, lean=False):
  """(encodings of `kind` run on both tiers, of them without a fault, their opcodes, mismatches); `lean`: the
  tier's cold compile (masked functions only)."""
  both, ok, kinds, mismatches = 0, 0, set(), []
  pick = lambda op: op.mem == kind and not any(isinstance(x, Src) and x.file == "a"
                                               for x in [*op.ins.values(), *op.outs.values()])
  for s, prog, op, blk, L, seed in compiled_encodings(arch, seeds, pick, lean):
    (ka, a), (kb, b) = _tiers(prog, blk, L, zlib.crc32(s.data) + seed)
    if ka == "error":
      continue
    both += 1
    ok += ka == "ok"
    kinds.add(op.inst.op)
    same = ka == kb and (all(np.array_equal(x, y) for x, y in zip(a, b)) if ka == "ok" else True)
    if not same:
      what = ",".join(n for n, x, y in zip(NAMES, a, b) if not np.array_equal(x, y)) if ka == kb == "ok" else \
          f"{ka}/{kb} {a if ka != 'ok' else ''} {b if kb != 'ok' else ''}"
      mismatches.append(f"{s.encoding} {'/'.join(s.opcodes)} {s.data.hex()}: {what}")
  assert not native.FAILED, native.FAILED[:3]
  return both, ok, kinds, mismatches


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("kind, seeds, floor", [("scratch", 4, 50), ("buffer", 2, 75), ("flat", 2, 75)])
def test_random_encodings_native_equal_interpreter(arch, kind, seeds, floor):
  both, ok, kinds, mismatches = _compare(arch, kind, seeds)
  print(f"{arch} {kind}: {both} encodings ({len(kinds)} opcodes) on both tiers, {ok} without a fault")
  assert ok >= floor, f"only {ok} of {both} {kind} encodings ran without a fault"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("kind, seeds", [("scratch", 2), ("buffer", 1), ("flat", 1)])
def test_random_encodings_lean_compile(arch, kind, seeds):
  """The same on the tier's cold (lean) compile of each block."""
  both, ok, kinds, mismatches = _compare(arch, kind, seeds, lean=True)
  assert ok >= 25, f"only {ok} of {both} {kind} encodings ran without a fault"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", ["private_array", "calls", "generic_ptr"])
@pytest.mark.parametrize("checks", [False, True])
def test_private_and_generic_kernels_run_natively(clang_co, monkeypatch, tmp_path, arch, name, checks):
  """clang-22 kernels with a private array (scratch), a call whose stack is in scratch, and generic pointers (flat,
  through the LDS and private apertures): numpy's outputs, the interpreter's bits and counts, every wave-instruction
  native; with the checkers on too (uninit, waitcnt, the race checker on flat accesses that reach LDS)."""
  from gputwin.emu import launch
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  co = clang_co(arch)
  runs = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    c = CASES[name]()
    st = launch(co, name, grid=c["grid"], block=c["block"], args=c["args"], checks=checks)
    got, want = c["check"]()
    np.testing.assert_array_equal(got, want)
    runs.append((st, [np.array(a, copy=True) for a in c["args"] if isinstance(a, np.ndarray)]))
  (st_i, out_i), (st_n, out_n) = runs
  assert st_i.native_instructions == 0
  assert st_n.native_instructions == st_n.instructions, (st_n.native_instructions, st_n.instructions)
  assert (st_i.instructions, st_i.lane_instructions) == (st_n.instructions, st_n.lane_instructions)
  for a, b in zip(out_i, out_n):
    assert a.tobytes() == b.tobytes()
  assert not native.FAILED, native.FAILED[:3]


# (96 bytes: not a power of two; test_amd_memory_model.py faults past a 128-byte one)
PRIVATE = "  .amdhsa_private_segment_fixed_size 96\n  .amdhsa_enable_private_segment 1\n"
FAULTS = {  # (assembly, what the error says); {w}: the family's dword suffix, lanes store v0 at 4 * lane + ...
  # lanes 8 and up pass the 96-byte private segment
  "scratch_past_segment": ("  v_lshlrev_b32 v1, 2, v0\n  scratch_store_{w} v1, v0, off offset:64",
                           "scratch offset past its 96-byte allocation"),
  "flat_unmapped": ("  v_lshlrev_b32 v2, 2, v0\n  v_mov_b32 v3, 0x7000\n  flat_store_{w} v[2:3], v0", "0x700000000"),
  # through the shared aperture, past the 64-byte LDS allocation
  "flat_lds_past_allocation": ("  s_mov_b64 s[4:5], src_shared_base\n  v_lshlrev_b32 v2, 2, v0\n"
                               "  v_add_nc_u32 v2, 0x30, v2\n  v_mov_b32 v3, s5\n  flat_store_{w} v[2:3], v0",
                               "LDS offset past its 64-byte allocation"),
  # through the private aperture, past the segment
  "flat_private_past_segment": ("  s_mov_b64 s[4:5], src_private_base\n  v_lshlrev_b32 v2, 3, v0\n  v_mov_b32 v3, s5\n"
                                "  flat_store_{w} v[2:3], v0", "scratch offset past its 96-byte allocation"),
}


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("case", sorted(FAULTS))
def test_faults_same_on_both_tiers(tier_runs, arch, case):
  """A private offset past the segment, an unmapped flat address, flat addresses past the LDS allocation or the
  private segment: the launch stops at the same instruction with the same error on both tiers (the native tier ran
  the blocks before it)."""
  from gputwin.emu import launch
  from tests.emu.test_asm import kernel
  body, says = FAULTS[case]
  cdna = arch.startswith("gfx9")
  body = body.format(w="dword" if cdna else "b32")
  if cdna:
    body = body.replace("v_add_nc_u32", "v_add_u32")
  co = kernel(arch, "  s_mov_b32 s6, 0\n" + body, lds=64, extra=PRIVATE)
  L = 64 if cdna else 32

  def go():
    launch(co, "k", grid=2, block=2 * L, args=[np.zeros(4, np.int32)], checks=False)
  (_, e0, _), (_, e1, runs) = tier_runs(go)
  assert e0 is not None and says in str(e0), e0
  assert str(e0) == str(e1)
  assert runs > 0


FLAT_LDS = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_mov_b64 s[4:5], src_shared_base
  v_lshlrev_b32 v1, 2, v0
  v_mov_b32 v3, s5
{body}
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_b32 v1, v4, s[2:3]"""
RACES = {  # two waves of 32 lanes, 64 dwords of LDS
  "none": ("  v_and_b32 v2, 0xfc, v1\n  flat_store_b32 v[2:3], v0\n  v_mov_b32 v4, v0", False),
  "write_write": ("  v_and_b32 v2, 0x7c, v1\n  flat_store_b32 v[2:3], v0\n  v_mov_b32 v4, v0", True),
  # each lane writes its own dword (ds), then reads the other wave's through the shared aperture: no barrier between
  "read_after_write": ("  ds_store_b32 v1, v0\n  v_add_nc_u32 v2, 0x80, v1\n  v_and_b32 v2, 0xfc, v2\n"
                       "  flat_load_b32 v4, v[2:3]", True),
}


@pytest.mark.parametrize("case", sorted(RACES))
def test_flat_lds_race_same_on_both_tiers(tier_runs, case):
  """The race checker sees flat accesses that reach LDS in native blocks (they log their LDS addresses): two waves
  writing one dword, or one reading what the other wrote, through the shared aperture race, with the interpreter's
  text; distinct dwords do not."""
  from gputwin.emu import launch
  from tests.emu.test_asm import kernel
  body, race = RACES[case]
  co = kernel("gfx1100", FLAT_LDS.format(body=body), lds=256)

  def go():
    out = np.zeros(64, np.int32)
    launch(co, "k", grid=1, block=64, args=[out])
    return out
  (r0, e0, _), (r1, e1, runs) = tier_runs(go)
  assert str(e0) == str(e1) and (e0 is not None) == race, (e0, e1)
  assert runs > 0
  if not race:
    assert r0.tobytes() == r1.tobytes()
