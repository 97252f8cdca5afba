"""Reliability of the mock KFD and its virtual GPU (issue 22): bad user pointers are EFAULT as Linux's copy_from_user /
copy_to_user make them (checked against the real kernel's answer for the same address), USERPTR pages that go away or
are read-only fault the GPU queue instead of the host, a runaway or endless dispatch is stopped by the per-queue
watchdog while other queues go on, doorbell writes are events, and malformed packets are queue errors naming the
packet. Each test would have crashed (SIGSEGV), hung or raised a foreign exception before."""
import ctypes, errno, os
import numpy as np
import pytest
from gputwin.abi import kfd as abi
from gputwin.abi import pm4 as P
from gputwin.abi.hostmem import (MAP_ANONYMOUS, MAP_PRIVATE, PAGE_SIZE, PROT_NONE, PROT_READ, PROT_WRITE, host_mmap,
                                 host_munmap, host_range_accessible)
from gputwin.mock.amdgpu.gpu import attach
from kfdclient import Client
from test_amdgpu_cp import Rig

USERPTR = abi.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE


@pytest.fixture
def pages():
  """Anonymous host pages with a chosen protection, unmapped afterwards."""
  made = []

  def make(prot, n=1):
    a = host_mmap(0, n * PAGE_SIZE, prot, MAP_PRIVATE | MAP_ANONYMOUS)
    made.append((a, n * PAGE_SIZE))
    return a
  yield make
  for a, n in made:
    try: host_munmap(a, n)
    except OSError: pass


def linux_errno(addr: int, n: int, write: bool) -> int:
  """What the real kernel answers for a copy_to_user (write) / copy_from_user (read) of n bytes at addr: read(2) from a
  pipe into it, or write(2) from it into a pipe. 0 when it succeeds."""
  r, w = os.pipe()
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.read.argtypes = libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    libc.read.restype = libc.write.restype = ctypes.c_ssize_t
    if write:
      os.write(w, bytes(n))
      ret = libc.read(r, addr, n)
    else: ret = libc.write(w, addr, n)
    return 0 if ret == n else ctypes.get_errno()
  finally:
    os.close(r)
    os.close(w)


@pytest.fixture
def client():
  c = Client("gfx1100")
  c.acquire()
  yield c
  c.close()


def _errno(c, name, arg) -> int:
  with pytest.raises(OSError) as e: c.k.ioctl(c.kfd, abi.IOCTL_NUMBERS[name], arg)
  return e.value.errno


# ------------------------------------------------------------------ 1: ioctl arguments and pointers in them
@pytest.mark.parametrize("prot", [PROT_NONE, PROT_READ])
def test_ioctl_argument_in_unwritable_memory_is_efault(client, pages, prot):
  a = pages(prot)
  assert linux_errno(a, 8, write=True) == errno.EFAULT          # the real kernel's copy_to_user there
  assert _errno(client, "GET_VERSION", a) == errno.EFAULT         # _IOR: handler runs, copy back fails
  if prot == PROT_NONE:
    assert linux_errno(a, 8, write=False) == errno.EFAULT
    assert _errno(client, "CREATE_EVENT", a) == errno.EFAULT      # _IOWR: copy_from_user fails first
    assert not client.k.proc.events


def test_ioctl_argument_readable_but_read_only(client, pages):
  """_IOWR on read-only pages: the kernel reads the struct, runs the ioctl, then fails copy_to_user with EFAULT."""
  a = pages(PROT_READ | PROT_WRITE)
  args = client.struct("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
  ctypes.memmove(a, bytes(args), ctypes.sizeof(args))
  os_mprotect(a, PAGE_SIZE, PROT_READ)
  assert _errno(client, "CREATE_EVENT", a) == errno.EFAULT
  assert len(client.k.proc.events) == 1                          # the handler's work stays, like the kernel's


def os_mprotect(addr, n, prot):
  libc = ctypes.CDLL(None, use_errno=True)
  libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
  assert libc.mprotect(addr, n, prot) == 0


@pytest.mark.parametrize("arg", [bytearray(), bytearray(3), b"\0" * 64, "text", 1.5, object()])
def test_empty_short_or_foreign_argument_buffer_is_efault(client, arg):
  assert _errno(client, "CREATE_EVENT", arg) == errno.EFAULT


@pytest.mark.parametrize("prot", [PROT_NONE, PROT_READ])
def test_user_pointers_inside_structs(client, pages, prot):
  c, bad = client, pages(prot)
  if prot == PROT_NONE:
    assert linux_errno(bad, 4, write=False) == errno.EFAULT
    buf = c.alloc(4096)
    assert c.err("MAP_MEMORY_TO_GPU", handle=buf.handle, device_ids_array_ptr=bad, n_devices=1) == errno.EFAULT
    ev = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL, auto_reset=1).event_id
    assert c.err("WAIT_EVENTS", events_ptr=bad, num_events=1, timeout=0) == errno.EFAULT
    assert c.err("SET_CU_MASK", queue_id=0, num_cu_mask=32, cu_mask_ptr=bad) == errno.EFAULT
  else:   # readable: the event array is read; writing the results back fails
    ev = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL, auto_reset=1).event_id
    os_mprotect(bad, PAGE_SIZE, PROT_READ | PROT_WRITE)
    ctypes.memmove(bad, bytes(abi.kfd_event_data(event_id=ev)), ctypes.sizeof(abi.kfd_event_data))
    os_mprotect(bad, PAGE_SIZE, PROT_READ)
    c.call("SET_EVENT", event_id=ev)
    assert c.err("WAIT_EVENTS", events_ptr=bad, num_events=1, timeout=0) == errno.EFAULT
  assert c.err("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=bad, num_of_nodes=1) == errno.EFAULT


def test_host_range_accessible_matches_the_kernel(pages):
  for prot in (PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE):
    a = pages(prot)
    for write in (False, True):
      assert host_range_accessible(a, 16, write) == (linux_errno(a, 16, write) == 0), (prot, write)
  a = pages(PROT_READ | PROT_WRITE)
  host_munmap(a, PAGE_SIZE)
  assert not host_range_accessible(a, 1) and host_range_accessible(a, 0)


# ------------------------------------------------------------------ 2: USERPTR pages the GPU must not trust
@pytest.fixture
def rig():
  r = Rig()
  yield r
  r.c.close()


def _userptr(rig, addr, va, size=PAGE_SIZE):
  a = rig.c.alloc(size, USERPTR, va=va, mmap_offset=addr)
  rig.c.map(a.handle)
  return a


def _fault_va(rig, q) -> int:
  res, evs = rig.wait(rig.mem_ev)
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is not None
  return evs[0].memory_exception_data.va


def test_gpu_write_to_read_only_userptr_faults_the_queue(rig, pages):
  ro = pages(PROT_READ)
  _userptr(rig, ro, 0x2000_0000)
  q = rig.queue()
  rig.push(q, P.write_data(0x2000_0010, 7))
  assert _fault_va(rig, q) == 0x2000_0010
  assert "GPU page fault" in q.error and "invalidated userptr" in q.error and "WRITE_DATA" not in q.error
  other = rig.queue()                                             # the process and other queues live on
  rig.push(other, P.write_data(rig.data.va_addr, 5) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and rig.vm.read_u32(rig.data.va_addr) == 5


def test_userptr_over_unreadable_pages_is_efault(rig, pages):
  none = pages(PROT_NONE)
  assert rig.c.err("ALLOC_MEMORY_OF_GPU", va_addr=0x2000_0000, size=PAGE_SIZE, gpu_id=rig.c.gpu, flags=USERPTR,
                   mmap_offset=none) == errno.EFAULT


def test_userptr_pages_unmapped_by_the_client_fault_sdma(rig, pages):
  rw = pages(PROT_READ | PROT_WRITE, 2)
  ctypes.memmove(rw, bytes(range(64)), 64)
  _userptr(rig, rw, 0x2000_0000, 2 * PAGE_SIZE)
  q = rig.queue(abi.KFD_IOC_QUEUE_TYPE_SDMA)
  d = rig.data.va_addr
  rig.push(q, P.sdma_copy(d, 0x2000_0000, 64) + P.sdma_fence(rig.page.va_addr + 8 * rig.ev, rig.ev) +
           P.sdma_trap(rig.ev), unit=1)
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and rig.vm.read(d, 64) == bytes(range(64))
  host_munmap(rw, 2 * PAGE_SIZE)                                   # the client unmaps; the BO stays GPU-mapped
  rig.push(q, P.sdma_copy(d, 0x2000_0000, 64), unit=1)
  assert _fault_va(rig, q) == 0x2000_0000 and "invalidated userptr" in q.error


DISPATCH_ASM = """.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl k
.p2align 8
.type k,@function
k:
{body}
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_count 2
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 8
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
"""
STORE = """  v_lshlrev_b32 v1, 2, v0
  global_store_b32 v1, v0, s[0:1]
  s_endpgm"""
LOOP = """  s_branch k"""


def _dispatch(rig, q, body, out, grid=(1, 1, 1), block=32, extra=(), code=None):
  """Upload the kernel to `code` (default rig.data+0x1000) and push its registers + DISPATCH_DIRECT (+ the signal)."""
  from gputwin.isa.codeobj import assemble_code_object, load_code_object
  co = load_code_object(assemble_code_object(DISPATCH_ASM.format(body=body), "gfx1100"), arch="gfx1100")
  k, code = co.kernels["k"], rig.data.va_addr + 0x1000 if code is None else code
  rig.vm.write(code, co.image)
  raw = co.image[k.kd_address:k.kd_address + 64]
  rsrc1, rsrc2 = (int.from_bytes(raw[o:o + 4], "little") for o in (48, 52))
  entry = code + k.entry
  rig.push(q, P.set_sh_reg("COMPUTE_PGM_LO", entry >> 8, entry >> 40) + P.set_sh_reg("COMPUTE_PGM_RSRC1", rsrc1, rsrc2)
           + P.set_sh_reg("COMPUTE_NUM_THREAD_X", *(block if isinstance(block, tuple) else (block, 1, 1)))
           + P.set_sh_reg("COMPUTE_USER_DATA_0", out, out >> 32) + list(extra)
           + P.dispatch_direct(*grid, P.DISPATCH_COMPUTE_SHADER_EN | P.DISPATCH_CS_W32_EN) + rig.signal())


def test_shader_store_to_read_only_userptr_faults(rig, pages):
  q = rig.queue()
  rw = pages(PROT_READ | PROT_WRITE)
  _userptr(rig, rw, 0x2000_0000)
  _dispatch(rig, q, STORE, 0x2000_0000)                           # valid: the store lands in the user's page
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is None
  np.testing.assert_array_equal(np.frombuffer(ctypes.string_at(rw, 128), "<u4"), np.arange(32))
  os_mprotect(rw, PAGE_SIZE, PROT_READ)                            # now read-only: the BO is invalid
  _dispatch(rig, q, STORE, 0x2000_0000)
  assert _fault_va(rig, q) == 0x2000_0000 and "global_store_b32" in q.error


def test_code_in_private_userptr_pages_runs_until_they_go(rig, pages):
  """Code in a USERPTR BO over private pages (reached by copies, no host view) is fetched and runs; once the client
  unmapped the pages the fetch is an execute page fault of that queue."""
  q, code = rig.queue(), pages(PROT_READ | PROT_WRITE, 4)
  _userptr(rig, code, 0x2100_0000, 4 * PAGE_SIZE)
  _dispatch(rig, q, STORE, rig.data.va_addr, code=0x2100_0000)
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is None
  np.testing.assert_array_equal(np.frombuffer(rig.vm.read(rig.data.va_addr, 128), "<u4"), np.arange(32))
  host_munmap(code, 4 * PAGE_SIZE)
  rig.push(q, P.dispatch_direct(1, 1, 1, P.DISPATCH_COMPUTE_SHADER_EN | P.DISPATCH_CS_W32_EN) + rig.signal())
  assert 0x2100_0000 <= _fault_va(rig, q) < 0x2100_0000 + 4 * PAGE_SIZE and "execute" in q.error


# ------------------------------------------------------------------ 3: watchdog and doorbells
def test_runaway_kernel_stops_on_the_watchdog_and_other_queues_run(rig):
  rig.gpu.wave_budget = 5000
  bad, good = rig.queue(), rig.queue()
  _dispatch(rig, bad, LOOP, rig.data.va_addr, grid=(2, 1, 1))
  assert bad.error is not None and "watchdog" in bad.error and "s_branch" in bad.error
  assert "more than 10000 wave-instructions (5000 per wave of its 2 waves)" in bad.error
  rig.push(good, P.write_data(rig.data.va_addr, 9) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and good.error is None
  assert rig.vm.read_u32(rig.data.va_addr) == 9


def test_huge_grid_stops_on_the_lockup_timeout(rig):
  rig.gpu.lockup_timeout = 0.5
  q = rig.queue()
  _dispatch(rig, q, "  s_endpgm", rig.data.va_addr, grid=(0xFFFFFFFF, 0xFFFF, 1))
  assert q.error is not None and "watchdog" in q.error and "lockup timeout" in q.error


def test_new_queue_on_a_reused_doorbell_slot_sees_its_first_write(rig):
  """The first queue leaves value N in its doorbell slot; the next queue gets the same slot and writes N again (the
  same packets): a write is an event, so it runs."""
  d = rig.data.va_addr
  a = rig.queue()
  rig.push(a, P.write_data(d, 1) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  stale, slot = int.from_bytes(rig.c.k.doorbell_view(a), "little"), a.doorbell_index
  rig.c.call("DESTROY_QUEUE", queue_id=a.queue_id)
  b = rig.queue()
  assert b.doorbell_index == slot
  rig.c.k.poll_doorbells()                                        # a CP thread looks before the client writes
  words = P.write_data(d, 2) + rig.signal()
  for i, w in enumerate(words): rig.vm.write_u32(b.ring_base + 4 * i, w)
  rig.vm.write_u64(b.wptr_va, len(words))
  assert len(words) == stale
  rig.c.k.doorbell_view(b)[:] = stale.to_bytes(8, "little")       # userspace's store into the doorbell page
  assert rig.wait(rig.ev, timeout=1000)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and rig.vm.read_u32(d) == 2


# ------------------------------------------------------------------ 4: malformed packets are queue errors
def test_reserved_compare_function_is_a_queue_error(rig):
  q = rig.queue()
  rig.push(q, P.wait_reg_mem(rig.data.va_addr, 0, func=7))
  assert "WAIT_REG_MEM compare function 7 is reserved" in q.error and "internal" not in q.error
  s = rig.queue(abi.KFD_IOC_QUEUE_TYPE_SDMA)
  rig.push(s, P.sdma_poll(rig.data.va_addr, 0, func=7), unit=1)
  assert "POLL_REGMEM compare function 7 is reserved" in s.error and "internal" not in s.error


@pytest.mark.parametrize("regs, want", [   # 8 MiB of scratch per lane x 1024 lanes; a 1023^3 workgroup
  (P.set_sh_reg("COMPUTE_TMPRING_SIZE", 0x3FFFF << 12), r"needs 8\.0 GiB of wave state"),
  (P.set_sh_reg("COMPUTE_NUM_THREAD_X", 1023, 1023, 1023), r"1023x1023x1023 = 1070599167 work-items"),
])
def test_mutated_dispatch_registers_are_queue_errors(rig, regs, want):
  q = rig.queue()
  _dispatch(rig, q, STORE, rig.data.va_addr, block=1024, extra=regs)
  assert q.error is not None and "DISPATCH_DIRECT" in q.error and "internal" not in q.error
  assert __import__("re").search(want, q.error), q.error


def test_default_watchdog_is_scaled_to_the_launch():
  from gputwin.mock.amdgpu import dispatch
  c = Client("gfx1100")
  try:
    g = attach(c.k)
    assert g.wave_budget == dispatch.WAVE_BUDGET and g.lockup_timeout == dispatch.LOCKUP_TIMEOUT
  finally: c.close()


def test_a_full_1024_work_item_workgroup_runs(rig):
  """COMPUTE_NUM_THREAD_X.NUM_THREAD_FULL is 16 bits: 1024 is 1024 work-items (it was read as 10 bits: 1)."""
  q = rig.queue()
  _dispatch(rig, q, STORE, rig.data.va_addr, block=1024)
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is None
  np.testing.assert_array_equal(rig.vm.array(rig.data.va_addr, "<u4", 1024), np.arange(1024))
