"""Every vendor pcode body parses and compiles (graphics-only ones are excluded, with reasons); bad input is
reported with arch, instruction, line and column."""
from __future__ import annotations

import pytest

from gputwin.pcode import tool


@pytest.fixture(scope="module")
def cov():
  return tool.coverage(json=True)


@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
def test_every_body_parses_and_compiles(cov, fam):
  r = cov[fam]
  assert not r["failures"], r["failures"]
  assert r["parsed"] == r["compiled"] == r["total"] - r["excluded"]
  assert r["excluded"] < 0.05 * r["total"]
  assert all(r["excluded_list"].values())  # every exclusion has a reason


def test_show_lists_source_ir_and_code():
  out = tool.show("V_FMA_F32", "gfx942")
  for part in ("vendor pseudocode", "fma(S0.f32, S1.f32, S2.f32)", "typed IR", "def run("):
    assert part in out


def test_show_reports_errata_with_evidence():
  out = tool.show("V_LDEXP_F32", "rdna3")
  assert "erratum" in out and "evidence" in out and "ldexp(S0.f32, S1.i32)" in out
