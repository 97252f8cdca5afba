"""The virtual AMD GPU behind a MockKernel: a compute command processor (PM4 and AQL queues) and SDMA engines.

Like the hardware, it is driven only by memory and doorbells: userspace writes packets into a ring, stores the write
pointer (64-bit, in dwords for PM4, bytes for SDMA and 64-byte packets for AQL, never wrapped) and rings the doorbell;
the engine fetches packets from rptr up to wptr through the GPU's address space, executes them, and advances rptr
after each packet. RELEASE_MEM with an interrupt, SDMA TRAP and an AQL completion signal with an event mailbox raise
the end-of-pipe interrupt that KFD turns into events.

On a GPU with several XCCs every XCC's CP runs the PM4 stream (its own SH registers, its own writes and interrupts;
PRED_EXEC selects XCCs for a window of dwords) and a dispatch is one grid they share. An AQL queue's packets run in
order: kernel dispatches become registers (aql.py), AMD's PM4-IB vendor packets run their indirect buffer, barrier
packets wait on their dependency signals; then the packet's completion signal is decremented.

`attach(kernel)` plugs it in: an `on_doorbell` listener does the work, so in synchronous mode
(`MockKernel(sync=True)`) packets run inside the waiter's WAIT_EVENTS; otherwise one thread per machine polls the
doorbells while user queues exist. A queue blocked on WAIT_REG_MEM / POLL_REGMEM keeps its position and is retried.

Errors are the GPU's, never the host's: an unknown or malformed packet, a wild wptr, a page fault of the CP, the SDMA
engine or a shader puts the queue in the error state (`MockKernel.fault_queue`: the queue is no longer processed,
MEMORY events carry the faulting address; mock: a bad packet reports the packet's own address). rptr stays at the
packet that failed (for a packet inside an indirect buffer: at the INDIRECT_BUFFER packet), as the CP's would.

A per-queue watchdog stops a dispatch that runs more than `wave_budget` wave-instructions per wave it launched (a
runaway kernel) or longer than `lockup_timeout` seconds (a grid too large to finish): that queue faults with the
emulator's watchdog error and the other queues go on. USERPTR pages are checked before the GPU touches them (the
CP and SDMA: the bytes they access, `UserPages`; a dispatch: every USERPTR BO first): pages the user unmapped or
write-protected make the BO invalid and the access faults, as on the kernel's invalidated userptr BO.
"""
from __future__ import annotations
import dataclasses, struct, threading, time
import numpy as np
from gputwin.errors import GPUPageFault, GputwinError, LaunchError
from gputwin.abi import aql as A
from gputwin.abi import pm4 as P
from gputwin.mock.amdgpu import aql, dispatch
from gputwin.mock.amdgpu.dispatch import run_dispatch


def _unit(q) -> int:
  """Bytes one rptr/wptr step counts: SDMA bytes, PM4 dwords, AQL 64-byte packets."""
  return 1 if q.is_sdma else A.PACKET_SIZE if q.is_aql else 4


class QueueError(Exception):
  def __init__(self, msg: str, va: int | None = None):
    super().__init__(msg)
    self.va = va


class Blocked(Exception):
  """A wait packet whose condition is not met yet: the queue stays at this packet."""


@dataclasses.dataclass(eq=False)
class _State:
  xregs: list = dataclasses.field(default_factory=lambda: [{}])   # SH registers of the queue's pipe, one file per XCC
  ib: list | None = None                                 # [va, ndw, pos, ring packet dwords] while inside an IB
  pred: tuple | None = None                              # (XCC mask, dwords left) inside a PRED_EXEC window
  started: int | None = None                             # GPU clock when the current AQL packet began (profiling)
  blocked: bool = False                                  # stopped at a wait packet (or a partly written packet)
  dispatches: int = 0
  instructions: int = 0

  @property
  def regs(self) -> dict: return self.xregs[0]


class UserPages:
  """The GPU VM as the command processor and SDMA engines touch it (the GPUAddressSpace calls they make): bytes that
  lie in a USERPTR BO are checked first (`UserptrBO.check`), so pages the user unmapped or write-protected since the
  BO was made invalidate it and the access is a GPU page fault, not a host access through a dead pointer."""

  def __init__(self, vm):
    self.vm, self.device = vm, vm.device

  def _check(self, va: int, n: int):
    pos, end = va, va + max(n, 1)
    while pos < end:
      m = self.vm.find(pos)
      if m is None: return                        # the access itself faults
      check = getattr(m.bo, "check", None)
      if check is not None: check(pos - m.va, min(end, m.end) - pos)
      pos = m.end

  def find(self, va: int): return self.vm.find(va)
  def read_u32(self, va: int) -> int: return self._check(va, 4) or self.vm.read_u32(va)
  def read_u64(self, va: int) -> int: return self._check(va, 8) or self.vm.read_u64(va)
  def write_u32(self, va: int, v: int): return self._check(va, 4) or self.vm.write_u32(va, v)
  def write_u64(self, va: int, v: int): return self._check(va, 8) or self.vm.write_u64(va, v)
  def read(self, va: int, n: int) -> bytes: return self._check(va, n) or self.vm.read(va, n)
  def write(self, va: int, data): return self._check(va, len(data)) or self.vm.write(va, data)
  def view(self, va: int, n: int, access: str = "read"): return self._check(va, n) or self.vm.view(va, n, access)


class VirtualGPU:
  """The GPU engines of every GPU of one MockKernel (one command-processor thread for the machine)."""

  def __init__(self, kernel):
    self.k = kernel
    self.state: dict = {}
    self._queues: set = set()
    self._lock = threading.Lock()        # guards _queues/_thread (never held while calling into the kernel)
    self._run = threading.RLock()        # one engine step at a time
    self._thread: threading.Thread | None = None
    self.perf: dict[int, dict[int, int]] = {}   # gpu_id -> performance counter register -> value (SQ_INSTS in 0)
    self.wave_budget: int | None = dispatch.WAVE_BUDGET        # watchdog (dispatch.run_dispatch); None: off
    self.lockup_timeout: float | None = dispatch.LOCKUP_TIMEOUT
    self.k.on_doorbell.append(self._bell)
    self.k.on_queue.append(self._queue_event)

  def gpu_clock(self) -> int:
    """The GPU reference clock (100 MHz) the CP and SDMA write: the machine's `clock`, as GET_CLOCK_COUNTERS reports
    it."""
    return self.k.clock() // 10

  # ------------------------------------------------------------------ scheduling
  def _queue_event(self, q, created: bool):
    with self._lock:
      if created:
        self._queues.add(q)
        if not self.k.sync and (self._thread is None or not self._thread.is_alive()):
          self._thread = threading.Thread(target=self._loop, name=f"gputwin-cp-{self.k!r}", daemon=True)
          self._thread.start()
      else:
        self._queues.discard(q)
        self.state.pop(q, None)

  def _loop(self):
    idle = 0.0
    while True:
      with self._lock:
        if not self._queues:
          self._thread = None
          return
      try: worked = bool(self.k.poll_doorbells()) | self._retry()
      except (LookupError, AttributeError): worked = False   # the process went away under us (teardown)
      idle = 0.0 if worked else min(0.002, idle + 0.0001)
      time.sleep(idle or 0.00005)

  def _retry(self) -> bool:
    """Run again the queues stopped at a wait packet (the CP's poll interval)."""
    did = False
    for q in list(self._queues):
      st = self.state.get(q)
      if q.error is None and st is not None and st.blocked: did |= self.process(q)
    return did

  def _bell(self, q, value):
    if q.error is not None or q not in self._queues: return
    self.process(q)
    while self._retry(): pass   # work unblocked by this queue (a WAIT_REG_MEM on another queue's write)

  # ------------------------------------------------------------------ queue execution
  def process(self, q) -> bool:
    """Consume q's ring up to wptr. True when at least one packet retired."""
    with self._run:
      if q.error is not None or q not in self._queues: return False
      st = self.state.get(q)
      if st is None: st = self.state[q] = _State([{} for _ in range(q.gpu.num_xcc)])
      retired, st.blocked = False, False
      try:
        vm = UserPages(self.k.address_space(q.gpu.gpu_id))
        unit = _unit(q)
        ring_dw = q.ring_size // 4
        run = self._sdma if q.is_sdma else self._aql if q.is_aql else self._pm4
        while True:
          rptr, wptr = vm.read_u64(q.rptr_va), vm.read_u64(q.wptr_va)
          if wptr < rptr or (wptr - rptr) * unit > q.ring_size or (wptr * unit) % 4:
            raise QueueError(f"doorbell/wptr {wptr:#x} is outside the ring (rptr {rptr:#x}, ring of "
                             f"{q.ring_size:#x} bytes)", q.ring_base + (wptr * unit) % q.ring_size)
          if rptr == wptr: return retired
          pos, end = rptr * unit // 4, wptr * unit // 4
          fetch = lambda i, n: [vm.read_u32(q.ring_base + 4 * ((i + j) % ring_dw)) for j in range(n)]
          n = run(q, st, vm, fetch, pos, end)
          vm.write_u64(q.rptr_va, rptr + n * 4 // unit)
          retired = True
      except Blocked:
        st.blocked = True
        return retired
      except QueueError as e:
        self._fault(q, st, str(e), e.va)
      except GPUPageFault as e:
        self._fault(q, st, str(e), e.va, e)
      except GputwinError as e:            # the emulator stopped a wave (trap, illegal instruction ...)
        self._fault(q, st, str(e), None, e)
      except Exception as e:               # a bug of the model is still this queue's error, not the host's
        self._fault(q, st, f"internal error {type(e).__name__}: {e}", None)
      return retired

  def _fault(self, q, st, msg: str, va: int | None, error: Exception | None = None):
    if q not in self._queues: return   # destroyed while we looked at it: nothing to report
    try: rptr = UserPages(self.k.address_space(q.gpu.gpu_id)).read_u64(q.rptr_va)
    except (GPUPageFault, LookupError): rptr = -1
    kind = "SDMA" if q.is_sdma else "AQL" if q.is_aql else "compute"
    finder = getattr(self.k, "userptr_at", None)
    bo = finder(q.gpu.gpu_id, va) if finder is not None and va is not None else None
    if bo is not None and not bo.valid and bo.pages is not None:
      msg += f" (an invalidated userptr BO: its user pages at {bo.pages.user:#x} are not mapped readable and writable)"
    where = f"ring offset {(rptr * _unit(q)) % q.ring_size:#x}" if rptr >= 0 else "ring"
    if q.is_aql and rptr >= 0: where = f"packet {rptr} ({where})"
    if st.ib: where += f", indirect buffer {st.ib[0]:#x} offset {4 * st.ib[2]:#x}"
    self.k.fault_queue(q, f"[{q.gpu.name}] {kind} queue {q.queue_id}, {where}: {msg}",
                       va if va is not None else q.ring_base, error)

  # ------------------------------------------------------------------ PM4
  def _pm4(self, q, st, vm, fetch, pos, end) -> int:
    """Execute the packet at dword pos (or resume the IB it started); returns the ring dwords it occupies."""
    if st.ib is None:
      at = q.ring_base + 4 * (pos % (q.ring_size // 4))
      h = fetch(pos, 1)[0]
      typ = h >> 30
      if typ == 2: return 1                                      # type-2 filler
      if typ != 3: raise QueueError(f"PM4 type-{typ} packet header {h:#010x} (only type-3 packets on a compute "
                                    f"queue)", at)
      cnt = (h >> 16) & 0x3FFF
      n = 0 if cnt == 0x3FFF else cnt + 1
      if 1 + n > q.ring_size // 4: raise QueueError(f"PM4 header {h:#010x}: {n} body dwords exceed the ring", at)
      if pos + 1 + n > end: raise Blocked()                      # the rest of the packet is not committed yet
      op, body = (h >> 8) & 0xFF, fetch(pos + 1, n)
      if op != P.INDIRECT_BUFFER:
        self._pm4_exec(q, st, vm, op, body, at)
        return 1 + n
      if st.pred is not None: raise QueueError("INDIRECT_BUFFER inside a PRED_EXEC window (not modelled)", at)
      st.ib = self._ib_start(body, 1 + n, at)
    return self._ib(q, st, vm)

  @staticmethod
  def _ib_start(body: list[int], ringlen: int, at: int) -> list:
    if len(body) < 3 or not body[2] & P.IB_VALID: raise QueueError("INDIRECT_BUFFER without a valid size", at)
    return [(body[1] << 32) | (body[0] & ~3), body[2] & 0xFFFFF, 0, ringlen]

  def _ib(self, q, st, vm) -> int:
    """Run (or resume) the indirect buffer in st.ib to its end; returns the ring dwords of the packet that called it."""
    va, ndw, ip, ringlen = st.ib
    while ip < ndw:
      h = vm.read_u32(va + 4 * ip)
      typ, cnt, op = h >> 30, (h >> 16) & 0x3FFF, (h >> 8) & 0xFF
      if typ == 2:
        ip += 1
        continue
      n = 0 if cnt == 0x3FFF else cnt + 1
      if typ != 3 or ip + 1 + n > ndw:
        raise QueueError(f"malformed PM4 header {h:#010x} in indirect buffer at {va + 4 * ip:#x}", va + 4 * ip)
      if op == P.INDIRECT_BUFFER: raise QueueError("chained INDIRECT_BUFFER is not supported", va + 4 * ip)
      body = np.frombuffer(vm.read(va + 4 * ip + 4, 4 * n), "<u4").tolist() if n else []
      self._pm4_exec(q, st, vm, op, body, va + 4 * ip)
      ip = st.ib[2] = ip + 1 + n
    if st.pred is not None:
      st.pred = None
      raise QueueError(f"a PRED_EXEC window runs past the end of the indirect buffer at {va:#x}", va + 4 * ndw)
    st.ib = None
    return ringlen

  def _pm4_exec(self, q, st, vm, op: int, b: list[int], at: int):
    """One packet on every XCC of the queue that executes it: all of them, or those a PRED_EXEC window selects.
    Each XCC's CP runs the stream with its own SH registers (SET_SH_REG writes the selected XCCs' files) and its own
    memory writes and interrupts; a DISPATCH_DIRECT is one grid the XCCs share."""
    nx, pred = q.gpu.num_xcc, st.pred
    xccs = list(range(nx))
    if pred is not None:
      left = pred[1] - 1 - len(b)
      if op == P.PRED_EXEC: raise QueueError("PRED_EXEC inside another PRED_EXEC's window (not modelled)", at)
      if left < 0: raise QueueError(f"{P.PM4_NAMES.get(op, hex(op))} packet crosses the end of a PRED_EXEC window "
                                    f"({pred[1]} dwords left)", at)
      xccs, pred = [x for x in xccs if pred[0] >> x & 1], (pred[0], left) if left else None
    elif op == P.PRED_EXEC:
      if not b: raise QueueError("PRED_EXEC packet with 0 body dwords (needs 1)", at)
      st.pred = (b[0] >> 24, b[0] & 0x3FFF) if b[0] & 0x3FFF else None   # DEVICE_SELECT (XCC mask), EXEC_COUNT
      return
    if op == P.DISPATCH_DIRECT and xccs and len(xccs) != nx:
      raise QueueError(f"DISPATCH_DIRECT under PRED_EXEC for XCCs {xccs} of {nx} (a dispatch on part of the XCCs "
                       f"runs only their share of the grid: not modelled)", at)
    try:
      for x in xccs[:1] if op == P.DISPATCH_DIRECT else xccs: self._pm4_op(q, st, vm, op, b, at, st.xregs[x])
    except (QueueError, Blocked, GPUPageFault, GputwinError): raise
    except Exception as e:   # a bug of the model: still this packet's error
      raise QueueError(f"{P.PM4_NAMES.get(op, hex(op))} packet: internal error {type(e).__name__}: {e}", at) from None
    st.pred = pred   # the window moves on only once the packet has run (a blocked wait is retried inside it)

  def _dispatch(self, q, st, vm, regs: dict, grid: tuple[int, int, int], what: str, at: int):
    """Run one grid from dispatch registers on the emulator (DISPATCH_DIRECT and AQL kernel dispatch packets)."""
    gpu = q.gpu
    st.dispatches += 1
    revalidate = getattr(self.k, "revalidate_userptrs", None)
    if revalidate is not None: revalidate(gpu.gpu_id)   # the shader may touch any of them
    try:
      n = run_dispatch(vm.vm, gpu.name, regs, grid,
                       f"dispatch {st.dispatches} (PGM {regs.get('COMPUTE_PGM_LO', 0) << 8:#x})",
                       self.wave_budget, self.lockup_timeout)
    except LaunchError as e: raise QueueError(f"{what}: {e}", at) from None
    st.instructions += n
    perf = self.perf.setdefault(gpu.gpu_id, {})
    perf[P.SQ_PERFCOUNTER0_LO] = perf.get(P.SQ_PERFCOUNTER0_LO, 0) + n

  def _pm4_op(self, q, st, vm, op: int, b: list[int], at: int, regs: dict):
    gpu = q.gpu
    need = {P.SET_SH_REG: 1, P.DISPATCH_DIRECT: 4, P.WRITE_DATA: 3, P.WAIT_REG_MEM: 6, P.RELEASE_MEM: 7,
            P.COPY_DATA: 5}.get(op, 0)
    if len(b) < need:
      raise QueueError(f"{P.PM4_NAMES.get(op, hex(op))} packet with {len(b)} body dwords (needs {need})", at)
    if op in (P.NOP, P.ACQUIRE_MEM, P.EVENT_WRITE): return   # caches are coherent here; nothing to flush
    if op == P.SET_SH_REG:
      for i, v in enumerate(b[1:]):
        off = (b[0] & 0xFFFF) + i
        regs[P.REG_NAME.get(off, f"SH_{off:#x}")] = v
    elif op == P.DISPATCH_DIRECT:
      regs["COMPUTE_DISPATCH_INITIATOR"] = b[3]
      self._dispatch(q, st, vm, regs, (max(b[0], 1), max(b[1], 1), max(b[2], 1)), "DISPATCH_DIRECT", at)
    elif op == P.COPY_DATA:
      src_sel, dst_sel, wide = b[0] & 0xF, (b[0] >> 8) & 0xF, b[0] & P.COPY_COUNT_64
      src = (b[2] << 32) | b[1]
      if src_sel == P.COPY_SRC_PERFCOUNTERS: v = self.perf.get(gpu.gpu_id, {}).get(b[1] & 0x3FFFF, 0)
      elif src_sel == P.COPY_SRC_IMMEDIATE: v = src
      elif src_sel == P.COPY_SRC_GPU_CLOCK: v = self.gpu_clock()
      elif src_sel == P.COPY_SRC_MEMORY: v = vm.read_u64(src) if wide else vm.read_u32(src)
      else: raise QueueError(f"COPY_DATA source select {src_sel} is not modelled", at)
      if dst_sel not in (2, 5): raise QueueError(f"COPY_DATA destination select {dst_sel} is not modelled", at)
      va = (b[4] << 32) | b[3]
      if wide: vm.write_u64(va, v & (2**64 - 1))
      else: vm.write_u32(va, v & 0xFFFFFFFF)
    elif op == P.WRITE_DATA:
      if (b[0] >> 8) & 0xF not in (1, 2, 5): return          # register / GDS destinations are not modelled
      va = (b[2] << 32) | b[1]
      if b[0] & (1 << 16): vm.write_u32(va, b[-1])            # WR_ONE_ADDR: every dword to the same address
      else: vm.write(va, np.array(b[3:], "<u4").tobytes())
    elif op == P.WAIT_REG_MEM:
      if not (b[0] >> 4) & 3: return                           # register space: no registers to poll here
      va, fn = (b[2] << 32) | (b[1] & ~3), b[0] & 7
      if fn not in P.COMPARE: raise QueueError(f"WAIT_REG_MEM compare function {fn} is reserved", at)
      if not P.COMPARE[fn](vm.read_u32(va) & b[4], b[3] & b[4]): raise Blocked()
    elif op == P.RELEASE_MEM:
      data_sel, int_sel = (b[1] >> 29) & 7, (b[1] >> 24) & 7
      va, data = (b[3] << 32) | b[2], (b[5] << 32) | b[4]
      if data_sel == P.DATA_SEL_32: vm.write_u32(va, data)
      elif data_sel == P.DATA_SEL_64: vm.write_u64(va, data)
      elif data_sel in (P.DATA_SEL_GPU_CLOCK, P.DATA_SEL_SYS_CLOCK):
        vm.write_u64(va, self.gpu_clock() if data_sel == P.DATA_SEL_GPU_CLOCK else self.k.clock())
      if int_sel in (P.INT_SEL_INT, P.INT_SEL_INT_AFTER_WRITE): self.k.interrupt(gpu.gpu_id, b[6])
    else:
      raise QueueError(f"unknown PM4 opcode {op:#04x}", at)

  # ------------------------------------------------------------------ AQL
  def _aql(self, q, st, vm, fetch, pos, end) -> int:
    """Execute the AQL packet in the 64-byte slot at dword pos (or resume the PM4 IB it started); returns 16. Every
    packet completes before the next starts (so the barrier bit always holds); then its completion signal, if any,
    is decremented and, when the signal has an event mailbox, the event id is written there and interrupts KFD."""
    at = q.ring_base + 4 * (pos % (q.ring_size // 4))
    raw = vm.read(at, A.PACKET_SIZE)
    typ, index = raw[0], pos * 4 // A.PACKET_SIZE
    if st.ib is None:
      if typ == A.INVALID: raise Blocked()   # not published yet: the packet processor waits for a valid header
      if st.started is None: st.started = self.gpu_clock()
      if typ == A.KERNEL_DISPATCH:
        try:
          regs, grid = aql.dispatch_registers(vm, q.gpu.name, q.gpu.props["lds_size_in_kb"] << 10, raw, at, index,
                                              aql.queue_base(vm, q.rptr_va))
        except LaunchError as e: raise QueueError(str(e), at) from None
        if 0 not in grid: self._dispatch(q, st, vm, regs, grid, f"kernel dispatch packet {index}", at)
      elif typ in (A.BARRIER_AND, A.BARRIER_OR):
        deps = [d for d in struct.unpack_from("<5Q", raw, A.BARRIER_DEP_SIGNALS) if d]
        done = [vm.read_u64(d + A.SIGNAL_VALUE) == 0 for d in deps]
        if deps and not (all(done) if typ == A.BARRIER_AND else any(done)): raise Blocked()
      elif typ == A.VENDOR_SPECIFIC:
        dw = struct.unpack("<16I", raw)
        if dw[0] >> 16 != A.AMD_AQL_FORMAT_PM4_IB:
          raise QueueError(f"vendor-specific packet {index} with format {dw[0] >> 16} (the CP knows "
                           f"AMD_AQL_FORMAT_PM4_IB = {A.AMD_AQL_FORMAT_PM4_IB})", at)
        h = dw[1]
        if h >> 30 != 3 or (h >> 8) & 0xFF != P.INDIRECT_BUFFER or (h >> 16) & 0x3FFF != 2 or \
           dw[5] != A.PM4_IB_DW_COUNT_REMAIN:
          raise QueueError(f"PM4_IB packet {index}: command {h:#010x} is not a 4-dword INDIRECT_BUFFER or "
                           f"dw_count_remain {dw[5]} is not {A.PM4_IB_DW_COUNT_REMAIN}", at)
        st.ib = self._ib_start(list(dw[2:5]), 16, at)
      else:
        raise QueueError(f"AQL packet {index} of type {A.TYPE_NAMES.get(typ, typ)} (header {raw[0] | raw[1] << 8:#06x}"
                         f"): not a packet type the CP processes", at)
    if st.ib is not None: self._ib(q, st, vm)
    self._aql_complete(q, st, vm, int.from_bytes(raw[A.COMPLETION_SIGNAL:], "little"))
    return A.PACKET_SIZE // 4

  def _aql_complete(self, q, st, vm, signal: int):
    started, st.started = st.started, None
    if not signal: return
    queue = aql.queue_base(vm, q.rptr_va)
    if vm.read_u32(queue + A.QUEUE_PROPERTIES) & A.AMD_QUEUE_PROPERTIES_ENABLE_PROFILING:
      vm.write_u64(signal + A.SIGNAL_START_TS, started or self.gpu_clock())
      vm.write_u64(signal + A.SIGNAL_END_TS, self.gpu_clock())
    vm.write_u64(signal + A.SIGNAL_VALUE, (vm.read_u64(signal + A.SIGNAL_VALUE) - 1) & (2**64 - 1))
    mailbox = vm.read_u64(signal + A.SIGNAL_EVENT_MAILBOX_PTR)
    if mailbox:
      event = vm.read_u32(signal + A.SIGNAL_EVENT_ID)
      vm.write_u32(mailbox, event)
      self.k.interrupt(q.gpu.gpu_id, event)

  # ------------------------------------------------------------------ SDMA
  def _sdma(self, q, st, vm, fetch, pos, end) -> int:
    at = q.ring_base + 4 * (pos % (q.ring_size // 4))
    h = fetch(pos, 1)[0]
    try: return self._sdma_op(q, vm, fetch, pos, end, at, h)
    except (QueueError, Blocked, GPUPageFault, GputwinError): raise
    except Exception as e:   # a bug of the model: still this packet's error
      raise QueueError(f"SDMA packet {h:#010x}: internal error {type(e).__name__}: {e}", at) from None

  def _sdma_op(self, q, vm, fetch, pos, end, at, h) -> int:
    op, sub = h & 0xFF, (h >> 8) & 0xFF
    n = ((h >> 16) & 0x3FFF) if op == P.SDMA_OP_NOP else P.SDMA_SIZE.get(op)
    if n is None: raise QueueError(f"unknown SDMA opcode {op} (header {h:#010x})", at)
    if pos + 1 + n > end: raise Blocked()
    b = fetch(pos + 1, n)
    if op == P.SDMA_OP_COPY:
      if sub != P.SDMA_SUBOP_COPY_LINEAR: raise QueueError(f"SDMA COPY sub-op {sub} is not modelled", at)
      count = (b[0] & (P.sdma_copy_max(q.gpu.name) - 1)) + 1
      dst, src = (b[5] << 32) | b[4], (b[3] << 32) | b[2]
      try: vm.view(dst, count, "write")[:] = vm.view(src, count)  # both inside one mapping: one memcpy
      except GPUPageFault: vm.write(dst, vm.read(src, count))      # spans mappings, or faults where it would
    elif op == P.SDMA_OP_FENCE: vm.write_u32((b[1] << 32) | b[0], b[2])
    elif op == P.SDMA_OP_TRAP: self.k.interrupt(q.gpu.gpu_id, b[0] & 0x0FFFFFFF)
    elif op == P.SDMA_OP_TIMESTAMP: vm.write_u64((b[1] << 32) | b[0], self.gpu_clock())
    elif op == P.SDMA_OP_CONST_FILL:
      count, size = (b[3] & (P.sdma_copy_max(q.gpu.name) - 1)) + 1, 1 << ((h >> 30) & 3)
      dst, pat = (b[1] << 32) | b[0], (b[2] & ((1 << 8 * size) - 1)).to_bytes(size, "little")
      try: dv = vm.view(dst, count // size * size, "write")       # inside one mapping: filled in place
      except GPUPageFault: vm.write(dst, pat * (count // size))   # spans mappings, or faults where it would
      else: np.frombuffer(dv, f"<u{size}" if size > 1 else np.uint8)[:] = int.from_bytes(pat, "little")
    elif op == P.SDMA_OP_POLL_REGMEM:
      fn = (h >> 28) & 7
      if fn not in P.COMPARE: raise QueueError(f"SDMA POLL_REGMEM compare function {fn} is reserved", at)
      if h >> 31 and not P.COMPARE[fn](vm.read_u32((b[1] << 32) | b[0]) & b[3], b[2] & b[3]): raise Blocked()
    return 1 + n


def attach(kernel) -> VirtualGPU:
  """Give a MockKernel its GPUs' engines (idempotent)."""
  gpu = getattr(kernel, "hw", None)
  if gpu is None: gpu = kernel.hw = VirtualGPU(kernel)
  return gpu
