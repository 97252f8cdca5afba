"""The decoded operand model (`isa.operands.operands`, `vopd_halves`) against llvm-mc-22: llvm-mc encodes a line, we
decode its bytes, and every operand we list must name the register or constant llvm-mc prints (and no more)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gputwin.isa import decode, disassemble
from gputwin.isa.operands import operands, vopd_halves
from gputwin.isa.syntax import scalar_name
from gputwin.isa.targets import target

pytestmark = pytest.mark.skipif(shutil.which("llvm-mc-22") is None, reason="needs llvm-mc-22")


def mc(text: str, arch: str) -> bytes:
  """llvm-mc-22's encoding of one line."""
  out = subprocess.run(["llvm-mc-22", "-arch=amdgcn", f"-mcpu={arch}", "-show-encoding"], input=text,
                       capture_output=True, text=True, check=True).stdout
  return bytes(int(b, 16) for b in re.search(r"encoding: \[([^\]]*)\]", out)[1].split(","))


def mc_disasm(code: bytes, arch: str) -> list[str]:
  out = subprocess.run(["llvm-mc-22", "-arch=amdgcn", f"-mcpu={arch}", "--disassemble"],
                       input=" ".join(f"0x{b:02x}" for b in code), capture_output=True, text=True, check=True).stdout
  return [" ".join(ln.split()) for ln in out.splitlines() if ln.strip() and not ln.strip().startswith(".")]


def spell(o, arch: str) -> str:
  """An operand the way llvm-mc names it (registers and literals; inline constants by their code)."""
  if o.file in ("v", "a"):
    return f"{o.file}{o.index}" if o.dwords == 1 else f"{o.file}[{o.index}:{o.index + o.dwords - 1}]"
  if o.file == "s":
    return scalar_name(target(arch).family, o.index, o.dwords)
  if o.file == "literal":
    return f"0x{o.value:x}"
  return f"inline:{o.value}"


@pytest.mark.parametrize("arch,line,want", [
  ("gfx942", "v_accvgpr_read_b32 v4, a0", ["v4", "a0"]),  # UPSTREAM 10: src0 was an immediate 256
  ("gfx942", "v_accvgpr_write_b32 a4, v7", ["a4", "v7"]),
  ("gfx942", "v_accvgpr_mov_b32 a4, a3", ["a4", "a3"]),
  ("gfx942", "v_add_u32_sdwa v6, v5, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD",
   ["v6", "v5", "v0"]),  # UPSTREAM 11: vsrc0/vsrc1 were 'imm'
  ("gfx942", "v_add_f32_sdwa v6, s5, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD",
   ["v6", "s5", "v0"]),  # the SDWA s0 bit: an SGPR source
  ("gfx942", "s_mov_b64 s[2:3], src_shared_base", ["s[2:3]", "src_shared_base"]),  # UPSTREAM 15: were inline
  ("gfx1100", "s_mov_b64 s[2:3], src_private_base", ["s[2:3]", "src_private_base"]),
  ("gfx1100", "s_mov_b32 s2, src_shared_limit", ["s2", "src_shared_limit"]),
  ("gfx1100", "global_atomic_add_u32 v2, v3, s[0:1]", ["v2", "v3", "s[0:1]"]),  # UPSTREAM 9: no vdst
  ("gfx1100", "global_atomic_add_u32 v1, v2, v3, s[0:1] glc", ["v1", "v2", "v3", "s[0:1]"]),
  ("gfx942", "global_atomic_add v2, v3, s[0:1]", ["v2", "v3", "s[0:1]"]),
  ("gfx942", "global_atomic_add v1, v2, v3, s[0:1] sc0", ["v1", "v2", "v3", "s[0:1]"]),
  ("gfx1200", "global_atomic_add_u32 v2, v3, s[0:1]", ["v2", "v3", "s[0:1]"]),
  ("gfx1200", "global_atomic_add_u32 v1, v2, v3, s[0:1] th:TH_ATOMIC_RETURN", ["v1", "v2", "v3", "s[0:1]"]),
  ("gfx942", "v_smfmac_f32_16x16x32_f16 a[10:13], v[2:3], v[4:7], v1", ["a[10:13]", "v[2:3]", "v[4:7]", "v1"]),
  ("gfx950", "v_smfmac_i32_16x16x128_i8 a[0:3], v[4:7], a[8:15], v9", ["a[0:3]", "v[4:7]", "a[8:15]", "v9"]),
])
def test_operands_name_what_llvm_mc_prints(arch, line, want):
  code = mc(line, arch)
  text = mc_disasm(code, arch)[0]
  assert all(re.search(rf"(?<![\w\[:]){re.escape(w)}(?![\w\]:])", text) for w in want), text  # the oracle's names
  got = [spell(o, arch) for o in operands(decode(code, arch))]
  assert [_base(g) for g in got if not g.startswith("inline")] == [_base(w) for w in want]


def _base(name: str) -> str:
  """v[2:3] and v2 name the same base register (a GLOBAL address with SADDR is one VGPR, printed as v2)."""
  return re.sub(r"^([vas])\[(\d+):\d+\]$", r"\1\2", name)


@pytest.mark.parametrize("line,x,y", [
  ("v_dual_mov_b32 v4, 0 :: v_dual_lshlrev_b32 v5, 6, v1", ["v4", "inline:128"], ["v5", "inline:134", "v1"]),
  ("v_dual_mov_b32 v7, v2 :: v_dual_mov_b32 v8, s3", ["v7", "v2"], ["v8", "s3"]),  # vdsty = (f << 1) | !(vdstx & 1)
  ("v_dual_fmac_f32 v1, v2, v3 :: v_dual_fmaak_f32 v4, v5, v6, 0x3f800000",  # UPSTREAM 7: the literal form
   ["v1", "v2", "v3"], ["v4", "v5", "v6", "0x3f800000"]),
  ("v_dual_fmamk_f32 v1, v2, 0x40400000, v3 :: v_dual_mul_f32 v4, v5, v6", ["v1", "v2", "0x40400000", "v3"],
   ["v4", "v5", "v6"]),
])
def test_vopd_lists_both_halves(line, x, y):
  """UPSTREAM 6: VOPD listed only its Y half, with the raw vdsty field; llvm-mc-22 prints both halves."""
  code = mc(line, "gfx1100")
  inst = decode(code, "gfx1100")
  hx, hy = vopd_halves(inst)
  assert [spell(o, "gfx1100") for o in hx.operands] == x and [spell(o, "gfx1100") for o in hy.operands] == y
  assert operands(inst) == hx.operands + hy.operands
  assert disassemble(code, "gfx1100") == mc_disasm(code, "gfx1100")  # the names come from the oracle's own text
  assert all(t in mc_disasm(code, "gfx1100")[0] for t in x + y if not t.startswith("inline"))


@pytest.mark.parametrize("arch,lines", [
  ("gfx942", ["v_mov_b32_e32 v10, 31", "s_waitcnt vmcnt(0)", "v_pk_fma_f16 v4, v4, v4, s4"]),  # UPSTREAM 16
  ("gfx942", ["s_mov_b32 s0, 0", "v_mov_b32_e32 v0, 1",  # UPSTREAM 8: DPP after other instructions
              "v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf"]),
])
def test_decode_does_not_depend_on_following_bytes(arch, lines):
  """A base whose fixed bits match but whose opcode does not must not end the search (the next base may fit)."""
  code = b"".join(mc(ln, arch) for ln in lines)
  assert disassemble(code, arch) == mc_disasm(code, arch)
  assert [" ".join(x.split()) for x in disassemble(code[:len(mc(lines[0], arch))], arch)] == mc_disasm(
    code[:len(mc(lines[0], arch))], arch)


@pytest.mark.parametrize("arch,line", [
  ("gfx1200", "v_cvt_f32_fp8_e64 v3, v2 byte_sel:1"),  # gfx12 byte_sel: op_sel bits 1/0, reversed
  ("gfx1200", "v_cvt_f32_bf8_e64 v3, s2 byte_sel:2"),
  ("gfx1201", "v_cvt_f32_fp8_e64 v3, v2 byte_sel:3"),
  ("gfx1200", "v_cvt_sr_fp8_f32 v3, v2, v1 byte_sel:1"),  # op_sel bits 2/3
  ("gfx1200", "v_cvt_sr_bf8_f32 v3, v2, v1 byte_sel:3"),
  ("gfx1200", "v_cvt_pk_f32_fp8_e64 v[4:5], v2 op_sel:[1,0]"),  # a 16-bit packed source's word, printed
  ("gfx1200", "v_cvt_pk_bf8_f32 v3, v2, v1 op_sel:[0,0,1]"),
  ("gfx942", "v_cvt_pk_fp8_f32 v3, -v2, |v1| op_sel:[0,0,1]"),
  ("gfx950", "v_cvt_f32_bf8_sdwa v3, v2 src0_sel:BYTE_3"),
])
def test_fp8_selects_match_llvm_mc(arch, line):
  from gputwin.isa import assemble
  want = mc(line, arch)
  assert assemble(line, arch) == want
  assert [" ".join(t.split()) for t in disassemble(want, arch)] == mc_disasm(want, arch)


SWMMAC = ["v_swmmac_f32_16x16x32_f16 v[8:15], v[16:19], v[0:7], v21", "v_swmmac_bf16_16x16x32_bf16 v[8:11], v[16:19], "
          "v[0:7], v21 neg_lo:[1,0,0]", "v_swmmac_i32_16x16x32_iu8 v[8:15], v[16:17], v[0:3], v21 neg_lo:[1,1,0] clamp",
          "v_swmmac_i32_16x16x32_iu4 v[8:15], v16, v[0:1], v21", "v_swmmac_f32_16x16x32_fp8_bf8 v[8:15], v[16:17], "
          "v[0:3], v21", "v_swmmac_i32_16x16x64_iu4 v[8:15], v[16:17], v[0:3], v21"]


@pytest.mark.parametrize("line", SWMMAC)
def test_swmmac_index_key_and_fixed_fields_match_llvm_mc(line):
  """gfx12 SWMMAC's index_key (kept in op_sel bit 0; none on 16x16x64 IU4) and the op_sel/op_sel_hi bits llvm-mc-22
  decodes gfx12 WMMA/SWMMAC only without (formats.json index_key, vop3p_fixed)."""
  from gputwin.errors import AsmError, DecodeError
  from gputwin.isa import assemble
  head, _, mods = line.partition(" v21")
  for key in ("", " index_key:1"):
    text = f"{head} v21{key}{mods}"
    try:
      want = mc(text, "gfx1200")
    except subprocess.CalledProcessError:  # (16x16x64 IU4 has no index_key)
      with pytest.raises(AsmError):
        assemble(text, "gfx1200")
      continue
    assert assemble(text, "gfx1200") == want, text
    assert [" ".join(t.split()) for t in disassemble(want, "gfx1200")] == mc_disasm(want, "gfx1200"), text
    for byte, bit in ((1, 0x08), (1, 0x10), (1, 0x20), (1, 0x40), (7, 0x08), (7, 0x10)):  # op_sel 0-2, op_sel_hi
      code = bytearray(want)
      code[byte] ^= bit
      ok = mc_disasm(bytes(code), "gfx1200")
      if len(ok) == 1 and ok[0].startswith(head.split()[0] + " "):
        assert [" ".join(t.split()) for t in disassemble(bytes(code), "gfx1200")] == ok, (text, byte, bit)
      else:
        with pytest.raises(DecodeError):
          disassemble(bytes(code), "gfx1200")


def test_scaled_mfma_needs_its_ld_scale_prefix():
  """A VOP3PX2 (gfx950 scaled MFMA) is a V_MFMA_LD_SCALE_B32 followed by an MFMA (formats.json pinned_fields): two
  v_mov_b32 before an F8F6F4 MFMA are three instructions, as llvm-mc-22 decodes them (we read them as one)."""
  lines = ("v_mov_b32 v14, 0", "v_mov_b32 v15, 0",
           "v_mfma_f32_16x16x128_f8f6f4 v[0:3], v[4:9], v[10:15], v[0:3] cbsz:2 blgp:2")
  code = b"".join(mc(ln, "gfx950") for ln in lines)
  assert [" ".join(t.split()) for t in disassemble(code, "gfx950")] == mc_disasm(code, "gfx950")
  scaled = bytes([0x00, 0x00, 0xac, 0xd3, 0x14, 0x2b, 0x02, 0x00, 0x00, 0x08, 0xad, 0xd3, 0x04, 0x19, 0x02, 0x04])
  assert mc_disasm(scaled, "gfx950")[0].startswith("v_mfma_scale_f32_16x16x128_f8f6f4 ")
  assert decode(scaled, "gfx950").op == "V_MFMA_SCALE_F32_16X16X128_F8F6F4"  # (one instruction, not a plain MFMA)
  other = scaled[:9] + bytes([0x00]) + scaled[10:]  # (bits 78:75 other than 1: two instructions)
  assert [" ".join(t.split()) for t in disassemble(other, "gfx950")] == mc_disasm(other, "gfx950")


@pytest.mark.parametrize("line", [
  "v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v20, v21 op_sel_hi:[0,0,0]",
  "v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v20, v21 op_sel:[1,0,0] op_sel_hi:[0,1,0]",
  "v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v20, v21 op_sel:[1,1,0] op_sel_hi:[1,1,0]",
  "v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:9], v[12:15], v[0:3], v20, v21 op_sel_hi:[0,0,0] cbsz:3 blgp:4",
  "v_mfma_scale_f32_16x16x128_f8f6f4 a[0:3], v[4:11], a[12:17], a[0:3], v20, v21 op_sel_hi:[1,0,0] blgp:2",
  "v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15], v32, v33 op_sel:[1,1,0] op_sel_hi:[1,0,0] "
  "cbsz:1",
  "v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15], v32, v33 op_sel_hi:[0,0,0] blgp:7",
  "v_mfma_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3] cbsz:7 blgp:6",  # (formats 5-7: 8 VGPRs)
])
def test_scaled_mfma_text_matches_llvm_mc(line):
  """gfx950's V_MFMA_SCALE_* (VOP3PX2): D, A, B, C and the two scale VGPRs of its V_MFMA_LD_SCALE_B32 half, whose
  op_sel/op_sel_hi pick each scale's byte (formats.json order, operand_fixes, mods_skip_ops), as clang-22 prints
  them; F8F6F4 register counts by format, 5-7 included."""
  from gputwin.isa import assemble
  want = mc(line, "gfx950")
  assert assemble(line, "gfx950") == want
  assert [" ".join(t.split()) for t in disassemble(want, "gfx950")] == mc_disasm(want, "gfx950")
