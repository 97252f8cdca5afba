"""The PTX instruction-form table (`forms.json`, built by gen_forms.py from the PTX ISA 9.0 syntax blocks) and the
one matcher every instruction goes through.

A form is an opcode, its modifier slots in the manual's order (each required or optional, each a set of allowed
modifiers) and its operands (required or optional, kind addr/args/pred/pair/vec/any). Like ptxas, the matcher lets
modifiers come in any order except that type modifiers keep their relative order (`cvt.f32.s32` is not `cvt.s32.f32`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Callable
from pathlib import Path

from gputwin.isa.ptx.model import TYPES, Addr, Args, Imm, Operand, Pair, Reg, Sym, Vec

FORMS_JSON = Path(__file__).with_name("forms.json")


@dataclass(frozen=True)
class Slot:
  """One modifier position: a group name (`rnd`, `type`) or a literal (`sync`), required or optional."""
  name: str
  required: bool
  allowed: frozenset[str]
  is_type: bool
  parts: int = 1  # the most modifiers one alternative spans (`async.global`: 2)


@dataclass(frozen=True)
class OperandSlot:
  """One operand: name as in the manual, required or optional, kind (addr|args|pred|pair|vec|any), type rule (see
  gen_forms.OPERAND_TYPES) and the modifier it needs when present (cache-policy needs .L2::cache_hint)."""
  name: str
  required: bool
  kind: str  # addr | args | pred | pair | vec | pack (mov) | any
  rule: str = ""
  needs: str = ""


@dataclass(frozen=True)
class Form:
  opcode: str
  slots: tuple[Slot, ...]
  operands: tuple[OperandSlot, ...]
  src: str  # the manual file or section it comes from

  @property
  def arity(self) -> tuple[int, int]:
    return sum(o.required for o in self.operands), len(self.operands)

  def __str__(self) -> str:
    mods = "".join(f".{s.name}" if s.required else f"{{.{s.name}}}" for s in self.slots)
    ops = "".join((", " if i else "") + o.name if o.required else f"{{{', ' if i else ''}{o.name}}}"
                  for i, o in enumerate(self.operands))
    return f"{self.opcode}{mods} {ops}".rstrip()

  def match(self, mods: tuple[str, ...]) -> list[tuple[Slot, str]] | None:
    """Fill this form's slots with these modifiers (any order; types in order; every required slot filled): the
    filled slots in slot order with their modifier, or None. Each slot takes one alternative of at most `parts`
    modifiers, so a longer list fails before the search (and each step tries at most `parts` joins): linear in the
    modifiers, not quadratic (a 100k-character `add.f32.f32...` took minutes)."""
    if len(mods) > sum(s.parts for s in self.slots): return None
    used: list[str | None] = [None] * len(self.slots)
    def go(i: int, last_type: int) -> bool:
      if i == len(mods): return all(u is not None or not s.required for u, s in zip(used, self.slots))
      for k, s in enumerate(self.slots):
        if used[k] is not None: continue
        for n in range(min(len(mods) - i, s.parts), 0, -1):  # compound alternatives such as `async.global`
          m = ".".join(mods[i:i + n])
          if m not in s.allowed or s.is_type and k < last_type: continue
          used[k] = m
          if go(i + n, k if s.is_type else last_type): return True
          used[k] = None
      return False
    return [(s, u) for s, u in zip(self.slots, used) if u is not None] if go(0, -1) else None

  @staticmethod
  def operand_type(rule: str, fill: list[tuple[Slot, str]]) -> str | None:
    """The PTX type an operand rule names under this slot assignment (None: unchecked)."""
    ts = [m for s, m in fill if s.is_type]
    if rule.startswith("#"): return ts[int(rule[1:])] if int(rule[1:]) < len(ts) else None
    if rule == "wide": return ts[0][0] + str(2 * bits(ts[0])) if ts else None
    return next((m for s, m in fill if s.name == rule), rule if rule in TYPES else None)

  def accepts(self, fill: list[tuple[Slot, str]], operands: tuple[Operand, ...],
              regtype: Callable[[str], str | None]) -> tuple[str, int]:
    """('', -1) if the operands fit this form (count, kinds, types), else (why not, index of the operand or -1)."""
    lo, hi = self.arity
    if not lo <= len(operands) <= hi:
      return f"'{self.opcode}' takes {lo if lo == hi else f'{lo} to {hi}'} operands here, got {len(operands)}", -1
    vec = next((int(m[1:]) for s, m in fill if s.name.startswith("vec")), 0)  # .vec, atom's .vec_32_bit
    has_vec = any(s.name.startswith("vec") for s in self.slots)
    spare = len(operands) - lo  # optional operands present, taken in order (bar's `a{, b}, c` skips b)
    present = [s for s in self.operands if s.required or (spare := spare - 1) >= 0]
    mods = {m for _, m in fill}
    for i, (o, s) in enumerate(zip(operands, present)):
      why = self._operand(o, s, vec, has_vec, mods, fill, regtype)
      if why: return why, i
    return "", -1

  def _operand(self, o, s: OperandSlot, vec: int, has_vec: bool, mods: set, fill, regtype) -> str:
    what = f"operand '{s.name}' of '{self.opcode}'"
    if (s.kind == "addr") != isinstance(o, Addr): return f"{what} must {'' if s.kind == 'addr' else 'not '}be [memory]"
    if (s.kind == "args") != isinstance(o, Args): return f"{what} must {'' if s.kind == 'args' else 'not '}be a (list)"
    if isinstance(o, Reg) and o.neg and s.kind != "pred": return f"{what} cannot be negated"
    if isinstance(o, Pair) and s.kind != "pair": return f"{what} cannot be a pair"
    if s.needs and s.needs not in mods: return f"{what} needs .{s.needs}"
    if has_vec and s.rule and isinstance(o, Vec) != bool(vec) or vec and isinstance(o, Vec) and len(o.items) != vec:
      return f"{what} does not match the vector size"
    if s.rule == "frag":
      n = fragment_regs(self, fill, s.name)
      if n and (not isinstance(o, Vec) or len(o.items) != n): return f"{what} must be a vector of {n} registers"
      return ""
    rule, _, bounds = s.rule.lstrip("~").partition(":")
    if bounds and isinstance(o, Imm) and o.kind == "int":
      lo, hi = map(int, bounds.split(".."))
      if not lo <= o.value <= hi: return f"{what} must be in {bounds}, got {o.value}"
    t = self.operand_type(rule, fill) if rule else None
    if t is None: return ""
    if isinstance(o, Vec) and not has_vec:  # only mov packs/unpacks: .bN split into equal registers
      if s.kind != "pack": return f"{what} cannot be a vector"
      known = {bits(x) for x in (regtype(r.name) if isinstance(r, Reg) else None for r in o.items) if x}
      if _kind(t) != "b" or len(known) > 1 or known and known.pop() * len(o.items) != bits(t):
        return f"{what}: the vector does not pack into .{t}"
      return ""
    items = o.items if isinstance(o, Vec) else (o.a, o.b) if isinstance(o, Pair) else (o,)
    for k, x in enumerate(items):
      why = _fits(x, "pred" if isinstance(o, Pair) and k == 1 else t, s.rule.startswith("~"), regtype)
      if why: return f"{what}: {why}"
    return ""


def fragment_regs(form: Form, fill, role: str) -> int:
  """Registers per thread in a wmma/mma/ldmatrix/stmatrix fragment (PTX ISA 9.7.14.5 "Matrix fragments"): a matrix is
  spread evenly over the 32 threads of the warp (over the 8 of a quad-pair for mma.m8n8k4 with .f16), in 32-bit
  registers (64-bit for .f64); wmma's .f16 A and B are eight registers in every shape. 0 where not modelled."""
  mods = [m for _, m in fill]
  types = [m for s, m in fill if s.is_type]
  shape = next((m for m in mods if re.fullmatch(r"m\d+n\d+(k\d+)?", m)), "")
  if form.opcode in ("ldmatrix", "stmatrix"):
    num = next((int(m[1:]) for m in mods if m in ("x1", "x2", "x4")), 0)
    return num * (2 if shape == "m16n16" else 1) if shape in ("m8n8", "m16n16") else 0
  dims = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
  if not dims or not types: return 0
  m, n, k = map(int, dims.groups())
  if form.opcode == "wmma":
    if "load" in mods or "store" in mods:
      role, t = next(x for x in mods if x in "abcd"), types[0]
    elif len(types) == 2: t = {"d": types[0], "c": types[1]}.get(role, "f16")  # wmma.mma .dtype.ctype (f16 A/B)
    else: t = types["dabc".index(role)]
  elif len(types) == 4: t = types["dabc".index(role)]
  else: return 0
  elems = {"a": m * k, "b": k * n}.get(role, m * n)
  threads = 8 if shape == "m8n8k4" and "f16" in types else 32
  reg = 64 if t == "f64" else 32
  regs = elems * bits(t) // threads // reg
  return 8 if form.opcode == "wmma" and t == "f16" and role in "ab" else max(regs, 1)


_NARROW = {"pred": 1, "tf32": 32, "e2m1": 4, "e2m3": 8, "e3m2": 8, "e4m3": 8, "e5m2": 8, "ue8m0": 8, "ue4m3": 8}


def quote(name: str, limit: int = 48) -> str:
  """A name or token for an error message: quoted, control and non-ASCII characters escaped, and at most `limit`
  characters of it (then its length), so a message stays short whatever the input holds."""
  esc = "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                for c in name[:limit])
  return f"'{esc}'" + (f"... ({len(name)} characters)" if len(name) > limit else "")


def bits(t: str) -> int:
  """Width in bits of a PTX type name (`f16x2` 32, `e2m1x2` 8, pred 1)."""
  if t in _NARROW: return _NARROW[t]
  if t[-2:] in ("x2", "x4") and not t[-3].isalpha(): return int(t[-1]) * bits(t[:-2])
  return int(t.lstrip("bfsue").rstrip("x") or 0)


def _kind(t: str) -> str:
  return "b" if t[0] == "b" and t[1:].isdigit() else "u" if t[0] == "u" and t[1:].isdigit() else \
    "s" if t[0] == "s" and t[1:].isdigit() else "p" if t == "pred" else "f"


def compatible(reg: str, ins: str, relaxed: bool = False) -> bool:
  """Does a register of type `reg` fit an operand of type `ins` (PTX ISA "Type checking"; relaxed: ld/st/cvt)?"""
  rk, ik = _kind(reg), _kind(ins)
  if "p" in (rk, ik): return rk == ik
  if ik in "us": return rk in "bus" and (bits(reg) == bits(ins) or relaxed and bits(reg) > bits(ins))
  if ik == "b": return bits(reg) == bits(ins) or relaxed and bits(reg) > bits(ins)
  return reg == ins or rk == "b" and (bits(reg) == bits(ins) or relaxed and bits(reg) > bits(ins))


def _fits(o, want: str, relaxed: bool, regtype: Callable[[str], str | None]) -> str:
  if isinstance(o, Reg):
    if o.name == "_": return ""
    t = regtype(o.name)
    if t == "v4": return f"{quote(o.name)} is a vector"
    return "" if t is None or compatible(t, want, relaxed) else f"register {quote(o.name)} (.{t}) does not fit .{want}"
  if isinstance(o, Imm):
    k = _kind(want)
    if o.kind == "int": return "" if k in "busp" else f"integer immediate for .{want}"
    return "" if k in "bf" else f"floating-point immediate for .{want}"
  if isinstance(o, Sym) and _kind(want) not in "bus": return f"the address of {quote(o.name)} is not a .{want}"
  return ""


@cache
def table() -> dict[str, tuple[Form, ...]]:
  """opcode -> its forms, from forms.json."""
  raw = json.loads(FORMS_JSON.read_text())
  return {op: tuple(Form(op, tuple(Slot(n, r, frozenset(a), all(x in TYPES for x in a),
                                        max((x.count(".") + 1 for x in a), default=1)) for n, r, a in f["mods"]),
                         tuple(OperandSlot(*o) for o in f["ops"]), f["src"]) for f in fs)
          for op, fs in raw.items()}


def lookup(opcode: str) -> tuple[Form, ...]:
  """The forms of an opcode (the first word: `ld`, `cp`, `mma`); () when PTX has no such instruction."""
  return table().get(opcode, ())


@lru_cache(maxsize=4096)  # bounded: fuzzed text brings a new modifier list per line
def _modifiers(opcode: str, mods: tuple[str, ...]) -> tuple[tuple, str, int]:
  """The forms these modifiers fill, with their slot assignments; or why none (and the culprit modifier's index)."""
  forms = lookup(opcode)
  if not forms: return (), f"unknown instruction {quote(opcode)}", -1
  allowed = set().union(*(s.allowed for f in forms for s in f.slots))
  for i, m in enumerate(mods):
    if m not in allowed and not any(a.startswith(m + ".") or a.endswith("." + m) or f".{m}." in a for a in allowed):
      return (), f"unknown modifier {quote('.' + m)} for instruction {quote(opcode)}", i
  fits = tuple((f, tuple(fill)) for f in forms if (fill := f.match(mods)) is not None)
  if not fits:
    missing = [s.name for f in forms for s in f.slots if s.required and f.match(mods + (min(s.allowed),)) is not None]
    text = "".join("." + m for m in mods)
    text = f"'{text}'" if len(text) <= 80 else f"'{text[:60]}...' ({len(mods)} modifiers)"
    why = f"missing .{missing[0]} modifier" if missing else f"illegal modifiers {text}"
    return (), f"{why} for instruction {quote(opcode)}", -1
  return fits, "", -1


def check(opcode: str, mods: tuple[str, ...], operands: tuple[Operand, ...],
          regtype: Callable[[str], str | None] = lambda r: None) -> tuple[Form | None, str, int, int]:
  """Match an instruction against the table: (form, '', -1, -1), or (None, message, index of the culprit modifier or
  -1, index of the culprit operand or -1). regtype gives a register's declared type (None: unchecked)."""
  fits, why, bad = _modifiers(opcode, mods)
  if why: return None, why, bad, -1
  first = ("", -1)
  for f, fill in fits:
    why, at = f.accepts(fill, operands, regtype)
    if not why: return f, "", -1, -1
    first = first if first[0] else (why, at)
  return None, first[0], -1, first[1]
