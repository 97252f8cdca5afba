"""gputwin.isa: AMD GPU instruction sets as data (RDNA3 gfx1100, RDNA4 gfx1200/gfx1201, CDNA3 gfx942, CDNA4 gfx950).

assemble/disassemble speak llvm-mc-22's syntax; decode/encode are the bit-level engine the emulator uses.
"""
from gputwin.isa.asm import assemble
from gputwin.isa.disasm import format_inst
from gputwin.isa.encoding import decode, decode_all, disassemble, encode
from gputwin.isa.model import Inst, Opnd
from gputwin.isa.targets import TARGETS, target

__all__ = ["assemble", "disassemble", "decode", "decode_all", "encode", "format_inst", "Inst", "Opnd", "TARGETS", "target"]
