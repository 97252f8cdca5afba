"""What the verification commands share: the launch arguments of `gputwin run` (--kernel, --grid, --block, --arg,
--max-instructions, --no-checks) and the guard that turns a tool's errors into exit status 2."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from gputwin.errors import GputwinError


def add_launch_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--kernel", default=None, help="kernel name (default: the only kernel)")
  p.add_argument("--grid", default="1", help="workgroups per dimension: 64 or 8,8")
  p.add_argument("--block", default="64", help="work-items per workgroup: 256 or 16,16")
  p.add_argument("--arg", action="append", default=[], help="NAME:TYPE:N | NAME:TYPE:FILE.npy | NAME:TYPE=VALUE")
  p.add_argument("--max-instructions", type=int, default=None, help="watchdog on wave-instructions per launch")
  p.add_argument("--no-checks", action="store_true", help="disable the emulator's checkers")


def launch_args(a: argparse.Namespace) -> tuple[list, tuple, tuple]:
  """([(name, value)], grid, block) from the parsed launch arguments."""
  from gputwin.emu.tool import dims, parse_arg
  try:
    return [parse_arg(s) for s in a.arg], dims(a.grid), dims(a.block)
  except (ValueError, KeyError, OSError) as e:
    raise GputwinError(f"bad --arg/--grid/--block: {e}") from None


def guarded(prog: str, fn: Callable[[], int]) -> int:
  """fn()'s exit status; a missing toolchain or a gputwin/OS error is printed as `prog: ...` and gives 2."""
  from gputwin.verify.runner import ToolchainError
  try:
    return fn()
  except ToolchainError as e:
    print(f"{prog}: {e}", file=sys.stderr)
    return 2
  except (GputwinError, OSError) as e:
    print(f"{prog}: {type(e).__name__}: {e}", file=sys.stderr)
    return 2
