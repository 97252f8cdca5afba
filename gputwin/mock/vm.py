"""GPU virtual memory of a mock GPU: buffer objects backed by host memory, and the per-device page-table stand-in.

A BufferObject's bytes live in host memory (a memfd for VRAM/GTT/doorbell/MMIO, the user's pages for USERPTR), so the
CPU (through its mmap of the render node) and the emulated GPU (through GPUAddressSpace) read and write the same bytes.
GPUAddressSpace is what MAP_MEMORY_TO_GPU fills and what a command processor or shader emulator reads through:
every access is bounds checked and an unmapped address raises GPUPageFault naming device, address and access.
"""
from __future__ import annotations
import bisect, dataclasses, threading
import numpy as np
from gputwin.errors import GPUPageFault
from gputwin.abi.hostmem import HostBuffer, host_view


@dataclasses.dataclass(eq=False)
class BufferObject:
  """One ALLOC_MEMORY_OF_GPU allocation. `host` owns the pages (None for USERPTR, whose pages the user owns)."""
  handle: int
  gpu_id: int
  va: int
  size: int
  flags: int
  mmap_offset: int
  host: HostBuffer | None = None
  user_addr: int = 0
  shared: bool = False                  # doorbell/MMIO pages belong to the device/process, not to this BO
  mapped: set = dataclasses.field(default_factory=set)   # gpu_ids this BO is mapped on
  queue_refs: int = 0                   # user queues using it as ring/rptr/wptr/EOP/CWSR (bo_va->queue_refcount)

  @property
  def addr(self) -> int: return self.host.addr if self.host is not None else self.user_addr
  @property
  def view(self) -> memoryview:
    return self.host.view[:self.size] if self.host is not None else host_view(self.addr, self.size)

  def release(self):
    if self.host is not None and not self.shared: self.host.close()
    self.host = None


@dataclasses.dataclass(frozen=True)
class Mapping:
  va: int
  size: int
  bo: BufferObject
  @property
  def end(self) -> int: return self.va + self.size


class GPUAddressSpace:
  """The GPU VM of one device in one process: sorted, non-overlapping [va, va+size) -> BufferObject mappings."""

  def __init__(self, device: str):
    self.device = device
    self._index: tuple[list[int], list[Mapping]] = ([], [])   # (starts, mappings), replaced whole on every change
    self._lock = threading.Lock()

  @property
  def held(self) -> threading.Lock:
    """Held while an engine works on raw host pointers of the mappings (the emulator's native tier): map/unmap wait,
    so a BO cannot be unmapped, then freed, under running code."""
    return self._lock

  def __len__(self) -> int: return len(self._index[1])
  def mappings(self) -> list[Mapping]: return list(self._index[1])

  def table(self) -> tuple[np.ndarray, np.ndarray, list[Mapping]]:
    """(starts, ends, mappings) as uint64 arrays for vectorised lookups (np.searchsorted); rebuilt only after the
    mappings changed, so a shader's gather/scatter does not pay for it on every access."""
    idx = self._index
    cached = getattr(self, "_table", None)
    if cached is None or cached[0] is not idx:
      maps = idx[1]
      cached = self._table = (idx, np.array([m.va for m in maps], np.uint64),
                              np.array([m.end for m in maps], np.uint64), list(maps))
    return cached[1], cached[2], cached[3]

  def map(self, va: int, size: int, bo: BufferObject) -> bool:
    """Insert a mapping; False (nothing changed) when it overlaps an existing one (amdgpu_vm_bo_map's conflict).
    Copy-on-write, so a GPU thread translating concurrently always sees a consistent table."""
    with self._lock:
      starts, maps = self._index
      i = bisect.bisect_left(starts, va)
      if (i > 0 and maps[i - 1].end > va) or (i < len(maps) and starts[i] < va + size): return False
      self._index = (starts[:i] + [va] + starts[i:], maps[:i] + [Mapping(va, size, bo)] + maps[i:])
      return True

  def unmap(self, va: int) -> Mapping | None:
    with self._lock:
      starts, maps = self._index
      i = bisect.bisect_left(starts, va)
      if i == len(starts) or starts[i] != va: return None
      self._index = (starts[:i] + starts[i + 1:], maps[:i] + maps[i + 1:])
      return maps[i]

  def find(self, va: int) -> Mapping | None:
    """The mapping containing va, or None."""
    starts, maps = self._index
    i = bisect.bisect_right(starts, va) - 1
    return maps[i] if i >= 0 and va < maps[i].end else None

  def translate(self, va: int, n: int = 1, access: str = "read") -> tuple[Mapping, int]:
    """(mapping, offset) for an access of n bytes at va lying in one mapping; GPUPageFault otherwise."""
    m = self.find(va)
    if m is None: raise GPUPageFault(va, n, access, self.device, "no mapping")
    if va + n > m.end: raise GPUPageFault(va, n, access, self.device, f"crosses end of mapping {m.va:#x}+{m.size:#x}")
    if m.bo.host is None and not m.bo.user_addr: raise GPUPageFault(va, n, access, self.device, "BO freed")
    return m, va - m.va

  def view(self, va: int, n: int, access: str = "read") -> memoryview:
    """A zero-copy, writable view of n bytes at va (must lie in one mapping)."""
    m, off = self.translate(va, n, access)
    return m.bo.view[off:off + n]

  def array(self, va: int, dtype, count: int) -> np.ndarray:
    dt = np.dtype(dtype)
    return np.frombuffer(self.view(va, dt.itemsize * count), dtype=dt)

  def read(self, va: int, n: int) -> bytes:
    """Read n bytes; may span adjacent mappings, faults at the first unmapped byte."""
    out, pos = bytearray(), va
    while pos < va + n:
      m = self.find(pos)
      if m is None: raise GPUPageFault(pos, va + n - pos, "read", self.device, f"no mapping (access {va:#x}+{n:#x})")
      k = min(m.end, va + n) - pos
      out += self.view(pos, k)
      pos += k
    return bytes(out)

  def write(self, va: int, data) -> None:
    """Write bytes; may span adjacent mappings. Every target byte is checked before any is written."""
    data = memoryview(bytes(data)).cast("B")
    n, pos, parts = len(data), va, []
    while pos < va + n:
      m = self.find(pos)
      if m is None: raise GPUPageFault(pos, va + n - pos, "write", self.device, f"no mapping (access {va:#x}+{n:#x})")
      k = min(m.end, va + n) - pos
      parts.append((self.view(pos, k, "write"), pos - va, k))
      pos += k
    for dst, off, k in parts: dst[:] = data[off:off + k]

  def read_u32(self, va: int) -> int: return int.from_bytes(self.view(va, 4), "little")
  def read_u64(self, va: int) -> int: return int.from_bytes(self.view(va, 8), "little")
  def write_u32(self, va: int, v: int): self.view(va, 4, "write")[:] = (v & 0xFFFFFFFF).to_bytes(4, "little")
  def write_u64(self, va: int, v: int): self.view(va, 8, "write")[:] = (v & (2**64 - 1)).to_bytes(8, "little")


_U = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class GPUMemory:
  """emu's AddressSpace protocol (vectorised gather/scatter, read_bytes/write_bytes) over a GPUAddressSpace: the
  emulated waves read and write the very pages the CPU mapped, and an unmapped address is a GPUPageFault."""

  def __init__(self, vm: GPUAddressSpace):
    self.vm, self.device = vm, vm.device

  def _groups(self, addr: np.ndarray, nbytes: int, access: str):
    """Yield (selection, byte array of the mapping, offsets) for the addresses, one mapping at a time."""
    starts, ends, maps = self.vm.table()
    if not len(addr): return
    if not maps: raise GPUPageFault(int(addr[0]), nbytes, access, self.device, "no mapping")
    r = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    bad = (r < 0) | (addr + np.uint64(nbytes) > ends[np.maximum(r, 0)])
    if bad.any():
      raise GPUPageFault(int(addr[np.argmax(bad)]), nbytes, access, self.device, "no mapping")
    for i in np.unique(r):
      m = maps[i]
      if m.bo.host is None and not m.bo.user_addr:
        raise GPUPageFault(m.va, nbytes, access, self.device, "BO freed")
      sel = r == i
      yield sel, np.frombuffer(m.bo.view, np.uint8), (addr[sel] - np.uint64(m.va)).astype(np.int64)

  def gather(self, addr, nbytes: int) -> np.ndarray:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    out = np.zeros(len(addr), _U[nbytes])
    for sel, buf, off in self._groups(addr, nbytes, "read"):
      out[sel] = np.ascontiguousarray(buf[off[:, None] + np.arange(nbytes)]).view(_U[nbytes])[:, 0]
    return out

  def scatter(self, addr, vals, nbytes: int) -> None:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    vals = np.broadcast_to(np.asarray(vals).astype(_U[nbytes]), addr.shape)
    for sel, buf, off in self._groups(addr, nbytes, "write"):
      buf[off[:, None] + np.arange(nbytes)] = np.ascontiguousarray(vals[sel]).view(np.uint8).reshape(-1, nbytes)

  def read_bytes(self, va: int, n: int) -> bytes: return self.vm.read(va, n)
  def write_bytes(self, va: int, data: bytes) -> None: self.vm.write(va, data)


