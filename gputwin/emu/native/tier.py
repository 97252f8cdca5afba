"""The native tier's policy (gputwin/emu/README.md, "Native tier"): whether it is on (`mode`), when a block is hot
(`threshold`, `Tier`), getting a block's code once per process (linked before, on disk: `lookup`; else compiled:
`compile_block`, in place or on the background `Worker`), and the per-program state."""
from __future__ import annotations

import atexit
import itertools
import os
import queue
import threading
import time
import weakref
from pathlib import Path

from gputwin.emu.binding import sets_pc
from gputwin.emu.native import cache
from gputwin.emu.native.codegen import Compiler
from gputwin.emu.native.plan import LDS_KINDS, collect, dead_reads, parts, tail
from gputwin.emu.native.runtime import STATS, Block, Native, emit, load, parse
from gputwin.pcode.llvm import Unsupported


def mode() -> str:
  """GPUTWIN_JIT: auto (default: hot blocks compile on a background thread, lean first), 1 (the same, compiled in
  place: the launch that makes a block hot waits for it), force (every block compiled in full, in place, at first
  sight), 0 (off)."""
  return os.environ.get("GPUTWIN_JIT", "auto").lower()


def threshold() -> int:
  return 0 if mode() == "force" else int(float(os.environ.get("GPUTWIN_JIT_AFTER", 1_500_000)))


PIPELINE = "O2-nounroll"  # the LLVM pipeline runtime.emit runs (part of the cache key)
LEAN_PIPELINE = "inline-attrs-sroa-simplifycfg-dce-fastisel"  # the one it runs for a lean block
FULL_AFTER = 13  # a lean block gets its full compile once GPUTWIN_JIT_AFTER x this many lanes entered it (below)
_IR = threading.RLock()  # the tier's LLVM work (each thread has its own context and target machine: runtime._llvm)
_ENGINE = threading.RLock()  # the process's one MCJIT engine (mock GPUs run their command processors on threads)
# a fork (verify.fuzz's pools) waits for the LLVM work in flight: a child must not inherit it half done, nor a lock
os.register_at_fork(before=lambda: (_IR.acquire(), _ENGINE.acquire()),
                    after_in_parent=lambda: (_ENGINE.release(), _IR.release()),
                    after_in_child=lambda: (_ENGINE.release(), _IR.release()))
_LINKED: dict = {}  # cache key -> (fn, meta, object code) of every block this process linked
_SEQ = itertools.count(1)  # names of blocks without a cache key
FAILED: list = []  # (arch, ops, LLVM error) of blocks LLVM rejected; tests assert it stays empty


def _key(prog, ops, lanes: int, lean: bool, log: bool = False, ftz: bool = True) -> str | None:
  # (a block without LDS accesses, or whose reads cannot matter, logs nothing: one compile serves; one without
  # instructions MODE.FP_DENORM acts on flushes nothing)
  log = log and any(o.mem in LDS_KINDS for o in ops) and not dead_reads(ops, getattr(prog.frontend, "simt", False))
  ftz = ftz or not any(o.info.get("ftz") or o.info.get("ftz_out", (0,))[0] for x in ops for o in parts(x))
  return cache.key(ops, lanes, prog.family, prog.arch, prog.frontend,
                   f"{f'{LEAN_PIPELINE}-lean' if lean else PIPELINE}{'-log' * log}{'-kept' * (not ftz)}")


def lookup(prog, pc: int, lanes: int, lean: bool = True, log: bool = False, stop=None, ftz: bool = True):
  """The Block at pc from code this process linked or the disk cache holds (no compiling): the full compile, else
  (`lean`) the lean one; None when neither is there. `log`: the variant logging LDS accesses (Block.sites); `stop`:
  plan.collect's; `ftz`: the variant flushing denormals as each wave's mode asks (False: every wave keeps them)."""
  if not _LINKED and cache.empty():  # (nothing linked here or stored: no key to compute)
    return None
  ops = collect(prog, pc, prog.family, stop=stop)
  for v in (False, True)[:1 + lean] if ops else ():
    k = _key(prog, ops, lanes, v, log, ftz)
    blk = None if k is None else _linked(k, pc, ops, v)
    if blk is not None:
      return blk
  return None


def _linked(k: str, pc: int, ops, lean: bool, meta=None, obj: bytes | None = None):
  """The Block of cache key k: code this process linked, else `obj` (just compiled) or the disk cache's, linked."""
  with _ENGINE:
    hit = _LINKED.get(k)
    if hit is None:
      t, fresh = time.perf_counter(), obj is not None
      if not fresh:
        got = cache.get(k)
        if got is None:
          return None
        meta, obj = got
        n = meta[0] if isinstance(meta, tuple) and len(meta) == 6 else 0
        if not (isinstance(n, int) and 0 < n <= len(ops)):
          return None
      try:
        fn = load(obj, f"blk_{k}")
      except RuntimeError:
        if fresh:
          raise
        return None  # not a block's object code after all: compile it
      hit = _LINKED[k] = (fn, meta, obj)
      if not fresh:
        STATS["cache_loads"] += 1
        STATS["load_seconds"] += time.perf_counter() - t
  fn, meta, obj = hit
  return _block(pc, ops, fn, meta, obj, lean)


def _block(pc: int, ops, fn, meta, obj: bytes, lean: bool):
  """The Block of linked code `fn` whose compile recorded `meta` (its first n ops, registers, writes, tail, logged
  LDS accesses)."""
  n, nv, ns, wrote, has_tail, sites = meta
  ops = ops[:n]
  STATS["blocks"] += 1
  return Block(pc, ops, fn, obj, nv, ns, dict(wrote), tail(ops[-1]) if has_tail else None, lean, tuple(sites))


def compile_block(prog, pc: int, lanes: int, lean: bool = False, log: bool = False, stop=None, ftz: bool = True):
  """The Block starting at pc, in full (`lean`: its lean compile; `log`: logging LDS accesses), linked before, cached
  on disk or compiled now; None when its first instruction is not for this tier."""
  ops = collect(prog, pc, prog.family, stop=stop)
  k = _key(prog, ops, lanes, lean, log, ftz) if ops else None
  return (_linked(k, pc, ops, lean) if k else None) or _compile(prog, pc, lanes, ops, lean, log, ftz)


def _compile(prog, pc: int, lanes: int, ops, lean: bool, log: bool = False, ftz: bool = True):
  """Compile `ops` (the block at pc; `lean`: Compiler's cold variant), store it in the disk cache and link it."""
  return _link(pc, _build(prog, lanes, ops, lean, log, ftz), lean)


def _build(prog, lanes: int, ops, lean: bool, log: bool = False, ftz: bool = True):
  """Compile `ops` to host object code and store it in the disk cache: (key, ops, meta, object code, symbol), or
  None when the code generator declines its first op. Touches no state the interpreter's thread uses."""
  k = _key(prog, ops, lanes, lean, log, ftz) if ops else None
  name = f"blk_{k}" if k else f"blk{next(_SEQ)}"
  t = time.perf_counter()
  try:
    while ops:
      try:
        comp = Compiler(ops, lanes, prog.family, prog.frontend, lean, log, ftz)
        text = comp.module(name)
        break
      except Unsupported as e:  # an op the filter let through but the code generator declined: keep the run before it
        ops = ops[:e.at]
    if not ops:
      return None
    with _IR:
      try:
        obj = emit(parse(text), lean)
      except RuntimeError as e:  # a code generator bug: stay interpreted, and keep the evidence for the tests
        FAILED.append((prog.arch, [o.text for o in ops], str(e)))
        return None
    STATS["compiles"] += 1
    STATS["compiled_vector_instructions"] += sum(o.vector and o.kind != "nop" for o in ops)
  finally:
    STATS["compile_seconds"] += time.perf_counter() - t
  meta = (len(ops), comp.nv, comp.ns, comp.wrote, comp.tail, tuple(comp.sites))
  if k is not None:
    cache.put(k, meta, obj)
  return k, ops, meta, obj, name


def _link(pc: int, built, lean: bool):
  """The Block of _build's result, linked into the MCJIT engine (on the thread that will run it)."""
  if built is None:
    return None
  k, ops, meta, obj, name = built
  if k is not None:
    return _linked(k, pc, ops, lean, meta, obj)
  with _ENGINE:
    fn = load(obj, name)
  return _block(pc, ops, fn, meta, obj, lean)


_SUPPORT: dict = {}  # name -> function of the hand-written helper modules this process linked (support)


def support(name: str, symbol: str, ftype):
  """Function `symbol` of the hand-written module `name`.ll next to this file (the race checker's: race.ll), as the
  ctypes type `ftype`; compiled once per process, its object code kept in the disk cache like a block's."""
  fn = _SUPPORT.get((name, symbol))
  if fn is None:
    text = (Path(__file__).parent / f"{name}.ll").read_text()
    k = cache.text_key(name, text)
    with _IR:
      got = cache.get(k)
      obj = got[1] if got is not None and got[0] == name else None
      if obj is None:
        obj = emit(parse(text))
        cache.put(k, name, obj)
    with _ENGINE:
      fn = _SUPPORT[(name, symbol)] = load(obj, symbol, ftype)
  return fn


class _Job:
  __slots__ = ("prog", "pc", "args", "done", "built")

  def __init__(self, prog, pc: int, args: tuple):
    self.prog, self.pc, self.args, self.done, self.built = prog, pc, args, False, None


class Worker:
  """The thread compiling hot blocks (GPUTWIN_JIT=auto) while the interpreter runs on: LLVM releases the GIL, so
  its seconds of work overlap the launch instead of stalling it. It only builds object code (_build); the thread
  that asked links it (Tier.settle). One per process, started at its first job."""

  def __init__(self):
    self.jobs, self.thread, self.pid, self.closing = queue.Queue(), None, None, False

  def submit(self, prog, pc: int, lanes: int, ops, lean: bool, log: bool = False, ftz: bool = True) -> _Job:
    job = _Job(prog, pc, (prog, lanes, ops, lean, log, ftz))
    if self.pid != os.getpid():  # (a forked child has no thread yet)
      self.pid, self.jobs = os.getpid(), queue.Queue()
      self.thread = threading.Thread(target=self._run, name="gputwin-native-compile", daemon=True)
      self.thread.start()
    self.jobs.put(job)
    return job

  def _run(self) -> None:
    while True:
      job = self.jobs.get()
      if job is None:
        return
      try:
        if not self.closing:
          job.built = _guarded(job.prog, job.pc, lambda: _build(*job.args))
      finally:
        job.done = True
        self.jobs.task_done()

  def wait(self) -> None:
    """Until every submitted block is compiled (tests, benchmarks)."""
    if self.thread is not None and self.pid == os.getpid():
      self.jobs.join()

  def close(self) -> None:
    """At exit: finish the compile in progress (LLVM must not be torn down under it), drop the rest."""
    if self.thread is not None and self.pid == os.getpid():
      self.closing = True
      self.jobs.put(None)
      self.thread.join(timeout=60)


WORKER = Worker()
atexit.register(WORKER.close)


def _guarded(prog, pc, get):
  """get()'s block; None (interpret it) when llvmlite is missing or the code generator fails (kept in FAILED)."""
  try:
    return get()
  except ImportError:
    return None
  except Exception as e:  # a code generator bug must not stop the launch: interpret, keep the evidence
    FAILED.append((prog.arch, pc, f"{type(e).__name__}: {e}"))
    return None


class _Program:
  """A program's native state, shared by the engines that run it (launches reuse cached programs), kept while it
  lives: blocks by (PC, lanes, logging LDS accesses) (None: stays interpreted), lanes that entered each leader
  interpreted, whether a PC leads a block, the leaders already looked up in the caches, and blocks being compiled in
  the background."""
  __slots__ = ("blocks", "heat", "leads", "looked", "pending", "__weakref__")

  def __init__(self):
    self.blocks, self.heat, self.leads, self.looked, self.pending = {}, {}, {}, set(), {}


class Tier:
  """What core.run asks at every scheduling step: the compiled block at a PC, or None (interpret this step).

  A block whose code this process linked or the disk cache holds runs from its first sight. Otherwise it compiles
  once `GPUTWIN_JIT_AFTER` lanes have reached its first instruction interpreted (rent, then buy: a lean compile
  costs ~3-8 ms of CPU per vector instruction, interpreting ~3-10 ns per lane-instruction, so by then the
  interpreter has spent about what the compile costs, whatever the block's length), and gets its full compile (probed
  memory paths, full-EXEC variants, vectorised lane loops: ~10x the compile, about 4x as fast) once FULL_AFTER times
  as many lanes entered it (by then the lean code has lost about that much to the full code). In `auto` mode both
  compile on the Worker thread, the block running as it did until its new code is ready; `force` compiles the full
  block at once.
  Only block leaders count: a PC the interpreter reached by falling through a compilable, non-branch instruction is
  the middle of a block that starts earlier, and compiling its tail would be wasted."""

  programs: "weakref.WeakKeyDictionary[object, _Program]" = weakref.WeakKeyDictionary()

  def __init__(self, eng, native: Native):
    self.eng, self.native, self.prog = eng, native, eng.prog
    self.fresh()
    self.state = Tier.programs.setdefault(self.prog, _Program())

  def fresh(self) -> None:
    """Reused for the engine's next batch (Engine.restart): settings are read anew, as a new Tier would."""
    self.after, self.fallthrough = threshold(), None
    checks = self.eng.checks  # the race checker replays the LDS accesses blocks log (checks.Checks.ran)
    self.log = checks is not None and "lds_race" in checks.on
    # checkers on: a block ends before an instruction they must see interpreted (a load into LDS; per-thread PCs: a
    # guarded access under `uninit`...: checks.Checks.interpreted), rather than the whole block being interpreted
    self.stop, self.cut = None, None
    if checks is not None:
      self.stop, self.cut = checks.interpreted, tuple(sorted(checks.on))
    self.background = mode() == "auto" and self.after > 0

  @staticmethod
  def make(eng) -> "Tier | None":
    try:
      native = Native(eng)
    except (AssertionError, AttributeError, ValueError):
      return None
    return Tier(eng, native) if native.ok else None

  def key(self, pc: int) -> tuple:
    """The block at `pc` as this tier keys it: wave size, LDS logging, the collect cut, whether a wave's mode may
    flush denormals now (Frontend.denormals_kept: False while every wave keeps them)."""
    kept = getattr(self.eng.fe, "denormals_kept", None)
    return pc, self.eng.L, self.log, self.cut, not (kept is not None and kept(self.eng))

  def block(self, pc: int, waves: int = 1):
    key = self.key(pc)
    st = self.state
    if st.pending:
      self.settle(key)
    blk = st.blocks.get(key, False)
    if blk and blk.lean:  # (leaders only: a block is entered at its first instruction)
      blk = self.heat(key, waves) or blk
    if blk is False:
      mid, self.fallthrough = pc == self.fallthrough, None
      lead = st.leads.get((pc, self.cut))
      if lead is None:
        lead = st.leads[(pc, self.cut)] = bool(collect(self.prog, pc, self.prog.family, limit=1, stop=self.stop))
      if not mid and lead:
        blk = self.leader(key, waves)
      if blk is False:
        if lead:  # interpreted now, but its successor may be mid-block
          op = self.prog.op(pc)
          if not sets_pc(op):
            self.fallthrough = pc + op.size
        return None
    if blk is not None and (blk.nv > self.eng.V.shape[1] or blk.ns > self.eng.S.shape[1] or
                            blk.na > self.eng.A.shape[1]):
      return None  # registers past this dispatch's allocation: the interpreter reports it
    return blk

  def compiled(self, pc: int) -> bool:
    """Is the block at `pc` compiled (block() then returns it at once)?"""
    return bool(self.state.blocks.get(self.key(pc)))

  def settle(self, key: tuple) -> None:
    """Take the background compile of the block at `key` once done."""
    job = self.state.pending.get(key)
    if job is not None and job.done:
      del self.state.pending[key]
      self.take(key, _guarded(self.prog, key[0], lambda: _link(key[0], job.built, job.args[3])))

  def take(self, key: tuple, blk):
    """A compile's block for `key` (None: it failed; a lean block then stays, and is not compiled again)."""
    st = self.state
    if blk is not None or not st.blocks.get(key):
      st.blocks[key] = blk
    else:
      st.heat[key[0]] = float("-inf")
    return st.blocks[key]

  def leader(self, key: tuple, waves: int):
    """The block at a leader reached `waves` times: cached, or compiled once hot; False: interpret it this time."""
    st = self.state
    if key not in st.looked:  # its first sight: code linked or cached needs no heat
      st.looked.add(key)
      blk = _guarded(self.prog, key[0], lambda: lookup(self.prog, key[0], key[1], self.after > 0, key[2], self.stop,
                                                       key[4]))
      if blk is not None:
        st.blocks[key] = blk
        return blk
    return self.heat(key, waves)

  def heat(self, key: tuple, waves: int):
    """Count the lanes entering a leader (interpreted, or run by its lean block); once they pass the threshold,
    compile: lean for an interpreted block (in full in `force` mode), in full for a lean one. Returns the block
    compiled (None: declined, it stays interpreted), or False while there is none."""
    st, pc = self.state, key[0]
    upgrade = key in st.blocks
    h = st.heat[pc] = st.heat.get(pc, 0) + waves * self.eng.L
    if h < self.after * (FULL_AFTER if upgrade else 1) or key in st.pending:
      return False
    ops, lean = collect(self.prog, pc, self.prog.family, stop=self.stop), not upgrade and self.after > 0
    if self.background:
      st.pending[key] = WORKER.submit(self.prog, pc, key[1], ops, lean, key[2], key[4])
      return False
    return self.take(key, _guarded(self.prog, pc, lambda: _compile(self.prog, pc, key[1], ops, lean, key[2],
                                                                   key[4])))
  def run(self, blk: Block, ix):
    """Run `blk` for waves `ix`; returns the per-wave lanes its tail took (Native.taken, read where blk.tail)."""
    self.native.run(blk, ix)
    return self.native.taken
