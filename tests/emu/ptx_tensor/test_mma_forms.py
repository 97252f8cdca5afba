"""mma.sync over its shapes and types: each thread's fragment registers filled from a buffer as the manual's
fragment figures place the elements (PTX ISA 9.0 9.7.14.5.x "Matrix Fragments for mma.m*n*k*", written out per
figure below), D = A @ B + C checked against numpy. Operands are small dyadic numbers, so numpy's float64 sum is
exact and one cast rounds it like the instruction."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from gputwin.emu import launch

LANE = np.arange(32)
G, T = LANE // 4, LANE % 4  # groupID, threadID_in_group


def frag_a(shape, bits):
  """(row, col) of A element i of each lane, one entry per element index, as in the figures."""
  if shape == "m16n8k16" and bits == 16:  # a0..a7: rows g (a0,a1,a4,a5) / g+8, cols 2t+(i&1) (+8 from a4)
    return [(G + 8 * (i in (2, 3, 6, 7)), 2 * T + (i & 1) + 8 * (i >= 4)) for i in range(8)]
  if shape == "m16n8k8" and bits == 16:
    return [(G + 8 * (i >= 2), 2 * T + (i & 1)) for i in range(4)]
  if shape == "m16n8k8" and bits in (32, 64):  # tf32 / f64: a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4)
    return [(G + 8 * (i & 1), T + 4 * (i >> 1)) for i in range(4)]
  if shape == "m16n8k16" and bits == 64:
    return [(G + 8 * (i & 1), T + 4 * (i >> 1)) for i in range(8)]
  if shape == "m16n8k4":
    return [(G + 8 * i, T) for i in range(2)]
  if shape == "m8n8k4":
    return [(G, T)]
  if shape == "m16n8k32":  # 8-bit: rows g (a0-a3, a8-a11) / g+8, cols 4t+(i&3) (+16 from a8)
    return [(G + 8 * (i in range(4, 8) or i >= 12), 4 * T + (i & 3) + 16 * (i >= 8)) for i in range(16)]
  if shape == "m16n8k16":  # 8-bit
    return [(G + 8 * (i >= 4), 4 * T + (i & 3)) for i in range(8)]
  if shape == "m8n8k16":
    return [(G, 4 * T + i) for i in range(4)]
  raise AssertionError(shape)


def frag_b(shape, bits):
  if bits == 16:  # b0..b3 (k16) / b0, b1 (k8): rows 2t+(i&1) (+8 from b2), col g
    return [(2 * T + (i & 1) + 8 * (i >= 2), G) for i in range({"m16n8k16": 4, "m16n8k8": 2}[shape])]
  if bits in (32, 64):  # tf32 / f64: rows t + 4i
    return [(T + 4 * i, G) for i in range({"m8n8k4": 1, "m16n8k4": 1, "m16n8k8": 2, "m16n8k16": 4}[shape])]
  return [(4 * T + (i & 3) + 16 * (i >= 4), G) for i in range({"m16n8k32": 8, "m16n8k16": 4, "m8n8k16": 4}[shape])]


def frag_c(shape):
  return [(G, 2 * T + i) for i in range(2)] if shape.startswith("m8n8") else \
    [(G + 8 * (i >= 2), 2 * T + (i & 1)) for i in range(4)]


def enc(t, x):
  """Numbers -> raw bits of PTX type t (x exactly representable)."""
  x = np.asarray(x)
  if t == "f16":
    return x.astype(np.float16).view(np.uint16).astype(np.uint64)
  if t == "bf16":
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
  if t in ("f32", "tf32"):
    return x.astype(np.float32).view(np.uint32).astype(np.uint64)
  if t == "f64":
    return x.astype(np.float64).view(np.uint64)
  if t == "e5m2":  # the high byte of an f16
    return (x.astype(np.float16).view(np.uint16) >> 8).astype(np.uint64)
  if t == "e4m3":  # sign, exponent bias 7, 3 mantissa bits (normal values only here)
    m, e = np.frexp(np.abs(x))
    b = np.where(x == 0, 0, ((e - 1 + 7) << 3) | np.round((m * 2 - 1) * 8).astype(np.int64))
    return (b | (np.signbit(x) << 7)).astype(np.uint64)
  return (x.astype(np.int64) & ((1 << int(t[1:])) - 1)).astype(np.uint64)


def dec(t, raw):
  raw = np.asarray(raw, np.uint64)
  if t == "f16":
    return raw.astype(np.uint16).view(np.float16).astype(np.float64)
  if t == "f32":
    return raw.astype(np.uint32).view(np.float32).astype(np.float64)
  if t == "f64":
    return raw.view(np.float64)
  return raw.astype(np.uint32).view(np.int32).astype(np.float64)


BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32, "e4m3": 8, "e5m2": 8}
SHAPES = {"m8n8k4": (8, 8, 4), "m8n8k16": (8, 8, 16), "m16n8k4": (16, 8, 4), "m16n8k8": (16, 8, 8),
          "m16n8k16": (16, 8, 16), "m16n8k32": (16, 8, 32)}
FORMS = [("m16n8k8", "f32", "f16", "f16", "f32"), ("m16n8k16", "f16", "f16", "f16", "f16"),
         ("m16n8k16", "f32", "f16", "f16", "f16"), ("m16n8k16", "f16", "f16", "f16", "f32"),
         ("m16n8k8", "f32", "bf16", "bf16", "f32"), ("m16n8k16", "f32", "bf16", "bf16", "f32"),
         ("m16n8k4", "f32", "tf32", "tf32", "f32"), ("m8n8k16", "s32", "u8", "s8", "s32"),
         ("m16n8k16", "s32", "s8", "u8", "s32"), ("m16n8k32", "s32", "u8", "u8", "s32"),
         ("m16n8k32", "f32", "e5m2", "e4m3", "f32"), ("m16n8k16", "f16", "e4m3", "e4m3", "f16"),
         ("m8n8k4", "f64", "f64", "f64", "f64"), ("m16n8k4", "f64", "f64", "f64", "f64"),
         ("m16n8k8", "f64", "f64", "f64", "f64"), ("m16n8k16", "f64", "f64", "f64", "f64")]


def values(t, shape, rng):
  if t in ("s8", "u8"):
    return rng.integers(-128, 128, shape) if t == "s8" else rng.integers(0, 256, shape)
  if t == "s32":
    return rng.integers(-50000, 50000, shape)
  pool = [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 0.375] if t in ("e4m3", "e5m2") else np.arange(1, 64) / 16
  return rng.choice(pool, shape) * rng.choice([-1, 1], shape)


def pack(frags, raws, bits):
  """Per lane: the elements (list of (32,) raw arrays) packed into 32-bit words (64-bit for f64), low first."""
  per = max(1, 32 // bits)
  return [sum(raws[k + j] << np.uint64(j * bits) for j in range(per) if k + j < len(raws))
          for k in range(0, len(raws), per)]


def kernel(shape, d, a, b, c, nregs):
  """PTX: load every fragment register of the lane from `src`, run the mma, store D's registers to `dst`."""
  ty = lambda t: "f64" if t == "f64" else "f32" if t in ("f32",) else "b32"
  names = {}
  decl, loads, off = [], [], 0
  for which, t in zip("abc", (a, b, c)):
    w = 8 if t == "f64" else 4
    names[which] = [f"%{which}{k}" for k in range(nregs[which])]
    decl.append(f".reg .{ty(t)} %{which}<{nregs[which]}>;")
    for k, r in enumerate(names[which]):
      loads.append(f"ld.global.{ty(t)} {r}, [%rd3+{off}];")
      off += w
  names["d"] = [f"%d{k}" for k in range(nregs["d"])]
  decl.append(f".reg .{ty(d)} %d<{nregs['d']}>;")
  wd = 8 if d == "f64" else 4
  stores = [f"st.global.{ty(d)} [%rd6+{k * wd}], {r};" for k, r in enumerate(names["d"])]
  v = lambda x: "{" + ", ".join(names[x]) + "}"
  return f""".version 8.7
.target sm_90
.address_size 64
.visible .entry k(.param .u64 src, .param .u64 dst) {{
  .reg .b32 %r<2>; .reg .b64 %rd<8>;
  {' '.join(decl)}
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd4, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 256;
  add.u64 %rd3, %rd1, %rd2;
  add.u64 %rd6, %rd4, %rd2;
  {chr(10).join(loads)}
  mma.sync.aligned.{shape}.row.col.{d}.{a}.{b}.{c} {v('d')}, {v('a')}, {v('b')}, {v('c')};
  {chr(10).join(stores)}
  ret;
}}
"""


def run(form, A, B, C) -> np.ndarray:
  """D of one mma.sync of `form` on matrices A, B, C, each thread's registers filled as the figures say."""
  shape, d, a, b, c = form
  M, N, K = SHAPES[shape]
  fa, fb, fc = frag_a(shape, BITS[a]), frag_b(shape, BITS[b]), frag_c(shape)
  assert len(fa) * 32 == M * K and len(fb) * 32 == K * N  # the figures cover each matrix once
  regs = {x: pack(f, [enc(t, m[r, q]) for r, q in f], BITS[t])
          for x, f, t, m in (("a", fa, a, A), ("b", fb, b, B), ("c", fc, c, C))}
  nregs = {x: len(v) for x, v in regs.items()}
  nregs["d"] = len(pack(fc, [np.zeros(32, np.uint64)] * len(fc), BITS[d]))
  src = np.zeros((32, 256), np.uint8)
  off = 0
  for x, t in zip("abc", (a, b, c)):
    w = 8 if t == "f64" else 4
    for r in regs[x]:
      src[:, off:off + w] = r.astype(np.uint64 if w == 8 else np.uint32).view(np.uint8).reshape(32, w)
      off += w
  dst = np.zeros((32, 256), np.uint8)
  launch(kernel(shape, d, a, b, c, nregs), "k", grid=1, block=32, args=[src, dst])
  wd = 8 if d == "f64" else 4
  words = dst[:, :nregs["d"] * wd].copy().view(np.uint64 if wd == 8 else np.uint32).astype(np.uint64)
  per = max(1, 32 // BITS[d])
  got = np.zeros((M, N))
  for i, (r, q) in enumerate(fc):
    got[r, q] = dec(d, (words[:, i // per] >> np.uint64(BITS[d] * (i % per))) & np.uint64((1 << BITS[d]) - 1))
  return got


@pytest.mark.parametrize("form", FORMS, ids=lambda f: ".".join(f))
def test_mma_form(form):
  shape, d, a, b, c = form
  M, N, K = SHAPES[shape]
  rng = np.random.default_rng(zlib.crc32(".".join(form).encode()))
  A, B, C = values(a, (M, K), rng), values(b, (K, N), rng), values(c, (M, N), rng)
  exact = A.astype(np.float64) @ B.astype(np.float64) + C
  want = (exact.astype(np.int64) & 0xffffffff).astype(np.uint32).view(np.int32) if d == "s32" else \
    exact.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[d])
  np.testing.assert_array_equal(run(form, A, B, C), want.astype(np.float64))


def test_mma_rounds_the_exact_sum():
  """2**30 + 2**6 + 2**-40 lies just above the midpoint of two f32 values: the exact sum rounds up to 2**30 + 2**7.
  Rounding to float64 first (2**30 + 2**6, a tie) and then to f32 (to even) would give 2**30."""
  A, B, C = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
  A[0, :2], B[:2, 0], C[0, 0] = [2.0**15, 2.0**3], [2.0**15, 2.0**3], 2.0**-40
  want = np.zeros((16, 8))
  want[0, 0] = 2.0**30 + 2.0**7
  assert np.float32(2.0**30 + 2.0**6) == 2.0**30
  np.testing.assert_array_equal(run(("m16n8k16", "f32", "f16", "f16", "f32"), A, B, C), want)
