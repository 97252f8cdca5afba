"""The pytest plugin as its users see it: pytester runs small test files with `-p gputwin.verify.plugin` (what the
pytest11 entry point does when the package is installed)."""

import importlib
from importlib.metadata import entry_points

# imported here, before pytester's in-process runs: it drops modules first imported inside a run, and numpy's C
# extension cannot be imported twice in one process
for _m in ("numpy", "hypothesis.extra.numpy", "gputwin.compiler.examples", "gputwin.runtime",
           "gputwin.verify.strategies", "gputwin.runtime.nv", "gputwin.mock.nv", "gputwin.mock.nvgpu",
           "gputwin.compiler.backend_ptx", "gputwin.isa.ptx", "gputwin.runtime.qcom", "gputwin.mock.adreno",
           "gputwin.mock.kgsl", "gputwin.emu.ir3.launch", "gputwin.isa.ir3"):
  importlib.import_module(_m)

# once pyproject's pytest11 entry point is installed pytest loads the plugin itself; -p again would register it twice
INSTALLED = any(e.value == "gputwin.verify.plugin" for e in entry_points(group="pytest11"))
PLUGIN = (() if INSTALLED else ("-p", "gputwin.verify.plugin")) + ("-p", "no:cacheprovider", "-p", "no:xdist",
                                                                   "-p", "no:randomly")

TESTS = '''
import numpy as np
import pytest
from gputwin.compiler import compile
from gputwin.compiler.examples import saxpy

def _run(dev):
  c = compile(saxpy, dev.arch)
  x, y = np.arange(100, dtype=np.float32), np.ones(100, np.float32)
  dev.launch(c.code_object, "saxpy", grid=2, block=64, args=[np.float32(2.0), x, y, 100])
  return c, x, y

def test_every_mock_target(gpu):
  c, x, y = _run(gpu)
  np.testing.assert_array_equal(y, 2 * x + 1)

@pytest.mark.arch("gfx942", "gfx1200")
def test_only_some(gpu):
  assert gpu.arch in ("gfx942", "gfx1200")

@pytest.mark.arch("sm_90")
def test_nvidia_targets_when_named(gpu):
  c, x, y = _run(gpu)
  assert gpu.name.startswith("NVIDIA") or gpu.arch == "sm_90"
  np.testing.assert_array_equal(y, 2 * x + 1)

@pytest.mark.arch("a630", "a730")
def test_adreno_targets_when_named(gpu):
  from gputwin.isa.ir3 import assemble, listing
  code = assemble("shl.b r0.w, r48.x, 6\\nadd.u r0.w, r0.w, r0.x\\nldib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 0\\n"
                  "(sy)add.u r1.x, r1.x, 1\\nstib.b.untyped.1d.u32.1.imm.base0 r1.x, r0.w, 1\\nend\\n", gpu.arch)
  x, y = np.arange(128, dtype=np.uint32), np.zeros(128, np.uint32)
  gpu.launch(code, "main", grid=2, args={0: x, 1: y}, shader=listing.Shader.explicit(gpu.arch, code))
  np.testing.assert_array_equal(y, x + 1)

@pytest.mark.hw
def test_needs_hardware(gpu):
  raise AssertionError("must not run without a real GPU")

def test_emulator_vs_device(same_on_device):
  c = compile(saxpy, "gfx1100")
  same_on_device(c.code_object, "saxpy", grid=1, block=64,
                 args=[np.float32(1.0), np.ones(64, np.float32), np.ones(64, np.float32), 64])
'''


def test_gpu_fixture_markers_and_skips(pytester):
  pytester.makepyfile(test_k=TESTS)
  r = pytester.runpytest(*PLUGIN, "-v", "-rs")
  r.assert_outcomes(passed=9, skipped=2)
  r.stdout.fnmatch_lines(["*test_every_mock_target?mock:gfx1100? PASSED*",
                          "*test_every_mock_target?mock:gfx950? PASSED*",
                          "*test_only_some?mock:gfx942? PASSED*", "*test_nvidia_targets_when_named?mock:sm_90? PASSED*",
                          "*test_adreno_targets_when_named?mock:a730? PASSED*",
                          "*needs a real GPU*",
                          "*no real gfx1100 GPU here to compare the emulator with*"])


def test_device_selection_and_marker_registration(pytester):
  pytester.makepyfile(test_sel=TESTS)  # a module name of its own: pytester runs in this process
  r = pytester.runpytest(*PLUGIN, "--gputwin-devices", "gfx1200", "--strict-markers", "-k", "mock or only")
  r.assert_outcomes(passed=2)


def test_strategies(pytester):
  pytester.makepyfile(test_s='''
import numpy as np
from hypothesis import given, settings, HealthCheck
from gputwin.isa import decode
from gputwin.verify.strategies import instructions, kernel_inputs, array

@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(instructions("gfx942", 3))
def test_instructions_decode(ins):
  for s in ins:
    assert decode(s.data, "gfx942").size == len(s.data)

@settings(max_examples=15, deadline=None)
@given(kernel_inputs(("f32*", "u8*", "i32"), n=16), array("f16", 8, bits=True))
def test_inputs(args, h):
  assert args[0].dtype == np.float32 and args[1].shape == (16,) and isinstance(args[2], np.int32)
  assert np.isfinite(args[0]).all() and h.dtype == np.float16
''')
  pytester.runpytest(*PLUGIN).assert_outcomes(passed=2)


def test_same_on_device_through_the_mock_kfd():
  """The helper's device path, pointed at the mock KFD (the PM4 path a real GPU takes); skips with no real GPU."""
  import numpy as np
  import pytest
  from gputwin.compiler import compile
  from gputwin.compiler.examples import saxpy
  from gputwin.verify.plugin import assert_same_on_device
  c = compile(saxpy, "gfx942")
  args = [np.float32(3.0), np.arange(64, dtype=np.float32), np.ones(64, np.float32), 64]
  assert_same_on_device(c.code_object, "saxpy", grid=1, block=64, args=args, device="mock:gfx942")
  with pytest.raises(pytest.skip.Exception, match="no real gfx942 GPU"):
    assert_same_on_device(c.code_object, "saxpy", grid=1, block=64, args=args)


def test_same_on_device_through_the_mock_nvidia_driver():
  """The same helper for PTX: the emulator against the runtime on the mock RM/UVM driver (the GPFIFO/QMD path a real
  NVIDIA GPU takes), element for element; skips with no real sm_90 GPU."""
  import numpy as np
  import pytest
  from gputwin.compiler import compile
  from gputwin.compiler.examples import saxpy
  from gputwin.verify.plugin import assert_same_on_device
  c = compile(saxpy, "sm_90")
  args = [np.float32(3.0), np.arange(64, dtype=np.float32), np.ones(64, np.float32), 64]
  assert_same_on_device(c.code_object, "saxpy", grid=1, block=64, args=args, device="mock:sm_90", arch="sm_90")
  with pytest.raises(pytest.skip.Exception, match="no real sm_90 GPU"):
    assert_same_on_device(c.code_object, "saxpy", grid=1, block=64, args=args, arch="sm_90")
