"""gputwin fuzz: programs are UB-free (UBSan on the host build), a CI-sized run over all targets has no unexplained
mismatch, the reducer shrinks a real mismatch, saved regression cases replay, bad input gives clear messages."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gputwin.cli import main
from gputwin.verify import fuzz

CASES = sorted(p.with_suffix("") for p in (Path(__file__).parent / "regressions").glob("*.json"))


def test_programs_are_ub_free(clang, tmp_path):
  progs = [fuzz.generate(11, i) for i in range(10)]
  (tmp_path / "u.c").write_text(fuzz.host_source(progs))
  subprocess.run(["clang-22", "-x", "c", "-O1", "-w", "-fsanitize=undefined", "-fno-sanitize-recover=all",
                  str(tmp_path / "u.c"), "-o", str(tmp_path / "u")], check=True, capture_output=True)
  r = subprocess.run([str(tmp_path / "u")], input=b"".join(fuzz.inputs(11, i).tobytes() for i in range(10)),
                     capture_output=True)
  assert r.returncode == 0 and not r.stderr, r.stderr[-500:]
  kinds = {s.kind for p in progs for s in p.walk()}
  assert kinds == {"set", "if", "for", "atomic", "xchg"}


def test_ci_sized_run_has_no_unexplained_mismatch(clang, tmp_path):
  res = fuzz.fuzz(2026, 10, fuzz.TARGETS, batch=10, jobs=2, save_to=tmp_path)
  assert len(res) == 10 * len(fuzz.TARGETS)
  bad = [o for o in res if o.status not in ("ok", "known-bug")]
  assert not bad, "\n".join(f"{o.status} {o.target} {o.index}: {o.detail}" for o in bad)
  assert sum(o.status == "ok" for o in res) > len(res) // 2


def test_reducer_shrinks_a_real_mismatch(clang, tmp_path):
  """Seed 7 program 458 meets FINDINGS.md #5 on gfx942; ddmin keeps the two statements that show it."""
  p, x = fuzz.generate(7, 458), fuzz.inputs(7, 458)
  keep = fuzz.reduce(p, "gfx942", x)
  assert len(keep) <= 3 and sum(1 for _ in p.walk()) > 8
  stem = fuzz.save_regression(p, keep, "gfx942", x, "test", tmp_path)
  h, g, _ = fuzz.replay(stem)
  assert not np.array_equal(h, g)
  assert fuzz.render_device(p, keep).count(";") < fuzz.render_device(p).count(";")


@pytest.mark.parametrize("stem", CASES, ids=[c.name for c in CASES])
def test_regression_cases_are_explained(clang, stem):
  """Every saved case still matches the host, or differs only by a known emulator bug (known.py shims)."""
  import json
  h, g, emu = fuzz.replay(stem)
  if isinstance(g, np.ndarray) and np.array_equal(h, g):
    return
  meta = json.loads(stem.with_suffix(".json").read_text())
  why = fuzz._explain(emu, fuzz.Program(meta["seed"], meta["index"], [], []), np.array(meta["input"], np.uint32), h)
  assert why, f"{stem.name}: unexplained mismatch"


def test_cli_summary_show_and_missing_clang(clang, capsys, monkeypatch):
  assert main(["fuzz", "--count", "2", "--arch", "gfx942", "--save", "", "-j", "1", "--seed", "5"]) == 0
  assert "gfx942" in capsys.readouterr().out
  assert main(["fuzz", "--show", "3"]) == 0
  out = capsys.readouterr().out
  assert "__kernel void fz3" in out and "static void fz3" in out
  monkeypatch.setenv("PATH", "/nonexistent")
  assert main(["fuzz", "--count", "1"]) == 2
  assert "clang-22 not found" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("arch", fuzz.TARGETS)
def test_thousand_programs_per_target(clang, arch, tmp_path):
  """The issue's full run (also: gputwin fuzz --count 1000)."""
  res = fuzz.fuzz(7, 1000, (arch,), batch=50, save_to=tmp_path)
  bad = [o for o in res if o.status not in ("ok", "known-bug")]
  assert not bad, "\n".join(f"{o.status} {o.target} {o.index}: {o.detail}" for o in bad[:20])


def test_ir_programs_through_both_backends(capsys):
  """The compiler tests' IR generator, driven from a fixed seed: reference = direct = LLVM on the emulator."""
  assert main(["fuzz", "--ir", "--count", "3", "--arch", "gfx1100", "--arch", "gfx950", "--seed", "4", "-j", "2"]) == 0
  out = capsys.readouterr().out
  assert "gfx1100/direct" in out and "gfx950/llvm" in out
  assert fuzz.ir_programs(4, 2) == fuzz.ir_programs(4, 2)   # deterministic


def test_clang_failure_is_pinned_to_its_program(clang, monkeypatch):
  """One program of a batch that clang-22 rejects is reported alone; the rest of the batch still runs."""
  real = fuzz.render_device
  monkeypatch.setattr(fuzz, "render_device",
                      lambda p, keep=None, d=fuzz.OPENCL: real(p, keep, d) + ("\n#error seeded" * (p.index == 1)))
  res = fuzz.run_batch((3, 0, 3, ("gfx1100",)))
  assert [(o.index, o.status) for o in res] == [(0, "ok"), (1, "clang-error"), (2, "ok")]
  assert "seeded" in res[1].detail
