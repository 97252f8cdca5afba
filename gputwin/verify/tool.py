"""The verification commands `gputwin trace` and `gputwin diff` (trace_main, diff_main; `gputwin bisect` and `gputwin
fuzz` are verify.bisect.main and verify.fuzz.main); each takes argv and returns an exit status.

Launch arguments are `gputwin run`'s (gputwin.emu.tool): --grid, --block, --arg NAME:TYPE:N | NAME:TYPE:FILE.npy |
NAME:TYPE=VALUE. Exit status: 0 same / done, 1 a difference or culprit found, 2 bad input or missing tool."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from gputwin.errors import GputwinError
from gputwin.verify.command import add_launch_args, guarded, launch_args


# ------------------------------------------------------------------------------------------ gputwin trace
def trace_main(argv=None) -> int:
  """gputwin trace K.co -o trace.txt [--format text|jsonl|perfetto] --grid .. --block .. --arg ..."""
  p = argparse.ArgumentParser(prog="gputwin trace", description="run a launch on the emulator and write its "
                              "deterministic per-wave instruction trace")
  p.add_argument("code", help=".co/.o/.s, or .cl (compiled by clang-22 for --arch)")
  p.add_argument("--arch", default=None)
  p.add_argument("-o", "--output", required=True, help="trace file")
  p.add_argument("--format", choices=("text", "jsonl", "perfetto"), default=None,
                 help="default from the file name: .jsonl -> jsonl, .json -> perfetto, else text")
  add_launch_args(p)
  a = p.parse_args(argv)

  def go() -> int:
    from gputwin.verify import runner
    args, grid, block = launch_args(a)
    r = runner.run(a.code, a.kernel, grid=grid, block=block, args=args, arch=a.arch, checks=not a.no_checks,
                   max_instructions=a.max_instructions)
    fmt = a.format or ("jsonl" if a.output.endswith(".jsonl") else "perfetto" if a.output.endswith(".json")
                       else "text")
    runner.write(r.trace, a.output, fmt, r.waves_per_group)
    print(f"{r.kernel} on {r.arch}: {len(r.trace)} wave-instructions traced -> {a.output} ({fmt})")
    if r.error:
      print(f"gputwin trace: the launch stopped: {type(r.error).__name__}: {r.error}", file=sys.stderr)
      return 1
    return 0
  return guarded("gputwin trace", go)


# ------------------------------------------------------------------------------------------ gputwin diff
def diff_main(argv=None) -> int:
  """gputwin diff A B [--arch X] [--arch-b Y] [--device-b amd:0] --grid .. --block .. --arg ..."""
  p = argparse.ArgumentParser(prog="gputwin diff", description="run two code objects (or one on two targets, or "
                              "the emulator against a device) on the same inputs; show the first difference")
  p.add_argument("a", help=".co/.o/.s or .cl (clang-22 for --arch)")
  p.add_argument("b", nargs="?", default=None, help="second code object (default: A again, see --arch-b/--device-b)")
  p.add_argument("--arch", default=None, help="target of A (and B unless --arch-b)")
  p.add_argument("--arch-b", default=None, help="target of B (for .cl sources compiled per target)")
  p.add_argument("--device-b", default=None, help="run B through gputwin.runtime on this device: amd:0, mock:gfx1100")
  p.add_argument("--mode", choices=("lockstep", "values"), default=None,
                 help="trace comparison: same instruction stream (lockstep; the default for one target) or different "
                 "code (values; the default across targets)")
  add_launch_args(p)
  a = p.parse_args(argv)

  def go() -> int:
    from gputwin.verify import diverge, runner
    args, grid, block = launch_args(a)
    if not (a.b or a.arch_b or a.device_b):
      raise GputwinError("diff: give B, or --arch-b / --device-b to run A a second way")
    if a.device_b and a.device_b.startswith("amd") and not os.path.exists("/dev/kfd"):
      raise GputwinError(f"--device-b {a.device_b}: no real AMD GPU here (/dev/kfd missing); try mock:<arch>")
    if a.a.endswith(".jsonl") or (a.b or "").endswith(".jsonl"):  # two saved traces (gputwin trace -o X.jsonl)
      if not (a.b and a.a.endswith(".jsonl") and a.b.endswith(".jsonl")):
        raise GputwinError("diff of saved traces: give two .jsonl files from gputwin trace")
      threads = int(np.prod(block))
      ra, rb = runner.read_jsonl(a.a, block=threads), runner.read_jsonl(a.b, block=threads)
    else:
      kw = dict(grid=grid, block=block, args=args, checks=not a.no_checks, max_instructions=a.max_instructions)
      ra = runner.run(a.a, a.kernel, arch=a.arch, label=a.a, **kw)
      rb = runner.run(a.b or a.a, ra.kernel, arch=a.arch_b or a.arch, device=a.device_b, label=a.b or a.a, **kw)
    mode = a.mode or ("lockstep" if ra.arch == rb.arch else "values")
    out = diverge.first_output_diff(ra, rb)
    # different code legitimately computes different intermediates: in values mode, look only when results differ
    same = out is None and type(ra.error) is type(rb.error)
    tr = None if mode == "values" and same else diverge.first_trace_diff(ra, rb, mode)
    diverge.render(ra, rb, out, tr)
    return 1 if (out or tr or bool(ra.error) != bool(rb.error)) else 0
  return guarded("gputwin diff", go)


if __name__ == "__main__":
  sys.exit(diff_main())
