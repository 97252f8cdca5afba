"""Every instruction form nvcc 13 emits for our CUDA kernels (gputwin/verify/corpus/ptx, sm_80 and sm_90) has PTX
semantics (gputwin.pcode.ptx), except the ones the emulator runs as machine operations: mma, wmma, ldmatrix, stmatrix,
cp.async and mbarrier (emu/ptx/tensor.py), call and vector moves (emu/ptx)."""
from __future__ import annotations

from gputwin.errors import PcodeError
from gputwin.isa.ptx import Instruction, Scope, parse
from gputwin.pcode import ptx, semantics

MACHINE = {"mma", "wmma", "ldmatrix", "stmatrix", "cp", "mbarrier", "call", "cvta", "brx"}


def _instructions(body):
  for s in body or ():
    if isinstance(s, Instruction):
      yield s
    elif isinstance(s, Scope):
      yield from _instructions(s.body)


def test_every_form_nvcc_emits_has_semantics(ptx_modules):
  forms, missing = set(), []
  for path in ptx_modules.values():
    m = parse(path.read_text(), str(path))
    for f in m.functions.values():
      for i in _instructions(f.body):
        if i.opcode in MACHINE or (i.opcode == "mov" and any(type(o).__name__ == "Vec" for o in i.operands)):
          continue
        forms.add((i.opcode, i.modifiers))
  for op, mods in sorted(forms):
    try:
      semantics("ptx", ptx.key(op, mods))
    except PcodeError as e:
      missing.append(f"{op}.{'.'.join(mods)}: {e}")
  assert len(forms) > 250 and not missing, missing
