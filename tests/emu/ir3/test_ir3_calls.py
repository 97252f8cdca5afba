"""ir3 call/ret (a return stack per fiber) and kill (the fibers its predicate selects end) on both tiers: a
function called twice doubles twice, odd fibers are killed before their store."""
import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.errors import EmuError
from gputwin.isa.ir3 import assemble

SRC = """shl.b r0.w, r48.x, 6
add.u r0.w, r0.w, r0.x
add.u r1.x, r0.w, 1
call #twice
and.b p0.x, r0.w, 1
kill p0.x
stib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 1
end
twice:
call #double
call #double
ret
double:
add.u r1.x, r1.x, r1.x
ret
"""


@pytest.mark.parametrize("tier", ["interp", "native"])
@pytest.mark.parametrize("arch", ["a630", "a730"])
def test_nested_calls_and_kill(arch, checks):
  o = np.full(128, 7, np.uint32)
  launch(assemble(SRC, arch), grid=2, args={0: np.zeros(1, np.uint32), 1: o}, arch=arch, checks=checks)
  gid = np.arange(128)
  np.testing.assert_array_equal(o, np.where(gid % 2 == 0, (gid + 1) * 4, 7))


def test_ret_without_call_is_a_located_error():
  with pytest.raises(EmuError, match=r"\[a630\].*PC 0x0: ret: ret with no call to return to"):
    launch(assemble("ret\nend\n", "a630"), grid=1, args={}, arch="a630")
