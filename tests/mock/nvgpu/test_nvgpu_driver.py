"""The virtual GPU behind the real mock driver (gputwin.mock.nv.MockNV) and the NVIDIA runtime: attach, a launch of
nvcc's PTX through RM/UVM channels byte-identical to gputwin.emu.launch, a copy-engine copy, and a faulting kernel
that errors its channel only (skipped until the driver exists)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gputwin.mock.nv.driver")
from test_nvgpu_compute import NVCC, compiled  # noqa: E402

import gputwin.runtime as rt  # noqa: E402
from gputwin.emu import launch as emu_launch  # noqa: E402
from gputwin.errors import GPUFault, GPUPageFault  # noqa: E402
from gputwin.mock.nv import MockNV  # noqa: E402
from gputwin.mock.nvgpu import VirtualNVGPU, attach  # noqa: E402


def test_attach_is_idempotent_and_sees_the_drivers_channels():
  k = MockNV(["sm_90", "sm_80"])
  g = attach(k)
  assert isinstance(g, VirtualNVGPU) and attach(k) is g and k.channels() == []


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_runtime_launch_matches_the_emulator(arch):
  ptx, _ = compiled(arch)
  dev = rt.open(f"mock:{arch}")
  n = 777
  x, y = np.linspace(-3, 3, n, dtype=np.float32), np.arange(n, dtype=np.float32)
  out, ref = np.zeros(n, np.float32), np.zeros(n, np.float32)
  dev.launch(ptx, "saxpy", grid=(4, 1, 1), block=(256, 1, 1), args=[out, x, y, np.float32(0.5), np.int32(n)])
  emu_launch(ptx, "saxpy", grid=(4, 1, 1), block=(256, 1, 1), args=[ref, x, y, np.float32(0.5), np.int32(n)], arch=arch)
  assert out.tobytes() == ref.tobytes()
  gx, bx, m = 5, 32, 5 * 32
  out, ref = np.zeros(m, np.uint32), np.zeros(m, np.uint32)
  dev.launch(ptx, "reverse_dyn", grid=(gx, 1, 1), block=(bx, 1, 1), args=[out, np.int32(m)], shared_bytes=4 * bx)
  emu_launch(ptx, "reverse_dyn", grid=(gx, 1, 1), block=(bx, 1, 1), args=[ref, np.int32(m)], arch=arch,
             shared_bytes=4 * bx)
  assert out.tobytes() == ref.tobytes()


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_a_faulting_kernel_errors_its_channel_and_the_host_survives():
  ptx, _ = compiled("sm_90")
  dev = rt.open("mock:sm_90")
  n = 64
  k = rt.kernel.kernel_for("mock:sm_90")   # the machine is shared by every mock:sm_90 device of the session
  before = {id(ch) for ch in k.channels() if ch.error}
  with pytest.raises(GPUFault, match="kernel saxpy.*page fault") as e:
    dev.launch(ptx, "saxpy", grid=(1, 1, 1), block=(64, 1, 1),
               args=[0x9000_0000, np.ones(n, np.float32), np.ones(n, np.float32), np.float32(1), np.int32(n)])
  bad = [ch for ch in k.channels() if ch.error and id(ch) not in before]
  assert len(bad) == 1 and "QMD V03_00" in bad[0].error and "kernel saxpy" in bad[0].error, bad
  err = k.gpu_error(0)
  assert isinstance(err, GPUPageFault) and err.va == 0x9000_0000 and "0x90000000" in str(e.value)
  dev2 = rt.open("mock:sm_90")     # a new device (new channels) on the same machine works
  out = np.zeros(n, np.float32)
  dev2.launch(ptx, "saxpy", grid=(1, 1, 1), block=(64, 1, 1),
              args=[out, np.ones(n, np.float32), np.ones(n, np.float32), np.float32(2), np.int32(n)])
  assert (out == 3).all()


def test_pushbuffer_fuzz_through_the_driver():
  """Mutated and random pushbuffers on fresh RM channels of a runtime device: a bad one stops only its channel, the
  driver writes its error notifier (the runtime raises QueueFault), and the device's other channels keep working."""
  import random
  from gputwin.abi import nvpush as NP
  from gputwin.runtime.hcq import QueueFault, QueueTimeout
  from test_nvgpu_fuzz import mutate

  dev = rt.open("mock:sm_90")
  k = rt.kernel.kernel_for("mock:sm_90")
  buf, dst = dev.alloc(1 << 20), dev.alloc(64)
  H, D = NP.nvclass(dev.classes["gpfifo"]), NP.nvclass(dev.classes["copy"])
  s, a, b = buf.va, buf.va + 4096, buf.va + 8192
  valid = {"compute": NP.pb_method(0, "SEM_ADDR_LO", s, s >> 32, 5, 0, H.pack("SEM_EXECUTE", OPERATION="RELEASE"),
                                   cls=dev.classes["gpfifo"]),
           "copy": NP.pb_method(4, "OFFSET_IN_UPPER", a >> 32, a & 0xFFFFFFFF, b >> 32, b & 0xFFFFFFFF, 0, 0, 256, 1,
                                cls=dev.classes["copy"]) +
           NP.pb_method(4, "LAUNCH_DMA", D.pack("LAUNCH_DMA", DATA_TRANSFER_TYPE="PIPELINED", SRC_MEMORY_LAYOUT="PITCH",
                                                DST_MEMORY_LAYOUT="PITCH"), cls=dev.classes["copy"])}
  outcomes = {"ok": 0, "fault": 0, "blocked": 0}

  class _Scratch:   # what mutate() needs of a channel: random addresses inside the scratch buffer
    base, size = buf.va, 1 << 20

  for seed in range(24):
    rng = random.Random(seed)
    kind = ("compute", "copy")[seed % 2]
    q = dev.queue(kind)
    words = [rng.getrandbits(32) for _ in range(rng.randint(1, 12))] if seed % 5 == 0 else \
      mutate(rng, valid[kind], _Scratch)
    before = {id(c) for c in k.channels() if c.error}
    try:
      q.wait(q.submit(words, f"fuzz {seed}"), timeout=0.3)
      outcomes["ok"] += 1
    except QueueTimeout:
      outcomes["blocked"] += 1                                         # an acquire that never holds
    except QueueFault as e:
      outcomes["fault"] += 1
      new = [c for c in k.channels() if c.error and id(c) not in before]
      assert len(new) == 1 and new[0].handle == q.channel, [c.error for c in new]
      assert q.note.any() and "stopped by the GPU" in str(e)           # the RC error notifier was written
    dev.queues.remove(q)
    q.destroy()
    dev.copyin(buf, np.arange(16, dtype=np.uint32) + seed)   # the device's own channels still work
    dev.copy(dst, buf, 64)
    dev.synchronize(timeout=5)
    assert (dev.copyout(np.zeros(16, np.uint32), dst) == np.arange(16) + seed).all()
  assert outcomes["fault"] >= 5, outcomes
