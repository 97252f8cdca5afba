"""NVIDIA PTX instruction semantics, written once as pcode of ours (the language gputwin.pcode compiles for AMD).

One row per instruction family: a pattern over the canonical key, a builder that instantiates the pcode template for
the key's modifiers and types, and the PTX ISA 9.0 section it follows (/work/shared/vendor/ptx/isa-9.0/<opcode>.md).

    k = key("add", ("rn", "f32"))           # 'add.rn.f32'; modifiers that do not change the bits are dropped
    text(k)                                  # the pcode; semantics("ptx", k) compiles it like an AMD body
    keys()                                   # every key the table produces (coverage)

Operands (bound by the PTX frontend): destinations D0, D1, ... then sources S0, S1, ... in operand order, vectors
flattened; `[a]` is the byte address ADDR (u64); the carry flag is CC (0/1); `bra` reads TARGET and writes PC;
cross-lane bodies read EXEC, laneId and `VGPR[lane][SRC0]` (S0's row in the warp's register file). Every register is
a 32- or 64-bit slot: results narrower than 32 bits are written zero-extended to 32 (sub-word loads and cvt into s8/
s16 sign-extend, as the manual says); predicates are 0/1.

Numerics (PTX ISA 9.0 §9.7.3-9.7.4, "NaN payloads" notes): a float result that is NaN is the canonical NaN
(0x7fffffff f32, 0x7fffffffffffffff f64, 0x7fff f16/bf16); .ftz flushes denormal inputs and results to zero of the
same sign; .sat clamps to [+0.0, 1.0] with NaN -> +0.0; directed roundings (.rz .rm .rp) are exact (runtime.py
`add_rz` ... compute the exact value with Fractions and round once). `.approx`/`.full` instructions return the
correctly rounded (f64-evaluated, rounded once) value, which is within every bound the manual states.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Callable

from gputwin.errors import PcodeError

# ---------------------------------------------------------------------------------------------- modifiers
# Modifiers that never change the bits a lane computes (the frontend resolves state spaces into ADDR).
_DROP = re.compile(r"global|shared(::cta|::cluster)?|local|param(::entry|::func)?|const|generic|"
                   r"ca|cg|cs|lu|cv|nc|wb|wt|L1::.*|L2::.*|level::.*|volatile|relaxed|acquire|release|acq_rel|weak|mmio|"
                   r"cta|gpu|sys|cluster|aligned")
_SYNC_MARK = {"shfl", "vote", "match", "redux", "elect"}  # `.sync` is only the collective marker there
_TYPE = re.compile(r"(?:[usb](?:8|16|32|64)|f16|f32|f64|bf16|tf32|pred)(?:x2)?|[us]16x2|e4m3x2|e5m2x2")

# PTX type -> pcode view (s -> i, pred -> the 0/1 value in a 32-bit slot)
_PC = {f"{k}{w}": f"{'i' if k == 's' else k}{w}" for k in "usb" for w in (8, 16, 32, 64)}
_PC.update(f16="f16", f32="f32", f64="f64", bf16="bf16", pred="u32")
_W = {t: int(re.sub(r"\D", "", t) or 32) for t in _PC}
_W["pred"] = 32
CANON = {"f16": "16'F(0x7fff)", "bf16": "16'BF(0x7fff)", "f32": "32'F(0x7fffffff)", "f64": "64'F(0x7fffffffffffffff)"}
FMAX = {"f16": "65504.0", "bf16": "3.3895313892515355e38", "f32": "3.4028234663852886e38"}


def _ones(w: int) -> str:
  return f"{w}'0x{(1 << w) - 1:x}"


def _lit(v: int, t: str) -> str:
  """A constant of pcode type t (`64'-128`, `32'255U`)."""
  return f"{_W.get(t, int(t[1:]))}'{v}{'U' if t[0] in 'ub' else ''}" if v >= 0 else f"{int(t[1:])}'{v}"


def store(t: str, e: str, d: str = "D0") -> str:
  """`d = e` for a value of PTX type t: sub-32-bit values zero-extended into the 32-bit slot."""
  w = _W[t]
  if t == "pred":
    return f"{d}.u32 = 32'U({e})"
  if w < 32:
    return f"{d}.b32 = 32'B(({e}).b{w})"
  return f"{d}.{_PC[t]} = {e}"


# ---------------------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Row:
  pattern: str  # opcode and modifier slots, e.g. "add [rnd=rn|rz|rm|rp] [ftz] t=f32|f64" (see expand)
  build: Callable[[dict], str]  # groups -> pcode text
  cite: str  # the PTX ISA 9.0 section (vendor/ptx/isa-9.0/<opcode>.md)
  note: str = ""


def expand(pattern: str):
  """'add [rnd=rn|rz] t=f32|f64' -> (('add', ...), groups) for every combination. `x=a|b` is a required choice named
  x, `[x=a|b]` an optional one, `[ftz]` an optional flag (group ftz = 'ftz' or None), a bare word is fixed."""
  slots = []
  for part in pattern.split()[1:]:
    opt = part.startswith("[")
    part = part.strip("[]")
    name, _, alts = part.rpartition("=")
    name = name or (part if "|" not in part else "")
    choices = [(a, a) for a in alts.split("|")] + ([(None, None)] if opt else [])
    slots.append((name, choices))
  op = pattern.split()[0]
  for combo in itertools.product(*(c for _, c in slots)):
    groups, mods = {"op": op}, []
    for (name, _), (word, val) in zip(slots, combo):
      if name:
        groups[name] = val
      if word is not None:
        mods.extend(word.split("."))
    yield tuple(mods), groups


# -- integer ---------------------------------------------------------------------------------------------
_ARITH = {"add": "+", "sub": "-", "mul": "*"}


def _int_arith(g: dict) -> str:
  t, o = g["t"], _ARITH[g["op"]]
  p = _PC[t]
  if g.get("sat"):  # add.sat.s32: the exact sum clamped to the s32 range
    return (f"r = 64'I(S0.i32) {o} 64'I(S1.i32);\n"
            f"D0.i32 = r > 64'2147483647 ? 32'2147483647 : r < 64'-2147483648 ? 32'-2147483648 : 32'I(r)")
  return store(t, f"S0.{p} {o} S1.{p}")


def _carry(g: dict) -> str:
  """add.cc/addc/sub.cc/subc: the sum/difference with the carry (borrow) in and out through CC."""
  w = _W[g["t"]]
  cin = f" {'+' if g['op'].startswith('add') else '-'} {w + 1}'U(CC.u32[0])" if g["op"] in ("addc", "subc") else ""
  o = "+" if g["op"].startswith("add") else "-"
  out = [f"r = {w + 1}'U(S0.u{w}) {o} {w + 1}'U(S1.u{w}){cin}", f"D0.b{w} = r[{w - 1} : 0]"]
  if g.get("cc") or g["op"] in ("add", "sub"):  # carry out = bit w of the sum (borrow out = bit w of the difference)
    out.append(f"CC.u32 = 32'U(r[{w}])")
  return ";\n".join(out)


def _mul(g: dict) -> str:
  t, m = g["t"], g.get("mode") or "lo"
  w, p, k = _W[t], _PC[t], "I" if t[0] == "s" else "U"
  wide = f"{2 * w}'{k}(S0.{p}) * {2 * w}'{k}(S1.{p})"
  add = ""
  if g["op"] in ("mad", "madc"):
    add = f" + {'S2.' + p[0] + str(2 * w) if m == 'wide' else 'S2.' + p}"
  if m == "wide":
    return f"D0.{p[0]}{2 * w} = {wide}{add}"
  if m == "lo" and not (g.get("cc") or g["op"] == "madc"):
    return store(t, f"S0.{p} * S1.{p}{add}")
  part = f"({wide})[{w - 1} : 0]" if m == "lo" else f"({wide})[{2 * w - 1} : {w}]"
  if g.get("cc") or g["op"] == "madc":  # mad.cc / madc: the addition's carry through CC
    cin = f" + {w + 1}'U(CC.u32[0])" if g["op"] == "madc" else ""
    out = [f"r = {w + 1}'U({part}) + {w + 1}'U(S2.u{w}){cin}", f"D0.b{w} = r[{w - 1} : 0]"]
    return ";\n".join(out + ([f"CC.u32 = 32'U(r[{w}])"] if g.get("cc") else []))
  if g.get("sat"):  # mad.hi.sat.s32: the high half plus c, saturated
    return (f"r = 64'I(({wide})[63 : 32].i32) + 64'I(S2.i32);\n"
            f"D0.i32 = r > 64'2147483647 ? 32'2147483647 : r < 64'-2147483648 ? 32'-2147483648 : 32'I(r)")
  return store(t, f"{part}.{p}{add}")


def _mul24(g: dict) -> str:
  t = g["t"]
  x = "i24" if t[0] == "s" else "u24"
  k = "I" if t[0] == "s" else "U"
  part = "[31 : 0]" if g["mode"] == "lo" else "[47 : 16]"
  add = " + S2.b32" if g["op"] == "mad24" else ""
  return f"D0.b32 = (64'{k}(S0.{x}) * 64'{k}(S1.{x})){part}{add}"


def _divrem(g: dict) -> str:
  """Truncating division on magnitudes (the quotient negated when the signs differ; the remainder takes the dividend's
  sign). x / 0 gives all ones and x % 0 the dividend: the manual leaves both unspecified; these are the hardware's."""
  t = g["t"]
  w, p = _W[t], _PC[t]
  if t[0] == "u":
    return store(t, f"S1.{p} == 0 ? S0.{p} : S0.{p} % S1.{p}" if g["op"] == "rem" else
                 f"S1.{p} == 0 ? {_ones(w)}.{p} : S0.{p} / S1.{p}")
  u = f"u{w}"
  mag = (f"a = S0.{p};\nb = S1.{p};\nua = a < 0 ? {w}'U(-a) : {w}'U(a);\nub = b < 0 ? {w}'U(-b) : {w}'U(b);\n")
  if g["op"] == "rem":
    return mag + "r = ub == 0 ? ua : ua % ub;\n" + store(t, f"a < 0 ? -r.{p} : r.{p}")
  return mag + f"q = ub == 0 ? {_ones(w)}.{u} : ua / ub;\n" + \
    store(t, f"ub == 0 ? {_ones(w)}.{p} : (a < 0) != (b < 0) ? -q.{p} : q.{p}")


def _minmax_int(g: dict) -> str:
  t = g["t"]
  p, c = _PC[t], "<" if g["op"] == "min" else ">"
  r = f"S0.{p} {c} S1.{p} ? S0.{p} : S1.{p}"
  if g.get("relu"):
    return f"r = {r};\n" + store(t, f"r < 0 ? {_lit(0, p)} : r")
  return store(t, r)


def _unary_int(g: dict) -> str:
  t, op = g["t"], g["op"]
  p = _PC[t]
  if op == "abs":
    return store(t, f"S0.{p} < 0 ? -S0.{p} : S0.{p}")
  if op == "neg":
    return store(t, f"-S0.{p}")
  if op == "not":
    return store(t, "S0.u32 == 0U" if t == "pred" else f"~S0.{p}")
  return store(t, f"S0.{p} == 0 ? {_lit(1, p if t != 'pred' else 'u32')} : {_lit(0, p if t != 'pred' else 'u32')}")


def _logic(g: dict) -> str:
  t, o = g["t"], {"and": "&", "or": "|", "xor": "^"}[g["op"]]
  if t == "pred":
    return store(t, f"(S0.u32 != 0U) {o} (S1.u32 != 0U)")
  return store(t, f"S0.{_PC[t]} {o} S1.{_PC[t]}")


def _bits(g: dict) -> str:
  """popc / clz / bfind / brev, the manual's loops over bit positions."""
  t, op = g["t"], g["op"]
  w, msb = _W[t], _W[t] - 1
  if op == "popc":
    return f"n = 0U;\nfor i in 0 : {msb} do\n  n += 32'U(S0.b{w}[i])\nendfor;\nD0.u32 = n"
  if op == "clz":
    return f"n = 0U;\nfor i in 0 : {msb} do\n  if S0.b{w}[{msb} - i] then\n    break\n  endif;\n  n += 1U\nendfor;\nD0.u32 = n"
  if op == "brev":
    return f"D0.b{w} = S0.b{w}[0 : {msb}]"
  neg = f"x = S0.b{w};\nif S0.b{w}[{msb}] then\n  x = ~x\nendif;\n" if t[0] == "s" else f"x = S0.b{w};\n"
  shift = f"if n != 0xffffffffU then\n  n = {msb}U - n\nendif;\n" if g.get("shiftamt") else ""
  return (neg + f"n = 0xffffffffU;\nfor i in 0 : {msb} do\n  if x[{msb} - i] then\n    n = 32'U({msb} - i);\n"
          f"    break\n  endif\nendfor;\n{shift}D0.u32 = n")


def _bfe(g: dict) -> str:
  t = g["t"]
  w, msb = _W[t], _W[t] - 1
  sb = "false" if t[0] == "u" else f"len != 0U && S0.b{w}[pos + len - 1U > {msb}U ? {msb}U : pos + len - 1U]"
  return (f"pos = S1.u32 & 255U;\nlen = S2.u32 & 255U;\nsbit = {sb};\nd = {w}'0U;\nfor i in 0 : {msb} do\n"
          f"  d[i] = i < len && pos + i <= {msb}U ? S0.b{w}[pos + i] : sbit\nendfor;\nD0.b{w} = d")


def _bfi(g: dict) -> str:
  w, msb = _W[g["t"]], _W[g["t"]] - 1
  return (f"pos = S2.u32 & 255U;\nlen = S3.u32 & 255U;\nf = S1.b{w};\nfor i in 0 : {msb} do\n"
          f"  if i < len && pos + i <= {msb}U then\n    f[pos + i] = S0.b{w}[i]\n  endif\nendfor;\nD0.b{w} = f")


# byte i's selector in each prmt mode (c = S2[1:0]); the generic form reads S2[4i+3 : 4i]
_PRMT = {"f4e": "(c + i) & 7U", "b4e": "(c - i) & 7U", "rc8": "c", "ecl": "c > i ? c : 32'U(i)",
         "ecr": "c < i ? c : 32'U(i)", "rc16": "(32'U(i) & 1U) | ((c & 1U) << 1U)"}


def _prmt(g: dict) -> str:
  m = g.get("mode")
  src = "x = { S1.b32, S0.b32 };\n"
  if m is None:
    body = ("  s = S2.u32[i * 4 + 3 : i * 4];\n  v = x[s[2 : 0] * 8U +: 8];\n"
            "  d[i * 8 + 7 : i * 8] = s[3] ? (v[7] ? 8'0xff : 8'0x0) : v")
    return src + f"d = 32'0U;\nfor i in 0 : 3 do\n{body}\nendfor;\nD0.b32 = d"
  return (src + f"c = S2.u32 & 3U;\nd = 32'0U;\nfor i in 0 : 3 do\n  s = {_PRMT[m]};\n"
          f"  d[i * 8 + 7 : i * 8] = x[s * 8U +: 8]\nendfor;\nD0.b32 = d")


def _shf(g: dict) -> str:
  n = "S2.u32 > 32U ? 32U : S2.u32" if g["mode"] == "clamp" else "S2.u32 & 31U"
  x = "{ S1.b32, S0.b32 }"
  return f"n = {n};\nx = {x};\n" + ("D0.b32 = (x << n)[63 : 32]" if g["dir"] == "l" else "D0.b32 = (x >> n)[31 : 0]")


def _shift(g: dict) -> str:
  t = g["t"]
  p = _PC[t]
  return store(t, f"S0.{p} {'<<' if g['op'] == 'shl' else '>>'} S1.u32")


def _lop3(g: dict) -> str:
  # F(a, b, c) = OR over the minterms i whose bit is set in immLut; minterm i takes a when bit 2 of i is set (the
  # manual's ta = 0xF0, tb = 0xCC, tc = 0xAA encoding)
  return ("d = 32'0U;\nfor i in 0 : 7 do\n  if S3.u32[i] then\n"
          "    d = d | ((i & 4) != 0 ? S0.b32 : ~S0.b32) & ((i & 2) != 0 ? S1.b32 : ~S1.b32) & "
          "((i & 1) != 0 ? S2.b32 : ~S2.b32)\n  endif\nendfor;\nD0.b32 = d")


def _dp(g: dict) -> str:
  ka, kb = ("i" if g["ta"][0] == "s" else "u"), ("i" if g["tb"][0] == "s" else "u")
  if g["op"] == "dp4a":
    return (f"d = S2.b32;\nfor i in 0 : 3 do\n  d = d + 32'B(32'I(S0.b32[i * 8 + 7 : i * 8].{ka}8) * "
            f"32'I(S1.b32[i * 8 + 7 : i * 8].{kb}8))\nendfor;\nD0.b32 = d")
    # (products of two bytes fit 32 bits; the sum wraps like the hardware's 32-bit accumulator)
  sel = 0 if g["mode"] == "lo" else 2
  return (f"d = S2.b32;\nfor i in 0 : 1 do\n  d = d + 32'B(32'I(S0.b32[i * 16 + 15 : i * 16].{ka}16) * "
          f"32'I(S1.b32[(i + {sel}) * 8 + 7 : (i + {sel}) * 8].{kb}8))\nendfor;\nD0.b32 = d")


def _sad(g: dict) -> str:
  t = g["t"]
  p = _PC[t]
  return store(t, f"S2.{p} + (S0.{p} < S1.{p} ? S1.{p} - S0.{p} : S0.{p} - S1.{p})")


# -- comparisons -----------------------------------------------------------------------------------------
_ICMP = {"eq": "a == b", "ne": "a != b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
         "lo": "a < b", "ls": "a <= b", "hi": "a > b", "hs": "a >= b"}
_FCMP = {"eq": "a == b", "ne": "a <> b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
         "equ": "!(a <> b)", "neu": "a != b", "ltu": "!(a >= b)", "leu": "!(a > b)", "gtu": "!(a <= b)",
         "geu": "!(a < b)", "num": "!isNAN(a) && !isNAN(b)", "nan": "isNAN(a) || isNAN(b)"}
_BOP = {"and": "&&", "or": "||", "xor": "^"}


def _cmp_expr(cmp: str, t: str, a: str, b: str) -> str:
  fl = t in ("f16", "f32", "f64", "bf16")
  e = (_FCMP if fl else _ICMP)[cmp]
  return "(" + re.sub(r"\b[ab]\b", lambda m: a if m[0] == "a" else b, e) + ")"


def _operand(t: str, x: str, ftz: bool, half: int | None = None) -> str:
  """Source x viewed as type t (element `half` of a packed x2 register), flushed when ftz."""
  e = f"{x}.b32[{16 * half + 15} : {16 * half}].{_PC[t]}" if half is not None else f"{x}.{_PC[t]}"
  return f"ftz({e})" if ftz else e


def _cmp_type(cmp: str, t: str) -> str:
  """lo/ls/hi/hs compare as unsigned whatever the integer type."""
  return "u" + t[1:] if cmp in ("lo", "ls", "hi", "hs") and t[0] in "usb" else t


def _setp(g: dict) -> str:
  t = _cmp_type(g["cmp"], g["t"])
  a, b = _operand(t, "S0", bool(g.get("ftz"))), _operand(t, "S1", bool(g.get("ftz")))
  c = _cmp_expr(g["cmp"], t, a, b)
  if g.get("bop"):
    o = _BOP[g["bop"]]
    return f"c = {c};\nD0.u32 = 32'U(c {o} S2.u32 != 0U);\nD1.u32 = 32'U(!c {o} S2.u32 != 0U)"
  return f"c = {c};\nD0.u32 = 32'U(c);\nD1.u32 = 32'U(!c)"


def _setp_x2(g: dict) -> str:
  """setp on f16x2/bf16x2: p from the lower elements, q from the upper ones (each combined with c)."""
  t, ftz = g["t"][:-2], bool(g.get("ftz"))
  o = f" {_BOP[g['bop']]} S2.u32 != 0U" if g.get("bop") else ""
  c = [_cmp_expr(g["cmp"], t, _operand(t, "S0", ftz, h), _operand(t, "S1", ftz, h)) for h in (0, 1)]
  return f"D0.u32 = 32'U({c[0]}{o});\nD1.u32 = 32'U({c[1]}{o})"


def _szext(g: dict) -> str:
  """szext: the low b bits of a, sign- (.s32) or zero-extended; .clamp: b >= 32 keeps a whole, .wrap: b mod 32."""
  big = "S1.u32 >= 32U" if g["mode"] == "clamp" else "false"
  sb = "false" if g["t"] == "u32" else "b1 != 0U && !big && S0.b32[(b1 - 1U) & 31U]"
  return (f"b1 = S1.u32 & 31U;\nbig = {big};\nmask = big ? 32'0U : 32'0xffffffff << b1;\nsb = {sb};\n"
          "D0.b32 = (S0.b32 & ~mask) | (sb ? mask : 32'0U)")


def _bmsk(g: dict) -> str:
  """bmsk: b one-bits starting at bit a; .clamp: a or b >= 32 saturate, .wrap: both taken mod 32."""
  clamp = g["mode"] == "clamp"
  zero = "S0.u32 >= 32U ? 32'0U : "
  return ("a1 = S0.u32 & 31U;\nb1 = S1.u32 & 31U;\nsum = a1 + b1;\n"
          f"mask0 = {zero if clamp else ''}32'0xffffffff << a1;\n"
          f"over = sum >= 32U{' || S0.u32 >= 32U || S1.u32 >= 32U' if clamp else ''};\n"
          "mask1 = over ? 32'0U : b1 == 0U ? 32'0xffffffff : 32'0xffffffff << sum;\nD0.b32 = mask0 & ~mask1")


def _set(g: dict) -> str:
  dt, st = g["dt"], g["st"]
  ftz = bool(g.get("ftz"))
  comb = lambda c: f"({c} {_BOP[g['bop']]} S2.u32 != 0U)" if g.get("bop") else c  # noqa: E731
  if st.endswith("x2"):  # per 16-bit element: all ones / 1.0 in that element's format
    e = st[:-2]
    one = "16'0xffff" if dt in ("u32", "s32") else ("16'0x3c00" if dt == "f16x2" else "16'0x3f80")
    parts = [comb(_cmp_expr(g["cmp"], e, _operand(e, "S0", ftz, h), _operand(e, "S1", ftz, h))) for h in (1, 0)]
    return f"D0.b32 = {{ {parts[0]} ? {one} : 16'0x0, {parts[1]} ? {one} : 16'0x0 }}"
  st = _cmp_type(g["cmp"], st)
  c = comb(_cmp_expr(g["cmp"], st, _operand(st, "S0", ftz), _operand(st, "S1", ftz)))
  one = "32'0x3f800000" if dt == "f32" else _ones(32)  # 1.0f or all ones
  return f"D0.b32 = {c} ? {one} : 32'0x0"


def _selp(g: dict) -> str:
  w = _W[g["t"]]
  return f"D0.b{w} = S2.u32 != 0U ? S0.b{w} : S1.b{w}"


def _slct(g: dict) -> str:
  w = _W[g["t"]]
  c = f"{'ftz(S2.f32)' if g.get('ftz') else 'S2.f32'} >= 0.0F" if g["ct"] == "f32" else "S2.i32 >= 0"
  return f"D0.b{w} = {c} ? S0.b{w} : S1.b{w}"


def _mov(g: dict) -> str:
  t = g["t"]
  return "D0.u32 = S0.u32 != 0U ? 1U : 0U" if t == "pred" else f"D0.b{max(_W[t], 32)} = S0.b{max(_W[t], 32)}"


# -- floating point --------------------------------------------------------------------------------------
def _canon(t: str, r: str = "r") -> str:
  return f"isNAN({r}) ? {CANON[t]} : {r}"


def _sat(t: str, r: str = "r") -> str:
  one = "1.0F" if t != "f64" else "1.0"
  zero = f"{_W[t]}'F(0.0)" if t != "bf16" else "16'BF(0.0)"
  return f"r = isNAN({r}) || {r} <= {zero} ? {zero} : {r} > {one} ? {one} : {r}"


def _fexpr(op: str, rnd: str | None, t: str, args: list[str]) -> str:
  rnd = rnd or "rn"
  if rnd == "rn" and op in ("add", "sub", "mul"):  # numpy and LLVM round these correctly (bf16: via f32, exact)
    return f"{args[0]} {_ARITH[op]} {args[1]}"
  if rnd == "rn" and op in ("fma", "mad") and t in ("f16", "f32", "f64"):
    return f"fma({', '.join(args)})"
  return f"{'fma' if op == 'mad' else op}_{rnd}({', '.join(args)})"


def _elementwise(g: dict, compute) -> str:
  """A float op on a scalar or, for the x2 types, on each 16-bit element (element 0 in bits 15:0): `compute(e, h)`
  gives the lines that set `r` for element type e and half h (None: scalar); then .relu, the canonical NaN, and the
  halves packed back into D0."""
  t = g["t"]
  e, halves = (t[:-2], (1, 0)) if t.endswith("x2") else (t, (None,))
  lines, outs = [], []
  for h in halves:
    sfx = "" if h is None else ("_hi" if h else "_lo")
    lines += compute(e, h)
    if g.get("relu"):
      zero = f"{_W[e]}'{'BF' if e == 'bf16' else 'F'}(0.0)"
      lines.append(f"r = !isNAN(r) && r < {zero} ? {zero} : r")
    lines.append(f"r{sfx} = {_canon(e)}" if h is not None else store(e, _canon(e)))
    outs.append(f"r{sfx}.b16")
  if halves != (None,):
    lines.append(f"D0.b32 = {{ {outs[0]}, {outs[1]} }}")
  return ";\n".join(lines)


def _farith(g: dict) -> str:
  """add/sub/mul/fma/mad on f16/bf16/f32/f64 and the packed x2 forms, element by element."""
  op = g["op"]
  n = 3 if op in ("fma", "mad") else 2

  def compute(e, h):
    args = [_operand(e, f"S{i}", bool(g.get("ftz")), h) for i in range(n)]
    out = [f"r = {_fexpr(op, g.get('rnd'), e, args)}"]
    if g.get("ftz"):
      out.append("r = ftz(r)")
    if g.get("sat"):
      out.append(_sat(e))
    return out
  return _elementwise(g, compute)


def _fminmax(g: dict) -> str:
  """min/max: a NaN operand is ignored (both NaN, or .NaN and either: canonical NaN); -0.0 < +0.0."""
  op = g["op"]
  c = "a < b || a == b && sign(a)" if op == "min" else "a > b || a == b && !sign(a)"

  def compute(e, h):
    nan = "isNAN(a) || isNAN(b) ? a + b : " if g.get("nan") else ""
    return [f"a = {_operand(e, 'S0', bool(g.get('ftz')), h)}", f"b = {_operand(e, 'S1', bool(g.get('ftz')), h)}",
            f"r = {nan}isNAN(a) ? b : isNAN(b) ? a : {c} ? a : b"]
  return _elementwise(g, compute)


def _fsign(g: dict) -> str:
  """abs/neg on floats are sign-bit operations (packed: on both elements); .ftz flushes the input first."""
  t, op = g["t"], g["op"]
  w = 32 if t.endswith("x2") else _W[t]
  sign = {16: "0x8000", 32: "0x80000000", 64: "0x8000000000000000"}[_W[t] if not t.endswith("x2") else 32]
  if t.endswith("x2"):
    sign = "0x80008000"
  x = f"ftz(S0.{_PC[t]}).b{w}" if g.get("ftz") and not t.endswith("x2") else f"S0.b{w}"
  r = f"{x} & ~{w}'{sign}" if op == "abs" else f"{x} ^ {w}'{sign}"
  return store(f"b{w}", r)


def _copysign(g: dict) -> str:
  w = _W[g["t"]]
  s = "0x80000000" if w == 32 else "0x8000000000000000"
  return f"D0.b{w} = (S1.b{w} & ~{w}'{s}) | (S0.b{w} & {w}'{s})"


def _testp(g: dict) -> str:
  t = g["t"]
  x = f"S0.{t}"
  e = {"finite": f"!isNAN({x}) && !isINF({x})", "infinite": f"isINF({x})", "number": f"!isNAN({x})",
       "notanumber": f"isNAN({x})", "subnormal": f"isDENORM({x})",
       "normal": f"!isNAN({x}) && !isINF({x}) && !isDENORM({x}) && {x} != 0.0"}[g["test"]]
  return f"D0.u32 = 32'U({e})"


def _div(g: dict) -> str:
  t, m = g["t"], g["mode"]
  a, b = _operand(t, "S0", bool(g.get("ftz"))), _operand(t, "S1", bool(g.get("ftz")))
  r = f"{a} / {b}" if m in ("rn", "full", "approx") else f"div_{m}({a}, {b})"
  return ";\n".join([f"r = {r}"] + (["r = ftz(r)"] if g.get("ftz") else []) + [store(t, _canon(t))])


def _unary_f(g: dict) -> str:
  """rcp/sqrt (IEEE roundings or .approx) and the .approx transcendentals."""
  t, op, m = g["t"], g["op"], g.get("mode") or "approx"
  x = _operand(t, "S0", bool(g.get("ftz")))
  if op == "rcp" and m == "rn":
    one = "1.0F" if t == "f32" else "1.0"
    r = f"{one} / {x}"
  elif op == "sqrt" and m == "rn":
    r = f"sqrt({x})"
  elif m == "approx":
    r = f"approx_{op}({x})"
  else:
    r = f"{op}_{m}({x})"
  return ";\n".join([f"r = {r}"] + (["r = ftz(r)"] if g.get("ftz") else []) + [store(t, _canon(t))])


# -- conversions -----------------------------------------------------------------------------------------
_IRANGE = {t: ((0, (1 << _W[t]) - 1) if t[0] == "u" else (-(1 << (_W[t] - 1)), (1 << (_W[t] - 1)) - 1))
           for t in _PC if t[0] in "us"}


def _cvt(g: dict) -> str:
  dt, st, rnd = g["dt"], g["st"], g.get("rnd")
  ftz, sat = bool(g.get("ftz")), bool(g.get("sat"))
  x = _operand(st, "S0", ftz and st in ("f32",))
  dfl, sfl = dt in CANON, st in CANON
  if not dfl and not sfl:  # integer -> integer: wrap (or clamp with .sat), sign-extend into the register
    lines = [f"x = S0.{_PC[st]}"]
    (dlo, dhi), (slo, shi) = _IRANGE[dt], _IRANGE[st]
    v = "x"
    if sat and dhi < shi:
      v = f"x > {_lit(dhi, _PC[st])} ? {_lit(dhi, _PC[st])} : {v}"
    if sat and dlo > slo:
      v = f"x < {_lit(dlo, _PC[st])} ? {_lit(dlo, _PC[st])} : {v}" if v == "x" else \
        f"x < {_lit(dlo, _PC[st])} ? {_lit(dlo, _PC[st])} : ({v})"
    return ";\n".join(lines + [_int_store(dt, f"{_W[dt]}'{'I' if dt[0] == 's' else 'U'}({v})")])
  if sfl and not dfl:  # float -> integer: round to an integral value, then saturate (NaN -> 0)
    r = {"rni": "rint_rn", "rzi": "rint_rz", "rmi": "rint_rm", "rpi": "rint_rp"}[rnd]
    return _int_store(dt, f"{_W[dt]}'{'I' if dt[0] == 's' else 'U'}({r}({x}))")
  if not sfl:  # integer -> float: one rounding
    r = f"round_{rnd or 'rn'}_{dt}({x})"
    if (rnd or "rn") == "rn" and dt in ("f32", "f64"):
      r = f"{_W[dt]}'F({x})"
  elif rnd in ("rni", "rzi", "rmi", "rpi"):  # float -> integral float of the same format
    r = f"rint_{rnd[:2]}({x})"
  elif _W[dt] > _W[st] or dt == st or (dt == "f32" and st == "bf16") or (rnd or "rn") == "rn":
    r = f"{_W[dt]}'F({x})" if dt != "bf16" else f"16'BF({x})"  # widening is exact; narrowing casts round to even
  else:
    r = f"round_{rnd or 'rn'}_{dt}({x})"
  lines = [f"r = {r}"]
  if ftz and dt == "f32":
    lines.append("r = ftz(r)")
  if sat:
    lines.append(_sat(dt))
  return ";\n".join(lines + [store(dt, _canon(dt))])


def _int_store(t: str, e: str) -> str:
  """Integer results of cvt: s8/s16 sign-extended into the 32-bit register, u8/u16 zero-extended."""
  if _W[t] < 32:
    return f"D0.b32 = 32'B(32'{'I' if t[0] == 's' else 'U'}({e}))"
  return f"D0.{_PC[t]} = {e}"


def _cvt_pack(g: dict) -> str:
  """cvt to packed f16x2/bf16x2 (a in the upper half), tf32 and the fp8 pairs (a in the upper byte)."""
  dt, st, rnd = g["dt"], g.get("st", "f32"), g["rnd"]
  relu, satf = bool(g.get("relu")), bool(g.get("satfinite"))
  if dt == "tf32":
    out = ["r = round_" + rnd + "_tf32(S0.f32)"]
    if satf:
      out.append(f"r = isINF(r) ? (sign(r) ? -{FMAX['f32']}F : {FMAX['f32']}F) : r")
    if relu:
      out.append("r = !isNAN(r) && r < 0.0F ? 0.0F : r")
    return ";\n".join(out + ["D0.f32 = " + _canon("f32")])
  if dt in ("e4m3x2", "e5m2x2"):  # round_*_e4m3 returns the 8-bit encoding, saturated to the largest finite value
    f = dt[:4]
    src = ("S0.f32", "S1.f32") if st == "f32" else ("S0.b32[31 : 16].f16", "S0.f16")
    zero = "0.0F" if st == "f32" else "16'F(0.0)"
    v = [f"({s} < {zero} ? 0.0F : 32'F({s}))" if relu else s
         for s in src]
    return f"D0.b32 = 32'B({{ round_rn_{f}({v[0]}), round_rn_{f}({v[1]}) }})"
  e = dt[:-2] if dt.endswith("x2") else dt
  zero = "16'BF(0.0)" if e == "bf16" else "16'F(0.0)"
  out, parts = [], []
  for i, s in enumerate(("S0", "S1") if dt.endswith("x2") else ("S0",)):
    cast = "16'BF" if e == "bf16" else "16'F"
    out.append(f"r = {cast}({s}.f32)" if rnd == "rn" else
               f"r = round_{rnd}_{e}({s}.f32)")
    if satf:
      out.append(f"r = isINF(r) ? (sign(r) ? -{FMAX[e]} : {FMAX[e]}) : r")
    if relu:
      out.append(f"r = !isNAN(r) && r < {zero} ? {zero} : r")
    out.append(f"r{i} = {_canon(e)}")
    parts.append(f"r{i}.b16")
  return ";\n".join(out + [f"D0.b32 = 32'B({{ {', '.join(parts)} }})"])


def _cvt_from8(g: dict) -> str:
  """cvt.rn.f16x2.e4m3x2 / .e5m2x2: each byte of a widened exactly to f16 (the upper byte into the upper half)."""
  out = []
  for h in (1, 0):
    x = f"x{h}"
    out.append(f"{x} = S0.b32[{8 * h + 7} : {8 * h}]")
    if g["st"] == "e5m2x2":  # e5m2 is the top byte of an f16
      out.append(f"r{h} = {{ {x}, 8'0U }}.f16")
    else:  # e4m3: bias 7 -> f16 bias 15; subnormals m * 2**-9 are normal f16 values; S.1111.111 is NaN
      out += [f"e = {x}[6 : 3]", f"m = {x}[2 : 0]",
              f"r{h} = e == 0U ? 16'F(32'U(m)) * 16'F(0.001953125) : {{ 1'0U, 5'U(e) + 5'8U, m, 7'0U }}.f16",
              f"r{h} = {x}[7] ? -r{h} : r{h}",
              f"r{h} = e == 15U && m == 7U ? 16'F(0x7fff) : r{h}"]
    if g.get("relu"):
      out.append(f"r{h} = !isNAN(r{h}) && r{h} < 16'F(0.0) ? 16'F(0.0) : r{h}")
    out.append(f"r{h} = {_canon('f16', f'r{h}')}")
  return ";\n".join(out + ["D0.b32 = { r1.b16, r0.b16 }"])


# -- memory ----------------------------------------------------------------------------------------------
def _ld(g: dict) -> str:
  t, n = g["t"], int((g.get("vec") or "v1")[1:])
  w, p = _W[t], _PC[t]
  out = []
  for i in range(n):
    a = "MEM[ADDR]" if i == 0 else f"MEM[ADDR + {i * w // 8}ULL]"
    if w < 32:  # sub-word loads: sign- (s8/s16) or zero-extended to the widest register (the frontend keeps its bits)
      out.append(f"D{i}.b64 = 64'{'I' if t[0] == 's' else 'U'}({a}.{p if t[0] in 'us' else 'u' + str(w)})")
    else:
      out.append(f"D{i}.b{w} = {a}.b{w}")
  return ";\n".join(out)


def _st(g: dict) -> str:
  t, n = g["t"], int((g.get("vec") or "v1")[1:])
  w = _W[t]
  return ";\n".join(f"{'MEM[ADDR]' if i == 0 else f'MEM[ADDR + {i * w // 8}ULL]'}.b{w} = S{i}.b{w}" for i in range(n))


_ATOM = {"add": "old + b", "and": "old & b", "or": "old | b", "xor": "old ^ b", "exch": "b",
         "min": "old < b ? old : b", "max": "old > b ? old : b",
         "inc": "old >= b ? 0U : old + 1U", "dec": "old == 0U || old > b ? b : old - 1U"}


def _atom(g: dict) -> str:
  """atom/red: read-modify-write of MEM (lanes on one address serialised by the runtime); atom returns the old value."""
  t, op = g["t"], g["aop"]
  red, s = g["op"] == "red", 0  # atom d, [a], b / red [a], b: b is S0 either way
  if t.endswith("x2"):  # packed f16x2/bf16x2 add, element-wise, no flush (.noftz)
    e = t[:-2]
    lo = f"(MEM[ADDR].b32[15 : 0].{e} + S{s}.b32[15 : 0].{e})"
    hi = f"(MEM[ADDR].b32[31 : 16].{e} + S{s}.b32[31 : 16].{e})"
    body = ["old = MEM[ADDR].b32", f"lo = {lo}", f"hi = {hi}", f"lo = {_canon(e, 'lo')}", f"hi = {_canon(e, 'hi')}",
            "MEM[ADDR].b32 = { hi.b16, lo.b16 }"]
    return ";\n".join(body + ([] if red else ["D0.b32 = old"]))
  w, p = _W[t], _PC[t]
  if op == "cas":
    body = [f"old = MEM[ADDR].{p}", f"MEM[ADDR].{p} = old == S0.{p} ? S1.{p} : old"]
  else:
    new = _ATOM[op].replace("b", f"S{s}.{p}").replace("0U", _lit(0, p)).replace("1U", _lit(1, p)) \
      if t[0] != "f" else None
    if t[0] == "f":  # .add.f32 flushes subnormals on global memory only (the row's `space`)
      new = "ftz(ftz(old) + ftz(S0.f32))" if g.get("space") == "global" else f"old + S0.{p}"
      body = [f"old = MEM[ADDR].{p}", f"r = {new}", f"MEM[ADDR].{p} = {_canon(t)}"]
    else:
      body = [f"old = MEM[ADDR].{p}", f"MEM[ADDR].{p} = {new}"]
  return ";\n".join(body + ([] if red else [f"D0.b{max(w, 32)} = old.b{w}" if w >= 32 else store(t, "old")]))


# -- cross-lane ------------------------------------------------------------------------------------------
_SHFL_J = {"up": ("j = lane - b", "j >= maxLane"), "down": ("j = lane + b", "j <= maxLane"),
           "bfly": ("j = lane ^ b", "j <= maxLane"), "idx": ("j = minLane | (b & ~mask)", "j <= maxLane")}


def _shfl(g: dict) -> str:
  j, p = _SHFL_J[g["mode"]]
  return (f"lane = 32'I(laneId);\nb = 32'I(S1.u32[4 : 0]);\nc = 32'I(S2.u32[4 : 0]);\nmask = 32'I(S2.u32[12 : 8]);\n"
          f"maxLane = (lane & mask) | (c & ~mask);\nminLane = lane & mask;\n{j};\npval = {p};\n"
          f"if !pval then\n  j = lane\nendif;\nD0.b32 = VGPR[j][SRC0];\nD1.u32 = 32'U(pval)")


_BALLOT = ("m = EXEC.u32[31 : 0] & S{k}.u32;\nbal = 32'0U;\nfor i in 0 : 31 do\n"
           "  if m[i] && VGPR[i][SRC0] != 0U then\n    bal[i] = 1'1U\n  endif\nendfor")


def _vote(g: dict) -> str:
  m = g["mode"]
  if m == "ballot":
    return _BALLOT.format(k=1) + ";\nif S1.u32[laneId] then\n  D0.b32 = bal\nendif"
  e = {"all": "bal == m", "any": "bal != 0U", "uni": "bal == 0U || bal == m"}[m]
  return _BALLOT.format(k=1) + f";\nif S1.u32[laneId] then\n  D0.u32 = 32'U({e})\nendif"


def _match(g: dict) -> str:
  w = _W[g["t"]]
  same = ("m = EXEC.u32[31 : 0] & S1.u32;\neq = 32'0U;\nfor i in 0 : 31 do\n"
          f"  if m[i] && VGPR[i][SRC0{'' if w == 32 else ''}] == VGPR[laneId][SRC0] then\n    eq[i] = 1'1U\n  endif\nendfor")
  if w == 64:
    same = same.replace("VGPR[i][SRC0] == VGPR[laneId][SRC0]",
                        "VGPR[i][SRC0] == VGPR[laneId][SRC0] && VGPR[i][SRC0 + 1U] == VGPR[laneId][SRC0 + 1U]")
  if g["mode"] == "any":
    return same + ";\nif S1.u32[laneId] then\n  D0.b32 = eq\nendif"
  return same + ";\nif S1.u32[laneId] then\n  D0.b32 = eq == m ? m : 32'0U;\n  D1.u32 = 32'U(eq == m)\nendif"


_REDUX = {"add": "r + v", "and": "r & v", "or": "r | v", "xor": "r ^ v", "min": "v < r ? v : r",
          "max": "v > r ? v : r"}


def _redux(g: dict) -> str:
  """redux.sync: the reduction over the active members' a (each member gets it); add/and/or/xor start from their
  identity, min/max from the first member."""
  t, op = g["t"], g["rop"]
  p = _PC[t]
  init = {"add": _lit(0, p), "or": _lit(0, p), "xor": _lit(0, p), "and": f"{_ones(32)}.{p}"}.get(op)
  step = _REDUX[op] if init else f"seen ? ({_REDUX[op]}) : v"
  return (f"m = EXEC.u32[31 : 0] & S1.u32;\nseen = false;\nr = {init or _lit(0, p)};\nfor i in 0 : 31 do\n"
          f"  v = VGPR[i][SRC0].{p};\n  if m[i] then\n    r = {step};\n    seen = true\n  endif\nendfor;\n"
          f"if S1.u32[laneId] then\n  D0.{p} = r\nendif")


def _activemask(g: dict) -> str:
  return "D0.b32 = EXEC.u32[31 : 0]"


def _elect(g: dict) -> str:
  return ("m = EXEC.u32[31 : 0] & S0.u32;\nleader = 32'0xffffffff;\nfor i in 0 : 31 do\n  if m[31 - i] then\n"
          "    leader = 32'U(31 - i)\n  endif\nendfor;\nD0.u32 = leader;\nD1.u32 = 32'U(leader == laneId)")


# -- program control -------------------------------------------------------------------------------------
# The executor implements these calls (as AMD's ENDPGM/BARRIER, emu/program.py keys control flow on them).
EVENTS: dict[str, str] = {
  "EXIT": "EXIT(): the thread ends (exit)",
  "RET": "RET(): return from the current function, or end the thread in the kernel's outermost frame (ret)",
  "TRAP": "TRAP(): abort the kernel with a trap (trap)",
  "BRKPT": "BRKPT(): breakpoint; the executor stops the dispatch (brkpt)",
  "NANOSLEEP": "NANOSLEEP(t): suspend the thread for up to t ns; timing only (nanosleep.u32 t)",
  "BARRIER": "BARRIER(id, count): wait at CTA barrier id until count threads (0: all of the CTA) arrive "
             "(bar.sync / barrier.sync a{, b})",
  "BARRIER_ARRIVE": "BARRIER_ARRIVE(id, count): arrive at barrier id without waiting (bar.arrive / barrier.arrive)",
  "BARRIER_RED_POPC": "BARRIER_RED_POPC(id, count, pred) -> u32: BARRIER, then the number of threads whose pred "
                      "is non-zero (bar.red.popc.u32 d, a, c; the optional thread count b is passed as COUNT)",
  "BARRIER_RED_AND": "BARRIER_RED_AND(id, count, pred) -> 0/1: BARRIER, then whether every thread's pred is set",
  "BARRIER_RED_OR": "BARRIER_RED_OR(id, count, pred) -> 0/1: BARRIER, then whether any thread's pred is set",
  "WARP_SYNC": "WARP_SYNC(mask): the lanes of mask reconverge (bar.warp.sync)",
}


def _event(call: str) -> Callable[[dict], str]:
  return lambda g: call


def _bar(g: dict) -> str:
  kind = g["kind"]
  if kind in ("sync", "arrive"):
    return f"{'BARRIER' if kind == 'sync' else 'BARRIER_ARRIVE'}(S0.u32, S1.u32)"
  op = g["rop"]
  r = f"BARRIER_RED_{op.upper()}(S0.u32, COUNT.u32, S1.u32)"
  return f"D0.u32 = 32'U({r})"


_FENCE = '"memory ordering only: gputwin\'s memory is coherent and every access is performed in program order"'

# -- the table -------------------------------------------------------------------------------------------
I16_64 = "u16|u32|u64|s16|s32|s64"
INT = "u8|u16|u32|u64|s8|s16|s32|s64"
F = "f32|f64"
CMPI = "eq|ne|lt|le|gt|ge|lo|ls|hi|hs"
CMPF = "eq|ne|lt|le|gt|ge|equ|neu|ltu|leu|gtu|geu|num|nan"
RND = "rn|rz|rm|rp"
ALL = "b8|b16|b32|b64|u8|u16|u32|u64|s8|s16|s32|s64|f16|f32|f64|bf16|pred"
LDT = "b8|b16|b32|b64|u8|u16|u32|u64|s8|s16|s32|s64|f16|f32|f64|bf16|f16x2|bf16x2"
_W.update(f16x2=32, bf16x2=32)
_PC.update(f16x2="b32", bf16x2="b32")

ROWS: tuple[Row, ...] = (
  Row(f"add t={I16_64}", _int_arith, "add.md (§9.7.1.1 add)", "wraps at the type's width"),
  Row(f"sub t={I16_64}", _int_arith, "sub.md (§9.7.1.2 sub)"),
  Row("add sat t=s32", _int_arith, "add.md (§9.7.1.1 add.sat.s32: clamps to MININT..MAXINT)"),
  Row("sub sat t=s32", _int_arith, "sub.md (§9.7.1.2 sub.sat.s32)"),
  Row("add cc=cc t=u32|s32|u64|s64", _carry, "add.md (§9.7.2.1 add.cc: carry-out to CC.CF)"),
  Row("sub cc=cc t=u32|s32|u64|s64", _carry, "sub.md (§9.7.2.2 sub.cc: borrow-out to CC.CF)"),
  Row("addc [cc] t=u32|s32|u64|s64", _carry, "addc.md (§9.7.2.3 addc: d = a + b + CC.CF)"),
  Row("subc [cc] t=u32|s32|u64|s64", _carry, "subc.md (§9.7.2.4 subc: d = a - (b + CC.CF))"),
  Row(f"mul mode=lo|hi t={I16_64}", _mul, "mul.md (§9.7.1.3 mul .lo/.hi)"),
  Row("mul mode=wide t=u16|u32|s16|s32", _mul, "mul.md (§9.7.1.3 mul.wide: the full 2n-bit product)"),
  Row(f"mad mode=lo|hi t={I16_64}", _mul, "mad.md (§9.7.1.4 mad .lo/.hi)"),
  Row("mad mode=wide t=u16|u32|s16|s32", _mul, "mad.md (§9.7.1.4 mad.wide)"),
  Row("mad mode=hi sat t=s32", _mul, "mad.md (§9.7.1.4 mad.hi.sat.s32)"),
  Row("mad mode=lo|hi cc=cc t=u32|s32|u64|s64", _mul, "mad.md (§9.7.2.5 mad.cc: carry-out of the addition)"),
  Row("madc mode=lo|hi [cc] t=u32|s32|u64|s64", _mul, "madc.md (§9.7.2.5 madc: t<..> + c + CC.CF)"),
  Row("mul24 mode=lo|hi t=u32|s32", _mul24, "mul24.md (§9.7.1.5 mul24: t<31..0> / t<47..16> of 24x24 bits)"),
  Row("mad24 mode=lo|hi t=u32|s32", _mul24, "mad24.md (§9.7.1.6 mad24)"),
  Row("sad t=u16|u32|u64|s16|s32|s64", _sad, "sad.md (§9.7.1.7 sad: c + |a - b|)"),
  Row(f"div t={I16_64}", _divrem, "div.md (§9.7.1.8 div; x/0 unspecified: all ones, as the hardware's sequence)"),
  Row(f"rem t={I16_64}", _divrem, "rem.md (§9.7.1.9 rem; x%0 unspecified: the dividend)"),
  Row("abs t=s16|s32|s64", _unary_int, "abs.md (§9.7.1.10 abs; abs(MININT) wraps)"),
  Row("neg t=s16|s32|s64", _unary_int, "neg.md (§9.7.1.11 neg)"),
  Row(f"min [relu] t={I16_64}", _minmax_int, "min.md (§9.7.1.12 min; .relu clamps negatives to 0)"),
  Row(f"max [relu] t={I16_64}", _minmax_int, "max.md (§9.7.1.13 max)"),
  Row("popc t=b32|b64", _bits, "popc.md (§9.7.1.14 popc)"),
  Row("clz t=b32|b64", _bits, "clz.md (§9.7.1.15 clz)"),
  Row("bfind [shiftamt] t=u32|u64|s32|s64", _bits, "bfind.md (§9.7.1.16 bfind: 0xffffffff when none)"),
  Row("brev t=b32|b64", _bits, "brev.md (§9.7.1.18 brev)"),
  Row("bfe t=u32|u64|s32|s64", _bfe, "bfe.md (§9.7.1.19 bfe)"),
  Row("bfi t=b32|b64", _bfi, "bfi.md (§9.7.1.20 bfi)"),
  Row("dp4a ta=u32|s32 tb=u32|s32", _dp, "dp4a.md (§9.7.1.23 dp4a)"),
  Row("dp2a mode=lo|hi ta=u32|s32 tb=u32|s32", _dp, "dp2a.md (§9.7.1.24 dp2a)"),
  Row("prmt t=b32 [mode=f4e|b4e|rc8|ecl|ecr|rc16]", _prmt, "prmt.md (§9.7.9.7 prmt)"),
  Row("shf dir=l|r mode=wrap|clamp t=b32", _shf, "shf.md (§9.7.8.6 shf: funnel shift of {b, a})"),
  Row("shl t=b16|b32|b64", _shift, "shl.md (§9.7.8.7 shl; amounts past the width give 0)"),
  Row("shr t=b16|b32|b64|u16|u32|u64|s16|s32|s64", _shift, "shr.md (§9.7.8.8 shr; .s fills with the sign)"),
  Row("lop3 t=b32", _lop3, "lop3.md (§9.7.8.5 lop3: immLut = F(0xF0, 0xCC, 0xAA))"),
  Row("and t=pred|b16|b32|b64", _logic, "and.md (§9.7.8.1 and)"),
  Row("or t=pred|b16|b32|b64", _logic, "or.md (§9.7.8.2 or)"),
  Row("xor t=pred|b16|b32|b64", _logic, "xor.md (§9.7.8.3 xor)"),
  Row("not t=pred|b16|b32|b64", _unary_int, "not.md (§9.7.8.4 not)"),
  Row("cnot t=b16|b32|b64", _unary_int, "cnot.md (§9.7.8.5 cnot: d = (a == 0) ? 1 : 0)"),
  Row(f"setp cmp={CMPI} [bop=and|or|xor] t=b16|b32|b64|{I16_64}", _setp, "setp.md (§9.7.7.2 setp; p|q: q = !p)"),
  Row(f"setp cmp={CMPF} [ftz] [bop=and|or|xor] t=f16|bf16|f32|f64", _setp,
      "setp.md (§9.7.7.2 setp, §9.7.4 floating-point comparisons: ordered, unordered (u), num, nan)"),
  Row(f"setp cmp={CMPF} [ftz] [bop=and|or|xor] t=f16x2", _setp_x2,
      "setp.md (§9.7.4.8 setp.f16x2: p from the lower elements, q from the upper)"),
  Row(f"setp cmp={CMPF} [bop=and|or|xor] t=bf16x2", _setp_x2, "setp.md (§9.7.4.8 setp.bf16x2)"),
  Row("szext mode=clamp|wrap t=u32|s32", _szext, "szext.md (§9.7.8.10 szext)"),
  Row("bmsk mode=clamp|wrap t=b32", _bmsk, "bmsk.md (§9.7.8.9 bmsk)"),
  Row(f"set cmp={CMPI} [bop=and|or|xor] dt=u32|s32|f32 st=b16|b32|b64|{I16_64}", _set,
      "set.md (§9.7.7.1 set: 0xffffffff / 1.0f when true)"),
  Row(f"set cmp={CMPF} [ftz] [bop=and|or|xor] dt=u32|s32|f32 st=f16|bf16|f32|f64", _set, "set.md (§9.7.7.1 set)"),
  Row(f"set cmp={CMPF} [ftz] [bop=and|or|xor] dt=u32|s32|f16x2 st=f16x2", _set,
      "set.md (§9.7.7.1 set on f16x2: 0xffff / 1.0 per element)"),
  Row(f"set cmp={CMPF} [bop=and|or|xor] dt=u32|s32|bf16x2 st=bf16x2", _set, "set.md (§9.7.7.1 set on bf16x2)"),
  Row("selp t=b16|b32|b64|u16|u32|u64|s16|s32|s64|f32|f64", _selp, "selp.md (§9.7.7.3 selp: c ? a : b)"),
  Row("slct t=b16|b32|b64|u16|u32|u64|s16|s32|s64|f32|f64 ct=s32", _slct, "slct.md (§9.7.7.4 slct: c >= 0 ? a : b)"),
  Row("slct [ftz] t=b16|b32|b64|u16|u32|u64|s16|s32|s64|f32|f64 ct=f32", _slct, "slct.md (§9.7.7.4 slct.f32)"),
  Row(f"mov t={ALL}", _mov, "mov.md (§9.7.9.1 mov: a copy; special registers are bound by the frontend)"),
  Row("cvta [to=to] t=u32|u64", lambda g: f"D0.b{_W[g['t']]} = S0.b{_W[g['t']]}", "cvta.md (§9.7.9.18 cvta)",
      "the frontend resolves state-space windows into addresses; in its flat address space the conversion is a copy"),
  Row("isspacep space=shared|local", lambda g: "D0.u32 = 32'U(S0.u64 - S1.u64 < S2.u64)",
      "isspacep.md (§9.7.9.23 isspacep)", "S1, S2: the space's generic window (base and size, the frontend's)"),
  Row("isspacep space=global", lambda g: "D0.u32 = 32'U(!(S0.u64 - S1.u64 < S2.u64) && !(S0.u64 - S3.u64 < S4.u64))",
      "isspacep.md (§9.7.9.23 isspacep)", "global: outside the shared (S1, S2) and local (S3, S4) generic windows"),
  # floating point
  Row(f"add [rnd={RND}] [ftz] [sat] t=f32", _farith, "add.md (§9.7.3.1 add: .rnd, .ftz, .sat)"),
  Row(f"add [rnd={RND}] t=f64", _farith, "add.md (§9.7.3.1 add.f64)"),
  Row(f"sub [rnd={RND}] [ftz] [sat] t=f32", _farith, "sub.md (§9.7.3.2 sub)"),
  Row(f"sub [rnd={RND}] t=f64", _farith, "sub.md (§9.7.3.2 sub.f64)"),
  Row(f"mul [rnd={RND}] [ftz] [sat] t=f32", _farith, "mul.md (§9.7.3.3 mul)"),
  Row(f"mul [rnd={RND}] t=f64", _farith, "mul.md (§9.7.3.3 mul.f64)"),
  Row(f"fma rnd={RND} [ftz] [sat] t=f32", _farith, "fma.md (§9.7.3.4 fma: one rounding)"),
  Row(f"fma rnd={RND} t=f64", _farith, "fma.md (§9.7.3.4 fma.f64)"),
  Row(f"mad [rnd={RND}] [ftz] [sat] t=f32", _farith, "mad.md (§9.7.3.5 mad.f32 is fused: same as fma)"),
  Row(f"mad rnd={RND} t=f64", _farith, "mad.md (§9.7.3.5 mad.f64)"),
  Row("add [rnd=rn] [ftz] [sat] t=f16|f16x2", _farith, "add.md (§9.7.4.1 half add)"),
  Row("sub [rnd=rn] [ftz] [sat] t=f16|f16x2", _farith, "sub.md (§9.7.4.2 half sub)"),
  Row("mul [rnd=rn] [ftz] [sat] t=f16|f16x2", _farith, "mul.md (§9.7.4.3 half mul)"),
  Row("add [rnd=rn] t=bf16|bf16x2", _farith, "add.md (§9.7.4.1 bf16 add)"),
  Row("sub [rnd=rn] t=bf16|bf16x2", _farith, "sub.md (§9.7.4.2 bf16 sub)"),
  Row("mul [rnd=rn] t=bf16|bf16x2", _farith, "mul.md (§9.7.4.3 bf16 mul)"),
  Row("fma rnd=rn [ftz] [sat] t=f16|f16x2", _farith, "fma.md (§9.7.4.4 half fma)"),
  Row("fma rnd=rn relu=relu [ftz] t=f16|f16x2", _farith, "fma.md (§9.7.4.4 fma.relu: negatives to +0)"),
  Row("fma rnd=rn [relu] t=bf16|bf16x2", _farith, "fma.md (§9.7.4.4 bf16 fma)"),
  Row("min [ftz] [nan=NaN] t=f32", _fminmax, "min.md (§9.7.3.10 min: NaN ignored, -0.0 < +0.0)"),
  Row("min t=f64", _fminmax, "min.md (§9.7.3.10 min.f64)"),
  Row("max [ftz] [nan=NaN] t=f32", _fminmax, "max.md (§9.7.3.11 max)"),
  Row("max t=f64", _fminmax, "max.md (§9.7.3.11 max.f64)"),
  Row("min [ftz] [nan=NaN] [relu] t=f16|f16x2", _fminmax, "min.md (§9.7.4.6 half min)"),
  Row("max [ftz] [nan=NaN] [relu] t=f16|f16x2", _fminmax, "max.md (§9.7.4.7 half max)"),
  Row("min [nan=NaN] [relu] t=bf16|bf16x2", _fminmax, "min.md (§9.7.4.6 bf16 min)"),
  Row("max [nan=NaN] [relu] t=bf16|bf16x2", _fminmax, "max.md (§9.7.4.7 bf16 max)"),
  Row("abs [ftz] t=f32", _fsign, "abs.md (§9.7.3.7 abs: clears the sign bit)"),
  Row("abs t=f64|f16|f16x2|bf16|bf16x2", _fsign, "abs.md (§9.7.3.7 / §9.7.4.5 abs)"),
  Row("neg [ftz] t=f32", _fsign, "neg.md (§9.7.3.8 neg: flips the sign bit)"),
  Row("neg t=f64|f16|f16x2|bf16|bf16x2", _fsign, "neg.md (§9.7.3.8 / §9.7.4.5 neg)"),
  Row("copysign t=f32|f64", _copysign, "copysign.md (§9.7.3.6 copysign: the sign of a, the rest of b)"),
  Row("testp test=finite|infinite|number|notanumber|normal|subnormal t=f32|f64", _testp, "testp.md (§9.7.3.5 testp)"),
  Row(f"div mode={RND} [ftz] t=f32", _div, "div.md (§9.7.3.9 div: IEEE roundings)"),
  Row(f"div mode={RND} t=f64", _div, "div.md (§9.7.3.9 div.f64)"),
  Row("div mode=full|approx [ftz] t=f32", _div, "div.md (§9.7.3.9 div.full (2 ulp) / div.approx: correctly rounded here)"),
  Row(f"rcp mode={RND} [ftz] t=f32", _unary_f, "rcp.md (§9.7.3.13 rcp: IEEE roundings)"),
  Row(f"rcp mode={RND} t=f64", _unary_f, "rcp.md (§9.7.3.13 rcp.f64)"),
  Row("rcp mode=approx [ftz] t=f32|f64", _unary_f, "rcp.md (§9.7.3.14 rcp.approx: correctly rounded here)"),
  Row(f"sqrt mode={RND} [ftz] t=f32", _unary_f, "sqrt.md (§9.7.3.16 sqrt: IEEE roundings)"),
  Row(f"sqrt mode={RND} t=f64", _unary_f, "sqrt.md (§9.7.3.16 sqrt.f64)"),
  Row("sqrt mode=approx [ftz] t=f32", _unary_f, "sqrt.md (§9.7.3.16 sqrt.approx: correctly rounded here)"),
  Row("rsqrt mode=approx [ftz] t=f32|f64", _unary_f, "rsqrt.md (§9.7.3.17 rsqrt.approx: correctly rounded here)"),
  Row("sin mode=approx [ftz] t=f32", _unary_f, "sin.md (§9.7.3.19 sin.approx: correctly rounded here)"),
  Row("cos mode=approx [ftz] t=f32", _unary_f, "cos.md (§9.7.3.20 cos.approx)"),
  Row("lg2 mode=approx [ftz] t=f32", _unary_f, "lg2.md (§9.7.3.21 lg2.approx)"),
  Row("ex2 mode=approx [ftz] t=f32", _unary_f, "ex2.md (§9.7.3.22 ex2.approx)"),
  Row("tanh mode=approx t=f32", _unary_f, "tanh.md (§9.7.3.23 tanh.approx)"),
  # conversions
  Row(f"cvt [sat] dt={INT} st={INT}", _cvt, "cvt.md (§9.7.9.21 cvt: integer widths, .sat clamps)"),
  Row(f"cvt rnd=rni|rzi|rmi|rpi [ftz] [sat] dt={INT} st=f32", _cvt,
      "cvt.md (§9.7.9.21 cvt float -> int: saturating, NaN -> 0)"),
  Row(f"cvt rnd=rni|rzi|rmi|rpi [sat] dt={INT} st=f16|bf16|f64", _cvt, "cvt.md (§9.7.9.21 cvt float -> int)"),
  Row(f"cvt [rnd={RND}] [sat] dt=f16|bf16|f32|f64 st={INT}", _cvt, "cvt.md (§9.7.9.21 cvt int -> float: one rounding)"),
  Row(f"cvt [rnd={RND}|rni|rzi|rmi|rpi] [ftz] [sat] dt=f32 st=f16|bf16|f32|f64", _cvt,
      "cvt.md (§9.7.9.21 cvt float -> float; .rni.. round to an integral value)"),
  Row(f"cvt [rnd={RND}|rni|rzi|rmi|rpi] [sat] dt=f16|bf16|f64 st=f16|bf16|f32|f64", _cvt,
      "cvt.md (§9.7.9.21 cvt float -> float)"),
  Row("cvt rnd=rn|rz [relu] [satfinite] dt=f16|f16x2|bf16|bf16x2 st=f32", _cvt_pack,
      "cvt.md (§9.7.9.21 cvt to f16/bf16 (x2: a -> d[31:16], b -> d[15:0]), .relu, .satfinite)"),
  Row("cvt rnd=rna [satfinite] dt=tf32 st=f32", _cvt_pack, "cvt.md (§9.7.9.21 cvt.rna.tf32.f32: ties away)"),
  Row("cvt rnd=rn|rz [satfinite] [relu] dt=tf32 st=f32", _cvt_pack, "cvt.md (§9.7.9.21 cvt.frnd2.tf32.f32)"),
  Row("cvt rnd=rn satfinite=satfinite [relu] dt=e4m3x2|e5m2x2 st=f32|f16x2", _cvt_pack,
      "cvt.md (§9.7.9.21 cvt to .e4m3x2/.e5m2x2: a -> d[15:8], b -> d[7:0]; .satfinite: largest finite, NaN)"),
  Row("cvt rnd=rn [relu] dt=f16x2 st=e4m3x2|e5m2x2", _cvt_from8,
      "cvt.md (§9.7.9.21 cvt.rn.f16x2.f8x2type: a[15:8] -> d[31:16], a[7:0] -> d[15:0])"),
  # memory
  Row(f"ld [vec=v2|v4] t={LDT}", _ld, "ld.md (§9.7.9.8 ld: sub-word loads sign/zero-extend)"),
  Row(f"ldu [vec=v2|v4] t={LDT}", _ld, "ldu.md (§9.7.9.9 ldu)"),
  Row(f"st [vec=v2|v4] t={LDT}", _st, "st.md (§9.7.9.10 st)"),
  Row("atom aop=add|min|max t=u32|s32|u64|s64", _atom, "atom.md (§9.7.13.5 atom)"),
  Row("atom aop=inc|dec t=u32", _atom, "atom.md (§9.7.13.5 atom: inc/dec in [0..b])"),
  Row("atom aop=and|or|xor|exch|cas t=b32|b64", _atom, "atom.md (§9.7.13.5 atom)"),
  Row("atom aop=add t=f64", _atom, "atom.md (§9.7.13.5 atom.add.f64 rounds to nearest even)"),
  Row("atom space=global|shared aop=add t=f32", _atom,
      "atom.md (§9.7.13.5 atom.add.f32 rounds to nearest even; on global memory it flushes subnormal inputs and "
      "results to sign-preserving zero, on shared memory it does not)"),
  Row("atom aop=add noftz=noftz t=f16x2|bf16x2", _atom, "atom.md (§9.7.13.5 atom.add.noftz on packed halves)"),
  Row("red aop=add|min|max t=u32|s32|u64|s64", _atom, "red.md (§9.7.13.6 red)"),
  Row("red aop=inc|dec t=u32", _atom, "red.md (§9.7.13.6 red)"),
  Row("red aop=and|or|xor t=b32|b64", _atom, "red.md (§9.7.13.6 red)"),
  Row("red aop=add t=f64", _atom, "red.md (§9.7.13.6 red.add.f64)"),
  Row("red space=global|shared aop=add t=f32", _atom,
      "red.md (§9.7.13.6 red.add.f32: flushes subnormals on global memory, not on shared memory)"),
  Row("red aop=add noftz=noftz t=f16x2|bf16x2", _atom, "red.md (§9.7.13.6 red.add.noftz)"),
  # cross-lane
  Row("shfl mode=up|down|bfly|idx t=b32", _shfl, "shfl.md (§9.7.9.6 shfl.sync: the manual's Semantics; d|p)"),
  Row("vote mode=all|any|uni t=pred", _vote, "vote.md (§9.7.13.9 vote.sync)"),
  Row("vote mode=ballot t=b32", _vote, "vote.md (§9.7.13.9 vote.sync.ballot.b32)"),
  Row("match mode=any|all t=b32|b64", _match, "match.md (§9.7.13.10 match.sync; .all: d|p)"),
  Row("redux rop=add|min|max t=u32|s32", _redux, "redux.md (§9.7.13.12 redux.sync)"),
  Row("redux rop=and|or|xor t=b32", _redux, "redux.md (§9.7.13.12 redux.sync)"),
  Row("activemask t=b32", _activemask, "activemask.md (§9.7.13.13 activemask)"),
  Row("elect", _elect, "elect.md (§9.7.13.14 elect.sync d|p, membermask: the lowest active member)"),
  # program control
  Row("bra", lambda g: "PC.b64 = TARGET.b64", "bra.md (§9.7.10.2 bra)"),
  Row("exit", _event("EXIT()"), "exit.md (§9.7.10.7 exit)"),
  Row("ret", _event("RET()"), "ret.md (§9.7.10.6 ret)"),
  Row("trap", _event("TRAP()"), "trap.md (§9.7.19.1 trap)"),
  Row("brkpt", _event("BRKPT()"), "brkpt.md (§9.7.19.2 brkpt)"),
  Row("nanosleep t=u32", _event("NANOSLEEP(S0.u32)"), "nanosleep.md (§9.7.19.4 nanosleep)"),
  Row("bar kind=sync|arrive", _bar, "bar.md (§9.7.13.1 bar.sync / bar.arrive)"),
  Row("barrier kind=sync|arrive", _bar, "barrier.md (§9.7.13.1 barrier.sync / barrier.arrive)"),
  Row("bar kind=red rop=popc t=u32", _bar, "bar.md (§9.7.13.1 bar.red.popc.u32)"),
  Row("bar kind=red rop=and|or t=pred", _bar, "bar.md (§9.7.13.1 bar.red.and/or.pred)"),
  Row("barrier kind=red rop=popc t=u32", _bar, "barrier.md (§9.7.13.1 barrier.red)"),
  Row("barrier kind=red rop=and|or t=pred", _bar, "barrier.md (§9.7.13.1 barrier.red)"),
  Row("bar warp=warp.sync", _event("WARP_SYNC(S0.u32)"), "bar.md (§9.7.13.2 bar.warp.sync)"),
  Row("membar", _event(_FENCE), "membar.md (§9.7.13.4 membar.{cta,gl,sys})"),
  Row("fence [sc=sc]", _event(_FENCE), "fence.md (§9.7.13.4 fence{.sc,.acq_rel}.scope)"),
)


def _index() -> dict[str, tuple[Row, dict]]:
  out: dict[str, tuple[Row, dict]] = {}
  for row in ROWS:
    for mods, groups in expand(row.pattern):
      k = ".".join((groups["op"],) + mods)
      out.setdefault(k, (row, groups))
  return out


_INDEX = _index()
_BY_NORM = {}
for _k in _INDEX:
  _p = _k.split(".")
  _BY_NORM.setdefault((_p[0], tuple(sorted(m for m in _p[1:] if not _TYPE.fullmatch(m))),
                       tuple(m for m in _p[1:] if _TYPE.fullmatch(m))), _k)


def keys() -> list[str]:
  """Every canonical key the table produces, sorted."""
  return sorted(_INDEX)


def _norm(opcode: str, kept) -> tuple:
  return opcode, tuple(sorted(m for m in kept if not _TYPE.fullmatch(m))), tuple(m for m in kept if _TYPE.fullmatch(m))


def _kept(opcode: str, mods: list[str]) -> list[str]:
  kept = [m for m in mods if not _DROP.fullmatch(m) and not (m == "sync" and opcode in _SYNC_MARK)
          and not (m == "uni" and opcode != "vote")]  # `.uni`: a uniformity hint, except vote.uni's own test
  if opcode == "membar":  # every level is the same note (memory is coherent)
    kept = []
  if opcode in ("bar", "barrier") and kept[:1] == ["warp"]:
    kept = ["warp", "sync"]
  return kept


_SPACE = re.compile(r"(global|shared|local|param|const)(::\w+)?")
SPACES = ("global", "shared", "local", "param", "const")


def key(opcode: str, modifiers=()) -> str:
  """Canonical semantics key of a PTX instruction: 'opcode.mod.mod...' without the modifiers that do not change the
  bits (cache operators, memory order/scope, .uni, .aligned, the collective `.sync`, and state spaces, except for
  the rows whose meaning depends on the space: their keys carry it, `atom.global.add.f32`; see `spaces`). Modifiers
  may come in any order the parser gives them; raises PcodeError when the table has no semantics for it."""
  mods = [m.lstrip(".") for m in modifiers]
  kept = _kept(opcode, mods)
  sp = next((_SPACE.fullmatch(m).group(1) for m in mods if _SPACE.fullmatch(m)), None)
  if sp is not None and _norm(opcode, kept + [sp]) in _BY_NORM:
    return _BY_NORM[_norm(opcode, kept + [sp])]
  k = ".".join([opcode] + kept)
  if k in _INDEX:
    return k
  if _norm(opcode, kept) in _BY_NORM:
    return _BY_NORM[_norm(opcode, kept)]
  per = spaces(opcode, modifiers) if sp is None else ()
  if per:
    raise PcodeError(f"{'.'.join([opcode] + mods)} means something else in each state space ({', '.join(per)}): "
                     "its key names the space the address resolves to", "ptx", k)
  raise PcodeError(f"no PTX semantics for {'.'.join([opcode] + mods)} (key {k})", "ptx", k)


def spaces(opcode: str, modifiers=()) -> tuple[str, ...]:
  """The state spaces in which a generic (space-less) instruction has semantics of its own, its keys carrying the
  space (atom.add.f32 flushes subnormals on global memory, not on shared); () when the space changes nothing. A
  generic address resolves per thread, so a frontend binds one body per space."""
  kept = _kept(opcode, [m.lstrip(".") for m in modifiers])
  return tuple(s for s in SPACES if _norm(opcode, kept + [s]) in _BY_NORM)


def row(k: str) -> tuple[Row, dict]:
  if k not in _INDEX:
    raise PcodeError(f"no PTX semantics for key {k!r}", "ptx", k)
  return _INDEX[k]


def text(k: str) -> str:
  """The pcode of key k, with a first line citing the manual."""
  r, g = row(k)
  return f'"PTX ISA 9.0 {r.cite}"\n' + r.build(g)
