"""pytest plugin (entry point group pytest11, name `gputwin`): test kernels on every mock target and on real GPUs.

  def test_fill(gpu):                                  # one test per device: mock:gfx1100 ... and amd:N when present
    gpu.launch(co_for(gpu.arch), "fill", grid=4, block=64, args=[out, 7])
  @pytest.mark.arch("gfx942", "gfx950")                # only these targets
  @pytest.mark.arch("sm_80", "sm_90")                  # NVIDIA (PTX): mock:sm_80, mock:sm_90 and nv:N when present
  @pytest.mark.arch("a630", "a730")                    # Adreno (ir3): mock:a630, mock:a730 and qcom when present
  @pytest.mark.hw                                      # real hardware only (skipped without /dev/kfd, /dev/nvidiactl)
  def test_x(gpu, same_on_device): same_on_device(co, "k", grid=.., block=.., args=[...])

`gpu` is a gputwin.runtime Device (AMD code objects on gfx targets, PTX on sm_ targets, ir3 on Adreno targets;
NVIDIA and Adreno targets only for tests that name them). `same_on_device` (also `assert_same_on_device`) runs a launch on the emulator and on the real
device of the same target and fails naming the first differing output element; it skips when no such device exists. Hypothesis
strategies for instructions and kernel inputs live in gputwin.verify.strategies.

Devices: `--gputwin-devices mock:gfx1100,amd:0,nv:0` or $GPUTWIN_TEST_DEVICES narrows the list."""
from __future__ import annotations

import functools
import os

import pytest

MOCK_TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")
NV_TARGETS = ("sm_80", "sm_90")  # NVIDIA targets run PTX, so only tests that name them (arch("sm_90")) get them
ADRENO_TARGETS = ("a630", "a660", "a730", "a740")  # likewise ir3: only for tests that name them (arch("a630"))


def _real(kind: str, path: str, module: str) -> tuple[tuple[str, str], ...]:
  if not os.path.exists(path):
    return ()
  try:
    import importlib
    from gputwin.runtime.kernel import kernel_for
    return tuple((f"{kind}:{i}", g.arch) for i, g in
                 enumerate(importlib.import_module(module).devices(kernel_for(kind))))
  except Exception:  # noqa: BLE001 - an unreadable topology or a driver that refuses us means: no usable device
    return ()


@functools.lru_cache(maxsize=1)
def real_devices() -> tuple[tuple[str, str], ...]:
  """(device string, arch) of each real GPU: AMD through /dev/kfd's topology, NVIDIA through /dev/nvidiactl, an
  Adreno through /dev/kgsl-3d0."""
  return _real("amd", "/dev/kfd", "gputwin.runtime.hcq") + _real("nv", "/dev/nvidiactl", "gputwin.runtime.nvrm") + \
      _adreno()


def _adreno() -> tuple[tuple[str, str], ...]:
  """("qcom", arch) when /dev/kgsl-3d0 opens (one Adreno per machine), else nothing."""
  if not os.path.exists("/dev/kgsl-3d0"):
    return ()
  try:
    from gputwin.runtime import open as open_device
    dev = open_device("qcom")
    try:
      return (("qcom", dev.arch),)
    finally:
      dev.close()
  except Exception:  # noqa: BLE001 - a driver that refuses us means: no usable device
    return ()


def all_devices(config=None) -> list[tuple[str, str]]:
  want = (config.getoption("gputwin_devices") if config else None) or os.environ.get("GPUTWIN_TEST_DEVICES")
  devs = [(f"mock:{t}", t) for t in MOCK_TARGETS + NV_TARGETS + ADRENO_TARGETS] + list(real_devices())
  if want:
    names = {w.strip() for w in want.split(",") if w.strip()}
    devs = [d for d in devs if d[0] in names or d[1] in names]
  return devs


def pytest_addoption(parser):
  parser.addoption("--gputwin-devices", default=None, help="comma-separated devices/targets for the `gpu` fixture")


def pytest_configure(config):
  config.addinivalue_line("markers", "hw: needs a real GPU (skipped on mock devices and without one)")
  config.addinivalue_line("markers", "arch(*targets): run the `gpu` fixture only on these targets (gfx1100 ..., "
                          "sm_80/sm_90 only when named)")


def pytest_runtest_setup(item):
  if item.get_closest_marker("hw") and not real_devices():
    pytest.skip("needs a real GPU (no /dev/kfd GPU node, no /dev/nvidiactl GPU, no /dev/kgsl-3d0)")


def pytest_generate_tests(metafunc):
  if "gpu" not in metafunc.fixturenames:
    return
  devs = all_devices(metafunc.config)
  m = metafunc.definition.get_closest_marker("arch")
  if m:
    devs = [d for d in devs if d[1] in m.args]
  else:  # NVIDIA and Adreno targets run PTX / ir3, not AMD code objects: only for tests that ask (arch("sm_90"))
    devs = [d for d in devs if d[1] not in NV_TARGETS + ADRENO_TARGETS]
  if metafunc.definition.get_closest_marker("hw"):
    devs = [d for d in devs if not d[0].startswith("mock")] or [("no-hw", "")]
  metafunc.parametrize("gpu", [d[0] for d in devs] or ["no-device"], indirect=True)


@pytest.fixture
def gpu(request):
  """A gputwin.runtime Device: one test per mock target and real GPU (see the module docstring)."""
  name = getattr(request, "param", None) or all_devices(request.config)[0][0]
  if name in ("no-hw", "no-device"):
    pytest.skip("no real GPU here" if name == "no-hw" else "no device matches arch(...)")
  from gputwin.runtime import open as open_device
  dev = open_device(name)
  yield dev
  dev.close()


def assert_same_on_device(code, kernel: str, *, grid, block, args, device: str | None = None, arch: str | None = None):
  """Run on the emulator and on a real GPU of the code object's target (or `device`); fail on the first differing
  output element, skip when no such GPU exists. `args`: the launch arguments (arrays are copied, not changed)."""
  from gputwin.verify import diverge, runner
  named = [(f"arg{i}", a) for i, a in enumerate(args)]
  emu = runner.run(code, kernel, grid=grid, block=block, args=named, arch=arch, trace=False, label="emulator")
  if device is None:
    device = next((d for d, a in real_devices() if a == emu.arch), None)
    if device is None:
      pytest.skip(f"no real {emu.arch} GPU here to compare the emulator with")
  hw = runner.run(code, kernel, grid=grid, block=block, args=named, arch=arch, device=device, label=device)
  if emu.error or hw.error:
    assert type(emu.error) is type(hw.error), f"{kernel}: emulator {emu.error!r} vs {device} {hw.error!r}"
  d = diverge.first_output_diff(emu, hw)
  assert d is None, (f"{kernel} on {emu.arch}: {d.name}{list(d.index)} = {d.a!r} on the emulator, {d.b!r} on {device}"
                     f" ({d.count} elements differ)")


@pytest.fixture
def same_on_device():
  return assert_same_on_device
