"""gputwin's HCQ runtime on NVIDIA: what a userspace driver does on /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm,
with the same public API as the AMD runtime (gputwin.runtime.hcq).

    dev = gputwin.runtime.open("mock:sm_90")           # "nv", "nv:1", "mock:sm_90,sm_80:1"
    buf = dev.alloc(4096); buf.copyin(np.arange(1024, dtype=np.float32))
    prg = dev.load(ptx_text)                           # PTX text/bytes/path, or a program image (gputwin.isa.ptx.cubin)
    v = prg("saxpy", out, x, np.float32(2), np.int32(n), grid=4, block=256); dev.compute.wait(v)
    dev.launch(ptx, "saxpy", grid=4, block=256, args=[out, x, np.float32(2), np.int32(n)])   # gputwin.emu.launch's

Bring-up is a real RM/UVM client's (gputwin.runtime.nvrm: root client, CARD_INFO, UVM INITIALIZE + MM_INITIALIZE;
per GPU: /dev/nvidiaN + REGISTER_FD, NV01_DEVICE_0, NV20_SUBDEVICE_0, the class list, GR info, GID (UUID), the usermode
page mapped (doorbell at NOTIFY_CHANNEL_PENDING), a FERMI_VASPACE_A registered with UVM). Memory is NV1_MEMORY_USER
(VRAM) or NV01_MEMORY_SYSTEM, mapped for the CPU with RM_MAP_MEMORY + mmap of a fresh fd (/dev/nvidiaN; nvidiactl for
system memory) and for the GPU with UVM CREATE_EXTERNAL_RANGE
+ MAP_EXTERNAL_ALLOCATION at a VA we choose (one VA space per process: a buffer has the same VA on every GPU that maps
it). A channel (`Queue`) is a channel group + context share + GPFIFO channel (ring and USERD in one host buffer, an
error notifier) with a compute or copy object, registered with UVM, scheduled, its work-submit token read.

Work is a pushbuffer segment (gputwin.abi.nvpush methods) pointed to by a GPFIFO entry; GPPut in USERD is advanced and
the token written to the doorbell. Each channel's timeline is a 64-bit semaphore released by Host methods (with WFI)
after every submission; `Queue.wait` polls it and the error notifier. A launch uploads a QMD (V03_00) and constant
bank 0 (launch dimensions, shared/local windows, dynamic shared size, then the parameters at the offset the program
image records) and sends it with SEND_PCAS. A channel the GPU stopped (RC: the notifier's status) raises
`QueueFault` naming device, channel, GPFIFO entry, submission and kernel, and the driver's account (`gpu_error`).
"""
from __future__ import annotations
import ctypes, dataclasses, threading, time
from pathlib import Path
import numpy as np
from gputwin.abi import nv as R
from gputwin.abi import nvpush as N
from gputwin.errors import GPUFault, GputwinError, KernelDriverError, LaunchError
from gputwin.isa.kernargs import three
from gputwin.isa.ptx import cubin, params as P
from gputwin.runtime import hcq
from gputwin.runtime.hcq import LaunchResult, QueueFault
from gputwin.runtime.kernel import OSKernel, kernel_for, parse_device
from gputwin.runtime.nvrm import BIG_PAGE, Client

PAGE = 4096
# generic-address windows (SET_SHADER_*_MEMORY_WINDOW, cbuf0): where NVIDIA's userspace drivers put them on desktop
# GPUs, and where gputwin.emu.ptx routes generic addresses (decode.GENERIC)
SHARED_WINDOW, LOCAL_WINDOW = 0x7294_0000_0000, 0x7293_0000_0000
STACK_TOP = 0xFFFDC0                # per-thread local-memory stack start the driver puts at cbuf0 0x28
# constant bank 0 below the parameters, as the CUDA driver fills it (byte offsets; sm_80 and sm_90)
CB0_BLOCK, CB0_GRID, CB0_SHARED_WINDOW, CB0_LOCAL_WINDOW, CB0_STACK, CB0_DYNAMIC_SHARED = 0x0, 0xC, 0x18, 0x20, 0x28, 0x2C
CB0_SHARED_BASE, CB0_SHARED_TOP = 0x114, 0x13C   # sm_90: the reserved shared KiB, and its end + the dynamic size
SUBC_COMPUTE, SUBC_COPY = 1, 4
GPFIFO_ENTRIES = 1024
PUSHBUF = 1 << 20
QMD_VERSION = "V03_00"


class Buffer(hcq.Buffer):
  """GPU memory: `va` on every GPU that maps it, `cpu` its CPU mapping (0 when not host-visible)."""

  def __init__(self, owner: "Device", va: int, size: int, handle: int, cpu: int, flags: int, map_fd: int = -1,
               linear: int = 0):
    super().__init__(owner, va, size, handle, cpu, flags)
    self.peers = {owner.gpu.index}
    self.map_fd, self.linear = map_fd, linear

  def map_to(self, dev: "Device"):
    """Map on another GPU of the machine (peer access: UVM ENABLE_PEER_ACCESS, then MAP_EXTERNAL_ALLOCATION there)."""
    if dev.gpu.index in self.peers: return
    if dev.client is not self.owner.client: raise GputwinError(f"{self} and {dev} are not GPUs of one machine")
    dev.client.enable_peer(self.owner.ctx, dev.ctx)
    self.owner._uvm_map(self, dev)
    self.peers.add(dev.gpu.index)


class Signal:
  """A timeline: a 64-bit semaphore in host memory the channel releases after each submission."""

  def __init__(self, mem: Buffer, offset: int):
    self.mem, self.offset, self.va = mem, offset, mem.va + offset
    self._value = mem.view(np.uint64, 1, offset)

  @property
  def value(self) -> int: return int(self._value[0])


class Queue:
  """A GPFIFO channel in its own channel group: `kind` "compute" (a compute object on subchannel 1) or "copy" (a DMA
  copy object on subchannel 4). Ring + USERD, pushbuffer, timeline semaphore, error notifier."""

  def __init__(self, dev: "Device", kind: str, entries: int = GPFIFO_ENTRIES):
    if kind not in ("compute", "copy"): raise GputwinError(f"queue kind {kind!r}: expected 'compute' or 'copy'")
    c = dev.client
    self.dev, self.kind, self.entries, self.lock = dev, kind, entries, threading.RLock()
    self.handles: list[int] = []
    self.ring = dev._alloc(entries * 8 + N.USERD_SIZE, host=True)   # GPFIFO entries, then USERD (512-aligned)
    self.pb = dev._alloc(PUSHBUF, host=True)
    self.ptrs = dev._alloc(PAGE, host=True)        # timeline @0, timestamps from @64
    self.notifier = dev._alloc(PAGE, host=True)    # NvNotification[3]: the error notifier is entry 0
    self.gp = self.ring.view(np.uint64, entries)
    self.userd = self.ring.view(np.uint32, N.USERD_SIZE // 4, entries * 8)
    self.pbw = self.pb.view(np.uint32)
    self.note = self.notifier.view(np.uint8, ctypes.sizeof(R.NvNotification))
    self.group = c.alloc(dev.device, R.KEPLER_CHANNEL_GROUP_A, R.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
      engineType=R.NV2080_ENGINE_TYPE_GRAPHICS if kind == "compute" else R.NV2080_ENGINE_TYPE_COPY(0)))
    self.handles.append(self.group)
    ctx = c.alloc(self.group, R.FERMI_CONTEXT_SHARE_A, R.NV_CTXSHARE_ALLOCATION_PARAMETERS(
      hVASpace=dev.vaspace, flags=R.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
    cp = R.NV_CHANNEL_ALLOC_PARAMS(hObjectError=self.notifier.handle, hObjectBuffer=self.ring.handle,
                                   gpFifoOffset=self.ring.va, gpFifoEntries=entries, hContextShare=ctx)
    cp.hUserdMemory[0], cp.userdOffset[0] = self.ring.handle, entries * 8
    self.channel = c.alloc(self.group, dev.classes["gpfifo"], cp)
    self.engine_class = dev.classes["compute" if kind == "compute" else "copy"]
    self.engine = c.alloc(self.channel, self.engine_class)
    self.token = c.control(self.channel, R.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                           R.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()).workSubmitToken
    self.uvm_base = c.alloc_va(64 << 20)
    c.uvm_ioctl(R.UVM_REGISTER_CHANNEL, R.UVM_REGISTER_CHANNEL_PARAMS(
      gpuUuid=dev.uuid, rmCtrlFd=c.ctl, hClient=c.root, hChannel=self.channel, base=self.uvm_base, length=64 << 20))
    c.control(self.group, R.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, R.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))
    self.signal = Signal(self.ptrs, 0)
    self.timeline, self.put, self.pb_at = 0, 0, 0
    self.submissions: dict[int, tuple] = {}   # timeline value -> (GPFIFO entry, what, kernel)
    self.error: QueueFault | None = None
    self.setup = self._setup()

  def __repr__(self): return f"{self.kind} channel {self.channel:#x} of {self.dev}"

  def _setup(self) -> list[int]:
    """Methods the first submission carries: the engine bound to its subchannel; for compute the windows."""
    if self.kind == "copy": return N.pb_method(SUBC_COPY, "SET_OBJECT", self.engine_class, cls=self.engine_class)
    cls = self.engine_class
    m = lambda name, *d: N.pb_method(SUBC_COMPUTE, name, *d, cls=cls)
    return m("SET_OBJECT", cls) + m("SET_SHADER_SHARED_MEMORY_WINDOW_A", SHARED_WINDOW >> 32, SHARED_WINDOW & 0xFFFFFFFF) + \
      m("SET_SHADER_LOCAL_MEMORY_WINDOW_A", LOCAL_WINDOW >> 32, LOCAL_WINDOW & 0xFFFFFFFF)

  # ---- submission
  def _host(self, name: str, *data: int) -> list[int]:
    return N.pb_method(0, name, *data, cls=self.dev.classes["gpfifo"])

  def release(self, va: int, value: int, timestamp: bool = False) -> list[int]:
    """Host semaphore release of a 64-bit payload after the channel's work is done (WFI); with `timestamp` the
    four-word form (payload, then the GPU time at +8)."""
    h = N.nvclass(self.dev.classes["gpfifo"])
    ex = h.pack("SEM_EXECUTE", OPERATION="RELEASE", RELEASE_WFI="EN", PAYLOAD_SIZE="64BIT",
                RELEASE_TIMESTAMP="EN" if timestamp else "DIS")
    return self._host("SEM_ADDR_LO", va & 0xFFFFFFFF, va >> 32, value & 0xFFFFFFFF, value >> 32, ex)

  def submit(self, words: list[int], what: str, kernel: str = "") -> int:
    """Append a pushbuffer segment (+ the timeline release) and its GPFIFO entry, advance GPPut, ring the doorbell;
    returns the timeline value that marks completion."""
    with self.lock:
      self.check()
      self.timeline += 1
      v = self.timeline
      words = self.setup + list(words) + self.release(self.signal.va, v)
      self.setup = []
      n = len(words)
      if n > len(self.pbw) // 2: raise GputwinError(f"{self}: a submission of {n} dwords does not fit the pushbuffer")
      if self.pb_at + n > len(self.pbw):   # wrap: everything before must have been fetched and run
        self.wait(v - 1)
        self.pb_at = 0
      if self.put - self._gp_get() >= self.entries - 1: self.wait(v - 1)
      at = self.pb_at
      self.pbw[at:at + n] = words
      self.pb_at += n
      slot = self.put % self.entries
      self.gp[slot] = N.gp_entry(self.pb.va + 4 * at, n)
      self.submissions[v] = (slot, what, kernel)
      if len(self.submissions) > 4096: self.submissions = dict(list(self.submissions.items())[-2048:])
      self.put += 1
      self.userd[N.USERD_GP_PUT // 4] = self.put % self.entries
      self.dev.doorbell[0] = self.token
      return v

  def _gp_get(self) -> int:
    g = int(self.userd[N.USERD_GP_GET // 4])
    return self.put - ((self.put - g) % self.entries)

  # ---- completion
  def check(self):
    """QueueFault if the GPU stopped this channel (RC: the driver wrote the error notifier)."""
    if self.error is not None: raise self.error
    note = R.NvNotification.from_buffer_copy(self.note.tobytes())
    if note.status or note.info32: self._stopped(note)

  def wait(self, value: int | None = None, timeout: float = 30.0):
    """Until the timeline reaches value (default: everything submitted). QueueFault if the GPU stopped the channel."""
    value = self.timeline if value is None else value
    s, deadline, nap = self.signal, time.monotonic() + timeout, 1e-5
    while s.value < value:
      self.check()
      if time.monotonic() > deadline:
        raise hcq.QueueTimeout(f"{self}: timeline at {s.value}, waited {timeout:g} s for {value}")
      time.sleep(nap)
      nap = min(nap * 2, 1e-3)

  def _stopped(self, note):
    v = self.signal.value + 1
    slot, what, kernel = self.submissions.get(v, (-1, "no recorded submission", ""))
    err = self.dev.k.gpu_error(self.dev.gpu.index, 0)
    va = getattr(err, "va", None)
    why = f"{err}" if err is not None else f"RC error {note.info32} (Xid), notifier status {note.status:#x}"
    self.error = QueueFault(f"{self.dev}: {self.kind} channel {self.channel:#x} was stopped by the GPU at GPFIFO entry "
                            f"{slot} (submission {v}: {what}): {why}; the channel is no longer processed",
                            str(self.dev), self.channel, slot, va, kernel, err)
    self.error.entry, self.error.submission = slot, v
    raise self.error

  def destroy(self):
    c = self.dev.client
    try:
      c.uvm_ioctl(R.UVM_UNREGISTER_CHANNEL, R.UVM_UNREGISTER_CHANNEL_PARAMS(hClient=c.root, hChannel=self.channel))
    except (OSError, KernelDriverError): pass
    c.free(self.group, self.dev.device)   # the group frees its context share, channel and engine objects
    c.free_va(self.uvm_base, 64 << 20)
    for b in (self.ring, self.pb, self.ptrs, self.notifier): self.dev._free(b)


@dataclasses.dataclass
class _Kernel:
  info: cubin.KernelInfo
  params: list[P.Param]


class Program:
  """A program image (gputwin.isa.ptx.cubin) uploaded to GPU memory: kernels by name, launched with a QMD."""

  def __init__(self, dev: "Device", image: bytes):
    self.dev, self.image = dev, image
    self.prog = cubin.read_program(image)
    if self.prog.arch != dev.arch:
      raise LaunchError(f"program image is for {self.prog.arch}, device {dev} is {dev.arch}", dev.arch)
    self.mem = dev._alloc(len(image))
    self.mem.copyin(np.frombuffer(image, np.uint8))
    data, _ = cubin.module_data(image, 0)   # __device__/__constant__ data and constant banks 1.. (a real GPU's SASS
    self.data, self.banks = None, {}        # reads them; the mock runs the PTX, which places its own)
    if data:
      self.data = dev._alloc(len(data))
      data, banks = cubin.module_data(image, self.data.va)
      self.data.copyin(np.frombuffer(data, np.uint8))
      self.banks = {n: (self.data.va + o, -(-size // 16) * 16) for n, (o, size) in banks.items()}
    self._kernels: dict[str, _Kernel] = {}
    self.last_timestamps = None

  def kernel(self, name: str) -> _Kernel:
    if name not in self._kernels:
      if name not in self.prog.kernels:
        raise LaunchError(f"[{self.dev.arch}] no kernel {name!r} in the program; it has: "
                          f"{', '.join(sorted(self.prog.kernels)) or 'none'}", self.dev.arch, name)
      info = self.prog.kernels[name]
      if self.prog.ptx:   # the parameters' types from the PTX (a number is packed by its declared type)
        from gputwin.isa.ptx import parse
        ps = P.layout(parse(self.prog.ptx, "<program>").kernels[name].params)
      else:               # a plain cubin: sizes only
        ps = [P.Param(f"param{i}", {1: "b8", 2: "b16", 4: "b32", 8: "b64"}.get(n, "b8"), o, n, n not in (1, 2, 4, 8))
              for i, (o, n) in enumerate(info.params)]
      self._kernels[name] = _Kernel(info, ps)
    return self._kernels[name]

  def cbuf0(self, k: _Kernel, grid, block, dynamic: int, raw: bytes) -> bytes:
    """Constant bank 0 as the driver fills it: block and grid dimensions, the shared and local windows, the stack
    start, the dynamic shared size; the parameters at the kernel's offset."""
    n = k.info.param_offset + max(k.info.param_size, len(raw))
    cb = bytearray(-(-n // 16) * 16)
    cb[CB0_BLOCK:CB0_BLOCK + 12] = np.array(block, "<u4").tobytes()
    cb[CB0_GRID:CB0_GRID + 12] = np.array(grid, "<u4").tobytes()
    cb[CB0_SHARED_WINDOW:CB0_SHARED_WINDOW + 8] = SHARED_WINDOW.to_bytes(8, "little")
    cb[CB0_LOCAL_WINDOW:CB0_LOCAL_WINDOW + 8] = LOCAL_WINDOW.to_bytes(8, "little")
    cb[CB0_STACK:CB0_STACK + 4] = STACK_TOP.to_bytes(4, "little")
    cb[CB0_DYNAMIC_SHARED:CB0_DYNAMIC_SHARED + 4] = dynamic.to_bytes(4, "little")
    if cubin.RESERVED_SHARED[self.dev.arch] and k.info.param_offset > CB0_SHARED_TOP:
      res = cubin.RESERVED_SHARED[self.dev.arch]
      cb[CB0_SHARED_BASE:CB0_SHARED_BASE + 4] = res.to_bytes(4, "little")
      cb[CB0_SHARED_TOP:CB0_SHARED_TOP + 4] = (res + dynamic).to_bytes(4, "little")
    cb[k.info.param_offset:k.info.param_offset + len(raw)] = raw
    return bytes(cb)

  def __call__(self, name: str, *args, grid, block, shared_bytes: int = 0, queue: Queue | None = None,
               profile: bool = False, pointer=None) -> int:
    """Queue a launch; returns the timeline value of `queue` (default the device's compute channel) marking its end.
    `args` by gputwin.isa.ptx.params (pointers: Buffers, device addresses, or what `pointer(a) -> va | None` maps);
    `shared_bytes`: dynamic shared memory; `profile`: GPU time around it (`timestamps`)."""
    grid, block = three(grid, "grid"), three(block, "block")
    dev, k, arch = self.dev, self.kernel(name), self.dev.arch
    where = f"[{arch}] kernel {name}"
    if block[0] * block[1] * block[2] > 1024:
      raise LaunchError(f"{where}: a CTA of {block[0] * block[1] * block[2]} threads exceeds 1024", arch, name)
    mt = k.info.reqntid or k.info.max_threads
    if mt is not None and block[0] * block[1] * block[2] > mt[0] * mt[1] * mt[2]:
      raise LaunchError(f"{where}: a CTA of {block} exceeds its launch bounds {mt}", arch, name)
    def address(a):   # a Buffer of another GPU of the machine is mapped here first (peer access)
      if isinstance(a, Buffer):
        a.map_to(dev)
        return a.va
      return pointer(a) if pointer is not None else None
    raw = P.pack(k.params, args, address, where, max(k.info.param_size, P.size(k.params)))
    q = queue or dev.compute
    shared = k.info.shared_static + int(shared_bytes)
    cb = self.cbuf0(k, grid, block, int(shared_bytes), raw)
    smem = min((c for c in (32 << 10, 64 << 10, 100 << 10, 132 << 10, 164 << 10, 196 << 10, 228 << 10)
                if c >= shared), default=228 << 10) // 4096 + 1
    with q.lock:
      base = dev._arena(len(cb) + 256 + 256, q)
      qmd_va, cb_va = base, base + 256
      qmd = N.qmd_build(QMD_VERSION, program=self.mem.va + k.info.text_offset, grid=grid, block=block,
                        shared=shared, registers=k.info.regs, cbufs={**self.banks, 0: (cb_va, len(cb))},
                        QMD_GROUP_ID=0x3F, SASS_VERSION=int(arch[3:], 16), API_VISIBLE_CALL_LIMIT="NO_CHECK", SAMPLER_INDEX="INDEPENDENTLY",
                        CWD_MEMBAR_TYPE="L1_SYSMEMBAR", SM_GLOBAL_CACHING_ENABLE=1, BARRIER_COUNT=1,
                        INVALIDATE_TEXTURE_HEADER_CACHE=1, INVALIDATE_TEXTURE_SAMPLER_CACHE=1,
                        INVALIDATE_TEXTURE_DATA_CACHE=1, INVALIDATE_SHADER_DATA_CACHE=1,
                        INVALIDATE_INSTRUCTION_CACHE=1, INVALIDATE_SHADER_CONSTANT_CACHE=1,
                        MIN_SM_CONFIG_SHARED_MEM_SIZE=smem, TARGET_SM_CONFIG_SHARED_MEM_SIZE=smem,
                        MAX_SM_CONFIG_SHARED_MEM_SIZE=0x3A if arch == "sm_90" else 0x2A,
                        SHADER_LOCAL_MEMORY_LOW_SIZE=-(-max(k.info.frame_size, k.info.stack_size) // 16) * 16)
      dev._arena_buf.copyin(np.frombuffer(qmd, np.uint8), qmd_va - dev._arena_buf.va)
      dev._arena_buf.copyin(np.frombuffer(cb, np.uint8), cb_va - dev._arena_buf.va)
      cls = q.engine_class
      m = lambda mname, *d: N.pb_method(SUBC_COMPUTE, mname, *d, cls=cls)
      ts = q.ptrs.va + 64 + 32 * (len(q.submissions) % 64)
      w = q.release(ts, 0, True) if profile else []
      local = -(-max(k.info.frame_size, k.info.stack_size) // 16) * 16
      if local:   # per-thread local memory (the stack): a backing store for every thread the GPU can hold
        lva, per_tpc = dev._local_memory(local)
        w += m("SET_SHADER_LOCAL_MEMORY_A", lva >> 32, lva & 0xFFFFFFFF) + \
          m("SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A", per_tpc >> 32, per_tpc & 0xFFFFFFFF, 0xFF)
      w += m("INVALIDATE_SHADER_CACHES_NO_WFI", N.nvclass(cls).pack(
        "INVALIDATE_SHADER_CACHES_NO_WFI", INSTRUCTION="TRUE", GLOBAL_DATA="TRUE", CONSTANT="TRUE"))
      sig = "SEND_SIGNALING_PCAS2_B" if cls == R.HOPPER_COMPUTE_A else "SEND_SIGNALING_PCAS_B"
      act = dict(PCAS_ACTION="INVALIDATE_COPY_SCHEDULE") if sig.endswith("PCAS2_B") else \
        dict(INVALIDATE="TRUE", SCHEDULE="TRUE")
      w += m("SEND_PCAS_A", qmd_va >> 8) + m(sig, N.nvclass(cls).pack(sig, **act))
      if profile: w += q.release(ts + 16, 0, True)
      v = q.submit(w, f"launch of kernel {name} (grid {grid}, block {block})", name)
      self.last_timestamps = (q.ptrs, ts - q.ptrs.va) if profile else None
      return v

  def timestamps(self) -> tuple[int, int]:
    """GPU time (ns) before and after the last profiled launch (after it completed)."""
    mem, off = self.last_timestamps
    return int(mem.view(np.uint64, 1, off + 8)[0]), int(mem.view(np.uint64, 1, off + 24)[0])

  def free(self):
    self.dev._free(self.mem)
    if self.data is not None: self.dev._free(self.data)


def _image(code, arch: str, real: bool) -> bytes:
  """The program image of `code`: an image (bytes starting with the ELF magic, or a .cubin path) as it is; PTX
  (text, bytes, a .ptx path) built by gputwin.isa.ptx.cubin (a real GPU needs ptxas; the mock runs the PTX)."""
  if isinstance(code, cubin.Program): return code.image
  if isinstance(code, Path) or (isinstance(code, str) and "\n" not in code and
                                code.rsplit(".", 1)[-1] in ("ptx", "cubin", "elf", "o")):
    try: code = Path(code).read_bytes()
    except OSError as e: raise LaunchError(f"cannot read {code}: {e.strerror}") from None
  if isinstance(code, (bytes, bytearray, memoryview)) and bytes(code[:4]) == b"\x7fELF": return bytes(code)
  text = bytes(code).decode() if isinstance(code, (bytes, bytearray, memoryview)) else str(code)
  return cubin.build(text, arch, ptxas=True if real else False)


class Device(hcq.Device):
  """One NVIDIA GPU: `open("mock:sm_90")`, `open("nv:0")`. Owns a compute and a copy channel; more with `queue()`.
  The AMD Device's API; what does not depend on the vendor (the launch arena, synchronize, free, the context
  manager) is its code."""

  def __init__(self, device: str | None = None):
    self.spec = parse_device(device)
    if self.spec.vendor != "nv": raise KernelDriverError(f"device {device!r} is not an NVIDIA device")
    self.k = kernel_for(device)
    self.real = isinstance(self.k, OSKernel)
    self.client = c = Client.get(self.k)
    self.buffers: dict[int, Buffer] = {}
    self._programs: dict = {}
    self.queues: list[Queue] = []
    self.closed, self.ctx = False, None
    self._local: tuple[Buffer, int] | None = None
    try:
      gpus = c.gpus()
      if self.spec.index >= len(gpus):
        raise KernelDriverError(f"device {device!r}: CARD_INFO lists {len(gpus)} NVIDIA GPU(s)")
      self.gpu = g = gpus[self.spec.index]
      self.arch, self.name = g.arch, str(self.spec) if self.spec.kind == "mock" else f"nv:{self.spec.index}"
      self.ctx = x = c.gpu(g)
      self.device, self.subdevice, self.classes, self.uuid, self.vaspace = \
        x.device, x.subdevice, x.classes, x.uuid, x.vaspace
      self.doorbell = x.view(np.uint32, 1, R.NVC361_NOTIFY_CHANNEL_PENDING)
      self._arena_buf = self._alloc(4 << 20)
      self._arena_at, self._arena_lock = 0, threading.Lock()
      self.compute = self.queue("compute")
      self.copy_queue = self.queue("copy")
    except BaseException:
      self.close()
      raise

  def __repr__(self): return f"Device({self.name}, {self.arch}, gpu_id={self.gpu.gpu_id:#x})"
  def __str__(self): return f"{self.name} ({self.arch}, gpu_id {self.gpu.gpu_id:#x})"

  @property
  def sdma(self) -> Queue: return self.copy_queue   # the AMD runtime's name for its copy queue
  @property
  def gpu_id(self) -> int: return self.gpu.gpu_id

  # ---- memory
  def _cpu_map(self, b: Buffer) -> Buffer:
    b.cpu, b.map_fd, b.linear = self.ctx.map_cpu(b.handle, b.size, system=bool(b.flags))
    return b

  def _uvm_map(self, b: Buffer, dev: "Device"):
    c = self.client
    p = R.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=b.va, length=b.size, offset=0, gpuAttributesCount=1,
                                             rmCtrlFd=c.ctl, hClient=c.root, hMemory=b.handle)
    p.perGpuAttributes[0].gpuUuid = dev.uuid
    p.perGpuAttributes[0].gpuMappingType = R.UvmGpuMappingTypeReadWriteAtomic
    c.uvm_ioctl(R.UVM_MAP_EXTERNAL_ALLOCATION, p)

  def _alloc(self, size: int, host: bool = False, cpu: bool = True) -> Buffer:
    c = self.client
    size = (max(size, 1) + BIG_PAGE - 1) & ~(BIG_PAGE - 1)
    attr = R.DRF_NUM(R.NVOS32_ATTR_LOCATION, R.NVOS32_ATTR_LOCATION_PCI if host else R.NVOS32_ATTR_LOCATION_VIDMEM) | \
      R.DRF_NUM(R.NVOS32_ATTR_PHYSICALITY, R.NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS if host else
                R.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS) | \
      R.DRF_NUM(R.NVOS32_ATTR_PAGE_SIZE, R.NVOS32_ATTR_PAGE_SIZE_4KB if host else R.NVOS32_ATTR_PAGE_SIZE_BIG)
    attr2 = R.DRF_NUM(R.NVOS32_ATTR2_ZBC, R.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC) | \
      R.DRF_NUM(R.NVOS32_ATTR2_GPU_CACHEABLE, R.NVOS32_ATTR2_GPU_CACHEABLE_NO if host else
                R.NVOS32_ATTR2_GPU_CACHEABLE_YES)
    mp = R.NV_MEMORY_ALLOCATION_PARAMS(owner=c.root, type=R.NVOS32_TYPE_IMAGE, flags=R.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE |
                                       R.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT, attr=attr, attr2=attr2, format=6,
                                       size=size, alignment=BIG_PAGE, limit=size - 1)
    h = c.alloc(self.device, R.NV01_MEMORY_SYSTEM if host else R.NV1_MEMORY_USER, mp)
    va = c.alloc_va(size)
    b = Buffer(self, va, size, h, 0, int(host))
    try:
      if cpu: self._cpu_map(b)
      c.uvm_ioctl(R.UVM_CREATE_EXTERNAL_RANGE, R.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=va, length=size))
      self._uvm_map(b, self)
    except BaseException:
      self._release(b, ranged=False)
      raise
    self.buffers[va] = b
    return b

  def _release(self, b: Buffer, ranged: bool = True):
    c = self.client
    if b.cpu: self.ctx.unmap_cpu(b.handle, b.size, (b.cpu, b.map_fd, b.linear))
    b.cpu, b.map_fd = 0, -1
    if ranged: c.uvm_ioctl(R.UVM_FREE, R.UVM_FREE_PARAMS(base=b.va))
    c.free_va(b.va, b.size)
    c.free(b.handle, self.device)

  def _free(self, b: Buffer):
    if self.buffers.pop(b.va, None) is not None: self._release(b)

  def alloc(self, nbytes: int, host: bool = False) -> Buffer:
    """Device memory (VRAM, CPU-visible through BAR1) or, with host=True, system memory; mapped for the CPU."""
    return self._alloc(nbytes, host)

  def _local_memory(self, per_thread: int) -> tuple[int, int]:
    """(VA, bytes per TPC) of the shader local memory backing `per_thread` bytes for every warp slot of every SM
    (64 warps of 32 threads, 2 SMs per TPC), grown when a kernel needs more; waits for the channels first."""
    per_tpc = -(-(-(-per_thread * 32 // 0x200) * 0x200) * 64 * 2 // 0x8000) * 0x8000
    if self._local is None or self._local[1] < per_tpc:
      if self._local is not None:
        self.synchronize()
        self._free(self._local[0])
      self._local = (self._alloc(per_tpc * max(self.gpu.sms // 2, 1), cpu=False), per_tpc)
    return self._local[0].va, self._local[1]

  # ---- channels and work
  def queue(self, kind: str = "compute") -> Queue:
    q = Queue(self, "copy" if kind in ("copy", "sdma", "dma") else kind)
    self.queues.append(q)
    return q

  def copy(self, dst: Buffer, src: Buffer, nbytes: int | None = None, dst_offset: int = 0, src_offset: int = 0,
           queue: Queue | None = None) -> int:
    """Copy-engine LAUNCH_DMA (pitch, one line per 1 GiB); either buffer may live on another GPU of the machine."""
    q = queue or self.copy_queue
    nbytes = min(dst.size - dst_offset, src.size - src_offset) if nbytes is None else nbytes
    if dst_offset + nbytes > dst.size or src_offset + nbytes > src.size or nbytes < 0:
      raise GputwinError(f"{self}: copy of {nbytes} bytes exceeds {src} or {dst}")
    for b in (dst, src): b.map_to(q.dev)
    cls = q.engine_class
    launch = N.nvclass(cls).pack("LAUNCH_DMA", DATA_TRANSFER_TYPE="NON_PIPELINED", FLUSH_ENABLE="TRUE",
                                 SRC_MEMORY_LAYOUT="PITCH", DST_MEMORY_LAYOUT="PITCH")
    w = []
    for o in range(0, nbytes, 1 << 30):
      s, d = src.va + src_offset + o, dst.va + dst_offset + o
      w += N.pb_method(SUBC_COPY, "OFFSET_IN_UPPER", s >> 32, s & 0xFFFFFFFF, d >> 32, d & 0xFFFFFFFF, cls=cls)
      w += N.pb_method(SUBC_COPY, "LINE_LENGTH_IN", min(1 << 30, nbytes - o), cls=cls)
      w += N.pb_method(SUBC_COPY, "LAUNCH_DMA", launch, cls=cls)
    return q.submit(w, f"copy of {nbytes} bytes {src.va + src_offset:#x} -> {dst.va + dst_offset:#x}")

  def fill(self, dst: Buffer, value: int, nbytes: int | None = None, queue: Queue | None = None) -> int:
    """Copy-engine fill with a 32-bit pattern (LAUNCH_DMA with REMAP from CONST_A)."""
    q = queue or self.copy_queue
    nbytes = dst.size if nbytes is None else nbytes
    if nbytes % 4 or nbytes > dst.size: raise GputwinError(f"{self}: fill of {nbytes} bytes (4-byte units) in {dst}")
    dst.map_to(q.dev)
    cls, C = q.engine_class, N.nvclass(q.engine_class)
    w = N.pb_method(SUBC_COPY, "SET_REMAP_CONST_A", value & 0xFFFFFFFF, cls=cls) + \
      N.pb_method(SUBC_COPY, "SET_REMAP_COMPONENTS", C.pack("SET_REMAP_COMPONENTS", DST_X="CONST_A", COMPONENT_SIZE="FOUR",
                                                            NUM_DST_COMPONENTS="ONE"), cls=cls) + \
      N.pb_method(SUBC_COPY, "OFFSET_OUT_UPPER", dst.va >> 32, dst.va & 0xFFFFFFFF, cls=cls) + \
      N.pb_method(SUBC_COPY, "LINE_LENGTH_IN", nbytes // 4, cls=cls) + \
      N.pb_method(SUBC_COPY, "LAUNCH_DMA", C.pack("LAUNCH_DMA", DATA_TRANSFER_TYPE="NON_PIPELINED", FLUSH_ENABLE="TRUE",
                                                  SRC_MEMORY_LAYOUT="PITCH", DST_MEMORY_LAYOUT="PITCH",
                                                  REMAP_ENABLE="TRUE"), cls=cls)
    return q.submit(w, f"fill of {nbytes} bytes at {dst.va:#x}")

  def copyin(self, dst: Buffer, a: np.ndarray, via: str = "cpu"):
    """Host array -> buffer: through the CPU mapping, or ("dma") staged in system memory and copied by the copy
    engine."""
    if via == "cpu": return dst.copyin(a)
    if via not in ("dma", "sdma"): raise GputwinError(f"copyin via {via!r}: expected 'cpu' or 'dma'")
    a = np.ascontiguousarray(a)
    stage = self._alloc(a.nbytes, host=True)
    try:
      stage.copyin(a)
      self.copy_queue.wait(self.copy(dst, stage, a.nbytes))
    finally: self._free(stage)

  def copyout(self, a: np.ndarray, src: Buffer, via: str = "cpu") -> np.ndarray:
    if via == "cpu": return src.copyout(a)
    if via not in ("dma", "sdma"): raise GputwinError(f"copyout via {via!r}: expected 'cpu' or 'dma'")
    stage = self._alloc(a.nbytes, host=True)
    try:
      self.copy_queue.wait(self.copy(stage, src, a.nbytes))
      return stage.copyout(a)
    finally: self._free(stage)

  def timestamp(self) -> int:
    """The GPU time now (ns): the usermode page's PTIMER (TIME_1:TIME_0, high word read around the low one)."""
    t = self.ctx.view(np.uint32, 2, R.NVC361_TIME_0)
    while True:
      hi, lo, hi2 = int(t[1]), int(t[0]), int(t[1])
      if hi == hi2: return hi << 32 | lo

  def load(self, code) -> Program:
    """A program for this GPU from PTX (text, bytes, .ptx path) or a program image (bytes, .cubin path,
    cubin.Program), or a Program loaded earlier on this device; uploaded once per content."""
    if isinstance(code, Program) and code.dev is self: return code
    key = id(code) if isinstance(code, cubin.Program) else (bytes(code) if isinstance(code, (bytearray, memoryview))
                                                             else code)
    if key not in self._programs: self._programs[key] = Program(self, _image(code, self.arch, self.real))
    return self._programs[key]

  def launch(self, code, kernel: str, *, grid, block, args, shared_bytes: int = 0, profile: bool = True) -> LaunchResult:
    """gputwin.emu.launch through the GPFIFO path, with its argument rules (gputwin.isa.ptx.params): numpy arrays are
    copied into fresh buffers and back into the same arrays afterwards, Buffers and ints are device addresses,
    numbers are packed per the parameter's type; the launch is waited for."""
    prg = self.load(code)
    t0, bufs = time.perf_counter(), []

    def stage(a):
      if not isinstance(a, np.ndarray): return None
      b = self._alloc(a.nbytes)
      b.copyin(a)
      bufs.append((a, b))
      return b.va
    try:
      g, bl = three(grid, "grid"), three(block, "block")
      v = prg(kernel, *args, grid=g, block=bl, shared_bytes=shared_bytes, profile=profile, pointer=stage)
      self.compute.wait(v)
      for a, b in bufs:
        if a.flags.writeable and a.nbytes: b.copyout(a)
    finally:
      for _, b in bufs: self._free(b)
    nw, ncta = -(-(bl[0] * bl[1] * bl[2]) // 32), g[0] * g[1] * g[2]
    t = prg.timestamps() if profile else (0, 0)
    return LaunchResult(kernel, self.arch, waves=nw * ncta, workgroups=ncta, seconds=time.perf_counter() - t0,
                        wave_size=32, gpu_seconds=max(t[1] - t[0], 0) / 1e9)

  def close(self):
    if self.closed: return
    self.closed = True
    c = self.client
    try: self.synchronize(timeout=5.0)
    except (GPUFault, TimeoutError): pass
    try:
      for q in self.queues: q.destroy()
      for p in self._programs.values(): p.free()
      for b in list(self.buffers.values()): self._free(b)
    finally:
      if self.ctx is not None: c.ungpu(self.ctx)
      c.release()


def open(device: str | None = None) -> Device:   # noqa: A001 - the runtime's entry point, like os.open for a GPU
  """An NVIDIA GPU by device string: "mock:sm_90", "mock:sm_90,sm_80:1", "nv", "nv:N"."""
  return Device(device)
