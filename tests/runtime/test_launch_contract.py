"""One launch contract: gputwin.emu.launch and Device.launch on a mock GPU (PM4 + DISPATCH_DIRECT) take the same
arguments by the same rules (gputwin.isa.kernargs), give the same outputs, errors and LaunchStats, and report a
guest fault with the same details. Oracles: numpy for outputs; each path's result is compared with the other's."""
import subprocess, sys
import numpy as np
import pytest
import gputwin.runtime as rt
from gputwin.emu import launch as emu_launch
from gputwin.errors import EmuFault, LaunchError
from gputwin.isa.kernargs import LaunchStats
from tests.emu.test_asm import kernel

# a bare .amdhsa_kernel (no argument metadata): out = in * a + b, args [out, in, a (f32), b (i32)]
NO_META = """
  s_load_b128 s[4:7], s[0:1], 0x0
  s_load_b64 s[8:9], s[0:1], 0x10
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[6:7]
  s_waitcnt vmcnt(0)
  v_mul_f32 v2, s8, v2
  v_cvt_f32_i32 v3, s9
  v_add_f32 v2, v2, v3
  global_store_b32 v1, v2, s[4:5]"""


def both(co, name, grid, block, make):
  """Run `make()`'s arguments through emu.launch and through a mock device; returns (emu stats, args), (rt ...)."""
  arch = co.arch if hasattr(co, "arch") else None
  out = []
  for run in ("emu", "rt"):
    args = make()
    if run == "emu":
      st = emu_launch(co, name, grid=grid, block=block, args=args)
    else:
      with rt.open(f"mock:{arch or ARCH}") as dev:
        st = dev.launch(co, name, grid=grid, block=block, args=args)
    out.append((st, args))
  return out


ARCH = "gfx1100"


def test_a_kernel_without_metadata_gets_its_arguments_through_both():
  co = kernel(ARCH, NO_META)
  x = np.arange(64, dtype=np.float32)
  (se, ae), (sr, ar) = both(co, "k", 1, 64, lambda: [np.zeros(64, np.float32), x.copy(), 1.5, 7])
  np.testing.assert_array_equal(ae[0], x * np.float32(1.5) + 7)
  assert ae[0].tobytes() == ar[0].tobytes()
  assert isinstance(se, LaunchStats) and isinstance(sr, LaunchStats)
  assert (sr.waves, sr.workgroups, sr.wave_size) == (se.waves, se.workgroups, se.wave_size) == (2, 1, 32)
  assert sr.instructions == se.instructions == 2 * 11   # ten instructions and s_endpgm per wave


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_dynamic_lds_through_both(clang_co, arch):
  """A `__local float *` argument sized by an int byte count: the offset after static LDS in the kernargs, the group
  segment grown by it (dispatch packet and RSRC2.LDS_SIZE on the PM4 path)."""
  co = clang_co(arch, "dynlds")
  x = np.random.default_rng(1).standard_normal(512).astype(np.float32)
  (se, ae), (sr, ar) = both(_co(co, arch), "dynlds", 4, 128, lambda: [np.zeros(512, np.float32), x.copy(), 128 * 4])
  np.testing.assert_array_equal(ae[0], x.reshape(4, 128)[:, ::-1].reshape(-1))
  assert ae[0].tobytes() == ar[0].tobytes() and se.instructions == sr.instructions > 0


def _co(raw, arch):
  from gputwin.isa.codeobj import load_code_object
  return load_code_object(raw, arch=arch)


def test_argument_errors_are_the_same(clang_co):
  co = _co(clang_co(ARCH), ARCH)
  bad = {"takes 3 arguments": [np.zeros(64, np.int32)],
         r"is int\*; got a float64 array": [np.zeros(64), np.zeros(64, np.int32), 1],
         "by-value": [np.zeros(64, np.int32), np.zeros(64, np.int32), np.zeros(3)],
         "is a pointer": [np.zeros(64, np.int32), "x", 1]}
  dyn = _co(clang_co(ARCH, "dynlds"), ARCH)
  with rt.open(f"mock:{ARCH}") as dev:
    for what, args in bad.items():
      msgs = []
      for f in (emu_launch, dev.launch):
        with pytest.raises(LaunchError, match=what) as e:
          f(co, "add1", grid=1, block=64, args=args)
        msgs.append(str(e.value))
      assert msgs[0] == msgs[1]
    for f in (emu_launch, dev.launch):
      with pytest.raises(LaunchError, match="__local pointer: pass its size in bytes"):
        f(dyn, "dynlds", grid=1, block=64, args=[np.zeros(64, np.float32), np.zeros(64, np.float32), 1.5])


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_a_guest_fault_names_the_same_place_through_both(clang_co, arch):
  co = _co(clang_co(arch), arch)
  with pytest.raises(EmuFault) as ee:
    emu_launch(co, "wild", grid=1, block=64, args=[np.zeros(64, np.int32), 0x7000_0000])
  with rt.open(f"mock:{arch}") as dev, pytest.raises(rt.QueueFault, match="kernel wild") as er:
    dev.launch(co, "wild", grid=1, block=64, args=[np.zeros(64, np.int32), 0x7000_0000])
  e, r = ee.value, er.value
  assert r.kernel == e.kernel == "wild" and r.arch == e.arch == arch
  assert (r.va, r.access, r.size, r.wave, r.inst) == (e.va, e.access, e.size, e.wave, e.inst)
  assert e.va == 0x7000_0000 and e.wave == 0 and "load" in e.inst and e.access == "read"
  assert r.pc - dev.load(co).mem.va == e.pc   # the same instruction of the code object (uploaded at another VA)
  assert e.inst in str(r) and f"{e.va:#x}" in str(r)


def test_import_runtime_loads_neither_emulator_nor_mocks():
  code = ("import gputwin.runtime, sys;"
          " bad = [m for m in sys.modules if m.startswith(('gputwin.emu', 'gputwin.mock'))]; assert not bad, bad")
  subprocess.run([sys.executable, "-c", code], check=True)


def test_an_assembly_file_through_both(tmp_path):
  """A `.s` path (assembled by gputwin.isa for both launchers), no argument metadata: [out, in, a]."""
  from tests.emu.test_tool import ASM
  src = tmp_path / "scale.s"
  src.write_text(ASM)
  x = np.arange(64, dtype=np.float32)
  (se, ae), (sr, ar) = both(str(src), "scale", 2, 32, lambda: [np.zeros(64, np.float32), x.copy(), 2.0])
  np.testing.assert_array_equal(ae[0][:32], 2 * x[:32])   # the kernel indexes by work-item id only
  assert ae[0].tobytes() == ar[0].tobytes() and se.instructions == sr.instructions > 0


APERTURES = """
  s_load_b64 s[4:5], s[0:1], 0x0
  s_mov_b64 s[6:7], src_shared_base
  s_mov_b64 s[8:9], src_private_base
  v_mov_b32 v0, 0
  v_mov_b32 v1, s6
  v_mov_b32 v2, s7
  v_mov_b32 v3, s8
  v_mov_b32 v4, s9
  s_waitcnt lgkmcnt(0)
  global_store_b128 v0, v[1:4], s[4:5]"""


def test_flat_apertures_agree_with_the_kfd():
  """src_shared_base / src_private_base as a kernel reads them equal the LDS and scratch apertures the (mock) KFD
  reports to the runtime (Linux's gfx9+ app bases), through both launchers."""
  co = kernel(ARCH, APERTURES)
  (_, (e,)), (_, (r,)) = both(co, "k", 1, 1, lambda: [np.zeros(4, np.uint32)])
  with rt.open(f"mock:{ARCH}") as dev:
    shared_hi, private_hi = dev.apertures
  assert e.tolist() == r.tolist() == [0, shared_hi, 0, private_hi]
  assert (shared_hi, private_hi) == (1 << 16, 2 << 16)  # kfd_flat_memory.c: LDS 1 << 48, scratch 2 << 48
