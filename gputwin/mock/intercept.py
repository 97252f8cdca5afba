"""In-process interception: a userspace GPU driver that talks to the kernel itself (tinygrad's AMD backend, a raw KFD
client) runs unchanged on a MockKernel.

While an `Interceptor` is active, the Python-level OS entry points such a driver uses are routed to the mock for the
device files and sysfs trees of the mock machine, and to the real functions for everything else:

  os.open / builtins.open   /dev/kfd, /dev/dri/renderD<N>: a placeholder fd (a memfd named after the path) that the
                            interceptor maps to the MockKernel's fd; sysfs files of the mock (KFD topology, the render
                            nodes' ip_discovery): a sealed memfd holding the text, so read/lseek/fstat/open(fd) work
                            as on any file; sysfs directories: a placeholder fd.
  os.close / read / write / fstat   on placeholder fds (device files have no read/write: EINVAL, like kfd_fops)
  os.stat / lstat / access / listdir   for mock paths (so os.path.exists/isdir and pathlib see the mock tree)
  fcntl.ioctl               on device placeholders -> MockKernel.ioctl with the mock's fd; fds passed inside an
                            argument (ACQUIRE_VM's drm_fd) are translated the same way (FD_FIELDS)
  mmap.mmap                 on device placeholders: the mock's pages mapped MAP_FIXED over the new mapping
  libc mmap/mmap64/munmap   as looked up through ctypes (CDLL attribute or item) while active: a C callback that
                            sends device placeholders to MockKernel.mmap (MAP_FIXED over a client's own reservation
                            included: GPU VA == CPU VA) and everything else to libc; errors set errno as libc would

Mock paths are everything under /dev/kfd, /dev/dri/renderD<N>, /sys/devices/virtual/kfd, /sys/class/kfd and
/sys/class/drm/renderD<N>: a path there that the mock machine lacks is ENOENT even when the host has it (a real GPU
stays invisible). Other paths, fds and calls reach the OS untouched; `deactivate()` puts every function back.

Mock choices: dup()ed placeholder fds are plain memfds (ioctl on them: ENOTTY); a read-only Python mmap of a device
file is writable; libc function pointers a client looked up *before* activation still reach libc directly (activate
first, as `gputwin exec` does); select/poll on device fds see the placeholder memfd (always ready, as kfd is).
"""
from __future__ import annotations
import builtins, ctypes, ctypes.util, errno, fcntl, io, mmap as _mmap_mod, os, re, stat, threading
from gputwin.errors import KernelDriverError
from gputwin.abi import kfd as abi
from gputwin.abi.hostmem import MAP_FIXED, PAGE_SIZE, copy_from_user, copy_to_user

MOCK_PATHS = re.compile(r"^/(?:dev/kfd|dev/dri/renderD\d+|sys/devices/virtual/kfd|sys/class/kfd|sys/class/drm/renderD\d+)"
                        r"(?:/|$)")
FD_FIELDS = {abi.IOC_NR(abi.IOCTL_NUMBERS["ACQUIRE_VM"]): "drm_fd"}   # ioctl nr -> argument field holding an fd (in)
KFD_MAJOR, DRM_MAJOR = 235, 226   # char device numbers: kfd's is dynamic (mock: 235, common), DRM's is fixed
MAP_FAILED = 2**64 - 1
_MMAP_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int64, use_errno=True)
_MUNMAP_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, use_errno=True)
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_real_mmap = _MMAP_T(("mmap", _libc))
_real_munmap = _MUNMAP_T(("munmap", _libc))
_LIBC_ADDR = {n: ctypes.cast(getattr(_libc, n), ctypes.c_void_p).value for n in ("mmap", "mmap64", "munmap")}

_active: "Interceptor | None" = None
_lock = threading.Lock()


def _oserror(code: int, path=None) -> OSError: return OSError(code, os.strerror(code), *([path] if path else []))


class _MmapMeta(type):
  """isinstance(m, mmap.mmap) stays true for mmap objects made before activation."""
  def __instancecheck__(cls, obj): return isinstance(obj, cls.__mro__[1])


def _fd_of(fd) -> int: return fd if isinstance(fd, int) else fd.fileno()


class Interceptor:
  """Routes this process's device-file, sysfs, ioctl and mmap calls for one mock machine to `kernel` (a MockKernel).
  Use `activate()`/`deactivate()` or `with Interceptor(k):`. One may be active at a time."""

  def __init__(self, kernel):
    self.k = kernel
    self.devs: dict[int, int] = {}      # placeholder fd -> MockKernel fd
    self.paths: dict[int, str] = {}     # placeholder fd -> mock path (for fstat)
    self.real: dict[str, object] = {}   # "module.name" -> what activate() replaced (kept: callers may hold wrappers)
    self._patched: list[tuple[object, str, object]] = []
    self._cb = {"mmap": _MMAP_T(self._c_mmap), "mmap64": _MMAP_T(self._c_mmap), "munmap": _MUNMAP_T(self._c_munmap)}
    self._cb_addr = {n: ctypes.cast(f, ctypes.c_void_p).value for n, f in self._cb.items()}

  def __repr__(self): return f"Interceptor({self.k!r}, {len(self.devs)} device fds)"
  def __enter__(self): return self.activate()
  def __exit__(self, *exc): self.deactivate()

  # ---------------------------------------------------------------- switching
  def activate(self) -> "Interceptor":
    global _active
    with _lock:
      if _active is not None: raise KernelDriverError(f"interception already active ({_active!r})")
      me, mm = self, _mmap_mod.mmap

      class mmap(mm, metaclass=_MmapMeta):   # noqa: N801  (the name users of the mmap module know)
        __doc__ = mm.__doc__
        def __new__(cls, fileno, length, *args, **kw): return me._py_mmap(mm, cls, fileno, length, *args, **kw)

      def getitem(lib, name): return me._cdll_getitem(lib, name)   # a function, so CDLL binds it like its own

      table = [(os, "open", self._open), (os, "close", self._close), (os, "read", self._read),
               (os, "write", self._write), (os, "fstat", self._fstat), (os, "stat", self._stat),
               (os, "lstat", self._lstat), (os, "access", self._access), (os, "listdir", self._listdir),
               (builtins, "open", self._builtin_open), (io, "open", self._builtin_open), (fcntl, "ioctl", self._ioctl),
               (_mmap_mod, "mmap", mmap), (ctypes.CDLL, "__getitem__", getitem)]
      for obj, name, fn in table:
        old = obj.__dict__[name] if isinstance(obj, type) else getattr(obj, name)
        self.real[f"{obj.__name__}.{name}"] = old
        self._patched.append((obj, name, old))
        setattr(obj, name, fn)
      _active = self
    return self

  def deactivate(self) -> None:
    """Put every replaced function back. Device fds still open keep their mock state until closed."""
    global _active
    with _lock:
      if _active is not self: return
      for obj, name, old in reversed(self._patched): setattr(obj, name, old)
      self._patched.clear()
      _active = None

  @property
  def active(self) -> bool: return _active is self

  # ---------------------------------------------------------------- paths
  @staticmethod
  def ours(path) -> str | None:
    """The normalised absolute path if it belongs to the mock machine's namespace, else None."""
    if isinstance(path, int): return None
    try: p = os.fsdecode(os.fspath(path))
    except TypeError: return None
    if not p.startswith("/"): p = os.path.join(os.getcwd(), p)
    p = os.path.normpath(p)
    return p if MOCK_PATHS.match(p) else None

  def _kind(self, p: str) -> str | None:
    """'dev', 'dir', 'file' or None (absent) for a mock path."""
    if p.startswith("/dev/"): return "dev" if self.k.exists(p) else None
    if self.k.topology.listdir(p) is not None: return "dir"
    return "file" if self.k.topology.read(p) is not None else None

  def _stat_of(self, p: str, kind: str) -> os.stat_result:
    if kind == "dev":
      minor = int(p.rpartition("renderD")[2]) if "renderD" in p else 0
      mode, rdev = stat.S_IFCHR | 0o666, os.makedev(DRM_MAJOR if minor else KFD_MAJOR, minor)
    else: mode, rdev = (stat.S_IFDIR | 0o755, 0) if kind == "dir" else (stat.S_IFREG | 0o444, 0)
    return os.stat_result((mode, hash(p) & 0x7FFFFFFF, 0, 1, 0, 0, 4096 if kind == "file" else 0, 0, 0, 0),
                          {"st_rdev": rdev, "st_blksize": PAGE_SIZE})

  # ---------------------------------------------------------------- os.*
  def _open(self, path, flags, mode=0o777, *, dir_fd=None):
    p = self.ours(path) if dir_fd is None else None
    if p is None: return self.real["os.open"](path, flags, mode, dir_fd=dir_fd)
    kind = self._kind(p)
    if kind is None: raise _oserror(errno.ENOENT, path)
    if kind == "dev":
      mfd = self.k.open(p, flags)
      fd = os.memfd_create("gputwin:" + p, os.MFD_CLOEXEC)
      self.devs[fd], self.paths[fd] = mfd, p
      return fd
    if kind == "file" and flags & os.O_DIRECTORY: raise _oserror(errno.ENOTDIR, path)
    if flags & os.O_ACCMODE != os.O_RDONLY: raise _oserror(errno.EISDIR if kind == "dir" else errno.EACCES, path)
    fd = os.memfd_create("gputwin:" + p, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    if kind == "file":   # kernfs: the text at offset 0, read-only (sealed)
      data = self.k.read_text(p).encode()
      os.pwrite(fd, data, 0)
      fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    self.paths[fd] = p
    return fd

  def _close(self, fd):
    mfd = self.devs.pop(fd, None)
    self.paths.pop(fd, None)
    try:
      if mfd is not None: self.k.close(mfd)
    finally: self.real["os.close"](fd)

  def _read(self, fd, n):
    if fd in self.devs: raise _oserror(errno.EINVAL)   # kfd / render nodes have no read op
    return self.real["os.read"](fd, n)

  def _write(self, fd, data):
    if fd in self.devs: raise _oserror(errno.EINVAL)
    return self.real["os.write"](fd, data)

  def _fstat(self, fd):
    p = self.paths.get(fd)
    if p is None or (kind := self._kind(p)) == "file": return self.real["os.fstat"](fd)
    return self._stat_of(p, kind)

  def _stat(self, path, *, dir_fd=None, follow_symlinks=True):
    if isinstance(path, int): return self._fstat(path)
    p = self.ours(path) if dir_fd is None else None
    if p is None: return self.real["os.stat"](path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    if (kind := self._kind(p)) is None: raise _oserror(errno.ENOENT, path)
    return self._stat_of(p, kind)

  def _lstat(self, path, *, dir_fd=None):
    if (self.ours(path) if dir_fd is None else None) is None: return self.real["os.lstat"](path, dir_fd=dir_fd)
    return self._stat(path)

  def _access(self, path, mode, *, dir_fd=None, effective_ids=False, follow_symlinks=True):
    p = self.ours(path) if dir_fd is None else None
    if p is None:
      return self.real["os.access"](path, mode, dir_fd=dir_fd, effective_ids=effective_ids, follow_symlinks=follow_symlinks)
    kind = self._kind(p)
    return kind is not None and not (kind == "file" and mode & os.W_OK)

  def _listdir(self, path="."):
    p = self.ours(path)
    if p is None: return self.real["os.listdir"](path)
    kind = self._kind(p)
    if kind is None: raise _oserror(errno.ENOENT, path)
    if kind != "dir": raise _oserror(errno.ENOTDIR, path)
    return self.k.listdir(p)

  def _builtin_open(self, file, mode="r", *args, **kw):
    if isinstance(file, int) or self.ours(file) is None: return self.real["builtins.open"](file, mode, *args, **kw)
    flags = os.O_RDWR if "+" in mode else os.O_WRONLY if set(mode) & set("wax") else os.O_RDONLY
    return self.real["builtins.open"](self._open(file, flags), mode, *args, **kw)

  # ---------------------------------------------------------------- ioctl
  def _ioctl(self, fd, request, arg=0, mutate_flag=True):
    """fcntl.ioctl's contract on a device placeholder: an int is the argument pointer; a mutable buffer is updated in
    place (mutate_flag) and the call's result returned; bytes/str or mutate_flag=False: a copy, returned as bytes."""
    mfd = self.devs.get(_fd_of(fd))
    if mfd is None: return self.real["fcntl.ioctl"](fd, request, arg, mutate_flag)
    field = FD_FIELDS.get(abi.IOC_NR(request))
    in_place = isinstance(arg, int) or not isinstance(arg, (bytes, str)) and mutate_flag and not memoryview(arg).readonly
    if field is None and in_place: return self.k.ioctl(mfd, request, arg)
    size = abi.IOC_SIZE(request)
    data = copy_from_user(arg, size) if isinstance(arg, int) else \
      arg.encode() if isinstance(arg, str) else memoryview(arg).cast("B").tobytes()
    if data is None: raise _oserror(errno.EFAULT)   # the kernel's copy_from_user of a bad pointer
    buf = bytearray(max(len(data), size, ctypes.sizeof(abi.IOCTL_BY_NR[abi.IOC_NR(request)][3]) if field else 0))
    buf[:len(data)] = data
    if field is not None:   # an fd inside the argument: the mock gets its own fd number there
      a = abi.IOCTL_BY_NR[abi.IOC_NR(request)][3].from_buffer(buf)
      setattr(a, field, self.devs.get(getattr(a, field), getattr(a, field)))
      del a
    try: ret = self.k.ioctl(mfd, request, buf)
    finally:
      out = bytes(buf[:len(data)])
      if field is not None: out = data   # mock: no ioctl with an fd field writes its argument back
    if not in_place: return out
    if isinstance(arg, int):
      if not copy_to_user(arg, out[:size]): raise _oserror(errno.EFAULT)
    else: memoryview(arg).cast("B")[:] = out
    return ret

  # ---------------------------------------------------------------- mmap
  def _py_mmap(self, base, cls, fileno, length, flags=_mmap_mod.MAP_SHARED,
               prot=_mmap_mod.PROT_READ | _mmap_mod.PROT_WRITE, access=_mmap_mod.ACCESS_DEFAULT, offset=0, **kw):
    mfd = self.devs.get(fileno)
    if mfd is None: return base.__new__(cls, fileno, length, flags, prot, access, offset, **kw)
    if length <= 0: raise _oserror(errno.EINVAL)
    m = base.__new__(cls, -1, length, _mmap_mod.MAP_SHARED, _mmap_mod.PROT_READ | _mmap_mod.PROT_WRITE)
    c = ctypes.c_char.from_buffer(m)
    addr = ctypes.addressof(c)
    del c
    if access == _mmap_mod.ACCESS_READ: prot = _mmap_mod.PROT_READ
    try: self.k.mmap(mfd, offset, length, prot, flags | MAP_FIXED, addr)   # the mock's pages replace the anonymous ones
    except OSError:
      m.close()
      raise
    return m

  def _c_mmap(self, addr, length, prot, flags, fd, offset):
    """libc mmap as the client's ctypes call reaches it (inside a C callback: never raise)."""
    try:
      mfd = self.devs.get(fd) if _active is self else None
      if mfd is None:
        r = _real_mmap(addr, length, prot, flags, fd, offset)   # errno: libc's, left in ctypes' copy for the caller
        return MAP_FAILED if r is None else r
      return self.k.mmap(mfd, offset, length, prot, flags, addr or 0)
    except OSError as e: ctypes.set_errno(e.errno or errno.EINVAL)
    except Exception: ctypes.set_errno(errno.EFAULT)   # noqa: BLE001  (a C caller cannot take a Python exception)
    return MAP_FAILED

  def _c_munmap(self, addr, length): return _real_munmap(addr, length)   # mock BOs are plain shared mappings

  def _cdll_getitem(self, lib, name):
    """CDLL lookups of libc's mmap/mmap64/munmap hand out a function pointer to our callback (same calling
    convention and errno flags as the library's own); every other symbol is the library's."""
    f = self.real["CDLL.__getitem__"](lib, name)
    if isinstance(name, str) and name in self._cb and ctypes.cast(f, ctypes.c_void_p).value == _LIBC_ADDR[name]:
      g = lib._FuncPtr(self._cb_addr[name])
      g.__name__ = name
      return g
    return f


def parse_machine(device: str | None = None, devices: int = 1) -> list[str]:
  """The AMD targets of a mock machine: "mock:gfx1100" (x `devices`) or "mock:gfx1100,gfx942"."""
  s = (device or "mock:gfx1100").strip()
  kind, _, body = s.partition(":")
  targets = [t for t in body.split(",") if t]
  if kind != "mock" or not targets or any(not t.startswith("gfx") for t in targets):
    raise KernelDriverError(f"device {s!r}: interception serves mock AMD machines, 'mock:<gfx target>[,<target>...]'")
  if devices < 1: raise KernelDriverError(f"--devices {devices}: need at least one GPU")
  return targets * devices if len(targets) == 1 else targets


def activate(device: str | None = None, devices: int = 1, kernel=None) -> Interceptor:
  """Start intercepting for a new mock machine (or `kernel`): its GPUs get command processors (amdgpu.attach)."""
  if kernel is None:
    from gputwin.mock.kfd.driver import MockKernel
    from gputwin.mock.amdgpu.gpu import attach
    kernel = MockKernel(parse_machine(device, devices))
    attach(kernel)
  return Interceptor(kernel).activate()


def deactivate() -> None:
  """Stop the active interception, if any."""
  if _active is not None: _active.deactivate()


def current() -> Interceptor | None: return _active
