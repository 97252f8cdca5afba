"""Module -> PTX text that ptxas accepts and `parse` reads back to an equal Module."""
from __future__ import annotations

from gputwin.isa.ptx.model import (Addr, Args, BranchTargets, Function, Imm, Instruction, Label, LabelDef, Loc, Module,
                                   Pair, Pragma, Prototype, Reg, RegDecl, Scope, Section, Sym, VarDecl, Vec)


def _off(n: int) -> str: return f"+{n}" if n else ""  # nvcc spells negative offsets `+-4`


def operand(o) -> str:
  """One operand in PTX spelling."""
  if isinstance(o, Reg): return ("!" if o.neg else "") + o.name
  if isinstance(o, Imm): return str(o)
  if isinstance(o, Sym): return o.name + (f"+{o.offset}" if o.offset > 0 else f"-{-o.offset}" if o.offset else "")
  if isinstance(o, Label): return o.name
  if isinstance(o, Vec): return "{" + ", ".join(map(operand, o.items)) + "}"
  if isinstance(o, Args): return "(" + ", ".join(map(operand, o.items)) + ")"
  if isinstance(o, Pair): return f"{operand(o.a)}|{operand(o.b)}"
  if isinstance(o, Addr):
    if o.base is None: return f"[{o.offset}]"
    return f"[{operand(o.base)}{_off(o.offset)}]"
  raise TypeError(f"not a PTX operand: {o!r}")


def instruction(i: Instruction) -> str:
  g = f"@{'!' if i.guard.neg else ''}{i.guard.reg} " if i.guard else ""
  ops = ", ".join(map(operand, i.operands))
  return f"{g}{i.name}" + (f" {ops};" if ops else ";")


def _init(v) -> str:
  if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str): return f"{v[0]}({v[1].name})"
  if isinstance(v, tuple): return "{" + ", ".join(map(_init, v)) + "}"
  return operand(v)


def vardecl(d: VarDecl) -> str:
  parts = ([f".{d.linkage}"] if d.linkage else []) + [f".{d.space}"] + [f".{a}" for a in d.attrs]
  parts += ([f".align {d.align}"] if d.align else []) + ([f".v{d.vec}"] if d.vec else []) + [f".{d.type}"]
  dims = "".join(f"[{n}]" if n >= 0 else "[]" for n in d.dims)
  return " ".join(parts) + f" {d.name}{dims}" + (f" = {_init(d.init)}" if d.init is not None else "")


def _params(ps) -> str: return "(" + ", ".join(map(vardecl, ps)) + ")"


def statement(s, ind: str = "\t") -> list[str]:
  if isinstance(s, Instruction): return [ind + instruction(s)]
  if isinstance(s, RegDecl):
    names = ", ".join(f"{n}<{c}>" if c else n for n, c in s.names)
    return [f"{ind}.reg {f'.v{s.vec} ' if s.vec else ''}.{s.type} {names};"]
  if isinstance(s, VarDecl): return [f"{ind}{vardecl(s)};"]
  if isinstance(s, LabelDef): return [f"{s.name}:"]
  if isinstance(s, BranchTargets): return [f"{s.name}: .branchtargets {', '.join(s.targets)};"]
  if isinstance(s, Prototype):
    attrs = "".join(f" .{a}" for a in s.attrs)
    return [f"{ind}{s.name}: .callprototype {_params(s.rets) + ' ' if s.rets else ''}_ {_params(s.params)}{attrs};"]
  if isinstance(s, Pragma): return [f"{ind}.pragma " + ", ".join(f'"{x}"' for x in s.strings) + ";"]
  if isinstance(s, Loc): return [f"{ind}.loc {s.index} {s.line} {s.col}" + (f" {s.extra}" if s.extra else "")]
  if isinstance(s, Scope): return [ind + "{"] + [l for x in s.body for l in statement(x, ind + "\t")] + [ind + "}"]
  raise TypeError(f"not a PTX statement: {s!r}")


def function(f: Function) -> list[str]:
  head = ([f".{f.linkage}"] if f.linkage else []) + [f".{f.kind}"] + ([_params(f.rets)] if f.rets else []) + [f.name]
  out = [" ".join(head) + (" " + _params(f.params) if f.params or f.kind == "entry" else "")]
  out += [f".{d} " + ", ".join(map(str, v)) if v else f".{d}" for d, v in f.perf]
  if f.body is None: return [*out, ";"]
  return out + ["{"] + [l for s in f.body for l in statement(s)] + ["}"]


def format_ptx(m: Module) -> str:
  """The module as PTX text (header, .file table, items in order)."""
  out = [f".version {m.version}", f".target {', '.join(m.target)}", f".address_size {m.address_size}", ""]
  out += [f'.file {n} "{p}"' for n, p in m.files]
  for it in m.items:
    if isinstance(it, Function): out += function(it) + [""]
    elif isinstance(it, VarDecl): out.append(vardecl(it) + ";")
    elif isinstance(it, Section): out += [f".section {it.name}", "{", it.text, "}"]
    elif isinstance(it, Pragma): out += statement(it, "")
  return "\n".join(out) + "\n"
