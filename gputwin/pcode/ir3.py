"""Adreno ir3 instruction semantics (a6xx/a7xx), written once as pcode of ours (the language gputwin.pcode compiles).

Qualcomm publishes no pseudocode. Each row names the isaspec bitset (`add.f`, the leaf name gputwin.isa.ir3 decodes)
and the facts it rests on: the XML of Mesa 25.0.7 (/work/shared/vendor/ir3/mesa-25.0.7/src/freedreno/isa/
ir3-cat*.xml: bitset names, field meanings, <doc> text) and docs/drivers/freedreno/ir3-notes.rst. Where those are
silent the row says which choice it makes (`note`).

    k = key("cmps.f", cond="lt", half=True)   # 'cmps.f.lt.h'
    k = inst_key(gputwin.isa.ir3.decode(word, "a630"))   # the key of a decoded instruction
    text(k)                                   # the pcode; semantics("ir3", k) compiles it like an AMD body
    keys()                                    # every key the table produces

Key scheme: `<leaf>[.<cond>][.h][.sat][.conv]` for cat2/cat3-alt/cat4 (`.h`: FULL=0, half-precision sources and
result; `.sat`: the (sat) bit; `.conv`: DST_CONV, the result converted to the other precision); cat3 leaves carry
their precision in the name (`mad.f16`, `sel.b32`); cat1 is `mov.<src><dst>` / `cov.<src><dst>[.even|.pos_infinity|
.neg_infinity]` (`cov_key`: the #type and #round displays; ROUND=0 prints nothing and rounds toward zero, Mesa's
ROUND_ZERO); dp2acc/dp4acc add the #signedness and #8bitvec2pack displays (`dp2acc.mixed.high`). The cat1 leaves
mov-immed/-const/-gpr/-relgpr/-relconst, and swz/gat/sct element by element (their <doc>: parallel moves), use the
mov/cov key of their SRC_TYPE/DST_TYPE (`BY_TYPE`); `MISSING` lists the leaves with no body and why.

Operands (bound by the emulator): sources S0, S1, S2 = SRC1, SRC2, SRC3 in the encoding's order, destination D0.
Every slot is 32 bits; half-precision values live in bits 15:0 (the emulator reads/writes the hr register there); a
16-bit result is D0's bits 15:0. Binding, not semantics: the source modifiers ((neg)/(abs) of #absneg, cat3 (neg)),
applied by the emulator when it reads a source as `modifier(k)` says ("f": sign bit; "i": two's-complement negate/
abs; "b": (neg) is a bitwise not; Mesa's IR3_REG_FNEG/SNEG/BNOT), (rptN)/(r) repetition and relative addressing.

Numerics (our choices, the docs being silent): float ops are IEEE binary32/binary16, round to nearest even, with
denormals kept; a NaN result is the default NaN (0x7fc00000, 0x7e00); (sat) clamps a float result to [+0, 1] (NaN
-> +0) and an add/sub integer result to its type's range. No SFU (cat4) accuracy is documented: we return the
exact value rounded once (evaluated in f64), so hardware results may differ by the hardware's own error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from gputwin.errors import PcodeError
from gputwin.pcode.ptx import expand  # the same `op x=a|b [flag]` pattern language as ptx.py's table

ISA = "mesa-25.0.7/src/freedreno/isa"
CANON = {16: "16'F(0x7e00)", 32: "32'F(0x7fc00000)"}
COND = {"lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b", "eq": "a == b", "ne": "a != b"}  # #cond
ROUND = {None: "rz", "even": "rn", "pos_infinity": "rp", "neg_infinity": "rm"}  # #round of cat1 (0 = toward zero)


@dataclass(frozen=True)
class Row:
  pattern: str  # leaf name and modifier slots (ptx.expand's language)
  build: Callable[[dict], str]  # groups -> pcode text
  cite: str  # the isaspec file and what it says
  note: str = ""  # the choice made where the docs are silent


def _w(g: dict) -> int:
  return 16 if g.get("prec") else 32


def _one(w: int) -> str:
  return f"{w}'0x{(1 << w) - 1:x}"


# ------------------------------------------------------------------------------------------------ floats
def _fstore(g: dict, lines: list[str]) -> str:
  """The float result `r`: (sat) clamp, default NaN, stored into D0's low w bits."""
  w = _w(g)
  if g.get("sat"):
    lines.append(f"r = isNAN(r) || r <= {w}'F(0.0) ? {w}'F(0.0) : r > {w}'F(1.0) ? {w}'F(1.0) : r")
  return ";\n".join(lines + [f"D0.f{w} = isNAN(r) ? {CANON[w]} : r"])


def _farith(g: dict) -> str:
  w, op = _w(g), g["op"]
  o = {"add.f": "+", "mul.f": "*"}[op]
  return _fstore(g, [f"r = S0.f{w} {o} S1.f{w}"])


def _fminmax(g: dict) -> str:
  w = _w(g)
  c = "a < b || a == b && sign(a)" if g["op"] == "min.f" else "a > b || a == b && !sign(a)"
  return _fstore(g, [f"a = S0.f{w}", f"b = S1.f{w}", f"r = isNAN(a) ? b : isNAN(b) ? a : {c} ? a : b"])


def _fsign(g: dict) -> str:
  w = _w(g)
  z, one = f"{w}'F(0.0)", f"{w}'F(1.0)"
  return _fstore(g, [f"a = S0.f{w}", f"r = isNAN(a) ? {z} : a > {z} ? {one} : a < {z} ? {w}'F(-1.0) : a"])


# to an integral value, by rounding mode (floor/trunc are built-ins both backends share; ceil(x) = -floor(-x) exactly)
_RINT = {"rm": "floor({})", "rp": "-floor(-{})", "rn": "rint_rn({})", "rz": "trunc({})"}
_ROUNDS = {"floor.f": "rm", "ceil.f": "rp", "rndne.f": "rn", "trunc.f": "rz"}


def _fround(g: dict) -> str:
  w, op = _w(g), g["op"]
  if op == "rndaz.f":  # half-way cases away from zero: trunc, then one step when the dropped part is >= 0.5
    return _fstore(g, [f"a = S0.f{w}", "t = trunc(a)", "d = a - t",
                       f"r = d >= {w}'F(0.5) ? t + {w}'F(1.0) : d <= {w}'F(-0.5) ? t - {w}'F(1.0) : t"])
  return _fstore(g, [f"r = {_RINT[_ROUNDS[op]].format(f'S0.f{w}')}"])


def _copy(g: dict) -> str:
  w = _w(g)
  return f"D0.b{w} = S0.b{w}"


def _cmp(g: dict) -> str:
  """cmps: 1/0 (Mesa's booleans); cmpv: all ones/0."""
  w, op = _w(g), g["op"]
  t = {"f": "f", "u": "u", "s": "i"}[op[-1]]
  c = re.sub(r"\b([ab])\b", lambda m: f"S{'0' if m[1] == 'a' else '1'}.{t}{w}", COND[g["cond"]])
  true = f"{w}'1U" if op.startswith("cmps") else _one(w)
  return f"D0.b{w} = ({c}) ? {true} : {w}'0U"


# ------------------------------------------------------------------------------------------------ integers
def _iarith(g: dict) -> str:
  w, op = _w(g), g["op"]
  o = "+" if op.startswith("add") else "-"
  if op[-1] == "u":
    if not g.get("sat"):
      return f"D0.u{w} = S0.u{w} {o} S1.u{w}"
    if o == "+":
      return f"r = {w + 1}'U(S0.u{w}) + {w + 1}'U(S1.u{w});\nD0.u{w} = r[{w}] ? {_one(w)} : r[{w - 1} : 0]"
    return f"D0.u{w} = S0.u{w} < S1.u{w} ? {w}'0U : S0.u{w} - S1.u{w}"
  if not g.get("sat"):
    return f"D0.i{w} = S0.i{w} {o} S1.i{w}"
  lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
  return (f"r = 64'I(S0.i{w}) {o} 64'I(S1.i{w});\n"
          f"D0.i{w} = r > 64'{hi} ? {w}'{hi} : r < 64'{lo} ? {w}'{lo} : {w}'I(r)")


def _iminmax(g: dict) -> str:
  w, op = _w(g), g["op"]
  t, c = ("u" if op[-1] == "u" else "i"), ("<" if op.startswith("min") else ">")
  return f"D0.{t}{w} = S0.{t}{w} {c} S1.{t}{w} ? S0.{t}{w} : S1.{t}{w}"


def _logic(g: dict) -> str:
  w, op = _w(g), g["op"]
  if op == "not.b":
    return f"D0.b{w} = ~S0.b{w}"
  return f"D0.b{w} = S0.b{w} {dict(a='&', o='|', x='^')[op[0]]} S1.b{w}"


def _shift(g: dict) -> str:
  w, op = _w(g), g["op"]
  n = f"S1.u{w} & {w}'{w - 1}U"
  if op == "ashr.b":
    return f"D0.i{w} = S0.i{w} >> ({n})"
  if op == "getbit.b":
    return f"D0.u{w} = (S0.u{w} >> ({n})) & {w}'1U"
  return f"D0.u{w} = S0.u{w} {'<<' if op == 'shl.b' else '>>'} ({n})"


def _mul(g: dict) -> str:
  op = g["op"]
  if op == "mull.u":  # the low halves' full 32-bit product (Mesa builds imul from mull.u + madsh.m16)
    return "D0.u32 = 32'U(S0.u32[15 : 0]) * 32'U(S1.u32[15 : 0])"
  t, k = ("u24", "U") if op == "mul.u24" else ("i24", "I")
  return f"D0.b32 = (64'{k}(S0.{t}) * 64'{k}(S1.{t}))[31 : 0]"


def _bits(g: dict) -> str:
  w, op, msb = _w(g), g["op"], _w(g) - 1
  if op == "bfrev.b":
    return f"D0.b{w} = S0.b{w}[0 : {msb}]"
  if op == "cbits.b":
    return f"n = {w}'0U;\nfor i in 0 : {msb} do\n  n += {w}'U(S0.b{w}[i])\nendfor;\nD0.u{w} = n"
  inv = f"if x[{msb}] then\n  x = ~x\nendif;\n" if op == "clz.s" else ""
  return (f"x = S0.b{w};\n{inv}n = {w}'0U;\nfor i in 0 : {msb} do\n  if x[{msb} - i] then\n    break\n  endif;\n"
          f"  n += {w}'1U\nendfor;\nD0.u{w} = n == {w}'{w}U ? {_one(w)} : n")


# ------------------------------------------------------------------------------------------------ cat3
def _mad(g: dict) -> str:
  op = g["op"]
  if op in ("mad.f32", "mad.f16"):
    w = int(op[-2:])
    gg = dict(g, prec="h" if w == 16 else None)
    return _fstore(gg, [f"p = S0.f{w} * S1.f{w}", f"r = p + S2.f{w}"])
  if op in ("mad.u16", "mad.s16"):
    return "D0.u16 = S0.u16 * S1.u16 + S2.u16"
  if op in ("madsh.u16", "madsh.m16"):
    return "D0.u32 = ((32'U(S0.u32[15 : 0]) * 32'U(S1.u32[31 : 16])) << 16U) + S2.u32"
  t, k = ("u24", "U") if op == "mad.u24" else ("i24", "I")
  return f"D0.b32 = (64'{k}(S0.{t}) * 64'{k}(S1.{t}))[31 : 0] + S2.b32"


def _sel(g: dict) -> str:
  op = g["op"]
  w, t = int(op[-2:]), op[4]
  c = {"b": f"S1.b{w} != {w}'0U", "s": f"S1.i{w} >= {w}'0", "f": f"S1.f{w} >= {w}'F(0.0)"}[t]
  return f"D0.b{w} = {c} ? S0.b{w} : S2.b{w}"


def _sad(g: dict) -> str:
  w = int(g["op"][-2:])
  return f"D0.u{w} = S0.u{w} + S1.u{w} + S2.u{w}"


_ALT = {"shrm": "(b >> a) & c", "shlm": "(b << a) & c", "shrg": "(b >> a) | c", "shlg": "(b << a) | c",
        "andg": "(b & a) | c"}


def _alt(g: dict) -> str:
  w, op = _w(g), g["op"]
  a = f"(S0.u{w} & {w}'{w - 1}U)" if op != "andg" else f"S0.u{w}"
  e = re.sub(r"\b([abc])\b", lambda m: {"a": a, "b": f"S1.u{w}", "c": f"S2.u{w}"}[m[1]], _ALT[op])
  return f"D0.u{w} = {e}"


def _dp(g: dict) -> str:
  n = 4 if g["op"] == "dp4acc" else 2
  k = "i" if g["sign"] == "mixed" else "u"
  base = 2 if g.get("pack") == "high" else 0
  return (f"d = S2.b32;\nfor i in 0 : {n - 1} do\n  j = i + {base};\n"
          f"  d = d + 32'B(32'I(S0.b32[j * 8 + 7 : j * 8].{k}8) * 32'I(S1.b32[j * 8 + 7 : j * 8].u8))\nendfor;\n"
          "D0.b32 = d")


# ------------------------------------------------------------------------------------------------ cat4
_SFU = {"rcp": "approx_rcp(x)", "rsq": "approx_rsqrt(x)", "hrsq": "approx_rsqrt(x)", "log2": "approx_lg2(x)",
        "hlog2": "approx_lg2(x)", "exp2": "approx_ex2(x)", "hexp2": "approx_ex2(x)", "sin": "approx_sin(x)",
        "cos": "approx_cos(x)", "sqrt": "sqrt(x)"}


def _sfu(g: dict) -> str:
  w = _w(g)
  return _fstore(g, [f"x = S0.f{w}", f"r = {_SFU[g['op']]}"])


# ------------------------------------------------------------------------------------------------ cat1
TYPES = ("f16", "f32", "u16", "u32", "s16", "s32")  # #type 0..5 (u8/u8_32 not modelled)
_PV = {t: ("i" if t[0] == "s" else t[0]) + t[1:] for t in TYPES}


def _cov(g: dict) -> str:
  st, dt = g["t"][:3], g["t"][3:]
  ws, wd = int(st[1:]), int(dt[1:])
  x, m = f"S0.{_PV[st]}", ROUND[g.get("rnd")]
  if st == dt:
    return f"D0.b{wd} = S0.b{ws}"
  if st[0] == "f" and dt[0] == "f":  # widening is exact; narrowing rounds by ROUND
    r = f"32'F({x})" if wd > ws else f"round_{m}_f16({x})"
    return f"r = {r};\nD0.f{wd} = isNAN(r) ? {CANON[wd]} : r"
  if dt[0] == "f":  # integer -> float, rounded by ROUND
    return f"D0.f{wd} = round_{m}_f{wd}({x})"
  if st[0] == "f":  # float -> integer: rounded to an integral value by ROUND, saturated, NaN -> 0
    lo, hi = (0, (1 << wd) - 1) if dt[0] == "u" else (-(1 << (wd - 1)), (1 << (wd - 1)) - 1)
    k = "U" if dt[0] == "u" else "I"
    u = "U" if k == "U" else ""
    return (f"r = 64'F({_RINT[m].format(x)});\nD0.{_PV[dt]} = isNAN(r) ? {wd}'0{u} : "
            f"r >= {float(hi)} ? {wd}'{hi}{u} : r <= {float(lo)} ? {wd}'{lo}{u} : {wd}'{k}(r)")
  if wd <= ws:  # integer narrowing keeps the low bits
    return f"D0.b{wd} = S0.b{ws}[{wd - 1} : 0]"
  return f"D0.b{wd} = {wd}'B({wd}'{'I' if st[0] == 's' else 'U'}({x}))"  # widening extends by the source's sign


# ------------------------------------------------------------------------------------------------ cat6 memory
BYTES = {"u8": 1, "s8": 1, "f16": 2, "u16": 2, "s16": 2, "f32": 4, "u32": 4, "s32": 4}
MEM_TYPES = "f16|f32|u16|u32|s16|s32|u8"  # #type of cat6 (u8 and u8_32: a byte, zero-extended)
LDCK_SIZES = "1|2|3|4|5|6|7|8"  # ldc.k vec4 counts with a data row (ldc.k.N; larger ones: the LDCK event)


def _load(g: dict) -> str:
  """N consecutive components of the access type from ADDR into D0..D(N-1) (consecutive registers of the
  destination); 8-bit loads extend to 32 bits, 16-bit ones fill the (half) register."""
  t, n = g["t"], int(g["n"])
  b = BYTES[t]
  out = []
  for i in range(n):
    a = "MEM[ADDR]" if i == 0 else f"MEM[ADDR + {i * b}ULL]"
    out.append(f"D{i}.b32 = 32'{'I' if t[0] == 's' else 'U'}({a}.{'i8' if t == 's8' else 'u8'})" if b == 1 else
               f"D{i}.b{8 * b} = {a}.b{8 * b}")
  return ";\n".join(out)


def _const_load(g: dict) -> str:
  """ldc.k's data: N vec4 (4N dwords) from ADDR into D0..D(4N-1), the const dwords the binding names (ldc.k <doc>)."""
  n = 4 * int(g["n"])
  return ";\n".join(f"D{i}.b32 = {'MEM[ADDR]' if i == 0 else f'MEM[ADDR + {4 * i}ULL]'}.b32" for i in range(n))


def _resinfo(g: dict) -> str:
  """The bound IBO's size in elements of the access type: S1:S0 its size in bytes (the high and low dwords of a
  descriptor field the launch binds, 0 when nothing is bound), divided by the type's bytes (1, 2 or 4)."""
  return f"D0.u32 = 32'U((64'U(S1.u32) << 32U | 64'U(S0.u32)) >> {BYTES[g['t']].bit_length() - 1}U)"


def _store(g: dict) -> str:
  t, n = g["t"], int(g["n"])
  b = BYTES[t]
  return ";\n".join(f"{'MEM[ADDR]' if i == 0 else f'MEM[ADDR + {i * b}ULL]'}.b{8 * b} = S{i}.b{8 * b}"
                     for i in range(n))


_AOP = {"add": "old + b", "sub": "old - b", "xchg": "b", "and": "old & b", "or": "old | b", "xor": "old ^ b",
        "inc": "old >= b ? 0U : old + 1U", "dec": "old == 0U || old > b ? b : old - 1U",
        "min": "old < b ? old : b", "max": "old > b ? old : b"}


def _atomic(g: dict) -> str:
  """Read-modify-write of the 32-bit word at ADDR: D0 gets the old value; S0 is the data (cmpxchg: S0 the compare
  value, S1 the new one)."""
  a, t = g["op"].rsplit(".", 1)[1], {"u32": "u32", "s32": "i32"}[g["t"]]
  new = "old == S0.b32 ? S1.b32 : old" if a == "cmpxchg" else \
      _AOP[a].replace("b", f"S0.{t}").replace("0U", "32'0U" if t == "u32" else "32'0").replace(
          "1U", "32'1U" if t == "u32" else "32'1")
  return f"old = MEM[ADDR].{t};\nMEM[ADDR].{t} = {new};\nD0.{t} = old"


# ------------------------------------------------------------------------------------------------ control
# The executor implements these calls (emu/ir3/events.py); each names what the hardware does, per the isaspec <doc>s
# and ir3-notes.rst. Fibers are the threads of a wave; "active" fibers are the ones executing the instruction.
EVENTS: dict[str, str] = {
  "END": "END(): the fiber ends (end; kill for the fibers its predicate selects)",
  "CALL": "CALL(TARGET): push the fiber's next PC on its return stack and jump to TARGET (call)",
  "RET": "RET(): pop the fiber's return stack into its PC (ret)",
  "BARRIER": "BARRIER(): wait until every live fiber of the workgroup arrives (bar)",
  "GETONE": "GETONE(TARGET): one active fiber (the lowest) falls through, the others jump to TARGET (getone)",
  "GETLAST": "GETLAST(TARGET, CLUSTER): the active fibers of the first cluster with any, except its last active one, "
             "jump; fibers of later clusters fall through; clusters behave as 8 fibers wide (getlast <doc>)",
  "SHPS": "SHPS(TARGET): shader prologue start: jump to TARGET when the prologue already ran for this dispatch "
          "(the launch runs it once, in one wave, and starts the others at TARGET: here no fiber jumps)",
  "SHPE": "SHPE(): shader prologue end",
  "PREDT": "PREDT(): predicated execution: fibers whose p0.x is 0 become disabled until prede (predt <doc>)",
  "PREDF": "PREDF(): predicated execution: fibers whose p0.x is set become disabled until prede (predt <doc>)",
  "PREDE": "PREDE(): end of predicated execution: every fiber enabled again",
  "BRANY": "BRANY(TARGET, p): every active fiber jumps when p is set in any of them (bany)",
  "BRALL": "BRALL(TARGET, p): every active fiber jumps when p is set in all of them (ball)",
  "MOVMSK": "MOVMSK(W): D0.. = the mask of active fibers, W bits (movmsk.wW)",
  "BRCST": "BRCST(CLUSTER): in each cluster, the upper half gets S0 of the highest active fiber of the lower half; "
           "D0 unchanged where none is active (brcst.active <doc>)",
  "STC": "STC(N): N consecutive registers from S0 into the const file at DST (stc)",
  "SHFL": "SHFL(MODE): D0 = S0 of fiber lane^S1 / lane-S1 / lane+S1 / (lane+S1) mod W / (lane-S1) mod W (shfl)",
  "LDCK": "LDCK(N): N vec4 of UBO S1 at byte offset S0 into the const file at a1.x (ldc.k)",
  "NOP": "NOP(): no architectural effect (nop, (nopN)/(rptN) timing, fence/lock/unlock/cache maintenance, sleep)",
}


def _event(call: str) -> Callable[[dict], str]:
  return lambda g: call


# ------------------------------------------------------------------------------------------------ the table
C0, C1, C2, C3, C4, C6, C7 = (f"{ISA}/ir3-cat{n}.xml" for n in (0, 1, 2, 3, 4, 6, 7))
_PREC = "[prec=h]"
_CONDS = "cond=lt|le|gt|ge|eq|ne"
_NAN = "default NaN out"
_SAD = ("src1 + src2 + src3, wrapping: the XML documents no meaning, and Mesa's compiler emits nir_op_iadd3 (a 3-way "
        "add) as sad.s32/sad.s16 (ir3_compiler_nir.c emit_alu); the Mesa divergence/intmix kernels agree only so")
_COV = "|".join(f"{s}{d}" for s in TYPES for d in TYPES if s != d)
_MOV = "|".join(f"{s}{s}" for s in TYPES)

ROWS: tuple[Row, ...] = (
  # cat2: 2-src ALU (#instruction-cat2: FULL selects full/half sources, SAT is (sat))
  Row(f"add.f {_PREC} [sat]", _farith, f"{C2} add.f (#instruction-cat2-2src)", "IEEE, RNE, denormals kept; " + _NAN),
  Row(f"mul.f {_PREC} [sat]", _farith, f"{C2} mul.f", "IEEE, RNE, denormals kept; " + _NAN),
  Row(f"min.f {_PREC} [sat]", _fminmax, f"{C2} min.f", "IEEE minNum: a NaN operand is ignored; -0 < +0"),
  Row(f"max.f {_PREC} [sat]", _fminmax, f"{C2} max.f", "IEEE maxNum: a NaN operand is ignored; -0 < +0"),
  Row(f"sign.f {_PREC} [sat]", _fsign, f"{C2} sign.f (#instruction-cat2-1src)",
      "+-1.0 by sign; zeros kept; NaN -> +0.0 (NIR fsign, which Mesa lowers to sign.f)"),
  Row(f"absneg.f {_PREC}", _copy, f"{C2} absneg.f",
      "a copy: its (neg)/(abs) are the #absneg source modifiers, applied by the binding"),
  Row(f"cmps.f {_CONDS} {_PREC}", _cmp, f"{C2} cmps.f (#instruction-cat2-2src-cond, #cond in ir3-common.xml)",
      "1 when true, else 0; ordered lt/le/gt/ge/eq (false on NaN), ne unordered (true on NaN) as NIR's flt/fneu"),
  Row(f"cmpv.f {_CONDS} {_PREC}", _cmp, f"{C2} cmpv.f (#instruction-cat2-2src-cond)",
      "all ones when true (a mask, like other ISAs' vector compares); unverified"),
  Row(f"floor.f {_PREC} [sat]", _fround, f"{C2} floor.f"),
  Row(f"ceil.f {_PREC} [sat]", _fround, f"{C2} ceil.f"),
  Row(f"rndne.f {_PREC} [sat]", _fround, f"{C2} rndne.f", "round to nearest, ties to even"),
  Row(f"rndaz.f {_PREC} [sat]", _fround, f"{C2} rndaz.f", "round to nearest, ties away from zero"),
  Row(f"trunc.f {_PREC} [sat]", _fround, f"{C2} trunc.f"),
  Row(f"add.u {_PREC} [sat]", _iarith, f"{C2} add.u", "wraps; (sat) clamps to [0, max]"),
  Row(f"add.s {_PREC} [sat]", _iarith, f"{C2} add.s", "wraps; (sat) clamps to [min, max]"),
  Row(f"sub.u {_PREC} [sat]", _iarith, f"{C2} sub.u", "wraps; (sat) clamps at 0"),
  Row(f"sub.s {_PREC} [sat]", _iarith, f"{C2} sub.s", "wraps; (sat) clamps to [min, max]"),
  Row(f"cmps.u {_CONDS} {_PREC}", _cmp, f"{C2} cmps.u", "1 when true, else 0"),
  Row(f"cmps.s {_CONDS} {_PREC}", _cmp, f"{C2} cmps.s", "1 when true, else 0"),
  Row(f"cmpv.u {_CONDS} {_PREC}", _cmp, f"{C2} cmpv.u", "all ones when true; unverified"),
  Row(f"cmpv.s {_CONDS} {_PREC}", _cmp, f"{C2} cmpv.s", "all ones when true; unverified"),
  Row(f"min.u {_PREC}", _iminmax, f"{C2} min.u"),
  Row(f"min.s {_PREC}", _iminmax, f"{C2} min.s"),
  Row(f"max.u {_PREC}", _iminmax, f"{C2} max.u"),
  Row(f"max.s {_PREC}", _iminmax, f"{C2} max.s"),
  Row(f"absneg.s {_PREC}", _copy, f"{C2} absneg.s", "a copy: (neg)/(abs) are source modifiers (binding)"),
  Row(f"and.b {_PREC}", _logic, f"{C2} and.b"),
  Row(f"or.b {_PREC}", _logic, f"{C2} or.b"),
  Row(f"not.b {_PREC}", _logic, f"{C2} not.b"),
  Row(f"xor.b {_PREC}", _logic, f"{C2} xor.b"),
  Row("mul.u24", _mul, f"{C2} mul.u24", "low 32 bits of the product of the low 24 bits"),
  Row("mul.s24", _mul, f"{C2} mul.s24", "low 32 bits of the product of the sign-extended low 24 bits"),
  Row("mull.u", _mul, f"{C2} mull.u", "the 32-bit product of the low 16 bits (Mesa's imul: mull.u + madsh.m16)"),
  Row(f"bfrev.b {_PREC}", _bits, f"{C2} bfrev.b"),
  Row(f"clz.b {_PREC}", _bits, f"{C2} clz.b", "leading zeros; 0 -> -1 (Mesa's ufind_msb = 31 - clz.b relies on it)"),
  Row(f"clz.s {_PREC}", _bits, f"{C2} clz.s", "leading bits equal to the sign bit; 0 and -1 -> -1 (ifind_msb)"),
  Row(f"shl.b {_PREC}", _shift, f"{C2} shl.b", "the shift count is taken modulo the width (NIR ishl)"),
  Row(f"shr.b {_PREC}", _shift, f"{C2} shr.b", "the shift count is taken modulo the width (NIR ushr)"),
  Row(f"ashr.b {_PREC}", _shift, f"{C2} ashr.b", "the shift count is taken modulo the width (NIR ishr)"),
  Row(f"getbit.b {_PREC}", _shift, f"{C2} getbit.b", "bit (src2 mod width) of src1"),
  Row(f"cbits.b {_PREC}", _bits, f"{C2} cbits.b", "population count"),
  # cat3: 3-src ALU (precision in the opcode; #instruction-cat3)
  Row("mad.f32 [sat]", _mad, f"{C3} mad.f32 (#instruction-cat3, FULL=1)",
      "src1*src2 rounded, then + src3 rounded (not fused); " + _NAN),
  Row("mad.f16 [sat]", _mad, f"{C3} mad.f16 (FULL=0)", "as mad.f32 in binary16"),
  Row("mad.u16", _mad, f"{C3} mad.u16 (FULL=0)", "16-bit wrap"),
  Row("mad.s16", _mad, f"{C3} mad.s16 (FULL=0)", "16-bit wrap (same bits as mad.u16)"),
  Row("madsh.u16", _mad, f"{C3} madsh.u16 (FULL=1)", "(lo16(src1) * hi16(src2) << 16) + src3"),
  Row("madsh.m16", _mad, f"{C3} madsh.m16 (FULL=1)", "as madsh.u16 (the low 16 product bits do not depend on sign)"),
  Row("mad.u24", _mad, f"{C3} mad.u24", "32-bit wrap"),
  Row("mad.s24", _mad, f"{C3} mad.s24", "32-bit wrap"),
  Row("sel.b16", _sel, f"{C3} sel.b16", "src2 != 0 ? src1 : src3"),
  Row("sel.b32", _sel, f"{C3} sel.b32", "src2 != 0 ? src1 : src3"),
  Row("sel.s16", _sel, f"{C3} sel.s16", "src2 >= 0 ? src1 : src3 (signed)"),
  Row("sel.s32", _sel, f"{C3} sel.s32", "src2 >= 0 ? src1 : src3 (signed)"),
  Row("sel.f16", _sel, f"{C3} sel.f16", "src2 >= 0.0 ? src1 : src3 (NaN picks src3; -0.0 picks src1)"),
  Row("sel.f32", _sel, f"{C3} sel.f32", "src2 >= 0.0 ? src1 : src3 (NaN picks src3; -0.0 picks src1)"),
  Row("sad.s16", _sad, f"{C3} sad.s16", _SAD),
  Row("sad.s32", _sad, f"{C3} sad.s32", _SAD),
  Row(f"shrm {_PREC}", _alt, f"{C3} shrm <doc>: (src2 >> src1) & src3", "shift count modulo the width"),
  Row(f"shlm {_PREC}", _alt, f"{C3} shlm <doc>: (src2 << src1) & src3", "shift count modulo the width"),
  Row(f"shrg {_PREC}", _alt, f"{C3} shrg <doc>: (src2 >> src1) | src3", "shift count modulo the width"),
  Row(f"shlg {_PREC}", _alt, f"{C3} shlg <doc>: (src2 << src1) | src3", "shift count modulo the width"),
  Row(f"andg {_PREC}", _alt, f"{C3} andg <doc>: (src2 & src1) | src3"),
  Row("dp2acc sign=unsigned|mixed pack=low|high", _dp,
      f"{C3} dp2acc <doc>: DST = dot(SRC1 i8/u8vec2, SRC2 u8vec2) + SRC3, vec2 from the low or high half",
      "32-bit wrap"),
  Row("dp4acc sign=unsigned|mixed", _dp, f"{C3} dp4acc <doc>: as dp2acc for vec4 (OpUDotKHR/OpSUDotKHR)",
      "32-bit wrap"),
  # cat4: SFU
  *(Row(f"{op} {_PREC} [sat]", _sfu, f"{C4} {op} (#instruction-cat4)",
        "exact value rounded once (f64-evaluated); no accuracy is documented") for op in _SFU),
  # cat1: mov/cov
  Row(f"mov t={_MOV}", _cov, f"{C1} mov-* (#instruction-cat1-mov, SRC_TYPE == DST_TYPE)", "a copy of the bits"),
  Row(f"cov t={_COV} [rnd=even|pos_infinity|neg_infinity]", _cov,
      f"{C1} cov (SRC_TYPE != DST_TYPE; #type, #round)",
      "ROUND 0 rounds toward zero (Mesa's ROUND_ZERO); float -> int saturates, NaN -> 0; int narrowing keeps the "
      "low bits, widening extends by the source's sign; " + _NAN),
  # cat0: flow control (the branch's condition, p0.c with INV, is the binding's guard; see emu/ir3/decode.py)
  Row("br", lambda g: "PC.b64 = TARGET.b64", f"{C0} br (#instruction-cat0-branch-1src: INV1, COMP1: the p0 source)"),
  Row("jump", lambda g: "PC.b64 = TARGET.b64", f"{C0} jump (#instruction-cat0-immed)"),
  Row("brao", lambda g: "PC.b64 = S0.u32 != 0U || S1.u32 != 0U ? TARGET.b64 : NEXT.b64",
      f"{C0} brao (#instruction-cat0-branch-2src: either source condition)", "INV1/INV2 invert the p0 sources"),
  Row("braa", lambda g: "PC.b64 = S0.u32 != 0U && S1.u32 != 0U ? TARGET.b64 : NEXT.b64",
      f"{C0} braa (#instruction-cat0-branch-2src: both source conditions)", "INV1/INV2 invert the p0 sources"),
  Row("bany", _event("BRANY(TARGET, S0)"), f"{C0} bany (#instruction-cat0-branch-1src)"),
  Row("ball", _event("BRALL(TARGET, S0)"), f"{C0} ball (#instruction-cat0-branch-1src)"),
  Row("end", _event("END()"), f"{C0} end"),
  Row("kill", _event("END()"), f"{C0} kill (#instruction-cat0-1src: INV1, COMP1: the p0 source)",
      "in a compute shader the fibers whose predicate holds end (the binding's guard), as `end` does"),
  Row("call", _event("CALL(TARGET)"), f"{C0} call (#instruction-cat0-immed; Mesa names its targets fxnN)",
      "a return stack per fiber, 16 deep (the docs are silent)"),
  Row("ret", _event("RET()"), f"{C0} ret", "returns to the address its fiber's matching call pushed"),
  Row("getone", _event("GETONE(TARGET)"), f"{C0} getone (#instruction-cat0-immed)",
      "the fiber kept is the lowest active one (the docs do not say which)"),
  Row("getlast", _event("GETLAST(TARGET, CLUSTER)"), f"{C0} getlast <doc>"),
  Row("shps", _event("SHPS(TARGET)"), f"{C0} shps <doc>: SHader Prologue Start"),
  Row("shpe", _event("SHPE()"), f"{C0} shpe <doc>: SHader Prologue End"),
  Row("predt", _event("PREDT()"), f"{C0} predt <doc>"),
  Row("predf", _event("PREDF()"), f"{C0} predf (predt <doc>)"),
  Row("prede", _event("PREDE()"), f"{C0} prede (predt <doc>)"),
  Row("nop", _event("NOP()"), f"{C0} nop"),
  # cat1/cat5 cross-fiber moves
  Row("movmsk", _event("MOVMSK(W)"), f"{C1} movmsk (W: the mask width; (rptN) = W / 32 - 1 registers)"),
  Row("brcst.active", _event("BRCST(CLUSTER)"), f"{ISA}/ir3-cat5.xml brcst.active <doc>"),
  # cat6: memory (ADDR is the byte address the binding forms: global VA, IBO base + coord * size, shared or private
  # offset; consecutive components at consecutive addresses, consecutive registers)
  *(Row(f"{op} t={MEM_TYPES} n=1|2|3|4", _load, f"{C6} {op} ({doc})") for op, doc in (
      ("ldg", "g[SRC1+OFF]: global"), ("ldg.a", "g[SRC1+SRC2<<shift+OFF<<2]: global"),
      ("ldl", "l[SRC+OFF]: shared (local) memory, bytes"), ("ldlw", "l[SRC+OFF]: shared memory"),
      ("ldp", "p[SRC+OFF]: private memory"), ("ldib.b", "bindless IBO: coord counts elements of TYPE"),
      ("ldc", "UBO load into registers"))),
  *(Row(f"{op} t={MEM_TYPES} n=1|2|3|4", _store, f"{C6} {op} ({doc})") for op, doc in (
      ("stg", "g[SRC1+OFF] = SRC3"), ("stg.a", "g[SRC1+SRC2<<shift+OFF<<2] = SRC3"), ("stl", "l[DST+OFF] = SRC"),
      ("stlw", "l[DST+OFF] = SRC"), ("stp", "p[DST+OFF] = SRC"), ("stib.b", "bindless IBO store"))),
  *(Row(f"{sp}{a} t=u32|s32", _atomic, f"{C6} {sp}{a} ({where})", "32-bit; fibers on one address serialised in "
        "fiber order") for sp, where in (("atomic.", "l[SRC1]: shared memory"), ("atomic.g.", "global, a 64-bit "
        "address"), ("atomic.b.", "bindless IBO; the data registers follow the destination"))
    for a in ("add", "sub", "xchg", "inc", "dec", "cmpxchg", "min", "max", "and", "or", "xor")
    if not (sp == "atomic.b." and a in ("inc", "dec"))),
  Row("stc", _event("STC(N)"), f"{C6} stc: registers to the const file"),
  Row("shfl", _event("SHFL(MODE)"), f"{C6} shfl <doc>: xor/up/down/rup/rdown across the wave",
      "a source fiber outside the wave gives the fiber its own value (undefined in the docs)"),
  Row("ldc.k", _event("LDCK(N)"), f"{C6} ldc.k <doc>: UBO to the const file"),
  Row(f"ldc.k n={LDCK_SIZES}", _const_load, f"{C6} ldc.k <doc>: UBO to the const file",
      "its data movement (n vec4), where the binding knows the const destination c[a1.x]; else the LDCK event"),
  Row(f"resinfo.b t={MEM_TYPES}", _resinfo, f"{C6} resinfo.b (1d: the buffer's size in elements)",
      "S1:S0: the IBO's size in bytes as the launch bound it; 0 when nothing is bound (the docs are silent)"),
  Row("bar", _event("BARRIER()"), f"{C7} bar"),
  *(Row(op, _event("NOP()"), f"{C7} {op}", "memory ordering and caches: gputwin's memory is coherent")
    for op in ("fence", "lock", "unlock", "sleep", "icinv", "dccln", "dcinv", "dcflu", "ccinv")),
)

# cat1-4 leaves of the isaspec without a key of their own (a test checks this list against the decoder's tables)
BY_TYPE = ("mov-immed", "mov-const", "mov-gpr", "mov-relgpr", "mov-relconst", "swz", "gat", "sct")  # -> mov/cov keys
MISSING = {  # leaf -> why it has no body
  "bary.f": "fragment varying interpolation (graphics only)", "flat.b": "fragment varying fetch (graphics only)",
  "mgen.b": "no meaning documented (XML has no <doc>; not in ir3-notes.rst)", "shb": "no meaning documented",
  "msad": "no meaning documented", "setrm": "sets the float rounding mode state: not modelled (round to nearest even)",
  "wmm": "matrix multiply (wmm/wmm.accu): not modelled", "wmm.accu": "matrix multiply: not modelled",
}

# (neg)/(abs) meaning per key, for the binding: f = float sign bit, i = integer negate/abs, b = bitwise not
MODIFIER_KIND = {"f": "f", "u": "i", "s": "i", "m": "i", "b": "b"}


def _index() -> dict[str, tuple[Row, dict]]:
  """Every key of every row; the cat2/cat3/cat4 ones also with `.conv` (DST_CONV set, dp*acc excepted: bit 46 is
  their opcode)."""
  out: dict[str, tuple[Row, dict]] = {}
  for r in ROWS:
    for mods, groups in expand(r.pattern):
      k = ".".join((groups["op"],) + mods)
      out.setdefault(k, (r, groups))
      if r.cite.startswith((C2, C3, C4)) and groups["op"] not in ("dp2acc", "dp4acc"):
        out.setdefault(k + ".conv", (r, dict(groups, conv=True)))
  return out


_SIGNED = re.compile(r".*\.s(16|24|32)?|ashr\.b|clz\.b|cmpv\..*")  # results widened by sign extension


def _conv(g: dict) -> str:
  """DST_CONV (ir3-cat2/cat3/cat4.xml: "Destination register is opposite precision as source"): the result, computed
  at the source precision, converted to the other one: floats exactly (16 -> 32) or rounded to nearest even
  (32 -> 16), a NaN the default NaN; integers sign- (signed results, masks, clz's -1) or zero-extended, or cut to
  their low 16 bits."""
  op = g["op"]
  m = re.search(r"(16|32)$", op)
  w = int(m[1]) if m else _w(g)
  flt = (op.endswith(".f") and not op.startswith(("cmps", "cmpv"))) or op in _SFU or op.startswith(("mad.f", "sel.f"))
  if flt:
    src, dw = ("D0.f32", 16) if w == 32 else ("D0.f16", 32)
    return f"D0.f{dw} = isNAN({src}) ? {CANON[dw]} : {dw}'F({src})"
  if w == 32:
    return "D0.b16 = D0.b32[15 : 0]"
  return f"D0.b32 = 32'B(32'{'I' if _SIGNED.fullmatch(op) else 'U'}(D0.{'i' if _SIGNED.fullmatch(op) else 'u'}16))"


_INDEX = _index()


def keys() -> list[str]:
  """Every key the table produces, sorted."""
  return sorted(_INDEX)


def key(leaf: str, cond: str | None = None, half: bool = False, sat: bool = False, conv: bool = False) -> str:
  """The semantics key of an ir3 instruction: its leaf name, the #cond of cmps/cmpv, whether its sources are half
  precision (FULL=0; cat2/cat4/cat3-alt), (sat), and DST_CONV. Raises PcodeError when the table has none."""
  k = ".".join([leaf] + ([cond] if cond else []) + (["h"] if half else []) + (["sat"] if sat else []) +
               (["conv"] if conv else []))
  row(k)
  return k


def cov_key(src: str, dst: str, rnd: str = "") -> str:
  """The key of a cat1 move from its #type and #round displays: cov_key("f32", "f16", "(even)") == 'cov.f32f16.even';
  the same type twice is the plain copy 'mov.f32f32' (ROUND changes nothing there)."""
  r = rnd.strip("()")
  return key(f"mov.{src}{dst}") if src == dst else key(f"cov.{src}{dst}" + (f".{r}" if r else ""))


def inst_key(inst) -> str:
  """The key of a decoded instruction (`gputwin.isa.ir3.decode(...)`'s Inst: leaf name and resolved fields), the
  enum values read through the isaspec tables' #cond/#type/#round/#signedness/#8bitvec2pack displays. Raises
  PcodeError for a leaf or form without a body (`MISSING`, u8 types, (sat) where the table has none)."""
  from gputwin.isa.ir3.spec import spec
  e, f, n = spec().enums, inst.fields, inst.name
  if n in MISSING:
    raise PcodeError(f"no ir3 semantics for {n}: {MISSING[n]}", "ir3", n)
  if n in BY_TYPE:
    return cov_key(e["#type"][f["SRC_TYPE"]], e["#type"][f["DST_TYPE"]], e["#round"][f.get("ROUND", 0)])
  if n in ("dp2acc", "dp4acc"):
    mods = [e["#signedness"][f["SRC_SIGN"]]] + ([e["#8bitvec2pack"][f["SRC_PACK"]]] if n == "dp2acc" else [])
    return key(n + "".join(mods), sat=bool(f.get("SAT")))
  if n.startswith(("cmps.", "cmpv.")) and f["COND"] not in e["#cond"]:
    raise PcodeError(f"{n}: condition {f['COND']} is not one of #cond's", "ir3", n)
  cond = e["#cond"][f["COND"]] if n.startswith(("cmps.", "cmpv.")) else None
  half = not f.get("FULL", 1) and not re.search(r"\d$", n)  # cat3 names carry their precision (mad.f16, sel.b32)
  dst = f.get("DST")
  conv = bool(f.get("DST_CONV")) and getattr(dst, "value", dst) <= 0xf7  # #dest-half: p0.x/a0.x never converted
  return key(n, cond, half, bool(f.get("SAT")), conv)


def row(k: str) -> tuple[Row, dict]:
  r = _INDEX.get(k.lower())
  if r is None:
    raise PcodeError(f"no ir3 semantics for key {k!r}", "ir3", k)
  return r


def modifier(k: str) -> str | None:
  """How the binding applies a source's (neg)/(abs) for key k: 'f' (sign bit), 'i' (two's complement), 'b' ((neg) is a
  bitwise not), None (the instruction takes no modifiers: cat1, cat3-alt, dp*acc)."""
  op = row(k)[1]["op"]
  if op in ("mov", "cov", "dp2acc", "dp4acc") or op in _ALT:
    return None
  if op in _SFU or op.startswith(("mad.f", "sel.f")):
    return "f"
  return MODIFIER_KIND.get(op.split(".")[1][0]) if "." in op else None


def text(k: str) -> str:
  """The pcode of key k, its first line citing the isaspec bitset (and the choice made where the docs are silent)."""
  r, g = row(k)
  cite = r.cite + (f"; {r.note}" if r.note else "") + ("; DST_CONV: the result in the other precision" if g.get("conv")
                                                       else "")
  return f'"ir3 isaspec {cite}"\n' + r.build(g) + (";\n" + _conv(g) if g.get("conv") else "")
