"""The native tier's disk cache (emu/native/cache.py): another process loads compiled blocks instead of compiling them,
with the same results; broken files are ignored and rewritten; concurrent processes share one folder; the key follows
the code and the target."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite")

ROOT = Path(__file__).resolve().parents[2]
BODY = """  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  v_mul_lo_u32 v2, v0, v0
  v_add_nc_u32 v2, {c}, v2
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v2, s[2:3]"""

# one process: launch the kernel on 256 work-items, report the tier's counters and the output
CHILD = """
import json, sys
import numpy as np
from gputwin.emu import launch, native
from tests.emu.test_asm import kernel
from tests.emu.test_native_cache import BODY
out = np.zeros(256, np.int32)
st = launch(kernel(sys.argv[1], BODY.format(c=int(sys.argv[2]))), "k", grid=1, block=256, args=[out], checks=False)
print(json.dumps(dict(native.STATS, native_instructions=st.native_instructions, out=out.tolist(),
                      llvm="llvmlite.binding" in sys.modules)))
"""


def _child(cache: Path, jit: str = "force", arch: str = "gfx1100", c: int = 7, wait: bool = True):
  env = dict(os.environ, GPUTWIN_NATIVE_CACHE=str(cache), GPUTWIN_JIT=jit, PYTHONPATH=str(ROOT))
  p = subprocess.Popen([sys.executable, "-c", CHILD, arch, str(c)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
  return _result(p) if wait else p


def _result(p) -> dict:
  out, err = p.communicate(timeout=300)
  assert p.returncode == 0, err[-2000:]
  return json.loads(out.strip().splitlines()[-1])


def _want(c: int = 7) -> list:
  t = np.arange(256)
  return (t * t + c).tolist()


def test_a_new_process_with_a_warm_cache_compiles_nothing(tmp_path):
  first = _child(tmp_path)
  assert first["compiles"] > 0 and first["cache_loads"] == 0 and first["native_instructions"] > 0
  assert first["out"] == _want()
  files = sorted(tmp_path.iterdir())
  assert len(files) == first["compiles"]
  again = _child(tmp_path)
  assert again["compiles"] == 0 and again["cache_loads"] == first["compiles"]
  assert again["out"] == first["out"] and again["native_instructions"] == first["native_instructions"]
  # the default mode: cached blocks run from their first sight, no lanes of interpreting first, nothing compiled
  auto = _child(tmp_path, jit="auto")
  assert auto["compiles"] == 0 and auto["native_instructions"] == first["native_instructions"]
  assert auto["out"] == first["out"]
  # an interpreted run agrees
  assert _child(tmp_path, jit="0")["out"] == first["out"]


# two launches with the checkers on (the default): how many instructions of each ran natively
TWICE = """
import json
import numpy as np
from gputwin.emu import launch, native
from tests.emu.test_asm import kernel
from tests.emu.test_native_cache import BODY
co, runs = kernel("gfx1100", BODY.format(c=7)), []
for i in range(2):
  out = np.zeros(256, np.int32)
  runs.append(launch(co, "k", grid=1, block=256, args=[out]).native_instructions)
print(json.dumps(dict(native.STATS, native=runs, out=out.tolist())))
"""


def test_a_block_compiled_once_hot_is_found_at_first_sight(tmp_path):
  """A block compiled after the interpreter ran it (its ops then carry the tiers' memos: input plans, the checkers')
  is found by the next process at its first sight: the key leaves Op.info's memos out (it missed, and the next process
  interpreted until hot and compiled the block again)."""
  env = dict(os.environ, GPUTWIN_NATIVE_CACHE=str(tmp_path), GPUTWIN_JIT="1", GPUTWIN_JIT_AFTER="300",
             PYTHONPATH=str(ROOT))
  run = lambda: _result(subprocess.Popen([sys.executable, "-c", TWICE], cwd=ROOT, env=env,  # noqa: E731
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  first = run()
  assert first["compiles"] > 0 and first["native"][0] == 0 < first["native"][1], first  # (256 lanes: not hot yet)
  again = run()
  assert again["compiles"] == 0 and again["cache_loads"] == first["compiles"], again
  assert again["native"] == [first["native"][1]] * 2 and again["out"] == first["out"] == _want()


def test_an_empty_cache_costs_a_cold_launch_no_llvm(tmp_path):
  """A fresh process whose cache holds nothing: a launch too small to make a block hot looks up no key (the first
  one asks LLVM for the host) and never loads LLVM; with the cache filled it loads the blocks from their first sight."""
  cold = _child(tmp_path / "none", jit="auto")
  assert not cold["llvm"] and cold["compiles"] == 0 and cold["native_instructions"] == 0
  assert cold["out"] == _want()
  _child(tmp_path / "filled")
  warm = _child(tmp_path / "filled", jit="auto")
  assert warm["llvm"] and warm["compiles"] == 0 and warm["cache_loads"] > 0 and warm["native_instructions"] > 0


def test_broken_cache_files_are_ignored_and_rewritten(tmp_path):
  first = _child(tmp_path)
  files = sorted(tmp_path.iterdir())
  for i, f in enumerate(files):  # truncated, garbage, empty, another key's
    data = f.read_bytes()
    f.write_bytes([data[:len(data) // 2], os.urandom(len(data)), b"", files[i - 1].read_bytes()][i % 4]
                  if len(files) > 1 else data[:len(data) // 2])
  again = _child(tmp_path)
  assert again["compiles"] == first["compiles"] and again["out"] == first["out"]
  assert _child(tmp_path)["compiles"] == 0  # rewritten whole


def test_processes_fill_one_cache_at_once(tmp_path):
  procs = [_child(tmp_path, c=c, wait=False) for c in (7, 7, 9)]
  results = [_result(p) for p in procs]
  assert [r["out"] for r in results] == [_want(7), _want(7), _want(9)]
  assert not list(tmp_path.glob("*.tmp"))
  assert _child(tmp_path)["compiles"] == 0 and _child(tmp_path, c=9)["compiles"] == 0


def test_the_key_follows_the_code_and_the_target():
  from gputwin.emu.api import CODE
  from gputwin.emu.native import cache, collect
  from tests.emu.test_asm import kernel

  def key(arch, c, lanes=32):
    co = CODE.load(kernel(arch, BODY.format(c=c)), arch)
    prog = CODE.program(co.text, co.text_address, arch, 32)
    pc = co.kernel("k").entry
    ops = collect(prog, pc, prog.family)
    return cache.key(ops, lanes, prog.family, prog.arch, prog.frontend, "v")

  k = key("gfx1100", 7)
  assert k == key("gfx1100", 7) and k is not None
  assert len({k, key("gfx1100", 9), key("gfx1200", 7), key("gfx1100", 7, lanes=64)}) == 4


def test_the_key_follows_modifiers_no_binding_carries():
  """Two matrix encodings that differ in a modifier only the lowering reads (RDNA3 WMMA's neg_lo: A signed; CDNA's
  BLGP: B's lanes) have different keys (one key served a block of unsigned A to a signed-A encoding before)."""
  from gputwin.emu.frontend import for_arch
  from gputwin.emu.native import cache
  from gputwin.emu.program import Program
  from gputwin.isa import assemble

  def key(arch, text):
    prog = Program(assemble(text + "\ns_endpgm", arch), 0x1000, arch, "rdna3" if arch == "gfx1100" else "cdna",
                   32 if arch == "gfx1100" else 64, for_arch(arch))
    return cache.key([prog.op(0x1000)], prog.wave, prog.family, arch, prog.frontend, "v")

  wmma = "v_wmma_i32_16x16x16_iu8 v[0:7], v[8:11], v[12:15], v[0:7]"
  assert key("gfx1100", wmma) != key("gfx1100", wmma + " neg_lo:[1,0,0]")
  mfma = "v_mfma_f32_4x4x1_16b_f32 a[0:3], v0, v1, a[0:3]"
  assert key("gfx942", mfma) != key("gfx942", mfma + " blgp:3") != key("gfx942", mfma + " cbsz:1 abid:1")


def test_the_cache_folder_is_bounded(tmp_path):
  from gputwin.emu.native import cache
  for i in range(6):
    (tmp_path / f"{i}.pkl").write_bytes(b"x" * 1000)
    os.utime(tmp_path / f"{i}.pkl", (i, i))
  assert cache.trim(tmp_path, 2500) == 2000
  assert sorted(p.name for p in tmp_path.iterdir()) == ["4.pkl", "5.pkl"]


def test_hot_blocks_compile_in_the_background(monkeypatch):
  """auto: the launch that makes a block hot goes on interpreted while the worker compiles it; later ones run it."""
  from gputwin.emu import launch, native
  from tests.emu.test_asm import kernel
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", "0")
  monkeypatch.setenv("GPUTWIN_JIT", "auto")
  monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1")
  co = kernel("gfx1100", BODY.format(c=11))
  outs, ran = [], []
  for _ in range(2):
    out = np.zeros(256, np.int32)
    st = launch(co, "k", grid=1, block=256, args=[out], checks=False)
    outs.append(out.tolist())
    ran.append(st.native_instructions)
    native.WORKER.wait()
  assert outs == [_want(11)] * 2
  assert ran[1] > 0 and native.WORKER.thread.is_alive()


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_lean_then_full_blocks_equal_the_interpreter(clang_co, monkeypatch, tmp_path, arch):
  """A block's cold (lean) compile and the full one it gets when hotter give the interpreter's bits on every suite
  kernel (test_jit.py covers full blocks at first sight on every target)."""
  from gputwin.emu import launch
  from gputwin.emu.native import Tier, tier
  from tests.emu.cases import CASES
  co = clang_co(arch, "suite", "-Os")
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1")
  monkeypatch.setattr(tier, "lookup", lambda *a, **k: None)  # (full blocks of the same code another test linked)
  names = ("saxpy", "reduce", "math")
  for name in names:
    runs = []
    for jit, full_after in (("0", None), ("1", 1e18), ("1", 1)):  # interpreted, lean, upgraded in place
      monkeypatch.setenv("GPUTWIN_JIT", jit)
      if full_after:
        monkeypatch.setattr(tier, "FULL_AFTER", full_after)
      c = CASES[name]()
      st = launch(co, name, grid=c["grid"], block=c["block"], args=c["args"], checks=False)
      runs.append(([np.array(a).tobytes() for a in c["args"] if isinstance(a, np.ndarray)], st.instructions,
                   st.lane_instructions, st.native_instructions))
      if jit == "1":
        kinds = {b.lean for p, s in Tier.programs.items() if p.arch == arch for b in s.blocks.values() if b}
        assert (True if full_after > 1 else False) in kinds, (name, full_after, kinds)
    assert runs[1][:3] == runs[0][:3] == runs[2][:3], name
    assert runs[1][3] > 0 and runs[2][3] > 0
