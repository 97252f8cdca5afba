"""The llvm-mc-22 spelling of operands and modifiers, shared by asm.py and disasm.py: register names, inline
constants (both ways: `inline_text` and `inline_for`), special operands, hwreg/sendmsg/waitcnt fields and one
printer per modifier (`MOD_PRINTERS`, keyed like operands.MODS). The operand model itself is operands.py;
register and constant spellings come from data/operands.json.
"""
from __future__ import annotations

import re
import struct

from gputwin.isa.model import FMT, OPS, TRUE16, isa, scalar_tables
from gputwin.isa.operands import Slot, opsel_field_bits



# ------------------------------------------------------------------------------------------ operand model


# ------------------------------------------------------------------------------------------ spelling


def scalar_name(fam: str, code: int, dwords: int, vector: bool = False) -> str | None:
  """Name of a scalar operand code (0..255) of `dwords` width, or None when the code is not a scalar reg."""
  one, two, nsgpr = scalar_tables(fam)
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


# ------------------------------------------------------------------------------------------ modifiers

# (key, required encoding fields, printer). Print order is this table's order.
def _flag(field, text):
  return lambda inst, sig: text if inst.get(field) else None


def _offset_signed(inst, f="offset") -> int:
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
  if inst.format.startswith("VOP3P"):
    bits = [(v >> i) & 1 for i in range(srcs)]
    return f"op_sel:[{','.join(map(str, bits))}]" if any(bits) else None
  dst = any(x.field == "vdst" for x in sig.slots)  # an SGPR destination (v_cmp_*_e64) keeps its slot too
  packed = {i for i, f in enumerate(("src0", "src1", "src2")) for x in sig.slots
            if x.field in (f, "vsrc0" if f == "src0" else f) and "PK" in x.fmt and x.bits == 32}  # 32-bit packed
  # sources show 0 (a 16-bit packed one, V_CVT_PK_F32_FP8's, has its word picked by op_sel)
  bits = [(v >> i) & 1 if i not in packed else 0 for i in range(srcs)] + ([(v >> 3) & 1] if dst else [])
  if inst.arch.startswith("gfx9"):  # gfx9: width per opcode from the llvm-mc-22 probe; the last element is dst
    w = TRUE16["opsel_cdna"].get(inst.arch, {}).get(inst.op, 4)
    bits = [(v >> i) & 1 for i in range(w - 1)] + [(v >> 3) & 1]
  return f"op_sel:[{','.join(map(str, bits))}]" if any(bits) else None


def _p_opsel_field(key: str):
  def p(inst, sig):
    bits = opsel_field_bits(key, isa(inst.arch).target.family, inst.op)
    v = sum((inst["opsel"] >> b & 1) << i for i, b in enumerate(bits))
    return f"{key}:{v}" if v else None
  return p


def _nsrc(sig) -> int:
  n = sum(1 for s in sig.slots if s.field in ("src0", "src1", "src2", "vsrc0"))
  return n + 1 if re.search(FMT["opsel_extra_src"], sig.mnemonic.upper()) else n  # fmac reads vdst as src2


def _p_opsel_hi(inst, sig):
  n = _nsrc(sig)
  v = inst["opsel_hi"] | inst.get("opsel_hi2", 0) << 2  # (VOP3PX2 has no third bit: llvm-mc-22 prints 0)
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


MOD_PRINTERS = {  # modifier -> its printer, for operands.MODS
  "op_sel": _p_opsel,
  "op_sel_hi": _p_opsel_hi,
  "byte_sel": _p_opsel_field("byte_sel"),
  "index_key": _p_opsel_field("index_key"),
  "neg_lo": _p_neg("neg_lo", "neg"),
  "neg_hi": _p_neg("neg_hi", "neg_hi"),
  "format": lambda inst, sig: buf_format_text(inst),
  "idxen": _flag("idxen", "idxen"),
  "offen": _flag("offen", "offen"),
  "ds_offset": _p_dsoff,
  "offset": _p_offset,
  "ioffset": _p_offset,
  "dmask": _p_num("dmask", "dmask", True),
  "dim": lambda inst, sig: f"dim:{FMT['mimg']['dim_prefix']}{FMT['mimg']['dims'][str(inst['dim'])][0]}",
  "unorm": _flag("unrm", "unorm"),
  "th": _p_th,
  "scope": _p_scope,
  "nv": _flag("nv", "nv"),
  "glc": _flag("glc", "glc"),
  "slc": _flag("slc", "slc"),
  "dlc": _flag("dlc", "dlc"),
  "sc0": _flag("sc0", "sc0"),
  "nt": _flag("nt", "nt"),
  "sc1": _flag("sc1", "sc1"),
  "lds": _flag("lds", "lds"),
  "r128": _flag("r128", "r128"),
  "a16": _flag("a16", "a16"),
  "tfe": _flag("tfe", "tfe"),
  "lwe": _flag("lwe", "lwe"),
  "d16": _flag("d16", "d16"),
  "gds": _flag("gds", "gds"),
  "clamp": _flag("clmp", "clamp"),
  "omod": _p_omod,
  "dst_sel": _p_sdwa_sel("dst_sel", "dst_sel"),
  "dst_unused": _p_dst_unused,
  "src0_sel": _p_sdwa_sel("src0_sel", "src0_sel"),
  "src1_sel": _p_sdwa_sel("src1_sel", "src1_sel"),
  "dpp": _p_dpp,
  "dpp8": _p_dpp8,
  "row_mask": _p_num("row_mask", "row_mask", True, False),
  "bank_mask": _p_num("bank_mask", "bank_mask", True, False),
  "bound_ctrl": _p_num("bc", "bound_ctrl"),
  "fi": _p_fi,
  "cbsz": _p_num("cbsz", "cbsz"),
  "abid": _p_num("abid", "abid"),
  "blgp": _p_blgp,
  "wait_vdst": _p_num("wait_vdst", "wait_vdst", skip0=False),
  "wait_va_vdst": _p_num("wait_va_vdst", "wait_va_vdst", skip0=False),
  "wait_vm_vsrc": _p_num("wait_vm_vsrc", "wait_vm_vsrc", skip0=False),
  "wait_exp": _p_num("waitexp", "wait_exp", skip0=False),
}


# ------------------------------------------------------------------------------------------ decoded operands


# ------------------------------------------------------------------------------ inline constants from values


def inline_code(value, is_float: bool, fmt: str, bits: int) -> int | None:
  """Inline constant code for a parsed number (int or float), or None if it needs a literal."""
  if not is_float:
    w = 64 if bits == 64 else 16 if _int16(fmt, bits) or bits == 16 else 32
    if w < 64 and value >= 1 << (w - 1) and value < 1 << w:
      value -= 1 << w  # 0xfffffff0 is -16
    if -16 <= value <= 64:
      return 128 + value if value >= 0 else 192 - value
    return _float_patterns(fmt, bits).get(value & 0xffffffff) if value >= 0 else None
  for code, f in OPS["inline_float"].items():
    if value == f:
      return int(code)
  if abs(value - 0.15915494309189532) < 1e-8 and (bits != 64 or "PK" in fmt) or value == 0.15915494309189532:
    return OPS["inv2pi"]["code"]
  if value == 0.0:
    return 128
  return None


def _int16(fmt: str, bits: int) -> bool:
  return bits == 16 and not re.search(r"F16", fmt) or int16_fmt(fmt)


def _float_patterns(fmt: str, bits: int) -> dict[int, int]:
  """Integer spellings llvm-mc-22 turns into inline float constants: f32 bit patterns for 32-bit operands, f16
  ones for (packed) f16 operands, the high dword of the double for f64; none for 16-bit integer or 64-bit integer
  operands."""
  inv = OPS["inv2pi"]
  if bits == 64:
    if "F64" not in fmt:
      return {}
    d = {f64_bits(v) >> 32: int(c) for c, v in OPS["inline_float"].items()}
    return d
  if re.search(r"F16", fmt) and "BF16" not in fmt:
    d = {f16_bits(v): int(c) for c, v in OPS["inline_float"].items()}
    d[inv["f16"]] = inv["code"]
    return d
  if "PK2_BF16" in fmt:  # packed bf16: the upper half of the f32 pattern
    return {f32_bits(v) >> 16: int(c) for c, v in OPS["inline_float"].items()}
  if _int16(fmt, bits):
    return {}
  d = {f32_bits(v): int(c) for c, v in OPS["inline_float"].items()}
  d[inv["f32"]] = inv["code"]
  return d


def inline_for(value: int, s: Slot, salu: str = "") -> int | None:
  """The inline constant code a literal value would encode as for this operand (llvm-mc prints such literals as
  lit(...) to keep them literal), or None. 64-bit operands' literals are never spelled lit(). `salu` names the
  SALU format: llvm-mc-22 treats f16 operands of SOP2 like VALU ones ('s_min_num_f16 s0, lit(0x3800), s2',
  'lit(0xfffe)'), while SOPC/SOP1 f16 operands only know the non-negative integers ('s_cmp_nlg_f16 lit(0x1)',
  's_cmp_nlg_f16 0xfffe', 's_cmp_nlg_f16 0x3800')."""
  if salu and "F16" in s.fmt:
    if value > 0xffff:
      return None
    return inline_code(value, False, s.fmt, 16) if salu == "SOP2" else inline_code(value, False, "FMT_NUM_B16", 16) \
      if value <= 64 else None
  if s.bits == 64:
    return None if "F64" in s.fmt else (inline_code(value, False, s.fmt, s.bits) if value <= 64 else None)
  if s.bits == 16 and value > 0xffff:  # a wider literal on a 16-bit operand reads back as a 32-bit integer (-1)
    return inline_code(value, False, "FMT_NUM_I32", 32) if value >= 0xfffffff0 else None
  return inline_code(value, False, s.fmt, s.bits)
