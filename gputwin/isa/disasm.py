"""Disassembler: Inst -> llvm-mc-22 canonical text, driven by syntax.signature() and the spelling tables."""
from __future__ import annotations

import json
import re
from pathlib import Path

from gputwin.errors import DecodeError
from gputwin.isa.model import FMT, isa
from gputwin.isa.operands import Slot, is_acc, opsel_field_bits, returns, signature
from gputwin.isa.syntax import MOD_PRINTERS, image_sizes, inline_for, inline_text, int16_fmt, scalar_name, vgpr_text

MSGS = json.loads((Path(__file__).parent / "data" / "messages.json").read_text())


def _bad(inst, what: str):
  return DecodeError(f"{inst.op.lower()}: {what}", inst.arch, None, inst.f.get("encoding"))


def _vsrc_half(inst, field: str) -> bool:
  """true16 VOP3: is the 16-bit operand in `field` the high half? (op_sel bit per operand)"""
  bit = {"src0": 0, "vsrc0": 0, "src1": 1, "src2": 2, "vdst": 3}.get(field)
  return bool(bit is not None and (inst.get("opsel", 0) >> bit) & 1)


_OPSEL_BIT = {"src0": 0, "vsrc0": 0, "src1": 1, "src2": 2, "vdst": 3}


def _e32_like(inst) -> bool: return inst.format in ("VOP1", "VOP2", "VOPC")


def _lo128_note(inst, s, v: int, kind: str) -> str:
  if v < 128 or s.bits != 16 or not _e32_like(inst) or isa(inst.arch).target.true16 or inst.arch.startswith("gfx9"):
    return ""
  return f"/*Invalid register, operand has '{FMT['lo128'][kind]}' register class*/"


def _vreg(inst, s, v: int) -> str:
  if s.half:
    if _e32_like(inst):
      return f"v{v & 0x7f}.{'h' if v & 0x80 else 'l'}"
    return f"v{v}.{'h' if _vsrc_half(inst, s.field) else 'l'}"
  acc = s.kind in ("a", "a_src") or (s.kind in ("av", "av_src") and is_acc(inst, s.field))
  return vgpr_text("a" if acc else "v", v, s.dwords) + _align_note(inst, s, v, acc)


def _align_note(inst, s, v: int, acc: bool) -> str:
  if s.dwords < 2 or v % 2 == 0 or not inst.arch.startswith("gfx9") or s.fmt == "FMT_NUM_M64":
    return ""
  t = FMT["align2"]
  cls = t["av_acc"] if s.kind == "av" and acc else t.get(s.kind, "VReg")
  if s.kind == "av" and inst.format in t["av_mem_formats"]:  # buffer data operands take either file
    cls = t["av_mem"]
  if s.opr.endswith("_OR_CONST"):  # MFMA src2 has the destination's class
    cls = "AReg" if acc else "VReg"
  if s.kind == "src" and acc:
    cls = "AReg"
  return f"/*Invalid register, operand has '{cls}_{32 * s.dwords}_Align2' register class*/"


def _lit16(inst, s) -> bool:
  """Does llvm-mc-22 print only the low 16 bits of this operand's literal? (RDNA VALU 16-bit operands, SALU f16
  in SOP2/SOPC, fma_mix sources; never on gfx9)"""
  if re.search(FMT["lit16_ops"], inst.op):
    return True
  if re.search(FMT["lit32_ops"], inst.op) or not (s.bits == 16 or int16_fmt(s.fmt)):
    return False
  return inst.format.startswith("V") or "F16" in s.fmt and inst.format in FMT["salu_lit16_formats"]


def _src(inst, s, v: int, vector: bool, fam: str) -> str:
  if v >= 256:
    return _vreg(inst, s, v - 256) + _lo128_note(inst, s, v - 256, "src")
  if v == 255:
    lit = inst.get("literal")
    if lit is None:
      raise _bad(inst, "literal marker without literal dword")
    salu = inst.format if inst.format.startswith("SOP") else ""
    if _lit16(inst, s):  # 16-bit operands use the low half; lit() keeps a value that would be inline
      i = {"src0": 0, "src1": 1, "src2": 2}.get(s.field, 0)
      hi = inst.get("opsel_hi", 0) | inst.get("opsel_hi2", 0) << 2
      if re.search(FMT["mix_abs_in_neg_hi"], inst.op) and hi >> i & 1:
        from dataclasses import replace
        s = replace(s, fmt="FMT_NUM_F16", bits=16)  # fma_mix: op_sel_hi makes this source f16 (0x3c00 is 1.0)
      return f"lit(0x{lit:x})" if inline_for(lit & 0xffff, s, salu) is not None else f"0x{lit & 0xffff:x}"
    if lit == 0 and s.bits == 64 and "F64" in s.fmt:
      return "0"
    if inst.format in ("VOP1", "VOP2") and re.search(FMT["pk_int_literal_ops"].get(fam, "^$"), inst.op):
      return f"lit(0x{lit:x})" if lit <= 64 or lit >= 0xfffffff0 else f"0x{lit:x}"
    return f"lit(0x{lit:x})" if inline_for(lit, s, salu) is not None else f"0x{lit:x}"
  t = inline_text(v, s.fmt, s.bits, inst.format)
  if t is not None:
    return t
  n = scalar_name(fam, v, s.dwords, vector)
  if n is None:
    raise _bad(inst, f"invalid operand code {v} in {s.field}")
  return n


def _with_mods(inst, s, text: str) -> str:
  """Apply VOP3 abs/neg (or DPP/SDWA per-source neg/abs bits, or fma_mix's neg/neg_hi-as-abs) to a source."""
  idx = {"src0": 0, "vsrc0": 0, "src1": 1, "vsrc1": 1, "src2": 2}.get(s.field)
  if idx is None or s.kind == "lit" or any(s.field in fs and re.search(p, inst.op) for p, fs in
                                          FMT["no_src_mods"].items() if not p.startswith("_")):
    return text
  f = inst.f
  floaty = _floaty(s.fmt) or any(re.search(p, inst.op) for p in FMT["float_mods_ops"])
  mix = inst.format == "VOP3P" and re.search(FMT["mix_abs_in_neg_hi"], inst.op)
  if "SDWA" in inst.enc and "PK" in s.fmt:  # packed SDWA sources take no float modifiers
    return text
  if inst.format == "VOP3P" and not mix or not mix and not floaty:
    return text
  if mix:
    neg, ab = (f["neg"] >> idx) & 1, (f["neg_hi"] >> idx) & 1
  elif "neg" in f and "abs" in f or ("neg" in f and inst.format in ("VOP3SD", "VINTERP")):
    neg, ab = (f["neg"] >> idx) & 1, (f.get("abs", 0) >> idx) & 1
  elif f"src{idx}_neg" in f:
    neg, ab = f[f"src{idx}_neg"], f[f"src{idx}_abs"]
  else:
    return text
  if ab and text == "0":  # llvm-mc-22 spells an |inline zero| as |lit(0x0)|
    text = FMT["zero_with_mods"]
  if ab:
    text = f"|{text}|"
  if neg and re.match(r"[-\d]", text):  # -40 would read back as the constant -40
    return f"neg({text})"
  return f"-{text}" if neg else text


def _floaty(fmt: str) -> bool:
  """abs/neg source modifiers exist for float operands only (llvm-mc-22 ignores the bits otherwise)."""
  return bool(re.search(r"F(16|32|64)|BF16|FMT_ANY", fmt)) or not fmt


def _hwreg(inst, v: int) -> str:
  fam = inst.encoding and _fam(inst)
  ids = {i: n for n, i in MSGS[fam]["hwreg"].items()}
  rid, off, size = v & 63, (v >> 6) & 31, ((v >> 11) & 31) + 1
  name = ids.get(rid, str(rid))
  return f"hwreg({name})" if off == 0 and size == 32 else f"hwreg({name}, {off}, {size})"


def _sendmsg(inst, v: int) -> str:
  ids = {i: n for n, i in MSGS[_fam(inst)]["sendmsg"].items()}
  if v in ids:
    return f"sendmsg({ids[v]})"
  if _fam(inst) == "cdna":
    mid, op, stream = v & 15, (v >> 4) & 7, (v >> 8) & 3
    if v >> 10 == 0 and mid in ids and not (op or stream):
      return f"sendmsg({ids[mid]})"
    return f"sendmsg({mid}, {op}, {stream})" if v >> 10 == 0 else str(v)
  if v & 0xff in ids:  # llvm-mc-22 names a known message id whatever the upper bits hold
    return f"sendmsg({ids[v & 0xff]})"
  return f"sendmsg({v}, 0, 0)" if v <= 0xff else str(v)


def _waitcnt(inst, v: int) -> str:
  parts = []
  for name, chunks in FMT["waitcnt"][_fam(inst)]:
    val, sh, width = 0, 0, 0
    for lo, w in chunks:
      val |= ((v >> lo) & ((1 << w) - 1)) << sh
      sh += w
    width = sh
    parts.append((name, val, val == (1 << width) - 1))
  shown = [f"{n}({x})" for n, x, m in parts if not m]
  return " ".join(shown) if shown else " ".join(f"{n}({x})" for n, x, _ in parts)


def _delay(v: int) -> str:
  d = FMT["delay_alu"]
  out = []
  for name, lo, w in d["fields"]:
    x = (v >> lo) & ((1 << w) - 1)
    if x:
      tab = d["instskip"] if name == "instskip" else d["instid"]
      bad = "instskip" if name == "instskip" else "instid"
      out.append(f"{name}({tab[x]})" if x < len(tab) else f"{name}(/* invalid {bad} value */)")
  return " | ".join(out) if out else "0"


def _fam(inst) -> str:
  return isa(inst.arch).target.family


def _smem_off(inst, s) -> str:
  """SMEM offset: `imm`, `sgpr`, or `sgpr offset:imm` (gfx12 always prints offset: with an SGPR)."""
  f, fam = inst.f, _fam(inst)
  off = f.get("ioffset", f.get("offset", 0))
  width = 24 if "ioffset" in f else 21
  if fam in FMT["signed_offset"] and "SMEM" in FMT["signed_offset"][fam] and off >> (width - 1):
    off -= 1 << width
  offs = f"-0x{-off:x}" if off < 0 else f"0x{off:x}"
  if fam == "cdna":
    if f.get("soffset_en"):
      return f"{scalar_name(fam, f['soffset'], 1)}" + (f" offset:{offs}" if f.get("imm") else "")
    return offs if f.get("imm") else scalar_name(fam, off & 0x7f, 1) or offs
  null = 124
  so = f["soffset"]
  if so == null:
    return offs if off else FMT["smem_null_zero"][fam]
  reg = scalar_name(fam, so, 1)
  return reg + (f" offset:{offs}" if off or fam == "rdna4" else "")


def _flat_addr(inst, s, v: int) -> str:
  base = inst.format
  kind = FMT["flat_addr"][base]
  f = inst.f
  if kind == "scratch":
    return f"v{v}" if f.get("sve") else "off"
  n = 1 if kind == "global" and f.get("saddr") != _null(inst) else 2
  note = "/*Invalid register, operand has 'VReg_64_Align2' register class*/" if (
    n == 2 and v % 2 and inst.arch.startswith("gfx9")) else ""
  return vgpr_text("v", v, n) + note


def _null(inst) -> int: return FMT["off_code"]["cdna" if _fam(inst) == "cdna" else "rdna"]


def _mfma_sig(inst, sig):
  """f8f6f4 MFMAs: source widths follow the cbsz/blgp data formats."""
  from dataclasses import replace
  m = FMT["mfma_f8f6f4"]
  dw = {"src0": m["dwords"][inst.get("cbsz", 0)], "src1": m["dwords"][inst.get("blgp", 0)]}
  return replace(sig, slots=tuple(replace(x, dwords=dw[x.field]) if x.field in dw else x for x in sig.slots))


def _image_sig(inst, sig):
  """Image operand widths follow dim/dmask/a16/d16/tfe (syntax.image_sizes), not the vendor's maximum."""
  from dataclasses import replace
  vaddr = next((x.dwords for x in sig.slots if x.field == "vaddr"), 1)
  data, addr = image_sizes(inst.f, inst.op, vaddr, _fam(inst))
  return replace(sig, slots=tuple(replace(x, dwords=data) if x.field == "vdata" else replace(x, dwords=addr) if
                                  x.field in ("vaddr", "vaddr0") else x for x in sig.slots))


def format_inst(inst) -> str:
  """One instruction in llvm-mc-22's canonical text (whitespace-normalised)."""
  I = isa(inst.arch)
  wave = inst.wave or I.target.wave
  fam = I.target.family
  if inst.format == "VOPD":
    return _vopd(inst, wave)
  sig = signature(inst.arch, inst.enc, inst.op, wave)
  if I.target.true16 and inst.format in ("VOP3", "VOP3SD") and any(x.half for x in sig.slots):
    allowed = sum(1 << _OPSEL_BIT[x.field] for x in sig.slots if x.field in _OPSEL_BIT and (
      x.field != "vdst" or x.kind in ("v", "av")) and x.fmt != "FMT_NUM_M64")  # lane masks have no halves
    if inst.get("opsel", 0) & ~allowed:  # op_sel on a non-16-bit operand: llvm-mc-22 decodes the fake16 form
      from dataclasses import replace
      sig = replace(sig, slots=tuple(replace(x, half=False) for x in sig.slots),
                    mods=tuple(m for m in sig.mods if m != "op_sel"))
  fixed = next((v for p, v in FMT["vop3p_fixed"].get(fam, {}).items() if re.search(p, inst.op)), {}) \
      if inst.format == "VOP3P" else {}
  for k, v in fixed.items():  # (op_sel: but the bits index_key keeps)
    free = sum(1 << b for b in opsel_field_bits("index_key", fam, inst.op) or ()) if k == "opsel" else 0
    if inst.get(k, v) & ~free != v:
      raise _bad(inst, f"{k}={inst.get(k, v)} is not a valid encoding (only {v})")
  if inst.format in FMT["mimg"]["formats"]:
    sig = _image_sig(inst, sig)
  if FMT["mfma_f8f6f4"]["ops"] in inst.op:
    sig = _mfma_sig(inst, sig)
  # operand-less: no modifiers either (s_dcache_inv, buffer_gl0_inv)
  if not sig.slots and inst.format not in FMT["mods_without_operands"] and "DPP" not in inst.enc and not any(
      re.search(p.rpartition(":")[2], inst.op) for p in FMT["mods_of_op"].get(fam, {})):
    from dataclasses import replace
    sig = replace(sig, mods=())
  ops = []
  for s in sig.slots:
    if s.field == "vdst" and not returns(inst) or s.field == "vdata" and inst.get("lds") and "lds" in sig.mods:
      continue
    if t := _operand(inst, s, fam, wave):
      ops.append(t)
  mods = [t for k in sig.mods if (t := MOD_PRINTERS[k](inst, sig))]
  text = sig.mnemonic + (" " + ", ".join(ops) if ops else "")
  return text + (" " + " ".join(mods) if mods else "")


def _operand(inst, s, fam: str, wave: int) -> str:
  f = inst.f
  k = s.kind
  if k == "vcc":
    return "vcc_lo" if s.dwords == 1 else "vcc"
  if k == "lit":
    lit = f["literal"]
    if inst.format in FMT["lit_as_inline"].get(fam, []):  # gfx9 s_setreg_imm32_b32: 1.0, -1, 64, else hex
      code = inline_for(lit, Slot("", "src", 1, "FMT_NUM_F32", 32))
      return inline_text(code, "FMT_NUM_F32", 32, inst.format) if code is not None else f"0x{lit:x}"
    return str(lit) if inst.format == "SOPK" and lit <= 64 else f"0x{lit:x}"
  v = f.get(s.field, 0)
  if inst.format in FMT["flat_addr"]:
    if s.field in ("addr", "vaddr"):
      return _flat_addr(inst, s, v)
    if s.field == "saddr":
      dw = FMT["scratch_saddr_dwords"] if FMT["flat_addr"][inst.format] == "scratch" else 2
      return "off" if v == _null(inst) else scalar_name(fam, v, dw) or _raise(inst, v)
  if inst.format in ("MUBUF", "MTBUF", "VBUFFER") and s.field == "vaddr":
    n = inst.get("offen", 0) + inst.get("idxen", 0)
    return "off" if n == 0 else vgpr_text("v", v, n)
  if k in ("v", "a", "av"):
    if s.field in ("vdata", "vdst") and inst.get("tfe") and inst.format in FMT["tfe_extra_dword"]:
      from dataclasses import replace
      s = replace(s, dwords=s.dwords + 1)
    return _with_mods(inst, s, _vreg(inst, s, v) + _lo128_note(inst, s, v, "v"))
  if k == "sdwa_src":  # SDWA: an 8-bit register number, SGPR/constant when the s0/s1 flag is set
    i = 0 if s.field == "vsrc0" else 1
    t = _src(inst, s, v, True, fam) if f.get(f"s{i}") else vgpr_text("v", v, s.dwords)
    if f.get(f"src{i}_sext"):
      t = f"sext({t})"
    return _with_mods(inst, s, t)
  if k in ("src", "av_src", "a_src"):
    return _with_mods(inst, s, _src(inst, s, v, True, fam) + _vgpr_only_note(inst, s, v))
  if k == "ssrc":
    if v >= 256:
      raise _bad(inst, f"invalid scalar operand {v}")
    x = FMT["sdst_xexec"]
    note = x["note"] if s.field == "vdst" and v in x["codes"] and re.search(x["ops"].get(fam, "^$"), inst.op) else ""
    return _src(inst, s, v, False, fam) + note
  if k == "s" and v >= 128 and inst.format in FMT["mimg"]["formats"]:  # 9-bit resource fields
    if v >= 256:
      cls = f"SReg_{32 * s.dwords}_XNULL"
      return vgpr_text("v", v - 256, s.dwords) + f"/*Invalid register, operand has '{cls}' register class*/"
    return (inline_text(v, "FMT_NUM_B32", 32) or _raise(inst, v)) + "/*Invalid immediate*/"
  if k == "s":
    n = scalar_name(fam, v, s.dwords)
    if n is None:
      _raise(inst, v)
    note = FMT["smem_sdata_notes"].get(str(s.dwords)) if inst.format == "SMEM" and s.field == "sdata" else None
    return n + (f"/*Invalid register, operand has '{note[0]}' register class*/" if note and n in note[1] else "")
  if k == "sbase":
    return scalar_name(fam, v * 2, s.dwords) or _raise(inst, v)
  if k == "srsrc":
    return scalar_name(fam, v * 4, s.dwords) or _raise(inst, v)
  if k == "smem_off":
    return _smem_off(inst, s)
  if k == "sdwa_sdst":
    return (scalar_name(fam, v, s.dwords) or _raise(inst, v)) if f.get("sd") else ("vcc_lo" if s.dwords == 1 else "vcc")
  if k == "label":  # llvm-mc-22 prints a raw branch offset as an unsigned 16-bit number
    return str(v)
  if k == "hwreg":
    return _hwreg(inst, v)
  if k in ("sendmsg", "sendmsg_rtn"):
    return _sendmsg(inst, v)
  if k == "waitcnt":
    return _waitcnt(inst, v)
  if k == "delay":
    return _delay(v)
  if k == "vaddr_list":
    names = [n for n in FMT["mimg"]["vaddr_fields12"] if n in f]
    regs = [f"v{f[n]}" for n in names[:min(s.dwords, len(names))]]
    if s.dwords > len(names):
      regs[-1] = vgpr_text("v", f[names[-1]], s.dwords - len(names) + 1)
    return regs[0] if s.dwords == 1 else "[" + ", ".join(regs) + "]"
  if k == "attr":
    return f"attr{v}.{'xyzw'[f.get('attr_chan', 0)]}"
  if k == "imm" and inst.format == "SMEM":
    return str(v) if v <= 64 else f"0x{v:x}"
  if k == "depctr":
    return _depctr(inst, v)
  if k == "hex_signed":
    fd = next(x for x in I_fields(inst) if x.name == s.field)
    x = v - (1 << fd.width) if v >> (fd.width - 1) else v
    return f"-0x{-x:x}" if x < 0 else f"0x{x:x}"
  if k == "gpr_idx":
    names = [n for i, n in enumerate(FMT["gpr_idx"]["names"]) if v >> i & 1]
    return f"gpr_idx({','.join(names)})" if v < 16 else f"0x{v:x}"
  if k == "version":
    t = FMT["version"]
    if v & t["hex_mask"]:
      return f"0x{v:x}"
    return "|".join([t["names"].get(str(v & 0xff), str(v & 0xff))] + [n for b, n in t["flags"] if v >> b & 1])
  if k == "simm16_opt":  # printed only when non-zero
    return str(v) if v else ""
  if k == "simm16":  # SOPK immediates print in hex; SOPP ones like inline integers (decimal up to 64)
    if inst.format == "SOPK" and not any(re.search(p, inst.op) for p in FMT["simm16_dec_sopk"]) or any(
        re.search(p, inst.op) for p in FMT["simm16_hex"]) or v > 64:
      return f"0x{v:x}"
    return str(v)
  return str(v)


def I_fields(inst):
  return isa(inst.arch).fields[inst.enc]


def _depctr(inst, v: int) -> str:
  d = FMT["depctr"].get(_fam(inst))
  if d is None or v & d["zero"]:
    return f"0x{v:x}"
  parts = [(n, (v >> lo) & ((1 << w) - 1), (1 << w) - 1) for n, lo, w in d["fields"]]
  shown = [f"{n}({x})" for n, x, m in parts if x != m] or [f"{n}({x})" for n, x, _ in parts]
  return " ".join(shown)


def _vgpr_only_note(inst, s, v: int) -> str:
  """llvm-mc-22 prints a non-VGPR in a VGPR-only source (or a VGPR in a scalar-only one) with a comment naming the
  register class it wanted."""
  so = FMT["sgpr_only"]
  if v >= 256 and s.opr in so["types"] and inst.format in so["formats"]:
    cls = so["class_by_type"].get(s.opr) or next((c for p, c in so["class_by_op"].items() if re.search(p, inst.op)
                                                  and s.field == "src0"), so["class"])
    return f"/*Invalid register, operand has '{cls}' register class*/"
  dn = FMT["dpp_vgpr_note_srcs"].get(_fam(inst), {}).get(inst.format, [])
  if v < 128 and s.field in dn and "DPP" in inst.enc and not re.search(FMT["dpp_vgpr_note_srcs"]["scalar_ok"], inst.op):
    return "/*Invalid register, operand has 'VGPR_32' register class*/"
  d = FMT["vgpr_only"]
  if v >= 256 or s.opr not in d["types"] or s.half or (inst.format not in d["formats"] and not any(
      re.search(d["ops_any_format"].get(k, "^$"), inst.op) for k in ("all", _fam(inst)))):
    return ""
  if v < 128:
    n = 32 * s.dwords
    cls = next((c for p, c in d["class_by_op"].items() if re.search(p, inst.op)), None) or d["class_by_type"].get(
      s.opr, "").format(bits=n, align="_Align2" if s.dwords > 1 else "") or d["class"].get(str(s.dwords), f"VReg_{n}")
    if s.opr.endswith("_OR_CONST"):  # MFMA src2 takes the destination's class
      cls = f"{'AReg' if is_acc(inst, 'src2') else 'VReg'}_{n}" + ("_Align2" if inst.arch.startswith("gfx9") else "")
    return f"/*Invalid register, operand has '{cls}' register class*/"
  lo, hi = d["float_inline_noted"].get(_fam(inst), [0, -1])
  quiet = 209 <= v < 255 and not lo <= v <= hi
  return "" if s.opr.endswith(("_OR_CONST", "_OR_INLINE")) or quiet else "/*Invalid immediate*/"


def _raise(inst, v):
  raise _bad(inst, f"invalid register code {v}")


def _vopd(inst, wave: int) -> str:
  I = isa(inst.arch)
  names = I.tables.enums["VOPDOp"]
  f = inst.f
  x, y = names.get(f["opx"]), names.get(f["opy"])
  if x is None or y is None:
    raise _bad(inst, "invalid VOPD opcode")
  vdsty = (f["vdsty"] << 1) | ((f["vdstx"] & 1) ^ 1)
  halves = []
  for opn, d, s0, s1, side in ((x, f["vdstx"], f["srcx0"], f["vsrcx1"], "x"), (y, vdsty, f["srcy0"], f["vsrcy1"], "y")):
    ops = I.tables.operands.get(("VOPDOp", opn), {})
    fam = I.target.family
    parts = [f"v{d}"]
    so = ops.get(f"src{side}0") or next((o for k, o in ops.items() if k.startswith("src")), None)
    parts.append(_src(inst, Slot("srcx0", "src", 1, so.fmt if so else "FMT_NUM_F32", 32), s0, True, fam))
    if any(k.startswith("vsrc") for k in ops):
      parts.append(f"v{s1}")
    if re.search("FMAMK", opn):
      parts.insert(2, f"0x{f['literal']:x}")
    elif re.search("FMAAK", opn):
      parts.append(f"0x{f['literal']:x}")
    halves.append(f"{opn.lower()} " + ", ".join(parts))
  return " :: ".join(halves)


def validate(inst, offset: int = 0) -> None:
  """Reject field values llvm-mc-22 refuses to decode (reserved operand codes); DecodeError only."""
  for k, v in FMT["unsupported_fields"].get(inst.format, {}).items():
    if inst.get(k) == v:
      raise DecodeError(f"{inst.op.lower()}: {k}={v} form is not supported", inst.arch, offset, inst.get("encoding"))
  try:
    format_inst(inst)
  except DecodeError as e:
    raise DecodeError(e.msg, inst.arch, offset, e.word) from None
