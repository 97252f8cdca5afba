"""gputwin's exception hierarchy: every error a user can provoke is one of these, and says where."""
from __future__ import annotations


class GputwinError(Exception):
  """Base of every error gputwin raises on purpose."""


class VendorDataError(GputwinError):
  """The vendor tables (the pinned tinygrad wheel) are missing or have an unexpected layout."""


class AsmError(GputwinError):
  """Assembly text that cannot be encoded; carries line and column like llvm-mc."""

  def __init__(self, msg: str, line: int = 0, col: int = 0, text: str = "", arch: str = ""):
    self.msg, self.line, self.col, self.text, self.arch = msg, line, col, text, arch
    where = f"{line}:{col}: " if line else ""
    tgt = f"[{arch}] " if arch else ""
    super().__init__(f"{tgt}{where}error: {msg}" + (f"\n  {text}\n  {' ' * max(col - 1, 0)}^" if text else ""))


class DecodeError(GputwinError):
  """Bytes that are not a valid instruction for the target; names target and byte offset."""

  def __init__(self, msg: str, arch: str = "", offset: int | None = None, word: int | None = None):
    self.msg, self.arch, self.offset, self.word = msg, arch, offset, word
    at = f" at offset {offset:#x}" if offset is not None else ""
    w = f" (word {word:#010x})" if word is not None else ""
    super().__init__(f"[{arch}] cannot decode{at}{w}: {msg}")


class PcodeError(GputwinError):
  """Vendor pseudocode that cannot be parsed or compiled; names arch, instruction, line and column."""

  def __init__(self, msg: str, arch: str = "", inst: str = "", line: int = 0, col: int = 0):
    self.msg, self.arch, self.inst, self.line, self.col = msg, arch, inst, line, col
    super().__init__(f"[{arch}] {inst}:{line}:{col}: {msg}")


class KernelDriverError(GputwinError):
  """A kernel-driver call (real or mock) that failed outside the errno contract, e.g. a device string that names no
  driver, or a mock machine asked for a target it does not model."""


class GPUFault(GputwinError):
  """The (emulated) GPU touched something it must not; names the device and what was touched."""


class GPUPageFault(GPUFault):
  """A GPU virtual address with no backing mapping; names device, address, access size and kind (read/write/exec)."""

  def __init__(self, va: int, size: int = 0, access: str = "read", device: str = "", detail: str = ""):
    self.va, self.size, self.access, self.device = va, size, access, device
    dev = f"[{device}] " if device else ""
    super().__init__(f"{dev}GPU page fault: {access} of {size} bytes at VA {va:#x}" + (f": {detail}" if detail else ""))


class CodeObjectError(GputwinError):
  """An AMD HSA code object (ELF) or `.amdhsa_kernel` block that cannot be read or built; names file and kernel."""

  def __init__(self, msg: str, path: str = "", kernel: str = "", line: int = 0):
    self.msg, self.path, self.kernel, self.line = msg, path, kernel, line
    super().__init__(f"{path}: {msg}" if path else msg)


class EmuError(GputwinError):
  """The wave executor stopped a kernel; names target, kernel, PC and instruction (gputwin.emu)."""

  def __init__(self, msg: str, arch: str = "", kernel: str = "", pc: int = -1, inst: str = "", wave: int = -1):
    self.msg, self.arch, self.kernel, self.pc, self.inst, self.wave = msg, arch, kernel, pc, inst, wave
    super().__init__(msg)


class LaunchError(EmuError):
  """A launch that cannot start: unknown kernel, arguments that do not match the kernel's metadata, bad shape."""


class EmuTrap(EmuError):
  """A wave executed s_trap (no trap handler is installed in the emulator)."""


class EmuCheckError(EmuError):
  """A checker found a bug in the kernel: a register read before its load's wait counter retired it, a read of a
  never-written register, an LDS race between waves of a workgroup, or a CDNA MFMA->VALU hazard."""


class EmuFault(GPUPageFault):
  """A GPU page fault raised by the emulator: address, access, plus target, kernel, wave, PC and instruction."""

  def __init__(self, va: int, size: int, access: str, arch: str, kernel: str, pc: int, inst: str, detail: str = "",
               wave: int = -1):
    self.arch, self.kernel, self.pc, self.inst, self.wave = arch, kernel, pc, inst, wave
    GPUFault.__init__(self, f"[{arch}] kernel {kernel}, PC {pc:#x}: {inst}: {detail or 'GPU page fault'}")
    self.va, self.size, self.access, self.device = va, size, access, arch


class CompileError(GputwinError):
  """A kernel the compiler cannot translate: ill-typed or unsupported Python, malformed IR, or a target limit
  (e.g. register pressure). `loc` (file, line, col) is the Python or IR source location, printed first like a
  compiler diagnostic: `saxpy.py:12:5: error: ...`."""

  def __init__(self, msg: str, loc=None, arch: str = "", kernel: str = ""):
    self.msg, self.loc, self.arch, self.kernel = msg, loc, arch, kernel
    where = f"{loc.file}:{loc.line}:{loc.col}: " if loc is not None and getattr(loc, "line", 0) else ""
    pre = f"[{arch}] " if arch else ""
    super().__init__(f"{pre}{where}error: {msg}" if where else f"{pre}{msg}")
