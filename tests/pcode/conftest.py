"""Records which pcode bodies the suite executed against an oracle; written to gputwin/pcode/tested.json so
`gputwin pcode --coverage` can report it (merged across xdist workers via one file per worker)."""
from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

CHECKED: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
OUT = Path(__file__).resolve().parents[2] / "gputwin" / "pcode" / "tested.json"
PARTS = Path(__file__).resolve().parent / ".tested"


def checked(family: str, name: str, what: str) -> None:
  CHECKED[family][name].add(what)


def pytest_sessionfinish(session, exitstatus):
  worker = os.environ.get("PYTEST_XDIST_WORKER")
  data = {f: {n: sorted(w) for n, w in d.items()} for f, d in CHECKED.items()}
  if worker:  # each worker leaves its part; the controller merges
    PARTS.mkdir(exist_ok=True)
    (PARTS / f"{worker}.json").write_text(json.dumps(data))
    return
  partial = session.config.option.keyword or any(not Path(a.split("::")[0]).is_dir() for a in session.config.args)
  if exitstatus != 0 or partial:  # only a full, passing run of the directory rewrites the record
    for p in PARTS.glob("*.json") if PARTS.exists() else []:
      p.unlink()
    return
  for p in sorted(PARTS.glob("*.json")) if PARTS.exists() else []:
    for f, d in json.loads(p.read_text()).items():
      for n, w in d.items():
        data.setdefault(f, {}).setdefault(n, [])
        data[f][n] = sorted(set(data[f][n]) | set(w))
    p.unlink()
  if data:
    OUT.write_text(json.dumps({f: dict(sorted(d.items())) for f, d in sorted(data.items())}, indent=0) + "\n")


@pytest.fixture(scope="session", autouse=True)
def _clean_parts():
  yield
