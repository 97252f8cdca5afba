"""The operand model and the llvm-mc-22 spelling of operands and modifiers, shared by asm.py and disasm.py.

For every (encoding, opcode) `signature()` lists the operands in the order llvm-mc prints them: the format's
field order (FORMAT_ORDER) filtered by the vendor's per-instruction operand records (which fields an
instruction uses, how wide they are, what type), plus the implicit VCC operands that VOP1/VOP2/VOPC e32
forms print, derived from the instruction's VOP3 form. Modifiers are a single ordered table keyed by field
name (MODIFIERS); a modifier applies when its fields exist in the encoding. Register and constant spellings
come from data/operands.json.
"""
from __future__ import annotations

import functools
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from gputwin.isa.vendor import Encoding, Operand

_DATA = Path(__file__).parent / "data"
OPS = json.loads((_DATA / "operands.json").read_text())
FMT = json.loads((_DATA / "formats.json").read_text())
TRUE16 = json.loads((_DATA / "true16.json").read_text())


def family_kind(fam: str) -> str: return "cdna" if fam == "cdna" else "rdna"


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


# ------------------------------------------------------------------------------------------ operand model


def _vendor_ops(I, enum: str, op: str) -> dict[str, Operand]:
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
  immediate such as s_set_gpr_idx_on's mode."""
  ops = _vendor_ops(I, e.opcode_enum, op)
  if source and fname in ops and ops[fname].type in FMT["gpr_idx"]["types"]:
    return False
  return fname in ops or fname in ("srcx0", "srcy0")


def _dwords(I, o: Operand, wave: int) -> int:
  if o.fmt == "FMT_NUM_M64":  # a lane mask: one SGPR per 32 lanes
    return wave // 32
  return max(1, (o.bits + 31) // 32)


@functools.cache
def signature(arch: str, enc_name: str, op: str, wave: int) -> Sig:
  from gputwin.isa.encoding import isa
  I = isa(arch)
  e = I.encodings[enc_name]
  fam = I.target.family
  base = e.base
  variant = e.variant
  vops = _vendor_ops(I, e.opcode_enum, op)
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
    elif kind == "bits":
      kind = "s" if opr == "OPR_SREG" else FMT["imm_kinds"].get(opr, "imm")
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
  mods = tuple(k for k, need, _ in _MODS if all(n in byname for n in need) and _mod_applies(k, I, e, op, slots))
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
      return _vendor_ops(I, enum, op)
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


# ------------------------------------------------------------------------------------------ spelling


def _scalar_tables(fam: str):
  k = family_kind(fam)
  return OPS["scalar"][k], OPS["scalar64"][k], OPS["sgprs"][k]


def scalar_name(fam: str, code: int, dwords: int, vector: bool = False) -> str | None:
  """Name of a scalar operand code (0..255) of `dwords` width, or None when the code is not a scalar reg."""
  one, two, nsgpr = _scalar_tables(fam)
  t0, tn = OPS["ttmp"]
  dwords = min(dwords, FMT["sgpr_tuple_max"])  # llvm-mc-22 never names more than 16 SGPRs at once
  if dwords > 1 and (code < nsgpr or t0 <= code < t0 + tn):  # llvm-mc-22 prints a misaligned tuple aligned down
    code -= (code - (t0 if code >= t0 else 0)) % (2 if dwords == 2 else 4)
    if code + dwords > (nsgpr if code < nsgpr else t0 + tn):
      return None
  if code < nsgpr:
    return f"s{code}" if dwords == 1 else f"s[{code}:{code + dwords - 1}]"
  if t0 <= code < t0 + tn:
    i = code - t0
    return f"ttmp{i}" if dwords == 1 else f"ttmp[{i}:{i + dwords - 1}]"
  if dwords == 1 and str(code) in one:
    return one[str(code)]
  if dwords == 2 and str(code) in two:
    return two[str(code)]
  if dwords > 2 and one.get(str(code)) == "null":
    return "null"
  sp = OPS["special"].get(str(code))
  if sp:
    return sp
  if vector and str(code) in OPS["special_vector_only"]:
    return OPS["special_vector_only"][str(code)]
  return None


def f16_bits(x: float) -> int: return struct.unpack("<H", struct.pack("<e", x))[0]
def f32_bits(x: float) -> int: return struct.unpack("<I", struct.pack("<f", x))[0]
def f64_bits(x: float) -> int: return struct.unpack("<Q", struct.pack("<d", x))[0]


def int16_fmt(fmt: str) -> bool: return bool(re.search(r"FMT_NUM_[IUB]16$", fmt))


def inline_text(code: int, fmt: str, bits: int, form: str = "VOP3") -> str | None:
  lo, hi = OPS["inline_int"]
  if lo <= code <= hi:
    return str(code - 128 if code <= 192 else 192 - code)
  inv = OPS["inv2pi"]
  if str(code) in OPS["inline_float"] or code == inv["code"]:
    valu = form.startswith("V")
    if int16_fmt(fmt) and valu or "F16" in fmt and form in FMT["f16_hex_inline_formats"]["formats"]:
      v = inv["f16"] if code == inv["code"] else f16_bits(OPS["inline_float"][str(code)])
      return f"0x{v:x}"
    if code == inv["code"]:
      return inv["text64"] if bits == 64 and "PK" not in fmt else inv["text32"]  # packed: two 32-bit halves
    return repr(float(OPS["inline_float"][str(code)]))
  return None


def vgpr_text(prefix: str, idx: int, dwords: int) -> str:
  return f"{prefix}{idx}" if dwords == 1 else f"{prefix}[{idx}:{idx + dwords - 1}]"


def special_code(I, name: str) -> int:
  one, two, _ = _scalar_tables(I.target.family)
  for d in (one, two):
    for k, v in d.items():
      if v == name:
        return int(k)
  raise KeyError(name)


# ------------------------------------------------------------------------------------------ modifiers

# (key, required encoding fields, printer). Print order is this table's order.
def _flag(field, text):
  return lambda inst, sig: text if inst.get(field) else None


def _offset_signed(inst, f="offset") -> int:
  from gputwin.isa.encoding import isa
  I = isa(inst.arch)
  fd = next(x for x in I.fields[inst.enc] if x.name == f)
  v = inst[f]
  if inst.format in FMT["signed_offset"].get(I.target.family, []) and v >> (fd.width - 1):
    v -= 1 << fd.width
  return v


def _p_offset(inst, sig):
  base = inst.format
  if base == "SMEM":
    return None
  f = "ioffset" if "ioffset" in inst.f else "offset"
  v = _offset_signed(inst, f)
  return f"offset:{v}" if v else None


def swizzle_text(off: int) -> str:
  """ds_swizzle_b32's offset the way llvm-mc-22 spells it (verified over all 65536 values on gfx1100):
  FFT / ROTATE / QUAD_PERM modes when bit 15 is set, else the and/or/xor lane masks as BROADCAST, SWAP, REVERSE
  or a per-bit BITMASK_PERM string (0, 1, p = preserve, i = invert; most significant bit first)."""
  if off >> 15:
    if off >> 13 == 7:
      return f"swizzle(FFT,{off & 31})"
    if off >> 14 == 3:
      return f"swizzle(ROTATE,{off >> 10 & 1},{off >> 5 & 31})"
    if off >> 8 & 0x7f == 0:
      return "swizzle(QUAD_PERM," + ",".join(str(off >> 2 * i & 3) for i in range(4)) + ")"
    return str(off)
  a, o, x = off & 31, off >> 5 & 31, off >> 10 & 31
  if x == 0 and a in (0, 16, 24, 28, 30) and o & a == 0:
    return f"swizzle(BROADCAST,{32 - a},{o})"
  if a == 31 and o == 0 and x in (1, 2, 4, 8, 16):
    return f"swizzle(SWAP,{x})"
  if a == 31 and o == 0 and x in (3, 7, 15, 31):
    return f"swizzle(REVERSE,{x + 1})"
  bits = (("i" if x >> b & 1 else "p") if a >> b & 1 and not o >> b & 1 else str((o ^ x) >> b & 1)
          for b in range(4, -1, -1))
  return f'swizzle(BITMASK_PERM,"{"".join(bits)}")'


def swizzle_value(text: str) -> int:
  """Inverse of swizzle_text for `swizzle(MODE,args)`; ValueError on anything else."""
  m = re.fullmatch(r'swizzle\(\s*(\w+)\s*,(.*)\)', text.strip())
  if not m:
    raise ValueError(text)
  mode, args = m[1], [a.strip() for a in m[2].split(",")]
  n = [int(a, 0) for a in args] if mode != "BITMASK_PERM" else []
  if mode == "QUAD_PERM" and len(n) == 4 and all(0 <= v < 4 for v in n):
    return 0x8000 | sum(v << 2 * i for i, v in enumerate(n))
  if mode == "FFT" and len(n) == 1 and 0 <= n[0] < 32:
    return 0xe000 | n[0]
  if mode == "ROTATE" and len(n) == 2 and n[0] in (0, 1) and 0 <= n[1] < 32:
    return 0xc000 | n[0] << 10 | n[1] << 5
  if mode == "BROADCAST" and len(n) == 2 and n[0] in (2, 4, 8, 16, 32) and 0 <= n[1] < n[0]:
    return (32 - n[0]) & 31 | n[1] << 5
  if mode == "SWAP" and len(n) == 1 and n[0] in (1, 2, 4, 8, 16):
    return 31 | n[0] << 10
  if mode == "REVERSE" and len(n) == 1 and n[0] in (2, 4, 8, 16, 32):
    return 31 | (n[0] - 1) << 10
  if mode == "BITMASK_PERM" and len(args) == 1 and re.fullmatch(r'"[01pi]{5}"', args[0]):
    a = o = x = 0
    for c in args[0][1:-1]:
      a, o, x = a << 1 | (c in "pi"), o << 1 | (c == "1"), x << 1 | (c == "i")
    return a | o << 5 | x << 10
  raise ValueError(text)


def _p_dsoff(inst, sig):
  if re.search(FMT["ds_swizzle"], inst.op):
    v = inst["offset0"] | inst["offset1"] << 8
    return f"offset:{swizzle_text(v)}" if v else None
  if re.search(FMT["ds_two_offsets"], inst.op):
    return " ".join(f"offset{i}:{inst[f'offset{i}']}" for i in (0, 1) if inst[f"offset{i}"]) or None
  v = inst["offset0"] | inst["offset1"] << 8
  return f"offset:{v}" if v else None


def buf_format_value(inst) -> int | None:
  f = inst.f
  if not inst.op.startswith("TBUFFER"):
    return None
  return f["dfmt"] | f["nfmt"] << 4 if "dfmt" in f else f.get("format")


def buf_format_text(inst) -> str | None:
  v = buf_format_value(inst)
  if v is None:
    return None
  from gputwin.isa.encoding import isa
  t = FMT["buf_format"][isa(inst.arch).target.family][v]
  return f"format:{t}" if t else None


def image_fallback(f: dict[str, int], op: str, fam: str) -> bool:
  """Does llvm-mc-22 print this image word with the opcode's default sizes (no variant fits)? Its assembler rejects
  that text ('image data size does not match dmask, d16 and tfe')."""
  m = FMT["mimg"]
  if re.search(m["atomic"], op):
    width = 2 if re.search(m["atomic2"], op) else 1
    return fam in m["atomic_fallback_vaddr"] and max(1, bin(f.get("dmask", 0)).count("1")) + bool(
      f.get("tfe")) not in m["atomic_vdata"][str(width)]
  return bool(re.search(m["sampler"], op)) and f.get("dim", 0) in m["msaa_dims"] and fam in m[
    "sampler_fallback_vaddr"] and _image_vaddr(f, op, m, set(op.split("_")[2:]), m["dims"][str(f.get("dim", 0))]) > m[
    "sampler_msaa_max_vaddr"][fam]


def image_sizes(f: dict[str, int], op: str, vendor_vaddr: int, fam: str = "") -> tuple[int, int]:
  """(vdata dwords, vaddr dwords) of an image instruction, the way llvm-mc-22 counts them: data from dmask (gather4:
  four channels; gfx12 atomics: their data width), halved by d16, one more with tfe; addresses = 32-bit extras
  (offset, bias, compare) + coordinates and lod/clamp/mip (paired by a16) + gradients (paired by g16)."""
  m = FMT["mimg"]
  parts = set(op.split("_")[2:])
  dim = m["dims"][str(f.get("dim", 0))]
  channels = max(1, bin(f.get("dmask", 0)).count("1"))
  atomic = bool(re.search(m["atomic"], op))
  if atomic:
    width = 2 if re.search(m["atomic2"], op) else 1
    data = channels * width
    if fam in m["atomic_fallback_vaddr"]:  # gfx11/12: dmask counts dwords; sizes without an opcode variant fall back
      data = channels + bool(f.get("tfe"))
      if data not in m["atomic_vdata"][str(width)]:
        return width, m["atomic_fallback_vaddr"][fam]  # llvm-mc-22 falls back to the opcode's default sizes
      return data, _image_vaddr(f, op, m, parts, dim)
  elif re.search(m["gather"], op):
    data = 4
  else:
    data = channels
  if f.get("d16") and not atomic:
    data = (data + 1) // 2
  if f.get("tfe") and not (re.search(m["gather"], op) and f.get("d16")):
    data += 1
  if "BVH" in op:
    return data, vendor_vaddr
  if image_fallback(f, op, fam):
    fb = m["fallback_vdata"]
    return (fb["gather"] if re.search(m["gather"], op) else fb["other"],
            sum(p in parts for p in m["extra32"]) + m["sampler_fallback_vaddr"][fam])
  return data, _image_vaddr(f, op, m, parts, dim)


def _image_vaddr(f: dict[str, int], op: str, m: dict, parts: set[str], dim: list) -> int:
  words = sum(p in parts for p in m["extra32"])
  comps = (0 if re.search(m["no_coords"], op) else dim[1]) + (
    1 if parts & set(m["lod"]) or re.search(m["mip_ops"], op) else 0)
  words += (comps + 1) // 2 if f.get("a16") else comps
  if parts & set(m["grad"]):
    words += (dim[2] // 2 + 1) // 2 * 2 if m["g16"] in parts else dim[2]  # g16: 16-bit pairs, even count
  return max(words, 1)


def _p_opsel(inst, sig):
  srcs = _nsrc(sig)
  v = inst["opsel"]
  if inst.format == "VOP3P":
    bits = [(v >> i) & 1 for i in range(srcs)]
    return f"op_sel:[{','.join(map(str, bits))}]" if any(bits) else None
  dst = any(x.field == "vdst" for x in sig.slots)  # an SGPR destination (v_cmp_*_e64) keeps its slot too
  packed = {i for i, f in enumerate(("src0", "src1", "src2")) for x in sig.slots
            if x.field in (f, "vsrc0" if f == "src0" else f) and "PK" in x.fmt}  # 32-bit packed sources show 0
  bits = [(v >> i) & 1 if i not in packed else 0 for i in range(srcs)] + ([(v >> 3) & 1] if dst else [])
  if inst.arch.startswith("gfx9"):  # gfx9: width per opcode from the llvm-mc-22 probe; the last element is dst
    w = TRUE16["opsel_cdna"].get(inst.arch, {}).get(inst.op, 4)
    bits = [(v >> i) & 1 for i in range(w - 1)] + [(v >> 3) & 1]
  return f"op_sel:[{','.join(map(str, bits))}]" if any(bits) else None


def _nsrc(sig) -> int:
  n = sum(1 for s in sig.slots if s.field in ("src0", "src1", "src2", "vsrc0"))
  return n + 1 if re.search(FMT["opsel_extra_src"], sig.mnemonic.upper()) else n  # fmac reads vdst as src2


def _p_opsel_hi(inst, sig):
  n = _nsrc(sig)
  v = inst["opsel_hi"] | inst.get("opsel_hi2", 1) << 2
  bits = [(v >> i) & 1 for i in range(n)]
  fam = "cdna" if inst.arch.startswith("gfx9") else "rdna"
  default = next((d for p, d in FMT["vop3p_opsel_hi_default"].items() if re.search(p.split(":")[-1], inst.op) and (
    ":" not in p or p.startswith(fam + ":"))), None)
  if default is None:
    default = None if re.search(FMT["vop3p_opsel_always"], inst.op) else [1] * n
  default = default and default[:n]
  return None if bits == default else f"op_sel_hi:[{','.join(map(str, bits))}]"


def _p_neg(key, field):
  def p(inst, sig):
    n = _nsrc(sig)
    bits = [(inst[field] >> i) & 1 for i in range(n)]
    return f"{key}:[{','.join(map(str, bits))}]" if any(bits) else None
  return p


def _p_omod(inst, sig):
  return {0: None, 1: "mul:2", 2: "mul:4", 3: "div:2"}[inst["omod"]]


def _p_dpp(inst, sig):
  v = inst["dpp"]
  if inst.arch.startswith("gfx9") and any(x.bits == 64 for x in sig.slots) and not 336 <= v <= 351:
    return FMT["dpp_dp_alu"]["cdna"]
  return dpp_ctrl_text(v, inst.arch)


def dpp_ctrl_text(v: int, arch: str) -> str:
  for name, lo, hi, base, form in FMT["dpp_ctrl"]:
    if lo <= v <= hi and (not form.startswith("cdna") or arch.startswith("gfx9")) and (
        not form.startswith("rdna") or not arch.startswith("gfx9")):
      if name == "quad_perm":
        return "quad_perm:[" + ",".join(str((v >> (2 * i)) & 3) for i in range(4)) + "]"
      if form.endswith("flag"):
        return name
      return f"{name}:{v - base}"
  tab = FMT["dpp_invalid"]
  return tab.get("cdna" if arch.startswith("gfx9") else "rdna", {}).get(str(v), tab["default"])


def _p_dpp8(inst, sig):
  return "dpp8:[" + ",".join(str(inst[f"lane_sel_{i}"]) for i in range(8)) + "]"


def _p_fi(inst, sig):
  if "lane_sel_0" in inst.f:
    return "fi:1" if inst["src0"] == 234 else None
  return "fi:1" if inst.get("fi") else None


def _p_th(inst, sig):
  th = inst["th"]
  kind = th_kind(inst)
  if not th:
    return None
  if th == 3 and inst.get("scope") == 3 and kind in FMT["th_sys_bypass"]:
    return "th:" + FMT["th_sys_bypass"][kind]
  cas = FMT["th_atomic_cascade"]
  if kind == "atomic" and str(th) in cas and inst.get("scope", 0) >= cas["min_scope"]:
    return "th:" + cas[str(th)]
  names = FMT["th_names"][kind]
  return "th:" + names.get(str(th), f"TH_ATOMIC_{th:#x}" if kind == "atomic" else f"{th:#x}")


def th_kind(inst) -> str:
  op = inst.op
  if re.search(FMT["th_atomic"], op):
    return "atomic"
  if re.search(FMT["th_store"], op):
    return "store"
  return "load"


def _p_scope(inst, sig):
  s = inst["scope"]
  return f"scope:{FMT['scope_names'][s]}" if s else None


def _p_sdwa_sel(field, key):
  def p(inst, sig):
    if key == "src1_sel" and not any(s.field in ("vsrc1", "src1") for s in sig.slots):
      return None
    if key in ("dst_sel", "dst_unused") and (inst.format == "VOPC" or re.search(FMT["sdwa_no_dst_sel"], inst.op)):
      return None
    return f"{key}:{FMT['sdwa_sel'][inst[field]]}"
  return p


def _p_dst_unused(inst, sig):
  if re.search(FMT["sdwa_no_dst_sel"], inst.op):
    return None
  return f"dst_unused:{FMT['sdwa_unused'][inst['dst_unused']]}"


def _p_num(field, key, hexa=False, skip0=True):
  def p(inst, sig):
    v = inst[field]
    if skip0 and not v:
      return None
    return f"{key}:{v:#x}" if hexa else f"{key}:{v}"
  return p


def _p_blgp(inst, sig):
  v = inst["blgp"]
  if not v:
    return None
  if any("F64" in s.fmt for s in sig.slots):
    return "neg:[" + ",".join(str((v >> i) & 1) for i in range(3)) + "]"
  return f"blgp:{v}"


_MODS = [
  ("op_sel", ("opsel",), _p_opsel),
  ("op_sel_hi", ("opsel_hi",), _p_opsel_hi),
  ("neg_lo", ("neg", "neg_hi"), _p_neg("neg_lo", "neg")),
  ("neg_hi", ("neg_hi",), _p_neg("neg_hi", "neg_hi")),
  ("format", ("vdata",), lambda inst, sig: buf_format_text(inst)),
  ("idxen", ("idxen",), _flag("idxen", "idxen")),
  ("offen", ("offen",), _flag("offen", "offen")),
  ("ds_offset", ("offset0", "offset1"), _p_dsoff),
  ("offset", ("offset",), _p_offset),
  ("ioffset", ("ioffset",), _p_offset),
  ("dmask", ("dmask",), _p_num("dmask", "dmask", True)),
  ("dim", ("dim",), lambda inst, sig: f"dim:{FMT['mimg']['dim_prefix']}{FMT['mimg']['dims'][str(inst['dim'])][0]}"),
  ("unorm", ("unrm",), _flag("unrm", "unorm")),
  ("th", ("th",), _p_th),
  ("scope", ("scope",), _p_scope),
  ("nv", ("nv",), _flag("nv", "nv")),
  ("glc", ("glc",), _flag("glc", "glc")),
  ("slc", ("slc",), _flag("slc", "slc")),
  ("dlc", ("dlc",), _flag("dlc", "dlc")),
  ("sc0", ("sc0",), _flag("sc0", "sc0")),
  ("nt", ("nt",), _flag("nt", "nt")),
  ("sc1", ("sc1",), _flag("sc1", "sc1")),
  ("lds", ("lds",), _flag("lds", "lds")),
  ("r128", ("r128",), _flag("r128", "r128")),
  ("a16", ("a16",), _flag("a16", "a16")),
  ("tfe", ("tfe",), _flag("tfe", "tfe")),
  ("lwe", ("lwe",), _flag("lwe", "lwe")),
  ("d16", ("d16",), _flag("d16", "d16")),
  ("gds", ("gds",), _flag("gds", "gds")),
  ("clamp", ("clmp",), _flag("clmp", "clamp")),
  ("omod", ("omod",), _p_omod),
  ("dst_sel", ("dst_sel",), _p_sdwa_sel("dst_sel", "dst_sel")),
  ("dst_unused", ("dst_unused",), _p_dst_unused),
  ("src0_sel", ("src0_sel",), _p_sdwa_sel("src0_sel", "src0_sel")),
  ("src1_sel", ("src1_sel",), _p_sdwa_sel("src1_sel", "src1_sel")),
  ("dpp", ("dpp",), _p_dpp),
  ("dpp8", ("lane_sel_0",), _p_dpp8),
  ("row_mask", ("row_mask",), _p_num("row_mask", "row_mask", True, False)),
  ("bank_mask", ("bank_mask",), _p_num("bank_mask", "bank_mask", True, False)),
  ("bound_ctrl", ("bc",), _p_num("bc", "bound_ctrl")),
  ("fi", ("src0",), _p_fi),
  ("cbsz", ("cbsz",), _p_num("cbsz", "cbsz")),
  ("abid", ("abid",), _p_num("abid", "abid")),
  ("blgp", ("blgp",), _p_blgp),
  ("wait_vdst", ("wait_vdst",), _p_num("wait_vdst", "wait_vdst", skip0=False)),
  ("wait_va_vdst", ("wait_va_vdst",), _p_num("wait_va_vdst", "wait_va_vdst", skip0=False)),
  ("wait_vm_vsrc", ("wait_vm_vsrc",), _p_num("wait_vm_vsrc", "wait_vm_vsrc", skip0=False)),
  ("wait_exp", ("waitexp",), _p_num("waitexp", "wait_exp", skip0=False)),
]
MOD_PRINTERS = {k: p for k, _, p in _MODS}


def _mod_applies(key: str, I, e: Encoding, op: str, slots) -> bool:
  v = e.variant
  if key == "lds":
    return e.base in FMT["lds_load"].get(I.target.family, []) and bool(re.search(FMT["lds_load"]["ops"], op))
  if key == "op_sel" and I.target.family == "cdna" and e.base in ("VOP3", "VOP3SD"):
    return op in TRUE16["opsel_cdna"].get(I.target.name, {})
  if key == "op_sel" and e.base in ("VOP3", "VOP3SD", "VINTERP"):  # only 16-bit instructions have op_sel
    if any(re.search(p, op) for p in FMT["opsel_ops"]):
      return True
    if not I.target.true16 and I.target.family != "cdna" and e.base != "VINTERP":
      return op in TRUE16["opsel_fake16"]
    vops = _vendor_ops(I, e.opcode_enum, op)
    if not any(o.bits == 16 for o in vops.values()):
      return False
    if I.target.true16:
      return bool(TRUE16.get(I.target.name, {}).get(f"{e.base}:{op}")) and op not in TRUE16["no_opsel"]
  if key == "fi":
    return "DPP" in v
  if key in ("op_sel", "op_sel_hi", "neg_lo", "neg_hi") and e.name.startswith("VOP3P_MFMA"):
    return False
  if key in ("neg_lo", "neg_hi", "op_sel_hi") and e.base != "VOP3P":
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


# ------------------------------------------------------------------------------------------ decoded operands


def validate(inst, offset: int = 0) -> None:
  """Reject field values llvm-mc-22 refuses to decode (reserved operand codes); DecodeError only."""
  from gputwin.errors import DecodeError
  from gputwin.isa.disasm import format_inst
  for k, v in FMT["unsupported_fields"].get(inst.format, {}).items():
    if inst.get(k) == v:
      raise DecodeError(f"{inst.op.lower()}: {k}={v} form is not supported", inst.arch, offset, inst.get("encoding"))
  try:
    format_inst(inst)
  except DecodeError as e:
    raise DecodeError(e.msg, inst.arch, offset, e.word) from None


def operands(inst) -> tuple:
  """Decoded operands for tools and the emulator: (field, file, index, dwords, value, hi)."""
  from gputwin.isa.encoding import Opnd, isa
  I = isa(inst.arch)
  sig = signature(inst.arch, inst.enc, inst.op, inst.wave or I.target.wave)
  out = []
  for s in sig.slots:
    if not s.field:
      out.append(Opnd("vcc", "s", 106, s.dwords))
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
    if s.kind in ("v", "a", "av"):
      hi = bool(s.half and v & 0x80 and inst.format in ("VOP1", "VOP2", "VOPC"))
      idx = v & 0x7f if hi or (s.half and inst.format in ("VOP1", "VOP2", "VOPC")) else v
      out.append(Opnd(s.field, "a" if s.kind == "a" or (s.kind == "av" and _acc(inst, s.field)) else "v", idx, s.dwords,
                      hi=hi))
    elif s.kind in ("src", "ssrc", "s", "av_src", "sbase", "srsrc"):
      if s.kind == "sbase":
        v *= 2
      if s.kind == "srsrc":
        v *= 4
      if v >= 256:  # a VGPR; in 16-bit VOP1/VOP2/VOPC operands bit 7 selects the high half (true16)
        hi = bool(s.half and (v - 256) & 0x80 and inst.format in ("VOP1", "VOP2", "VOPC"))
        idx = (v - 256) & 0x7f if s.half and inst.format in ("VOP1", "VOP2", "VOPC") else v - 256
        out.append(Opnd(s.field, "a" if _acc(inst, s.field) else "v", idx, s.dwords, hi=hi))
      elif v == 255:
        out.append(Opnd(s.field, "literal", 255, s.dwords, value=inst.get("literal")))
      elif 128 <= v <= 248:
        out.append(Opnd(s.field, "inline", v, s.dwords, value=v))
      else:
        out.append(Opnd(s.field, "s", v, s.dwords))
    else:
      out.append(Opnd(s.field, "imm", 0, 1, value=v))
  return tuple(out)


def _acc(inst, field: str) -> bool:
  """CDNA: is this VGPR-or-AccVGPR operand an AccVGPR? (acc bits differ per format)"""
  f = inst.f
  if "acc_cd" in f and field in ("vdst", "src2"):
    return bool(f["acc_cd"])
  if "acc" in f:
    if inst.format == "VOP3P":
      return bool(f["acc"] >> {"src0": 0, "src1": 1}.get(field, 9) & 1)
    return bool(f["acc"]) and field in FMT["acc_fields"].get(inst.format, [])
  return False
