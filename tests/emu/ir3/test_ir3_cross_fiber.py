"""ir3 cross-fiber and parallel moves on the emulator, both tiers, against numpy: shfl in its five modes (the isaspec
<doc>: Vulkan subgroupShuffleXor/Up/Down, subgroupRotate and its negative), and swz/gat/sct (moves whose sources are
all read before any destination is written)."""
import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.isa.ir3 import assemble, listing

GID = "shl.b r0.w, r48.x, 6\nadd.u r0.w, r0.w, r0.x\nldib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 0\n"


def _run(body: str, arch: str, checks: bool, n_out: int = 4, wave: int = 64):
  code = assemble(GID + "(sy)shl.b r1.z, r0.w, 2\n" + body + "stib.b.untyped.1d.u32.4.imm.base0 r2.x, r1.z, 1\nend\n",
                  arch)
  x = (np.arange(128, dtype=np.uint32) * 7919) ^ 0x5a5a
  o = np.zeros((128, n_out), np.uint32)
  sh = listing.Shader.explicit(arch, code, local_size=(wave, 1, 1), wave_size=wave)
  launch(code, grid=(128 // wave,), args={0: x, 1: o.reshape(-1)}, arch=arch, shader=sh, checks=checks)
  return x, o


@pytest.mark.parametrize("tier", ["interp", "native"])
@pytest.mark.parametrize("arch", ["a630", "a730"])
@pytest.mark.parametrize("wave", [64, 128])
def test_shfl_modes(arch, wave, checks):
  body = ("mov.u32u32 r1.y, 5\nshfl.xor.u32 r2.x, r1.x, r1.y\nshfl.up.u32 r2.y, r1.x, 3\n"
          "shfl.down.u32 r2.z, r1.x, r1.y\nshfl.rdown.u32 r2.w, r1.x, 9\n(sy)nop\n")
  x, o = _run(body, arch, checks, wave=wave)
  lane = np.arange(128) % wave
  base = np.arange(128) - lane
  src = lambda j: x[base + np.where((j >= 0) & (j < wave), j, lane)]  # outside the wave: the fiber's own value
  np.testing.assert_array_equal(o[:, 0], src(lane ^ 5))
  np.testing.assert_array_equal(o[:, 1], src(lane - 3))
  np.testing.assert_array_equal(o[:, 2], src(lane + 5))
  np.testing.assert_array_equal(o[:, 3], src((lane + 9) % wave))


@pytest.mark.parametrize("tier", ["interp", "native"])
def test_rup_rotates_the_other_way(checks):
  x, o = _run("(rpt2)mov.u32u32 r2.y, 0\nshfl.rup.u32 r2.x, r1.x, 1\n(sy)nop\n", "a630", checks)
  lane = np.arange(128) % 64
  np.testing.assert_array_equal(o[:, 0], x[np.arange(128) - lane + (lane - 1) % 64])


@pytest.mark.parametrize("tier", ["interp", "native"])
def test_parallel_moves_read_every_source_first(checks):
  body = ("add.u r2.x, r1.x, 1\nadd.u r2.y, r1.x, 2\nadd.u r2.z, r1.x, 3\nadd.u r2.w, r1.x, 4\n"
          "swz.u32u32 r2.x, r2.y, r2.y, r2.x\n"          # a swap
          "sct.u32u32 r3.x, r3.y, r3.z, r3.w, r2.x\n"    # r3.x..r3.w = r2.x..r2.w
          "gat.u32u32 r2.x, r3.w, r3.z, r3.y, r3.x\n")   # r2.x..r2.w = reversed
  x, o = _run(body, "a730", checks)
  want = np.stack([x + 4, x + 3, x + 1, x + 2], axis=1).astype(np.uint32)
  np.testing.assert_array_equal(o, want)
