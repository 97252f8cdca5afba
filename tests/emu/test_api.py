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


def test_register_files_and_code_have_owners():
  """An Emulator keeps its own last register files (checkers off); launch() runs on CODE's idle Emulator of the code
  object, so a repeated launch reuses them; decoded programs are shared through the one bounded cache."""
  from gputwin.emu import api, launch
  co = kernel("gfx1100", BODY)
  a, b = Emulator(co), Emulator(co)
  out = np.zeros(64, np.uint32)
  a.launch("k", grid=2, block=32, args=[out], checks=False)
  assert a.spare.eng is not None and b.spare.eng is None
  assert a.program(32) is b.program(32) and len(api.CODE.programs) <= api.CODE.limit
  launch(co, "k", grid=2, block=32, args=[out], checks=False)
  e = api.CODE.take(co, None)
  assert e.spare.eng is not None  # the register files the launch left
  api.CODE.give(e)


def test_the_library_leaves_the_allocator_alone():
  """keep_heap (glibc mallopt, process-wide) is opt-in: a launch in a fresh process does not call it."""
  import subprocess
  import sys
  code = ("import numpy as np; from gputwin.emu import core, launch; from tests.emu.test_asm import kernel;"
          f"launch(kernel('gfx1100', '''{BODY}'''), 'k', grid=2, block=32, args=[np.zeros(64, np.uint32)],"
          " checks=False);"
          "assert not core.HEAP_KEPT")
  subprocess.run([sys.executable, "-c", code], check=True)


def test_a_refused_launch_leaves_no_guest_memory_behind():
  """launch() reuses an Emulator: arguments the kernarg rules refuse must not leave buffers mapped in it."""
  import pytest
  from gputwin.emu import api, launch
  from gputwin.errors import LaunchError
  co = kernel("gfx1100", BODY)
  launch(co, "k", grid=2, block=32, args=[np.zeros(64, np.uint32)], checks=False)
  e = api.CODE.take(co, None)
  mapped = len(e.mem.starts)
  api.CODE.give(e)
  with pytest.raises(LaunchError, match="is a pointer"):
    launch(co, "k", grid=2, block=32, args=[np.zeros(64, np.uint32), "x"], checks=False)
  e = api.CODE.take(co, None)
  assert len(e.mem.starts) == mapped
  api.CODE.give(e)
