"""Launching a PTX kernel on the shared machine: the module parsed and laid out once (`Loaded`, cached by text), its
.global/.const variables placed in guest memory, the kernel's .param buffer packed from the arguments, and the grid
run in batches of whole CTAs (warps of 32 threads, per-thread PCs: core.run_simt).

    stats = launch(ptx, "saxpy", grid=(gx, gy, gz), block=(bx, by, bz), args=[out, x, np.float32(2), np.int32(n)],
                   arch="sm_90", shared_bytes=0)

Arguments (PTX ISA 9.0 5.1.6 "Kernel Function Parameters"): one per `.param` of the `.entry`, in order. A numpy
array becomes a guest buffer whose address fills a 64-bit param (a writeable C-contiguous array that overlaps no
other argument is mapped in place, as emu/api.py does; others are copied in before and back in place after); a
numpy scalar whose size matches the param is passed by its bits (nvcc declares `int` as `.u32`: np.int32(-3)
arrives as 0xfffffffd); a Python int fills an integer param (two's complement, or a device address for a pointer),
a Python float an `.f32`/`.f64` param; bytes fill a by-value struct (`.align 8 .b8 p[24]`).
"""
from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gputwin.emu import batches, core
from gputwin.emu.checks import Checks
from gputwin.emu.memory import GuestMemory
from gputwin.emu.program import Program
from gputwin.emu.ptx import FRONTEND, regs
from gputwin.emu.ptx.image import SPECIAL_ROW, Image
from gputwin.errors import LaunchError
from gputwin.isa.kernargs import LaunchStats, three

WARP = 32
# bytes of call stack per thread when the module calls functions: a call saves all of the callee's registers (ptxas
# saves only the live ones), so more than CUDA's default cudaLimitStackSize of 1 KiB
STACK = 16 << 10
SHARED_LIMIT = {"sm_80": 163 << 10, "sm_90": 227 << 10}  # max shared memory per CTA (opt-in), per the CUDA guide
ARCHES = ("sm_80", "sm_90")
NSM = {"sm_80": 108, "sm_90": 132}  # %nsmid: A100 / H100 SXM
BATCH_THREADS = 1 << 18  # threads per batch without shared memory and checkers (fewer, larger steps)
SPARE_BYTES = 256 << 20  # register files up to this size are kept for the next launch (Loaded.spare)


class Loaded:
  """A PTX module loaded into one guest memory: image, placed variables, the decoded program (bound lazily).
  `packed`: registers whose live ranges never overlap share rows (regs.pack; False: a row per register), for the
  entry kernels `kernels` (None: all), and for all of them once another is launched (`want`): a module's other
  kernels are analysed only if one runs, and its image and program are rebuilt at most once (a kernel's packing is
  its own: the first ones keep their rows)."""

  def __init__(self, text: str, path: str, arch: str, mem: GuestMemory | None = None, packed: bool = True,
               kernels=None):
    from gputwin.isa.ptx import parse
    if arch not in ARCHES:
      raise LaunchError(f"unknown NVIDIA target {arch!r}; expected one of {', '.join(ARCHES)}", arch)
    self.arch, self.mem = arch, mem or GuestMemory(arch)
    self.module = parse(text, path)
    self.image = Image(self.module)
    self.image.place(self.mem)
    self.image = self.image.local_rows() or self.image  # (each kernel's rows from the same base: smaller files)
    self.prog = Program(self.image.code, 0, arch, "ptx", WARP, FRONTEND)
    self._flat, self.packed_for = (self.image, self.prog) if packed else None, frozenset()
    self.spare = None  # the register files of the last launch (checkers off), restarted by the next of its shape
    self._pack(frozenset(n for n, f in self.image.functions.items() if f.kind == "entry" and
                         (kernels is None or n in kernels)))

  def want(self, kernel: str) -> None:
    """Before a launch of `kernel`: its registers packed too (every kernel's: a new packed image and program)."""
    if self._flat is not None and kernel not in self.packed_for and kernel in self._flat[0].functions:
      self._pack(frozenset(n for n, f in self._flat[0].functions.items() if f.kind == "entry"))

  def _pack(self, kernels: frozenset) -> None:
    if self._flat is None or not kernels:
      return
    flat, prog = self._flat
    img = regs.pack(flat, prog, kernels)
    self.image, self.prog = (img, Program(img.code, 0, self.arch, "ptx", WARP, FRONTEND)) if img else (flat, prog)
    self.packed_for, self.spare = kernels, None
    self.__dict__.pop("_first", None)  # (_written_first's rows: the layout's)


class _Modules:
  """Loaded modules by (text, target), least recently used out; a launch takes one out while it runs (a launch on
  another thread loads its own)."""

  def __init__(self, limit: int = 16):
    self.limit, self.lock, self.idle = limit, threading.Lock(), OrderedDict()

  def take(self, key) -> Loaded | None:
    with self.lock:
      return self.idle.pop(key, None)

  def give(self, key, lm: Loaded) -> None:
    with self.lock:
      self.idle[key] = lm
      while len(self.idle) > self.limit:
        self.idle.popitem(last=False)


def module_text(ptx) -> tuple[str, str]:
  """(text, path for messages) of a PTX module given as a path, str or bytes."""
  if isinstance(ptx, Path) or (isinstance(ptx, str) and "\n" not in ptx and ptx.endswith(".ptx")):
    try:
      return _read(str(ptx)), str(ptx)
    except OSError as e:
      raise LaunchError(f"cannot read {ptx}: {e.strerror}") from None
  if isinstance(ptx, (bytes, bytearray)):
    return bytes(ptx).decode(), "<ptx>"
  return str(ptx), "<ptx>"


_TEXTS: OrderedDict = OrderedDict()  # path -> (modification time, size, text) of module files (_read)


def _read(path: str) -> str:
  """A module file's text: read again unless its modification time and size are those of a read made over two
  seconds after that time (a later write then has a later one, however coarse the file system's clock)."""
  st = os.stat(path)
  got = _TEXTS.get(path)
  if got is not None and got[:2] == (st.st_mtime_ns, st.st_size):
    return got[2]
  text = Path(path).read_text()
  if time.time_ns() - st.st_mtime_ns > 2_000_000_000:
    _TEXTS[path] = (st.st_mtime_ns, st.st_size, text)
    while len(_TEXTS) > 16:
      _TEXTS.popitem(last=False)
  return text


@functools.lru_cache(maxsize=16)
def _digest(text: str) -> bytes:
  """A module text's key in MODULES (the same str object again: one dict lookup, not a hash of the text)."""
  return hashlib.sha1(text.encode()).digest()


MODULES = _Modules()


def launch(ptx, kernel: str, *, grid, block, args, arch: str = "sm_90", shared_bytes: int = 0, serial: bool = False,
           checks=True, trace=None, max_instructions: int | None = None) -> LaunchStats:
  """Run `kernel` of PTX module `ptx` (a path, or its text as str/bytes) over `grid` CTAs of `block` threads."""
  text, path = module_text(ptx)
  key = (_digest(text), arch)
  lm = MODULES.take(key) or Loaded(text, path, arch, kernels=(kernel,))
  try:
    return run(lm, kernel, grid=grid, block=block, args=args, shared_bytes=shared_bytes, serial=serial,
               checks=checks, trace=trace, max_instructions=max_instructions)
  finally:
    MODULES.give(key, lm)


def run(lm: Loaded, kernel: str, *, grid, block, args=(), shared_bytes: int = 0, serial: bool = False, checks=True,
        trace=None, max_instructions: int | None = None, params: bytes | None = None) -> LaunchStats:
  """Run `kernel` of a loaded module. `params`: the kernel's .param buffer as bytes, used instead of packing `args`
  (a command processor passes what the launch put in constant bank 0)."""
  lm.want(kernel)
  img, arch, mem = lm.image, lm.arch, lm.mem
  fn = img.functions.get(kernel)
  if fn is None or fn.kind != "entry":
    raise LaunchError(f"[{arch}] no kernel {kernel!r} in the module; it has: "
                      f"{', '.join(sorted(n for n, f in img.functions.items() if f.kind == 'entry')) or 'none'}",
                      arch, kernel)
  grid, block = three(grid, "grid"), three(block, "block")
  threads = block[0] * block[1] * block[2]
  where = f"[{arch}] kernel {kernel}"
  if threads > 1024:
    raise LaunchError(f"{where}: a CTA of {threads} threads exceeds 1024", arch, kernel)
  static, dynamic = img.shared_size(kernel)  # (a module's other kernels' shared variables are not this CTA's)
  shared = img.dynamic_offset + int(shared_bytes) if (dynamic or shared_bytes) else static
  if shared > SHARED_LIMIT[arch]:
    raise LaunchError(f"{where}: {shared} bytes of shared memory per CTA exceed {arch}'s {SHARED_LIMIT[arch]}",
                      arch, kernel)
  copies: list = []
  stats = LaunchStats(kernel, arch, wave_size=WARP)
  t0 = time.perf_counter()
  try:
    if params is None:
      params = _params(fn, list(args), mem, copies, where)
    mem.write_bytes(img.param_va, bytes(params)[:fn.param_size])  # the module's .param buffer
    nw = -(-threads // WARP)
    ncta = grid[0] * grid[1] * grid[2]
    priv = img.frame_base + -(-fn.frame_size // 16) * 16 + (STACK if img.calls else 0)
    stride = core.scratch_stride(max(priv, 16))
    # CTAs per batch: shared-memory addresses carry a 12-bit CTA slot (core.MAX_WAVES warps); without shared memory,
    # batches of up to 2**18 threads (fewer, larger steps); local memory bounded to 256 MiB a batch
    warps = core.MAX_WAVES if shared else max(core.MAX_WAVES, BATCH_THREADS // WARP)
    per = max(1, min(warps // nw, (256 << 20) // max(1, nw * WARP * stride)))
    tr = [] if trace is not None else None
    c0, eng, lm.spare = 0, lm.spare, None
    while c0 < ncta:
      c1 = min(ncta, c0 + per)
      W = (c1 - c0) * nw
      wg = _cta_of_warp(c1 - c0, nw)
      ck = Checks.make(checks)
      shape = (W, WARP, img.rows_for(fn), 1, max(shared, 4), max(priv, 16), arch)
      if eng is not None and eng.shape == shape and len(eng.wg) == W and (eng.wg is wg or np.array_equal(eng.wg, wg)):
        # the previous batch's (or launch's) register files: only the rows it wrote are cleared, those _init writes
        # not at all, and the rest per warp right before its first instruction when the native tier runs it
        eng.restart(wg, lm.prog, mem, defer=tr is None and not serial,
                    keep_v=_init_rows(img, fn) | _written_first(lm, fn))
        eng._batch(ck)  # (the checkers' state is the batch's own: fresh)
      else:
        eng = core.Engine(lm.prog, mem, W, WARP, img.rows_for(fn), 1, max(shared, 4), max(priv, 16), wg, ck, arch)
      _init(eng, img, fn, grid, block, c0, nw, threads, shared, shared_bytes, arch)
      if tr is not None:
        eng.hooks.append(_tracer(tr, c0 * nw))
      st = batches.run(eng, stats, serial, max_instructions, c1, nw)
      if st is not None:
        _raise(st, eng, kernel, arch, c0, nw, grid, block)
      c0 = c1
    if eng is not None and sum(a.nbytes for a in eng.files.values()) <= SPARE_BYTES:
      eng.hooks = []
      lm.spare = eng  # the next launch of this shape starts on these register files
    for a, va, copied in copies:
      if copied and a.flags.writeable and a.nbytes:
        v = mem.view(va, a.nbytes) if hasattr(mem, "view") else None  # (copied straight from guest memory)
        v = np.frombuffer(mem.read_bytes(va, a.nbytes), np.uint8) if v is None else v
        a[...] = v.view(a.dtype).reshape(a.shape)
  finally:
    for _, va, _ in copies:
      mem.unmap(va)
  stats.seconds = time.perf_counter() - t0
  batches.hand_back(stats, tr, trace)
  return stats


def _raise(st: core.Stop, eng, kernel: str, arch: str, c0: int, nw: int, grid, block):
  """An executor stop as the public error naming CTA, warp, thread, PC and instruction (with the CUDA source line
  when the PTX has `.loc`)."""
  w, lane = batches.stopped_at(st, eng)
  op = st.op if st.op is not None else eng.prog.op(int(eng.lpc[w, lane]))
  c, t = c0 + w // nw, (w % nw) * WARP + lane
  gx, gy, _ = grid
  bx, by, _ = block
  where = (f"CTA ({c % gx},{c // gx % gy},{c // (gx * gy)}), warp {w % nw}, thread ({t % bx},{t // bx % by},"
           f"{t // (bx * by)})")
  batches.fail(st, arch, kernel, op.pc, op.text, where, c0 * nw + w, str(op.pc))


def _params(fn, args: list, mem, copies: list, where: str) -> bytes:
  """The kernel's .param buffer from the arguments (gputwin.isa.ptx.params: arrays become guest buffers)."""
  from gputwin.isa.ptx.params import Param, pack

  def address(a):
    return batches.place(mem, a, copies) if isinstance(a, np.ndarray) else None
  return pack([Param(v.decl.name, v.decl.type, v.offset, v.size, bool(v.decl.dims)) for v in fn.params], args,
              address, where, fn.param_size)


@functools.lru_cache(maxsize=64)
def _cta_of_warp(ctas: int, nw: int) -> np.ndarray:
  """Each warp's CTA slot in a batch (one shared read-only array: a restarted engine keeps its native tier)."""
  wg = np.repeat(np.arange(ctas), nw)
  wg.flags.writeable = False
  return wg


def _init_rows(img: Image, fn) -> int:
  """The register rows (a bit mask) _init writes whole for every warp."""
  rows = 1 << fn.frame_row | 1 << img.sp_row
  for name in img.specials(fn.name):
    rows |= 1 << SPECIAL_ROW[name]
  return rows


def _written_first(lm: Loaded, fn) -> int:
  """Register rows (a bit mask) that every path of the kernel writes before it reads them: nothing can see what the
  previous batch left there, so a restarted engine need not clear them (regs.flow's liveness); rows read by a
  cross-lane body (another lane may not have written them) stay cleared; 0 for a module with calls or tensor
  operations (operands the analysis does not see). Worked out once per kernel."""
  got = lm.__dict__.setdefault("_first", {}).get(fn.entry)
  if got is not None:
    return got
  f = None if lm.image.calls else regs.flow(lm.prog, fn)
  if f is None:
    lm._first[fn.entry] = 0
    return 0
  ops, live = f
  crossed = 0
  for pc, (reads, _, _) in ops.items():
    op = lm.prog.op(pc)
    if op.sem is not None and op.sem.cross_lane:
      crossed |= reads
  got = lm._first[fn.entry] = ((1 << lm.image.rows) - 1) & ~live[fn.entry] & ~crossed
  return got


PER_CTA = {"%ctaid.x", "%ctaid.y", "%ctaid.z", "%smid", "%clusterid.x", "%clusterid.y", "%clusterid.z"}  # by batch


def _specials(grid, block, cta, warp, lane, t, nw: int, shared: int, dyn: int, arch: str) -> dict:
  """Special register -> a function of its values (PTX ISA 9.0 ch. 10 "Special Registers"): per thread of a CTA
  (nw, L), per CTA of the batch (CTAs, 1, 1), or one value."""
  bx, by, _ = block
  gx, gy, _ = grid
  return {"%tid.x": lambda: t % bx, "%tid.y": lambda: (t // bx) % by, "%tid.z": lambda: t // (bx * by),
          "%ntid.x": lambda: block[0], "%ntid.y": lambda: block[1], "%ntid.z": lambda: block[2],
          "%ctaid.x": lambda: (cta % gx)[:, None, None], "%ctaid.y": lambda: ((cta // gx) % gy)[:, None, None],
          "%ctaid.z": lambda: (cta // (gx * gy))[:, None, None], "%nctaid.x": lambda: grid[0],
          "%nctaid.y": lambda: grid[1], "%nctaid.z": lambda: grid[2], "%laneid": lambda: lane[None, :],
          "%warpid": lambda: warp[:, None], "%nwarpid": lambda: nw, "%smid": lambda: (cta % NSM[arch])[:, None, None],
          "%nsmid": lambda: NSM[arch], "%lanemask_eq": lambda: (1 << lane)[None, :],
          "%lanemask_lt": lambda: ((1 << lane) - 1)[None, :], "%lanemask_le": lambda: ((2 << lane) - 1)[None, :],
          "%lanemask_gt": lambda: (~((2 << lane) - 1) & 0xffffffff)[None, :],
          "%lanemask_ge": lambda: (~((1 << lane) - 1) & 0xffffffff)[None, :], "%dynamic_smem_size": lambda: dyn,
          "%total_smem_size": lambda: shared, "%nclusterid.x": lambda: grid[0], "%nclusterid.y": lambda: grid[1],
          "%nclusterid.z": lambda: grid[2], "%clusterid.x": lambda: (cta % gx)[:, None, None],
          "%clusterid.y": lambda: ((cta // gx) % gy)[:, None, None],
          "%clusterid.z": lambda: (cta // (gx * gy))[:, None, None],
          "%cluster_nctaid.x": lambda: 1, "%cluster_nctaid.y": lambda: 1, "%cluster_nctaid.z": lambda: 1,
          "%cluster_nctarank": lambda: 1}  # (%gridid, %cluster_ctaid.*, %cluster_ctarank: 0)


def _init(eng, img: Image, fn, grid, block, c0: int, nw: int, threads: int, shared: int, dyn: int, arch: str) -> None:
  """Each thread's initial state (PTX ISA 9.0 ch. 10 "Special Registers"): ids, sizes, lane masks, its PC, frame.
  Values per thread of a CTA are computed for one CTA (nw warps) and repeated over the batch's CTAs."""
  W, L = eng.W, eng.L
  warp = np.arange(nw)
  cta = c0 + np.arange(W)[::nw] // nw  # per CTA of the batch
  lane = np.arange(L)
  t = warp[:, None] * L + lane[None, :]  # (nw, L): thread index in the CTA
  eng.start(fn.entry, t < threads)  # every thread's PC: core.run_simt starts there without looking (and writes lpc)
  key = (id(img), fn.entry, tuple(grid), tuple(block), shared, dyn, nw, arch)
  same = eng.init_key is not None and eng.init_key[0] == key  # a restarted engine keeps these rows (keep_v)
  ctas = same and eng.init_key[1:] == (c0, W)  # and the per-CTA ones, for the same CTAs
  eng.init_key = (key, c0, W)
  todo = [n for n in img.specials(fn.name) if not ctas and (not same or n in PER_CTA)]  # (the ones its code reads;
  # a kernel cannot write special registers)
  if todo:
    vals = _specials(grid, block, cta, warp, lane, t, nw, shared, dyn, arch)
    for name in todo:
      v = vals[name]() if name in vals else 0  # per thread of a CTA (nw, L), per CTA (CTAs, 1, 1), or one value
      eng.V[:, SPECIAL_ROW[name], :].reshape(-1, nw, L)[:] = (np.asarray(v, np.int64) & 0xffffffff).astype(np.uint32)
  if not same or img.calls:  # (only calls move a thread's frame and stack pointer: kept by a restarted engine)
    eng.V[:, fn.frame_row, :] = img.frame_base
    eng.V[:, img.sp_row, :] = img.frame_base + -(-fn.frame_size // 16) * 16
  rows = _init_rows(img, fn)
  eng.written["v"] = eng.written["v"] | rows if eng.written["v"] >= 0 else -1
  if eng.checks is not None:  # what the launch wrote: special registers, frame, stack pointer, carry flag
    eng.checks.initial(eng, 0, list(range(len(SPECIAL_ROW))) + [fn.frame_row, fn.frame_row + 1, img.sp_row,
                                                                img.cc_row])


def _tracer(out: list, first: int):
  """(warp, PC, instruction, what it wrote) per warp-instruction: `%r5=2a` when every thread that ran it holds the
  same value, else `%r5=lane:value,...` (threads of the warp that did not run it are left out)."""
  def hook(eng, op, ix):
    m = eng._cur
    names = op.info.get("dnames", {})
    for j, w in enumerate(np.arange(eng.W)[ix]):
      parts = []
      for k, d in op.outs.items():
        if d.file != "v" or m is None or not m[j].any() or k not in names:
          continue
        lanes = np.nonzero(m[j])[0]
        vals = eng.V[w, d.index][lanes] if d.dwords == 1 else eng.join(eng.V[w, d.index:d.index + 2], 0)[lanes]
        parts.append(batches.written(names[k], lanes, vals))
      out.append((first + int(w), op.pc, op.text, " ".join(parts)))
  return hook
