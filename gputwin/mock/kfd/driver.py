"""MockKernel: a Linux machine with amdkfd + amdgpu render nodes, as seen from one user process.

It implements the kernel seam of gputwin.runtime.kernel (open/close, ioctl, mmap/munmap, sysfs read/listdir, poll) so
the runtime cannot tell it from the real OS. Behind it:
  /dev/kfd                         the KFD ioctls of API 1.17, argument checks and errnos as Linux 6.12 kfd_chardev.c
  /dev/dri/renderD<128+i>          one render node per mock GPU, mmap-able at the offsets ALLOC_MEMORY_OF_GPU returns
  /sys/devices/virtual/kfd/...     the topology of gputwin.mock.kfd.topology
Every ioctl handler returns 0 or -errno like its kernel counterpart; the comment above each names the kernel function
whose checks it mirrors (drivers/gpu/drm/amd/amdkfd/*.c, v6.12). Where the mock has to choose, the choice is marked
"mock:".

For the (future) command processor the driver exposes the GPU side: `queues()`, `address_space(gpu_id)` (GPU VA ->
host bytes), `on_doorbell` callbacks fired by `ring_doorbell()`/`poll_doorbells()`, `interrupt()` (an end-of-pipe
interrupt that signals events the way kfd_signal_event_interrupt does) and `memory_exception()` (a GPU VM fault).
"""
from __future__ import annotations
import ctypes, dataclasses, errno, os, select, threading, time
from typing import Callable
from gputwin.abi.hostmem import (PAGE_SIZE, HostBuffer, UserPages, copy_from_user, copy_to_user, host_mmap,
                                  host_munmap, host_range_accessible, page_align, user_buffer)
from gputwin.abi import kfd as abi
from gputwin.mock.kfd.topology import GPUNode, Topology, CPU_MEM
from gputwin.errors import GPUFault
from gputwin.mock.vm import BufferObject, GPUAddressSpace

ENOTSUPP = 524                        # kernel-internal errno; userspace sees 524 ("Unknown error 524")
TASK_SIZE_MAX = (1 << 47) - PAGE_SIZE  # x86-64 4-level paging: access_ok() limit
DOORBELL_SLICE = 8192                 # kfd_doorbell_process_slice(): 1024 doorbells x 8 bytes (SOC15, MES)
GEM_OFFSET_BASE = 1 << 32             # DRM_FILE_PAGE_OFFSET_START in bytes: where render-node mmap offsets begin
FD_BASE = 1 << 30                     # mock fds live far above any real fd (RLIMIT_NOFILE <= 2^20)
SDMA_DOORBELL_BASE = 0x100            # mock: compute queues use doorbell slots 0..255, SDMA queues 256 + 16*engine + n
DEV_KFD, RENDER = "/dev/kfd", "/dev/dri/renderD"


def _access_ok(addr: int, size: int) -> bool: return size <= TASK_SIZE_MAX and addr <= TASK_SIZE_MAX - size


@dataclasses.dataclass(eq=False)
class UserptrBO(BufferObject):
  """A USERPTR allocation: the user's pages (`pages`, hostmem.UserPages: the GPU reaches them through the driver's own
  mapping or by copies, never through the user's address, so an access racing the user's munmap/mprotect cannot
  crash the host). KFD pins them for writing (amdgpu userptr BOs made by KFD are never read-only) and an MMU notifier
  invalidates the BO when the user's range goes away or changes protection; the restore worker revalidates it. The
  mock has no notifier: `revalidate()` (the GPU calls it before each dispatch) checks that the range is still mapped
  readable and writable; while it is not, the BO is not `valid`, so every GPU access to it is a GPU page fault
  (vm.py). The command processor and SDMA engines `check()` the bytes they touch first."""

  def revalidate(self) -> bool:
    self.set_valid(self.pages is not None and self.pages.accessible())   # freed: no pages, never valid again
    return self.valid

  def check(self, offset: int, n: int) -> bool:
    """Before an access of n bytes at offset: a valid BO whose pages there are gone becomes invalid; an invalid one
    is revalidated whole. True when the BO is valid."""
    if not self.valid: return self.revalidate()
    if not self.pages.accessible(offset, n): self.set_valid(False)
    return self.valid


@dataclasses.dataclass
class VFile:
  path: str
  kind: str                 # "kfd" | "render"
  gpu: GPUNode | None
  pid: int


@dataclasses.dataclass(eq=False)
class MockQueue:
  """A user queue as CREATE_QUEUE registered it: everything a command processor needs to run it.
  Addresses are GPU VAs in the owning GPU's address space; `doorbell_offset` is the value returned to userspace
  (mmap type | gpu_id | byte offset in the process doorbell page) and `doorbell_index` the byte offset of its 64-bit
  doorbell slot in that page. Units as on hardware: a PM4 queue's rptr/wptr and doorbell count dwords, an SDMA
  queue's count bytes, an AQL queue's count 64-byte packets (its rptr/wptr are amd_queue_t's read/write dispatch
  ids); all are 64-bit little-endian words at rptr_va/wptr_va."""
  queue_id: int
  gpu: GPUNode
  queue_type: int           # abi.KFD_IOC_QUEUE_TYPE_*
  ring_base: int
  ring_size: int
  rptr_va: int
  wptr_va: int
  doorbell_offset: int
  doorbell_index: int
  percentage: int
  priority: int
  eop_va: int = 0
  eop_size: int = 0
  ctx_save_restore_va: int = 0
  ctx_save_restore_size: int = 0
  ctl_stack_size: int = 0
  sdma_engine: int = -1
  sdma_slot: int = -1
  cu_mask: tuple = ()
  last_doorbell: int = 0
  error: str | None = None  # set by fault_queue(): the queue is then no longer processed
  bos: list = dataclasses.field(default_factory=list, repr=False)   # buffers it holds a queue reference on

  def __repr__(self):
    kind = "SDMA" if self.is_sdma else "compute"
    return (f"MockQueue({self.queue_id}, {kind}, {self.gpu.name}, ring={self.ring_base:#x}+{self.ring_size:#x}, "
            f"rptr={self.rptr_va:#x}, wptr={self.wptr_va:#x}, doorbell={self.doorbell_index:#x})")

  @property
  def is_sdma(self) -> bool: return self.queue_type != abi.KFD_IOC_QUEUE_TYPE_COMPUTE and \
                                    self.queue_type != abi.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
  @property
  def is_aql(self) -> bool: return self.queue_type == abi.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
  @property
  def is_active(self) -> bool:
    """kfd: a queue runs when it has a ring, a size and a non-zero percentage (and has not faulted)."""
    return bool(self.ring_base and self.ring_size and self.percentage) and self.error is None


@dataclasses.dataclass(eq=False)
class MockEvent:
  event_id: int
  event_type: int
  auto_reset: bool
  signaled: bool = False
  age: int = 1
  waiters: list = dataclasses.field(default_factory=list)
  memory_exception_data: abi.kfd_hsa_memory_exception_data | None = None
  hw_exception_data: abi.kfd_hsa_hw_exception_data | None = None


@dataclasses.dataclass(eq=False)
class _Waiter:
  event: MockEvent | None
  activated: bool = False
  age_enabled: bool = False


@dataclasses.dataclass(eq=False)
class _Pdd:
  """kfd_process_device: one GPU as seen by the process."""
  gpu: GPUNode
  vm: GPUAddressSpace
  drm_file: VFile | None = None
  bos: dict = dataclasses.field(default_factory=dict)      # idr -> BufferObject
  doorbells: HostBuffer | None = None
  scratch_va: int = 0
  tba: int = 0
  tma: int = 0
  cache_policy: tuple = (0, 0, 0, 0)
  apertures: dict = dataclasses.field(default_factory=dict)


class _Process:
  """kfd_process of the calling process: one pdd per GPU, queues, events, the signal-event page."""

  def __init__(self, gpus: list[GPUNode], pid: int):
    self.pid = pid
    self.pdds = {g.gpu_id: _Pdd(g, GPUAddressSpace(f"{g.name}@{g.gpu_id:#x}")) for g in gpus}
    for p in self.pdds.values():   # kfd_init_apertures_v9
      p.apertures = dict(lds_base=abi.LDS_APP_BASE_V9, lds_limit=abi.APP_APERTURE_LIMIT(abi.LDS_APP_BASE_V9),
                         scratch_base=abi.SCRATCH_APP_BASE_V9,
                         scratch_limit=abi.APP_APERTURE_LIMIT(abi.SCRATCH_APP_BASE_V9),
                         gpuvm_base=abi.GPUVM_BASE, gpuvm_limit=abi.GPUVM_SIZE - 1)
    self.queues: dict[int, MockQueue] = {}
    self.events: dict[int, MockEvent] = {}
    self.signal_page: memoryview | None = None   # u64 slots
    self.signal_host: HostBuffer | None = None   # kernel-allocated page when userspace gave none
    self.signal_mapped_size = 0
    self.signal_handle = 0
    self.xnack = False
    self.runtime_enabled = False


class MockKernel:
  """The mock kernel of one machine. `targets`: GPU names, e.g. ["gfx1100", "gfx942"] (node 1, node 2, ...).
  sync=True: no GPU thread is assumed; doorbells are polled (and on_doorbell listeners run) whenever the process
  blocks in WAIT_EVENTS, so a single-threaded test drives the command processor deterministically.
  `clock`: the machine's time in ns (CLOCK_MONOTONIC_RAW): GET_CLOCK_COUNTERS and the GPU's clock and timestamps
  (GPU reference clock: clock() // 10, 100 MHz; the CP's system-clock timestamps: clock()) read it; set another
  callable for time a test controls (the reliability suite counts reads, so a case's timestamps are the same on
  every run)."""

  def __init__(self, targets: list[str] | str = "gfx1100", sync: bool = False):
    self.targets = [targets] if isinstance(targets, str) else list(targets)
    self.sync = sync
    self.clock: Callable[[], int] = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    self.topology = Topology(self.targets)
    self.gpus: list[GPUNode] = self.topology.gpus
    self._by_id = {g.gpu_id: g for g in self.gpus}
    self._cv = threading.Condition(threading.RLock())
    self._fds: dict[int, VFile] = {}
    self._next_fd = FD_BASE
    self.proc: _Process | None = None
    self._mmio = {g.gpu_id: None for g in self.gpus}             # HDP flush page per GPU (lazy)
    self._gem: dict[int, dict[int, BufferObject]] = {g.gpu_id: {} for g in self.gpus}   # render mmap offset -> BO
    self._next_gem = GEM_OFFSET_BASE
    self._vram_used = {g.gpu_id: 0 for g in self.gpus}
    self._sysmem_used = 0
    self.on_doorbell: list[Callable[[MockQueue, int], None]] = []
    self._gpu_errors: dict[tuple[int, int], Exception] = {}   # (gpu_id, VA) -> the error fault_queue was given
    self.on_queue: list[Callable[[MockQueue, bool], None]] = []   # (queue, created?) after CREATE/DESTROY_QUEUE
    self._handlers = {nr: getattr(self, "_" + name.lower(), None) for name, nr, _, _ in abi.IOCTLS}

  def __repr__(self): return f"MockKernel({','.join(self.targets)})"

  # ================================================================ kernel seam
  def open(self, path: str, flags: int = os.O_RDWR) -> int:
    path = os.path.normpath(path)
    if path == DEV_KFD: f = VFile(path, "kfd", None, os.getpid())
    elif path.startswith(RENDER) and (g := next((g for g in self.gpus if path == f"{RENDER}{g.render_minor}"), None)):
      f = VFile(path, "render", g, os.getpid())
    else: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    with self._cv:
      if f.kind == "kfd" and self.proc is None: self.proc = _Process(self.gpus, f.pid)   # kfd_open: kfd_create_process
      fd, self._next_fd = self._next_fd, self._next_fd + 1
      self._fds[fd] = f
      return fd

  def close(self, fd: int) -> None:
    with self._cv:
      f = self._fds.pop(fd, None)
      if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
      # mock: the kfd_process lives while a /dev/kfd fd is open (the real one also holds a ref from the mm)
      if f.kind == "kfd" and not any(v.kind == "kfd" for v in self._fds.values()): self._teardown()

  def ioctl(self, fd: int, request: int, arg=None) -> int:
    """kfd_ioctl(): dispatch on _IOC_NR only; copy in _IOC_SIZE(request) bytes zero-extended to the kernel's struct
    size, run the handler, copy _IOC_SIZE bytes back for _IOC_READ commands (also on error), raise OSError(errno)."""
    f = self._fds.get(fd)
    if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    if f.kind != "kfd": raise OSError(errno.ENOTTY, "mock render nodes implement no DRM ioctls")
    nr, usize = abi.IOC_NR(request), abi.IOC_SIZE(request)
    row = abi.IOCTL_BY_NR.get(nr)
    if row is None: raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
    name, _, kdir, T = row
    if f.pid != os.getpid(): raise OSError(errno.EBADF, "Using KFD FD in wrong process")
    try: addr, avail = user_buffer(arg, usize)
    except (TypeError, ValueError, OverflowError, ctypes.ArgumentError): addr, avail = 0, 0   # no buffer, or empty
    if avail < usize: raise OSError(errno.EFAULT, f"AMDKFD_IOC_{name}: argument buffer shorter than _IOC_SIZE")
    kdata = ctypes.create_string_buffer(max(usize, ctypes.sizeof(T)))
    if kdir & abi.IOC_WRITE:                 # copy_from_user: unreadable (PROT_NONE, unmapped) -> EFAULT
      raw = self._read_user(addr, usize)
      if raw is None: raise OSError(errno.EFAULT, f"AMDKFD_IOC_{name}: argument not readable at {addr:#x}")
      ctypes.memmove(kdata, raw, usize)
    args = T.from_buffer(kdata)
    handler = self._handlers[nr]
    with self._cv:
      ret = handler(args) if handler else -errno.EOPNOTSUPP   # mock: ioctls not modelled
    # copy_to_user after the handler ran (its effects stay): an unwritable argument (read-only pages) -> EFAULT
    if kdir & abi.IOC_READ and not self._write_user(addr, kdata.raw[:usize]): ret = -errno.EFAULT
    if ret < 0: raise OSError(-ret, f"AMDKFD_IOC_{name}: {os.strerror(-ret)}")
    return ret

  def mmap(self, fd: int, offset: int, length: int, prot: int, flags: int, addr: int = 0) -> int:
    """mmap(2). fd -1: anonymous memory (passed to the OS). /dev/kfd: doorbell, event and MMIO pages by offset type
    (kfd_mmap). Render node: a BO at the mmap_offset ALLOC_MEMORY_OF_GPU returned (drm_gem_mmap)."""
    if fd == -1: return host_mmap(addr, length, prot, flags, -1, offset)
    f = self._fds.get(fd)
    if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    with self._cv:
      target = self._mmap_target(f, offset, length)
    if isinstance(target, int): raise OSError(-target, os.strerror(-target))
    host, off = target
    return host.map_again(addr, length, prot, flags, off)

  def munmap(self, addr: int, length: int) -> None: host_munmap(addr, length)

  def read_text(self, path: str) -> str:
    text = self.topology.read(path)
    if text is None: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return text

  def listdir(self, path: str) -> list[str]:
    d = self.topology.listdir(path)
    if d is None: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return d

  def exists(self, path: str) -> bool:
    p = os.path.normpath(path)
    return (p == DEV_KFD or any(p == f"{RENDER}{g.render_minor}" for g in self.gpus) or
            self.topology.read(p) is not None or self.topology.listdir(p) is not None)

  def poll(self, fds: list[int], events: int = select.POLLIN, timeout_ms: int = 0) -> list[tuple[int, int]]:
    """kfd and render nodes have no poll op, so the VFS reports them always readable and writable."""
    ready = select.POLLIN | select.POLLOUT | select.POLLRDNORM | select.POLLWRNORM
    return [(fd, ready & events if fd in self._fds else select.POLLNVAL) for fd in fds]

  # ================================================================ GPU side (for the command processor)
  def gpu(self, gpu_id: int) -> GPUNode: return self._by_id[gpu_id]

  def address_space(self, gpu_id: int) -> GPUAddressSpace:
    """The GPU VM of gpu_id in the current process (what MAP_MEMORY_TO_GPU filled)."""
    if self.proc is None: raise LookupError("no KFD process: /dev/kfd is not open")
    return self.proc.pdds[gpu_id].vm

  def queues(self, gpu_id: int | None = None) -> list[MockQueue]:
    with self._cv:
      qs = list(self.proc.queues.values()) if self.proc else []
    return [q for q in qs if gpu_id is None or q.gpu.gpu_id == gpu_id]

  def doorbell_view(self, queue: MockQueue) -> memoryview:
    """The queue's 64-bit doorbell slot inside the process doorbell page (the bytes userspace writes)."""
    page = self.proc.pdds[queue.gpu.gpu_id].doorbells
    return page.view[queue.doorbell_index:queue.doorbell_index + 8]

  def ring_doorbell(self, queue: MockQueue, value: int) -> None:
    """Write the doorbell as userspace would and notify on_doorbell listeners synchronously."""
    self.doorbell_view(queue)[:] = (value & (2**64 - 1)).to_bytes(8, "little")
    self._fire(queue, value)

  def poll_doorbells(self) -> list[tuple[MockQueue, int]]:
    """Compare each queue's doorbell slot with the last value seen; fire on_doorbell for the ones that changed.
    A command-processor thread calls this in its loop (userspace writes doorbells straight to mapped memory)."""
    rung = []
    for q in self.queues():
      v = int.from_bytes(self.doorbell_view(q), "little")
      if v != q.last_doorbell: rung.append((q, v))
    for q, v in rung: self._fire(q, v)
    return rung

  def read_wptr(self, q: MockQueue) -> int: return self.address_space(q.gpu.gpu_id).read_u64(q.wptr_va)
  def write_rptr(self, q: MockQueue, value: int): self.address_space(q.gpu.gpu_id).write_u64(q.rptr_va, value)

  def fault_queue(self, queue: MockQueue, reason: str, va: int | None = None, error: Exception | None = None) -> None:
    """Put a queue in the error state the way KFD reports a GPU fault: the queue stops being processed and, for a VM
    fault at `va`, MEMORY events carry the fault (kfd_signal_vm_fault_event). `error`: the GPU's own account (the
    emulator's exception), kept for `gpu_error` as the real kernel's log would keep amdgpu's fault report."""
    queue.error = reason
    if va is not None:
      # the report names the queue (`queue_id`, `doorbell_offset`), as the SQ/CP interrupt that reports it carries the
      # queue's doorbell id, so a fault is told to its own queue only; a bad packet is reported as a GPUFault
      err = error if error is not None else GPUFault(reason)
      try: err.queue_id, err.doorbell_offset = queue.queue_id, queue.doorbell_offset
      except AttributeError: pass
      with self._cv:
        self._gpu_errors[queue.gpu.gpu_id, va] = err
        while len(self._gpu_errors) > 64: self._gpu_errors.pop(next(iter(self._gpu_errors)))
      self.memory_exception(queue.gpu.gpu_id, va)

  def gpu_error(self, gpu_id: int, va: int) -> Exception | None:
    """The seam's fault report: the error a GPU of this machine stopped a queue with at `va` (None if none)."""
    with self._cv: return self._gpu_errors.get((gpu_id, va))

  def _fire(self, queue: MockQueue, value: int):
    queue.last_doorbell = value
    for cb in list(self.on_doorbell): cb(queue, value)

  def interrupt(self, gpu_id: int, context_id: int | None = None) -> int:
    """An end-of-pipe/SDMA-trap interrupt (kfd_signal_event_interrupt). The GPU first wrote the event's slot in the
    signal page; set the event named by context_id if its slot is signaled, else every signal event whose slot is
    no longer UNSIGNALED, resetting those slots. Returns the number of events set."""
    with self._cv:
      p = self.proc
      if p is None or p.signal_page is None: return 0
      fired = [e for e in p.events.values() if e.event_type in (abi.KFD_IOC_EVENT_SIGNAL, abi.KFD_IOC_EVENT_DEBUG_EVENT)
               and e.event_id * 8 < p.signal_mapped_size and self._slot(e.event_id) != abi.UNSIGNALED_EVENT_SLOT]
      exact = [e for e in fired if e.event_id == context_id]   # lookup_signaled_event_by_partial_id, else scan all
      for ev in exact or fired:
        self._set_slot(ev.event_id, abi.UNSIGNALED_EVENT_SLOT)   # acknowledge_signal
        self._signal(ev)
      return len(exact or fired)

  def memory_exception(self, gpu_id: int, va: int, not_present: bool = True, read_only: bool = False,
                       no_execute: bool = False) -> int:
    """A GPU VM fault (kfd_signal_vm_fault_event): every MEMORY event gets the fault data and is set."""
    with self._cv:
      if self.proc is None: return 0
      evs = [e for e in self.proc.events.values() if e.event_type == abi.KFD_IOC_EVENT_MEMORY]
      for ev in evs:
        d = abi.kfd_hsa_memory_exception_data(va=va, gpu_id=gpu_id, ErrorType=abi.KFD_MEM_ERR_NO_RAS)
        f = d.failure
        f.NotPresent, f.ReadOnly, f.NoExecute = int(not_present), int(read_only), int(no_execute)
        ev.memory_exception_data = d
        self._signal(ev)
      return len(evs)

  def hw_exception(self, gpu_id: int, reset_cause: int = abi.KFD_HW_EXCEPTION_GPU_HANG,
                   memory_lost: bool = False) -> int:
    """A GPU reset (kfd_signal_reset_event): every HW_EXCEPTION event gets the reset data and is set."""
    with self._cv:
      evs = [e for e in (self.proc.events.values() if self.proc else ())
             if e.event_type == abi.KFD_IOC_EVENT_HW_EXCEPTION]
      for ev in evs:
        ev.hw_exception_data = abi.kfd_hsa_hw_exception_data(
          reset_type=abi.KFD_HW_EXCEPTION_WHOLE_GPU_RESET, reset_cause=reset_cause, memory_lost=int(memory_lost),
          gpu_id=gpu_id)
        self._signal(ev)
      return len(evs)

  def shutdown(self):
    """Close every fd and free everything (what process exit does)."""
    with self._cv:
      self._fds.clear()
      self._teardown()
      for h in self._mmio.values():
        if h: h.close()
      self._mmio = dict.fromkeys(self._mmio)

  # ================================================================ helpers
  def _pdd(self, gpu_id: int) -> _Pdd | None: return self.proc.pdds.get(gpu_id)

  @staticmethod
  def _bound(pdd: _Pdd) -> bool: return pdd.drm_file is not None   # kfd_bind_process_to_device needs a VM

  def _slot(self, i: int) -> int: return int.from_bytes(self.proc.signal_page[8 * i:8 * i + 8], "little")
  def _set_slot(self, i: int, v: int): self.proc.signal_page[8 * i:8 * i + 8] = v.to_bytes(8, "little")

  def _doorbells(self, pdd: _Pdd) -> HostBuffer:
    if pdd.doorbells is None: pdd.doorbells = HostBuffer(DOORBELL_SLICE, f"kfd-doorbells-{pdd.gpu.gpu_id:x}")
    return pdd.doorbells

  def _mmio_page(self, gpu: GPUNode) -> HostBuffer:
    if self._mmio[gpu.gpu_id] is None: self._mmio[gpu.gpu_id] = HostBuffer(PAGE_SIZE, f"amdgpu-mmio-{gpu.gpu_id:x}")
    return self._mmio[gpu.gpu_id]

  # Every user pointer the mock dereferences goes through these two (ioctl arguments, arrays and structs they point
  # at): the kernel copies them (hostmem.copy_from_user/copy_to_user: process_vm_readv/writev), so unmapped, PROT_NONE
  # or (for writes) read-only pages are the kernel's EFAULT, never a SIGSEGV of the host process, even when another
  # thread unmaps them during the ioctl.
  def _read_user(self, addr: int, n: int) -> bytes | None:
    """copy_from_user: None (-> EFAULT) when the range cannot be read."""
    return copy_from_user(addr, n)

  def _write_user(self, addr: int, data: bytes) -> bool:
    """copy_to_user: False (-> EFAULT) when the range cannot be written."""
    return copy_to_user(addr, data)

  def revalidate_userptrs(self, gpu_id: int) -> int:
    """Revalidate the USERPTR BOs mapped on gpu_id (what the kernel's MMU notifier + restore worker keep true): the
    ones whose pages are no longer readable and writable become invalid, so the GPU faults on them. Returns how many
    are invalid. The virtual GPU calls this before each dispatch."""
    p, bad = self.proc, 0
    if p is None: return 0
    for pdd in list(p.pdds.values()):
      for bo in list(pdd.bos.values()):
        if isinstance(bo, UserptrBO) and gpu_id in bo.mapped: bad += not bo.revalidate()
    return bad

  def userptr_at(self, gpu_id: int, va: int) -> UserptrBO | None:
    """The USERPTR BO mapped at va on gpu_id, if any (for fault reports)."""
    m = self.proc.pdds[gpu_id].vm.find(va) if self.proc and gpu_id in self.proc.pdds else None
    return m.bo if m is not None and isinstance(m.bo, UserptrBO) else None

  def _teardown(self):
    p, self.proc = self.proc, None
    if p is None: return
    for q in p.queues.values():
      for cb in list(self.on_queue): cb(q, False)
    for pdd in p.pdds.values():
      for bo in pdd.bos.values():
        self._account(bo, -1)
        bo.release()
      pdd.bos.clear()
      if pdd.doorbells: pdd.doorbells.close()
    if p.signal_host: p.signal_host.close()
    for g in self._gem.values(): g.clear()
    for ev in p.events.values():
      for w in ev.waiters: w.event = None
    self._cv.notify_all()

  def _account(self, bo: BufferObject, sign: int):
    if bo.flags & abi.KFD_IOC_ALLOC_MEM_FLAGS_VRAM: self._vram_used[bo.gpu_id] += sign * bo.size
    elif bo.flags & (abi.KFD_IOC_ALLOC_MEM_FLAGS_GTT | abi.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR):
      self._sysmem_used += sign * bo.size

  def _mmap_target(self, f: VFile, offset: int, length: int) -> tuple[HostBuffer, int] | int:
    if f.kind == "render":   # drm_gem_mmap: the range must lie inside one object
      gem = self._gem[f.gpu.gpu_id]
      if (bo := gem.get(offset)) is not None and length <= bo.size and bo.host is not None: return bo.host, 0
      for start, bo in gem.items():
        if start <= offset and offset + length <= start + bo.size and bo.host is not None:
          return bo.host, offset - start
      return -errno.EINVAL
    p = self.proc
    if p is None: return -errno.EINVAL
    kind, gpu = offset & abi.KFD_MMAP_TYPE_MASK, self._by_id.get(abi.KFD_MMAP_GET_GPU_ID(offset))
    if kind == abi.KFD_MMAP_TYPE_DOORBELL:   # kfd_doorbell_mmap
      if gpu is None: return -errno.ENODEV
      if length != DOORBELL_SLICE: return -errno.EINVAL
      return self._doorbells(p.pdds[gpu.gpu_id]), 0
    if kind == abi.KFD_MMAP_TYPE_EVENTS:     # kfd_event_mmap: the whole page, only the kernel-allocated one
      if not (16384 < length <= abi.KFD_SIGNAL_EVENT_LIMIT * 8) or p.signal_host is None: return -errno.EINVAL
      p.signal_mapped_size = length
      return p.signal_host, 0
    if kind == abi.KFD_MMAP_TYPE_MMIO:       # kfd_mmio_mmap
      if gpu is None: return -errno.ENODEV
      if length != PAGE_SIZE: return -errno.EINVAL
      return self._mmio_page(gpu), 0
    return -errno.ENODEV if gpu is None else -errno.EINVAL

  # ================================================================ ioctl handlers (return 0 or -errno)
  def _get_version(self, a):
    a.major_version, a.minor_version = abi.KFD_IOCTL_MAJOR_VERSION, abi.KFD_IOCTL_MINOR_VERSION
    return 0

  # kfd_ioctl_acquire_vm: fget(drm_fd) fails -> EINVAL; unknown gpu -> EINVAL; a VM already acquired: 0 for the same
  # file, EBUSY otherwise; kfd_process_device_init_vm -> amdgpu_file_to_fpriv rejects non-amdgpu files (EINVAL).
  def _acquire_vm(self, a):
    f, pdd = self._fds.get(a.drm_fd), self._pdd(a.gpu_id)
    if f is None or pdd is None: return -errno.EINVAL
    if pdd.drm_file is not None: return 0 if pdd.drm_file is f else -errno.EBUSY
    if f.kind != "render" or f.gpu is not pdd.gpu: return -errno.EINVAL   # mock: a render node of that same GPU
    pdd.drm_file = f
    return 0

  def _aperture_rows(self, n: int) -> bytes:
    rows = [abi.kfd_process_device_apertures(gpu_id=gid, **p.apertures)
            for gid, p in list(self.proc.pdds.items())[:n]]
    return b"".join(bytes(r) for r in rows)

  # kfd_ioctl_get_process_apertures: at most NUM_OF_SUPPORTED_GPUS entries inline
  def _get_process_apertures(self, a):
    rows = list(self.proc.pdds.items())[:abi.NUM_OF_SUPPORTED_GPUS]
    for i, (gid, p) in enumerate(rows):
      a.process_apertures[i] = abi.kfd_process_device_apertures(gpu_id=gid, **p.apertures)
    a.num_of_nodes = len(rows)
    return 0

  # kfd_ioctl_get_process_apertures_new: num_of_nodes 0 asks for the count; otherwise fill min(n, pdds) entries at
  # kfd_process_device_apertures_ptr, num_of_nodes = entries written; copy_to_user failure -> EFAULT.
  def _get_process_apertures_new(self, a):
    if a.num_of_nodes == 0:
      a.num_of_nodes = len(self.proc.pdds)
      return 0
    n = min(len(self.proc.pdds), a.num_of_nodes)
    a.num_of_nodes = n
    return 0 if self._write_user(a.kfd_process_device_apertures_ptr, self._aperture_rows(n)) else -errno.EFAULT

  # kfd_ioctl_alloc_memory_of_gpu + amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu
  def _alloc_memory_of_gpu(self, a):
    F = abi
    if a.size == 0: return -errno.EINVAL
    pdd = self._pdd(a.gpu_id)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ENODEV
    flags, size, gpu, offset, host, user, shared = a.flags, page_align(a.size), pdd.gpu, 0, None, 0, False
    if flags & F.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL:
      if a.size != DOORBELL_SLICE: return -errno.EINVAL
      host, shared = self._doorbells(pdd), True
    elif flags & F.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP:
      if a.size != PAGE_SIZE: return -errno.EINVAL
      host, shared = self._mmio_page(gpu), True
    elif flags & F.KFD_IOC_ALLOC_MEM_FLAGS_VRAM:
      if self._vram_used[gpu.gpu_id] + size > gpu.target.vram: return -errno.ENOMEM   # amdgpu_amdkfd_reserve_mem_limit
    elif flags & (F.KFD_IOC_ALLOC_MEM_FLAGS_GTT | F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR):
      gtt = flags & F.KFD_IOC_ALLOC_MEM_FLAGS_GTT
      user = 0 if gtt else a.mmap_offset                                    # USERPTR: the address is in mmap_offset
      if not gtt and not user: return -errno.EINVAL
      if user & (PAGE_SIZE - 1): return -errno.EINVAL                       # mock: page-aligned user memory only
      if self._sysmem_used + size > CPU_MEM["size_in_bytes"]: return -errno.ENOMEM
      if user and not host_range_accessible(user, size): return -errno.EFAULT   # get_user_pages: no VMA, no access
    else: return -errno.EINVAL                                              # no memory domain flag
    if host is None and not user:
      try: host = HostBuffer(size, f"kfd-bo-{gpu.name}")
      except OSError: return -errno.ENOMEM
    if user:
      try: pages = UserPages(user, size)                                    # get_user_pages
      except OSError: return -errno.EFAULT
    idr = next(i for i in range(len(pdd.bos) + 1) if i not in pdd.bos)     # idr_alloc(.., 0, 0): lowest free id
    if flags & F.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: offset = F.KFD_MMAP_TYPE_MMIO | F.KFD_MMAP_GPU_ID(a.gpu_id)
    elif user: offset = user
    else: offset, self._next_gem = self._next_gem, self._next_gem + size
    if user:   # mock: accepted over read-only pages too; such a BO is invalid from the start (UserptrBO)
      bo = UserptrBO(F.MAKE_HANDLE(a.gpu_id, idr), a.gpu_id, a.va_addr, size, flags, offset, pages=pages)
      bo.revalidate()
    else: bo = BufferObject(F.MAKE_HANDLE(a.gpu_id, idr), a.gpu_id, a.va_addr, size, flags, offset, host, user, shared)
    pdd.bos[idr] = bo
    if not user and not flags & F.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: self._gem[gpu.gpu_id][offset] = bo
    self._account(bo, +1)
    a.handle, a.mmap_offset = bo.handle, offset
    return 0

  def _bo(self, handle: int) -> tuple[_Pdd | None, BufferObject | None]:
    pdd = self._pdd(abi.GET_GPU_ID(handle))
    return pdd, (pdd.bos.get(abi.GET_IDR_HANDLE(handle)) if pdd else None)

  # kfd_ioctl_free_memory_of_gpu: the signal-page BO -> EPERM; unknown gpu or handle -> EINVAL (so a double free is
  # EINVAL); amdgpu_amdkfd_gpuvm_free_memory_of_gpu refuses a BO still mapped to a GPU with EBUSY.
  def _free_memory_of_gpu(self, a):
    if self.proc.signal_handle and a.handle == self.proc.signal_handle: return -errno.EPERM
    pdd, bo = self._bo(a.handle)
    if pdd is None or bo is None: return -errno.EINVAL
    if bo.mapped: return -errno.EBUSY
    del pdd.bos[abi.GET_IDR_HANDLE(a.handle)]
    self._gem[pdd.gpu.gpu_id].pop(bo.mmap_offset, None)
    self._account(bo, -1)
    bo.release()
    return 0

  def _device_list(self, a) -> list[int] | int:
    if a.n_devices == 0 or a.n_success > a.n_devices: return -errno.EINVAL
    raw = self._read_user(a.device_ids_array_ptr, 4 * a.n_devices)
    return -errno.EFAULT if raw is None else list(memoryview(raw).cast("I"))

  # kfd_ioctl_map_memory_to_gpu: n_devices 0 or n_success > n_devices -> EINVAL; unreadable id array -> EFAULT;
  # unknown gpu of the handle -> EINVAL; no VM -> ENODEV; unknown handle -> ENOMEM (sic); unknown peer -> EINVAL;
  # mapping devices[n_success:] advances n_success; amdgpu_vm_bo_map rejects unaligned/out-of-range/overlapping VA
  # with EINVAL. Mapping twice on the same GPU is a no-op success.
  def _map_memory_to_gpu(self, a):
    devs = self._device_list(a)
    if isinstance(devs, int): return devs
    pdd, bo = self._bo(a.handle)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ENODEV
    if bo is None: return -errno.ENOMEM
    for i in range(a.n_success, a.n_devices):
      peer = self._pdd(devs[i])
      if peer is None: return -errno.EINVAL
      if not self._bound(peer): return -errno.ENODEV
      if peer.gpu.gpu_id not in bo.mapped:
        va, end = bo.va, bo.va + bo.size
        if va & (PAGE_SIZE - 1) or va < abi.GPUVM_BASE or end > abi.GPUVM_SIZE or not peer.vm.map(va, bo.size, bo):
          return -errno.EINVAL
        bo.mapped.add(peer.gpu.gpu_id)
      a.n_success = i + 1
    return 0

  # kfd_ioctl_unmap_memory_from_gpu: same argument checks (no VM check); a GPU the BO is not mapped on -> EINVAL
  # (amdgpu_amdkfd_gpuvm_unmap_memory_from_gpu: no mapped VM reserved); a buffer a user queue still uses -> EBUSY
  # (unmap_bo_from_gpuvm: bo_va->queue_refcount).
  def _unmap_memory_from_gpu(self, a):
    devs = self._device_list(a)
    if isinstance(devs, int): return devs
    pdd, bo = self._bo(a.handle)
    if pdd is None: return -errno.EINVAL
    if bo is None: return -errno.ENOMEM
    for i in range(a.n_success, a.n_devices):
      peer = self._pdd(devs[i])
      if peer is None or peer.gpu.gpu_id not in bo.mapped: return -errno.EINVAL
      if bo.queue_refs and peer.gpu.gpu_id == bo.gpu_id: return -errno.EBUSY
      peer.vm.unmap(bo.va)
      bo.mapped.discard(peer.gpu.gpu_id)
      a.n_success = i + 1
    return 0

  # kfd_ioctl_get_available_memory
  def _available_memory(self, a):
    pdd = self._pdd(a.gpu_id)
    if pdd is None: return -errno.EINVAL
    a.available = pdd.gpu.target.vram - self._vram_used[a.gpu_id]
    return 0

  # ---- queues
  @staticmethod
  def _queue_props_check(a) -> int:
    """set_queue_properties_from_user / kfd_ioctl_update_queue common checks, in kernel order."""
    if (a.queue_percentage & 0xFF) > abi.KFD_MAX_QUEUE_PERCENTAGE: return -errno.EINVAL
    if a.queue_priority > abi.KFD_MAX_QUEUE_PRIORITY: return -errno.EINVAL
    if a.ring_base_address and not _access_ok(a.ring_base_address, 8): return -errno.EFAULT
    if a.ring_size & (a.ring_size - 1): return -errno.EINVAL               # not a power of 2 (0 allowed)
    if a.ring_size < abi.KFD_MIN_QUEUE_RING_SIZE: a.ring_size = abi.KFD_MIN_QUEUE_RING_SIZE   # clamped, copied back
    return 0

  @staticmethod
  def _buffer_ok(pdd: _Pdd, va: int, expected: int) -> bool:
    """kfd_queue_buffer_get: va's page must start a GPU mapping that, when expected >= a page, ends exactly there."""
    m = pdd.vm.find(va)
    if m is None or (va >> 12) != (m.va >> 12): return False
    pages = expected >> 12
    return pages == 0 or (va >> 12) + pages - 1 == (m.end - 1) >> 12

  def _sdma_slot(self, gpu: GPUNode, qtype: int, engine: int) -> tuple[int, int] | None:
    """allocate_sdma_queue: first free (engine, queue) of the requested kind; None when all are taken."""
    p, npcie, nx = gpu.props, gpu.props["num_sdma_engines"], gpu.props["num_sdma_xgmi_engines"]
    engines = {abi.KFD_IOC_QUEUE_TYPE_SDMA: range(npcie), abi.KFD_IOC_QUEUE_TYPE_SDMA_XGMI: range(npcie, npcie + nx),
               abi.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID: [engine]}[qtype]
    used = {(q.sdma_engine, q.sdma_slot) for q in self.proc.queues.values() if q.gpu is gpu and q.is_sdma}
    for n in range(p["num_sdma_queues_per_engine"]):
      for e in engines:
        if (e, n) not in used: return e, n
    return None

  # kfd_ioctl_create_queue: set_queue_properties_from_user checks (EINVAL/EFAULT, unknown type -> ENOTSUPP 524),
  # unknown gpu -> EINVAL, no VM -> ESRCH, SDMA engine id beyond the device's engines -> EINVAL, then
  # kfd_queue_acquire_buffers (EINVAL unless rptr/wptr pages, the ring, and for compute queues the EOP buffer
  # (4 KiB), ctl stack size (== node) and CWSR area (>= node size) are GPU-mapped as expected), then pqm_create_queue
  # (no free queue slot / SDMA engine queue -> ENOMEM). On SOC15 the doorbell offset includes the byte offset of the
  # queue's doorbell in the process doorbell page.
  def _create_queue(self, a):
    if (err := self._queue_props_check(a)): return err
    for addr in (a.read_pointer_address, a.write_pointer_address):
      if not _access_ok(addr, 4): return -errno.EFAULT
    for addr in (a.eop_buffer_address, a.ctx_save_restore_address):
      if addr and not _access_ok(addr, 4): return -errno.EFAULT
    if a.queue_type > abi.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID: return -ENOTSUPP
    pdd = self._pdd(a.gpu_id)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ESRCH
    gpu, qt = pdd.gpu, a.queue_type
    if qt == abi.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID and \
       a.sdma_engine_id > gpu.props["num_sdma_engines"] + gpu.props["num_sdma_xgmi_engines"] - 1: return -errno.EINVAL
    compute = qt in (abi.KFD_IOC_QUEUE_TYPE_COMPUTE, abi.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL)
    ok = self._buffer_ok(pdd, a.write_pointer_address, PAGE_SIZE) and \
         self._buffer_ok(pdd, a.read_pointer_address, PAGE_SIZE) and \
         self._buffer_ok(pdd, a.ring_base_address, a.ring_size)
    if ok and compute:
      if a.eop_buffer_address:
        ok = a.eop_buffer_size == gpu.eop_buffer_size and self._buffer_ok(pdd, a.eop_buffer_address, a.eop_buffer_size)
      ok = ok and a.ctl_stack_size == gpu.props["ctl_stack_size"] and \
           a.ctx_save_restore_size >= gpu.props["cwsr_size"] and \
           self._buffer_ok(pdd, a.ctx_save_restore_address, gpu.cwsr_total(a.ctx_save_restore_size))
    if not ok: return -errno.EINVAL
    bufs = [a.write_pointer_address, a.read_pointer_address, a.ring_base_address] + \
           ([a.eop_buffer_address] * bool(a.eop_buffer_address) + [a.ctx_save_restore_address] if compute else [])
    qid = next((i for i in range(abi.KFD_MAX_NUM_OF_QUEUES_PER_PROCESS) if i not in self.proc.queues), None)
    if qid is None: return -errno.ENOMEM
    engine = slot = -1
    if not compute:
      es = self._sdma_slot(gpu, qt, a.sdma_engine_id)
      if es is None: return -errno.ENOMEM
      engine, slot = es
      bell = SDMA_DOORBELL_BASE + 16 * engine + slot
    else:
      used = {q.doorbell_index // 8 for q in self.proc.queues.values() if q.gpu is gpu}
      bell = next((i for i in range(SDMA_DOORBELL_BASE) if i not in used), None)
      if bell is None: return -errno.ENOMEM
    # mock: the doorbell page is memory, so the GPU sees a doorbell write as a change of the slot's value; a new queue's
    # slot starts at 0, so its first write is seen even when it repeats what the slot's previous queue left there
    # (hardware reacts to every write, whatever the value); an AQL queue's first write is the index of its first
    # packet, 0, so its slot starts at 2^64 - 1, a dispatch id no client reaches
    idle = 2**64 - 1 if qt == abi.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL else 0
    self._doorbells(pdd).view[bell * 8:bell * 8 + 8] = idle.to_bytes(8, "little")
    a.queue_id = qid
    a.doorbell_offset = abi.KFD_MMAP_TYPE_DOORBELL | abi.KFD_MMAP_GPU_ID(a.gpu_id) | (bell * 8)
    q = self.proc.queues[qid] = MockQueue(
      qid, gpu, qt, a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address,
      a.doorbell_offset, bell * 8, a.queue_percentage & 0xFF, a.queue_priority, a.eop_buffer_address,
      a.eop_buffer_size, a.ctx_save_restore_address, a.ctx_save_restore_size, a.ctl_stack_size, engine, slot,
      last_doorbell=idle)
    self._queue_ref(q, [pdd.vm.find(va).bo for va in bufs])
    for cb in list(self.on_queue): cb(q, True)
    return 0

  @staticmethod
  def _queue_ref(q: MockQueue, bos: list[BufferObject]):
    """kfd_queue_buffer_get/put: a queue pins its buffers' GPU mappings (bo_va->queue_refcount)."""
    for bo in q.bos: bo.queue_refs -= 1
    for bo in bos: bo.queue_refs += 1
    q.bos = bos

  # kfd_ioctl_destroy_queue -> pqm_destroy_queue: unknown queue id -> EINVAL; releases the queue's buffer refs
  def _destroy_queue(self, a):
    q = self.proc.queues.pop(a.queue_id, None)
    if q is None: return -errno.EINVAL
    self._queue_ref(q, [])
    for cb in list(self.on_queue): cb(q, False)
    return 0

  # kfd_ioctl_update_queue: the create checks, then pqm_update_queue_properties: unknown queue -> EFAULT; a new
  # non-null ring must be a GPU mapping of exactly ring_size (EINVAL); a null ring disables the queue.
  def _update_queue(self, a):
    if (err := self._queue_props_check(a)): return err
    q = self.proc.queues.get(a.queue_id)
    if q is None: return -errno.EFAULT
    pdd = self.proc.pdds[q.gpu.gpu_id]
    if a.ring_base_address and a.ring_size:
      if not self._buffer_ok(pdd, a.ring_base_address, a.ring_size): return -errno.EINVAL
      self._queue_ref(q, q.bos[:2] + [pdd.vm.find(a.ring_base_address).bo] + q.bos[3:])   # [wptr, rptr, ring, ...]
    q.ring_base, q.ring_size, q.percentage, q.priority = \
      a.ring_base_address, a.ring_size, a.queue_percentage & 0xFF, a.queue_priority
    return 0

  # kfd_ioctl_set_cu_mask: bit count not a multiple of 32 or 0 -> EINVAL; unreadable mask -> EFAULT;
  # pqm_update_mqd: unknown queue -> EFAULT
  def _set_cu_mask(self, a):
    if a.num_cu_mask % 32 or a.num_cu_mask == 0: return -errno.EINVAL
    raw = self._read_user(a.cu_mask_ptr, 4 * (min(a.num_cu_mask, 1024) // 32))
    if raw is None: return -errno.EFAULT
    q = self.proc.queues.get(a.queue_id)
    if q is None: return -errno.EFAULT
    q.cu_mask = tuple(memoryview(raw).cast("I"))
    return 0

  # ---- per-device settings
  # kfd_ioctl_set_memory_policy: policies other than COHERENT/NONCOHERENT -> EINVAL; unknown gpu -> EINVAL;
  # no VM -> ESRCH; set_cache_memory_policy rejects an APE1 aperture whose base/limit violate the fixed-bit rules.
  def _set_memory_policy(self, a):
    if a.default_policy > 1 or a.alternate_policy > 1: return -errno.EINVAL
    pdd = self._pdd(a.gpu_id)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ESRCH
    if a.alternate_aperture_size:
      base, limit = a.alternate_aperture_base, a.alternate_aperture_base + a.alternate_aperture_size - 1
      fixed = 0xFFFF80000000FFFF   # APE1_FIXED_BITS_MASK; the limit's fixed bits must read APE1_LIMIT_ALIGNMENT
      if limit <= base or base & fixed or (limit & fixed) != 0xFFFF: return -errno.EINVAL
    pdd.cache_policy = (a.default_policy, a.alternate_policy, a.alternate_aperture_base, a.alternate_aperture_size)
    return 0

  # kfd_ioctl_set_scratch_backing_va: unknown gpu -> EINVAL; no VM -> ENODEV (PTR_ERR of the bind)
  def _set_scratch_backing_va(self, a):
    pdd = self._pdd(a.gpu_id)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ENODEV
    pdd.scratch_va = a.va_addr
    return 0

  # kfd_ioctl_set_trap_handler: unknown gpu -> EINVAL; no VM -> ESRCH
  def _set_trap_handler(self, a):
    pdd = self._pdd(a.gpu_id)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ESRCH
    pdd.tba, pdd.tma = a.tba_addr, a.tma_addr
    return 0

  # kfd_ioctl_get_clock_counters: never fails; gpu counter 0 for an unknown gpu_id; CPU counters in ns at 1 GHz.
  def _get_clock_counters(self, a):
    now = self.clock()
    a.gpu_clock_counter = now // 10 if self._pdd(a.gpu_id) else 0   # mock: a 100 MHz GPU reference clock
    a.cpu_clock_counter, a.system_clock_counter = now, time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    a.system_clock_freq = 1_000_000_000
    return 0

  # kfd_ioctl_set_xnack_mode: negative = query; changing it with queues present -> EBUSY; enabling where a GPU
  # cannot retry faults (kfd_process_xnack_mode: only gfx90a/gfx94x/gfx95x dGPUs here) -> EPERM.
  def _set_xnack_mode(self, a):
    p = self.proc
    if a.xnack_enabled < 0:
      a.xnack_enabled = int(p.xnack)
      return 0
    if p.queues: return -errno.EBUSY
    if bool(a.xnack_enabled) == p.xnack: return 0
    if a.xnack_enabled and not all(g.target.props["gfx_target_version"] // 10000 == 9 for g in self.gpus):
      return -errno.EPERM
    p.xnack = bool(a.xnack_enabled)
    return 0

  # kfd_ioctl_runtime_enable: enabling twice -> EBUSY, enabling with user queues present -> EEXIST; disable is 0.
  def _runtime_enable(self, a):
    p = self.proc
    if a.mode_mask & abi.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK:
      if p.runtime_enabled: return -errno.EBUSY
      if p.queues: return -errno.EEXIST
      p.runtime_enabled = True
    else: p.runtime_enabled = False
    return 0

  def _deprecated(self, a): return -errno.EPERM   # the pre-1.13 debugger ioctls
  _dbg_register_deprecated = _dbg_unregister_deprecated = _deprecated
  _dbg_address_watch_deprecated = _dbg_wave_control_deprecated = _deprecated

  # ---- events (kfd_events.c)
  def _event_page_from_bo(self, handle: int) -> int:
    """kfd_kmap_event_page: a page already set -> EINVAL; unknown gpu/handle -> EINVAL; no VM -> ENODEV; a USERPTR
    BO cannot be kernel-mapped -> EINVAL. The whole page is filled with UNSIGNALED_EVENT_SLOT."""
    p = self.proc
    if p.signal_page is not None: return -errno.EINVAL
    pdd, bo = self._bo(handle)
    if pdd is None: return -errno.EINVAL
    if not self._bound(pdd): return -errno.ENODEV
    if bo is None or bo.host is None or isinstance(bo, UserptrBO): return -errno.EINVAL
    p.signal_page, p.signal_mapped_size, p.signal_handle = bo.view, bo.size, handle
    n = min(bo.size, abi.KFD_SIGNAL_EVENT_LIMIT * 8)
    p.signal_page[:n] = b"\xff" * n
    return 0

  # kfd_ioctl_create_event -> kfd_event_create: signal and debug events take the lowest free slot id below
  # signal_mapped_size/8 (ENOSPC when full; without a user page the kernel allocates one of 256 usable slots until
  # it is mmap'd); other types get ids from 0x80000000. trigger data = id, slot index = id for signal events.
  def _create_event(self, a):
    p = self.proc
    if a.event_page_offset and (err := self._event_page_from_bo(a.event_page_offset)): return err
    if a.event_type in (abi.KFD_IOC_EVENT_SIGNAL, abi.KFD_IOC_EVENT_DEBUG_EVENT):
      if p.signal_page is None:
        p.signal_host = HostBuffer(abi.KFD_SIGNAL_EVENT_LIMIT * 8, "kfd-signal-page")
        p.signal_page, p.signal_mapped_size = p.signal_host.view, 256 * 8
        p.signal_page[:] = b"\xff" * len(p.signal_page)
      eid = next((i for i in range(p.signal_mapped_size // 8) if i not in p.events), None)
      if eid is None: return -errno.ENOSPC
      a.event_page_offset, a.event_slot_index = abi.KFD_MMAP_TYPE_EVENTS, eid
    else:
      eid = next(i for i in range(abi.KFD_FIRST_NONSIGNAL_EVENT_ID, 2**32) if i not in p.events)
    p.events[eid] = MockEvent(eid, a.event_type, a.auto_reset != 0)
    a.event_id = a.event_trigger_data = eid
    return 0

  # kfd_event_destroy / kfd_set_event / kfd_reset_event: unknown id -> EINVAL; only signal events can be set or
  # reset from the CPU (event_can_be_cpu_signaled), others -> EINVAL.
  def _destroy_event(self, a):
    ev = self.proc.events.pop(a.event_id, None)
    if ev is None: return -errno.EINVAL
    for w in ev.waiters: w.event = None
    self._cv.notify_all()
    return 0

  def _signal(self, ev: MockEvent):
    """set_event(): auto-reset events stay unsignaled when they wake a waiter; every waiter is activated."""
    ev.signaled = not ev.auto_reset or not ev.waiters
    ev.age = ev.age + 1 if ev.age + 1 < 2**64 else 2
    for w in ev.waiters: w.activated = True
    self._cv.notify_all()

  def _cpu_event(self, eid: int) -> MockEvent | None:
    ev = self.proc.events.get(eid)
    return ev if ev is not None and ev.event_type == abi.KFD_IOC_EVENT_SIGNAL else None

  def _set_event(self, a):
    ev = self._cpu_event(a.event_id)
    if ev is None: return -errno.EINVAL
    self._signal(ev)
    return 0

  def _reset_event(self, a):
    ev = self._cpu_event(a.event_id)
    if ev is None: return -errno.EINVAL
    ev.signaled = False
    return 0

  # kfd_wait_on_events: unreadable event array -> EFAULT; unknown event id -> EINVAL; waits up to timeout ms
  # (0 = poll, 0xFFFFFFFF = forever) for any/all events; wait_result COMPLETE/TIMEOUT with return 0; an event
  # destroyed while waited on -> FAIL and EIO. On completion the signaled entries get their exception data and,
  # when last_event_age was non-zero, the current event age (API 1.14).
  def _wait_events(self, a):
    p, n, size = self.proc, a.num_events, ctypes.sizeof(abi.kfd_event_data)
    raw = self._read_user(a.events_ptr, n * size)
    if raw is None: return -errno.EFAULT
    datas = [abi.kfd_event_data.from_buffer_copy(raw, i * size) for i in range(n)]
    waiters = []
    for d in datas:
      ev = p.events.get(d.event_id)
      if ev is None:
        for w in waiters: w.event.waiters.remove(w)
        return -errno.EINVAL
      w = _Waiter(ev, activated=ev.signaled)
      ev.signaled = ev.signaled and not ev.auto_reset
      if ev.event_type == abi.KFD_IOC_EVENT_SIGNAL and d.signal_event_data.last_event_age:
        w.age_enabled = True
        if ev.age != d.signal_event_data.last_event_age: w.activated = True
      ev.waiters.append(w)
      waiters.append(w)

    def result() -> int:
      if any(w.event is None for w in waiters): return abi.KFD_IOC_WAIT_RESULT_FAIL
      done = sum(w.activated for w in waiters)
      return abi.KFD_IOC_WAIT_RESULT_COMPLETE if (done == n if a.wait_for_all else done > 0) \
        else abi.KFD_IOC_WAIT_RESULT_TIMEOUT

    deadline = None if a.timeout == abi.KFD_EVENT_TIMEOUT_INFINITE else time.monotonic() + a.timeout / 1000
    try:
      while (res := result()) == abi.KFD_IOC_WAIT_RESULT_TIMEOUT:
        if self.sync and self.poll_doorbells(): continue   # synchronous mode: the GPU runs in the waiter's thread
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0: break
        self._cv.wait(left)
    finally:
      for w in waiters:
        if w.event is not None and w in w.event.waiters: w.event.waiters.remove(w)
    a.wait_result = res
    if res == abi.KFD_IOC_WAIT_RESULT_FAIL: return -errno.EIO
    if res == abi.KFD_IOC_WAIT_RESULT_COMPLETE:   # copy_signaled_event_data
      for i, (d, w) in enumerate(zip(datas, waiters)):
        if not w.activated: continue
        if w.event.memory_exception_data is not None: d.memory_exception_data = w.event.memory_exception_data
        if w.event.hw_exception_data is not None: d.hw_exception_data = w.event.hw_exception_data
        if w.age_enabled: d.signal_event_data.last_event_age = w.event.age
        if not self._write_user(a.events_ptr + i * size, bytes(d)): return -errno.EFAULT
    return 0
