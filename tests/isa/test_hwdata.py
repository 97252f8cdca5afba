"""isa/hwdata rows against tools we did not write: llvm-mc-22 encodes the waitcnt forms and prints the DPP16
controls, accepts the matrix instructions' register tuples, and llvm-mca-22 reports each MFMA's passes (LLVM's
scheduling model); the vendor tables give the opcodes and operand widths."""
from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess

import pytest

from gputwin.isa import hwdata
from gputwin.isa.targets import target
from gputwin.isa.vendor import tables

MC, MCA = shutil.which("llvm-mc-22"), shutil.which("llvm-mca-22")
need_mc = pytest.mark.skipif(MC is None, reason="llvm-mc-22 not installed")
TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")


def _mc(text: str, arch: str, *args: str) -> tuple[list[str], str]:
  """llvm-mc-22's output lines (with -show-encoding when assembling) and its stderr."""
  p = subprocess.run([MC, "-arch=amdgcn", f"-mcpu={arch}", *args], input=text, capture_output=True, text=True)
  return [ln.strip() for ln in p.stdout.splitlines() if ln.strip() and not ln.strip().startswith(".")], p.stderr


def _simm16(arch: str, lines: list[str]) -> list[int]:
  """SIMM16 (the low half of the first dword) of each line llvm-mc-22 encodes."""
  out, err = _mc("\n".join(lines) + "\n", arch, "-show-encoding")
  assert not err, err
  return [int(b[1], 16) << 8 | int(b[0], 16) for b in (re.search(r"encoding: \[(.*)\]", ln).group(1).split(",")
                                                       for ln in out)]


# ---- wait counters
WAITCNT = [{"vmcnt": 3, "lgkmcnt": 1}, {"expcnt": 2}, {"vmcnt": 0}, {"lgkmcnt": 0}, {"vmcnt": 62}, {"vmcnt": 17,
           "expcnt": 0, "lgkmcnt": 5}]


@need_mc
@pytest.mark.parametrize("arch", TARGETS)
def test_s_waitcnt_layout(arch):
  """s_waitcnt vmcnt(a) lgkmcnt(b) as llvm-mc-22 encodes it decodes to those counts; counters not named read their
  field's maximum (no wait)."""
  fam = target(arch).family
  alias = {"vmcnt": "loadcnt", "lgkmcnt": "dscnt"} if fam == "rdna4" else {}
  widths = {alias.get(c, c): sum(w for _, w in ch) for c, ch in ((hwdata.counters(fam)[i], ch)
                                                                  for i, ch in hwdata.waits(fam, "S_WAITCNT"))}
  cases = [c for c in WAITCNT if all(v < 1 << widths[alias.get(k, k)] for k, v in c.items())]
  text = ["s_waitcnt " + " ".join(f"{k}({v})" for k, v in c.items()) for c in cases]
  for case, v in zip(cases, _simm16(arch, text)):
    want = {c: (1 << w) - 1 for c, w in widths.items()} | {alias.get(k, k): n for k, n in case.items()}
    assert hwdata.wait_counts(fam, "S_WAITCNT", v) == want, (arch, case, hex(v))


SINGLE = {"gfx1100": ["s_waitcnt_vmcnt null, {n}", "s_waitcnt_vscnt null, {n}", "s_waitcnt_lgkmcnt null, {n}",
                      "s_waitcnt_expcnt null, {n}"],
          "gfx1200": ["s_wait_loadcnt {n}", "s_wait_storecnt {n}", "s_wait_dscnt {n}", "s_wait_kmcnt {n}",
                      "s_wait_expcnt {n}", "s_wait_samplecnt {n}", "s_wait_bvhcnt {n}"]}


@need_mc
@pytest.mark.parametrize("arch", SINGLE)
def test_single_counter_waits(arch):
  """Each single-counter wait instruction waits on the counter its mnemonic names, for the count llvm-mc-22 encodes."""
  fam = target(arch).family
  for form in SINGLE[arch]:
    op = form.split()[0].upper()
    (c, chunks), = hwdata.waits(fam, op)
    name = hwdata.counters(fam)[c]
    assert name in op.lower(), (op, name)
    n = 5 if name not in ("expcnt", "bvhcnt") else 3
    v, = _simm16(arch, [form.format(n=n)])
    assert hwdata.wait_counts(fam, op, v) == {name: n}


@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
def test_wait_rows_name_vendor_opcodes(fam):
  """Every wait row is an opcode of the family's vendor tables, and every memory kind increments known counters."""
  ops = set(tables(fam).enums["SOPPOp"].values()) | set(tables(fam).enums.get("SOPKOp", {}).values())
  rows = json.loads((hwdata._DATA / "waitcnt.json").read_text())[fam]
  assert set(rows["waits"]) | set(rows["wait_states"]) <= ops
  for mem in rows["increments"]:
    load, store = hwdata.increments(fam, mem, False), hwdata.increments(fam, mem, True)
    assert load and store


# ---- DPP16 controls
@functools.cache
def _dpp_base(arch: str) -> tuple[int, ...]:
  out, err = _mc("v_mov_b32_dpp v0, v1 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf\n", arch, "-show-encoding")
  return tuple(int(x, 16) for x in re.search(r"encoding: \[(.*)\]", out[0]).group(1).split(","))


def _dpp_word(arch: str, ctrl: int) -> str:
  """A VOP1 DPP16 v_mov_b32 with dpp_ctrl = ctrl (bits 8-16 of its second dword), as llvm-mc-22 --disassemble reads."""
  b = _dpp_base(arch)
  d1 = int.from_bytes(bytes(b[4:8]), "little") & ~(0x1ff << 8) | ctrl << 8
  return " ".join(f"{x:#04x}" for x in bytes(b[:4]) + d1.to_bytes(4, "little"))


@need_mc
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942"])
def test_dpp_controls(arch):
  """For every dpp_ctrl code llvm-mc-22 prints the control hwdata names (name:argument, a flag, quad_perm's four
  selects), or a comment saying the code is invalid on this target where hwdata has none."""
  fam = target(arch).family
  codes = list(range(0x170)) + [0x170, 0x1ff]
  out, err = _mc("\n".join(_dpp_word(arch, c) for c in codes) + "\n", arch, "--disassemble")
  assert len(out) == len(codes), err
  for code, line in zip(codes, out):
    ctl = hwdata.dpp_control(fam, code)
    if ctl is None:
      assert re.search(r"/\* (Invalid dpp_ctrl value|\w+ is not supported)", line), (hex(code), line)
      continue
    name, arg = ctl
    if name == "quad_perm":
      assert f"quad_perm:[{','.join(str(arg >> 2 * i & 3) for i in range(4))}]" in line, (hex(code), line)
    else:
      m = re.search(rf"\b{name}(:(\d+))?(\s|$)", line)
      assert m and (m.group(2) is None or int(m.group(2)) == arg), (hex(code), ctl, line)


# ---- matrix instructions
def _matrix_text(fam: str, r: hwdata.Matrix) -> str:
  rng = lambda f, a, n: f"{f}{a}" if n == 1 else f"{f}[{a}:{a + n - 1}]"
  d = rng("a" if fam == "cdna" else "v", 0, r.regs[2])
  s0, s1 = rng("v", 100, r.regs[0]), rng("v", 120, r.regs[1])
  if r.sparse:  # D is also C, src2 holds the sparsity indices (llvm-mc-22 rejects a C tuple there)
    return f"{r.op.lower()} {rng('v', 0, r.regs[2])}, {s0}, {s1}, v140"
  return f"{r.op.lower()} {d}, {s0}, {s1}, {d}" + (", v141, v142" if r.scale else "")  # (scaled: the scale VGPRs)


def _rows(fam: str) -> list[hwdata.Matrix]:
  names = json.loads((hwdata._DATA / "matrix.json").read_text())[fam]
  return [hwdata.matrix(fam, n) for n in names]


@need_mc
@pytest.mark.parametrize("arch", TARGETS)
def test_matrix_register_counts(arch):
  """llvm-mc-22 takes every matrix instruction of the target with the register tuples its row gives (it rejects a
  tuple of the wrong size); on CDNA a row lists passes exactly for the targets that have the opcode."""
  fam = target(arch).family
  rows = _rows(fam)
  text = [_matrix_text(fam, r) for r in rows]
  out, err = _mc("\n".join(text) + "\n", arch, "-show-encoding")
  bad = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):\d+: error", err)}
  unsupported = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):\d+: error: instruction not supported", err)}
  assert bad == unsupported, err
  for i, r in enumerate(rows, 1):
    if fam == "cdna":
      assert (i in unsupported) == (r.passes_on(arch) is None), (arch, r.op)
    else:
      assert i not in unsupported, (arch, r.op)
    o = tables(fam).operands[("VOP3PX2Op" if r.scale else "VOP3POp", r.op)]
    assert r.regs == (o["src0"].bits // 32, o["src1"].bits // 32, o["vdst"].bits // 32), r.op


@pytest.mark.skipif(MCA is None or MC is None, reason="llvm-mca-22 not installed")
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_mfma_passes(arch):
  """Each MFMA's passes are the reciprocal throughput llvm-mca-22 reports for it (LLVM's WriteNPassMAI classes)."""
  rows = [r for r in _rows("cdna") if r.passes_on(arch) is not None]
  text = "\n".join(_matrix_text("cdna", r) for r in rows) + "\n"
  p = subprocess.run([MCA, "-mtriple=amdgcn", f"-mcpu={arch}", "-instruction-info"], input=text, capture_output=True,
                     text=True)
  info = re.findall(r"^\s*\d+\s+\d+\s+([\d.]+)\s.*?\b(v_\w+)", p.stdout, re.M)
  assert [op for _, op in info] == [r.op.lower() for r in rows], p.stderr
  assert [float(t) for t, _ in info] == [r.passes_on(arch) for r in rows]


@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
def test_modelled_layouts_fill_their_registers(fam):
  """A modelled layout places exactly the elements the operand registers hold (regs from the vendor records)."""
  from gputwin.emu.amd.matrix import tables
  for r in _rows(fam):
    if r.layout is None:
      continue
    ins = ("FP8", "FP8") if r.a == "F8F6F4" else None  # (their records count fp8 operands)
    assert tables(fam, r.op, 64 if fam == "cdna" else 32, ins=ins).regs == tuple(r.regs), r.op
