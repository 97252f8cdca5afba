"""Direct backend: kernel IR -> AMD assembly text -> gputwin.isa.codeobj.assemble_code_object -> code object.

Deliberately simple and obviously correct rather than fast:
  - every IR value lives in VGPRs (bool as 0/1); kernel arguments are loaded with SMEM at entry, global pointers
    stay in SGPR pairs and are used as `saddr` with a 32-bit VGPR byte offset, LDS arrays are constant offsets
  - control flow is always treated as divergent: `if` -> s_and_saveexec / else mask / restore; `for` -> a loop
    whose header masks off finished lanes and leaves when EXEC is zero; regions containing a barrier are never
    skipped (every wave must reach the barrier)
  - register allocation: linear scan over the linearised program; a value used inside a loop but defined before
    it stays live to the loop's end; loop results share their iter-arg registers; no spilling: too many live
    values is a CompileError at the Python line that needed one more register
  - wait counters: a scoreboard of outstanding VMEM/LDS results (per counter, in issue order) inserts the
    smallest s_waitcnt (RDNA4: s_wait_loadcnt/dscnt...) before the first instruction touching a pending register;
    at labels, branches and barriers every counter drains to zero
Targets: gfx1100 (wave32), gfx1200 (wave32), gfx942/gfx950 (wave64). Types: i32, u32, f32, bool, and vectors of
32-bit elements from the vectoriser; anything else is a CompileError suggesting the LLVM backend.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gputwin.compiler import ir
from gputwin.compiler.ir import Block, Kernel, Op, Type, Value
from gputwin.errors import CompileError

SCRATCH = 8          # v1..v8: instruction-local temporaries, never live across IR ops
HIDDEN = ("hidden_block_count_x", "hidden_block_count_y", "hidden_block_count_z", "hidden_group_size_x",
          "hidden_group_size_y", "hidden_group_size_z")


@dataclass
class Fam:
  """What differs between the AMD targets, as data."""
  arch: str
  major: int
  wave: int

  @property
  def rdna(self) -> bool: return self.major >= 10
  @property
  def exec(self) -> str: return "exec_lo" if self.wave == 32 else "exec"
  @property
  def vcc(self) -> str: return "vcc_lo" if self.wave == 32 else "vcc"
  @property
  def sb(self) -> str: return "b32" if self.wave == 32 else "b64"

  def mask(self, s: int) -> str: return f"s{s}" if self.wave == 32 else f"s[{s}:{s + 1}]"

  def add(self) -> str: return "v_add_nc_u32" if self.rdna else "v_add_u32"

  def carry(self, op: str) -> tuple[str, str]:
    """(low, high) halves of a 64-bit add/sub through VCC."""
    if self.rdna: return f"v_{op}_co_u32", f"v_{op}_co_ci_u32_e32"
    return f"v_{op}_co_u32_e32", "v_addc_co_u32_e32" if op == "add" else "v_subb_co_u32_e32"
  def sub(self) -> str: return "v_sub_nc_u32" if self.rdna else "v_sub_u32"

  def gmem(self, kind: str, dw: int, t: Type | None = None) -> str:
    if t is not None and t.bits < 32:   # sub-dword: loads sign/zero-extend to 32 bits
      if self.rdna: return f"global_{kind}_" + (f"b{t.bits}" if kind == "store" else f"{t.kind}{t.bits}")
      return f"global_{kind}_" + ({8: "byte", 16: "short"}[t.bits] if kind == "store" else
                                  f"{'s' if t.is_signed else 'u'}{ {8: 'byte', 16: 'short'}[t.bits]}")
    if self.rdna: return f"global_{kind}_b{32 * dw}"
    return f"global_{kind}_dword" + ("" if dw == 1 else f"x{dw}")

  def lds(self, kind: str, dw: int, t: Type | None = None) -> str:
    verb = kind if self.rdna else {"load": "read", "store": "write"}[kind]
    if t is not None and t.bits < 32: return f"ds_{verb}_" + (f"b{t.bits}" if kind == "store" else f"{t.kind}{t.bits}")
    return f"ds_{verb}_b{32 * dw}"

  def smem(self, dw: int) -> str: return f"s_load_b{32 * dw}" if self.rdna else \
    "s_load_dword" + ("" if dw == 1 else f"x{dw}")

  def atomic_rtn(self) -> str: return "glc" if self.major == 11 else "th:TH_ATOMIC_RETURN" if self.major >= 12 \
    else "sc0"

  def gatomic(self, kind: str, t: Type) -> str:
    if self.rdna:
      sfx = {"add": "add_f32" if t.is_float else "add_u32", "sub": "sub_u32", "and": "and_b32", "or": "or_b32",
             "xor": "xor_b32", "xchg": "swap_b32", "min": f"min_{'i' if t.is_signed else 'u'}32",
             "max": f"max_{'i' if t.is_signed else 'u'}32"}[kind]
    else:
      sfx = {"add": "add_f32" if t.is_float else "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
             "xchg": "swap", "min": f"{'s' if t.is_signed else 'u'}min",
             "max": f"{'s' if t.is_signed else 'u'}max"}[kind]
    return f"global_atomic_{sfx}"

  def latomic(self, kind: str, t: Type) -> str:
    return "ds_" + {"add": "add_rtn_f32" if t.is_float else "add_rtn_u32", "sub": "sub_rtn_u32",
                    "and": "and_rtn_b32", "or": "or_rtn_b32", "xor": "xor_rtn_b32", "xchg": "wrxchg_rtn_b32",
                    "min": f"min_rtn_{'i' if t.is_signed else 'u'}32",
                    "max": f"max_rtn_{'i' if t.is_signed else 'u'}32"}[kind]

  # counters: vm (loads, returning atomics), vs (stores), lgkm (LDS); names per generation
  def counter(self, kind: str) -> str:
    if kind == "store": return "vs" if self.major in (10, 11) else "st" if self.major >= 12 else "vm"
    return {"load": "vm", "lds": "lgkm"}[kind]

  def wait(self, c: str, n: int) -> str:
    if self.major >= 12: return {"vm": "s_wait_loadcnt", "st": "s_wait_storecnt", "lgkm": "s_wait_dscnt"}[c] + f" {n}"
    if c == "vs": return f"s_waitcnt_vscnt null, {n}"
    return f"s_waitcnt {'vmcnt' if c == 'vm' else 'lgkmcnt'}({n})"

  def wait_smem(self) -> str: return "s_wait_kmcnt 0" if self.major >= 12 else "s_waitcnt lgkmcnt(0)"

  def barrier(self) -> list[str]:
    return ["s_barrier_signal -1", "s_barrier_wait -1"] if self.major >= 12 else ["s_barrier"]


def _fam(arch: str) -> Fam:
  from gputwin.isa.targets import target
  t = target(arch)
  return Fam(arch, t.major, t.wave)


@dataclass(frozen=True)
class _Reg:
  """A scratch VGPR standing in for a value (e.g. the f16 bits of a stored value)."""
  n: int


def _half(t: Type) -> bool: return not t.is_vec and t.kind in ("f", "bf") and t.bits == 16


def _small(t: Type) -> bool: return t.is_int and t.bits < 32


def _dwords(t: Type) -> int:
  return 0 if t.is_ptr else t.lanes * (2 if t.scalar.bits == 64 else 1)


def _wide(t: Type) -> bool: return t.is_int and t.bits == 64


def _check_type(t: Type, op: Op | None, arch: str):
  s = t.scalar
  ok = t.is_ptr or (str(s) in ("i32", "u32", "f32", "bool") and (t.lanes == 1 or t.lanes in (2, 4) and s.bits == 32)) \
    or (s.is_int and s.bits in (8, 16) and t.lanes == 1) \
    or (str(s) in ("f16", "bf16") and t.lanes == 1) \
    or (s.bits == 64 and not s.is_ptr and t.lanes == 1)  # narrow types widen to a VGPR (normalize); 64-bit: pairs
  if not ok:
    raise CompileError(f"the direct backend does not handle {t} yet; use --backend llvm", loc=op.loc if op else None,
                       arch=arch)


# ---------------------------------------------------------------------------------------------------------------
# register allocation

@dataclass(eq=False)
class VReg:
  size: int
  start: int
  end: int
  op: Op | None = None
  reg: int = -1


@dataclass
class _Live:
  """Linearised positions, intervals and loop extents for one kernel."""
  vregs: dict[int, VReg] = field(default_factory=dict)
  pos: int = 0


def allocate(k: Kernel, arch: str, max_vgprs: int) -> tuple[dict[int, VReg], int]:
  """Give every non-pointer value a VGPR range. Returns (value id -> VReg, VGPRs used)."""
  L = _Live()
  defs: dict[int, int] = {}

  def vreg(v: Value, start: int, op: Op | None) -> VReg:
    _check_type(v.type, op, arch)
    r = L.vregs[id(v)] = VReg(_dwords(v.type), start, start, op)
    defs[id(v)] = start
    return r

  def use(v: Value, at: int, loops: list[tuple[int, list]]):
    r = L.vregs.get(id(v))
    if r is None: return
    r.end = max(r.end, at)
    for start, ends in loops:
      if defs[id(v)] < start: ends.append(r)   # live around the whole loop: extended when the loop's end is known

  def block(b: Block, loops):
    for op in b.ops:
      L.pos += 1
      here = L.pos
      for v in op.operands: use(v, here, loops)
      if op.opcode == "if":
        res = [vreg(r, here, op) for r in op.results]
        for reg in op.regions: block(reg, loops)
        L.pos += 1
        for r in res: r.end = max(r.end, L.pos)
      elif op.opcode == "for":
        body = op.regions[0]
        ext: list[VReg] = []
        iters = [vreg(a, here, op) for a in body.args]
        block(body, loops + [(here, ext)])
        L.pos += 1
        bounds = [L.vregs[id(v)] for v in op.operands[:3]]   # re-read by the loop header every iteration
        for r in iters + ext + bounds: r.end = max(r.end, L.pos)
        for res, it in zip(op.results, iters[1:]):
          L.vregs[id(res)] = it
          defs[id(res)] = here
      else:
        for r in op.results:
          if not r.type.is_ptr: vreg(r, here, op)
  for p in k.params:
    if not p.type.is_ptr: vreg(p, 0, None)
  block(k.body, [])

  # linear scan, first fit with alignment for multi-dword values
  base = 1 + SCRATCH
  busy: list[VReg] = []
  free = [True] * max_vgprs
  for i in range(base): free[i] = False
  used = base
  for r in sorted(set(L.vregs.values()), key=lambda r: (r.start, -r.size)):
    for o in [o for o in busy if o.end < r.start]:
      busy.remove(o)
      for i in range(o.reg, o.reg + o.size): free[i] = True
    align = 2 if r.size > 1 else 1
    at = next((i for i in range(-(-base // align) * align, max_vgprs - r.size + 1, align) if all(free[i:i + r.size])),
              None)
    if at is None:
      where = r.op.loc if r.op is not None else None
      raise CompileError(f"register pressure: kernel @{k.name} needs more than {max_vgprs} VGPRs here "
                         f"({len(busy)} values live; the direct backend does not spill)", loc=where, arch=arch)
    r.reg = at
    for i in range(at, at + r.size): free[i] = False
    busy.append(r)
    used = max(used, at + r.size)
  return L.vregs, used


# ---------------------------------------------------------------------------------------------------------------
# emission

class _Emitter:
  def __init__(self, k: Kernel, fam: Fam, max_vgprs: int):
    self.k, self.f = k, fam
    self.regs, self.nvgpr = allocate(k, fam.arch, max_vgprs)
    self.out: list[str] = []
    self.pending: dict[str, list[set[int]]] = {"vm": [], "vs": [], "st": [], "lgkm": []}
    self.labels = 0
    self.sptr: dict[int, int] = {}     # global pointer param -> first SGPR of its pair
    self.lds: dict[int, int] = {}      # local pointer value -> byte offset in LDS
    self.lds_size = 0
    self.depth_sgpr = 0                # first free SGPR for EXEC save slots
    self.max_sgpr = 0
    self.hidden = 0                    # first SGPR holding the hidden-argument dwords
    self.kernarg_size = 0
    self.arg_meta: list[dict] = []

  # -- helpers -----------------------------------------------------------------------------------------------------
  def r(self, v: Value, lane: int | None = None) -> str:
    if isinstance(v, _Reg): return f"v{v.n}"
    vr = self.regs[id(v)]
    if lane is not None: return f"v{vr.reg + lane}"
    return f"v{vr.reg}" if vr.size == 1 else f"v[{vr.reg}:{vr.reg + vr.size - 1}]"

  def rset(self, v: Value) -> set[int]:
    if isinstance(v, _Reg): return {v.n}
    vr = self.regs.get(id(v))
    return set(range(vr.reg, vr.reg + vr.size)) if vr else set()

  def i(self, text: str, reads: set[int] = frozenset(), writes: set[int] = frozenset(), counter: str | None = None):
    touched = set(reads) | set(writes)
    for c, q in self.pending.items():
      last = max((j for j, s in enumerate(q) if s & touched), default=None)
      if last is not None:
        self.out.append(self.f.wait(c, len(q) - last - 1))
        del q[:last + 1]
    if counter:
      counter = self.f.counter(counter)
      q = self.pending[counter]
      if len(q) >= 30:
        self.out.append(self.f.wait(counter, 15)); del q[:len(q) - 15]
      q.append(set(writes))
    self.out.append(text)

  def drain(self):
    for c, q in self.pending.items():
      if q: self.out.append(self.f.wait(c, 0)); q.clear()

  def label(self, hint: str) -> str:
    self.labels += 1
    return f".L{hint}_{self.labels}"

  def place(self, lab: str):
    self.drain()
    self.out.append(f"{lab}:")

  def branch(self, text: str):
    self.drain()
    self.out.append(text)

  def slot(self) -> int:
    s = self.depth_sgpr
    self.depth_sgpr += 2
    if self.depth_sgpr > 100: raise CompileError("control flow nested too deeply for the direct backend",
                                                 arch=self.f.arch)
    self.max_sgpr = max(self.max_sgpr, self.depth_sgpr)
    return s

  # -- kernel ------------------------------------------------------------------------------------------------------
  def kernel(self) -> str:
    f = self.f
    # kernarg layout as clang's: by_value/global_buffer args in order, naturally aligned, hidden args after
    off, s, loads = 0, 8, []
    for p in self.k.params:
      size = 8 if p.type.is_ptr else 4
      off = -(-off // size) * size
      if size == 8 and s % 2: s += 1
      loads.append((p, off, s, size))
      meta = {".name": p.name, ".offset": off, ".size": size,
              ".value_kind": "global_buffer" if p.type.is_ptr else "by_value"}
      if p.type.is_ptr: meta[".address_space"] = "global"
      self.arg_meta.append(meta)
      off += size
      s += size // 4
    hid = -(-off // 8) * 8
    for j, name in enumerate(HIDDEN):
      self.arg_meta.append({".offset": hid + (4 * j if j < 3 else 12 + 2 * (j - 3)), ".size": 4 if j < 3 else 2,
                            ".value_kind": name})
    self.kernarg_size = hid + 256
    self.hidden = s
    s += 5
    self.depth_sgpr = -(-s // 2) * 2
    self.max_sgpr = self.depth_sgpr
    for p, o, sreg, size in loads:
      dst = f"s[{sreg}:{sreg + 1}]" if size == 8 else f"s{sreg}"
      self.out.append(f"{f.smem(size // 4)} {dst}, s[0:1], {o:#x}")
      if p.type.is_ptr: self.sptr[id(p)] = sreg
    if self.uses_hidden():
      for j in range(5): self.out.append(f"{f.smem(1)} s{self.hidden + j}, s[0:1], {hid + 4 * j:#x}")
    self.out.append(f.wait_smem())
    for p, o, sreg, size in loads:
      if not p.type.is_ptr and id(p) in self.regs: self.i(f"v_mov_b32 {self.r(p)}, s{sreg}", writes=self.rset(p))
    self.region(self.k.body)
    self.out.append("s_endpgm")
    return "\n".join(self.out)

  def uses_hidden(self) -> bool:
    return any(op.opcode.startswith(("workgroup.size", "num_workgroups")) for op in self.k.walk())

  def region(self, b: Block) -> list[Value]:
    for op in b.ops:
      if op.opcode == "yield": return op.operands
      try:
        self.op(op)
      except CompileError as e:
        if e.loc is None and op.loc: raise CompileError(e.msg, loc=op.loc, arch=self.f.arch) from None
        raise
    return []

  def mov(self, dst: Value | int, src: Value, lanes: int = 1):
    d = self.regs[id(dst)].reg if isinstance(dst, Value) else dst
    sr = self.regs[id(src)].reg
    for j in range(lanes):
      if d + j != sr + j: self.i(f"v_mov_b32 v{d + j}, v{sr + j}", {sr + j}, {d + j})

  def cmp_to_vcc(self, v: Value):
    self.i(f"v_cmp_ne_u32_e32 {self.f.vcc}, 0, {self.r(v)}", self.rset(v))

  def bool_from_vcc(self, d: Value):
    self.i(f"v_cndmask_b32_e64 {self.r(d)}, 0, 1, {self.f.vcc}", writes=self.rset(d))

  # -- ops ---------------------------------------------------------------------------------------------------------
  def op(self, op: Op):
    f, code, cls = self.f, op.opcode, ir.op_class(op)
    a = op.operands
    res = op.results[0] if op.results else None
    if res is not None and not res.type.is_ptr: _check_type(res.type, op, f.arch)
    for v in a: _check_type(v.type, op, f.arch)
    rd = set().union(*(self.rset(v) for v in a)) if a else set()
    wr = self.rset(res) if res is not None and code not in ("if", "for") else set()
    R = lambda v: self.r(v)
    if cls == "const":
      val = op.attrs["value"]
      if res.type.is_float:
        import struct
        bits = struct.unpack("<Q", struct.pack("<d", val))[0] if res.type.bits == 64 else \
          struct.unpack("<I", struct.pack("<f", val))[0]
      else:
        bits = int(val) & 0xffffffffffffffff
      self.i(f"v_mov_b32 {self.r(res, 0)}, {bits & 0xffffffff:#x}", writes=wr)
      if _dwords(res.type) == 2: self.i(f"v_mov_b32 {self.r(res, 1)}, {bits >> 32:#x}", writes=wr)
    elif cls == "id": self.ids(code, res)
    elif cls == "binary": self.binary(code, res, a[0], a[1])
    elif cls == "cmp":
      t = a[0].type
      sfx = f"f{t.bits if t.bits == 64 else 32}" if t.is_float else \
        f"{'i' if t.is_signed else 'u'}{64 if _wide(t) else 32}"
      name = {"eq": "eq", "ne": "neq" if t.is_float else "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}[code]
      if t.is_bool: sfx = "u32"
      self.i(f"v_cmp_{name}_{sfx}_e32 {f.vcc}, {R(a[0])}, {R(a[1])}", rd)
      self.bool_from_vcc(res)
    elif cls == "unary" and res.type.is_float and res.type.bits == 64:
      if code == "neg": self.i(f"v_xor_b32 {self.r(res, 1)}, 0x80000000, {self.r(a[0], 1)}", rd, wr)
      else: self.i(f"v_and_b32 {self.r(res, 1)}, 0x7fffffff, {self.r(a[0], 1)}", rd, wr)
      self.i(f"v_mov_b32 {self.r(res, 0)}, {self.r(a[0], 0)}", rd, wr)
    elif cls == "unary" and _wide(res.type):
      lo, hi = self.r(res, 0), self.r(res, 1)
      if code == "not":
        for j in (0, 1): self.i(f"v_not_b32 {self.r(res, j)}, {self.r(a[0], j)}", rd, wr)
      else:   # neg, and abs = neg where negative
        c0, c1 = f.carry("sub")
        self.i(f"{c0} {lo}, {f.vcc}, 0, {self.r(a[0], 0)}", rd, wr)
        self.i(f"{c1} {hi}, {f.vcc}, 0, {self.r(a[0], 1)}, {f.vcc}", rd, wr)
        if code == "abs" and res.type.is_signed:
          self.i(f"v_cmp_gt_i32_e32 {f.vcc}, 0, {self.r(a[0], 1)}", rd)
          for j in (0, 1):
            self.i(f"v_cndmask_b32_e32 {self.r(res, j)}, {self.r(a[0], j)}, {self.r(res, j)}, {f.vcc}", rd | wr, wr)
        elif code == "abs": self.mov(res, a[0], 2)
    elif cls == "unary":
      t = res.type
      if code == "not": self.i(f"v_xor_b32 {R(res)}, 1, {R(a[0])}" if t.is_bool else f"v_not_b32 {R(res)}, {R(a[0])}",
                               rd, wr)
      elif code == "neg": self.i(f"v_xor_b32 {R(res)}, 0x80000000, {R(a[0])}" if t.is_float else
                                 f"{f.sub()} {R(res)}, 0, {R(a[0])}", rd, wr)
      elif t.is_float: self.i(f"v_and_b32 {R(res)}, 0x7fffffff, {R(a[0])}", rd, wr)
      elif t.is_signed:
        self.i(f"{f.sub()} v1, 0, {R(a[0])}", rd, {1})
        self.i(f"v_max_i32 {R(res)}, v1, {R(a[0])}", rd | {1}, wr)
      else: self.mov(res, a[0])
    elif cls == "math": self.math(code, res, a[0])
    elif cls == "fma":
      if _half(res.type):
        raise CompileError(f"{res.type} fma is not supported by the direct backend (an f32 fma rounded again may "
                           "round twice); use --backend llvm", loc=op.loc, arch=f.arch)
      self.i(f"v_fma_f{64 if res.type.bits == 64 else 32} {R(res)}, {R(a[0])}, {R(a[1])}, {R(a[2])}", rd, wr)
    elif cls == "select":
      self.cmp_to_vcc(a[0])
      for j in range(_dwords(res.type)):
        self.i(f"v_cndmask_b32_e32 {self.r(res, j)}, {self.r(a[2], j)}, {self.r(a[1], j)}, {f.vcc}", rd, wr)
    elif code == "bitcast" and _half(a[0].type) != _half(res.type):   # 16-bit float bits <-> 16-bit integer
      if res.type == ir.f16: self.i(f"v_cvt_f32_f16 {R(res)}, {R(a[0])}", rd, wr)
      elif res.type == ir.bf16: self.i(f"v_lshlrev_b32 {R(res)}, 16, {R(a[0])}", rd, wr)
      else:
        self.i(f"v_cvt_f16_f32 {R(res)}, {R(a[0])}" if a[0].type == ir.f16 else
               f"v_lshrrev_b32 {R(res)}, 16, {R(a[0])}", rd, wr)
        self.normalize(res)
    elif code == "bitcast" and _half(a[0].type) and _half(res.type):
      raise CompileError("bitcast between f16 and bf16 is not supported by the direct backend", loc=op.loc,
                         arch=f.arch)
    elif code == "bitcast": self.mov(res, a[0], _dwords(res.type))
    elif code == "cast": self.cast(res, a[0])
    elif cls == "vector":
      for j, v in enumerate(a): self.mov(self.regs[id(res)].reg + j, v)
    elif cls == "extract":
      src = self.regs[id(a[0])].reg + op.attrs["lane"]
      self.i(f"v_mov_b32 {R(res)}, v{src}", {src}, wr)
    elif cls == "alloc":
      if code == "alloca":
        raise CompileError("private arrays are not supported by the direct backend yet; use --backend llvm",
                           loc=op.loc, arch=f.arch)
      size = op.attrs["count"] * res.type.elem.nbytes
      self.lds[id(res)] = self.lds_size
      self.lds_size += -(-size // 16) * 16
      from gputwin.compiler.limits import lds_bytes
      if self.lds_size > lds_bytes(f.arch):
        raise CompileError(f"shared memory {self.lds_size} bytes exceeds {lds_bytes(f.arch)}", loc=op.loc, arch=f.arch)
    elif cls in ("load", "store", "atomic"): self.memory(op)
    elif cls == "barrier":
      self.drain()
      self.out.extend(f.barrier())
    elif code == "if": self.if_(op)
    elif code == "for": self.for_(op)
    else: raise CompileError(f"the direct backend cannot lower {code}", loc=op.loc, arch=f.arch)
    if res is not None and cls in ("binary", "unary", "cast", "math") and (_small(res.type) or _half(res.type)):
      if code != "bitcast": self.normalize(res)

  def normalize(self, v: Value):
    """8/16-bit integers live sign- or zero-extended in 32 bits: re-extend after every op that may overflow.
    f16 lives as the f32 of the same value: round through f16 after every op (f32 has 2*11+2 bits, so +-*/ and
    sqrt computed in f32 then rounded equal the f16 operation)."""
    t, R, w = v.type, self.r(v), self.rset(v)
    if t == ir.f16:
      self.i(f"v_cvt_f16_f32 {R}, {R}", w, w)
      self.i(f"v_cvt_f32_f16 {R}, {R}", w, w)
    elif t == ir.bf16:   # round to nearest even on the top 16 bits; a quiet NaN stays a quiet NaN
      self.i(f"v_bfe_u32 v1, {R}, 16, 1", w, {1})
      self.i(f"{self.f.add()} v1, 0x7fff, v1", {1}, {1})
      self.i(f"{self.f.add()} {R}, {R}, v1", w | {1}, w)
      self.i(f"v_and_b32 {R}, 0xffff0000, {R}", w, w)
    elif t.is_signed: self.i(f"v_bfe_i32 {R}, {R}, 0, {t.bits}", w, w)
    else: self.i(f"v_and_b32 {R}, {(1 << t.bits) - 1:#x}, {R}", w, w)

  def ids(self, code: str, res: Value):
    kind, d = code.rsplit(".", 1)
    i = "xyz".index(d)
    R = self.r(res)
    w = self.rset(res)
    if kind == "workitem.id": self.i(f"v_bfe_u32 {R}, v0, {10 * i}, 10", writes=w)
    elif kind == "workgroup.id": self.i(f"v_mov_b32 {R}, s{2 + i}", writes=w)
    elif kind == "num_workgroups": self.i(f"v_mov_b32 {R}, s{self.hidden + i}", writes=w)
    else:  # group sizes: u16 halves of the dwords at hidden+12 (x, y) and hidden+16 (z)
      s = self.hidden + 3 + (i // 2)
      self.i(f"v_mov_b32 {R}, s{s}", writes=w)
      self.i(f"v_bfe_u32 {R}, {R}, {16 * (i % 2)}, 16", w, w)

  def binary(self, code: str, res: Value, x: Value, y: Value):
    f, t = self.f, res.type
    R, X, Y = self.r(res), self.r(x), self.r(y)
    rd, wr = self.rset(x) | self.rset(y), self.rset(res)
    if t.is_vec: raise CompileError(f"the direct backend has no vector {code}; use --backend llvm")
    if _wide(t): return self.binary64(code, res, x, y)
    if t.is_float and t.bits == 64: return self.double(code, res, x, y)
    if t.is_float:
      if code in ("min", "max") and f.major >= 12: return self.i(f"v_{code}_num_f32 {R}, {X}, {Y}", rd, wr)
      if code in ("add", "sub", "mul", "min", "max"): return self.i(f"v_{code}_f32 {R}, {X}, {Y}", rd, wr)
      if code == "div":  # reciprocal, then one Newton step on the quotient: <= 2 ulp for normal ranges
        self.i(f"v_rcp_f32 v1, {Y}", rd, {1})
        self.i(f"v_mul_f32 v2, {X}, v1", rd | {1}, {2})
        self.i(f"v_fma_f32 v3, -{Y}, v2, {X}", rd | {2}, {3})
        return self.i(f"v_fma_f32 {R}, v3, v1, v2", {1, 2, 3}, wr)
      raise CompileError(f"float {code} is not supported by the direct backend; use --backend llvm")
    if code in ("and", "or", "xor"): return self.i(f"v_{code}_b32 {R}, {X}, {Y}", rd, wr)
    if code == "add": return self.i(f"{f.add()} {R}, {X}, {Y}", rd, wr)
    if code == "sub": return self.i(f"{f.sub()} {R}, {X}, {Y}", rd, wr)
    if code == "mul": return self.i(f"v_mul_lo_u32 {R}, {X}, {Y}", rd, wr)
    if code in ("min", "max"): return self.i(f"v_{code}_{'i' if t.is_signed else 'u'}32 {R}, {X}, {Y}", rd, wr)
    if code in ("shl", "shr") and t.bits < 32:   # the IR takes shift amounts modulo the type's width
      self.i(f"v_and_b32 v2, {t.bits - 1}, {Y}", rd, {2})
      Y, rd = "v2", rd | {2}
    if code == "shl": return self.i(f"v_lshlrev_b32 {R}, {Y}, {X}", rd, wr)
    if code == "shr": return self.i(f"v_{'ashrrev_i32' if t.is_signed else 'lshrrev_b32'} {R}, {Y}, {X}", rd, wr)
    if code in ("div", "rem"): return self.divmod(code, res, x, y)
    raise CompileError(f"the direct backend cannot lower {code} on {t}")

  def double(self, code: str, res: Value, x: Value, y: Value):
    """f64 in VGPR pairs. Division: v_rcp_f64 refined by two Newton steps, then one on the quotient."""
    f = self.f
    R, X, Y = self.r(res), self.r(x), self.r(y)
    rd, wr = self.rset(x) | self.rset(y), self.rset(res)
    if code in ("add", "mul"): return self.i(f"v_{code}_f64 {R}, {X}, {Y}", rd, wr)
    if code == "sub": return self.i(f"v_add_f64 {R}, {X}, -{Y}", rd, wr)
    if code in ("min", "max"): return self.i(f"v_{code}{'_num' if f.major >= 12 else ''}_f64 {R}, {X}, {Y}", rd, wr)
    if code == "div":
      t = set(range(2, 8))
      for line in ("v_rcp_f64 v[2:3], {Y}", "v_fma_f64 v[4:5], -{Y}, v[2:3], 1.0",
                   "v_fma_f64 v[2:3], v[2:3], v[4:5], v[2:3]", "v_fma_f64 v[4:5], -{Y}, v[2:3], 1.0",
                   "v_fma_f64 v[2:3], v[2:3], v[4:5], v[2:3]",
                   "v_mul_f64 v[6:7], {X}, v[2:3]", "v_fma_f64 v[4:5], -{Y}, v[6:7], {X}"):
        self.i(line.format(X=X, Y=Y), rd | t, t)
      return self.i(f"v_fma_f64 {R}, v[4:5], v[2:3], v[6:7]", t, wr)
    raise CompileError(f"f64 {code} is not supported by the direct backend; use --backend llvm", arch=f.arch)

  def binary64(self, code: str, res: Value, x: Value, y: Value):
    """64-bit integers as (lo, hi) VGPR pairs: carries through VCC, 64-bit shifts, compares on the pair."""
    f, t = self.f, res.type
    rd, wr = self.rset(x) | self.rset(y), self.rset(res)
    lo = lambda v: self.r(v, 0)
    hi = lambda v: self.r(v, 1)
    if code in ("add", "sub"):
      a, b = f.carry(code)
      self.i(f"{a} {lo(res)}, {f.vcc}, {lo(x)}, {lo(y)}", rd, wr)
      return self.i(f"{b} {hi(res)}, {f.vcc}, {hi(x)}, {hi(y)}, {f.vcc}", rd, wr)
    if code in ("and", "or", "xor"):
      for j in (0, 1): self.i(f"v_{code}_b32 {self.r(res, j)}, {self.r(x, j)}, {self.r(y, j)}", rd, wr)
      return
    if code == "mul":   # lo*lo (64-bit) + (lo*hi + hi*lo) << 32
      self.i(f"v_mul_hi_u32 v1, {lo(x)}, {lo(y)}", rd, {1})
      self.i(f"v_mul_lo_u32 v2, {lo(x)}, {hi(y)}", rd, {2})
      self.i(f"v_mul_lo_u32 v3, {hi(x)}, {lo(y)}", rd, {3})
      self.i(f"{f.add()} v1, v1, v2", {1, 2}, {1})
      self.i(f"v_mul_lo_u32 {lo(res)}, {lo(x)}, {lo(y)}", rd, wr)
      return self.i(f"{f.add()} {hi(res)}, v1, v3", {1, 3}, wr)
    if code in ("shl", "shr"):
      self.i(f"v_and_b32 v1, 63, {lo(y)}", rd, {1})
      name = "v_lshlrev_b64" if code == "shl" else "v_ashrrev_i64" if t.is_signed else "v_lshrrev_b64"
      return self.i(f"{name} {self.r(res)}, v1, {self.r(x)}", rd | {1}, wr)
    if code in ("min", "max"):
      self.i(f"v_cmp_{'lt' if code == 'min' else 'gt'}_{'i' if t.is_signed else 'u'}64_e32 {f.vcc}, {self.r(x)}, "
             f"{self.r(y)}", rd)
      for j in (0, 1): self.i(f"v_cndmask_b32_e32 {self.r(res, j)}, {self.r(y, j)}, {self.r(x, j)}, {f.vcc}", rd, wr)
      return
    raise CompileError(f"64-bit {code} is not supported by the direct backend; use --backend llvm", arch=f.arch)

  def divmod(self, code: str, res: Value, x: Value, y: Value):
    """32-bit integer division: a float reciprocal scaled to 2^32, one Newton step in integers, two corrections.
    Signed operands are divided as magnitudes and the signs restored; x/0 -> 0 and x%0 -> 0 as in the reference."""
    f, vcc = self.f, self.f.vcc
    X, Y = self.r(x), self.r(y)
    rd = self.rset(x) | self.rset(y)
    add, sub = f.add(), f.sub()
    seq = []
    if res.type.is_signed:   # v5 = |x|, v6 = |y|, v7 = sign(x), v8 = sign(x) ^ sign(y)
      seq += [f"v_ashrrev_i32 v7, 31, {X}", f"v_ashrrev_i32 v8, 31, {Y}", f"v_xor_b32 v5, {X}, v7",
              f"{sub} v5, v5, v7", f"v_xor_b32 v6, {Y}, v8", f"{sub} v6, v6, v8", "v_xor_b32 v8, v7, v8"]
      a, b = "v5", "v6"
    else:
      a, b = X, Y
    seq += [f"v_cvt_f32_u32 v1, {b}", "v_rcp_iflag_f32 v1, v1", "v_mul_f32 v1, 0x4f7ffffe, v1",
            "v_cvt_u32_f32 v1, v1", f"{sub} v2, 0, {b}", "v_mul_lo_u32 v2, v2, v1", "v_mul_hi_u32 v2, v1, v2",
            f"{add} v1, v1, v2", f"v_mul_hi_u32 v1, {a}, v1", f"v_mul_lo_u32 v2, v1, {b}", f"{sub} v2, {a}, v2"]
    for _ in range(2):  # q in v1, r in v2
      seq += [f"v_cmp_ge_u32_e32 {vcc}, v2, {b}", f"{add} v3, 1, v1", f"v_cndmask_b32_e32 v1, v1, v3, {vcc}",
              f"{sub} v3, v2, {b}", f"v_cndmask_b32_e32 v2, v2, v3, {vcc}"]
    out = "v1" if code == "div" else "v2"
    if res.type.is_signed:
      sgn = "v8" if code == "div" else "v7"
      seq += [f"v_xor_b32 {out}, {out}, {sgn}", f"{sub} {out}, {out}, {sgn}"]
    seq += [f"v_cmp_ne_u32_e32 {vcc}, 0, {Y}", f"v_cndmask_b32_e32 {self.r(res)}, 0, {out}, {vcc}"]
    for j, s in enumerate(seq):
      self.i(s, rd | set(range(1, 9)), self.rset(res) if j == len(seq) - 1 else set(range(1, 9)))

  def math(self, code: str, res: Value, x: Value):
    R, X = self.r(res), self.r(x)
    rd, wr = self.rset(x), self.rset(res)
    if res.type.bits == 64:
      if code not in ("sqrt", "rsqrt", "floor", "ceil", "trunc"):
        raise CompileError(f"f64 {code} is not supported by the direct backend; use --backend llvm", arch=self.f.arch)
      return self.i(f"v_{'rsq' if code == 'rsqrt' else code}_f64 {R}, {X}", rd, wr)  # hardware: sqrt/rsq ~1 ulp
    simple = {"sqrt": "v_sqrt_f32", "rsqrt": "v_rsq_f32", "exp2": "v_exp_f32", "log2": "v_log_f32",
              "floor": "v_floor_f32", "ceil": "v_ceil_f32", "trunc": "v_trunc_f32"}
    if code in simple: return self.i(f"{simple[code]} {R}, {X}", rd, wr)
    if code == "exp":
      self.i(f"v_mul_f32 v1, 0x3fb8aa3b, {X}", rd, {1})          # log2(e)
      return self.i(f"v_exp_f32 {R}, v1", {1}, wr)
    if code == "log":
      self.i(f"v_log_f32 v1, {X}", rd, {1})
      return self.i(f"v_mul_f32 {R}, 0x3f317218, v1", {1}, wr)   # ln(2)
    if code in ("sin", "cos"):
      self.i(f"v_mul_f32 v1, 0x3e22f983, {X}", rd, {1})          # 1/(2*pi): the hardware takes revolutions
      return self.i(f"v_{code}_f32 {R}, v1", {1}, wr)
    raise CompileError(f"the direct backend cannot lower {code}")

  def cast(self, res: Value, x: Value):
    s, d = x.type.scalar, res.type.scalar
    R, X = self.r(res), self.r(x)
    rd, wr = self.rset(x), self.rset(res)
    if _wide(s) or _wide(d):
      if s.is_float or d.is_float:
        raise CompileError(f"casts between {s} and {d} are not supported by the direct backend; use --backend llvm",
                           arch=self.f.arch)
      if _wide(s) and d.is_bool:
        self.i(f"v_cmp_ne_u64_e32 {self.f.vcc}, 0, {X}", rd)
        return self.bool_from_vcc(res)
      if _wide(s) and _wide(d): return self.mov(res, x, 2)
      if _wide(s): return self.i(f"v_mov_b32 {R}, {self.r(x, 0)}", rd, wr)   # truncate (re-extended if narrow)
      # widen: the 32-bit form is already sign/zero-extended per the source's signedness
      self.i(f"v_mov_b32 {self.r(res, 0)}, {X}", rd, wr)
      return self.i(f"v_ashrrev_i32 {self.r(res, 1)}, 31, {X}" if s.is_signed else f"v_mov_b32 {self.r(res, 1)}, 0",
                    rd, wr)
    if (s.bits == 64) != (d.bits == 64) and (s.is_float or d.is_float) and \
       (_half(s) or _half(d)):   # f64 <-> f16/bf16 through f32 would round twice
      raise CompileError(f"casts between {s} and {d} are not supported by the direct backend; use --backend llvm",
                         arch=self.f.arch)
    fs = "f64" if s.bits == 64 else "f32"
    if d.is_bool:
      self.i(f"v_cmp_{'neq_' + fs if s.is_float else 'ne_u32'}_e32 {self.f.vcc}, 0, {X}", rd)
      return self.bool_from_vcc(res)
    if s.is_float and d.is_float and s.bits != d.bits and 64 in (s.bits, d.bits):
      return self.i(f"v_cvt_f{d.bits if d.bits == 64 else 32}_f{s.bits if s.bits == 64 else 32} {R}, {X}", rd, wr)
    if s.is_float and d.is_int:
      self.i(f"v_cvt_{'i32' if d.is_signed else 'u32'}_{fs} {R}, {X}", rd, wr)
      if d.bits < 32 and d.is_signed:   # saturate to the narrow range, as the reference does
        self.i(f"v_max_i32 {R}, {-(1 << (d.bits - 1))}, {R}", wr, wr)
        self.i(f"v_min_i32 {R}, {(1 << (d.bits - 1)) - 1}, {R}", wr, wr)
      elif d.bits < 32: self.i(f"v_min_u32 {R}, {(1 << d.bits) - 1}, {R}", wr, wr)
      return
    if (s.is_int or s.is_bool) and d.is_float:
      return self.i(f"v_cvt_f{64 if d.bits == 64 else 32}_{'i32' if s.is_signed else 'u32'} {R}, {X}", rd, wr)
    self.mov(res, x, _dwords(res.type))

  def memory(self, op: Op):
    f = self.f
    p, idx = op.operands[0], op.operands[1]
    pt = p.type
    if pt.space == "private":
      raise CompileError("private memory is not supported by the direct backend yet; use --backend llvm",
                         loc=op.loc, arch=f.arch)
    val = op.results[0] if op.opcode == "load" else op.operands[2]
    dw, et = _dwords(val.type), val.type.scalar
    if et.bits == 64 and op.opcode.startswith("atomic"):
      raise CompileError(f"{op.opcode} on {et} is not supported by the direct backend; use --backend llvm",
                         loc=op.loc, arch=f.arch)
    small = et.bits < 32 and not et.is_bool
    half = _half(et)               # moved as u16 bits, converted in registers
    if small and op.opcode.startswith("atomic"):
      raise CompileError(f"{op.opcode} on {et} is not supported by the direct backend; use --backend llvm",
                         loc=op.loc, arch=f.arch)
    st = (ir.u16 if half else et) if small else None
    if half and op.opcode == "store":
      self.i(f"v_cvt_f16_f32 v2, {self.r(val)}" if et == ir.f16 else f"v_lshrrev_b32 v2, 16, {self.r(val)}",
             self.rset(val), {2})
      val = _Reg(2)
    self.i(f"v_lshlrev_b32 v1, {et.nbytes.bit_length() - 1}, {self.r(idx)}", self.rset(idx), {1})
    res = op.results[0] if op.results else None
    wr = self.rset(res) if res is not None else set()
    if pt.space == "global":
      s = self.sptr[id(p)]
      sp = f"s[{s}:{s + 1}]"
      if op.opcode == "load":
        self.i(f"{f.gmem('load', dw, st)} {self.r(res)}, v1, {sp}", {1}, wr, "load")
        if half: self.widen16(res)
      elif op.opcode == "store":
        self.i(f"{f.gmem('store', dw, st)} v1, {self.r(val)}, {sp}", {1} | self.rset(val), counter="store")
      else:
        kind = op.opcode.split(".")[1]
        self.i(f"{f.gatomic(kind, val.type)} {self.r(res)}, v1, {self.r(val)}, {sp} {f.atomic_rtn()}",
               {1} | self.rset(val), wr, "load")
    else:
      off = self.lds[id(p)]
      if off > 0xffff:   # beyond the DS offset field (gfx950 has 160 KiB of LDS): add the base to the address
        self.i(f"{f.add()} v1, {off:#x}, v1", {1}, {1})
        off = 0
      o = f" offset:{off}" if off else ""
      if op.opcode == "load":
        self.i(f"{f.lds('load', dw, st)} {self.r(res)}, v1{o}", {1}, wr, "lds")
        if half: self.widen16(res)
      elif op.opcode == "store": self.i(f"{f.lds('store', dw, st)} v1, {self.r(val)}{o}", {1} | self.rset(val),
                                        counter="lds")
      else:
        kind = op.opcode.split(".")[1]
        self.i(f"{f.latomic(kind, val.type)} {self.r(res)}, v1, {self.r(val)}{o}", {1} | self.rset(val), wr, "lds")

  def widen16(self, v: Value):
    """Loaded f16/bf16 bits -> the f32 of the same value."""
    R, w = self.r(v), self.rset(v)
    self.i(f"v_cvt_f32_f16 {R}, {R}" if v.type == ir.f16 else f"v_lshlrev_b32 {R}, 16, {R}", w, w)

  def yields(self, dst: list[Value], src: list[Value]):
    """Parallel copy src -> dst registers (through the scratch VGPRs when a source is overwritten first)."""
    d_regs = set().union(*(self.rset(d) for d in dst)) if dst else set()
    clash = any(self.rset(s) & d_regs and self.regs[id(s)] is not self.regs[id(d)] for s, d in zip(src, dst))
    if clash and sum(self.regs[id(s)].size for s in src) <= SCRATCH - 1:
      tmp, t = [], 2
      for s in src:
        n = self.regs[id(s)].size
        for j in range(n): self.i(f"v_mov_b32 v{t + j}, {self.r(s, j)}", self.rset(s), {t + j})
        tmp.append(t); t += n
      for d, t0 in zip(dst, tmp):
        for j in range(self.regs[id(d)].size): self.i(f"v_mov_b32 {self.r(d, j)}, v{t0 + j}", {t0 + j}, self.rset(d))
      return
    if clash: raise CompileError("too many loop-carried values swap registers for the direct backend")
    for d, s in zip(dst, src): self.mov(d, s, self.regs[id(d)].size)

  def if_(self, op: Op):
    f = self.f
    c = op.operands[0]
    save, els = self.slot(), self.slot()
    has_barrier = lambda b: any(o.opcode == "barrier" for o in ir.walk(b))
    l_else, l_end = self.label("else"), self.label("endif")
    self.cmp_to_vcc(c)
    self.out.append(f"s_and_saveexec_{f.sb} {f.mask(save)}, {f.vcc}")
    self.out.append(f"s_xor_{f.sb} {f.mask(els)}, {f.exec}, {f.mask(save)}")
    if not has_barrier(op.regions[0]): self.branch(f"s_cbranch_execz {l_else}")
    ys = self.region(op.regions[0])
    self.yields(op.results, ys)
    self.place(l_else)
    if op.regions[1].ops:
      self.out.append(f"s_mov_{f.sb} {f.exec}, {f.mask(els)}")
      if not has_barrier(op.regions[1]): self.branch(f"s_cbranch_execz {l_end}")
      ys = self.region(op.regions[1])
      self.yields(op.results, ys)
    self.place(l_end)
    self.out.append(f"s_mov_{f.sb} {f.exec}, {f.mask(save)}")
    self.depth_sgpr -= 4

  def for_(self, op: Op):
    f = self.f
    body = op.regions[0]
    lo, hi, st = op.operands[:3]
    iv = body.args[0]
    if _wide(iv.type):
      raise CompileError("64-bit loop counters are not supported by the direct backend; use --backend llvm",
                         loc=op.loc, arch=f.arch)
    save, tmp = self.slot(), self.slot()
    self.mov(iv, lo)
    self.yields(body.args[1:], op.operands[3:])
    self.out.append(f"s_mov_{f.sb} {f.mask(save)}, {f.exec}")
    head, done = self.label("loop"), self.label("endloop")
    self.place(head)
    sfx = "i32" if iv.type.is_signed else "u32"
    self.i(f"v_cmp_lt_{sfx}_e32 {f.vcc}, {self.r(iv)}, {self.r(hi)}", self.rset(iv) | self.rset(hi))
    self.i(f"v_cmp_ge_{sfx}_e64 {f.mask(tmp)}, {self.r(iv)}, {self.r(lo)}", self.rset(iv) | self.rset(lo))
    self.out.append(f"s_and_{f.sb} {f.vcc}, {f.vcc}, {f.mask(tmp)}")
    self.out.append(f"s_and_{f.sb} {f.exec}, {f.exec}, {f.vcc}")
    self.branch(f"s_cbranch_execz {done}")
    ys = self.region(body)
    self.yields(body.args[1:], ys)
    self.i(f"{f.add()} {self.r(iv)}, {self.r(iv)}, {self.r(st)}", self.rset(iv) | self.rset(st), self.rset(iv))
    self.branch(f"s_branch {head}")
    self.place(done)
    self.out.append(f"s_mov_{f.sb} {f.exec}, {f.mask(save)}")
    self.depth_sgpr -= 4


def assembly(k: Kernel, arch: str, *, max_vgprs: int | None = None) -> str:
  """The complete `.s` (code, `.amdhsa_kernel` block and `.amdgpu_metadata`) for kernel `k` on `arch`."""
  fam = _fam(arch)
  em = _Emitter(k, fam, max_vgprs or 256)
  code = em.kernel()
  nv = max(em.nvgpr, 9)
  ns = max(em.max_sgpr, em.hidden + 5)
  name = k.name
  d = [f".amdhsa_next_free_vgpr {nv}", f".amdhsa_next_free_sgpr {ns}", ".amdhsa_user_sgpr_kernarg_segment_ptr 1",
       ".amdhsa_system_sgpr_workgroup_id_x 1", ".amdhsa_system_sgpr_workgroup_id_y 1",
       ".amdhsa_system_sgpr_workgroup_id_z 1", ".amdhsa_system_vgpr_workitem_id 2",
       f".amdhsa_group_segment_fixed_size {em.lds_size}", f".amdhsa_kernarg_size {em.kernarg_size}",
       ".amdhsa_float_denorm_mode_32 3", ".amdhsa_float_denorm_mode_16_64 3"]   # IEEE denormals, as the reference
  if fam.rdna: d.append(f".amdhsa_wavefront_size32 {int(fam.wave == 32)}")
  else: d.append(f".amdhsa_accum_offset {-(-nv // 4) * 4}")
  args = "\n".join("      - " + "\n        ".join(f"{k_}: {v}" for k_, v in m.items()) for m in em.arg_meta)
  meta = (f"---\namdhsa.kernels:\n  - .name: {name}\n    .symbol: {name}.kd\n"
          f"    .kernarg_segment_size: {em.kernarg_size}\n    .kernarg_segment_align: 8\n"
          f"    .group_segment_fixed_size: {em.lds_size}\n    .private_segment_fixed_size: 0\n"
          f"    .wavefront_size: {fam.wave}\n    .max_flat_workgroup_size: 1024\n    .sgpr_count: {ns + 6}\n"
          f"    .vgpr_count: {nv}\n    .args:\n{args}\namdhsa.target: amdgcn-amd-amdhsa--{arch}\n"
          f"amdhsa.version:\n  - 1\n  - 2\n...")
  return (f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}"\n.text\n.globl {name}\n.p2align 8\n.type {name},@function\n'
          f"{name}:\n" + "\n".join("  " + l if not l.endswith(":") else l for l in code.splitlines()) +
          f"\n.size {name}, .-{name}\n\n.rodata\n.p2align 6\n.amdhsa_kernel {name}\n  " + "\n  ".join(d) +
          f"\n.end_amdhsa_kernel\n\n.amdgpu_metadata\n{meta}\n.end_amdgpu_metadata\n")


def compile_direct(k: Kernel, arch: str, *, max_vgprs: int | None = None) -> tuple[bytes, str]:
  """-> (code object bytes, assembly text)."""
  from gputwin.isa.codeobj import assemble_code_object
  asm = assembly(k, arch, max_vgprs=max_vgprs)
  try:
    return assemble_code_object(asm, arch, path=f"<{k.name}.s>"), asm
  except Exception as e:  # an assembler rejection is our bug: report it as a located compile error, not a crash
    raise CompileError(f"direct backend produced assembly the assembler rejects for @{k.name}: {e}", loc=k.loc,
                       arch=arch) from e
