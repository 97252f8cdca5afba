"""Every shared LLVM MC vector (../shared/vendor/llvm-mc/*.jsonl): assembly -> bytes exact, bytes -> text equal.

The oracle is LLVM's own test data; where llvm-mc-22 is installed its disassembly of the bytes is the
expected text (LLVM's CHECK lines are assembler output and sometimes differ from what the disassembler
prints, e.g. `0.5` vs `0x3800` for i16 operands). Without llvm-mc-22, CHECK lines are compared directly
and `asm_from: input` lines (possibly aliases) are checked by re-assembling our text to the same bytes.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gputwin.errors import AsmError, DecodeError
from gputwin.isa import assemble, disassemble

VEC = Path(__file__).resolve().parents[3] / "shared" / "vendor" / "llvm-mc"
LLVM_MC = shutil.which("llvm-mc-22")
norm = lambda s: " ".join(s.split())


def _vectors(arch: str) -> list[dict]:
  p = VEC / f"{arch}.jsonl"
  if not p.exists():
    pytest.skip(f"{p} not present")
  return [json.loads(l) for l in p.read_text().splitlines() if l.strip()]


def _wave(v: dict) -> int | None:
  m = v.get("mattr") or ""
  return 64 if "wavefrontsize64" in m else 32 if "wavefrontsize32" in m else v.get("wave")


def _llvm_disasm(arch: str, vs: list[dict]) -> dict[int, str]:
  """One llvm-mc-22 --disassemble call per mattr group; vectors llvm-mc rejects are left out."""
  groups: dict[str, list[int]] = {}
  for i, v in enumerate(vs):
    if v["llvm_mc_22"] != "rejected":
      groups.setdefault(v.get("mattr") or "", []).append(i)
  out = {}
  for mattr, idx in groups.items():
    args = [LLVM_MC, "-triple=amdgcn", f"-mcpu={arch}", "--disassemble"] + ([f"-mattr={mattr}"] if mattr else [])
    text = "\n".join(" ".join(f"0x{b:02x}" for b in bytes.fromhex(vs[i]["hex"])) for i in idx)
    res = subprocess.run(args, input=text, capture_output=True, text=True, timeout=120).stdout
    lines = [norm(l.split(";")[0]) for l in res.splitlines() if l.startswith("\t")]
    if len(lines) == len(idx):
      out.update(zip(idx, lines))
  return out


def _report(arch: str, what: str, ok: int, n: int, bad: list):
  print(f"\n{arch} {what}: {ok}/{n} ({100 * ok / max(n, 1):.1f}%)")
  assert not bad, f"{arch} {what}: {len(bad)} of {n} differ, e.g.\n" + "\n".join(map(str, bad[:15]))


@pytest.mark.parametrize("arch", ("gfx1100", "gfx1200", "gfx942", "gfx950"))
def test_asm_to_bytes(arch):
  vs = _vectors(arch)
  ok, bad = 0, []
  for v in vs:
    try:
      got = assemble(v["asm"], arch, wave=_wave(v)).hex()
    except AsmError as e:
      got = f"AsmError: {e.msg}"
    want = "AsmError" if v["llvm_mc_22"] == "rejected" else v["hex"]
    if got == want or want == "AsmError" and got.startswith("AsmError"):
      ok += 1
    else:
      bad.append((v["asm"], want, got))
  _report(arch, "asm->bytes", ok, len(vs), bad)


@pytest.mark.parametrize("arch", ("gfx1100", "gfx1200", "gfx942", "gfx950"))
def test_bytes_to_asm(arch):
  vs = _vectors(arch)
  ref = _llvm_disasm(arch, vs) if LLVM_MC else {}
  ok, bad = 0, []
  for i, v in enumerate(vs):
    data = bytes.fromhex(v["hex"])
    if v["llvm_mc_22"] == "rejected":  # not an instruction for LLVM 22 (nor in the vendor XML)
      with pytest.raises(DecodeError):
        disassemble(data, arch, wave=_wave(v))
      ok += 1
      continue
    try:
      got = disassemble(data, arch, wave=_wave(v))
      got = got[0] if len(got) == 1 else repr(got)
    except DecodeError as e:
      got = f"DecodeError: {e}"
    if i in ref:
      good = got == ref[i]
    elif v["asm_from"] == "check":
      good = got == norm(v["asm"])
    else:
      good = not got.startswith("DecodeError") and assemble(got, arch, wave=_wave(v)) == data
    if good:
      ok += 1
    else:
      bad.append((v["hex"], ref.get(i) or v["asm"], got))
  _report(arch, "bytes->asm", ok, len(vs), bad)
