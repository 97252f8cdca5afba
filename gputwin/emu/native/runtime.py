"""The native tier's runtime (gputwin/emu/README.md, "Native tier"): the ctx array compiled blocks and Python share
(its `C_*` slots), the hand-written prelude (prelude.ll) with those slots filled in, loading a block's module into
the process's MCJIT engine, the guest-region table, and `Native`, which runs a compiled block over waves and turns a
fault it stopped at into the interpreter's error."""
from __future__ import annotations

import contextlib
import ctypes
import re
import threading
from pathlib import Path

import numpy as np

from gputwin.emu.binding import LDS_BITS, LDS_SHIFT, Stop
from gputwin.emu.program import Op
from gputwin.errors import GPUPageFault, GputwinError
from gputwin.pcode import llvm as backend
from gputwin.pcode.llvm import TBAA_BASE, native

TBAA_FIXED = ("ctx", "tbl")  # tags the prelude uses: ctx fields the block writes, the region table

# ctx: one int64 array shared by Python and the native code
(C_V, C_S, C_SCC, C_PC, C_WG, C_VSTW, C_VSTR, C_SSTW, C_SSTR, C_LDS, C_LDSZ, C_NREG, C_REGS, C_FAULT, C_FADDR,
 C_FBYTES, C_FWRITE, C_FWAVE, C_LANES, C_INIT, C_IEEE, C_TAKEN, C_LOG, C_A, C_RES, C_RESN, C_RAN, C_SCR, C_SCRSZ,
 C_SCRST, C_SCRN, C_PRIV, C_VROWS, C_CLOCK, C_HW, C_N) = range(36)  # (C_SCR...: the scratch window's bytes, slot
# size, log2 of its address stride, slots; C_PRIV: set by a flat access with a lane in the private aperture; C_VROWS:
# the VGPR file's rows, which a register by computed number must be below; C_CLOCK: the waves' clocks, Engine.clock;
# C_HW: the hardware registers, Engine.HW, with the SGPR file's strides)
# what a fault in ctx[C_FAULT] was
F_GLOBAL, F_HIGH, F_LDSBASE, F_LDSOFF, F_SCROFF, F_SCRSLOT, F_LANE = 1, 2, 3, 4, 5, 6, 7

# this process's tier work: blocks made, of them compiled by LLVM (their vector instructions) or loaded from the disk
# cache, runs, wave-instructions run, seconds compiling (IR, LLVM, object code) and loading
STATS = {"blocks": 0, "compiles": 0, "compiled_vector_instructions": 0, "cache_loads": 0, "runs": 0,
         "wave_instructions": 0, "compile_seconds": 0.0, "load_seconds": 0.0}


class Block:
  """One compiled run of instructions: its native entry point and what the scheduler needs to account for it."""

  def __init__(self, pc: int, ops: list[Op], fn, obj: bytes, nv: int, ns: int, wrote: dict, tail: str | None = None,
               lean: bool = False, sites: tuple = ()):
    self.pc, self.ops, self.fn, self.obj = pc, ops, fn, obj  # obj: its host object code (in the MCJIT engine)
    self.lean = lean  # compiled without probes and full-EXEC variants (codegen.Compiler): the tier's cold compile
    self.n = len(ops)
    self.span = ops[-1].pc + ops[-1].size - pc if ops else 0  # PC units from its first instruction past its last
    self.tail = tail  # per-thread PCs: how the last instruction moves threads (plan.tail), its lanes in Native.taken
    self.nv, self.ns = nv, ns  # VGPRs / SGPRs the block touches
    self.wrote = wrote  # {"v": rows, "s": rows} bit masks of the registers it writes
    self.na = max((o.info.get("extent", (0, 0))[1] for o in ops), default=0)  # AccVGPRs its operands reach
    self.whole = any(o.kind in ("tensor", "warpsync") for o in ops)  # runs only for warps all of whose threads
    # stand at it (a warp-level op; bar.warp.sync, whose members have then all arrived)
    # LDS accesses the code logs (compiled for the race checker): (op index, bytes, write) in the order they run; each
    # writes its lanes' addresses into Native.log[wave, site, lane] (uint32; all ones: the lane did not access)
    self.sites = sites
    self.private = any(o.mem == "scratch" for o in ops)  # it runs scratch accesses (Engine.scratch_used)


def mask_bits(lanes: int) -> int:
  """The width of the native code's lane masks (EXEC, guards, Native.taken) for a wave of `lanes`: an i64 up to
  wave64 (wave32's zero-extended), an i{lanes} beyond."""
  return max(64, lanes)


PRELUDE = backend.INTRINSICS + (Path(__file__).parent / "prelude.ll").read_text()  # memory helpers, faults
_CTX = dict(NREG=C_NREG, REGS=C_REGS, LDS=C_LDS, LDSZ=C_LDSZ, FAULT=C_FAULT, FADDR=C_FADDR, FBYTES=C_FBYTES,
            FWRITE=C_FWRITE, FWAVE=C_FWAVE, INIT=C_INIT, V=C_V, VSTW=C_VSTW, VSTR=C_VSTR, SCR=C_SCR, SCRSZ=C_SCRSZ,
            SCRST=C_SCRST, SCRN=C_SCRN)
PRELUDE = re.sub(r"i64 C_(\w+)\n", lambda m: f"i64 {_CTX[m.group(1)]}\n", PRELUDE)  # ctx slots by name
for _k, _v in dict(LDS_MASK=(1 << LDS_BITS) - 1, LDS_SHIFT=LDS_SHIFT, F_GLOBAL=F_GLOBAL, F_LDSOFF=F_LDSOFF,
                   F_SCROFF=F_SCROFF, F_SCRSLOT=F_SCRSLOT,
                   TB_CTX=f"!{TBAA_BASE + 2 * TBAA_FIXED.index('ctx') + 1}",  # (Fn.tbaa's numbering)
                   TB_TBL=f"!{TBAA_BASE + 2 * TBAA_FIXED.index('tbl') + 1}").items():
  PRELUDE = PRELUDE.replace(_k, str(_v))

_SYMBOL = re.compile(r"@([\w.$]+)")


def _entities(text: str) -> dict[str, tuple[str, set[str]]]:
  """The top-level entities of IR text (declarations, definitions, globals; comments dropped), in order: name ->
  (its text, the symbols it refers to)."""
  out, lines, i = {}, text.splitlines(), 0
  while i < len(lines):
    line, j = lines[i], i
    if line.startswith("define "):
      while lines[j] != "}":
        j += 1
    if line.startswith(("declare ", "define ", "@")):
      name = _SYMBOL.search(line).group(1)
      body = "\n".join(lines[i:j + 1])
      out[name] = (body, set(_SYMBOL.findall(body)) - {name})
    i = j + 1
  return out


_PRELUDE = _entities(PRELUDE)


def prelude(body: str) -> str:
  """The part of PRELUDE a module whose own text is `body` refers to, directly or through it (a block calls a few
  of its helpers: parsing the rest, only for LLVM to drop it, was most of a small block's compile)."""
  todo, need = [n for n in set(_SYMBOL.findall(body)) if n in _PRELUDE], set()
  while todo:
    n = todo.pop()
    if n not in need:
      need.add(n)
      todo += [r for r in _PRELUDE[n][1] if r in _PRELUDE]
  return "".join(t + "\n" for n, (t, _) in _PRELUDE.items() if n in need)


_LOCAL = threading.local()


def _llvm():
  """(llvmlite.binding, an LLVM context and a target machine of this thread): the tier's IR work, on the background
  compile thread too, never shares LLVM's global context or a target machine with other threads (the compiler's
  llvmlite backends use them)."""
  mine = getattr(_LOCAL, "llvm", None)
  if mine is None:
    llvm, _, _ = native()  # (initialises the host target)
    mine = _LOCAL.llvm = (llvm, llvm.create_context(), backend.target_machine())
  return mine


def parse(text: str):
  """The LLVM module of IR text, verified (RuntimeError: LLVM rejects it, a code generator bug)."""
  llvm, ctx, _ = _llvm()
  mod = llvm.parse_assembly(text, context=ctx)
  mod.verify()
  return mod


def emit(mod, lean: bool = False) -> bytes:
  """Optimise a parsed module; its host object code (what the disk cache keeps): the O2 pipeline without unrolling,
  or for a `lean` (cold) block (tier.py) a few passes and LLVM's fast instruction selector: the always-inliner, then
  per function SROA, simplifycfg and DCE. That compiles ~3x cheaper than O1 (whose cost is spread over dozens of
  passes, the block's inlined body being most of the module), its lane loops stay scalar (no loop vectoriser): the
  code runs ~2x slower than O1's, ~4x the full compile's, which replaces it once the block is hot. (instcombine
  would make it ~15% faster for ~20% more compile time: gfx1100 matmul's lean blocks 312 vs 358 ms a launch, the
  reduction's compile 3.6 vs 2.9 ms per vector instruction; a cold block runs too little to earn that back.)"""
  llvm, _, tm = _llvm()
  if not lean:
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pto.loop_unrolling = pto.loop_interleaving = False  # halves compile time; the lane loops still vectorise
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return backend.checked(tm.emit_object(mod))
  tm = getattr(_LOCAL, "fast", None)
  if tm is None:
    tm = _LOCAL.fast = backend.target_machine(opt=0)
  pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
  mpm = llvm.create_new_module_pass_manager()
  mpm.add_always_inliner_pass()
  mpm.add_global_dead_code_eliminate_pass()
  mpm.add_post_order_function_attributes_pass()  # (nounwind, as O1 infers it: no unwind tables in the object)
  mpm.run(mod, pb)
  fpm = llvm.create_new_function_pass_manager()
  for add in (fpm.add_sroa_pass, fpm.add_simplify_cfg_pass, fpm.add_dead_code_elimination_pass):
    add()
  for fn in mod.functions:
    if not fn.is_declaration:
      fpm.run(fn, pb)
  return backend.checked(tm.emit_object(mod))


# per instruction, in a block's %hints array (codegen, tensor): the region its last access hit, the probed contiguous
# base, the probe's answer and the lowest and highest effective address it found (a later access from the same address
# registers reuses them, moved by its offset: plan.owners)
HINT_REGION, HINT_BASE, HINT_PROBE, HINT_LO, HINT_HI, HINTS = 0, 1, 2, 3, 4, 5


BLOCK_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def load(obj: bytes, name: str, ftype=BLOCK_TYPE):
  """Link object code (emit's, checked) into the process's MCJIT engine and return its function `name` as `ftype`; a
  block's (ctx, waves, wave count) returns 0, or 1 + the index of the instruction a fault stopped at."""
  llvm, _, ee = native()
  ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
  ee.finalize_object()
  addr = ee.get_function_address(name)
  if not addr:
    raise RuntimeError(f"{name} is not in its object code")
  return ftype(addr)


def _regions(mem):
  """(change key, [[va, end, host address], ...]) of the guest memory the native code may touch directly, or None
  for an address space it does not know (then the program stays interpreted). Two kinds: emu's GuestMemory
  (numpy buffers) and the mock KFD's GPU VM (buffer objects in host memory; a freed BO is left out, so touching it
  faults)."""
  if hasattr(mem, "starts") and hasattr(mem, "bufs"):  # (keyed by host addresses: an id() can be reused)
    rows = [(s, s + len(b), b.ctypes.data) for s, b in zip(mem.starts, mem.bufs)]
    return tuple(rows), rows
  table = getattr(getattr(mem, "vm", None), "table", None)
  if table is None:
    return None
  starts, ends, maps = table()
  rows = [[m.va, min(m.end, m.va + m.bo.size), m.bo.addr] for m in maps if m.bo.host is not None or m.bo.user_addr]
  return (id(starts), len(rows), tuple(r[2] for r in rows)), rows


class Native:
  """Per-Engine native state: the ctx array the compiled blocks read and write, rebuilt when arrays change."""

  def __init__(self, eng):
    self.eng = eng
    self.ctx = np.zeros(C_N, np.int64)
    self.all = np.arange(eng.W, dtype=np.int64)
    self.at = (self.ctx.ctypes.data, self.all.ctypes.data)  # (their addresses, for every block's call)
    self.wg = np.ascontiguousarray(eng.wg, dtype=np.int64)
    self.regions = np.zeros((0, 3), np.int64)
    self.key = None
    # per warp: the lanes a block's tail took (branched, exited), in 64-bit words (codegen's lane masks)
    self.taken = np.zeros((eng.W, mask_bits(eng.L) // 64), np.uint64)
    self.log = None  # the LDS access log of blocks with Block.sites
    self.ran = 0  # per-thread PCs: the guard classes of the last block that ran for some thread (bit c: class c,
    # codegen.guard_classes), over all the waves it ran for
    self.res = None  # the bound-buffer tables this table was made from (buffers)
    e, c = eng, self.ctx
    c[C_TAKEN] = self.taken.ctypes.data
    c[C_V], c[C_S], c[C_A] = e.V.ctypes.data, e.S.ctypes.data, e.A.ctypes.data  # (A: V's strides)
    c[C_VSTW], c[C_VSTR], c[C_VROWS] = e.V.strides[0], e.V.strides[1], e.V.shape[1]
    c[C_SSTW], c[C_SSTR] = e.S.strides[0], e.S.strides[1]
    c[C_SCC], c[C_PC], c[C_WG] = e.scc.ctypes.data, e.pc.ctypes.data, self.wg.ctypes.data
    c[C_CLOCK], c[C_HW] = e.clock.ctypes.data, e.HW.ctypes.data
    c[C_LDS], c[C_LDSZ] = e.lds.buf.ctypes.data, e.lds.size
    sc = e.scratch  # one slot per lane (core.Engine.run_scratch): 2**shift apart in addresses, `size` bytes stored
    c[C_SCR], c[C_SCRSZ], c[C_SCRST], c[C_SCRN] = sc.buf.ctypes.data, sc.size, sc.shift, e.W * e.L
    assert e.scc.dtype == np.uint32 and e.pc.dtype == e.clock.dtype == np.int64 and e.V.strides[2] == 4 and \
        e.A.strides == e.V.strides and e.HW.strides == e.S.strides
    self.buffers()
    self.rebind()

  def buffers(self) -> None:
    """The launch's bound-buffer tables (Engine.res, binding.Buffer) for the native code: ctx[C_RES] points to
    [kind][index] (guest address, bytes) rows, kind in the frontend's `buffers` order, index below ctx[C_RESN]
    (an unbound index: bytes -1, so every access faults). Remade when the tables change."""
    kinds, res = getattr(self.eng.fe, "buffers", ()), getattr(self.eng, "res", None) or {}
    snap = tuple(tuple(sorted(res.get(k, {}).items())) for k in kinds)
    if snap == self.res:
      return
    n = 1 + max((i for t in snap for i, _ in t), default=-1)
    tbl = np.zeros((max(len(kinds), 1), max(n, 1), 2), np.int64)
    tbl[:, :, 1] = -1
    for k, t in enumerate(snap):
      for i, (va, size) in t:
        tbl[k, i] = (va, size)
    self.res, self.res_tbl = snap, tbl
    self.ctx[C_RES], self.ctx[C_RESN] = tbl.ctypes.data, n

  def rebind(self) -> None:
    """The engine's address space (a restarted engine may serve another dispatch's)."""
    mem = self.eng.mem
    self.ok, self.key, self.version = _regions(mem) is not None, None, None
    # an address space shared with a CPU thread (the mock KFD's VM) is held still while native code runs on it
    self.hold = getattr(getattr(mem, "vm", None), "held", None) or contextlib.nullcontext()

  def refresh(self) -> None:
    v = getattr(self.eng.mem, "version", None)  # (GuestMemory: unchanged since the last look, no table to build)
    if v is not None and v == self.version:
      return
    self.version = v
    key, rows = _regions(self.eng.mem)
    if key != self.key:
      self.key = key
      self.regions = np.array(rows or [[0, 0, 0]], np.int64)
      self.ctx[C_NREG] = len(rows)
      self.ctx[C_REGS] = self.regions.ctypes.data

  def run(self, blk: Block, ix) -> None:
    eng, c = self.eng, self.ctx
    if blk.na > eng.A.shape[1]:  # (Tier.block declines it: AccVGPRs past the allocation)
      raise GputwinError(f"native block at {blk.pc:#x} reaches AccVGPR {blk.na - 1} of {eng.A.shape[1]}")
    whole = isinstance(ix, slice)
    waves = self.all if whole else np.ascontiguousarray(ix, dtype=np.int64)
    c[C_FAULT] = c[C_LANES] = c[C_RAN] = c[C_PRIV] = 0
    c[C_IEEE] = eng.ieee
    if getattr(eng, "res", None) is not None:
      self.buffers()
    for file, rows in blk.wrote.items():
      eng.written[file] |= rows
    if blk.private:  # (as core.Engine.run_scratch: the next restart clears the window; flat accesses: C_PRIV)
      eng.scratch_used = True
    if blk.sites:  # [wave, site, lane] addresses for the race checker (the code clears each wave's rows first)
      need = eng.W * len(blk.sites) * eng.L
      if self.log is None or self.log.size < need:
        self.log = np.empty(need, np.uint32)
        c[C_LOG] = self.log.ctypes.data
    init = None
    if eng.pending is not None:  # the batch's first block (every wave): each wave's deferred setup goes first
      rows, v0 = eng.pending
      tpl = None if v0 is None else np.ascontiguousarray(v0[0], np.uint32)
      init = np.array([len(rows), 1 if v0 is None else v0[1], 0 if tpl is None else tpl.ctypes.data, *rows], np.int64)
      c[C_INIT] = init.ctypes.data
    with self.hold:
      self.refresh()
      try:
        r = blk.fn(self.at[0], self.at[1] if whole else waves.ctypes.data, len(waves))
      finally:
        c[C_INIT] = 0
    STATS["runs"] += 1
    eng._exec, self.ran = None, int(c[C_RAN])
    if c[C_PRIV]:
      eng.scratch_used = True
    if r:  # waves before the faulting one ran the whole block, it ran r - 1 instructions, the rest none
      done, w = r - 1, int(c[C_FWAVE])
      k = int(np.flatnonzero(waves == w)[0])
      if init is not None:
        eng.settle(waves[k + 1:])  # (the waves the fault kept from starting)
        eng.pending = None
      op = blk.ops[done]
      eng.count += k * blk.n + done
      eng.native_count += k * blk.n + done
      eng.lane_count += int(c[C_LANES])
      eng.clock[waves[:k]] += blk.n
      eng.clock[w] += done
      e = self.fault(op)
      raise Stop("fault", str(e), w, op, e)
    eng.pending = None
    eng.lane_count += int(c[C_LANES])
    self.counted(ix, blk.n)

  def counted(self, ix, n: int = 1) -> None:
    """Waves `ix` ran `n` instructions natively: a block's, or (n = 1) the barrier a block ends with, for warps none
    of whose threads ran the block (core._hammock: the scheduler moved them there)."""
    eng, k = self.eng, self.eng.nwaves(ix)
    STATS["wave_instructions"] += n * k
    eng.count += n * k
    eng.native_count += n * k
    eng.clock[ix] += n

  def fault(self, op: Op) -> GPUPageFault:
    c, eng = self.ctx, self.eng
    kind, addr, nb = int(c[C_FAULT]), int(c[C_FADDR]) & 0xffffffffffffffff, int(c[C_FBYTES])
    access = "write" if c[C_FWRITE] else "read"  # of the faulting access
    whole = "read" if "r" in getattr(op.sem, "mem", "r") else "write"  # (the interpreter checks all first)
    if kind == F_LDSBASE:
      return GPUPageFault(addr, 4, whole, eng.lds.device, f"LDS address past the {eng.lds.size}-byte allocation")
    if kind == F_LDSOFF:
      return GPUPageFault(addr, nb, access, eng.lds.device, f"LDS offset past its {eng.lds.size}-byte allocation")
    if kind == F_SCROFF:
      return GPUPageFault(addr, nb, access, eng.scratch.device,
                          f"scratch offset past its {eng.scratch.size}-byte allocation")
    if kind == F_LANE:  # (a VGPR by lane number past the wave: the interpreter's re-run raises its own error first)
      return GPUPageFault(addr, nb, access, "", f"VGPR lane {addr} past the {eng.L}-lane wave")
    if kind == F_SCRSLOT:  # (the interpreter's window has no such slot either: its own error comes from the re-run)
      return GPUPageFault(addr, nb, access, eng.scratch.device, "scratch address past the last lane's slot")
    return GPUPageFault(addr, 4 if kind == F_HIGH else nb, whole if kind == F_HIGH else access,
                        getattr(eng.mem, "device", ""))
