"""The mock /dev/nvidia-uvm: initialization, GPU and GPU-VA-space registration, external ranges and mappings, peer
access, each bad input with the rmStatus the real UVM driver returns (uvm.c, uvm_va_space.c, uvm_map_external.c)."""
import ctypes, errno
import pytest
from gputwin.abi import nv
from nvclient import Client, st

MiB = 1 << 20


@pytest.fixture
def c():
  cl = Client(("sm_90", "sm_80"))
  yield cl
  cl.close()


def setup_gpu(c: Client, gpu: int):
  """Device, VA space and UVM registration of one GPU; returns (device, VA space handle, its GPUAddressSpace)."""
  dev, _ = c.device(gpu)
  vas = c.alloc_ok(nv.FERMI_VASPACE_A, dev, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
  c.uvm_ok(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(gpu), rmCtrlFd=-1)
  c.uvm_ok(nv.UVM_REGISTER_GPU_VASPACE, gpuUuid=c.uuid(gpu), rmCtrlFd=c.ctl, hClient=c.root, hVaSpace=vas)
  return dev, vas, c.k._clients[c.root].objects[vas].vm


def test_initialize_and_mm_initialize(c):
  k = c.k
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid())) == "NV_ERR_ILLEGAL_ACTION"   # before INITIALIZE
  assert st(c.uvm_call(nv.UVM_INITIALIZE, flags=0x10)) == "NV_ERR_INVALID_ARGUMENT"
  c.uvm_ok(nv.UVM_INITIALIZE, flags=nv.UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE)
  c.uvm_ok(nv.UVM_INITIALIZE, flags=nv.UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE)       # again, same flags
  assert st(c.uvm_call(nv.UVM_INITIALIZE, flags=0)) == "NV_ERR_INVALID_ARGUMENT"
  mm = k.open("/dev/nvidia-uvm")
  assert st(c.uvm_call(nv.UVM_MM_INITIALIZE, fd=mm, uvmFd=c.ctl)) == "NV_ERR_INVALID_ARGUMENT"   # not a UVM file
  assert st(c.uvm_call(nv.UVM_MM_INITIALIZE, fd=c.uvm, uvmFd=c.uvm)) == "NV_ERR_IN_USE"
  assert st(c.uvm_call(nv.UVM_MM_INITIALIZE, fd=mm, uvmFd=c.uvm)) == "NV_OK"
  mm2 = k.open("/dev/nvidia-uvm")
  assert st(c.uvm_call(nv.UVM_MM_INITIALIZE, fd=mm2, uvmFd=c.uvm)) == "NV_ERR_INVALID_STATE"
  assert st(c.uvm_call(nv.UVM_INITIALIZE, fd=mm, flags=0)) == "NV_ERR_INVALID_ARGUMENT"    # an MM file
  assert c.uvm_ok(nv.UVM_PAGEABLE_MEM_ACCESS).pageableMemAccess == 0
  with pytest.raises(OSError) as e: k.ioctl(c.uvm, 0x1234, nv.UVM_FREE_PARAMS())
  assert e.value.errno == errno.EINVAL
  with pytest.raises(OSError) as e: k.ioctl(c.uvm, nv.UVM_FREE, ctypes.create_string_buffer(4))
  assert e.value.errno == errno.EFAULT
  assert k.ioctl(c.uvm, nv.UVM_DEINITIALIZE) == 0
  with pytest.raises(OSError) as e: k.mmap(c.uvm, 0, 4096, 3, 1)
  assert e.value.errno == errno.EINVAL


def test_gpu_and_vaspace_registration(c):
  c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
  dev, _ = c.device(0)
  vas = c.alloc_ok(nv.FERMI_VASPACE_A, dev, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
  bogus = nv.NvProcessorUuid((ctypes.c_uint8 * 16)(*range(16)))
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU, gpu_uuid=bogus, rmCtrlFd=-1)) == "NV_ERR_GPU_UUID_NOT_FOUND"
  reg = dict(gpuUuid=c.uuid(0), rmCtrlFd=c.ctl, hClient=c.root, hVaSpace=vas)
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **reg)) == "NV_ERR_INVALID_DEVICE"          # GPU not registered
  r = c.uvm_ok(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(0), rmCtrlFd=-1)
  assert (r.numaEnabled, r.numaNodeId) == (0, -1)
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(0), rmCtrlFd=-1)) == "NV_ERR_INVALID_DEVICE"
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **{**reg, "rmCtrlFd": c.uvm})) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **{**reg, "hClient": 0x1234})) == "NV_ERR_INVALID_OBJECT_HANDLE"
  other = c.k.open("/dev/nvidiactl")                                     # not the file that owns the client
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **{**reg, "rmCtrlFd": other})) == "NV_ERR_INVALID_CLIENT"
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **{**reg, "hVaSpace": dev})) == "NV_ERR_OBJECT_NOT_FOUND"
  c.uvm_ok(nv.UVM_REGISTER_GPU_VASPACE, **reg)
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **reg)) == "NV_ERR_INVALID_DEVICE"          # already has one
  dev1, _ = c.device(1)
  vas1 = c.alloc_ok(nv.FERMI_VASPACE_A, dev1, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
  c.uvm_ok(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(1), rmCtrlFd=-1)
  assert st(c.uvm_call(nv.UVM_REGISTER_GPU_VASPACE, **{**reg, "gpuUuid": c.uuid(1)})) == "NV_ERR_INVALID_DEVICE"
  c.uvm_ok(nv.UVM_REGISTER_GPU_VASPACE, **{**reg, "gpuUuid": c.uuid(1), "hVaSpace": vas1})
  c.uvm_ok(nv.UVM_UNREGISTER_GPU_VASPACE, gpuUuid=c.uuid(1))
  c.uvm_ok(nv.UVM_UNREGISTER_GPU, gpu_uuid=c.uuid(1))
  assert st(c.uvm_call(nv.UVM_UNREGISTER_GPU, gpu_uuid=c.uuid(1))) == "NV_ERR_INVALID_DEVICE"


def test_external_ranges_and_mappings(c):
  c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
  dev, vas, vm = setup_gpu(c, 0)
  mem, _ = c.vidmem(dev, 4 * MiB, huge=True)
  cpu = c.map_cpu(dev, mem, 4 * MiB)
  base = 0x2_0000_0000
  assert st(c.uvm_call(nv.UVM_CREATE_EXTERNAL_RANGE, base=base + 100, length=MiB)) == "NV_ERR_INVALID_ADDRESS"
  assert st(c.uvm_call(nv.UVM_CREATE_EXTERNAL_RANGE, base=0, length=MiB)) == "NV_ERR_INVALID_ADDRESS"
  c.uvm_ok(nv.UVM_CREATE_EXTERNAL_RANGE, base=base, length=8 * MiB)
  assert st(c.uvm_call(nv.UVM_CREATE_EXTERNAL_RANGE, base=base + MiB, length=MiB)) == "NV_ERR_UVM_ADDRESS_IN_USE"
  # mapping checks, in uvm_map_external_allocation's order
  assert st(c.uvm_map(base + 8 * MiB, MiB, mem, create=False)) == "NV_ERR_INVALID_ADDRESS"   # outside the range
  assert st(c.uvm_map(base, 16 * MiB, mem, create=False)) == "NV_ERR_INVALID_ADDRESS"         # runs past its end
  assert st(c.uvm_map(base, 4 * MiB, mem, gpus=(), create=False)) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.uvm_map(base, 4 * MiB, mem, gpus=(1,), create=False)) == "NV_ERR_INVALID_DEVICE"  # GPU 1 not registered
  assert st(c.uvm_map(base, 4 * MiB, 0x4444, create=False)) == "NV_ERR_OBJECT_NOT_FOUND"
  assert st(c.uvm_map(base, 4 * MiB, mem, offset=2 * MiB, create=False)) == "NV_ERR_INVALID_OFFSET"
  assert st(c.uvm_map(base, 4 * MiB, mem, create=False)) == "NV_OK"
  ctypes.memmove(cpu + 3 * MiB, b"vidmem", 6)
  assert vm.read(base + 3 * MiB, 6) == b"vidmem"
  # an offset mapping of the same memory replaces the part of the range it covers
  assert st(c.uvm_map(base + 4 * MiB, MiB, mem, offset=3 * MiB, create=False)) == "NV_OK"
  assert vm.read(base + 4 * MiB, 6) == b"vidmem"
  assert st(c.uvm_map(base, 2 * MiB, mem, offset=2 * MiB, create=False)) == "NV_OK"           # replaces [base, +4M)
  assert vm.read(base + MiB, 6) == b"vidmem" and vm.find(base + 3 * MiB) is None
  c.uvm_ok(nv.UVM_UNMAP_EXTERNAL, base=base + 4 * MiB, length=MiB, gpuUuid=c.uuid(0))
  assert vm.find(base + 4 * MiB) is None
  assert st(c.uvm_call(nv.UVM_FREE, base=base + MiB)) == "NV_ERR_INVALID_ADDRESS"             # not a range start
  # RM memory freed under a UVM mapping: the dup keeps the pages until UVM lets go
  assert st(c.free(mem)) == "NV_OK"
  assert vm.read(base + MiB, 6) == b"vidmem"
  c.uvm_ok(nv.UVM_FREE, base=base)
  assert vm.find(base) is None and len(vm) == 0
  assert st(c.uvm_call(nv.UVM_FREE, base=base)) == "NV_ERR_INVALID_ADDRESS"


def test_peer_mappings_need_peer_access(c):
  c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
  dev0, _, vm0 = setup_gpu(c, 0)
  dev1, _, vm1 = setup_gpu(c, 1)
  mem0, _ = c.vidmem(dev0, 2 * MiB, huge=True)
  sys0, _ = c.vidmem(dev0, 2 * MiB, cls=nv.NV01_MEMORY_SYSTEM)
  base = 0x3_0000_0000
  assert st(c.uvm_map(base, 2 * MiB, mem0, gpus=(0, 1))) == "NV_ERR_INVALID_DEVICE"   # GPU 0's vidmem on GPU 1
  assert vm0.find(base) is None                                                        # GPU 0's mapping undone
  assert st(c.uvm_map(base + 2 * MiB, 2 * MiB, sys0, gpus=(0, 1))) == "NV_OK"         # sysmem: any GPU
  assert st(c.uvm_call(nv.UVM_ENABLE_PEER_ACCESS, gpuUuidA=c.uuid(0), gpuUuidB=c.uuid(0))) == "NV_ERR_INVALID_DEVICE"
  c.uvm_ok(nv.UVM_ENABLE_PEER_ACCESS, gpuUuidA=c.uuid(0), gpuUuidB=c.uuid(1))
  assert st(c.uvm_call(nv.UVM_ENABLE_PEER_ACCESS, gpuUuidA=c.uuid(1), gpuUuidB=c.uuid(0))) == "NV_ERR_INVALID_DEVICE"
  assert st(c.uvm_map(base, 2 * MiB, mem0, gpus=(0, 1), create=False)) == "NV_OK"
  vm0.write(base + 64, b"peer")
  assert vm1.read(base + 64, 4) == b"peer"                                             # the same pages on both GPUs
  c.uvm_ok(nv.UVM_DISABLE_PEER_ACCESS, gpuUuidA=c.uuid(0), gpuUuidB=c.uuid(1))
  assert vm1.find(base) is None and vm0.find(base) is not None                         # peer mappings go with it
  assert st(c.uvm_call(nv.UVM_DISABLE_PEER_ACCESS, gpuUuidA=c.uuid(0), gpuUuidB=c.uuid(1))) == "NV_ERR_INVALID_DEVICE"


def test_register_channel_and_release(c):
  c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
  from test_rm import bringup
  s = bringup(c, 0)
  reg = dict(gpuUuid=c.uuid(0), rmCtrlFd=c.ctl, hClient=c.root, hChannel=s.ch, base=0x7F00_0000_0000, length=64 * MiB)
  assert st(c.uvm_call(nv.UVM_REGISTER_CHANNEL, **{**reg, "hChannel": s.tsg})) == "NV_ERR_INVALID_CHANNEL"
  assert st(c.uvm_call(nv.UVM_REGISTER_CHANNEL, **{**reg, "gpuUuid": c.uuid(1)})) == "NV_ERR_INVALID_DEVICE"
  assert st(c.uvm_call(nv.UVM_REGISTER_CHANNEL, **{**reg, "base": s.gpfifo_va})) == "NV_ERR_UVM_ADDRESS_IN_USE"
  c.uvm_ok(nv.UVM_REGISTER_CHANNEL, **reg)
  assert st(c.uvm_call(nv.UVM_REGISTER_CHANNEL, **reg)) == "NV_ERR_INVALID_CHANNEL"
  c.uvm_ok(nv.UVM_UNREGISTER_CHANNEL, hClient=c.root, hChannel=s.ch)
  # closing the UVM file unmaps everything it mapped
  vm = s.channel.vm
  assert vm.find(s.gpfifo_va) is not None
  c.k.close(c.uvm)
  assert vm.find(s.gpfifo_va) is None
