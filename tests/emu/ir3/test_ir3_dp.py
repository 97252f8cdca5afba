"""dp2acc/dp4acc (ir3-cat3.xml <doc>: DST = dot(SRC1, SRC2) + SRC3 over the low/high u8vec2, or the u8vec4, of the
32-bit sources; `mixed`: SRC1's bytes signed, OpSUDotKHR) on the emulator, both tiers, against numpy. Mesa's template
names a NOP field no case defines, so Mesa prints these words with a "no field 'NOP'" note; the decoder treats that
as the table's problem, not the word's (gputwin.isa.ir3.decode.problems)."""
import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.isa.ir3 import assemble

SRC = """shl.b r0.w, r48.x, 6
add.u r0.w, r0.w, r0.x
shl.b r1.z, r0.w, 1
ldib.b.untyped.1d.u32.2.imm.base0 r1.x, r1.z, 0
(sy)mov.u32u32 r2.x, 5
(nop) dp4acc.mixed.low r2.y, r1.x, r1.y, r2.x
(nop) dp2acc.unsigned.high r2.z, r1.x, r1.y, r2.x
(nop) dp4acc.unsigned.low r2.w, r1.x, r1.y, r2.x
shl.b r1.w, r0.w, 2
stib.b.untyped.1d.u32.4.imm.base0 r2.x, r1.w, 1
end
"""


@pytest.mark.parametrize("tier", ["interp", "native"])
@pytest.mark.parametrize("arch", ["a630", "a730"])
def test_dot_product_accumulate(arch, checks):
  x = np.random.default_rng(0).integers(0, 2**32, (64, 2), dtype=np.uint64).astype(np.uint32)
  o = np.zeros((64, 4), np.uint32)
  launch(assemble(SRC, arch), grid=1, args={0: x, 1: o}, arch=arch, checks=checks)
  a = np.ascontiguousarray(x[:, 0]).view(np.uint8).reshape(64, 4).astype(np.int64)
  b = np.ascontiguousarray(x[:, 1]).view(np.uint8).reshape(64, 4).astype(np.int64)
  sa = np.where(a > 127, a - 256, a)
  np.testing.assert_array_equal(o[:, 1], (5 + (sa * b).sum(1)) & 0xffffffff)
  np.testing.assert_array_equal(o[:, 2], (5 + (a[:, 2:] * b[:, 2:]).sum(1)) & 0xffffffff)
  np.testing.assert_array_equal(o[:, 3], (5 + (a * b).sum(1)) & 0xffffffff)
