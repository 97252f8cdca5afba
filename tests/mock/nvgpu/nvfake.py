"""A small stand-in for gputwin.mock.nv.MockNV's driver -> GPU interface (the names of /tmp/team/nv.md, "Driver ->
GPU interface"), so the virtual GPU is tested without the RM driver: GPUs, channels with a GPFIFO ring + USERD in a
GPUAddressSpace, `work`, `on_channel`, `fault_channel`, `gpu_error`, `timestamp`. `Chan` also builds pushbuffers
and submits them the way a runtime does (GPFIFO entry, then GPPut in USERD)."""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from gputwin.abi import nvpush as NP
from gputwin.abi.hostmem import HostBuffer
from gputwin.mock.nv.machine import NVChannel  # the driver -> GPU contract itself
from gputwin.mock.vm import BufferObject, GPUAddressSpace


@dataclasses.dataclass(eq=False)
class NVGpu:
  index: int
  arch: str
  name: str
  gpu_id: int



class FakeNV:
  def __init__(self, archs=("sm_90",), sync: bool = False):
    self.gpus = [NVGpu(i, a, f"{a}-{i}", 0x100 * (i + 1)) for i, a in enumerate(archs)]
    self.sync = sync
    self.work = threading.Event()
    self._chans: list[NVChannel] = []
    self._cbs: list = []
    self.faults: list[tuple] = []
    self.errors: dict[int, Exception | None] = {}
    self.next_id = 0

  def channels(self) -> list[NVChannel]: return list(self._chans)
  def on_channel(self, cb) -> None: self._cbs.append(cb)
  def doorbell(self, gpu): return None
  def timestamp(self) -> int: return time.monotonic_ns()
  def gpu_error(self, gpu_index: int, va=None): return self.errors.get(gpu_index)

  def fault_channel(self, ch, reason: str, va, error) -> None:
    ch.error = reason
    self.faults.append((ch, reason, va, error))
    self.errors[ch.gpu.index] = error

  def add(self, ch: NVChannel) -> None:
    self._chans.append(ch)
    for cb in self._cbs: cb(ch)
    self.work.set()

  def free(self, ch: NVChannel) -> None:
    self._chans.remove(ch)
    for cb in self._cbs: cb(ch)


class Chan:
  """A channel with its memory: a 2 MiB scratch BO at `base` holding GPFIFO (entries at base), USERD, pushbuffers
  and data; `alloc` hands out more of it."""

  def __init__(self, k: FakeNV, *, gpu: int = 0, host=NP.HOPPER_CHANNEL_GPFIFO_A, compute=NP.HOPPER_COMPUTE_A,
               copy=NP.HOPPER_DMA_COPY_A, entries: int = 64, vm: GPUAddressSpace | None = None,
               base: int = 0x1000_0000, size: int = 2 << 20):
    self.k, self.g = k, k.gpus[gpu]
    self.vm = vm if vm is not None else GPUAddressSpace(self.g.arch)
    self.host = HostBuffer(size)
    self.bo = BufferObject(1, self.g.gpu_id, base, size, 0, 0, host=self.host)
    assert self.vm.map(base, size, self.bo)
    self.base, self.size, self.entries = base, size, entries
    self.userd_va = base + 8 * entries
    self.next = self.userd_va + NP.USERD_SIZE
    self.put = 0
    engines = {c: 0x5000 + i for i, c in enumerate(x for x in (compute, copy) if x)}
    self.ch = NVChannel(self.g, 0xC0DE0000 + k.next_id, host, k.next_id, self.vm, base, entries,
                        self.vm.view(self.userd_va, NP.USERD_SIZE, "write"), engines, id=k.next_id, scheduled=True)
    k.next_id += 1
    k.add(self.ch)

  def alloc(self, n: int, align: int = 256) -> int:
    va = -(-self.next // align) * align
    self.next = va + n
    assert self.next <= self.base + self.size
    return va

  def close(self) -> None:
    """Free the channel (the driver's on_channel callback) and its memory."""
    if any(c is self.ch for c in self.k.channels()): self.k.free(self.ch)
    for m in self.vm.mappings():
      if m.bo is self.bo or getattr(m.bo, "owner", None) is self:
        self.vm.unmap(m.va)
        m.bo.release()

  def mapping(self, data: bytes, va: int | None = None) -> int:
    """A separate mapping holding `data` from its start (a program image), after the scratch BO; its VA."""
    if va is None:
      va = self.next_bo = getattr(self, "next_bo", self.base + self.size)
      self.next_bo += -(-max(len(data), 1) // 0x10000) * 0x10000
    hb = HostBuffer(max(len(data), 1))
    bo = BufferObject(2, self.g.gpu_id, va, len(data), 0, 0, host=hb)
    bo.owner = self
    assert self.vm.map(va, len(data), bo)
    self.vm.write(va, data)
    return va

  def u32(self, va: int) -> int: return self.vm.read_u32(va)
  def u64(self, va: int) -> int: return self.vm.read_u64(va)
  @property
  def gp_get(self) -> int: return int.from_bytes(self.ch.userd[NP.USERD_GP_GET:NP.USERD_GP_GET + 4], "little")

  def submit(self, words: list[int], *, entry: int | None = None) -> int:
    """Write the words as a pushbuffer segment, one GPFIFO entry (or the raw `entry`), then GPPut; returns the
    segment's VA."""
    va = self.alloc(4 * max(len(words), 1), 4)
    if words: self.vm.write(va, np.array(words, np.uint32).tobytes())
    if entry is None: entry = NP.gp_entry(va, len(words)) if words else NP.gp_control("NOP")
    self.vm.write_u64(self.base + 8 * (self.put % self.entries), entry)
    self.put = (self.put + 1) % self.entries
    self.ch.userd[NP.USERD_GP_PUT:NP.USERD_GP_PUT + 4] = self.put.to_bytes(4, "little")
    self.k.work.set()
    return va
