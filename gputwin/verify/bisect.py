"""`gputwin bisect`: narrow a wrong result down to its cause.

  passes  binary search on opt_bisect_limit: the outputs of limit N are compared with limit 0 (no pass ran), so the
          first N that differs is the first bad pass application; the report shows the IR before and after it.
          --good-arch x86_64|aarch64: compared with the unoptimised kernel on a host CPU under unicorn instead.
  builds  two builds of one kernel (code objects, or a .cl under two clang flag sets): the first executed
          instruction whose result differs (diverge.first_trace_diff), plus the first differing output element.
  git     `git bisect run CMD` between --good and --bad after checking both ends, so a range without a culprit
          is reported instead of blamed on its first commit.
Each prints a short report that ends with the command line that reproduces it."""
from __future__ import annotations

import argparse
import difflib
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gputwin.errors import GputwinError
from gputwin.verify.command import add_launch_args, guarded, launch_args


# ------------------------------------------------------------------------------------------ passes
@dataclass
class PassVerdict:
  limit: int | None  # the first bad application (None: no bad one)
  total: int
  name: str = ""
  before: str = ""
  after: str = ""
  probes: list = None  # [(limit, good)]
  why: str = ""

  def report(self, kernel: str) -> str:
    if self.limit == 0:
      return f"no pass to blame on @{kernel}: {self.why}"
    if self.limit is None:
      return f"no miscompile: all {self.total} pass applications on @{kernel} give the unoptimised outputs"
    diff = "\n".join(difflib.unified_diff(self.before.splitlines(), self.after.splitlines(),
                                          f"IR before ({self.limit}) {self.name}", f"IR after ({self.limit}) "
                                          f"{self.name}", lineterm="", n=2))
    return (f"first bad pass application: ({self.limit}) {self.name} on @{kernel} "
            f"(opt-bisect-limit {self.limit - 1} good, {self.limit} bad: {self.why}); "
            f"probes {', '.join(f'{n}{chr(10003) if g else chr(10007)}' for n, g in self.probes)}\n{diff}")


def _close(x: np.ndarray, y: np.ndarray, ulps: int) -> bool:
  if x.shape != y.shape: return False
  if ulps and x.dtype.kind == "f":
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    xi, yi = x.view(bits).astype(np.int64), y.view(bits).astype(np.int64)
    xi, yi = np.where(xi < 0, np.iinfo(bits).min - xi, xi), np.where(yi < 0, np.iinfo(bits).min - yi, yi)
    return bool(np.all((np.abs(xi - yi) <= ulps) | (np.isnan(x) & np.isnan(y))))
  return x.tobytes() == y.tobytes()


def bisect_passes(kernel, arch: str, *, args, grid, block, outputs=None, backend: str | None = None, ulps: int = 0,
                  pipeline=None, passes=None, log=None, good_arch: str | None = None) -> PassVerdict:
  """`kernel`: a @kernel function, ir.Kernel or IR text. `args` the launch arguments (arrays copied per probe);
  `outputs`: indices of args to compare (default: every array). `pipeline`/`passes` as passes.optimize takes them
  (to bisect a pipeline with an extra pass). A probe that fails to compile or faults counts as bad. `good_arch`
  (e.g. x86_64, run under unicorn): probes are compared with the unoptimised kernel on that target; when `arch`'s
  own unoptimised build already differs, no pass is to blame (limit 0)."""
  from gputwin.compiler import compile as compile_kernel, ir, to_ir
  from gputwin.compiler import passes as P
  from gputwin.emu import launch
  k0 = to_ir(kernel)
  total = len(P.applications(pipeline))
  outputs = outputs if outputs is not None else [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

  def opt(limit):
    return P.optimize(k0, opt_bisect_limit=limit, pipeline=pipeline, passes=passes)

  def result(limit, target=arch):
    a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    try:
      c = compile_kernel(opt(limit), target, backend=backend if target == arch else None, optimize=False)
      launch(c.code_object, c.name, grid=grid, block=block, args=a, arch=c.arch)
    except GputwinError as e:
      return f"{type(e).__name__}: {e}"
    return [a[i] for i in outputs]

  base = result(0, good_arch or arch)
  if isinstance(base, str):
    raise GputwinError(f"@{k0.name} fails with no passes at all{f' on {good_arch}' if good_arch else ''}, nothing "
                       f"to bisect against: {base}")
  probes, why = [], {}

  def good(limit):
    r = result(limit)
    ok = not isinstance(r, str) and all(_close(x, y, ulps) for x, y in zip(base, r))
    if not ok:
      why[limit] = r if isinstance(r, str) else next(
        f"output {outputs[j]} differs at {np.argwhere(x != y)[0].tolist() if x.shape == y.shape else 'shape'}"
        for j, (x, y) in enumerate(zip(base, r)) if not _close(x, y, ulps))
    probes.append((limit, ok))
    if log: log(f"opt-bisect-limit {limit}: {'good' if ok else 'bad'}")
    return ok

  if good(total):
    return PassVerdict(None, total, probes=probes)
  if good_arch and not good(0):
    return PassVerdict(0, total, probes=probes, why=f"without any pass {arch} already differs from {good_arch} "
                       f"({why[0]}): {arch}'s backend or its emulator")
  lo, hi = 0, total
  while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if good(mid) else (lo, mid)
  name = P.applications(pipeline)[hi - 1][1]
  return PassVerdict(hi, total, name, ir.print_kernel(opt(hi - 1)), ir.print_kernel(opt(hi)), probes, why[hi])


# ------------------------------------------------------------------------------------------ builds
def bisect_builds(a, b, *, kernel=None, grid, block, args, arch=None, arch_b=None, mode="values"):
  """Run both builds on the same named args; returns (run A, run B, first output diff, first trace diff or None)."""
  from gputwin.verify import diverge, runner
  ra = runner.run(a, kernel, grid=grid, block=block, args=args, arch=arch, label="A")
  rb = runner.run(b, ra.kernel, grid=grid, block=block, args=args, arch=arch_b or arch, label="B")
  out = diverge.first_output_diff(ra, rb)
  # legitimately different code computes different intermediates: look for a culprit only when the results differ
  tr = diverge.first_trace_diff(ra, rb, mode) if out or type(ra.error) is not type(rb.error) else None
  return ra, rb, out, tr


# ------------------------------------------------------------------------------------------ git
@dataclass
class GitVerdict:
  culprit: str | None
  subject: str = ""
  message: str = ""
  log: str = ""


def _git(repo, *args, check=True) -> subprocess.CompletedProcess:
  r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
  if check and r.returncode:
    raise GputwinError(f"git {' '.join(args)} failed in {repo}: {r.stderr.strip() or r.stdout.strip()}")
  return r


def bisect_git(repo, good: str, bad: str, cmd: list[str], *, timeout: float | None = None) -> GitVerdict:
  """First commit in good..bad where `cmd` (run in the repo root; exit 0 = good, 125 = skip) starts failing.
  Both ends are checked first; the work tree is restored to where it was whatever happens."""
  from gputwin.verify.runner import need
  need("git")
  if not cmd:
    raise GputwinError("bisect git: give the check command after --")
  repo = Path(_git(repo, "rev-parse", "--show-toplevel").stdout.strip())
  if _git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip():
    raise GputwinError(f"bisect git: {repo} has uncommitted changes to tracked files; commit or stash them first")
  shas = {}
  for what, rev in (("good", good), ("bad", bad)):
    r = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if r.returncode:
      raise GputwinError(f"bisect git: --{what} {rev!r} is not a commit in {repo}")
    shas[what] = r.stdout.strip()
  if _git(repo, "merge-base", "--is-ancestor", shas["good"], shas["bad"], check=False).returncode:
    raise GputwinError(f"bisect git: --good {good} is not an ancestor of --bad {bad}")
  head = _git(repo, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip() or \
    _git(repo, "rev-parse", "HEAD").stdout.strip()

  def check_at(sha):
    _git(repo, "checkout", "-q", "--detach", sha)
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout).returncode

  try:
    if shas["good"] == shas["bad"]:
      return GitVerdict(None, message=f"no culprit: --good and --bad are the same commit {shas['bad'][:12]}")
    rc_bad = check_at(shas["bad"])
    if rc_bad == 0:
      return GitVerdict(None, message=f"no culprit: the check passes at --bad {bad} ({shas['bad'][:12]})")
    rc_good = check_at(shas["good"])
    if rc_good != 0:
      return GitVerdict(None, message=f"no culprit in the range: the check already fails at --good {good} "
                        f"({shas['good'][:12]}, exit {rc_good})")
    _git(repo, "bisect", "start", shas["bad"], shas["good"])
    r = subprocess.run(["git", "-C", str(repo), "bisect", "run", *cmd], capture_output=True, text=True, timeout=timeout)
    log = _git(repo, "bisect", "log", check=False).stdout
    line = next((ln for ln in r.stdout.splitlines() if ln.endswith("is the first bad commit")), None)
    if line is None:
      return GitVerdict(None, message=f"git bisect run found no single culprit (exit {r.returncode}):\n"
                        f"{(r.stdout + r.stderr).strip()[-1500:]}", log=log)
    sha = line.split()[0]
    subject = _git(repo, "log", "-1", "--format=%h %s (%an, %ad)", "--date=short", sha).stdout.strip()
    return GitVerdict(sha, subject, f"first bad commit: {subject}", log)
  finally:
    _git(repo, "bisect", "reset", "-q", check=False)
    _git(repo, "checkout", "-q", head, check=False)


# ------------------------------------------------------------------------------------------ command line
def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  cmd = []
  if "--" in argv:
    i = argv.index("--")
    argv, cmd = argv[:i], argv[i + 1:]
  p = argparse.ArgumentParser(prog="gputwin bisect", description=__doc__.split("\n\n")[0])
  sub = p.add_subparsers(dest="what", required=True)
  ps = sub.add_parser("passes", help="first bad pass application (opt-bisect-limit)")
  ps.add_argument("file", nargs="?", help="Python file with @kernel functions or .ir (inputs from --arg)")
  ps.add_argument("--example", help="a gputwin.compiler.examples kernel (its own inputs)")
  ps.add_argument("--arch", required=True)
  ps.add_argument("--backend", default=None, help="default: the target's (direct for GPUs, llvm for host CPUs)")
  ps.add_argument("--ulps", type=int, default=0, help="float tolerance against the unoptimised build")
  ps.add_argument("--good-arch", help="the good side: the unoptimised kernel on this target (x86_64, aarch64: "
                  "under unicorn) instead of --arch's own")
  add_launch_args(ps)
  bs = sub.add_parser("builds", help="first executed instruction whose result differs between two builds")
  bs.add_argument("a", help=".co/.o/.s, or .cl")
  bs.add_argument("b", nargs="?", help="second build (default: A again, with --cflags-b)")
  bs.add_argument("--arch")
  bs.add_argument("--cflags-a", default="-O2", help="clang-22 flags for a .cl A")
  bs.add_argument("--cflags-b", default="-O2", help="clang-22 flags for a .cl B")
  bs.add_argument("--mode", choices=("lockstep", "values"), default="values")
  add_launch_args(bs)
  gs = sub.add_parser("git", help="git bisect run with CMD after --")
  gs.add_argument("--good", required=True)
  gs.add_argument("--bad", required=True)
  gs.add_argument("--repo", default=".")
  a = p.parse_args(argv)
  a.again = "gputwin bisect " + shlex.join(argv + (["--", *cmd] if cmd else []))
  return guarded("gputwin bisect", lambda: {"passes": _passes, "builds": _builds, "git": _gitcmd}[a.what](a, cmd))


def _passes(a, _) -> int:
  from gputwin.compiler import examples
  if a.example:
    if a.example not in examples.EXAMPLES:
      raise GputwinError(f"no example {a.example!r} (known: {', '.join(examples.EXAMPLES)})")
    ex = examples.EXAMPLES[a.example]
    args, grid, block = ex.inputs(np.random.default_rng(0))
    k, outs, ulps = ex.kernel, list(ex.outputs), a.ulps
  elif a.file:
    from gputwin.compiler.tool import kernels
    ks = [k for k in kernels(Path(a.file)) if a.kernel is None or getattr(k, "name", None) == a.kernel
          or getattr(getattr(k, "ir", k), "name", None) == a.kernel]
    if len(ks) != 1:
      raise GputwinError(f"{a.file}: {len(ks)} kernels match; pick one with --kernel")
    named, grid, block = launch_args(a)
    k, args, outs, ulps = ks[0], [v for _, v in named], None, a.ulps
  else:
    raise GputwinError("bisect passes: give a FILE or --example NAME")
  v = bisect_passes(k, a.arch, args=args, grid=grid, block=block, outputs=outs, backend=a.backend, ulps=ulps,
                    good_arch=a.good_arch)
  name = getattr(getattr(k, "ir", k), "name", "kernel")
  from rich.console import Console
  from rich.syntax import Syntax
  head, _, diff = v.report(name).partition("\n")
  con = Console(highlight=False, soft_wrap=True)
  con.print(head, markup=False)
  if diff:
    con.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
  if v.limit:
    print(f"reproduce: {a.again}\n  then: gputwin compile {a.file or 'gputwin/compiler/examples.py --kernel ' + name} "
          f"--arch {a.arch}{f' --backend {a.backend}' if a.backend else ''} --opt-bisect-limit {v.limit} "
          "--print-after-all")
  return 0 if v.limit is None else 1


def _builds(a, _) -> int:
  from gputwin.verify import diverge, runner
  args, grid, block = launch_args(a)
  bsrc = a.b or a.a

  def build(path, flags):
    if not path.endswith(".cl"):
      return path
    if not a.arch:
      raise GputwinError(f"{path}: an OpenCL source needs --arch")
    return runner.clang_cl(Path(path).read_text(), a.arch, flags=tuple(shlex.split(flags)))
  A, B = build(a.a, a.cflags_a), build(bsrc, a.cflags_b)
  ra, rb, out, tr = bisect_builds(A, B, kernel=a.kernel, grid=grid, block=block, args=args, arch=a.arch, mode=a.mode)
  ra.label, rb.label = a.a, bsrc
  diverge.render(ra, rb, out, tr)
  print(f"reproduce: {a.again}")
  return 1 if out or tr else 0


def _gitcmd(a, cmd) -> int:
  v = bisect_git(a.repo, a.good, a.bad, cmd)
  print(v.message)
  if v.culprit:
    print(f"reproduce: {a.again}")
  return 1 if v.culprit else 0
