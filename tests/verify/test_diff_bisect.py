"""gputwin trace/diff/bisect on seeded bugs: a one-instruction change in clang-22's assembly of a kernel that runs
7,000+ wave-instructions, a pass that miscompiles on one application, and a git history with one bad commit."""
import json
import subprocess
import sys

import numpy as np
import pytest

from gputwin.cli import main
from gputwin.verify import bisect, diverge, runner

MIX = """
__kernel void mix(__global uint *out, __global const uint *in, int n) {
  uint i = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workgroup_id_x() * 64;
  uint h = in[i];
  for (int k = 0; k < n; k++) { h = h * 2654435761u + (uint)k; h ^= h >> 13; }
  out[i] = h;
}
"""
ARGS = ["--grid", "2", "--block", "64", "--arg", "out:u32:128"]
N = ["--arg", "n:i32=200"]


@pytest.fixture(scope="module")
def builds(clang, tmp_path_factory):
  """clang-22's assembly of MIX, and the same with the loop's shift amount changed 13 -> 12 (the seeded bug)."""
  from gputwin.isa.codeobj import assemble_code_object
  d = tmp_path_factory.mktemp("mix")
  s = runner.clang_cl(MIX, "gfx1100", asm=True).decode()
  bad = s.replace("v_lshrrev_b32_e32 v2, 13, v3", "v_lshrrev_b32_e32 v2, 12, v3")
  assert bad.count("v_lshrrev_b32_e32 v2, 12") == 1
  for name, text in (("good", s), ("bad", bad)):
    (d / f"{name}.co").write_bytes(assemble_code_object(text, "gfx1100"))
  np.save(d / "in.npy", np.arange(128, dtype=np.uint32) * 7 + 1)
  return d


def test_diff_names_the_seeded_instruction(builds, capsys):
  rc = main(["diff", str(builds / "good.co"), str(builds / "bad.co"), *ARGS, "--arg", f"in:u32:{builds / 'in.npy'}",
             *N])
  out = capsys.readouterr().out
  assert rc == 1
  assert "out[0]" in out and "128 differing elements" in out
  assert "workgroup 0 wave 0 (global wave 0) step 19: instruction differs, A `v_lshrrev_b32_e32 v2, 13, v3` vs B " \
         "`v_lshrrev_b32_e32 v2, 12, v3`: v2 lane 0" in out.replace("\n", "")


def test_diff_api_values_and_lengths(builds):
  kw = dict(grid=2, block=64, args=[("out", np.zeros(128, np.uint32)), ("in", np.arange(128, dtype=np.uint32) + 1),
                                    ("n", 200)])
  a, b = runner.run(builds / "good.co", **kw), runner.run(builds / "bad.co", **kw)
  assert a.instructions > 7000 and not a.error
  t = diverge.first_trace_diff(a, b)
  h = 0x9e3779b1 * 1 & 0xffffffff   # lane 0: in = 1, k = 0
  assert (t.kind, t.reg, t.lane, t.va, t.vb) == ("instruction", "v2", 0, h >> 13, h >> 12)
  # same stream, B's trace cut short: a length divergence, not a crash
  w3 = [r for r in a.trace if r[0] == 3]
  b.trace = [r for r in a.trace if r[0] != 3] + w3[:100]
  t = diverge.first_trace_diff(a, b)
  assert (t.kind, t.wave, t.workgroup, t.wave_in_group, t.step, t.a) == ("length", 3, 1, 1, 100, w3[100])
  assert "trace of B ends" in t.summary()
  assert diverge.first_trace_diff(a, a) is None and diverge.first_output_diff(a, a) is None


def test_diff_reports_a_fault(builds, capsys):
  """A watchdog stop on one side is shown as a result, with the first divergence (B's trace ends early)."""
  rc = main(["diff", str(builds / "good.co"), str(builds / "good.co"), *ARGS, "--arg", "in:u32:128", *N,
             "--max-instructions", "3000"])
  out = capsys.readouterr().out
  assert rc == 0 or "stopped" in out  # same watchdog on both sides: same outputs, same traces
  a = runner.run(builds / "good.co", grid=2, block=64, args=[("o", np.zeros(128, np.uint32)),
                                                               ("i", np.zeros(128, np.uint32)), ("n", 200)])
  b = runner.run(builds / "good.co", grid=2, block=64, max_instructions=3000,
                 args=[("o", np.zeros(128, np.uint32)), ("i", np.zeros(128, np.uint32)), ("n", 200)])
  assert b.error is not None and a.error is None
  assert diverge.first_trace_diff(a, b).kind == "length"


def test_trace_formats(builds, tmp_path):
  for name in ("t.txt", "t.jsonl", "t.json"):
    assert main(["trace", str(builds / "good.co"), "-o", str(tmp_path / name), "--grid", "1", "--block", "64",
                 "--arg", "out:u32:64", "--arg", "in:u32:64", "--arg", "n:i32=3"]) == 0
  lines = (tmp_path / "t.txt").read_text().splitlines()
  recs = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
  ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
  names = [e["args"]["name"] for e in ev if e["ph"] == "M"]
  ev = [e for e in ev if e["ph"] == "X"]
  assert len(lines) == len(recs) == len(ev) > 40
  assert names == ["wg 0 wave 0", "wg 0 wave 1"]   # 64 work-items = two wave32s
  assert recs[0]["inst"] in lines[0] and ev[0]["args"]["inst"] == recs[0]["inst"]


def test_bisect_builds_finds_the_seeded_instruction(builds, capsys):
  rc = main(["bisect", "builds", str(builds / "good.co"), str(builds / "bad.co"), *ARGS,
             "--arg", f"in:u32:{builds / 'in.npy'}", *N])
  out = capsys.readouterr().out.replace("\n", "")
  assert rc == 1 and "B `v_lshrrev_b32_e32 v2, 12, v3` at 0x1570 computed a value the other build never did" in out
  assert "reproduce: gputwin bisect builds" in out


def test_bisect_builds_two_flag_sets_agree(clang, tmp_path, capsys):
  (tmp_path / "mix.cl").write_text(MIX)
  rc = main(["bisect", "builds", str(tmp_path / "mix.cl"), "--arch", "gfx1100", "--cflags-b=-O1", *ARGS,
             "--arg", "in:u32:128", *N])
  assert rc == 0 and "identical" in capsys.readouterr().out


def test_bisect_passes_finds_an_injected_miscompile():
  """'peephole' turns the first i32 add into a sub on its third application (application 7 of the pipeline)."""
  from gputwin.compiler import ir
  from gputwin.compiler.examples import EXAMPLES
  def peephole(k):
    k.peepholes = getattr(k, "peepholes", 0) + 1   # applications so far on this optimize() run's copy
    if k.peepholes == 3:
      for o in k.walk():
        if o.opcode == "add" and o.result.type == ir.i32:
          o.opcode = "sub"
          return True
    return False
  pipeline = ("simplify", "peephole", "constfold", "peephole", "strength", "cse", "peephole", "dce", "peephole")
  ex = EXAMPLES["int_ops"]
  args, grid, block = ex.inputs(np.random.default_rng(0))

  v = bisect.bisect_passes(ex.kernel, "gfx1100", args=args, grid=grid, block=block, outputs=list(ex.outputs),
                           pipeline=pipeline, passes={"peephole": peephole})
  assert (v.limit, v.name) == (7, "peephole")
  assert "sub" in v.after and "+" in v.report("int_ops") and "first bad pass application: (7) peephole" in v.report("k")
  assert [g for n, g in v.probes if n >= 7] == [False] * len([n for n, _ in v.probes if n >= 7])


def test_bisect_passes_clean_example(capsys):
  assert main(["bisect", "passes", "--example", "saxpy", "--arch", "gfx1100"]) == 0
  assert "no miscompile" in capsys.readouterr().out


def _git(repo, *a):
  subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
  """Six commits of value.txt; commit 4 ('break it') makes the check fail."""
  r = tmp_path / "repo"
  r.mkdir()
  _git(r, "init", "-q", "-b", "main")
  _git(r, "config", "user.email", "t@example.com")
  _git(r, "config", "user.name", "t")
  for i in range(6):
    (r / "value.txt").write_text(f"bad {i}\n" if i >= 3 else f"good {i}\n")
    _git(r, "add", "value.txt")
    _git(r, "commit", "-q", "-m", "break it" if i == 3 else f"change {i}")
  return r


CHECK = [sys.executable, "-c", "import sys; sys.exit(open('value.txt').read().startswith('bad'))"]


def test_bisect_git_finds_the_bad_commit(repo, capsys):
  rc = main(["bisect", "git", "--repo", str(repo), "--good", "HEAD~5", "--bad", "HEAD", "--", *CHECK])
  out = capsys.readouterr().out
  assert rc == 1 and "first bad commit:" in out and "break it" in out
  assert subprocess.run(["git", "-C", str(repo), "symbolic-ref", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip() == "main"   # work tree restored


def test_bisect_git_without_culprit(repo, capsys):
  assert main(["bisect", "git", "--repo", str(repo), "--good", "HEAD~5", "--bad", "HEAD~3", "--", *CHECK]) == 0
  assert "no culprit: the check passes at --bad" in capsys.readouterr().out
  assert main(["bisect", "git", "--repo", str(repo), "--good", "HEAD~1", "--bad", "HEAD", "--", *CHECK]) == 0
  assert "already fails at --good" in capsys.readouterr().out
  assert main(["bisect", "git", "--repo", str(repo), "--good", "nope", "--bad", "HEAD", "--", *CHECK]) == 2
  assert "not a commit" in capsys.readouterr().err


def test_diff_across_targets_and_against_a_device(clang, tmp_path, capsys):
  """One .cl on two targets (different ISAs: values mode), and the emulator against the mock KFD device path."""
  (tmp_path / "mix.cl").write_text(MIX)
  args = [*ARGS, "--arg", "in:u32:128", *N]
  assert main(["diff", str(tmp_path / "mix.cl"), "--arch", "gfx1100", "--arch-b", "gfx942", *args]) == 0
  assert "identical" in capsys.readouterr().out
  assert main(["diff", str(tmp_path / "mix.cl"), "--arch", "gfx1100", "--device-b", "mock:gfx1100", *args]) == 0
  assert "mock:gfx1100" in capsys.readouterr().out
  assert main(["diff", str(tmp_path / "mix.cl"), "--arch", "gfx1100", "--device-b", "amd:0", *args]) == 2
  assert "no real AMD GPU" in capsys.readouterr().err


def test_diff_bad_input(builds, tmp_path, capsys):
  assert main(["diff", str(builds / "good.co"), str(tmp_path / "nope.co"), *ARGS, "--arg", "in:u32:128", *N]) == 2
  assert "nope.co" in capsys.readouterr().err
  assert main(["diff", str(builds / "good.co"), str(builds / "bad.co"), *ARGS, *N]) == 2   # 2 of 3 arguments
  assert "takes 3 arguments" in capsys.readouterr().err
  assert main(["trace", str(builds / "good.co"), "-o", str(tmp_path / "t"), "--kernel", "nope"]) == 2
  assert "no kernel 'nope'" in capsys.readouterr().err
  assert main(["diff", str(tmp_path / "k.cl"), "--arch", "gfx1100", "--arch-b", "gfx942"]) == 2   # no such file
  assert main(["diff", str(builds / "good.co")]) == 2
  assert "give B, or --arch-b / --device-b" in capsys.readouterr().err


def test_diff_of_saved_traces(builds, tmp_path, capsys):
  """gputwin trace -o X.jsonl twice, then diff the files: same answer as the live diff; a cut file is a length
  divergence; a file that is not a trace is a located error."""
  run = ["--grid", "2", "--block", "64", "--arg", "out:u32:128", "--arg", f"in:u32:{builds / 'in.npy'}", *N]
  for name in ("good", "bad"):
    assert main(["trace", str(builds / f"{name}.co"), "-o", str(tmp_path / f"{name}.jsonl"), *run]) == 0
  assert main(["diff", str(tmp_path / "good.jsonl"), str(tmp_path / "bad.jsonl"), "--block", "64"]) == 1
  assert "step 19: instruction differs" in capsys.readouterr().out.replace("\n", "")
  lines = (tmp_path / "good.jsonl").read_text().splitlines()
  w0 = [i for i, x in enumerate(lines) if '"wave": 0,' in x]
  (tmp_path / "cut.jsonl").write_text("\n".join(x for i, x in enumerate(lines) if i not in set(w0[100:])) + "\n")
  assert main(["diff", str(tmp_path / "good.jsonl"), str(tmp_path / "cut.jsonl"), "--block", "64"]) == 1
  assert "wave 0 (global wave 0) step 100: trace of B ends" in capsys.readouterr().out.replace("\n", "")
  (tmp_path / "junk.jsonl").write_text("{}\n")
  assert main(["diff", str(tmp_path / "good.jsonl"), str(tmp_path / "junk.jsonl")]) == 2
  assert "junk.jsonl:1: not a gputwin trace record" in capsys.readouterr().err


FAULT = """
__kernel void f(__global uint *out, uint bad) {
  uint i = __builtin_amdgcn_workitem_id_x();
  out[i] = i;
  if (bad) out[i] = *(__global uint *)((ulong)bad << 12);   // an unmapped page
}
"""


def test_faulting_kernel(clang, tmp_path, capsys):
  """A page fault is a result: trace writes what ran and says why it stopped; diff shows the stop side by side."""
  co = tmp_path / "f.co"
  co.write_bytes(runner.clang_cl(FAULT, "gfx1100"))
  args = ["--grid", "1", "--block", "32", "--arg", "out:u32:32"]
  assert main(["trace", str(co), "-o", str(tmp_path / "t.txt"), *args, "--arg", "bad:u32=7"]) == 1
  err = capsys.readouterr().err
  assert "the launch stopped: EmuFault" in err and "page fault" in err
  assert (tmp_path / "t.txt").read_text().count("\n") > 3
  a = runner.run(co, grid=1, block=32, args=[("out", np.zeros(32, np.uint32)), ("bad", 0)])
  b = runner.run(co, grid=1, block=32, args=[("out", np.zeros(32, np.uint32)), ("bad", 7)])
  assert a.error is None and type(b.error).__name__ == "EmuFault"
  t = diverge.first_trace_diff(a, b)
  assert t is not None and t.kind in ("instruction", "value", "length")
  diverge.render(a, b, diverge.first_output_diff(a, b), t)
  assert "stopped" in capsys.readouterr().out
