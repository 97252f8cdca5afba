"""gputwin's HCQ runtime on Qualcomm Adreno (a6xx/a7xx) under the downstream kgsl driver (/dev/kgsl-3d0), with the
same public API as the AMD and NVIDIA runtimes.

    dev = gputwin.runtime.open("mock:a630")            # mock:a660, mock:a730, mock:a740; "qcom" = the real device
    dev.launch("kernels/a630/saxpy.bin", "main", grid=4, args={0: x, 1: y, 4: ubo})   # gputwin.emu.launch's contract
    prg = dev.load(code, shader); v = prg(grid=4, args={0: buf}); dev.wait(v)          # Buffers bound in place

Bring-up: open /dev/kgsl-3d0, KGSL_PROP_DEVICE_INFO (chip id, gpu id), KGSL_PROP_DEVICE_SHADOW (the memstore,
mapped read-only), one draw context (PREAMBLE | NO_GMEM_ALLOC | PER_CONTEXT_TS | NO_FAULT_TOLERANCE). Memory is
GPUOBJ_ALLOC (GPU address from GPUOBJ_INFO) mapped with mmap(fd, id << 12). A submission is one IB in a command
buffer, sent with GPU_COMMAND; its per-context timestamp is the timeline (`wait` = DEVICE_WAITTIMESTAMP_CTXTID), and
the IB itself ends by writing the timestamp to the device's signal page (CP_EVENT_WRITE / CP_EVENT_WRITE7).

A launch programs the CS state the way Mesa's a6xx/a7xx drivers do, with gputwin.abi.adreno: HLSQ_INVALIDATE_CMD,
SP_CS_CTRL_REG0/1 (register footprint, thread size, shared size), HLSQ_CS_CNTL, SP_CS_CONFIG (bindless IBOs and
UBOs), SP_CS_INSTRLEN / SP_CS_OBJ_START, private memory, HLSQ_CS_NDRANGE_0..6, HLSQ_CS_CNTL_0 / SP_CS_CNTL_0 (where the
local and workgroup ids go: the listing's inputs), HLSQ/SP_CS_CNTL_1, HLSQ_CS_KERNEL_GROUP_X..Z, the bindless base
of descriptor set 0 (binding b = descriptor b: a 64-byte buffer IBO descriptor, FMT6_8_UINT over the array's bytes, or
for a UBO block an A6XX_UBO descriptor), CP_LOAD_STATE6_FRAG of the shader and of the const file (immediates, pushed
UBO ranges, driver params: gputwin.isa.ir3.listing.Shader.const_file), CP_EXEC_CS between two CP_ALWAYS_ON_COUNTER
reads.
A faulted context (EDEADLK) raises `QueueFault` naming device, context, timestamp, kernel and the driver's account
(`gpu_error`: the mock's emulator error); the device then creates a fresh context and goes on.
"""
from __future__ import annotations
import ctypes, errno, threading, time
from pathlib import Path
import numpy as np
from gputwin.abi import adreno as A, kgsl as K
from gputwin.errors import GPUFault, GputwinError, KernelDriverError, LaunchError
from gputwin.isa.kernargs import three
from gputwin.runtime import hcq
from gputwin.runtime.hcq import LaunchResult, QueueFault
from gputwin.runtime.kernel import OSKernel, kernel_for, parse_device

DEV = "/dev/kgsl-3d0"
PROT_READ, PROT_RW, MAP_SHARED = 0x1, 0x3, 0x01
PAGE = 4096
CMDBUF, ARENA = 1 << 20, 4 << 20
CONTEXT_FLAGS = K.KGSL_CONTEXT_PREAMBLE | K.KGSL_CONTEXT_NO_GMEM_ALLOC | K.KGSL_CONTEXT_PER_CONTEXT_TS | \
  K.KGSL_CONTEXT_NO_FAULT_TOLERANCE | (K.KGSL_CONTEXT_TYPE_CL << K.KGSL_CONTEXT_TYPE_SHIFT)
ALWAYS_ON_HZ = 19_200_000
CONST_VEC4 = 512                  # the CS const file (2048 dwords) uploaded whole
NO_REG = 0xFC                     # regid(63, 0): no register
DESC = 64                         # bytes per bindless descriptor (BINDLESS_DESCRIPTOR_64B)
FMT6_8_UINT, A6XX_TEX_BUFFER = 0x05, 4
SHARED_LIMIT = 32 << 10
SIG_TIMELINE, SIG_STAMPS = 0, 64  # signal page: the timeline (8 bytes), then begin/end always-on pairs per slot


class Buffer(hcq.Buffer):
  """A GPU object: `va` its GPU address, `cpu` its mapping, `handle` the kgsl id, `nbytes` the size asked for (what
  a descriptor of it covers; `size` is whole pages)."""

  def __init__(self, owner: "Device", va: int, size: int, handle: int, cpu: int, nbytes: int):
    super().__init__(owner, va, size, handle, cpu, 0)
    self.nbytes = nbytes

  def map_to(self, dev):
    if dev is not self.owner: raise GputwinError(f"{self}: an Adreno has one GPU; no peer mappings")


def ibo_descriptor(va: int, nbytes: int) -> list[int]:
  """A buffer IBO descriptor (A6XX_TEX_CONST, 16 dwords): FMT6_8_UINT texels over nbytes from va."""
  if nbytes >= 1 << 30: raise LaunchError(f"a buffer IBO holds less than 1 GiB; {nbytes} bytes given")
  return [FMT6_8_UINT << 22, (nbytes & 0x7FFF) | (nbytes >> 15) << 15, A6XX_TEX_BUFFER << 29, 0, va & 0xFFFFFFE0,
          (va >> 32) & 0x1FFFF] + [0] * 10


def ubo_descriptor(va: int, nbytes: int) -> list[int]:
  """An A6XX_UBO descriptor: BASE and SIZE in vec4 (rounded up)."""
  return [va & 0xFFFFFFFF, (va >> 32) & 0x1FFFF | (-(-nbytes // 16) & 0x7FFF) << 17]


class Program:
  """ir3 machine code uploaded to a GPU object, with its launch metadata (a gputwin.isa.ir3.listing.Shader)."""

  def __init__(self, dev: "Device", code: bytes, shader):
    self.dev, self.code, self.shader = dev, code, shader
    if shader.shared_size > SHARED_LIMIT:
      raise LaunchError(f"[{dev.arch}] {shader.shared_size} bytes of shared memory exceed {SHARED_LIMIT}", dev.arch)
    self.instrlen = -(-len(code) // 128)
    self.mem = dev.alloc(self.instrlen * 128)
    self.mem.copyin(np.frombuffer(code.ljust(self.instrlen * 128, b"\0"), np.uint8))
    self.pvt = None
    if shader.pvtmem_size:   # a backing store for every fiber the SP may hold (mock: grows with the grid)
      self.pvt = dev.alloc(-(-shader.pvtmem_size // 512) * 512 * 128 * 64)
    self.last_timestamps: tuple[int, int] | None = None

  def state(self, grid, consts_va: int, set_va: int, stamp: int) -> list[int]:
    """The PM4 of one dispatch (A6XX or A7XX register offsets from the GPU's generation)."""
    from gputwin.isa.ir3.listing import LOCAL_ID, WORKGROUP_ID
    g, sh = self.dev.gen, self.shader
    r = lambda name, *v: A.pkt4(A.reg(g, name), *v)
    f = lambda name, **kw: A.reg_pack(g, name, **kw)
    lid = next((i.reg for i in sh.inputs if i.sysval == LOCAL_ID), NO_REG)
    wid = next((i.reg for i in sh.inputs if i.sysval == WORKGROUP_ID), NO_REG)
    bad = [i for i in sh.inputs if i.sysval not in (LOCAL_ID, WORKGROUP_ID) or i.half]
    if bad:
      raise LaunchError(f"[{self.dev.arch}] input {bad[0].name} ({bad[0].sysval}) has no CS register", self.dev.arch)
    ts = "THREAD128" if sh.wave_size == 128 else "THREAD64"
    lx, ly, lz = sh.local_size
    shared = max((sh.shared_size - 1) // 1024, 1)   # (n + 1) KiB, as Mesa sizes it
    ctrl1 = dict(SHARED_SIZE=shared, CONSTANTRAMMODE="CONSTLEN_512")
    cntl0 = dict(WGIDCONSTID=wid, WGSIZECONSTID=NO_REG, WGOFFSETCONSTID=NO_REG, LOCALIDREGID=lid)
    pvt = -(-sh.pvtmem_size // 512)
    w = A.cp_set_marker(g, MODE="RM6_COMPUTE") + r("HLSQ_INVALIDATE_CMD", f("HLSQ_INVALIDATE_CMD", CS_STATE=1,
                                                                             CS_IBO=1)) + A.cp_wait_for_idle(g)
    w += r("SP_CS_CTRL_REG0", f("SP_CS_CTRL_REG0", THREADSIZE=ts, FULLREGFOOTPRINT=max(sh.max_reg + 1, 1),
                                HALFREGFOOTPRINT=max(sh.max_half_reg + 1, 0), BRANCHSTACK=sh.branchstack,
                                MERGEDREGS=int(sh.mergedregs), EARLYPREAMBLE=int(sh.early_preamble)))
    w += r("SP_CS_CTRL_REG1", f("SP_CS_CTRL_REG1", **ctrl1))
    if g == "A6XX": w += r("HLSQ_CS_CTRL_REG1", f("HLSQ_CS_CTRL_REG1", **ctrl1))
    w += r("HLSQ_CS_CNTL", f("HLSQ_CS_CNTL", CONSTLEN=CONST_VEC4, ENABLED=1))
    w += r("SP_CS_CONFIG", f("SP_CS_CONFIG", ENABLED=1, BINDLESS_IBO=1, BINDLESS_UBO=1))
    w += r("SP_CS_INSTRLEN", self.instrlen) + r("SP_CS_OBJ_FIRST_EXEC_OFFSET", 0)
    w += r("SP_CS_OBJ_START", *A.lo_hi(self.mem.va))
    w += r("SP_CS_PVT_MEM_PARAM", f("SP_CS_PVT_MEM_PARAM", MEMSIZEPERITEM=pvt))
    w += r("SP_CS_PVT_MEM_ADDR", *A.lo_hi(self.pvt.va if self.pvt else 0))
    w += r("SP_CS_PVT_MEM_SIZE", f("SP_CS_PVT_MEM_SIZE", TOTALPVTMEMSIZE=self.pvt.size >> 12 if self.pvt else 0,
                                   PERWAVEMEMLAYOUT=int(sh.pvtmem_per_wave)))
    w += r("HLSQ_CS_NDRANGE_0", f("HLSQ_CS_NDRANGE_0", KERNELDIM=3, LOCALSIZEX=lx - 1, LOCALSIZEY=ly - 1,
                                  LOCALSIZEZ=lz - 1), grid[0] * lx, 0, grid[1] * ly, 0, grid[2] * lz, 0)
    if g == "A6XX": w += r("HLSQ_CS_CNTL_0", f("HLSQ_CS_CNTL_0", **cntl0))
    w += r("SP_CS_CNTL_0", f("SP_CS_CNTL_0", **cntl0))
    w += r("HLSQ_CS_CNTL_1", f("HLSQ_CS_CNTL_1", LINEARLOCALIDREGID=NO_REG, THREADSIZE=ts))
    w += r("SP_CS_CNTL_1", f("SP_CS_CNTL_1", LINEARLOCALIDREGID=NO_REG, THREADSIZE=ts))
    w += r("HLSQ_CS_KERNEL_GROUP_X", *grid)
    base = set_va | A.enum(g, "a6xx_bindless_descriptor_size")["BINDLESS_DESCRIPTOR_64B"]
    w += A.pkt4(A.reg(g, "SP_CS_BINDLESS_BASE", 0), *A.lo_hi(base))
    if g == "A6XX": w += A.pkt4(A.reg(g, "HLSQ_CS_BINDLESS_BASE", 0), *A.lo_hi(base))
    w += A.cp_load_state6(g, "SB6_CS_SHADER", "ST6_SHADER", "SS6_INDIRECT", 0, self.instrlen, self.mem.va,
                          stage="FRAG")
    w += A.cp_load_state6(g, "SB6_CS_SHADER", "ST6_CONSTANTS", "SS6_INDIRECT", 0, CONST_VEC4, consts_va, stage="FRAG")
    ao = A.reg(g, "CP_ALWAYS_ON_COUNTER")
    w += A.cp_wait_for_idle(g) + A.cp_reg_to_mem(g, ao, stamp, 2, b64=True) + A.cp_exec_cs(g, *grid)
    w += A.cp_wait_for_idle(g) + A.cp_reg_to_mem(g, ao, stamp + 8, 2, b64=True)
    return w

  def __call__(self, *, grid, args: dict, kernel: str = "main") -> int:
    """Dispatch over `grid` with `args` {binding: Buffer} (bound in place; UBO blocks as UBOs) and the const file
    built from the listing; returns the timestamp that marks completion."""
    dev, sh = self.dev, self.shader
    grid = three(grid, "grid")
    ubo_blocks = {r.block for r in sh.ubo_ranges}
    for b, v in args.items():
      if not isinstance(v, Buffer): raise LaunchError(f"[{dev.arch}] kernel {kernel}: binding {b} must be a Buffer")
    ubos = {b: v.view(np.uint8, v.nbytes) for b, v in args.items() if b in ubo_blocks}
    consts = sh.const_file(grid, ubos, f"[{dev.arch}] kernel {kernel}")
    nset = max((int(b) for b in args), default=-1) + 1
    with dev.lock:
      at = dev._arena(consts.nbytes + nset * DESC)
      dev.arena.copyin(consts, at - dev.arena.va)
      for b, v in args.items():
        d = ubo_descriptor(v.va, v.nbytes) if b in ubo_blocks else ibo_descriptor(v.va, v.nbytes)
        dev.arena.copyin(np.array(d, np.uint32), at + consts.nbytes + int(b) * DESC - dev.arena.va)
      stamp = dev.signal.va + SIG_STAMPS + 16 * (dev.slot % 250)
      dev.slot += 1
      w = self.state(grid, at, at + consts.nbytes, stamp)
      v = dev.submit(w, f"launch of kernel {kernel} (grid {grid}, local {tuple(sh.local_size)})", kernel)
      self.last_timestamps = (stamp - dev.signal.va, v)
    return v

  def timestamps(self) -> tuple[int, int]:
    """Always-on counter (19.2 MHz ticks) before and after the last dispatch (after it completed)."""
    off, _ = self.last_timestamps
    t = self.dev.signal.view(np.uint64, 2, off)
    return int(t[0]), int(t[1])

  def free(self):
    self.dev.free(self.mem)
    if self.pvt is not None: self.dev.free(self.pvt)


def _read_code(code, shader, arch: str):
  """(machine code, Shader): a Mesa `.bin` path (its listing `.txt` beside it), bytes with a Shader, or assembly."""
  from gputwin.isa.ir3 import listing
  if isinstance(code, (str, Path)) and "\n" not in str(code) and str(code).endswith((".bin", ".txt")):
    p = Path(code).with_suffix(".bin")
    try: data = p.read_bytes()
    except OSError as e: raise LaunchError(f"cannot read {p}: {e.strerror}") from None
    return data, shader or listing.read(p)
  if isinstance(code, (bytes, bytearray, memoryview)): data = bytes(code)
  else:
    from gputwin.isa.ir3 import assemble
    data = assemble(str(code), arch)
  if len(data) % 8: raise LaunchError(f"ir3 code is {len(data)} bytes, not a whole number of 64-bit instructions")
  return data, shader or listing.Shader.explicit(arch, data)


class Device:
  """One Adreno: `open("mock:a630")`, `open("qcom")`. One draw context (re-created after a fault); the Device API of
  the AMD and NVIDIA runtimes (alloc/free, copyin/copyout/copy, load, launch, wait/synchronize, close)."""

  def __init__(self, device: str | None = None):
    self.spec = parse_device(device)
    if self.spec.vendor != "qcom": raise KernelDriverError(f"device {device!r} is not an Adreno device")
    self.k = kernel_for(device)
    self.real = isinstance(self.k, OSKernel)
    self.buffers: dict[int, Buffer] = {}
    self._programs: dict = {}
    self.lock = threading.RLock()
    self.closed, self.fd, self.ctx, self.memstore = False, None, None, 0
    self.timeline, self.slot, self.submissions = 0, 0, {}
    try:
      self.fd = self.k.open(DEV)
      info = self._prop(K.KGSL_PROP_DEVICE_INFO, K.kgsl_devinfo())
      self.chip_id, self.gpu_id = info.chip_id, info.gpu_id
      self.arch = f"a{info.gpu_id}" if info.gpu_id else \
        f"a{info.chip_id >> 24 & 0xFF}{info.chip_id >> 16 & 0xFF}{info.chip_id >> 8 & 0xFF}"
      self.gen = A.gen_of(self.arch)
      self.name = str(self.spec) if self.spec.kind == "mock" else "qcom"
      sh = self._prop(K.KGSL_PROP_DEVICE_SHADOW, K.kgsl_shadowprop())
      self.memstore_va, self.memstore_size = sh.gpuaddr, sh.size
      self.memstore = self.k.mmap(self.fd, sh.gpuaddr, sh.size, PROT_READ, MAP_SHARED)
      self._new_context()
      self.cmdbuf, self.arena, self.signal = self.alloc(CMDBUF), self.alloc(ARENA), self.alloc(PAGE)
      self.cmd_at = self.arena_at = 0
    except BaseException:
      self.close()
      raise

  def __repr__(self): return f"Device({self.name}, {self.arch}, chip_id={self.chip_id:#010x})"
  def __str__(self): return f"{self.name} ({self.arch}, chip id {self.chip_id:#010x})"
  def __enter__(self): return self
  def __exit__(self, *a): self.close()

  def ioctl(self, name: str, **fields):
    a = getattr(K, next(r[3] for r in K.IOCTLS if r[0] == name).__name__)(**fields)
    self.k.ioctl(self.fd, K.IOCTL_NUMBERS[name], a)
    return a

  def _prop(self, t: int, out):
    self.ioctl("DEVICE_GETPROPERTY", type=t, value=ctypes.addressof(out), sizebytes=ctypes.sizeof(out))
    return out

  def _new_context(self):
    self.ctx = self.ioctl("DRAWCTXT_CREATE", flags=CONTEXT_FLAGS).drawctxt_id
    self.timeline = 0

  # ---- memory
  def alloc(self, nbytes: int, host: bool = False) -> Buffer:
    """A GPU object (CPU-mapped; Adreno memory is system memory, so `host` changes nothing)."""
    size = (max(nbytes, 1) + PAGE - 1) & ~(PAGE - 1)
    o = self.ioctl("GPUOBJ_ALLOC", size=size, flags=12 << K.KGSL_MEMALIGN_SHIFT)
    try:
      va = self.ioctl("GPUOBJ_INFO", id=o.id).gpuaddr
      cpu = self.k.mmap(self.fd, o.id << 12, o.mmapsize, PROT_RW, MAP_SHARED)
    except BaseException:
      self.ioctl("GPUOBJ_FREE", id=o.id)
      raise
    b = self.buffers[va] = Buffer(self, va, o.mmapsize, o.id, cpu, nbytes)
    return b

  def free(self, b: Buffer):
    if self.buffers.pop(b.va, None) is None: return
    if b.cpu: self.k.munmap(b.cpu, b.size)
    b.cpu = 0
    self.ioctl("GPUOBJ_FREE", id=b.handle)

  def copyin(self, dst: Buffer, a: np.ndarray, via: str = "cpu"):
    """Host array -> buffer through the CPU mapping (via="cp": staged, then copied by CP_MEM_TO_MEM)."""
    if via == "cpu": return dst.copyin(a)
    a = np.ascontiguousarray(a)
    stage = self.alloc(a.nbytes)
    try:
      stage.copyin(a)
      self.wait(self.copy(dst, stage, a.nbytes))
    finally: self.free(stage)

  def copyout(self, a: np.ndarray, src: Buffer, via: str = "cpu") -> np.ndarray:
    if via == "cpu": return src.copyout(a)
    stage = self.alloc(a.nbytes)
    try:
      self.wait(self.copy(stage, src, a.nbytes))
      return stage.copyout(a)
    finally: self.free(stage)

  def copy(self, dst: Buffer, src: Buffer, nbytes: int | None = None, dst_offset: int = 0, src_offset: int = 0) -> int:
    """A CP copy: one CP_MEM_TO_MEM per 8 bytes (DOUBLE) and per remaining 4; nbytes a multiple of 4."""
    nbytes = min(dst.size - dst_offset, src.size - src_offset) if nbytes is None else nbytes
    if nbytes % 4 or nbytes < 0 or dst_offset + nbytes > dst.size or src_offset + nbytes > src.size:
      raise GputwinError(f"{self}: copy of {nbytes} bytes (4-byte units) exceeds {src} or {dst}")
    d, s, w = dst.va + dst_offset, src.va + src_offset, []
    for o in range(0, nbytes - nbytes % 8, 8): w += A.cp_mem_to_mem(self.gen, d + o, s + o, double=True)
    if nbytes % 8: w += A.cp_mem_to_mem(self.gen, d + nbytes - 4, s + nbytes - 4)
    return self.submit(w, f"CP copy of {nbytes} bytes {s:#x} -> {d:#x}")

  def _arena(self, n: int) -> int:
    """n bytes of launch state that stay untouched until the launch using them has completed."""
    n = (n + 255) & ~255
    if n > self.arena.size: raise LaunchError(f"{self}: {n} bytes of launch state exceed the arena")
    if self.arena_at + n > self.arena.size:
      self.synchronize()
      self.arena_at = 0
    va = self.arena.va + self.arena_at
    self.arena_at += n
    return va

  # ---- submissions and timelines
  def submit(self, words: list[int], what: str, kernel: str = "") -> int:
    """One IB: `words`, then the timestamp write to the signal page; GPU_COMMAND; returns the context timestamp."""
    with self.lock:
      ts = self.timeline + 1
      words = list(words) + A.cp_event_write(self.gen, "CACHE_FLUSH_TS", self.signal.va + SIG_TIMELINE, ts)
      n = len(words) * 4
      if n > self.cmdbuf.size // 2: raise GputwinError(f"{self}: a submission of {n} bytes does not fit")
      if self.cmd_at + n > self.cmdbuf.size:
        self.synchronize()
        self.cmd_at = 0
      va = self.cmdbuf.va + self.cmd_at
      self.cmdbuf.copyin(np.array(words, np.uint32), self.cmd_at)
      self.cmd_at = (self.cmd_at + n + 63) & ~63
      obj = K.kgsl_command_object(gpuaddr=va, size=n, flags=K.KGSL_CMDLIST_IB)
      a = self.ioctl("GPU_COMMAND", cmdlist=ctypes.addressof(obj), cmdsize=ctypes.sizeof(obj), numcmds=1,
                     context_id=self.ctx)
      self.timeline = a.timestamp
      self.submissions[a.timestamp] = (what, kernel)
      if len(self.submissions) > 4096: self.submissions = dict(list(self.submissions.items())[-2048:])
      return a.timestamp

  def retired(self) -> int:
    """The context's retired timestamp (the memstore's eoptimestamp)."""
    o = K.KGSL_MEMSTORE_OFFSET(self.ctx, "eoptimestamp")
    return ctypes.c_uint32.from_address(self.memstore + o).value

  def wait(self, value: int | None = None, timeout: float = 30.0):
    """Until timestamp `value` (default: the last submitted) retired: DEVICE_WAITTIMESTAMP_CTXTID. A fault of this
    context raises QueueFault (and the device goes on with a new context); a fault elsewhere (EPROTO) is success."""
    value = self.timeline if value is None else value
    if value == 0: return
    try: self.ioctl("DEVICE_WAITTIMESTAMP_CTXTID", context_id=self.ctx, timestamp=value,
                    timeout=max(int(timeout * 1000), 1))
    except OSError as e:
      if e.errno == errno.EPROTO: return
      if e.errno == errno.ETIMEDOUT:
        raise hcq.QueueTimeout(f"{self}: context {self.ctx} at timestamp {self.retired()}, waited {timeout:g} s "
                               f"for {value}") from None
      if e.errno == errno.EDEADLK: self._faulted()
      raise

  def _faulted(self):
    """The context was faulted: name the submission (KGSL_PROP_CONTEXT_PROPERTY faults), ask the driver for its
    account, replace the context, raise QueueFault."""
    ctx, ts = self.ctx, 0
    try:
      out = K.kgsl_context_property_fault()
      q = K.kgsl_context_property(data=ctypes.addressof(out), size=ctypes.sizeof(out), type=K.KGSL_CONTEXT_PROP_FAULTS,
                                  contextid=ctx)
      self._prop(K.KGSL_PROP_CONTEXT_PROPERTY, q)
      ts = out.timestamp
    except OSError: pass
    what, kernel = self.submissions.get(ts, ("no recorded submission", ""))
    err = self.k.gpu_error(0, self.memstore_va + K.KGSL_MEMSTORE_OFFSET(ctx, "eoptimestamp"))
    why = f"{err}" if err is not None else "context reset (guilty)"
    self._new_context()
    try: self.ioctl("DRAWCTXT_DESTROY", drawctxt_id=ctx)
    except OSError: pass
    e = QueueFault(f"{self}: context {ctx} was faulted by the GPU at timestamp {ts} ({what}): {why}; the device goes "
                   f"on with context {self.ctx}", str(self), ctx, ts, getattr(err, "va", None), kernel, err)
    e.submission = ts
    raise e

  def synchronize(self, timeout: float = 60.0): self.wait(timeout=timeout)

  def timestamp(self) -> int:
    """The GPU's always-on counter now (19.2 MHz ticks), read through a CP_REG_TO_MEM submission."""
    with self.lock:
      off = SIG_STAMPS + 16 * 250
      v = self.submit(A.cp_reg_to_mem(self.gen, A.reg(self.gen, "CP_ALWAYS_ON_COUNTER"), self.signal.va + off, 2,
                                      b64=True), "always-on counter read")
    self.wait(v)
    return int(self.signal.view(np.uint64, 1, off)[0])

  # ---- programs
  def load(self, code, shader=None) -> Program:
    """ir3 code: a Mesa `.bin` path (listing beside it), bytes (+ Shader), assembly text, or a Program of this
    device; uploaded once per content."""
    if isinstance(code, Program) and code.dev is self: return code
    data, sh = _read_code(code, shader, self.arch)
    key = (data, sh)
    if key not in self._programs: self._programs[key] = Program(self, data, sh)
    return self._programs[key]

  def launch(self, code, kernel: str = "main", *, grid, block=None, args: dict | None = None, shader=None,
             profile: bool = True) -> LaunchResult:
    """gputwin.emu.launch's contract: `args` {binding: ndarray} copied into fresh GPU objects (SSBOs as IBOs, the
    listing's UBO blocks as UBOs) and back (writeable, non-UBO ones) after the launch, which is waited for."""
    prg = self.load(code, shader)
    where = f"[{self.arch}] kernel {kernel}"
    try:  # (a variable local size takes `block`; a positional args list binds by the shader's params)
      sh, args = prg.shader.bind(args, block, where)
    except LaunchError as e:
      raise LaunchError(str(e), self.arch, kernel) from None
    if sh is not prg.shader: prg = self.load(prg.code, sh)
    g, t0, bufs = three(grid, "grid"), time.perf_counter(), {}
    ubo_blocks = {r.block for r in sh.ubo_ranges}
    try:
      for b, a in sorted((args or {}).items()):
        if not isinstance(a, np.ndarray):
          raise LaunchError(f"{where}: binding {b} must be a numpy array, got {type(a).__name__}", self.arch, kernel)
        buf = bufs[int(b)] = self.alloc(a.nbytes)
        if a.nbytes: buf.copyin(a)
      v = prg(grid=g, args=bufs, kernel=kernel)
      self.wait(v)
      for b, a in (args or {}).items():
        if b not in ubo_blocks and a.flags.writeable and a.nbytes:
          a[...] = bufs[int(b)].view(np.uint8, a.nbytes).view(a.dtype).reshape(a.shape)
    finally:
      for buf in bufs.values(): self.free(buf)
    L = sh.wave_size
    nw, nwg = -(-(sh.local_size[0] * sh.local_size[1] * sh.local_size[2]) // L), g[0] * g[1] * g[2]
    t = prg.timestamps() if profile else (0, 0)
    return LaunchResult(kernel, self.arch, waves=nw * nwg, workgroups=nwg, seconds=time.perf_counter() - t0,
                        wave_size=L, gpu_seconds=max(t[1] - t[0], 0) / ALWAYS_ON_HZ)

  def close(self):
    if self.closed: return
    self.closed = True
    try:
      if self.ctx is not None:
        try: self.synchronize(timeout=5.0)
        except (GPUFault, TimeoutError, OSError): pass
      for p in self._programs.values(): p.free()
      for b in list(self.buffers.values()): self.free(b)
      if self.ctx is not None: self.ioctl("DRAWCTXT_DESTROY", drawctxt_id=self.ctx)
      if self.memstore: self.k.munmap(self.memstore, self.memstore_size)
    finally:
      if self.fd is not None: self.k.close(self.fd)


def open(device: str | None = None) -> Device:   # noqa: A001 - the runtime's entry point, like os.open for a GPU
  """An Adreno by device string: "mock:a630", "mock:a660", "mock:a730", "mock:a740", "qcom"."""
  return Device(device)
