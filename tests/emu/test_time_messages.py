"""S_SENDMSG_RTN_B64 MSG_RTN_GET_REALTIME, clang-22's __builtin_readsteadycounter() on RDNA3/RDNA4 (gfx11 and gfx12
have no s_memrealtime): the time source every other timer reads, the wave's own instruction count, on both tiers.
Before: the instruction had no semantics and stopped the launch."""
import re
import shutil

import numpy as np
import pytest

from gputwin.emu import launch

CL = """
__kernel void k(__global ulong *o, __global const float *x) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  ulong t0 = __builtin_readsteadycounter();
  float a = x[i];
  a = a * 3.0f + 1.0f;
  ulong t1 = __builtin_readsteadycounter();
  o[2 * i] = t0;
  o[2 * i + 1] = t1 - t0 + (ulong)(a > 1e30f);
}"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200"])
def test_readsteadycounter(tier_runs, arch):
  """Two realtime reads around a load and two float ops: the second minus the first is the number of instructions
  the wave ran from the first s_sendmsg_rtn_b64 to the second (clang-22's listing, straight-line code), the same on
  both tiers, checkers on (its waits are clang's) and off."""
  from gputwin.verify.runner import clang_cl
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    pytest.skip("clang-22 / ld.lld-22 not installed (CI installs them: .ci/run)")
  asm = clang_cl(CL, arch, asm=True).decode()
  body = asm.split("\nk:", 1)[1].split("s_endpgm", 1)[0]  # the kernel's own code (clang also emits a callable copy)
  lines = [ln.strip() for ln in body.split("\n") if re.match(r"\s+[a-z_0-9]+\b", ln) and not ln.strip().startswith(".")]
  at = [k for k, ln in enumerate(lines) if ln.startswith("s_sendmsg_rtn_b64") and "REALTIME" in ln]
  assert len(at) == 2, lines
  co = clang_cl(CL, arch)
  n = 128
  x = np.arange(n, dtype=np.float32)
  for checks in (True, False):
    def go():
      o = np.zeros(2 * n, np.uint64)
      launch(co, "k", grid=n // 64, block=64, args=[o, x], checks=checks)
      return o.reshape(n, 2)
    (r0, e0, _), (r1, e1, runs) = tier_runs(go)
    assert e0 is None and e1 is None, (e0, e1)
    np.testing.assert_array_equal(r1, r0)
    assert (r0[:, 1] == at[1] - at[0]).all(), (r0[:4], at)
    assert runs > 0


CYCLES = {  # s_getreg of the cycle counter into s4.., then the values the hardware register layout gives clock c
  "gfx1100": ("s_getreg_b32 s4, hwreg(HW_REG_SHADER_CYCLES, 0, 20)", lambda c: [c & 0xfffff]),
  "gfx1200": ("s_getreg_b32 s4, hwreg(HW_REG_SHADER_CYCLES_HI)\n  s_getreg_b32 s5, hwreg(HW_REG_SHADER_CYCLES_LO)",
              lambda c: [c >> 32, (c + 1) & 0xffffffff]),
}


@pytest.mark.parametrize("arch", sorted(CYCLES))
def test_cycle_counter_registers(arch):
  """__builtin_readcyclecounter's registers (clang-22: gfx11 hwreg(HW_REG_SHADER_CYCLES, 0, 20); gfx12 HI, LO, HI of
  a 64-bit counter) at a clock past 2**32: RDNA3's 20-bit counter wraps, RDNA4's LO is the low 32 bits and HI the
  rest, on both tiers (before: every target wrote the 20-bit counter, so gfx12's HI read 0 and LO wrapped)."""
  from gputwin.emu import core, native
  from gputwin.emu.frontend import for_arch
  from gputwin.emu.memory import GuestMemory
  from gputwin.emu.program import Program
  from gputwin.isa import assemble
  from gputwin.isa.targets import target
  text, want = CYCLES[arch]
  prog = Program(assemble(text + "\n  s_trap 0\n  s_endpgm", arch), 0x1000, arch, target(arch).family, 32,
                 for_arch(arch))
  blk = native.compile_block(prog, 0x1000, 32)
  assert blk is not None and len(blk.ops) == text.count("\n") + 1
  c = (5 << 32) + 0xfff12345
  got = []
  for tier in ("interp", "native"):
    eng = core.Engine(prog, GuestMemory("gpu0"), 2, 32, 256, 0, 0, 0, np.arange(2), None)
    eng.pc[:], eng.clock[:] = prog.base, c
    if tier == "interp":
      for o in blk.ops:
        core.step(eng, o, slice(None))
    else:
      native.Native(eng).run(blk, slice(None))
    got.append(eng.S[:, 4:4 + len(want(c))].tolist())
  assert got[0] == got[1] == [want(c)] * 2, got
