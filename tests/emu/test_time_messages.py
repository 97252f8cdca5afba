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
