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
  wave64 saxpy (predt, guarded ldib/stib, prede) runs wholly natively on a630 (a730's has a preamble of fiber events
  that stays interpreted: getone, resinfo, ldc.k)."""
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
    assert outs[1][2] == outs[1][0][0] if adreno == "a630" else outs[1][2] > 0, outs[1][::2]


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
