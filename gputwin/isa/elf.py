"""A small reader for little-endian ELF64 files: the header, program headers, sections (by index and name),
symbols, relocations and notes — exactly what `codeobj.load_code_object` needs, with `struct` alone.

(pyelftools did this before; importing it cost ~20-40 ms of every process's first launch.) Every read is bounds-
checked against the file, so corrupt input raises ElfError (a ValueError) instead of reading past the end, looping
or allocating what a bogus size asks for. Layouts: the System V gABI, "ELF-64 Object File Format".
"""
from __future__ import annotations

import struct
from typing import NamedTuple

ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
PT_LOAD = 1
SHT_SYMTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 2, 4, 7, 8, 9, 11
SHF_ALLOC = 2
SHN_UNDEF, SHN_LORESERVE = 0, 0xff00
STT_OBJECT, STT_FUNC = 1, 2

_EHDR = struct.Struct("<HHIQQQIHHHHHH")  # from e_type, after the 16-byte e_ident
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_REL = struct.Struct("<QQ")
_NHDR = struct.Struct("<III")


class ElfError(ValueError):
  pass


class Segment(NamedTuple):  # NamedTuples: ~5x cheaper to define at import than dataclasses
  p_type: int
  p_flags: int
  p_offset: int
  p_vaddr: int
  p_filesz: int
  p_memsz: int


class Section(NamedTuple):
  index: int
  name: str
  sh_type: int
  sh_flags: int
  sh_addr: int
  sh_offset: int
  sh_size: int
  sh_link: int
  sh_info: int
  sh_addralign: int


class Symbol(NamedTuple):
  name: str
  st_value: int
  st_size: int
  st_type: int  # STT_* (st_info & 0xf)
  st_shndx: int  # a section index, SHN_UNDEF, or a reserved index (>= SHN_LORESERVE: SHN_ABS, SHN_COMMON)


class Reloc(NamedTuple):
  r_offset: int
  r_type: int
  r_sym: int
  r_addend: int  # 0 for SHT_REL


class Note(NamedTuple):
  name: str
  type: int
  desc: bytes


def _cstr(data: bytes, at: int) -> str:
  end = data.find(b"\0", at)
  return data[at:end if end >= 0 else len(data)].decode("latin-1")


class ElfFile:
  """A parsed ELF64 little-endian file over `data` (sections and segments read eagerly, symbols on demand)."""

  def __init__(self, data: bytes):
    if len(data) < 64 or data[:4] != b"\x7fELF":
      raise ElfError("not an ELF file (bad magic or shorter than a header)")
    if data[4] != 2 or data[5] != 1:
      raise ElfError("not a little-endian ELF64 file")
    self.data = data
    (self.e_type, self.e_machine, _, _, phoff, shoff, self.e_flags, _, phentsize, phnum, shentsize, shnum,
     shstrndx) = _EHDR.unpack_from(data, 16)
    self.segments = []
    for o in self._table(phoff, phnum, phentsize, _PHDR.size, "program header"):
      ptype, pflags, poff, vaddr, _, filesz, memsz, _ = _PHDR.unpack_from(data, o)
      self.segments.append(Segment(ptype, pflags, poff, vaddr, filesz, memsz))
    raw = [_SHDR.unpack_from(data, o) for o in self._table(shoff, shnum, shentsize, _SHDR.size, "section header")]
    names = b""
    if raw and shstrndx != SHN_UNDEF:
      if shstrndx >= len(raw):
        raise ElfError(f"e_shstrndx {shstrndx} is not a section (there are {len(raw)})")
      names = self._bytes(raw[shstrndx][4], raw[shstrndx][5], "section name table")
    self.sections = [Section(i, _cstr(names, r[0]) if r[0] < len(names) else "", r[1], r[2], r[3], r[4], r[5], r[6],
                             r[7], r[8]) for i, r in enumerate(raw)]

  def _table(self, off: int, n: int, entsize: int, need: int, what: str) -> range:
    if n == 0:
      return range(0)
    if entsize < need:
      raise ElfError(f"{what} entries of {entsize} bytes (need {need})")
    if off + n * entsize > len(self.data):
      raise ElfError(f"{n} {what}s at {off:#x} lie outside the file")
    return range(off, off + n * entsize, entsize)

  def _bytes(self, off: int, size: int, what: str) -> bytes:
    if off + size > len(self.data):
      raise ElfError(f"{what} at {off:#x}+{size:#x} lies outside the file")
    return self.data[off:off + size]

  def section(self, i: int) -> Section:
    if not 0 <= i < len(self.sections):
      raise ElfError(f"section index {i} out of range (there are {len(self.sections)})")
    return self.sections[i]

  def section_by_name(self, name: str) -> Section | None:
    return next((s for s in self.sections if s.name == name), None)

  def section_data(self, s: Section) -> bytes:
    return b"" if s.sh_type == SHT_NOBITS else self._bytes(s.sh_offset, s.sh_size, f"section {s.name or s.index}")

  def symbols(self, s: Section) -> list[Symbol]:
    """Every entry of a SHT_SYMTAB/SHT_DYNSYM section (index 0, the null symbol, included), names from its sh_link."""
    body = self.section_data(s)
    strs = self.section_data(self.section(s.sh_link)) if s.sh_link else b""
    out = []
    for o in range(0, len(body) - _SYM.size + 1, _SYM.size):
      name, info, _, shndx, value, size = _SYM.unpack_from(body, o)
      out.append(Symbol(_cstr(strs, name) if name < len(strs) else "", value, size, info & 0xf, shndx))
    return out

  def relocations(self, s: Section) -> list[Reloc]:
    body = self.section_data(s)
    if s.sh_type == SHT_RELA:
      return [Reloc(o, i & 0xffffffff, i >> 32, a) for o, i, a in _RELA.iter_unpack(body[:len(body) // 24 * 24])]
    return [Reloc(o, i & 0xffffffff, i >> 32, 0) for o, i in _REL.iter_unpack(body[:len(body) // 16 * 16])]

  def notes(self, s: Section) -> list[Note]:
    """The notes of a SHT_NOTE section (name and descriptor each padded to 4 bytes)."""
    body, at, out = self.section_data(s), 0, []
    while at + _NHDR.size <= len(body):
      namesz, descsz, ntype = _NHDR.unpack_from(body, at)
      at += _NHDR.size
      name = _cstr(body[at:at + namesz], 0)
      at += -(-namesz // 4) * 4
      if at + descsz > len(body):
        raise ElfError(f"note {name!r} of {descsz} bytes runs past its section")
      out.append(Note(name, ntype, body[at:at + descsz]))
      at += -(-descsz // 4) * 4
    return out
