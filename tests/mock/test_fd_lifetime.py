"""Issue 22: mock machines give their file descriptors back. GPU memory is a memfd per buffer (gputwin.abi.hostmem's
HostBuffer); a machine dropped without freeing its buffers (a kgsl test rig: 15 tests held 1,300 fds) kept every one
until the process ended, and MockNV kept a freed buffer's memfd for the second its pages stay mapped (200 opens of a
mock NVIDIA device: 1,800 fds, past the usual limit of 1,024). Oracle: the count of /proc/self/fd."""
import ctypes
import gc
import os

import numpy as np
import pytest

import gputwin.runtime as rt
from gputwin.abi import kgsl as K
from gputwin.abi.hostmem import HostBuffer
from gputwin.mock.adreno import machine

N = 200


def fds() -> int:
  gc.collect()
  return len(os.listdir("/proc/self/fd"))


def _flat(make):
  make()  # first use: imports, shared machines, caches
  before = fds()
  for _ in range(N): make()
  assert fds() - before <= 4, f"{fds() - before} fds more after {N} rounds"


def test_dropped_kgsl_machines_leave_no_fds():
  """A machine with a live allocation, dropped without closing anything."""
  def make():
    k = machine("a630", sync=True)
    fd = k.open("/dev/kgsl-3d0")
    a = K.kgsl_gpuobj_alloc(size=4096)
    k.ioctl(fd, K.IOCTL_NUMBERS["GPUOBJ_ALLOC"], a)
  _flat(make)


@pytest.mark.parametrize("device", ["mock:sm_90", "mock:gfx1100", "mock:a630"])
def test_opening_and_closing_devices_leaves_no_fds(device):
  def make():
    with rt.open(device) as dev:
      dev.alloc(4096) if hasattr(dev, "alloc") else None
  _flat(make)


def test_a_dropped_buffer_keeps_its_pages_while_a_view_lives():
  """The memfd goes with the HostBuffer, the pages with the last view of them: an array over a dropped buffer's
  view still reads and writes (no SIGSEGV), and the mapping is gone once the array is."""
  before = fds()
  hb = HostBuffer(1 << 16)
  a = np.frombuffer(hb.view, np.uint32)
  a[:] = np.arange(a.size)
  addr = hb.addr
  del hb
  assert fds() == before
  a[7] += 1
  assert a[7] == 8 and ctypes.c_uint32.from_address(addr + 28).value == 8
  span = f"{addr:x}-{addr + (1 << 16):x} "
  assert span in open("/proc/self/maps").read()
  del a
  gc.collect()
  assert span not in open("/proc/self/maps").read()


def test_close_is_explicit_and_idempotent():
  before = fds()
  hb = HostBuffer(4096)
  hb.close_fd()
  assert hb.fd == -1 and fds() == before and hb.view[0] == 0  # pages still mapped
  hb.close()
  hb.close()
  assert fds() == before
