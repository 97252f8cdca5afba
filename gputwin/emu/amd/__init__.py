"""The AMD frontend of the shared machine (gfx1100, gfx1200, gfx942, gfx950): decode through gputwin.isa, binding to
the vendor pseudocode (decode.py), effective addresses (memory.py), DPP/SDWA/omod lane routing (lanes.py), WMMA/MFMA
operand layouts (matrix.py) and the ABI's initial wave state (abi.py). `FRONTEND` implements
gputwin.emu.frontend.Frontend."""
from __future__ import annotations

import numpy as np

from gputwin.emu.amd import abi, decode, lanes, matrix, memory
from gputwin.emu.program import Op, Src
from gputwin.isa import decode as isa_decode

U32, U64 = np.uint32, np.uint64


class Amd:
  name, align = "amd", 4
  va_bits = 64  # global/flat/scratch/SMEM bodies take a 64-bit ADDR: a buffer anywhere in the 48-bit space works
  special_inputs = decode.SPECIAL_INPUTS
  apertures = abi.APERTURES
  bind = staticmethod(decode.build_op)
  memop = staticmethod(memory.memop)
  deliver = staticmethod(memory.deliver)
  matrix_check = staticmethod(matrix.check)
  matrix = staticmethod(matrix.execute)
  init_waves = staticmethod(abi.init_waves)
  user_sgprs = staticmethod(abi.user_sgprs)

  @staticmethod
  def decode(text: bytes, arch: str, offset: int, wave: int):
    return isa_decode(text, arch, offset=offset, wave=wave)

  @staticmethod
  def special(family: str) -> dict[str, int]:
    return decode.SPECIAL["cdna" if family == "cdna" else "rdna"]

  @staticmethod
  def cycle_rows(family: str) -> tuple:
    return decode.CYCLE_ROWS[family]

  @staticmethod
  def computed(code: int) -> bool:
    return code in decode.APERTURE or code in (decode.VCCZ, decode.EXECZ, decode.SCC_CODE)

  @staticmethod
  def sreg(eng, ix, code: int, dwords: int = 1) -> np.ndarray:
    """SSRC code -> (waves, 1): SGPRs, VCC/EXEC/M0, VCCZ/EXECZ/SCC, the shared/private apertures."""
    if code in decode.APERTURE:  # 64-bit reads give the aperture base, 32-bit reads its high half
      return np.full((eng.nwaves(ix), 1), decode.APERTURE[code] << (32 * (dwords - 1)), U64 if dwords == 2 else U32)
    if code in (decode.VCCZ, decode.EXECZ):
      base = eng.sp["vcc"] if code == decode.VCCZ else eng.sp["exec"]
      z = eng.S[ix, base] == 0
      if eng.L == 64:
        z &= eng.S[ix, base + 1] == 0
      return z.astype(U32)[:, None]
    if code == decode.SCC_CODE:
      return eng.scc[ix][:, None]
    if dwords == 1:
      return eng.S[ix, code][:, None]
    return eng.join(eng.S[ix, code:code + dwords], axis=1)[:, None]

  @staticmethod
  def source_lanes(v: np.ndarray, op: Op, L: int) -> np.ndarray:
    return lanes.dpp_source(v, op.info["dpp"], L)

  @staticmethod
  def write_mask(op: Op, L: int) -> np.ndarray:
    return lanes.dpp_write_mask(op.info["dpp"], L)

  @staticmethod
  def select_inputs(eng, st: dict, op: Op) -> None:
    sd = op.info["sdwa"]
    for i in range(2):
      if f"S{i}" in st:
        st[f"S{i}"] = lanes.sdwa_src(st[f"S{i}"], sd[2 * i], sd[2 * i + 1])

  @staticmethod
  def select_output(new: np.ndarray, old: np.ndarray, op: Op) -> np.ndarray:
    return lanes.sdwa_dst(new, old, op.info["sdwa"][4], op.info["sdwa"][5])

  @staticmethod
  def output_modifier(v: np.ndarray, d: Src, op: Op) -> np.ndarray:
    return lanes.outmod(v, d.bits, op.info["clamp"], op.info["omod"])

  @staticmethod
  def denormals_kept(eng) -> bool:
    """Does every wave keep every denormal (MODE.FP_DENORM all ones, as the descriptor set it: no hardware register
    written this batch)? The native tier then runs blocks compiled without the flush (tier.Tier.key)."""
    return not eng.written["hw"] and int(eng.HW[0, decode.MODE]) & decode.FP_DENORM == decode.FP_DENORM

  @staticmethod
  def denormals(eng, v, bits: int, n: int, ix, result: bool, first: int = 0):
    """MODE.FP_DENORM on a float input (result False) or D0 (True) of `bits`-bit elements (`first`..n-1): flushed in
    the waves whose MODE bit for it is clear (decode.denorm_bit)."""
    bit = decode.denorm_bit(bits, result)
    if not eng.written["hw"]:  # no hardware register written this batch: every wave has the descriptor's MODE
      return v if int(eng.HW[0, decode.MODE]) >> bit & 1 else \
          lanes.flush_denormals(v, bits, n, np.bool_(False), first)
    keep = ((eng.HW[ix, decode.MODE] >> U32(bit)) & U32(1)).astype(bool)[:, None]
    return v if keep.all() else lanes.flush_denormals(v, bits, n, keep, first)


FRONTEND = Amd()
