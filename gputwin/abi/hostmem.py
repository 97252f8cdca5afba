"""Host memory primitives shared by the mock drivers and the real-OS kernel seam: libc mmap/munmap with a fixed
address, memfd-backed buffers, checks that a host range is mapped or accessible (for the EFAULT cases a real kernel
gets from copy_from_user / copy_to_user / get_user_pages), copies that fail instead of faulting (process_vm_readv /
writev on this process), and `UserPages`: user pages pinned by the driver's own mapping (get_user_pages)."""
from __future__ import annotations
import ctypes, ctypes.util, errno, mmap as _mmap, os, threading, weakref

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
libc.mprotect.restype, libc.mprotect.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mremap.restype, libc.mremap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                                                             ctypes.c_int]
MREMAP_MAYMOVE = 1


class _Iovec(ctypes.Structure):
  _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


for _f in (libc.process_vm_readv, libc.process_vm_writev):   # (pid, local iovecs, count, remote iovecs, count, 0)
  _f.restype = ctypes.c_ssize_t
  _f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
_IOV = threading.local()   # per thread: two iovecs (local, remote) for single-range copies
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


def _vm_copy(local: int, remote: int, n: int, to_remote: bool) -> int:
  """Copy n bytes between two addresses of this process with process_vm_readv/writev (to_remote: local -> remote):
  the kernel copies as copy_from_user/copy_to_user would and stops at the first page of `remote` that cannot be read
  (written), so nothing faults. Returns the bytes copied."""
  f, done = (libc.process_vm_writev if to_remote else libc.process_vm_readv), 0
  iov = getattr(_IOV, "iov", None)
  if iov is None: iov = _IOV.iov = (_Iovec * 2)()
  at = ctypes.addressof(iov)
  while done < n:
    iov[0].base, iov[0].len, iov[1].base, iov[1].len = local + done, n - done, remote + done, n - done
    got = f(os.getpid(), at, 1, at + ctypes.sizeof(_Iovec), 1, 0)
    if got <= 0: break
    done += got
  return done


def copy_from_user(addr: int, n: int) -> bytes | None:
  """copy_from_user: n bytes at addr, or None (the kernel's EFAULT) when any of them cannot be read. The copy is one
  system call that checks as it copies, so a concurrent munmap/mprotect by another thread cannot fault the caller
  (the range is looked at first only so that a wild size over unmapped memory allocates nothing)."""
  if n == 0: return b""
  if addr <= 0 or n < 0 or addr + n > 1 << 64 or not host_range_accessible(addr, n): return None
  return _read(addr, n)


def _read(addr: int, n: int) -> bytes | None:
  buf = ctypes.create_string_buffer(n)
  return buf.raw if _vm_copy(ctypes.addressof(buf), addr, n, False) == n else None


def copy_to_user(addr: int, data) -> bool:
  """copy_to_user: write data at addr; False (EFAULT) when a byte cannot be written (unmapped, read-only, PROT_NONE):
  the bytes before it are written, as in the kernel."""
  data = bytes(data)
  if not data: return True
  if addr <= 0 or addr + len(data) > 1 << 64: return False
  buf = ctypes.create_string_buffer(data, len(data))
  return _vm_copy(ctypes.addressof(buf), addr, len(data), True) == len(data)


def _vmas(addr: int, length: int) -> list[tuple[int, int, bool]] | None:
  """(start, end, shared) of the VMAs covering [addr, addr+length), clipped to it, from /proc/self/maps; None when a
  page of it is not mapped."""
  out, pos, end = [], addr, addr + length
  with open("/proc/self/maps") as f:
    for line in f:
      rng, perms = line.split(None, 2)[:2]
      lo, hi = (int(x, 16) for x in rng.split("-"))
      if hi <= pos or lo >= end: continue
      if lo > pos: return None
      out.append((pos, min(hi, end), perms[3] == "s"))
      pos = min(hi, end)
      if pos == end: return out
  return None


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
    # A buffer nobody closed (a machine dropped with its BOs) still gives its fd and pages back: the fd when this
    # object dies, the mapping when the last view of it (numpy arrays, slices: they keep the ctypes array) is gone.
    # Not at exit, where a daemon GPU thread may still be reading.
    pages = (ctypes.c_char * self.size).from_address(self.addr)
    self._unmap = weakref.finalize(pages, host_munmap, self.addr, self.size)
    self._close_fd = weakref.finalize(self, os.close, self.fd)
    self._unmap.atexit = self._close_fd.atexit = False
    self.view = memoryview(pages).cast("B")

  def map_again(self, addr: int, length: int, prot: int, flags: int, offset: int = 0) -> int:
    """Map the same pages for a user (MAP_SHARED forced: a private copy would break CPU/GPU coherence)."""
    flags = (flags & ~(MAP_PRIVATE | MAP_ANONYMOUS)) | MAP_SHARED
    return host_mmap(addr, length, prot, flags, self.fd, offset)

  def close_fd(self):
    """Give the memfd back now: the pages stay mapped here (a GPU thread may still finish with them), nobody can map
    them again (`fd` is -1)."""
    self._close_fd()
    self.fd = -1

  def close(self):
    if self.addr == 0: return
    self.view.release()
    self._unmap()
    self.close_fd()
    self.addr = 0


def user_buffer(arg, size: int) -> tuple[int, int]:
  """(address, bytes available) of an ioctl argument as a driver sees it: a ctypes object or writable buffer, or a raw
  address (available only where `size` bytes there can be read: host_range_accessible); (0, 0) for anything else (an
  empty or read-only buffer, no buffer), which the driver answers with EFAULT."""
  if arg is None or isinstance(arg, int):
    return (arg or 0), (size if size == 0 or host_range_accessible(arg or 0, size) else 0)
  if isinstance(arg, ctypes._SimpleCData | ctypes.Structure | ctypes.Union | ctypes.Array):
    return ctypes.addressof(arg), ctypes.sizeof(arg)
  try: mv = memoryview(arg)
  except TypeError: return 0, 0                 # no buffer at all
  if mv.readonly or not mv.nbytes or not mv.c_contiguous: return 0, 0
  return ctypes.addressof(ctypes.c_char.from_buffer(mv)), mv.nbytes


class UserPages:
  """get_user_pages for a mock driver: the caller's pages at [user, user+size) (page aligned) as the driver reaches
  them, never through the caller's own address. Pages inside one shared mapping (MAP_SHARED memory, a memfd, a file)
  are mapped again by the driver (mremap with old_size 0): `addr` and `view` then stay valid whatever the caller does
  to its range, as the pages a kernel pinned stay the device's. Private pages cannot be mapped twice (moving them into
  shared memory under a running process would lose the writes its other threads make meanwhile), so they are reached
  by copies (`read`, `write`, `copy_iov`: process_vm_readv/writev), which fail, as the GPU's page fault, once the
  caller unmapped or protected the range, instead of faulting the host; their `view` is None. Not covered: a file
  under a shared mapping truncated below the range (the driver's accesses would SIGBUS: the mock holds a mapping, not
  the file's pages). OSError(EFAULT) when a page of the range is not mapped."""

  def __init__(self, user: int, size: int):
    vmas = _vmas(user, size) if user > 0 and size > 0 and not (user | size) & (PAGE_SIZE - 1) else None
    if vmas is None: raise OSError(errno.EFAULT, "user pages not mapped")
    self.user, self.size, self.addr, self.view = user, size, 0, None
    if len(vmas) == 1 and vmas[0][2]:                      # shared pages: map them again, readable and writable
      ret = libc.mremap(user, 0, size, MREMAP_MAYMOVE)
      if ret is not None and ret != MAP_FAILED:
        if libc.mprotect(ret, size, PROT_READ | PROT_WRITE) == 0:
          # unmapped when the last view of them is gone (as HostBuffer's pages): after close() (the BO freed) a view
          # someone still holds (an engine mid-access, an array) reads stale bytes instead of faulting the host
          pages = (ctypes.c_char * size).from_address(ret)
          unmap = weakref.finalize(pages, host_munmap, ret, size)
          unmap.atexit = False
          self.addr, self.view = ret, memoryview(pages).cast("B")
        else: host_munmap(ret, size)                       # a file opened read-only: reached by copies

  def window(self, offset: int, size: int) -> UserPages:
    """[offset, offset+size) of these pages (a view of them keeps the driver's mapping while the window lives)."""
    w = object.__new__(UserPages)
    w.user, w.size, w.addr = self.user + offset, size, self.addr + offset if self.addr else 0
    w.view = self.view[offset:offset + size] if self.view is not None else None
    return w

  def read(self, offset: int, n: int) -> bytes | None:
    """n bytes at offset; None when they cannot be read."""
    return bytes(self.view[offset:offset + n]) if self.view is not None else _read(self.user + offset, n)

  def write(self, offset: int, data) -> bool:
    """Write data at offset; False when it cannot be written (the bytes before the failing page are)."""
    if self.view is None: return copy_to_user(self.user + offset, data)
    self.view[offset:offset + len(data)] = data
    return True

  def copy_iov(self, local: int, iov: int, count: int, each: int, write: bool) -> int:
    """Move `count` pieces of `each` bytes between the contiguous buffer at `local` and the user addresses of the
    iovec array at `iov` (struct iovec[count], absolute addresses in this range), IOV_MAX at a time: one system call
    per 1024 lanes of a gather/scatter. Returns how many pieces moved before the first that could not be reached."""
    f, done = (libc.process_vm_writev if write else libc.process_vm_readv), 0
    while done < count:
      k = min(count - done, 1024)
      lo = _Iovec(local + done * each, k * each)
      got = f(os.getpid(), ctypes.addressof(lo), 1, iov + done * ctypes.sizeof(_Iovec), k, 0)
      if got != k * each: return done + max(got, 0) // each
      done += k
    return done

  def accessible(self, offset: int = 0, n: int | None = None) -> bool:
    """Whether the caller's range (or n bytes of it at offset) is still mapped readable and writable."""
    return host_range_accessible(self.user + offset, self.size - offset if n is None else n, write=True)

  def close(self):
    """Unpin: the driver's mapping goes with the last view of it (at once when nobody holds one)."""
    self.view, self.addr = None, 0
