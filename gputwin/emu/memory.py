"""Guest memory of the emulated GPU: sparse mapped regions, vectorised bounds-checked gather/scatter.

`GuestMemory` is the one global address space a dispatch sees (kernargs, buffers, the dispatch packet, code). The
emulator only needs the small `AddressSpace` protocol below, so the mock KFD's GPUAddressSpace can stand in for it
later. `LDS` and `Scratch` are the per-dispatch windows for DS and private-segment accesses; every window raises a
`GPUPageFault` naming the address, and the emulator adds target, kernel, PC and instruction (`EmuPageFault`).
"""
from __future__ import annotations

import bisect
from typing import Protocol

import numpy as np

from gputwin.errors import GPUPageFault

_U = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class AddressSpace(Protocol):
  """What the wave executor needs from a GPU address space (vectorised, little-endian, bounds checked)."""
  def gather(self, addr: np.ndarray, nbytes: int) -> np.ndarray: ...  # uint{8*nbytes} values at uint64 addresses
  def scatter(self, addr: np.ndarray, vals: np.ndarray, nbytes: int) -> None: ...  # in array order: last wins
  def read_bytes(self, va: int, n: int) -> bytes: ...
  def write_bytes(self, va: int, data: bytes) -> None: ...


def _gather(buf: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
  if nbytes == 1:
    return buf[off]
  if (off % nbytes == 0).all():  # aligned: one typed view, one fancy index
    return buf.view(_U[nbytes])[off // nbytes] if len(buf) % nbytes == 0 else \
      buf[:len(buf) // nbytes * nbytes].view(_U[nbytes])[off // nbytes]
  return np.ascontiguousarray(buf[off[:, None] + np.arange(nbytes)]).view(_U[nbytes])[:, 0]


def _scatter(buf: np.ndarray, off: np.ndarray, vals: np.ndarray, nbytes: int) -> None:
  vals = np.asarray(vals).astype(_U[nbytes])
  if nbytes == 1:
    buf[off] = vals
  elif (off % nbytes == 0).all() and len(buf) % nbytes == 0:
    buf.view(_U[nbytes])[off // nbytes] = vals  # numpy assigns in index order: the last lane wins, as in hardware
  else:
    buf[off[:, None] + np.arange(nbytes)] = vals[:, None].view(np.uint8).reshape(-1, nbytes)


class GuestMemory:
  """Sparse GPU VA space: [va, va+size) -> numpy byte buffers. `alloc` hands out page-aligned VAs below 4 GiB."""

  def __init__(self, device: str = "", base: int = 0x100000):
    self.device, self._next = device, base
    self.starts: list[int] = []
    self.bufs: list[np.ndarray] = []

  def map(self, va: int, buf: np.ndarray) -> np.ndarray:
    buf = buf.view(np.uint8).reshape(-1)
    i = bisect.bisect_right(self.starts, va)
    if (i > 0 and self.starts[i - 1] + len(self.bufs[i - 1]) > va) or (i < len(self.starts) and self.starts[i] < va + len(buf)):
      raise GPUPageFault(va, len(buf), "map", self.device, "overlaps an existing mapping")
    self.starts.insert(i, va)
    self.bufs.insert(i, buf)
    return buf

  def alloc(self, size: int, align: int = 4096) -> int:
    """Map `size` zeroed bytes at a fresh VA (with a guard gap after it, so overruns fault)."""
    va = -(-self._next // align) * align
    self.map(va, np.zeros(max(size, 1), np.uint8))
    self._next = va + max(size, 1) + 4096
    return va

  def unmap(self, va: int) -> None:
    i = self.starts.index(va)
    del self.starts[i], self.bufs[i]

  def _regions(self, addr: np.ndarray, nbytes: int, access: str):
    """Region index per address; raises the page fault of the first address not inside one mapping."""
    s = np.asarray(self.starts, np.uint64)
    r = np.searchsorted(s, addr, side="right").astype(np.int64) - 1
    ends = np.asarray([st + len(b) for st, b in zip(self.starts, self.bufs)] or [0], np.uint64)
    bad = (r < 0) | (addr + np.uint64(nbytes) > ends[np.maximum(r, 0)])
    if bad.any():
      raise GPUPageFault(int(addr[np.argmax(bad)]), nbytes, access, self.device)
    return r

  def gather(self, addr, nbytes: int) -> np.ndarray:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    out = np.zeros(len(addr), _U[nbytes])
    if len(addr) == 0:
      return out
    r = self._regions(addr, nbytes, "read")
    for i in np.unique(r):
      sel = r == i
      out[sel] = _gather(self.bufs[i], (addr[sel] - np.uint64(self.starts[i])).astype(np.int64), nbytes)
    return out

  def scatter(self, addr, vals, nbytes: int) -> None:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    if len(addr) == 0:
      return
    vals = np.broadcast_to(np.asarray(vals), addr.shape)
    r = self._regions(addr, nbytes, "write")
    for i in np.unique(r):
      sel = r == i
      _scatter(self.bufs[i], (addr[sel] - np.uint64(self.starts[i])).astype(np.int64), vals[sel], nbytes)

  def read_bytes(self, va: int, n: int) -> bytes:
    return self.gather(np.arange(va, va + n, dtype=np.uint64), 1).tobytes()

  def write_bytes(self, va: int, data: bytes) -> None:
    self.scatter(np.arange(va, va + len(data), dtype=np.uint64), np.frombuffer(bytes(data), np.uint8), 1)


class Window:
  """A flat byte array addressed from 0 with a per-slot size: LDS (slot = workgroup) or scratch (slot = lane).

  Addresses are slot * stride + offset (stride a power of two well above any reachable offset); an offset at or
  past `size` (the LDS allocation or the private segment size) is a fault. Storage is compact: slots * size."""

  def __init__(self, kind: str, slots: int, size: int, stride: int, device: str = "", slot_map=None):
    self.kind, self.size, self.stride, self.device = kind, size, stride, device
    self.slot_map = slot_map  # address slot -> storage slot (LDS: wave -> its workgroup)
    self.watch = None  # callable(access, slot array, offset array, nbytes): the LDS race checker
    self.buf = np.zeros(max(slots * size, 8), np.uint8)

  def _check(self, addr, nbytes, access):
    a = np.asarray(addr, np.uint64).reshape(-1).astype(np.int64)
    off = a % self.stride
    bad = off + nbytes > self.size
    if bad.any():
      i = int(np.argmax(bad))
      raise GPUPageFault(int(off[i]), nbytes, access, self.device, f"{self.kind} offset past its {self.size}-byte allocation")
    slot = a // self.stride
    if self.watch is not None:
      self.watch(access, slot, off, nbytes)
    return (slot if self.slot_map is None else self.slot_map[slot]) * self.size + off

  def gather(self, addr, nbytes):
    return _gather(self.buf, self._check(addr, nbytes, "read"), nbytes)

  def scatter(self, addr, vals, nbytes):
    _scatter(self.buf, self._check(addr, nbytes, "write"), np.broadcast_to(np.asarray(vals), np.shape(addr)), nbytes)
