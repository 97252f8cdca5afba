"""Per-family hardware facts beside the encodings, as rows the emulator reads: wait counters (`data/waitcnt.json`,
with the S_WAITCNT SIMM16 layout of `data/formats.json` shared with the assembler), DPP16 controls
(`data/formats.json` `dpp_ctrl`) and matrix instructions (`data/matrix.json`). Families are the vendor table
families ("rdna3", "rdna4", "cdna"); each accessor is cached. Checked against llvm-mc-22/llvm-mca-22 in
tests/isa/test_hwdata.py."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from gputwin.errors import GputwinError

_DATA = Path(__file__).parent / "data"
Chunks = tuple[tuple[int, int], ...]  # (lo bit, width) pieces of a field, low piece first


@functools.cache
def _json(name: str) -> dict:
  return json.loads((_DATA / name).read_text())


def _fam(table: dict, family: str) -> dict:
  if family not in table:
    raise GputwinError(f"no hardware data for family {family!r}; known: {sorted(k for k in table if k[0] != '_')}")
  return table[family]


def bits(value: int, chunks: Chunks) -> int:
  """The field made of `chunks` of `value` (low chunk first)."""
  out, at = 0, 0
  for lo, w in chunks:
    out |= (value >> lo & (1 << w) - 1) << at
    at += w
  return out


# ---- wait counters
@functools.cache
def counters(family: str) -> tuple[str, ...]:
  """The wait counters of `family`, in the order a checker indexes them."""
  return tuple(_fam(_json("waitcnt.json"), family)["counters"])


@functools.cache
def waits(family: str, op: str) -> tuple[tuple[int, Chunks], ...]:
  """(counter index, SIMM16 chunks) of every counter `op` waits on; () if `op` waits on none."""
  fam = _fam(_json("waitcnt.json"), family)
  row, alias, names = fam["waits"].get(op, ()), fam.get("alias", {}), counters(family)
  if row == "waitcnt":  # the S_WAITCNT layout the assembler and disassembler use
    row = [(alias.get(n, n), chunks) for n, chunks in _json("formats.json")["waitcnt"][family]]
  return tuple((names.index(n), tuple(map(tuple, chunks))) for n, chunks in row)


def wait_counts(family: str, op: str, simm16: int) -> dict[str, int]:
  """The count `op` with this SIMM16 waits for, per counter name: s_waitcnt vmcnt(3) lgkmcnt(1) -> {vmcnt: 3, ...}."""
  return {counters(family)[c]: bits(simm16, ch) for c, ch in waits(family, op)}


@functools.cache
def wait_states(family: str, op: str) -> Chunks | None:
  """SIMM16 chunks whose value + 1 is the number of wait states `op` inserts (S_NOP), or None."""
  row = _fam(_json("waitcnt.json"), family)["wait_states"].get(op)
  return None if row is None else ((row[0], row[1]),)


@functools.cache
def increments(family: str, mem: str, store: bool) -> tuple[int, ...]:
  """Counter indices a memory instruction of kind `mem` (smem, ds, global, scratch, buffer, flat) increments, the one
  its result waits on first; `store`: it returns nothing (stores, atomics without return)."""
  rows, names = _fam(_json("waitcnt.json"), family)["increments"], counters(family)
  if mem not in rows:
    raise GputwinError(f"{family}: no wait counters for memory kind {mem!r}")
  return tuple(names.index(n) for n in rows[mem][store])


# ---- DPP16 controls
@functools.cache
def dpp_control(family: str, code: int) -> tuple[str, int] | None:
  """(control name, argument) of DPP16 dpp_ctrl `code` on `family` (0x101 -> ("row_shl", 1)); None if `family`
  has no such control. quad_perm's argument is the code itself (four 2-bit lane selects)."""
  kind = "cdna" if family == "cdna" else "rdna"
  for name, lo, hi, base, form in _json("formats.json")["dpp_ctrl"]:
    if lo <= code <= hi and form.split()[0] in ("any", kind):
      return name, code - base
  return None


# ---- matrix instructions
@dataclass(frozen=True)
class Matrix:
  """One WMMA/MFMA/SMFMAC opcode: D (m x n, type c) = A (m x k, type a) x B (k x n, type b) + C, `blocks` times."""
  op: str
  m: int
  n: int
  k: int
  blocks: int
  a: str
  b: str
  c: str
  regs: tuple[int, int, int]  # VGPRs per lane of A, B, C/D
  layout: str | None  # lane layout emu/amd/matrix.py applies; None: not modelled
  passes: tuple[tuple[str, int], ...]  # (target, passes) from LLVM's scheduling model
  sparse: bool = False  # 4:2 structured-sparse A (SMFMAC/SWMMAC): S2 holds the indices, D is also C
  scale: int = 0  # k per E8M0 scale of A's rows and B's columns (gfx950 V_MFMA_SCALE: S3, S4 hold them); 0: none

  def passes_on(self, target: str) -> int | None:
    return dict(self.passes).get(target)


@functools.cache
def matrix(family: str, op: str) -> Matrix | None:
  """The matrix row of `op`, or None if `op` is no matrix instruction of `family`."""
  r = _fam(_json("matrix.json"), family).get(op)
  if r is None:
    return None
  return Matrix(op, r["m"], r["n"], r["k"], r["blocks"], r["a"], r["b"], r["c"], tuple(r["regs"]), r["layout"],
                tuple(sorted(r.get("passes", {}).items())), r.get("sparse", False),
                r.get("scale", 0))
