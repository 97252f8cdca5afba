"""Issue 22: hostile inputs into every entry point never crash, hang or confuse the host. The quick pass runs every
category of gputwin.verify.reliability (a few thousand cases on 2 workers) and wants zero crashes, hangs, foreign
exceptions, nondeterministic outcomes and broken invariants; `-m slow` runs big counts. The harness itself is checked
on its `selftest` category, whose outcome per input is known independently (13 crashes the worker, 7 hangs it, 5
raises KeyError, 3 answers differently each time, 1 raises a gputwin error)."""
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputwin.verify import reliability as R

QUICK = {"decode": 2000, "decode-ptx": 40, "decode-ptx-lines": 2000, "asm": 150, "codeobj": 40, "exec": 6, "fault": 8, "ioctl": 60, "cmd": 10,
         "cmd-sdma": 40, "cmd-kgsl": 40}
BIG = {"decode": 200_000, "decode-ptx": 2000, "decode-ptx-lines": 200_000, "asm": 10_000, "codeobj": 2000, "exec": 300, "fault": 1000,
       "ioctl": 10_000, "cmd": 2000}


def _expected(xs: list) -> str:
  for v, kind in ((13, "crash"), (7, "hang"), (5, "foreign"), (3, "nondet"), (1, "error")):
    if v in xs: return kind
  return "ok"


def test_harness_classifies_attributes_and_shrinks(tmp_path):
  cat, seed, n = R.CATEGORIES["selftest"], 4, 50
  want = {k: 0 for k in R.KINDS}
  for i in range(n): want[_expected(cat.make(R.case_rng("selftest", seed, i)))] += 1
  assert all(want[k] for k in ("ok", "error", "crash", "hang", "foreign", "nondet")), want   # the seed covers all
  rows, _ = R.campaign(["selftest"], n, seed, jobs=2, out=tmp_path)
  assert rows["selftest"].counts == want and rows["selftest"].cases == n
  shrunk = {json.loads(p.read_text())["kind"]: json.loads(p.read_text())["input"] for p in tmp_path.glob("*.json")}
  assert shrunk == {"crash": [13], "hang": [7], "foreign": [5], "nondet": [3]}
  p = next(p for p in tmp_path.glob("*.json") if json.loads(p.read_text())["kind"] == "foreign")
  r = subprocess.run([sys.executable, "-m", "gputwin.verify.reliability", "--replay", str(p)], capture_output=True,
                     text=True, timeout=60, cwd=Path(R.__file__).parents[2])
  assert r.returncode == 1 and r.stdout.startswith("foreign: KeyError: 5")


def test_case_inputs_are_a_function_of_category_seed_and_index():
  for c in R.select_categories(None):
    if c.needs() is None:
      assert R.encode(c.make(R.case_rng(c.name, 9, 3))) == R.encode(c.make(R.case_rng(c.name, 9, 3))), c.name


def test_counts_and_prefixes():
  assert R.count_for(QUICK, "decode-gfx942") == 2000 and R.count_for(QUICK, "decode-ptx") == 40
  assert {c.name for c in R.select_categories(["ioctl"])} == {"ioctl-kfd", "ioctl-nv", "ioctl-kgsl"}
  assert not any(c.name.startswith("selftest") for c in R.select_categories(None))
  ts = R.tasks(R.select_categories(["decode-gfx1100"]), 12000, 5)
  assert [(t["start"], t["n"]) for t in ts] == [(0, 5000), (5000, 5000), (10000, 2000)]
  cases = R.parse_cases("decode=1000000,decode-ptx=10000,exec=1500,10000")
  assert [R.count_for(cases, n) for n in ("decode-a630", "decode-ptx", "exec-gfx950", "cmd-pm4")] == \
    [1000000, 10000, 1500, 10000]
  assert R.parse_cases("300") == 300
  with pytest.raises(R.GputwinError): R.parse_cases("decode=many")


@pytest.mark.parametrize("cat, words", [
    # a PM4 type-3 NOP header announcing 0x241 body dwords (count field, bits 29:16), one submitted: the CP executes up
    # to wptr only, so it waits for the rest (the runtime's own RELEASE_MEM becomes NOP body)
    ("cmd-pm4", [0xC2401000, 1]),
    # a pushbuffer word with SEC_OP 7 (END_PB_SEGMENT) before the runtime's semaphore release: the segment ends there
    ("cmd-gpfifo", [0xF16A9CBE])])
def test_a_stream_that_stalls_is_named_at_once(cat, words):
  """AMD and NVIDIA command-stream cases run on a synchronous mock machine driven to quiescence in the case's thread:
  a stream that can never complete is reported as stalled at once (it waited out a 5 s timeout, twice per case, and
  5 s more in close); complete and faulting streams give the runtime's own outcome."""
  from gputwin.abi import pm4 as P
  if cat == "cmd-pm4":
    assert R.CATEGORIES[cat].run(P.nop(2)).startswith("ok ")
    assert R.CATEGORIES[cat].run([0xC0007F00, 0]).startswith("QueueFault:")   # opcode 0x7f: not a PM4 packet
  R.CATEGORIES[cat].run(words)                                                  # imports, first machine
  t = time.perf_counter()
  assert R.CATEGORIES[cat].run(words).startswith("stalled:")
  assert time.perf_counter() - t < 2.0                                          # the runtime's wait: 5 s + 5 s


def _campaign(cases, tmp_path):
  rows, wall = R.campaign(None, cases, seed=1, jobs=2, out=tmp_path)
  ran = {n: r for n, r in rows.items() if not r.skipped}
  assert {n.split("-")[0] for n in ran} >= {"decode", "asm", "codeobj", "exec", "fault", "ioctl", "cmd"}
  bad = {n: {k: r.counts[k] for k in R.BAD if r.counts[k]} for n, r in rows.items()}
  bad = {n: b for n, b in bad.items() if b}
  found = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
  assert not bad, (bad, [(f["category"], f["kind"], f["text"][:300], f["input"]) for f in found][:10])
  return rows, wall


def test_ptx_corpus_is_package_data():
  """The library reads its PTX corpus from its own package (it read tests/isa/ptx/kernels, absent from an install),
  and pyproject ships it; without nvcc the category says so and is skipped."""
  import gputwin
  import tomllib
  pkg = Path(gputwin.__file__).parent
  assert R.PTX_SOURCES.is_relative_to(pkg) and len(list(R.PTX_SOURCES.glob("*.cu"))) >= 19
  data = tomllib.loads((pkg.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["gputwin"]
  assert {p.relative_to(pkg).as_posix() for p in R.PTX_SOURCES.glob("*.cu")} <= \
    {p.relative_to(pkg).as_posix() for pat in data for p in pkg.glob(pat)}
  if not shutil.which("nvcc"): return
  rows, _ = R.campaign(["decode-ptx"], 20, seed=3, jobs=1)
  assert rows["decode-ptx"].cases == 20 and not any(rows["decode-ptx"].counts[k] for k in R.BAD)


def test_quick_pass(tmp_path):
  rows, wall = _campaign(QUICK, tmp_path)
  assert sum(r.cases for r in rows.values()) > 2000


@pytest.mark.slow
def test_big_pass(tmp_path):
  _campaign(BIG, tmp_path)


# ------------------------------------------------------------------------------------------ Ray
def _ray():
  return pytest.importorskip("ray", reason="ray is not installed (pip install 'gputwin[cluster]')")


@pytest.mark.slow
def test_cluster_campaign_survives_a_killed_node(tmp_path, monkeypatch):
  """A local Ray cluster (ray.cluster_utils.Cluster: a head with no CPUs for tasks and two worker nodes of 1 CPU
  each, separate raylets): a campaign of decode and ioctl tasks; one worker node is killed mid-campaign. Its tasks
  are retried on the other node, every task's result lands once in the JSONL store, and a rerun of the campaign
  finds everything done (resume)."""
  _ray()
  import ray
  from ray.cluster_utils import Cluster
  monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
  monkeypatch.setenv("PYTHONPATH", str(Path(R.__file__).parents[2]))     # the workers import this checkout
  cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
  try:
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    cases = {"decode-gfx1100": 30000, "decode-a630": 20000, "ioctl-kfd": 400}
    todo = R.tasks(R.select_categories(list(cases)), cases, seed=3, size=2000)
    todo = [t | {"n": min(t["n"], 100)} if t["cat"] == "ioctl-kfd" else t for t in todo]
    store = tmp_path / "store.jsonl"
    seen = []

    def progress(r):
      seen.append(r)
      if len(seen) == 3:          # mid-campaign: kill a worker node (its raylet and the workers it started)
        cluster.remove_node(workers[0], allow_graceful=False)
    t0 = time.perf_counter()
    results = R.cluster_run(todo, cluster.address, store, progress=progress)
    wall = time.perf_counter() - t0
    keys = [json.loads(line)["task"] for line in store.read_text().splitlines()]
    assert sorted(keys) == sorted(R.task_key(t) for t in todo)          # every task once, none lost
    assert all(sum(r["counts"].values()) == r["n"] for r in results)
    assert not any(r["counts"][k] for r in results for k in R.BAD)
    per_node = {}
    for r in results: per_node.setdefault(r["node"], []).append(r)
    assert len(per_node) == 2                                           # both nodes worked before the kill
    again = R.cluster_run(todo, cluster.address, store)                 # resume: nothing left to run
    assert [r["task"] for r in again] == [R.task_key(t) for t in todo]
    print(f"\n{len(todo)} tasks, {sum(t['n'] for t in todo)} cases in {wall:.1f} s on 2 nodes (one killed after 3 "
          f"results); per node: " + ", ".join(f"{n}: {len(rs)} tasks, {sum(x['n'] for x in rs)} cases, "
                                             f"{sum(x['n'] for x in rs) / sum(x['secs'] for x in rs):.0f} cases/s"
                                             for n, rs in per_node.items()))
  finally:
    ray.shutdown()
    cluster.shutdown()
