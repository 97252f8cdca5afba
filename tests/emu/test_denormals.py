"""MODE.FP_DENORM: float arithmetic flushes denormal inputs and results to the zero of their sign as the wave's MODE
register asks (the kernel descriptor's FLOAT_DENORM_MODE_32 / _16_64, then S_DENORM_MODE / S_SETREG), on both tiers.
The oracle is numpy's IEEE arithmetic (denormals kept) with the flushes applied around it as LLVM's AMDGPUUsage
describes the field: 0 flushes inputs and results, 1 results only, 2 inputs only, 3 none; sign respecting. Moves,
selects and class tests see denormals as they are."""
import shutil

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.verify.reliability import kernel

TINY = 2.0 ** -130  # an f32 denormal
X = np.array([TINY, -TINY, 2.0 ** -70, -2.0 ** -70, 1.5, 2.0 ** -126, 3e-39, 1.0], np.float32)
Y = np.array([1.0, 1.0, 2.0 ** -60, 2.0 ** -60, 2.0, 0.5, -1.0, 2.0 ** -140], np.float32)


def ftz(a: np.ndarray, on) -> np.ndarray:
  """Denormal elements of a float array -> the zero of their sign where `on`."""
  a = np.asarray(a)
  den = (a != 0) & (np.abs(a) < np.finfo(a.dtype).tiny)
  return np.where(den & on, np.copysign(a.dtype.type(0), a), a)


def oracle_f32(x, y, mode: int) -> np.ndarray:
  """(mul, x + 0, mov, class is denormal, max(x, y)) per lane, as raw bits."""
  fin, fout = not mode & 1, not mode & 2
  xi, yi = ftz(x, fin), ftz(y, fin)
  with np.errstate(all="ignore"):
    mul, add, mx = ftz(xi * yi, fout), ftz(xi + np.float32(0), fout), ftz(np.maximum(xi, yi), fout)
  cls = ((x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)).astype(np.uint32)
  return np.stack([mul.view(np.uint32), add.view(np.uint32), x.view(np.uint32), cls, mx.view(np.uint32)], 1)


SWITCH = {  # FP_DENORM on (keep all), off (flush f32), the waits, the scalar load/store suffix's dword form
  "gfx1100": ("s_denorm_mode 0xf", "s_denorm_mode 0xc", "s_waitcnt lgkmcnt(0)", "s_waitcnt vmcnt(0)", "b32"),
  "gfx1200": ("s_denorm_mode 0xf", "s_denorm_mode 0xc", "s_wait_kmcnt 0", "s_wait_loadcnt 0", "b32"),
  "gfx942": ("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3", "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 0",
             "s_waitcnt lgkmcnt(0)", "s_waitcnt vmcnt(0)", "dword"),
}
# x * y: a denormal product for y = +-2**-60, a normal one for 1.0, one below the denormals for 2**-100
X_SW = np.float32([2.0 ** -70])
Y_SW = np.array([2.0 ** -60, -2.0 ** -60, 1.0, 2.0 ** -100], np.float32)


def _products(tier_runs, arch, steps: str, mode32: int, cols: int, xs=X_SW, ys=Y_SW):
  """Lane l loads x = xs[l % len] and y = ys[l % len] into v2, v3 and runs `steps` under descriptor f32 mode
  `mode32`, which leave `cols` dwords from v4 on: both tiers' rows (asserted equal), how many native block runs,
  x and y."""
  kwait, vwait, w = SWITCH[arch][2:]
  d2, d4 = ("b64", "b128") if w == "b32" else ("dwordx2", "dwordx4")
  store = {2: f"global_store_{d2} v1, v[4:5], s[2:3] offset:512",
           5: f"global_store_{d4} v1, v[4:7], s[2:3] offset:512\n  global_store_{w} v1, v8, s[2:3] offset:528"}[cols]
  body = f"""
  s_load_{d2} s[2:3], s[0:1], 0x0
  {kwait}
  v_lshlrev_b32 v1, 3, v0
  global_load_{d2} v[2:3], v1, s[2:3]
  {vwait}
  {steps}
  v_mul_u32_u24 v1, {4 * cols}, v0
  {store}"""
  if arch == "gfx1200":  # (RDNA4's name for hardware register 1)
    body = body.replace("HW_REG_MODE", "HW_REG_WAVE_MODE")
  lanes = 64 if arch == "gfx942" else 32
  co = kernel(arch, body, extra=f"  .amdhsa_float_denorm_mode_32 {mode32}\n")
  x, y = np.resize(np.float32(xs), lanes), np.resize(np.float32(ys), lanes)

  def go():
    buf = np.zeros(128 + cols * lanes, np.uint32)
    buf[:2 * lanes:2], buf[1:2 * lanes:2] = x.view(np.uint32), y.view(np.uint32)
    launch(co, "k", grid=1, block=lanes, args=[buf])
    return buf[128:].reshape(lanes, cols)
  (r0, e0, _), (r1, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  np.testing.assert_array_equal(r1, r0)
  return r0, runs, x, y


# mul (gfx1100: VOPD's dual mul), x + 0 (VOP3, an inline 0), mov (VOPD's dual mov), class (the denormal bits 4 and
# 7: 0x90), max: v4..v8
F32 = {
  "gfx1100": """v_dual_mul_f32 v4, v3, v2 :: v_dual_mov_b32 v9, v2
  v_add_f32_e64 v5, 0, v2
  v_mov_b32 v6, v9
  v_cmp_class_f32 vcc_lo, v2, 0x90
  v_cndmask_b32 v7, 0, 1, vcc_lo
  v_max_f32 v8, v2, v3""",
  "gfx942": """v_mul_f32 v4, v2, v3
  v_add_f32_e64 v5, 0, v2
  v_mov_b32 v6, v2
  v_mov_b32 v10, 0x90
  v_cmp_class_f32 vcc, v2, v10
  v_cndmask_b32 v7, 0, 1, vcc
  v_max_f32 v8, v2, v3""",
}
F32["gfx1200"] = F32["gfx1100"].replace("v_max_f32", "v_max_num_f32")


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("arch", sorted(F32))
def test_f32_mode(tier_runs, arch, mode):
  """FLOAT_DENORM_MODE_32 = mode: a product below the normal range is flushed unless results keep denormals, a
  denormal operand of an add or max reads as zero unless inputs keep them (VOP3 with an inline 0, VOPD's dual mul),
  while the dual mov and the class test see the denormal as it is. Before: every mode kept denormals (mode 3)."""
  got, runs, x, y = _products(tier_runs, arch, F32[arch], mode, 5, X, Y)
  np.testing.assert_array_equal(got, oracle_f32(x, y, mode))
  assert runs > 0


LOAD4 = """
  s_load_b64 s[2:3], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v1, 4, v0
  global_load_b128 v[2:5], v1, s[2:3]
  s_waitcnt vmcnt(0)"""  # (gfx1100: lane l's four dwords of the buffer into v2..v5)
F16_F64 = LOAD4 + """
  v_add_f16 v6, 0, v2
  v_pk_mul_f16 v7, v2, v3
  v_mul_f64 v[8:9], v[4:5], 1.0
  v_mul_f32 v10, 1.0, v3
  v_mul_u32_u24 v1, 20, v0
  global_store_b128 v1, v[6:9], s[2:3] offset:512
  global_store_b32 v1, v10, s[2:3] offset:528"""


@pytest.mark.parametrize("mode", [0, 3])
def test_f16_f64_mode(tier_runs, mode):
  """FLOAT_DENORM_MODE_16_64 = mode flushes f16 (one and packed) and f64 denormals, and leaves f32 to its own field
  (kept: 3). Lane l: an f16 pair, a 32-bit word read as f16 pair and as f32, an f64."""
  co = kernel("gfx1100", F16_F64, extra=f"  .amdhsa_float_denorm_mode_16_64 {mode}\n  "
                                         ".amdhsa_float_denorm_mode_32 3\n")
  h = np.array([[2.0 ** -20, 1.0], [-2.0 ** -24, 2.0 ** -10], [0.5, -2.0 ** -15], [3.0, 2.0 ** -14]], np.float16)
  g = np.array([[2.0 ** -10, 2.0 ** -6], [1.0, 2.0 ** -10], [2.0 ** -3, 2.0 ** -2], [1.0, 0.0]], np.float16)
  d = np.array([2.0 ** -1050, -2.0 ** -1030, 1.0, 2.0 ** -1022])

  def go():
    buf = np.zeros(128 + 160, np.uint32)
    rows = buf[:128].reshape(32, 4)
    rows[:, 0] = np.resize(h.view(np.uint32).ravel(), 32)
    rows[:, 1] = np.resize(g.view(np.uint32).ravel(), 32)
    rows[:, 2:4] = np.resize(d, 32).view(np.uint32).reshape(32, 2)
    launch(co, "k", grid=1, block=32, args=[buf])
    return rows.copy(), buf[128:].reshape(32, 5)
  (r0, e0, _), (r1, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  rows, got = r0
  on = mode == 0
  a, b = rows[:, 0].copy().view(np.float16).reshape(32, 2), rows[:, 1].copy().view(np.float16).reshape(32, 2)
  with np.errstate(all="ignore"):
    add = ftz(ftz(a[:, 0], on) + np.float16(0), on)
    pk = ftz(ftz(a, on) * ftz(b, on), on)
    f64 = ftz(ftz(rows[:, 2:4].copy().view(np.float64)[:, 0], on) * 1.0, on)
  np.testing.assert_array_equal(got[:, 0] & 0xffff, add.view(np.uint16))
  np.testing.assert_array_equal(got[:, 1], pk.view(np.uint32).ravel())
  np.testing.assert_array_equal(got[:, 2:4].copy().view(np.float64)[:, 0].view(np.uint64), f64.view(np.uint64))
  np.testing.assert_array_equal(got[:, 4], rows[:, 1])  # f32 (mode 3): the word as it was (0x3c00: a denormal)
  np.testing.assert_array_equal(r1[1], got)


@pytest.mark.parametrize("arch", sorted(SWITCH))
def test_mode_switches(tier_runs, arch):
  """The descriptor flushes f32 denormals; S_DENORM_MODE 0xf (gfx10+) or S_SETREG of MODE[5:4] (gfx9, as clang-22
  brackets an f32 division) keeps them for the product in between, then flushing is back; S_GETREG reads MODE's
  FP_DENORM field each time. Before: S_DENORM_MODE changed nothing (a note)."""
  on, off = SWITCH[arch][:2]
  r, _, x, y = _products(tier_runs, arch, f"""v_mul_f32 v4, v2, v3
  {on}
  v_mul_f32 v5, v2, v3
  s_getreg_b32 s4, hwreg(HW_REG_MODE, 4, 4)
  {off}
  v_mul_f32 v6, v2, v3
  s_getreg_b32 s5, hwreg(HW_REG_MODE, 4, 4)
  v_mov_b32 v7, s4
  v_mov_b32 v8, s5""", 0, 5)
  p = x * y
  np.testing.assert_array_equal(r[:, 0], ftz(p, True).view(np.uint32))
  np.testing.assert_array_equal(r[:, 1], p.view(np.uint32))
  np.testing.assert_array_equal(r[:, 2], ftz(p, True).view(np.uint32))
  assert (r[:, 3] == 0xf).all() and (r[:, 4] == 0xc).all(), (r[0, 3], r[0, 4])  # (f16/f64: kept throughout)


@pytest.mark.parametrize("sync", ["s_barrier", ""])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_mode_flushes_after_a_block_kept_denormals(tier_runs, arch, sync):
  """The descriptor keeps f32 denormals (the native tier then runs blocks compiled without the flush); S_DENORM_MODE
  / S_SETREG turns flushing on, and the product after it is flushed on both tiers: in the next block (after the
  barrier), and in the same block (which flushes by the mode because it writes a hardware register)."""
  r, runs, x, y = _products(tier_runs, arch, f"""v_mul_f32 v4, v2, v3
  {SWITCH[arch][1]}
  {sync}
  v_mul_f32 v5, v2, v3""", 3, 2)
  p = x * y
  np.testing.assert_array_equal(r, np.stack([p.view(np.uint32), ftz(p, True).view(np.uint32)], 1))
  assert runs > 0


CL = """
__kernel void k(__global float *o, __global const float *a, __global const float *b) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  o[4 * i] = a[i] * b[i];
  o[4 * i + 1] = a[i] + b[i];
  o[4 * i + 2] = __builtin_fmaf(a[i], b[i], a[i]);
  o[4 * i + 3] = a[i] / b[i];
}"""


@pytest.mark.parametrize("daz", [False, True])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_clang_denorms_are_zero(tier_runs, arch, daz):
  """clang-22 with -cl-denorms-are-zero sets FLOAT_DENORM_MODE_32 to 0 and leaves the flushing to the hardware: the
  products, sums and fmas come out flushed on both tiers; without it (mode 3) they are IEEE's. The correctly rounded
  division runs its Newton steps with denormals on (s_denorm_mode 15 / 12 on gfx1100, s_setreg of MODE[5:4] on
  gfx942): IEEE's quotient wherever it and the operands are normal (or zero)."""
  from gputwin.verify.runner import clang_cl
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    pytest.skip("clang-22 / ld.lld-22 not installed (CI installs them: .ci/run)")
  co = clang_cl(CL, arch, flags=("-O2", "-cl-fp32-correctly-rounded-divide-sqrt",
                                 *(("-cl-denorms-are-zero",) if daz else ())))
  n = 256
  rng = np.random.default_rng(7)
  a = (np.ldexp(rng.uniform(1, 2, n), rng.integers(-140, -50, n)) * rng.choice([-1, 1], n)).astype(np.float32)
  b = np.ldexp(rng.uniform(1, 2, n), rng.integers(-80, 10, n)).astype(np.float32)
  a[::7] = np.float32(TINY) * rng.uniform(1, 64, a[::7].size).astype(np.float32)

  def go():
    out = np.zeros(4 * n, np.float32)
    launch(co, "k", grid=n // 64, block=64, args=[out, a, b])
    return out.reshape(n, 4)
  (r0, e0, _), (r1, e1, _) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  ai, bi = ftz(a, daz), ftz(b, daz)
  with np.errstate(all="ignore"):
    fma = (ai.astype(np.float64) * bi + ai).astype(np.float32)  # exact product in f64, one rounding of the sum
    want = np.stack([ftz(ai * bi, daz), ftz(ai + bi, daz), ftz(fma, daz)], 1)
    q = a / b
  assert (np.abs(want) < np.finfo(np.float32).tiny).any()  # (the inputs reach the denormal range)
  np.testing.assert_array_equal(r0[:, :3].view(np.uint32), want.view(np.uint32))
  normal = lambda x: (x == 0) | (np.abs(x) >= np.finfo(np.float32).tiny)
  sure = normal(a) & normal(b) & normal(q)
  assert sure.sum() > n // 4
  np.testing.assert_array_equal(r0[sure, 3].view(np.uint32), q[sure].view(np.uint32))
  np.testing.assert_array_equal(r1.view(np.uint32), r0.view(np.uint32))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942", "gfx950"])
def test_random_float_encodings_flush_alike_on_both_tiers(arch):
  """Every random encoding (gputwin.isa.strategies) whose instruction MODE.FP_DENORM acts on (op.info "ftz": VOP1/2/3,
  VOP3P packed and mixed, VOPC, VOPD halves, DPP/SDWA forms, SALU floats), on registers full of f32, f16 and f64
  denormals and each wave with its own random FP_DENORM field: the interpreter's and the native tier's state agree
  bit for bit (the native code reads the wave's MODE row; the interpreter's per-wave path, as after an S_SETREG)."""
  import zlib
  from gputwin import errors
  from gputwin.emu import native
  from gputwin.emu.amd.decode import MODE
  from tests.emu.test_jit import both_tiers, compiled_encodings

  def prepare(eng, op, rng):
    eng.HW[:, MODE] = rng.integers(0, 16, eng.W).astype(np.uint32) << 4
    eng.written["hw"] = True  # (waves with different modes: only after a write to MODE)
    for F in (eng.V, eng.S[:, :106]):
      sign = rng.integers(0, 2, F.shape).astype(np.uint32) << 31
      f32 = rng.integers(1, 1 << 23, F.shape).astype(np.uint32) | sign
      f16 = rng.integers(1, 1 << 10, F.shape).astype(np.uint32) * 0x10001 | sign | sign >> 16
      f64hi = rng.integers(0, 1 << 20, F.shape).astype(np.uint32) | sign
      pick = rng.random(F.shape)
      F[:] = np.where(pick < 0.2, f32, np.where(pick < 0.35, f16, np.where(pick < 0.45, f64hi, F)))

  ftz = lambda op: bool(op.info.get("ftz") or op.info.get("ftz_out", (0,))[0] or any(
    o.info.get("ftz") for o in op.info.get("pair", ())))
  ours = {n for n, c in vars(errors).items() if isinstance(c, type) and issubclass(c, errors.GputwinError)}
  both, kinds, bad = 0, set(), []
  for s, prog, op, blk, L, seed in compiled_encodings(arch, 1, ftz):
    (ka, a), (kb, b) = both_tiers(prog, blk, L, zlib.crc32(s.data) + seed, prepare)
    if ka == "error":  # (random operands the interpreter rejects: with one of our errors, never a Python one)
      assert a.split(":")[0] in ours, f"{s.encoding} {'/'.join(s.opcodes)} {s.data.hex()}: {a}"
      continue
    both += 1
    kinds.add(op.inst.op)
    if not (ka == kb and (all(np.array_equal(x, y) for x, y in zip(a, b)) if ka == "ok" else True)):
      bad.append(f"{s.encoding} {'/'.join(s.opcodes)} {s.data.hex()}: {ka}/{kb}")
  assert not native.FAILED, native.FAILED[:3]
  assert both > 100 and len(kinds) > 50, (both, len(kinds))
  assert not bad, f"{len(bad)} of {both} differ:\n" + "\n".join(bad[:40])


MIX = LOAD4 + """
  v_fma_mix_f32 v6, v2, v3, 0 op_sel_hi:[0,0,0]
  v_mov_b32 v7, v5
  v_fma_mixlo_f16 v7, v4, v3, 0 op_sel_hi:[0,0,0]
  v_mov_b32 v8, v5
  v_fma_mixhi_f16 v8, v4, v3, 0 op_sel_hi:[0,0,0]
  v_mul_u32_u24 v1, 12, v0
  global_store_b96 v1, v[6:8], s[2:3] offset:512"""


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_fma_mix_results(tier_runs, mode):
  """V_FMA_MIX_F32's f32 result follows FLOAT_DENORM_MODE_32, V_FMA_MIXLO/MIXHI_F16's f16 result _16_64 (both fields
  `mode`): a denormal result is flushed unless results keep denormals, and only the half the instruction writes
  (the other half of the register, an f16 denormal here, is kept as it was). Lane l: x (f32) * y (f32) -> an f32
  result, z (f32) * y -> an f16 one; w: the register's old pair. Before: the results were never flushed."""
  co = kernel("gfx1100", MIX, extra=f"  .amdhsa_float_denorm_mode_16_64 {mode}\n  "
                                    f".amdhsa_float_denorm_mode_32 {mode}\n")
  x = np.array([2.0 ** -70, -2.0 ** -70, 1.5, 2.0 ** -60], np.float32)
  y = np.array([2.0 ** -60, 2.0 ** -60, 2.0, -2.0 ** -70], np.float32)
  z = np.array([2.0 ** -10, 2.0 ** -3, 1.0, 2.0 ** 50], np.float32)
  w = np.array([[2.0 ** -20, -2.0 ** -17], [1.0, 2.0 ** -24], [-2.0 ** -15, 0.5], [2.0 ** -16, 2.0 ** -16]],
               np.float16).view(np.uint32).ravel()

  def go():
    buf = np.zeros(128 + 96, np.uint32)
    rows = buf[:128].reshape(32, 4)
    rows[:] = np.stack([np.resize(a, 32) for a in (x.view(np.uint32), y.view(np.uint32), z.view(np.uint32), w)], 1)
    launch(co, "k", grid=1, block=32, args=[buf])
    return buf[128:].reshape(32, 3)
  (r0, e0, _), (r1, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  np.testing.assert_array_equal(r1, r0)
  out = not mode & 2  # (inputs here are normal: only the results' flush matters)
  xs, ys, zs, ws = (np.resize(a, 32) for a in (x, y, z, w))
  with np.errstate(all="ignore"):
    f32 = ftz(xs * ys, out).view(np.uint32)
    f16 = ftz((zs * ys).astype(np.float16), out).view(np.uint16).astype(np.uint32)  # (exact in f32: one rounding)
  np.testing.assert_array_equal(r0[:, 0], f32)
  np.testing.assert_array_equal(r0[:, 1], ws & 0xffff0000 | f16)
  np.testing.assert_array_equal(r0[:, 2], ws & 0xffff | f16 << 16)
  assert runs > 0
