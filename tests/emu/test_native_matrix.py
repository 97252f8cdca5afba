"""WMMA (gfx1100, gfx1200) and MFMA (gfx942, gfx950) in the native tier (emu/native/matrix.py) against the numpy
interpreter (emu/amd/matrix.py): bit-identical VGPRs and AccVGPRs on random register files with f16/bf16/f32 NaNs,
infinities, denormals and signed zeros, for every modelled opcode (the bench's and the suite's among them) and for
random encodings of them (gputwin.isa.strategies), AccVGPR moves; then clang-22 kernels (bench/kernels.cl's gemm,
tests/emu/kernels/matrix.cl) on both tiers against numpy."""
import json
import subprocess
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from gputwin.emu import core, native
from gputwin.emu.amd import matrix as layouts
from gputwin.emu.frontend import for_arch
from gputwin.emu.memory import GuestMemory
from gputwin.emu.program import Program
from gputwin.errors import GputwinError
from gputwin.isa import assemble, hwdata, strategies
from gputwin.isa.targets import target as target_info

pytest.importorskip("llvmlite")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the float8 oracle) is not installed")
F8_TYPES = {"fp8": ml_dtypes.float8_e4m3fn, "bf8": ml_dtypes.float8_e5m2, "fp8fnuz": ml_dtypes.float8_e4m3fnuz,
            "bf8fnuz": ml_dtypes.float8_e5m2fnuz}

TARGETS = {"gfx1100": 32, "gfx1200": 32, "gfx942": 64, "gfx950": 64}
# 16-bit specials (f16 and bf16: infinities, NaNs quiet and signalling, denormals, zeros, extremes) and f32 ones
SPECIAL16 = np.array([0x7c00, 0xfc00, 0x7e00, 0x7d01, 0x0001, 0x8001, 0x03ff, 0x8000, 0x0000, 0x7bff, 0xfbff, 0x3c00,
                      0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x007f, 0x807f, 0x7f7f, 0x3f80], np.uint32)
SPECIAL32 = np.array([0x7f800000, 0xff800000, 0x7fc00000, 0x7fa00001, 0xffc12345, 0x00000001, 0x807fffff, 0x7f7fffff,
                      0x80000000, 0x00000000, 0x3f800000], np.uint32)


def _fill(rng, shape, rate):
  """Random register words: finite halves/words of modest size, a fraction `rate` of specials."""
  lo = (rng.integers(0x2c00, 0x4c00, shape) | rng.integers(0, 2, shape) << 15).astype(np.uint32)  # f16 ~ 1/16..16
  hi = (rng.integers(0x3d00, 0x4100, shape) | rng.integers(0, 2, shape) << 15).astype(np.uint32)  # bf16 ~ 1/32..8
  x = lo | hi << 16
  x = np.where(rng.random(shape) < 0.25, rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32), x)
  s16 = SPECIAL16[rng.integers(0, len(SPECIAL16), shape)]
  x = np.where(rng.random(shape) < rate, (x & 0xffff0000) | s16, x)
  x = np.where(rng.random(shape) < rate, (x & 0xffff) | s16 << 16, x)
  return np.where(rng.random(shape) < rate, SPECIAL32[rng.integers(0, len(SPECIAL32), shape)], x).astype(np.uint32)


def _engine(prog, L, seed, rate):
  rng = np.random.default_rng(seed)
  W = 3
  eng = core.Engine(prog, GuestMemory("gpu0"), W, L, 256, 256 if prog.family == "cdna" else 0, 64, 0, np.arange(W),
                    None)
  eng.V[:] = _fill(rng, eng.V.shape, rate)
  eng.A[:] = _fill(rng, eng.A.shape, rate)
  eng.S[:, 126:126 + L // 32] = rng.integers(0, 1 << 32, (W, L // 32), dtype=np.uint64).astype(np.uint32)  # EXEC
  eng.pc[:] = prog.base
  return eng


def _both(prog, op, L, seed, rate=0.03):
  """The state after `op` on the interpreter and on the native tier, from the same random registers."""
  blk = native.compile_block(prog, op.pc, L)
  assert blk is not None and blk.ops[0] is op, op.text
  out = []
  for tier in ("interp", "native"):
    eng = _engine(prog, L, seed, rate)
    if tier == "interp":
      core.step(eng, op, slice(None))
    else:
      native.Native(eng).run(blk, slice(None))
    out.append((eng.V.copy(), eng.A.copy(), eng.pc.copy(), eng.count, eng.lane_count))
  return out


def _same(a, b, what):
  for name, x, y in zip(("VGPRs", "AccVGPRs", "PC", "count", "lanes"), a, b):
    if not np.array_equal(x, y):
      bad = np.argwhere(x != y).tolist() if isinstance(x, np.ndarray) else [x, y]
      raise AssertionError(f"{what}: {name} differ at {bad[:5]} of {len(bad)}")


def _program(arch, data):
  fam = target_info(arch).family
  end = assemble("s_trap 0\ns_endpgm", arch)  # (a trap stays interpreted: the block is the matrix op alone)
  return Program(data + end * 4, 0x1000, arch, fam, TARGETS[arch], for_arch(arch))


def _modelled(arch):
  fam = target_info(arch).family
  rows = json.loads((hwdata._DATA / "matrix.json").read_text())[fam]
  return [op for op in rows if (m := hwdata.matrix(fam, op)).layout and (fam != "cdna" or m.passes_on(arch))]


def _asm(arch, name):
  """One encoding of modelled opcode `name`: operands sized by its registers (C and D in AccVGPRs on CDNA)."""
  m = hwdata.matrix(target_info(arch).family, name)
  ra, rb, rc = m.regs
  reg = lambda f, i, n: f"{f}{i}" if n == 1 else f"{f}[{i}:{i + n - 1}]"
  cd = "a" if arch in ("gfx942", "gfx950") else "v"
  mods = " neg_lo:[1,0,0]" if m.a in ("IU8", "IU4") else ""
  c = "v140" if m.sparse else reg(cd, 0, rc)  # (sparse: D is also C, the indices in a VGPR)
  scales = ", v141, v142 op_sel:[1,1,0] op_sel_hi:[0,1,0]" if m.scale else ""  # (bytes 1 and 3)
  return f"{name.lower()} {reg(cd, 0, rc)}, {reg('v', 100, ra)}, {reg('v', 120, rb)}, {c}{scales}{mods}"


@pytest.mark.parametrize("arch", TARGETS)
def test_every_modelled_opcode_native_equals_interpreter(arch):
  """Each opcode amd/matrix.py models, C in VGPRs (RDNA) or AccVGPRs (CDNA), with few and with many specials."""
  names = _modelled(arch)
  assert names
  for name in names:
    prog = _program(arch, assemble(_asm(arch, name), arch))
    op = prog.op(0x1000)
    assert op.kind == "matrix"
    for seed, rate in ((1, 0.0), (2, 0.03), (3, 0.3)):
      a, b = _both(prog, op, TARGETS[arch], seed, rate)
      _same(a, b, f"{arch} {op.text} seed {seed}")
  assert not native.FAILED, native.FAILED[:3]


@pytest.mark.parametrize("arch", TARGETS)
def test_random_matrix_encodings_native_equal_interpreter(arch):
  """Random valid encodings (registers, C a constant, modifiers): where the interpreter runs one, the native tier
  gives the same bits; where it declines (a modifier or layout not modelled), the native tier declines too."""
  L, fam = TARGETS[arch], target_info(arch).family
  ran, declined, types = 0, 0, set()
  for seed in range(10):
    for s in strategies.batch(arch, seed=seed, wave=L, tame=80):
      if not any(hwdata.matrix(fam, o) for o in s.opcodes):
        continue
      prog = _program(arch, s.data)
      try:
        op = prog.op(0x1000)
      except Exception:
        continue
      if op.kind != "matrix":
        continue
      eng = _engine(prog, L, zlib.crc32(s.data), 0.03)
      try:
        core.step(eng, op, slice(None))
      except Exception:  # not modelled (or operands past the file): the native tier must not take it either
        blk = native.compile_block(prog, 0x1000, L)
        assert blk is None or blk.ops[0] is not op, op.text
        declined += 1
        continue
      ext = op.info["extent"]
      if ext[0] > 256 or ext[1] > 256:
        continue
      a, b = _both(prog, op, L, zlib.crc32(s.data))
      _same(a, b, f"{arch} {op.text}")
      ran += 1
      types.add(hwdata.matrix(fam, op.inst.op).a)
  assert not native.FAILED, native.FAILED[:3]
  print(f"{arch}: {ran} random matrix encodings on both tiers, {declined} declined by both; types {sorted(types)}")
  assert ran >= 20 and {"F16", "BF16"} | ({"I8", "F32"} if fam == "cdna" else {"IU8"}) <= types, (ran, types)


BENCH = Path(__file__).resolve().parents[2] / "bench" / "kernels.cl"


@pytest.mark.parametrize("arch", TARGETS)
def test_bench_gemm_runs_natively(tmp_path, monkeypatch, arch):
  """bench/kernels.cl's gemm (f16 128x128x64, clang-22): every wave-instruction native, the interpreter's bits,
  numpy's product."""
  from gputwin.emu import launch
  o, co = tmp_path / "k.o", tmp_path / "k.co"
  try:
    subprocess.run(["clang-22", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}",
                    "-nogpulib", "-O2", "-w", "-c", str(BENCH), "-o", str(o)], check=True)
    subprocess.run(["ld.lld-22", "-shared", str(o), "-o", str(co)], check=True)
  except (FileNotFoundError, subprocess.CalledProcessError):
    pytest.skip("clang-22 / ld.lld-22 missing")
  rng = np.random.default_rng(5)
  A, B = rng.standard_normal((128, 64)).astype(np.float16), rng.standard_normal((128, 64)).astype(np.float16)
  out = {}
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    C = np.zeros((128, 128), np.float32)
    st = launch(co.read_bytes(), "gemm", grid=(8, 8, 1), block=(TARGETS[arch], 1, 1),
                args=[A, B, C, np.int32(64), np.int32(128)], checks=False)
    out[mode] = (C, st)
  (ci, si), (cn, sn) = out["0"], out["force"]
  assert np.array_equal(ci.view(np.uint32), cn.view(np.uint32))
  np.testing.assert_allclose(cn, A.astype(np.float64) @ B.astype(np.float64).T, rtol=1e-5, atol=1e-5)
  assert sn.native_instructions == sn.instructions == si.instructions, (sn.native_instructions, sn.instructions)
  assert not native.FAILED, native.FAILED[:3]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_accvgpr_moves_native_equal_interpreter(arch):
  """V_ACCVGPR_READ/WRITE/MOV (the AccVGPR file in the native tier: runtime ctx C_A), random encodings."""
  L, ran = TARGETS[arch], 0
  for seed in range(6):
    for s in strategies.batch(arch, seed=seed, wave=L, tame=80):
      if not any("ACCVGPR" in o for o in s.opcodes):
        continue
      prog = _program(arch, s.data)
      op = prog.op(0x1000)
      try:
        native.supported(op, target_info(arch).family)
      except native.Unsupported:
        continue
      a, b = _both(prog, op, L, zlib.crc32(s.data))
      _same(a, b, f"{arch} {op.text}")
      ran += 1
  assert not native.FAILED, native.FAILED[:3]
  assert ran >= 6, ran


def test_accvgprs_past_the_allocation_stay_interpreted():
  """A block whose AccVGPR operands reach past the dispatch's allocation is declined (the interpreter then stops
  with its located error), and the native code is never handed such an engine."""
  prog = _program("gfx942", assemble("v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]", "gfx942"))
  eng = core.Engine(prog, GuestMemory("gpu0"), 2, 64, 32, 8, 64, 0, np.arange(2), None)
  tier = native.Tier.make(eng)
  blk = native.compile_block(prog, 0x1000, 64)
  assert blk is not None and blk.na == 16
  assert tier.block(0x1000, 2) is None
  enough = core.Engine(prog, GuestMemory("gpu0"), 2, 64, 32, 16, 64, 0, np.arange(2), None)
  assert native.Tier.make(enough).block(0x1000, 2) is not None
  with pytest.raises(GputwinError, match="AccVGPR 15 of 8"):
    tier.native.run(blk, slice(None))


@pytest.mark.parametrize("arch", TARGETS)
def test_suite_matrix_kernels_on_both_tiers(clang_co, monkeypatch, arch):
  """tests/emu/kernels/matrix.cl (clang-22): the same bits on both tiers, numpy's product, mostly native."""
  from gputwin.emu import launch
  r = np.random.default_rng(17)
  cases = {"mma16": (np.float16, np.float32, 16, 16, 16)}
  if arch in ("gfx942", "gfx950"):
    cases["mma32"] = (np.float16, np.float32, 32, 8, 32)
  if arch == "gfx1100":
    cases["wmma_i8"] = (np.int8, np.int32, 16, 16, 16)
  if arch in ("gfx1100", "gfx1200"):
    cases["wmma_i4"] = (np.int8, np.int32, 16, 16, 16)  # (A in -8..7, B in 0..15: the kernel's signedness)
  for name, (ti, to, m, k, n) in cases.items():
    lim = 128 if ti is np.int8 else 4
    A, B = r.integers(-lim, lim, (m, k)).astype(ti), r.integers(-lim, lim, (k, n)).astype(ti)
    if name == "wmma_i4":
      A, B = r.integers(-8, 8, (m, k)).astype(ti), r.integers(0, 16, (k, n)).astype(ti)
    C = r.integers(-1000, 1000, (m, n)).astype(to)
    out = {}
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = np.zeros((m, n), to)
      st = launch(clang_co(arch, "matrix"), name, grid=1, block=TARGETS[arch] if name != "mma32" else 64,
                  args=[D, A, B, C], checks=False)
      out[mode] = (D, st)
    (di, si), (dn, sn) = out["0"], out["force"]
    assert np.array_equal(di.view(np.uint32), dn.view(np.uint32)), name
    np.testing.assert_array_equal(dn, A.astype(to) @ B.astype(to) + C, err_msg=name)
    assert si.instructions == sn.instructions and sn.native_instructions >= 0.9 * sn.instructions, (name, sn)
  assert not native.FAILED, native.FAILED[:3]



def _finite(rng, ins: str, shape, f16=(5, 25)) -> np.ndarray:
  """Register words of finite elements with exponents from about 2**-10 to 2**10 (both signs); 8-bit integers: any
  bits; 8-bit floats: any code but 0x80 and those whose low seven bits are all ones (the NaNs of FNUZ and E4M3)
  or whose exponent field is all ones in E5M2 (0x7c..0x7f, 0xfc..0xff)."""
  if ins in ("IU8", "I8", "IU4"):
    return rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
  if ins == "F64":  # (register pairs: a random low word, a high word of sign, exponent 2**-10..2**10, mantissa)
    hi = rng.integers(0, 2, shape).astype(np.uint32) << 31 | rng.integers(1013, 1033, shape).astype(np.uint32) << 20 \
        | rng.integers(0, 1 << 20, shape).astype(np.uint32)
    return np.where(np.arange(shape[-2])[:, None] % 2 == 1, hi, rng.integers(0, 1 << 32, shape, dtype=np.uint64))
  if ins in ("FP8", "BF8"):
    ok = np.array([c for c in range(256) if c != 0x80 and c & 0x7f != 0x7f and c & 0x7c != 0x7c], np.uint32)
    return sum(ok[rng.integers(0, len(ok), shape)] << np.uint32(8 * i) for i in range(4)).astype(np.uint32)
  sign = lambda: rng.integers(0, 2, shape).astype(np.uint32)
  if ins == "F32":
    return sign() << 31 | rng.integers(117, 137, shape).astype(np.uint32) << 23 | \
        rng.integers(0, 1 << 23, shape).astype(np.uint32)
  half = lambda: sign() << 15 | (rng.integers(*f16, shape).astype(np.uint32) << 10 if ins == "F16" else
                                 rng.integers(117, 137, shape).astype(np.uint32) << 7) | rng.integers(0, 1 << 7, shape)
  return (half() | half() << 16).astype(np.uint32)


def _exact(raw: int, kind: str):
  """An element's exact value from its raw bits (numpy's f16 and f32 decoding; bf16 as the high half of an f32;
  8-bit floats by ml_dtypes' float8 types, an oracle of their own)."""
  if kind == "F16":
    return Fraction(float(np.array([raw], np.uint16).view(np.float16)[0]))
  if kind in ("BF16", "F32"):
    return Fraction(float(np.array([raw << 16 if kind == "BF16" else raw], np.uint32).view(np.float32)[0]))
  if kind in F8_TYPES:
    return Fraction(float(np.array([raw], np.uint8).view(F8_TYPES[kind])[0]))
  if kind == "F64":
    return Fraction(float(np.array([raw], np.uint64).view(np.float64)[0]))
  return raw - (256 if kind == "I8" else 16) if kind in ("I8", "I4") and raw >= (128 if kind == "I8" else 8) else raw


@pytest.mark.parametrize("arch", TARGETS)
def test_results_are_the_exact_product_rounded(arch):
  """The arithmetic against rational arithmetic: each f32 D element (interpreter = native tier, above) is the exact
  A x B + C within one f32 ulp plus the float64 sum's own bound (K additions of 2**-53 each); integer D is the exact
  sum modulo 2**32; f64 D is C, then each k's exact product added and rounded to f64 in k order (an FMA chain)."""
  L, fam = TARGETS[arch], target_info(arch).family
  rng = np.random.default_rng(23)
  for name in _modelled(arch):
    prog = _program(arch, assemble(_asm(arch, name), arch))
    op = prog.op(0x1000)
    t, ka, kb, _ = layouts.operands(fam, op, L)
    eng = _engine(prog, L, 7, 0.0)
    (a, b, c), d = layouts.sources(op, t), op.outs["D0"]
    rows = lambda s: (eng.V if s.file == "v" else eng.A)[:, s.index:s.index + s.dwords]
    for s in (a, b):  # (f16 results: sums within its range)
      rows(s)[:] = _finite(rng, t.ins[0], rows(s).shape, (11, 19) if t.acc == "F16" else (5, 25))
    rows(c)[:] = _finite(rng, {"F32": "F32", "F64": "F64", "F16": "F16", "BF16": "BF16"}.get(t.acc, "I8"),
                         rows(c).shape)
    if t.scale is not None:  # (scaled: E8M0 codes 2**-8..2**8, every byte)
      for k in ("S3", "S4"):
        codes = rng.integers(119, 136, rows(op.ins[k]).shape + (4,), dtype=np.uint8)
        rows(op.ins[k])[:] = codes.view(np.uint32)[..., 0]
    C = rows(c)[0].copy()
    idx = rows(op.ins["S2"])[0].copy()  # (sparse: random 2-bit indices, equal ones too)
    core.step(eng, op, slice(None))
    D = rows(d)[0]
    word = lambda x, r, lane: int(x[r, lane]) | (int(x[r + 1, lane]) << 32 if t.acc == "F64" else 0)
    elem = lambda s, at, kind, w: _exact(word(rows(s)[0], at[0], at[1]) >> int(at[2]) & (1 << w) - 1, kind)
    A = [[elem(a, t.a[m, k], ka, t.bits[0]) for k in range(t.a.shape[1])] for m in range(t.m)]
    B = [[elem(b, t.b[k, n], kb, t.bits[1]) for n in range(t.n)] for k in range(t.k)]
    if t.scale is not None:  # (each element times 2**(code - 127), its block's code)
      sc = lambda s, at: Fraction(2) ** ((int(rows(op.ins[s])[0][0, at[1]]) >> int(at[2]) & 255) - 127)
      A = [[x * sc("S3", t.scale[0][m, k]) for k, x in enumerate(r)] for m, r in enumerate(A)]
      B = [[x * sc("S4", t.scale[1][k, n]) for n, x in enumerate(r)] for k, r in enumerate(B)]
    # the B row each A column multiplies: its own, or a sparse A's 4 * (c // 2) + the column's 2-bit index
    brow = [[k if t.idx is None else 4 * (k // 2) + (int(idx[0, t.idx[m, k, 1]]) >> int(t.idx[m, k, 2]) & 3)
             for k in range(t.a.shape[1])] for m in range(t.m)]
    for v in range(t.d.shape[0]):
      for lane in range(L):
        m, n = divmod(int(t.d[v, lane]), t.n)  # (slot v)
        prods = [A[m][k] * B[brow[m][k]][n] for k in range(t.a.shape[1])]
        if t.acc == "I32":
          assert int(D[v, lane]) == (sum(prods) + int(C[v:v + 1, lane].view(np.int32)[0])) % (1 << 32), (name, v, lane)
          continue
        if t.acc == "F64":
          acc = _exact(word(C, 2 * v, lane), "F64")
          for p in prods:
            acc = Fraction(float(acc + p))  # (Fraction -> float rounds to nearest even)
          assert _exact(word(D, 2 * v, lane), "F64") == acc, (name, v, lane)
          continue
        if t.half is not None:  # (16-bit results: the half t.half[v] of the lane's registers; C and D share them)
          reg, hi = divmod(int(t.half[v]), 2)
          cf, got = (_exact(int(x[reg, lane]) >> 16 * hi & 0xffff, t.acc) for x in (C, D))
          kept = lambda x: int(x[reg, lane]) >> 16 * (1 - hi) & 0xffff
          assert t.regs[2] == len(t.half) // 2 or kept(C) == kept(D), (name, v, lane)  # (RDNA3: the other half)
          ulp = abs(float(cf + sum(prods))) * 2.0 ** -(10 if t.acc == "F16" else 7) + 2.0 ** -24
        else:
          cf, got = (Fraction(float(x[v:v + 1, lane].view(np.float32)[0])) for x in (C, D))
          ulp = float(np.spacing(np.float32(abs(float(sum(prods) + cf)))))
        exact = sum(prods) + cf
        bound = Fraction(ulp) + (sum(abs(p) for p in prods) + abs(cf)) * (t.k + 1) / 2 ** 53
        assert abs(got - exact) <= bound, (name, v, lane, float(got), float(exact))


def test_rdna4_wmma_sums_in_the_guides_k_order(clang_co, monkeypatch):
  """RDNA4's A/B lanes hold runs of four k alternating between the lane halves (lane 0: k 0-3, 8-11; lane 16: 4-7,
  12-15). A pairing of A and B by another k order gives the same products, so only the order of the float64 sum
  tells: row 0 x column 0 = 2**30 (k 0) + 2**-28 (k 4) - 2**30 (k 8) is 0 summed in k order, 2**-28 if k 8 came
  before k 4 (the layout read as k = 8 * (l // 16) + e)."""
  from gputwin.emu import launch
  A, B = np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16)
  A[0, [0, 4, 8]], B[[0, 4, 8], 0] = [2 ** 15, 2 ** -14, -2 ** 15], [2 ** 15, 2 ** -14, 2 ** 15]
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    D = np.ones((16, 16), np.float32)
    launch(clang_co("gfx1200", "matrix"), "mma16", grid=1, block=32, args=[D, A, B, np.zeros((16, 16), np.float32)],
           checks=False)
    assert (D == 0).all(), (mode, D[0, 0])


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200"])
def test_wmma_16_bit_results_on_both_tiers(clang_co, monkeypatch, arch):
  """tests/emu/kernels/matrix.cl's f16 and bf16 results (RDNA3: the low half, the high half with OPSEL[2]; RDNA4
  packed): numpy's product of small integers (exact in both types), the same bits on both tiers."""
  from gputwin.emu import launch
  r = np.random.default_rng(29)
  bf16 = lambda x: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.int16)
  for name in ("wmma_f16", "wmma_f16_hi", "wmma_bf16"):
    A, B, C = r.integers(-2, 3, (16, 16)), r.integers(-2, 3, (16, 16)), r.integers(-100, 100, (16, 16))
    host = bf16 if name == "wmma_bf16" else (lambda x: x.astype(np.float16))
    out = {}
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = host(np.zeros((16, 16)))
      st = launch(clang_co(arch, "matrix"), name, grid=1, block=32, args=[D, host(A), host(B), host(C)],
                  checks=False)
      out[mode] = (D, st)
    (di, _), (dn, sn) = out["0"], out["force"]
    assert np.array_equal(di, dn), name
    np.testing.assert_array_equal(dn, host(A @ B + C), err_msg=name)
    assert sn.native_instructions >= 0.9 * sn.instructions, (name, sn)
  # one rounding: 1 + 2**-(p+1) + 2**-30 (p fraction bits) is above the halfway point, so it rounds up; rounded to
  # f32 first it would be the halfway point itself, which rounds to even (1)
  for name, p, step in (("wmma_f16", 10, 2 ** -5), ("wmma_bf16", 7, 2 ** -4)):
    host = bf16 if name == "wmma_bf16" else (lambda x: x.astype(np.float16))
    A, B = np.zeros((16, 16)), np.zeros((16, 16))
    A[0, :3], B[:3, 0] = [1, 2 ** -(p + 1) / step, 2 ** -15], [1, step, 2 ** -15]
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = host(np.zeros((16, 16)))
      launch(clang_co(arch, "matrix"), name, grid=1, block=32, args=[D, host(A), host(B), host(np.zeros((16, 16)))],
             checks=False)
      assert D[0, 0] == host(np.array([1 + 2 ** -p]))[0], (name, mode, D[0, 0])
  assert not native.FAILED, native.FAILED[:3]


def test_rdna3_16_bit_result_keeps_the_other_half_of_d():
  """RDNA3 v_wmma_f16/bf16 write 16 bits of each D register, the half OPSEL[2] picks: the other half keeps D's old
  bits, not C's (LLVM PR #69903: the instruction leaves it unchanged), on both tiers."""
  for op in ("v_wmma_f16_16x16x16_f16", "v_wmma_bf16_16x16x16_bf16"):
    for sel, hi in (("", 0), (" op_sel:[0,0,1]", 1)):
      prog = _program("gfx1100", assemble(f"{op} v[40:47], v[100:107], v[120:127], v[0:7]{sel}", "gfx1100"))
      a, b = _both(prog, prog.op(0x1000), 32, 5, 0.0)
      _same(a, b, op + sel)
      old = _engine(prog, 32, 5, 0.0).V[:, 40:48]
      keep = np.uint32(0xffff << 16 * (1 - hi))
      assert np.array_equal(a[0][:, 40:48] & keep, old & keep), (op, sel)
      assert not np.array_equal(a[0][:, 40:48], old), (op, sel)


def test_rdna4_wmma_neg_and_abs_modifiers(clang_co, monkeypatch):
  """clang-22's -A, -B, -C and fabs(C) on gfx1200 (neg_lo/neg_hi on A, B and C; matrix.cl wmma_neg): numpy's
  (-A) B - C and A (-B) + |C|, the same bits on both tiers (they stopped as 'neg modifiers are not modelled')."""
  from gputwin.emu import launch
  r = np.random.default_rng(31)
  A, B = r.integers(-4, 5, (16, 16)).astype(np.float16), r.integers(-4, 5, (16, 16)).astype(np.float16)
  C = r.integers(-100, 100, (16, 16)).astype(np.float32)
  out = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    D = np.zeros((2, 16, 16), np.float32)
    launch(clang_co("gfx1200", "matrix"), "wmma_neg", grid=1, block=32, args=[D, A, B, C], checks=False)
    out.append(D)
  assert np.array_equal(out[0].view(np.uint32), out[1].view(np.uint32))
  a, b = A.astype(np.float32), B.astype(np.float32)
  np.testing.assert_array_equal(out[1][0], -a @ b - C)
  np.testing.assert_array_equal(out[1][1], a @ -b + np.abs(C))


def test_rdna4_int4_k32_and_int8_clamp(clang_co, monkeypatch):
  """gfx1200 v_wmma_i32_16x16x32_iu4 (A and B placed by a pairing of the kernel's own: integer sums only need A
  and B to agree) and v_wmma_i32_16x16x16_iu8 with CLMP (the exact A x B + C saturated to int32, C near the
  limits), on both tiers against numpy (both stopped before: no layout, 'clamp is not modelled')."""
  from gputwin.emu import launch
  r = np.random.default_rng(37)
  cases = {"wmma_i4_k32": (r.integers(-8, 8, (16, 32)), r.integers(0, 16, (32, 16)), r.integers(-999, 999, (16, 16))),
           "wmma_i8_clamp": (r.integers(-128, 128, (16, 16)), r.integers(-128, 128, (16, 16)),
                             r.choice([2 ** 31 - 5000, -2 ** 31 + 5000, 7], (16, 16)))}
  for name, (A, B, C) in cases.items():
    out = []
    for mode in ("0", "force"):
      monkeypatch.setenv("GPUTWIN_JIT", mode)
      D = np.zeros((16, 16), np.int32)
      launch(clang_co("gfx1200", "matrix"), name, grid=1, block=32,
             args=[D, A.astype(np.int8), B.astype(np.int8), C.astype(np.int32)], checks=False)
      out.append(D)
    assert np.array_equal(out[0], out[1]), name
    want = A @ B + C
    np.testing.assert_array_equal(out[1], np.clip(want, -2 ** 31, 2 ** 31 - 1) if "clamp" in name else want,
                                  err_msg=name)
    if "clamp" in name:
      assert (want > 2 ** 31 - 1).any() and (want < -2 ** 31).any()  # (the saturation was exercised)
  assert not native.FAILED, native.FAILED[:3]


# host values -> element codes, for the wave64 images (8-bit and 4-bit: one code a byte / nibble value)
CODES = {"f16": lambda x: x.astype(np.float16).view(np.uint16),
         "bf16": lambda x: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16),
         "i8": lambda x: x.astype(np.int8).view(np.uint8), "u8": lambda x: x.astype(np.uint8),
         "i4": lambda x: x.astype(np.int64) & 15, "u4": lambda x: x.astype(np.int64)}
# gfx1200 wave64 (kernels/wmma_w64.cl): kernel -> (A's element kind, B's, C/D's)
W64 = {"f32_f16": ("f16", "f16", "f32"), "f32_bf16": ("bf16", "bf16", "f32"), "f16_f16": ("f16", "f16", "f16"),
       "bf16_bf16": ("bf16", "bf16", "bf16"), "i32_iu8": ("i8", "u8", "i32"), "f32_fp8_bf8": ("fp8", "bf8", "f32"),
       "f32_bf8_bf8": ("bf8", "bf8", "f32")}


def _wave64_both_tiers(monkeypatch, co, name, A, B, C):
  """One wave64 of kernel `name` of wmma_w64.cl on A, B, C (lane-major images) on both tiers: its D image, after
  asserting the tiers agree bit for bit and the native run ran every wave-instruction natively."""
  from gputwin.emu import launch
  out = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    D = np.zeros_like(C)
    st = launch(co, name, grid=1, block=64, args=[D, A.copy(), B.copy(), C.copy()], checks=False)
    out.append(D)
  assert out[0].tobytes() == out[1].tobytes(), name
  assert st.native_instructions == st.instructions, (name, st)
  return out[1]


def test_rdna4_wave64_wmma_matches_numpy_on_both_tiers(clang_co, monkeypatch):
  """gfx1200 WMMA in wave64 (clang-22 -mwavefrontsize64, the _w64_gfx12 builtins): lane l holds A's row (B's column)
  l % 16, its element e at k = e + 4 * (l // 16 % 2) + 8 * (l // 32), and C/D register v of row v + 8 * (l // 16 % 2)
  + 4 * (l // 32), column l % 16 (the equations of AMD's FPSan gfx12 WMMA tests, which compare them against wave64
  hardware; an exact product checks the rows and columns, not which k a lane holds). Codes from numpy and ml_dtypes,
  numpy's product; both tiers bit for bit. The 4-bit form stops, naming the instruction."""
  ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the float8 oracle) is not installed")
  from gputwin.emu import launch
  from gputwin.emu.api import EmuError
  rng = np.random.default_rng(31)
  co = clang_co("gfx1200", "wmma_w64", "-mwavefrontsize64")
  lane = np.arange(64)
  k_of = lambda e: e + 4 * (lane // 16 % 2) + 8 * (lane // 32)
  m_of = lambda v: v + 8 * (lane // 16 % 2) + 4 * (lane // 32)
  codes = CODES | {"fp8": lambda x: x.astype(ml.float8_e4m3fn).view(np.uint8),
                   "bf8": lambda x: x.astype(ml.float8_e5m2).view(np.uint8)}
  for name, (ka, kb, kc) in W64.items():
    A = rng.integers(-3, 4, (16, 16)).astype(np.float64)
    B = rng.integers(0 if kb == "u8" else -2, 3, (16, 16)).astype(np.float64)
    C = rng.integers(-50, 51, (16, 16)).astype(np.float64)
    word = lambda x: x.view(np.int32).ravel() if x.itemsize == 1 else x  # (8-bit: a lane's four in one word)
    Ai = word(np.stack([codes[ka](A[lane % 16, k_of(e)]) for e in range(4)], 1))  # (64 lanes, 4 elements)
    Bi = word(np.stack([codes[kb](B[k_of(e), lane % 16]) for e in range(4)], 1))
    ct = {"f32": np.float32, "i32": np.int32, "f16": np.float16, "bf16": np.float32}[kc]
    Ci = np.stack([C[m_of(v), lane % 16] for v in range(4)], 1).astype(ct)
    if kc == "bf16":
      Ci = codes["bf16"](Ci)
    want = A @ B + C
    D = _wave64_both_tiers(monkeypatch, co, name, Ai, Bi, Ci)
    D = D.astype(np.float32) if kc != "bf16" else (D.astype(np.uint32) << 16).view(np.float32)
    got = np.zeros((16, 16))
    for v in range(4):
      got[m_of(v), lane % 16] = D[:, v]
    np.testing.assert_array_equal(got, want, err_msg=name)
  with pytest.raises(EmuError, match=r"v_wmma_i32_16x16x16_iu4.*not modelled \(wave64"):
    launch(co, "i32_iu4", grid=1, block=64, args=[np.zeros((64, 4), np.int32)] + [np.zeros(64, np.int32)] * 2 +
           [np.zeros((64, 4), np.int32)])
  assert not native.FAILED, native.FAILED[:3]


@pytest.mark.parametrize("arch,least", [("gfx1100", 6), ("gfx1200", 9)])
def test_rdna_wave64_opcodes_native_equal_interpreter(arch, least):
  """Every WMMA opcode modelled in wave64 on random registers with few and many specials: both tiers bit for bit
  (the others stop on both: RDNA4's 4-bit and sparse ones)."""
  fam, ran = target_info(arch).family, 0
  end = assemble("s_trap 0\ns_endpgm", arch)
  for name in _modelled(arch):
    prog = Program(assemble(_asm(arch, name), arch) + end * 4, 0x1000, arch, fam, 64, for_arch(arch))
    op = prog.op(0x1000)
    try:
      layouts.operands(fam, op, 64)
    except GputwinError:
      assert native.compile_block(prog, 0x1000, 64) is None or native.compile_block(prog, 0x1000, 64).ops[0] is not op
      continue
    for seed, rate in ((1, 0.0), (2, 0.03), (3, 0.3)):
      a, b = _both(prog, op, 64, seed, rate)
      _same(a, b, f"{arch} wave64 {op.text} seed {seed}")
    ran += 1
  assert ran >= least, ran  # (gfx1100: all six; gfx1200: the dense 8- and 16-bit rows)
  assert not native.FAILED, native.FAILED[:3]


# gfx1100 wave64 (kernels/wmma_w64.cl): kernel -> (A's element kind, B's, C/D's, OPSEL[2])
W64_RDNA3 = {"f32_f16": ("f16", "f16", "f32", 0), "f32_bf16": ("bf16", "bf16", "f32", 0),
             "f16_f16": ("f16", "f16", "f16", 0), "f16_f16_hi": ("f16", "f16", "f16", 1),
             "bf16_bf16": ("bf16", "bf16", "bf16", 0), "i32_iu8": ("i8", "u8", "i32", 0),
             "i32_iu4": ("i4", "u4", "i32", 0)}


def test_rdna3_wave64_wmma_matches_numpy_on_both_tiers(clang_co, monkeypatch):
  """gfx1100 WMMA in wave64 (clang-22 -mwavefrontsize64, the _w64 builtins): every lane holds A's row (B's column)
  l % 16 whole, element k = e; C/D register v (16-bit results: its half OPSEL[2]) of row 4 * v + l // 16, column
  l % 16 (the equations of AMD's FPSan gfx11 WMMA tests, checked against wave64 hardware). numpy's product; both tiers
  bit for bit, every wave-instruction native."""
  rng = np.random.default_rng(37)
  co = clang_co("gfx1100", "wmma_w64", "-mwavefrontsize64")
  lane = np.arange(64)
  m_of = lambda v: 4 * v + lane // 16
  codes, bf16 = CODES, CODES["bf16"]
  for name, (ka, kb, kc, hi) in W64_RDNA3.items():
    A = rng.integers(-3 if ka != "i4" else -8, 4, (16, 16)).astype(np.float64)
    B = rng.integers(0 if kb[0] == "u" else -2, 3 if kb != "u4" else 16, (16, 16)).astype(np.float64)
    C = rng.integers(-50, 51, (16, 16)).astype(np.float64)

    def image(rows, kind):  # (64 lanes, 16 elements) -> a lane's words
      x = codes[kind](rows)
      if kind[1] == "4":  # (two nibbles a byte, element k at bits 4k)
        return (x[:, 0::2] | x[:, 1::2] << 4).astype(np.uint8).view(np.int32)
      return x.view(np.int32) if x.itemsize == 1 else x
    Ai, Bi = image(A[lane % 16], ka), image(B.T[lane % 16], kb)
    ct = {"f32": np.float32, "i32": np.int32, "f16": np.float16, "bf16": np.float32}[kc]
    Cv = np.stack([C[m_of(v), lane % 16] for v in range(4)], 1)
    if kc in ("f16", "bf16"):  # (element v in half 2v + OPSEL[2]; the other halves a marker)
      Ci = np.full((64, 8), 7.0)
      Ci[:, hi::2] = Cv
      Ci = bf16(Ci) if kc == "bf16" else Ci.astype(np.float16)
    else:
      Ci = Cv.astype(ct)
    D = _wave64_both_tiers(monkeypatch, co, name, Ai, Bi, Ci)
    if kc in ("f16", "bf16"):
      D = D[:, hi::2].astype(np.float32) if kc == "f16" else (D[:, hi::2].astype(np.uint32) << 16).view(np.float32)
    got = np.zeros((16, 16))
    for v in range(4):
      got[m_of(v), lane % 16] = D[:, v]
    np.testing.assert_array_equal(got, A @ B + C, err_msg=name)
  assert not native.FAILED, native.FAILED[:3]
