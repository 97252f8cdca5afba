"""GPU virtual memory of a mock GPU: buffer objects backed by host memory, and the per-device page-table stand-in.

A BufferObject's bytes live in host memory: a memfd the driver maps for VRAM/GTT/doorbell/MMIO, the user's own pages
for user memory (KFD USERPTR, KGSL MAP_USER_MEM/GPUOBJ_IMPORT, NV OS-descriptor memory). So the CPU (through its
mapping) and the emulated GPU (through GPUAddressSpace) read and write the same bytes. User pages are reached as
`hostmem.UserPages` reaches them, never through the client's address: shared pages through the driver's own mapping
of them (they stay the GPU's whatever the client does to its range, as pinned pages do), private pages by copies that
fail as a GPU page fault once the client unmapped or protected them. So a client thread's munmap/mprotect under a
running dispatch or copy cannot crash the host. GPUAddressSpace is what MAP_MEMORY_TO_GPU fills and what a command
processor or shader emulator reads through: every access is bounds checked and an unmapped address raises
GPUPageFault naming device, address and access.
"""
from __future__ import annotations
import bisect, dataclasses, threading
import numpy as np
from gputwin.errors import GPUPageFault
from gputwin.abi.hostmem import HostBuffer, UserPages, host_view


NO_BACKING = "BO has no backing pages (freed, or user pages invalidated)"


@dataclasses.dataclass(eq=False)
class BufferObject:
  """One GPU allocation. `host` holds pages the driver maps (its own memory, or user pages it mapped again);
  `pages`, the user's pages of user memory (`host` too when they are mapped again, else reached by copies);
  `user_addr`, for a BO without either, a window into pages another BO holds (an NV sub-range mapping). With none of
  them (freed), or not `valid` (an invalidated userptr BO), every GPU access to it is a GPUPageFault."""
  handle: int
  gpu_id: int
  va: int
  size: int
  flags: int
  mmap_offset: int
  host: HostBuffer | UserPages | None = None
  user_addr: int = 0
  shared: bool = False                  # doorbell/MMIO pages belong to the device/process, not to this BO
  mapped: set = dataclasses.field(default_factory=set)   # gpu_ids this BO is mapped on
  queue_refs: int = 0                   # user queues using it as ring/rptr/wptr/EOP/CWSR (bo_va->queue_refcount)
  pages: UserPages | None = None
  valid: bool = True

  def __post_init__(self): self.set_valid(self.valid)

  def set_valid(self, ok: bool):
    """Make the BO reachable by the GPU, or not (an invalidated userptr BO): `host` follows for user pages, so the
    emulator's direct access (the native tier's regions) leaves an invalid BO out."""
    self.valid = ok
    if self.pages is not None: self.host = self.pages if ok and self.pages.view is not None else None

  @property
  def backed(self) -> bool:
    return self.valid and (self.host is not None or self.pages is not None or self.user_addr != 0)
  @property
  def copied(self) -> bool:
    """User pages reached only by copies: no view, no host address."""
    p = self.pages
    return p is not None and p.view is None
  @property
  def addr(self) -> int:
    h = self.host                       # (read once: a GPU thread may see it change)
    return h.addr if h is not None else self.user_addr
  @property
  def view(self) -> memoryview:
    h = self.host
    if h is not None: return h.view[:self.size]
    if not self.user_addr: raise LookupError("buffer object without host pages")
    return host_view(self.user_addr, self.size)

  def window(self, handle: int, gpu_id: int, va: int, offset: int, size: int, flags: int) -> BufferObject:
    """A BO for [offset, offset+size) of this one's pages (a sub-range mapping), holding none of its own."""
    if self.pages is not None:
      return BufferObject(handle, gpu_id, va, size, flags, 0, pages=self.pages.window(offset, size))
    return BufferObject(handle, gpu_id, va, size, flags, 0, user_addr=self.addr + offset)

  def release(self):
    """Free: the BO's own memory is given back and user pages are unpinned (what freeing a userptr BO does), and the
    BO is no longer `backed`, so an engine still holding it (a mapping it translated before the unmap) faults."""
    host, pages = self.host, self.pages
    self.valid, self.host, self.pages, self.user_addr = False, None, None, 0
    if host is not None and not self.shared and host is not pages: host.close()
    if pages is not None: pages.close()


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
    if not m.bo.backed: raise GPUPageFault(va, n, access, self.device, NO_BACKING)
    return m, va - m.va

  def view(self, va: int, n: int, access: str = "read") -> memoryview:
    """A zero-copy, writable view of n bytes at va (must lie in one mapping of host pages: user pages reached by
    copies have none, a GPUPageFault saying so, on which callers copy with read/write)."""
    m, off = self.translate(va, n, access)
    if m.bo.copied: raise GPUPageFault(va, n, access, self.device, "user pages reached by copies (no host view)")
    try: return m.bo.view[off:off + n]
    except LookupError: raise GPUPageFault(va, n, access, self.device, NO_BACKING) from None   # invalidated just now

  def _get(self, va: int, n: int, access: str = "read"):
    """n bytes at va inside one mapping: a view, or a copy of user pages."""
    m, off = self.translate(va, n, access)
    if m.bo.copied:
      data = m.bo.pages.read(off, n)
      if data is None: raise GPUPageFault(va, n, access, self.device, "user pages not readable")
      return data
    try: return m.bo.view[off:off + n]
    except LookupError: raise GPUPageFault(va, n, access, self.device, NO_BACKING) from None

  def _put(self, m: Mapping, va: int, data):
    """Write data at va inside mapping m (translated for the write)."""
    off = va - m.va
    if m.bo.copied:
      if not m.bo.pages.write(off, data):
        raise GPUPageFault(va, len(data), "write", self.device, "user pages not writable")
      return
    try: m.bo.view[off:off + len(data)] = data
    except LookupError: raise GPUPageFault(va, len(data), "write", self.device, NO_BACKING) from None

  def _set(self, va: int, data: bytes): self._put(self.translate(va, len(data), "write")[0], va, data)

  def array(self, va: int, dtype, count: int) -> np.ndarray:
    dt = np.dtype(dtype)
    return np.frombuffer(self.view(va, dt.itemsize * count), dtype=dt)

  def read(self, va: int, n: int, access: str = "read") -> bytes:
    """Read n bytes (`access`: "read", or "execute" for a fetch); may span adjacent mappings, faults at the first
    unmapped byte."""
    out, pos = bytearray(), va
    while pos < va + n:
      m = self.find(pos)
      if m is None: raise GPUPageFault(pos, va + n - pos, access, self.device, f"no mapping (access {va:#x}+{n:#x})")
      k = min(m.end, va + n) - pos
      out += self._get(pos, k, access)
      pos += k
    return bytes(out)

  def write(self, va: int, data) -> None:
    """Write bytes; may span adjacent mappings. Every target mapping is checked before any byte is written."""
    data = memoryview(bytes(data)).cast("B")
    n, pos, parts = len(data), va, []
    while pos < va + n:
      m = self.find(pos)
      if m is None: raise GPUPageFault(pos, va + n - pos, "write", self.device, f"no mapping (access {va:#x}+{n:#x})")
      k = min(m.end, va + n) - pos
      parts.append((self.translate(pos, k, "write")[0], pos, pos - va, k))
      pos += k
    for m, at, off, k in parts: self._put(m, at, data[off:off + k])

  def read_u32(self, va: int) -> int: return int.from_bytes(self._get(va, 4), "little")
  def read_u64(self, va: int) -> int: return int.from_bytes(self._get(va, 8), "little")
  def write_u32(self, va: int, v: int): self._set(va, (v & 0xFFFFFFFF).to_bytes(4, "little"))
  def write_u64(self, va: int, v: int): self._set(va, (v & (2**64 - 1)).to_bytes(8, "little"))


_U = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class GPUMemory:
  """emu's AddressSpace protocol (vectorised gather/scatter, read_bytes/write_bytes) over a GPUAddressSpace: the
  emulated waves read and write the very pages the CPU mapped, and an unmapped address is a GPUPageFault. `vm` is the
  address space the native tier may reach directly (its table of host addresses): None when user pages reached only
  by copies are mapped, so such a launch runs interpreted (native code has no copy path)."""

  def __init__(self, vm: GPUAddressSpace):
    self.space, self.device = vm, vm.device
    self.vm = None if any(m.bo.copied for m in vm.mappings()) else vm

  def _groups(self, addr: np.ndarray, nbytes: int, access: str):
    """Yield (selection, mapping, offsets) for the addresses, one mapping at a time."""
    starts, ends, maps = self.space.table()
    if not len(addr): return
    if not maps: raise GPUPageFault(int(addr[0]), nbytes, access, self.device, "no mapping")
    r = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    bad = (r < 0) | (addr + np.uint64(nbytes) > ends[np.maximum(r, 0)])
    if bad.any():
      raise GPUPageFault(int(addr[np.argmax(bad)]), nbytes, access, self.device, "no mapping")
    for i in np.unique(r):
      m = maps[i]
      if not m.bo.backed: raise GPUPageFault(m.va, nbytes, access, self.device, NO_BACKING)
      sel = r == i
      yield sel, m, (addr[sel] - np.uint64(m.va)).astype(np.int64)

  def _host(self, m: Mapping, nbytes: int, access: str) -> np.ndarray:
    try: return np.frombuffer(m.bo.view, np.uint8)
    except LookupError: raise GPUPageFault(m.va, nbytes, access, self.device, NO_BACKING) from None

  def _copy(self, m: Mapping, off: np.ndarray, buf: np.ndarray, nbytes: int, write: bool):
    """Gather/scatter of user pages reached by copies: one iovec per lane (hostmem.UserPages.copy_iov); the first
    lane whose bytes cannot be reached is the page fault."""
    pages = m.bo.pages  # (once: a client thread may free the BO meanwhile, which drops its pages)
    if pages is None:
      raise GPUPageFault(m.va + int(off[0]), nbytes, "write" if write else "read", self.device, NO_BACKING)
    iov = np.empty((len(off), 2), np.uint64)
    iov[:, 0], iov[:, 1] = np.uint64(pages.user) + off.astype(np.uint64), nbytes
    done = pages.copy_iov(buf.ctypes.data, iov.ctypes.data, len(off), nbytes, write)
    if done < len(off):
      raise GPUPageFault(m.va + int(off[done]), nbytes, "write" if write else "read", self.device,
                         f"user pages not {'writable' if write else 'readable'}")

  def gather(self, addr, nbytes: int) -> np.ndarray:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    out = np.zeros(len(addr), _U[nbytes])
    for sel, m, off in self._groups(addr, nbytes, "read"):
      if m.bo.copied:
        got = np.empty(len(off), _U[nbytes])
        self._copy(m, off, got, nbytes, False)
        out[sel] = got
      else:
        buf = self._host(m, nbytes, "read")
        out[sel] = np.ascontiguousarray(buf[off[:, None] + np.arange(nbytes)]).view(_U[nbytes])[:, 0]
    return out

  def scatter(self, addr, vals, nbytes: int) -> None:
    addr = np.asarray(addr, np.uint64).reshape(-1)
    vals = np.broadcast_to(np.asarray(vals).astype(_U[nbytes]), addr.shape)
    for sel, m, off in self._groups(addr, nbytes, "write"):
      v = np.ascontiguousarray(vals[sel])
      if m.bo.copied: self._copy(m, off, v, nbytes, True)
      else: self._host(m, nbytes, "write")[off[:, None] + np.arange(nbytes)] = v.view(np.uint8).reshape(-1, nbytes)

  def read_bytes(self, va: int, n: int) -> bytes: return self.space.read(va, n)
  def write_bytes(self, va: int, data: bytes) -> None: self.space.write(va, data)
