"""gputwin.pcode: AMD's vendor pseudocode, parsed and compiled into vectorised numpy semantics.

    sem = semantics("rdna3", "V_FMA_F32")       # cached; sem.inputs == {"S0": 32, "S1": 32, "S2": 32}
    out = sem({"S0": a, "S1": b, "S2": c}, exec=mask)   # arrays of raw bits shaped (waves, lanes)
    out["D0"]                                    # uint32 (waves, lanes); inactive lanes keep state["D0"] (or 0)

See README.md for the data layout, the memory interface and the hooks.
"""
from __future__ import annotations

import builtins
import functools
import re
from dataclasses import dataclass, field

import numpy as np

from gputwin.errors import PcodeError
from gputwin.pcode import runtime as rt
from gputwin.isa.vendor import pickled
from gputwin.pcode.compile import VERSION, cache_root, generate, source_key
from gputwin.pcode.errata import Erratum, added, corrected, excluded
from gputwin.pcode.ir import Program, lower
from gputwin.pcode.parser import parse

__all__ = ["semantics", "Semantics", "FlatMemory", "family_of", "PcodeError", "source_text", "bodies"]

def family_of(arch: str) -> str:
  """'gfx1100' -> 'rdna3', 'gfx942'/'gfx950' -> 'cdna', 'sm_80'/'sm_90'... -> 'ptx', 'a630'/'a740'... -> 'ir3'; family
  names pass through."""
  from gputwin.isa.targets import TARGETS, target
  from gputwin.isa.vendor import FAMILIES
  a = arch.lower()
  if a == "ptx" or re.fullmatch(r"sm_\d+[af]?", a):  # NVIDIA: one family, the PTX semantics of ours (ptx.py)
    return "ptx"
  if a == "ir3" or re.fullmatch(r"a[4-7]\d\d", a):  # Adreno: one family, the ir3 semantics of ours (ir3.py)
    return "ir3"
  if a in FAMILIES:
    return a
  if a in TARGETS:
    return target(a).family
  raise PcodeError(f"unknown AMD target or family {arch!r}; expected one of {', '.join(FAMILIES + TARGETS)}", arch)


def _rt_globals() -> dict:
  g = {k: getattr(rt, k) for k in dir(rt) if not k.startswith("__")}
  g.update(np=np, PcodeError=PcodeError)
  return g


_RT = _rt_globals()


@dataclass
class Semantics:
  """One instruction's compiled meaning. Call it on a batch; read `inputs`/`outputs` to know what to pass."""
  family: str
  name: str
  vendor_text: str
  text: str  # after errata
  errata: list[Erratum]
  source: str  # generated Python
  inputs: dict[str, int]  # state register -> bits, read by the body
  outputs: dict[str, int]  # state register -> bits, written by the body (returned by __call__)
  regfiles: frozenset[str]  # register files accessed by index: pass them in state (whole-wave access)
  mem: str  # "", "r", "w" or "rw": how MEM is used
  calls: frozenset[str]  # built-ins and hooks the body calls
  wave_level: bool  # indexes VGPR by lane without using laneId (permlane, readlane, ds_bpermute): runs per wave
  consts: dict = field(repr=False, default_factory=dict)  # constants the generated source refers to

  @property
  def cross_lane(self) -> bool:
    return "VGPR" in self.regfiles

  @functools.cached_property
  def _run(self):
    """The generated function, compiled on first call: the executor never calls some bodies (program control, whose
    events it implements), and a cold launch should not pay for compiling them."""
    g = dict(_RT)
    g.update(self.consts, ARCH=self.family, INST=self.name)
    exec(builtins.compile(self.source, f"<pcode {self.family}:{self.name}>", "exec"), g)
    return g["run"]

  @functools.cached_property
  def program(self) -> Program:
    return lower(parse(self.text, self.family, self.name), self.family, self.name, operand_bits(self.family, self.name))

  def __call__(self, state: dict, exec=None, mem=None, lanes: int | None = None, wave64: bool | None = None) -> dict:
    """Apply the instruction to every lane of every wave in the batch.

    state: register name -> numpy raw bits: per-lane values shaped (waves, lanes), per-wave values (waves, 1),
      uniform values as scalars; register files (VGPR (waves, lanes, regs) uint32, SGPR (waves, regs)) are
      updated in place. exec: bool (waves, lanes) active-lane mask, None = all lanes (SALU). mem: object with
      read(addr, bits) / write(addr, values, bits) (see FlatMemory) and optional hooks for address built-ins.
    Returns the written registers (raw bits); inactive lanes hold the value given in state (or 0)."""
    L = lanes or _lanes(state, exec, wave64)
    ctx = rt.Ctx(np.arange(L, dtype=np.uint32)[None, :], (L <= 32) if wave64 is None else not wave64, mem,
                 {k: state[k] for k in self.regfiles if k in state}, self._sub)
    m = None if exec is None else np.asarray(exec, dtype=bool)
    if m is not None and "EXEC" not in state and ({"EXEC", "EXECZ"} & set(self.inputs)):  # EXEC from the mask
      bits = (m.astype(np.uint64) << np.arange(m.shape[-1], dtype=np.uint64)).sum(axis=-1, dtype=np.uint64)
      state = dict(state, EXEC=bits.reshape(m.shape[:-1] + (1,)))
    for z, r in (("EXECZ", "EXEC"), ("VCCZ", "VCC")):  # derived flags the caller need not keep
      if z in self.inputs and z not in state and r in state:
        state = dict(state, **{z: (np.asarray(state[r]) == 0).astype(np.uint32)})
    if m is not None and self.wave_level:  # the body loops over lanes itself: it runs once per active wave
      m = m.any(axis=-1, keepdims=True)
    if "w" in self.mem and "r" in self.mem and mem is not None and m is not None and m.sum() > 1:
      return self._rmw(state, m, ctx)
    with np.errstate(all="ignore"):
      out = self._run(state, m, ctx)
    return self._finish(state, out, m)

  def _finish(self, state: dict, out: dict, m) -> dict:
    for k, v in out.items():  # a per-wave register written from per-lane data: the last active lane wins
      old = state.get(k)
      v = np.asarray(v)
      if old is not None and np.ndim(old) == 2 and np.shape(old)[-1] == 1 and v.ndim == 2 and v.shape[-1] > 1:
        act = np.ones(v.shape, bool) if m is None else np.broadcast_to(m, v.shape)
        last = v.shape[-1] - 1 - np.argmax(act[:, ::-1], axis=1)
        pick = v[np.arange(v.shape[0]), last][:, None]
        out[k] = np.where(act.any(axis=1, keepdims=True), pick, old)
    return out

  def _rmw(self, state: dict, m, ctx) -> dict:
    """Bodies that read and write MEM (atomics): vectorised when no two lanes touch the same address, else
    lane by lane in lane order, so every read-modify-write sees the one before it."""
    rec = _Recorder(ctx.mem)
    ctx.mem = rec
    with np.errstate(all="ignore"):
      out = self._run(state, m, ctx)
    if not rec.conflict():
      rec.commit()
      return self._finish(state, out, m)
    ctx.mem = rec.mem
    st, res = dict(state), {}
    W, L = m.shape
    for w, l in zip(*np.nonzero(m)):
      one = np.zeros_like(m)
      one[w, l] = True
      with np.errstate(all="ignore"):
        o = self._run(st, one, ctx)
      for k, v in o.items():
        st[k] = np.array(np.broadcast_to(v, np.broadcast_shapes(np.shape(v), (W, L) if np.ndim(v) else ())))
        res[k] = st[k]
    return self._finish(state, res, m)

  def _sub(self, name: str, ret, tys, args):
    """Another instruction's semantics used as a helper (`v_max_f32(a, b)` inside V_MAX3_F32)."""
    sub = semantics(self.family, name.upper())
    st = {f"S{i}": rt.ubits(a, k, b) for i, (a, (k, b)) in enumerate(zip(args, tys))}
    out = sub(st)
    d0 = out.get("D0")
    if d0 is None:
      raise PcodeError(f"{name.upper()} writes no D0; cannot be used as a helper", self.family, self.name)
    return rt.from_bits(rt.resize(np.asarray(d0), sub.outputs["D0"], ret[1]), ret[0], ret[1])


def _lanes(state: dict, exec, wave64) -> int:
  if wave64 is not None:
    return 64 if wave64 else 32
  if exec is not None and np.ndim(exec) == 2:
    return np.shape(exec)[1]
  for v in state.values():
    if np.ndim(v) == 2 and np.shape(v)[1] > 1:
      return np.shape(v)[1]
  return 32


class _Recorder:
  """Buffers MEM writes of one vectorised run and detects lanes that hit the same address."""

  def __init__(self, mem):
    self.mem, self.writes = mem, []

  def __getattr__(self, k):
    return getattr(self.mem, k)

  def read(self, addr, bits):
    return self.mem.read(addr, bits)

  def write(self, addr, vals, bits):
    self.writes.append((np.array(addr), np.array(vals), bits))

  def conflict(self) -> bool:
    for a, _, _ in self.writes:
      if len(np.unique(a)) != len(a):
        return True
    return False

  def commit(self):
    for a, v, b in self.writes:
      self.mem.write(a, v, b)


class FlatMemory:
  """A little-endian byte-addressed memory for tests and simple callers: MEM[addr].bN reads/writes bN bits."""

  def __init__(self, size: int = 1 << 16):
    self.data = np.zeros(size, dtype=np.uint8)

  def read(self, addr, bits: int):
    n = max(bits // 8, 1)
    a = np.asarray(addr, dtype=np.uint64).astype(np.int64)
    by = self.data[a[:, None] + np.arange(n)]
    if n > 8:
      return np.array([int.from_bytes(r.tobytes(), "little") for r in by], dtype=object)
    v = np.zeros(len(a), dtype=np.uint64)
    for i in range(n):
      v |= by[:, i].astype(np.uint64) << np.uint64(8 * i)
    return v.astype(rt.U[max(rt.cbits(bits), 8)])

  # Default address built-ins: the operands simply add up (64-bit wrap). An emulator that models buffer
  # descriptors, SADDR=off or LDS bases overrides these on its own memory object.
  def _sum(self, *xs):
    out = np.uint64(0)
    for x in xs:
      out = out + np.asarray(x).astype(np.int64).astype(np.uint64) if np.asarray(x).dtype.kind == "i" else \
        out + np.asarray(x).astype(np.uint64)
    return out

  def CalcGlobalAddr(self, *xs): return self._sum(*xs)
  CalcFlatAddr = CalcScratchAddr = CalcBufferAddr = CalcScalarGlobalAddr = CalcScalarBufferAddr = CalcGlobalAddr
  CalcScalarScratchAddr = CalcGlobalAddr

  def CalcDsAddr(self, addr, off0=0, off1=None):
    """LDS address: ADDR + the instruction offset ({OFFSET1, OFFSET0} when given as two bytes)."""
    off = np.asarray(off0).astype(np.uint64)
    if off1 is not None:
      off = off + (np.asarray(off1).astype(np.uint64) << np.uint64(8))
    return (np.asarray(addr).astype(np.uint64) + off) & np.uint64(0xFFFFFFFF)

  def write(self, addr, vals, bits: int):
    n = max(bits // 8, 1)
    a = np.asarray(addr, dtype=np.uint64).astype(np.int64)
    vals = np.asarray(vals)
    for j in range(len(a)):  # in lane order: the last writer of an address wins
      self.data[a[j]:a[j] + n] = np.frombuffer(int(vals[j]).to_bytes(n, "little"), np.uint8) if n > 8 else \
        np.frombuffer(np.uint64(int(vals[j]) & ((1 << 64) - 1)).tobytes()[:n], np.uint8)


# ----------------------------------------------------------------------------------------- compile + cache
def vendor_text(family: str, name: str) -> str:
  """The vendor's pseudocode for `name`, or "" when the vendor has none but errata.py adds a body of ours."""
  from gputwin.isa.vendor import tables
  if family in ("ptx", "ir3"):
    return ""
  t = tables(family)
  if name not in t.pcode:
    if added(family, name) is not None:
      return ""
    raise PcodeError(f"no vendor pseudocode for {name}", family, name)
  return t.pcode[name]


def source_text(family: str, name: str) -> tuple[str, list[Erratum]]:
  """The text we compile for `name` and the errata that made it: the vendor text corrected, or our added body."""
  if family == "ptx":  # PTX has no vendor pcode: the body is ours (ptx.py), citing the manual's section
    from gputwin.pcode import ptx
    return ptx.text(name), []
  if family == "ir3":  # likewise Adreno (ir3.py), citing the isaspec bitset
    from gputwin.pcode import ir3
    return ir3.text(name), []
  vt = vendor_text(family, name)
  if not vt:
    e = added(family, name)
    return e.text, [e]
  return corrected(family, vt, name)


def bodies(family: str) -> list[str]:
  """Every instruction name with a body: the vendor's pcode plus the ones errata.py adds (for coverage/tests)."""
  from gputwin.isa.vendor import tables
  if family == "ptx":
    from gputwin.pcode import ptx
    return ptx.keys()
  if family == "ir3":
    from gputwin.pcode import ir3
    return ir3.keys()
  t = tables(family)
  names = {n for e in t.enums.values() for n in e.values()} - set(t.pcode)
  return list(t.pcode) + sorted(n for n in names if added(family, n) is not None)


def operand_bits(family: str, name: str) -> dict[str, int]:
  """Operand widths from the vendor operand table (ADDR -> 64 for GLOBAL ops), by upper-case field name: the widest
  over the instruction's records (`Tables.widths`: one lookup per opcode enum, no index over the whole table)."""
  from gputwin.isa.vendor import tables
  if family in ("ptx", "ir3"):  # widths come from the bodies' typed accesses (ADDR is 64-bit through MEM[ADDR])
    return {}
  return tables(family).widths(name)


def build(family: str, name: str, text: str) -> tuple:
  """Parse, lower and generate one body -> (source, constants, inputs, outputs, regfiles, mem, calls)."""
  prog = lower(parse(text, family, name), family, name, operand_bits(family, name))
  src, consts = generate(prog)
  return (src, consts, dict(prog.inputs), dict(prog.outputs), frozenset(prog.regfiles), prog.mem,
          frozenset(prog.calls), "VGPR" in prog.regfiles and not prog.per_lane)


def _disk(key: str):
  return cache_root() / "pcode" / f"v{VERSION}" / f"{key}.pkl"


def compiled(family: str, name: str, text: str) -> tuple:
  """`build`, cached on disk by the hash of the (corrected) text."""
  return pickled(_disk(source_key(f"{family}|{name}|{text}")), lambda: build(family, name, text))


def semantics(family: str, name: str) -> Semantics:
  """The compiled semantics of instruction `name` (canonical vendor name, e.g. "V_FMA_F32") in `family`
  ("rdna3", "rdna4", "cdna", or a target such as "gfx942"). Raises PcodeError for unknown, unparsable or
  excluded (graphics-only) instructions."""
  return _semantics(family_of(family), name)


@functools.cache
def _semantics(family: str, name: str) -> Semantics:
  why = excluded(name)
  if why:
    raise PcodeError(f"{name} is not supported: {why}", family, name)
  vt = vendor_text(family, name)
  text, used = source_text(family, name)
  src, consts, ins, outs, regs, mem, calls, wave_level = compiled(family, name, text)
  return Semantics(family, name, vt, text, used, src, ins, outs, regs, mem, calls, wave_level, consts)


def unsupported_calls(sem: Semantics) -> set[str]:
  """Built-ins the body calls that gputwin implements nowhere (neither in runtime.py nor as a FlatMemory default
  hook): they raise 'not supported' unless the caller's memory object provides them."""
  out = set()
  for c in sem.calls:
    if c in rt.BUILTINS or callable(getattr(FlatMemory, c, None)):  # address built-ins: FlatMemory's defaults
      continue
    if re.fullmatch(r"[a-z0-9]+_to_[a-z0-9]+", c) and rt.conversion(c):
      continue
    if c.startswith(("v_", "s_")):
      try:
        from gputwin.isa.vendor import tables
        if c.upper() in tables(sem.family).pcode or added(sem.family, c.upper()):
          continue
      except Exception:
        pass
    out.add(c)
  return out
