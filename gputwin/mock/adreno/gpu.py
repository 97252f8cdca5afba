"""The virtual Adreno (a630/a660/a730/a740) behind MockKGSL: `VirtualAdreno` is MockKGSL's command processor
(`cp.submit(k, sub)`): a CP thread per draw context (or, with MockKGSL(sync=True), `poll(k)` in the waiter) runs
each submission's IBs (gputwin.mock.adreno.cp), then `k.retire(sub)`, or `k.fault(sub, reason, va, error)`.

A compute dispatch reads the CS registers and state the way the SP/HLSQ would and runs the shader on
gputwin.emu.ir3.launch.run over the process's GPU memory (gputwin.mock.vm.GPUMemory):
  local size       HLSQ_CS_NDRANGE_0 LOCALSIZEX/Y/Z + 1 (CP_EXEC_CS_INDIRECT: its own dword 3)
  wave size        SP_CS_CTRL_REG0.THREADSIZE (THREAD128 -> 128 fibers, else 64)
  shared memory    SP_CS_CTRL_REG1.SHARED_SIZE: (n + 1) KiB
  private memory   SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM x 512 bytes per fiber, SP_CS_PVT_MEM_SIZE.PERWAVEMEMLAYOUT
  inputs           SP_CS_CNTL_0.LOCALIDREGID (local id, .xyz) and WGIDCONSTID (workgroup id, .xyz), regids;
                   0xfc and above: none. WGSIZECONSTID/WGOFFSETCONSTID and HLSQ_CS_CNTL_1.LINEARLOCALIDREGID other
                   than none are not modelled (the dispatch faults)
  code             SP_CS_INSTRLEN x 128 bytes from SP_CS_OBJ_START (what ST6_SHADER preloaded into the instruction
                   cache is used first), entered at SP_CS_OBJ_FIRST_EXEC_OFFSET
  const file       what ST6_CONSTANTS loaded (the whole file goes to the shader)
  IBOs / UBOs      SP_CS_CONFIG.BINDLESS_IBO / BINDLESS_UBO set: descriptor set 0 (SP_CS_BINDLESS_BASE[0], 16- or
                   64-byte descriptors), read at dispatch; else the ST6_IBO / ST6_UBO slots loaded for the CS
An IBO descriptor (A6XX_TEX_CONST) binds a buffer when its TYPE is A6XX_TEX_BUFFER: BASE + STARTOFFSETTEXELS,
WIDTH + HEIGHT << 15 texels of FMT's size; a UBO descriptor (A6XX_UBO) binds BASE and SIZE vec4s.
"""
from __future__ import annotations
import collections, threading
import numpy as np
from gputwin.abi import adreno as A
from gputwin.mock.adreno.cp import MAX_PACKETS, CommandProcessor, CPFault, CPState

IDLE_EXIT = 1.0                   # seconds a context's CP thread waits for work before it ends (a new one starts)
NO_REG = 0xFC                     # regid(63, 0): "no register" in the SP/HLSQ regid fields
MAX_LOCAL = 1024                  # work-items per workgroup (a6xx/a7xx compute limit)
MAX_CODE = 1 << 20                # mock: bytes of shader code one dispatch may fetch
BINDLESS_SETS_READ = 64           # mock: descriptors of set 0 read per dispatch (fewer when its mapping ends)
TEX_BUFFER = 4                    # a6xx_tex_type A6XX_TEX_BUFFER
FORMAT_BYTES = {0x05: 1, 0x11: 2, 0x17: 2, 0x18: 2, 0x30: 4, 0x33: 4, 0x46: 4, 0x4A: 4, 0x4B: 4, 0x4C: 4, 0x62: 8,
                0x63: 8, 0x67: 8, 0x68: 8, 0x82: 16, 0x83: 16}   # a6xx_format FMT6_* of buffer views: bytes/texel


def ibo_buffer(d) -> tuple[int, int] | None:
  """(address, bytes) of a buffer IBO descriptor (A6XX_TEX_CONST dwords), None when it is no buffer view."""
  d = [int(x) for x in d]
  fmt, typ = d[0] >> 22 & 0xFF, d[2] >> 29 & 7
  if typ != TEX_BUFFER or fmt not in FORMAT_BYTES: return None
  es = FORMAT_BYTES[fmt]
  texels = (d[1] & 0x7FFF) | (d[1] >> 15 & 0x7FFF) << 15
  base = (d[4] & ~31) | (d[5] & 0x1FFFF) << 32
  return base + (d[2] >> 16 & 0x3F) * es, texels * es


def ubo_buffer(d) -> tuple[int, int] | None:
  """(address, bytes) of an A6XX_UBO descriptor, None when it is empty."""
  d0, d1 = int(d[0]), int(d[1])
  va, size = d0 | (d1 & 0x1FFFF) << 32, (d1 >> 17) * 16
  return (va, size) if va or size else None


class VirtualAdreno:
  """MockKGSL's command processor for `target` (a630, a660, a730, a740). `wait_timeout`: seconds a CP_WAIT_* may
  spin before the context is faulted as hung; `max_instructions`: a per-dispatch watchdog for shaders (None: off;
  it also turns the emulator's fast path off); `max_packets`: packets per submission before "long IB detection"."""

  def __init__(self, target: str, wait_timeout: float = 2.0, max_instructions: int | None = None,
               max_packets: int = MAX_PACKETS):
    self.target, self.gen = target, A.gen_of(target)
    self.wait_timeout, self.max_instructions, self.max_packets = wait_timeout, max_instructions, max_packets
    self._lock = threading.Lock()
    self._states: dict = {}                           # Context -> CPState
    self._queues: dict = {}                           # Context -> deque of submissions (threaded mode)
    self._threads: dict = {}
    self._events: dict = {}                           # Context -> Event: work queued for its thread
    self._sync: collections.deque = collections.deque()
    self.dispatches = 0

  def __repr__(self): return f"VirtualAdreno({self.target})"

  # ---- MockKGSL's hook
  def submit(self, k, sub) -> None:
    if k.sync:
      self._sync.append(sub)
      return
    with self._lock:
      self._queues.setdefault(sub.context, collections.deque()).append(sub)
      t = self._threads.get(sub.context)
      if t is None or not t.is_alive():
        t = self._threads[sub.context] = threading.Thread(target=self._thread, args=(k, sub.context), daemon=True,
                                                          name=f"adreno-cp-{self.target}-ctx{sub.context.id}")
        t.start()
      self._wake(sub.context)

  def poll(self, k) -> bool:
    """Synchronous mode: run one queued submission; True when one ran."""
    if not self._sync: return False
    self.run(k, self._sync.popleft())
    return True

  def _wake(self, ctx): self._events.setdefault(ctx, threading.Event()).set()

  def _thread(self, k, ctx):
    with self._lock: ev = self._events.setdefault(ctx, threading.Event())
    while True:
      with self._lock:
        q = self._queues.get(ctx)
        sub = q.popleft() if q else None
        if sub is None:
          ev.clear()
      if sub is not None:
        self.run(k, sub)
        continue
      if ctx.detached or not ev.wait(IDLE_EXIT):
        with self._lock:
          if self._queues.get(ctx): continue
          self._queues.pop(ctx, None)
          self._threads.pop(ctx, None)
          self._events.pop(ctx, None)
          if ctx.detached: self._states.pop(ctx, None)
        return

  # ---- one submission
  def state(self, ctx) -> CPState:
    from gputwin.isa.ir3.listing import CONST_DWORDS
    with self._lock:
      if ctx not in self._states:
        for c in [c for c in self._states if c.detached and c not in self._threads]: del self._states[c]
        self._states[ctx] = CPState(np.zeros(CONST_DWORDS, np.uint32))
      return self._states[ctx]

  def run(self, k, sub) -> None:
    """Execute `sub`'s IBs in order; retire it, or fault its context naming target, context, timestamp and cause.
    The fault's `va` key (for `k.gpu_error`) is the context's eoptimestamp memstore address, which its owner knows;
    the faulting address is the error's own `va`."""
    c = sub.context
    if c.invalid or c.detached: return
    cp = CommandProcessor(self, self.state(c), sub.vm, self.wait_timeout)
    try:
      for ib in sub.cmds: cp.ib(ib.gpuaddr, ib.size // 4)
    except CPFault as e:
      err = e.error if e.error is not None else e
      k.fault(sub, f"{self.target} context {c.id} timestamp {sub.timestamp}: {e}", k.memstore_addr(c.id,
              "eoptimestamp"), err)
      return
    except Exception as e:   # a CP bug must not take the host process down either
      k.fault(sub, f"{self.target} context {c.id} timestamp {sub.timestamp}: internal CP error at {cp.where:#x}: "
              f"{type(e).__name__}: {e}", k.memstore_addr(c.id, "eoptimestamp"), e)
      return
    k.retire(sub)

  # ---- compute
  def dispatch(self, cp: CommandProcessor, grid: tuple, local: tuple | None = None) -> None:
    """CP_EXEC_CS(_INDIRECT): the CS registers and state -> Shader, IBO/UBO bindings, const file -> the emulator."""
    from gputwin.emu.ir3 import launch
    from gputwin.errors import EmuError, GPUPageFault
    from gputwin.isa.ir3.listing import LOCAL_ID, WORKGROUP_ID, Input, Shader
    from gputwin.mock.vm import GPUMemory
    st, g, where = cp.st, self.gen, cp.where
    reg = lambda name: st.regs.get(A.reg(g, name), 0)
    fld = lambda name: A.unpack(A.reg_fields(g, name), reg(name))
    if local is None:
      nd = fld("HLSQ_CS_NDRANGE_0")
      local = (nd["LOCALSIZEX"] + 1, nd["LOCALSIZEY"] + 1, nd["LOCALSIZEZ"] + 1)
    if any(x == 0 for x in grid): return
    if local[0] * local[1] * local[2] > MAX_LOCAL:
      raise CPFault(f"dispatch at {where:#x}: local size {local} exceeds {MAX_LOCAL} work-items", where)
    code = self._code(cp, reg, where)
    c0, c1, cn = fld("SP_CS_CTRL_REG0"), fld("SP_CS_CTRL_REG1"), fld("SP_CS_CNTL_0")
    lin = fld("HLSQ_CS_CNTL_1")["LINEARLOCALIDREGID"]
    for name, v in (("SP_CS_CNTL_0.WGSIZECONSTID", cn["WGSIZECONSTID"]), ("SP_CS_CNTL_0.WGOFFSETCONSTID",
                    cn["WGOFFSETCONSTID"]), ("HLSQ_CS_CNTL_1.LINEARLOCALIDREGID", lin)):
      if v < NO_REG: raise CPFault(f"dispatch at {where:#x}: {name} = {v:#x} is not modelled (expected {NO_REG:#x})",
                                   where)
    inputs = tuple(Input(r, 0x7, sv) for r, sv in ((cn["LOCALIDREGID"], LOCAL_ID), (cn["WGIDCONSTID"], WORKGROUP_ID))
                   if r < NO_REG)
    pvt = fld("SP_CS_PVT_MEM_PARAM")["MEMSIZEPERITEM"] * 512
    sh = Shader(gpu=self.target, local_size=tuple(local), wave_size=128 if c0["THREADSIZE"] else 64,
                shared_size=(c1["SHARED_SIZE"] + 1) * 1024, pvtmem_size=pvt,
                pvtmem_per_wave=bool(fld("SP_CS_PVT_MEM_SIZE")["PERWAVEMEMLAYOUT"]), inputs=inputs,
                sizedwords=len(code) // 4)
    res = self._bindings(cp, fld("SP_CS_CONFIG"))
    kernel = f"CS@{st.reg64(A.reg(g, 'SP_CS_OBJ_START')):#x}"
    self.dispatches += 1
    try:
      launch.run(code, sh, grid, GPUMemory(cp.vm), res, st.consts.copy(), kernel=kernel, arch=self.target,
                 checks=False, max_instructions=self.max_instructions)
    except (EmuError, GPUPageFault) as e:
      raise CPFault(f"CP_EXEC_CS at {where:#x} (grid {grid}, local {local}): {e}", getattr(e, "va", where), e) \
        from None

  def _code(self, cp: CommandProcessor, reg, where: int) -> bytes:
    n = (reg("SP_CS_INSTRLEN") & 0xFFFFFFF) * 128
    if n == 0: raise CPFault(f"dispatch at {where:#x}: SP_CS_INSTRLEN is 0 (no shader)", where)
    if n > MAX_CODE: raise CPFault(f"dispatch at {where:#x}: SP_CS_INSTRLEN asks for {n} bytes of code", where)
    base = cp.st.reg64(A.reg(self.gen, "SP_CS_OBJ_START"))
    code = cp.st.icache[:n]
    if len(code) < n: code += cp.read(base + len(code), n - len(code))
    entry = reg("SP_CS_OBJ_FIRST_EXEC_OFFSET")
    if entry % 8 or entry >= n:
      raise CPFault(f"dispatch at {where:#x}: SP_CS_OBJ_FIRST_EXEC_OFFSET {entry:#x} is outside the {n}-byte shader",
                    where)
    return code[entry:]

  def _bindings(self, cp: CommandProcessor, cfg: dict) -> dict:
    res = {"ibo": {}, "ubo": {}}
    bindless = {}
    if cfg["BINDLESS_IBO"] or cfg["BINDLESS_UBO"]:
      d = cp.st.reg64(A.reg(self.gen, "SP_CS_BINDLESS_BASE", 0))     # ADDR [63:2], DESC_SIZE [1:0]
      size = 64 if (d & 3) == A.enum(self.gen, "a6xx_bindless_descriptor_size")["BINDLESS_DESCRIPTOR_64B"] else 16
      base = d & ~3
      m = cp.vm.find(base)
      if m is not None:
        n = min(BINDLESS_SETS_READ, (m.end - base) // size)
        raw = np.frombuffer(cp.read(base, n * size), np.uint32).reshape(n, size // 4)
        bindless = {i: raw[i] for i in range(n)}
    for kind, on, slots, parse in (("ibo", cfg["BINDLESS_IBO"], cp.st.ibo, ibo_buffer),
                                   ("ubo", cfg["BINDLESS_UBO"], cp.st.ubo, ubo_buffer)):
      for i, d in (bindless if on else slots).items():
        if kind == "ibo" and len(d) < 16: continue
        b = parse(d)
        if b is not None: res[kind][i] = b
    return res
