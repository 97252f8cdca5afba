"""The generic bit-level engine: one decoder and one encoder for every AMD encoding in the vendor tables.

An encoding is a list of fields (vendor.py); an instruction is an encoding name, a canonical opcode name and
the raw value of every field. Decoding finds the base encoding whose fixed bits match (most fixed bits wins),
looks the opcode up in that encoding's enum, and then picks the variant the data asks for: a literal dword
when a source field holds 255 (or the opcode always carries one, like V_FMAAK_F32), DPP16/DPP8/SDWA when src0
holds the DPP/SDWA marker, and the smallest opcode set among encodings sharing the bits (VOP3SD and VOP3_SDST
before plain VOP3; VOP3P_MFMA next to VOP3P). Nothing here knows an instruction by name.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from gputwin.errors import DecodeError, GputwinError
from gputwin.isa.targets import Target, target
from gputwin.isa.vendor import Encoding, Field, Tables, tables

_DATA = Path(__file__).parent / "data"

# Variant markers in src0 (9-bit source operand codes) that make the decoder read an extra DPP/SDWA dword.
DPP16, DPP8, DPP8_FI, SDWA, LITERAL = 250, 233, 234, 249, 255
_VARIANT_SRC0 = {"DPP16": (DPP16,), "DPP8": (DPP8, DPP8_FI), "SDWA": (SDWA,), "SDWA_SDST": (SDWA,)}


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

  @functools.cached_property
  def operands(self) -> tuple[Opnd, ...]:
    from gputwin.isa.syntax import operands  # the operand model lives with the syntax tables
    return operands(self)

  def replace(self, **fields: int) -> Inst:
    return Inst(self.arch, self.enc, self.op, tuple((k, fields.get(k, v)) for k, v in self.fields), self.wave)


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
    self.bases = sorted(bases, key=lambda e: -sum(f.width for f in e.fixed))
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


def _get(word: int, hi: int, lo: int) -> int: return (word >> lo) & ((1 << (hi - lo + 1)) - 1)


def decode(data: bytes, arch: str, *, offset: int = 0, wave: int | None = None) -> Inst:
  """Decode one instruction at `offset`. Any byte string that is not a valid instruction raises DecodeError."""
  try:
    return _decode(data, arch, offset, wave)
  except DecodeError:
    raise
  except GputwinError:
    raise
  except Exception as e:  # a table gap must surface as a decode error, never as a crash
    raise DecodeError(f"{type(e).__name__}: {e}", arch, offset) from e


def _decode(data: bytes, arch: str, offset: int, wave: int | None) -> Inst:
  I = isa(arch)
  avail = len(data) - offset
  if avail < 4:
    raise DecodeError("truncated instruction (need at least 4 bytes)", arch, offset)
  n = min(avail, 16) // 4 * 4
  word = int.from_bytes(data[offset:offset + n], "little")
  w0 = word & 0xffffffff
  bits = n * 8
  for mask, val, top, cands in I.matchers:
    if top >= bits or word & mask != val:
      continue
    best = None
    for e, opf in cands:
      if opf is None:  # EXP-like encodings without an opcode field
        best = best or (e, "")
        continue
      name = I.tables.enums[e.opcode_enum].get(_get(word, opf.hi, opf.lo))
      if name is None or name not in I.allowed[e.name]:
        continue
      if e.opcode_enum == "VOPDOp":  # VOPD carries two opcodes; the Y one must be valid too
        if I.tables.enums["VOPDOp"].get(_get(word, 21, 17)) is None:
          continue
      if not _variant_ok(I, e, name, word):
        continue
      best = (e, name)
      break
    if best is None:
      break
    e, name = best
    if e.size > avail:
      raise DecodeError(f"truncated {e.name} instruction (needs {e.size} bytes, {avail} left)", arch, offset, w0)
    fields = tuple((f.name, _get(word, f.hi, f.lo)) for f in I.fields[e.name])
    inst = Inst(arch, e.name, name, fields, wave or 0)
    from gputwin.isa.syntax import validate
    validate(inst, offset)
    return inst
  raise DecodeError("no encoding matches", arch, offset, w0)


def _variant_ok(I: Isa, e: Encoding, op: str, word: int) -> bool:
  """Does `word` select variant `e` (data-driven: which marker/literal rules hold) over its siblings?"""
  v = e.variant
  bf = I.encodings.get(e.base)
  base_srcs = [f for f in (bf or e).fields if f.kind in ("src", "ssrc")]
  src0 = next((f for f in base_srcs if f.name in ("src0", "srcx0", "ssrc0")), None)
  s0 = _get(word, src0.hi, src0.lo) if src0 else None
  marker = next((k for k, vals in _VARIANT_SRC0.items() if s0 in vals and any(x.variant == k for x in
                 I.encodings.values() if x.base == e.base and op in I.allowed[x.name])), None)
  if "DPP" in v or "SDWA" in v:
    want = v.replace("_SDST", "") if v.startswith("SDWA") else v
    return marker is not None and marker.replace("_SDST", "") == want
  if marker is not None:
    return False
  has_lit = any(_get(word, f.hi, f.lo) == LITERAL for f in base_srcs if _uses(I, e, op, f.name, source=True))
  if e.base == "VOPD":  # either half can carry the literal (a source of 255, or an FMAAK/FMAMK K operand)
    from gputwin.isa.syntax import FMT
    names = I.tables.enums["VOPDOp"]
    has_lit = has_lit or any(re.search(FMT["vopd_lit_ops"], names.get(_get(word, hi, lo), "")) for hi, lo in
                             ((25, 22), (21, 17)))
  if v.endswith("LIT"):
    return has_lit or I.lit_only(e, op)
  if has_lit and any(x.base == e.base and x.variant.endswith("LIT") and op in I.allowed[x.name]
                     for x in I.encodings.values()):
    return False
  return True


def _uses(I: Isa, e: Encoding, op: str, fname: str, source: bool = False) -> bool:
  from gputwin.isa.syntax import uses_field
  return uses_field(I, e, op, fname, source)


def decode_all(data: bytes, arch: str, *, offset: int = 0, wave: int | None = None) -> list[Inst]:
  """Decode a whole code blob, instruction after instruction."""
  out, pos = [], offset
  while pos < len(data):
    inst = decode(data, arch, offset=pos, wave=wave)
    out.append(inst)
    pos += inst.size
  return out


def encode(inst: Inst) -> bytes:
  """Pack an instruction's field values into bytes (little-endian dwords); fixed bits come from the table."""
  I = isa(inst.arch)
  e = I.encodings[inst.enc]
  f, word = inst.f, 0
  for fd in I.fields[inst.enc]:
    v = fd.value if fd.kind == "fixed" else f.get(fd.name, 0)
    if v < 0 or v > fd.mask:
      raise GputwinError(f"{inst.op}: field {fd.name}={v} does not fit {fd.width} bits")
    word |= v << fd.lo
  return word.to_bytes(e.size, "little")


def make(arch: str, enc: str, op: str, wave: int = 0, **fields: int) -> Inst:
  """Build an Inst from an encoding name, opcode and (partial) field values; defaults fill the rest."""
  I = isa(arch)
  e = I.encodings[enc]
  vals = []
  for fd in I.fields[enc]:
    if fd.kind == "fixed":
      vals.append((fd.name, fd.value))
    elif fd.kind == "op":
      vals.append((fd.name, I.opval(e, op) if fd.name != "opy" else fields.get("opy", 0)))
    else:
      vals.append((fd.name, fields.get(fd.name, _default(I, fd))))
  return Inst(arch, enc, op, tuple(vals), wave)


def _default(I: Isa, fd) -> int:
  d = fd.default
  if isinstance(d, int):
    return d
  if isinstance(d, str):
    from gputwin.isa.syntax import FMT, special_code
    nd = FMT["null_default"].get(I.target.family)
    return nd if nd is not None and d == "NULL" else special_code(I, d.lower())
  return 0


def iter_opcodes(arch: str) -> Iterable[tuple[str, str]]:
  """Every (encoding, canonical opcode) pair of a target, for exhaustive tests."""
  from gputwin.isa.syntax import uses_field
  I = isa(arch)
  for n, e in I.encodings.items():
    opf = next((f for f in I.fields[n] if f.kind == "op"), None)
    srcs = [f.name for f in I.fields[n] if f.kind in ("src", "ssrc") and f.name != "vdst"]
    for op in sorted(I.allowed[n]):
      if opf is not None and I.opval(e, op) > opf.mask:
        continue  # e.g. VOPD opcodes only the 5-bit Y slot can hold
      if e.variant.endswith("LIT") and not I.lit_only(e, op) and not any(uses_field(I, e, op, s) for s in srcs):
        continue  # a literal variant of an instruction that reads no source operand
      yield n, op
