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
import io
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from gputwin.errors import CodeObjectError, GputwinError
from gputwin.isa.kd import KD_SIZE, MACH_TO_TARGET, KernelDescriptor, kd_from_directives, target
from gputwin.isa.msgpack import packb, unpackb

EM_AMDGPU, ELFOSABI_AMDGPU_HSA, NT_AMDGPU_METADATA = 224, 64, 32
_FEATURE = {0x000: None, 0x100: "any", 0x200: "off", 0x300: "on"}   # xnack bits 8-9; sramecc bits 10-11 (shifted)
_FEATURE_BITS = {v: k for k, v in _FEATURE.items()}
MAX_IMAGE = 1 << 28   # refuse to lay out more than 256 MiB of segments (a corrupt p_memsz must not eat the host)


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
  feats = "".join(f":{n}{'+' if v == 'on' else '-'}" for n, v in (("sramecc", sramecc), ("xnack", xnack)) if v in ("on", "off"))
  return f"amdgcn-amd-amdhsa--{arch}{feats}"


# ---------------------------------------------------------------------------------------------------------------
# Reading

def load_code_object(data: bytes | str | Path, *, require_metadata: bool = True) -> CodeObject:
  """Parse an AMD HSA code object (ET_DYN from ld.lld or `build_code_object`). Anything wrong with the input
  raises CodeObjectError naming the file; nothing else escapes. Without the metadata note (llvm-mc output with no
  `.amdgpu_metadata`) pass require_metadata=False to get the kernels from their descriptors alone."""
  path = "<bytes>"
  if isinstance(data, (str, Path)):
    path = str(data)
    try: data = Path(data).read_bytes()
    except OSError as e: raise CodeObjectError(f"cannot read: {e.strerror}", path) from None
  try: return _load(bytes(data), path, require_metadata)
  except CodeObjectError as e:
    if not e.path: e.path, e.args = path, (f"{path}: {e}",)
    raise
  except GputwinError as e: raise CodeObjectError(str(e), path) from e
  except Exception as e:  # pyelftools/struct on corrupt bytes: ELFError, construct errors, struct.error, ValueError...
    raise CodeObjectError(f"malformed ELF ({type(e).__name__}: {e})", path) from e


def _load(data: bytes, path: str, require_metadata: bool) -> CodeObject:
  from elftools.elf.elffile import ELFFile
  if len(data) < 64 or data[:4] != b"\x7fELF": raise CodeObjectError("not an ELF file (bad magic or shorter than a header)")
  if data[4] != 2 or data[5] != 1: raise CodeObjectError("not a little-endian ELF64 file")
  machine, = struct.unpack_from("<H", data, 18)
  if machine != EM_AMDGPU: raise CodeObjectError(f"wrong machine: e_machine={machine}, expected EM_AMDGPU ({EM_AMDGPU})")
  if data[7] != ELFOSABI_AMDGPU_HSA: raise CodeObjectError(f"not an HSA code object: EI_OSABI={data[7]}, expected 64")
  if not 1 <= data[8] <= 4: raise CodeObjectError(f"unsupported code object version (EI_ABIVERSION={data[8]})")
  elf = ELFFile(io.BytesIO(data))
  flags = elf["e_flags"]
  t = MACH_TO_TARGET.get(flags & 0xff)
  if t is None: raise CodeObjectError(f"unsupported processor EF_AMDGPU_MACH={flags & 0xff:#x} (e_flags={flags:#x})")
  xnack, sramecc = _FEATURE[flags & 0x300], _FEATURE[(flags >> 2) & 0x300]
  if elf["e_type"] not in ("ET_DYN", "ET_EXEC"):
    raise CodeObjectError(f"{elf['e_type']} is not a loadable code object; link it with ld.lld-22 -shared")

  # Image: PT_LOAD segments at their addresses.
  loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
  if not loads: raise CodeObjectError("no PT_LOAD segment")
  top = max(s["p_vaddr"] + s["p_memsz"] for s in loads)
  if top > MAX_IMAGE: raise CodeObjectError(f"segments reach {top:#x}, beyond the {MAX_IMAGE:#x}-byte limit")
  image = bytearray(top)
  for s in loads:
    if s["p_filesz"] > s["p_memsz"] or s["p_offset"] + s["p_filesz"] > len(data):
      raise CodeObjectError(f"PT_LOAD at {s['p_vaddr']:#x} lies outside the file")
    image[s["p_vaddr"]:s["p_vaddr"] + s["p_filesz"]] = data[s["p_offset"]:s["p_offset"] + s["p_filesz"]]

  def mem(va: int, n: int, what: str) -> bytes:
    if va < 0 or va + n > len(image): raise CodeObjectError(f"{what} at {va:#x}+{n} is outside the loaded image")
    return bytes(image[va:va + n])

  # Symbols (static table when present: it also has local labels; else the dynamic one).
  symtab = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
  if symtab is None: raise CodeObjectError("no .symtab or .dynsym: cannot find kernels")
  syms = {s.name: (s["st_value"], s["st_size"], s["st_info"]["type"]) for s in symtab.iter_symbols() if s.name}
  funcs = {v: (n, sz) for n, (v, sz, ty) in syms.items() if ty == "STT_FUNC"}

  text_sec = elf.get_section_by_name(".text")
  if text_sec is not None and text_sec["sh_type"] != "SHT_NOBITS":
    text, text_va = text_sec.data(), text_sec["sh_addr"]
  else:
    seg = next((s for s in loads if s["p_flags"] & 1), None)
    if seg is None: raise CodeObjectError("no .text section and no executable segment")
    text, text_va = mem(seg["p_vaddr"], seg["p_filesz"], "executable segment"), seg["p_vaddr"]

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
      raise CodeObjectError(f"kernel {name}: entry {entry:#x} is outside .text [{text_va:#x}, {text_va + len(text):#x})",
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


def _metadata(elf) -> dict | None:
  for sec in elf.iter_sections():
    if sec["sh_type"] != "SHT_NOTE": continue
    for note in sec.iter_notes():
      if note["n_name"] == "AMDGPU" and note["n_type"] in (NT_AMDGPU_METADATA, "NT_AMDGPU_METADATA"):
        desc = note["n_desc"]
        doc = unpackb(desc.encode("latin-1") if isinstance(desc, str) else desc)
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
  kd, base = k.descriptor, {
    ".name": k.name, ".symbol": f"{k.name}.kd", ".args": [], ".kernarg_segment_size": k.descriptor.kernarg_size,
    ".kernarg_segment_align": 8, ".group_segment_fixed_size": k.descriptor.group_segment_fixed_size,
    ".private_segment_fixed_size": k.descriptor.private_segment_fixed_size, ".wavefront_size": k.descriptor.wave_size,
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
    if not 0 <= k.offset < max(len(text), 1): raise CodeObjectError(f"kernel {k.name}: entry {k.offset:#x} outside text")
  if metadata is None:
    metadata = {"amdhsa.kernels": [kernel_metadata(k, arch) for k in kernels], "amdhsa.target": _target_id(arch, xnack, sramecc),
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
  at = {".symtab": (symtab_off, len(symbytes)), ".strtab": (strtab_off, len(strtab)), ".shstrtab": (shstr_off, len(shnames))}
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
