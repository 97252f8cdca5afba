"""Checkers for hand-written assembly, run alongside execution (on by default; `checks=False` or a set of names).

  waitcnt  a register written by an outstanding load is read before the matching wait counter retires it
           (s_waitcnt vmcnt/lgkmcnt, s_waitcnt_vscnt on gfx10+; gfx12 s_wait_loadcnt/storecnt/dscnt/kmcnt)
  uninit   an operand none of whose registers was ever written (by the ABI's initial state or an instruction);
           a partially written multi-dword operand is allowed (clang reads v[0:1] for a 32-bit addend)
  lds_race two waves of one workgroup touch the same LDS dword, at least one writing, with no s_barrier between
           (atomics excluded)
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

import numpy as np

from gputwin.emu.program import Op, Src
from gputwin.isa import hwdata

ALL = frozenset({"waitcnt", "uninit", "lds_race", "hazard"})


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
    self.cnames = hwdata.counters(self.fam)  # wait counters, indexed as in issued/retired
    # per wave and register, indexed [wave, reg], stored register-major: an instruction touches a few registers of
    # many waves, which then lie in a few pages (wave-major, each wave's row was a page of its own to fault in)
    per_reg = lambda n, *tail, dt=bool: np.zeros((n, W) + tail, dt).swapaxes(0, 1)
    self.vw, self.aw, self.sw = per_reg(nv), per_reg(eng.A.shape[1]), per_reg(256)
    self.sw[:, 106:] = True  # specials (VCC, M0, EXEC, constants) are not tracked
    # (counter + 1, sequence number) of the outstanding load, int32 (a wave issues far fewer than 2**31 loads);
    # SGPRs from 106 up are specials, never tracked: no pending entries for them (slices past the end are empty)
    self.vp = per_reg(nv, 2, dt=np.int32)
    self.ap = per_reg(eng.A.shape[1], 2, dt=np.int32)
    self.sp = per_reg(106, 2, dt=np.int32)
    self.issued = np.zeros((W, len(self.cnames)), np.int64)
    self.retired = np.zeros((W, len(self.cnames)), np.int64)
    self.mfma = np.full((W,), -1, np.int64)  # index of the last MFMA per wave, its regs and ready time
    self.mfma_regs: dict[int, tuple] = {}
    self.clock = np.zeros(W, np.int64)
    self.epoch = np.zeros(int(eng.wg.max()) + 1 if W else 1, np.int64)
    self.nd = nd = max(eng.lds.size // 4 + 1, 1)  # per workgroup and LDS dword, flat (workgroup * nd + dword):
    self.lw = np.full((2, len(self.epoch) * nd), -1, np.int64)  # last writer: [wave, epoch]
    self.lr = np.full((2, len(self.epoch) * nd), -1, np.int64)  # last reader: [wave or -2 for many, epoch]
    self.wep, self.rep = np.full(len(self.epoch), -1, np.int64), np.full(len(self.epoch), -1, np.int64)
    self.reads = []  # LDS reads not yet entered in lr: (workgroup, offset, wave, bytes, epochs at the read)
    self.first = None  # scratch table for the same-access write-write test
    self.cur = None
    self.ws, self.ps = {"v": self.vw, "a": self.aw, "s": self.sw}, {"v": self.vp, "a": self.ap, "s": self.sp}
    self.uninit, self.waitcnt = "uninit" in self.on, "waitcnt" in self.on
    # (file, register) keys: every wave of the batch wrote it (uninit can skip it; a register never leaves), and
    # -> the wait counters (bit mask) of loads into it that may be outstanding (absent: its entries are all zero)
    self.full, self.pend = set(), {}
    if "lds_race" in self.on:
      eng.lds.watch = lambda acc, wg, off, n: self._lds(eng, acc, wg, off, n)

  def initial(self, eng, nsgpr: int) -> None:
    """The ABI initialised SGPRs below `nsgpr` and v0 (work-item ids)."""
    self.sw[:, :nsgpr] = True
    self.vw[:, 0] = True

  def poked(self, eng, w, f, i) -> None:
    {"v": self.vw, "a": self.aw, "s": self.sw}.get(f, np.zeros((eng.W, 256), bool))[w, i] = True

  def _fail(self, eng, op, ix, msg):
    from gputwin.emu.core import Stop
    raise Stop("check", msg, int(np.arange(eng.W)[ix][0]), op)

  @staticmethod
  def _regs(op: Op, names):
    for n in names:
      s = op.ins.get(n)
      if isinstance(s, Src) and s.file in "vas":
        yield n, s
    for key in ("vaddr", "saddr", "sbase", "srsrc"):
      i = op.info.get(key)
      if i is not None and op.mem:
        d = {"vaddr": op.info.get("vdwords", 1), "saddr": 2 if op.mem == "global" else 1, "sbase": 2, "srsrc": 4}[key]
        yield key, Src("v" if key == "vaddr" else "s", i, d)

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
               if not (s.file == "s" and s.index >= 106)]
      outs = set(op.sem.outputs) if op.sem is not None else {"D0"}
      dsts = {id(d): d for n, d in op.outs.items() if n in outs and isinstance(d, Src) and d.file in "vas"}.values()
      reads_mem = bool(op.mem) and "r" in op.sem.mem  # its result waits on cnts[0] (atomics with return: loads)
      cnts = hwdata.increments(self.fam, op.mem, not (reads_mem and op.sem.outputs)) if op.mem else ()
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
    self.epoch[g] += 1

  # ---- LDS races: called by the LDS window with the workgroup and byte offset of every access
  def _lds(self, eng, acc, wg, off, n) -> None:
    """Per LDS dword: last writer and reader (wave, barrier epoch). The window passes the workgroup of each
    address; the waves come from the active lanes in order (eng.lds.lane_waves), skipped if pcode sub-masked.

    Reads only matter to later writes (a read after a write is checked at once): they are queued and entered in
    the reader table when the next write comes, and a queued read whose workgroups have all passed a barrier since
    is dropped unseen (its entries could never match a current epoch). A tiled kernel's reads then cost nothing."""
    op, slot = self.cur, getattr(eng.lds, "lane_waves", None)
    if op is None or op.atomic or slot is None or len(slot) != len(wg):
      return
    if acc == "read":
      if (self.wep == self.epoch).any():  # some workgroup wrote since its barrier: check against the writers now
        wg64 = np.asarray(wg, np.int64)
        ep, dw = self.epoch[wg64], off >> 2
        for k in range(max(n // 4, 1)):
          d = dw + k
          f = wg64 * self.nd + d
          w = np.take(self.lw[0], f)
          bad = (np.take(self.lw[1], f) == ep) & (w != slot) & (w >= 0)
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
        self.first = np.empty(lw.shape[1], np.int64)
      self.first[f[::-1]] = slot[::-1]
      bad = np.take(self.first, f) != slot
      # an entry of the current epoch needs a workgroup that wrote/read since its last barrier (wep/rep are set for
      # every workgroup at each access, a superset): none -> every entry is stale, skip gathering them
      wrote, read = (self.wep == self.epoch).any(), (self.rep == self.epoch).any()
      if wrote:
        bad |= (np.take(lw[1], f) == ep) & ((w := np.take(lw[0], f)) != slot) & (w >= 0)
      if read:
        bad |= (np.take(lr[1], f) == ep) & ((r := np.take(lr[0], f)) != slot) & (r != -1)
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
      wg = np.asarray(wg, np.int64)
      ep, dw = epoch[wg], off >> 2
      for k in range(max(n // 4, 1)):
        f = wg * self.nd + (dw + k)
        if (self.rep == epoch).any():
          r = np.take(lr[0], f)
          lr[0][f] = np.where((np.take(lr[1], f) == ep) & (r != slot) & (r != -1), -2, slot)
        else:
          lr[0][f] = slot
        lr[1][f] = ep
        self.rep[:] = epoch
    self.reads = []

  def _race(self, slot, acc, d, bad, op) -> None:
    i = int(np.argmax(bad))
    from gputwin.emu.core import Stop
    raise Stop("check", f"LDS race: wave {int(slot[i])} {acc}s LDS[{int(d[i]) * 4:#x}] that another wave of its "
                        f"workgroup accessed since the last s_barrier", int(slot[i]), op)

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


def _name(s: Src) -> str:
  return f"{s.file}{s.index}" if s.dwords == 1 else f"{s.file}[{s.index}:{s.index + s.dwords - 1}]"
