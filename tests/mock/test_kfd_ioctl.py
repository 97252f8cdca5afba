"""The mock /dev/kfd answers every implemented ioctl like Linux 6.12 amdkfd: results for good arguments, the errno for
bad ones. Each errno cites the kernel function it comes from (drivers/gpu/drm/amd/amdkfd/, v6.12)."""
import ctypes, errno, os, re, threading, time
import pytest
from gputwin.errors import GPUPageFault
from gputwin.abi.hostmem import MAP_SHARED, PROT_READ, PROT_WRITE
from gputwin.abi import kfd as abi
from gputwin.mock.kfd.driver import ENOTSUPP
from kfdclient import Client, GTT, VRAM, EINVAL, EFAULT, ENOMEM, ENODEV, ESRCH, EBUSY, EPERM

HEADER = "/work/shared/vendor/kfd/linux-6.12.107/include/uapi/linux/kfd_ioctl.h"


@pytest.fixture
def c():
  cl = Client()
  yield cl
  cl.close()


@pytest.fixture
def cv(c):
  """A client whose process has acquired the GPU VM (what every runtime does first)."""
  c.acquire()
  return c


# ---------------------------------------------------------------- ABI vs. the UAPI header (the oracle)
@pytest.mark.skipif(not os.path.exists(HEADER), reason="vendor kfd_ioctl.h not present")
def test_ioctl_numbers_and_struct_fields_match_the_6_12_header():
  text = re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S)
  dirs = {"IOR": abi.IOC_READ, "IOW": abi.IOC_WRITE, "IOWR": abi.IOC_READ | abi.IOC_WRITE}
  found = re.findall(r"#define\s+AMDKFD_IOC_(\w+)\s+\\?\s*AMDKFD_(IOWR|IOR|IOW)\((0x\w+),\s*\\?\s*struct (\w+)\)", text)
  assert len(found) == len(abi.IOCTLS) == 38
  for name, d, nr, sname in found:
    num = abi.IOCTL_NUMBERS[name]
    assert (abi.IOC_NR(num), abi.IOC_DIR(num), abi.IOC_TYPE(num)) == (int(nr, 16), dirs[d], ord("K")), name
    assert abi.IOCTL_BY_NR[int(nr, 16)][3].__name__ == sname
  ctype = {"__u32": ctypes.c_uint32, "__u64": ctypes.c_uint64, "__s32": ctypes.c_int32}
  checked = 0
  for sname, body in re.findall(r"struct (\w+) \{(.*?)\n\};", text, flags=re.S):
    stmts = [st.split() for st in body.split(";") if st.strip()]
    fields = [(st[0], st[1]) for st in stmts if len(st) == 2]
    if len(fields) != len(stmts) or any(t not in ctype for t, _ in fields) or not hasattr(abi, sname): continue
    assert [(n, ctype[t]) for t, n in fields] == list(getattr(abi, sname)._fields_), sname
    checked += 1
  assert checked >= 40
  assert abi.AMDKFD_IOC_CREATE_QUEUE == 0xC0604B02 and abi.AMDKFD_IOC_GET_VERSION == 0x80084B01


# ---------------------------------------------------------------- dispatch (kfd_ioctl)
def test_get_version(c):
  a = c.call("GET_VERSION")
  assert (a.major_version, a.minor_version) == (1, 17)


def test_dispatch_errors(c):
  k = c.k
  with pytest.raises(OSError) as e: k.ioctl(12345, abi.AMDKFD_IOC_GET_VERSION, abi.kfd_ioctl_get_version_args())
  assert e.value.errno == errno.EBADF                                  # no such fd (VFS)
  for nr in (0x00, 0x27, 0x80):                                        # outside [COMMAND_START, COMMAND_END) -> ENOTTY
    with pytest.raises(OSError) as e: k.ioctl(c.kfd, abi.ioc(abi.IOC_READ, ord("K"), nr, 8), ctypes.c_uint64())
    assert e.value.errno == errno.ENOTTY
  # a caller struct smaller than the kernel's: zero-extended (usize < asize), so the missing gpu_id reads 0 -> EINVAL
  short = abi.ioc(abi.IOC_WRITE, ord("K"), 0x15, 4)
  with pytest.raises(OSError) as e: k.ioctl(c.kfd, short, ctypes.c_uint32(k.open("/dev/dri/renderD128")))
  assert e.value.errno == EINVAL
  # a caller struct larger than the kernel's (a newer ABI): accepted, the tail comes back zeroed
  big = (ctypes.c_uint32 * 4)(0, 0, 0xAA, 0xBB)
  k.ioctl(c.kfd, abi.ioc(abi.IOC_READ, ord("K"), 0x01, 16), big)
  assert list(big) == [1, 17, 0, 0]
  # an argument buffer shorter than _IOC_SIZE: copy_from_user runs off the caller's object -> EFAULT
  with pytest.raises(OSError) as e: k.ioctl(c.kfd, abi.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, ctypes.c_uint64())
  assert e.value.errno == EFAULT
  with pytest.raises(OSError) as e: k.ioctl(c.kfd, abi.AMDKFD_IOC_GET_VERSION, 16)     # unmapped address
  assert e.value.errno == EFAULT
  # _IOC_READ results reach a raw address too
  buf = ctypes.create_string_buffer(8)
  k.ioctl(c.kfd, abi.AMDKFD_IOC_GET_VERSION, ctypes.addressof(buf))
  assert buf.raw == (1).to_bytes(4, "little") + (17).to_bytes(4, "little")
  assert c.err("DBG_REGISTER_DEPRECATED", gpu_id=c.gpu) == EPERM        # kfd_ioctl_dbg_register: removed, -EPERM


def test_kfd_fd_used_by_another_process(c, monkeypatch):
  monkeypatch.setattr(os, "getpid", lambda: -1)                       # as after fork(): kfd_ioctl -> -EBADF
  assert c.err("GET_VERSION") == errno.EBADF


def test_render_node_rejects_kfd_ioctls(c):
  fd = c.k.open("/dev/dri/renderD128")
  with pytest.raises(OSError) as e: c.k.ioctl(fd, abi.AMDKFD_IOC_GET_VERSION, abi.kfd_ioctl_get_version_args())
  assert e.value.errno == errno.ENOTTY
  with pytest.raises(FileNotFoundError): c.k.open("/dev/dri/renderD129")


# ---------------------------------------------------------------- ACQUIRE_VM (kfd_ioctl_acquire_vm)
def test_acquire_vm(c):
  assert c.err("ACQUIRE_VM", drm_fd=999, gpu_id=c.gpu) == EINVAL          # fget() fails
  r1 = c.k.open("/dev/dri/renderD128")
  assert c.err("ACQUIRE_VM", drm_fd=r1, gpu_id=0x1234) == EINVAL          # no such gpu_id
  assert c.err("ACQUIRE_VM", drm_fd=c.kfd, gpu_id=c.gpu) == EINVAL        # not an amdgpu DRM file
  c.call("ACQUIRE_VM", drm_fd=r1, gpu_id=c.gpu)
  c.call("ACQUIRE_VM", drm_fd=r1, gpu_id=c.gpu)                            # same file again: 0
  r2 = c.k.open("/dev/dri/renderD128")
  assert c.err("ACQUIRE_VM", drm_fd=r2, gpu_id=c.gpu) == EBUSY             # another file: -EBUSY


# ---------------------------------------------------------------- apertures
def test_get_process_apertures_new():
  c = Client(["gfx1100", "gfx942"])
  assert c.call("GET_PROCESS_APERTURES_NEW", num_of_nodes=0).num_of_nodes == 2   # 0 asks for the count
  rows = (abi.kfd_process_device_apertures * 4)()
  a = c.call("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=ctypes.addressof(rows), num_of_nodes=4)
  assert a.num_of_nodes == 2 and [r.gpu_id for r in rows[:2]] == [g.gpu_id for g in c.gpus]
  r = rows[0]
  assert (r.lds_base, r.scratch_base, r.gpuvm_base, r.gpuvm_limit) == (1 << 48, 2 << 48, 1 << 16, (1 << 47) - 1)
  assert r.lds_limit == (1 << 48) + 0xFFFFFFFF
  a = c.call("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=ctypes.addressof(rows), num_of_nodes=1)
  assert a.num_of_nodes == 1
  assert c.err("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=64, num_of_nodes=2) == EFAULT
  old = c.call("GET_PROCESS_APERTURES")
  assert old.num_of_nodes == 2 and old.process_apertures[1].gpu_id == c.gpus[1].gpu_id
  c.close()


# ---------------------------------------------------------------- memory (kfd_ioctl_alloc/free/map/unmap_memory_*)
def test_alloc_arguments(c):
  assert c.err("ALLOC_MEMORY_OF_GPU", size=0, gpu_id=c.gpu, flags=GTT) == EINVAL        # size 0
  assert c.err("ALLOC_MEMORY_OF_GPU", size=4096, gpu_id=0x77, flags=GTT) == EINVAL      # unknown gpu
  assert c.err("ALLOC_MEMORY_OF_GPU", size=4096, gpu_id=c.gpu, flags=GTT) == ENODEV     # bind: no VM acquired
  c.acquire()
  assert c.err("ALLOC_MEMORY_OF_GPU", size=4096, gpu_id=c.gpu, flags=0) == EINVAL       # no memory domain
  flags = abi.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL
  assert c.err("ALLOC_MEMORY_OF_GPU", size=4096, gpu_id=c.gpu, flags=flags) == EINVAL   # != process doorbell slice
  flags = abi.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP
  assert c.err("ALLOC_MEMORY_OF_GPU", size=8192, gpu_id=c.gpu, flags=flags) == EINVAL   # != PAGE_SIZE
  user = abi.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
  assert c.err("ALLOC_MEMORY_OF_GPU", size=4096, gpu_id=c.gpu, flags=user, mmap_offset=0) == EINVAL
  assert c.err("ALLOC_MEMORY_OF_GPU", size=4096, gpu_id=c.gpu, flags=user, mmap_offset=0x1000) == EFAULT  # no VMA
  vram = c.k.gpu(c.gpu).target.vram
  assert c.err("ALLOC_MEMORY_OF_GPU", size=vram + 4096, gpu_id=c.gpu, flags=VRAM) == ENOMEM   # reserve_mem_limit


def test_alloc_every_domain_and_share_bytes_with_the_gpu(cv):
  c, k = cv, cv.k
  vm = k.address_space(c.gpu)
  for flags in (GTT, VRAM):
    a, cpu = c.buffer(0x2000, flags)
    assert abi.GET_GPU_ID(a.handle) == c.gpu and a.mmap_offset >= 1 << 32
    ctypes.memmove(cpu + 0x1FF0, b"CPU->GPU", 8)               # CPU writes, GPU VA sees it
    assert vm.read(a.va_addr + 0x1FF0, 8) == b"CPU->GPU"
    vm.write(a.va_addr, b"GPU->CPU")                           # GPU writes, CPU mapping sees it
    assert ctypes.string_at(cpu, 8) == b"GPU->CPU"
  host = k.mmap(-1, 0, 0x4000, PROT_READ | PROT_WRITE, 0x22)   # MAP_PRIVATE|MAP_ANONYMOUS user memory
  a = c.alloc(0x4000, abi.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, mmap_offset=host)
  assert a.mmap_offset == host
  c.map(a.handle)
  ctypes.memmove(host + 5, b"userptr", 7)
  assert vm.read(a.va_addr + 5, 7) == b"userptr"
  a = c.alloc(8192, abi.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL)
  bells = k.mmap(c.renders[c.gpu], a.mmap_offset, 8192, PROT_READ | PROT_WRITE, MAP_SHARED)
  a = c.alloc(4096, abi.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)
  assert a.mmap_offset == abi.KFD_MMAP_TYPE_MMIO | abi.KFD_MMAP_GPU_ID(c.gpu)
  mmio = k.mmap(c.kfd, a.mmap_offset, 4096, PROT_READ | PROT_WRITE, MAP_SHARED)
  ctypes.c_uint32.from_address(mmio + abi.KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL).value = 1
  with pytest.raises(OSError) as e: k.mmap(c.kfd, a.mmap_offset, 8192, PROT_READ, MAP_SHARED)   # kfd_mmio_mmap
  assert e.value.errno == EINVAL
  with pytest.raises(OSError) as e: k.mmap(c.renders[c.gpu], 0x1234000, 4096, PROT_READ, MAP_SHARED)  # no such BO
  assert e.value.errno == EINVAL
  for addr, n in ((host, 0x4000), (bells, 8192), (mmio, 4096)): k.munmap(addr, n)


def test_available_memory(cv):
  before = cv.call("AVAILABLE_MEMORY", gpu_id=cv.gpu).available
  assert before == cv.k.gpu(cv.gpu).target.vram
  cv.alloc(1 << 20, VRAM)
  assert cv.call("AVAILABLE_MEMORY", gpu_id=cv.gpu).available == before - (1 << 20)
  assert cv.err("AVAILABLE_MEMORY", gpu_id=1) == EINVAL                  # kfd_lock_pdd_by_id fails


def test_free_memory(cv):
  a = cv.alloc(4096)
  assert cv.err("FREE_MEMORY_OF_GPU", handle=abi.MAKE_HANDLE(0x77, 0)) == EINVAL   # no pdd for that gpu
  assert cv.err("FREE_MEMORY_OF_GPU", handle=a.handle + 5) == EINVAL               # no such idr handle
  cv.map(a.handle)
  assert cv.err("FREE_MEMORY_OF_GPU", handle=a.handle) == EBUSY                    # still mapped to a GPU
  cv.map(a.handle, name="UNMAP_MEMORY_FROM_GPU")
  cv.call("FREE_MEMORY_OF_GPU", handle=a.handle)
  assert cv.err("FREE_MEMORY_OF_GPU", handle=a.handle) == EINVAL                   # double free


def test_map_and_unmap_arguments(cv):
  c = cv
  a = c.alloc(0x3000)
  ids = (ctypes.c_uint32 * 1)(c.gpu)
  p = ctypes.addressof(ids)
  for name in ("MAP_MEMORY_TO_GPU", "UNMAP_MEMORY_FROM_GPU"):
    assert c.err(name, handle=a.handle, device_ids_array_ptr=p, n_devices=0) == EINVAL            # empty list
    assert c.err(name, handle=a.handle, device_ids_array_ptr=p, n_devices=1, n_success=2) == EINVAL
    assert c.err(name, handle=a.handle, device_ids_array_ptr=0x10, n_devices=1) == EFAULT         # copy_from_user
    assert c.err(name, handle=abi.MAKE_HANDLE(0x77, 0), device_ids_array_ptr=p, n_devices=1) == EINVAL
    assert c.err(name, handle=a.handle + 9, device_ids_array_ptr=p, n_devices=1) == ENOMEM        # sic: -ENOMEM
  assert c.err("UNMAP_MEMORY_FROM_GPU", handle=a.handle, device_ids_array_ptr=p, n_devices=1) == EINVAL  # never mapped
  bad = (ctypes.c_uint32 * 1)(0x77)
  assert c.err("MAP_MEMORY_TO_GPU", handle=a.handle, device_ids_array_ptr=ctypes.addressof(bad), n_devices=1) == EINVAL
  m = c.map(a.handle)
  assert m.n_success == 1
  assert c.map(a.handle).n_success == 1                                       # mapping again is a no-op
  clash = c.alloc(0x1000, va=a.va_addr + 0x1000)                              # VA inside the first BO
  assert c.err("MAP_MEMORY_TO_GPU", handle=clash.handle, device_ids_array_ptr=p, n_devices=1) == EINVAL
  odd = c.alloc(0x1000, va=0x7_0000_0800)                                     # not page aligned
  assert c.err("MAP_MEMORY_TO_GPU", handle=odd.handle, device_ids_array_ptr=p, n_devices=1) == EINVAL
  assert c.map(a.handle, name="UNMAP_MEMORY_FROM_GPU").n_success == 1
  with pytest.raises(GPUPageFault, match=hex(a.va_addr)): c.k.address_space(c.gpu).read(a.va_addr, 4)


def test_map_on_two_gpus_shares_one_buffer():
  c = Client(["gfx1100", "gfx942"])
  g0, g1 = (g.gpu_id for g in c.gpus)
  c.acquire(g0)
  ids = (ctypes.c_uint32 * 2)(g0, g1)
  a = c.alloc(0x1000, gpu=g0)
  m = c.struct("MAP_MEMORY_TO_GPU", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=2)
  with pytest.raises(OSError) as e: c.k.ioctl(c.kfd, abi.AMDKFD_IOC_MAP_MEMORY_TO_GPU, m)
  assert e.value.errno == ENODEV and m.n_success == 1          # peer without a VM; progress reported in n_success
  c.acquire(g1)
  c.k.ioctl(c.kfd, abi.AMDKFD_IOC_MAP_MEMORY_TO_GPU, m)         # resumes at n_success
  assert m.n_success == 2
  c.k.address_space(g0).write(a.va_addr, b"peer")
  assert c.k.address_space(g1).read(a.va_addr, 4) == b"peer"
  c.close()


# ---------------------------------------------------------------- GPU address space
def test_gpu_address_space_bounds(cv):
  a, cpu = cv.buffer(0x1000)
  vm = cv.k.address_space(cv.gpu)
  vm.write_u64(a.va_addr + 8, 0x1122334455667788)
  assert vm.read_u32(a.va_addr + 8) == 0x55667788 and vm.array(a.va_addr + 8, "<u2", 4)[3] == 0x1122
  assert ctypes.c_uint64.from_address(cpu + 8).value == 0x1122334455667788
  with pytest.raises(GPUPageFault) as e: vm.view(a.va_addr + 0xFF8, 16)
  assert "crosses end of mapping" in str(e.value) and e.value.va == a.va_addr + 0xFF8
  with pytest.raises(GPUPageFault) as e: vm.write(a.va_addr + 0xFFC, b"12345678")   # nothing written on a fault
  assert e.value.access == "write" and vm.read(a.va_addr + 0xFFC, 4) == b"\0\0\0\0"
  with pytest.raises(GPUPageFault, match=r"gfx1100.*0x10"): vm.read(0x10, 1)
  lo, hi = cv.alloc(0x1000, va=0x50_0000_0000), cv.alloc(0x1000, va=0x50_0000_1000)   # adjacent BOs
  cv.map(lo.handle), cv.map(hi.handle)
  vm.write(0x50_0000_0FFC, b"abcdefgh")                      # one access, two buffers
  assert vm.read(0x50_0000_0FFC, 8) == b"abcdefgh" and vm.read(0x50_0000_1000, 4) == b"efgh"


# ---------------------------------------------------------------- queues (kfd_ioctl_create/destroy/update_queue)
def test_create_queue_argument_checks(c):
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu, queue_percentage=101) == EINVAL
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu, queue_priority=16) == EINVAL
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu, ring_base_address=1 << 50) == EFAULT   # access_ok fails
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu, ring_size=3000) == EINVAL              # not a power of two
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu, write_pointer_address=1 << 48) == EFAULT
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu, queue_type=5) == ENOTSUPP               # -ENOTSUPP (524)
  assert c.err("CREATE_QUEUE", gpu_id=0x77) == EINVAL
  assert c.err("CREATE_QUEUE", gpu_id=c.gpu) == ESRCH                                 # bind fails: no VM
  c.acquire()
  good = c.queue_args()
  assert c.err("CREATE_QUEUE", **(good | dict(ring_base_address=0x9_0000_0000))) == EINVAL   # ring not GPU-mapped
  assert c.err("CREATE_QUEUE", **(good | dict(ring_size=0x2000))) == EINVAL      # mapping size != ring size
  assert c.err("CREATE_QUEUE", **(good | dict(ctl_stack_size=4096))) == EINVAL    # != node ctl_stack_size
  assert c.err("CREATE_QUEUE", **(good | dict(ctx_save_restore_size=4096))) == EINVAL   # < node cwsr_size
  assert c.err("CREATE_QUEUE", **(good | dict(eop_buffer_size=0x2000))) == EINVAL  # != node eop_buffer_size
  assert not c.k.queues()


def test_create_compute_queue_and_ring_its_doorbell(cv):
  c, k = cv, cv.k
  args = c.queue_args(ring_size=512)   # below KFD_MIN_QUEUE_RING_SIZE: clamped and copied back
  args["ring_size"] = 512
  q = c.call("CREATE_QUEUE", **args)
  assert q.ring_size == 1024 and q.queue_id == 0
  assert q.doorbell_offset & abi.KFD_MMAP_TYPE_MASK == abi.KFD_MMAP_TYPE_DOORBELL
  assert abi.KFD_MMAP_GET_GPU_ID(q.doorbell_offset) == c.gpu
  assert (q.read_pointer_address, q.write_pointer_address) == (args["read_pointer_address"],
                                                               args["write_pointer_address"])
  mq, = k.queues()
  assert (mq.ring_base, mq.ring_size, mq.wptr_va, mq.is_sdma, mq.is_active) == \
         (args["ring_base_address"], 1024, args["write_pointer_address"], False, True)
  q2 = c.call("CREATE_QUEUE", **c.queue_args())
  assert q2.queue_id == 1 and q2.doorbell_offset != q.doorbell_offset
  seen = []
  k.on_doorbell.append(lambda queue, v: seen.append((queue.queue_id, v)))
  with pytest.raises(OSError) as e: k.mmap(c.kfd, q.doorbell_offset & ~0x1FFF, 4096, PROT_WRITE, MAP_SHARED)
  assert e.value.errno == EINVAL                                     # kfd_doorbell_mmap: whole process slice only
  bells = k.mmap(c.kfd, q.doorbell_offset & ~0x1FFF, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED)
  ctypes.c_uint64.from_address(bells + (q2.doorbell_offset & 0x1FFF)).value = 0x40   # userspace rings queue 1
  assert [(x.queue_id, v) for x, v in k.poll_doorbells()] == [(1, 0x40)] and seen == [(1, 0x40)]
  assert k.poll_doorbells() == []                                    # nothing new
  k.ring_doorbell(mq, 0x10)
  assert seen[-1] == (0, 0x10) and ctypes.c_uint64.from_address(bells + (q.doorbell_offset & 0x1FFF)).value == 0x10
  k.munmap(bells, 0x2000)
  # the command processor's view of the pointers: the same bytes userspace maps
  k.address_space(c.gpu).write_u64(mq.wptr_va, 0x10)
  assert k.read_wptr(mq) == 0x10
  k.write_rptr(mq, 0x10)
  assert k.address_space(c.gpu).read_u64(args["read_pointer_address"]) == 0x10
  m = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_MEMORY).event_id
  k.fault_queue(mq, "PM4 packet 0xdead at ring offset 0x40", va=0x1000)
  assert not mq.is_active and _wait(c, [m], 0)[1][0].memory_exception_data.va == 0x1000


def test_sdma_queues(cv):
  c = cv
  g = c.k.gpu(c.gpu)
  args = c.queue_args(abi.KFD_IOC_QUEUE_TYPE_SDMA)
  total = g.props["num_sdma_engines"] * g.props["num_sdma_queues_per_engine"]
  qs = [c.call("CREATE_QUEUE", **args) for _ in range(total)]
  assert len({q.doorbell_offset for q in qs}) == total
  assert {m.sdma_engine for m in c.k.queues()} == {0, 1}
  assert c.err("CREATE_QUEUE", **args) == ENOMEM                       # allocate_sdma_queue: none left
  assert c.err("CREATE_QUEUE", **(args | dict(queue_type=abi.KFD_IOC_QUEUE_TYPE_SDMA_XGMI))) == ENOMEM  # no xGMI SDMA
  by_id = args | dict(queue_type=abi.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID, sdma_engine_id=2)
  assert c.err("CREATE_QUEUE", **by_id) == EINVAL                      # engine id beyond the device's engines
  c.call("DESTROY_QUEUE", queue_id=qs[3].queue_id)
  assert c.call("CREATE_QUEUE", **(by_id | dict(sdma_engine_id=1))).queue_id == qs[3].queue_id


def test_destroy_and_update_queue(cv):
  c = cv
  args = c.queue_args()
  q = c.call("CREATE_QUEUE", **args)
  ring = c.k.address_space(c.gpu).find(args["ring_base_address"]).bo
  ids = (ctypes.c_uint32 * 1)(c.gpu)
  unmap = dict(handle=ring.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
  assert ring.queue_refs == 1 and c.err("UNMAP_MEMORY_FROM_GPU", **unmap) == EBUSY   # bo_va->queue_refcount
  assert c.err("UPDATE_QUEUE", queue_id=q.queue_id, queue_percentage=101) == EINVAL
  assert c.err("UPDATE_QUEUE", queue_id=q.queue_id, queue_priority=99) == EINVAL
  assert c.err("UPDATE_QUEUE", queue_id=q.queue_id + 7, ring_size=4096) == EFAULT     # pqm: no such queue -> EFAULT
  assert c.err("UPDATE_QUEUE", queue_id=q.queue_id, ring_base_address=0x9_0000_0000, ring_size=4096) == EINVAL
  c.call("UPDATE_QUEUE", queue_id=q.queue_id, queue_percentage=0, ring_size=4096)     # ring 0: queue disabled
  assert not c.k.queues()[0].is_active
  assert c.err("DESTROY_QUEUE", queue_id=q.queue_id + 7) == EINVAL
  c.call("DESTROY_QUEUE", queue_id=q.queue_id)
  assert c.err("DESTROY_QUEUE", queue_id=q.queue_id) == EINVAL and not c.k.queues()
  assert ring.queue_refs == 0 and c.call("UNMAP_MEMORY_FROM_GPU", **unmap).n_success == 1
  assert c.err("UNMAP_MEMORY_FROM_GPU", **unmap) == EINVAL                             # no longer mapped


def test_set_cu_mask(cv):
  q = cv.call("CREATE_QUEUE", **cv.queue_args())
  mask = (ctypes.c_uint32 * 2)(0xFFFF, 0xF)
  p = ctypes.addressof(mask)
  assert cv.err("SET_CU_MASK", queue_id=q.queue_id, num_cu_mask=33, cu_mask_ptr=p) == EINVAL
  assert cv.err("SET_CU_MASK", queue_id=q.queue_id, num_cu_mask=0, cu_mask_ptr=p) == EINVAL
  assert cv.err("SET_CU_MASK", queue_id=q.queue_id, num_cu_mask=64, cu_mask_ptr=0x20) == EFAULT
  assert cv.err("SET_CU_MASK", queue_id=99, num_cu_mask=64, cu_mask_ptr=p) == EFAULT
  cv.call("SET_CU_MASK", queue_id=q.queue_id, num_cu_mask=64, cu_mask_ptr=p)
  assert cv.k.queues()[0].cu_mask == (0xFFFF, 0xF)


# ---------------------------------------------------------------- per-device settings
def test_scratch_trap_policy(c):
  assert c.err("SET_SCRATCH_BACKING_VA", gpu_id=0x77, va_addr=1 << 40) == EINVAL
  assert c.err("SET_SCRATCH_BACKING_VA", gpu_id=c.gpu, va_addr=1 << 40) == ENODEV    # PTR_ERR(bind)
  assert c.err("SET_TRAP_HANDLER", gpu_id=0x77) == EINVAL
  assert c.err("SET_TRAP_HANDLER", gpu_id=c.gpu, tba_addr=0x1000) == ESRCH
  assert c.err("SET_MEMORY_POLICY", gpu_id=c.gpu, default_policy=2) == EINVAL
  assert c.err("SET_MEMORY_POLICY", gpu_id=c.gpu, alternate_policy=7) == EINVAL
  assert c.err("SET_MEMORY_POLICY", gpu_id=0x77) == EINVAL
  assert c.err("SET_MEMORY_POLICY", gpu_id=c.gpu) == ESRCH
  c.acquire()
  c.call("SET_SCRATCH_BACKING_VA", gpu_id=c.gpu, va_addr=1 << 40)
  c.call("SET_TRAP_HANDLER", gpu_id=c.gpu, tba_addr=0x10000, tma_addr=0x20000)
  c.call("SET_MEMORY_POLICY", gpu_id=c.gpu, default_policy=1, alternate_policy=0)
  assert c.err("SET_MEMORY_POLICY", gpu_id=c.gpu, alternate_aperture_base=0x1234,
               alternate_aperture_size=0x1000) == EINVAL                     # APE1 base has fixed bits set
  pdd = c.k.proc.pdds[c.gpu]
  assert (pdd.scratch_va, pdd.tba, pdd.tma) == (1 << 40, 0x10000, 0x20000)


def test_clock_counters(c):
  a = c.call("GET_CLOCK_COUNTERS", gpu_id=c.gpu)
  b = c.call("GET_CLOCK_COUNTERS", gpu_id=c.gpu)
  assert a.system_clock_freq == 10**9 and 0 < a.gpu_clock_counter <= b.gpu_clock_counter
  assert a.cpu_clock_counter <= b.cpu_clock_counter and a.system_clock_counter > 0
  assert c.call("GET_CLOCK_COUNTERS", gpu_id=0x77).gpu_clock_counter == 0     # unknown gpu: counter 0, no error


def test_xnack_mode():
  c = Client("gfx1100")
  assert c.call("SET_XNACK_MODE", xnack_enabled=-1).xnack_enabled == 0        # query
  assert c.err("SET_XNACK_MODE", xnack_enabled=1) == EPERM                     # RDNA cannot retry faults
  c.close()
  c = Client("gfx942")
  c.acquire()
  c.call("SET_XNACK_MODE", xnack_enabled=1)
  assert c.call("SET_XNACK_MODE", xnack_enabled=-1).xnack_enabled == 1
  c.call("CREATE_QUEUE", **c.queue_args())
  assert c.err("SET_XNACK_MODE", xnack_enabled=0) == EBUSY                     # user queues exist
  c.close()


def test_runtime_enable(cv):
  cv.call("RUNTIME_ENABLE", mode_mask=1)
  assert cv.err("RUNTIME_ENABLE", mode_mask=1) == EBUSY
  cv.call("RUNTIME_ENABLE", mode_mask=0)
  cv.call("CREATE_QUEUE", **cv.queue_args())
  assert cv.err("RUNTIME_ENABLE", mode_mask=1) == errno.EEXIST


# ---------------------------------------------------------------- events (kfd_events.c)
def _event_page(c):
  page = c.alloc(abi.KFD_SIGNAL_EVENT_LIMIT * 8)
  c.map(page.handle)
  return page


def test_create_and_signal_events(cv):
  c = cv
  page = _event_page(c)
  e0 = c.call("CREATE_EVENT", event_page_offset=page.handle, event_type=abi.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
  assert (e0.event_id, e0.event_slot_index, e0.event_trigger_data) == (0, 0, 0)
  assert e0.event_page_offset == abi.KFD_MMAP_TYPE_EVENTS
  assert c.err("CREATE_EVENT", event_page_offset=page.handle, event_type=0) == EINVAL   # event page already set
  e1 = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL)
  mem = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_MEMORY)
  assert e1.event_id == 1 and mem.event_id == abi.KFD_FIRST_NONSIGNAL_EVENT_ID
  slots = c.k.address_space(c.gpu).array(page.va_addr, "<u8", 4)
  assert all(slots == abi.UNSIGNALED_EVENT_SLOT)                      # kfd_event_page_set fills the page
  for name in ("SET_EVENT", "RESET_EVENT", "DESTROY_EVENT"):
    assert c.err(name, event_id=77) == EINVAL                          # lookup_event_by_id fails
  assert c.err("SET_EVENT", event_id=mem.event_id) == EINVAL           # not CPU-signalable
  assert c.err("RESET_EVENT", event_id=mem.event_id) == EINVAL
  assert c.err("FREE_MEMORY_OF_GPU", handle=page.handle) == EPERM      # the signal page BO cannot be freed
  c.call("DESTROY_EVENT", event_id=e1.event_id)
  assert c.err("DESTROY_EVENT", event_id=e1.event_id) == EINVAL


def _wait(c, ids, timeout, wait_for_all=0, ages=None):
  evs = (abi.kfd_event_data * len(ids))()
  for i, eid in enumerate(ids):
    evs[i].event_id = eid
    if ages: evs[i].signal_event_data.last_event_age = ages[i]
  a = c.call("WAIT_EVENTS", events_ptr=ctypes.addressof(evs), num_events=len(ids), wait_for_all=wait_for_all,
             timeout=timeout)
  return a.wait_result, evs


def test_wait_events(cv):
  c = cv
  e = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL, auto_reset=1).event_id
  f = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL).event_id
  t = time.monotonic()
  assert _wait(c, [e], 30)[0] == abi.KFD_IOC_WAIT_RESULT_TIMEOUT and time.monotonic() - t >= 0.025
  c.call("SET_EVENT", event_id=e)
  assert _wait(c, [e], 0)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  assert _wait(c, [e], 0)[0] == abi.KFD_IOC_WAIT_RESULT_TIMEOUT        # auto-reset: consumed by the first wait
  c.call("SET_EVENT", event_id=f)
  assert _wait(c, [e, f], 0)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE     # any
  assert _wait(c, [e, f], 0, wait_for_all=1)[0] == abi.KFD_IOC_WAIT_RESULT_TIMEOUT
  c.call("RESET_EVENT", event_id=f)
  assert _wait(c, [f], 0)[0] == abi.KFD_IOC_WAIT_RESULT_TIMEOUT
  assert c.err("WAIT_EVENTS", events_ptr=0x40, num_events=1, timeout=0) == EFAULT
  ev = (abi.kfd_event_data * 1)()
  ev[0].event_id = 4242
  assert c.err("WAIT_EVENTS", events_ptr=ctypes.addressof(ev), num_events=1, timeout=0) == EINVAL
  age = c.k.proc.events[f].age                                          # API 1.14: age tracking
  res, out = _wait(c, [f], 0, ages=[age - 1])
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE and out[0].signal_event_data.last_event_age == age


def test_wait_is_woken_by_a_gpu_interrupt_from_another_thread(cv):
  c = cv
  page = _event_page(c)
  e = c.call("CREATE_EVENT", event_page_offset=page.handle, event_type=abi.KFD_IOC_EVENT_SIGNAL).event_id
  vm = c.k.address_space(c.gpu)

  def gpu():   # what RELEASE_MEM with an interrupt does: write the event's mailbox slot, then raise the interrupt
    time.sleep(0.02)
    vm.write_u64(page.va_addr + 8 * e, e)
    c.k.interrupt(c.gpu, context_id=e)

  th = threading.Thread(target=gpu)
  th.start()
  assert _wait(c, [e], 5000)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  th.join()
  assert vm.read_u64(page.va_addr + 8 * e) == abi.UNSIGNALED_EVENT_SLOT   # acknowledge_signal
  assert c.k.interrupt(c.gpu) == 0                                        # nothing pending


def test_memory_exception_event_and_destroy_while_waiting(cv):
  c = cv
  m = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_MEMORY).event_id
  assert c.k.memory_exception(c.gpu, 0xDEAD000) == 1
  res, out = _wait(c, [m], 0)
  d = out[0].memory_exception_data
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE and (d.va, d.gpu_id, d.failure.NotPresent) == (0xDEAD000, c.gpu, 1)
  h = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_HW_EXCEPTION).event_id
  assert c.k.hw_exception(c.gpu, memory_lost=True) == 1
  d = _wait(c, [h], 0)[1][0].hw_exception_data
  assert (d.gpu_id, d.memory_lost, d.reset_cause) == (c.gpu, 1, abi.KFD_HW_EXCEPTION_GPU_HANG)
  ev = (abi.kfd_event_data * 1)()
  ev[0].event_id = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL).event_id
  threading.Timer(0.02, lambda: c.call("DESTROY_EVENT", event_id=ev[0].event_id)).start()
  assert c.err("WAIT_EVENTS", events_ptr=ctypes.addressof(ev), num_events=1, timeout=5000) == errno.EIO


# ---------------------------------------------------------------- process lifetime
def test_closing_kfd_tears_the_process_down(cv):
  c = cv
  c.buffer(0x1000, VRAM)
  c.call("CREATE_QUEUE", **c.queue_args())
  assert c.k.queues() and c.k._vram_used[c.gpu] > 0
  c.k.close(c.kfd)
  assert c.k.proc is None and c.k._vram_used[c.gpu] == 0 and not c.k.queues()
  with pytest.raises(OSError) as e: c.k.close(c.kfd)
  assert e.value.errno == errno.EBADF
