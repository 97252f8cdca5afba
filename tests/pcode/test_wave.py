"""Whole-wave behaviour: EXEC masking, per-lane condition bits in VCC, cross-lane register access, memory and
atomics, packed and rounding-mode conversions. References are written here with Python ints and struct."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from gputwin.errors import PcodeError
from gputwin.isa.vendor import tables
from gputwin.pcode import FlatMemory, semantics

from . import oracle as O
from .conftest import checked

FAMS = ("rdna3", "rdna4", "cdna")
RNG = np.random.default_rng(1234)


def fams_with(name):
  return [f for f in FAMS if name in tables(f).pcode]


def f32bits(xs):
  return np.array(xs, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("fam", fams_with("V_ADD_F32"))
def test_exec_mask_keeps_inactive_lanes(fam):
  W, L = 3, 32
  a, b = f32bits(RNG.standard_normal((W, L))), f32bits(RNG.standard_normal((W, L)))
  old = RNG.integers(0, 2**32, (W, L), dtype=np.uint32)
  ex = RNG.random((W, L)) < 0.5
  d0 = semantics(fam, "V_ADD_F32")({"S0": a, "S1": b, "D0": old}, exec=ex)["D0"]
  for w in range(W):
    for l in range(L):
      want = O.arith("add", 32, int(a[w, l]), int(b[w, l])) if ex[w, l] else int(old[w, l])
      assert int(d0[w, l]) == want
  checked(fam, "V_ADD_F32", "EXEC mask: inactive lanes unchanged")


@pytest.mark.parametrize("fam,name", [(f, n) for n in ("V_ADD_CO_U32",) for f in fams_with(n)])
def test_carry_out_per_lane(fam, name):
  W, L = 2, 64
  a = RNG.integers(0, 2**32, (W, L), dtype=np.uint32)
  wrap = np.uint32(0xFFFFFFFF) - a + 1  # sums to exactly 2**32: carry with a zero result
  b = np.where(RNG.random((W, L)) < 0.3, wrap, RNG.integers(0, 2**32, (W, L), dtype=np.uint32)).astype(np.uint32)
  ex = RNG.random((W, L)) < 0.8
  vcc = np.full((W, 1), 0xFFFF0000FFFF0000, dtype=np.uint64)
  out = semantics(fam, name)({"S0": a, "S1": b, "VCC": vcc, "D0": np.zeros((W, L), np.uint32)}, exec=ex, lanes=L)
  for w in range(W):
    want = int(vcc[w, 0])
    for l in range(L):
      if ex[w, l]:
        s = int(a[w, l]) + int(b[w, l])
        want = (want & ~(1 << l)) | (int(s >> 32) << l)
        assert int(out["D0"][w, l]) == s & 0xFFFFFFFF
    assert int(np.asarray(out["VCC"]).reshape(W)[w]) == want
  checked(fam, name, "D0 and VCC carry bit per lane, EXEC-masked")


@pytest.mark.parametrize("fam", fams_with("V_CNDMASK_B32"))
def test_cndmask_selects_by_vcc_bit(fam):
  W, L = 2, 32
  a, b = (RNG.integers(0, 2**32, (W, L), dtype=np.uint32) for _ in range(2))
  vcc = RNG.integers(0, 2**32, (W, 1), dtype=np.uint64)
  d0 = semantics(fam, "V_CNDMASK_B32")({"S0": a, "S1": b, "VCC": vcc}, lanes=L)["D0"]
  for w in range(W):
    for l in range(L):
      assert int(d0[w, l]) == (int(b[w, l]) if (int(vcc[w, 0]) >> l) & 1 else int(a[w, l]))
  checked(fam, "V_CNDMASK_B32", "lane select by VCC bit")


@pytest.mark.parametrize("fam", fams_with("V_READLANE_B32"))
def test_readlane_reads_other_lanes(fam):
  W, L, R = 4, 64 if fam == "cdna" else 32, 8
  vgpr = RNG.integers(0, 2**32, (W, L, R), dtype=np.uint32)
  src0 = RNG.integers(0, R, (W, 1)).astype(np.uint32)
  lane = RNG.integers(0, 256, (W, 1)).astype(np.uint32)
  out = semantics(fam, "V_READLANE_B32")({"VGPR": vgpr, "SRC0": src0, "S1": lane, "D0": np.zeros((W, 1), np.uint32)},
                                         lanes=L)
  for w in range(W):
    assert int(np.asarray(out["D0"]).reshape(W)[w]) == int(vgpr[w, int(lane[w, 0]) % L, int(src0[w, 0])])
  checked(fam, "V_READLANE_B32", "whole-wave VGPR read, lane select masked to wave size")


@pytest.mark.parametrize("fam", fams_with("V_PERMLANE16_B32"))
def test_permlane16(fam):
  W, L, R = 2, 32, 4
  vgpr = RNG.integers(0, 2**32, (W, L, R), dtype=np.uint32)
  s1, s2 = (RNG.integers(0, 2**32, (W, 1), dtype=np.uint64).astype(np.uint32) for _ in range(2))
  ex = RNG.random((W, L)) < 0.75
  before = vgpr.copy()
  semantics(fam, "V_PERMLANE16_B32")({"VGPR": vgpr, "SRC0": np.uint32(1), "VDST": np.uint32(3), "S1": s1, "S2": s2},
                                     exec=ex, lanes=L)
  for w in range(W):
    sel = (int(s2[w, 0]) << 32) | int(s1[w, 0])
    for l in range(L):
      row, i = divmod(l, 16)
      want = int(before[w, row * 16 + ((sel >> (4 * i)) & 15), 1]) if ex[w, l] else int(before[w, l, 3])
      assert int(vgpr[w, l, 3]) == want
  assert (vgpr[:, :, :3] == before[:, :, :3]).all()
  checked(fam, "V_PERMLANE16_B32", "cross-lane swizzle within rows of 16, EXEC-masked writes")


@pytest.mark.parametrize("fam", fams_with("DS_BPERMUTE_B32"))
def test_ds_bpermute(fam):
  W, L, R = 2, 64 if fam == "cdna" else 32, 4
  vgpr = RNG.integers(0, 2**32, (W, L, R), dtype=np.uint32)
  vgpr[:, :, 0] = RNG.integers(0, 1 << 12, (W, L)).astype(np.uint32)  # byte addresses
  ex = RNG.random((W, L)) < 0.8
  before = vgpr.copy()
  semantics(fam, "DS_BPERMUTE_B32")({"VGPR": vgpr, "ADDR": np.uint32(0), "DATA0": np.uint32(1), "VDST": np.uint32(2),
                                     "OFFSET": np.uint32(0)}, exec=ex, lanes=L)
  for w in range(W):
    for l in range(L):
      src = (int(before[w, l, 0]) // 4) % (32 if fam != "cdna" else 64)
      want = (int(before[w, src, 1]) if ex[w, src] else 0) if ex[w, l] else int(before[w, l, 2])
      assert int(vgpr[w, l, 2]) == want
  checked(fam, "DS_BPERMUTE_B32", "backward permute through whole-wave VGPR access")


PAIRS = (("GLOBAL_LOAD_B32", "GLOBAL_STORE_B32"), ("GLOBAL_LOAD_DWORD", "GLOBAL_STORE_DWORD"))


@pytest.mark.parametrize("fam,load,store", [(f, l, s) for f in FAMS for l, s in PAIRS if l in tables(f).pcode])
def test_global_store_then_load(fam, load, store):
  W, L = 2, 32
  mem = FlatMemory(1 << 14)
  addr = (np.arange(W * L, dtype=np.uint64).reshape(W, L) * 4 + 64)
  data = RNG.integers(0, 2**32, (W, L), dtype=np.uint32)
  ex = RNG.random((W, L)) < 0.7
  semantics(fam, store)({"ADDR": addr, "v_addr": addr, "VDATA": data}, exec=ex, mem=mem)
  for w in range(W):
    for l in range(L):
      got = struct.unpack_from("<I", mem.data, int(addr[w, l]))[0]
      assert got == (int(data[w, l]) if ex[w, l] else 0)
  out = semantics(fam, load)({"ADDR": addr, "v_addr": addr, "VDATA": np.zeros((W, L), np.uint32)},
                             exec=np.ones((W, L), bool), mem=mem)
  assert (np.asarray(out["VDATA"]) == np.where(ex, data, 0)).all()
  checked(fam, store, "little-endian store to memory, EXEC-masked")
  checked(fam, load, "load from memory")


@pytest.mark.parametrize("fam,name", [(f, n) for n in ("DS_ADD_U32", "GLOBAL_ATOMIC_ADD_U32") for f in fams_with(n)])
def test_atomic_add_same_address_is_serialised(fam, name):
  """Every active lane adds to one address: the lanes' read-modify-writes happen one after another in lane order."""
  W, L = 2, 32
  mem = FlatMemory(1 << 10)
  struct.pack_into("<I", mem.data, 16, 1000)
  data = RNG.integers(0, 2**20, (W, L), dtype=np.uint32)
  ex = RNG.random((W, L)) < 0.6
  st = {"ADDR": np.full((W, L), 16, np.uint64), "DATA": data, "RETURN_DATA": np.zeros((W, L), np.uint32)}
  sem = semantics(fam, name)
  st.update({k: st["ADDR"] for k in ("v_addr", "vgpr_a") if k in sem.inputs})
  out = sem(st, exec=ex, mem=mem)
  total = 1000
  for w in range(W):
    for l in range(L):
      if ex[w, l]:
        assert int(out["RETURN_DATA"][w, l]) == total
        total = (total + int(data[w, l])) & 0xFFFFFFFF
  assert struct.unpack_from("<I", mem.data, 16)[0] == total
  # distinct addresses take the vectorised path
  mem2 = FlatMemory(1 << 10)
  a2 = np.arange(W * L, dtype=np.uint64).reshape(W, L) * 4
  st2 = dict(st, **{k: a2 for k in ("ADDR", "v_addr", "vgpr_a") if k in st})
  sem(st2, exec=ex, mem=mem2)
  got = np.frombuffer(mem2.data[:W * L * 4].tobytes(), np.uint32).reshape(W, L)
  assert (got == np.where(ex, data, 0)).all()
  checked(fam, name, "atomic read-modify-write: serialised on address conflicts, RETURN_DATA = old value")


@pytest.mark.parametrize("fam", fams_with("S_AND_SAVEEXEC_B32"))
def test_and_saveexec(fam):
  ex = np.array([[0xF0F0F0F0], [0x0000FFFF]], np.uint64)
  s0 = np.array([[0xFF00FF00], [0xFFFF0000]], np.uint32)
  out = semantics(fam, "S_AND_SAVEEXEC_B32")({"EXEC": ex, "S0": s0})
  assert [int(v) for v in np.asarray(out["EXEC"]).ravel()] == [0xF000F000, 0]
  assert [int(v) for v in np.asarray(out["D0"]).ravel()] == [0xF0F0F0F0, 0x0000FFFF]
  assert [int(v) for v in np.asarray(out["SCC"]).ravel()] == [1, 0]
  checked(fam, "S_AND_SAVEEXEC_B32", "EXEC/D0/SCC")


@pytest.mark.parametrize("fam", fams_with("S_CBRANCH_SCC0"))
def test_branch(fam):
  pc, simm = np.array([[0x1000], [0x1000]], np.uint64), np.array([[0xFFFE], [3]], np.uint32)
  out = semantics(fam, "S_CBRANCH_SCC0")({"PC": pc, "SIMM16": simm, "SCC": np.array([[0], [1]], np.uint32)})
  assert [int(v) for v in np.asarray(out["PC"]).ravel()] == [0x1000 - 8 + 4, 0x1004]
  checked(fam, "S_CBRANCH_SCC0", "PC: sign-extended SIMM16 * 4 + 4")


def f16bits(x: float) -> int:
  return struct.unpack("<H", struct.pack("<e", x))[0]


@pytest.mark.parametrize("fam", fams_with("V_CVT_F16_F32"))
def test_f32_to_f16_ties_and_denormals(fam):
  ties = [1.0 + 2**-11, 1.0 + 3 * 2**-11, 2**-24 * 1.5, 2**-24 * 0.5, 2**-24 * 2.5, 65520.0, 65519.99, -(1.0 + 2**-11),
          2**-14 - 2**-25, 6e-8, -0.0, 1e-30]
  x = f32bits(ties)[None, :]
  d0 = semantics(fam, "V_CVT_F16_F32")({"S0": x})["D0"].ravel()
  for v, bits, g in zip(ties, x.ravel(), d0):
    assert int(g) & 0xFFFF == O.round_to(O.to_float(int(bits), 32), 16, int(bits) >> 31), v
  checked(fam, "V_CVT_F16_F32", "round-to-nearest-even ties, f16 denormals, overflow")


@pytest.mark.parametrize("fam", fams_with("V_CVT_PK_RTZ_F16_F32"))
def test_cvt_pk_rtz(fam):
  xs = [1.0 + 2**-11, 1.0 + 2**-10 + 2**-11, 70000.0, -70000.0, -(1.0 + 2**-11), 0.1, 2**-25, float("inf")]
  a, b = f32bits(xs)[None, :], f32bits(xs[::-1])[None, :]
  d0 = semantics(fam, "V_CVT_PK_RTZ_F16_F32")({"S0": a, "S1": b})["D0"].ravel()

  def rtz(bits):
    from fractions import Fraction
    x = O.to_float(int(bits), 32)
    if x in (float("inf"), float("-inf")):
      return f16bits(x)
    r = O.round_to(x, 16, int(bits) >> 31)
    if abs(Fraction(O.to_float(r, 16)) if (r & 0x7C00) != 0x7C00 else Fraction(10**9)) > abs(Fraction(x)):
      r -= 1  # one step toward zero (same sign, magnitude - 1 ulp; inf -> max finite)
    return r
  for i in range(len(xs)):
    assert int(d0[i]) == rtz(a[0, i]) | (rtz(b[0, i]) << 16), xs[i]
  checked(fam, "V_CVT_PK_RTZ_F16_F32", "round toward zero via ROUND_MODE, packed halves")


@pytest.mark.parametrize("fam", fams_with("V_PK_ADD_F16"))
def test_packed_f16_add(fam):
  lo, hi = RNG.integers(0, 2**16, (2, 64), dtype=np.uint32)
  lo2, hi2 = RNG.integers(0, 2**16, (2, 64), dtype=np.uint32)
  lo[:19], hi[:19] = [e for e in (0, 0x8000, 1, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x3C00,
                                  0xBC00, 0x3800, 0x4200, 0x3C01, 0x6400, 0x0200, 0x1400)], 0x7BFF
  s0, s1 = (lo | (hi << 16))[None, :], (lo2 | (hi2 << 16))[None, :]
  d0 = semantics(fam, "V_PK_ADD_F16")({"S0": s0, "S1": s1})["D0"].ravel()
  for i in range(64):
    for sh in (0, 16):
      want = O.arith("add", 16, (int(s0[0, i]) >> sh) & 0xFFFF, (int(s1[0, i]) >> sh) & 0xFFFF)
      got = (int(d0[i]) >> sh) & 0xFFFF
      assert (O.is_nan_bits(got, 16) if want == -1 else got == want), (hex(int(s0[0, i])), hex(int(s1[0, i])))
  checked(fam, "V_PK_ADD_F16", "both f16 halves vs oracle")


@pytest.mark.parametrize("fam,name", [(f, n) for n in ("V_CVT_PK_BF16_F32",) for f in fams_with(n)])
def test_bf16_round_nearest_even(fam, name):
  vals = [1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-8 + 2**-20, -(1.0 + 2**-8), 3.4e38, float("inf"), 1e-40, -0.0, 2.0]
  a = f32bits(vals)
  nan = np.array([0x7FC00001, 0x7F800001], np.uint32)
  a = np.concatenate([a, nan])[None, :]
  d0 = semantics(fam, name)({"S0": a, "S1": a})["D0"].ravel()
  for i in range(a.shape[1]):
    bits = int(a[0, i])
    got = int(d0[i]) & 0xFFFF
    if O.is_nan_bits(bits, 32):
      assert (got & 0x7F80) == 0x7F80 and got & 0x7F, hex(got)
      continue
    # bf16 = f32 with 8 significand bits: round the f32 value to 8 bits by our own RNE, then take the top half
    from fractions import Fraction
    x = O.to_float(bits, 32)
    sign = bits >> 31
    if x in (float("inf"), float("-inf")) or x == 0:
      want = bits >> 16
    else:
      m, e = abs(Fraction(x)), 0
      while m >= 2:
        m, e = m / 2, e + 1
      while m < 1:
        m, e = m * 2, e - 1
      e2 = max(e, -126)
      q = abs(Fraction(x)) / Fraction(2) ** (e2 - 7)
      n, r = divmod(q.numerator, q.denominator)
      if 2 * r > q.denominator or (2 * r == q.denominator and n & 1):
        n += 1
      val = Fraction(n) * Fraction(2) ** (e2 - 7)
      top = struct.unpack("<I", struct.pack("<f", float(val)))[0] >> 16 if val < Fraction(2) ** 128 else 0x7F80
      want = top | (sign << 15)
    assert got == want, (vals[i] if i < len(vals) else bits, hex(got), hex(want))
  checked(fam, name, "bf16 round-to-nearest-even, NaN stays NaN")


def test_bad_pcode_names_line_and_column():
  from gputwin.pcode.parser import parse
  with pytest.raises(PcodeError) as e:
    parse("D0.u32 = S0.u32 +\nif", "rdna3", "V_FAKE")
  assert (e.value.arch, e.value.inst, e.value.line) == ("rdna3", "V_FAKE", 2) and e.value.col == 1
  with pytest.raises(PcodeError, match="V_FAKE:1:10"):
    parse("D0.u32 = @", "rdna3", "V_FAKE")


def test_excluded_instruction_is_not_supported():
  with pytest.raises(PcodeError, match="IMAGE_GET_LOD is not supported"):
    semantics("rdna3", "IMAGE_GET_LOD")


def test_unimplemented_builtin_raises_not_no_op():
  sem = semantics("cdna", "V_MFMA_F32_32X32X2_F32")
  with pytest.raises(PcodeError, match="MATRIX_MULTIPLY_ACCUMULATE.*not supported"):
    sem({"S0": np.zeros((1, 64), np.uint32)})


def test_target_names_map_to_families():
  assert semantics("gfx942", "V_FMA_F32") is semantics("cdna", "V_FMA_F32")
  assert semantics("gfx1201", "V_FMA_F32").family == "rdna4"


PI_DIGITS = ("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211"
             "706798214808651328230664709384460955058223172535940812848111745028410270193852110555964462294895"
             "493038196")


@pytest.mark.parametrize("fam", fams_with("V_TRIG_PREOP_F64"))
def test_trig_preop_chunks_of_two_over_pi(fam):
  """S1 = k selects bits [53k, 53k + 53) of 2/pi, scaled by 2**-(53k + 53) (2/pi from 200 decimal digits of pi)."""
  from decimal import Decimal, getcontext
  from fractions import Fraction
  getcontext().prec = 190
  frac = Fraction(Decimal(2) / Decimal(PI_DIGITS))
  ks = np.array([[0, 1, 2, 3]], np.uint32)
  out = semantics(fam, "V_TRIG_PREOP_F64")({"S0": np.full((1, 4), 0x3FF0000000000000, np.uint64), "S1": ks})
  for k, got in zip(ks.ravel(), np.asarray(out["D0"]).ravel()):
    chunk = int(frac * 2 ** (53 * (int(k) + 1))) & ((1 << 53) - 1)
    assert float(Fraction(chunk, 2 ** (53 * (int(k) + 1)))) == float(np.uint64(got).view(np.float64))
  checked(fam, "V_TRIG_PREOP_F64", "53-bit chunks of 2/pi (errata: the manual's mask keeps the wrong end)")


@pytest.mark.parametrize("fam", FAMS)
def test_every_body_runs_or_says_not_supported(fam):
  """Each compiled body runs on small in-range operands, or raises PcodeError (a hook or register file it needs):
  never another exception."""
  from gputwin.errors import PcodeError as PE
  from gputwin.pcode.errata import excluded
  rng = np.random.default_rng(7)
  L = 64 if fam == "cdna" else 32
  bad = []
  for name in tables(fam).pcode:
    if excluded(name):
      continue
    sem = semantics(fam, name)
    st = {k: (rng.integers(0, 64, (1, L)).astype(np.uint32 if w <= 32 else np.uint64) if w <= 64 else
              np.zeros((1, L), object)) for k, w in sem.inputs.items()}
    for k in ("SRC0", "VDST", "ADDR", "DATA0", "DATA1", "SIMM16", "SCC", "M0", "VCC", "EXEC", "SDST", "SSRC0"):
      if k in st:
        st[k] = st[k][:, :1] % 4
    st["VGPR"] = rng.integers(0, 64, (1, L, 256)).astype(np.uint32)
    st["SGPR"] = rng.integers(0, 64, (1, 1024)).astype(np.uint32)
    try:
      sem(st, exec=np.ones((1, L), bool), mem=FlatMemory(1 << 20), lanes=L)
    except PE:
      pass
    except Exception as e:  # noqa: BLE001 - the point is to catch anything else
      bad.append(f"{name}: {type(e).__name__}: {e}"[:160])
  assert not bad, f"{len(bad)} bodies crash: " + "; ".join(bad[:5])


@pytest.mark.parametrize("fam", FAMS)
def test_pc_is_64_bit_and_execz_is_derived(fam):
  out = semantics(fam, "S_SETPC_B64")({"S0": np.array([[0x1_2345_6788]], np.uint64)})
  assert int(np.asarray(out["PC"]).ravel()[0]) == 0x1_2345_6788
  pc = np.full((2, 1), 0x1_0000_0100, np.uint64)
  out = semantics(fam, "S_CBRANCH_EXECZ")({"EXEC": np.array([[0], [1]], np.uint64), "PC": pc,
                                           "SIMM16": np.array([[2], [2]], np.uint32)})
  assert [int(v) for v in np.asarray(out["PC"]).ravel()] == [0x1_0000_0100 + 12, 0x1_0000_0104]
  checked(fam, "S_SETPC_B64", "64-bit PC")
  checked(fam, "S_CBRANCH_EXECZ", "EXECZ derived from EXEC; taken/not-taken PC")


@pytest.mark.parametrize("fam,name,src,w", [(f, n, s, w) for f in FAMS for n, s, w in
                                           (("V_CVT_F32_F16", 0x7C01, 16), ("V_CVT_F64_F32", 0x7F800001, 32))])
def test_conversion_quiets_signalling_nan(fam, name, src, w):
  out = np.asarray(semantics(fam, name)({"S0": np.array([[src]], np.uint32)})["D0"]).ravel()[0]
  wo = 64 if "F64" in name.split("_")[2] else 32
  assert O.is_nan_bits(int(out), wo) and not O.is_snan_bits(int(out), wo)
  checked(fam, name, "signalling NaN in, quiet NaN out")


LOADS = [("GLOBAL_LOAD_I8", "GLOBAL_LOAD_SBYTE", 1, True), ("GLOBAL_LOAD_U16", "GLOBAL_LOAD_USHORT", 2, False),
         ("GLOBAL_LOAD_B64", "GLOBAL_LOAD_DWORDX2", 8, False), ("GLOBAL_LOAD_B128", "GLOBAL_LOAD_DWORDX4", 16, False)]


@pytest.mark.parametrize("fam,name,size,signed", [(f, n, s, sg) for f in FAMS for a, b, s, sg in LOADS
                                                  for n in (a, b) if n in tables(f).pcode])
def test_load_widths_and_sign_extension(fam, name, size, signed):
  mem = FlatMemory(1 << 12)
  mem.data[:] = np.frombuffer(RNG.bytes(1 << 12), np.uint8)
  addr = (np.arange(32, dtype=np.uint64) * 24 + 8)[None, :]
  out = np.asarray(semantics(fam, name)({"ADDR": addr, "v_addr": addr}, exec=np.ones((1, 32), bool), mem=mem)["VDATA"])
  for l in range(32):
    raw = int.from_bytes(mem.data[int(addr[0, l]):int(addr[0, l]) + size].tobytes(), "little")
    want = (O.sx(raw, 8 * size) & 0xFFFFFFFF) if signed else raw
    assert int(out.ravel()[l]) == want, (name, l)
  checked(fam, name, f"{8 * size}-bit little-endian load" + (", sign-extended" if signed else ""))


@pytest.mark.parametrize("fam", FAMS)
def test_llvm_f32_division_sequence_rounds_correctly(fam):
  """The compiler's f32 fdiv expansion (div_scale x2, rcp, Newton fma steps, div_fmas, div_fixup) run through the
  compiled semantics gives the correctly rounded quotient (reference: exact Fraction division, rounded by us).
  Half the operands make V_DIV_SCALE rescale (VCC = 1: denormal quotients, huge numerators, tiny denominators),
  which V_DIV_FMAS_F32 undoes by 2**64 or 2**-64 (the errata.py factor; the manual's 2**32 does not)."""
  from fractions import Fraction
  rng = np.random.default_rng(11)
  n = (rng.standard_normal(256) * 10.0 ** rng.integers(-12, 12, 256)).astype(np.float32)
  d = (rng.standard_normal(256) * 10.0 ** rng.integers(-12, 12, 256)).astype(np.float32)
  n[:4], d[:4] = [1.0, 0.0, 7.0, 1e-3], [3.0, 5.0, 0.0, float("inf")]  # exact zero, x/0 -> inf, x/inf -> 0
  ne = rng.integers(-126, 128, 128)  # rescaled: denormal quotients (2**-150..2**-120) and ones near the top (2**90..)
  qe = np.where(rng.random(128) < 0.6, rng.integers(-150, -120, 128), rng.integers(90, 128, 128))
  n[128:] = np.ldexp(rng.uniform(1, 2, 128), ne).astype(np.float32)
  d[128:] = np.ldexp(rng.uniform(1, 2, 128), np.clip(ne - qe, -126, 127)).astype(np.float32)
  N, D = n.view(np.uint32).reshape(4, 64), d.view(np.uint32).reshape(4, 64)  # four wave64s: VCC is one bit per lane
  W, L = N.shape

  def op(name, **st):
    out = semantics(fam, name)(st, exec=np.ones((W, L), bool), lanes=L)
    return out

  neg = lambda x: x ^ np.uint32(0x80000000)
  one = np.full((W, L), 0x3F800000, np.uint32)
  den = op("V_DIV_SCALE_F32", S0=D, S1=D, S2=N, VCC=np.zeros((W, 1), np.uint64))["D0"]
  r = op("V_DIV_SCALE_F32", S0=N, S1=D, S2=N, VCC=np.zeros((W, 1), np.uint64))
  num, vcc = r["D0"], r["VCC"]
  rcp = op("V_RCP_F32", S0=den)["D0"]
  e = op("V_FMA_F32", S0=neg(den), S1=rcp, S2=one)["D0"]
  rcp = op("V_FMA_F32", S0=e, S1=rcp, S2=rcp)["D0"]
  q = op("V_MUL_F32", S0=num, S1=rcp)["D0"]
  e = op("V_FMA_F32", S0=neg(den), S1=q, S2=num)["D0"]
  q = op("V_FMA_F32", S0=e, S1=rcp, S2=q)["D0"]
  e = op("V_FMA_F32", S0=neg(den), S1=q, S2=num)["D0"]
  q = op("V_DIV_FMAS_F32", S0=e, S1=rcp, S2=q, VCC=vcc)["D0"]
  res = op("V_DIV_FIXUP_F32", S0=q, S1=D, S2=N)["D0"].ravel()
  for i in range(W * L):
    x, y = float(n[i]), float(d[i])
    want = O.round_to(Fraction(x) / Fraction(y), 32) if y not in (0.0, float("inf")) else \
      O.round_to(math.copysign(math.inf, x) * math.copysign(1, y) if y == 0 else 0.0, 32)
    assert int(res[i]) == want, (float(n[i]), float(d[i]), hex(int(res[i])), hex(want))
  for name in ("V_DIV_SCALE_F32", "V_DIV_FMAS_F32", "V_DIV_FIXUP_F32"):
    checked(fam, name, "LLVM's f32 division sequence gives the correctly rounded quotient")


@pytest.mark.parametrize("fam,name", [(f, n) for n in ("DS_ADD_F64", "GLOBAL_ATOMIC_ADD_F64") for f in fams_with(n)])
def test_f64_atomic_add_returns_64_bit_old_value(fam, name):
  mem = FlatMemory(1 << 12)
  old = RNG.standard_normal(32)
  mem.data[:256] = np.frombuffer(old.tobytes(), np.uint8)
  data = RNG.standard_normal(32)
  addr = (np.arange(32, dtype=np.uint64) * 8)[None, :]
  sem = semantics(fam, name)
  st = {"ADDR": addr, "v_addr": addr, "vgpr_a": addr, "DATA": data.view(np.uint64)[None, :]}
  out = sem(st, exec=np.ones((1, 32), bool), mem=mem)
  assert (np.asarray(out["RETURN_DATA"]).astype(np.uint64).ravel() == old.view(np.uint64)).all()
  new = np.frombuffer(mem.data[:256].tobytes(), np.float64)
  for i in range(32):
    assert new[i] == float(old[i]) + float(data[i])  # one f64 rounding, as Python's float addition
  checked(fam, name, "f64 read-modify-write, RETURN_DATA is the 64-bit old value")


@pytest.mark.parametrize("fam", fams_with("DS_SWIZZLE_B32"))
def test_ds_swizzle_modes(fam):
  L = 64 if fam == "cdna" else 32
  offsets = [0x041F, 0x001F, 0x03E0 | 0x0007, 0x8000 | 0b00011011, 0x8000 | 0b10101010, 0x7C00 | 0x10]
  if fam != "cdna":
    offsets += [0xE000 | 0x00, 0xE000 | 0x03]
  W = len(offsets)
  data = RNG.integers(0, 2**32, (W, L), dtype=np.uint64).astype(np.uint32)
  ex = RNG.random((W, L)) < 0.8
  out = semantics(fam, "DS_SWIZZLE_B32")({"OFFSET": np.array(offsets, np.uint32)[:, None], "DATA": data},
                                         exec=ex, lanes=L)["RETURN_DATA"]
  for w, o in enumerate(offsets):
    for i in range(L):
      if not ex[w, i]:
        continue
      if o >= 0xE000:
        mask = o & 0x1F
        j = (int(f"{i & 0x1F:05b}"[::-1], 2) >> bin(mask).count("1")) | (i & mask) | (i & 0x20)
      elif o & 0x8000:
        j = 4 * (i // 4) + ((o >> (2 * (i % 4))) & 3)
      else:
        j = ((((i % 32) & (o & 31)) | ((o >> 5) & 31)) ^ ((o >> 10) & 31)) + 32 * (i // 32)
      want = int(data[w, j]) if ex[w, j] else 0
      assert int(out[w, i]) == want, (hex(o), i, j)
  checked(fam, "DS_SWIZZLE_B32", "bit-mask, quad-permute and FFT lane selection (erratum: vendor text is C)")


class _Sparse(FlatMemory):
  """Byte-addressed memory at arbitrary 64-bit addresses (a dict), to see the addresses a body uses."""

  def __init__(self):
    self.bytes, self.seen = {}, []

  def read(self, addr, bits):
    self.seen += [int(a) for a in np.asarray(addr).ravel()]
    n = bits // 8
    vals = [sum(self.bytes.get(int(a) + k, 0) << (8 * k) for k in range(n)) for a in np.asarray(addr).ravel()]
    return np.array(vals, dtype=np.uint64).astype(np.uint32 if bits <= 32 else np.uint64)

  def write(self, addr, vals, bits):
    for a, v in zip(np.asarray(addr).ravel(), np.asarray(vals).ravel()):
      for k in range(bits // 8):
        self.bytes[int(a) + k] = (int(v) >> (8 * k)) & 0xFF


WIDE = (("rdna3", "GLOBAL_LOAD_B32", "ADDR", False), ("rdna3", "S_LOAD_B64", "ADDR", True),
        ("cdna", "GLOBAL_LOAD_DWORD", "ADDR", False), ("cdna", "S_LOAD_DWORDX2", "SBASE", True),
        ("rdna4", "GLOBAL_LOAD_B32", "v_addr", False))


@pytest.mark.parametrize("fam,name,key,per_wave", WIDE)
def test_addresses_above_4gib_are_not_truncated(fam, name, key, per_wave):
  """Memory operands are as wide as the vendor operand table says (64-bit VGPR/SGPR pairs)."""
  mem = _Sparse()
  base = 0x7F12_3456_7800
  mem.write(np.array([base]), np.array([0x1122334455667788], np.uint64), 64)
  addr = np.array([[base]], np.uint64) if per_wave else np.full((1, 4), base, np.uint64)
  semantics(fam, name)({key: addr}, exec=None if per_wave else np.ones((1, 4), bool), mem=mem, lanes=4)
  assert mem.seen and min(mem.seen) == base, [hex(a) for a in mem.seen]
  checked(fam, name, "64-bit address reaches memory")
