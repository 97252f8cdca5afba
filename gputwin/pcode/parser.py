"""Lexer and parser for AMD's ISA-manual pseudocode ("pcode").

The language is the one printed in the RDNA3/RDNA4/CDNA3-4 manuals: statements separated by `;` or line breaks,
typed register accesses (`S0.u32`), bit slices (`x[31 : 16]`, `x[i * 4 +: 4]`), sized literals and casts (`1'1U`,
`64'U(x)`), `{ a, b }` concatenation, C-like operators, `if/elsif/else/endif`, `for i in a : b do ... endfor`,
`while ... do ... endwhile`, `declare`, and `lambda` helpers. The parser is newline-insensitive: a statement ends at
`;`, at a block keyword, or where the next token cannot continue the expression.

Output is a plain AST (tuples of `Node`s); `gputwin.pcode.ir` types and simplifies it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputwin.errors import PcodeError

# ------------------------------------------------------------------------------------------------ lexing

_TOKEN = re.compile(r"""
  (?P<ws>[ \t\r\n]+|//[^\n]*)
 |(?P<sized>\d+'(?:[-]?(?:0x[0-9a-fA-F]+|\d+\.\d+|\d+)[A-Za-z]*|[A-Za-z]+))
 |(?P<num>0x[0-9a-fA-F]+[A-Za-z]*|\d+\.\d+(?:[eE][-+]?\d+)?[A-Za-z]*|\d+[A-Za-z]*)
 |(?P<id>[A-Za-z_][A-Za-z_0-9]*)
 |(?P<str>"[^"\n]*")
 |(?P<op>\+:|\*\*|<<=|>>=|<<|>>|<=|>=|==|!=|<>|&&|\|\||\+=|-=|\*=|\|=|&=|\^=|\+\+|--|[-+*/%&|^~!<>=?:;,.\[\](){}])
""", re.X)

_TYPE_KINDS = {"U": "u", "I": "i", "F": "f", "B": "b", "BF": "bf"}
TYPE_NAME = re.compile(r"(u|i|f|b|bf|fp)(\d+)$")  # `.u32`, `.bf16`, `.fp8` ...


@dataclass(frozen=True, slots=True)
class Tok:
  kind: str  # ws num sized id str op eof
  text: str
  line: int
  col: int


def lex(text: str, fail) -> list[Tok]:
  toks, pos, line, lstart = [], 0, 1, 0
  while pos < len(text):
    m = _TOKEN.match(text, pos)
    if m is None:
      raise fail(f"unexpected character {text[pos]!r}", line, pos - lstart + 1)
    if m.lastgroup != "ws":
      toks.append(Tok(m.lastgroup, m.group(), line, pos - lstart + 1))
    nl = m.group().count("\n")
    if nl:
      line, lstart = line + nl, m.start() + m.group().rindex("\n") + 1
    pos = m.end()
  toks.append(Tok("eof", "", line, pos - lstart + 1))
  return toks


# ------------------------------------------------------------------------------------------------- AST

@dataclass(frozen=True, slots=True)
class Node:
  """One AST node. `op` names the construct; `args` are child nodes or plain values; `at` is (line, col)."""
  op: str
  args: tuple = ()
  at: tuple[int, int] = field(default=(0, 0), compare=False)

  def __repr__(self) -> str:
    return f"{self.op}({', '.join(map(repr, self.args))})"


def parse_number(text: str) -> tuple[int | float, str | None, int | None]:
  """`0x100000000ULL` -> (4294967296, 'u', 64); `2.0F` -> (2.0, 'f', 32); `16'4` -> (4, None, 16) etc.

  Returns (value, kind or None, bits or None). Hex literals keep a 'hex' flag in kind position as 'x' when they are
  untyped, because the manual casts hex literals to floats by bit pattern (`32'F(0xffc00000)`)."""
  m = re.fullmatch(r"(-?)(0x[0-9a-fA-F]+|\d+\.\d+(?:[eE][-+]?\d+)?|\d+)([A-Za-z]*)", text)
  if not m:
    raise ValueError(text)
  sign, digits, suf = m.groups()
  if "." in digits:
    val: int | float = float(digits)
  else:
    val = int(digits, 16) if digits.startswith("0x") else int(digits)
  val = -val if sign else val
  suf = suf.upper()
  kind, bits = {"": (None, None), "U": ("u", 32), "LL": ("i", 64), "ULL": ("u", 64), "F": ("f", 32), "L": ("i", 64),
                "UL": ("u", 64), "D": ("f", 64)}.get(suf, ("?", None))
  if kind == "?":
    raise ValueError(text)
  if kind is None and isinstance(val, float):
    kind, bits = "f", 64
  if kind is None and digits.startswith("0x"):
    kind = "x"
  return val, kind, bits


_BINOPS = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", ">", "<=", ">="), ("<<", ">>"),
           ("+", "-"), ("*", "/", "%"), ("**",)]
_ASSIGN = {"=", "+=", "-=", "*=", "|=", "&=", "^=", "<<=", ">>="}
_ENDERS = {"endif", "else", "elsif", "endfor", "endwhile", "eof", ")", "endfunction"}


class Parser:
  def __init__(self, text: str, arch: str = "", inst: str = ""):
    self.arch, self.inst = arch, inst
    self.toks = lex(text, self.fail)
    self.i = 0

  def fail(self, msg: str, line: int | None = None, col: int | None = None) -> PcodeError:
    if line is None:
      t = self.toks[self.i]
      line, col = t.line, t.col
    return PcodeError(msg, self.arch, self.inst, line, col or 0)

  # token helpers
  @property
  def tok(self) -> Tok: return self.toks[self.i]

  def peek(self, n: int = 1) -> Tok: return self.toks[min(self.i + n, len(self.toks) - 1)]

  def at(self, *texts: str) -> bool:
    t = self.tok
    return t.kind in ("op", "id") and t.text in texts

  def take(self, *texts: str) -> Tok:
    if texts and not self.at(*texts):
      raise self.fail(f"expected {' or '.join(map(repr, texts))}, found {self.tok.text or 'end of text'!r}")
    t = self.tok
    self.i += 1
    return t

  def maybe(self, *texts: str) -> bool:
    if self.at(*texts):
      self.i += 1
      return True
    return False

  def pos(self) -> tuple[int, int]: return (self.tok.line, self.tok.col)

  # statements
  def body(self) -> Node:
    b = self.block()
    if self.tok.kind != "eof":
      raise self.fail(f"unexpected {self.tok.text!r}")
    return b

  def block(self) -> Node:
    at, out = self.pos(), []
    while True:
      while self.maybe(";"):
        pass
      if self.tok.kind == "eof" or (self.tok.kind in ("id", "op") and self.tok.text in _ENDERS):
        return Node("block", tuple(out), at)
      out.append(self.stmt())
      ends = self.at(";") or self.tok.kind == "eof" or self.tok.text in _ENDERS
      if not (ends or self.tok.line > self.toks[self.i - 1].line):  # statements end at `;`, a keyword or a line break
        raise self.fail(f"unexpected {self.tok.text!r} after statement")

  def stmt(self) -> Node:
    at, t = self.pos(), self.tok
    if t.kind == "str":
      self.i += 1
      return Node("note", (t.text.strip('"'),), at)
    if t.kind == "id":
      w = t.text
      if w == "declare":
        self.i += 1
        name = self.ident()
        self.take(":")
        ty = self.type_tok()
        n = None
        if self.maybe("["):
          n = self.const_int()
          self.take("]")
        return Node("declare", (name, ty, n), at)
      if w == "if":
        self.i += 1
        arms = []
        cond = self.expr()
        self.take("then")
        arms.append((cond, self.block()))
        els = Node("block", (), self.pos())
        while True:
          if self.maybe("elsif"):
            cond = self.expr()
            self.take("then")
            arms.append((cond, self.block()))
          elif self.maybe("else"):
            els = self.block()
          else:
            break
        self.take("endif")
        return Node("if", (tuple(arms), els), at)
      if w == "for":
        self.i += 1
        var = self.ident()
        self.take("in")
        lo = self.expr()
        self.take(":")
        hi = self.expr()
        self.take("do")
        b = self.block()
        self.take("endfor")
        return Node("for", (var, lo, hi, b), at)
      if w == "while":
        self.i += 1
        cond = self.expr()
        self.take("do")
        b = self.block()
        self.take("endwhile")
        return Node("while", (cond, b), at)
      if w == "break":
        self.i += 1
        return Node("break", (), at)
      if w == "return":
        self.i += 1
        return Node("return", (self.expr(),), at)
      if self.peek().text == "=" and self.peek(2).text == "lambda":
        name = self.ident()
        self.take("=")
        self.take("lambda")
        self.take("(")
        params = []
        while not self.at(")"):
          params.append(self.ident())
          self.maybe(",")
        self.take(")")
        self.take("(")
        if self.tok.kind == "id" and self.tok.text in ("if", "declare", "for", "return"):
          b = self.block()
        else:  # expression lambda: `lambda(a, b) (expr)`
          e = self.expr()
          b = Node("block", (Node("return", (e,), e.at),), e.at)
        self.take(")")
        return Node("lambda", (name, tuple(params), b), at)
    lhs = self.expr()
    if self.tok.kind == "op" and self.tok.text in _ASSIGN:
      op = self.take().text
      rhs = self.expr()
      if op == "=" and self.at("="):  # chained `EXEC.u64[laneId] = D0.u64[laneId] = x`
        self.take()
        inner = Node("assign", (rhs, "=", self.expr()), at)
        return Node("block", (inner, Node("assign", (lhs, "=", rhs), at)), at)
      return Node("assign", (lhs, op, rhs), at)
    if self.at("++", "--"):
      op = self.take().text
      return Node("assign", (lhs, op[0] + "=", Node("const", (1, None, None), at)), at)
    if lhs.op == "call":
      return Node("callstmt", (lhs,), at)
    raise self.fail("expected an assignment or a call", *at)

  def ident(self) -> str:
    if self.tok.kind != "id":
      raise self.fail(f"expected a name, found {self.tok.text!r}")
    return self.take().text

  def const_int(self) -> int:
    t = self.take()
    try:
      v, _, _ = parse_number(t.text)
    except ValueError:
      v = None
    if not isinstance(v, int):
      raise self.fail("expected an integer constant", t.line, t.col)
    return v

  def type_tok(self) -> tuple[str, int]:
    t = self.take()
    m = re.fullmatch(r"(\d+)'([A-Za-z]+)", t.text) if t.kind == "sized" else None
    if not m or m.group(2) not in _TYPE_KINDS:
      raise self.fail(f"expected a type such as 32'U, found {t.text!r}", t.line, t.col)
    return _TYPE_KINDS[m.group(2)], int(m.group(1))

  # expressions
  def expr(self) -> Node:
    at = self.pos()
    c = self.binary(0)
    if self.maybe("?"):
      a = self.expr()
      self.take(":")
      b = self.expr()
      return Node("sel", (c, a, b), at)
    return c

  def binary(self, lvl: int) -> Node:
    if lvl == len(_BINOPS):
      return self.unary()
    at = self.pos()
    lhs = self.binary(lvl + 1)
    while self.tok.kind == "op" and self.tok.text in _BINOPS[lvl]:
      op = self.take().text
      rhs = self.binary(lvl + 1 if op != "**" else lvl)
      lhs = Node("bin", (op, lhs, rhs), at)
    return lhs

  def unary(self) -> Node:
    at = self.pos()
    if self.tok.kind == "op" and self.tok.text in ("-", "+", "!", "~"):
      op = self.take().text
      return Node("un", (op, self.unary()), at)
    return self.postfix(self.primary())

  def postfix(self, e: Node) -> Node:
    while True:
      at = self.pos()
      if self.at("."):
        self.take()
        name = self.ident()
        m = TYPE_NAME.fullmatch(name)
        e = Node("as", (e, m.group(1), int(m.group(2))), at) if m else Node("field", (e, name), at)
      elif self.at("["):
        self.take()
        a = self.expr()
        if self.maybe(":"):
          b = self.expr()
          self.take("]")
          e = Node("slice", (e, a, b), at)
        elif self.maybe("+:"):
          w = self.expr()
          self.take("]")
          e = Node("slicew", (e, a, w), at)
        else:
          self.take("]")
          e = Node("index", (e, a), at)
      elif self.at("(") and e.op == "name":
        self.take()
        args = []
        while not self.at(")"):
          args.append(self.expr())
          if not self.maybe(","):
            break
        self.take(")")
        e = Node("call", (e.args[0], tuple(args)), at)
      else:
        return e

  def primary(self) -> Node:
    at, t = self.pos(), self.tok
    if t.kind == "num":
      self.i += 1
      try:
        return Node("const", parse_number(t.text), at)
      except ValueError:
        raise self.fail(f"bad number {t.text!r}", *at) from None
    if t.kind == "sized":
      self.i += 1
      bits, rest = t.text.split("'", 1)
      if rest in _TYPE_KINDS:  # cast `64'U(x)`
        self.take("(")
        e = self.expr()
        self.take(")")
        return Node("cast", (e, _TYPE_KINDS[rest], int(bits)), at)
      try:
        v, k, _ = parse_number(rest)
      except ValueError:
        raise self.fail(f"bad sized literal {t.text!r}", *at) from None
      # `16'4` / `16'0` carry no signedness: signed, so they take the other operand's kind at equal width
      # (`n <= 16'0` on an i16 is a signed test); `8'0xff` is a raw bit pattern
      return Node("const", (v, {None: "i", "x": "b"}.get(k, k) if not isinstance(v, float) else "f", int(bits)), at)
    if t.kind == "id":
      if t.text in ("if", "then", "else", "elsif", "endif", "for", "do", "endfor", "declare", "lambda", "return"):
        raise self.fail(f"unexpected keyword {t.text!r}")
      self.i += 1
      return Node("name", (t.text,), at)
    if self.maybe("("):
      e = self.expr()
      self.take(")")
      return e
    if self.maybe("{"):
      parts = [self.expr()]
      while self.maybe(","):
        parts.append(self.expr())
      self.take("}")
      return Node("concat", tuple(parts), at)
    raise self.fail(f"unexpected {t.text or 'end of text'!r} in expression")


def parse(text: str, arch: str = "", inst: str = "") -> Node:
  """Parse one pcode body into a `block` Node; raises PcodeError(arch, inst, line, col) on bad input."""
  return Parser(text, arch, inst).body()
