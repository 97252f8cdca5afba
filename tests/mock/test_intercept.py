"""gputwin.mock.intercept: a KFD client written against the OS (os.open, fcntl.ioctl, libc mmap through ctypes,
Python's mmap, sysfs files) talks to the mock machine without knowing it. The oracles are the kernel's ABI as a client
sees it (kfd_ioctl.h numbers and structs built here with ctypes, amdgpu's sysfs layout and IP versions, the errnos
of kfd_chardev.c / kernfs), and tinygrad, a driver none of us wrote."""
import ctypes, ctypes.util, errno, fcntl, mmap, os, struct, subprocess, sys, time
import builtins, io
import pytest
from gputwin.mock import intercept
from gputwin.mock.intercept import Interceptor
from gputwin.mock.kfd.driver import MockKernel
from gputwin.mock.amdgpu.gpu import attach

TOPO = "/sys/devices/virtual/kfd/kfd/topology"
PROT_RW, MAP_FIXED, MAP_NORESERVE = mmap.PROT_READ | mmap.PROT_WRITE, 0x10, 0x4000


# ---- the client's own view of the ABI (uapi/linux/kfd_ioctl.h), written out here rather than taken from gputwin.abi
def _iowr(nr: int, size: int, d: int = 3) -> int: return (d << 30) | (size << 16) | (ord("K") << 8) | nr


class GetVersion(ctypes.Structure): _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]
class AcquireVM(ctypes.Structure): _fields_ = [("drm_fd", ctypes.c_uint32), ("gpu_id", ctypes.c_uint32)]
class Alloc(ctypes.Structure):
  _fields_ = [("va_addr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("handle", ctypes.c_uint64),
              ("mmap_offset", ctypes.c_uint64), ("gpu_id", ctypes.c_uint32), ("flags", ctypes.c_uint32)]
class MapMem(ctypes.Structure):
  _fields_ = [("handle", ctypes.c_uint64), ("device_ids_array_ptr", ctypes.c_uint64), ("n_devices", ctypes.c_uint32),
              ("n_success", ctypes.c_uint32)]
class CreateQueue(ctypes.Structure):
  _fields_ = [(n, ctypes.c_uint64) for n in ("ring_base_address", "write_pointer_address", "read_pointer_address",
                                             "doorbell_offset")] + \
             [(n, ctypes.c_uint32) for n in ("ring_size", "gpu_id", "queue_type", "queue_percentage", "queue_priority",
                                             "queue_id")] + \
             [(n, ctypes.c_uint64) for n in ("eop_buffer_address", "eop_buffer_size", "ctx_save_restore_address")] + \
             [(n, ctypes.c_uint32) for n in ("ctx_save_restore_size", "ctl_stack_size", "sdma_engine_id", "pad")]


GET_VERSION, ACQUIRE_VM = _iowr(0x01, 8, 2), _iowr(0x15, 8, 1)
ALLOC, MAP = _iowr(0x16, ctypes.sizeof(Alloc)), _iowr(0x18, ctypes.sizeof(MapMem))
CREATE_QUEUE = _iowr(0x02, ctypes.sizeof(CreateQueue))
ALLOC_GTT, ALLOC_WRITABLE, QUEUE_TYPE_SDMA = 1 << 1, 1 << 31, 1


@pytest.fixture
def machine():
  k = MockKernel("gfx1100")
  attach(k)
  with Interceptor(k) as ic: yield ic
  k.shutdown()


class Client:
  """A raw KFD client: libc through ctypes (looked up while interception is on, as a client started under
  `gputwin exec` would), os.open and fcntl.ioctl."""

  def __init__(self):
    self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    self.libc.mmap.restype, self.libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t,
                                                                        ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                                                        ctypes.c_int64]
    self.kfd = os.open("/dev/kfd", os.O_RDWR)
    nodes = sorted(os.listdir(f"{TOPO}/nodes"), key=int)
    self.gpu_node = next(n for n in nodes if int(open(f"{TOPO}/nodes/{n}/gpu_id").read()))
    self.gpu_id = int(open(f"{TOPO}/nodes/{self.gpu_node}/gpu_id").read())
    props = dict(l.split() for l in open(f"{TOPO}/nodes/{self.gpu_node}/properties").read().splitlines())
    self.drm = os.open(f"/dev/dri/renderD{props['drm_render_minor']}", os.O_RDWR)
    fcntl.ioctl(self.kfd, ACQUIRE_VM, AcquireVM(self.drm, self.gpu_id))

  def mmap(self, addr, size, prot, flags, fd, off) -> int:
    r = self.libc.mmap(addr, size, prot, flags, fd, off)
    if r in (None, 2**64 - 1): raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r

  def buffer(self, size: int) -> tuple[Alloc, int]:
    """A GTT buffer at a VA of our own reservation, GPU-mapped, CPU-mapped MAP_FIXED over that reservation."""
    va = self.mmap(None, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    a = Alloc(va_addr=va, size=size, gpu_id=self.gpu_id, flags=ALLOC_GTT | ALLOC_WRITABLE)
    fcntl.ioctl(self.kfd, ALLOC, a)
    ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    m = MapMem(handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
    fcntl.ioctl(self.kfd, MAP, m)
    assert m.n_success == 1
    assert self.mmap(va, size, PROT_RW, mmap.MAP_SHARED | MAP_FIXED, self.drm, a.mmap_offset) == va
    return a, va


def test_version_and_topology_through_the_os(machine):
  c = Client()
  v = GetVersion()
  assert fcntl.ioctl(c.kfd, GET_VERSION, v) == 0 and (v.major, v.minor) == (1, 17)   # KFD API 1.17 (Linux 6.12)
  assert fcntl.ioctl(c.kfd, GET_VERSION, bytes(8)) == struct.pack("II", 1, 17)          # immutable arg: a copy back
  assert sorted(os.listdir(f"{TOPO}/nodes")) == ["0", "1"] and os.path.isdir(f"{TOPO}/nodes/1")
  assert os.path.exists("/dev/kfd") and os.stat("/dev/dri/renderD128").st_rdev == os.makedev(226, 128)
  props = dict(l.split() for l in open(f"{TOPO}/nodes/1/properties").read().splitlines())
  assert props["gfx_target_version"] == "110000" and props["drm_render_minor"] == "128"
  fd = os.open(f"{TOPO}/nodes/1/name", os.O_RDONLY)   # a real fd: read, lseek and open(fd) all work
  assert os.read(fd, 3) == b"gfx" and os.lseek(fd, 0, os.SEEK_SET) == 0
  assert open(fd, closefd=False).read() == "gfx1100\n"
  os.close(fd)
  ip = "/sys/class/drm/renderD128/device/ip_discovery/die/0"   # Navi31: GC 11.0.0, SDMA 6.0.0, NBIO 4.3.0
  assert sorted(os.listdir(ip), key=int) == ["11", "42", "108"]
  assert [[int(open(f"{ip}/{hw}/0/{p}").read()) for p in ("major", "minor", "revision")] for hw in (11, 42, 108)] == \
    [[11, 0, 0], [6, 0, 0], [4, 3, 0]]


def test_alloc_mmap_and_an_sdma_queue(machine):
  c = Client()
  buf, va = c.buffer(0x4000)
  ctypes.memmove(va, b"hello, gpu", 10)   # CPU VA == GPU VA: the GPU sees the CPU's store
  assert machine.k.address_space(c.gpu_id).read(va, 10) == b"hello, gpu"
  m = mmap.mmap(c.drm, 0x1000, offset=buf.mmap_offset)   # Python's mmap on the render node: the same pages
  assert isinstance(m, mmap.mmap) and m[:5] == b"hello"
  m[16:20] = b"abcd"
  assert ctypes.string_at(va + 16, 4) == b"abcd"
  m.close()
  ring, rva = c.buffer(0x1000)
  ptrs, pva = c.buffer(0x1000)
  q = CreateQueue(ring_base_address=rva, ring_size=0x1000, gpu_id=c.gpu_id, queue_type=QUEUE_TYPE_SDMA,
                  queue_percentage=100, queue_priority=7, read_pointer_address=pva, write_pointer_address=pva + 8)
  fcntl.ioctl(c.kfd, CREATE_QUEUE, q)
  bells = c.mmap(None, 0x2000, PROT_RW, mmap.MAP_SHARED, c.kfd, q.doorbell_offset & ~0x1FFF)
  # sdma_v6_0_0_pkt_open.h COPY_LINEAR: op 1 sub 0, count - 1, parameter, src lo/hi, dst lo/hi (pointers in bytes)
  pkt = struct.pack("<7I", 1, 10 - 1, 0, va & 0xFFFFFFFF, va >> 32, (va + 0x1000) & 0xFFFFFFFF, (va + 0x1000) >> 32)
  ctypes.memmove(rva, pkt, len(pkt))
  ctypes.c_uint64.from_address(pva + 8).value = len(pkt)
  ctypes.c_uint64.from_address(bells + (q.doorbell_offset & 0x1FFF)).value = len(pkt)
  deadline = time.monotonic() + 10
  while ctypes.string_at(va + 0x1000, 10) != b"hello, gpu" and time.monotonic() < deadline: time.sleep(0.01)
  assert ctypes.string_at(va + 0x1000, 10) == b"hello, gpu"
  assert ctypes.c_uint64.from_address(pva).value == len(pkt)   # rptr caught up with wptr
  for fd in (c.drm, c.kfd): os.close(fd)


def test_errnos_are_the_kernels(machine):
  c = Client()
  def err(fn, *a):
    with pytest.raises(OSError) as e: fn(*a)
    return e.value.errno
  assert err(os.open, "/dev/dri/renderD129", os.O_RDWR) == errno.ENOENT   # one GPU only
  assert err(os.open, f"{TOPO}/nodes/1/properties", os.O_WRONLY) == errno.EACCES   # kernfs: no store op
  assert err(os.listdir, f"{TOPO}/nodes/1/properties") == errno.ENOTDIR
  assert err(os.stat, f"{TOPO}/nodes/7") == errno.ENOENT and not os.path.exists(f"{TOPO}/nodes/7")
  assert err(os.read, c.kfd, 8) == errno.EINVAL   # kfd_fops has no read
  assert err(fcntl.ioctl, c.kfd, _iowr(0x7F, 8), bytes(8)) == errno.ENOTTY   # beyond the ioctl table
  assert err(fcntl.ioctl, c.drm, GET_VERSION, GetVersion()) == errno.ENOTTY   # render nodes: no KFD ioctls
  assert err(fcntl.ioctl, c.kfd, ACQUIRE_VM, AcquireVM(c.kfd, c.gpu_id)) == errno.EBUSY   # VM already acquired
  assert err(fcntl.ioctl, c.kfd, ACQUIRE_VM, AcquireVM(c.drm, 0xDEAD)) == errno.EINVAL   # unknown gpu
  gone = mmap.mmap(-1, mmap.PAGESIZE)
  addr = ctypes.addressof(ctypes.c_char.from_buffer(gone))
  gone.close()   # an argument pointer into unmapped memory: the kernel's copy_from_user gives EFAULT, not a SIGSEGV
  assert err(fcntl.ioctl, c.kfd, ACQUIRE_VM, addr) == errno.EFAULT
  assert err(c.mmap, None, 0x1000, PROT_RW, mmap.MAP_SHARED, c.drm, 0x1234000) == errno.EINVAL   # no such BO
  assert err(mmap.mmap, c.kfd, 0x1000) in (errno.EINVAL, errno.ENODEV)
  os.close(c.drm)
  assert err(os.close, c.drm) == errno.EBADF
  os.close(c.kfd)


def test_deactivate_restores_every_function():
  names = [(os, "open"), (os, "close"), (os, "read"), (os, "stat"), (os, "listdir"), (builtins, "open"),
           (io, "open"), (fcntl, "ioctl"), (mmap, "mmap")]
  before = [getattr(m, n) for m, n in names] + [ctypes.CDLL.__dict__["__getitem__"]]
  exists = os.path.exists("/dev/kfd")
  ic = intercept.activate(kernel=MockKernel("gfx1100"))
  assert intercept.current() is ic and os.path.exists("/dev/kfd") and os.open is not before[0]
  with pytest.raises(Exception, match="already active"): Interceptor(ic.k).activate()
  intercept.deactivate()
  assert intercept.current() is None
  assert [getattr(m, n) for m, n in names] + [ctypes.CDLL.__dict__["__getitem__"]] == before
  assert os.path.exists("/dev/kfd") == exists


def _exec(*cmd, timeout=120, **env):
  e = dict(os.environ, **env)
  e.pop("GPUTWIN_EXEC", None)
  return subprocess.run([sys.executable, "-m", "gputwin.cli", "exec", *cmd], capture_output=True, text=True,
                        timeout=timeout, env=e)


def test_exec_child_sees_the_mock_machine():
  probe = ("import os; print(os.path.exists('/dev/kfd'), sorted(os.listdir("
           "'/sys/devices/virtual/kfd/kfd/topology/nodes')), os.environ['LLVM_PATH'] != '')")
  r = _exec("--devices", "2", "--", sys.executable, "-c", probe)
  assert r.returncode == 0, r.stderr
  assert r.stdout.split("\n")[0] == "True ['0', '1', '2'] True"
  r = _exec("--", sys.executable, "-c", "import os; print(os.environ['LLVM_PATH'])", LLVM_PATH="/opt/my/libLLVM.so")
  assert r.stdout.strip() == "/opt/my/libLLVM.so"   # the user's choice wins over the default
  r = _exec("--device", "amd", "--", sys.executable, "-c", "pass")
  assert r.returncode == 1 and "mock" in r.stderr


def test_tinygrad_runs_unchanged():
  pytest.importorskip("tinygrad")
  from gputwin.emu.amd import Amd
  if getattr(Amd, "va_bits", 32) < 47:
    pytest.skip("blocked in gputwin/emu: the AMD frontend addresses guest memory below 4 GiB (binding.va_bits: "
                "Amd has no va_bits, default 32; core.Engine.run_body faults above it) but tinygrad's VAs are "
                "libc mmap addresses (0x7f..): its first kernel faults at s_load_b128 of the kernarg pointer")
  r = _exec("--", sys.executable, "-c", "from tinygrad import Tensor; print((Tensor([1,2,3])+1).numpy())")
  assert r.stdout.strip().splitlines()[-1:] == ["[2 3 4]"], r.stderr[-3000:]


# amdgpu IP discovery versions per ASIC (GC, SDMA0, NBIO/NBIF), as amdgpu_discovery.c dispatches on them
IP_VERSIONS = {"gfx1100": [[11, 0, 0], [6, 0, 0], [4, 3, 0]], "gfx1200": [[12, 0, 0], [7, 0, 0], [6, 3, 1]],
               "gfx942": [[9, 4, 3], [4, 4, 2], [7, 9, 0]], "gfx950": [[9, 5, 0], [4, 4, 5], [7, 9, 1]]}


def test_ip_discovery_of_every_target():
  k = MockKernel(list(IP_VERSIONS))
  for g, (name, want) in zip(k.gpus, IP_VERSIONS.items()):
    base = f"/sys/class/drm/renderD{g.render_minor}/device/ip_discovery/die/0"
    got = [[int(k.read_text(f"{base}/{hw}/0/{p}")) for p in ("major", "minor", "revision")] for hw in (11, 42, 108)]
    assert got == want, name
