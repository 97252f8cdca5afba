"""The virtual NVIDIA GPU behind a MockNV: one host (PBDMA) thread per machine feeding the compute and copy engines.

Like the hardware it is driven by memory only: the runtime writes pushbuffer segments, GPFIFO entries (GP_ENTRY0/1:
segment address, length in dwords) and then GPPut in the channel's USERD page (and rings the usermode doorbell, a
hint here). The thread waits on `k.work` (set by the driver when something may need processing) with a short timeout
and otherwise polls GPPut of every live channel; per channel it fetches entries from GPGet to GPPut through the
channel's address space, decodes the pushbuffer (every SEC_OP of dev_ram.ref: incrementing, non-incrementing,
increment-once, immediate, END_PB_SEGMENT, the subdevice-mask control entries, NOP; method data may continue in the
next segment), and writes GPGet after each entry. Methods below 0x100 are Host methods (gputwin.mock.nvgpu.host),
SET_OBJECT binds a class allocated under the channel to a subchannel, engine methods go to the object bound to their
subchannel (or, unbound, the channel's compute object on subchannels 0-3 and its copy object on 4).

A semaphore acquire that does not hold leaves the channel at that method; it is retried on the next pass while the
other channels go on. Any error (a page fault of the PBDMA, an engine or a shader, a bad GP entry or PB entry, an
unknown method, a bad QMD, an emulator stop) -> `k.fault_channel(ch, reason, va, error)` with the reason naming GPU,
channel, GPFIFO entry, pushbuffer address, method (and for a launch the kernel); the channel is no longer processed.

`attach(k)` plugs it in (idempotent). With `k.sync` true no thread runs: whoever waits calls `poll()`.
"""
from __future__ import annotations

import dataclasses
import threading

import numpy as np

from gputwin.abi import nvpush as NP
from gputwin.abi.nv import NVC361_TIME_0
from gputwin.errors import GPUPageFault, GputwinError
from gputwin.mock.nvgpu.compute import Compute, Programs
from gputwin.mock.nvgpu.copy import Copy
from gputwin.mock.nvgpu.host import Blocked, ChannelFault, host_method

SUBDEVICE_ID = 1          # this GPU's bit in SET_SUBDEVICE_MASK (a single-GPU context)
SW_SUBCHANNELS = range(5, 8)
GP_OPCODE_NAME = {v: k for k, v in NP.GP_OPCODE.items()}


@dataclasses.dataclass(eq=False)
class _Pbdma:
  """A channel's host state (NV_PPBDMA / RAMFC in hardware)."""
  get: int = 0                                 # next GPFIFO entry
  seg: list | None = None                      # [entry, va, words (np.uint32), pos] of the segment being decoded
  ext: int = 0                                 # SET_PB_SEGMENT_EXTENDED_BASE
  pending: list | None = None                  # [header word, PbHeader, addresses, index] while method data follow
  mask: int = 0xFFF                            # subdevice mask (SET/USE_SUBDEVICE_MASK)
  stored: int = 0xFFF
  subc: dict = dataclasses.field(default_factory=dict)     # subchannel -> class id (SET_OBJECT)
  engines: dict = dataclasses.field(default_factory=dict)  # class id -> Compute / Copy
  host: dict = dataclasses.field(default_factory=dict)     # host method registers by name
  blocked: bool = False
  progress: int = 0                            # entries and PB words consumed (a pass that moved it did work)
  where: str = ""


class VirtualNVGPU:
  def __init__(self, k):
    self.k = k
    self.programs = Programs()
    self._chans: list = []
    self._lock = threading.Lock()       # guards _chans / _thread
    self._run = threading.RLock()       # one channel step at a time
    self._thread: threading.Thread | None = None
    self._dead: list = []                # address spaces whose last channel went away
    k.on_channel(self._channel_event)
    for ch in k.channels(): self._channel_event(ch)

  # ------------------------------------------------------------------ scheduling
  def _channel_event(self, ch) -> None:
    """Called by the driver when a channel is created and again when it is freed."""
    with self._lock:
      if not any(c is ch for c in self._chans):
        self._chans.append(ch)
        if not getattr(self.k, "sync", False) and (self._thread is None or not self._thread.is_alive()):
          self._thread = threading.Thread(target=self._loop, name="gputwin-nvgpu", daemon=True)
          self._thread.start()
        return
      self._chans = [c for c in self._chans if c is not ch]
      if not any(c.vm is ch.vm for c in self._chans): self._dead.append(ch.vm)
    if self._run.acquire(blocking=False):   # never wait here: the driver may hold its lock while it tells us
      try: self._reap()
      finally: self._run.release()

  def _reap(self) -> None:
    """Unload the programs of address spaces no live channel uses (under _run: no launch is running)."""
    with self._lock: dead, self._dead = self._dead, []
    for vm in dead: self.programs.drop(vm)

  def _loop(self) -> None:
    idle = 0.0
    while True:
      with self._lock:
        last = not self._chans
        if last: self._thread = None
      if last:
        with self._run: self._reap()
        return
      self.k.work.clear()
      try: worked = self.poll()
      except (LookupError, AttributeError, ValueError): worked = False   # the driver went away under us
      idle = 0.0 if worked else min(0.002, idle + 0.0002)
      if idle: self.k.work.wait(idle)

  def poll(self) -> bool:
    """One pass over every live channel (run until each is idle, blocked or faulted); True if anything retired. The
    usermode pages' PTIMER (TIME_1:TIME_0) is set to the GPU time first (mock: it advances while this thread runs,
    at least every 2 ms, not continuously)."""
    now = self.k.timestamp()
    for g in self.k.gpus:
      page = self.k.doorbell(g)
      if page is not None: page[NVC361_TIME_0:NVC361_TIME_0 + 8] = now.to_bytes(8, "little")
    did = False
    with self._lock: chans = list(self._chans)
    for ch in chans: did |= self.process(ch)
    if self._dead:
      with self._run: self._reap()
    return did

  def idle(self) -> bool:
    """True when every live, healthy channel has consumed its GPFIFO up to GPPut (blocked acquires count as busy)."""
    with self._lock: chans = list(self._chans)
    for ch in chans:
      st = ch.state.get("pbdma")
      if ch.error is None and (st is None or st.seg is not None or st.get != _u32(ch.userd, NP.USERD_GP_PUT)):
        return False
    return True

  # ------------------------------------------------------------------ one channel
  def process(self, ch) -> bool:
    with self._run:
      if ch.error is not None or not any(c is ch for c in self._chans): return False
      if not getattr(ch, "scheduled", True) or getattr(ch, "freed", False): return False   # not on the runlist
      st = ch.state.setdefault("pbdma", _Pbdma())
      before = st.progress
      try:
        self._pbdma(ch, st)
        st.blocked = False
      except Blocked:
        st.blocked = True
      except ChannelFault as e: self._fault(ch, st, str(e), e.va, e.error)
      except GPUPageFault as e: self._fault(ch, st, str(e), e.va, e)
      except GputwinError as e: self._fault(ch, st, str(e), None, e)
      except Exception as e:   # a bug of the model is still this channel's error, not the host's
        self._fault(ch, st, f"internal error {type(e).__name__}: {e}", None, e)
      return st.progress != before

  def _fault(self, ch, st: _Pbdma, msg: str, va: int | None, error: Exception | None) -> None:
    if not any(c is ch for c in self._chans): return
    reason = f"[{ch.gpu.name}] channel {ch.id} (handle {ch.handle:#x}), {st.where or f'GPFIFO entry {st.get}'}: {msg}"
    self.k.fault_channel(ch, reason, va, error if error is not None else ChannelFault(reason, va))

  def _pbdma(self, ch, st: _Pbdma) -> None:
    vm = ch.vm
    while True:
      put = _u32(ch.userd, NP.USERD_GP_PUT)
      if put >= ch.gpfifo_entries:
        st.where = f"GPFIFO entry {st.get}"
        raise ChannelFault(f"GPPut {put} is outside the {ch.gpfifo_entries}-entry GPFIFO (GPPTR error)")
      if st.seg is None:
        if st.get == put: return
        at = ch.gpfifo_va + NP.GP_ENTRY_SIZE * st.get
        st.where = f"GPFIFO entry {st.get} at {at:#x}"
        raw = vm.read_u64(at)
        e = NP.decode_gp_entry(raw)
        if e.length == 0:
          op = GP_OPCODE_NAME.get(e.opcode)
          if op == "SET_PB_SEGMENT_EXTENDED_BASE": st.ext = NP.extended_base(raw)
          elif op not in ("NOP", "GP_CRC", "PB_CRC"):   # CRCs are not checked
            raise ChannelFault(f"GP entry {raw:#018x}: control opcode {op or e.opcode} (GPENTRY error)", at)
          self._next_entry(ch, st)
          continue
        va = st.ext | e.va
        st.where = f"GPFIFO entry {st.get}, pushbuffer segment {va:#x}+{4 * e.length:#x}"
        st.seg = [st.get, va, np.frombuffer(vm.read(va, 4 * e.length), np.uint32), 0]
      self._segment(ch, st)
      self._next_entry(ch, st)

  def _next_entry(self, ch, st: _Pbdma) -> None:
    st.seg, st.progress = None, st.progress + 1
    st.get = (st.get + 1) % ch.gpfifo_entries
    ch.userd[NP.USERD_GP_GET:NP.USERD_GP_GET + 4] = st.get.to_bytes(4, "little")

  def _segment(self, ch, st: _Pbdma) -> None:
    entry, va, words, pos = st.seg
    while pos < len(words):
      w = int(words[pos])
      st.where = f"GPFIFO entry {entry}, pushbuffer {va + 4 * pos:#x}"
      if st.pending is not None:                         # method data
        hw, h, addrs, i = st.pending
        self._method(ch, st, h.subc, addrs[i], w)
        st.pending = None if i + 1 == len(addrs) else [hw, h, addrs, i + 1]
      else:
        h = NP.decode_header(w)
        if h.kind == "END_PB_SEGMENT": pos = len(words) - 1
        elif h.kind == "GRP0_SET_SUB_DEV_MASK": st.mask = h.data
        elif h.kind == "GRP0_STORE_SUB_DEV_MASK": st.stored = h.data
        elif h.kind == "GRP0_USE_SUB_DEV_MASK": st.mask = st.stored
        elif h.kind == "IMMD_DATA_METHOD": self._method(ch, st, h.subc, h.method, h.data)
        elif h.kind in ("INC_METHOD", "NON_INC_METHOD", "ONE_INC"):
          addrs = NP.method_addresses(h)
          if addrs and addrs[-1] >> 2 > 0xFFF:
            raise ChannelFault(f"PB method header {w:#010x}: {h.count} methods from {h.method:#x} wrap the method "
                               f"address (PBENTRY error)", va + 4 * pos)
          if addrs: st.pending = [w, h, addrs, 0]
        elif h.kind != "NOP":
          raise ChannelFault(f"invalid PB entry {w:#010x} ({h.kind}; PBENTRY error)", va + 4 * pos)
      pos += 1
      st.seg[3], st.progress = pos, st.progress + 1

  def _method(self, ch, st: _Pbdma, subc: int, method: int, data: int) -> None:
    if not st.mask & SUBDEVICE_ID: return                 # masked off by SET_SUBDEVICE_MASK
    if method < NP.HOST_METHOD_END and method != 0:
      hcls = NP.CLASSES.get(ch.class_id) or NP.nvclass(NP.HOPPER_CHANNEL_GPFIFO_A)
      name = hcls.name_of(method)
      st.where += f": host method {name or hex(method)} = {data:#x}"
      if name is None: raise ChannelFault(f"host method {method:#x} is not defined for class {ch.class_id:#06x}")
      return host_method(hcls, st.host, name, data, ch.vm, self.k.timestamp)
    if subc in SW_SUBCHANNELS:
      raise ChannelFault(f"software method {method:#x} on subchannel {subc}: no software class is bound")
    if method == 0:                                        # SET_OBJECT: the class must be an object of the channel
      cid = data & 0xFFFF
      st.where += f": SET_OBJECT subchannel {subc} class {cid:#06x}"
      if cid not in ch.engines or cid not in NP.CLASSES:
        raise ChannelFault(f"SET_OBJECT of class {cid:#06x}: no such object on the channel (it has "
                           f"{', '.join(f'{c:#06x}' for c in ch.engines) or 'none'})")
      st.subc[subc] = cid
      return
    cid = st.subc.get(subc) or next((c for c in ch.engines if (c in NP.COPY_CLASSES) == (subc == 4)
                                     and c in NP.CLASSES), None)
    if cid is None: raise ChannelFault(f"method {method:#x} on subchannel {subc}, which has no object")
    cls = NP.nvclass(cid)
    name = cls.name_of(method)
    st.where += f": subchannel {subc} ({cid:#06x}) method {name or hex(method)} = {data:#x}"
    if name is None: raise ChannelFault(f"method {method:#x} is not defined for class {cid:#06x} (illegal method)")
    eng = st.engines.get(cid)
    if eng is None: eng = st.engines[cid] = (Copy if cid in NP.COPY_CLASSES else Compute)(self, ch, cls)
    eng.method(name, data)


def _u32(view: memoryview, off: int) -> int: return int.from_bytes(view[off:off + 4], "little")


def attach(k) -> VirtualNVGPU:
  """Give a MockNV its GPUs' engines (idempotent)."""
  gpu = getattr(k, "nvgpu", None)
  if gpu is None: gpu = k.nvgpu = VirtualNVGPU(k)
  return gpu
