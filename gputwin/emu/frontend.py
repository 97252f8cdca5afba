"""The seam between the shared machine and an instruction set: what an ISA frontend gives the executor.

The shared machine (core.Engine and its scheduler, both tiers, guest memory, LDS/scratch windows, checkers, traces,
the launch API) runs `program.Op`s: an instruction bound once to its pcode semantics, with every pcode input and
output name mapped to an operand (`program.Src`: a register file, index, width, modifiers) or to a special input
the frontend's `special_inputs` table names. The frontend owns everything that depends on the encoding and the ABI.
docs/ARCHITECTURE.md ("Adding an ISA") says what the PTX and ir3 frontends will add.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from gputwin.emu import amd, ir3, ptx
from gputwin.emu.program import Op, Src
from gputwin.errors import GputwinError


class Frontend(Protocol):
  name: str  # "amd" | "ptx" | "ir3"
  align: int  # instruction alignment in bytes (a PC off it is a decode error)
  simt: bool  # one PC per thread (core.run_simt: Engine.lpc, guards, rendezvous) instead of one per wave + EXEC
  its: bool  # simt: independent thread scheduling (PTX; looping threads yield to the rest of their warp); absent = True
  va_bits: int  # how many bits of a global address reach guest memory (binding.va_bits; 32 when absent)
  special_inputs: dict  # pcode input name -> ("scc",) | ("sgpr", key, dwords) | ("zero", code) | ("pc",) | ...

  def decode(self, text: bytes, arch: str, offset: int, wave: int) -> object:
    """The ISA layer's instruction at `offset` (raises gputwin.errors.DecodeError)."""

  def bind(self, inst, pc: int, family: str, wave: int) -> Op:
    """The instruction bound to its pcode semantics: kind, inputs/outputs, memory kind, per-op data in `info`."""

  def special(self, family: str) -> dict[str, int]:
    """Register codes of the wave's special registers: exec, vcc, m0, null."""

  def sreg(self, eng, ix, code: int, dwords: int) -> np.ndarray:
    """A scalar operand by register code, shaped (waves, 1) (plain registers, or values the code stands for)."""

  def cycle_rows(self, family: str) -> tuple:
    """Hardware registers that read the wave's clock, (row, shift, bits) each (AMD: SHADER_CYCLES); the executor
    writes them before a body that accesses the hardware registers runs. Only frontends with such bodies."""

  def computed(self, code: int) -> bool:
    """Whether scalar register `code` reads a computed value (an aperture, a zero flag, SCC), not a register row."""

  def memop(self, eng, op: Op, ix, m, st: dict) -> None:
    """Effective addresses of a memory instruction, then eng.run_body / lds_address / run_scratch on the space."""

  def deliver(self, eng, op: Op, ix, m, out: dict) -> dict:
    """Outputs of an instruction whose op.info["deliver"] the frontend set, sent elsewhere than their registers (AMD:
    a load's data into LDS); returns the outputs left for the registers. Only frontends that set it implement it."""

  def matrix(self, eng, op: Op, ix) -> None:
    """A matrix instruction (its operand layouts): kind "matrix"."""

  def matrix_check(self, eng, op: Op, ix) -> tuple[int, str] | None:
    """The `sparse` checker on a matrix instruction about to run for waves `ix`: (wave, what is wrong) or None."""

  def source_lanes(self, v: np.ndarray, op: Op, lanes: int) -> np.ndarray:
    """Cross-lane routing of an operand read (AMD: DPP)."""

  def write_mask(self, op: Op, lanes: int) -> np.ndarray:
    """Lanes an instruction may write besides the active mask (AMD: DPP row/bank masks)."""

  def select_inputs(self, eng, st: dict, op: Op) -> None:
    """Sources the operand fetch does not form, in place (AMD: SDWA sub-dword selection; ir3: relative registers,
    half consts of float ops, integer (neg)/(abs))."""

  def select_output(self, new: np.ndarray, old: np.ndarray, op: Op) -> np.ndarray:
    """Sub-dword placement of a result into the old register value (AMD: SDWA)."""

  def output_modifier(self, v: np.ndarray, d: Src, op: Op) -> np.ndarray:
    """Result modifiers (AMD: clamp, omod)."""

  def denormals_kept(self, eng) -> bool:
    """Whether every wave of `eng` keeps every denormal now (AMD: MODE.FP_DENORM all ones, no hardware register
    written): the native tier then needs no flushing code (optional: without it blocks always flush by the mode)."""

  def denormals(self, eng, v, bits: int, n: int, ix, result: bool, first: int = 0):
    """Denormal flushing of the float inputs op.info["ftz"] names and of D0 (op.info["ftz_out"]) as the waves' mode
    asks (AMD: MODE.FP_DENORM): elements `first`..n-1 of `bits` bits. Only frontends that set those keys implement
    it."""

  def init_waves(self, eng, kd, grid, block, g0: int, nw: int, user: list[int], pc: int) -> int:
    """The ABI's initial wave state of a batch (ids, user registers, masks, mode); returns the scalar rows set."""

  def event(self, eng, op: Op, ix, sel: np.ndarray, m: np.ndarray) -> np.ndarray:
    """simt frontends: an op of a kind the machine does not know (PTX: call, ret, vector moves, tensor fragments)
    for threads `sel` (guard true: `m`); returns the threads that move on to pc + size."""


FRONTENDS = {"gfx": amd.FRONTEND, "sm_": ptx.FRONTEND, "a": ir3.FRONTEND}  # target name prefix -> frontend


def for_arch(arch: str) -> Frontend:
  """The frontend of a target (gfx* -> AMD, sm_* -> PTX, a630/a730... -> ir3)."""
  fe = next((f for prefix, f in FRONTENDS.items() if arch.startswith(prefix)), None)
  if fe is None:
    raise GputwinError(f"no emulator frontend for target {arch!r}")
  return fe
