"""gfx12 SCRATCH_STORE_BLOCK / SCRATCH_LOAD_BLOCK (pcode erratum: the vendor text reads its operands as register
numbers): M0 picks which of the 32 registers move, dword i of the lane's scratch block at address + 4i. Expected
values from the ISA guide's description, computed in numpy; llvm-mc-22's encodings for the assembly."""
import shutil
import subprocess

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.isa import assemble, decode
from gputwin.verify.reliability import kernel

SCRATCH = "  .amdhsa_enable_private_segment 1\n  .amdhsa_private_segment_fixed_size 256\n"


def _body(store_masks: tuple[int, int], load_mask: int) -> str:
  lines = ["  s_load_b64 s[2:3], s[0:1], 0x0", "  v_lshlrev_b32 v1, 2, v0", "  v_lshlrev_b32 v2, 6, v0"]
  for j, mask in enumerate(store_masks):  # round j stores lane * 64 + 0x1000 * j + k from v[8 + k]
    lines += [f"  v_add_nc_u32 v{8 + k}, {0x1000 * j + k:#x}, v2" for k in range(32)]
    lines += [f"  s_mov_b32 m0, {mask:#x}", "  scratch_store_block off, v[8:39], off"]
  lines += [f"  v_mov_b32 v{40 + k}, 0xdead" for k in range(32)]
  lines += [f"  s_mov_b32 m0, {load_mask:#x}", "  scratch_load_block v[40:71], off, off",
            "  scratch_load_b32 v72, off, off offset:68", "  s_wait_loadcnt 0", "  s_wait_kmcnt 0"]
  lines += [f"  global_store_b32 v1, v{40 + k}, s[2:3] offset:{128 * k}" for k in range(33)]
  return "\n".join(lines)


@pytest.mark.parametrize("store_masks, load_mask", [((0xffffffff, 0x0000ffff), 0x00ff00ff),
                                                     ((0xffffffff, 0x80000001), 0xffffffff),
                                                     ((0xffffffff, 0), 0x12345678)])
@pytest.mark.parametrize("jit", ["0", "force"])
def test_block_transfers_follow_m0(monkeypatch, store_masks, load_mask, jit):
  monkeypatch.setenv("GPUTWIN_JIT", jit)
  out = np.zeros(33 * 32, np.uint32)
  launch(kernel("gfx1200", _body(store_masks, load_mask), vgprs=80, extra=SCRATCH), "k", grid=1, block=32, args=[out])
  lane, k = np.arange(32)[None, :], np.arange(32)[:, None]
  mem = np.zeros((32, 32), np.int64)
  for j, mask in enumerate(store_masks):
    on = (mask >> k) & 1 == 1
    mem = np.where(on, lane * 64 + 0x1000 * j + k, mem)
  want = np.where((load_mask >> k) & 1 == 1, mem, 0xdead)
  got = out.reshape(33, 32)
  assert (got[:32] == want).all()
  assert (got[32] == mem[17]).all()  # scratch_load_b32 at offset 68: dword 17 of the same block


@pytest.mark.skipif(not shutil.which("llvm-mc-22"), reason="llvm-mc-22 not installed")
def test_block_encodings_match_llvm_mc(tmp_path):
  text = "scratch_store_block off, v[8:39], s4 offset:64\nscratch_load_block v[40:71], off, off offset:128\n"
  src = tmp_path / "b.s"
  src.write_text(text)
  got = subprocess.run(["llvm-mc-22", "-arch=amdgcn", "-mcpu=gfx1200", "-show-encoding", str(src)],
                       capture_output=True, text=True, check=True).stdout
  for line, ref in zip(text.splitlines(), [ln for ln in got.splitlines() if "encoding" in ln]):
    want = bytes(int(b, 16) for b in ref.split("encoding: [")[1].rstrip("]").split(","))
    assert assemble(line, "gfx1200") == want
    assert decode(want, "gfx1200") is not None


def test_campaign_case_runs_on_both_tiers():
  """exec-gfx1200, seed 2026, case 4236 (a random stream with scratch_store_block v[152:183]): an OverflowError
  escaped the interpreter; now both tiers run it to the same outcome."""
  from gputwin.errors import GputwinError
  from gputwin.verify.reliability import CATEGORIES
  stream = [bytes.fromhex(h) for h in ("ff4a4a7f003c0000", "6aab87bf", "380015ed0000004caf8c6552",
                                       "310089d4fa9002406cc10470", "08706ad6fa6a9a17a49600ff")]
  try:
    CATEGORIES["exec-gfx1200"].run(stream)
  except GputwinError:
    pass  # (a located error is a fine outcome; only a disagreement or a foreign exception is not)
