"""MockKGSL through the kernel seam: every modelled ioctl through its real request number, the errno of each bad-input
class (as the downstream kgsl driver returns them), CPU/GPU memory coherence through mmap, submission order, syncpoints,
fences, faults, a fuzz of random requests, and per-context timestamps that only move forward."""
import ctypes, errno, random, select
import pytest
from gputwin.abi import kgsl as K
from gputwin.abi.hostmem import (MAP_ANONYMOUS, MAP_PRIVATE, MAP_SHARED, PAGE_SIZE, PROT_READ, PROT_WRITE, host_mmap,
                                  host_munmap, host_view)
from gputwin.mock.kgsl import TARGETS, MockKGSL
from gputwin.mock.kgsl.driver import DEV, VA32, VA64

CTX_FLAGS = K.KGSL_CONTEXT_PREAMBLE | K.KGSL_CONTEXT_NO_GMEM_ALLOC | K.KGSL_CONTEXT_SAVE_GMEM


class QueueCP:
  """A command processor that keeps submissions until the test runs them."""
  def __init__(self): self.subs = []
  def submit(self, kgsl, sub): self.subs.append(sub)

  def run(self, kgsl, n=None):
    todo, self.subs = self.subs[:n], self.subs[len(self.subs[:n]):]
    for s in todo: kgsl.retire(s)
    return todo


@pytest.fixture
def k():
  m = MockKGSL("a630")
  yield m
  m.shutdown()


@pytest.fixture
def fd(k): return k.open(DEV)


def io(k, fd, name, **kw):
  a = getattr(K, [r for r in K.IOCTLS if r[0] == name][0][3].__name__)(**kw)
  k.ioctl(fd, K.IOCTL_NUMBERS[name], a)
  return a


def err(k, fd, name, **kw) -> int:
  with pytest.raises(OSError) as e: io(k, fd, name, **kw)
  return e.value.errno


def ctx(k, fd, flags=CTX_FLAGS): return io(k, fd, "DRAWCTXT_CREATE", flags=flags).drawctxt_id


def alloc(k, fd, size=PAGE_SIZE, flags=0):
  a = io(k, fd, "GPUOBJ_ALLOC", size=size, flags=flags)
  return a.id, io(k, fd, "GPUOBJ_INFO", id=a.id).gpuaddr


def cmdobjs(*objs):
  arr = (K.kgsl_command_object * len(objs))(*objs)
  return arr, ctypes.addressof(arr)


def submit(k, fd, c, ibs=(), syncs=(), flags=0, objs=(), ts=0):
  cl, cp = cmdobjs(*[K.kgsl_command_object(gpuaddr=va, size=n, flags=K.KGSL_CMDLIST_IB) for va, n in ibs]) \
    if ibs else (None, 0)
  ol, op = cmdobjs(*objs) if objs else (None, 0)
  sl = (K.kgsl_command_syncpoint * len(syncs))(*syncs) if syncs else None
  a = K.kgsl_gpu_command(flags=flags, cmdlist=cp, cmdsize=32 if ibs else 0, numcmds=len(ibs), objlist=op,
                         objsize=32 if objs else 0, numobjs=len(objs), synclist=ctypes.addressof(sl) if sl else 0,
                         syncsize=ctypes.sizeof(K.kgsl_command_syncpoint) if sl else 0, numsyncs=len(syncs),
                         context_id=c, timestamp=ts)
  k.ioctl(fd, K.IOCTL_KGSL_GPU_COMMAND, a)
  return a.timestamp


def read_ts(k, fd, c, kind=K.KGSL_TIMESTAMP_RETIRED):
  return io(k, fd, "CMDSTREAM_READTIMESTAMP_CTXTID", context_id=c, type=kind).timestamp


def prop(k, fd, t, T):
  v = T()
  io(k, fd, "DEVICE_GETPROPERTY", type=t, value=ctypes.addressof(v), sizebytes=ctypes.sizeof(v))
  return v


# ---------------------------------------------------------------- properties
@pytest.mark.parametrize("target,chip,gmem", [("a630", 0x06030001, 1 << 20), ("a660", 0x06060001, 0x180000),
                                              ("a730", 0x07030001, 2 << 20), ("a740", 0x43050A01, 3 << 20)])
def test_device_info_per_target(target, chip, gmem):
  m = MockKGSL(target)
  fd = m.open(DEV)
  d = prop(m, fd, K.KGSL_PROP_DEVICE_INFO, K.kgsl_devinfo)
  assert (d.chip_id, d.gpu_id, d.gmem_sizebytes, d.mmu_enabled) == (chip, int(target[1:]), gmem, 1)
  assert d.chip_id >> 24 in (6, 7, 0x43) and TARGETS[target].gen == int(target[1])
  m.shutdown()


def test_properties_and_their_errnos(k, fd):
  v = prop(k, fd, K.KGSL_PROP_VERSION, K.kgsl_version)
  assert (v.drv_major, v.drv_minor) == (K.KGSL_VERSION_MAJOR, K.KGSL_VERSION_MINOR) == (3, 14)
  assert prop(k, fd, K.KGSL_PROP_UCHE_GMEM_VADDR, ctypes.c_uint64).value == 0x100000
  assert prop(k, fd, K.KGSL_PROP_UCHE_TRAP_BASE, ctypes.c_uint64).value == 0x1FFFFFFFFF000
  assert prop(k, fd, K.KGSL_PROP_HIGHEST_BANK_BIT, ctypes.c_uint32).value == 15
  assert prop(k, fd, K.KGSL_PROP_GPU_MODEL, K.kgsl_gpu_model).gpu_model == b"Adreno630v2"
  sh = prop(k, fd, K.KGSL_PROP_DEVICE_SHADOW, K.kgsl_shadowprop)
  assert sh.flags & K.KGSL_FLAGS_PER_CONTEXT_TIMESTAMPS and sh.size >= 4096
  small = ctypes.c_uint32()
  assert err(k, fd, "DEVICE_GETPROPERTY", type=K.KGSL_PROP_DEVICE_INFO, value=ctypes.addressof(small),
             sizebytes=4) == errno.EINVAL                                        # copy_prop: exact size only
  assert err(k, fd, "DEVICE_GETPROPERTY", type=0x7777, value=ctypes.addressof(small), sizebytes=4) == errno.EINVAL
  assert err(k, fd, "DEVICE_GETPROPERTY", type=K.KGSL_PROP_DEVICE_INFO, value=8,
             sizebytes=ctypes.sizeof(K.kgsl_devinfo)) == errno.EFAULT
  # the capability list names what GETPROPERTY answers
  lst = (ctypes.c_uint32 * 64)()
  cp = K.kgsl_capabilities_properties(list=ctypes.addressof(lst), count=64)
  caps = K.kgsl_capabilities(data=ctypes.addressof(cp), size=ctypes.sizeof(cp), querytype=K.KGSL_QUERY_CAPS_PROPERTIES)
  io(k, fd, "DEVICE_GETPROPERTY", type=K.KGSL_PROP_QUERY_CAPABILITIES, value=ctypes.addressof(caps),
     sizebytes=ctypes.sizeof(caps))
  assert K.KGSL_PROP_DEVICE_INFO in list(lst[:cp.count]) and K.KGSL_PROP_UCHE_TRAP_BASE in list(lst[:cp.count])


# ---------------------------------------------------------------- contexts
def test_drawctxt_create_destroy(k, fd):
  cl = K.KGSL_CONTEXT_TYPE_CL << K.KGSL_CONTEXT_TYPE_SHIFT
  a = ctx(k, fd, CTX_FLAGS | (3 << K.KGSL_CONTEXT_PRIORITY_SHIFT) | cl)
  b = ctx(k, fd)
  assert (a, b) == (1, 2)
  assert (k.contexts[a].priority, k.contexts[a].type, k.contexts[b].priority) == (3, K.KGSL_CONTEXT_TYPE_CL, 8)
  assert k.contexts[a].flags & K.KGSL_CONTEXT_PER_CONTEXT_TS
  assert err(k, fd, "DRAWCTXT_CREATE", flags=K.KGSL_CONTEXT_PREAMBLE) == errno.EINVAL   # legacy context switching
  assert err(k, fd, "DRAWCTXT_CREATE", flags=CTX_FLAGS | K.KGSL_CONTEXT_SECURE) == errno.EOPNOTSUPP
  fd2 = k.open(DEV)
  assert err(k, fd2, "DRAWCTXT_DESTROY", drawctxt_id=a) == errno.EINVAL                 # another file's context
  io(k, fd, "DRAWCTXT_DESTROY", drawctxt_id=a)
  assert err(k, fd, "DRAWCTXT_DESTROY", drawctxt_id=a) == errno.EINVAL
  assert err(k, fd, "DRAWCTXT_DESTROY", drawctxt_id=0) == errno.EINVAL
  assert ctx(k, fd) == 1                                                                  # ids are reused
  k.close(fd)                                                                             # a file's contexts go with it
  assert not k.contexts and err(k, fd2, "CMDSTREAM_READTIMESTAMP_CTXTID", context_id=1, type=2) == errno.EINVAL


# ---------------------------------------------------------------- memory
def test_gpuobj_alloc_info_mmap_free(k, fd):
  a = io(k, fd, "GPUOBJ_ALLOC", size=5000, flags=K.KGSL_MEMFLAGS_GPUREADONLY | (1 << 40),
         metadata=0, metadata_len=0)
  assert a.size == 8192 and a.mmapsize == 8192 and a.id == 1
  assert a.flags == K.KGSL_MEMFLAGS_GPUREADONLY | (12 << K.KGSL_MEMALIGN_SHIFT)      # unknown bit dropped, align >= 4K
  info = io(k, fd, "GPUOBJ_INFO", id=a.id)
  assert (info.size, info.va_len, info.va_addr) == (8192, 8192, 0) and VA64[0] <= info.gpuaddr < VA64[1]
  ptr = k.mmap(fd, a.id << 12, 8192, PROT_READ | PROT_WRITE, MAP_SHARED)
  host_view(ptr, 8)[:] = b"kgsl-cpu"
  assert k.vm.read(info.gpuaddr, 8) == b"kgsl-cpu"                                       # the GPU sees the CPU's bytes
  k.vm.write(info.gpuaddr + 4096, b"gpu")
  assert bytes(host_view(ptr + 4096, 3)) == b"gpu"
  p2 = k.mmap(fd, info.gpuaddr, 8192, PROT_READ, MAP_SHARED)                           # by GPU address too
  assert bytes(host_view(p2, 8)) == b"kgsl-cpu"
  for off, n, e in [(a.id << 12, 4096, errno.ERANGE), (77 << 12, 4096, errno.EINVAL), (123, 4096, errno.EINVAL)]:
    with pytest.raises(OSError) as ex: k.mmap(fd, off, n, PROT_READ, MAP_SHARED)
    assert ex.value.errno == e
  g = io(k, fd, "GPUOBJ_ALLOC", size=100, flags=K.KGSL_MEMFLAGS_GUARD_PAGE | K.KGSL_MEMFLAGS_FORCE_32BIT | (16 << 16))
  gi = io(k, fd, "GPUOBJ_INFO", id=g.id)
  assert (g.mmapsize, gi.va_len) == (8192, 8192) and gi.gpuaddr % (1 << 16) == 0 and VA32[0] <= gi.gpuaddr < VA32[1]
  assert err(k, fd, "GPUOBJ_ALLOC", size=0) == errno.EINVAL
  assert err(k, fd, "GPUOBJ_ALLOC", size=1 << 32) == errno.EINVAL                        # at most 4 GiB - 1
  assert err(k, fd, "GPUOBJ_ALLOC", size=4096, flags=K.KGSL_MEMFLAGS_SECURE) == errno.EOPNOTSUPP
  assert err(k, fd, "GPUOBJ_INFO", id=0) == errno.EINVAL
  io(k, fd, "GPUOBJ_FREE", id=a.id)
  assert err(k, fd, "GPUOBJ_FREE", id=a.id) == errno.EINVAL and err(k, fd, "GPUOBJ_INFO", id=a.id) == errno.EINVAL
  assert k.vm.find(info.gpuaddr) is None
  assert bytes(host_view(ptr, 8)) == b"kgsl-cpu"                                       # the user's mapping survives
  k.munmap(ptr, 8192), k.munmap(p2, 8192)


def test_gpumem_alloc_id_free_id_sharedmem_free(k, fd):
  a = io(k, fd, "GPUMEM_ALLOC_ID", size=3 * 4096, flags=0)
  assert a.size == a.mmapsize == 3 * 4096 and a.gpuaddr and a.id
  gi = io(k, fd, "GPUMEM_GET_INFO", id=a.id)
  assert (gi.gpuaddr, gi.size) == (a.gpuaddr, a.size)
  b = io(k, fd, "GPUMEM_ALLOC_ID", size=4096)
  io(k, fd, "GPUMEM_FREE_ID", id=a.id)
  assert err(k, fd, "GPUMEM_FREE_ID", id=a.id) == errno.EINVAL
  io(k, fd, "SHAREDMEM_FREE", gpuaddr=b.gpuaddr + 100)                                # any address inside it
  assert err(k, fd, "SHAREDMEM_FREE", gpuaddr=b.gpuaddr) == errno.EINVAL
  c = io(k, fd, "GPUMEM_ALLOC_ID", size=4096)
  assert c.gpuaddr == a.gpuaddr                                                         # freed VA is reused


def test_import_and_map_user_memory(k, fd):
  n = 2 * PAGE_SIZE
  user = host_mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)
  try:
    ua = K.kgsl_gpuobj_import_useraddr(virtaddr=user)
    a = io(k, fd, "GPUOBJ_IMPORT", priv=ctypes.addressof(ua), priv_len=n, type=K.KGSL_USER_MEM_TYPE_ADDR,
           flags=K.KGSL_MEMFLAGS_GPUREADONLY)
    info = io(k, fd, "GPUOBJ_INFO", id=a.id)
    assert info.size == n and info.flags & K.KGSL_MEMFLAGS_USERMEM_MASK == K.KGSL_MEMFLAGS_USERMEM_ADDR
    k.vm.write(info.gpuaddr + 10, b"to-user")
    assert bytes(host_view(user + 10, 7)) == b"to-user"                                 # the user's own pages
    with pytest.raises(OSError) as ex: k.mmap(fd, a.id << 12, n, PROT_READ, MAP_SHARED)
    assert ex.value.errno == errno.EBUSY                                                # user memory is not remapped
    m = io(k, fd, "MAP_USER_MEM", hostptr=user, len=PAGE_SIZE, memtype=K.KGSL_USER_MEM_TYPE_ADDR)
    assert m.gpuaddr and m.gpuaddr != info.gpuaddr and k.vm.read(m.gpuaddr + 10, 7) == b"to-user"
    io(k, fd, "SHAREDMEM_FREE", gpuaddr=m.gpuaddr)
    assert err(k, fd, "GPUOBJ_IMPORT", priv=ctypes.addressof(ua), priv_len=100,
               type=K.KGSL_USER_MEM_TYPE_ADDR) == errno.EINVAL                           # not page sized
    bad = K.kgsl_gpuobj_import_useraddr(virtaddr=0x10000)
    assert err(k, fd, "GPUOBJ_IMPORT", priv=ctypes.addressof(bad), priv_len=n,
               type=K.KGSL_USER_MEM_TYPE_ADDR) == errno.EFAULT                           # no pages there
    assert err(k, fd, "GPUOBJ_IMPORT", priv=ctypes.addressof(ua), priv_len=n, type=K.KGSL_USER_MEM_TYPE_ASHMEM) == 524
    assert err(k, fd, "MAP_USER_MEM", hostptr=user, len=PAGE_SIZE, offset=PAGE_SIZE,
               memtype=K.KGSL_USER_MEM_TYPE_ADDR) == errno.EINVAL
    assert err(k, fd, "MAP_USER_MEM", hostptr=user, len=PAGE_SIZE, memtype=K.KGSL_USER_MEM_TYPE_PMEM) == errno.EINVAL
    io(k, fd, "GPUOBJ_FREE", id=a.id)
  finally:
    host_munmap(user, n)


# ---------------------------------------------------------------- submission, timestamps, syncpoints
def test_gpu_command_goes_to_the_cp_and_retires(k, fd):
  k.cp = cp = QueueCP()
  c = ctx(k, fd)
  _, ib = alloc(k, fd)
  _, buf = alloc(k, fd)
  mem = K.kgsl_command_object(gpuaddr=buf, size=4096, flags=K.KGSL_OBJLIST_MEMOBJ, id=2)
  assert submit(k, fd, c, ibs=[(ib, 64), (ib + 64, 32)], objs=[mem]) == 1
  assert submit(k, fd, c) == 2                                                         # no IBs: a marker
  s1, s2 = cp.subs
  assert [(i.gpuaddr, i.size) for i in s1.cmds] == [(ib, 64), (ib + 64, 32)] and s1.objs[0].gpuaddr == buf
  assert (s1.timestamp, s2.timestamp, s2.marker, s1.context.id) == (1, 2, True, c)
  assert read_ts(k, fd, c, K.KGSL_TIMESTAMP_QUEUED) == 2 and read_ts(k, fd, c) == 0
  assert err(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=1, timeout=1) == errno.ETIMEDOUT
  assert err(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=3, timeout=1) == errno.EINVAL
  cp.run(k, 1)
  assert read_ts(k, fd, c) == 1 and read_ts(k, fd, c, K.KGSL_TIMESTAMP_CONSUMED) == 1
  assert k.read_memstore(c, "eoptimestamp") == 1
  io(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=1, timeout=0)
  cp.run(k)
  assert read_ts(k, fd, c) == 2
  # the memstore page, mapped read-only, shows the same timestamps
  sh = prop(k, fd, K.KGSL_PROP_DEVICE_SHADOW, K.kgsl_shadowprop)
  ms = k.mmap(fd, sh.gpuaddr, sh.size, PROT_READ, MAP_SHARED)
  assert int.from_bytes(host_view(ms + K.KGSL_MEMSTORE_OFFSET(c, "eoptimestamp"), 4), "little") == 2
  with pytest.raises(OSError) as ex: k.mmap(fd, sh.gpuaddr, sh.size, PROT_READ | PROT_WRITE, MAP_SHARED)
  assert ex.value.errno == errno.EPERM
  k.munmap(ms, sh.size)


def test_gpu_command_errnos(k, fd):
  c = ctx(k, fd)
  _, ib = alloc(k, fd)
  ok = K.kgsl_command_object(gpuaddr=ib, size=16, flags=K.KGSL_CMDLIST_IB)
  arr, p = cmdobjs(ok)

  def cmd(**kw):
    base = dict(cmdlist=p, cmdsize=32, numcmds=1, context_id=c)
    return K.kgsl_gpu_command(**{**base, **kw})

  def e(a):
    with pytest.raises(OSError) as ex: k.ioctl(fd, K.IOCTL_KGSL_GPU_COMMAND, a)
    return ex.value.errno
  assert e(cmd(context_id=99)) == errno.EINVAL
  assert e(cmd(numcmds=100001)) == errno.EINVAL                                         # KGSL_MAX_NUMIBS
  assert e(cmd(numsyncs=33)) == errno.EINVAL                                            # KGSL_MAX_SYNCPOINTS
  assert e(cmd(cmdsize=0)) == errno.EINVAL                                              # _verify_input_list
  assert e(cmd(cmdlist=0x10)) == errno.EFAULT
  badf, pb = cmdobjs(K.kgsl_command_object(gpuaddr=ib, size=16, flags=K.KGSL_OBJLIST_MEMOBJ))
  assert e(cmd(cmdlist=pb)) == errno.EINVAL                                             # not an IB flag
  for va, n in ((ib, 0), (ib + 2, 4), (0x1000, 4), (ib, 4 << 20)):                      # _verify_ib
    bad = K.kgsl_command_object(gpuaddr=va, size=n, flags=K.KGSL_CMDLIST_IB)
    arr2, p2 = cmdobjs(bad)
    assert e(cmd(cmdlist=p2)) == errno.EINVAL
  ts = K.kgsl_cmd_syncpoint_timestamp(context_id=c, timestamp=5)
  sp = K.kgsl_command_syncpoint(priv=ctypes.addressof(ts), size=8, type=K.KGSL_CMD_SYNCPOINT_TYPE_TIMESTAMP)
  assert e(cmd(synclist=ctypes.addressof(sp), syncsize=ctypes.sizeof(sp), numsyncs=1)) == errno.EINVAL  # own future ts
  sp.type = 7
  assert e(cmd(synclist=ctypes.addressof(sp), syncsize=ctypes.sizeof(sp), numsyncs=1)) == errno.EINVAL
  fence = K.kgsl_cmd_syncpoint_fence(fd=fd)                                            # not a sync_file
  sp = K.kgsl_command_syncpoint(priv=ctypes.addressof(fence), size=4, type=K.KGSL_CMD_SYNCPOINT_TYPE_FENCE)
  assert e(cmd(synclist=ctypes.addressof(sp), syncsize=ctypes.sizeof(sp), numsyncs=1)) == errno.EINVAL
  u = ctx(k, fd, CTX_FLAGS | K.KGSL_CONTEXT_USER_GENERATED_TS)
  assert submit(k, fd, u, ibs=[(ib, 16)], ts=10) == 10
  with pytest.raises(OSError) as ex: submit(k, fd, u, ibs=[(ib, 16)], ts=10)
  assert ex.value.errno == errno.ERANGE                                                 # user timestamps must grow
  assert submit(k, fd, c, ibs=[(ib, 16)]) == 1                                          # nothing above consumed one


def test_syncpoints_hold_work_until_met(k, fd):
  k.cp = cp = QueueCP()
  a, b = ctx(k, fd), ctx(k, fd)
  _, ib = alloc(k, fd)
  src = io(k, fd, "SYNCSOURCE_CREATE").id
  fence_fd = io(k, fd, "SYNCSOURCE_CREATE_FENCE", id=src).fence_fd
  assert k.poll([fence_fd]) == []
  fs = K.kgsl_cmd_syncpoint_fence(fd=fence_fd)
  sp = K.kgsl_command_syncpoint(priv=ctypes.addressof(fs), size=4, type=K.KGSL_CMD_SYNCPOINT_TYPE_FENCE)
  assert submit(k, fd, a, ibs=[(ib, 16)], syncs=[sp]) == 1
  assert submit(k, fd, a, ibs=[(ib, 16)]) == 2                                         # queued behind the sync object
  assert cp.subs == []
  io(k, fd, "SYNCSOURCE_SIGNAL_FENCE", id=src, fence_fd=fence_fd)
  assert [s.timestamp for s in cp.subs] == [1, 2] and k.poll([fence_fd]) == [(fence_fd, select.POLLIN)]
  assert err(k, fd, "SYNCSOURCE_SIGNAL_FENCE", id=src, fence_fd=fence_fd) == errno.EINVAL
  assert err(k, fd, "SYNCSOURCE_CREATE_FENCE", id=src + 5) == errno.EINVAL
  # context b waits on a's timestamp 2
  tsp = K.kgsl_cmd_syncpoint_timestamp(context_id=a, timestamp=2)
  sp2 = K.kgsl_command_syncpoint(priv=ctypes.addressof(tsp), size=8, type=K.KGSL_CMD_SYNCPOINT_TYPE_TIMESTAMP)
  assert submit(k, fd, b, ibs=[(ib, 16)], syncs=[sp2]) == 1
  assert [s.context.id for s in cp.subs] == [a, a]
  cp.run(k, 1)
  assert [s.context.id for s in cp.subs] == [a]
  cp.run(k)                                                                             # a:2 retires -> b:1 dispatched
  assert [(s.context.id, s.timestamp) for s in cp.subs] == [(b, 1)]
  io(k, fd, "SYNCSOURCE_DESTROY", id=src)
  assert err(k, fd, "SYNCSOURCE_DESTROY", id=src) == errno.EINVAL


def test_timestamp_event_fence_and_free_on_timestamp(k, fd):
  k.cp = cp = QueueCP()
  c = ctx(k, fd)
  oid, ib = alloc(k, fd)
  t = submit(k, fd, c, ibs=[(ib, 16)])
  out = K.kgsl_timestamp_event_fence(fence_fd=-1)
  io(k, fd, "TIMESTAMP_EVENT", type=K.KGSL_TIMESTAMP_EVENT_FENCE, timestamp=t, context_id=c,
     priv=ctypes.addressof(out), len=4)
  ev = K.kgsl_gpu_event_timestamp(context_id=c, timestamp=t)
  io(k, fd, "GPUOBJ_FREE", id=oid, flags=K.KGSL_GPUOBJ_FREE_ON_EVENT, type=K.KGSL_GPU_EVENT_TIMESTAMP,
     priv=ctypes.addressof(ev), len=8)
  assert err(k, fd, "GPUOBJ_INFO", id=oid) == errno.EINVAL and k.vm.find(ib) is not None  # pending free: still mapped
  assert k.poll([out.fence_fd]) == []
  for kw, e in [(dict(type=K.KGSL_TIMESTAMP_EVENT_GENLOCK, len=4), errno.EINVAL), (dict(len=8), errno.EINVAL),
                (dict(timestamp=t + 1), errno.EINVAL), (dict(context_id=77), errno.EINVAL),
                (dict(priv=0x10), errno.EFAULT)]:
    base = dict(type=K.KGSL_TIMESTAMP_EVENT_FENCE, timestamp=t, context_id=c, priv=ctypes.addressof(out), len=4)
    assert err(k, fd, "TIMESTAMP_EVENT", **{**base, **kw}) == e, kw
  cp.run(k)
  assert k.poll([out.fence_fd]) == [(out.fence_fd, select.POLLIN)] and k.vm.find(ib) is None
  k.close(out.fence_fd)


def test_fault_marks_the_context_guilty(k, fd):
  k.cp = cp = QueueCP()
  a, b = ctx(k, fd), ctx(k, fd)
  _, ib = alloc(k, fd)
  submit(k, fd, a, ibs=[(ib, 16)]), submit(k, fd, a, ibs=[(ib, 16)]), submit(k, fd, b, ibs=[(ib, 16)])
  first = cp.subs.pop(0)
  k.fault(first, "CP opcode error", va=ib, error=RuntimeError("bad packet"))
  assert err(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=a, timestamp=2, timeout=10) == errno.EDEADLK
  with pytest.raises(OSError) as ex: submit(k, fd, a, ibs=[(ib, 16)])
  assert ex.value.errno == errno.EDEADLK
  st = ctypes.c_uint32(a)
  io(k, fd, "DEVICE_GETPROPERTY", type=K.KGSL_PROP_GPU_RESET_STAT, value=ctypes.addressof(st), sizebytes=4)
  assert st.value == K.KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT
  cp.run(k)                                                                             # a's second one is ignored
  assert err(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=b, timestamp=1, timeout=10) == errno.EPROTO
  io(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=b, timestamp=1, timeout=10)      # EPROTO is reported once
  assert str(k.gpu_error(0, ib)) == "bad packet"
  f = K.kgsl_context_property_fault()
  q = K.kgsl_context_property(data=ctypes.addressof(f), size=8, type=K.KGSL_CONTEXT_PROP_FAULTS, contextid=a)
  io(k, fd, "DEVICE_GETPROPERTY", type=K.KGSL_PROP_CONTEXT_PROPERTY, value=ctypes.addressof(q), sizebytes=24)
  assert (f.faults, f.timestamp) == (1, 1)
  c = ctx(k, fd)                                                                        # new contexts work
  assert submit(k, fd, c, ibs=[(ib, 16)]) == 1


# ---------------------------------------------------------------- the ioctl layer itself
def test_unknown_short_and_unmodelled_requests(k, fd):
  for req in (K.kgsl_ioc(K.IOC_READ | K.IOC_WRITE, 0x01, K.kgsl_devinfo), K.kgsl_ioc(K.IOC_WRITE, 0x7F, ctypes.c_int)):
    with pytest.raises(OSError) as ex: k.ioctl(fd, req, ctypes.create_string_buffer(64))
    assert ex.value.errno == errno.ENOTTY
  with pytest.raises(OSError) as ex: k.ioctl(fd, K.IOCTL_KGSL_PERFCOUNTER_GET, K.kgsl_perfcounter_get())
  assert ex.value.errno == errno.EOPNOTSUPP
  with pytest.raises(OSError) as ex: k.ioctl(fd, K.IOCTL_KGSL_DRAWCTXT_CREATE, ctypes.create_string_buffer(4))
  assert ex.value.errno == errno.EFAULT                                                 # shorter than _IOC_SIZE
  with pytest.raises(OSError) as ex: k.ioctl(12345, K.IOCTL_KGSL_DRAWCTXT_CREATE, K.kgsl_drawctxt_create())
  assert ex.value.errno == errno.EBADF
  with pytest.raises(OSError) as ex: k.ioctl(fd, K.IOCTL_KGSL_DEVICE_WAITTIMESTAMP, K.kgsl_device_waittimestamp())
  assert ex.value.errno == errno.ENOTTY                                                 # needs a context id now
  # a smaller user struct is zero-extended: the dispatcher copies min(kernel, user) bytes both ways
  small = K.kgsl_ioc(K.IOC_READ | K.IOC_WRITE, 0x13, ctypes.c_uint64)
  buf = (ctypes.c_uint32 * 2)(CTX_FLAGS, 0)
  k.ioctl(fd, small, buf)
  assert buf[1] == 1


def test_fuzz_random_requests_never_crash_and_device_keeps_working(k, fd):
  rng = random.Random(18)
  nrs = [r[1] for r in K.IOCTLS]
  errs = set()
  for i in range(3000):
    nr = rng.choice(nrs) if rng.random() < 0.8 else rng.randrange(256)
    size = rng.choice([0, 4, 8, 16, 24, 32, 48, 64, 128, rng.randrange(1 << 14)])
    req = K.ioc(rng.randrange(4), rng.choice([9, 9, 9, rng.randrange(256)]), nr, size)
    buf = ctypes.create_string_buffer(bytes(rng.getrandbits(8) for _ in range(size)), max(size, 1))
    if rng.random() < 0.3 and size >= 4:   # keep ids small so lookups sometimes hit
      for off in range(0, min(size, 32), 4): buf[off:off + 4] = rng.randrange(4).to_bytes(4, "little")
    if nr == 0x07 and size >= 12: buf[8:12] = (1).to_bytes(4, "little")   # wait at most 1 ms
    try: k.ioctl(fd, req, buf)
    except OSError as e: errs.add(e.errno)
  assert errs <= {errno.EINVAL, errno.EFAULT, errno.ENOTTY, errno.EOPNOTSUPP, errno.ENOMEM, errno.ERANGE,
                  errno.EDEADLK, errno.ETIMEDOUT, errno.ENOSPC, errno.EBADF, errno.EPROTO, errno.ENOENT, 524}
  assert errno.EINVAL in errs and errno.ENOTTY in errs
  # the device still works
  c = ctx(k, fd)
  _, ib = alloc(k, fd)
  t = submit(k, fd, c, ibs=[(ib, 16)])
  io(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=t, timeout=100)
  assert read_ts(k, fd, c) == t


POINTERS = {"priv", "value", "cmdlist", "objlist", "synclist", "metadata", "objs", "list", "data"}


def _mutate(rng, st):
  """Set 1-3 non-pointer fields of a struct to edge or random values (pointers stay valid: the mock writes through
  some of them, and a mutated pointer into this process's heap would be a test bug, not a driver one)."""
  names = [(n, t) for n, t in st._fields_ if n not in POINTERS]
  for n, t in rng.sample(names, min(len(names), rng.randint(1, 3))):
    if issubclass(t, ctypes.Array): continue
    bits = ctypes.sizeof(t) * 8
    v = rng.choice([0, 1, 2, 3, 0x1000, 0xFFFFFFFF, (1 << bits) - 1, rng.getrandbits(bits),
                    getattr(st, n) ^ (1 << rng.randrange(bits))])
    setattr(st, n, v & ((1 << bits) - 1) if t not in (ctypes.c_int32,) else ctypes.c_int32(v & 0xFFFFFFFF).value)


def test_fuzz_mutated_valid_requests(k, fd):
  """Valid requests of every modelled kind with fields mutated: only errnos come back, state stays consistent."""
  rng = random.Random(1818)
  keep = []
  ctxs, ids = [ctx(k, fd), ctx(k, fd)], [alloc(k, fd)[0] for _ in range(3)]
  src = io(k, fd, "SYNCSOURCE_CREATE").id
  fence = io(k, fd, "SYNCSOURCE_CREATE_FENCE", id=src).fence_fd
  user = host_mmap(0, 4 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)

  def gpuaddr():
    e = k.proc.entries.get(rng.choice(ids)) if k.proc.entries else None
    return e.va if e else 0x5_0000_0000

  def cmd():
    n = rng.randint(0, 3)
    cl = (K.kgsl_command_object * max(n, 1))(*[K.kgsl_command_object(gpuaddr=gpuaddr(), size=64,
                                                                       flags=K.KGSL_CMDLIST_IB) for _ in range(n)])
    for o in cl: _mutate(rng, o) if rng.random() < 0.3 else None
    tsp = K.kgsl_cmd_syncpoint_timestamp(context_id=rng.choice(ctxs), timestamp=rng.randrange(3))
    fsp = K.kgsl_cmd_syncpoint_fence(fd=fence)
    sl = (K.kgsl_command_syncpoint * 2)(
      K.kgsl_command_syncpoint(priv=ctypes.addressof(tsp), size=8, type=K.KGSL_CMD_SYNCPOINT_TYPE_TIMESTAMP),
      K.kgsl_command_syncpoint(priv=ctypes.addressof(fsp), size=4, type=K.KGSL_CMD_SYNCPOINT_TYPE_FENCE))
    for o in sl: _mutate(rng, o) if rng.random() < 0.3 else None
    keep.extend([cl, tsp, fsp, sl])
    ns = rng.choice([0, 0, 1, 2])
    return K.kgsl_gpu_command(cmdlist=ctypes.addressof(cl) if n else 0, cmdsize=32 if n else 0, numcmds=n,
                              synclist=ctypes.addressof(sl) if ns else 0, syncsize=24 if ns else 0, numsyncs=ns,
                              context_id=rng.choice(ctxs))

  def timestamp_event():
    out = K.kgsl_timestamp_event_fence()
    keep.append(out)
    return K.kgsl_timestamp_event(type=K.KGSL_TIMESTAMP_EVENT_FENCE, timestamp=1, context_id=rng.choice(ctxs),
                                  priv=ctypes.addressof(out), len=4)

  def free_on_ts():
    ev = K.kgsl_gpu_event_timestamp(context_id=rng.choice(ctxs), timestamp=1)
    keep.append(ev)
    return K.kgsl_gpuobj_free(flags=K.KGSL_GPUOBJ_FREE_ON_EVENT, type=K.KGSL_GPU_EVENT_TIMESTAMP,
                              priv=ctypes.addressof(ev), len=8, id=rng.choice(ids))

  def import_user():
    ua = K.kgsl_gpuobj_import_useraddr(virtaddr=user)
    keep.append(ua)
    return K.kgsl_gpuobj_import(priv=ctypes.addressof(ua), priv_len=PAGE_SIZE, type=K.KGSL_USER_MEM_TYPE_ADDR)

  makers = {
    "DRAWCTXT_CREATE": lambda: K.kgsl_drawctxt_create(flags=CTX_FLAGS),
    "DRAWCTXT_DESTROY": lambda: K.kgsl_drawctxt_destroy(drawctxt_id=rng.choice(ctxs)),
    "GPUOBJ_ALLOC": lambda: K.kgsl_gpuobj_alloc(size=PAGE_SIZE, flags=0),
    "GPUOBJ_INFO": lambda: K.kgsl_gpuobj_info(id=rng.choice(ids)),
    "GPUOBJ_FREE": free_on_ts, "GPUOBJ_IMPORT": import_user,
    "GPUMEM_ALLOC_ID": lambda: K.kgsl_gpumem_alloc_id(size=PAGE_SIZE),
    "GPUMEM_FREE_ID": lambda: K.kgsl_gpumem_free_id(id=rng.choice(ids)),
    "GPUMEM_GET_INFO": lambda: K.kgsl_gpumem_get_info(id=rng.choice(ids)),
    "SHAREDMEM_FREE": lambda: K.kgsl_sharedmem_free(gpuaddr=gpuaddr()),
    "MAP_USER_MEM": lambda: K.kgsl_map_user_mem(hostptr=user, len=PAGE_SIZE, memtype=K.KGSL_USER_MEM_TYPE_ADDR),
    "GPU_COMMAND": cmd, "TIMESTAMP_EVENT": timestamp_event,
    "CMDSTREAM_READTIMESTAMP_CTXTID": lambda: K.kgsl_cmdstream_readtimestamp_ctxtid(context_id=rng.choice(ctxs),
                                                                                     type=2),
    "DEVICE_WAITTIMESTAMP_CTXTID": lambda: K.kgsl_device_waittimestamp_ctxtid(context_id=rng.choice(ctxs),
                                                                               timestamp=1, timeout=1),
    "SYNCSOURCE_CREATE": lambda: K.kgsl_syncsource_create(),
    "SYNCSOURCE_CREATE_FENCE": lambda: K.kgsl_syncsource_create_fence(id=src),
    "SYNCSOURCE_SIGNAL_FENCE": lambda: K.kgsl_syncsource_signal_fence(id=src, fence_fd=fence),
  }
  ok = 0
  try:
    for i in range(3000):
      name = rng.choice(list(makers))
      a = makers[name]()
      _mutate(rng, a)
      if name == "DEVICE_WAITTIMESTAMP_CTXTID": a.timeout = min(a.timeout, 2) or 1
      try:
        k.ioctl(fd, K.IOCTL_NUMBERS[name], a)
        ok += 1
        if name == "DRAWCTXT_CREATE": ctxs.append(a.drawctxt_id)
        if name in ("GPUOBJ_ALLOC", "GPUMEM_ALLOC_ID", "GPUOBJ_IMPORT"): ids.append(a.id)
      except OSError as e:
        assert e.errno in {errno.EINVAL, errno.EFAULT, errno.ENOMEM, errno.ERANGE, errno.EDEADLK, errno.ETIMEDOUT,
                           errno.ENOSPC, errno.EOPNOTSUPP, errno.EPROTO, errno.ENOENT, errno.EBADF, 524}, (name, e)
      if len(keep) > 200: del keep[:100]
    assert ok > 500
    for c in k.contexts.values():   # invariants: retired <= queued, every entry mapped where it says
      assert K.timestamp_cmp(k.read_memstore(c.id, "eoptimestamp"), c.queued) <= 0
    for e in k.proc.entries.values(): assert k.vm.find(e.va).bo is e
    c = ctx(k, fd)
    t = submit(k, fd, c, ibs=[(gpuaddr(), 16)]) if k.proc.entries else submit(k, fd, c)
    io(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=t, timeout=100)
  finally:
    host_munmap(user, 4 * PAGE_SIZE)


def test_waiter_wakes_when_another_thread_retires(k, fd):
  import threading, time
  k.cp = cp = QueueCP()
  c = ctx(k, fd)
  t = submit(k, fd, c)
  threading.Timer(0.05, lambda: cp.run(k)).start()
  t0 = time.monotonic()
  io(k, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=t, timeout=5000)
  assert 0.03 < time.monotonic() - t0 < 4 and read_ts(k, fd, c) == t


def test_timestamps_monotonic_across_two_contexts(k, fd):
  k.cp = cp = QueueCP()
  a, b = ctx(k, fd), ctx(k, fd)
  _, ib = alloc(k, fd)
  rng = random.Random(1)
  last = {a: 0, b: 0}
  issued = {a: 0, b: 0}
  for i in range(2000):
    c = rng.choice((a, b))
    t = submit(k, fd, c, ibs=[(ib, 16)])
    assert t == issued[c] + 1
    issued[c] = t
    if rng.random() < 0.3: cp.run(k, rng.randrange(1, 8))
    for x in (a, b):
      r = read_ts(k, fd, x)
      assert last[x] <= r <= issued[x]
      last[x] = r
  cp.run(k)
  assert read_ts(k, fd, a) == issued[a] and read_ts(k, fd, b) == issued[b] and sum(issued.values()) == 2000


def test_ten_thousand_submissions_leave_nothing_behind(k, fd):
  a, b = ctx(k, fd), ctx(k, fd)
  _, ib = alloc(k, fd)
  fds0, entries0 = len(k._fds), len(k.proc.entries)
  last = {a: 0, b: 0}
  for i in range(10000):
    c = (a, b)[i & 1]
    t = submit(k, fd, c, ibs=[(ib, 16)])
    assert t == last[c] + 1 and read_ts(k, fd, c) == t
    last[c] = t
    if i % 500 == 0:
      out = K.kgsl_timestamp_event_fence()
      io(k, fd, "TIMESTAMP_EVENT", type=K.KGSL_TIMESTAMP_EVENT_FENCE, timestamp=t, context_id=c,
         priv=ctypes.addressof(out), len=4)
      assert k.poll([out.fence_fd]) == [(out.fence_fd, select.POLLIN)]
      k.close(out.fence_fd)
  assert last == {a: 5000, b: 5000} and (len(k._fds), len(k.proc.entries)) == (fds0, entries0)
  assert all(not c.pending and not c.events for c in k.contexts.values())


def test_sync_mode_waiters_drive_the_cp_and_files_share_the_process():
  class PollCP(QueueCP):
    def poll(self, kgsl): return bool(self.run(kgsl, 1))
  m = MockKGSL("a740", cp=PollCP(), sync=True)
  fd, fd2 = m.open(DEV), m.open(DEV)
  c = ctx(m, fd)
  oid, ib = alloc(m, fd)
  assert io(m, fd2, "GPUOBJ_INFO", id=oid).gpuaddr == ib                               # memory is per process
  ts = [submit(m, fd, c, ibs=[(ib, 16)]) for _ in range(3)]
  assert read_ts(m, fd, c) == 0
  io(m, fd, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=ts[-1], timeout=0)  # 0: no timeout
  assert read_ts(m, fd, c) == 3 and m.cp.subs == []
  m.close(fd)
  assert io(m, fd2, "GPUOBJ_INFO", id=oid).gpuaddr == ib and not m.contexts
  m.shutdown()
