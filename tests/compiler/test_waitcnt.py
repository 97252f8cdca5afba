"""Wait-counter placement in the direct backend: the smallest wait before the first use, per counter and target;
the emulator's independent waitcnt checker accepts it and rejects the same code with the wait removed."""

import numpy as np
import pytest

from gputwin.compiler import Ptr, compile, f32, global_id, kernel, shared, barrier, workitem_id
from gputwin.isa.codeobj import assemble_code_object

from _compiler_helpers import emulator, run_both


@kernel
def two_loads(x: Ptr[f32], y: Ptr[f32], z: Ptr[f32], w: Ptr[f32]):
  i = global_id(0)
  a = x[i]
  b = y[i]
  z[i] = a + 1.0
  w[i] = b * 2.0


@kernel
def lds_pair(x: Ptr[f32], z: Ptr[f32]):
  s = shared(f32, 64)
  t = workitem_id(0)
  s[t] = x[t]
  barrier()
  a = s[63 - t]
  b = s[t ^ 1]
  c = a * 2.0
  z[t] = c - b


FIRST_WAIT = {"gfx1100": "s_waitcnt vmcnt(1)", "gfx1200": "s_wait_loadcnt 1", "gfx942": "s_waitcnt vmcnt(1)",
              "gfx950": "s_waitcnt vmcnt(1)"}
LDS_WAIT = {"gfx1100": "s_waitcnt lgkmcnt(1)", "gfx1200": "s_wait_dscnt 1", "gfx942": "s_waitcnt lgkmcnt(1)",
            "gfx950": "s_waitcnt lgkmcnt(1)"}


def body(asm: str) -> list[str]:
  return [l.strip() for l in asm.split(".size")[0].splitlines() if l.startswith("  ")]


@pytest.mark.parametrize("arch", sorted(FIRST_WAIT))
def test_minimal_waits(arch):
  g = body(compile(two_loads, arch).asm)
  loads = [j for j, l in enumerate(g) if l.startswith("global_load")]
  assert len(loads) == 2
  first_add = next(j for j, l in enumerate(g) if l.startswith("v_add_f32"))
  assert g[first_add - 1] == FIRST_WAIT[arch]       # the second load may still be in flight
  l = body(compile(lds_pair, arch).asm)
  assert LDS_WAIT[arch] in l


@pytest.mark.parametrize("arch", sorted(FIRST_WAIT))
def test_emulator_checker_agrees(arch):
  rng = np.random.default_rng(0)
  for kf, n_in in ((two_loads, 2), (lds_pair, 1)):
    c = compile(kf, arch)
    args = [rng.standard_normal(64).astype(np.float32) for _ in range(n_in)] + \
           [np.zeros(64, np.float32) for _ in range(len(c.ir.params) - n_in)]
    ref, emu = run_both(c, args, 1, 64, checks={"waitcnt", "lds_race", "uninit"})
    for a, b in zip(ref, emu): np.testing.assert_array_equal(a, b)


def test_removing_a_wait_is_caught():
  from gputwin.errors import GputwinError
  launch = emulator()
  c = compile(two_loads, "gfx1100")
  broken = c.asm.replace("  s_waitcnt vmcnt(1)\n", "", 1)
  assert broken != c.asm
  co = assemble_code_object(broken, "gfx1100")
  args = [np.ones(64, np.float32), np.ones(64, np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32)]
  with pytest.raises(GputwinError, match="(?i)wait"):
    launch(co, "two_loads", grid=1, block=64, args=args, arch="gfx1100", checks={"waitcnt"})
