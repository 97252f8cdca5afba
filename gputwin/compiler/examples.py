"""Kernels written in the Python frontend, with inputs and numpy oracles: the demo set (saxpy, reduction, tiled
matmul, softmax) and the test set (plus prefix sum, histogram with atomics, integer and elementwise ops).

`EXAMPLES[name]` is an `Example`; `compile_example(name, arch, backend)` returns the compiled kernel, and
`Example.inputs(rng)` returns (args, grid, block) for `launch`-style calls (grid counts workgroups).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gputwin.compiler.frontend import (Ptr, atomic_add, barrier, exp, f32, global_id, i32, kernel, shared, u32,
                                       workgroup_id, workitem_id)

BLOCK, LOG_BLOCK = 64, 6     # 64 work-items: one wave64 or two wave32s, so barriers matter on every target
TILE = 8
BINS = 16
NEG_BIG = -3.0e38


@kernel
def saxpy(a: f32, x: Ptr[f32], y: Ptr[f32], n: i32):
  i = global_id(0)
  if i < n:
    y[i] = a * x[i] + y[i]


@kernel
def reduce_sum(x: Ptr[f32], out: Ptr[f32], n: i32):
  """One partial sum per workgroup: a tree in shared memory."""
  buf = shared(f32, BLOCK)
  tid = workitem_id(0)
  i = global_id(0)
  v = 0.0
  if i < n:
    v = x[i]
  buf[tid] = v
  barrier()
  for k in range(LOG_BLOCK):
    s = (BLOCK // 2) >> k
    if tid < s:
      buf[tid] = buf[tid] + buf[tid + s]
    barrier()
  if tid == 0:
    out[workgroup_id(0)] = buf[0]


@kernel
def matmul(a: Ptr[f32], b: Ptr[f32], c: Ptr[f32], m: i32, n: i32, k: i32):
  """C[m,n] = A[m,k] @ B[k,n], TILE x TILE tiles staged in shared memory; sizes are multiples of TILE."""
  ta = shared(f32, TILE * TILE)
  tb = shared(f32, TILE * TILE)
  tx = workitem_id(0)
  ty = workitem_id(1)
  row = workgroup_id(1) * TILE + ty
  col = workgroup_id(0) * TILE + tx
  acc = 0.0
  for t in range(0, k, TILE):
    ta[ty * TILE + tx] = a[row * k + t + tx]
    tb[ty * TILE + tx] = b[(t + ty) * n + col]
    barrier()
    for j in range(TILE):
      acc = acc + ta[ty * TILE + j] * tb[j * TILE + tx]
    barrier()
  c[row * n + col] = acc


@kernel
def softmax(x: Ptr[f32], y: Ptr[f32], n: i32):
  """Row-wise softmax, one workgroup per row: max and sum reduced in shared memory."""
  red = shared(f32, BLOCK)
  tid = workitem_id(0)
  base = workgroup_id(0) * n
  m = NEG_BIG
  for j in range(tid, n, BLOCK):
    m = max(m, x[base + j])
  red[tid] = m
  barrier()
  for k in range(LOG_BLOCK):
    s = (BLOCK // 2) >> k
    if tid < s:
      red[tid] = max(red[tid], red[tid + s])
    barrier()
  mx = red[0]
  barrier()
  total = 0.0
  for j in range(tid, n, BLOCK):
    total += exp(x[base + j] - mx)
  red[tid] = total
  barrier()
  for k in range(LOG_BLOCK):
    s = (BLOCK // 2) >> k
    if tid < s:
      red[tid] = red[tid] + red[tid + s]
    barrier()
  total = red[0]
  for j in range(tid, n, BLOCK):
    y[base + j] = exp(x[base + j] - mx) / total


@kernel
def prefix_sum(x: Ptr[i32], y: Ptr[i32]):
  """Inclusive scan within each workgroup (Hillis-Steele in shared memory)."""
  buf = shared(i32, BLOCK)
  tid = workitem_id(0)
  g = global_id(0)
  buf[tid] = x[g]
  barrier()
  for k in range(LOG_BLOCK):
    d = 1 << k
    v = buf[tid]
    if tid >= d:
      v = v + buf[tid - d]
    barrier()
    buf[tid] = v
    barrier()
  y[g] = buf[tid]


@kernel
def histogram(x: Ptr[u32], hist: Ptr[u32], n: i32):
  """Per-workgroup histogram with shared-memory atomics, merged with global atomics."""
  h = shared(u32, BINS)
  tid = workitem_id(0)
  i = global_id(0)
  if tid < BINS:
    h[tid] = 0
  barrier()
  if i < n:
    atomic_add(h, x[i] % BINS, 1)
  barrier()
  if tid < BINS:
    atomic_add(hist, tid, h[tid])


@kernel
def int_ops(x: Ptr[i32], y: Ptr[i32], z: Ptr[u32], n: i32):
  """Integer arithmetic, shifts, bit ops, selects and casts: checked bit-exactly."""
  i = global_id(0)
  if i < n:
    a = x[i]
    b = y[i]
    c = (a * 7 + b) ^ (a >> 3)
    d = c - (b << 2) if a > b else c + (b & 255)
    e = max(d, -1000) + min(a, b)
    z[i] = u32(e) * 3 + (u32(a) >> 5) + u32(i % 5)


@kernel
def elementwise(x: Ptr[f32], y: Ptr[f32], n: i32):
  """Float elementwise mix: clamp, relu, fma, compare, int->float."""
  i = global_id(0)
  if i < n:
    v = x[i]
    w = max(v * 2.0 - 1.0, 0.0)
    y[i] = w * v + f32(i % 3) if v < 0.5 else -v


@dataclass(frozen=True)
class Example:
  kernel: object
  inputs: Callable            # rng -> (args, grid, block)
  outputs: tuple[int, ...]    # indices of args to compare
  oracle: Callable            # args (inputs) -> list of expected output arrays (numpy, independent of the IR)
  ulps: int = 0               # float tolerance in units in the last place (0: bit-exact)
  demo: bool = False


def _saxpy_in(rng, n=200):
  x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  return [np.float32(1.5), x, y, n], (-(-n // BLOCK),), (BLOCK,)


def _reduce_in(rng, n=250):
  return [rng.standard_normal(n).astype(np.float32), np.zeros(-(-n // BLOCK), np.float32), n], (-(-n // BLOCK),), \
    (BLOCK,)


def _tree(v):
  """The kernel's summation order (pairwise halves), so the float oracle can be exact."""
  v = v.copy()
  s = len(v) // 2
  while s:
    v[:s] = v[:s] + v[s:2 * s]
    s //= 2
  return v[0]


def _reduce_oracle(a):
  x, out, n = a
  pad = np.zeros(len(out) * BLOCK, np.float32)
  pad[:n] = x
  return [np.array([_tree(pad[g * BLOCK:(g + 1) * BLOCK]) for g in range(len(out))], np.float32)]


def _matmul_in(rng, m=16, n=24, k=16):
  a = rng.standard_normal((m, k)).astype(np.float32)
  b = rng.standard_normal((k, n)).astype(np.float32)
  return [a.reshape(-1), b.reshape(-1), np.zeros(m * n, np.float32), m, n, k], (n // TILE, m // TILE), (TILE, TILE)


def _matmul_oracle(a):
  A, B, _, m, n, k = a
  return [(A.reshape(m, k).astype(np.float64) @ B.reshape(k, n)).astype(np.float32).reshape(-1)]


def _softmax_in(rng, rows=3, n=100):
  return [rng.standard_normal(rows * n).astype(np.float32) * 3, np.zeros(rows * n, np.float32), n], (rows,), (BLOCK,)


def _softmax_oracle(a):
  x, y, n = a
  x = x.reshape(-1, n).astype(np.float64)
  e = np.exp(x - x.max(1, keepdims=True))
  return [(e / e.sum(1, keepdims=True)).astype(np.float32).reshape(-1)]


def _scan_in(rng, groups=3):
  return [rng.integers(-1000, 1000, groups * BLOCK).astype(np.int32), np.zeros(groups * BLOCK, np.int32)], \
    (groups,), (BLOCK,)


def _hist_in(rng, n=300):
  return [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32), np.zeros(BINS, np.uint32), n], \
    (-(-n // BLOCK),), (BLOCK,)


def _int_in(rng, n=150):
  return [rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32),
          rng.integers(-5000, 5000, n).astype(np.int32), np.zeros(n, np.uint32), n], (-(-n // BLOCK),), (BLOCK,)


def _int_oracle(a):
  x, y, _, n = (v if isinstance(v, int) else v.astype(np.int64) for v in a)
  with np.errstate(all="ignore"):
    c = ((x * 7 + y) & 0xffffffff).astype(np.uint32).view(np.int32).astype(np.int64) ^ (x >> 3)
    d = np.where(x > y, c - (y << 2), c + (y & 255))
    d = ((d + (1 << 31)) % (1 << 32)) - (1 << 31)
    e = np.maximum(d, -1000) + np.minimum(x, y)
    i = np.arange(n)
    z = (e % (1 << 32)) * 3 + ((x % (1 << 32)) >> 5) + i % 5
  return [(z % (1 << 32)).astype(np.uint32)]


def _elem_in(rng, n=170):
  return [rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32), n], (-(-n // BLOCK),), (BLOCK,)


def _elem_oracle(a):
  x, _, n = a
  w = np.maximum(x * np.float32(2) - np.float32(1), np.float32(0))
  return [np.where(x < 0.5, w * x + (np.arange(n) % 3).astype(np.float32), -x).astype(np.float32)]


EXAMPLES: dict[str, Example] = {
  "saxpy": Example(saxpy, _saxpy_in, (2,), lambda a: [a[0] * a[1] + a[2]], 0, True),
  "reduce_sum": Example(reduce_sum, _reduce_in, (1,), _reduce_oracle, 0, True),
  "matmul": Example(matmul, _matmul_in, (2,), _matmul_oracle, 0, True),
  "softmax": Example(softmax, _softmax_in, (1,), _softmax_oracle, 32, True),
  "prefix_sum": Example(prefix_sum, _scan_in, (1,), lambda a: [np.concatenate(
    [np.cumsum(c, dtype=np.int32) for c in a[0].reshape(-1, BLOCK)])]),
  "histogram": Example(histogram, _hist_in, (1,), lambda a: [np.bincount(a[0] % BINS, minlength=BINS).astype(
    np.uint32)]),
  "int_ops": Example(int_ops, _int_in, (2,), _int_oracle),
  "elementwise": Example(elementwise, _elem_in, (1,), _elem_oracle),
}
DEMO = tuple(n for n, e in EXAMPLES.items() if e.demo)


def compile_example(name: str, arch: str, backend: str = "direct", **kw):
  """Compile one example for a target with a backend; returns `gputwin.compiler.Compiled` (code object bytes,
  kernel name, assembly text, IR)."""
  from gputwin.compiler import compile
  return compile(EXAMPLES[name].kernel, arch, backend=backend, **kw)


def ulp_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Distance in float32 units in the last place (0 for equal values, NaNs equal to NaNs)."""
  ia = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
  ib = np.asarray(b, np.float32).view(np.int32).astype(np.int64)
  ia = np.where(ia < 0, -(1 << 31) - ia, ia)
  ib = np.where(ib < 0, -(1 << 31) - ib, ib)
  d = np.abs(ia - ib)
  return np.where(np.isnan(a) & np.isnan(b), 0, d)


def check_example(name: str, arch: str, backend: str, launch, *, seed: int = 0) -> dict:
  """Compile example `name`, run it with `launch(code_object, kernel, grid=, block=, args=)` (gputwin.emu.launch,
  or a runtime-backed equivalent), and compare with its numpy oracle. Returns {"ok", "max_ulp" or "mismatches",
  "bound", "compile_s", "run_s"} for a demo table row."""
  import time
  ex = EXAMPLES[name]
  t0 = time.perf_counter()
  c = compile_example(name, arch, backend)
  t1 = time.perf_counter()
  args, grid, block = ex.inputs(np.random.default_rng(seed))
  want = ex.oracle([a.copy() if isinstance(a, np.ndarray) else a for a in args])
  launch(c.code_object, c.name, grid=grid, block=block, args=args)
  t2 = time.perf_counter()
  row = {"ok": True, "bound": ex.ulps, "compile_s": t1 - t0, "run_s": t2 - t1}
  for o, w in zip(ex.outputs, want):
    got = args[o]
    if w.dtype.kind == "f":
      # vs numpy (which may sum in another order or in float64): a relative tolerance, plus the ulp figure
      row["max_ulp"] = max(row.get("max_ulp", 0), int(ulp_diff(got, w).max()))
      row["ok"] &= bool(np.allclose(got, w, rtol=1e-4, atol=1e-5))
    else:
      row["mismatches"] = row.get("mismatches", 0) + int(np.sum(got != w))
      row["ok"] &= bool(np.array_equal(got, w))
  return row
