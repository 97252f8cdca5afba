"""The HCQ runtime on mock GPUs: the same calls a real /dev/kfd gets, PM4/SDMA executed by the virtual GPU, kernels
on the emulator. Oracles: gputwin.emu.launch (direct emulator launch, not through PM4), numpy."""
import threading, time
import numpy as np
import pytest
import gputwin.runtime as rt
from gputwin.errors import LaunchError
from gputwin.emu import launch as emu_launch
from gputwin.abi import pm4 as P
from gputwin.runtime.kernel import kernel_for
from tests.emu.cases import CASES
from tests.runtime.conftest import TARGETS


def _mock_mappings() -> int:
  """Host mappings of mock GPU memory in this process (memfds named kfd-bo-*, kfd-doorbells-*, ...)."""
  with open("/proc/self/maps") as f: return sum("kfd-" in line or "amdgpu-" in line for line in f)


def _idle(k, before: tuple[int, int], timeout=2.0):
  """Every device of the machine closed: the kfd process is gone (so are its BOs), no more mappings of GPU memory
  and no more threads than before the devices were opened."""
  t = time.monotonic() + timeout
  while time.monotonic() < t and (threading.active_count() > before[0] or k.proc is not None): time.sleep(0.01)
  return k.proc is None and threading.active_count() <= before[0] and _mock_mappings() <= before[1]


def test_discovery_reads_the_topology():
  devs = rt.devices(kernel_for("mock:gfx1100,gfx942"))
  assert [d.arch for d in devs] == ["gfx1100", "gfx942"] and all(d.gpu_id for d in devs)
  with rt.open("mock:gfx1100,gfx942:1") as d:
    assert d.arch == "gfx942" and d.props["simd_count"] == 1216 and "gfx942" in str(d)


def test_one_gpu_opened_twice_shares_its_vm():
  """KFD binds one DRM file per GPU and process (ACQUIRE_VM with another file is EBUSY): both Devices share it."""
  with rt.open("mock:gfx1200") as a, rt.open("mock:gfx1200") as b:
    x = a.alloc(256)
    x.copyin(np.arange(64, dtype=np.int32))
    y = b.alloc(256)
    b.sdma.wait(b.copy(y, x))
    np.testing.assert_array_equal(y.view(np.int32, 64), np.arange(64))


@pytest.mark.parametrize("arch", TARGETS)
def test_cpu_and_sdma_copies(arch):
  with rt.open(f"mock:{arch}") as dev:
    a = np.random.default_rng(0).integers(0, 2**31, 3000, dtype=np.int32)
    b, c = dev.alloc(a.nbytes), dev.alloc(a.nbytes, host=True)
    dev.copyin(b, a, via="sdma")
    dev.sdma.wait(dev.copy(c, b))
    np.testing.assert_array_equal(c.view(np.int32, a.size), a)                          # through the CPU mapping
    np.testing.assert_array_equal(dev.copyout(np.zeros_like(a), b, via="sdma"), a)
    dev.sdma.wait(dev.fill(c, 0xDEADBEEF, 64))
    assert (c.view(np.uint32, 16) == 0xDEADBEEF).all() and c.view(np.int32, 17, 0)[16] == a[16]


def test_copies_between_two_gpus():
  before = threading.active_count(), _mock_mappings()
  with rt.open("mock:gfx1100,gfx942:0") as d0, rt.open("mock:gfx1100,gfx942:1") as d1:
    a = np.arange(5000, dtype=np.float32)
    x, y = d0.alloc(a.nbytes), d1.alloc(a.nbytes)
    x.copyin(a)
    d0.sdma.wait(d0.copy(y, x))                 # gfx1100's SDMA writes gfx942's VRAM (peer-mapped)
    np.testing.assert_array_equal(y.view(np.float32, a.size), a)
    y.view(np.float32)[:] *= 2
    d1.sdma.wait(d1.copy(x, y))
    np.testing.assert_array_equal(x.view(np.float32, a.size), 2 * a)
  assert _idle(kernel_for("mock:gfx1100,gfx942"), before)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "collatz" else n
                                  for n in sorted(CASES)])
def test_suite_kernels_match_the_direct_emulator(clang_co, arch, name):
  """Each clang-22 kernel through PM4 + DISPATCH_DIRECT gives the same bytes as gputwin.emu.launch."""
  co = clang_co(arch, "suite")
  c_rt, c_emu = CASES[name](), CASES[name]()
  with rt.open(f"mock:{arch}") as dev:
    r = dev.launch(co, name, grid=c_rt["grid"], block=c_rt["block"], args=c_rt["args"])
  emu_launch(co, name, grid=c_emu["grid"], block=c_emu["block"], args=c_emu["args"])
  for a, b in zip(c_rt["args"], c_emu["args"]):
    if isinstance(a, np.ndarray): assert a.tobytes() == b.tobytes(), f"{arch} {name}: PM4 path differs from emu"
  assert r.workgroups == np.prod(np.atleast_1d(c_rt["grid"])) and r.gpu_seconds >= 0


def test_launch_reports_argument_errors_like_emu(clang_co):
  with rt.open("mock:gfx1100") as dev:
    co = clang_co("gfx1100")
    with pytest.raises(LaunchError, match="takes 3 arguments"): dev.launch(co, "add1", grid=1, block=64, args=[])
    with pytest.raises(LaunchError, match="no kernel 'nope'"): dev.launch(co, "nope", grid=1, block=64, args=[])
    with pytest.raises(LaunchError, match="is int\\*; got a float64 array"):
      dev.launch(co, "add1", grid=1, block=64, args=[np.zeros(64), np.zeros(64, np.int32), 1])


def test_pm4_packets_on_a_raw_queue():
  """WRITE_DATA, an INDIRECT_BUFFER, RELEASE_MEM (64-bit data and GPU clock), NOP/ACQUIRE_MEM/EVENT_WRITE, and a
  WAIT_REG_MEM that holds one queue until another queue's write releases it."""
  with rt.open("mock:gfx1200") as dev:
    m = dev.alloc(4096, host=True)
    ib = dev.alloc(4096, host=True)
    ibw = P.write_data(m.va + 16, 7, 8, 9) + P.nop(3)
    ib.copyin(np.array(ibw, np.uint32))
    q2 = dev.queue("compute")
    w = P.acquire_mem() + P.event_write(P.CS_PARTIAL_FLUSH) + P.write_data(m.va, 0x11, 0x22) + \
      P.indirect_buffer(ib.va, len(ibw)) + P.release_mem(m.va + 32, 0x1_2345_6789) + \
      P.release_mem(m.va + 40, data_sel=P.DATA_SEL_GPU_CLOCK)
    t0 = dev.timestamp()
    dev.compute.wait(dev.compute.submit(w, "test packets"))
    v = m.view(np.uint32, 12)
    assert list(v[:2]) == [0x11, 0x22] and list(v[4:7]) == [7, 8, 9] and m.view(np.uint64, 1, 32)[0] == 0x1_2345_6789
    assert m.view(np.uint64, 1, 40)[0] >= t0
    held = dev.compute.submit(P.wait_reg_mem(m.va + 64, 5, func=3) + P.write_data(m.va + 68, 1), "waiter")
    time.sleep(0.05)
    assert m.view(np.uint32, 1, 68)[0] == 0                  # still waiting
    q2.wait(q2.submit(P.write_data(m.va + 64, 5), "release"))
    dev.compute.wait(held)
    assert m.view(np.uint32, 1, 68)[0] == 1


def test_sdma_packets_on_a_raw_queue():
  with rt.open("mock:gfx942") as dev:
    m = dev.alloc(8192, host=True)
    m.copyin(np.arange(256, dtype=np.uint32))
    w = P.sdma_copy(m.va + 4096, m.va, 1024) + P.sdma_fence(m.va + 6000, 0xABCD) + P.sdma_timestamp(m.va + 6008) + \
      P.sdma_fill(m.va + 7000 // 8 * 8, 0x01020304, 32) + P.sdma_poll(m.va + 6000, 0xABCD, func=3)
    dev.sdma.wait(dev.sdma.submit(w, "test SDMA"))
    np.testing.assert_array_equal(m.view(np.uint32, 256, 4096), np.arange(256))
    assert m.view(np.uint32, 1, 6000)[0] == 0xABCD and m.view(np.uint64, 1, 6008)[0] > 0
    assert (m.view(np.uint32, 8, 7000 // 8 * 8) == 0x01020304).all()


@pytest.mark.parametrize("kind", ["compute", "sdma"])
def test_malformed_packet_stops_only_that_queue(kind):
  with rt.open("mock:gfx1100") as dev:
    bad, good = dev.queue(kind), dev.queue(kind)
    m = dev.alloc(4096, host=True)
    junk = P.pkt(0x99, 1, 2) if kind == "compute" else [0x7F, 0, 0]
    fill = (lambda: P.write_data(m.va, 3)) if kind == "compute" else (lambda: P.sdma_fence(m.va, 3))
    bad.submit(fill(), "fine")
    v = bad.submit(junk, "the junk packet")
    with pytest.raises(rt.QueueFault, match=rf"{kind} queue {bad.queue_id} .*ring offset 0x[0-9a-f]+ .*the junk"):
      bad.wait(v, timeout=10)
    with pytest.raises(rt.QueueFault): bad.submit(fill(), "after")      # the queue stays dead
    good.wait(good.submit(fill(), "other queue"))                         # others keep working
    assert m.view(np.uint32, 1)[0] == 3


def test_wild_wptr_errors_the_queue():
  with rt.open("mock:gfx1100") as dev:
    q = dev.queue("compute")
    q.timeline += 1
    q.wptr[0] = int(q.rptr[0]) + (1 << 40)           # a doorbell far past anything the ring holds
    q.doorbell[0] = int(q.wptr[0])
    with pytest.raises(rt.QueueFault, match="compute queue"): q.wait(timeout=10)
    dev.compute.wait(dev.compute.submit(P.nop(2), "still works"))   # another queue of the same GPU


def test_faulting_kernel_names_device_queue_and_launch(clang_co):
  with rt.open("mock:gfx942") as dev:
    out = np.zeros(64, np.int32)
    with pytest.raises(rt.QueueFault, match=r"gfx942.*compute queue 0 .*ring offset .*kernel wild.*0x7000000"):
      dev.launch(clang_co("gfx942"), "wild", grid=1, block=64, args=[out, 0x7000_0000])
    q = dev.queue("compute")                                            # a fresh queue on the same GPU works
    prg, a = dev.load(clang_co("gfx942")), np.arange(64, dtype=np.int32)
    bi, bo = dev.alloc(256), dev.alloc(256)
    bi.copyin(a)
    q.wait(prg("add1", bo, bi, 1, grid=1, block=64, queue=q))
    np.testing.assert_array_equal(bo.view(np.int32, 64), a + 1)


def _stress(clang_co, launches: int, copies: int):
  """launches small kernels and copies spread over two queues on each of two GPUs, every result checked, timeline
  values strictly increasing, and nothing left behind."""
  before = threading.active_count(), _mock_mappings()
  k = kernel_for("mock:gfx1100,gfx942")
  devs = [rt.open("mock:gfx1100,gfx942:0"), rt.open("mock:gfx1100,gfx942:1")]
  try:
    work = []
    for d in devs:
      prg = d.load(clang_co(d.arch))
      qs = [d.compute, d.queue("compute")]
      src = d.alloc(4 * 64)
      src.copyin(np.arange(64, dtype=np.int32))
      outs = [d.alloc(4 * 64) for _ in range(8)]
      work.append((d, prg, qs, src, outs))
    last = {}

    def latest(g, b, upto):   # value the b-th output of GPU g must hold: its latest launch (in-order on one queue)
      ks = [i for i in range(upto) if i % 2 == g and (i // 2) % 8 == b]
      return np.arange(64) + ks[-1] if ks else None

    for i in range(launches):
      d, prg, qs, src, outs = work[i % 2]
      j = i // 2                                 # the j-th launch on this GPU: queue j % 2, output j % 8
      q, o = qs[j % 2], outs[j % 8]
      v = prg("add1", o, src, i, grid=1, block=64, queue=q)
      assert v > last.get(q, 0)                 # timeline values strictly increase
      last[q] = v
      if i % 256 == 255 or i == launches - 1:
        for g, (_, _, qs2, _, outs2) in enumerate(work):
          for qq in qs2:
            qq.wait()
            assert qq.signal.value == qq.timeline
          for b, ob in enumerate(outs2):
            if (want := latest(g, b, i + 1)) is not None: np.testing.assert_array_equal(ob.view(np.int32, 64), want)
    nbufs = [len(d.buffers) for d in devs]
    for i in range(copies):
      x, y = (work[0][4][1], work[1][4][1]) if i % 2 else (work[1][4][1], work[0][4][1])
      x.copyin(np.full(64, i, np.int32))
      dev = devs[i % 2]
      dev.sdma.wait(dev.copy(y, x))
      assert (y.view(np.int32, 64) == i).all()
    a = np.arange(256, dtype=np.int32)
    for d in devs: d.launch(clang_co(d.arch), "add1", grid=4, block=64, args=[a, a.copy(), 1])   # temporaries freed
    assert [len(d.buffers) for d in devs] == nbufs and (a == np.arange(256) + 2).all()
  finally:
    for d in devs: d.close()
  assert _idle(k, before), "CP threads or the kfd process outlived the devices"


def test_stress_ci_sized(clang_co):
  _stress(clang_co, 200, 40)


@pytest.mark.slow
def test_stress_10000_launches_1000_copies(clang_co):
  _stress(clang_co, 10_000, 1_000)


def test_devices_tool_lists_every_mock_target(capsys, monkeypatch):
  monkeypatch.setenv("COLUMNS", "200")
  from gputwin.runtime.tool import device_rows, devices_main
  rows = [r for r in device_rows(real=False) if r["kind"] == "mock"]
  assert [r["arch"] for r in rows] == list(TARGETS) + ["sm_80", "sm_90"] and rows[2]["xcc"] == 8 and rows[0]["wave"] == 32
  assert devices_main(["--no-real", "--mock", "gfx942"]) == 0 and "gfx942" in capsys.readouterr().out


def test_profiling_timestamps_and_host_threads(clang_co):
  """Two host threads launch on their own queues at once; RELEASE_MEM GPU-clock timestamps bracket a launch."""
  with rt.open("mock:gfx1100") as dev:
    prg, qs = dev.load(clang_co("gfx1100")), [dev.compute, dev.queue("compute")]
    src = dev.alloc(256)
    src.copyin(np.arange(64, dtype=np.int32))
    outs, errs = [dev.alloc(256) for _ in qs], []

    def run(i):
      try:
        for n in range(30): qs[i].wait(prg("add1", outs[i], src, 100 * i + n, grid=1, block=64, queue=qs[i]))
      except Exception as e: errs.append(e)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert not errs
    for i, o in enumerate(outs): np.testing.assert_array_equal(o.view(np.int32, 64), np.arange(64) + 100 * i + 29)
    t0 = dev.timestamp()
    dev.compute.wait(prg("add1", outs[0], src, 0, grid=1, block=64, profile=True))
    start, end = prg.timestamps()
    assert t0 <= start <= end <= dev.timestamp()


class SeamOnly:
  """The Kernel protocol and nothing else: proves the runtime reaches the (mock) driver only through the seam."""
  CALLS = ("open", "close", "ioctl", "mmap", "munmap", "read_text", "listdir", "exists", "poll", "gpu_error")

  def __init__(self, k): self._k, self.calls = k, {}
  def __getattr__(self, name):
    if name not in self.CALLS: raise AttributeError(f"the runtime used {name!r}, which is not part of the kernel seam")
    self.calls[name] = self.calls.get(name, 0) + 1
    return getattr(self._k, name)


def test_runtime_uses_only_the_seam_and_runs_on_a_synchronous_machine(clang_co, monkeypatch):
  """A private machine in synchronous mode (no CP thread: packets run inside WAIT_EVENTS), seen through SeamOnly."""
  from gputwin.mock.amdgpu.gpu import attach
  from gputwin.mock.kfd.driver import MockKernel
  import gputwin.runtime.hcq as hcq
  k = MockKernel(["gfx1200", "gfx950"], sync=True)
  attach(k)
  seam = SeamOnly(k)
  monkeypatch.setattr(hcq, "kernel_for", lambda device: seam)
  threads = set(threading.enumerate())  # compare identities: a thread of an earlier test may still be exiting
  with rt.open("mock:gfx1200,gfx950:1") as dev:
    assert dev.arch == "gfx950" and not set(threading.enumerate()) - threads, "synchronous mode started a thread"
    a = np.arange(128, dtype=np.int32)
    out = np.zeros_like(a)
    dev.launch(clang_co("gfx950"), "add1", grid=2, block=64, args=[out, a, 7])
    np.testing.assert_array_equal(out, a + 7)
    b = dev.alloc(a.nbytes)
    dev.copyin(b, a, via="sdma")
    np.testing.assert_array_equal(dev.copyout(np.zeros_like(a), b, via="sdma"), a)
  assert k.proc is None and {"open", "ioctl", "mmap", "munmap", "read_text", "listdir"} <= seam.calls.keys()
