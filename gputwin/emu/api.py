"""The emulator's API: `launch()` for the common case and the small object API (unicorn-like) for tools. An Emulator
owns guest memory, a code object and the register files its last dispatch left; `prepare` builds a Dispatch (every
wave's registers at its first instruction) that tools can peek/poke, single-step, hook and run.

    stats = launch("k.co", "fill", grid=4, block=256, args=[out, 7])
    emu = Emulator("k.co")
    d = emu.prepare("fill", grid=4, block=256, args=[out, 7])   # or kernarg=bytes for a raw launch
    d.reg(0, "v0"); d.set_reg(0, "s2", 7); d.hook(fn); d.step(); d.run(); d.finish()

Arguments follow gputwin.isa.kernargs (the rules every launcher shares); code objects and their decoded programs
live in one bounded cache (`CODE`), shared with the mock GPU's DISPATCH_DIRECT.
"""
from __future__ import annotations

import functools
import hashlib
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gputwin.emu import core
from gputwin.emu.checks import Checks
from gputwin.emu.memory import GuestMemory
from gputwin.emu.frontend import for_arch
from gputwin.emu.program import Program
from gputwin.emu.trace import write_trace
from gputwin.errors import CodeObjectError, EmuCheckError, EmuError, EmuFault, EmuTrap, LaunchError
from gputwin.isa.codeobj import CodeObject, load_code_object
from gputwin.isa.kernargs import LaunchStats, pack, read_code, segment_size, three
from gputwin.isa.targets import target
from gputwin.pcode import family_of

BATCH_LANES = core.MAX_WAVES * 64
HOST_ARCHES = ("x86_64", "aarch64")  # gputwin.emu.host (unicorn), imported on use
PACKET_SIZE, QUEUE_SIZE = 64, 256  # hsa_kernel_dispatch_packet_t; an (all-zero) amd_queue_t stand-in
# The default watchdog (max_instructions=None): wave-instructions per wave of a batch. 1M per wave is far past any
# kernel the emulator runs in reasonable time (a wave interprets ~0.1-1M instructions per second) and stops a
# runaway loop of one wave within seconds to a minute, deterministically on both tiers. Pass max_instructions= to
# choose another budget for the whole dispatch.
WATCHDOG_PER_WAVE = 1 << 20
# The dispatch packet's grid_size_x/y/z are u32 work-item counts (hsa_kernel_dispatch_packet_t).
MAX_GRID_ITEMS = (1 << 32) - 1
# Scratch per wave: COMPUTE_TMPRING_SIZE.WAVESIZE, 13 bits of 1 KiB on gfx9 (CDNA), 15 bits of 256 bytes on gfx11/12
# (LLVM's AMDGPU tests encode it as alignto(size * wave, 1024) / 1024 & 8191 and alignto(..., 256) / 256 & 32767).


def max_wave_scratch(arch: str) -> int:
  return 8191 * 1024 if target(arch).major < 10 else 32767 * 256


# LDS per workgroup, as clang-22 enforces it ("local memory (N) exceeds limit (65536)"; gfx950: 163840).
MAX_LDS = {"gfx950": 163840}



def launch(code_object, kernel: str, *, grid, block=None, args, arch: str | None = None, serial: bool = False,
           checks=True, trace=None, max_instructions: int | None = None, shared_bytes: int = 0,
           shader=None) -> LaunchStats:
  """Run `kernel` of `code_object` (bytes, a path to .co/.o/.s, or a CodeObject) over `grid` workgroups (x, y, z)
  of `block` work-items. `args` follow gputwin.isa.kernargs: numpy arrays become guest buffers (mapped in place
  when writeable, C-contiguous and overlapping no other argument; else copied in before and back after), ints are
  device addresses for pointers, numbers are packed by the metadata, an int byte count sizes a `__local` pointer.
  `serial`: one wave at a time (the oracle schedule). `checks`: True, False or a set of checker names (checks.py).
  `trace`: a list to append (wave, pc, instruction, registers written) records to, or a path to write them to.
  `max_instructions`: a watchdog on wave-instructions for the whole dispatch; None (default) gives each batch
  WATCHDOG_PER_WAVE wave-instructions per wave, so a runaway kernel stops with a located EmuError.
  Returns LaunchStats. Runs on an Emulator of `CODE` (one
  per code object, so a repeated launch reuses its register files).
  NVIDIA: `code_object` is a PTX module (a .ptx path, or its text), `arch` sm_80 or sm_90 (default sm_90), grid
  counts CTAs, block threads, `shared_bytes` the dynamic shared memory (gputwin.emu.ptx.launch).
  Adreno: `code_object` is Mesa ir3 output (a `.bin` path, its `.txt` listing beside it) or our assembler's (bytes or
  text, with `shader`: a gputwin.isa.ir3.listing.Shader), `arch` a630/a660/a730/a740, grid counts workgroups, `block`
  (optional) must be the shader's local size, `args` maps GLSL bindings to arrays (gputwin.emu.ir3.launch).
  Host CPUs: `arch` x86_64 or aarch64, `code_object` an ELF relocatable object (gputwin.compiler's host backend),
  run under unicorn (gputwin.emu.host.launch; `serial` and `checks` do not apply)."""
  if arch in HOST_ARCHES:
    from gputwin.emu.host import launch as launch_host
    if block is None or shared_bytes or shader is not None:
      raise LaunchError(f"[{arch}] a host kernel takes block=, and neither shared_bytes nor shader", arch, kernel)
    return launch_host(code_object, kernel, grid=grid, block=block, args=args, arch=arch, trace=trace,
                       max_instructions=max_instructions)
  if family_of(arch or "gfx1100") == "ir3" or str(code_object).endswith(".bin") and not isinstance(code_object, bytes):
    from gputwin.emu.ir3.launch import launch as launch_ir3
    if shared_bytes:
      raise LaunchError("shared_bytes is for PTX kernels; an ir3 shader's shared size is compiled in")
    return launch_ir3(code_object, kernel, grid=grid, block=block, args=args, arch=arch, shader=shader,
                      serial=serial, checks=checks, trace=trace, max_instructions=max_instructions)
  if block is None:
    raise LaunchError("block (work-items per workgroup) is required")
  if (arch or "").startswith("sm_") or is_ptx(code_object):
    from gputwin.emu.ptx.launch import launch as launch_ptx
    return launch_ptx(code_object, kernel, grid=grid, block=block, args=args, arch=arch or "sm_90",
                      shared_bytes=shared_bytes, serial=serial, checks=checks, trace=trace,
                      max_instructions=max_instructions)
  if shared_bytes:
    raise LaunchError("shared_bytes is for PTX kernels; an AMD kernel sizes dynamic LDS with a __local argument")
  emu = CODE.take(code_object, arch)
  try:
    return emu.launch(kernel, grid=grid, block=block, args=args, serial=serial, checks=checks, trace=trace,
                      max_instructions=max_instructions)
  finally:
    CODE.give(emu)


def is_ptx(code) -> bool:
  """Whether `code` is a PTX module: a .ptx path, or text whose first directive (after comments) is `.version`."""
  if isinstance(code, Path) or (isinstance(code, str) and "\n" not in code):
    return str(code).endswith(".ptx")
  if isinstance(code, (bytes, bytearray)):
    if b"\0" in code[:4096]:  # an ELF code object
      return False
    code = bytes(code[:4096]).decode("latin-1")
  if isinstance(code, str):
    first = next((x.strip() for x in code[:4096].splitlines() if x.strip() and not x.strip().startswith("//")), "")
    return first.startswith(".version")
  return False


class CodeCache:
  """Every decoded thing the emulator keeps between launches, in one place with one bound (`limit` entries per kind,
  least recently used out): code objects by content (bytes; a file by device, inode, mtime and size, so a repeated
  launch skips the read), decoded `Program`s by (text, address, target, wave size) for Emulators and the mock GPU's
  DISPATCH_DIRECT alike, and the idle Emulators of `launch()` (one per code object, at most `idle`: each keeps its
  register files)."""

  def __init__(self, limit: int = 64, idle: int = 2):
    self.limit, self.idle_limit, self.lock = limit, idle, threading.Lock()
    self.objects: OrderedDict = OrderedDict()
    self.programs: OrderedDict = OrderedDict()
    self.idle: OrderedDict = OrderedDict()

  def _get(self, table: OrderedDict, key, make, limit: int | None = None):
    with self.lock:
      if key in table:
        table.move_to_end(key)
        return table[key]
    v = make()
    with self.lock:
      v = table.setdefault(key, v)
      while len(table) > (limit or self.limit):
        table.popitem(last=False)
    return v

  def load(self, obj, arch: str | None = None) -> CodeObject:
    """bytes, a CodeObject, or a path to .co/.o/.s -> CodeObject (.s assembled by gputwin.isa)."""
    if isinstance(obj, CodeObject):
      return obj
    if not isinstance(obj, (str, Path)):
      data = bytes(obj)
      return self._get(self.objects, (hashlib.sha1(data).digest(), arch), lambda: load_code_object(data, arch=arch))
    p = Path(obj)
    try:
      st = p.stat()
    except OSError as e:
      raise CodeObjectError(f"cannot read: {e.strerror}", str(p)) from None
    return self._get(self.objects, (str(p), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, arch),
                     lambda: self._read(p, arch))

  def _read(self, p: Path, arch: str | None) -> CodeObject:
    raw, arch = read_code(p, arch)
    return self.load(raw, arch)

  def program(self, text: bytes, base: int, arch: str, wave: int) -> Program:
    """The decoded-once program of a code image (shared by every launch of any of its kernels)."""
    return self._get(self.programs, (hashlib.sha1(text).digest(), base, arch, wave),
                     lambda: Program(text, base, arch, family_of(arch), wave, for_arch(arch)))

  def take(self, code, arch: str | None) -> "Emulator":
    """The idle Emulator of a code object (a new one when none is idle: launches may run on several threads)."""
    co = self.load(code, arch)
    with self.lock:
      emu = self.idle.pop((id(co), arch), None)
    return emu or Emulator(co, arch=arch)

  def give(self, emu: "Emulator") -> None:
    self._get(self.idle, (id(emu.co), emu.requested), lambda: emu, self.idle_limit)

  def clear(self) -> None:
    with self.lock:
      self.objects.clear(), self.programs.clear(), self.idle.clear()


CODE = CodeCache()


def load(obj, arch: str | None = None) -> CodeObject:
  """bytes, a CodeObject, or a path to .co/.o/.s -> CodeObject (through `CODE`)."""
  return CODE.load(obj, arch)


class Emulator:
  def __init__(self, code=None, *, arch: str | None = None, memory: GuestMemory | None = None):
    self.co: CodeObject | None = CODE.load(code, arch) if code is not None else None
    if self.co is not None and arch and self.co.arch != arch:
      raise LaunchError(f"code object is for {self.co.arch}, not {arch}", arch)
    self.requested = arch
    self.arch = arch or (self.co.arch if self.co else None)
    if self.arch is not None:
      target(self.arch)
    self.mem = memory or GuestMemory(self.arch or "")
    self.spare = _Spare()  # the register files of this Emulator's last dispatch (checkers off)
    self.programs: dict[int, Program] = {}  # wave size -> the code object's decoded program (from CODE)

  def program(self, wave: int) -> Program:
    p = self.programs.get(wave)
    if p is None:
      p = self.programs[wave] = CODE.program(self.co.text, self.co.text_address, self.co.arch, wave)
    return p

  # ---- guest memory
  def alloc(self, nbytes: int) -> int:
    return self.mem.alloc(nbytes)

  def write(self, va: int, data) -> None:
    self.mem.write_bytes(va, np.ascontiguousarray(data) if isinstance(data, np.ndarray) else bytes(data))

  def read(self, va: int, n: int) -> bytes:
    return self.mem.read_bytes(va, n)

  # ---- dispatches
  def prepare(self, kernel: str, *, grid, block, args=(), kernarg: bytes | None = None, checks=True,
              serial: bool = False, trace=None, max_instructions: int | None = None) -> "Dispatch":
    if self.co is None:
      raise LaunchError("this Emulator has no code object", self.arch or "")
    if kernel not in self.co.kernels:
      raise LaunchError(f"[{self.arch}] no kernel {kernel!r} in the code object; it has: "
                        f"{', '.join(sorted(self.co.kernels)) or 'none'}", self.arch, kernel)
    return Dispatch(self, self.co.kernels[kernel], three(grid, "grid"), three(block, "block"), list(args), kernarg,
                    checks, serial, trace, max_instructions)

  def launch(self, kernel: str, *, grid, block, args=(), serial=False, checks=True, trace=None,
             max_instructions=None) -> LaunchStats:
    d = self.prepare(kernel, grid=grid, block=block, args=args, checks=checks, serial=serial, trace=trace,
                     max_instructions=max_instructions)
    try:
      d.run()
    finally:
      d.finish()
    return d.stats


class _Spare:
  """The register files of an Emulator's last finished dispatch (checkers off), kept for the next one of the same
  shape: Engine.restart clears only the rows it wrote, where allocating would clear (and page in) every file again."""

  def __init__(self, limit: int = 256 << 20):
    self.lock, self.eng, self.limit = threading.Lock(), None, limit

  def put(self, eng) -> None:
    if sum(a.nbytes for a in eng.files.values()) <= self.limit:
      with self.lock:
        self.eng = eng

  def take(self, shape):
    with self.lock:
      eng, self.eng = (self.eng, None) if self.eng is not None and self.eng.shape == shape else (None, self.eng)
    return eng


class Dispatch:
  """One kernel dispatch: guest buffers for the arguments, the dispatch packet, and batches of whole workgroups
  (at most core.MAX_WAVES waves each; BATCH_LANES lanes without LDS and checkers) that run one after another."""

  def __init__(self, emu: Emulator, kern, grid, block, args, kernarg, checks, serial, trace, max_instructions):
    self.emu, self.kern, self.grid, self.block = emu, kern, grid, block
    self.arch, self.name, kd = emu.co.arch, kern.name, kern.descriptor
    self.fe = for_arch(self.arch)  # the ISA frontend: ABI setup, apertures
    self.serial, self.max_instructions, self.checks = serial, max_instructions, checks
    self.trace_path = trace if isinstance(trace, (str, Path)) else None
    self.trace = [] if self.trace_path else trace
    self.L = 32 if kd.enable_wavefront_size32 else 64
    where = f"[{self.arch}] kernel {self.name}"
    if self.L not in target(self.arch).waves:
      raise LaunchError(f"{where} asks for wave{self.L}, which {self.arch} does not run", self.arch, self.name)
    threads = block[0] * block[1] * block[2]
    if threads > 1024:
      raise LaunchError(f"{where}: a workgroup of {threads} work-items exceeds 1024", self.arch, self.name)
    for i in range(3):
      if grid[i] * block[i] > MAX_GRID_ITEMS:
        raise LaunchError(f"{where}: grid x block = {grid[i] * block[i]} work-items in dimension {'xyz'[i]} exceeds "
                          f"{MAX_GRID_ITEMS} (the dispatch packet's grid_size is a u32)", self.arch, self.name)
    wave_scratch = kd.private_segment_fixed_size * self.L
    if wave_scratch > max_wave_scratch(self.arch):
      raise LaunchError(f"{where}: a private segment of {kd.private_segment_fixed_size} bytes per work-item is "
                        f"{wave_scratch} bytes per wave{self.L}, past the {max_wave_scratch(self.arch)} bytes a wave's "
                        "scratch can hold (COMPUTE_TMPRING_SIZE.WAVESIZE)", self.arch, self.name)
    mem = emu.mem
    self.copies: list[tuple[np.ndarray, int]] = []
    self.lds_size = -(-kd.group_segment_fixed_size // 16) * 16  # + dynamic LDS (`__local T *` arguments)
    self.queue_va, self.packet_va = mem.alloc(QUEUE_SIZE), mem.alloc(PACKET_SIZE)
    try:
      self.kernarg_va = self._kernargs(args, kernarg)
      if self.lds_size > MAX_LDS.get(self.arch, 65536):
        raise LaunchError(f"{where}: {self.lds_size} bytes of LDS (static + dynamic) exceed the "
                          f"{MAX_LDS.get(self.arch, 65536)} a workgroup can have on {self.arch}", self.arch, self.name)
    except BaseException:  # the Emulator lives on (launch() reuses it): give back what this dispatch mapped
      for va in [va for _, va, _ in self.copies] + [self.queue_va, self.packet_va]:
        mem.unmap(va)
      raise
    size = [grid[i] * block[i] for i in range(3)]
    header = 2 | 1 << 8 | 3 << 9 | 3 << 11  # KERNEL_DISPATCH, barrier, system acquire/release fences
    mem.write_bytes(self.packet_va, np.array([header, 1 + (size[1] > 1 or size[2] > 1) + (size[2] > 1), *block, 0],
                                             "<u2").tobytes()
                    + np.array([*size, kd.private_segment_fixed_size, self.lds_size], "<u4").tobytes()
                    + np.array([kern.kd_address, self.kernarg_va, 0, 0], "<u8").tobytes())
    self.prog = emu.program(self.L)
    self.nw = -(-threads // self.L)  # waves per workgroup
    self.nwg = grid[0] * grid[1] * grid[2]
    priv = max(kd.private_segment_fixed_size, 1)  # scratch: one slot per lane, addresses below 4 GiB, <= 256 MiB
    lane_slots = min((1 << 32) // core.scratch_stride(priv), (256 << 20) // priv)
    # LDS addresses carry the workgroup slot in 12 bits (core.MAX_WAVES); a kernel without LDS takes batches of up
    # to BATCH_LANES lanes (fewer, larger batches: Python's per-batch cost ~0.1 ms), as wave64 gets
    waves = core.MAX_WAVES if self.lds_size else max(core.MAX_WAVES, BATCH_LANES // self.L)
    self.per_batch = max(1, min(waves, lane_slots // self.L) // self.nw)
    self.next_wg, self.base_wave, self.eng, self.hooks, self.done, self.running = 0, 0, None, [], False, False
    self.stats = LaunchStats(self.name, self.arch, wave_size=self.L)
    self.t0 = time.perf_counter()
    self._next_batch()

  # ---- arguments -> kernarg segment (gputwin.isa.kernargs: the rules every launcher shares)
  def _kernargs(self, args, raw) -> int:
    if raw is not None:
      buf = bytearray(max(len(raw), segment_size(self.kern, self.arch)))
      buf[:len(raw)] = raw
    else:
      ka = pack(self.kern, args, self.grid, self.block, arch=self.arch, queue_va=self.queue_va,
                apertures=self.fe.apertures,
                pointer=lambda a: int.from_bytes(self._buffer(a), "little") if isinstance(a, np.ndarray) else None)
      buf, self.lds_size = ka.data, ka.lds_size
    va = self.emu.mem.alloc(len(buf))
    self.emu.mem.write_bytes(va, bytes(buf))
    return va

  def _buffer(self, a: np.ndarray) -> bytes:
    """A guest buffer for an array argument. A writeable C-contiguous array that overlaps no other argument is
    mapped in place (the kernel reads and writes the caller's memory, as a unified-memory GPU would: no copies);
    anything else is copied in, and back after the dispatch."""
    mem = self.emu.mem
    if isinstance(mem, GuestMemory) and a.flags.c_contiguous and a.flags.writeable and a.nbytes and \
       not any(np.may_share_memory(a, b) for b, _, _ in self.copies):
      va = mem.alloc(a.nbytes, buf=a.reshape(-1).view(np.uint8))
      self.copies.append((a, va, False))
    else:
      va = mem.alloc(a.nbytes)
      c = np.ascontiguousarray(a)
      mem.write_bytes(va, c.reshape(-1).view(np.uint8) if c.nbytes else b"")
      self.copies.append((a, va, True))
    return va.to_bytes(8, "little")

  # ---- waves: the ABI's initial state (AMDGPUUsage "Initial Kernel Execution State")
  def _next_batch(self) -> bool:
    if self.next_wg >= self.nwg:
      if self.eng is not None:
        self.emu.spare.put(self.eng)  # the next dispatch of this shape starts on its register files
      self.eng = None
      return False
    kd, g0 = self.kern.descriptor, self.next_wg
    self.next_wg = g1 = min(self.nwg, g0 + self.per_batch)
    W = (g1 - g0) * self.nw
    nv = min(512, (kd.granulated_workitem_vgpr_count + 1) * 8 + 8)
    shape = (W, self.L, nv, nv if self.prog.family == "cdna" else 1, self.lds_size, kd.private_segment_fixed_size,
             self.arch)
    checks, last = Checks.make(self.checks), self.eng
    mine = last is not None and last.shape == shape
    last = last if mine else self.emu.spare.take(shape)
    if last is not None:
      eng = last  # the previous batch's register files, only its written rows cleared
      # inside run(), the clears and v0 are left to each wave's start (the native tier does them in cache); the
      # SGPR rows init_waves rewrites for every wave are not cleared first (the same ones as this dispatch's last)
      eng.restart(_wave_groups(g1 - g0, self.nw), self.prog, self.emu.mem,
                  defer=self.running and not self.hooks and self.trace is None,
                  keep_s=eng.init_rows if mine else 0)
      eng._batch(checks)  # (the checkers' state is the batch's own: fresh)
    else:
      eng = core.Engine(self.prog, self.emu.mem, *shape[:6], _wave_groups(g1 - g0, self.nw), checks, self.arch)
    values = {"enable_sgpr_dispatch_ptr": self.packet_va, "enable_sgpr_queue_ptr": self.queue_va,
              "enable_sgpr_kernarg_segment_ptr": self.kernarg_va,
              "enable_sgpr_private_segment_size": kd.private_segment_fixed_size}
    user = self.fe.user_sgprs(kd, values)
    pre = np.frombuffer(self.emu.mem.read_bytes(self.kernarg_va + 4 * kd.kernarg_preload_spec_offset,
                                                4 * kd.kernarg_preload_spec_length), np.uint32)
    self.fe.init_waves(eng, kd, self.grid, self.block, g0, self.nw, user + pre.tolist(), self.kern.entry)
    eng.hooks = ([self._trace_hook] if self.trace is not None else []) + self.hooks
    self.base_wave, self.eng, self.counted = g0 * self.nw, eng, (0, 0, 0)
    return True

  def _trace_hook(self, eng, op, ix):
    """(wave, PC, instruction, 'reg=lane values' of the destination it wrote) per wave-instruction."""
    d = op.outs.get("D0")
    wrote = d is not None and d.file in "vas" and op.kind in ("alu", "mem", "matrix") and (
      op.sem is None or op.sem.outputs.keys() & {"D0", "D", "VDATA", "SDATA", "RETURN_DATA"})
    for w in np.arange(eng.W)[ix]:
      ch = ""
      if wrote:
        F = {"v": eng.V, "a": eng.A}.get(d.file)
        vals = F[w, d.index:d.index + d.dwords] if F is not None else eng.S[w, d.index:d.index + d.dwords]
        ch = f"{d.file}{d.index}=" + ",".join(f"{int(v):x}" for v in np.asarray(vals).reshape(-1))
      self.trace.append((self.base_wave + int(w), op.pc, op.text, ch))

  def hook(self, fn) -> None:
    """Call fn(engine, op, waves) after every executed instruction (waves: a slice or an index array)."""
    self.hooks.append(fn)
    if self.eng is not None:
      self.eng.hooks.append(fn)

  # ---- registers of the current batch: 'v3' (all lanes), 'a0', 's5', 'exec', 'vcc', 'm0', 'scc', 'pc'
  def reg(self, wave: int, name: str):
    self.eng.settle()
    e, w, (f, i) = self.eng, wave - self.base_wave, _reg(name)
    if f in "va":
      return (e.V if f == "v" else e.A)[w, i].copy()
    if f in ("s", "scc", "pc"):
      return int({"s": e.S[w, i], "scc": e.scc[w], "pc": e.pc[w]}[f])
    code = e.sp[f]
    return int(e.S[w, code]) | (int(e.S[w, code + 1]) << 32 if f != "m0" and e.L == 64 else 0)

  def set_reg(self, wave: int, name: str, value) -> None:
    self.eng.settle()
    e, w, (f, i) = self.eng, wave - self.base_wave, _reg(name)
    e.mark(f if f in "vas" else "s", i if f in "vas" else e.sp.get(f, 0), 2)
    if f in "va":
      (e.V if f == "v" else e.A)[w, i] = np.asarray(value).astype(np.uint32)
    elif f == "s":
      e.S[w, i] = int(value) & 0xffffffff
    elif f == "scc":
      e.scc[w] = int(value) & 1
    elif f == "pc":
      e.pc[w] = int(value)
    else:
      e.S[w, e.sp[f]] = int(value) & 0xffffffff
      if f != "m0" and e.L == 64:
        e.S[w, e.sp[f] + 1] = int(value) >> 32
    e._exec = None
    if e.checks is not None:
      e.checks.poked(e, w, f, i)

  # ---- running
  def step(self) -> bool:
    """One scheduler step (one instruction for one group of waves). False once the dispatch is done."""
    return self._go(1)

  def run(self) -> LaunchStats:
    self.running = True
    try:
      self._go(None)
    finally:
      self.running = False
    return self.stats

  def _go(self, steps) -> bool:
    while self.eng is not None:
      eng = self.eng
      try:
        left = self.max_instructions - self.stats.instructions if self.max_instructions is not None else \
          eng.W * WATCHDOG_PER_WAVE - eng.count  # the default watchdog: this batch's budget, less what it ran
        core.run(eng, self.serial, left, steps)
      except core.Stop as st:
        self._account(eng)
        if st.kind == "watchdog":
          st.msg = (f"more than {self.max_instructions} wave-instructions executed "
                    "(max_instructions, --max-instructions)"
                    if self.max_instructions is not None else
                    f"more than {eng.W * WATCHDOG_PER_WAVE} wave-instructions executed by a batch of {eng.W} waves "
                    f"(the default watchdog: {WATCHDOG_PER_WAVE} per wave; pass max_instructions= to run longer)")
        raise_stop(st, eng, self.name, self.arch, self.base_wave)
      self._account(eng)
      if steps is not None and eng.live.any():
        return True
      self._next_batch()
      if steps is not None:
        return self.eng is not None
    return False

  def _account(self, eng):
    st, done = self.stats, self.counted
    st.instructions += eng.count - done[0]
    st.lane_instructions += eng.lane_count - done[1]
    st.native_instructions += eng.native_count - done[2]
    self.counted = (eng.count, eng.lane_count, eng.native_count)  # of this batch, already in stats
    st.waves, st.workgroups = self.next_wg * self.nw, self.next_wg

  def finish(self) -> LaunchStats:
    """Copy buffers back into the caller's arrays, free the dispatch's guest memory, write the trace file."""
    if self.done:
      return self.stats
    self.done = True
    mem = self.emu.mem
    for a, va, copied in self.copies:
      if copied and a.flags.writeable and a.nbytes:
        raw = mem.view(va, a.nbytes) if isinstance(mem, GuestMemory) else None
        raw = np.frombuffer(mem.read_bytes(va, a.nbytes), np.uint8) if raw is None else raw
        a[...] = raw.view(a.dtype).reshape(a.shape)
    for va in [va for _, va, _ in self.copies] + [self.kernarg_va, self.queue_va, self.packet_va]:
      mem.unmap(va)
    self.stats.seconds = time.perf_counter() - self.t0
    if self.trace is not None:
      self.stats.trace = self.trace
    if self.trace_path:
      write_trace(self.trace_path, self.trace)
    return self.stats


@functools.lru_cache(maxsize=64)
def _wave_groups(groups: int, nw: int) -> np.ndarray:
  """Each wave's workgroup slot in a batch of `groups` workgroups of `nw` waves (one shared read-only array: a
  restarted engine sees the same object and keeps its native tier without comparing)."""
  wg = np.repeat(np.arange(groups), nw)
  wg.flags.writeable = False
  return wg


def _reg(name: str) -> tuple[str, int]:
  return (name, 0) if name in ("exec", "vcc", "m0", "scc", "pc") else (name[0], int(name[1:]))


def raise_stop(st: core.Stop, eng, kernel: str, arch: str, first_wave: int = 0):
  """Turn an executor stop into EmuFault / EmuTrap / EmuCheckError / EmuError naming where it happened (waves
  numbered across the dispatch: `first_wave` is the batch's first)."""
  op = st.op
  pc = op.pc if op is not None else (int(eng.pc[st.wave]) if st.wave >= 0 else -1)
  inst = op.text if op is not None else ""
  wave = first_wave + st.wave if st.wave >= 0 else -1
  loc = f"[{arch}] kernel {kernel}, wave {wave}, PC {pc:#x}" + (f": {inst}" if inst else "")
  if st.kind == "fault":
    f = st.fault
    raise EmuFault(f.va, f.size, f.access, arch, kernel, pc, inst, str(f), wave) from None
  cls = {"trap": EmuTrap, "check": EmuCheckError, "registers": LaunchError}.get(st.kind, EmuError)
  raise cls(f"{loc}: {st.msg}", arch, kernel, pc, inst, wave) from None
