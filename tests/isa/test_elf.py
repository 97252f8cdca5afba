"""gputwin.isa.elf (the struct-only ELF64 reader behind load_code_object) against pyelftools on clang-22/ld.lld-22
output (relocatable and linked) and on gputwin's own code objects."""
from __future__ import annotations

import io
import shutil
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from gputwin.isa import elf as E
from gputwin.isa.codeobj import assemble_code_object

CLANG, LLD = "clang-22", "ld.lld-22"
OPENCL = """
__kernel void scale(__global float *out, __global const float *a, float s, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a[i] * s;
}
"""
ASM = """.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.p2align 8
k:
  s_endpgm
.rodata
.amdhsa_kernel k
  .amdhsa_next_free_vgpr 1
  .amdhsa_next_free_sgpr 1
.end_amdhsa_kernel
"""


@pytest.fixture(scope="module")
def objects(tmp_path_factory) -> list[bytes]:
  out = [assemble_code_object(ASM, "gfx1100")]
  if shutil.which(CLANG) and shutil.which(LLD):
    d = tmp_path_factory.mktemp("elf")
    (d / "k.cl").write_text(OPENCL)
    for arch in ("gfx1100", "gfx942"):
      subprocess.run([CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib",
                      "-O2", "-c", "k.cl", "-o", f"{arch}.o"], cwd=d, check=True)
      subprocess.run([LLD, "-shared", f"{arch}.o", "-o", f"{arch}.co"], cwd=d, check=True)
      out += [(d / f"{arch}.o").read_bytes(), (d / f"{arch}.co").read_bytes()]
  return out


def test_reader_agrees_with_pyelftools(objects):
  elftools = pytest.importorskip("elftools.elf.elffile")
  for data in objects:
    ref, got = elftools.ELFFile(io.BytesIO(data)), E.ElfFile(data)
    assert got.e_flags == ref["e_flags"] and got.e_machine == 224
    assert {E.ET_REL: "ET_REL", E.ET_DYN: "ET_DYN"}[got.e_type] == ref["e_type"]
    segs = [s for s in ref.iter_segments()]
    assert [(s.p_offset, s.p_vaddr, s.p_filesz, s.p_memsz, s.p_flags) for s in got.segments] == \
           [(s["p_offset"], s["p_vaddr"], s["p_filesz"], s["p_memsz"], s["p_flags"]) for s in segs]
    assert [s.p_type == E.PT_LOAD for s in got.segments] == [s["p_type"] == "PT_LOAD" for s in segs]
    secs = list(ref.iter_sections())
    assert [(s.name, s.sh_addr, s.sh_offset, s.sh_size, s.sh_flags, s.sh_link, s.sh_info) for s in got.sections] == \
           [(s.name, s["sh_addr"], s["sh_offset"], s["sh_size"], s["sh_flags"], s["sh_link"], s["sh_info"])
            for s in secs]
    for mine, theirs in zip(got.sections, secs):
      if theirs["sh_type"] != "SHT_NOBITS":
        assert got.section_data(mine) == theirs.data()
      if theirs["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM"):
        stt = {0: "STT_NOTYPE", 1: "STT_OBJECT", 2: "STT_FUNC", 3: "STT_SECTION", 4: "STT_FILE"}
        assert [(y.name, y.st_value, y.st_size, stt.get(y.st_type), y.st_shndx == E.SHN_UNDEF)
                for y in got.symbols(mine)] == \
               [(z.name, z["st_value"], z["st_size"], z["st_info"]["type"], z["st_shndx"] == "SHN_UNDEF")
                for z in theirs.iter_symbols()]
      if theirs["sh_type"] in ("SHT_RELA", "SHT_REL"):
        assert [(r.r_offset, r.r_type, r.r_sym, r.r_addend) for r in got.relocations(mine)] == \
               [(r["r_offset"], r["r_info_type"], r["r_info_sym"], r["r_addend"] if r.is_RELA() else 0)
                for r in theirs.iter_relocations()]
      if theirs["sh_type"] == "SHT_NOTE":
        assert [(n.name, n.desc) for n in got.notes(mine)] == \
               [(n["n_name"], n["n_descdata"]) for n in theirs.iter_notes()]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1 << 14), st.integers(0, 255)), max_size=8),
       st.integers(0, 1 << 14))
def test_corrupt_input_raises_only_elf_error(edits, cut):
  data = bytearray(assemble_code_object(ASM, "gfx1100"))
  for pos, val in edits:
    data[pos % len(data)] = val
  data = bytes(data[:len(data) - cut % len(data)])
  try:
    f = E.ElfFile(data)
    for s in f.sections:
      f.section_data(s)
      if s.sh_type in (E.SHT_SYMTAB, E.SHT_DYNSYM):
        f.symbols(s)
      elif s.sh_type in (E.SHT_RELA, E.SHT_REL):
        f.relocations(s)
      elif s.sh_type == E.SHT_NOTE:
        f.notes(s)
  except E.ElfError:
    pass
