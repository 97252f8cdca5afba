"""The instruction-form table against the PTX ISA 9.0 reference in ../shared (skipped without it): every opcode has a
reference page whose syntax writes it, and every form taken from a page names an instruction that page's syntax has."""
from __future__ import annotations

import re

import pytest
from ptx_oracle import VENDOR_PTX

from gputwin.isa.ptx import forms

ISA = VENDOR_PTX / "isa-9.0"
needs_docs = pytest.mark.skipif(not ISA.is_dir(), reason="../shared/vendor/ptx/isa-9.0 not present")


def _syntax(page: str) -> str:
  return "\n".join(re.findall(r"^### Syntax\s*$(.*?)(?=^### |\Z)", page, re.S | re.M))


def literal_name(f: forms.Form) -> str:
  """The instruction name a form spells before its first modifier group: `cp.async.ca`, `mma.sync.aligned`."""
  lits = []
  for s in f.slots:
    if not s.required or s.allowed != {s.name}: break
    lits.append(s.name)
  return ".".join([f.opcode] + lits)


@needs_docs
def test_every_opcode_has_a_reference_syntax():
  syntax = {p.stem: _syntax(p.read_text()) for p in ISA.glob("*.md")}
  for op in forms.table():
    assert any(re.search(rf"(?m)^\s*(@\w+\s+)?{re.escape(op)}[.{{ ;]", s) for s in syntax.values()), op


@needs_docs
def test_forms_from_a_page_name_its_instructions():
  for op, fs in forms.table().items():
    for f in fs:
      if f.src.startswith("manual"): continue  # our transcription of a section the reference copy lacks
      page = _syntax((ISA / f"{f.src}.md").read_text())
      name = literal_name(f)
      assert re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", page), (name, f.src)


def test_table_covers_what_nvcc_emits_for_the_issue_features():
  want = """add sub mul mad mul24 mad24 div rem abs neg min max popc clz bfind brev bfe bfi prmt shf shl shr lop3 dp4a
    dp2a addc subc madc fma rcp sqrt rsqrt sin cos lg2 ex2 tanh copysign testp cvt setp set selp slct mov cvta isspacep
    ld st ldu atom red fence membar bar barrier shfl vote match redux activemask elect nanosleep exit ret trap brkpt
    call bra brx cp mbarrier ldmatrix stmatrix wmma mma and or xor not cnot""".split()
  assert not [op for op in want if not forms.lookup(op)]
  form, why, _, _ = forms.check("ld", ("global", "nc", "v4", "f32"), ())
  assert form is None and "operands" in why  # the form exists; only the operands are missing


@pytest.mark.parametrize("mods, ok", [
  (("rn", "f32", "s32"), True), (("f32", "s32", "rn"), True),  # modifiers in any order, like ptxas
  (("rn", "s32", "f32"), False), (("f32", "s32"), False),     # float->int needs .rni-style; int->float needs .rn
  (("rzi", "s32", "f32"), True), (("rn", "ftz", "f32", "f32"), False)])
def test_modifier_matching(mods, ok):
  assert any(f.match(mods) is not None for f in forms.lookup("cvt")) == ok


@needs_docs
def test_committed_table_is_what_the_generator_builds():
  import json

  from gputwin.isa.ptx import gen_forms
  assert json.loads(json.dumps(gen_forms.build(ISA))) == json.loads(forms.FORMS_JSON.read_text())
