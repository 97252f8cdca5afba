"""Guest memory: sparse regions, vectorised typed gather/scatter across regions, page faults, VA reuse."""
import numpy as np
import pytest

from gputwin.emu.memory import GuestMemory, Window
from gputwin.errors import GPUPageFault


def test_gather_scatter_across_regions_and_sizes():
  m = GuestMemory("gfx1100")
  a, b = m.alloc(64), m.alloc(64)
  m.write_bytes(a, np.arange(64, dtype=np.uint8).tobytes())
  m.write_bytes(b, np.arange(64, 128, dtype=np.uint8).tobytes())
  addr = np.array([a, b + 4, a + 1, b + 61], np.uint64)  # aligned and unaligned, two regions
  assert m.gather(addr, 1).tolist() == [0, 68, 1, 125]
  want = [int.from_bytes(bytes(range(o, o + 2)), "little") for o in (0, 68, 1, 125)]
  assert m.gather(addr[:3], 2).tolist() == want[:3]
  m.scatter(np.array([a + 8, a + 8, b], np.uint64), np.array([1, 2, 3], np.uint32), 4)  # the last lane wins
  assert np.frombuffer(m.read_bytes(a + 8, 4), np.uint32)[0] == 2 and m.gather(np.array([b], np.uint64), 4)[0] == 3


def test_faults_name_the_address():
  m = GuestMemory("gfx942")
  a = m.alloc(16)
  with pytest.raises(GPUPageFault, match=rf"\[gfx942\] GPU page fault: read of 4 bytes at VA {a + 16:#x}"):
    m.gather(np.array([a, a + 16], np.uint64), 4)
  with pytest.raises(GPUPageFault, match="write"):
    m.scatter(np.array([a + 14], np.uint64), np.array([1], np.uint32), 4)  # straddles the end


def test_freed_ranges_are_reused():
  m = GuestMemory()
  first = m.alloc(1 << 20)
  m.unmap(first)
  for _ in range(100):
    m.unmap(m.alloc(1 << 24))
  assert m.alloc(1 << 20) == first


def test_lds_window_wraps_and_faults():
  w = Window("LDS", 2, 64, 1 << 20, "gfx1100", None, 19)
  w.scatter(np.array([(1 << 20) | 8], np.uint64), np.array([7], np.uint32), 4)  # workgroup 1, offset 8
  assert w.gather(np.array([(1 << 20) | (1 << 19) | 8], np.uint64), 4)[0] == 7  # a wrapped sum lands there too
  with pytest.raises(GPUPageFault, match="LDS offset past its 64-byte allocation"):
    w.gather(np.array([62], np.uint64), 4)
