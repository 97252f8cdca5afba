"""The NVIDIA program image (gputwin.isa.ptx.cubin): our reader against readelf and `ptxas -v` on ptxas's cubins of
the CUDA kernel suite, the mock-only image's attributes against ptxas's for the same PTX, and malformed images."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

from gputwin.errors import CodeObjectError
from gputwin.isa.ptx import cubin as C
from tests.emu.ptx.conftest import ARCHS, needs_cuda, ptx as suite_ptx, sources  # noqa: F401 - suite_ptx: a fixture

needs_readelf = pytest.mark.skipif(not shutil.which("readelf"), reason="readelf not installed")

HAND = """.version 8.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry k1(.param .u64 p0, .param .u32 p1, .param .align 8 .b8 p2[24], .param .u8 p3, .param .f64 p4)
.maxntid 128, 1, 1
{
  .shared .align 4 .b8 sm[1000];
  .reg .u64 %rd<4>; .reg .u32 %r<4>;
  ld.param.u64 %rd1, [p0];
  ld.param.u32 %r1, [p1];
  st.shared.u32 [sm], %r1;
  ld.shared.u32 %r2, [sm+4];
  st.global.u32 [%rd1], %r2;
  ret;
}
.visible .entry k2(.param .u32 q)
.reqntid 64, 2
{
  .reg .u32 %r<4>;
  ld.param.u32 %r1, [q];
  ret;
}
.visible .entry k3()
{
  .reg .u32 %r<4>;
  mov.u32 %r1, 5;
  st.shared.u32 [dyn], %r1;
  ret;
}
"""
FIELDS = ("param_offset", "param_size", "params", "shared_static", "max_threads", "reqntid", "cbank0_size")


def readelf_sections(path) -> dict[str, tuple[int, int]]:
  """{name: (file offset, size)} from `readelf -S -W`."""
  out = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True).stdout
  rows = re.findall(r"\]\s+(\S+)\s+\S+(?:\+\S+)?\s+[0-9a-f]{16}\s+([0-9a-f]+)\s+([0-9a-f]+)", out)
  return {n: (int(o, 16), int(s, 16)) for n, o, s in rows}


def ptxas_v(path, arch: str) -> dict[str, dict]:
  """Per kernel: registers, smem and cmem[0] bytes as `ptxas -v` reports them."""
  err = subprocess.run(["ptxas", f"-arch={arch}", "-v", "-o", "/dev/null", str(path)], capture_output=True,
                       text=True).stderr
  out = {}
  for name, body in re.findall(r"Compiling entry function '(\w+)'.*?\n(.*?)(?=Compiling entry|\Z)", err, re.S):
    used = re.search(r"Used (\d+) registers.*", body).group(0)
    num = lambda what: int(m.group(1)) if (m := re.search(rf"(\d+) bytes {what}", used)) else 0
    out[name] = dict(regs=int(re.search(r"Used (\d+) registers", used).group(1)), smem=num("smem"),
                     cmem0=num(r"cmem\[0\]"))
  return out


@needs_cuda
@needs_readelf
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sources())
def test_reader_matches_readelf_and_ptxas(name, arch, suite_ptx, tmp_path):
  """Where each kernel's code is (readelf), its registers, static shared memory and constant bank 0 (ptxas -v)."""
  text = suite_ptx[name, arch].read_text()
  image = C.build(text, arch, ptxas=True)
  (tmp_path / "m.cubin").write_bytes(image)
  secs, v = readelf_sections(tmp_path / "m.cubin"), ptxas_v(suite_ptx[name, arch], arch)
  prog = C.read_program(image)
  assert prog.arch == arch and prog.ptx == text
  assert set(prog.kernels) == set(v)
  for k, info in prog.kernels.items():
    assert (info.text_offset, info.text_size) == secs[f".text.{k}"], k
    assert info.regs == v[k]["regs"], k
    assert info.param_offset + info.param_size == secs[f".nv.constant0.{k}"][1], k
    assert info.param_offset == C.PARAM_BASE[arch]
    if v[k]["cmem0"]: assert info.param_offset + info.param_size == v[k]["cmem0"], k   # (sm_80 reports cmem)
    smem = secs.get(f".nv.shared.{k}", (0, 0))[1]
    assert info.shared_static == smem, k
    assert smem in (v[k]["smem"], v[k]["smem"] + C.RESERVED_SHARED[arch]), k   # -v leaves out the reserved KiB
    assert sum(n for _, n in info.params) <= info.param_size
    assert all(o + n <= info.param_size for o, n in info.params)


@needs_cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sources())
def test_mock_image_matches_ptxas(name, arch, suite_ptx):
  """Without ptxas we compute what ptxas would record: parameter offsets/sizes, the cbank offset, shared memory."""
  text = suite_ptx[name, arch].read_text()
  real, mock = C.read_program(C.build(text, arch, ptxas=True)), C.read_program(C.build(text, arch, ptxas=False))
  assert mock.ptx == text and mock.arch == arch and set(mock.kernels) == set(real.kernels)
  for k in real.kernels:
    for f in FIELDS:
      assert getattr(mock.kernels[k], f) == getattr(real.kernels[k], f), (k, f)
    assert mock.kernels[k].text_offset % C.TEXT_ALIGN == 0 and mock.kernels[k].text_size >= 128


@pytest.mark.skipif(not C.have_ptxas(), reason="ptxas not installed")
@pytest.mark.parametrize("arch", ARCHS)
def test_launch_bounds_struct_and_dynamic_shared(arch):
  """.maxntid/.reqntid, a by-value struct, a u8 after it, an `.extern .shared` array: mock == ptxas."""
  text = HAND.replace("sm_80", arch)
  real, mock = C.read_program(C.build(text, arch)), C.read_program(C.build(text, arch, ptxas=False))
  assert real.kernels["k1"].params == [(0, 8), (8, 4), (16, 24), (40, 1), (48, 8)]   # PTX ISA: natural alignment
  assert real.kernels["k1"].max_threads == (128, 1, 1) and real.kernels["k2"].reqntid == (64, 2, 1)
  for k in real.kernels:
    for f in FIELDS: assert getattr(mock.kernels[k], f) == getattr(real.kernels[k], f), (k, f)


def test_mock_image_without_ptxas(monkeypatch):
  monkeypatch.setattr(C, "have_ptxas", lambda: False)
  prog = C.read_program(C.build(HAND, "sm_90"))
  assert prog.ptx == HAND and prog.kernels["k2"].params == [(0, 4)] and prog.kernels["k1"].param_offset == 0x210
  assert C.read_program(C.build(HAND.encode(), "sm_80", ptxas=False)).kernels["k1"].param_offset == 0x160


def _patched(image: bytes, section: str, data: bytes) -> bytes:
  """`image` with the bytes of `section` replaced (same size)."""
  from gputwin.isa.elf import ElfFile
  s = ElfFile(image).section_by_name(section)
  out = bytearray(image)
  out[s.sh_offset:s.sh_offset + len(data)] = data
  return bytes(out)


@pytest.mark.parametrize("how,match", [
  (lambda im: im[:40], "not an NVIDIA program image"),
  (lambda im: b"\x7fELF" + bytes(60), "not an NVIDIA program image"),
  (lambda im: im[:18] + struct.pack("<H", 62) + im[20:], "EM_CUDA"),
  (lambda im: im[:-64], "outside the file"),
  (lambda im: _patched(im, ".nv.info.k2", b"\x09\x17"), "unknown format 9"),
  (lambda im: _patched(im, ".nv.info.k2", b"\x04\x17\xff\x00"), "runs past the section"),
  (lambda im: _patched(im, ".nv.info.k2", b"\x04\x17\x08\x00" + bytes(8) + b"\x03\x1b\xff\x00"), "KPARAM_INFO"),
])
def test_malformed_image(how, match):
  """A broken image raises CodeObjectError saying what is wrong, never a Python error."""
  image = C.build(HAND, "sm_90", ptxas=False)
  with pytest.raises(CodeObjectError, match=match): C.read_program(how(image))


def test_bad_inputs():
  with pytest.raises(CodeObjectError, match="unknown NVIDIA target"): C.build(HAND, "sm_70", ptxas=False)
  with pytest.raises(CodeObjectError, match="no kernel 'nope'"): C.read_program(C.build(HAND, "sm_90", ptxas=False)) \
    .kernel("nope")


@pytest.mark.skipif(not C.have_ptxas(), reason="ptxas not installed")
def test_ptxas_error_is_reported():
  with pytest.raises(CodeObjectError, match="ptxas -arch=sm_90 rejected"):
    C.build(HAND.replace("ret;", "bogus.op;", 1), "sm_90", ptxas=True)


@needs_cuda
def test_module_data_is_laid_out_and_relocated(suite_ptx):
  """memspace.cu's __constant__ tables land in bank 3, bank 4 holds the addresses of its __device__ variables
  (relocated to where the loader put them): followed, they reach gtable's initialiser and the zeroed gcount."""
  import numpy as np
  image = C.build(suite_ptx["memspace", "sm_90"].read_text(), "sm_90", ptxas=True)
  base = 0x1234_0000
  data, banks = C.module_data(image, base)
  assert len(C.module_data(image, 0)[0]) == len(data)
  o3, n3 = banks[3]
  ints = np.frombuffer(data[o3:o3 + 64], np.int32).tolist()
  assert ints == [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
  assert np.frombuffer(data[o3 + 64:o3 + 72], np.float32).tolist() == [0.5, -2.25] and n3 == 72
  o4, _ = banks[4]
  ptrs = [a - base for a in np.frombuffer(data[o4:o4 + 16], np.uint64).tolist()]
  found = {tuple(np.frombuffer(data[p:p + 32], np.int32).tolist()) for p in ptrs if p + 32 <= len(data)}
  assert (100, 200, 300, 400, 500, 600, 700, 800) in found
  assert any(data[p:p + 4] == bytes(4) for p in ptrs)
  assert C.module_data(C.build(HAND, "sm_90", ptxas=False), 0) == (b"", {})
