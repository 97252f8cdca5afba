"""Mesa's own disassembler test vectors (src/freedreno/ir3/tests/disasm.c of Mesa 25.0.7, shared/vendor/ir3): every
word prints exactly Mesa's `ir3_isa_disasm()` text, and that text assembles back to the identical word."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputwin import isa
from gputwin.errors import DecodeError
from gputwin.isa import ir3

IR3 = Path(__file__).resolve().parents[3].parent / "shared" / "vendor" / "ir3"
VECTORS = IR3 / "disasm-vectors.jsonl"
pytestmark = pytest.mark.skipif(not VECTORS.exists(), reason="Mesa vectors (../shared/vendor/ir3) not present")
SAME_GEN = {"a630": "a660", "a730": "a740"}   # same isaspec gen id: the same text and words


def vectors() -> list[dict]:
  return [json.loads(l) for l in VECTORS.read_text().splitlines() if l.strip()] if VECTORS.exists() else []


def _word(v: dict) -> bytes: return int(v["hex"], 16).to_bytes(8, "little")


@pytest.mark.parametrize("v", vectors(), ids=lambda v: f"{v['gpu']}:{v['hex']}")
def test_vector_both_ways(v):
  assert isa.disassemble(_word(v), v["gpu"]) == [v["asm"]]
  assert isa.assemble(v["asm"], v["gpu"]) == _word(v)
  if v["gpu"] in SAME_GEN:
    g = SAME_GEN[v["gpu"]]
    assert isa.disassemble(_word(v), g) == [v["asm"]] and isa.assemble(v["asm"], g) == _word(v)


def test_whole_program_round_trip():
  """All a630 vectors as one program: one line per word, and the listing assembles to the same bytes."""
  vs = [v for v in vectors() if v["gpu"] == "a630"]
  code = b"".join(map(_word, vs))
  lines = isa.disassemble(code, "a630")
  assert lines == [v["asm"] for v in vs]
  assert isa.assemble("\n".join(lines) + "\n; trailing comment\n", "a630") == code


def test_raw_word_is_mesas_no_match_text():
  """Mesa prints a word that matches no instruction with `raw 0x%X%X` of (low dword, high dword)."""
  raw = [v for v in vectors() if v["asm"].startswith("raw ")]
  assert raw
  for v in raw:
    w = int(v["hex"], 16)
    assert v["asm"] == "raw 0x%X%X" % (w & 0xffffffff, w >> 32)
    with pytest.raises(DecodeError, match="no instruction matches"):
      ir3.decode(_word(v), v["gpu"])


def test_tables_are_generated_from_the_xml(tmp_path, monkeypatch):
  """tables.json is exactly what gen_tables.py makes of the vendor XML (no hand edits)."""
  from gputwin.isa.ir3 import gen_tables
  monkeypatch.setattr(gen_tables, "OUT", tmp_path / "tables.json")
  gen_tables.main([str(IR3 / "mesa-25.0.7" / "src" / "freedreno" / "isa")])
  assert (tmp_path / "tables.json").read_text() == gen_tables.HERE.joinpath("tables.json").read_text()
