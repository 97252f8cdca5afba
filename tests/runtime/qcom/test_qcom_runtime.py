"""The Adreno HCQ runtime (gputwin.runtime.qcom) on mock kgsl machines: every Mesa ir3 kernel of shared/vendor/ir3
launched through `open("mock:a630").launch(...)` (PM4 built by the runtime, executed by the virtual Adreno's CP)
equals the numpy reference of its GLSL and, byte for byte, a direct gputwin.emu.launch; faults name the kernel, PC and
instruction and the device goes on; timestamps are monotonic; device strings and `gputwin devices`."""
import errno, subprocess, sys
from pathlib import Path

import numpy as np
import pytest

import gputwin.runtime as rt
from gputwin.errors import KernelDriverError, LaunchError
from gputwin.runtime.hcq import QueueFault
from gputwin.runtime.kernel import parse_device

sys.path.insert(0, str(Path(__file__).parents[2] / "emu" / "ir3"))
from test_ir3_mesa_run import CASES, KERNELS  # noqa: E402  (numpy references of the 8 GLSL kernels)

GPUS = ("a630", "a730")
needs_kernels = pytest.mark.skipif(not KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")


@pytest.fixture(scope="module", params=GPUS)
def dev(request):
  d = rt.open(f"mock:{request.param}")
  yield d
  d.close()


def _saxpy_args(n=200, size=256):
  x = np.arange(size, dtype=np.float32)
  y = np.ones(size, np.float32)
  ubo = np.zeros(16, np.uint32)
  ubo[0], ubo[1] = np.float32(0.5).view(np.uint32), n
  return {0: x, 1: y, 4: ubo}


@needs_kernels
@pytest.mark.parametrize("name", sorted(CASES))
def test_mesa_kernel_through_the_runtime_equals_numpy_and_the_emulator(dev, name):
  from gputwin.emu import launch
  grid, args, check = CASES[name]()
  direct = {b: a.copy() for b, a in args.items()}
  st = dev.launch(KERNELS / dev.arch / f"{name}.bin", "main", grid=(grid,), args=args)
  check()                                             # numpy reference of the GLSL
  launch(KERNELS / dev.arch / f"{name}.bin", "main", grid=(grid,), args=direct, arch=dev.arch, checks=False)
  for b in args: assert args[b].tobytes() == direct[b].tobytes(), f"binding {b} differs from gputwin.emu.launch"
  assert st.arch == dev.arch and st.workgroups == grid and st.gpu_seconds > 0


@needs_kernels
def test_block_must_match_the_compiled_local_size(dev):
  with pytest.raises(LaunchError, match="local size"):
    dev.launch(KERNELS / dev.arch / "saxpy.bin", "main", grid=1, block=(32, 1, 1), args=_saxpy_args())
  with pytest.raises(LaunchError, match="numpy array"):
    dev.launch(KERNELS / dev.arch / "saxpy.bin", "main", grid=1, args={0: [1, 2]})


@needs_kernels
def test_out_of_bounds_ibo_access_is_located_and_the_device_goes_on(dev):
  """n = 256 against 64-element buffers: the shader reads IBO 0 past its end. The QueueFault carries the emulator's
  account (PC, instruction, address, access) and equals the direct launch's; the next launch runs on a new context."""
  from gputwin.emu import launch
  from gputwin.errors import EmuFault
  path = KERNELS / dev.arch / "saxpy.bin"
  bad = _saxpy_args(n=256, size=64)
  with pytest.raises(EmuFault) as direct:
    launch(path, "main", grid=4, args={b: a.copy() for b, a in bad.items()}, arch=dev.arch, checks=False)
  ctx = dev.ctx
  with pytest.raises(QueueFault) as ei:
    dev.launch(path, "main", grid=4, args=bad)
  e = ei.value
  assert e.kernel == "main" and "launch of kernel main" in str(e) and "IBO 0 byte offset 256 is past" in str(e)
  assert isinstance(e.error, EmuFault) and (e.pc, e.inst, e.access, e.size) == \
    (direct.value.pc, direct.value.inst, direct.value.access, direct.value.size)
  assert dev.ctx != ctx
  grid, args, check = CASES["saxpy"]()
  dev.launch(path, "main", grid=grid, args=args)
  check()


@needs_kernels
def test_timestamps_are_monotonic(dev):
  prg = dev.load(KERNELS / dev.arch / "saxpy.bin")
  bufs = {b: dev.alloc(a.nbytes) for b, a in _saxpy_args().items()}
  for b, a in _saxpy_args().items(): bufs[b].copyin(a)
  seen, stamps = [], []
  for _ in range(20):
    v = prg(grid=4, args=bufs)
    seen.append(v)
  dev.synchronize()
  assert seen == sorted(seen) and len(set(seen)) == len(seen) and dev.retired() == seen[-1]
  assert int(dev.signal.view(np.uint64, 1)[0]) == seen[-1]          # the IB's own CP_EVENT_WRITE timeline write
  for _ in range(3):
    prg(grid=4, args=bufs)
    dev.synchronize()
    stamps.append(prg.timestamps())
  flat = [t for pair in stamps for t in pair]
  assert flat == sorted(flat) and all(a < b for a, b in stamps)
  t0, t1 = dev.timestamp(), dev.timestamp()
  assert 0 < t0 < t1
  for b in bufs.values(): dev.free(b)


def test_cp_copies_and_cpu_copies_agree(dev):
  a = (np.arange(1001, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32)
  b = dev.alloc(a.nbytes)
  dev.copyin(b, a, via="cp")
  out = np.zeros_like(a)
  assert (dev.copyout(out, b) == a).all()
  out[:] = 0
  assert (dev.copyout(out, b, via="cp") == a).all()
  dev.free(b)


@needs_kernels
def test_two_devices_two_contexts_interleaved():
  """Two Devices on one mock machine: two kgsl contexts, each with its own CP thread and timeline."""
  d1, d2 = rt.open("mock:a630"), rt.open("mock:a630")
  try:
    assert d1.k is d2.k and d1.ctx != d2.ctx
    path = KERNELS / "a630" / "saxpy.bin"
    p1, p2 = d1.load(path), d2.load(path)
    b1 = {b: d1.alloc(a.nbytes) for b, a in _saxpy_args().items()}
    b2 = {b: d2.alloc(a.nbytes) for b, a in _saxpy_args().items()}
    for bufs in (b1, b2):
      for b, a in _saxpy_args().items(): bufs[b].copyin(a)
    v1, v2 = [], []
    for _ in range(50):
      v1.append(p1(grid=4, args=b1))
      v2.append(p2(grid=4, args=b2))
    d1.synchronize(), d2.synchronize()
    assert v1 == list(range(v1[0], v1[0] + 50)) and v2 == list(range(v2[0], v2[0] + 50))
    ref = np.ones(256, np.float32)
    for _ in range(50): ref[:200] += np.float32(0.5) * np.arange(200, dtype=np.float32)
    for bufs in (b1, b2): assert (bufs[1].view(np.float32, 256) == ref).all()
  finally:
    d1.close(), d2.close()


def test_device_strings():
  assert parse_device("mock:a630").vendor == "qcom" and parse_device("mock:a740").targets == ("a740",)
  assert parse_device("qcom").vendor == "qcom" and parse_device("qcom").kind == "qcom"
  assert parse_device("mock:gfx1100").vendor == "amd" and parse_device("mock:sm_90").vendor == "nv"
  with pytest.raises(KernelDriverError, match="one Adreno"): parse_device("mock:a630,a730")
  with pytest.raises(KernelDriverError, match="all AMD"): parse_device("mock:a630,gfx1100")


@pytest.mark.parametrize("target, chip", [("a660", 0x06060001), ("a740", 0x43050A01)])
def test_other_targets_open_and_run(target, chip):
  d = rt.open(f"mock:{target}")
  try:
    assert d.arch == target and d.chip_id == chip and d.gen == ("A6XX" if target[1] == "6" else "A7XX")
    if KERNELS.is_dir():   # a740 runs a730's code (one ISA); the listing names a730
      args = _saxpy_args()
      d.launch(KERNELS / ("a660" if target == "a660" else "a730") / "saxpy.bin", "main", grid=4, args=args)
      assert args[1][5] == np.float32(1 + 0.5 * 5) and args[1][250] == 1
  finally:
    d.close()


def test_real_qcom_device_is_the_os_kernel():
  from gputwin.runtime.kernel import OSKernel, kernel_for
  assert isinstance(kernel_for("qcom"), OSKernel)
  if not Path("/dev/kgsl-3d0").exists():
    with pytest.raises(OSError) as ei: rt.open("qcom")
    assert ei.value.errno == errno.ENOENT


def test_runtime_import_loads_no_mock_and_no_emulator():
  code = ("import gputwin.runtime, gputwin.runtime.qcom, sys;"
          " bad = [m for m in sys.modules if m.startswith(('gputwin.emu', 'gputwin.mock'))]; assert not bad, bad")
  subprocess.run([sys.executable, "-c", code], check=True)


def test_devices_tool_lists_adreno_mocks(capsys, monkeypatch):
  monkeypatch.setenv("COLUMNS", "200")
  from gputwin.runtime.tool import ADRENO_TARGETS, device_rows, devices_main
  rows = device_rows(real=False, mock_targets=ADRENO_TARGETS)
  assert [r["arch"] for r in rows] == list(ADRENO_TARGETS)
  assert [r["gpu_id"] for r in rows] == ["0x06030001", "0x06060001", "0x07030001", "0x43050a01"]
  assert devices_main(["--no-real"]) == 0 and "mock:a730" in capsys.readouterr().out
