"""The native tier on ir3 (gputwin/emu/README.md, "Native tier"): predicated regions (predt/predf/prede), guarded
IBO, UBO and shared-memory accesses and IBO faults run natively, with the interpreter's results, instruction counts and
error text. Two oracles: the interpreter (GPUTWIN_JIT=0) on the same launch, and numpy through the Mesa kernels'
references (test_ir3_mesa_run.py); the programs are Mesa's compiler output and template-built random programs."""
import importlib.util
import os
import random
from pathlib import Path

import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.emu.native import tier
from gputwin.errors import GputwinError
from gputwin.isa import ir3
from gputwin.isa.ir3 import listing

_spec = importlib.util.spec_from_file_location("ir3_mesa_run", Path(__file__).with_name("test_ir3_mesa_run.py"))
MESA = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MESA)


def _launch(jit: str, run):
  """run() under GPUTWIN_JIT=jit: ("ok", its stats' counts) or ("error", type and message)."""
  old = os.environ.get("GPUTWIN_JIT")
  os.environ["GPUTWIN_JIT"] = jit
  try:
    st = run()
    return "ok", (st.instructions, st.lane_instructions), st.native_instructions
  except GputwinError as e:
    return "error", f"{type(e).__name__}: {e}", 0
  finally:
    if old is None:
      os.environ.pop("GPUTWIN_JIT", None)
    else:
      os.environ["GPUTWIN_JIT"] = old


@pytest.mark.skipif(not MESA.KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")
@pytest.mark.parametrize("adreno", ["a630", "a730"])
@pytest.mark.parametrize("name", sorted(MESA.CASES))
def test_mesa_kernel_tiers_agree(name, adreno):
  """Each Mesa kernel on both tiers: the same output bits (and numpy's reference), the same instruction counts; a
  wave64 saxpy (predt, guarded ldib/stib, prede) runs wholly natively, a730's preamble too (shps, getone, mova1,
  resinfo, ldc.k, shpe)."""
  outs = []
  for jit in ("0", "force"):
    grid, args, check = MESA.CASES[name]()
    got = _launch(jit, lambda: launch(MESA.KERNELS / adreno / f"{name}.bin", "main", grid=(grid,), args=args,
                                      arch=adreno, checks=False))
    assert got[0] == "ok", got
    check()
    outs.append((got[1], [a.tobytes() for a in args.values()], got[2]))
  assert outs[0][:2] == outs[1][:2]
  assert outs[0][2] == 0
  if name == "saxpy":
    assert outs[1][2] == outs[1][0][0], outs[1][::2]


# ------------------------------------------------------------------------------------------------ random programs
GID = "shl.b r0.w, r48.x, 6\nadd.u r0.w, r0.w, r0.x\n"  # global id (local size 64)


def _snippet(r: random.Random) -> str:
  """One piece of a random program over r0.w (the global id), r1.x..r3.w (data), p0.x, shared memory, IBOs 0..2
  (2 unbound) and UBO 1: predicate set-ups and regions, guarded or plain IBO/UBO/shared accesses in and out of
  bounds, ALU."""
  d = lambda: f"r{r.randint(1, 3)}.{'xyzw'[r.randint(0, 3)]}"
  coord = r.choice(["r0.w"] * 8 + ["r0.x", "r1.x", "r2.y", "r2.w"])
  k = r.random()
  if k < 0.15:
    cond, a = r.choice(['lt', 'gt', 'eq', 'ne', 'le']), r.choice(['r0.w', 'r0.x', d()])
    return f"cmps.{r.choice('us')}.{cond} p0.x, {a}, {r.choice([0, 1, 5, 37, 63, 64, 100, 130])}\n"
  if k < 0.3:
    return r.choice(["predt\n", "predf\n", "prede\n", "predt\n"])
  if k < 0.45:
    n = r.choice([1, 1, 2, 4])
    base = d()[:-1] + "x" if n == 4 else d()
    return f"ldib.b.untyped.1d.u32.{n}.imm.base0 {base}, {coord}, {r.choice([0] * 6 + [1] * 6 + [2])}\n"
  if k < 0.6:  # (two dwords at 2 * coord: lanes storing to the same dword race, which the tiers order apart)
    ibo = r.choice([1] * 6 + [0] * 6 + [2])
    if r.random() < 0.7:
      return f"stib.b.untyped.1d.u32.1.imm.base0 {d()}, {coord}, {ibo}\n"
    return f"shl.b r3.z, {coord}, 1\nstib.b.untyped.1d.u32.2.imm.base0 {d()}, r3.z, {ibo}\n"
  if k < 0.67:
    return f"ldc.offset{r.randint(0, 3)}.{r.choice([1, 2])}.imm {d()[:-1]}x, {r.choice(['0', '5', coord])}, 1\n"
  if k < 0.8:
    off = r.choice(["", "+4", "+252", "", "+4", "+256"])
    sh = f"shl.b r3.w, {coord}, 2\n"
    if r.random() < 0.5:
      return sh + f"stl.u32 l[r3.w{off}], {d()}, 1\n"
    return sh + f"ldl.u32 {d()}, l[r3.w{off}], 1\n"
  op = r.choice(["add.u", "mul.u24", "xor.b", "max.s", "add.f", "shr.b"])
  return f"{op} {d()}, {d()}, {r.choice([d(), str(r.randint(0, 300))])}\n"


def _program(gpu: str, r: random.Random) -> bytes:
  body = GID + f"mov.u32u32 r1.x, r0.w\nmov.u32u32 r2.y, r0.x\nadd.u r2.w, r0.x, {r.choice([-8, 0, 0, 3, 30])}\n"
  body += "".join(_snippet(r) for _ in range(r.randint(3, 14)))
  return ir3.assemble(body + r.choice(["", "prede\n"]) + "end\n", gpu)


def _outcome(code: bytes, gpu: str, jit: str, checks: bool) -> tuple:
  bufs = {0: np.arange(68, dtype=np.uint32) * 3, 1: np.arange(66, dtype=np.uint32) ^ 0x55,
          3: np.zeros(64, np.uint32)}
  sh = listing.Shader.explicit(gpu, code, shared_size=512)
  got = _launch(jit, lambda: launch(code, "main", grid=(1,), args=dict(bufs), arch=gpu, shader=sh, checks=checks,
                                     max_instructions=4000))
  # (after a fault the buffers may differ: the native tier's earlier lanes of the faulting access wrote)
  return got[:2] + tuple(b.tobytes().hex() for b in bufs.values() if got[0] == "ok"), got[2]


@pytest.mark.parametrize("chip", ["a630", "a730"])
def test_random_predicated_programs_agree(chip):
  """Template-built random programs: the interpreter and the native tier (every block compiled at first sight) end
  the same way (the same message, fiber and PC when one faults: an IBO index past its buffer, an unbound IBO, LDS
  past the allocation), with the same buffers and instruction counts; most of them run natively in part. One wave
  (the native tier runs a block wave by wave: two waves faulting at different instructions of one block may stop
  at another one's fault, gputwin/emu/README.md "Native tier")."""
  r = random.Random(f"ir3-native/{chip}")
  bad, native, faults = [], 0, 0
  for _ in range(40):
    code = _program(chip, r)
    a, _ = _outcome(code, chip, "0", False)
    b, nat = _outcome(code, chip, "force", False)
    if a != b:
      bad.append((code.hex(), a[:2], b[:2]))
    native += nat > 0 and a[0] == "ok"
    faults += a[0] == "error"
  assert not bad, bad[:3]
  assert not tier.FAILED, tier.FAILED[:3]
  assert native > 10 and faults > 5, (native, faults)


@pytest.mark.skipif(not MESA.KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")
@pytest.mark.parametrize("adreno", ["a630", "a730"])
def test_saxpy_over_several_batches(adreno):
  """Mesa's saxpy over 4100 workgroups (two batches of waves: the second restarts the engine, whose const file the
  launch keeps, and a730's preamble rewrites with ldc.k): both tiers equal numpy's a*x + y."""
  n = 4100 * 64
  x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
  y = np.random.default_rng(6).standard_normal(n).astype(np.float32)
  ubo = np.zeros(16, np.uint32)
  ubo[0], ubo[1] = np.float32(-0.75).view(np.uint32), n - 3
  ref = y.copy()
  ref[:n - 3] = (np.float32(-0.75) * x[:n - 3]).astype(np.float32) + y[:n - 3]
  for jit in ("0", "force"):
    out = y.copy()
    got = _launch(jit, lambda: launch(MESA.KERNELS / adreno / "saxpy.bin", "main", grid=(n // 64,),
                                      args={0: x, 1: out, 4: ubo}, arch=adreno, checks=False))
    assert got[0] == "ok", got
    np.testing.assert_array_equal(out, ref)


# ------------------------------------------------------------------------------------------------ a7xx's preamble
# Mesa's a7xx preamble (shps, getone, mova1 a1.x, resinfo descriptor prefetches, ldc.k c[a1.x], shpe) runs natively:
# resinfo of an immediate IBO index reads the size the launch binds in the scalar file, and ldc.k whose destination
# c[a1.x] the code before it fixes is a UBO load into const dwords. Their other forms (a register index, a1.x from a
# register, sources per fiber) stay the interpreter's events, which are the oracle here: each case runs in both forms.
UBO = np.arange(16, dtype=np.uint32) * 0x01010101 + 7  # 4 vec4
IBOS = {0: np.arange(68, dtype=np.uint32), 1: np.arange(41, dtype=np.uint16), 20: np.zeros(9, np.uint32)}


def _preamble_run(code: bytes, gpu: str, jit: str, checks: bool, ubo: int = 4) -> tuple:
  bufs = {**{k: v.copy() for k, v in IBOS.items()}, ubo: UBO.copy(), 3: np.zeros(2 * 64 * 8, np.uint32)}
  sh = listing.Shader.explicit(gpu, code)
  got = _launch(jit, lambda: launch(code, "main", grid=(2,), args=bufs, arch=gpu, shader=sh, checks=checks))
  return got[:2] + ((bufs[3].tobytes().hex(),) if got[0] == "ok" else ()), got[2]


def _ldck(a1: int, off, ubo: int, n: int, known: bool) -> str:
  """mova1 a1.x (an immediate: known; else from a register: the event), ldc.k, then the first and last dword loaded
  (and c0.x, which no case writes) stored per fiber to IBO 3."""
  c = lambda k: f"c{k // 4}.{'xyzw'[k % 4]}"
  last = min(a1 + 4 * n - 1, 2047)
  return (GID + f"mov.u32u32 r0.z, {a1}\nmov.u32u32 r2.x, 1\n" +
          (f"mova1 a1.x, {a1}\n" if known else "mova1 a1.x, hr1.x\n") +
          f"ldc.{n}.k.imm.base0 c[a1.x], {off}, {ubo}\n" +
          f"mov.u32u32 r1.x, {c(a1)}\nmov.u32u32 r1.y, {c(last)}\nmov.u32u32 r1.z, c0.x\nmov.u32u32 r1.w, r0.w\n"
          "shl.b r3.y, r0.w, 3\nstib.b.untyped.1d.u32.4.imm.base0 r1.x, r3.y, 3\nend\n")


def _resinfo(known: bool) -> str:
  """resinfo of IBOs 0 (u32), 1 (as u16, and u8), 2 (unbound), 20 (past the scalar file's slots), per fiber 0 or 1,
  and inside a predicated region; stored per fiber to IBO 3. `known`: immediate indices, else the same indices from
  registers (the event)."""
  idx = lambda i, r: f"{i}" if known else r
  ri = lambda t, d, i, r: f"resinfo.b.untyped.1d.{t}.1.{'imm' if known else 'nonuniform'}.base0 {d}, {idx(i, r)}\n"
  return (GID + "mov.u32u32 r4.x, 0\nmov.u32u32 r4.y, 1\nmov.u32u32 r4.z, 2\nmov.u32u32 r4.w, 20\n"
          "mov.u32u32 r5.x, 0\n" +
          ri("u32", "r1.x", 0, "r4.x") + ri("u16", "r1.y", 1, "r4.y") + ri("u8", "r1.z", 1, "r4.y") +
          ri("u32", "r1.w", 2, "r4.z") + ri("u32", "r2.x", 20, "r4.w") +
          "and.b r4.x, r0.x, 1\nresinfo.b.untyped.1d.u32.1.nonuniform.base0 r2.y, r4.x\n"
          "mov.u32u32 r2.z, 77\ncmps.u.lt p0.x, r0.x, 40\npredt\n" + ri("u16", "r2.z", 0, "r5.x") + "prede\n"
          "mov.u32u32 r2.w, r0.w\n(sy)shl.b r3.y, r0.w, 3\nstib.b.untyped.1d.u32.4.imm.base0 r1.x, r3.y, 3\n"
          "add.u r3.y, r3.y, 4\nstib.b.untyped.1d.u32.4.imm.base0 r2.x, r3.y, 3\nend\n")


LDCK = {"in bounds": (8, 1, 4, 2), "UBO past its end": (8, 3, 4, 2), "unbound UBO": (0, 0, 7, 1),
        "all of it": (0, 0, 4, 4), "past c15 (event)": (60, 0, 4, 2), "past the const file": (2040, 0, 4, 4)}


@pytest.mark.parametrize("chip", ["a630", "a730"])
@pytest.mark.parametrize("checks", [False, True])
@pytest.mark.parametrize("case", sorted(LDCK))
def test_ldck_natively_as_the_event(case, checks, chip):
  """ldc.k with a known c[a1.x]: the UBO's bytes (numpy's view of it) in the const file, the same bits, counts and
  fault text on both tiers and as the LDCK event gives them (a1.x from a register); in bounds, wholly native."""
  a1, off, ubo, n = LDCK[case]
  known, event = (ir3.assemble(_ldck(a1, off, ubo, n, k), chip) for k in (True, False))
  ref = _preamble_run(event, chip, "0", checks)
  nat = {}
  for code, jit in ((known, "0"), (known, "force"), (event, "force")):
    got, nat[code, jit] = _preamble_run(code, chip, jit, checks)
    assert got == ref[0], (jit, got[:2], ref[0][:2])
  if ref[0][0] == "error":
    assert {"UBO past its end": "UBO 4 byte offset 48 is past its 64 bytes", "unbound UBO": "UBO 7 is not bound",
            "past the const file": "const dwords [2040, 2056) are outside the const file"}[case] in ref[0][1], ref
    return
  out = np.frombuffer(bytes.fromhex(ref[0][2]), np.uint32).reshape(-1, 8)[:, :4]
  words = np.zeros(2048, np.uint32)
  words[a1:a1 + 4 * n] = UBO[4 * off:4 * off + 4 * n]
  np.testing.assert_array_equal(out[:, 0], words[a1])
  np.testing.assert_array_equal(out[:, 1], words[a1 + 4 * n - 1])
  np.testing.assert_array_equal(out[:, 3], np.arange(128))
  if not checks and a1 + 4 * n <= 64:
    assert nat[known, "force"] == ref[0][1][0], (nat, ref[0][1])  # (every wave-instruction native)
  assert not tier.FAILED, tier.FAILED[:3]


@pytest.mark.parametrize("chip", ["a630", "a730"])
@pytest.mark.parametrize("checks", [False, True])
def test_resinfo_natively_as_the_event(checks, chip):
  """resinfo of an immediate index: each IBO's size in elements (numpy's nbytes // itemsize; 0 unbound), the same
  bits and counts on both tiers and as the event gives them (indices from registers); checkers off, all native."""
  known, event = (ir3.assemble(_resinfo(k), chip) for k in (True, False))
  ref = _preamble_run(event, chip, "0", checks)
  assert ref[0][0] == "ok", ref
  nat = {}
  for code, jit in ((known, "0"), (known, "force"), (event, "force")):
    got, nat[code, jit] = _preamble_run(code, chip, jit, checks)
    assert got == ref[0], (jit, got[:2], ref[0][:2])
  out = np.frombuffer(bytes.fromhex(ref[0][2]), np.uint32).reshape(-1, 8)
  b = {k: v.nbytes for k, v in IBOS.items()}
  lid = np.arange(128) % 64
  want = np.stack([np.full(128, b[0] // 4), np.full(128, b[1] // 2), np.full(128, b[1]), np.zeros(128),
                   np.full(128, b[20] // 4), np.where(lid & 1, b[1] // 4, b[0] // 4),
                   np.where(lid < 40, b[0] // 2, 77), np.arange(128)], axis=1)
  np.testing.assert_array_equal(out, want)
  if not checks:  # (all but the register-indexed resinfo and IBO 20's, past the slots: two per wave, two waves)
    assert nat[known, "force"] == ref[0][1][0] - 4, (nat, ref[0][1])
  assert not tier.FAILED, tier.FAILED[:3]


def _prologue(ubo: int) -> tuple[str, int, int]:
  """A prologue as Mesa's a7xx code opens (shps, getone, mova1, ldc.k of UBO `ubo`'s vec4 1..2 into c2.x..c3.w, a
  value computed from them stored with stc to c1.x, shpe), then a main shader storing c2.x, c3.w, c1.x and the global
  id per fiber to IBO 3; with the instruction counts of the prologue and the main shader."""
  pre = ("shps #main\ngetone #main\nmova1 a1.x, 8\nldc.2.k.imm.base0 c[a1.x], 1, " + str(ubo) + "\n"
         "(sy)add.u r0.y, c2.y, 5\nstc.u32 c[4], r0.y, 1\n(sy)(ss)shpe\n")
  main = (GID + "mov.u32u32 r1.x, c2.x\nmov.u32u32 r1.y, c3.w\nmov.u32u32 r1.z, c1.x\nmov.u32u32 r1.w, r0.w\n"
          "shl.b r3.y, r0.w, 2\nstib.b.untyped.1d.u32.4.imm.base0 r1.x, r3.y, 3\nend\n")
  return pre + "main:\n" + main, pre.count("\n"), main.count("\n")


@pytest.mark.parametrize("chip", ["a630", "a730"])
@pytest.mark.parametrize("checks", [False, True])
def test_prologue_runs_once_per_dispatch(checks, chip):
  """shps..shpe runs once for the dispatch (stc's doc: the prologue stores uniform values to the const file; the first
  wave runs it, the others start at shps's target): every fiber of every workgroup reads the const words it loaded
  (numpy's view of the UBO) and computed, on both tiers, and the launch counts the prologue's instructions once (its
  elected fiber runs all of them, the others shps and getone; all of them the `end` standing for the main shader).
  A fault there names workgroup 0, wave 0."""
  text, npre, nmain = _prologue(4)
  code = ir3.assemble(text, chip)
  waves = 3
  for jit in ("0", "force"):
    out = np.zeros(4 * 64 * waves, np.uint32)
    got = _launch(jit, lambda: launch(code, "main", grid=(waves,), args={4: UBO.copy(), 3: out},
                                      arch=chip, shader=listing.Shader.explicit(chip, code), checks=checks))
    assert got[0] == "ok", got
    assert got[1][0] == npre + 1 + waves * nmain, (jit, got[1])  # (+1: the end where the prologue hands off)
    want = np.stack([np.full(64 * waves, UBO[4]), np.full(64 * waves, UBO[11]), np.full(64 * waves, UBO[5] + 5),
                     np.arange(64 * waves)], axis=1)
    np.testing.assert_array_equal(out.reshape(-1, 4), want)
    assert jit == "0" or checks or got[2] == got[1][0] - 1, got  # (checkers off: all native but stc, an event)
  bad = ir3.assemble(_prologue(7)[0], chip)
  got = _launch("0", lambda: launch(bad, "main", grid=(waves,), args={4: UBO.copy(), 3: np.zeros(4096, np.uint32)},
                                    arch=chip, shader=listing.Shader.explicit(chip, bad), checks=checks))
  assert got[0] == "error" and "UBO 7 is not bound" in got[1] and "workgroup (0,0,0), wave 0" in got[1], got


def _ranks(wave: int) -> str:
  """Fibers with (local id & 3) != 0 rank themselves with getone: each round the lowest waiting one falls through,
  takes the round number and leaves; the others count the round and retry. Stored per fiber to IBO 3 (-1: none)."""
  return (f"shl.b r0.w, r48.x, {wave.bit_length() - 1}\nadd.u r0.w, r0.w, r0.x\n"
          "mov.u32u32 r1.x, 0xffffffff\nmov.u32u32 r1.y, 0\nand.b r2.x, r0.x, 3\ncmps.u.eq p0.x, r2.x, 0\nbr p0.x, #out\n"
          "loop:\n(jp)getone #other\nmov.u32u32 r1.x, r1.y\njump #out\n"
          "other:\n(jp)add.u r1.y, r1.y, 1\njump #loop\n"
          "out:\n(jp)stib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 3\nend\n")


@pytest.mark.parametrize("chip,wave", [("a630", 64), ("a730", 64), ("a730", 128)])
@pytest.mark.parametrize("checks", [False, True])
def test_getone_ranks_fibers_on_both_tiers(checks, wave, chip):
  """getone in a loop (Mesa's elect): the lowest waiting fiber falls through each round, so each fiber's round is
  its rank among its wave's fibers that loop (numpy's cumulative count); the same bits and counts on both tiers,
  checkers off all of it native (getone too: a jump for all but the lowest fiber, binding.elect)."""
  code = ir3.assemble(_ranks(wave), chip)
  sh = listing.Shader.explicit(chip, code, local_size=(wave, 1, 1), wave_size=wave)
  outs = []
  for jit in ("0", "force"):
    out = np.zeros(3 * wave, np.uint32)
    got = _launch(jit, lambda: launch(code, "main", grid=(3,), args={3: out}, arch=chip, shader=sh, checks=checks))
    assert got[0] == "ok", got
    outs.append((got[1], out.tobytes()))
    nat = got[2]
  assert outs[0] == outs[1]
  assert checks or nat == outs[1][0][0], (nat, outs[1][0])
  lid = np.arange(3 * wave) % wave
  loops = (lid & 3) != 0
  rank = np.cumsum(loops.reshape(3, wave), axis=1).reshape(-1) - 1
  np.testing.assert_array_equal(np.frombuffer(outs[0][1], np.uint32), np.where(loops, rank, -1).astype(np.uint32))
  assert not tier.FAILED, tier.FAILED[:3]


# ------------------------------------------------------------------------------------------------ IBO probes
# The native tier probes a wave's IBO accesses by their 32-bit coordinates (codegen.buffer_probe): contiguous lanes
# run as vector loads; scattered ones, ones past the buffer's end and coordinates that wrap past 2**32 take the
# exact path, which faults where the interpreter does.
COORDS = {"contiguous": "mov.u32u32 r1.x, r0.x", "reversed": "xor.b r1.x, r0.x, 63",
          "past the end": "add.u r1.x, r0.x, 8", "wrapping": "add.u r1.x, r0.x, -10", "two apart": "shl.b r1.x, r0.x, 1"}


@pytest.mark.parametrize("chip", ["a630", "a730"])
@pytest.mark.parametrize("guard", [None, 37])
@pytest.mark.parametrize("coord", sorted(COORDS))
def test_ibo_probe_coordinates(coord, guard, chip):
  """out[lane] = x[coord(lane)] + 1000 for one wave64 (under p0.x = lane < 37 when guarded): both tiers give numpy's
  values, or the same fault (an IBO index past the 68 elements of x)."""
  pred = f"cmps.u.lt p0.x, r0.x, {guard}\n(rpt1)nop\npredt\n" if guard else ""
  src = (COORDS[coord] + "\n" + pred + "ldib.b.untyped.1d.u32.1.imm.base0 r1.y, r1.x, 0\n(sy)add.u r1.y, r1.y, 1000\n"
         "stib.b.untyped.1d.u32.1.imm.base0 r1.y, r0.x, 1\n" + "prede\n" * bool(guard) + "end\n")
  code = ir3.assemble(src, chip)
  lane = np.arange(64, dtype=np.uint64)
  idx = {"contiguous": lane, "reversed": lane ^ 63, "past the end": lane + 8, "wrapping": (lane - 10) % 2 ** 32,
         "two apart": lane * 2}[coord]
  on = lane < (guard or 64)
  x = np.arange(68, dtype=np.uint32) * 7 + 3
  got = []
  for jit in ("0", "force"):
    out = np.zeros(64, np.uint32)
    r = _launch(jit, lambda: launch(code, "main", grid=(1,), args={0: x, 1: out}, arch=chip,
                                    shader=listing.Shader.explicit(chip, code), checks=False))
    got.append((r[0], r[1], out.tobytes() if r[0] == "ok" else None))
    if jit == "force":
      assert r[2] > 0 or r[0] == "error"
  assert got[0] == got[1], got
  if (idx[on] < 68).all():
    assert got[0][0] == "ok"
    ref = np.where(on, x[np.minimum(idx, 67).astype(np.int64)] + 1000, 0).astype(np.uint32)
    assert got[0][2] == ref.tobytes()
  else:
    assert got[0][0] == "error" and "ldib" in got[0][1], got[0]
