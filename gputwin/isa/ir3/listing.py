"""The launch metadata of an ir3 compute shader: Mesa's compiler listing (`ir3_compiler ... > name.txt`: the variant's
const layout, `@in`/`@const` lines, disassembly, stats, and the `; kernel-info:` / `; kernel-sysval:` lines) read into
one frozen `Shader`, or the same record given explicitly for our own assembler's output.

Const-file offsets are in dwords (Mesa's `cN.x` is dword 4N); register numbers are Mesa's regid, gpr*4 + component
(`r48.x` = 192, the first shared register). `text` keeps the listing's lines as printed, `lN:` labels included (the
form `disassemble(..., branch_labels=True)` prints and `assemble` reads); `instrs` drops the labels, one line per
64-bit instruction word."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from gputwin.errors import CodeObjectError

SHARED_REG_START = 48 * 4   # r48.x: the first register of the shared (wave-uniform) file, as a regid
CONST_DWORDS = 2048          # the const file a launch uploads: 512 vec4 (c0.x .. c511.w)


@dataclass(frozen=True)
class UboRange:
  """ubo_state range[i]: UBO bytes [start, end) of `block` that the driver pushes to the const file at `offset`."""
  block: int
  offset: int                      # const dword offset
  start: int                       # bytes
  end: int
  bindless_base: int | None = None


@dataclass(frozen=True)
class Input:
  """A register live at wave start (`@in`), with the system value the compiler put there (`kernel-sysval`)."""
  reg: int                         # regid: gpr*4 + component of the first component
  compmask: int                    # components filled from `reg` on (0x7 = .x .y .z)
  sysval: str | None = None        # Mesa's gl_system_value name, e.g. SYSTEM_VALUE_LOCAL_INVOCATION_ID
  half: bool = False

  @property
  def shared(self) -> bool: return not self.half and self.reg >= SHARED_REG_START
  @property
  def name(self) -> str: return f"{'h' if self.half else ''}r{self.reg >> 2}.{'xyzw'[self.reg & 3]}"


LOCAL_ID, WORKGROUP_ID = "SYSTEM_VALUE_LOCAL_INVOCATION_ID", "SYSTEM_VALUE_WORKGROUP_ID"
DEFAULT_INPUTS = (Input(0, 0x7, LOCAL_ID), Input(SHARED_REG_START, 0x7, WORKGROUP_ID))   # r0.xyz, r48.xyz


@dataclass(frozen=True)
class Param:
  """One positional launch argument of a compiled shader: a buffer bound as SSBO `binding`, or a scalar of numpy
  type `dtype` ('bool' packs as a uint32 0/1) at byte `offset` of UBO `binding` (pushed to the const file)."""
  kind: str                        # "ssbo" | "ubo"
  binding: int
  offset: int = 0
  dtype: str = ""


@dataclass(frozen=True)
class Shader:
  """Everything a launch needs besides the machine code: the `; kernel-info:` facts of the variant, its inputs, the
  const-file layout (`; offsets:`, `ubo_state`) and the immediates the driver uploads (`@const`)."""
  gpu: str                                        # a630, a660, a730, ... (from `; gpu: FD630 ...`)
  local_size: tuple[int, int, int] | None = (64, 1, 1)   # None: the launch's block (the shader reads driver params)
  wave_size: int = 64                             # threadsize_base, doubled when double_threadsize=1
  shared_size: int = 0                            # bytes of shared memory (l[...])
  constlen: int = 0                               # vec4
  consts: tuple[tuple[int, tuple[int, ...]], ...] = ()   # (dword offset, words): immediates to upload before launch
  ubo_ranges: tuple[UboRange, ...] = ()
  allocs: tuple[tuple[str, int, int], ...] = ()   # `; offsets:` (name, dword offset, dwords): ubo_ranges, preamble, ...
  inputs: tuple[Input, ...] = DEFAULT_INPUTS
  preamble_instrs: int = 0                        # the shps..shpe block at the start, in instructions
  early_preamble: bool = False
  subgroup_size: int = 64                         # what the driver writes to driver_params[7]
  max_reg: int = -1                               # highest full / half register used (-1: none or not given)
  max_half_reg: int = -1
  max_const: int = -1
  mergedregs: bool = True
  pvtmem_size: int = 0
  pvtmem_per_wave: bool = True
  has_barrier: bool = False
  branchstack: int = 0
  num_ssbos: int = 0
  num_ibos: int = 0
  instrlen: int = 0
  sizedwords: int = 0                             # code size in dwords, trailing nops included
  text: tuple[str, ...] = field(default=(), repr=False)
  params: tuple[Param, ...] = ()                  # how a positional argument list binds (our compiler's shaders)

  @property
  def instrs(self) -> tuple[str, ...]: return tuple(t for t in self.text if not _LABEL.fullmatch(t))
  def const_offset(self, name: str) -> int | None:
    """Dword offset of the `; offsets:` allocation `name` (e.g. ubo_ranges, driver_params, preamble), or None."""
    return next((off for n, off, _ in self.allocs if n == name), None)
  @property
  def ubo_offset(self) -> int | None: return self.const_offset("ubo_ranges")
  @property
  def driver_params(self) -> int | None:
    """Where `struct ir3_driver_params_cs` goes (16 dwords: num_work_groups xyz, work_dim, base_group xyz,
    subgroup_size, local_group_size xyz, subgroup_id_shift, ...), or None when the shader reads none."""
    return self.const_offset("driver_params")
  @property
  def preamble(self) -> int | None: return self.const_offset("preamble")

  def const_file(self, grid, ubos: dict, where: str = "") -> np.ndarray:
    """The const file a driver uploads for a launch of `grid` workgroups: the `@const` immediates, the UBO ranges
    ubo_state pushes (from `ubos`: binding -> array), `struct ir3_driver_params_cs` at its offset (num_work_groups,
    work_dim 3, base_group 0, subgroup_size, local_group_size, subgroup_id_shift). CONST_DWORDS uint32 words."""
    from gputwin.errors import LaunchError
    from gputwin.isa.kernargs import three
    grid, block = three(grid, "grid"), tuple(self.local_size)
    c = np.zeros(CONST_DWORDS, np.uint32)
    for off, words in self.consts:
      c[off:off + len(words)] = words
    for r in self.ubo_ranges:
      if r.block not in ubos:
        raise LaunchError(f"{where}: the shader reads UBO {r.block} (bytes [{r.start}, {r.end})); pass it in args")
      b = np.ascontiguousarray(ubos[r.block]).reshape(-1).view(np.uint8)
      if b.nbytes < r.end:
        raise LaunchError(f"{where}: UBO {r.block} has {b.nbytes} bytes; the shader's pushed range is "
                          f"[{r.start}, {r.end})")
      c[r.offset:r.offset + (r.end - r.start) // 4] = b[r.start:r.end].view(np.uint32)
    dp = self.driver_params
    if dp is not None:
      sg = self.subgroup_size
      c[dp:dp + 16] = [*grid, 3, 0, 0, 0, sg, *block, sg.bit_length() - 1, 0, 0, 0, 0]
    return c

  def bind(self, args, block=None, where: str = "") -> tuple[Shader, dict]:
    """(the shader with its local size fixed, {binding: ndarray}) for a launch: `block` fills a variable local size
    (`local_size=None`; a fixed one it must equal when given); a positional `args` list is bound by `params`
    (pointer arrays -> their SSBO bindings, scalars packed into the parameter UBO). A dict passes through."""
    from gputwin.errors import LaunchError
    from gputwin.isa.kernargs import three
    sh = self
    if self.local_size is None:
      if block is None: raise LaunchError(f"{where}: the shader's local size is the launch's: pass block")
      sh = replace(self, local_size=three(block, "block"))
    elif block is not None and three(block, "block") != tuple(self.local_size):
      raise LaunchError(f"{where}: block {three(block, 'block')} differs from the shader's local size "
                        f"{tuple(self.local_size)} (compiled in)")
    if not isinstance(args, (list, tuple)): return sh, dict(args or {})
    if not self.params:
      raise LaunchError(f"{where}: positional args need a shader with params (use {{binding: array}})")
    if len(args) != len(self.params):
      raise LaunchError(f"{where}: {len(args)} arguments for {len(self.params)} parameters")
    out, ubos = {}, {}
    for i, (p, a) in enumerate(zip(self.params, args)):
      if p.kind == "ssbo":
        if not isinstance(a, np.ndarray):
          raise LaunchError(f"{where}: argument {i} is a buffer (binding {p.binding}): pass a numpy array")
        out[p.binding] = a
        continue
      if isinstance(a, np.ndarray) and a.size != 1 or not isinstance(a, (int, float, bool, np.generic, np.ndarray)):
        raise LaunchError(f"{where}: argument {i} is a {p.dtype} scalar, got {type(a).__name__}")
      u = ubos.setdefault(p.binding, bytearray(max(q.offset + 4 for q in self.params if q.binding == p.binding)))
      try: v = np.array(a).reshape(()).astype(np.uint32 if p.dtype == "bool" else np.dtype(p.dtype), casting="unsafe")
      except (TypeError, ValueError) as e: raise LaunchError(f"{where}: argument {i}: {e}") from None
      b = v.tobytes()
      u[p.offset:p.offset + len(b)] = b
    for b, u in ubos.items(): out[b] = np.frombuffer(bytes(u.ljust(-(-len(u) // 16) * 16, b"\0")), np.uint32)
    return sh, out

  @classmethod
  def explicit(cls, gpu: str, code: bytes, **facts) -> Shader:
    """The record for machine code of our own (e.g. `assemble(...)` output): sizedwords and text from `code`, the
    rest from `facts` or the defaults (wave64, local size 64, r0.xyz local id, shared r48.xyz workgroup id)."""
    from gputwin.isa.ir3.decode import disassemble
    facts.setdefault("text", tuple(disassemble(code, gpu, branch_labels=True)))
    return cls(gpu=gpu, sizedwords=len(code) // 4, **facts)


_LABEL = re.compile(r"[A-Za-z_]\w*:")
_GPU = re.compile(r"; gpu: (\S+) gen=\d+ gpu_id=(\d+) chip_id=(0x[0-9a-fA-F]+)")
_REG = r"(h?)r(\d+)\.([xyzw])"
_IN = re.compile(rf"@in\({_REG}\)\s+\w+ \(wrmask=(0x[0-9a-fA-F]+)\)")
_CONST = re.compile(r"@const\(c(\d+)\.x\)\s+(.*)")
_ALLOC = re.compile(r";\s+(\w+)\s+c(\d+)\.x \((\d+) vec4\)")
_RANGE = re.compile(r";\s+range\[(\d+)\]:")
_RANGE_FIELD = re.compile(r";\s+(block|bindless_base|offset|size):\s+(.*)")
_SYSVAL = re.compile(rf"; kernel-sysval: (\w+) -> (shared )?{_REG} \(compmask=(0x[0-9a-fA-F]+)\)")
_INFO_INTS = ("shared_size", "double_threadsize", "threadsize_base", "max_reg", "max_half_reg", "max_const",
              "constlen", "instrlen", "sizedwords", "pvtmem_size", "pvtmem_per_wave", "has_barrier", "num_ssbos",
              "num_ibos", "branchstack", "early_preamble", "preamble_instrs", "mergedregs", "subgroup_size")


def _gpu_name(dev: str, gpu_id: int, chip_id: int) -> str:
  """FD630 -> a630; with no device name, the gpu id, else chip id 0x07030001 -> a730 (core, major, minor digits)."""
  if m := re.fullmatch(r"FD(\d+)", dev): return f"a{m[1]}"
  if gpu_id: return f"a{gpu_id}"
  return f"a{chip_id >> 24 & 0xff}{chip_id >> 16 & 0xff}{chip_id >> 8 & 0xff}"


def parse(text: str, path: str = "<listing>") -> Shader:
  """One Mesa ir3 compiler listing. Raises CodeObjectError naming `path:line` for a malformed fact line, a missing
  `; gpu:` or `; kernel-info:` line, or instruction text whose length disagrees with sizedwords."""
  def err(msg: str, ln: int = 0):
    return CodeObjectError(f"error: {msg}", path=f"{path}:{ln}" if ln else path, kernel=Path(path).stem, line=ln)
  def num(s: str, ln: int, base: int = 10) -> int:
    try: return int(s, base)
    except ValueError: raise err(f"not a number: {s!r}", ln) from None
  gpu = info = None
  ins: dict[int, Input] = {}
  consts: list[tuple[int, list[int]]] = []
  allocs, ranges, code = [], [], []
  in_ubo = False
  for ln, line in enumerate(text.splitlines(), 1):
    s = line.strip()
    if not s or s.startswith("Native code for "): continue
    if s.startswith("@in("):
      if not (m := _IN.fullmatch(s)): raise err(f"bad input line: {s!r}", ln)
      r = num(m[2], ln) * 4 + "xyzw".index(m[3])
      ins[r] = Input(r, num(m[4], ln, 16), half=bool(m[1]))
    elif s.startswith("@const("):
      if not (m := _CONST.fullmatch(s)): raise err(f"bad const line: {s!r}", ln)
      off, words = num(m[1], ln) * 4, [num(w.strip(), ln, 16) for w in m[2].split(",")]
      if consts and consts[-1][0] + len(consts[-1][1]) == off: consts[-1][1].extend(words)
      else: consts.append((off, words))
    elif s.startswith("@"): continue                            # @out/@tex/...: not in compute listings
    elif not s.startswith(";"): code.append(s)
    elif s.startswith("; gpu:"):
      if not (m := _GPU.fullmatch(s)): raise err(f"bad gpu line: {s!r}", ln)
      gpu = _gpu_name(m[1], num(m[2], ln), num(m[3], ln, 16))
    elif s.startswith("; kernel-info:"):
      kv = dict(t.split("=", 1) if "=" in t else (t, "") for t in s[len("; kernel-info:"):].split())
      if missing := [k for k in ("local_size",) + _INFO_INTS if k not in kv]:
        raise err(f"kernel-info lacks {', '.join(missing)}", ln)
      ls = kv["local_size"].split(",")
      if len(ls) != 3: raise err(f"bad local_size {kv['local_size']!r}", ln)
      info = {k: num(kv[k], ln) for k in _INFO_INTS} | {"local_size": tuple(num(x, ln) for x in ls)}
    elif s.startswith("; kernel-sysval:"):
      if not (m := _SYSVAL.fullmatch(s)): raise err(f"bad sysval line: {s!r}", ln)
      r, cm, half = num(m[4], ln) * 4 + "xyzw".index(m[5]), num(m[6], ln, 16), bool(m[3])
      if bool(m[2]) != (not half and r >= SHARED_REG_START): raise err(f"'shared' disagrees with {s!r}", ln)
      if r in ins and (ins[r].compmask, ins[r].half) != (cm, half):
        raise err(f"sysval {m[1]} compmask/size disagrees with @in({ins[r].name})", ln)
      ins[r] = Input(r, cm, m[1], half)
    elif s.startswith("; ubo_state:"): in_ubo = True
    elif in_ubo and (m := _RANGE.fullmatch(s)): ranges.append({"line": ln})
    elif in_ubo and ranges and (m := _RANGE_FIELD.fullmatch(s)):
      k, v = m[1], m[2]
      if k == "offset":
        if not (o := re.fullmatch(r"c(\d+)\.x", v)): raise err(f"bad ubo range offset {v!r}", ln)
        ranges[-1]["offset"] = num(o[1], ln) * 4
      elif k == "size":
        if not (o := re.fullmatch(r"\d+ vec4 \((\d+)b -> (\d+)b\)", v)): raise err(f"bad ubo range size {v!r}", ln)
        ranges[-1]["start"], ranges[-1]["end"] = num(o[1], ln), num(o[2], ln)
      else: ranges[-1][k] = num(v, ln)
    elif m := _ALLOC.fullmatch(s): allocs.append((m[1], num(m[2], ln) * 4, num(m[3], ln) * 4))
  if gpu is None: raise err("no '; gpu:' line")
  if info is None: raise err("no '; kernel-info:' line")
  ubo = []
  for r in ranges:
    if missing := [k for k in ("block", "offset", "start", "end") if k not in r]:
      raise err(f"ubo_state range lacks {', '.join(missing)}", r["line"])
    ubo.append(UboRange(r["block"], r["offset"], r["start"], r["end"], r.get("bindless_base")))
  n = sum(not _LABEL.fullmatch(t) for t in code)
  if n * 2 != info["sizedwords"]:
    raise err(f"{n} instructions in the listing, kernel-info sizedwords={info['sizedwords']} says "
              f"{info['sizedwords'] / 2:g}")
  return Shader(gpu=gpu, local_size=info["local_size"],
                wave_size=info["threadsize_base"] * (2 if info["double_threadsize"] else 1),
                shared_size=info["shared_size"], constlen=info["constlen"],
                consts=tuple((o, tuple(w)) for o, w in consts), ubo_ranges=tuple(ubo), allocs=tuple(allocs),
                inputs=tuple(ins.values()), preamble_instrs=info["preamble_instrs"],
                early_preamble=bool(info["early_preamble"]), subgroup_size=info["subgroup_size"],
                max_reg=info["max_reg"], max_half_reg=info["max_half_reg"], max_const=info["max_const"],
                mergedregs=bool(info["mergedregs"]), pvtmem_size=info["pvtmem_size"],
                pvtmem_per_wave=bool(info["pvtmem_per_wave"]), has_barrier=bool(info["has_barrier"]),
                branchstack=info["branchstack"], num_ssbos=info["num_ssbos"], num_ibos=info["num_ibos"],
                instrlen=info["instrlen"], sizedwords=info["sizedwords"], text=tuple(code))


def read(path: str | Path) -> Shader:
  """A listing `name.txt`, or `name.bin` whose `name.txt` sibling is read (and whose size must be sizedwords*4)."""
  p = Path(path)
  txt = p.with_suffix(".txt") if p.suffix == ".bin" else p
  try: src = txt.read_text()
  except (OSError, UnicodeDecodeError) as e: raise CodeObjectError(f"error: cannot read listing: {e}", path=str(txt))
  sh = parse(src, str(txt))
  if p.suffix == ".bin" and (size := p.stat().st_size if p.exists() else -1) != sh.sizedwords * 4:
    raise CodeObjectError(f"error: {size} bytes, the listing's sizedwords={sh.sizedwords} says {sh.sizedwords * 4}",
                          path=str(p), kernel=p.stem)
  return sh
