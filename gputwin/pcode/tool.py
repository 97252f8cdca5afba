"""`gputwin pcode --coverage [--json]` and `gputwin pcode --show NAME --arch ARCH`, as functions for cli.py."""
from __future__ import annotations

import builtins
import json as _json
from pathlib import Path

from gputwin.errors import PcodeError
from gputwin.pcode import bodies, compiled, family_of, operand_bits, semantics, source_text, unsupported_calls, vendor_text
from gputwin.pcode.compile import generate
from gputwin.pcode.errata import excluded
from gputwin.pcode.ir import dump, lower
from gputwin.pcode.parser import parse

TESTED = Path(__file__).with_name("tested.json")  # written by a passing `pytest tests/pcode` run


def tested() -> dict[str, dict[str, list[str]]]:
  """family -> instruction -> what the test suite checked it against (from the last passing test run)."""
  try:
    return _json.loads(TESTED.read_text())
  except (OSError, ValueError):
    return {}


def coverage(json: bool = False) -> dict:
  """{"rdna3": {"total", "parsed", "compiled", "excluded", "tested", ...}, "rdna4": {...}, "cdna": {...}}.

  total: vendor pcode bodies plus the ones errata.py adds (`added`); excluded: graphics-only bodies (listed with reasons); parsed/compiled: the other
  bodies that parse / compile to Python; tested: bodies executed against an independent oracle by the test suite.
  Extra keys: needs_hook (compiled bodies calling a built-in gputwin does not implement, e.g. CalcBufferAddr,
  MATRIX_MULTIPLY_ACCUMULATE: these raise 'not supported' unless the caller's memory object provides it),
  errata (bodies corrected by errata.py), checked (instruction -> what was checked), excluded_list, failures,
  hooks (built-in -> bodies needing it). With json=False the human-readable table and the per-opcode checked list
  are also printed to stdout (the CLI's plain `--coverage`); the returned dict is the same either way."""
  from gputwin.isa.vendor import FAMILIES, tables
  done = tested()
  out: dict = {}
  for fam in FAMILIES:
    t = tables(fam)
    names = bodies(fam)
    row = {"total": len(names), "added": len(names) - len(t.pcode), "parsed": 0, "compiled": 0, "excluded": 0,
           "tested": 0, "needs_hook": 0, "errata": 0}
    excl, fails, hooks = {}, {}, {}
    for name in names:
      why = excluded(name)
      if why:
        excl[name] = why
        continue
      fixed, used = source_text(fam, name)
      row["errata"] += bool(used)
      try:
        parse(fixed, fam, name)
        row["parsed"] += 1
        compiled(fam, name, fixed)
        sem = semantics(fam, name)
        row["compiled"] += 1
        need = unsupported_calls(sem)
        if need:
          row["needs_hook"] += 1
          for c in need:
            hooks[c] = hooks.get(c, 0) + 1
      except PcodeError as e:
        fails[name] = str(e)
    row["excluded"] = len(excl)
    checked = {n: w for n, w in done.get(fam, {}).items() if n in names}
    row["tested"] = len(checked)
    row.update(checked=checked, excluded_list=excl, failures=fails, hooks=dict(sorted(hooks.items())))
    out[fam] = row
  if not json:
    builtins.print(coverage_text(out))
  return out


def coverage_text(cov: dict | None = None) -> str:
  cov = cov or coverage()
  lines = [f"{'family':8} {'total':>6} {'parsed':>7} {'compiled':>9} {'excluded':>9} {'tested':>7} {'needs_hook':>11}"]
  for fam, r in cov.items():
    lines.append(f"{fam:8} {r['total']:6} {r['parsed']:7} {r['compiled']:9} {r['excluded']:9} {r['tested']:7} "
                 f"{r['needs_hook']:11}")
  for fam, r in cov.items():
    lines.append(f"\n{fam}: checked against independent oracles ({len(r['checked'])})")
    for n, w in r["checked"].items():
      lines.append(f"  {n:28} {'; '.join(w)}")
    if r["failures"]:
      lines.append(f"{fam}: FAILED {len(r['failures'])}")
      lines += [f"  {v}" for v in r["failures"].values()]
  return "\n".join(lines)


def show(name: str, family: str = "rdna3") -> str:
  """Vendor text, errata applied, typed IR and generated Python for one instruction."""
  fam = family_of(family)
  if fam == "ptx":  # PTX: `add.rz.f32`, canonicalised like the frontend's key (modifiers that change nothing dropped)
    from gputwin.pcode import ptx
    op, *mods = name.lower().split(".")
    name = ptx.key(op, mods)
  elif fam != "ir3":  # ir3 keys are Mesa's lower-case leaf names (`add.f`, `cmps.f.lt.h`): see pcode/ir3.py
    name = name.upper()
  text = vendor_text(fam, name)
  ours = {"ptx": "ptx.py", "ir3": "ir3.py"}.get(fam, "errata.py")
  out = [f"== {name} ({fam}) vendor pseudocode", text or f"(none: the body below is ours, from {ours})"]
  why = excluded(name)
  if why:
    return "\n".join(out + [f"== excluded: {why}"])
  fixed, used = source_text(fam, name)
  for e in used:
    out += [f"== erratum: {e.why}", f"   evidence: {e.evidence}"]
  if used:
    out += ["== corrected text", fixed]
  prog = lower(parse(fixed, fam, name), fam, name, operand_bits(fam, name))
  src, _ = generate(prog)
  sem = semantics(fam, name)
  out += ["== typed IR", dump(prog), "== generated Python (numpy, whole batch of lanes)", src.rstrip()]
  need = unsupported_calls(sem)
  if need:
    out.append(f"== needs hooks: {', '.join(sorted(need))} (raise 'not supported' unless provided)")
  checks = tested().get(fam, {}).get(name)
  out.append(f"== tested: {'; '.join(checks)}" if checks else "== tested: not by an oracle test")
  return "\n".join(out)


if __name__ == "__main__":  # python -m gputwin.pcode.tool [--json] | NAME [ARCH]
  import sys
  if len(sys.argv) > 1 and sys.argv[1] != "--json":
    builtins.print(show(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "rdna3"))
  else:
    c = coverage(True)
    builtins.print(_json.dumps({f: {k: r[k] for k in ("total", "parsed", "compiled", "excluded", "tested")}
                                for f, r in c.items()}) if "--json" in sys.argv else coverage_text(c))
