"""Host kernels (x86_64, aarch64 ELF objects from gputwin.compiler's host backend) run under unicorn: a sandboxed
emulator of the host ISA, so a miscompiled kernel faults in the guest, never in this process.

Guest memory: the object's image at IMAGE (code read+execute, constants read-only, shared arrays writable), one
stub per undefined symbol (a `ret` the launcher services: libm.py, and the barrier), the argument block and launch
dims, each numpy argument in its own mapping that ends exactly where the array does (a guard gap follows, and the
bytes of the page before the array are watched), and stacks. Every access outside a mapping, write to code or
constants, or jump to data is an emulated fault (EmuFault naming the address, the work-item and capstone's text of
the instruction).

Work-items run as the kernel's own loop (`NAME(args, dims, first, count)`): a kernel without barriers runs a whole
grid (or, with shared memory, a workgroup at a time) per emulator call. With barriers each work-item of a group is a
fiber with its own stack, all of a group in one emulator call: at the barrier stub (or on returning) the hook saves
the fiber's registers and switches to the next ready one; when none is ready, every waiting fiber is released (a
finished fiber no longer counts), in work-item order. Each workgroup starts with zeroed shared arrays. A block hook
counts instructions (LaunchStats, one work-item = one lane) and enforces the budget."""
from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np
import unicorn as uc

from gputwin.emu.host import disasm, elf
from gputwin.emu.host.arch import host_arch
from gputwin.emu.host.libm import SERVICES, bf16_bits
from gputwin.errors import CodeObjectError, EmuError, EmuFault, EmuTrap, LaunchError
from gputwin.isa.kernargs import LaunchStats

PAGE = elf.PAGE
STUBS, IMAGE, DATA, STACKS = 0x80000, 0x100000, 0x20000000, 0x7f0000000000  # stubs within a branch of code
STACK = 64 << 10            # per fiber, plus the kernel's private arrays
WATCHDOG_PER_ITEM = 1 << 20  # default budget: host instructions per work-item, for the whole dispatch
BATCH = 1 << 16             # work-items per emulator call for barrier-free kernels without shared memory
_SCALAR = {"i8": "<i1", "u8": "<u1", "i16": "<i2", "u16": "<u2", "i32": "<i4", "u32": "<u4", "i64": "<i8",
           "u64": "<u8", "f16": "<f2", "f32": "<f4", "f64": "<f8", "bool": "<u1", "bf16": "<u2"}


@functools.lru_cache(maxsize=32)
def _image(data: bytes, arch: str) -> elf.Image:
  a = host_arch(arch)
  return elf.load(data, a, IMAGE, lambda i: STUBS + 16 * i)


def load(obj, arch: str) -> elf.Image:
  """bytes, or a path to an ELF object -> its guest image (cached by content)."""
  if isinstance(obj, (str, Path)):
    try:
      obj = Path(obj).read_bytes()
    except OSError as e:
      raise CodeObjectError(f"cannot read: {e.strerror}", str(obj)) from None
  return _image(bytes(obj), arch)


class Machine:
  """One dispatch on one unicorn engine: the image, the stubs, the argument buffers and the hooks."""

  def __init__(self, img: elf.Image, arch: str, kernel: str, meta: dict, budget: int, trace):
    self.a, self.arch, self.kernel, self.meta, self.img = host_arch(arch), arch, kernel, meta, img
    self.budget, self.count, self.trace = budget, 0, trace
    self.why = None            # why the emulator stopped: ("fault", ...), ("budget",), ("call", ...)
    self.item = -1             # the fiber's work-item (barrier kernels); else read from the dims block
    self.skip = False          # resuming at the barrier stub: let its `ret` run
    self.state: list[str] = []  # barrier kernels: each fiber of the group new, running, wait, ready or done
    self.ctx: list = []        # its registers at the barrier it waits at (None: never saved)
    self.sizes: dict[int, int] = {}
    mu = self.mu = uc.Uc(*self.a.uc[:2])
    mu.ctl_set_cpu_model(self.a.uc[2])
    for va, size, perms in img.segments:
      mu.mem_map(va, size, uc.UC_PROT_READ | (uc.UC_PROT_EXEC if "x" in perms else 0) |
                 (uc.UC_PROT_WRITE if "w" in perms else 0))
    mu.mem_write(img.base, bytes(img.data))
    nstub = len(img.imports) + 1      # the last one is where the kernel returns to (EXIT)
    mu.mem_map(STUBS, elf.align(16 * nstub, PAGE), uc.UC_PROT_READ | uc.UC_PROT_EXEC)
    mu.mem_write(STUBS, b"".join(self.a.ret_insn.ljust(16, b"\0") for _ in range(nstub)))
    self.exit = STUBS + 16 * len(img.imports)
    self.services = {STUBS + 16 * i: n for i, n in enumerate(img.imports)}
    self.barrier = next((a for a, n in self.services.items() if n == "__gputwin_barrier"), None)
    self.next_va = DATA
    if trace is not None:   # (before the stub hook, which switches fibers)
      mu.hook_add(uc.UC_HOOK_CODE, self._trace, begin=STUBS, end=img.end)
    mu.hook_add(uc.UC_HOOK_CODE, self._stub, begin=STUBS, end=self.exit)
    mu.hook_add(uc.UC_HOOK_BLOCK, self._block)
    mu.hook_add(uc.UC_HOOK_MEM_INVALID, self._invalid)
    for reg, s_, c_ in self.a.enable:     # control bits the C ABI assumes (FP/SIMD on)
      mu.reg_write(reg, mu.reg_read(reg) & ~c_ | s_)

  # ---- memory
  def map(self, nbytes: int, data: bytes | None = None) -> int:
    """The guest address of `nbytes` (written with `data`) in a mapping of their own that they end (an access past
    the end faults; 64-byte aligned when the size is a multiple of 64); the mapping's bytes before them are watched."""
    size = elf.align(max(nbytes, 1), PAGE)
    base = self.next_va
    self.next_va += size + PAGE            # + a guard gap
    self.mu.mem_map(base, size)
    va = base + size - nbytes
    if va > base:
      self.mu.hook_add(uc.UC_HOOK_MEM_READ | uc.UC_HOOK_MEM_WRITE, self._watched, begin=base, end=va - 1)
    if data:
      self.mu.mem_write(va, bytes(data))
    return va

  # ---- hooks
  def _block(self, mu, address, size, _):
    n = self.sizes.get(address)
    if n is None:
      n = self.sizes[address] = max(1, len(disasm.instructions(mu.mem_read(address, size), address, self.arch)))
    self.count += n
    if self.count > self.budget:
      self.why = ("budget",)
      mu.emu_stop()

  def _invalid(self, mu, access, address, size, value, _):
    kind = {uc.UC_MEM_READ_UNMAPPED: "read", uc.UC_MEM_WRITE_UNMAPPED: "write", uc.UC_MEM_FETCH_UNMAPPED: "exec",
            uc.UC_MEM_READ_PROT: "read", uc.UC_MEM_WRITE_PROT: "write", uc.UC_MEM_FETCH_PROT: "exec"}.get(access, "?")
    pc = address if kind == "exec" else mu.reg_read(self.a.pc)
    self.why = ("fault", address, size, kind, pc, "unmapped" if access in (
      uc.UC_MEM_READ_UNMAPPED, uc.UC_MEM_WRITE_UNMAPPED, uc.UC_MEM_FETCH_UNMAPPED) else "protected")
    return False

  def _watched(self, mu, access, address, size, value, _):
    if self.why is None:
      self.why = ("fault", address, size, "write" if access == uc.UC_MEM_WRITE else "read", mu.reg_read(self.a.pc),
                  "before the start of a buffer")
    mu.emu_stop()

  def _trace(self, mu, address, size, _):
    if address == self.exit or address == self.barrier and not self.skip:
      return   # a fiber switch: the barrier's `ret` is traced when its fiber resumes
    self.trace.append((self.current(), address, disasm.one(mu.mem_read(address, size), address, self.arch), ""))

  def _stub(self, mu, address, size, _):
    if address == self.exit:
      if self.state:           # a fiber returned (a call() stops at EXIT before running it)
        self.count -= 1        # (the EXIT stub is no kernel instruction)
        self.state[self.cur] = "done"
        self.switch()
      return
    name = self.services[address]
    if address == self.barrier:
      if self.skip:
        self.skip = False
        return
      self.count -= 1            # its `ret` runs (and is counted) when the fiber resumes
      if self.ctx[self.cur] is None:
        self.ctx[self.cur] = mu.context_save()
      else:
        mu.context_update(self.ctx[self.cur])
      self.state[self.cur] = "wait"
      self.switch()
      return
    svc = SERVICES.get(name)
    if svc is None:
      self.why = ("call", name, mu.reg_read(self.a.link) if self.a.link is not None else
                  int.from_bytes(mu.mem_read(mu.reg_read(self.a.sp), 8), "little"))
      mu.emu_stop()
      return
    types, rt, fn = svc
    vals, outs, ints = [], [], iter(self.a.args)
    for t, r in zip([t for t in types if t[0] != "*"], self.a.fargs):
      bits = mu.reg_read(r) & ((1 << 8 * np.dtype(_SCALAR[t]).itemsize) - 1)
      vals.append(np.array([bits], "<u8").astype(f"<u{np.dtype(_SCALAR[t]).itemsize}").view(_SCALAR[t])[0])
    outs = [(next(ints), t[1:]) for t in types if t[0] == "*"]
    with np.errstate(all="ignore"):
      v = fn(*vals)
    if rt is not None:
      mu.reg_write(self.a.fret, _bits(v, rt))
    for (r, t), x in zip(outs, v if outs else ()):
      mu.mem_write(mu.reg_read(r), _bits(x, t).to_bytes(np.dtype(_SCALAR[t]).itemsize, "little"))

  # ---- fibers (barrier kernels)
  def switch(self) -> None:
    """From a hook: run the next ready fiber after the current one, else release the waiting ones, else stop."""
    st = self.state
    nxt = next((i for i in range(self.cur + 1, len(st)) if st[i] in ("new", "ready")), None)
    if nxt is None:
      for i, x in enumerate(st):
        st[i] = "ready" if x == "wait" else x
      nxt = next((i for i, x in enumerate(st) if x in ("new", "ready")), None)
    if nxt is None:
      self.mu.emu_stop()
    else:
      self.start(nxt, in_hook=True)

  def start(self, i: int, in_hook: bool = False) -> None:
    """Make fiber i of the group the running one: fresh at the kernel's entry, or back at its barrier."""
    self.cur, self.item = i, self.group * len(self.state) + i
    if self.state[i] == "new":
      self.enter(self.entry, (self.args, self.dims, self.item, 1), self.tops[i])
      if in_hook:
        self.mu.reg_write(self.a.pc, self.entry)
    else:
      self.mu.context_restore(self.ctx[i])
      self.skip = True
      self.mu.reg_write(self.a.pc, self.barrier)   # where it waits (a PC write leaves the current block)
    self.state[i] = "running"

  # ---- running
  def current(self) -> int:
    """The work-item running now: the fiber's, or the one the kernel's loop stored in the dims block."""
    return self.item if self.item >= 0 else int.from_bytes(self.mu.mem_read(self.dims + 24, 8), "little", signed=True)

  def call(self, entry: int, args: tuple, sp: int) -> None:
    """Run `entry(*args)` on the stack ending at `sp` until it returns to the EXIT stub."""
    self.enter(entry, args, sp)
    self.go(entry, self.exit)

  def enter(self, entry: int, args: tuple, sp: int) -> None:
    """Registers for a call of `entry(*args)` on the stack ending at `sp`, returning to the EXIT stub."""
    mu, a = self.mu, self.a
    for r, v in zip(a.args, args):
      mu.reg_write(r, v)
    if a.link is not None:
      mu.reg_write(a.link, self.exit)
    else:
      sp -= 8
      mu.mem_write(sp, self.exit.to_bytes(8, "little"))
    mu.reg_write(a.sp, sp)

  def go(self, pc: int, until: int) -> None:
    """Run from `pc` until PC = `until` or a hook stops it; raises the stop as an error."""
    self.why = None
    try:
      self.mu.emu_start(pc, until)
    except uc.UcError as e:
      if self.why is None or self.why[0] != "fault":
        pc = self.mu.reg_read(self.a.pc)
        self.raise_error(f"{e} (UC_ERR {e.errno})" if e.errno != uc.UC_ERR_INSN_INVALID else
                         "undefined instruction (a trap or `unreachable` in the kernel)", pc,
                         EmuTrap if e.errno in (uc.UC_ERR_INSN_INVALID, uc.UC_ERR_EXCEPTION) else EmuError)
    if self.why is None:
      return
    if self.why[0] == "fault":
      _, va, size, kind, pc, what = self.why
      inst = self.text(pc)
      raise EmuFault(va, size, kind, self.arch, self.kernel, pc, inst,
                     f"{self.where()}: {kind} of {size} bytes at {va:#x} ({what})", self.current())
    if self.why[0] == "budget":
      self.raise_error(f"more than {self.budget} host instructions executed (max_instructions; the default is "
                       f"{WATCHDOG_PER_ITEM} per work-item)", self.mu.reg_read(self.a.pc), EmuError)
    if self.why[0] == "call":
      self.raise_error(f"a call to {self.why[1]} returning here, which the host launcher does not provide",
                       self.why[2], EmuError)

  def text(self, pc: int) -> str:
    try:
      return disasm.one(bytes(self.mu.mem_read(pc, 16)), pc, self.arch)
    except uc.UcError:
      return "<no code here>"

  def where(self) -> str:
    """The running work-item as (x, y, z) of workgroup (x, y, z), when the index the kernel stored is one."""
    t, n = self.current(), int(np.prod(self.block))
    if not 0 <= t < n * int(np.prod(self.grid)):
      return "work-item unknown"
    g, l = divmod(t, n)
    return (f"work-item {tuple(int(x) for x in np.unravel_index(l, self.block[::-1])[::-1])} of workgroup "
            f"{tuple(int(x) for x in np.unravel_index(g, self.grid[::-1])[::-1])}")

  def raise_error(self, msg: str, pc: int, cls) -> None:
    raise cls(f"[{self.arch}] kernel {self.kernel}, {self.where()}, PC {pc:#x}: {self.text(pc)}: {msg}", self.arch,
              self.kernel, pc, self.text(pc), self.current()) from None


def _bits(v, t: str) -> int:
  """The register/memory bits of a service's result of type t (bf16: already bits)."""
  return int(v) if t == "bf16" else int(np.array([v], _SCALAR[t]).view(f"<u{np.dtype(_SCALAR[t]).itemsize}")[0])


def _dims(d) -> tuple[int, int, int]:
  d = (d,) if isinstance(d, (int, np.integer)) else tuple(d)
  if not 1 <= len(d) <= 3 or any(int(x) < 1 for x in d):
    raise LaunchError(f"grid and block are 1 to 3 positive sizes, got {d}")
  return tuple(int(x) for x in d) + (1,) * (3 - len(d))


def pack_args(meta: dict, args, where: str, pointer) -> tuple[bytes, list]:
  """The argument block of a kernel's metadata (its parameter layout) and the (array, address) of each array
  argument; `pointer(array) -> address` places an array (a guest buffer here; a host address for a native run)."""
  ps = meta["params"]
  if len(args) != len(ps):
    raise LaunchError(f"{where} takes {len(ps)} arguments ({', '.join(p[0] for p in ps)}), got {len(args)}")
  buf, back = bytearray(meta["args_size"]), []
  for (name, t, off, size), a in zip(ps, args):
    if "<" in t:        # a pointer: a numpy array becomes a guest buffer; an int is a guest address
      if isinstance(a, np.ndarray):
        va = pointer(a)
        back.append((a, va))
      elif isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        va = int(a)
      else:
        raise LaunchError(f"{where}: argument {name} ({t}) wants a numpy array or a guest address, got "
                          f"{type(a).__name__}")
      buf[off:off + 8] = (va & (1 << 64) - 1).to_bytes(8, "little")
    elif isinstance(a, np.ndarray) and a.ndim:
      raise LaunchError(f"{where}: argument {name} is a {t} scalar, got an array")
    else:
      try:
        raw = bf16_bits(np.float32(a)).to_bytes(2, "little") if t == "bf16" else \
          np.array([a]).astype(_SCALAR[t]).tobytes() if t[0] == "f" or t == "bool" else \
          (int(a) & (1 << 8 * size) - 1).to_bytes(size, "little")
      except (TypeError, ValueError, KeyError) as e:
        raise LaunchError(f"{where}: argument {name} ({t}): {e}") from None
      buf[off:off + size] = raw
  return bytes(buf), back


def launch(obj, kernel: str, *, grid, block, args, arch: str, max_instructions: int | None = None, trace=None,
           **_ignored) -> LaunchStats:
  """Run `kernel` of a host ELF object (bytes or path) over `grid` workgroups of `block` work-items under unicorn.
  `args`: numpy arrays (copied into guest buffers and back), ints for pointers (guest addresses), numbers by the
  kernel's parameter types. `max_instructions`: the budget of host instructions (default WATCHDOG_PER_ITEM per
  work-item). `trace`: a list to append (work-item, PC, instruction, '') to, one per executed instruction.
  Serial and checkers have no meaning here (accepted and ignored, as the same call runs GPU targets)."""
  t0 = time.perf_counter()
  img = load(obj, arch)
  meta = img.kernels.get(kernel)
  where = f"[{arch}] kernel {kernel}"
  if meta is None or meta.get("entry") is None:
    raise LaunchError(f"{where}: not in this object (kernels: {', '.join(img.kernels) or 'none'})", arch, kernel)
  grid, block = _dims(grid), _dims(block)
  n, groups = block[0] * block[1] * block[2], grid[0] * grid[1] * grid[2]
  if n > 1024:
    raise LaunchError(f"{where}: a workgroup of {n} work-items exceeds 1024", arch, kernel)
  items = n * groups
  trace_path = trace if isinstance(trace, (str, Path)) else None
  m = Machine(img, arch, kernel, meta, max_instructions if max_instructions is not None else
              WATCHDOG_PER_ITEM * items, [] if trace_path else trace)
  m.grid, m.block = grid, block
  data, back = pack_args(meta, list(args), where,
                         lambda a: m.map(a.nbytes, np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes()))
  m.args = m.map(len(data), data)
  m.dims = m.map(32, np.array([*block, *grid, -1, -1], "<i4").tobytes())
  stack = elf.align(STACK + meta["private"], PAGE)
  shared = [(va, size) for va, size in img.writable]

  def zero_shared():
    for va, size in shared:
      m.mu.mem_write(va, bytes(size))

  if not meta["barrier"]:
    m.mu.mem_map(STACKS, stack)
    per = n if shared else BATCH
    for first in range(0, items, per):
      if shared and first % n == 0:
        zero_shared()
      m.call(meta["entry"], (m.args, m.dims, first, min(per, items - first)), STACKS + stack)
  else:
    m.tops, m.entry = [], meta["entry"]
    for i in range(n):
      m.mu.mem_map(STACKS + i * (stack + PAGE), stack)
      m.tops.append(STACKS + i * (stack + PAGE) + stack)
    for m.group in range(groups):
      zero_shared()
      m.state, m.ctx = ["new"] * n, m.ctx or [None] * n   # (contexts are reused: context_update)
      m.start(0)
      m.go(m.entry, STUBS - 16)   # (never reached: the hooks stop it once every fiber is done)
    m.item = -1
  for a, va in back:
    if a.flags.writeable and a.nbytes:
      a[...] = np.frombuffer(bytes(m.mu.mem_read(va, a.nbytes)), a.dtype).reshape(a.shape)
  stats = LaunchStats(kernel, arch, waves=items, workgroups=groups, instructions=m.count, lane_instructions=m.count,
                      seconds=time.perf_counter() - t0, wave_size=1)
  if m.trace is not None:
    stats.trace = m.trace
  if trace_path:
    from gputwin.emu.trace import write_trace
    write_trace(trace_path, m.trace)
  return stats
