"""Host memory primitives shared by the mock driver and the real-OS kernel seam: libc mmap/munmap with a fixed address,
memfd-backed buffers, and checks that a host range is mapped or accessible (for the EFAULT cases a real kernel gets
from copy_from_user / copy_to_user / get_user_pages)."""
from __future__ import annotations
import ctypes, ctypes.util, errno, mmap as _mmap, os

PAGE_SIZE = _mmap.PAGESIZE
PROT_READ, PROT_WRITE, PROT_EXEC, PROT_NONE = _mmap.PROT_READ, _mmap.PROT_WRITE, _mmap.PROT_EXEC, 0
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = _mmap.MAP_SHARED, _mmap.MAP_PRIVATE, _mmap.MAP_ANONYMOUS
MAP_FIXED, MAP_NORESERVE = 0x10, 0x4000
MAP_FAILED = ctypes.c_void_p(-1).value

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                                         ctypes.c_int, ctypes.c_long]
libc.munmap.restype, libc.munmap.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.restype, libc.mincore.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
libc.madvise.restype, libc.madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_POPULATE_READ, MADV_POPULATE_WRITE = 22, 23   # Linux 5.14: prefault as a read / write access would


def page_align(n: int) -> int: return (n + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)


def _check(ok: bool, what: str):
  if not ok:
    e = ctypes.get_errno()
    raise OSError(e, f"{what}: {os.strerror(e)}")


def host_mmap(addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
  """libc mmap; returns the address, raises OSError(errno) like the syscall would report."""
  ret = libc.mmap(addr or None, length, prot, flags, fd, offset)
  _check(ret is not None and ret != MAP_FAILED, "mmap")
  return ret


def host_munmap(addr: int, length: int):
  _check(libc.munmap(addr, length) == 0, "munmap")


def host_range_mapped(addr: int, length: int) -> bool:
  """True when every page of [addr, addr+length) is mapped in this process (mincore fails with ENOMEM otherwise)."""
  if addr <= 0 or length <= 0: return False
  start = addr & ~(PAGE_SIZE - 1)
  span = page_align(addr + length - start)
  vec = ctypes.create_string_buffer(span // PAGE_SIZE)
  if libc.mincore(start, span, vec) == 0: return True
  if ctypes.get_errno() in (errno.ENOMEM, errno.EINVAL): return False
  raise OSError(ctypes.get_errno(), "mincore")


_POPULATE: bool | None = None   # whether the kernel knows MADV_POPULATE_* (probed once)


def _populate_works() -> bool:
  global _POPULATE
  if _POPULATE is None:
    probe = HostBuffer(PAGE_SIZE, "gputwin-probe")
    _POPULATE = libc.madvise(probe.addr, PAGE_SIZE, MADV_POPULATE_WRITE) == 0
    probe.close()
  return _POPULATE


def host_range_accessible(addr: int, length: int, write: bool = False) -> bool:
  """True when every page of [addr, addr+length) can be read (and, with `write`, written) by this process: what
  copy_from_user / copy_to_user and get_user_pages(FOLL_WRITE) need, so a False is the kernel's EFAULT. The pages are
  faulted in as an access would (madvise MADV_POPULATE_READ/WRITE), which fails instead of raising SIGSEGV/SIGBUS on
  unmapped, PROT_NONE, read-only (write) or truncated-file pages; no byte is read or written. Kernels before 5.14
  (no MADV_POPULATE_*): only "mapped" is checked (host_range_mapped). length 0 is always accessible."""
  if length == 0: return True
  if addr <= 0 or length < 0 or addr + length > 1 << 64: return False
  if not _populate_works(): return host_range_mapped(addr, length)
  start = addr & ~(PAGE_SIZE - 1)
  advice = MADV_POPULATE_WRITE if write else MADV_POPULATE_READ
  return libc.madvise(start, page_align(addr + length - start), advice) == 0


def host_view(addr: int, length: int) -> memoryview:
  """A writable byte view of host memory at addr (caller guarantees it stays mapped)."""
  return memoryview((ctypes.c_char * length).from_address(addr)).cast("B")


class HostBuffer:
  """Page-aligned shared host memory (a memfd) with the driver's own mapping at `addr`. Anyone may map the same pages
  again at another address through `fd` (MAP_SHARED), so a CPU mapping and the GPU's view alias the same bytes."""

  def __init__(self, size: int, name: str = "gputwin-bo"):
    self.size = page_align(max(size, 1))
    self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
      os.ftruncate(self.fd, self.size)
      self.addr = host_mmap(0, self.size, PROT_READ | PROT_WRITE, MAP_SHARED, self.fd, 0)
    except OSError:
      os.close(self.fd)
      raise
    self.view = host_view(self.addr, self.size)

  def map_again(self, addr: int, length: int, prot: int, flags: int, offset: int = 0) -> int:
    """Map the same pages for a user (MAP_SHARED forced: a private copy would break CPU/GPU coherence)."""
    flags = (flags & ~(MAP_PRIVATE | MAP_ANONYMOUS)) | MAP_SHARED
    return host_mmap(addr, length, prot, flags, self.fd, offset)

  def close(self):
    if self.fd < 0: return
    self.view.release()
    host_munmap(self.addr, self.size)
    os.close(self.fd)
    self.fd, self.addr = -1, 0


def user_buffer(arg, size: int) -> tuple[int, int]:
  """(address, bytes available) of an ioctl argument as a driver sees it: a ctypes object or writable buffer, or a raw
  address (available only where `size` bytes there can be read: host_range_accessible)."""
  if arg is None or isinstance(arg, int):
    return (arg or 0), (size if size == 0 or host_range_accessible(arg or 0, size) else 0)
  if isinstance(arg, ctypes._SimpleCData | ctypes.Structure | ctypes.Union | ctypes.Array):
    return ctypes.addressof(arg), ctypes.sizeof(arg)
  mv = memoryview(arg)
  if mv.readonly: return 0, 0
  return ctypes.addressof(ctypes.c_char.from_buffer(mv)), mv.nbytes
