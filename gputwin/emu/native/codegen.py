"""LLVM IR for one native block (gputwin/emu/README.md, "Native tier"): a function per instruction, or lane-pure
group, and wave, in the variants a probe picks between (`Mode`), and a driver running them wave by wave. Each pcode
body is lowered by the pcode LLVM backend (gputwin/pcode/llvm.py); `Gen` and `Compiler` bind it to the register
files, the ctx fields (runtime.py) and guest memory or LDS."""
from __future__ import annotations

import enum

import numpy as np

from gputwin.emu.amd.decode import APERTURE, EXECZ, MODE, SCC_CODE, VCCZ, denorm_bit  # AMD's scalar codes, MODE
from gputwin.emu.amd.lanes import FLOAT_FIELDS, OMOD, sdwa_field  # omod, float fields, SDWA selects: AMD's
from gputwin.emu.amd.memory import VSHARP  # the V# fields of buffer accesses: AMD's
from gputwin.emu.binding import LDS_BITS, LDS_SHIFT, WRITE_MASKS, elect, float_result, scalar_valu, sets_pc, va_bits
from gputwin.emu.native import matrix, plan, tensor
from gputwin.emu.native.runtime import (C_A, C_CLOCK, C_HW, C_IEEE, C_INIT, C_LANES, C_LDS, C_LDSZ, C_LOG, C_PC, C_PRIV,
                                        C_RAN, C_REGS, C_RES, C_RESN, C_S, C_SCC, C_SCRST, C_SCRSZ, C_SSTR, C_SSTW,
                                        C_TAKEN, C_V, C_VROWS, C_VSTR, C_VSTW, C_WG, F_GLOBAL, F_HIGH, F_LANE,
                                        F_LDSBASE, F_SCROFF, HINT_BASE, HINT_HI, HINT_LO, HINT_PROBE, HINT_REGION,
                                        HINTS, TBAA_FIXED, mask_bits, prelude)
from gputwin.emu.program import Op, Src
from gputwin.errors import PcodeError
from gputwin.pcode import analysis, llvm as backend
from gputwin.pcode.ir import Ty, locals_of
from gputwin.pcode.runtime import BUILTINS
from gputwin.pcode.llvm import SCALAR, TBAA_BASE, Lower, Unsupported, default_bits, fconst, lty, zero

M32 = 0xffffffff
PROBE_CONTIG, PROBE_EXACT, PROBE_FAST = 0, 1, 2  # what a probe answers
SITES = "@sites"  # a logging block's LDS accesses per wave (Block.sites): a constant the module defines at its end
SPACES = {"ds": "lds", "scratch": "scr", "flat": "flat"}  # Op.mem -> prelude.ll's access helper (@{space}_ptr); else gm


class Mode(enum.Enum):
  """What one generated function of an instruction does (Compiler.inst_fn); the value ends its name."""
  PLAIN = ""    # as is
  EXACT = "x"   # the same, as the slow path after a probe
  PROBE = "p"   # 1 when an active lane's access would leave the region (or fault), else 0; writes nothing
  RANGE = "r"   # the same for lanes scattered within one region
  FIRST = "q"   # lane 0's base, for a full wave's probe
  UNIFORM = "u"  # an address no lane register forms: lane 0's access in the region (FAST, for every lane) or EXACT
  FAST = "f"    # accesses unchecked (probed: all in one region)
  CONTIG = "c"  # accesses unchecked at base + lane * stride (probed: contiguous)
  SHIFT = "s"   # an owner's probed range moved by this access's offset: still in the region (FAST), else EXACT
  CHECK = "k"   # only the faults, every active lane's before any writes (plan.prechecked), then 0; writes nothing

  @property
  def probes(self) -> bool:
    return self in (Mode.PROBE, Mode.RANGE, Mode.FIRST, Mode.UNIFORM)


class Fn(backend.Fn):
  """One native function's IR text (backend.Fn) plus the emulator's side: ctx fields, the probe's `bad` flag."""

  def __init__(self, tags: dict | None = None, mode: Mode = Mode.PLAIN, full: bool = False, suffix: str = ""):
    super().__init__(tags)
    self.mode, self.full, self.suffix = mode, full, suffix  # Compiler.inst_fn's (suffix: of the function's name)
    self.ones = None  # in a lane loop: i64 all ones when lane %lane is on (`on`), else 0 (Compiler.lane_mask)
    self.lane_end = None  # a lane loop's end when it is not the wave's: one past the last active lane

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

  def or_fault(self, p: str) -> str:
    """Host pointer `p` from an access helper (gm_ptr, lds_ptr...), which answers null when the access faults (its
    details already in ctx): leave for %fault then; p."""
    ok = self.label("ok")
    self.emit(f"br i1 {self.op(f'icmp eq ptr {p}, null')}, label %fault, label %{ok}")
    self.put(ok)
    return p

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


# ------------------------------------------------------------------------------------ one op: pcode -> LLVM IR
class Gen(Lower):
  """The pcode body of one instruction for one wave (and, for vector ops, each active lane), lowered by the pcode
  LLVM backend (Lower); this class is its binding: memory in the wave's regions or LDS window, the executor's
  effective address for the Calc*Addr built-ins (Compiler.addresses), and the probes of plain accesses."""

  def __init__(self, f: Fn, op: Op, eng_info: dict):
    super().__init__(f, op.sem.program, eng_info["lanes"], self)
    self.op, self.info = op, eng_info
    self.hint = None
    self.row = None  # Gen.region
    self.dptr = None  # Gen.delta
    # TBAA of its memory accesses: flat ones may reach any window, "mem" (the parent of the three: Compiler.metadata)
    self.space = {"lds": "lds", "scr": "scratch", "flat": "mem"}.get(eng_info["space"], "guest")
    # flat and buffer: the lane's window, an i8 alloca (Compiler.addresses: 0 global, 1 LDS, 2 scratch, 3 a buffer
    # lane out of range: reads 0, writes nowhere)
    self.route = None
    self.logged = 0  # LDS accesses logged so far (access)

  def address(self) -> str | None:
    return self.f.op(f"load i64, ptr {self.ea}") if self.op.mem else None

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
    Every access is ADDR + K with K the same for all lanes (analysis.plain_mem), and the lanes' effective addresses
    lie in [emin, emax]; so the wave touches [emin + min K, emax + max(K + bytes)), a range the region must hold."""
    f = self.f
    ks, ends, avars = [], [], analysis.addr_vars(body)
    for idx, bits in analysis.mem_accesses(body):
      k = analysis.addr_offset(idx, avars)
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

  def reg(self, name: str, index: tuple, bits: int, write: bool) -> str:
    """VGPR[lane][reg] of this wave (readlane, writelane, readfirstlane, permlane, ds_(b)permute; v_movrel*: this
    lane's, the number computed, M0-relative): a constant register number is in the block's register reach
    (Tier.block), a computed one is checked against the file's rows (`vgpr_row`). A lane the body does not keep
    below the wave size (`bound`: s_ff1's, a permute's computed lane) is checked where it is used: past the file the
    block stops there (F_LANE), and the interpreter's run of the instruction raises its error.
    SGPR[reg] (s_movrels, s_movreld: a number the body computes, M0-relative): `rows`. A read wider than a register
    is gathered into a local (the rows lie a register stride apart); a wide write is Gen.store's."""
    if name == "HW_REGISTERS" and len(index) == 1 and bits == 32:  # s_getreg / s_setreg: a 6-bit register id
      return self.info["hwreg"](self.f, self.u64(self.ex(index[0]), index[0].ty), self.op)
    if name == "SGPR" and len(index) == 1:
      rows = self.rows(index[0], bits, write)
      if len(rows) == 1:
        return rows[0]
      if write:
        raise Unsupported("a wide SGPR[...] write outside Gen.store")
      f, acc = self.f, None
      for k, p in enumerate(rows):  # (no TBAA tag, as the backend's own accesses: it may be any row)
        acc = self.info["join"](f, acc, f.op(f"load i32, ptr {p}"), k, len(rows))
      p = f.alloca(f"i{bits}")
      f.emit(f"store i{bits} {acc}, ptr {p}")
      return p
    if name != "VGPR" or len(index) != 2 or bits != 32:
      raise Unsupported(f"{name}[...] access")
    lane_e, reg_e = index
    if not self.op.sem.wave_level and not (lane_e.op == "wave" and lane_e.args[0] == "laneId"):
      raise Unsupported("another lane's VGPR in a lane body")  # (the lane loop would see lanes it already ran)
    r, hi = self.constant(reg_e), self.bound(lane_e, set())
    lane = self.u64(self.ex(lane_e), lane_e.ty)
    if hi is None or hi >= self.L:
      self.info["fault"](self.f, self.f.op(f"icmp uge i64 {lane}, {self.L}"), F_LANE, lane, 4, write)
    if r is None:
      return self.info["vrow"](self.f, self.u64(self.ex(reg_e), reg_e.ty), lane, write)
    return self.info["vgpr"](self.f, r, lane, write)

  def rows(self, e, bits: int, write: bool) -> list[str]:
    """The SGPR rows of SGPR[e] (bits / 32 of them from e, or one for a narrower access) of this wave, numbered as
    runtime.rrd / rwr index the interpreter's file: e + k, each below the file's rows (core.Engine's scalar file,
    the frontend's `sgprs`), which the interpreter checks before it reads (and, for a write, before it writes the
    first). Past the file the block stops there, before any write (F_LANE), and the interpreter's run of the
    instruction raises its error."""
    if bits % 32 and bits not in (8, 16):
      raise Unsupported(f"SGPR[...] access of {bits} bits")
    f, n = self.f, max(bits // 32, 1)
    r = self.u64(self.ex(e), e.ty)
    last, top = f.op(f"add i64 {r}, {n - 1}"), self.info["sgprs"]
    bad = f.op(f"or i1 {f.op(f'icmp uge i64 {last}, {top}')}, {f.op(f'icmp ult i64 {last}, {r}')}")
    self.info["fault"](f, bad, F_LANE, r, 4, write)
    return [self.info["sgpr"](f, f.op(f"add i64 {r}, {k}") if k else r, write) for k in range(n)]

  def store(self, lv, val: str, vt: Ty) -> None:
    """Lower.store, but a wide SGPR[...] write (s_movreld_b64): split into its rows (Gen.rows)."""
    if lv[0] != "reg" or lv[1] != "SGPR" or lv[3] <= 32:
      return super().store(lv, val, vt)
    f, bits = self.f, lv[3]
    if len(lv[2]) != 1 or vt.kind == "bool":
      raise Unsupported("SGPR[...] write")
    u, ub = self.raw(val, vt)
    v = f.conv(u, ub, bits, vt.kind == "i")
    for k, p in enumerate(self.rows(lv[2][0], bits, True)):
      f.emit(f"store i32 {f.conv(f.op(f'lshr i{bits} {v}, {32 * k}') if k else v, bits, 32)}, ptr {p}")

  def across(self, name: str, args, t: Ty) -> str:
    """A built-in the executor answers (Lower.call asks the binding): WRITE_MASKS, every bit of a hardware
    register (core._Mem's); ds_swizzle(OFFSET, DATA, EXEC), with OFFSET a constant operand, is DATA's VGPR routed by
    the runtime's own table of source lanes (read off it once, as DPP's: Compiler.routed), 0 where the source lane is
    not in EXEC."""
    if name in WRITE_MASKS and t.kind in "uib" and t.bits == 32:
      return str(0xffffffff if t.kind != "i" else -1)
    if name != "ds_swizzle" or len(args) != 3 or t.kind not in "uib" or t.bits != 32:
      raise Unsupported(f"built-in {name}")
    off, e = self.constant(args[0]), args[1]
    while e.op in ("bitcast", "cvt") and e.ty.kind in "uib" and e.args[0].ty.kind in "uib" and e.ty.bits == 32:
      e = e.args[0]
    s = self.op.ins.get(e.args[0]) if e.op == "state" else None
    if off is None or not (isinstance(s, Src) and s.file == "v" and s.dwords == 1 and not (s.hi or s.abs or s.neg)):
      raise Unsupported("ds_swizzle operands")
    L, f = self.L, self.f
    try:
      src = BUILTINS["ds_swizzle"](None, None, np.uint32(off), np.arange(1, L + 1, dtype=np.uint32)[None, :],
                                   np.uint64((1 << L) - 1)).reshape(-1)
    except PcodeError as err:  # (the modes the interpreter does not model)
      raise Unsupported(str(err)) from err
    v = self.info["routed"](f, s.index, src)
    j = f.op(f"extractelement <{L} x i64> <{', '.join(f'i64 {int(x) - 1}' for x in src)}>, i64 %lane")
    ex = self.u64(self.ex(args[2]), args[2].ty)
    on = f.op(f"trunc i64 {f.op(f'lshr i64 {ex}, {j}')} to i1")
    return f.op(f"select i1 {on}, i32 {v}, i32 0")

  def constant(self, e) -> int | None:
    """The value of an index expression that is a constant or an input bound to a constant operand, else None."""
    if e.op == "const":
      return int(e.args[0]) if int(e.args[0]) >= 0 else None
    if e.op == "state" and e.args[0] in self.program.inputs:
      s = self.op.ins.get(e.args[0])
      plain = isinstance(s, Src) and s.file == "k" and not (s.hi or s.pk or s.abs or s.neg)
      return s.value & ((1 << self.program.inputs[e.args[0]]) - 1) if plain else None
    if e.op in ("bitcast", "cvt") and e.ty.kind in "ub" and e.args[0].ty.kind in "ub" and \
       e.ty.bits >= e.args[0].ty.bits:
      return self.constant(e.args[0])
    return None

  def bound(self, e, seen: set) -> int | None:
    """An upper bound of a non-negative integer expression (constants, bit slices, unsigned casts, locals through
    every assignment the wave size leaves reachable), or None."""
    if e.op == "const":
      return int(e.args[0]) if int(e.args[0]) >= 0 else None
    if e.op == "slice" and isinstance(e.args[2], int):
      return (1 << e.args[2]) - 1
    if e.op in ("bitcast", "cvt") and e.ty.kind in "ub" and e.args[0].ty.kind in "ub":
      b = self.bound(e.args[0], seen)
      return b if b is not None and b >> e.ty.bits == 0 else None
    if e.op == "var" and e.args[0] not in seen:
      vals = _assigned(self.program.body, e.args[0], self.L)
      bs = [self.bound(x, seen | {e.args[0]}) for x in vals or ()]
      return max(bs) if bs and None not in bs else None
    return None

  def access(self, a: str, nb: int, write: bool) -> str:
    """The host pointer of guest bytes [a, a + nb) in this instruction's space; a fault leaves the function. In a
    logging block (Compiler `log`) an LDS access first writes its address to the log (Block.sites)."""
    f = self.f
    logs = self.info.get("log") is not None
    if self.space == "lds" and logs:
      self.log(a, nb, write)
    if f.mode in (Mode.FAST, Mode.CONTIG):  # probed: in the region (global), within the allocation (LDS)
      return f.op(f"getelementptr i8, ptr {self.delta()}, i64 {a}")
    if self.hint is None:  # the region the last access of this instruction hit (kept across waves)
      self.hint = f"%hint{self.info['slot']}"
      f.pro.append(f"  {self.hint} = getelementptr i64, ptr %hints, i64 {HINT_REGION + HINTS * self.info['slot']}")
    at = lambda sp: f.op(f"call ptr @{sp}_ptr(ptr %ctx, i64 {a}, i64 {nb}, i64 {int(write)}, i64 %w, ptr {self.hint})")
    if self.route is not None and self.info["space"] != "flat":  # buffer: a lane out of range (route 3) reads
      if nb > 256:  # zeros and writes a sink (prelude.ll @nowhere_r, @nowhere_w), not memory
        raise Unsupported("buffer access wider than 256 bytes")
      got, inb, out, join = [], f.label("inb"), f.label("oob"), f.label("bwin")
      r = f.op(f"load i8, ptr {self.route}")
      f.emit(f"br i1 {f.op(f'icmp eq i8 {r}, 3')}, label %{out}, label %{inb}")
      f.put(inb)
      got.append(f"[{at(self.info['space'])}, %{inb}]")
      f.emit(f"br label %{join}")
      f.put(out)
      got.append(f"[@nowhere_{'w' if write else 'r'}, %{out}]")
      f.emit(f"br label %{join}")
      f.put(join)
      p = f.op(f"phi ptr {', '.join(got)}")
    elif self.info["space"] != "flat":
      p = at(self.info["space"])
    else:  # flat: the window the lane's address fell in (Compiler.addresses)
      got, join = [], f.label("win")
      arms = [(f.label("gm"), "gm"), (f.label("lds"), "lds"), (f.label("scr"), "scr")]
      f.emit(f"switch i8 {f.op(f'load i8, ptr {self.route}')}, label %{arms[0][0]} "
             f"[ i8 1, label %{arms[1][0]}  i8 2, label %{arms[2][0]} ]")
      for lab, sp in arms:
        f.put(lab)
        if sp == "lds" and logs:  # (a lane in another window leaves its log entry unset: no LDS access)
          self.log(a, nb, write)
        got.append(f"[{at(sp)}, %{lab}]")
        f.emit(f"br label %{join}")
      f.put(join)
      p = f.op(f"phi ptr {', '.join(got)}")
    return f.or_fault(p)

  def log(self, a: str, nb: int, write: bool) -> None:
    """A logging block (Compiler `log`): this lane's LDS access at `a` into the log (Block.sites), before it is made."""
    f = self.f
    sites, k = self.info["log"], self.info["site0"] + self.logged
    self.logged += 1
    if len(sites) == k:  # (every variant of the instruction makes the same accesses in the same order)
      sites.append((self.info["op"], nb, write))
    per = f.op(f"load i64, ptr {SITES}, !invariant.load !0")
    row = f.op(f"add i64 {f.op(f'mul i64 %w, {per}')}, {k}")
    lanes = self.info["lanes"]
    at = f.op(f"add i64 {f.op(f'mul i64 {row}, {lanes}')}, %lane")
    a32 = f.op(f"trunc i64 {a} to i32")  # (LDS addresses: workgroup slot << LDS_SHIFT | offset, below 2**32)
    f.emit(f"store i32 {a32}, ptr {f.gep(f.ctxp(C_LOG), f.op(f'mul i64 {at}, 4'))}, {f.tbaa('log')}")


def _assigned(body, name: str, lanes: int) -> list | None:
  """The values a body assigns to local `name` on paths a wave of `lanes` can take (branches on the wave size
  folded), or None when it also writes part of it."""
  out = []
  for st in body:
    if st.op == "assign":
      lv = st.args[0]
      if lv[:2] == ("var", name):
        out.append(st.args[1])
        continue
      while lv[0] in ("slice", "bit", "as"):
        lv = lv[1]
      if lv[:2] == ("var", name):
        return None
    elif st.op == "if":
      arms, els = st.args
      parts, taken = [], False
      for c, b in arms:
        k = (c.args[0] == "wave32") == (lanes == 32) if c.op == "wave" and c.args[0] in ("wave32", "wave64") else None
        if k is not False:
          parts.append(b)
        if k is True:
          taken = True
          break
      for b in parts + ([] if taken else [els]):
        sub = _assigned(b, name, lanes)
        if sub is None:
          return None
        out += sub
    elif st.op == "for":
      sub = _assigned(st.args[3], name, lanes)
      if sub is None:
        return None
      out += sub
  return out


def guard_classes(ops: list[Op]) -> list[int | None]:
  """Per op of a block (per-thread PCs), its guard class, numbered in order of first use (None: no guard). Ops of
  one class have one guard (predicate row and sense) that no op between them writes, so they hold for the same
  threads: for the threads standing at the block, all of a class run or none does (core.step_simt skips an
  instruction whose guard holds for no thread, and the checkers see nothing of it). The block's code records which
  classes ran for some thread (Native.ran, bit c), for the checkers (checks.Checks.ran)."""
  out, live, n = [], {}, 0  # live: guard -> its class, while no op wrote its row
  for o in ops:
    g = o.info.get("guard")
    if g is not None and g not in live:
      live[g], n = n, n + 1
    out.append(None if g is None else live[g])
    for p in plan.parts(plan.lowered(o)):
      if p.sem is not None and "VGPR" in p.sem.regfiles:  # (registers by number: any row)
        live.clear()
      for d in p.outs.values():
        if isinstance(d, Src) and d.file == "v":
          live = {h: c for h, c in live.items() if not d.index <= h[0] < d.index + d.dwords}
  return out


class Compiler:
  """LLVM IR for one block: a function per instruction (one wave), a driver looping instructions then waves."""

  def __init__(self, ops: list[Op], lanes: int, fam: str, frontend, lean: bool = False, log: bool = False,
               ftz: bool = True):
    self.ops, self.L, self.fam, self.lean = ops, lanes, fam, lean
    # `ftz`: flush denormals as each wave's MODE asks (False: every wave keeps them, tier.Tier.key; a block that
    # writes a hardware register, S_DENORM_MODE or S_SETREG, may change the mode in it: it flushes by MODE anyway)
    self.ftz = ftz or any(o.sem is not None and "HW_REGISTERS" in o.sem.regfiles for x in ops for o in plan.parts(x))
    self.M = mask_bits(lanes)  # lane masks (EXEC, guards, the lanes a tail took) are i{M} values
    # `log`: LDS accesses write their addresses to the log (the race checker's, runtime.Block.sites): (op, bytes,
    # write) per access in order, per op while its functions are generated
    self.log, self.sites, self.site0 = log and not plan.dead_reads(ops, getattr(frontend, "simt", False)), [], {}
    self.sp = frontend.special(fam)  # register codes of EXEC, VCC, M0, NULL
    self.special_inputs = frontend.special_inputs  # the table core.Engine.special reads too
    self.fe = frontend
    # a last instruction that is the scheduler's event (plan.tail: exit, barrier; per-thread PCs: also a branch) only
    # counts itself and reports its lanes (tail_fn); core.run or core.run_simt then does the event
    self.simt = bool(getattr(frontend, "simt", False))
    self.tail = plan.tail(ops[-1], self.simt) is not None
    self.funcs: list[str] = []
    self.tags = {k: i for i, k in enumerate(TBAA_FIXED + ("mem",))}  # ("mem": guest memory, LDS or scratch)
    self.wrote = {"v": 0, "s": 0}  # register rows the block writes (Engine.mark)
    self.nv = self.ns = 0  # registers the block touches: an engine with fewer stays interpreted
    self.checked = set()  # instructions whose CHECK function is defined (inst_fn)
    # per-thread PCs: the first op of each guard class (guard_classes; the first 64) -> its class, whose bit the
    # block sets in ctx[C_RAN] for a wave where the op's lanes are not empty (ran_fn)
    firsts = {}
    for i, c in enumerate(guard_classes(ops) if self.simt else ()):
      if c is not None and c < 64:
        firsts.setdefault(c, i)
    self.ran = {i: c for c, i in firsts.items()}

  def declined(self, i: int, ops: list[Op]) -> int:
    """Which op of a group the code generator declines (the group's second if only the group is declined)."""
    for k, op in enumerate(ops):
      try:
        self.inst_fn(i + k, [op])
      except Unsupported:
        return k
    return 1

  def module(self, name: str) -> str:
    self.owner = plan.owners(self.ops, self.sp, self.L)
    groups = plan.groups(self.ops, self.sp, self.L)
    for i, ops in groups:
      try:
        if self.tail and i == len(self.ops) - 1:
          self.funcs.append(self.tail_fn(i, ops[0]))
          continue
        self.funcs.append(self.inst_fns(i, ops))
      except Unsupported as e:
        e.at = i + self.declined(i, ops)  # which op of the run: the block ends before it
        raise
    # wave-major: each wave runs the whole block (its registers stay in cache), then the next wave
    calls = []
    for i, ops in groups:  # (a guarded op is a group of its own: plan.groups)
      if i in self.ran:
        self.funcs.append(self.ran_fn(i, ops[0], self.ran[i]))
        calls.append(f"  call i32 @inst{i}g(ptr %ctx, i64 %w, ptr %hints)")
      calls.append(f"""  %r{i} = call i32 @inst{i}(ptr %ctx, i64 %w, ptr %hints)
  %f{i} = icmp ne i32 %r{i}, 0
  br i1 %f{i}, label %fail{i}, label %e{i}
fail{i}:
  ret i32 {i + 1}
e{i}:""")
    body = "\n".join(calls)
    clear = ""
    if self.sites:  # each wave clears its rows of the log first (a lane that does not access stays -1)
      n = 4 * len(self.sites) * self.L
      clear = f"""  %lg.p = getelementptr i64, ptr %ctx, i64 {C_LOG}
  %lg = load i64, ptr %lg.p, !invariant.load !0
  %lg.o = mul i64 %w, {n}
  %lg.a = add i64 %lg, %lg.o
  %lg.q = inttoptr i64 %lg.a to ptr
  call void @llvm.memset.p0.i64(ptr %lg.q, i8 -1, i64 {n}, i1 false)
"""
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
{clear}{body}
  %k.n = add i64 %k, 1
  br label %head
done:
  ret i32 0
}}
"""
    sites = f"{SITES} = internal constant i64 {len(self.sites)}\n" if self.log else ""
    own = sites + "\n".join(self.funcs) + drv
    return prelude(own) + own + self.metadata()

  def metadata(self) -> str:
    """!0 marks invariant loads (ctx fields); SCALAR (!1, !2) loops LLVM must not vectorise (matrix.loop); each TBAA
    tag is a scalar type of its own under one root, but guest memory, LDS and scratch, which are types under "mem" (a
    flat access's: it may reach any of them)."""
    out = ['attributes #0 = { "prefer-vector-width"="512" }', "!0 = !{}", f'!{TBAA_BASE - 1} = !{{!"gputwin"}}',
           f"{SCALAR} = distinct !{{{SCALAR}, !2}}", '!2 = !{!"llvm.loop.vectorize.enable", i1 false}']
    for what, i in self.tags.items():
      t = TBAA_BASE + 2 * i
      up = TBAA_BASE + 2 * self.tags["mem"] if what in ("guest", "lds", "scratch") else TBAA_BASE - 1
      out.append(f'!{t} = !{{!"{what}", !{up}, i64 0}}')
      out.append(f"!{t + 1} = !{{!{t}, !{t}, i64 0}}")
    return "\n".join(out) + "\n"

  # -------------------------------------------------------------------------------- one instruction
  def inst_fns(self, i: int, ops: list[Op]) -> str:
    """@inst{i}: one wave of the instruction (or lane-pure group). Vector ones come twice, the second for a full
    EXEC (every lane on: no masks, which LLVM then drops); the wave's EXEC picks one. A vector memory access whose
    addresses the body takes from its inputs alone first probes them: when every active lane's access lies in the
    region the last wave hit (LDS: within the allocation), a lane loop without checks or calls runs (LLVM
    vectorises it); otherwise the exact one, which checks lane by lane and faults as the interpreter does. A `lean`
    block (a cold compile, tier.py) has only that exact, masked function: a fifth of the compile time."""
    ops = [plan.lowered(o) for o in ops]
    op = ops[0]
    if self.lean or op.kind in ("matrix", "tensor") or getattr(op.sem, "wave_level", False) or \
       not any(o.vector and o.kind != "nop" for o in ops):
      return self.inst_fn(i, ops)
    f = Fn(self.tags)
    full = f.op(f"icmp eq i{self.M} {self.lanes_on(f, op)}, {(1 << self.L) - 1}")
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

    if not (len(ops) == 1 and op.mem in ("global", "ds") and
            all(analysis.plain_mem(o.sem.program) for o in plan.parts(op))):
      f.emit(f"ret i32 {either('a', 'n')}")
      return "\n".join([self.inst_fn(i, ops, full=True), self.inst_fn(i, ops, suffix="n"), self.define(f, i, [])])
    j, d = self.owner.get(i, (i, 0))  # j != i: instruction j's addresses moved by d bytes; j probed them
    # every lane at one address (parameters, constants by SGPR): lane 0's access stands for all, no lane loop probes
    a = op.info.get("address")
    uniform = a is not None and not any(t.file in "va" for t in a.terms)
    pp = f.op(f"getelementptr i32, ptr %hints, i64 {2 * (HINT_PROBE + HINTS * j)}")
    if j == i:  # the answer kept for later accesses: contiguous or scattered within the region, else exact
      probe = call("u") if uniform else either("pa", "p")
      f.emit(f"store i32 {probe}, ptr {pp}")
    else:
      probe = f.op(f"load i32, ptr {pp}")
      if d:  # the owner's range moved by d: still in the region?
        moved = f.op(f"icmp eq i32 {call('s')}, {PROBE_FAST}")
        probe = f.op(f"select i1 {moved}, i32 {probe}, i32 {PROBE_EXACT}")
    contig = f"  i32 {PROBE_CONTIG}, label %contig" * (not uniform)
    f.emit(f"switch i32 {probe}, label %exact [{contig}  i32 {PROBE_FAST}, label %fast ]")
    if not uniform:
      f.put("contig")
      f.emit(f"ret i32 {either('ca', 'c')}")
    f.put("fast")
    if j == i and not uniform:  # scattered: all of them in the region?
      ok = f.op(f"icmp eq i32 {call('r')}, {PROBE_FAST}")
      f.emit(f"store i32 {f.op(f'select i1 {ok}, i32 {PROBE_FAST}, i32 {PROBE_EXACT}')}, ptr {pp}")
      f.emit(f"br i1 {ok}, label %gather, label %exact")
    else:
      f.emit("br label %gather")
    f.put("gather")
    f.emit(f"ret i32 {either('fa', 'f')}")
    f.put("exact")
    f.emit(f"ret i32 {call('x')}")
    probes = [Mode.UNIFORM] if uniform else [Mode.PROBE, Mode.RANGE]
    contigs = [] if uniform else [Mode.CONTIG]
    modes = probes * (j == i) + [Mode.SHIFT] * (j != i and d != 0) + contigs + [Mode.FAST, Mode.EXACT]
    fulls = [self.inst_fn(i, [op], m, full=True) for m in [Mode.FIRST, Mode.PROBE] * (j == i and not uniform) +
             contigs + [Mode.FAST]]
    return "\n".join([self.inst_fn(i, [op], m) for m in modes] + fulls + [self.define(f, i, [])])

  def inst_fn(self, i: int, ops: list[Op], mode: Mode = Mode.PLAIN, full: bool = False, suffix: str = "") -> str:
    """@inst{i}: one wave of `ops` (one instruction, or a group of lane-pure ones sharing a lane loop), as `mode`
    says. `full`: for a wave whose EXEC has every lane on (the name gets an "a")."""
    ops = [plan.lowered(o) for o in ops]
    if ops[0].kind == "matrix":  # wave-level (WMMA/MFMA): native/matrix.py
      return matrix.lower(self, i, ops[0], Fn(self.tags))
    if ops[0].kind == "tensor":  # warp-level (wmma, mma.sync): native/tensor.py
      return tensor.lower(self, i, ops[0], Fn(self.tags))
    f = Fn(self.tags, mode, full, suffix)
    last, nops = ops[-1], len(ops)
    ops = [o for o in ops if o.kind != "nop"] or ops[-1:]  # s_nop, s_delay_alu... in a group: PC and counts only
    op = ops[0]
    info = {"lanes": self.L, "family": self.fam, "space": SPACES.get(op.mem, "gm"), "vgpr": self.vgpr_at,
            "vrow": self.vgpr_row, "hwreg": self.hw_row,
            "fault": self.fault_if, "routed": self.routed, "sgpr": self.sgpr_row, "sgprs": self.sgprs,
            "join": self.join,
            "slot": self.owner.get(i, (i, 0))[0], "delta": self.owner.get(i, (i, 0))[1]}
    if self.log and op.mem in plan.LDS_KINDS and mode is not Mode.CHECK:
      k0 = self.site0.setdefault(i, len(self.sites))  # (the sites of the ops before it are all known by now)
      info.update(log=self.sites, site0=k0, op=i)
    # a wave-level body (readlane, writelane: registers by lane number) runs once per wave with an active lane
    wave = op.kind != "nop" and getattr(op.sem, "wave_level", False)
    if wave and any(isinstance(op.ins.get(n), Src) and op.ins[n].file in "va" for n in op.sem.inputs):
      raise Unsupported("lane values in a wave-level body")  # (its operands are SGPRs and constants)
    vector = op.vector and op.kind != "nop" and not wave
    simt = getattr(self.fe, "simt", False)  # (a nop counts the threads running it there, the whole wave on AMD)
    if op.kind == "clock":  # a time source (AMD S_MEMTIME): its D0 the wave's clock, as core.step stores it
      self.store_reg(f, op.outs["D0"], self.clock(f, op), 64, op)
      self.bump_pc(f, op)
      return self.finish(f, i, str(self.L))
    if op.kind == "nop":
      self.bump_pc(f, op)
      per = self.count(f, "ctpop", self.lanes_on(f, op)) if simt else str(self.L)
      return self.finish(f, i, f.op(f"mul i64 {per}, {nops}"))
    nops -= len(ops)
    exec_v = self.lanes_on(f, op)  # (a guarded op is a group of its own)
    f.first = self.count(f, "cttz", exec_v)  # the first active lane (none: M)
    pre = ""
    if mode in (Mode.PLAIN, Mode.EXACT) and plan.prechecked(op):  # every lane's faults first (plan.prechecked)
      if not analysis.plain_mem(op.sem.program):
        raise Unsupported("a faulting access overwriting its address registers")
      if i not in self.checked:
        self.checked.add(i)
        pre = self.inst_fn(i, ops, Mode.CHECK) + "\n"
      c, ok = f.op(f"call i32 @inst{i}k(ptr %ctx, i64 %w, ptr %hints)"), f.label("chk")
      f.emit(f"br i1 {f.op(f'icmp ne i32 {c}, 0')}, label %fault, label %{ok}")
      f.put(ok)
    # units: each instruction's parts (VOPD's two halves read their sources before either writes)
    units = []
    for o in ops:
      parts = plan.parts(o)
      units.append([(Gen(f, p, info), p) for p in parts])
    # state variables: per wave (scalars, specials) or per lane (VGPRs, addresses)
    for g, o in (x for u in units for x in u):
      self.declare(g, o, vector)
    # a body without memory, registers by number, loops or lane-0 results runs in every lane, its results kept where
    # EXEC is set: the lane loop is then branch-free, which LLVM vectorises
    gens = [x for u in units for x in u]
    pure = vector and not any(o.mem or o.sem.regfiles for _, o in gens) and not any(g.lane0 for g, _ in gens) and \
        not any(analysis.has_loop(o.sem.program.body) for _, o in gens)
    if len(ops) > 1 and not pure:
      raise Unsupported("a lane-pure group with an impure member")
    probe, peel = mode.probes, mode in (Mode.FIRST, Mode.UNIFORM)
    coords = mode in (Mode.PROBE, Mode.RANGE) and self.coord_probe(op)  # a bound buffer's: buffer_probe
    dwords = mode is Mode.PROBE and self.lane_term(op) is not None  # one VGPR (pair) plus per-wave terms: dword_probe
    same = f.full and mode is Mode.PROBE and not (coords or dwords)  # every lane on: against lane 0's (FIRST's)
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
    if mode is Mode.SHIFT:  # no lane loop: the owner's probed [lo, hi] moved by this access's offset
      (g, o), = gens
      self.load_state(g, o, lane=False)
      return self.shifted(f, g, o, i)
    for g, o in gens:  # per-wave state first (read once, before any lane)
      self.load_state(g, o, lane=False)
      for nm in o.sem.program.outputs if pure else ():
        w = g.widths[nm]
        if nm not in g.lane_names and self.L <= w <= 64 and analysis.lane_bit_only(o.sem.program.body, nm):
          g.masks[nm] = (f.alloca(f"i{w}"), f.alloca(f"i{w}"))
          f.emit(f"store i{w} 0, ptr {g.masks[nm][0]}")
          f.emit(f"store i{w} 0, ptr {g.masks[nm][1]}")
      for nm in g.lane0 & o.outs.keys():  # no lane may be active: the register then gets the initial value, or for
        # an input read from a VGPR lane 0's (pcode: an inactive lane's output is its input)
        w, s = g.widths[nm], o.ins.get(nm) if nm in o.sem.program.inputs else None
        v = f.conv(*self.fetch(f, s, lane="0"), w) if isinstance(s, Src) else str(default_bits(nm, w))
        self.store_reg(f, o.outs[nm], v, w, o)
    on = None
    if peel:  # lane 0 alone, no loop
      f.emit("%lane32 = add i32 0, 0")
      f.emit("%lane = add i64 0, 0")
      on = f.on = "true"
    elif vector:
      flags = self.lane_flags(f, exec_v) if self.M > 64 and not f.full else None
      start = "0"
      # one value per wave from per-wave sources (a SIMT scalar VALU op): the first active lane's turn computes it
      once = len(ops) == 1 and not op.mem and op.sem is not None and scalar_valu(op)
      if once or not (pure or probe or f.full):  # a loop that branches per lane: from the first active lane to the last
        start = f.op(f"call i64 @llvm.umin.i64(i64 {f.first}, i64 {self.L - 1})")  # (none: one turn, lane off)
        top = f.op(f"sub i64 {self.M}, {self.count(f, 'ctlz', exec_v)}")
        f.lane_end = f.op(f"add i64 {start}, 1" if once else f"call i64 @llvm.umin.i64(i64 {top}, i64 {self.L})")
      f.emit("br label %pre")  # the block the lane loop's phi names as its entry
      f.put("pre")
      f.emit("br label %lhead")
      f.put("lhead")
      f.emit(f"%lane = phi i64 [{start}, %pre], [%lane.n, %lnext]")
      f.emit("%lane32 = trunc i64 %lane to i32")
      if self.L == 32:  # 32-bit lanes: twice the lanes per vector register
        bit = f.op(f"lshr i32 {f.op(f'trunc i64 {exec_v} to i32')}, %lane32")
        on = f.on = f.op(f"trunc i32 {bit} to i1")
      elif self.M == 64 or not f.full:
        on = f.on = self.lane_on(f, exec_v, flags)
      if f.full:
        on = f.on = "true"
      else:
        f.ones = self.lane_mask(f, exec_v, flags)
      if once:  # its one value is written whatever EXEC is (binding.scalar_valu): lane off or not, this turn runs
        # and writes its lane-0 results (store_state: the first lane's)
        on = f.on = "true"
        f.first = start
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
        if not probe and mode is not Mode.CHECK:  # (a probe reads only the address registers)
          self.load_state(g, o, lane=True)
        handed = {nm: fwd[(r.index, r.dwords)] for nm in o.sem.program.inputs if pure
                  for r in [plan.state_src(o, nm)]
                  if isinstance(r, Src) and r.file == "s" and (r.index, r.dwords) in fwd}
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
      if coords or dwords:
        (g, o), = unit
        return (self.buffer_probe if coords else self.dword_probe)(f, g, o, i, exec_v)
      for g, o in unit:
        self.addresses(g, o)
      if mode is Mode.CHECK:  # each access of the body, at ADDR + K (analysis.plain_mem), looked up: faults leave
        (g, o), = unit
        body, ea = o.sem.program.body, f.op(f"load i64, ptr {g.ea}")
        for idx, bits in analysis.mem_accesses(body):
          k = analysis.addr_offset(idx, analysis.addr_vars(body))
          g.access(ea if k is None else f.op(f"add i64 {ea}, {g.u64(g.ex(k), k.ty)}"), max(bits // 8, 1),
                   "r" not in o.sem.mem)
        self.lane_next(f)
        f.emit("ret i32 0")
        return self.define(f, i, ["fault:", "  ret i32 1"])
      if probe:  # nothing written: a lane that would fault sets `bad`, the rest is reduced for after the loop
        (g, o), = unit
        stride = analysis.stride(o.sem.program)
        ea = f.op(f"load i64, ptr {g.ea}")
        v = ea if mode is Mode.RANGE else f.op(f"sub i64 {ea}, {f.op(f'mul i64 %lane, {stride}')}")
        if mode is Mode.UNIFORM:  # lane 0's access is every lane's
          self.keep_range(f, i, ea, ea)
          bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, ea, ea)}")
          f.emit(f"ret i32 {f.op(f'select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_FAST}')}")
          return self.define(f, i, [])
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
          self.keep_range(f, i, "%ref", emax)
          bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, '%ref', emax)}")
          r = f.op(f"select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_CONTIG}")
          sc = f.op(f"load i1, ptr {scattered}")
          f.emit(f"ret i32 {f.op(f'select i1 {sc}, i32 {PROBE_FAST}, i32 {r}')}")
          return self.define(f, i, [])
        lo, hi = (f.op(f"load i64, ptr {acc}") for acc, _, _ in red)
        if mode is Mode.RANGE:  # the lanes are scattered: all of them in one region?
          self.keep_range(f, i, lo, hi)
          bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, lo, hi)}")
          f.emit(f"ret i32 {f.op(f'select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_FAST}')}")
          return self.define(f, i, [])
        # contiguous (every active lane at base + lane * stride): the first and last active lanes bound the range
        f.emit(f"store i64 {lo}, ptr {hint_base}")
        first, last = f.first, self.last_lane(f, exec_v)
        emin = f.op(f"add i64 {lo}, {f.op(f'mul i64 {first}, {stride}')}")
        emax = f.op(f"add i64 {lo}, {f.op(f'mul i64 {last}, {stride}')}")
        self.keep_range(f, i, emin, emax)
        bad = f.op(f"or i1 {f.ld_bad()}, {g.probe_range(o.sem.program.body, emin, emax)}")
        return self.answer(f, i, exec_v, f.op(f"icmp eq i64 {lo}, {hi}"), bad)
      for g, o in unit:
        for name, (p, t) in list(g.vars.items()):
          if not name.startswith("@"):
            f.emit(f"store {lty(t)} {zero(t)}, ptr {p}")
        if wave:  # (Semantics.__call__: the body runs for a wave with an active lane)
          run, skip = f.label("wl"), f.label("wl")
          f.emit(f"br i1 {f.op(f'icmp ne i{self.M} {exec_v}, 0')}, label %{run}, label %{skip}")
          f.put(run)
        g.block(o.sem.program.body)
        if wave:
          f.emit(f"br label %{skip}")
          f.put(skip)
      for g, o in unit:
        self.store_state(g, o, lane=True, on=on if pure else None)
      for snap in snaps:
        for (ptr, w), old in snap:
          new = f.op(f"load i{w}, ptr {ptr}")
          f.emit(f"store i{w} {self.keep(f, on, new, old, w)}, ptr {ptr}")
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
      self.lane_next(f)
    for g, nm, bit, written, acc, wm, w in masks:  # mask = (old & ~written lanes) | their bits
      ptr = g.state[nm][0]
      lanes = f.op(f"load i{w}, ptr {wm}")
      keep = f.op(f"and i{w} {f.op(f'load i{w}, ptr {ptr}')}, {f.op(f'xor i{w} {lanes}, -1')}")
      bits = f.op(f"load i{w}, ptr {acc}")
      f.emit(f"store i{w} {f.op(f'or i{w} {keep}, {bits}')}, ptr {ptr}")
    for g, o in gens:
      self.store_state(g, o, lane=False)
    self.bump_pc(f, last)
    if vector or wave:  # (an unmasked op counts the lanes running it, as the interpreter's event does)
      ran = self.exec_value(f) if op.info.get("unmasked") else exec_v
      lane_count = f.op(f"mul i64 {self.count(f, 'ctpop', ran)}, {len(ops)}")
    else:
      lane_count = "1"
    if nops:
      per = self.count(f, "ctpop", exec_v) if simt else str(self.L)
      lane_count = f.op(f"add i64 {lane_count}, {f.op(f'mul i64 {per}, {nops}')}")
    return pre + self.finish(f, i, lane_count)

  def coord_probe(self, op: Op) -> bool:
    """Does `op` access a bound buffer (binding.Buffer) by a one-dword coordinate, contiguous lanes a whole number
    of elements apart: then its probes reduce the 32-bit coordinates (buffer_probe), not 64-bit addresses."""
    b, stride = op.info.get("buffer"), analysis.stride(op.sem.program)
    return b is not None and b.index.file == "k" and b.kind in getattr(self.fe, "buffers", ()) and \
        b.coord.dwords == 1 and b.coord.file != "k" and stride % b.scale == 0

  @staticmethod
  def reduce32(f: Fn, values: list[str]) -> list[str]:
    """In a probe's lane loop: allocas holding the least and the greatest of each i32 value over the active lanes
    (after the loop; none active: -1 and 0)."""
    accs = []
    for v in values:
      for pick, idle in (("umin", "-1"), ("umax", "0")):  # (plain reductions: vectorised)
        acc = f.alloca("i32")
        f.pro.append(f"  store i32 {idle}, ptr {acc}")
        mine, cur = f.op(f"select i1 {f.on}, i32 {v}, i32 {idle}"), f.op(f"load i32, ptr {acc}")
        f.emit(f"store i32 {f.op(f'call i32 @llvm.{pick}.i32(i32 {cur}, i32 {mine})')}, ptr {acc}")
        accs.append(acc)
    return accs

  def lane_term(self, op: Op) -> Src | None:
    """The one per-lane term (a VGPR or VGPR pair) of a global access's 64-bit address plan (binding.Address: summed
    with per-wave terms and the offset, not aligned), or None: dword_probe probes such accesses."""
    a = op.info.get("address")
    if op.mem != "global" or a is None or a.space != "mem" or a.align != 1 or a.width != 64:
      return None
    lanes = [t for t in a.terms if t.file in "va"]
    return lanes[0] if len(lanes) == 1 and lanes[0].dwords in (1, 2) else None

  def dword_probe(self, f: Fn, g: Gen, o: Op, i: int, exec_v: str) -> str:
    """@inst{i}p of a global access with one per-lane term (lane_term), answering as the 64-bit probe does, from
    32-bit lanes: the term's low dword minus lane * stride and its high dword, each reduced to its least and
    greatest. Contiguous when both are the same in every active lane and the low dwords of lane 0 to the last
    active lane carry nothing into the high one; the range [first, last active lane] is then checked once (the
    address plan's sum, the guest's address bits, the region). Otherwise scattered: the RANGE probe decides."""
    a, t = o.info["address"], self.lane_term(o)
    stride = analysis.stride(o.sem.program)
    lo = f.ld("i32", self.vgpr_ptr(f, t.index, t.file), (t.file, t.index))
    vals = [f.op(f"sub i32 {lo}, {f.op(f'mul i32 %lane32, {stride}')}")]
    if t.dwords == 2:
      vals.append(f.ld("i32", self.vgpr_ptr(f, t.index + 1, t.file), (t.file, t.index + 1)))
    accs = self.reduce32(f, vals)
    self.lane_next(f)
    got = [f.conv(f.op(f"load i32, ptr {acc}"), 32, 64) for acc in accs]
    base = got[0] if t.dwords == 1 else f.op(f"or i64 {got[0]}, {f.op(f'shl i64 {got[2]}, 32')}")  # lane 0's term
    same = f.op(f"icmp eq i64 {got[0]}, {got[1]}")
    if t.dwords == 2:
      same = f.op(f"and i1 {same}, {f.op(f'icmp eq i64 {got[2]}, {got[3]}')}")
    first, last = f.first, self.last_lane(f, exec_v)
    top = f.op(f"add i64 {got[0]}, {f.op(f'mul i64 {last}, {stride}')}")  # the last active lane's low dword
    same = f.op(f"and i1 {same}, {f.op(f'icmp ule i64 {top}, {M32}')}")
    u = str(a.offset & ((1 << 64) - 1))  # the offset and the per-wave terms
    for x in a.terms:
      if x.file == "s":
        u = f.op(f"add i64 {u}, {f.conv(self.sgpr(f, x.index, x.dwords), 32 * x.dwords, 64)}")

    def at(lane: str) -> str:  # the plan's address of lane `lane` (contiguous: lane 0's term + lane * stride)
      term = f.op(f"add i64 {base}, {f.op(f'mul i64 {lane}, {stride}')}")
      return f.op(f"add i64 {u}, {term}")
    f.emit(f"store i64 {at('0')}, ptr %hints.b{i}")
    emin, emax = at(first), at(last)
    self.keep_range(f, i, emin, emax)
    bad = f.op(f"icmp ugt i64 {emin}, {emax}")  # (the sum wrapped inside the range)
    bits = va_bits(o, self.fe)
    if bits < 64:
      bad = f.op(f"or i1 {bad}, {f.op(f'icmp ugt i64 {emax}, {(1 << bits) - 1}')}")
    bad = f.op(f"or i1 {bad}, {g.probe_range(o.sem.program.body, emin, emax)}")
    return self.answer(f, i, exec_v, same, bad)

  def buffer_probe(self, f: Fn, g: Gen, o: Op, i: int, exec_v: str) -> str:
    """@inst{i}p / @inst{i}r of a bound-buffer access (coord_probe), answering as an address plan's probe does: the
    active lanes' coordinates (PROBE: coordinate - lane * k, k elements a lane) reduced to their least and greatest
    in the lane loop, 32 bits a lane; the buffer's bound and the region are then checked once, for the range. PROBE:
    contiguous when every lane's value is the same and lane 0's coordinate plus the last active lane's k's does not
    pass 2**32 (else scattered, for the RANGE probe to decide), its base (lane 0's address) kept for CONTIG."""
    b, mode = o.info["buffer"], f.mode
    k = analysis.stride(o.sem.program) // b.scale
    v, bits = self.fetch(f, b.coord)
    c = f.conv(v, bits, 32)
    if mode is Mode.PROBE:
      c = f.op(f"sub i32 {c}, {f.op(f'mul i32 %lane32, {k}')}")
    accs = self.reduce32(f, [c])
    self.lane_next(f)
    lo, hi = (f.conv(f.op(f"load i32, ptr {acc}"), 32, 64) for acc in accs)
    base, size = self.buffer_row(f, b)

    def at(x: str) -> str:  # the guest address of coordinate x
      off = f.op(f"add i64 {f.op(f'mul i64 {x}, {b.scale}')}, {b.offset}")
      return f.op(f"add i64 {base}, {off}")
    cmin, cmax = lo, hi
    if mode is Mode.PROBE:
      first, last = f.first, self.last_lane(f, exec_v)
      cmin, cmax = (f.op(f"add i64 {lo}, {f.op(f'mul i64 {x}, {k}')}") for x in (first, last))
      f.emit(f"store i64 {at(lo)}, ptr %hints.b{i}")
    emin, emax = at(cmin), at(cmax)
    self.keep_range(f, i, emin, emax)
    end = f.op(f"add i64 {f.op(f'sub i64 {emax}, {base}')}, {b.nbytes}")
    bad = f.op(f"or i1 {f.op(f'icmp sgt i64 {end}, {size}')}, {g.probe_range(o.sem.program.body, emin, emax)}")
    if mode is Mode.RANGE:
      f.emit(f"ret i32 {f.op(f'select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_FAST}')}")
      return self.define(f, i, [])
    same = f.op(f"and i1 {f.op(f'icmp eq i64 {lo}, {hi}')}, {f.op(f'icmp ule i64 {cmax}, {M32}')}")
    return self.answer(f, i, exec_v, same, bad)

  def answer(self, f: Fn, i: int, exec_v: str, contig: str, bad: str) -> str:
    """Return a PROBE's answer and define @inst{i}p: CONTIG for contiguous lanes (or none active) whose range is
    good, EXACT when it is not, FAST for scattered lanes (the RANGE probe then decides)."""
    contig = f.op(f"or i1 {f.op(f'icmp eq i{self.M} {exec_v}, 0')}, {contig}")
    r = f.op(f"select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_CONTIG}")
    f.emit(f"ret i32 {f.op(f'select i1 {contig}, i32 {r}, i32 {PROBE_FAST}')}")
    return self.define(f, i, [])

  @staticmethod
  def keep_range(f: Fn, i: int, lo: str, hi: str) -> None:
    """Keep the probed lowest and highest effective address for later accesses moved from them (plan.owners)."""
    for k, v in ((HINT_LO, lo), (HINT_HI, hi)):
      f.emit(f"store i64 {v}, ptr {f.op(f'getelementptr i64, ptr %hints, i64 {k + HINTS * i}')}")

  def shifted(self, f: Fn, g: Gen, o: Op, i: int) -> str:
    """@inst{i}s: PROBE_FAST when the accesses of owner j's lanes, moved by d bytes, stay in the region (LDS: in
    the allocation) without wrapping, else PROBE_EXACT. Every active lane's address is then j's plus d, exactly."""
    j, d = g.info["slot"], g.info["delta"]
    lo, hi = (f.op(f"load i64, ptr {f.op(f'getelementptr i64, ptr %hints, i64 {k + HINTS * j}')}")
              for k in (HINT_LO, HINT_HI))
    lo2, hi2 = f.op(f"add i64 {lo}, {d}"), f.op(f"add i64 {hi}, {d}")
    if g.space == "lds":  # offsets in the workgroup's window, j's in [0, 2**(LDS_BITS - 1)) (no wrapped base)
      reach = 1 << (LDS_BITS - 1)
      olo, ohi = (f.op(f"and i64 {x}, {(1 << LDS_BITS) - 1}") for x in (lo, hi))
      nlo, nhi = f.op(f"add i64 {olo}, {d}"), f.op(f"add i64 {ohi}, {d}")
      bad = f.op(f"or i1 {f.op(f'icmp uge i64 {ohi}, {reach}')}, {f.op(f'icmp slt i64 {nlo}, 0')}")
      bad = f.op(f"or i1 {bad}, {f.op(f'icmp sge i64 {nhi}, {reach}')}")
    elif va_bits(o, self.fe) < 64:  # guest addresses below 4 GiB
      bad = f.op(f"or i1 {f.op(f'icmp slt i64 {lo2}, 0')}, {f.op(f'icmp sgt i64 {hi2}, {M32}')}")
    else:  # 64-bit addresses: lo and hi moved alike, unless exactly one of them wrapped
      bad = f.op(f"icmp ugt i64 {lo2}, {hi2}")
    bad = f.op(f"or i1 {bad}, {g.probe_range(o.sem.program.body, lo2, hi2)}")
    f.emit(f"ret i32 {f.op(f'select i1 {bad}, i32 {PROBE_EXACT}, i32 {PROBE_FAST}')}")
    return self.define(f, i, [])

  @staticmethod
  def lane_w(f: Fn, w: int) -> str:
    """The lane number as an i{w} shift amount."""
    return f.conv("%lane", 64, w)

  def last_lane(self, f: Fn, m: str) -> str:
    """The last lane on in lane mask `m` (i{M}; none: -1), as an i64 (the first: Fn.first)."""
    return f.op(f"sub i64 {self.M - 1}, {self.count(f, 'ctlz', m)}")

  def count(self, f: Fn, fn: str, m: str) -> str:
    """ctpop / cttz / ctlz of a lane mask (i{M}; cttz and ctlz of none: M), as an i64."""
    z = ", i1 false" if fn != "ctpop" else ""
    return f.conv(f.op(f"call i{self.M} @llvm.{fn}.i{self.M}(i{self.M} {m}{z})"), self.M, 64)

  def lane_flags(self, f: Fn, m: str) -> str:
    """Lane mask `m` (i{M}, M > 64) as M bytes of 0/1 in a local array, written before a lane loop: lane_on then
    reads lane %lane's byte, a load LLVM vectorises (a shift or select of i{M} values in the loop would be
    legalised into many scalar instructions per lane). Expanded 64 lanes at a time: on AVX2 hosts (znver3) LLVM 22
    gives wrong bytes for `zext (bitcast i128 (and ..., bitcast <128 x i1> ...))` in one piece."""
    p = f.alloca(f"[{self.M} x i8], align 16")
    for k in range(0, self.M, 64):
      word = f.op(f"trunc i{self.M} {f.op(f'lshr i{self.M} {m}, {k}') if k else m} to i64")
      v = f.op(f"zext <64 x i1> {f.op(f'bitcast i64 {word} to <64 x i1>')} to <64 x i8>")
      f.emit(f"store <64 x i8> {v}, ptr {f.op(f'getelementptr i8, ptr {p}, i64 {k}')}, align 16")
    return p

  def lane_on(self, f: Fn, m: str, flags: str | None = None) -> str:
    """Bit %lane of lane mask `m` (i64; wider: from its lane_flags array)."""
    if flags is None:
      return f.op(f"trunc i64 {f.op(f'lshr i64 {m}, %lane')} to i1")
    b = f.op(f"load i8, ptr {f.op(f'getelementptr i8, ptr {flags}, i64 %lane')}")
    return f.op(f"trunc i8 {b} to i1")

  def lane_next(self, f: Fn) -> None:
    """The lane loop's latch: on to the next lane, or out (%lend) past the last (Fn.lane_end, else the wave's)."""
    f.emit("br label %lnext")
    f.put("lnext")
    f.emit("%lane.n = add i64 %lane, 1")
    done = f.op(f"icmp uge i64 %lane.n, {f.lane_end}") if f.lane_end else f.op(f"icmp eq i64 %lane.n, {self.L}")
    f.emit(f"br i1 {done}, label %lend, label %lhead")
    f.put("lend")

  def lane_mask(self, f: Fn, m: str, flags: str | None = None) -> str:
    """Lane %lane of mask `m` (lane_on's bit) spread to an i64 of all ones or zeros by shifts (not sext of the bit,
    which LLVM folds back into a select: Compiler.keep)."""
    if flags is not None:
      b = f.op(f"load i8, ptr {f.op(f'getelementptr i8, ptr {flags}, i64 %lane')}")
      return f.op(f"sub i64 0, {f.op(f'zext i8 {b} to i64')}")
    w = 32 if self.L == 32 else 64
    x = f.conv(m, self.M, w) if self.M != w else m
    lane = f.conv("%lane", 64, w)
    top = f.op(f"shl i{w} {x}, {f.op(f'sub i{w} {w - 1}, {lane}')}")
    return f.conv(f.op(f"ashr i{w} {top}, {w - 1}"), w, 64, True)

  @staticmethod
  def keep(f: Fn, on: str, new: str, old: str, w: int) -> str:
    """`new` where the lane's `on` holds, else `old` (i{w}: a register's value before an instruction's write). For the
    lane loop's own `on`, as bit operations on its mask (f.ones): a select whose result is stored back where `old`
    was loaded would become a masked store (LLVM 22's DAGCombiner, PR 145176), which AVX2 hosts (znver3) run
    microcoded, ~6x slower per register row than a plain vector store (emu/UPSTREAM.md #5)."""
    if on == "true":
      return new
    if on is not f.on or f.ones is None:
      return f.op(f"select i1 {on}, i{w} {new}, i{w} {old}")
    ones = f.conv(f.ones, 64, w) if w != 64 else f.ones
    flip = f.op(f"xor i{w} {old}, {new}")
    return f.op(f"xor i{w} {old}, {f.op(f'and i{w} {flip}, {ones}')}")

  def finish(self, f: Fn, i: int, lane_count: str) -> str:
    lc = f.live(C_LANES)
    f.set_ctx(C_LANES, f.op(f"add i64 {lc}, {lane_count}"))
    f.emit("ret i32 0")
    return self.define(f, i, ["fault:", "  ret i32 1"])

  @staticmethod
  def define(f: Fn, i: int, tail: list[str]) -> str:
    name = f"inst{i}{f.mode.value}{'a' if f.full else f.suffix}"
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
    return self.srow(f, idx)

  @staticmethod
  def srow(f: Fn, idx, base: int = C_S) -> str:
    """SGPR row `idx` (a constant or an i64 value) of wave %w; `base` C_HW: a hardware register's, the same strides."""
    off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_SSTW)}')}, {f.op(f'mul i64 {idx}, {f.ctx(C_SSTR)}')}")
    return f.gep(f.ctxp(base), off)

  def vgpr_ptr(self, f: Fn, idx, file: str = "v", lane: str = "%lane") -> str:
    """Lane `lane` (%lane) of VGPR `idx` (`file` "a": AccVGPR, same strides; its reach is Block.na) of wave %w: a
    constant register, in the block's reach, or an i64 value (`vgpr_row`)."""
    if file == "v" and isinstance(idx, int):
      self.nv = max(self.nv, idx + 1)
    off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_VSTW)}')}, {f.op(f'mul i64 {idx}, {f.ctx(C_VSTR)}')}")
    return f.gep(f.gep(f.ctxp(C_V if file == "v" else C_A), off), f.op(f"mul i64 {lane}, 4"))

  def vgpr_at(self, f: Fn, idx: int, lane: str, write: bool) -> str:
    """VGPR `idx` of wave %w in lane `lane` (an i64 value below the wave size): a register by lane number."""
    if write:
      self.wrote["v"] |= 1 << idx
    return self.vgpr_ptr(f, idx, "v", lane)

  def hw_row(self, f: Fn, r: str, o: Op) -> str:
    """Hardware register `r` (an i64 below 64, of a 6-bit id: HW_REGISTERS[r], MODE, SHADER_CYCLES...) of wave %w,
    as core.Engine.execute passes them: the cycle counter rows (Frontend.cycle_rows) the wave's clock first; the file
    counts as written (restart clears it). The rows are the SGPR file's strides apart (Native asserts it). No TBAA
    tag is known for it (Gen.reg's caller)."""
    self.wrote["hw"] = True
    for row, sh, bits in self.fe.cycle_rows(self.fam):
      c = f.op(f"and i64 {f.op(f'lshr i64 {self.clock(f, o)}, {sh}')}, {(1 << bits) - 1}")
      f.emit(f"store i32 {f.op(f'trunc i64 {c} to i32')}, ptr {self.srow(f, row, C_HW)}")
    return self.srow(f, f.op(f"and i64 {r}, 63"), C_HW)

  def vgpr_row(self, f: Fn, idx: str, lane: str, write: bool) -> str:
    """VGPR `idx` (an i64 value: a register by computed number) of wave %w in lane `lane`, checked below the file's
    rows as the interpreter checks it (past them the block stops there, F_LANE, and the interpreter's run raises its
    error); it may be any row: a write marks every row written. No TBAA tag is known for it (Gen.reg's caller)."""
    self.fault_if(f, f.op(f"icmp uge i64 {idx}, {f.ctx(C_VROWS)}"), F_LANE, idx, 4, write)
    if write:
      self.wrote["v"] = -1
    return self.vgpr_ptr(f, idx, "v", lane)

  @property
  def sgprs(self) -> int:
    """The rows of the scalar file (core.Engine's: the frontend's `sgprs`)."""
    return getattr(self.fe, "sgprs", 256)

  def sgpr_row(self, f: Fn, idx: str, write: bool) -> str:
    """SGPR row `idx` (an i64 value below `sgprs`) of wave %w: a register by number, which may be any row (the
    block's reach is the whole file; a write marks every row written, as the interpreter's does)."""
    self.ns = max(self.ns, self.sgprs)
    if write:
      self.wrote["s"] = -1
    return self.srow(f, idx)

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

  def lanes_on(self, f: Fn, op: Op) -> str:
    """The lanes `op` runs for, as i{M} bits: EXEC, and for a guarded instruction (per-thread PCs) only those whose
    guard predicate holds (core.step_simt's m); an `unmasked` one (plan.lowered) for every lane of the wave."""
    if op.info.get("unmasked"):
      return "-1" if self.L == self.M else str((1 << self.L) - 1)
    e = self.exec_value(f)
    if op.info.get("dpp") is not None:  # DPP: its write mask too (row/bank masks, lanes without a source)
      bits = int((self.fe.write_mask(op, self.L).astype(np.uint64) << np.arange(self.L, dtype=np.uint64)).sum())
      e = f.op(f"and i{self.M} {e}, {bits - (1 << self.M) if bits >> (self.M - 1) else bits}")
    g = op.info.get("guard")
    if g is None:
      return e
    row, neg = g
    self.nv = max(self.nv, row + 1)
    off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_VSTW)}')}, {f.op(f'mul i64 {row}, {f.ctx(C_VSTR)}')}")
    vec = f.ld(f"<{self.L} x i32>", f.gep(f.ctxp(C_V), off), ("v", row), ", align 4")
    bits = f.op(f"bitcast <{self.L} x i1> {f.op(f'icmp ne <{self.L} x i32> {vec}, zeroinitializer')} to i{self.L}")
    if neg:
      bits = f.op(f"xor i{self.L} {bits}, -1")
    return f.op(f"and i{self.M} {e}, {f.conv(bits, self.L, self.M)}")

  def tail_fn(self, i: int, op: Op) -> str:
    """@inst{i} for a block's last instruction when it is the scheduler's event (plan.tail). Per-thread PCs: it only
    reports the lanes it takes (guarded: those whose predicate holds) in Native.taken[w]; the scheduler moves or ends
    those threads. One PC per wave (s_endpgm, s_barrier): it counts the wave's lanes, as core.step does, and moves
    past a barrier; core.run retires the wave or parks it at the barrier."""
    f = Fn(self.tags)
    if not self.simt:
      if op.kind == "barrier":
        self.bump_pc(f, op)
      return self.finish(f, i, str(self.L))
    op = plan.lowered(op)
    m = self.lanes_on(f, op)
    t = f.op(f"and i{self.M} {m}, {f.op(f'sub i{self.M} {m}, 1')}") if elect(op) else m  # (the lowest stays)
    f.st(f"i{self.M}", t, f.gep(f.ctxp(C_TAKEN), f.op(f"mul i64 %w, {self.M // 8}")), "taken")
    return self.finish(f, i, self.count(f, "ctpop", m))

  def ran_fn(self, i: int, op: Op, c: int) -> str:
    """@inst{i}g: sets bit c of ctx[C_RAN] when `op`, the first of guard class c (guard_classes), runs for some lane
    of the wave."""
    f = Fn(self.tags, suffix="g")
    on = f.op(f"icmp ne i{self.M} {self.lanes_on(f, plan.lowered(op))}, 0")
    bit = f.op(f"select i1 {on}, i64 {(1 << c) - (1 << 64 if c == 63 else 0)}, i64 0")
    f.set_ctx(C_RAN, f.op(f"or i64 {f.live(C_RAN)}, {bit}"))
    f.emit("ret i32 0")
    return self.define(f, i, [])

  def exec_value(self, f: Fn) -> str:
    """EXEC as an i{M} lane mask (its L // 32 dwords)."""
    return f.conv(self.sgpr(f, self.sp["exec"], self.L // 32), self.L, self.M)

  def fetch(self, f: Fn, s: Src, op: Op | None = None, lane: str = "%lane") -> tuple[str, int]:
    """core.Engine.fetch: raw bits and their container width (32, 64, or 32 * dwords); `op`'s DPP on its src0; a
    VGPR in lane `lane` (%lane)."""
    if s.file == "k":
      w = 64 if s.dwords == 2 or s.value > M32 else 32
      v, bits = str(s.value & ((1 << w) - 1)), w
    elif op is not None and op.info.get("dpp") is not None and s is op.ins.get("S0"):
      v, bits = self.dpp_source(f, s, op), 32 * s.dwords
    elif s.file in ("v", "a"):
      acc = None
      for k in range(s.dwords):
        ptr = self.vgpr_ptr(f, s.index + k, s.file, lane)
        acc = self.join(f, acc, f.ld("i32", ptr, (s.file, s.index + k)), k, s.dwords)
      v, bits = acc, 32 * s.dwords
    elif s.index in APERTURE and getattr(self.fe, "apertures", None):  # (AMD's Frontend.sreg: a 64-bit read gives
      v, bits = str(APERTURE[s.index] << (32 * (s.dwords - 1))), 32 * s.dwords  # the aperture's base, 32-bit its hi)
    elif s.index in (VCCZ, EXECZ):
      base = self.sp["vcc"] if s.index == VCCZ else self.sp["exec"]
      x = self.sgpr(f, base, self.L // 32)
      z = f.op(f"icmp eq i{self.L} {x}, 0")
      v, bits = f.op(f"zext i1 {z} to i32"), 32
    elif s.index == SCC_CODE:
      v, bits = self.scc_load(f), 32
    else:
      v, bits = self.sgpr(f, s.index, s.dwords), 32 * s.dwords
    if s.hi:
      v = f.op(f"lshr i{bits} {v}, 16")
    if s.pk:  # packed math's op_sel/op_sel_hi: the halves (w bits) this operand gives its low and high lanes
      lo, hi, w = s.pk
      t = 2 * w
      v, bits, m = f.conv(v, bits, t), t, (1 << w) - 1  # (core.Engine.fetch: as a 2w-bit integer)
      part = lambda k: f.op(f"and i{t} {f.op(f'lshr i{t} {v}, {w * k}') if k else v}, {m}")
      v = f.op(f"or i{t} {part(lo)}, {f.op(f'shl i{t} {part(hi)}, {w}')}")
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

  def dpp_source(self, f: Fn, s: Src, op: Op) -> str:
    """src0 of a DPP instruction in lane %lane. The routing is the frontend's (Frontend.source_lanes), read off as a
    table (each lane's source lane, or none: 0); a 64-bit src0 moves whole, each dword by the same table."""
    if s.file != "v" or s.dwords > 2:
      raise Unsupported("DPP operand")
    src = self.fe.source_lanes(np.arange(1, self.L + 1, dtype=np.uint32)[None, :], op, self.L)
    acc = None
    for k in range(s.dwords):
      acc = self.join(f, acc, self.routed(f, s.index + k, src), k, s.dwords)
    return acc

  def routed(self, f: Fn, idx: int, src) -> str:
    """VGPR idx in lane %lane's source lane (src: each lane's source lane + 1, or 0 for none, which reads 0), as one
    shuffle of the whole register, read in the entry block before any lane writes (the destination may be idx)."""
    L = self.L
    sel = ", ".join(f"i32 {int(x) - 1 if x else L}" for x in np.asarray(src).reshape(-1))  # lane L: the zeros' first
    self.nv = max(self.nv, idx + 1)
    stw, stv, base = f.ctx(C_VSTW), f.ctx(C_VSTR), f.ctxp(C_V)
    f.n += 1
    r = f"%dpp{f.n}"
    f.pro += [f"  {r}.w = mul i64 %w, {stw}", f"  {r}.i = mul i64 {idx}, {stv}", f"  {r}.o = add i64 {r}.w, {r}.i",
              f"  {r}.p = getelementptr i8, ptr {base}, i64 {r}.o",
              f"  {r}.v = load <{L} x i32>, ptr {r}.p, align 4, {f.tbaa(('v', idx))}",
              f"  {r} = shufflevector <{L} x i32> {r}.v, <{L} x i32> zeroinitializer, <{L} x i32> <{sel}>"]
    return f.op(f"extractelement <{L} x i32> {r}, i64 %lane")

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
    if g.info["space"] == "flat" or o.info.get("address") is None and plan.vsharp(o):
      g.route = g.f.alloca("i8")
    g.masks = {}  # lane-mask outputs reduced after the lane loop: name -> (bits, written lanes) accumulators
    for nm, w in names.items():
      if w > 1024:
        raise Unsupported("huge state")
      g.state[nm] = (g.f.alloca(f"i{w}"), w)
      s = plan.state_src(o, nm)
      # (flat: OFFSET is 0 for the lanes in LDS, as the interpreter runs their body: amd/memory.py)
      per_lane = vector and (isinstance(s, Src) and s.file in ("v", "a") or nm == "ADDR" and bool(o.mem) or
                             nm == "OFFSET" and o.mem == "flat" or nm in p.outputs and plan.discarded(o, nm, self.sp))
      if vector and nm in p.outputs and not per_lane and not analysis.bit_written(p.body, nm):
        # a per-wave register written whole by every lane (V_MAD_U64_U32's D1): the interpreter keeps the first
        # active lane's value (its initial value when no lane is active: core.Engine._store_parts)
        if nm in p.inputs or nm in o.old or nm in ("PC", "SCC", "EXEC", "EXEC_LO", "M0"):
          raise Unsupported(f"per-wave output {nm} of a vector op")
        g.lane0.add(nm)
        per_lane = True
      d = o.outs.get(nm)
      if per_lane and nm in p.outputs and isinstance(s, Src) and s.file == "v" and isinstance(d, Src) and d.file == "s":
        # a lane mask read from a VGPR (V_ADD_CO_CI_U32's VOP3 carry-in): each lane works on its copy, and the SGPR
        # gets the first active lane's (lane 0's input when none is active: core.Engine._store_parts), as lane0's
        if nm in o.old:
          raise Unsupported(f"{nm}: a lane mask read from a VGPR, kept in part")
        g.lane0.add(nm)
      if per_lane:
        g.lane_names.add(nm)
    for nm, t in locals_of(p.body).items():
      g.vars[nm] = (g.f.alloca(lty(t)), t)

  def load_state(self, g: Gen, o: Op, lane: bool) -> None:
    f, p = g.f, o.sem.program
    for nm, w in g.widths.items():
      if (nm in g.lane_names) != lane or nm == "ADDR" and o.mem:
        continue
      ptr = g.state[nm][0]
      src = None
      if nm in p.inputs:
        s = o.ins.get(nm)
        v, b = self.fetch(f, s, o) if isinstance(s, Src) else self.special(f, o, nm)
        sd = o.info.get("sdwa")
        if sd is not None and not isinstance(sd, (tuple, list)):  # (ir3: its own input selection, not AMD's SDWA)
          raise Unsupported("the frontend's input selection")
        if sd is not None and nm in ("S0", "S1"):  # (core.Engine._inputs: Frontend.select_inputs)
          k = 2 * int(nm[1])
          v, b = self.sdwa_source(f, v, b, sd[k], sd[k + 1])
        ftz = next((x[1:] for x in o.info.get("ftz", ()) if x[0] == nm), None)
        if ftz is not None:  # (core.Engine._inputs: Frontend.denormals)
          v = self.flush_denormals(f, v, b, *ftz, False) if self.ftz else v
        src = (v, b)
      elif nm in o.old:
        src = self.fetch(f, o.old[nm])
      if src is None:
        f.emit(f"store i{w} {default_bits(nm, w)}, ptr {ptr}")
      else:
        v, b = src
        f.emit(f"store i{w} {f.conv(v, b, w)}, ptr {ptr}")

  def clock(self, f: Fn, o: Op) -> str:
    """The wave's clock (its instruction count, Engine.clock) when `o` runs, as an i64: native blocks count theirs
    after they ran (Native.counted), so the one at the block's entry plus o's place in it."""
    at = next(k for k, x in enumerate(self.ops) if x.pc == o.pc)
    c = f.ld("i64", f.gep(f.ctxp(C_CLOCK), f.op("mul i64 %w, 8")), "clock")
    return f.op(f"add i64 {c}, {at}")

  def special(self, f: Fn, o: Op, nm: str) -> tuple[str, int]:
    """core.Engine.special: a pcode input that is no operand, or an operand naming one, from the same table (the
    frontend's special_inputs)."""
    s = o.ins.get(nm)
    kind, *arg = self.special_inputs.get(s if isinstance(s, str) else nm, ("none",))
    if kind == "mask":  # the threads running together (per-thread PCs): Native runs a block with them as EXEC
      kind, arg = "sgpr", ["exec", 0]
    if kind == "clock":
      return f.op(f"lshr i64 {self.clock(f, o)}, {arg[0] if arg else 0}"), 64
    if kind == "scc":
      return self.scc_load(f), 32
    if kind == "sgpr":
      n = arg[1] or self.L // 32
      return self.sgpr(f, self.sp[arg[0]], n), 32 * n
    if kind == "zero":
      return self.fetch(f, Src("s", arg[0]))
    if kind == "pc":
      return str(o.pc), 64  # a block is straight-line: each instruction's PC is known
    if kind == "ieee":  # the launch's (Native.run copies Engine.ieee)
      return f.conv(f.ctx(C_IEEE), 64, 32), 32
    if kind == "field":
      return str(o.info.get(arg[0], 0) & M32), 32
    # kind "round" (the wave's MODE.FP_ROUND): the LLVM lowering declines a conversion that would read it, so in a
    # body it compiles the value only feeds the body's own ROUND_MODE output, which no operand takes (store_state)
    return "0", 32

  def addresses(self, g: Gen, o: Op) -> None:
    """core.Engine._memop: the effective address of each lane (or wave), faults as the interpreter raises them."""
    if not o.mem:
      return
    f, info = g.f, o.info
    if f.mode is Mode.CONTIG:  # the probe found every active lane at base + lane * stride
      f.pro += [f"  %cb.p = getelementptr i64, ptr %hints, i64 {HINT_BASE + HINTS * g.info['slot']}",
                "  %cb = load i64, ptr %cb.p"]
      cb = f.op(f"add i64 %cb, {g.info['delta']}") if g.info["delta"] else "%cb"  # (moved from its owner's)
      a = f.op(f"add nuw i64 {cb}, {f.op(f'mul nuw i64 %lane, {analysis.stride(o.sem.program)}')}")
    elif info.get("buffer") is not None:  # relative to a bound buffer (binding.Buffer)
      a = self.buffer_address(f, info["buffer"], o)
    elif info.get("address") is None and plan.vsharp(o):  # AMD buffer: through the V# (amd/memory.py _buffer)
      a = self.buffer_vsharp(g, o)
    else:  # the instruction's Address plan (binding.Address), as core.Engine.address evaluates it
      p = info.get("address")
      if p is None or p.space not in ("mem", "lds", "scratch", "split"):
        raise Unsupported("address form")
      w = p.width
      a = None
      for t in p.terms:
        if t.file == "s":
          v = f.conv(self.sgpr(f, t.index, t.dwords), 32 * t.dwords, w)
        else:
          v = f.conv(self.fetch(f, t)[0], 32 * t.dwords, w)
        a = v if a is None else f.op(f"add i{w} {a}, {v}")
      a = a or "0"
      if p.offset:
        a = f.op(f"add i{w} {a}, {p.offset & ((1 << w) - 1)}")
      if p.align > 1:
        a = f.op(f"and i{w} {a}, {-p.align}")
      if p.space == "mem":
        a = f.conv(a, w, 64)
        if va_bits(o, self.fe) < 64:
          self.high_check(f, a, va_bits(o, self.fe))
      elif p.space == "lds":  # a 32-bit base (a 64-bit plan's low half, as the interpreter takes it)
        a = self.lds_address(f, f.conv(a, w, 32) if w != 32 else a, o)
      elif p.space == "scratch":  # the lane's private offset (zero-extended)
        a = self.scratch_address(f, f.conv(a, w, 64), o)
      else:
        a = self.flat_address(g, f.conv(a, w, 64), o)
    f.emit(f"store i64 {a}, ptr {g.ea}")  # what the Calc*Addr built-ins answer
    if "ADDR" in g.state:  # pcode's own ADDR input: the low `bits` bits, in the width the body declares
      ptr, w = g.state["ADDR"]
      bits = 32 if o.mem in ("ds", "scratch") else va_bits(o, self.fe)  # (windows: below 2**32; contig: probed)
      a32 = a if f.mode is Mode.CONTIG or bits == 64 else f.op(f"and i64 {a}, {(1 << bits) - 1}")
      if g.route is not None and bits == 64:  # flat: the lanes in LDS or scratch take a window's address
        win = f.op(f"icmp ne i8 {f.op(f'load i8, ptr {g.route}')}, 0")
        a32 = f.op(f"select i1 {win}, i64 {f.op(f'and i64 {a}, {M32}')}, i64 {a32}")
      f.emit(f"store i{w} {f.conv(a32, 64, w)}, ptr {ptr}")

  def lds_address(self, f: Fn, base: str, o: Op, lanes: str | None = None) -> str:
    """core.Engine.lds_address for one lane: its 32-bit base kept mod 2**LDS_BITS (a base further than 256 KiB from
    0 faults; `lanes`: only where that i1 holds), the workgroup slot on top."""
    reach = 1 << (LDS_BITS - 1)
    near = f.op(f"add i32 {base}, {reach}")
    bad = f.op(f"icmp uge i32 {near}, {2 * reach}")
    bad = bad if lanes is None else f.op(f"and i1 {bad}, {lanes}")
    self.fault_if(f, bad, F_LDSBASE, f.op(f"zext i32 {base} to i64"), 4, "r" not in o.sem.mem)
    wgp = f.gep(f.ctxp(C_WG), f.op("mul i64 %w, 8"))
    wg = f.ld("i64", wgp, "wg")
    lo = f.op(f"zext i32 {f.op(f'and i32 {base}, {(1 << LDS_BITS) - 1}')} to i64")
    return f.op(f"or i64 {f.op(f'shl i64 {wg}, {LDS_SHIFT}')}, {lo}")

  def scratch_address(self, f: Fn, off: str, o: Op, lanes: str | None = None) -> str:
    """core.Engine.run_scratch: private offset `off` (i64) of this lane -> the scratch window's address, the lane's
    slot (wave * lanes + lane) shifted by the window's stride. An offset at or past the segment size faults here
    (`lanes`: only where that i1 holds); an access reaching past it, in prelude.ll scr_ptr, as in memory.Window."""
    bad = f.op(f"icmp uge i64 {off}, {f.ctx(C_SCRSZ)}")
    self.fault_if(f, bad if lanes is None else f.op(f"and i1 {bad}, {lanes}"), F_SCROFF, off, 4, "r" not in o.sem.mem)
    slot = f.op(f"add i64 {f.op(f'mul i64 %w, {self.L}')}, %lane")
    return f.op(f"add i64 {f.op(f'shl i64 {slot}, {f.ctx(C_SCRST)}')}, {off}")

  def flat_address(self, g: Gen, a: str, o: Op) -> str:
    """amd/memory.py memop's flat routing for this lane: the high dword of 64-bit address `a` in the shared aperture
    -> LDS (the low dword its base; the body's OFFSET 0), in the private one -> scratch (the low dword its private
    offset), else guest memory (the frontend's apertures: Frontend.apertures). Sets the lane's route (Gen.route), the
    access helper Gen.access takes."""
    f = g.f
    shared, private = self.fe.apertures
    hi = f.op(f"trunc i64 {f.op(f'lshr i64 {a}, 32')} to i32")
    lo = f.op(f"trunc i64 {a} to i32")
    sh, pr = f.op(f"icmp eq i32 {hi}, {shared}"), f.op(f"icmp eq i32 {hi}, {private}")
    route = f.op(f"select i1 {sh}, i8 1, i8 {f.op(f'select i1 {pr}, i8 2, i8 0')}")
    f.emit(f"store i8 {route}, ptr {g.route}")
    yes, no = f.label("priv"), f.label("npriv")  # (a lane in scratch: Engine.scratch_used, runtime.Native.run)
    f.emit(f"br i1 {pr}, label %{yes}, label %{no}")
    f.put(yes)
    f.set_ctx(C_PRIV, "1")
    f.emit(f"br label %{no}")
    f.put(no)
    if "OFFSET" in g.state:
      ptr, w = g.state["OFFSET"]
      old = f.op(f"load i{w}, ptr {ptr}")
      f.emit(f"store i{w} {f.op(f'select i1 {sh}, i{w} 0, i{w} {old}')}, ptr {ptr}")
    gm = a
    if va_bits(o, self.fe) < 64:
      bits = va_bits(o, self.fe)
      self.fault_if(f, f.op(f"and i1 {f.op(f'icmp ugt i64 {a}, {(1 << bits) - 1}')}, "
                            f"{f.op(f'icmp eq i8 {route}, 0')}"), F_HIGH, a, 4, False)
    lds = self.lds_address(f, lo, o, sh)
    scr = self.scratch_address(f, f.op(f"zext i32 {lo} to i64"), o, pr)
    return f.op(f"select i1 {sh}, i64 {lds}, i64 {f.op(f'select i1 {pr}, i64 {scr}, i64 {gm}')}")

  def buffer_vsharp(self, g: Gen, o: Op) -> str:
    """amd/memory.py _buffer for this lane: base, stride and num_records from the V# (4 SGPRs, VSHARP's fields),
    index (idxen) and offset (offen) from vaddr, plus soffset and the instruction's offset. A lane out of the
    buffer's range (offset past num_records with stride 0, else index past it) takes route 3 (Gen.access): its
    reads are 0 and its writes go nowhere, as the interpreter runs it on amd/memory.py NOWHERE."""
    f, i = g.f, o.info
    d = self.sgpr(f, i["srsrc"], 4)
    base, stride, nrec = (f.conv(f.op(f"and i128 {f.op(f'lshr i128 {d}, {lo}') if lo else d}, {(1 << n) - 1}"), 128, 64)
                          for lo, n in VSHARP.values())
    so = f.conv(self.sgpr(f, i["soffset"], 1), 32, 64) if i["soffset"] is not None else str(i["soffset_k"] & M32)
    vgpr = lambda k: f.conv(f.ld("i32", self.vgpr_ptr(f, i["vaddr"] + k), ("v", i["vaddr"] + k)), 32, 64)
    idx = vgpr(0) if i["idxen"] else "0"
    off = f.op(f"add i64 {vgpr(1 if i['idxen'] else 0) if i['offen'] else '0'}, {i['offset'] & ((1 << 64) - 1)}")
    inside = f.op(f"select i1 {f.op(f'icmp eq i64 {stride}, 0')}, i1 {f.op(f'icmp ult i64 {off}, {nrec}')}, "
                  f"i1 {f.op(f'icmp ult i64 {idx}, {nrec}')}")
    f.emit(f"store i8 {f.op(f'select i1 {inside}, i8 0, i8 3')}, ptr {g.route}")
    a = f.op(f"add i64 {f.op(f'add i64 {base}, {so}')}, {off}")
    return f.op(f"add i64 {a}, {f.op(f'mul i64 {idx}, {stride}')}")

  def buffer_address(self, f: Fn, b, o: Op) -> str:
    """The guest address of a lane's access to bound buffer `b` (binding.Buffer), from the launch's tables
    (runtime.Native.buffers): coord * scale + offset bytes into it; an unbound index, or an access not inside the
    buffer, faults (the interpreter's frontend memop: the same lanes). Only a constant index (one buffer for every
    wave, whose fault the interpreter then reports at the same wave and lane)."""
    base, size = self.buffer_row(f, b)
    v, bits = self.fetch(f, b.coord)
    off = f.op(f"add i64 {f.op(f'mul i64 {f.conv(v, bits, 64)}, {b.scale}')}, {b.offset}")  # (below 2**37)
    bad = f.op(f"icmp sgt i64 {f.op(f'add i64 {off}, {b.nbytes}')}, {size}")
    a = f.op(f"add i64 {base}, {off}")
    self.fault_if(f, bad, F_GLOBAL, a, b.nbytes, "r" not in o.sem.mem)
    return a

  def buffer_row(self, f: Fn, b) -> tuple[str, str]:
    """Bound buffer `b`'s guest address and bytes (-1: unbound, or past the table), read once per wave."""
    kinds = getattr(self.fe, "buffers", ())
    if b.index.file != "k" or b.kind not in kinds:
      raise Unsupported("buffer index")
    tbl, n, idx = f.ctxp(C_RES), f.ctx(C_RESN), b.index.value
    f.n += 1
    r = f"%bf{f.n}"  # the buffer's (address, bytes) row, read once (bytes -1: unbound, or past the table)
    f.pro += [f"  {r}.in = icmp ult i64 {idx}, {n}", f"  {r}.i = select i1 {r}.in, i64 {idx}, i64 0",
              f"  {r}.k = mul i64 {n}, {kinds.index(b.kind)}", f"  {r}.r = add i64 {r}.k, {r}.i",
              f"  {r}.o = mul i64 {r}.r, 2", f"  {r}.p = getelementptr i64, ptr {tbl}, i64 {r}.o",
              f"  {r}.a = load i64, ptr {r}.p, !invariant.load !0", f"  {r}.q = getelementptr i64, ptr {r}.p, i64 1",
              f"  {r}.m = load i64, ptr {r}.q, !invariant.load !0",
              f"  {r}.s = select i1 {r}.in, i64 {r}.m, i64 -1"]
    return f"{r}.a", f"{r}.s"

  def high_check(self, f: Fn, a: str, bits: int) -> None:
    hi = f.op(f"icmp ugt i64 {a}, {(1 << bits) - 1}")
    self.fault_if(f, hi, F_HIGH, a, 4, False)

  def fault_if(self, f: Fn, cond: str, kind: int, addr: str, nbytes: int, write: bool) -> None:
    if f.mode is Mode.FAST:  # the probe found no lane faulting
      return
    if f.mode.probes:
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
        n = self.L // 32 if nm == "EXEC" else 1
        self.store_reg(f, Src("s", self.sp["exec"], n), v, w, o)
      elif nm == "M0":
        self.store_reg(f, Src("s", self.sp["m0"]), v, w, o)
      elif nm == "VDATA" and o.info.get("deliver"):
        self.deliver(f, o, v, w)
      else:
        d = o.outs.get(nm)
        if d is None:
          continue
        if nm == "D0" and (o.info.get("clamp") or o.info.get("omod")) and float_result(d):  # (core.Engine.retire)
          v, w = self.output_modifier(g, o, d, v, w)
        if nm == "D0" and o.info.get("ftz_out", (0,))[0]:
          bits, n, first = o.info["ftz_out"]
          v = self.flush_denormals(f, v, w, bits, n, True, first) if self.ftz else v
        if nm in g.lane0:
          yes, no = f.label("l0"), f.label("n0")
          f.emit(f"br i1 {f.op(f'icmp eq i64 %lane, {f.first}')}, label %{yes}, label %{no}")
          f.put(yes)
          self.store_reg(f, d, v, w, o)
          f.emit(f"br label %{no}")
          f.put(no)
          continue
        self.store_reg(f, d, v, w, o, on)

  def deliver(self, f: Fn, o: Op, v: str, w: int) -> None:
    """amd/memory.deliver for this lane: a load's data (op.info["deliver"] bytes) to LDS at M0 + the instruction
    offset + lane * bytes (32-bit, wrapping as LDS addresses do), dword by dword, checked as the LDS window checks
    them; no VGPR is written. (With the checkers on a block ends before it: checks.Checks.interpreted.)"""
    nb = o.info["deliver"]
    m0 = f.ld("i32", self.sgpr_ptr(f, self.sp["m0"]), ("s", self.sp["m0"]))
    at = f.op(f"add i32 {m0}, {o.info.get('offset', 0) & M32}")
    lane = f.op(f"trunc i64 {f.op(f'mul i64 %lane, {nb}')} to i32")
    a = self.lds_address(f, f.op(f"add i32 {at}, {lane}"), o)
    bits = 8 * nb
    v = f.conv(v, w, bits)
    for k in range(nb // 4):
      p = f.or_fault(f.op(f"call ptr @lds_ptr(ptr %ctx, i64 {f.op(f'add i64 {a}, {4 * k}')}, i64 4, i64 1, i64 %w, "
                          "ptr null)"))
      f.st("i32", f.conv(f.op(f"lshr i{bits} {v}, {32 * k}") if k else v, bits, 32), p, "lds")

  @staticmethod
  def sdwa_source(f: Fn, v: str, bits: int, sel: int, sext: int) -> tuple[str, int]:
    """An SDWA source select (amd/lanes.sdwa_src): the selected byte or word of the low dword, zero- or
    sign-extended to 32 bits (DWORD: as it is)."""
    if sel == 6:
      return v, bits
    sh, w = sdwa_field(sel)
    x = f.op(f"and i32 {f.op(f'lshr i32 {f.conv(v, bits, 32)}, {sh}')}, {(1 << w) - 1}")
    if sext:
      neg = f.op(f"icmp ne i32 {f.op(f'lshr i32 {x}, {w - 1}')}, 0")
      x = f.op(f"select i1 {neg}, i32 {f.op(f'or i32 {x}, {M32 ^ ((1 << w) - 1)}')}, i32 {x}")
    return x, 32

  @staticmethod
  def sdwa_dest(f: Fn, new: str, old: str, sel: int, unused: int) -> str:
    """An SDWA destination select (amd/lanes.sdwa_dst): the result in the selected bits, the rest zero
    (UNUSED_PAD), the result's sign (UNUSED_SEXT) or kept (UNUSED_PRESERVE)."""
    sh, w = sdwa_field(sel)
    mask = ((1 << w) - 1) << sh
    val = f.op(f"and i32 {f.op(f'shl i32 {new}, {sh}')}, {mask}")
    if unused == 2:
      return f.op(f"or i32 {f.op(f'and i32 {old}, {M32 ^ mask}')}, {val}")
    if unused == 1:
      neg = f.op(f"trunc i32 {f.op(f'lshr i32 {new}, {w - 1}')} to i1")
      ext = M32 ^ ((1 << (sh + w)) - 1)
      return f.op(f"or i32 {val}, {f.op(f'select i1 {neg}, i32 {ext}, i32 0')}")
    return val

  @staticmethod
  def output_modifier(g: Gen, o: Op, d: Src, v: str, w: int) -> tuple[str, int]:
    """VOP3 omod, then clamp, on a float D0 of `w` bits, as amd/lanes.outmod computes them (its factor table):
    x * factor by x86's NaN rule (a NaN quieted), then below 0 -> 0 and above 1 -> 1 by numpy's clip (-0.0 stays),
    NaN -> 0. Returns the value and its width."""
    b = d.bits
    if not plan.outmod_float(d):  # (plan.supported declines these)
      raise Unsupported("output modifier")
    f, t = g.f, Ty("f", b)
    lt = lty(t)
    x = f.op(f"bitcast i{b} {f.conv(v, w, b)} to {lt}")
    if o.info.get("omod"):
      x = g.nan_rule(t, [x], f.op(f"fmul {lt} {x}, {fconst(OMOD[o.info['omod']], b)}"))
    if o.info.get("clamp"):
      lo = f.op(f"select i1 {f.op(f'fcmp olt {lt} {x}, 0.0')}, {lt} 0.0, {lt} {x}")
      hi = f.op(f"select i1 {f.op(f'fcmp ogt {lt} {lo}, 1.0')}, {lt} 1.0, {lt} {lo}")
      x = f.op(f"select i1 {f.op(f'fcmp uno {lt} {x}, {x}')}, {lt} 0.0, {lt} {hi}")
    return f.op(f"bitcast {lt} {x} to i{b}"), b

  @staticmethod
  def flush_denormals(f: Fn, v: str, w: int, bits: int, n: int, result: bool, first: int = 0) -> str:
    """amd/lanes.flush_denormals on an i{w} value: its n low `bits`-bit float elements (from `first` on), a denormal
    one turned into
    the zero of its sign unless wave %w's MODE bit for it (decode.denorm_bit) is set. MODE is read from the hardware
    registers (an S_DENORM_MODE or S_SETREG earlier in the block wrote it there: those stores carry no TBAA tag, so
    this tagged load moves out of a lane loop only past stores to other files)."""
    mode = f.ld("i32", Compiler.srow(f, MODE, C_HW), ("hw", MODE))
    keep = f.op(f"icmp ne i32 {f.op(f'and i32 {mode}, {1 << denorm_bit(bits, result)}')}, 0")
    expo, man = FLOAT_FIELDS[bits]
    t = max(w, bits * n)  # (an SDWA-selected word of an f64 operand: 32 bits, zero-extended)
    v = f.conv(v, w, t)
    for k in range(first, n):  # a zero exponent: clear the mantissa (a zero's is clear already); kept: clear nothing
      sh = bits * k
      clear = f.op(f"select i1 {keep}, i{t} 0, i{t} {man << sh}")
      z = f.op(f"icmp eq i{t} {f.op(f'and i{t} {v}, {expo << sh}')}, 0")
      cleared = f.op(f"and i{t} {v}, {f.op(f'xor i{t} {clear}, -1')}")
      v = f.op(f"select i1 {z}, i{t} {cleared}, i{t} {v}")
    return f.conv(v, t, w)

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
        ptr = self.sgpr_ptr(f, idx)
        if d.fmt == "half":  # a half register (ir3's shared hr48.x..): its half of the row, the other kept
          old = f.ld("i32", ptr, ("s", idx))
          part = f.op(f"or i32 {f.op(f'and i32 {old}, 65535')}, {f.op(f'shl i32 {part}, 16')}") if d.hi else \
              f.op(f"or i32 {f.op(f'and i32 {old}, 4294901760')}, {f.op(f'and i32 {part}, 65535')}")
        f.st("i32", part, ptr, ("s", idx))
      elif d.file in ("v", "a"):
        ptr, tag = self.vgpr_ptr(f, d.index + k, d.file), (d.file, d.index + k)
        self.wrote[d.file] = self.wrote.get(d.file, 0) | 1 << (d.index + k)
        sd = o.info.get("sdwa")
        sd = sd if sd is not None and sd[4] != 6 else None  # (SDWA: a dst_sel other than DWORD)
        old = f.ld("i32", ptr, tag) if on is not None or (d.bits == 16 and d.dwords == 1) or sd else None
        if d.bits == 16 and d.dwords == 1:
          part = f.op(f"and i32 {part}, 65535")
          if self.fam != "cdna":
            if d.hi:
              part = f.op(f"or i32 {f.op(f'and i32 {old}, 65535')}, {f.op(f'shl i32 {part}, 16')}")
            else:
              part = f.op(f"or i32 {f.op(f'and i32 {old}, 4294901760')}, {part}")
        if sd is not None:  # (core.Engine._store_parts: Frontend.select_output)
          part = self.sdwa_dest(f, part, old, sd[4], sd[5])
        if on is not None:
          part = self.keep(f, on, part, old, 32)
        f.st("i32", part, ptr, tag)
      else:
        raise Unsupported("store file")
