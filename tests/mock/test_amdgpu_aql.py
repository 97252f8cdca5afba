"""AQL queues on the virtual GPU, driven in synchronous mode through a raw ring, an amd_queue_t and doorbells (no
runtime, no tinygrad): kernel dispatch packets, AMD's PM4-IB vendor packets, barriers, completion signals, errors,
ring wrap; and PM4's PRED_EXEC on a multi-XCC GPU. Oracles: numpy, the HSA packet and signal semantics."""
import struct
import numpy as np
import pytest
from gputwin.abi import aql as A
from gputwin.abi import kfd as abi
from gputwin.abi import pm4 as P
from gputwin.isa.codeobj import assemble_code_object, load_code_object
from test_amdgpu_cp import Rig

# out[i] = i + 7 for the work-item's global id i; the workgroup size comes from the dispatch packet (dispatch ptr),
# the output pointer from the kernargs
KERNEL = """.amdgcn_target "amdgcn-amd-amdhsa--{arch}"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_load_dwordx2 s[6:7], s[2:3], 0x0
  s_load_dword s8, s[0:1], 0x4
  s_waitcnt lgkmcnt(0)
  s_and_b32 s8, s8, 0xffff
  s_mul_i32 s9, s4, s8
  v_add_u32 v1, s9, v0
  v_lshlrev_b32 v2, 2, v1
  v_add_u32 v1, 7, v1
  global_store_dword v2, v1, s[6:7]
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_dispatch_ptr 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 16
  .amdhsa_accum_offset 4
.end_amdhsa_kernel
"""


class AQLRig(Rig):
  """Rig with an AQL queue: ring, amd_queue_t (rptr/wptr are its read/write dispatch ids), a code object, kernargs
  and an output buffer."""

  def __init__(self, target="gfx950", ring_size=0x1000):
    super().__init__(target)
    self.arch = target
    self.q = self.aql_queue(ring_size)
    co = load_code_object(assemble_code_object(KERNEL.format(arch=target), target), arch=target)
    self.code, _ = self.c.buffer((len(co.image) + 0xFFF) & ~0xFFF)
    self.vm.write(self.code.va_addr, co.image)
    self.kd = self.code.va_addr + co.kernels["k"].kd_address
    self.out, _ = self.c.buffer(0x4000)
    self.args, _ = self.c.buffer(0x1000)
    self.vm.write_u64(self.args.va_addr, self.out.va_addr)

  def aql_queue(self, ring_size=0x1000):
    aq, _ = self.c.buffer(0x1000)
    self.amdq = b = aq.va_addr
    self.vm.write_u32(b + A.QUEUE_READ_DISPATCH_ID_FIELD_BASE_BYTE_OFFSET, A.QUEUE_READ_DISPATCH_ID)
    self.vm.write_u32(b + A.QUEUE_COMPUTE_TMPRING_SIZE, 1)   # one 1 KiB wave of scratch
    self.vm.write_u32(b + A.QUEUE_PROPERTIES, A.AMD_QUEUE_PROPERTIES_IS_PTR64 | A.AMD_QUEUE_PROPERTIES_ENABLE_PROFILING)
    self.c.call("CREATE_QUEUE", **self.c.queue_args(abi.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, ring_size,
                                                     read_pointer_address=b + A.QUEUE_READ_DISPATCH_ID,
                                                     write_pointer_address=b + A.QUEUE_WRITE_DISPATCH_ID))
    return self.c.k.queues()[-1]

  def submit(self, *packets: bytes, q=None, ring=True):
    """Write packets at the write dispatch id, bump it, ring the doorbell with the last packet's index."""
    q = q or self.q
    w, n = self.vm.read_u64(q.wptr_va), q.ring_size // A.PACKET_SIZE
    for i, p in enumerate(packets): self.vm.write(q.ring_base + A.PACKET_SIZE * ((w + i) % n), p)
    self.vm.write_u64(q.wptr_va, w + len(packets))
    if ring: self.c.k.ring_doorbell(q, w + len(packets) - 1)
    return w

  def signal(self, value=1, event=False) -> int:
    """An amd_signal_t (in the data buffer), optionally with the rig's event as its mailbox."""
    s = self.data.va_addr + 0x3000 + 64 * getattr(self, "_nsig", 0)
    self._nsig = getattr(self, "_nsig", 0) + 1
    self.vm.write(s, bytes(64))
    self.vm.write_u64(s + A.SIGNAL_KIND, A.AMD_SIGNAL_KIND_USER)
    self.vm.write_u64(s + A.SIGNAL_VALUE, value)
    if event:
      self.vm.write_u64(s + A.SIGNAL_EVENT_MAILBOX_PTR, self.page.va_addr + 8 * self.ev)
      self.vm.write_u32(s + A.SIGNAL_EVENT_ID, self.ev)
    return s

  def ib(self, words: list[int], at: int = 0x2000) -> list[int]:
    """PM4 words placed in memory; the INDIRECT_BUFFER command that runs them."""
    self.vm.write(self.data.va_addr + at, np.array(words, "<u4").tobytes())
    return P.indirect_buffer(self.data.va_addr + at, len(words))

  def dispatch(self, grid=192, block=64, **kw) -> bytes:
    return A.dispatch_packet(self.kd, self.args.va_addr, (grid, 1, 1), (block, 1, 1), **kw)

  def rptr(self, q=None) -> int: return self.vm.read_u64((q or self.q).rptr_va)


@pytest.fixture(params=["gfx950", "gfx942"])
def rig(request):
  r = AQLRig(request.param)
  yield r
  r.c.close()


def test_dispatch_packet_runs_the_kernel_and_completes_its_signal(rig):
  sig = rig.signal(1, event=True)
  rig.submit(rig.dispatch(192, 64, completion_signal=sig))
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE                       # the mailbox's interrupt
  assert rig.q.error is None and rig.rptr() == 1
  np.testing.assert_array_equal(rig.vm.array(rig.out.va_addr, "<u4", 192), np.arange(192) + 7)
  assert rig.vm.read_u64(sig + A.SIGNAL_VALUE) == 0                                    # decremented once
  start, end = rig.vm.read_u64(sig + A.SIGNAL_START_TS), rig.vm.read_u64(sig + A.SIGNAL_END_TS)
  assert 0 < start <= end                                                              # profiling is on
  assert rig.gpu.state[rig.q].dispatches == 1


def test_signal_values_count_down_and_barrier_bit_orders_packets(rig):
  """Each packet's completion signal is decremented (an int64 in memory); a packet with the barrier bit sees every
  earlier packet's writes: the PM4 IB copies what the dispatch before it stored."""
  sig = rig.signal(5)
  d = rig.data.va_addr
  copy = P.pkt(P.COPY_DATA, P.COPY_SRC_MEMORY | P.COPY_DST_MEMORY, *P.lo_hi(rig.out.va_addr + 4 * 100),
               *P.lo_hi(d + 0x100))
  rig.submit(rig.dispatch(128, 32, completion_signal=sig), A.pm4_ib_packet(rig.ib(copy), completion_signal=sig),
             A.pm4_ib_packet(rig.ib(P.write_data(d + 0x104, 0xC0FFEE), at=0x2400), completion_signal=sig))
  assert rig.q.error is None and rig.rptr() == 3
  assert rig.vm.read_u32(d + 0x100) == 107 and rig.vm.read_u32(d + 0x104) == 0xC0FFEE
  assert rig.vm.read_u64(sig + A.SIGNAL_VALUE) == 2
  zero = rig.signal(0)
  rig.submit(A.pm4_ib_packet(rig.ib(P.nop(2), at=0x2800), completion_signal=zero))
  assert rig.vm.read_u64(zero + A.SIGNAL_VALUE) == 2**64 - 1                           # -1: the HSA value is signed


def test_pm4_ib_packet_runs_waits_and_interrupts(rig):
  """The vendor packet's IB is ordinary PM4: a WAIT_REG_MEM inside it holds the queue (and the packets behind it)
  until memory matches; its RELEASE_MEM interrupt signals the event."""
  d = rig.data.va_addr
  ib = P.wait_reg_mem(d + 0x200, 1, func=3) + P.write_data(d + 0x204, 9) + \
       P.release_mem(rig.page.va_addr + 8 * rig.ev, rig.ev, P.DATA_SEL_32, P.INT_SEL_INT_AFTER_WRITE, rig.ev)
  rig.submit(A.pm4_ib_packet(rig.ib(ib)), A.pm4_ib_packet(rig.ib(P.write_data(d + 0x208, 10), at=0x2400)))
  assert rig.rptr() == 0 and rig.vm.read_u32(d + 0x204) == 0 and rig.q.error is None    # waiting inside the IB
  rig.vm.write_u32(d + 0x200, 1)
  rig.gpu.process(rig.q)                                                               # the CP's next poll
  assert rig.wait(rig.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE
  assert rig.rptr() == 2 and rig.vm.read_u32(d + 0x204) == 9 and rig.vm.read_u32(d + 0x208) == 10


def test_barrier_and_or_wait_for_their_dependency_signals(rig):
  d = rig.data.va_addr
  dep1, dep2 = rig.signal(1), rig.signal(1)
  rig.submit(A.barrier_packet([dep1, dep2]), A.pm4_ib_packet(rig.ib(P.write_data(d + 0x300, 1))))
  assert rig.rptr() == 0
  rig.vm.write_u64(dep1 + A.SIGNAL_VALUE, 0)
  rig.gpu.process(rig.q)
  assert rig.rptr() == 0                                                               # AND: one is still 1
  rig.vm.write_u64(dep2 + A.SIGNAL_VALUE, 0)
  rig.gpu.process(rig.q)
  assert rig.rptr() == 2 and rig.vm.read_u32(d + 0x300) == 1
  dep3 = rig.signal(1)
  rig.submit(A.barrier_packet([dep3, dep1], typ=A.BARRIER_OR), A.pm4_ib_packet(rig.ib(P.write_data(d + 0x304, 2))))
  assert rig.rptr() == 4 and rig.vm.read_u32(d + 0x304) == 2                           # OR: dep1 is 0


def test_invalid_header_waits_until_the_packet_is_published(rig):
  """HSA: the packet processor does not consume a slot whose type is still INVALID (the producer writes the header
  last); once the header is stored and the doorbell rung again, the packet runs."""
  d = rig.data.va_addr
  pkt = A.pm4_ib_packet(rig.ib(P.write_data(d + 0x400, 5)))
  unpublished = struct.pack("<I", (struct.unpack_from("<I", pkt)[0] & ~0xFF) | A.INVALID) + pkt[4:]
  w = rig.submit(unpublished)
  assert rig.rptr() == 0 and rig.q.error is None and rig.vm.read_u32(d + 0x400) == 0
  rig.vm.write(rig.q.ring_base + 64 * w, pkt[:4])
  rig.c.k.ring_doorbell(rig.q, w + (1 << 32))   # another doorbell write (hardware sees every write; the mock, changes)
  assert rig.rptr() == 1 and rig.vm.read_u32(d + 0x400) == 5


@pytest.mark.parametrize("bad,needle", [
  (lambda r: struct.pack("<H", 7) + bytes(62), "type 7"),
  (lambda r: struct.pack("<H", A.AGENT_DISPATCH) + bytes(62), "type AGENT_DISPATCH"),
  (lambda r: struct.pack("<HH", A.VENDOR_SPECIFIC, 2) + bytes(60), "format 2"),
  (lambda r: A.pm4_ib_packet(P.nop(4)), "not a 4-dword INDIRECT_BUFFER"),
  (lambda r: A.dispatch_packet(r.kd + 8, r.args.va_addr, (64, 1, 1), (64, 1, 1)), "not 64-byte aligned"),
  (lambda r: A.dispatch_packet(0x7f00_0000_0000, r.args.va_addr, (64, 1, 1), (64, 1, 1)), "GPU page fault"),
  (lambda r: A.dispatch_packet(r.kd, r.args.va_addr, (64, 1, 1), (64, 1, 1), dims=0), "dimensions is 0"),
  (lambda r: A.dispatch_packet(r.kd, r.args.va_addr, (64, 1, 1), (64, 1, 1), group_segment_size=1 << 20), "LDS"),
  (lambda r: A.dispatch_packet(r.kd, r.args.va_addr, (64, 1, 1), (64, 1, 1), private_segment_size=4096),
   "compute_tmpring_size")])
def test_malformed_packet_is_a_queue_error_naming_its_index(rig, bad, needle):
  d = rig.data.va_addr
  rig.submit(A.pm4_ib_packet(rig.ib(P.write_data(d + 0x500, 1))), bad(rig),
             A.pm4_ib_packet(rig.ib(P.write_data(d + 0x504, 2), at=0x2400)))
  res, evs = rig.wait(rig.mem_ev)
  q = rig.q
  assert res == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is not None and not q.is_active
  assert needle in q.error and "packet 1 " in q.error and "AQL queue" in q.error, q.error
  assert rig.rptr() == 1 and rig.vm.read_u32(d + 0x500) == 1 and rig.vm.read_u32(d + 0x504) == 0
  fault_va = evs[0].memory_exception_data.va
  assert fault_va == (0x7f00_0000_0000 if needle == "GPU page fault" else q.ring_base + 64)
  q2 = rig.aql_queue()                                                                 # the process goes on
  rig.submit(rig.dispatch(64, 64), q=q2)
  assert q2.error is None and rig.rptr(q2) == 1 and rig.vm.read_u32(rig.out.va_addr + 4 * 63) == 70


# out[gy * grid_size_x + gx] = that index + 7 for the work-item's global ids (gx, gy): workgroup size and grid width
# from the dispatch packet, workgroup ids x and y in s4, s5, work-item ids packed in v0
KERNEL_2D = KERNEL.replace("""  s_load_dword s8, s[0:1], 0x4
  s_waitcnt lgkmcnt(0)
  s_and_b32 s8, s8, 0xffff
  s_mul_i32 s9, s4, s8
  v_add_u32 v1, s9, v0
  v_lshlrev_b32 v2, 2, v1""", """  s_load_dword s8, s[0:1], 0x4
  s_load_dword s10, s[0:1], 0xc
  s_waitcnt lgkmcnt(0)
  s_and_b32 s9, s8, 0xffff
  s_lshr_b32 s8, s8, 16
  s_mul_i32 s9, s4, s9
  s_mul_i32 s8, s5, s8
  v_and_b32 v1, 0x3ff, v0
  v_bfe_u32 v2, v0, 10, 10
  v_add_u32 v1, s9, v1
  v_add_u32 v2, s8, v2
  v_mad_u32_u24 v1, v2, s10, v1
  v_lshlrev_b32 v2, 2, v1""").replace("""  .amdhsa_system_sgpr_workgroup_id_x 1
""", """  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_system_sgpr_workgroup_id_y 1
  .amdhsa_system_vgpr_workitem_id 1
""")


@pytest.mark.parametrize("grid,block", [(100, 64), (1000, 256), (5, 64), (65, 64)])
def test_partial_workgroup_runs_only_the_grid(rig, grid, block):
  """HSA: grid_size need not be a multiple of workgroup_size; the last workgroup is partial (the CP programs
  NUM_THREAD_PARTIAL with PARTIAL_TG_EN). Every work-item of the grid runs once, none past it (oracle: numpy)."""
  sentinel = np.full(0x1000, 0xDEADBEEF, np.uint32)
  rig.vm.write(rig.out.va_addr, sentinel.tobytes())
  rig.submit(rig.dispatch(grid, block))
  assert rig.q.error is None and rig.rptr() == 1, rig.q.error
  want = sentinel.copy()
  want[:grid] = np.arange(grid) + 7
  np.testing.assert_array_equal(rig.vm.array(rig.out.va_addr, "<u4", 0x1000), want)


@pytest.mark.parametrize("grid,block", [((37, 11), (8, 4)), ((5, 3), (8, 4)), ((16, 9), (8, 4)), ((37, 8), (8, 4))])
def test_partial_workgroups_in_two_dimensions(rig, grid, block):
  """The right column, the bottom row and the corner are partial workgroups of their own shapes (work-item ids and
  EXEC follow the partial shape; waves per workgroup shrink with it)."""
  co = load_code_object(assemble_code_object(KERNEL_2D.format(arch=rig.arch), rig.arch), arch=rig.arch)
  rig.vm.write(rig.code.va_addr, co.image)
  kd = rig.code.va_addr + co.kernels["k"].kd_address
  sentinel = np.full(0x1000, 0xDEADBEEF, np.uint32)
  rig.vm.write(rig.out.va_addr, sentinel.tobytes())
  rig.submit(A.dispatch_packet(kd, rig.args.va_addr, (*grid, 1), (*block, 1), dims=2))
  assert rig.q.error is None and rig.rptr() == 1, rig.q.error
  want = sentinel.copy()
  want[:grid[0] * grid[1]] = np.arange(grid[0] * grid[1]) + 7
  np.testing.assert_array_equal(rig.vm.array(rig.out.va_addr, "<u4", 0x1000), want)


@pytest.mark.parametrize("grid,last", [((3, 4, 5), (5, 3, 2)), ((1, 6, 2), (5, 4, 1)), ((7, 1, 3), (8, 4, 1)),
                                       ((4, 4, 1), (8, 4, 2))])
def test_batches_hold_workgroups_of_one_shape(grid, last):
  """run_dispatch's batches (dispatch._run) cover the grid in order, each workgroup with its own shape: `last` along
  a dimension where it is the grid's last workgroup, the full (8, 4, 2) elsewhere."""
  from gputwin.mock.amdgpu.dispatch import _run
  block, n = (8, 4, 2), grid[0] * grid[1] * grid[2]
  shape_of = lambda w: tuple(l if i == g - 1 else b for i, g, b, l in
                             zip((w % grid[0], w // grid[0] % grid[1], w // (grid[0] * grid[1])), grid, block, last))
  w = 0
  while w < n:
    end, shape = _run(w, min(n, w + 5), grid, block, last)
    assert w < end <= min(n, w + 5) and all(shape_of(v) == shape for v in range(w, end))
    assert end == min(n, w + 5) or shape_of(end) != shape   # a run stops only at the batch limit or a new shape
    w = end


def test_ring_wraps(rig):
  """A 1 KiB ring holds 16 packets; 40 packets in batches of 6 wrap it twice; the dispatch ids keep counting."""
  q, d = rig.aql_queue(0x400), rig.data.va_addr
  for b in range(0, 40, 6):
    rig.submit(*[A.pm4_ib_packet(rig.ib(P.write_data(d + 0x600 + 4 * i, i + 1), at=0x2000 + 32 * i))
                 for i in range(b, min(b + 6, 40))], q=q)
  assert q.error is None and rig.rptr(q) == 40
  np.testing.assert_array_equal(rig.vm.array(d + 0x600, "<u4", 40), np.arange(1, 41))
  rig.vm.write_u64(q.wptr_va, 40 + 17)                                                # more than a ring ahead
  rig.c.k.ring_doorbell(q, 40 + 16)
  assert "outside the ring" in q.error


def test_pred_exec_selects_xccs_on_a_pm4_queue():
  """gfx942 (8 XCCs) PM4: each XCC's CP runs the stream; PRED_EXEC's DEVICE_SELECT mask picks the XCCs that run the
  next EXEC_COUNT dwords. SET_SH_REG lands in the selected XCCs' registers; an unselected packet does nothing; an
  unpredicated RELEASE_MEM interrupt comes once per XCC; a packet may not straddle the window's end."""
  r = Rig("gfx942")
  try:
    q, d = r.queue(), r.data.va_addr
    sh = P.set_sh_reg("COMPUTE_USER_DATA_0", 0xAB)
    skipped = P.write_data(d, 1)
    words = P.pred_exec(0b100, len(sh)) + sh + P.pred_exec(0, len(skipped)) + skipped + P.write_data(d + 4, 2)
    rel = P.release_mem(r.page.va_addr + 8 * r.ev, r.ev, P.DATA_SEL_32, P.INT_SEL_INT, r.ev)
    ib = P.pred_exec(0b1, len(rel)) + rel
    r.vm.write(d + 0x1000, np.array(ib, "<u4").tobytes())
    fired, real = [], r.c.k.interrupt
    r.c.k.interrupt = lambda g, c=None: fired.append(c) or real(g, c)
    r.push(q, words + P.indirect_buffer(d + 0x1000, len(ib)))
    assert r.wait(r.ev)[0] == abi.KFD_IOC_WAIT_RESULT_COMPLETE and q.error is None and fired == [r.ev]   # XCC 0 only
    regs = [x.get("COMPUTE_USER_DATA_0") for x in r.gpu.state[q].xregs]
    assert regs == [None, None, 0xAB, None, None, None, None, None]
    assert r.vm.read_u32(d) == 0 and r.vm.read_u32(d + 4) == 2
    r.push(q, r.signal())
    assert fired == [r.ev] * 9                                                         # then one per XCC
    q2 = r.queue()
    _ = r.push(q2, P.pred_exec(1, 2) + P.write_data(d + 8, 3))                         # 5 dwords in a 2-dword window
    assert "crosses the end of a PRED_EXEC window" in q2.error
    q3 = r.queue()
    r.push(q3, P.pred_exec(0b11, 5) + P.dispatch_direct(1, 1, 1, P.DISPATCH_COMPUTE_SHADER_EN))
    assert "DISPATCH_DIRECT under PRED_EXEC for XCCs [0, 1] of 8" in q3.error
    r.vm.write(d + 0x1100, np.array(P.pred_exec(1, 9), "<u4").tobytes())
    q4 = r.queue()
    r.push(q4, P.indirect_buffer(d + 0x1100, 2))                                        # the window outlives the IB
    assert "runs past the end of the indirect buffer" in q4.error
  finally:
    r.c.close()
