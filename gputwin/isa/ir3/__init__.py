"""gputwin.isa.ir3: the Qualcomm Adreno ir3 shader ISA (a4xx-a7xx) as data: isaspec tables of ours, one generic
decoder/printer and one generic assembler. Text is exactly Mesa's `ir3_isa_disasm()` output.

Entry points: `disassemble(data, gpu) -> list[str]`, `assemble(text, gpu) -> bytes` (little-endian 64-bit words),
`decode(data, gpu, offset=0) -> Inst` (raises DecodeError), `decode_all`, `GPUS` (name -> isaspec gen id),
`listing.read(path) -> Shader` (a Mesa compiler listing's launch metadata).
"""
from gputwin.isa.ir3.asm import assemble, assemble_line
from gputwin.isa.ir3.decode import Inst, Operand, decode, decode_all, disasm_word, disassemble, problems, raw_text
from gputwin.isa.ir3.listing import Input, Shader, UboRange
from gputwin.isa.ir3.spec import GPUS, gen_of, spec

__all__ = ["assemble", "assemble_line", "disassemble", "decode", "decode_all", "disasm_word", "raw_text", "Inst",
           "Operand", "GPUS", "gen_of", "spec", "problems", "listing", "Shader", "Input", "UboRange"]
