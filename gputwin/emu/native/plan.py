"""Which instructions a native block holds and how they are laid out (gputwin/emu/README.md, "Native tier"), read
from the ops and their pcode before any code is written: what the tier can run exactly as the interpreter does
(`supported`, `collect`), which vector ops share one lane loop (`groups`), and which plain memory accesses reuse an
earlier one's probe (`owners`)."""
from __future__ import annotations


from gputwin.emu.amd.decode import APERTURE, EXECZ, SCC_CODE, VCCZ
from gputwin.emu.binding import float_result, join_point, plain_barrier, scalar_valu, sets_pc
from gputwin.emu.native import matrix, tensor
from gputwin.emu.program import Op, Src
from gputwin.pcode import analysis
from gputwin.pcode.llvm import Unsupported

BLOCK_KINDS = ("alu", "mem", "vopd", "nop", "matrix", "clock")
MEM_KINDS = ("global", "smem", "ds", "scratch", "buffer", "flat")
# kinds whose addresses go through a frontend's own rule with per-thread PCs (PTX's .local with its by-space bodies,
# ir3's private memory): interpreted there; one PC per wave (AMD) runs them natively (codegen.Compiler.addresses)
WAVE_ONLY = ("scratch", "buffer", "flat")
LDS_KINDS = ("ds", "flat")  # accesses that may reach LDS (flat: lanes in the shared aperture): the race checker's


def parts(op: Op) -> list[Op]:
  """The instructions `op` runs: VOPD's two halves, else `op` itself."""
  return list(op.info["pair"]) if op.kind == "vopd" else [op]


def tail(op: Op, simt: bool = True) -> str | None:
  """How a block may end with `op`, the scheduler's event after it: "end" (the waves or threads exit), "barrier"
  (they arrive at a barrier; core.run / core.run_simt park or release them), and with per-thread PCs (`simt`: the
  scheduler moves the threads by the lanes the block says this last instruction took, Native.taken) "branch" (a body
  that only sets PC to a constant TARGET, guarded or not, as `op` or as the instruction it is lowered to); else None.
  (One PC per wave: a branch is a body that writes the PC, like any other.)"""
  if op.kind in ("end", "barrier"):
    return op.kind
  if not simt:
    return None
  op = lowered(op)  # (ir3's getone: a jump all but the lowest of its threads take, binding.elect)
  t = op.ins.get("TARGET")
  if op.kind == "alu" and sets_pc(op) and set(op.sem.outputs) == {"PC"} and set(op.sem.inputs) <= {"TARGET"} and \
     isinstance(t, Src) and t.file == "k":
    return "branch"
  return None


def supported(op: Op, fam: str, simt: bool = False, arch: str = "") -> None:
  """Raise Unsupported unless the native tier can run `op` exactly as the interpreter does (`simt`: per-thread PCs,
  where a guard picks the threads an instruction runs for: arithmetic may be guarded, and a block may end with a
  `tail`; `arch`: the target, for instructions newer ones add)."""
  if tail(op, simt) is not None:
    return
  if op.info.get("lowered") is not None:  # an event the frontend gives as an instruction (`lowered`)
    return supported(lowered(op), fam, simt, arch)
  if op.info.get("unmasked") and not (op.kind == "alu" and op.vector and not op.mem and op.info.get("guard") is None):
    raise Unsupported("unmasked")
  if op.kind == "tensor":  # warp-level wmma/mma: native/tensor.py
    return tensor.supported(op, arch)
  if op.kind not in BLOCK_KINDS:
    raise Unsupported(op.kind)
  if op.kind in ("nop", "clock"):  # (a time source: codegen's clock)
    return
  if op.kind == "matrix":  # wave-level WMMA/MFMA: native/matrix.py
    return matrix.supported(op, fam)
  if op.info.get("guard") is not None and not (simt and op.kind == "alu"):  # (a guarded access: its lanes, as EXEC)
    raise Unsupported("guard")

  for o in parts(op):
    sem = o.sem
    # registers by number: a vector body's VGPR[lane][reg] (a wave-level one's any lane: readlane, writelane; a lane
    # body's its own, VGPR[laneId][...]: v_movrel*, M0-relative), a scalar body's SGPR[reg] (s_movrels, s_movreld)
    # or HW_REGISTERS[id] (s_getreg, s_setreg); codegen.Gen.reg decides
    if sem is None or sem.regfiles and not (o.kind == "alu" and (o.vector and sem.regfiles == {"VGPR"} or
                                                                 not o.vector and sem.regfiles in ({"SGPR"},
                                                                                                   {"HW_REGISTERS"}))):
      raise Unsupported("register-file access")
    d = o.outs.get("D0")
    if (o.info.get("clamp") or o.info.get("omod")) and isinstance(d, Src) and not outmod_float(d) and \
       (float_result(d) or o.info.get("clamp")):  # (clamp on an integer: the interpreter stops)
      raise Unsupported("output modifier")
    if o.mem and (o.mem not in MEM_KINDS or simt and o.mem in WAVE_ONLY or
                  o.info.get("address") is None and o.info.get("buffer") is None and not vsharp(o)):
      raise Unsupported(o.mem)
    # (its one value: the turn of the first active lane, or with none the last lane's, computed as if on: the
    # interpreter writes it whatever EXEC is; a guarded one's threads are those of its guard)
    if o.kind == "alu" and scalar_valu(o) and op.info.get("guard") is not None:
      raise Unsupported("scalar VALU")
    for s in list(o.ins.values()) + list(o.outs.values()):  # (the flat apertures: read as constants, not written)
      if isinstance(s, Src) and (s.file == "a" and fam != "cdna" or s.file == "s" and s.index in APERTURE and
                                 s in o.outs.values()):
        raise Unsupported("operand")


def vsharp(op: Op) -> bool:
  """Is `op` an AMD buffer access through a V# (MUBUF/VBUFFER: op.info's srsrc, soffset, vaddr, idxen, offen,
  offset; amd/memory.py `_buffer`) whose lds bit, if set, is a load into LDS the decoder made (op.info["deliver"])?"""
  return op.mem == "buffer" and op.info.get("srsrc") is not None and \
      (not op.inst.get("lds", 0) or bool(op.info.get("deliver")))


def lowered(op: Op) -> Op:
  """The instruction the tier runs for `op`: a frontend event given as one (op.info["lowered"]: ir3's predt/predf/
  prede, an ALU body writing every lane of the wave, `unmasked`, which the interpreter's event runs too), else `op`.
  The block keeps `op` itself (the scheduler and the checkers see the event)."""
  return op.info.get("lowered") or op


def prechecked(op: Op) -> bool:
  """Does a vector access write a register its address reads (ir3's `ldib r2.x..w, r2.y`)? The native tier then
  looks up every active lane's access before any lane writes (codegen Mode.CHECK): the interpreter checks them all
  first, and the instruction it re-runs after a native fault must read the registers as they were."""
  if not (op.vector and op.mem):
    return False
  a, b, i = op.info.get("address"), op.info.get("buffer"), op.info
  srcs = list(a.terms) if a is not None else [b.coord, b.index] if b is not None else \
      [Src("v", i["vaddr"], i["vdwords"])] if vsharp(op) and i.get("vaddr") is not None else []
  reads = {(s.file, s.index + k) for s in srcs if s.file in "va" for k in range(s.dwords)}
  return any((d.file, d.index + k) in reads for o in parts(op) for d in o.outs.values() if isinstance(d, Src)
             for k in range(d.dwords))


def outmod_float(d: Src) -> bool:
  """Is `d` a float result, whose VOP3 output modifiers the tier emits (codegen.Compiler.output_modifier)? (Clamp on
  an integer result is saturation, which neither tier models: core.Engine.retire stops.)"""
  return float_result(d) and d.bits in (16, 32, 64)


def collect(prog, pc: int, fam: str, limit: int = 1 << 30, stop=None) -> list[Op]:
  """The longest run (at most `limit`) of supported ops from pc (a branch ends it; so does an op `stop` holds for:
  one the checkers must see interpreted, native.Tier.stop). With per-thread PCs a join point (binding.join_point)
  starts a block of its own: the threads that branched there wait for the others to run up to it, which they then
  can natively (core.run_simt leaves a block to the interpreter while threads of its warps stand inside it)."""
  ops, simt = [], getattr(prog.frontend, "simt", False)
  while len(ops) < limit:
    try:
      op = prog.op(pc)
      supported(op, fam, simt, getattr(prog, "arch", ""))
      if stop is not None and stop(op) or simt and ops and join_point(op):
        break
    except Exception:
      break
    if tail(op, simt) is not None:  # the scheduler's event ends the block (per-thread PCs: it moves the threads)
      ops.append(op)
      break
    if simt and sets_pc(op):
      break
    ops.append(op)
    # an atomic ends its block: the waves' read-modify-writes then run in the interpreter's order (by instruction,
    # then wave, then lane)
    if sets_pc(op) or op.atomic:
      break
    pc += op.size
  return ops


def groups(ops: list[Op], sp: dict, lanes: int) -> list[tuple[int, list[Op]]]:
  """The block as (first op index, ops) groups: consecutive lane-pure vector ops share one lane loop (each lane
  runs them in order, its registers kept in host registers). Per-wave registers are written after the loop, so a
  later op may touch one an earlier op writes only where both use it lane by lane as a mask (VCC carry-out, then
  carry-in): the lane's bit is handed on inside the loop. Anything else starts a new group."""
  out, wrote, masks = [], set(), set()  # per-wave registers the group wrote; (index, dwords) it wrote as masks
  joins = lambda o: o.kind == "nop" or _lane_pure(o, sp) and o.info.get("guard") is None
  span = lambda x: set(range(x[0], x[0] + x[1]))
  for i, op in enumerate(ops):
    reads, writes = _wave_regs(op, sp, lanes)
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


def owners(ops: list[Op], sp: dict, lanes: int) -> dict[int, tuple[int, int]]:
  """Plain memory instruction i -> (j, d): an earlier one j whose probe holds for i too, its addresses moved by d
  bytes: the same space, address registers, access extents and fields but the plan's constant offset (d = the
  difference, a multiple of its alignment; a bound buffer's accesses only at the same offset), and nothing in
  between (j included) writes those registers or EXEC."""
  out, seen = {}, []  # seen: (index, address key, plan offset, plan width) of probed instructions still valid
  for i, op in enumerate(ops):
    key = _probe_key(op)
    if key is not None:
      a = op.info.get("address")
      off, width, align = (a.offset, a.width, a.align) if a is not None else (0, 64, 1)
      hit = None
      for j, k, o, w in seen:
        if k == key:
          d = (off - o) & ((1 << w) - 1)
          d -= (d >> (w - 1)) << w  # as a signed w-bit difference
          if d % max(align, 1) == 0 and abs(d) < 1 << 31:
            hit = (j, d)
            break
      if hit is not None:
        out[i] = hit
      else:
        seen.append((i, key, off, width))
    vw = {s.index + d for o in parts(op) for s in o.outs.values() if isinstance(s, Src) and s.file == "v"
          for d in range(s.dwords)}
    ww = _wave_regs(op, sp, lanes)[1] if op.sem is not None or op.kind == "vopd" else set()
    if op.kind not in ("nop", "alu", "mem", "vopd") or "pc" in ww or op.sem is not None and op.sem.regfiles:
      seen = []
      continue
    exe = set(range(sp["exec"], sp["exec"] + lanes // 32))
    seen = [(j, k, off, w) for j, k, off, w in seen if not (set(k[1]) & vw or set(k[2]) & ww or exe & ww)]
  return out


def _probe_key(op: Op):
  """What a plain global/LDS access's probe depends on, but the plan's constant offset: (space and accesses, VGPRs,
  SGPRs of the address), or None for an instruction that does not probe. A bound buffer's (binding.Buffer) keeps
  its offset in the key: its bound is checked per lane, so a range moved from another access's proves nothing."""
  if not (op.vector and op.mem in ("global", "ds") and op.sem is not None and analysis.plain_mem(op.sem.program)):
    return None
  a, b, p = op.info.get("address"), op.info.get("buffer"), op.sem.program
  if a is not None:
    terms, fields = a.terms, (a.width, a.align, a.space)
  elif b is not None:
    terms = (b.coord, b.index)
    fields = (b.kind, b.scale, b.offset, b.nbytes, b.index.value if b.index.file == "k" else None)
  else:
    return None
  vregs = tuple(r for t in terms if t.file == "v" for r in range(t.index, t.index + t.dwords))
  sregs = tuple(r for t in terms if t.file == "s" for r in range(t.index, t.index + t.dwords))
  fields += tuple(op.info.get(k) for k in ("offset", "offset0", "offset1", "guard"))
  g = op.info.get("guard")  # (a guarded access's lanes are its guard's too: a write to that row ends the reuse)
  vregs += (g[0],) if g is not None else ()
  accesses = tuple((repr(idx), bits) for idx, bits in analysis.mem_accesses(p.body))
  return (op.mem, analysis.stride(p), fields, accesses), vregs, sregs


def state_src(o: Op, nm: str):
  """The register a pcode state name of `o` is bound to (codegen.Compiler.declare's rule), or None."""
  p = o.sem.program
  s = o.ins.get(nm) if nm in p.inputs else None
  return s if isinstance(s, Src) else o.old.get(nm) if nm in o.old else o.outs.get(nm) if nm in p.outputs else s


def discarded(o: Op, nm: str, sp: dict) -> bool:
  """Is output `nm` written to RDNA's NULL SGPR (V_MAD_U64_U32's unused carry-out): nothing to keep."""
  d = o.outs.get(nm)
  return isinstance(d, Src) and d.file == "s" and d.index == sp["null"] and sp["null"] != sp["m0"]


def _mask_regs(op: Op) -> dict:
  """SGPR (index, dwords) a vector op writes as a lane mask (each lane its own bit: "out"), and those it touches
  only lane by lane ("bits": read and/or written as X.u64[laneId]): a fused group hands such bits on in the loop."""
  out, bits = set(), set()
  for o in parts(op):
    if o.sem is None or not op.vector:
      continue
    p = o.sem.program
    for nm in set(p.inputs) | set(p.outputs):
      s = state_src(o, nm) if nm in p.inputs else o.outs.get(nm)
      if not (isinstance(s, Src) and s.file == "s") or max(p.inputs.get(nm, 0), p.outputs.get(nm, 0)) > 64:
        continue
      if analysis.lane_bit_only(p.body, nm, need_write=False):
        bits.add((s.index, s.dwords))
        if nm in p.outputs and analysis.lane_bit_only(p.body, nm):
          out.add((o.outs[nm].index, o.outs[nm].dwords))
  return {"out": out, "bits": bits}


def _lane_pure(op: Op, sp: dict) -> bool:
  """Can this vector instruction share a lane loop: no memory, loops, EXEC writes or per-wave results taken from
  lane 0 (every per-wave output is a lane mask or written lane by lane)."""
  if not op.vector or op.kind not in ("alu", "vopd") or op.mem:
    return False
  for o in parts(op):
    p = o.sem.program
    if analysis.has_loop(p.body) or {"EXEC", "EXEC_LO"} & set(p.outputs):
      return False
    if o.info.get("dpp") is not None or o.sem.wave_level:  # reads other lanes (DPP: src0 before the loop)
      return False
    if o.sem.regfiles:  # a register by number (v_movrel*): written where EXEC is on only, in a loop of its own
      return False
    for nm in p.outputs:
      s, d = state_src(o, nm), o.outs.get(nm)
      if isinstance(s, Src) and s.file == "s" and s.index <= sp["exec"] + 1 and s.index + s.dwords > sp["exec"]:
        return False
      if isinstance(s, Src) and s.file == "v" and isinstance(d, Src) and d.file == "s":
        return False  # (an SGPR from per-lane copies read from a VGPR: the first active lane's, codegen's lane0)
      if not (isinstance(s, Src) and s.file in ("v", "a") or discarded(o, nm, sp) or analysis.bit_written(p.body, nm)):
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
  for o in parts(op):
    if o.sem is None:
      continue
    p = o.sem.program
    for nm in p.inputs:
      reads |= regs(state_src(o, nm), nm)
    for nm in p.outputs:
      if not discarded(o, nm, sp):  # (a NULL destination: nothing is written)
        writes |= regs(o.outs.get(nm), nm)
  return reads, writes


def dead_reads(ops: list[Op], simt: bool) -> bool:
  """Whether a block's LDS reads can matter to no race check when it runs for every wave of the batch with no LDS
  write since the last barrier: it writes no LDS and ends at a barrier, which then completes for every workgroup, so
  its reads can meet no write of their epoch (checks.py). Its logging variant leaves them out (codegen `log`), and
  the race checker runs it natively only under those conditions. Per-thread PCs: the barrier must be a plain one
  (binding.plain_barrier) and every live thread must run the block (checks.native's `every`)."""
  return bool(ops) and tail(ops[-1], simt) == "barrier" and (not simt or plain_barrier(ops[-1])) and \
      not any(o.mem in LDS_KINDS and "w" in (o.sem.mem if o.sem is not None else "w") for o in ops) and \
      any(o.mem in LDS_KINDS for o in ops)
