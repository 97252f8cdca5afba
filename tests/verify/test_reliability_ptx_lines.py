"""decode-ptx-lines: PTX's "words" for the reliability suite are statements, parsed one at a time inside a fixed
skeleton module (gputwin.isa.ptx.parser.Statements), so a million cost minutes instead of the hours a million whole
nvcc modules take. Oracle for the shortcut: parsing the whole module with the statement written at the end of the
skeleton's function gives the same verdict, the same statements and the same error (its line shifted)."""
from __future__ import annotations

import re
import shutil

import pytest

from gputwin.isa import ptx
from gputwin.isa.ptx import printer
from gputwin.isa.ptx.parser import Statements
from gputwin.verify import reliability as R

SKELETON = """.version 9.0
.target sm_90
.address_size 64
.shared .align 4 .b8 tile[64];
.visible .entry k(.param .u64 param_0)
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<8>;
\t.reg .b64 %rd<4>;
$L__BB0_0:
\tret;
}
"""
HANDWRITTEN = ["add.s32 %r1, %r2, %r3;", "@%p1 bra $L__BB0_0;", "ld.param.u64 %rd1, [param_0];",
               "ld.shared.u32 %r1, [tile+4];", "{\n.reg .b32 %q<2>;\nmov.b32 %q1, %r1;\n}", "$L_x:\nbra $L_x;",
               "add.s32 %r1, %r2, %r9;", "bra $L_nowhere;", "add.s32 %r1, %r2;", "}\nadd.s32 %r1, %r1, 1;",
               "{\nadd.s32 %r1, %r1, 1;", "mov.u32 %r1, 0x" + "f" * 3000 + ";", "mov.u32 %r1, 1; /* open",
               "mov.u32 %r1, 1; // \u00e9", "ld.global.u32 %r1, [%r2];", "$L__BB0_0:\nret;", ""]


_STATEMENTS: dict[str, Statements] = {}


def _compare(skeleton: str, text: str):
  st = _STATEMENTS.setdefault(skeleton, Statements(skeleton, "k", "k.ptx"))
  head, tail = skeleton.rsplit("}", 1)
  offset, base = head.count("\n"), len(ptx.parse(skeleton).kernels["k"].body)
  try: mine, my_err = st.parse(text), None
  except ptx.PtxError as e: mine, my_err = None, (str(e).split("\n")[0].split("error: ", 1)[1], e.line, e.col)
  try: whole, err = ptx.parse(head + text + "\n}" + tail, "k.ptx").kernels["k"].body[base:], None
  except ptx.PtxError as e: whole, err = None, (str(e).split("\n")[0].split("error: ", 1)[1], e.line - offset, e.col)
  assert (mine is None) == (whole is None), (text[:200], my_err, err)
  if mine is not None:
    assert mine == whole and [printer.statement(s) for s in mine] == [printer.statement(s) for s in whole], text[:200]
  elif "}" not in text:    # (a '}' in the text ends the whole module's function early: another error, same verdict)
    if err[1] > text.count("\n") + 1:          # past the text (its end: where each input ends): the message only
      my_err, err = my_err[0], err[0]
    assert my_err == err, (text[:200], my_err, err)
  return mine is not None


@pytest.mark.parametrize("text", HANDWRITTEN, ids=range(len(HANDWRITTEN)))
def test_a_statement_parses_as_at_the_end_of_the_function(text):
  _compare(SKELETON, text)


def test_what_a_statement_declares_stays_in_it():
  st = Statements(SKELETON, "k")
  st.parse("$L_new:\n.reg .b32 %z;\nbra $L_new;")
  for text, what in (("bra $L_new;", "undefined symbol '$L_new'"), ("mov.b32 %z, 1;", "undefined register '%z'")):
    with pytest.raises(ptx.PtxError, match=re.escape(what)): st.parse(text)


needs_nvcc = pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc (CUDA 13) not installed: no PTX corpus")


@needs_nvcc
def test_generated_cases_parse_as_in_the_whole_module():
  """1,000 cases of the category against whole-module parses of the skeleton the category builds from the corpus
  (a fifth to a third of them valid)."""
  cat, skeleton = R.CATEGORIES["decode-ptx-lines"], R._ptx_lines()[3].module
  text = ptx.format_ptx(skeleton)
  ok = sum(_compare(text, cat.make(R.case_rng(cat.name, 22, i))) for i in range(1000))
  assert 150 < ok < 600, ok


@needs_nvcc
def test_corpus_statements_are_valid_in_the_skeleton():
  """The category's statements are the corpus's: they parse in the skeleton, but for declarations of what the skeleton
  declares too (its registers, a body's local depot) and a .func's own return parameter."""
  units, _, _, st = R._ptx_lines()
  bad = []
  for u in units:
    try: st.parse(u)
    except ptx.PtxError as e: bad.append(str(e).split("\n")[0])
  assert len(units) > 1500 and len(bad) < len(units) // 5, len(bad)
  assert all(re.search(r"func_retval|duplicate (register|definition)", b) for b in bad), bad[:5]


@needs_nvcc
def test_category_runs_clean():
  rows, _ = R.campaign(["decode-ptx-lines"], 3000, seed=5, jobs=1)
  row = rows["decode-ptx-lines"]
  assert row.cases == 3000 and not any(row.counts[k] for k in R.BAD) and row.counts["ok"] > 300, row.counts
