"""`gputwin fuzz --reliability`: does bad input ever crash, hang or confuse the host? Seeded hostile inputs into every
public entry point, each case in a worker process under a watchdog.

A category is a generator of seeded inputs and a `run` that feeds one input to one entry point and returns its outcome
text (output bytes included). Outcomes, per case:
  ok       the entry point returned                   error    a gputwin error (or the real driver's errno): expected
  crash    the worker died (a signal)                 hang     the watchdog expired
  foreign  any other exception (a TypeError, an OSError with an errno the real driver never returns ...)
  nondet   the same case run twice gave different outcome text or bytes
  wrong    an invariant of the entry point broke (the two emulator tiers disagree, assembler output does not
           disassemble)
Workers run many cases per request (a chunk); a chunk that crashes or hangs is rerun one case at a time in fresh
workers to name the case. Failing inputs are shrunk (smaller inputs that fail the same way) and written as JSON
reproducers (`replay(path)` reruns one). Campaigns split into tasks (category, seed, first case, count) that run here
(`campaign`, -j workers) or on a Ray cluster (`cluster_campaign`, results in a JSONL store keyed by task, so a
restarted or interrupted campaign skips finished tasks and a task lost with its node is retried).

  gputwin fuzz --reliability [CATEGORY|PREFIX ...] --cases N|CAT=N,...,N --seed S [-j J] [--out DIR] [--cluster ADDRESS]
"""
from __future__ import annotations

import argparse
import ctypes
import errno as E
import hashlib
import itertools
import json
import os
import random
import re
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from gputwin.errors import GputwinError
from gputwin.isa.vendor import cache_root

KINDS = ("ok", "error", "crash", "hang", "foreign", "nondet", "wrong")
BAD = ("crash", "hang", "foreign", "nondet", "wrong")
AMD = ("gfx1100", "gfx1200", "gfx942", "gfx950")


class Wrong(Exception):
  """An entry point returned, but broke one of its promises (a wrong result, not an error)."""


@dataclass
class Category:
  name: str
  make: Callable[[random.Random], object]    # one input (bytes, str, list of JSON values) from a seeded generator
  run: Callable[[object], str]                # its outcome text; raises GputwinError / OSError / Wrong
  budget: float = 2.0                         # watchdog seconds per case
  warmup: float = 60.0                        # more for a worker's first case of the category (imports, compiles)
  chunk: int = 100                            # cases per worker request
  errnos: frozenset = frozenset()             # OSError errnos the real driver returns from this entry point
  needs: Callable[[], str | None] = lambda: None   # why the category cannot run here (a missing tool), or None


CATEGORIES: dict[str, Category] = {}


def category(name: str, make, **kw):
  def reg(run):
    CATEGORIES[name] = Category(name, make, run, **kw)
    return run
  return reg


def select_categories(names) -> list[Category]:
  """Names or prefixes ('decode' = every decode-*); none: all but the harness's own `selftest-*`."""
  if not names: return [c for c in CATEGORIES.values() if not c.name.startswith("selftest")]
  out = [c for c in CATEGORIES.values() if any(c.name == n or c.name.startswith(n + "-") for n in names)]
  missing = [n for n in names if not any(c.name == n or c.name.startswith(n + "-") for c in CATEGORIES.values())]
  if missing: raise GputwinError(f"unknown reliability categories {missing}; known: {' '.join(CATEGORIES)}")
  return out


def case_rng(cat: str, seed: int, index: int) -> random.Random:
  return random.Random(f"{cat}:{seed}:{index}")


def digest(*parts) -> str:
  h = hashlib.sha256()
  for p in parts: h.update(p if isinstance(p, bytes) else str(p).encode())
  return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------ one case, in a worker
_ERRNOS = frozenset({E.EPERM, E.ENOENT, E.ESRCH, E.EINTR, E.EIO, E.ENXIO, E.E2BIG, E.EBADF, E.EAGAIN, E.ENOMEM,
                     E.EACCES, E.EFAULT, E.EBUSY, E.EEXIST, E.ENODEV, E.EINVAL, E.ENOSPC, E.ERANGE, E.ENOTTY,
                     E.EOPNOTSUPP, E.ETIMEDOUT, E.EDEADLK, E.ENOSYS, E.EOVERFLOW, E.ECANCELED, E.ENODATA,
                     E.EBADFD,    # nvidia-uvm mmap before UVM_INITIALIZE
                     524})        # ENOTSUPP: kernel-internal, leaked to userspace by kgsl (GPUOBJ_IMPORT)


def outcome(cat: Category, inp) -> tuple[str, str]:
  """(kind, text) of one run of `inp`."""
  try:
    return "ok", cat.run(inp)
  except Wrong as e:
    return "wrong", str(e)
  except GputwinError as e:
    return "error", f"{type(e).__name__}: {e}"
  except OSError as e:
    if e.errno in cat.errnos: return "error", f"OSError {E.errorcode.get(e.errno, e.errno)}"
    return "foreign", f"{type(e).__name__}({e.errno}): {e}{_where(e)}"
  except Exception as e:  # noqa: BLE001 - the point: anything else is a finding
    return "foreign", f"{type(e).__name__}: {str(e)[:500]}{_where(e)}"


def _where(e: BaseException) -> str:
  tb = e.__traceback__
  while tb and tb.tb_next: tb = tb.tb_next
  return f" [{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}]" if tb else ""


def check(cat: Category, inp) -> tuple[str, str]:
  """Run twice: a different second outcome is nondeterminism."""
  a, b = outcome(cat, inp), outcome(cat, inp)
  if a != b: return "nondet", f"first {a[0]}: {a[1][:300]} | then {b[0]}: {b[1][:300]}"
  return a


def run_chunk(cat: Category, seed: int, start: int, n: int, started=lambda i: None) -> dict:
  counts, bad, t = dict.fromkeys(KINDS, 0), [], time.perf_counter()
  for i in range(start, start + n):
    started(i)
    inp = cat.make(case_rng(cat.name, seed, i))
    kind, text = check(cat, inp)
    counts[kind] += 1
    if kind in BAD: bad.append({"index": i, "kind": kind, "text": text[:2000], "input": encode(inp)})
  return {"counts": counts, "bad": bad, "secs": time.perf_counter() - t}


def encode(v):
  """JSON form of an input: bytes as {"hex": ...}."""
  if isinstance(v, (bytes, bytearray)): return {"hex": bytes(v).hex()}
  if isinstance(v, (list, tuple)): return [encode(x) for x in v]
  return v


def decode(v):
  if isinstance(v, dict) and set(v) == {"hex"}: return bytes.fromhex(v["hex"])
  if isinstance(v, list): return [decode(x) for x in v]
  return v


def _worker_main() -> int:
  """Requests on stdin, one JSON line each; on the original stdout (the cases' own prints go to /dev/null) a line
  as each case starts (the parent's watchdog and crash attribution), then the reply."""
  out = os.fdopen(os.dup(1), "w")
  null = os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 1)

  def say(msg):
    out.write(json.dumps(msg) + "\n")
    out.flush()
  for line in sys.stdin:
    req = json.loads(line)
    cat = CATEGORIES[req["cat"]]
    if "input" in req:
      say({"case": -1})
      kind, text = check(cat, decode(req["input"]))
      say({"kind": kind, "text": text[:2000]})
    else:
      say(run_chunk(cat, req["seed"], req["start"], req["n"], lambda i: say({"case": i})))
  return 0


# ------------------------------------------------------------------------------------------ workers and watchdog
class Worker:
  """A child process serving requests; replaced after a crash or a hang, and after `RECYCLE` requests (native code
  linked into a process is never unloaded: a campaign's random kernels grew a worker by ~3 GB over 1,700 requests).
  The watchdog is per case: `budget` seconds from the moment the case started (`warmup` more for a category's first
  case in this process: imports, vendor tables, first compiles)."""
  RECYCLE = 500

  def __init__(self):
    self.p: subprocess.Popen | None = None
    self.buf, self.seen, self.served = b"", set(), 0

  def _start(self):
    root = str(Path(__file__).resolve().parents[2])    # this checkout's gputwin, whatever the installed one is
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    self.p = subprocess.Popen([sys.executable, "-m", "gputwin.verify.reliability", "--worker"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    self.buf, self.seen, self.served = b"", set(), 0

  def _line(self, deadline: float) -> dict | None:
    fd = self.p.stdout.fileno()
    poll = select.poll()                 # not select.select: a busy host process may hold fds past FD_SETSIZE
    poll.register(fd, select.POLLIN)
    while b"\n" not in self.buf:
      left = deadline - time.monotonic()
      if left <= 0: return None
      if poll.poll(int(min(left, 1.0) * 1000) + 1):
        chunk = os.read(fd, 1 << 20)
        if not chunk: return {"eof": True}
        self.buf += chunk
    line, self.buf = self.buf.split(b"\n", 1)
    return json.loads(line)

  def ask(self, req: dict, budget: float, warmup: float) -> tuple[str, object, int | None]:
    """("reply", dict, None), ("crash", why, case index) or ("hang", seconds, case index)."""
    if self.p is not None and self.served >= self.RECYCLE: self.stop()
    if self.p is None or self.p.poll() is not None: self._start()
    self.served += 1
    try:
      self.p.stdin.write((json.dumps(req) + "\n").encode())
      self.p.stdin.flush()
    except BrokenPipeError:
      return self._died(None)
    case, wait = None, budget + warmup
    first = req["cat"] not in self.seen
    while True:
      msg = self._line(time.monotonic() + wait)
      if msg is None:
        self.stop()
        return "hang", wait, case
      if "eof" in msg: return self._died(case)
      if "case" not in msg:
        self.seen.add(req["cat"])
        return "reply", msg, None
      wait = budget + (warmup if first and case is None else 0)
      case = msg["case"]

  def _died(self, case):
    rc = self.p.wait()
    self.p = None
    return "crash", (f"killed by signal {-rc}" if rc < 0 else f"worker exited with status {rc}"), case

  def stop(self):
    if self.p is not None:
      self.p.kill()
      self.p.wait()
      self.p = None


def run_task(task: dict, worker: Worker | None = None) -> dict:
  """One task {cat, seed, start, n} in a worker: its counts and failing cases. When the worker crashes or hangs, the
  case it was running is retried alone in a fresh worker (a crash that needs the cases before it says so), and the
  rest of the range goes on in another."""
  own = worker is None
  worker = worker or Worker()
  cat = CATEGORIES[task["cat"]]
  res = {"task": task_key(task), **task, "counts": dict.fromkeys(KINDS, 0), "bad": [], "secs": 0.0}
  try:
    if (why := cat.needs()) is not None: return res | {"skipped": why}
    ranges = [(task["start"], task["start"] + task["n"])]
    while ranges:
      start, end = ranges.pop()
      t = time.perf_counter()
      st, rep, at = worker.ask({"cat": cat.name, "seed": task["seed"], "start": start, "n": end - start}, cat.budget,
                               cat.warmup)
      if st == "reply":
        for k, v in rep["counts"].items(): res["counts"][k] += v
        res["bad"] += rep["bad"]
        res["secs"] += rep["secs"]
        continue
      res["secs"] += time.perf_counter() - t
      if at is None: at = start     # died before its first case started
      alone = Worker()
      st2, rep2, _ = alone.ask({"cat": cat.name, "seed": task["seed"], "start": at, "n": 1}, cat.budget, cat.warmup)
      alone.stop()
      text = f"{rep}" if st == "crash" else f"no answer in {rep:.0f} s"
      if st2 == "reply" and st == "hang" and rep2["secs"] > cat.budget:   # (a fresh worker's first case gets the
        text += f" (alone, in a fresh worker: {rep2['secs']:.1f} s, inside the first case's warm-up allowance)"  # warm-up)
      elif st2 == "reply": text += " (not alone: only after the cases before it in the same worker)"
      res["counts"][st] += 1
      res["bad"].append({"index": at, "kind": st, "text": text,
                         "input": encode(cat.make(case_rng(cat.name, task["seed"], at)))})
      # the rest of the range, and the cases before `at` (their results went down with the worker)
      ranges += [r for r in ((at + 1, end), (start, at)) if r[0] < r[1]]
    return res
  finally:
    if own: worker.stop()


def task_key(task: dict) -> str:
  extra = ":" + ",".join(task["targets"]) if "targets" in task else ""
  return f"{task['cat']}:{task['seed']}:{task['start']}:{task['n']}{extra}"


def count_for(cases: int | dict, name: str) -> int:
  """`cases`: one count for every category, or {name or prefix: count, "*": default} (the longest matching key wins;
  no match: the default, else 0)."""
  if isinstance(cases, int): return cases
  keys = [k for k in cases if name == k or name.startswith(k + "-")]
  return cases[max(keys, key=len)] if keys else cases.get("*", 0)


def parse_cases(text: str) -> int | dict:
  """--cases: "N" (every category) or "decode=1000000,exec=2000,10000" (per category or prefix; a bare N: the
  default for the rest)."""
  try:
    if "=" not in text: return int(text)
    return {(kv.split("=")[0].strip() if "=" in kv else "*"): int(kv.split("=")[-1]) for kv in text.split(",")}
  except ValueError:
    raise GputwinError(f"--cases {text!r}: expected N or CATEGORY=N[,CATEGORY=N ...][,N]") from None


def tasks(cats: list[Category], cases: int | dict, seed: int, size: int | None = None) -> list[dict]:
  """Seed ranges: the category's count of cases in chunks of its size (or `size`)."""
  out = []
  for c in cats:
    step, n = size or c.chunk, count_for(cases, c.name)
    out += [{"cat": c.name, "seed": seed, "start": s, "n": min(step, n - s)} for s in range(0, n, step)]
  return out


def local_run(todo: list[dict], jobs: int, progress=None) -> list[dict]:
  """Run tasks on `jobs` workers here."""
  lock, results, it = threading.Lock(), [], iter(todo)

  def loop():
    w = Worker()
    try:
      while True:
        with lock: t = next(it, None)
        if t is None: return
        r = run_task(t, w)
        with lock:
          results.append(r)
          if progress: progress(r)
    finally:
      w.stop()
  threads = [threading.Thread(target=loop, daemon=True) for _ in range(max(1, jobs))]
  for t in threads: t.start()
  for t in threads: t.join()
  return results


# ------------------------------------------------------------------------------------------ shrinking and reports
def smaller(v):
  """Candidate inputs smaller than `v`: chunks removed (lists, text lines, characters, bytes in dwords), then bits
  cleared in short byte strings."""
  if isinstance(v, list):
    n = len(v)
    for size in (n // 2, n // 4, 1):
      for s in range(0, n, max(size, 1)):
        if size: yield v[:s] + v[s + size:]
    for i, x in enumerate(v):
      if isinstance(x, (list, str, bytes)) and len(x) > 1:
        for y in smaller(x): yield v[:i] + [y] + v[i + 1:]
  elif isinstance(v, str):
    lines = v.split("\n")
    if len(lines) > 1:
      for y in smaller(lines): yield "\n".join(y)
    n = len(v)
    for size in (n // 2, n // 8, n // 32, 1):
      for s in range(0, n, max(size, 1)):
        if size: yield v[:s] + v[s + size:]
  elif isinstance(v, bytes):
    n = len(v)
    if n > 16:
      for size in (n // 2 & ~3, n // 8 & ~3, 4):
        for s in range(0, n, max(size, 4)):
          if size: yield v[:s] + v[s + size:]
    else:
      x = int.from_bytes(v, "little")
      for b in range(8 * n):
        if x >> b & 1: yield (x & ~(1 << b)).to_bytes(n, "little")


def signature(kind: str, text: str) -> str:
  """What two failures must share to count as the same bug: the kind, and for exceptions and wrong results the
  exception type / first words."""
  return kind if kind in ("crash", "hang") else kind + ":" + re.split(r"[:(\[]", text, 1)[0][:60]


def shrink(cat_name: str, inp, kind: str, text: str, worker: Worker, attempts: int = 300) -> tuple[object, str]:
  """The smallest input found that fails with the same signature (greedy: take the first smaller candidate that
  still fails, start again from it)."""
  cat, sig = CATEGORIES[cat_name], signature(kind, text)
  best, best_text, tries, improved = inp, text, 0, True
  while improved and tries < attempts:
    improved = False
    for cand in smaller(best):
      tries += 1
      if tries > attempts: break
      st, rep, _ = worker.ask({"cat": cat_name, "input": encode(cand)}, cat.budget, cat.warmup)
      got = (rep["kind"], rep["text"]) if st == "reply" else (st, str(rep))
      if signature(*got) == sig:
        best, best_text, improved = cand, got[1], True
        break
  return best, best_text


def write_reproducers(results: list[dict], out: Path, per_signature: int = 1, budget_s: float = 120.0) -> list[Path]:
  """Shrink one failing case per (category, signature) and write it as OUT/<category>-<seed>-<index>.json."""
  out.mkdir(parents=True, exist_ok=True)
  seen, paths, w, t0 = {}, [], Worker(), time.monotonic()
  try:
    for r in results:
      for b in r["bad"]:
        key = (r["cat"], signature(b["kind"], b["text"]))
        if seen.get(key, 0) >= per_signature: continue
        seen[key] = seen.get(key, 0) + 1
        inp, text = decode(b["input"]), b["text"]
        if time.monotonic() - t0 < budget_s:
          inp, text = shrink(r["cat"], inp, b["kind"], b["text"], w)
        p = out / f"{r['cat']}-{r['seed']}-{b['index']}.json"
        p.write_text(json.dumps({"category": r["cat"], "seed": r["seed"], "index": b["index"], "kind": b["kind"],
                                 "text": text, "original": b["text"], "input": encode(inp),
                                 "replay": f"python -m gputwin.verify.reliability --replay {p.name}"}, indent=1) + "\n")
        paths.append(p)
  finally:
    w.stop()
  return paths


def replay(path) -> tuple[str, str]:
  """Rerun a reproducer here (in this process): its (kind, text)."""
  d = json.loads(Path(path).read_text())
  return check(CATEGORIES[d["category"]], decode(d["input"]))


@dataclass
class Row:
  cases: int = 0
  secs: float = 0.0
  counts: dict = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
  skipped: str | None = None


def summarize(results: list[dict]) -> dict[str, Row]:
  rows: dict[str, Row] = {}
  for r in results:
    row = rows.setdefault(r["cat"], Row())
    row.skipped = r.get("skipped") or row.skipped
    row.cases += 0 if r.get("skipped") else r["n"]
    row.secs += r["secs"]
    for k, v in r["counts"].items(): row.counts[k] += v
  return dict(sorted(rows.items()))


def table(rows: dict[str, Row], title: str):
  from rich.table import Table
  t = Table(title=title)
  for c in ("category", "cases", "ok", "error", "crash", "hang", "foreign", "nondet", "wrong", "cases/s"):
    t.add_column(c, justify="left" if c == "category" else "right")
  for name, r in rows.items():
    if r.skipped:
      t.add_row(name, "-", *["-"] * 7, f"skipped: {r.skipped}")
      continue
    t.add_row(name, str(r.cases), *(str(r.counts[k]) for k in KINDS), f"{r.cases / max(r.secs, 1e-9):.0f}")
  return t


# ------------------------------------------------------------------------------------------ Ray
def cluster_run(todo: list[dict], address: str, store: Path, progress=None, max_retries: int = 3,
                run=None) -> list[dict]:
  """Run tasks on the Ray cluster at `address` with `run(task) -> result dict` (a module-level function; default
  run_task, a reliability task); each finished task is appended to `store` (JSONL) as it arrives, tasks already there
  are skipped (resume). A task lost with its node is retried (by Ray, then resubmitted here)."""
  try:
    import ray
  except ImportError as e:
    raise GputwinError("--cluster needs ray: pip install 'gputwin[cluster]'") from e
  done = load_store(store)
  left = [t for t in todo if task_key(t) not in done]
  if left:
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    remote = ray.remote(num_cpus=1, max_retries=max_retries)(_ray_task)
    run = run or run_task
    pending, tries = {remote.remote(t, run): t for t in left}, {}
    with store.open("a") as f:
      while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        t = pending.pop(ready[0])
        try:
          r = ray.get(ready[0])
        except ray.exceptions.RayError as e:     # retries used up (nodes died): submit it again, a few times
          tries[task_key(t)] = tries.get(task_key(t), 0) + 1
          if tries[task_key(t)] > max_retries: raise GputwinError(f"task {task_key(t)} failed: {e}") from e
          pending[remote.remote(t, run)] = t
          continue
        done[task_key(t)] = r
        f.write(json.dumps(r) + "\n")
        f.flush()
        if progress: progress(r)
  return [done[task_key(t)] for t in todo]


def _ray_task(task: dict, run) -> dict:
  """One task on a cluster node, tagged with the node that ran it."""
  import ray
  return run(task) | {"node": ray.get_runtime_context().get_node_id()[:12]}


def load_store(store: Path) -> dict[str, dict]:
  done = {}
  if store.exists():
    for line in store.read_text().splitlines():
      try: r = json.loads(line)
      except json.JSONDecodeError: continue    # a line cut short by a killed driver
      done[r["task"]] = r
  return done


# ------------------------------------------------------------------------------------------ campaign + CLI
def campaign(names=None, cases: int | dict = 1000, seed: int = 0, jobs: int = 2, out: Path | None = None,
             cluster: str | None = None, store: Path | None = None, progress=None) -> tuple[dict[str, Row], float]:
  cats = select_categories(names)
  todo = tasks(cats, cases, seed)
  t0 = time.perf_counter()
  if cluster:
    store = store or Path(out or ".") / f"reliability-{seed}-{digest(json.dumps(todo))}.jsonl"
    results = cluster_run(todo, cluster, store, progress)
  else:
    results = local_run(todo, jobs, progress)
  wall = time.perf_counter() - t0
  if out is not None and any(r["bad"] for r in results): write_reproducers(results, Path(out))
  return summarize(results), wall


def main(a) -> int:
  """From `gputwin fuzz --reliability ...` (verify.fuzz.main's parsed arguments)."""
  from rich.console import Console
  jobs = a.jobs or os.cpu_count() or 1
  cases, done = parse_cases(str(a.cases)), [0]
  log = None
  if a.out and not a.cluster:              # each task's result as it arrives (a cut-short run keeps what it did)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    log = (Path(a.out) / f"results-{a.seed}.jsonl").open("w")

  def tick(r):
    done[0] += 1
    if log:
      log.write(json.dumps(r) + "\n")
      log.flush()
    if done[0] % 20 == 0: print(f"  {done[0]} tasks done", file=sys.stderr, flush=True)
  try:
    rows, wall = campaign(a.reliability, cases, a.seed, jobs, Path(a.out) if a.out else None, a.cluster,
                          progress=tick)
  finally:
    if log: log.close()
  total = sum(r.cases for r in rows.values())
  title = (f"gputwin fuzz --reliability: seed {a.seed}, cases {a.cases}, {total} cases in {wall:.1f} s "
           f"({total / max(wall, 1e-9):.0f}/s), {'cluster ' + a.cluster if a.cluster else f'-j {jobs}'}")
  Console(highlight=False, width=150).print(table(rows, title))
  bad = sum(r.counts[k] for r in rows.values() for k in BAD)
  if bad and a.out: print(f"reproducers in {a.out}")
  return 1 if bad else 0


# ========================================================================================== the categories
# ---- AMD and ir3 decode of random words, PTX parse of mutated nvcc text
_PREFIXES: dict[str, list[tuple[int, int]]] = {}


def _amd_words(arch):
  def make(r: random.Random) -> bytes:
    """A 32/64/96/128-bit word whose first dword carries some encoding's fixed bits (most words reach a real format
    with arbitrary bits elsewhere); the (mask, value) pairs are computed once per process."""
    if arch not in _PREFIXES:
      from gputwin.isa.targets import target
      from gputwin.isa.vendor import tables
      _PREFIXES[arch] = [(sum(f.mask << f.lo for f in e.fixed if f.hi < 32),
                          sum(f.value << f.lo for f in e.fixed if f.hi < 32))
                         for e in tables(target(arch).family).encodings.values()]
    size, (mask, val) = r.choice((4, 8, 12, 16)), r.choice(_PREFIXES[arch])
    return (r.getrandbits(size * 8) & ~mask | val).to_bytes(size, "little")
  return make


for _arch in AMD:
  @category(f"decode-{_arch}", _amd_words(_arch), budget=1.0, chunk=5000)
  def _decode_amd(data: bytes, arch=_arch) -> str:
    from gputwin.isa import disassemble
    return "\n".join(disassemble(data, arch))

IR3 = ("a630", "a730")
for _gpu in IR3:
  @category(f"decode-{_gpu}", lambda r: r.getrandbits(64).to_bytes(8, "little"), budget=1.0, chunk=5000)
  def _decode_ir3(data: bytes, gpu=_gpu) -> str:
    from gputwin.isa import ir3
    return "\n".join(ir3.disassemble(data, gpu))


PTX_SOURCES = Path(__file__).with_name("corpus") / "ptx"   # package data: CUDA kernels (also the PTX ISA tests' suite)
CACHE = cache_root() / "reliability"


def _ptx_corpus(sources: Path = PTX_SOURCES) -> list[str]:
  """nvcc -ptx of the CUDA kernels in `sources` (cached by content; the first call's directory is the process's)."""
  global _PTX
  if _PTX is None:
    import shutil
    out = []
    for cu in sorted(Path(sources).glob("*.cu")):
      src = cu.read_bytes()
      p = CACHE / f"{cu.stem}-{digest(src)}.ptx"
      if not p.exists() and shutil.which("nvcc"):
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        r = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(cu), "-o", str(tmp)], capture_output=True)
        if r.returncode == 0: tmp.replace(p)
      if p.exists(): out.append(p.read_text())
    _PTX = out
  return _PTX


_PTX: list[str] | None = None
_TEXT_NOISE = ["\u00e9", "\u2028", "\u0000", "\ufeff", "\U0001f600", "%r999999999999", "0x" + "f" * 40, "9" * 5000,
               "1e999", "-0x8000000000000000", "[", "]", "{", "}", ";", ",", ":", "::", "/*", "*/", "//", "\\", '"',
               ".", "@", "!", "%", "|", "(", ")" * 200, "(" * 3000]


def mutate_text(r: random.Random, text: str, pool: list[str] | None = None, n: int | None = None) -> str:
  """Generic text mutations: delete/duplicate/swap a span, insert noise (unicode, huge numbers, punctuation, a
  very long run), splice a line from elsewhere in the text."""
  lines = text.split("\n")
  for _ in range(n or r.randint(1, 4)):
    i = r.randrange(len(lines))
    ln = lines[i]
    k = r.randrange(6)
    a = r.randrange(len(ln) + 1)
    b = min(len(ln), a + r.randint(1, 12))
    if k == 0: lines[i] = ln[:a] + ln[b:]
    elif k == 1: lines[i] = ln[:a] + r.choice(_TEXT_NOISE + (pool or [])) + ln[a:]
    elif k == 2: lines[i] = ln[:a] + ln[a:b] * r.randint(2, 2000) + ln[b:]
    elif k == 3: lines.insert(i, r.choice(lines))
    elif k == 4 and len(lines) > 1: del lines[i:i + r.randint(1, 20)]
    else: lines[i] = re.sub(r"\d+", lambda m: str(r.choice([0, 1, 31, 32, 63, 255, 1 << 31, (1 << 64) + 1,
                                                             r.getrandbits(r.choice((8, 32, 70)))])), ln, 1)
    if not lines: lines = [""]
  return "\n".join(lines)


def _ptx_make(r: random.Random) -> str:
  corpus = _ptx_corpus()
  return mutate_text(r, r.choice(corpus)) if corpus else ""


@category("decode-ptx", _ptx_make, budget=20.0, chunk=20,
          needs=lambda: None if _ptx_corpus() else "no nvcc (the corpus is nvcc -ptx of gputwin/verify/corpus/ptx)")
def _parse_ptx(text: str) -> str:
  from gputwin.isa import ptx
  m = ptx.parse(text, "fuzz.ptx")
  return digest(ptx.format_ptx(m))


# ---- PTX statements, one at a time (the "words" of PTX: a million of them in minutes, not a million modules)
_PTX_LINES = None


def _ptx_lines() -> tuple:
  """(statements, operands, modifiers, the parser of statements) from the corpus: every statement of every function
  body (a `{ }` block, as nvcc writes around calls, is one statement), labels renamed to the skeleton's $L__BB0_0..7
  and parameters to param_0..; the skeleton module declares the corpus's globals and functions, a kernel with those
  parameters, and registers of each nvcc class (%p %rs %r %f %rd %fd) past the corpus's highest numbers."""
  global _PTX_LINES
  if _PTX_LINES is None:
    from gputwin.isa import ptx
    from gputwin.isa.ptx import printer
    from gputwin.isa.ptx.parser import Statements
    items, units, regs, local = {}, [], {}, {}
    label = lambda m: f"$L__BB0_{int(m[1]) % 8}"  # noqa: E731
    for text in _ptx_corpus():
      for it in ptx.parse(text).items:
        if isinstance(it, (ptx.VarDecl, ptx.Function)) and (not isinstance(it, ptx.Function) or it.kind == "func"):
          items.setdefault(it.name, it if isinstance(it, ptx.VarDecl) else replace(it, body=None))
        for st in it.body or () if isinstance(it, ptx.Function) else ():   # a body's own variables, %SP / %SPL
          if isinstance(st, ptx.VarDecl) or isinstance(st, ptx.RegDecl) and not any(n for _, n in st.names):
            local.setdefault(st.name if isinstance(st, ptx.VarDecl) else st.names, st)
      for t, name, n in re.findall(r"\.reg\s+\.(\w+)\s+(%[a-z]+)<(\d+)>;", text):
        regs[name] = (t, max(int(n), regs.get(name, ("", 0))[1]))
      depth, block = 0, []
      for ln in text.split("\n"):
        ln = re.sub(r"\$L__BB\d+_(\d+)", label, re.sub(r"\b[\w$]+_param_(\d+)\b", r"param_\1", ln.strip()))
        if depth == 0 and (not ln or ln.startswith((".", "//", "(", ")")) or ln in ("{", "}") and not block):
          if ln == "{" and not block: depth = 1   # a function body starts: statements from here
          continue
        depth += ln.count("{") - ln.count("}")
        if depth <= 0:                            # the function's closing brace
          depth = 0
          continue
        if not block and (not ln or ln.startswith("//")): continue
        block.append(re.sub(r"^\$L__BB0_(\d+):$", r"$L__def_\1:", ln))   # (the skeleton defines $L__BB0_*)
        if depth == 1: units.append("\n".join(block)); block = []
    params = ", ".join(f".param .u64 param_{i}" for i in range(16))
    decls = "".join(f"\t.reg .{t} {name}<{n + 16}>;\n" for name, (t, n) in sorted(regs.items())) + \
      "".join(f"{line}\n" for st in local.values() for line in printer.statement(st))
    skeleton = ptx.format_ptx(ptx.Module("9.0", ("sm_90",), 64, (), tuple(items.values()))) + \
      f".visible .entry k({params})\n{{\n{decls}" + "".join(f"$L__BB0_{i}:\n" for i in range(8)) + "\tret;\n}\n"
    units = sorted(set(units))
    lines = [u for u in units if "\n" not in u and " " in u and not u.startswith("@")]
    ops = sorted({o.strip() for u in lines for o in SPLIT_OPERANDS.split(u.split(None, 1)[1].rstrip(";"))})
    mods = sorted({m for u in lines for m in u.split(None, 1)[0].split(".")[1:]})
    _PTX_LINES = units, ops, mods, Statements(skeleton, "k", "fuzz.ptx")
  return _PTX_LINES


_PTX_CHARS = list("{}[]()<>,;:.@!%|+-=_$\"\\/*\t\n\r\f\v\x00\x7f") + ["\u00e9", "\u202e", "::", "//", "/*", "*/"]
_PTX_NUMS = ["0", "1", "-1", "15", "16", "31", "32", "63", "64", "0x7fffffff", "0x80000000", "0xffffffff",
             "4294967296", "0x8000000000000000", "0xffffffffffffffff", "0x1ffffffffffffffff", "18446744073709551616",
             "0f7F800000", "0d7FF8000000000000", "1e999", "0b" + "1" * 65, "0" + "7" * 23]


def _ptx_line_make(r: random.Random) -> str:
  """A corpus statement with 1-3 mutations: an operand of another statement in one operand's place, a modifier
  replaced, added or dropped, another statement appended, a number swapped for a boundary value, a register
  renumbered past its declaration, a span deleted or doubled or a character (punctuation, control, non-ASCII)
  inserted, and now and then a generic hostile one (mutate_text: 2,000-fold repeats, 5,000-digit numbers)."""
  units, ops, mods, _ = _ptx_lines()
  s = r.choice(units)
  for _ in range(r.randint(1, 3)):
    k = r.randrange(6)
    head, _, rest = s.partition(" ")
    if k == 1 and rest:
      parts = SPLIT_OPERANDS.split(rest)
      parts[r.randrange(len(parts))] = " " + r.choice(ops)
      s = head + " " + ",".join(parts).strip()
    elif k == 2 and "." in head:
      ms, i, how = head.split("."), r.randrange(1, head.count(".") + 2), r.randrange(3)
      if how == 0: ms.insert(i, r.choice(mods))
      elif i < len(ms): ms[i:i + 1] = [r.choice(mods)] if how == 1 else []
      s = ".".join(ms) + (" " + rest if rest else "")
    elif k == 3: s += "\n" + r.choice(units)
    elif k == 4 and (nums := list(re.finditer(r"(?<![\w%$.])-?(?:0[xXfFdDbB])?[0-9a-fA-F]+U?(?![\w.])", s))):
      m = r.choice(nums)
      s = s[:m.start()] + r.choice(_PTX_NUMS) + s[m.end():]
    elif k == 5 and (regs := list(re.finditer(r"%[a-z]+(\d+)", s))):
      m = r.choice(regs)
      s = s[:m.start(1)] + str(r.choice([0, 255, 256, 1 << 31, r.getrandbits(70)])) + s[m.end(1):]
    elif r.random() < 0.02: s = mutate_text(r, s)      # now and then a hostile one (2,000-fold repeats, 5,000 digits)
    else:                                               # a small edit: a span deleted or doubled, a character added
      a = r.randrange(len(s) + 1)
      b = min(len(s), a + r.randint(1, 8))
      s = r.choice([s[:a] + s[b:], s[:a] + s[a:b] * 2 + s[b:], s[:a] + r.choice(_PTX_CHARS) + s[a:]])
  return s


@category("decode-ptx-lines", _ptx_line_make, budget=2.0, chunk=2000,
          needs=lambda: None if _ptx_corpus() else "no nvcc (the corpus is nvcc -ptx of gputwin/verify/corpus/ptx)")
def _parse_ptx_line(text: str) -> str:
  from gputwin.isa.ptx import printer
  return digest("\n".join(l for st in _ptx_lines()[3].parse(text) for l in printer.statement(st)))


# ---- AMD assembler text
_NUMS = [0, 1, 7, 15, 31, 63, 64, 127, 128, 255, 256, 511, 4095, 4096, 0xffff, 0x10000, -1, -17, 0x80000000]
_MODS = ["clamp", "glc", "slc", "dlc", "nt", "sc0", "sc1", "lds", "tfe", "offen", "idxen", "a16", "d16", "offset:4095",
         "offset:-1", "mul:2", "op_sel:[1,1,1]", "neg_lo:[1,1,1]", "th:TH_LOAD_NT", "scope:SCOPE_SYS", "row_mask:0x0",
         "bound_ctrl:1", "fi:1", "cbsz:7", "abid:15", "blgp:7", "offset1:255", "row_shl:1", "dst_sel:WORD_1"]
SPLIT_OPERANDS = re.compile(r",(?![^\[]*\])")


def mutate_asm(rng: random.Random, t: str, pool: list[str]) -> str:
  """Assembler-aware mutations of one valid line: an operand from another instruction, a boundary number, an extra
  modifier, a dropped word, a register at the edge of (or past) a register file."""
  for _ in range(rng.randint(1, 3)):
    k = rng.randrange(5)
    if k == 4 and (m := re.match(r"(\S+)\s+(.+)", t)):  # an operand of another instruction in this one's place
      ops = [o.strip() for o in SPLIT_OPERANDS.split(m[2])]
      ops[rng.randrange(len(ops))] = rng.choice(pool)
      t = m[1] + " " + ", ".join(ops)
    if k == 0 and (ms := list(re.finditer(r"(?<![\w.])-?(0x[0-9a-f]+|\d+)(?![\w.])", t))):
      m, v = rng.choice(ms), rng.choice(_NUMS)
      t = t[:m.start()] + (hex(v) if v >= 0 and rng.random() < .5 else str(v)) + t[m.end():]
    elif k == 1:
      t += " " + rng.choice(_MODS)
    elif k == 2 and len(ws := t.split(" ")) > 2:
      ws.pop(rng.randrange(1, len(ws)))
      t = " ".join(ws)
    else:
      t = re.sub(r"\b([vsa])(\d+)\b", lambda m: m[1] + str(rng.choice([0, 101, 106, 124, 126, 127, 254, 255])), t, 1)
  return t


_LINES: dict[str, tuple[list[str], list[str]]] = {}


def valid_lines(arch: str) -> tuple[list[str], list[str]]:
  """Valid assembly lines of `arch` (isa.strategies' samples printed by our disassembler) and their operands."""
  if arch not in _LINES:
    from gputwin.isa import disassemble
    from gputwin.isa.strategies import batch
    lines = []
    for s in batch(arch, seed=22)[::3]:
      try: lines += disassemble(s.data, arch)
      except GputwinError: pass   # samples our printer does not model (tests/isa/fuzz_exclusions.json)
    pool = [o.strip() for t in lines if (m := re.match(r"\S+\s+(.+)", t)) for o in SPLIT_OPERANDS.split(m[1])]
    _LINES[arch] = lines, pool
  return _LINES[arch]


def _asm_make(arch):
  def make(r: random.Random) -> str:
    lines, pool = valid_lines(arch)
    t = mutate_asm(r, r.choice(lines), pool)
    if r.random() < 0.3: t = mutate_text(r, t, pool)
    return t
  return make


for _arch in AMD:
  @category(f"asm-{_arch}", _asm_make(_arch), budget=3.0, chunk=200)
  def _assemble(text: str, arch=_arch) -> str:
    from gputwin.isa import assemble, disassemble
    b = assemble(text, arch)
    try:
      lines = disassemble(b, arch)
    except GputwinError as e:
      raise Wrong(f"assembles to {b.hex()}, which our disassembler rejects: {e}") from None
    return b.hex() + " " + " | ".join(lines)


# ---- kernels: the test kernel template, random instruction streams on both tiers, guest faults
def kernel_source(arch: str, body: str, vgprs: int = 16, sgprs: int = 16, wave32: bool = True, lds: int = 0,
                  extra: str = "", accum: int = 16) -> str:
  """Assembly of one kernel `k` (kernarg pointer in s[0:1]) running `body`, then s_endpgm; gfx9: AGPRs from
  v`accum` on."""
  w = f"  .amdhsa_wavefront_size32 {int(wave32)}\n" if not arch.startswith("gfx9") else ""
  acc = f"  .amdhsa_accum_offset {accum}\n" if arch.startswith("gfx9") else ""
  return f""".amdgcn_target "amdgcn-amd-amdhsa--{arch}"
.text
.globl k
.p2align 8
.type k,@function
k:
{body}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr {vgprs}
  .amdhsa_next_free_sgpr {sgprs}
  .amdhsa_group_segment_fixed_size {lds}
{w}{acc}{extra}.end_amdhsa_kernel
"""


def kernel(arch: str, body: str, **kw) -> bytes:
  """kernel_source assembled into a code object."""
  from gputwin.isa.codeobj import assemble_code_object
  return assemble_code_object(kernel_source(arch, body, **kw), arch)


def both_tiers(co: bytes, arch: str, lds: int = 0, max_instructions: int = 4000) -> str:
  """Launch `k` on the interpreter and on the native tier (every block compiled): same outcome, or Wrong."""
  import numpy as np
  from gputwin.emu import launch
  lanes = 64 if arch.startswith("gfx9") else 32
  outs = []
  old = os.environ.get("GPUTWIN_JIT")
  try:
    for jit in ("0", "force"):
      os.environ["GPUTWIN_JIT"] = jit
      buf = np.arange(256, dtype=np.uint32)
      try:
        launch(co, "k", grid=2, block=lanes, args=[buf], checks=False, max_instructions=max_instructions)
        outs.append(("ok", digest(buf.tobytes())))
      except GputwinError as e:
        outs.append(("error", f"{type(e).__name__}: {e}"))
  finally:
    if old is None: os.environ.pop("GPUTWIN_JIT", None)
    else: os.environ["GPUTWIN_JIT"] = old
  if outs[0] != outs[1]: raise Wrong(f"interpreter {outs[0]} != native {outs[1]}")
  if outs[0][0] == "error": raise GputwinError(outs[0][1])
  return outs[0][1]


_STREAMS: dict[str, list] = {}


def _stream_make(arch):
  def make(r: random.Random) -> list[bytes]:
    """2-8 random valid (decodable) instructions of `arch`, compute encodings only."""
    from gputwin.errors import DecodeError
    from gputwin.isa import decode
    from gputwin.isa.strategies import RandomPick, build, cases
    if arch not in _STREAMS:
      _STREAMS[arch] = cases(arch, graphics=False)
    pool = _STREAMS[arch]
    out = []
    while len(out) < r.randint(2, 8):
      enc, op = r.choice(pool)
      s = build(arch, enc, op, RandomPick(r))
      try: decode(s.data, arch)
      except DecodeError: continue
      out.append(s.data)
    return out
  return make


for _arch in AMD:
  @category(f"exec-{_arch}", _stream_make(_arch), budget=20.0, chunk=10)
  def _exec(stream: list[bytes], arch=_arch) -> str:
    body = "\n".join(f"  .long {int.from_bytes(w[i:i + 4], 'little'):#x}" for w in stream for i in range(0, len(w), 4))
    gfx9 = arch.startswith("gfx9")     # the largest register allocation: more random operands fit
    return both_tiers(kernel(arch, body, vgprs=512 if gfx9 else 256, sgprs=102 if gfx9 else 106, wave32=not gfx9,
                             accum=256), arch)


def _fault_make(arch):
  gfx9, gfx12 = arch.startswith("gfx9"), arch == "gfx1200"
  ld = "global_load_dword" if gfx9 else "global_load_b32"
  st = "global_store_dword" if gfx9 else "global_store_b32"
  dsr, dsw = ("ds_read_b32", "ds_write_b32") if gfx9 else ("ds_load_b32", "ds_store_b32")
  sld = "scratch_load_dword" if gfx9 else "scratch_load_b32"
  wait = "s_wait_loadcnt 0" if gfx12 else "s_waitcnt vmcnt(0)"
  add = "v_add_u32" if gfx9 else "v_add_nc_u32"

  def make(r: random.Random) -> str:
    big = lambda: r.choice([0, 4, 0xfffc, 0x10000, 0x7ffffffc, 0xfffffffc, r.getrandbits(32) & ~3])  # noqa: E731
    k = r.randrange(6)
    if k == 0:   # global access past a buffer, or at an absolute random address
      return (f"  v_mov_b32 v2, {big():#x}\n  v_mov_b32 v3, {r.choice([0, 1, 0x7fff, 0xffffffff]):#x}\n"
              f"  {r.choice([ld, st])} v2, v[2:3], off offset:{r.choice([0, 4, -4, 4092])}\n  {wait}")
    if k == 1:   # jump outside the code
      return (f"  s_mov_b32 s4, {big():#x}\n  s_mov_b32 s5, {r.choice([0, 1, 0xffff, 0x7fffffff]):#x}\n"
              f"  s_setpc_b64 s[4:5]")
    if k == 2:
      return f"  s_branch {r.choice([0x7fff, 0x8000, 0x2000, 0xffff, 0x1000]):#x}"
    if k == 3:   # runaway loops
      return r.choice(["l:\n  s_branch l", f"l:\n  {add} v1, v1, 1\n  s_cbranch_scc0 l",
                       "  s_mov_b32 s6, 0\nl:\n  s_add_u32 s6, s6, 1\n  s_cmp_lg_u32 s6, 0\n  s_cbranch_scc1 l"])
    if k == 4:   # LDS out of range
      return (f"  v_mov_b32 v2, {big():#x}\n  {r.choice([dsr + ' v3, v2', dsw + ' v2, v2'])} "
              f"offset:{r.choice([0, 4, 65532, 65535])}\n  s_waitcnt lgkmcnt(0)" if not gfx12 else
              f"  v_mov_b32 v2, {big():#x}\n  {r.choice([dsr + ' v3, v2', dsw + ' v2, v2'])} "
              f"offset:{r.choice([0, 4, 65532, 65535])}\n  s_wait_dscnt 0")
    return f"  v_mov_b32 v2, {big():#x}\n  {sld} v3, v2, off\n  {wait}"    # scratch past the private segment
  return make


for _arch in AMD:
  @category(f"fault-{_arch}", _fault_make(_arch), budget=20.0, chunk=10)
  def _fault(body: str, arch=_arch) -> str:
    lds = int(digest(body), 16) % 3 * 1024
    co = kernel(arch, body, vgprs=16, lds=lds, wave32=not arch.startswith("gfx9"))
    return both_tiers(co, arch, lds, max_instructions=3000)


# ---- code objects
_BASE_CO: dict[str, bytes] = {}
_CO_BODY = {"gfx9": "  s_load_dwordx2 s[2:3], s[0:1], 0x0\n  v_lshlrev_b32 v1, 2, v0\n  s_waitcnt lgkmcnt(0)\n"
                    "  global_store_dword v1, v0, s[2:3]",
            "gfx1": "  s_load_b64 s[2:3], s[0:1], 0x0\n  v_lshlrev_b32 v1, 2, v0\n  s_waitcnt lgkmcnt(0)\n"
                    "  global_store_b32 v1, v0, s[2:3]"}


def base_code_object(arch: str) -> bytes:
  if arch not in _BASE_CO:
    body = _CO_BODY[arch[:4]].replace("s_waitcnt lgkmcnt(0)", "s_wait_kmcnt 0") if arch == "gfx1200" else \
      _CO_BODY[arch[:4]]
    _BASE_CO[arch] = kernel(arch, body, wave32=not arch.startswith("gfx9"))
  return _BASE_CO[arch]


def elf_fields(data: bytes) -> list[tuple[int, int]]:
  """(offset, size) of the size/offset/count fields worth inflating: ELF header, section headers, program headers,
  notes (namesz/descsz) and the kernel descriptors (the first 64 bytes of each `.rodata`)."""
  import struct
  f = [(0x20, 8), (0x28, 8), (0x36, 2), (0x38, 2), (0x3a, 2), (0x3c, 2), (0x3e, 2)]
  phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
  phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHH", data, 0x38)
  for i in range(phnum):
    o = phoff + 56 * i
    f += [(o + 8, 8), (o + 16, 8), (o + 32, 8), (o + 40, 8)]
  secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
  names = secs[shstrndx][4] if shstrndx < shnum else 0
  for i, s in enumerate(secs):
    o = shoff + 64 * i
    f += [(o + 24, 8), (o + 32, 8), (o + 40, 4), (o + 44, 4), (o + 56, 8)]
    name = data[names + s[0]:data.index(b"\0", names + s[0])] if names else b""
    if s[1] == 7:                                                    # SHT_NOTE
      f += [(s[4], 4), (s[4] + 4, 4), (s[4] + 8, 4)]
    if name == b".rodata":
      f += [(s[4] + k, 4) for k in range(0, 64, 4)]
  return f


def _co_make(arch):
  def make(r: random.Random) -> list:
    """Mutations of a valid code object: [kind, offset, value] (bit flip, truncation, inflated field)."""
    data = base_code_object(arch)
    fields, muts = elf_fields(data), []
    for _ in range(r.randint(1, 3)):
      k = r.randrange(4)
      if k == 0: muts.append(["flip", r.randrange(8 * len(data)), 0])
      elif k == 1: muts.append(["cut", r.randrange(len(data)), 0])
      else:
        off, size = r.choice(fields)
        v = r.choice([0, 1, (1 << 8 * size) - 1, 1 << (8 * size - 1), r.getrandbits(8 * size), len(data),
                      len(data) + r.randint(1, 64), 0x7fffffff])
        muts.append(["set", off, v & ((1 << 8 * size) - 1), size])
    return muts
  return make


def apply_mutations(data: bytes, muts: list) -> bytes:
  b = bytearray(data)
  for m in muts:
    if m[0] == "flip" and m[1] // 8 < len(b): b[m[1] // 8] ^= 1 << (m[1] % 8)
    elif m[0] == "cut": del b[m[1]:]
    elif m[0] == "set" and m[1] + m[3] <= len(b): b[m[1]:m[1] + m[3]] = m[2].to_bytes(m[3], "little")
  return bytes(b)


for _arch in AMD:
  @category(f"codeobj-{_arch}", _co_make(_arch), budget=10.0, chunk=20)
  def _codeobj(muts: list, arch=_arch) -> str:
    import numpy as np
    from gputwin.emu import launch
    from gputwin.isa.codeobj import load_code_object
    co = load_code_object(apply_mutations(base_code_object(arch), muts))
    out = []
    for name in sorted(co.kernels):
      buf = np.zeros(256, np.uint32)
      try:
        launch(co, name, grid=1, block=64, args=[buf], checks=False, max_instructions=4000)
        out.append(f"{name}: ok {digest(buf.tobytes())}")
      except GputwinError as e:
        out.append(f"{name}: {type(e).__name__}: {e}")
    return "\n".join(out)


# ---- ioctls on the mock drivers
class Scratch:
  """User pages at fixed addresses (so outcomes do not depend on where mmap put them): read-write, read-only,
  PROT_NONE and unmapped; symbolic pointer values in generated structs resolve here."""
  BASE = 0x5eed_0000_0000

  def __init__(self):
    from gputwin.abi.hostmem import MAP_ANONYMOUS, MAP_PRIVATE, PAGE_SIZE, PROT_NONE, PROT_READ, PROT_WRITE, host_mmap
    self.maps = []
    self.size = 4 * PAGE_SIZE        # room for the largest ioctl struct (UVM_MAP_EXTERNAL_ALLOCATION: 9264 bytes)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for i, prot in enumerate((PROT_READ | PROT_WRITE, PROT_READ, PROT_NONE)):
      a = host_mmap(self.BASE + i * 2 * self.size, self.size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | 0x100000)    # MAP_FIXED_NOREPLACE
      ctypes.memset(a, 0, self.size)
      libc.mprotect(a, self.size, prot)
      self.maps.append(a)
    self.addr = {"@rw": self.maps[0], "@ro": self.maps[1], "@none": self.maps[2],
                 "@unmapped": self.BASE + 6 * self.size, "@rw_end": self.maps[0] + self.size - 4,
                 "@kernel": 0xffff_8000_0000_0000}

  def close(self):
    from gputwin.abi.hostmem import host_munmap
    for a in self.maps: host_munmap(a, self.size)


_VALUES = [0, 1, 2, 3, 4, 7, 8, 64, 4096, 0x10000, 0x7fffffff, 0xffffffff, 1 << 32, (1 << 63), (1 << 64) - 1,
           "@rw", "@ro", "@none", "@unmapped", "@rw_end", "@kernel", "@h0", "@h1", "@gpu", "@fd", "@va"]


def _ioctl_make(table: Callable[[], dict]):
  def make(r: random.Random) -> list:
    """A sequence of driver calls: ["call", NAME, {field: value}] (fields from the struct, values from a pool of
    boundary numbers, handles and symbolic user pointers), ["raw", request, argument kind, bytes] (random request
    numbers, garbage or short buffers), ["mmap", file, offset, length, prot], ["close", file]."""
    names = table()
    ops = []
    for _ in range(r.randint(1, 12)):
      k = r.randrange(10)
      if k < 6:
        name = r.choice(sorted(names))
        T = names[name][1]
        fl = {f[0]: (r.choice(_VALUES) if r.random() < 0.7 else r.getrandbits(r.choice((8, 32, 64))))
              for f in getattr(T, "_fields_", []) if r.random() < 0.5 and not hasattr(f[1], "_length_")}
        fl |= {f[0]: r.choice([0, 1, 10]) for f in getattr(T, "_fields_", []) if "timeout" in f[0]}  # blocking calls
        ops.append(["call", name, fl, r.randrange(3)])
      elif k < 8:
        req = r.choice([r.getrandbits(32), names[r.choice(sorted(names))][0] ^ (1 << r.randrange(32))])
        ops.append(["raw", req, r.choice(["short", "garbage", "none", "@ro", "@none", "@unmapped", "int"]),
                    bytes(r.getrandbits(8) for _ in range(r.choice([0, 1, 3, 8, 64, 200])))])
      elif k == 8:
        ops.append(["mmap", r.randrange(3), r.choice([0, 4096, r.getrandbits(64) & ~0xfff, r.getrandbits(20) << 12]),
                    r.choice([0, 1, 4096, 1 << 21, 1 << 40]), r.choice([0, 1, 3])])
      else:
        ops.append(["close", r.randrange(3)])
    return ops
  return make


def run_ioctls(ops: list, machine, paths: list[str], table: dict, setup: Callable | None = None) -> str:
  """Run `ops` on a fresh mock `machine`: the errno or result digest of each call."""
  from gputwin.abi.hostmem import MAP_SHARED
  sc = Scratch()
  log = []
  try:
    fds = []
    fds += [machine.open(p) for p in paths]
    syms = {"@fd": fds[0], "@h0": 0, "@h1": 0, "@gpu": 0, "@va": 0x1_0000_0000}
    if setup: syms |= setup(machine, fds)
    val = lambda v: sc.addr.get(v, syms.get(v, 0)) if isinstance(v, str) else v  # noqa: E731
    for op in ops:
      try:
        if op[0] == "call":
          req, T = table[op[1]]
          a = T()
          for f, v in op[2].items():
            ft = dict(a._fields_)[f]
            try: setattr(a, f, val(v) & ((1 << 8 * ctypes.sizeof(ft)) - 1))
            except TypeError: pass     # a nested struct or array field: left zero
          arg = a if op[3] == 0 else (bytearray(bytes(a)[:max(0, ctypes.sizeof(a) - 1)]) if op[3] == 1 else
                                      (ctypes.memmove(sc.addr["@rw"], bytes(a), ctypes.sizeof(a)) and sc.addr["@rw"]))
          machine.ioctl(fds[0], req, arg)
          clock = "CLOCK" in op[1] or "TIMESTAMP" in op[1]     # outputs that are time
          log.append(f"{op[1]} ok {digest(bytes(a)) if op[3] == 0 and not clock else ''}")
        elif op[0] == "raw":
          kind, data = op[2], op[3]
          arg = {"short": bytearray(data[:2]), "garbage": bytearray(data), "none": None, "int": 12345}.get(kind)
          if kind.startswith("@"): arg = sc.addr[kind]
          machine.ioctl(fds[0], op[1], arg)
          log.append(f"raw {op[1]:#x} ok")
        elif op[0] == "mmap":
          fd = fds[op[1] % len(fds)]
          a = machine.mmap(fd, op[2], op[3], op[4], MAP_SHARED)
          log.append("mmap ok")
          machine.munmap(a, op[3])
        elif op[0] == "close":
          machine.close(fds[op[1] % len(fds)])
          log.append("close ok")
      except OSError as e:
        if e.errno not in _ERRNOS: raise
        log.append(E.errorcode.get(e.errno, str(e.errno)))
    return "; ".join(log)
  finally:
    try:
      for fd in fds:
        try: machine.close(fd)
        except OSError: pass
      if hasattr(machine, "shutdown"): machine.shutdown()
    finally: sc.close()


def _kfd_table():
  from gputwin.abi import kfd
  return {n: (kfd.IOCTL_NUMBERS[n], kfd.IOCTL_BY_NR[kfd.IOC_NR(kfd.IOCTL_NUMBERS[n])][3]) for n in kfd.IOCTL_NUMBERS}


def _kfd_setup(k, fds):
  from gputwin.abi import kfd
  gpu = k.gpus[0]
  render = k.open(f"/dev/dri/renderD{gpu.render_minor}")
  k.ioctl(fds[0], kfd.IOCTL_NUMBERS["ACQUIRE_VM"], kfd.kfd_ioctl_acquire_vm_args(drm_fd=render, gpu_id=gpu.gpu_id))
  hs = []
  for va in (0x1_0000_0000, 0x1_0010_0000):
    a = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=0x10000, gpu_id=gpu.gpu_id,
                                               flags=kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT |
                                               kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
    k.ioctl(fds[0], kfd.IOCTL_NUMBERS["ALLOC_MEMORY_OF_GPU"], a)
    hs.append(a.handle)
  return {"@gpu": gpu.gpu_id, "@h0": hs[0], "@h1": hs[1]}


@category("ioctl-kfd", _ioctl_make(_kfd_table), budget=5.0, chunk=50)
def _ioctl_kfd(ops: list) -> str:
  from gputwin.mock.kfd.driver import MockKernel
  return run_ioctls(ops, MockKernel("gfx1100", sync=True), ["/dev/kfd"], _kfd_table(), _kfd_setup)


def _nv_table():
  from gputwin.abi import nv
  from gputwin.mock.nv.driver import MockNV
  t = {f"ESC_{nr:#x}": (nv.nv_iowr(nr, row[1][0]), row[1][0]) for nr, row in MockNV._ESCAPES.items()}
  return t | {f"UVM_{name}": (req, T) for req, (name, T) in nv.UVM_IOCTLS.items()}


@category("ioctl-nv", _ioctl_make(_nv_table), budget=5.0, chunk=50)
def _ioctl_nv(ops: list) -> str:
  from gputwin.mock.nv.driver import MockNV
  return run_ioctls(ops, MockNV("sm_90", sync=True), ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"],
                    _nv_table())


def _kgsl_table():
  from gputwin.abi import kgsl
  from gputwin.abi.ioc import IOC_NR
  return {n: (kgsl.IOCTL_NUMBERS[n], kgsl.IOCTL_BY_NR[IOC_NR(kgsl.IOCTL_NUMBERS[n])][3]) for n in kgsl.IOCTL_NUMBERS}


@category("ioctl-kgsl", _ioctl_make(_kgsl_table), budget=5.0, chunk=50)
def _ioctl_kgsl(ops: list) -> str:
  from gputwin.mock.kgsl.driver import MockKGSL
  return run_ioctls(ops, MockKGSL("a630", sync=True), ["/dev/kgsl-3d0"], _kgsl_table())


# ---- command streams through the runtime on mock devices: PM4, SDMA, GPFIFO pushbuffers, KGSL IBs
def mutate_words(r: random.Random, words: list[int], n: int | None = None) -> list[int]:
  w = list(words)
  for _ in range(n or r.randint(1, 4)):
    k = r.randrange(6)
    if k == 0 and w: w[r.randrange(len(w))] ^= 1 << r.randrange(32)
    elif k == 1: w.insert(r.randrange(len(w) + 1), r.getrandbits(32))
    elif k == 2 and w: del w[r.randrange(len(w)):]
    elif k == 3 and w: w[r.randrange(len(w))] = r.choice([0, 1, 0xffffffff, 0x7fffffff, 0x80000000, 0x3fff])
    elif k == 4 and w:
      a = r.randrange(len(w))
      w[a:a] = w[a:a + r.randint(1, 8)]
    else: w = w[:r.randrange(len(w) + 1)] + [r.getrandbits(32) for _ in range(r.randint(1, 8))]
  return w


# Symbolic addresses in generated streams: BUF (a 64 KiB buffer of the device), CODE (a trivial kernel's image).
BUF_VA = 0xB0F0_0000


def _stream(valid: Callable[[random.Random], list[int]]):
  def make(r: random.Random) -> list[int]:
    k = r.randrange(4)
    if k == 0: return [r.getrandbits(32) for _ in range(r.randint(1, 40))]
    base = [w for _ in range(r.randint(1, 4)) for w in valid(r)]
    return base if k == 1 else mutate_words(r, base)
  return make


BUF_HI = 0xB0F0_CAFE     # the high dword of a BUF address (inside BUF_VA's low-dword range: matched first)


def _relocate(words: list[int], va: int) -> list[int]:
  """Generated streams address BUF_VA (low dword) / BUF_HI (high): move them to the device buffer at `va`."""
  return [va >> 32 if w == BUF_HI else (w - BUF_VA + (va & 0xffffffff)) & 0xffffffff
          if BUF_VA <= w < BUF_VA + 0x10000 else w for w in words]


def case_clock(dev) -> None:
  """GPU time for one case, a count of reads (a stream may write timestamps into the buffer whose digest is the
  outcome; wall time there would make every such case differ run to run), set as the mock machine's `clock`
  (MockKernel / MockNV): the AMD CP/SDMA clocks and the NVIDIA PTIMER and semaphore timestamps of a synchronous
  machine read it. Each case has a fresh machine, so nothing is restored."""
  reads = itertools.count(1)
  dev.k.clock = lambda: (1 << 40) + 1000 * next(reads)


def _pm4_valid(r: random.Random) -> list[int]:
  from gputwin.abi import pm4 as P
  va = BUF_VA + 4 * r.randrange(1024)
  hi = BUF_HI
  k = r.randrange(6)
  lohi = lambda v: (v, hi)  # noqa: E731
  if k == 0: return P.pkt(P.WRITE_DATA, P.WRITE_DATA_DST_MEM, *lohi(va), *[r.getrandbits(32) for _ in range(3)])
  if k == 1: return P.pkt(P.WAIT_REG_MEM, *P.wait_reg_mem(0, 0, func=r.choice([0, 3, 5]))[1:2], *lohi(va),
                          *P.wait_reg_mem(0, 0)[4:])
  if k == 2: return P.nop(r.randint(1, 5))
  if k == 3: return P.acquire_mem() + P.event_write(r.randrange(64))
  if k == 4: return P.set_sh_reg(r.choice(sorted(P.REG)), *[r.getrandbits(32) for _ in range(r.randint(1, 3))])
  return P.set_sh_reg("COMPUTE_NUM_THREAD_X", r.choice([1, 32, 64, 1024]), 1, 1) + \
    P.dispatch_direct(r.choice([1, 2, 0]), 1, 1, P.DISPATCH_COMPUTE_SHADER_EN | P.DISPATCH_CS_W32_EN)


def _sdma_valid(r: random.Random) -> list[int]:
  from gputwin.abi import pm4 as P
  a, b, hi = BUF_VA + 4 * r.randrange(512), BUF_VA + 0x8000 + 4 * r.randrange(512), BUF_HI
  va = lambda x: x | hi << 32  # noqa: E731
  return r.choice([lambda: P.sdma_copy(va(a), va(b), 4 * r.randint(1, 64)), lambda: P.sdma_fill(va(a), 7, 64),
                   lambda: P.sdma_fence(va(a), r.getrandbits(32)), lambda: P.sdma_timestamp(va(a)),
                   lambda: P.sdma_poll(va(a), 0, func=3, retry=1)])()


def _device(name: str, sync: bool = False):
  """A runtime Device on a fresh mock machine (cases must not share GPU state), with short GPU watchdogs so a
  runaway stream ends in a queue error. sync: the machine runs no GPU thread (the mock's synchronous mode, AMD and
  NVIDIA): `_drive` runs the GPU in this thread until it has nothing left to do."""
  import gputwin.runtime
  from gputwin.runtime import kernel as K
  K.fresh_mock(name, sync)  # (sync: the runtime's machine for `name` until the next forget, run by _drive)
  dev = gputwin.runtime.open(name)
  hw = getattr(dev.k, "hw", None)
  if hw is not None and hasattr(hw, "lockup_timeout"): hw.lockup_timeout, hw.wave_budget = 1.0, 20000
  return dev


def _drive(dev, q) -> str | None:
  """Run a synchronous mock GPU until it is idle, stalled or faulted (nothing else can run it, so what it has not
  done by then it never does). None when the queue completed or faulted (the runtime's wait tells which), else why
  the queue stalls."""
  if hasattr(dev.k, "nvgpu"):
    while dev.k.nvgpu.poll(): pass
    if q.signal.value >= q.timeline: return None
    q.check()                                         # QueueFault when the GPU stopped the channel
    return f"stalled: channel {q.channel:#x} at timeline {q.signal.value} of {q.timeline}"
  dev.k.poll_doorbells()                              # on_doorbell: the CP runs the ring and retries blocked queues
  mq = next(m for m in dev.k.queues() if m.queue_id == q.queue_id)
  if q.signal.value >= q.timeline or mq.error is not None: return None
  rptr, wptr = (dev.k.address_space(mq.gpu.gpu_id).read_u64(a) for a in (mq.rptr_va, mq.wptr_va))
  return f"stalled: {q.kind} queue at timeline {q.signal.value} of {q.timeline}, rptr {rptr:#x}, wptr {wptr:#x}"


def _submit(dev, q, words: list[int], buf, sync: bool = False) -> str:
  from gputwin.errors import GPUFault
  words = _relocate(words, buf.va)
  try:
    v = q.submit(words, "fuzz")
    if sync and (stall := _drive(dev, q)) is not None:
      dev.synchronize = lambda timeout=0: None      # close: the stalled queue never completes, do not wait for it
      return stall
    q.wait(v, timeout=5.0)   # past the GPU watchdogs (AMD 1 s, Adreno 2 s): they fault first
    return "ok " + digest(bytes(buf.view()))
  except GPUFault as e:
    return f"{type(e).__name__}: " + str(e).replace(f"{buf.va:#x}", "BUF")
  finally:
    dev.close()


def _gpfifo_valid(r: random.Random) -> list[int]:
  from gputwin.abi import nvpush as NP
  HC, CC = NP.HOPPER_CHANNEL_GPFIFO_A, NP.HOPPER_COMPUTE_A
  H, C = NP.nvclass(HC), NP.nvclass(CC)
  a, hi = BUF_VA + 16 * r.randrange(256), BUF_HI
  k = r.randrange(3)
  if k == 0:
    return NP.pb_method(0, "SEM_ADDR_LO", a, hi, r.getrandbits(32), 0,
                        H.pack("SEM_EXECUTE", OPERATION="RELEASE", RELEASE_TIMESTAMP=r.choice(["EN", "DIS"])), cls=HC)
  if k == 1:
    return (NP.pb_method(1, "SET_OBJECT", CC, cls=CC) + NP.pb_method(1, "LINE_LENGTH_IN", 16, 1, hi, a, cls=CC) +
            NP.pb_method(1, "LAUNCH_DMA", C.pack("LAUNCH_DMA", DST_MEMORY_LAYOUT="PITCH"), cls=CC) +
            NP.pb_method(1, "LOAD_INLINE_DATA", 1, 2, 3, 4, cls=CC, sec_op="NON_INC_METHOD"))
  return NP.pb_immd(0, "SEM_PAYLOAD_LO", r.randrange(8), cls=HC)


def _kgsl_valid(r: random.Random) -> list[int]:
  from gputwin.abi import adreno as A
  a, g = BUF_VA + 4 * r.randrange(1024), "a630"
  va = a | BUF_HI << 32
  return r.choice([lambda: A.cp_mem_write(g, va, *[r.getrandbits(32) for _ in range(r.randint(1, 4))]),
                   lambda: A.cp_nop(g, r.randrange(4)), lambda: A.cp_wait_for_idle(g),
                   lambda: A.cp_wait_reg_mem(g, va, 0, function=r.choice(["WRITE_GE", "WRITE_EQ"])),
                   lambda: A.cp_event_write(g, "CACHE_FLUSH_TS", va, r.getrandbits(32))])()


class _QcomQueue:
  """qcom.Device submits and waits itself; the same shape as an hcq/nv queue."""
  def __init__(self, dev): self.dev = dev
  def submit(self, words, what): return self.dev.submit(words, what)
  def wait(self, v, timeout): return self.dev.wait(v, timeout=timeout)


# category -> (mock device, its queue: a Device attribute, or None for qcom's own submit/wait, valid packets). AMD and
# NVIDIA machines run synchronously (`_drive`: a stalled stream is known at once, not after a wait timeout); kgsl's CP
# keeps its thread (its hang detection is the thing under test).
CMD = {"cmd-pm4": ("mock:gfx1100", "compute", _pm4_valid), "cmd-sdma": ("mock:gfx1100", "sdma", _sdma_valid),
       "cmd-gpfifo": ("mock:sm_90", "compute", _gpfifo_valid), "cmd-kgsl": ("mock:a630", None, _kgsl_valid)}
for _name, (_dev, _queue, _valid) in CMD.items():
  @category(_name, _stream(_valid), budget=30.0, chunk=20)
  def _cmd(words: list[int], device=_dev, queue=_queue) -> str:
    if queue is None: return _submit(dev := _device(device), _QcomQueue(dev), words, dev.alloc(0x10000, host=True))
    dev = _device(device, sync=True)
    case_clock(dev)
    return _submit(dev, getattr(dev, queue), words, dev.alloc(0x10000, host=True), sync=True)


for _c in CATEGORIES.values():
  if _c.name.startswith("ioctl-"): _c.errnos = _ERRNOS


# ---- the harness's own checks (tests/verify/test_reliability_suite.py): an input holding 13 crashes the worker, 7
# hangs it, 5 raises a foreign exception, 3 answers differently each time
@category("selftest", lambda r: [r.randrange(100) for _ in range(8)], budget=0.5, warmup=3.0, chunk=25)
def _selftest(xs: list) -> str:
  if 13 in xs: os.kill(os.getpid(), 11)
  if 7 in xs: time.sleep(3600)
  if 5 in xs: raise KeyError(5)
  if 3 in xs: return str(time.perf_counter_ns())
  if 1 in xs: raise GputwinError("one")
  return str(sum(xs))


if __name__ == "__main__":
  ap = argparse.ArgumentParser(prog="python -m gputwin.verify.reliability")
  ap.add_argument("--worker", action="store_true", help="(internal) serve requests on stdin")
  ap.add_argument("--replay", help="rerun a reproducer JSON file")
  a = ap.parse_args()
  if a.worker: sys.exit(_worker_main())
  if a.replay:
    k, t = replay(a.replay)
    print(f"{k}: {t}")
    sys.exit(0 if k in ("ok", "error") else 1)
