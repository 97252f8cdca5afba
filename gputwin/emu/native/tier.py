"""The native tier's policy (gputwin/emu/README.md, "Native tier"): whether it is on (`mode`), when a block is hot
(`threshold`, `Tier`), compiling a block once per program (`compile_block`), and the per-program caches."""
from __future__ import annotations

import os
import threading
import time
import weakref

from gputwin.emu.binding import sets_pc
from gputwin.emu.native.codegen import Compiler
from gputwin.emu.native.plan import collect, tail
from gputwin.emu.native.runtime import STATS, Block, Native, load, parse
from gputwin.pcode.llvm import Unsupported


def mode() -> str:
  return os.environ.get("GPUTWIN_JIT", "auto").lower()


def threshold() -> int:
  return 0 if mode() == "force" else int(float(os.environ.get("GPUTWIN_JIT_AFTER", 1_500_000)))


_SEQ = [0]
_COMPILING = threading.RLock()
FAILED: list = []  # (arch, ops, LLVM error) of blocks LLVM rejected; tests assert it stays empty


def compile_block(prog, pc: int, lanes: int):
  """The Block starting at pc, or None when its first instruction is not for this tier."""
  with _COMPILING:  # one MCJIT engine per process; mock GPUs run their command processors on threads
    t = time.perf_counter()
    try:
      return _compile_block(prog, pc, lanes)
    finally:
      STATS["compile_seconds"] += time.perf_counter() - t


def _compile_block(prog, pc: int, lanes: int):
  ops = collect(prog, pc, prog.family)
  while ops:
    try:
      comp = Compiler(ops, lanes, prog.family, prog.frontend)
      _SEQ[0] += 1
      name = f"blk{_SEQ[0]}"
      text = comp.module(name)
      break
    except Unsupported as e:  # an op the filter let through but the code generator declined: keep the run before it
      ops = ops[:e.at]
  if not ops:
    return None
  try:
    mod = parse(text)
  except RuntimeError as e:  # a code generator bug: stay interpreted, and keep the evidence for the tests
    FAILED.append((prog.arch, [o.text for o in ops], str(e)))
    return None
  blk = Block(pc, ops, load(mod, name), mod, comp.nv, comp.ns, comp.wrote, comp.tail and tail(ops[-1]))
  STATS["blocks"] += 1
  return blk


class Tier:
  """What core.run asks at every scheduling step: the compiled block at a PC, or None (interpret this step).

  A block compiles once `GPUTWIN_JIT_AFTER` lanes have reached its first instruction interpreted (rent, then buy:
  compiling costs ~15-25 ms of CPU per instruction, interpreting ~3-10 ns per lane-instruction, so by then the
  interpreter has spent about what the compile costs, whatever the block's length). Only block leaders count: a PC
  the interpreter reached by falling through a compilable, non-branch instruction is the middle of a block that
  starts earlier, and compiling its tail would be wasted."""

  # per program, shared by the engines that run it (launches reuse cached programs): compiled blocks by (PC, lanes),
  # lanes that entered each leader interpreted, and whether a PC leads a block; kept while the program lives
  programs: "weakref.WeakKeyDictionary[object, tuple[dict, dict, dict]]" = weakref.WeakKeyDictionary()

  def __init__(self, eng, native: Native):
    self.eng, self.native, self.prog = eng, native, eng.prog
    self.after = threshold()
    self.fallthrough = None  # PC right after the last interpreted instruction, if it could join a block
    self.blocks, self.heat, self.leads = Tier.programs.setdefault(self.prog, ({}, {}, {}))

  def fresh(self) -> None:
    """Reused for the engine's next batch (Engine.restart): settings are read anew, as a new Tier would."""
    self.after, self.fallthrough = threshold(), None

  @staticmethod
  def make(eng) -> "Tier | None":
    try:
      native = Native(eng)
    except (AssertionError, AttributeError, ValueError):
      return None
    return Tier(eng, native) if native.ok else None

  def block(self, pc: int, waves: int = 1):
    key = (pc, self.eng.L)
    blk = self.blocks.get(key, False)
    if blk is False:
      mid, self.fallthrough = pc == self.fallthrough, None
      lead = self.leads.get(pc)
      if lead is None:
        lead = self.leads[pc] = bool(collect(self.prog, pc, self.prog.family, limit=1))
      if not mid and lead:
        h = self.heat[pc] = self.heat.get(pc, 0) + waves * self.eng.L
        if h >= self.after:
          try:
            blk = self.blocks[key] = compile_block(self.prog, pc, self.eng.L)
          except ImportError:  # llvmlite missing: stay interpreted
            blk = self.blocks[key] = None
          except Exception as e:  # a code generator bug must not stop the launch: interpret, keep the evidence
            FAILED.append((self.prog.arch, pc, f"{type(e).__name__}: {e}"))
            blk = self.blocks[key] = None
      if blk is False:
        if lead:  # interpreted now, but its successor may be mid-block
          op = self.prog.op(pc)
          if not sets_pc(op):
            self.fallthrough = pc + op.size
        return None
    if blk is not None and (blk.nv > self.eng.V.shape[1] or blk.ns > self.eng.S.shape[1]):
      return None  # registers past this dispatch's allocation: the interpreter reports it
    return blk

  def run(self, blk: Block, ix):
    """Run `blk` for waves `ix`; returns the per-wave lanes its tail took (Native.taken, read where blk.tail)."""
    self.native.run(blk, ix)
    return self.native.taken
