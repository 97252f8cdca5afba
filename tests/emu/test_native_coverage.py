"""Instruction classes the native tier (emu/native/) runs beyond plain VALU/SALU and loads/stores, against the numpy
interpreter: bit-identical registers, memory and counts.

1. Block tails (s_endpgm, s_barrier): clang-22 kernels with barriers run all but their matrix ops natively.
2. Atomics (global and LDS): every atomic opcode of the random encodings (gputwin.isa.strategies), its lanes' and
   waves' addresses steered into mapped memory and onto a few shared words, so read-modify-writes conflict and
   must serialise as the interpreter's do.
3. DPP: the random encodings with DPP16/DPP8 controls on random register files with random EXEC.
4. VOP3 output modifiers (clamp, omod) on float results; packed (VOP3P) operands.
5. Registers by lane number (v_readlane, v_writelane): wave-level bodies. 6. SDWA selects (CDNA).
7. Cross-lane bodies (readfirstlane, permlane, ds_bpermute/permute) and ds_swizzle's modes.
8. A carry-in read from a VGPR (V_ADD_CO_CI_U32's VOP3 form): the SGPR carry-out from the lanes' copies.
9. Scalar registers by number (s_movrels, s_movreld, s_movrelsd_2: M0-relative), M0 past the scalar file included:
   the scheduler's run (core.run) on both tiers, the native one stopping where the interpreter raises its error.
"""
import zlib

import numpy as np
import pytest

from gputwin.emu import core, native
from gputwin.emu.frontend import for_arch
from gputwin.emu.program import Program, Src
from gputwin.isa import assemble
from gputwin.isa.targets import target as target_info
from tests.emu.cases import CASES
from tests.emu.conftest import TARGETS
from tests.emu.test_jit import BASE, ENDPGM, _engine, _run, _state, both_tiers, compiled_encodings

pytest.importorskip("llvmlite")


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", ["reduce", "matmul", "saxpy"])
def test_barriers_and_exits_run_natively(clang_co, monkeypatch, arch, name):
  """s_barrier and s_endpgm end native blocks (the scheduler then parks or retires the waves): kernels whose only
  other ops are VALU/SALU and global/LDS accesses run every wave-instruction natively, with the interpreter's bits."""
  co = clang_co(arch)
  st_i, out_i = _run(co, name, CASES[name](), monkeypatch, "0")
  st_n, out_n = _run(co, name, CASES[name](), monkeypatch, "force")
  assert st_n.native_instructions == st_n.instructions, (st_n.native_instructions, st_n.instructions)
  assert (st_i.instructions, st_i.lane_instructions) == (st_n.instructions, st_n.lane_instructions)
  for a, b in zip(out_i, out_n):
    assert a.tobytes() == b.tobytes()
  assert not native.FAILED, native.FAILED[:3]


def _steer(eng, op, rng, L):
  """Point every lane's access of `op` into the mapped page (global) or the first KiB of LDS, at one of 8 words
  (so lanes and waves collide): the first VGPR term of its address plan takes the whole address, other terms 0."""
  plan = op.info["address"]
  lds = plan.space == "lds"
  W = eng.V.shape[0]
  want = (0 if lds else BASE) + 16 * rng.integers(0, 8, (W, L)).astype(np.uint64)
  want = (want - np.uint64(plan.offset % (1 << 64))) & np.uint64((1 << plan.width) - 1)
  first = True
  for t in plan.terms:
    for k in range(t.dwords):
      part = (want >> np.uint64(32 * k)).astype(np.uint32) if first and t.file == "v" else np.uint32(0)
      if t.file == "v":
        eng.V[:, t.index + k] = part
      else:
        eng.S[:, t.index + k] = 0
    first = first and t.file != "v"
  eng._exec = None


def _compare(arch: str, pick, prepare=None, seeds: int = 1) -> tuple[int, int, list[str]]:
  """Run each random encoding `pick(op)` accepts that the tier compiles on both tiers (its block: the op, then
  s_endpgm unless it branches) from the same random state (`prepare(eng, op, rng)` may adjust it): (encodings run on
  both, of them without a fault, mismatches)."""
  both, ok, mismatches = 0, 0, []
  no_acc = lambda op: not any(isinstance(x, Src) and x.file == "a" for x in [*op.ins.values(), *op.outs.values()])
  for s, prog, op, blk, L, seed in compiled_encodings(arch, seeds, lambda op: pick(op) and no_acc(op)):
    (ka, a), (kb, b) = both_tiers(prog, blk, L, zlib.crc32(s.data) + seed, prepare)
    if ka == "error":
      continue
    both += 1
    ok += ka == "ok"
    same = ka == kb and (all(np.array_equal(x, y) for x, y in zip(a, b)) if ka == "ok" else True)
    if not same:
      names = ("VGPR", "SGPR", "SCC", "PC", "memory", "LDS", "count", "lanes")
      what = ",".join(n for n, x, y in zip(names, a, b) if not np.array_equal(x, y)) if ka == kb == "ok" else \
          f"{ka}/{kb} {a if ka != 'ok' else ''} {b if kb != 'ok' else ''}"
      mismatches.append(f"{s.encoding} {'/'.join(s.opcodes)} {s.data.hex()}: {what}")
  assert not native.FAILED, native.FAILED[:3]
  return both, ok, mismatches


def _steered(op) -> bool:
  a = op.info.get("address")
  return op.atomic and a is not None and any(t.file == "v" for t in a.terms)


@pytest.mark.parametrize("arch", TARGETS)
def test_atomics_native_equal_interpreter(arch):
  both, ok, mismatches = _compare(arch, _steered, lambda eng, op, rng: _steer(eng, op, rng, eng.L))
  print(f"{arch}: {both} atomics on both tiers, {ok} without a fault")
  assert ok > 40, f"only {ok} of {both} atomics ran without a fault"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


@pytest.mark.parametrize("arch", TARGETS)
def test_dpp_native_equal_interpreter(arch):
  """DPP16 and DPP8 (src0 routed across lanes, row/bank write masks, bound_ctrl and fi) on random controls."""
  both, ok, mismatches = _compare(arch, lambda op: op.info.get("dpp") is not None, seeds=2)
  print(f"{arch}: {both} DPP encodings on both tiers")
  assert both > 100, f"only {both} DPP encodings ran on both tiers"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


@pytest.mark.parametrize("arch", TARGETS)
def test_output_modifiers_native_equal_interpreter(arch):
  """VOP3 clamp and omod on float results (IEEE specials, -0.0 and values around 0 and 1 in the register files)."""
  both, ok, mismatches = _compare(arch, lambda op: bool(op.info.get("clamp") or op.info.get("omod")), seeds=4)
  print(f"{arch}: {both} encodings with clamp/omod on both tiers")
  assert both > 25, f"only {both} clamp/omod encodings ran on both tiers"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


@pytest.mark.parametrize("arch", TARGETS)
def test_packed_operands_native_equal_interpreter(arch):
  """VOP3P operands (op_sel/op_sel_hi picking each half, neg_lo/neg_hi) of packed math the tier compiles."""
  pk = lambda op: any(isinstance(x, Src) and x.pk for x in op.ins.values())
  both, ok, mismatches = _compare(arch, pk, seeds=2)
  print(f"{arch}: {both} packed-operand encodings on both tiers")
  assert both > 20, f"only {both} packed-operand encodings ran on both tiers"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


def _one_block_equal(arch: str, fam: str, text: str, L: int) -> None:
  """`text` then s_endpgm is one native block, and it leaves the interpreter's state on random register files
  (_engine's seeds 0-2, one wave with every lane on) and with a wave whose EXEC is 0 (seed 3)."""
  prog = Program(assemble(text, arch) + ENDPGM[fam], 0x1000, arch, fam, L, for_arch(arch))
  blk = native.compile_block(prog, 0x1000, L)
  assert blk is not None and blk.n == text.count("\n") + 2, "not one native block"
  for seed in range(4):
    results = []
    for mode in ("interp", "native"):
      eng, buf = _engine(prog, L, seed)
      if seed == 3:
        eng.S[1, 126:128] = 0
        eng._exec = None
      if mode == "interp":
        for o in blk.ops:
          core.step(eng, o, slice(None))
      else:
        native.Native(eng).run(blk, slice(None))
      results.append(_state(eng, buf))
    a, b = results
    names = ("VGPR", "SGPR", "SCC", "PC", "memory", "LDS", "count", "lanes")
    assert all(np.array_equal(x, y) for x, y in zip(a, b)), \
        [n for n, x, y in zip(names, a, b) if not np.array_equal(x, y)]
  assert not native.FAILED, native.FAILED[:3]


LANE_ACCESS = ["v_readlane_b32 s5, v3, s2", "v_readlane_b32 s7, v200, 13", "v_readlane_b32 s9, v4, m0",
               "v_writelane_b32 v3, s4, 17", "v_writelane_b32 v9, -7, s6",
               "v_writelane_b32 v3, 5, s2\nv_readlane_b32 s6, v3, s2\nv_add_u32 v5, v3, v3\nv_readlane_b32 s8, v5, s10"]


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("text", LANE_ACCESS)
def test_lane_access_native_equal_interpreter(arch, text):
  """Wave-level bodies that address a VGPR by lane number (v_readlane, v_writelane; our assembler's encodings), lane
  selects from random SGPRs, random EXEC, and a wave whose EXEC is 0 (the body does not run)."""
  fam = target_info(arch).family
  L = 32 if arch.startswith("gfx1") else 64
  if fam == "rdna3" or fam == "rdna4":
    text = text.replace("v_add_u32", "v_add_nc_u32")
  _one_block_equal(arch, fam, text, L)


CROSS_LANE = [("v_readfirstlane_b32 s5, v3", "rdna cdna"),
              ("v_readfirstlane_b32 s5, v3\nv_add_u32 v3, s5, v3", "rdna cdna"),
              ("ds_bpermute_b32 v1, v2, v3", "rdna cdna"), ("ds_bpermute_b32 v3, v2, v3 offset:12", "rdna cdna"),
              ("ds_permute_b32 v1, v2, v3 offset:4", "rdna cdna"),
              ("ds_swizzle_b32 v1, v2 offset:swizzle(SWAP,16)", "rdna cdna"),
              ("ds_swizzle_b32 v2, v2 offset:swizzle(QUAD_PERM,3,2,1,0)", "rdna cdna"),
              ("ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,\"01pip\")", "rdna cdna"),
              ("ds_swizzle_b32 v1, v2 offset:swizzle(BROADCAST,8,5)", "rdna cdna"),
              ("v_permlane16_b32 v1, v2, s3, s4", "rdna"), ("v_permlanex16_b32 v2, v2, s3, s4", "rdna"),
              ("v_permlane64_b32 v1, v2", "rdna")]


@pytest.mark.parametrize("arch, text, L", [(a, t, L) for a in TARGETS for t, fams in CROSS_LANE for L in (32, 64)
                                            if target_info(a).family.rstrip("34") in fams.split()
                                            and not (L == 32 and target_info(a).family == "cdna")])
def test_cross_lane_native_equal_interpreter(arch, text, L):
  """Wave-level bodies that move values between lanes (readfirstlane, permlane16/x16/64, ds_bpermute/permute) and
  ds_swizzle's modes: one native block, the interpreter's registers on random register files, addresses and EXEC
  (one wave with every lane on), and a wave whose EXEC is 0. A lane the body computes is checked where it is used
  (readfirstlane's s_ff1, a permute's address); ds_swizzle reads its source lanes off the interpreter's own table.
  (Each body on the families and wave sizes that have it: CDNA has no permlane and no wave32.)"""
  fam = target_info(arch).family
  if fam != "cdna":
    text = text.replace("v_add_u32", "v_add_nc_u32")
  _one_block_equal(arch, fam, text, L)


@pytest.mark.parametrize("arch", [t for t in TARGETS if target_info(t).family == "cdna"])
def test_sdwa_native_equal_interpreter(arch):
  """SDWA (CDNA): byte/word source selects with sign or zero extension, destination selects with pad, sign or
  preserve."""
  both, ok, mismatches = _compare(arch, lambda op: op.info.get("sdwa") is not None)
  print(f"{arch}: {both} SDWA encodings on both tiers")
  assert both > 100, f"only {both} SDWA encodings ran on both tiers"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


def _scheduled(prog, L: int, seed: int, m0, mode: str, monkeypatch) -> tuple:
  """core.run of `prog` from _engine's random state (seed) with M0 = m0 per wave, interpreted (GPUTWIN_JIT=0) or
  natively (force): ("ok", state, wave-instructions run natively) or (the Stop's kind, its text, that count)."""
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  eng, buf = _engine(prog, L, seed)
  eng.S[:, 124 if prog.family == "cdna" else 125] = m0
  try:
    core.run(eng)
  except core.Stop as e:
    return e.kind, str(e), eng.native_count
  return "ok", _state(eng, buf), eng.native_count


def _both_tiers_by_m0(prog, L: int, m0s, monkeypatch) -> int:
  """`prog` run by the scheduler on both tiers from _engine's random state with M0 = each of `m0s` (per wave): the
  same registers, memory and counts, every instruction native, or the same error (the interpreter names the batch's
  register file, the native re-run one wave's); the number of runs that ended in the error."""
  stopped = 0
  for k, m0 in enumerate(m0s):
    a = _scheduled(prog, L, k, np.asarray(m0, np.uint32), "0", monkeypatch)
    b = _scheduled(prog, L, k, np.asarray(m0, np.uint32), "force", monkeypatch)
    assert a[0] == b[0], (m0, a[:2], b[:2])
    if a[0] == "ok":
      names = ("VGPR", "SGPR", "SCC", "PC", "memory", "LDS", "count", "lanes")
      assert all(np.array_equal(x, y) for x, y in zip(a[1], b[1])), \
          (m0, [n for n, x, y in zip(names, a[1], b[1]) if not np.array_equal(x, y)])
      assert b[2] == a[1][6] and a[2] == 0, "not run natively"
    else:
      assert a[1].split(": the register file")[0] == b[1].split(": the register file")[0], (m0, a[1], b[1])
      stopped += 1
  assert not native.FAILED, native.FAILED[:3]
  return stopped


MOVREL = [("s_movrels_b32 s5, s10", "rdna cdna"), ("s_movrels_b64 s[4:5], s[10:11]", "rdna cdna"),
          ("s_movreld_b32 s5, s10", "rdna cdna"), ("s_movreld_b64 s[4:5], s[10:11]", "rdna cdna"),
          ("s_movrelsd_2_b32 s5, s10", "rdna"),
          ("s_movrels_b32 s5, s10\ns_and_b32 s6, s5, 63\ns_movreld_b32 s7, s6", "rdna cdna")]


@pytest.mark.parametrize("arch, text", [(a, t) for a in TARGETS for t, fams in MOVREL
                                        if target_info(a).family.rstrip("34") in fams.split()])
def test_movrel_scalar_native_equal_interpreter(arch, text, monkeypatch):
  """s_movrels / s_movreld / s_movrelsd_2 (SGPR[base + M0], the SGPR number the body computes) as one native block:
  the interpreter's registers for M0 that lands in the file (VCC, NULL, M0, EXEC among its rows; a sum that wraps
  at 32 bits), and the interpreter's error, the native run stopping before it writes anything, for one whose rows
  (a 64-bit access: either row) are past the scalar file, in either wave."""
  fam = target_info(arch).family
  L = 32 if fam != "cdna" else 64
  prog = Program(assemble(text, arch) + ENDPGM[fam], 0x1000, arch, fam, L, for_arch(arch))
  blk = native.compile_block(prog, 0x1000, L)
  assert blk is not None and blk.n == text.count("\n") + 2, "not one native block"
  rng = np.random.default_rng(zlib.crc32(text.encode()))
  m0s = [rng.integers(0, 96, 2), [96, 110], [100, 115], [116, 118], [114, 120], [0, 245], [0xfffffff8, 3],
         [0, 246], [0, 1000], [0x7fffffff, 0], [300, 2]]  # (base s10: 10 + M0; the last four are past the file)
  assert 3 <= _both_tiers_by_m0(prog, L, m0s, monkeypatch) < len(m0s) - 3


VMOVREL = ["v_movrels_b32 v3, v5", "v_movreld_b32 v5, v2", "v_movrelsd_b32 v3, v5", "v_movrelsd_2_b32 v3, v5",
           "v_swaprel_b32 v3, v5", "v_movreld_b32 v5, v2\nv_add_nc_u32 v6, v7, v7\nv_movrels_b32 v3, v5",
           "v_movrels_b32 v3, v5 dpp8:[7,6,5,4,3,2,1,0]"]


@pytest.mark.parametrize("arch, text", [(a, t) for a in TARGETS for t in VMOVREL if target_info(a).family != "cdna"])
def test_movrel_vector_native_equal_interpreter(arch, text, monkeypatch):
  """v_movrels / v_movreld / v_movrelsd(_2) / v_swaprel (VGPR[lane][base + M0]: this lane's register by a number the
  body computes; CDNA has none) as one native block: the interpreter's registers for M0 that lands in the file
  (random EXEC, one wave with every lane on; a sum that wraps at 32 bits), and the interpreter's error, the native
  run stopping before it writes anything, for one past the file's 256 rows, in either wave."""
  fam = target_info(arch).family
  prog = Program(assemble(text, arch) + ENDPGM[fam], 0x1000, arch, fam, 32, for_arch(arch))
  blk = native.compile_block(prog, 0x1000, 32)
  assert blk is not None and blk.n == text.count("\n") + 2, "not one native block"
  rng = np.random.default_rng(zlib.crc32(text.encode()))
  m0s = [rng.integers(0, 240, 2), [0, 250], [245, 3], [0xfffffffc, 7], [0x00f000f0, 0x00070003],
         [0, 251], [300, 2], [0x7fffffff, 0], [0, 0xfffffffa]]  # (base v5: 5 + M0; movrelsd_2: two fields of M0)
  assert 1 <= _both_tiers_by_m0(prog, 32, m0s, monkeypatch) <= len(m0s) - 3  # (runs that write, runs that stop)


def _vgpr_mask(op) -> bool:
  """Does `op` read a lane mask from a VGPR and write it back to an SGPR (V_ADD_CO_CI_U32 v, s, v, v, v)?"""
  return any(isinstance(s, Src) and s.file == "v" and isinstance(op.outs.get(nm), Src) and op.outs[nm].file == "s"
             for nm, s in op.ins.items() if op.sem is not None and nm in op.sem.outputs)


@pytest.mark.parametrize("arch", [t for t in TARGETS if target_info(t).family != "cdna"])
def test_vgpr_carry_in_native_equal_interpreter(arch):
  """VOP3 carry-in/out ops whose carry-in is a VGPR: each lane adds the bit of its own copy, and the SGPR carry-out
  gets the first active lane's copy with its bit replaced (lane 0's input when no lane is active: the second wave's
  EXEC is 0 for half of the seeds; DPP row/bank masks leave lanes out too)."""
  def no_exec(eng, op, rng):
    if rng.integers(0, 2):
      eng.S[1, 126:128] = 0
      eng._exec = None
  both, ok, mismatches = _compare(arch, _vgpr_mask, no_exec, seeds=4)
  print(f"{arch}: {both} encodings with a VGPR carry-in on both tiers")
  assert both >= 8, f"only {both} VGPR carry-in encodings ran on both tiers"
  assert not mismatches, f"{len(mismatches)} of {both} differ:\n" + "\n".join(mismatches[:40])


MEMTIME = """
  s_load_dwordx2 s[2:3], s[0:1], 0x0
  s_memtime s[4:5]
  v_lshlrev_b32 v1, 3, v0
  s_memrealtime s[6:7]
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v2, s4
  v_mov_b32 v3, s7
  v_add_u32 v2, v2, s6
  global_store_dwordx2 v1, v[2:3], s[2:3]"""


@pytest.mark.parametrize("checks", [False, True])
def test_time_sources_native_equal_interpreter(monkeypatch, checks):
  """s_memtime / s_memrealtime (gfx942): the wave's own instruction count when they run, so s[4:5] = 1 and s[6:7] =
  3, the kernel's 0-based places, for every wave (v2 = 1 + 3, v3 = the high dword 0), on both tiers with the same
  counts. The native tier runs every instruction, checkers on or off (with them on, their time returns as a load's
  data on lgkmcnt: the block summary makes s[4:7] pending until the s_waitcnt)."""
  from gputwin.emu import launch
  from tests.emu.test_asm import kernel
  co = kernel("gfx942", MEMTIME, wave32=False)
  runs = []
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    out = np.zeros((128, 2), np.uint32)
    runs.append(launch(co, "k", grid=1, block=128, args=[out], checks=checks))
    assert (out[:, 0] == 4).all() and (out[:, 1] == 0).all(), out[:3]
  a, b = runs
  assert (a.instructions, a.lane_instructions) == (b.instructions, b.lane_instructions)
  assert b.native_instructions == b.instructions


HWREGS = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 5
  s_getreg_b32 s4, hwreg(HW_REG_MODE, 0, 4)
  s_getreg_b32 s5, hwreg(HW_REG_SHADER_CYCLES, 0, 20)
  s_mov_b32 s6, 3
  s_setreg_b32 hwreg(HW_REG_MODE, 4, 2), s6
  s_getreg_b32 s7, hwreg(HW_REG_MODE, 0, 6)
  v_lshlrev_b32 v1, 4, v0
  v_mov_b32 v2, s4
  v_mov_b32 v3, s5
  v_mov_b32 v4, s7
  v_mov_b32 v5, 0
  s_waitcnt lgkmcnt(0)
  global_store_b128 v1, v[2:5], s[2:3]"""


@pytest.mark.parametrize("checks", [False, True])
def test_hardware_registers_native_equal_interpreter(monkeypatch, checks):
  """s_setreg / s_setreg_imm32 / s_getreg (gfx1100) on the MODE register's bits, and SHADER_CYCLES, which reads the
  wave's instruction count (here its 0-based place, 3): the same values on both tiers, every instruction native,
  with the checkers on or off. MODE bits 0..3 = 5, then bits 4..5 = 3 (hwreg(id, offset, size): bits [offset +
  size - 1 : offset], as LLVM's AMDGPU docs name them and clang-22 uses them: `hwreg(HW_REG_MODE, 4, 2), 3` enables
  f32 denormals around a division on gfx942): 0x35 (before the errata entry for the vendor text's unshifted mask:
  0x04)."""
  from gputwin.emu import launch
  from tests.emu.test_asm import kernel
  co = kernel("gfx1100", HWREGS)
  runs = []
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    out = np.zeros((64, 4), np.uint32)
    runs.append(launch(co, "k", grid=1, block=64, args=[out], checks=checks))
    assert (out[:, 0] == 5).all() and (out[:, 1] == 3).all() and (out[:, 2] == 0x35).all(), out[:2]
  a, b = runs
  assert (a.instructions, a.lane_instructions) == (b.instructions, b.lane_instructions)
  assert b.native_instructions == b.instructions
