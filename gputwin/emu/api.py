"""The small object API (unicorn-like): an Emulator owns guest memory and a code object; `prepare` builds a
Dispatch (every wave's registers at its first instruction) that tools can peek/poke, single-step, hook and run.

    emu = Emulator("k.co")
    out = emu.alloc(4096); emu.write(out, np.zeros(1024, np.float32))
    d = emu.prepare("fill", grid=4, block=256, args=[...])      # or kernarg=bytes for raw launches
    d.step(); d.reg(0, "v0"); d.set_reg(0, "s2", 7); d.run(); d.finish()
"""
from __future__ import annotations

import time

import numpy as np

from gputwin.emu import core
from gputwin.emu.checks import Checks
from gputwin.emu.launch import LaunchStats, _hidden, _pack, _three, code_object, program_for, raise_stop
from gputwin.emu.memory import GuestMemory
from gputwin.errors import EmuError, LaunchError
from gputwin.isa.codeobj import CodeObject
from gputwin.isa.targets import target

PACKET_SIZE, QUEUE_SIZE = 64, 256


class Emulator:
  def __init__(self, code=None, *, arch: str | None = None, memory: GuestMemory | None = None):
    self.co: CodeObject | None = code_object(code, arch) if code is not None else None
    self.arch = arch or (self.co.arch if self.co else None)
    if self.co is not None and arch and self.co.arch != arch:
      raise LaunchError(f"code object is for {self.co.arch}, not {arch}", arch)
    if self.arch is not None:
      target(self.arch)
    self.mem = memory or GuestMemory(self.arch or "")

  # ---- memory
  def alloc(self, nbytes: int) -> int: return self.mem.alloc(nbytes)
  def write(self, va: int, data) -> None: self.mem.write_bytes(va, np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray) else bytes(data))
  def read(self, va: int, n: int) -> bytes: return self.mem.read_bytes(va, n)

  # ---- dispatch
  def prepare(self, kernel: str, *, grid, block, args=(), kernarg: bytes | None = None, checks=True,
              serial: bool = False, trace=None, max_instructions: int | None = None) -> "Dispatch":
    if self.co is None:
      raise LaunchError("this Emulator has no code object", self.arch or "")
    if kernel not in self.co.kernels:
      raise LaunchError(f"[{self.arch}] no kernel {kernel!r} in the code object; it has: "
                        f"{', '.join(sorted(self.co.kernels)) or 'none'}", self.arch, kernel)
    return Dispatch(self, self.co.kernels[kernel], _three(grid, "grid"), _three(block, "block"), list(args),
                    kernarg, checks, serial, trace, max_instructions)

  def launch(self, kernel: str, *, grid, block, args=(), serial=False, checks=True, trace=None,
             max_instructions=None) -> LaunchStats:
    d = self.prepare(kernel, grid=grid, block=block, args=args, checks=checks, serial=serial, trace=trace,
                     max_instructions=max_instructions)
    try:
      d.run()
    finally:
      d.finish()
    return d.stats


class Dispatch:
  """One kernel dispatch: guest buffers for the arguments, the dispatch packet, and batches of waves."""

  def __init__(self, emu: Emulator, kern, grid, block, args, kernarg, checks, serial, trace, max_instructions):
    self.emu, self.kern, self.grid, self.block = emu, kern, grid, block
    self.arch, self.name, kd = emu.co.arch, kern.name, kern.descriptor
    self.serial, self.max_instructions, self.trace = serial, max_instructions, trace
    self.checks = checks
    self.L = 32 if kd.enable_wavefront_size32 else 64
    if self.L not in target(self.arch).waves:
      raise LaunchError(f"[{self.arch}] kernel {self.name} asks for wave{self.L}, which {self.arch} does not run", self.arch, self.name)
    threads = block[0] * block[1] * block[2]
    if threads > 1024:
      raise LaunchError(f"[{self.arch}] kernel {self.name}: workgroup of {threads} work-items exceeds 1024", self.arch, self.name)
    mem = emu.mem
    self.copies: list[tuple[np.ndarray, int]] = []
    self.kernarg_va = self._kernargs(args, kernarg)
    self.queue_va = mem.alloc(QUEUE_SIZE)
    self.packet_va = mem.alloc(PACKET_SIZE)
    gs = [grid[i] * block[i] for i in range(3)]
    dims = 1 + (gs[1] > 1 or gs[2] > 1) + (gs[2] > 1)
    mem.write_bytes(self.packet_va, np.array([(2 << 0) | (1 << 8) | (3 << 9) | (3 << 11), dims, *block, 0], "<u2").tobytes()
                    + np.array([*gs, kd.private_segment_fixed_size, kd.group_segment_fixed_size], "<u4").tobytes()
                    + np.array([kern.kd_address, self.kernarg_va, 0, 0], "<u8").tobytes())
    self.prog = program_for(emu.co, self.L)
    self.nw = -(-threads // self.L)
    self.nwg = grid[0] * grid[1] * grid[2]
    self.per_batch = max(1, core.MAX_WAVES // self.nw)
    self.next_wg = 0
    self.eng: core.Engine | None = None
    self.base_wave = 0
    self.stats = LaunchStats(self.name, self.arch, wave_size=self.L)
    self.t0 = time.perf_counter()
    self.done = False
    self._next_batch()

  # ---- arguments -> kernarg segment
  def _kernargs(self, args, raw) -> int:
    mem, kd, metas = self.emu.mem, self.kern.descriptor, self.kern.args
    size = max(kd.kernarg_size, 256, max((a.offset + a.size for a in metas), default=0))
    buf = bytearray(size)
    if raw is not None:
      buf[:len(raw)] = raw
    elif metas:
      user = [a for a in metas if not a.value_kind.startswith("hidden")]
      if len(args) != len(user):
        raise LaunchError(f"[{self.arch}] kernel {self.name} takes {len(user)} arguments "
                          f"({', '.join(a.type_name or a.value_kind for a in user)}), got {len(args)}", self.arch, self.name)
      for i, (a, m) in enumerate(zip(args, user)):
        buf[m.offset:m.offset + m.size] = self._arg(a, m, i)
      for m in metas:
        h = _hidden(m.value_kind, m.size, self.grid, self.block, 0, 0) if m.value_kind.startswith("hidden") else None
        if h is not None:
          buf[m.offset:m.offset + m.size] = h
    else:  # no metadata (bare .amdhsa_kernel): arrays -> 8-byte pointers, numbers -> 4 bytes, naturally aligned
      off = 0
      for a in args:
        n = 8 if isinstance(a, np.ndarray) or isinstance(a, (np.int64, np.uint64, np.float64)) else 4
        off = -(-off // n) * n
        buf[off:off + n] = self._buffer(a) if isinstance(a, np.ndarray) else np.array(a).astype(
          ("f" if isinstance(a, (float, np.floating)) else "i") + str(n) if not isinstance(a, np.generic) else a.dtype).tobytes()
        off += n
    va = mem.alloc(len(buf))
    mem.write_bytes(va, bytes(buf))
    return va

  def _buffer(self, a: np.ndarray) -> bytes:
    a_c = np.ascontiguousarray(a)
    va = self.emu.mem.alloc(a_c.nbytes)
    self.emu.mem.write_bytes(va, a_c.tobytes())
    self.copies.append((a, va))
    return va.to_bytes(8, "little")

  def _arg(self, a, m, i) -> bytes:
    if m.value_kind == "global_buffer":
      if not isinstance(a, np.ndarray):
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):  # a raw device address
          return int(a).to_bytes(8, "little")
        raise LaunchError(f"[{self.arch}] argument {i} of {self.name} is a pointer ({m.type_name}); pass a numpy array, "
                          f"got {type(a).__name__}", self.arch, self.name)
      want = m.type_name.rstrip("*").strip()
      from gputwin.emu.launch import _NP
      if want in _NP and np.dtype(_NP[want]).itemsize != a.dtype.itemsize:
        raise LaunchError(f"[{self.arch}] argument {i} of {self.name} is {m.type_name}; got a {a.dtype} array", self.arch, self.name)
      return self._buffer(a)
    if m.value_kind == "by_value":
      return _pack(a, m, self.name, i)
    raise LaunchError(f"[{self.arch}] argument {i} of {self.name}: {m.value_kind} arguments are not supported", self.arch, self.name)

  # ---- waves
  def _next_batch(self) -> bool:
    if self.next_wg >= self.nwg:
      self.eng = None
      return False
    kd, L = self.kern.descriptor, self.L
    g0, g1 = self.next_wg, min(self.nwg, self.next_wg + self.per_batch)
    self.next_wg = g1
    nwg = g1 - g0
    W = nwg * self.nw
    cdna = self.emu.co.arch.startswith("gfx9")
    nv = min(512, (kd.granulated_workitem_vgpr_count + 1) * 8 + 8)
    chk = Checks.make(self.checks)
    eng = core.Engine(self.prog, self.emu.mem, W, L, nv, nv if cdna else 1, kd.group_segment_fixed_size,
                      kd.private_segment_fixed_size, np.repeat(np.arange(nwg), self.nw), chk, self.arch)
    eng.ieee = kd.enable_ieee_mode if not self.arch.startswith("gfx12") else 1
    eng.HW[:, 1] = (kd.float_round_mode_32 | kd.float_round_mode_16_64 << 2 | kd.float_denorm_mode_32 << 4
                    | kd.float_denorm_mode_16_64 << 6 | kd.enable_dx10_clamp << 8 | eng.ieee << 9)  # MODE
    wgid = np.repeat(np.arange(g0, g1), self.nw)
    bx, by, bz = self.block
    gx, gy = self.grid[0], self.grid[1]
    ids = (wgid % gx, (wgid // gx) % gy, wgid // (gx * gy))
    # user SGPRs in ABI order, then system SGPRs from user_sgpr_count
    S, s = eng.S, 0
    for en, n, val in (("enable_sgpr_private_segment_buffer", 4, 0), ("enable_sgpr_dispatch_ptr", 2, self.packet_va),
                       ("enable_sgpr_queue_ptr", 2, self.queue_va), ("enable_sgpr_kernarg_segment_ptr", 2, self.kernarg_va),
                       ("enable_sgpr_dispatch_id", 2, 0), ("enable_sgpr_flat_scratch_init", 2, 0),
                       ("enable_sgpr_private_segment_size", 1, kd.private_segment_fixed_size)):
      if getattr(kd, en, 0):
        for k in range(n):
          S[:, s + k] = (val >> (32 * k)) & 0xffffffff
        s += n
    for k in range(kd.kernarg_preload_spec_length):
      S[:, s + k] = int.from_bytes(self.emu.mem.read_bytes(self.kernarg_va + 4 * (kd.kernarg_preload_spec_offset + k), 4), "little")
    s = max(kd.user_sgpr_count, s)
    for d in range(3):
      if getattr(kd, f"enable_sgpr_workgroup_id_{'xyz'[d]}"):
        S[:, s] = ids[d]
        s += 1
    if self.arch.startswith("gfx12"):  # architected workgroup ids: TTMP9 = x, TTMP7 = y | z << 16
      S[:, 117], S[:, 115] = ids[0], ids[1] | (ids[2] << 16)
    if kd.enable_sgpr_workgroup_info:
      s += 1
    if kd.enable_private_segment:
      S[:, s] = 0
      s += 1
    eng.user_sgprs = s
    t = (np.arange(W) % self.nw)[:, None] * L + np.arange(L)[None, :]
    x, y, z = t % bx, (t // bx) % by, t // (bx * by)
    eng.V[:, 0] = x | (y << 10) | (z << 20)
    act = t < bx * by * bz
    ex = (act.astype(np.uint64) << np.arange(L, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    S[:, eng.sp["exec"]] = (ex & np.uint64(0xffffffff)).astype(np.uint32)
    if L == 64:
      S[:, eng.sp["exec"] + 1] = (ex >> np.uint64(32)).astype(np.uint32)
    eng.pc[:] = self.kern.entry
    if chk is not None:
      chk.initial(eng, s, bool(by > 1 or bz > 1), bool(bz > 1))
    if self.trace is not None:
      eng.hooks.append(self._trace_hook)
    eng.hooks.extend(getattr(self, "_user_hooks", []))
    self.base_wave = g0 * self.nw
    self.eng = eng
    return True

  def _trace_hook(self, eng, op, ix):
    waves = np.arange(eng.W)[ix]
    d = op.outs.get("D0")
    for w in waves:
      ch = ""
      if d is not None and d.file in "vas" and op.kind in ("alu", "mem", "copy") and (op.sem is None or "D0" in op.sem.outputs
                                                                                      or op.sem.outputs.keys() & {"VDATA", "SDATA", "RETURN_DATA"}):
        vals = (eng.V if d.file == "v" else eng.A)[w, d.index:d.index + d.dwords] if d.file != "s" else eng.S[w, d.index:d.index + d.dwords]
        ch = f"{d.file}{d.index}=" + ",".join(f"{int(v):x}" for v in np.asarray(vals).reshape(-1))
      self.trace.append((self.base_wave + int(w), op.pc, op.text, ch))

  def hook(self, fn) -> None:
    """Call fn(engine, op, waves) after every executed instruction (waves: slice or index array)."""
    self._user_hooks = getattr(self, "_user_hooks", []) + [fn]
    if self.eng is not None:
      self.eng.hooks.append(fn)

  # ---- registers
  def _reg(self, name: str):
    f, rest = name[0], name[1:]
    if name in ("exec", "vcc", "m0", "scc", "pc"):
      return name, 0
    return f, int(rest)

  def reg(self, wave: int, name: str):
    """Peek a register of a wave of the current batch: 'v3' (lanes), 'a0', 's5', 'exec', 'vcc', 'm0', 'scc', 'pc'."""
    e, w = self.eng, wave - self.base_wave
    f, i = self._reg(name)
    if f == "v": return e.V[w, i].copy()
    if f == "a": return e.A[w, i].copy()
    if f == "s": return int(e.S[w, i])
    if f == "scc": return int(e.scc[w])
    if f == "pc": return int(e.pc[w])
    code = e.sp[f]
    return int(e.S[w, code]) | (int(e.S[w, code + 1]) << 32 if f != "m0" and e.L == 64 else 0)

  def set_reg(self, wave: int, name: str, value) -> None:
    e, w = self.eng, wave - self.base_wave
    f, i = self._reg(name)
    if f == "v": e.V[w, i] = np.asarray(value).astype(np.uint32)
    elif f == "a": e.A[w, i] = np.asarray(value).astype(np.uint32)
    elif f == "s": e.S[w, i] = int(value) & 0xffffffff
    elif f == "scc": e.scc[w] = int(value) & 1
    elif f == "pc": e.pc[w] = int(value)
    else:
      e.S[w, e.sp[f]] = int(value) & 0xffffffff
      if f != "m0" and e.L == 64:
        e.S[w, e.sp[f] + 1] = int(value) >> 32
    e._exec = None
    if e.checks is not None:
      e.checks.poked(e, w, f, i)

  # ---- running
  def step(self) -> bool:
    """Execute one scheduler step (one instruction for one group of waves). False when the dispatch is done."""
    return self._go(1)

  def run(self) -> LaunchStats:
    self._go(None)
    return self.stats

  def _go(self, steps) -> bool:
    while self.eng is not None:
      eng = self.eng
      try:
        if steps is None:
          left = None if self.max_instructions is None else self.max_instructions - self.stats.instructions
          core.run(eng, self.serial, left)
        else:
          before = eng.count
          core.run_steps(eng, self.serial, steps)
          if eng.live.any():
            self._account(eng, before)
            return True
      except core.Stop as st:
        self._account(eng)
        raise_stop(st, eng, self.name, self.arch)
      self._account(eng)
      self._next_batch()
      if steps is not None:
        return self.eng is not None
    return False

  def _account(self, eng, before=None):
    st = self.stats
    if getattr(eng, "_counted", 0) != eng.count:
      st.instructions += eng.count - getattr(eng, "_counted", 0)
      st.lane_instructions += eng.lane_count - getattr(eng, "_lcounted", 0)
      eng._counted, eng._lcounted = eng.count, eng.lane_count
    st.waves = self.next_wg * self.nw
    st.workgroups = self.next_wg

  def finish(self) -> LaunchStats:
    """Copy buffers back into the caller's arrays and free the dispatch's guest memory."""
    if self.done:
      return self.stats
    self.done = True
    mem = self.emu.mem
    for a, va in self.copies:
      if a.flags.writeable:
        a[...] = np.frombuffer(mem.read_bytes(va, a.nbytes), a.dtype).reshape(a.shape)
    for a, va in self.copies:
      mem.unmap(va)
    for va in (self.kernarg_va, self.queue_va, self.packet_va):
      mem.unmap(va)
    self.stats.seconds = time.perf_counter() - self.t0
    if isinstance(self.trace, list):
      self.stats.trace = self.trace
    return self.stats
