"""AMD HSA code objects: read the ELF that clang-22/ld.lld-22 produce, write our own, and turn a `.s` into one.

Reading (`load_code_object`): e_flags -> target and xnack/sramecc, `NAME.kd` symbols -> 64-byte kernel
descriptors (kd.py), the NT_AMDGPU_METADATA note (MessagePack, msgpack.py) -> per-kernel metadata and
arguments, and the PT_LOAD segments laid out at their virtual addresses so an emulator can map the image as is.

Writing (`build_code_object`): an ET_DYN shaped like ld.lld's (.note, .dynsym, .hash, .dynstr, .rodata with the
descriptors, .text, .dynamic, .symtab/.strtab) that llvm-readelf-22 and llvm-objdump-22 accept.

Assembling (`assemble_code_object`): directives (`.amdhsa_kernel` blocks, `.amdgpu_metadata` YAML, sections,
alignment) are handled here; instruction lines go to `gputwin.isa.assemble`.
Formats: LLVM AMDGPUUsage ("ELF Code Object", "Code Object Metadata", "Kernel Descriptor").
"""
from __future__ import annotations

import ast
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from gputwin.errors import CodeObjectError, GputwinError
from gputwin.isa import elf as E
from gputwin.isa.kd import KD_SIZE, MACH_TO_TARGET, KernelDescriptor, kd_from_directives, target
from gputwin.isa.msgpack import packb, unpackb

EM_AMDGPU, ELFOSABI_AMDGPU_HSA, NT_AMDGPU_METADATA = 224, 64, 32
_FEATURE = {0x000: None, 0x100: "any", 0x200: "off", 0x300: "on"}   # xnack bits 8-9; sramecc bits 10-11 (shifted)
_FEATURE_BITS = {v: k for k, v in _FEATURE.items()}
MAX_IMAGE = 1 << 26   # refuse to lay out more than 64 MiB of segments (a corrupt p_memsz must not eat the host)


@dataclass(frozen=True)
class KernelArg:
  """One entry of a kernel's `.args` metadata (hidden arguments included; see `Kernel.user_args`)."""
  offset: int
  size: int
  value_kind: str
  name: str = ""
  type_name: str = ""
  address_space: str = ""
  is_const: bool = False
  raw: dict = field(default_factory=dict, compare=False, repr=False)

  @property
  def hidden(self) -> bool: return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class Kernel:
  """A kernel: its descriptor (register counts, initial register layout, segment sizes), where its code is, and
  its metadata (`args`, and the whole `amdhsa.kernels` entry in `metadata`)."""
  name: str
  descriptor: KernelDescriptor
  entry: int            # virtual address of the first instruction
  kd_address: int       # virtual address of the kernel descriptor
  code: bytes           # the kernel's own instructions (from its symbol size, else to the end of .text)
  args: tuple[KernelArg, ...] = ()
  metadata: dict = field(default_factory=dict, compare=False, repr=False)

  @property
  def wave_size(self) -> int: return int(self.metadata.get(".wavefront_size", self.descriptor.wave_size))
  @property
  def kernarg_size(self) -> int: return int(self.metadata.get(".kernarg_segment_size", self.descriptor.kernarg_size))
  @property
  def group_segment_size(self) -> int: return self.descriptor.group_segment_fixed_size
  @property
  def private_segment_size(self) -> int: return self.descriptor.private_segment_fixed_size
  @property
  def user_args(self) -> tuple[KernelArg, ...]: return tuple(a for a in self.args if not a.hidden)


@dataclass(frozen=True)
class CodeObject:
  path: str
  arch: str
  xnack: str | None     # "on" / "off" / "any", None where the target has no such feature
  sramecc: str | None
  version: int          # code object version (4, 5, 6)
  e_flags: int
  kernels: dict[str, Kernel]
  text: bytes           # the whole .text section ...
  text_address: int     # ... and where it is loaded
  image: bytes = field(repr=False, default=b"")  # all PT_LOAD segments at their virtual addresses, from address 0
  metadata: dict = field(default_factory=dict, repr=False)
  symbols: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)  # name -> (address, size)

  @property
  def target_id(self) -> str: return _target_id(self.arch, self.xnack, self.sramecc)

  def kernel(self, name: str) -> Kernel:
    if name not in self.kernels:
      raise CodeObjectError(f"[{self.arch}] no kernel {name!r} (has: {', '.join(self.kernels) or 'none'})", self.path,
                            kernel=name)
    return self.kernels[name]


def _target_id(arch: str, xnack: str | None, sramecc: str | None) -> str:
  feats = "".join(f":{n}{'+' if v == 'on' else '-'}" for n, v in (("sramecc", sramecc), ("xnack", xnack))
                  if v in ("on", "off"))
  return f"amdgcn-amd-amdhsa--{arch}{feats}"


# ---------------------------------------------------------------------------------------------------------------
# Reading

def load_code_object(data: bytes | str | Path, *, arch: str | None = None, require_metadata: bool = True) -> CodeObject:
  """Parse an AMD HSA code object: ET_DYN (ld.lld-22, `build_code_object`) or a relocatable clang-22 -c `.o`; a path
  ending in `.s` is assembled first (`assemble_code_object`, target from `arch` or its `.amdgcn_target`).
  Anything wrong with the input raises CodeObjectError naming the file; nothing else escapes. `arch`, when given,
  must be the object's target. Without the metadata note (llvm-mc output with no `.amdgpu_metadata`) pass
  require_metadata=False to get the kernels from their descriptors alone."""
  path = "<bytes>"
  if isinstance(data, (str, Path)):
    path = str(data)
    try: data = Path(data).read_bytes()
    except OSError as e: raise CodeObjectError(f"cannot read: {e.strerror}", path) from None
    if path.endswith((".s", ".S", ".asm")):
      text = data.decode(errors="replace")
      m = re.search(r'^\s*\.amdgcn_target\s+"[^"]*--(gfx\w+)', text, re.M)
      if arch is None and m is None: raise CodeObjectError("no .amdgcn_target in the file: pass arch=", path)
      data = assemble_code_object(text, arch or m.group(1), path=path)
  try:
    co = _load(bytes(data), path, require_metadata)
    if arch is not None and co.arch != arch: raise CodeObjectError(f"code object is for {co.arch}, not {arch}")
    return co
  except CodeObjectError as e:
    if not e.path: e.path, e.args = path, (f"{path}: {e}",)
    raise
  except GputwinError as e: raise CodeObjectError(str(e), path) from e
  except Exception as e:  # corrupt bytes: elf.ElfError, struct.error, ValueError, IndexError...
    raise CodeObjectError(f"malformed ELF ({type(e).__name__}: {e})", path) from e


def _load(data: bytes, path: str, require_metadata: bool) -> CodeObject:
  if len(data) < 64 or data[:4] != b"\x7fELF":
    raise CodeObjectError("not an ELF file (bad magic or shorter than a header)")
  if data[4] != 2 or data[5] != 1: raise CodeObjectError("not a little-endian ELF64 file")
  machine, = struct.unpack_from("<H", data, 18)
  if machine != EM_AMDGPU:
    raise CodeObjectError(f"wrong machine: e_machine={machine}, expected EM_AMDGPU ({EM_AMDGPU})")
  if data[7] != ELFOSABI_AMDGPU_HSA: raise CodeObjectError(f"not an HSA code object: EI_OSABI={data[7]}, expected 64")
  if not 1 <= data[8] <= 4: raise CodeObjectError(f"unsupported code object version (EI_ABIVERSION={data[8]})")
  elf = E.ElfFile(data)
  flags = elf.e_flags
  t = MACH_TO_TARGET.get(flags & 0xff)
  if t is None: raise CodeObjectError(f"unsupported processor EF_AMDGPU_MACH={flags & 0xff:#x} (e_flags={flags:#x})")
  xnack, sramecc = _FEATURE[flags & 0x300], _FEATURE[(flags >> 2) & 0x300]
  if elf.e_type not in (E.ET_DYN, E.ET_EXEC, E.ET_REL):
    raise CodeObjectError(f"unsupported ELF type {_ET_NAMES.get(elf.e_type, elf.e_type)}")
  image, syms, (text, text_va) = (_place_relocatable if elf.e_type == E.ET_REL else _place_linked)(elf, data)
  funcs = {v: (n, sz) for n, (v, sz, ty) in syms.items() if ty == "STT_FUNC"}

  def mem(va: int, n: int, what: str) -> bytes:
    if va < 0 or va + n > len(image): raise CodeObjectError(f"{what} at {va:#x}+{n} is outside the loaded image")
    return bytes(image[va:va + n])

  meta = _metadata(elf)
  if meta is None and require_metadata:
    raise CodeObjectError("no NT_AMDGPU_METADATA note (kernel arguments unknown); pass require_metadata=False to load "
                          "descriptors only")
  meta = meta or {}
  mkernels = meta.get("amdhsa.kernels", [])
  if not isinstance(mkernels, list) or not all(isinstance(k, dict) for k in mkernels):
    raise CodeObjectError("metadata: amdhsa.kernels is not a list of maps")
  by_symbol = {str(k.get(".symbol", f"{k.get('.name')}.kd")): k for k in mkernels}

  kernels = {}
  for sname, (kd_va, _, ty) in syms.items():
    if not sname.endswith(".kd") or ty != "STT_OBJECT": continue
    name = sname[:-3]
    kd = KernelDescriptor.decode(mem(kd_va, KD_SIZE, f"kernel descriptor {sname}"), t.name)
    entry = kd_va + kd.kernel_code_entry_byte_offset
    if not text_va <= entry < text_va + len(text):
      raise CodeObjectError(f"kernel {name}: entry {entry:#x} is outside .text [{text_va:#x}, "
                            f"{text_va + len(text):#x})",
                            kernel=name)
    size = funcs.get(entry, (name, 0))[1] or text_va + len(text) - entry
    md = by_symbol.get(sname)
    if md is None and require_metadata: raise CodeObjectError(f"kernel {name} has no metadata entry", kernel=name)
    md = md or {}
    args = tuple(_arg(a, name) for a in md.get(".args", []))
    kernels[name] = Kernel(name, kd, entry, kd_va, mem(entry, min(size, text_va + len(text) - entry), f"{name} code"),
                           args, md)
  missing = [s for s in by_symbol if s[:-3] not in kernels]
  if missing: raise CodeObjectError(f"metadata names kernels without a descriptor symbol: {', '.join(missing)}")
  return CodeObject(path, t.name, xnack, sramecc, data[8] + 2, flags, kernels, bytes(text), text_va, bytes(image),
                    meta, {n: (v, sz) for n, (v, sz, _) in syms.items()})


_ET_NAMES = {0: "ET_NONE", 4: "ET_CORE"}
_STT_NAMES = {0: "STT_NOTYPE", E.STT_OBJECT: "STT_OBJECT", E.STT_FUNC: "STT_FUNC", 3: "STT_SECTION", 4: "STT_FILE",
              5: "STT_COMMON", 6: "STT_TLS"}
Placed = tuple[bytearray, dict[str, tuple[int, int, str]], tuple[bytes, int]]   # image, symbols, (.text, address)


def _symbols(elf, address) -> dict[str, tuple[int, int, str]]:
  """name -> (address, size, type) from .symtab (it also has local labels), else .dynsym."""
  symtab = elf.section_by_name(".symtab") or elf.section_by_name(".dynsym")
  if symtab is None or symtab.sh_type not in (E.SHT_SYMTAB, E.SHT_DYNSYM):
    raise CodeObjectError("no .symtab or .dynsym: cannot find kernels")
  out = {}
  for sym in elf.symbols(symtab):
    va = address(sym)
    if sym.name and va is not None: out[sym.name] = (va, sym.st_size, _STT_NAMES.get(sym.st_type, str(sym.st_type)))
  return out


def _place_linked(elf, data: bytes) -> Placed:
  """ET_DYN (ld.lld output, ours): the PT_LOAD segments at their virtual addresses."""
  loads = [s for s in elf.segments if s.p_type == E.PT_LOAD]
  if not loads: raise CodeObjectError("no PT_LOAD segment")
  top = max(s.p_vaddr + s.p_memsz for s in loads)
  if top > MAX_IMAGE: raise CodeObjectError(f"segments reach {top:#x}, beyond the {MAX_IMAGE:#x}-byte limit")
  image = bytearray(top)
  for s in loads:
    if s.p_filesz > s.p_memsz or s.p_offset + s.p_filesz > len(data):
      raise CodeObjectError(f"PT_LOAD at {s.p_vaddr:#x} lies outside the file")
    image[s.p_vaddr:s.p_vaddr + s.p_filesz] = data[s.p_offset:s.p_offset + s.p_filesz]
  text_sec = elf.section_by_name(".text")
  if text_sec is not None and text_sec.sh_type != E.SHT_NOBITS: text = (elf.section_data(text_sec), text_sec.sh_addr)
  else:
    seg = next((s for s in loads if s.p_flags & 1), None)
    if seg is None: raise CodeObjectError("no .text section and no executable segment")
    text = (bytes(image[seg.p_vaddr:seg.p_vaddr + seg.p_filesz]), seg.p_vaddr)
  return image, _symbols(elf, lambda s: s.st_value if s.st_shndx != E.SHN_UNDEF else None), text


# R_AMDGPU_* relocation types -> (bytes written, value(S, A, P)); AMDGPUUsage "Relocation Records".
_RELOCS = {1: (4, lambda s, a, p: (s + a) & 0xffffffff), 2: (4, lambda s, a, p: (s + a) >> 32),
           3: (8, lambda s, a, p: s + a), 4: (4, lambda s, a, p: s + a - p), 5: (8, lambda s, a, p: s + a - p),
           6: (4, lambda s, a, p: s + a), 10: (4, lambda s, a, p: (s + a - p) & 0xffffffff),
           11: (4, lambda s, a, p: (s + a - p) >> 32)}


def _place_relocatable(elf, data: bytes) -> Placed:
  """ET_REL (clang -c output): lay the SHF_ALLOC sections out one after another and apply the relocations (the
  kernel descriptors' entry offsets are R_AMDGPU_REL64), a minimal static link with no dynamic symbols."""
  base, top = {}, 0
  for i, sec in enumerate(elf.sections):
    if sec.sh_flags & E.SHF_ALLOC:
      top = -(-top // max(1, sec.sh_addralign)) * max(1, sec.sh_addralign)
      base[i], top = top, top + sec.sh_size
  if top > MAX_IMAGE: raise CodeObjectError(f"sections need {top:#x} bytes, beyond the {MAX_IMAGE:#x}-byte limit")
  image = bytearray(top)
  for i, b in base.items():
    sec = elf.sections[i]
    if sec.sh_type != E.SHT_NOBITS:
      if sec.sh_offset + sec.sh_size > len(data):
        raise CodeObjectError(f"section {sec.name} lies outside the file")
      image[b:b + sec.sh_size] = elf.section_data(sec)
  def address(sym) -> int | None:
    return base[sym.st_shndx] + sym.st_value if sym.st_shndx < E.SHN_LORESERVE and sym.st_shndx in base else None
  for rel in elf.sections:
    if rel.sh_type not in (E.SHT_RELA, E.SHT_REL) or rel.sh_info not in base: continue
    symbols = elf.symbols(elf.section(rel.sh_link))
    for r in elf.relocations(rel):
      kind = r.r_type
      if r.r_sym >= len(symbols): raise CodeObjectError(f"relocation in {rel.name} names symbol {r.r_sym}, "
                                                         f"past the {len(symbols)} of its symbol table")
      sym = symbols[r.r_sym]
      if kind not in _RELOCS: raise CodeObjectError(f"relocation type {kind} in {rel.name} is not supported")
      s = address(sym)
      if s is None: raise CodeObjectError(f"relocation in {rel.name} against undefined symbol {sym.name!r}")
      p = base[rel.sh_info] + r.r_offset
      size, value = _RELOCS[kind]
      if p + size > len(image): raise CodeObjectError(f"relocation at {p:#x} in {rel.name} is outside its section")
      v = value(s, r.r_addend, p) & ((1 << 8 * size) - 1)
      image[p:p + size] = v.to_bytes(size, "little")
  text_i = next((i for i, sec in enumerate(elf.sections) if sec.name == ".text" and i in base), None)
  if text_i is None: raise CodeObjectError("no .text section")
  tsec = elf.sections[text_i]
  return image, _symbols(elf, address), (bytes(image[base[text_i]:base[text_i] + tsec.sh_size]), base[text_i])


def _metadata(elf) -> dict | None:
  for sec in elf.sections:
    if sec.sh_type != E.SHT_NOTE: continue
    for note in elf.notes(sec):
      if note.name == "AMDGPU" and note.type == NT_AMDGPU_METADATA:
        doc = unpackb(note.desc)
        if not isinstance(doc, dict): raise CodeObjectError("metadata note is not a MessagePack map")
        return doc
  return None


def _arg(a: object, kernel: str) -> KernelArg:
  if not isinstance(a, dict) or not all(isinstance(a.get(k), int) for k in (".offset", ".size")) \
     or not isinstance(a.get(".value_kind"), str):
    raise CodeObjectError(f"kernel {kernel}: malformed argument metadata {a!r}", kernel=kernel)
  return KernelArg(a[".offset"], a[".size"], a[".value_kind"], str(a.get(".name", "")), str(a.get(".type_name", "")),
                   str(a.get(".address_space", "")), bool(a.get(".is_const", False)), a)


# ---------------------------------------------------------------------------------------------------------------
# Writing

@dataclass(frozen=True)
class KernelSpec:
  """A kernel to put into `build_code_object`: its entry offset in `text`, descriptor and metadata map (the
  `amdhsa.kernels` entry; missing keys are filled from the descriptor)."""
  name: str
  offset: int
  descriptor: KernelDescriptor
  metadata: dict | None = None
  size: int | None = None


def _elf_hash(name: bytes) -> int:
  h = 0
  for c in name:
    h = ((h << 4) + c) & 0xffffffff
    h ^= (h >> 24) & 0xf0
  return h & 0x0fffffff


def kernel_metadata(k: KernelSpec, arch: str, **counts: int) -> dict:
  """The `amdhsa.kernels` entry for `k`: its own metadata over defaults taken from the descriptor."""
  kd = k.descriptor
  base = {
    ".name": k.name, ".symbol": f"{k.name}.kd", ".args": [], ".kernarg_segment_size": kd.kernarg_size,
    ".kernarg_segment_align": 8, ".group_segment_fixed_size": kd.group_segment_fixed_size,
    ".private_segment_fixed_size": kd.private_segment_fixed_size, ".wavefront_size": kd.wave_size,
    ".sgpr_count": counts.get("sgpr_count", kd.sgpr_count), ".vgpr_count": counts.get("vgpr_count", kd.vgpr_count),
    ".max_flat_workgroup_size": 1024, ".sgpr_spill_count": 0, ".vgpr_spill_count": 0,
    ".uses_dynamic_stack": bool(kd.uses_dynamic_stack)}
  if target(arch).gfx90a: base[".agpr_count"] = counts.get("agpr_count", 0)
  return dict(sorted({**base, **(k.metadata or {})}.items()))


def build_code_object(arch: str, text: bytes, kernels: list[KernelSpec], *, metadata: dict | None = None,
                      version: int = 6, xnack: str | None = "default", sramecc: str | None = "default") -> bytes:
  """Write a loadable code object. `metadata` is the whole metadata document; None builds one from the kernels.
  The writer fills each descriptor's kernel_code_entry_byte_offset. xnack/sramecc: "on"/"off"/"any"; "default"
  is "any" where the target has the feature (what clang-22 and llvm-mc-22 write), None where it has not."""
  t = target(arch)
  if version not in (4, 5, 6): raise CodeObjectError(f"code object version {version} not supported (4, 5, 6)")
  xnack = ("any" if t.xnack else None) if xnack == "default" else xnack
  sramecc = ("any" if t.sramecc else None) if sramecc == "default" else sramecc
  names = [k.name for k in kernels]
  if len(set(names)) != len(names): raise CodeObjectError(f"duplicate kernel names in {names}")
  for k in kernels:
    if not 0 <= k.offset < max(len(text), 1):
      raise CodeObjectError(f"kernel {k.name}: entry {k.offset:#x} outside text")
  if metadata is None:
    metadata = {"amdhsa.kernels": [kernel_metadata(k, arch) for k in kernels],
                "amdhsa.target": _target_id(arch, xnack, sramecc),
                "amdhsa.version": [1, 1 if version == 4 else 2]}
  desc = packb(metadata)
  note = struct.pack("<III", 7, len(desc), NT_AMDGPU_METADATA) + b"AMDGPU\0\0" + desc + bytes(-len(desc) % 4)

  # Strings and symbols: every kernel has FUNC `name` in .text and OBJECT `name.kd` in .rodata, both GLOBAL PROTECTED.
  strtab = bytearray(b"\0")
  def add_str(s: str) -> int: strtab.extend(s.encode() + b"\0"); return len(strtab) - len(s.encode()) - 1
  symnames = [(add_str(k.name), add_str(f"{k.name}.kd")) for k in kernels]
  nsym = 1 + 2 * len(kernels)
  shnames = bytearray(b"\0")
  def sh_name(s: str) -> int: shnames.extend(s.encode() + b"\0"); return len(shnames) - len(s) - 1

  # Layout: [ehdr, phdrs, .note, .dynsym, .hash, .dynstr, .rodata] R | [.text] RX | [.dynamic] RW | non-alloc.
  # As ld.lld does, each new segment starts a new page in memory: VA = file offset + segment index * 0x1000.
  nph = 5
  out = bytearray(64 + 56 * nph)
  def place(data: bytes, align: int, va_bias: int) -> tuple[int, int]:
    out.extend(bytes(-len(out) % align)); off = len(out); out.extend(data); return off, off + va_bias
  note_off, note_va = place(note, 4, 0)
  dynsym_off, dynsym_va = place(bytes(24 * nsym), 8, 0)   # filled once addresses are known
  # SysV .hash over .dynsym: bucket[h % nbucket] heads a chain of symbol indices.
  symbol_names = [""] + [n for k in kernels for n in (k.name, f"{k.name}.kd")]
  nbucket = max(1, nsym)
  buckets, chains = [0] * nbucket, [0] * nsym
  for idx in range(1, nsym):
    b = _elf_hash(symbol_names[idx].encode()) % nbucket
    chains[idx], buckets[b] = buckets[b], idx
  hash_words = [nbucket, nsym, *buckets, *chains]
  hash_off, hash_va = place(struct.pack(f"<{len(hash_words)}I", *hash_words), 4, 0)
  dynstr_off, dynstr_va = place(bytes(strtab), 1, 0)
  kd_off, kd_va = place(bytes(KD_SIZE * len(kernels)), 64, 0)
  ro_end = len(out)
  text_off, text_va = place(text, 256, 0x1000)
  dyn_entries = [(4, hash_va), (5, dynstr_va), (6, dynsym_va), (10, len(strtab)), (11, 24), (0, 0)]
  dyn_off, dyn_va = place(b"".join(struct.pack("<qQ", *e) for e in dyn_entries), 8, 0x2000)

  # Section headers: (name, type, flags, addr, offset, size, link, info, align, entsize); links by name.
  A, X, W = 2, 4, 1
  secs = [("", 0, 0, 0, 0, 0, "", 0, 0, 0),
          (".note", 7, A, note_va, note_off, len(note), "", 0, 4, 0),
          (".dynsym", 11, A, dynsym_va, dynsym_off, 24 * nsym, ".dynstr", 1, 8, 24),
          (".hash", 5, A, hash_va, hash_off, 4 * len(hash_words), ".dynsym", 0, 4, 4),
          (".dynstr", 3, A, dynstr_va, dynstr_off, len(strtab), "", 0, 1, 0),
          (".rodata", 1, A, kd_va, kd_off, KD_SIZE * len(kernels), "", 0, 64, 0),
          (".text", 1, A | X, text_va, text_off, len(text), "", 0, 256, 0),
          (".dynamic", 6, A | W, dyn_va, dyn_off, 16 * len(dyn_entries), ".dynstr", 0, 8, 16),
          (".symtab", 2, 0, 0, 0, 24 * nsym, ".strtab", 1, 8, 24),
          (".strtab", 3, 0, 0, 0, len(strtab), "", 0, 1, 0),
          (".shstrtab", 3, 0, 0, 0, 0, "", 0, 1, 0)]
  index = {s[0]: i for i, s in enumerate(secs)}

  # Kernel descriptors and symbols now that addresses are fixed.
  sym = [bytes(24)]
  for i, k in enumerate(kernels):
    kva = kd_va + KD_SIZE * i
    kd = k.descriptor.replace(kernel_code_entry_byte_offset=text_va + k.offset - kva)
    out[kd_off + KD_SIZE * i:kd_off + KD_SIZE * (i + 1)] = kd.encode()
    end = min([kk.offset for kk in kernels if kk.offset > k.offset] + [len(text)])
    size = k.size if k.size is not None else end - k.offset
    sym.append(struct.pack("<IBBHQQ", symnames[i][0], 0x12, 3, index[".text"], text_va + k.offset, size))  # GLOBAL FUNC
    sym.append(struct.pack("<IBBHQQ", symnames[i][1], 0x11, 3, index[".rodata"], kva, KD_SIZE))  # GLOBAL OBJECT
  symbytes = b"".join(sym)
  out[dynsym_off:dynsym_off + len(symbytes)] = symbytes
  symtab_off, _ = place(symbytes, 8, 0)
  strtab_off, _ = place(bytes(strtab), 1, 0)
  name_offs = [sh_name(s[0]) if s[0] else 0 for s in secs]
  shstr_off, _ = place(bytes(shnames), 1, 0)
  at = {".symtab": (symtab_off, len(symbytes)), ".strtab": (strtab_off, len(strtab)),
        ".shstrtab": (shstr_off, len(shnames))}
  secs = [sec[:4] + at.get(sec[0], sec[4:6]) + (index[sec[6]] if sec[6] else 0,) + sec[7:] for sec in secs]
  out.extend(bytes(-len(out) % 8))
  shoff = len(out)
  for n, s in zip(name_offs, secs):
    out.extend(struct.pack("<IIQQQQIIQQ", n, s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9]))

  phdrs = [(1, 4, 0, 0, ro_end, ro_end, 0x1000),                                   # LOAD R
           (1, 5, text_off, text_va, len(text), len(text), 0x1000),                # LOAD R+X
           (1, 6, dyn_off, dyn_va, 16 * len(dyn_entries), 16 * len(dyn_entries), 0x1000),  # LOAD R+W
           (2, 6, dyn_off, dyn_va, 16 * len(dyn_entries), 16 * len(dyn_entries), 8),        # DYNAMIC
           (4, 4, note_off, note_va, len(note), len(note), 4)]                      # NOTE
  for i, (ty, fl, off, va, fsz, msz, al) in enumerate(phdrs):
    struct.pack_into("<IIQQQQQQ", out, 64 + 56 * i, ty, fl, off, va, va, fsz, msz, al)
  e_flags = t.mach | _FEATURE_BITS[xnack if t.xnack else None] | (_FEATURE_BITS[sramecc if t.sramecc else None] << 2)
  ident = b"\x7fELF" + bytes([2, 1, 1, ELFOSABI_AMDGPU_HSA, version - 2]) + bytes(7)
  out[0:64] = ident + struct.pack("<HHIQQQIHHHHHH", 3, EM_AMDGPU, 1, 0, 64, shoff, e_flags, 64, 56, nph, 64, len(secs),
                                  len(secs) - 1)
  return bytes(out)


# ---------------------------------------------------------------------------------------------------------------
# `.amdgpu_metadata` YAML: the block style LLVM prints (maps, "- " sequences, plain/quoted scalars, [a, b] lists).

def _yaml_scalar(s: str, where: str) -> object:
  s = s.strip()
  if s[:1] == "'" and s[-1:] == "'" and len(s) > 1: return s[1:-1].replace("''", "'")
  if s[:1] == '"' and s[-1:] == '"' and len(s) > 1:
    try: return ast.literal_eval(s)
    except (ValueError, SyntaxError): raise CodeObjectError(f"{where}: bad quoted string {s}") from None
  if s[:1] == "[" and s[-1:] == "]": return [_yaml_scalar(x, where) for x in s[1:-1].split(",") if x.strip()]
  if s == "{}": return {}
  if s in ("true", "True"): return True
  if s in ("false", "False"): return False
  if s in ("~", "null", ""): return None
  if re.fullmatch(r"[-+]?(0x[0-9a-fA-F]+|0o[0-7]+|\d+)", s):
    return int(s) if re.fullmatch(r"[-+]?0\d+", s) else int(s, 0)
  if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", s): return float(s)
  return s


_KEY = re.compile(r"""('(?:[^']|'')*'|"[^"]*"|[^\s'"#][^:#]*?)\s*:(?:\s+|$)""")


def parse_metadata_yaml(text: str, first_line: int = 1) -> dict:
  """Parse an `.amdgpu_metadata` block into the document LLVM would put into the note."""
  rows = []   # (indent, text, line)
  for i, raw in enumerate(text.splitlines()):
    body = _strip_comment(raw, "#")
    if body.strip() in ("", "---", "...") or body.lstrip().startswith("#"): continue
    if "\t" in body[:len(body) - len(body.lstrip())]:
      raise CodeObjectError(f"line {first_line + i}: tab in YAML indent")
    rows.append((len(body) - len(body.lstrip()), body.strip(), first_line + i))
  pos = 0

  def block(indent: int) -> object:
    nonlocal pos
    if rows[pos][1].startswith("- ") or rows[pos][1] == "-":
      out = []
      while pos < len(rows) and rows[pos][0] == indent and (rows[pos][1].startswith("- ") or rows[pos][1] == "-"):
        ind, body, line = rows[pos]
        rest = body[1:].lstrip()
        if not rest:
          pos += 1; out.append(block(rows[pos][0]) if pos < len(rows) and rows[pos][0] > indent else None)
        elif _KEY.match(rest):   # "- key: value" starts a map at the item's column
          rows[pos] = (ind + len(body) - len(rest), rest, line); out.append(block(rows[pos][0]))
        else: out.append(_yaml_scalar(rest, f"line {line}")); pos += 1
      return out
    out = {}
    while pos < len(rows) and rows[pos][0] == indent and not rows[pos][1].startswith("- "):
      _, body, line = rows[pos]
      m = _KEY.match(body)
      if not m: raise CodeObjectError(f"line {line}: expected 'key: value' in .amdgpu_metadata, got {body!r}")
      key = _yaml_scalar(m.group(1), f"line {line}")
      rest, pos = body[m.end():], pos + 1
      if rest.strip(): out[key] = _yaml_scalar(rest, f"line {line}")
      elif pos < len(rows) and (rows[pos][0] > indent or (rows[pos][0] == indent and rows[pos][1].startswith("- "))):
        out[key] = block(rows[pos][0])
      else: out[key] = None
    return out

  if not rows: return {}
  doc = block(rows[0][0])
  if pos != len(rows): raise CodeObjectError(f"line {rows[pos][2]}: unexpected indentation in .amdgpu_metadata")
  if not isinstance(doc, dict): raise CodeObjectError(f"line {first_line}: .amdgpu_metadata must be a map")
  return doc


# ---------------------------------------------------------------------------------------------------------------
# `.s` -> code object

_LABEL = re.compile(r"\s*([A-Za-z_.$][\w.$@]*|\"[^\"]+\")\s*:(?!:)")
_IGNORED = {".globl", ".global", ".protected", ".hidden", ".local", ".weak", ".type", ".size", ".file", ".ident",
            ".addrsig", ".addrsig_sym", ".loc", ".amdgpu_hsa_kernel", ".end_amdgpu_hsa_kernel"}
_DATA = {".byte", ".short", ".hword", ".2byte", ".long", ".int", ".4byte", ".quad", ".8byte", ".word", ".ascii",
         ".asciz", ".string", ".zero", ".space", ".fill"}
_NOP = "s_nop 0"   # what llvm-mc-22 pads code alignment with on every AMDGPU target
_DATA_SIZE = {".byte": 1, ".short": 2, ".hword": 2, ".2byte": 2, ".long": 4, ".int": 4, ".4byte": 4, ".word": 4,
              ".quad": 8, ".8byte": 8}


def _data(word: str, arg: str, symbols: dict[str, int], where: str) -> bytes:
  """Bytes of a data directive in .text (`.long 0xbf9f0000`, `.fill 96, 4, 0xbf9f0000`, `.zero 8`...)."""
  args = [a for a in arg.split(",") if a.strip()] if word not in (".ascii", ".asciz", ".string") else [arg]
  if word in (".ascii", ".asciz", ".string"):
    try: s = ast.literal_eval(arg.strip())
    except (ValueError, SyntaxError): raise CodeObjectError(f"{where}: bad string {arg!r}") from None
    return s.encode() + (b"\0" if word != ".ascii" else b"")
  vals = [_eval(a, symbols, where) for a in args]
  if word in (".zero", ".space"): return bytes([vals[1] & 0xff if len(vals) > 1 else 0]) * vals[0]
  if word == ".fill":
    count, size, value = (vals + [1, 0])[:3] if len(vals) >= 1 else (0, 1, 0)
    if not 0 <= size <= 8 or not 0 <= count <= 1 << 20: raise CodeObjectError(f"{where}: bad .fill {arg!r}")
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little") * count
  n = _DATA_SIZE[word]
  return b"".join((v & ((1 << (8 * n)) - 1)).to_bytes(n, "little") for v in vals)


@dataclass
class AsmSource:
  """A `.s` file split into what this module handles (descriptor blocks, metadata, layout) and instruction lines."""
  arch: str
  version: int = 6
  xnack: str | None = None
  sramecc: str | None = None
  items: list[tuple[str, object, int]] = field(default_factory=list)   # ("inst"|"label"|"align", value, line)
  kernels: list[tuple[str, list[tuple[str, int, int]], int]] = field(default_factory=list)  # name, directives, line
  metadata: tuple[str, int] | None = None   # YAML text, first line
  symbols: dict[str, int] = field(default_factory=dict)


def _strip_comment(line: str, yaml: str = "") -> str:
  """`line` without its comment: `;` or `//` in assembly, `yaml`="#" (after a blank or at the start) in YAML."""
  quote = None
  for i, c in enumerate(line):
    if quote: quote = None if c == quote else quote
    elif c in "\"'": quote = c
    elif (not yaml and (c == ";" or line.startswith("//", i))) or (c == yaml and (i == 0 or line[i - 1] in " \t")):
      return line[:i].rstrip()
  return line.rstrip()


def _eval(expr: str, symbols: dict[str, int], where: str) -> int:
  """Evaluate an integer directive operand: literals, .set symbols, + - * / % << >> & | ^ ~ ( ), max(), min()."""
  def sub(m: re.Match) -> str:
    name = m.group(0)
    if name in ("max", "min") and expr[m.end():].lstrip().startswith("("): return name
    if name not in symbols: raise CodeObjectError(f"{where}: unknown symbol {name!r} in expression {expr!r}")
    return str(symbols[name])
  py = re.sub(r"(?<![\w.$])(?!0[xXbBoO]|\d)[A-Za-z_.$][\w.$]*", sub, expr.strip())
  try: tree = ast.parse(py, mode="eval")
  except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a null byte; the rest: deep nesting
    raise CodeObjectError(f"{where}: cannot parse expression {expr[:80]!r}") from None
  ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
         ast.Div: lambda a, b: int(a / b), ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
         ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
         ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b}

  def ev(n: ast.AST) -> int:
    if isinstance(n, ast.Expression): return ev(n.body)
    if isinstance(n, ast.Constant) and type(n.value) is int: return n.value
    if isinstance(n, ast.BinOp) and type(n.op) in ops:
      a, b = ev(n.left), ev(n.right)
      if isinstance(n.op, (ast.LShift, ast.RShift)) and not 0 <= b < 64: raise ValueError("shift out of range")
      return ops[type(n.op)](a, b)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd, ast.Invert)):
      v = ev(n.operand); return -v if isinstance(n.op, ast.USub) else ~v if isinstance(n.op, ast.Invert) else v
    if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("max", "min") and n.args and not n.keywords:
      return (max if n.func.id == "max" else min)(ev(a) for a in n.args)
    raise ValueError(f"unsupported {type(n).__name__}")
  try: return ev(tree)
  except (ValueError, ZeroDivisionError, RecursionError, MemoryError) as e:  # ValueError: also > 4300 digits
    raise CodeObjectError(f"{where}: bad expression {expr[:80]!r}: {str(e)[:80]}") from None


def parse_asm(text: str, arch: str, path: str = "<asm>") -> AsmSource:
  """Split `.s` text into directive data and the instruction/label/alignment stream (no instruction is encoded)."""
  t = target(arch)
  src = AsmSource(arch, xnack="any" if t.xnack else None, sramecc="any" if t.sramecc else None)
  section, block, meta = "text", None, None
  lines = text.splitlines()
  for ln, raw in enumerate(lines, 1):
    where = f"{path}:{ln}"
    if meta is not None:
      if raw.strip() == ".end_amdgpu_metadata": src.metadata, meta = ("\n".join(meta[0]), meta[1]), None
      else: meta[0].append(raw)
      continue
    line = _strip_comment(raw).strip()
    if block is not None:
      if not line: continue
      if line == ".end_amdhsa_kernel": src.kernels.append(block); block = None; continue
      d, arg = (line.split(None, 1) + [""])[:2]
      if not d.startswith(".amdhsa_"): raise CodeObjectError(f"{where}: {d!r} inside .amdhsa_kernel {block[0]}")
      if not arg: raise CodeObjectError(f"{where}: {d} needs a value")
      block[1].append((d, _eval(arg, src.symbols, where), ln))
      continue
    while m := _LABEL.match(line):   # labels, possibly several, possibly followed by an instruction
      if section == "text": src.items.append(("label", m.group(1).strip('"'), ln))
      line = line[m.end():].strip()
    if not line: continue
    word, arg = (line.split(None, 1) + [""])[:2]
    if not word.startswith("."):
      if section != "text": raise CodeObjectError(f"{where}: instruction outside .text (section {section})")
      src.items.append(("inst", line, ln)); continue
    if word == ".amdgcn_target":
      tid = arg.strip('"').split("--")[-1].split(":")
      if tid[0] != arch: raise CodeObjectError(f"{where}: .amdgcn_target is {tid[0]} but assembling for {arch}")
      for f in tid[1:]:
        name, sign = f[:-1], f[-1:]
        if name not in ("xnack", "sramecc") or sign not in "+-" or not getattr(t, name):
          raise CodeObjectError(f"{where}: target feature {f!r} not supported on {arch}")
        setattr(src, name, "on" if sign == "+" else "off")
    elif word == ".amdhsa_code_object_version":
      src.version = _eval(arg, src.symbols, where)
      if src.version not in (4, 5, 6):
        raise CodeObjectError(f"{where}: code object version {src.version} not supported")
    elif word == ".amdhsa_kernel": block = (arg.strip(), [], ln)
    elif word == ".amdgpu_metadata": meta = ([], ln + 1)
    elif word in (".set", ".equ"):
      name, _, expr = arg.partition(",")
      try: src.symbols[name.strip()] = _eval(expr, src.symbols, where)
      except CodeObjectError: pass   # unevaluable symbols (label arithmetic) only matter if a directive uses them
    elif word == ".text" or (word == ".section" and arg.split(",")[0].strip().strip('"').startswith(".text")):
      section = "text"
    elif word in (".section", ".rodata", ".data", ".bss", ".pushsection", ".popsection"):
      section = arg.split(",")[0].strip().strip('"') if word in (".section", ".pushsection") else word
    elif word in (".p2align", ".align", ".balign", ".p2alignl"):
      args = [_eval(a, src.symbols, where) for a in arg.split(",")]
      if not 0 <= args[0] <= (16 if word.startswith(".p2align") else 1 << 16):  # before 1 << n: no huge shifts
        raise CodeObjectError(f"{where}: bad alignment {arg!r}")
      size = 1 << args[0] if word.startswith(".p2align") else args[0]
      if size <= 0 or size & (size - 1) or size > 1 << 16: raise CodeObjectError(f"{where}: bad alignment {arg!r}")
      if section == "text":   # code pads with s_nop 0; .p2alignl pads with the given 32-bit word
        src.items.append(("align", (size, args[1] & 0xffffffff if word == ".p2alignl" and len(args) > 1 else None), ln))
    elif word in _IGNORED or word.startswith(".cfi_"): pass
    elif word in _DATA:
      if section != "text": raise CodeObjectError(f"{where}: data in section {section} is not supported (only .text)")
      src.items.append(("data", _data(word, arg, src.symbols, where), ln))
    else: raise CodeObjectError(f"{where}: unsupported directive {word}")
  if block is not None: raise CodeObjectError(f"{path}:{block[2]}: .amdhsa_kernel {block[0]} has no .end_amdhsa_kernel")
  if meta is not None: raise CodeObjectError(f"{path}:{meta[1] - 1}: .amdgpu_metadata has no .end_amdgpu_metadata")
  return src


def _layout(src: AsmSource, wave: int, want: set[str], path: str) -> tuple[bytes, dict[str, int]]:
  """Assemble the instruction stream, padding alignment with s_nop 0, and find the offsets of the `want` labels.
  The instruction assembler only returns bytes, so a label's offset is the size of everything before it; labels
  defined later are appended as empty labels so forward branches still resolve (branch sizes never depend on them).
  Data in .text (s_code_end padding from clang) splits the stream into pieces assembled one after another."""
  try: from gputwin.isa import assemble
  except ImportError:
    try: from gputwin.isa.asm import assemble
    except ImportError as e: raise CodeObjectError(f"instruction assembler unavailable: {e}") from None
  from gputwin.errors import AsmError
  all_labels = [v for k, v, _ in src.items if k == "label"]
  done, lines, where = bytearray(), [], []
  defined, offsets, cache = set(), {}, (-1, 0)

  def run(extra: list[str]) -> bytes:
    if not lines and not extra: return b""
    try: return assemble("\n".join(lines + extra), src.arch, wave=wave)
    except AsmError as e:
      line = where[e.line - 1] if 0 < e.line <= len(where) else 0
      raise AsmError(e.msg, line, e.col, e.text, e.arch or src.arch) from None

  def size() -> int:
    nonlocal cache
    if cache[0] != len(lines): cache = (len(lines), len(run([f"{lb}:" for lb in all_labels if lb not in defined])))
    return len(done) + cache[1]

  def flush(data: bytes) -> None:
    nonlocal cache
    done.extend(run([])); done.extend(data); lines.clear(); where.clear(); cache = (-1, 0)

  for kind, val, ln in src.items:
    if kind == "label":
      if val in defined: raise CodeObjectError(f"{path}:{ln}: label {val} defined twice")
      if val in want: offsets[val] = size()
      lines.append(f"{val}:"); where.append(ln); defined.add(val)
    elif kind == "align":
      (_, word), pad = val, -size() % val[0]
      if pad % 4: raise CodeObjectError(f"{path}:{ln}: code is not 4-byte aligned before an alignment directive")
      if word is None: lines.extend([_NOP] * (pad // 4)); where.extend([ln] * (pad // 4))
      else: flush(word.to_bytes(4, "little") * (pad // 4))
    elif kind == "data": flush(val)
    else: lines.append(str(val)); where.append(ln)
  flush(b"")
  return bytes(done), offsets


def assemble_code_object(text: str, arch: str, *, wave: int | None = None, path: str = "<asm>") -> bytes:
  """Turn a `.s` with `.amdhsa_kernel` blocks (and optionally `.amdgpu_metadata`) into a loadable code object.
  Descriptors are computed as llvm-mc-22 does; without `.amdgpu_metadata` a minimal metadata note (no `.args`)
  is written so the result loads like any other code object. `wave` defaults to the kernels' .amdhsa_wavefront_size32
  (they must agree), else the target's default."""
  t = target(arch)
  src = parse_asm(text, arch, path)
  if not src.kernels: raise CodeObjectError(f"{path}: no .amdhsa_kernel block")
  if wave is None:
    w32 = {v for _, ds, _ in src.kernels for d, v, _ in ds if d == ".amdhsa_wavefront_size32"}
    if len(w32) > 1: raise CodeObjectError(f"{path}: kernels disagree on .amdhsa_wavefront_size32; pass wave=")
    wave = (32 if w32.pop() else 64) if w32 else 64 if t.wave64_only else 32
  kds = {}
  for name, ds, ln in src.kernels:
    if name in kds: raise CodeObjectError(f"{path}:{ln}: .amdhsa_kernel {name} defined twice")
    try: kds[name] = kd_from_directives(name, ds, arch, wave=wave, xnack=src.xnack or "off")
    except CodeObjectError as e:
      e.path, e.args = path, (f"{path}: {e.msg}",)
      raise
  code, offsets = _layout(src, wave, set(kds), path)
  missing = [n for n in kds if n not in offsets]
  if missing: raise CodeObjectError(f"{path}: no code label for kernel(s) {', '.join(missing)}")
  specs = [KernelSpec(n, offsets[n], kd) for n, kd in kds.items()]
  counts = {n: _counts(ds, arch) for n, ds, _ in src.kernels}
  meta = parse_metadata_yaml(*src.metadata) if src.metadata is not None else {}
  listed = meta.setdefault("amdhsa.kernels", [])
  if not isinstance(listed, list): raise CodeObjectError(f"{path}: .amdgpu_metadata amdhsa.kernels is not a list")
  known, have = {f"{n}.kd" for n in kds}, {k.get(".symbol") for k in listed if isinstance(k, dict)}
  if have - known:
    raise CodeObjectError(f"{path}: .amdgpu_metadata names kernel symbol(s) {sorted(have - known)} that have no "
                          ".amdhsa_kernel")
  # Kernels the YAML does not describe (or no YAML at all) get an entry built from their descriptor, with no .args.
  listed += [kernel_metadata(s, arch, **counts[s.name]) for s in specs if f"{s.name}.kd" not in have]
  meta.setdefault("amdhsa.target", _target_id(arch, src.xnack, src.sramecc))
  meta.setdefault("amdhsa.version", [1, 1 if src.version == 4 else 2])
  return build_code_object(arch, code, specs, metadata=meta, version=src.version, xnack=src.xnack, sramecc=src.sramecc)


def _counts(ds: list[tuple[str, int, int]], arch: str) -> dict[str, int]:
  """Metadata register counts as clang reports them: next_free_* plus the SGPRs reserved at the end (VCC etc.)."""
  v = {d.removeprefix(".amdhsa_"): x for d, x, _ in ds}
  t = target(arch)
  extra = 6 if t.major < 10 else 2 * v.get("reserve_vcc", 1)
  nv, acc = v.get("next_free_vgpr", 0), v.get("accum_offset", 0)
  out = {"sgpr_count": v.get("next_free_sgpr", 0) + extra, "vgpr_count": min(nv, acc) if t.gfx90a else nv}
  if t.gfx90a: out["agpr_count"] = max(0, nv - acc)
  return out
