"""First divergence between two Runs: the first differing output element, and from the traces the first executed
instruction (earliest step of any wave; ties -> lowest wave) whose text or written value differs, named by
workgroup, wave, lane, register and both values. Rendered side by side with rich.

Two strategies over each wave's records: `lockstep` (the i-th records of both sides; the builds run the same
instruction stream, e.g. a one-instruction change) and `values` (different code for the same kernel: the first
record of one side that writes a lane vector the other side never computed in that wave — a miscompile's first
wrong value; moved or renamed registers do not count)."""
from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from gputwin.verify.runner import Run


@dataclass
class OutputDiff:
  name: str
  index: tuple
  a: object
  b: object
  count: int  # differing elements in this buffer


@dataclass
class TraceDiff:
  kind: str  # "instruction", "value", "length" (lockstep); "new-value-a", "new-value-b" (values mode)
  wave: int
  step: int
  workgroup: int
  wave_in_group: int
  a: tuple | None  # the trace record (wave, pc, inst, wrote) or None past the end
  b: tuple | None
  reg: str = ""
  lane: int | None = None
  va: int | None = None
  vb: int | None = None
  context: list = field(default_factory=list)  # the records just before, equal on both sides

  def summary(self) -> str:
    where = f"workgroup {self.workgroup} wave {self.wave_in_group} (global wave {self.wave}) step {self.step}"
    if self.kind == "length":
      (ends, goes), rec = ("B", "A") if self.a else ("A", "B"), self.a or self.b
      return f"{where}: trace of {ends} ends; {goes} goes on with `{rec[2]}` at {rec[1]:#x}"
    lane = f" lane {self.lane}" if self.lane is not None else ""
    hx = lambda v: "-" if v is None else f"{v:#x}"
    vals = f": {self.reg}{lane} A={hx(self.va)} B={hx(self.vb)}" if self.reg else ""
    if self.kind == "instruction":
      return f"{where}: instruction differs, A `{self.a[2]}` vs B `{self.b[2]}`{vals}"
    if self.kind == "value":
      return f"{where}: `{self.a[2]}` at {self.a[1]:#x} wrote a different value{vals}"
    side, rec = ("B", self.b) if self.kind == "new-value-b" else ("A", self.a)
    return f"{where}: {side} `{rec[2]}` at {rec[1]:#x} computed a value the other build never did{vals}"


def parse_wrote(ch: str, L: int) -> dict[tuple[str, int | None], int]:
  """'v5=a,b,...' (dword-major, L lanes per VGPR dword) or 's4=x,y' -> {(register, lane): value}."""
  if not ch:
    return {}
  head, _, vals = ch.partition("=")
  f, base, vs = head[0], int(head[1:]), [int(x, 16) for x in vals.split(",")]
  if f in "va":
    return {(f"{f}{base + p // L}", p % L): v for p, v in enumerate(vs)}
  return {(f"{f}{base + p}", None): v for p, v in enumerate(vs)}


def first_output_diff(a: Run, b: Run) -> OutputDiff | None:
  """Bitwise comparison (NaN payloads count, -0.0 != 0.0): the first buffer in argument order with a difference."""
  for (name, x), (_, y) in zip(a.outputs, b.outputs):
    if x.shape != y.shape or x.dtype != y.dtype:
      return OutputDiff(name, (), f"{x.dtype}{list(x.shape)}", f"{y.dtype}{list(y.shape)}", -1)
    bits = f"u{x.dtype.itemsize}" if x.dtype.itemsize in (1, 2, 4, 8) else None
    ne = (x.view(bits) != y.view(bits)) if bits else (x != y)
    if ne.any():
      idx = tuple(int(i) for i in np.argwhere(ne)[0])
      return OutputDiff(name, idx, x[idx].item(), y[idx].item(), int(ne.sum()))
  return None


def _by_wave(trace) -> dict[int, list]:
  d = defaultdict(list)
  for r in trace or ():
    d[r[0]].append(r)
  return d


def _reg_diff(ra, rb, L):
  va, vb = parse_wrote(ra[3], L), parse_wrote(rb[3], L)
  for k in list(va) + [k for k in vb if k not in va]:
    if va.get(k) != vb.get(k):
      return k, va.get(k), vb.get(k)
  return None


def first_trace_diff(a: Run, b: Run, mode: str = "lockstep") -> TraceDiff | None:
  if a.trace is None or b.trace is None:
    return None
  A, B, L, nw = _by_wave(a.trace), _by_wave(b.trace), a.wave_size, a.waves_per_group
  best = None
  for w in sorted(A.keys() | B.keys()):
    ta, tb = A.get(w, []), B.get(w, [])
    limit = best.step if best else None
    hit = _lockstep(w, ta, tb, L, limit) if mode == "lockstep" else _values(w, ta, tb, L, limit)
    if hit and (best is None or hit.step < best.step):
      best = hit
  if best:
    best.workgroup, best.wave_in_group = best.wave // nw, best.wave % nw
  return best


def _lockstep(w, ta, tb, L, limit):
  n = min(len(ta), len(tb)) if limit is None else min(len(ta), len(tb), limit)
  for i in range(n):
    ra, rb = ta[i], tb[i]
    if ra[2] != rb[2] or ra[3] != rb[3]:
      same = next(iter(parse_wrote(ra[3], L).items()), None)  # no differing value: show the first written one
      (reg, lane), va, vb = _reg_diff(ra, rb, L) or (same and (same[0], same[1], parse_wrote(rb[3], L).get(same[0]))
                                                     or (("", None), None, None))
      return TraceDiff("instruction" if ra[2] != rb[2] else "value", w, i, 0, 0, ra, rb, reg, lane, va, vb,
                       ta[max(0, i - 3):i])
  if len(ta) != len(tb) and (limit is None or n < limit):
    return TraceDiff("length", w, n, 0, 0, ta[n] if n < len(ta) else None, tb[n] if n < len(tb) else None,
                     context=ta[max(0, n - 3):n])
  return None


def _lanes(r, L) -> dict:
  """One record -> {lane or None: value tuple over the written dwords}: the per-lane result, register-independent."""
  by = defaultdict(list)
  for (_, lane), v in parse_wrote(r[3], L).items():
    by[lane].append(v)
  return {k: tuple(v) for k, v in by.items()}


def _values(w, ta, tb, L, limit):
  seen_a = {v for r in ta for v in _lanes(r, L).values()}
  seen_b = {v for r in tb for v in _lanes(r, L).values()}
  for i in range(max(len(ta), len(tb)) if limit is None else min(limit, max(len(ta), len(tb)))):
    for mine, other, side in ((tb, seen_a, "b"), (ta, seen_b, "a")):
      if i < len(mine):
        r = mine[i]
        for lane, v in sorted(_lanes(r, L).items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
          if v not in other:
            reg = r[3].split("=")[0]
            a_rec, b_rec = (None, r) if side == "b" else (r, None)
            return TraceDiff(f"new-value-{side}", w, i, 0, 0, a_rec, b_rec, reg, lane,
                             v[0] if side == "a" else None, v[0] if side == "b" else None)
  return None


# ------------------------------------------------------------------------------------------ rendering
def render(a: Run, b: Run, out: OutputDiff | None, tr: TraceDiff | None, console=None) -> None:
  from rich.console import Console
  from rich.markup import escape
  from rich.table import Table
  con = console or Console(highlight=False, width=None if sys.stdout.isatty() else 160)
  t = Table(title=f"gputwin diff: {a.kernel}", show_lines=False)
  t.add_column("")
  t.add_column(f"A: {a.label} ({a.where}, {a.arch})", overflow="fold")
  t.add_column(f"B: {b.label} ({b.where}, {b.arch})", overflow="fold")
  t.add_row("executed", f"{a.instructions} wave-instructions", f"{b.instructions} wave-instructions")
  if a.error or b.error:
    t.add_row("[red]stopped[/]", f"{type(a.error).__name__}: {a.error}" if a.error else "completed",
              f"{type(b.error).__name__}: {b.error}" if b.error else "completed")
  if out:
    t.add_row("[bold]first output difference[/]", f"{out.name}{list(out.index)} = {out.a!r}", f"{out.name}"
              f"{list(out.index)} = {out.b!r}")
    t.add_row("", f"{out.count} differing elements in {out.name}" if out.count >= 0 else "shape/dtype differ", "")
  else:
    t.add_row("outputs", "identical", "identical")
  if tr:
    t.add_row("[bold]first trace divergence[/]", f"workgroup {tr.workgroup}, wave {tr.wave_in_group} (global "
              f"{tr.wave}), step {tr.step}", "")
    for r in tr.context:
      t.add_row("[dim]same[/]", f"[dim]{r[1]:#06x} {r[2]}[/]", f"[dim]{r[2]}[/]")
    t.add_row("[bold red]differs[/]", f"{tr.a[1]:#06x} {tr.a[2]}" if tr.a else "(trace ended)",
              f"{tr.b[1]:#06x} {tr.b[2]}" if tr.b else "(trace ended)")
    if tr.reg:
      lane = f" lane {tr.lane}" if tr.lane is not None else ""
      hx = lambda v: "-" if v is None else f"{v:#010x}"
      t.add_row(f"{tr.reg}{lane}", hx(tr.va), hx(tr.vb))
  elif a.trace is not None and b.trace is not None:
    t.add_row("traces", "identical", "identical")
  con.print(t)
  if tr:
    con.print(f"[bold]first divergence:[/] {escape(tr.summary())}", soft_wrap=True)
