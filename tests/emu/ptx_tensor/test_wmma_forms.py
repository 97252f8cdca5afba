"""wmma.load / wmma.mma / wmma.store over shapes, types, layouts and strides: fragments are opaque (PTX ISA 9.0
9.7.14.4), so only memory in and memory out are compared, against numpy's matmul (small dyadic operands: float64
sums are exact and one cast rounds them like the instruction)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from gputwin.emu import launch

SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8),
          "m8n8k4": (8, 8, 4)}
DT = {"f16": np.float16, "bf16": np.float32, "tf32": np.float32, "f32": np.float32, "f64": np.float64,
      "s8": np.int8, "u8": np.uint8, "s32": np.int32}
# registers per fragment as the manual's fragment tables give them: (a, b) per shape and type, c/d per type
AB = {("m16n16k16", "bf16"): (4, 4), ("m32n8k16", "bf16"): (8, 2), ("m8n32k16", "bf16"): (2, 8),
      ("m16n16k16", "s8"): (2, 2), ("m32n8k16", "s8"): (4, 1), ("m8n32k16", "s8"): (1, 4),
      ("m16n16k8", "tf32"): (4, 4), ("m8n8k4", "f64"): (1, 1)}
CD = {"f16": 4, "f32": 8, "s32": 8, "f64": 2}
FORMS = [("m16n16k16", "f32", "f16", "f32", "row", "col"), ("m16n16k16", "f16", "f16", "f16", "col", "row"),
         ("m32n8k16", "f32", "f16", "f16", "row", "row"), ("m8n32k16", "f16", "f16", "f32", "col", "col"),
         ("m16n16k16", "f32", "bf16", "f32", "row", "col"), ("m32n8k16", "f32", "bf16", "f32", "col", "row"),
         ("m8n32k16", "f32", "bf16", "f32", "row", "row"), ("m16n16k16", "s32", "s8", "s32", "row", "col"),
         ("m32n8k16", "s32", "u8", "s32", "col", "col"), ("m8n32k16", "s32", "s8", "s32", "row", "row"),
         ("m16n16k8", "f32", "tf32", "f32", "row", "col"), ("m8n8k4", "f64", "f64", "f64", "col", "row")]


def kernel(shape, d, a, c, la, lb, lc, ld, na, nb, nc, nd, space):
  t = lambda x: {"f32": "f32", "f64": "f64", "f16": "b32"}.get(x, "b32")
  ab = "f16" if a == "f16" else a
  mma = f"{d}.{c}" if a == "f16" else f"{d}.{a}.{a}.{c}"
  regs = lambda p, n: "{" + ", ".join(f"%{p}{k}" for k in range(n)) + "}"
  ss = ".shared" if space == "shared" else ".global"
  return f""".version 8.7
.target sm_90
.address_size 64
.visible .entry k(.param .u64 A, .param .u64 B, .param .u64 C, .param .u64 D, .param .u32 sa, .param .u32 sb,
                  .param .u32 sc, .param .u32 sd) {{
  .reg .{t(a)} %a<{na}>; .reg .{t(a)} %b<{nb}>; .reg .{t(c)} %c<{nc}>; .reg .{t(d)} %d<{nd}>;
  .reg .b64 %rd<5>; .reg .b32 %s<5>;
  ld.param.u64 %rd1, [A]; ld.param.u64 %rd2, [B]; ld.param.u64 %rd3, [C]; ld.param.u64 %rd4, [D];
  ld.param.u32 %s1, [sa]; ld.param.u32 %s2, [sb]; ld.param.u32 %s3, [sc]; ld.param.u32 %s4, [sd];
  wmma.load.a.sync.aligned.{la}.{shape}{ss if space == "global" else ""}.{ab} {regs("a", na)}, [%rd1], %s1;
  wmma.load.b.sync.aligned.{lb}.{shape}.{ab} {regs("b", nb)}, [%rd2], %s2;
  wmma.load.c.sync.aligned.{lc}.{shape}.global.{c} {regs("c", nc)}, [%rd3], %s3;
  wmma.mma.sync.aligned.{la}.{lb}.{shape}.{mma} {regs("d", nd)}, {regs("a", na)}, {regs("b", nb)}, {regs("c", nc)};
  wmma.store.d.sync.aligned.{ld}.{shape}.global.{d} [%rd4], {regs("d", nd)}, %s4;
  ret;
}}
"""


def store(m, layout, pad, dt):
  """The matrix in memory: row- or column-major with a leading dimension `pad` elements longer than needed."""
  mm = m if layout == "row" else m.T
  buf = np.zeros((mm.shape[0], mm.shape[1] + pad))
  buf[:, :mm.shape[1]] = mm
  return buf.astype(dt).reshape(-1), mm.shape[1] + pad


def values(t, shape, rng):
  if t in ("s8", "u8"):
    return rng.integers(-128, 128, shape) if t == "s8" else rng.integers(0, 256, shape)
  if t == "s32":
    return rng.integers(-50000, 50000, shape)
  return rng.choice(np.arange(1, 64) / 16, shape) * rng.choice([-1, 1], shape)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: ".".join(f))
def test_wmma_form(form):
  shape, d, a, c, la, lb = form
  lc, ld = ("col", "row") if la == "row" else ("row", "col")
  M, N, K = SHAPES[shape]
  rng = np.random.default_rng(zlib.crc32(".".join(form).encode()))
  A, B, C = values(a, (M, K), rng), values(a, (K, N), rng), values(c, (M, N), rng)
  na, nb = AB.get((shape, "s8" if a == "u8" else a), (8, 8))
  nc = CD[c]
  bufs, strides = [], []
  for m, layout, t, pad in ((A, la, a, 8), (B, lb, a, 0), (C, lc, c, 4)):
    buf, s = store(m, layout, pad, DT[t])
    if t == "bf16":  # bf16 in memory: the high halves of the f32s (the operands are exact in bf16)
      buf = (buf.view(np.uint32) >> 16).astype(np.uint16)
    bufs.append(buf)
    strides.append(s)
  out, sd = store(np.zeros((M, N)), ld, 2, DT[d])
  launch(kernel(shape, d, a, c, la, lb, lc, ld, na, nb, nc, CD[d], "global"), "k", grid=1, block=32,
         args=bufs + [out] + [np.uint32(s) for s in strides + [sd]])
  got = out.reshape(-1, sd)[:, :(N if ld == "row" else M)]
  got = got if ld == "row" else got.T
  exact = A.astype(np.float64) @ B.astype(np.float64) + C
  want = (exact.astype(np.int64) & 0xffffffff).astype(np.uint32).view(np.int32) if d == "s32" else \
    exact.astype(DT[d])
  np.testing.assert_array_equal(got, want)
  assert got.any()
