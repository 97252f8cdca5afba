"""Warp-wide tensor and asynchronous-copy instructions of PTX (mma.sync, wmma.*, ldmatrix, stmatrix, cp.async,
mbarrier): their fragment layouts and effects. The matrix ones are `.sync.aligned`: `info["members"]` makes the
scheduler run them once all 32 threads of the warp stand there (core._rendezvous), for the whole warp at once.

    bind(op, loc)            # decode.build_op, for every opcode in OPCODES: op.kind "tensor", op.info["do"], operands
    execute(eng, op, ix, m)  # the PTX frontend's event for kind "tensor": RUN[op.info["do"]]

Citations are PTX ISA 9.0 section titles (vendor/ptx/isa-9.0/<opcode>.md has the instruction pages, without the
fragment figures of "Matrix Fragments for mma.m*n*k*" or those of ldmatrix).

mma.sync fragments ("Matrix Fragments for mma.m*n*k*"): with groupID g = lane / 4, threadID_in_group t = lane % 4,
p elements of the type per 32-bit register (f16/bf16: 2, s8/u8/e4m3/e5m2: 4, tf32: 1; an f64 takes a 64-bit register,
p = 1), register r and element j of it (element index i = p*r + j), every m16n8kK and m8n8kK figure is one rule:

    A (M x K)   row = g + 8*(r % 2)           col = p*t + j + 4p*(r // 2)
    B (K x N)   row = p*t + j + 4p*r          col = g
    C, D        row = g + 8*(i // 2)          col = 2t + i % 2          (one element per register or f16x2 half)

`frag` is that rule; `MMA` lists the (shape, A type) pairs the manual defines and the oldest target of each.

wmma ("Matrix Fragments for WMMA"): the manual leaves fragment contents unspecified. Ours: slot s of a fragment
(register s // p, element s % p, low bits first) of lane l holds element e = (32*s + l) mod (R*C) of the R x C
matrix in row-major order (row e // C, col e % C), whatever layout the memory had. A fragment with more slots than
R*C / 32 (f16 A/B: 16 slots) repeats elements, as the hardware's does; wmma.mma and wmma.store read the first
R*C / 32 slots only, so elementwise work on every slot stays consistent. `stride` counts elements (default: the
leading dimension).

Accumulation model (mma and wmma.mma; the manual fixes neither the order nor the internal precision): every
product is exact, the K products and C are summed exactly, and the sum is rounded once, to nearest even, into the
D type. f16/bf16/tf32/fp8 products are exact in float64; `math.fsum` gives their sum rounded to nearest, the
residual turns it into round-to-odd at 53 bits, after which rounding to f16/f32 is exact rounding of the true sum.
f64 operands are summed as Fractions. Non-finite terms follow IEEE (inf - inf = NaN); a NaN result is the canonical
NaN. A .tf32 operand: "Alternate Floating Point Data Formats" gives tf32 f32's range and at least 10 mantissa bits
in a .b32 register, its layout implementation-defined (kernels convert with cvt.rna.tf32.f32); we read the f32 bits
without the low 13, as Ampere/Hopper tensor cores are reported to, so a converted value passes through unchanged
and an unconverted one is truncated. Integer mma is exact in 64 bits, then wraps to s32 (clamps with `.satfinite`).

cp.async ("cp.async", "cp.async.commit_group", "cp.async.wait_group / cp.async.wait_all"): the machine is
functional, so the copy happens at issue (bytes past src-size are zero, ignore-src true: all zeros). What a checker
needs is kept per thread in `eng.cp_async` (`AsyncCopies`): each copy in flight (warp, lane, group, LDS byte
address, bytes) until a wait_group / wait_all retires its group.

mbarrier ("Parallel Synchronization and Communication Instructions: mbarrier"): the manual keeps the 64-bit object
opaque; ours has bits 0-19 pending arrivals, 20-39 expected arrivals, 40-61 tx-count (two's complement), 63 the
current phase's parity. A phase completes when pending arrivals and tx-count are both zero: the parity flips,
pending is reloaded from expected (arrive_drop lowered both). The `state` an arrive returns is the object before
that thread's arrival (its phase bit says which phase test_wait waits for). try_wait answers at once: the kernel
loops on it, and the scheduler's fairness lets the arriving threads run. A completed phase is a barrier to the LDS
race checker (it orders the arrivals before the waits).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from gputwin.emu.binding import LDS_SHIFT, Stop
from gputwin.emu.program import Op, Src
from gputwin.emu.ptx import decode
from gputwin.errors import GPUPageFault
from gputwin.isa.ptx import model as M

U32, U64 = np.uint32, np.uint64
OPCODES: frozenset = frozenset({"mma", "ldmatrix", "stmatrix", "wmma", "cp", "mbarrier"})
FULL = Src("k", value=0xffffffff)  # member mask of the .sync.aligned ones: the whole warp

# element types: bits, and how raw bits become numbers (see _decode / _encode)
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32, "e4m3": 8, "e5m2": 8}
INT = {"s8", "u8", "s32"}
SHAPE = {"m8n8k4": (8, 8, 4), "m8n8k16": (8, 8, 16), "m16n8k4": (16, 8, 4), "m16n8k8": (16, 8, 8),
         "m16n8k16": (16, 8, 16), "m16n8k32": (16, 8, 32), "m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16),
         "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8)}
# mma.sync (mma.md, "Warp-level matrix multiply-accumulate instruction: mma"): (shape, A type) -> the oldest sm_
# target; ACC: the D/C types each A type allows (B: the A type, or its 8-bit partner)
MMA = {("m16n8k8", "f16"): 80, ("m16n8k16", "f16"): 80, ("m16n8k8", "bf16"): 80, ("m16n8k16", "bf16"): 80,
       ("m16n8k4", "tf32"): 80, ("m16n8k8", "tf32"): 80, ("m8n8k16", "s8"): 80, ("m16n8k16", "s8"): 80,
       ("m16n8k32", "s8"): 80, ("m8n8k16", "u8"): 80, ("m16n8k16", "u8"): 80, ("m16n8k32", "u8"): 80,
       ("m16n8k16", "e4m3"): 89, ("m16n8k32", "e4m3"): 89, ("m16n8k16", "e5m2"): 89, ("m16n8k32", "e5m2"): 89,
       ("m8n8k4", "f64"): 80, ("m16n8k4", "f64"): 90, ("m16n8k8", "f64"): 90, ("m16n8k16", "f64"): 90}
ACC = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "e4m3": ("f16", "f32"), "e5m2": ("f16", "f32"),
       "s8": ("s32",), "u8": ("s32",), "f64": ("f64",)}
# wmma (wmma.md, "Warp-level Matrix Load Instruction: wmma.load" and its mma/store siblings): shape -> the A/B
# types it takes (C/D: ACC)
WMMA = {"m16n16k16": {"f16", "bf16", "s8", "u8"}, "m32n8k16": {"f16", "bf16", "s8", "u8"},
        "m8n32k16": {"f16", "bf16", "s8", "u8"}, "m16n16k8": {"tf32"}, "m8n8k4": {"f64"}}
CD = {"f16", "f32", "s32", "f64"}


def frag(which: str, bits: int, n: int):
  """(rows, cols), each (32, n): the matrix element each lane's fragment element i holds (mma.sync, see above)."""
  lane, i = np.arange(32)[:, None], np.arange(n)[None, :]
  g, t, p = lane // 4, lane % 4, max(1, 32 // bits)
  r, j = i // p, i % p
  return {"a": (g + 8 * (r % 2), p * t + j + 4 * p * (r // 2)), "b": (p * t + j + 4 * p * r, g + 0 * i),
          "c": (g + 8 * (i // 2), 2 * t + i % 2)}[which]


def wmma_frag(rows: int, cols: int, n: int):
  """(rows, cols), each (32, n): our wmma layout (see the module docstring)."""
  e = (32 * np.arange(n)[None, :] + np.arange(32)[:, None]) % (rows * cols)
  return e // cols, e % cols


# ------------------------------------------------------------------------------------------------ binding
def _types(mods) -> list[str]:
  return [m for m in mods if m in BITS]


def _regs(loc, o) -> list[Src]:
  return [decode.reg_src(loc, r) for r in (o.items if isinstance(o, M.Vec) else (o,))]


def _slots(regs: list[Src], t: str) -> int:
  """How many elements of type t the fragment registers hold (0 if one is narrower than an element)."""
  if any(32 * s.dwords < BITS[t] and s.file != "k" for s in regs):
    return 0
  return sum(max(1, 32 * s.dwords // BITS[t]) for s in regs)


@dataclass(frozen=True)
class At:
  """One `[...]` operand of a tensor instruction as memory.base_address takes an op: `info["address"]`, its plan (a
  dataclass, so the native tier's disk cache can key a block holding it)."""
  info: dict = field(default_factory=dict)


def _at(loc, a: M.Addr, space: str):
  """A stand-in op for memory.base_address: one `[...]` operand of the instruction, planned in its state space."""
  return At({"address": decode.plan(loc, decode.address(loc, a), space)})


def _fail(op: Op, why: str) -> Op:
  op.kind, op.info["why"] = "unsupported", why
  return op


def bind(op: Op, loc) -> Op:
  """Fill `op` (kind "tensor", info) for a located instruction whose opcode is in OPCODES."""
  inst = loc.inst
  mods, ops = inst.modifiers, list(inst.operands)
  name = ".".join((inst.opcode,) + mods)
  op.kind = "tensor"
  binder = BIND.get(inst.opcode if inst.opcode != "cp" else ".".join(("cp",) + mods[:1]))
  if binder is None:
    return _fail(op, f"{name} is not supported (of cp.*, only cp.async to shared memory)")
  try:
    why = binder(op.info, loc, mods, ops)
  except (IndexError, AttributeError, TypeError, ValueError):
    why = f"unexpected operands {', '.join(map(str, ops))}"
  return _fail(op, f"{name}: {why}") if why else _outs(op)


def _bind_mma(info: dict, loc, mods, ops) -> str | None:
  """mma.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype d, a, b, c (mma.md)."""
  shape, ty = next((m for m in mods if m in SHAPE), None), _types(mods)
  if shape is None or len(ty) != 4 or any(m.startswith("kind") or m in ("block_scale", "sp") for m in mods):
    return "only the dense mma.sync forms are supported (no .kind, .block_scale, .sp)"
  d, a, b, c = ty
  if (shape, a) not in MMA or b not in (a, {"s8": "u8", "u8": "s8", "e4m3": "e5m2", "e5m2": "e4m3"}.get(a)) or \
     d not in ACC[a] or c not in ACC[a]:
    return f"no mma.sync {shape} with D/A/B/C types {'/'.join(ty)} (PTX ISA 9.0 mma)"
  info.update(do="mma", shape=SHAPE[shape], types=(d, a, b, c), sm=MMA[shape, a], sat="satfinite" in mods,
              regs=[_regs(loc, o) for o in ops[:4]], members=FULL)
  R, N, K = SHAPE[shape]
  for rs, t, (h, w), what in zip(info["regs"], ty, ((R, N), (R, K), (K, N), (R, N)), "dabc"):
    if _slots(rs, t) != h * w // 32:
      return f"operand {what} holds {_slots(rs, t)} .{t} elements, its fragment {h * w // 32}"
  return None


def _bind_ldmatrix(info: dict, loc, mods, ops) -> str | None:
  """ldmatrix.sync.aligned.m8n8.num{.trans}{.ss}.b16 r, [p]; stmatrix ... [p], r (ldmatrix.md, stmatrix.md)."""
  num = next((int(m[1:]) for m in mods if m in ("x1", "x2", "x4")), 0)
  if "m8n8" not in mods or "b16" not in mods or not num:
    return "only .m8n8.{x1,x2,x4}.b16 is supported"
  ld = loc.inst.opcode == "ldmatrix"
  regs, addr = (ops[0], ops[1]) if ld else (ops[1], ops[0])
  info.update(do=loc.inst.opcode, num=num, trans="trans" in mods, regs=_regs(loc, regs), sm=80 if ld else 90,
            at=_at(loc, addr, decode.state_space(mods)), members=FULL)
  return None if len(info["regs"]) == num else f".x{num} takes {num} registers, {len(info['regs'])} given"


def _bind_wmma(info: dict, loc, mods, ops) -> str | None:
  """wmma.load.{a,b,c}.sync.aligned.layout.shape{.ss}.type r, [p]{, stride}; wmma.store.d ... [p], r{, stride};
  wmma.mma.sync.aligned.alayout.blayout.shape.dtype{.atype.btype}.ctype{.satfinite} d, a, b, c (wmma.md)."""
  verb, shape, ty = mods[0], next((m for m in mods if m in SHAPE), None), _types(mods)
  if shape not in WMMA:
    return f"no wmma shape among the modifiers (PTX ISA 9.0 wmma: {', '.join(WMMA)})"
  R, N, K = SHAPE[shape]
  if verb in ("load", "store"):
    which = "d" if verb == "store" else mods[1]
    layout = next((m for m in mods if m in ("row", "col")), None)
    if layout is None or len(ty) != 1 or (ty[0] not in WMMA[shape] if which in "ab" else ty[0] not in CD):
      return f"no such wmma.{verb} (PTX ISA 9.0 wmma.{verb})"
    regs, addr = (ops[0], ops[1]) if verb == "load" else (ops[1], ops[0])
    dims = {"a": (R, K), "b": (K, N), "c": (R, N), "d": (R, N)}[which]
    info.update(do="wmma_" + verb, dims=dims, type=ty[0], layout=layout, regs=_regs(loc, regs),
                at=_at(loc, addr, decode.state_space(mods)),
                stride=decode.operand(loc, ops[2], 32) if len(ops) > 2 else None, members=FULL)
    n = _slots(info["regs"], ty[0])
    return None if n >= dims[0] * dims[1] // 32 else f"{n} .{ty[0]} elements cannot hold the fragment"
  if verb != "mma":
    return "unknown wmma operation"
  d, c = ty[0], ty[-1]
  a = b = ty[1] if len(ty) == 4 else "f16"
  if a not in WMMA[shape] or (len(ty) == 4 and ty[2] != a) or d not in ACC[a] or c not in ACC[a]:
    return "no such wmma.mma (PTX ISA 9.0 wmma.mma)"
  info.update(do="wmma_mma", shape=SHAPE[shape], types=(d, a, b, c), sat="satfinite" in mods,
              regs=[_regs(loc, o) for o in ops[:4]], members=FULL)
  if any(_slots(rs, t) < h * w // 32 for rs, t, (h, w) in
         zip(info["regs"], (d, a, b, c), ((R, N), (R, K), (K, N), (R, N)))):
    return "a fragment operand has too few registers"
  return None


def _outs(op: Op) -> Op:
  """The registers the instruction writes, as `op.outs` (the checkers and tracers read them)."""
  i = op.info
  d = i["regs"][0] if i.get("do") in ("mma", "wmma_mma") else i["regs"] if i.get("do") in ("ldmatrix", "wmma_load") \
    else [i["out"]] if i.get("out") is not None else []
  op.outs = {f"D{k}": s for k, s in enumerate(d) if s.file != "k"}
  return op


def _bind_cp(info: dict, loc, mods, ops) -> str | None:
  """cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy};
  cp.async.commit_group; cp.async.wait_group N; cp.async.wait_all; cp.async.mbarrier.arrive{.noinc} [mbar]. The
  copies and their group bookkeeping are marked async_copy (the checkers and the native tier key on it)."""
  mods = mods[1:]
  if mods[0] in ("commit_group", "wait_all"):
    info.update(do="cp_" + mods[0], async_copy=True)
  elif mods[0] == "wait_group":
    info.update(do="cp_wait_group", n=int(ops[0].value), async_copy=True)
  elif mods[0] == "mbarrier":
    # without .noinc the pending count goes up by one and the copies' completion arrives: no net change
    info.update(do="mbarrier", verb="arrive", at=_at(loc, ops[0], decode.state_space(mods)), count=None, tx=None,
                state=None, drop=False, pend=1 if "noinc" in mods else 0, strong=True, retire=True)
  elif mods[0] in ("ca", "cg") and "bulk" not in mods:
    size = int(ops[2].value)
    if size not in (4, 8, 16) or (mods[0] == "cg" and size != 16):
      return f"cp-size {size} (4, 8 or 16; .cg: 16)"
    extra = [o for o in ops[3:] if not (isinstance(o, M.Reg) and _type(loc, o) in ("b64", "u64", "s64"))]
    info.update(do="cp_async", size=size, dst=_at(loc, ops[0], "shared"), src=_at(loc, ops[1], "global"),
                src_size=None, ignore=None, async_copy=True)
    if extra:
      key = "ignore" if isinstance(extra[0], M.Reg) and _type(loc, extra[0]) == "pred" else "src_size"
      info[key] = decode.operand(loc, extra[0], 32)
  else:
    return "not supported (cp.async.bulk and tensor copies are not modelled)"
  return None


def _type(loc, r: M.Reg) -> str:
  x = loc.image.resolve(loc, r.name)
  return x[3] if x is not None and x[0] == "reg" else ""


MBAR_VERBS = ("init", "arrive", "arrive_drop", "expect_tx", "complete_tx", "test_wait", "try_wait", "pending_count",
              "inval")


def _bind_mbarrier(info: dict, loc, mods, ops) -> str | None:
  """mbarrier.{init, arrive{.expect_tx}, arrive_drop{.expect_tx}, expect_tx, complete_tx, test_wait{.parity},
  try_wait{.parity}, pending_count, inval}.b64 (mbarrier.md and its sibling pages): operands per verb as the manual
  writes them."""
  verb = mods[0]
  if verb not in MBAR_VERBS:
    return "unknown mbarrier operation"
  sp = decode.state_space(mods)
  info.update(do="mbarrier", verb=verb, parity="parity" in mods, count=None, tx=None, state=None, drop=False,
              pend=1, strong=True)  # strong: the LDS race checker leaves the object's own accesses alone
  src = lambda o, bits=32: decode.operand(loc, o, bits)
  if verb == "pending_count":
    info.update(out=_regs(loc, ops[0])[0], state=src(ops[1], 64))
    return None
  addr = next(i for i, o in enumerate(ops) if isinstance(o, M.Addr))
  info["at"] = _at(loc, ops[addr], sp)
  rest = ops[addr + 1:]
  if verb == "init":
    info["count"] = src(rest[0])
  elif verb in ("arrive", "arrive_drop"):
    info.update(out=_regs(loc, ops[0])[0] if addr else None, drop=verb == "arrive_drop", verb="arrive")
    if rest:
      info["tx" if "expect_tx" in mods else "count"] = src(rest[0])
  elif verb in ("expect_tx", "complete_tx"):
    info["tx"] = src(rest[0])
  elif verb in ("test_wait", "try_wait"):
    info.update(out=_regs(loc, ops[0])[0], state=src(rest[0], 32 if info["parity"] else 64), verb="test_wait")
  # sm_90 additions: try_wait, transaction counts, an arrival count (sm_80 has one only with .noComplete)
  counted = info["count"] is not None and verb != "init" and "noComplete" not in mods
  info["sm"] = 90 if verb in ("try_wait", "expect_tx", "complete_tx") or info["tx"] is not None or counted else 80
  return None


# ------------------------------------------------------------------------------------------------ execution
def execute(eng, op: Op, ix, m) -> None:
  """Run a bound tensor/async instruction for the threads `m` of warps `ix`."""
  if not m.any():
    return
  info = op.info
  sm = int(re.sub(r"\D", "", eng.prog.arch) or 0)
  waves = np.arange(eng.W)[ix]
  if info.get("sm", 0) > sm:
    raise Stop("unsupported", f"{op.text}: needs sm_{info['sm']} or later, the target is {eng.prog.arch}",
               int(waves[0]), op)
  if "members" in info:
    part = ~m.all(axis=1)
    if part.any():
      w = int(np.argmax(part))
      raise Stop("unsupported", f"{op.text} is .sync.aligned: warp {waves[w]} runs it with lanes "
                 f"{np.nonzero(m[w])[0].tolist()} only (every thread of the warp must)", int(waves[w]), op)
  if eng.checks is not None:
    eng.checks.cur = op  # the instruction the LDS race checker names (and skips: mbarrier objects are `strong`)
  RUN[info["do"]](eng, op, ix, m, waves)


def _elements(eng, ix, regs: list[Src], bits: int) -> np.ndarray:
  """The fragment elements in `regs` as raw bits (warps, 32, n), element 0 the low bits of the first register."""
  out = []
  for s in regs:
    v = np.broadcast_to(np.asarray(eng.fetch(s, ix)).astype(U64), (eng.nwaves(ix), 32))
    for j in range(max(1, 32 * s.dwords // bits)):
      out.append((v >> U64(j * bits)) & U64((1 << bits) - 1))
  return np.stack(out, axis=-1)


def _put(eng, ix, m, regs: list[Src], bits: int, raw: np.ndarray) -> None:
  """Write raw element bits (warps, 32, n) into the fragment registers (the inverse of _elements)."""
  k = 0
  for s in regs:
    per = max(1, 32 * s.dwords // bits)
    v = np.zeros(raw.shape[:2], U64)
    for j in range(per):
      v |= raw[..., k + j].astype(U64) << U64(j * bits)
    k += per
    if s.file != "k":
      eng.store(s, v if s.dwords == 2 else v.astype(U32), ix, m)


# .e4m3 ("Alternate Floating Point Data Formats"): exponent bias 7, no infinities, S.1111.111 is NaN
E4M3 = np.array([(-1.0) ** (b >> 7) * (((b & 7) / 8 + (((b >> 3) & 15) > 0)) * 2.0 ** (max((b >> 3) & 15, 1) - 7))
                 if (b & 127) != 127 else np.nan for b in range(256)])


def _decode(raw: np.ndarray, t: str) -> np.ndarray:
  """Raw element bits -> float64 (floats) or int64 (integers), exactly."""
  if t in ("s8", "u8", "s32"):
    b = BITS[t]
    v = raw.astype(np.int64)
    return v - ((v >> (b - 1)) << b) if t[0] == "s" else v
  if t == "f16":
    return raw.astype(np.uint16).view(np.float16).astype(np.float64)
  if t == "bf16":
    return (raw.astype(U32) << U32(16)).view(np.float32).astype(np.float64)
  if t in ("tf32", "f32"):
    r = raw.astype(U32)
    return (r & U32(0xffffe000) if t == "tf32" else r).view(np.float32).astype(np.float64)
  if t == "e5m2":
    return (raw.astype(np.uint16) << np.uint16(8)).view(np.float16).astype(np.float64)
  if t == "e4m3":
    return E4M3[raw.astype(np.intp)]
  return raw.astype(U64).view(np.float64)  # f64


def _encode(v: np.ndarray, t: str) -> np.ndarray:
  """Numbers in D's type -> raw bits (floats: already rounded to odd at 53 bits, rounded here to nearest even)."""
  if t == "s32":
    return v.astype(np.int64).astype(U64) & U64(0xffffffff)
  dt, canon = {"f16": (np.float16, 0x7fff), "f32": (np.float32, 0x7fffffff),
               "f64": (np.float64, 0x7fffffffffffffff)}[t]
  with np.errstate(over="ignore", invalid="ignore"):
    r = v.astype(dt)
  bits = r.view({np.float16: np.uint16, np.float32: U32, np.float64: U64}[dt]).astype(U64)
  return np.where(np.isnan(r), U64(canon), bits)


def _odd(hi: float, lo: float) -> float:
  """hi + lo (hi = the sum rounded to nearest, lo the rest) rounded to odd at 53 bits."""
  if lo == 0 or not math.isfinite(hi) or (np.float64(hi).view(U64) & U64(1)):
    return hi
  return float(np.nextafter(hi, math.copysign(math.inf, lo)))


def _sum_odd(T: np.ndarray) -> np.ndarray:
  """Rows of exact float64 terms (..., n) summed exactly and rounded to odd at 53 bits. A left-to-right sum whose
  every step is exact (TwoSum error 0: the usual case) is the answer; the rest go through math.fsum. Non-finite
  results keep IEEE's left-to-right value (inf - inf = NaN)."""
  s, exact = T[..., 0].copy(), np.ones(T.shape[:-1], bool)
  with np.errstate(invalid="ignore", over="ignore"):
    for k in range(1, T.shape[-1]):
      t = T[..., k]
      new = s + t
      bv = new - s
      exact &= (s - (new - bv)) + (t - bv) == 0
      s = new
  for i in zip(*np.nonzero(~exact & np.isfinite(s))):
    terms = list(T[i])
    hi = math.fsum(terms)
    s[i] = _odd(hi, math.fsum(terms + [-hi]))
  return s


def _matmul(A: np.ndarray, B: np.ndarray, C: np.ndarray, types, sat: bool) -> np.ndarray:
  """D = A @ B + C per warp ((w, M, K), (w, K, N), (w, M, N)) under the accumulation model of the docstring."""
  if types[1] in INT:
    s = np.einsum("wmk,wkn->wmn", A, B) + C
    return np.clip(s, -(1 << 31), (1 << 31) - 1) if sat else s
  with np.errstate(invalid="ignore", over="ignore"):
    P = A[:, :, :, None] * B[:, None, :, :]  # (w, M, K, N)
  T = np.concatenate([P.transpose(0, 1, 3, 2), C[..., None]], axis=-1)  # (w, M, N, K + 1)
  if types[1] != "f64":  # f16/bf16/tf32/fp8 products are exact in float64
    return _sum_odd(T)
  out = T.sum(axis=-1)  # f64 products are not: Fractions (IEEE's value where a term is not finite)
  for w, i, j in zip(*np.nonzero(np.isfinite(T).all(axis=-1))):
    out[w, i, j] = float(sum((Fraction(x) * Fraction(y) for x, y in zip(A[w, i], B[w, :, j])), Fraction(C[w, i, j])))
  return out


def _gemm(eng, ix, m, op: Op, coords) -> None:
  """mma / wmma.mma: the fragments gathered into matrices by `coords(which, rows, cols, bits, n)`, multiplied,
  the D fragment written back."""
  (R, N, K), (dt, at, bt, ct), regs = op.info["shape"], op.info["types"], op.info["regs"]
  mats = []
  for which, t, rs, (h, w) in zip("dabc", (dt, at, bt, ct), regs, ((R, N), (R, K), (K, N), (R, N))):
    if which == "d":
      continue
    raw = _elements(eng, ix, rs, BITS[t])
    n = h * w // 32
    rows, cols = coords(which, h, w, BITS[t], raw.shape[-1])
    mat = np.zeros((raw.shape[0], h, w), np.int64 if t in INT else np.float64)
    mat[:, rows[:, :n], cols[:, :n]] = _decode(raw[:, :, :n], t)
    mats.append(mat)
  D = _matmul(*mats, op.info["types"], op.info["sat"])
  nd = _slots(regs[0], dt)
  rows, cols = coords("c", R, N, BITS[dt], nd)
  _put(eng, ix, m, regs[0], BITS[dt], _encode(D[:, rows, cols], dt))


def _mma(eng, op, ix, m, waves) -> None:
  _gemm(eng, ix, m, op, lambda which, h, w, bits, n: frag(which, bits, n))


def _wmma_mma(eng, op, ix, m, waves) -> None:
  _gemm(eng, ix, m, op, lambda which, h, w, bits, n: wmma_frag(h, w, n))


# ------------------------------------------------------------------------------------------------ memory
def _lanes(eng, ix, at):
  """Per-lane addresses (warps, 32) and the state space of a bound `[...]` operand."""
  from gputwin.emu.ptx.memory import base_address
  return base_address(eng, at, ix)


def _mem(eng, space: str, addr, wave, lane, nbytes: int, vals=None, what: str = "access"):
  """Read (vals None) or write `nbytes`-wide values at flat addresses of the given threads, routing generic
  addresses through the shared and local windows (decode.SHARED_BASE/LOCAL_BASE)."""
  from gputwin.emu.ptx.memory import windows
  addr = np.asarray(addr, U64)
  wave, lane = (np.broadcast_to(x, addr.shape).reshape(-1) for x in (wave, lane))
  if vals is not None:
    vals = np.broadcast_to(vals, addr.shape).reshape(-1)
  addr = addr.reshape(-1)
  if space == "generic":
    res = np.zeros(len(addr), {1: np.uint8, 2: np.uint16, 4: U32, 8: U64}[nbytes])
    for sel, sp, a in windows(addr, True):
      if sel.any():
        v = None if vals is None else vals[sel]
        r = _mem(eng, sp, a[sel], wave[sel], lane[sel], nbytes, v, what)
        if vals is None:
          res[sel] = r
    return res if vals is None else None
  if np.any(addr % U64(nbytes)):
    bad = int(addr[(addr % U64(nbytes)) != 0][0])
    raise GPUPageFault(bad, nbytes, what, getattr(eng.mem, "device", ""), f"{what}: address not {nbytes}-aligned")
  if space == "shared":
    off = addr & U64(0xffffffff)
    if len(off) and int(off.max()) + nbytes > eng.lds.size:
      bad = int(off[off + U64(nbytes) > U64(eng.lds.size)][0])
      raise GPUPageFault(bad, nbytes, what, eng.lds.device, f"shared address past the {eng.lds.size}-byte window")
    win, a = eng.lds, off | (eng.wg[wave].astype(U64) << U64(LDS_SHIFT))
    win.lane_waves = np.asarray(wave)  # who accesses each address, for the LDS race checker
  elif space == "local":
    eng.scratch_used = True
    win, a = eng.scratch, (wave.astype(U64) * U64(eng.L) + lane.astype(U64)) * U64(eng.scratch.stride) + addr
  else:
    win, a = eng.mem, addr
  if vals is None:
    return win.gather(a, nbytes)
  win.scatter(a, np.broadcast_to(np.asarray(vals), a.shape), nbytes)


def _ldmatrix(eng, op, ix, m, waves) -> None:
  """ldmatrix / stmatrix .m8n8.xN{.trans}.b16 (ldmatrix.md, stmatrix.md): threads 8k..8k+7 give the row addresses of
  matrix k; lane l's register k holds row l/4, columns 2(l%4) and 2(l%4)+1 of it (transposed with .trans)."""
  info = op.info
  a, space = _lanes(eng, ix, info["at"])
  num, lane = info["num"], np.arange(32)
  r, c = np.broadcast_arrays(lane[:, None] // 4, 2 * (lane[:, None] % 4) + np.arange(2)[None, :])  # (32, 2)
  if info["trans"]:
    r, c = c, r
  k = np.arange(num)[:, None, None]
  given = a[:, :8 * num]
  if np.any(given % U64(16)):  # a row is 16 bytes, naturally aligned
    raise GPUPageFault(int(given[given % U64(16) != 0][0]), 16, "read" if op.info["do"] == "ldmatrix" else "write",
                       eng.lds.device, f"{op.info['do']}: row address not 16-aligned")
  rows = a[:, 8 * k + r]  # (w, num, 32, 2): the row's address, from its thread
  addr = rows + U64(2) * np.broadcast_to(c, rows.shape).astype(U64)
  wv = np.broadcast_to(waves[:, None, None, None], addr.shape)
  ln = np.broadcast_to((8 * k + r)[None], addr.shape)
  if op.info["do"] == "ldmatrix":
    v = _mem(eng, space, addr, wv, ln, 2, what="ldmatrix").reshape(addr.shape).astype(U32)
    for j, s in enumerate(info["regs"]):
      eng.store(s, v[:, j, :, 0] | (v[:, j, :, 1] << U32(16)), ix, m)
  else:
    raw = np.stack([np.asarray(eng.fetch(s, ix)).astype(U32) for s in info["regs"]], axis=1)  # (w, num, 32)
    halves = np.stack([raw & U32(0xffff), raw >> U32(16)], axis=-1)
    _mem(eng, space, addr, wv, ln, 2, halves.astype(np.uint16), "stmatrix")


def _wmma_mem(eng, op, ix, m, waves) -> None:
  """wmma.load.{a,b,c} / wmma.store.d (wmma.md): every slot of our layout at its element's address."""
  info = op.info
  t, (h, w), regs = info["type"], info["dims"], info["regs"]
  bits = BITS[t]
  n = _slots(regs, t)
  if info["do"] == "wmma_store":
    n = h * w // 32
  rows, cols = wmma_frag(h, w, n)
  a, space = _lanes(eng, ix, info["at"])
  ld = w if info["layout"] == "row" else h
  if info["stride"] is not None:
    ld = np.broadcast_to(np.asarray(eng.fetch(info["stride"], ix)).astype(U64), a.shape)[:, :, None]
  off = (rows * ld + cols) if info["layout"] == "row" else (cols * ld + rows)
  addr = a[:, :, None] + np.asarray(off, U64) * U64(bits // 8)
  wv = np.broadcast_to(waves[:, None, None], addr.shape)
  ln = np.broadcast_to(np.arange(32)[None, :, None], addr.shape)
  if info["do"] == "wmma_load":
    raw = _mem(eng, space, addr, wv, ln, bits // 8, what="wmma.load").reshape(addr.shape)
    _put(eng, ix, m, regs, bits, raw)
  else:
    raw = _elements(eng, ix, regs, bits)[:, :, :n]
    _mem(eng, space, addr, wv, ln, bits // 8, raw.astype({8: np.uint8, 16: np.uint16, 32: U32, 64: U64}[bits]),
         "wmma.store")


# ------------------------------------------------------------------------------------------------ cp.async
class AsyncCopies:
  """The cp.async copies each thread has in flight (issued, not yet retired by a wait): rows of (warp, lane, group,
  LDS byte address, bytes), groups numbered per thread from 0; `committed` counts each thread's commit_groups and
  `done` the groups a wait retired (groups below it are complete)."""

  def __init__(self, waves: int, lanes: int):
    self.committed = np.zeros((waves, lanes), np.int64)
    self.done = np.zeros((waves, lanes), np.int64)
    self.rows = np.zeros((0, 5), np.int64)

  def issue(self, wave, lane, lds_addr, nbytes: int) -> None:
    g = self.committed[wave, lane]
    new = np.stack([wave, lane, g, lds_addr.astype(np.int64), np.full(len(wave), nbytes)], axis=1)
    self.rows = np.concatenate([self.rows, new])

  def wait(self, wave, lane, keep: int) -> None:
    """Retire all but the `keep` most recent committed groups of the threads."""
    self.done[wave, lane] = np.maximum(self.done[wave, lane], self.committed[wave, lane] - keep)
    r = self.rows
    if len(r):
      self.rows = r[r[:, 2] >= self.done[r[:, 0], r[:, 1]]]

  def drop(self, wave, lane, lanes: int) -> None:
    """Forget every copy the threads issued so far (cp.async.mbarrier.arrive: an mbarrier tracks them now)."""
    r = self.rows
    if len(r):
      self.rows = r[~np.isin(r[:, 0] * lanes + r[:, 1], np.asarray(wave) * lanes + np.asarray(lane))]

  def in_flight(self, wave: int, lane: int) -> np.ndarray:
    """(LDS byte address, bytes) rows of the copies thread (wave, lane) has not waited for."""
    r = self.rows
    return r[(r[:, 0] == wave) & (r[:, 1] == lane)][:, 3:]


def _copies(eng) -> AsyncCopies:
  if getattr(eng, "cp_async", None) is None:
    eng.cp_async = AsyncCopies(eng.W, eng.L)
  return eng.cp_async


def _cp_async(eng, op, ix, m, waves) -> None:
  info = op.info
  wi, li = np.nonzero(m)
  dst, _ = _lanes(eng, ix, info["dst"])
  src, sspace = _lanes(eng, ix, info["src"])
  dst, src, wave, size = dst[wi, li], src[wi, li], waves[wi], info["size"]
  if np.any(dst % U64(size)) or np.any(src % U64(size)):
    bad = int(np.where(dst % U64(size), dst, src)[((dst | src) % U64(size)) != 0][0])
    raise GPUPageFault(bad, size, "read", getattr(eng.mem, "device", ""), f"cp.async: address not {size}-aligned")
  n = np.full(len(wi), size, np.int64)
  if info["src_size"] is not None:
    n = np.minimum(n, np.broadcast_to(np.asarray(eng.fetch(info["src_size"], ix)), m.shape)[wi, li].astype(np.int64))
  if info["ignore"] is not None:
    n = np.where(np.broadcast_to(np.asarray(eng.fetch(info["ignore"], ix)), m.shape)[wi, li] != 0, 0, n)
  data = np.zeros((len(wi), size), np.uint8)
  for b in range(size):  # only the src-size bytes are read (the rest may lie past the end of an allocation)
    sel = n > b
    if sel.any():
      data[sel, b] = _mem(eng, sspace, src[sel] + U64(b), wave[sel], li[sel], 1, what="cp.async")
  for b in range(0, size, 4):
    _mem(eng, "shared", dst + U64(b), wave, li, 4, data[:, b:b + 4].copy().view(U32).reshape(-1), "cp.async")
  _copies(eng).issue(wave, li, (dst & U64(0xffffffff)) | (eng.wg[wave].astype(U64) << U64(LDS_SHIFT)), size)


def _cp_commit_group(eng, op, ix, m, waves) -> None:
  wi, li = np.nonzero(m)
  _copies(eng).committed[waves[wi], li] += 1


def _cp_wait_group(eng, op, ix, m, waves) -> None:
  wi, li = np.nonzero(m)
  _copies(eng).wait(waves[wi], li, op.info.get("n", 0))


def _cp_wait_all(eng, op, ix, m, waves) -> None:
  _cp_commit_group(eng, op, ix, m, waves)
  _cp_wait_group(eng, op, ix, m, waves)


# ------------------------------------------------------------------------------------------------ mbarrier
PEND, EXP, TX, PHASE = (0, 20), (20, 20), (40, 22), 63


def _field(v: int, f) -> int:
  x = (v >> f[0]) & ((1 << f[1]) - 1)
  return x - (1 << f[1]) if f is TX and x >> (f[1] - 1) else x


def _with(v: int, f, x: int) -> int:
  mask = ((1 << f[1]) - 1) << f[0]
  return (v & ~mask) | ((x << f[0]) & mask)


def _mbarrier(eng, op, ix, m, waves) -> None:
  """One thread at a time in lane order (arrivals at the same object see each other): see the module docstring."""
  info, verb = op.info, op.info["verb"]
  n = eng.nwaves(ix)
  if info.get("retire"):  # cp.async.mbarrier.arrive: the thread's copies complete through the mbarrier's phase,
    wi, li = np.nonzero(m)  # which the program waits on instead of a group: the checker no longer tracks them
    _copies(eng).drop(waves[wi], li, eng.L)
  val = lambda s, bits=32: None if s is None else \
    np.broadcast_to(np.asarray(eng.fetch(s, ix)).astype(U64), (n, eng.L))
  if verb == "pending_count":
    st = val(info["state"])
    eng.store(info["out"], ((st >> U64(PEND[0])) & U64((1 << PEND[1]) - 1)).astype(U32), ix, m)
    return
  a, space = _lanes(eng, ix, info["at"])
  count, tx, state = val(info["count"]), val(info["tx"]), val(info["state"])
  out = np.zeros((n, eng.L), U64)
  if verb == "test_wait":  # test_wait / try_wait only read: every thread at once
    wi, li = np.nonzero(m)
    v = _mem(eng, space, a[wi, li], waves[wi], li, 8, what="mbarrier").astype(U64)
    want = state[wi, li] & U64(1) if info["parity"] else state[wi, li] >> U64(PHASE)
    out[wi, li] = (v >> U64(PHASE)) != want
  for w, l in zip(*np.nonzero(m)) if verb != "test_wait" else ():
    wl = (np.array([waves[w]]), np.array([l]))
    at = a[w, l:l + 1]
    v = int(_mem(eng, space, at, *wl, 8, what="mbarrier")[0])
    if verb == "init":
      c = int(count[w, l]) & ((1 << 20) - 1)
      v = _with(_with(0, PEND, c), EXP, c)
    elif verb == "inval":
      v = 0
    else:
      out[w, l] = v
      if tx is not None:
        v = _with(v, TX, _field(v, TX) + (-1 if verb == "complete_tx" else 1) * int(tx[w, l]))
      if verb == "arrive":
        c = 1 if count is None else int(count[w, l])
        v = _with(v, PEND, _field(v, PEND) - c * info["pend"])
        if info["drop"]:
          v = _with(v, EXP, _field(v, EXP) - c)
      if _field(v, PEND) == 0 and _field(v, TX) == 0:  # the phase completes
        v = _with(_with(v, PEND, _field(v, EXP)), TX, 0) ^ (1 << PHASE)
        if eng.checks is not None:  # it orders the arrivals before the waits: a barrier to the race checker
          eng.checks.barrier(eng, int(eng.wg[waves[w]]))
    _mem(eng, space, at, *wl, 8, np.array([v], U64), "mbarrier")
  if info.get("out") is not None and info["out"].file != "k":
    eng.store(info["out"], out if info["out"].dwords == 2 else out.astype(U32), ix, m)


BIND = {"mma": _bind_mma, "ldmatrix": _bind_ldmatrix, "stmatrix": _bind_ldmatrix, "wmma": _bind_wmma,
        "cp.async": _bind_cp, "mbarrier": _bind_mbarrier}
RUN = {"mma": _mma, "wmma_mma": _wmma_mma, "ldmatrix": _ldmatrix, "stmatrix": _ldmatrix, "wmma_load": _wmma_mem,
       "wmma_store": _wmma_mem, "cp_async": _cp_async, "cp_commit_group": _cp_commit_group,
       "cp_wait_group": _cp_wait_group, "cp_wait_all": _cp_wait_all, "mbarrier": _mbarrier}
