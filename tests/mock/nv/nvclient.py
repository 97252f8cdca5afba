"""A minimal user of the NVIDIA driver ABI for the mock driver's tests: the calls a runtime makes (RM escapes on
/dev/nvidiactl and /dev/nvidiaN, UVM ioctls), each returning the parameter struct so tests assert on its status."""
from __future__ import annotations
import ctypes
from gputwin.abi import nv
from gputwin.abi.hostmem import MAP_SHARED, PROT_READ, PROT_WRITE
from gputwin.mock.nv import MockNV

MAP_FIXED = 0x10


def st(p) -> str:
  """The status of a parameter struct by name (RM `status` or UVM `rmStatus`)."""
  return nv.status_name(p.rmStatus if hasattr(p, "rmStatus") else p.status)


class Client:
  def __init__(self, targets=("sm_90",), k: MockNV | None = None):
    self.k = k or MockNV(list(targets))
    self.ctl = self.k.open("/dev/nvidiactl")
    self.uvm = self.k.open("/dev/nvidia-uvm")
    self.root = self.alloc_ok(nv.NV01_ROOT_CLIENT, 0, hroot=0)
    self.devs: dict[int, int] = {}

  def esc(self, fd: int, esc: int, p):
    self.k.ioctl(fd, nv.nv_iowr(esc, p), p)
    return p

  # ---- RM
  def alloc(self, cls: int, parent: int, params=None, handle: int = 0, hroot: int | None = None, fd: int | None = None):
    p = nv.NVOS21_PARAMETERS(hRoot=self.root if hroot is None else hroot, hObjectParent=parent, hObjectNew=handle,
                             hClass=cls, pAllocParms=ctypes.addressof(params) if params is not None else 0,
                             paramsSize=ctypes.sizeof(params) if params is not None else 0)
    return self.esc(self.ctl if fd is None else fd, nv.NV_ESC_RM_ALLOC, p)

  def alloc_ok(self, *a, **kw) -> int:
    p = self.alloc(*a, **kw)
    assert st(p) == "NV_OK", (hex(a[0]), st(p))
    return p.hObjectNew

  def free(self, h: int):
    return self.esc(self.ctl, nv.NV_ESC_RM_FREE, nv.NVOS00_PARAMETERS(hRoot=self.root, hObjectOld=h))

  def control(self, obj: int, cmd: int, params=None, size: int | None = None):
    p = nv.NVOS54_PARAMETERS(hClient=self.root, hObject=obj, cmd=cmd,
                             params=ctypes.addressof(params) if params is not None else 0,
                             paramsSize=ctypes.sizeof(params) if size is None and params is not None else size or 0)
    return self.esc(self.ctl, nv.NV_ESC_RM_CONTROL, p)

  def control_ok(self, obj: int, cmd: int, params):
    p = self.control(obj, cmd, params)
    assert st(p) == "NV_OK", (hex(cmd), st(p))
    return params

  def dev_fd(self, gpu: int = 0) -> int:
    """/dev/nvidiaN registered to our control file (what a runtime does before RM_ALLOC_MEMORY or a CPU map)."""
    fd = self.k.open(f"/dev/nvidia{gpu}")
    self.esc(fd, nv.NV_ESC_REGISTER_FD, nv.nv_ioctl_register_fd_t(ctl_fd=self.ctl))
    return fd

  def device(self, gpu: int = 0) -> tuple[int, int]:
    dev = self.alloc_ok(nv.NV01_DEVICE_0, self.root, nv.NV0080_ALLOC_PARAMETERS(
      deviceId=gpu, hClientShare=self.root, vaMode=nv.NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES))
    sub = self.alloc_ok(nv.NV20_SUBDEVICE_0, dev, nv.NV2080_ALLOC_PARAMETERS())
    return dev, sub

  def vidmem(self, dev: int, size: int, cls: int = nv.NV01_MEMORY_LOCAL_USER, huge: bool = False):
    attr = nv.DRF_NUM(nv.NVOS32_ATTR_PHYSICALITY, nv.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS)
    if huge: attr |= nv.DRF_NUM(nv.NVOS32_ATTR_PAGE_SIZE, nv.NVOS32_ATTR_PAGE_SIZE_HUGE)
    if cls == nv.NV01_MEMORY_SYSTEM: attr |= nv.DRF_NUM(nv.NVOS32_ATTR_LOCATION, nv.NVOS32_ATTR_LOCATION_PCI)
    a = nv.NV_MEMORY_ALLOCATION_PARAMS(owner=self.root, type=nv.NVOS32_TYPE_IMAGE, size=size, attr=attr,
                                       flags=nv.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED)
    return self.alloc_ok(cls, dev, a), a

  def map_cpu(self, dev: int, mem: int, size: int, target: int = 0, sysmem: bool = False, gpu: int = 0) -> int:
    """RM_MAP_MEMORY on a fresh file (nvidiactl for system memory, /dev/nvidiaN otherwise), then mmap that file."""
    fd = self.k.open("/dev/nvidiactl") if sysmem else self.dev_fd(gpu)
    w = nv.nv_ioctl_nvos33_parameters_with_fd(fd=fd, params=nv.NVOS33_PARAMETERS(
      hClient=self.root, hDevice=dev, hMemory=mem, length=size))
    self.esc(self.ctl, nv.NV_ESC_RM_MAP_MEMORY, w)
    assert st(w.params) == "NV_OK", st(w.params)
    return self.k.mmap(fd, 0, size, PROT_READ | PROT_WRITE, MAP_SHARED | (MAP_FIXED if target else 0), target)

  # ---- UVM
  def uvm_call(self, cmd: int, fd: int | None = None, **fields):
    p = nv.UVM_IOCTLS[cmd][1](**fields)
    self.k.ioctl(self.uvm if fd is None else fd, cmd, p)
    return p

  def uvm_ok(self, cmd: int, **fields):
    p = self.uvm_call(cmd, **fields)
    assert st(p) == "NV_OK", (nv.UVM_IOCTLS[cmd][0], st(p))
    return p

  def uuid(self, gpu: int = 0) -> nv.NvProcessorUuid:
    return nv.NvProcessorUuid((ctypes.c_uint8 * 16)(*self.k.gpus[gpu].uuid))

  def uvm_map(self, va: int, size: int, mem: int, gpus=(0,), offset: int = 0, create: bool = True):
    if create: self.uvm_ok(nv.UVM_CREATE_EXTERNAL_RANGE, base=va, length=size)
    attrs = (nv.UvmGpuMappingAttributes * nv.UVM_MAX_GPUS)(
      *[nv.UvmGpuMappingAttributes(gpuUuid=self.uuid(g), gpuMappingType=nv.UvmGpuMappingTypeReadWriteAtomic)
        for g in gpus])
    return self.uvm_call(nv.UVM_MAP_EXTERNAL_ALLOCATION, base=va, length=size, offset=offset, perGpuAttributes=attrs,
                         gpuAttributesCount=len(gpus), rmCtrlFd=self.ctl, hClient=self.root, hMemory=mem)

  def close(self):
    for fd in (self.uvm, self.ctl):
      try: self.k.close(fd)
      except OSError: pass
