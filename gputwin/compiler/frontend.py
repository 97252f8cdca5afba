"""Python frontend: `@kernel` turns a restricted, typed Python function into kernel IR.

The function is never executed; its source is parsed with `ast` and translated statement by statement.
  - parameters: scalars (`n: i32`, `a: f32`, ...) and global buffers (`x: Ptr[f32]`)
  - statements: assignment (also `x: f16 = 0.0`, tuples, `+=`), `buf[i] = v`, `if/elif/else`, `for i in range(...)`,
    calls to built-ins, a final bare `return`
  - expressions: arithmetic, comparisons, `and`/`or`/`not` on bools and `a if c else b` (short-circuit like
    Python when a side loads or calls: `i < n and x[i] > 0` never reads x[n]; otherwise a select), `buf[i]`,
    built-ins, casts `f32(x)`, module-level int/float constants
  - `//` and `%` on integers truncate toward zero (like C, unlike Python); `/` is float-only
Untyped literals take the type of the other operand; alone they default to i32 / f32. Mixing typed values of
different types is an error: cast explicitly. Every error names the Python file, line and column.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from gputwin.compiler import ir
from gputwin.compiler.ir import Block, Builder, Kernel, Loc, Type, Value
from gputwin.errors import CompileError

i8, i16, i32, i64, u8, u16, u32, u64 = ir.i8, ir.i16, ir.i32, ir.i64, ir.u8, ir.u16, ir.u32, ir.u64
f16, bf16, f32, f64, boolean = ir.f16, ir.bf16, ir.f32, ir.f64, ir.boolean


class Ptr:
  """Annotation for a global buffer argument: `x: Ptr[f32]`."""
  def __class_getitem__(cls, elem): return ir.ptr("global", elem)


def _stub(name):
  def f(*a, **k): raise CompileError(f"{name}() can only be called inside a @kernel function")
  f.__name__ = name
  return f


# Names usable inside kernels (importable so linters and IDEs know them; calling them from Python is an error).
BUILTINS = ("workitem_id", "workgroup_id", "workgroup_size", "num_workgroups", "global_id", "shared", "private",
            "barrier", "select", "fma", "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "sin", "cos", "floor", "ceil",
            "trunc", "bitcast") + tuple(f"atomic_{k}" for k in ("add", "sub", "min", "max", "and", "or", "xor", "xchg"))
globals().update({n: _stub(n) for n in BUILTINS})
__all__ = ["kernel", "KernelFunction", "Ptr", "translate", "translate_source", "BUILTINS", "i8", "i16", "i32", "i64",
           "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "boolean", *BUILTINS]


@dataclass
class _Lit:
  """An untyped Python literal (int, float or bool) waiting for a type from its context."""
  value: object


class KernelFunction:
  """What `@kernel` returns: the Python function plus its IR (built on first use; errors surface then)."""

  def __init__(self, fn):
    self.fn, self.name, self._ir = fn, fn.__name__, None
    self.__doc__, self.__wrapped__ = fn.__doc__, fn

  @property
  def ir(self) -> Kernel:
    if self._ir is None: self._ir = translate(self.fn)
    return ir.clone(self._ir)

  def __call__(self, *a, **k):
    raise CompileError(f"kernel {self.name} cannot be called from Python; compile it (gputwin.compiler.compile) "
                       f"or run it on the reference (gputwin.compiler.reference.launch)")

  def __repr__(self) -> str: return f"<kernel {self.name}>"


def kernel(fn) -> KernelFunction:
  """Decorator: mark a Python function as a GPU kernel."""
  return KernelFunction(fn)


def translate(fn) -> Kernel:
  try:
    lines, first = inspect.getsourcelines(fn)
    path = inspect.getsourcefile(fn) or "<kernel>"
  except (OSError, TypeError) as e:
    raise CompileError(f"cannot read the source of {getattr(fn, '__name__', fn)}: {e}") from None
  consts = dict(fn.__globals__)
  if fn.__closure__:
    consts.update({n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__)})
  return translate_source("".join(lines), path=path, first_line=first, consts=consts)


def translate_source(src: str, *, path: str = "<kernel>", first_line: int = 1, consts: dict | None = None) -> Kernel:
  """Translate the first function definition in `src` (its decorators are ignored). `first_line` is the line of
  `src`'s first line in `path`, so diagnostics point into the real file."""
  lines = src.splitlines(keepends=True) or [""]
  indent = len(lines[0]) - len(lines[0].lstrip())
  try:
    tree = ast.parse(textwrap.dedent(src))
  except SyntaxError as e:
    raise CompileError(f"syntax error: {e.msg}", loc=Loc(path, (e.lineno or 1) + first_line - 1,
                                                         (e.offset or 0) + indent)) from None
  fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
  if fdef is None: raise CompileError("no function definition to translate", loc=Loc(path, first_line, 1))
  try:
    return _Translator(path, first_line - 1, indent, consts or {}).function(fdef)
  except RecursionError:
    raise CompileError("expression nested too deeply", loc=Loc(path, first_line, 1)) from None


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "div", ast.Mod: "rem",
           ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr"}
_OPNAME = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.BitAnd: "&",
           ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_MATH = {"sqrt", "rsqrt", "exp", "exp2", "log", "log2", "sin", "cos", "floor", "ceil", "trunc"}


def _touches_memory(node: ast.expr) -> bool:
  """Loads and atomics are evaluated lazily in `and`/`or`/`x if c else y`, like Python; pure expressions eagerly
  (cheaper: a select, no branch)."""
  return any(isinstance(n, ast.Subscript) or (isinstance(n, ast.Call) and getattr(n.func, "id", "").startswith(
    "atomic_")) for n in ast.walk(node))


class _Translator:
  def __init__(self, path: str, line0: int, col0: int, consts: dict):
    self.path, self.line0, self.col0, self.consts = path, line0, col0, consts
    self.b = Builder()
    self.env: dict[str, Value] = {}
    self.node: ast.AST | None = None

  # -- diagnostics ------------------------------------------------------------------------------------------------
  def loc(self, node: ast.AST | None = None) -> Loc:
    n = node or self.node
    return Loc(self.path, getattr(n, "lineno", 0) + self.line0, getattr(n, "col_offset", 0) + self.col0 + 1)

  def err(self, msg: str, node: ast.AST | None = None) -> CompileError:
    return CompileError(msg, loc=self.loc(node))

  def at(self, node: ast.AST):
    self.node = node
    self.b.loc = self.loc(node)

  # -- types ------------------------------------------------------------------------------------------------------
  def annotation(self, a: ast.AST | None, what: str) -> Type:
    if a is None: raise self.err(f"{what} needs a type annotation (e.g. `n: i32` or `x: Ptr[f32]`)")
    if isinstance(a, ast.Constant) and isinstance(a.value, str): a = ast.parse(a.value, mode="eval").body
    if isinstance(a, ast.Attribute): a = ast.Name(a.attr)
    if isinstance(a, ast.Name):
      name = {"bool": "bool", "boolean": "bool", "float": "f32", "int": "i32"}.get(a.id, a.id)
      if name in ir.SCALARS: return ir.SCALARS[name]
    if isinstance(a, ast.Subscript) and getattr(a.value, "id", getattr(a.value, "attr", "")) == "Ptr":
      return ir.ptr("global", self.annotation(a.slice, what))
    raise self.err(f"{what}: unsupported type annotation `{ast.unparse(a)}` (scalars: {', '.join(ir.SCALARS)}; "
                   f"buffers: Ptr[T])", a)

  def coerce(self, x, t: Type | None = None) -> Value:
    """Materialise an untyped literal (as `t`, else its default type)."""
    if isinstance(x, Value): return x
    v = x.value
    if t is None: t = ir.boolean if isinstance(v, bool) else ir.i32 if isinstance(v, int) else ir.f32
    t = t.scalar
    if isinstance(v, float) and not t.is_float:
      raise self.err(f"float literal {v!r} used where {t} is expected; cast explicitly")
    if isinstance(v, bool) != t.is_bool: raise self.err(f"literal {v!r} used where {t} is expected")
    if t.is_int and not (-(1 << 63) <= v < (1 << 64)): raise self.err(f"integer literal {v} does not fit {t}")
    return self.b.const(v, t)

  def unify(self, a, b, what: str) -> tuple[Value, Value]:
    if isinstance(a, Value) and isinstance(b, Value):
      if a.type != b.type:
        raise self.err(f"operands of {what} have types {a.type} and {b.type}; cast one explicitly, e.g. "
                       f"{b.type}(x)")
      return a, b
    if isinstance(a, Value): return a, self.coerce(b, a.type)
    if isinstance(b, Value): return self.coerce(a, b.type), b
    if isinstance(a.value, float) or isinstance(b.value, float): return self.coerce(a, ir.f32), self.coerce(b, ir.f32)
    return self.coerce(a), self.coerce(b)

  # -- function and statements ------------------------------------------------------------------------------------
  def function(self, f: ast.FunctionDef) -> Kernel:
    self.at(f)
    if f.args.vararg or f.args.kwarg or f.args.kwonlyargs or f.args.defaults:
      raise self.err("kernel parameters must be plain positional parameters")
    params = []
    for a in f.args.args:
      self.at(a)
      v = self.b.value(self.annotation(a.annotation, f"parameter {a.arg}"), a.arg)
      params.append(v)
      self.env[a.arg] = v
    k = Kernel(f.name, params, Block(), self.loc(f))
    self.b.block = k.body
    body = f.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
      body = body[1:]  # docstring
    if body and isinstance(body[-1], ast.Return) and body[-1].value is None: body = body[:-1]
    self.stmts(body)
    try:
      return ir.verify(k)
    except CompileError as e:  # a frontend bug, not the user's: still a located error rather than a crash
      raise CompileError(f"internal error, invalid IR produced: {e.msg}", loc=self.loc(f)) from None

  def stmts(self, body: list[ast.stmt]):
    for s in body: self.stmt(s)

  def stmt(self, s: ast.stmt):
    self.at(s)
    if isinstance(s, ast.Assign):
      if len(s.targets) != 1: raise self.err("chained assignment (a = b = c) is not supported")
      self.assign(s.targets[0], s.value)
    elif isinstance(s, ast.AnnAssign):
      if s.value is None: raise self.err("declaration without a value")
      t = self.annotation(s.annotation, "variable")
      v = self.expr(s.value)
      if isinstance(v, Value) and v.type != t: raise self.err(f"value of type {v.type} assigned to {t} variable")
      self.store_target(s.target, self.coerce(v, t))
    elif isinstance(s, ast.AugAssign):
      op = _BINOPS.get(type(s.op))
      if op is None: raise self.err(f"operator {type(s.op).__name__}= is not supported")
      cur = self.expr(s.target)
      self.store_target(s.target, self.binop(op, cur, self.expr(s.value), s.op))
    elif isinstance(s, ast.If): self.if_(s)
    elif isinstance(s, ast.For): self.for_(s)
    elif isinstance(s, ast.Expr):
      if isinstance(s.value, ast.Constant): return  # stray string/docstring
      if not isinstance(s.value, ast.Call): raise self.err("expression statement has no effect")
      self.expr(s.value)
    elif isinstance(s, ast.Pass): pass
    elif isinstance(s, ast.Return): raise self.err("early `return` is not supported (wrap the rest in an `if`)")
    elif isinstance(s, ast.While): raise self.err("`while` loops are not supported; use `for i in range(...)`")
    elif isinstance(s, (ast.Break, ast.Continue)): raise self.err(f"`{type(s).__name__.lower()}` is not supported")
    else: raise self.err(f"unsupported statement: {type(s).__name__}")

  def assign(self, target: ast.expr, value: ast.expr):
    if isinstance(target, ast.Tuple):
      if not isinstance(value, ast.Tuple) or len(value.elts) != len(target.elts):
        raise self.err("tuple assignment needs a tuple of the same length on the right")
      vals = [self.expr(v) for v in value.elts]
      for t, v in zip(target.elts, vals): self.store_target(t, v)
      return
    self.store_target(target, self.expr(value))

  def store_target(self, target: ast.expr, v):
    if isinstance(target, ast.Name):
      if target.id in self.env and isinstance(v, _Lit): v = self.coerce(v, self.env[target.id].type)
      v = self.coerce(v)
      old = self.env.get(target.id)
      if old is not None and old.type != v.type and not old.type.is_ptr:
        raise self.err(f"`{target.id}` was {old.type}, cannot assign a {v.type} (a variable keeps one type)")
      self.env[target.id] = v
    elif isinstance(target, ast.Subscript):
      p, i = self.pointer_index(target)
      v = self.coerce(v, p.type.elem)
      self.at(target)
      if v.type != p.type.elem:
        raise self.err(f"cannot store a {v.type} into a buffer of {p.type.elem}; cast explicitly, e.g. "
                       f"{p.type.elem}(x)")
      self.b.emit("store", [p, i, v])
    else:
      raise self.err(f"cannot assign to {ast.unparse(target)}")

  def pointer_index(self, s: ast.Subscript) -> tuple[Value, Value]:
    p = self.expr(s.value)
    if not isinstance(p, Value) or not p.type.is_ptr: raise self.err(f"`{ast.unparse(s.value)}` is not a buffer")
    i = self.coerce(self.expr(s.slice))
    if not i.type.is_int: raise self.err(f"buffer index must be an integer, got {i.type}")
    return p, i

  def assigned(self, body: list[ast.stmt]) -> list[str]:
    names = []
    for n in (x for s in body for x in ast.walk(s)):
      ts = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) \
        else []
      for t in ts:
        for e in ast.walk(t):
          if isinstance(e, ast.Name) and isinstance(e.ctx, ast.Store) and e.id not in names: names.append(e.id)
    return names

  def region(self, body: list[ast.stmt], env: dict, block: Block) -> dict:
    saved_env, saved_block = self.env, self.b.block
    self.env, self.b.block = dict(env), block
    try:
      self.stmts(body)
      return self.env
    finally:
      self.env, self.b.block = saved_env, saved_block

  def if_(self, s: ast.If):
    c = self.condition(s.test)
    then, els = Block(), Block()
    te = self.region(s.body, self.env, then)
    ee = self.region(s.orelse, self.env, els)
    self.at(s)
    names = [n for n in te if (n in self.env or n in ee) and (te[n] is not self.env.get(n) or
                                                           ee.get(n) is not self.env.get(n))]
    for n in [n for n in names if te[n].type.is_ptr or ee[n].type.is_ptr]:
      raise self.err(f"buffer variable `{n}` is reassigned under a condition; buffers are fixed per kernel (use "
                     f"two names, or select the index instead)")
    for n in names:
      if te[n].type != ee[n].type: raise self.err(f"`{n}` is {te[n].type} in one branch and {ee[n].type} in the other")
    if names:
      then.ops.append(self.b.make("yield", [te[n] for n in names]))
      els.ops.append(self.b.make("yield", [ee[n] for n in names]))
    op = self.b.make("if", [c], [te[n].type for n in names], regions=[then, els], hint="")
    self.b.block.ops.append(op)
    for n, r in zip(names, op.results): self.env[n] = r

  def for_(self, s: ast.For):
    if s.orelse: raise self.err("for/else is not supported")
    if not isinstance(s.target, ast.Name): raise self.err("loop variable must be a single name")
    it = s.iter
    if not (isinstance(it, ast.Call) and getattr(it.func, "id", "") == "range" and 1 <= len(it.args) <= 3
            and not it.keywords):
      raise self.err("only `for i in range(...)` loops are supported")
    args = [self.expr(a) for a in it.args]
    if len(args) == 1: args = [_Lit(0)] + args
    if len(args) == 2: args.append(_Lit(1))
    typed = next((a.type for a in args if isinstance(a, Value)), ir.i32)
    if not typed.is_int: raise self.err(f"range() bounds must be integers, got {typed}")
    if isinstance(args[2], _Lit) and args[2].value <= 0: raise self.err("range() step must be positive")
    lo, hi, st = (self.coerce(a, typed) for a in args)
    for a in (lo, hi, st):
      if a.type != typed: raise self.err(f"range() bounds have different types ({lo.type}, {hi.type}, {st.type})")
    carried = [n for n in self.assigned(s.body) if n in self.env and n != s.target.id]
    for n in carried:
      if self.env[n].type.is_ptr:
        raise self.err(f"buffer variable `{n}` is reassigned in a loop; buffers are fixed per kernel")
    body = Block()
    iv = self.b.value(typed, s.target.id)
    body.args = [iv] + [self.b.value(self.env[n].type, n) for n in carried]
    env = dict(self.env, **{n: a for n, a in zip(carried, body.args[1:])}, **{s.target.id: iv})
    be = self.region(s.body, env, body)
    self.at(s)
    for n, a in zip(carried, body.args[1:]):
      if be[n].type != a.type: raise self.err(f"`{n}` changes type in the loop ({a.type} -> {be[n].type})")
    body.ops.append(self.b.make("yield", [be[n] for n in carried]))
    op = self.b.make("for", [lo, hi, st] + [self.env[n] for n in carried], [self.env[n].type for n in carried],
                     regions=[body])
    self.b.block.ops.append(op)
    for n, r in zip(carried, op.results): self.env[n] = r
    self.env.pop(s.target.id, None) if s.target.id not in carried else None

  def condition(self, e: ast.expr) -> Value:
    c = self.coerce(self.expr(e), ir.boolean)
    if c.type != ir.boolean:
      raise self.err(f"condition must be bool, got {c.type} (compare explicitly, e.g. x != 0)", e)
    return c

  # -- expressions ------------------------------------------------------------------------------------------------
  def expr(self, e: ast.expr):
    self.at(e)
    if isinstance(e, ast.Constant):
      if isinstance(e.value, (bool, int, float)): return _Lit(e.value)
      raise self.err(f"constant {e.value!r} is not a number")
    if isinstance(e, ast.Name):
      if e.id in self.env: return self.env[e.id]
      if e.id in self.consts and isinstance(self.consts[e.id], (bool, int, float)): return _Lit(self.consts[e.id])
      raise self.err(f"name `{e.id}` is not defined here (kernel variables must be assigned on every path before "
                     f"use; module constants must be int/float)")
    if isinstance(e, ast.BinOp):
      op = _BINOPS.get(type(e.op))
      if op is None: raise self.err(f"operator {type(e.op).__name__} is not supported")
      return self.binop(op, self.expr(e.left), self.expr(e.right), e.op)
    if isinstance(e, ast.UnaryOp):
      v = self.expr(e.operand)
      self.at(e)
      if isinstance(v, _Lit):
        return _Lit({ast.USub: lambda x: -x, ast.UAdd: lambda x: x, ast.Not: lambda x: not x,
                     ast.Invert: lambda x: ~x}[type(e.op)](v.value))
      self.value_only(v, e)
      if isinstance(e.op, ast.UAdd): return v
      if isinstance(e.op, ast.Not):
        if v.type != ir.boolean: raise self.err(f"`not` needs a bool, got {v.type}")
        return self.b.emit("not", [v], v.type)
      if isinstance(e.op, ast.Invert) and not v.type.is_int: raise self.err(f"`~` needs an integer, got {v.type}")
      if isinstance(e.op, ast.USub) and v.type.is_bool: raise self.err("cannot negate a bool")
      return self.b.emit("neg" if isinstance(e.op, ast.USub) else "not", [v], v.type)
    if isinstance(e, ast.Compare):
      if len(e.ops) != 1: raise self.err("chained comparisons (a < b < c) are not supported; use `and`")
      op = _CMPS.get(type(e.ops[0]))
      if op is None: raise self.err(f"comparison {type(e.ops[0]).__name__} is not supported")
      a, b = self.unify(self.value_only(self.expr(e.left), e), self.value_only(self.expr(e.comparators[0]), e),
                        ast.unparse(e))
      self.at(e)
      return self.b.emit(op, [a, b], ir.boolean)
    if isinstance(e, ast.BoolOp):
      is_and = isinstance(e.op, ast.And)
      acc = self.condition(e.values[0])
      for node in e.values[1:]:
        if _touches_memory(node):   # short-circuit like Python: `i < n and x[i] > 0` must not load x[n]
          acc = self.branch(acc, *((node, ast.Constant(False)) if is_and else (ast.Constant(True), node)), e)
          if acc.type != ir.boolean: raise self.err(f"`{'and' if is_and else 'or'}` needs bools, got {acc.type}", e)
        else:
          acc = self.b.emit("and" if is_and else "or", [acc, self.condition(node)], ir.boolean)
        self.at(e)
      return acc
    if isinstance(e, ast.IfExp):
      c = self.condition(e.test)
      if _touches_memory(e.body) or _touches_memory(e.orelse): return self.branch(c, e.body, e.orelse, e)
      a, b = self.unify(self.value_only(self.expr(e.body), e), self.value_only(self.expr(e.orelse), e),
                        "a conditional expression")
      self.at(e)
      return self.b.emit("select", [c, a, b], a.type)
    if isinstance(e, ast.Subscript):
      p, i = self.pointer_index(e)
      self.at(e)
      return self.b.emit("load", [p, i], p.type.elem)
    if isinstance(e, ast.Call): return self.call(e)
    raise self.err(f"unsupported expression: {type(e).__name__}")

  def branch(self, c: Value, yes: ast.expr, no: ast.expr, node: ast.expr) -> Value:
    """`yes if c else no` evaluating only the taken side (an `if` op with one result)."""
    then, els, saved = Block(), Block(), self.b.block
    self.b.block = then
    a = self.value_only(self.expr(yes), yes)
    self.b.block = els
    b = self.value_only(self.expr(no), no)
    if isinstance(a, _Lit) and isinstance(b, _Lit):
      t = ir.f32 if isinstance(a.value, float) or isinstance(b.value, float) else None
      self.b.block = then
      a = self.coerce(a, t)
      self.b.block = els
      b = self.coerce(b, a.type)
    elif isinstance(a, _Lit):
      self.b.block = then
      a = self.coerce(a, b.type)
    elif isinstance(b, _Lit):
      b = self.coerce(b, a.type)
    self.b.block = saved
    self.at(node)
    if a.type != b.type: raise self.err(f"the two sides have types {a.type} and {b.type}; cast one explicitly")
    then.ops.append(self.b.make("yield", [a]))
    els.ops.append(self.b.make("yield", [b]))
    op = self.b.make("if", [c], [a.type], regions=[then, els])
    self.b.block.ops.append(op)
    return op.result

  def value_only(self, v, node=None):
    """Buffers are not values: no arithmetic, comparison or selection on them."""
    if isinstance(v, Value) and v.type.is_ptr:
      raise self.err(f"a buffer ({v.type}) cannot be used as a value here; index it, e.g. buf[i]", node)
    return v

  def binop(self, op: str, a, b, node):
    if isinstance(a, _Lit) and isinstance(b, _Lit) and not isinstance(node, ast.Div):
      try:
        e = ast.fix_missing_locations(ast.Expression(ast.BinOp(ast.Constant(a.value), node, ast.Constant(b.value))))
        return _Lit(eval(compile(e, "<const>", "eval")))
      except Exception as ex:
        raise self.err(f"constant expression fails: {ex}") from None
    a, b = self.unify(self.value_only(a), self.value_only(b), _OPNAME.get(type(node), "operator"))
    t = a.type
    if isinstance(node, ast.Div) and not t.is_float:
      raise self.err(f"`/` on {t}: use `//` for integer division (it truncates toward zero)")
    if isinstance(node, ast.FloorDiv) and t.is_float: raise self.err(f"`//` on {t}: use `/` and floor()")
    if t.is_bool and op not in ("and", "or", "xor"): raise self.err(f"arithmetic on bool; cast first, e.g. i32(c)")
    if op in ("and", "or", "xor", "shl", "shr") and t.is_float: raise self.err(f"bit operation on {t}")
    return self.b.emit(op, [a, b], t)

  def call(self, e: ast.Call):
    f = e.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if e.keywords: raise self.err("keyword arguments are not supported in kernels")
    args = e.args
    self.at(e)

    def want(n):
      if len(args) != n: raise self.err(f"{name}() takes {n} argument(s), got {len(args)}")

    def dim(a) -> str:
      d = self.expr(a)
      if not isinstance(d, _Lit) or d.value not in (0, 1, 2): raise self.err(f"{name}() dimension must be 0, 1 or 2")
      return "xyz"[d.value]
    if name in ("workitem_id", "workgroup_id", "workgroup_size", "num_workgroups", "global_id"):
      want(1)
      d = dim(args[0])
      self.at(e)
      if name == "global_id":
        g = self.b.emit(f"workgroup.id.{d}", [], ir.i32)
        s = self.b.emit(f"workgroup.size.{d}", [], ir.i32)
        w = self.b.emit(f"workitem.id.{d}", [], ir.i32)
        return self.b.emit("add", [self.b.emit("mul", [g, s], ir.i32), w], ir.i32)
      return self.b.emit(f"{name.replace('_', '.', 1) if name != 'num_workgroups' else name}.{d}", [], ir.i32)
    if name in ("shared", "private"):
      want(2)
      t = self.annotation(args[0], f"{name}() element type")
      n = self.expr(args[1])
      if not isinstance(n, _Lit) or not isinstance(n.value, int) or n.value <= 0:
        raise self.err(f"{name}() size must be a positive compile-time integer")
      self.at(e)
      return self.b.emit("shared" if name == "shared" else "alloca", [], ir.ptr("local" if name == "shared" else
                                                                              "private", t), {"count": n.value})
    if name == "barrier":
      want(0)
      self.b.emit("barrier", [])
      return _Lit(0)
    if name and name.startswith("atomic_"):
      want(3)
      p, i = self.pointer_index(ast.Subscript(args[0], args[1]))
      v = self.coerce(self.expr(args[2]), p.type.elem)
      self.at(e)
      if v.type != p.type.elem: raise self.err(f"{name}: value {v.type} into a buffer of {p.type.elem}")
      return self.b.emit(f"atomic.{name[7:]}", [p, i, v], v.type)
    if name in ir.SCALARS or name in ("float", "int", "bool"):
      want(1)
      t = ir.SCALARS[{"float": "f32", "int": "i32"}.get(name, name)]
      v = self.expr(args[0])
      if isinstance(v, _Lit):
        if isinstance(v.value, float) and t.is_int: v = _Lit(int(v.value))
        return self.coerce(v if t.is_float or not isinstance(v.value, float) else v, t)
      if v.type.is_ptr: raise self.err("cannot cast a buffer")
      self.at(e)
      return v if v.type == t else self.b.emit("cast", [v], t)
    if name == "bitcast":
      want(2)
      t = self.annotation(args[0], "bitcast() type")
      v = self.coerce(self.expr(args[1]))
      self.at(e)
      if v.type.nbytes != t.nbytes: raise self.err(f"bitcast from {v.type} to {t} changes size")
      return self.b.emit("bitcast", [v], t)
    if name in _MATH or name == "abs":
      want(1)
      v = self.value_only(self.expr(args[0]))
      v = self.coerce(v, ir.f32 if isinstance(v, _Lit) and name != "abs" else None)
      self.at(e)
      if name != "abs" and not v.type.is_float: raise self.err(f"{name}() needs a float, got {v.type}")
      return self.b.emit(name, [v], v.type)
    if name in ("min", "max"):
      if len(args) < 2: raise self.err(f"{name}() takes at least 2 arguments")
      acc = self.expr(args[0])
      for a in args[1:]:
        x, y = self.unify(self.value_only(acc), self.value_only(self.expr(a)), f"{name}()")
        self.at(e)
        acc = self.b.emit(name, [x, y], x.type)
      return acc
    if name == "fma":
      want(3)
      vals = [self.value_only(self.expr(a)) for a in args]
      t = next((v.type for v in vals if isinstance(v, Value)), ir.f32)
      vals = [self.coerce(v, t) for v in vals]
      self.at(e)
      if not t.is_float or any(v.type != t for v in vals): raise self.err("fma() needs three floats of one type")
      return self.b.emit("fma", vals, t)
    if name == "select":
      want(3)
      c = self.condition(args[0])
      a, b = self.unify(self.value_only(self.expr(args[1])), self.value_only(self.expr(args[2])), "select()")
      self.at(e)
      return self.b.emit("select", [c, a, b], a.type)
    raise self.err(f"call to unsupported function `{ast.unparse(f)}`")

