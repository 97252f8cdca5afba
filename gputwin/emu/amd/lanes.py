"""Operand routing the encodings ask for around an instruction's pseudocode: DPP lane permutations and write masks,
SDWA sub-dword selects, the VOP3 output modifiers (omod, clamp) and MODE.FP_DENORM's flushing. Data movement only;
facts from the RDNA3/RDNA4 and MI300 ISA guides ("DPP", "SDWA", "Output Modifiers", the MODE register). Which DPP16
control a dpp_ctrl code is on a family, and its argument, are rows of isa/data/formats.json `dpp_ctrl`
(isa.hwdata.dpp_control); here is what each control does."""
from __future__ import annotations

import functools

import numpy as np

from gputwin.errors import GputwinError
from gputwin.isa import hwdata
from gputwin.isa.targets import target
from gputwin.pcode.runtime import fop

U32, U64 = np.uint32, np.uint64

# DPP16 control -> (source lane, lane has a valid source) from the lane, its position in its row of 16 `r`, the
# row's first lane `row`, the control's argument `n` and the wave size `L`
_DPP16 = {
  "quad_perm": lambda lane, r, row, n, L: ((lane & ~3) + ((n >> (2 * (lane & 3))) & 3), True),
  "row_shl": lambda lane, r, row, n, L: (lane + n, r + n < 16),
  "row_shr": lambda lane, r, row, n, L: (lane - n, r >= n),
  "row_ror": lambda lane, r, row, n, L: (row + (r - n) % 16, True),
  "wave_shl": lambda lane, r, row, n, L: (lane + n, lane + n < L),
  "wave_shr": lambda lane, r, row, n, L: (lane - n, lane >= n),
  "wave_rol": lambda lane, r, row, n, L: ((lane + n) % L, True),
  "wave_ror": lambda lane, r, row, n, L: ((lane - n) % L, True),
  "row_mirror": lambda lane, r, row, n, L: (row + 15 - r, True),
  "row_half_mirror": lambda lane, r, row, n, L: (lane - lane % 8 + 7 - lane % 8, True),
  "row_bcast": lambda lane, r, row, n, L: ((lane & ~n) - 1, lane > n),  # 15: previous row's last lane; 31: lane 31
  "row_share": lambda lane, r, row, n, L: (row + n, True),
  "row_newbcast": lambda lane, r, row, n, L: (row + n, True),
  "row_xmask": lambda lane, r, row, n, L: (row + (r ^ n), True),
}


@functools.lru_cache(maxsize=None)
def dpp_map(d: tuple, L: int) -> tuple[np.ndarray, np.ndarray]:
  """(source lane of every lane, lane has a valid source) for ("dpp16", ctrl, bound_ctrl, fi, row_mask, bank_mask,
  arch) or ("dpp8", selects, fi)."""
  lane = np.arange(L)
  if d[0] == "dpp8":
    return (lane & ~7) + np.asarray(d[1])[lane % 8], np.ones(L, bool)
  ctl = hwdata.dpp_control(target(d[6]).family, d[1])
  if ctl is None:
    raise GputwinError(f"DPP control {d[1]:#x} is not a valid DPP16 control on {d[6]}")
  src, valid = _DPP16[ctl[0]](lane, lane % 16, lane - lane % 16, ctl[1], L)
  return np.clip(src, 0, L - 1), np.broadcast_to(valid, (L,))


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


def sdwa_field(sel: int) -> tuple[int, int]:
  """SDWA select (BYTE_0..3, WORD_0/1) -> (shift, width). (The native tier reads it: native/codegen.py.)"""
  return (sel * 8, 8) if sel < 4 else ((sel - 4) * 16, 16)


def sdwa_src(v, sel: int, sext: int):
  if sel == 6:  # DWORD
    return v
  sh, w = sdwa_field(sel)
  x = (np.asarray(v).astype(U32) >> U32(sh)) & U32((1 << w) - 1)
  return np.where(x >> U32(w - 1), x | U32(0xffffffff ^ ((1 << w) - 1)), x) if sext else x


def sdwa_dst(new, old, sel: int, unused: int):
  """Place a result in the selected bits; the rest is zero (UNUSED_PAD), sign (UNUSED_SEXT) or old (PRESERVE)."""
  if sel == 6:
    return new
  sh, w = sdwa_field(sel)
  mask = U32(((1 << w) - 1) << sh)
  val = (new << U32(sh)) & mask
  if unused == 2:
    return (old & ~mask) | val
  if unused == 1:
    return val | np.where(((new >> U32(w - 1)) & U32(1)).astype(bool), ~U32((1 << (sh + w)) - 1), U32(0))
  return val


OMOD = {1: 2.0, 2: 4.0, 3: 0.5}  # the omod field -> the factor a float result is multiplied by


def outmod(v: np.ndarray, bits: int, clamp: int, omod: int) -> np.ndarray:
  """VOP3 output modifiers on a float result: omod (x2, x4, /2) then clamp to [0, 1] (NaN -> 0). (The native tier
  emits the same: native/codegen.Compiler.output_modifier.)"""
  ft = {16: np.float16, 64: np.float64}.get(bits, np.float32)
  ut = {16: np.uint16, 64: np.uint64}.get(bits, np.uint32)
  x = v.astype(ut).view(ft)
  with np.errstate(all="ignore"):
    if omod:  # (a NaN by x86's rule, as pcode's float arithmetic: numpy's f16 loops pick by CPU)
      x = fop("*", x, ft(OMOD[omod]))
    if clamp:
      x = np.where(np.isnan(x), ft(0), np.clip(x, ft(0), ft(1)))
  return x.astype(ft).view(ut)


# the (exponent, mantissa) fields of an IEEE float of 16, 32, 64 bits
FLOAT_FIELDS = {16: (0x7c00, 0x3ff), 32: (0x7f800000, 0x7fffff), 64: (0x7ff << 52, (1 << 52) - 1)}


def flush_denormals(v, bits: int, n: int, keep: np.ndarray, first: int = 0) -> np.ndarray:
  """The n float elements of `bits` bits at the bottom of raw values v (a packed pair: n = 2; from element `first`
  on: FMA_MIXHI's high half alone), each denormal one
  turned into the zero of its sign where `keep` (per wave, (waves, 1) bool) is false: MODE.FP_DENORM's flush, sign
  respecting: a zero exponent field clears the mantissa. (The native tier emits the same:
  native/codegen.Compiler.flush_denormals.)"""
  v = np.asarray(v)
  back = v.dtype if v.dtype.kind == "u" else np.dtype(U64 if v.dtype.itemsize == 8 else U32)
  t = U64 if max(bits * n, 8 * back.itemsize) > 32 else U32  # (an SDWA-selected word of an f64 operand: 32 bits)
  v = v.astype(t, copy=False)
  expo, man = FLOAT_FIELDS[bits]
  for k in range(first, n):
    sh = bits * k
    v = np.where(((v & t(expo << sh)) == 0) & ~keep, v & ~t(man << sh), v)
  return v.astype(back, copy=False)
