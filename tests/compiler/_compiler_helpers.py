"""Shared helpers: run a compiled kernel on the emulator next to the host reference."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np

TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")
BACKENDS = ("direct", "llvm")
LLVM_MC = shutil.which("llvm-mc-22")


def emulator():
  """gputwin.emu.launch (a broken emulator fails these tests; it is not a reason to skip them)."""
  from gputwin.emu import launch
  return launch


# Emulator bugs found while testing LLVM's code (see tests/compiler/test_emu_repro.py, one reproducer each).
# A mismatch on code containing one of these instructions is reported as xfail, not as a compiler bug.
# None open now (fixed: neg/abs on v_cndmask_b32_e64, true16 .h operands, VOPC SDWA with an SGPR destination;
# their reproducers stay in tests/compiler/test_emu_repro.py as regression tests).
EMU_SUSPECTS: dict[str, str] = {}


def known_emu_bug(asm: str) -> str | None:
  return next((why for pat, why in EMU_SUSPECTS.items() if pat in asm), None)


def llvm_mc_accepts(asm: str, arch: str) -> str:
  """'' if llvm-mc-22 assembles `asm` for `arch`, else its error text."""
  p = subprocess.run([LLVM_MC, "--triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-filetype=obj", "-o", "/dev/null"],
                     input=asm, capture_output=True, text=True)
  return p.stderr if p.returncode else ""


def run_both(compiled, args, grid, block, checks=None):
  """Run on the host reference and the emulator; returns (reference args, emulator args)."""
  from gputwin.compiler import reference
  launch = emulator()
  ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
  emu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
  reference.launch(compiled.ir, grid=grid, block=block, args=ref)
  # LLVM's loop-exit masks OR into a register it never initialised (only EXEC lanes matter): the emulator's
  # `uninit` checker flags that, so LLVM code runs with the other checkers only
  chk = checks if checks is not None else (True if compiled.backend == "direct" else {"waitcnt", "lds_race"})
  launch(compiled.code_object, compiled.name, grid=grid, block=block, args=emu, arch=compiled.arch, checks=chk)
  return ref, emu
