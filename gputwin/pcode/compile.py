"""Typed IR -> Python source over numpy arrays, one function per instruction body, applied to a whole batch of
lanes at once.

Control flow becomes predication: every statement runs under a lane mask (None = all lanes); `if` narrows it,
`break` removes lanes from the loop's mask, `return` (in lambdas) retires lanes. Stores merge with `np.where`, so
inactive lanes keep their old values. Uniform branches (WAVE32, per-wave scalars) cost one `np.any` test.

The generated source is cached in memory and on disk (keyed by the sha256 of the pcode text and this
compiler's version) under the same cache root the vendor tables use.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from gputwin.pcode import runtime as rt
from gputwin.pcode.ir import BOOL, E, Program, S, Ty, locals_of, lv_ty

VERSION = 7  # bump when generated code changes


from gputwin.isa.vendor import cache_root  # noqa: E402,F401 - one cache root for every on-disk cache


def _ident(name: str) -> str:
  return "".join(c if c.isalnum() else "_" for c in name)


class Gen:
  def __init__(self, prog: Program):
    self.p = prog
    self.lines: list[str] = []
    self.n = 0
    self.consts: dict[str, object] = {}
    self.locals: dict[str, Ty] = {}

  def tmp(self, base: str = "t") -> str:
    self.n += 1
    return f"_{base}{self.n}"

  def emit(self, ind: int, s: str) -> None:
    self.lines.append("  " * ind + s)

  # ------------------------------------------------------------------ expressions
  def k(self, v, t: Ty) -> str:
    if t.kind == "int":
      return repr(int(v))
    key = f"_k_{t.kind}{t.bits}_{len(self.consts)}"
    for kk, vv in self.consts.items():  # reuse equal constants
      if kk.startswith(f"_k_{t.kind}{t.bits}_") and type(vv) is type(rt.typed(v, t.kind, t.bits)) and \
         repr(vv) == repr(rt.typed(v, t.kind, t.bits)):
        return kk
    self.consts[key] = rt.typed(v, t.kind, t.bits)
    return key

  def ex(self, e: E) -> str:
    op, a, t = e.op, e.args, e.ty
    if op == "const":
      return self.k(a[0], t)
    if op == "var":
      return "v_" + _ident(a[0])
    if op == "state":
      return "s_" + _ident(a[0])
    if op == "loopvar":
      return "l_" + _ident(a[0])
    if op == "wave":
      return {"laneId": "_lane", "wave32": "_w32", "wave64": "(not _w32)"}[a[0]]
    if op in ("bitcast", "cvt") and a[0].ty.kind in ("u", "b") and t.kind in ("u", "b") and a[0].ty.bits == t.bits:
      return self.ex(a[0])  # same bits, same container
    if op == "bitcast" and a[0].ty.kind in ("u", "b", "f") and t.kind in ("u", "b", "f") and a[0].ty.bits == t.bits \
       and t.bits in (16, 32, 64):
      return f"{self.ex(a[0])}.view(np.{'float' if t.kind == 'f' else 'uint'}{t.bits})"
    if op == "bitcast":
      s = a[0].ty
      return f"bc({self.ex(a[0])}, {s.kind!r}, {s.bits}, {t.kind!r}, {t.bits})"
    if op == "cvt":
      s = a[0].ty
      return f"cv({self.ex(a[0])}, {s.kind!r}, {s.bits}, {t.kind!r}, {t.bits})"
    if op == "bin":
      o, x, y = a
      if t.isf and o in "+-*/":  # (the NaN rule numpy's loops do not keep; bf16: in its f32 container, then rounded)
        r = f"fop({o!r}, {self.ex(x)}, {self.ex(y)})"
        return r if t.kind == "f" else f"rbf({r})"
      if o == "/" and not t.isf:
        r = f"idiv({self.ex(x)}, {self.ex(y)})"
      elif o == "%":
        r = f"irem({self.ex(x)}, {self.ex(y)})" if not t.isf else f"np.fmod({self.ex(x)}, {self.ex(y)})"
      elif o == "**":
        r = f"np.power({self.ex(x)}, {self.ex(y)})"
      elif t.kind == "bool":
        r = f"({self.ex(x)} {o} {self.ex(y)})"
      else:
        r = f"({self.ex(x)} {o} {self.ex(y)})"
      if t.kind == "bf":
        return f"rbf({r})"
      if t.kind in ("u", "i", "b") and rt.cbits(t.bits) != t.bits:
        return f"wr({r}, {t.kind!r}, {t.bits})"
      return r
    if op == "cmp":
      o, x, y = a
      if o == "<>":
        if x.ty.isf:
          return f"(({self.ex(x)} < {self.ex(y)}) | ({self.ex(x)} > {self.ex(y)}))"
        o = "!="
      return f"({self.ex(x)} {o} {self.ex(y)})"
    if op == "logic":
      return f"({self.ex(a[1])} {'&' if a[0] == '&&' else '|'} {self.ex(a[2])})"
    if op == "not":
      return f"np.logical_not({self.ex(a[0])})"
    if op == "inv":
      return f"(~{self.ex(a[0])})" if t.kind != "bool" else f"np.logical_not({self.ex(a[0])})"
    if op == "neg":
      r = f"(-{self.ex(a[0])})"
      return f"wr({r}, {t.kind!r}, {t.bits})" if t.kind in ("u", "i", "b") and rt.cbits(t.bits) != t.bits else r
    if op == "sel":
      return f"sel({self.ex(a[0])}, {self.ex(a[1])}, {self.ex(a[2])})" if t.kind != "int" else \
        f"({self.ex(a[1])} if {self.ex(a[0])} else {self.ex(a[2])})"
    if op == "shift":
      o, x, y = a
      if t.kind == "int":
        return f"({self.ex(x)} {o} {self.ex(y)})"
      return f"{'shl' if o == '<<' else 'shr'}({self.ex(x)}, {self.ex(y)}, {t.bits})"
    if op == "slice":
      return f"sl({self.ex(a[0])}, {self.ex(a[1])}, {a[2]})"
    if op == "rev":
      return f"rev({self.ex(a[0])}, {a[1]})"
    if op == "bit":
      return f"bt({self.ex(a[0])}, {self.ex(a[1])})"
    if op == "concat":
      return "cat(" + ", ".join(f"({self.ex(p)}, {p.ty.bits})" for p in a) + ")"
    if op == "call":
      name, args = a
      tys = tuple((x.ty.kind, x.ty.bits) for x in args)
      vals = "".join(", " + self.ex(x) for x in args)
      return f"call(_ctx, {name!r}, {(t.kind, t.bits)!r}, {tys!r}{vals})"
    if op == "lcall":
      key, args = a
      return f"{self.lname(key)}(_m{''.join(', ' + self.ex(x) for x in args)})"
    if op == "mem":
      return f"mrd(_ctx, {self.ex(a[0])}, {a[1]}, _m)"
    if op == "reg":
      return f"rrd(_ctx, {a[0]!r}, ({', '.join(self.ex(x) for x in a[1])},), {a[2]})"
    if op == "aget":
      return f"ag(v_{_ident(a[0])}, {self.ex(a[1])})"
    if op == "array":
      return f"newarr({a[0]}, {t.kind!r}, {t.bits})"
    raise NotImplementedError(op)

  def lname(self, key) -> str:
    """One Python function per lambda and argument types, numbered in order of first use (deterministic)."""
    return f"_L_{_ident(key[0])}_{list(self.p.lambdas).index(key)}"

  # ------------------------------------------------------------------ statements
  def block(self, stmts, ind: int, m: str, loop: str | None = None, fn: bool = False) -> None:
    if not stmts:
      self.emit(ind, "pass")
    for st in stmts:
      self.stmt(st, ind, m, loop, fn)

  def stmt(self, st: S, ind: int, m: str, loop: str | None, fn: bool) -> None:
    op, a = st.op, st.args
    # the mask a statement runs under: `_m` is rebound by break/return so later statements see retired lanes
    if op == "note":
      self.emit(ind, f"pass  # {a[0]}")
    elif op == "eval":
      self.emit(ind, f"_ = {self.ex(a[0])}")
    elif op == "assign":
      lv, val = a
      if val.op == "array":  # `declare tmp : 32'B[64]` creates the array in every lane
        self.emit(ind, f"v_{_ident(lv[1])} = {self.ex(val)}")
      else:
        self.store(lv, self.ex(val), ind, m)
    elif op == "if":
      arms, els = a
      rest = m
      for c, body in arms:
        cv_, mi = self.tmp("c"), self.tmp("m")
        self.emit(ind, f"_m = {rest}")
        self.emit(ind, f"{cv_} = {self.ex(c)}")
        self.emit(ind, f"{mi} = band({rest}, {cv_})")
        r2 = self.tmp("r")
        self.emit(ind, f"{r2} = andnot({rest}, {cv_})")
        self.emit(ind, f"if anyt({mi}):")
        self.emit(ind + 1, f"_m = {mi}")
        self.block(body, ind + 1, mi, loop, fn)
        rest = r2
      if els:
        self.emit(ind, f"if anyt({rest}):")
        self.emit(ind + 1, f"_m = {rest}")
        self.block(els, ind + 1, rest, loop, fn)
      self.emit(ind, f"_m = {m}")
    elif op == "for":
      var, lo, hi, body = a
      lm = self.tmp("lm")
      self.emit(ind, f"{lm} = {m}")
      self.emit(ind, f"for l_{_ident(var)} in range(iu({self.ex(lo)}, {m}), iu({self.ex(hi)}, {m}) + 1):")
      self.emit(ind + 1, f"if not anyt({lm}): break")
      self.emit(ind + 1, f"_m = {lm}")
      self.block(body, ind + 1, lm, lm, fn)
      self.emit(ind, f"_m = {m}")
    elif op == "while":
      cond, body = a
      lm, it = self.tmp("lm"), self.tmp("it")
      self.emit(ind, f"{lm} = {m}")
      self.emit(ind, f"for {it} in range(1 << 20):")
      self.emit(ind + 1, f"_m = {lm}")
      self.emit(ind + 1, f"{lm} = band({lm}, {self.ex(cond)})")
      self.emit(ind + 1, f"if not anyt({lm}): break")
      self.emit(ind + 1, f"_m = {lm}")
      self.block(body, ind + 1, lm, lm, fn)
      self.emit(ind, "else:")
      self.emit(ind + 1, "raise PcodeError('while loop did not terminate', ARCH, INST)")
      self.emit(ind, f"_m = {m}")
    elif op == "break":
      if loop is None:
        raise ValueError("break outside a loop")
      self.emit(ind, f"{loop} = andnot({loop}, True if _m is None else _m) if _m is not None else False")
      self.emit(ind, f"_m = {loop}")
    elif op == "return":
      self.emit(ind, f"_ret = mg(_m, {self.ex(a[0])}, _ret)")
      self.emit(ind, "_live = andnot(_live, True if _m is None else _m) if _m is not None else False")
      self.emit(ind, "_m = _live")
    else:
      raise NotImplementedError(op)

  def read_lv(self, lv: tuple) -> str:
    k = lv[0]
    if k == "var":
      return "v_" + _ident(lv[1])
    if k == "state":
      return "s_" + _ident(lv[1])
    if k == "as":
      b = lv_ty(lv[1])
      return f"bc({self.read_lv(lv[1])}, {b.kind!r}, {b.bits}, {lv[2].kind!r}, {lv[2].bits})"
    if k == "slice":
      return f"sl({self.raw_lv(lv[1])}, {self.ex(lv[2])}, {lv[3]})"
    if k == "reg":
      return f"rrd(_ctx, {lv[1]!r}, ({', '.join(self.ex(x) for x in lv[2])},), {lv[3]})"
    if k == "mem":
      return f"mrd(_ctx, {self.ex(lv[1])}, {lv[2]}, _m)"
    if k == "aset":
      return f"ag(v_{_ident(lv[1])}, {self.ex(lv[2])})"
    if k == "bit":
      return f"bt({self.raw_lv(lv[1])}, {self.ex(lv[2])})"
    raise NotImplementedError(k)

  def raw_lv(self, lv: tuple) -> str:
    t = lv_ty(lv)
    r = self.read_lv(lv)
    return r if t.kind in ("u", "b", "bool") else f"ubits({r}, {t.kind!r}, {t.bits})"

  def store(self, lv: tuple, val: str, ind: int, m: str) -> None:
    """Emit `lv = val` under mask m (None: every lane)."""
    k = lv[0]
    if k in ("var", "state"):
      name = ("v_" if k == "var" else "s_") + _ident(lv[1])
      self.emit(ind, f"{name} = {val}" if m == "None" else f"{name} = mg({m}, {val}, {name})")
      if k == "state" and lv[1] == "ROUND_MODE":  # conversions read the rounding mode from the context
        self.emit(ind, f"_ctx.rmode = {name}")
    elif k == "as":
      t, b = lv[2], lv_ty(lv[1])
      raw = f"ubits({val}, {t.kind!r}, {t.bits})" if t.kind not in ("u", "b", "bool") else val
      if b.bits == t.bits and b.kind in ("u", "b"):
        self.store(lv[1], raw if t.kind != "bool" else f"cv({val}, 'bool', 1, 'b', {b.bits})", ind, m)
      else:
        self.store(lv[1], f"from_bits(ins({self.raw_lv(lv[1])}, {raw}, 0, {t.bits}, {b.bits}), {b.kind!r}, {b.bits})"
                   if b.kind not in ("u", "b") else f"ins({self.raw_lv(lv[1])}, {raw}, 0, {t.bits}, {b.bits})", ind, m)
    elif k == "slice":
      b = lv_ty(lv[1])
      new = f"ins({self.raw_lv(lv[1])}, {val}, {self.ex(lv[2])}, {lv[3]}, {b.bits})"
      self.store(lv[1], new if b.kind in ("u", "b") else f"from_bits({new}, {b.kind!r}, {b.bits})", ind, m)
    elif k == "bit":
      b = lv_ty(lv[1])
      new = f"sbit({self.raw_lv(lv[1])}, {self.ex(lv[2])}, {val}, {m}, {b.bits})"
      self.store(lv[1], new if b.kind in ("u", "b") else f"from_bits({new}, {b.kind!r}, {b.bits})", ind, "None")
    elif k == "aset":
      self.emit(ind, f"v_{_ident(lv[1])} = aset(v_{_ident(lv[1])}, {self.ex(lv[2])}, {val}, {m})")
    elif k == "mem":
      self.emit(ind, f"mwr(_ctx, {self.ex(lv[1])}, {val}, {lv[2]}, {m})")
    elif k == "reg":
      self.emit(ind, f"rwr(_ctx, {lv[1]!r}, ({', '.join(self.ex(x) for x in lv[2])},), {val}, {lv[3]}, {m})")
    elif k == "concat":
      tv = self.tmp("cat")
      self.emit(ind, f"{tv} = {val}")
      off = 0
      for part in reversed(lv[1]):
        pt = lv_ty(part)
        pv = f"sl({tv}, {off}, {pt.bits})"
        if pt.kind not in ("u", "b", "bool"):
          pv = f"from_bits({pv}, {pt.kind!r}, {pt.bits})"
        self.store(part, pv, ind, m)
        off += pt.bits
    else:
      raise NotImplementedError(k)

  # ------------------------------------------------------------------ whole body
  def init_locals(self, stmts, ind: int, skip=()) -> None:
    for name, t in locals_of(stmts).items():
      if name in skip:
        continue
      if t.kind == "arr":
        self.emit(ind, f"v_{_ident(name)} = None")
      else:
        self.emit(ind, f"v_{_ident(name)} = {self.k(0, t) if t.kind != 'int' else '0'}")

  def program(self) -> str:
    p = self.p
    self.emit(0, "def run(_st, _m, _ctx):")
    self.emit(1, "_lane, _w32 = _ctx.lane, _ctx.wave32")
    names = dict(p.inputs)
    for o, w in p.outputs.items():
      names[o] = max(names.get(o, 0), w)
    for nm, w in names.items():
      self.emit(1, f"s_{_ident(nm)} = ld(_st, {nm!r}, {w})")
    if "ROUND_MODE" in names:
      self.emit(1, "_ctx.rmode = s_ROUND_MODE")
    self.init_locals(p.body, 1)
    for key, (params, body, ret) in p.lambdas.items():
      self.emit(1, f"def {self.lname(key)}(_m, {', '.join('v_' + _ident(x) for x in params)}):")
      self.emit(2, f"_ret, _live = {self.k(0, ret)}, _m")
      self.init_locals(body, 2, skip=params)
      self.block(body, 2, "_live", None, True)
      self.emit(2, "return _ret")
    self.emit(1, "_m0 = _m")
    self.block(p.body, 1, "_m0")
    self.emit(1, "return {" + ", ".join(f"{o!r}: s_{_ident(o)}" for o in p.outputs) + "}")
    return "\n".join(self.lines) + "\n"


def generate(prog: Program) -> tuple[str, dict]:
  """IR -> (Python source of `run(state, mask, ctx)`, constants it references)."""
  g = Gen(prog)
  src = g.program()
  return src, g.consts


def _compiler_stamp() -> str:
  """Hash of the compiler's own sources, so an edited compiler never reuses stale generated code."""
  h = hashlib.sha256(str(VERSION).encode())
  for f in ("parser.py", "ir.py", "compile.py", "errata.py", "__init__.py"):
    h.update((Path(__file__).parent / f).read_bytes())
  return h.hexdigest()[:12]


STAMP = _compiler_stamp()


def source_key(text: str) -> str:
  return hashlib.sha256(f"{STAMP}|{text}".encode()).hexdigest()[:24]
