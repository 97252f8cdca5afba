"""The generic ir3 assembler: Mesa's disassembly text -> 64-bit words, by inverting the isaspec display templates.

For one line, every leaf valid on the GPU's gen is tried with every display template it can take (one per choice of
which `<override>` expressions hold). A template is matched against the text left to right: literal text must be
equal, a raw field's text is parsed back into its bits (numbers per the field's type, enum and bool displays by
their strings), a bitset-typed field recursively matches the leaves of its hierarchy at its bit offset, and a
derived field's printed value is kept as a constraint. Fields that are never printed but that expressions read
(FULL, DST_CONV, the split halves of a derived offset, ...) are then solved: the assumed override expressions and the
derived-field constraints are inverted where they have a simple form (`A == c`, `!A`, `&&`, `(A << k) | B`, `A + c`
...), the rest are enumerated, fewest set bits first. Every other bit is 0. A candidate is accepted only when the
decoder prints exactly the input line back without a problem note, so assemble(disassemble(w)) == w whenever the
text determines the word.
"""
from __future__ import annotations

import functools
import itertools
import re
import struct
from dataclasses import dataclass

from gputwin.errors import AsmError
from gputwin.isa.ir3.decode import problems, State, disasm_word
from gputwin.isa.ir3.spec import M64, Bitset, Field, evaluate, expr_names, gen_of, spec

_NUM = {"uint": re.compile(r"\d+"), "int": re.compile(r"-?\d+"), "branch": re.compile(r"-?\d+"),
        "absbranch": re.compile(r"-?\d+"), "hex": re.compile(r"[0-9a-fA-F]+"), "offset": re.compile(r"[-+]\d+"),
        "uoffset": re.compile(r"\+\d+"), "float": re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?)")}
_MAX_ENUM_BITS = 14


@dataclass(eq=False)
class _Ctx:
  """One bitset scope of a parse: leaf, absolute bit offset, enclosing scope, param renames, override hypotheses."""
  bitset: Bitset
  base: int
  parent: "_Ctx | None"
  params: tuple
  hyp: dict  # override expression name -> assumed truth

  def truth(self, expr: str, assume: str | None = None) -> bool:
    return expr == assume or self.hyp.get(expr, False)


@dataclass(frozen=True)
class _St:
  known: int
  val: int
  ctxs: tuple
  obs: tuple  # (ctx, field, value) for printed derived fields
  subs: tuple = ()  # (start, end, canonical text) where a label name stood for a branch target


@dataclass(frozen=True)
class _Env:
  gen: int
  labels: dict  # label name -> instruction index
  n: int  # this instruction's index
  num: int  # instructions in the program
  raw_enums: bool = False  # an enum field may be a bare number outside its table (tried only when nothing else fits)


def _resolve(ctx: _Ctx, name: str, assume: str | None = None) -> tuple[Field | None, _Ctx | None]:
  while ctx is not None:
    for bs in ctx.bitset.chain:
      for c in bs.cases:
        if c.expr is not None and not ctx.truth(c.expr, assume): continue
        f = c.fields.get(name)
        if f is not None: return f, ctx
    for outer, inner in ctx.params:
      if inner == name:
        name, ctx = outer, ctx.parent
        break
    else:
      return None, None
  return None, None


def _set(st: _St, pos: int, width: int, v: int) -> _St | None:
  m = ((1 << width) - 1) << pos
  v = (v << pos) & m
  if (st.known & m & (st.val ^ v)): return None
  return _St(st.known | m, (st.val & ~m) | v, st.ctxs, st.obs, st.subs)


@functools.cache
def _hyps(b: Bitset) -> list[tuple[dict, object]]:
  """Every (hypothesis, display case) a bitset can print with: which override expressions hold."""
  exprs = []
  for bs in b.chain:
    for c in bs.cases:
      if c.expr is not None and c.expr not in exprs: exprs.append(c.expr)
  out, seen = [], set()
  for bits in itertools.product((False, True), repeat=len(exprs)):
    hyp = dict(zip(exprs, bits))
    case = next((c for bs in b.chain for c in bs.cases if (c.expr is None or hyp[c.expr]) and c.display is not None),
                None)
    if case is None: continue
    # only the hypotheses up to the chosen display case decide it; later ones still pick fields, so keep them all
    key = (id(case), tuple(sorted(hyp.items())))
    if key not in seen:
      seen.add(key)
      out.append((hyp, case))
  return out


def _enter(st: _St, b: Bitset, base: int, parent: _Ctx | None, params: tuple, hyp: dict) -> tuple[_Ctx, _St] | None:
  ctx = _Ctx(b, base, parent, params, hyp)
  m, v = (b.mask << base) & M64, (b.match << base) & M64   # the leaf's fixed bits (dontcare bits written as 0)
  if st.known & m & (st.val ^ v): return None
  st = _St(st.known | m, (st.val & ~m) | v, st.ctxs + (ctx,), st.obs, st.subs)
  for c in _taken(b, hyp):   # asserted bits of the cases the decoder passes through to its display
    for f in c.fields.values():
      if f.kind == "assert":
        st = _set(st, base + f.low, f.width, f.val)
        if st is None: return None
  return ctx, st


def _taken(b: Bitset, hyp: dict):
  for bs in b.chain:
    for c in bs.cases:
      if c.expr is not None and not hyp.get(c.expr): continue
      yield c
      if c.display is not None: return


def _scalar_alts(f: Field, text: str, pos: int, raw_enums: bool = True):
  """(value, new pos) alternatives for a scalar field printed at text[pos:]; `raw_enums`: also an enum field's bare
  number outside its table (Mesa prints such a value as the number)."""
  k = f.kind
  if k in ("bool", "bool_inv") and f.display is not None:
    on = 1 if k == "bool" else 0
    if f.display and text.startswith(f.display, pos):
      yield on, pos + len(f.display)
    yield (1 - on) if f.display else None, pos
    return
  if k == "enum":
    alts = sorted(((v, d) for v, d in f.enum.items()), key=lambda x: -len(x[1]))
    for v, d in alts:
      if text.startswith(d, pos): yield v, pos + len(d)
    m = _NUM["uint"].match(text, pos) if raw_enums else None
    if m and int(m[0]) not in f.enum: yield int(m[0]), m.end()
    return
  if k in ("bool", "bool_inv"):
    m = _NUM["uint"].match(text, pos)
    if m: yield (int(m[0]) if k == "bool" else int(not int(m[0]))), m.end()
    return
  if k in ("offset", "uoffset"):
    m = _NUM[k].match(text, pos)
    if m and int(m[0]) != 0: yield int(m[0]), m.end()
    yield 0, pos
    return
  if k == "float":
    m = _NUM["float"].match(text, pos)
    if m:
      s = m[0]
      if "nan" in s:
        bits = (0xfe00 if s[0] == "-" else 0x7e00) if f.width == 16 else (0xffc00000 if s[0] == "-" else 0x7fc00000)
      else:
        try:
          bits = int.from_bytes(struct.pack("<e" if f.width == 16 else "<f", float(s)), "little")
        except (OverflowError, struct.error):
          return
      yield bits, m.end()
    return
  rx = _NUM.get(k)
  if rx is None: return
  m = rx.match(text, pos)
  if m: yield int(m[0], 16 if k == "hex" else 10), m.end()


def _fits(f: Field, v: int) -> int | None:
  w = f.width
  if f.kind in ("int", "branch", "absbranch", "offset"):
    return v & ((1 << w) - 1) if -(1 << (w - 1)) <= v < (1 << w) else None
  return v if 0 <= v < (1 << w) else None


_LABEL = re.compile(r"[A-Za-z_.$][\w.$]*")


def _match(items: tuple, i: int, text: str, pos: int, ctx: _Ctx, st: _St, env: _Env):
  """Yield (pos, state) for every way items[i:] of ctx's template match text at pos."""
  if i == len(items):
    yield pos, st
    return
  it = items[i]
  if isinstance(it, str):
    if text.startswith(it, pos): yield from _match(items, i + 1, text, pos + len(it), ctx, st, env)
    return
  name = it[0]
  if name == "":
    yield from _match(items, i + 1, text, pos, ctx, st, env)
    return
  if name == "NAME":
    if text.startswith(ctx.bitset.name, pos):
      yield from _match(items, i + 1, text, pos + len(ctx.bitset.name), ctx, st, env)
    return
  f, owner = _resolve(ctx, name)
  if f is None:  # a template naming no field prints nothing there (Mesa notes "no field 'X'": decode.problems)
    yield from _match(items, i + 1, text, pos, ctx, st, env)
    return
  if f.kind in ("branch", "absbranch") and f.expr is None:   # a label name for the target
    m = _LABEL.match(text, pos)
    if m and m[0] in env.labels:
      tgt = env.labels[m[0]]
      st2 = _set(st, owner.base + f.low, f.width, (tgt - env.n if f.kind == "branch" else tgt) & f.mask)
      if st2 is not None:
        canon = f"{'fxn' if f.call else 'l'}{tgt}"
        st2 = _St(st2.known, st2.val, st2.ctxs, st2.obs, st2.subs + ((pos, m.end(), canon),))
        yield from _match(items, i + 1, text, m.end(), ctx, st2, env)
      return
  if f.kind == "bitset":
    base = owner.base + f.low
    for leaf in f.leaves:
      if not leaf.gen[0] <= env.gen <= leaf.gen[1]: continue
      for hyp, case in _hyps(leaf):
        ent = _enter(st, leaf, base, owner, f.params, hyp)
        if ent is None: continue
        sub, st2 = ent
        for p2, st3 in _match(case.items, 0, text, pos, sub, st2, env):
          yield from _match(items, i + 1, text, p2, ctx, st3, env)
    return
  for v, p2 in _scalar_alts(f, text, pos, env.raw_enums):
    if v is None:
      yield from _match(items, i + 1, text, p2, ctx, st, env)
      continue
    if f.expr is not None:   # derived: remember the printed value, solve later
      w = f.width
      vv = v & ((1 << w) - 1) if f.kind in ("int", "branch", "offset") and w > 1 else v
      yield from _match(items, i + 1, text, p2, ctx, _St(st.known, st.val, st.ctxs, st.obs + ((owner, f, vv),),
                                                          st.subs), env)
      continue
    raw = _fits(f, v)
    if raw is None: continue
    st2 = _set(st, owner.base + f.low, f.width, raw)
    if st2 is not None: yield from _match(items, i + 1, text, p2, ctx, st2, env)


# ---- solving the fields the text does not show -------------------------------------------------------------------
class _Solver:
  def __init__(self, st: _St, gen: int):
    self.known, self.val, self.gen, self.changed = st.known, st.val, gen, False

  def get(self, ctx: _Ctx, name: str, assume=None) -> int | None:
    f, owner = _resolve(ctx, name, assume)
    if f is None: return None
    if f.expr is not None: return self.value(owner, spec().exprs[f.expr], assume)
    m = f.mask << (owner.base + f.low)
    if self.known & m != m: return None
    return (self.val >> (owner.base + f.low)) & f.mask

  def value(self, ctx: _Ctx, e, assume=None) -> int | None:
    """The expression's value if every field it reads is known."""
    env = {}
    for n in expr_names(e):
      v = self.get(ctx, n, assume)
      if v is None: return None
      env[n] = v
    return evaluate(e, env, self.gen) & M64

  def put(self, ctx: _Ctx, name: str, v: int, assume=None):
    f, owner = _resolve(ctx, name, assume)
    if f is None: return
    if f.expr is not None:
      self.invert(owner, spec().exprs[f.expr], v, assume)
      return
    if v < 0 or v > f.mask: v &= f.mask
    m = f.mask << (owner.base + f.low)
    if self.known & m: return
    self.known |= m
    self.val = (self.val & ~m) | (v << (owner.base + f.low))
    self.changed = True

  def force(self, ctx: _Ctx, e, want: bool, assume=None):
    """Make a truth-valued expression come out `want` where its shape says how."""
    if isinstance(e, int): return
    op = e[0]
    if op == "!": return self.force(ctx, e[1], not want, assume)
    if op == "&&" and want or op == "||" and not want:
      self.force(ctx, e[1], want, assume)
      self.force(ctx, e[2], want, assume)
      return
    if op == "&&" or op == "||":   # one side decides: if the other is already known, force the remaining one
      a, b = self.value(ctx, e[1], assume), self.value(ctx, e[2], assume)
      if a is not None and b is None and bool(a) != (op == "||"): self.force(ctx, e[2], want, assume)
      if b is not None and a is None and bool(b) != (op == "||"): self.force(ctx, e[1], want, assume)
      return
    if op == "field":
      f, owner = _resolve(ctx, e[1], assume)
      if f is not None and (f.expr is not None or f.width == 1): self.put(ctx, e[1], int(want), assume)
      return
    if op in ("==", "!=") and want == (op == "=="):
      for x, y in ((e[1], e[2]), (e[2], e[1])):
        vy = self.value(ctx, y, assume)
        if vy is not None and self.value(ctx, x, assume) is None: self.invert(ctx, x, vy, assume)

  def invert(self, ctx: _Ctx, e, v: int, assume=None):
    """Make a value-valued expression equal v where its shape says how."""
    if isinstance(e, int): return
    op = e[0]
    if op == "field": return self.put(ctx, e[1], v, assume)
    if op in ("!", "&&", "||", "==", "!=", "<", "<=", ">", ">="):
      return self.force(ctx, e, bool(v), assume) if v in (0, 1) else None
    if op == "+" and isinstance(e[2], int): return self.invert(ctx, e[1], v - e[2], assume)
    if op == "-" and len(e) == 3 and isinstance(e[2], int): return self.invert(ctx, e[1], v + e[2], assume)
    if op == "*" and isinstance(e[2], int) and e[2] and v % e[2] == 0: return self.invert(ctx, e[1], v // e[2], assume)
    if op == "<<" and isinstance(e[1], int) and e[1] and v % e[1] == 0 and (v // e[1]) & (v // e[1] - 1) == 0:
      return self.invert(ctx, e[2], (v // e[1]).bit_length() - 1, assume)
    if op == "<<" and isinstance(e[2], int): return self.invert(ctx, e[1], v >> e[2], assume)
    if op == "|":
      k = _shift_of(e[1])
      if k is not None:
        self.invert(ctx, e[1], v & ~((1 << k) - 1), assume)
        self.invert(ctx, e[2], v & ((1 << k) - 1), assume)


def _shift_of(e) -> int | None:
  if isinstance(e, list) and e[0] == "<<" and isinstance(e[2], int): return e[2]
  if isinstance(e, list) and e[0] == "*" and isinstance(e[2], int) and e[2] & (e[2] - 1) == 0:
    return e[2].bit_length() - 1
  return None


@functools.cache
def _expr_names() -> frozenset:
  return frozenset(n for v in spec().expr_fields.values() for n in v)


def _solve(st: _St, gen: int):
  """Yield full words for a parse: forced fields from hypotheses and constraints, then enumeration of the rest."""
  S = _Solver(st, gen)
  for _ in range(6):
    S.changed = False
    for ctx in st.ctxs:
      for expr, truth in ctx.hyp.items():
        S.force(ctx, spec().exprs[expr], truth, expr)
    for ctx, f, v in st.obs:
      S.invert(ctx, spec().exprs[f.expr], v)
    if not S.changed: break
  for ctx in st.ctxs:   # the encoder's constant maps, nearest bitset first
    for bs in ctx.bitset.chain:
      for name, v in bs.defaults.items():
        S.put(ctx, name, v)
  # unknown raw fields that some expression reads: enumerate them, fewest set bits first
  names = _expr_names()
  free: list[int] = []
  for ctx in st.ctxs:
    for bs in ctx.bitset.chain:
      for c in bs.cases:
        if c.expr is not None and not ctx.hyp.get(c.expr): continue
        for f in c.fields.values():
          if f.expr is not None or f.kind == "assert" or f.name not in names: continue
          for b in range(f.width):
            bit = ctx.base + f.low + b
            if not (S.known >> bit) & 1 and bit not in free: free.append(bit)
  free = free[:_MAX_ENUM_BITS]
  for k in range(len(free) + 1):
    for bits in itertools.combinations(free, k):
      yield S.val | sum(1 << b for b in bits)


@functools.cache
def _chunks(b: Bitset, items: tuple) -> tuple[str, ...]:
  """The template's fixed text ({NAME} included), in order: a cheap test before the real match."""
  out, cur = [], ""
  for it in items:
    if isinstance(it, str) or it[0] == "NAME":
      cur += it if isinstance(it, str) else b.name
    elif cur:
      out.append(cur)
      cur = ""
  return tuple(out + [cur] if cur else out)


def _may_match(b: Bitset, items: tuple, s: str) -> bool:
  pos = 0
  for ch in _chunks(b, items):
    pos = s.find(ch, pos)
    if pos < 0: return False
    pos += len(ch)
  return True


def _raw(text: str) -> int | None:
  m = re.fullmatch(r"raw\s+0x([0-9a-fA-F]+)", text)
  return int(m[1], 16) & M64 if m else None


def assemble_line(text: str, gpu: str, *, labels: dict | None = None, n: int = 0, num: int = 0) -> int:
  """One instruction in Mesa's disassembly syntax -> its 64-bit word. A branch target may name a label of `labels`
  (name -> instruction index; this is instruction `n` of `num`). Raises AsmError."""
  gen = gen_of(gpu)
  s = " ".join(text.split())
  r = _raw(s)
  if r is not None: return r
  tried = 0
  for raw_enums in (False, True):  # an enum's out-of-table number (e.g. a float-table index past the table) only
    # when no other encoding prints the same text: `absneg.s hr1.y, 20` is the integer immediate 20, never index 20
    best, t = _search(s, gpu, gen, _Env(gen, labels or {}, n, max(num, n + 1), raw_enums), n)
    tried += t
    if best is not None: return best
  raise AsmError("no ir3 encoding prints as this text" + (f" ({tried} candidates tried)" if tried else ""), text=text,
                 arch=gpu)


def _search(s: str, gpu: str, gen: int, env: _Env, n: int) -> tuple[int | None, int]:
  """(the word with the fewest set bits of all that print exactly as `s`, or None; candidates tried)."""
  tried, best = 0, None
  for b in spec().roots["#instruction"]:
    if not b.gen[0] <= gen <= b.gen[1]: continue
    for hyp, case in _hyps(b):
      if not _may_match(b, case.items, s): continue
      ent = _enter(_St(0, 0, (), ()), b, 0, None, (), hyp)
      if ent is None: continue
      ctx, st = ent
      for pos, st2 in _match(case.items, 0, s, 0, ctx, st, env):
        if pos != len(s): continue
        want, dst = s, None
        if st2.subs:   # compare with Mesa's labelled text: label names become lN / fxnN
          for a, e, canon in reversed(st2.subs): want = want[:a] + canon + want[e:]
          dst = State(gen, True, n, env.num)
        for w in _solve(st2, gen):
          tried += 1
          if best is not None and w.bit_count() >= best.bit_count(): continue
          t, errs, _ = disasm_word(w, gpu, st=dst and State(gen, True, n, env.num))
          if t == want and not problems(errs):
            best = w
            break
  return best, tried


_LABEL_DEF = re.compile(r"\s*([A-Za-z_.$][\w.$]*)\s*:(?!\S)")


def assemble(text: str, gpu: str) -> bytes:
  """Assemble Mesa ir3 disassembly into little-endian 64-bit words: one instruction per line, `;` starts a comment,
  `name:` defines a label that branch targets may use (`br p0.x, #l12`; Mesa's listings name them lN / fxnN),
  `raw 0x...` is a literal word, read as a 64-bit number like Mesa's parser does."""
  gen_of(gpu)
  stmts, labels = [], {}
  for ln, line in enumerate(text.splitlines(), 1):
    s = line.split(";", 1)[0]
    while (m := _LABEL_DEF.match(s)):
      if m[1] in labels: raise AsmError(f"label {m[1]!r} defined twice", ln, m.start(1) + 1, line.strip(), gpu)
      labels[m[1]] = len(stmts)
      s = s[m.end():]
    if s.strip(): stmts.append((ln, line, s.strip()))
  out = bytearray()
  for n, (ln, line, s) in enumerate(stmts):
    try:
      out += assemble_line(s, gpu, labels=labels, n=n, num=len(stmts)).to_bytes(8, "little")
    except AsmError as e:
      raise AsmError(e.msg, ln, len(line) - len(line.lstrip()) + 1, line.strip(), gpu) from None
  return bytes(out)
