"""The ir3 frontend's binding: a decoded instruction (gputwin.isa.ir3.Inst) bound to its pcode semantics
(gputwin.pcode.ir3): sources S0.. in encoding order, destination D0.. (consecutive registers for vector loads),
branch targets, the predicate guard, memory spaces, (rptN) repetition, and the control events the body calls.

Register rows (the machine's per-fiber file "v", 32-bit rows): the fiber's predication enable (predt/predf/prede,
row EN = 0), a0.x and a1.x (16 bits), the row a move to r<a0.x + n> goes through (TMP), p0.x..p0.w, then full
register n = gpr * 4 + component at row G0 + n (r0.x first). With merged registers (a6xx+) half register n is the low
(n even) or high half of full register n // 2 (hr0.y = r0.x[31:16]). The launcher sizes the file to the highest row
a program uses (launch.rows). The shared registers r48.x..r55.w (192..223, one value per wave; their halves pair the
same way from hr48.x), the sizes of the bound IBOs (64 bits each, what resinfo reads: rows IBO_SIZE + 2 * index, for
the first IBO_SLOTS indices) and the const file (c0.x = dword 0) live in the per-wave scalar file "s": rows 0..31,
IBO_SIZE.. and CONST + n.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import struct

from gputwin.emu.binding import Address, Buffer
from gputwin.emu.program import Op, Src
from gputwin.errors import DecodeError, PcodeError
from gputwin.isa.ir3 import Inst, Operand, decode
from gputwin.isa.ir3.listing import CONST_DWORDS
from gputwin.isa.ir3.spec import gen_of, spec
from gputwin.pcode import ir3 as P
from gputwin.pcode import semantics

SHARED, NUM_A0, NUM_A1, NUM_P0 = 192, 244, 245, 248  # register numbers: r48.x, a0.x (r61.x), a1.x, p0.x (r62.x)
EN, A0, A1, TMP, P0, R63, G0 = 0, 1, 2, 3, 4, 8, 12  # per-fiber rows: the enable, a0.x, a1.x, TMP, p0.x..w, r63.x..w
# (the discard destination Mesa's descriptor prefetches write), then r0.x
GPR_ROWS = G0 + SHARED  # every row a program may use: r<a0.x + n> can name any of r0.x..r47.w
EXEC, M0, NULL, IBO_SIZE, CONST = 32, 34, 35, 36, 64  # scalar rows: the machine's EXEC (2), M0, NULL; IBO sizes; c0.x
IBO_SLOTS = (CONST - IBO_SIZE) // 2  # IBO indices whose size the launch binds in the scalar file (resinfo)
SROWS = CONST + CONST_DWORDS
STORED = 128  # scalar rows an instruction's result reaches (core.Engine.store: rows from 128 are AMD's constants)
FLUT = (0.0, 0.5, 1.0, 2.0, math.e, math.pi, 1 / math.pi, 1 / math.log2(math.e), math.log2(math.e),
        1 / math.log2(10), math.log2(10), 4.0)  # #mulitsrc-immed-flut <doc>: the float immediates by index
# the events a body calls -> the machine's kind for it (end/barrier/nop the machine knows; the rest emu/ir3/events.py)
CONTROL = {"END": "end", "BARRIER": "barrier", "NOP": "nop", "SHPE": "nop", "SHPS": "nop", "GETONE": "getone",
           "SHFL": "shfl", "CALL": "call", "RET": "ret",
           "GETLAST": "getlast", "PREDT": "pred", "PREDF": "pred", "PREDE": "pred", "BRANY": "bany", "BRALL": "bany",
           "MOVMSK": "movmsk", "BRCST": "brcst", "STC": "stc", "LDCK": "ldck"}


class Located:
  """One instruction of a program with what its neighbours decide: whether it lies in a predicated region (after a
  predt/predf, before the prede: Mesa emits these regions as straight-line code), its index, the code's size,
  a1.x at its entry where the code before it fixes it (`a1`, else None: _a1), and whether fibers can reach it other
  than from the instruction before (`target`: a branch target or call return, _targets)."""
  __slots__ = ("inst", "index", "predicated", "size", "a1", "target")

  def __init__(self, inst: Inst, index: int, predicated: bool, size: int, a1: int | None = None,
               target: bool = False):
    self.inst, self.index, self.predicated, self.size, self.a1, self.target = inst, index, predicated, size, a1, target

  @property
  def text(self) -> str:
    return self.inst.text


@functools.lru_cache(maxsize=64)
def _insts(text: bytes, gpu: str) -> tuple[Inst | None, ...]:
  """Every instruction of the code, decoded (None: a word that does not decode)."""
  out = []
  for off in range(0, len(text) - len(text) % 8, 8):
    try:
      out.append(decode(text, gpu, offset=off))
    except DecodeError:
      out.append(None)
  return tuple(out)


@functools.lru_cache(maxsize=64)
def _regions(text: bytes, gpu: str) -> tuple[bool, ...]:
  """Per instruction: inside a predt/predf .. prede region (words that do not decode count as outside)."""
  out, on = [], False
  for inst in _insts(text, gpu):
    n = inst.name if inst is not None else ""
    if n == "prede":
      on = False
    out.append(on and n not in ("predt", "predf"))
    if n in ("predt", "predf"):
      on = True
  return tuple(out)


def _regs(o) -> list[int]:
  """The register numbers (gpr * 4 + component) an operand's fields name."""
  if not isinstance(o, Operand):
    return []
  f = o.fields
  return ([f["GPR"] * 4 + f["SWIZ"]] if "GPR" in f and "SWIZ" in f else []) + [n for v in f.values() for n in _regs(v)]


@functools.lru_cache(maxsize=64)
def _targets(text: bytes, gpu: str) -> frozenset[int]:
  """The instructions (indices) a fiber can reach other than from the one before: branch targets (of the flow
  instructions whose body takes a TARGET), call returns."""
  out = set()
  for i, inst in enumerate(_insts(text, gpu)):
    if inst is not None and inst.cat == 0 and "IMMED" in inst.fields and _branches(inst.name):
      out.add(i + inst.fields["IMMED"])
      if inst.name == "call":
        out.add(i + 1)
  return frozenset(out)


def _branches(name: str) -> bool:
  """Does flow instruction `name` name a target its fibers may jump to (its body takes TARGET)?"""
  try:
    return "TARGET" in _sem(name).inputs
  except PcodeError:
    return False


def prologue(text: bytes, gpu: str) -> int | None:
  """Where the main shader starts when the code opens with a prologue (Mesa's a7xx preamble: `shps #target` as
  instruction 0, the prologue up to its `shpe`, the main shader at the target): that byte offset, else None."""
  first = _insts(text, gpu)[:1]
  if not first or first[0] is None or first[0].name != "shps":
    return None
  to = 8 * int(first[0].fields.get("IMMED", 0))
  return to if 0 < to < len(text) - len(text) % 8 else None


@functools.lru_cache(maxsize=64)
def _a1(text: bytes, gpu: str) -> tuple[int | None, ...]:
  """Per instruction: a1.x at its entry where straight-line code fixes it (a `mova1 a1.x, imm`, outside predicated
  regions, with no branch target and nothing naming a1.x since), else None. Mesa sets a1.x so right before an
  `ldc.k c[a1.x], ...` of its preamble, whose const destination the binding then knows."""
  insts, regions, targets = _insts(text, gpu), _regions(text, gpu), _targets(text, gpu)
  out, val = [], None
  for i, inst in enumerate(insts):
    val = None if i in targets else val
    out.append(val)
    if inst is None:
      val = None
      continue
    f = inst.fields
    names = [n for v in f.values() for n in _regs(v)]
    if inst.name == "mov-immed" and names == [NUM_A1] and not f.get("REPEAT") and not regions[i] and \
       f.get("SRC_TYPE") == f.get("DST_TYPE"):
      val = int(f["SRC"].fields["IMMED"]) & 0xffff  # (a1.x holds 16 bits)
    elif any(n <= NUM_A1 <= n + f.get("REPEAT", 0) for n in names):
      val = None
  return tuple(out)


def locate(text: bytes, gpu: str, offset: int) -> Located:
  i, text = offset // 8, bytes(text)
  return Located(decode(text, gpu, offset=offset), i, _regions(text, gpu)[i], len(text), _a1(text, gpu)[i],
                 i in _targets(text, gpu))


@functools.lru_cache(maxsize=None)
def _sem(key: str):
  return semantics("ir3", key)


# ------------------------------------------------------------------------------------------------ operands
def reg(num: int, half: bool = False) -> Src:
  """A register by number (gpr * 4 + component): a row of the fiber file, or of the scalar file for shared ones."""
  if num >= NUM_A0:  # a0.x/a1.x (16 bits), p0.c, r63.c: their own rows whatever the precision
    if num in (NUM_A0 + 2, NUM_A0 + 3):
      raise PcodeError(f"register r61.{'xyzw'[num % 4]} does not exist (r61 is a0.x/a1.x)", "ir3", "register")
    return Src("v", {NUM_A0: A0, NUM_A1: A1}.get(num, (P0 if num < NUM_P0 + 4 else R63) + num % 4),
               bits=16 if num in (NUM_A0, NUM_A1) else 32)
  hi = False
  if half:
    base = SHARED if num >= SHARED else 0
    num, hi = base + (num - base) // 2, bool((num - base) & 1)
  if SHARED + 32 <= num < NUM_A0:
    raise PcodeError(f"register r{num // 4}.{'xyzw'[num % 4]} does not exist (r0-r47, shared r48-r55, a0/a1, p0, "
                     "r63)", "ir3", "register")
  if SHARED <= num < SHARED + 32:  # (fmt "half": a store keeps the row's other half, core.Engine.store)
    return Src("s", num - SHARED, bits=16 if half else 32, hi=hi, fmt="half" if half else "")
  return Src("v", G0 + num, bits=16 if half else 32, hi=hi)


def regname(d: Src) -> str:
  """An operand's register as Mesa prints it (r1.x, hr2.y, r48.w, c4.x, a0.x, p0.y)."""
  if d.file == "s" and d.index >= CONST:
    return f"c{(d.index - CONST) // 4}.{'xyzw'[(d.index - CONST) % 4]}"
  if d.file == "v" and d.index < G0:
    return {A0: "a0.x", A1: "a1.x", EN: "(predication)", TMP: "(relative move)"}.get(
      d.index, f"{'p0' if d.index < R63 else 'r63'}.{'xyzw'[d.index % 4]}")
  n = d.index + (SHARED if d.file == "s" else -G0)
  if d.bits == 16:
    base = SHARED if n >= SHARED else 0
    h = base + 2 * (n - base) + int(d.hi)
    return f"hr{h // 4}.{'xyzw'[h % 4]}"
  return f"r{n // 4}.{'xyzw'[n % 4]}"


def step(s: Src, k: int, half: bool) -> Src:
  """The register k after `s` (vector components, (rptN) repetition): half registers step by halves."""
  if s.file == "k":
    return s
  if s.file == "s" and s.index >= CONST:
    return const(s.index - CONST + k, s.bits == 16)
  if s.file == "v" and s.index < G0:  # a0/a1/p0: no register after them
    return s
  num = s.index + (SHARED if s.file == "s" else -G0)
  if half:
    base = SHARED if num >= SHARED else 0
    return reg(base + 2 * (num - base) + int(s.hi) + k, True)
  return reg(num + k, False)


def const(num: int, half: bool = False) -> Src:
  """c<num / 4>.<num % 4>; a half const reads the same dword (Mesa's ir3_cp.c: half consts hold 32-bit values)."""
  if not 0 <= num < CONST_DWORDS:
    raise PcodeError(f"c{num // 4}.{'xyzw'[num % 4]} is past the {CONST_DWORDS // 4}-vec4 const file", "ir3", "const")
  return Src("s", CONST + num, bits=16 if half else 32)


def _num(o: Operand) -> int:
  f = o.fields
  if "SRC" in f and isinstance(f["SRC"], Operand):
    return _num(f["SRC"])
  if "GPR" in f:
    return f["GPR"] * 4 + f["SWIZ"]
  if "CONST" in f and isinstance(f["CONST"], Operand):
    return _num(f["CONST"])
  return f["CONST"] * 4 + f.get("SWIZ", 0)


def _f(v: float, bits: int) -> int:
  return struct.unpack("<H", struct.pack("<e", v))[0] if bits == 16 else struct.unpack("<I", struct.pack("<f", v))[0]


def source(o, half: bool, bits: int = 32, immed: bool = False):
  """A source operand as (Src | ("rel", file, offset, half), absneg) from its isaspec bitset (`immed`: cat3's
  IMMED_ENCODING, a const-or-immediate source is the immediate)."""
  if not isinstance(o, Operand):
    return Src("k", value=int(o) & ((1 << bits) - 1)), 0
  b, f = o.bitset, o.fields
  mods = f.get("ABSNEG", 0)
  if "relative" in b:
    inner = f["SRC"].fields if isinstance(f.get("SRC"), Operand) else f
    return ("rel", "s" if "const" in b else "v", inner.get("OFFSET", 0), half), mods
  if "flut" in b:
    if f["IMMED"] >= len(FLUT):
      raise PcodeError(f"float immediate table index {f['IMMED']} is past the {len(FLUT)}-entry table "
                       "(#mulitsrc-immed-flut <doc>)", "ir3", "immediate")
    return Src("k", value=_f(FLUT[f["IMMED"]], 16 if half else 32)), mods
  if "IMMED" in f and (b != "#cat3-src-const-or-immed" or immed) and "GPR" not in f:
    w = 16 if half else bits
    return Src("k", value=int(f["IMMED"]) & ((1 << w) - 1)), mods
  if "const" in b or b == "#reg-const":
    return const(_num(o), half), mods
  return reg(_num(o), half), mods


def with_mods(s, mods: int, kind: str | None, bits: int):
  """(neg)/(abs) of #absneg on a source: float sign bits and bitwise not as the machine's operand masks; integer
  negate/abs (Mesa's IR3_REG_SNEG/SABS) as op.info["imods"] (select_inputs)."""
  if not mods or kind is None or not isinstance(s, Src):
    return s, None
  neg, ab = bool(mods & 1), bool(mods & 2)
  if kind == "f":
    sign = 1 << (bits - 1)
    return dataclasses.replace(s, neg=sign if neg else 0, abs=sign if ab else 0), None
  if kind == "b":
    return dataclasses.replace(s, neg=(1 << bits) - 1 if neg else 0), None
  return s, (ab, neg)


# ------------------------------------------------------------------------------------------------ binding
def bind(loc: Located, pc: int, family: str, wave: int) -> Op:
  inst = loc.inst
  f, cat = inst.fields, inst.cat
  op = Op(loc, pc, 8, "alu")
  op.info.update(ss=bool(f.get("SS")), sy=bool(f.get("SY")), jp=bool(f.get("JP")), cat=cat, join=loc.target)
  try:
    if cat == 0:
      _cat0(op, inst, pc, loc.size)
    elif cat in (1, 2, 3, 4):
      _alu(op, inst)
    elif cat == 5:
      _cat5(op, inst)
    elif cat == 6:
      _cat6(op, inst, loc.a1)
    else:
      _cat7(op, inst)
  except PcodeError as e:
    op.kind, op.info["why"] = "unsupported", e.msg
    return op
  if cat == 4 or op.mem == "ds" and not op.sem.mem == "w":  # what (ss) waits for: SFU results, shared-memory loads
    op.info["sync"] = "either" if op.atomic else "ss"  # (shared atomics: either flag, the docs do not say which)
  elif op.kind == "shfl":
    op.info["sync"] = "either"  # (a cross-fiber read through the memory pipe: the docs do not say which flag)
  elif cat == 5 or inst.name.startswith("resinfo") or op.mem and op.sem is not None and "r" in op.sem.mem:
    op.info["sync"] = "sy"  # what (sy) waits for: memory loads, atomics, resinfo, cat5
  if loc.predicated and op.kind not in ("nop", "pred"):
    if op.info.get("guard") is not None:
      op.kind, op.info["why"] = "unsupported", "a branch inside a predt/prede region"
    op.info["guard"] = (EN, False)
    if op.info.get("lowered") is not None:  # (the instruction the native tier runs for it: the same fibers)
      op.info["lowered"].info["guard"] = op.info["guard"]
  return op


def _control(op: Op, key: str) -> None:
  op.sem = _sem(key)
  ev = [CONTROL[c] for c in op.sem.calls if c in CONTROL]
  if ev:
    op.kind = ev[0]


def _cat0(op: Op, inst: Inst, pc: int, size: int) -> None:
  f, n = inst.fields, inst.name
  if n in ("emit", "cut", "chmask", "chsh", "flow_rev", "bkt", "brac", "brax"):
    raise PcodeError(f"{n}: not modelled (graphics, or a branch form the docs do not define)", "ir3", n)
  _control(op, n)
  if "IMMED" in f and n != "nop":
    t = pc + 8 * f["IMMED"]
    if not 0 <= t < size:
      raise PcodeError(f"branch target {t:#x} is outside the shader [0x0, {size:#x})", "ir3", n)
    op.ins["TARGET"] = Src("k", value=t, dwords=2)
  if n in ("br", "kill"):
    op.info["guard"] = (P0 + f["COMP1"], bool(f["INV1"]))
  elif n in ("brao", "braa"):
    for i in (1, 2):
      op.ins[f"S{i - 1}"] = Src("v", P0 + f[f"COMP{i}"], neg=1 if f[f"INV{i}"] else 0)
    op.ins["NEXT"] = Src("k", value=pc + 8, dwords=2)
  elif n in ("bany", "ball"):
    op.info.update(pred=Src("v", P0 + f["COMP1"], neg=1 if f["INV1"] else 0), all=n == "ball")
  elif n == "getone":  # for the native tier: a jump that all but the lowest of its fibers take (binding.elect)
    op.info["lowered"] = Op(op.inst, pc, op.size, "alu", sem=_sem("jump"), ins={"TARGET": op.ins["TARGET"]},
                            info={"elect": True})
  elif n == "getlast":
    op.info["cluster"] = 8  # the <doc>: it behaves as if CLUSTER_SIZE is always 8
  elif n in ("predt", "predf", "prede"):
    op.info["pred"] = n[-1]
    op.info["lowered"] = _enable(op, n[-1])
  if f.get("REPEAT") and op.kind != "nop":
    raise PcodeError(f"(rpt{f['REPEAT']}) on {n}", "ir3", n)


def _enable(op: Op, p: str) -> Op:
  """predt/predf/prede as the instruction both tiers run (events.py, native/plan.lowered): the enable row of every
  fiber of the wave, active or not (`unmasked`), becomes p0.x != 0 (predt), p0.x == 0 (predf) or 1 (prede), the
  1/0 of Mesa's booleans, as cmps.u / mov compute them."""
  key, ins = {"t": ("cmps.u.ne", {"S0": Src("v", P0), "S1": Src("k")}),
              "f": ("cmps.u.eq", {"S0": Src("v", P0), "S1": Src("k")}),
              "e": ("mov.u32u32", {"S0": Src("k", value=1)})}[p]
  return Op(op.inst, op.pc, op.size, "alu", sem=_sem(key), ins=ins, outs={"D0": Src("v", EN)}, info={"unmasked": True})


def _alu(op: Op, inst: Inst) -> None:
  """cat1-4: key, sources, destination; (rptN) becomes one sub-op per repetition (kind "rpt")."""
  f, n = inst.fields, inst.name
  if n == "movmsk":
    _control(op, "movmsk")
    op.info["w"], op.outs["D0"] = f["W"], reg(_num(f["DST"].fields["DST"]))
    return
  key = P.inst_key(inst)
  op.sem = sem = _sem(key)
  kind = P.modifier(key)
  rep = f.get("REPEAT", 0)
  if inst.cat == 1:
    half_s, half_d = bool(f.get("HALF")), bool(f.get("DST_HALF"))
    if n in ("swz", "gat", "sct"):
      _parallel(op, inst, half_s, half_d)
      return
    names, srcs, rflags = ["SRC"], [f["SRC"]], [f.get("SRC_R", 0)]
    d = f["DST"]
    if f.get("DST_REL"):
      op.info["dst_rel"] = d.fields.get("OFFSET", 0)
    dst = reg(_num(d.fields["DST"]), half_d) if not f.get("DST_REL") else Src("v", TMP)
    immed_bits = sem.inputs.get("S0", 32)
    if n == "mov-immed":  # the immediate is the source's raw bits (#cat1-immed-src)
      srcs = [int(f["SRC"].fields["IMMED"]) & ((1 << (16 if half_s else 32)) - 1)]
      rflags = [0]  # ((r) on an immediate only resolves mova hazards: the <doc>)
  else:
    full = f.get("FULL", 1)
    half_s = not full
    half_d = bool(f.get("DST_HALF"))
    names = [k for k in ("SRC1", "SRC2", "SRC3") if k in f] or ["SRC"]
    srcs = [f[k] for k in names]
    rflags = [f.get(f"{k}_R", 0) for k in names]
    dst = reg(_num(f["DST"]), half_d)
    immed_bits = 32
  if inst.cat == 3:  # cat3 sources carry (neg) only
    mods = [int(bool(f.get(f"{k}_NEG", 0))) for k in names]
  else:
    mods = [s.fields.get("ABSNEG", 0) if isinstance(s, Operand) else 0 for s in srcs]
  enc = bool(f.get("IMMED_ENCODING"))
  parts = []
  for r in range(rep + 1):
    o = Op(op.inst, op.pc, 8, "alu", sem=sem, info=dict(op.info))
    imods = {}
    for i, s in enumerate(srcs):
      if f"S{i}" not in sem.inputs:
        continue
      x, _ = source(s, half_s, immed_bits, enc)
      if r and rflags[i]:
        x = step(x, r, half_s) if isinstance(x, Src) else (x[0], x[1], x[2] + r, x[3])
      bits, md = 16 if half_s else 32, mods[i]
      if isinstance(x, tuple):
        o.info.setdefault("rel", {})[f"S{i}"] = x
        x = Src("k", value=0)
      if x.file == "s" and x.index >= CONST and half_s and kind == "f":  # float ops convert a half const's f32
        o.info.setdefault("f16const", []).append(f"S{i}")
        if md:
          imods[f"S{i}"] = ("f", md)
        md = 0
      x, im = with_mods(x, md, kind, bits)
      if im:
        imods[f"S{i}"] = ("i", md)
      o.ins[f"S{i}"] = x
    if imods:
      o.info["imods"] = imods
    if o.info.get("rel") or o.info.get("f16const") or imods:
      o.info["sdwa"] = True  # (the machine's input-selection hook: Frontend.select_inputs)
    o.outs["D0"] = step(dst, r, half_d) if r and dst.index != TMP else dst
    if "dst_rel" in o.info:
      o.info["dst_rel"] = (o.info["dst_rel"] + r, half_d)
    parts.append(o)
  if len(parts) == 1 and "dst_rel" not in op.info:
    op.sem, op.ins, op.outs, op.info = parts[0].sem, parts[0].ins, parts[0].outs, parts[0].info
    return
  op.kind, op.info["parts"] = "rpt", parts


def _parallel(op: Op, inst: Inst, half_s: bool, half_d: bool) -> None:
  """swz/gat/sct (ir3-cat1.xml <doc>: a series of moves whose sources are all read before any destination is
  written): (source, destination) pairs, each converted by the instruction's mov/cov key (the event runs them)."""
  f, n = inst.fields, inst.name
  src = lambda k: reg(_num(f[k].fields["REG"]), half_s)
  dst = lambda k: reg(_num(f[k].fields["REG"]), half_d)
  if n == "swz":
    pairs = [(src("SRC0"), dst("DST0")), (src("SRC1"), dst("DST1"))]
  elif n == "gat":
    pairs = [(src(f"SRC{i}"), step(dst("DST0"), i, half_d)) for i in range(4)]
  else:
    pairs = [(step(src("SRC0"), i, half_s), dst(f"DST{i}")) for i in range(4)]
  op.kind, op.info["moves"] = "par", pairs
  op.ins, op.outs = {f"S{i}": a for i, (a, _) in enumerate(pairs)}, {f"D{i}": b for i, (_, b) in enumerate(pairs)}


def _cat5(op: Op, inst: Inst) -> None:
  f, n = inst.fields, inst.name
  if n != "brcst.active":
    raise PcodeError(f"{n}: texture sampling is not modelled (compute only)", "ir3", n)
  _control(op, "brcst.active")
  half = bool(f.get("DST_HALF"))
  op.info["cluster"] = f["CLUSTER_SIZE"]
  op.ins["S0"] = reg(_num(f["SRC1"]), bool(f.get("HALF")))
  op.outs["D0"] = reg(_num(f["DST"]), half)


_TYPES = spec().enums["#type"]


def _type(f: dict) -> str:
  t = _TYPES[f.get("TYPE", 3)]
  return "u8" if t == "u8_32" else t


def _cat6(op: Op, inst: Inst, a1: int | None = None) -> None:
  """Memory: op.info["space"] (global | shared | private | ibo | ubo), the address parts (op.info["addr"]: the
  base register or constant, the index/offset operands memory.py combines), components, data registers. `a1`: a1.x
  at the instruction where the code fixes it (Located.a1)."""
  f, n = inst.fields, inst.name
  t = _type(f)
  half = bool(f["TYPE_HALF"]) if "TYPE_HALF" in f else t in ("f16", "u16", "s16")  # (8-bit loads: as printed)
  if n in ("stc",):
    _control(op, "stc")
    op.info.update(n=f["SIZE"], dst=f["DST"].fields.get("OFFSET", 0), rel=f["DST"].bitset == "#const-dst-a1")
    op.ins["S0"] = reg(_num(f["SRC"]))
    return
  if n == "ldc.k":
    _control(op, "ldc.k")
    op.info["n"] = f["LOAD_SIZE"]
    op.ins["S0"], op.ins["S1"] = _cat6_src(f, "SRC1", "SRC1_IM"), _cat6_src(f, "SRC2", "SRC2_IM")
    if a1 is not None:
      _const_load(op, a1)
    return
  if n in ("getspid", "getwid", "getfiberid"):
    op.kind, op.info["id"] = "id", n[3:]
    op.outs["D0"] = reg(_num(f["DST"]))
    return
  if n in ("resinfo.b", "resinfo"):  # the IBO's size in elements: its descriptor's, which the launch binds
    ibo = _cat6_src(f, "SSBO", "SSBO_IM")
    op.info.update(ibo=ibo, t=t)
    op.outs["D0"] = reg(_num(f["DST"]))
    if ibo.file == "k" and ibo.value < IBO_SLOTS and t in P.BYTES:  # its size in the scalar file: an ALU read
      op.sem = _sem(f"resinfo.b.{t}")
      op.ins["S0"], op.ins["S1"] = (Src("s", IBO_SIZE + 2 * ibo.value + k) for k in (0, 1))
    else:  # a register index (or one past the slots): events.py reads the launch's table
      op.kind = "resinfo"
    return
  if n == "shfl":  # subgroup shuffle/rotate (ir3-cat6.xml shfl <doc>): the event reads the source fiber's register
    _control(op, "shfl")
    op.info["mode"] = spec().enums["#cat6-shfl-mode"][f["MODE"]]
    op.ins["S0"], op.ins["S1"] = reg(_num(f["SRC1"]), half), _cat6_src(f, "SRC2", "SRC2_IM")
    op.outs["D0"] = reg(_num(f["DST"]), half)
    return
  atomic = n.startswith("atomic.")
  if atomic:
    parts = n.split(".")
    space = {"b": "ibo", "g": "global"}.get(parts[1], "shared")
    aop = parts[-1]
    op.sem = _sem(f"{n}.{'s32' if t == 's32' else 'u32'}")
    op.mem, op.atomic = ("ds" if space == "shared" else "global"), True
    if space == "ibo":  # the data vector is tied to the destination: rD.x the old value, then the data operands
      d = reg(_num(f["SRC1"]))
      op.outs["D0"] = d
      op.ins["S0"] = step(d, 1, False)
      if aop == "cmpxchg":
        op.ins["S1"] = step(d, 2, False)
      op.info.update(space="ibo", ibo=_cat6_src(f, "SSBO", "SSBO_IM"), coord=reg(_num(f["SRC2"])), esize=4, n=1)
      op.info["buffer"] = Buffer("ibo", op.info["ibo"], op.info["coord"], 4, 0, 4)
    else:
      op.outs["D0"] = reg(_num(f["DST"]))
      a = _cat6_src(f, "SRC1", "SRC1_IM")
      op.ins["S0"] = _cat6_src(f, "SRC2", "SRC2_IM")
      if space == "global":
        a = dataclasses.replace(a, dwords=2) if a.file == "v" else a
      op.info.update(space=space, base=a, off=0, n=1)
    return
  loads = {"ldg": "global", "ldg.a": "global", "ldl": "shared", "ldlw": "shared", "ldp": "private",
           "ldib.b": "ibo", "ldc": "ubo"}
  stores = {"stg": "global", "stg.a": "global", "stl": "shared", "stlw": "shared", "stp": "private",
            "stib.b": "ibo"}
  if n not in loads and n not in stores:
    raise PcodeError(f"{n}: not modelled", "ir3", n)
  if n == "ldc":
    cnt, t = f.get("TYPE_SIZE", 1), "u32"
  else:
    cnt = f.get("TYPE_SIZE", f.get("SIZE", 1)) if n in ("ldib.b", "stib.b") else f.get("SIZE", 1)
  op.sem = _sem(f"{n}.{t}.{cnt}")
  space = loads.get(n) or stores[n]
  op.mem = {"shared": "ds", "private": "scratch"}.get(space, "global")
  info = dict(space=space, n=cnt, esize=P.BYTES[t], off=f.get("OFF", 0))
  if n in loads:
    d = reg(_num(f["SRC1" if n == "ldib.b" else "DST"]), half)  # (ldib.b's destination is its SRC1 field)
    for i in range(cnt):
      op.outs[f"D{i}"] = step(d, i, half)
  if n == "ldib.b" or n == "stib.b":
    info.update(ibo=_cat6_src(f, "SSBO", "SSBO_IM"), coord=reg(_num(f["SRC2"])))
    if n == "stib.b":
      s = reg(_num(f["SRC1"]))
      for i in range(cnt):
        op.ins[f"S{i}"] = step(s, i, False)
  elif n == "ldc":
    info.update(ubo=_cat6_src(f, "SRC2", "SRC2_IM"), coord=_cat6_src(f, "SRC1", "SRC1_IM"),
                off=16 * f.get("OFFSET", 0))
  if space in ("ibo", "ubo"):  # (the IBO coordinate counts elements, the UBO's vec4s plus a byte offset)
    info["buffer"] = Buffer(space, info[space], info["coord"], 16 if space == "ubo" else info["esize"],
                            info["off"] if space == "ubo" else 0, cnt * info["esize"])
  elif space == "global":
    base = f["SRC1"]
    b = const(_num(base)) if f.get("SRC1_CONST") else reg(_num(base))
    info["base"] = dataclasses.replace(b, dwords=2)
    if n.endswith(".a"):
      info["index"] = reg(_num(f["SRC2"]))
      info["shift"] = f.get("SRC2_BYTE_SHIFT", f.get("DST_BYTE_SHIFT", 0))
      info["off"] = f.get("OFF", 0) << (2 if gen_of(inst.gpu) < 700 else 0)
    if n.startswith("st"):
      s = reg(_num(f["SRC3"]), half)
      for i in range(cnt):
        op.ins[f"S{i}"] = step(s, i, half)
  else:  # shared / private: l[SRC+OFF] / p[SRC+OFF], stores l[DST+OFF], SRC
    info["base"] = reg(_num(f["SRC"] if n in loads else f["DST"]))
    if n in stores:
      s = reg(_num(f["SRC"]), half)
      for i in range(cnt):
        op.ins[f"S{i}"] = step(s, i, half)
  if space == "shared" or space == "global" and "index" not in info:  # the plan both tiers evaluate (binding.Address)
    b = info["base"]
    info["address"] = Address((b,), info["off"], 64 if space == "global" else 32, 1, "mem" if space == "global" else
                              "lds")
  op.info.update(info)


def _const_load(op: Op, a1: int) -> None:
  """ldc.k with its const destination c[a1.x] known (Located.a1) as the load the native tier runs (op.info
  ["lowered"]; events.py runs it too): N vec4 of UBO S1 at vec4 S0, a binding.Buffer access, into const dwords
  a1.x.. (scalar rows: the first active fiber's load, as a vector op's per-wave result). Only with per-wave sources
  (the event reads the first active fiber's; every fiber then loads the same bytes) and destinations the machine's
  stores reach; else the LDCK event alone."""
  n, (s0, s1) = 4 * op.info["n"], (op.ins["S0"], op.ins["S1"])
  per_wave = all(s.file == "k" or s.file == "s" and s.index >= CONST for s in (s0, s1))
  if not (per_wave and str(op.info["n"]) in P.LDCK_SIZES.split("|") and CONST + a1 + n <= STORED):
    return
  op.info["lowered"] = Op(op.inst, op.pc, op.size, "alu", sem=_sem(f"ldc.k.{op.info['n']}"), mem="global",
                          outs={f"D{i}": const(a1 + i) for i in range(n)},
                          info=dict(space="ubo", n=n, esize=4, off=0, buffer=Buffer("ubo", s1, s0, 16, 0, 4 * n)))


def _cat6_src(f: dict, name: str, im: str) -> Src:
  o = f[name]
  if not isinstance(o, Operand):
    return Src("k", value=int(o))
  if f.get(im, 0) or o.bitset == "#cat6-src" and "GPR" not in o.fields:
    return Src("k", value=o.fields.get("IMMED", 0))
  if o.bitset == "#cat6-src-const-or-gpr" and f.get(f"{name}_CONST"):
    return const(_num(o))
  return reg(_num(o))


def _cat7(op: Op, inst: Inst) -> None:
  n = inst.name
  if n == "alias":
    raise PcodeError("alias: not modelled", "ir3", n)
  _control(op, n)
  if op.kind == "barrier":
    op.info["bar"] = (Src("k", value=0), None, None)
