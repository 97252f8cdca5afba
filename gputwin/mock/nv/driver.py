"""MockNV: a Linux machine with the NVIDIA open kernel modules (nvidia.ko + nvidia-uvm.ko, 595.45), as one user
process sees it through gputwin's kernel seam (open/close, ioctl, mmap/munmap, /proc reads, poll).

  /dev/nvidiactl                   RM escapes: clients, object tree, controls, CPU/GPU mappings (rm.py, ctrl.py)
  /dev/nvidia<N>                   one per GPU: RM_ALLOC_MEMORY, REGISTER_FD, and the mmap target of device memory
  /dev/nvidia-uvm                  UVM VA spaces and external mappings (uvm.py)
  /proc/driver/nvidia/...          version and per-GPU information

The ioctl path mirrors nvidia_ioctl() (kernel-open/nvidia/nv.c): dispatch on _IOC_NR, copy _IOC_SIZE bytes in (EFAULT),
run the escape, copy them back (also on error), and turn a failed escape into EINVAL; RM-level failures are NV_STATUS
values in the parameters with the ioctl returning 0, as RmIoctl() (arch/nvalloc/unix/src/escape.c) does.

The GPU side (what the virtual GPU in gputwin.mock.nvgpu calls): `gpus`, `channels()`, `on_channel(cb)`, `work` /
`kick()`, `doorbell(gpu)`, `fault_channel(ch, reason, va, error)`, `gpu_error(gpu, va)`, `timestamp()`.
"""
from __future__ import annotations
import ctypes, dataclasses, errno, os, select, struct, threading, time
from typing import Callable
from gputwin.errors import EmuError, GPUPageFault, KernelDriverError
from gputwin.abi import nv
from gputwin.abi.hostmem import copy_from_user, copy_to_user, host_mmap, host_munmap, host_range_accessible, user_buffer
from gputwin.mock.nv.machine import ARCHS, NVChannel, NVGpu
from gputwin.mock.nv.rm import RM
from gputwin.mock.nv.ctrl import Controls
from gputwin.mock.nv.uvm import UVM

FD_BASE = 1 << 30                      # mock fds live far above any real fd (as the AMD mock's)
NV_ABSOLUTE_MAX_IOCTL_SIZE = 16384     # nv.h: the largest argument NV_ESC_IOCTL_XFER_CMD accepts
DEV_CTL, DEV_GPU, DEV_UVM = "/dev/nvidiactl", "/dev/nvidia", "/dev/nvidia-uvm"
PROC = "/proc/driver/nvidia"
WARP_ESR_MMU_NACK, WARP_ESR_ILLEGAL_INSTR = 0x20, 0x9   # mock: SM HWW warp ESR codes recorded for a faulting SM
_EVENT_CLASSES = (nv.NV01_EVENT, nv.NV01_EVENT_OS_EVENT, nv.NV01_EVENT_KERNEL_CALLBACK_EX)


@dataclasses.dataclass(eq=False)
class VFile:
  path: str
  kind: str                       # "ctl" | "dev" | "uvm"
  gpu: NVGpu | None
  ctl: VFile | None = None        # REGISTER_FD: the nvidiactl file this device file acts for
  mmap_ctx: tuple | None = None   # RM_MAP_MEMORY's mapping context: (HostBuffer, offset, length, object)
  uvm: object = None              # UvmVaSpace | "mm" | None
  closed: bool = False
  attached: tuple = ()
  os_events: set = dataclasses.field(default_factory=set)


class MockNV(RM, Controls, UVM):
  """The mock NVIDIA driver of one machine. `targets`: ["sm_90"], ["sm_90", "sm_80"] ... -> /dev/nvidia0, 1 ...
  sync=True tells the GPU model to run no thread of its own (whoever waits drives it), for deterministic tests.
  `clock`: the machine's time in ns (PTIMER: `timestamp()`, semaphore and report timestamps); set another callable for
  time a test controls (the reliability suite counts reads, so a case's timestamps are the same on every run)."""

  def __init__(self, targets: list[str] | str = "sm_90", sync: bool = False):
    self.targets = [targets] if isinstance(targets, str) else list(targets)
    self.sync = sync
    self.clock: Callable[[], int] = time.monotonic_ns
    bad = [t for t in self.targets if t not in ARCHS]
    if bad or not self.targets:
      raise KernelDriverError(f"mock NVIDIA machine: unknown target(s) {bad or self.targets}; known: {sorted(ARCHS)}")
    self.gpus: list[NVGpu] = [NVGpu(i, ARCHS[t]) for i, t in enumerate(self.targets)]
    self._lock = threading.RLock()
    self._fds: dict[int, VFile] = {}
    self._next_fd = FD_BASE
    self.work = threading.Event()
    self._channel_cbs: list[Callable[[NVChannel], None]] = []
    self._pending: list[NVChannel] = []     # channel events to announce once the driver lock is released
    self._gpu_errors: dict[tuple[int, int], Exception] = {}
    self._rm_init()

  def __repr__(self): return f"MockNV({','.join(self.targets)})"

  # ================================================================ kernel seam: files
  def open(self, path: str, flags: int = os.O_RDWR) -> int:
    path = os.path.normpath(path)
    if path == DEV_CTL: f = VFile(path, "ctl", None)
    elif path == DEV_UVM: f = VFile(path, "uvm", None)
    elif path.startswith(DEV_GPU) and path[len(DEV_GPU):].isdigit() and int(path[len(DEV_GPU):]) < len(self.gpus):
      f = VFile(path, "dev", self.gpus[int(path[len(DEV_GPU):])])
    else: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    with self._lock:
      fd, self._next_fd = self._next_fd, self._next_fd + 1
      self._fds[fd] = f
      return fd

  def close(self, fd: int) -> None:
    """nvidia_close: a control file's clients are freed once no device file registered to it is open (the device
    files hold a reference on it); nvidia-uvm's release tears its VA space down."""
    with self._lock:
      f = self._fds.pop(fd, None)
      if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
      f.closed = True
      if f.kind == "uvm": self._uvm_release(f)
      for c in (f, f.ctl):
        if c is not None and c.kind == "ctl" and c.closed and not any(v.ctl is c for v in self._fds.values()):
          for client in [cl for cl in self._clients.values() if cl.owner is c]: self._free_client(client)
      self._reap()
    self._announce()

  # ================================================================ kernel seam: ioctl
  def ioctl(self, fd: int, request: int, arg=None) -> int:
    f = self._fds.get(fd)
    if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    if f.kind == "uvm": return self._uvm_ioctl(f, request, arg)
    nr, size = nv.IOC_NR(request), nv.IOC_SIZE(request)
    addr, avail = user_buffer(arg, size)
    if nr == nv.NV_ESC_IOCTL_XFER_CMD:             # an argument too big for _IOC_SIZE comes through a pointer
      if size != ctypes.sizeof(nv.nv_ioctl_xfer_t): raise OSError(errno.EINVAL, "NV_ESC_IOCTL_XFER_CMD: bad size")
      raw = copy_from_user(addr, size) if avail >= size else None
      if raw is None: raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
      x = nv.nv_ioctl_xfer_t.from_buffer_copy(raw)
      if x.size > NV_ABSOLUTE_MAX_IOCTL_SIZE: raise OSError(errno.EINVAL, "NV_ESC_IOCTL_XFER_CMD: size too large")
      nr, size, addr = x.cmd, x.size, x.ptr
      avail = size if host_range_accessible(addr, size) else 0
    raw = copy_from_user(addr, size) if avail >= size else None
    if raw is None: raise OSError(errno.EFAULT, "nvidia: argument buffer shorter than the ioctl size")
    kdata = ctypes.create_string_buffer(raw, size)
    with self._lock:
      ok = self._escape(f, nr, kdata, size)
      self._reap()
    self._announce()
    if not copy_to_user(addr, kdata.raw[:size]):                  # copy_to_user fails (read-only memory)
      raise OSError(errno.EFAULT, "nvidia: argument buffer not writable")
    if not ok: raise OSError(errno.EINVAL, f"nvidia: escape {nr:#x} failed")
    return 0

  # escape -> (device files it is valid on: "ctl", "dev" or None for both, accepted argument types, handler)
  _ESCAPES = {
    nv.NV_ESC_RM_ALLOC: (None, (nv.NVOS21_PARAMETERS, nv.NVOS64_PARAMETERS), "_rm_alloc"),
    nv.NV_ESC_RM_FREE: ("ctl", (nv.NVOS00_PARAMETERS,), "_rm_free"),
    nv.NV_ESC_RM_CONTROL: ("ctl", (nv.NVOS54_PARAMETERS,), "_rm_control"),
    nv.NV_ESC_RM_ALLOC_MEMORY: ("dev", (nv.nv_ioctl_nvos02_parameters_with_fd,), "_rm_alloc_memory"),
    nv.NV_ESC_RM_MAP_MEMORY: ("ctl", (nv.nv_ioctl_nvos33_parameters_with_fd,), "_rm_map_memory"),
    nv.NV_ESC_RM_UNMAP_MEMORY: ("ctl", (nv.NVOS34_PARAMETERS,), "_rm_unmap_memory"),
    nv.NV_ESC_RM_MAP_MEMORY_DMA: ("ctl", (nv.NVOS46_PARAMETERS,), "_rm_map_memory_dma"),
    nv.NV_ESC_RM_UNMAP_MEMORY_DMA: ("ctl", (nv.NVOS47_PARAMETERS,), "_rm_unmap_memory_dma"),
    nv.NV_ESC_REGISTER_FD: (None, (nv.nv_ioctl_register_fd_t,), "_esc_register_fd"),
    nv.NV_ESC_ALLOC_OS_EVENT: (None, (nv.nv_ioctl_alloc_os_event_t,), "_esc_alloc_os_event"),
    nv.NV_ESC_FREE_OS_EVENT: (None, (nv.nv_ioctl_free_os_event_t,), "_esc_free_os_event"),
    nv.NV_ESC_CHECK_VERSION_STR: ("ctl", (nv.nv_ioctl_rm_api_version_t,), "_esc_check_version_str"),
    nv.NV_ESC_SYS_PARAMS: ("ctl", (nv.nv_ioctl_sys_params_t,), "_esc_sys_params"),
    nv.NV_ESC_WAIT_OPEN_COMPLETE: (None, (nv.nv_ioctl_wait_open_complete_t,), "_esc_wait_open_complete"),
  }

  def _escape(self, f: VFile, nr: int, kdata, size: int) -> bool:
    """nvidia_ioctl's own escapes and RmIoctl's: the wrong kind of file (NV_CTL_DEVICE_ONLY/NV_ACTUAL_DEVICE_ONLY), a
    size other than the escape's struct, or an escape neither knows -> the ioctl fails (EINVAL)."""
    if nr == nv.NV_ESC_CARD_INFO: return self._esc_card_info(f, kdata, size)
    if nr == nv.NV_ESC_ATTACH_GPUS_TO_FD: return self._esc_attach_gpus(f, kdata, size)
    row = self._ESCAPES.get(nr)
    if row is None: return False                                   # "unknown NVRM ioctl command"
    where, types, handler = row
    T = next((T for T in types if ctypes.sizeof(T) == size), None)
    if T is None: return False
    if nr == nv.NV_ESC_RM_ALLOC:                                   # only event classes may come through a device file
      where = None if nv.NVOS21_PARAMETERS.from_buffer(kdata).hClass in _EVENT_CLASSES else "ctl"
    if where is not None and f.kind != where: return False
    res = getattr(self, handler)(f, T.from_buffer(kdata))
    return res is not False

  # nvidia_ioctl NV_ESC_CARD_INFO (nvidia_read_card_info): control file only; an array of nv_ioctl_card_info_t with
  # room for every GPU (else EINVAL); the rest of the array is zeroed.
  def _esc_card_info(self, f, kdata, size) -> bool:
    n = size // ctypes.sizeof(nv.nv_ioctl_card_info_t)
    if f.kind != "ctl" or n < len(self.gpus): return False
    ctypes.memset(kdata, 0, size)
    arr = (nv.nv_ioctl_card_info_t * n).from_buffer(kdata)
    for g, ci in zip(self.gpus, arr):
      ci.valid = 1
      ci.pci_info.domain, ci.pci_info.bus, ci.pci_info.slot = 0, g.pci_bus, 0
      ci.pci_info.vendor_id, ci.pci_info.device_id = 0x10DE, g.spec.pci_device_id
      ci.gpu_id, ci.interrupt_line, ci.minor_number = g.gpu_id, 0, g.minor
      ci.reg_address, ci.reg_size = g.reg_address, 16 << 20
      ci.fb_address, ci.fb_size = g.fb_address, g.spec.fb_size
    return True

  # NV_ESC_ATTACH_GPUS_TO_FD: control file only; at least one id, once per file.
  def _esc_attach_gpus(self, f, kdata, size) -> bool:
    n = size // 4
    if f.kind != "ctl" or n == 0 or f.attached: return False
    f.attached = tuple((ctypes.c_uint32 * n).from_buffer(kdata))
    return True

  # RmIoctl NV_ESC_REGISTER_FD: this file must not be registered yet (INVALID_STATE), ctl_fd must be another nvidiactl
  # file that is not itself registered (INVALID_ARGUMENT); any failure fails the ioctl.
  def _esc_register_fd(self, f, p) -> bool:
    if f.ctl is not None: return False
    c = self._fds.get(p.ctl_fd)
    if c is None or c.kind != "ctl" or c is f or c.ctl is not None: return False
    f.ctl = c
    return True

  # rm_perform_version_check: reply RECOGNIZED; QUERY returns the driver's version; otherwise the strings are compared
  # up to their NUL (RELAXED: up to and including the first '.'); a mismatch writes the driver's version back and
  # fails the ioctl.
  def _esc_check_version_str(self, f, p) -> bool:
    p.reply = nv.NV_RM_API_VERSION_REPLY_RECOGNIZED
    ours = nv.NV_VERSION_STRING.encode() + b"\0"
    if p.cmd == nv.NV_RM_API_VERSION_CMD_QUERY:
      p.versionString = ours[:-1]
      return True
    theirs = ctypes.string_at(ctypes.addressof(p) + type(p).versionString.offset, nv.NV_RM_API_VERSION_STRING_LENGTH)
    for a, b in zip(theirs, ours):
      if a != b: break
      if a == 0 or (a == ord(".") and p.cmd == nv.NV_RM_API_VERSION_CMD_RELAXED): return True
    p.versionString = ours[:-1]
    return False

  def _esc_sys_params(self, f, p) -> bool:
    """numa_memblock_size is set once; a different value later -> EBUSY (reported as EINVAL here: mock)."""
    cur = getattr(self, "_memblock", 0)
    if cur and cur != p.memblock_size: return False
    self._memblock = p.memblock_size
    return True

  def _esc_wait_open_complete(self, f, p) -> bool:
    p.rc, p.adapterStatus = 0, nv.NV_OK
    return True

  def _esc_alloc_os_event(self, f, p) -> bool:
    """rm_alloc_os_event: the client must be this process's (INVALID_CLIENT in Status)."""
    c = self._clients.get(p.hClient)
    p.Status = nv.NV_ERR_INVALID_CLIENT if c is None else nv.NV_OK
    if c is not None: f.os_events.add((p.hClient, p.fd))
    return True

  def _esc_free_os_event(self, f, p) -> bool:
    key = (p.hClient, p.fd)
    p.Status = nv.NV_OK if key in f.os_events else nv.NV_ERR_INVALID_EVENT
    f.os_events.discard(key)
    return True

  # ================================================================ kernel seam: memory, /proc, poll
  def mmap(self, fd: int, offset: int, length: int, prot: int, flags: int, addr: int = 0) -> int:
    """nvidia_mmap_helper: the file needs a mapping context from RM_MAP_MEMORY (EINVAL), the offset is 0 (EINVAL);
    on a device file the length is the context's (ENXIO), on nvidiactl at most that (EINVAL); the mapping uses the
    context up (nvidia_mmap), so the next mmap needs another RM_MAP_MEMORY. fd -1: anonymous memory.
    nvidia-uvm: mock: no managed-memory mmap (EBADFD before INITIALIZE, EINVAL after)."""
    if fd == -1: return host_mmap(addr, length, prot, flags, -1, offset)
    f = self._fds.get(fd)
    if f is None: raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    if f.kind == "uvm": raise OSError(errno.EBADFD if f.uvm is None else errno.EINVAL, "nvidia-uvm mmap")
    ctx = f.mmap_ctx
    if ctx is None or offset != 0: raise OSError(errno.EINVAL, "nvidia: invalid mmap (no RM mapping context)")
    host, off, n, _ = ctx
    if f.kind == "dev" and length != n: raise OSError(errno.ENXIO, "nvidia: mmap length differs from RM_MAP_MEMORY's")
    if length > n: raise OSError(errno.EINVAL, "nvidia: mmap longer than RM_MAP_MEMORY's")
    if host.fd < 0: raise OSError(errno.EINVAL, "nvidia: the memory was freed")
    addr = host.map_again(addr, length, prot, flags, off)
    f.mmap_ctx = None                    # the context describes one mapping: a successful mmap consumes it
    return addr

  def munmap(self, addr: int, length: int) -> None: host_munmap(addr, length)

  def _proc(self) -> dict[str, str]:
    files = {f"{PROC}/version": f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {nv.NV_VERSION_STRING}  "
                                "Release Build  (gputwin mock)\nGCC version:  gputwin\n"}
    for g in self.gpus:
      files[f"{PROC}/gpus/0000:{g.pci_bus:02x}:00.0/information"] = (
        f"Model: \t\t {g.name}\nIRQ:   \t\t 0\nGPU UUID: \t {g.uuid_str}\nVideo BIOS: \t ??.??.??.??.??\n"
        f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
        f"Bus Location: \t 0000:{g.pci_bus:02x}:00.0\nDevice Minor: \t {g.minor}\nGPU Excluded:\t No\n")
    return files

  def read_text(self, path: str) -> str:
    text = self._proc().get(os.path.normpath(path))
    if text is None: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return text

  def listdir(self, path: str) -> list[str]:
    p = os.path.normpath(path)
    names = sorted({k[len(p) + 1:].split("/")[0] for k in self._proc() if k.startswith(p + "/")})
    if p == "/dev": names = sorted(["nvidiactl", "nvidia-uvm"] + [f"nvidia{g.minor}" for g in self.gpus])
    if not names: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return names

  def exists(self, path: str) -> bool:
    p = os.path.normpath(path)
    if p in (DEV_CTL, DEV_UVM) or p in self._proc(): return True
    if p.startswith(DEV_GPU) and p[len(DEV_GPU):].isdigit(): return int(p[len(DEV_GPU):]) < len(self.gpus)
    return any(k.startswith(p + "/") for k in self._proc())

  def poll(self, fds: list[int], events: int = select.POLLIN, timeout_ms: int = 0) -> list[tuple[int, int]]:
    """mock: no OS events are ever pending; unknown fds report POLLNVAL."""
    return [(fd, select.POLLNVAL) for fd in fds if fd not in self._fds]

  # ================================================================ GPU side (for gputwin.mock.nvgpu)
  def channels(self) -> list[NVChannel]:
    with self._lock: return list(self._channels)

  def on_channel(self, cb: Callable[[NVChannel], None]) -> None:
    """cb(channel) runs when a channel is created and when it is freed (channel.freed is then True)."""
    self._channel_cbs.append(cb)

  def _notify_channel(self, ch: NVChannel):
    self._pending.append(ch)

  def _announce(self):
    """Run on_channel callbacks outside the driver lock (a GPU thread holding its own lock may be inside
    fault_channel, which takes the driver lock)."""
    with self._lock: todo, self._pending = self._pending, []
    for ch in todo:
      for cb in list(self._channel_cbs): cb(ch)
    if todo: self.kick()

  def kick(self) -> None: self.work.set()

  def doorbell(self, gpu: NVGpu | int) -> memoryview | None:
    """The GPU's usermode page (NOTIFY_CHANNEL_PENDING at 0x90) once a usermode object created it."""
    g = gpu if isinstance(gpu, NVGpu) else self.gpus[gpu]
    return g.usermode.view if g.usermode is not None else None

  def timestamp(self) -> int: return self.clock()

  def fault_channel(self, ch: NVChannel, reason: str, va: int | None = None, error: Exception | None = None,
                    xid: int | None = None) -> None:
    """Robust-channel recovery as the RM reports it: the channel is marked errored (the GPU stops running it), its
    error notifier (hObjectError) gets an NvNotification with the ROBUST_CHANNEL code in info32 and status 0xFFFF,
    an SM fault leaves the SM error state the debugger reads, an MMU fault the fault info; `error` (the emulator's
    account) is kept for gpu_error(). The code: MMU fault (31) for a page fault, GR exception (13) for another
    shader error, else PBDMA error (32); `xid` overrides it."""
    fault_va = va if va is not None else getattr(error, "va", None)
    if xid is None:
      xid = nv.ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT if isinstance(error, GPUPageFault) else \
        nv.ROBUST_CHANNEL_GR_EXCEPTION if isinstance(error, EmuError) else nv.ROBUST_CHANNEL_PBDMA_ERROR
    with self._lock:
      if error is not None:                # newest last: a repeated key moves to the end
        self._gpu_errors.pop((ch.gpu.index, fault_va or 0), None)
        self._gpu_errors[ch.gpu.index, fault_va or 0] = error
        while len(self._gpu_errors) > 64: self._gpu_errors.pop(next(iter(self._gpu_errors)))
      if isinstance(error, GPUPageFault) and fault_va is not None:
        access = {"write": nv.NV_PFAULT_ACCESS_TYPE_VIRT_WRITE, "atomic": nv.NV_PFAULT_ACCESS_TYPE_VIRT_ATOMIC}.get(
          getattr(error, "access", "read"), nv.NV_PFAULT_ACCESS_TYPE_VIRT_READ)
        ch.mmu_faults.append(nv.NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_ENTRY(fault_va, nv.NV_PFAULT_FAULT_TYPE_PTE,
                                                                            access))
      if isinstance(error, EmuError) or hasattr(error, "pc"):
        pc = max(getattr(error, "pc", 0), 0)
        esr = WARP_ESR_MMU_NACK if isinstance(error, GPUPageFault) else WARP_ESR_ILLEGAL_INSTR
        ch.sm_errors[0] = nv.NV83DE_SM_ERROR_STATE_REGISTERS(
          hwwGlobalEsr=0, hwwWarpEsr=esr, hwwWarpEsrPc=pc & 0xFFFFFFFF, hwwGlobalEsrReportMask=0xFFFFFFFF,
          hwwWarpEsrReportMask=0xFFFFFFFF, hwwEsrAddr=fault_va or 0, hwwWarpEsrPc64=pc)
      ch.error = reason
      # the notifier last (and its status last within it): whoever sees it sees the state recorded above
      if ch.notifier is not None and not ch.freed:
        now = self.timestamp()
        struct.pack_into("<IIIHH", ch.notifier, nv.NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR * 16,
                         now & 0xFFFFFFFF, now >> 32, xid, 0, nv.NV_NOTIFICATION_STATUS_ERROR)
    self.kick()

  def gpu_error(self, gpu: int, va: int | None = None) -> Exception | None:
    """The emulator's account of the last fault on GPU `gpu` (an index or an RM gpuId) at `va` (None/0: any VA)."""
    idx = next((g.index for g in self.gpus if g.gpu_id == gpu and gpu >= len(self.gpus)), gpu)
    with self._lock:
      if va: return self._gpu_errors.get((idx, va))
      return next((e for (i, _), e in reversed(list(self._gpu_errors.items())) if i == idx), None)
