"""gputwin.isa: AMD GPU instruction sets as data (RDNA3 gfx1100, RDNA4 gfx1200/gfx1201, CDNA3 gfx942, CDNA4 gfx950).
Adreno ir3 (a540, a630, a660, a730, a740) lives in gputwin.isa.ir3; assemble/disassemble route those names there.

assemble/disassemble speak llvm-mc-22's syntax; decode/encode are the bit-level engine the emulator uses.
"""
from gputwin.isa.asm import assemble as _amd_assemble
from gputwin.isa.disasm import format_inst
from gputwin.isa.encoding import decode, decode_all, disassemble as _amd_disassemble, encode
from gputwin.isa.model import Inst, Opnd
from gputwin.isa.targets import ADRENO, TARGETS, target


def assemble(text: str, arch: str, **kw) -> bytes:
  """Assemble for `arch`: AMD (llvm-mc-22 syntax, see isa.asm) or Adreno a540/a630/a660/a730/a740 (Mesa ir3 syntax)."""
  if arch in ADRENO:
    from gputwin.isa import ir3
    return ir3.assemble(text, arch)
  return _amd_assemble(text, arch, **kw)


def disassemble(data: bytes, arch: str, **kw) -> list[str]:
  """One line per instruction: llvm-mc-22 text for AMD targets, Mesa `ir3_isa_disasm()` text for Adreno GPUs."""
  if arch in ADRENO:
    from gputwin.isa import ir3
    return ir3.disassemble(data, arch)
  return _amd_disassemble(data, arch, **kw)


__all__ = ["assemble", "disassemble", "decode", "decode_all", "encode", "format_inst", "Inst", "Opnd", "TARGETS", "ADRENO",
           "target"]
