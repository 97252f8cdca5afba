"""User pages a mock GPU uses never crash the host (issue 22): a client thread that unmaps or write-protects a USERPTR
(KFD), MAP_USER_MEM (kgsl) or OS-descriptor (NV) buffer while a dispatch, SDMA copies, CP packets or GPU VA accesses
read and write it. The drivers reach user pages as hostmem.UserPages does: shared pages through their own mapping (an
access keeps reaching them, as pinned pages on Linux), private pages by copies that fail as a GPU page fault. So each
outcome is the work done on the user's (pinned) data, or a fault of that queue / context naming an address of the
buffer; KFD's MMU-notifier stand-in then invalidates the userptr BO. Freeing a USERPTR BO unpins its pages (no mapping
or fd stays behind) while a view an engine still holds, or a dispatch racing the free, cannot crash the host. Each
campaign runs in a child process (a SIGSEGV there fails the test instead of killing pytest), many trials with random
timings, and new queues / contexts work after every trial."""
import ctypes, json, os, random, re, subprocess, sys, threading, time
from pathlib import Path

import numpy as np
import pytest

from gputwin.abi import kfd as abi
from gputwin.abi import pm4 as P
from gputwin.abi.hostmem import (MAP_ANONYMOUS, MAP_PRIVATE, MAP_SHARED, PAGE_SIZE, PROT_NONE, PROT_READ, PROT_WRITE,
                                 host_mmap, host_munmap, libc)

USERPTR = abi.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
HERE = Path(__file__).parent
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
ACTIONS = {"munmap": None, "prot_none": PROT_NONE, "prot_read": PROT_READ}
KINDS = {"private": MAP_PRIVATE, "shared": MAP_SHARED}   # reached by copies / through the driver's own mapping
ITERATIONS = 400
LOOP_RW = f"""  v_lshlrev_b32 v1, 2, v0
  s_movk_i32 s4, {ITERATIONS}
loop:
  global_load_b32 v2, v1, s[0:1]
  s_waitcnt vmcnt(0)
  v_add_nc_u32 v2, 1, v2
  global_store_b32 v1, v2, s[0:1]
  s_sub_u32 s4, s4, 1
  s_cmp_lg_u32 s4, 0
  s_cbranch_scc1 loop
  s_endpgm"""


def _child(campaign: str, **kw) -> dict:
  """Run `campaign(**kw)` of this module in a fresh interpreter and return its JSON summary; the child dying (by a
  signal: the host crash these tests guard against) fails the test."""
  path = [str(HERE.parents[1]), str(HERE), str(HERE / "adreno")]
  code = f"import json, sys; sys.path[:0] = {path!r}; import test_userptr_pinning as t; " \
         f"print(json.dumps(t.{campaign}(**{kw!r})))"
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, f"{campaign}{kw}: child exited with {r.returncode}\n{r.stderr[-3000:]}"
  return json.loads(r.stdout.strip().splitlines()[-1])


def _user(size: int, fill: bytes, kind: str = "private") -> int:
  a = host_mmap(0, size, PROT_READ | PROT_WRITE, KINDS[kind] | MAP_ANONYMOUS)
  ctypes.memmove(a, fill, len(fill))
  return a


def _hostile(action: str, addr: int, size: int, delay: float) -> threading.Thread:
  """A client thread that, after `delay` seconds, unmaps its range or changes its protection."""
  def run():
    time.sleep(delay)
    if action == "munmap": host_munmap(addr, size)
    else: assert libc.mprotect(addr, size, ACTIONS[action]) == 0
  t = threading.Thread(target=run)
  t.start()
  return t


def _release(addr: int, size: int, action: str):
  if action != "munmap": host_munmap(addr, size)


def _fault_names(error: str, lo: int, hi: int) -> bool:
  """The queue error is a GPU page fault at an address inside [lo, hi)."""
  return "GPU page fault" in error and any(lo <= int(v, 16) < hi for v in re.findall(r"VA (0x[0-9a-f]+)", error))


def _data(pages, n: int):
  """The user's bytes as the driver reaches them (None once a private range is gone: nothing to check)."""
  raw = pages.read(0, n)
  return None if raw is None else np.frombuffer(raw, np.uint32)


# ------------------------------------------------------------------ KFD USERPTR: SDMA copies and a dispatch
def kfd_campaign(engine: str, kind: str, trials: int, seed: int) -> dict:
  """`trials` times: a fresh USERPTR buffer, GPU work that reads and writes it (SDMA: copies user -> VRAM -> user in
  chunks; compute: a dispatch looping load/add/store on it), and a client thread that unmaps / write-protects the
  buffer (each ACTION in turn) after a random delay. Each outcome is checked: the work completed (its data where it can still be read),
  or the queue faulted naming an address of the buffer; then a new queue runs. Returns outcome counts."""
  from test_amdgpu_cp import Rig
  from test_kfd_reliability import _dispatch
  sys.setswitchinterval(1e-5)             # interleave the client thread with the engine as finely as Python allows
  rng, rig, size = random.Random(seed), Rig(), 16 * PAGE_SIZE
  gpu, k, half = rig.c.gpu, rig.c.k, size // 2
  dst = rig.c.alloc(size, abi.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, va=0x1800_0000)
  rig.c.map(dst.handle)
  qtype = abi.KFD_IOC_QUEUE_TYPE_SDMA if engine == "sdma" else abi.KFD_IOC_QUEUE_TYPE_COMPUTE
  q, out = rig.queue(qtype), {"completed": 0, "faulted": 0}
  for t in range(trials):
    action, pattern = list(ACTIONS)[t % len(ACTIONS)], np.arange(size // 4, dtype=np.uint32) + t
    user, va = _user(size, pattern.tobytes(), kind), 0x3000_0000 + (t % 4) * 2 * size
    a = rig.c.alloc(size, USERPTR, va=va, mmap_offset=user)
    rig.c.map(a.handle)
    bo = k.userptr_at(gpu, va)
    if engine == "sdma":
      words = []
      for off in range(0, half, 1024):
        words += P.sdma_copy(dst.va_addr + off, va + off, 1024) + P.sdma_copy(va + half + off, dst.va_addr + off, 1024)
      words += P.sdma_fence(rig.page.va_addr + 8 * rig.ev, rig.ev) + P.sdma_trap(rig.ev)
    hostile = _hostile(action, user, size, rng.uniform(0, 0.004))
    if engine == "sdma": rig.push(q, words, unit=1)
    else: _dispatch(rig, q, LOOP_RW, va, block=128)         # 4 waves, each lane adds ITERATIONS to its dword
    rig.wait(rig.ev, rig.mem_ev)
    hostile.join()
    if q.error is None:                     # completed
      want = np.concatenate([pattern[:half // 4], pattern[:half // 4]]) if engine == "sdma" else pattern.copy()
      if engine == "compute": want[:128] += ITERATIONS
      got = _data(bo.pages, size)
      assert got is None or np.array_equal(got, want), f"trial {t}: completed with wrong data"
      assert kind == "private" or got is not None                      # shared pages: still the GPU's
      if engine == "sdma": assert rig.vm.read(dst.va_addr, half) == pattern[:half // 4].tobytes()
      out["completed"] += 1
    else:
      assert _fault_names(q.error, va, va + size), q.error
      out["faulted"] += 1
      rig.c.call("DESTROY_QUEUE", queue_id=q.queue_id)
      q = rig.queue(qtype)
    rig.c.map(a.handle, name="UNMAP_MEMORY_FROM_GPU")
    rig.c.call("FREE_MEMORY_OF_GPU", handle=a.handle)
    _release(user, size, action)
    check = rig.queue()                     # later queues work
    rig.push(check, P.write_data(rig.data.va_addr, t) + rig.signal())
    assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and rig.vm.read_u32(rig.data.va_addr) == t
    rig.c.call("DESTROY_QUEUE", queue_id=check.queue_id)
  rig.c.close()
  return out


def _outcomes(campaign: str, kind: str, trials: int, pinned: bool, **kw):
  """Run a campaign in a child: every trial completed or faulted; shared pages a driver keeps pinned never fault (KFD's
  MMU-notifier stand-in invalidates its userptr BOs instead)."""
  out = _child(campaign, kind=kind, trials=trials, seed=22, **kw)
  assert out["completed"] + out["faulted"] == trials
  if pinned and kind == "shared": assert out["faulted"] == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("engine", ["sdma", "compute"])
def test_kfd_userptr_unmapped_or_protected_under_the_gpu(engine, kind):
  _outcomes("kfd_campaign", kind, 36, False, engine=engine)


# ------------------------------------------------------------------ kgsl MAP_USER_MEM: CP packets
def kgsl_campaign(kind: str, trials: int, seed: int) -> dict:
  """`trials` times: MAP_USER_MEM of a fresh buffer, an IB of CP_MEM_TO_MEM packets that add its first half into its
  second, and a client thread that unmaps / write-protects it (each ACTION in turn) after a random delay. kgsl keeps user pages pinned:
  shared pages stay the GPU's and the work completes on them; private ones may fault the context at an address of
  the buffer. Then a new context works."""
  from gputwin.abi import adreno as A, kgsl as K
  from test_adreno_cp import Rig
  sys.setswitchinterval(1e-5)
  rng, rig, size, n = random.Random(seed), Rig("a630"), 4 * PAGE_SIZE, 512
  out = {"completed": 0, "faulted": 0}
  for t in range(trials):
    action, pattern = list(ACTIONS)[t % len(ACTIONS)], np.arange(size // 4, dtype=np.uint32) + t
    user = _user(size, pattern.tobytes(), kind)
    m = rig.io("MAP_USER_MEM", hostptr=user, len=size, memtype=K.KGSL_USER_MEM_TYPE_ADDR)
    va, c = m.gpuaddr, rig.ctx()
    words = []
    for i in range(n): words += A.cp_mem_to_mem(rig.gen, va + size // 2 + 4 * i, va + 4 * i, va + 4 * (i + 1))
    ib = rig.ib(words)
    hostile = _hostile(action, user, size, rng.uniform(0, 0.004))
    err = rig.submit(c, ib=ib, nbytes=4 * len(words))
    hostile.join()
    if err == 0 and not rig.reason(c):
      got = _data(rig.k.vm.find(va).bo.pages, size)
      assert got is None or np.array_equal(got[size // 8:size // 8 + n], pattern[:n] + pattern[1:n + 1]), t
      assert kind == "private" or got is not None
      out["completed"] += 1
    else:
      assert _fault_names(str(rig.reason(c)), va, va + size), rig.reason(c)
      out["faulted"] += 1
    rig.io("SHAREDMEM_FREE", gpuaddr=va)
    rig.io("DRAWCTXT_DESTROY", drawctxt_id=c)
    _release(user, size, action)
    rig.works()
  return out


@pytest.mark.parametrize("kind", KINDS)
def test_kgsl_user_memory_unmapped_or_protected_under_the_cp(kind): _outcomes("kgsl_campaign", kind, 36, True)


# ------------------------------------------------------------------ NV OS-descriptor memory: GPU VA accesses
def nv_campaign(kind: str, trials: int, seed: int) -> dict:
  """`trials` times: NV01_MEMORY_SYSTEM_OS_DESCRIPTOR memory over a fresh buffer, UVM-mapped at its own address, read
  and written through the GPU's VA space (what the copy and compute engines do) while a client thread unmaps /
  write-protects it (each ACTION in turn). nvidia.ko keeps OS-descriptor pages locked until the memory is freed: shared pages stay the
  GPU's; an access to private ones may fault naming its address."""
  from gputwin.abi import nv
  from gputwin.errors import GPUPageFault
  sys.path.insert(0, str(HERE / "nv"))
  from nvclient import Client, st
  sys.setswitchinterval(1e-5)
  rng, c, size, out = random.Random(seed), Client(("sm_90",)), 4 * PAGE_SIZE, {"completed": 0, "faulted": 0}
  dev, _ = c.device(0)
  fd = c.dev_fd(0)
  vas = c.alloc_ok(nv.FERMI_VASPACE_A, dev, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
  c.uvm_ok(nv.UVM_INITIALIZE, flags=0)
  c.uvm_ok(nv.UVM_REGISTER_GPU, gpu_uuid=c.uuid(), rmCtrlFd=-1)
  c.uvm_ok(nv.UVM_REGISTER_GPU_VASPACE, gpuUuid=c.uuid(), rmCtrlFd=c.ctl, hClient=c.root, hVaSpace=vas)
  vm = c.k._clients[c.root].objects[vas].vm
  flags = nv.DRF_NUM(nv.NVOS02_FLAGS_PHYSICALITY, 1) | nv.DRF_NUM(nv.NVOS02_FLAGS_COHERENCY, 1) | \
    nv.DRF_NUM(nv.NVOS02_FLAGS_MAPPING, nv.NVOS02_FLAGS_MAPPING_NO_MAP)
  for t in range(trials):
    action, user, h = list(ACTIONS)[t % len(ACTIONS)], _user(size, bytes(size), kind), 0x5000 + t
    w = nv.nv_ioctl_nvos02_parameters_with_fd(fd=-1, params=nv.NVOS02_PARAMETERS(
      hRoot=c.root, hObjectParent=dev, hObjectNew=h, hClass=nv.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags,
      pMemory=user, limit=size - 1))
    c.esc(fd, nv.NV_ESC_RM_ALLOC_MEMORY, w)
    assert st(w.params) == "NV_OK" and st(c.uvm_map(user, size, h)) == "NV_OK"
    hostile = _hostile(action, user, size, rng.uniform(0, 0.004))
    end, result = time.monotonic() + 0.006, "completed"
    try:
      while time.monotonic() < end:
        for off in range(0, size, 512):
          vm.write(user + off, (t + off).to_bytes(8, "little"))
          assert int.from_bytes(vm.read(user + off, 8), "little") == t + off
    except GPUPageFault as e:
      assert kind == "private" and _fault_names(str(e), user, user + size), e
      result = "faulted"
    hostile.join()
    out[result] += 1
    c.uvm_ok(nv.UVM_FREE, base=user)
    assert st(c.free(h)) == "NV_OK"
    _release(user, size, action)
  c.close()
  return out


@pytest.mark.parametrize("kind", KINDS)
def test_nv_os_descriptor_memory_unmapped_or_protected_under_the_gpu(kind): _outcomes("nv_campaign", kind, 24, True)


# ------------------------------------------------------------------ KFD USERPTR: freeing the BO
def _maps() -> int:
  import gc
  gc.collect()
  with open("/proc/self/maps") as f: return sum(1 for _ in f)


@pytest.mark.parametrize("kind", KINDS)
def test_freeing_a_userptr_bo_unpins_its_pages(kind):
  """FREE_MEMORY_OF_GPU unpins the BO's user pages (the kernel's amdgpu_ttm_tt_unpin_userptr when the BO goes), not
  the close of /dev/kfd: 200 rounds of alloc, map, a CP write into it, unmap and free leave the process with as many
  mappings (/proc/self/maps) and fds (/proc/self/fd) as before. Then a write to the freed range faults that queue,
  naming the address, and another queue goes on."""
  from test_amdgpu_cp import Rig
  rig, size = Rig(), 4 * PAGE_SIZE
  user, q, va = _user(size, b"", kind), rig.queue(), 0x3000_0000
  for t in range(210):
    if t == 10: maps, fds = _maps(), len(os.listdir("/proc/self/fd"))
    a = rig.c.alloc(size, USERPTR, va=va, mmap_offset=user)
    rig.c.map(a.handle)
    rig.push(q, P.write_data(va + 4 * (t % 1024), t) + rig.signal())
    assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is None
    assert ctypes.c_uint32.from_address(user + 4 * (t % 1024)).value == t       # it landed in the user's pages
    rig.c.map(a.handle, name="UNMAP_MEMORY_FROM_GPU")
    rig.c.call("FREE_MEMORY_OF_GPU", handle=a.handle)
  assert _maps() - maps <= 2 and len(os.listdir("/proc/self/fd")) - fds <= 2, "pages still pinned after free"
  other = rig.queue()
  rig.push(q, P.write_data(va + 8, 7) + rig.signal())
  res, evs = rig.wait(rig.mem_ev)
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE and evs[0].memory_exception_data.va == va + 8
  assert _fault_names(q.error, va, va + size) and ctypes.c_uint32.from_address(user + 8).value != 7
  rig.push(other, P.write_data(rig.data.va_addr, 5) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and other.error is None
  rig.c.close()
  host_munmap(user, size)


def freed_view_campaign() -> dict:
  """A GPU-side array over a shared USERPTR BO (what an engine holds mid-access) outlives the BO's free: reading and
  writing it touches the pages it had (no SIGSEGV), the driver's mapping goes with the array, and the BO the engine
  still holds is unbacked, so translating through it is a GPU page fault."""
  from gputwin.errors import GPUPageFault
  from gputwin.mock.vm import GPUAddressSpace
  from kfdclient import Client
  c, size = Client(), 4 * PAGE_SIZE
  c.acquire()
  user = _user(size, b"", "shared")
  before = _maps()
  a = c.alloc(size, USERPTR, mmap_offset=user)
  c.map(a.handle)
  vm = c.k.address_space(c.gpu)
  arr, bo = vm.array(a.va_addr, "<u4", size // 4), vm.find(a.va_addr).bo
  c.map(a.handle, name="UNMAP_MEMORY_FROM_GPU")
  c.call("FREE_MEMORY_OF_GPU", handle=a.handle)
  arr[3] += 1
  held = _maps() - before
  del arr
  stale = GPUAddressSpace("stale")
  stale.map(a.va_addr, size, bo)
  try: stale.read(a.va_addr, 4)
  except GPUPageFault as e: fault = str(e)
  return {"held": held, "after": _maps() - before, "fault": fault}


def test_a_view_held_across_free_does_not_crash_the_host():
  out = _child("freed_view_campaign")
  assert out["held"] >= 1 and out["after"] <= 0, out         # the mapping lived as long as the array, no longer
  assert "GPU page fault" in out["fault"] and "no backing pages" in out["fault"]


def free_race_campaign(kind: str, trials: int, seed: int) -> dict:
  """`trials` times: a dispatch that loops load/add/store over a USERPTR buffer, and a client thread that, a random
  time after the doorbell, unmaps the BO from the GPU and frees it. Each outcome: the dispatch completed (it ran
  before the unmap), or the queue faulted naming an address of the buffer; then a new queue runs."""
  from test_amdgpu_cp import Rig
  from test_kfd_reliability import _dispatch
  sys.setswitchinterval(1e-5)
  rng, rig, size = random.Random(seed), Rig(), 16 * PAGE_SIZE
  c, q, out, rung = rig.c, rig.queue(), {"completed": 0, "faulted": 0}, threading.Event()
  push = rig.push
  rig.push = lambda *a, **kw: (rung.set(), push(*a, **kw))    # the dispatch runs in this thread, inside the doorbell
  for t in range(trials):
    user, va = _user(size, b"", kind), 0x3000_0000 + (t % 4) * 2 * size
    a = c.alloc(size, USERPTR, va=va, mmap_offset=user)
    c.map(a.handle)
    rung.clear()

    def free(delay=rng.uniform(0, 0.3), handle=a.handle):
      rung.wait()
      time.sleep(delay)
      c.map(handle, name="UNMAP_MEMORY_FROM_GPU")
      c.call("FREE_MEMORY_OF_GPU", handle=handle)
    hostile = threading.Thread(target=free)
    hostile.start()
    _dispatch(rig, q, LOOP_RW, va, block=128)
    hostile.join()
    assert rig.wait(rig.ev, rig.mem_ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE, f"trial {t}"
    if q.error is None: out["completed"] += 1
    else:
      assert _fault_names(q.error, va, va + size), q.error
      out["faulted"] += 1
      c.call("DESTROY_QUEUE", queue_id=q.queue_id)
      q = rig.queue()
    host_munmap(user, size)
  check = rig.queue()
  rig.push(check, P.write_data(rig.data.va_addr, 9) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and rig.vm.read_u32(rig.data.va_addr) == 9
  c.close()
  return out


@pytest.mark.parametrize("kind", KINDS)
def test_kfd_userptr_freed_under_a_running_dispatch(kind):
  _outcomes("free_race_campaign", kind, 16, False)


# ------------------------------------------------------------------ ioctl arguments
def ioctl_campaign(driver: str, calls: int) -> dict:
  """`calls` ioctls whose argument lies in a page a client thread keeps write-protecting, protecting and unmapping:
  each call succeeds or is EFAULT (copy_from_user / copy_to_user failed), never a crash. (kgsl: or EINVAL, for an
  argument read from the client's fresh page before the client wrote it: GPUOBJ_ALLOC of size 0.)"""
  import errno
  from gputwin.abi import kgsl as K, nv
  sys.setswitchinterval(1e-5)
  if driver == "kfd":
    from gputwin.mock.kfd.driver import MockKernel
    k = MockKernel("gfx1100")
    fd, req, arg = k.open("/dev/kfd"), abi.IOCTL_NUMBERS["GET_VERSION"], b""
  elif driver == "kgsl":
    from gputwin.mock.kgsl import MockKGSL
    k = MockKGSL("a630")
    fd, req, arg = k.open("/dev/kgsl-3d0"), K.IOCTL_NUMBERS["GPUOBJ_ALLOC"], bytes(K.kgsl_gpuobj_alloc(size=4096))
  else:
    from gputwin.mock.nv import MockNV
    k = MockNV(["sm_90"])
    fd, p = k.open("/dev/nvidiactl"), nv.NVOS00_PARAMETERS(hRoot=1, hObjectOld=2)
    req, arg = nv.nv_iowr(nv.NV_ESC_RM_FREE, p), bytes(p)
  page, out, stop = _user(PAGE_SIZE, arg), {"ok": 0, "EFAULT": 0, "EINVAL": 0}, threading.Event()

  def client():
    while not stop.is_set():
      for prot in (PROT_READ, PROT_NONE, PROT_READ | PROT_WRITE): assert libc.mprotect(page, PAGE_SIZE, prot) == 0
      host_munmap(page, PAGE_SIZE)
      host_mmap(page, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | 0x100000)  # FIXED_NOREPLACE
      ctypes.memmove(page, arg, len(arg))
  t = threading.Thread(target=client)
  t.start()
  try:
    for _ in range(calls):
      try:
        k.ioctl(fd, req, page)
        out["ok"] += 1
      except OSError as e:
        assert e.errno == errno.EFAULT or (driver == "kgsl" and e.errno == errno.EINVAL), e
        out[errno.errorcode[e.errno]] += 1
  finally:
    stop.set()
    t.join()
  return out


@pytest.mark.parametrize("driver", ["kfd", "kgsl", "nv"])
def test_ioctl_argument_unmapped_during_the_ioctl(driver):
  assert sum(_child("ioctl_campaign", driver=driver, calls=3000).values()) == 3000


# ------------------------------------------------------------------ UserPages itself
def test_shared_user_pages_outlive_the_clients_mapping():
  """Shared pages (MAP_SHARED memory, a memfd) are mapped again by the driver: one set of bytes with every other
  mapping of them, still the GPU's after the client unmapped or write-protected its range."""
  from gputwin.abi.hostmem import UserPages
  fd = os.memfd_create("client")
  os.ftruncate(fd, 2 * PAGE_SIZE)
  a = host_mmap(0, 2 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd)
  b = host_mmap(0, 2 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd)      # another mapping of the same file
  os.close(fd)
  pages = UserPages(a, 2 * PAGE_SIZE)
  assert pages.view is not None and pages.write(0, b"ok") and ctypes.string_at(b, 2) == b"ok"
  assert libc.mprotect(a, PAGE_SIZE, PROT_READ) == 0
  assert not pages.accessible() and pages.accessible(PAGE_SIZE, PAGE_SIZE) and pages.write(2, b"!")
  for x in (a, b): host_munmap(x, 2 * PAGE_SIZE)
  assert pages.read(0, 3) == b"ok!" and pages.window(1, 2).read(0, 2) == b"k!"
  pages.close()


def test_private_user_pages_are_reached_by_copies():
  """Private pages cannot be mapped twice: reads and writes are copies that fail (no SIGSEGV) once the client's range
  is unreadable / unwritable; the client's mapping is left as it was."""
  from gputwin.abi.hostmem import UserPages
  a = _user(2 * PAGE_SIZE, b"private")
  pages = UserPages(a, 2 * PAGE_SIZE)
  assert pages.view is None and pages.read(0, 7) == b"private" and pages.write(0, b"P")
  assert ctypes.string_at(a, 7) == b"Private"
  assert libc.mprotect(a + PAGE_SIZE, PAGE_SIZE, PROT_READ) == 0
  assert not pages.write(PAGE_SIZE, b"x") and pages.read(PAGE_SIZE, 1) == b"\0"
  assert libc.mprotect(a, PAGE_SIZE, PROT_NONE) == 0
  assert pages.read(0, 1) is None and not pages.accessible()
  host_munmap(a, 2 * PAGE_SIZE)
  assert pages.read(PAGE_SIZE, 1) is None and not pages.write(0, b"x")
  with pytest.raises(OSError): UserPages(a, PAGE_SIZE)                         # nothing there any more
