"""The operand model: for every (encoding, opcode) the operands in the order llvm-mc prints them (`signature`:
the format's field order filtered by the vendor's per-instruction operand records, widths, implicit VCC of e32
forms, true16 halves, the modifiers that apply) and, for a decoded instruction, where each operand lives
(`operands(inst)`: VGPR/AccVGPR, SGPR or special register, inline constant, literal, immediate; `vopd_halves` for
VOPD). Spelling them is syntax.py's job; the emulator binds pcode names to these."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from gputwin.isa.model import FMT, OPS, TRUE16, Opnd, isa, special_code, vendor_ops
from gputwin.isa.vendor import Encoding, Operand

# Modifiers in llvm-mc's print order, each with the encoding fields it needs (syntax.MOD_PRINTERS spells them).
MODS = (
  ("op_sel", ("opsel",)),
  ("op_sel_hi", ("opsel_hi",)),
  ("byte_sel", ("opsel",)),
  ("index_key", ("opsel",)),
  ("neg_lo", ("neg", "neg_hi")),
  ("neg_hi", ("neg_hi",)),
  ("format", ("vdata",)),
  ("idxen", ("idxen",)),
  ("offen", ("offen",)),
  ("ds_offset", ("offset0", "offset1")),
  ("offset", ("offset",)),
  ("ioffset", ("ioffset",)),
  ("dmask", ("dmask",)),
  ("dim", ("dim",)),
  ("unorm", ("unrm",)),
  ("th", ("th",)),
  ("scope", ("scope",)),
  ("nv", ("nv",)),
  ("glc", ("glc",)),
  ("slc", ("slc",)),
  ("dlc", ("dlc",)),
  ("sc0", ("sc0",)),
  ("nt", ("nt",)),
  ("sc1", ("sc1",)),
  ("lds", ("lds",)),
  ("r128", ("r128",)),
  ("a16", ("a16",)),
  ("tfe", ("tfe",)),
  ("lwe", ("lwe",)),
  ("d16", ("d16",)),
  ("gds", ("gds",)),
  ("clamp", ("clmp",)),
  ("omod", ("omod",)),
  ("dst_sel", ("dst_sel",)),
  ("dst_unused", ("dst_unused",)),
  ("src0_sel", ("src0_sel",)),
  ("src1_sel", ("src1_sel",)),
  ("dpp", ("dpp",)),
  ("dpp8", ("lane_sel_0",)),
  ("row_mask", ("row_mask",)),
  ("bank_mask", ("bank_mask",)),
  ("bound_ctrl", ("bc",)),
  ("fi", ("src0",)),
  ("cbsz", ("cbsz",)),
  ("abid", ("abid",)),
  ("blgp", ("blgp",)),
  ("wait_vdst", ("wait_vdst",)),
  ("wait_va_vdst", ("wait_va_vdst",)),
  ("wait_vm_vsrc", ("wait_vm_vsrc",)),
  ("wait_exp", ("waitexp",)),
)


@dataclass(frozen=True)
class Slot:
  """One printed operand: the field it lives in and how to spell it."""
  field: str  # encoding field ("" for implicit operands such as VCC)
  kind: str  # v | a | av | s | src | ssrc | av_src | a_src | sdwa_src | sbase | srsrc | vcc | lit | imm | label | hwreg
  #            waitcnt | delay | depctr | sendmsg | simm16 | smem_off | sdwa_sdst | attr | hex_signed
  dwords: int = 1
  fmt: str = ""
  bits: int = 32
  half: bool = False  # true16: a 16-bit VGPR half (v1.l / v1.h)
  opr: str = ""


@dataclass(frozen=True)
class Sig:
  slots: tuple[Slot, ...]
  mods: tuple[str, ...]  # modifier keys applicable to this encoding, in print order
  mnemonic: str  # llvm-mc mnemonic including _e32/_e64/_dpp/_sdwa
  implied: tuple[tuple[str, int], ...] = ()  # fields that are not printed but have a fixed value (CMPX e64 vdst=EXEC)


def _dwords(I, o: Operand, wave: int) -> int:
  if o.fmt == "FMT_NUM_M64":  # a lane mask: one SGPR per 32 lanes
    return wave // 32
  return max(1, (o.bits + 31) // 32)


@functools.cache
def signature(arch: str, enc_name: str, op: str, wave: int) -> Sig:
  I = isa(arch)
  e = I.encodings[enc_name]
  fam = I.target.family
  base = e.base
  variant = e.variant
  vops = vendor_ops(I, e.opcode_enum, op)
  fields = I.fields[enc_name]
  byname = {f.name: f for f in fields}
  order = next((o for k, o in FMT["order_by_op"].items() if k.split(":")[:2] == [fam, base] and
                re.search(k.split(":", 2)[2], op)), None) or FMT["order"].get(base, [])
  slots: list[Slot] = []
  implied: list[tuple[str, int]] = []
  hidden = FMT["hidden_zero"].get(fam, {}).get(op, []) + [f for pat, fs in FMT["operand_drop"].get(fam, {}).items()
                                                          if re.search(pat, op) for f in fs]
  is_dpp_sdwa = "DPP" in variant or "SDWA" in variant
  mfma = enc_name.startswith("VOP3P_MFMA")
  image = base in FMT["mimg"]["formats"]
  for name in order:
    if image and name == "vaddr0" and name in byname:  # gfx12 image addresses: a list over vaddr0..vaddr4
      slots.append(Slot(name, "vaddr_list", 1, "FMT_ANY", 32))
      continue
    if name not in byname or name not in vops:
      if not (name == "saddr" and base in FMT["saddr_always"] and name in byname and vops):
        continue
    fd = byname[name]
    o = vops.get(name) or Operand("FMT_ANY", 32, "")
    kind = fd.kind
    opr = o.type
    if opr in FMT["reg_as_imm"]:
      kind = "imm"
    elif opr == "OPR_SMEM_OFFSET_NOK":
      kind = "s"
    elif kind in ("vgpr", "vdsty"):
      kind = "s" if opr.startswith(("OPR_SREG", "OPR_SDST", "OPR_SSRC")) else "v"
      if "ACCVGPR" in opr:
        kind = "a" if opr in ("OPR_ACCVGPR",) else "av"
    elif kind == "sgpr":
      kind = "smem_off" if opr == "OPR_SMEM_OFFSET" else "s"
    elif kind in ("src", "ssrc") and opr in FMT["imm_kinds"]:
      kind = FMT["imm_kinds"][opr]
    elif kind in ("src", "ssrc"):
      if opr == "OPR_EXEC":  # CMPX e64: EXEC destination is implied, never printed
        implied.append((name, special_code(I, "exec_lo")))
        continue
      if is_dpp_sdwa and name == "src0":
        kind = "v"
      elif opr == "OPR_SRC_ACCVGPR":
        kind = "a_src"
      elif "ACCVGPR" in opr:
        kind = "av_src" if kind == "src" else kind
      elif kind == "ssrc" and name == "vdst":
        kind = "ssrc"
    elif kind == "bits":  # (a source-coded one: VOP3PX2's scale_src0/1)
      kind = "s" if opr == "OPR_SREG" else "src" if opr.startswith("OPR_SRC") else FMT["imm_kinds"].get(opr, "imm")
    if opr == "OPR_EXEC":
      implied.append((name, special_code(I, "exec_lo")))
      continue
    if name in hidden:
      continue
    dw = _dwords(I, o, wave)
    half = False
    fname = name
    if is_dpp_sdwa and name == "src0":
      fname = "vsrc0"
    if "SDWA" in variant and name in ("src0", "vsrc1"):
      kind = "sdwa_src"
    slots.append(Slot(fname, kind, dw, o.fmt, o.bits, half, opr))
  # implicit VCC operands of e32 forms, read off the instruction's VOP3 form
  if base in ("VOP2", "VOPC", "VOP1") and not mfma and not ("SDWA" in variant and base == "VOPC"):
    v3 = _vop3_form(I, op)
    if v3:
      if base == "VOPC" and v3.get("vdst") and v3["vdst"].type != "OPR_EXEC":
        slots.insert(0, Slot("", "vcc", wave // 32))
      elif base == "VOPC" and fam == "cdna" and v3.get("vdst") and v3["vdst"].type == "OPR_EXEC":
        slots.insert(0, Slot("", "vcc", wave // 32))  # gfx9 VOPCX e32 still names VCC
      if base == "VOP2" and "sdst" in v3:
        slots.insert(1, Slot("", "vcc", wave // 32))
      if base == "VOP2" and v3.get("src2") and v3["src2"].fmt == "FMT_NUM_M64":
        slots.append(Slot("", "vcc", wave // 32))
  if base == "VOPC" and "SDWA" in variant:
    slots.insert(0, Slot("sdst", "sdwa_sdst", wave // 32))
  # literal operands (fmaak/fmamk/setreg_imm32): position from the data table
  if I.lit_only(e, op):
    pos = next((p for pat, p in FMT["literal_pos"].items() if re.search(pat, op)), len(slots))
    slots.insert(pos if pos >= 0 else len(slots) + 1 + pos, Slot("literal", "lit"))
  halves = TRUE16.get(I.target.name, {}).get(f"{base}:{op}") if I.target.true16 else None
  if halves:  # positions count printed operands, literal K operands included
    slots = [Slot(x.field, x.kind, x.dwords, x.fmt, x.bits, i in halves, x.opr) for i, x in enumerate(slots)]
  if re.search(FMT["cmpswap_vdst_half"], op) and base in FMT["flat_addr"] | {"MUBUF": 0, "VBUFFER": 0}:
    data = next((x for x in slots if x.field in ("data", "vsrc", "vdata")), None)
    slots = [Slot(x.field, x.kind, data.dwords // 2, x.fmt, x.bits // 2, x.half, x.opr)
             if x.field == "vdst" and data and x.dwords == data.dwords else x for x in slots]
  mods = tuple(k for k, need in MODS if all(n in byname for n in need) and _mod_applies(k, I, e, op, slots))
  if base in FMT["mods_order"]:  # formats whose modifiers llvm-mc prints in another order
    first = [k for k in FMT["mods_order"][base] if k in mods]
    mods = tuple(first + [k for k in mods if k not in first])
  only = next((m for p, m in FMT["mods_of_op"].get(fam, {}).items() if _op_match(p, enc_name, op)), None)
  if only is not None:
    mods = tuple(m for m in mods if m in only)
  return Sig(tuple(slots), mods, _mnemonic(I, e, op), tuple(implied))


def _vop3_form(I, op: str) -> dict[str, Operand] | None:
  for enum in ("VOP3SDOp", "VOP3Op"):
    if op in I.tables.values.get(enum, {}):
      return vendor_ops(I, enum, op)
  return None


def has_vop3(I, op: str) -> bool:
  return any(op in I.allowed[n] for n in I.encodings if I.encodings[n].base in ("VOP3", "VOP3SD"))


def _op_match(key: str, enc: str, op: str) -> bool:
  """A table key 'REGEX' (any encoding) or 'ENCODING:REGEX'."""
  e, _, pat = key.rpartition(":")
  return (not e or e == enc) and bool(re.search(pat, op))


def _mnemonic(I, e: Encoding, op: str) -> str:
  name = FMT["llvm_names"].get(I.target.family, {}).get(op, op).lower()
  base, v = e.base, e.variant
  if base == "VOPD":
    return name
  e32 = base in ("VOP1", "VOP2", "VOPC")
  if ("SDWA" in v or "DPP" in v) and e32 and any(re.search(p, op) for p in FMT["no_e32_suffix"]):
    return name  # (their DPP/SDWA forms too: "v_nop quad_perm:[...]")
  if "SDWA" in v:
    return name + "_sdwa"
  promoted = base in ("VOP3", "VOP3SD") and any(op in I.tables.values.get(x, {}) for x in FMT["vop3_from"])
  if "DPP" in v:
    if e32:
      return name if base == "VOPC" and I.target.family != "cdna" else name + "_dpp"
    return name + "_e64_dpp" if I.target.family != "cdna" else name + "_dpp"
  if any(re.search(p, op) for p in FMT["no_e32_suffix"]):
    return name
  if e32 and has_vop3(I, op):
    return name + "_e32"
  if promoted:
    return name + "_e64"
  return name


def opsel_field_bits(key: str, family: str, op: str) -> list[int] | None:
  """The op_sel bits that the bits of modifier `key` are kept in (formats.json "byte_sel": byte_sel's bits 0 and 1;
  "index_key"), None: `op` has no such modifier."""
  return next((b for p, b in FMT[key].get(family, {}).items() if re.search(p, op)), None)


def _mod_applies(key: str, I, e: Encoding, op: str, slots) -> bool:
  v = e.variant
  if key in ("byte_sel", "index_key"):
    base = "VOP3" if key == "byte_sel" else "VOP3P"
    return e.base == base and opsel_field_bits(key, I.target.family, op) is not None
  if key == "lds":
    return e.base in FMT["lds_load"].get(I.target.family, []) and bool(re.search(FMT["lds_load"]["ops"], op))
  if key == "op_sel" and I.target.family == "cdna" and e.base in ("VOP3", "VOP3SD"):
    return op in TRUE16["opsel_cdna"].get(I.target.name, {})
  if key == "op_sel" and e.base in ("VOP3", "VOP3SD", "VINTERP"):  # only 16-bit instructions have op_sel
    if any(re.search(p, op) for p in FMT["opsel_ops"]):
      return True
    if not I.target.true16 and I.target.family != "cdna" and e.base != "VINTERP":
      return op in TRUE16["opsel_fake16"]
    vops = vendor_ops(I, e.opcode_enum, op)
    if not any(o.bits == 16 for o in vops.values()):
      return False
    if I.target.true16:
      return bool(TRUE16.get(I.target.name, {}).get(f"{e.base}:{op}")) and op not in TRUE16["no_opsel"]
  if key == "fi":
    return "DPP" in v
  if key in ("op_sel", "op_sel_hi", "neg_lo", "neg_hi") and e.name.startswith("VOP3P_MFMA"):
    return False
  if key in ("neg_lo", "neg_hi", "op_sel_hi") and not e.base.startswith("VOP3P"):  # (VOP3PX2: op_sel_hi)
    return False
  if key in ("neg_lo", "neg_hi") and re.search(FMT["mix_abs_in_neg_hi"], op):
    return False
  if key == "op_sel_hi" and re.search(FMT["vop3p_no_opsel_hi"], op):
    return False
  if key in ("op_sel", "op_sel_hi") and e.base == "VOP3P" and not re.search(FMT["vop3p_opsel_always"], op) and \
      not re.search(FMT["vop3p_opsel_ops"], op):
    # packed 16-bit math selects halves; other VOP3P instructions (dot4/dot8 of bytes, WMMA) have no op_sel
    if not any(re.search(r"PK2_|_16$|WMMA", s.fmt) for s in slots):
      return False
  if key == "op_sel" and I.target.family == "cdna" and e.base in ("VOP3", "VOP3SD"):
    return op in TRUE16["opsel_cdna"].get(I.target.name, {})
  if any(key in ks and re.search(p, op) for p, ks in FMT["mods_skip_ops"].get(I.target.family, {}).items()):
    return False
  skip = FMT["mods_skip"].get(I.target.family, {}).get(e.base, [])
  return key not in skip or bool(re.search(FMT["mods_skip_except"].get(key, "^$"), op))


def returns(inst) -> bool:
  """Atomics print (and write) vdst only when the return bit is set: glc (RDNA3), sc0 (CDNA), th bit 0 (RDNA4)."""
  if not re.search(FMT["th_atomic"], inst.op) or inst.format not in FMT["flat_addr"] and inst.format not in (
      "MUBUF", "VBUFFER"):
    return True
  field, bit = FMT["atomic_return"][isa(inst.arch).target.family]
  return bool(inst.get(field, 0) & bit)


def is_inline(code: int) -> bool:
  """Is source code `code` an inline constant (integers 128..208, the float constants, 1/(2*pi))? The other codes of
  128..254 are registers (src_shared_base, src_vccz, ...) or reserved."""
  lo, hi = OPS["inline_int"]
  return lo <= code <= hi or str(code) in OPS["inline_float"] or code == OPS["inv2pi"]["code"]


def _code_opnd(inst, field: str, v: int, dwords: int, acc: bool = False, half: bool = False):
  """A 9-bit source code (SGPR or special register, inline constant, literal marker, VGPR/AccVGPR + 256)."""
  if v >= 256:  # a VGPR; in 16-bit VOP1/VOP2/VOPC operands bit 7 selects the high half (true16)
    e32 = half and inst.format in ("VOP1", "VOP2", "VOPC")
    return Opnd(field, "a" if acc else "v", (v - 256) & 0x7f if e32 else v - 256, dwords,
                hi=bool(e32 and (v - 256) & 0x80))
  if v == 255:
    return Opnd(field, "literal", 255, dwords, value=inst.get("literal"))
  if 128 <= v <= 248 and (is_inline(v) or str(v) not in OPS["special"]):
    return Opnd(field, "inline", v, dwords, value=v)
  return Opnd(field, "s", v, dwords)


class Half(tuple):
  """One half of a VOPD dual issue: (op, slots, operands) -- the V_DUAL_* opcode, its printed slots and operands."""
  op = property(lambda self: self[0])
  slots = property(lambda self: self[1])
  operands = property(lambda self: self[2])


_VOPD_SIDE = {"x": {"srcy0": "srcx0", "vsrcy1": "vsrcx1", "vdsty": "vdstx"}, "y": {}}


def vopd_halves(inst) -> tuple[Half, Half]:
  """VOPD: both halves with their operands. vdsty is the register (vdsty << 1) | !(vdstx & 1) (RDNA3/RDNA4 ISA,
  VOPD: the two destinations are in opposite banks); FMAMK/FMAAK halves read the literal as their K operand."""
  I, f = isa(inst.arch), inst.f
  names = I.tables.enums["VOPDOp"]
  out = []
  for side, code in (("x", f["opx"]), ("y", f["opy"])):
    op = names[code]
    recs = {_VOPD_SIDE[side].get(k, k): o for k, o in I.tables.operands.get(("VOPDOp", op), {}).items()}
    slots, ops = [], []
    for fname in (f"vdst{side}", f"src{side}0", f"vsrc{side}1"):
      o = recs.get(fname)
      if o is None:
        continue
      slots.append(Slot(fname, "v" if fname.startswith("v") else "src", 1, o.fmt, o.bits, opr=o.type))
      v = f[fname] if fname != "vdsty" else (f["vdsty"] << 1) | ((f["vdstx"] & 1) ^ 1)
      ops.append(Opnd(fname, "v", v) if fname.startswith("v") else _code_opnd(inst, fname, v, 1))
    if re.search(FMT["vopd_lit_ops"], op):  # K: after src0 (FMAMK) or last (FMAAK), as llvm-mc prints it
      pos = 2 if "FMAMK" in op else len(ops)
      slots.insert(pos, Slot("literal", "lit"))
      ops.insert(pos, Opnd("literal", "literal", 255, 1, value=f.get("literal")))
    out.append(Half((op, tuple(slots), tuple(ops))))
  return out[0], out[1]


def operands(inst) -> tuple:
  """Decoded operands for tools and the emulator: (field, file, index, dwords, value, hi). VOPD lists both halves
  (see vopd_halves); an atomic without return lists no vdst; SDWA sources are registers or constants per s0/s1."""
  I = isa(inst.arch)
  if inst.format == "VOPD":
    x, y = vopd_halves(inst)
    return x.operands + y.operands
  sig = signature(inst.arch, inst.enc, inst.op, inst.wave or I.target.wave)
  out = []
  for s in sig.slots:
    if not s.field:
      out.append(Opnd("vcc", "s", 106, s.dwords))
      continue
    if s.field == "vdst" and not returns(inst):
      continue
    v = inst.f.get(s.field, 0)
    if s.kind == "sdwa_sdst":  # VOPC SDWA: sd=1 writes the lane mask to this SGPR code, sd=0 to VCC
      out.append(Opnd(s.field, "s", v if inst.f.get("sd") else 106, (inst.wave or I.target.wave) // 32))
      continue
    if s.kind == "smem_off":  # the scalar offset register and the immediate offset, separately
      out.append(Opnd("soffset", "s", v))
      off = next((k for k in ("ioffset", "offset") if k in inst.f), None)
      if off:
        out.append(Opnd(off, "imm", 0, 1, value=inst.f[off]))
      continue
    if s.kind == "sdwa_src":  # an 8-bit register number: a VGPR, or an SGPR/constant code when s0/s1 is set
      sbit = inst.f.get("s0" if s.field == "vsrc0" else "s1", 0)
      out.append(_code_opnd(inst, s.field, v, s.dwords) if sbit else Opnd(s.field, "v", v, s.dwords))
    elif s.kind in ("v", "a", "av"):
      hi = bool(s.half and v & 0x80 and inst.format in ("VOP1", "VOP2", "VOPC"))
      idx = v & 0x7f if hi or (s.half and inst.format in ("VOP1", "VOP2", "VOPC")) else v
      out.append(Opnd(s.field, "a" if s.kind == "a" or (s.kind == "av" and is_acc(inst, s.field)) else "v", idx, s.dwords,
                      hi=hi))
    elif s.kind in ("src", "ssrc", "s", "av_src", "a_src", "sbase", "srsrc"):
      v *= 2 if s.kind == "sbase" else 4 if s.kind == "srsrc" else 1
      acc = s.kind == "a_src" or s.kind == "av_src" and is_acc(inst, s.field)  # (as disasm spells it: SMFMAC's
      out.append(_code_opnd(inst, s.field, v, s.dwords, acc, s.half))  # index src2 is a VGPR whatever acc_cd says)
    elif s.kind == "lit":
      out.append(Opnd(s.field, "literal", 255, 1, value=v))
    else:
      out.append(Opnd(s.field, "imm", 0, 1, value=v))
  return tuple(out)


def is_acc(inst, field: str) -> bool:
  """CDNA: is this VGPR-or-AccVGPR operand an AccVGPR? (acc bits differ per format)"""
  f = inst.f
  if "acc_cd" in f and field in ("vdst", "src2"):
    return bool(f["acc_cd"])
  if "acc" in f:
    if inst.format.startswith("VOP3P"):  # (VOP3PX2 too)
      return bool(f["acc"] >> {"src0": 0, "src1": 1}.get(field, 9) & 1)
    return bool(f["acc"]) and field in FMT["acc_fields"].get(inst.format, [])
  return False
