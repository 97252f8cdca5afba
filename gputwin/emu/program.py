"""Decoded, cached programs: every instruction of a kernel turned once into an `Op` the wave executor can run.

An Op knows its pcode semantics and, for every pcode input/output name, which operand (register file, index,
dwords, 16-bit half) or special register it binds to. That binding is data-driven: operand fields from
`gputwin.isa` (src0/vsrc1/src2/vdst/sdst/sdata/...), the pcode names (S0, D0, VCC, SCC, ADDR, DATA, ...) and a few
vendor tables (scalar operand codes, inline constants). Nothing here knows an instruction's arithmetic.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field

from gputwin.errors import GputwinError, PcodeError
from gputwin.isa import Inst, decode
from gputwin.isa.syntax import signature
from gputwin.pcode import semantics

# scalar operand codes (vendor "SSRC" enumeration): family kind -> name -> code
SPECIAL = {"rdna": dict(vcc=106, null=124, m0=125, exec=126), "cdna": dict(vcc=106, null=125, m0=124, exec=126)}
APERTURE = {235: 0x1000, 236: 0x1000, 237: 0x2000, 238: 0x2000}  # SRC_{SHARED,PRIVATE}_{BASE,LIMIT}: aperture hi32
SHARED_HI, PRIVATE_HI = 0x1000, 0x2000
VCCZ, EXECZ, SCC_CODE = 251, 252, 253

# Instructions without pseudocode that the executor itself implements (control, not arithmetic).
CONTROL = {"S_ENDPGM": "end", "S_ENDPGM_SAVED": "end", "S_BARRIER": "barrier", "S_BARRIER_SIGNAL": "barrier",
           "S_BARRIER_WAIT": "nop", "S_TRAP": "trap", "S_SENDMSG": "nop", "S_SENDMSGHALT": "nop", "S_SENDMSG_RTN_B32": "nop",
           "S_CLAUSE": "nop", "S_NOP": "nop", "S_CODE_END": "bad", "S_WAITCNT": "nop", "S_SETPRIO": "nop",
           "S_SLEEP": "nop", "S_DELAY_ALU": "nop", "S_ICACHE_INV": "nop", "S_DCACHE_INV": "nop", "S_DCACHE_WB": "nop",
           "S_INST_PREFETCH": "nop", "S_SET_INST_PREFETCH_DISTANCE": "nop", "S_WAIT_IDLE": "nop", "S_TTRACEDATA": "nop",
           "BUFFER_WBINVL1": "nop", "BUFFER_WBINVL1_VOL": "nop", "BUFFER_GL0_INV": "nop", "BUFFER_GL1_INV": "nop",
           "BUFFER_INV": "nop", "BUFFER_WBL2": "nop", "GLOBAL_INV": "nop", "GLOBAL_WB": "nop", "GLOBAL_WBINV": "nop",
           "S_WAITCNT_VSCNT": "nop", "S_WAITCNT_VMCNT": "nop", "S_WAITCNT_LGKMCNT": "nop", "S_WAITCNT_EXPCNT": "nop",
           "S_WAIT_LOADCNT": "nop", "S_WAIT_STORECNT": "nop", "S_WAIT_DSCNT": "nop", "S_WAIT_KMCNT": "nop",
           "S_WAIT_LOADCNT_DSCNT": "nop", "S_WAIT_STORECNT_DSCNT": "nop", "S_WAIT_SAMPLECNT": "nop",
           "S_WAIT_BVHCNT": "nop", "S_WAIT_EXPCNT": "nop", "S_WAIT_ALU": "nop", "S_SETHALT": "nop",
           "S_DENORM_MODE": "nop", "S_WAITCNT_DEPCTR": "nop", "S_ROUND_MODE": "nop", "S_SET_GPR_IDX_OFF": "nop",
           # register-to-register moves the vendor pseudocode lacks (see UPSTREAM.md): plain copies, no arithmetic
           "V_ACCVGPR_READ_B32": "copy", "V_ACCVGPR_WRITE_B32": "copy", "V_ACCVGPR_MOV_B32": "copy",
           "V_ACCVGPR_READ": "copy", "V_ACCVGPR_WRITE": "copy", "V_ACCVGPR_MOV": "copy"}

MEMFMT = {"SMEM": "smem", "DS": "ds", "GLOBAL": "global", "VGLOBAL": "global", "FLAT": "flat", "VFLAT": "flat",
          "SCRATCH": "scratch", "VSCRATCH": "scratch", "MUBUF": "buffer", "VBUFFER": "buffer"}
SRC_FIELDS = (("src0", "ssrc0", "vsrc0", "srcx0"), ("src1", "vsrc1", "ssrc1", "vsrcx1"), ("src2",))
DST_FIELDS = ("vdst", "sdst", "sdata", "vdata", "vdstx")


def inline_value(code: int, fmt: str, bits: int) -> int:
  """The raw bits of inline constant `code` (128..248) for an operand of vendor format `fmt`/width `bits`."""
  if code <= 208:
    v = code - 128 if code <= 192 else 192 - code
    return v & ((1 << max(bits, 32)) - 1)
  f = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}.get(code)
  if "F16" in fmt or "BF16" in fmt:
    if "BF16" in fmt:
      return 0x3e22 if f is None else struct.unpack("<I", struct.pack("<f", f))[0] >> 16
    return 0x3118 if f is None else struct.unpack("<H", struct.pack("<e", f))[0]
  if "F64" in fmt or bits == 64:
    return 0x3fc45f306dc9c882 if f is None else struct.unpack("<Q", struct.pack("<d", f))[0]
  return 0x3e22f983 if f is None else struct.unpack("<I", struct.pack("<f", f))[0]


@dataclass(frozen=True)
class Src:
  """Where an operand's bits come from. file: v | a | s | k (a constant `value`)."""
  file: str
  index: int = 0
  dwords: int = 1
  value: int = 0
  hi: bool = False  # 16-bit operand in the high half (true16 .h, or VOP3 op_sel)
  bits: int = 32
  fmt: str = ""
  neg: int = 0  # bitmask of sign bits to flip (after abs); per-half for packed operands
  abs: int = 0
  pk: tuple = ()  # packed 16-bit: (lo from high half?, hi from high half?)


@dataclass
class Op:
  inst: Inst
  pc: int
  size: int
  kind: str  # alu | mem | end | barrier | trap | nop | copy | bad
  sem: object = None
  ins: dict = field(default_factory=dict)  # pcode input name -> Src | special name
  outs: dict = field(default_factory=dict)  # pcode output name -> Src | special name
  mem: str = ""  # smem | ds | global | flat | scratch | buffer
  vector: bool = True  # lanes (VALU/VMEM) or one value per wave (SALU/SMEM)
  text: str = ""
  info: dict = field(default_factory=dict)
  old: dict = field(default_factory=dict)  # outputs whose previous value the pcode needs (partial writes)


def _kind(fam: str) -> str: return "cdna" if fam == "cdna" else "rdna"


def _src(inst: Inst, o, slot, neg=0, abs_=0, hi=False, pk=()) -> Src:
  bits, fmt = (slot.bits, slot.fmt) if slot is not None else (32, "")
  if o.file == "literal":
    v = o.value or 0
    if o.dwords == 2:  # 64-bit operand: an f64 literal is the high dword, integers are extended
      v = (v << 32) if "F64" in fmt else (v | (0xffffffff00000000 if "I64" in fmt and v >> 31 else 0))
    return Src("k", value=v, dwords=o.dwords, bits=bits, fmt=fmt, neg=neg, abs=abs_, pk=pk)
  if o.file == "inline":
    v = inline_value(o.value, fmt, 64 if o.dwords == 2 else bits)
    if o.dwords == 2 and o.value <= 208 and o.value > 192:
      v |= 0xffffffff00000000
    return Src("k", value=v, dwords=o.dwords, bits=bits, fmt=fmt, neg=neg, abs=abs_, pk=pk)
  return Src(o.file, o.index, o.dwords, 0, hi or o.hi, bits, fmt, neg, abs_, pk)


def _sign(fmt: str, bits: int) -> int:
  if "F16" in fmt or ("F" in fmt and bits == 16):
    return 0x8000
  if "F64" in fmt:
    return 1 << 63
  if "F32" in fmt:
    return 1 << 31
  return 0


@functools.lru_cache(maxsize=None)
def _sem(fam: str, name: str):
  try:
    return semantics(fam, name)
  except PcodeError:
    return None


def build_op(inst: Inst, pc: int, fam: str, wave: int) -> Op:
  """Bind one decoded instruction to its pcode semantics and operands."""
  op = Op(inst, pc, inst.size, "alu")
  name, f = inst.op, inst.f
  sem = _sem(fam, name)
  if name in CONTROL and (sem is None or (not sem.outputs and not sem.mem) or CONTROL[name] != "nop"):
    op.kind = CONTROL[name]
  elif sem is None:
    op.kind = "unsupported"
  elif "MATRIX_MULTIPLY_ACCUMULATE" in sem.calls:
    op.kind = "matrix"  # WMMA/MFMA: operand layouts live in emu/matrix.py
  elif not sem.outputs and not sem.mem and not sem.regfiles:
    op.kind = "nop"
  op.sem = sem if op.kind != "copy" else None
  sig = signature(inst.arch, inst.enc, name, wave)
  slots = {s.field: s for s in sig.slots}
  opnds = {o.field: o for o in inst.operands}
  for fn, sbit in (("vsrc0", "s0"), ("vsrc1", "s1")):  # isa gives some SDWA/DPP register sources as 'imm' (UPSTREAM.md)
    o = opnds.get(fn)
    if o is not None and o.file == "imm":
      opnds[fn] = type(o)(fn, "s" if f.get(sbit, 0) else "v", o.value, o.dwords)
  fmt = inst.format
  op.vector = not (fmt.startswith("SOP") or fmt == "SMEM")
  op.mem = MEMFMT.get(fmt, "") if op.kind == "alu" and (sem.mem or "VGPR" not in sem.regfiles) else ""
  if op.mem:
    op.kind = "mem"
  elif fmt == "DS" and sem is not None and "VGPR" in sem.regfiles:  # DS_(B)PERMUTE: register numbers, no LDS
    for name_, fld in (("ADDR", "addr"), ("DATA0", "data0"), ("VDST", "vdst")):
      op.ins[name_] = Src("k", value=f.get(fld, 0))
    op.ins["OFFSET"] = Src("k", value=f.get("offset0", 0) | f.get("offset1", 0) << 8)
  if fmt == "VOPD":
    return _vopd(op, inst, fam, wave)
  k = SPECIAL[_kind(fam)]
  # ---- sources: S0/S1/S2 in field order, with VOP3/VOP3P/SDWA/DPP modifiers
  srcs = []
  for names in SRC_FIELDS:
    fn = next((n for n in names if n in opnds), None)
    if fn is not None:
      srcs.append((fn, opnds[fn]))
  neg, abs_, opsel = f.get("neg", 0), f.get("abs", 0), f.get("opsel", 0)
  inst_fields = [n for n in (sem.inputs if sem else {}) if n.startswith("INST.")]
  for n in inst_fields:  # the body reads encoding fields itself (V_BITOP3's truth table): they are no modifiers
    op.ins[n] = Src("k", value=f.get(n[5:].lower(), 0))
  if inst_fields:
    neg = abs_ = 0
  packed = fmt == "VOP3P" and name.startswith(("V_PK_", "V_DOT"))
  for i, (fn, o) in enumerate(srcs):
    sl = slots.get(fn) or slots.get("vsrc0" if fn == "src0" else fn)
    bits, sfmt = (sl.bits, sl.fmt) if sl else (32, "")
    sgn = _sign(sfmt, bits)
    n_ = (neg >> i) & 1 or f.get(f"src{i}_neg", 0)
    a_ = (abs_ >> i) & 1 or f.get(f"src{i}_abs", 0)
    if packed:
      pk = ((opsel >> i) & 1, (f.get("opsel_hi", 3) | (f.get("opsel_hi2", 1) << 2)) >> i & 1)
      nm = (0x8000 if (neg >> i) & 1 else 0) | (0x80000000 if (f.get("neg_hi", 0) >> i) & 1 else 0)
      if "F" not in sfmt and "F16" not in sfmt:
        nm = 0
      op.ins[f"S{i}"] = _src(inst, o, sl, neg=nm, pk=pk)
    else:
      hi = bool(bits == 16 and fmt == "VOP3" and (opsel >> i) & 1)
      op.ins[f"S{i}"] = _src(inst, o, sl, neg=sgn if n_ and sgn else 0, abs_=sgn if a_ and sgn else 0, hi=hi)
  if name.startswith("V_ACCVGPR_READ"):  # isa lists its AccVGPR source as an immediate (UPSTREAM.md)
    op.ins["S0"] = Src("a", f["src0"] - 256 if f["src0"] >= 256 else f["src0"])
  if "SRC0" in (sem.inputs if sem else {}) and srcs:  # V_READLANE: the VGPR *index*
    op.ins["SRC0"] = Src("k", value=srcs[0][1].index)
  # ---- destination
  dst = next((opnds[n] for n in DST_FIELDS if n in opnds and opnds[n].file != "imm"), None)
  if fmt == "VOPC" or (fmt == "VOP3" and name.startswith("V_CMP") and "sdst" not in opnds and "vdst" in opnds):
    dst = opnds.get("vcc") or opnds.get("vdst") or opnds.get("sdst")
  if fmt.startswith("VOP3") and "vdst" in opnds and name.startswith(("V_CMP_", "V_CMP_CLASS")):
    dst = opnds["vdst"]
  if dst is not None:
    dsl = slots.get(dst.field)
    hi = bool(dsl and dsl.bits == 16 and fmt == "VOP3" and (opsel >> 3) & 1)
    d = Src(dst.file, dst.index, dst.dwords, hi=hi or dst.hi, bits=dsl.bits if dsl else 32, fmt=dsl.fmt if dsl else "")
    op.outs["D0"] = op.outs["D"] = op.outs["SDATA"] = op.outs["VDATA"] = op.outs["RETURN_DATA"] = d
    if sem and "D0" in sem.inputs:
      op.ins["D0"] = d
    if "ATOMIC" in name and fmt != "DS" and not (f.get("glc", 0) or f.get("sc0", 0) or f.get("th", 0) & 1):
      del op.outs["RETURN_DATA"], op.outs["D0"], op.outs["D"], op.outs["VDATA"]  # atomic without return writes no register
    for nm in ("VDATA", "RETURN_DATA", "SDATA"):  # partial writes (D16 loads) keep the rest: pass the old value
      if sem and nm in sem.outputs and nm in op.outs and nm not in sem.inputs and d.file in "va":
        op.old[nm] = Src(d.file, d.index, max(1, min(sem.outputs[nm] // 32, d.dwords)))
  if name == "V_WRITELANE_B32" and dst is not None:
    op.ins["VDST"] = Src("k", value=dst.index)
  # carry/borrow lane masks: VOP3SD names them (sdst out, src2 in); e32 forms use VCC
  vcc = Src("s", k["vcc"], wave // 32)
  sd = opnds.get("sdst")
  op.outs["VCC"] = op.outs["D1"] = Src("s", sd.index, sd.dwords) if fmt == "VOP3SD" and sd else vcc
  src2 = opnds.get("src2")  # VOP3 forms name the lane-mask input (carry-in, cndmask select) as src2
  lanemask_in = fmt.startswith("VOP3") and src2 is not None and sem is not None and "VCC" in sem.inputs and "S2" not in sem.inputs
  op.ins["VCC"] = _src(inst, src2, None) if lanemask_in else vcc
  op.ins.pop("S2", None) if lanemask_in else None
  # ---- memory operands
  if op.mem:
    op.info = _mem_info(inst, op.mem, opnds, fam, k)
    if "DATA" in (sem.inputs if sem else {}) or "DATA2" in (sem.inputs if sem else {}) or "VDATA" in (sem.inputs if sem else {}):
      dfield = next((n for n in ("data0", "data", "vsrc", "vdata") if n in opnds), None)
      if dfield:
        dd = opnds[dfield]
        op.ins["DATA"] = op.ins["VDATA"] = Src(dd.file, dd.index, max(dd.dwords, sem.inputs.get("DATA", 32) // 32))
        if "data1" in opnds:
          op.ins["DATA2"] = Src(opnds["data1"].file, opnds["data1"].index, opnds["data1"].dwords)
        if fmt in ("MUBUF", "VBUFFER") and "vdata" in opnds:  # buffer stores/atomics: data lives in vdata
          op.ins["DATA"] = op.ins["VDATA"] = Src(dd.file, dd.index, max(1, sem.inputs.get("VDATA", sem.inputs.get("DATA", 32)) // 32))
    if sem and "DATA" in sem.inputs and sem.inputs["DATA"] > 32 * op.ins.get("DATA", Src("k")).dwords and "data1" in opnds:
      pass
  if sem and "S0" in sem.inputs and "S0" not in op.ins and "simm16" in f:  # CDNA SOPK: the immediate is S0
    op.ins["S0"] = Src("k", value=f["simm16"])
  if "SIMM16" in (sem.inputs if sem else {}) and "simm16" in f:
    op.ins["SIMM16"] = Src("k", value=f["simm16"])
  if sem and "SIMM32" in sem.inputs:
    op.ins["SIMM32"] = Src("k", value=f.get("literal", f.get("simm32", 0)))
  op.info.update(clamp=f.get("clmp", 0), omod=0 if inst_fields else f.get("omod", 0), dpp=_dpp(inst), sdwa=_sdwa(inst))
  return op


def _code_src(code: int, fmt: str, lit: int | None) -> Src:
  """A 9-bit VOP source code (SGPR/special, inline constant, literal, VGPR+256) as a Src."""
  if code >= 256:
    return Src("v", code - 256)
  if code == 255:
    return Src("k", value=lit or 0)
  if 128 <= code <= 248:
    return Src("k", value=inline_value(code, fmt, 32))
  return Src("s", code)


def _vopd(op: Op, inst: Inst, fam: str, wave: int) -> Op:
  """VOPD: two VALU ops issued together; both read their sources before either writes (vdsty's low bit is
  the complement of vdstx's, per the RDNA3 ISA VOPD section)."""
  f, vcc = inst.f, Src("s", SPECIAL["rdna"]["vcc"], wave // 32)
  from gputwin.isa.vendor import tables
  names = tables(fam).enums["VOPDOp"]
  pair = []
  for side, opname in (("x", inst.op), ("y", names[f["opy"]])):
    base = opname.replace("V_DUAL_", "V_")
    base = {"V_FMAAK_F32": "V_FMAAK_F32", "V_FMAMK_F32": "V_FMAMK_F32"}.get(base, base)
    sem = _sem(fam, base)
    if sem is None:
      raise GputwinError(f"{opname}: no pseudocode for {base}")
    fmt = "FMT_NUM_F32" if "_F32" in base else "FMT_NUM_B32"
    d = f["vdstx"] if side == "x" else (f["vdsty"] << 1) | ((f["vdstx"] & 1) ^ 1)
    sub = Op(inst, op.pc, op.size, "alu", sem)
    sub.ins = {"S0": _code_src(f[f"src{side}0"], fmt, f.get("literal")), "S1": Src("v", f[f"vsrc{side}1"]),
               "D0": Src("v", d), "VCC": vcc, "SIMM32": Src("k", value=f.get("literal", 0))}
    if base == "V_FMAMK_F32":
      sub.ins["S2"] = sub.ins["S1"]
    sub.outs = {"D0": Src("v", d)}
    pair.append(sub)
  op.kind, op.sem, op.info = "vopd", None, dict(pair=pair, dpp=None, sdwa=None, clamp=0, omod=0)
  return op


def _mem_info(inst: Inst, kind: str, opnds: dict, fam: str, k: dict) -> dict:
  f = inst.f
  off = f.get("ioffset", f.get("offset", 0))
  width = next((fd.width for fd in inst.encoding.fields if fd.name in ("ioffset", "offset")), 0)
  signed = kind in ("global", "scratch", "flat") or (kind == "smem" and width >= 20)
  if kind == "flat" and fam == "rdna3":
    signed = False
  if signed and width and off >> (width - 1):
    off -= 1 << width
  if kind == "ds":
    off = f.get("offset0", 0) | (f.get("offset1", 0) << 8)
  null = {k["null"], 0x7f} if fam != "cdna" else {0x7f}
  saddr = opnds.get("saddr")
  vaddr = opnds.get("addr") or opnds.get("vaddr")
  info = dict(offset=off, offset0=f.get("offset0", 0), offset1=f.get("offset1", 0),
              saddr=None if saddr is None or saddr.index in null or saddr.file != "s" else saddr.index,
              vaddr=None if vaddr is None else vaddr.index, vdwords=(1 if kind == "global" and saddr is not None and info_saddr_on(saddr, null) else vaddr.dwords) if vaddr else 0,
              sve=f.get("sve", 1), offen=f.get("offen", 0), idxen=f.get("idxen", 0))
  if kind == "smem":
    sb = opnds["sbase"]
    info["sbase"] = sb.index
    so = f.get("soffset", k["null"])
    use = (f.get("soffset_en", 0) or (fam != "cdna" and so != k["null"]))
    if fam == "cdna" and not f.get("imm", 1):
      info["soff_reg"], info["offset"] = f.get("offset", 0), 0
    else:
      info["soff_reg"] = so if use else None
  if kind == "buffer":
    info["vdwords"] = int(bool(info["offen"])) + int(bool(info["idxen"]))
    if not info["vdwords"]:
      info["vaddr"] = None
    info["srsrc"] = opnds["srsrc"].index
    so = opnds.get("soffset")
    info["soffset"] = so.index if so is not None and so.file == "s" and so.index != k["null"] else None
    info["soffset_k"] = so.value if so is not None and so.file in ("inline", "literal") and so.value is not None and so.value <= 192 else 0
    if info["soffset_k"]:
      info["soffset_k"] -= 128
  if kind == "scratch" and fam == "cdna":
    info["sve"] = 1 if info["saddr"] is None else f.get("sve", 0)
  return info


def info_saddr_on(saddr, null) -> bool:
  return saddr.file == "s" and saddr.index not in null


def _dpp(inst: Inst):
  if "DPP16" in inst.enc:
    f = inst.f
    return ("dpp16", f.get("dpp", f.get("dpp_ctrl", 0)), f.get("bc", f.get("bound_ctrl", 0)), f.get("fi", 0),
            f.get("row_mask", 15), f.get("bank_mask", 15))
  if "DPP8" in inst.enc:
    f = inst.f
    sel = tuple((f.get("lane_sel", 0) >> (3 * i)) & 7 for i in range(8))
    if "lane_sel_0" in f:
      sel = tuple(f[f"lane_sel_{i}"] for i in range(8))
    return ("dpp8", sel, inst.enc.endswith("FI") or bool(f.get("fi", 0)))
  return None


def _sdwa(inst: Inst):
  if "SDWA" not in inst.enc:
    return None
  f = inst.f
  return (f.get("src0_sel", 6), f.get("src0_sext", 0), f.get("src1_sel", 6), f.get("src1_sext", 0),
          f.get("dst_sel", 6), f.get("dst_unused", 0))


class Program:
  """A code blob decoded lazily, once per PC, into Ops (the cache the executor steps through)."""

  def __init__(self, text: bytes, base: int, arch: str, family: str, wave: int):
    self.text, self.base, self.arch, self.family, self.wave = text, base, arch, family, wave
    self.ops: dict[int, Op] = {}

  def op(self, pc: int) -> Op:
    o = self.ops.get(pc)
    if o is None:
      if not (self.base <= pc < self.base + len(self.text)) or pc % 4:
        raise GputwinError(f"PC {pc:#x} is outside the code [{self.base:#x}, {self.base + len(self.text):#x})")
      inst = decode(self.text, self.arch, offset=pc - self.base, wave=self.wave)
      o = self.ops[pc] = build_op(inst, pc, self.family, self.wave)
      try:
        from gputwin.isa import format_inst
        o.text = format_inst(inst)
      except Exception:
        o.text = inst.op.lower()
    return o
