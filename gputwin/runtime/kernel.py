"""The one seam between gputwin's runtime and a kernel driver.

The runtime reaches the kernel only through a `Kernel`: open/close device files, ioctl with a ctypes argument,
mmap/munmap, read sysfs files, poll. `OSKernel` is the real Linux system call layer; `gputwin.mock.kfd.MockKernel`
answers the same calls with a modelled amdkfd. Nothing else differs between a real and a mock device.

Device strings (argument of `kernel_for`, default $GPUTWIN_DEVICE, else "mock:gfx1100"):
  amd            the real /dev/kfd, first GPU            amd:N    the real /dev/kfd, GPU N
  nv             the real /dev/nvidia0                   nv:N     the real /dev/nvidiaN
  mock:gfx1100   a mock machine with one gfx1100         mock:gfx1100,gfx942   a machine with two GPUs (nodes 1, 2)
  mock:gfx1100,gfx942:1   the same machine, GPU 1        mock:sm_90, mock:sm_90,sm_80:1   NVIDIA machines
Targets: gfx1100, gfx1200, gfx942, gfx950 (amdkfd: gputwin.mock.kfd), sm_80, sm_90 (RM/UVM: gputwin.mock.nv) or
a630, a660, a730, a740 (kgsl: gputwin.mock.kgsl with a gputwin.mock.adreno GPU, one per machine), one vendor per
machine; `qcom` is the real /dev/kgsl-3d0. One machine exists per distinct target list, so "mock:a,b:0" and
"mock:a,b:1" are two GPUs of the same mock machine (like amd:0/amd:1 share one /dev/kfd, nv:0/nv:1 one /dev/nvidiactl).
"""
from __future__ import annotations
import dataclasses, fcntl, os, re, select, threading
from typing import Protocol, runtime_checkable
from gputwin.errors import GputwinError, KernelDriverError
from gputwin.abi.hostmem import host_mmap, host_munmap

DEFAULT_DEVICE = "mock:gfx1100"


@runtime_checkable
class Kernel(Protocol):
  """What the runtime may ask of a kernel. Errors are OSError carrying the errno the kernel returned."""

  def open(self, path: str, flags: int = os.O_RDWR) -> int: ...
  def close(self, fd: int) -> None: ...
  def ioctl(self, fd: int, request: int, arg=None) -> int:
    """`arg`: a ctypes struct/array or writable buffer (updated in place for _IOC_READ commands) or an address."""
  def mmap(self, fd: int, offset: int, length: int, prot: int, flags: int, addr: int = 0) -> int:
    """Returns the mapped address; fd -1 maps anonymous memory. MAP_FIXED with `addr` places it."""
  def munmap(self, addr: int, length: int) -> None: ...
  def read_text(self, path: str) -> str: ...
  def listdir(self, path: str) -> list[str]: ...
  def exists(self, path: str) -> bool: ...
  def poll(self, fds: list[int], events: int = select.POLLIN, timeout_ms: int = 0) -> list[tuple[int, int]]: ...
  def gpu_error(self, gpu_id: int, va: int) -> Exception | None:
    """What the driver knows about a GPU fault beyond its MEMORY event (gpu, VA): the real kernel writes that to its
    log (None here); the mock returns the emulator's error (target, wave, PC, instruction, address, access)."""


class OSKernel:
  """The real kernel: os.open, fcntl.ioctl, libc mmap, the real /sys."""

  def __repr__(self): return "OSKernel()"
  def open(self, path: str, flags: int = os.O_RDWR) -> int: return os.open(path, flags | os.O_CLOEXEC)
  def close(self, fd: int) -> None: os.close(fd)

  def ioctl(self, fd: int, request: int, arg=None) -> int:
    if arg is None or isinstance(arg, int): return fcntl.ioctl(fd, request, arg or 0)
    return fcntl.ioctl(fd, request, arg, True)   # mutate in place: the kernel's _IOC_READ half lands in `arg`

  def mmap(self, fd: int, offset: int, length: int, prot: int, flags: int, addr: int = 0) -> int:
    return host_mmap(addr, length, prot, flags, fd, offset)

  def munmap(self, addr: int, length: int) -> None: host_munmap(addr, length)

  def read_text(self, path: str) -> str:
    with open(path) as f: return f.read()

  def listdir(self, path: str) -> list[str]: return os.listdir(path)
  def exists(self, path: str) -> bool: return os.path.exists(path)

  def poll(self, fds: list[int], events: int = select.POLLIN, timeout_ms: int = 0) -> list[tuple[int, int]]:
    p = select.poll()
    for fd in fds: p.register(fd, events)
    return p.poll(timeout_ms)

  def gpu_error(self, gpu_id: int, va: int) -> Exception | None: return None   # amdgpu reports it in the kernel log



class Shared:
  """What a userspace driver keeps once per process and kernel (the kfd process, the RM client), shared by every
  Device opened on that kernel: `get(k)` takes a reference, creating it on first use; `release()` drops one and calls
  `close()` with the last."""
  _live: dict[tuple[type, int], "Shared"] = {}
  _lock = threading.Lock()

  def __init__(self, k: Kernel):
    self.k, self.refs = k, 0

  @classmethod
  def get(cls, k: Kernel):
    with Shared._lock:
      o = Shared._live.get((cls, id(k)))
      if o is None: o = Shared._live[(cls, id(k))] = cls(k)
      o.refs += 1
      return o

  def release(self) -> None:
    with Shared._lock:
      self.refs -= 1
      if self.refs: return
      Shared._live.pop((type(self), id(self.k)), None)
    self.close()

  def close(self) -> None: ...

@dataclasses.dataclass(frozen=True)
class DeviceSpec:
  """A parsed device string: kind "amd", "nv" or "mock", the mock machine's targets, and the GPU index on the
  machine."""
  kind: str
  targets: tuple[str, ...] = ()
  index: int = 0

  @property
  def vendor(self) -> str:
    """"nv" for NVIDIA devices (real or sm_* mocks), "qcom" for Adreno (real or a6xx/a7xx mocks), else "amd"."""
    if self.kind in ("nv", "qcom"): return self.kind
    return _target_vendor(self.targets[0]) if self.targets else "amd"

  def __str__(self) -> str:
    return f"{self.kind}" + (f":{','.join(self.targets)}" if self.targets else "") + f":{self.index}"


def _target_vendor(t: str) -> str:
  return "nv" if t.startswith("sm_") else "qcom" if re.fullmatch(r"a[67]\d\d", t) else "amd"


def parse_device(device: str | None = None) -> DeviceSpec:
  s = (device or os.environ.get("GPUTWIN_DEVICE") or DEFAULT_DEVICE).strip()
  kind, *body = s.split(":")
  index = int(body.pop()) if body and body[-1].isdigit() else 0
  targets = tuple(t for t in body[0].split(",") if t) if len(body) == 1 else ()
  if kind in ("amd", "nv") and not body: return DeviceSpec(kind, (), index)
  if kind == "qcom" and not body: return DeviceSpec(kind, (), 0)
  if kind == "mock" and targets:
    if index >= len(targets):
      raise KernelDriverError(f"device {s!r}: machine has {len(targets)} GPU(s), no GPU {index}")
    if len({_target_vendor(t) for t in targets}) > 1:
      raise KernelDriverError(f"device {s!r}: a mock machine's GPUs are all AMD (gfx*), all NVIDIA (sm_*) or one "
                              f"Adreno (a6xx/a7xx)")
    if _target_vendor(targets[0]) == "qcom" and len(targets) > 1:
      raise KernelDriverError(f"device {s!r}: a kgsl machine has one Adreno")
    return DeviceSpec("mock", targets, index)
  raise KernelDriverError(f"device {s!r}: expected 'amd', 'amd:N', 'nv', 'nv:N', 'qcom' or "
                          f"'mock:<target>[,<target>...][:N]'")


_os_kernel = OSKernel()
_machines: dict[tuple[str, ...], object] = {}
_lock = threading.Lock()


def kernel_for(device: str | None = None) -> Kernel:
  """The kernel serving `device`: the real OS for amd[:N], nv[:N] and qcom, the (shared, lazily created) mock machine
  for mock:... (amdkfd + virtual AMD GPUs, RM/UVM + virtual NVIDIA GPUs, or kgsl + a virtual Adreno)."""
  spec = parse_device(device)
  if spec.kind != "mock": return _os_kernel
  with _lock:
    if spec.targets not in _machines:
      _machines[spec.targets] = _machine(spec)
    return _machines[spec.targets]


def _machine(spec: DeviceSpec, sync: bool = False):
  if spec.vendor == "qcom":                               # kgsl + the virtual Adreno as its command processor
    if sync:
      raise GputwinError(f"{spec.targets[0]}: the mock Adreno has no synchronous machine")
    from gputwin.mock.adreno import machine
    return machine(spec.targets[0])
  if spec.vendor == "nv":
    from gputwin.mock.nv import MockNV as Machine         # lazy: real-hardware users never import the mock
    from gputwin.mock.nvgpu import attach                 # the virtual GPUs' PBDMA, compute and copy engines
  else:
    from gputwin.mock.kfd.driver import MockKernel as Machine
    from gputwin.mock.amdgpu.gpu import attach            # the virtual GPUs' command processors and SDMA engines
  m = Machine(list(spec.targets), sync=True) if sync else Machine(list(spec.targets))
  attach(m)
  return m


def fresh_mock(device: str, sync: bool = False):
  """A new mock machine serving `device` from now on (the old one forgotten: shut down). `sync`: one without GPU
  threads, whose engines the caller runs (AMD and NVIDIA: the reliability campaign's command-stream cases)."""
  forget(device)
  spec = parse_device(device)
  m = _machine(spec, sync)
  with _lock:
    _machines[spec.targets] = m
  return m


def forget(device: str) -> None:
  """Shut down the shared mock machine serving `device`, if one exists; the next open of it starts a fresh machine
  (for tools that must not carry GPU state from one case to the next)."""
  spec = parse_device(device)
  with _lock: old = _machines.pop(spec.targets, None) if spec.kind == "mock" else None
  if old is not None and hasattr(old, "shutdown"): old.shutdown()
