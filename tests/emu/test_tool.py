"""`gputwin run` (gputwin.emu.tool.run_main): a .s kernel, buffers in and out, trace files, errors as exit codes."""
import json

import numpy as np

from gputwin.emu.tool import run_main

ASM = """.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl scale
.p2align 8
.type scale,@function
scale:
  s_load_b128 s[4:7], s[0:1], 0x0
  s_load_b32 s8, s[0:1], 0x10
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_b32 v2, v1, s[6:7]
  s_waitcnt vmcnt(0)
  v_mul_f32 v2, s8, v2
  global_store_b32 v1, v2, s[4:5]
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel scale
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 16
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
"""


def test_run_asm_with_buffers_and_traces(tmp_path, capsys):
  src, x = tmp_path / "k.s", np.arange(32, dtype=np.float32)
  src.write_text(ASM)
  np.save(tmp_path / "x.npy", x)
  rc = run_main([str(src), "--grid", "1", "--block", "32", "--arg", "out:f32:32",
                 "--arg", f"x:f32:{tmp_path / 'x.npy'}",
                 "--arg", "a:f32=2.5", "--out", str(tmp_path / "o"), "--trace", str(tmp_path / "t.txt"),
                 "--perfetto", str(tmp_path / "p.json")])
  assert rc == 0
  np.testing.assert_array_equal(np.load(tmp_path / "o" / "out.npy"), x * np.float32(2.5))
  assert "wave-instructions" in capsys.readouterr().out
  lines = (tmp_path / "t.txt").read_text().splitlines()
  assert len(lines) == 9 and "v_mul_f32" in lines[6] and lines[6].split()[-1].startswith("v2=")
  assert len(json.loads((tmp_path / "p.json").read_text())["traceEvents"]) == 9


def test_errors_are_exit_codes(tmp_path, capsys):
  src = tmp_path / "k.s"
  src.write_text(ASM)
  assert run_main([str(src), "--kernel", "nope"]) == 1
  assert "no kernel 'nope'" in capsys.readouterr().err
  assert run_main([str(src), "--arg", "bad"]) == 2
  loop = ASM.replace("  s_endpgm\n.rodata", "L:\n  s_branch L\n  s_endpgm\n.rodata")
  src.write_text(loop)
  assert run_main([str(src), "--block", "32", "--arg", "o:f32:32", "--arg", "x:f32:32", "--arg", "a:f32=1",
                   "--max-instructions", "50"]) == 1
  assert "more than 50 wave-instructions" in capsys.readouterr().err
