"""Real Mesa ir3 compiler output (shared/vendor/ir3/kernels: 8 compute shaders for a630, a660, a730): the `.bin`
prints exactly as `ir3-disasm` listed it in the `.lst` (with Mesa's branch labels), and that listing assembles back
to the identical `.bin`."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gputwin.isa import ir3

KERNELS = Path(__file__).resolve().parents[3].parent / "shared" / "vendor" / "ir3" / "kernels"
LISTINGS = sorted(KERNELS.glob("a*/*.lst")) if KERNELS.exists() else []
pytestmark = pytest.mark.skipif(not LISTINGS, reason="Mesa kernels (../shared/vendor/ir3/kernels) not present")
_LINE = re.compile(r"\s*(\d+)\[([0-9a-f]{8})_([0-9a-f]{8})\] (.*)")


@pytest.mark.parametrize("lst", LISTINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_listing_both_ways(lst: Path):
  gpu, code = lst.parent.name, lst.with_suffix(".bin").read_bytes()
  rows = [m.groups() for m in map(_LINE.fullmatch, lst.read_text().splitlines()) if m]
  for idx, hi, lo, _ in rows:   # the listing's own hex column is the .bin
    assert code[int(idx) * 8:int(idx) * 8 + 8] == int(hi + lo, 16).to_bytes(8, "little")
  listing = [text for *_, text in rows]
  assert ir3.disassemble(code, gpu, branch_labels=True) == listing
  assert ir3.assemble("\n".join(listing), gpu) == code
