"""The native tier's code is readable: `gputwin run --show-native` and gputwin.emu.host.native print a block's
host machine code through capstone with the guest instruction each range implements, and the bytes shown are the
ones the tier runs (the block compiled without line info gives the same machine code)."""
import platform

import numpy as np
import pytest

from gputwin.compiler import compile, examples

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"),
                                reason="capstone listings cover x86_64 and aarch64 hosts")


@pytest.fixture(params=["force", "lean"])
def saxpy_blocks(request, monkeypatch, tmp_path):
  """The blocks of one saxpy launch: compiled in full at first sight, or lean (the tier's cold variant)."""
  from gputwin.emu import launch
  from gputwin.emu.host import native
  from gputwin.emu.native.tier import compile_block
  monkeypatch.setenv("GPUTWIN_JIT", "force")
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  c = compile(examples.saxpy, "gfx1100")
  x = np.arange(128, dtype=np.float32)
  y = np.ones(128, np.float32)
  st = launch(c.code_object, "saxpy", grid=2, block=64, args=[np.float32(2), x, y, 128], checks=False)
  assert st.native_instructions > 0 and (y == 2 * x + 1).all()
  blocks = [b for b in native.compiled() if b[0].arch == "gfx1100" and bytes(b[0].text) in c.code_object
            and b[2].ops[0].text.startswith("s_load")]   # this kernel's blocks, not another test's
  if request.param == "lean":
    blocks = [(p, lanes, compile_block(p, b.pc, lanes, lean=True)) for p, lanes, b in blocks]
  assert blocks and all(b[2].lean == (request.param == "lean") for b in blocks)
  return c, blocks


def test_block_listing_names_guest_instructions_and_is_the_tiers_code(saxpy_blocks):
  from gputwin.emu.host import native
  c, blocks = saxpy_blocks
  prog, lanes, blk = blocks[0]
  text = native.show(prog, lanes, blk)
  notes = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("; guest")]
  assert text.startswith(f"native block at PC {blk.pc:#x} (gfx1100, wave{lanes})")
  assert {n.split(None, 4)[4] for n in notes} >= {blk.ops[0].text}     # "; guest i: PC  text"
  assert all(int(n.split()[3], 16) in {op.pc for op in blk.ops} for n in notes)
  assert native.code(native.machine_code(prog, lanes, blk)) == native.code(blk.obj)   # the code the tier runs


def test_run_show_native_prints_blocks(saxpy_blocks, tmp_path, capsys):
  from gputwin.emu.tool import run_main
  c, _ = saxpy_blocks
  (tmp_path / "k.co").write_bytes(c.code_object)
  assert run_main([str(tmp_path / "k.co"), "--arch", "gfx1100", "--kernel", "saxpy", "--grid", "2", "--block", "64",
                   "--arg", "a:f32=2", "--arg", "x:f32:128", "--arg", "y:f32:128", "--arg", "n:i32=128",
                   "--no-checks", "--show-native"]) == 0
  out = capsys.readouterr().out
  assert "native block at PC" in out and "; guest" in out


def test_run_host_object(tmp_path, capsys):
  from gputwin.emu.tool import run_main
  c = compile(examples.saxpy, "aarch64")
  (tmp_path / "k.o").write_bytes(c.code_object)
  np.save(tmp_path / "x.npy", np.arange(100, dtype=np.float32))
  assert run_main([str(tmp_path / "k.o"), "--arch", "aarch64", "--grid", "2", "--block", "64", "--arg", "a:f32=3",
                   "--arg", f"x:f32:{tmp_path / 'x.npy'}", "--arg", "y:f32:100", "--arg", "n:i32=100",
                   "--out", str(tmp_path)]) == 0
  assert (np.load(tmp_path / "y.npy") == 3 * np.arange(100)).all()
