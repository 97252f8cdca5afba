"""Host reference: the IR interpreted with numpy, one workgroup at a time, all its work-items in lock-step.

This is the semantic oracle every backend is tested against, so it spells the IR's semantics out plainly:
  integers wrap; `div`/`rem` truncate toward zero like C (division by zero is undefined: the reference gives 0);
  shift amounts are taken modulo the bit width; `shr` is arithmetic for signed types, logical for unsigned;
  float -> int casts saturate and map NaN to 0; float `min`/`max` return the non-NaN operand (IEEE minNum);
  `ne` on floats is unordered (true for NaN), the other comparisons ordered; bf16 results are rounded to nearest
  even after every op; exp/exp2/log/log2/sin/cos are computed in f64 and rounded once to the type; `for` counts
  up (`for (i = lo; i < hi; i += step)`, step > 0); atomics act in lane order.
Lock-step execution makes `barrier` a no-op here: a kernel that races without it is a bug the emulator catches.
"""
from __future__ import annotations

import numpy as np

from gputwin.compiler import ir

_TRANSCENDENTAL = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos}
from gputwin.compiler.ir import Block, Kernel, Op, Type
from gputwin.errors import CompileError, GputwinError

_DT = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16,
       "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "f32": np.float32, "f64": np.float64,
       "bf16": np.float32, "bool": np.bool_}


def dtype(t: Type) -> np.dtype:
  """The numpy dtype holding a scalar of `t` (bf16 values live in float32, rounded)."""
  return np.dtype(_DT[str(t.scalar)])


class ReferenceError(GputwinError):
  """The kernel did something undefined on the reference (out-of-bounds access); names kernel and source line."""


def _round(t: Type, x):
  return ir.bf16_round(x) if t.scalar.kind == "bf" else x


def _int_div(a, b, t: Type, rem: bool):
  a64, b64 = a.astype(np.int64 if t.is_signed or t.bits < 64 else np.uint64), b.astype(a.dtype)
  b64 = b64.astype(a64.dtype)
  z = b64 == 0
  bs = np.where(z, 1, b64).astype(a64.dtype)
  if t.is_signed:
    q = np.abs(a64) // np.abs(bs)
    q = np.where((a64 < 0) != (bs < 0), -q, q)
  else:
    q = a64 // bs
  r = a64 - q * bs
  return np.where(z, 0, r if rem else q).astype(a.dtype)


def _cast(x, src: Type, dst: Type):
  s, d = src.scalar, dst.scalar
  if d.is_bool: return x != 0
  if d.is_int and s.is_float:
    info = np.iinfo(dtype(d))
    x64 = np.nan_to_num(x.astype(np.float64), nan=0.0)
    x64 = np.trunc(np.clip(x64, float(info.min), float(info.max)))
    out = np.where(x64 >= float(info.max), info.max, np.where(x64 <= float(info.min), info.min, 0))
    mid = (x64 > float(info.min)) & (x64 < float(info.max))
    top = np.nextafter(float(info.max) + 1.0, 0.0)  # the largest double the 64-bit types hold: 2**63-1024, 2**64-2048
    return np.where(mid, x64.astype(dtype(d)) if d.bits < 64 else np.clip(x64, float(info.min), top).astype(dtype(d)),
                    out.astype(dtype(d))).astype(dtype(d))
  if s.is_bool: return x.astype(dtype(d))
  if d.is_int: return x.astype(dtype(d))
  if s.is_int and d.kind == "bf": return ir.bf16_round(x.astype(np.float64).astype(np.float32))
  return _round(d, x.astype(dtype(d)))


def evaluate(op: Op, vals: list) -> object:
  """One operation on scalar operands, by the reference's own rules (the compiler's constant folding)."""
  g = _Group.__new__(_Group)
  g.n, g.k = 1, None
  x = g.op(op, [np.full(1, v, dtype(o.type)) for v, o in zip(vals, op.operands)], np.ones(1, bool))[0]
  return bool(x) if op.result.type.is_bool else int(x) if op.result.type.is_int else float(x)


class _Group:
  """One workgroup in flight: its threads' ids and its local memory."""

  def __init__(self, kernel: Kernel, gid, grid, block, env):
    self.k, self.gid, self.grid, self.block = kernel, gid, grid, block
    self.n = block[0] * block[1] * block[2]
    lin = np.arange(self.n)
    self.tid = (lin % block[0], (lin // block[0]) % block[1], lin // (block[0] * block[1]))
    self.env = dict(env)

  def err(self, op: Op, msg: str) -> ReferenceError:
    where = f"{op.loc}: " if op.loc and op.loc.line else ""
    return ReferenceError(f"{where}kernel {self.k.name}, workgroup {self.gid}: {msg}\n  {ir.print_op(op).strip()}")

  def full(self, v, t: Type):
    return np.full(self.n, v, dtype(t))

  def run(self, b: Block, mask) -> list:
    env = self.env
    for op in b.ops:
      if op.opcode == "yield": return [env[id(v)] for v in op.operands]
      out = self.op(op, [env.get(id(v)) for v in op.operands], mask)
      for r, x in zip(op.results, out if isinstance(out, list) else [out]): env[id(r)] = x
    return []

  def op(self, op: Op, a: list, mask):
    cls, code = ir.op_class(op), op.opcode
    t = op.results[0].type if op.results else None
    with np.errstate(all="ignore"):
      if cls == "const": return self.full(op.attrs["value"], t)
      if cls == "id":
        kind, d = code.rsplit(".", 1)
        d = "xyz".index(d)
        v = {"workitem.id": self.tid[d], "workgroup.id": self.gid[d], "workgroup.size": self.block[d],
             "num_workgroups": self.grid[d]}[kind]
        return np.broadcast_to(np.asarray(v, np.int32), (self.n,)).copy()
      if cls == "binary": return _round(t, self.binary(code, a[0], a[1], t))
      if cls == "cmp":
        x, y = a
        return {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[code]
      if cls == "unary":
        x = a[0]
        if code == "not": return ~x if t.scalar.is_int else np.logical_not(x)
        return _round(t, -x if code == "neg" else np.abs(x))
      if cls == "math":
        x = a[0]
        if code in _TRANSCENDENTAL:  # in f64, rounded once: the correctly rounded value (numpy's own f32/f16 loops
          with np.errstate(all="ignore"):  # are SIMD approximations that differ by CPU)
            return _round(t, _TRANSCENDENTAL[code](x.astype(np.float64)).astype(x.dtype))
        f = {"sqrt": np.sqrt, "rsqrt": lambda v: (1 / np.sqrt(v)).astype(v.dtype), "floor": np.floor, "ceil": np.ceil,
             "trunc": np.trunc}[code]
        return _round(t, f(x).astype(x.dtype))
      if cls == "fma":
        x, y, z = (v.astype(np.float64) for v in a)
        return _round(t, (x * y + z).astype(dtype(t)))
      if cls == "select":
        c = a[0] if a[0].ndim == a[1].ndim else a[0][:, None]
        return np.where(c, a[1], a[2])
      if code == "cast": return _cast(a[0], op.operands[0].type, t)
      if code == "bitcast" and (op.operands[0].type.scalar.kind == "bf") != (t.scalar.kind == "bf"):
        # bf16 values live in float32 here: their bits are the top half
        if t.scalar.kind == "bf": return (a[0].astype(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return (np.ascontiguousarray(a[0]).view(np.uint32) >> 16).astype(np.uint16).view(dtype(t))
      if code == "bitcast":
        return np.ascontiguousarray(a[0]).view(dtype(t)).reshape(a[0].shape[:1] + ((t.lanes,) if t.is_vec else ()))
      if cls == "vector": return np.stack(a, axis=-1)
      if cls == "extract": return a[0][:, op.attrs["lane"]].copy()
      if cls == "alloc":
        et, n = t.elem, op.attrs["count"]
        return np.zeros(n, dtype(et)) if code == "shared" else np.zeros((self.n, n), dtype(et))
      if cls in ("load", "store", "atomic"): return self.memory(op, a, mask)
      if cls == "barrier": return []
      if cls == "if":
        c = a[0]
        ys_t = self.run(op.regions[0], mask & c) if (mask & c).any() else None
        ys_e = self.run(op.regions[1], mask & ~c) if (mask & ~c).any() else None
        outs = []
        for i, r in enumerate(op.results):
          yt = ys_t[i] if ys_t is not None else self.full(0, r.type) if not r.type.is_vec else np.zeros(
            (self.n, r.type.lanes), dtype(r.type))
          ye = ys_e[i] if ys_e is not None else yt
          cc = c if yt.ndim == 1 else c[:, None]
          outs.append(np.where(cc, yt, ye))
        return outs
      if cls == "for":
        lo, hi, st = a[:3]
        carry = list(a[3:])
        body = op.regions[0]
        iv = lo.copy()
        active = mask & (iv < hi)
        if (active & (st <= 0)).any(): raise self.err(op, "for loop step must be positive")
        while active.any():
          self.env[id(body.args[0])] = iv
          for arg, c in zip(body.args[1:], carry): self.env[id(arg)] = c
          ys = self.run(body, active)
          carry = [np.where(active if y.ndim == 1 else active[:, None], y, c) for y, c in zip(ys, carry)]
          iv = np.where(active, iv + st, iv).astype(iv.dtype)
          nxt = iv < hi
          # an induction variable that wraps past the type's maximum ends the loop too
          active = active & nxt & (iv >= lo)
        return carry
    raise self.err(op, f"reference cannot run {code}")

  def binary(self, code: str, x, y, t: Type):
    s = t.scalar
    if code in ("add", "sub", "mul"):
      if s.kind == "f" and s.bits < 64:  # numpy computes f16/f32 ops in their own precision: correctly rounded
        pass
      return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[code](x, y).astype(x.dtype)
    if code in ("div", "rem"):
      if s.is_float: return (np.divide(x, y) if code == "div" else np.fmod(x, y)).astype(x.dtype)
      return _int_div(x, y, s, code == "rem")
    if code in ("min", "max"):
      if s.is_float: return (np.fmin if code == "min" else np.fmax)(x, y)
      return (np.minimum if code == "min" else np.maximum)(x, y)
    if code in ("and", "or", "xor"):
      if s.is_bool: return {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[code](x, y)
      return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[code](x, y)
    if code in ("shl", "shr"):
      amt = (y.astype(np.uint64) & np.uint64(s.bits - 1)).astype(x.dtype)
      return (np.left_shift(x, amt) if code == "shl" else np.right_shift(x, amt)).astype(x.dtype)
    raise AssertionError(code)

  def memory(self, op: Op, a: list, mask):
    buf, idx = a[0], a[1].astype(np.int64)
    p = op.operands[0].type
    lanes = (op.results[0].type if op.opcode == "load" else op.operands[2].type).lanes
    size = buf.shape[-1]
    m = mask
    bad = m & ((idx < 0) | (idx + lanes > size))
    if bad.any():
      lane = int(np.argmax(bad))
      raise self.err(op, f"work-item {lane} {op.opcode}s element {idx[lane]} (+{lanes}) of a {p} "
                         f"with {size} elements")
    safe = np.where(m, idx, 0)
    rows = np.arange(self.n)
    get = (lambda j: buf[rows, j]) if p.space == "private" else (lambda j: buf[j])
    if op.opcode == "load":
      vals = [get(safe + k) for k in range(lanes)]
      return np.stack(vals, -1) if lanes > 1 else vals[0]
    if op.opcode == "store":
      v = a[2]
      for k in range(lanes):
        vk = v[:, k] if lanes > 1 else v
        if p.space == "private": buf[rows[m], safe[m] + k] = vk[m]
        else: buf[safe[m] + k] = vk[m]
      return []
    # atomics: in lane order, each returns the value before it
    kind, v = op.opcode.split(".")[1], a[2]
    old = np.zeros(self.n, buf.dtype)
    with np.errstate(all="ignore"):
      for lane in np.nonzero(m)[0]:
        j = safe[lane]
        cur = buf[j]
        old[lane] = cur
        x = v[lane]
        buf[j] = {"add": lambda: cur + x, "sub": lambda: cur - x, "min": lambda: min(cur, x),
                  "max": lambda: max(cur, x), "and": lambda: cur & x, "or": lambda: cur | x,
                  "xor": lambda: cur ^ x, "xchg": lambda: x}[kind]()
    return old


def launch(kernel: Kernel, *, grid, block, args: list) -> None:
  """Run `kernel` over `grid` workgroups of `block` work-items (each a 1- to 3-tuple or int). Global buffers are
  numpy arrays, updated in place (bf16 buffers: float32 values, or uint16 bit patterns as on the device); scalar
  arguments are Python or numpy numbers."""
  grid, block = _dims(grid), _dims(block)
  if len(args) != len(kernel.params):
    raise CompileError(f"kernel {kernel.name} takes {len(kernel.params)} arguments, got {len(args)}")
  env, back = {}, []
  for p, a in zip(kernel.params, args):
    if p.type.is_ptr and p.type.elem.kind == "bf" and isinstance(a, np.ndarray) and a.dtype == np.uint16:
      # bf16 buffers in device layout (bit patterns): compute on float32 copies, write the bits back afterwards
      w = (a.reshape(-1).astype(np.uint32) << 16).view(np.float32)
      back.append((a, w))
      env[id(p)] = w
      continue
    if p.type.is_ptr:
      if not isinstance(a, np.ndarray) or a.dtype != dtype(p.type.elem):
        raise CompileError(f"kernel {kernel.name}: argument %{p.name} wants a numpy {dtype(p.type.elem)} array")
      env[id(p)] = a.reshape(-1)
    else:
      env[id(p)] = np.full(block[0] * block[1] * block[2], ir.normalize(a, p.type), dtype(p.type))
  for gz in range(grid[2]):
    for gy in range(grid[1]):
      for gx in range(grid[0]):
        g = _Group(kernel, (gx, gy, gz), grid, block, env)
        g.run(kernel.body, np.ones(g.n, bool))
  for a, w in back: a.reshape(-1)[:] = (w.view(np.uint32) >> 16).astype(np.uint16)


def _dims(d) -> tuple[int, int, int]:
  d = (d,) if isinstance(d, int) else tuple(d)
  return tuple(int(x) for x in d) + (1,) * (3 - len(d))
