"""Targets: an LLVM processor name -> vendor table family + the deltas that make it that chip.

The vendor XML describes one chip per family (RDNA3.5, RDNA4, CDNA4). A target narrows it: opcodes the
chip lacks (per llvm-mc-22, see data/target_deltas.json with evidence), its default wave size and whether
16-bit VGPR halves use true16 syntax (v1.l / v1.h).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from gputwin.errors import GputwinError

_DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Target:
  name: str  # LLVM processor name: "gfx1100"
  family: str  # vendor table family: "rdna3" | "rdna4" | "cdna"
  wave: int  # default wavefront size
  waves: tuple[int, ...]  # supported wavefront sizes
  true16: bool  # llvm-mc-22 prints 16-bit VGPR operands as v1.l / v1.h
  mattr: str  # llvm-mc-22 -mattr matching our defaults
  lacks: frozenset[str]  # canonical opcode names in the family tables this chip does not have
  isa: str  # marketing ISA name for messages
  mach: int  # EF_AMDGPU_MACH in a code object's e_flags
  major: int  # gfx major version: 9, 11, 12
  gfx90a: bool  # unified VGPR/AccVGPR file: accum_offset, tg_split, VGPR granule 8, kernarg preload
  fp8: str  # what FP8/BF8 mean (pcode.runtime.FP8): "ocp" (E4M3/E5M2), "fnuz" (gfx942's), "" (no such instructions)

  @property
  def is_cdna(self) -> bool: return self.family == "cdna"

  # code-object facts (AMDGPUUsage: "Target Features", e_flags): CDNA targets carry xnack/sramecc target-id bits
  @property
  def xnack(self) -> bool: return self.gfx90a

  @property
  def sramecc(self) -> bool: return self.gfx90a

  @property
  def wave64_only(self) -> bool: return self.waves == (64,)

  @property
  def packed_tid(self) -> bool: return True  # work-item ids arrive packed in v0 on gfx90a+ and gfx11+ (all here)


#          family   wave  waves     true16 ISA      mach  major fp8
_TARGETS = {
  "gfx1100": ("rdna3", 32, (32, 64), True, "RDNA3", 0x41, 11, ""),
  "gfx1200": ("rdna4", 32, (32, 64), False, "RDNA4", 0x48, 12, "ocp"),
  "gfx1201": ("rdna4", 32, (32, 64), False, "RDNA4", 0x4e, 12, "ocp"),
  "gfx942": ("cdna", 64, (64,), False, "CDNA3", 0x4c, 9, "fnuz"),
  "gfx950": ("cdna", 64, (64,), False, "CDNA4", 0x4f, 9, "ocp"),
}
TARGETS = tuple(_TARGETS)
MACH = {v[5]: k for k, v in _TARGETS.items()}
# Adreno GPUs (gputwin.isa.ir3): name -> the isaspec gen id Mesa decodes it with (isa_decode_options.gpu_id = gen * 100)
ADRENO = {"a420": 400, "a540": 500, "a630": 600, "a660": 600, "a730": 700, "a740": 700}


@functools.cache
def _deltas() -> dict[str, list[str]]:
  p = _DATA / "target_deltas.json"
  return {k: v["lacks"] for k, v in json.loads(p.read_text())["targets"].items()} if p.exists() else {}


@functools.cache
def target(name: str) -> Target:
  """Look up a target by LLVM processor name (gfx1100, gfx1200, gfx1201, gfx942, gfx950)."""
  if name not in _TARGETS:
    raise GputwinError(f"unknown target {name!r}; supported: {', '.join(TARGETS)}")
  fam, wave, waves, true16, isa, mach, major, fp8 = _TARGETS[name]
  mattr = f"+wavefrontsize{wave}" + (",+real-true16" if true16 else "")
  return Target(name, fam, wave, waves, true16, mattr, frozenset(_deltas().get(name, ())), isa, mach, major,
                fam == "cdna", fp8)
