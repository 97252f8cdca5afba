"""Vendor-table loader: facts checked against AMD's published numbers and llvm-mc-22 encodings."""
import subprocess
import sys
import time

import pytest

from gputwin.errors import VendorDataError
from gputwin.isa import vendor
from gputwin.isa.targets import TARGETS, target


@pytest.mark.parametrize("fam", vendor.FAMILIES)
def test_every_family_has_compute_encodings(fam):
  t = vendor.tables(fam)
  for base in ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOP3", "VOP3P", "VOPC", "DS"):
    assert base in t.encodings, base
  assert len(t.pcode) > 1000 and len(t.operands) > 1400


def test_encoding_facts_match_the_isa_manual():
  # RDNA3 manual: VOP1 is bits[31:25] = 0111111, op in [16:9]; V_MOV_B32 is opcode 1 (llvm-mc: 0x7e020301 = v_mov_b32 v1, v1)
  t = vendor.tables("rdna3")
  vop1 = t.encodings["VOP1"]
  assert (vop1.by_name["encoding"].hi, vop1.by_name["encoding"].lo, vop1.by_name["encoding"].value) == (31, 25, 0b0111111)
  assert t.opcode("VOP1Op", "V_MOV_B32") == 1 and t.opcode("VOP1Op", "V_MOV_B32_E32") == 1
  assert t.encodings["VOP3_LIT"].size == 12 and t.encodings["VOP1"].size == 4 and t.encodings["SMEM"].size == 8
  # CDNA: VOP3 fixed bits 110100 and S_ENDPGM is SOPP opcode 1 (llvm-mc-22 gfx942: s_endpgm = 0xbf810000)
  c = vendor.tables("cdna")
  assert c.encodings["VOP3"].by_name["encoding"].value == 0b110100 and c.opcode("SOPPOp", "S_ENDPGM") == 1


def test_pcode_and_operands_are_keyed_by_canonical_names():
  t = vendor.tables("rdna3")
  assert "D0.f32 = fma(S0.f32, S1.f32, S2.f32)" in t.pcode["V_FMA_F32"]
  assert t.operands[("VOP3Op", "V_FMA_F32")]["src0"].bits == 32
  assert t.hwreg["HW_REG_MODE"] == 1


def test_warm_load_is_fast_and_cached(tmp_path):
  code = ("import time; t=time.perf_counter(); from gputwin.isa import vendor; vendor.all_tables(); "
          "print(time.perf_counter()-t)")
  env = {"GPUTWIN_CACHE": str(tmp_path), "PATH": ""}
  cold = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
  warm = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
  assert list(tmp_path.glob("amd-tables-*.pkl")), "cache file written"
  assert warm < cold  # the 50 ms budget is measured in bench/, not asserted here


def test_missing_wheel_names_what_to_install(monkeypatch):
  monkeypatch.setattr(vendor.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(VendorDataError, match="pip install tinygrad==0.14.0"):
    vendor.source_dir()


def test_changed_layout_is_a_clear_error(tmp_path):
  bad = tmp_path / "enum.py"
  bad.write_text("class VOP1Op(ReprEnum):\n  V_NOP = foo()\n")
  with pytest.raises(VendorDataError, match="unexpected layout"):
    vendor._parse_enums(bad)


def test_unknown_family_and_target():
  with pytest.raises(VendorDataError):
    vendor.tables("rdna9")
  with pytest.raises(Exception, match="unknown target"):
    target("gfx9000")


@pytest.mark.parametrize("name", TARGETS)
def test_targets(name):
  t = target(name)
  assert t.family in vendor.FAMILIES and t.wave in t.waves
  assert t.wave == (64 if t.family == "cdna" else 32)
