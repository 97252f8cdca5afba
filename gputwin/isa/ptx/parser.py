"""PTX text -> Module. A regex lexer and a recursive-descent parser for whole modules as nvcc 13 writes them; every
instruction is checked against the form table (forms.py) and every register, label and symbol against its scope.
Errors are PtxError naming path:line:col."""
from __future__ import annotations

import math
import re
from dataclasses import replace

from gputwin.errors import AsmError
from gputwin.isa.ptx import forms
from gputwin.isa.ptx.forms import quote
from gputwin.isa.ptx.model import (TYPES, Addr, Args, BranchTargets, Function, Guard, Imm, Instruction, Label,
                                   LabelDef, Loc, Module, Pair, Pos, Pragma, Prototype, Reg, RegDecl, Scope, Section,
                                   Sym, VarDecl, Vec)


class PtxError(AsmError):
  """PTX text that is not a valid module; names path:line:col like ptxas."""

  def __init__(self, msg: str, pos: Pos | None = None, text: str = ""):
    super().__init__(msg, pos.line if pos else 0, pos.col if pos else 0, text)
    self.path = pos.path if pos else ""
    where = f"{pos}: " if pos else ""
    at = max(self.col - 1, 0)
    text = _PRINTABLE.sub("?", text.replace("\t", " "))   # the line as a terminal shows it: no escapes, caret aligned
    if len(text) > 160:  # a long line is quoted around the column, not whole
      lo = max(0, at - 60)
      text = ("..." if lo else "") + text[lo:lo + 120] + ("..." if lo + 120 < len(text) else "")
      at += 3 - lo if lo else 0
    self.args = (f"{where}error: {msg}" + (f"\n  {text}\n  {' ' * at}^" if text else ""),)

  def __str__(self) -> str: return self.args[0]


_PRINTABLE = re.compile(r"[^\x20-\x7e]")
_NON_ASCII = re.compile(r"[^\x00-\x7e]")   # ptxas: "Unexpected non-ASCII character" anywhere, DEL included


# Special registers (PTX ISA 9.0 chapter 10); `.x/.y/.z` components are spelled in the name.
_XYZ = ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid")
SREGS = frozenset([f"%{b}.{c}" for b in _XYZ for c in "xyz"] + [f"%{b}" for b in _XYZ] + [f"%{n}" for n in (
  "laneid warpid nwarpid smid nsmid gridid lanemask_eq lanemask_le lanemask_lt lanemask_ge lanemask_gt clock clock_hi "
  "clock64 globaltimer globaltimer_lo globaltimer_hi total_smem_size aggr_smem_size dynamic_smem_size "
  "reserved_smem_offset_begin reserved_smem_offset_end reserved_smem_offset_cap reserved_smem_offset_0 "
  "reserved_smem_offset_1 is_explicit_cluster cluster_ctarank cluster_nctarank current_graph_exec").split()]
  + [f"%envreg{i}" for i in range(32)] + [f"%pm{i}" for i in range(8)] + [f"%pm{i}_64" for i in range(8)])

_SREG64 = ("%clock64", "%globaltimer", "%gridid") + tuple(f"%pm{i}_64" for i in range(8))


def sreg_type(name: str) -> str | None:
  """The type of a special register (.u64 for the 64-bit counters, .u32 otherwise; None for the v4 forms)."""
  if name not in SREGS: return None
  if name in (f"%{b}" for b in _XYZ): return "v4"
  return "u64" if name in _SREG64 else "u32"


_TOKEN = re.compile(r"""
  (?P<ws>[ \t\r\f]+|//[^\n]*|/\*.*?\*/) | (?P<nl>\n)
 | (?P<str>"(?:[^"\\\n]|\\.)*")
 | (?P<f32>0[fF][0-9a-fA-F]{8}(?![\w$])) | (?P<f64>0[dD][0-9a-fA-F]{16}(?![\w$]))
 | (?P<flt>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)
 | (?P<int>0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|[0-9]+U?)
 | (?P<dir>\.[A-Za-z_][\w$]*(?:::[\w$]+)*)
 | (?P<word>[A-Za-z_$%][\w$]*(?:\.[\w$]+(?:::[\w$]+)*)*)
 | (?P<punct>[{}()\[\],;:+\-!@|<>=])
""", re.X | re.S | re.A)


class Tok:
  __slots__ = ("kind", "text", "pos")

  def __init__(self, kind: str, text: str, pos: Pos): self.kind, self.text, self.pos = kind, text, pos

  def __repr__(self) -> str: return f"{self.kind}:{self.text!r}@{self.pos}"


def tokenize(text: str, path: str = "<ptx>") -> list[Tok]:
  if m := _NON_ASCII.search(text):
    line, bol = text.count("\n", 0, m.start()) + 1, text.rfind("\n", 0, m.start()) + 1
    raise PtxError(f"unexpected non-ASCII character {quote(m.group())}", Pos(path, line, m.start() - bol + 1),
                   _line(text, bol))
  out, i, line, bol = [], 0, 1, 0
  while i < len(text):
    m = _TOKEN.match(text, i)
    if not m: raise PtxError(f"unexpected character {quote(text[i])}", Pos(path, line, i - bol + 1), _line(text, bol))
    k = m.lastgroup
    if k == "nl": line, bol = line + 1, m.end()
    elif k == "ws":
      line += m.group().count("\n")
      if "\n" in m.group(): bol = i + m.group().rindex("\n") + 1
    else: out.append(Tok(k, m.group(), Pos(path, line, i - bol + 1)))
    i = m.end()
  out.append(Tok("eof", "", Pos(path, line, i - bol + 1)))
  return out


def _line(text: str, bol: int) -> str:
  end = text.find("\n", bol)
  return text[bol:end if end >= 0 else len(text)]


def _int(t: str) -> int | None:
  """An integer literal's value as ptxas reads it: the digits accumulate modulo 2^64, and a digit that follows an
  accumulator with bit 63 set is "Constant overflow" (None). So 0x1ffffffffffffffff is 2^64 - 1 and 0x1 followed by
  any number of zeros is 0, but 0x8 followed by 16 digits overflows (ptxas 13 agrees on 400 random literals, every
  base). Hex and binary need no arithmetic: bit 63 of a prefix is the top bit of its 16th-last (64th-last) digit."""
  t = t.rstrip("U")
  base, ds = (16, t[2:]) if t[:2] in ("0x", "0X") else (2, t[2:]) if t[:2] in ("0b", "0B") else \
    (8, t[1:]) if len(t) > 1 and t[0] == "0" else (10, t)
  if base in (2, 16):
    w = 64 if base == 2 else 16
    return None if any(c > ("0" if base == 2 else "7") for c in ds[:-w]) else int(ds[-w:], base)
  v = 0
  for i, c in enumerate(ds):
    if i and v >> 63: return None
    v = (v * base + ord(c) - 48) & 0xFFFFFFFFFFFFFFFF
  return v


def _numbered(name: str) -> tuple[str, str] | None:
  """(prefix, number) of a parameterized register's name (`%r12` -> ('%r', '12'); `%r012` -> ('%r0', '12'): no
  leading zero), or None. Linear in the name: the regex (.*?)(0|[1-9]\\d*) it replaces backtracked quadratically on
  a long digit run not at the end (14,700 characters: 3 s)."""
  body = name.rstrip("0123456789")
  digits = name[len(body):]
  if not digits: return None
  number = digits.lstrip("0") or "0"
  return name[:len(name) - len(number)], number


def _below(digits: str, n: int) -> bool:
  """int(digits) < n, without converting a register number of thousands of digits (%r999...9 is no register)."""
  return len(digits) <= len(str(n)) and int(digits) < n


class _Scope:
  """Registers and symbols declared in one `{ }` scope. A parameterized declaration `%r<N>` is kept as the range
  (prefix -> (N, type)), as ptxas does: `%p<2147483648>` declares 2^31 registers, instantly."""
  def __init__(self, parent: "_Scope | None"):
    self.parent, self.regs, self.ranges, self.syms = parent, {}, {}, {}
    self.depth = parent.depth + 1 if parent else 0

  def own(self, name: str) -> str | None:
    if name in self.regs: return self.regs[name]
    m = _numbered(name)
    r = self.ranges.get(m[0]) if m else None
    return r[1] if r and _below(m[1], r[0]) else None

  def reg(self, name: str) -> str | None:
    s = self
    while s:
      if (t := s.own(name)) is not None: return t
      s = s.parent
    return None

  def sym(self, name: str) -> VarDecl | Function | Prototype | None:
    s = self
    while s:
      if name in s.syms: return s.syms[name]
      s = s.parent
    return None


class Parser:
  def __init__(self, text: str, path: str):
    self.text, self.path = text, path
    self.lines = text.split("\n")
    self.toks = tokenize(text, path)
    self.i = 0
    self.files: dict[int, str] = {}
    self.top = _Scope(None)
    self.asize = 64
    self.bodies: dict[str, tuple[_Scope, dict]] = {}   # function -> (its scope, its labels), once read

  # -- token helpers
  @property
  def tok(self) -> Tok: return self.toks[self.i]

  def peek(self, k: int = 1) -> Tok: return self.toks[min(self.i + k, len(self.toks) - 1)]

  def err(self, msg: str, tok: Tok | Pos | None = None) -> PtxError:
    pos = tok.pos if isinstance(tok, Tok) else tok or self.tok.pos
    return PtxError(msg, pos, self.lines[pos.line - 1] if 0 < pos.line <= len(self.lines) else "")

  def next(self) -> Tok:
    t = self.tok
    self.i += 1
    return t

  def at(self, text: str) -> bool: return self.tok.text == text and self.tok.kind != "str"

  def accept(self, text: str) -> bool:
    if self.at(text): self.i += 1; return True
    return False

  def expect(self, text: str) -> Tok:
    if not self.at(text):
      raise self.err(f"expected '{text}', found {quote(self.tok.text) if self.tok.text else 'end of file'}")
    return self.next()

  def expect_kind(self, *kinds: str) -> Tok:
    if self.tok.kind not in kinds: raise self.err(f"expected {' or '.join(kinds)}, found {quote(self.tok.text)}")
    return self.next()

  def number(self) -> int:
    neg = self.accept("-")
    return self.integer(self.expect_kind("int"), neg)

  def integer(self, t: Tok, neg: bool = False) -> int:
    """An integer literal's value (below 2^64 in magnitude, as ptxas keeps it); past that, ptxas's "Constant
    overflow", located."""
    v = _int(t.text)
    if v is None: raise self.err(f"constant overflow: {quote(t.text)} does not fit 64 bits", t)
    return -v if neg else v

  # -- module
  def module(self) -> Module:
    version = target = None
    asize, items = 64, []
    while self.tok.kind != "eof":
      t = self.tok
      if t.text == ".version": self.next(); version = self.expect_kind("flt", "int").text
      elif t.text == ".target":
        self.next(); target = [self.expect_kind("word").text]
        while self.accept(","): target.append(self.expect_kind("word").text)
      elif t.text == ".address_size": self.next(); asize = self.asize = self.number()
      elif t.text == ".file":
        self.next(); n = self.number(); name = self.expect_kind("str").text[1:-1]
        while self.accept(","): self.next()  # timestamp, size
        self.files[n] = name
      elif t.text == ".section": items.append(self.section())
      elif t.text == ".pragma": items.append(self.pragma())
      elif t.text in (".entry", ".func") or t.text in (".visible", ".extern", ".weak", ".common") and \
          self.peek().text in (".entry", ".func"):
        items.append(self.function())
      elif t.text in (".global", ".const", ".shared", ".extern", ".visible", ".weak", ".common", ".tex"):
        d = self.vardecl(); self.expect(";"); self.declare(self.top, d.name, d, t); items.append(d)
      elif t.text == ".alias":
        raise self.err("'.alias' is not supported")
      else: raise self.err(f"unexpected {quote(t.text)} at module level")
    if version is None: raise self.err("missing .version directive", self.toks[0])
    if target is None: raise self.err("missing .target directive", self.toks[0])
    items = [replace(it, body=self.bind_files(it.body)) if isinstance(it, Function) and it.body else it for it in items]
    return Module(version, tuple(target), asize, tuple(sorted(self.files.items())), tuple(items), self.path)

  def bind_files(self, body: tuple) -> tuple:
    """Name each .loc's CUDA file (nvcc writes the .file table after the functions)."""
    def loc(l: Loc | None) -> Loc | None: return l and replace(l, file=self.files.get(l.index, ""))
    return tuple(loc(s) if isinstance(s, Loc) else replace(s, loc=loc(s.loc)) if isinstance(s, Instruction) else
                 Scope(self.bind_files(s.body)) if isinstance(s, Scope) else s for s in body)

  def declare(self, scope: _Scope, name: str, what, tok: Tok):
    old = scope.syms.get(name)
    redeclared = isinstance(old, Function) and isinstance(what, Function) and (old.body is None or what.body is None) \
      or any(isinstance(x, VarDecl) and x.linkage == "extern" for x in (old, what))
    if old is not None and not redeclared:
      raise self.err(f"duplicate definition of {quote(name)}", tok)
    scope.syms[name] = what

  def section(self) -> Section:
    self.next(); name = self.expect_kind("dir").text
    start = self.expect("{")
    depth, j = 1, self.i
    while depth:
      t = self.toks[j]
      if t.kind == "eof": raise self.err("unterminated .section", start)
      depth += {"{": 1, "}": -1}.get(t.text, 0) if t.kind == "punct" else 0
      j += 1
    end = self.toks[j - 1]
    body = self._slice(start.pos, end.pos)
    self.i = j
    return Section(name, "\n".join(l.strip() for l in body.strip().split("\n") if l.strip()))

  def _slice(self, a: Pos, b: Pos) -> str:
    """The source text strictly between two tokens' positions (a is one char)."""
    if a.line == b.line: return self.lines[a.line - 1][a.col:b.col - 1]
    first, last = self.lines[a.line - 1][a.col:], self.lines[b.line - 1][:b.col - 1]
    return "\n".join([first, *self.lines[a.line:b.line - 1], last])

  def pragma(self) -> Pragma:
    self.next(); ss = [self.expect_kind("str").text[1:-1]]
    while self.accept(","): ss.append(self.expect_kind("str").text[1:-1])
    self.expect(";")
    return Pragma(tuple(ss))

  # -- declarations
  def vardecl(self, in_params: bool = False) -> VarDecl:
    linkage = ""
    if self.tok.text in (".visible", ".extern", ".weak", ".common"): linkage = self.next().text[1:]
    sp = self.expect_kind("dir")
    if sp.text[1:] not in ("global", "const", "shared", "local", "param", "tex", "reg"):
      raise self.err(f"expected a state space, found {quote(sp.text)}", sp)
    align = vec = 0
    attrs, typ = [], None
    while self.tok.kind == "dir":
      d = self.next().text
      if d == ".align": align = self.number()
      elif d in (".v2", ".v4", ".v8"): vec = int(d[2:])
      elif d[1:] in TYPES or d in (".texref", ".samplerref", ".surfref"):
        if typ: raise self.err(f"second type {quote(d)} in declaration", self.toks[self.i - 1])
        typ = d[1:]
      elif d in (".ptr", ".global", ".const", ".shared", ".local") and in_params: attrs.append(d[1:])
      else: raise self.err(f"unexpected {quote(d)} in declaration", self.toks[self.i - 1])
    if typ is None: raise self.err("missing type in declaration")
    if align and align & (align - 1): raise self.err(f"alignment {align} is not a power of two", self.toks[self.i - 1])
    name = self.expect_kind("word")
    dims = []
    while self.accept("["):
      dims.append(-1 if self.at("]") else self.number())
      self.expect("]")
    init = None
    if self.accept("="): init = self.initializer()
    return VarDecl(sp.text[1:], typ, name.text, align, vec, tuple(dims), init, linkage, tuple(attrs))

  def initializer(self):
    if self.accept("{"):
      items = [self.initializer()]
      while self.accept(","): items.append(self.initializer())
      self.expect("}")
      return tuple(items)
    if self.tok.text in ("generic", "mask"):
      w = self.next().text; self.expect("("); s = self.expect_kind("word").text; self.expect(")")
      return (w, Sym(s))
    o = self.operand()
    if not isinstance(o, (Imm, Sym)): raise self.err("expected a constant initializer")
    return o

  def regdecl(self, scope: _Scope) -> RegDecl:
    self.expect(".reg")
    vec = 0
    if self.tok.text in (".v2", ".v4", ".v8"): vec = int(self.next().text[2:])
    t = self.expect_kind("dir")
    if t.text[1:] not in TYPES: raise self.err(f"unknown register type {quote(t.text)}", t)
    names = []
    while True:
      n = self.expect_kind("word")
      cnt = 0
      if self.accept("<"): cnt = self.number(); self.expect(">")
      names.append((n.text, cnt))
      if not cnt: clash = n.text if scope.own(n.text) is not None else None
      elif n.text in scope.ranges: clash = f"{n.text}0"
      else: clash = next((r for r in scope.regs
                          if (m := _numbered(r)) and m[0] == n.text and _below(m[1], cnt)), None)
      if clash: raise self.err(f"duplicate register {quote(clash)}", n)
      if cnt: scope.ranges[n.text] = (cnt, t.text[1:])
      else: scope.regs[n.text] = t.text[1:]
      if not self.accept(","): break
    self.expect(";")
    return RegDecl(t.text[1:], tuple(names), vec)

  def params(self) -> tuple[VarDecl, ...]:
    self.expect("(")
    ps = []
    if not self.at(")"):
      while True:
        ps.append(self.vardecl(in_params=True))
        if not self.accept(","): break
    self.expect(")")
    return tuple(ps)

  # -- functions
  def function(self) -> Function:
    linkage = ""
    if self.tok.text in (".visible", ".extern", ".weak", ".common"): linkage = self.next().text[1:]
    kind = self.next().text[1:]
    rets = self.params() if self.at("(") else ()
    name = self.expect_kind("word")
    params = self.params() if self.at("(") else ()
    perf = []
    while self.tok.kind == "dir":
      d = self.next().text[1:]
      vals = []
      if self.tok.kind == "int":
        vals.append(self.number())
        while self.accept(","): vals.append(self.number())
      perf.append((d, tuple(vals)))
    f = Function(kind, name.text, params, rets, None, linkage, tuple(perf))
    self.declare(self.top, name.text, f, name)
    if self.accept(";"): return f
    scope = _Scope(self.top)
    for p in rets + params: scope.syms[p.name] = p
    self.labels: dict[str, Tok | str] = {}  # label -> its token; .branchtargets/.callprototype names -> kind
    self.uses: list[tuple[str, Tok]] = []
    self.expect("{")
    body = self.block(scope)
    self.expect("}")
    self.bodies[name.text] = (scope, self.labels)
    f = replace(f, body=self.resolve(body))
    self.top.syms[name.text] = f
    return f

  def block(self, scope: _Scope) -> tuple:
    out = []
    while not self.at("}"):
      t = self.tok
      if t.kind == "eof": raise self.err("unexpected end of file in function body")
      if t.text == "{":
        if scope.depth >= self.MAX_BLOCKS: raise self.err("blocks nested too deeply", t)
        self.next(); inner = _Scope(scope); body = self.block(inner); self.expect("}"); out.append(Scope(body))
      elif t.text == ".reg": out.append(self.regdecl(scope))
      elif t.text in (".local", ".shared", ".param", ".const", ".global"):
        d = self.vardecl(); self.expect(";"); self.declare(scope, d.name, d, t); out.append(d)
      elif t.text == ".loc": out.append(self.loc())
      elif t.text == ".pragma": out.append(self.pragma())
      elif t.kind == "word" and self.peek().text == ":":
        self.next(); self.next()
        if self.at(".branchtargets"):
          self.next(); tg = [self.expect_kind("word")]
          while self.accept(","): tg.append(self.expect_kind("word"))
          self.expect(";")
          self.uses += [(x.text, x) for x in tg]
          self.labels[t.text] = "table"
          scope.syms[t.text] = bt = BranchTargets(t.text, tuple(x.text for x in tg)); out.append(bt)
        elif self.at(".callprototype"):
          self.next()
          rets = self.params() if self.at("(") else ()
          self.expect_kind("word")
          ps = self.params() if self.at("(") else ()
          attrs = []
          while self.tok.kind == "dir": attrs.append(self.next().text[1:])
          self.expect(";")
          self.labels[t.text] = "prototype"
          scope.syms[t.text] = pr = Prototype(t.text, rets, ps, tuple(attrs)); out.append(pr)
        else:
          if t.text in self.labels: raise self.err(f"duplicate label {quote(t.text)}", t)
          self.labels[t.text] = t; out.append(LabelDef(t.text))
      elif t.kind == "word" or t.text == "@": out.append(self.instruction(scope))
      else: raise self.err(f"unexpected {quote(t.text)} in function body")
    return tuple(out)

  def loc(self) -> Loc:
    self.next()
    idx, line, col = self.number(), self.number(), self.number()
    extra = ""
    if self.at(","):
      start = self.tok.pos
      while not (self.tok.pos.line != start.line or self.tok.kind == "eof"): self.next()
      l = self.lines[start.line - 1]
      extra = l[start.col - 1:].split("//")[0].strip()
    return Loc(idx, line, col, extra)

  # -- instructions and operands
  def instruction(self, scope: _Scope) -> Instruction:
    guard = None
    if self.accept("@"):
      neg = self.accept("!")
      g = self.expect_kind("word")
      self.check_reg(scope, g.text, g, want="pred")
      guard = Guard(g.text, neg)
    w = self.expect_kind("word")
    opcode, *mods = w.text.split(".")
    ops, starts = [], []
    if not self.at(";"):
      while True:
        starts.append(self.tok)
        ops.append(self.operand(scope))
        if not self.accept(","): break
    end = self.tok
    if not self.at(";"): raise self.err(f"expected ',' or ';' after operand, found {quote(self.tok.text)}")
    self.next()
    form, why, bad, badop = forms.check(opcode, tuple(mods), tuple(ops), lambda r: scope.reg(r) or sreg_type(r))
    if form is None:
      if badop >= 0: raise self.err(why, starts[badop])
      col = w.pos.col + len(opcode) + sum(len(m) + 1 for m in mods[:bad]) if bad >= 0 else w.pos.col
      raise self.err(why, Pos(self.path, w.pos.line, col))
    for o, t in zip(ops, starts):
      self.note_uses(o, t, scope)
      if isinstance(o, Addr) and isinstance(o.base, Sym): self.check_space(scope, mods, o.base.name, t)
      if isinstance(o, Addr) and isinstance(o.base, Reg) and self.asize == 64 and scope.reg(o.base.name) in \
          ("b32", "u32", "s32") and not {m.split("::")[0] for m in mods} & {"shared", "local", "const", "param"}:
        raise self.err(f"32-bit address register {quote(o.base.name)} in a global/generic access with "
                       ".address_size 64", t)
    return Instruction(opcode, tuple(mods), tuple(ops), guard, None, w.pos)

  def note_uses(self, o, t: Tok, scope: _Scope):
    """Names not declared so far must turn out to be labels of this function (checked in resolve)."""
    name = o.name if isinstance(o, Sym) else o.base.name if isinstance(o, Addr) and isinstance(o.base, Sym) else None
    if name is not None and scope.sym(name) is None: self.uses.append((name, t))
    for x in o.items if isinstance(o, (Vec, Args)) else (): self.note_uses(x, t, scope)

  def check_space(self, scope: _Scope, mods: list[str], name: str, tok: Tok) -> None:
    """A named variable in an address must live in the instruction's state space (generic: global/shared/local)."""
    d = scope.sym(name)
    if not isinstance(d, VarDecl): return
    spaces = {m.split("::")[0] for m in mods} & {"global", "shared", "local", "const", "param"}
    if len(spaces) > 1: return  # cp.async.shared.global names two spaces, one per address
    want = spaces.pop() if spaces else "generic"
    if d.space != want and not (want == "generic" and d.space in ("global", "shared", "local")):
      raise self.err(f"state space mismatch: {quote(name)} is .{d.space}, the instruction accesses {want}", tok)

  def check_reg(self, scope: _Scope, name: str, tok: Tok, want: str = "") -> None:
    typ = scope.reg(name)
    if typ is None and name not in SREGS: raise self.err(f"undefined register {quote(name)}", tok)
    if want and typ != want: raise self.err(f"{quote(name)} is not a .{want} register", tok)

  MAX_NESTING = 8   # operands nest two deep in PTX (call arguments holding vectors); deeper is garbage
  MAX_BLOCKS = 100  # `{ }` scopes inside a function body (nvcc writes a few levels); keeps the parser off the C stack

  def operand(self, scope: _Scope | None = None, depth: int = 0):
    t = self.tok
    if depth > self.MAX_NESTING and t.text in ("{", "("): raise self.err("operand nested too deeply", t)
    if self.accept("{"):
      items = [self.operand(scope, depth + 1)]
      while self.accept(","): items.append(self.operand(scope, depth + 1))
      self.expect("}")
      return Vec(tuple(items))
    if self.accept("("):
      items = []
      if not self.at(")"):
        items.append(self.operand(scope, depth + 1))
        while self.accept(","): items.append(self.operand(scope, depth + 1))
      self.expect(")")
      return Args(tuple(items))
    if self.accept("["):
      base, off = None, 0
      if self.tok.kind == "word":
        b = self.next()
        base = self.name_operand(scope, b)
        if isinstance(base, Reg) and base.neg: raise self.err("negated register in address", b)
        if self.at("+") or self.at("-"):
          sign = -1 if self.next().text == "-" else 1
          off = sign * self.number()
      else: off = self.number()
      self.expect("]")
      return Addr(base, off)
    if self.accept("!"):
      w = self.expect_kind("word")
      r = self.name_operand(scope, w)
      if not isinstance(r, Reg): raise self.err("'!' applies to predicate registers only", t)
      return Reg(r.name, True)
    if t.kind in ("int", "f32", "f64", "flt") or t.text == "-" and self.peek().kind in ("int", "flt"):
      neg = self.accept("-")
      n = self.next()
      s = ("-" if neg else "") + n.text
      if n.kind == "int": return Imm(self.integer(n, neg), "int", s)
      if n.kind == "flt":
        if not math.isfinite(v := float(s)): raise self.err(f"constant overflow: {quote(s)} is not a finite double", n)
        return Imm(v, "float", s)
      if neg: raise self.err("'-' before a hex float literal", t)
      return Imm(int(n.text[2:], 16), n.kind, s)
    if t.kind == "word":
      self.next()
      o = self.name_operand(scope, t)
      if isinstance(o, Reg) and self.accept("|"):
        b = self.expect_kind("word")
        o2 = self.name_operand(scope, b)
        if not isinstance(o2, Reg): raise self.err(f"expected a register after '|', found {quote(b.text)}", b)
        return Pair(o, o2)
      if isinstance(o, Sym) and (self.at("+") or self.at("-")):
        sign = -1 if self.next().text == "-" else 1
        return Sym(o.name, sign * self.number())
      return o
    raise self.err(f"expected an operand, found {quote(t.text)}" if t.text else "expected an operand")

  def name_operand(self, scope: _Scope | None, t: Tok):
    n = t.text
    if n == "_": return Reg("_")
    if scope is not None and (scope.reg(n) is not None or n in SREGS): return Reg(n)
    if n.startswith("%"):
      if scope is None: return Sym(n)
      raise self.err(f"undefined register {quote(n)}", t)
    return Sym(n)

  # -- resolution of labels and symbols (after the whole function / module is read)
  def resolve(self, body: tuple) -> tuple:
    """Check the names left for the end of the function (labels may be used before they are defined), turn those
    naming labels into Label operands, and give each instruction the .loc in force before it."""
    for name, tok in self.uses:
      if name not in self.labels: raise self.err(f"undefined symbol {quote(name)}", tok)
    def fix(o):
      if isinstance(o, Sym) and o.name in self.labels and o.offset == 0 and not isinstance(self.labels[o.name], str):
        return Label(o.name)
      return type(o)(tuple(map(fix, o.items))) if isinstance(o, (Vec, Args)) else o
    def walk(b, loc):
      out = []
      for s in b:
        if isinstance(s, Loc): loc = s
        if isinstance(s, Instruction): s = replace(s, operands=tuple(map(fix, s.operands)), loc=loc)
        if isinstance(s, Scope):
          inner, loc = walk(s.body, loc); s = Scope(inner)
        out.append(s)
      return tuple(out), loc
    return walk(body, None)[0]


class Statements:
  """Function-body text parsed on its own, as if it stood at the end of a function of a fixed module: the module
  (`skeleton`, read once) gives the globals, the function (`function`, default: the first with a body) its parameters
  and the registers, variables and labels its body declares. `parse(text)` returns the statements, checked like the
  body of a whole module (forms, registers, scopes, labels: a label the text uses may be one of the function's); its
  errors name text's own line:col. For tools that look at one statement at a time, and for the reliability suite,
  which feeds millions of mutated statements this way (a whole module per statement costs ~10 times more)."""

  def __init__(self, skeleton: str, function: str | None = None, path: str = "<ptx>"):
    p = Parser(skeleton, path)
    self.module = p.module()
    name = function or next(iter(self.module.functions), None)
    if name not in p.bodies: raise PtxError(f"no function {quote(str(name))} with a body in the skeleton")
    self.top, (self.scope, self.labels), self.asize, self.path = p.top, p.bodies[name], p.asize, path

  def parse(self, text: str | bytes) -> tuple:
    if isinstance(text, bytes): text = text.decode("latin-1")
    p = Parser(text + "\n}", self.path)     # the function's closing brace
    p.top, p.asize, p.labels, p.uses = self.top, self.asize, dict(self.labels), []
    scope = _Scope(self.scope.parent)          # the function's own scope, a copy: what the text declares stays here
    scope.regs, scope.ranges, scope.syms = dict(self.scope.regs), dict(self.scope.ranges), dict(self.scope.syms)
    body = p.block(scope)
    p.expect("}")
    if p.tok.kind != "eof": raise p.err("unbalanced '}' in the statements", p.toks[p.i - 1])
    return p.resolve(body)


def parse(text: str | bytes, path: str = "<ptx>") -> Module:
  """Parse a whole PTX module; raises PtxError (path:line:col) on anything ptxas would reject that we check."""
  if isinstance(text, bytes): text = text.decode("latin-1")   # any byte past ASCII is the located error ptxas gives
  return Parser(text, path).module()
