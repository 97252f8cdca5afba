"""gputwin's AMD HCQ runtime: what a userspace driver does on /dev/kfd, and nothing the kernel seam does not offer.

    dev = gputwin.runtime.open("mock:gfx1100")          # or "amd", "amd:1"
    buf = dev.alloc(4096); buf.copyin(np.arange(1024, dtype=np.float32))
    prg = dev.load("k.co"); prg("saxpy", buf, x, 2.0, 1024, grid=4, block=256); dev.synchronize()
    dev.launch("k.co", "saxpy", grid=4, block=256, args=[out, x, y, 2.0, n])   # gputwin.emu.launch's contract

Flow: the sysfs topology names the GPUs (`devices()`); `Device` opens /dev/kfd (one `_Process` per kernel, shared by
the GPUs of a machine) and the GPU's render node, ACQUIRE_VM, and creates a compute queue (PM4 ring + EOP + CWSR)
and an SDMA queue. Memory is ALLOC_MEMORY_OF_GPU at a VA we choose, MAP_MEMORY_TO_GPU, mmap of the render node.
Work is PM4/SDMA packets written into the ring, wptr stored, doorbell rung. Each queue owns a timeline: a 64-bit
value in memory written by RELEASE_MEM (SDMA: FENCE) after the work, then an event mailbox write + interrupt that
KFD turns into the queue's event, which WAIT_EVENTS sleeps on. A GPU fault arrives as the process's MEMORY event;
the queue it belongs to raises `QueueFault` naming device, queue, ring offset and the submission: the queue the
fault report names (the mock's, like the interrupt's doorbell id), else (a kernel that does not say) the waited-on
queue that stopped making progress. A wait that runs out of time raises `QueueTimeout` (a QueueFault).
"""
from __future__ import annotations
import ctypes, dataclasses, threading, time
from pathlib import Path
import numpy as np
from gputwin.abi import kfd as abi
from gputwin.abi import pm4 as P
from gputwin.errors import GPUFault, GputwinError, KernelDriverError, LaunchError
from gputwin.isa.codeobj import CodeObject, load_code_object
from gputwin.isa.kernargs import LaunchStats, pack, read_code, segment_size, three
from gputwin.runtime.kernel import Kernel, Shared, kernel_for, parse_device

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"
PROT_RW, MAP_SHARED = 0x3, 0x01
PAGE = 4096
DOORBELL_SLICE = 8192           # kfd_doorbell_process_slice on SOC15: 1024 64-bit doorbells
GPU_CLOCK_HZ = 100_000_000      # the 100 MHz reference clock RELEASE_MEM/SDMA timestamps count (gfx9+)
VA_BASE = 0x1000_0000           # our GPU VA window (below 4 GiB: the emulator's RDNA3 flat ADDR is 32-bit)
GTT = abi.KFD_IOC_ALLOC_MEM_FLAGS_GTT | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
VRAM = abi.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | abi.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC


class QueueFault(GPUFault):
  """A queue the GPU stopped (page fault, trap, bad packet): names device, queue, ring offset, submission and address;
  when the driver reports the GPU's own account (`error`: the mock's emulator error), also the kernel launched there,
  the wave, PC (a GPU VA), instruction, access and size, as gputwin.emu's EmuFault / EmuTrap name them."""

  def __init__(self, msg: str, device: str = "", queue: int = -1, offset: int = -1, va: int | None = None,
               kernel: str = "", error: Exception | None = None):
    super().__init__(msg)
    self.device, self.queue, self.offset, self.va, self.kernel, self.error = device, queue, offset, va, kernel, error
    self.pc, self.inst, self.wave = (getattr(error, k, d) for k, d in (("pc", -1), ("inst", ""), ("wave", -1)))
    self.access, self.size = getattr(error, "access", ""), getattr(error, "size", 0)
    self.arch = getattr(error, "arch", "")


class QueueTimeout(QueueFault, TimeoutError):
  """A wait on a queue's timeline that ran out of time: names device, queue and the timeline values. The queue is not
  marked dead (the GPU may still be working on it). Also a TimeoutError."""


def parse_properties(text: str) -> dict[str, int]:
  return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line.strip())}
def gfx_name(version: int) -> str: return f"gfx{version // 10000}{(version // 100) % 100:x}{version % 100:x}"


@dataclasses.dataclass(frozen=True)
class GPUInfo:
  """One GPU node of the topology."""
  node: int
  gpu_id: int
  arch: str
  name: str
  props: dict = dataclasses.field(repr=False)


def devices(k: Kernel) -> list[GPUInfo]:
  """The GPU nodes of a machine in node order (CPU nodes have simd_count 0), read from sysfs through the seam."""
  out = []
  for n in sorted(k.listdir(f"{TOPOLOGY}/nodes"), key=int):
    p = parse_properties(k.read_text(f"{TOPOLOGY}/nodes/{n}/properties"))
    gid = int(k.read_text(f"{TOPOLOGY}/nodes/{n}/gpu_id").strip() or 0)
    if p.get("simd_count") and gid:
      out.append(GPUInfo(int(n), gid, gfx_name(p["gfx_target_version"]),
                         k.read_text(f"{TOPOLOGY}/nodes/{n}/name").strip(), p))
  return out


def _args(name: str, **fields):
  return abi.IOCTL_BY_NR[abi.IOC_NR(abi.IOCTL_NUMBERS[name])][3](**fields)


class _Process(Shared):
  """The kfd_process of this process on one machine: the /dev/kfd fd, our GPU VA allocator, the signal-event page
  (mapped on every GPU that joins) and the MEMORY event that reports GPU faults."""

  def __init__(self, k: Kernel):
    super().__init__(k)
    self.lock = threading.RLock()
    self.kfd = k.open("/dev/kfd")
    v = self.ioctl("GET_VERSION")
    if (v.major_version, v.minor_version) < (1, 14):
      raise KernelDriverError(f"KFD ioctl API {v.major_version}.{v.minor_version}; gputwin needs 1.14 or newer")
    self.next_va, self.free_vas = VA_BASE, {}
    self.event_page: Buffer | None = None
    self.mem_event = -1
    self.faults: list[list] = []   # [gpu_id, va, queue that claimed it] per GPU memory fault reported
    self.renders: dict[int, list] = {}   # gpu_id -> [render fd, users]: one VM per GPU and process (ACQUIRE_VM)

  def ioctl(self, name: str, **fields):
    a = _args(name, **fields)
    self.k.ioctl(self.kfd, abi.IOCTL_NUMBERS[name], a)
    return a

  def render(self, gpu: GPUInfo) -> int:
    """The GPU's render node, opened and bound with ACQUIRE_VM once per process (a second DRM file is EBUSY)."""
    with self.lock:
      r = self.renders.get(gpu.gpu_id)
      if r is None:
        fd = self.k.open(f"/dev/dri/renderD{gpu.props['drm_render_minor']}")
        try: self.ioctl("ACQUIRE_VM", drm_fd=fd, gpu_id=gpu.gpu_id)
        except OSError:
          self.k.close(fd)
          raise
        r = self.renders[gpu.gpu_id] = [fd, 0]
      r[1] += 1
      return r[0]

  def unrender(self, gpu_id: int):
    with self.lock:
      r = self.renders[gpu_id]
      r[1] -= 1
      if not r[1]:
        del self.renders[gpu_id]
        self.k.close(r[0])

  def alloc_va(self, size: int) -> int:
    with self.lock:
      size = (size + 0xFFFF) & ~0xFFFF
      lst = self.free_vas.get(size)
      if lst: return lst.pop()
      va, self.next_va = self.next_va, self.next_va + size + 0x10000   # a guard gap: overruns fault
      return va

  def free_va(self, va: int, size: int):
    with self.lock: self.free_vas.setdefault((size + 0xFFFF) & ~0xFFFF, []).append(va)

  def join(self, dev: "Device"):
    """First GPU: allocate the event page and the MEMORY event; every GPU: map the page so RELEASE_MEM reaches it."""
    with self.lock:
      if self.event_page is None:
        self.event_page = dev._alloc(abi.KFD_SIGNAL_EVENT_LIMIT * 8, GTT)
        self.mem_event = self.ioctl("CREATE_EVENT", event_page_offset=self.event_page.handle,
                                    event_type=abi.KFD_IOC_EVENT_MEMORY, auto_reset=1).event_id
      else: self.event_page.map_to(dev)

  def close(self):
    self.ioctl("DESTROY_EVENT", event_id=self.mem_event)
    self.k.munmap(self.event_page.cpu, self.event_page.size)   # the kernel frees the event page (EPERM before) at close
    self.k.close(self.kfd)
    self.kfd = None

  def wait(self, event_ids: list[int], timeout_ms: int) -> list[abi.kfd_event_data]:
    evs = (abi.kfd_event_data * len(event_ids))()
    for e, i in zip(evs, event_ids): e.event_id = i
    self.ioctl("WAIT_EVENTS", events_ptr=ctypes.addressof(evs), num_events=len(evs), timeout=timeout_ms)
    for e in evs:
      if e.event_id == self.mem_event and e.memory_exception_data.gpu_id:
        f = [e.memory_exception_data.gpu_id, e.memory_exception_data.va, None]   # None: no queue claimed it yet
        with self.lock:
          if not any(g[:2] == f[:2] and g[2] is None for g in self.faults): self.faults.append(f)
    return list(evs)


class Buffer:
  """GPU memory: `va` on the GPU(s), `cpu` its CPU mapping (0 when not host-visible)."""

  def __init__(self, owner: "Device", va: int, size: int, handle: int, cpu: int, flags: int):
    self.owner, self.va, self.size, self.handle, self.cpu, self.flags = owner, va, size, handle, cpu, flags
    self.peers: set[int] = {owner.gpu_id}

  def __repr__(self): return f"Buffer({self.owner.arch}, va={self.va:#x}, size={self.size:#x})"

  def view(self, dtype=np.uint8, count: int | None = None, offset: int = 0) -> np.ndarray:
    """A numpy array over the CPU mapping (zero copy)."""
    if not self.cpu: raise GputwinError(f"{self} has no CPU mapping")
    dt = np.dtype(dtype)
    count = (self.size - offset) // dt.itemsize if count is None else count
    if offset + count * dt.itemsize > self.size: raise GputwinError(f"{self}: view past the end")
    return np.frombuffer((ctypes.c_char * (count * dt.itemsize)).from_address(self.cpu + offset), dt)

  def copyin(self, a: np.ndarray, offset: int = 0):
    """CPU copy into the buffer (memcpy through the render-node mapping)."""
    a = np.ascontiguousarray(a)
    if offset + a.nbytes > self.size: raise GputwinError(f"{self}: {a.nbytes} bytes at {offset} do not fit")
    ctypes.memmove(self.cpu + offset, a.ctypes.data, a.nbytes)

  def copyout(self, a: np.ndarray, offset: int = 0) -> np.ndarray:
    if offset + a.nbytes > self.size: raise GputwinError(f"{self}: {a.nbytes} bytes at {offset} exceed it")
    src = self.view(np.uint8, a.nbytes, offset)
    if a.flags.c_contiguous: a.reshape(-1).view(np.uint8)[:] = src
    else: a[...] = src.view(a.dtype).reshape(a.shape)
    return a

  def map_to(self, dev: "Device"):
    """Map on another GPU of the same machine (peer access, e.g. the destination of a cross-device SDMA copy)."""
    if dev.gpu_id in self.peers: return
    ids = (ctypes.c_uint32 * 1)(dev.gpu_id)
    self.owner.proc.ioctl("MAP_MEMORY_TO_GPU", handle=self.handle, device_ids_array_ptr=ctypes.addressof(ids),
                          n_devices=1)
    self.peers.add(dev.gpu_id)


class Signal:
  """A timeline: a 64-bit value in GPU-visible memory plus the KFD event its writer interrupts."""

  def __init__(self, dev: "Device", mem: Buffer, offset: int):
    self.dev, self.mem, self.offset = dev, mem, offset
    e = dev.proc.ioctl("CREATE_EVENT", event_type=abi.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
    self.event_id, self.slot_va = e.event_id, dev.proc.event_page.va + 8 * e.event_id
    self.va = mem.va + offset
    self._value = mem.view(np.uint64, 1, offset)

  @property
  def value(self) -> int: return int(self._value[0])


class Queue:
  """A user queue: ring, rptr/wptr, doorbell, timeline. `kind` "compute" (PM4) or "sdma"."""

  def __init__(self, dev: "Device", kind: str, ring_size: int = 1 << 16):
    self.dev, self.kind, self.sdma = dev, kind, kind == "sdma"
    self.lock = threading.RLock()
    self.ring = dev._alloc(ring_size, GTT)
    self.ptrs = dev._alloc(PAGE, GTT)            # rptr @0, wptr @8, timeline @64, timestamps from @128
    self.rptr, self.wptr = self.ptrs.view(np.uint64, 1, 0), self.ptrs.view(np.uint64, 1, 8)
    self.words = self.ring.view(np.uint32)
    self.extra = []
    props, f = dev.props, {}
    if not self.sdma:
      eop = dev._alloc(PAGE, VRAM)
      cus = props["simd_count"] // props["simd_per_cu"] // props["num_xcc"]
      waves = cus * 32 if props["gfx_target_version"] >= 100000 else \
        min(cus * 40, props["array_count"] // props["num_xcc"] // props["simd_arrays_per_engine"] * 512)
      debug = (waves * 32 + 63) & ~63               # DEBUGGER_BYTES_PER_WAVE, aligned
      cwsr = dev._alloc((((props["cwsr_size"] + debug) * props["num_xcc"]) + PAGE - 1) & ~(PAGE - 1), VRAM, cpu=False)
      self.extra = [eop, cwsr]
      f = dict(eop_buffer_address=eop.va, eop_buffer_size=PAGE, ctx_save_restore_address=cwsr.va,
               ctx_save_restore_size=props["cwsr_size"], ctl_stack_size=props["ctl_stack_size"])
    q = dev.proc.ioctl("CREATE_QUEUE", ring_base_address=self.ring.va, ring_size=ring_size, gpu_id=dev.gpu_id,
                       queue_type=abi.KFD_IOC_QUEUE_TYPE_SDMA if self.sdma else abi.KFD_IOC_QUEUE_TYPE_COMPUTE,
                       queue_percentage=100, queue_priority=7, read_pointer_address=self.ptrs.va,
                       write_pointer_address=self.ptrs.va + 8, **f)
    self.queue_id = q.queue_id
    self.doorbell = dev._doorbells(q.doorbell_offset).view(np.uint64, 1, q.doorbell_offset & (DOORBELL_SLICE - 1))
    self.signal = Signal(dev, self.ptrs, 64)
    with dev.proc.lock: self.first_fault = len(dev.proc.faults)   # faults reported before it was created are not its
    self.timeline = 0
    self.submissions: dict[int, tuple] = {}    # ring dword position -> (what was submitted there, kernel)
    self.error: QueueFault | None = None

  def __repr__(self): return f"{self.kind} queue {self.queue_id} of {self.dev}"

  # ---- submission
  def submit(self, words: list[int], what: str, kernel: str = "") -> int:
    """Append packets + the timeline release, ring the doorbell; returns the timeline value that marks completion."""
    with self.lock:
      if self.error is not None: raise self.error
      self.timeline += 1
      v, s = self.timeline, self.signal
      if self.sdma:
        # low word first: across a 2^32 boundary a reader sees a smaller value for a moment, never a larger one
        tail = P.sdma_fence(s.va, v) + P.sdma_fence(s.va + 4, v >> 32) + P.sdma_fence(s.slot_va, s.event_id) + \
          P.sdma_trap(s.event_id)
      else:
        tail = P.release_mem(s.va, v) + P.release_mem(s.slot_va, s.event_id, P.DATA_SEL_32,
                                                      P.INT_SEL_INT_AFTER_WRITE, s.event_id)
      words = list(words) + tail
      n, unit = len(words), 1 if self.sdma else 4   # SDMA rptr/wptr count bytes
      size = len(self.words)
      if n > size // 2: raise GputwinError(f"{self}: submission of {n} dwords does not fit the ring")
      wdw = int(self.wptr[0]) * unit // 4
      while wdw + n - int(self.rptr[0]) * unit // 4 > size: self._wait_space(v)
      self.submissions[wdw] = (what, kernel)
      if len(self.submissions) > 4096: self.submissions = dict(list(self.submissions.items())[-2048:])
      i = wdw % size
      first = min(n, size - i)
      self.words[i:i + first] = words[:first]
      self.words[:n - first] = words[first:]
      self.wptr[0] = (wdw + n) * 4 // unit
      self.doorbell[0] = (wdw + n) * 4 // unit
      return v

  def _wait_space(self, v):
    self.wait(max(1, v - 1), timeout=30.0)

  # ---- completion
  def wait(self, value: int | None = None, timeout: float = 30.0):
    """Until the timeline reaches value (default: everything submitted). QueueFault if the GPU stopped the queue."""
    value = self.timeline if value is None else value
    s, proc, deadline, last, still = self.signal, self.dev.proc, time.monotonic() + timeout, None, 0
    while s.value < value:
      if self.error is not None: raise self.error
      left = deadline - time.monotonic()
      if left <= 0:
        raise QueueTimeout(f"{self.dev}: {self.kind} queue {self.queue_id}: timeline at {s.value}, waited "
                           f"{timeout:g} s for {value}", str(self.dev), self.queue_id)
      proc.wait([s.event_id, proc.mem_event], int(min(left, 0.05) * 1000) + 1)
      if s.value >= value: break
      r = int(self.rptr[0])
      still = still + 1 if r == last and r != int(self.wptr[0]) else 0
      last = r
      f = self._claim(still >= 2)
      if f is not None: self._stopped(r, f[1])

  def _claim(self, stuck: bool):
    """The unclaimed fault of this GPU that is this queue's, marked as claimed: one whose report names this queue, or,
    when the kernel's report names none, any once the queue has made no progress for ~100 ms (`stuck`)."""
    proc = self.dev.proc
    with proc.lock:
      for f in reversed(proc.faults[self.first_fault:]):
        if f[0] != self.dev.gpu_id or f[2] is not None: continue
        owner = getattr(self.dev.k.gpu_error(f[0], f[1]), "queue_id", None)
        if owner == self.queue_id or (owner is None and stuck):
          f[2] = self
          return f
    return None

  def _stopped(self, rptr: int, va: int):
    unit = 1 if self.sdma else 4
    pos = rptr * unit // 4
    what, kernel = self.submissions.get(max((p for p in self.submissions if p <= pos), default=-1),
                                        ("no recorded submission", ""))
    off = (pos * 4) % (len(self.words) * 4)
    err = self.dev.k.gpu_error(self.dev.gpu_id, va)
    why = f"{err}" if err is not None else f"memory exception at VA {va:#x}"
    self.error = QueueFault(f"{self.dev}: {self.kind} queue {self.queue_id} was stopped by the GPU at ring offset "
                            f"{off:#x} (packet dword {pos}) in {what}: {why}; the queue is no longer processed",
                            str(self.dev), self.queue_id, off, getattr(err, "va", va), kernel, err)
    raise self.error

  def destroy(self):
    self.dev.proc.ioctl("DESTROY_QUEUE", queue_id=self.queue_id)
    self.dev.proc.ioctl("DESTROY_EVENT", event_id=self.signal.event_id)
    for b in [self.ring, self.ptrs, *self.extra]: self.dev._free(b)


@dataclasses.dataclass
class LaunchResult(LaunchStats):
  """The launch contract's LaunchStats (kernel, arch, waves, workgroups, wave-instructions from the SQ_INSTS
  performance counter read around the dispatch, wall seconds, wave size) plus the GPU time between the RELEASE_MEM
  timestamps around it. Lane and native-tier counts are the emulator's own: a userspace driver does not see them."""
  gpu_seconds: float = 0.0


class Program:
  """A code object uploaded to VRAM: kernels by name, launched with PM4 SET_SH_REG + DISPATCH_DIRECT."""

  def __init__(self, dev: "Device", co):
    self.dev = dev
    self.co: CodeObject = co if isinstance(co, CodeObject) else load_code_object(
      read_code(co, dev.arch)[0] if isinstance(co, (str, Path)) else bytes(co), arch=dev.arch)   # (Device.load: bytes)
    if self.co.arch != dev.arch:
      raise LaunchError(f"code object is for {self.co.arch}, device {dev} is {dev.arch}", dev.arch)
    img = self.co.image
    self.mem = dev._alloc(len(img), VRAM | abi.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE)
    self.mem.copyin(np.frombuffer(img, np.uint8))
    self.dispatch_id = 0

  def kernel(self, name: str):
    if name not in self.co.kernels:
      raise LaunchError(f"[{self.dev.arch}] no kernel {name!r} in the code object; it has: "
                        f"{', '.join(sorted(self.co.kernels)) or 'none'}", self.dev.arch, name)
    return self.co.kernels[name]

  def kernargs(self, name: str, args, grid, block, queue_va: int = 0, pointer=None):
    """The kernarg segment (gputwin.isa.kernargs: the rules gputwin.emu's launch follows too): pointers are Buffers,
    device addresses or what `pointer` maps; hidden arguments as the HSA runtime fills them. Returns Kernargs."""
    def address(a):
      return a.va if isinstance(a, Buffer) else pointer(a) if pointer is not None else None
    return pack(self.kernel(name), args, grid, block, arch=self.dev.arch, pointer=address, queue_va=queue_va,
                apertures=self.dev.apertures)

  def __call__(self, name: str, *args, grid, block, queue: Queue | None = None, profile: bool = False,
               kernarg: bytes | None = None, pointer=None) -> int:
    """Queue a launch; returns the timeline value of `queue` (default the device's compute queue) marking its end.
    `args` by gputwin.isa.kernargs (pointers: Buffers, device addresses, or what `pointer(a) -> va | None` maps);
    `kernarg`: a raw segment instead; `profile`: GPU clock and SQ_INSTS around it (`timestamps`, `instructions`)."""
    grid, block = three(grid, "grid"), three(block, "block")
    k = self.kernel(name)
    kd, dev = k.descriptor, self.dev
    if block[0] * block[1] * block[2] > 1024:
      raise LaunchError(f"[{dev.arch}] kernel {name}: workgroup of {block[0] * block[1] * block[2]} work-items exceeds "
                        f"1024", dev.arch, name)
    size = max(len(kernarg), segment_size(k, dev.arch)) if kernarg is not None else segment_size(k, dev.arch)
    q = queue or dev.compute
    with q.lock:
      base = dev._arena(size + 64 + 256, q)
      karg, pkt_va, qptr = base, base + ((size + 63) & ~63), base + ((size + 63) & ~63) + 64
      if kernarg is None:
        ka = self.kernargs(name, args, grid, block, qptr, pointer)   # hidden_queue_ptr: the (zeroed) queue area
        ka, lds = bytes(ka.data), ka.lds_size
      else:
        ka, lds = bytes(kernarg), -(-kd.group_segment_fixed_size // 16) * 16
      gs = [grid[i] * block[i] for i in range(3)]
      dims = 1 + (gs[1] > 1 or gs[2] > 1) + (gs[2] > 1)
      packet = np.array([(2 << 0) | (1 << 8) | (3 << 9) | (3 << 11), dims, *block, 0], "<u2").tobytes() + \
        np.array([*gs, kd.private_segment_fixed_size, lds], "<u4").tobytes() + \
        np.array([self.mem.va + k.kd_address, karg, 0, 0], "<u8").tobytes()   # hsa_kernel_dispatch_packet_t
      dev._arena_buf.copyin(np.frombuffer(ka, np.uint8), karg - dev._arena_buf.va)
      dev._arena_buf.copyin(np.frombuffer(packet + bytes(256), np.uint8), pkt_va - dev._arena_buf.va)   # + queue
      self.dispatch_id += 1
      vals = {"private_segment_buffer": 0, "dispatch_ptr": pkt_va, "queue_ptr": qptr, "kernarg_segment_ptr": karg,
              "dispatch_id": self.dispatch_id, "flat_scratch_init": 0,
              "private_segment_size": kd.private_segment_fixed_size}
      user = [0] * kd.user_sgpr_count
      for what, first, n in kd.sgpr_layout():
        if what == "kernarg_preload":
          user[first:first + n] = np.frombuffer(ka[4 * kd.kernarg_preload_spec_offset:][:4 * n], "<u4").tolist()
        elif what in vals:
          user[first:first + n] = [(vals[what] >> (32 * i)) & 0xFFFFFFFF for i in range(n)]
      raw = self.co.image[k.kd_address:k.kd_address + 64]
      rsrc3, rsrc1, rsrc2 = (int.from_bytes(raw[o:o + 4], "little") for o in (44, 48, 52))
      rsrc2 = (rsrc2 & ~(0x1FF << 15)) | (-(-lds // 512) << 15)   # LDS_SIZE: static + dynamic LDS
      L = kd.wave_size
      entry = self.mem.va + k.entry
      w = P.acquire_mem() + P.set_sh_reg("COMPUTE_PGM_LO", entry >> 8, entry >> 40) + \
        P.set_sh_reg("COMPUTE_PGM_RSRC1", rsrc1, rsrc2) + P.set_sh_reg("COMPUTE_PGM_RSRC3", rsrc3) + \
        P.set_sh_reg("COMPUTE_RESOURCE_LIMITS", 0) + \
        P.set_sh_reg("COMPUTE_TMPRING_SIZE", (-(-kd.private_segment_fixed_size * L // 1024) << 12) | 0x3FF) + \
        P.set_sh_reg("COMPUTE_START_X", 0, 0, 0, *block) + \
        (P.set_sh_reg("COMPUTE_USER_DATA_0", *user) if user else [])
      ts = q.ptrs.va + 128 + 32 * (self.dispatch_id % 32)   # profile: clock before/after, SQ_INSTS before/after
      if profile:
        w += P.release_mem(ts, data_sel=P.DATA_SEL_GPU_CLOCK) + \
          P.copy_data(P.COPY_SRC_PERFCOUNTERS, P.SQ_PERFCOUNTER0_LO, ts + 16)
      w += P.dispatch_direct(*grid, P.DISPATCH_COMPUTE_SHADER_EN | P.DISPATCH_FORCE_START_AT_000 |
                             (P.DISPATCH_CS_W32_EN if L == 32 else 0)) + P.event_write(P.CS_PARTIAL_FLUSH)
      if profile:
        w += P.release_mem(ts + 8, data_sel=P.DATA_SEL_GPU_CLOCK) + \
          P.copy_data(P.COPY_SRC_PERFCOUNTERS, P.SQ_PERFCOUNTER0_LO, ts + 24)
      v = q.submit(w, f"launch of kernel {name} (grid {grid}, block {block})", name)
      self.last_timestamps = (q.ptrs, ts - q.ptrs.va) if profile else None
      return v

  def timestamps(self) -> tuple[int, int]:
    """GPU clock ticks (100 MHz) before and after the last profiled launch (after it completed)."""
    mem, off = self.last_timestamps
    t = mem.view(np.uint64, 2, off)
    return int(t[0]), int(t[1])

  def instructions(self) -> int:
    """Wave-instructions of the last profiled launch (after it completed): the SQ_INSTS performance counter before
    and after it. The mock GPU counts it always; real hardware would need SQ_PERFCOUNTER0_SELECT programmed first
    (not done here)."""
    mem, off = self.last_timestamps
    c = mem.view(np.uint64, 2, off + 16)
    return int(c[1]) - int(c[0])

  def free(self): self.dev._free(self.mem)


class Device:
  """One GPU: `open("mock:gfx1100")`, `open("amd:0")`. Owns a compute and an SDMA queue; more with `queue()`."""

  def __init__(self, device: str | None = None):
    self.spec = parse_device(device)
    self.k = kernel_for(device)
    gpus = devices(self.k)
    if self.spec.index >= len(gpus):
      raise KernelDriverError(f"device {device!r}: the topology lists {len(gpus)} GPU(s)")
    self.info = g = gpus[self.spec.index]
    self.gpu_id, self.arch, self.props = g.gpu_id, g.arch, g.props
    self.name = str(self.spec) if self.spec.kind == "mock" else f"amd:{self.spec.index}"
    self.proc = _Process.get(self.k)
    self.buffers: dict[int, Buffer] = {}
    self._bells: Buffer | None = None
    self._programs: dict = {}
    self.queues: list[Queue] = []
    self.closed, self.render = False, None
    try:
      self.render = self.proc.render(g)
      self.proc.join(self)
      ap = next(a for a in self.proc.ioctl("GET_PROCESS_APERTURES").process_apertures if a.gpu_id == self.gpu_id)
      self.apertures = (ap.lds_base >> 32, ap.scratch_base >> 32)   # hidden_shared_base / hidden_private_base
      self._arena_buf = self._alloc(4 << 20, GTT)
      self._arena_at, self._arena_lock = 0, threading.Lock()
      self.compute = self.queue("compute")
      self.sdma = self.queue("sdma")
    except BaseException:
      self.close()
      raise

  def __repr__(self): return f"Device({self.name}, {self.arch}, gpu_id={self.gpu_id:#x})"
  def __str__(self): return f"{self.name} ({self.arch}, gpu_id {self.gpu_id:#x})"
  def __enter__(self): return self
  def __exit__(self, *a): self.close()

  # ---- memory
  def _alloc(self, size: int, flags: int, cpu: bool = True) -> Buffer:
    size = (max(size, 1) + PAGE - 1) & ~(PAGE - 1)
    va = self.proc.alloc_va(size)
    a = self.proc.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags)
    ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    self.proc.ioctl("MAP_MEMORY_TO_GPU", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids),
                    n_devices=1)
    addr = self.k.mmap(self.render, a.mmap_offset, size, PROT_RW, MAP_SHARED) if cpu else 0
    b = self.buffers[va] = Buffer(self, va, size, a.handle, addr, flags)
    return b

  def _free(self, b: Buffer):
    if b.cpu: self.k.munmap(b.cpu, b.size)
    b.cpu = 0
    for gid in sorted(b.peers):
      ids = (ctypes.c_uint32 * 1)(gid)
      self.proc.ioctl("UNMAP_MEMORY_FROM_GPU", handle=b.handle, device_ids_array_ptr=ctypes.addressof(ids),
                      n_devices=1)
    self.proc.ioctl("FREE_MEMORY_OF_GPU", handle=b.handle)
    self.buffers.pop(b.va, None)
    self.proc.free_va(b.va, b.size)

  def alloc(self, nbytes: int, host: bool = False) -> Buffer:
    """Device memory (VRAM, CPU-visible through the large BAR) or, with host=True, GTT system memory."""
    return self._alloc(nbytes, GTT if host else VRAM)

  def free(self, b: Buffer): self._free(b)

  def _doorbells(self, offset: int) -> Buffer:
    if self._bells is None:
      addr = self.k.mmap(self.proc.kfd, offset & ~(DOORBELL_SLICE - 1), DOORBELL_SLICE, PROT_RW, MAP_SHARED)
      self._bells = Buffer(self, 0, DOORBELL_SLICE, 0, addr, 0)
    return self._bells

  def _arena(self, n: int, q: Queue) -> int:
    """n bytes of kernarg/dispatch-packet memory that stay untouched until the launch using them has completed."""
    n = (n + 255) & ~255
    with self._arena_lock:
      if self._arena_at + n > self._arena_buf.size:   # wrap: everything that used the arena must have finished
        for qq in self.queues: qq.wait()
        self._arena_at = 0
      va = self._arena_buf.va + self._arena_at
      self._arena_at += n
      return va

  # ---- queues and work
  def queue(self, kind: str = "compute") -> Queue:
    q = Queue(self, kind)
    self.queues.append(q)
    return q

  def synchronize(self, timeout: float = 60.0):
    for q in self.queues: q.wait(timeout=timeout)

  def copy(self, dst: Buffer, src: Buffer, nbytes: int | None = None, dst_offset: int = 0, src_offset: int = 0,
           queue: Queue | None = None) -> int:
    """SDMA COPY_LINEAR (split at the engine's maximum); either buffer may live on another GPU of the machine."""
    q = queue or self.sdma
    nbytes = min(dst.size - dst_offset, src.size - src_offset) if nbytes is None else nbytes
    if dst_offset + nbytes > dst.size or src_offset + nbytes > src.size:
      raise GputwinError(f"{self}: copy of {nbytes} bytes exceeds {src} or {dst}")
    for b in (dst, src): b.map_to(q.dev)
    mx, w = P.sdma_copy_max(self.arch), []
    for o in range(0, nbytes, mx):
      w += P.sdma_copy(dst.va + dst_offset + o, src.va + src_offset + o, min(mx, nbytes - o))
    return q.submit(w, f"SDMA copy of {nbytes} bytes {src.va + src_offset:#x} -> {dst.va + dst_offset:#x}")

  def fill(self, dst: Buffer, value: int, nbytes: int | None = None, queue: Queue | None = None) -> int:
    """SDMA CONSTANT_FILL with a 32-bit pattern."""
    nbytes = dst.size if nbytes is None else nbytes
    return (queue or self.sdma).submit(P.sdma_fill(dst.va, value, nbytes), f"SDMA fill of {nbytes} bytes")

  def copyin(self, dst: Buffer, a: np.ndarray, via: str = "cpu"):
    """Host array -> buffer: through the CPU mapping, or ("sdma") staged in GTT and copied by the SDMA engine."""
    if via == "cpu": return dst.copyin(a)
    stage = self._alloc(a.nbytes, GTT)
    stage.copyin(a)
    self.sdma.wait(self.copy(dst, stage, a.nbytes))
    self._free(stage)

  def copyout(self, a: np.ndarray, src: Buffer, via: str = "cpu") -> np.ndarray:
    if via == "cpu": return src.copyout(a)
    stage = self._alloc(a.nbytes, GTT)
    self.sdma.wait(self.copy(stage, src, a.nbytes))
    stage.copyout(a)
    self._free(stage)
    return a

  def timestamp(self) -> int:
    """The GPU clock now (GET_CLOCK_COUNTERS), in 100 MHz ticks."""
    return self.proc.ioctl("GET_CLOCK_COUNTERS", gpu_id=self.gpu_id).gpu_clock_counter

  def load(self, code_object) -> Program:
    """Upload a code object (bytes, a path to .co/.o/.s, or a CodeObject) to VRAM; cached per content. A Program
    loaded earlier on this device is itself."""
    if isinstance(code_object, Program) and code_object.dev is self: return code_object
    co = code_object if isinstance(code_object, CodeObject) else \
      (read_code(code_object, self.arch)[0] if isinstance(code_object, (str, Path)) else bytes(code_object))
    key = id(co) if isinstance(co, CodeObject) else co
    if key not in self._programs: self._programs[key] = Program(self, co)
    return self._programs[key]

  def launch(self, code_object, kernel: str, *, grid, block, args, profile: bool = True) -> LaunchResult:
    """gputwin.emu.launch through the PM4 path, with its argument rules (gputwin.isa.kernargs): numpy arrays are copied
    into fresh buffers and back into the same arrays afterwards, Buffers and ints are device addresses, numbers are
    packed per the metadata, an int sizes a `__local` pointer; the launch is waited for."""
    prg = self.load(code_object)
    k = prg.kernel(kernel)
    t0, bufs = time.perf_counter(), []

    def stage(a):
      if not isinstance(a, np.ndarray): return None
      b = self._alloc(a.nbytes, VRAM)
      b.copyin(a)
      bufs.append((a, b))
      return b.va
    try:
      g, bl = three(grid, "grid"), three(block, "block")
      prg(kernel, *args, grid=g, block=bl, profile=profile, pointer=stage)
      self.compute.wait()
      for a, b in bufs:
        if a.flags.writeable and a.nbytes: b.copyout(a)
    finally:
      for _, b in bufs: self._free(b)
    L = k.descriptor.wave_size
    nw, nwg = -(-(bl[0] * bl[1] * bl[2]) // L), g[0] * g[1] * g[2]
    t = prg.timestamps() if profile else (0, 0)
    return LaunchResult(kernel, self.arch, waves=nw * nwg, workgroups=nwg, instructions=prg.instructions() if profile
                        else 0, seconds=time.perf_counter() - t0, wave_size=L, gpu_seconds=(t[1] - t[0]) / GPU_CLOCK_HZ)

  def close(self):
    if self.closed: return
    self.closed = True
    try: self.synchronize(timeout=5.0)
    except (GPUFault, TimeoutError): pass
    try:
      for q in self.queues: q.destroy()
      for p in self._programs.values(): p.free()
      for b in list(self.buffers.values()):
        if b is not self.proc.event_page: self._free(b)
      if self._bells: self.k.munmap(self._bells.cpu, DOORBELL_SLICE)
    finally:
      if self.render is not None: self.proc.unrender(self.gpu_id)
      self.proc.release()


def open(device: str | None = None) -> Device:   # noqa: A001 - the runtime's entry point, like os.open for a GPU
  """A GPU by device string: "mock:gfx1100", "mock:gfx1100,gfx942:1", "amd", "amd:N" (default $GPUTWIN_DEVICE)."""
  return Device(device)
