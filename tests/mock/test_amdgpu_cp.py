"""The virtual GPU's command processor and SDMA engine, driven in synchronous mode through raw rings and doorbells (no
runtime): packets execute inside WAIT_EVENTS, errors put the queue in KFD's error state, the host never crashes."""
import ctypes
import numpy as np
import pytest
from gputwin.abi import pm4 as P
from gputwin.mock.amdgpu.gpu import attach
from gputwin.abi import kfd as abi
from kfdclient import Client


class Rig:
  """One mock GPU in sync mode with its engines attached, the signal page, a MEMORY event and scratch memory."""

  def __init__(self, target="gfx1100"):
    self.c = c = Client(target)
    c.k.sync = True
    self.gpu = attach(c.k)
    c.acquire()
    self.page, _ = c.buffer(abi.KFD_SIGNAL_EVENT_LIMIT * 8)
    self.ev = c.call("CREATE_EVENT", event_page_offset=self.page.handle, event_type=abi.KFD_IOC_EVENT_SIGNAL,
                     auto_reset=1).event_id
    self.mem_ev = c.call("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_MEMORY).event_id
    self.data = c.alloc(0x4000, va=0x1000_0000)   # below 4 GiB: gputwin.emu faults on shader VAs above (RDNA3 ADDR)
    c.map(self.data.handle)
    self.vm = c.k.address_space(c.gpu)

  def queue(self, qtype=abi.KFD_IOC_QUEUE_TYPE_COMPUTE):
    self.c.call("CREATE_QUEUE", **self.c.queue_args(qtype))
    return self.c.k.queues()[-1]

  def push(self, q, words, unit=4):
    """Append dwords at wptr and ring the doorbell with the new wptr (dwords for PM4, bytes for SDMA)."""
    w = self.vm.read_u64(q.wptr_va)
    pos = w * unit // 4
    for i, d in enumerate(words): self.vm.write_u32(q.ring_base + 4 * ((pos + i) % (q.ring_size // 4)), d)
    self.vm.write_u64(q.wptr_va, (pos + len(words)) * 4 // unit)
    self.c.k.ring_doorbell(q, (pos + len(words)) * 4 // unit)

  def wait(self, *events, timeout=0):
    evs = (abi.kfd_event_data * len(events))()
    for e, i in zip(evs, events): e.event_id = i
    w = self.c.call("WAIT_EVENTS", events_ptr=ctypes.addressof(evs), num_events=len(evs), timeout=timeout)
    return w.wait_result, evs

  def signal(self):   # RELEASE_MEM to the event mailbox + interrupt, the way the runtime completes work
    return P.release_mem(self.page.va_addr + 8 * self.ev, self.ev, P.DATA_SEL_32, P.INT_SEL_INT_AFTER_WRITE, self.ev)


@pytest.fixture
def rig():
  r = Rig()
  yield r
  r.c.close()


def test_pm4_writes_and_release_mem_interrupt(rig):
  q = rig.queue()
  d = rig.data.va_addr
  rig.push(q, P.nop(1) + P.nop(4) + P.write_data(d, 1, 2, 3) + P.release_mem(d + 16, 2**40 + 5) +
           P.release_mem(d + 24, 0xABCDEF, P.DATA_SEL_32) + P.release_mem(d + 32, data_sel=P.DATA_SEL_GPU_CLOCK) +
           rig.signal())
  res, _ = rig.wait(rig.ev)
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  assert list(rig.vm.array(d, "<u4", 3)) == [1, 2, 3] and rig.vm.read_u64(d + 16) == 2**40 + 5
  assert rig.vm.read_u32(d + 24) == 0xABCDEF and rig.vm.read_u64(d + 32) > 0
  assert rig.vm.read_u64(q.rptr_va) == rig.vm.read_u64(q.wptr_va)        # everything consumed


def test_indirect_buffer_and_set_sh_reg(rig):
  q = rig.queue()
  d = rig.data.va_addr
  ib = P.set_sh_reg("COMPUTE_USER_DATA_0", 11, 12) + P.write_data(d + 64, 42)
  rig.vm.write(d + 0x1000, np.array(ib, "<u4").tobytes())
  rig.push(q, P.indirect_buffer(d + 0x1000, len(ib)) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  st = rig.gpu.state[q]
  assert rig.vm.read_u32(d + 64) == 42 and (st.regs["COMPUTE_USER_DATA_0"], st.regs["COMPUTE_USER_DATA_1"]) == (11, 12)


def test_wait_reg_mem_holds_the_queue_until_memory_matches(rig):
  q, q2 = rig.queue(), rig.queue()
  d = rig.data.va_addr
  rig.push(q, P.wait_reg_mem(d, 7, mask=0xFF, func=3) + P.write_data(d + 4, 1) + rig.signal())
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_TIMEOUT and rig.vm.read_u32(d + 4) == 0
  rig.push(q2, P.write_data(d, 0x1207))                                   # (0x1207 & 0xFF) == 7
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and rig.vm.read_u32(d + 4) == 1


def test_sdma_copy_fill_fence_timestamp_poll_trap(rig):
  q = rig.queue(abi.KFD_IOC_QUEUE_TYPE_SDMA)
  d = rig.data.va_addr
  rig.vm.write(d, np.arange(64, dtype="<u4").tobytes())
  rig.push(q, P.sdma_copy(d + 0x800, d, 256) + P.sdma_fill(d + 0x1000, 0x5A5A5A5A, 64) + P.sdma_fence(d + 0x2000, 9) +
           P.sdma_timestamp(d + 0x2008) + P.sdma_poll(d + 0x2000, 9, func=3) +
           P.sdma_fence(rig.page.va_addr + 8 * rig.ev, rig.ev) + P.sdma_trap(rig.ev), unit=1)
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  assert list(rig.vm.array(d + 0x800, "<u4", 64)) == list(range(64))
  assert (rig.vm.array(d + 0x1000, "<u4", 16) == 0x5A5A5A5A).all() and rig.vm.read_u32(d + 0x1040) == 0
  assert rig.vm.read_u32(d + 0x2000) == 9 and rig.vm.read_u64(d + 0x2008) > 0
  assert rig.vm.read_u64(q.rptr_va) == rig.vm.read_u64(q.wptr_va)        # SDMA pointers count bytes


def _fault(rig, q, words, unit=4):
  rig.push(q, words, unit)
  res, evs = rig.wait(rig.mem_ev)
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is not None and not q.is_active
  return evs[0].memory_exception_data.va


def test_unknown_opcode_errors_the_queue_at_that_packet(rig):
  q, q2 = rig.queue(), rig.queue()
  d = rig.data.va_addr
  good = P.write_data(d, 1)
  va = _fault(rig, q, good + P.pkt(0x99, 0, 0) + P.write_data(d + 4, 2))
  assert "unknown PM4 opcode 0x99" in q.error and f"ring offset {4 * len(good):#x}" in q.error
  assert va == q.ring_base + 4 * len(good) and rig.vm.read_u64(q.rptr_va) == len(good)   # rptr stays at the packet
  assert rig.vm.read_u32(d + 4) == 0                                      # nothing after it ran
  rig.push(q, P.write_data(d + 8, 3))                                     # a dead queue is no longer processed
  rig.push(q2, P.write_data(d + 12, 4) + rig.signal())                    # ... the others are
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  assert rig.vm.read_u32(d + 8) == 0 and rig.vm.read_u32(d + 12) == 4


def test_wild_wptr_and_bad_headers(rig):
  q = rig.queue()
  rig.vm.write_u64(q.wptr_va, 1 << 50)
  rig.c.k.ring_doorbell(q, 1 << 50)
  assert rig.wait(rig.mem_ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and "outside the ring" in q.error
  for words in ([0x12345678], [P.header(P.NOP, 0x3000)], P.pkt(P.RELEASE_MEM, 1)):   # type 0, oversized, short
    q2 = rig.queue()
    _fault(rig, q2, words)
    assert q2.error


def test_gpu_page_faults_report_the_address(rig):
  d = rig.data.va_addr
  q = rig.queue(abi.KFD_IOC_QUEUE_TYPE_SDMA)
  assert _fault(rig, q, P.sdma_copy(d, 0x7700_0000, 64), unit=1) == 0x7700_0000 and "GPU page fault" in q.error
  q2 = rig.queue()
  assert _fault(rig, q2, P.write_data(0x7800_0000, 1)) == 0x7800_0000
  q3 = rig.queue()
  assert _fault(rig, q3, P.indirect_buffer(0x7900_0000, 4)) == 0x7900_0000


def test_dispatch_direct_from_registers_alone(rig):
  """A dispatch is registers only: PGM_LO/HI, RSRC1/2, USER_DATA (here the output pointer itself, no kernargs), the
  block size and the grid. The kernel stores workgroup_id * 1000 + work-item id at out[wg * 64 + tid]."""
  from gputwin.isa.codeobj import assemble_code_object, load_code_object
  co = load_code_object(assemble_code_object(""".amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_mul_i32 s3, s2, 1000
  v_add_nc_u32 v2, s3, v0
  s_lshl_b32 s4, s2, 8
  v_lshlrev_b32 v1, 2, v0
  v_add_nc_u32 v1, s4, v1
  global_store_b32 v1, v2, s[0:1]
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_count 2
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 8
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
""", "gfx1100"), arch="gfx1100")
  k, d = co.kernels["k"], rig.data.va_addr
  rig.vm.write(d + 0x1000, co.image)                                      # "VRAM" holding the code object image
  raw = co.image[k.kd_address:k.kd_address + 64]
  rsrc1, rsrc2 = (int.from_bytes(raw[o:o + 4], "little") for o in (48, 52))
  entry = d + 0x1000 + k.entry
  q = rig.queue()
  rig.push(q, P.set_sh_reg("COMPUTE_PGM_LO", entry >> 8, entry >> 40) + P.set_sh_reg("COMPUTE_PGM_RSRC1", rsrc1, rsrc2)
           + P.set_sh_reg("COMPUTE_NUM_THREAD_X", 64, 1, 1) + P.set_sh_reg("COMPUTE_USER_DATA_0", d, d >> 32)
           + P.dispatch_direct(3, 1, 1, P.DISPATCH_COMPUTE_SHADER_EN | P.DISPATCH_CS_W32_EN) + rig.signal())
  res = rig.wait(rig.ev)[0]
  assert q.error is None and res == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  want = (np.arange(3)[:, None] * 1000 + np.arange(64)[None, :]).reshape(-1)
  np.testing.assert_array_equal(rig.vm.array(d, "<u4", 192), want)
  assert rig.gpu.state[q].dispatches == 1 and rig.gpu.state[q].instructions > 0
