"""The AMD frontend's binding: a decoded instruction (gputwin.isa.Inst) bound to its pcode semantics, i.e. which
operand or special register feeds every pcode input name and receives every output name. Data-driven: operand
fields from `gputwin.isa.operands` (src0/vsrc1/src2/vdst/sdst/sdata/...), the pcode names (S0, D0, VCC, SCC, ADDR,
DATA, ...) and a few vendor tables (scalar operand codes, inline constants). Nothing here knows arithmetic.
"""
from __future__ import annotations

import functools
import re
import struct

from gputwin.abi.kfd import LDS_APP_BASE_V9, SCRATCH_APP_BASE_V9
from gputwin.emu.binding import Address
from gputwin.emu.program import Op, Src
from gputwin.errors import GputwinError, PcodeError
from gputwin.isa import Inst
from gputwin.isa.disasm import MSGS
from gputwin.isa.model import FMT
from gputwin.isa.operands import operands, returns, signature, vopd_halves
from gputwin.isa.targets import target
from gputwin.pcode import semantics, unsupported_calls
from gputwin.pcode.analysis import (adds_offset as body_adds_offset, float_arithmetic, sliced_outputs, stride,
                                    writes_memory, written_bits)

# scalar operand codes (vendor "SSRC" enumeration): family kind -> name -> code
SPECIAL = {"rdna": dict(vcc=106, null=124, m0=125, exec=126), "cdna": dict(vcc=106, null=125, m0=124, exec=126)}
# the flat apertures' high dwords: where Linux's KFD puts them on gfx9+ (kfd_flat_memory.c, the LDS and scratch app
# bases the mock KFD reports too), so src_shared_base, the hidden aperture arguments and the driver agree
SHARED_HI, PRIVATE_HI = LDS_APP_BASE_V9 >> 32, SCRATCH_APP_BASE_V9 >> 32
APERTURE = {235: SHARED_HI, 236: SHARED_HI, 237: PRIVATE_HI, 238: PRIVATE_HI}  # SRC_{SHARED,PRIVATE}_{BASE,LIMIT}
VCCZ, EXECZ, SCC_CODE = 251, 252, 253

# Pcode inputs that are no operand, and where both tiers (Engine.special, native.Compiler.special) take them from:
# ("scc",) the wave's SCC; ("sgpr", key, dwords) a special SGPR (key of SPECIAL; 0 dwords: a lane mask, 2
# in wave64); ("zero", VCCZ/EXECZ) 1 when that mask is 0; ("pc",) this instruction's PC; ("ieee",) MODE.IEEE as the
# kernel descriptor sets it (Engine.ieee); ("round",) MODE's FP round bits (HW_REG 1, bits 3:0); ("field", key)
# an encoding field of the instruction (Op.info). Any other name reads 0 (address inputs only hooks read).
SPECIAL_INPUTS = {"SCC": ("scc",), "EXEC": ("sgpr", "exec", 0), "EXEC_LO": ("sgpr", "exec", 1),
                  "VCCZ": ("zero", VCCZ), "EXECZ": ("zero", EXECZ), "M0": ("sgpr", "m0", 1), "PC": ("pc",),
                  "WAVE_MODE.IEEE": ("ieee",), "ROUND_MODE": ("round",), "OFFSET": ("field", "offset"),
                  "OFFSET0": ("field", "offset0"), "OFFSET1": ("field", "offset1"), "FP8_FNUZ": ("field", "fp8fnuz")}


# What the pcode cannot express, keyed by the call a body makes (our bodies in pcode/errata.py): the wave's end, the
# workgroup barrier (RDNA4's split barrier: S_BARRIER_SIGNAL's CheckBarrierComplete waits for the workgroup here,
# so its S_BARRIER_WAIT has nothing left to wait for), entering a trap handler (none is installed: the dispatch
# stops), an illegal instruction (S_CODE_END padding), and the time source (the wave's own instruction count, so
# batched and serial runs agree). These are scheduler events, not register or memory updates.
CONTROL = {"ENDPGM": "end", "BARRIER": "barrier", "CheckBarrierComplete": "barrier", "BARRIER_WAIT": "nop",
           "TRAP": "trap", "ILLEGAL_INSTRUCTION": "bad", "CLOCK": "clock"}

MEMFMT = {"SMEM": "smem", "DS": "ds", "GLOBAL": "global", "VGLOBAL": "global", "FLAT": "flat", "VFLAT": "flat",
          "SCRATCH": "scratch", "VSCRATCH": "scratch", "MUBUF": "buffer", "VBUFFER": "buffer"}
# Instructions whose pcode runs but whose meaning needs state the model lacks: they stop the launch as unsupported,
# naming the feature (opcode regex -> what is missing).
UNMODELLED = {r"^TBUFFER_": "typed buffer access (MTBUF): converting through the instruction's data/number format "
                            "is not modelled",
              r"_LOAD_LDS_[US](BYTE|SHORT)$": (BYTES_TO_LDS := "a byte or short load into LDS: where its bytes land "
                                                                "in LDS is not documented")}
# Hardware registers that read the wave's clock (its instruction count): (row, shift, bits). RDNA3's SHADER_CYCLES
# is a 20-bit counter (clang-22 reads hwreg(HW_REG_SHADER_CYCLES, 0, 20) for __builtin_readcyclecounter); RDNA4
# splits a 64-bit one into SHADER_CYCLES_LO / _HI (clang-22 reads HI, LO, HI again); CDNA has none (S_MEMTIME)
CYCLE_ROWS = {"rdna3": ((29, 0, 20),), "rdna4": ((29, 0, 32), (30, 32, 32)), "cdna": ()}
# The S_SENDMSG_RTN messages (their source slot's kind "sendmsg_rtn") the executor answers: the time (pcode errata:
# CLOCK); their answer arrives through the wait counter of isa/data/waitcnt.json's "message" row
RTN_MESSAGES = frozenset({"MSG_RTN_GET_REALTIME"})
# DS bodies (ours: pcode errata) whose LDS address is M0 + the offset, keyed by the built-in they call: DS_APPEND /
# DS_CONSUME's counter (clang-22 puts the counter's LDS address in M0)
M0_ADDRESSED = frozenset({"DS_APPEND_CONSUME_COUNTER"})
# Loads whose data goes to LDS instead of VDATA: these opcodes, and MUBUF loads with the encoding's lds bit (CDNA ISA
# guides, "global load LDS" / MUBUF "LDS DMA"): lane l's data lands at M0 + the instruction offset + l * bytes
TO_LDS = r"^(GLOBAL|SCRATCH)_LOAD_LDS_"
# MODE.FP_DENORM (MODE bits 7:4, from the kernel descriptor's FLOAT_DENORM_MODE_32 / _16_64, S_DENORM_MODE, S_SETREG)
# decides, per format, whether float arithmetic keeps denormal inputs (MODE bit 4 for f32, 6 for f16/f64) and results
# (bit 5, 7); a clear bit flushes them to the zero of their sign. Operands of a float format, by element width:
FLOAT_ELEMENT = re.compile(r"_(PK2_)?F(16|32|64)$")
MODE = 1  # the MODE register's row of the hardware registers (HW_REG_MODE)


def denorm_bit(bits: int, result: bool) -> int:
  """The MODE bit that keeps denormal inputs (result False) or results of `bits`-bit floats."""
  return (4 if bits == 32 else 6) + result


FP_DENORM = sum(1 << denorm_bit(b, r) for b in (32, 16) for r in (False, True))  # the field's MODE bits (7:4)


SRC_FIELDS = (("src0", "ssrc0", "vsrc0", "srcx0"), ("src1", "vsrc1", "ssrc1", "vsrcx1"), ("src2",),
              ("scale_src0",), ("scale_src1",))  # S0, S1, S2, S3, S4 (VOP3PX2's scale sources: S3, S4)
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


def _fam_kind(fam: str) -> str: return "cdna" if fam == "cdna" else "rdna"


def _src(o, slot, neg=0, abs_=0, hi=False, pk=()) -> Src:
  """A decoded operand as a Src: constants resolved to raw bits for the operand's format and width."""
  bits, fmt = (slot.bits, slot.fmt) if slot is not None else (32, "")
  if o.file == "literal":
    v = o.value or 0
    if o.dwords == 2:  # 64-bit operand: an f64 literal is the high dword, integers are extended
      v = (v << 32) if "F64" in fmt else (v | (0xffffffff00000000 if "I64" in fmt and v >> 31 else 0))
    return Src("k", value=v, dwords=o.dwords, bits=bits, fmt=fmt, neg=neg, abs=abs_, pk=pk)
  if o.file == "inline" and o.dwords == 2 and "PK2_" in fmt:
    # packed 32-bit pair (CDNA V_PK_*_F32/B32): the constant is one 32-bit element in the low dword, the high dword
    # reads 0 -- clang-22 splats with op_sel_hi:[..,0] (`v_pk_add_f32 v[0:1], v[0:1], 1.0 op_sel_hi:[1,0]`)
    v = inline_value(o.value, fmt.replace("PK2_", ""), 32)
    return Src("k", value=v, dwords=2, bits=bits, fmt=fmt, neg=neg, abs=abs_, pk=pk)
  if o.file == "inline":
    v = inline_value(o.value, fmt, 64 if o.dwords == 2 else bits)
    if o.dwords == 2 and o.value <= 208 and o.value > 192:
      v |= 0xffffffff00000000
    return Src("k", value=v, dwords=o.dwords, bits=bits, fmt=fmt, neg=neg, abs=abs_, pk=pk)
  return Src(o.file, o.index, o.dwords, 0, hi or o.hi, bits, fmt, neg, abs_, pk)


def _sign(fmt: str, bits: int, bitwise: bool = False) -> int:
  """The sign bit that abs/neg act on. Untyped (B16/B32/B64) sources of VOP1/2/3 and DPP/SDWA forms, e.g.
  V_CNDMASK_B32 (LLVM selects fneg through it), take the float modifiers bitwise on their width; VOP3P's untyped
  sources (IU8 WMMA signedness) give the bits other meanings and are left alone (FMA_MIX: see `_sources`)."""
  if bitwise and "NUM_B" in fmt and bits in (16, 32, 64):
    return 1 << (bits - 1)
  if "F16" in fmt or ("F" in fmt and bits == 16):
    return 0x8000
  if "F64" in fmt:
    return 1 << 63
  if "F32" in fmt:
    return 1 << 31
  return 0


@functools.lru_cache(maxsize=None)
def _sliced(fam: str, name: str, widths: tuple) -> frozenset:
  """The results (name, bits) some path through the body writes only bit ranges of, leaving the rest (V_CVT_PK_FP8_F32's
  half of D0, a D16 load's half of VDATA): the binding passes their old value in."""
  return frozenset(sliced_outputs(_sem(fam, name).program.body, dict(widths)))


@functools.lru_cache(maxsize=None)
def _sem(fam: str, name: str):
  try:
    return semantics(fam, name)
  except PcodeError:
    return None


def build_op(inst: Inst, pc: int, fam: str, wave: int) -> Op:
  """Bind one decoded instruction to its pcode semantics: which operand or special register feeds every input name
  and receives every output name."""
  name, fmt, f = inst.op, inst.format, inst.f
  sem = _sem(fam, name)
  op = Op(inst, pc, inst.size, _kind_of(sem), sem)
  gap = next((why for pat, why in UNMODELLED.items() if re.search(pat, name)), None)
  conv = sorted(c for c in unsupported_calls(sem) if "_to_" in c) if sem is not None else []
  if conv:  # a conversion no tier implements (gfx950's scaled and stochastic ones): stop before touching operands
    gap = f"the conversion {conv[0]}() is not modelled"
  if gap is not None:
    op.kind, op.info["why"] = "unsupported", gap
    return op
  if op.kind == "clock" and fmt in MEMFMT:  # S_MEMTIME: the time returns through the scalar memory path, counted as
    op.info["counter"] = MEMFMT[fmt]  # its loads are (lgkmcnt / kmcnt): checks.Checks._plan
  op.atomic = sem is not None and "r" in sem.mem and writes_memory(sem.program.body)  # read-modify-write
  opnds = {o.field: o for o in operands(inst)}
  op.vector = not (fmt.startswith("SOP") or fmt == "SMEM")
  if fmt == "VOPD":
    return _extent(_vopd(op, inst, fam, wave), opnds.values())
  ins = sem.inputs if sem is not None else {}
  swizzle = op.kind == "alu" and fmt == "DS" and not sem.mem and not sem.regfiles and {"DATA", "OFFSET"} <= ins.keys()
  if swizzle:  # DS_SWIZZLE_B32: lanes exchange DATA (the offset picks the pattern); no LDS access
    v = opnds["addr"]  # llvm-mc-22 encodes the swizzled VGPR in the ADDR field
    op.ins["DATA"] = Src(v.file, v.index)
    op.ins["OFFSET"] = Src("k", value=f.get("offset0", 0) | f.get("offset1", 0) << 8)
  elif op.kind == "alu" and fmt in MEMFMT:
    if sem.mem or "VGPR" not in sem.regfiles:
      op.kind, op.mem = "mem", MEMFMT[fmt]
    else:  # DS_PERMUTE/BPERMUTE: the body indexes the VGPR file with register numbers, no LDS access
      for pname, fld in (("ADDR", "addr"), ("DATA0", "data0"), ("VDST", "vdst")):
        op.ins[pname] = Src("k", value=f.get(fld, 0))
      op.ins["OFFSET"] = Src("k", value=f.get("offset0", 0) | f.get("offset1", 0) << 8)
  sig = signature(inst.arch, inst.enc, name, wave)
  slots = {s.field: s for s in sig.slots}
  msg = next((sl for sl in sig.slots if sl.kind == "sendmsg_rtn"), None)
  if msg is not None:  # S_SENDMSG_RTN_*: the message its source names decides what comes back
    code = f.get(msg.field, 0)
    what = next((n for n, v in MSGS[fam]["sendmsg"].items() if v == code), f"message {code}")
    if what not in RTN_MESSAGES:
      op.kind, op.info["why"] = "unsupported", f"{what}: only {', '.join(sorted(RTN_MESSAGES))} is answered"
      return op
    op.info["counter"] = "message"
  fields_read = [n for n in ins if n.startswith("INST.")]  # V_BITOP3 reads its truth table from neg/abs/omod
  for n in fields_read:
    op.ins[n] = Src("k", value=f.get(n[5:].lower(), 0))
  _sources(op, inst, opnds, slots, modifiers=not fields_read)
  _destination(op, inst, opnds, slots, sem)
  vcc = Src("s", SPECIAL[_fam_kind(fam)]["vcc"], wave // 32)  # carry/borrow and select lane masks
  sd, src2 = opnds.get("sdst"), opnds.get("src2")
  op.outs["VCC"] = op.outs["D1"] = Src("s", sd.index, sd.dwords) if fmt == "VOP3SD" and sd else vcc
  if fmt.startswith("VOP3") and src2 is not None and "VCC" in ins and "S2" not in ins:
    op.ins["VCC"] = _src(src2, None)  # VOP3 forms name the lane-mask input in src2
    op.ins.pop("S2", None)
  else:
    op.ins["VCC"] = vcc
  if op.mem:
    op.info = _mem_info(inst, op.mem, opnds, fam, SPECIAL[_fam_kind(fam)])
    if "SGPR_ADDR" in ins:  # GLOBAL_*_ADDTID: the body adds SGPR_ADDR, INST_OFFSET and laneID * 4 itself
      sb = op.info["saddr"]
      op.ins["SGPR_ADDR"] = Src("s", sb, 2) if sb is not None else Src("k", value=0)
      op.ins["INST_OFFSET"] = Src("k", value=op.info["offset"] & 0xffffffff)
    data = next((opnds[n] for n in ("data0", "data", "vsrc", "vdata") if n in opnds), None)
    if data is not None and ins.keys() & {"DATA", "DATA2", "VDATA"}:
      bits = ins.get("VDATA", ins.get("DATA", 32)) if fmt in ("MUBUF", "VBUFFER") else ins.get("DATA", 32)
      op.ins["DATA"] = op.ins["VDATA"] = Src(data.file, data.index, max(data.dwords, bits // 32))
      if "data1" in opnds:
        op.ins["DATA2"] = Src(opnds["data1"].file, opnds["data1"].index, opnds["data1"].dwords)
    if (f.get("lds") or re.search(TO_LDS, name)) and "VDATA" in sem.outputs:  # memory.deliver: VDATA to LDS
      nb = stride(sem.program)
      if nb % 4:
        op.kind, op.mem, op.info["why"] = "unsupported", "", BYTES_TO_LDS
        return op
      op.info["deliver"] = nb
      op.outs = {k: d for k, d in op.outs.items() if d != op.outs.get("VDATA")}
  if "simm16" in f:  # SOPP/SOPK immediates; SOPK's sdst field is also its register source (s_cmpk, s_setreg)
    op.ins["SIMM16"] = Src("k", value=f["simm16"])
    if fmt == "SOPK" and "sdst" in opnds:
      op.ins["S0"] = _src(opnds["sdst"], None)
  op.ins["SIMM32"] = Src("k", value=f.get("literal", f.get("simm32", 0)))
  op.info.update(clamp=f.get("clmp", 0), omod=0 if fields_read else f.get("omod", 0), dpp=_dpp(inst), sdwa=_sdwa(inst))
  if _own_opsel(op, inst):
    op.ins["OPSEL"] = Src("k", value=f.get("opsel", 0))
  _denormals(op, inst)
  if "FP8_FNUZ" in ins or op.kind == "matrix":  # what FP8/BF8 mean on this target (pcode errata, amd/matrix.py)
    op.info["fp8fnuz"] = int(target(inst.arch).fp8 == "fnuz")
  return _extent(op, opnds.values())


def _element(s, mix_f16: bool | None = None) -> tuple[int, int]:
  """(element bits, elements) of a float operand `s`: (32, 1), (16, 2) for packed f16 ... (an FMA_MIX source: one
  f32, or an f16 in either half by its op_sel_hi bit); (0, 0) for other formats (bf16 included)."""
  if mix_f16 is not None:
    return (16, 2) if mix_f16 else (32, 1)
  m = FLOAT_ELEMENT.search(getattr(s, "fmt", "") or "")
  return (int(m.group(2)), 2 if m.group(1) else 1) if m else (0, 0)


def _denormals(op: Op, inst: Inst | None = None) -> None:
  """op.info["ftz"]: the float inputs MODE.FP_DENORM flushes, ((name, element bits, elements), ...), and
  op.info["ftz_out"]: D0's (element bits, elements, first element flushed) or (0, 0, 0), for an instruction whose
  body computes with floats (pcode.analysis.float_arithmetic; matrix ops are the layouts' business: not flushed).
  Both tiers apply them around the body: core.Engine._inputs / retire, native codegen's load_state / the D0 store."""
  if op.sem is None or op.kind != "alu" or op.mem or not float_arithmetic(op.sem.program):
    return
  mix = inst is not None and inst.format == "VOP3P" and bool(re.search(FMT["mix_abs_in_neg_hi"], inst.op))
  hi = inst.f.get("opsel_hi", 0) | inst.f.get("opsel_hi2", 0) << 2 if mix else 0
  ins = tuple((n, *el) for i, n in enumerate(("S0", "S1", "S2", "D0")) if n in op.sem.inputs and isinstance(
    op.ins.get(n), Src) and (el := _element(op.ins[n], bool(hi >> i & 1) if mix and i < 3 else None))[0])
  d = op.outs.get("D0")
  out = (*_element(d), 0) if isinstance(d, Src) and not mix else (0, 0, 0)
  if mix and isinstance(d, Src):  # FMA_MIX: its result is the bits of D0 the body writes (an f32; an f16 half, the
    written = written_bits(op.sem.program.body, "D0", 32)  # other half kept: only the written one is flushed)
    lo, w = (written & -written).bit_length() - 1, written.bit_count()
    out = (w, lo // w + 1, lo // w) if w in (16, 32) and written == ((1 << w) - 1) << lo else (0, 0, 0)
  if ins or out[0]:
    op.info.update(ftz=ins, ftz_out=out)


def _extent(op: Op, opnds) -> Op:
  """op.info["extent"]: (VGPRs, AccVGPRs) the instruction's register operands reach (first past the last), which
  the executor compares with the dispatch's allocation before running it (core.run: a located error, not an
  index past the register file)."""
  srcs = [s for d in (op.ins, op.outs, op.old) for s in d.values() if isinstance(s, Src)]
  regs = [(o.file, o.index + o.dwords) for o in opnds if o.file in "va"] + \
         [(s.file, s.index + s.dwords) for s in srcs if s.file in ("v", "a")]
  op.info["extent"] = tuple(max((n for f, n in regs if f == x), default=0) for x in "va")
  return op


def _kind_of(sem) -> str:
  if sem is None:
    return "unsupported"
  ctl = next((CONTROL[c] for c in sem.calls if c in CONTROL), None)
  if ctl is not None:
    return ctl
  if "MATRIX_MULTIPLY_ACCUMULATE" in sem.calls:
    return "matrix"  # WMMA/MFMA: operand layouts live in emu/amd/matrix.py
  return "alu" if sem.outputs or sem.mem or sem.regfiles else "nop"


def _sources(op: Op, inst: Inst, opnds: dict, slots: dict, modifiers: bool) -> None:
  """S0..S4 from the source fields in order, with abs/neg (VOP3, SDWA, DPP), op_sel halves (VOP3 16-bit) and the
  packed op_sel/op_sel_hi/neg_lo/neg_hi of VOP3P."""
  f = inst.f
  neg, abs_, opsel = (f.get("neg", 0), f.get("abs", 0), f.get("opsel", 0)) if modifiers else (0, 0, 0)
  packed = inst.format == "VOP3P" and any("PK" in s.fmt for s in slots.values() if s.field.startswith("src"))
  opsel_hi = f.get("opsel_hi", 3) | f.get("opsel_hi2", 1) << 2
  mix = inst.format == "VOP3P" and bool(re.search(FMT["mix_abs_in_neg_hi"], inst.op))
  if mix:  # FMA_MIX: the body picks each source's type (OPSEL_HI) and half (OPSEL) from the raw dwords
    opsel_hi = f.get("opsel_hi", 0) | f.get("opsel_hi2", 0) << 2
    op.ins["OPSEL"], op.ins["OPSEL_HI"] = Src("k", value=opsel), Src("k", value=opsel_hi)
  srcs = [next(opnds[n] for n in names if n in opnds) for names in SRC_FIELDS if any(n in opnds for n in names)]
  own = _own_opsel(op, inst)  # (a packed source's word is the body's to pick)
  for i, o in enumerate(srcs):
    sl = slots.get(o.field) or slots.get("vsrc0" if o.field == "src0" else o.field)
    bits, sfmt = (sl.bits, sl.fmt) if sl else (32, "")
    if packed:  # two 16-bit halves of a VGPR, or (CDNA V_PK_*_F32) two dwords of a VGPR pair
      w = 32 if o.dwords == 2 else 16
      nm = ((neg >> i & 1) << (w - 1) | (f.get("neg_hi", 0) >> i & 1) << (2 * w - 1)) if "F" in sfmt else 0
      op.ins[f"S{i}"] = _src(o, sl, neg=nm, pk=(opsel >> i & 1, opsel_hi >> i & 1, w))
    elif mix:  # neg_lo negates, neg_hi takes |x| of the element the body reads: an f32, or an f16 half
      sgn = 0x8000 << 16 * (opsel >> i & 1) if opsel_hi >> i & 1 else 1 << 31
      op.ins[f"S{i}"] = _src(o, sl, neg=sgn * (neg >> i & 1), abs_=sgn * (f.get("neg_hi", 0) >> i & 1))
    else:
      sgn = _sign(sfmt, bits, bitwise=inst.format != "VOP3P")
      n_ = sgn if (neg >> i & 1 or f.get(f"src{i}_neg", 0)) else 0
      a_ = sgn if (abs_ >> i & 1 or f.get(f"src{i}_abs", 0)) else 0
      hi = bits == 16 and inst.format == "VOP3" and bool(opsel >> i & 1) and not (own and "PK" in sfmt)
      op.ins[f"S{i}"] = _src(o, sl, neg=n_, abs_=a_, hi=hi)
  if srcs and op.sem is not None and "SRC0" in op.sem.inputs:  # V_READLANE/READFIRSTLANE: the VGPR *number*
    op.ins["SRC0"] = Src("k", value=srcs[0].index)


def _own_opsel(op: Op, inst: Inst) -> bool:
  """A VOP3 body that reads OPSEL picks bytes, halves or its destination's half by op_sel itself (the FP8/BF8
  conversions): it gets the raw field and whole registers, not the halves op_sel selects for 16-bit operands."""
  return inst.format == "VOP3" and op.sem is not None and "OPSEL" in op.sem.inputs


def _destination(op: Op, inst: Inst, opnds: dict, slots: dict, sem) -> None:
  """D0 (and the memory result names) -> the destination operand; VOPC e32 writes VCC."""
  f = inst.f
  if inst.format == "VOPC":
    dst = opnds.get("vcc") or opnds.get("sdst")
  else:
    dst = next((opnds[n] for n in DST_FIELDS if n in opnds and opnds[n].file != "imm"), None)
  if dst is None or not returns(inst):  # an atomic without return writes no register (MUBUF's vdata is its data)
    return
  sl = slots.get(dst.field)
  if _own_opsel(op, inst):  # the body writes the half op_sel names itself: the whole register is its destination
    sl = None
  hi = bool(sl and sl.bits == 16 and inst.format == "VOP3" and f.get("opsel", 0) >> 3 & 1)
  d = Src(dst.file, dst.index, dst.dwords, hi=hi or dst.hi, bits=sl.bits if sl else 32, fmt=sl.fmt if sl else "")
  if inst.format == "VOP3P" and re.search(FMT["mix_abs_in_neg_hi"], inst.op):  # FMA_MIXLO/HI write one f16 half
    d = op.old["D0"] = Src(dst.file, dst.index, 1, bits=32)  # of the dword (D0[15:0] / D0[31:16]), keeping the other
  for n in ("D0", "D", "SDATA", "VDATA", "RETURN_DATA"):
    op.outs[n] = d
  if sem is None:
    return
  if "D0" in sem.inputs:  # accumulators (V_FMAC_F32, V_DOT2ACC)
    op.ins["D0"] = d
  if d.file in "va":  # results written in part keep the rest: their old value goes in
    widths = {"D0": 32 * d.dwords} | {n: sem.outputs[n] for n in ("VDATA", "RETURN_DATA", "SDATA") if n in sem.outputs}
    for n in _sliced(sem.family, sem.name, tuple(sorted(widths.items()))):
      if n == "D0" and "D0" not in sem.inputs:
        op.old.setdefault("D0", d)
      elif n != "D0" and n not in sem.inputs:
        op.old[n] = Src(d.file, d.index, max(1, min(sem.outputs[n] // 32, d.dwords)))
  if "VDST" in sem.inputs and "VGPR" in sem.regfiles:  # V_WRITELANE: a VGPR number (DS_BPERMUTE's is bound above)
    op.ins.setdefault("VDST", Src("k", value=dst.index))
  if "DST" in sem.inputs and sem.regfiles:  # S_/V_MOVRELD, V_SWAPREL: the destination's register number (+ M0)
    op.ins.setdefault("DST", Src("k", value=dst.index))


def _vopd(op: Op, inst: Inst, fam: str, wave: int) -> Op:
  """VOPD: two VALU ops issued together (isa.operands.vopd_halves: each half's opcode and operands); both read their
  sources before either writes. A half binds like its VOP2 twin: S0 = src, S1 = vsrc, SIMM32 = the K literal."""
  vcc, pair = Src("s", SPECIAL["rdna"]["vcc"], wave // 32), []
  for half in vopd_halves(inst):
    base = half.op.replace("V_DUAL_", "V_")
    sem = _sem(fam, base)
    if sem is None:
      raise GputwinError(f"{half.op}: no pseudocode for {base}")
    sub = Op(inst, op.pc, op.size, "alu", sem, _text="")
    sub.ins["VCC"] = vcc
    for sl, o in zip(half.slots, half.operands):
      name = "SIMM32" if sl.kind == "lit" else "D0" if sl.field.startswith("vdst") else \
        "S1" if sl.field.startswith("vsrc") else "S0"
      sub.ins[name] = _src(o, sl)
    sub.outs = {"D0": sub.ins["D0"]}
    _denormals(sub)
    pair.append(sub)
  op.kind, op.sem, op.info = "vopd", None, dict(pair=pair, dpp=None, sdwa=None, clamp=0, omod=0)
  return op


def _mem_info(inst: Inst, kind: str, opnds: dict, fam: str, k: dict) -> dict:
  """Address operands and offsets of a memory instruction (signed instruction offsets per encoding width)."""
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
    sem = _sem(fam, inst.op)
    adds_offset = sem is not None and body_adds_offset(sem.program.body)  # `MEM[ADDR + OFFSET.u32]`, or ours
    m0 = k["m0"] if sem is not None and sem.calls & M0_ADDRESSED else None
  null = {k["null"], 0x7f} if fam != "cdna" else {0x7f}
  saddr = opnds.get("saddr")
  vaddr = opnds.get("addr") or opnds.get("vaddr")
  sbase = None if saddr is None or saddr.index in null or saddr.file != "s" else saddr.index
  info = dict(offset=off, offset0=f.get("offset0", 0), offset1=f.get("offset1", 0), saddr=sbase,
              vaddr=None if vaddr is None else vaddr.index, sve=f.get("sve", 1), offen=f.get("offen", 0),
              idxen=f.get("idxen", 0),
              vdwords=0 if vaddr is None else 1 if kind == "global" and sbase is not None else vaddr.dwords)
  if kind == "smem":
    sb = opnds["sbase"]
    info["sbase"] = sb.index
    so = f.get("soffset", k["null"])
    use = (f.get("soffset_en", 0) or (fam != "cdna" and so != k["null"]))
    if fam == "cdna" and not f.get("imm", 1):
      info["soff_reg"], info["offset"] = f.get("offset", 0) & 0x7F, 0   # a 7-bit SGPR code, as llvm-mc-22 decodes it
    else:
      info["soff_reg"] = so if use else None
  if kind == "ds":
    info["adds_offset"], info["m0"] = adds_offset, m0
  info["address"] = _address(kind, info)
  if kind == "buffer":
    info["vdwords"] = int(bool(info["offen"])) + int(bool(info["idxen"]))
    if not info["vdwords"]:
      info["vaddr"] = None
    info["srsrc"] = (opnds.get("srsrc") or opnds["rsrc"]).index  # the V#: MUBUF srsrc, gfx12 VBUFFER rsrc
    so = opnds.get("soffset")
    info["soffset"] = so.index if so is not None and so.file == "s" and so.index != k["null"] else None
    const = so is not None and so.file == "inline" and so.value is not None and so.value <= 192
    info["soffset_k"] = so.value - 128 if const else 0
  return info


def _address(kind: str, info: dict) -> Address | None:
  """The effective-address plan (binding.Address) of an SMEM/DS/scratch/global/flat instruction (the ISA guides'
  "Memory" chapters); buffer addresses (V#) stay with memory.py."""
  v, s, off = info["vaddr"], info["saddr"], info["offset"]
  if kind == "smem":
    so = () if info.get("soff_reg") is None else (Src("s", info["soff_reg"]),)
    return Address((Src("s", info["sbase"], 2),) + so, off, 64, 4, "mem")
  if kind == "ds":  # 32-bit DS address arithmetic; bodies that add OFFSET themselves get none here
    base = (Src("s", info["m0"]),) if info["m0"] is not None else () if v is None else (Src("v", v),)
    return Address(base, 0 if info["adds_offset"] else off, 32, 1, "lds")
  if kind == "scratch":
    return Address((() if s is None else (Src("s", s),)) + ((Src("v", v),) if info["sve"] and v is not None else ()),
                   off, 32, 1, "scratch")
  if kind in ("global", "flat"):
    if v is None:  # GLOBAL_*_ADDTID: no VGPR address (the body computes it from SGPR_ADDR and laneID)
      return Address(() if s is None else (Src("s", s, 2),), off, 64, 1, "mem") if kind == "global" else None
    terms = (Src("s", s, 2), Src("v", v)) if kind == "global" and s is not None else (Src("v", v, 2),)
    return Address(terms, off, 64, 1, "split" if kind == "flat" else "mem")
  return None


def _dpp(inst: Inst):
  if "DPP16" in inst.enc:
    f = inst.f
    return ("dpp16", f.get("dpp", f.get("dpp_ctrl", 0)), f.get("bc", f.get("bound_ctrl", 0)), f.get("fi", 0),
            f.get("row_mask", 15), f.get("bank_mask", 15), inst.arch)  # the arch: DPP16 controls differ per family
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
