"""The instruction-set model every other isa module reads: per-target lookup structures over the vendor tables
(`isa(arch)` -> Isa), decoded instructions (`Inst`, `Opnd`), the vendor's per-instruction operand records
(`vendor_ops`, `uses_field`) and the probed format tables (data/formats.json `FMT`, data/operands.json `OPS`,
data/true16.json `TRUE16`). It knows no text syntax and imports nothing above the vendor tables and targets."""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from gputwin.isa.targets import Target, target
from gputwin.isa.vendor import Encoding, Field, Operand, Tables, tables

_DATA = Path(__file__).parent / "data"


OPS = json.loads((_DATA / "operands.json").read_text())


FMT = json.loads((_DATA / "formats.json").read_text())


TRUE16 = json.loads((_DATA / "true16.json").read_text())


@functools.cache
def errata() -> dict:
  """Our corrections to vendor facts, each with the llvm-mc-22 evidence (data/errata.json)."""
  return json.loads((_DATA / "errata.json").read_text())


@dataclass(frozen=True)
class Opnd:
  """One decoded operand, ready for an emulator: where it lives and how wide it is.

  file: "v" (VGPR), "a" (AccVGPR), "s" (SGPR or special scalar register by code), "inline" (inline constant,
  `value` is the constant code 128..248), "literal" (`value` is the 32-bit literal), "imm" (an immediate field)."""
  field: str
  file: str
  index: int  # register index / operand code
  dwords: int = 1
  value: int | None = None
  hi: bool = False  # true16: the high half of a VGPR


@dataclass(frozen=True)
class Inst:
  """A decoded (or to-be-encoded) instruction: immutable, cheap, hashable.

  `fields` holds every field of the encoding (fixed bits included) as (name, value) pairs in encoding order.
  The text layer (syntax.py) derives operands and modifiers lazily from the vendor tables."""
  arch: str
  enc: str  # encoding incl. variant: "VOP3_LIT", "VOP1_DPP16"
  op: str  # canonical vendor opcode name: "V_ADD_F32"
  fields: tuple[tuple[str, int], ...]
  wave: int = 0  # 0 = target default

  def __getitem__(self, name: str) -> int: return self.f[name]
  def get(self, name: str, default: int | None = None) -> int | None: return self.f.get(name, default)

  @functools.cached_property
  def f(self) -> dict[str, int]: return dict(self.fields)

  @property
  def encoding(self) -> Encoding: return isa(self.arch).tables.encodings[self.enc]

  @property
  def size(self) -> int: return self.encoding.size

  @property
  def format(self) -> str: return self.encoding.base


  def replace(self, **fields: int) -> Inst:
    return Inst(self.arch, self.enc, self.op, tuple((k, fields.get(k, v)) for k, v in self.fields), self.wave)


@functools.cache
def pinned(family: str, enc: str) -> dict[str, int]:
  """Field -> the one value that selects encoding `enc` where the vendor tables leave it open (formats.json
  "pinned_fields"; a value [encoding, opcode]: that encoding's fixed bits followed by the opcode)."""
  out, tab = {}, tables(family)
  for name, v in FMT["pinned_fields"].get(enc, {}).items():
    if isinstance(v, list):
      e = tab.encodings[v[0]]
      op = next(f for f in e.fields if f.kind == "op")
      v = e.fixed[0].value << (op.hi - op.lo + 1) | tab.values[e.opcode_enum][v[1]]
    out[name] = v
  return out


class Isa:
  """Per-target lookup structures over the family tables (built once per target)."""

  def __init__(self, tgt: Target):
    self.target, self.tables = tgt, tables(tgt.family)
    t: Tables = self.tables
    skip = set(errata().get("skip_encodings", {}).get(tgt.family, {}))
    self.encodings = {n: e for n, e in t.encodings.items() if n not in skip}
    self.fields = {n: _effective(e) for n, e in self.encodings.items()}
    # opcode enum -> allowed canonical names for each encoding (None in the vendor table = the whole enum)
    self.allowed: dict[str, frozenset[str]] = {}
    for n, e in self.encodings.items():
      names = e.opcodes if e.opcodes is not None else frozenset(t.enums.get(e.opcode_enum, {}).values())
      self.allowed[n] = frozenset(names) - tgt.lacks
    for kind in ("move_opcodes", "add_opcodes"):  # vendor list corrections (errata.json, each with evidence)
      for mv in errata().get(kind, {}).get(tgt.family, []):
        moved = {o for o in self.allowed[mv["from"]] if re.search(mv["pattern"], o)}
        if kind == "move_opcodes":
          self.allowed[mv["from"]] -= moved
        self.allowed[mv["to"]] |= moved
    # base encodings, most fixed bits first (longest-fixed-prefix match)
    bases = [e for e in self.encodings.values() if e.name == e.base]
    self.bases = sorted(bases, key=lambda e: -sum(f.width for f in e.fields if f.kind == "fixed" or
                                                  f.name in pinned(tgt.family, e.name)))
    self.variants: dict[tuple[str, ...], list[Encoding]] = {}
    for e in self.encodings.values():  # group every encoding under the fixed bits it shares
      self.variants.setdefault(_fixed_key(e), []).append(e)
    for k, lst in self.variants.items():
      lst.sort(key=lambda e: len(self.allowed[e.name]))
    # the decoder's view of each base, in `bases` order: (mask, value, highest fixed bit) of its fixed fields (one AND
    # and compare per base), its candidates and their opcode fields
    self.matchers: list[tuple[int, int, int, list[tuple[Encoding, Field | None]]]] = []
    for b in self.bases:
      mask = val = 0
      for f in b.fixed:
        mask, val = mask | f.mask << f.lo, val | f.value << f.lo
      if any((val >> f.lo) & f.mask != f.value for f in b.fixed):  # contradictory fixed fields: never matches
        mask, val = 0, 1
      for f in b.fields:
        if f.name in pinned(tgt.family, b.name):
          mask, val = mask | f.mask << f.lo, val | pinned(tgt.family, b.name)[f.name] << f.lo
      cands = [(e, next((f for f in e.fields if f.kind == "op"), None)) for e in self.variants[_fixed_key(b)]]
      self.matchers.append((mask, val, max((f.hi for f in b.fixed), default=-1), cands))

  @functools.cached_property
  def by_op(self) -> dict[str, list[str]]:
    """Canonical name -> encodings that can hold it (for the assembler; built on its first use)."""
    out: dict[str, list[str]] = {}
    for n in self.encodings:
      for op in self.allowed[n]:
        out.setdefault(op, []).append(n)
    return out

  def opval(self, enc: Encoding, op: str) -> int: return self.tables.values[enc.opcode_enum][op]

  def lit_only(self, enc: Encoding, op: str) -> bool:
    """The opcode exists only with a literal (V_FMAAK_F32, S_SETREG_IMM32_B32): the literal is always there."""
    return enc.variant.endswith("LIT") and self._lit_only(enc.name, op)

  @functools.lru_cache(maxsize=None)
  def _lit_only(self, enc: str, op: str) -> bool:
    e = self.encodings[enc]
    return not any(op in self.allowed[x.name] for x in self.variants[_fixed_key(e)]
                   if not x.variant or x.variant in ("SDST",))


def _effective(e: Encoding) -> tuple:
  """Fields that own their bits: where a later field reuses bits (VOP3P_MFMA's cbsz/abid/acc/blgp over
  VOP3P's neg_hi/opsel/opsel_hi/neg), the later, more specific one wins."""
  out = []
  for i, f in enumerate(e.fields):
    if f.kind != "fixed" and any(g.kind != "fixed" and g.lo <= f.hi and f.lo <= g.hi for g in e.fields[i + 1:]):
      continue
    out.append(f)
  return tuple(out)


def _fixed_key(e: Encoding) -> tuple:
  return (tuple((f.hi, f.lo, f.value) for f in e.fixed), e.opcode_enum is None)


@functools.cache
def isa(arch: str) -> Isa:
  return Isa(target(arch))


def family_kind(fam: str) -> str: return "cdna" if fam == "cdna" else "rdna"


def vendor_ops(I, enum: str, op: str) -> dict[str, Operand]:
  fix = FMT["operand_fixes"].get(I.target.family, {}).get(op)
  if fix is not None:
    return {k: Operand(*v) for k, v in fix.items()}
  d = I.tables.operands.get((enum, op))
  if d is None:
    for alt in FMT["vop3_from"]:  # VOP3 forms without records borrow them from their e32 form
      d2 = I.tables.operands.get((alt, op))
      if d2 is not None and enum in ("VOP3Op", "VOP3SDOp"):
        return {FMT["e32_to_vop3"].get(k, k): v for k, v in d2.items()}
    return {}
  return {FMT["vendor_field_alias"].get(k, k): v for k, v in d.items()}


def uses_field(I, e: Encoding, op: str, fname: str, source: bool = False) -> bool:
  """Does `op` use field `fname`? With source=True: as a source operand (one that can hold a literal marker), not an
  immediate such as s_set_gpr_idx_on's mode or s_sendmsg_rtn's message id (llvm-mc-22: sendmsg(255) is 0xff in
  SSRC0 of a 4-byte word, no literal follows)."""
  ops = vendor_ops(I, e.opcode_enum, op)
  if source and fname in ops and (ops[fname].type in FMT["gpr_idx"]["types"] or ops[fname].type in FMT["imm_kinds"]):
    return False
  return fname in ops or fname in ("srcx0", "srcy0")


def scalar_tables(fam: str):
  k = family_kind(fam)
  return OPS["scalar"][k], OPS["scalar64"][k], OPS["sgprs"][k]


def special_code(I, name: str) -> int:
  one, two, _ = scalar_tables(I.target.family)
  for d in (one, two):
    for k, v in d.items():
      if v == name:
        return int(k)
  raise KeyError(name)
