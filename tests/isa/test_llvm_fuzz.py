"""Differential fuzz of gputwin's AMD disassembler/assembler against llvm-mc-22 (issue 2, verification).

For every target and every (encoding variant, opcode) case of the vendor tables, `gputwin.isa.strategies` builds a
random valid instruction. Then, per case:
  1. bytes -> `llvm-mc-22 --disassemble` text; words llvm-mc rejects are counted and discarded (cases it rejects
     are redrawn, each time tamer);
  2. `gputwin.isa.disassemble(bytes)` must equal llvm-mc's text (whitespace-normalised);
  3. `gputwin.isa.assemble(text)` must equal `llvm-mc-22 -show-encoding` of the same text (where llvm-mc rejects
     its own text, gputwin must reject it too).
All words of a target go through one llvm-mc call per direction and round; separator lines map outputs to inputs
(see `llvm_disassemble`), and an input that crashes llvm-mc is isolated by bisection and reported as CRASH.

An opcode agrees when all its valid samples agree and disagrees when one does not. Every opcode must agree or sit
in fuzz_exclusions.json: "targets" holds only llvm-mc-22 facts with their evidence (opcodes it never accepts on the
target, and why); a gputwin/llvm-mc disagreement is a bug and fails the test until fixed, unless it is listed, with
what gputwin does and what llvm-mc-22 does, in the separate "gputwin_known_gaps" category (open bugs, counted as
known gaps in the summary, which also counts listed gaps this run did not hit; the hypothesis test skips them too).
Mismatches go to fuzz_failures/<target>.txt (one sample per opcode, with bytes) and per-target numbers to
fuzz_failures/summary.txt. Also here: the opcodes targets.py says a target lacks must be rejected by llvm-mc-22,
the hypothesis front end of the strategies agrees too, and decoding random words raises only DecodeError
(bench/decode_fuzz.py runs millions).

Run: `pytest tests/isa/test_llvm_fuzz.py` (CI size: seed 0, up to 10 draws per case llvm-mc rejects; ~20 s);
     `pytest -m slow tests/isa/test_llvm_fuzz.py` (full strength: 8 seeds, wave64 on RDNA; ~90 s; writes
     fuzz_failures/<target>.full.txt);
     `python tests/isa/test_llvm_fuzz.py [--seeds N] [--exclusions]` refreshes fuzz_failures/ (and, with
     --exclusions, regenerates fuzz_exclusions.json from the evidence of the CI-sized run).
"""
from __future__ import annotations

import collections
import functools
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gputwin.errors import DecodeError, GputwinError
from gputwin.isa import strategies as S
from gputwin.isa.targets import target as get_target
from gputwin.isa.vendor import tables

LLVM_MC = "llvm-mc-22"
TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")
HERE = Path(__file__).parent
FAILURES = HERE / "fuzz_failures"
EXCLUSIONS = HERE / "fuzz_exclusions.json"

needs_llvm = pytest.mark.skipif(shutil.which(LLVM_MC) is None,
                                reason=f"{LLVM_MC} not installed (apt-get install llvm-22)")


def norm(text: str) -> str:
  return " ".join(text.split())


def _api():
  """gputwin's assembler/disassembler, or None while they do not exist yet."""
  try:
    from gputwin.isa import assemble, disassemble
    return assemble, disassemble
  except ImportError:
    return None


# ------------------------------------------------------------------------------------------- the llvm-mc oracle


def _mattr(tgt, wave: int | None) -> str:
  return tgt.mattr.replace(f"+wavefrontsize{tgt.wave}", f"+wavefrontsize{wave or tgt.wave}")


def _mc(args: list[str], text: str, tgt, wave: int | None) -> tuple[str, str, int]:
  cmd = [LLVM_MC, "-triple=amdgcn", f"-mcpu={tgt.name}", f"-mattr={_mattr(tgt, wave)}", "-show-encoding", *args]
  r = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=300)
  return r.stdout, r.stderr, r.returncode


_ENC = re.compile(r"^\s*(.*?)\s*; encoding: \[([0-9a-fx,]*)\]")
_DIAG = re.compile(r"^<stdin>:(\d+):(\d+): (warning|error): (.*)$", re.M)


def _encodings(out: str) -> list[tuple[str, bytes]]:
  res = []
  for line in out.splitlines():
    if m := _ENC.match(line):
      res.append((norm(m[1]), bytes(int(b, 16) for b in m[2].split(",") if b)))
  return res


_MARK = "s_mov_b32 s0, 0x7e57ab1e"  # a separator instruction every target has; fuzz words practically never equal it


@functools.cache
def _marker(arch: str) -> tuple[bytes, str]:
  """The separator's bytes for `arch` and the text llvm-mc-22 prints for them."""
  enc = _encodings(_mc([], _MARK + "\n", get_target(arch), get_target(arch).wave)[0])[0][1]
  return enc, norm(_MARK)


CRASH = "<llvm-mc-22 crashed>"  # an input that makes llvm-mc-22 itself die (a finding about LLVM, listed as such)


def _robust(items: list, attempt) -> list:
  """Results of `attempt` over `items`, surviving llvm-mc crashes.

  `attempt(part)` returns (results, crashed), where a crashed run's results are a reliable prefix. After a crash the
  first crashing item is found by doubling and bisecting prefixes (crashing is monotonic in the prefix), gets CRASH,
  and the run resumes after it."""
  res: list = []
  while len(res) < len(items):
    part, crashed = attempt(items[len(res):])
    res += part
    if not crashed:
      break
    rest, n = items[len(res):], 1
    while n < len(rest) and not attempt(rest[:n])[1]:
      n *= 2
    lo, hi = n // 2, min(n, len(rest))  # prefix of lo items is fine, of hi items crashes
    while hi - lo > 1:
      mid = (lo + hi) // 2
      lo, hi = (mid, hi) if not attempt(rest[:mid])[1] else (lo, mid)
    res += attempt(rest[:lo])[0] if lo else []
    res.append(CRASH)
  return res


def llvm_disassemble(chunks: list[bytes], arch: str, wave: int | None = None) -> list[str | None]:
  """llvm-mc-22's text for each chunk; None where it does not decode as exactly one instruction of that size, CRASH
  where llvm-mc-22 dies on it.

  Each chunk is one `[0x.. 0x..]` line followed by a separator line: llvm-mc decodes a bracket as a unit, abandons
  the rest of a bracket at the first bad word and warns "invalid instruction encoding" at its line ("potentially
  undefined" soft fails still print). (-show-encoding cannot map outputs to inputs: it prints the re-encoded bytes,
  not the input.) So a chunk is valid iff exactly one line comes out before its separator and no invalid-encoding
  warning names its line."""
  tgt = get_target(arch)
  mark, mark_text = _marker(arch)
  def line(c): return "[" + " ".join(f"0x{b:02x}" for b in c) + "]"
  def attempt(part: list[bytes]):
    text = "".join(f"{line(c)}\n{line(mark)}\n" for c in part)
    r = subprocess.run([LLVM_MC, "-triple=amdgcn", f"-mcpu={tgt.name}", f"-mattr={_mattr(tgt, wave)}",
                        "--disassemble"], input=text, capture_output=True, text=True, timeout=300)
    bad = {int(m[1]) for m in _DIAG.finditer(r.stderr) if m[4].startswith("invalid instruction encoding")}
    segs, cur = [], []
    for ln in r.stdout.splitlines():
      if not (ln := norm(ln)):
        continue
      if ln == mark_text:
        segs.append(cur)
        cur = []
      else:
        cur.append(ln)
    crashed = r.returncode < 0 or r.returncode > 1
    assert crashed or (len(segs) == len(part) and not cur), f"llvm-mc output not mapped ({len(segs)} of {len(part)})"
    return [seg[0] if len(seg) == 1 and 2 * i + 1 not in bad else None for i, seg in enumerate(segs)], crashed
  return _robust(chunks, attempt)


def llvm_assemble(texts: list[str], arch: str, wave: int | None = None) -> list[bytes | str]:
  """llvm-mc-22's bytes for each line of text, or its error message (a str) where it rejects the line.

  A separator line follows each text: llvm-mc sometimes reports an error *and* still encodes the line (e.g. "nv is
  not supported on this GPU"), so outputs are grouped by separators, and a line with an error is rejected."""
  tgt = get_target(arch)
  mark = _marker(arch)[0]
  def attempt(part: list[str]):
    out, err, rc = _mc([], "".join(f"{t}\n{_MARK}\n" for t in part), tgt, wave)
    if rc < 0 or rc > 1:  # killed by a signal (llvm-mc returns 1 for plain errors)
      return [], True
    errs: dict[int, str] = {}
    for m in _DIAG.finditer(err):
      if m[3] == "error":
        errs.setdefault(int(m[1]), m[4])
    segs, cur = [], []
    for _, enc in _encodings(out):
      if enc == mark:
        segs.append(cur)
        cur = []
      else:
        cur.append(enc)
    assert len(segs) == len(part), f"llvm-mc output not mapped ({len(segs)} of {len(part)})"
    return [errs.get(2 * i + 1) or (seg[0] if len(seg) == 1 else f"{len(seg)} encodings")
            for i, seg in enumerate(segs)], False
  return _robust(texts, attempt)


# --------------------------------------------------------------------------------------------------- the run


@dataclass
class Result:
  """Per target: every sample's fate, grouped by opcode key (VOP3Op.V_FMA_F32)."""
  arch: str
  tried: collections.Counter = field(default_factory=collections.Counter)  # opcode key -> words generated
  valid: collections.Counter = field(default_factory=collections.Counter)  # ... llvm-mc decoded
  agree: collections.Counter = field(default_factory=collections.Counter)
  fails: dict = field(default_factory=lambda: collections.defaultdict(list))  # key -> [mismatch lines]
  rejected: dict = field(default_factory=dict)  # key -> one rejected sample (evidence)
  asm_rejected: dict = field(default_factory=dict)  # key -> (text, llvm error): llvm-mc rejects its own text
  crashes: dict = field(default_factory=dict)  # sample name -> a sample llvm-mc-22 --disassemble dies on
  roundtrip: collections.Counter = field(default_factory=collections.Counter)  # ... llvm-mc assembled its text

  def status(self, key: str) -> str:
    if self.fails.get(key):
      return "disagree"
    if self.valid[key] == 0:
      return "rejected"
    return "agree" if self.agree[key] else "asm-rejected"


def keys_of(arch: str, sample: S.Sample) -> list[str]:
  tab = tables(get_target(arch).family)
  return [S.opcode_key(tab, sample.encoding, op) for op in sample.opcodes] or [S.opcode_key(tab, sample.encoding, "")]


def all_keys(arch: str, graphics: bool = True) -> set[str]:
  tab = tables(get_target(arch).family)
  return {S.opcode_key(tab, e, o) for e, o in S.cases(arch, graphics=graphics)}


def run(arch: str, seeds=(0,), rounds: int = 10, wave: int | None = None, res: Result | None = None,
        graphics: bool = True) -> Result:
  """Fuzz one target: per seed, one sample per case; cases llvm-mc rejected (or whose text it will not assemble)
  are redrawn up to `rounds` times, each time tamer (modifiers more likely at their defaults), so rare valid forms
  and byte-comparable round trips are still reached."""
  res = res or Result(arch)
  api = _api()
  for seed in seeds:
    todo = S.cases(arch, graphics=graphics)
    for rnd in range(rounds):
      samples = S.batch(arch, seed * 1000 + rnd, todo, wave, tame=min(50 + 10 * rnd, 95))
      texts = llvm_disassemble([s.data for s in samples], arch, wave)
      for s, t in zip(samples, texts):
        if t == CRASH:
          res.crashes.setdefault(s.name, s)
      texts = [None if t == CRASH else t for t in texts]
      ok = [(s, t) for s, t in zip(samples, texts) if t is not None]
      for s, t in zip(samples, texts):
        for k in keys_of(arch, s):
          res.tried[k] += 1
          if t is None:
            res.rejected.setdefault(k, s)
      drawn = todo
      todo = [c for c, t in zip(drawn, texts) if t is None]  # batch() keeps the order of its cases
      llvm_bytes = llvm_assemble([t for _, t in ok], arch, wave)
      for (s, t), lb in zip(ok, llvm_bytes):
        ks = keys_of(arch, s)
        for k in ks:
          res.valid[k] += 1
        problems = compare(api, s, t, lb, arch, wave)
        for k in ks:
          if isinstance(lb, str):
            res.asm_rejected.setdefault(k, (t, lb))
          else:
            res.roundtrip[k] += 1
        for k in ks:
          if problems:
            res.fails[k].append(problems)
          else:
            res.agree[k] += 1
      # a case whose text llvm-mc will not assemble is redrawn too, so most opcodes get a byte-compared round trip
      redo = {id(s) for (s, _), lb in zip(ok, llvm_bytes) if isinstance(lb, str)}
      todo += [c for c, s in zip(drawn, samples)
               if id(s) in redo and not any(res.roundtrip[k] for k in keys_of(arch, s))]
      if not todo:
        break
  return res


def compare(api, s: S.Sample, text: str, llvm_bytes: bytes | str, arch: str, wave: int | None) -> str:
  """'' when gputwin matches llvm-mc on this sample, else a report line for fuzz_failures/<arch>.txt."""
  if api is None:
    return "gputwin.isa.assemble/disassemble missing"
  assemble, disassemble = api
  head = f"[{s.encoding}] {s.hex}\n  llvm-mc: {text}\n"
  try:
    ours = disassemble(s.data, arch, wave=wave)
  except Exception as e:  # noqa: BLE001 - any failure is a finding, reported with its type
    return head + f"  ours:    raised {type(e).__name__}: {e}\n"
  if [norm(x) for x in ours] != [text]:
    return head + f"  ours:    {' | '.join(norm(x) for x in ours)}\n"
  if isinstance(llvm_bytes, str):
    try:
      got = assemble(text, arch, wave=wave)
    except GputwinError:
      return ""  # both reject llvm-mc's own text
    return head + f"  llvm-mc -show-encoding rejects it ({llvm_bytes}); ours assembles {got.hex()}\n"
  try:
    got = assemble(text, arch, wave=wave)
  except Exception as e:  # noqa: BLE001
    return head + f"  assemble raised {type(e).__name__}: {e}\n"
  if got != llvm_bytes:
    return head + f"  assemble: ours {got.hex(' ')} != llvm-mc {llvm_bytes.hex(' ')}\n"
  return ""


# ------------------------------------------------------------------------------------- exclusions and reports


def load_exclusions() -> dict[str, dict[str, str]]:
  return json.loads(EXCLUSIONS.read_text())["targets"] if EXCLUSIONS.exists() else {}


def load_known_gaps() -> dict[str, dict[str, str]]:
  """The separate "gputwin_known_gaps" category: open gputwin/llvm-mc-22 disagreements, each with its reason."""
  data = json.loads(EXCLUSIONS.read_text()) if EXCLUSIONS.exists() else {}
  return data.get("gputwin_known_gaps", {}).get("targets", {})


def summarize(res: Result, graphics: bool = True, label: str = "") -> tuple[str, list[str]]:
  """One summary line for the target, and the opcode keys that neither agree nor are excluded."""
  keys = all_keys(res.arch, graphics)
  excl = load_exclusions().get(res.arch, {})
  gaps = load_known_gaps().get(res.arch, {})
  st_ = collections.Counter(res.status(k) for k in keys)
  bad = sorted(k for k in keys if res.status(k) != "agree" and k not in excl and k not in gaps)
  lacked = {S.opcode_key(tables(get_target(res.arch).family), e, o) for e, o in S.cases(res.arch, lacking=True)}
  line = (f"{res.arch}{label}: opcodes {len(keys)} (+{len(lacked)} lacked per targets.py, excluded), "
          f"exercised {sum(1 for k in keys if res.tried[k])}, "
          f"valid per llvm-mc {len(keys) - st_['rejected']}, agree {st_['agree']}, disagree {st_['disagree']}, "
          f"never valid {st_['rejected']}, assembly bytes compared for {sum(1 for k in keys if res.roundtrip[k])} "
          f"(llvm-mc rejects its own text in some sample of {len(res.asm_rejected)}), "
          f"excluded {sum(1 for k in keys if k in excl)}, "
          f"known gaps {sum(1 for k in keys if k in gaps and res.status(k) != 'agree')} "
          f"(+{sum(1 for k in keys if k in gaps and res.status(k) == 'agree')} listed that agree in this run), "
          f"unexplained {len(bad)}; words tried "
          f"{sum(res.tried.values())}, llvm-mc rejected {sum(res.tried.values()) - sum(res.valid.values())}"
          + (f", llvm-mc crashed on {len(res.crashes)} opcodes" if res.crashes else ""))
  return line, bad


def _kind(report: str) -> str:
  """The kind of a mismatch report written by compare()."""
  third = report.splitlines()[2].strip()
  return ("disassemble raised" if "raised" in third and third.startswith("ours") else
          "disassembly text differs" if third.startswith("ours") else
          "assemble raised" if "assemble raised" in third else
          "assembles text llvm-mc rejects" if "rejects it" in third else "assembled bytes differ")


def write_failures(res: Result, label: str = ""):
  FAILURES.mkdir(exist_ok=True)
  lines = [f"# {res.arch}: gputwin vs llvm-mc-22 mismatches (one sample per opcode; regenerate with "
           "`python tests/isa/test_llvm_fuzz.py`)", "# opcodes per vendor opcode enum and kind of mismatch:"]
  kinds = collections.Counter()
  for k, fs in res.fails.items():
    kinds[(k.split(".")[0], _kind(fs[0]))] += 1
  lines += [f"#   {n:4} {enum:12} {kind}" for (enum, kind), n in kinds.most_common()] + [""]
  seen = set()
  for k in sorted(res.fails):
    first = res.fails[k][0]
    if first not in seen:
      seen.add(first)
      lines.append(f"{k} ({len(res.fails[k])} of {res.valid[k]} samples)\n{first}")
  no_rt = sorted(k for k in res.valid if res.valid[k] and not res.roundtrip[k])
  if no_rt:  # every sample's text was rejected by llvm-mc's own assembler: only "both reject" was checked
    lines.append("# valid opcodes without a byte-compared round trip (llvm-mc rejected its text in every sample)\n")
    lines += [f"{k}: {res.asm_rejected[k][0]}  -> {res.asm_rejected[k][1]}" for k in no_rt] + [""]
  if res.crashes:  # llvm-mc-22 bugs: counted as rejected words
    lines.append("# llvm-mc-22 --disassemble crashes on these words (counted as rejected)\n")
    lines += [f"{n}: [{s.encoding}] {s.hex}" for n, s in sorted(res.crashes.items())] + [""]
  if res.asm_rejected:  # not gputwin bugs: what llvm-mc-22 prints but will not assemble (ours must reject it too)
    lines.append("# llvm-mc-22 rejects its own disassembly (gputwin's assembler must reject these as well)\n")
    lines += [f"{k}: {t}  -> {e}" for k, (t, e) in sorted(res.asm_rejected.items())]
  (FAILURES / f"{res.arch}{label.replace(' ', '.')}.txt").write_text("\n".join(lines) + "\n")


def mnemonic(key: str) -> str:
  """llvm-mc spelling of an opcode key's plain form: VOP3Op.V_ADD_F32 -> v_add_f32_e64 (VOP1/2/C: _e32)."""
  enum, name = key.split(".", 1) if "." in key else (key, key)
  suffix = "_e64" if enum == "VOP3Op" else "_e32" if enum in ("VOP1Op", "VOP2Op", "VOPCOp") else ""
  return name.lower() + suffix


def probe(keys: list[str], arch: str) -> dict[str, str]:
  """What llvm-mc-22 says about each opcode's bare mnemonic (no operands): "not supported on this GPU", "invalid
  instruction" (unknown mnemonic), "e64 variant ... not supported", or an operand complaint (the mnemonic exists)."""
  keys = [k for k in keys if "." in k]
  said = llvm_assemble([mnemonic(k) for k in keys], arch)
  return {k: r if isinstance(r, str) else "accepted" for k, r in zip(keys, said)}


def lacked_samples(arch: str, seeds=range(3)) -> tuple[dict[str, list], dict[str, str]]:
  """Samples of the opcodes targets.py says `arch` lacks, and which of them llvm-mc-22 nevertheless decodes."""
  lacked, samples, accepted = S.cases(arch, lacking=True), collections.defaultdict(list), {}
  tab = tables(get_target(arch).family)
  for seed in seeds:
    batch = S.batch(arch, seed, lacked, tame=50 + 20 * seed)
    for s, t in zip(batch, llvm_disassemble([s.data for s in batch], arch)):
      samples[S.opcode_key(tab, s.encoding, s.opcodes[0] if s.opcodes else "")].append(s)
      if t is not None and t != CRASH:
        accepted.setdefault(s.name, f"[{s.encoding}] {s.hex} -> {t}")
  return samples, accepted


def lacked_exclusions(arch: str) -> dict[str, str]:
  """Entries for the opcodes the target lacks per targets.py, with llvm-mc-22's evidence."""
  samples, _ = lacked_samples(arch)
  said = probe(sorted(samples), arch)
  return {k: f"not on {arch}: gputwin/isa/data/target_deltas.json lists it and llvm-mc-22 rejected all {len(ss)} "
             f"generated words (e.g. [{ss[0].encoding}] {ss[0].hex}); `{mnemonic(k)}`: {said.get(k, '?')}"
          for k, ss in samples.items()}


def evidence_exclusions(results: list[Result]) -> dict:
  """Exclusion entries from a run's evidence (never a blanket entry): opcodes llvm-mc-22 never accepted, with what
  llvm-mc-22 says about the mnemonic, and opcodes whose llvm-mc text llvm-mc itself rejects. Disagreements between
  gputwin and llvm-mc are not excluded: they are bugs, listed in fuzz_failures/<target>.txt."""
  out = {}
  for res in results:
    keys = sorted(k for k in all_keys(res.arch) if res.status(k) in ("rejected", "asm-rejected"))
    said = probe([k for k in keys if res.status(k) == "rejected"], res.arch)
    ent = {}
    for k in keys:
      if res.status(k) == "asm-rejected":
        t, e = res.asm_rejected[k]
        ent[k] = f"llvm-mc-22 disassembles it as '{t}' but rejects that text: {e}"
        continue
      s, msg = res.rejected.get(k), said.get(k, "")
      twins = sorted(o for o in all_keys(res.arch) if o != k and o.split(".")[-1] == k.split(".")[-1]
                     and res.valid[o])
      ex = f"all {res.tried[k]} generated words rejected, e.g. [{s.encoding}] {s.hex}" if s else "never generated"
      if twins:
        why = (f"llvm-mc-22 takes this opcode only in the encoding of {', '.join(twins)} (valid there), though the "
               f"vendor tables also list it under {k.split('.')[0]}; `{mnemonic(k)}`: {msg}")
      elif "not supported on this GPU" in msg:
        why = f"not on {res.arch} per llvm-mc-22: `{mnemonic(k)}`: {msg}"
      elif "e64 variant" in msg or "variant" in msg:
        why = f"this encoding is not on {res.arch} per llvm-mc-22: `{mnemonic(k)}`: {msg}"
      elif msg.startswith("invalid instruction"):
        why = f"llvm-mc-22 has no mnemonic `{mnemonic(k)}` on {res.arch} (vendor name or not on target)"
      else:
        why = f"generator found no word llvm-mc-22 accepts (mnemonic `{mnemonic(k)}` exists: {msg})"
      if k.split(".")[0].removesuffix("Op") in S.GRAPHICS:
        why = "graphics format (outside issue 2's compute scope); " + why
      ent[k] = f"{why}; {ex}"
    out[res.arch] = ent | lacked_exclusions(res.arch)
  return out


# ---------------------------------------------------------------------------------------------------- tests


def write_summary(lines: list[str]):
  """Update fuzz_failures/summary.txt, one line per target (lines for other targets are kept)."""
  FAILURES.mkdir(exist_ok=True)
  path = FAILURES / "summary.txt"
  old = {ln.split(":")[0]: ln for ln in path.read_text().splitlines() if ln.strip()} if path.exists() else {}
  old |= {ln.split(":")[0]: ln for ln in lines}  # keyed by "gfx1100" (CI run) or "gfx1100 full" (slow run)
  path.write_text("".join(old[k] + "\n" for k in sorted(old)))


def _check(arch: str, res: Result, report: list[str], label: str = ""):
  line, bad = summarize(res, label=label)
  report.append(line)
  write_failures(res, label)
  write_summary([line])
  assert not bad, f"{arch}: {len(bad)} opcodes neither agree with llvm-mc-22 nor are excluded, e.g. {bad[:10]}"


@needs_llvm
@pytest.mark.parametrize("arch", TARGETS)
def test_every_opcode_against_llvm_mc(arch, fuzz_report):
  """CI size: every (encoding, opcode) case once, rejected cases redrawn up to 9 times; a few llvm-mc calls.
  fuzz_exclusions.json is generated from exactly this run (seed 0), so its "never valid" entries match it."""
  _check(arch, run(arch, seeds=(0,), rounds=10), fuzz_report)


@needs_llvm
@pytest.mark.slow
@pytest.mark.parametrize("arch", TARGETS)
def test_every_opcode_against_llvm_mc_full(arch, fuzz_report):
  """Full strength: 8 seeds (the CI seed 0 included) x up to 10 rounds, and wave64 on RDNA."""
  res = run(arch, seeds=range(8), rounds=10)
  tgt = get_target(arch)
  for w in tgt.waves:
    if w != tgt.wave:
      run(arch, seeds=(100,), rounds=2, wave=w, res=res)
  _check(arch, res, fuzz_report, " full")


@needs_llvm
@pytest.mark.parametrize("arch", TARGETS)
@settings(max_examples=4, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.generate))  # no shrinking: each step is an llvm-mc call
@given(data=st.data())
def test_hypothesis_batch_against_llvm_mc(arch, data):
  """The hypothesis front end (shrinkable, reused by the pytest plugin) agrees with llvm-mc-22 too."""
  samples = data.draw(st.lists(S.instruction(arch), min_size=25, max_size=25))
  texts = llvm_disassemble([s.data for s in samples], arch)
  ok = [(s, t) for s, t in zip(samples, texts) if t is not None]
  excl = load_exclusions().get(arch, {}) | load_known_gaps().get(arch, {})
  for (s, t), lb in zip(ok, llvm_assemble([t for _, t in ok], arch)):
    if all(k in excl for k in keys_of(arch, s)):
      continue
    assert not (p := compare(_api(), s, t, lb, arch, None)), p


@needs_llvm
@pytest.mark.parametrize("arch", TARGETS)
def test_lacked_opcodes_rejected_by_llvm_mc(arch):
  """The family opcodes targets.py says `arch` lacks (data/target_deltas.json) are ones llvm-mc-22 never decodes."""
  _, accepted = lacked_samples(arch)
  assert not accepted, f"{arch}: llvm-mc-22 accepts opcodes the target is said to lack: {accepted}"


@needs_llvm
@pytest.mark.slow
@pytest.mark.parametrize("arch", TARGETS)
def test_raw_words_against_llvm_mc(arch):
  """Raw random words (a real encoding's fixed bits, anything elsewhere): where llvm-mc-22 decodes one, our text must
  match. Reaches what the table-driven strategies never build (unused bits set); mismatches -> <target>.raw.txt."""
  api, words = _api(), S.random_words(arch, 20000, seed=1)
  lines, valid = [], 0
  for w, text in zip(words, llvm_disassemble(words, arch)):
    if text is None or text == CRASH:
      continue
    valid += 1
    try:
      ours = " | ".join(norm(x) for x in api[1](w, arch))
    except Exception as e:  # noqa: BLE001 - reported like a text mismatch
      ours = f"raised {type(e).__name__}: {e}"
    if ours != text:
      lines.append(f"{w.hex(' ')}\n  llvm-mc: {text}\n  ours:    {ours}\n")
  FAILURES.mkdir(exist_ok=True)
  (FAILURES / f"{arch}.raw.txt").write_text(f"# {arch}: {len(lines)} of {valid} raw words llvm-mc-22 decodes print "
                                           "differently in gputwin\n" + "\n".join(lines))
  assert not lines, f"{arch}: {len(lines)} of {valid} raw words disagree, see fuzz_failures/{arch}.raw.txt"


def test_strategy_covers_every_case():
  """Without llvm-mc: the batch builder yields well-formed bytes for every case of every target."""
  for arch in TARGETS:
    tab = tables(get_target(arch).family)
    for s in S.batch(arch, 0):
      assert len(s.data) == tab.encodings[s.encoding].size


@pytest.mark.parametrize("arch", TARGETS)
@settings(max_examples=300, derandomize=True, deadline=None, phases=(Phase.explicit, Phase.generate))
@given(word=S.words())
def test_random_words_raise_only_decode_error(arch, word):
  """Decoding garbage either works or raises gputwin's DecodeError; bench/decode_fuzz.py runs millions."""
  try:
    from gputwin.isa import decode
  except ImportError:
    try:
      from gputwin.isa.encoding import decode
    except ImportError:
      pytest.skip("gputwin.isa.decode not implemented yet")
  try:
    decode(word, arch)
  except DecodeError:
    pass


if __name__ == "__main__":
  import argparse
  ap = argparse.ArgumentParser(description="refresh tests/isa/fuzz_failures/ (and optionally the exclusions)")
  ap.add_argument("--seeds", type=int, default=1)
  ap.add_argument("--rounds", type=int, default=10)
  ap.add_argument("--targets", nargs="*", default=list(TARGETS))
  ap.add_argument("--exclusions", action="store_true", help="rewrite fuzz_exclusions.json from this run's evidence")
  a = ap.parse_args()
  results = [run(t, seeds=range(a.seeds), rounds=a.rounds) for t in a.targets]
  if a.exclusions:
    old = json.loads(EXCLUSIONS.read_text()) if EXCLUSIONS.exists() else {}
    old["about"] = ("Opcodes of the vendor tables that cannot agree with llvm-mc-22 in tests/isa/test_llvm_fuzz.py, "
                    "each with its evidence; generated from the CI run (seed 0) by `python tests/isa/"
                    "test_llvm_fuzz.py --exclusions`. gputwin/llvm-mc disagreements are bugs, never listed here.")
    old["targets"] = old.get("targets", {}) | evidence_exclusions(results)
    EXCLUSIONS.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
  lines = []
  for r in results:
    write_failures(r)
    lines.append(summarize(r)[0])
  write_summary(lines)
  print("\n".join(lines))
  sys.exit(0)
