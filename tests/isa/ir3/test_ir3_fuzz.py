"""Random 64-bit words on every Adreno GPU: each prints as one line (as Mesa's disassembler always does), decodes to
an instruction record or raises DecodeError and nothing else, and the text of a cleanly decoded word assembles to a
word that prints the same text."""
from __future__ import annotations

import random

import pytest

from gputwin import isa
from gputwin.errors import AsmError, DecodeError, GputwinError
from gputwin.isa import ir3

GPUS = ["a540", "a630", "a660", "a730", "a740"]


def _check_words(gpu: str, n: int, seed: int) -> dict[str, int]:
  r, seen = random.Random(f"{gpu}/{seed}"), {"clean": 0, "noted": 0, "raw": 0}
  for _ in range(n):
    w = r.getrandbits(64)
    data = w.to_bytes(8, "little")
    [line] = isa.disassemble(data, gpu)
    try:
      inst = ir3.decode(data, gpu)
    except DecodeError:
      seen["raw" if line.startswith("raw 0x") else "noted"] += 1
      assert line.startswith("raw 0x") or "\t; " in line, line   # rejected words are the ones Mesa flags
      continue
    # a clean word prints as Mesa prints it; the only note it may carry is a template naming no field (dp*acc's NOP)
    assert line.split("\t; ")[0] == inst.text and inst.word == w, line
    assert "\t; " not in line or not ir3.problems(line.split("\t; ")[1].split(", ")), line
    seen["clean"] += 1
  return seen


@pytest.mark.parametrize("chip", GPUS)
def test_random_words_decode_or_raise_decode_error(chip):
  seen = _check_words(chip, 4000, 1)
  assert all(seen.values()), seen   # every outcome occurs: the fuzz reaches real instructions


def _reassemble(gpu: str, n: int, seed: int):
  r, done = random.Random(f"asm/{gpu}/{seed}"), 0
  while done < n:
    w = r.getrandbits(64)
    text, errs, leaf = ir3.disasm_word(w, gpu)
    if leaf is None or errs: continue
    w2 = int.from_bytes(isa.assemble(text, gpu), "little")
    assert ir3.disasm_word(w2, gpu)[:2] == (text, []), (hex(w), text, hex(w2))
    done += 1


@pytest.mark.parametrize("chip", ["a540", "a630", "a730"])
def test_decoded_text_reassembles(chip):
  _reassemble(chip, 40, 1)


@pytest.mark.slow
@pytest.mark.parametrize("chip", GPUS)
def test_random_words_slow(chip):
  _check_words(chip, 200_000, 2)
  _reassemble(chip, 2000, 2)


def test_record_fields():
  """decode() gives the fields the text shows: hr0.z is DST GPR 0 swizzle z (2) written as half."""
  inst = ir3.decode(bytes.fromhex("401040020c210001")[::-1], "a630")
  assert (inst.name, inst.text, inst.cat) == ("add.f", "add.f hr0.z, r0.y, c<a0.x + 33>", 2)
  dst = inst.fields["DST"]
  assert (dst.bitset, dst.fields["GPR"], dst.fields["SWIZ"], inst.fields["DST_HALF"], inst.fields["FULL"]) == (
    "#reg-gpr", 0, 2, 1, 1)
  assert inst.fields["SRC2"].bitset == "#multisrc-relative-const"
  assert inst.fields["SRC2"].fields["SRC"].fields["OFFSET"] == 33


def test_dontcare_bits_are_noted_like_mesa():
  """flat.b's bits 48-49 are dontcare (isaspec `xx`): Mesa still prints the instruction, then the problem."""
  w = 0x4734800000002000 | 1 << 48
  assert isa.disassemble(w.to_bytes(8, "little"), "a630") == [
    "flat.b (ei)r0.x, 0, r0.x\t; dontcare bits in flat.b: 0001000000000000"]
  with pytest.raises(DecodeError, match="dontcare"):
    ir3.decode(w.to_bytes(8, "little"), "a630")


def test_bad_input_is_a_located_error():
  with pytest.raises(AsmError) as e:
    isa.assemble("nop\nadd.f r0.x, r0.y, bogus\n", "a630")
  assert (e.value.line, e.value.arch) == (2, "a630")
  with pytest.raises(AsmError):
    isa.assemble("flat.b (ei)r0.x, 0, r0.x", "a540")   # flat.b is gen 6+
  with pytest.raises(DecodeError):
    isa.disassemble(b"\0" * 12, "a630")
  with pytest.raises(DecodeError):
    ir3.decode(b"\0" * 8, "a630", offset=4)
  with pytest.raises(GputwinError, match="unknown Adreno GPU"):
    ir3.disassemble(b"\0" * 8, "a999")
