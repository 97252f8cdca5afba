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
  """What the wave executor needs from a GPU address space (vectorised, little-endian, bounds checked; an address
  outside every mapping raises GPUPageFault). `Emulator.launch` also calls alloc(nbytes) -> va and unmap(va) to
  place argument buffers, kernargs and the dispatch packet."""
  def gather(self, addr: np.ndarray, nbytes: int) -> np.ndarray: ...  # uint{8*nbytes} values at uint64 addresses
  def scatter(self, addr: np.ndarray, vals: np.ndarray, nbytes: int) -> None: ...  # in array order: last wins
  def read_bytes(self, va: int, n: int) -> bytes: ...
  def write_bytes(self, va: int, data: bytes) -> None: ...


_SH = {1: 0, 2: 1, 4: 2, 8: 3}


def _gather(buf: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
  if nbytes == 1:
    return np.take(buf, off)  # np.take: the same values as buf[off], about twice as fast
  if not (len(off) and int(np.bitwise_or.reduce(off)) & (nbytes - 1)):  # aligned: one typed view, one gather
    return np.take(buf[:len(buf) - len(buf) % nbytes].view(_U[nbytes]), off >> _SH[nbytes])
  return np.ascontiguousarray(buf[off[:, None] + np.arange(nbytes)]).view(_U[nbytes])[:, 0]


def _scatter(buf: np.ndarray, off: np.ndarray, vals: np.ndarray, nbytes: int) -> None:
  vals = np.asarray(vals).astype(_U[nbytes], copy=False)
  if nbytes == 1:
    buf[off] = vals
  elif not (len(off) and int(np.bitwise_or.reduce(off)) & (nbytes - 1)):  # numpy assigns in index order: last lane wins
    buf[:len(buf) - len(buf) % nbytes].view(_U[nbytes])[off >> _SH[nbytes]] = vals
  else:
    buf[off[:, None] + np.arange(nbytes)] = np.ascontiguousarray(vals)[:, None].view(np.uint8).reshape(-1, nbytes)


class GuestMemory:
  """Sparse GPU VA space: [va, va+size) -> numpy byte buffers. `alloc` hands out page-aligned VAs below 4 GiB."""

  def __init__(self, device: str = "", base: int = 0x100000):
    self.device, self._next = device, base
    self.starts: list[int] = []
    self.bufs: list[np.ndarray] = []
    self.version = 0  # bumped by every map/unmap (the native tier's region table follows it)

  def map(self, va: int, buf: np.ndarray) -> np.ndarray:
    buf = buf.view(np.uint8).reshape(-1)
    i = bisect.bisect_right(self.starts, va)
    before = i > 0 and self.starts[i - 1] + len(self.bufs[i - 1]) > va
    if before or (i < len(self.starts) and self.starts[i] < va + len(buf)):
      raise GPUPageFault(va, len(buf), "map", self.device, "overlaps an existing mapping")
    self.starts.insert(i, va)
    self.bufs.insert(i, buf)
    self.version += 1
    return buf

  def alloc(self, size: int, align: int = 4096, guard: int = 4096, buf: np.ndarray | None = None) -> int:
    """Map `size` zeroed bytes at the first free VA (first fit, guard pages around it so overruns fault); freed
    ranges are reused, so VAs stay below 4 GiB however many launches an Emulator runs. `buf`: map these bytes
    (a host array the guest then reads and writes in place) instead of new zeroed ones."""
    size, va = max(size, 1), self._next
    for st, b in zip(self.starts + [1 << 64], self.bufs + [None]):
      va = -(-va // align) * align
      if va + size + guard <= st:
        break
      va = max(va, st + len(b) + guard) if b is not None else va
    self.map(va, np.zeros(size, np.uint8) if buf is None else buf)
    return va

  def unmap(self, va: int) -> None:
    i = self.starts.index(va)
    del self.starts[i], self.bufs[i]
    self.version += 1

  def _regions(self, addr: np.ndarray, nbytes: int, access: str):
    """Region index per address; raises the page fault of the first address not inside one mapping."""
    s = np.asarray(self.starts, np.uint64)
    r = np.searchsorted(s, addr, side="right").astype(np.int64) - 1
    ends = np.asarray([st + len(b) for st, b in zip(self.starts, self.bufs)] or [0], np.uint64)
    end = addr + np.uint64(nbytes)
    bad = (r < 0) | (end > ends[np.maximum(r, 0)]) | (end < addr)   # an access wrapping past 2**64 is outside too
    if bad.any():
      raise GPUPageFault(int(addr[np.argmax(bad)]), nbytes, access, self.device)
    return r

  def _one(self, addr: np.ndarray, nbytes: int):
    """Fast path: every address inside one mapping -> (buffer, int offsets), else None."""
    lo, hi = int(addr.min()), int(addr.max())
    i = bisect.bisect_right(self.starts, lo) - 1
    if i >= 0 and hi + nbytes <= self.starts[i] + len(self.bufs[i]):  # addresses are far below 2**63: as intp, one pass
      return self.bufs[i], np.subtract(addr.view(np.int64), self.starts[i], dtype=np.intp)
    return None

  def gather(self, addr, nbytes: int) -> np.ndarray:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    out = np.zeros(len(addr), _U[nbytes])
    if len(addr) == 0:
      return out
    one = self._one(addr, nbytes)
    if one is not None:
      return _gather(one[0], one[1], nbytes)
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
    one = self._one(addr, nbytes)
    if one is not None:
      return _scatter(one[0], one[1], vals, nbytes)
    r = self._regions(addr, nbytes, "write")
    for i in np.unique(r):
      sel = r == i
      _scatter(self.bufs[i], (addr[sel] - np.uint64(self.starts[i])).astype(np.int64), vals[sel], nbytes)

  def view(self, va: int, n: int) -> np.ndarray | None:
    """The bytes [va, va + n) as a uint8 view into one mapping, or None (then the gather/scatter path faults)."""
    i = bisect.bisect_right(self.starts, va) - 1
    if i >= 0 and n > 0 and va + n <= self.starts[i] + len(self.bufs[i]):
      off = va - self.starts[i]
      return self.bufs[i][off:off + n]
    return None

  def read_bytes(self, va: int, n: int) -> bytes:
    v = self.view(va, n)
    if v is not None:  # one memcpy instead of a per-byte gather
      return v.tobytes()
    return self.gather(np.arange(va, va + n, dtype=np.uint64), 1).tobytes()

  def write_bytes(self, va: int, data) -> None:
    """`data`: bytes, or a contiguous array (copied straight from its memory)."""
    data = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else np.frombuffer(bytes(data), np.uint8)
    v = self.view(va, len(data))
    if v is not None:
      v[...] = data
      return
    self.scatter(np.arange(va, va + len(data), dtype=np.uint64), data, 1)


class Window:
  """A flat byte array addressed from 0 with a per-slot size: LDS (slot = workgroup) or scratch (slot = lane).

  Addresses are slot * stride + offset (stride a power of two well above any reachable offset); an offset at or
  past `size` (the LDS allocation or the private segment size) is a fault. Storage is compact: slots * size."""

  def __init__(self, kind: str, slots: int, size: int, stride: int, device: str = "", slot_map=None,
               offset_bits: int | None = None):
    assert stride & (stride - 1) == 0, "Window stride must be a power of two"
    self.kind, self.size, self.stride, self.device = kind, size, stride, device
    self.offset_mask = (1 << offset_bits) - 1 if offset_bits else stride - 1  # bits above it: carries / wrap
    # LDS (offset_bits given): every address and storage index fits 32 bits, so the index math runs on uint32
    self.narrow = bool(offset_bits) and slots * stride <= 1 << 32 and slot_map is None
    self.shift = stride.bit_length() - 1
    self.slot_map = slot_map  # address slot -> storage slot (LDS: wave -> its workgroup)
    self.base = None if slot_map is None else (np.asarray(slot_map, np.intp) * size)
    self.watch = None  # callable(access, slot array, offset array, nbytes): the LDS race checker
    self.buf = np.zeros(max(-(-slots * size // 8) * 8, 8), np.uint8)
    self._views = {}  # nbytes -> the buffer as uint{8 * nbytes}

  def _check(self, addr, nbytes, access):
    """Storage indices of `nbytes`-wide accesses: (element indices into the typed view, True) when every address
    is `nbytes`-aligned and the slot size a multiple of it, else (byte indices, False); faults past `size`."""
    a = np.asarray(addr, np.uint64).reshape(-1)
    # LDS addresses are below 2**32 (workgroup slot << 20 | offset): index math on uint32 moves half the bytes
    a = a.astype(np.uint32) if self.narrow else a.view(np.int64)  # addresses are far below 2**63: a free view
    off = a & a.dtype.type(self.offset_mask)
    if len(off) and int(off.max()) + nbytes > self.size:
      i = int(np.argmax(off + nbytes > self.size))
      raise GPUPageFault(int(off[i]), nbytes, access, self.device,
                         f"{self.kind} offset past its {self.size}-byte allocation")
    slot = a >> a.dtype.type(self.shift)
    watched = self.watch is not None
    if watched:  # the checker may keep slot and off: compute the index in new arrays below
      self.watch(access, slot, off, nbytes)
    sh = _SH.get(nbytes)
    typed = sh is not None and self.size % nbytes == 0 and self.base is None and \
      not (len(off) and int(np.bitwise_or.reduce(off)) & (nbytes - 1))
    if self.base is not None:
      return self.base[slot] + off, False
    k, t = (self.size >> sh, off >> a.dtype.type(sh)) if typed else (self.size, off)
    slot = slot * a.dtype.type(k) if watched else np.multiply(slot, a.dtype.type(k), out=slot)
    # the element (typed) or byte index, in place (slot is a new array either way); np.take converts a uint32
    # index faster than a separate cast to intp would
    return np.add(slot, t, out=slot), typed

  def _view(self, nbytes):
    v = self._views.get(nbytes)
    if v is None:
      v = self._views[nbytes] = self.buf[:len(self.buf) - len(self.buf) % nbytes].view(_U[nbytes])
    return v

  def gather(self, addr, nbytes):
    idx, typed = self._check(addr, nbytes, "read")
    return np.take(self._view(nbytes), idx) if typed else _gather(self.buf, idx, nbytes)

  def scatter(self, addr, vals, nbytes):
    vals = np.broadcast_to(np.asarray(vals), np.shape(addr))
    idx, typed = self._check(addr, nbytes, "write")
    if typed:  # numpy assigns in index order: the last lane wins, as in hardware
      self._view(nbytes)[idx] = vals.reshape(-1).astype(_U[nbytes], copy=False)
    else:
      _scatter(self.buf, idx, vals.reshape(-1), nbytes)
