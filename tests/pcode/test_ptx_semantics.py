"""PTX semantics (gputwin/pcode/ptx.py) against oracles written here: Python integers for integer ops, exact
Fractions with a nextafter bracket for every IEEE rounding, the manual's own `Semantics` blocks (parsed from
/work/shared/vendor/ptx/isa-9.0 when present), and the LLVM backend against the numpy one for every key it compiles."""
from __future__ import annotations

import re
import struct
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from gputwin.errors import PcodeError
from gputwin.pcode import FlatMemory, Semantics, build, family_of, llvm, ptx, semantics

MD = Path("/work/shared/vendor/ptx/isa-9.0")
N = 96  # lanes per batch


def run(k: str, mem=None, **ins) -> dict:
  sem = semantics("ptx", k)
  st = {}
  for nm, w in sem.inputs.items():
    v = ins.get(nm, 0)
    st[nm] = np.array(np.broadcast_to(np.asarray(v, dtype=object), (N,)).astype(object) & ((1 << w) - 1),
                      dtype=np.uint64).astype(np.uint32 if w <= 32 else np.uint64)[None, :]
  out = sem(st, exec=np.ones((1, N), bool), mem=mem)
  return {nm: [int(x) for x in np.broadcast_to(np.asarray(v), (1, N))[0]] for nm, v in out.items()}


def rnd(rng, w: int, edges=()) -> list[int]:
  e = [0, 1, 2, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1, 0x7f, 0x80, 0xff] + list(edges)
  return [int(e[i % len(e)]) & ((1 << w) - 1) if rng.random() < 0.3 else int(rng.integers(0, 1 << 62)) *
          4 + int(rng.integers(0, 4)) & ((1 << w) - 1) for i in range(N)]


def sx(v: int, w: int) -> int:
  v &= (1 << w) - 1
  return v - (1 << w) if v >> (w - 1) else v


def val(v: int, t: str) -> int:
  w = int(t[1:])
  return sx(v, w) if t[0] == "s" else v & ((1 << w) - 1)


# ------------------------------------------------------------------------------------------------ plumbing
def test_family_and_keys():
  assert family_of("sm_80") == family_of("sm_90") == family_of("sm_90a") == "ptx"
  assert ptx.key("add", ("rn", "f32")) == "add.rn.f32"
  assert ptx.key("ld", (".global", ".nc", ".v4", ".f32")) == "ld.v4.f32"
  assert ptx.key("atom", ("acq_rel", "gpu", "add", "s32")) == "atom.add.s32"
  assert ptx.key("shfl", ("sync", "bfly", "b32")) == "shfl.bfly.b32"
  assert ptx.key("bar", ("sync",)) == "bar.sync" and ptx.key("barrier", ("sync", "aligned")) == "barrier.sync"
  assert ptx.key("vote", ("sync", "uni", "pred")) == "vote.uni.pred" and ptx.key("bra", ("uni",)) == "bra"
  assert ptx.key("cvt", ("f64", "bf16", "rp")) == "cvt.rp.f64.bf16"  # modifiers in another order
  with pytest.raises(PcodeError):
    ptx.key("frobnicate", ("b32",))
  ks = ptx.keys()
  assert ks == sorted(ks) and len(ks) > 3000


def test_every_key_compiles_runs_and_cites_the_manual():
  rng = np.random.default_rng(0)
  for k in ptx.keys():
    sem = semantics("ptx", k)
    assert sem.text.startswith('"PTX ISA 9.0 ') and ".md" in sem.text.splitlines()[0]
    if any(c.isupper() for c in sem.calls):  # the executor's events (EVENTS)
      assert {c for c in sem.calls if c.isupper()} <= set(ptx.EVENTS), k
      continue
    st = {nm: rng.integers(0, 2**63, (1, 32), dtype=np.uint64) for nm in sem.inputs}
    st = {nm: v.astype(np.uint32) if sem.inputs[nm] <= 32 else v for nm, v in st.items()}
    st.update(ADDR=rng.integers(0, 64, (1, 32), dtype=np.uint64) * np.uint64(8), SRC0=np.uint32(2),
              VGPR=rng.integers(0, 2**32, (1, 32, 8), dtype=np.uint64).astype(np.uint32))
    out = sem(st, exec=rng.random((1, 32)) < 0.7, mem=FlatMemory(1024))
    assert set(out) == set(sem.outputs), k
  for f in {ptx.row(k)[0].cite.split()[0] for k in ptx.keys()}:
    assert not MD.exists() or (MD / f).exists(), f


# ------------------------------------------------------------------------------------------------ integers
def _int_oracle(op: str, g: dict, a: int, b: int, c: int, d: int = 0):
  t = g.get("t", "b32")
  w = int(re.sub(r"\D", "", t) or 32)
  A, B, C = val(a, t if t[0] in "us" else "u" + t[1:]), val(b, t if t[0] in "us" else "u" + t[1:]), \
    val(c, t if t[0] in "us" else "u" + t[1:])
  m = g.get("mode")
  if op in ("add", "sub"):
    r = A + B if op == "add" else A - B
    return max(min(r, 2**31 - 1), -2**31) if g.get("sat") else r
  if op in ("mul", "mad"):
    p = A * B
    r = p if m in ("lo", "wide") else p >> w
    return (r + (val(c, t[0] + str(2 * w)) if m == "wide" else C)) if op == "mad" else r
  if op == "div":
    return -1 if B == 0 else abs(A) // abs(B) * (1 if (A < 0) == (B < 0) else -1)
  if op == "rem":
    return A if B == 0 else A - (abs(A) // abs(B) * (1 if (A < 0) == (B < 0) else -1)) * B
  if op in ("min", "max"):
    return (min if op == "min" else max)(A, B)
  if op in ("abs", "neg"):
    return abs(A) if op == "abs" else -A
  if op == "sad":
    return C + abs(A - B)
  if op in ("shl", "shr"):
    s = b & 0xffffffff
    return (A << min(s, w)) if op == "shl" else A >> min(s, w)
  if op in ("mul24", "mad24"):
    x, y = (sx(a, 24), sx(b, 24)) if t[0] == "s" else (a & 0xffffff, b & 0xffffff)
    p = x * y
    return (p if m == "lo" else p >> 16) + (c if op == "mad24" else 0)
  if op in ("and", "or", "xor"):
    return {"and": a & b, "or": a | b, "xor": a ^ b}[op]
  if op == "not":
    return ~a
  if op == "cnot":
    return int(a & ((1 << w) - 1) == 0)
  if op == "popc":
    return bin(a & ((1 << w) - 1)).count("1")
  if op == "clz":
    return w - (a & ((1 << w) - 1)).bit_length()
  if op == "brev":
    return int(f"{a & ((1 << w) - 1):0{w}b}"[::-1], 2)
  raise KeyError(op)


INT_OPS = r"(add|sub|mul|mad|div|rem|min|max|abs|neg|sad|shl|shr|mul24|mad24|and|or|xor|not|cnot|popc|clz|brev)"


def test_integer_ops_against_python_integers():
  rng = np.random.default_rng(1)
  done = 0
  for k in ptx.keys():
    op = k.split(".")[0]
    r, g = ptx.row(k)
    if not re.fullmatch(INT_OPS, op) or not re.fullmatch(r"[usb]\d+", g.get("t", "")) or g.get("cc") or g.get("relu") or \
       g.get("t") == "pred" or (op == "mad" and g.get("sat")):
      continue
    w = int(re.sub(r"\D", "", g["t"]))
    a, b, c = rnd(rng, w), rnd(rng, w), rnd(rng, 2 * w if g.get("mode") == "wide" else w)
    if op in ("shl", "shr"):
      b = [int(x) % (w + 8) if i % 3 else x for i, x in enumerate(rnd(rng, 32))]
    if op in ("div", "rem"):
      b = [0 if i % 7 == 0 else x for i, x in enumerate(b)]
    out = run(k, S0=a, S1=b, S2=c)["D0"]
    ow = 2 * w if g.get("mode") == "wide" else 32 if op in ("popc", "clz") else w
    for i in range(N):
      want = _int_oracle(op, g, a[i], b[i], c[i]) & ((1 << ow) - 1)
      assert out[i] & ((1 << ow) - 1) == want, (k, hex(a[i]), hex(b[i]), hex(c[i]), hex(out[i]), hex(want))
    done += 1
  assert done > 100


def test_carry_chain_adds_128_bits():
  rng = np.random.default_rng(2)
  x, y = [int(v) for v in rng.integers(0, 1 << 62, 4)] + [2**64 - 1] * 4, [2**64 - 1] * 4 + [1, 2**63, 0, 2**64 - 1]
  for add in (True, False):
    lo = run("add.cc.u32" if add else "sub.cc.u32", S0=[v & 0xffffffff for v in x * 12], S1=[v & 0xffffffff for v in y * 12])
    hi = run("addc.u32" if add else "subc.u32", S0=[v >> 32 & 0xffffffff for v in x * 12],
             S1=[v >> 32 & 0xffffffff for v in y * 12], CC=lo["CC"])
    for i in range(8):
      want = (x[i] + y[i] if add else x[i] - y[i]) & (2**64 - 1)
      assert (hi["D0"][i] << 32 | lo["D0"][i]) == want


def test_setp_integer_and_predicate_combine():
  rng = np.random.default_rng(3)
  ops = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
  for cmp, o in ops.items():
    for t in ("s32", "u64", "s16"):
      w = int(t[1:])
      a, b, p = rnd(rng, w), rnd(rng, w), [int(v) for v in rng.integers(0, 2, N)]
      a = [b[i] if i % 5 == 0 else a[i] for i in range(N)]
      tt = "u" + t[1:] if cmp in ("lo", "ls", "hi", "hs") else t
      out = run(f"setp.{cmp}.and.{t}", S0=a, S1=b, S2=p)
      for i in range(N):
        c = eval(f"{val(a[i], tt)} {o} {val(b[i], tt)}")
        assert (out["D0"][i], out["D1"][i]) == (int(c and p[i]), int((not c) and p[i]))


# ------------------------------------------------------------------------------------------------ floats
FMT = {"f16": (16, np.float16, np.uint16), "f32": (32, np.float32, np.uint32), "f64": (64, np.float64, np.uint64),
       "bf16": (16, None, None)}
CANON = {"f16": 0x7fff, "bf16": 0x7fff, "f32": 0x7fffffff, "f64": 0x7fffffffffffffff}
FMT_MAN = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}  # significand bits stored


def decode(bits: int, t: str) -> float:
  if t == "bf16":
    return float(np.uint32(bits << 16).view(np.float32))
  w, ft, ut = FMT[t]
  return float(ut(bits).view(ft))


def encode(x: float, t: str) -> int:
  if t == "bf16":
    u = int(np.float32(x).view(np.uint32))
    assert u & 0xffff == 0
    return u >> 16
  w, ft, ut = FMT[t]
  return int(ft(x).view(ut))


def oracle_round(q: Fraction, t: str, mode: str) -> float:
  """q rounded into format t: bracket it between two adjacent values (found by stepping raw bits), then pick."""
  w = FMT[t][0]
  neg, a = q < 0, abs(q)
  try:
    start = np.float64(float(a))
  except OverflowError:
    start = np.float64(np.inf)
  with np.errstate(over="ignore"):
    guess = float(start.astype(FMT[t][1])) if t != "bf16" else float(np.float32(start))
  b = encode(guess, t) if t != "bf16" else int(np.float32(guess).view(np.uint32)) >> 16
  inf = {16: 0x7c00, 32: 0x7f800000, 64: 0x7ff0000000000000}[w] if t != "bf16" else 0x7f80
  big = Fraction(2) ** ({"f16": 16, "bf16": 128, "f32": 128, "f64": 1024}[t])  # inf, for the rounding decision

  def v(bits):
    return big if bits >= inf else Fraction(decode(bits, t))
  b = min(b, inf)
  while b > 0 and v(b) > a:
    b -= 1
  while b < inf and v(b + 1) <= a:
    b += 1
  lo, hi = (b, b + 1) if b < inf else (inf - 1, inf)  # beyond the largest finite value: between it and inf
  if v(lo) == a:
    r = lo
  elif mode == "rz":
    r = lo
  elif mode == "rm":
    r = hi if neg else lo
  elif mode == "rp":
    r = lo if neg else hi
  else:
    d = (a - v(lo)) - (v(hi) - a)
    r = lo if d < 0 or (d == 0 and (mode == "rn" and lo % 2 == 0)) else hi
  x = float("inf") if r >= inf else decode(r, t)
  return -x if neg else x


def exact(op: str, xs: list[float]):
  if op in ("add", "sub", "mul", "fma", "div"):
    f = [Fraction(x) for x in xs]
    return {"add": lambda: f[0] + f[1], "sub": lambda: f[0] - f[1], "mul": lambda: f[0] * f[1],
            "fma": lambda: f[0] * f[1] + f[2], "div": lambda: f[0] / f[1]}[op]()
  raise KeyError(op)


def float_pool(t: str, rng, n: int) -> list[int]:
  w = FMT[t][0]
  edges = {16: [0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0x0001, 0x83ff, 0x3c00, 0xbc00, 0x7bff, 0x0400, 0x3555],
           32: [0, 1 << 31, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fa00001, 0x00000001, 0x807fffff, 0x00800000,
                0x3f800000, 0xbfc00000, 0x7f7fffff, 0x33800000, 0x3f800001],
           64: [0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 1, 0x800fffffffffffff,
                0x0010000000000000, 0x3ff0000000000000, 0x7fefffffffffffff, 0x3ff0000000000001, 0x3ca0000000000000]}
  e = edges[w] if t != "bf16" else [0, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x0001, 0x807f, 0x3f80, 0xbfc0, 0x7f7f]
  exp_bits = {16: 5, 32: 8, 64: 11}[w] if t != "bf16" else 8
  man = w - 1 - exp_bits
  out = []
  for i in range(n):
    if rng.random() < 0.35:
      out.append(e[int(rng.integers(0, len(e)))])
    else:  # random sign and mantissa, exponents near the middle so sums and products stay interesting
      bias = (1 << (exp_bits - 1)) - 1
      ex = bias + int(rng.integers(-12, 12))
      out.append(int(rng.integers(0, 2)) << (w - 1) | ex << man | int(rng.integers(0, 1 << min(man, 62))))
  return out


def check_float(k: str, t: str, op: str, mode: str, srcs: list[list[int]], out: list[int], ftz: bool = False):
  w = FMT[t][0]
  for i in range(N):
    xs = [decode(s[i], t) for s in srcs]
    if any(np.isnan(xs)) or not all(np.isfinite(xs)) or (op == "div" and xs[1] == 0):
      with np.errstate(all="ignore"):
        sp = {"add": lambda: xs[0] + xs[1], "sub": lambda: xs[0] - xs[1], "mul": lambda: np.float64(xs[0]) * xs[1],
              "fma": lambda: np.float64(xs[0]) * xs[1] + xs[2], "div": lambda: np.float64(xs[0]) / xs[1]}[op]()
      want = CANON[t] if np.isnan(sp) else encode(float(sp), t)
      if not (np.isfinite(sp) or np.isnan(sp)) and op == "fma" and np.isfinite(xs).all():
        continue  # a product that overflows f64 only in this oracle's shortcut
    else:
      q = exact(op, xs)
      if q == 0:
        sa = [np.signbit(x) for x in xs]
        if op in ("mul", "div"):
          z = -0.0 if sa[0] != sa[1] else 0.0
        else:
          p = (sa[0] != sa[1], sa[2]) if op == "fma" else (sa[0], sa[1] != (op == "sub"))
          zx = (xs[0] * xs[1] == 0) if op == "fma" else xs[0] == 0
          zy = xs[2] == 0 if op == "fma" else xs[1] == 0
          z = -0.0 if (zx and zy and p[0] and p[1]) or (mode == "rm" and not (zx and zy and not p[0] and not p[1])) else 0.0
        want = encode(z, t)
      else:
        want = encode(oracle_round(q, t, mode), t)
    assert out[i] & ((1 << w) - 1) == want, (k, [hex(s[i]) for s in srcs], hex(out[i]), hex(want))


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma", "div"])
def test_ieee_roundings_are_exact(op, t):
  rng = np.random.default_rng(zlib.crc32(f"{op}{t}".encode()))
  for mode in ("rn", "rz", "rm", "rp"):
    n = 3 if op == "fma" else 2
    srcs = [float_pool(t, rng, N) for _ in range(n)]
    if op in ("add", "sub", "fma"):  # cancellations: exact zeros and tiny differences
      srcs[-1] = [(s ^ (1 << (FMT[t][0] - 1))) if i % 6 == 0 else s for i, s in enumerate(srcs[0])] if n == 2 else srcs[-1]
    k = f"{op}.{mode}.{t}"
    out = run(k, **{f"S{j}": s for j, s in enumerate(srcs)})["D0"]
    check_float(k, t, op, mode, srcs, out)


@pytest.mark.parametrize("t", ["f16", "bf16", "f16x2", "bf16x2"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma"])
def test_half_precision_rounds_once(op, t):
  rng = np.random.default_rng(zlib.crc32(f"{op}{t}".encode()))
  e = t[:-2] if t.endswith("x2") else t
  n = 3 if op == "fma" else 2
  lo = [float_pool(e, rng, N) for _ in range(n)]
  hi = [float_pool(e, rng, N) for _ in range(n)]
  k = f"{op}.rn.{t}"
  srcs = [[h << 16 | l for h, l in zip(hi[j], lo[j])] if t.endswith("x2") else lo[j] for j in range(n)]
  out = run(k, **{f"S{j}": s for j, s in enumerate(srcs)})["D0"]
  check_float(k, e, op, "rn", lo, [x & 0xffff for x in out])
  assert all(x >> 16 == 0 for x in out) or t.endswith("x2")
  if t.endswith("x2"):
    check_float(k, e, op, "rn", hi, [x >> 16 for x in out])


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_sqrt_and_rcp_roundings(mode):
  rng = np.random.default_rng(5)
  for t in ("f32", "f64"):
    a = [s & ~(1 << (FMT[t][0] - 1)) for s in float_pool(t, rng, N)]  # non-negative
    out = run(f"sqrt.{mode}.{t}", S0=a)["D0"]
    rc = run(f"rcp.{mode}.{t}", S0=a)["D0"]
    for i in range(N):
      x = decode(a[i], t)
      if not np.isfinite(x) or x == 0:
        continue
      r = decode(out[i], t)
      lo, hi = (np.nextafter(FMT[t][1](r), FMT[t][1](-1)), FMT[t][1](r))
      sq = Fraction(r) ** 2
      below = [Fraction(float(v)) ** 2 for v in (np.nextafter(FMT[t][1](r), FMT[t][1](0)),
                                                 np.nextafter(FMT[t][1](r), FMT[t][1](np.inf)))]
      if mode == "rz" or mode == "rm":
        assert sq <= Fraction(x) < below[1], (t, hex(a[i]))
      elif mode == "rp":
        assert below[0] < Fraction(x) <= sq, (t, hex(a[i]))
      assert rc[i] == encode(oracle_round(1 / Fraction(x), t, mode), t), (t, mode, hex(a[i]))
      del lo, hi


def test_float_compare_min_max_and_nan_rules():
  rng = np.random.default_rng(6)
  a, b = float_pool("f32", rng, N), float_pool("f32", rng, N)
  b = [a[i] ^ 0x80000000 if i % 9 == 0 else b[i] for i in range(N)]  # +0 / -0 pairs among them
  x, y = [decode(v, "f32") for v in a], [decode(v, "f32") for v in b]
  ordered = {"eq": lambda p, q: p == q, "ne": lambda p, q: p < q or p > q, "lt": lambda p, q: p < q,
             "le": lambda p, q: p <= q, "gt": lambda p, q: p > q, "ge": lambda p, q: p >= q}
  for cmp, f in ordered.items():
    out, unord = run(f"setp.{cmp}.f32", S0=a, S1=b)["D0"], run(f"setp.{cmp}u.f32", S0=a, S1=b)["D0"]
    for i in range(N):
      nan = np.isnan(x[i]) or np.isnan(y[i])
      assert out[i] == int(not nan and f(x[i], y[i])) and unord[i] == int(nan or f(x[i], y[i])), (cmp, i)
  mn, mx, mnn = run("min.f32", S0=a, S1=b)["D0"], run("max.f32", S0=a, S1=b)["D0"], run("min.NaN.f32", S0=a, S1=b)["D0"]
  for i in range(N):
    p, q = x[i], y[i]
    if np.isnan(p) and np.isnan(q):
      want_mn = want_mx = CANON["f32"]
    elif np.isnan(p) or np.isnan(q):
      want_mn = want_mx = b[i] if np.isnan(p) else a[i]
    else:
      key = lambda v: (v, not np.signbit(v))  # noqa: E731  -0.0 < +0.0
      want_mn = encode(min(p, q, key=key), "f32")
      want_mx = encode(max(p, q, key=key), "f32")
    assert (mn[i], mx[i]) == (want_mn, want_mx), (hex(a[i]), hex(b[i]))
    assert mnn[i] == (CANON["f32"] if np.isnan(p) or np.isnan(q) else want_mn)


def test_ftz_and_sat():
  den, one = 0x00000001, 0x3f800000
  out = run("add.ftz.f32", S0=[den | 0x80000000] * N, S1=[0x80000000] * N)["D0"]
  assert out[0] == 0x80000000  # -denormal flushed: -0 + -0
  out = run("mul.rn.sat.f32", S0=[0x7fc00000, 0x40000000, 0xbf800000, one] * (N // 4), S1=[one] * N)["D0"]
  assert out[:4] == [0, one, 0, one]


@pytest.mark.parametrize("k,fn", [("cvt.rni.s32.f32", np.rint), ("cvt.rzi.s32.f32", np.trunc),
                                  ("cvt.rmi.s64.f32", np.floor), ("cvt.rpi.u32.f64", np.ceil)])
def test_float_to_int_saturates(k, fn):
  t, st = k.split(".")[2], k.split(".")[3]
  rng = np.random.default_rng(7)
  a = float_pool(st, rng, N)
  out = run(k, S0=a)["D0"]
  w = int(t[1:])
  lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if t[0] == "s" else (0, (1 << w) - 1)
  for i in range(N):
    x = decode(a[i], st)
    want = 0 if np.isnan(x) else lo if x <= lo else hi if x >= hi else int(fn(x))
    assert out[i] & ((1 << w) - 1) == min(max(want, lo), hi) & ((1 << w) - 1), (k, hex(a[i]))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_int_to_float_and_narrowing(mode):
  rng = np.random.default_rng(8)
  ints = rnd(rng, 64)
  out = run(f"cvt.{mode}.f32.s64", S0=ints)["D0"]
  for i in range(N):
    assert out[i] == encode(oracle_round(Fraction(sx(ints[i], 64)), "f32", mode), "f32")
  d = float_pool("f64", rng, N)
  out = run(f"cvt.{mode}.f32.f64", S0=d)["D0"]
  for i in range(N):
    x = decode(d[i], "f64")
    want = CANON["f32"] if np.isnan(x) else encode(float(np.float32(x)), "f32") if not np.isfinite(x) or x == 0 \
      else encode(oracle_round(Fraction(x), "f32", mode), "f32")
    assert out[i] == want, (mode, hex(d[i]))
  f = float_pool("f32", rng, N)
  for dt in ("f16", "bf16") if mode in ("rn", "rz") else ("f16",):
    out = run(f"cvt.{mode}.{dt}.f32", S0=f)["D0"]
    for i in range(N):
      x = decode(f[i], "f32")
      want = CANON[dt] if np.isnan(x) else encode(x, dt) if not np.isfinite(x) or x == 0 \
        else encode(oracle_round(Fraction(x), dt, mode), dt)
      assert out[i] == want, (dt, mode, hex(f[i]))


def test_packed_conversions_put_a_in_the_upper_half():
  one, two = 0x3f800000, 0x40000000
  assert run("cvt.rn.f16x2.f32", S0=[one] * N, S1=[two] * N)["D0"][0] == 0x3c004000
  assert run("cvt.rn.bf16x2.f32", S0=[one] * N, S1=[two] * N)["D0"][0] == 0x3f804000
  assert run("cvt.rn.satfinite.e4m3x2.f32", S0=[one] * N, S1=[0x7f800000] * N)["D0"][0] == 0x387e  # 1.0, 448
  assert run("cvt.rn.satfinite.e5m2x2.f16x2", S0=[0x3c00 << 16 | 0x7e00] * N)["D0"][0] == 0x3c7f  # 1.0, NaN
  assert run("cvt.rna.tf32.f32", S0=[0x3f801000] * N)["D0"][0] == 0x3f802000  # a tie rounds away


# ------------------------------------------------------------------------------------------------ memory, lanes
def test_loads_stores_and_atomics():
  mem = FlatMemory(1 << 12)
  mem.data[:16] = np.frombuffer(struct.pack("<4i", -2, 7, 0x12345678, -300), np.uint8)
  out = run("ld.v4.s32", mem=mem, ADDR=[0] * N)
  assert [out[f"D{i}"][0] & 0xffffffff for i in range(4)] == [0xfffffffe, 7, 0x12345678, 0xfffffed4]
  assert run("ld.s8", mem=mem, ADDR=[0] * N)["D0"][0] == 2**64 - 2  # sign-extended
  assert run("ld.u16", mem=mem, ADDR=[0] * N)["D0"][0] == 0xfffe
  run("st.v2.f32", mem=mem, ADDR=[64] * N, S0=[1] * N, S1=[2] * N)
  assert struct.unpack("<2I", mem.data[64:72].tobytes()) == (1, 2)
  mem.data[128:132] = 0
  old = run("atom.add.u32", mem=mem, ADDR=[128] * N, S0=[1] * N)["D0"]
  assert sorted(old) == list(range(N)) and struct.unpack("<I", mem.data[128:132].tobytes())[0] == N
  mem.data[128:132] = np.frombuffer(struct.pack("<I", 5), np.uint8)
  old = run("atom.inc.u32", mem=mem, ADDR=[128] * N, S0=[7] * N)["D0"]
  assert old[:9] == [5, 6, 7, 0, 1, 2, 3, 4, 5]
  mem.data[128:132] = 0
  old = run("atom.cas.b32", mem=mem, ADDR=[128] * N, S0=list(range(N)), S1=list(range(1, N + 1)))["D0"]
  assert old == list(range(N))


def _ieee_f32_add(x: np.ndarray, y: np.ndarray, flush: bool) -> np.ndarray:
  """x + y in IEEE binary32 (numpy, round to nearest even); `flush`: subnormal inputs and result -> zero of their
  sign (PTX ISA 9.0 atom.md: atom.add.f32 on global memory)."""
  def ftz(v):
    return np.where((v != 0) & (np.abs(v) < np.float32(2.0 ** -126)), np.copysign(np.float32(0), v), v)
  r = (ftz(x) + ftz(y)) if flush else x + y
  return (ftz(r) if flush else r).astype(np.float32)


@pytest.mark.parametrize("op", ["atom", "red"])
def test_float_atomic_add_flushes_subnormals_on_global_memory_only(op):
  """The key names the space (atom.add.f32 means something else on global and shared memory); a generic one has none
  of its own."""
  tiny = np.float32(2.0 ** -140)
  x = np.array([tiny, -tiny, 1.5e-38, 3.0, -1e-45, 2.0 ** -126] * (N // 6), np.float32)
  y = np.array([tiny, -tiny, -1.2e-38, 1e-45, 0.0, -(2.0 ** -127)] * (N // 6), np.float32)
  assert ptx.spaces(op, ("add", "f32")) == ("global", "shared") and ptx.spaces(op, ("add", "u32")) == ()
  with pytest.raises(PcodeError, match="state space"):
    ptx.key(op, ("add", "f32"))
  for space, flush in (("global", True), ("shared::cta", False)):
    k = ptx.key(op, (space, "add", "f32"))
    mem = FlatMemory(4 * N)
    mem.data[:] = x.view(np.uint8)
    out = run(k, mem=mem, ADDR=list(range(0, 4 * N, 4)), S0=[int(v) for v in y.view(np.uint32)])
    want = _ieee_f32_add(x, y, flush)
    assert mem.data.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (k, space)
    if op == "atom":  # the old value, as memory held it
      assert out["D0"] == x.view(np.uint32).tolist()


def _vgpr(rows: dict) -> np.ndarray:
  v = np.zeros((1, 32, 8), np.uint32)
  for r, vals in rows.items():
    v[0, :, r] = vals
  return v


def shfl_manual(mode: str, a, b: int, c: int):
  """shfl.sync as the manual's Semantics block says (shfl.md), written out here."""
  out = []
  for lane in range(32):
    bval, cval, mask = b & 31, c & 31, (c >> 8) & 31
    maxl, minl = (lane & mask) | (cval & ~mask), lane & mask
    j, p = {"up": (lane - bval, lane - bval >= maxl), "down": (lane + bval, lane + bval <= maxl),
            "bfly": (lane ^ bval, (lane ^ bval) <= maxl), "idx": (minl | (bval & ~mask), (minl | (bval & ~mask)) <= maxl)}[mode]
    out.append((a[lane if not p else j], int(p)))
  return out


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
def test_shfl_follows_the_manual(mode):
  rng = np.random.default_rng(9)
  a = [int(v) for v in rng.integers(0, 2**32, 32)]
  for b, c in ((1, 0x1f), (2, 0x1f), (5, 0x0), (3, 0x181f), (7, 0x1c1f), (31, 0x1f)):
    out = semantics("ptx", f"shfl.{mode}.b32")({"VGPR": _vgpr({3: a}), "SRC0": np.uint32(3),
                                                "S1": np.full((1, 32), b, np.uint32), "S2": np.full((1, 32), c, np.uint32)},
                                               exec=np.ones((1, 32), bool))
    assert list(zip(out["D0"][0].tolist(), out["D1"][0].tolist())) == shfl_manual(mode, a, b, c), (b, hex(c))


def test_vote_match_redux_elect():
  rng = np.random.default_rng(10)
  p = [int(v) for v in rng.integers(0, 2, 32)]
  x = [int(v) for v in rng.integers(0, 4, 32)]
  ex = np.array([[i % 5 != 0 for i in range(32)]])
  act = [i for i in range(32) if ex[0, i]]
  st = {"VGPR": _vgpr({1: p, 2: x}), "SRC0": np.uint32(1), "S1": np.full((1, 32), 0xffffffff, np.uint32)}
  call = lambda k, **kw: semantics("ptx", k)(dict(st, **kw), exec=ex)  # noqa: E731
  bal = sum(1 << i for i in act if p[i])
  assert call("vote.ballot.b32")["D0"][0, 1] == bal
  assert call("vote.any.pred")["D0"][0, 1] == int(bal != 0)
  assert call("vote.all.pred")["D0"][0, 1] == int(all(p[i] for i in act))
  m = call("match.any.b32", SRC0=np.uint32(2))["D0"][0]
  for i in act:
    assert m[i] == sum(1 << j for j in act if x[j] == x[i])
  r = call("redux.add.u32", SRC0=np.uint32(2))["D0"][0]
  assert r[1] == sum(x[i] for i in act)
  r = call("redux.max.s32", SRC0=np.uint32(2))["D0"][0]
  assert r[1] == max(x[i] for i in act)
  e = semantics("ptx", "elect")({"S0": np.full((1, 32), 0xffffffff, np.uint32)}, exec=ex)
  assert e["D0"][0, 3] == act[0] and e["D1"][0].tolist()[:3] == [0, 1, 0]


def test_program_control_names_its_events():
  for k, call in (("exit", "EXIT"), ("ret", "RET"), ("trap", "TRAP"), ("bar.sync", "BARRIER"),
                  ("bar.warp.sync", "WARP_SYNC"), ("nanosleep.u32", "NANOSLEEP"), ("bar.red.popc.u32", "BARRIER_RED_POPC")):
    assert call in semantics("ptx", k).calls and call in ptx.EVENTS
  assert run("bra", TARGET=[0x40] * N)["PC"][0] == 0x40


# ------------------------------------------------------------------------------------------------ the manual
_TOK = re.compile(r"\s*(0x[0-9a-fA-F]+|\d+|[A-Za-z_][A-Za-z_0-9]*|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|[-+*/%&|^~!<>=?:;,(){}\[\]])")


def _c_to_py(src: str) -> str:
  """The manual's C-like Semantics block as Python: statements (if/else, for, while, blocks, break, assignments,
  ++), expressions (&& || ! ?:, x[i] bit reads and writes, t<hi..lo> fields). Python's integers are unbounded, so
  a width's wrap-around is the caller's to apply."""
  src = re.sub(r"//[^\n]*", "", src)
  src = re.sub(r"(\w+)<(\d+)\.\.(\d+)>", r"((\1 >> \3) & ((1 << (\2 - \3 + 1)) - 1))", src)
  src = re.sub(r"(?<![\w.])\.?[usb](?:32|64)\s+(?=[A-Za-z_])", "", src)  # declarations `.u32 d = 0`
  toks = [t for t in _TOK.findall(src)]
  pos = [0]

  def peek(k=0):
    return toks[pos[0] + k] if pos[0] + k < len(toks) else ""

  def take(t=None):
    x = toks[pos[0]]
    assert t is None or x == t, (t, x, toks[pos[0]:pos[0] + 8])
    pos[0] += 1
    return x

  def expr_until(stops) -> list:
    out, depth = [], 0
    while peek() and not (depth == 0 and peek() in stops):
      t = take()
      depth += t in "([" and t != "" and t in ("(", "[")
      depth -= t in (")", "]")
      out.append(t)
    return out

  def ex(ts: list) -> str:
    depth, q = 0, None
    for i, t in enumerate(ts):  # ternary at the top level (right-associative)
      depth += t in ("(", "[")
      depth -= t in (")", "]")
      if depth == 0 and t == "?" and q is None:
        q = i
      if depth == 0 and t == ":" and q is not None:
        return f"(({ex(ts[q + 1:i])}) if ({ex(ts[:q])}) else ({ex(ts[i + 1:])}))"
    out, i = [], 0
    while i < len(ts):
      t = ts[i]
      if t in ("(", "["):
        j, depth = i + 1, 1
        while depth:
          depth += ts[j] in ("(", "[")
          depth -= ts[j] in (")", "]")
          j += 1
      if t == "(":  # a parenthesised expression (or call arguments): translated on its own
        out.append(f"({ex(ts[i + 1:j - 1])})")
        i = j
        continue
      if t == "[":  # a bit of the previous name
        base = out.pop()
        out.append(f"(({base} >> ({ex(ts[i + 1:j - 1])})) & 1)")
        i = j
        continue
      out.append({"&&": " and ", "||": " or ", "!": " not "}.get(t, t))
      i += 1
    return " ".join(out)

  def stmt(ind: int) -> list[str]:
    p = "  " * ind
    t = peek()
    if t == "{":
      take()
      out = []
      while peek() != "}":
        out += stmt(ind)
      take("}")
      return out or [p + "pass"]
    if t == ";":
      take()
      return []
    if t in ("if", "while"):
      take()
      take("(")
      c = expr_until({")"})
      take(")")
      out = [f"{p}{t} {ex(c)}:"] + (stmt(ind + 1) or [p + "  pass"])
      if t == "if" and peek() == "else":
        take()
        out += [f"{p}else:"] + (stmt(ind + 1) or [p + "  pass"])
      return out
    if t == "for":
      take()
      take("(")
      init = expr_until({";"})
      take(";")
      cond = expr_until({";"})
      take(";")
      step = expr_until({")"})
      take(")")
      body = stmt(ind + 1)
      return stmt_of(init, ind) + [f"{p}while {ex(cond)}:"] + body + stmt_of(step, ind + 1)
    if t == "break":
      take()
      take(";")
      return [p + "break"]
    ts = expr_until({";", "}"})
    if peek() == ";":
      take()
    return stmt_of(ts, ind)

  def stmt_of(ts: list, ind: int) -> list[str]:
    p = "  " * ind
    if not ts:
      return []
    if ts[-1] in ("++", "--"):
      return [f"{p}{ex(ts[:-1])} {'+' if ts[-1] == '++' else '-'}= 1"]
    if len(ts) > 3 and ts[1] == "[" and "=" in ts:
      k = ts.index("=")
      return [f"{p}{ts[0]} = ({ts[0]} & ~(1 << ({ex(ts[2:k - 1])}))) | ((({ex(ts[k + 1:])}) & 1) << ({ex(ts[2:k - 1])}))"]
    if "=" in ts:
      k = ts.index("=")
      return [f"{p}{ex(ts[:k])} = {ex(ts[k + 1:])}"]
    return [p + ex(ts)]

  lines = []
  while pos[0] < len(toks):
    lines += stmt(0)
  return "\n".join(lines)


def _c_eval(src: str, env: dict) -> dict:
  exec(_c_to_py(src), {"min": min, "max": max}, env)
  return env


def _manual(op: str) -> str:
  f = MD / f"{op}.md"
  if not f.exists():
    pytest.skip("PTX ISA 9.0 markdown not present")
  m = re.search(r"### Semantics\s*```(.*?)```", f.read_text(), re.S)
  return m[1]


@pytest.mark.parametrize("k,op", [("bfe.u32", "bfe"), ("bfe.s32", "bfe"), ("bfe.s64", "bfe"), ("bfi.b32", "bfi"),
                                  ("bfind.s32", "bfind"), ("bfind.shiftamt.u64", "bfind"), ("clz.b32", "clz"),
                                  ("popc.b64", "popc"), ("brev.b32", "brev"), ("sad.s32", "sad"), ("mul24.hi.s32", "mul24"),
                                  ("mad24.lo.u32", "mad24")])
def test_against_the_manuals_semantics_block(k, op):
  src = _manual(op)
  t = k.split(".")[-1]
  w = int(t[1:])
  rng = np.random.default_rng(zlib.crc32(k.encode()))
  a, b, c, d = rnd(rng, w), [int(v) for v in rng.integers(0, 80, N)], [int(v) for v in rng.integers(0, 80, N)], \
    [int(v) for v in rng.integers(0, 40, N)]
  if op in ("sad", "mul24", "mad24"):
    b, c = rnd(rng, w), rnd(rng, w)
  srcs = {"S0": a, "S1": b, "S2": c, "S3": d} if op == "bfi" else {"S0": a, "S1": b, "S2": c}
  if op == "bfi":
    srcs = {"S0": a, "S1": rnd(rng, w), "S2": c, "S3": d}
  out = run(k, **srcs)["D0"]
  for i in range(N):
    sv = lambda v: val(v, t) if t[0] == "s" else v  # noqa: E731
    env = {"a": sv(srcs["S0"][i]), "b": sv(srcs["S1"][i]), "c": sv(srcs["S2"][i]), "d": srcs.get("S3", [0] * N)[i],
           "type": t}
    text = re.sub(r"\.type\s*==\s*\.(\w+)", lambda m: "1" if m[1] == t else "0", src)
    text = text.replace(".shiftamt", "1" if "shiftamt" in k else "0")
    if op in ("mul24", "mad24"):
      mode = k.split(".")[1]
      env["a"], env["b"] = (sx(a[i], 24), sx(b[i], 24)) if t[0] == "s" else (a[i] & 0xffffff, b[i] & 0xffffff)
      text = "\n".join(ln for ln in text.splitlines() if ("." + mode) in ln or "variant" not in ln)
    if op == "bfi":  # the block computes f from b and leaves it in f
      pass
    env = _c_eval(text, env)
    want = env["f"] if op == "bfi" else env["d"]
    ow = 32 if op in ("clz", "popc", "bfind") else w
    assert out[i] & ((1 << ow) - 1) == want & ((1 << ow) - 1), (k, hex(a[i]), srcs["S1"][i], srcs["S2"][i])


# ------------------------------------------------------------------------------------------------ backends
def test_llvm_backend_agrees_with_numpy():
  """Every PTX key the LLVM backend compiles gives the numpy backend's bits on edge operands (as test_backends.py does
  for AMD bodies); the rest are declined with a reason."""
  from tests.pcode.test_backends import operands
  sems = {}
  for k in ptx.keys():
    s = semantics("ptx", k)
    if not (s.regfiles or s.mem or any(c.isupper() for c in s.calls)):
      sems[k] = s
  fns, declined = llvm.compile_host({k: s.program for k, s in sems.items()}, 32, speed=1)
  assert all(declined.values())
  exact = 0
  for k, fn in fns.items():
    p = sems[k].program
    rng = np.random.default_rng(zlib.crc32(k.encode()))
    for rnd_ in range(2):
      st = {nm: operands(rng, min(w, 64), 32) for nm, w in p.inputs.items()}
      active = np.ones(32, bool) if rnd_ == 0 else rng.random(32) < 0.5
      ref = sems[k]({nm: (v.astype(np.uint32) if p.inputs[nm] <= 32 else v)[None, :] for nm, v in st.items()},
                    exec=active[None, :])
      got = fn(st, active, np.zeros(64, np.uint8), np.zeros(32, np.uint64))
      for nm, w in p.outputs.items():
        want = np.broadcast_to(np.asarray(ref[nm], dtype=np.uint64), (1, 32))[0] & np.uint64((1 << w) - 1)
        have = got[nm] & np.uint64((1 << w) - 1)
        bad = want != have
        assert not bad.any(), (k, nm, int(np.argmax(bad)))
    exact += 1
  print(f"ptx: {exact} keys bit-exact through LLVM, {len(declined)} declined, "
        f"{len(ptx.keys()) - len(sems)} bound by an executor (memory, lanes, events)")
  assert exact > 1000


def spread(t: str, rng, n: int) -> list[int]:
  """Raw bits of format t with every exponent (denormals and the top binades too) and random signs and significands."""
  w, e = {"f16": (16, 5), "bf16": (16, 8), "f32": (32, 8), "f64": (64, 11)}[t]
  m = w - 1 - e
  return [int(rng.integers(0, 2)) << (w - 1) | int(rng.integers(0, (1 << e) - 1)) << m |
          int(rng.integers(0, 1 << min(m, 62))) << max(m - 62, 0) for _ in range(n)]


def test_llvm_directed_roundings_against_fractions():
  """PTX's directed roundings through the LLVM backend (.rz/.rm/.rp arithmetic on f32/f64, bf16 fma, one-rounding
  conversions into f16/bf16/f32/f64) give the numpy backend's bits and those of the exact Fraction result rounded here
  (oracle_round), on operands where the modes differ: inexact results, ties, cancellations to zero (-0 under .rm),
  sums and products past the largest finite value (inf or that value, by mode), denormal results."""
  arith = [f"{op}.{m}.{t}" for op in ("add", "sub", "mul", "fma", "div") for m in ("rz", "rm", "rp")
           for t in ("f32", "f64")] + ["fma.rn.bf16"]
  conv = [f"cvt.{m}.{d}.{s}" for m in ("rz", "rm", "rp") for d, s in (("f16", "f32"), ("bf16", "f32"), ("f32", "f64"),
                                                                    ("f16", "f64"), ("f32", "s64"), ("f64", "s64"),
                                                                    ("f64", "u64"), ("bf16", "s64"))]
  conv += ["cvt.rn.f16.s64", "cvt.rn.bf16.u64"]
  unary = [f"{op}.{m}.{t}" for op in ("sqrt", "rcp") for m in ("rz", "rm", "rp") for t in ("f32", "f64")]
  fns, declined = llvm.compile_host({k: semantics("ptx", k).program for k in arith + conv + unary}, 32)
  assert not declined, declined
  rng = np.random.default_rng(21)

  def both(k: str, srcs: list[list[int]]) -> list[int]:
    ref = run(k, **{f"S{j}": x for j, x in enumerate(srcs)})["D0"]
    got = fns[k]({f"S{j}": np.array(x, np.uint64) for j, x in enumerate(srcs)}, np.ones(N, bool))["D0"]
    assert [int(x) for x in got] == ref, (k, next(i for i in range(N) if got[i] != ref[i]))
    return ref

  for k in arith:
    op, mode, t = k.split(".")
    w, sign = FMT[t][0], 1 << (FMT[t][0] - 1)
    top, one, two = sign - (1 << FMT_MAN[t]) - 1, (1 << (w - 2)) - (1 << FMT_MAN[t]), 1 << (w - 2)  # (bits)
    srcs = [float_pool(t, rng, N) if j % 2 else spread(t, rng, N) for j in range(3 if op == "fma" else 2)]
    for i in range(0, N, 8):
      a = srcs[0][i]  # an exact cancellation: a - a, a + -a, a * 1 + -a
      srcs[1][i] = one if op == "fma" else a if op == "sub" else a ^ sign
      if op == "fma":
        srcs[2][i] = a ^ sign
      srcs[0][i + 1] = srcs[1][i + 1] = top - int(rng.integers(0, 3))  # past the largest finite value by far
      srcs[0][i + 2], srcs[1][i + 2] = top, two  # top + 2: between it and infinity (top * 2: past both)
      srcs[0][i + 3] = srcs[1][i + 3] = (1 << (w - 3)) - int(rng.integers(0, 1 << FMT_MAN[t]))  # a square: denormal
    check_float(k, t, op, mode, srcs, both(k, srcs))

  for t in ("f16", "bf16"):  # bodies of our own: f16/bf16 arithmetic with every rounding (PTX has fma.rn.bf16)
    for op in ("add", "sub", "mul", "fma"):
      args = ", ".join(f"S{j}.{t}" for j in range(3 if op == "fma" else 2))
      nan = "16'BF(0x7fff)" if t == "bf16" else "16'F(0x7fff)"  # D0: the raw result (NaNs too), D1 canonical NaNs
      texts = {m: f"r = {op}_{m}({args});\nD0.b32 = 32'B(r.b16);\nD1.b32 = 32'B((isNAN(r) ? {nan} : r).b16)"
               for m in ("rz", "rm", "rp")}
      sems = {}
      for m, x in texts.items():
        src, consts, *rest = build("ptx", f"{op}.{m}.{t}", x)
        sems[m] = Semantics("ptx", f"{op}.{m}.{t}", "", x, [], src, *rest, consts)
      own, declined = llvm.compile_host({m: sm.program for m, sm in sems.items()}, 32)
      assert not declined, declined
      for m, sm in sems.items():
        srcs = [spread(t, rng, N) if j % 2 else float_pool(t, rng, N) for j in range(3 if op == "fma" else 2)]
        srcs[1][::4] = [x ^ 0x8000 if op != "sub" else x for x in srcs[0][::4]]  # exact cancellations
        ref = sm({f"S{j}": np.array(x, np.uint32)[None, :] for j, x in enumerate(srcs)}, exec=np.ones((1, N), bool))
        got = own[m]({f"S{j}": np.array(x, np.uint64) for j, x in enumerate(srcs)}, np.ones(N, bool))
        for d in ("D0", "D1"):
          assert [int(x) for x in got[d]] == [int(x) for x in ref[d][0]], (op, m, t, d)
        check_float(f"{op}.{m}.{t}", t, op, m, srcs, [int(x) for x in got["D1"]])

  for k in unary:
    op, mode, t = k.split(".")
    a = spread(t, rng, N)
    a = [x & ~(1 << (FMT[t][0] - 1)) if op == "sqrt" else x for x in a]
    out = both(k, [a])
    for i in range(N):
      x = Fraction(decode(a[i], t))
      q = 1 / x if op == "rcp" else None
      if op == "rcp":
        assert out[i] == encode(oracle_round(q, t, mode), t), (k, hex(a[i]))
        continue
      r = Fraction(decode(out[i], t))  # sqrt: r**2 on the right side of x, its neighbour's on the other
      step = np.nextafter(FMT[t][1](decode(out[i], t)), FMT[t][1](np.inf if mode != "rp" else 0))
      nb = Fraction(float(step)) if np.isfinite(step) else None
      if mode == "rp":
        assert (nb is None or nb * nb < x) and x <= r * r, (k, hex(a[i]))
      else:
        assert r * r <= x and (nb is None or x < nb * nb), (k, hex(a[i]))

  for k in conv:
    _, mode, dt, st = k.split(".")
    if st[0] in "su":  # integers of every length, and ties: 2**n + 2**(n - p) (n past the format's precision)
      bits = rng.integers(1, 65, N)
      x = [int(rng.integers(0, 1 << 62)) * 4 + int(rng.integers(0, 4)) >> (64 - int(b)) for b in bits]
      x = [(1 << int(b) - 1) + (1 << int(b) - 1 - {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}[dt]) if i % 5 == 0 and
           b > 54 else v for i, (v, b) in enumerate(zip(x, bits))]
      x = [v if st[0] == "u" or i % 2 else -v & (2 ** 64 - 1) for i, v in enumerate(x)]
      vals = [Fraction(sx(v, 64) if st[0] == "s" else v) for v in x]
    else:
      cut = FMT_MAN[st] - FMT_MAN[dt]  # the first quarter exactly half-way between two results (where normal)
      x = [v & ~((1 << cut) - 1) | 1 << (cut - 1) if i < N // 4 else v for i, v in enumerate(spread(st, rng, N))]
      vals = [decode(v, st) for v in x]
    out = both(k, [x])
    for i in range(N):
      v = vals[i]
      if isinstance(v, float) and (np.isnan(v) or np.isinf(v) or v == 0):
        want = CANON[dt] if np.isnan(v) else encode(v, dt)
      else:
        want = encode(oracle_round(Fraction(v), dt, mode), dt)
      assert out[i] == want, (k, hex(x[i]), hex(out[i]), hex(want))


# prmt's modes, as the manual's tables print them: the source byte of d.b3 d.b2 d.b1 d.b0 for c[1:0] = 0..3
PRMT = {"f4e": ("3210", "4321", "5432", "6543"), "b4e": ("5670", "6701", "7012", "0123"),
        "rc8": ("0000", "1111", "2222", "3333"), "ecl": ("3210", "3211", "3222", "3333"),
        "ecr": ("0000", "1110", "2210", "3210"), "rc16": ("1010", "3232", "1010", "3232")}


def test_prmt_generic_and_modes():
  rng = np.random.default_rng(11)
  a, b, c = rnd(rng, 32), rnd(rng, 32), rnd(rng, 32)
  out = run("prmt.b32", S0=a, S1=b, S2=c)["D0"]
  for i in range(N):
    src = (b[i] << 32 | a[i]).to_bytes(8, "little")
    want = 0
    for j in range(4):
      s = c[i] >> (4 * j) & 15
      byte = src[s & 7]
      want |= ((0xff if byte & 0x80 else 0) if s & 8 else byte) << (8 * j)
    assert out[i] == want
  for mode, table in PRMT.items():
    out = run(f"prmt.b32.{mode}", S0=a, S1=b, S2=c)["D0"]
    for i in range(N):
      src = (b[i] << 32 | a[i]).to_bytes(8, "little")
      sel = table[c[i] & 3]
      assert out[i] == int.from_bytes(bytes(src[int(sel[3 - j])] for j in range(4)), "little"), mode


def test_integer_conversions_wrap_saturate_and_extend():
  rng = np.random.default_rng(12)
  types = ("u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64")
  for dt in types:
    for st in types:
      x = rnd(rng, int(st[1:]))
      w = int(dt[1:])
      lo, hi = (0, (1 << w) - 1) if dt[0] == "u" else (-(1 << (w - 1)), (1 << (w - 1)) - 1)
      plain, sat = run(f"cvt.{dt}.{st}", S0=x)["D0"], run(f"cvt.sat.{dt}.{st}", S0=x)["D0"]
      ow = max(w, 32)
      for i in range(N):
        v = val(x[i], st)
        wrapped = val(v & ((1 << w) - 1), dt)
        assert plain[i] == wrapped & ((1 << ow) - 1), (dt, st, hex(x[i]))
        assert sat[i] == min(max(v, lo), hi) & ((1 << ow) - 1), (dt, st, hex(x[i]))


def test_packed_half_atomics_add_elementwise():
  mem = FlatMemory(1 << 10)
  mem.data[:4] = np.frombuffer(struct.pack("<2e", 1.0, -2.0), np.uint8)
  old = run("atom.add.noftz.f16x2", mem=mem, ADDR=[0] * N, S0=[int.from_bytes(struct.pack("<2e", 0.5, 0.25), "little")] * N)
  assert old["D0"][0] == int.from_bytes(struct.pack("<2e", 1.0, -2.0), "little")
  assert struct.unpack("<2e", mem.data[:4].tobytes()) == (1.0 + 0.5 * N, -2.0 + 0.25 * N)


def test_lop3_dp4a_dp2a_shf():
  rng = np.random.default_rng(13)
  a, b, c = rnd(rng, 32), rnd(rng, 32), rnd(rng, 32)
  for lut in (0x96, 0xe8, 0xf0, 0xcc, 0xaa, 0x80, 0xfe, 0x00, 0x1b):  # xor3, majority, a, b, c, and3, or3, 0, mixed
    out = run("lop3.b32", S0=a, S1=b, S2=c, S3=[lut] * N)["D0"]
    for i in range(N):
      want = sum(1 << j for j in range(32) if lut >> ((a[i] >> j & 1) << 2 | (b[i] >> j & 1) << 1 | (c[i] >> j & 1)) & 1)
      assert out[i] == want, hex(lut)
  for ta in ("u32", "s32"):
    for tb in ("u32", "s32"):
      ext = lambda v, n, k, t: sx(v >> (n * k), n) if t[0] == "s" else v >> (n * k) & ((1 << n) - 1)  # noqa: E731
      out = run(f"dp4a.{ta}.{tb}", S0=a, S1=b, S2=c)["D0"]
      for i in range(N):
        assert out[i] == (c[i] + sum(ext(a[i], 8, k, ta) * ext(b[i], 8, k, tb) for k in range(4))) & 0xffffffff
      for mode, sel in (("lo", 0), ("hi", 2)):
        out = run(f"dp2a.{mode}.{ta}.{tb}", S0=a, S1=b, S2=c)["D0"]
        for i in range(N):
          want = c[i] + sum(ext(a[i], 16, k, ta) * ext(b[i], 8, sel + k, tb) for k in range(2))
          assert out[i] == want & 0xffffffff, (mode, ta, tb)
  n = [int(v) % 40 for v in c]
  for d in ("l", "r"):
    for m in ("wrap", "clamp"):
      out = run(f"shf.{d}.{m}.b32", S0=a, S1=b, S2=n)["D0"]
      for i in range(N):
        s = min(n[i], 32) if m == "clamp" else n[i] & 31
        x = b[i] << 32 | a[i]
        assert out[i] == ((x << s) >> 32 & 0xffffffff if d == "l" else (x >> s) & 0xffffffff), (d, m, n[i])


def test_testp_copysign_selp_slct():
  rng = np.random.default_rng(14)
  a, b = float_pool("f32", rng, N), float_pool("f32", rng, N)
  x = [decode(v, "f32") for v in a]
  tests = {"finite": np.isfinite, "infinite": np.isinf, "number": lambda v: not np.isnan(v), "notanumber": np.isnan,
           "normal": lambda v: np.isfinite(v) and abs(v) >= 2**-126,
           "subnormal": lambda v: v != 0 and abs(v) < 2**-126}
  for t, f in tests.items():
    assert run(f"testp.{t}.f32", S0=a)["D0"] == [int(bool(f(v))) for v in x], t
  assert run("copysign.f32", S0=a, S1=b)["D0"] == [(b[i] & 0x7fffffff) | (a[i] & 0x80000000) for i in range(N)]
  p = [int(v) for v in rng.integers(0, 2, N)]
  assert run("selp.b32", S0=a, S1=b, S2=p)["D0"] == [a[i] if p[i] else b[i] for i in range(N)]
  assert run("slct.b32.f32", S0=a, S1=b, S2=b)["D0"] == [a[i] if decode(b[i], "f32") >= 0 else b[i] for i in range(N)]
  assert run("slct.b32.s32", S0=a, S1=b, S2=b)["D0"] == [a[i] if sx(b[i], 32) >= 0 else b[i] for i in range(N)]


def test_bmsk_szext_and_packed_setp():
  rng = np.random.default_rng(15)
  a, b = [int(v) for v in rng.integers(0, 40, N)], [int(v) for v in rng.integers(0, 40, N)]
  for m in ("clamp", "wrap"):
    out = run(f"bmsk.{m}.b32", S0=a, S1=b)["D0"]
    for i in range(N):
      pos, n = (min(a[i], 32), min(b[i], 32)) if m == "clamp" else (a[i] & 31, b[i] & 31)
      assert out[i] == ((1 << min(pos + n, 32)) - (1 << min(pos, 32))) & 0xffffffff, (m, a[i], b[i])
    x = rnd(rng, 32)
    for t in ("u32", "s32"):
      out = run(f"szext.{m}.{t}", S0=x, S1=b)["D0"]
      for i in range(N):
        n = min(b[i], 32) if m == "clamp" else b[i] & 31
        low = x[i] & ((1 << n) - 1)
        want = (sx(low, n) if t == "s32" and n else low) & 0xffffffff if n < 32 else x[i]
        assert out[i] == want, (m, t, hex(x[i]), b[i])
  h = float_pool("f16", rng, 2 * N)
  s0, s1 = [h[i] << 16 | h[N + i] for i in range(N)], [h[N + i] << 16 | h[i] for i in range(N)]
  out = run("setp.lt.f16x2", S0=s0, S1=s1)
  for i in range(N):
    lo, hi = decode(h[N + i], "f16") < decode(h[i], "f16"), decode(h[i], "f16") < decode(h[N + i], "f16")
    assert (out["D0"][i], out["D1"][i]) == (int(lo), int(hi))


def test_fp8_pairs_widen_to_f16x2():
  xs = list(range(256))
  for t, man, bias in (("e4m3x2", 3, 7), ("e5m2x2", 2, 15)):
    out = run(f"cvt.rn.f16x2.{t}", S0=[(x << 8 | (255 - x)) for x in xs[:N]] + [0] * 0)["D0"]
    out += run(f"cvt.rn.f16x2.{t}", S0=[(x << 8 | (255 - x)) for x in xs[N:2 * N]])["D0"]
    out += run(f"cvt.rn.f16x2.{t}", S0=[(x << 8 | (255 - x)) for x in (xs[2 * N:] + [0] * (3 * N - 256))])["D0"]
    for x in xs:
      s, e, m = x >> 7, x >> man & ((1 << (7 - man)) - 1), x & ((1 << man) - 1)
      top = (1 << (7 - man)) - 1
      nan = (e == top and m == (1 << man) - 1) if t == "e4m3x2" else (e == top and m != 0)
      inf = t == "e5m2x2" and e == top and m == 0
      v = (-1) ** s * (m / (1 << man) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << man)) * 2.0 ** (e - bias))
      want = 0x7fff if nan else encode(float("-inf") if s else float("inf"), "f16") if inf else encode(v, "f16")
      assert out[x] >> 16 == want, (t, hex(x))
      assert out[255 - x] & 0xffff == want, (t, hex(x))


@pytest.mark.parametrize("k", ["min.NaN.f16x2", "max.bf16x2", "min.f16", "max.NaN.bf16x2"])
def test_half_min_max(k):
  op, t = k.split(".")[0], k.split(".")[-1]
  e = t[:-2] if t.endswith("x2") else t
  rng = np.random.default_rng(zlib.crc32(k.encode()))
  lo, hi, lo2, hi2 = (float_pool(e, rng, N) for _ in range(4))
  lo2 = [lo[i] ^ 0x8000 if i % 7 == 0 else lo2[i] for i in range(N)]  # +0/-0 and x/-x pairs
  pack = lambda h, l: [a << 16 | b for a, b in zip(h, l)] if t.endswith("x2") else l  # noqa: E731
  out = run(k, S0=pack(hi, lo), S1=pack(hi2, lo2))["D0"]
  halves = ((lo, lo2, 0), (hi, hi2, 16)) if t.endswith("x2") else ((lo, lo2, 0),)
  for a, b, sh in halves:
    for i in range(N):
      p, q = decode(a[i], e), decode(b[i], e)
      if np.isnan(p) and np.isnan(q) or ("NaN" in k and (np.isnan(p) or np.isnan(q))):
        want = 0x7fff
      elif np.isnan(p) or np.isnan(q):
        want = b[i] if np.isnan(p) else a[i]
      else:
        key = lambda v: (v, not np.signbit(v))  # noqa: E731
        want = encode((min if op == "min" else max)(p, q, key=key), e)
      assert out[i] >> sh & 0xffff == want, (k, hex(a[i]), hex(b[i]), hex(out[i]))
