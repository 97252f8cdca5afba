"""Checkers for hand-written assembly, run alongside execution (on by default; `checks=False` or a set of names).

  waitcnt  a register written by an outstanding load is read before the matching wait counter retires it
           (s_waitcnt vmcnt/lgkmcnt, s_waitcnt_vscnt on gfx10+; gfx12 s_wait_loadcnt/storecnt/dscnt/kmcnt), or
           LDS bytes a load into LDS (CDNA) still writes are accessed before its vmcnt retires
  uninit   an operand none of whose registers was ever written (by the ABI's initial state or an instruction);
           a partially written multi-dword operand is allowed (clang reads v[0:1] for a 32-bit addend)
  lds_race two waves of one workgroup touch the same LDS dword, at least one writing, with no s_barrier between
           (atomics excluded; PTX: warps of a CTA in shared memory, volatile/relaxed/acquire/release excluded)
  divergence  per-thread PCs (PTX): threads of one warp released from different aligned barriers, or a `.uni`
           branch whose guard differs between the threads running it
  members  per-thread PCs (PTX): a `.sync` collective's thread outside its own member mask, or a mask naming
           threads that exited
  async    PTX: a shared-memory read of bytes a cp.async is still writing (its group not yet waited for)
  scope    PTX: atomics of two CTAs on one global address where either is `.cta`-scoped (atomic only within its CTA)
  sync     ir3: a register written by an instruction the hardware completes asynchronously is read before the sync
           flag that waits for it: SFU (cat4) and shared-memory loads are waited for by (ss), memory loads, atomics,
           resinfo and cat5 by (sy) (op.info["sync"], set by the binding; Mesa's legalize pass places the flags)
  sparse   SMFMAC/SWMMAC: a pair of 2-bit sparse indices (the two stored values of a group of four k) whose first
           is not below its second: the CDNA3/CDNA4 ISA guides require index 0 < index 1, so the product of such a
           pair is undefined (the emulator's multiplexer model would add both); checked interpreted
  hazard   CDNA3/CDNA4: a VALU/VMEM/LDS instruction reads or overwrites an MFMA's destination before the MFMA's
           passes plus 2 wait states have elapsed (independent instructions or s_nop). Source: the AMD Instinct
           MI300 ISA reference, "Dependency Resolution: Required Independent Instructions" (MFMA -> VALU/VMEM rows).
           That table distinguishes consumers (SrcC overlap, VALU, VMEM, LDS); we apply one bound, passes + 2, with
           each opcode's passes from isa/data/matrix.json (LLVM's scheduling model), which clang-22's code for
           gfx942/gfx950 meets (no false reports on the suite) but is not the table cell by cell
Which counters an instruction increments or waits on, the SIMM16 layouts, S_NOP's wait states and the MFMA passes are
rows of isa/data (read through isa/hwdata.py), not opcode names here.
Out-of-bounds accesses are always GPU page faults (memory.py). Each failure raises EmuCheckError with PC and register.
"""
from __future__ import annotations

import functools

import numpy as np

from gputwin.emu.program import Op, Src
from gputwin.isa import hwdata

TRACKED_SGPRS = 106  # SGPRs from here up are specials (VCC, M0, EXEC, constants; ir3's const file): never tracked
EPOCHS = 1 << 30  # a reused race table starts its epochs below this (int32 entries: 2**31 would wrap)
ALL = frozenset({"waitcnt", "uninit", "lds_race", "hazard", "divergence", "members", "async", "scope", "sync",
                 "sparse"})


class Checks:
  def __init__(self, which=ALL):
    self.on = frozenset(which)

  @staticmethod
  def make(spec) -> "Checks | None":
    if spec is True or spec is None:
      return Checks()
    if not spec:
      return None
    bad = set(spec) - ALL
    if bad:
      from gputwin.errors import LaunchError
      raise LaunchError(f"unknown checkers {sorted(bad)}; known: {sorted(ALL)}")
    return Checks(spec)

  def attach(self, eng) -> None:
    W, nv = eng.W, eng.V.shape[1]
    self.fam, self.arch = eng.fam, eng.prog.arch
    self.cnames = () if eng.simt else hwdata.counters(self.fam)  # wait counters (none in PTX: loads block)
    self.per_thread = eng.simt  # per-thread PCs (PTX, ir3)
    # per wave and register, indexed [wave, reg], stored register-major: an instruction touches a few registers of
    # many waves, which then lie in a few pages (wave-major, each wave's row was a page of its own to fault in)
    per_reg = lambda n, *tail, dt=bool: np.zeros((n, W) + tail, dt).swapaxes(0, 1)
    # written-flags: the engine's previous batch's, cleared, when it had this shape (a fresh SGPR table is mostly
    # untracked rows to fill, whose pages cost more to fault in than a native batch runs: ir3's const file)
    key, got = (W, nv, eng.A.shape[1], eng.S.shape[1]), getattr(eng, "written_flags", None)
    if got is not None and got[0] == key:
      self.vw, self.aw, self.sw = got[1]
      self.vw[:], self.aw[:], self.sw.T[:TRACKED_SGPRS] = False, False, False
    else:
      self.vw, self.aw, self.sw = per_reg(nv), per_reg(eng.A.shape[1]), per_reg(eng.S.shape[1])
      self.sw.T[TRACKED_SGPRS:] = True  # specials: always written (written register-major)
      eng.written_flags = (key, (self.vw, self.aw, self.sw))
    # (counter + 1, sequence number) of the outstanding load, int32 (a wave issues far fewer than 2**31 loads);
    # SGPRs from TRACKED_SGPRS up: no pending entries for them (slices past the end are empty).
    # (file, register) keys -> the wait counters (bit mask) of loads into it that may be outstanding (absent: its
    # entries are all zero). The engine's previous batch's tables, when they had this shape, with the rows its
    # `pend` still listed cleared (new ones were megabytes to clear: ~0.5 ms a batch for the SGPRs' alone)
    self.pend, got = {}, getattr(eng, "pending_tables", None)
    if got is not None and got[0] == key:
      self.vp, self.ap, self.sp = got[1]
      for f, r in got[2]:
        {"v": self.vp, "a": self.ap, "s": self.sp}[f][:, r:r + 1] = 0  # (a special's row: past the end, empty)
    else:
      self.vp, self.ap, self.sp = per_reg(nv, 2, dt=np.int32), per_reg(eng.A.shape[1], 2, dt=np.int32), \
          per_reg(TRACKED_SGPRS, 2, dt=np.int32)
    eng.pending_tables = (key, (self.vp, self.ap, self.sp), self.pend)
    # per wave and wait counter, [wave, counter], stored counter-major (Checks.ran updates a counter's row at once)
    self.issued = np.zeros((len(self.cnames), W), np.int64).T
    self.retired = np.zeros((len(self.cnames), W), np.int64).T
    self.mfma = np.full((W,), -1, np.int64)  # index of the last MFMA per wave, its regs and ready time
    self.mfma_regs: dict[int, tuple] = {}
    self.clock = np.zeros(W, np.int64)
    self.nd = nd = max(eng.lds.size // 4 + 1, 1)  # per workgroup and LDS dword, flat (workgroup * nd + dword):
    # per dword f: the last writer (wave, epoch) and the last reader (wave or -2 for many, epoch), one row of four
    # int32 (a check reads all four: one cache line; int64 rows missed cache twice as often); lw and lr are views of
    # its columns. An entry counts only in its epoch, so zeros (epoch 0, before any) mean none: the pages stay
    # untouched until used. The engine's previous batch's table, when it had this shape, is taken as it is, the
    # epochs going on past every one it reached, so none of its entries counts (clearing megabytes a batch cost more
    # than the checks on a short one)
    nwg = int(eng.wg.max()) + 1 if W else 1
    got = getattr(eng, "race_table", None)
    base = int(got[2].max()) + 1 if got is not None and got[0] == (nwg, nd) else 0
    if 0 < base < EPOCHS:
      self.tab, self.epoch = got[1], np.full(nwg, base, np.int64)
    else:  # (int32 entries: a table whose epochs near 2**31 starts over, zeroed)
      self.tab, self.epoch = np.zeros((nwg * nd, 4), np.int32), np.ones(nwg, np.int64)
    eng.race_table = ((nwg, nd), self.tab, self.epoch)
    self.lw, self.lr = (self.tab[:, 0], self.tab[:, 1]), (self.tab[:, 2], self.tab[:, 3])
    self.wep, self.rep = np.full(len(self.epoch), -1, np.int64), np.full(len(self.epoch), -1, np.int64)
    self.reads = []  # LDS reads not yet entered in lr: (workgroup, offset, wave, bytes, epochs at the read)
    self.first = None  # scratch table for the same-access tests (two waves writing, or reading, one dword)
    self.cur = None
    self.sync_pc = None  # ir3 (ss)/(sy) pending registers: made on first use (_sync)
    self.ws, self.ps = {"v": self.vw, "a": self.aw, "s": self.sw}, {"v": self.vp, "a": self.ap, "s": self.sp}
    # the tables' addresses for the host code (checks.ll): each a (register or counter, wave) array from its start
    self.all = np.arange(W, dtype=np.int64)
    self.state = np.array([W] + [t.ctypes.data for t in (self.vw, self.aw, self.sw, self.vp, self.ap, self.sp,
                                                         self.issued, self.retired)], np.int64)
    self.at = (self.state.ctypes.data, self.all.ctypes.data)
    self.uninit, self.waitcnt = "uninit" in self.on, "waitcnt" in self.on and bool(self.cnames)
    self.full = set()  # (file, register) keys every wave of the batch wrote (uninit skips them; none ever leaves)
    self.narrow: dict[int, tuple[int, bool]] = {}  # global address -> (CTA, .cta-scoped) of atomics (scope checker)
    # loads into LDS (AMD's deliver) still outstanding per wave: (counter + 1, sequence number, first and last byte + 1
    # of the LDS they write, in the wave's workgroup); made at the first one
    self.dma = None
    if self.on & {"lds_race", "async"} or self.waitcnt:
      eng.lds.watch = lambda acc, wg, off, n: self._lds(eng, acc, wg, off, n)

  def initial(self, eng, nsgpr: int, vrows=(0,), srows=()) -> None:
    """The ABI initialised SGPRs below `nsgpr`, the scalar rows `srows` and the vector rows `vrows` (AMD: v0, the
    work-item ids; ir3: the inputs, the const file)."""
    self.sw[:, :nsgpr] = True
    self.sw.T[[r for r in srows if r < TRACKED_SGPRS]] = True  # (whole rows of the register-major tables)
    self.vw.T[list(vrows)] = True

  def poked(self, eng, w, f, i) -> None:
    {"v": self.vw, "a": self.aw, "s": self.sw}.get(f, np.zeros((eng.W, eng.S.shape[1]), bool))[w, i] = True

  def _fail(self, eng, op, ix, msg):
    from gputwin.emu.core import Stop
    raise Stop("check", msg, int(np.arange(eng.W)[ix][0]), op)

  @staticmethod
  def _regs(op: Op, names):
    for n in names:
      s = op.ins.get(n)
      if isinstance(s, Src) and s.file in "vas":
        yield n, s
    a = op.info.get("address")
    if a is not None and op.mem:  # the address plan's registers (binding.Address)
      for t in a.terms:
        yield "address", t
    elif op.mem:  # addresses a frontend forms itself (AMD buffer: vaddr and the V#)
      for key in ("vaddr", "srsrc"):
        i = op.info.get(key)
        if i is not None:
          yield key, Src("v" if key == "vaddr" else "s", i, op.info.get("vdwords", 1) if key == "vaddr" else 4)

  def _plan(self, op: Op):
    """What before/after look at for `op`, worked out once per instruction: the registers it reads (name, operand,
    file, slice, (file, register) keys), its wait counters, whether it is a load, the registers it writes, the
    VGPR its body writes by number, and its MFMA passes on this target (None: no MFMA)."""
    width = (self.vw.shape[1], self.aw.shape[1])
    plan = op.info.get("_checks")
    if plan is None or plan[0] != width:
      width = {"v": self.vw.shape[1], "a": self.aw.shape[1], "s": self.sw.shape[1]}
      keys = lambda f, a, b: tuple((f, r) for r in range(a, min(b, width[f])))
      reads = [(n, s, s.file, slice(s.index, s.index + s.dwords), keys(s.file, s.index, s.index + s.dwords))
               for n, s in self._regs(op, list(op.sem.inputs) if op.sem is not None else ["S0"])
               if not (s.file == "s" and s.index >= TRACKED_SGPRS)]
      outs = set(op.sem.outputs) if op.sem is not None else {"D0"}
      dsts = {id(d): d for n, d in op.outs.items() if n in outs and isinstance(d, Src) and d.file in "vas"}.values()
      # its result waits on cnts[0]: loads, atomics with return, and a time source read through a memory path (AMD
      # S_MEMTIME: op.info["counter"]); without wait counters (PTX) a load's result is there when the next instruction
      # reads it
      path = op.mem or op.info.get("counter", "")
      reads_mem = bool(path) and ("r" in op.sem.mem or not op.mem) and bool(self.cnames)
      cnts = hwdata.increments(self.fam, path, not (reads_mem and op.sem.outputs)) if path and self.cnames else ()
      writes = [(d.file, slice(d.index, min(d.index + d.dwords, width[d.file])), keys(d.file, d.index, d.index + d.dwords))
                for d in dsts]
      vd = op.ins.get("VDST")
      vd = vd.value if vd is not None and op.sem is not None and "VGPR" in op.sem.regfiles else None
      mat = hwdata.matrix(self.fam, op.inst.op) if op.kind == "matrix" else None
      plan = op.info["_checks"] = ((width["v"], width["a"]), reads, cnts, reads_mem, writes, vd,
                                   mat and mat.passes_on(self.arch))
    return plan

  def before(self, eng, op: Op, ix, m) -> None:
    self.cur = op
    if op.kind == "vopd":
      for o in op.info["pair"]:
        self.before(eng, o, ix, m)
      return
    whole = isinstance(ix, slice)
    full, pend = self.full, self.pend
    for n, s, f, sl, keys in self._plan(op)[1]:
      if self.uninit and not any(k in full for k in keys):
        w = self.ws[f][ix, sl]
        if not w.any(axis=1).all():
          self._fail(eng, op, ix, f"reads {_name(s)} ({n}), which was never written")
        if whole:
          full.update(k for k, a in zip(keys, w.all(axis=0)) if a)
      if self.waitcnt and any(k in pend for k in keys):
        cs = 0
        for k in keys:
          cs |= pend.get(k, 0)
        # every load the batch issued on these registers' counters has retired (a load's sequence number is at most
        # the counter's issued count): nothing can be outstanding, skip the per-entry test
        done = all((self.retired[ix, c] >= self.issued[ix, c]).all() for c in range(len(self.cnames)) if cs >> c & 1)
        if done:
          if whole:
            self.ps[f][:, sl] = 0
            for k in keys:
              pend.pop(k, None)
          continue
        p = self.ps[f][ix, sl]
        c = np.maximum(p[..., 0] - 1, 0)
        r = self.retired[ix]  # each wave's retired count of each entry's counter, as one flat gather
        ret = np.take(r.reshape(-1), c + np.arange(0, r.size, r.shape[1])[:, None])
        bad = (p[..., 0] > 0) & (p[..., 1] > ret)
        if bad.any():
          k = int(np.argmax(bad.any(axis=0)))
          cnt = self.cnames[int(c.reshape(-1)[np.argmax(bad.reshape(-1))])]
          self._fail(eng, op, ix, f"reads {s.file}{s.index + k} ({n}) while the load writing it is outstanding: "
                                  f"missing s_waitcnt {cnt}")
        if whole:  # no wave's load into these registers is outstanding, and retired counters only grow: forget them
          self.ps[f][:, sl] = 0
          for k in keys:
            pend.pop(k, None)
    if "hazard" in self.on and self.fam == "cdna" and self.mfma_regs and op.vector:
      self._hazard(eng, op, ix)
    if "scope" in self.on and op.atomic and (op.info.get("scope") == "cta" or self.narrow):
      self._scope(eng, op, ix, m)
    if "sparse" in self.on and op.kind == "matrix":
      bad = eng.fe.matrix_check(eng, op, ix)
      if bad is not None:
        from gputwin.emu.core import Stop
        raise Stop("check", bad[1], bad[0], op)

  def _scope(self, eng, op: Op, ix, m) -> None:
    """Atomics on one global address from two CTAs, one of them `.cta`-scoped: that one is atomic only against its
    own CTA's threads (PTX ISA 9.0 8.5 "Scope"), so the two may race. Tracked per address once a `.cta` atomic ran."""
    a = op.info.get("address")
    if a is None or a.space != "mem" or m is None or not m.any():
      return
    addr = np.broadcast_to(eng.address(a, ix), m.shape)[m]
    cta = np.broadcast_to(eng.wg[np.arange(eng.W)[ix]][:, None], m.shape)[m]
    narrow = op.info.get("scope") == "cta"
    for va, c in zip(*np.unique(np.stack([addr, cta.astype(np.uint64)]), axis=1)):
      prev = self.narrow.get(int(va))
      if prev is not None and prev[0] != c and (narrow or prev[1]):
        self._fail(eng, op, ix, f"atomic on global address {int(va):#x} by CTAs {prev[0]} and {int(c)}, with a .cta "
                                "scope: it is atomic only within one CTA (use .gpu, the default)")
      if narrow or prev is not None:
        self.narrow[int(va)] = (int(c), narrow or (prev is not None and prev[1]))

  def after(self, eng, op: Op, ix, m) -> None:
    if op.kind == "vopd":
      return
    _, _, cnts, load, writes, vd, passes = self._plan(op)
    for c in cnts:
      self.issued[ix, c] += 1
    full, pend = self.full, self.pend
    for f, sl, keys in writes:
      if not all(k in full for k in keys):
        self.ws[f][ix, sl] = True
      if load:
        c = cnts[0]
        p = self.ps[f][ix, sl]
        p[..., 0] = c + 1
        p[..., 1] = self.issued[ix, c][:, None]
        self.ps[f][ix, sl] = p
        for k in keys:
          pend[k] = pend.get(k, 0) | 1 << c
      elif any(k in pend for k in keys):
        self.ps[f][ix, sl] = 0
        if isinstance(ix, slice):
          for k in keys:
            pend.pop(k, None)
    if vd is not None:  # writes through the VGPR file
      self.vw[ix, vd] = True
      self.vp[ix, vd] = 0
    self.clock[ix] += 1
    if passes:
      d = op.outs["D0"]
      self.mfma_regs[op.pc] = (d.file, d.index, d.dwords, passes)
      self.mfma[ix] = op.pc
      self.clock[ix] = 0

  # ---- native blocks (emu/native): each checker's effect over a whole straight-line block, decided before it runs
  def native(self, eng, blk, ix, every: bool | None = None, alone: bool = True) -> bool:
    """May the compiled block `blk` run for waves `ix`? Yes when no checker can fail inside it: its register reads
    (uninit), loads' results (waitcnt) and MFMA distances (hazard) are decided from the block's summary (`_Summary`,
    worked out once per block) and the waves' state at its entry; LDS races are checked after it ran, from the
    addresses it logged (`ran`). No: the caller interprets the block, and the checkers stop at the exact instruction.
    `every`: every live wave (per-thread PCs: thread) of the batch runs it, none waits at a barrier (default: `ix` is
    the whole batch). `alone` (per-thread PCs): no other thread is ready; else eng.lpc says where each stands."""
    s = self._summary(blk)
    if not s.ok:
      return False
    if s.guard_to >= 0 and not alone and (self.uninit or "sync" in self.on):
      # a guarded op runs, for the checkers, for every warp standing at it when its guard holds for any of their
      # threads (core.step_simt): threads that would join the block's up to its last guarded op leave it interpreted
      at = (eng.lpc > blk.pc) & (eng.lpc <= s.guard_to) & eng.lalive & (eng.lbar == 0)
      if at.any():
        return False
    if blk.sites and len(getattr(getattr(eng, "cp_async", None), "rows", ())) and "async" in self.on:
      return False  # (PTX: a cp.async in flight; the shared-memory reads are checked against it interpreted)
    if self.dma is not None and any(o.mem in ("ds", "flat") for o in blk.ops) and len(self._dma_live()):
      return False  # (AMD: a load into LDS is in flight; the block's LDS accesses are checked against it interpreted)
    if s.sync_reads and self.sync_pc:  # ir3: registers read before the block produces them, still pending?
      w = np.arange(eng.W)[ix]
      for h, ss, sy in s.sync_reads:
        got = self.sync_pc.get(h)
        if got is not None:
          kw = got[0][w]
          if ((kw != 0) & ~(ss & ((kw == 1) | (kw == 3)) | sy & ((kw == 2) | (kw == 3)))).any():
            return False
    every = isinstance(ix, slice) if every is None else every
    if s.dead_reads and "lds_race" in self.on and not (every and not (self.wep == self.epoch).any()):
      return False  # (its reads were left out of the log: plan.dead_reads says when they cannot matter)
    # registers read before the block writes them: written (uninit), their loads retired (waitcnt), in every wave
    # (host code over the tables: checks.ll `enter`; entries of registers `pend` does not list are all zero)
    flags = (self.uninit and bool(s.exposed)) | (self.waitcnt and bool(self.pend) and bool(s.loads)) << 1
    if flags and not self._host("enter", s, ix, flags):
      return False
    if s.hazards and "hazard" in self.on and self.fam == "cdna" and self.mfma_regs:
      last, clock = self.mfma[ix], self.clock[ix]
      for pc in set(last.tolist()) - {-1}:
        f, i, dw, passes = self.mfma_regs[pc]
        for regs, at, opc in s.hazards:
          if opc != pc and any(rf == f and i < ri + rd and ri < i + dw for rf, ri, rd in regs) and \
             ((last == pc) & (clock + at < passes + 2)).any():
            return False
    if blk.sites and self.reads:
      self._own_queued()
    return True

  def interpreted(self, op: Op) -> bool:
    """Must `op` run on the interpreter for the checkers (a native block then ends before it: native.Tier.stop)? A
    load into LDS (AMD: `_dma` follows the bytes it writes, for the waitcnt and race checkers) and PTX's cp.async and
    its groups (the copies in flight, eng.cp_async, for the race and async checkers); with per-thread PCs, what the
    per-thread checkers decide (_simt_ok). (AMD's S_MEMTIME, whose time returns as a load's data, is a load to the
    block summary: its registers pending on lgkmcnt.) And a sparse matrix instruction, for `sparse`."""
    return bool(op.info.get("deliver")) or bool(op.info.get("async_copy")) or \
        self.per_thread and not _simt_ok(self, op) or \
        "sparse" in self.on and op.kind == "matrix" and getattr(hwdata.matrix(self.fam, op.inst.op), "sparse", False)

  def ran(self, eng, blk, ix, log, guards: int = 0) -> None:
    """After `blk` ran natively for waves `ix` (`native` said yes): its LDS accesses, from `log` (runtime.Native's
    [wave, site, lane] addresses), go through the race checker in the interpreter's order; then the checkers' state
    moves as the interpreter's `after` and `wait` would have moved it, instruction by instruction. `guards`
    (per-thread PCs, runtime.Native.ran): bit c, the ops of guard class c ran for some thread (codegen.guard_classes);
    the others did not run for the checkers."""
    s = self._summary(blk)
    if blk.sites and self.on & {"lds_race", "async"}:
      self._replay(eng, blk, ix, log)
    # the wait counters, written flags and pending loads per wave (host code: checks.ll `leave`); `pend` lists the
    # registers a load of the block left pending and forgets those a non-load wrote in every wave
    self._host("leave", s, ix, self.waitcnt << 1)
    for c, by in s.wrote.items():  # (per-thread PCs: a guarded op's writes, when its class ran)
      if c is not None and guards >> c & 1:
        mask = np.zeros(eng.W, bool)
        mask[ix] = True
        for f, regs in by.items():
          self.ws[f].T[regs] |= mask  # ((register, wave) rows)
    if self.waitcnt:
      pend = self.pend
      if isinstance(ix, slice):
        for key in s.plain & pend.keys():
          del pend[key]
      for key, bit in s.pending:
        pend[key] = pend.get(key, 0) | bit
    if s.sync_on:  # ir3: the flags cleared what was pending, the producers made theirs pending
      made, clears = s.synced(guards)
      if made or clears:
        self._synced(eng, ix, made, clears)
    if s.mfma is None:
      if self.mfma_regs:  # (wait states since a wave's last MFMA: none ran yet, none to count)
        self.clock[ix] += s.clock
    else:
      pc, d, passes = s.mfma
      self.mfma_regs[pc] = (d.file, d.index, d.dwords, passes)
      self.mfma[ix] = pc
      self.clock[ix] = s.clock

  def _synced(self, eng, ix, made: dict, clears: tuple) -> None:
    """The sync checker's state after a native block, as `_sync` would have left it instruction by instruction
    (_Summary.synced: the halves the block made pending, the classes its flags cleared)."""
    if self.sync_pc is None:
      self.sync_pc = {}
    w, pend = np.arange(eng.W)[ix], self.sync_pc
    for k in clears:
      for kind, _ in pend.values():
        kw = kind[w]
        kind[w] = np.where((kw == k) | (kw == 3), 0, kw)
    for h, (cls, pc) in made.items():
      got = pend.get(h)
      if got is None and cls:
        got = pend[h] = (np.zeros(eng.W, np.int8), np.zeros(eng.W, np.int64))
      if got is not None:
        got[0][w], got[1][w] = cls, pc

  def _replay(self, eng, blk, ix, log) -> None:
    """The race checker on the LDS accesses a block logged, access by access, each for every wave of `ix` at once,
    as the LDS window reports the interpreter's (Window._check: the workgroup slot and offset of each active lane, in
    lane order; lds_address: the wave of each). A read while no workgroup wrote since its barrier is queued
    undecoded (most are dropped at the next barrier); the others go through the tables in host code (race.ll: the
    same checks and updates as `_lds`, reads entered at once rather than at the next write, which `_flush` would
    enter them as)."""
    n, L, lds = len(blk.sites), eng.L, eng.lds
    rows = log[:eng.W * n * L].reshape(eng.W, n, L)
    waves = queued = None  # queued: the run of reads being queued (one entry)
    wrote = (self.wep == self.epoch).any()
    for k, (i, nbytes, write) in enumerate(blk.sites):
      self.cur = op = blk.ops[i]
      if op.atomic or op.info.get("strong") or "lds_race" not in self.on:
        continue
      if not write and not wrote:
        if queued is None:
          queued = _Logged(eng, rows, ix)
          self.reads.append((queued, None, None, 0, self.epoch.copy()))
          if len(self.reads) >= 96:
            self._prune()
        queued.sites.append((k, nbytes))
        continue
      queued = None
      self._flush()
      if waves is None:
        waves = self.all[ix]
      at = self._host_access(eng, rows, k, waves, nbytes, int(write), self.epoch)
      if write:
        self.wep[:] = self.epoch
        wrote = True
      else:
        self.rep[:] = self.epoch
      if at >= 0:
        pos, dk = divmod(at, 64)
        w = waves[pos // L]
        d = (int(rows[w, k, pos % L]) & lds.offset_mask) // 4 + dk
        self._race(np.array([w]), "write" if write else "read", np.array([d]), np.array([True]), op)

  def _host_access(self, eng, rows, k, waves, nbytes: int, mode: int, epoch) -> int:
    """race.ll's lds_access on access k of `rows` (a block's log, [wave, access, lane]) for `waves` in order; mode 1:
    a store, 0: a load, 2: a queued load entered unchecked. -1, or where the first race is (see race.ll)."""
    return _host_fn("lds_access")(rows.ctypes.data, rows.shape[1], k, waves.ctypes.data, len(waves), eng.L,
                                  max(nbytes // 4, 1), mode, self.tab.ctypes.data, epoch.ctypes.data, self.nd,
                                  eng.lds.shift, eng.lds.offset_mask)

  def _own_queued(self) -> None:
    """Before a block overwrites the log: the queued reads still current that point into it keep their own copy."""
    for r in self.reads:
      if isinstance(r[0], _Logged) and (r[4] == self.epoch).any():
        r[0].own()

  def _host(self, symbol: str, s: "_Summary", ix, flags: int):
    """checks.ll's `symbol` on summary `s` for waves `ix` (their numbers as int64)."""
    w = None if isinstance(ix, slice) else np.ascontiguousarray(ix, np.int64)
    return _host_fn(symbol)(s.at, self.at[0], self.at[1] if w is None else w.ctypes.data,
                              self.vw.shape[0] if w is None else len(w), flags)

  def _summary(self, blk) -> "_Summary":
    s = getattr(blk, "checks", None)
    if s is None or s.width != (self.vw.shape[1], self.aw.shape[1], self.fam):
      s = blk.checks = _Summary(self, blk.ops)
    return s

  def wait(self, eng, op: Op, ix) -> None:
    """A wait instruction retires what its counters allow (isa/hwdata waits); S_NOP lets wait states pass."""
    v = op.inst.get("simm16", 0)
    nop = hwdata.wait_states(self.fam, op.inst.op)
    if nop is not None:
      self.clock[ix] += hwdata.bits(v, nop) + 1
      return
    for c, chunks in hwdata.waits(self.fam, op.inst.op):
      self.retired[ix, c] = np.maximum(self.retired[ix, c], self.issued[ix, c] - hwdata.bits(v, chunks))
    self.clock[ix] += 1

  def barrier(self, eng, g) -> None:
    """Workgroups `g` (an index, an array of them or a mask) passed a barrier."""
    self.epoch[g] += 1

  def wrote(self, eng, ix, dsts) -> None:
    """Registers a machine event wrote (PTX: vector moves, tensor fragments): no longer uninitialised."""
    for d in dsts:
      if isinstance(d, Src) and d.file in "vas":
        self.ws[d.file][ix, d.index:d.index + d.dwords] = True

  def _async(self, eng, op, wg, off, n) -> None:
    """A shared-memory read of bytes an asynchronous copy (PTX cp.async) is still writing: the issuing thread has not
    waited for its group (cp.async.wait_group/wait_all), so the data may not be there yet (PTX ISA 9.0 cp.async:
    "the writes ... are not visible until" the wait)."""
    from gputwin.emu.binding import LDS_SHIFT
    r = eng.cp_async.rows
    a = (np.asarray(wg, np.int64) << LDS_SHIFT) | np.asarray(off, np.int64)
    hit = (a[:, None] + n > r[None, :, 3]) & (a[:, None] < r[None, :, 3] + r[None, :, 4])
    if hit.any():
      i, j = (int(x[0]) for x in np.nonzero(hit))
      from gputwin.emu.core import Stop
      raise Stop("check", f"reads shared memory at {int(off[i]):#x} that a cp.async of warp {int(r[j, 0])} thread "
                          f"{int(r[j, 1])} is still writing: missing cp.async.wait_group/wait_all before the read",
                 int(r[j, 0]), op)

  # ---- per-thread PCs (PTX): what only a diverged warp can get wrong
  def released(self, eng, rows: np.ndarray, lanes: np.ndarray) -> None:
    """A barrier completed for `lanes` (bool (len(rows), lanes)) of warps `rows`: the threads of one warp must have
    arrived at one aligned barrier instruction (PTX ISA 9.0 9.7.13.4: `bar.sync`/`barrier.sync.aligned` are executed
    by all threads of the warp together; threads that exited do not take part)."""
    if "divergence" not in self.on:
      return
    pcs = eng.lbarpc[rows]
    lo = np.where(lanes, pcs, np.iinfo(np.int64).max).min(axis=1)
    for j in np.nonzero(lanes.any(axis=1) & (lo != np.where(lanes, pcs, -1).max(axis=1)))[0]:  # (several PCs)
      at = np.unique(pcs[j][lanes[j]])
      if len(at) > 1 and any(eng.prog.op(int(p)).info.get("aligned") for p in at):
        op = eng.prog.op(int(at[0]))
        from gputwin.emu.core import Stop
        groups = {int(p): np.nonzero(lanes[j] & (pcs[j] == p))[0].tolist() for p in at}
        raise Stop("check", f"aligned barrier in divergent code: threads of one warp arrived at different barrier "
                            f"instructions {groups} (all threads of a warp must execute it together)",
                   int(rows[j]), op)

  def simt(self, eng, op: Op, ix, sel, m) -> None:
    """Before `op` runs for threads `sel` (guard true: `m`) of warps `ix`: a `.uni` branch must have one guard value
    among the threads executing it (PTX ISA 9.0 9.7.13.1); a `.sync` collective's thread must be in its own member
    mask, and the mask must not name threads that exited. (Aligned barriers: `released`.)"""
    alive = eng.lalive[ix]
    if "sync" in self.on and "ss" in op.info and m.any():
      self._sync(eng, op, ix)
    if "divergence" in self.on and op.info.get("uniform"):
      split = m.any(axis=1) & (sel & ~m).any(axis=1)
      if split.any():
        j = int(np.argmax(split))
        self._fail(eng, op, ix, f".uni branch with a divergent guard: threads {np.nonzero(m[j])[0].tolist()} take "
                                f"it, {np.nonzero(sel[j] & ~m[j])[0].tolist()} do not")
    mm = op.info.get("members")
    if "members" in self.on and mm is not None and m.any():
      v = np.asarray(eng.fetch(mm, ix)).astype(np.uint64)
      bits = np.broadcast_to(v if v.ndim == 2 else v.reshape(-1, 1) if v.ndim else v, m.shape)
      lane = np.arange(eng.L, dtype=np.uint64)
      own = ((bits >> lane) & np.uint64(1)).astype(bool)
      if (m & ~own).any():
        j, l = (int(x[0]) for x in np.nonzero(m & ~own))
        self._fail(eng, op, ix, f"thread {l} of the warp is not in its own member mask {int(bits[j, l]):#x}")
      gone = eng.launched[ix] & ~alive
      if gone.any():
        gb = (gone.astype(np.uint64) << lane).sum(axis=1, dtype=np.uint64)[:, None]
        bad = m & ((bits & gb) != 0)
        if bad.any():
          j, l = (int(x[0]) for x in np.nonzero(bad))
          self._fail(eng, op, ix, f"member mask {int(bits[j, l]):#x} names threads that exited "
                                  f"{np.nonzero(gone[j])[0].tolist()}")

  def _sync(self, eng, op: Op, ix) -> None:
    """ir3 (ss)/(sy): the flags clear the wave's pending registers of their class, then every register the
    instruction reads must not be pending; an asynchronous producer's destinations become pending. Tracked per wave
    and 16-bit half of each register row (half registers alias full ones), only for rows that were ever pending."""
    if self.sync_pc is None:  # (file, half row) -> (per wave: the flag that waits for it (0: none), the producer's PC)
      self.sync_pc = {}
    w, pend = np.arange(eng.W)[ix], self.sync_pc
    for flag, k in (("ss", 1), ("sy", 2)):
      if op.info.get(flag):
        for kind, _ in pend.values():
          kw = kind[w]
          kind[w] = np.where((kw == k) | (kw == 3), 0, kw)
    for r in _sync_reads(op):
      for h in _halves(r):
        got = pend.get((r.file, h))
        if got is not None and got[0][w].any():
          j = int(np.argmax(got[0][w] != 0))
          flag = {1: "(ss)", 2: "(sy)", 3: "(ss) or (sy)"}[int(got[0][w[j]])]
          self._fail(eng, op, ix, f"reads {eng.fe.regname(r)}, which the instruction at PC {int(got[1][w[j]]):#x} "
                                  f"writes asynchronously, without the {flag} that waits for it")
    cls = {"ss": 1, "sy": 2, "either": 3}.get(op.info.get("sync"), 0)
    for h in _dsts(op):
      got = pend.get(h)
      if got is None and cls:
        got = pend[h] = (np.zeros(eng.W, np.int8), np.zeros(eng.W, np.int64))
      if got is not None:
        got[0][w], got[1][w] = cls, op.pc

  # ---- LDS races: called by the LDS window with the workgroup and byte offset of every access
  def _lds(self, eng, acc, wg, off, n) -> None:
    """Per LDS dword: last writer and reader (wave, barrier epoch). The window passes the workgroup of each
    address; the waves come from the active lanes in order (eng.lds.lane_waves), skipped if pcode sub-masked.

    Reads only matter to later writes (a read after a write is checked at once): they are queued and entered in
    the reader table when the next write comes, and a queued read whose workgroups have all passed a barrier since
    is dropped unseen (its entries could never match a current epoch). A tiled kernel's reads then cost nothing."""
    op, slot = self.cur, getattr(eng.lds, "lane_waves", None)
    if acc == "read" and "async" in self.on and len(getattr(getattr(eng, "cp_async", None), "rows", ())):
      self._async(eng, op, wg, off, n)
    if self.waitcnt and op is not None and slot is not None and len(slot) == len(wg) and \
       (self.dma is not None or op.info.get("deliver")):
      self._dma(eng, op, acc, off, n, slot)
    if "lds_race" not in self.on or op is None or op.atomic or op.info.get("strong") or slot is None or \
       len(slot) != len(wg):
      return
    if acc == "read":
      if (self.wep == self.epoch).any():  # some workgroup wrote since its barrier: check against the writers now
        wg64 = np.asarray(wg, np.int64)
        ep, dw = self.epoch[wg64], off >> 2
        for k in range(max(n // 4, 1)):
          d = dw + k
          f = wg64 * self.nd + d
          w = self.lw[0][f]
          bad = (self.lw[1][f] == ep) & (w != slot) & (w >= 0)
          if bad.any():
            self._race(slot, acc, d, bad, op)
      self.reads.append((wg, off, slot, n, self.epoch.copy()))
      if len(self.reads) >= 96:  # bound the queue (~0.5 MiB a read of 64k lanes); a tiled kernel reads ~32 a tile
        self._prune()
      return
    self._flush()
    ep, dw = np.take(self.epoch, wg), off >> 2
    base = np.multiply(wg, self.nd, dtype=np.int64)  # 1-D gathers/scatters (np.take, last index wins), not 2-D
    lw, lr = self.lw, self.lr
    for k in range(max(n // 4, 1)):
      d = dw + k if k else dw
      f = base + d
      # two waves of one workgroup writing the same dword in this very access: a lane whose wave differs from that
      # of the first lane writing its dword (scattered in reverse, the first lane wins)
      if self.first is None:
        self.first = np.empty(len(self.tab), np.int64)
      self.first[f[::-1]] = slot[::-1]
      bad = np.take(self.first, f) != slot
      # an entry of the current epoch needs a workgroup that wrote/read since its last barrier (wep/rep are set for
      # every workgroup at each access, a superset): none -> every entry is stale, skip gathering them
      wrote, read = (self.wep == self.epoch).any(), (self.rep == self.epoch).any()
      if wrote:
        bad |= (lw[1][f] == ep) & ((w := lw[0][f]) != slot) & (w >= 0)
      if read:
        bad |= (lr[1][f] == ep) & ((r := lr[0][f]) != slot) & (r != -1)
      lw[0][f] = slot
      lw[1][f] = ep
      self.wep[:] = self.epoch
      if bad.any():
        self._race(slot, acc, d, bad, op)

  def _prune(self) -> None:
    """Forget the data of queued reads whose workgroups all passed a barrier since (only the epochs they set `rep`
    to matter: the last of each run); enter the rest if the queue stays long."""
    keep = []
    for r in self.reads:
      stale = not (r[4] == self.epoch).any()
      if stale and keep and keep[-1][0] is None:
        keep.pop()
      keep.append((None, None, None, 0, r[4]) if stale else r)
    self.reads = keep
    if len(self.reads) >= 64:
      self._flush()

  def _flush(self) -> None:
    """Enter the queued reads in the reader table, in order, as each would have been entered at its time (a read
    whose workgroups all passed a barrier since only sets `rep`: its entries could never match a current epoch)."""
    lr = self.lr
    for wg, off, slot, n, epoch in self.reads:
      if wg is None or not (epoch == self.epoch).any():
        self.rep[:] = epoch
        continue
      if isinstance(wg, _Logged):  # (a native block's: entered by host code)
        wg.enter(self, epoch)
        self.rep[:] = epoch
        continue
      wg = np.asarray(wg, np.int64)
      ep, dw = epoch[wg], off >> 2
      if self.first is None:
        self.first = np.empty(len(self.tab), np.int64)
      for k in range(max(n // 4, 1)):
        f = wg * self.nd + (dw + k)
        # a dword two waves read in this one access has many readers (the last lane's wave alone would hide the
        # other from a later write): flag the dwords whose first reader in lane order is not every lane's wave
        first = self.first
        first[f[::-1]] = slot[::-1]
        many = np.take(first, f) != slot
        if many.any():
          first[f] = 0
          first[f[many]] = 1
          many = np.take(first, f) == 1
        if (self.rep == epoch).any():
          r = lr[0][f]
          many |= (lr[1][f] == ep) & (r != slot) & (r != -1)
        lr[0][f] = np.where(many, -2, slot)
        lr[1][f] = ep
        self.rep[:] = epoch
    self.reads = []

  def _race(self, slot, acc, d, bad, op) -> None:
    i = int(np.argmax(bad))
    from gputwin.emu.core import Stop
    raise Stop("check", f"LDS race: wave {int(slot[i])} {acc}s LDS[{int(d[i]) * 4:#x}] that another wave of its "
                        f"workgroup accessed since the last s_barrier", int(slot[i]), op)

  def _dma(self, eng, op: Op, acc: str, off, n: int, slot) -> None:
    """waitcnt for loads into LDS: their data lands when their counter retires (vmcnt), so an LDS access by any wave
    of the workgroup to bytes one still writes reads (or is overwritten by) stale data. Recorded per issuing wave as
    the range it writes; an access checks the ranges of its workgroup's waves whose load has not retired."""
    off = np.asarray(off, np.int64)
    if op.info.get("deliver"):  # the load's own writes (issued, after() counts it next): record its range
      if self.dma is None:
        self.dma = np.zeros((eng.W, 4), np.int64)
      c = self._plan(op)[2][0]
      for w in np.unique(slot):
        at = off[slot == w]
        d, lo, hi = self.dma[w], int(at.min()), int(at.max()) + n
        if d[0] and self.retired[w, d[0] - 1] < d[1]:  # another one still outstanding: the union of both
          lo, hi = min(lo, int(d[2])), max(hi, int(d[3]))
        self.dma[w] = (c + 1, self.issued[w, c] + 1, lo, hi)
      return
    d, live = self.dma, self._dma_live()
    if not len(live):
      return
    wgs = eng.wg[np.asarray(slot, np.int64)]
    for w in live:
      bad = (wgs == eng.wg[w]) & (off < d[w, 3]) & (off + n > d[w, 2])
      if bad.any():
        i = int(np.argmax(bad))
        from gputwin.emu.core import Stop
        raise Stop("check", f"{acc}s LDS[{int(off[i]):#x}] while wave {int(w)}'s load into LDS writing it is "
                            f"outstanding: missing s_waitcnt {self.cnames[d[w, 0] - 1]}", int(slot[i]), op)

  def _dma_live(self) -> np.ndarray:
    """The waves whose load into LDS has not retired; none: self.dma is dropped (retired counts only grow, so nothing
    is checked until the next load into LDS)."""
    d = self.dma
    live = np.flatnonzero(d[:, 0] > 0)
    live = live[self.retired[live, d[live, 0] - 1] < d[live, 1]]
    if not len(live):
      self.dma = None
    return live

  def _hazard(self, eng, op: Op, ix) -> None:
    used = list(self._regs(op, list(op.sem.inputs) if op.sem else ["S0"]))
    for n, s in used + ([("D0", op.outs["D0"])] if "D0" in op.outs else []):
      if s.file not in "va":
        continue
      for pc in set(self.mfma[ix].tolist()) - {-1}:
        f, i, dw, passes = self.mfma_regs[pc]
        if f == s.file and i < s.index + s.dwords and s.index < i + dw and op.pc != pc:
          sel = (self.mfma[ix] == pc) & (self.clock[ix] < passes + 2)
          if sel.any() and hwdata.matrix(self.fam, op.inst.op) is None:
            waited = int(self.clock[ix][sel][0])
            self._fail(eng, op, ix, f"MFMA hazard: {_name(s)} ({n}) used {waited} wait states after "
                                    f"the MFMA at PC {pc:#x} wrote it; {passes} passes need {passes + 2} (s_nop)")


def _simt_ok(ch: "Checks", op: Op) -> bool:
  """Per-thread PCs: whether the per-thread checkers (`simt`) have nothing to decide at `op` inside a native block. A
  guarded `.uni` branch may diverge; collectives and atomics of scopes are per thread: such blocks are interpreted.
  (A guarded instruction may run for no thread, and the interpreter then skips its checks (uninit, ir3's (ss)/(sy))
  and leaves its destinations unwritten: a block's summary follows both cases per guard class, and its code says
  which ran: _Summary, Checks.ran.) A warp-level tensor op's block runs only for warps all of whose threads stand at
  it (runtime.Block.whole), so does a bar.warp.sync's: its constant full member mask can name no absent or exited
  thread."""
  mm = op.info.get("members")
  full = op.kind in ("tensor", "warpsync") and isinstance(mm, Src) and mm.file == "k" and \
      mm.value & 0xffffffff == 0xffffffff
  return not (op.info.get("guard") is not None and op.info.get("uniform") and "divergence" in ch.on
              or mm is not None and "members" in ch.on and not full or op.atomic and "scope" in ch.on)


@functools.cache
def _host_fn(symbol: str):
  """A function of the checkers' host code, as native/tier.support loads it (once a process): race.ll's lds_access
  (one access of the race checker), checks.ll's enter and leave (uninit and waitcnt around a native block)."""
  import ctypes
  from gputwin.emu.native.tier import support
  i64, p = ctypes.c_int64, ctypes.c_void_p
  module, *signature = {"lds_access": ("race", i64, p, i64, i64, p, i64, i64, i64, i64, p, p, i64, i64, i64),
                        "enter": ("checks", i64, p, p, p, i64, i64),
                        "leave": ("checks", None, p, p, p, i64, i64)}[symbol]
  return support(module, symbol, ctypes.CFUNCTYPE(*signature))


class _Logged:
  """Queued LDS reads of a native block (Checks._replay): accesses `sites` ((k, bytes)) of its log rows, for waves
  `ix`; entered in the reader table by host code when `_flush` comes to them."""
  __slots__ = ("eng", "rows", "ix", "sites")

  def __init__(self, eng, rows, ix):
    self.eng, self.rows, self.ix, self.sites = eng, rows, ix, []

  def own(self) -> None:
    """Copy these accesses out of the block's log (which the next logging block overwrites)."""
    if self.rows.base is not None:
      ks = [k for k, _ in self.sites]
      self.rows = self.rows[:, ks].copy()
      self.sites = [(j, nb) for j, (_, nb) in enumerate(self.sites)]

  def enter(self, ch: Checks, epoch) -> None:
    waves = np.ascontiguousarray(np.arange(self.eng.W, dtype=np.int64)[self.ix])
    for k, nbytes in self.sites:
      ch._host_access(self.eng, self.rows, k, waves, nbytes, 2, epoch)


class _Summary:
  """What the checkers see of a straight-line block, found by walking its instructions as `before`, `after` and `wait`
  do, with each wave's wait counters at entry (issued I, retired R) kept symbolic: at instruction j a counter has
  issued I + inc_j and retired max(R, I + K_j), K_j the largest (issued so far - allowed outstanding) of the waits
  before j. A load's result read in the block is then decided here: ok iff K_j >= its issue number in the block;
  anything the block cannot decide alone is left to `Checks.native` with the waves' state:
    exposed  uninit: operands (file, slice, keys) none of whose registers an earlier instruction of the block wrote
    loads    waitcnt: (key, K) registers read before the block writes them, with the K of the reading instruction
    hazards  CDNA: (registers, wait states since entry, PC) of vector instructions before the block's first MFMA
    final    per register written: (counter, issue number) of the load that wrote it last, or None
    inc, waits, clock, mfma: the counters' increments, (counter, K) at the end, wait states, the last MFMA
  ok is False when some instruction fails whatever the state (or writes registers by number): never run natively.
  Per-thread PCs: a guarded op runs for the checkers when its guard holds for some thread standing at it, else not
  at all (core.step_simt), which only the run says (Checks.ran: which guard classes ran, codegen.guard_classes). Its
  writes then cover a later read only by an op of its own class (`cond`: register -> the classes that wrote it; an
  operand read is exposed unless some register of it is in `final` or written by the reader's class), so `exposed`
  holds every read that some outcome leaves to the state at entry (checked there as if its op ran: the interpreter
  decides a block the entry state cannot), and `ran` marks a class's writes only when it ran."""

  def __init__(self, ch: "Checks", ops):
    self.width = (ch.vw.shape[1], ch.aw.shape[1], ch.fam)
    from gputwin.emu.native.codegen import guard_classes
    from gputwin.emu.native.plan import dead_reads
    ops = self.ops = list(ops)
    self.dead_reads = dead_reads(ops, ch.per_thread)
    cls = self.classes = guard_classes(ops) if ch.per_thread else [None] * len(ops)
    self.ncls = 1 + max((c for c in cls if c is not None), default=-1)
    self.guard_to = max((o.pc for o, c in zip(ops, cls) if c is not None), default=-1)  # the last guarded op's PC
    nc = len(ch.cnames)
    inc, K = np.zeros(nc, np.int64), [None] * nc
    # (ok: Native.ran has a bit for each of the first 64 guard classes)
    self.ok, self.exposed, self.loads, self.hazards, self.final, self.mfma, self.clock = \
        self.ncls <= 64, [], [], [], {}, None, 0
    cond = {}
    hazard = "hazard" in ch.on and ch.fam == "cdna"
    never = -(1 << 62)
    for op, cl in zip(ops, cls):
      if op.kind == "nop":
        if ch.per_thread:  # (no wait counters, no wait states: AMD's)
          continue
        v, nop = op.inst.get("simm16", 0), hwdata.wait_states(ch.fam, op.inst.op)
        if nop is not None:
          self.clock += hwdata.bits(v, nop) + 1
          continue
        for c, chunks in hwdata.waits(ch.fam, op.inst.op):
          k = int(inc[c]) - hwdata.bits(v, chunks)
          K[c] = k if K[c] is None else max(K[c], k)
        self.clock += 1
        continue
      if op.kind not in ("alu", "mem", "vopd", "matrix", "tensor", "clock"):  # (the scheduler's events: unseen)
        continue
      if ch.per_thread and not _simt_ok(ch, op):
        self.ok = False
      if op.kind == "tensor":  # (PTX's warp-level event: the interpreter's checkers only see what it writes)
        for d in op.outs.values():
          for r in range(d.index, d.index + d.dwords) if d.file in "vas" else ():
            if cl is None:
              self.final[d.file, r] = None
            else:
              cond.setdefault((d.file, r), set()).add(cl)
        continue
      for o in list(op.info["pair"]) if op.kind == "vopd" else [op]:
        _, reads, cnts, load, writes, vd, passes = ch._plan(o)
        if vd is not None:  # the VGPR a wave-level body writes by number (permlane, ds_bpermute): written, as `after`
          writes = [*writes, ("v", slice(vd, vd + 1), (("v", vd),))]
        for n, src, f, sl, keys in reads:
          if not any(k in self.final or cl is not None and cl in cond.get(k, ()) for k in keys):
            self.exposed.append((f, sl, keys))
          for key in keys:
            w = self.final.get(key, False)
            if w is False:
              self.loads.append((key, np.array([never if k is None else k for k in K], np.int64)))
            elif w is not None and ch.waitcnt and (K[w[0]] is None or K[w[0]] < w[1]):
              self.ok = False  # its load is outstanding here in every wave
        if hazard and o.vector and hwdata.matrix(ch.fam, o.inst.op) is None:
          regs = [(x.file, x.index, x.dwords) for _, x in ch._regs(o, list(o.sem.inputs) if o.sem else ["S0"])]
          regs += [(x.file, x.index, x.dwords) for x in [o.outs.get("D0")] if x is not None]
          regs = [r for r in regs if r[0] in "va"]
          if self.mfma is None:
            self.hazards.append((regs, self.clock, o.pc))
          else:
            pc, d, need = self.mfma
            if pc != o.pc and self.clock < need + 2 and any(f == d.file and d.index < i + n and i < d.index + d.dwords for f, i, n in regs):
              self.ok = False
        for c in cnts:
          inc[c] += 1
        for f, sl, keys in writes:
          for key in keys:
            if cl is None:
              self.final[key] = (cnts[0], int(inc[cnts[0]])) if load else None
            else:  # (per-thread PCs: no wait counters)
              cond.setdefault(key, set()).add(cl)
        self.clock += 1
        if passes:
          self.mfma, self.clock = (o.pc, o.outs["D0"], passes), 0
    self.inc = inc
    self.waits = [(c, k) for c, k in enumerate(K) if k is not None]
    # the final writes grouped for Checks.ran: per guard class (None: unguarded) and file the rows written, and the
    # loads' (rows, counters, issue numbers); the keys a non-load wrote last
    self.wrote, self.loaded, self.plain = {}, {}, []
    for (f, r), cs in cond.items():
      for c in () if (f, r) in self.final else cs:
        self.wrote.setdefault(c, {}).setdefault(f, []).append(r)
    for (f, r), w in self.final.items():
      self.wrote.setdefault(None, {}).setdefault(f, []).append(r)
      if w is None:
        self.plain.append((f, r))
      elif r < ch.ps[f].shape[1]:
        self.loaded.setdefault(f, []).append((r, *w))
    self.pending = [((f, r), 1 << c) for f, rows in self.loaded.items() for r, c, _ in rows]
    self.host = self._encode(ch)
    self.at = self.host.ctypes.data
    self.plain = frozenset(self.plain)
    self.sync_on, self.sync_reads, self.sync_by = ch.per_thread and "sync" in ch.on, [], {}
    if self.sync_on:
      self._sync()

  def _encode(self, ch: "Checks") -> np.ndarray:
    """The records checks.ll reads (its header): registers past a pending-load table (SGPR specials) are never
    pending; an operand past its file has no register (never written, as numpy's empty slice)."""
    F, nc = {"v": 0, "a": 1, "s": 2}, len(ch.cnames)
    rows = {f: t.shape[1] for f, t in ch.ps.items()}
    ex = [(F[f], *_span(sl, ch.ws[f].shape[1])) for f, sl, _ in self.exposed]
    ld = [(F[f], r, *K.tolist()) for (f, r), K in self.loads if r < rows[f]]
    wrote = [(F[f], r) for f, regs in self.wrote.get(None, {}).items() for r in regs]
    plain = [(F[f], r) for f, r in self.plain if r < rows[f]]
    loaded = [(F[f], r, c, a) for f, rs in self.loaded.items() for r, c, a in rs]
    head = [len(ex), len(ld), len(self.waits), len(wrote), len(plain), len(loaded), nc, *self.inc.tolist()]
    flat = [x for recs in (ex, ld, self.waits, wrote, plain, loaded) for rec in recs for x in rec]
    return np.array(head + flat, np.int64)

  def _sync(self) -> None:
    """ir3's (ss)/(sy) at entry, for every outcome of the guard classes (which ran): `sync_reads` the halves some
    outcome reads before the block writes them, with the flags seen by then (Checks.native: the entry state must be
    cleared by them); ok is False when some outcome reads a half the block made pending and did not wait for. Any
    such outcome has one where only the reader's class and the producer's ran (more classes run only add flags, and
    a later producer's pending half is its own case), so the outcomes of at most two classes decide it."""
    n = self.ncls
    reads = {}
    for ran in [0] + [1 << a for a in range(n)] + [1 << a | 1 << b for a in range(n) for b in range(a)]:
      ok, rd, made, clears = _sync_walk(self.ops, self.classes, ran)
      self.ok = self.ok and ok
      reads.update(dict.fromkeys(rd))
      self.sync_by[ran] = (made, clears)
    self.sync_reads = list(reads)

  def synced(self, guards: int) -> tuple[dict, tuple]:
    """The sync checker's effect of the block when the guard classes in `guards` (bits) ran: the halves it made
    pending, (class pending at its end or 0, producer PC), and the classes its flags clear in what was pending at
    entry."""
    ran = guards & ((1 << self.ncls) - 1)
    got = self.sync_by.get(ran)
    if got is None:
      got = self.sync_by[ran] = _sync_walk(self.ops, self.classes, ran)[2:]
    return got


def _span(sl: slice, n: int) -> tuple[int, int]:
  """(first, count) of the registers a slice of a file of n names."""
  r = range(n)[sl]
  return (r.start, len(r)) if len(r) else (0, 0)


def _sync_walk(ops, classes, ran: int):
  """ir3's (ss)/(sy) over a block's ops of guard class None or one in `ran` (bits), as Checks._sync goes instruction
  by instruction: (False when a read of a half the block made pending and did not wait for fails in every wave, the
  halves read before the block writes them with the flags seen by then (h, ss, sy), the halves it writes -> (class
  pending at its end or 0, producer PC), the classes its flags clear in what was pending at entry)."""
  ss = sy = False
  ok, reads, made = True, [], {}
  for op, cl in zip(ops, classes):
    if "ss" not in op.info or cl is not None and not ran >> cl & 1:
      continue
    for flag, k in (("ss", 1), ("sy", 2)):
      if op.info.get(flag):
        ss, sy = ss or k == 1, sy or k == 2
        for h, (c, pc) in made.items():
          if c == k or c == 3:
            made[h] = (0, pc)
    for r in _sync_reads(op):
      for h in ((r.file, x) for x in _halves(r)):
        if h in made:
          ok = ok and not made[h][0]
        else:
          reads.append((h, ss, sy))
    cls = {"ss": 1, "sy": 2, "either": 3}.get(op.info.get("sync"), 0)
    for h in _dsts(op):
      made[h] = (cls, op.pc)
  return ok, reads, made, tuple(k for k, on in ((1, ss), (2, sy)) if on)


def _sync_reads(op: Op):
  """The registers an ir3 instruction reads, as the sync checker sees them: its parts' operands and its memory,
  texture and predicate sources."""
  for r in [x for o in op.info.get("parts", [op]) for x in o.ins.values()] + \
      [op.info.get(k) for k in ("base", "coord", "index", "ibo", "ubo", "pred")]:
    if isinstance(r, Src) and r.file in ("v", "s"):
      yield r


def _dsts(op: Op):
  """The register halves an ir3 instruction writes ((file, half row)), as Checks._sync marks them."""
  for o in op.info.get("parts", [op]):
    for d in o.outs.values():
      if isinstance(d, Src) and d.file in ("v", "s"):
        yield from ((d.file, h) for h in _halves(d))


def _name(s: Src) -> str:
  return f"{s.file}{s.index}" if s.dwords == 1 else f"{s.file}[{s.index}:{s.index + s.dwords - 1}]"


def _halves(r: Src) -> list[int]:
  """The 16-bit halves (row * 2 + high) an operand covers."""
  if r.bits == 16 and r.dwords == 1:
    return [2 * r.index + int(r.hi)]
  return [2 * r.index + k for k in range(2 * r.dwords)]

