"""What the launchers with per-thread PCs (emu/ptx/launch.py, emu/ir3/launch.py) share around core.run: a numpy
argument placed in guest memory, one batch run under the launch's instruction budget and counted into LaunchStats,
the thread an executor Stop names, the public error it becomes, and the trace handed back."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gputwin.emu import core
from gputwin.emu.memory import GuestMemory
from gputwin.emu.trace import write_trace
from gputwin.errors import EmuCheckError, EmuError, EmuFault, EmuTrap
from gputwin.isa.kernargs import LaunchStats


def place(mem, a: np.ndarray, copies: list, read_only: bool = False) -> int:
  """A guest buffer for array `a` (emu/api.py's rule): mapped in place when `mem` is a GuestMemory and `a` is
  writeable, C-contiguous and overlaps no argument placed before, else a copy, copied back after the launch unless
  read-only. `copies` collects (array, VA, copied back?) for the launcher to finish and unmap."""
  if not read_only and isinstance(mem, GuestMemory) and a.flags.c_contiguous and a.flags.writeable and a.nbytes and \
     not any(np.may_share_memory(a, b) for b, _, _ in copies):
    va = mem.alloc(a.nbytes, buf=a.reshape(-1).view(np.uint8))
    copies.append((a, va, False))
    return va
  va = mem.alloc(max(a.nbytes, 1))
  c = np.ascontiguousarray(a)
  if c.nbytes:
    mem.write_bytes(va, c.reshape(-1).view(np.uint8))
  copies.append((a, va, not read_only))
  return va


def run(eng, stats: LaunchStats, serial: bool, max_instructions: int | None, groups_done: int, per_group: int):
  """core.run for one batch; its counts go into `stats` (`groups_done` workgroups/CTAs of `per_group` waves are
  finished after it) whether it stops or not. Returns the Stop, or None."""
  try:
    left = None if max_instructions is None else max_instructions - stats.instructions
    core.run(eng, serial, left)
    st = None
  except core.Stop as e:
    st = e
  stats.instructions += eng.count
  stats.lane_instructions += eng.lane_count
  stats.native_instructions += eng.native_count
  stats.workgroups, stats.waves = groups_done, groups_done * per_group
  return st


def stopped_at(st: core.Stop, eng) -> tuple[int, int]:
  """(wave, lane) a Stop names: the faulting thread, else the first thread running the instruction, else the wave's
  first live thread."""
  w, lane = max(st.wave, 0), None
  if st.fault is not None and getattr(st.fault, "thread", None) is not None:
    w, lane = st.fault.thread
  elif eng._cur is not None and st.op is not None and st.wave >= 0:
    j = int(np.argmax(np.arange(eng.W)[eng._last_ix] == w)) if eng._last_ix is not None else 0
    act = np.nonzero(eng._cur[min(j, len(eng._cur) - 1)])[0]
    lane = int(act[0]) if len(act) else None
  if lane is None:
    live = np.nonzero(eng.lalive[w])[0]
    lane = int(live[0]) if len(live) else 0
  return w, lane


def fail(st: core.Stop, arch: str, kernel: str, pc: int, text: str, where: str, wave: int, pc_text: str):
  """Raise the Stop as EmuFault (a page fault: address, size, access), EmuTrap, EmuCheckError or EmuError, each
  naming target, kernel, `where` (the launcher's group/wave/thread words), PC and instruction."""
  if st.kind == "fault":
    f = st.fault
    raise EmuFault(f.va, f.size, f.access, arch, kernel, pc, text, f"{where}: {f}", wave) from None
  cls = {"trap": EmuTrap, "check": EmuCheckError}.get(st.kind, EmuError)
  raise cls(f"[{arch}] kernel {kernel}, {where}, PC {pc_text}: {text}: {st.msg}", arch, kernel, pc, text,
            wave) from None


def hand_back(stats: LaunchStats, tr: list | None, trace) -> None:
  """The launch's trace records into `stats.trace`, and into `trace` as asked: a path to write, or a list to extend."""
  if tr is None:
    return
  stats.trace = tr
  if isinstance(trace, (str, Path)):
    write_trace(trace, tr)
  elif isinstance(trace, list):
    trace.extend(tr)


def written(name: str, lanes: np.ndarray, vals: np.ndarray) -> str:
  """A trace entry's write: `name=2a` when every lane that ran it holds the same value, else `name=lane:value,...`."""
  if (vals == vals[0]).all():
    return f"{name}={int(vals[0]):x}"
  return f"{name}=" + ",".join(f"{l}:{int(v):x}" for l, v in zip(lanes, vals))
