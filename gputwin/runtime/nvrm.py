"""The RM/UVM client of gputwin's NVIDIA runtime (gputwin.runtime.nv): the objects a userspace driver holds per
process and per GPU, over the kernel seam.

`Client` (one per kernel, shared by the Devices of a machine): /dev/nvidiactl, the root client (NV01_ROOT_CLIENT),
/dev/nvidia-uvm twice (the VA space: INITIALIZE; its mm: MM_INITIALIZE), /dev/nvidiaN per GPU (the open attaches the
GPU; REGISTER_FD ties it to the control fd), our GPU VA allocator and object handles; the RM API (`alloc`, `free`,
`control`, `escape`) and UVM ioctls with their NV_STATUS checked; `gpus()`: CARD_INFO, GET_ID_INFO_V2 (device
instance), GR info (SM version, GPC/TPC/SM counts) and the name string.
`GpuContext` (one per GPU and client, shared by the Devices opened on it): NV01_DEVICE_0, NV20_SUBDEVICE_0, the class
list, the usermode page (doorbell, PTIMER), the UUID (GID info), a FERMI_VASPACE_A registered with UVM, and
`map_cpu` (RM_MAP_MEMORY on a fresh fd + mmap).
"""
from __future__ import annotations
import ctypes, dataclasses, threading
import numpy as np
from gputwin.abi import nv as R
from gputwin.errors import GputwinError, KernelDriverError
from gputwin.runtime.kernel import Kernel, Shared

PROT_RW, MAP_SHARED = 0x3, 0x01
VA_BASE, VA_END = 0x1000_0000, 0xE000_0000   # our GPU VA window (the emulator addresses global memory below 4 GiB)
# classes by preference (newest first), chosen from the device's class list
USERMODE = (R.HOPPER_USERMODE_A, R.AMPERE_USERMODE_A, R.TURING_USERMODE_A, R.VOLTA_USERMODE_A)
GPFIFO = (R.HOPPER_CHANNEL_GPFIFO_A, R.AMPERE_CHANNEL_GPFIFO_A)
COMPUTE = (R.HOPPER_COMPUTE_A, R.ADA_COMPUTE_A, R.AMPERE_COMPUTE_B, R.AMPERE_COMPUTE_A)
COPY = (R.HOPPER_DMA_COPY_A, R.AMPERE_DMA_COPY_B, R.AMPERE_DMA_COPY_A)
BIG_PAGE = 1 << 16


def rm_error(what: str, status: int) -> KernelDriverError:
  return KernelDriverError(f"{what}: {R.status_name(status)} ({status:#x})")


@dataclasses.dataclass(frozen=True)
class GPUInfo:
  """One GPU of CARD_INFO: index (position), minor (/dev/nvidiaN), gpu_id, arch, name, PCI id."""
  index: int
  minor: int
  gpu_id: int
  instance: int          # RM device instance (NV0000 GET_ID_INFO_V2): NV01_DEVICE_0's deviceId
  arch: str
  name: str
  pci: str = ""
  sms: int = 0
  vram: int = 0


class Client(Shared):
  """This process's RM client on one kernel: /dev/nvidiactl, the root client, /dev/nvidia-uvm (two fds: the VA space
  and the mm), our GPU VA allocator and object handles; shared by every Device on the machine."""

  def __init__(self, k: Kernel):
    super().__init__(k)
    self.lock = threading.RLock()
    self.ctl, self.uvm, self.uvm_mm = k.open("/dev/nvidiactl"), -1, -1
    self.next_handle, self.next_va, self.free_vas = 0xCF000000, VA_BASE, {}
    self.peers: set[tuple[int, int]] = set()
    self._gpus: list[GPUInfo] | None = None
    self.dev_fds: dict[int, int] = {}
    self.contexts: dict[int, "GpuContext"] = {}
    try:
      self.root = self.alloc(0, R.NV01_ROOT_CLIENT, None, root=True)
      self.uvm = k.open("/dev/nvidia-uvm")
      self.uvm_mm = k.open("/dev/nvidia-uvm")
      self.uvm_ioctl(R.UVM_INITIALIZE, R.UVM_INITIALIZE_PARAMS(flags=0), fd=self.uvm)
      self.uvm_ioctl(R.UVM_MM_INITIALIZE, R.UVM_MM_INITIALIZE_PARAMS(uvmFd=self.uvm), fd=self.uvm_mm)
    except BaseException:
      self._close_fds()
      raise

  # ---- the RM API (NV_ESC_RM_*) and UVM
  def escape(self, fd: int, esc: int, arg):
    self.k.ioctl(fd, R.nv_iowr(esc, arg), arg)
    return arg

  def handle(self) -> int:
    with self.lock:
      self.next_handle += 1
      return self.next_handle

  def alloc(self, parent: int, cls: int, params=None, root: bool = False) -> int:
    """RM_ALLOC of class `cls` under `parent` with `params` (a ctypes struct or None); returns the new handle."""
    h = 0 if root else self.handle()
    a = R.NVOS21_PARAMETERS(hRoot=0 if root else self.root, hObjectParent=parent, hObjectNew=h, hClass=cls,
                            pAllocParms=ctypes.addressof(params) if params is not None else 0,
                            paramsSize=ctypes.sizeof(params) if params is not None else 0)
    self.escape(self.ctl, R.NV_ESC_RM_ALLOC, a)
    if a.status: raise rm_error(f"RM_ALLOC of class {cls:#06x} under {parent:#x}", a.status)
    return a.hObjectNew

  def free(self, h: int, parent: int = 0):
    a = self.escape(self.ctl, R.NV_ESC_RM_FREE, R.NVOS00_PARAMETERS(hRoot=self.root, hObjectParent=parent,
                                                                     hObjectOld=h))
    if a.status: raise rm_error(f"RM_FREE of {h:#x}", a.status)

  def control(self, obj: int, cmd: int, params):
    a = R.NVOS54_PARAMETERS(hClient=self.root, hObject=obj, cmd=cmd, params=ctypes.addressof(params),
                            paramsSize=ctypes.sizeof(params))
    self.escape(self.ctl, R.NV_ESC_RM_CONTROL, a)
    if a.status: raise rm_error(f"RM_CONTROL {cmd:#x} on {obj:#x}", a.status)
    return params

  def uvm_ioctl(self, request: int, params, fd: int | None = None):
    self.k.ioctl(self.uvm if fd is None else fd, request, params)
    if params.rmStatus: raise rm_error(f"UVM {R.UVM_IOCTLS[request][0]}", params.rmStatus)
    return params

  def gpu(self, g: GPUInfo) -> GpuContext:
    with self.lock:
      x = self.contexts.get(g.index)
      if x is None: x = self.contexts[g.index] = GpuContext(self, g)
      x.refs += 1
      return x

  def ungpu(self, x: GpuContext):
    with self.lock:
      x.refs -= 1
      if x.refs: return
      del self.contexts[x.info.index]
    x.close()

  def dev_fd(self, minor: int) -> int:
    """/dev/nvidiaN, opened once per process (the open attaches the GPU) and registered with the control fd."""
    with self.lock:
      if minor not in self.dev_fds:
        fd = self.k.open(f"/dev/nvidia{minor}")
        self.escape(fd, R.NV_ESC_REGISTER_FD, R.nv_ioctl_register_fd_t(ctl_fd=self.ctl))
        self.dev_fds[minor] = fd
      return self.dev_fds[minor]

  def gpus(self) -> list[GPUInfo]:
    """The GPUs CARD_INFO lists (read once), with arch and name from a short-lived device + subdevice each."""
    with self.lock:
      if self._gpus is None: self._gpus = self._probe()
      return self._gpus

  def _probe(self) -> list[GPUInfo]:
    cards = (R.nv_ioctl_card_info_t * R.NV_MAX_DEVICES)()
    self.k.ioctl(self.ctl, R.nv_iowr(R.NV_ESC_CARD_INFO, cards), cards)
    out = []
    for c in cards:
      if not c.valid: continue
      self.dev_fd(c.minor_number)
      inst = self.control(self.root, R.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
                          R.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=c.gpu_id)).deviceInstance
      dev = self.alloc(self.root, R.NV01_DEVICE_0, R.NV0080_ALLOC_PARAMETERS(deviceId=inst, hClientShare=self.root))
      try:
        sub = self.alloc(dev, R.NV20_SUBDEVICE_0, R.NV2080_ALLOC_PARAMETERS())
        sm, gpcs, tpcs, per = gr_info(self, sub, R.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION,
                                      R.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
                                      R.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
                                      R.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC)
        name = gpu_name(self, sub)
      finally: self.free(dev, self.root)
      p = c.pci_info
      out.append(GPUInfo(len(out), c.minor_number, c.gpu_id, inst, f"sm_{sm >> 8}{sm & 0xFF}", name,
                         f"{p.domain:04x}:{p.bus:02x}:{p.slot:02x}.{p.function} {p.vendor_id:04x}:{p.device_id:04x}",
                         gpcs * tpcs * per, c.fb_size))
    return out

  # ---- GPU virtual addresses (one UVM VA space per process)
  def alloc_va(self, size: int) -> int:
    with self.lock:
      lst = self.free_vas.get(size)
      if lst: return lst.pop()
      va = self.next_va
      if va + size > VA_END: raise GputwinError(f"GPU VA window {VA_BASE:#x}-{VA_END:#x} exhausted ({size} bytes)")
      self.next_va += size + BIG_PAGE   # a guard gap: overruns fault
      return va

  def free_va(self, va: int, size: int):
    with self.lock: self.free_vas.setdefault(size, []).append(va)

  def enable_peer(self, a: "GpuContext", b: "GpuContext"):
    """UVM ENABLE_PEER_ACCESS between two GPUs of the machine, once per pair."""
    key = tuple(sorted((a.info.index, b.info.index)))
    with self.lock:
      if key in self.peers or key[0] == key[1]: return
      self.uvm_ioctl(R.UVM_ENABLE_PEER_ACCESS, R.UVM_ENABLE_PEER_ACCESS_PARAMS(gpuUuidA=a.uuid, gpuUuidB=b.uuid))
      self.peers.add(key)

  def _close_fds(self):
    for fd in (*self.dev_fds.values(), self.uvm_mm, self.uvm, self.ctl):
      if fd is not None and fd >= 0: self.k.close(fd)
    self.ctl = None

  def close(self):
    try: self.free(self.root)
    finally: self._close_fds()


def gr_info(c: Client, subdevice: int, *indices: int) -> list[int]:
  """GR_GET_INFO values (e.g. NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: major << 8 | minor)."""
  info = (R.NV2080_CTRL_GR_INFO * len(indices))(*(R.NV2080_CTRL_GR_INFO(index=i) for i in indices))
  c.control(subdevice, R.NV2080_CTRL_CMD_GR_GET_INFO,
            R.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=len(indices), grInfoList=ctypes.addressof(info)))
  return [x.data for x in info]


def gpu_name(c: Client, subdevice: int) -> str:
  p = c.control(subdevice, R.NV2080_CTRL_CMD_GPU_GET_NAME_STRING, R.NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS(
    gpuNameStringFlags=R.NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII))
  return bytes(p.gpuNameString).split(b"\0")[0].decode(errors="replace").strip()


def devices(k: Kernel) -> list[GPUInfo]:
  """The NVIDIA GPUs of a machine (CARD_INFO order), read through the seam like the runtime reads them."""
  c = Client.get(k)
  try: return c.gpus()
  finally: c.release()


class GpuContext:
  """One GPU as this process's RM client holds it, shared by every Device opened on it: NV01_DEVICE_0,
  NV20_SUBDEVICE_0, the chosen classes, the usermode page (doorbell, PTIMER), the UUID, the VA space registered with
  UVM (REGISTER_GPU and REGISTER_GPU_VASPACE accept a GPU once per process)."""

  def __init__(self, c: Client, g: GPUInfo):
    self.c, self.info, self.refs = c, g, 0
    self.device = self.vaspace = self.bell = 0
    self.registered, self.bell_map = False, None
    try:
      c.dev_fd(g.minor)
      self.device = c.alloc(c.root, R.NV01_DEVICE_0, R.NV0080_ALLOC_PARAMETERS(
        deviceId=g.instance, hClientShare=c.root, vaMode=R.NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES))
      self.subdevice = c.alloc(self.device, R.NV20_SUBDEVICE_0, R.NV2080_ALLOC_PARAMETERS())
      p = c.control(self.device, R.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, R.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS())
      have, self.classes = set(p.classList[:p.numClasses]), {}
      for what, prefs in (("usermode", USERMODE), ("gpfifo", GPFIFO), ("compute", COMPUTE), ("copy", COPY)):
        self.classes[what] = next((x for x in prefs if x in have), None)
        if self.classes[what] is None:
          raise KernelDriverError(f"GPU {g.index} ({g.name}) offers no {what} class gputwin drives "
                                  f"({', '.join(f'{x:#06x}' for x in prefs)})")
      self.bell = c.alloc(self.subdevice, self.classes["usermode"])
      self.bell_map = self.map_cpu(self.bell, R.NVC361_NV_USERMODE__SIZE)
      gid = c.control(self.subdevice, R.NV2080_CTRL_CMD_GPU_GET_GID_INFO, R.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(
        flags=R.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16))
      self.uuid = R.NvProcessorUuid()
      self.uuid.uuid[:] = list(gid.data[:16])
      self.vaspace = c.alloc(self.device, R.FERMI_VASPACE_A, R.NV_VASPACE_ALLOCATION_PARAMETERS(
        vaBase=0x1000, vaSize=0x1FFFFFB000000, flags=R.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING |
        R.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED))
      c.uvm_ioctl(R.UVM_REGISTER_GPU, R.UVM_REGISTER_GPU_PARAMS(gpu_uuid=self.uuid, rmCtrlFd=-1))
      self.registered = True
      c.uvm_ioctl(R.UVM_REGISTER_GPU_VASPACE, R.UVM_REGISTER_GPU_VASPACE_PARAMS(
        gpuUuid=self.uuid, rmCtrlFd=c.ctl, hClient=c.root, hVaSpace=self.vaspace))
    except BaseException:
      self.close()
      raise

  def view(self, dtype, count: int, offset: int) -> np.ndarray:
    """The usermode page (doorbell at NOTIFY_CHANNEL_PENDING, PTIMER at TIME_0/1)."""
    return np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(self.bell_map[0] + offset),
                         dtype)

  def map_cpu(self, handle: int, size: int, system: bool = False) -> tuple[int, int, int]:
    """RM_MAP_MEMORY of an object onto a fresh fd (/dev/nvidiactl for system memory, else /dev/nvidiaN registered
    with the control fd), then mmap of that fd: (address, fd, linear address)."""
    c, k = self.c, self.c.k
    fd = k.open("/dev/nvidiactl" if system else f"/dev/nvidia{self.info.minor}")
    try:
      if not system: c.escape(fd, R.NV_ESC_REGISTER_FD, R.nv_ioctl_register_fd_t(ctl_fd=c.ctl))
      p = c.escape(c.ctl, R.NV_ESC_RM_MAP_MEMORY, R.nv_ioctl_nvos33_parameters_with_fd(
        params=R.NVOS33_PARAMETERS(hClient=c.root, hDevice=self.device, hMemory=handle, offset=0, length=size), fd=fd))
      if p.params.status: raise rm_error(f"RM_MAP_MEMORY of {handle:#x}", p.params.status)
      return k.mmap(fd, 0, size, PROT_RW, MAP_SHARED), fd, p.params.pLinearAddress
    except BaseException:
      k.close(fd)
      raise

  def unmap_cpu(self, handle: int, size: int, m: tuple[int, int, int]):
    c = self.c
    c.k.munmap(m[0], size)
    c.escape(c.ctl, R.NV_ESC_RM_UNMAP_MEMORY, R.NVOS34_PARAMETERS(hClient=c.root, hDevice=self.device, hMemory=handle,
                                                                  pLinearAddress=m[2]))
    c.k.close(m[1])

  def close(self):
    c = self.c
    try:
      if self.bell_map is not None: self.unmap_cpu(self.bell, R.NVC361_NV_USERMODE__SIZE, self.bell_map)
      if self.registered:
        c.uvm_ioctl(R.UVM_UNREGISTER_GPU_VASPACE, R.UVM_UNREGISTER_GPU_VASPACE_PARAMS(gpuUuid=self.uuid))
        c.uvm_ioctl(R.UVM_UNREGISTER_GPU, R.UVM_UNREGISTER_GPU_PARAMS(gpu_uuid=self.uuid))
    finally:
      if self.device: c.free(self.device, c.root)   # frees subdevice, usermode, VA space, memory, channels under it
      self.bell_map, self.registered, self.device = None, False, 0
