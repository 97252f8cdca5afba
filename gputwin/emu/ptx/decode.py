"""The PTX frontend's binding: a located instruction (image.Located) bound to its pcode semantics
(gputwin.pcode.ptx): destinations D0.., sources S0.., `[addr]` -> ADDR (memory.py computes it), labels -> TARGET, the
carry flag -> CC, special registers -> their rows, time registers -> the warp's instruction count. Program control
(exit, ret, barriers, traps, sleeps) is keyed by the event a body calls (`CONTROL`), `call` and vector moves by their
operand shape; nothing here knows arithmetic.
"""
from __future__ import annotations

import dataclasses
import functools
import struct

import numpy as np

from gputwin.emu.binding import Address
from gputwin.emu.program import Op, Src
from gputwin.emu.ptx.image import SPECIAL_ROW, Located
from gputwin.errors import PcodeError
from gputwin.isa.ptx import model as M
from gputwin.pcode import semantics
from gputwin.pcode.analysis import writes_memory

# the events a body calls -> what the machine does (PTX ISA 9.0: exit 9.7.13.10, ret 9.7.13.9, trap/brkpt
# 9.7.13.11-12, nanosleep 9.7.13.13, bar/barrier 9.7.13.4, bar.warp.sync 9.7.13.5)
CONTROL = {"EXIT": "end", "RET": "ret", "TRAP": "trap", "BRKPT": "trap", "NANOSLEEP": "sleep", "BARRIER": "barrier",
           "BARRIER_ARRIVE": "barrier", "BARRIER_RED_POPC": "barrier", "BARRIER_RED_AND": "barrier",
           "BARRIER_RED_OR": "barrier", "WARP_SYNC": "warpsync"}
# which operand is the member mask of a `.sync` collective (PTX ISA 9.0 9.7.9.6 shfl.sync, 9.7.13.6 vote.sync,
# 9.7.13.7 match.sync, 9.7.13.8 redux.sync, 9.7.13.5 bar.warp.sync, elect.sync): -1 the last, 0 the first
MEMBERMASK = {"shfl": -1, "vote": -1, "match": -1, "redux": -1, "elect": -1, "bar.warp": 0}
SPACES = ("global", "shared", "local", "param", "const", "shared::cta", "shared::cluster")
# generic-address windows (PTX ISA 9.0 5.1.7 "Generic addressing"): 4 GiB each, where NVIDIA userspace drivers put
# them on desktop GPUs (SET_SHADER_{SHARED,LOCAL}_MEMORY_WINDOW: shared 0x7294_0000_0000, local 0x7293_0000_0000, e.g.
# tinygrad's NV backend), in a range no global allocation uses; every other 64-bit address is global (generic ==
# global there). A kernel that converts with cvta never sees the choice.
SHARED_BASE, LOCAL_BASE, WINDOW = 0x7294_0000_0000, 0x7293_0000_0000, 1 << 32
GENERIC = {"shared": SHARED_BASE, "local": LOCAL_BASE}  # the windows, in the order isspacep.global's body takes them
# the window an address plan lands in, as Op.mem names it (shared memory is the LDS window, local the scratch one)
MEM = {"mem": "global", "lds": "ds", "scratch": "scratch", "split": "generic"}  # Address.space -> Op.mem


@functools.lru_cache(maxsize=None)
def _sem(key: str):
  return semantics("ptx", key)


def _key(inst: M.Instruction) -> str:
  from gputwin.pcode import ptx
  return ptx.key(inst.opcode, inst.modifiers)


def imm_bits(v: M.Imm, bits: int) -> int:
  """An immediate as raw bits of an operand `bits` wide: ints two's complement, decimal floats in that float width,
  `0f`/`0d` hex already bits."""
  if v.kind == "int":
    return int(v.value) & ((1 << bits) - 1)
  if v.kind == "float":
    return struct.unpack("<Q", struct.pack("<d", v.value))[0] if bits == 64 else \
      struct.unpack("<I", struct.pack("<f", v.value))[0]
  return int(v.value)


def _flat(o) -> list:
  return list(o.items) if isinstance(o, M.Vec) else [o.a, o.b] if isinstance(o, M.Pair) else [o]


def build_op(loc: Located, pc: int, family: str, wave: int) -> Op:
  inst, img = loc.inst, loc.image
  op = Op(loc, pc, 1, "alu")
  op.info["guard"] = guard(loc)
  ops = list(inst.operands)
  if inst.opcode == "call":
    return _call(op, loc)
  if inst.opcode == "mov" and any(isinstance(o, M.Vec) for o in ops):  # pack/unpack: bits only
    op.kind = "pack"
    op.info["dst"] = [reg_src(loc, r) for r in _flat(ops[0])]
    op.outs = {f"D{i}": d for i, d in enumerate(op.info["dst"])}
    op.info["dnames"] = {f"D{i}": getattr(r, "name", "_") for i, r in enumerate(_flat(ops[0]))}
    op.info["src"] = [operand(loc, r, 32) for r in _flat(ops[1])]
    # element widths: the instruction type's width split evenly over a vector's elements (`mov.b32 %f, {0, %rs}`)
    w = int(next((t for t in inst.types), "b32")[1:])
    op.info["bits"] = [[w // len(_flat(o))] * len(_flat(o)) for o in ops[:2]]
    return op
  if inst.opcode == "cvta":  # generic <-> state-space windows: an add of the window base
    return _cvta(op, loc)
  if inst.opcode == "isspacep":  # is a generic address in a space's window (global: in neither)
    return _isspacep(op, loc)
  if inst.opcode == "mov" and len(ops) == 2 and _var_sum(loc, ops[1]) is not None:  # a register plus a constant
    return _add(op, loc, ops[0], *_var_sum(loc, ops[1]))
  if inst.opcode == "brx":  # brx.idx index, table (PTX ISA 9.0 9.7.13.3): an indexed branch, the table's PCs
    x = img.resolve(loc, ops[1].name) if len(ops) == 2 and hasattr(ops[1], "name") else None
    if x is None or x[0] != "targets":
      op.kind, op.info["why"] = "unsupported", "brx.idx needs a .branchtargets table"
      return op
    op.kind, op.ins["S0"] = "brx", operand(loc, ops[0], 32)
    op.info["table"] = np.array([loc.labels[t] for t in x[1]], np.int64)
    return op
  from gputwin.pcode import ptx
  # a generic access to an instruction whose meaning depends on the state space: one body per space its threads'
  # addresses may resolve to (memory.memop picks per window), op.sem the first's (inputs and outputs are the same)
  per = ptx.spaces(inst.opcode, inst.modifiers) if state_space(inst.modifiers) == "generic" else ()
  try:
    bodies = {s: _sem(ptx.key(inst.opcode, inst.modifiers + (s,))) for s in per}
    sem = bodies[per[0]] if per else _sem(_key(inst))
  except PcodeError as e:
    op.kind, op.info["why"] = "unsupported", str(e)
    return op
  op.sem = sem
  mods = set(inst.modifiers)
  # `bar` is `barrier.aligned` (PTX ISA 9.0 9.7.13.4); `.uni` promises a non-divergent branch (9.7.13.1)
  op.info.update(aligned=inst.opcode == "bar" and "warp" not in mods or "aligned" in mods and inst.opcode == "barrier",
                 uniform="uni" in mods, arrive="arrive" in mods,
                 # volatile/relaxed/acquire/release accesses are morally strong: they synchronise, never race (8.6)
                 strong=bool(mods & {"volatile", "relaxed", "acquire", "release", "acq_rel"}),
                 scope=next((x for x in ("cta", "cluster", "gpu", "sys") if x in mods), None))
  ev = [CONTROL[c] for c in sem.calls if c in CONTROL]
  if ev:
    op.kind = ev[0]
  if op.kind == "ret" and img.functions[loc.func].kind == "entry":  # a kernel's return: the thread exits (9.7.13.9)
    op.kind = "end"
  op.atomic = "r" in sem.mem and writes_memory(sem.program.body)
  dests = _flat(ops[0]) if ops and isinstance(ops[0], (M.Reg, M.Vec, M.Pair)) and "D0" in sem.outputs else []
  srcs = [x for o in ops[len(dests and [0]):] for x in _flat(o)]
  for i, r in enumerate(dests):
    if isinstance(r, M.Reg) and r.name != "_":
      op.outs[f"D{i}"] = reg_src(loc, r)
      op.info.setdefault("dnames", {})[f"D{i}"] = r.name  # for traces
  k = 0
  for o in srcs:
    if isinstance(o, M.Addr):
      op.info["address"] = plan(loc, address(loc, o), state_space(inst.modifiers))  # both tiers evaluate it
      op.mem = MEM[op.info["address"].space]  # the window it lands in (a kernel parameter: guest memory)
      continue
    if isinstance(o, M.Label):
      op.ins["TARGET"] = Src("k", value=loc.labels[o.name])
      continue
    s = op.ins[f"S{k}"] = operand(loc, o, sem.inputs.get(f"S{k}", 32))
    if f"SRC{k}" in sem.inputs and isinstance(s, Src) and s.file == "v":  # its row, for cross-lane bodies
      op.ins[f"SRC{k}"] = Src("k", value=s.index)  # (`VGPR[lane][SRC0]`)
    k += 1
  if "CC" in sem.inputs:  # the carry flag: one row per thread
    op.ins["CC"] = Src("v", img.cc_row)
  if "CC" in sem.outputs:
    op.outs["CC"] = Src("v", img.cc_row)
  mm = MEMBERMASK.get(inst.opcode, MEMBERMASK.get(".".join((inst.opcode,) + inst.modifiers[:1])))
  if mm is not None and srcs:
    s = [x for x in srcs if not isinstance(x, (M.Addr, M.Label))]
    if s:
      op.info["members"] = operand(loc, s[mm], 32)
  if op.kind == "barrier":  # (barrier id, thread count or None, predicate of bar.red or None), by operand role
    red = next((c.rsplit("_", 1)[1].lower() for c in sem.calls if c.startswith("BARRIER_RED_")), None)
    vals = [op.ins[f"S{i}"] for i in range(k)]
    op.info["bar"] = (vals[0] if vals else Src("k", value=0), vals[1] if len(vals) > (2 if red else 1) else None,
                      vals[-1] if red else None)
    op.info["red"] = red
  if op.kind == "warpsync" and op.info.get("guard") is None:  # run for a whole warp (runtime.Block.whole: every
    # thread stands there, so every member has arrived) it moves the threads on and orders nothing the functional
    # machine needs: the native tier runs it as a nop, counted for the threads running it (plan.lowered)
    op.info["lowered"] = Op(op.inst, op.pc, op.size, "nop")
  if per:
    op.info["by_space"] = {s: dataclasses.replace(op, sem=b, info=dict(op.info)) for s, b in bodies.items()}
  return op


def guard(loc: Located):
  g = loc.inst.guard
  if g is None:
    return None
  r = loc.image.resolve(loc, g.reg)
  if r is None or r[0] != "reg":
    raise PcodeError(f"guard {g.reg} is not a register", "ptx", loc.inst.name)
  return (r[1], g.neg)


def reg_src(loc: Located, r: M.Reg) -> Src:
  if r.name == "_":
    return Src("k", value=0)
  x = loc.image.resolve(loc, r.name)
  if x is None or x[0] not in ("reg", "special"):
    raise PcodeError(f"{r.name} is not a register", "ptx", loc.inst.name)
  if x[0] == "special":
    return Src("v", SPECIAL_ROW[x[1]])
  return Src("v", x[1], x[2])


def operand(loc: Located, o, bits: int):
  """A source operand: a Src (register row, constant) or the name of a special input (time registers)."""
  img = loc.image
  if isinstance(o, M.Imm):
    v = imm_bits(o, bits)
    return Src("k", value=v, dwords=2 if bits > 32 else 1)
  if isinstance(o, M.Reg):
    x = img.resolve(loc, o.name)
    if x is None:
      raise PcodeError(f"unknown register {o.name}", "ptx", loc.inst.name)
    if x[0] == "time":
      return o.name
    if x[0] == "special":
      return Src("v", SPECIAL_ROW[x[1]])
    if x[0] == "reg":
      return Src("v", x[1], x[2], neg=1 if o.neg else 0)
    if x[0] == "var":  # a variable's address (`mov.u64 %rd1, smem;`)
      return var_address(loc, x[1], 0, o.name)
    if x[0] == "func":
      return Src("k", value=x[1].entry)
  if isinstance(o, M.Sym):
    x = img.resolve(loc, o.name)
    if x is None or x[0] != "var":
      raise PcodeError(f"unknown symbol {o.name}", "ptx", loc.inst.name)
    return var_address(loc, x[1], o.offset, o.name)
  raise PcodeError(f"operand {o!r} is not supported here", "ptx", loc.inst.name)


def var_address(loc: Located, v, off: int, name: str):
  """`mov` of a variable's name: its address in its own state space, from the same plan a `[var+off]` access uses
  (global/const: the guest VA; shared: the CTA window offset; local: the frame base plus its offset)."""
  p = plan(loc, ("var", v, off), "") if v.space != "entry_param" else None
  if p is not None and not p.terms:
    return Src("k", value=p.offset, dwords=p.width // 32)
  if p is not None and p.offset == 0 and len(p.terms) == 1:
    return p.terms[0]
  raise PcodeError(f"the address of {name} ({v.space}) is not supported", "ptx", loc.inst.name)


def _var_sum(loc: Located, o):
  """(register, offset) when operand `o` names a variable whose address is a register plus a constant (a function's
  .local past the start of its frame: the frame row plus its offset), else None."""
  x = loc.image.resolve(loc, o.name) if isinstance(o, (M.Reg, M.Sym)) else None
  if x is None or x[0] != "var" or x[1].space == "entry_param":
    return None
  p = plan(loc, ("var", x[1], getattr(o, "offset", 0)), "")
  return (p.terms[0], p.offset) if len(p.terms) == 1 and p.offset else None


def _add(op: Op, loc: Located, d, s0: Src, k: int) -> Op:
  """`d = s0 + k` (64-bit), bound to add.u64's semantics: an address a register and a constant make."""
  op.sem = _sem(_key(M.Instruction("add", ("u64",), ())))
  op.outs["D0"] = reg_src(loc, d)
  op.info["dnames"] = {"D0": d.name}
  op.ins["S0"], op.ins["S1"] = s0, Src("k", value=k & ((1 << 64) - 1), dwords=2)
  return op


def state_space(mods) -> str:
  """The state space an instruction's modifiers name (`.shared::cta` is shared), or generic."""
  s = next((m for m in mods if m in SPACES), "")
  return "shared" if s.startswith("shared") else s or "generic"


def address(loc: Located, a: M.Addr):
  """What a `[base+offset]` operand names, for `plan`: ("reg", row, dwords, offset) | ("var", Var, offset) |
  ("abs", offset)."""
  if a.base is None:
    return ("abs", a.offset)
  if isinstance(a.base, M.Reg):
    x = loc.image.resolve(loc, a.base.name)
    if x is not None and x[0] == "reg":
      return ("reg", x[1], x[2], a.offset)
    if x is not None and x[0] == "var":
      return ("var", x[1], a.offset)
  name = a.base.name
  x = loc.image.resolve(loc, name)
  if x is None or x[0] != "var":
    raise PcodeError(f"unknown address base {name}", "ptx", loc.inst.name)
  return ("var", x[1], a.offset + getattr(a.base, "offset", 0))


KIND = {"global": "mem", "const": "mem", "shared": "lds", "local": "scratch", "param": "scratch",
        "generic": "split"}  # a state space -> the machine's window (binding.Address.space)


def plan(loc: Located, a: tuple, space: str) -> Address:
  """An `address` as the machine's plan (binding.Address). Register bases are per thread; variables are constants in
  their window (kernel parameters in the module's .param buffer), a function's .local at its frame base (the frame
  row)."""
  if a[0] == "reg":
    return Address((Src("v", a[1], a[2]),), a[3], 32 * a[2], 1, KIND[space])
  if a[0] == "abs":
    return Address((), a[1], 64, 1, KIND[space])
  var, off = a[1], a[2]
  if var.space in ("global", "const"):
    return Address((), loc.image.va[var.decl.name] + off, 64, 1, "mem")
  if var.space == "shared":
    return Address((), (loc.image.dynamic_offset if var.offset < 0 else var.offset) + off, 32, 1, "lds")
  if var.space == "entry_param":  # the module's .param buffer (Image.place), which each launch fills
    return Address((), loc.image.param_va + var.offset + off, 64, 1, "mem")
  if var.frame:
    return Address((Src("v", loc.image.functions[loc.func].frame_row, 2),), var.offset + off, 64, 1, "scratch")
  return Address((), var.offset + off, 64, 1, "scratch")  # .func params, call-block params, module .local


def _call(op: Op, loc: Located) -> Op:
  """`call{.uni} (ret), func, (args);`: the callee, the caller's argument and return variables."""
  img = loc.image
  ops = list(loc.inst.operands)
  rets, args, target = [], [], None
  for o in ops:
    if isinstance(o, M.Args) and target is None:
      rets = list(o.items)
    elif isinstance(o, M.Args):
      args = list(o.items)
    elif target is None:
      target = o
  name = target.name if hasattr(target, "name") else None
  x = img.resolve(loc, name) if name else None
  if x is None or x[0] != "func":
    op.kind, op.info["why"] = "unsupported", f"indirect or external call to {name}"
    return op
  fn = x[1]
  var = lambda o: img.resolve(loc, o.name)[1]
  op.kind = "call"
  op.info["callee"] = fn
  op.info["args"] = [var(o) for o in args]
  op.info["rets"] = [var(o) for o in rets]
  return op


def _isspacep(op: Op, loc: Located) -> Op:
  """isspacep.space p, a (PTX ISA 9.0 9.7.9.23): the body compares a with the generic windows (S1.. base, size)."""
  inst = loc.inst
  space = state_space(inst.modifiers)
  try:
    op.sem = _sem(_key(inst))
  except PcodeError as e:  # .const/.param: no window of their own here (they live in global memory)
    op.kind, op.info["why"] = "unsupported", str(e)
    return op
  op.outs["D0"] = reg_src(loc, inst.operands[0])
  op.info["dnames"] = {"D0": inst.operands[0].name}
  op.ins["S0"] = operand(loc, inst.operands[1], 64)
  wins = [w for sp, w in GENERIC.items() if space in (sp, "global")]
  for i, v in enumerate(x for w in wins for x in (w, WINDOW)):
    op.ins[f"S{i + 1}"] = Src("k", value=v, dwords=2)
  return op


def _cvta(op: Op, loc: Located) -> Op:
  """cvta{.to}.space.size d, a (PTX ISA 9.0 9.7.9.19): the window base added or taken off (.global: identity)."""
  inst = loc.inst
  space = state_space(inst.modifiers)
  base = GENERIC.get(space, 0)
  to = "to" in inst.modifiers
  wide = "u64" in inst.modifiers
  op.sem = _sem(_key(M.Instruction("add", ("u64" if wide else "u32",), ())))
  op.outs["D0"] = reg_src(loc, inst.operands[0])
  op.info["dnames"] = {"D0": inst.operands[0].name}
  vs = _var_sum(loc, inst.operands[1])  # `cvta.local.u64 %rd, b`: b's frame row, its offset folded into the add
  op.ins["S0"] = vs[0] if vs else operand(loc, inst.operands[1], 64 if wide else 32)
  k = ((-base if to else base) + (vs[1] if vs else 0)) & ((1 << 64) - 1)
  op.ins["S1"] = Src("k", value=k if wide else k & 0xffffffff, dwords=2 if wide else 1)
  return op

