"""Host machine code as text, through capstone: one instruction at an address (fault reports), a range of code with
the source each part implements (native-tier blocks), and an ELF object's functions with DWARF line info
(`gputwin compile --arch x86_64 -S`)."""
from __future__ import annotations

import functools
import io

import capstone

from gputwin.emu.host.arch import host_arch


@functools.lru_cache(maxsize=4)
def engine(arch: str) -> capstone.Cs:
  return capstone.Cs(*host_arch(arch).cs)


def instructions(code: bytes, address: int, arch: str) -> list[tuple[int, int, str]]:
  """[(address, size, 'mnemonic operands')] of `code` placed at `address` (stops at bytes capstone cannot decode)."""
  return [(a, n, f"{m} {o}".strip()) for a, n, m, o in engine(arch).disasm_lite(bytes(code), address)]


def one(code: bytes, address: int, arch: str) -> str:
  """The instruction at the start of `code`, or its bytes when capstone does not decode them."""
  got = instructions(code[:16], address, arch)
  return got[0][2] if got else f"<undecodable {bytes(code[:4]).hex()}>"


def render(code: bytes, address: int, arch: str, notes=None, labels=None, tail=None) -> list[str]:
  """Listing lines: `address: bytes  instruction` with `labels[a]:` before an address, `notes(a)` (a string shown
  once where it changes: the source an address implements) above it and `tail(a, size)` after it."""
  out, last = [], None
  for a, n, text in instructions(code, address, arch):
    if labels and a in labels:
      out.append(f"{labels[a]}:")
    note = notes(a) if notes else None
    if note is not None and note != last:
      out.append(f"                ; {note}")
    last = note if note is not None else last
    t = tail(a, n) if tail else None
    out.append(f"  {a:8x}:  {code[a - address:a - address + n].hex():<20} {text}" + (f"    ; {t}" if t else ""))
  return out


def line_table(elf) -> list[tuple[int, int]]:
  """Sorted (address, line) rows of an ELF object's DWARF line programs (relocations applied by pyelftools)."""
  if not elf.has_dwarf_info():
    return []
  dwarf, rows = elf.get_dwarf_info(), []
  for cu in dwarf.iter_CUs():
    for e in dwarf.line_program_for_CU(cu).get_entries():
      s = e.state
      if s is not None:
        rows.append((s.address, 0 if s.end_sequence else s.line))
  return sorted(rows)


def listing(obj: bytes, arch: str, lines: dict[int, str] | None = None, what: str = "IR") -> str:
  """An ELF relocatable object's executable sections through capstone: function labels, each call's relocation
  target, and `; IR n: <op>` (`what`) from the DWARF line table (`lines` maps line numbers to the text shown)."""
  import bisect
  from elftools.elf.elffile import ELFFile
  from elftools.elf.relocation import RelocationSection
  elf = ELFFile(io.BytesIO(obj))
  table = line_table(elf)
  addrs = [a for a, _ in table]
  out = []
  for si, sec in enumerate(elf.iter_sections()):
    if not sec["sh_flags"] & 4 or not sec.data_size:  # SHF_EXECINSTR
      continue
    syms = elf.get_section_by_name(".symtab")
    labels = {s["st_value"]: s.name for s in syms.iter_symbols() if s["st_shndx"] == si and s.name and
              s["st_info"]["type"] == "STT_FUNC"} if syms else {}
    relocs = {}
    for rs in elf.iter_sections():
      if isinstance(rs, RelocationSection) and rs["sh_info"] == si:
        st = elf.get_section(rs["sh_link"])
        for r in rs.iter_relocations():
          s = st.get_symbol(r["r_info_sym"])
          relocs[r["r_offset"]] = s.name or elf.get_section(s["st_shndx"]).name

    def note(a):
      i = bisect.bisect_right(addrs, a) - 1
      ln = table[i][1] if i >= 0 else 0
      return f"{what} {ln}: {lines.get(ln, '')}" if ln and lines is not None else None
    target = lambda a, n: next((f"-> {relocs[o]}" for o in range(a, a + n) if o in relocs), None)  # noqa: E731
    out += render(sec.data(), 0, arch, note, labels, target)
  return "\n".join(out) + "\n"
