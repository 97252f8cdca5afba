"""The NVIDIA HCQ runtime (gputwin.runtime.nv) on the mock RM/UVM driver and virtual GPUs: the PTX kernel suite gives
the emulator's bytes, memory and copies agree with numpy, peer copies between two GPUs, timelines, a GPU fault, and
a stress run of many small launches across channels and GPUs."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import gputwin.runtime as rt
from gputwin import errors
from gputwin.errors import KernelDriverError, LaunchError
from gputwin.isa.ptx import cubin
from gputwin.runtime.hcq import QueueFault
from tests.emu.ptx.cases import CASES, FAULTS
from tests.emu.ptx.conftest import needs_cuda, ptx as suite_ptx  # noqa: F401 - a fixture: the suite's PTX

STORE = """.version 8.0
.target sm_80
.address_size 64
.visible .entry store(.param .u64 out, .param .u32 v)
{
  .reg .u32 %r<4>; .reg .u64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [v];
  mov.u32 %r2, %tid.x;
  add.u32 %r3, %r1, %r2;
  mul.wide.u32 %rd2, %r2, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
.visible .entry wild(.param .u64 out)
{
  .reg .u64 %rd<2>;
  mov.u64 %rd1, 0x7000000000;
  st.global.u32 [%rd1], 1;
  ret;
}
"""


@pytest.fixture(scope="module")
def devs():
  """One open device per target (opening costs a few hundred ioctls)."""
  out = {a: rt.open(f"mock:{a}") for a in ("sm_90", "sm_80")}
  yield out
  for d in out.values(): d.close()


def outputs(args) -> list[np.ndarray]: return [a for a in args if isinstance(a, np.ndarray)]


PARAMS = [pytest.param(c, a, id=f"{c.id}-{a}") for c in CASES for a in c.archs]


@needs_cuda
@pytest.mark.parametrize("case,arch", PARAMS)
def test_kernel_suite_matches_the_emulator(case, arch, suite_ptx, devs):
  """Every suite kernel through rt.open("mock:sm_XX").launch gives gputwin.emu.launch's bytes (the virtual GPU runs
  the emulator unchecked, so the reference does too: the same schedule, also for atomics)."""
  from gputwin.emu import launch
  a = case.build(case.rng())
  b = copy.deepcopy(a)
  launch(suite_ptx[case.file, arch], case.kernel, grid=case.grid, block=case.block, args=a, arch=arch,
         shared_bytes=case.shared_bytes, checks=False)
  st = devs[arch].launch(suite_ptx[case.file, arch], case.kernel, grid=case.grid, block=case.block, args=b,
                         shared_bytes=case.shared_bytes)
  assert st.kernel == case.kernel and st.arch == arch and st.workgroups > 0
  for i, (x, y) in enumerate(zip(outputs(a), outputs(b))):
    assert x.tobytes() == y.tobytes(), f"{case.id} {arch}: array {i} differs from gputwin.emu.launch"


@needs_cuda
def test_a_ptxas_cubin_runs_on_the_mock_too(suite_ptx, devs):
  """The program image ptxas built (SASS + the PTX section) is what a real GPU gets; the mock runs its PTX."""
  case = next(c for c in CASES if c.id == "ew_f32")
  text = suite_ptx[case.file, "sm_90"].read_text()
  a, b = case.build(case.rng()), case.build(case.rng())
  devs["sm_90"].launch(cubin.build(text, "sm_90", ptxas=True), case.kernel, grid=case.grid, block=case.block, args=a)
  devs["sm_90"].launch(text, case.kernel, grid=case.grid, block=case.block, args=b)
  assert all(x.tobytes() == y.tobytes() for x, y in zip(outputs(a), outputs(b)))


def test_program_call_with_buffers_and_a_wrong_target(devs):
  d = devs["sm_90"]
  prg = d.load(STORE.replace("sm_80", "sm_90"))
  out = d.alloc(4096)
  d.compute.wait(prg("store", out, np.uint32(7), grid=1, block=64))
  assert out.view(np.uint32, 64).tolist() == list(range(7, 71))
  with pytest.raises(LaunchError, match="takes 2 arguments"): prg("store", out, grid=1, block=1)
  with pytest.raises(LaunchError, match="no kernel 'nope'"): prg("nope", out, 1, grid=1, block=1)
  with pytest.raises(LaunchError, match="is for sm_90"): devs["sm_80"].load(cubin.build(STORE, "sm_90", ptxas=False))
  d.free(out)


@pytest.mark.parametrize("via", ["cpu", "dma"])
def test_memory_and_copies_agree_with_numpy(devs, via):
  d, rng = devs["sm_90"], np.random.default_rng(1)
  a = rng.standard_normal(50_000).astype(np.float32)
  buf, host = d.alloc(a.nbytes), d.alloc(a.nbytes, host=True)
  d.copyin(buf, a, via=via)
  assert np.array_equal(d.copyout(np.empty_like(a), buf, via=via), a)
  d.copy_queue.wait(d.copy(host, buf, 4000, dst_offset=400, src_offset=800))
  assert np.array_equal(host.view(np.float32, 1000, 400), a[200:1200])
  d.copy_queue.wait(d.fill(buf, 0x3F800000, 4096))
  assert np.array_equal(buf.view(np.float32, 1024), np.ones(1024, np.float32))
  assert np.array_equal(buf.view(np.float32, 10, 4096), a[1024:1034])
  with pytest.raises(errors.GputwinError, match="exceeds"): d.copy(host, buf, host.size + 1)
  d.free(buf)
  d.free(host)


def test_two_gpus_peer_copy_and_launch():
  """Two GPUs of one machine (/dev/nvidia0, /dev/nvidia1): copies either way by either copy engine, and a kernel on
  GPU 1 reading a buffer of GPU 0."""
  with rt.open("mock:sm_90,sm_80:0") as g0, rt.open("mock:sm_90,sm_80:1") as g1:
    assert (g0.arch, g1.arch) == ("sm_90", "sm_80") and g0.k is g1.k
    a = np.arange(10_000, dtype=np.int32)
    x, y, z = g0.alloc(a.nbytes), g1.alloc(a.nbytes), g0.alloc(a.nbytes)
    x.copyin(a)
    g0.copy_queue.wait(g0.copy(y, x))         # GPU 0's engine writes GPU 1's memory
    assert np.array_equal(y.view(np.int32, a.size), a)
    g1.copy_queue.wait(g1.copy(z, y))         # and back with GPU 1's
    assert np.array_equal(z.view(np.int32, a.size), a)
    prg = g1.load(STORE)
    g1.compute.wait(prg("store", x, np.uint32(5), grid=1, block=32))   # x lives on GPU 0
    assert x.view(np.int32, 32).tolist() == list(range(5, 37))


def test_timelines_are_monotonic(devs):
  d = devs["sm_80"]
  buf = d.alloc(1 << 16)
  q, seen, vals = d.copy_queue, [], []
  for i in range(40): vals.append(d.fill(buf, i, 1 << 16))
  while q.signal.value < vals[-1]: seen.append(q.signal.value)
  q.wait()
  seen.append(q.signal.value)
  assert vals == list(range(vals[0], vals[0] + 40)) and all(a <= b for a, b in zip(seen, seen[1:]))
  assert seen[-1] == q.timeline and buf.view(np.uint32, 4).tolist() == [39] * 4
  d.free(buf)


def test_gpu_time_advances_and_brackets_a_launch(devs):
  """Device.timestamp reads the usermode page's PTIMER; a profiled launch's semaphore timestamps lie between two reads
  taken before and after it (all in the GPU's ns clock)."""
  d = devs["sm_90"]
  t0 = d.timestamp()
  out = np.zeros(64, np.int32)
  r = d.launch(STORE, "store", grid=1, block=64, args=[out, np.uint32(1)])
  t1 = d.timestamp()
  a, b = d.load(STORE).timestamps()
  assert 0 < t0 <= a <= b <= t1 and r.gpu_seconds == pytest.approx((b - a) / 1e9)
  assert out.tolist() == list(range(1, 65))


def test_a_wild_kernel_faults_its_channel_and_a_new_device_still_runs():
  dev = rt.open("mock:sm_90")
  prg = dev.load(STORE.replace("sm_80", "sm_90"))
  out = dev.alloc(4096)
  with pytest.raises(QueueFault) as e:
    dev.compute.wait(prg("wild", out, grid=1, block=32))
  f = e.value
  assert f.kernel == "wild" and f.va == 0x7000000000 and "wild" in str(f) and "0x7000000000" in str(f)
  assert isinstance(f.error, errors.EmuFault) and "GPFIFO entry" in str(f) and "mock:sm_90" in str(f)
  with pytest.raises(QueueFault): prg("store", out, np.uint32(1), grid=1, block=32)   # the channel stays stopped
  dev.close()
  with rt.open("mock:sm_90") as d2:
    p2, o2 = d2.load(STORE.replace("sm_80", "sm_90")), d2.alloc(4096)
    d2.compute.wait(p2("store", o2, np.uint32(3), grid=1, block=32))
    assert o2.view(np.uint32, 32).tolist() == list(range(3, 35))


@needs_cuda
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.kernel)
def test_suite_faults_name_the_kernel(fault, suite_ptx):
  with rt.open("mock:sm_90") as dev:
    with pytest.raises(QueueFault) as e:
      dev.launch(suite_ptx[fault.file, "sm_90"], fault.kernel, grid=fault.grid, block=fault.block, args=fault.args())
    assert fault.kernel in str(e.value) and isinstance(e.value.error, getattr(errors, fault.error))


def test_device_strings():
  assert type(rt.open("mock:gfx1100")).__module__ == "gputwin.runtime.hcq"
  with pytest.raises(KernelDriverError, match="all AMD"): rt.open("mock:gfx1100,sm_90")
  with pytest.raises(KernelDriverError, match="no GPU 2"): rt.open("mock:sm_90,sm_80:2")


def _stress(n: int):
  """n tiny launches round-robin over 2 channels on each of 2 GPUs, each writing its own 32-word slot: every slot
  checked, every channel's timeline values strictly increasing and complete, no channel left behind."""
  from gputwin.runtime.kernel import kernel_for
  k = kernel_for("mock:sm_90,sm_90")
  before = len(k.channels())
  with rt.open("mock:sm_90,sm_90:0") as g0, rt.open("mock:sm_90,sm_90:1") as g1:
    plan = []
    for g in (g0, g1):
      prg = g.load(STORE.replace("sm_80", "sm_90"))
      plan += [(prg, g.alloc(-(-n // 4) * 128), q) for q in (g.compute, g.queue("compute"))]
    vals = [[] for _ in plan]
    for i in range(n):
      prg, out, q = plan[i % 4]
      vals[i % 4].append(prg("store", out.va + 128 * (i // 4), np.uint32(i), grid=1, block=32, queue=q))
    for (prg, out, q), v in zip(plan, vals):
      q.wait()
      assert v == list(range(v[0], v[0] + len(v))) and q.signal.value == q.timeline == v[-1]
    for j, (prg, out, q) in enumerate(plan):
      want = [list(range(i, i + 32)) for i in range(j, n, 4)]
      assert out.view(np.uint32, 32 * len(want)).reshape(-1, 32).tolist() == want, f"channel {j}"
  assert len(k.channels()) == before


def test_stress_300_launches():
  _stress(300)


@pytest.mark.slow
def test_stress_10000_launches():
  _stress(10_000)


def test_devices_tool_lists_nvidia_gpus(capsys, monkeypatch):
  """`gputwin devices` reads NVIDIA GPUs through RM like the runtime: CARD_INFO, GR info (SM version), the name."""
  monkeypatch.setenv("COLUMNS", "200")
  from gputwin.runtime.tool import device_rows, devices_main
  rows = device_rows(real=False, mock_targets=("sm_90", "sm_90,sm_80"))
  assert [(r["device"], r["arch"]) for r in rows] == [("mock:sm_90", "sm_90"), ("mock:sm_90,sm_80:0", "sm_90"),
                                                      ("mock:sm_90,sm_80:1", "sm_80")]
  assert all(r["kind"] == "mock" and r["cus"] > 0 and r["wave"] == 32 and "NVIDIA" in r["name"] for r in rows)
  assert devices_main(["--no-real", "--mock", "sm_80"]) == 0 and "sm_80" in capsys.readouterr().out
