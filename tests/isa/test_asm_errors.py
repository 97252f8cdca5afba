"""Bad input: assembler errors carry line:column and llvm-mc's reason; random words only ever raise DecodeError."""
from __future__ import annotations

import random

import pytest

from gputwin.errors import AsmError, DecodeError
from gputwin.isa import assemble, decode, disassemble

CASES = [  # (arch, text, line, col, reason fragment)
  ("gfx1100", "v_bogus_f32 v1, v2", 1, 1, "invalid instruction"),
  ("gfx1100", "s_nop 0\n  v_add_f32 v1, v2", 2, 3, "too few operands"),
  ("gfx1100", "v_add_f32 v1, v2, v3, v4", 1, 23, "invalid operand"),
  ("gfx1100", "s_mov_b64 s[0:1], v[2:3]", 1, 19, "invalid operand"),
  ("gfx1100", "s_mov_b32 s0, s[2:3]", 1, 15, "invalid operand"),
  ("gfx1100", "s_mov_b32 s200, 0", 1, 11, "out of range"),
  ("gfx1100", "ds_load_b32 v1, v2 offset:70000", 1, 20, "invalid operand"),
  ("gfx1100", "s_movk_i32 s0, 0x12345", 1, 16, "16-bit"),
  ("gfx1100", "s_ceil_f32 s0, s1", 1, 1, "not supported on this GPU"),  # RDNA3.5-only SALU float op
  ("gfx942", "v_prng_b32 v1, v2", 1, 1, "not supported on this GPU"),  # CDNA4-only
  ("gfx1100", "s_branch nowhere", 1, 10, "undefined label"),
]


@pytest.mark.parametrize("arch,text,line,col,why", CASES)
def test_errors_say_where_and_why(arch, text, line, col, why):
  with pytest.raises(AsmError) as ei:
    assemble(text, arch)
  e = ei.value
  assert (e.line, e.col) == (line, col), str(e)
  assert why in e.msg, str(e)


def test_labels_comments_and_directives():
  text = """
    .text
    .globl k
    .p2align 8
  k:                       ; a label
    s_mov_b32 s0, 0        // comment
  loop:
    s_add_u32 s0, s0, 1
    s_cmp_lg_u32 s0, 10
    s_cbranch_scc1 loop
    s_branch done
    s_nop 0
  done: s_endpgm
  """
  syms = {}
  code = assemble(text, "gfx1100", symbols=syms)
  assert syms == {"k": 0, "loop": 4, "done": 24}
  assert disassemble(code, "gfx1100") == ["s_mov_b32 s0, 0", "s_add_u32 s0, s0, 1", "s_cmp_lg_u32 s0, 10",
                                          "s_cbranch_scc1 65533", "s_branch 1", "s_nop 0", "s_endpgm"]


def test_wave64_masks():
  assert disassemble(assemble("v_cmp_eq_f32_e64 s[4:5], v1, v2", "gfx1100", wave=64), "gfx1100", wave=64) == [
    "v_cmp_eq_f32_e64 s[4:5], v1, v2"]
  with pytest.raises(AsmError):
    assemble("v_cmp_eq_f32_e64 s[4:5], v1, v2", "gfx1100", wave=32)


@pytest.mark.parametrize("arch", ("gfx1100", "gfx1200", "gfx942", "gfx950"))
def test_random_words_raise_only_decode_error(arch):
  rng = random.Random(1234)
  for _ in range(3000):
    n = rng.choice((4, 8, 12, 16))
    data = rng.getrandbits(8 * n).to_bytes(n, "little")
    try:
      inst = decode(data, arch)
      assert inst.size <= n
    except DecodeError:
      pass


def test_relocatable_literals_are_reported_not_guessed():
  relocs = []
  code = assemble("s_getpc_b64 s[0:1]\ns_add_u32 s0, s0, foo@rel32@lo+4\ns_addc_u32 s1, s1, foo@rel32@hi+12",
                  "gfx1100", relocs=relocs)
  assert code.hex() == "004780be00ff00800000000001ff018200000000"  # llvm-mc-22: literal fixups A,A,A,A
  assert relocs == [{"offset": 8, "symbol": "foo", "kind": "rel32_lo", "addend": 4},
                    {"offset": 16, "symbol": "foo", "kind": "rel32_hi", "addend": 12}]
  with pytest.raises(AsmError, match="relocs="):
    assemble("s_add_u32 s0, s0, foo@rel32@lo+4", "gfx1100")
