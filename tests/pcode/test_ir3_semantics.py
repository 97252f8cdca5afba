"""Adreno ir3 semantics (gputwin/pcode/ir3.py) against oracles written here: the isaspec XML for the names and
citations, numpy's IEEE float32/float16 arithmetic, Python integers, and exact Fractions for every directed rounding;
the LLVM backend against the numpy one for every key it compiles."""
from __future__ import annotations

import inspect
import math
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from gputwin.errors import PcodeError
from gputwin.pcode import family_of, ir3, llvm, semantics
from tests.pcode.conftest import checked
from tests.pcode.test_ptx_semantics import decode, encode, float_pool, oracle_round, rnd, sx

VENDOR = Path("/work/shared/vendor/ir3")
N = 96
NAN = {16: 0x7e00, 32: 0x7fc00000}


ORACLE = {"test_float_add_mul_min_max_sign_against_numpy": "numpy float32/float16 IEEE", "test_float_rounding_ops":
          "Python math on Fractions", "test_compares_every_condition": "Python comparisons",
          "test_integer_ops_against_python_integers": "Python integers", "test_saturating_add_sub": "Python integers",
          "test_24_and_16_bit_multiplies": "Python integers", "test_mad_rounds_product_then_sum": "numpy IEEE",
          "test_sel_every_form": "Python predicates", "test_cat3_alt_ops_follow_their_doc_formulas":
          "the isaspec <doc> formula", "test_dot_product_accumulate": "the isaspec <doc> formula (Python integers)",
          "test_sfu_rounds_once": "Fraction rounding / libm within 1 ulp", "test_every_conversion_and_rounding":
          "Fraction-bracketed rounding, Python integers"}


def run(k: str, **ins) -> list[int]:
  """k on N lanes; the calling test's oracle is recorded for `gputwin pcode --coverage` (tested.json)."""
  sem = semantics("ir3", k)
  caller = inspect.stack()[1].function
  if caller in ORACLE:
    checked("ir3", k, ORACLE[caller])
  st = {nm: np.array(np.broadcast_to(np.asarray(ins.get(nm, 0), dtype=object), (N,)).astype(object) & 0xffffffff,
                     dtype=np.uint64).astype(np.uint32)[None, :] for nm in sem.inputs}
  out = sem(st, exec=np.ones((1, N), bool))["D0"]
  return [int(x) for x in np.broadcast_to(np.asarray(out), (1, N))[0]]


def f2b(x: float, w: int) -> int:
  """x (already representable) as raw bits, NaN as the default NaN."""
  return NAN[w] if np.isnan(x) else encode(x, f"f{w}")


def pool(w: int, rng, n: int = N) -> list[int]:
  return float_pool(f"f{w}", rng, n)


def keyh(k: str, w: int) -> str:
  return k + (".h" if w == 16 else "")


# ------------------------------------------------------------------------------------------------ plumbing
def test_family_keys_and_citations_name_real_bitsets():
  assert family_of("a630") == family_of("a740") == family_of("ir3") == "ir3"
  assert ir3.key("cmps.f", "lt", half=True) == "cmps.f.lt.h" and ir3.key("add.u", sat=True) == "add.u.sat"
  assert ir3.key("mad.f16", sat=True, conv=True) == "mad.f16.sat.conv"
  with pytest.raises(PcodeError):
    ir3.key("frob.f")
  with pytest.raises(PcodeError):
    ir3.key("mul.u24", half=True)  # no half form in the table
  ks = ir3.keys()
  assert ks == sorted(ks) and len(ks) > 300
  xml = {}
  for k in ks:
    r, g = ir3.row(k)
    path = VENDOR / r.cite.split()[0]
    if VENDOR.exists():
      xml.setdefault(path, path.read_text())
      leaf = g["op"] if g["op"] not in ("mov", "cov") else "mov-immed"
      assert f'<bitset name="{leaf}"' in xml[path], (k, path)
    assert semantics("ir3", k).text.startswith('"ir3 isaspec mesa-25.0.7/src/freedreno/isa/ir3-cat')


def test_every_key_compiles_and_runs():
  rng = np.random.default_rng(0)
  for k in ir3.keys():
    sem = semantics("ir3", k)
    if sem.mem or sem.calls or "PC" in sem.outputs:  # memory, branches, events: tests/emu/ir3 runs those
      continue
    st = {nm: rng.integers(0, 2**32, (1, 32), dtype=np.uint64).astype(np.uint32) for nm in sem.inputs}
    out = sem(st, exec=rng.random((1, 32)) < 0.7)
    assert set(out) == {"D0"}, k


def test_modifier_kinds():
  assert ir3.modifier("add.f") == "f" and ir3.modifier("mad.f32") == "f" and ir3.modifier("rcp.h") == "f"
  assert ir3.modifier("add.s") == "i" and ir3.modifier("cmps.u.lt") == "i" and ir3.modifier("xor.b") == "b"
  assert ir3.modifier("cov.f32f16") is None and ir3.modifier("shlg") is None and ir3.modifier("madsh.m16") == "i"
  assert ir3.cov_key("f32", "f16", "(even)") == "cov.f32f16.even"
  assert ir3.cov_key("u32", "u32", "(even)") == "mov.u32u32"
  assert ir3.cov_key("s32", "f32") == "cov.s32f32"
  with pytest.raises(PcodeError):
    ir3.cov_key("u8", "f32")  # u8/u8_32 are not modelled


# ------------------------------------------------------------------------------------------------ cat2 floats
def _np(w):
  return np.float32 if w == 32 else np.float16


@pytest.mark.parametrize("w", [32, 16])
def test_float_add_mul_min_max_sign_against_numpy(w):
  rng = np.random.default_rng(w)
  a, b = pool(w, rng), pool(w, rng)
  b = [a[i] ^ (1 << (w - 1)) if i % 7 == 0 else b[i] for i in range(N)]  # x + -x and +0/-0 pairs
  x, y = [decode(v, f"f{w}") for v in a], [decode(v, f"f{w}") for v in b]
  T = _np(w)
  with np.errstate(all="ignore"):
    for op, fn in (("add.f", lambda p, q: T(p) + T(q)), ("mul.f", lambda p, q: T(p) * T(q))):
      out = run(keyh(op, w), S0=a, S1=b)
      sat = run(keyh(op, w) + ".sat", S0=a, S1=b)
      for i in range(N):
        r = float(fn(x[i], y[i]))
        assert out[i] & ((1 << w) - 1) == f2b(r, w), (op, hex(a[i]), hex(b[i]), hex(out[i]))
        s = 0.0 if np.isnan(r) or r <= 0 else min(r, 1.0)
        assert sat[i] & ((1 << w) - 1) == f2b(s, w), (op, "sat", hex(a[i]), hex(b[i]))
  mn, mx, sg = run(keyh("min.f", w), S0=a, S1=b), run(keyh("max.f", w), S0=a, S1=b), run(keyh("sign.f", w), S0=a)
  key = lambda v: (v, not np.signbit(v))  # noqa: E731  -0.0 < +0.0
  for i in range(N):
    p, q = x[i], y[i]
    if np.isnan(p) or np.isnan(q):
      want = [f2b(q if np.isnan(p) else p, w)] * 2
    else:
      want = [f2b(min(p, q, key=key), w), f2b(max(p, q, key=key), w)]
    assert [mn[i] & 0xffff_ffff, mx[i]] == want or [mn[i], mx[i]] == want, (hex(a[i]), hex(b[i]))
    s = 0.0 if np.isnan(p) else 1.0 if p > 0 else -1.0 if p < 0 else p
    assert sg[i] == f2b(s, w), hex(a[i])


@pytest.mark.parametrize("w", [32, 16])
def test_float_rounding_ops(w):
  rng = np.random.default_rng(10 + w)
  a = pool(w, rng)
  halves = [encode(v, f"f{w}") for v in (0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997 if w == 32 else 0.4998, -3.5)]
  a[:len(halves)] = halves
  x = [decode(v, f"f{w}") for v in a]
  fns = {"floor.f": math.floor, "ceil.f": math.ceil, "trunc.f": math.trunc, "rndne.f": round,
         "rndaz.f": lambda v: math.copysign(math.floor(abs(v) + Fraction(1, 2)), v)}
  for op, fn in fns.items():
    out = run(keyh(op, w), S0=a)
    for i in range(N):
      v = x[i]
      if np.isnan(v):
        want = NAN[w]
      elif np.isinf(v):
        want = a[i]
      else:
        r = float(fn(Fraction(v))) if op != "rndaz.f" else fn(v)
        want = encode(math.copysign(r, v) if r == 0 else r, f"f{w}")
      assert out[i] == want, (op, hex(a[i]), hex(out[i]), hex(want))


@pytest.mark.parametrize("w", [32, 16])
@pytest.mark.parametrize("t", ["f", "u", "s"])
def test_compares_every_condition(t, w):
  rng = np.random.default_rng(zlib.crc32(f"{t}{w}".encode()))
  if t == "f":
    a, b = pool(w, rng), pool(w, rng)
    val = lambda v: decode(v, f"f{w}")  # noqa: E731
  else:
    a, b = rnd(rng, w), rnd(rng, w)
    val = (lambda v: sx(v, w)) if t == "s" else (lambda v: v)  # noqa: E731
  b = [a[i] if i % 5 == 0 else b[i] for i in range(N)]
  ops = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
  for cond, o in ops.items():
    s, v = run(keyh(f"cmps.{t}.{cond}", w), S0=a, S1=b), run(keyh(f"cmpv.{t}.{cond}", w), S0=a, S1=b)
    for i in range(N):
      c = eval(f"{val(a[i])!r} {o} {val(b[i])!r}".replace("nan", "float('nan')").replace("inf", "float('inf')"))
      assert s[i] & ((1 << w) - 1) == int(c) and v[i] & ((1 << w) - 1) == (((1 << w) - 1) if c else 0), \
        (cond, hex(a[i]), hex(b[i]))


# ------------------------------------------------------------------------------------------------ cat2 integers
def _int_oracle(op: str, w: int, a: int, b: int) -> int:
  m = (1 << w) - 1
  sa, sb = sx(a, w), sx(b, w)
  return {"add.u": a + b, "add.s": sa + sb, "sub.u": a - b, "sub.s": sa - sb, "min.u": min(a, b), "max.u": max(a, b),
          "min.s": min(sa, sb), "max.s": max(sa, sb), "and.b": a & b, "or.b": a | b, "xor.b": a ^ b, "not.b": ~a,
          "shl.b": a << (b % w), "shr.b": a >> (b % w), "ashr.b": sa >> (b % w), "getbit.b": a >> (b % w) & 1,
          "absneg.s": a, "bfrev.b": int(f"{a:0{w}b}"[::-1], 2), "cbits.b": bin(a).count("1"),
          "clz.b": w - a.bit_length() if a else -1,
          "clz.s": (w - (a ^ (m if a >> (w - 1) else 0)).bit_length()) if a not in (0, m) else -1}[op] & m


@pytest.mark.parametrize("w", [32, 16])
def test_integer_ops_against_python_integers(w):
  rng = np.random.default_rng(20 + w)
  a, b = rnd(rng, w), rnd(rng, w)
  shifts = [i % (w + 9) if i % 3 else b[i] for i in range(N)]  # counts at, around and beyond the width
  a[:4] = [0, (1 << w) - 1, 1 << (w - 1), 1]
  for op in ("add.u", "add.s", "sub.u", "sub.s", "min.u", "max.u", "min.s", "max.s", "and.b", "or.b", "xor.b",
             "not.b", "shl.b", "shr.b", "ashr.b", "getbit.b", "absneg.s", "bfrev.b", "cbits.b", "clz.b", "clz.s"):
    bb = shifts if op in ("shl.b", "shr.b", "ashr.b", "getbit.b") else b
    out = run(keyh(op, w), S0=a, S1=bb)
    for i in range(N):
      assert out[i] & ((1 << w) - 1) == _int_oracle(op, w, a[i], bb[i]), (op, hex(a[i]), hex(bb[i]), hex(out[i]))


@pytest.mark.parametrize("w", [32, 16])
def test_saturating_add_sub(w):
  rng = np.random.default_rng(30 + w)
  a, b = rnd(rng, w), rnd(rng, w)
  lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
  for op in ("add.u", "sub.u", "add.s", "sub.s"):
    out = run(keyh(op, w) + ".sat", S0=a, S1=b)
    for i in range(N):
      if op[-1] == "u":
        r = min(max(a[i] + b[i] if op == "add.u" else a[i] - b[i], 0), (1 << w) - 1)
      else:
        r = min(max(sx(a[i], w) + sx(b[i], w) if op == "add.s" else sx(a[i], w) - sx(b[i], w), lo), hi)
      assert out[i] & ((1 << w) - 1) == r & ((1 << w) - 1), (op, hex(a[i]), hex(b[i]))


def test_24_and_16_bit_multiplies():
  rng = np.random.default_rng(40)
  a, b, c = rnd(rng, 32), rnd(rng, 32), rnd(rng, 32)
  s24 = lambda v: sx(v & 0xffffff, 24)  # noqa: E731
  checks = {"mul.u24": lambda x, y, z: (x & 0xffffff) * (y & 0xffffff), "mul.s24": lambda x, y, z: s24(x) * s24(y),
            "mull.u": lambda x, y, z: (x & 0xffff) * (y & 0xffff),
            "mad.u24": lambda x, y, z: (x & 0xffffff) * (y & 0xffffff) + z,
            "mad.s24": lambda x, y, z: s24(x) * s24(y) + z,
            "madsh.u16": lambda x, y, z: ((x & 0xffff) * (y >> 16) << 16) + z,
            "madsh.m16": lambda x, y, z: ((x & 0xffff) * (y >> 16) << 16) + z,
            "mad.u16": lambda x, y, z: (x & 0xffff) * (y & 0xffff) + (z & 0xffff),
            "mad.s16": lambda x, y, z: sx(x, 16) * sx(y, 16) + sx(z, 16),
            # Mesa emits nir_op_iadd3 (x + y + z) as sad.s32/sad.s16, and its compiled kernels only compute right
            # so (tests/emu/ir3/test_ir3_mesa_run.py: divergence, intmix on a660/a730)
            "sad.s32": lambda x, y, z: x + y + z,
            "sad.s16": lambda x, y, z: x + y + z}
  for k, fn in checks.items():
    out = run(k, S0=a, S1=b, S2=c)
    w = 16 if k.endswith("16") and not k.startswith("madsh") else 32
    for i in range(N):
      assert out[i] & ((1 << w) - 1) == fn(a[i], b[i], c[i]) & ((1 << w) - 1), (k, hex(a[i]), hex(b[i]), hex(c[i]))
  # imul as Mesa builds it: mull.u + madsh.m16 (a, b) + madsh.m16 (b, a) is the 32-bit product
  lo = run("mull.u", S0=a, S1=b)
  hi = run("madsh.m16", S0=a, S1=b, S2=lo)
  full = run("madsh.m16", S0=b, S1=a, S2=hi)
  assert full == [(x * y) & 0xffffffff for x, y in zip(a, b)]


# ------------------------------------------------------------------------------------------------ cat3
@pytest.mark.parametrize("w", [32, 16])
def test_mad_rounds_product_then_sum(w):
  rng = np.random.default_rng(50 + w)
  a, b, c = pool(w, rng), pool(w, rng), pool(w, rng)
  T = _np(w)
  out, sat = run(f"mad.f{w}", S0=a, S1=b, S2=c), run(f"mad.f{w}.sat", S0=a, S1=b, S2=c)
  with np.errstate(all="ignore"):
    for i in range(N):
      x, y, z = (T(decode(v, f"f{w}")) for v in (a[i], b[i], c[i]))
      r = float(T(x * y) + z)
      assert out[i] & ((1 << w) - 1) == f2b(r, w), (hex(a[i]), hex(b[i]), hex(c[i]))
      assert sat[i] & ((1 << w) - 1) == f2b(0.0 if np.isnan(r) or r <= 0 else min(r, 1.0), w)


def test_sel_every_form():
  rng = np.random.default_rng(60)
  a, c = rnd(rng, 32), rnd(rng, 32)
  conds = {32: [0, 1, 0x80000000, 0x7fffffff, 0x7fc00000, 0xff800000, 0x80000001, 0xbf800000] * (N // 8),
           16: [0, 1, 0x8000, 0x7fff, 0x7e00, 0xfc00, 0x8001, 0xbc00] * (N // 8)}
  for t in ("b", "s", "f"):
    for w in (16, 32):
      b = conds[w]
      out = run(f"sel.{t}{w}", S0=a, S1=b, S2=c)
      for i in range(N):
        v = b[i]
        pick = {"b": v != 0, "s": sx(v, w) >= 0, "f": not np.isnan(decode(v, f"f{w}")) and decode(v, f"f{w}") >= 0}[t]
        m = (1 << w) - 1
        assert out[i] & m == (a[i] if pick else c[i]) & m, (t, w, hex(v))


@pytest.mark.parametrize("w", [32, 16])
def test_cat3_alt_ops_follow_their_doc_formulas(w):
  """shrm/shlm/shrg/shlg/andg: the <doc> formulas of ir3-cat3.xml, evaluated on Python integers."""
  rng = np.random.default_rng(70 + w)
  a, b, c = [i % (w + 5) for i in range(N)], rnd(rng, w), rnd(rng, w)
  m = (1 << w) - 1
  docs = {"shrm": lambda s1, s2, s3: (s2 >> (s1 % w)) & s3, "shlm": lambda s1, s2, s3: (s2 << (s1 % w)) & s3,
          "shrg": lambda s1, s2, s3: (s2 >> (s1 % w)) | s3, "shlg": lambda s1, s2, s3: (s2 << (s1 % w)) | s3,
          "andg": lambda s1, s2, s3: (s2 & s1) | s3}
  for op, fn in docs.items():
    s1 = a if op != "andg" else rnd(rng, w)
    out = run(keyh(op, w), S0=s1, S1=b, S2=c)
    for i in range(N):
      assert out[i] & m == fn(s1[i], b[i], c[i]) & m, (op, s1[i], hex(b[i]), hex(c[i]))


def test_dot_product_accumulate():
  rng = np.random.default_rng(80)
  a, b, c = rnd(rng, 32), rnd(rng, 32), rnd(rng, 32)
  by = lambda v, j, signed: (sx(v >> 8 * j & 0xff, 8) if signed else v >> 8 * j & 0xff)  # noqa: E731
  for sign in ("unsigned", "mixed"):
    s = sign == "mixed"
    out = run(f"dp4acc.{sign}", S0=a, S1=b, S2=c)
    assert out == [(c[i] + sum(by(a[i], j, s) * by(b[i], j, False) for j in range(4))) & 0xffffffff for i in range(N)]
    for pack, base in (("low", 0), ("high", 2)):
      out = run(f"dp2acc.{sign}.{pack}", S0=a, S1=b, S2=c)
      assert out == [(c[i] + sum(by(a[i], base + j, s) * by(b[i], base + j, False) for j in range(2))) & 0xffffffff
                     for i in range(N)]


# ------------------------------------------------------------------------------------------------ cat4
SFU = {"rcp": lambda v: 1 / Fraction(v), "sqrt": None, "rsq": lambda v: 1 / math.sqrt(v), "log2": math.log2,
       "exp2": lambda v: 2.0 ** v, "sin": math.sin, "cos": math.cos}


@pytest.mark.parametrize("w", [32, 16])
def test_sfu_rounds_once(w):
  rng = np.random.default_rng(90 + w)
  a = [v & ~(1 << (w - 1)) for v in pool(w, rng)]  # non-negative: every function is defined
  for op in ("rcp", "sqrt", "rsq", "log2", "exp2", "sin", "cos", "hrsq", "hlog2", "hexp2"):
    out = run(keyh(op, w), S0=a)
    fn = SFU[op.lstrip("h") if op.startswith("h") else op]
    for i in range(N):
      x = decode(a[i], f"f{w}")
      if not np.isfinite(x) or x == 0 or (op in ("exp2", "hexp2") and x > 200):
        continue
      if op == "sqrt":
        r = float(np.sqrt(np.float64(x)).astype(_np(w)))
        up, dn = (Fraction(float(np.nextafter(_np(w)(r), _np(w)(v)))) for v in (np.inf, 0))
        assert (dn + Fraction(r)) ** 2 / 4 <= Fraction(x) <= (up + Fraction(r)) ** 2 / 4  # within half an ulp
        assert out[i] == encode(r, f"f{w}")
        continue
      q = fn(x)
      want = oracle_round(q if isinstance(q, Fraction) else Fraction(q), f"f{w}", "rn")
      got = decode(out[i] & ((1 << w) - 1), f"f{w}")
      if isinstance(q, Fraction):
        assert got == want, (op, hex(a[i]))
      else:  # the oracle's libm value is itself within 1 ulp of the truth: allow one ulp of the result format
        ulp = float(np.spacing(_np(w)(abs(want)))) if np.isfinite(want) else 0
        assert got == want or abs(got - want) <= ulp, (op, hex(a[i]), got, want)


# ------------------------------------------------------------------------------------------------ cat1
TYPES = ir3.TYPES
MODES = {None: "rz", "even": "rn", "pos_infinity": "rp", "neg_infinity": "rm"}


def _src_pool(t: str, rng) -> list[int]:
  w = int(t[1:])
  if t[0] == "f":
    p = pool(w, rng)
    return [encode(v, t) if i < 12 else p[i] for i, v in
            enumerate([0.5, 1.5, -2.5, 65504.0, 65519.0, 65520.0, 1e-7, -1e-7, 3e9, -3e9, 40000.5, -40000.5])] + p[12:]
  return rnd(rng, w, edges=(0x7fff, 0x8000, 0xffff, 0x10000, 0x1000001, 0x7fffffff))


def _iv(v: int, t: str) -> int:
  return sx(v, int(t[1:])) if t[0] == "s" else v & ((1 << int(t[1:])) - 1)


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_every_conversion_and_rounding():
  rng = np.random.default_rng(100)
  for st in TYPES:
    a = _src_pool(st, rng)
    for dt in TYPES:
      ws, wd = int(st[1:]), int(dt[1:])
      for rmode, m in MODES.items():
        if st == dt:
          if rmode is None:
            assert run(f"mov.{st}{dt}", S0=a) == [v & ((1 << ws) - 1) for v in a]
          continue
        k = f"cov.{st}{dt}" + (f".{rmode}" if rmode else "")
        out = run(k, S0=a)
        for i in range(N):
          got = out[i] & ((1 << wd) - 1)
          if st[0] == "f":
            x = decode(a[i] & ((1 << ws) - 1), st)
            if dt[0] == "f":
              want = NAN[wd] if np.isnan(x) else encode(x, dt) if np.isinf(x) or x == 0 or wd > ws else \
                encode(oracle_round(Fraction(x), dt, m), dt)
            else:
              lo, hi = (0, (1 << wd) - 1) if dt[0] == "u" else (-(1 << (wd - 1)), (1 << (wd - 1)) - 1)
              if np.isnan(x):
                r = 0
              elif np.isinf(x):
                r = hi if x > 0 else lo
              else:
                r = {"rz": math.trunc, "rm": math.floor, "rp": math.ceil, "rn": round}[m](Fraction(x))
              want = min(max(r, lo), hi) & ((1 << wd) - 1)
          elif dt[0] == "f":
            q = _iv(a[i], st)
            want = encode(0.0, dt) if q == 0 else encode(oracle_round(Fraction(q), dt, m), dt)
          else:
            want = _iv(a[i], st) & ((1 << wd) - 1)
          assert got == want, (k, hex(a[i]), hex(got), hex(want))


# ------------------------------------------------------------------------------------------------ backends
def test_llvm_backend_agrees_with_numpy():
  """Every ir3 key the LLVM backend compiles gives the numpy backend's bits on edge operands."""
  from tests.pcode.test_backends import operands
  sems = {k: semantics("ir3", k) for k in ir3.keys()}
  sems = {k: s for k, s in sems.items() if not (s.mem or s.calls or "PC" in s.outputs)}  # (the ALU rows)
  fns, declined = llvm.compile_host({k: s.program for k, s in sems.items()}, 32, speed=1)
  assert all(declined.values())
  for k, fn in fns.items():
    p = sems[k].program
    rng = np.random.default_rng(zlib.crc32(k.encode()))
    for rnd_ in range(2):
      st = {nm: operands(rng, min(w, 64), 32) for nm, w in p.inputs.items()}
      active = np.ones(32, bool) if rnd_ == 0 else rng.random(32) < 0.5
      ref = sems[k]({nm: v.astype(np.uint32)[None, :] for nm, v in st.items()}, exec=active[None, :])
      got = fn(st, active, np.zeros(64, np.uint8), np.zeros(32, np.uint64))
      for nm, w in p.outputs.items():
        want = np.broadcast_to(np.asarray(ref[nm], dtype=np.uint64), (1, 32))[0] & np.uint64((1 << w) - 1)
        have = got[nm] & np.uint64((1 << w) - 1)
        bad = want != have
        j = int(np.argmax(bad))
        assert not bad.any(), (k, nm, j, hex(int(want[j])), hex(int(have[j])))
  print(f"ir3: {len(fns)} keys bit-exact through LLVM, {len(declined)} declined")
  assert len(fns) > 150


def test_sat_clamps_every_float_result_and_absneg_copies():
  """(sat) on every float key: the key's plain result clamped to [+0, 1] (NaN -> +0) by the test's own clamp; absneg.f
  and absneg.s are plain copies (their modifiers are the binding's)."""
  rng = np.random.default_rng(110)
  for k in ir3.keys():
    if not k.endswith(".sat") or ir3.modifier(k) != "f":
      continue
    w = 16 if ".h." in k or k.startswith("mad.f16") else 32
    a, b, c = pool(w, rng), pool(w, rng), pool(w, rng)
    plain, sat = run(k[:-4], S0=a, S1=b, S2=c), run(k, S0=a, S1=b, S2=c)
    for p, s in zip(plain, sat):
      x = decode(p & ((1 << w) - 1), f"f{w}")
      assert s & ((1 << w) - 1) == f2b(0.0 if np.isnan(x) or x <= 0 else min(x, 1.0), w), (k, hex(p), hex(s))
    checked("ir3", k, "clamp of the plain key's result (test-side clamp)")
  for k in ("absneg.f", "absneg.f.h", "absneg.s", "absneg.s.h"):
    a = rnd(rng, 32)
    w = 16 if k.endswith(".h") else 32
    assert [v & ((1 << w) - 1) for v in run(k, S0=a)] == [v & ((1 << w) - 1) for v in a]
    checked("ir3", k, "bit copy")


@pytest.mark.parametrize("adreno", ["a630", "a730"])
def test_every_alu_leaf_of_the_decoder_has_a_body_or_a_reason(adreno):
  """cat1-4 leaves of the isaspec tables (gputwin.isa.ir3, from the XML): each is a row's leaf, a cat1 form using the
  mov/cov keys, or listed in ir3.MISSING with why."""
  from gputwin.isa.ir3 import GPUS
  from gputwin.isa.ir3.spec import spec
  ops = {ir3.row(k)[1]["op"] for k in ir3.keys()}
  leaves = set()
  for b in spec().leaves("#instruction", GPUS[adreno]):
    if any(c.name.startswith(tuple(f"#instruction-cat{n}" for n in (1, 2, 3, 4))) for c in b.chain):
      leaves.add(b.name)
  assert leaves - ops - set(ir3.BY_TYPE) == set(ir3.MISSING)
  assert {"add.f", "cmps.f", "mad.f32", "sel.b32", "rcp", "hrsq", "dp4acc", "shlg"} <= leaves & ops


def test_every_alu_instruction_of_real_mesa_kernels_has_a_key():
  """Mesa's ir3 compiler output (shared/vendor/ir3/kernels) and disasm vectors, decoded by gputwin.isa.ir3: every
  cat1-4 instruction maps to a compiled body through `inst_key`, or is a MISSING leaf (movmsk, wmm, bary.f ...)."""
  import glob
  import json
  from gputwin.isa.ir3 import decode, decode_all
  insts = [i for fn in sorted(glob.glob(str(VENDOR / "kernels" / "a*" / "*.bin")))
           for i in decode_all(Path(fn).read_bytes(), Path(fn).parent.name)]
  for line in (VENDOR / "disasm-vectors.jsonl").read_text().splitlines() if VENDOR.exists() else []:
    v = json.loads(line)
    if v["gen"] >= 6:
      try:
        insts.append(decode(bytes.fromhex(v["hex"])[::-1], v["gpu"]))
      except Exception:  # words Mesa prints as raw / with a problem note
        pass
  alu, seen = [i for i in insts if 1 <= i.cat <= 4], set()
  for i in alu:
    if i.name in ir3.MISSING:
      continue
    k = ir3.inst_key(i)
    seen.add(k)
    assert semantics("ir3", k).outputs == {"D0": 32} or semantics("ir3", k).calls, (i.text, k)
  if VENDOR.exists():
    assert len(alu) > 1000 and len(seen) > 50


def test_dst_conv_converts_the_result_to_the_other_precision():
  """`.conv` keys (DST_CONV) are the plain key's result converted by the test: numpy float16<->float32 (round to
  nearest even), Python sign/zero extension of 16-bit integers, the low 16 bits of 32-bit ones."""
  rng = np.random.default_rng(120)
  done = 0
  for k in ir3.keys():
    if not k.endswith(".conv"):
      continue
    base = k[:-5]
    op = ir3.row(k)[1]["op"]
    w = int(op[-2:]) if op[-2:] in ("16", "32") else 16 if ".h" in k else 32
    flt = ir3.modifier(k) == "f" and not op.startswith(("cmps", "cmpv"))
    a, b, c = ([pool(w, rng) for _ in range(3)] if flt else [rnd(rng, w) for _ in range(3)])
    plain, conv = run(base, S0=a, S1=b, S2=c), run(k, S0=a, S1=b, S2=c)
    for p, v in zip(plain, conv):
      if flt and w == 16:
        want = f2b(float(np.uint16(p & 0xffff).view(np.float16)), 32)
      elif flt:
        x = np.uint32(p).view(np.float32)
        with np.errstate(over="ignore"):
          want = f2b(float(x.astype(np.float16)), 16)
      elif w == 32:
        want = p & 0xffff
      else:
        signed = op.endswith((".s", "s16", "s24")) or op in ("ashr.b", "clz.b") or op.startswith("cmpv")
        want = (sx(p, 16) if signed else p & 0xffff) & 0xffffffff
      got = v & (0xffff if w == 32 else 0xffffffff)
      assert got == want, (k, hex(p), hex(v), hex(want))
    checked("ir3", k, "the plain key's result converted by numpy / Python integers")
    done += 1
  assert done > 200
