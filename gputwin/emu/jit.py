"""The native tier: straight-line runs of instructions compiled to host code through LLVM (llvmlite), from the same
typed pcode IR the numpy interpreter compiles.

A *block* is the longest run of consecutive instructions from a PC that this tier can express (VALU/SALU bodies,
global/scalar/LDS memory, VOPD, waits), ending after a branch. Its native function takes the waves standing at the
block's PC and runs them wave-major: each wave runs the whole block (its registers stay in cache), then the next
one, as serial mode orders waves; inside a wave, instruction by instruction over its active lanes, as the
interpreter does. Race-free kernels therefore give the interpreter's bits (tests/emu/test_jit.py); waves that race
within one block see each other's writes in wave order. Anything else (DPP/SDWA, cross-lane and register-indexed
bodies, MFMA/WMMA, barriers, checkers, hooks) stays interpreted: the block simply ends before it.

Inside a wave:
- consecutive lane-pure vector ops share one lane loop (each lane runs them in order; a lane mask one op writes and
  a later one reads lane by lane, VCC carry-out then carry-in, is handed on in the loop); lane loops without
  memory access are branch-free, so LLVM vectorises them;
- every vector instruction (or group) is compiled twice: as is, and for a wave whose EXEC has every lane on, where
  the lane masks fold away (plain vector loads, stores and arithmetic); the wave's EXEC picks one;
- a plain global or LDS access (`ADDR + K` addresses, no loops) first probes the wave: every active lane in the
  region the previous wave hit (LDS: within the allocation) and `stride` apart -> one loop without checks on
  affine addresses (masked vector loads/stores); in one region but scattered -> a loop without checks; otherwise
  the exact lane-by-lane path, which faults as the interpreter does. A full wave's probe compares each lane with
  lane 0's base; a partial one reduces min/max over the active lanes. A later access from the same unchanged
  address registers reuses the probe.

Tiering (see `Tier`): a block compiles once `GPUTWIN_JIT_AFTER` lanes (default 1.5M, summed over launches of the
program) have entered it interpreted, about what compiling it would cost, so a one-off dispatch never runs more than
~2-3x slower than the interpreter alone and a repeated one runs natively. `GPUTWIN_JIT=0` turns the tier off,
`GPUTWIN_JIT=force` compiles every block at first sight.

Semantics follow gputwin/pcode/runtime.py operation by operation (wrapping, shifts past the width, conversions,
NaN payloads of float->float casts); what the tier cannot match exactly it declines (`Unsupported`), so the
instruction is interpreted. A guest fault stops the block at the faulting lane and raises the interpreter's error for
that instruction: the first faulting lane in (wave, lane) order; earlier waves finished the block, earlier lanes of
the faulting instruction may already have written.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import re
import struct
import threading
import time

import numpy as np

from gputwin.emu.core import LDS_BITS, LDS_SHIFT, Stop, _scalar_valu, sets_pc  # LDS addresses: slot << 20 | offset
from gputwin.emu.program import APERTURE, EXECZ, SCC_CODE, SPECIAL, VCCZ, Op, Src
from gputwin.errors import GPUPageFault
from gputwin.pcode.ir import Ty, locals_of, lv_ty

M32 = 0xffffffff
QUIET = {16: 1 << 9, 32: 1 << 22, 64: 1 << 51}  # the quiet bit of a NaN, by float width
DEFAULT_NAN = {16: 0xfe00, 32: 0xffc00000, 64: 0xfff8000000000000}  # x86's result of an invalid operation
BLOCK_KINDS = ("alu", "mem", "vopd", "nop")
TBAA_FIXED = ("ctx", "tbl")  # tags the prelude uses: ctx fields the block writes, the region table
TBAA_BASE = 10
SUFFIX = {"": "", "exact": "x", "probe": "p", "range": "r", "fast": "f", "contig": "c", "first": "q"}  # inst_fn's modes
PROBE_CONTIG, PROBE_EXACT, PROBE_FAST = 0, 1, 2  # what a probe answers
# per instruction, in the block's %hints array: the region its last access hit, the probed contiguous base, and the
# probe's answer (a later access from the same address registers reuses it: Compiler.owners)
HINT_REGION, HINT_BASE, HINT_PROBE, HINTS = 0, 1, 2, 3
MEM_KINDS = ("global", "smem", "ds")

# ctx: one int64 array shared by Python and the native code
(C_V, C_S, C_SCC, C_PC, C_WG, C_VSTW, C_VSTR, C_SSTW, C_SSTR, C_LDS, C_LDSZ, C_NREG, C_REGS, C_FAULT, C_FADDR,
 C_FBYTES, C_FWRITE, C_FWAVE, C_LANES, C_INIT, C_N) = range(21)
F_GLOBAL, F_HIGH, F_LDSBASE, F_LDSOFF = 1, 2, 3, 4


class Unsupported(Exception):
  """The native tier cannot express this (the instruction stays interpreted)."""


def mode() -> str:
  return os.environ.get("GPUTWIN_JIT", "auto").lower()


def threshold() -> int:
  return 0 if mode() == "force" else int(float(os.environ.get("GPUTWIN_JIT_AFTER", 1_500_000)))


# ------------------------------------------------------------------------------------------------ LLVM plumbing
_LLVM = None


def _llvm():
  """(binding module, target machine, MCJIT engine), made once per process."""
  global _LLVM
  if _LLVM is None:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                      opt=2, reloc="default", codemodel="jitdefault")
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    _LLVM = (llvm, tm, ee)
  return _LLVM


def _lty(t: Ty) -> str:
  if t.kind == "bool":
    return "i1"
  if t.kind == "f":
    return {16: "half", 32: "float", 64: "double"}[t.bits]
  if t.kind == "bf":
    raise Unsupported("bfloat16")
  if t.kind == "int":
    return "i64"
  if t.kind == "arr":
    raise Unsupported("arrays")
  return f"i{t.bits}"


def _fconst(v: float, bits: int) -> str:
  if bits == 16:
    return "0xH%04X" % struct.unpack("<H", struct.pack("<e", v))[0]
  if bits == 32:  # LLVM writes float constants as the double of the same value
    v = struct.unpack("<f", struct.pack("<f", v))[0]
  return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


class Fn:
  """LLVM IR text of one function: numbered temporaries, labels, allocas hoisted to the entry block."""

  def __init__(self, tags: dict | None = None, mode: str = "", full: bool = False, suffix: str = ""):
    self.tags = {} if tags is None else tags  # TBAA: what a load or store touches (see Compiler.metadata)
    self.mode, self.full, self.suffix = mode, full, suffix  # Compiler.inst_fn's (suffix: of the function's name)
    self.on = None  # this lane's EXEC bit, in a lane loop
    self.lines: list[str] = []
    self.allocas: list[str] = []
    self.pro: list[str] = []  # ctx fields, loaded once in the entry block
    self.cached: dict[int, str] = {}
    self.n = 0

  def t(self) -> str:
    self.n += 1
    return f"%t{self.n}"

  def label(self, base: str = "L") -> str:
    self.n += 1
    return f"{base}{self.n}"

  def emit(self, s: str) -> None:
    self.lines.append("  " + s)

  def put(self, label: str) -> None:
    self.lines.append(f"{label}:")

  def op(self, s: str) -> str:
    r = self.t()
    self.emit(f"{r} = {s}")
    return r

  def alloca(self, ty: str) -> str:
    self.n += 1
    r = f"%a{self.n}"
    self.allocas.append(f"  {r} = alloca {ty}")
    return r

  def conv(self, v: str, fb: int, tb: int, sign: bool = False) -> str:
    """An i{fb} value as i{tb}: truncated, or sign/zero-extended."""
    if fb == tb:
      return v
    if tb < fb:
      return self.op(f"trunc i{fb} {v} to i{tb}")
    return self.op(f"{'sext' if sign else 'zext'} i{fb} {v} to i{tb}")

  def gep(self, base: str, off: str) -> str:
    return self.op(f"getelementptr i8, ptr {base}, i64 {off}")

  def ctx(self, k: int) -> str:
    """A ctx field that does not change while a block runs (pointers, strides): one load in the entry block."""
    r = self.cached.get(k)
    if r is None:
      self.n += 1
      r = self.cached[k] = f"%c{self.n}"
      self.pro.append(f"  %c{self.n}p = getelementptr i64, ptr %ctx, i64 {k}")
      self.pro.append(f"  {r} = load i64, ptr %c{self.n}p, !invariant.load !0")
    return r

  def live(self, k: int) -> str:
    """A ctx field the block writes (fault, lane count)."""
    p = self.op(f"getelementptr i64, ptr %ctx, i64 {k}")
    return self.ld("i64", p, "ctx")

  def ctxp(self, k: int) -> str:
    r = self.cached.get(-k - 1)
    if r is None:
      v = self.ctx(k)
      self.n += 1
      r = self.cached[-k - 1] = f"%c{self.n}"
      self.pro.append(f"  {r} = inttoptr i64 {v} to ptr")
    return r

  def set_ctx(self, k: int, v: str) -> None:
    p = self.op(f"getelementptr i64, ptr %ctx, i64 {k}")
    self.st("i64", v, p, "ctx")

  @property
  def bad(self) -> str:
    """A probe's result: some active lane's access would leave the region or fault."""
    if not hasattr(self, "_bad"):
      self._bad = self.alloca("i1")
    return self._bad

  def ld_bad(self) -> str:
    return self.op(f"load i1, ptr {self.bad}")

  def or_bad(self, cond: str) -> None:
    """bad |= cond, for an active lane (a probe's lane loop runs every lane)."""
    mine = self.op(f"and i1 {cond}, {self.on}")
    self.emit(f"store i1 {self.op(f'or i1 {self.ld_bad()}, {mine}')}, ptr {self.bad}")

  def tbaa(self, what) -> str:
    """The access tag of `what`: a register row ("v", 3), guest memory, LDS, SCC... Different things never
    overlap, so LLVM may keep registers in host registers across stores to others and vectorise without checks."""
    return f"!tbaa !{TBAA_BASE + 2 * self.tags.setdefault(what, len(self.tags)) + 1}"

  def ld(self, ty: str, ptr: str, what, align: str = "") -> str:
    return self.op(f"load {ty}, ptr {ptr}{align}, {self.tbaa(what)}")

  def st(self, ty: str, v: str, ptr: str, what, align: str = "") -> None:
    self.emit(f"store {ty} {v}, ptr {ptr}{align}, {self.tbaa(what)}")


# ------------------------------------------------------------------------------------ one op: pcode -> LLVM IR
class Gen:
  """The body of one instruction for one wave (and, for vector ops, each active lane): operand fetch as core.Engine
  does it, the pcode IR as gputwin/pcode/compile.py + runtime.py evaluate it, results stored as Engine.retire does."""

  def __init__(self, f: Fn, op: Op, eng_info: dict):
    self.f, self.op, self.info = f, op, eng_info
    self.L = eng_info["lanes"]
    self.vars: dict[str, tuple[str, Ty]] = {}
    self.state: dict[str, tuple[str, int]] = {}
    self.loop_exit: list[str] = []
    self.hint = None
    self.row = None  # Gen.region
    self.dptr = None  # Gen.delta
    self.space = "lds" if eng_info["space"] == "lds" else "guest"  # TBAA of its memory accesses
    self.lanebit: dict[str, tuple[str, str]] = {}  # per-wave lane mask -> (this lane's bit, written?) allocas

  # ---------------------------------------------------------------- value helpers
  def raw(self, v: str, t: Ty) -> tuple[str, int]:
    """ubits: the raw unsigned bits of a typed value, and their width."""
    if t.kind == "f":
      return self.f.op(f"bitcast {_lty(t)} {v} to i{t.bits}"), t.bits
    if t.kind == "bool":
      return self.f.op(f"zext i1 {v} to i8"), 8
    return v, (64 if t.kind == "int" else t.bits)

  def from_bits(self, u: str, ub: int, t: Ty) -> str:
    if t.kind == "bool":
      b = self.f.conv(u, ub, 8, False) if ub != 8 else u
      return self.f.op(f"trunc i8 {b} to i1")  # the low bit, as numpy's astype(bool) of a 0/1 container
    u = self.f.conv(u, ub, t.bits if t.kind != "int" else 64, False)
    if t.kind == "f":
      return self.f.op(f"bitcast i{t.bits} {u} to {_lty(t)}")
    return u

  def coerce(self, v: str, s: Ty, t: Ty) -> str:
    """Bring an operand to the operation's type the way numpy's mixed-type arithmetic ends up (same kind family)."""
    if s == t or (s.kind in "uib" and t.kind in "uib" and s.bits == t.bits):
      return v
    if s.isf or t.isf:
      if s.isf and t.isf and s.bits == t.bits:
        return v
      if s.kind == "int" and t.isf:
        return self.f.op(f"sitofp i64 {v} to {_lty(t)}")
      raise Unsupported(f"mixed {s}/{t}")
    sb = 1 if s.kind == "bool" else 64 if s.kind == "int" else s.bits
    tb = 1 if t.kind == "bool" else 64 if t.kind == "int" else t.bits
    return self.f.conv(v, sb, tb, s.kind in ("i", "int"))

  # ---------------------------------------------------------------- expressions
  def ex(self, e) -> str:
    op, a, t = e.op, e.args, e.ty
    f = self.f
    if op == "const":
      if t.kind == "f":
        return _fconst(float(a[0]), t.bits)
      if t.kind == "bool":
        return "true" if int(a[0]) & 1 else "false"
      if t.kind in ("bf", "arr"):
        raise Unsupported(t.kind)
      bits = 64 if t.kind == "int" else t.bits
      v = int(a[0]) & ((1 << bits) - 1)
      return str(v - (1 << bits) if v >> (bits - 1) else v)
    if op == "var":
      p, vt = self.vars[a[0]]
      return f.op(f"load {_lty(vt)}, ptr {p}")
    if op == "loopvar":
      p, vt = self.vars["@" + a[0]]
      return f.op(f"load i64, ptr {p}")
    if op == "state":
      p, w = self.state[a[0]]
      v = f.op(f"load i{w}, ptr {p}")
      if t.kind == "bool":
        return f.op(f"trunc i{w} {v} to i1")
      tb = 64 if t.kind == "int" else t.bits
      v = self.f.conv(v, w, tb, False)
      return f.op(f"bitcast i{tb} {v} to {_lty(t)}") if t.kind == "f" else v
    if op == "wave":
      if a[0] == "laneId":
        return "%lane32" if t.bits == 32 else self.f.conv("%lane32", 32, t.bits, False)
      return "true" if (a[0] == "wave32") == (self.L == 32) else "false"
    if op in ("bitcast", "cvt"):
      return self.convert(op, self.ex(a[0]), a[0].ty, t)
    if op == "bin":
      o, x, y = a
      xv, yv = self.coerce(self.ex(x), x.ty, t), self.coerce(self.ex(y), y.ty, t)
      lt = _lty(t)
      if t.kind == "f" and t.bits == 16:  # which NaN numpy's f16 loops return is not the x86 rule (see README)
        raise Unsupported("f16 arithmetic")
      if t.isf and o in "+-*/":
        r = f.op(f"{ {'+': 'fadd', '-': 'fsub', '*': 'fmul', '/': 'fdiv'}[o]} {lt} {xv}, {yv}")
        return self.nan_rule(t, [xv, yv], r)
      if t.isf:
        ins = {"%": "frem"}.get(o)
      elif t.kind == "bool":
        ins = {"&": "and", "|": "or", "^": "xor", "&&": "and", "||": "or"}.get(o)
      else:
        ins = {"+": "add", "-": "sub", "*": "mul", "&": "and", "|": "or", "^": "xor"}.get(o)
      if ins is None:
        raise Unsupported(f"operator {o} on {t}")
      return f.op(f"{ins} {lt} {xv}, {yv}")
    if op == "cmp":
      o, x, y = a
      ct = self.common(x.ty, y.ty)
      xv, yv = self.coerce(self.ex(x), x.ty, ct), self.coerce(self.ex(y), y.ty, ct)
      if ct.isf:
        pred = {"==": "oeq", "!=": "une", "<": "olt", ">": "ogt", "<=": "ole", ">=": "oge", "<>": "one"}[o]
        return f.op(f"fcmp {pred} {_lty(ct)} {xv}, {yv}")
      sg = ct.kind in ("i", "int")
      pred = {"==": "eq", "!=": "ne", "<>": "ne", "<": "slt" if sg else "ult", ">": "sgt" if sg else "ugt",
              "<=": "sle" if sg else "ule", ">=": "sge" if sg else "uge"}[o]
      return f.op(f"icmp {pred} {_lty(ct)} {xv}, {yv}")
    if op == "logic":
      x, y = self.ex(a[1]), self.ex(a[2])
      return f.op(f"{'and' if a[0] == '&&' else 'or'} i1 {x}, {y}")
    if op == "not":
      return f.op(f"xor i1 {self.ex(a[0])}, true")
    if op == "inv":
      v = self.coerce(self.ex(a[0]), a[0].ty, t)
      return f.op(f"xor {_lty(t)} {v}, -1" if t.kind != "bool" else f"xor i1 {v}, true")
    if op == "neg":
      v = self.coerce(self.ex(a[0]), a[0].ty, t)
      return f.op(f"fneg {_lty(t)} {v}") if t.isf else f.op(f"sub {_lty(t)} 0, {v}")
    if op == "sel":
      c = self.ex(a[0])
      x, y = self.coerce(self.ex(a[1]), a[1].ty, t), self.coerce(self.ex(a[2]), a[2].ty, t)
      return f.op(f"select i1 {c}, {_lty(t)} {x}, {_lty(t)} {y}")
    if op == "shift":
      o, x, y = a
      if t.isf or t.kind == "bool":
        raise Unsupported("shift of a non-integer")
      xv = self.coerce(self.ex(x), x.ty, t)
      bits = 64 if t.kind == "int" else t.bits
      s = self.u64(self.ex(y), y.ty)
      if t.kind == "int":
        sn = self.f.conv(s, 64, bits, False)
        return f.op(f"{'shl' if o == '<<' else 'ashr'} i64 {xv}, {sn}")
      if o == ">>" and t.kind == "i":  # arithmetic: amounts past the width keep the sign
        cl = f.op(f"select i1 {f.op(f'icmp uge i64 {s}, {bits}')}, i64 {bits - 1}, i64 {s}")
        return f.op(f"ashr i{bits} {xv}, {self.f.conv(cl, 64, bits, False)}")
      return self.shift("shl" if o == "<<" else "lshr", xv, bits, s)
    if op == "bit" and self.lanebit and _lane_bit_of(a[0], a[1]) in self.lanebit:
      return f.op(f"load i1, ptr {self.lanebit[_lane_bit_of(a[0], a[1])][0]}")
    if op in ("slice", "bit"):
      x = a[0]
      u, ub = self.raw(self.ex(x), x.ty)
      lo = self.u64(self.ex(a[1]), a[1].ty)
      w = a[2] if op == "slice" else 1
      if ub < 64:
        u, ub = self.f.conv(u, ub, 64, False), 64
      r = self.shift("lshr", u, ub, lo)
      if t.kind == "bool":
        return f.op(f"trunc i{ub} {r} to i1")
      r = self.f.conv(r, ub, w)
      return self.from_bits(r, w, t) if t.bits == w else self.f.conv(r, w, t.bits, False)
    if op == "concat":
      total = sum(p.ty.bits for p in a)
      acc, off = "0", 0
      for p in reversed(a):
        u, ub = self.raw(self.ex(p), p.ty)
        if p.ty.kind == "bool":
          u, ub = self.f.conv(u, 8, 1, False), 1
        u = self.f.conv(u, ub, total, False) if ub != total else u
        if off:
          u = f.op(f"shl i{total} {u}, {off}")
        acc = f.op(f"or i{total} {acc}, {u}")
        off += p.ty.bits
      return self.from_bits(acc, total, t) if t.bits == total else acc
    if op == "rev":
      u, ub = self.raw(self.ex(a[0]), a[0].ty)
      return f.op(f"call i{ub} @llvm.bitreverse.i{ub}(i{ub} {u})")
    if op == "call":
      return self.call(a[0], a[1], t)
    if op == "mem":
      return self.mem_read(self.ex(a[0]), a[0].ty, a[1], t)
    raise Unsupported(f"IR op {op}")

  def finite(self, v: str, t: Ty) -> str:
    f, lt = self.f, _lty(t)
    a = f.op(f"call {lt} @llvm.fabs.f{t.bits}({lt} {v})")
    return f.op(f"fcmp olt {lt} {a}, {_fconst(float('inf'), t.bits)}")

  def nan_rule(self, t: Ty, ins: list[str], r: str) -> str:
    """IEEE results of an x86 SSE operation as numpy computes them, whatever operand order LLVM picks: the first
    NaN input, quieted; else, when the result is NaN (invalid operation), the default NaN, which is negative."""
    f, lt, b = self.f, _lty(t), t.bits
    default = f.op(f"bitcast i{b} {DEFAULT_NAN[b] - (1 << b)} to {lt}")  # negative: the literal is signed
    out = f.op(f"select i1 {f.op(f'fcmp uno {lt} {r}, {r}')}, {lt} {default}, {lt} {r}")
    for x in reversed(ins):
      out = f.op(f"select i1 {f.op(f'fcmp uno {lt} {x}, {x}')}, {lt} {self.quieted(x, t)}, {lt} {out}")
    return out

  def quieted(self, x: str, t: Ty) -> str:
    """x with its quiet bit set (a signalling NaN made quiet; other values are the caller's to exclude)."""
    f, lt, b = self.f, _lty(t), t.bits
    bits = f.op(f"bitcast {lt} {x} to i{b}")
    return f.op(f"bitcast i{b} {f.op(f'or i{b} {bits}, {QUIET[b]}')} to {lt}")

  def shift(self, ins: str, v: str, bits: int, amount: str) -> str:
    """v shifted by an i64 amount the way numpy shifts (0 once the amount reaches the width; LLVM: poison)."""
    f = self.f
    if amount.lstrip("-").isdigit():
      k = int(amount)
      return "0" if not 0 <= k < bits else f.op(f"{ins} i{bits} {v}, {k}") if k else v
    big = f.op(f"icmp uge i64 {amount}, {bits}")
    safe = self.f.conv(f.op(f"select i1 {big}, i64 0, i64 {amount}"), 64, bits, False)
    return f.op(f"select i1 {big}, i{bits} 0, i{bits} {f.op(f'{ins} i{bits} {v}, {safe}')}")

  def u64(self, v: str, t: Ty) -> str:
    """An index or shift amount as uint64 (numpy's s.astype(np.uint64): negative values become huge)."""
    if t.kind in ("f", "bf"):
      raise Unsupported("float index")
    if t.kind == "bool":
      return self.f.op(f"zext i1 {v} to i64")
    return self.f.conv(v, 64 if t.kind == "int" else t.bits, 64, t.kind in ("i", "int"))

  @staticmethod
  def common(x: Ty, y: Ty) -> Ty:
    if x == y:
      return x
    if x.kind == "int":
      return y
    if y.kind == "int":
      return x
    if x.isf or y.isf:
      if x.isf and y.isf and x.bits == y.bits:
        return x
      raise Unsupported(f"compare {x}/{y}")
    if x.kind == "bool" or y.kind == "bool":
      raise Unsupported(f"compare {x}/{y}")
    if (x.kind == "i") == (y.kind == "i"):
      return x if x.bits >= y.bits else y
    return Ty("i", max(x.bits, y.bits) + 1)  # numpy compares mixed signedness by value

  def convert(self, op: str, v: str, s: Ty, t: Ty) -> str:
    f = self.f
    if s.kind == "bf" or t.kind == "bf":
      raise Unsupported("bfloat16")
    if op == "bitcast":
      if s.isf and t.isf and s.bits == t.bits:
        return v
      u, ub = self.raw(v, s)
      sb = 64 if s.kind == "int" else s.bits
      if s.kind == "bool":
        u, ub, sb = self.f.conv(u, 8, 1, False), 1, 1
      tb = 1 if t.kind == "bool" else 64 if t.kind == "int" else t.bits
      u = self.f.conv(u, ub if ub != sb else sb, tb, s.kind == "i" and tb > sb)
      return self.from_bits(u, tb, t) if t.kind != "bool" else f.op(f"trunc i{tb} {u} to i1") if tb > 1 else u
    # value conversion (runtime.cv)
    if t.kind == "int":
      return self.coerce(v, s, Ty("int", 64)) if not s.isf else self.fp_to_int(v, s, Ty("i", 64))
    if s.kind == "int" and not t.isf:
      return self.f.conv(v, 64, 1 if t.kind == "bool" else t.bits, True) if t.kind != "bool" else \
        f.op(f"trunc i64 {v} to i1")
    if s.isf and t.isf:
      return self.fp_to_fp(v, s.bits, t.bits)
    if s.isf:
      return self.fp_to_int(v, s, t)
    if t.isf:
      if s.kind == "bool":
        return f.op(f"uitofp i1 {v} to {_lty(t)}")
      sb = 64 if s.kind == "int" else s.bits
      if sb > 64:
        raise Unsupported("wide int -> float")
      return f.op(f"{'sitofp' if s.kind in ('i', 'int') else 'uitofp'} i{sb} {v} to {_lty(t)}")
    if t.kind == "bool":
      u, ub = self.raw(v, s)
      if s.kind == "bool":
        return v
      return f.op(f"trunc i{ub} {u} to i1")
    u, ub = self.raw(v, s)
    if s.kind == "bool":
      u, ub = self.f.conv(u, 8, 1, False), 1
    return self.f.conv(u, ub, t.bits, s.kind == "i" and t.bits > s.bits)

  def convert_named(self, name: str, x, t: Ty) -> str:
    """runtime.convert: the manual's x_to_y(...) conversions (round to nearest even: bodies that set ROUND_MODE are
    not compiled here)."""
    f = self.f
    src, dst = name.split("_to_")[:2]
    s = x.ty
    if s.kind == "bf" or t.kind == "bf" or dst in ("snorm", "unorm", "bf16") or src == "bf16":
      raise Unsupported(name)
    if src in ("u4", "i4", "u8", "i8", "u16", "i16", "u32", "i32") and not dst.startswith("f"):
      sk, sb = src[0], int(src[1:])
      u, ub = self.raw(self.ex(x), s)
      if s.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      mid = Ty(sk, sb)
      return self.convert("cvt", self.from_bits(self.f.conv(u, ub, sb, False), sb, mid), mid, t)
    if src in ("f32", "f16", "f64") and dst in ("f32", "f16", "f64") and s.kind == "f" and t.kind == "f":
      r = self.convert("cvt", self.ex(x), s, t)  # then an IEEE conversion quiets a signalling NaN
      return f.op(f"select i1 {f.op(f'fcmp uno {_lty(t)} {r}, {r}')}, {_lty(t)} {self.quieted(r, t)}, {_lty(t)} {r}")
    if src in ("f32", "f16", "f64") and dst in ("u32", "i32", "u16", "i16", "u8") and s.kind == "f":
      return self.convert("cvt", self.ex(x), s, t)
    if src in ("u32", "i32", "u16", "i16") and dst in ("f32", "f16", "f64") and s.kind in "uib":
      if t.bits == 16 and s.bits > 24:
        raise Unsupported("int -> f16 (one rounding)")
      return self.convert("cvt", self.ex(x), s, t)
    raise Unsupported(name)

  def fp_to_fp(self, v: str, fb: int, tb: int) -> str:
    """runtime.fcvt: round to nearest even; a NaN keeps sign, quiet bit and top payload bits (not quieted)."""
    f = self.f
    if fb == tb:
      return v
    if fb == 64 and tb == 16:
      raise Unsupported("f64 -> f16 (round to odd)")
    st, tt = {16: "half", 32: "float", 64: "double"}[fb], {16: "half", 32: "float", 64: "double"}[tb]
    r = f.op(f"{'fpext' if tb > fb else 'fptrunc'} {st} {v} to {tt}")
    (mf, _), (mt, et) = {16: (10, 5), 32: (23, 8), 64: (52, 11)}[fb], {16: (10, 5), 32: (23, 8), 64: (52, 11)}[tb]
    u = self.f.conv(f.op(f"bitcast {st} {v} to i{fb}"), fb, 64)
    sign = f.op(f"shl i64 {f.op(f'lshr i64 {u}, {fb - 1}')}, {tb - 1}")
    man = f.op(f"and i64 {u}, {(1 << mf) - 1}")
    man = f.op(f"shl i64 {man}, {mt - mf}") if mt >= mf else f.op(f"lshr i64 {man}, {mf - mt}")
    z = f.op(f"icmp eq i64 {man}, 0")
    man = f.op(f"select i1 {z}, i64 {1 << (mt - 1)}, i64 {man}")
    nb = f.op(f"or i64 {f.op(f'or i64 {sign}, {((1 << et) - 1) << mt}')}, {man}")
    nb = self.f.conv(nb, 64, tb, False)
    nan = f.op(f"bitcast i{tb} {nb} to {tt}")
    isn = f.op(f"fcmp uno {st} {v}, {v}")
    return f.op(f"select i1 {isn}, {tt} {nan}, {tt} {r}")

  def fp_to_int(self, v: str, s: Ty, t: Ty) -> str:
    """runtime.f2i: truncate toward zero, NaN -> 0, saturate (only widths <= 32 here)."""
    f = self.f
    tb = 1 if t.kind == "bool" else t.bits
    if t.kind == "bool" or tb > 32 or t.kind not in ("i", "u", "b"):
      raise Unsupported(f"float -> {t}")
    d = v if s.bits == 64 else f.op(f"fpext {_lty(s)} {v} to double")
    tr = f.op(f"call double @llvm.trunc.f64(double {d})")
    isn = f.op(f"fcmp uno double {tr}, {tr}")
    tr = f.op(f"select i1 {isn}, double 0.0, double {tr}")
    lo, hi = (-(2 ** (tb - 1)), 2 ** (tb - 1) - 1) if t.kind == "i" else (0, 2 ** tb - 1)
    tr = f.op(f"call double @llvm.maxnum.f64(double {tr}, double {_fconst(float(lo), 64)})")
    tr = f.op(f"call double @llvm.minnum.f64(double {tr}, double {_fconst(float(hi), 64)})")
    i = f.op(f"fptosi double {tr} to i64")
    return self.f.conv(i, 64, tb, False)

  def call(self, name: str, args, t: Ty) -> str:
    f = self.f
    if name == "fma" and t.kind == "f" and t.bits in (32, 64) and all(x.ty == t for x in args):
      a, b, c = (self.ex(x) for x in args)
      lt = _lty(t)
      r = f.op(f"call {lt} @llvm.fma.f{t.bits}({lt} {a}, {lt} {b}, {lt} {c})")
      if t.bits == 64:  # runtime._fma: exact only for finite inputs with a non-zero product, else x * y + z
        fin = f.op(f"and i1 {f.op(f'and i1 {self.finite(a, t)}, {self.finite(b, t)}')}, {self.finite(c, t)}")
        p = self.nan_rule(t, [a, b], f.op(f"fmul double {a}, {b}"))
        z = f.op(f"fcmp oeq double {p}, 0.0")
        two = f.op(f"or i1 {f.op(f'xor i1 {fin}, true')}, {z}")
        return f.op(f"select i1 {two}, double {self.nan_rule(t, [p, c], f.op(f'fadd double {p}, {c}'))}, double {r}")
      # f32 goes through an f64 product and sum: NaNs follow those two x86 operations, a then b, then c
      p = self.nan_rule(t, [a, b], f.op(f"fmul float {a}, {b}"))
      return self.nan_rule(t, [p, c], r)
    if name.startswith("Calc") and name.endswith("Addr") and self.op.mem and not t.isf:
      for x in args:  # the executor's effective address answers, whatever the arguments
        self.ex(x)
      return self.coerce(f.op(f"load i64, ptr {self.ea}"), Ty("u", 64), t)
    if "_to_" in name and "scale" not in name and "_sr" not in name.lower() and len(args) == 1:
      return self.convert_named(name, args[0], t)
    if name in ("trunc", "floor") and t.kind == "f" and t.bits in (32, 64) and args[0].ty == t:
      lt = _lty(t)
      return f.op(f"call {lt} @llvm.{name}.f{t.bits}({lt} {self.ex(args[0])})")
    if name in ("isNAN", "isINF") and args[0].ty.kind == "f":
      x, lt = self.ex(args[0]), _lty(args[0].ty)
      if name == "isNAN":
        return f.op(f"fcmp uno {lt} {x}, {x}")
      a = f.op(f"call {lt} @llvm.fabs.f{args[0].ty.bits}({lt} {x})")
      return f.op(f"fcmp oeq {lt} {a}, {_fconst(float('inf'), args[0].ty.bits)}")
    if name == "signext_from_bit" and len(args) == 2 and args[0].ty.kind in "uib" and not t.isf:
      # runtime._sext_bit: the low n bits of x sign-extended from bit n-1 (n == 0: all zeros), as 64 bits
      u, ub = self.raw(self.ex(args[0]), args[0].ty)
      u = self.f.conv(u, ub, 64, False)
      n = self.u64(self.ex(args[1]), args[1].ty)
      pos = f.op(f"select i1 {f.op(f'icmp eq i64 {n}, 0')}, i64 0, i64 {f.op(f'sub i64 {n}, 1')}")
      sgn = f.op(f"trunc i64 {self.shift('lshr', u, 64, pos)} to i1")
      mask = self.shift("shl", "-1", 64, n)
      neg = f.op(f"and i1 {sgn}, {f.op(f'icmp ugt i64 {n}, 0')}")
      low = f.op(f"and i64 {u}, {f.op(f'xor i64 {mask}, -1')}")
      r = f.op(f"select i1 {neg}, i64 {f.op(f'or i64 {u}, {mask}')}, i64 {low}")
      b = args[0].ty.bits
      return self.from_bits(self.f.conv(r, 64, b, False), b, t) if t.bits == b else \
          self.f.conv(self.f.conv(r, 64, b, False), b, t.bits, False)
    if name == "signext" and len(args) == 1 and not t.isf and not args[0].ty.isf:
      s = args[0].ty
      sb = 64 if s.kind == "int" else s.bits
      return self.f.conv(self.ex(args[0]), sb, 64 if t.kind == "int" else t.bits, True)
    raise Unsupported(f"built-in {name}")

  # ---------------------------------------------------------------- memory (pcode MEM[...])
  def mem_read(self, addr: str, at: Ty, bits: int, t: Ty) -> str:
    f = self.f
    a = self.u64(addr, at)
    if bits > 64:  # dword by dword, as core._Mem.read does (each dword bounds-checked on its own)
      acc = "0"
      for k in range(bits // 32):
        p = self.access(f.op(f"add i64 {a}, {4 * k}"), 4, False)
        z = self.f.conv(f.ld("i32", p, self.space, ", align 1"), 32, bits, False)
        acc = f.op(f"or i{bits} {acc}, {f.op(f'shl i{bits} {z}, {32 * k}') if k else z}")
      r, rb = acc, bits
    else:
      nb = max(bits // 8, 1)
      r = f.ld(f"i{8 * nb}", self.access(a, nb, False), self.space, ", align 1")
      rb = 8 * nb
    return self.from_bits(r, rb, t) if t.bits == rb or t.kind == "bool" else self.f.conv(r, rb, t.bits, False)

  def mem_write(self, addr: str, at: Ty, val: str, vt: Ty, bits: int) -> None:
    f = self.f
    a = self.u64(addr, at)
    u, ub = self.raw(val, vt)
    if bits > 64:
      u = self.f.conv(u, ub, bits, False)
      for k in range(bits // 32):
        w = self.f.conv(f.op(f"lshr i{bits} {u}, {32 * k}") if k else u, bits, 32, False)
        f.st("i32", w, self.access(f.op(f"add i64 {a}, {4 * k}"), 4, True), self.space, ", align 1")
      return
    nb = max(bits // 8, 1)
    u = self.f.conv(u, ub, 8 * nb, False)
    f.st(f"i{8 * nb}", u, self.access(a, nb, True), self.space, ", align 1")

  def region(self) -> tuple[str, str, str]:
    """(start, end, host address) of the global-memory region the last access of this instruction hit, read once
    per wave (a probe and a fast loop take it as fixed)."""
    if self.row is None:
      f, k = self.f, self.info["slot"]
      f.pro.append(f"  %hint{k}.r = getelementptr i64, ptr %hints, i64 {HINT_REGION + HINTS * k}")
      f.pro.append(f"  %hint{k}.h = load i64, ptr %hint{k}.r")
      f.pro.append(f"  %hint{k}.k = mul i64 %hint{k}.h, 3")
      f.pro.append(f"  %hint{k}.p = getelementptr i64, ptr {f.ctxp(C_REGS)}, i64 %hint{k}.k")
      for j, nm in enumerate(("s", "e", "a")):
        f.pro.append(f"  %hint{k}.{nm}p = getelementptr i64, ptr %hint{k}.p, i64 {j}")
        f.pro.append(f"  %hint{k}.{nm} = load i64, ptr %hint{k}.{nm}p, {f.tbaa('tbl')}")
      self.row = (f"%hint{k}.s", f"%hint{k}.e", f"%hint{k}.a")
    return self.row

  def delta(self) -> str:
    """host address - guest address for this wave's accesses (probed: one region, or this workgroup's LDS), as a
    pointer: an access is then one getelementptr, affine in the lane when the address is (LLVM vectorises it)."""
    if self.dptr is None:  # computed in the entry block
      f, k = self.f, f"%dl{self.info['slot']}"
      if self.space == "lds":  # address = slot << LDS_SHIFT | offset, host = base + slot * size + offset
        wg, lds, sz = f.ctxp(C_WG), f.ctx(C_LDS), f.ctx(C_LDSZ)
        f.pro += [f"  {k}.o = mul i64 %w, 8", f"  {k}.p = getelementptr i8, ptr {wg}, i64 {k}.o",
                  f"  {k}.s = load i64, ptr {k}.p, {f.tbaa('wg')}", f"  {k}.m = mul i64 {k}.s, {sz}",
                  f"  {k}.a = add i64 {lds}, {k}.m", f"  {k}.h = shl i64 {k}.s, {LDS_SHIFT}",
                  f"  {k}.d = sub i64 {k}.a, {k}.h"]
      else:
        s0, _, host = self.region()
        f.pro.append(f"  {k}.d = sub i64 {host}, {s0}")
      f.pro.append(f"  {k} = inttoptr i64 {k}.d to ptr")
      self.dptr = k
    return self.dptr

  def probe_range(self, body, emin: str, emax: str) -> str:
    """After a probe's lane loop: does some access of the wave leave the region (global) or the allocation (LDS)?
    Every access is ADDR + K with K the same for all lanes (_plain_mem), and the lanes' effective addresses lie in
    [emin, emax]; so the wave touches [emin + min K, emax + max(K + bytes)), a range the region must hold."""
    f = self.f
    ks, ends, avars = [], [], _addr_vars(body)
    for idx, bits in _mem_accesses(body):
      k = _addr_offset(idx, avars)
      k = "0" if k is None else self.u64(self.ex(k), k.ty)
      ks.append(k)
      ends.append(f.op(f"add i64 {k}, {max(bits // 8, 1)}"))
    kmin, kend = ks[0], ends[0]
    for k, e in zip(ks[1:], ends[1:]):
      kmin = f.op(f"call i64 @llvm.umin.i64(i64 {kmin}, i64 {k})")
      kend = f.op(f"call i64 @llvm.umax.i64(i64 {kend}, i64 {e})")
    if self.space == "lds":  # offsets within the workgroup's allocation (no carry into the slot bits)
      hi = f.op(f"add i64 {f.op(f'and i64 {emax}, {(1 << LDS_BITS) - 1}')}, {kend}")
      out = f.op(f"icmp ugt i64 {hi}, {f.ctx(C_LDSZ)}")
      return f.op(f"or i1 {out}, {f.op(f'icmp ult i64 {hi}, {kend}')}")
    lo, hi = f.op(f"add i64 {emin}, {kmin}"), f.op(f"add i64 {emax}, {kend}")
    s0, e0, _ = self.region()
    out = f.op(f"or i1 {f.op(f'icmp ult i64 {lo}, {s0}')}, {f.op(f'icmp ugt i64 {hi}, {e0}')}")
    wrap = f.op(f"or i1 {f.op(f'icmp ult i64 {lo}, {kmin}')}, {f.op(f'icmp ult i64 {hi}, {kend}')}")
    return f.op(f"or i1 {out}, {wrap}")

  def access(self, a: str, nb: int, write: bool) -> str:
    """The host pointer of guest bytes [a, a + nb) in this instruction's space; a fault leaves the function."""
    f = self.f
    if f.mode in ("fast", "contig"):  # probed: in the region (global), within the allocation (LDS)
      return f.op(f"getelementptr i8, ptr {self.delta()}, i64 {a}")
    if self.hint is None:  # the region the last access of this instruction hit (kept across waves)
      self.hint = f"%hint{self.info['slot']}"
      f.pro.append(f"  {self.hint} = getelementptr i64, ptr %hints, i64 {HINT_REGION + HINTS * self.info['slot']}")
    p = f.op(f"call ptr @{self.info['space']}_ptr(ptr %ctx, i64 {a}, i64 {nb}, i64 {int(write)}, i64 %w, "
             f"ptr {self.hint})")
    ok = f.label("ok")
    f.emit(f"br i1 {f.op(f'icmp eq ptr {p}, null')}, label %fault, label %{ok}")
    f.put(ok)
    return p

  # ---------------------------------------------------------------- statements
  def block(self, stmts) -> None:
    for st in stmts:
      self.stmt(st)

  def stmt(self, st) -> None:
    op, a, f = st.op, st.args, self.f
    if op == "note":
      return
    if op == "eval":
      self.ex(a[0])
    elif op == "assign":
      lv, val = a
      if val.op == "array":
        raise Unsupported("arrays")
      self.store(lv, self.ex(val), val.ty)
    elif op == "if":
      arms, els = a
      end = f.label("endif")
      for c, body in arms:
        cv = self.ex(c)
        yes, no = f.label("then"), f.label("else")
        f.emit(f"br i1 {cv}, label %{yes}, label %{no}")
        f.put(yes)
        self.block(body)
        f.emit(f"br label %{end}")
        f.put(no)
      self.block(els)
      f.emit(f"br label %{end}")
      f.put(end)
    elif op == "for":
      var, lo, hi, body = a
      p = self.vars.setdefault("@" + var, (f.alloca("i64"), Ty("int", 64)))[0]
      lov, hiv = self.u64(self.ex(lo), lo.ty), self.u64(self.ex(hi), hi.ty)
      f.emit(f"store i64 {lov}, ptr {p}")
      head, bod, end = f.label("for"), f.label("body"), f.label("endfor")
      f.emit(f"br label %{head}")
      f.put(head)
      i = f.op(f"load i64, ptr {p}")
      go = f.op(f"icmp sle i64 {i}, {hiv}")
      f.emit(f"br i1 {go}, label %{bod}, label %{end}")
      f.put(bod)
      self.loop_exit.append(end)
      self.block(body)
      self.loop_exit.pop()
      i2 = f.op(f"add i64 {f.op(f'load i64, ptr {p}')}, 1")
      f.emit(f"store i64 {i2}, ptr {p}")
      f.emit(f"br label %{head}")
      f.put(end)
    elif op == "break":
      if not self.loop_exit:
        raise Unsupported("break outside a loop")
      f.emit(f"br label %{self.loop_exit[-1]}")
      f.put(f.label("dead"))
    else:
      raise Unsupported(f"statement {op}")

  def lv_read(self, lv) -> tuple[str, Ty]:
    k = lv[0]
    if k == "var":
      p, t = self.vars[lv[1]]
      return self.f.op(f"load {_lty(t)}, ptr {p}"), t
    if k == "state":
      p, w = self.state[lv[1]]
      return self.f.op(f"load i{w}, ptr {p}"), Ty("b", w)
    if k == "as":
      v, t = self.lv_read(lv[1])
      return self.convert("bitcast", v, t, lv[2]), lv[2]
    raise Unsupported(f"read of {k}")

  def store(self, lv, val: str, vt: Ty) -> None:
    f, k = self.f, lv[0]
    if k == "var":
      if lv[1] not in self.vars:
        raise Unsupported(f"unknown local {lv[1]}")
      p, t = self.vars[lv[1]]
      f.emit(f"store {_lty(t)} {self.coerce(val, vt, t) if vt != t else val}, ptr {p}")
    elif k == "state":
      p, w = self.state[lv[1]]
      u, ub = self.raw(val, vt)
      if vt.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      f.emit(f"store i{w} {self.f.conv(u, ub, w, vt.kind == 'i')}, ptr {p}")
    elif k == "as":
      t, inner = lv[2], lv[1]
      bt = lv_ty(inner)
      u, ub = self.raw(val if vt == t else self.coerce(val, vt, t), t)
      if t.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      if bt.bits == ub or (t.kind == "bool" and bt.kind in "ub"):
        self.store(inner, self.from_bits(self.f.conv(u, ub, bt.bits, False), bt.bits, bt) if bt.kind != "bool"
                   else u, bt)
      else:
        old, ot = self.lv_read(inner)
        ou, ob = self.raw(old, ot)
        self.store(inner, self.from_bits(self.insert(ou, ob, u, ub, "0", t.bits), ob, bt), bt)
    elif k == "bit" and self.lanebit and _lane_bit_of(lv[1], lv[2]) in self.lanebit and vt.kind == "bool":
      bit, written = self.lanebit[_lane_bit_of(lv[1], lv[2])]
      f.emit(f"store i1 {val}, ptr {bit}")
      f.emit(f"store i1 true, ptr {written}")
    elif k in ("slice", "bit"):
      inner = lv[1]
      bt = lv_ty(inner)
      old, ot = self.lv_read(inner)
      ou, ob = self.raw(old, ot)
      w = lv[3] if k == "slice" else 1
      u, ub = self.raw(val, vt)
      if vt.kind == "bool":
        u, ub = self.f.conv(u, 8, 1, False), 1
      lo = self.u64(self.ex(lv[2]), lv[2].ty)
      new = self.insert(ou, ob, u, ub, lo, w)
      self.store(inner, self.from_bits(new, ob, bt) if bt.kind not in ("u", "b") else new, bt)
    elif k == "mem":
      self.mem_write(self.ex(lv[1]), lv[1].ty, val, vt, lv[2])
    elif k == "concat":
      total = sum(lv_ty(p).bits for p in lv[1])
      u, ub = self.raw(val, vt)
      u = self.f.conv(u, ub, total, False)
      off = 0
      for part in reversed(lv[1]):
        pt = lv_ty(part)
        pv = self.f.conv(f.op(f"lshr i{total} {u}, {off}") if off else u, total, pt.bits, False)
        self.store(part, self.from_bits(pv, pt.bits, pt) if pt.kind not in ("u", "b") else pv,
                   pt if pt.kind not in ("u", "b") else Ty("u", pt.bits))
        off += pt.bits
    else:
      raise Unsupported(f"store to {k}")

  def insert(self, old: str, ob: int, v: str, vb: int, lo: str, w: int) -> str:
    """runtime.ins: old with bits [lo + w - 1 : lo] replaced by v (masked to w bits)."""
    f = self.f
    v = self.f.conv(v, vb, ob, False) if vb != ob else v
    mask = (1 << w) - 1 if w < ob else (1 << ob) - 1
    v = f.op(f"and i{ob} {v}, {mask}")
    if lo != "0":
      v = self.shift("shl", v, ob, lo)
      m = self.shift("shl", str(mask), ob, lo)
    else:
      m = str(mask)
    keep = f.op(f"and i{ob} {old}, {f.op(f'xor i{ob} {m}, -1')}")
    return f.op(f"or i{ob} {keep}, {v}")


# ------------------------------------------------------------------------------------------------ operands
def _parts(op: Op) -> list[Op]:
  return list(op.info["pair"]) if op.kind == "vopd" else [op]


def supported(op: Op, fam: str) -> None:
  """Raise Unsupported unless the native tier can run `op` exactly as the interpreter does."""
  if op.kind not in BLOCK_KINDS:
    raise Unsupported(op.kind)
  if op.kind == "nop":
    return
  for o in _parts(op):
    sem = o.sem
    if sem is None or sem.regfiles:
      raise Unsupported("register-file access")
    if sem.cross_lane or sem.wave_level or sem.program.lambdas:
      raise Unsupported("cross-lane")
    if o.info.get("dpp") is not None or o.info.get("sdwa") is not None:
      raise Unsupported("DPP/SDWA")
    if o.info.get("clamp") or o.info.get("omod"):
      raise Unsupported("clamp/omod")
    if o.mem and o.mem not in MEM_KINDS:
      raise Unsupported(o.mem)
    if o.atomic:
      raise Unsupported("atomic")
    if "ROUND_MODE" in sem.inputs or "ROUND_MODE" in sem.outputs:
      raise Unsupported("ROUND_MODE")
    if o.kind == "alu" and _scalar_valu(o):
      raise Unsupported("scalar VALU")
    for s in list(o.ins.values()) + list(o.outs.values()):
      if isinstance(s, Src) and (s.pk or s.file == "a" or (s.file == "s" and s.index in APERTURE)):
        raise Unsupported("operand")


class Block:
  """One compiled run of instructions: its native entry point and what the scheduler needs to account for it."""

  def __init__(self, pc: int, ops: list[Op], fn, module, nv: int, ns: int, wrote: dict):
    self.pc, self.ops, self.fn, self.module = pc, ops, fn, module  # the module keeps the machine code alive
    self.n = len(ops)
    self.nv, self.ns = nv, ns  # VGPRs / SGPRs the block touches
    self.wrote = wrote  # {"v": rows, "s": rows} bit masks of the registers it writes


def collect(prog, pc: int, fam: str, limit: int = 1 << 30) -> list[Op]:
  """The longest run (at most `limit`) of supported ops from pc (a branch ends it)."""
  ops = []
  while len(ops) < limit:
    try:
      op = prog.op(pc)
      supported(op, fam)
    except Exception:
      break
    ops.append(op)
    if sets_pc(op):
      break
    pc += op.size
  return ops


class Compiler:
  """LLVM IR for one block: a function per instruction (one wave), a driver looping instructions then waves."""

  def __init__(self, ops: list[Op], lanes: int, fam: str):
    self.ops, self.L, self.fam = ops, lanes, fam
    self.sp = SPECIAL["cdna" if fam == "cdna" else "rdna"]
    self.funcs: list[str] = []
    self.tags = {k: i for i, k in enumerate(TBAA_FIXED)}
    self.wrote = {"v": 0, "s": 0}  # register rows the block writes (Engine.mark)
    self.nv = self.ns = 0  # registers the block touches: an engine with fewer stays interpreted

  def groups(self) -> list[tuple[int, list[Op]]]:
    """The block as (first op index, ops) groups: consecutive lane-pure vector ops share one lane loop (each lane
    runs them in order, its registers kept in host registers). Per-wave registers are written after the loop, so a
    later op may touch one an earlier op writes only where both use it lane by lane as a mask (VCC carry-out, then
    carry-in): the lane's bit is handed on inside the loop. Anything else starts a new group."""
    out, wrote, masks = [], set(), set()  # per-wave registers the group wrote; (index, dwords) it wrote as masks
    joins = lambda o: o.kind == "nop" or _lane_pure(o, self.sp)
    span = lambda x: set(range(x[0], x[0] + x[1]))
    for i, op in enumerate(self.ops):
      reads, writes = _wave_regs(op, self.sp, self.L)
      mine = _mask_regs(op)
      clash = (reads | writes) & wrote
      handed = {x for x in mine["bits"] if span(x) & clash}  # masks this op would take from the group, bit by bit
      if out and joins(op) and all(joins(o) for o in out[-1][1]) and handed <= masks and \
         clash <= set().union(*map(span, handed)):
        out[-1][1].append(op)
      else:
        out.append((i, [op]))
        wrote, masks = set(), set()
      wrote |= writes
      masks = {x for x in masks if not span(x) & writes} | mine["out"]
    return out

  def owners(self) -> dict[int, int]:
    """Plain memory instruction i -> an earlier one j whose probe holds for i too: the same space, address
    registers, offsets and access extents, and nothing in between (j included) writes those registers or EXEC."""
    out, seen = {}, []  # seen: (index, address key) of probed instructions still valid
    for i, op in enumerate(self.ops):
      key = _probe_key(op)
      if key is not None:
        j = next((j for j, k in seen if k == key), None)
        if j is not None:
          out[i] = j
        else:
          seen.append((i, key))
      vw = {s.index + d for o in _parts(op) for s in o.outs.values() if isinstance(s, Src) and s.file == "v"
            for d in range(s.dwords)}
      ww = _wave_regs(op, self.sp, self.L)[1] if op.sem is not None or op.kind == "vopd" else set()
      if op.kind not in ("nop", "alu", "mem", "vopd") or "pc" in ww:
        seen = []
        continue
      exe = set(range(self.sp["exec"], self.sp["exec"] + self.L // 32))
      seen = [(j, k) for j, k in seen if not (set(k[1]) & vw or set(k[2]) & ww or exe & ww)]
    return out

  def declined(self, i: int, ops: list[Op]) -> int:
    """Which op of a group the code generator declines (the group's second if only the group is declined)."""
    for k, op in enumerate(ops):
      try:
        self.inst_fn(i + k, [op])
      except Unsupported:
        return k
    return 1

  def module(self, name: str) -> str:
    self.owner = self.owners()
    groups = self.groups()
    for i, ops in groups:
      try:
        self.funcs.append(self.inst_fns(i, ops))
      except Unsupported as e:
        e.at = i + self.declined(i, ops)  # which op of the run: the block ends before it
        raise
    # wave-major: each wave runs the whole block (its registers stay in cache), then the next wave
    calls = []
    for i, _ in groups:
      calls.append(f"""  %r{i} = call i32 @inst{i}(ptr %ctx, i64 %w, ptr %hints)
  %f{i} = icmp ne i32 %r{i}, 0
  br i1 %f{i}, label %fail{i}, label %e{i}
fail{i}:
  ret i32 {i + 1}
e{i}:""")
    body = "\n".join(calls)
    drv = f"""define i32 @{name}(ptr %ctx, ptr %waves, i64 %n) #0 {{
entry:
  %hints = alloca [{HINTS * len(self.ops)} x i64]
  call void @llvm.memset.p0.i64(ptr %hints, i8 0, i64 {8 * HINTS * len(self.ops)}, i1 false)
  br label %head
head:
  %k = phi i64 [0, %entry], [%k.n, %e{groups[-1][0]}]
  %more = icmp slt i64 %k, %n
  br i1 %more, label %body, label %done
body:
  %wq = getelementptr i64, ptr %waves, i64 %k
  %w = load i64, ptr %wq
  %ini.p = getelementptr i64, ptr %ctx, i64 {C_INIT}
  %ini = load i64, ptr %ini.p, !invariant.load !0
  %has.ini = icmp ne i64 %ini, 0
  br i1 %has.ini, label %setup, label %go
setup:
  call void @prologue(ptr %ctx, i64 %w, i64 {4 * self.L})
  br label %go
go:
{body}
  %k.n = add i64 %k, 1
  br label %head
done:
  ret i32 0
}}
"""
    return _PRELUDE + "\n".join(self.funcs) + drv + self.metadata()

  def metadata(self) -> str:
    """!0 marks invariant loads (ctx fields); each TBAA tag is a scalar type of its own under one root."""
    out = ['attributes #0 = { "prefer-vector-width"="512" }', "!0 = !{}", f'!{TBAA_BASE - 1} = !{{!"gputwin"}}']
    for what, i in self.tags.items():
      t = TBAA_BASE + 2 * i
      out.append(f'!{t} = !{{!"{what}", !{TBAA_BASE - 1}, i64 0}}')
      out.append(f"!{t + 1} = !{{!{t}, !{t}, i64 0}}")
    return "\n".join(out) + "\n"

  # -------------------------------------------------------------------------------- one instruction
  def inst_fns(self, i: int, ops: list[Op]) -> str:
    """@inst{i}: one wave of the instruction (or lane-pure group). Vector ones come twice, the second for a full
    EXEC (every lane on: no masks, which LLVM then drops); the wave's EXEC picks one. A vector memory access whose
    addresses the body takes from its inputs alone first probes them: when every active lane's access lies in the
    region the last wave hit (LDS: within the allocation), a lane loop without checks or calls runs (LLVM
    vectorises it); otherwise the exact one, which checks lane by lane and faults as the interpreter does."""
    op = ops[0]
    if not any(o.vector and o.kind != "nop" for o in ops):
      return self.inst_fn(i, ops)
    f = Fn(self.tags)
    full = f.op(f"icmp eq i64 {self.exec_value(f)}, {(1 << self.L) - 1}")
    call = lambda fn: f.op(f"call i32 @inst{i}{fn}(ptr %ctx, i64 %w, ptr %hints)")

    def either(a: str, b: str) -> str:  # @inst{i}{a} for a full EXEC, else @inst{i}{b}
      yes, no, join = f.label("full"), f.label("some"), f.label("join")
      f.emit(f"br i1 {full}, label %{yes}, label %{no}")
      f.put(yes)
      ra = call(a)
      f.emit(f"br label %{join}")
      f.put(no)
      rb = call(b)
      f.emit(f"br label %{join}")
      f.put(join)
      return f.op(f"phi i32 [{ra}, %{yes}], [{rb}, %{no}]")

    if not (len(ops) == 1 and op.mem in ("global", "ds") and all(_plain_mem(o.sem.program) for o in _parts(op))):
      f.emit(f"ret i32 {either('a', 'n')}")
      return "\n".join([self.inst_fn(i, ops, full=True), self.inst_fn(i, ops, suffix="n"), self.define(f, i, [])])
    j = self.owner.get(i, i)  # j != i: the same addresses as instruction j's, which probed them
    pp = f.op(f"getelementptr i32, ptr %hints, i64 {2 * (HINT_PROBE + HINTS * j)}")
    if j == i:
      probe = either("pa", "p")
      f.emit(f"store i32 {probe}, ptr {pp}")
    else:
      probe = f.op(f"load i32, ptr {pp}")
    f.emit(f"switch i32 {probe}, label %exact [ i32 {PROBE_CONTIG}, label %contig  i32 {PROBE_FAST}, label %fast ]")
    f.put("contig")
    f.emit(f"ret i32 {either('ca', 'c')}")
    f.put("fast")
    ok = f.op(f"icmp eq i32 {call('r')}, {PROBE_FAST}")
    f.emit(f"br i1 {ok}, label %gather, label %exact")
    f.put("gather")
    f.emit(f"ret i32 {call('f')}")
    f.put("exact")
    f.emit(f"ret i32 {call('x')}")
    modes = ("range", "contig", "fast", "exact") if j != i else ("probe", "range", "contig", "fast", "exact")
    fulls = [self.inst_fn(i, [op], m, full=True) for m in (("first", "probe", "contig") if j == i else ("contig",))]
    return "\n".join([self.inst_fn(i, [op], m) for m in modes] + fulls + [self.define(f, i, [])])

  def inst_fn(self, i: int, ops: list[Op], mode: str = "", full: bool = False, suffix: str = "") -> str:
    """@inst{i}: one wave of `ops` (one instruction, or a group of lane-pure ones sharing a lane loop). mode "": as
    is; "exact": the same, as the slow path; "probe": 1 when an active lane's access would leave the probed region
    (or fault), else 0, writing nothing; "fast": accesses unchecked (probed). `full`: for a wave whose EXEC has
    every lane on (the name gets an "a")."""
    f = Fn(self.tags, mode, full, suffix)
    last, nops = ops[-1], len(ops)
    ops = [o for o in ops if o.kind != "nop"] or ops[-1:]  # s_nop, s_delay_alu... in a group: PC and counts only
    op = ops[0]
    info = {"lanes": self.L, "family": self.fam, "space": "lds" if op.mem == "ds" else "gm",
            "slot": self.owner.get(i, i)}
    vector = op.vector and op.kind != "nop"
    if op.kind == "nop":
      self.bump_pc(f, op)
      return self.finish(f, i, str(self.L * nops))
    nops -= len(ops)
    exec_v = self.exec_value(f)
    # units: each instruction's parts (VOPD's two halves read their sources before either writes)
    units = []
    for o in ops:
      parts = _parts(o)
      units.append([(Gen(f, p, info), p) for p in parts])
    # state variables: per wave (scalars, specials) or per lane (VGPRs, addresses)
    for g, o in (x for u in units for x in u):
      self.declare(g, o, vector)
    # a body without memory, loops or lane-0 results runs in every lane, its results kept where EXEC is set: the
    # lane loop is then branch-free, which LLVM vectorises
    gens = [x for u in units for x in u]
    pure = vector and not any(o.mem for _, o in gens) and not any(g.lane0 for g, _ in gens) and \
        not any(_has_loop(o.sem.program.body) for _, o in gens)
    if len(ops) > 1 and not pure:
      raise Unsupported("a lane-pure group with an impure member")
    probe, peel = mode in ("probe", "range", "first"), mode == "first"
    same = f.full and mode == "probe"  # every lane on: compared with lane 0's base (the "first" function)
    hint_base = f"%hints.b{i}"
    if probe:  # min / max over the active lanes of address - lane * stride (probe) or of the address (range)
      f.pro.append(f"  store i1 false, ptr {f.bad}")
      f.pro.append(f"  {hint_base} = getelementptr i64, ptr %hints, i64 {HINT_BASE + HINTS * i}")
      red = [(f.alloca("i64"), pick, idle) for pick, idle in (("umin", "-1"), ("umax", "0"))]
      f.pro += [f"  store i64 {idle}, ptr {acc}" for acc, _, idle in red]
      if same:  # lane 0's base is every lane's, or the lanes are scattered (no reductions needed)
        scattered = f.alloca("i1")
        f.pro += [f"  call i32 @inst{i}qa(ptr %ctx, i64 %w, ptr %hints)", f"  %ref = load i64, ptr {hint_base}",
                  f"  store i1 false, ptr {scattered}"]
    for g, o in gens:  # per-wave state first (read once, before any lane)
      self.load_state(g, o, lane=False)
      for nm in o.sem.program.outputs if pure else ():
        w = g.widths[nm]
        if nm not in g.lane_names and w <= 64 and _lane_bit_only(o.sem.program.body, nm):
          g.masks[nm] = (f.alloca(f"i{w}"), f.alloca(f"i{w}"))
          f.emit(f"store i{w} 0, ptr {g.masks[nm][0]}")
          f.emit(f"store i{w} 0, ptr {g.masks[nm][1]}")
      for nm in g.lane0 & o.outs.keys():  # lane 0 may be inactive: the register then gets the initial value
        self.store_reg(f, o.outs[nm], str(_default(nm, g.widths[nm])), g.widths[nm], o)
    on = None
    if peel:  # lane 0 alone, no loop
      f.emit("%lane32 = add i32 0, 0")
      f.emit("%lane = add i64 0, 0")
      on = f.on = "true"
    elif vector:
      f.emit("br label %pre")  # the block the lane loop's phi names as its entry
      f.put("pre")
      f.emit("br label %lhead")
      f.put("lhead")
      f.emit("%lane = phi i64 [0, %pre], [%lane.n, %lnext]")
      f.emit("%lane32 = trunc i64 %lane to i32")
      if self.L == 32:  # 32-bit lanes: twice the lanes per vector register
        bit = f.op(f"lshr i32 {f.op(f'trunc i64 {exec_v} to i32')}, %lane32")
        on = f.on = f.op(f"trunc i32 {bit} to i1")
      else:
        on = f.on = f.op(f"trunc i64 {f.op(f'lshr i64 {exec_v}, %lane')} to i1")
      if f.full:
        on = f.on = "true"
      if pure or probe:
        f.emit("br label %lbody")
      else:
        f.emit(f"br i1 {on}, label %lbody, label %lnext")
      f.put("lbody")
    else:
      f.emit("%lane32 = add i32 0, 0")
      f.emit("%lane = add i64 0, 0")
    masks, fwd = [], {}  # fwd: SGPR (index, dwords) -> this lane's (bit, written?) of the last op writing that mask
    for unit in units:  # instruction by instruction: its reads see the previous one's writes (this lane's)
      snaps, first = [], len(masks)
      for g, o in unit:
        if not probe:  # (a probe reads only the address registers)
          self.load_state(g, o, lane=True)
        handed = {nm: fwd[(r.index, r.dwords)] for nm in o.sem.program.inputs if pure
                  for r in [_state_src(o, nm)] if isinstance(r, Src) and r.file == "s" and (r.index, r.dwords) in fwd}
        for nm, (hb, _) in handed.items():  # a mask an earlier op of the group wrote: this lane's bit, now
          if nm not in g.masks:  # read (or written to a NULL destination): the body's X.u64[laneId] is this bit
            g.lanebit[nm] = (f.alloca("i1"), f.alloca("i1"))
            f.emit(f"store i1 {f.op(f'load i1, ptr {hb}')}, ptr {g.lanebit[nm][0]}")
            f.emit(f"store i1 false, ptr {g.lanebit[nm][1]}")
        if pure:
          # a lane mask the body only touches at this lane's bit (VCC carry-outs, VOPC results): each lane works on
          # its own bit, and the bits are OR-reduced into the mask after the loop (vectorisable)
          for nm, (acc, wm) in g.masks.items():
            ptr, w = g.state[nm]
            bit, written = g.lanebit[nm] = (f.alloca("i1"), f.alloca("i1"))
            orig = f.op(f"load i{w}, ptr {ptr}")
            mine = f.op(f"lshr i{w} {orig}, {self.lane_w(f, w)}")
            f.emit(f"store i1 {f.op(f'trunc i{w} {mine} to i1')}, ptr {bit}")
            f.emit(f"store i1 false, ptr {written}")
            if nm in handed:  # written by an earlier op of the group: its bit, and whether it wrote it
              hb, hw = handed[nm]
              f.emit(f"store i1 {f.op(f'load i1, ptr {hb}')}, ptr {bit}")
              f.emit(f"store i1 {f.op(f'load i1, ptr {hw}')}, ptr {written}")
            masks.append((g, nm, bit, written, acc, wm, w))
          # other per-wave results this lane may write: kept as they were if the lane is off
          snaps.append([(g.state[nm], f.op(f"load i{g.state[nm][1]}, ptr {g.state[nm][0]}"))
                        for nm in o.sem.program.outputs if nm not in g.lane_names and nm not in g.lanebit])
      for g, o in unit:
        self.addresses(g, o)
      if probe:  # nothing written: a lane that would fault sets `bad`, the rest is reduced for after the loop
        (g, o), = unit
        stride = _stride(o.sem.program)
        ea = f.op(f"load i64, ptr {g.ea}")
        v = ea if mode == "range" else f.op(f"sub i64 {ea}, {f.op(f'mul i64 %lane, {stride}')}")
        if peel:
          f.emit(f"store i64 {v}, ptr {hint_base}")
          f.emit("ret i32 0")
          return self.define(f, i, [])
        if same:
          ne, was = f.op(f"icmp ne i64 {v}, %ref"), f.op(f"load i1, ptr {scattered}")
          f.emit(f"store i1 {f.op(f'or i1 {ne}, {was}')}, ptr {scattered}")
        else:
          for acc, pick, idle in red:  # (plain reductions: vectorised)
            mine, cur = f.op(f"select i1 {on}, i64 {v}, i64 {idle}"), f.op(f"load i64, ptr {acc}")
            f.emit(f"store i64 {f.op(f'call i64 @llvm.{pick}.i64(i64 {cur}, i64 {mine})')}, ptr {acc}")
        f.emit("br label %lnext")
        f.put("lnext")
        f.emit("%lane.n = add i64 %lane, 1")
        f.emit(f"br i1 {f.op(f'icmp eq i64 %lane.n, {self.L}')}, label %lend, label %lhead")
        f.put("lend")
        if same:  # contiguous from lane 0's base, or scattered
          emax = f.op(f"add i64 %ref, {(self.L - 1) * stride}")
          bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, '%ref', emax)}")
          r = f.op(f"select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_CONTIG}")
          sc = f.op(f"load i1, ptr {scattered}")
          f.emit(f"ret i32 {f.op(f'select i1 {sc}, i32 {PROBE_FAST}, i32 {r}')}")
          return self.define(f, i, [])
        lo, hi = (f.op(f"load i64, ptr {acc}") for acc, _, _ in red)
        if mode == "range":  # the lanes are scattered: all of them in one region?
          bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, lo, hi)}")
          f.emit(f"ret i32 {f.op(f'select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_FAST}')}")
          return self.define(f, i, [])
        # contiguous (every active lane at base + lane * stride): the first and last active lanes bound the range
        f.emit(f"store i64 {lo}, ptr {hint_base}")
        first = f.op(f"call i64 @llvm.cttz.i64(i64 {exec_v}, i1 false)")
        last = f.op(f"sub i64 63, {f.op(f'call i64 @llvm.ctlz.i64(i64 {exec_v}, i1 false)')}")
        emin = f.op(f"add i64 {lo}, {f.op(f'mul i64 {first}, {stride}')}")
        emax = f.op(f"add i64 {lo}, {f.op(f'mul i64 {last}, {stride}')}")
        bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, emin, emax)}")
        none = f.op(f"icmp eq i64 {exec_v}, 0")
        contig = f.op(f"or i1 {none}, {f.op(f'icmp eq i64 {lo}, {hi}')}")
        r = f.op(f"select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_CONTIG}")
        f.emit(f"ret i32 {f.op(f'select i1 {contig}, i32 {r}, i32 {PROBE_FAST}')}")
        return self.define(f, i, [])
      for g, o in unit:
        for name, (p, t) in list(g.vars.items()):
          if not name.startswith("@"):
            f.emit(f"store {_lty(t)} {_zero(t)}, ptr {p}")
        g.block(o.sem.program.body)
      for g, o in unit:
        self.store_state(g, o, lane=True, on=on if pure else None)
      for snap in snaps:
        for (ptr, w), old in snap:
          new = f.op(f"load i{w}, ptr {ptr}")
          f.emit(f"store i{w} {f.op(f'select i1 {on}, i{w} {new}, i{w} {old}')}, ptr {ptr}")
      for g, nm, bit, written, *_ in masks[first:]:  # hand this op's mask bits to later ops of the group
        d = g.op.outs.get(nm)
        if isinstance(d, Src):
          fwd[(d.index, d.dwords)] = (bit, written)
    for g, nm, bit, written, acc, wm, w in masks:
      wr = f.op(f"and i1 {f.op(f'load i1, ptr {written}')}, {on}")
      b = f.op(f"and i1 {f.op(f'load i1, ptr {bit}')}, {wr}")
      sh = self.lane_w(f, w)
      for a, v in ((acc, b), (wm, wr)):
        placed = f.op(f"shl i{w} {f.op(f'zext i1 {v} to i{w}')}, {sh}")
        cur = f.op(f"load i{w}, ptr {a}")
        f.emit(f"store i{w} {f.op(f'or i{w} {cur}, {placed}')}, ptr {a}")
    if vector:
      f.emit("br label %lnext")
      f.put("lnext")
      f.emit("%lane.n = add i64 %lane, 1")
      done = f.op(f"icmp eq i64 %lane.n, {self.L}")
      f.emit(f"br i1 {done}, label %lend, label %lhead")
      f.put("lend")
    for g, nm, bit, written, acc, wm, w in masks:  # mask = (old & ~written lanes) | their bits
      ptr = g.state[nm][0]
      lanes = f.op(f"load i{w}, ptr {wm}")
      keep = f.op(f"and i{w} {f.op(f'load i{w}, ptr {ptr}')}, {f.op(f'xor i{w} {lanes}, -1')}")
      bits = f.op(f"load i{w}, ptr {acc}")
      f.emit(f"store i{w} {f.op(f'or i{w} {keep}, {bits}')}, ptr {ptr}")
    for g, o in gens:
      self.store_state(g, o, lane=False)
    self.bump_pc(f, last)
    if vector:
      lane_count = f.op(f"mul i64 {f.op(f'call i64 @llvm.ctpop.i64(i64 {exec_v})')}, {len(ops)}")
    else:
      lane_count = "1"
    return self.finish(f, i, f.op(f"add i64 {lane_count}, {self.L * nops}") if nops else lane_count)

  @staticmethod
  def lane_w(f: Fn, w: int) -> str:
    """The lane number as an i{w} shift amount."""
    return "%lane" if w == 64 else f.op(f"trunc i64 %lane to i{w}")

  def finish(self, f: Fn, i: int, lane_count: str) -> str:
    lc = f.live(C_LANES)
    f.set_ctx(C_LANES, f.op(f"add i64 {lc}, {lane_count}"))
    f.emit("ret i32 0")
    return self.define(f, i, ["fault:", "  ret i32 1"])

  @staticmethod
  def define(f: Fn, i: int, tail: list[str]) -> str:
    name = f"inst{i}{SUFFIX[f.mode]}{'a' if f.full else f.suffix}"
    head = [f"define internal i32 @{name}(ptr %ctx, i64 %w, ptr %hints) alwaysinline {{",
            "entry:"] + f.allocas + f.pro
    return "\n".join(head + f.lines + tail + ["}", ""])

  def bump_pc(self, f: Fn, op: Op) -> None:
    if sets_pc(op):
      return
    pp = f.gep(f.ctxp(C_PC), f.op("mul i64 %w, 8"))
    f.st("i64", str(op.pc + op.size), pp, "pc")

  # -------------------------------------------------------------------------------- register files
  def sgpr_ptr(self, f: Fn, idx: int) -> str:
    self.ns = max(self.ns, idx + 1)
    off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_SSTW)}')}, {f.op(f'mul i64 {idx}, {f.ctx(C_SSTR)}')}")
    return f.gep(f.ctxp(C_S), off)

  def vgpr_ptr(self, f: Fn, idx: int) -> str:
    self.nv = max(self.nv, idx + 1)
    off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_VSTW)}')}, {f.op(f'mul i64 {idx}, {f.ctx(C_VSTR)}')}")
    return f.gep(f.gep(f.ctxp(C_V), off), f.op("mul i64 %lane, 4"))

  def sgpr(self, f: Fn, idx: int, dwords: int) -> str:
    acc = None
    for k in range(dwords):
      v = f.ld("i32", self.sgpr_ptr(f, idx + k), ("s", idx + k))
      acc = self.join(f, acc, v, k, dwords)
    return acc

  def join(self, f: Fn, acc, v: str, k: int, n: int) -> str:
    if n == 1:
      return v
    z = f.op(f"zext i32 {v} to i{32 * n}")
    if k:
      z = f.op(f"shl i{32 * n} {z}, {32 * k}")
    return z if acc is None else f.op(f"or i{32 * n} {acc}, {z}")

  def exec_value(self, f: Fn) -> str:
    e = self.sgpr(f, self.sp["exec"], 2 if self.L == 64 else 1)
    return e if self.L == 64 else f.op(f"zext i32 {e} to i64")

  def fetch(self, f: Fn, s: Src) -> tuple[str, int]:
    """core.Engine.fetch: raw bits and their container width (32, 64, or 32 * dwords)."""
    if s.file == "k":
      w = 64 if s.dwords == 2 or s.value > M32 else 32
      v, bits = str(s.value & ((1 << w) - 1)), w
    elif s.file == "v":
      acc = None
      for k in range(s.dwords):
        acc = self.join(f, acc, f.ld("i32", self.vgpr_ptr(f, s.index + k), ("v", s.index + k)), k, s.dwords)
      v, bits = acc, 32 * s.dwords
    elif s.index in (VCCZ, EXECZ):
      base = self.sp["vcc"] if s.index == VCCZ else self.sp["exec"]
      x = self.sgpr(f, base, 2 if self.L == 64 else 1)
      z = f.op(f"icmp eq i{64 if self.L == 64 else 32} {x}, 0")
      v, bits = f.op(f"zext i1 {z} to i32"), 32
    elif s.index == SCC_CODE:
      v, bits = self.scc_load(f), 32
    else:
      v, bits = self.sgpr(f, s.index, s.dwords), 32 * s.dwords
    if s.hi:
      v = f.op(f"lshr i{bits} {v}, 16")
    if s.abs or s.neg:
      w = 64 if max(s.neg, s.abs) > M32 else 32
      if bits > w:
        raise Unsupported("abs/neg width")
      v = f.conv(v, bits, w)
      bits = w
      if s.abs:
        v = f.op(f"and i{w} {v}, {~s.abs & ((1 << w) - 1)}")
      if s.neg:
        v = f.op(f"xor i{w} {v}, {s.neg}")
    return v, bits

  def scc_load(self, f: Fn) -> str:
    return f.ld("i32", f.gep(f.ctxp(C_SCC), f.op("mul i64 %w, 4")), "scc")

  # -------------------------------------------------------------------------------- pcode state
  def declare(self, g: Gen, o: Op, vector: bool) -> None:
    p = o.sem.program
    names = dict(p.inputs)
    for nm, w in p.outputs.items():
      names[nm] = max(names.get(nm, 0), w)
    g.widths = names
    g.lane_names, g.lane0 = set(), set()
    g.ea = g.f.alloca("i64")
    g.masks = {}  # lane-mask outputs reduced after the lane loop: name -> (bits, written lanes) accumulators
    for nm, w in names.items():
      if w > 1024:
        raise Unsupported("huge state")
      g.state[nm] = (g.f.alloca(f"i{w}"), w)
      s = _state_src(o, nm)
      per_lane = vector and (isinstance(s, Src) and s.file == "v" or nm == "ADDR" and o.mem in ("global", "ds")
                             or nm in p.outputs and _discarded(o, nm, self.sp))
      if vector and nm in p.outputs and not per_lane and not _bit_written(p.body, nm):
        # a per-wave register written whole by every lane (V_MAD_U64_U32's D1): the interpreter keeps lane 0's value
        # (its initial value when lane 0 is inactive)
        if nm in p.inputs or nm in o.old or nm in ("PC", "SCC", "EXEC", "EXEC_LO", "M0"):
          raise Unsupported(f"per-wave output {nm} of a vector op")
        g.lane0.add(nm)
        per_lane = True
      if per_lane:
        g.lane_names.add(nm)
    for nm, t in locals_of(p.body).items():
      g.vars[nm] = (g.f.alloca(_lty(t)), t)

  def load_state(self, g: Gen, o: Op, lane: bool) -> None:
    f, p = g.f, o.sem.program
    for nm, w in g.widths.items():
      if (nm in g.lane_names) != lane or nm == "ADDR" and o.mem:
        continue
      ptr = g.state[nm][0]
      src = None
      if nm in p.inputs:
        s = o.ins.get(nm)
        v, b = self.fetch(f, s) if isinstance(s, Src) else self.special(f, o, nm)
        src = (v, b)
      elif nm in o.old:
        src = self.fetch(f, o.old[nm])
      if src is None:
        f.emit(f"store i{w} {_default(nm, w)}, ptr {ptr}")
      else:
        v, b = src
        f.emit(f"store i{w} {f.conv(v, b, w)}, ptr {ptr}")

  def special(self, f: Fn, o: Op, nm: str) -> tuple[str, int]:
    if nm == "SCC":
      return self.scc_load(f), 32
    if nm in ("EXEC", "EXEC_LO"):
      n = 2 if self.L == 64 and nm == "EXEC" else 1
      return self.sgpr(f, self.sp["exec"], n), 32 * n
    if nm in ("VCCZ", "EXECZ"):
      return self.fetch(f, Src("s", VCCZ if nm == "VCCZ" else EXECZ))
    if nm == "M0":
      return self.sgpr(f, self.sp["m0"], 1), 32
    if nm == "PC":
      return str(o.pc & M32), 64  # a block is straight-line: each instruction's PC is known
    if nm == "WAVE_MODE.IEEE":
      return "1", 32
    if nm == "OFFSET":
      return str(o.info.get("offset", 0) & M32), 32
    if nm in ("OFFSET0", "OFFSET1"):
      return str(o.info.get(nm.lower(), 0)), 32
    return "0", 32

  def addresses(self, g: Gen, o: Op) -> None:
    """core.Engine._memop: the effective address of each lane (or wave), faults as the interpreter raises them."""
    if not o.mem:
      return
    f, info = g.f, o.info
    if f.mode == "contig":  # the probe found every active lane at base + lane * stride
      f.pro += [f"  %cb.p = getelementptr i64, ptr %hints, i64 {HINT_BASE + HINTS * g.info['slot']}",
                "  %cb = load i64, ptr %cb.p"]
      a = f.op(f"add nuw i64 %cb, {f.op(f'mul nuw i64 %lane, {_stride(o.sem.program)}')}")
    elif o.mem == "smem":
      a = f.conv(self.sgpr(f, info["sbase"], 2), 64, 64)
      a = f.op(f"add i64 {a}, {info['offset'] & 0xffffffffffffffff}")
      if info.get("soff_reg") is not None:
        so = self.sgpr(f, info["soff_reg"], 1)
        a = f.op(f"add i64 {a}, {f.op(f'zext i32 {so} to i64')}")
      a = f.op(f"and i64 {a}, -4")
      self.high_check(f, a)
    elif o.mem == "global":
      if info["vaddr"] is None:
        raise Unsupported("global access without vaddr")
      if info["saddr"] is not None:
        base = self.sgpr(f, info["saddr"], 2)
        vp = self.vgpr_ptr(f, info["vaddr"])
        v = f.op(f"zext i32 {f.ld('i32', vp, ('v', info['vaddr']))} to i64")
        a = f.op(f"add i64 {base}, {v}")
      else:
        a = self.fetch(f, Src("v", info["vaddr"], 2))[0]
      a = f.op(f"add i64 {a}, {info['offset'] & 0xffffffffffffffff}")
      self.high_check(f, a)
    else:  # ds
      if info["vaddr"] is not None:
        base = f.ld("i32", self.vgpr_ptr(f, info["vaddr"]), ("v", info["vaddr"]))
      else:
        base = "0"
      if not info["adds_offset"]:
        base = f.op(f"add i32 {base}, {info['offset'] & M32}")
      reach = 1 << (LDS_BITS - 1)
      near = f.op(f"add i32 {base}, {reach}")
      bad = f.op(f"icmp uge i32 {near}, {2 * reach}")
      self.fault_if(f, bad, F_LDSBASE, f.op(f"zext i32 {base} to i64"), 4, "r" not in o.sem.mem)
      wgp = f.gep(f.ctxp(C_WG), f.op("mul i64 %w, 8"))
      wg = f.ld("i64", wgp, "wg")
      lo = f.op(f"zext i32 {f.op(f'and i32 {base}, {(1 << LDS_BITS) - 1}')} to i64")
      a = f.op(f"or i64 {f.op(f'shl i64 {wg}, {LDS_SHIFT}')}, {lo}")
    f.emit(f"store i64 {a}, ptr {g.ea}")  # what the Calc*Addr built-ins answer
    if "ADDR" in g.state:  # pcode's own ADDR input: the low 32 bits, in the width the body declares
      ptr, w = g.state["ADDR"]
      a32 = a if f.mode == "contig" else f.op(f"and i64 {a}, {M32}")  # (contig: probed below 4 GiB)
      f.emit(f"store i{w} {f.conv(a32, 64, w)}, ptr {ptr}")

  def high_check(self, f: Fn, a: str) -> None:
    hi = f.op(f"icmp ugt i64 {a}, {M32}")
    self.fault_if(f, hi, F_HIGH, a, 4, False)

  def fault_if(self, f: Fn, cond: str, kind: int, addr: str, nbytes: int, write: bool) -> None:
    if f.mode == "fast":  # the probe found no lane faulting
      return
    if f.mode in ("probe", "range", "first"):
      f.or_bad(cond)
      return
    yes, no = f.label("flt"), f.label("nof")
    f.emit(f"br i1 {cond}, label %{yes}, label %{no}")
    f.put(yes)
    f.emit(f"call void @fault(ptr %ctx, i64 {kind}, i64 {addr}, i64 {nbytes}, i64 {int(write)}, i64 %w)")
    f.emit("br label %fault")
    f.put(no)

  def store_state(self, g: Gen, o: Op, lane: bool, on: str | None = None) -> None:
    f, p = g.f, o.sem.program
    for nm in p.outputs:
      if (nm in g.lane_names) != lane:
        continue
      ptr, w = g.state[nm]
      v = f.op(f"load i{w}, ptr {ptr}")
      if nm == "PC":
        f.st("i64", f.conv(v, w, 64), f.gep(f.ctxp(C_PC), f.op("mul i64 %w, 8")), "pc")
      elif nm == "SCC":
        f.st("i32", f.conv(v, w, 32), f.gep(f.ctxp(C_SCC), f.op("mul i64 %w, 4")), "scc")
      elif nm in ("EXEC", "EXEC_LO"):
        n = 2 if self.L == 64 and nm == "EXEC" else 1
        self.store_reg(f, Src("s", self.sp["exec"], n), v, w, o)
      elif nm == "M0":
        self.store_reg(f, Src("s", self.sp["m0"]), v, w, o)
      else:
        d = o.outs.get(nm)
        if d is None:
          continue
        if nm in g.lane0:
          yes, no = f.label("l0"), f.label("n0")
          f.emit(f"br i1 {f.op('icmp eq i64 %lane, 0')}, label %{yes}, label %{no}")
          f.put(yes)
          self.store_reg(f, d, v, w, o)
          f.emit(f"br label %{no}")
          f.put(no)
          continue
        self.store_reg(f, d, v, w, o, on)

  def store_reg(self, f: Fn, d: Src, v: str, w: int, o: Op, on: str | None = None) -> None:
    """core.Engine.store for one wave (and lane): split into dwords, SGPR constants dropped, NULL kept 0, 16-bit
    results into their true16 half (RDNA) or zero-extended (CDNA)."""
    total = 32 * d.dwords
    v = f.conv(v, w, total) if w != total else v
    for k in range(d.dwords):
      part = f.op(f"lshr i{total} {v}, {32 * k}") if k else v
      part = f.conv(part, total, 32)
      if d.file == "s":
        if d.index >= 128 and d.index not in (self.sp["exec"], self.sp["exec"] + 1):
          return
        idx = d.index + k
        if idx == self.sp["null"] and self.sp["null"] != self.sp["m0"]:
          continue  # written then reset to 0 by the interpreter
        self.wrote["s"] |= 1 << idx
        f.st("i32", part, self.sgpr_ptr(f, idx), ("s", idx))
      elif d.file == "v":
        ptr = self.vgpr_ptr(f, d.index + k)
        self.wrote["v"] |= 1 << (d.index + k)
        old = f.ld("i32", ptr, ("v", d.index + k)) if on is not None or (d.bits == 16 and d.dwords == 1) else None
        if d.bits == 16 and d.dwords == 1:
          part = f.op(f"and i32 {part}, 65535")
          if self.fam != "cdna":
            if d.hi:
              part = f.op(f"or i32 {f.op(f'and i32 {old}, 65535')}, {f.op(f'shl i32 {part}, 16')}")
            else:
              part = f.op(f"or i32 {f.op(f'and i32 {old}, 4294901760')}, {part}")
        if on is not None:
          part = f.op(f"select i1 {on}, i32 {part}, i32 {old}")
        f.st("i32", part, ptr, ("v", d.index + k))
      else:
        raise Unsupported("store file")


def _default(name: str, w: int) -> int:
  from gputwin.pcode.runtime import DEFAULTS
  return DEFAULTS.get(name, 0) & ((1 << w) - 1)


def _zero(t: Ty) -> str:
  return "0.0" if t.kind == "f" else "false" if t.kind == "bool" else "0"


def _peel(e, ops):
  while getattr(e, "op", None) in ops:
    e = e.args[0]
  return e


def _lane_bit_of(x, idx) -> str | None:
  """`X.u64[laneId]` (as an expression's operands or an lvalue's): the state name X, else None."""
  if isinstance(x, tuple):  # lvalue
    while x[0] == "as":
      x = x[1]
    base = x[1] if x[0] == "state" else None
  else:
    x = _peel(x, ("bitcast",))
    base = x.args[0] if x.op == "state" else None
  i = _peel(idx, ("cvt", "bitcast"))
  return base if base is not None and i.op == "wave" and i.args[0] == "laneId" else None


def _stmts(body, in_loop: bool = False):
  """Every statement of a body, nested ones included, with whether it sits inside a for/while."""
  for st in body:
    yield st, in_loop
    if st.op == "if":
      for _, b in st.args[0]:
        yield from _stmts(b, in_loop)
      yield from _stmts(st.args[1], in_loop)
    elif st.op in ("for", "while"):
      yield from _stmts(st.args[-1], True)


def _root(lv):
  while lv[0] in ("as", "slice", "bit"):
    lv = lv[1]
  return lv


def _mem_accesses(body):
  """(address expression, bits) of every MEM[...] a body reads or writes, in order."""
  out = []

  def walk(x):
    if isinstance(x, tuple):
      if x and x[0] == "mem" and len(x) == 3 and hasattr(x[1], "op"):  # an lvalue
        out.append((x[1], x[2]))
      for y in x:
        walk(y)
    elif hasattr(x, "op"):
      if x.op == "mem":
        out.append((x.args[0], x.args[1]))
      walk(x.args)

  for st, _ in _stmts(body):
    walk(st.args)
  return out


def _addr_vars(body) -> set:
  """Locals a body sets only from one address built-in call (RDNA4's `addr = CalcGlobalAddr(...)`): the effective
  address, as ADDR is."""
  sets = {}
  for st, _ in _stmts(body):
    if st.op == "assign" and _root(st.args[0])[0] == "var":
      sets.setdefault(_root(st.args[0])[1], []).append(st)
  return {nm for nm, sts in sets.items() if len({repr(st.args[1]) for st in sts}) == 1 and all(
          st.args[0][0] == "var" and st in body for st in sts)  # (RDNA4 DS bodies set it again, the same way)
          and sts[0].args[1].op == "call" and re.fullmatch(r"Calc\w*Addr", str(sts[0].args[1].args[0]))}


def _is_addr(e, avars=frozenset()) -> bool:
  """The effective address: state ADDR (possibly zero-extended: its value is below 2**32) or an address local."""
  while e.op in ("cvt", "bitcast") and e.ty.bits >= e.args[0].ty.bits and e.args[0].ty.kind in ("u", "b"):
    e = e.args[0]
  return e.op == "state" and e.args[0] == "ADDR" or e.op == "var" and e.args[0] in avars


def _addr_offset(idx, avars=frozenset()):
  """K of an access at `ADDR + K` (None: the access is at ADDR); raises ValueError for other shapes."""
  if _is_addr(idx, avars):
    return None
  if idx.op == "bin" and idx.args[0] == "+" and idx.ty.bits == 64:
    for a, b in ((idx.args[1], idx.args[2]), (idx.args[2], idx.args[1])):
      if _is_addr(a, avars):
        return b
  raise ValueError("not ADDR + K")


def _probe_key(op: Op):
  """What a plain global/LDS access's probe depends on: (space and accesses, VGPRs, SGPRs of the address), or None
  for an instruction that does not probe."""
  if not (op.vector and op.mem in ("global", "ds") and op.sem is not None and _plain_mem(op.sem.program)):
    return None
  info, p = op.info, op.sem.program
  vaddr = info.get("vaddr")
  vregs = () if vaddr is None else tuple(range(vaddr, vaddr + (2 if op.mem == "global" and info.get("saddr") is None
                                                                 else 1)))
  sregs = () if info.get("saddr") is None else (info["saddr"], info["saddr"] + 1)
  fields = tuple(info.get(k) for k in ("offset", "offset0", "offset1", "adds_offset"))
  accesses = tuple((repr(idx), bits) for idx, bits in _mem_accesses(p.body))
  return (op.mem, _stride(p), fields, accesses), vregs, sregs


def _stride(p) -> int:
  """Bytes between consecutive lanes' addresses when a wave accesses memory contiguously: the bytes one lane moves,
  or for two-address DS ops (OFFSET0 / OFFSET1) those of one of its accesses."""
  nbs = [max(bits // 8, 1) for _, bits in _mem_accesses(p.body)]
  return nbs[0] if {"OFFSET0", "OFFSET1"} <= set(p.inputs) else sum(nbs)


def _plain_mem(p) -> bool:
  """Straight-line assignments with no locals, whose MEM addresses read only inputs the body never writes (global
  and LDS loads and stores): every address is known before the body runs, so a probe can check them all first."""
  avars = _addr_vars(p.body)
  if set(locals_of(p.body)) - avars or any(st.op not in ("assign", "note") for st in p.body) or \
     not _mem_accesses(p.body):
    return False
  for idx, _ in _mem_accesses(p.body):
    try:
      k = _addr_offset(idx, avars)
    except ValueError:
      return False
    names = set()

    def refs(e):
      if hasattr(e, "op"):
        if e.op == "var" and e.args[0] in avars:
          return
        if e.op in ("var", "mem", "call", "lcall", "wave"):
          names.add(None)
        elif e.op == "state":
          names.add(e.args[0])
        for a in e.args:
          for b in (a if isinstance(a, tuple) else (a,)):
            refs(b)

    refs(idx)
    if None in names or names & set(p.outputs):
      return False
    names.clear()
    refs(k) if k is not None else None
    if names - {"OFFSET", "OFFSET0", "OFFSET1"}:  # K: instruction fields only, the same in every lane
      return False
  return True


def _state_src(o: Op, nm: str):
  """The register a pcode state name of `o` is bound to (Compiler.declare's rule), or None."""
  p = o.sem.program
  s = o.ins.get(nm) if nm in p.inputs else None
  return s if isinstance(s, Src) else o.old.get(nm) if nm in o.old else o.outs.get(nm) if nm in p.outputs else s


def _discarded(o: Op, nm: str, sp: dict) -> bool:
  """Is output `nm` written to RDNA's NULL SGPR (V_MAD_U64_U32's unused carry-out): nothing to keep."""
  d = o.outs.get(nm)
  return isinstance(d, Src) and d.file == "s" and d.index == sp["null"] and sp["null"] != sp["m0"]


def _mask_regs(op: Op) -> dict:
  """SGPR (index, dwords) a vector op writes as a lane mask (each lane its own bit: "out"), and those it touches
  only lane by lane ("bits": read and/or written as X.u64[laneId]): a fused group hands such bits on in the loop."""
  out, bits = set(), set()
  for o in _parts(op):
    if o.sem is None or not op.vector:
      continue
    p = o.sem.program
    for nm in set(p.inputs) | set(p.outputs):
      s = _state_src(o, nm) if nm in p.inputs else o.outs.get(nm)
      if not (isinstance(s, Src) and s.file == "s") or max(p.inputs.get(nm, 0), p.outputs.get(nm, 0)) > 64:
        continue
      if _lane_bit_only(p.body, nm, need_write=False):
        bits.add((s.index, s.dwords))
        if nm in p.outputs and _lane_bit_only(p.body, nm):
          out.add((o.outs[nm].index, o.outs[nm].dwords))
  return {"out": out, "bits": bits}


def _lane_pure(op: Op, sp: dict) -> bool:
  """Can this vector instruction share a lane loop: no memory, loops, EXEC writes or per-wave results taken from
  lane 0 (every per-wave output is a lane mask or written lane by lane)."""
  if not op.vector or op.kind not in ("alu", "vopd") or op.mem:
    return False
  for o in _parts(op):
    p = o.sem.program
    if _has_loop(p.body) or {"EXEC", "EXEC_LO"} & set(p.outputs):
      return False
    for nm in p.outputs:
      s = _state_src(o, nm)
      if isinstance(s, Src) and s.file == "s" and s.index <= sp["exec"] + 1 and s.index + s.dwords > sp["exec"]:
        return False
      if not (isinstance(s, Src) and s.file == "v" or _discarded(o, nm, sp) or _bit_written(p.body, nm)):
        return False
  return True


def _wave_regs(op: Op, sp: dict, lanes: int) -> tuple[set, set]:
  """(read, written) per-wave registers of an instruction: SGPR numbers (VCC, EXEC, M0 by theirs), "scc", "pc"."""
  n = 2 if lanes == 64 else 1
  vcc, exe = set(range(sp["vcc"], sp["vcc"] + n)), set(range(sp["exec"], sp["exec"] + n))
  named = {"SCC": {"scc"}, "PC": {"pc"}, "M0": {sp["m0"]}, "EXEC": exe, "EXEC_LO": {sp["exec"]}, "EXECZ": exe,
           "VCCZ": vcc, "VCC": vcc}

  def regs(s, nm):
    if not isinstance(s, Src):
      return named.get(nm, set())
    if s.file != "s":
      return set()
    return {VCCZ: vcc, EXECZ: exe, SCC_CODE: {"scc"}}.get(s.index, set(range(s.index, s.index + s.dwords)))

  reads, writes = set(), set()
  for o in _parts(op):
    if o.sem is None:
      continue
    p = o.sem.program
    for nm in p.inputs:
      reads |= regs(_state_src(o, nm), nm)
    for nm in p.outputs:
      if not _discarded(o, nm, sp):  # (a NULL destination: nothing is written)
        writes |= regs(o.outs.get(nm), nm)
  return reads, writes


def _has_loop(body) -> bool:
  return any(st.op in ("for", "while") for st, _ in _stmts(body))


def _bit_written(body, name: str) -> bool:
  """Is state `name` only written lane by lane (`D0.u64[laneId] = ...`, outside loops), as VOPC and carry-outs do?"""
  writes = [(st.args[0][0], loop) for st, loop in _stmts(body)
            if st.op == "assign" and _root(st.args[0])[:2] == ("state", name)]
  return bool(writes) and all(kind == "bit" and not loop for kind, loop in writes)


def _lane_bit_only(body, name: str, need_write: bool = True) -> bool:
  """Does the body touch state `name` only as `name.u64[laneId]` (read or written as a bool), and write it?"""
  ok, wrote = [True], [False]

  def expr(e):
    if not hasattr(e, "op"):
      return
    if e.op == "bit" and _lane_bit_of(e.args[0], e.args[1]) == name:
      expr(e.args[1])
      return
    if e.op == "state" and e.args[0] == name:
      ok[0] = False
      return
    for a in e.args:
      for b in (a if isinstance(a, tuple) else (a,)):
        expr(b)

  def lval(lv):
    if lv[0] == "bit" and _lane_bit_of(lv[1], lv[2]) == name:
      wrote[0] = True
      return
    if lv[0] == "state" and lv[1] == name:
      ok[0] = False
    for a in lv[1:]:
      if isinstance(a, tuple) and a and isinstance(a[0], str):
        lval(a)
      else:
        expr(a)

  for st, _ in _stmts(body):
    if st.op in ("for", "while"):
      ok[0] = False
    elif st.op == "assign":
      lval(st.args[0])
      expr(st.args[1])
      lv = st.args[0]
      if lv[0] == "bit" and _lane_bit_of(lv[1], lv[2]) == name and st.args[1].ty.kind != "bool":
        ok[0] = False
    elif st.op == "if":
      for c, _ in st.args[0]:
        expr(c)
    elif st.op == "eval":
      expr(st.args[0])
  return ok[0] and (wrote[0] or not need_write)


# memory helpers: global memory through a region table [start, end, host pointer], LDS through one window
_PRELUDE = r"""
declare i64 @llvm.ctpop.i64(i64)
declare i64 @llvm.cttz.i64(i64, i1)
declare i64 @llvm.ctlz.i64(i64, i1)
declare i64 @llvm.umin.i64(i64, i64)
declare i64 @llvm.umax.i64(i64, i64)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare float @llvm.fma.f32(float, float, float)
declare double @llvm.fma.f64(double, double, double)
declare double @llvm.trunc.f64(double)
declare float @llvm.trunc.f32(float)
declare float @llvm.floor.f32(float)
declare double @llvm.floor.f64(double)
declare float @llvm.fabs.f32(float)
declare double @llvm.fabs.f64(double)
declare half @llvm.fabs.f16(half)
declare double @llvm.maxnum.f64(double, double)
declare double @llvm.minnum.f64(double, double)
declare i8 @llvm.bitreverse.i8(i8)
declare i16 @llvm.bitreverse.i16(i16)
declare i32 @llvm.bitreverse.i32(i32)
declare i64 @llvm.bitreverse.i64(i64)

define internal ptr @gm_ptr(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) alwaysinline {
entry:
  %tp = getelementptr i64, ptr %ctx, i64 C_REGS
  %t = load ptr, ptr %tp, !invariant.load !0
  %end = add i64 %a, %nb
  %h = load i64, ptr %hint
  %hk = mul i64 %h, 3
  %hp = getelementptr i64, ptr %t, i64 %hk
  %hs = load i64, ptr %hp, !tbaa TB_TBL
  %hep = getelementptr i64, ptr %hp, i64 1
  %he = load i64, ptr %hep, !tbaa TB_TBL
  %hge = icmp uge i64 %a, %hs
  %hle = icmp ule i64 %end, %he
  %hlt = icmp ult i64 %a, %he
  %hin0 = and i1 %hge, %hle
  %hin = and i1 %hin0, %hlt
  br i1 %hin, label %hit, label %miss
miss:
  %found = call i1 @gm_search(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint)
  br i1 %found, label %again, label %bad
again:
  %h2 = load i64, ptr %hint
  %hk2 = mul i64 %h2, 3
  %hp2 = getelementptr i64, ptr %t, i64 %hk2
  %hs2 = load i64, ptr %hp2, !tbaa TB_TBL
  br label %hit
hit:
  %rp = phi ptr [%hp, %entry], [%hp2, %again]
  %rs = phi i64 [%hs, %entry], [%hs2, %again]
  %fhp = getelementptr i64, ptr %rp, i64 2
  %fh = load i64, ptr %fhp, !tbaa TB_TBL
  %foff = sub i64 %a, %rs
  %fhh = add i64 %fh, %foff
  %fr = inttoptr i64 %fhh to ptr
  ret ptr %fr
bad:
  ret ptr null
}

; the region holding [a, a + nb) into *hint, or false after recording the fault
define internal i1 @gm_search(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) noinline {
entry:
  %np = getelementptr i64, ptr %ctx, i64 C_NREG
  %n = load i64, ptr %np, !invariant.load !0
  %tp = getelementptr i64, ptr %ctx, i64 C_REGS
  %t = load ptr, ptr %tp, !invariant.load !0
  %end = add i64 %a, %nb
  br label %head
head:
  %i = phi i64 [0, %entry], [%i.n, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %look, label %bad
look:
  %k = mul i64 %i, 3
  %sp = getelementptr i64, ptr %t, i64 %k
  %s = load i64, ptr %sp, !tbaa TB_TBL
  %ep = getelementptr i64, ptr %sp, i64 1
  %e = load i64, ptr %ep, !tbaa TB_TBL
  %ge = icmp uge i64 %a, %s
  %lt = icmp ult i64 %a, %e
  %in = and i1 %ge, %lt
  br i1 %in, label %found, label %next
next:
  %i.n = add i64 %i, 1
  br label %head
found:
  %fits = icmp ule i64 %end, %e
  br i1 %fits, label %ok, label %bad
ok:
  store i64 %i, ptr %hint
  ret i1 true
bad:
  call void @fault(ptr %ctx, i64 F_GLOBAL, i64 %a, i64 %nb, i64 %wr, i64 %w)
  ret i1 false
}

define internal void @fault(ptr %ctx, i64 %kind, i64 %a, i64 %nb, i64 %wr, i64 %w) noinline cold {
entry:
  %f0 = getelementptr i64, ptr %ctx, i64 C_FAULT
  store i64 %kind, ptr %f0, !tbaa TB_CTX
  %f1 = getelementptr i64, ptr %ctx, i64 C_FADDR
  store i64 %a, ptr %f1, !tbaa TB_CTX
  %f2 = getelementptr i64, ptr %ctx, i64 C_FBYTES
  store i64 %nb, ptr %f2, !tbaa TB_CTX
  %f3 = getelementptr i64, ptr %ctx, i64 C_FWRITE
  store i64 %wr, ptr %f3, !tbaa TB_CTX
  %f4 = getelementptr i64, ptr %ctx, i64 C_FWAVE
  store i64 %w, ptr %f4, !tbaa TB_CTX
  ret void
}

; a batch's deferred setup of wave w (Engine.pending), before its first instruction: ctx[C_INIT] points to
; [rows n, waves per workgroup, v0 template or 0, row...]: each row of the wave cleared, v0 copied from the template
define internal void @prologue(ptr %ctx, i64 %w, i64 %bytes) alwaysinline {
entry:
  %ipp = getelementptr i64, ptr %ctx, i64 C_INIT
  %ipi = load i64, ptr %ipp
  %ip = inttoptr i64 %ipi to ptr
  %n = load i64, ptr %ip
  %nwp = getelementptr i64, ptr %ip, i64 1
  %nw = load i64, ptr %nwp
  %tp = getelementptr i64, ptr %ip, i64 2
  %tpl = load i64, ptr %tp
  %vp = getelementptr i64, ptr %ctx, i64 C_V
  %v = load i64, ptr %vp
  %swp = getelementptr i64, ptr %ctx, i64 C_VSTW
  %sw = load i64, ptr %swp
  %srp = getelementptr i64, ptr %ctx, i64 C_VSTR
  %sr = load i64, ptr %srp
  %wo = mul i64 %w, %sw
  %wb = add i64 %v, %wo
  br label %head
head:
  %k = phi i64 [0, %entry], [%k.n, %body]
  %more = icmp slt i64 %k, %n
  br i1 %more, label %body, label %tail
body:
  %k3 = add i64 %k, 3
  %rp = getelementptr i64, ptr %ip, i64 %k3
  %r = load i64, ptr %rp
  %ro = mul i64 %r, %sr
  %a = add i64 %wb, %ro
  %ap = inttoptr i64 %a to ptr
  call void @llvm.memset.p0.i64(ptr %ap, i8 0, i64 %bytes, i1 false)
  %k.n = add i64 %k, 1
  br label %head
tail:
  %has = icmp ne i64 %tpl, 0
  br i1 %has, label %zero, label %done
zero:
  %q = urem i64 %w, %nw
  %qo = mul i64 %q, %bytes
  %src = add i64 %tpl, %qo
  %sp = inttoptr i64 %src to ptr
  %dp = inttoptr i64 %wb to ptr
  call void @llvm.memcpy.p0.p0.i64(ptr %dp, ptr %sp, i64 %bytes, i1 false)
  br label %done
done:
  ret void
}

define internal ptr @lds_ptr(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) alwaysinline {
entry:
  %off = and i64 %a, LDS_MASK
  %szp = getelementptr i64, ptr %ctx, i64 C_LDSZ
  %sz = load i64, ptr %szp, !invariant.load !0
  %end = add i64 %off, %nb
  %bad = icmp ugt i64 %end, %sz
  br i1 %bad, label %fail, label %ok
ok:
  %slot = lshr i64 %a, LDS_SHIFT
  %base = mul i64 %slot, %sz
  %idx = add i64 %base, %off
  %bp = getelementptr i64, ptr %ctx, i64 C_LDS
  %b = load i64, ptr %bp, !invariant.load !0
  %h = add i64 %b, %idx
  %r = inttoptr i64 %h to ptr
  ret ptr %r
fail:
  call void @fault(ptr %ctx, i64 F_LDSOFF, i64 %off, i64 %nb, i64 %wr, i64 %w)
  ret ptr null
}
"""
_CTX = dict(NREG=C_NREG, REGS=C_REGS, LDS=C_LDS, LDSZ=C_LDSZ, FAULT=C_FAULT, FADDR=C_FADDR, FBYTES=C_FBYTES,
            FWRITE=C_FWRITE, FWAVE=C_FWAVE, INIT=C_INIT, V=C_V, VSTW=C_VSTW, VSTR=C_VSTR)
_PRELUDE = re.sub(r"i64 C_(\w+)\n", lambda m: f"i64 {_CTX[m.group(1)]}\n", _PRELUDE)  # ctx slots by name
for _k, _v in dict(LDS_MASK=(1 << LDS_BITS) - 1, LDS_SHIFT=LDS_SHIFT, F_GLOBAL=F_GLOBAL, F_LDSOFF=F_LDSOFF,
                   TB_CTX=f"!{TBAA_BASE + 2 * TBAA_FIXED.index('ctx') + 1}",  # (Fn.tbaa's numbering)
                   TB_TBL=f"!{TBAA_BASE + 2 * TBAA_FIXED.index('tbl') + 1}").items():
  _PRELUDE = _PRELUDE.replace(_k, str(_v))


# ------------------------------------------------------------------------------------------------ runtime side
_SEQ = [0]
_COMPILING = threading.RLock()
STATS = {"blocks": 0, "runs": 0, "wave_instructions": 0, "compile_seconds": 0.0}  # this process's tier work
FAILED: list = []  # (arch, ops, LLVM error) of blocks LLVM rejected; tests assert it stays empty


def compile_block(prog, pc: int, lanes: int):
  """The Block starting at pc, or None when its first instruction is not for this tier."""
  with _COMPILING:  # one MCJIT engine per process; mock GPUs run their command processors on threads
    t = time.perf_counter()
    try:
      return _compile_block(prog, pc, lanes)
    finally:
      STATS["compile_seconds"] += time.perf_counter() - t


def _compile_block(prog, pc: int, lanes: int):
  ops = collect(prog, pc, prog.family)
  while ops:
    try:
      comp = Compiler(ops, lanes, prog.family)
      _SEQ[0] += 1
      name = f"blk{_SEQ[0]}"
      text = comp.module(name)
      break
    except Unsupported as e:  # an op the filter let through but the code generator declined: keep the run before it
      ops = ops[:e.at]
  if not ops:
    return None
  llvm, tm, ee = _llvm()
  try:
    mod = llvm.parse_assembly(text)
    mod.verify()
  except RuntimeError as e:  # a code generator bug: stay interpreted, and keep the evidence for the tests
    FAILED.append((prog.arch, [o.inst.op for o in ops], str(e)))
    return None
  pto = llvm.create_pipeline_tuning_options(speed_level=2)
  pto.loop_unrolling = pto.loop_interleaving = False  # halves compile time; the lane loops still vectorise
  pb = llvm.create_pass_builder(tm, pto)
  pb.getModulePassManager().run(mod, pb)
  ee.add_module(mod)
  ee.finalize_object()
  addr = ee.get_function_address(name)
  fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addr)
  blk = Block(pc, ops, fn, mod, comp.nv, comp.ns, comp.wrote)
  STATS["blocks"] += 1
  return blk


def _regions(mem):
  """(change key, [[va, end, host address], ...]) of the guest memory the native code may touch directly, or None
  for an address space it does not know (then the program stays interpreted). Two kinds: emu's GuestMemory
  (numpy buffers) and the mock KFD's GPU VM (buffer objects in host memory; a freed BO is left out, so touching it
  faults)."""
  if hasattr(mem, "starts") and hasattr(mem, "bufs"):  # (keyed by host addresses: an id() can be reused)
    rows = [(s, s + len(b), b.ctypes.data) for s, b in zip(mem.starts, mem.bufs)]
    return tuple(rows), rows
  table = getattr(getattr(mem, "vm", None), "table", None)
  if table is None:
    return None
  starts, ends, maps = table()
  rows = [[m.va, min(m.end, m.va + m.bo.size), m.bo.addr] for m in maps if m.bo.host is not None or m.bo.user_addr]
  return (id(starts), len(rows), tuple(r[2] for r in rows)), rows


class Native:
  """Per-Engine native state: the ctx array the compiled blocks read and write, rebuilt when arrays change."""

  def __init__(self, eng):
    self.eng = eng
    self.ctx = np.zeros(C_N, np.int64)
    self.all = np.arange(eng.W, dtype=np.int64)
    self.wg = np.ascontiguousarray(eng.wg, dtype=np.int64)
    self.regions = np.zeros((0, 3), np.int64)
    self.key = None
    e, c = eng, self.ctx
    c[C_V], c[C_S] = e.V.ctypes.data, e.S.ctypes.data
    c[C_VSTW], c[C_VSTR] = e.V.strides[0], e.V.strides[1]
    c[C_SSTW], c[C_SSTR] = e.S.strides[0], e.S.strides[1]
    c[C_SCC], c[C_PC], c[C_WG] = e.scc.ctypes.data, e.pc.ctypes.data, self.wg.ctypes.data
    c[C_LDS], c[C_LDSZ] = e.lds.buf.ctypes.data, e.lds.size
    assert e.scc.dtype == np.uint32 and e.pc.dtype == np.int64 and e.V.strides[2] == 4
    self.rebind()

  def rebind(self) -> None:
    """The engine's address space (a restarted engine may serve another dispatch's)."""
    mem = self.eng.mem
    self.ok, self.key = _regions(mem) is not None, None
    # an address space shared with a CPU thread (the mock KFD's VM) is held still while native code runs on it
    self.hold = getattr(getattr(mem, "vm", None), "held", None) or contextlib.nullcontext()

  def refresh(self) -> None:
    key, rows = _regions(self.eng.mem)
    if key != self.key:
      self.key = key
      self.regions = np.array(rows or [[0, 0, 0]], np.int64)
      self.ctx[C_NREG] = len(rows)
      self.ctx[C_REGS] = self.regions.ctypes.data

  def run(self, blk: Block, ix) -> None:
    eng, c = self.eng, self.ctx
    waves = self.all if isinstance(ix, slice) else np.ascontiguousarray(ix, dtype=np.int64)
    c[C_FAULT] = 0
    c[C_LANES] = 0
    for file, rows in blk.wrote.items():
      eng.written[file] |= rows
    init = None
    if eng.pending is not None:  # the batch's first block (every wave): each wave's deferred setup goes first
      rows, v0 = eng.pending
      tpl = None if v0 is None else np.ascontiguousarray(v0[0], np.uint32)
      init = np.array([len(rows), 1 if v0 is None else v0[1], 0 if tpl is None else tpl.ctypes.data, *rows], np.int64)
      c[C_INIT] = init.ctypes.data
    with self.hold:
      self.refresh()
      try:
        r = blk.fn(c.ctypes.data, waves.ctypes.data, len(waves))
      finally:
        c[C_INIT] = 0
    STATS["runs"] += 1
    eng._exec = None
    if r:  # waves before the faulting one ran the whole block, it ran r - 1 instructions, the rest none
      done, w = r - 1, int(c[C_FWAVE])
      k = int(np.flatnonzero(waves == w)[0])
      if init is not None:
        eng.settle(waves[k + 1:])  # (the waves the fault kept from starting)
        eng.pending = None
      op = blk.ops[done]
      eng.count += k * blk.n + done
      eng.native_count += k * blk.n + done
      eng.lane_count += int(c[C_LANES])
      eng.clock[waves[:k]] += blk.n
      eng.clock[w] += done
      e = self.fault(op)
      raise Stop("fault", str(e), w, op, e)
    eng.pending = None
    n = len(waves)
    STATS["wave_instructions"] += blk.n * n
    eng.count += blk.n * n
    eng.native_count += blk.n * n
    eng.lane_count += int(c[C_LANES])
    eng.clock[ix] += blk.n

  def fault(self, op: Op) -> GPUPageFault:
    c, eng = self.ctx, self.eng
    kind, addr, nb = int(c[C_FAULT]), int(c[C_FADDR]) & 0xffffffffffffffff, int(c[C_FBYTES])
    access = "write" if c[C_FWRITE] else "read"  # of the faulting access
    whole = "read" if "r" in op.sem.mem else "write"  # of the instruction: the interpreter's checks before any access
    if kind == F_LDSBASE:
      return GPUPageFault(addr, 4, whole, eng.lds.device, f"LDS address past the {eng.lds.size}-byte allocation")
    if kind == F_LDSOFF:
      return GPUPageFault(addr, nb, access, eng.lds.device, f"LDS offset past its {eng.lds.size}-byte allocation")
    return GPUPageFault(addr, 4 if kind == F_HIGH else nb, whole if kind == F_HIGH else access,
                        getattr(eng.mem, "device", ""))


class Tier:
  """What core.run asks at every scheduling step: the compiled block at a PC, or None (interpret this step).

  A block compiles once `GPUTWIN_JIT_AFTER` lanes have reached its first instruction interpreted (rent, then buy:
  compiling costs ~15-25 ms of CPU per instruction, interpreting ~3-10 ns per lane-instruction, so by then the
  interpreter has spent about what the compile costs, whatever the block's length). Only block leaders count: a PC
  the interpreter reached by falling through a compilable, non-branch instruction is the middle of a block that
  starts earlier, and compiling its tail would be wasted."""

  def __init__(self, eng, native: Native):
    self.eng, self.native, self.prog = eng, native, eng.prog
    self.after = threshold()
    self.fallthrough = None  # PC right after the last interpreted instruction, if it could join a block
    p = self.prog.__dict__
    self.blocks, self.heat, self.leads = p.setdefault("blocks", {}), p.setdefault("heat", {}), p.setdefault("leads", {})

  def fresh(self) -> None:
    """Reused for the engine's next batch (Engine.restart): settings are read anew, as a new Tier would."""
    self.after, self.fallthrough = threshold(), None

  @staticmethod
  def make(eng) -> "Tier | None":
    try:
      native = Native(eng)
    except (AssertionError, AttributeError, ValueError):
      return None
    return Tier(eng, native) if native.ok else None

  def block(self, pc: int, waves: int = 1):
    key = (pc, self.eng.L)
    blk = self.blocks.get(key, False)
    if blk is False:
      mid, self.fallthrough = pc == self.fallthrough, None
      lead = self.leads.get(pc)
      if lead is None:
        lead = self.leads[pc] = bool(collect(self.prog, pc, self.prog.family, limit=1))
      if not mid and lead:
        h = self.heat[pc] = self.heat.get(pc, 0) + waves * self.eng.L
        if h >= self.after:
          try:
            blk = self.blocks[key] = compile_block(self.prog, pc, self.eng.L)
          except ImportError:  # llvmlite missing: stay interpreted
            blk = self.blocks[key] = None
          except Exception as e:  # a code generator bug must not stop the launch: interpret, keep the evidence
            FAILED.append((self.prog.arch, pc, f"{type(e).__name__}: {e}"))
            blk = self.blocks[key] = None
      if blk is False:
        if lead:  # interpreted now, but its successor may be mid-block
          op = self.prog.op(pc)
          if not sets_pc(op):
            self.fallthrough = pc + op.size
        return None
    if blk is not None and (blk.nv > self.eng.V.shape[1] or blk.ns > self.eng.S.shape[1]):
      return None  # registers past this dispatch's allocation: the interpreter reports it
    return blk

  def run(self, blk: Block, ix) -> None:
    self.native.run(blk, ix)
