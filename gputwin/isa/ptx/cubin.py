"""The NVIDIA program image: one ELF that a real GPU and the mock GPU both accept.

    image = build(ptx_text, "sm_90")                  # ptxas's cubin + a `.nv.gputwin.ptx` section holding the PTX
    image = build(ptx_text, "sm_90", ptxas=False)     # mock-only: the same shape, attributes computed from the PTX
    prog = read_program(image)                        # Program(arch, ptx, kernels={name: KernelInfo})

A cubin (ptxas 13, ELF64, e_machine EM_CUDA, the SM version in e_flags bits 8..15) carries one `.text.<kernel>`
section of SASS per kernel, `.nv.constant0.<kernel>` (constant bank 0: the driver's launch block, then the
parameters), `.nv.shared.<kernel>` (NOBITS: the static shared memory, on sm_90 including the 1 KiB the hardware
reserves), and attribute records: `.nv.info` (per-function: EIATTR_REGCOUNT, FRAME_SIZE, MIN_STACK_SIZE, each
naming its function by symbol index) and `.nv.info.<kernel>` (PARAM_CBANK: the constant-bank section symbol, the
parameters' offset and size; CBANK_PARAM_SIZE; one KPARAM_INFO per parameter; MAX_THREADS / REQNTID; EXIT_INSTR_
OFFSETS; MAXREG_COUNT ...). A record is `format:u8 attribute:u8` then, by format, nothing (EIFMT_NVAL), a byte
(EIFMT_BVAL), a u16 value (EIFMT_HVAL) or a u16 size and that many bytes (EIFMT_SVAL). Attribute numbers are the
ones ptxas writes (read from its output, as cuobjdump -elf names them).

The mock GPU runs the PTX: the runtime uploads the whole image at the start of a GPU buffer and points the QMD at
buffer + `KernelInfo.text_offset`; the mock reads the image from the start of that mapping (`read_program`).
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field

from gputwin.errors import CodeObjectError
from gputwin.isa.elf import SHT_NOBITS, SHT_SYMTAB, ElfError, ElfFile
from gputwin.isa.ptx import params as P

EM_CUDA = 190
PTX_SECTION = ".nv.gputwin.ptx"
PTXAS = "/usr/local/bin/ptxas"
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR = {"MAX_THREADS": 0x05, "PARAM_CBANK": 0x0a, "EXTERNS": 0x0f, "REQNTID": 0x10, "FRAME_SIZE": 0x11,
          "MIN_STACK_SIZE": 0x12, "KPARAM_INFO": 0x17, "CBANK_PARAM_SIZE": 0x19, "MAXREG_COUNT": 0x1b,
          "EXIT_INSTR_OFFSETS": 0x1c, "S2RCTAID_INSTR_OFFSETS": 0x1d, "CRS_STACK_SIZE": 0x1e,
          "MAX_STACK_SIZE": 0x23, "COOP_GROUP_INSTR_OFFSETS": 0x28, "WMMA_USED": 0x2b, "REGCOUNT": 0x2f,
          "SHARED_SCRATCH": 0x32, "SW_WAR": 0x36, "CUDA_API_VERSION": 0x37, "NUM_MBARRIERS": 0x38,
          "MBARRIER_INSTR_OFFSETS": 0x39, "CTA_PER_CLUSTER": 0x3d, "EXPLICIT_CLUSTER": 0x3e, "NUM_BARRIERS": 0x4c,
          "SPARSE_MMA_MASK": 0x50}
NAME = {v: k for k, v in EIATTR.items()}
# constant bank 0: the driver's launch block below the parameters (ptxas's EIATTR_PARAM_CBANK offset per SM)
PARAM_BASE = {"sm_80": 0x160, "sm_90": 0x210}
# bytes of shared memory the hardware reserves at the bottom of each CTA's window (sm_90: `.nv.shared.reserved.0`)
RESERVED_SHARED = {"sm_80": 0, "sm_90": 0x400}
TEXT_ALIGN = 128

_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_PROGBITS, SHT_STRTAB, SHT_CUDA_INFO = 1, 3, 0x70000000
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_INFO_LINK = 1, 2, 4, 0x40


@dataclass
class KernelInfo:
  """One kernel of a program image: where its code is (file offset and size of `.text.<name>`), its parameters in
  constant bank 0 (`param_offset`, `param_size`, per parameter (offset, size)), its static shared memory bytes,
  registers, launch bounds, and every EIATTR record of `.nv.info.<name>` by name (`attrs`)."""
  name: str
  text_offset: int
  text_size: int
  param_offset: int
  param_size: int
  params: list[tuple[int, int]]
  shared_static: int = 0
  regs: int = 0
  max_threads: tuple[int, int, int] | None = None
  reqntid: tuple[int, int, int] | None = None
  frame_size: int = 0
  stack_size: int = 0   # EIATTR_MIN_STACK_SIZE: the frame plus what its calls need (local memory per thread)
  cbank0_size: int = 0
  exit_offsets: list[int] = field(default_factory=list)
  attrs: dict = field(default_factory=dict, repr=False)


@dataclass
class Program:
  """A program image read back: target, the PTX it carries ("" for a plain cubin) and its kernels."""
  arch: str
  ptx: str
  kernels: dict[str, KernelInfo]
  image: bytes = field(default=b"", repr=False)

  def kernel(self, name: str) -> KernelInfo:
    if name not in self.kernels:
      raise CodeObjectError(f"[{self.arch}] no kernel {name!r} in the program; it has: "
                            f"{', '.join(sorted(self.kernels)) or 'none'}", kernel=name)
    return self.kernels[name]


# ---- reading
def attributes(data: bytes, where: str = ".nv.info") -> list[tuple[int, object]]:
  """The EIATTR records of an `.nv.info*` section: (attribute, value) with value None (NVAL), an int (BVAL, HVAL) or
  the bytes of an SVAL."""
  out, at = [], 0
  while at < len(data):
    if at + 4 > len(data): raise CodeObjectError(f"{where}: truncated attribute record at offset {at:#x}")
    fmt, attr, h = data[at], data[at + 1], int.from_bytes(data[at + 2:at + 4], "little")
    if fmt == EIFMT_SVAL:
      if at + 4 + h > len(data):
        raise CodeObjectError(f"{where}: attribute {NAME.get(attr, hex(attr))} of {h} bytes at offset {at:#x} runs "
                              f"past the section ({len(data)} bytes)")
      out.append((attr, data[at + 4:at + 4 + h]))
      at += 4 + h
    elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
      out.append((attr, None if fmt == EIFMT_NVAL else h & 0xff if fmt == EIFMT_BVAL else h))
      at += 4
    else:
      raise CodeObjectError(f"{where}: attribute record at offset {at:#x} has unknown format {fmt}")
  return out


def _u32s(v, what: str) -> list[int]:
  if not isinstance(v, bytes) or len(v) % 4:
    raise CodeObjectError(f"{what}: expected a list of 32-bit words, got {v!r}")
  return list(struct.unpack(f"<{len(v) // 4}I", v))


def _arch(flags: int) -> str: return f"sm_{(flags >> 8) & 0xff}"


def read_program(image: bytes) -> Program:
  """Parse a program image (a cubin, with or without the PTX section). Malformed input raises CodeObjectError
  naming the section or record at fault."""
  image = bytes(image)
  try:
    elf = ElfFile(image)
  except ElfError as e:
    raise CodeObjectError(f"not an NVIDIA program image: {e}") from None
  if elf.e_machine != EM_CUDA:
    raise CodeObjectError(f"not an NVIDIA program image: ELF machine {elf.e_machine}, expected {EM_CUDA} (EM_CUDA)")
  try:
    return _read(elf, image)
  except ElfError as e:
    raise CodeObjectError(f"malformed NVIDIA program image: {e}") from None


def _read(elf: ElfFile, image: bytes) -> Program:
  arch = _arch(elf.e_flags)
  by = {s.name: s for s in elf.sections}
  symtab = next((s for s in elf.sections if s.sh_type == SHT_SYMTAB), None)
  syms = elf.symbols(symtab) if symtab else []

  def sym_of(i: int, what: str) -> str:
    if not 0 <= i < len(syms): raise CodeObjectError(f"{what}: symbol index {i} out of range (symtab: {len(syms)})")
    return syms[i].name
  per_fn: dict[str, dict] = {}
  if ".nv.info" in by:
    for attr, v in attributes(elf.section_data(by[".nv.info"])):
      if attr in (EIATTR["REGCOUNT"], EIATTR["FRAME_SIZE"], EIATTR["MIN_STACK_SIZE"], EIATTR["MAX_STACK_SIZE"],
                  EIATTR["CRS_STACK_SIZE"]) and isinstance(v, bytes) and len(v) == 8:
        sym, val = struct.unpack("<II", v)
        per_fn.setdefault(sym_of(sym, f".nv.info {NAME[attr]}"), {})[NAME[attr]] = val
  ptx = elf.section_data(by[PTX_SECTION]).decode() if PTX_SECTION in by else ""
  kernels = {}
  for s in elf.sections:
    if not s.name.startswith(".nv.info."): continue
    name, where = s.name[len(".nv.info."):], s.name
    text = by.get(f".text.{name}")
    if text is None: raise CodeObjectError(f"{where}: the image has no .text.{name} section")
    attrs: dict = {}
    for attr, v in attributes(elf.section_data(s), where):
      key = NAME.get(attr, f"{attr:#x}")
      if attr == EIATTR["KPARAM_INFO"]: attrs.setdefault(key, []).append(v)
      else: attrs[key] = v
    pinfo = []
    for v in attrs.get("KPARAM_INFO", []):
      if not isinstance(v, bytes) or len(v) != 12: raise CodeObjectError(f"{where}: KPARAM_INFO of {v!r}")
      _, ordinal, off, word = struct.unpack("<IHHI", v)
      pinfo.append((ordinal, off, word >> 18))
    cb = attrs.get("PARAM_CBANK")
    if cb is not None:
      if not isinstance(cb, bytes) or len(cb) != 8: raise CodeObjectError(f"{where}: PARAM_CBANK of {cb!r}")
      sym, poff, psize = struct.unpack("<IHH", cb)
      sym_of(sym, f"{where} PARAM_CBANK")
    else:   # a kernel without parameters: they would start at the launch block's end
      poff, psize = PARAM_BASE.get(arch, 0), 0
    psize = attrs.get("CBANK_PARAM_SIZE", psize)
    dims = lambda k: tuple(_u32s(attrs[k], f"{where} {k}")) if k in attrs else None
    mt, rq = dims("MAX_THREADS"), dims("REQNTID")
    for k, d in (("MAX_THREADS", mt), ("REQNTID", rq)):
      if d is not None and len(d) != 3: raise CodeObjectError(f"{where}: {k} holds {len(d)} words, expected 3")
    sh = by.get(f".nv.shared.{name}")
    c0 = by.get(f".nv.constant0.{name}")
    fn = per_fn.get(name, {})
    kernels[name] = KernelInfo(
      name, text.sh_offset, text.sh_size, poff, psize, [(o, n) for _, o, n in sorted(pinfo)],
      sh.sh_size if sh is not None else 0, fn.get("REGCOUNT", 0), mt, rq, fn.get("FRAME_SIZE", 0),
      fn.get("MIN_STACK_SIZE", 0), c0.sh_size if c0 is not None else 0, _u32s(attrs["EXIT_INSTR_OFFSETS"], f"{where} EXIT_INSTR_OFFSETS")
      if "EXIT_INSTR_OFFSETS" in attrs else [], attrs)
    if text.sh_type != SHT_NOBITS and text.sh_offset + text.sh_size > len(image):
      raise CodeObjectError(f"{where}: .text.{name} lies outside the image")
  return Program(arch, ptx, kernels, image)


# ---- loading (what the CUDA driver does with a cubin's module data)
R_CUDA_32, R_CUDA_64 = 1, 2   # absolute relocations: S + A in 32 / 64 bits


def module_data(image: bytes, base: int) -> tuple[bytes, dict[int, tuple[int, int]]]:
  """The module's data laid out at GPU VA `base` as the CUDA driver does before a launch: `.nv.global.init`,
  `.nv.global` (zeroed) and the module's constant banks (`.nv.constantN`, N > 0: __constant__ data in bank 3, the
  addresses of __device__ variables in bank 4), each at its alignment, with the banks' R_CUDA_32/64 relocations
  applied. Returns (bytes, {bank: (offset in the bytes, size)}); the size does not depend on `base`. A relocation
  this loader does not apply (code that needs linking) raises CodeObjectError."""
  elf = ElfFile(bytes(image))
  out, at, banks = bytearray(), {}, {}
  for sec in elf.sections:
    n = sec.name
    if n in (".nv.global", ".nv.global.init") or (n.startswith(".nv.constant") and n[12:].isdigit() and n[12:] != "0"):
      off = -(-len(out) // max(sec.sh_addralign, 8)) * max(sec.sh_addralign, 8)
      out += bytes(off - len(out))
      out += elf.section_data(sec) if sec.sh_type != SHT_NOBITS else bytes(sec.sh_size)
      at[sec.index] = off
      if n.startswith(".nv.constant"): banks[int(n[12:])] = (off, sec.sh_size)
  symtab = next((x for x in elf.sections if x.sh_type == SHT_SYMTAB), None)
  syms = elf.symbols(symtab) if symtab else []
  for sec in elf.sections:
    if sec.sh_type not in (4, 9) or not sec.name.startswith((".rela.nv.constant", ".rela.text", ".rel.text",
                                                               ".rel.nv.constant")): continue
    target = elf.section(sec.sh_info)
    for r in elf.relocations(sec):
      if target.index not in at:
        raise CodeObjectError(f"{sec.name}: relocation type {r.r_type} in {target.name}: code that needs linking is not "
                              "supported (only module data relocations are applied)")
      if r.r_type not in (R_CUDA_32, R_CUDA_64) or not 0 <= r.r_sym < len(syms) or syms[r.r_sym].st_shndx not in at:
        raise CodeObjectError(f"{sec.name}: relocation type {r.r_type} against symbol {r.r_sym} is not supported")
      v = base + at[syms[r.r_sym].st_shndx] + syms[r.r_sym].st_value + r.r_addend
      w = 8 if r.r_type == R_CUDA_64 else 4
      o = at[target.index] + r.r_offset
      out[o:o + w] = (v & ((1 << 8 * w) - 1)).to_bytes(w, "little")
  return bytes(out), banks


# ---- building
def _module(ptx):
  from gputwin.isa.ptx import parse
  if isinstance(ptx, (bytes, bytearray)): ptx = bytes(ptx).decode()
  return str(ptx), parse(str(ptx), "<ptx>")


def _walk(body):
  from gputwin.isa.ptx import model as M
  for s in body or ():
    if isinstance(s, M.Scope): yield from _walk(s.body)
    else: yield s


def _names(o):
  from gputwin.isa.ptx import model as M
  if isinstance(o, M.Sym): yield o.name
  elif isinstance(o, M.Addr) and isinstance(o.base, M.Sym): yield o.base.name
  elif isinstance(o, (M.Vec, M.Args)):
    for x in o.items: yield from _names(x)


def shared_bytes(module, kernel: str, arch: str) -> int:
  """Static shared memory of `kernel` as ptxas sizes `.nv.shared.<kernel>`: its own `.shared` variables and the
  module's that its code (or a function it calls) names, each at its alignment; when the module declares
  `.extern .shared` arrays (dynamic shared memory, reachable from any kernel) padded to their alignment; on sm_90
  plus the reserved 1 KiB, for every kernel that has shared memory."""
  from gputwin.isa.ptx import model as M
  fns = module.functions
  glob = {v.name: v for v in module.items if isinstance(v, M.VarDecl) and v.space == "shared"}
  extern = [v for v in glob.values() if v.dims and v.dims[0] < 0]
  seen, todo, used = set(), [kernel], {}
  while todo:
    f = fns.get(todo.pop())
    if f is None or f.name in seen: continue
    seen.add(f.name)
    local = {}
    for s in _walk(f.body):
      if isinstance(s, M.VarDecl) and s.space == "shared": local[s.name] = used[(f.name, s.name)] = s
      elif isinstance(s, M.Instruction):
        for o in s.operands:
          for n in _names(o):
            if n in fns: todo.append(n)
            elif n in glob and n not in local: used[("", n)] = glob[n]
  end = 0
  for v in used.values():
    if v.dims and v.dims[0] < 0: continue   # `.extern .shared x[]`: dynamic
    n = P.SIZE.get(v.type, 4) * max(v.vec, 1)
    for d in v.dims: n *= max(d, 0)
    a = max(v.align, P.SIZE.get(v.type, 4), 1)
    end = -(-end // a) * a + n
  if extern:
    a = max(max(v.align, P.SIZE.get(v.type, 4), 1) for v in extern)
    end = -(-end // a) * a
  return end + RESERVED_SHARED.get(arch, 0) if used or extern else 0


def _info(attr: str, value) -> bytes:
  """One EIATTR record: an int -> EIFMT_HVAL, bytes -> EIFMT_SVAL."""
  if isinstance(value, int): return bytes([EIFMT_HVAL, EIATTR[attr]]) + struct.pack("<H", value)
  return bytes([EIFMT_SVAL, EIATTR[attr]]) + struct.pack("<H", len(value)) + value


def _flags(arch: str) -> int:
  sm = int(arch[3:])
  return 0x06000004 | (sm << 8)   # EF_CUDA_64BIT_ADDRESS and the virtual-SM bits ptxas 13 sets, SM in bits 8..15


class _Elf:
  """An ELF64 writer: sections appended in order, the symbol table and string tables finished by `bytes()`."""

  def __init__(self, flags: int):
    self.flags, self.sections, self.syms, self.strtab = flags, [], [], bytearray(b"\0")
    self.add("", 0, b"")
    self.add(".shstrtab", SHT_STRTAB, b"", align=1)
    self.add(".strtab", SHT_STRTAB, b"", align=1)
    self.add(".symtab", SHT_SYMTAB, b"", link=2, align=8, entsize=_SYM.size)

  def add(self, name, type_, data, flags=0, link=0, info=0, align=4, size=None, entsize=0) -> int:
    self.sections.append(dict(name=name, type=type_, data=bytes(data), flags=flags, link=link, info=info,
                              align=align, size=len(data) if size is None else size, entsize=entsize))
    return len(self.sections) - 1

  def sym(self, name: str, info: int, other: int, shndx: int, size: int = 0) -> int:
    at = len(self.strtab)
    self.strtab += name.encode() + b"\0"
    self.syms.append((at if name else 0, info, other, shndx, 0, size))
    return len(self.syms)   # index in the symtab (entry 0 is the null symbol)

  def __bytes__(self) -> bytes:
    shstr, names = bytearray(b"\0"), []
    for s in self.sections:
      names.append(len(shstr) if s["name"] else 0)
      if s["name"]: shstr += s["name"].encode() + b"\0"
    self.sections[1].update(data=bytes(shstr), size=len(shstr))
    self.sections[2].update(data=bytes(self.strtab), size=len(self.strtab))
    body = b"".join(_SYM.pack(*s) for s in [(0, 0, 0, 0, 0, 0)] + self.syms)
    local = 1 + sum(1 for s in self.syms if s[1] >> 4 == 0)
    self.sections[3].update(data=body, size=len(body), info=local)
    out, heads = bytearray(64), []
    for i, s in enumerate(self.sections):
      if i == 0:
        heads.append(_SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        continue
      a = max(s["align"], 1)
      out += bytes(-len(out) % a)
      heads.append(_SHDR.pack(names[i], s["type"], s["flags"], 0, len(out), s["size"], s["link"], s["info"], a,
                              s["entsize"]))
      if s["type"] != SHT_NOBITS: out += s["data"]
    out += bytes(-len(out) % 8)
    shoff = len(out)
    out += b"".join(heads)
    out[0:64] = b"\x7fELF" + bytes([2, 1, 1, 0x41, 8]) + bytes(7) + struct.pack(
      "<HHIQQQIHHHHHH", 2, EM_CUDA, 1, 0, 0, shoff, self.flags, 64, 56, 0, 64, len(self.sections), 1)
    return bytes(out)


def build_mock(ptx, arch: str) -> bytes:
  """The mock-only image of a PTX module: per kernel an empty `.text.<name>` placeholder (128 bytes), `.nv.info.
  <name>` with the attributes ptxas would compute from the PTX, `.nv.constant0.<name>`, `.nv.shared.<name>`; plus the
  PTX section."""
  if arch not in PARAM_BASE:
    raise CodeObjectError(f"unknown NVIDIA target {arch!r}; expected one of {', '.join(PARAM_BASE)}")
  text, module = _module(ptx)
  e = _Elf(_flags(arch))
  placed = {}
  for name, f in module.kernels.items():   # sections and their (local) section symbols first, as ELF wants
    lay = P.layout(f.params)
    t = e.add(f".text.{name}", SHT_PROGBITS, bytes(TEXT_ALIGN), SHF_ALLOC | SHF_EXECINSTR, link=3, align=TEXT_ALIGN)
    e.sym(f".text.{name}", 3, 0, t)   # STT_SECTION, local
    c0 = e.add(f".nv.constant0.{name}", SHT_PROGBITS, bytes(PARAM_BASE[arch] + P.size(lay)), SHF_ALLOC |
               SHF_INFO_LINK, info=t)
    placed[name] = (f, lay, t, e.sym(f".nv.constant0.{name}", 3, 0, c0))
    sh = shared_bytes(module, name, arch)
    if sh: e.add(f".nv.shared.{name}", SHT_NOBITS, b"", SHF_WRITE | SHF_ALLOC | SHF_INFO_LINK, info=t, align=16,
                 size=sh)
  info = bytearray()
  for name, (f, lay, t, c0sym) in placed.items():
    fsym = e.sym(name, 0x12, 0x10, t, TEXT_ALIGN)   # GLOBAL FUNC, st_other as ptxas writes for an entry
    psize, base = P.size(lay), PARAM_BASE[arch]
    rec = b"".join(_info("KPARAM_INFO", struct.pack("<IHHI", 0, i, p.offset, (p.size << 18) | (0x1f << 12)))
                   for i, p in reversed(list(enumerate(lay))))
    for key, n in f.perf:
      if key in ("maxntid", "reqntid"):
        rec += _info("MAX_THREADS" if key == "maxntid" else "REQNTID",
                     struct.pack("<3I", *(tuple(n) + (1, 1, 1))[:3]))
    rec += _info("MAXREG_COUNT", 0xff)
    if lay: rec += _info("CBANK_PARAM_SIZE", psize) + _info("PARAM_CBANK", struct.pack("<IHH", c0sym, base, psize))
    e.add(f".nv.info.{name}", SHT_CUDA_INFO, rec, SHF_INFO_LINK, link=3, info=t)
    info += _info("FRAME_SIZE", struct.pack("<II", fsym, 0))
  e.add(".nv.info", SHT_CUDA_INFO, bytes(info), link=3)
  e.add(PTX_SECTION, SHT_PROGBITS, text.encode(), align=1)
  return bytes(e)


def with_ptx(cubin: bytes, ptx: str) -> bytes:
  """`cubin` with a `.nv.gputwin.ptx` section added: the PTX and a new section-name table appended after the image's
  bytes, then a new section header table (every existing section and program header keeps its offset)."""
  elf = ElfFile(cubin)
  shoff, = struct.unpack_from("<Q", cubin, 40)
  shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 58)
  names = bytearray(elf.section_data(elf.section(shstrndx)))
  heads = [bytearray(cubin[o:o + _SHDR.size]) for o in range(shoff, shoff + shentsize * shnum, shentsize)]
  body, out = ptx.encode(), bytearray(cubin)
  out += bytes(-len(out) % 8)
  name_at, ptx_at = len(names), len(out)
  names += PTX_SECTION.encode() + b"\0"
  out += body
  struct.pack_into("<QQ", heads[shstrndx], 24, len(out), len(names))
  out += names
  out += bytes(-len(out) % 8)
  heads.append(bytearray(_SHDR.pack(name_at, SHT_PROGBITS, 0, 0, ptx_at, len(body), 0, 0, 1, 0)))
  struct.pack_into("<Q", out, 40, len(out))
  struct.pack_into("<HH", out, 58, _SHDR.size, shnum + 1)
  return bytes(out + b"".join(heads))


def have_ptxas() -> bool: return bool(shutil.which("ptxas") or os.path.exists(PTXAS))


def build(ptx, arch: str, ptxas: bool | None = None) -> bytes:
  """The program image of a PTX module (text, bytes) for `arch`: with ptxas (True; None: when installed) a real cubin
  plus the PTX section, else the mock-only image."""
  if arch not in PARAM_BASE:
    raise CodeObjectError(f"unknown NVIDIA target {arch!r}; expected one of {', '.join(PARAM_BASE)}")
  if ptxas is False or (ptxas is None and not have_ptxas()): return build_mock(ptx, arch)
  text = bytes(ptx).decode() if isinstance(ptx, (bytes, bytearray)) else str(ptx)
  exe = shutil.which("ptxas") or PTXAS
  with tempfile.TemporaryDirectory() as d:
    src, dst = os.path.join(d, "m.ptx"), os.path.join(d, "m.cubin")
    with open(src, "w") as f: f.write(text)
    try:
      r = subprocess.run([exe, f"-arch={arch}", "-o", dst, src], capture_output=True, text=True, timeout=300)
    except OSError as e:
      raise CodeObjectError(f"cannot run ptxas ({exe}): {e.strerror}") from None
    if r.returncode:
      raise CodeObjectError(f"ptxas -arch={arch} rejected the module:\n{r.stderr.strip()}")
    with open(dst, "rb") as f: return with_ptx(f.read(), text)
