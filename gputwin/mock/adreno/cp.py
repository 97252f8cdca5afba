"""The Adreno command processor (CP/SQE) of the virtual a6xx/a7xx behind MockKGSL: it walks a submission's indirect
buffers, keeps each context's register file and loaded state, and executes the PM4 packets a compute client sends.

Packets come as gputwin.abi.adreno decodes them (type 4: registers from a first one, type 7: an opcode of the GPU's
generation with its payload; parity checked). The IBs kgsl hands over are IB1s; CP_INDIRECT_BUFFER calls an IB one
level deeper (at most MAX_IB_LEVEL), CP_INDIRECT_BUFFER_CHAIN jumps to another IB at the same level. Any error (a bad
header or parity, a packet running past its IB, an unknown or unmodelled packet, an IB or memory access outside the
process's GPU mappings, a shader's EmuFault/EmuError, a wait that never holds) raises `CPFault`, which the GPU turns
into `k.fault(...)`: the context is guilty, the host process goes on, other contexts keep running.
"""
from __future__ import annotations
import dataclasses, time
import numpy as np
from gputwin.abi import adreno as A
from gputwin.errors import GPUPageFault, GputwinError

MAX_IB_LEVEL = 3                  # IB1 (kgsl's command objects), IB2, IB3 (a6xx CPs nest IB2; mock: one more allowed)
MAX_PACKETS = 1 << 20             # mock: per submission (VirtualAdreno.max_packets); more is "long IB detection"
ALWAYS_ON_HZ = 19_200_000         # the always-on counter's 19.2 MHz (CP_ALWAYS_ON_COUNTER, EV_WRITE_ALWAYSON)
NO_OPS = ("CP_NOP", "CP_WAIT_FOR_IDLE", "CP_WAIT_FOR_ME", "CP_WAIT_MEM_WRITES", "CP_SET_MODE", "CP_SET_MARKER",
          "CP_SKIP_IB2_ENABLE_GLOBAL", "CP_SKIP_IB2_ENABLE_LOCAL")   # the CP finishes every packet before the next
PACKETS = {f"CP_{n.upper()}": (n, k) for n, k in (
  ("load_state6", 3), ("load_state6_geom", 3), ("load_state6_frag", 3), ("exec_cs", 4), ("exec_cs_indirect", 4),
  ("mem_write", 2), ("event_write", 1), ("event_write7", 1), ("mem_to_mem", 3), ("reg_to_mem", 3),
  ("wait_reg_mem", 6), ("wait_mem_gte", 4))}   # packet -> (method, fewest payload dwords)
UNIT_BYTES = {"ST6_SHADER": 128, "ST6_CONSTANTS": 16, "ST6_UBO": 8, "ST6_IBO": 64}   # one NUM_UNIT of state
STATE_SLOTS = 128                 # mock: UBO / IBO descriptor slots of the CS state (SP_CS_IBO_COUNT is 7 bits)
COND = {"WRITE_ALWAYS": lambda a, b: True, "WRITE_LT": lambda a, b: a < b, "WRITE_LE": lambda a, b: a <= b,
        "WRITE_EQ": lambda a, b: a == b, "WRITE_NE": lambda a, b: a != b, "WRITE_GE": lambda a, b: a >= b,
        "WRITE_GT": lambda a, b: a > b}


class CPFault(GputwinError):
  """The CP stopped: `va` the faulting GPU address (a packet's, or the access's), `error` the underlying exception
  (GPUPageFault, the emulator's EmuFault/EmuError) or None."""

  def __init__(self, msg: str, va: int | None = None, error: Exception | None = None):
    super().__init__(msg)
    self.va, self.error = va, error


def always_on() -> int: return time.monotonic_ns() * 192 // 10000   # mock: monotonic time in 19.2 MHz ticks


@dataclasses.dataclass(eq=False)
class CPState:
  """What a context's CP keeps between packets (the hardware saves it on a context switch): the register file, the
  CS instruction cache preloaded by ST6_SHADER, the CS const file and the non-bindless UBO / IBO descriptors."""
  consts: np.ndarray
  regs: dict = dataclasses.field(default_factory=dict)
  icache: bytes = b""
  ubo: dict = dataclasses.field(default_factory=dict)     # slot -> 2 dwords (A6XX_UBO)
  ibo: dict = dataclasses.field(default_factory=dict)     # slot -> 16 dwords (A6XX_TEX_CONST)

  def reg64(self, r: int) -> int: return self.regs.get(r, 0) | self.regs.get(r + 1, 0) << 32


class CommandProcessor:
  """Executes one submission's IBs for one context on `gpu` (a VirtualAdreno: target, generation, dispatch)."""

  def __init__(self, gpu, st: CPState, vm, wait_timeout: float):
    self.gpu, self.st, self.vm, self.gen, self.wait_timeout = gpu, st, vm, gpu.gen, wait_timeout
    self.names = A.OPCODE_NAMES[self.gen]
    self.packets, self.where = 0, 0
    self.on_write = {A.reg(self.gen, "HLSQ_INVALIDATE_CMD"): self._invalidate}

  # ---- memory
  def read(self, va: int, n: int) -> bytes:
    try: return self.vm.read(va, n)
    except GPUPageFault as e: raise CPFault(f"CP read of {n} bytes at {va:#x}: {e}", e.va, e) from None

  def write(self, va: int, data: bytes):
    try: self.vm.write(va, data)
    except GPUPageFault as e: raise CPFault(f"CP write of {len(data)} bytes at {va:#x}: {e}", e.va, e) from None

  def u32(self, va: int) -> int: return int.from_bytes(self.read(va, 4), "little")
  def u64(self, va: int) -> int: return int.from_bytes(self.read(va, 8), "little")

  def field(self, packet: str, dword: int, value: int, variant: str | None = None) -> dict:
    return A.unpack(A.packet_fields(self.gen, packet, dword, variant), value)

  def enum(self, name: str, value: int) -> str:
    return next((k for k, v in A.enum(self.gen, name).items() if v == value), f"{name}#{value}")

  # ---- IB walk
  def ib(self, va: int, ndw: int, level: int = 1):
    """Execute the IB of ndw dwords at va (and the IBs it chains to)."""
    if level > MAX_IB_LEVEL: raise CPFault(f"IB{level} at {va:#x}: IBs nest at most {MAX_IB_LEVEL} deep", self.where)
    while True:
      if va & 3: raise CPFault(f"IB{level} address {va:#x} is not dword aligned", va)
      w = np.frombuffer(self.read(va, ndw * 4), np.uint32)
      i, chain = 0, None
      while i < ndw:
        self.where, self.packets = va + 4 * i, self.packets + 1
        if self.packets > self.gpu.max_packets:
          raise CPFault(f"more than {self.gpu.max_packets} packets in one submission (long IB detection)", self.where)
        h = A.decode_header(int(w[i]))
        if h is None: raise CPFault(f"bad PM4 header {int(w[i]):#010x} (type or parity) at {self.where:#x} (IB{level})",
                                    self.where)
        t, what, n = h
        if i + 1 + n > ndw:
          raise CPFault(f"packet at {self.where:#x} needs {n} dwords, IB{level} has {ndw - i - 1} left", self.where)
        p = [int(x) for x in w[i + 1:i + 1 + n]]
        if t == 4: self.type4(what, p)
        else:
          name = self.names.get(what, f"opcode {what:#x}")
          if name in ("CP_INDIRECT_BUFFER", "CP_INDIRECT_BUFFER_CHAIN"):
            if n < 3: raise CPFault(f"{name} at {self.where:#x} has {n} dwords, needs 3", self.where)
            target = (p[0] | p[1] << 32, p[2] & 0xFFFFF)
            if name == "CP_INDIRECT_BUFFER": self.ib(*target, level + 1)
            else:
              chain = target
              break
          else: self.type7(name, p)
        i += 1 + n
      if chain is None: return
      va, ndw = chain

  def type4(self, reg: int, p: list[int]):
    for j, v in enumerate(p):
      self.st.regs[reg + j] = v
      if (fn := self.on_write.get(reg + j)) is not None: fn(v)

  def type7(self, name: str, p: list[int]):
    if name in NO_OPS: return
    if name not in PACKETS: raise CPFault(f"{name} at {self.where:#x}: not a packet this CP executes", self.where)
    method, need = PACKETS[name]
    if len(p) < need: raise CPFault(f"{name} at {self.where:#x}: payload of {len(p)} dwords, needs {need}", self.where)
    getattr(self, method)(p)

  def _invalidate(self, v: int):
    """HLSQ_INVALIDATE_CMD: CS_STATE drops the CS instruction cache, const file and UBO descriptors, CS_IBO the IBO
    descriptors (the bindless ones live in memory: nothing cached to drop)."""
    f = A.unpack(A.reg_fields(self.gen, "HLSQ_INVALIDATE_CMD"), v)
    if f["CS_STATE"]:
      self.st.icache, self.st.ubo = b"", {}
      self.st.consts[:] = 0
    if f["CS_IBO"]: self.st.ibo = {}

  # ---- state loads
  def load_state6(self, p: list[int]):
    """CP_LOAD_STATE6(_GEOM/_FRAG): NUM_UNIT units of STATE_TYPE into STATE_BLOCK from DST_OFF. The CS blocks are
    kept (SB6_CS_SHADER: shader, constants, UBO and IBO descriptors; SB6_CS_IBO: IBO descriptors); graphics and texture
    blocks are accepted and dropped. SS6_DIRECT: the payload; SS6_INDIRECT: memory at EXT_SRC_ADDR; SS6_BINDLESS
    preloads descriptors the dispatch reads from the bindless base anyway (nothing to do); SS6_UBO is not modelled."""
    f = self.field("CP_LOAD_STATE6", 0, p[0])
    block, typ = self.enum("a6xx_state_block", f["STATE_BLOCK"]), self.enum("a6xx_state_type", f["STATE_TYPE"])
    src, n, off = self.enum("a6xx_state_src", f["STATE_SRC"]), f["NUM_UNIT"], f["DST_OFF"]
    if block not in ("SB6_CS_SHADER", "SB6_CS_IBO") or src == "SS6_BINDLESS": return
    if block == "SB6_CS_IBO": typ = "ST6_IBO"
    nbytes = n * UNIT_BYTES[typ]
    if src == "SS6_DIRECT":
      if len(p) - 3 < nbytes // 4:
        raise CPFault(f"CP_LOAD_STATE6 at {self.where:#x}: {n} units of {typ} need {nbytes // 4} payload dwords, "
                      f"{len(p) - 3} given", self.where)
      data = np.array(p[3:3 + nbytes // 4], np.uint32).tobytes()
    elif src == "SS6_INDIRECT": data = self.read((p[1] & ~3) | p[2] << 32, nbytes)
    else: raise CPFault(f"CP_LOAD_STATE6 at {self.where:#x}: source {src} is not modelled", self.where)
    w = np.frombuffer(data, np.uint32)
    if typ == "ST6_SHADER": self.st.icache = data
    elif typ == "ST6_CONSTANTS":
      if (off + n) * 4 > len(self.st.consts):
        raise CPFault(f"CP_LOAD_STATE6 at {self.where:#x}: constants [{off}, {off + n}) vec4 exceed the const file's "
                      f"{len(self.st.consts) // 4}", self.where)
      self.st.consts[off * 4:(off + n) * 4] = w
    else:
      if off + n > STATE_SLOTS:
        raise CPFault(f"CP_LOAD_STATE6 at {self.where:#x}: {typ} slots [{off}, {off + n}) exceed {STATE_SLOTS}",
                      self.where)
      table, k = (self.st.ubo, 2) if typ == "ST6_UBO" else (self.st.ibo, 16)
      for j in range(n): table[off + j] = w[j * k:(j + 1) * k].copy()

  load_state6_geom = load_state6_frag = load_state6

  # ---- dispatch
  def exec_cs(self, p: list[int]):
    """CP_EXEC_CS: NGROUPS_X/Y/Z workgroups of the CS state now in the registers."""
    self.gpu.dispatch(self, (p[1], p[2], p[3]))

  def exec_cs_indirect(self, p: list[int]):
    """CP_EXEC_CS_INDIRECT: the group counts (3 dwords) at ADDR, the local size (minus one) in dword 3."""
    f = self.field("CP_EXEC_CS_INDIRECT", 3, p[3])
    grid = np.frombuffer(self.read(p[1] | p[2] << 32, 12), np.uint32)
    self.gpu.dispatch(self, tuple(int(g) for g in grid), (f["LOCALSIZEX"] + 1, f["LOCALSIZEY"] + 1,
                                                          f["LOCALSIZEZ"] + 1))

  # ---- memory packets
  def mem_write(self, p: list[int]):
    self.write(p[0] | p[1] << 32, np.array(p[2:], np.uint32).tobytes())

  def event_write(self, p: list[int]):
    """A6XX CP_EVENT_WRITE: with an address, once the event is done write the 32-bit dword 3 there (TIMESTAMP: the
    64-bit always-on counter instead). Cache flush/invalidate events are no-ops (memory is coherent)."""
    f = self.field("CP_EVENT_WRITE", 0, p[0])
    if len(p) < 3: return
    va = p[1] | p[2] << 32
    if f["TIMESTAMP"]: self.write(va, always_on().to_bytes(8, "little"))
    elif len(p) >= 4: self.write(va, p[3].to_bytes(4, "little"))

  def event_write7(self, p: list[int]):
    """A7XX CP_EVENT_WRITE7: with WRITE_ENABLED to RAM, WRITE_SRC picks the value (USER_32B: payload 0, USER_64B:
    payloads 0-1, ALWAYSON: the always-on counter); on-chip destinations are not modelled (dropped)."""
    f = self.field("CP_EVENT_WRITE7", 0, p[0])
    if not f["WRITE_ENABLED"] or self.enum("event_write_dst", f["WRITE_DST"]) != "EV_DST_RAM": return
    src = self.enum("event_write_src", f["WRITE_SRC"])
    need = {"EV_WRITE_USER_32B": 4, "EV_WRITE_USER_64B": 5}.get(src, 3)
    if len(p) < need:
      raise CPFault(f"CP_EVENT_WRITE7 at {self.where:#x}: {src} to RAM needs {need} payload dwords", self.where)
    va = p[1] | p[2] << 32
    if src == "EV_WRITE_USER_32B": self.write(va, p[3].to_bytes(4, "little"))
    elif src == "EV_WRITE_USER_64B": self.write(va, (p[3] | p[4] << 32).to_bytes(8, "little"))
    elif src == "EV_WRITE_ALWAYSON": self.write(va, always_on().to_bytes(8, "little"))
    else: raise CPFault(f"CP_EVENT_WRITE7 at {self.where:#x}: WRITE_SRC {src} is not modelled", self.where)

  def mem_to_mem(self, p: list[int]):
    """dst = the sum of the sources (each negated when its NEG_x bit is set), 32-bit or (DOUBLE) 64-bit."""
    f = self.field("CP_MEM_TO_MEM", 0, p[0])
    n, bits = (8, 64) if f["DOUBLE"] else (4, 32)
    srcs = [p[i] | p[i + 1] << 32 for i in range(3, len(p) - 1, 2)]
    acc = 0
    for j, s in enumerate(srcs):
      v = int.from_bytes(self.read(s, n), "little")
      acc += -v if j < 3 and p[0] >> j & 1 else v
    self.write(p[1] | p[2] << 32, (acc & ((1 << bits) - 1)).to_bytes(n, "little"))

  def reg_value(self, r: int, t: int) -> int:
    """A register as the CP reads it: the always-on counter is live, the rest is what was written."""
    ao = A.reg(self.gen, "CP_ALWAYS_ON_COUNTER")
    if r in (ao, ao + 1): return (t >> (32 * (r - ao))) & 0xFFFFFFFF
    return self.st.regs.get(r, 0)

  def reg_to_mem(self, p: list[int]):
    """CNT registers from REG to DEST (ACCUMULATE: added to what is there, per dword)."""
    f, t = self.field("CP_REG_TO_MEM", 0, p[0]), always_on()
    va = p[1] | p[2] << 32
    vals = [self.reg_value(f["REG"] + j, t) for j in range(max(f["CNT"], 1))]
    if f["ACCUMULATE"]:
      old = np.frombuffer(self.read(va, 4 * len(vals)), np.uint32)
      vals = [(v + int(o)) & 0xFFFFFFFF for v, o in zip(vals, old)]
    self.write(va, np.array(vals, np.uint32).tobytes())

  def _poll(self, what: str, va: int, get, holds):
    deadline = time.monotonic() + self.wait_timeout
    nap = 1e-5
    while not holds(get()):
      if time.monotonic() > deadline:
        raise CPFault(f"{what} at {self.where:#x} on {va:#x} did not hold within {self.wait_timeout:g} s "
                      f"(GPU hang)", self.where)
      time.sleep(nap)
      nap = min(2 * nap, 1e-3)

  def wait_reg_mem(self, p: list[int]):
    """Wait until (value & MASK) FUNCTION REF, polling memory (POLL_MEMORY) or a register (POLL_REGISTER)."""
    f = self.field("CP_WAIT_REG_MEM", 0, p[0])
    fn, poll = self.enum("cp_cond_function", f["FUNCTION"]), self.enum("poll_memory_type", f["POLL"])
    ref, mask = p[3], p[4]
    sx = (lambda v: v - (1 << 32) if v >> 31 else v) if f["SIGNED_COMPARE"] else (lambda v: v)
    va = p[1] | p[2] << 32
    if fn not in COND or poll not in ("POLL_MEMORY", "POLL_REGISTER"):
      raise CPFault(f"CP_WAIT_REG_MEM at {self.where:#x}: {fn} / {poll} is not modelled", self.where)
    get = (lambda: self.u32(va)) if poll == "POLL_MEMORY" else (lambda: self.reg_value(p[1] & 0x3FFFF, always_on()))
    self._poll("CP_WAIT_REG_MEM", va, get, lambda v: COND[fn](sx(v & mask), sx(ref & mask)))

  def wait_mem_gte(self, p: list[int]):
    """A6XX: wait until the 32-bit value at POLL_ADDR >= REF, signed."""
    va, ref = p[1] | p[2] << 32, p[3] - (1 << 32) if p[3] >> 31 else p[3]
    self._poll("CP_WAIT_MEM_GTE", va, lambda: self.u32(va), lambda v: (v - (1 << 32) if v >> 31 else v) >= ref)
