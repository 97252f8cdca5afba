"""A host ELF relocatable object (what gputwin.compiler's host backend emits, or any C compiler's `-c` output with
the same calling convention) loaded into a guest image: allocated sections laid out by permission (code, read-only,
writable) at a base address, relocations applied from the architecture's table, undefined symbols bound to stub
addresses the launcher services (libm, the barrier). The `.gputwin.kernels` section lists the kernels and their
argument layout (one JSON object per line)."""
from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field

from gputwin.emu.host.arch import HostArch
from gputwin.errors import CodeObjectError

PAGE = 4096
MAX_IMAGE = 256 << 20     # a kernel object's sections, laid out (shared arrays included)
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4


@dataclass
class Image:
  base: int
  data: bytearray
  segments: list            # (address, size, 'rx' | 'r' | 'rw')
  symbols: dict             # defined symbol -> address
  imports: list             # undefined symbols, in stub order
  kernels: dict             # kernel name -> metadata (params, args_size, private, shared, barrier)
  writable: list = field(default_factory=list)  # (address, size) of .bss/.data: shared memory, zeroed per group

  @property
  def end(self) -> int: return self.base + len(self.data)


def align(x: int, a: int) -> int: return -(-x // max(a, 1)) * max(a, 1)


def load(obj: bytes, arch: HostArch, base: int, stub: callable) -> Image:
  """Lay out and relocate `obj`; `stub(i)` is the address of the i-th undefined symbol's stub. A malformed object
  (what pyelftools, the JSON metadata or the layout reject) is a CodeObjectError."""
  from elftools.common.exceptions import DWARFError, ELFCompressionError, ELFError, ELFParseError
  from elftools.construct.core import ConstructError
  try:
    return _load(obj, arch, base, stub)
  except (ELFError, ELFCompressionError, ELFParseError, DWARFError, ConstructError, ValueError, KeyError, IndexError,
          TypeError, AttributeError, OverflowError, struct.error) as e:   # (ValueError: bad UTF-8 or JSON too)
    raise CodeObjectError(f"malformed {arch.name} ELF object: {type(e).__name__}: {e}") from None


def _load(obj: bytes, arch: HostArch, base: int, stub: callable) -> Image:
  from elftools.elf.elffile import ELFFile
  from elftools.elf.relocation import RelocationSection
  elf = ELFFile(io.BytesIO(obj))
  if elf["e_machine"] != arch.machine or elf["e_type"] != "ET_REL":
    raise CodeObjectError(f"expected an {arch.name} ELF relocatable object, got {elf['e_machine']} {elf['e_type']}")
  where, segs, data, writable = {}, [], bytearray(), []
  for perms in ("rx", "r", "rw"):
    start = align(len(data), PAGE)
    data += bytes(start - len(data))
    for i, s in enumerate(elf.iter_sections()):
      f = s["sh_flags"]
      if not f & SHF_ALLOC or perms != ("rx" if f & SHF_EXECINSTR else "rw" if f & SHF_WRITE else "r"):
        continue
      at = align(len(data), s["sh_addralign"])
      if at + s["sh_size"] > MAX_IMAGE:
        raise CodeObjectError(f"section {s.name} takes the image past {MAX_IMAGE >> 20} MiB")
      data += bytes(at - len(data))
      where[i] = base + at
      data += bytes(s["sh_size"]) if s["sh_type"] == "SHT_NOBITS" else s.data()
      if perms == "rw":
        writable.append((base + at, s["sh_size"]))
    if len(data) > start:
      segs.append((base + start, align(len(data) - start, PAGE), perms))
  data += bytes(align(len(data), PAGE) - len(data))
  symtab, symbols, imports = elf.get_section_by_name(".symtab"), {}, []
  addr = {}
  for j, sym in enumerate(symtab.iter_symbols() if symtab else ()):
    shn = sym["st_shndx"]
    if shn == "SHN_UNDEF" and sym.name:
      addr[j] = stub(len(imports))
      imports.append(sym.name)
    elif isinstance(shn, int) and shn in where:
      addr[j] = where[shn] + sym["st_value"]
      if sym.name and sym["st_info"]["type"] != "STT_SECTION":
        symbols[sym.name] = addr[j]
  for rs in elf.iter_sections():
    if not isinstance(rs, RelocationSection) or rs["sh_info"] not in where:
      continue
    for r in rs.iter_relocations():
      kind = arch.relocs.get(r["r_info_type"])
      j = r["r_info_sym"]
      if kind is None or j not in addr:
        raise CodeObjectError(f"{arch.name}: unsupported relocation type {r['r_info_type']} at "
                              f"{elf.get_section(rs['sh_info']).name}+{r['r_offset']:#x}")
      target, p = elf.get_section(rs["sh_info"]), where[rs["sh_info"]] + r["r_offset"]
      if r["r_offset"] + kind[1] > target["sh_size"]:
        raise CodeObjectError(f"relocation at {target.name}+{r['r_offset']:#x} lies outside the section")
      _patch(data, p - base, p, addr[j] + (r["r_addend"] if r.is_RELA() else 0), *kind)
  kernels = {}
  meta = elf.get_section_by_name(".gputwin.kernels")
  for line in (meta.data().decode().splitlines() if meta is not None else ()):
    if line.strip():
      k = _kernel(json.loads(line))
      k["entry"] = symbols.get(k["kernel"])
      kernels[k["kernel"]] = k
  return Image(base, data, segs, symbols, imports, kernels, writable)


def _kernel(k) -> dict:
  """A `.gputwin.kernels` record, checked: kernel name, params [(name, IR type, offset, size)] inside args_size,
  private/shared byte counts, barrier flag."""
  ok = isinstance(k, dict) and isinstance(k.get("kernel"), str) and isinstance(k.get("params"), list) and \
    all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_IMAGE
        for x in (k.get("args_size"), k.get("private"), k.get("shared"))) and isinstance(k.get("barrier"), bool)
  ok = ok and all(isinstance(p, list) and len(p) == 4 and isinstance(p[0], str) and isinstance(p[1], str) and
                  all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in p[2:]) and
                  p[2] + p[3] <= k["args_size"] for p in k["params"])
  if not ok:
    raise CodeObjectError(f"malformed .gputwin.kernels record: {str(k)[:200]}")
  return k


def _patch(data: bytearray, off: int, p: int, v: int, kind: str, size: int) -> None:
  """Write relocation value `v` (S + A) at image offset `off` (address `p`) as `kind` says (arch.py's table)."""
  word = int.from_bytes(data[off:off + size], "little")
  if kind in ("abs", "pcrel"):
    v = v - p if kind == "pcrel" else v
    if not -(1 << (8 * size - 1)) <= v < 1 << (8 * size):
      raise CodeObjectError(f"relocation at {p:#x} out of range ({v:#x} in {size} bytes)")
    word = v & ((1 << 8 * size) - 1)
  elif kind == "page21":
    d = ((v & ~0xfff) - (p & ~0xfff)) >> 12
    word = word & ~(3 << 29 | 0x7ffff << 5) | (d & 3) << 29 | (d >> 2 & 0x7ffff) << 5
  elif kind.startswith("lo12/"):
    word = word & ~(0xfff << 10) | ((v & 0xfff) >> int(kind[5:])) << 10
  elif kind == "branch26":
    d = v - p
    if not -(1 << 27) <= d < 1 << 27:
      raise CodeObjectError(f"branch at {p:#x} cannot reach {v:#x}")
    word = word & ~0x3ffffff | (d >> 2) & 0x3ffffff
  data[off:off + size] = word.to_bytes(size, "little")
