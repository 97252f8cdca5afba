"""The native tier on wave128 ir3 shaders (Mesa's `double_threadsize`; gputwin/emu/ir3/README.md, "Native tier"):
lane masks of 128 bits (EXEC in four scalar rows, guards, the lanes a block's last instruction took, probes' first
and last lanes) give the interpreter's bits, instruction counts and lane counts, with the checkers off and on. Two
oracles: the interpreter (GPUTWIN_JIT=0) on the same launch and numpy (a tree reduction summed in the kernel's order,
so bit-exact; a per-fiber loop computed in Python). Programs: Mesa's reduce_shared (local size 128, one wave128 per
workgroup) from ../shared/vendor/ir3/kernels and hand-written wave128 programs whose divergence, predicated shared
memory accesses and shared half-register writes reach lanes on both sides of lane 64."""
import os
from pathlib import Path

import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.emu.native import tier
from gputwin.errors import GputwinError
from gputwin.isa.ir3 import assemble, listing
from tests.emu.ir3.test_ir3_asm_kernels import LOOP

KERNELS = Path(__file__).resolve().parents[4] / "shared" / "vendor" / "ir3" / "kernels"
GPUS = ("a630", "a730")
M32 = 0xffffffff


def _launch(jit: str, run):
  """run() under GPUTWIN_JIT=jit (force: every block compiled in full at first sight; 1 with GPUTWIN_JIT_AFTER=1:
  lean first, in full once hot); its LaunchStats."""
  old = {k: os.environ.get(k) for k in ("GPUTWIN_JIT", "GPUTWIN_JIT_AFTER")}
  os.environ.update(GPUTWIN_JIT=jit, GPUTWIN_JIT_AFTER="1")
  try:
    return run()
  finally:
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v


def _tree_sum(v: np.ndarray) -> np.ndarray:
  """Per row of 128 f32: s[l] += s[l + stride] for l < stride, stride 64..1, in float32 (the kernels' order)."""
  s = v.reshape(-1, 128).copy()
  stride = 64
  while stride:
    s[:, :stride] = s[:, :stride] + s[:, stride:2 * stride]
    stride //= 2
  return s[:, 0]


def _both(case, checks: bool, jit: str = "force"):
  """The case on the interpreter and the native tier: [(stats, output bytes)] for each, each on fresh arguments."""
  out = []
  for mode in ("0", jit):
    args, run, check = case()
    st = _launch(mode, lambda: run(args, checks))
    check(args)
    out.append((st, [a.tobytes() for a in args.values()]))
  return out


def _counts(st):
  return st.instructions, int(st.lane_instructions), st.workgroups


# ------------------------------------------------------------------------------------------------ Mesa reduce_shared
def _mesa_reduce(arch: str, groups: int = 96):
  def case():
    x = np.random.default_rng(7).standard_normal(128 * groups).astype(np.float32)
    x[:5] = [0.0, -0.0, 1e30, -1e30, 3.5]  # (cancellation in the first workgroup)
    args = {0: x, 1: np.zeros(groups, np.float32)}
    run = lambda a, checks: launch(KERNELS / arch / "reduce_shared.bin", "main", grid=(groups,), args=a, arch=arch,
                                   checks=checks)
    return args, run, lambda a: np.testing.assert_array_equal(a[1], _tree_sum(a[0]))
  return case


@pytest.mark.skipif(not KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")
@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("checks", [False, True])
def test_mesa_reduce_wave128_native(arch, checks):
  """Mesa's reduce_shared (double_threadsize: one wave of 128 fibers per workgroup; predicated shared-memory tree
  steps, each after a barrier) equals numpy's tree sum bit for bit on both tiers, with the same wave- and
  lane-instruction counts. Checkers off, the native tier runs all of it (a730's prologue too, once per dispatch);
  checkers on, at least the unpredicated part."""
  n = len(tier.FAILED)
  (si, oi), (sn, on) = _both(_mesa_reduce(arch), checks)
  assert oi == on and _counts(si) == _counts(sn)
  assert si.native_instructions == 0 and len(tier.FAILED) == n
  if checks:
    assert sn.native_instructions > sn.instructions // 2, (sn.native_instructions, sn.instructions)
  else:
    assert sn.native_instructions == sn.instructions, (sn.native_instructions, sn.instructions)


# ------------------------------------------------------------------------------------------------ hand-written wave128
GID = "shl.b r0.w, r48.x, 7\nadd.u r0.w, r0.w, r0.x\n"  # r0.w = global id (local size 128)
LD = "ldib.b.untyped.1d.u32.{n}.imm.base0 {d}, {c}, {b}\n"
ST = "stib.b.untyped.1d.u32.{n}.imm.base0 {s}, {c}, {b}\n"
DIVERGENT = (
  GID + LD.format(n=1, d="r1.x", c="r0.w", b=0) + LOOP +  # (acc in r2.y, iterations in r2.x)
  "done:\n(jp)shl.b r3.w, r0.x, 2\n"
  # fibers 64..127 (the second word of every lane mask) put acc into shared memory at their local id, in a
  # predicated region; then fibers 0..63 read their mirror's value (127 - l) there, in one of their own
  "cmps.u.ge p0.x, r0.x, 64\npredt\nstl.u32 l[r3.w], r2.y, 1\nprede\n(ss)bar\n"
  "sub.u r4.x, 508, r3.w\nmov.u32u32 r4.y, 0\ncmps.u.lt p0.x, r0.x, 64\npredt\nldl.u32 r4.y, l[r4.x], 1\nprede\n"
  # both halves of shared register r48.y (hr48.z, hr48.w) written from per-fiber values: the first fiber's
  "and.b r5.x, r1.x, 1\n(ss)cov.u32u16 hr48.z, r5.x\ncmps.u.lt hr48.w, r0.x, 32\nmov.u32u32 r3.w, r48.y\n"
  "shl.b r0.w, r0.w, 2\nmov.u32u32 r3.x, r2.y\nmov.u32u32 r3.y, r2.x\nmov.u32u32 r3.z, r4.y\n" +
  ST.format(n=4, s="r3.x", c="r0.w", b=1) + "end\n")


def _divergent_ref(x: np.ndarray) -> np.ndarray:
  acc, its = [], []
  for v in x.tolist():
    a = v
    for k in range(v & 15):
      a = (3 * a + k) & M32 if a & 1 else (a >> 1) ^ k
    acc.append(a)
    its.append(v & 15)
  acc, its = np.array(acc, np.uint32), np.array(its, np.uint32)
  mirror = acc.reshape(-1, 128)[:, ::-1].reshape(-1)
  lane = np.tile(np.arange(128), len(x) // 128)
  # r48.y: its low half x & 1 of the workgroup's first fiber, its high half (0 < 32) = 1
  first = np.repeat(x.reshape(-1, 128)[:, 0] & 1 | 1 << 16, 128).astype(np.uint32)
  return np.stack([acc, its, np.where(lane < 64, mirror, 0), first], axis=1).astype(np.uint32)


def _divergent(groups: int = 6, arch: str = "a630"):
  def case():
    x = np.random.default_rng(9).integers(0, 1 << 32, 128 * groups, dtype=np.uint64).astype(np.uint32)
    x[128:256] |= 15  # (a workgroup whose fibers all loop 15 times: full waves after divergence)
    args = {0: x, 1: np.zeros((128 * groups, 4), np.uint32)}
    code = assemble(DIVERGENT, arch)
    sh = listing.Shader.explicit(arch, code, local_size=(128, 1, 1), wave_size=128, shared_size=512)
    run = lambda a, checks: launch(code, "main", grid=(groups,), args=a, arch=arch, shader=sh, checks=checks)
    return args, run, lambda a: np.testing.assert_array_equal(a[1], _divergent_ref(a[0]))
  return case


@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("checks", [False, True])
@pytest.mark.parametrize("jit", ["force", "1"])
def test_divergent_wave128_native(arch, checks, jit):
  """A hand-written wave128 program (per-fiber loop trip counts with an if/else, (jp) joins; predicated shared
  memory stores from fibers 64..127 and loads into fibers 0..63; shared half registers) gives numpy's values and the
  interpreter's bits and counts on the native tier, compiled in full at first sight (force) or lean first (1); with
  the checkers off all of it runs natively."""
  n = len(tier.FAILED)
  (si, oi), (sn, on) = _both(_divergent(arch=arch), checks, jit)
  assert oi == on and _counts(si) == _counts(sn)
  assert len(tier.FAILED) == n
  if checks:  # (the predicated shared-memory accesses stay interpreted under `uninit`: checks._simt_ok)
    assert sn.native_instructions > sn.instructions * 9 // 10, (sn.native_instructions, sn.instructions)
  else:
    assert sn.native_instructions == sn.instructions


FAULTS = {  # a store past the end, by fiber 72 of workgroup 1 (lane 72: the second word of the lane masks)
  "ibo": GID + "add.u r1.x, r0.w, 3\n" + ST.format(n=1, s="r1.x", c="r0.w", b=1) + "end\n",
  "shared": "shl.b r1.x, r0.x, 2\nadd.u r1.y, r0.x, 1\ncmps.u.lt p0.x, r0.x, 72\nmov.u32u32 r1.z, 4096\npredf\n"
            "add.u r1.x, r1.x, r1.z\nprede\nstl.u32 l[r1.x], r1.y, 1\nend\n",
}


@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_fault_wave128_native(arch, kind):
  """A wave128 store faulting first in fiber 72 (IBO 1 has 200 dwords; shared memory 512 bytes, fibers 72..
  storing 4096 bytes further): the native tier stops with the interpreter's error text (workgroup, fiber, PC,
  address), and the next launch runs."""
  code = assemble(FAULTS[kind], arch)
  sh = listing.Shader.explicit(arch, code, local_size=(128, 1, 1), wave_size=128, shared_size=512)
  texts = []
  for mode in ("0", "force"):
    def run():
      try:
        launch(code, "main", grid=(2,), args={1: np.zeros(200, np.uint32)}, arch=arch, shader=sh, checks=False)
      except GputwinError as e:
        return f"{type(e).__name__}: {e}"
      return "no error"
    texts.append(_launch(mode, run))
  assert texts[0] == texts[1], texts
  assert "fiber 72" in texts[0] and ("workgroup (1,0,0)" in texts[0] if kind == "ibo" else "VA 0x1120" in texts[0]), \
      texts[0]  # (shared: lane 72's offset 4096 + 4 * 72, in workgroup 0)
  case = _divergent(2, arch)
  args, run, check = case()
  _launch("force", lambda: run(args, False))
  check(args)
