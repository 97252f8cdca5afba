"""The unicorn-style object API: guest memory, prepare, single-step, register peek/poke, hooks."""
import numpy as np

from gputwin.emu import Emulator
from tests.emu.test_asm import kernel

BODY = """
  s_lshl_b32 s6, s2, 7
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_add_nc_u32 v1, s6, v1
  v_add_nc_u32 v2, s4, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v2, s[2:3]"""


def test_step_peek_poke_hook():
  emu = Emulator(kernel("gfx1100", BODY))
  out = np.zeros(64, np.uint32)
  d = emu.prepare("k", grid=2, block=32, args=[out], checks=False)
  seen = []
  d.hook(lambda eng, op, waves: seen.append(op.inst.op))
  assert d.reg(0, "pc") == emu.co.kernels["k"].entry
  np.testing.assert_array_equal(d.reg(1, "v0"), np.arange(32))  # packed work-item ids
  assert d.reg(1, "exec") == 0xffffffff
  d.set_reg(1, "s4", 1000)  # poke wave 1 before it runs
  assert d.step() and seen == ["S_LSHL_B32"]
  d.run()
  d.finish()
  np.testing.assert_array_equal(out, np.r_[np.arange(32), 1000 + np.arange(32)])
  assert seen.count("GLOBAL_STORE_B32") == 1 and seen[-1] == "S_ENDPGM"  # both waves step together


def test_guest_memory_roundtrip():
  emu = Emulator(kernel("gfx1100", BODY))
  va = emu.alloc(16)
  emu.write(va, np.arange(4, dtype=np.uint32))
  assert np.frombuffer(emu.read(va, 16), np.uint32).tolist() == [0, 1, 2, 3]
