"""The wave executor: register files of every wave of a dispatch batch as numpy arrays, one loop that steps all
waves standing at the same PC together (one vectorised pcode call over (waves, lanes)), barriers, and checkers.

    fetch:    op = program.op(pc)            (decoded and bound once per PC, cached)
    decode:   operands -> pcode state        (registers, constants, modifiers, DPP/SDWA, memory addresses)
    execute:  op.sem(state, exec, mem)       (the vendor pseudocode; no arithmetic here)
    retire:   write outputs under EXEC, advance PC, checkers, trace

`serial=True` runs the same engine one wave at a time (lowest wave first, barriers released when every live wave
of the workgroup arrived), so it is an independent schedule to compare against.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import sys

import numpy as np

from gputwin.emu.memory import Window
from gputwin.emu.binding import (LDS_BITS, LDS_SHIFT, WRITE_MASKS, Address, Stop, float_result, plain_barrier,
                                 scalar_valu, sets_pc, va_bits)
from gputwin.emu.program import Op, Program, Src
from gputwin.errors import GPUPageFault, GputwinError
from gputwin.pcode.runtime import Wide, dwords

U32, U64 = np.uint32, np.uint64
MAX_WAVES = 1 << (32 - LDS_SHIFT)
M32, M64 = 0xffffffff, 0xffffffffffffffff
LITTLE = sys.byteorder == "little"  # a uint64 viewed as two uint32 is (lo, hi)


class _Mem:
  """The pcode memory object for one instruction: bytes from a guest space, addresses from the executor.

  Every Calc*Addr built-in the vendor pseudocode calls answers with the address the executor computed from the
  encoding (base registers, offsets, apertures), so 64-bit addresses survive pcode's 32-bit ADDR inputs."""

  def __init__(self, space, addr=None):
    self.space, self.addr = space, addr

  def __getattr__(self, name):
    if name.startswith("Calc"):
      return lambda *a: self.addr
    if name in WRITE_MASKS:
      return lambda *a: np.uint32(0xffffffff)
    if name == "IsM0":  # RDNA4 DS: is the address operand M0 (GDS-style addressing)? Never for LDS
      return lambda *a: np.bool_(False)
    if name == "DS_APPEND_CONSUME_COUNTER":
      return self.counter
    raise AttributeError(name)

  def counter(self, addr, exec_mask, step):
    """DS_APPEND / DS_CONSUME (pcode errata): wave by wave, in wave order, the dword at the wave's address (one for
    all its lanes) gains `step` x its active lanes; every lane gets the value before. Waves of one workgroup share
    the counter and see each other's updates."""
    a = np.asarray(addr, U64)
    a = a.reshape(len(a), -1)[:, 0]
    e = np.asarray(exec_mask, U64).reshape(len(a), -1)[:, :1]
    delta = _count_per_warp(_lanes(e, 64)) * int(step)
    old = np.zeros(len(a), np.int64)
    for at in np.unique(a):  # (one counter per workgroup, usually)
      waves = np.flatnonzero(a == at)
      v = int(self.space.gather(np.array([at], U64), 4)[0])
      steps = np.cumsum(delta[waves])
      old[waves] = v + steps - delta[waves]
      self.space.scatter(np.array([at], U64), np.array([(v + int(steps[-1])) & 0xffffffff], U32), 4)
    return (old & 0xffffffff).astype(U32)[:, None]

  def read(self, addr, bits):
    if self.space is None:
      raise GputwinError("the body accesses memory, but the executor binds no memory space to this instruction")
    a = np.asarray(addr, U64).reshape(-1)
    if bits <= 64:
      return self.space.gather(a, max(bits // 8, 1))
    out = np.zeros(len(a), object)
    for k in range(bits // 32):
      out = out + (self.space.gather(a + U64(4 * k), 4).astype(object) << (32 * k))
    return out

  def write(self, addr, vals, bits):
    if self.space is None:
      raise GputwinError("the body accesses memory, but the executor binds no memory space to this instruction")
    a = np.asarray(addr, U64).reshape(-1)
    if bits <= 64:
      return self.space.scatter(a, vals, max(bits // 8, 1))
    v = np.asarray(vals, object)
    for k in range(bits // 32):
      self.space.scatter(a + U64(4 * k), ((v >> (32 * k)) & 0xffffffff).astype(U32), 4)


_NOMEM = _Mem(None)  # the memory object of instructions without memory access (holds nothing)
HEAP_KEPT = False  # keep_heap() ran in this process


def keep_heap(mmap_max: int = 32 << 20, trim: int = 1 << 30) -> None:
  """Let glibc keep the emulator's big numpy temporaries on the heap. Opt-in: it changes the allocator of the whole
  process, so the library never calls it; the `gputwin` commands that run kernels and bench/run.py do, an
  application may (once per process; GPUTWIN_MALLOPT=0 makes it a no-op).

  Every vectorised step makes short-lived arrays of 0.25-8 MiB. By default glibc serves those with fresh mmaps and
  returns them on free (or trims the heap top), so each pass first takes one page fault per 4 KiB: in a fresh
  process that made the tiled-matmul launch 2-3x slower than the same launch after glibc's thresholds had adapted.
  Raising M_MMAP_THRESHOLD (to 32 MiB, glibc's maximum) and M_TRIM_THRESHOLD makes freed blocks reusable."""
  global HEAP_KEPT
  if HEAP_KEPT or os.environ.get("GPUTWIN_MALLOPT") == "0":
    return
  HEAP_KEPT = True
  try:
    libc = ctypes.CDLL(None)
    libc.mallopt(-1, trim)  # M_TRIM_THRESHOLD
    libc.mallopt(-3, mmap_max)  # M_MMAP_THRESHOLD
  except (OSError, AttributeError):  # not glibc: nothing to tune
    pass


HUGE = 8 << 20  # arrays from this size on are asked for transparent huge pages (zeros)


def zeros(shape, dtype) -> np.ndarray:
  """np.zeros, for a large array on transparent huge pages where the kernel offers them (madvise). The native tier
  runs a wave at a time and a wave's registers lie one per row, rows (all waves' copies of a register) apart: with
  4 KiB pages nearly every register a wave touches is a TLB miss of its own."""
  n = int(np.prod(shape)) * np.dtype(dtype).itemsize
  if n < HUGE or not hasattr(mmap, "MADV_HUGEPAGE"):
    return np.zeros(shape, dtype)
  m = mmap.mmap(-1, n)  # anonymous: zero-filled
  try:
    m.madvise(mmap.MADV_HUGEPAGE)
  except OSError:  # not offered here: 4 KiB pages, as np.zeros
    pass
  return np.frombuffer(m, dtype).reshape(shape)


def scratch_stride(priv_size: int) -> int:
  """Address stride of one lane's private segment in the scratch window: a power of two at least 16 bytes past the
  segment, so an access starting inside it (Engine.run_scratch checks that) and reaching past it (up to a 16-byte
  one) keeps its slot and faults in the window's check instead of landing in the next lane's slot."""
  return 1 << max(4, int(max(priv_size, 1) + 15).bit_length())


class Engine:
  """Architectural state of one batch of waves (all workgroups of a dispatch, or a slice of them)."""

  def __init__(self, prog: Program, mem, waves: int, lanes: int, nvgpr: int, nagpr: int, lds_size: int,
               priv_size: int, wg_of_wave: np.ndarray, checks, device: str = ""):
    self.prog, self.mem, self.W, self.L = prog, mem, waves, lanes
    self.fam = prog.family
    self.fe = prog.frontend
    self.sp = self.fe.special(self.fam)  # register codes of EXEC, VCC, M0, NULL
    # register files are indexed [wave, reg(, lane)] but stored register-major: one register of every wave (what
    # an instruction reads or writes) is then one contiguous block, not a strided walk through all the files
    # (rows padded by one wave / 64 bytes: a power-of-two row stride would put all of one wave's registers in the
    # same cache set, which the native tier, running a wave at a time, would thrash)
    self.files = {"v": zeros((nvgpr, waves + 1, lanes), U32), "a": zeros((max(nagpr, 1), waves + 1, lanes), U32),
                  "s": zeros((getattr(self.fe, "sgprs", 256), waves + 16), U32)}  # [reg, wave(, lane)], padded
    self.V = self.files["v"][:, :waves].swapaxes(0, 1)
    self.A = self.files["a"][:, :waves].swapaxes(0, 1)
    self.S = self.files["s"][:, :waves].T
    self.HW = np.zeros((64, waves + 16), U32)[:, :waves].T
    self.shape = (waves, lanes, nvgpr, nagpr, lds_size, priv_size, device)  # what restart() needs to match
    self.written = {"v": 0, "a": 0, "s": 0, "hw": False}  # rows written since the start (bit masks; see mark)
    self.lane = np.arange(lanes, dtype=U32)
    self.pending = None  # (VGPR rows to clear, (v0 template, waves per workgroup) or None): see restart
    self.init_rows = 0  # SGPR rows the frontend's init_waves last wrote for every wave
    self.scc = np.zeros(waves, U32)
    self.pc = np.zeros(waves, np.int64)
    self.clock = np.zeros(waves, np.int64)  # per-wave instructions: the deterministic "cycle" counter
    self.live = np.ones(waves, bool)
    self.bar = np.zeros(waves, bool)
    self.wg = wg_of_wave
    self.lds = Window("LDS", int(wg_of_wave.max()) + 1 if waves else 1, lds_size, 1 << LDS_SHIFT, device, None,
                      LDS_BITS)
    self.scratch = Window("scratch", waves * lanes, priv_size, scratch_stride(priv_size), device)
    self.scratch_used = False  # whether anything may have written the scratch window (restart clears it then)
    self.init_key = None  # the launcher's: what it wrote into the VGPR rows restart keeps (keep_v); None: rows gone
    self._lane_waves = self._wg_hi = None  # LDS: each lane's wave (race checker), workgroup slot << 20 per wave
    self._wg_first = None  # each workgroup's first wave (see groups)
    # frontends with per-thread PCs (`simt`: PTX): each lane's PC, whether it lives, the barrier it waits at (id + 1),
    # whether it waits for the rest of a collective's member mask, and whether it yielded (fair scheduling)
    self.simt = bool(getattr(self.fe, "simt", False))
    # independent thread scheduling (PTX sm_70+): a thread looping YIELD_AFTER times lets threads elsewhere in its warp
    # run; without it (ir3: one PC per wave, paths reconverge first) a wave's threads never run ahead of each other
    self.its = bool(getattr(self.fe, "its", True))
    if self.simt:
      self.lpc = np.zeros((waves, lanes), np.int64)
      self.lalive = np.zeros((waves, lanes), bool)
      self.launched = np.zeros((waves, lanes), bool)
      self.lbar = np.zeros((waves, lanes), np.int16)
      self.lbarpc = np.zeros((waves, lanes), np.int64)  # the barrier instruction each waiting lane arrived at
      self.lwait = np.zeros((waves, lanes), bool)
      self.lyield = np.zeros((waves, lanes), bool)
      self.backedges = np.zeros(waves, np.int64)
    self._cur = self._last_ix = None  # simt: the lanes the current instruction runs for (guard applied), its waves
    self._exec_of = self._exec_bits = None  # simt: the threads the EXEC row holds (run_simt), as bits per warp
    self._pc_to = self._moved_to = None  # simt: a branch's one target; where step_simt moved all its threads
    self.entry = None  # simt: the PC every live thread of a new batch stands at (the launcher's), none waiting yet
    self.entry_bits = None  # simt: the threads alive at `entry`, as _bits' words per wave (start)
    self._batch(checks)

  def _batch(self, checks) -> None:
    """The per-batch bookkeeping a fresh engine starts with."""
    self.checks = checks
    self.count = self.lane_count = self.native_count = 0  # wave-instructions, lane-instructions, of them native
    self.hooks = []
    self.ieee = 1
    self._exec, self._exec_all = None, False
    self._lds32 = (None, None)  # the last LDS address array (uint64) and its uint32 twin
    self.lds.watch = None  # (a restarted engine's previous checkers)
    if checks is not None:
      checks.attach(self)

  def settle(self, waves=None) -> None:
    """Do the `pending` per-wave setup (restart's deferred clears, init_waves' v0) for `waves` (default: all, and
    nothing is pending afterwards)."""
    if self.pending is None:
      return
    rows, v0 = self.pending
    ix = slice(None) if waves is None else np.asarray(waves, np.int64)
    for r in rows:
      self.V[ix, r] = 0
    if v0 is not None:
      tpl, nw = v0
      self.V[ix, 0] = tpl[np.arange(self.W)[ix] % nw]
    if waves is None:
      self.pending = None

  def mark(self, file: str, index: int, dwords: int = 1) -> None:
    """Registers [index, index + dwords) of `file` ("v", "a", "s") were written: restart() clears them."""
    if file in ("v", "a", "s"):
      self.written[file] |= ((1 << dwords) - 1) << index

  def groups(self) -> np.ndarray:
    """Each workgroup slot's first wave: a slot's waves are consecutive and the slots in order (every launcher's
    wg_of_wave is np.repeat(np.arange(slots), waves per slot)), so per-slot reductions are np.*.reduceat."""
    if self._wg_first is None:
      wg = self.wg
      first = np.flatnonzero(np.r_[True, wg[1:] != wg[:-1]]) if len(wg) else np.zeros(0, np.int64)
      if not np.array_equal(wg[first], np.arange(len(first))) or not np.all(wg[1:] >= wg[:-1]):
        raise ValueError("a workgroup's waves must be consecutive, the slots in order")
      self._wg_first = first
    return self._wg_first

  def restart(self, wg_of_wave: np.ndarray, prog: Program | None = None, mem=None, defer: bool = False,
              keep_s: int = 0, keep_v: int = 0) -> None:
    """Start the next batch of the same shape on these arrays (of this dispatch, or another one's: `prog`, `mem`):
    exactly the state a new Engine has, but only the register rows the last batch wrote are cleared (zeroing and
    first-touching whole files costs more than a native batch runs). `defer`: VGPR rows to clear (and v0, see
    init_waves) are left `pending`, done wave by wave by the native tier right before each wave's first
    instruction (the rows are then in cache), or by `settle()` before anything else looks at them. `keep_s`, `keep_v`:
    SGPR / VGPR rows (bit masks) the caller rewrites whole for every wave right after (init_waves, PTX's _init)."""
    if prog is not None:
      self.prog, self.fam = prog, prog.family
    if mem is not None:
      self.mem = mem
    self.settle()
    for file, rows in self.written.items():
      if file == "hw":
        if rows:
          self.HW[:] = 0
        continue
      F = self.files[file]
      if file == "v":  # v0 (the work-item ids) is rewritten whole by init_waves: it only needs to know
        self.v0_stale = bool(rows & 1)
        rows &= ~1 & ~keep_v
      if rows < 0 or rows >> len(F):  # everything (a whole-file write), or rows past the file
        F[:] = 0
        if file == "v":
          self.init_key = None
        continue
      if file == "v" and defer:
        self.pending = (_set_bits(rows, len(F)), None)
        continue
      if file == "s":
        rows &= ~keep_s
      while rows:
        r = (rows & -rows).bit_length() - 1
        run = ((rows >> r) ^ ((rows >> r) + 1)).bit_length() - 1  # consecutive written rows from r
        F[r:r + run] = 0
        rows &= ~(((1 << run) - 1) << r)
    self.written = {"v": self.written["v"] if self.pending else 0, "a": 0, "s": 0, "hw": False}
    for a, v in ((self.scc, 0), (self.pc, 0), (self.clock, 0), (self.live, True), (self.bar, False)):
      a.fill(v)
    if wg_of_wave is not self.wg and not np.array_equal(wg_of_wave, self.wg):
      self.wg, self._wg_hi, self._wg_first = wg_of_wave, None, None
    self.lds.buf.fill(0)
    if self.scratch_used:
      self.scratch.buf.fill(0)
      self.scratch_used = False
    if self.simt:  # every thread's liveness, barrier and collective state, as a new engine has them (its PC is the
      # launcher's to set: it places every thread; lbarpc is read only where lbar says a thread waits)
      for a in (self.lalive, self.launched, self.lbar, self.lwait, self.lyield, self.backedges):
        a.fill(0)
      for k in ("barcount", "barexp", "barred"):  # (sized by the batch's CTAs: made again at the first barrier)
        self.__dict__.pop(k, None)
      self._cur = self._last_ix = self._exec_of = self.entry = self.entry_bits = None
    self._batch(None)

  def start(self, pc: int, alive: np.ndarray) -> None:
    """Per-thread PCs: every thread of the new batch stands at `pc`; `alive` (waves of one workgroup, lanes) bool:
    the threads each workgroup launches, the same in every one. run_simt starts from it without scanning the batch
    (its EXEC words: one workgroup's, repeated)."""
    nw = len(alive)
    self.lalive.reshape(-1, nw, self.L)[:] = alive
    self.launched[:] = self.lalive
    self.entry, self.entry_bits = pc, np.tile(_bits(np.asarray(alive, bool)), (self.W // nw, 1))

  # ------------------------------------------------------------------ register access
  def exec_mask(self, ix) -> np.ndarray:
    """EXEC as a (waves, lanes) bool mask; cached for the whole batch until an instruction writes EXEC. With per-thread
    PCs: the lanes the scheduler picked for this instruction (run_simt)."""
    if self.simt:
      return self._cur
    whole = isinstance(ix, slice)
    if whole and self._exec is not None:
      return self._exec
    e = np.ascontiguousarray(self.S[ix, self.sp["exec"]:self.sp["exec"] + self.L // 32])
    m = np.unpackbits(e.view(np.uint8), axis=1, bitorder="little").view(bool)
    if whole:
      self._exec, self._exec_all = m, bool(m.all())
    return m

  def sreg(self, ix, code: int, dwords: int = 1):
    """A scalar operand by its register code, shaped (waves, 1) (the frontend knows the special codes)."""
    return self.fe.sreg(self, ix, code, dwords)

  @staticmethod
  def join(parts, axis):
    """Consecutive dwords along `axis` -> one value: uint64 for two, Python ints (object) for more."""
    take = lambda k: parts[(slice(None),) * axis + (k,)]  # a view: astype below makes the one copy
    if parts.shape[axis] == 2:
      t = take(1).astype(U64)
      t <<= U64(32)
      t |= take(0)
      return t
    return sum(take(k).astype(object) << (32 * k) for k in range(parts.shape[axis]))

  def nwaves(self, ix):
    return self.W if isinstance(ix, slice) else len(ix)

  def fetch(self, s: Src, ix, op: Op | None = None):
    """An operand's raw bits: (waves, lanes) for VGPRs, (waves, 1) for scalars, a numpy scalar for constants;
    then the encoding's routing: DPP on src0, 16-bit halves (true16 / op_sel), packed op_sel, abs/neg bits."""
    if s.file == "k":
      v = U64(s.value) if s.dwords == 2 or s.value > M32 else U32(s.value)
    elif s.file in ("v", "a"):
      F = self.V if s.file == "v" else self.A
      v = F[ix, s.index] if s.dwords == 1 else self.join(F[ix, s.index:s.index + s.dwords], axis=1)
      if op is not None and op.info.get("dpp") and s is op.ins.get("S0"):
        v = self.fe.source_lanes(v, op, self.L)
    else:
      v = self.sreg(ix, s.index, s.dwords)
    if s.hi:
      v = v >> U32(16)
    if s.pk:
      lo, hi, w = s.pk
      t, m = (U64, U64(M32)) if w == 32 else (U32, U32(0xffff))
      v = np.asarray(v).astype(t)
      v = ((v >> t(w * lo)) & m) | (((v >> t(w * hi)) & m) << t(w))
    if s.abs or s.neg:  # as wide as the operand (a 64-bit one may carry a mask for its low dword only: neg_lo)
      v = np.asarray(v)
      t = U64 if v.dtype.itemsize == 8 or max(s.neg, s.abs) > M32 else U32
      v = (v.astype(t) & t(~s.abs & (M64 if t is U64 else M32))) ^ t(s.neg)
    return v

  def store(self, d: Src, v, ix, m, op: Op | None = None):
    """Write raw bits `v` to operand `d` for waves `ix` under lane mask `m` (None: whole wave)."""
    self.mark(d.file, d.index, d.dwords)
    if isinstance(v, Wide) and d.dwords in (3, 4):  # two uint64 words: the dwords without Python ints
      return self._store_parts(d, dwords(v, d.dwords), ix, m, op)
    v = np.asarray(v)
    if d.file in ("v", "a") and isinstance(ix, slice) and d.dwords <= 2 and v.dtype != object and \
       not (d.bits == 16 and d.dwords == 1) and not (op is not None and op.info.get("sdwa")):
      # straight into the register file (a view): one cast-and-copy per dword, integer casts keeping the low bits
      F = self.V if d.file == "v" else self.A
      where = True if m is None or (m is self._exec and self._exec_all) else m
      np.copyto(F[ix, d.index], v, casting="unsafe", where=where)
      if d.dwords == 2:
        np.right_shift(v.astype(U64, copy=False), U64(32), out=F[ix, d.index + 1], casting="unsafe", where=where)
      return
    if d.dwords == 2 and v.dtype != object and v.ndim and LITTLE:  # (lo, hi) as two strided uint32 views
      w = np.ascontiguousarray(v.astype(U64, copy=False)).view(U32).reshape(v.shape + (2,))
      parts = [w[..., 0], w[..., 1]]
    else:
      parts = dwords(v, d.dwords)
    self._store_parts(d, parts, ix, m, op)

  def _store_parts(self, d: Src, parts, ix, m, op: Op | None):
    if d.file == "s":
      if d.index >= 128 and d.index not in (self.sp["exec"], self.sp["exec"] + 1):
        return  # constants; RDNA's NULL (124) is reset below
      if d.index <= self.sp["exec"] + 1 and d.index + d.dwords > self.sp["exec"]:
        self._exec = None
      n = self.nwaves(ix)
      for k, p in enumerate(parts):
        p = np.broadcast_to(p, (n,) + np.shape(p)[1:]).reshape(n, -1)
        if p.shape[1] > 1 and m is not None and not isinstance(m, bool):  # per-lane data: the first active lane's
          p = p[np.arange(n), np.argmax(np.broadcast_to(m, p.shape), axis=1)]  # (lane 0 when none is active)
        else:
          p = p[:, 0]
        p = p.astype(U64).astype(U32) if p.dtype == object else p.astype(U32)
        if d.fmt == "half":  # a half register (ir3's shared hr48.x..): its half of the row, the other kept
          old = self.S[ix, d.index]
          p = (old & U32(0xffff)) | (p << U32(16)) if d.hi else (old & U32(0xffff0000)) | (p & U32(0xffff))
        self.S[ix, d.index + k] = p
      if d.index <= self.sp["null"] < d.index + d.dwords and self.sp["null"] != self.sp["m0"]:
        self.S[:, self.sp["null"]] = 0
      return
    F, shp = (self.V if d.file == "v" else self.A), (self.nwaves(ix), self.L)
    for k, p in enumerate(parts):
      old = F[ix, d.index + k]
      new = (p.astype(U64) if p.dtype == object else p).astype(U32, copy=False)
      if new.shape != shp:
        new = np.broadcast_to(new, shp)
      if d.bits == 16 and d.dwords == 1:  # 16-bit results: true16 halves on RDNA, zero-extended on CDNA
        new = new & U32(0xffff)
        if self.fam != "cdna":
          new = (old & U32(0xffff)) | (new << U32(16)) if d.hi else (old & U32(0xffff0000)) | new
      if op is not None and op.info.get("sdwa"):
        new = self.fe.select_output(new, old, op)
      F[ix, d.index + k] = new if m is None or (m is self._exec and self._exec_all) else np.where(m, new, old)

  # ------------------------------------------------------------------ one instruction on a group of waves
  def execute(self, op: Op, ix) -> None:
    if op.kind == "vopd":  # both halves read their sources before either writes
      m = self.exec_mask(ix)
      sts = [self._inputs(o, ix, m) for o in op.info["pair"]]
      if self.checks is not None:
        self.checks.before(self, op, ix, m)
      outs = [{k: np.array(v) for k, v in o.sem(st, exec=self._pexec(o, m), lanes=self.L, wave64=self.L == 64).items()}
              for o, st in zip(op.info["pair"], sts)]  # copies: an output may be a view of a register the other writes
      for o, out in zip(op.info["pair"], outs):
        self.retire(o, ix, m, out)
      self.count += self.nwaves(ix)
      self.lane_count += np.count_nonzero(m)
      return
    sem, n = op.sem, self.nwaves(ix)
    m = self.exec_mask(ix) if op.vector else None
    if op.info.get("dpp") is not None:
      m = m & self.fe.write_mask(op, self.L)
    st = self._inputs(op, ix, m)
    if self.checks is not None:
      self.checks.before(self, op, ix, m)
    fancy = not isinstance(ix, slice)
    wfiles = _writes_files(op) if fancy else ()  # register files the body writes through (fancy: copies of them)
    if "VGPR" in sem.regfiles:
      st["VGPR"] = (self.V[ix] if fancy else self.V).transpose(0, 2, 1)
      if "VGPR" in wfiles or not fancy:
        self.written["v"] = -1
      if "VGPR" in wfiles:  # written back below where the body changed it (not over what retire stored)
        v0 = st["VGPR"].copy()
    if "SGPR" in sem.regfiles:
      st["SGPR"] = self.S[ix] if fancy else self.S
      if "SGPR" in wfiles or not fancy:
        self.written["s"] = -1
        self._exec = None
      if "SGPR" in wfiles:
        s0 = st["SGPR"].copy()
    if "HW_REGISTERS" in sem.regfiles:
      self.written["hw"] = True
      for row, sh, bits in self.fe.cycle_rows(self.fam):  # the cycle counters: this wave's instruction count
        self.HW[ix, row] = (self.clock[ix] >> sh) & ((1 << bits) - 1)
      st["HW_REGISTERS"] = self.HW[ix] if fancy else self.HW
    if op.mem:
      self.fe.memop(self, op, ix, m, st)
    else:
      pm = None if scalar_valu(op) else self._pexec(op, m)
      out = sem(st, exec=pm, mem=_NOMEM, lanes=self.L, wave64=self.L == 64)
      self.retire(op, ix, m, out)
    if fancy:  # register files were passed as copies: write back what the body wrote through them
      if "VGPR" in wfiles:
        changed = st["VGPR"] != v0
        if changed.any():
          self.V[ix] = np.where(changed.transpose(0, 2, 1), st["VGPR"].transpose(0, 2, 1), self.V[ix])
      if "SGPR" in wfiles:
        self.S[ix] = np.where(st["SGPR"] != s0, st["SGPR"], self.S[ix])
      if "HW_REGISTERS" in sem.regfiles:
        self.HW[ix] = st["HW_REGISTERS"]
    self.count += n
    self.lane_count += n if m is None else n * self.L if m is self._exec and self._exec_all else np.count_nonzero(m)

  def _inputs(self, op: Op, ix, m) -> dict:
    st = {}
    for name, kind, s in _input_plan(op):
      if kind == _VGPR:
        st[name] = self.V[ix, s]
      elif kind == _CONST:
        st[name] = s
      elif kind == _FETCH:
        st[name] = self.fetch(s, ix, op)
      elif kind == _OLD:
        st[name] = self.fetch(s, ix)
      elif kind == _WIDE:
        st[name] = self._wide(s, ix)
      else:
        st[name] = self.special(name, ix, op)
    if op.info.get("sdwa"):
      self.fe.select_inputs(self, st, op)
    for name, bits, n in op.info.get("ftz", ()):  # float inputs the wave's mode flushes (AMD: MODE.FP_DENORM)
      st[name] = self.fe.denormals(self, st[name], bits, n, ix, False)
    return st

  def _wide(self, s: Src, ix):
    """A plain 3..4-dword register operand for a 65..128-bit pcode input as two uint64 words (pcode.runtime.Wide:
    inserts into it stay on numpy words, any other use sees the object array `fetch` gives)."""
    if s.hi or s.pk or s.abs or s.neg or s.dwords > 4 or s.file not in "vas" or (s.file == "s" and (
       self.fe.computed(s.index))):
      return self.fetch(s, ix)
    F = self.S if s.file == "s" else self.V if s.file == "v" else self.A
    r = F[ix, s.index:s.index + s.dwords]
    lo, hi = self.join(r[:, 0:2], axis=1), self.join(r[:, 2:], axis=1) if s.dwords == 4 else r[:, 2].astype(U64)
    return Wide(lo[:, None], hi[:, None]) if s.file == "s" else Wide(lo, hi)  # scalars: one value per wave

  def special(self, name: str, ix, op: Op):
    """Pcode inputs that are no operand (the frontend's special_inputs): SCC, EXEC, M0, PC, MODE bits, offsets; or
    an operand that names one (PTX's time registers)."""
    s = op.ins.get(name) if op is not None else None
    kind, *arg = self.fe.special_inputs.get(s if isinstance(s, str) else name, ("none",))
    if kind == "scc":
      return self.scc[ix][:, None]
    if kind == "sgpr":
      return self.sreg(ix, self.sp[arg[0]], arg[1] or self.L // 32)
    if kind == "zero":
      return self.sreg(ix, arg[0])
    if kind == "pc":
      return self.pc[ix].astype(U64)[:, None]  # a 64-bit VA (code may live anywhere a client's mmap put it)
    if kind == "ieee":
      return U32(self.ieee)
    if kind == "round":  # set by the KD and s_setreg/s_round_mode
      return (self.HW[ix, 1] & U32(0xf))[:, None]
    if kind == "field":
      return U32(op.info.get(arg[0], 0) & M32)
    if kind == "mask":  # the lanes running this instruction together, as bits (per-thread PCs: vote, shfl ...)
      return _bits(self.exec_mask(ix)).astype(U32 if self.L <= 32 else U64)
    if kind == "clock":  # a time source: the wave's own instruction count (deterministic), shifted by arg
      return (self.clock[ix].astype(U64) >> U64(arg[0] if arg else 0))[:, None]
    return U32(0)  # "none": inputs only hooks read (SBASE, v_addr, ...), WAVE_STATUS.PRIV, ...

  def retire(self, op: Op, ix, m, out: dict, counted: bool = True) -> None:
    if op.info.get("deliver"):  # outputs the frontend sends elsewhere than registers (AMD: a load's data into LDS)
      out = self.fe.deliver(self, op, ix, m, out)
    if len(out) > 1:  # outputs may alias register views read as inputs: snapshot those before writing any
      out = {k: np.array(v) if self._aliases(v) else v for k, v in out.items()}
    for name, v in out.items():
      if name == "PC" and self.simt:  # per-thread PCs: the lanes that ran it branch
        move(self, ix, (np.asarray(v).astype(np.int64), m))
        self._pc_to = int(v) if np.ndim(v) == 0 else None  # (one target for all: run_simt needs no scan)
      elif name == "PC":
        self.pc[ix] = np.asarray(v).reshape(-1).astype(np.int64) if np.ndim(v) else int(v)
      elif name == "SCC":
        self.scc[ix] = np.broadcast_to(np.asarray(v).reshape(-1) if np.ndim(v) else v, (self.nwaves(ix),)).astype(U32)
      elif name in ("EXEC", "EXEC_LO"):
        self.store(Src("s", self.sp["exec"], self.L // 32 if name == "EXEC" else 1), v, ix, None)
      elif name == "M0":
        self.store(Src("s", self.sp["m0"]), v, ix, None)
      else:
        d = op.outs.get(name)
        if d is None:
          continue
        if name == "D0" and (op.info.get("clamp") or op.info.get("omod")):
          if float_result(d):
            v = self.fe.output_modifier(np.asarray(v), d, op)
          elif op.info.get("clamp"):
            raise GputwinError(f"clamp on the integer result of {op.inst.op} (saturating arithmetic) is not modelled")
        if name == "D0" and op.info.get("ftz_out", (0,))[0]:
          bits, n, first = op.info["ftz_out"]
          v = self.fe.denormals(self, v, bits, n, ix, True, first)
        self.store(d, v, ix, m if d.file in ("v", "a") or op.vector else None, op)
    if self.checks is not None and counted:
      self.checks.after(self, op, ix, m)

  def _aliases(self, v) -> bool:
    """Whether v may be a view of architectural state (a bounds test, no element comparison)."""
    return isinstance(v, np.ndarray) and v.base is not None and any(
      np.may_share_memory(v, f) for f in (self.V, self.S, self.A, self.scc, self.HW, self.pc))

  # ------------------------------------------------------------------ memory
  def address(self, a: Address, ix) -> np.ndarray:
    """An Address plan evaluated: (waves, lanes) addresses, or (waves, 1) when every term is per wave; uint64, or
    uint32 for a 32-bit plan (its arithmetic wraps there, as the hardware's does)."""
    t = U32 if a.width == 32 and all(x.dwords == 1 for x in a.terms) else U64
    acc = None
    for x in a.terms:
      v = np.asarray(self.fetch(x, ix))
      v = v if v.dtype == t else v.astype(t)
      acc = v if acc is None else acc + v
    if acc is None:
      acc = np.zeros((self.nwaves(ix), 1), t)
    if a.offset:
      acc = acc + t(a.offset & (M32 if t is U32 else M64))
    if a.width == 32 and t is U64:
      acc = acc & U64(M32)
    if a.align > 1:
      acc = acc & ~t(a.align - 1)
    return acc

  def _slots(self, ix) -> np.ndarray:
    return np.arange(self.W, dtype=U64)[ix]

  def lds_address(self, op: Op, ix, m, base) -> np.ndarray:
    """LDS addresses for pcode's 32-bit ADDR, with the workgroup slot on top (one LDS byte, one address: pcode's
    atomics serialise lanes that hit the same address, across waves too). DS address arithmetic is 32-bit and
    compilers rely on it wrapping (a "negative" base plus an instruction offset), so the base is kept mod 2**19:
    a sum that wrapped carries into bit 19, which the LDS window drops. Any base further than 256 KiB from 0 can
    only fault."""
    reach = U32(1 << (LDS_BITS - 1))
    whole = isinstance(ix, slice)
    if int(base.max()) >= reach:  # some base is not in [0, 256 KiB): the slow check, and keep it mod 2**19
      near = base + reach  # wraps: bases within 256 KiB of 0 (either side) land below 2 * reach
      bad = (near >= 2 * reach) & np.broadcast_to(True if m is None else m, base.shape)
      if bad.any():
        raise GPUPageFault(int(base[bad][0]), 4, "read" if "r" in op.sem.mem else "write", self.lds.device,
                           f"LDS address past the {self.lds.size}-byte allocation")
      base = base & U32((1 << LDS_BITS) - 1)
    if self.checks is not None:  # the race checker learns each access's wave from the lane order pcode uses
      every = m is None or (m is self._exec and self._exec_all)
      if every and whole:
        if self._lane_waves is None:
          self._lane_waves = np.repeat(np.arange(self.W), self.L)
        self.lds.lane_waves = self._lane_waves
      else:
        waves = np.arange(self.W)[ix]
        self.lds.lane_waves = np.repeat(waves, self.L) if every else \
          waves[np.nonzero(np.broadcast_to(m, base.shape))[0]]
    if self._wg_hi is None:  # workgroup slot << 20 per wave: fits 32 bits (MAX_WAVES)
      self._wg_hi = self.wg.astype(U32) << U32(LDS_SHIFT)
    hi = self._wg_hi if whole else self._wg_hi[ix]
    a32 = base | hi[:, None]
    a = a32.astype(U64)
    self._lds32 = (a, a32)  # bodies with a 32-bit ADDR (CDNA) take this one as it is (see _run)
    return a

  def run_scratch(self, op, ix, m, st, a, counted: bool = True):
    """Private segment offsets -> one scratch slot per lane (the hardware's swizzle is invisible to a kernel). An
    offset at or past the segment size faults here (an access reaching past it: in the window's check)."""
    bad = (a >= U64(self.scratch.size)) & np.broadcast_to(True if m is None else m, np.shape(a))
    if bad.any():
      raise GPUPageFault(int(np.asarray(a)[bad][0]), 4, "read" if "r" in op.sem.mem else "write",
                         self.scratch.device, f"scratch offset past its {self.scratch.size}-byte allocation")
    lane = self._slots(ix)[:, None] * U64(self.L) + self.lane.astype(U64)
    self.scratch_used = True
    return self.run_body(op, ix, m, st, self.scratch, lane * U64(self.scratch.stride) + a, counted)

  def run_body(self, op: Op, ix, m, st, space, a, counted: bool = True):
    """Run a memory instruction's body on `space` at the addresses `a` the frontend computed (Frontend.memop).
    `counted`: False for all but one of the runs of an instruction whose lanes go to several spaces (the checkers
    count one issued instruction)."""
    bits = va_bits(op, self.fe) if space is self.mem else 32  # (windows: addresses below 4 GiB)
    if space is self.mem and bits < 64:  # guest VAs are `bits` wide (AMD: below 4 GiB): anything above faults
      act = a if m is None or (m is self._exec and self._exec_all) else np.where(m, a, U64(0))
      if int(act.max()) >> bits:
        bad = np.asarray(act).reshape(-1)
        raise GPUPageFault(int(bad[bad >> U64(bits) > 0][0]), 4, "read" if "r" in op.sem.mem else "write",
                           getattr(self.mem, "device", ""))
    if "ADDR" in op.sem.inputs:  # given in the width the body declares (LDS addresses are below 2**32 already)
      if space is self.lds and op.sem.inputs["ADDR"] <= 32 and self._lds32[0] is a:
        st["ADDR"] = self._lds32[1]
      else:
        a32 = a if space is self.lds or bits == 64 else a & U64((1 << bits) - 1)
        st["ADDR"] = a32 if op.sem.inputs["ADDR"] > 32 else a32.astype(U32)
    out = op.sem(st, exec=self._pexec(op, m), mem=_Mem(space, a), lanes=self.L, wave64=self.L == 64)
    self.retire(op, ix, m, out, counted)

  def _pexec(self, op: Op, m):
    """The mask pcode sees: None when every lane of the batch is active (saves its masked merges; loads and stores
    then touch every lane in lane order, as with the mask). Atomics keep the mask: pcode checks it for lanes that
    must run their read-modify-write one after another."""
    return None if m is self._exec and self._exec_all and not op.atomic else m


def _writes_files(op: Op) -> tuple:
  """The register files (VGPR, SGPR) `op`'s body stores through, worked out once."""
  w = op.info.get("_wfiles")
  if w is None:
    from gputwin.pcode.analysis import writes_regfile
    w = op.info["_wfiles"] = tuple(f for f in ("VGPR", "SGPR") if f in op.sem.regfiles and
                                   writes_regfile(op.sem.program.body, f))
  return w


_FETCH, _OLD, _WIDE, _SPECIAL, _VGPR, _CONST = range(6)


def _input_plan(op: Op) -> list:
  """How Engine._inputs gets each pcode input of `op`, worked out once: (name, kind, operand); plain one-dword VGPRs
  (no DPP, halves, packing or modifiers) are a view of the register file, plain constants a prepared numpy scalar."""
  plan = op.info.get("_inputs")
  if plan is None:
    plain = lambda s: not (s.hi or s.pk or s.abs or s.neg)
    plan = []
    for name in op.sem.inputs:
      s = op.ins.get(name)
      if not isinstance(s, Src):
        plan.append((name, _SPECIAL, None))
      elif s.dwords > 2 and op.sem.inputs[name] > 64:
        plan.append((name, _WIDE, s))
      elif s.file == "v" and s.dwords == 1 and plain(s) and not (op.info.get("dpp") and s is op.ins.get("S0")):
        plan.append((name, _VGPR, s.index))
      elif s.file == "k" and plain(s):
        plan.append((name, _CONST, U64(s.value) if s.dwords == 2 or s.value > M32 else U32(s.value)))
      else:
        plan.append((name, _FETCH, s))
    for name, s in op.old.items():
      wide = s.dwords > 2 and max(op.sem.inputs.get(name, 0), op.sem.outputs.get(name, 0)) > 64
      plan.append((name, _WIDE if wide else _VGPR if s.file == "v" and s.dwords == 1 and plain(s) else _OLD,
                   s.index if not wide and s.file == "v" and s.dwords == 1 and plain(s) else s))
    op.info["_inputs"] = plan
  return plan


# ------------------------------------------------------------------------------------------ the scheduler
def step(eng: Engine, op: Op, ix) -> None:
  """Execute `op` for waves `ix` (all standing at op.pc) and advance their PCs."""
  k = op.kind
  if k in ("alu", "mem", "vopd"):
    eng.execute(op, ix)
    if not sets_pc(op):
      eng.pc[ix] += op.size
  elif k in ("matrix", "clock"):  # WMMA/MFMA: the frontend's operand layouts; a time source: the wave's clock
    m = eng.exec_mask(ix)
    if eng.checks is not None:
      eng.checks.before(eng, op, ix, m)
    if k == "matrix":
      eng.fe.matrix(eng, op, ix)
    else:
      eng.store(op.outs["D0"], eng.clock[ix].astype(U64), ix, None)
    if eng.checks is not None:
      eng.checks.after(eng, op, ix, m)
    eng.pc[ix] += op.size
  elif k == "nop":
    if eng.checks is not None:
      eng.checks.wait(eng, op, ix)
    eng.pc[ix] += op.size
  elif k in ("end", "barrier"):
    if k == "barrier":
      eng.pc[ix] += op.size
    _event(eng, k, ix)
  elif k == "trap":
    raise Stop("trap", f"s_trap {op.inst.get('simm16', 0):#x}", _first(eng, ix), op)
  else:
    why = " (s_code_end padding: the PC ran off the end of the kernel)" if k == "bad" else \
      f" ({op.info['why']})" if op.info.get("why") else ""
    raise Stop("unsupported", f"{op.inst.op} has no executable semantics on {eng.prog.arch}{why}", _first(eng, ix), op)
  eng.clock[ix] += 1
  if k not in ("alu", "mem", "vopd"):
    n = eng.nwaves(ix)
    eng.count += n
    eng.lane_count += n * eng.L
  for h in eng.hooks:
    h(eng, op, ix)


def _first(eng, ix) -> int:
  return int(np.arange(eng.W)[ix][0])


def _event(eng: Engine, kind: str, ix) -> None:
  """The scheduler's part of s_endpgm ("end": the waves are done) and s_barrier ("barrier": they wait there until
  every live wave of their workgroup arrived), after the instruction ran (interpreted, or ending a native block)."""
  if kind == "end":
    eng.live[ix] = False
    if eng.bar.any():  # the last waves of a workgroup may be what its barrier waits for
      _release(eng, ix)
  else:
    eng.bar[ix] = True
    _release(eng, ix)


def _release(eng: Engine, ix) -> None:
  """Release the barrier of every workgroup whose live waves have all arrived."""
  first = eng.groups()
  waiting = ~np.logical_or.reduceat(eng.live & ~eng.bar, first)
  done = waiting & np.logical_or.reduceat(eng.bar, first)
  if done.any():
    eng.bar[done[eng.wg]] = False
    if eng.checks is not None:
      eng.checks.barrier(eng, np.nonzero(done)[0])


def run(eng: Engine, serial: bool = False, max_instructions: int | None = None, steps: int | None = None) -> None:
  """Step until every wave has executed s_endpgm. Batched: the group at the lowest PC runs as one operation."""
  if eng.simt:
    return run_simt(eng, serial, max_instructions, steps)
  prog = eng.prog
  idx = np.arange(eng.W)
  start = eng.count
  # the native tier runs whole blocks: not while single-stepping or in the serial reference schedule; with checkers
  # on, a block runs natively when they can decide it ahead (checks.Checks.native), else it is interpreted
  tier = None if serial or steps is not None else _native_tier(eng)
  if tier is None:
    eng.settle()
  checks = eng.checks
  together = None  # the PC every wave stands at after a step that ran them all and did not branch (no scan needed)
  while steps is None or steps > 0:
    if steps is not None:
      steps -= 1
    if together is not None:
      pc, ix, together = together, slice(None), None
    else:
      ready = eng.live & ~eng.bar
      if not ready.any():
        if eng.live.any():
          raise Stop("deadlock", "every live wave waits at a barrier that can never complete", int(idx[eng.live][0]))
        return
      if serial:
        w = int(np.argmax(ready))
        ix, pc = idx[w:w + 1], int(eng.pc[w])
      else:
        pc = int(eng.pc[ready].min())
        sel = ready & (eng.pc == pc)
        ix = slice(None) if sel.all() else idx[sel]
    if tier is not None and not eng.hooks:
      blk = tier.block(pc, eng.nwaves(ix))
      if blk is not None and checks is not None and not checks.native(eng, blk, ix):
        for op in blk.ops:  # the checkers need it instruction by instruction: interpret the block for these waves
          _interpret(eng, op, ix, start, max_instructions)
        last = blk.ops[-1]
        if isinstance(ix, slice) and last.kind in _STRAIGHT and not sets_pc(last):
          together = last.pc + last.size
        continue
      if blk is not None:
        if eng.pending is not None and not isinstance(ix, slice):
          eng.settle()
        try:
          tier.run(blk, ix)  # (a pending setup goes with the batch's first block, which every wave runs first)
        except Stop as e:
          if e.kind == "fault":  # the interpreter's error for it (the lane it names, the address it reports)
            _refault(eng, lambda st=e: _interpret(eng, st.op, idx[st.wave:st.wave + 1], start, None), e)
          raise
        if checks is not None:
          checks.ran(eng, blk, ix, tier.native.log)
        if max_instructions is not None and eng.count - start > max_instructions and sets_pc(blk.ops[-1]):
          raise Stop("watchdog", f"more than {max_instructions} wave-instructions executed (--max-instructions)",
                     _first(eng, ix), blk.ops[-1])
        last = blk.ops[-1]
        if blk.tail:  # it ended with s_endpgm or s_barrier (native.plan.tail)
          _event(eng, blk.tail, ix)
        elif isinstance(ix, slice) and not sets_pc(last):
          together = last.pc + last.size
        continue
    eng.settle()
    try:
      op = prog.op(pc)
    except GputwinError as e:
      raise Stop("decode", str(e), int(np.arange(eng.W)[ix][0])) from None
    _interpret(eng, op, ix, start, max_instructions)
    if isinstance(ix, slice) and not eng.hooks and op.kind in _STRAIGHT and not sets_pc(op):
      together = pc + op.size


def _refault(eng: Engine, again, stop: Stop) -> None:
  """A native block faulted: `again()` runs the faulting instruction on the interpreter for the faulting wave, whose
  memory checks every lane before any access, so it raises the interpreter's error (the lane it names, the address
  it reports) without side effects. Checkers stay out of it (the block's effects on them were never entered)."""
  checks, eng.checks = eng.checks, None
  try:
    again()
  except GPUPageFault as f:
    raise Stop("fault", str(f), stop.wave, stop.op, f) from None
  finally:
    eng.checks = checks


def _interpret(eng: Engine, op: Op, ix, start: int, max_instructions: int | None) -> None:
  """One instruction for waves `ix` on the interpreter, its errors located; the watchdog after branches."""
  eng.settle()
  _check_extent(eng, op, ix)
  try:
    step(eng, op, ix)
  except GPUPageFault as e:
    raise Stop("fault", str(e), _first(eng, ix), op, e) from None
  except GputwinError as e:  # a body or layout the model lacks, a register index past the file: name the place
    raise Stop("error", getattr(e, "msg", None) or str(e), _first(eng, ix), op) from None
  if max_instructions is not None and eng.count - start > max_instructions and sets_pc(op):
    # checked after branches only, as the native tier checks after its blocks: both stop at the same branch
    raise Stop("watchdog", f"more than {max_instructions} wave-instructions executed (--max-instructions)",
               _first(eng, ix), op)


_STRAIGHT = ("alu", "mem", "vopd", "matrix", "clock", "nop")  # kinds after which every wave is at pc + size


def _check_extent(eng: Engine, op: Op, ix) -> None:
  """Stop before an instruction whose register operands reach past this dispatch's allocation (the frontend's
  op.info["extent"]: VGPRs, AccVGPRs); the native tier declines such blocks, so this covers both tiers."""
  ext = op.info.get("extent")
  if ext is not None and (ext[0] > eng.V.shape[1] or ext[1] > eng.A.shape[1]):
    f, n = ("v", eng.V.shape[1]) if ext[0] > eng.V.shape[1] else ("a", eng.A.shape[1])
    raise Stop("registers", f"operands up to {f}{ext[0 if f == 'v' else 1] - 1} are past the kernel's allocation of "
               f"{n} {'VGPRs' if f == 'v' else 'AccVGPRs'} (its kernel descriptor's register count)",
               _first(eng, ix), op)


def _native_tier(eng: Engine):
  """The compiled-block tier (emu/native/) for this engine, or None when it is off (GPUTWIN_JIT=0) or unusable."""
  from gputwin.emu import native
  if native.mode() in ("0", "off", "no") or eng.L % 32:  # (EXEC: whole dwords of lane bits)
    return None
  key = (eng.prog, eng.wg)  # a restarted engine keeps its tier while these stay (a new address space: rebound)
  t = getattr(eng, "_tier", None)
  if t is None or any(a is not b for a, b in zip(t[0], key)) or (t[1] is None and t[2] is not eng.mem):
    t = eng._tier = (key, native.Tier.make(eng), eng.mem)
  elif t[1] is not None:
    if t[2] is not eng.mem:
      t[1].native.rebind()
      t = eng._tier = (key, t[1] if t[1].native.ok else None, eng.mem)
    if t[1] is not None:
      t[1].fresh()
  return t[1]


# ------------------------------------------------------------------------------- per-thread PCs (simt frontends)
YIELD_AFTER = 64  # back-edges a warp takes before its lanes yield to threads standing elsewhere (fair scheduling)


def run_simt(eng: Engine, serial: bool = False, max_instructions: int | None = None, steps: int | None = None) -> None:
  """The scheduler for per-thread PCs (sm_70+ independent thread scheduling): the lowest PC any ready thread stands
  at runs next, for every thread standing there (all warps together, one vectorised pcode call), so a diverged
  warp reconverges where its paths meet. Threads that yielded (nanosleep, or YIELD_AFTER back-edges of their warp)
  are picked only when no other thread is ready, so a spin-wait lets the thread it waits for run. `serial`: the
  lowest warp with a ready thread runs alone (the oracle schedule). A launcher may leave eng.lpc unwritten and set
  eng.entry, the PC every thread of a new batch stands at."""
  prog, start, big = eng.prog, eng.count, np.iinfo(np.int64).max
  # the native tier runs straight-line blocks for the threads standing at their first PC (as EXEC); a block may end
  # with a branch, exit or barrier whose lanes _tail then moves
  checks = eng.checks  # (with checkers on, a block runs natively when they can decide it ahead, as in run)
  tier = None if serial or steps is not None else _native_tier(eng)
  if tier is None:
    eng.settle()
  interp = None  # (first, end) PCs of a block the checkers declined: its instructions are interpreted
  together = None  # (pc, ix, sel) when every ready thread ran the last, straight-line, step: they all stand there
  # (pc, ix, sel): threads sel of warps ix stand at pc, which eng.lpc does not say yet. While native blocks move
  # every ready thread together (`fast`), their PCs are written once, when that ends (_place), not after each block
  stale = bits = None  # bits: the first step's threads as _bits' words, when the launcher gave them (Engine.start)
  if eng.entry is not None and not serial and not eng.lwait.any() and \
     (_per_warp(eng.lalive) if eng.entry_bits is None else eng.entry_bits.any(axis=1)).all():
    together = stale = (eng.entry, slice(None), eng.lalive.copy())  # a new batch: all at the entry, none waiting
    bits = eng.entry_bits
  elif eng.entry is not None:
    eng.lpc[:] = eng.entry
  eng.entry = eng.entry_bits = None
  try:
    while steps is None or steps > 0:
      if steps is not None:
        steps -= 1
      known, bits = bits, None  # (the launcher's words: the first step's only)
      if together is not None:
        (pc, ix, sel), together, covers = together, None, True
      else:
        if not eng.lalive.any():  # every thread exited (PCs of exited threads are not kept)
          stale = None
          return
        if stale is not None:
          _place(eng, *stale)
          stale = None
        ready = eng.lalive & (eng.lbar == 0) & ~eng.lwait
        if not ready.any():
          if eng.lwait.any():
            w, lanes = _waiting(eng.lwait)
            raise Stop("deadlock", f"lanes {lanes} wait at a .sync collective for member-mask lanes that never "
                       "arrive (exited, or waiting at a barrier)", w, prog.op(int(eng.lpc[w][eng.lwait[w]][0])))
          w, lanes = _waiting(eng.lalive)
          raise Stop("deadlock", "every live thread waits at a barrier that can never complete", w,
                     prog.op(int(eng.lpc[w][eng.lalive[w]][0])))
        pick = ready & ~eng.lyield
        if not pick.any():
          eng.lyield[:] = False
          pick = ready
        if serial:
          w = int(np.argmax(_per_warp(pick)))
          pc = int(eng.lpc[w][pick[w]].min())
          ix, sel = np.array([w]), (ready[w] & (eng.lpc[w] == pc))[None]
        else:
          pc = int(eng.lpc.min())  # the lowest PC of any thread is usually a picked one's (exited and waiting
          at = eng.lpc == pc  # threads stand further on): one min and one compare instead of a masked min
          if not (at & pick).any():
            pc = int(np.where(pick, eng.lpc, big).min())
            at = eng.lpc == pc
          sel = ready & at
          rows = _per_warp(sel)
          ix = slice(None) if rows.all() else np.nonzero(rows)[0]
          if not isinstance(ix, slice):
            sel = sel[ix]
        covers = not serial and not eng.lwait.any() and np.count_nonzero(sel) == np.count_nonzero(ready)
      fast = covers and not eng.hooks and max_instructions is None
      if tier is not None and not eng.hooks and not (interp is not None and interp[0] < pc < interp[1]):
        blk, join = tier.block(pc, eng.nwaves(ix)), None
        if blk is not None and not covers:
          join = _inside(eng, ready, ix, sel, pc, blk)
          if join is True:
            blk = None  # threads of these warps wait inside the block: they join the ones here step by step
        if blk is not None and blk.whole and not sel.all():
          blk = None  # a warp-wide tensor op: whole warps only (the interpreter's rendezvous and errors otherwise)
        # (every live thread stands here: every ready one does, and none waits at a barrier (which it would count) or
        # for a collective's members; a plain barrier that ends the block then completes at once)
        if blk is not None and checks is not None and not checks.native(
            eng, blk, ix, covers and not _counting(eng) and not eng.lwait.any(), covers):
          interp, blk = (pc, pc + blk.span), None
        if blk is not None:
          taken = _run_block(eng, tier, blk, ix, sel, known)
          then = fast and blk.tail == "branch" and taken.any() and _hammock(eng, tier, blk, ix, sel, taken)
          if then:  # the untaken threads ran the block up to the target: every thread of sel is there, or past its
            to, at = then  # barrier
          elif blk.tail and taken.any():
            to, at = _tail(eng, blk, ix, sel, taken, eng._exec_bits, join)
          else:
            to = at = pc + blk.span
          # at: where every thread of sel (and those joining at its closing barrier or exit) stands now, which _tail
          # left unwritten (None: written)
          stale = None if at is None else (at, ix, sel if join is None else sel | join)
          if not fast and stale is not None:
            _place(eng, *stale)
            stale = None
          if max_instructions is not None and eng.count - start > max_instructions:
            raise Stop("watchdog", f"more than {max_instructions} warp-instructions executed (--max-instructions)",
                       _first(eng, ix), blk.ops[-1])
          if fast and to is not None:
            together = (to, ix, sel)
          continue
      try:
        op = prog.op(pc)
      except GputwinError as e:
        raise Stop("decode", str(e), _first(eng, ix)) from None
      if stale is not None:
        _place(eng, *stale)
        stale = None
      eng.settle()
      try:
        step_simt(eng, op, ix, sel)
      except GPUPageFault as e:
        raise Stop("fault", str(e), _first(eng, ix), op, e) from None
      if max_instructions is not None and eng.count - start > max_instructions:
        raise Stop("watchdog", f"more than {max_instructions} warp-instructions executed (--max-instructions)",
                   _first(eng, ix), op)
      if fast and eng._moved_to is not None:  # they all stand at one PC: no scan needed
        together = (eng._moved_to, ix, sel)
  finally:
    if stale is not None:
      _place(eng, *stale)


def _run_block(eng: Engine, tier, blk, ix, sel, bits: np.ndarray | None = None) -> np.ndarray:
  """Run the native block `blk` for threads `sel` of warps `ix` (as EXEC; `bits`: _bits(sel) when known); the lanes
  its last instruction took when it branches or exits (native.plan.tail), as _bits' words per warp of ix."""
  if eng._exec_of is not sel:  # the threads standing here, as EXEC (unchanged after a step that ran them all)
    b = _bits(sel) if bits is None else bits
    eng.S[ix, eng.sp["exec"]:eng.sp["exec"] + eng.L // 32] = _dwords(b, eng.L)
    eng._exec_of, eng._exec_bits = sel, b
  eng._cur, eng._last_ix = sel, ix
  if eng.pending is not None and not isinstance(ix, slice):
    eng.settle()
  try:
    taken = tier.run(blk, ix)[ix]  # (a pending setup goes with the batch's first block, which every warp runs first)
  except Stop as e:
    if e.kind == "fault":  # the interpreter's error for it (the thread it names, the address it reports)
      row = e.wave if isinstance(ix, slice) else int(np.flatnonzero(ix == e.wave)[0])
      _refault(eng, lambda st=e: step_simt(eng, st.op, np.array([st.wave]), sel[row:row + 1]), e)
    raise
  if eng.checks is not None:
    eng.checks.ran(eng, blk, ix, tier.native.log, tier.native.ran)
  return taken


def _hammock(eng: Engine, tier, blk, ix, sel, taken: np.ndarray) -> tuple[int | None, int] | None:
  """After a native block ending in a forward branch that some threads of `sel` took (every ready thread stands in
  sel): when the threads it did not take go on into a compiled block that ends where the others went, without an
  event or at a plain barrier there, the scheduler would run that block for them next (the warps they are in) and then
  every thread of sel together: the target's barrier, or on from the target. Run it now; returns _tail's (the PC
  every thread of sel goes on at together, or None; the PC they stand at, unwritten in eng.lpc), or None when
  nothing ran."""
  last, nxt = blk.ops[-1], blk.pc + blk.span
  to = int(last.ins["TARGET"].value)
  if to <= nxt or not tier.compiled(nxt):
    return None
  bits = eng._exec_bits  # (sel's: every thread of sel reaches the target)
  rest = bits & ~taken
  rows = _per_warp(rest.view(bool))  # (a warp none of whose threads goes on does not run the block)
  if not rows.any():
    return None
  sub, on = ix, sel & ~_lanes(taken, eng.L)
  if not rows.all():
    sub = np.flatnonzero(rows) if isinstance(ix, slice) else ix[rows]
    on, rest = on[rows], rest[rows]
  then = tier.block(nxt, eng.nwaves(sub))
  if then is None or then.whole:
    return None
  end, bar = then.pc + then.span, then.ops[-1]
  if not (then.tail is None and end == to or then.tail == "barrier" and plain_barrier(bar) and end - bar.size == to):
    return None
  if eng.checks is not None and not eng.checks.native(eng, then, sub, False, True):
    return None  # (alone: the threads that took the branch stand past the block; none can join it)
  _run_block(eng, tier, then, sub, on, rest)
  if then.tail is None:
    return to, to
  # every thread of sel is at the barrier: the ones that took the branch run it too, in the same warp-instruction as
  # the others of their warp (or one of its own: warps that ran no part of the block); as _tail moves a block's
  # threads into its closing barrier, every one of sel arriving
  if sub is not ix:
    tier.native.counted(np.flatnonzero(~rows) if isinstance(ix, slice) else ix[~rows])
  eng.lane_count += int(np.count_nonzero(sel)) - int(np.count_nonzero(on))
  return _tail(eng, then, ix, sel, bits, bits)


def _inside(eng: Engine, ready, ix, sel, pc: int, blk):
  """Ready threads of warps `ix` outside `sel` inside the block [pc, pc + span)? The interpreter would run the threads
  at pc until they reach them and go on together (one warp-instruction each from there). None: there are none. The
  mask of them (rows of ix) when they all stand at the block's last instruction, a plain barrier or an unguarded exit
  with nothing for a checker to see (binding.plain_barrier; no ir3 sync flags): the block runs for `sel` and they
  arrive at the barrier, or exit, with it (_tail). True: the native tier leaves those steps to the interpreter rather
  than run the block alone."""
  other = ready[ix] & ~sel if not isinstance(ix, slice) else ready & ~sel
  if not other.any():
    return None
  at = eng.lpc[ix] if not isinstance(ix, slice) else eng.lpc
  inside = other & (at > pc) & (at < pc + blk.span)
  if not inside.any():
    return None
  last = blk.ops[-1]
  if (blk.tail == "barrier" and plain_barrier(last) or blk.tail == "end" and last.info.get("guard") is None) and \
     (eng.checks is None or "ss" not in last.info) and not (inside & (at != last.pc)).any():
    return inside
  return True


def _place(eng: Engine, pc: int, ix, sel) -> None:
  """Threads `sel` of warps `ix` stand at `pc`: say so in eng.lpc."""
  move(eng, ix, (pc, sel))


def move(eng: Engine, ix, *moves) -> None:
  """For each (pc, mask) of `moves` in order (a later one wins where both say), the threads in mask (rows of warps ix)
  stand at pc: written in place (np.where with a scalar operand would build whole (waves, lanes) arrays)."""
  sub = eng.lpc[ix]  # (a view for a slice of warps, else a copy written back)
  for pc, m in moves:
    np.copyto(sub, pc, where=m)
  if not isinstance(ix, slice):
    eng.lpc[ix] = sub


def _set_bits(x: int, n: int) -> list[int]:
  """The positions of the bits set in `x` (0 <= x < 2**n), in increasing order."""
  b = np.frombuffer(x.to_bytes(-(-n // 8), "little"), np.uint8)
  return np.flatnonzero(np.unpackbits(b, bitorder="little")).tolist()


def _per_warp(m: np.ndarray) -> np.ndarray:
  """(waves, lanes) bool -> (waves,): any lane set, by OR-ing each row's 64-bit words (numpy's any(axis=1) over
  rows of 32 is ~50x slower)."""
  if m.dtype != bool or not m.flags.c_contiguous or m.shape[1] % 8:
    return m.any(axis=1)
  words = m.view(U64)
  out = words[:, 0].copy()
  for k in range(1, words.shape[1]):
    out |= words[:, k]
  return out != 0


def _count_per_warp(m: np.ndarray) -> np.ndarray:
  """(waves, lanes) bool -> (waves,) int64: lanes set, summing the 0/1 bytes of each 64-bit word with one multiply
  (numpy's sum(axis=1) over rows of 32 is ~10x slower)."""
  if m.dtype != bool or not m.flags.c_contiguous or m.shape[1] % 8:
    return m.sum(axis=1, dtype=np.int64)
  words = m.view(U64)
  out = np.zeros(len(m), U64)
  for k in range(words.shape[1]):
    out += (words[:, k] * U64(0x0101010101010101)) >> U64(56)  # (each byte 0 or 1: the top byte is their sum)
  return out.astype(np.int64)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
  """Two (waves, lanes) bool masks are equal (compared as 64-bit words where the rows allow)."""
  if a.dtype == b.dtype == bool and a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous and \
     a.shape[-1] % 8 == 0:
    return bool((a.view(U64) == b.view(U64)).all())
  return bool((a == b).all())


def _tail(eng: Engine, blk, ix, sel, taken: np.ndarray, bits: np.ndarray, join=None):
  """After a native block whose last instruction branches, exits or arrives at a barrier (native.plan.tail) and took
  lanes `taken` (bits per warp, as _bits' words; `bits`: those of sel): move the threads of `sel` (all standing at the
  block's first PC) as step_simt does for it (the ones it took to its target, out, or into the barrier; the rest on),
  with the back-edge count of fair scheduling; `join`: threads of these warps standing at its barrier or exit arrive
  or exit with them (the same warp-instruction: only their lanes are counted). Returns (the PC every thread of `sel`
  goes on at together, or None; the PC they all stand at now, left for the caller to write into eng.lpc, or None when
  written here)."""
  last, n, pc = blk.ops[-1], blk.span, blk.pc
  every = bool((taken == bits).all())  # (taken lanes are threads of sel)
  m = sel if every else _lanes(taken, eng.L)
  if join is not None:  # (at a closing barrier or exit: _inside)
    m = m | join
    eng.lane_count += np.count_nonzero(join)
  if blk.tail == "barrier":  # they arrive (and wait), or it completes at once (step_simt); they move past it
    done = _at_once(eng, last, ix, m)
    if not done:
      _arrive(eng, last, ix, m)
    return (pc + n if done else None), pc + n
  if blk.tail == "end":
    if isinstance(ix, slice):
      np.greater(eng.lalive, m, out=eng.lalive)  # (alive and not exiting)
    else:
      eng.lalive[ix] = eng.lalive[ix] > m
    release_barriers(eng)
    if every:  # (an exited thread's PC stays at its exit)
      return None, pc + n - last.size
    move(eng, ix, (pc + n, sel), (pc + n - last.size, m))
    return None, None
  to = int(last.ins["TARGET"].value)
  if not every:
    move(eng, ix, (pc + n, sel), (to, m))
  if to <= last.pc:  # a back-edge: the warps that took it count towards yielding (step_simt)
    be = eng.backedges[ix] + _per_warp(taken.view(bool))
    tired = be > YIELD_AFTER
    eng.backedges[ix] = np.where(tired, 0, be)
    if tired.any() and eng.its:
      eng.lyield[ix] = eng.lyield[ix] | (m & tired[:, None])
      return None, (to if every else None)
  return (to, to) if every else (None, None)


def _waiting(mask):
  w = int(np.argmax(_per_warp(mask)))
  return w, [int(x) for x in np.nonzero(mask[w])[0]]


def _bits(m: np.ndarray) -> np.ndarray:
  """(waves, lanes) bool -> (waves, words) uint64 lane bits: lanes 64k..64k+63 in word k (one word up to wave64)."""
  L = m.shape[1]
  if LITTLE and m.dtype == bool and L % 32 == 0:  # the bytes of packbits are the words'
    b = np.packbits(m, axis=1, bitorder="little")
    return b.view(U64) if L % 64 == 0 else b.view(U32).astype(U64)
  lanes = np.arange(64, dtype=U64)
  return np.stack([(m[:, k:k + 64].astype(U64) << lanes[:min(64, L - k)]).sum(axis=1, dtype=U64)
                   for k in range(0, L, 64)], axis=1)


def _lanes(bits: np.ndarray, lanes: int) -> np.ndarray:
  """_bits' words -> (waves, lanes) bool."""
  return np.unpackbits(np.ascontiguousarray(bits, U64).view(np.uint8), axis=1, bitorder="little")[:, :lanes].view(bool)


def _dwords(bits: np.ndarray, lanes: int) -> np.ndarray:
  """_bits' words -> (waves, lanes // 32) uint32: the dwords of an EXEC register of `lanes` bits."""
  if LITTLE and bits.flags.c_contiguous:
    return bits.view(U32)[:, :lanes // 32]
  lo = (bits & U64(M32)).astype(U32)
  return np.stack([lo, (bits >> U64(32)).astype(U32)], axis=2).reshape(len(bits), -1)[:, :lanes // 32]


def step_simt(eng: Engine, op: Op, ix, sel) -> bool:
  """Execute `op` for the threads `sel` (of waves `ix`) standing at op.pc, under its guard, and move their PCs.
  Returns whether every thread of `sel` simply moved on to pc + size (nothing else about the threads changed)."""
  k, n = op.kind, eng.nwaves(ix)
  straight = k in ("alu", "mem", "pack", "tensor", "warpsync", "nop")
  eng._moved_to = None
  g = op.info.get("guard")
  m = sel if g is None else sel & ((eng.V[ix, g[0]] != 0) != g[1])
  eng.lwait[ix] = False  # the warp moves: lanes waiting for a collective's members look again
  if eng.checks is not None:
    eng.checks.simt(eng, op, ix, sel, m)
  if op.info.get("members") is not None and m.any():
    got = _rendezvous(eng, op, ix, sel, m)
    if got is None:
      return False
    if got[1] is not sel:
      straight = False
    ix, sel, m = got
    n = eng.nwaves(ix)
  eng._cur, eng._last_ix = m, ix
  adv, to = sel, None  # to: the one PC every thread of sel branched to, when known
  if k in ("alu", "mem"):
    if m.any():  # (else nothing runs: the threads move on, branch or not)
      eng._pc_to = None
      eng.execute(op, ix)
      if sets_pc(op):
        adv = sel & ~m
        straight = False
        if eng._pc_to is not None and not adv.any():
          to = eng._pc_to
  elif k == "end":
    eng.lalive[ix] = eng.lalive[ix] & ~m
    adv = sel & ~m
    release_barriers(eng)
  elif k == "barrier":
    if _at_once(eng, op, ix, m):  # every live thread of every CTA arrived together: it completes now
      straight = True
    else:
      _arrive(eng, op, ix, m)
  elif k == "sleep":
    eng.lyield[ix] = eng.lyield[ix] | m
  elif k in ("warpsync", "nop"):
    pass
  elif k == "trap":
    if m.any():
      raise Stop("trap", f"{op.text} executed", _first(eng, ix), op)
  elif k in ("unsupported", "bad"):
    raise Stop("unsupported", f"{op.text}: {op.info.get('why', 'no executable semantics')} on {eng.prog.arch}",
               _first(eng, ix), op)
  else:  # frontend events (PTX: call, ret, vector moves)
    adv = eng.fe.event(eng, op, ix, sel, m)
    straight = straight and adv is sel
    if eng.checks is not None and m.any():
      eng.checks.wrote(eng, ix, op.outs.values())
  if straight:
    if isinstance(ix, slice):
      np.add(eng.lpc, op.size, out=eng.lpc, where=sel)
    else:
      eng.lpc[ix] += sel * op.size
    back = None
  else:
    old = eng.lpc[ix]
    new = old + np.where(adv, op.size, 0)
    eng.lpc[ix] = new
    back = sel & ~adv & (new <= op.pc)  # lanes that branched backwards (or called)
    if k in ("end", "ret"):  # (threads that exited did not)
      back &= eng.lalive[ix]
  if back is not None and back.any():
    rows = _per_warp(back)
    be = eng.backedges[ix] + rows
    tired = be > YIELD_AFTER
    eng.backedges[ix] = np.where(tired, 0, be)
    if tired.any() and eng.its:
      eng.lyield[ix] = eng.lyield[ix] | (back & tired[:, None])
      to = None
  eng._moved_to = op.pc + op.size if straight else to
  eng.clock[ix] += 1
  if not (k in ("alu", "mem") and m.any()):  # (Engine.execute counted the ones it ran)
    eng.count += n
    eng.lane_count += np.count_nonzero(m)
  for h in eng.hooks:
    h(eng, op, ix)
  return straight


def _rendezvous(eng: Engine, op: Op, ix, sel, m):
  """A `.sync` collective runs for a thread once every live thread its member mask names stands at it too (PTX ISA
  9.0 9.7.9.6: "executes ... after all threads in membermask have executed [it]"); the others wait (Engine.lwait)."""
  mm = np.asarray(eng.fetch(op.info["members"], ix)).astype(U64)
  mm = np.broadcast_to(mm if mm.ndim == 2 else mm.reshape(-1, 1) if mm.ndim else mm, m.shape)
  here, alive = _bits(sel), _bits(eng.lalive[ix])
  ok = (mm & ~here & alive) == 0
  wait = m & ~ok
  if not wait.any():
    return ix, sel, m
  eng.lwait[ix] = eng.lwait[ix] | wait
  sel, m = sel & ~wait, m & ~wait
  rows = _per_warp(sel)
  if not rows.any():
    return None
  if not rows.all():
    keep = np.nonzero(rows)[0]
    ix = (np.arange(eng.W)[ix])[keep]
    sel, m = sel[keep], m[keep]
  return ix, sel, m


def _at_once(eng: Engine, op: Op, ix, m) -> bool:
  """Does barrier `op` complete as soon as threads `m` arrive, with nothing else to do: every live thread of the
  batch arrives (a waiting thread would not stand here), none counted at any barrier before, and it is a plain one
  (binding.plain_barrier). Then _arrive + release_barriers would count them, release them all and reset the counts:
  the threads just move on, and the checkers see each CTA with live threads pass a barrier (all of a warp's threads
  at one instruction: nothing for the divergence checker)."""
  if not (isinstance(ix, slice) and plain_barrier(op) and not _counting(eng) and _same(m, eng.lalive)):
    return False
  if eng.checks is not None:
    ctas = np.zeros(len(eng.checks.epoch), bool)
    ctas[eng.wg[_per_warp(eng.lalive)]] = True
    eng.checks.barrier(eng, ctas)
  return True


def _counting(eng: Engine) -> bool:
  """Some thread arrived at a barrier that has not completed."""
  return hasattr(eng, "barcount") and bool(eng.barcount.any())


def _arrive(eng: Engine, op: Op, ix, m) -> None:
  """Threads `m` arrive at barrier S0 (of 16 per CTA), expecting S1 threads (or every live thread of the CTA); they
  wait there unless the instruction only arrives (`info["arrive"]`). Counted per thread; exit releases too."""
  n = eng.nwaves(ix)
  one = lambda s: np.broadcast_to(np.asarray(eng.fetch(s, ix)).reshape(n, -1)[:, 0] if np.ndim(eng.fetch(s, ix))
                                  else eng.fetch(s, ix), (n,)).astype(np.int64)
  ids, count, pred = op.info["bar"]
  bid = one(ids) & 15
  waves = np.arange(eng.W)[ix]
  if not hasattr(eng, "barcount"):
    ng = int(eng.wg.max()) + 1
    eng.barcount, eng.barexp = np.zeros((ng, 16), np.int64), np.zeros((ng, 16), np.int64)
    eng.barred = np.zeros((3, ng, 16), np.int64)  # bar.red: threads with the predicate, threads without, arrivals
  c = eng.wg[waves]
  np.add.at(eng.barcount, (c, bid), _count_per_warp(m))
  if count is not None:
    eng.barexp[c, bid] = one(count)
  if pred is not None:  # bar.red: the predicate of every arriving thread (PTX ISA 9.0 9.7.13.4)
    p = np.broadcast_to(np.asarray(eng.fetch(pred, ix)) != 0, m.shape)
    np.add.at(eng.barred[0], (c, bid), _count_per_warp(m & p))
    np.add.at(eng.barred[1], (c, bid), _count_per_warp(m & ~p))
    np.add.at(eng.barred[2], (c, bid), _count_per_warp(m))  # (so a bar.red whose threads all lack the predicate counts)
  if not op.info.get("arrive"):
    if isinstance(ix, slice):
      np.copyto(eng.lbar, (bid + 1)[:, None], where=m)
      np.copyto(eng.lbarpc, op.pc, where=m)
    else:
      eng.lbar[ix] = np.where(m, (bid + 1)[:, None], eng.lbar[ix])
      eng.lbarpc[ix] = np.where(m, op.pc, eng.lbarpc[ix])
  release_barriers(eng)


def release_barriers(eng: Engine) -> None:
  """Complete every barrier whose expected threads arrived (expected: its thread count, else the CTA's live
  threads)."""
  if not hasattr(eng, "barcount") or not eng.barcount.any():
    return
  live = np.bincount(eng.wg, weights=_count_per_warp(eng.lalive), minlength=len(eng.barcount)).astype(np.int64)
  need = np.where(eng.barexp > 0, eng.barexp, live[:, None])
  done = (eng.barcount > 0) & (eng.barcount >= need)
  if not done.any():
    return
  go = np.zeros(eng.lbar.shape, bool)
  for b in np.nonzero(done.any(axis=0))[0]:  # (per barrier id completing somewhere: one test per warp, not thread)
    go |= (eng.lbar == b + 1) & done[eng.wg, b][:, None]
  if eng.checks is not None:
    eng.checks.released(eng, np.arange(eng.W), go)
  for pc in np.unique(eng.lbarpc[go]) if eng.barred.any() else ():  # bar.red: each released thread gets its CTA's
    # reduction (threads with the predicate counted, and without: nothing to hand out when no bar.red arrived)
    op = eng.prog.op(int(pc))
    if op.info.get("red") and "D0" in op.outs:
      at = go & (eng.lbarpc == pc)
      w, l = np.nonzero(at)
      c, b = eng.wg[w], eng.lbar[w, l].astype(np.int64) - 1
      yes, no = eng.barred[0][c, b], eng.barred[1][c, b]
      v = {"popc": yes, "and": no == 0, "or": yes > 0}[op.info["red"]].astype(U32)
      eng.V[w, op.outs["D0"].index, l] = v
      eng.mark("v", op.outs["D0"].index)
      if eng.checks is not None:
        eng.checks.wrote(eng, np.unique(w), [op.outs["D0"]])
  if hasattr(eng, "barred"):
    eng.barred[:, done] = 0
  eng.lbar[go] = 0
  eng.barcount[done] = 0
  eng.barexp[done] = 0
  if eng.checks is not None:
    eng.checks.barrier(eng, np.nonzero(done.any(axis=1))[0])
