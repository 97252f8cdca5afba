"""Assembler: llvm-mc-22 AMDGPU syntax -> bytes, through the same signatures the disassembler prints from.

Two passes: the first parses every line and encodes it with label references left open (sizes never depend
on label values), the second patches branch offsets. For each mnemonic the candidate encodings come from the
opcode tables; they are tried in preference order (e32, e32+literal, VOP3, VOP3+literal, DPP, SDWA) and the
first one every operand and modifier fits wins, which is how llvm-mc picks the shortest legal form.
"""
from __future__ import annotations

import functools
import operator
import re

from gputwin.errors import AsmError, GputwinError
from gputwin.isa.disasm import MSGS, format_inst
from gputwin.isa.encoding import encode, make
from gputwin.isa.model import FMT, OPS, Inst, family_kind, isa
from gputwin.isa.operands import Slot, opsel_field_bits, signature
from gputwin.isa.syntax import (f16_bits, f32_bits, f64_bits, image_fallback, image_sizes, inline_code, int16_fmt,
                                swizzle_value)

_IGNORED_DIRECTIVES = re.compile(r"^\.(text|globl|global|p2align|align|type|size|section|amdgcn_target|"
                                 r"amdhsa_code_object_version|weak|hidden|protected|file|ident|end_amdgpu_metadata|"
                                 r"amdgpu_metadata)\b")
_SUFFIXES = ("_e64_dpp", "_e32", "_e64", "_dpp", "_sdwa")
_FLAGS = {"glc", "slc", "dlc", "sc0", "sc1", "nt", "tfe", "gds", "offen", "idxen", "clamp", "row_mirror",
          "row_half_mirror", "lwe", "unorm", "r128", "a16", "d16", "lds"}


class _NoFit(Exception):
  """This candidate encoding cannot hold the operands; `msg` is llvm-mc's reason, `col` the operand column."""

  def __init__(self, msg: str, col: int = 0):
    super().__init__(msg)
    self.msg, self.col = msg, col


# ------------------------------------------------------------------------------------------ lexing


def _strip_comment(line: str) -> str:
  """The line without comments: /* C comments */ (llvm-mc's register notes) become blanks, so columns stay; then
  `;` or `//` ends it. One pass over the line (a regex retried at every unclosed `/*` was quadratic)."""
  parts, i = [], 0
  while (j := line.find("/*", i)) >= 0 and (k := line.find("*/", j + 2)) >= 0:
    parts += [line[i:j], " " * (k + 2 - j)]
    i = k + 2
  line = "".join(parts) + line[i:]
  for mark in (";", "//"):
    i = line.find(mark)
    if i >= 0:
      line = line[:i]
  return line


def _split_top(s: str, seps: str) -> list[tuple[str, int]]:
  """Split at top-level separator characters (outside [], (), |..|); returns (piece, column offset)."""
  out, depth, start, bar = [], 0, 0, False
  for i, ch in enumerate(s):
    if ch in "[(":
      depth += 1
    elif ch in "])":
      depth -= 1
    elif ch == "|" and depth == 0 and not s.startswith("instskip", i + 2):
      bar = not bar if not _INST_BAR.match(s, i) else bar
    elif ch in seps and depth == 0 and not bar:
      out.append((s[start:i], start))
      start = i + 1
  out.append((s[start:], start))
  return [(p.strip(), c + len(p) - len(p.lstrip())) for p, c in out if p.strip()]


_INST_BAR = re.compile(r"\|\s*inst")
_MAX_DIGITS = 40  # longer numbers fit no field; Python's int() refuses > 4300 digits with a ValueError of its own


def _is_mod(tok: str) -> bool:
  if tok in _FLAGS:
    return True
  m = re.match(r"^([a-z_0-9]+):", tok)
  return bool(m) and not tok.startswith(("vcc", "exec"))


def _operands(rest: str, col0: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
  """Split the text after the mnemonic into operands and trailing space-separated modifiers."""
  parts = _split_top(rest, ",")
  ops, mods = [], []
  for i, (p, c) in enumerate(parts):
    words = _split_top(p, " \t")
    if i == len(parts) - 1:
      first = True
      for w, wc in words:
        if first and not _is_mod(w):
          ops.append((w, col0 + c + wc))
        else:
          mods.append((w, col0 + c + wc))
        first = False
    else:
      if mods:
        raise _NoFit("invalid operand for instruction", col0 + c)
      if len(words) > 1 and all(_is_mod(w) for w, _ in words[1:]) and not _is_mod(words[0][0]):
        ops.append((words[0][0], col0 + c))
        mods.extend((w, col0 + c + wc) for w, wc in words[1:])
      else:
        ops.append((p, col0 + c))
  return ops, mods


def _num(t: str) -> int:
  t = t.strip()
  neg = t.startswith("-")
  if neg:
    t = t[1:].strip()
  if len(t) > _MAX_DIGITS:  # no field holds it; int() would take quadratic time (or refuse > 4300 digits)
    raise ValueError(f"number too long: {t[:20]}...")
  v = int(t, 0)
  return -v if neg else v


def _index(d: str) -> int:
  """A register index's digits (any length) -> int; indices too long to mean a register are out of range."""
  return int(d) if len(d) <= _MAX_DIGITS else 1 << 64


# ------------------------------------------------------------------------------------------ operands


def _reg_range(t: str) -> tuple[str, int, int, str] | None:
  """'v5' / 'v[5:6]' / 's[0:1]' / 'ttmp[2:3]' / 'a3' / 'v5.h' -> (file, first, count, half)."""
  m = re.fullmatch(r"(v|s|a|ttmp)(\d+)(?:\.(l|h))?", t)
  if m:
    return m[1], _index(m[2]), 1, m[3] or ""
  m = re.fullmatch(r"(v|s|a|ttmp)\[(\d+)(?::(\d+))?\](?:\.(l|h))?", t)
  if m:
    lo, hi = _index(m[2]), _index(m[3] or m[2])
    if hi < lo:
      return None
    return m[1], lo, hi - lo + 1, m[4] or ""
  return None


def _scalar_code(I, t: str, dwords: int) -> int | None:
  """Scalar register / special name -> 8-bit operand code, or None."""
  fam = I.target.family
  k = family_kind(fam)
  r = _reg_range(t)
  if r:
    f, idx, n, _ = r
    if f == "s":
      if n != dwords:
        raise _NoFit("invalid operand for instruction")
      if n > 1 and idx % (2 if n == 2 else 4):
        raise _NoFit("invalid register alignment")
      if idx + n > OPS["sgprs"][k]:
        raise _NoFit("register index is out of range")
      return idx
    if f == "ttmp":
      if n != dwords:
        raise _NoFit("invalid operand for instruction")
      if idx + n > OPS["ttmp"][1]:
        raise _NoFit("register index is out of range")
      return OPS["ttmp"][0] + idx
    return None
  tab = OPS["scalar" if dwords == 1 else "scalar64"][k]
  for code, name in tab.items():
    if name == t:
      return int(code)
  if dwords == 1 and t in OPS["scalar64"][k].values() and t not in ("null",):
    raise _NoFit("invalid operand for instruction")
  if dwords == 2 and t in OPS["scalar"][k].values() and t != "null":
    raise _NoFit("invalid operand for instruction")
  if t == "null":
    return int(next(c for c, n in OPS["scalar"][k].items() if n == "null"))
  for code, name in OPS["special"].items():
    if name == t:
      return int(code)
  if t in OPS["special_aliases"]:
    return OPS["special_aliases"][t]
  return None


_RELOC = re.compile(r"([A-Za-z_.$][\w.$]*)@(rel32|abs32|gotpcrel32|gotpcrel|rel64|abs64)@(lo|hi)"
                    r"\s*([+-]\s*(?:0x[0-9a-fA-F]+|\d+))?")
_FLOAT_RE = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][-+]?\d+)$")  # unambiguous: linear time


def _literal_value(t: str, s: Slot) -> tuple[int | None, int | None]:
  """Number text -> (inline code or None, literal 32-bit value or None)."""
  fmt, bits = s.fmt, s.bits
  if _FLOAT_RE.match(t):
    x = float(t)
    code = inline_code(x, True, fmt, bits)
    if code is not None:
      return code, None
    if bits == 64 and "F64" in fmt:
      return None, f64_bits(x) >> 32
    try:  # a finite double beyond the operand's float range: llvm-mc-22 "invalid operand" (1e400 is inf, kept)
      return None, f16_bits(x) if "F16" in fmt and "PK" not in fmt or bits == 16 else f32_bits(x)
    except OverflowError:
      raise _NoFit("invalid operand for instruction") from None
  try:
    v = _num(t)
  except ValueError:
    return None, None
  code = inline_code(v, False, fmt, bits)
  if code is not None:
    return code, None
  if bits == 64 and "F64" in fmt and v > 0xffffffff:
    if v & 0xffffffff:
      raise _NoFit("invalid operand for instruction")
    return None, v >> 32
  if v < -(1 << 31) or v > 0xffffffff:
    raise _NoFit("invalid operand for instruction")
  return None, v & 0xffffffff


class _Ctx:
  """Per-candidate encoding state: field values being built, the literal, fixups."""

  def __init__(self, I, enc: str, op: str, wave: int):
    self.I, self.enc, self.op, self.wave = I, enc, op, wave
    self.e = I.encodings[enc]
    self.fields: dict[str, int] = {}
    self.names = {f.name for f in I.fields[enc]}
    self.literal: int | None = None
    self.lit_sizes: set[int] = set()  # operand dwords the literal is read at (llvm-mc counts each size once)
    self.label: str | None = None
    self.at: tuple[int, str] = (0, "")  # column and text of the operand or modifier being read
    self.where: dict[str, tuple[int, str]] = {}  # field -> the operand that set it (errors point there)

  def set(self, f: str, v: int):
    if f not in self.names:
      raise _NoFit("invalid operand for instruction")
    self.fields[f] = v
    self.where[f] = self.at

  def orbit(self, f: str, bit: int):
    if f not in self.names:
      raise _NoFit("not a valid operand.")
    self.fields[f] = self.fields.get(f, 0) | (1 << bit)
    self.where[f] = self.at

  def check_widths(self) -> None:
    """Every field value fits its bits, or the operand that set it is wrong (v256 in an 8-bit VGPR field,
    op_sel bits past the operands): llvm-mc-22's error at that operand, never an encoder error later."""
    for fd in self.I.fields[self.enc]:
      v = self.fields.get(fd.name)
      if fd.kind != "fixed" and isinstance(v, int) and not 0 <= v <= fd.mask:
        col, tok = self.where.get(fd.name, (0, ""))
        reg = _reg_range(re.sub(r"^[-|]*(?:neg|abs|sext)?\(?|[|)]*$", "", tok))
        raise _NoFit("register index is out of range" if reg else "invalid operand for instruction", col)

  def lit(self, v: int, dwords: int = 1):
    if "literal" not in self.names:
      raise _NoFit("literal operands are not supported")
    if self.literal is not None and self.literal != v:
      raise _NoFit("only one unique literal operand is allowed")
    self.literal = v
    self.lit_sizes.add(dwords)
    self.fields["literal"] = v


def _check_lit16(c: _Ctx, s: Slot, lit: int, explicit: bool = False):
  """A literal for a 16-bit VALU operand must fit 16 bits (llvm-mc-22 rejects wider ones; lit() must be unsigned);
  one for a SALU f16 operand always."""
  if _salu16(c, s, "lit16") and lit > 0xffff:
    raise _NoFit("invalid operand for instruction")
  if c.e.base.startswith("V") and not re.search(FMT["lit32_ops"], c.op) and (
      s.bits == 16 or int16_fmt(s.fmt) or re.search(FMT["lit16_ops"], c.op)) and not (
      lit < 0x10000 or lit >= 0xffff8000 and not explicit):
    raise _NoFit("invalid operand for instruction")


def _salu16(c: _Ctx, s: Slot, rule: str) -> bool:
  """SALU f16 operand rules of llvm-mc-22 (formats.json salu_f16): `lit16` literals fit 16 bits, `b32` integers
  read as 32-bit values without f16 bit-pattern constants."""
  return "F16" in s.fmt and c.e.base in FMT["salu_f16"][rule]


def _src_mods(t: str) -> tuple[str, bool, bool]:
  """Strip neg/abs spellings: -x, |x|, -|x|, neg(x), abs(x)."""
  neg = ab = False
  t = t.strip()
  if t.startswith("neg(") and t.endswith(")"):
    neg, t = True, t[4:-1].strip()
  elif t.startswith("-") and (t[1:].lstrip().startswith(("|", "abs(")) or re.match(r"-\s*[a-z]", t)):
    neg, t = True, t[1:].strip()
  if t.startswith("|") and t.endswith("|"):
    ab, t = True, t[1:-1].strip()
  elif t.startswith("abs(") and t.endswith(")"):
    ab, t = True, t[4:-1].strip()
  return t, neg, ab


def _src_index(s: Slot) -> int | None:
  return {"src0": 0, "vsrc0": 0, "src1": 1, "vsrc1": 1, "src2": 2}.get(s.field)


def _apply_srcmods(c: _Ctx, s: Slot, neg: bool, ab: bool):
  if not (neg or ab):
    return
  i = _src_index(s)
  if i is not None and c.e.base == "VOP3P" and re.search(FMT["mix_abs_in_neg_hi"], c.op):
    if neg:
      c.orbit("neg", i)
    if ab:
      c.orbit("neg_hi", i)
    return
  if i is None or c.e.base == "VOP3P":
    raise _NoFit("invalid operand for instruction")
  if "abs" in c.names or ("neg" in c.names and c.e.base in ("VOP3SD", "VINTERP")):
    if neg:
      c.orbit("neg", i)
    if ab:
      c.orbit("abs", i)
  elif f"src{i}_neg" in c.names:
    if neg:
      c.set(f"src{i}_neg", 1)
    if ab:
      c.set(f"src{i}_abs", 1)
  else:
    raise _NoFit("invalid operand for instruction")


def _vgpr(c: _Ctx, s: Slot, t: str, allow_a: bool) -> tuple[int, bool]:
  """Parse a VGPR/AGPR operand -> (index, is_agpr); sets the true16 half bit."""
  r = _reg_range(t)
  if r is None or r[0] not in ("v", "a") or (r[0] == "a" and not allow_a) or (r[0] == "v" and s.kind == "a"):
    raise _NoFit("invalid operand for instruction")
  f, idx, n, half = r
  if FMT["mfma_f8f6f4"]["ops"] in c.op and s.field in ("src0", "src1"):
    c.fields["_mf_" + s.field] = n  # width follows cbsz/blgp, checked once modifiers are read
  elif n != s.dwords and not s.half:
    raise _NoFit("invalid operand for instruction")
  if idx + n > 256:
    raise _NoFit("register index is out of range")
  if s.half:  # llvm-mc-22 also takes a plain vN for the low half
    if n != 1:
      raise _NoFit("invalid operand for instruction")
    if c.e.base in ("VOP1", "VOP2", "VOPC") or c.e.base == "VOPD":
      if idx > 127:
        raise _NoFit("register index is out of range")
      idx |= 0x80 if half == "h" else 0
    elif half == "h":
      bit = {"src0": 0, "vsrc0": 0, "src1": 1, "src2": 2, "vdst": 3}[s.field]
      c.orbit("opsel", bit)
  elif half:
    raise _NoFit("invalid operand for instruction")
  elif s.bits == 16 and idx > 127 and c.e.base in ("VOP1", "VOP2", "VOPC") and c.I.target.family == "rdna4":
    raise _NoFit("invalid operand for instruction")  # without true16, 16-bit e32 operands reach v0..v127 only
  return idx, f == "a"


def _set_acc(c: _Ctx, s: Slot, is_a: bool):
  if not is_a:
    return
  if "acc_cd" in c.names and s.field in ("vdst", "src2"):
    c.set("acc_cd", 1)
  elif "acc" in c.names and c.e.base.startswith("VOP3P"):  # (VOP3PX2 too)
    c.orbit("acc", {"src0": 0, "src1": 1}[s.field])
  elif "acc" in c.names:
    c.set("acc", 1)
  elif s.kind != "a":
    raise _NoFit("invalid operand for instruction")


def _fill(c: _Ctx, s: Slot, t: str, col: int):
  k, I = s.kind, c.I
  try:
    if k == "vcc":
      want = "vcc_lo" if s.dwords == 1 else "vcc"
      if t != want:
        raise _NoFit("invalid operand for instruction")
      return
    if k == "lit":  # FMAAK/FMAMK/SETREG K operand: always a literal, 16 bits wide for F16 forms
      f16 = c.op.endswith("F16")
      fmt = "FMT_NUM_F16" if f16 else "FMT_NUM_F32" if "F" in c.op[-4:] else "FMT_NUM_B32"
      ks = Slot("", "src", 1, fmt, 16 if f16 else 32)
      code, lit = _literal_value(t, ks)
      if c.e.base in FMT["lit_as_inline"].get(I.target.family, []) and _FLOAT_RE.match(t):
        lit = f64_bits(float(t)) & 0xffffffff  # llvm-mc-22 keeps the low half of the double ('1.0' -> 0)
      v = lit if lit is not None else _num(t) & 0xffffffff
      if f16 and v > 0xffff:
        raise _NoFit("invalid operand for instruction")
      c.lit(v)
      return
    if c.e.base in FMT["flat_addr"] and s.field in ("addr", "vaddr", "saddr"):
      return _flat_operand(c, s, t)
    if c.e.base in ("MUBUF", "MTBUF", "VBUFFER") and s.field == "vaddr":
      if t == "off":
        return c.set("vaddr", 0)
      r = _reg_range(t)
      if r is None or r[0] != "v":
        raise _NoFit("invalid operand for instruction")
      c.fields["_vaddr_dwords"] = r[2]
      return c.set("vaddr", r[1])
    if c.e.base in FMT["mimg"]["formats"] and s.field in ("vdata", "vaddr", "vaddr0"):
      return _image_operand(c, s, t)
    if k in ("v", "a", "av"):
      if s.field in ("vdata", "vdst") and c.e.base in FMT["tfe_extra_dword"]:
        r = _reg_range(t)
        if r and r[2] == s.dwords + 1:  # tfe returns one more dword; checked against the tfe bit at the end
          from dataclasses import replace
          s = replace(s, dwords=s.dwords + 1)
          c.fields["_tfe_dw"] = 1
      t2, neg, ab = _src_mods(t)
      idx, is_a = _vgpr(c, s, t2, k != "v")
      c.set(s.field, idx)
      _set_acc(c, s, is_a)
      _apply_srcmods(c, s, neg, ab)
      return
    if k == "sdwa_src":
      t2, neg, ab = _src_mods(t)
      i = 0 if s.field == "vsrc0" else 1
      m = re.fullmatch(r"sext\((.*)\)", t2)
      if m:
        t2 = m[1].strip()
        c.set(f"src{i}_sext", 1)
      _apply_srcmods(c, s, neg, ab)
      r = _reg_range(t2)
      if r and r[0] == "v":
        return c.set(s.field, r[1])
      code = _scalar_code(I, t2, s.dwords)
      if code is None:
        code, lit = _literal_value(t2, s)
        if code is None:
          raise _NoFit("invalid operand for instruction")
      c.set(f"s{i}", 1)
      return c.set(s.field, code)
    if k in ("src", "av_src", "ssrc", "a_src"):
      t2, neg, ab = _src_mods(t)
      _apply_srcmods(c, s, neg, ab)
      r = _reg_range(t2)
      if r and r[0] in ("v", "a"):
        if k == "ssrc" or s.opr == "OPR_SREG" or (k == "a_src") != (r[0] == "a") and k != "av_src":
          raise _NoFit("invalid operand for instruction")
        if k == "a_src":
          c.set(s.field, 256 + r[1])
          return
        idx, is_a = _vgpr(c, s, t2, k == "av_src")
        c.set(s.field, 256 + idx)
        _set_acc(c, s, is_a)
        return
      code = _scalar_code(I, t2, s.dwords)
      if code is not None:
        c.set(s.field, code)
        return
      ls = s
      if c.e.base in ("VOP1", "VOP2") and re.search(FMT["pk_int_literal_ops"].get(I.target.family, "^$"), c.op):
        if _FLOAT_RE.match(t2):  # a float is an f16 literal, never an inline constant
          c.set(s.field, 255)
          return c.lit(f16_bits(float(t2)), s.dwords)
        from dataclasses import replace
        ls = replace(s, fmt="FMT_NUM_B64", bits=64)  # integers only: no f32/f16 bit patterns
      if _salu16(c, s, "b32"):  # SALU f16 (gfx12) SOP1/SOPC: '0x3c00' is a literal, not 1.0
        from dataclasses import replace
        ls = replace(s, fmt="FMT_NUM_B32", bits=32)
      if t2 == "lds_direct" or t2 == "src_lds_direct":
        raise _NoFit("lds_direct is not supported on this GPU")
      rm = _RELOC.fullmatch(t2)
      if rm:  # relocatable literal: encoded as 0, the fixup goes to the caller (code objects)
        c.set(s.field, 255)
        c.lit(0)
        c.label = ("reloc", rm[1], f"{rm[2]}_{rm[3]}", int(rm[4].replace(" ", ""), 0) if rm[4] else 0)
        return
      m = re.fullmatch(r"lit\((.*)\)", t2)
      dropped = bool(m and ab)
      if m and ab:  # llvm-mc-22 drops lit() under |..| (and prints a modified inline 0 as |lit(0x0)|)
        t2, m = m[1].strip(), None
      elif m and neg:
        raise _NoFit("invalid operand for instruction")
      if m and re.search(FMT["lit_syntax_rejected"], c.op):
        raise _NoFit("failed parsing operand.")
      if m:  # lit(x): keep x as a literal even when it is an inline constant
        code, lit = _literal_value(m[1], ls)
        lit = lit if lit is not None else _num(m[1]) & 0xffffffff
        _check_lit16(c, s, lit, explicit=True)
        c.set(s.field, 255)
        c.lit(lit, s.dwords)
        return
      code, lit = _literal_value(t2, ls)
      if code is not None:
        c.set(s.field, code)
        return
      if lit is not None:
        _check_lit16(c, s, lit, explicit=dropped)  # a 16-bit |lit(0xffffffff)| is no -1
        if (neg or ab) and s.bits == 64 and not _FLOAT_RE.match(t2):  # llvm-mc-22: no modifiers on 64-bit int literals
          raise _NoFit("invalid operand for instruction")
        c.set(s.field, 255)
        c.lit(lit, s.dwords)
        return
      raise _NoFit("invalid operand for instruction")
    if k == "s":
      if s.opr == "OPR_SDST_NULL" and t != "null":
        raise _NoFit("src0 must be null")
      code = _scalar_code(I, t, s.dwords)
      if code is None or code > 127:
        raise _NoFit("invalid operand for instruction")
      c.set(s.field, code)
      return
    if k == "sbase":
      code = _scalar_code(I, t, s.dwords)
      if code is None or code % 2:
        raise _NoFit("invalid operand for instruction")
      c.set(s.field, code // 2)
      return
    if k == "srsrc":
      code = _scalar_code(I, t, s.dwords)
      if code is None or code % 4:
        raise _NoFit("invalid operand for instruction")
      c.set(s.field, code // 4)
      return
    if k == "smem_off":
      return _smem_off(c, s, t)
    if k == "sdwa_sdst":
      if t in ("vcc", "vcc_lo"):
        return
      code = _scalar_code(I, t, s.dwords)
      if code is None:
        raise _NoFit("invalid operand for instruction")
      c.set("sd", 1)
      c.set("sdst", code)
      return
    if k == "label":
      if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", t):
        c.set(s.field, _num(t) & 0xffff)
      elif re.fullmatch(r"[A-Za-z_.$][\w.$]*", t):
        c.label = t
        c.set(s.field, 0)
      else:
        raise _NoFit("invalid operand for instruction")
      return
    if k == "hwreg":
      return c.set(s.field, _hwreg(c, t))
    if k in ("sendmsg", "sendmsg_rtn"):
      return c.set(s.field, _sendmsg(c, t))
    if k == "waitcnt":
      return c.set(s.field, _waitcnt(c, t))
    if k == "delay":
      return c.set(s.field, _delay(t))
    if k == "depctr":
      return c.set(s.field, _depctr(c, t))
    if k == "gpr_idx":
      m = re.fullmatch(r"gpr_idx\(([\w,\s]*)\)", t)
      names = FMT["gpr_idx"]["names"]
      v = sum(1 << names.index(n.strip()) for n in m[1].split(",") if n.strip()) if m else _num(t)
      if not 0 <= v < 16:
        raise _NoFit("invalid immediate: only 4-bit values are legal")
      return c.set(s.field, v)
    if k == "version":
      tv = FMT["version"]
      byname = {n: int(x) for x, n in tv["names"].items()} | {n: 1 << b for b, n in tv["flags"]}
      return c.set(s.field, functools.reduce(operator.or_, (byname.get(p.strip()) if p.strip() in byname else
                                                            _num(p.strip()) for p in t.split("|"))) & 0xffff)
    if k == "attr":
      m = re.fullmatch(r"attr(\d+)\.([xyzw])", t)
      if not m or int(m[1]) > FMT["attr_max"]:
        raise _NoFit("invalid operand for instruction")
      c.set("attr_chan", "xyzw".index(m[2]))
      return c.set(s.field, int(m[1]))
    v = _num(t)
    fd = next(f for f in I.fields[c.enc] if f.name == s.field)
    if v < -(1 << (fd.width - 1)) or v >= (1 << fd.width):
      raise _NoFit("invalid immediate: only 16-bit values are legal" if fd.width == 16 else
                   "invalid operand for instruction")
    c.set(s.field, v & fd.mask)
  except _NoFit as e:
    raise _NoFit(e.msg, e.col or col) from None
  except (ValueError, OverflowError):
    raise _NoFit("invalid operand for instruction", col) from None


def _image_operand(c: _Ctx, s: Slot, t: str):
  """Image data/address registers: any width here, checked against dim/dmask/a16/d16/tfe once modifiers are read."""
  regs = [x.strip() for x in t[1:-1].split(",")] if t.startswith("[") and t.endswith("]") else [t]
  parsed = [_reg_range(x) for x in regs]
  if any(r is None or r[0] != "v" for r in parsed) or (len(parsed) > 1 and s.field != "vaddr0"):
    raise _NoFit("invalid operand for instruction")
  if s.field == "vaddr0":  # gfx12: up to five address registers, the last may be a range
    names = [n for n in FMT["mimg"]["vaddr_fields12"] if n in c.names]
    if len(parsed) > len(names) or any(r[2] != 1 for r in parsed[:-1]):
      raise _NoFit("invalid operand for instruction")
    for n, r in zip(names, parsed):
      c.set(n, r[1])
    c.fields["_img_vaddr"] = sum(r[2] for r in parsed)
    return
  c.set(s.field, parsed[0][1])
  c.fields["_img_" + s.field] = parsed[0][2]


def _flat_operand(c: _Ctx, s: Slot, t: str):
  kind = FMT["flat_addr"][c.e.base]
  off = FMT["off_code"]["cdna" if c.I.target.family == "cdna" else "rdna"]
  if s.field == "saddr":
    if t == "off":
      c.set("saddr", off)
      return
    code = _scalar_code(c.I, t, FMT["scratch_saddr_dwords"] if kind == "scratch" else 2)
    if code is None:
      raise _NoFit("invalid operand for instruction")
    c.set("saddr", code)
    return
  if t == "off":
    if kind != "scratch":
      raise _NoFit("invalid operand for instruction")
    c.set(s.field, 0)
    return
  r = _reg_range(t)
  if r is None or r[0] != "v":
    raise _NoFit("invalid operand for instruction")
  c.set(s.field, r[1])
  c.fields.setdefault("_addr_dwords", r[2])
  if kind == "scratch" and "sve" in c.names:
    c.set("sve", 1)


def _smem_off(c: _Ctx, s: Slot, t: str):
  fam = c.I.target.family
  code = _scalar_code(c.I, t, 1)
  if code is not None:
    if fam == "cdna":
      c.fields["_smem_sgpr"] = code
    else:
      c.set("soffset", code)
    return
  v = _num(t)
  c.fields["_smem_imm"] = v


def _name_or_num(t: str, table: dict[str, int]) -> int:
  t = t.strip()
  if t in table:
    return table[t]
  return _num(t)


def _hwreg(c: _Ctx, t: str) -> int:
  m = re.fullmatch(r"hwreg\((.*)\)", t.strip())
  if not m:
    return _num(t) & 0xffff
  args = [a.strip() for a in m[1].split(",")]
  fam = c.I.target.family
  rid = _name_or_num(args[0], MSGS[fam]["hwreg"])
  off, size = (int(args[1], 0), int(args[2], 0)) if len(args) == 3 else (0, 32)
  if not (0 <= rid < 64 and 0 <= off < 32 and 1 <= size <= 32):
    raise _NoFit("invalid hardware register: only 6-bit values are legal")
  return rid | off << 6 | (size - 1) << 11


def _sendmsg(c: _Ctx, t: str) -> int:
  m = re.fullmatch(r"sendmsg\((.*)\)", t.strip())
  if not m:
    return _num(t) & 0xffff
  args = [a.strip() for a in m[1].split(",")]
  fam = c.I.target.family
  mid = _name_or_num(args[0], MSGS[fam]["sendmsg"])
  rest = [int(a, 0) for a in args[1:]]
  if fam == "cdna":
    op = rest[0] if rest else 0
    st = rest[1] if len(rest) > 1 else 0
    return mid | op << 4 | st << 8
  return mid


def _waitcnt(c: _Ctx, t: str) -> int:
  """vmcnt(n) expcnt(n) lgkmcnt(n) (separated by spaces, '&' or ','; *_sat clamps) -> simm16. Counters not named
  stay at their maximum; bits outside the counters are zero, as llvm-mc-22 encodes them."""
  layout = dict(FMT["waitcnt"][c.I.target.family])
  t = t.strip()
  if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", t):
    return _num(t) & 0xffff
  width = {name: sum(w for _, w in chunks) for name, chunks in layout.items()}
  vals = {name: (1 << w) - 1 for name, w in width.items()}
  for m in re.finditer(r"(?<!\w)(\w+)\s*\(\s*(\w+)\s*\)", t):
    name = m[1][:-4] if m[1].endswith("_sat") else m[1]
    if name not in vals:
      raise _NoFit(f"invalid counter name {m[1]}")
    n = int(m[2], 0)
    if n >= 1 << width[name]:
      if not m[1].endswith("_sat"):
        raise _NoFit(f"too large value for {name}")
      n = (1 << width[name]) - 1
    vals[name] = n
  full = 0
  for name, chunks in layout.items():
    sh = 0
    for lo, w in chunks:
      full |= ((vals[name] >> sh) & ((1 << w) - 1)) << lo
      sh += w
  return full


def _depctr(c: _Ctx, t: str) -> int:
  t = t.strip()
  if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", t):
    return _num(t) & 0xffff
  d = FMT["depctr"][c.I.target.family]
  v = 0xffff & ~d["zero"]
  for m in re.finditer(r"(?<!\w)(\w+)\s*\(\s*(\w+)\s*\)", t):
    fld = next((f for f in d["fields"] if f[0] == m[1]), None)
    if fld is None:
      raise _NoFit("invalid counter name " + m[1])
    n, lo, w = fld
    x = int(m[2], 0)
    if x >= 1 << w:
      raise _NoFit("invalid value for " + n)
    v = v & ~(((1 << w) - 1) << lo) | x << lo
  return v


def _delay(t: str) -> int:
  d = FMT["delay_alu"]
  t = t.strip()
  if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", t):
    return _num(t) & 0xffff
  v = 0
  if re.search(r"\(\s*\)", t):  # llvm-mc-22 prints an invalid id as 'instid1(/* invalid instid value */)'
    raise _NoFit("expected a value name")
  for m in re.finditer(r"(?<!\w)(\w+)\s*\(\s*(\w+)\s*\)", t):
    fld = next((f for f in d["fields"] if f[0] == m[1]), None)
    if fld is None:
      raise _NoFit("invalid field name " + m[1])
    tab = d["instskip"] if m[1] == "instskip" else d["instid"]
    if m[2] not in tab:
      raise _NoFit("invalid value name " + m[2])
    v |= tab.index(m[2]) << fld[1]
  return v


# ------------------------------------------------------------------------------------------ modifiers


def _bits_list(t: str) -> list[int]:
  m = re.fullmatch(r"\[\s*([01](\s*,\s*[01])*)\s*\]", t)
  if not m:
    raise _NoFit("invalid op_sel operand")
  return [int(x) for x in m[1].replace(" ", "").split(",")]


def _mod(c: _Ctx, sig, tok: str):
  key, _, val = tok.partition(":")
  names = c.names
  base = c.e.base
  if not val:
    if key == "clamp":
      return c.set("clmp", 1)
    if key in ("row_mirror", "row_half_mirror"):
      return c.set("dpp", 320 if key == "row_mirror" else 321)
    if key == "unorm" and "unrm" in names:
      return c.set("unrm", 1)
    if key == "lds" and "lds" not in sig.mods and c.I.target.family in FMT["lds_load"]:
      raise _NoFit("invalid operand for instruction")
    if key in names and key in _FLAGS:
      return c.set(key, 1)
    raise _NoFit("invalid operand for instruction")
  if key == "offset" and base == "SMEM":
    c.fields["_smem_imm2"] = _num(val)
    return
  if key == "offset" and "offset0" in names:
    v = swizzle_value(val) if val.startswith("swizzle(") and re.search(FMT["ds_swizzle"], c.op) else _num(val)
    if not 0 <= v < 65536:
      raise _NoFit("invalid operand for instruction")
    c.set("offset0", v & 0xff)
    c.set("offset1", v >> 8)
    return
  if key in ("offset0", "offset1"):
    v = _num(val)
    if not 0 <= v < 256:
      raise _NoFit("invalid operand for instruction")
    return c.set(key, v)
  if key == "offset":
    f = "ioffset" if "ioffset" in names else "offset"
    fd = next((x for x in c.I.fields[c.enc] if x.name == f), None)
    if fd is None:
      raise _NoFit("not a valid operand.")
    v = _num(val)
    signed = base in FMT["signed_offset"].get(c.I.target.family, [])
    lo, hi = (-(1 << (fd.width - 1)), 1 << (fd.width - 1)) if signed else (0, 1 << fd.width)
    if base == "FLAT" and c.I.target.family == "rdna3":  # gfx11 FLAT: 12-bit unsigned in a 13-bit field
      hi = 1 << (fd.width - 1)
    if not lo <= v < hi:
      raise _NoFit("expected a 12-bit unsigned offset" if not signed else f"expected a {fd.width}-bit signed offset")
    return c.set(f, v & fd.mask)
  if key in ("mul", "div"):
    om = {"mul:2": 1, "mul:4": 2, "div:2": 3, "mul:1": 0, "div:1": 0}.get(tok)
    if om is None:
      raise _NoFit("invalid omod")
    return c.set("omod", om)
  if key in ("byte_sel", "index_key") and key in sig.mods:
    v, bits = _num(val), opsel_field_bits(key, c.I.target.family, c.op)
    if not 0 <= v < 1 << len(bits):
      raise _NoFit("invalid byte_sel value." if key == "byte_sel" else "out of range index_key")
    for i, b in enumerate(bits):
      if v >> i & 1:
        c.orbit("opsel", b)
    return
  if key in ("op_sel", "op_sel_hi") and re.search(FMT["opsel_not_accepted"].get(c.I.target.family, "^$"), c.op):
    raise _NoFit("invalid op_sel operand")
  nsrc = sum(1 for x in sig.slots if x.field in ("src0", "src1", "src2", "vsrc0"))
  if base == "VOP3P" and key in ("op_sel", "op_sel_hi", "neg_lo", "neg_hi"):
    bits = _bits_list(val)  # llvm-mc-22 takes up to 4 elements and drops those past the instruction's sources
    if len(bits) > 4:
      raise _NoFit("expected a closing square bracket")
    val = "[" + ",".join(map(str, bits[:nsrc])) + "]" if nsrc < len(bits) else val
  if key == "op_sel":
    bits = _bits_list(val)
    if base == "VOP3P" or "opsel" in names and base not in ("VOP3", "VOP3SD", "VINTERP"):
      for i, b in enumerate(bits):
        if b:
          c.orbit("opsel", i)
      return
    has_dst = any(x.field == "vdst" and x.kind in ("v", "av") for x in sig.slots)
    if c.I.target.family == "cdna":  # gfx9: the list's last element is dst (op_sel bit 3)
      nsrc, has_dst = len(bits) - 1, True
    if c.I.target.true16 and re.search(FMT["opsel_extra_src"], c.op.removesuffix("_E64")) and len(bits) == 4:
      halves = c.fields.get("opsel", 0)  # bits the .h suffixes set; fmac's src2 is its destination
      if any(halves >> i & 1 and not bits[j] for i, j in ((0, 0), (1, 1), (3, 3))) or bits[2] != halves >> 3 & 1:
        raise _NoFit("op_sel operand conflicts with 16-bit operand suffix")
    for i, b in enumerate(bits):
      if b:
        c.orbit("opsel", 3 if has_dst and i == nsrc else i)
    return
  if key == "op_sel_hi":
    bits = _bits_list(val)
    hi = c.fields.get("opsel_hi", 3)
    for i, b in enumerate(bits):
      if i < 2:
        hi = hi & ~(1 << i) | (b << i)
      elif "opsel_hi2" in names:  # (VOP3PX2 has no third bit: llvm-mc-22 takes it and encodes nothing)
        c.set("opsel_hi2", b)
    return c.set("opsel_hi", hi)
  if key in ("neg_lo", "neg_hi"):
    for i, b in enumerate(_bits_list(val)):
      if b:
        c.orbit("neg" if key == "neg_lo" else "neg_hi", i)
    return
  if key == "neg" and "blgp" in names:
    v = 0
    for i, b in enumerate(_bits_list(val)):
      v |= b << i
    return c.set("blgp", v)
  if key == "quad_perm":
    m = re.fullmatch(r"\[\s*([0-3])\s*,\s*([0-3])\s*,\s*([0-3])\s*,\s*([0-3])\s*\]", val)
    if not m:
      raise _NoFit("invalid quad_perm")
    return c.set("dpp", sum(int(m[i + 1]) << (2 * i) for i in range(4)))
  for name, lo, hi, b0, form in FMT["dpp_ctrl"]:
    cdna = c.I.target.family == "cdna"
    if key == name and form != "any flag" and (form == "any" or (form == "cdna") == cdna):
      v = _num(val) + b0
      if not lo <= v <= hi:
        continue
      return c.set("dpp", v)
  if key in ("row_mask", "bank_mask"):
    return c.set(key, _num(val) & 0xf)
  if key == "bound_ctrl":
    return c.set("bc", 1)
  if key == "fi":
    if "lane_sel_0" in names:
      if _num(val):
        c.fields["_fi8"] = 1
      return
    return c.set("fi", _num(val) & 1)  # llvm-mc-22 keeps bit 0 on DPP16 (fi:2 -> 0, fi:-1 -> 1); DPP8: non-zero
  if key == "dpp8":
    m = re.fullmatch(r"\[\s*([0-7](\s*,\s*[0-7]){7})\s*\]", val)
    if not m or "lane_sel_0" not in names:
      raise _NoFit("invalid dpp8")
    for i, x in enumerate(m[1].replace(" ", "").split(",")):
      c.set(f"lane_sel_{i}", int(x))
    return
  if key in ("dst_sel", "src0_sel", "src1_sel"):
    if val not in FMT["sdwa_sel"]:
      raise _NoFit("invalid sdwa selector")
    return c.set(key, FMT["sdwa_sel"].index(val))
  if key == "dst_unused":
    return c.set(key, FMT["sdwa_unused"].index(val))
  if key in ("cbsz", "abid", "blgp"):
    return c.set(key, _num(val))
  if key == "th":
    kind = "atomic" if re.search(FMT["th_atomic"], c.op) else "store" if re.search(FMT["th_store"], c.op) else "load"
    tab = {v: int(k) for k, v in FMT["th_names"][kind].items()}
    if val in tab:
      return c.set("th", tab[val])
    if FMT["th_sys_bypass"].get(kind) == val:
      return c.set("th", 3)
    cas = {v: int(k) for k, v in sorted(FMT["th_atomic_cascade"].items(), reverse=True) if k.isdigit()}
    if kind == "atomic" and val in cas:
      return c.set("th", cas[val])
    raise _NoFit("invalid th value")  # llvm-mc-22 prints th:0x7 / TH_ATOMIC_0x5 but does not accept them
  if key == "scope":
    return c.set("scope", FMT["scope_names"].index(val) if val in FMT["scope_names"] else _num(val))
  if key == "format" and c.op.startswith("TBUFFER"):
    tab = FMT["buf_format"][c.I.target.family]
    v = tab.index(val) if val in tab else _num(val)
    if not 0 <= v < len(tab):
      raise _NoFit("invalid format")
    if "dfmt" in names:
      c.set("dfmt", v & 15)
      return c.set("nfmt", v >> 4)
    return c.set("format", v)
  if key == "dmask":
    return c.set("dmask", _num(val))
  if key == "dim":
    dims = {v[0]: int(k) for k, v in FMT["mimg"]["dims"].items()}
    name = val[len(FMT["mimg"]["dim_prefix"]):] if val.startswith(FMT["mimg"]["dim_prefix"]) else val
    if name not in dims:
      raise _NoFit("invalid dim value")
    return c.set("dim", dims[name])
  if key == "wait_exp":
    return c.set("waitexp", _num(val))
  if key in ("wait_vdst", "wait_va_vdst", "wait_vm_vsrc"):
    return c.set(key, _num(val))
  raise _NoFit("invalid operand for instruction")


# ------------------------------------------------------------------------------------------ instruction


def _candidates(I, mnem: str) -> tuple[str, list[str]]:
  """Mnemonic -> (canonical opcode, candidate encodings in preference order)."""
  fam = I.target.family
  rev = {v.lower(): k for k, v in FMT["llvm_names"].get(fam, {}).items()}
  suffix = ""
  name = mnem
  for sfx in ("",) + _SUFFIXES:
    n = mnem[:-len(sfx)] if sfx and mnem.endswith(sfx) else (mnem if not sfx else None)
    if n is None:
      continue
    canon = rev.get(n, n).upper()
    if canon in I.by_op:
      name, suffix = canon, sfx
      break
  else:
    return "", []
  encs = I.by_op[name]

  def rank(n: str) -> tuple:
    e = I.encodings[n]
    v = e.variant
    vop3 = e.base in ("VOP3", "VOP3SD", "VOP3P") and not e.base == "VOP3P" or False
    kind = 2 if "SDWA" in v else 1 if "DPP" in v else 0
    return (kind, vop3, "LIT" in v, len(I.allowed[n]))

  def ok(n: str) -> bool:
    e = I.encodings[n]
    v = e.variant
    e32 = e.base in ("VOP1", "VOP2", "VOPC")
    if suffix == "_e32":
      return e32 and "DPP" not in v and "SDWA" not in v
    if suffix == "_e64":
      return not e32 and "DPP" not in v
    if suffix == "_dpp":
      return "DPP" in v and (e32 or fam == "cdna" or not _promoted(I, name))
    if suffix == "_e64_dpp":
      return "DPP" in v and not e32
    if suffix == "_sdwa":
      return "SDWA" in v
    return True
  return name, sorted((n for n in encs if ok(n)), key=rank)


def _promoted(I, op: str) -> bool:
  return any(op in I.tables.values.get(x, {}) for x in ("VOP1Op", "VOP2Op", "VOPCOp"))


def _constant_code(code: int) -> bool:
  """A scalar operand code that is a value, not a register: inline integers/floats, the literal marker."""
  return 128 <= code <= 208 or 240 <= code <= 248 or code == 255


def _encode_one(I, enc: str, op: str, wave: int, ops, mods, rest=("", 0)) -> tuple[Inst, str | None]:
  sig = signature(I.target.name, enc, op, wave)
  slots = list(sig.slots)
  if len(slots) == 1 and slots[0].kind in ("waitcnt", "delay", "depctr") and rest[0].strip():
    ops, mods = [(rest[0].strip(), rest[1] + len(rest[0]) - len(rest[0].lstrip()))], []
  c = _Ctx(I, enc, op, wave)
  atomic = re.search(FMT["th_atomic"], op) and (c.e.base in FMT["flat_addr"] or c.e.base in ("MUBUF", "VBUFFER"))
  if atomic and len(ops) == len(slots) - 1 and slots and slots[0].field == "vdst":
    slots = slots[1:]
  lds = "lds" in sig.mods and any(t == "lds" for t, _ in mods)  # gfx9 buffer loads to LDS name no vdata
  if lds != (bool(slots) and slots[0].field != "vdata") and "lds" in sig.mods:
    if not lds or len(ops) != len(slots) - 1:
      raise _NoFit("invalid operand for instruction")
    slots = slots[1:]
  while len(ops) < len(slots) and slots[-1].kind == "simm16_opt":
    slots = slots[:-1]
  if len(ops) != len(slots):
    if slots and all(s.kind in ("waitcnt", "delay") for s in slots) and ops:
      ops = [(" ".join(t for t, _ in ops), ops[0][1])]
    else:
      col = ops[len(slots)][1] if len(ops) > len(slots) else 0  # llvm-mc points at the mnemonic
      why = "invalid operand for instruction" if len(ops) > len(slots) else "too few operands for instruction"
      raise _NoFit(why, col)
  for s, (t, col) in zip(slots, ops):
    c.at = (col, t)
    dst = s.field in ("vdst", "sdst") and s.kind in ("s", "ssrc", "src")
    try:
      _fill(c, s, t, col)
    except _NoFit as e:
      raise _NoFit("invalid operand for instruction", col) if dst and "literal" in e.msg else e
    if dst and _constant_code(c.fields.get(s.field, 0)):
      raise _NoFit("invalid operand for instruction", col)  # a constant or literal as destination (llvm-mc-22)
  for tok, col in mods:
    c.at = (col, tok)
    try:
      _mod(c, sig, tok)
    except _NoFit as e:
      raise _NoFit(e.msg, col) from None
    except (ValueError, IndexError):
      raise _NoFit("invalid operand for instruction", col) from None
  f = c.fields
  for k, v in sig.implied:
    f[k] = v
  base = c.e.base
  v = c.e.variant
  # derived fields: markers, SMEM offset forms, address widths
  if "DPP16" in v:
    f["src0"] = 250
    f.setdefault("row_mask", 15)
    f.setdefault("bank_mask", 15)
    if "dpp" not in f:
      raise _NoFit("invalid operand for instruction")
  elif "DPP8" in v:
    f["src0"] = 234 if f.pop("_fi8", 0) else 233
    if "lane_sel_0" not in f:
      raise _NoFit("invalid operand for instruction")
  elif "SDWA" in v:
    f["src0"] = 249
    has1 = any(x.field == "vsrc1" for x in slots)
    fixed = re.search(FMT["sdwa_no_dst_sel"], op)  # no dst_sel/dst_unused operands: llvm-mc encodes DWORD, PAD
    for k, d in (("dst_sel", 6), ("dst_unused", 0 if fixed else 2), ("src0_sel", 6), ("src1_sel", 6 if has1 else 0)):
      if k in c.names:
        f.setdefault(k, d)
  f.pop("_fi8", None)
  if base in FMT["mimg"]["formats"]:
    _check_image(c, f)
    if image_fallback(f, op, I.target.family):
      raise _NoFit("image data size does not match dmask, d16 and tfe")
    vaddr = next((x.dwords for x in slots if x.field == "vaddr"), 1)
    data, addr = image_sizes(f, op, vaddr, I.target.family)
    if f.pop("_img_vdata", data) != data or f.pop("_img_vaddr", addr) != addr:
      raise _NoFit("operands are not valid for this GPU or mode")
    f.setdefault("dim", 0)
  if f.pop("_tfe_dw", 0) != f.get("tfe", 0) and base in FMT["tfe_extra_dword"]:
    raise _NoFit("invalid operand for instruction")
  if f.get("tfe") and "STORE" in op and base in FMT["tfe_extra_dword"]:
    raise _NoFit("TFE modifier has no meaning for store instructions")
  if not ops and not slots and base in FMT["null_zero_without_operands"]:  # buffer_gl0_inv, s_dcache_inv
    for fd in I.fields[enc]:
      if fd.default == "NULL":
        f.setdefault(fd.name, 0)
  vd = f.pop("_vaddr_dwords", None)
  if vd is not None and vd != f.get("offen", 0) + f.get("idxen", 0):
    raise _NoFit("invalid operand for instruction")
  if base == "SMEM" and any(x.kind == "smem_off" for x in slots):
    _finish_smem(c)
    if not any(x.field == "soffset" for x in slots) and not ops:
      f["soffset"] = FMT["smem_nooperand_soffset"]
  ad = f.pop("_addr_dwords", None)
  if ad is not None and base in FMT["flat_addr"]:
    kind = FMT["flat_addr"][base]
    off = FMT["off_code"]["cdna" if I.target.family == "cdna" else "rdna"]
    want = 2 if kind == "flat" or (kind == "global" and f.get("saddr", off) == off) else 1
    if ad != want:
      raise _NoFit("invalid operand for instruction")
  if atomic and len(slots) == len(sig.slots) and sig.slots and sig.slots[0].field == "vdst":
    field, bit = FMT["atomic_return"][I.target.family]
    if not f.get(field, 0) & bit:
      raise _NoFit("invalid operand for instruction")
  _check_rules(c, slots, f)
  for src, sel in (("src0", "cbsz"), ("src1", "blgp")):
    n = f.pop("_mf_" + src, None)
    if n is not None and n != FMT["mfma_f8f6f4"]["dwords"][f.get(sel, 0)]:
      raise _NoFit("invalid operand for instruction")
  if "literal" in c.names and c.literal is None:
    if not I.lit_only(c.e, op):
      raise _NoFit("literal variant without a literal")
    raise _NoFit("missing literal")
  for k in [k for k in f if k.startswith("_")]:
    f.pop(k)
  if "VOP3P" == base and enc.startswith("VOP3P") and not enc.startswith("VOP3P_MFMA"):
    zero = re.search(FMT["vop3p_opsel_hi_asm_zero"], op)  # fma_mix: op_sel_hi selects f16 sources, default none
    f.setdefault("opsel_hi", 0 if zero else 3)
    f.setdefault("opsel_hi2", 0 if zero else 1)
  for k, v in FMT["field_defaults"].get(f"{I.target.family}:{base}", {}).items():
    f.setdefault(k, v)
  if op.startswith("TBUFFER"):  # the format llvm-mc omits is the default
    d = FMT["buf_format"][I.target.family].index("")
    if "dfmt" in c.names:
      f.setdefault("dfmt", d & 15)
      f.setdefault("nfmt", d >> 4)
    elif "format" in c.names:
      f.setdefault("format", d)
  c.check_widths()
  inst = make(I.target.name, enc, op, 0, **f)
  return inst, c.label


def _check_rules(c: _Ctx, slots, f: dict[str, int]):
  """Operand-combination rules llvm-mc-22 enforces (data in formats.json): VOP3 DPP sources, constant bus."""
  base, fam = c.e.base, c.I.target.family
  if "DPP" in c.e.variant and base.startswith("VOP3"):
    for name in FMT["dpp_vgpr_only_srcs"].get(fam, []):
      if any(x.field == name for x in slots) and f.get(name, 256) < 256:
        raise _NoFit("invalid operand for instruction")
  ov = FMT["mfma_no_partial_overlap"]
  if re.search(ov["ops"], c.op) and "src2" in f and f["src2"] >= 256:
    dst, src2 = (next((x for x in slots if x.field == n), None) for n in ("vdst", "src2"))
    d, s2 = f.get("vdst", 0), f["src2"] - 256
    if dst and src2 and dst.dwords > ov["max_free_dwords"] and d != s2 and d < s2 + src2.dwords and s2 < d + dst.dwords:
      raise _NoFit("source 2 operand must not partially overlap with dst")
  m0i = FMT["ssrc_m0_or_inline"]
  if re.search(m0i.get(fam, "^$"), c.op) and any(not (f.get(x.field) == m0i["m0"] or 128 <= f.get(x.field, 0) < 255)
                                                 for x in slots if x.kind == "ssrc"):
    raise _NoFit("invalid operand for instruction")
  cb = FMT["constant_bus"]
  if base in cb["formats"]:
    def scalar(code: int) -> bool:
      return code < 128 and code not in cb["not_counted"][fam] or code in cb["scalar_specials"]
    def reg(code: int, dwords: int) -> tuple[int, int]:  # llvm-mc's register identity: vcc and vcc_lo are two
      return code, dwords if code < 128 else 0
    used = {reg(f[x.field], x.dwords) for x in slots if x.kind in ("src", "av_src", "ssrc") and x.field != "vdst"
            and x.field in f and scalar(f[x.field])}
    used |= {reg(f[x.field], x.dwords) for i, x in enumerate(x for x in slots if x.kind == "sdwa_src")
             if f.get(f"s{i}") and scalar(f.get(x.field, 0))}
    lane = c.wave // 32
    used |= {(106, lane) for x in slots[-1:] if x.kind == "vcc" and base == "VOP2"}  # carry-in / cndmask mask
    if re.search(FMT["implicit_vcc_read"], c.op):
      used.add((106, lane))
    n = len(used) + (len(c.lit_sizes) if c.literal is not None else 0)
    limit = 1 if fam == "cdna" or re.search(cb["one"], c.op) else cb["rdna"]
    if n > limit:
      raise _NoFit("invalid operand (violates constant bus restrictions)")


def _check_image(c: _Ctx, f: dict[str, int]):
  """dmask rules llvm-mc-22 enforces: gather4 reads one channel, atomics one (two for cmpswap) channels."""
  m, op = FMT["mimg"], c.op
  if re.search(m["gather"], op) and bin(f.get("dmask", 0)).count("1") != 1:
    raise _NoFit("invalid image_gather dmask: only one bit must be set")
  if re.search(m["atomic"], op) and f.get("dmask", 0) not in ((3, 15) if re.search(m["atomic2"], op) else (1, 3)):
    raise _NoFit("invalid atomic image dmask")
  if f.get("tfe") and "STORE" in op:
    raise _NoFit("TFE modifier has no meaning for store instructions")


def _finish_smem(c: _Ctx):
  f, fam = c.fields, c.I.target.family
  imm = f.pop("_smem_imm", None)
  imm2 = f.pop("_smem_imm2", None)
  sg = f.pop("_smem_sgpr", None)
  if imm is not None and imm2 is not None:
    raise _NoFit("invalid operand for instruction")
  off = imm if imm is not None else imm2 if imm2 is not None else 0
  if re.search(FMT["smem_unsigned_ops"].get(fam, "^$"), c.op) and not 0 <= off < 1 << 20:
    raise _NoFit("expected a 20-bit unsigned offset")
  if fam == "cdna":
    if sg is not None:
      if imm2 is not None:
        f["soffset"], f["soffset_en"], f["imm"], f["offset"] = sg, 1, 1, off & 0x1fffff
      else:
        f["offset"], f["imm"] = sg, 0
    else:
      f["offset"], f["imm"] = off & 0x1fffff, 1
    return
  fd = "ioffset" if "ioffset" in c.names else "offset"
  if imm is None and imm2 is None:
    return
  width = 24 if fd == "ioffset" else 21
  if not -(1 << (width - 1)) <= off < (1 << width):
    raise _NoFit("expected a 21-bit signed offset" if fam != "rdna4" else "expected a 24-bit signed offset")
  f[fd] = off & ((1 << width) - 1)


def assemble_line(I, text: str, line: int, col0: int, wave: int) -> tuple[Inst, str | None]:
  """Encode one instruction statement (no label, no comment)."""
  m = re.match(r"\s*(\S+)", text)
  mnem = m[1].lower()
  mcol = col0 + m.start(1)
  if "::" in text:
    r = _vopd(I, text, line, col0, wave)
    if isinstance(r, AsmError):
      raise r
    return r
  op, encs = _candidates(I, mnem)
  if not op:
    base = mnem
    for sfx in _SUFFIXES:
      if mnem.endswith(sfx):
        base = mnem[:-len(sfx)]
    known = base.upper() in {n for tab in I.tables.enums.values() for n in tab.values()}
    if known:
      raise AsmError("instruction not supported on this GPU" if base.upper() in I.target.lacks or not any(
        base.upper() in I.allowed[n] for n in I.encodings) else "invalid instruction suffix", line, mcol, text.strip(),
        I.target.name)
    raise AsmError("invalid instruction", line, mcol, text.strip(), I.target.name)
  rest = text[m.end(1):]
  try:
    ops, mods = _operands(rest, m.end(1) + col0)
  except _NoFit as e:
    raise AsmError(e.msg, line, e.col, text.strip(), I.target.name) from None
  best: _NoFit | None = None
  for enc in encs:
    try:
      inst, label = _encode_one(I, enc, op, wave, ops, mods, (rest, m.end(1) + col0))
      text_ = format_inst(inst)
      for pat, note in FMT["notes_llvm_assembles"].items():  # notes llvm-mc-22 prints and still assembles
        text_ = text_.replace(note, "") if re.search(pat, op) else text_
      if "/*Invalid" in text_:  # an operand llvm-mc only prints with an "invalid register" note
        raise _NoFit("invalid operand for instruction", mcol)
      return inst, label
    except _NoFit as e:
      if best is None or e.col > best.col:
        best = e
    except GputwinError as e:
      best = _NoFit(str(e), mcol)
  raise AsmError(best.msg if best else "invalid instruction", line, best.col if best and best.col else mcol,
                 text.strip(), I.target.name)


def _vopd(I, text: str, line: int, col0: int, wave: int):
  """`X :: Y` (gfx11+ VOPD): each half an opcode of VOPDOp with vdst, src0 (any source) and a VGPR vsrc1 where the
  opcode has one; FMAMK/FMAAK carry the literal, CNDMASK may name its VCC. Errors point at the token."""
  def err(msg: str, col: int):
    return AsmError(msg, line, col, text.strip(), I.target.name)
  tab = I.tables.values.get("VOPDOp")
  cut = text.index("::")
  if tab is None:
    return err("unknown token in expression", col0 + cut)
  halves = [(text[:cut], col0), (text[cut + 2:], col0 + cut + 2)]
  if "::" in halves[1][0]:
    return err("invalid operand for instruction", col0 + cut + 2 + halves[1][0].index("::"))
  vals, lit = {}, None
  for (part, pcol), side in zip(halves, "xy"):
    m = re.match(r"\s*(\S+)", part)
    if m is None:
      return err(f"expected a VOPD{side.upper()} instruction after ::" if side == "y" else "unexpected token at start "
                 "of statement", pcol + len(part) if side == "y" else pcol)
    name = m[1].upper()
    if name not in tab:
      return err("invalid instruction" if side == "x" else "invalid VOPDY instruction", pcol + m.start(1))
    vals["op" + side] = tab[name]
    try:
      ops, mods = _operands(part[m.end(1):], pcol + m.end(1))
    except _NoFit as e:
      return err(e.msg, e.col)
    if mods:
      return err("invalid operand for instruction", mods[0][1])
    vo = I.tables.operands.get(("VOPDOp", name), {})
    nregs = 2 + any(k.startswith("vsrc") for k in vo)
    if re.search("CNDMASK", name) and len(ops) == nregs + 1 and ops[-1][0] in ("vcc", "vcc_lo"):
      ops = ops[:-1]  # llvm-mc-22 prints no VCC; accept it when written
    k_at = 2 if re.search("FMAMK", name) else nregs if re.search("FMAAK", name) else None
    want = nregs + (k_at is not None)
    if len(ops) != want:
      return err("invalid operand for instruction" if len(ops) > want else "too few operands for instruction",
                 ops[want][1] if len(ops) > want else pcol + m.start(1))
    if k_at is not None:
      t, col = ops.pop(k_at)
      try:
        k = _num(t) & 0xffffffff
      except (_NoFit, ValueError):
        return err("not a valid operand.", col)
      if lit is not None and lit != k:
        return err("only one unique literal operand is allowed", col)
      lit = k
    for (t, col), fld in ((ops[0], "vdst"), (ops[2] if len(ops) > 2 else (None, 0), "vsrc")):
      if t is None:
        continue
      r = _reg_range(t)
      if r is None or r[0] != "v" or r[2] != 1 or r[3]:
        return err("invalid operand for instruction", col)
      if r[1] > 255:
        return err("register index is out of range", col)
      vals[fld + side + ("1" if fld == "vsrc" else "")] = r[1]
    c = _Ctx(I, "VOPD", "", wave)
    so = next((o for k, o in vo.items() if k.startswith("src")), None)
    sl = Slot("src" + side + "0", "src", 1, so.fmt if so else "FMT_NUM_F32", 32)
    c.names.add("literal")
    try:
      _fill(c, sl, ops[1][0], ops[1][1])
      c.check_widths()
    except _NoFit as e:
      return err(e.msg, e.col or ops[1][1])
    vals["src" + side + "0"] = c.fields[sl.field]
    if c.literal is not None:
      if lit is not None and lit != c.literal:
        return err("only one unique literal operand is allowed", ops[1][1])
      lit = c.literal
  why = _vopd_rules(I, vals, lit)
  if why:
    return err(why, col0)
  vals["vdsty"] = vals["vdsty"] >> 1
  enc = "VOPD_LIT" if lit is not None else "VOPD"
  if lit is not None:
    vals["literal"] = lit
  try:
    inst = make(I.target.name, enc, I.tables.enums["VOPDOp"][vals["opx"]], 0, **vals)
    inst = inst.replace(opx=vals["opx"], opy=vals["opy"])
    encode(inst)
  except GputwinError as e:  # an opcode the X slot cannot hold (Y-only opcodes)
    return err(str(e) if isinstance(e, AsmError) else "invalid instruction", col0)
  return inst, None


def _vopd_rules(I, vals: dict[str, int], lit: int | None) -> str | None:
  """llvm-mc-22's VOPD checks (formats.json vopd_rules): per source slot the two halves' VGPRs sit in different
  banks, and the constant bus (scalar src0s, the literal, each CNDMASK's VCC) holds at most `bus` values."""
  r, names = FMT["vopd_rules"], I.tables.enums["VOPDOp"]
  ops = {h: names[vals["op" + h]] for h in "xy"}
  def regs(h: str) -> list[int | None]:
    s0 = vals["src" + h + "0"]
    s1 = vals.get("vsrc" + h + "1")
    src = [s0 - 256 if s0 >= 256 else None, s1, vals["vdst" + h] if re.search(r["dst_is_src2"], ops[h]) else None]
    return [src[0], None, s1] if re.search(r["src1_is_src2"], ops[h]) else src
  for i, (a, b) in enumerate(zip(regs("x"), regs("y"))):
    if r["banks_enforced"] and a is not None and b is not None and a % r["banks"] == b % r["banks"]:
      return f"src{i} operands must use different VGPR banks"
  cb = FMT["constant_bus"]
  scalars = {vals["src" + h + "0"] for h in "xy" if vals["src" + h + "0"] < 128 and vals["src" + h + "0"] not in
             cb["not_counted"][I.target.family] or vals["src" + h + "0"] in cb["scalar_specials"]}
  n = len(scalars) + (lit is not None) + sum(bool(re.search(r["reads_vcc"], o)) for o in ops.values())
  return "invalid operand (violates constant bus restrictions)" if n > r["bus"] else None


def assemble(text: str, arch: str, *, wave: int | None = None, symbols: dict | None = None,
             relocs: list | None = None) -> bytes:
  """Assemble llvm-mc-22 AMDGPU syntax for `arch`. Labels resolve in a second pass; `symbols`, when given,
  is filled with label -> byte offset. Literal operands such as `func@rel32@lo+4` are encoded as 0 and, when
  `relocs` is given, reported there as dicts {offset, symbol, kind ("rel32_lo"...), addend}. Raises AsmError with
  line:column on bad input."""
  I = isa(arch)
  w = wave or I.target.wave
  if w not in I.target.waves:
    raise AsmError(f"wave{w} is not supported on {arch}", arch=arch)
  out: list[tuple[bytearray, str | None, int, int, str]] = []
  labels: dict[str, int] = {}
  pc = 0
  for ln, raw in enumerate(text.splitlines(), 1):
    line = _strip_comment(raw)
    while True:
      m = re.match(r"\s*([A-Za-z_.$][\w.$]*)\s*:(?!:)", line)
      if not m or re.match(r"\s*[A-Za-z_.$][\w.$]*\s*:\s*\[", line):
        break
      if m[1] in labels:
        raise AsmError("invalid symbol redefinition", ln, m.start(1) + 1, raw.strip(), arch)
      labels[m[1]] = pc
      line = " " * m.end() + line[m.end():]
    s = line.strip()
    if not s:
      continue
    if s.startswith("."):
      if _IGNORED_DIRECTIVES.match(s):
        continue
      raise AsmError("unknown directive", ln, len(line) - len(line.lstrip()) + 1, raw.strip(), arch)
    inst, label = assemble_line(I, line, ln, 1, w)
    b = bytearray(encode(inst))
    out.append((b, label, pc, ln, raw))
    pc += len(b)
  res = bytearray()
  for b, label, at, ln, raw in out:
    if isinstance(label, tuple):
      _, sym, kind, addend = label
      if relocs is None:
        raise AsmError(f"relocatable expression {sym}@{kind.replace('_', '@')} needs a code object (relocs=)", ln,
                       raw.find(sym) + 1, raw.strip(), arch)
      relocs.append({"offset": at + len(b) - 4, "symbol": sym, "kind": kind, "addend": addend})
    elif label is not None:
      if label not in labels:
        raise AsmError(f"undefined label {label!r}", ln, raw.find(label) + 1, raw.strip(), arch)
      delta = (labels[label] - (at + 4)) // 4
      if not -32768 <= delta < 32768:
        raise AsmError("branch offset out of range", ln, raw.find(label) + 1, raw.strip(), arch)
      b[0:2] = (delta & 0xffff).to_bytes(2, "little")
    res += b
  if symbols is not None:
    symbols.update(labels)
  return bytes(res)
