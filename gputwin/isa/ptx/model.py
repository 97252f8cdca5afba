"""The PTX module as typed, frozen dataclasses: what `parse` returns and `format_ptx` prints.

Names follow the PTX ISA: a Module holds directives and Functions (`.entry` kernels, `.func` device functions);
a Function body is a tuple of statements (declarations, labels, `{ }` scopes, `.loc`, instructions). Source
positions (`Pos`) never take part in equality, so a printed and reparsed module compares equal to the original.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

# Fundamental types of the PTX ISA (section "Fundamental Types") plus the packed/alternate-float ones.
TYPES = frozenset("""pred b1 b8 b16 b32 b64 b128 u8 u16 u32 u64 s8 s16 s32 s64 f16 f16x2 f32 f64 bf16 bf16x2 tf32
  e4m3 e5m2 e4m3x2 e5m2x2 e4m3x4 e5m2x4 e2m1 e2m1x2 e2m1x4 e2m3 e3m2 e2m3x2 e3m2x2 e2m3x4 e3m2x4 ue8m0x2 ue8m0
  u16x2 s16x2 u4 s4 f32x2 b1024""".split())
SPACES = ("reg", "sreg", "const", "global", "local", "param", "shared", "tex")


@dataclass(frozen=True)
class Pos:
  """Where a token was in the PTX text: path, 1-based line and column."""
  path: str
  line: int
  col: int

  def __str__(self) -> str: return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Loc:
  """A `.loc file line col[, function_name ..., inlined_at ...]` debug directive; `file` is the CUDA path when the
  module declares it with `.file`."""
  index: int
  line: int
  col: int
  extra: str = ""  # the raw tail after the column (function_name/inlined_at), kept for printing
  file: str = field(default="", compare=False)

  def __str__(self) -> str: return f"{self.file or self.index}:{self.line}"


# ---- operands
@dataclass(frozen=True)
class Reg:
  """A register (`%r1`, `%tid.x`, a named `.reg`), negated with `!` where a predicate operand allows it."""
  name: str
  neg: bool = False


@dataclass(frozen=True)
class Imm:
  """An immediate. kind: 'int' (decimal/hex/octal/binary, optional U suffix), 'f32' (0fXXXXXXXX), 'f64'
  (0dXXXXXXXXXXXXXXXX) or 'float' (decimal floating literal). value is the int or the float's bit pattern/float."""
  value: int | float
  kind: str = "int"
  text: str = ""  # the spelling, so the printer reproduces it

  def __str__(self) -> str: return self.text or str(self.value)


@dataclass(frozen=True)
class Sym:
  """A variable, function or parameter name, optionally `+offset` (mov.u64 %rd, var+8)."""
  name: str
  offset: int = 0


@dataclass(frozen=True)
class Label:
  """A branch target in the current function."""
  name: str


@dataclass(frozen=True)
class Vec:
  """A brace vector operand `{%r1, %r2}` (`_` is the sink register)."""
  items: tuple["Operand", ...]


@dataclass(frozen=True)
class Addr:
  """A memory operand `[base+offset]`; base is a Reg, a Sym or None (`[0x100]`)."""
  base: "Reg | Sym | None"
  offset: int = 0


@dataclass(frozen=True)
class Pair:
  """Two destinations written `d|p` (setp, shfl.sync, match.all)."""
  a: Reg
  b: Reg


@dataclass(frozen=True)
class Args:
  """A parenthesised list, as in `call (ret), fn, (a, b)`."""
  items: tuple["Operand", ...]


Operand = Union[Reg, Imm, Sym, Label, Vec, Addr, Pair, Args]


@dataclass(frozen=True)
class Guard:
  """The `@p` / `@!p` predicate guard of an instruction."""
  reg: str
  neg: bool = False


@dataclass(frozen=True)
class Instruction:
  """One PTX instruction. opcode is the first word (`ld`, `cp`, `mma`); modifiers are the dot-suffixes in source
  order (types included); types are the modifiers that name PTX types, in order."""
  opcode: str
  modifiers: tuple[str, ...]
  operands: tuple[Operand, ...]
  guard: Guard | None = None
  loc: Loc | None = None
  pos: Pos | None = field(default=None, compare=False)

  @property
  def name(self) -> str: return ".".join((self.opcode,) + self.modifiers)

  @property
  def types(self) -> tuple[str, ...]: return tuple(m for m in self.modifiers if m in TYPES)


# ---- declarations and statements
@dataclass(frozen=True)
class RegDecl:
  """`.reg .type names;` where each name is either one register or a range `%r<12>` (count > 0)."""
  type: str
  names: tuple[tuple[str, int], ...]  # (name, count); count 0 = a single register called name
  vec: int = 0

  def registers(self) -> list[str]:
    return [r for n, c in self.names for r in ([f"{n}{i}" for i in range(c)] if c else [n])]


@dataclass(frozen=True)
class VarDecl:
  """A variable in a state space: `[linkage] .space [.align N] [.vN] .type name[dims] [= init]`. dims holds the array
  sizes (-1 for `[]`: an unsized `.extern .shared` or initialised array). init is a nested tuple of Imm/Sym/
  ('generic', Sym)."""
  space: str
  type: str
  name: str
  align: int = 0
  vec: int = 0
  dims: tuple[int, ...] = ()
  init: object = None
  linkage: str = ""
  attrs: tuple[str, ...] = ()  # .ptr/.global-style param attributes, in order


@dataclass(frozen=True)
class LabelDef:
  """A label definition `name:`."""
  name: str


@dataclass(frozen=True)
class BranchTargets:
  """`name: .branchtargets L1, L2, ...;` (the table brx.idx indexes)."""
  name: str
  targets: tuple[str, ...]


@dataclass(frozen=True)
class Prototype:
  """`name: .callprototype (rets) _ (params) [.noreturn];` for indirect calls; params kept as VarDecls."""
  name: str
  rets: tuple[VarDecl, ...]
  params: tuple[VarDecl, ...]
  attrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pragma:
  strings: tuple[str, ...]


@dataclass(frozen=True)
class Scope:
  """A `{ ... }` block inside a function body (its .reg/.param declarations are local to it)."""
  body: tuple["Statement", ...]


Statement = Union[Instruction, RegDecl, VarDecl, LabelDef, BranchTargets, Prototype, Pragma, Loc, Scope]


@dataclass(frozen=True)
class Function:
  """An `.entry` (kernel) or `.func`. rets are the `.func` return parameters; body is None for a prototype-only
  declaration (`.extern .func f(...);`). perf holds `.maxntid/.reqntid/.minnctapersm/.maxnreg/.noreturn`-style
  directives as (name, values)."""
  kind: str  # 'entry' | 'func'
  name: str
  params: tuple[VarDecl, ...]
  rets: tuple[VarDecl, ...] = ()
  body: tuple[Statement, ...] | None = None
  linkage: str = ""
  perf: tuple[tuple[str, tuple[int, ...]], ...] = ()

  def instructions(self) -> list[Instruction]:
    """Every instruction in textual order, scopes flattened."""
    out: list[Instruction] = []
    def walk(body):
      for s in body:
        if isinstance(s, Instruction): out.append(s)
        elif isinstance(s, Scope): walk(s.body)
    walk(self.body or ())
    return out


@dataclass(frozen=True)
class Section:
  """A `.section` (DWARF for -G/-lineinfo): kept verbatim so the module prints back whole; not interpreted."""
  name: str
  text: str


@dataclass(frozen=True)
class Module:
  """A whole PTX module: header, `.file` table, and the module-level items in order."""
  version: str
  target: tuple[str, ...]
  address_size: int
  files: tuple[tuple[int, str], ...] = ()
  items: tuple["VarDecl | Function | Section | Pragma", ...] = ()
  path: str = field(default="<ptx>", compare=False)

  @property
  def functions(self) -> dict[str, Function]:
    return {f.name: f for f in self.items if isinstance(f, Function) and f.body is not None}

  @property
  def kernels(self) -> dict[str, Function]:
    return {n: f for n, f in self.functions.items() if f.kind == "entry"}
