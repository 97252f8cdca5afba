"""The mock NVIDIA driver's RM side (/dev/nvidiactl, /dev/nvidiaN) driven the way a runtime drives the real one: a full
bring-up and teardown, then every class of bad input with the errno (ioctl level) or NV_STATUS (RM level) the real
driver returns (nvidia_ioctl in nv.c, RmIoctl in escape.c, the resource server and class constructors)."""
import ctypes, errno, mmap, struct, types
import pytest
from gputwin.abi import nv
from gputwin.abi.hostmem import MAP_SHARED, PROT_READ, PROT_WRITE, host_mmap, host_munmap
from gputwin.errors import EmuError, EmuFault
from gputwin.mock.nv import MockNV
from nvclient import Client, st

GPFIFO_ENTRIES = 0x400


@pytest.fixture
def c():
  cl = Client(("sm_90",))
  yield cl
  cl.close()


def bringup(c: Client, gpu: int = 0):
  """What a runtime does (tinygrad's NVDevice order): device, subdevice, usermode + doorbell mapping, VA space,
  UVM registration, GPFIFO/USERD memory, error notifier, TSG, context share, channel, compute + copy objects,
  debugger, schedule, work-submit token."""
  s = types.SimpleNamespace()
  s.dev, s.sub = c.device(gpu)
  um_cls = nv.HOPPER_USERMODE_A if c.k.gpus[gpu].arch == "sm_90" else nv.AMPERE_USERMODE_A
  s.usermode = c.alloc_ok(um_cls, s.sub, nv.NV_HOPPER_USERMODE_A_PARAMS() if um_cls == nv.HOPPER_USERMODE_A else None)
  s.mmio = c.map_cpu(s.sub, s.usermode, 0x10000, gpu=gpu)
  s.vas = c.alloc_ok(nv.FERMI_VASPACE_A, s.dev, nv.NV_VASPACE_ALLOCATION_PARAMETERS(
    vaBase=0x1000, vaSize=0x1FFFFFB000000,
    flags=nv.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED))
  if not c.k._fds[c.uvm].uvm: c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
  c.uvm_ok(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(gpu), rmCtrlFd=-1)
  c.uvm_ok(nv.UVM_REGISTER_GPU_VASPACE, gpuUuid=c.uuid(gpu), rmCtrlFd=c.ctl, hClient=c.root, hVaSpace=s.vas)
  s.gpfifo, _ = c.vidmem(s.dev, 0x200000, huge=True)
  s.gpfifo_va = c.map_cpu(s.dev, s.gpfifo, 0x200000, gpu=gpu)
  assert st(c.uvm_map(s.gpfifo_va, 0x200000, s.gpfifo, gpus=(gpu,))) == "NV_OK"
  s.notifier, _ = c.vidmem(s.dev, 0x1000, cls=nv.NV01_MEMORY_SYSTEM)
  s.notifier_va = c.map_cpu(s.dev, s.notifier, 0x1000, sysmem=True)
  s.tsg = c.alloc_ok(nv.KEPLER_CHANNEL_GROUP_A, s.dev,
                     nv.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=nv.NV2080_ENGINE_TYPE_GRAPHICS))
  s.ctx = c.alloc_ok(nv.FERMI_CONTEXT_SHARE_A, s.tsg, nv.NV_CTXSHARE_ALLOCATION_PARAMETERS(
    hVASpace=s.vas, flags=nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
  s.userd_off = GPFIFO_ENTRIES * 8
  s.chp = chp = nv.NV_CHANNEL_ALLOC_PARAMS(hObjectError=s.notifier, hObjectBuffer=s.gpfifo, gpFifoOffset=s.gpfifo_va,
                                           gpFifoEntries=GPFIFO_ENTRIES, hContextShare=s.ctx)
  chp.hUserdMemory[0], chp.userdOffset[0] = s.gpfifo, s.userd_off
  s.ch_cls = nv.HOPPER_CHANNEL_GPFIFO_A if c.k.gpus[gpu].arch == "sm_90" else nv.AMPERE_CHANNEL_GPFIFO_A
  s.ch = c.alloc_ok(s.ch_cls, s.tsg, chp)
  s.compute_cls = nv.HOPPER_COMPUTE_A if c.k.gpus[gpu].arch == "sm_90" else nv.AMPERE_COMPUTE_A
  s.copy_cls = nv.HOPPER_DMA_COPY_A if c.k.gpus[gpu].arch == "sm_90" else nv.AMPERE_DMA_COPY_A
  s.compute = c.alloc_ok(s.compute_cls, s.ch)
  s.copy = c.alloc_ok(s.copy_cls, s.ch)
  s.dbg = c.alloc_ok(nv.GT200_DEBUGGER, s.dev, nv.NV83DE_ALLOC_PARAMETERS(hAppClient=c.root, hClass3dObject=s.compute))
  c.control_ok(s.tsg, nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, nv.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))
  tok = nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS(workSubmitToken=0xFFFFFFFF)
  s.token = c.control_ok(s.ch, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, tok).workSubmitToken
  s.channel = next(ch for ch in c.k.channels() if ch.handle == s.ch and ch.client == c.root)
  return s


# ---------------------------------------------------------------- the runtime's path
def test_card_info_and_version_check(c):
  ci = (nv.nv_ioctl_card_info_t * 32)()
  c.esc(c.ctl, nv.NV_ESC_CARD_INFO, ci)
  g = c.k.gpus[0]
  assert ci[0].valid and not ci[1].valid
  assert (ci[0].pci_info.vendor_id, ci[0].pci_info.device_id, ci[0].gpu_id, ci[0].minor_number) == \
         (0x10DE, 0x2330, g.gpu_id, 0)
  assert ci[0].fb_size == 80 << 30
  v = nv.nv_ioctl_rm_api_version_t(cmd=nv.NV_RM_API_VERSION_CMD_QUERY)
  c.esc(c.ctl, nv.NV_ESC_CHECK_VERSION_STR, v)
  assert v.versionString == nv.NV_VERSION_STRING.encode() and v.reply == nv.NV_RM_API_VERSION_REPLY_RECOGNIZED
  c.esc(c.ctl, nv.NV_ESC_CHECK_VERSION_STR, nv.nv_ioctl_rm_api_version_t(cmd=0, versionString=b"595.45.04"))
  bad = nv.nv_ioctl_rm_api_version_t(cmd=nv.NV_RM_API_VERSION_CMD_STRICT, versionString=b"535.104.05")
  with pytest.raises(OSError) as e: c.esc(c.ctl, nv.NV_ESC_CHECK_VERSION_STR, bad)
  assert e.value.errno == errno.EINVAL and bad.versionString == b"595.45.04"   # copied back on failure too
  relaxed = nv.nv_ioctl_rm_api_version_t(cmd=nv.NV_RM_API_VERSION_CMD_RELAXED, versionString=b"595.01")
  c.esc(c.ctl, nv.NV_ESC_CHECK_VERSION_STR, relaxed)                            # the same major version suffices
  with pytest.raises(OSError):
    c.esc(c.ctl, nv.NV_ESC_CHECK_VERSION_STR, nv.nv_ioctl_rm_api_version_t(cmd=nv.NV_RM_API_VERSION_CMD_RELAXED,
                                                                            versionString=b"595"))
  with pytest.raises(OSError) as e: c.esc(c.ctl, nv.NV_ESC_CARD_INFO, (nv.nv_ioctl_card_info_t * 0)())
  assert e.value.errno == errno.EINVAL                                          # no room for the GPUs


def test_controls_a_runtime_reads(c):
  dev, sub = c.device(0)
  g = c.k.gpus[0]
  ids = c.control_ok(c.root, nv.NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS, nv.NV0000_CTRL_GPU_GET_ATTACHED_IDS_PARAMS())
  assert list(ids.gpuIds[:2]) == [g.gpu_id, nv.NV0000_CTRL_GPU_INVALID_ID]
  info = c.control_ok(c.root, nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
                      nv.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=g.gpu_id))
  assert (info.deviceInstance, info.subDeviceInstance) == (0, 0)
  bv = c.control_ok(c.root, nv.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
                    nv.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
  assert bv.driverVersionBuffer == b"595.45.04"
  bufs = [ctypes.create_string_buffer(64) for _ in range(3)]
  b1 = nv.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS(sizeOfStrings=64, **{
    n: ctypes.addressof(b) for n, b in zip(("pDriverVersionBuffer", "pVersionBuffer", "pTitleBuffer"), bufs)})
  c.control_ok(c.root, nv.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION, b1)
  assert bufs[0].value == b"595.45.04"
  # class list, both forms: the pointer form reports the count first
  cl1 = c.control_ok(dev, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, nv.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS())
  arr = (ctypes.c_uint32 * cl1.numClasses)()
  c.control_ok(dev, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, nv.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(
    numClasses=cl1.numClasses, classList=ctypes.addressof(arr)))
  cl2 = c.control_ok(dev, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, nv.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS())
  assert list(arr) == list(cl2.classList[:cl2.numClasses])
  assert {nv.HOPPER_COMPUTE_A, nv.HOPPER_DMA_COPY_A, nv.HOPPER_CHANNEL_GPFIFO_A, nv.HOPPER_USERMODE_A} <= set(arr)
  # GR info: SM version and litter values through the pointer list
  lst = (nv.NVXXXX_CTRL_XXX_INFO * 4)(*[nv.NVXXXX_CTRL_XXX_INFO(index=i) for i in (
    nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
    nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC)])
  c.control_ok(sub, nv.NV2080_CTRL_CMD_GR_GET_INFO,
               nv.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=4, grInfoList=ctypes.addressof(lst)))
  assert [e.data for e in lst] == [nv.NV2080_CTRL_GR_INFO_SM_VERSION_9_0, 8, 9, 2]
  gid = c.control_ok(sub, nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO, nv.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(
    flags=nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16))
  assert bytes(gid.data[:gid.length]) == g.uuid
  gid = c.control_ok(sub, nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO, nv.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS())
  text = bytes(gid.data[:gid.length - 1]).decode()
  assert text == "GPU-" + "-".join(g.uuid.hex()[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
  arch = c.control_ok(sub, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, nv.NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS())
  assert (arch.architecture, arch.implementation) == (0x180, 0)
  c.control_ok(sub, nv.NV2080_CTRL_CMD_PERF_BOOST, nv.NV2080_CTRL_PERF_BOOST_PARAMS(
    duration=0xFFFFFFFF, flags=nv.DRF_NUM(nv.NV2080_CTRL_PERF_BOOST_FLAGS_CMD, 2) | 1 << 4 | 1 << 6))
  eng = c.control_ok(sub, nv.NV2080_CTRL_CMD_GPU_GET_ENGINES_V2, nv.NV2080_CTRL_GPU_GET_ENGINES_V2_PARAMS())
  assert nv.NV2080_ENGINE_TYPE_GRAPHICS in eng.engineList[:eng.engineCount]
  c.control_ok(sub, nv.NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE, nv.NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS())
  name = c.control_ok(sub, nv.NV2080_CTRL_CMD_GPU_GET_NAME_STRING, nv.NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS())
  assert bytes(name.gpuNameString).split(b"\0")[0] == b"NVIDIA H100 80GB HBM3"


def test_full_bringup_and_teardown(c):
  seen = []
  c.k.on_channel(lambda ch: seen.append((ch.handle, ch.freed)))
  s = bringup(c)
  ch = s.channel
  # the channel as the GPU sees it
  assert (ch.class_id, ch.gpfifo_va, ch.gpfifo_entries, ch.token, ch.scheduled) == \
         (nv.HOPPER_CHANNEL_GPFIFO_A, s.gpfifo_va, GPFIFO_ENTRIES, s.token, True)
  assert ch.engines == {nv.HOPPER_COMPUTE_A: s.compute, nv.HOPPER_DMA_COPY_A: s.copy}
  vas_vm = c.k._clients[c.root].objects[s.vas].vm
  assert ch.vm is vas_vm and len(ch.userd) >= 512
  # USERD aliases the CPU mapping of the GPFIFO memory at userdOffset; the ring is readable by GPU VA
  ctypes.c_uint32.from_address(s.gpfifo_va + s.userd_off + 0x8C).value = 0x1234       # GPPut of the C86F control area
  assert struct.unpack_from("<I", ch.userd, 0x8C)[0] == 0x1234
  ctypes.c_uint64.from_address(s.gpfifo_va).value = 0xDEADBEEF_0000_1000
  assert ch.vm.read_u64(ch.gpfifo_va) == 0xDEADBEEF_0000_1000
  # the doorbell: userspace writes the token at NOTIFY_CHANNEL_PENDING of its usermode mapping
  ctypes.c_uint32.from_address(s.mmio + nv.NVC361_NOTIFY_CHANNEL_PENDING).value = s.token
  assert struct.unpack_from("<I", c.k.doorbell(0), nv.NVC361_NOTIFY_CHANNEL_PENDING)[0] == s.token
  assert c.k.work.is_set() and seen == [(s.ch, False)]
  # UVM knows the channel; the TSG timeslice round-trips
  c.uvm_ok(nv.UVM_REGISTER_CHANNEL, gpuUuid=c.uuid(), rmCtrlFd=c.ctl, hClient=c.root, hChannel=s.ch,
           base=0x7F0000000000, length=0x4000000)
  c.control_ok(s.tsg, nv.NVA06C_CTRL_CMD_SET_TIMESLICE, nv.NVA06C_CTRL_TIMESLICE_PARAMS(timesliceUs=5000))
  assert c.control_ok(s.tsg, nv.NVA06C_CTRL_CMD_GET_TIMESLICE, nv.NVA06C_CTRL_TIMESLICE_PARAMS()).timesliceUs == 5000
  sz = c.control_ok(s.sub, nv.NV2080_CTRL_CMD_GR_GET_CTX_BUFFER_SIZE, nv.NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS(
    hChannel=s.ch))
  assert sz.totalBufferSize > 0
  # free in reverse order
  for h in (s.dbg, s.copy, s.compute, s.ch, s.ctx, s.tsg):
    assert st(c.free(h)) == "NV_OK"
  assert seen == [(s.ch, False), (s.ch, True)] and c.k.channels() == [] and ch.freed
  assert ch.engines == {}
  for h in (s.notifier, s.gpfifo, s.vas, s.usermode, s.sub, s.dev):
    assert st(c.free(h)) == "NV_OK"
  assert st(c.free(c.root)) == "NV_OK"
  # the client is gone: _serverFindClientEntry finds no entry in its bucket
  assert st(c.alloc(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS())) == "NV_ERR_INVALID_OBJECT_HANDLE"


def test_memory_cpu_and_gpu_mappings_alias(c):
  s = bringup(c)
  mem, a = c.vidmem(s.dev, 3 << 20, huge=True)
  assert a.size == 4 << 20 and a.limit == a.offset + a.size - 1          # rounded to the 2 MiB page
  cpu = c.map_cpu(s.dev, mem, 4 << 20)
  assert st(c.uvm_map(cpu, 4 << 20, mem)) == "NV_OK"
  vm = s.channel.vm
  ctypes.memmove(cpu + 100, b"from the CPU", 12)
  assert vm.read(cpu + 100, 12) == b"from the CPU"
  vm.write(cpu + 4096, b"from the GPU")
  assert ctypes.string_at(cpu + 4096, 12) == b"from the GPU"
  # RM-chosen GPU VA (RM_MAP_MEMORY_DMA) and a fixed one
  d = nv.NVOS46_PARAMETERS(hClient=c.root, hDevice=s.dev, hDma=s.vas, hMemory=mem)
  c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY_DMA, d)
  assert st(d) == "NV_OK" and d.dmaOffset % (2 << 20) == 0 and vm.read(d.dmaOffset + 100, 12) == b"from the CPU"
  fixed = nv.NVOS46_PARAMETERS(hClient=c.root, hDevice=s.dev, hDma=s.vas, hMemory=mem, offset=1 << 20,
                               length=1 << 20, dmaOffset=0x5000_0000_0000,
                               flags=nv.DRF_NUM(nv.NVOS46_FLAGS_DMA_OFFSET_FIXED, 1))
  c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY_DMA, fixed)
  assert st(fixed) == "NV_OK" and fixed.dmaOffset == 0x5000_0000_0000
  ctypes.memmove(cpu + (1 << 20) + 8, b"second MiB", 10)
  assert vm.read(fixed.dmaOffset + 8, 10) == b"second MiB"                # offset 1 MiB of the memory
  again = nv.NVOS46_PARAMETERS(hClient=c.root, hDevice=s.dev, hDma=s.vas, hMemory=mem, length=4096,
                               dmaOffset=0x5000_0000_0000, flags=nv.DRF_NUM(nv.NVOS46_FLAGS_DMA_OFFSET_FIXED, 1))
  c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY_DMA, again)
  assert st(again) == "NV_ERR_INVALID_OFFSET"                            # already mapped there
  big = nv.NVOS46_PARAMETERS(hClient=c.root, hDevice=s.dev, hDma=s.vas, hMemory=mem, length=8 << 20)
  c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY_DMA, big)
  assert st(big) == "NV_ERR_INVALID_LIMIT"
  un = nv.NVOS47_PARAMETERS(hClient=c.root, hDevice=s.dev, hDma=s.vas, hMemory=mem, dmaOffset=fixed.dmaOffset)
  c.esc(c.ctl, nv.NV_ESC_RM_UNMAP_MEMORY_DMA, un)
  assert st(un) == "NV_OK" and vm.find(fixed.dmaOffset) is None
  c.esc(c.ctl, nv.NV_ESC_RM_UNMAP_MEMORY_DMA, un)
  assert st(un) == "NV_ERR_INVALID_ARGUMENT"
  # freeing the memory drops its RM DMA mapping; the UVM mapping keeps the pages until UVM_FREE
  assert st(c.free(mem)) == "NV_OK"
  assert vm.find(d.dmaOffset) is None and vm.read(cpu + 4096, 12) == b"from the GPU"
  c.uvm_ok(nv.UVM_FREE, base=cpu)
  assert vm.find(cpu) is None


def test_os_descriptor_memory_is_the_users_pages(c):
  dev, sub = c.device(0)
  fd = c.dev_fd(0)
  size = 0x4000
  user = host_mmap(0, size, PROT_READ | PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
  ok_flags = nv.DRF_NUM(nv.NVOS02_FLAGS_PHYSICALITY, 1) | nv.DRF_NUM(nv.NVOS02_FLAGS_COHERENCY, 1) | \
             nv.DRF_NUM(nv.NVOS02_FLAGS_MAPPING, nv.NVOS02_FLAGS_MAPPING_NO_MAP)

  def alloc(flags=ok_flags, addr=user, limit=size - 1, fd=fd, h=0x5000):
    w = nv.nv_ioctl_nvos02_parameters_with_fd(fd=-1, params=nv.NVOS02_PARAMETERS(
      hRoot=c.root, hObjectParent=dev, hObjectNew=h, hClass=nv.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags,
      pMemory=addr, limit=limit))
    c.esc(fd, nv.NV_ESC_RM_ALLOC_MEMORY, w)
    return w.params
  try:
    assert st(alloc(flags=ok_flags & ~nv.DRF_NUM(nv.NVOS02_FLAGS_MAPPING, 3))) == "NV_ERR_INVALID_FLAGS"
    assert st(alloc(flags=ok_flags | nv.DRF_NUM(nv.NVOS02_FLAGS_COHERENCY, 2))) == "NV_ERR_INVALID_FLAGS"
    assert st(alloc(addr=user + 8)) == "NV_ERR_NOT_SUPPORTED"
    assert st(alloc(limit=(1 << 64) - 1)) == "NV_ERR_INVALID_LIMIT"
    assert st(alloc(addr=0x1000)) == "NV_ERR_INVALID_ADDRESS"        # not the user's pages
    unregistered = c.k.open("/dev/nvidia0")
    assert st(alloc(fd=unregistered)) == "NV_ERR_INVALID_CLIENT"      # the client belongs to our nvidiactl file
    with pytest.raises(OSError) as e: alloc(fd=c.ctl)                # NV_ACTUAL_DEVICE_ONLY
    assert e.value.errno == errno.EINVAL
    p = alloc()
    assert st(p) == "NV_OK" and p.hObjectNew == 0x5000
    vas = c.alloc_ok(nv.FERMI_VASPACE_A, dev, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
    c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
    c.uvm_ok(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(), rmCtrlFd=-1)
    c.uvm_ok(nv.UVM_REGISTER_GPU_VASPACE, gpuUuid=c.uuid(), rmCtrlFd=c.ctl, hClient=c.root, hVaSpace=vas)
    assert st(c.uvm_map(user, size, 0x5000)) == "NV_OK"
    ctypes.memmove(user + 8, b"user page", 9)
    assert c.k._clients[c.root].objects[vas].vm.read(user + 8, 9) == b"user page"
    c.uvm_ok(nv.UVM_FREE, base=user)
  finally:
    host_munmap(user, size)


# ---------------------------------------------------------------- ioctl-level failures (nvidia_ioctl / RmIoctl)
def test_ioctl_level_errnos(c):
  k = c.k
  p = nv.NVOS00_PARAMETERS(hRoot=c.root, hObjectOld=c.root)
  with pytest.raises(OSError) as e: k.ioctl(12345, nv.nv_iowr(nv.NV_ESC_RM_FREE, p), p)
  assert e.value.errno == errno.EBADF
  with pytest.raises(OSError) as e: k.ioctl(c.ctl, nv.nv_iowr(0x77, p), p)             # unknown escape
  assert e.value.errno == errno.EINVAL
  with pytest.raises(OSError) as e: k.ioctl(c.ctl, nv.nv_iowr(nv.NV_ESC_RM_FREE, 20), ctypes.create_string_buffer(20))
  assert e.value.errno == errno.EINVAL                                                  # size != sizeof(NVOS00)
  with pytest.raises(OSError) as e: k.ioctl(c.ctl, nv.nv_iowr(nv.NV_ESC_RM_FREE, p), ctypes.create_string_buffer(4))
  assert e.value.errno == errno.EFAULT                                                  # copy_from_user
  dev_fd = k.open("/dev/nvidia0")
  for esc, q in ((nv.NV_ESC_RM_FREE, p), (nv.NV_ESC_RM_CONTROL, nv.NVOS54_PARAMETERS()),
                 (nv.NV_ESC_CARD_INFO, (nv.nv_ioctl_card_info_t * 4)()),
                 (nv.NV_ESC_RM_ALLOC, nv.NVOS21_PARAMETERS(hClass=nv.NV01_ROOT_CLIENT))):
    with pytest.raises(OSError) as e: k.ioctl(dev_fd, nv.nv_iowr(esc, q), q)            # NV_CTL_DEVICE_ONLY
    assert e.value.errno == errno.EINVAL, hex(esc)
  # REGISTER_FD: not a control fd, itself, twice
  for bad in (dev_fd, 999):
    with pytest.raises(OSError): c.esc(dev_fd, nv.NV_ESC_REGISTER_FD, nv.nv_ioctl_register_fd_t(ctl_fd=bad))
  c.esc(dev_fd, nv.NV_ESC_REGISTER_FD, nv.nv_ioctl_register_fd_t(ctl_fd=c.ctl))
  with pytest.raises(OSError): c.esc(dev_fd, nv.NV_ESC_REGISTER_FD, nv.nv_ioctl_register_fd_t(ctl_fd=c.ctl))
  # the NVOS64 (access-rights) form of RM_ALLOC is accepted by size
  p64 = nv.NVOS64_PARAMETERS(hRoot=c.root, hObjectParent=c.root, hClass=nv.NV01_DEVICE_0)
  c.esc(c.ctl, nv.NV_ESC_RM_ALLOC, p64)
  assert st(p64) == "NV_OK" and p64.hObjectNew
  # a large argument through NV_ESC_IOCTL_XFER_CMD
  p = nv.NVOS00_PARAMETERS(hRoot=c.root, hObjectOld=p64.hObjectNew)
  x = nv.nv_ioctl_xfer_t(cmd=nv.NV_ESC_RM_FREE, size=ctypes.sizeof(p), ptr=ctypes.addressof(p))
  c.esc(c.ctl, nv.NV_ESC_IOCTL_XFER_CMD, x)
  assert st(p) == "NV_OK"


# ---------------------------------------------------------------- RM-level failures (NV_STATUS in the params)
def test_alloc_and_free_statuses(c):
  dev, sub = c.device(0)
  # an unknown client: the answer depends on the handle's bucket (a larger live handle there -> INVALID_OBJECT)
  assert st(c.alloc(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS(), hroot=0xBAD)) == \
         "NV_ERR_INVALID_OBJECT_HANDLE"
  assert st(c.alloc(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS(), hroot=c.root - 0x400)) == \
         "NV_ERR_INVALID_OBJECT"
  assert st(c.alloc(0x1234, dev)) == "NV_ERR_INVALID_CLASS"
  assert st(c.alloc(nv.NV20_SUBDEVICE_0, 0x7777)) == "NV_ERR_OBJECT_NOT_FOUND"          # no such parent
  assert st(c.alloc(nv.NV20_SUBDEVICE_0, sub)) == "NV_ERR_INVALID_OBJECT_PARENT"        # wrong parent class
  assert st(c.alloc(nv.FERMI_CONTEXT_SHARE_A, dev)) == "NV_ERR_INVALID_OBJECT_PARENT"
  assert st(c.alloc(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS(), handle=sub)) == \
         "NV_ERR_INSERT_DUPLICATE_NAME"
  assert st(c.alloc(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS(deviceId=5))) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.alloc(nv.HOPPER_CHANNEL_GPFIFO_A, dev)) == "NV_ERR_INVALID_ARGUMENT"       # params required
  assert st(c.alloc(nv.NV01_MEMORY_LOCAL_USER, dev)) == "NV_ERR_INVALID_ARGUMENT"
  bad_sz = nv.NVOS21_PARAMETERS(hRoot=c.root, hObjectParent=dev, hClass=nv.FERMI_VASPACE_A,
                                pAllocParms=ctypes.addressof(nv.NV_VASPACE_ALLOCATION_PARAMETERS()), paramsSize=3)
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_ALLOC, bad_sz)) == "NV_ERR_INVALID_ARGUMENT"
  unreadable = nv.NVOS21_PARAMETERS(hRoot=c.root, hObjectParent=dev, hClass=nv.FERMI_VASPACE_A, pAllocParms=0x10,
                                    paramsSize=ctypes.sizeof(nv.NV_VASPACE_ALLOCATION_PARAMETERS))
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_ALLOC, unreadable)) == "NV_ERR_INVALID_ADDRESS"
  huge = nv.NV_MEMORY_ALLOCATION_PARAMS(size=100 << 30)
  assert st(c.alloc(nv.NV01_MEMORY_LOCAL_USER, dev, huge)) == "NV_ERR_NO_MEMORY"         # more than the 80 GiB FB
  assert st(c.alloc(nv.NV01_MEMORY_LOCAL_USER, dev, nv.NV_MEMORY_ALLOCATION_PARAMS())) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.free(0x4242)) == "NV_OK"                  # RS_COMPATABILITY_MODE: freeing an unknown handle is a no-op
  # a second client on another nvidiactl file cannot use ours
  other = Client(k=c.k)
  foreign = other.alloc(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS(), hroot=c.root)
  assert st(foreign) == "NV_ERR_INVALID_CLIENT"
  assert st(c.alloc(nv.NV01_ROOT_CLIENT, 0, handle=other.root, hroot=0)) == "NV_ERR_INSERT_DUPLICATE_NAME"
  other.close()


def test_gpu_classes_follow_the_gpu():
  c = Client(("sm_90", "sm_80"))
  dev1, sub1 = c.device(1)
  assert c.k.gpus[1].arch == "sm_80"
  cl = c.control_ok(dev1, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, nv.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS())
  got = set(cl.classList[:cl.numClasses])
  assert nv.AMPERE_COMPUTE_A in got and nv.HOPPER_COMPUTE_A not in got and nv.HOPPER_USERMODE_A not in got
  assert st(c.alloc(nv.HOPPER_USERMODE_A, sub1)) == "NV_ERR_INVALID_CLASS"
  arch = c.control_ok(sub1, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, nv.NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS())
  assert arch.architecture == nv.NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GA100
  lst = (nv.NVXXXX_CTRL_XXX_INFO * 1)(nv.NVXXXX_CTRL_XXX_INFO(index=nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION))
  c.control_ok(sub1, nv.NV2080_CTRL_CMD_GR_GET_INFO,
               nv.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=1, grInfoList=ctypes.addressof(lst)))
  assert lst[0].data == 0x800
  s = bringup(c, 1)
  assert s.channel.gpu.index == 1 and s.channel.class_id == nv.AMPERE_CHANNEL_GPFIFO_A
  assert st(c.alloc(nv.HOPPER_COMPUTE_A, s.ch)) == "NV_ERR_INVALID_CLASS"
  ci = (nv.nv_ioctl_card_info_t * 2)()
  c.esc(c.ctl, nv.NV_ESC_CARD_INFO, ci)
  assert [x.pci_info.device_id for x in ci] == [0x2330, 0x20B2] and ci[0].gpu_id != ci[1].gpu_id
  c.close()


def test_control_statuses(c):
  dev, sub = c.device(0)
  arch = nv.NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS()
  assert st(c.control(dev, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, arch)) == "NV_ERR_NOT_SUPPORTED"   # wrong object
  assert st(c.control(sub, 0x20800199, arch)) == "NV_ERR_NOT_SUPPORTED"                             # no such command
  assert st(c.control(sub, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, arch, size=4)) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.control(0x999, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, arch, size=4)) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.control(sub, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, None, size=16)) == "NV_ERR_INVALID_ARGUMENT"
  assert st(c.control(0x999, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, arch)) == "NV_ERR_OBJECT_NOT_FOUND"
  assert st(c.control(0x999, 0x20800000)) == "NV_OK"                 # a NULL command succeeds before any lookup
  p = nv.NVOS54_PARAMETERS(hClient=0xBAD, hObject=sub, cmd=nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO,
                           params=ctypes.addressof(arch), paramsSize=ctypes.sizeof(arch))
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_CONTROL, p)) == "NV_ERR_INVALID_OBJECT_HANDLE"
  p = nv.NVOS54_PARAMETERS(hClient=c.root, hObject=sub, cmd=nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, params=0x10,
                           paramsSize=ctypes.sizeof(arch))
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_CONTROL, p)) == "NV_ERR_INVALID_ADDRESS"
  info = nv.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=0x1234)
  assert st(c.control(c.root, nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, info)) == "NV_ERR_INVALID_ARGUMENT"
  small = nv.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(numClasses=2, classList=ctypes.addressof((ctypes.c_uint32 * 2)()))
  assert st(c.control(dev, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, small)) == "NV_ERR_INVALID_PARAM_STRUCT"
  boost = nv.NV2080_CTRL_PERF_BOOST_PARAMS(duration=4000, flags=1)
  assert st(c.control(sub, nv.NV2080_CTRL_CMD_PERF_BOOST, boost)) == "NV_ERR_INVALID_ARGUMENT"
  gr = nv.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=0)
  assert st(c.control(sub, nv.NV2080_CTRL_CMD_GR_GET_INFO, gr)) == "NV_ERR_INVALID_ARGUMENT"


def test_channel_parameter_checks(c):
  s = bringup(c)
  def chan(**kw):
    p = nv.NV_CHANNEL_ALLOC_PARAMS(hObjectError=s.notifier, gpFifoOffset=s.gpfifo_va + 0x10000, gpFifoEntries=64,
                                   hContextShare=s.ctx)
    p.hUserdMemory[0], p.userdOffset[0] = s.gpfifo, 0x20000
    for n, v in kw.items():
      if n == "userdOffset": p.userdOffset[0] = v
      else: setattr(p, n, v)
    return c.alloc(nv.HOPPER_CHANNEL_GPFIFO_A, s.tsg, p)
  assert st(chan(gpFifoEntries=100)) == "NV_ERR_INVALID_ARGUMENT"        # not a power of two
  assert st(chan(userdOffset=0x20100)) == "NV_ERR_INVALID_ARGUMENT"      # USERD is 512-byte aligned
  assert st(chan(hObjectError=s.tsg)) == "NV_ERR_INVALID_OBJECT_HANDLE"
  assert st(chan(hContextShare=0x9999)) == "NV_ERR_INVALID_OBJECT_HANDLE"
  p = chan()
  assert st(p) == "NV_OK"
  ids = sorted(ch.id for ch in c.k.channels())
  assert len(ids) == 2 and ids[0] != ids[1]
  assert st(c.control(s.tsg, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                      nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS())) == "NV_ERR_NOT_SUPPORTED"


def test_freeing_a_parent_frees_its_children(c):
  s = bringup(c)
  seen = []
  c.k.on_channel(lambda ch: seen.append(ch.freed))
  assert st(c.free(s.dev)) == "NV_OK"
  arch = nv.NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS()
  for h in (s.sub, s.usermode, s.vas, s.gpfifo, s.tsg, s.ctx, s.ch, s.compute, s.dbg):
    assert st(c.control(h, nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, arch)) == "NV_ERR_OBJECT_NOT_FOUND", hex(h)
  assert c.alloc_ok(nv.NV01_DEVICE_0, c.root, nv.NV0080_ALLOC_PARAMETERS(), handle=s.sub) == s.sub   # handle free again
  assert seen == [True] and c.k.channels() == []
  # closing the control file frees its clients, once the device files registered to it (which hold a reference
  # on it, as nv_get_file_private's priv does) are closed too
  s2 = Client(k=c.k)
  bringup(s2)
  assert len(c.k.channels()) == 1
  ctl_file = c.k._fds[s2.ctl]
  c.k.close(s2.ctl)
  c.k.close(s2.uvm)
  assert len(c.k.channels()) == 1 and s2.root in c.k._clients
  for fd in [fd for fd, f in c.k._fds.items() if f.ctl is ctl_file]: c.k.close(fd)
  assert c.k.channels() == [] and s2.root not in c.k._clients


def test_cpu_mapping_rules(c):
  dev, sub = c.device(0)
  um = c.alloc_ok(nv.HOPPER_USERMODE_A, sub)
  mem, _ = c.vidmem(dev, 0x10000)
  fd = c.dev_fd(0)
  def mapmem(h, fd=fd, length=0x10000, hdev=sub, offset=0):
    w = nv.nv_ioctl_nvos33_parameters_with_fd(fd=fd, params=nv.NVOS33_PARAMETERS(
      hClient=c.root, hDevice=hdev, hMemory=h, length=length, offset=offset))
    return c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY, w).params
  with pytest.raises(OSError) as e: c.k.mmap(fd, 0, 0x10000, PROT_READ, MAP_SHARED)
  assert e.value.errno == errno.EINVAL                                       # no mapping context on the file
  assert st(mapmem(um, length=0x20000)) == "NV_ERR_INVALID_LIMIT"
  assert st(mapmem(0x777)) == "NV_ERR_OBJECT_NOT_FOUND"
  assert st(mapmem(um, hdev=0x777)) == "NV_ERR_OBJECT_NOT_FOUND"
  assert st(mapmem(um, hdev=um)) == "NV_ERR_INVALID_OBJECT_HANDLE"              # not a device or subdevice
  assert st(mapmem(um, fd=c.k.open("/dev/nvidiactl"))) == "NV_ERR_INVALID_ARGUMENT"   # device memory needs /dev/nvidiaN
  p = mapmem(um)
  assert st(p) == "NV_OK" and p.pLinearAddress
  assert st(mapmem(mem, hdev=dev)) == "NV_ERR_STATE_IN_USE"                 # one mapping context per file
  with pytest.raises(OSError) as e: c.k.mmap(fd, 0x1000, 0x10000, PROT_READ, MAP_SHARED)
  assert e.value.errno == errno.EINVAL                                       # the offset must be 0
  with pytest.raises(OSError) as e: c.k.mmap(fd, 0, 0x1000, PROT_READ, MAP_SHARED)
  assert e.value.errno == errno.ENXIO                                        # the length must be the context's
  addr = c.k.mmap(fd, 0, 0x10000, PROT_READ | PROT_WRITE, MAP_SHARED)
  with pytest.raises(OSError) as e: c.k.mmap(fd, 0, 0x10000, PROT_READ, MAP_SHARED)
  assert e.value.errno == errno.EINVAL                                       # the mmap used the context up
  p2 = mapmem(mem, hdev=dev)                                                 # so the file takes a new one
  assert st(p2) == "NV_OK"
  vid = c.k.mmap(fd, 0, 0x10000, PROT_READ | PROT_WRITE, MAP_SHARED)
  c.k.munmap(vid, 0x10000)
  ctypes.c_uint32.from_address(addr + nv.NVC361_NOTIFY_CHANNEL_PENDING).value = 5
  assert c.k.doorbell(0)[nv.NVC361_NOTIFY_CHANNEL_PENDING] == 5
  un = nv.NVOS34_PARAMETERS(hClient=c.root, hDevice=sub, hMemory=um, pLinearAddress=p.pLinearAddress)
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_UNMAP_MEMORY, un)) == "NV_OK"
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_UNMAP_MEMORY, un)) == "NV_ERR_INVALID_ARGUMENT"
  c.k.munmap(addr, 0x10000)


# ---------------------------------------------------------------- GPU faults: notifier, SM error state, MMU fault info
def test_fault_channel_reports_like_robust_channel_recovery(c):
  s = bringup(c)
  ch = s.channel
  err = EmuFault(0xDEAD000, 4, "write", "sm_90", "k", 0x1230, "st.global.u32 [%rd1], %r1")
  c.k.fault_channel(ch, "shader page fault", 0xDEAD000, err)
  assert ch.error == "shader page fault" and c.k.gpu_error(0, 0xDEAD000) is err and c.k.gpu_error(0, None) is err
  assert c.k.gpu_error(c.k.gpus[0].gpu_id, 0xDEAD000) is err
  lo, hi, info32, info16, status = struct.unpack_from("<IIIHH", ctypes.string_at(s.notifier_va, 16))
  assert (info32, status) == (nv.ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT, 0xFFFF) and (hi << 32 | lo) > 0
  one = c.control_ok(s.dbg, nv.NV83DE_CTRL_CMD_DEBUG_READ_SINGLE_SM_ERROR_STATE,
                     nv.NV83DE_CTRL_DEBUG_READ_SINGLE_SM_ERROR_STATE_PARAMS(hTargetChannel=s.ch, smID=0))
  e = one.smErrorState
  assert (e.hwwEsrAddr, e.hwwWarpEsrPc64, e.hwwWarpEsrPc) == (0xDEAD000, 0x1230, 0x1230) and e.hwwWarpEsr
  allp = c.control_ok(s.dbg, nv.NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES,
                      nv.NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS(hTargetChannel=s.ch, numSMsToRead=4))
  assert allp.smErrorStateArray[0].hwwEsrAddr == 0xDEAD000 and allp.smErrorStateArray[1].hwwWarpEsr == 0
  assert allp.mmuFault.valid
  bad = nv.NV83DE_CTRL_DEBUG_READ_SINGLE_SM_ERROR_STATE_PARAMS(hTargetChannel=s.ch, smID=144)
  assert st(c.control(s.dbg, nv.NV83DE_CTRL_CMD_DEBUG_READ_SINGLE_SM_ERROR_STATE, bad)) == "NV_ERR_INVALID_ARGUMENT"
  mmu = c.control_ok(s.dbg, nv.NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO,
                     nv.NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_PARAMS())
  assert mmu.count == 1 and (mmu.mmuFaultInfoList[0].faultAddress, mmu.mmuFaultInfoList[0].accessType) == \
         (0xDEAD000, nv.NV_PFAULT_ACCESS_TYPE_VIRT_WRITE)
  c.control_ok(s.dbg, nv.NV83DE_CTRL_CMD_DEBUG_CLEAR_SINGLE_SM_ERROR_STATE,
               nv.NV83DE_CTRL_DEBUG_CLEAR_SINGLE_SM_ERROR_STATE_PARAMS(hTargetChannel=s.ch, smID=0))
  one = c.control_ok(s.dbg, nv.NV83DE_CTRL_CMD_DEBUG_READ_SINGLE_SM_ERROR_STATE,
                     nv.NV83DE_CTRL_DEBUG_READ_SINGLE_SM_ERROR_STATE_PARAMS(hTargetChannel=s.ch, smID=0))
  assert one.smErrorState.hwwWarpEsr == 0
  # a shader error that is not a page fault: GR exception; a bad pushbuffer: PBDMA error
  c.k.fault_channel(ch, "illegal instruction", None, EmuError("bad", "sm_90", "k", 0x40, "???"))
  assert struct.unpack_from("<I", ctypes.string_at(s.notifier_va + 8, 4))[0] == nv.ROBUST_CHANNEL_GR_EXCEPTION
  assert isinstance(c.k.gpu_error(0, None), EmuError)                 # the newest error, whatever its VA
  c.k.fault_channel(ch, "illegal instruction", None, trap := EmuError("again", "sm_90", "k", 0x40, "???"))
  assert c.k.gpu_error(0, None) is trap
  err2 = EmuFault(0xDEAD000, 4, "read", "sm_90", "k", 0x50, "ld.global.u32 %r1, [%rd1]")
  c.k.fault_channel(ch, "shader page fault again", 0xDEAD000, err2)     # a VA seen before is still the newest
  assert c.k.gpu_error(0, None) is err2 and c.k.gpu_error(0, 0xDEAD000) is err2
  c.k.fault_channel(ch, "bad method 0x1234", None, None)
  assert struct.unpack_from("<I", ctypes.string_at(s.notifier_va + 8, 4))[0] == nv.ROBUST_CHANNEL_PBDMA_ERROR
  # reset clears the RC error; the channel is usable again
  c.control_ok(s.ch, nv.NV906F_CTRL_CMD_RESET_CHANNEL, nv.NV906F_CTRL_CMD_RESET_CHANNEL_PARAMS())
  assert ch.error is None


def test_virtual_reservation_and_small_escapes(c):
  dev, sub = c.device(0)
  vas = c.alloc_ok(nv.FERMI_VASPACE_A, dev, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
  va_params = nv.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(offset=0x10_0000_0000, limit=0x10_3FFF_FFFF, hVASpace=vas)
  virt = c.alloc_ok(nv.NV01_MEMORY_VIRTUAL, dev, va_params)
  mem, _ = c.vidmem(dev, 2 * 1024 * 1024, huge=True)
  d = nv.NVOS46_PARAMETERS(hClient=c.root, hDevice=dev, hDma=virt, hMemory=mem)
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY_DMA, d)) == "NV_OK"
  assert 0x10_0000_0000 <= d.dmaOffset < 0x10_4000_0000
  out = nv.NVOS46_PARAMETERS(hClient=c.root, hDevice=dev, hDma=virt, hMemory=mem, dmaOffset=0x20_0000_0000,
                             flags=nv.DRF_NUM(nv.NVOS46_FLAGS_DMA_OFFSET_FIXED, 1))
  assert st(c.esc(c.ctl, nv.NV_ESC_RM_MAP_MEMORY_DMA, out)) == "NV_ERR_INVALID_OFFSET"   # outside the reservation
  vm = c.k._clients[c.root].objects[vas].vm
  assert vm.find(d.dmaOffset) is not None
  assert st(c.free(virt)) == "NV_OK" and vm.find(d.dmaOffset) is None                   # its mappings go with it
  # OS events, NUMA block size, GPU attach list, open completion
  ev = nv.nv_ioctl_alloc_os_event_t(hClient=c.root, hDevice=dev, fd=7)
  assert c.esc(c.ctl, nv.NV_ESC_ALLOC_OS_EVENT, ev).Status == nv.NV_OK
  fr = nv.nv_ioctl_free_os_event_t(hClient=c.root, hDevice=dev, fd=7)
  assert c.esc(c.ctl, nv.NV_ESC_FREE_OS_EVENT, fr).Status == nv.NV_OK
  assert c.esc(c.ctl, nv.NV_ESC_FREE_OS_EVENT, fr).Status == nv.NV_ERR_INVALID_EVENT
  c.esc(c.ctl, nv.NV_ESC_SYS_PARAMS, nv.nv_ioctl_sys_params_t(memblock_size=1 << 27))
  with pytest.raises(OSError): c.esc(c.ctl, nv.NV_ESC_SYS_PARAMS, nv.nv_ioctl_sys_params_t(memblock_size=1 << 28))
  ids = (ctypes.c_uint32 * 2)(c.k.gpus[0].gpu_id, 0)
  c.esc(c.ctl, nv.NV_ESC_ATTACH_GPUS_TO_FD, ids)
  with pytest.raises(OSError): c.esc(c.ctl, nv.NV_ESC_ATTACH_GPUS_TO_FD, ids)            # once per file
  w = c.esc(c.dev_fd(0), nv.NV_ESC_WAIT_OPEN_COMPLETE, nv.nv_ioctl_wait_open_complete_t(rc=-1))
  assert (w.rc, w.adapterStatus) == (0, nv.NV_OK)


def test_proc_files_and_poll():
  k = MockNV(["sm_90", "sm_80"])
  assert "595.45.04" in k.read_text("/proc/driver/nvidia/version")
  gpus = k.listdir("/proc/driver/nvidia/gpus")
  assert len(gpus) == 2
  info = k.read_text(f"/proc/driver/nvidia/gpus/{gpus[1]}/information")
  assert "NVIDIA A100-SXM4-80GB" in info and k.gpus[1].uuid_str in info
  assert k.exists("/dev/nvidia1") and not k.exists("/dev/nvidia2") and k.exists("/dev/nvidia-uvm")
  assert k.listdir("/dev") == ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
  with pytest.raises(FileNotFoundError): k.open("/dev/nvidia2")
  fd = k.open("/dev/nvidiactl")
  assert k.poll([fd, 5]) == [(5, __import__("select").POLLNVAL)]
  k.close(fd)
  with pytest.raises(OSError) as e: k.close(fd)
  assert e.value.errno == errno.EBADF
