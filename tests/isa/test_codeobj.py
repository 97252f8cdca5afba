"""AMD HSA code objects: our reader, writer and `.amdhsa_kernel` handling checked against clang-22, llvm-mc-22,
ld.lld-22, llvm-readelf-22 and llvm-objdump-22 (each test skips, saying which tool is missing)."""
from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gputwin.errors import CodeObjectError, GputwinError
from gputwin.isa.codeobj import (KernelSpec, assemble_code_object, build_code_object, load_code_object, parse_asm,
                                 parse_metadata_yaml)
from gputwin.isa.kd import DIRECTIVE_FIELD, KernelDescriptor, kd_from_directives
from gputwin.isa.msgpack import MsgpackError, packb, unpackb

TARGETS = ["gfx1100", "gfx1200", "gfx942", "gfx950"]
MACH = {"gfx1100": 0x41, "gfx1200": 0x48, "gfx1201": 0x4e, "gfx942": 0x4c, "gfx950": 0x4f}
CLANG, LLD, MC, READELF, OBJDUMP = (f"{t}-22" for t in ("clang", "ld.lld", "llvm-mc", "llvm-readelf", "llvm-objdump"))


def need(*tools: str) -> None:
  for t in tools:
    if shutil.which(t) is None: pytest.skip(f"{t} not installed (apt-get install llvm-22 clang-22 lld-22)")


def sh(*cmd: str, cwd: Path | None = None) -> str:
  r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
  assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
  return r.stdout


OPENCL = """
__kernel void scale(__global float *out, __global const float *a, float s, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a[i] * s;
}
__kernel void tile(__global int *out, __local int *tmp, uint stride) {
  int t = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workitem_id_y() * stride;
  tmp[t] = t;
  __builtin_amdgcn_s_barrier();
  out[__builtin_amdgcn_workgroup_id_y() * 64 + __builtin_amdgcn_workgroup_id_z()] = tmp[t ^ 1];
}
"""


@pytest.fixture(scope="module")
def clang_objects(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
  """Per target: (ld.lld-22 linked code object, clang-22 -S assembly) of OPENCL."""
  need(CLANG, LLD)
  d = tmp_path_factory.mktemp("clang")
  (d / "k.cl").write_text(OPENCL)
  out = {}
  for arch in TARGETS:
    base = ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-O2", "k.cl"]
    sh(CLANG, *base, "-c", "-o", f"{arch}.o", cwd=d)
    sh(CLANG, *base, "-S", "-o", f"{arch}.s", cwd=d)
    sh(LLD, "-shared", f"{arch}.o", "-o", f"{arch}.co", cwd=d)
    out[arch] = (d / f"{arch}.co", d / f"{arch}.s")
  return out


def rodata_bytes(path: Path) -> tuple[int, bytes]:
  """(address, bytes) of .rodata as llvm-objdump-22 -s prints them."""
  rows = re.findall(r"^ ([0-9a-f]{4,}) ((?:[0-9a-f]{2,8} ?){1,4})", sh(OBJDUMP, "-s", "-j", ".rodata", str(path)), re.M)
  return int(rows[0][0], 16), b"".join(bytes.fromhex(r[1].replace(" ", "")) for r in rows)


def amdhsa_blocks(s_text: str) -> dict[str, dict[str, int]]:
  return {m.group(1): {k: int(v, 0) for k, v in re.findall(r"\.amdhsa_(\w+)\s+(\S+)", m.group(2))}
          for m in re.finditer(r"\.amdhsa_kernel (\w+)\n(.*?)\.end_amdhsa_kernel", s_text, re.S)}


# ------------------------------------------------------------------------------------------------- reading clang output

@pytest.mark.parametrize("arch", TARGETS)
def test_clang_code_object_matches_llvm_tools(clang_objects, arch):
  co_path, s_path = clang_objects[arch]
  co = load_code_object(co_path)
  flags = int(re.search(r"Flags:\s+(0x[0-9a-f]+)", sh(READELF, "-h", str(co_path))).group(1), 16)
  assert (co.arch, co.e_flags, co.version) == (arch, flags, 6) and flags & 0xff == MACH[arch]
  assert (co.xnack, co.sramecc) == (("any", "any") if arch.startswith("gfx9") else (None, None))
  assert set(co.kernels) == {"scale", "tile"}

  # Descriptors: our decoding re-encodes to exactly the bytes llvm-objdump shows, and agrees with the .amdhsa_*
  # values clang prints for the same kernels.
  base, rodata = rodata_bytes(co_path)
  printed = amdhsa_blocks(s_path.read_text())
  for name, k in co.kernels.items():
    raw = rodata[k.kd_address - base:k.kd_address - base + 64]
    assert k.descriptor.encode() == raw and KernelDescriptor.decode(raw, arch) == k.descriptor
    for directive, value in printed[name].items():
      if f".amdhsa_{directive}" in DIRECTIVE_FIELD:
        assert getattr(k.descriptor, DIRECTIVE_FIELD[f".amdhsa_{directive}"]) == value, (name, directive)
    p = printed[name]
    assert k.descriptor.vgpr_count >= p["next_free_vgpr"] > k.descriptor.vgpr_count - k.descriptor.vgpr_granule
    assert k.wave_size == (32 if p.get("wavefront_size32") else 64) == k.descriptor.wave_size
    if arch.startswith("gfx9"): assert k.descriptor.accum_offset_vgprs == p["accum_offset"]
    syms = sh(READELF, "-s", str(co_path))
    entry = int(re.search(rf"([0-9a-f]+)\s+\d+\s+FUNC\s+GLOBAL\s+PROTECTED\s+\d+\s+{name}$", syms, re.M).group(1), 16)
    assert k.entry == entry and k.code == co.text[entry - co.text_address:][:len(k.code)]

  # Metadata: the note we decode equals the YAML llvm-readelf-22 prints for it.
  yaml = pytest.importorskip("yaml")
  notes = sh(READELF, "--notes", str(co_path))
  doc = yaml.safe_load(notes[notes.index("---"):notes.index("\n...") + 4])
  assert co.metadata == doc
  args = co.kernels["scale"].user_args
  assert [(a.offset, a.size, a.value_kind, a.type_name) for a in args] == [
    (0, 8, "global_buffer", "float*"), (8, 8, "global_buffer", "float*"), (16, 4, "by_value", "float"),
    (20, 4, "by_value", "int")]
  assert co.kernels["tile"].args[1].value_kind == "dynamic_shared_pointer"
  assert co.kernels["scale"].kernarg_size == doc["amdhsa.kernels"][0][".kernarg_segment_size"]

  # The relocatable clang -c object loads to the same code, descriptors and metadata (we apply its relocations).
  obj = load_code_object(co_path.with_suffix(".o"))
  assert obj.text == co.text and obj.metadata == co.metadata
  for name, k in co.kernels.items():
    o = obj.kernels[name]
    assert o.entry - obj.text_address == k.entry - co.text_address and o.code == k.code
    assert o.descriptor.replace(kernel_code_entry_byte_offset=0) == \
      k.descriptor.replace(kernel_code_entry_byte_offset=0)


def test_metadata_yaml_from_clang_s_equals_its_note(clang_objects):
  """The `.amdgpu_metadata` YAML clang prints with -S parses to the document clang puts in the note with -c."""
  for arch in ("gfx1100", "gfx942"):
    co_path, s_path = clang_objects[arch]
    y = re.search(r"\.amdgpu_metadata\n(.*?)\.end_amdgpu_metadata", s_path.read_text(), re.S).group(1)
    assert parse_metadata_yaml(y) == load_code_object(co_path).metadata


def test_msgpack_round_trip_is_byte_identical(clang_objects):
  from elftools.elf.elffile import ELFFile
  with open(clang_objects["gfx942"][0], "rb") as f:
    desc = next(n for s in ELFFile(f).iter_sections() if s["sh_type"] == "SHT_NOTE" for n in s.iter_notes())["n_desc"]
  assert packb(unpackb(desc)) == desc


scalars = st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats(allow_nan=False) | st.text() \
  | st.binary()
keys = st.text(max_size=8) | st.integers(-99, 99)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=20) | st.dictionaries(keys, c, max_size=20),
                      max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(values)
def test_msgpack_round_trip(v):
  assert unpackb(packb(v)) == v


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_msgpack_garbage_raises_only_msgpack_error(b):
  try: unpackb(b)
  except MsgpackError: pass


# ------------------------------------------------------------------------------------------------- writing

@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_written_code_object_is_accepted_by_llvm_tools(clang_objects, arch, tmp_path):
  need(READELF, OBJDUMP)
  ref = load_code_object(clang_objects[arch][0])
  specs = [KernelSpec(n, k.entry - ref.text_address, k.descriptor, size=len(k.code)) for n, k in ref.kernels.items()]
  ours = tmp_path / "ours.co"
  ours.write_bytes(build_code_object(arch, ref.text, specs, metadata=ref.metadata))
  r = subprocess.run([READELF, "--notes", "-s", "-l", "-d", str(ours)], capture_output=True, text=True)
  assert r.returncode == 0 and "warning" not in r.stderr.lower() and "error" not in r.stderr.lower(), r.stderr
  assert "NT_AMDGPU_METADATA" in r.stdout and re.search(r"OBJECT\s+GLOBAL\s+PROTECTED\s+\d+\s+tile\.kd", r.stdout)

  def listing(p: Path) -> list[str]:
    out = sh(OBJDUMP, "-d", f"--mcpu={arch}", str(p))
    return [ln.split("//")[0].split("<")[0].strip() for ln in out.splitlines() if ln.startswith("\t")]
  assert listing(ours) == listing(clang_objects[arch][0]) and len(listing(ours)) > 10
  back = load_code_object(ours)
  assert back.metadata == ref.metadata and back.text == ref.text
  for n, k in ref.kernels.items():
    assert back.kernels[n].descriptor.replace(kernel_code_entry_byte_offset=0) == \
      k.descriptor.replace(kernel_code_entry_byte_offset=0)
    assert back.kernels[n].code == k.code


# ------------------------------------------------------------------------------------------- .amdhsa_kernel vs llvm-mc

_BOOL = ["user_sgpr_dispatch_ptr", "user_sgpr_queue_ptr", "user_sgpr_kernarg_segment_ptr", "user_sgpr_dispatch_id",
         "user_sgpr_private_segment_size", "uses_dynamic_stack", "enable_private_segment", "system_sgpr_workgroup_id_x",
         "system_sgpr_workgroup_id_y", "system_sgpr_workgroup_id_z", "system_sgpr_workgroup_info", "reserve_vcc",
         "exception_fp_ieee_invalid_op", "exception_fp_denorm_src", "exception_fp_ieee_div_zero",
         "exception_fp_ieee_overflow", "exception_fp_ieee_underflow", "exception_fp_ieee_inexact",
         "exception_int_div_zero"]
_PER = {"gfx9": ["dx10_clamp", "ieee_mode", "fp16_overflow", "tg_split"],
        "gfx11": ["dx10_clamp", "ieee_mode", "fp16_overflow", "workgroup_processor_mode", "memory_ordered",
                  "forward_progress"],
        "gfx12": ["fp16_overflow", "workgroup_processor_mode", "memory_ordered", "forward_progress",
                  "round_robin_scheduling"]}


def random_block(rng: random.Random, arch: str, name: str) -> str:
  fam = "gfx9" if arch.startswith("gfx9") else arch[:5]
  d = {"next_free_vgpr": rng.randint(0, 256), "next_free_sgpr": rng.randint(0, 100),
       "group_segment_fixed_size": rng.choice([0, 256, 65536]), "private_segment_fixed_size": rng.choice([0, 16, 4096]),
       "kernarg_size": rng.choice([0, 24, 280]), "system_vgpr_workitem_id": rng.randint(0, 2),
       "float_round_mode_32": rng.randint(0, 3), "float_round_mode_16_64": rng.randint(0, 3),
       "float_denorm_mode_32": rng.randint(0, 3), "float_denorm_mode_16_64": rng.randint(0, 3)}
  for k in rng.sample(_BOOL + _PER[fam], 8): d[k] = rng.randint(0, 1)
  if fam == "gfx9":
    d["accum_offset"] = rng.randrange(4, max(4, min(256, d["next_free_vgpr"])) + 1, 4)
    d["next_free_vgpr"] = max(d["next_free_vgpr"], d["accum_offset"]) + rng.choice([0, 0, 37, 200])
    if rng.random() < 0.4: d["user_sgpr_kernarg_preload_length"] = rng.randint(0, 4)
    d.pop("reserve_vcc", None)  # no effect with architected flat scratch; tested in the error list below
  else:
    d["inst_pref_size"] = rng.randint(0, 63)
  if rng.random() < 0.5: d["user_sgpr_count"] = rng.randint(12, 31)
  if fam != "gfx9" and rng.random() < 0.3: d["wavefront_size32"] = 0
  if fam == "gfx11":   # llvm-mc: shared_vgpr_count * 2 + VGPR granules - 1 <= 63
    granules = -(-max(1, d["next_free_vgpr"]) // (4 if d.get("wavefront_size32", 1) == 0 else 8))
    d["shared_vgpr_count"] = rng.randint(0, min(15, (64 - granules) // 2))
  body = "\n".join(f"  .amdhsa_{k} {v}" for k, v in d.items())
  return f".amdhsa_kernel {name}\n{body}\n.end_amdhsa_kernel\n"


def llvm_mc_code_object(src: str, arch: str, tmp: Path) -> tuple[Path | None, str]:
  (tmp / "k.s").write_text(src)
  r = subprocess.run([MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-filetype=obj", "k.s", "-o", "k.o"], cwd=tmp,
                     capture_output=True, text=True)
  if r.returncode: return None, r.stderr
  sh(LLD, "-shared", "k.o", "-o", "k.co", cwd=tmp)
  return tmp / "k.co", ""


def code_and_kds(arch: str, kds: list[str]) -> str:
  text = "".join(f".globl k{i}\n.p2align 8\nk{i}:\n  s_endpgm\n" for i in range(len(kds)))
  return f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}"\n.text\n{text}.rodata\n' + \
    "".join(f".p2align 6\n{b}" for b in kds)


@pytest.mark.parametrize("arch", TARGETS + ["gfx1201"])
def test_amdhsa_directives_give_llvm_mc_descriptor(arch, tmp_path):
  need(MC, LLD)
  rng = random.Random(f"kd-{arch}")
  blocks = [random_block(rng, arch, f"k{i}") for i in range(24)]
  src = code_and_kds(arch, blocks)
  path, err = llvm_mc_code_object(src, arch, tmp_path)
  assert path, err
  ref = load_code_object(path, require_metadata=False)
  parsed = parse_asm(src, arch)
  assert [k[0] for k in parsed.kernels] == [f"k{i}" for i in range(24)]
  for name, ds, _ in parsed.kernels:
    ours = kd_from_directives(name, ds, arch, xnack=parsed.xnack)
    theirs = ref.kernels[name].descriptor.replace(kernel_code_entry_byte_offset=0)
    assert ours.encode() == theirs.encode(), (name, [f for f in ours.__dataclass_fields__
                                                     if getattr(ours, f) != getattr(theirs, f)])


BAD = {  # directives llvm-mc-22 rejects, per target family
  "all": [".amdhsa_next_free_vgpr 9000", ".amdhsa_user_sgpr_count 32", ".amdhsa_bogus 1",
          ".amdhsa_float_round_mode_32 4", ".amdhsa_user_sgpr_flat_scratch_init 1",
          ".amdhsa_user_sgpr_private_segment_buffer 1", ".amdhsa_reserve_flat_scratch 0",
          ".amdhsa_system_sgpr_private_segment_wavefront_offset 1", ".amdhsa_kernarg_size 1\n.amdhsa_kernarg_size 2"],
  "gfx9": [".amdhsa_wavefront_size32 1", ".amdhsa_inst_pref_size 1", ".amdhsa_reserve_xnack_mask 0",
           ".amdhsa_round_robin_scheduling 1", ".amdhsa_user_sgpr_count 1\n.amdhsa_user_sgpr_dispatch_ptr 1",
           ".amdhsa_user_sgpr_kernarg_preload_length 17", ".amdhsa_accum_offset 6", ".amdhsa_accum_offset 12"],
  "gfx11": [".amdhsa_accum_offset 4", ".amdhsa_round_robin_scheduling 1", ".amdhsa_tg_split 1",
            ".amdhsa_wavefront_size32 2",
            ".amdhsa_next_free_vgpr 256\n.amdhsa_shared_vgpr_count 1\n.amdhsa_wavefront_size32 0"],
  "gfx12": [".amdhsa_dx10_clamp 0", ".amdhsa_ieee_mode 1", ".amdhsa_shared_vgpr_count 1", ".amdhsa_accum_offset 8"],
}


@pytest.mark.parametrize("arch", TARGETS)
def test_bad_directives_rejected_like_llvm_mc(arch, tmp_path):
  need(MC, LLD)
  fam = "gfx9" if arch.startswith("gfx9") else arch[:5]
  base = ".amdhsa_next_free_vgpr 8\n.amdhsa_next_free_sgpr 8\n" + (".amdhsa_accum_offset 4\n" if fam == "gfx9" else "")
  for bad in BAD["all"] + BAD[fam]:
    b = "".join(ln + "\n" for ln in base.splitlines() if ln.split()[0] not in bad)  # the bad line replaces its default
    src = code_and_kds(arch, [f".amdhsa_kernel k0\n{b}{bad}\n.end_amdhsa_kernel\n"])
    path, err = llvm_mc_code_object(src, arch, tmp_path)
    assert path is None, f"llvm-mc accepted {bad!r}"
    with pytest.raises(CodeObjectError):
      parsed = parse_asm(src, arch)
      kd_from_directives("k0", parsed.kernels[0][1], arch, xnack=parsed.xnack)
  # and a block without the required register counts
  with pytest.raises(CodeObjectError, match="next_free_vgpr directive is required"):
    kd_from_directives("k", [(".amdhsa_next_free_sgpr", 1, 1)], arch)


# ------------------------------------------------------------------------------------------------- .s -> code object

def have_assembler() -> bool:
  try: from gputwin.isa.asm import assemble  # noqa: F401
  except ImportError: return False
  return True


needs_asm = pytest.mark.skipif(not have_assembler(), reason="instruction assembler (gputwin.isa.asm) not there yet")


@needs_asm
@pytest.mark.parametrize("arch", TARGETS)
def test_clang_s_assembles_to_clang_code_object(clang_objects, arch):
  """clang -S output through our assembler gives clang -c + ld.lld's code: same .text, descriptors and metadata."""
  from gputwin.errors import AsmError
  co_path, s_path = clang_objects[arch]
  try: ours = load_code_object(assemble_code_object(s_path.read_text(), arch, path=str(s_path)))
  except AsmError as e: pytest.xfail(f"instruction assembler cannot encode clang's output yet: {e}")
  ref = load_code_object(co_path)
  assert ours.metadata == ref.metadata and len(ours.text) == len(ref.text)
  for n, k in ref.kernels.items():   # layout and descriptors are ours; the instruction bytes are the assembler's
    assert ours.kernels[n].entry - ours.text_address == k.entry - ref.text_address
    assert ours.kernels[n].descriptor.replace(kernel_code_entry_byte_offset=0) == \
      k.descriptor.replace(kernel_code_entry_byte_offset=0)
  if ours.text != ref.text:
    at = next(i for i in range(0, len(ref.text), 4) if ours.text[i:i + 4] != ref.text[i:i + 4])
    pytest.xfail(f"instruction bytes differ from llvm at .text+{at:#x}: {ours.text[at:at + 8].hex()} vs "
                 f"{ref.text[at:at + 8].hex()} (instruction assembler)")


@needs_asm
def test_handwritten_kernel_without_metadata(tmp_path):
  need(OBJDUMP)
  src = """.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.p2align 8
first:
  s_load_b64 s[0:1], s[0:1], 0x0   ; out
  s_branch .Lend
.Lend:
  s_endpgm
.p2align 8
second:
  s_endpgm
.rodata
.amdhsa_kernel first
  .amdhsa_next_free_vgpr 1
  .amdhsa_next_free_sgpr 2
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_kernarg_size 8
.end_amdhsa_kernel
.amdhsa_kernel second
  .amdhsa_next_free_vgpr 1
  .amdhsa_next_free_sgpr 1
.end_amdhsa_kernel
"""
  (tmp_path / "h.s").write_text(src)
  co = load_code_object(tmp_path / "h.s")
  assert co.arch == "gfx1100" and co.path == str(tmp_path / "h.s")
  assert co.kernels["second"].entry - co.text_address == 256
  assert co.kernels["first"].descriptor.user_sgpr_count == 2 and co.kernels["first"].kernarg_size == 8
  (tmp_path / "h.co").write_bytes(assemble_code_object(src, "gfx1100"))
  assert "s_endpgm" in sh(OBJDUMP, "-d", "--mcpu=gfx1100", str(tmp_path / "h.co"))


# ------------------------------------------------------------------------------------------------- bad input

def test_bad_input_names_file_and_problem(clang_objects, tmp_path):
  co_path = clang_objects["gfx942"][0]
  data = co_path.read_bytes()
  for cut in (0, 10, 63, 64, 200, len(data) // 2, len(data) - 1):
    with pytest.raises(CodeObjectError): load_code_object(data[:cut])
  wrong = bytearray(data); struct.pack_into("<H", wrong, 18, 62)   # EM_X86_64
  with pytest.raises(CodeObjectError, match="wrong machine"): load_code_object(bytes(wrong))
  p = tmp_path / "x86.co"; p.write_bytes(bytes(wrong))
  with pytest.raises(CodeObjectError, match=re.escape(str(p))): load_code_object(p)
  with pytest.raises(CodeObjectError, match="cannot read"): load_code_object(tmp_path / "missing.co")
  with pytest.raises(CodeObjectError, match="no kernel 'nope'.*scale"): load_code_object(data).kernel("nope")
  with pytest.raises(CodeObjectError, match="code object is for gfx942, not gfx1100"):
    load_code_object(data, arch="gfx1100")
  bad_mach = bytearray(data); struct.pack_into("<I", bad_mach, 48, 0x5ff)
  with pytest.raises(CodeObjectError, match="EF_AMDGPU_MACH=0xff"): load_code_object(bytes(bad_mach))


def test_missing_metadata_note(tmp_path):
  need(MC, LLD)
  path, err = llvm_mc_code_object(code_and_kds("gfx1100", [".amdhsa_kernel k0\n.amdhsa_next_free_vgpr 1\n"
                                                           ".amdhsa_next_free_sgpr 1\n.end_amdhsa_kernel\n"]),
                                  "gfx1100", tmp_path)
  assert path, err
  with pytest.raises(CodeObjectError, match="no NT_AMDGPU_METADATA note"): load_code_object(path)
  assert load_code_object(path, require_metadata=False).kernels["k0"].args == ()


@pytest.fixture(scope="module")
def samples(clang_objects) -> list[bytes]:
  """A linked code object and a relocatable one (different loader paths)."""
  return [clang_objects["gfx1100"][0].read_bytes(), clang_objects["gfx942"][0].with_suffix(".o").read_bytes()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 1), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_elf_raises_only_gputwin_errors(samples, which, edits):
  data = bytearray(samples[which])
  for pos, val in edits: data[pos % len(data)] = val
  try: load_code_object(bytes(data))
  except GputwinError: pass


@pytest.mark.parametrize("arch,features,version", [("gfx942", ":sramecc+:xnack-", 5), ("gfx950", ":xnack+", 4),
                                                   ("gfx1200", "", 6)])
def test_target_id_and_version_like_llvm_mc(arch, features, version, tmp_path):
  """e_flags (xnack/sramecc) and EI_ABIVERSION we write for `.amdgcn_target`/`.amdhsa_code_object_version` match
  llvm-mc-22 + ld.lld-22 for the same source."""
  need(MC, LLD)
  acc = ".amdhsa_accum_offset 4\n" if arch.startswith("gfx9") else ""
  src = (f'.amdhsa_code_object_version {version}\n.amdgcn_target "amdgcn-amd-amdhsa--{arch}{features}"\n.text\n'
         f'k0:\n  s_endpgm\n.rodata\n.p2align 6\n.amdhsa_kernel k0\n.amdhsa_next_free_vgpr 3\n'
         f'.amdhsa_next_free_sgpr 3\n{acc}.end_amdhsa_kernel\n')
  (tmp_path / "k.s").write_text(src)
  mattr = ",".join(("+" if f.endswith("+") else "-") + f[:-1] for f in features.split(":") if f)
  sh(MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", *([f"-mattr={mattr}"] if mattr else []), "-filetype=obj", "k.s",
     "-o", "k.o", cwd=tmp_path)
  sh(LLD, "-shared", "k.o", "-o", "k.co", cwd=tmp_path)
  theirs = load_code_object(tmp_path / "k.co", require_metadata=False)
  p = parse_asm(src, arch)
  kd = kd_from_directives("k0", p.kernels[0][1], arch, xnack=p.xnack)
  ours = load_code_object(build_code_object(arch, theirs.text, [KernelSpec("k0", 0, kd)], version=p.version,
                                            xnack=p.xnack, sramecc=p.sramecc))
  feats = ("on" if "xnack+" in features else "off" if "xnack-" in features else "any",
           "on" if "sramecc+" in features else "any") if arch.startswith("gfx9") else (None, None)
  assert (ours.e_flags, ours.version, ours.xnack, ours.sramecc) == \
    (theirs.e_flags, theirs.version, theirs.xnack, theirs.sramecc) == (theirs.e_flags, version, *feats)
  assert ours.kernels["k0"].descriptor.replace(kernel_code_entry_byte_offset=0) == \
    theirs.kernels["k0"].descriptor.replace(kernel_code_entry_byte_offset=0)
  assert ours.metadata["amdhsa.target"] == f"amdgcn-amd-amdhsa--{arch}{features}"


def test_asm_directive_errors_say_where():
  ok_kd = ".amdhsa_kernel k\n.amdhsa_next_free_vgpr 1\n.amdhsa_next_free_sgpr 1\n.end_amdhsa_kernel\n"
  cases = {".text\nk:\n.bogus 1\n" + ok_kd: r"<asm>:3: unsupported directive \.bogus",
           ".amdhsa_kernel k\n.amdhsa_next_free_vgpr 1\n": r"<asm>:1: \.amdhsa_kernel k has no \.end_amdhsa_kernel",
           ".amdhsa_kernel k\n.amdhsa_next_free_vgpr undefined_sym\n.end_amdhsa_kernel\n": r"<asm>:2: unknown symbol",
           '.amdgcn_target "amdgcn-amd-amdhsa--gfx942"\n' + ok_kd: r"<asm>:1: .amdgcn_target is gfx942",
           ".rodata\n  s_endpgm\n": r"<asm>:2: instruction outside \.text",
           ".amdgpu_metadata\n---\n": r"<asm>:1: \.amdgpu_metadata has no \.end_amdgpu_metadata"}
  for src, msg in cases.items():
    with pytest.raises(CodeObjectError, match=msg): assemble_code_object(src, "gfx1100")
  with pytest.raises(CodeObjectError, match=r"\.amdhsa_kernel k: line 2: directive requires gfx90a\+"):
    assemble_code_object(".amdhsa_kernel k\n.amdhsa_accum_offset 4\n.end_amdhsa_kernel\n", "gfx1100")


@needs_asm
def test_asm_errors_map_to_source_lines():
  from gputwin.errors import AsmError
  src = ".text\n.p2align 8\nk:\n  s_nop 0\n\n  s_bogus_op v1\n.rodata\n" \
        ".amdhsa_kernel k\n.amdhsa_next_free_vgpr 1\n.amdhsa_next_free_sgpr 1\n.end_amdhsa_kernel\n"
  with pytest.raises(AsmError) as e: assemble_code_object(src, "gfx1100")
  assert e.value.line == 6
  with pytest.raises(CodeObjectError, match="no code label for kernel"):
    assemble_code_object(src.replace("k:", "other:").replace("s_bogus_op v1", "s_endpgm"), "gfx1100")


def test_initial_register_layout():
  """User SGPRs in ABI order, then system SGPRs from user_sgpr_count; work-item ids packed in v0 (AMDGPUUsage)."""
  kd = KernelDescriptor("gfx1100", enable_sgpr_dispatch_ptr=1, enable_sgpr_kernarg_segment_ptr=1,
                        enable_sgpr_dispatch_id=1, user_sgpr_count=8, enable_sgpr_workgroup_id_x=1,
                        enable_sgpr_workgroup_id_z=1, enable_private_segment=1, enable_vgpr_workitem_id=2)
  assert kd.sgpr_layout() == [("dispatch_ptr", 0, 2), ("kernarg_segment_ptr", 2, 2), ("dispatch_id", 4, 2),
                              ("workgroup_id_x", 8, 1), ("workgroup_id_z", 9, 1),
                              ("private_segment_wavefront_offset", 10, 1)]
  assert kd.vgpr_layout() == [("workitem_id_x", 0, 0, 10), ("workitem_id_y", 0, 10, 10), ("workitem_id_z", 0, 20, 10)]
  assert KernelDescriptor.decode(kd.encode(), "gfx1100") == kd


def test_handwritten_metadata_yaml_parses_like_pyyaml():
  yaml = pytest.importorskip("yaml")
  text = """---
amdhsa.version: [ 1, 2 ]
amdhsa.target: amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
amdhsa.kernels:
- .name: 'my kernel'   # comment
  .symbol: "k.kd"
  .kernarg_segment_size: 0x18
  .args:
  - .offset: 0
    .size: 8
    .value_kind: global_buffer
    .is_const: true
  - .offset: 8
    .size: 4
    .value_kind: by_value
    .type_name: 'it''s'
  .language_version:
    - 2
    - 0
...
"""
  assert parse_metadata_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize("version", [4, 5])
def test_older_code_object_versions(version, tmp_path):
  need(CLANG, LLD, OBJDUMP)
  (tmp_path / "k.cl").write_text(OPENCL)
  sh(CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx942", "-nogpulib", "-O2",
     f"-mcode-object-version={version}", "-c", "k.cl", "-o", "k.o", cwd=tmp_path)
  sh(LLD, "-shared", "k.o", "-o", "k.co", cwd=tmp_path)
  co = load_code_object(tmp_path / "k.co")
  assert co.version == version and co.metadata["amdhsa.version"] == [1, 1 if version == 4 else 2]
  base, rodata = rodata_bytes(tmp_path / "k.co")
  for k in co.kernels.values():
    assert k.descriptor.encode() == rodata[k.kd_address - base:k.kd_address - base + 64]
  assert [a.type_name for a in co.kernels["scale"].user_args] == ["float*", "float*", "float", "int"]
