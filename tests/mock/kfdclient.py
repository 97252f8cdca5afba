"""A minimal KFD client used by the tests: the calls a runtime makes, spelled as struct fields (no runtime logic)."""
from __future__ import annotations
import ctypes, errno
import pytest
from gputwin.abi.hostmem import PROT_READ, PROT_WRITE, MAP_SHARED
from gputwin.abi import kfd as abi
from gputwin.mock.kfd.driver import MockKernel

GTT = abi.KFD_IOC_ALLOC_MEM_FLAGS_GTT | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
VRAM = abi.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | abi.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC


class Client:
  def __init__(self, targets="gfx1100"):
    self.k = MockKernel(targets)
    self.kfd = self.k.open("/dev/kfd")
    self.gpus = self.k.gpus
    self.gpu = self.gpus[0].gpu_id
    self.renders: dict[int, int] = {}
    self.next_va = 0x2_0000_0000

  def struct(self, name: str, **fields):
    return abi.IOCTL_BY_NR[abi.IOC_NR(abi.IOCTL_NUMBERS[name])][3](**fields)

  def call(self, name: str, **fields):
    a = self.struct(name, **fields)
    self.k.ioctl(self.kfd, abi.IOCTL_NUMBERS[name], a)
    return a

  def err(self, name: str, **fields) -> int:
    """The errno the call fails with (the test fails if it succeeds)."""
    with pytest.raises(OSError) as e: self.call(name, **fields)
    return e.value.errno

  def acquire(self, gpu=None) -> int:
    g = next(g for g in self.gpus if g.gpu_id == (gpu or self.gpu))
    fd = self.renders[g.gpu_id] = self.k.open(f"/dev/dri/renderD{g.render_minor}")
    self.call("ACQUIRE_VM", drm_fd=fd, gpu_id=g.gpu_id)
    return fd

  def alloc(self, size: int, flags: int = GTT, gpu=None, va=None, **kw):
    if va is None: va, self.next_va = self.next_va, self.next_va + ((size + 0xFFFFF) & ~0xFFFFF) + 0x100000
    return self.call("ALLOC_MEMORY_OF_GPU", va_addr=va, size=size, gpu_id=gpu or self.gpu, flags=flags, **kw)

  def map(self, handle: int, gpus=None, name="MAP_MEMORY_TO_GPU"):
    ids = (ctypes.c_uint32 * len(gpus or [self.gpu]))(*(gpus or [self.gpu]))
    return self.call(name, handle=handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(ids))

  def buffer(self, size: int, flags: int = GTT, gpu=None):
    """alloc + map on the GPU + CPU mapping through the render node; returns (args, cpu address)."""
    a = self.alloc(size, flags, gpu)
    self.map(a.handle, [gpu or self.gpu])
    cpu = self.k.mmap(self.renders[gpu or self.gpu], a.mmap_offset, (size + 4095) & ~4095, PROT_READ | PROT_WRITE,
                      MAP_SHARED)
    return a, cpu

  def queue_args(self, qtype=abi.KFD_IOC_QUEUE_TYPE_COMPUTE, ring_size=0x1000, **kw):
    """Everything CREATE_QUEUE needs, allocated and mapped like a runtime would (ring, rptr/wptr page, EOP, CWSR)."""
    g = self.k.gpu(self.gpu)
    ring, _ = self.buffer(max(ring_size, 0x1000))
    ptrs, _ = self.buffer(0x1000)
    f = dict(ring_base_address=ring.va_addr, ring_size=ring_size, gpu_id=self.gpu, queue_type=qtype,
             queue_percentage=100, queue_priority=7, read_pointer_address=ptrs.va_addr,
             write_pointer_address=ptrs.va_addr + 8)
    if qtype in (abi.KFD_IOC_QUEUE_TYPE_COMPUTE, abi.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL):
      eop, _ = self.buffer(0x1000)
      ctx, _ = self.buffer(g.cwsr_total(g.props["cwsr_size"]))
      f |= dict(eop_buffer_address=eop.va_addr, eop_buffer_size=0x1000, ctx_save_restore_address=ctx.va_addr,
                ctx_save_restore_size=g.props["cwsr_size"], ctl_stack_size=g.props["ctl_stack_size"])
    return f | kw

  def close(self): self.k.shutdown()


EINVAL, EFAULT, ENOMEM, ENODEV, ESRCH, EBUSY, EPERM = (errno.EINVAL, errno.EFAULT, errno.ENOMEM, errno.ENODEV,
                                                       errno.ESRCH, errno.EBUSY, errno.EPERM)
