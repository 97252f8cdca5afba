"""The generic isaspec decoder/printer: one 64-bit word -> Mesa's `ir3_isa_disasm()` text, or an instruction record.

Decoding follows the isaspec rules (docs/isaspec.rst) the way Mesa's decoder applies them, so the text is identical:
- a value matches a leaf when (value & mask & ~dontcare) == match, among the leaves whose gen range holds the GPU's
  gen; two matches are a conflict (no match), and set dontcare bits are reported;
- a bitset's display template is the first case (its `<override>`s in order, then its default; then its parent's)
  whose expression holds and that has a `<display>`; asserted bits of the chosen case are checked;
- a field reference resolves in the current scope (cases in order, then the parent bitset; while an override's own
  expression is being evaluated that override counts as taken), then through the field's `<param>` renames in the
  enclosing scope; derived fields evaluate their expression; expression results are cached per scope and an
  expression never re-enters itself;
- problems are collected (at most 4) and printed after the text as `\t; a, b`, as Mesa does with show_errors;
  a word that matches no instruction prints as Mesa's `raw 0x%X%X` (low dword first, unpadded).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from gputwin.errors import DecodeError
from gputwin.isa.ir3.spec import M64, Bitset, Field, evaluate, gen_of, spec


class State:
  __slots__ = ("gen", "errors", "stack", "out", "col", "labels", "n", "num", "targets", "calls")

  def __init__(self, gen: int, labels: bool = False, n: int = 0, num: int = 0, targets=None, calls=None):
    self.gen, self.errors, self.stack, self.out, self.col = gen, [], [], [], 0
    self.labels, self.n, self.num = labels, n, num
    self.targets, self.calls = targets if targets is not None else set(), calls if calls is not None else set()

  def error(self, msg: str):
    if len(self.errors) < 4: self.errors.append(msg)

  def print(self, s: str):
    self.out.append(s)
    self.col += len(s)


class _Scope:
  __slots__ = ("parent", "val", "bitset", "params", "st", "cache")

  def __init__(self, st: State, bitset: Bitset, val: int, parent: "_Scope | None", params: tuple = ()):
    self.st, self.bitset, self.val, self.parent, self.params, self.cache = st, bitset, val, parent, params, {}


def _hex64(v: int) -> str: return f"{v & M64:016x}"


def find_bitset(st: State, leaves: list[Bitset], val: int) -> Bitset | None:
  match = None
  for b in leaves:
    if not b.gen[0] <= st.gen <= b.gen[1]: continue
    if val & b.mask & ~b.dontcare != b.match: continue
    if match is not None:
      st.error(f"bitset conflict: {match.name} vs {b.name}")
      return None
    match = b
  if match is not None and val & match.dontcare:
    st.error(f"dontcare bits in {match.name}: {_hex64(val & match.dontcare)}")
  return match


def _eval_expr(sc: _Scope, name: str) -> int:
  if name in sc.cache: return sc.cache[name]
  st = sc.st
  if name in st.stack[1:]: return 0   # Mesa's recursion guard (it never looks at the bottom entry)
  st.stack.append(name)
  S = spec()
  env = {f: decode_field(sc, f) for f in S.expr_fields[name]}
  ret = evaluate(S.exprs[name], env, st.gen) & M64
  st.stack.pop()
  sc.cache[name] = ret
  return ret


def _find_field(sc: _Scope, b: Bitset, name: str) -> Field | None:
  for bs in b.chain:
    for c in bs.cases:
      if c.expr is not None:
        cur = sc.st.stack[-1] if sc.st.stack else None
        if cur != c.expr and not _eval_expr(sc, c.expr): continue
      f = c.fields.get(name)
      if f is not None: return f
  return None


def resolve_field(sc: _Scope | None, name: str) -> tuple[Field | None, int, "_Scope | None"]:
  """(field, raw value, scope it lives in) for a name as seen from scope `sc`."""
  while sc is not None:
    f = _find_field(sc, sc.bitset, name)
    if f is not None:
      v = _eval_expr(sc, f.expr) if f.expr else (sc.val >> f.low) & f.mask
      return f, v, sc
    for outer, inner in sc.params:
      if inner == name:
        name, sc = outer, sc.parent
        break
    else:
      return None, 0, None
  return None, 0, None


def decode_field(sc: _Scope, name: str) -> int:
  f, v, _ = resolve_field(sc, name)
  if f is None:
    sc.st.error(f"no field '{name}'")
    return 0
  return v


def find_display(sc: _Scope, b: Bitset):
  for bs in b.chain:
    for c in bs.cases:
      if c.expr is not None and not _eval_expr(sc, c.expr): continue
      for f in c.fields.values():
        if f.kind == "assert":
          v = (sc.val >> f.low) & f.mask
          if v != f.val:
            sc.st.error(f"WARNING: unexpected bits[{f.low}:{f.high}] in {bs.name}: {_hex64(v)} vs {_hex64(f.val)}")
      if c.display is None: continue
      return c
  return None


def _sext(v: int, width: int) -> int:
  v &= (1 << width) - 1 if width < 64 else M64
  return v - (1 << width) if width < 64 and v >> (width - 1) else (v - (1 << 64) if v >> 63 else v)


def _cfloat(x: float, neg: bool) -> str:
  if math.isnan(x): return "-nan" if neg else "nan"
  return "%f" % x


def format_value(f: Field, v: int) -> str:
  """A scalar field's text (everything but bitset fields), as Mesa's display_field prints it."""
  k, w = f.kind, f.width
  if k in ("branch", "absbranch", "int"): return str(_sext(v, w))
  if k == "uint": return str(v)
  if k == "hex": return f"{v:x}"
  if k == "offset": return f"{_sext(v, w):+d}" if v else ""
  if k == "uoffset": return f"+{v}" if v else ""
  if k == "float":
    if w == 16: return _cfloat(struct.unpack("<e", struct.pack("<H", v & 0xffff))[0], bool(v >> 15 & 1))
    return _cfloat(struct.unpack("<f", struct.pack("<I", v & 0xffffffff))[0], bool(v >> 31 & 1))
  if k == "bool": return (f.display if v else "") if f.display is not None else str(v & 0xffffffff)
  if k == "bool_inv": return (f.display if not v else "") if f.display is not None else str(_b(not v))
  if k == "enum": return f.enum[v] if v in f.enum else str(v & 0xffffffff)
  return ""   # custom: no printer in ir3


def _b(x) -> int: return 1 if x else 0


def _display_field(sc: _Scope, name: str, align: int):
  st = sc.st
  if name == "":   # an alignment-only reference
    while st.col < align: st.print(" ")
    return
  if name == "NAME":
    while st.col < align: st.print(" ")
    st.print(sc.bitset.name)
    return
  f, v, _ = resolve_field(sc, name)
  if f is None:
    st.error(f"no field '{name}'")
    return
  while st.col < align: st.print(" ")
  if st.labels and f.kind in ("branch", "absbranch"):   # branch_labels: a target inside the program prints as a label
    off = _sext(v, f.width) + st.n if f.kind == "branch" else v
    if 0 <= off < st.num:
      (st.calls if f.call else st.targets).add(off)
      st.print(f"{'fxn' if f.call else 'l'}{off}")
      return
  if f.kind == "bitset":
    b = find_bitset(st, f.leaves, v)
    if b is None:
      st.error(f"no match: FIELD: '{sc.bitset.name}.{f.name}': {_hex64(v)}")
      return
    display(_Scope(st, b, v, sc, f.params))
  else:
    st.print(format_value(f, v))


def display(sc: _Scope):
  c = find_display(sc, sc.bitset)
  if c is None:
    sc.st.error(f"{sc.bitset.name}: no display template")
    return
  for it in c.items:
    if isinstance(it, str):
      sc.st.print(it)
    else:
      _display_field(sc, *it)


def raw_text(word: int) -> str:
  """Mesa's no-match printer: `raw 0x%X%X` of (low dword, high dword)."""
  return f"raw 0x{word & 0xffffffff:X}{word >> 32:X}"


def disasm_word(word: int, gpu: str, *, st: State | None = None) -> tuple[str, list[str], Bitset | None]:
  """(text, problems, leaf) for one instruction word; text is Mesa's line without the problems appended."""
  st = st or State(gen_of(gpu))
  b = find_bitset(st, spec().roots["#instruction"], word)
  if b is None:
    return raw_text(word), st.errors, None
  display(_Scope(st, b, word, None))
  return "".join(st.out), st.errors, b


def _words(data: bytes, gpu: str) -> list[int]:
  data = bytes(data)
  if len(data) % 8:
    raise DecodeError(f"ir3 code is a whole number of 64-bit words, got {len(data)} bytes", gpu, len(data) // 8 * 8)
  return [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8)]


def disassemble(data: bytes, gpu: str, *, branch_labels: bool = False) -> list[str]:
  """Little-endian 64-bit words -> one line per instruction, exactly Mesa's `ir3_isa_disasm()` output (show_errors,
  raw words as `raw 0x...`). With branch_labels, as Mesa's listings: a branch to an instruction of the program prints
  `#lN` (`#fxnN` for call), and `lN:` / `fxnN:` lines (a call target after a blank line) precede the targets."""
  gen = gen_of(gpu)
  words = _words(data, gpu)
  targets: set[int] = set()
  calls: set[int] = set()
  if branch_labels:   # Mesa's pre-pass: find every target
    for n, w in enumerate(words):
      disasm_word(w, gpu, st=State(gen, True, n, len(words), targets, calls))
  out = []
  for n, w in enumerate(words):
    if n in calls and n: out.append("")
    if n in calls: out.append(f"fxn{n}:")
    if n in targets: out.append(f"l{n}:")
    text, errs, _ = disasm_word(w, gpu, st=State(gen, branch_labels, n, len(words), targets, calls))
    out.append(text + ("\t; " + ", ".join(errs) if errs else ""))
  return out


def problems(errs: list[str]) -> list[str]:
  """The problems that make a word invalid: a display template naming a field no case defines ("no field 'NOP'" in
  Mesa 25.0.7's #instruction-cat3-dp template, so every dp2acc/dp4acc prints with that note) is the table's, not the
  word's."""
  return [e for e in errs if not e.startswith("no field ")]


@dataclass(frozen=True)
class Operand:
  """A bitset-typed field's decoded value: the leaf it matched (e.g. `#multisrc-gpr`) and its own fields."""
  bitset: str
  value: int
  fields: dict


@dataclass(frozen=True)
class Inst:
  """One decoded ir3 instruction: leaf bitset name (`add.f`, `mov`...), the word, Mesa's text and every field that
  the chosen cases define, resolved (derived fields evaluated, bitset fields as `Operand`)."""
  gpu: str
  name: str
  word: int
  text: str
  fields: dict

  @property
  def cat(self) -> int: return self.word >> 61


def _fields(sc: _Scope) -> dict:
  out: dict = {}
  for bs in sc.bitset.chain:
    for c in bs.cases:
      if c.expr is not None and not _eval_expr(sc, c.expr): continue
      for name, f in c.fields.items():
        if name in out or f.kind == "assert": continue
        f2, v, _ = resolve_field(sc, name)
        if f2 is None: continue
        if f2.kind == "bitset":
          b = find_bitset(sc.st, f2.leaves, v)
          out[name] = Operand(b.name, v, _fields(_Scope(sc.st, b, v, sc, f2.params))) if b else v
        else:
          out[name] = _sext(v, f2.width) if f2.kind in ("int", "branch", "offset") else v
  return out


def decode(data: bytes, gpu: str, *, offset: int = 0) -> Inst:
  """Decode the instruction at byte `offset`. A word that matches no instruction, or that Mesa would print with a
  problem note (dontcare bits set, unexpected asserted bits, a field that matches nothing), raises DecodeError."""
  data = bytes(data)
  if offset < 0 or offset + 8 > len(data):
    raise DecodeError("truncated instruction (ir3 instructions are 8 bytes)", gpu, offset)
  w = int.from_bytes(data[offset:offset + 8], "little")
  text, errs, b = disasm_word(w, gpu)
  if b is None:
    raise DecodeError("no instruction matches" + (f" ({'; '.join(errs)})" if errs else ""), gpu, offset, w)
  errs = problems(errs)
  if errs:
    raise DecodeError(f"{text}: {'; '.join(errs)}", gpu, offset, w)
  st = State(gen_of(gpu))
  return Inst(gpu, b.name, w, text, _fields(_Scope(st, b, w, None)))


def decode_all(data: bytes, gpu: str) -> list[Inst]:
  return [decode(data, gpu, offset=o) for o in range(0, len(_words(data, gpu)) * 8, 8)]
