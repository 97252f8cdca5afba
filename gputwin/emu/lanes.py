"""Operand routing the encodings ask for around an instruction's pseudocode: DPP lane permutations and write masks,
SDWA sub-dword selects, and the VOP3 output modifiers (omod, clamp). Data movement only; facts from the RDNA3/RDNA4
and MI300 ISA guides ("DPP", "SDWA", "Output Modifiers")."""
from __future__ import annotations

import functools

import numpy as np

from gputwin.errors import GputwinError

U32 = np.uint32


@functools.lru_cache(maxsize=None)
def dpp_map(d: tuple, L: int) -> tuple[np.ndarray, np.ndarray]:
  """(source lane of every lane, lane has a valid source) for ("dpp16", ctrl, ...) or ("dpp8", selects, fi)."""
  lane = np.arange(L)
  r, row = lane % 16, lane - lane % 16
  valid = np.ones(L, bool)
  if d[0] == "dpp8":
    return (lane & ~7) + np.asarray(d[1])[lane % 8], valid
  c, n = d[1], d[1] & 15
  if c <= 0xff:
    src = (lane & ~3) + ((c >> (2 * (lane & 3))) & 3)  # quad_perm
  elif 0x101 <= c <= 0x10f:
    src, valid = lane + n, r + n < 16  # row_shl
  elif 0x111 <= c <= 0x11f:
    src, valid = lane - n, r >= n  # row_shr
  elif 0x121 <= c <= 0x12f:
    src = row + (r - n) % 16  # row_ror
  elif c in (0x130, 0x138):
    src = lane + (1 if c == 0x130 else -1)  # wave_shl1 / wave_shr1 (gfx9)
    valid = (src >= 0) & (src < L)
  elif c in (0x134, 0x13c):
    src = (lane + (1 if c == 0x134 else -1)) % L  # wave_rol1 / wave_ror1 (gfx9)
  elif c == 0x140:
    src = row + 15 - r  # row_mirror
  elif c == 0x141:
    src = lane - lane % 8 + 7 - lane % 8  # row_half_mirror
  elif c == 0x142:
    src, valid = row - 1, lane >= 16  # row_bcast:15 (gfx9)
  elif c == 0x143:
    src, valid = np.full(L, 31), lane >= 32  # row_bcast:31 (gfx9)
  elif 0x150 <= c <= 0x15f:
    src = row + n  # row_share
  elif 0x160 <= c <= 0x16f:
    src = row + (r ^ n)  # row_xmask
  else:
    raise GputwinError(f"DPP control {c:#x} is not a valid DPP16 control")
  return np.clip(src, 0, L - 1), valid


def dpp_source(v: np.ndarray, d: tuple, L: int) -> np.ndarray:
  """src0 as seen through DPP: lanes without a valid source read 0 when bound_ctrl/fi say so (DPP8 always)."""
  src, valid = dpp_map(d, L)
  zero = ~valid if d[0] == "dpp8" or d[2] or d[3] else np.zeros(L, bool)
  return np.where(zero, np.zeros((), v.dtype), v[:, src])


def dpp_write_mask(d: tuple, L: int) -> np.ndarray:
  """Lanes DPP16 lets write: row_mask/bank_mask bits, and lanes with a valid source unless bound_ctrl/fi."""
  if d[0] != "dpp16":
    return np.ones(L, bool)
  lane = np.arange(L)
  _, valid = dpp_map(d, L)
  rows = ((d[4] >> (lane // 16)) & 1) & ((d[5] >> ((lane // 4) & 3)) & 1)
  return rows.astype(bool) & (valid | bool(d[2] or d[3]))


def _sel(sel: int) -> tuple[int, int]:
  """SDWA select (BYTE_0..3, WORD_0/1) -> (shift, width)."""
  return (sel * 8, 8) if sel < 4 else ((sel - 4) * 16, 16)


def sdwa_src(v, sel: int, sext: int):
  if sel == 6:  # DWORD
    return v
  sh, w = _sel(sel)
  x = (np.asarray(v).astype(U32) >> U32(sh)) & U32((1 << w) - 1)
  return np.where(x >> U32(w - 1), x | U32(0xffffffff ^ ((1 << w) - 1)), x) if sext else x


def sdwa_dst(new, old, sel: int, unused: int):
  """Place a result in the selected bits; the rest is zero (UNUSED_PAD), sign (UNUSED_SEXT) or old (PRESERVE)."""
  if sel == 6:
    return new
  sh, w = _sel(sel)
  mask = U32(((1 << w) - 1) << sh)
  val = (new << U32(sh)) & mask
  if unused == 2:
    return (old & ~mask) | val
  if unused == 1:
    return val | np.where(((new >> U32(w - 1)) & U32(1)).astype(bool), ~U32((1 << (sh + w)) - 1), U32(0))
  return val


def outmod(v: np.ndarray, bits: int, clamp: int, omod: int) -> np.ndarray:
  """VOP3 output modifiers on a float result: omod (x2, x4, /2) then clamp to [0, 1] (NaN -> 0)."""
  ft = {16: np.float16, 64: np.float64}.get(bits, np.float32)
  ut = {16: np.uint16, 64: np.uint64}.get(bits, np.uint32)
  x = v.astype(ut).view(ft)
  with np.errstate(all="ignore"):
    if omod:
      x = x * ft({1: 2.0, 2: 4.0, 3: 0.5}[omod])
    if clamp:
      x = np.where(np.isnan(x), ft(0), np.clip(x, ft(0), ft(1)))
  return x.astype(ft).view(ut)
