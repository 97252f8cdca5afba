"""A PTX module laid out for the machine: one PC space over every function's instructions, registers as rows of the
per-lane register file, and the state spaces placed (PTX ISA 9.0 ch. 5 "State Spaces, Types, and Variables").

    img = Image(module)            # gputwin.isa.ptx.Module
    img.code[pc]                   # a Located instruction: the Instruction and how its names resolve
    img.functions["_Z3fibi"]       # entry PC, register rows, .param/.local layout

Layout (all static, computed once per module):
- PCs: instruction indices, functions one after another; a label is the PC of the instruction after it.
- Registers: every `.reg` of every function (scoped by `{ }`: two blocks may both declare `param0`) gets rows of its
  own in one file: one 32-bit row for pred/8/16/32-bit types (zero-extended; predicates hold 0 or 1), two for 64-bit
  types (launches without checkers let registers whose live ranges never overlap share rows: regs.pack; in a
  module without calls every kernel's rows start at the same base, `local_rows`). Rows 0..len(SPECIAL) hold the
  special registers the launch writes (%tid.x ...). A function also owns a hidden two-row
  register with its frame base (`.local` depot), so a call saves it with the callee's registers.
- .param of a `.entry`: one buffer in guest memory per launch (`Param.entry`). .param of a `.func` and of the call
  blocks inside functions: fixed offsets in each thread's local window (the param area), saved with the registers
  on a call, since a recursive call reuses them.
- .local inside a function: its frame, at the frame base; module-scope .local: after the param area.
- .shared: static variables at fixed offsets of the CTA's window, `.extern .shared` (dynamic) after them.
- .global/.const: guest memory, placed by the Emulator that loads the image (`Image.place`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from gputwin.errors import LaunchError
from gputwin.isa.ptx import model as M

# special registers the launch writes per lane (PTX ISA 9.0 ch. 10 "Special Registers"); each one 32-bit row
SPECIAL = ("%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y", "%ctaid.z",
           "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid",
           "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge", "%dynamic_smem_size",
           "%total_smem_size", "%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x", "%nclusterid.y",
           "%nclusterid.z", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z", "%cluster_nctaid.x",
           "%cluster_nctaid.y", "%cluster_nctaid.z", "%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster")
SPECIAL_ROW = {n: i for i, n in enumerate(SPECIAL)}
SPECIAL_ALIAS = {"%tid": "%tid.x", "%ntid": "%ntid.x", "%ctaid": "%ctaid.x", "%nctaid": "%nctaid.x"}
TIME = {"%clock": 32, "%clock_hi": 32, "%clock64": 64, "%globaltimer": 64, "%globaltimer_lo": 32,
        "%globaltimer_hi": 32}  # read from the warp's instruction count: deterministic
WIDE = {"b64", "u64", "s64", "f64"}
SIZE = {"b8": 1, "u8": 1, "s8": 1, "pred": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "f16x2": 4,
        "bf16x2": 4, "b32": 4, "u32": 4, "s32": 4, "f32": 4, "tf32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8,
        "b128": 16, "e4m3x2": 2, "e5m2x2": 2}


def _align(n: int, a: int) -> int:
  return -(-n // max(a, 1)) * max(a, 1)


def var_size(v: M.VarDecl) -> int:
  n = SIZE.get(v.type, 4) * max(v.vec, 1)
  for d in v.dims:
    n *= max(d, 0)
  return n


@dataclass
class Var:
  """A variable's place: space ("global" | "const" | "shared" | "local" | "param" | "entry_param"), offset (VA for
  global/const once placed; window offset otherwise; frame offset for a function's .local), and whether the offset
  is relative to the function's frame base."""
  space: str
  offset: int
  size: int
  decl: M.VarDecl
  frame: bool = False


@dataclass
class Function:
  name: str
  kind: str  # entry | func
  entry: int  # PC of its first instruction
  end: int
  decl: M.Function
  rows: range = range(0)  # its register rows (saved across a call)
  frame_row: int = 0  # the two rows holding its frame base (a local-window offset)
  frame_size: int = 0  # bytes of its .local variables
  params: list = field(default_factory=list)  # Vars of its formal parameters, in order
  rets: list = field(default_factory=list)  # Vars of its return parameters, in order
  param_span: tuple = (0, 0)  # [lo, hi) of the param area its formals and returns occupy (saved across a call)

  @property
  def param_size(self) -> int:
    """Bytes its formal parameters span (an entry's .param buffer)."""
    return max((v.offset + v.size for v in self.params), default=0)


@dataclass(frozen=True)
class Located:
  """One instruction with its function and the names visible where it stands (scopes resolved)."""
  inst: M.Instruction
  func: str
  names: dict  # register/variable name -> ("reg", row, dwords, type) | ("var", Var)
  labels: dict  # label -> PC (the function's)
  image: "Image" = field(compare=False, repr=False, default=None)

  @property
  def text(self) -> str:
    """The instruction as PTX, with the CUDA source line `.loc` gave it (file:line) when there is one."""
    from gputwin.isa.ptx.printer import instruction
    t = instruction(self.inst).strip().rstrip(";")
    loc = self.inst.loc
    if loc is not None and loc.line:
      t += f"  // {loc.file or self.image.files.get(loc.index, '?')}:{loc.line}"
    return t


class Image:
  def __init__(self, module: M.Module):
    self.module = module
    self.code: list[Located] = []
    self.functions: dict[str, Function] = {}
    self.globals: dict[str, Var] = {}  # module-scope variables (global, const, shared, local)
    self.rows = len(SPECIAL)
    self.kernel_rows: dict[str, int] = {}  # kernel -> rows its launches need, when fewer than `rows` (local_rows)
    self.param_area = 0  # bytes of each thread's param area
    self.shared_static = 0
    self.dynamic_shared: list[str] = []
    self.local_static = 0  # module-scope .local bytes (after the param area)
    self.calls = False
    self.files = dict(module.files)
    self.va: dict[str, int] = {}  # .global/.const variable -> guest VA (place)
    self.param_va = 0  # the kernels' .param buffer (place)
    self.cc_row = self.rows  # the carry flag of add.cc/addc/... (one per thread)
    self.sp_row = self.rows + 1  # the thread's stack pointer (frames.py), a local-window offset
    self.rows += 2
    for item in module.items:
      if isinstance(item, M.VarDecl):
        self._global(item)
    for item in module.items:
      if isinstance(item, M.Function) and item.body is not None:
        self._function(item)
    self.local_base = _align(self.param_area, 16)  # module .local, then the entry's frame and the call stack
    for v in self.globals.values():
      if v.space == "local":
        v.offset += self.local_base
    self.frame_base = _align(self.local_base + self.local_static, 16)
    self.dynamic_offset = _align(self.shared_static, 16)  # `.extern .shared` arrays start here

  def place(self, mem) -> list[int]:
    """Map the module's .global/.const variables into guest memory `mem` (initialisers written), and the kernels'
    .param buffer (one, as large as the largest kernel's parameters: a launch writes its arguments there); their
    VAs."""
    size = max((f.param_size for f in self.functions.values() if f.kind == "entry"), default=0)
    self.param_va = mem.alloc(max(size, 1))
    out = [self.param_va]
    for name, v in self.globals.items():
      if v.space not in ("global", "const"):
        continue
      va = self.va[name] = mem.alloc(max(v.size, 1), align=max(v.decl.align, 256))
      out.append(va)
      if v.decl.init is not None:
        mem.write_bytes(va, _init_bytes(v.decl, self.va))
    return out

  # ---- module scope
  def _global(self, d: M.VarDecl) -> None:
    size = var_size(d)
    if d.space == "shared":
      if d.dims and d.dims[0] < 0 or d.linkage == "extern":  # `.extern .shared .b8 smem[]`: dynamic
        self.dynamic_shared.append(d.name)
        self.globals[d.name] = Var("shared", -1, 0, d)
        return
      off = _align(self.shared_static, d.align or SIZE.get(d.type, 4))
      self.shared_static = off + size
      self.globals[d.name] = Var("shared", off, size, d)
    elif d.space == "local":
      off = _align(self.local_static, d.align or SIZE.get(d.type, 4))
      self.local_static = off + size
      self.globals[d.name] = Var("local", off, size, d)
    else:  # global / const: placed in guest memory later
      self.globals[d.name] = Var(d.space, -1, size, d)

  def _param(self, d: M.VarDecl) -> Var:
    off = _align(self.param_area, max(d.align, SIZE.get(d.type, 4), 4))
    self.param_area = off + max(var_size(d), 1)
    return Var("param", off, var_size(d), d)

  # ---- functions
  def _function(self, f: M.Function) -> None:
    fn = Function(f.name, f.kind, len(self.code), 0, f)
    self.functions[f.name] = fn
    row0 = self.rows
    fn.frame_row = self.rows
    self.rows += 2
    base: dict = {}
    if f.kind == "entry":
      off = 0
      for p in f.params:
        off = _align(off, max(p.align, SIZE.get(p.type, 4)))
        base[p.name] = ("var", Var("entry_param", off, var_size(p), p))
        fn.params.append(base[p.name][1])
        off += var_size(p)
    else:
      lo = _align(self.param_area, 16)
      self.param_area = lo
      for p in f.rets:
        v = self._param(p)
        base[p.name] = ("var", v)
        fn.rets.append(v)
      for p in f.params:
        v = self._param(p)
        base[p.name] = ("var", v)
        fn.params.append(v)
      fn.param_span = (lo, self.param_area)
    pending: list[str] = []  # labels waiting for their instruction
    labels: dict[str, int] = {}
    first = len(self.code)

    def walk(body, names: dict) -> None:
      names = dict(names)
      for s in body:
        if isinstance(s, M.RegDecl):
          wide = s.type in WIDE
          for r in s.registers():
            names[r] = ("reg", self.rows, 2 if wide else 1, s.type)
            self.rows += (2 if wide else 1) * max(s.vec, 1)
        elif isinstance(s, M.VarDecl):
          if s.space == "param":
            names[s.name] = ("var", self._param(s))
          elif s.space == "local":
            off = _align(fn.frame_size, s.align or SIZE.get(s.type, 4))
            fn.frame_size = off + var_size(s)
            names[s.name] = ("var", Var("local", off, var_size(s), s, frame=True))
          elif s.space == "shared":
            off = _align(self.shared_static, s.align or SIZE.get(s.type, 4))
            self.shared_static = off + var_size(s)
            names[s.name] = ("var", Var("shared", off, var_size(s), s))
          else:
            raise LaunchError(f"{f.name}: a function-scope .{s.space} variable ({s.name}) is not supported")
        elif isinstance(s, M.LabelDef):
          pending.append(s.name)
        elif isinstance(s, M.Scope):
          walk(s.body, names)
        elif isinstance(s, M.Instruction):
          for lb in pending:
            labels[lb] = len(self.code)
          pending.clear()
          if s.opcode == "call":
            self.calls = True
          self.code.append(Located(s, f.name, names, labels, self))
        elif isinstance(s, M.BranchTargets):
          names[s.name] = ("targets", s.targets)

    walk(f.body or (), base)
    for lb in pending:  # a label at the very end: the PC past the last instruction (running there is an error)
      labels[lb] = len(self.code)
    fn.end = len(self.code)
    fn.rows = range(row0, self.rows)
    if fn.end == first:
      raise LaunchError(f"function {f.name} has no instructions")

  def rows_for(self, fn: Function) -> int:
    """Register rows a launch of kernel `fn` needs."""
    return self.kernel_rows.get(fn.name, self.rows)

  def local_rows(self) -> "Image | None":
    """A copy whose kernels' registers each start right after the rows every function shares (specials, carry flag,
    stack pointer): kernels never run in one launch, so their rows may overlap, and a launch's register file holds
    its own kernel's rows only (`rows_for`), not every function's of the module. None for a module with calls (a
    callee's rows stay where its callers save them) or nothing to move."""
    if self.calls:
      return None
    base = self.sp_row + 1
    out = copy.copy(self)
    out.functions, out.kernel_rows, out.code = dict(self.functions), {}, list(self.code)
    seen: dict = {}
    for name, fn in self.functions.items():
      d = base - fn.rows.start
      if fn.kind != "entry":
        continue
      out.kernel_rows[name] = base + len(fn.rows)
      if not d:
        continue
      out.functions[name] = replace(fn, rows=range(base, base + len(fn.rows)), frame_row=fn.frame_row + d)
      for pc in range(fn.entry, fn.end):
        loc = self.code[pc]
        got = seen.get(id(loc.names))
        if got is None:
          got = seen[id(loc.names)] = (loc.names, {k: ("reg", v[1] + d) + tuple(v[2:]) if v[0] == "reg" else v
                                                   for k, v in loc.names.items()})
        out.code[pc] = replace(loc, names=got[1], image=out)
    if all(n == self.rows for n in out.kernel_rows.values()):
      return None
    out.code = [loc if loc.image is out else replace(loc, image=out) for loc in out.code]
    return out

  def shared_size(self, kernel: str) -> tuple[int, bool]:
    """(bytes of static shared memory the kernel's code reaches: the end of the furthest `.shared` variable its or any
    `.func`'s instructions name, whether they name an `.extern .shared` array). Worked out once per kernel."""
    got = self.__dict__.setdefault("_shared", {}).get(kernel)
    if got is None:
      got = self._shared[kernel] = self._reach(kernel)
    return got

  def specials(self, kernel: str) -> list[str]:
    """The special registers the kernel's code and the module's `.func`s read (what its launch writes). Worked out
    once per kernel."""
    got = self.__dict__.setdefault("_specials", {}).get(kernel)
    if got is None:
      got = self._specials[kernel] = sorted(
        {SPECIAL_ALIAS.get(o.name, o.name) for loc in self.code
         if loc.func == kernel or self.functions[loc.func].kind != "entry" for o in _regs(loc.inst)} & set(SPECIAL_ROW))
    return got

  def _reach(self, kernel: str) -> tuple[int, bool]:
    end, dynamic = 0, False
    for loc in self.code:
      if loc.func != kernel and self.functions[loc.func].kind == "entry":
        continue
      for o in _names(loc.inst):
        x = self.resolve(loc, o)
        if x is not None and x[0] == "var" and x[1].space == "shared":
          if x[1].offset < 0:
            dynamic = True
          else:
            end = max(end, x[1].offset + x[1].size)
    return end, dynamic

  # ---- lookups
  def resolve(self, loc: Located, name: str):
    """What a name stands for where `loc` stands: ("reg", row, dwords, type) | ("var", Var) | ("func", Function) |
    ("special", name) | ("time", bits) | None."""
    r = loc.names.get(name)
    if r is not None:
      return r
    if name in self.globals:
      return ("var", self.globals[name])
    if name in self.functions:
      return ("func", self.functions[name])
    s = SPECIAL_ALIAS.get(name, name)
    if s in SPECIAL_ROW:
      return ("special", s)
    if name in TIME:
      return ("time", TIME[name])
    return None


def _init_bytes(d: M.VarDecl, va: dict) -> bytes:
  """A variable's initialiser as bytes (PTX ISA 9.0 5.4.4 "Initializers"): numbers in the element type, symbols as
  their addresses (generic(sym) too), missing trailing elements zero."""
  import struct
  flat = []
  def walk(x):
    if isinstance(x, (tuple, list)) and not (len(x) == 2 and x[0] == "generic"):
      for y in x:
        walk(y)
    else:
      flat.append(x)
  walk(d.init)
  n = SIZE.get(d.type, 4)
  out = bytearray()
  for x in flat:
    if isinstance(x, tuple):  # ("generic", Sym)
      x = x[1]
    if isinstance(x, M.Sym):
      out += ((va.get(x.name, 0) + x.offset) & ((1 << 64) - 1)).to_bytes(n, "little")
    elif isinstance(x, M.Imm) and x.kind == "float":
      out += struct.pack("<d" if n == 8 else "<f" if n == 4 else "<e", x.value)
    elif isinstance(x, M.Imm):
      out += (int(x.value) & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
  return bytes(out[:var_size(d)]) + bytes(max(0, var_size(d) - len(out)))


def _regs(inst: M.Instruction):
  for o in inst.operands:
    for x in (o.items if isinstance(o, (M.Vec, M.Args)) else (o.a, o.b) if isinstance(o, M.Pair) else (o,)):
      if isinstance(x, M.Reg):
        yield x


def _names(inst: M.Instruction):
  """Every register, symbol and address base an instruction names."""
  for o in inst.operands:
    for x in (o.items if isinstance(o, (M.Vec, M.Args)) else (o.a, o.b) if isinstance(o, M.Pair) else (o,)):
      if isinstance(x, (M.Reg, M.Sym)):
        yield x.name
      elif isinstance(x, M.Addr) and x.base is not None:
        yield x.base.name
