"""Launching an ir3 compute shader on the shared machine: Mesa ir3 compiler output (`name.bin` with its listing
`name.txt` beside it, read by gputwin.isa.ir3.listing) or our own assembler's output with its metadata given as a
`Shader`, run over a grid of workgroups in waves of 64 or 128 fibers (per-fiber PCs: core.run_simt).

    stats = launch("kernels/a630/saxpy.bin", "main", grid=(n // 64, 1, 1), args={0: x, 1: y, 4: ubo}, arch="a630")

`args` maps a GLSL binding (set 0) to a numpy array: SSBOs are bound as IBOs of that index (the `.base0` bindless
descriptor index; a writeable C-contiguous array is mapped in place, others copied in and back), UBOs (the blocks the
listing's ubo_state names) are read-only: the driver's push of their ranges to the const file (a6xx) or the
preamble's `ldc.k` (a7xx) reads them. What a driver uploads before the launch is written here: the `@const`
immediates, the pushed UBO ranges, `struct ir3_driver_params_cs` at its offset, the local invocation id (per fiber)
and the workgroup id (shared registers) where the listing's inputs say. An a7xx prologue (`shps` ... `shpe`: Mesa's
preamble) runs once per dispatch, as on the hardware: one wave of the first workgroup runs it, then every wave starts
at shps's target with the const file it wrote.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gputwin.emu import batches, core
from gputwin.emu.checks import Checks
from gputwin.emu.ir3 import FRONTEND
from gputwin.emu.ir3.decode import CONST, CONST_DWORDS, EN, G0, GPR_ROWS, IBO_SIZE, IBO_SLOTS, prologue, reg, regname
from gputwin.emu.memory import GuestMemory
from gputwin.emu.program import Program, Src
from gputwin.errors import GputwinError, LaunchError
from gputwin.isa.ir3 import listing
from gputwin.isa.ir3.asm import assemble_line
from gputwin.isa.kernargs import LaunchStats, three

ARCHES = ("a630", "a660", "a730", "a740")  # a6xx/a7xx: merged registers, bindless IBOs
SHARED_LIMIT = 32 << 10  # bytes of shared memory per workgroup (Mesa's a6xx compute limit)
SPARE_BYTES = 256 << 20  # register files up to this size are kept for the next launch of the code (_Code.spare)


def load(code, arch: str | None, shader: listing.Shader | None) -> tuple[bytes, listing.Shader]:
  """(machine code, metadata): a `.bin` path (its `.txt` listing beside it, unless `shader` is given), or bytes /
  assembly text of our own with `shader` (default: Shader.explicit's conventions)."""
  if isinstance(code, (str, Path)) and "\n" not in str(code) and str(code).endswith((".bin", ".txt")):
    p = Path(code).with_suffix(".bin")
    try:
      data = p.read_bytes()
    except OSError as e:
      raise LaunchError(f"cannot read {p}: {e.strerror}") from None
    shader = shader or listing.read(p)
  elif isinstance(code, (bytes, bytearray)):
    data = bytes(code)
  else:
    from gputwin.isa.ir3 import assemble
    data = assemble(str(code), arch or (shader.gpu if shader else "a630"))
  if shader is None:
    shader = listing.Shader.explicit(arch or "a630", data)
  if len(data) % 8:
    raise LaunchError(f"ir3 code is {len(data)} bytes, not a whole number of 64-bit instructions")
  return data, shader


def launch(code, kernel: str = "main", *, grid, block=None, args: dict | None = None, arch: str | None = None,
           shader: listing.Shader | None = None, serial: bool = False, checks=True, trace=None,
           max_instructions: int | None = None) -> LaunchStats:
  """Run the shader over `grid` workgroups of its local size (`block`, when given, must equal it; a shader compiled
  with a variable local size (`local_size=None`) takes it). `args`: {binding: ndarray}, or for a shader with
  `params` (gputwin.compiler's) the kernel's positional argument list."""
  data, sh = load(code, arch, shader)
  arch = arch or sh.gpu
  if arch not in ARCHES:
    raise LaunchError(f"unknown Adreno target {arch!r} for the emulator; expected one of {', '.join(ARCHES)}", arch)
  where = f"[{arch}] kernel {kernel}"
  try:  # (a variable local size takes `block`; a positional args list binds by the shader's params)
    sh, args = sh.bind(args, block, where)
  except LaunchError as e:
    raise LaunchError(str(e), arch, kernel) from None
  if sh.shared_size > SHARED_LIMIT:
    raise LaunchError(f"{where}: {sh.shared_size} bytes of shared memory exceed {SHARED_LIMIT}", arch, kernel)
  grid = three(grid, "grid")
  mem = GuestMemory(arch)
  ubo_blocks = {r.block for r in sh.ubo_ranges}
  res, copies = {"ibo": {}, "ubo": {}}, []
  t0 = time.perf_counter()
  try:
    if not isinstance(args or {}, dict) or not all(isinstance(b, (int, np.integer)) and 0 <= b < 1 << 16
                                                   for b in (args or {})):
      raise LaunchError(f"{where}: args maps GLSL bindings (ints >= 0) to arrays, got {args!r:.80}", arch, kernel)
    for b, a in sorted((args or {}).items()):  # every binding is addressable as IBO and UBO b; UBOs are read-only
      if not isinstance(a, np.ndarray):
        raise LaunchError(f"{where}: binding {b} must be a numpy array, got {type(a).__name__}", arch, kernel)
      res["ibo"][int(b)] = res["ubo"][int(b)] = (batches.place(mem, a, copies, read_only=b in ubo_blocks), a.nbytes)
    consts = sh.const_file(grid, {b: a for b, a in (args or {}).items() if b in ubo_blocks}, where)
    stats = run(data, sh, grid, mem, res, consts, kernel=kernel, arch=arch, serial=serial, checks=checks,
                trace=trace, max_instructions=max_instructions)
    for a, va, copied in copies:
      if copied and a.flags.writeable and a.nbytes:
        a[...] = np.frombuffer(mem.read_bytes(va, a.nbytes), np.uint8).view(a.dtype).reshape(a.shape)
  finally:
    for _, va, _ in copies:
      mem.unmap(va)
  stats.seconds = time.perf_counter() - t0
  return stats


def run(code: bytes, sh: listing.Shader, grid, mem, res: dict, consts: np.ndarray, *, kernel: str = "main",
        arch: str | None = None, serial: bool = False, checks=True, trace=None,
        max_instructions: int | None = None) -> LaunchStats:
  """Run machine code whose buffers already live in guest memory `mem` (a GuestMemory, or a mock GPU's address
  space): `res` binds IBOs and UBOs by index (`{"ibo": {i: (va, bytes)}, "ubo": {...}}`), `consts` is the whole
  const file (CONST_DWORDS words: what a driver or command processor uploaded). The launch's inputs (local and
  workgroup ids) go where the shader's `inputs` say. A command processor calls this with the state it was given."""
  arch = arch or sh.gpu
  grid, block = three(grid, "grid"), tuple(sh.local_size)
  L = sh.wave_size
  threads = block[0] * block[1] * block[2]
  nw = -(-threads // L)
  entry = _code(bytes(code), arch, L)
  prog, nrows = entry.prog, entry.rows
  nrows = max([nrows] + [reg(i.reg + 2).index + 1 for i in sh.inputs if reg(i.reg).file == "v"])  # (+ the inputs)
  if nrows > GPR_ROWS:
    raise LaunchError(f"[{arch}] kernel {kernel}: an input register is outside r0.x-r47.w", arch, kernel)
  stats = LaunchStats(kernel, arch, wave_size=L)
  t0 = time.perf_counter()
  ncta = grid[0] * grid[1] * grid[2]
  per = max(1, core.MAX_WAVES // nw)
  priv = max(sh.pvtmem_size, 16)
  tr = [] if trace is not None else None
  shared = max(sh.shared_size, 4)

  def go(eng, c0: int, c1: int, nw: int, threads: int, dirty, pc: int) -> None:
    """One batch: workgroups c0..c1 of nw waves (their first `threads` fibers each) from `pc`."""
    eng.res = res
    _init(eng, sh, grid, block, c0, nw, threads, consts, dirty, pc)
    if tr is not None:
      eng.hooks.append(_tracer(tr, c0 * nw))
    st = batches.run(eng, stats, serial, max_instructions, c1, nw)
    if st is not None:
      _raise(st, eng, kernel, arch, c0, nw, grid)

  if entry.pre is not None:  # the prologue, once (_Code); a fault there names workgroup 0, wave 0
    pre = core.Engine(entry.pre, mem, 1, L, nrows, 1, shared, priv, np.zeros(1, np.int64), Checks.make(checks), arch)
    go(pre, 0, 0, 1, min(threads, L), None, 0)
    consts = pre.S[0, CONST:CONST + CONST_DWORDS].copy()
  c0, eng, dirty = 0, entry.take(), (-1, -1)  # (a spare from another launch: everything _init writes is stale)
  while c0 < ncta:
    c1 = min(ncta, c0 + per)
    W = (c1 - c0) * nw
    wg = np.repeat(np.arange(c1 - c0), nw)
    ck = Checks.make(checks)
    shape = (W, L, nrows, 1, shared, priv, arch)
    if eng is not None and eng.shape == shape:
      if c0:  # the rows the previous batch wrote: restart clears them, _init's are gone
        dirty = (eng.written["v"], eng.written["s"])
      # the previous batch's (or launch's) files: only the rows it wrote are cleared (VGPR rows by the native tier
      # per wave, in cache, right before its first instruction)
      eng.restart(wg, prog, mem, defer=tr is None and not serial, keep_v=_init_rows(sh))
      eng._batch(ck)  # (the checkers' state is the batch's own: fresh)
      eng.__dict__.pop("ir3_stack", None)  # (the call stacks: events.py makes them again)
    else:
      eng, dirty = core.Engine(prog, mem, W, L, nrows, 1, shared, priv, wg, ck, arch), None
    go(eng, c0, c1, nw, threads, dirty, entry.main)
    c0 = c1
  if eng is not None and sum(a.nbytes for a in eng.files.values()) <= SPARE_BYTES:
    eng.hooks = []
    entry.spare = eng  # the next launch of this shape starts on these register files
  stats.seconds = time.perf_counter() - t0
  batches.hand_back(stats, tr, trace)
  return stats


class _Code:
  """Machine code decoded for one target and wave size: its Program (bound lazily, kept across launches so its ops
  and native blocks are reused), the per-fiber rows its instructions name, and the register files of its last launch
  (`spare`: a launch takes them, the next batch of the same shape restarts them instead of allocating and zeroing
  every file again). Code that opens with a prologue has it as a program of its own too (`pre`: the instructions
  before the main shader, then an `end` where the main shader starts) and the main shader's PC (`main`, else 0).
  `run` runs the prologue once, as the hardware does (shps: the first wave falls through, the others jump to its
  target), in the first wave of workgroup 0 with that wave's inputs; its `ldc.k`/`stc` write the const file every
  wave then starts with, its instructions (the `end` too) count in the launch; its other writes (registers, a1.x,
  p0.x) end with it: a compiler keeps nothing the main shader reads there (other waves never run it)."""

  def __init__(self, code: bytes, arch: str, wave: int):
    self.prog = Program(code, 0, arch, "ir3", wave, FRONTEND)
    self.rows, self.spare = rows(self.prog), None
    self.main, self.pre = prologue(code, arch) or 0, None
    if self.main:
      end = assemble_line("end", arch).to_bytes(8, "little")
      self.pre = Program(code[:self.main] + end, 0, arch, "ir3", wave, FRONTEND)

  def take(self):
    with _LOCK:  # (a launch on another thread at the same time allocates its own)
      eng, self.spare = self.spare, None
    return eng


_CODES: OrderedDict = OrderedDict()  # (code digest, arch, wave size) -> _Code, least recently used out
_LOCK = threading.Lock()


def _code(code: bytes, arch: str, wave: int) -> _Code:
  key = (hashlib.sha1(code).digest(), arch, wave)
  with _LOCK:
    got = _CODES.pop(key, None)
    if got is None:
      got = _Code(code, arch, wave)
    _CODES[key] = got
    while len(_CODES) > 16:
      _CODES.popitem(last=False)
  return got


def program(code: bytes, arch: str, wave: int) -> tuple[Program, int]:
  """The decoded program of `code` and the per-fiber rows its instructions name (the file the launch allocates: G0 +
  the highest full register row any operand reaches, plus vector/(rptN)/movmsk/stc reach; all of r0-r47 when it
  addresses registers relatively)."""
  got = _code(code, arch, wave)
  return got.prog, got.rows


def rows(prog: Program) -> int:
  top = G0
  for pc in range(0, len(prog.text) - len(prog.text) % 8, 8):
    try:
      op = prog.op(pc)
    except GputwinError:  # (an undecodable word stops the launch if it runs)
      continue
    parts = op.info.get("parts", [op])
    if any("rel" in o.info or "dst_rel" in o.info for o in parts):
      return GPR_ROWS
    for o in parts:
      for x in [*o.ins.values(), *o.outs.values(), *(o.info.get(k) for k in ("base", "coord", "index", "ibo"))]:
        if isinstance(x, Src) and x.file == "v":
          top = max(top, x.index + x.dwords + 8)  # (+8: movmsk.w128's 4 registers, stc's N registers after S0)
  return min(top, GPR_ROWS)


def _init_rows(sh: listing.Shader) -> int:
  """The VGPR rows (a bit mask) _init writes whole: EN and the inputs there (restart leaves them to it)."""
  rows = 1 << EN
  for i in sh.inputs:
    for k in range(3):
      if i.compmask >> k & 1 and reg(i.reg + k).file == "v":
        rows |= 1 << reg(i.reg + k).index
  return rows


def _init(eng, sh: listing.Shader, grid, block, c0: int, nw: int, threads: int, consts: np.ndarray,
          dirty: tuple[int, int] | None = None, pc: int = 0) -> None:
  """Each fiber's initial state: alive, at `pc`, enabled; the inputs (local id per fiber, workgroup id per wave); the
  bound IBOs' sizes (what resinfo reads) and the const file. The rows it writes are left unmarked (Engine.mark), so a
  restart keeps them: a batch of the same launch (`dirty`: the VGPR / SGPR rows the previous one wrote; None: a new
  engine, all zero; -1: another launch's files) rewrites only those the shader wrote and the workgroup ids, which
  differ per batch; the const file up to the longer of its and the last launch's nonzero words (eng.const_top)."""
  W, L = eng.W, eng.L
  fresh, dirty = dirty is None, (-1, -1) if dirty is None else dirty
  gone = lambda rows, r, n=1: rows < 0 or rows >> r & ((1 << n) - 1)
  t = np.arange(nw)[:, None] * L + np.arange(L)[None, :]
  eng.start(pc, t < threads)  # (every fiber starts at pc: core.run_simt places them, eng.lpc need not be written)
  if gone(dirty[0], EN):
    eng.V[:, EN, :] = 1
  if gone(dirty[1], IBO_SIZE, 2 * IBO_SLOTS):  # (the launch's buffers: the same for each of its batches)
    sizes = np.zeros(IBO_SLOTS, np.uint64)  # (64 bits each; 0: nothing bound)
    for i, (_, nbytes) in eng.res.get("ibo", {}).items():
      if i < IBO_SLOTS:
        sizes[i] = nbytes
    eng.S[:, IBO_SIZE:IBO_SIZE + 2 * IBO_SLOTS] = sizes.view(np.uint32)
  # the const file, in every wave's scalar rows: its nonzero words on a new engine (zero) or after restart cleared
  # rows an event (stc, ldc.k) wrote; the other batches hold it still
  if gone(dirty[1], CONST, CONST_DWORDS):
    nz = np.flatnonzero(consts)
    top = int(nz[-1]) + 1 if nz.size else 0
    n = max(top, getattr(eng, "const_top", 0))  # (an earlier launch's words too: restart keeps _init's rows)
    eng.S[:, CONST:CONST + n] = consts[:n]
    eng.const_top = top
  cta = c0 + np.arange(W) // nw
  bx, by, _ = block
  gx, gy, _ = grid
  vals = {listing.LOCAL_ID: lambda k: ((t % bx, t // bx % by, t // (bx * by))[k]),
          listing.WORKGROUP_ID: lambda k: (cta % gx, cta // gx % gy, cta // (gx * gy))[k]}
  for inp in sh.inputs:
    if inp.sysval not in vals:
      raise LaunchError(f"[{eng.prog.arch}] system value {inp.sysval} in {inp.name} is not supported")
    for k in range(3):
      if inp.compmask >> k & 1:
        s = reg(inp.reg + k)
        if inp.sysval == listing.LOCAL_ID and not gone(dirty[s.file == "s"], s.index):
          continue  # (the same in every batch: still there)
        v = np.asarray(vals[inp.sysval](k))
        if fresh and not v.any():  # (a new engine's row is zero already)
          continue
        if s.file == "s":  # a per-wave value (a local id there would be meaningless)
          eng.S[:, s.index] = v if v.ndim == 1 else 0
        elif v.ndim == 2:  # per fiber of a workgroup, the same in every workgroup
          eng.V[:, s.index, :].reshape(-1, nw, L)[:] = v
        else:
          eng.V[:, s.index, :] = v[:, None]
  if eng.checks is not None:  # the inputs and the whole const file (the driver uploads it) count as written
    regs = [reg(i.reg + k) for i in sh.inputs for k in range(3) if i.compmask >> k & 1]
    eng.checks.initial(eng, 0, [EN] + [r.index for r in regs if r.file == "v"],
                       [r.index for r in regs if r.file == "s"] + list(range(IBO_SIZE, IBO_SIZE + 2 * IBO_SLOTS)) +
                       list(range(CONST, CONST + CONST_DWORDS)))


def _raise(st: core.Stop, eng, kernel: str, arch: str, c0: int, nw: int, grid):
  """An executor stop as the public error naming workgroup, wave, fiber, PC and instruction."""
  w, lane = batches.stopped_at(st, eng)
  c = c0 + w // nw
  gx, gy, _ = grid
  where = f"workgroup ({c % gx},{c // gx % gy},{c // (gx * gy)}), wave {w % nw}, fiber {lane}"
  pc = st.op.pc if st.op is not None else int(eng.lpc[w, lane])
  text = st.op.text if st.op is not None else _word_text(eng.prog, pc, arch)
  batches.fail(st, arch, kernel, pc, text, where, c0 * nw + w, f"{pc:#x}")


def _word_text(prog, pc: int, arch: str) -> str:
  """The instruction word at `pc` as Mesa prints it (`raw 0x...` when nothing matches), or '?' outside the code."""
  from gputwin.isa.ir3 import disasm_word
  if not 0 <= pc <= len(prog.text) - 8:
    return "?"
  return disasm_word(int.from_bytes(prog.text[pc:pc + 8], "little"), arch)[0]


def _tracer(out: list, first: int):
  """(wave, PC, instruction, what it wrote): `r1.x=2a` when every fiber that ran it holds the same value, else
  `r1.x=fiber:value,...`."""
  def hook(eng, op, ix):
    m = eng._cur
    for j, w in enumerate(np.arange(eng.W)[ix]):
      parts = []
      for o in op.info.get("parts", [op]):
        for d in o.outs.values():
          if m is None or not m[j].any() or d.file == "k":
            continue
          lanes = np.nonzero(m[j])[0]
          vals = eng.V[w, d.index][lanes] if d.file == "v" else np.full(len(lanes), eng.S[w, d.index])
          if d.bits == 16:
            vals = (vals >> 16) if d.hi else vals & 0xffff
          parts.append(batches.written(regname(d), lanes, vals))
      out.append((first + int(w), op.pc, op.text, " ".join(parts)))
  return hook

