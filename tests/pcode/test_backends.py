"""The two backends of the pcode IR agree: every body the LLVM backend (pcode/llvm.py) compiles gives the numpy
backend's bits (compile.py + runtime.py) on edge operands, opcode by opcode, for all lanes and some lanes active.

Operands: signed zeros, infinities, quiet and signalling NaNs with payloads, denormals, the largest finite values
and the extreme integers of f16/f32/f64 and i16/i32/i64 (f16 values in either half of a dword), and random bits.
Each lane runs the body alone with per-lane state (a wave's lane-mask outputs, `D0.u64[laneId] = ...`, are compared
at the lane's own bit). Memory is one byte buffer in which each lane addresses its own region (ADDR and the
effective address the Calc*Addr built-ins answer are given per lane, the same to both); the buffers must agree after.
Bodies that index register files or read other lanes are an executor's to bind (tests/emu/test_jit.py compares the
native tier with the interpreter on those); the LLVM backend declines them, with a reason, as it declines what it
cannot match bit for bit (a conversion under the wave's own ROUND_MODE, transcendental built-ins...).

NaN payloads agree too: both backends apply x86's rule (the first NaN operand, quieted; else the default NaN) rather
than numpy's loops' choice (gputwin/emu/UPSTREAM.md #3).
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest

from gputwin.errors import PcodeError
from gputwin.isa.vendor import tables
from gputwin.pcode import FlatMemory, analysis, llvm, semantics

FAMILIES = {"rdna3": 32, "rdna4": 32, "cdna": 64}  # lanes per wave the bodies run for
ROUNDS = 4  # per opcode: two batches with every lane active, two with a random half

F16 = [0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7e01, 0x7d00, 0xfd55, 0x0001, 0x83ff, 0x3c00, 0xbe00, 0x7bff, 0x0400]
F32 = [0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fa00001, 0xffc12345, 0x7f812345, 0x00000001,
       0x807fffff, 0x00800000, 0x3f800000, 0xbfc00000, 0x7f7fffff, 0x4f000000, 0xcf000000, 0x7fffffff, 0x80000001,
       0xffffffff] + [hi << 16 | lo for hi, lo in ((0x7c00, 0x7e01), (0x3c00, 0xbc00), (0x0001, 0x8000), (0, 0x7d00))]
F64 = [0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0x7ff4000000000001,
       0xfff8000000000123, 0x0000000000000001, 0x800fffffffffffff, 0x0010000000000000, 0x3ff0000000000000,
       0xbff8000000000000, 0x7fefffffffffffff, 0x41e0000000000000, 0xc3e0000000000000, (1 << 63) - 1,
       (1 << 63) + 1, (1 << 64) - 1]


def pool(w: int) -> np.ndarray:
  """Edge values of a w-bit operand: the float and integer edges that fit, plus the others truncated to w bits."""
  vals = F16 + F32 + (F64 if w > 32 else [])
  return np.array(sorted({v & ((1 << w) - 1) for v in vals}), dtype=np.uint64)


def operands(rng, w: int, n: int) -> np.ndarray:
  edge = pool(w)[rng.integers(0, len(pool(w)), n)]
  rand = rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
  return np.where(rng.random(n) < 0.7, edge, rand) & np.uint64((1 << w) - 1)


@functools.cache
def compiled(fam: str):
  """(numpy semantics by name, LLVM host functions by name, declined name -> why) for every body of a family that
  the numpy backend compiles: one LLVM module a family."""
  sems = {}
  for name in sorted(tables(fam).pcode):
    try:
      sems[name] = semantics(fam, name)
      sems[name].program
    except PcodeError:
      sems.pop(name, None)
  fns, declined = llvm.compile_host({n: s.program for n, s in sems.items()}, FAMILIES[fam], speed=1)  # (optimised:
  # code that relied on poison would show; at 1, not the native tier's 2, to compile ~1,000 bodies in seconds)
  return sems, fns, declined


REGION = 4096  # bytes of memory each lane addresses (its own: lanes never touch each other's)
OFFSETS = ("OFFSET", "OFFSET0", "OFFSET1", "INST_OFFSET")


class Memory(FlatMemory):
  """The numpy backend's memory: a byte buffer, and the given effective address for every Calc*Addr built-in."""

  def __init__(self, data: np.ndarray, address: np.ndarray):
    self.data, self.address = data, address

  def effective(self, *args):
    return self.address

  CalcGlobalAddr = CalcFlatAddr = CalcScratchAddr = CalcBufferAddr = CalcDsAddr = effective
  CalcScalarGlobalAddr = CalcScalarBufferAddr = CalcScalarScratchAddr = effective


def state_of(rng, p, L: int) -> dict:
  """Edge operands for every input; for a body that touches memory, addresses inside each lane's own region."""
  state = {}
  for nm, w in p.inputs.items():
    v = operands(rng, min(w, 64), L)
    if w > 64:
      v = np.array([int(a) << 64 | int(b) for a, b in zip(operands(rng, w - 64, L), v)], dtype=object)
    if p.mem and nm in ("ADDR", "ADDR_BASE"):
      v = np.arange(L, dtype=np.uint64) * np.uint64(REGION) + rng.integers(0, 64, L, dtype=np.uint64) * np.uint64(8)
    elif p.mem and nm in ("SGPR_ADDR", "M0"):  # a wave's base or LDS offset (laneId * 4 added by the body: ADDTID)
      v = np.full(L, rng.integers(0, 64) * 8, np.uint64)
    elif nm == "SIMM16":  # an instruction's immediate: the same for every lane (S_NOP loops over it)
      v = np.full(L, v[0], np.uint64)
    elif p.mem and nm in OFFSETS:
      v = rng.integers(0, 4, L, dtype=np.uint64)
    state[nm] = v
  return state


def compare(fam: str, name: str) -> str:
  """'exact', 'numpy raises', or a description of the first mismatch."""
  sems, fns, _ = compiled(fam)
  sem, fn, L = sems[name], fns[name], FAMILIES[fam]
  p = sem.program
  rng = np.random.default_rng(zlib.crc32(f"{fam}/{name}".encode()))
  out = "exact"
  for k in range(ROUNDS):
    state = state_of(rng, p, L)
    active = np.ones(L, bool) if k < ROUNDS // 2 else rng.random(L) < 0.5
    address = np.arange(L, dtype=np.uint64) * np.uint64(REGION) + rng.integers(0, 64, L, dtype=np.uint64) * np.uint64(8)
    data = rng.integers(0, 256, (L + 1) * REGION, dtype=np.uint8)
    theirs = data.copy()
    try:
      ref = sem({nm: (v.astype(np.uint32) if p.inputs[nm] <= 32 else v)[None, :] for nm, v in state.items()},
                exec=active[None, :], mem=Memory(theirs, address[None, :]))
    except PcodeError:
      return "numpy raises"
    got = fn(state, active, data, address)
    for nm, w in p.outputs.items():
      want = np.broadcast_to(np.asarray(ref[nm], dtype=object if w > 64 else np.uint64), (1, L))[0]
      have = got[nm]
      if w > 64:
        want, have = want.astype(object) & ((1 << w) - 1), have.astype(object)
      else:
        want = want & np.uint64((1 << w) - 1)
      if analysis.bit_written(p.body, nm):  # a wave's lane mask: each lane's own bit
        lane = np.arange(L, dtype=np.uint64)
        want, have = want >> lane & np.uint64(1), have >> lane & np.uint64(1)
      diff = want != have
      if not diff.any():
        continue
      i = int(np.argmax(diff))
      return (f"{nm}: numpy {int(want[i]):#x}, llvm {int(have[i]):#x} in lane {i} (active {bool(active[i])}) for "
              + ", ".join(f"{k}={int(v[i]):#x}" for k, v in state.items()))
    if (theirs != data).any():
      at = int(np.argmax(theirs != data))
      return f"memory: byte {at:#x} numpy {theirs[at]:#x}, llvm {data[at]:#x} (lane {at // REGION})"
  return out


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_backends_agree_bit_for_bit(fam):
  sems, fns, declined = compiled(fam)
  assert set(fns) | set(declined) == set(sems) and not set(fns) & set(declined)
  assert all(declined.values())  # each with its reason
  results = {name: compare(fam, name) for name in fns}
  wrong = {n: r for n, r in results.items() if r != "exact"}
  assert not wrong, wrong
  exact = len(results)
  print(f"{fam}: {exact} bodies bit-exact, {len(declined)} declined by the LLVM backend")
  alu = [n for n, s in sems.items() if not (s.mem or s.regfiles or s.wave_level)]  # nothing an executor binds
  assert exact >= 0.65 * len(alu)  # the backend covers most of them (a regression that declines many shows here)


def test_lane_masks_keep_inactive_lanes():
  """V_CMP_LT_F32 alone: an inactive lane keeps the D0 it was given, an active one sets its own bit."""
  p = semantics("rdna3", "V_CMP_LT_F32").program
  fn = llvm.host(p, 32)
  s0 = np.full(32, 0x3f800000, np.uint64)  # 1.0 < 2.0
  s1 = np.full(32, 0x40000000, np.uint64)
  active = np.arange(32) % 2 == 0
  out = fn({"S0": s0, "S1": s1, "D0": np.full(32, 0xf0, np.uint64)}, active)["D0"]
  lanes = np.arange(32)
  assert ((out[active] >> lanes[active].astype(np.uint64)) & np.uint64(1) == 1).all()
  assert (out[~active] == 0xf0).all()


def _many(fam: str, name: str, state: dict) -> int:
  """Lanes of `name` whose D0 differs between the backends, over the given operand arrays (every lane active)."""
  sem = semantics(fam, name)
  p = sem.program
  state = {k: v for k, v in state.items() if k in p.inputs}
  n = len(next(iter(state.values())))
  active = np.ones(n, bool)
  got = llvm.host(p, FAMILIES[fam])(state, active, np.zeros(8, np.uint8), np.zeros(n, np.uint64))["D0"]
  ref = sem({k: v.astype(np.uint32)[None, :] if p.inputs[k] <= 32 else v[None, :] for k, v in state.items()},
            exec=active[None, :])["D0"]
  want = np.broadcast_to(np.asarray(ref, np.uint64), (1, n))[0] & np.uint64((1 << p.outputs["D0"]) - 1)
  return int(np.count_nonzero(want != got))


def test_float_builtins_on_many_operands():
  """The float built-ins and f16 arithmetic on every f16 value (unary) and on 100,000 random and near-tie operands:
  one rounding (f16 fma through an f64 sum made round-to-odd, f64 -> f16 through f32 rounded to odd), frexp's
  normalised denormals, ldexp past the exponent range, NaNs by x86's rule (f16's too: runtime.h16)."""
  rng = np.random.default_rng(7)
  every = np.arange(1 << 16, dtype=np.uint64)
  for name in ("V_SQRT_F16", "V_FREXP_MANT_F16", "V_FREXP_EXP_I16_F16", "V_TRUNC_F16", "V_FLOOR_F16", "V_RNDNE_F16",
               "V_FRACT_F16", "V_RCP_F16"):
    assert _many("rdna3", name, {"S0": every}) == 0, name
  n = 100_000
  h = [rng.integers(0, 1 << 16, n).astype(np.uint64) for _ in range(3)]
  near = [(rng.integers(0, 2, n) << 15 | rng.integers(12, 18, n) << 10 | rng.integers(0, 1024, n)).astype(np.uint64)
          for _ in range(3)]  # exponents near 1.0: products and sums land on f16 ties
  for name, ops in (("V_FMA_F16", h), ("V_FMA_F16", near), ("V_ADD_F16", h), ("V_SUB_F16", near), ("V_MUL_F16", h),
                    ("V_DIV_FIXUP_F16", h), ("V_MED3_F16", h)):
    assert _many("rdna3", name, {f"S{i}": v for i, v in enumerate(ops)}) == 0, name
  f32 = rng.integers(0, 1 << 32, n, dtype=np.uint64)
  e = (rng.integers(-300, 300, n) & 0xffffffff).astype(np.uint64)
  f64 = rng.integers(0, 1 << 63, n, dtype=np.uint64) << np.uint64(1) | rng.integers(0, 2, n, dtype=np.uint64)
  for name, st in (("V_LDEXP_F32", {"S0": f32, "S1": e}), ("V_LDEXP_F16", {"S0": h[0], "S1": e & np.uint64(0xffff)}),
                   ("V_FREXP_MANT_F32", {"S0": f32}), ("V_SQRT_F32", {"S0": f32}), ("V_RNDNE_F32", {"S0": f32}),
                   ("V_FREXP_MANT_F64", {"S0": f64}), ("V_SQRT_F64", {"S0": f64}), ("V_EXP_F32", {"S0": f32}),
                   ("V_LOG_F32", {"S0": f32}), ("V_SIN_F32", {"S0": f32}), ("V_COS_F16", {"S0": h[0]}),
                   ("V_EXP_F16", {"S0": h[1]})):
    assert _many("rdna3", name, st) == 0, name


def test_transcendentals_are_the_c_librarys():
  """V_EXP_F32 is pow(2, x) in f64 by the C library (Python's float power), rounded once to f32, on both backends
  (numpy's own f32 power is a SIMD approximation that differs from it in the last bit, by CPU)."""
  x = np.random.default_rng(3).uniform(-120, 120, 4096).astype(np.float32)
  want = np.array([2.0 ** float(v) for v in x], np.float64).astype(np.float32).view(np.uint32)
  sem = semantics("rdna3", "V_EXP_F32")
  st = {"S0": x.view(np.uint32).astype(np.uint64)}
  got = llvm.host(sem.program, 32)(st, np.ones(x.size, bool), np.zeros(8, np.uint8), np.zeros(x.size, np.uint64))
  ref = np.asarray(sem({"S0": x.view(np.uint32)[None, :]}, exec=np.ones((1, x.size), bool))["D0"]).reshape(-1)
  assert (ref.astype(np.uint32) == want).all() and (got["D0"].astype(np.uint32) == want).all()


def test_host_code_imports_only_the_c_library():
  """Object code that calls a compiler-rt routine (here i128 division, __divti3) is refused with the name, in every
  process: MCJIT would abort the host on it where no loaded library defines it. The bodies above compile into code
  that imports only C library functions (compile_host checks each module the same way)."""
  import llvmlite.binding as lb
  _, tm, _ = llvm.native()
  mod = lb.parse_assembly("define i128 @q(i128 %a, i128 %b) {\n  %r = sdiv i128 %a, %b\n  ret i128 %r\n}\n")
  obj = tm.emit_object(mod)
  assert "__divti3" in llvm.undefined_symbols(obj)
  with pytest.raises(RuntimeError, match="__divti3"):
    llvm.checked(obj)
  sin = tm.emit_object(lb.parse_assembly("declare double @sin(double)\ndefine double @f(double %x) {\n"
                                         "  %r = call double @sin(double %x) nobuiltin\n  ret double %r\n}\n"))
  with pytest.raises(RuntimeError, match="imports sin"):  # (by its own name: any add_symbol may have moved it)
    llvm.checked(sin)


def test_c_library_calls_are_bound_to_the_numpy_backends_functions():
  """A body's C library call (V_LOG_F32: log2) goes to the very function the numpy backend calls, under a name of
  gputwin's own: llvmlite's add_symbol is process-wide, and tests/compiler/test_host_backend.py binds `log2` to
  numpy's log2 for its host code, which differs from the C library's in the last bit for some operands (the native
  tier then disagreed with the interpreter on V_LOG_F32 in every later test of that process)."""
  import llvmlite.binding as lb
  from gputwin.pcode.runtime import libc_address
  text, _ = llvm._host_ir("f", semantics("rdna3", "V_LOG_F32").program, 32, {})
  _, tm, _ = llvm.native()
  obj = tm.emit_object(lb.parse_assembly(llvm.INTRINSICS + text))
  assert [n for n in llvm.undefined_symbols(obj) if "libm" in n or "log" in n] == ["gputwin.libm.log2"]
  assert llvm.checked(obj) == obj
  assert lb.address_of_symbol("gputwin.libm.log2") == libc_address("log2")
