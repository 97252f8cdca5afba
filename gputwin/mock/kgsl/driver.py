"""MockKGSL: a Linux machine with Qualcomm's downstream kgsl driver and one Adreno (/dev/kgsl-3d0), as one user process
sees it through gputwin's kernel seam (open/close, ioctl, mmap/munmap, sysfs reads, poll).

The ioctl path mirrors kgsl_ioctl_helper(): dispatch on _IOC_NR; copy in min(the kernel's _IOC_SIZE, the user's) bytes
when both commands carry IOC_WRITE (EFAULT if unreadable), run the handler, copy out on success when both carry
IOC_READ; an _IOC_NR with no handler is -ENOIOCTLCMD, which the VFS turns into ENOTTY. Each handler names the kgsl
function (kgsl.c, kgsl_drawobj.c, kgsl_sync.c, adreno.c, adreno_dispatch.c, adreno_drawctxt.c of the downstream
driver) whose checks and errnos it follows; where the mock chooses, the comment says "mock:".

GPU memory is gputwin.mock.vm: an allocation is a BufferObject (memfd pages, or the user's own pages for
MAP_USER_MEM/GPUOBJ_IMPORT) entered in the process's GPUAddressSpace at a driver-chosen GPU address; the CPU maps it
with mmap(fd, id << PAGE_SHIFT) (or its GPU address), as kgsl_mmap's get_mmap_entry accepts both.

Submissions: GPU_COMMAND builds draw objects (sync, command, marker) with per-context timestamps; once a context's head
object's syncpoints are met it goes to the command processor `cp` (any object with `submit(kgsl, submission)`, and
optionally `poll(kgsl) -> bool` that waiters call to let a synchronous CP make progress). The CP calls `retire(sub)`
when the commands are done, or `fault(sub, reason, va, error)`. The default `RetireCP` executes nothing and retires at
once, so the timestamp/fence/syncpoint machinery works before a command processor exists.
"""
from __future__ import annotations
import collections, ctypes, dataclasses, errno, os, select, threading, time
from typing import Callable, Protocol
from gputwin.abi import ioc, kgsl as abi
from gputwin.abi.hostmem import (PAGE_SIZE, PROT_WRITE, HostBuffer, UserPages, copy_from_user, copy_to_user,
                                  host_mmap, host_munmap, host_range_accessible, page_align, user_buffer)
from gputwin.errors import KernelDriverError
from gputwin.mock.vm import BufferObject, GPUAddressSpace

DEV, SYSFS = "/dev/kgsl-3d0", "/sys/class/kgsl/kgsl-3d0"
FD_BASE = 1 << 30                     # mock fds live far above any real fd (as the other mocks')
ENOTSUPP = 524                        # kernel-internal errno some kgsl paths return; userspace sees 524
KGSL_MAX_NUMIBS, KGSL_MAX_SYNCPOINTS = 100000, 32                   # kgsl_drawobj.h / kgsl.h
KGSL_MAX_ALIGN_LOG2 = 25                                            # KGSL_MAX_ALIGN = 32 MiB
KGSL_MAX_CONTEXTS_PER_PROC = 200
KGSL_MEMSTORE_SIZE = 8 * PAGE_SIZE
KGSL_PRIORITY_MAX_RB_LEVELS = 4
KGSL_MEMSTORE_MAX = KGSL_MEMSTORE_SIZE // ctypes.sizeof(abi.kgsl_devmemstore) - 1 - KGSL_PRIORITY_MAX_RB_LEVELS
CTX_PRIORITY_MED = 8                  # mock: the priority of a context created with KGSL_CONTEXT_PRIORITY_UNDEF
IB_MAX_DWORDS = 0xFFFFF               # _verify_ib: the CP's largest IB
# mock: GPU address ranges (the real ones are kgsl_iommu.c's per-target constants): 32-bit user range, 64-bit user
# range, and the global region holding the memstore. UCHE sees GMEM at UCHE_GMEM_VADDR, below all of them.
VA32, VA64, VA_GLOBAL = (0x0100_0000, 0xF800_0000), (0x5_0000_0000, 0x8_0000_0000), 0xFC00_0000
PAGETABLE = (VA32, VA64, (VA_GLOBAL, VA_GLOBAL + 8 * PAGE_SIZE))
UCHE_GMEM_VADDR, UCHE_TRAP_BASE = 0x100000, 0x1_FFFF_FFFF_F000
MEM_LIMIT = 8 << 30                   # mock: bytes of GPU memory one process may hold (ENOMEM beyond)
ALLOC_MASK = (abi.KGSL_MEMFLAGS_GPUREADONLY | abi.KGSL_CACHEMODE_MASK | abi.KGSL_MEMTYPE_MASK | abi.KGSL_MEMALIGN_MASK
              | abi.KGSL_MEMFLAGS_USE_CPU_MAP | abi.KGSL_MEMFLAGS_SECURE | abi.KGSL_MEMFLAGS_FORCE_32BIT
              | abi.KGSL_MEMFLAGS_IOCOHERENT | abi.KGSL_MEMFLAGS_GUARD_PAGE)        # gpumem_alloc_entry
IMPORT_MASK = (abi.KGSL_MEMFLAGS_GPUREADONLY | abi.KGSL_CACHEMODE_MASK | abi.KGSL_MEMTYPE_MASK
               | abi.KGSL_MEMFLAGS_FORCE_32BIT | abi.KGSL_MEMFLAGS_IOCOHERENT)      # _gpuobj_map_useraddr
MAP_USER_MASK = (abi.KGSL_MEMFLAGS_GPUREADONLY | abi.KGSL_MEMTYPE_MASK | abi.KGSL_MEMALIGN_MASK
                 | abi.KGSL_MEMFLAGS_USE_CPU_MAP | abi.KGSL_MEMFLAGS_IOCOHERENT | abi.KGSL_MEMFLAGS_SECURE)
CONTEXT_MASK = (abi.KGSL_CONTEXT_PREAMBLE | abi.KGSL_CONTEXT_NO_GMEM_ALLOC | abi.KGSL_CONTEXT_PER_CONTEXT_TS
                | abi.KGSL_CONTEXT_USER_GENERATED_TS | abi.KGSL_CONTEXT_NO_FAULT_TOLERANCE
                | abi.KGSL_CONTEXT_INVALIDATE_ON_FAULT | abi.KGSL_CONTEXT_CTX_SWITCH | abi.KGSL_CONTEXT_PRIORITY_MASK
                | abi.KGSL_CONTEXT_TYPE_MASK | abi.KGSL_CONTEXT_PWR_CONSTRAINT | abi.KGSL_CONTEXT_IFH_NOP
                | abi.KGSL_CONTEXT_SECURE | abi.KGSL_CONTEXT_PREEMPT_STYLE_MASK | abi.KGSL_CONTEXT_NO_SNAPSHOT
                | abi.KGSL_CONTEXT_SPARSE | abi.KGSL_CONTEXT_LPAC | abi.KGSL_CONTEXT_FAULT_INFO)   # adreno_drawctxt
CMDLIST_FLAGS = abi.KGSL_CMDLIST_IB | abi.KGSL_CMDLIST_CTXTSWITCH_PREAMBLE | abi.KGSL_CMDLIST_IB_PREAMBLE


@dataclasses.dataclass(frozen=True)
class Adreno:
  """One modelled GPU: what KGSL_PROP_DEVICE_INFO and friends report. chip_id is core.major.minor.patch, one byte
  each (a7xx parts after a730 use the newer 0x43.. encoding); gmem and bank facts as the Adreno device tables have
  them; ucode versions are mock values."""
  name: str
  gpu_id: int
  chip_id: int
  gmem_size: int
  highest_bank_bit: int
  ubwc: int
  model: str

  @property
  def gen(self) -> int: return self.gpu_id // 100


TARGETS = {a.name: a for a in (
  Adreno("a630", 630, 0x06030001, 1 << 20, 15, abi.KGSL_UBWC_2_0, "Adreno630v2"),
  Adreno("a660", 660, 0x06060001, 3 << 19, 16, abi.KGSL_UBWC_4_0, "Adreno660v1"),
  Adreno("a730", 730, 0x07030001, 2 << 20, 16, abi.KGSL_UBWC_4_0, "Adreno730v1"),
  Adreno("a740", 740, 0x43050A01, 3 << 20, 16, abi.KGSL_UBWC_4_0, "Adreno740v2"),
)}


@dataclasses.dataclass(eq=False)
class MemEntry(BufferObject):
  """A kgsl_mem_entry: `handle` is its id, `va` its GPU address; `footprint` the VA it occupies (size + guard page)."""
  footprint: int = 0
  metadata: bytes = b""
  pending_free: bool = False


@dataclasses.dataclass(eq=False)
class Fence:
  """A sync_file fence: signalled by a syncsource, a timestamp event or (cancelled) context teardown."""
  name: str
  source: object = None
  signaled: bool = False
  error: int = 0
  callbacks: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class VFile:
  path: str
  kind: str                     # "dev" | "fence"
  fence: Fence | None = None


@dataclasses.dataclass(frozen=True)
class CmdObj:
  """A kgsl_command_object as submitted: an IB (flags KGSL_CMDLIST_*) or a memory object (KGSL_OBJLIST_*)."""
  gpuaddr: int
  size: int
  flags: int
  id: int
  offset: int


@dataclasses.dataclass(eq=False)
class Context:
  """A draw context (adreno_context): timestamps live in the memstore slot of its id."""
  id: int
  flags: int
  priority: int
  owner: VFile
  queued: int = 0               # last timestamp assigned (KGSL_TIMESTAMP_QUEUED)
  invalid: bool = False         # guilty of a fault: submissions and waits fail with EDEADLK
  detached: bool = False
  fault_pending: bool = False   # ADRENO_CONTEXT_FAULT: the next successful wait returns EPROTO
  reset_status: int = abi.KGSL_CTX_STAT_NO_ERROR
  faults: int = 0
  fault_ts: int = 0
  fault_reason: str = ""
  pending: collections.deque = dataclasses.field(default_factory=collections.deque)
  events: list = dataclasses.field(default_factory=list)   # (timestamp, callback(cancelled: bool))

  @property
  def type(self) -> int: return abi.KGSL_CONTEXT_TYPE(self.flags)
  @property
  def rb(self) -> int: return self.priority * KGSL_PRIORITY_MAX_RB_LEVELS // 16   # the ringbuffer it runs on


@dataclasses.dataclass(eq=False)
class Submission:
  """What the command processor gets: one command draw object (or a marker: no IBs) of a context, in timestamp
  order per context. `cmds` are the IBs (KGSL_CMDLIST_* flags; preambles included), `objs` the memory list,
  `profiling` the (gpuaddr) of a KGSL_OBJLIST_PROFILE buffer or None. The CP reads IBs through `vm`."""
  context: Context
  timestamp: int
  flags: int
  cmds: list
  objs: list
  profiling: int | None
  vm: GPUAddressSpace
  queued_ns: int = 0

  @property
  def marker(self) -> bool: return not self.cmds


@dataclasses.dataclass(eq=False)
class _DrawObj:
  kind: str                     # "sync" | "cmd"
  syncs: list                   # ("ts", Context, timestamp) | ("fence", Fence)
  sub: Submission | None = None


class CommandProcessor(Protocol):
  def submit(self, kgsl: "MockKGSL", sub: Submission) -> None: ...


class RetireCP:
  """The default command processor: runs nothing and retires every submission as it arrives."""
  def submit(self, kgsl: "MockKGSL", sub: Submission) -> None: kgsl.retire(sub)


class _Process:
  """kgsl_process_private: memory entries, GPU VM and syncsources of the calling process."""

  def __init__(self, target: Adreno):
    self.vm = GPUAddressSpace(f"{target.name}@kgsl")
    self.entries: dict[int, MemEntry] = {}
    self.ranges: list[tuple[int, int]] = []          # reserved [start, end) GPU VA, sorted
    self.syncsources: dict[int, set] = {}            # id -> its unsignalled fences
    self.used = 0


def _ids(d: dict, start: int = 1) -> int: return next(i for i in range(start, len(d) + start + 1) if i not in d)


class MockKGSL:
  """The mock kgsl of one machine with one Adreno `target` (a630, a660, a730, a740). `cp`: the command processor
  (default RetireCP). sync=True: whoever waits calls `cp.poll(self)` to let a synchronous CP make progress."""

  def __init__(self, target: str = "a630", cp: CommandProcessor | None = None, sync: bool = False):
    if target not in TARGETS:
      raise KernelDriverError(f"mock KGSL: unknown target {target!r}; known: {sorted(TARGETS)}")
    self.target, self.sync = TARGETS[target], sync
    self.targets = [target]
    self.cp: CommandProcessor = cp or RetireCP()
    self._cv = threading.Condition(threading.RLock())
    self._fds: dict[int, VFile] = {}
    self._next_fd = FD_BASE
    self.proc: _Process | None = None
    self.contexts: dict[int, Context] = {}
    self.memstore = HostBuffer(KGSL_MEMSTORE_SIZE, "kgsl-memstore")
    self.memstore_va = VA_GLOBAL
    self._memstore_bo = BufferObject(0, 0, VA_GLOBAL, KGSL_MEMSTORE_SIZE, 0, VA_GLOBAL, self.memstore, shared=True)
    self._kicking, self._rekick = threading.local(), False
    self._dispatch = threading.RLock()
    self._gpu_errors: dict[int, Exception] = {}
    self._handlers = {nr: getattr(self, "_" + name.lower(), None) for name, nr, _, _ in abi.IOCTLS}
    self._handlers[ioc.IOC_NR(abi.IOCTL_KGSL_DEVICE_WAITTIMESTAMP)] = lambda a, f: -errno.ENOTTY  # adreno: no context

  def __repr__(self): return f"MockKGSL({self.target.name})"

  # ================================================================ kernel seam
  def open(self, path: str, flags: int = os.O_RDWR) -> int:
    if os.path.normpath(path) != DEV: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    with self._cv:
      if self.proc is None:   # kgsl_process_private_open: the first open of the process creates its pagetable
        self.proc = _Process(self.target)
        self.proc.vm.map(VA_GLOBAL, KGSL_MEMSTORE_SIZE, self._memstore_bo)   # globals are in every pagetable
      return self._new_fd(VFile(DEV, "dev"))

  def _new_fd(self, f: VFile) -> int:
    fd, self._next_fd = self._next_fd, self._next_fd + 1
    self._fds[fd] = f
    return fd

  def close(self, fd: int) -> None:
    """kgsl_release: the contexts the file created are detached; the process's memory and syncsources go with its
    last file."""
    with self._cv:
      f = self._fds.pop(fd, None)
      if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
      if f.kind != "dev": return
      for c in [c for c in self.contexts.values() if c.owner is f]: self._detach(c)
      if not any(v.kind == "dev" for v in self._fds.values()): self._teardown()
      self._cv.notify_all()

  def ioctl(self, fd: int, request: int, arg=None) -> int:
    f = self._fds.get(fd)
    if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    if f.kind != "dev": raise OSError(errno.ENOTTY, "mock sync_file fds implement no ioctls")
    nr, usize = ioc.IOC_NR(request), ioc.IOC_SIZE(request)
    row = abi.IOCTL_BY_NR.get(nr)
    if row is None:   # kgsl_ioctl_helper and adreno_ioctl know no such _IOC_NR: -ENOIOCTLCMD
      raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
    name, _, kdir, T = row
    handler = self._handlers[nr]
    # mock: a number kgsl knows but the mock does not model (perfcounters, sparse, timelines, ...) is EOPNOTSUPP
    if handler is None: raise OSError(errno.EOPNOTSUPP, f"IOCTL_KGSL_{name}: not modelled by the mock")
    udir, ksize = ioc.IOC_DIR(request), ctypes.sizeof(T)
    n = min(usize, ksize)
    addr, avail = user_buffer(arg, usize)
    kdata = ctypes.create_string_buffer(ksize)
    if kdir & udir & ioc.IOC_WRITE and n:
      raw = self._read_user(addr, n) if avail >= n else None
      if raw is None: raise OSError(errno.EFAULT, f"IOCTL_KGSL_{name}: argument unreadable")
      ctypes.memmove(kdata, raw, n)
    args = T.from_buffer(kdata)
    with self._cv:
      ret = handler(args, f)
    self._kick()
    if ret < 0: raise OSError(-ret, f"IOCTL_KGSL_{name}: {os.strerror(-ret)}")
    if kdir & udir & ioc.IOC_READ and n:
      if avail < n or not self._write_user(addr, kdata.raw[:n]):   # copy_to_user fails: the effects stay
        raise OSError(errno.EFAULT, f"IOCTL_KGSL_{name}: argument unwritable")
    return ret

  def mmap(self, fd: int, offset: int, length: int, prot: int, flags: int, addr: int = 0) -> int:
    """kgsl_mmap: the memstore at its token offset (read-only), else the entry whose id is offset >> PAGE_SHIFT or
    whose GPU address is offset (get_mmap_entry)."""
    if fd == -1: return host_mmap(addr, length, prot, flags, -1, offset)
    f = self._fds.get(fd)
    if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    with self._cv:
      target = -errno.ENODEV if f.kind != "dev" else self._mmap_target(offset, length, prot)
    if isinstance(target, int): raise OSError(-target, os.strerror(-target))
    return target.map_again(addr, length, prot, flags, 0)

  def _mmap_target(self, offset: int, length: int, prot: int) -> HostBuffer | int:
    if offset == self.memstore_va:     # kgsl_mmap_memstore
      if prot & PROT_WRITE: return -errno.EPERM
      return self.memstore if 0 < length <= KGSL_MEMSTORE_SIZE else -errno.EINVAL
    if offset & (PAGE_SIZE - 1): return -errno.EINVAL
    e = self._entry(offset >> 12) or self._find(offset)
    if e is None: return -errno.EINVAL
    if e.flags & abi.KGSL_MEMFLAGS_USERMEM_MASK: return -errno.EBUSY      # user memory is never remapped
    if length not in (e.size, e.footprint): return -errno.ERANGE
    return e.host

  def munmap(self, addr: int, length: int) -> None: host_munmap(addr, length)

  def read_text(self, path: str) -> str:
    files = {f"{SYSFS}/gpu_model": self.target.model + "\n", f"{SYSFS}/gmem_size": f"{self.target.gmem_size}\n"}
    if os.path.normpath(path) not in files: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return files[os.path.normpath(path)]

  def listdir(self, path: str) -> list[str]:
    if os.path.normpath(path) == SYSFS: return ["gmem_size", "gpu_model"]
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)

  def exists(self, path: str) -> bool: return os.path.normpath(path) in (DEV, SYSFS, f"{SYSFS}/gpu_model",
                                                                          f"{SYSFS}/gmem_size")

  def poll(self, fds: list[int], events: int = select.POLLIN, timeout_ms: int = 0) -> list[tuple[int, int]]:
    """/dev/kgsl-3d0 has no poll op (always ready); a fence fd is POLLIN once signalled (sync_file_poll)."""
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms >= 0 else None

    def ready():
      out = []
      for fd in fds:
        f = self._fds.get(fd)
        if f is None: out.append((fd, select.POLLNVAL))
        elif f.kind == "dev": out.append((fd, events & (select.POLLIN | select.POLLOUT | select.POLLRDNORM)))
        elif f.fence.signaled: out.append((fd, select.POLLIN & events))
      return [r for r in out if r[1]]
    with self._cv:
      while not (r := ready()):
        if self.sync and self._cp_poll(): continue
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0: break
        self._cv.wait(left)
      return r

  def gpu_error(self, gpu_id: int, va: int) -> Exception | None:
    with self._cv: return self._gpu_errors.get(va)

  def shutdown(self):
    with self._cv:
      for fd in list(self._fds):
        if fd in self._fds: self.close(fd)
      self.memstore.close()

  # ================================================================ GPU side (for the command processor)
  @property
  def vm(self) -> GPUAddressSpace:
    if self.proc is None: raise LookupError("no kgsl process: /dev/kgsl-3d0 is not open")
    return self.proc.vm

  def read_memstore(self, ctx_id: int, field: str) -> int:
    o = abi.KGSL_MEMSTORE_OFFSET(ctx_id, field)
    return int.from_bytes(self.memstore.view[o:o + 4], "little")

  def _write_memstore(self, ctx_id: int, field: str, v: int):
    o = abi.KGSL_MEMSTORE_OFFSET(ctx_id, field)
    self.memstore.view[o:o + 4] = (v & 0xFFFFFFFF).to_bytes(4, "little")

  def memstore_addr(self, ctx_id: int, field: str) -> int:
    """GPU address of a context's memstore field (where a CP writes timestamps with CP_EVENT_WRITE/CP_MEM_WRITE)."""
    return self.memstore_va + abi.KGSL_MEMSTORE_OFFSET(ctx_id, field)

  def retire(self, sub: Submission) -> None:
    """The CP finished `sub`: the context's consumed/retired timestamps advance to it (never backwards), the
    profiling buffer is filled, timestamp events fire, waiters wake, and syncpoint-blocked work is dispatched."""
    with self._cv:
      c = sub.context
      if not c.detached and not c.invalid:
        for field in ("soptimestamp", "eoptimestamp"):
          if abi.timestamp_cmp(sub.timestamp, self.read_memstore(c.id, field)) > 0:
            self._write_memstore(c.id, field, sub.timestamp)
        if sub.profiling is not None: self._profile(sub)
        self._fire(c)
      self._cv.notify_all()
    self._kick()

  def fault(self, sub: Submission, reason: str, va: int | None = None, error: Exception | None = None) -> None:
    """The CP hit a fault running `sub` (bad packet, page fault, shader error): its context is marked guilty and
    invalid (adreno_drawctxt_set_guilty + invalidate: pending work dropped, memstore advanced to the last queued
    timestamp so waiters wake with EDEADLK), every other context learns of the fault (EPROTO on its next wait, reset
    status INNOCENT). `error` is kept for gpu_error(va)."""
    with self._cv:
      c = sub.context
      if va is not None and error is not None: self._gpu_errors[va] = error
      while len(self._gpu_errors) > 64: self._gpu_errors.pop(next(iter(self._gpu_errors)))
      if c.detached or c.invalid: return   # its id (and memstore slot) may already belong to a new context
      c.faults, c.fault_ts, c.reset_status = c.faults + 1, sub.timestamp, abi.KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT
      c.fault_reason = reason
      for o in self.contexts.values():
        if o is not c: o.fault_pending, o.reset_status = True, abi.KGSL_CTX_STAT_INNOCENT_CONTEXT_RESET_EXT
      self._invalidate(c)
      self._cv.notify_all()
    self._kick()

  def _invalidate(self, c: Context):
    c.invalid = True
    c.pending.clear()
    self._write_memstore(c.id, "soptimestamp", c.queued)
    self._write_memstore(c.id, "eoptimestamp", c.queued)
    self._fire(c, cancel=True)

  def _profile(self, sub: Submission):
    ns = time.time_ns()
    ticks = time.monotonic_ns() * 192 // 10000   # mock: the 19.2 MHz always-on counter
    buf = abi.kgsl_cmdbatch_profiling_buffer(ns // 10**9, ns % 10**9, sub.queued_ns * 192 // 10000, ticks, ticks)
    try: self.proc.vm.write(sub.profiling, bytes(buf))
    except Exception: pass   # a bad profiling address is the CP's problem, not the retire path's

  def retired(self, c: Context, ts: int) -> bool:
    return abi.timestamp_cmp(self.read_memstore(c.id, "eoptimestamp"), ts) >= 0

  def _fire(self, c: Context, cancel: bool = False):
    """kgsl_process_event_group: callbacks of retired timestamps (all of them when the context goes away)."""
    due = [e for e in c.events if cancel or self.retired(c, e[0])]
    c.events = [e for e in c.events if e not in due]
    for _, cb in due: cb(cancel)

  def _cp_poll(self) -> bool:
    p = getattr(self.cp, "poll", None)
    if p is None: return False
    self._cv.release()
    try: return bool(p(self))
    finally: self._cv.acquire()

  # ---------------------------------------------------------------- the dispatcher
  def _ready(self, o: _DrawObj) -> bool:
    for s in o.syncs:
      if s[0] == "ts" and not (s[1].detached or s[1].invalid or self.retired(s[1], s[2])): return False
      if s[0] == "fence" and not s[1].signaled: return False
    return True

  def _kick(self):
    """Hand every context's ready draw objects, in order, to the CP (outside the driver lock). Re-entered from a CP
    that retires inside submit(): the outer call loops instead of recursing."""
    if getattr(self._kicking, "on", False):
      self._rekick = True
      return
    self._kicking.on = True
    try:
      with self._dispatch:
        while True:
          self._rekick, go = False, []
          with self._cv:
            for c in sorted(self.contexts.values(), key=lambda c: c.id):
              while c.pending and self._ready(c.pending[0]):
                o = c.pending.popleft()
                if o.sub is not None: go.append(o.sub)
          for sub in go: self.cp.submit(self, sub)
          if not go and not self._rekick: break
    finally:
      self._kicking.on = False

  # ================================================================ helpers
  def _entry(self, id_: int) -> MemEntry | None:
    e = self.proc.entries.get(id_) if self.proc and id_ else None
    return None if e is None or e.pending_free else e

  def _find(self, gpuaddr: int) -> MemEntry | None:
    """kgsl_sharedmem_find: the entry whose [gpuaddr, gpuaddr + size) holds the address."""
    m = self.proc.vm.find(gpuaddr) if self.proc else None
    return m.bo if m is not None and isinstance(m.bo, MemEntry) and not m.bo.pending_free else None

  def _ctx(self, f: VFile, id_: int) -> Context | None:
    """kgsl_context_get_owner: a live context this file created."""
    c = self.contexts.get(id_)
    return c if c is not None and c.owner is f and not c.detached else None

  # copy_from_user / copy_to_user (process_vm_readv/writev): EFAULT, never a SIGSEGV, for pages that are unmapped,
  # PROT_NONE or (writes) read-only, even when another thread unmaps them during the ioctl
  def _read_user(self, addr: int, n: int) -> bytes | None: return copy_from_user(addr, n)
  def _write_user(self, addr: int, data: bytes) -> bool: return copy_to_user(addr, data)

  def _copy_from_user(self, T, addr: int, usize: int):
    """kgsl_copy_from_user: min(sizeof, usize) bytes into a zeroed struct; None -> EFAULT."""
    n = min(ctypes.sizeof(T), usize)
    raw = self._read_user(addr, n)
    return None if raw is None else T.from_buffer_copy(raw.ljust(ctypes.sizeof(T), b"\0"))

  def _alloc_va(self, size: int, align: int, force32: bool) -> int | None:
    lo, hi = VA32 if force32 else VA64
    pos = lo
    for s, e in self.proc.ranges:
      pos = (pos + align - 1) & ~(align - 1)
      if e <= pos: continue
      if pos + size <= s: break
      pos = max(pos, e)
    pos = (pos + align - 1) & ~(align - 1)
    return pos if pos + size <= hi else None

  def _new_entry(self, size: int, flags: int, user: int = 0) -> MemEntry | int:
    """kgsl_memdesc_init + kgsl_allocate_user/kgsl_setup_useraddr + kgsl_mem_entry_attach_and_map."""
    p = self.proc
    flags &= ~abi.KGSL_MEMFLAGS_USE_CPU_MAP   # kgsl_mmu_use_cpu_map() is false here: no SVM (mock)
    align = max(abi.KGSL_MEMALIGN(flags), 12)  # kgsl_memdesc_set_align: at least a page, reported back in flags
    flags = (flags & ~abi.KGSL_MEMALIGN_MASK) | (align << abi.KGSL_MEMALIGN_SHIFT)
    footprint = size + (PAGE_SIZE if flags & abi.KGSL_MEMFLAGS_GUARD_PAGE else 0)
    if p.used + size > MEM_LIMIT: return -errno.ENOMEM
    va = self._alloc_va(footprint, 1 << align, bool(flags & abi.KGSL_MEMFLAGS_FORCE_32BIT))
    if va is None: return -errno.ENOMEM
    try: host, pages = (None, UserPages(user, size)) if user else (HostBuffer(size, f"kgsl-{self.target.name}"), None)
    except OSError: return -errno.EFAULT if user else -errno.ENOMEM
    id_ = _ids(p.entries)
    e = MemEntry(id_, 0, va, size, flags, id_ << 12, host, pages=pages, footprint=footprint)
    if not p.vm.map(va, size, e):
      e.release()
      return -errno.ENOMEM
    p.entries[id_] = e
    p.ranges.append((va, va + footprint))
    p.ranges.sort()
    p.used += size
    return e

  def _free_entry(self, e: MemEntry):
    p = self.proc
    if p is None or p.entries.get(e.handle) is not e: return
    del p.entries[e.handle]
    p.vm.unmap(e.va)
    p.ranges.remove((e.va, e.va + e.footprint))
    p.used -= e.size
    e.release()

  def _detach(self, c: Context):
    """kgsl_context_detach: queued draw objects are dropped, events cancelled (fences signal), the id is freed."""
    c.detached = True
    c.pending.clear()
    self._fire(c, cancel=True)
    self.contexts.pop(c.id, None)

  def _teardown(self):
    p, self.proc = self.proc, None
    if p is None: return
    for e in list(p.entries.values()): e.release()
    for fences in p.syncsources.values():
      for fe in fences: self._signal(fe)

  def _signal(self, fe: Fence, error: int = 0):
    if fe.signaled: return False
    fe.signaled, fe.error = True, error
    for cb in fe.callbacks: cb()
    fe.callbacks.clear()
    self._cv.notify_all()
    return True

  def _fence_fd(self, fe: Fence) -> int: return self._new_fd(VFile("sync_file", "fence", fe))

  def _fence_of(self, fd: int) -> Fence | None:
    f = self._fds.get(fd)
    return f.fence if f is not None and f.kind == "fence" else None

  # ================================================================ ioctl handlers (return 0 or -errno)
  def _props(self) -> dict:
    t = self.target
    u32 = ctypes.c_uint32
    return {
      abi.KGSL_PROP_DEVICE_INFO: lambda: abi.kgsl_devinfo(device_id=1, chip_id=t.chip_id, mmu_enabled=1,
                                                          gmem_gpubaseaddr=0, gpu_id=t.gpu_id,
                                                          gmem_sizebytes=t.gmem_size),
      abi.KGSL_PROP_DEVICE_SHADOW: lambda: abi.kgsl_shadowprop(
        gpuaddr=self.memstore_va, size=KGSL_MEMSTORE_SIZE,
        flags=abi.KGSL_FLAGS_INITIALIZED | abi.KGSL_FLAGS_PER_CONTEXT_TIMESTAMPS),
      abi.KGSL_PROP_MMU_ENABLE: lambda: u32(1), abi.KGSL_PROP_INTERRUPT_WAITS: lambda: u32(1),
      abi.KGSL_PROP_VERSION: lambda: abi.kgsl_version(abi.KGSL_VERSION_MAJOR, abi.KGSL_VERSION_MINOR, 3, 1),
      abi.KGSL_PROP_UCHE_GMEM_VADDR: lambda: ctypes.c_uint64(UCHE_GMEM_VADDR),
      abi.KGSL_PROP_UCODE_VERSION: lambda: abi.kgsl_ucode_version(0x016DC094 + t.gen, 0x016DC112 + t.gen),
      abi.KGSL_PROP_HIGHEST_BANK_BIT: lambda: u32(t.highest_bank_bit),
      abi.KGSL_PROP_DEVICE_BITNESS: lambda: u32(48), abi.KGSL_PROP_MIN_ACCESS_LENGTH: lambda: u32(32),
      abi.KGSL_PROP_UBWC_MODE: lambda: u32(t.ubwc), abi.KGSL_PROP_SPEED_BIN: lambda: u32(0),
      abi.KGSL_PROP_SECURE_CTXT_SUPPORT: lambda: u32(0), abi.KGSL_PROP_IS_LPAC_ENABLED: lambda: u32(0),
      abi.KGSL_PROP_IS_RAYTRACING_ENABLED: lambda: u32(0), abi.KGSL_PROP_GPU_MODEL:
        lambda: abi.kgsl_gpu_model(t.model.encode()),
      abi.KGSL_PROP_GPU_VA64_SIZE: lambda: ctypes.c_uint64(VA64[1] - VA64[0]),
      abi.KGSL_PROP_UCHE_TRAP_BASE: lambda: ctypes.c_uint64(UCHE_TRAP_BASE),
      abi.KGSL_PROP_VK_DEVICE_ID: lambda: u32(t.chip_id),
    }

  # kgsl_ioctl_device_getproperty / adreno_getproperty: a property is copied only when sizebytes is its exact size
  # (copy_prop: EINVAL otherwise), to `value` (EFAULT); an unknown type is EINVAL.
  def _device_getproperty(self, a, f):
    t = a.type
    if t == abi.KGSL_PROP_GPU_RESET_STAT: return self._prop_reset_stat(a, f)
    if t == abi.KGSL_PROP_CONTEXT_PROPERTY: return self._prop_context(a, f)
    if t == abi.KGSL_PROP_QUERY_CAPABILITIES: return self._prop_caps(a)
    make = self._props().get(t)
    if make is None: return -errno.EINVAL
    v = make()
    if a.sizebytes != ctypes.sizeof(v): return -errno.EINVAL
    return 0 if self._write_user(a.value, bytes(v)) else -errno.EFAULT

  # KGSL_PROP_GPU_RESET_STAT: value holds a context id in and its reset status out, which is then cleared
  def _prop_reset_stat(self, a, f):
    if a.sizebytes != 4: return -errno.EINVAL
    raw = self._read_user(a.value, 4)
    if raw is None: return -errno.EFAULT
    c = self._ctx(f, int.from_bytes(raw, "little"))
    if c is None: return -errno.EINVAL
    if not self._write_user(a.value, c.reset_status.to_bytes(4, "little")): return -errno.EFAULT
    c.reset_status = abi.KGSL_CTX_STAT_NO_ERROR
    return 0

  # KGSL_PROP_CONTEXT_PROPERTY (kgsl_get_ctxt_properties): KGSL_CONTEXT_PROP_FAULTS -> {faults, fault timestamp}
  def _prop_context(self, a, f):
    if a.sizebytes != ctypes.sizeof(abi.kgsl_context_property): return -errno.EINVAL
    q = self._copy_from_user(abi.kgsl_context_property, a.value, a.sizebytes)
    if q is None: return -errno.EFAULT
    c = self._ctx(f, q.contextid)
    if c is None or q.type != abi.KGSL_CONTEXT_PROP_FAULTS: return -errno.EINVAL
    out = abi.kgsl_context_property_fault(c.faults, c.fault_ts)
    if q.size < ctypes.sizeof(out): return -errno.EINVAL
    return 0 if self._write_user(q.data, bytes(out)) else -errno.EFAULT

  # KGSL_PROP_QUERY_CAPABILITIES / KGSL_QUERY_CAPS_PROPERTIES: count 0 asks for the number of properties
  def _prop_caps(self, a):
    if a.sizebytes != ctypes.sizeof(abi.kgsl_capabilities): return -errno.EINVAL
    q = self._copy_from_user(abi.kgsl_capabilities, a.value, a.sizebytes)
    if q is None: return -errno.EFAULT
    if q.querytype != abi.KGSL_QUERY_CAPS_PROPERTIES: return -errno.EOPNOTSUPP
    props = sorted([*self._props(), abi.KGSL_PROP_GPU_RESET_STAT, abi.KGSL_PROP_CONTEXT_PROPERTY,
                    abi.KGSL_PROP_QUERY_CAPABILITIES])
    sz = ctypes.sizeof(abi.kgsl_capabilities_properties)
    if q.size == 0:
      q.size = sz
      return 0 if self._write_user(a.value, bytes(q)) else -errno.EFAULT
    if q.size < sz: return -errno.EINVAL
    cp = self._copy_from_user(abi.kgsl_capabilities_properties, q.data, sz)
    if cp is None: return -errno.EFAULT
    n = len(props) if cp.count == 0 else min(cp.count, len(props))
    if cp.count and not self._write_user(cp.list, b"".join(p.to_bytes(4, "little") for p in props[:n])):
      return -errno.EFAULT
    cp.count = n
    return 0 if self._write_user(q.data, bytes(cp)) else -errno.EFAULT

  # kgsl_ioctl_drawctxt_create + adreno_drawctxt_create: unknown flags are dropped; legacy context switching (no
  # PREAMBLE or no NO_GMEM_ALLOC) -> EINVAL; SECURE (no secure MMU) and LPAC (not enabled) -> EOPNOTSUPP; ids come
  # from 1 (0 is the global memstore slot), ENOSPC when the memstore or the per-process count is exhausted.
  def _drawctxt_create(self, a, f):
    flags = a.flags & CONTEXT_MASK
    if not flags & abi.KGSL_CONTEXT_PREAMBLE or not flags & abi.KGSL_CONTEXT_NO_GMEM_ALLOC: return -errno.EINVAL
    if flags & (abi.KGSL_CONTEXT_SECURE | abi.KGSL_CONTEXT_LPAC): return -errno.EOPNOTSUPP
    if len(self.contexts) >= KGSL_MAX_CONTEXTS_PER_PROC: return -errno.ENOSPC
    id_ = _ids(self.contexts)
    if id_ >= KGSL_MEMSTORE_MAX: return -errno.ENOSPC
    prio = abi.KGSL_CONTEXT_PRIORITY(flags) or CTX_PRIORITY_MED
    flags |= abi.KGSL_CONTEXT_PER_CONTEXT_TS        # every context has its own timestamps
    self.contexts[id_] = Context(id_, flags, prio, f)
    for field in ("soptimestamp", "eoptimestamp"): self._write_memstore(id_, field, 0)
    a.drawctxt_id = id_
    return 0

  # kgsl_ioctl_drawctxt_destroy: not a live context of this file -> EINVAL
  def _drawctxt_destroy(self, a, f):
    c = self._ctx(f, a.drawctxt_id)
    if c is None: return -errno.EINVAL
    self._detach(c)
    return 0

  def _gpumem_entry_flags(self, flags: int) -> int | None:
    """gpumem_alloc_entry's flag handling: unknown bits dropped, SECURE unsupported (None), alignment capped."""
    flags &= ALLOC_MASK
    if flags & abi.KGSL_MEMFLAGS_SECURE: return None
    if abi.KGSL_MEMALIGN(flags) >= KGSL_MAX_ALIGN_LOG2:
      flags = (flags & ~abi.KGSL_MEMALIGN_MASK) | (KGSL_MAX_ALIGN_LOG2 << abi.KGSL_MEMALIGN_SHIFT)
    return flags

  def _alloc(self, size: int, flags: int) -> MemEntry | int:
    """gpumem_alloc_entry: SECURE -> EOPNOTSUPP; size 0 or above 4 GiB -> EINVAL; no memory or VA -> ENOMEM."""
    flags = self._gpumem_entry_flags(flags)
    if flags is None: return -errno.EOPNOTSUPP
    if size == 0 or size > 0xFFFFFFFF: return -errno.EINVAL
    return self._new_entry(page_align(size), flags)

  # kgsl_ioctl_gpuobj_alloc: size, flags, mmapsize and id come back; metadata (at most 64 bytes) is kept.
  # mock: KGSL_MEMFLAGS_VBO (virtual buffer objects) is not modelled -> EOPNOTSUPP
  def _gpuobj_alloc(self, a, f):
    if a.flags & abi.KGSL_MEMFLAGS_VBO: return -errno.EOPNOTSUPP
    e = self._alloc(a.size, a.flags)
    if isinstance(e, int): return e
    e.metadata = self._read_user(a.metadata, min(a.metadata_len, abi.KGSL_GPUOBJ_ALLOC_METADATA_MAX)) or b""
    a.size, a.flags, a.mmapsize, a.id = e.size, e.flags, e.footprint, e.handle
    return 0

  # kgsl_ioctl_gpumem_alloc_id: the 32-bit flags variant, returning the GPU address too
  def _gpumem_alloc_id(self, a, f):
    e = self._alloc(a.size, a.flags)
    if isinstance(e, int): return e
    a.id, a.flags, a.size, a.mmapsize, a.gpuaddr = e.handle, e.flags & 0xFFFFFFFF, e.size, e.footprint, e.va
    return 0

  # kgsl_ioctl_gpumem_alloc (legacy): GPU address out
  def _gpumem_alloc(self, a, f):
    e = self._alloc(a.size, a.flags)
    if isinstance(e, int): return e
    a.gpuaddr, a.size, a.flags = e.va, e.size, e.flags & 0xFFFFFFFF
    return 0

  # kgsl_ioctl_gpuobj_free: unknown id -> EINVAL; without KGSL_GPUOBJ_FREE_ON_EVENT at once; otherwise when a
  # timestamp of one of the caller's contexts retires (kgsl_add_event refuses a timestamp not yet queued: EINVAL) or
  # a fence signals (a fd that is no sync_file: EINVAL); any other event type -> EINVAL.
  def _gpuobj_free(self, a, f):
    e = self._entry(a.id)
    if e is None: return -errno.EINVAL
    if not a.flags & abi.KGSL_GPUOBJ_FREE_ON_EVENT:
      self._free_entry(e)
      return 0
    if a.type == abi.KGSL_GPU_EVENT_TIMESTAMP:
      ev = self._copy_from_user(abi.kgsl_gpu_event_timestamp, a.priv, a.len)
      if ev is None: return -errno.EFAULT
      c = self._ctx(f, ev.context_id)
      if c is None: return -errno.EINVAL
      ret = self._add_event(c, ev.timestamp, lambda cancel: self._free_entry(e))
      if ret == 0: e.pending_free = True
      return ret
    if a.type == abi.KGSL_GPU_EVENT_FENCE:
      ev = self._copy_from_user(abi.kgsl_gpu_event_fence, a.priv, a.len)
      if ev is None: return -errno.EFAULT
      fe = self._fence_of(ev.fd)
      if fe is None: return -errno.EINVAL
      e.pending_free = True
      if fe.signaled: self._free_entry(e)
      else: fe.callbacks.append(lambda: self._free_entry(e))
      return 0
    return -errno.EINVAL

  # kgsl_ioctl_gpumem_free_id / kgsl_ioctl_sharedmem_free (any address inside the object): unknown -> EINVAL
  def _gpumem_free_id(self, a, f):
    e = self._entry(a.id)
    if e is None: return -errno.EINVAL
    self._free_entry(e)
    return 0

  def _sharedmem_free(self, a, f):
    e = self._find(a.gpuaddr)
    if e is None: return -errno.EINVAL
    self._free_entry(e)
    return 0

  # kgsl_ioctl_gpuobj_info: id 0 or unknown -> EINVAL; va_addr is always 0 (the kernel does not track CPU mappings)
  def _gpuobj_info(self, a, f):
    e = self._entry(a.id)
    if e is None: return -errno.EINVAL
    a.gpuaddr, a.flags, a.size, a.va_len, a.va_addr = e.va, e.flags, e.size, e.footprint, 0
    return 0

  # kgsl_ioctl_gpumem_get_info: by id when non-zero, else by GPU address; unknown -> EINVAL
  def _gpumem_get_info(self, a, f):
    e = self._entry(a.id) if a.id else self._find(a.gpuaddr)
    if e is None: return -errno.EINVAL
    a.gpuaddr, a.id, a.flags, a.size, a.mmapsize, a.useraddr = e.va, e.handle, e.flags & 0xFFFFFFFF, e.size, \
      e.footprint, 0
    return 0

  # kgsl_ioctl_gpumem_sync_cache / kgsl_ioctl_gpuobj_sync: unknown objects -> EINVAL; the mock's memory is coherent
  def _gpumem_sync_cache(self, a, f):
    return 0 if (self._entry(a.id) if a.id else self._find(a.gpuaddr)) is not None else -errno.EINVAL

  def _gpuobj_sync(self, a, f):
    if a.count == 0: return 0
    if a.obj_len == 0 or a.objs == 0: return -errno.EINVAL
    for i in range(a.count):
      o = self._copy_from_user(abi.kgsl_gpuobj_sync_obj, a.objs + i * a.obj_len, a.obj_len)
      if o is None: return -errno.EFAULT
      if self._entry(o.id) is None: return -errno.EINVAL
    return 0

  def _useraddr(self, hostptr: int, offset: int, size: int, flags: int) -> MemEntry | int:
    """kgsl_setup_anon_useraddr: size 0, an offset or an unaligned size -> EINVAL; pages not mapped readable, and
    writable unless GPUREADONLY (check_vma_flags; memdesc_sg_virt pins them with get_user_pages) -> EFAULT. mock: the
    address must be page aligned too (EINVAL). kgsl keeps the pages pinned until the entry is freed; the mock reaches
    them as hostmem.UserPages does (shared pages: still, whatever the process does to its range; private pages: a
    context fault once the process unmapped or protected them), never through the process's address."""
    if size == 0 or offset != 0 or size & (PAGE_SIZE - 1) or hostptr & (PAGE_SIZE - 1): return -errno.EINVAL
    if size > 0xFFFFFFFF: return -errno.EINVAL
    if not host_range_accessible(hostptr, size, write=not flags & abi.KGSL_MEMFLAGS_GPUREADONLY): return -errno.EFAULT
    return self._new_entry(size, flags | abi.KGSL_MEMFLAGS_USERMEM_ADDR, user=hostptr)

  def _dmabuf(self, fd: int) -> int:
    """dma_buf_get: a file that is no dma-buf -> EINVAL, no file -> EBADF (the mock has no dma-bufs)."""
    return -errno.EINVAL if fd in self._fds else -errno.EBADF

  # kgsl_ioctl_gpuobj_import: ADDR imports priv_len bytes at the virtaddr read from priv (_gpuobj_map_useraddr);
  # DMABUF needs a dma-buf fd; any other type -> ENOTSUPP (524).
  def _gpuobj_import(self, a, f):
    if a.type == abi.KGSL_USER_MEM_TYPE_DMABUF:
      d = self._copy_from_user(abi.kgsl_gpuobj_import_dma_buf, a.priv, a.priv_len)
      return -errno.EFAULT if d is None else self._dmabuf(d.fd)
    if a.type != abi.KGSL_USER_MEM_TYPE_ADDR: return -ENOTSUPP
    u = self._copy_from_user(abi.kgsl_gpuobj_import_useraddr, a.priv, a.priv_len)
    if u is None: return -errno.EFAULT
    e = self._useraddr(u.virtaddr, 0, a.priv_len, a.flags & IMPORT_MASK)
    if isinstance(e, int): return e
    a.id = e.handle
    return 0

  # kgsl_ioctl_map_user_mem: SECURE -> EOPNOTSUPP; memtype ADDR maps hostptr/len (offset must be 0); ION/dma-buf
  # needs a dma-buf fd; other memtypes -> EINVAL. The GPU address comes back.
  def _map_user_mem(self, a, f):
    if a.flags & abi.KGSL_MEMFLAGS_SECURE: return -errno.EOPNOTSUPP
    if a.memtype == abi.KGSL_USER_MEM_TYPE_ADDR:
      e = self._useraddr(a.hostptr, a.offset, a.len, a.flags & MAP_USER_MASK)
    elif a.memtype == abi.KGSL_USER_MEM_TYPE_ION: e = -errno.EINVAL if a.offset else self._dmabuf(a.fd)
    else: e = -errno.EINVAL
    if isinstance(e, int): return e
    a.gpuaddr = e.va
    return 0

  # ---------------------------------------------------------------- submission
  def _cmd_list(self, ptr: int, size: int, count: int, need: int, what: str) -> list[CmdObj] | int:
    """kgsl_drawobj_cmd_add_cmdlist / _add_memlist: _verify_input_list (all zero is an empty list; any one zero is
    EINVAL), each entry copied with kgsl_copy_from_user (EFAULT) and its flags checked (EINVAL)."""
    if count == 0 and ptr == 0 and size == 0: return []
    if count == 0 or ptr == 0 or size == 0: return -errno.EINVAL
    out = []
    for i in range(count):
      o = self._copy_from_user(abi.kgsl_command_object, ptr + i * size, size)
      if o is None: return -errno.EFAULT
      if not o.flags & need: return -errno.EINVAL
      out.append(CmdObj(o.gpuaddr, o.size, o.flags, o.id, o.offset))
    return out

  def _sync_list(self, f: VFile, ctx: Context, ptr: int, size: int, count: int) -> list | int:
    """kgsl_drawobj_sync_add_synclist: a timestamp syncpoint names any live context (EINVAL otherwise) and, on the
    submitting context, no timestamp beyond the queued one (EINVAL); a fence syncpoint needs a sync_file fd (EINVAL);
    mock: timeline syncpoints (no timelines are modelled) -> EINVAL, as for an unknown timeline."""
    if count == 0 and ptr == 0 and size == 0: return []
    if count == 0 or ptr == 0 or size == 0: return -errno.EINVAL
    out = []
    for i in range(count):
      s = self._copy_from_user(abi.kgsl_command_syncpoint, ptr + i * size, size)
      if s is None: return -errno.EFAULT
      if s.type == abi.KGSL_CMD_SYNCPOINT_TYPE_TIMESTAMP:
        t = self._copy_from_user(abi.kgsl_cmd_syncpoint_timestamp, s.priv, s.size)
        if t is None: return -errno.EFAULT
        c = self.contexts.get(t.context_id)
        if c is None or c.detached: return -errno.EINVAL
        if c is ctx and abi.timestamp_cmp(t.timestamp, c.queued) > 0: return -errno.EINVAL
        out.append(("ts", c, t.timestamp))
      elif s.type == abi.KGSL_CMD_SYNCPOINT_TYPE_FENCE:
        t = self._copy_from_user(abi.kgsl_cmd_syncpoint_fence, s.priv, s.size)
        if t is None: return -errno.EFAULT
        fe = self._fence_of(t.fd)
        if fe is None: return -errno.EINVAL
        out.append(("fence", fe))
      else: return -errno.EINVAL
    return out

  def _verify_ib(self, ib: CmdObj) -> bool:
    """_verify_ib: size 0 or above the CP's 0xFFFFF dwords, or an address outside the pagetable or not dword aligned
    -> EINVAL (the IB is not required to be mapped: the CP faults on that)."""
    if ib.size == 0 or (ib.size >> 2) > IB_MAX_DWORDS or ib.gpuaddr & 3: return False
    return any(lo <= ib.gpuaddr and ib.gpuaddr + ib.size <= hi for lo, hi in PAGETABLE)

  def _timestamp(self, c: Context, user_ts: int) -> int | None:
    """get_timestamp: the next per-context timestamp, or the user's (USER_GENERATED_TS), which must be newer
    (_check_context_timestamp: ERANGE)."""
    if c.flags & abi.KGSL_CONTEXT_USER_GENERATED_TS:
      if abi.timestamp_cmp(user_ts, c.queued) <= 0: return None
      c.queued = user_ts
    else: c.queued = (c.queued + 1) & 0xFFFFFFFF
    return c.queued

  # kgsl_ioctl_gpu_command: _process_command_input (too many cmds/objs/syncs -> EINVAL; MARKER/SYNC flags decide the
  # object type, else it is deduced from the counts), the context (EINVAL), sync/cmd/memory lists (above), then
  # adreno_dispatcher_queue_cmds: an invalid context -> EDEADLK, IB checks (EINVAL), timestamps (ERANGE).
  # Returns the timestamp of the command (or marker) object; a pure sync object returns 0.
  def _gpu_command(self, a, f):
    if a.numcmds > KGSL_MAX_NUMIBS or a.numobjs > KGSL_MAX_NUMIBS or a.numsyncs > KGSL_MAX_SYNCPOINTS:
      return -errno.EINVAL
    if a.flags & abi.KGSL_CMDBATCH_MARKER: kinds = {"marker"}
    elif a.flags & abi.KGSL_CMDBATCH_SYNC: kinds = {"sync"}
    else: kinds = ({"sync"} if a.numsyncs else set()) | ({"cmd"} if a.numcmds else set()) or \
      ({"marker"} if not a.numsyncs else set())
    c = self._ctx(f, a.context_id)
    if c is None: return -errno.EINVAL
    syncs = self._sync_list(f, c, a.synclist, a.syncsize, a.numsyncs) if "sync" in kinds else []
    if isinstance(syncs, int): return syncs
    cmds, objs, prof = [], [], None
    if "cmd" in kinds:
      cmds = self._cmd_list(a.cmdlist, a.cmdsize, a.numcmds, CMDLIST_FLAGS, "cmd")
      if isinstance(cmds, int): return cmds
    if kinds & {"cmd", "marker"}:
      objs = self._cmd_list(a.objlist, a.objsize, a.numobjs, abi.KGSL_OBJLIST_MEMOBJ, "obj")
      if isinstance(objs, int): return objs
      prof = next((o.gpuaddr + o.offset for o in objs if o.flags & abi.KGSL_OBJLIST_PROFILE), None)
      objs = [o for o in objs if not o.flags & abi.KGSL_OBJLIST_PROFILE]
    if c.invalid: return -errno.EDEADLK
    if not all(self._verify_ib(ib) for ib in cmds): return -errno.EINVAL
    if "sync" in kinds: c.pending.append(_DrawObj("sync", syncs))
    ts = 0
    if kinds & {"cmd", "marker"}:
      ts = self._timestamp(c, a.timestamp)
      if ts is None:
        if "sync" in kinds: c.pending.pop()
        return -errno.ERANGE
      flags = a.flags if prof is not None else a.flags & ~abi.KGSL_CMDBATCH_PROFILING
      sub = Submission(c, ts, flags, cmds, objs, prof, self.proc.vm, time.monotonic_ns())
      c.pending.append(_DrawObj("cmd", [], sub))
    a.timestamp = ts
    return 0

  # kgsl_ioctl_cmdstream_readtimestamp_ctxtid: unknown context -> EINVAL; QUEUED is the last assigned timestamp,
  # CONSUMED/RETIRED the memstore's start/end-of-pipe ones. mock: any other type -> EINVAL.
  def _cmdstream_readtimestamp_ctxtid(self, a, f):
    c = self._ctx(f, a.context_id)
    if c is None: return -errno.EINVAL
    if a.type == abi.KGSL_TIMESTAMP_QUEUED: a.timestamp = c.queued
    elif a.type == abi.KGSL_TIMESTAMP_CONSUMED: a.timestamp = self.read_memstore(c.id, "soptimestamp")
    elif a.type == abi.KGSL_TIMESTAMP_RETIRED: a.timestamp = self.read_memstore(c.id, "eoptimestamp")
    else: return -errno.EINVAL
    return 0

  def _add_event(self, c: Context, ts: int, cb: Callable[[bool], None]) -> int:
    """kgsl_add_event: a timestamp not yet queued (without USER_GENERATED_TS) -> EINVAL; one already retired fires
    at once."""
    if not c.flags & abi.KGSL_CONTEXT_USER_GENERATED_TS and abi.timestamp_cmp(ts, c.queued) > 0: return -errno.EINVAL
    if self.retired(c, ts): cb(False)
    else: c.events.append((ts, cb))
    return 0

  # kgsl_ioctl_device_waittimestamp_ctxtid -> adreno_waittimestamp -> adreno_drawctxt_wait: unknown context ->
  # EINVAL; an invalid (faulted) context -> EDEADLK; a timestamp not yet queued -> EINVAL; timeout in ms, 0 = forever;
  # expired -> ETIMEDOUT; detached while waiting -> ENOENT; success after a GPU fault elsewhere -> EPROTO (once).
  def _device_waittimestamp_ctxtid(self, a, f):
    c = self._ctx(f, a.context_id)
    if c is None: return -errno.EINVAL
    if c.invalid: return -errno.EDEADLK
    if not c.flags & abi.KGSL_CONTEXT_USER_GENERATED_TS and abi.timestamp_cmp(a.timestamp, c.queued) > 0:
      return -errno.EINVAL
    deadline = None if a.timeout == 0 else time.monotonic() + a.timeout / 1000
    while not (self.retired(c, a.timestamp) or c.invalid or c.detached):
      if self.sync and self._cp_poll(): continue
      left = None if deadline is None else deadline - time.monotonic()
      if left is not None and left <= 0: return -errno.ETIMEDOUT
      self._cv.wait(left)
    if c.invalid: return -errno.EDEADLK
    if c.detached: return -errno.ENOENT
    if c.fault_pending:
      c.fault_pending = False
      return -errno.EPROTO
    return 0

  # kgsl_ioctl_timestamp_event: only KGSL_TIMESTAMP_EVENT_FENCE (else EINVAL); kgsl_add_fence_event: len must be
  # sizeof(kgsl_timestamp_event_fence) (EINVAL), the context the caller's (EINVAL); the new fence fd is written to
  # priv (EFAULT) and signals when the timestamp retires (or the context goes away).
  def _timestamp_event(self, a, f):
    if a.type != abi.KGSL_TIMESTAMP_EVENT_FENCE: return -errno.EINVAL
    if a.len != ctypes.sizeof(abi.kgsl_timestamp_event_fence): return -errno.EINVAL
    c = self._ctx(f, a.context_id)
    if c is None or c.invalid: return -errno.EINVAL
    if not c.flags & abi.KGSL_CONTEXT_USER_GENERATED_TS and abi.timestamp_cmp(a.timestamp, c.queued) > 0:
      return -errno.EINVAL
    fe = Fence(f"kgsl-ts-{c.id}-{a.timestamp}")
    fd = self._fence_fd(fe)
    if not self._write_user(a.priv, bytes(abi.kgsl_timestamp_event_fence(fd))):
      del self._fds[fd]
      return -errno.EFAULT
    self._add_event(c, a.timestamp, lambda cancel: self._signal(fe, -errno.ECANCELED if cancel else 0))
    return 0

  # kgsl_ioctl_syncsource_*: per-process syncsources with ids from 1; an unknown id -> EINVAL; SIGNAL_FENCE needs a
  # fence of that syncsource (EINVAL). Destroying a syncsource signals its pending fences.
  # mock: signalling an already signalled fence -> EINVAL.
  def _syncsource_create(self, a, f):
    a.id = _ids(self.proc.syncsources)
    self.proc.syncsources[a.id] = set()
    return 0

  def _syncsource_destroy(self, a, f):
    fences = self.proc.syncsources.pop(a.id, None)
    if fences is None: return -errno.EINVAL
    for fe in fences: self._signal(fe)
    return 0

  def _syncsource_create_fence(self, a, f):
    fences = self.proc.syncsources.get(a.id)
    if fences is None: return -errno.EINVAL
    fe = Fence(f"kgsl-syncsource-{a.id}", source=a.id)
    fences.add(fe)
    a.fence_fd = self._fence_fd(fe)
    return 0

  def _syncsource_signal_fence(self, a, f):
    fences = self.proc.syncsources.get(a.id)
    fe = self._fence_of(a.fence_fd)
    if fences is None or fe is None or fe not in fences: return -errno.EINVAL
    fences.discard(fe)
    return 0 if self._signal(fe) else -errno.EINVAL
