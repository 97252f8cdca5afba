"""The generic bit-level engine: one decoder and one encoder for every AMD encoding in the vendor tables.

An encoding is a list of fields (vendor.py); an instruction is an encoding name, a canonical opcode name and
the raw value of every field. Decoding finds the base encoding whose fixed bits match (most fixed bits wins),
looks the opcode up in that encoding's enum, and then picks the variant the data asks for: a literal dword
when a source field holds 255 (or the opcode always carries one, like V_FMAAK_F32), DPP16/DPP8/SDWA when src0
holds the DPP/SDWA marker, and the smallest opcode set among encodings sharing the bits (VOP3SD and VOP3_SDST
before plain VOP3; VOP3P_MFMA next to VOP3P). Nothing here knows an instruction by name.
"""
from __future__ import annotations

import re
from typing import Iterable

from gputwin.errors import DecodeError, GputwinError
from gputwin.isa.disasm import format_inst, validate
from gputwin.isa.model import FMT, Inst, Isa, Opnd, isa, pinned, special_code, uses_field
from gputwin.isa.vendor import Encoding

__all__ = ["DPP16", "DPP8", "DPP8_FI", "SDWA", "LITERAL", "Inst", "Opnd", "isa", "decode", "decode_all", "encode",
           "make", "iter_opcodes", "disassemble"]


# Variant markers in src0 (9-bit source operand codes) that make the decoder read an extra DPP/SDWA dword.
DPP16, DPP8, DPP8_FI, SDWA, LITERAL = 250, 233, 234, 249, 255
_VARIANT_SRC0 = {"DPP16": (DPP16,), "DPP8": (DPP8, DPP8_FI), "SDWA": (SDWA,), "SDWA_SDST": (SDWA,)}


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
    if best is None:  # these fixed bits match but no opcode of theirs does: a base with fewer fixed bits may
      continue
    e, name = best
    if e.size > avail:
      raise DecodeError(f"truncated {e.name} instruction (needs {e.size} bytes, {avail} left)", arch, offset, w0)
    fields = tuple((f.name, _get(word, f.hi, f.lo)) for f in I.fields[e.name])
    inst = Inst(arch, e.name, name, fields, wave or 0)
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
  has_lit = any(_get(word, f.hi, f.lo) == LITERAL for f in base_srcs if uses_field(I, e, op, f.name, source=True))
  if e.base == "VOPD":  # either half can carry the literal (a source of 255, or an FMAAK/FMAMK K operand)
    names = I.tables.enums["VOPDOp"]
    has_lit = has_lit or any(re.search(FMT["vopd_lit_ops"], names.get(_get(word, hi, lo), "")) for hi, lo in
                             ((25, 22), (21, 17)))
  if v.endswith("LIT"):
    return has_lit or I.lit_only(e, op)
  if has_lit and any(x.base == e.base and x.variant.endswith("LIT") and op in I.allowed[x.name]
                     for x in I.encodings.values()):
    return False
  return True


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
    else:  # (a field the tables leave open but whose one value selects the encoding: that value)
      vals.append((fd.name, fields.get(fd.name, pinned(I.target.family, e.base).get(fd.name, _default(I, fd)))))
  return Inst(arch, enc, op, tuple(vals), wave)


def _default(I: Isa, fd) -> int:
  d = fd.default
  if isinstance(d, int):
    return d
  if isinstance(d, str):
    nd = FMT["null_default"].get(I.target.family)
    return nd if nd is not None and d == "NULL" else special_code(I, d.lower())
  return 0


def iter_opcodes(arch: str) -> Iterable[tuple[str, str]]:
  """Every (encoding, canonical opcode) pair of a target, for exhaustive tests."""
  I = isa(arch)
  for n, e in I.encodings.items():
    opf = next((f for f in I.fields[n] if f.kind == "op"), None)
    srcs = [f.name for f in I.fields[n] if f.kind in ("src", "ssrc") and f.name != "vdst"]
    for op in sorted(I.allowed[n]):
      if opf is not None and I.opval(e, op) > opf.mask:
        continue  # e.g. VOPD opcodes only the 5-bit Y slot can hold
      if e.variant.endswith("LIT") and not I.lit_only(e, op) and not any(uses_field(I, e, op, s, source=True)
                                                                         for s in srcs):
        continue  # a literal variant of an instruction that reads no source operand
      yield n, op


def disassemble(data: bytes, arch: str, *, wave: int | None = None) -> list[str]:
  """Bytes -> one llvm-mc-22 style line per instruction. Raises DecodeError on invalid bytes."""
  return [format_inst(i) for i in decode_all(bytes(data), arch, wave=wave)]
