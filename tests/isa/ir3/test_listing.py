"""Mesa ir3 compiler listings (shared/vendor/ir3/kernels/<gpu>/<name>.txt) read into `ir3.listing.Shader`: every
fact equals manifest.json's entry for that kernel and GPU (made by the vendor's own packaging script), the
instruction text equals ir3-disasm's `.lst` decode of the `.bin`, and malformed listings raise a located error."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from gputwin.errors import CodeObjectError
from gputwin.isa import ir3
from gputwin.isa.ir3 import listing

KERNELS = Path(__file__).resolve().parents[3].parent / "shared" / "vendor" / "ir3" / "kernels"
TXTS = sorted(KERNELS.glob("a*/*.txt")) if KERNELS.exists() else []
needs_kernels = pytest.mark.skipif(not TXTS, reason="Mesa kernels (../shared/vendor/ir3/kernels) not present")
_LST = re.compile(r"\s*\d+\[[0-9a-f]{8}_[0-9a-f]{8}\] (.*)")


def _reg(name: str) -> int:
  m = re.fullmatch(r"r(\d+)\.([xyzw])", name)
  return int(m[1]) * 4 + "xyzw".index(m[2])


@needs_kernels
@pytest.mark.parametrize("txt", TXTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_listing_matches_manifest(txt: Path):
  gpu, name = txt.parent.name, txt.stem
  kern = json.loads((KERNELS / "manifest.json").read_text())["kernels"][name]
  man = kern["variants"][gpu]
  sh = listing.read(txt.with_suffix(".bin"))
  assert sh == listing.read(txt) == listing.parse(txt.read_text(), str(txt))
  assert sh.gpu == gpu and sh.local_size == tuple(kern["local_size"])
  assert sh.wave_size == (128 if man["double_threadsize"] else 64)
  for k in ("shared_size", "subgroup_size", "constlen", "max_reg", "max_half_reg", "preamble_instrs", "pvtmem_size",
            "branchstack"):
    assert getattr(sh, k) == man[k], k
  assert (sh.early_preamble, sh.has_barrier) == (bool(man["early_preamble"]), bool(man["has_barrier"]))
  assert {i.sysval.removeprefix("SYSTEM_VALUE_").lower(): i.reg for i in sh.inputs} == \
      {k: _reg(v) for k, v in man["sysval_regs"].items()}
  assert all(i.compmask == 0x7 and i.shared == (i.reg >= 192) and not i.half for i in sh.inputs)
  assert {n: (o, sz) for n, o, sz in sh.allocs} == \
      {n: (a["offset_vec4"] * 4, a["size_vec4"] * 4) for n, a in man["const_alloc"].items()}
  assert sh.ubo_offset == sh.const_offset("ubo_ranges") and sh.driver_params == sh.const_offset("driver_params")
  imm = man["immediates"]
  assert sh.consts == (((imm["offset_vec4"] * 4, tuple(int(w, 16) for w in imm["dwords"])),) if imm else ())
  assert [(r.block, r.offset, r.start, r.end, r.end - r.start) for r in sh.ubo_ranges] == \
      [(r["block"], r["offset_vec4"] * 4, r["start"], r["end"], r["size_vec4"] * 16) for r in man["ubo_ranges"]]
  # the instruction text is ir3-disasm's decode of the .bin (labels included), one word per non-label line
  lst = [m[1] for m in map(_LST.fullmatch, txt.with_suffix(".lst").read_text().splitlines()) if m]
  code = txt.with_suffix(".bin").read_bytes()
  assert list(sh.text) == lst
  assert len(sh.instrs) == man["instrs"] == len(code) // 8 == sh.sizedwords // 2
  assert hashlib.sha256(code).hexdigest() == man["bin_sha256"]
  assert sh.text == listing.Shader.explicit(gpu, code).text


@needs_kernels
def test_subgroup_const_layout():
  """The subgroup kernel reads subgroup_size from driver_params[7] = c1.w, and its preamble stores into c4.x+."""
  for gpu in ("a630", "a660", "a730"):
    sh = listing.read(KERNELS / gpu / "subgroup.txt")
    assert (sh.driver_params, sh.preamble, sh.ubo_offset) == (0, 16, None)
    assert any("c1.w" in t for t in sh.instrs) and sh.subgroup_size == 128
    assert any(t.startswith("stc.u32 c[16]") for t in sh.instrs)


def test_explicit_defaults():
  code = ir3.assemble("(nop3) shl.b r0.w, r48.x, 6\nadd.u r0.w, r0.w, r0.x\nend\nnop", "a630")
  sh = listing.Shader.explicit("a630", code, local_size=(32, 2, 1), consts=((0, (1, 2, 3, 4)),))
  assert (sh.sizedwords, len(sh.instrs), sh.wave_size, sh.local_size) == (8, 4, 64, (32, 2, 1))
  assert sh.instrs[-2:] == ("end", "nop")
  assert [(i.name, i.shared, i.sysval) for i in sh.inputs] == [
      ("r0.x", False, listing.LOCAL_ID), ("r48.x", True, listing.WORKGROUP_ID)]
  assert (sh.driver_params, sh.preamble, sh.ubo_offset) == (None, None, None)


MINI = """; gpu: FD630 gen=6 gpu_id=630 chip_id=0x0
@in(r0.x)\tin0 (wrmask=0x7)
end
nop
; kernel-info: local_size=64,1,1 shared_size=0 req_local_mem=0 double_threadsize=0 threadsize_base=64 max_reg=0 \
max_half_reg=-1 max_const=-1 constlen=0 instrlen=1 sizedwords=4 pvtmem_size=0 pvtmem_per_wave=1 has_barrier=0 \
num_ssbos=0 num_ibos=0 branchstack=0 early_preamble=0 preamble_instrs=0 mergedregs=1 subgroup_size=64
; kernel-sysval: SYSTEM_VALUE_LOCAL_INVOCATION_ID -> r0.x (compmask=0x7)
"""


def test_minimal_listing_and_gpu_names():
  sh = listing.parse(MINI, "mini.txt")
  assert sh.text == ("end", "nop") and sh.inputs == (listing.Input(0, 7, listing.LOCAL_ID),)
  a730 = MINI.replace("FD630 gen=6 gpu_id=630 chip_id=0x0", "? gen=7 gpu_id=0 chip_id=0x7030001")
  assert listing.parse(a730).gpu == "a730"


@pytest.mark.parametrize("edit, where, what", [
    (lambda s: s.split("; kernel-info")[0], "t.txt", "no '; kernel-info:' line"),                # truncated file
    (lambda s: s.replace("local_size=64,1,1", "local_size=64,1"), "t.txt:5", "bad local_size"),
    (lambda s: s.replace("max_reg=0", "max_reg=zz"), "t.txt:5", "not a number: 'zz'"),
    (lambda s: s.replace(" sizedwords=4", ""), "t.txt:5", "lacks sizedwords"),
    (lambda s: s.replace("end\n", ""), "t.txt", "1 instructions in the listing"),
    (lambda s: s.replace("; gpu: FD630", "; gpu FD630"), "t.txt", "no '; gpu:' line"),
    (lambda s: s.replace("wrmask=0x7", "wrmask=7"), "t.txt:2", "bad input line"),
    (lambda s: s.replace("(compmask=0x7)", "(compmask=0x3)"), "t.txt:6", "disagrees with @in(r0.x)"),
    (lambda s: s.replace("-> r0.x", "-> shared r0.x"), "t.txt:6", "'shared' disagrees"),
])
def test_malformed_listing_is_located(edit, where, what):
  with pytest.raises(CodeObjectError, match=re.escape(f"{where}: error: ") + ".*" + re.escape(what)):
    listing.parse(edit(MINI), "t.txt")


def test_read_checks_bin_size(tmp_path):
  (tmp_path / "k.txt").write_text(MINI)
  (tmp_path / "k.bin").write_bytes(bytes(16))
  assert listing.read(tmp_path / "k.bin").sizedwords == 4
  (tmp_path / "k.bin").write_bytes(bytes(24))
  with pytest.raises(CodeObjectError, match="k.bin: error: 24 bytes"):
    listing.read(tmp_path / "k.bin")
  with pytest.raises(CodeObjectError, match="cannot read listing"):
    listing.read(tmp_path / "missing.txt")
