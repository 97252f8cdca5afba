"""`gputwin fuzz`: differential fuzzing of clang-22 or nvcc + the emulator against clang-22's host build.

Each program is a random, small, UB-free OpenCL C kernel (Csmith in spirit, written here): uint and float
variables, arithmetic with guarded division/shift/conversion helpers, if/else, constant-trip loops, LDS exchanges
between barriers, global and LDS atomics (add/xor/min/max, order-independent). One tree renders two ways:

  device  an OpenCL kernel, clang-22 -> AMD code object per target -> gputwin.emu.launch; or (NVIDIA targets sm_80,
          sm_90) a CUDA kernel, nvcc -ptx -> PTX module per target -> gputwin.emu.launch
  host    C with an OpenCL-compat prelude; every variable an array over the workgroup's lanes, each barrier-separated
          phase a loop over lanes (so barriers, LDS and atomics have their sequential meaning), clang-22 native

Programs are batched many per .cl or .cu / host binary (one clang-22 or nvcc run per target and batch). Outputs
(every variable of every lane, the atomic accumulators) must be bit-identical; a mismatch is reduced by delta
debugging on the program's statements and saved under tests/verify/regressions/. Floats: -ffp-contract=off on
both sides (nvcc: -fmad=false), correctly rounded division, denormals kept, NaNs canonicalised before they are
stored (their payloads are not specified by OpenCL or CUDA)."""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gputwin.errors import GputwinError
from gputwin.verify.command import guarded

B, G = 64, 2             # work-items per workgroup (two waves on wave32 targets, so barriers matter), workgroups
N = B * G
NU, NF = 5, 3            # uint and float variables per program
TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950")   # the default; NVIDIA targets only when asked for
NV_TARGETS = ("sm_80", "sm_90")                        # gputwin.emu.ptx (checked against its ARCHES in fuzz())
ACC_INIT = (0, 0, 0xffffffff, 0)     # add, xor, min, max accumulators (global per workgroup, and in LDS)
ATOMICS = ("add", "xor", "min", "max")
DEVICE_FLAGS = ("-O2", "-ffp-contract=off", "-cl-fp32-correctly-rounded-divide-sqrt")
NVCC, NVCC_FLAGS = "nvcc", ("-O3", "-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false")
HOST_FLAGS = ("-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-w")
HOST_LIBS = ("-lm",)    # after the source: fmaf
CHECKS = {"waitcnt", "lds_race"}  # not `uninit`: LLVM reads never-written SGPRs into dead phi lanes (FINDINGS.md)
REGRESSIONS = Path(__file__).resolve().parents[2] / "tests" / "verify" / "regressions"

# The helpers every program may call; the same text compiles as OpenCL C and (after the host prelude) as C.
HELPERS = r"""
static inline uint fb(float x) { return x != x ? 0x7fc00000u : as_uint(x); }
static inline uint udv(uint a, uint b) { return b ? a / b : a; }
static inline uint urm(uint a, uint b) { return b ? a % b : a; }
static inline uint sdv(uint a, uint b) {
  return (b == 0u || (a == 0x80000000u && b == ~0u)) ? a : (uint)((int)a / (int)b); }
static inline uint shl(uint a, uint b) { return a << (b & 31u); }
static inline uint shr(uint a, uint b) { return a >> (b & 31u); }
static inline uint sar(uint a, uint b) { return (uint)((int)a >> (b & 31u)); }
static inline uint mhi(uint a, uint b) { return (uint)(((ulong)a * (ulong)b) >> 32); }
static inline uint clz(uint a) { return a ? (uint)__builtin_clz(a) : 32u; }
static inline uint f2u(float f) { return (f > -1.0f && f < 4294967040.0f) ? (uint)f : 0u; }
static inline float fdv(float a, float b) { float x = __builtin_fabsf(a), y = __builtin_fabsf(b);
  return (x < 1e-14f || x > 1e14f || y < 1e-14f || y > 1e14f) ? 0.5f : a / b; }  /* FINDINGS.md #2 */
static inline float fmn(float a, float b) { return a < b ? a : b; }
"""
HOST_PRELUDE = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned int uint;
typedef unsigned long ulong;
static inline uint as_uint(float f) { uint u; memcpy(&u, &f, 4); return u; }
static inline void a_min(uint *p, uint v) { if (v < *p) *p = v; }
static inline void a_max(uint *p, uint v) { if (v > *p) *p = v; }
/* the CUDA intrinsics of INTRINSICS, as the CUDA Math API documents them */
static inline uint __brev(uint a) { uint r = 0;
  for (int i = 0; i < 32; i++) r |= (a >> i & 1u) << (31 - i);
  return r; }
static inline int __ffs(int a) { return a ? __builtin_ctz((uint)a) + 1 : 0; }
static inline uint __byte_perm(uint x, uint y, uint s) { ulong v = (ulong)y << 32 | x; uint r = 0;
  for (int n = 0; n < 4; n++) r |= (uint)(v >> 8 * (s >> 4 * n & 7u) & 0xffu) << 8 * n;
  return r; }
static inline ulong hilo(uint lo, uint hi) { return (ulong)hi << 32 | lo; }
static inline uint __funnelshift_l(uint lo, uint hi, uint s) { return (uint)(hilo(lo, hi) << (s & 31u) >> 32); }
static inline uint __funnelshift_lc(uint lo, uint hi, uint s) {
  return (uint)(hilo(lo, hi) << (s < 32u ? s : 32u) >> 32); }
static inline uint __funnelshift_r(uint lo, uint hi, uint s) { return (uint)(hilo(lo, hi) >> (s & 31u)); }
static inline uint __funnelshift_rc(uint lo, uint hi, uint s) {
  return (uint)(hilo(lo, hi) >> (s < 32u ? s : 32u)); }
static inline uint __usad(uint x, uint y, uint z) { return (x > y ? x - y : y - x) + z; }
static inline uint __umul24(uint x, uint y) { return (x & 0xffffffu) * (y & 0xffffffu); }
static inline uint __uhadd(uint x, uint y) { return (uint)(((ulong)x + y) >> 1); }
static inline uint __urhadd(uint x, uint y) { return (uint)(((ulong)x + y + 1u) >> 1); }
static inline uint __umulhi(uint x, uint y) { return (uint)((ulong)x * y >> 32); }
static inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }  /* glibc: exact */
static inline float __fsqrt_rn(float a) { return __builtin_sqrtf(a); }
"""
DEVICE_PRELUDE = r"""
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); \
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
"""
CUDA_PRELUDE = r"""
typedef unsigned int uint;    /* what <sys/types.h> (included by nvcc) says too */
typedef unsigned long ulong;
#define as_uint __float_as_uint
#define BARRIER() __syncthreads()
"""


@dataclass(frozen=True)
class Dialect:
  """How the device side of a program is spelled: OpenCL C for AMD targets, CUDA C for NVIDIA ones."""
  prelude: str
  kernel: str   # the signature; {i} the program's index
  ids: str      # lid and gid, the work-item's index in its workgroup and the workgroup's
  local: str    # the address space of the exchange array and the local accumulators
  atomic: str   # an atomic read-modify-write whose result is unused: {op} add/xor/min/max, {Op} capitalised
  helper: str   # what the helpers are declared as
  suffix: str   # of a saved regression's device source
  warp: str = ""  # a warp-wide statement (SHUFFLES, REDUCTIONS) from {dst} {name} {v} {a}


OPENCL = Dialect(DEVICE_PRELUDE, "__kernel void fz{i}(__global uint *out, __global const uint *in, __global uint *acc)",
                 "__builtin_amdgcn_workitem_id_x(), gid = __builtin_amdgcn_workgroup_id_x()", "__local",
                 "__atomic_fetch_{op}(&{p}, {v}, __ATOMIC_RELAXED)", "static inline", ".cl")
CUDA = Dialect(CUDA_PRELUDE, 'extern "C" __global__ void fz{i}(uint *out, const uint *in, uint *acc)',
               "threadIdx.x, gid = blockIdx.x", "__shared__", "atomic{Op}(&{p}, {v})", "static __device__ inline",
               ".cu", "u{dst} = __{name}_sync(0xffffffffu, {v}{a});")


def dialect(arch: str) -> Dialect:
  return CUDA if arch.startswith("sm_") else OPENCL


# Warp-wide operations over full warps of 32 lanes (CUDA's __NAME_sync(0xffffffff, v[, a])), drawn only at the top
# level where every lane takes part. The host knows every lane's v in the phase: a shuffle reads the lane given by
# SHUFFLES, a reduction folds r with each w of the warp (REDUCTIONS: the value a lane gives, the fold).
SHUFFLES = {"shfl_xor": "lid ^ {a}", "shfl_down": "(lid & 31u) + {a} < 32u ? lid + {a} : lid",
            "shfl_up": "(lid & 31u) >= {a} ? lid - {a} : lid", "shfl": "(lid & ~31u) | (({a}) & 31u)"}
REDUCTIONS = {"ballot": ("({v} ? 1u << (lid & 31u) : 0u)", "r | w"), "reduce_add": ("{v}", "r + w"),
              "reduce_xor": ("{v}", "r ^ w"), "reduce_min": ("{v}", "w < r ? w : r"),
              "reduce_max": ("{v}", "w > r ? w : r")}
# CUDA intrinsics NVIDIA programs draw in expressions (uint, float); {2} & 0x7777u: prmt's sign-replicating selector
# bit is left out, as __byte_perm's documentation leaves it out
INTRINSICS = (("__brev({0})", "((uint)__ffs((int){0}))", "__byte_perm({0}, {1}, ({2}) & 0x7777u)",
               "__funnelshift_l({0}, {1}, {2})", "__funnelshift_lc({0}, {1}, {2})", "__funnelshift_r({0}, {1}, {2})",
               "__funnelshift_rc({0}, {1}, {2})", "__usad({0}, {1}, {2})", "__umul24({0}, {1})", "__uhadd({0}, {1})",
               "__urhadd({0}, {1})", "__umulhi({0}, {1})"),
              ("__fmaf_rn({0}, {1}, {2})", "__fsqrt_rn({0})"))


# ------------------------------------------------------------------------------------------ programs
@dataclass
class Stmt:
  """One statement: kind in set/if/for/atomic/xchg; `a` its operands; `body`/`orelse` nested statements."""
  id: int
  kind: str
  a: tuple
  body: list = field(default_factory=list)
  orelse: list = field(default_factory=list)


@dataclass
class Program:
  seed: int
  index: int
  stmts: list
  inits: list  # per variable: an init expression over in[], tid

  def walk(self, stmts=None):
    for s in self.stmts if stmts is None else stmts:
      yield s
      yield from self.walk(s.body)
      yield from self.walk(s.orelse)


UCONST = (0, 1, 2, 3, 7, 31, 32, 255, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe, 0x9e3779b9)
FCONST = ("0.5f", "-1.25f", "3.0f", "0.001f", "100.0f", "-0.0f", "65536.0f", "1e30f")
# edge values only NVIDIA programs draw (denormals: nvcc -ftz=false; AMD programs stay as they were)
FCONST_EDGE = ("1e-40f", "-1.4e-45f", "1.17549435e-38f", "-5.9e-39f", "3.4028235e38f", "1e-20f")


class Gen:
  """Draws one program from a seeded random.Random; expressions are strings in a syntax both renderings share:
  a variable is written `$u3`/`$f1` and rendered as `u3` (device) or `u3[lid]` (host)."""

  def __init__(self, rng: random.Random, cuda: bool = False):
    self.r, self.next_id, self.loops, self.cuda = rng, 0, [], cuda

  def stmt_id(self) -> int:
    self.next_id += 1
    return self.next_id

  def uexpr(self, d: int = 0) -> str:
    r = self.r
    if d >= 3 or r.random() < 0.25:
      c = r.random()
      if c < 0.55: return f"$u{r.randrange(NU)}"
      if c < 0.75: return f"{r.choice(UCONST) if r.random() < 0.7 else r.getrandbits(32)}u"
      if c < 0.9: return r.choice(("lid", "gid", "tid"))
      return r.choice(self.loops) if self.loops else "lid"
    if self.cuda and r.random() < 0.1: return self.intrinsic(INTRINSICS[0], self.uexpr, d)
    c = r.random()
    a, b = self.uexpr(d + 1), self.uexpr(d + 1)
    if c < 0.45: return f"({a} {r.choice('+-*&|^')} {b})"
    if c < 0.7: return f"{r.choice(('udv', 'urm', 'sdv', 'shl', 'shr', 'sar', 'mhi'))}({a}, {b})"
    if c < 0.8: return f"(uint)({a} {r.choice(('<', '==', '!=', '>='))} {b})" if r.random() < 0.5 else \
      f"(uint)((int){a} < (int){b})"
    if c < 0.87: return f"({self.cond(d + 1)} ? {a} : {b})"
    if c < 0.94: return r.choice((f"(~{a})", f"(-({a}))", f"clz({a})", f"(uint)__builtin_popcount({a})"))
    return r.choice((f"fb({self.fexpr(d + 1)})", f"f2u({self.fexpr(d + 1)})"))

  def fexpr(self, d: int = 0) -> str:
    r = self.r
    if d >= 3 or r.random() < 0.3:
      c = r.random()
      if c < 0.6: return f"$f{r.randrange(NF)}"
      if c < 0.8: return r.choice(FCONST_EDGE if self.cuda and r.random() < 0.3 else FCONST)
      return f"(float)({self.uexpr(d + 1)})" if r.random() < 0.5 else f"(float)(int)({self.uexpr(d + 1)})"
    if self.cuda and r.random() < 0.1: return self.intrinsic(INTRINSICS[1], self.fexpr, d)
    a, b = self.fexpr(d + 1), self.fexpr(d + 1)
    c = r.random()
    if c < 0.6: return f"({a} {r.choice('+-*')} {b})"
    if c < 0.75: return f"fdv({a}, {b})"
    if c < 0.85: return f"fmn({a}, {b})"
    if c < 0.92: return f"(-({a}))"
    return f"__builtin_fabsf({a})"

  def intrinsic(self, forms, arg, d: int) -> str:
    t = self.r.choice(forms)
    return t.format(*(arg(d + 1) for _ in range(t.count("{"))))

  def cond(self, d: int = 0) -> str:
    r = self.r
    c = r.random()
    if c < 0.4: return f"({self.uexpr(d + 1)} {r.choice(('<', '>', '==', '!='))} {self.uexpr(d + 1)})"
    if c < 0.6: return f"({self.fexpr(d + 1)} < {self.fexpr(d + 1)})"
    if c < 0.8: return f"(lid {r.choice(('<', '>=', '=='))} {r.randrange(B)}u)"
    return f"(({self.uexpr(d + 1)} & {1 << r.randrange(4)}u) != 0u)"

  def stmts(self, n: int, depth: int, top: bool) -> list:
    out, r = [], self.r
    for _ in range(n):
      if self.cuda and top and r.random() < 0.12:
        out.append(self.warp_stmt())
        continue
      c = r.random()
      if top and c < 0.1:
        out.append(Stmt(self.stmt_id(), "xchg", (r.randrange(NU), r.randrange(1, B))))
      elif c < 0.22 and depth < 2:
        out.append(Stmt(self.stmt_id(), "if", (self.cond(),), self.stmts(r.randint(1, 3), depth + 1, False),
                        self.stmts(r.randint(0, 2), depth + 1, False)))
      elif c < 0.32 and depth < 2:
        k = f"k{len(self.loops)}"
        self.loops.append(k)
        out.append(Stmt(self.stmt_id(), "for", (k, r.randint(1, 4)), self.stmts(r.randint(1, 3), depth + 1, False)))
        self.loops.pop()
      elif c < 0.42:
        out.append(Stmt(self.stmt_id(), "atomic", (r.choice(("acc", "lacc")), r.randrange(4), self.uexpr(1))))
      elif c < 0.72:
        out.append(Stmt(self.stmt_id(), "set", (f"u{r.randrange(NU)}", self.uexpr())))
      else:
        out.append(Stmt(self.stmt_id(), "set", (f"f{r.randrange(NF)}", self.fexpr())))
    return out

  def warp_stmt(self) -> Stmt:
    r = self.r
    name = r.choice((*SHUFFLES, *REDUCTIONS))
    v = self.cond() if name == "ballot" else self.uexpr(1)
    a = (self.uexpr(1) if name == "shfl" else f"{r.randrange(1, 32)}u") if name in SHUFFLES else ""
    return Stmt(self.stmt_id(), "warp", (name, r.randrange(NU), v, a))


def generate(seed: int, index: int, cuda: bool = False) -> Program:
  """Program `index` of `seed`; `cuda`: also with CUDA-only warp-wide statements and intrinsics (NVIDIA targets;
  without them the draws, and so the programs, are those of the AMD targets)."""
  rng = random.Random(f"gputwin-fuzz:{seed}:{index}")
  g = Gen(rng, cuda)
  inits = [f"in[(tid * {rng.choice((1, 3, 5, 7))}u + {rng.randrange(N)}u) % {N}u]" for _ in range(NU)]
  inits += [f"(float)(in[(tid + {rng.randrange(N)}u) % {N}u] & 0xfffu) * 0.25f - {rng.randrange(1, 500)}.0f"
            for _ in range(NF)]
  return Program(seed, index, g.stmts(rng.randint(5, 12), 0, True), inits)


# ------------------------------------------------------------------------------------------ rendering
def _vars():
  return [f"u{i}" for i in range(NU)] + [f"f{i}" for i in range(NF)]


def _sub(e: str, host: bool) -> str:
  import re
  return re.sub(r"\$([uf]\d+)", r"\1[lid]" if host else r"\1", e)


def _body(stmts, keep, host: bool, ind: str, d: Dialect = OPENCL) -> list[str]:
  out = []
  for s in stmts:
    if s.id not in keep:
      continue
    if s.kind == "set":
      lhs = f"{s.a[0]}[lid]" if host else s.a[0]
      out.append(f"{ind}{lhs} = {_sub(s.a[1], host)};")
    elif s.kind == "if":
      out.append(f"{ind}if {_sub(s.a[0], host)} {{")
      out += _body(s.body, keep, host, ind + "  ", d)
      els = _body(s.orelse, keep, host, ind + "  ", d)
      out += [f"{ind}}} else {{", *els, f"{ind}}}"] if els else [f"{ind}}}"]
    elif s.kind == "for":
      k, n = s.a
      out += [f"{ind}for (uint {k} = 0u; {k} < {n}u; {k}++) {{", *_body(s.body, keep, host, ind + "  ", d), f"{ind}}}"]
    elif s.kind == "atomic":
      buf, op, e = s.a
      slot = f"{buf}[gid * 4u + {op}u]" if buf == "acc" else f"{buf}[{op}u]"
      if host:
        fn = {"add": "{p} += {v}", "xor": "{p} ^= {v}", "min": "a_min(&{p}, {v})", "max": "a_max(&{p}, {v})"}
        out.append(f"{ind}{fn[ATOMICS[op]].format(p=slot, v=_sub(e, True))};")
      else:
        op = ATOMICS[op]
        out.append(f"{ind}{d.atomic.format(op=op, Op=op.capitalize(), p=slot, v=_sub(e, False))};")
  return out


def _phases(p: Program, keep) -> list:
  """Top-level statements split at exchanges and warp-wide statements: [stmts, xchg, stmts, warp, ...] (barriers
  and warp-wide operations only in uniform flow)."""
  out, cur = [], []
  for s in p.stmts:
    if s.id not in keep:
      continue
    if s.kind in ("xchg", "warp"):
      out += [cur, s]
      cur = []
    else:
      cur.append(s)
  return out + [cur]


def render_device(p: Program, keep=None, d: Dialect = OPENCL) -> str:
  keep = keep if keep is not None else {s.id for s in p.walk()}
  L = [d.kernel.format(i=p.index) + " {", f"  uint lid = {d.ids}, tid = gid * {B}u + lid;",
       f"  {d.local} uint lds[{B}], lacc[4];",
       "  if (lid < 4u) lacc[lid] = lid == 2u ? 0xffffffffu : 0u;", "  BARRIER();"]
  L += [f"  uint {v} = {e};" if v[0] == "u" else f"  float {v} = {e};" for v, e in zip(_vars(), p.inits)]
  for ph in _phases(p, keep):
    if isinstance(ph, Stmt) and ph.kind == "warp":
      if not d.warp:
        raise GputwinError(f"program {p.index} has warp-wide statements, which only CUDA targets run")
      name, dst, v, a = ph.a
      L += ["  " + d.warp.format(dst=dst, name=name, v=_sub(v, False), a=a and ", " + _sub(a, False))]
    elif isinstance(ph, Stmt):
      L += [f"  lds[lid] = u{ph.a[0]};", "  BARRIER();", f"  u{ph.a[0]} = lds[(lid + {ph.a[1]}u) % {B}u];",
            "  BARRIER();"]
    else:
      L += _body(ph, keep, False, "  ", d)
  L += ["  BARRIER();"]
  L += [f"  out[tid * {NU + NF}u + {i}u] = {v if v[0] == 'u' else f'fb({v})'};" for i, v in enumerate(_vars())]
  L += [f"  if (lid < 4u) acc[{4 * G}u + gid * 4u + lid] = lacc[lid];", "}"]
  return "\n".join(L)


def render_host(p: Program, keep=None) -> str:
  keep = keep if keep is not None else {s.id for s in p.walk()}
  each = f"for (uint lid = 0; lid < {B}u; lid++) {{ uint tid = gid * {B}u + lid; (void)tid;"
  L = [f"static void fz{p.index}(uint *out, const uint *in, uint *acc) {{",
       f"  for (uint gid = 0; gid < {G}u; gid++) {{",
       f"    uint lds[{B}], lacc[4] = {{0u, 0u, 0xffffffffu, 0u}}; (void)lds; (void)lacc;",
       f"    uint {', '.join(f'u{i}[{B}]' for i in range(NU))}; float {', '.join(f'f{i}[{B}]' for i in range(NF))};",
       *([f"    uint wv[{B}];  /* every lane's value of a warp-wide statement */"] * any(
         s.kind == "warp" for s in p.stmts)), f"    {each}"]
  L += [f"      {v}[lid] = {e};" for v, e in zip(_vars(), p.inits)] + ["    }"]
  for ph in _phases(p, keep):
    if isinstance(ph, Stmt) and ph.kind == "warp":
      name, dst, v, a = ph.a
      v, a = _sub(v, True), _sub(a, True)
      if name in SHUFFLES:
        put, get = v, f"u{dst}[lid] = wv[{SHUFFLES[name].format(a=a)}];"
      else:
        put, fold = REDUCTIONS[name][0].format(v=v), REDUCTIONS[name][1]
        get = (f"uint r = wv[lid & ~31u]; for (uint j = (lid & ~31u) + 1u; j <= (lid | 31u); j++) {{ uint w = wv[j]; "
               f"r = {fold}; }} u{dst}[lid] = r;")
      L += [f"    {each} wv[lid] = {put}; }}", f"    {each} {get} }}"]
    elif isinstance(ph, Stmt):
      L += [f"    for (uint lid = 0; lid < {B}u; lid++) lds[lid] = u{ph.a[0]}[lid];",
            f"    for (uint lid = 0; lid < {B}u; lid++) u{ph.a[0]}[lid] = lds[(lid + {ph.a[1]}u) % {B}u];"]
    elif ph:
      L += [f"    {each}", *_body(ph, keep, True, "      "), "    }"]
  L += [f"    {each}"]
  L += [f"      out[tid * {NU + NF}u + {i}u] = {f'{v}[lid]' if v[0] == 'u' else f'fb({v}[lid])'};"
        for i, v in enumerate(_vars())]
  L += ["    }", f"    for (uint j = 0; j < 4u; j++) acc[{4 * G}u + gid * 4u + j] = lacc[j];", "  }", "}"]
  return "\n".join(L)


def device_source(progs, keeps=None, d: Dialect = OPENCL) -> str:
  keeps = keeps or [None] * len(progs)
  return (d.prelude + HELPERS.replace("static inline", d.helper) + "\n" +
          "\n\n".join(render_device(p, k, d) for p, k in zip(progs, keeps)) + "\n")


def host_source(progs, keeps=None) -> str:
  keeps = keeps or [None] * len(progs)
  calls = "\n".join(f"  if (fread(in, 4, {N}, stdin) != {N}) return 2;\n  memcpy(acc, acc0, sizeof acc); "
                    f"memset(out, 0, sizeof out); fz{p.index}(out, in, acc);\n"
                    f"  fwrite(out, 4, {N * (NU + NF)}, stdout); fwrite(acc, 4, {8 * G}, stdout);" for p in progs)
  return (HOST_PRELUDE + HELPERS + "\n" + "\n\n".join(render_host(p, k) for p, k in zip(progs, keeps)) +
          f"\nint main(void) {{\n  static uint in[{N}], out[{N * (NU + NF)}], acc[{8 * G}], acc0[{8 * G}];\n"
          f"  for (int g = 0; g < {2 * G}; g++) for (int j = 0; j < 4; j++) acc0[g * 4 + j] = "
          f"j == 2 ? 0xffffffffu : 0u;\n{calls}\n  return 0;\n}}\n")


def inputs(seed: int, index: int) -> np.ndarray:
  rng = np.random.default_rng([seed, index, 7])
  v = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
  v[rng.integers(0, N, 8)] = rng.choice(np.array(UCONST, np.uint32), 8)  # edge values now and then
  return v


# ------------------------------------------------------------------------------------------ running
@dataclass
class Outcome:
  target: str
  seed: int
  index: int
  status: str   # "ok", "known-bug" (explained, see known.py), "mismatch", "emu-error", "clang-error" (AMD) or
                # "compile-error" (nvcc), "host-error"
  detail: str = ""


def _host_outputs(progs, keeps, ins, workdir) -> list[np.ndarray]:
  """Compile the host C once for the batch and run it once: program i reads input i from stdin."""
  from gputwin.verify.runner import CLANG, ToolchainError, need
  need(CLANG)
  c, exe = Path(workdir, "host.c"), Path(workdir, "host")
  c.write_text(host_source(progs, keeps))
  r = subprocess.run([CLANG, "-x", "c", *HOST_FLAGS, str(c), *HOST_LIBS, "-o", str(exe)], capture_output=True,
                     text=True)
  if r.returncode:
    raise ToolchainError(f"{CLANG} (host) failed:\n{r.stderr[-2000:]}")
  r = subprocess.run([str(exe)], input=b"".join(x.tobytes() for x in ins), capture_output=True, timeout=120)
  if r.returncode:
    raise ToolchainError(f"host binary failed ({r.returncode}): {r.stderr[-500:]!r}")
  return list(np.frombuffer(r.stdout, np.uint32).reshape(len(progs), -1))


@dataclass(frozen=True)
class PtxModule:
  """What nvcc wrote for one batch and target: launched through gputwin.emu.launch (which caches it by text)."""
  text: str
  arch: str


def _need_nvcc() -> None:
  from gputwin.verify.runner import ToolchainError
  if shutil.which(NVCC) is None:
    raise ToolchainError(f"{NVCC} not found on PATH (NVIDIA targets need the CUDA 13 toolkit's nvcc)")


def nvcc_ptx(source: str, arch: str) -> PtxModule:
  """CUDA C -> PTX with nvcc (NVCC_FLAGS: IEEE single precision, no contraction, denormals kept)."""
  from gputwin.verify.runner import ToolchainError
  _need_nvcc()
  with tempfile.TemporaryDirectory(prefix="gputwin-nvcc-") as d:
    cu, ptx = Path(d, "fuzz.cu"), Path(d, "fuzz.ptx")
    cu.write_text(source)
    r = subprocess.run([NVCC, "-ptx", f"-arch={arch}", *NVCC_FLAGS, str(cu), "-o", str(ptx)], capture_output=True,
                       text=True)
    if r.returncode:
      raise ToolchainError(f"{NVCC} failed for {arch} ({r.returncode}):\n{r.stderr.strip()[-2000:]}")
    return PtxModule(ptx.read_text(), arch)


def _launch(emu, p: Program, x: np.ndarray, shims=()):
  """One program on the emulator (with `shims`: hooks from known.KNOWN correcting known emulator bugs): its
  outputs, or the error text when it stopped."""
  out, acc = np.zeros(N * (NU + NF), np.uint32), np.tile(np.array(ACC_INIT, np.uint32), 2 * G)
  if isinstance(emu, PtxModule):
    from gputwin.emu import launch
    try:
      launch(emu.text, f"fz{p.index}", grid=G, block=B, args=[out, x, acc], arch=emu.arch, max_instructions=2_000_000,
             checks=CHECKS)
    except GputwinError as e:
      return f"{type(e).__name__}: {e}"
    return np.concatenate([out, acc])
  d = None
  try:
    d = emu.prepare(f"fz{p.index}", grid=G, block=B, args=[out, x, acc], max_instructions=2_000_000, checks=CHECKS)
    for fn in shims:
      d.hook(fn)
    d.run()
  except GputwinError as e:
    return f"{type(e).__name__}: {e}"
  finally:
    if d is not None:
      d.finish()
  return np.concatenate([out, acc])


def _device(progs, keeps, arch):
  """One code object (clang-22 + ld.lld-22, loaded once) or PTX module (nvcc) per target and batch."""
  if dialect(arch) is CUDA:
    return nvcc_ptx(device_source(progs, keeps, CUDA), arch)
  from gputwin.emu.api import Emulator
  from gputwin.verify.runner import clang_cl
  return Emulator(clang_cl(device_source(progs, keeps), arch, flags=DEVICE_FLAGS, name="fuzz"))


def _explain(emu, p: Program, x: np.ndarray, host: np.ndarray) -> str | None:
  """The known emulator bug that explains a mismatch: with its shim on, the emulator agrees with the host."""
  from gputwin.verify.known import KNOWN
  if isinstance(emu, PtxModule):
    return None  # the shims are hooks on AMD instructions
  for name, (_, fn) in KNOWN.items():
    g = _launch(emu, p, x, [fn])
    if not isinstance(g, str) and np.array_equal(g, host):
      return name
  g = _launch(emu, p, x, [fn for _, fn in KNOWN.values()])
  return "+".join(KNOWN) if len(KNOWN) > 1 and not isinstance(g, str) and np.array_equal(g, host) else None


def _describe(host: np.ndarray, dev: np.ndarray) -> str:
  i = int(np.argwhere(host != dev)[0][0])
  if i < N * (NU + NF):
    tid, v = divmod(i, NU + NF)
    return f"{_vars()[v]} of work-item {tid}: host {host[i]:#x}, emulator {dev[i]:#x}"
  j = i - N * (NU + NF)
  name = f"{'acc' if j < 4 * G else 'lacc'}[{j % (4 * G) // 4}].{ATOMICS[j % 4]}"
  return f"{name}: host {host[i]:#x}, emulator {dev[i]:#x}"


def run_batch(job) -> list[Outcome]:
  """(seed, start, count, targets) -> one Outcome per program and target. Runs in a worker process. Targets whose
  dialect is CUDA get programs with CUDA-only statements and intrinsics (one host build per kind of program)."""
  seed, start, count, targets = job
  out = []
  for cuda in sorted({dialect(t) is CUDA for t in targets}):
    out += _run_programs(seed, range(start, start + count), [t for t in targets if (dialect(t) is CUDA) == cuda], cuda)
  return out


def _run_programs(seed: int, indices, targets, cuda: bool) -> list[Outcome]:
  progs = [generate(seed, i, cuda) for i in indices]
  ins = [inputs(seed, i) for i in indices]
  out = []
  with tempfile.TemporaryDirectory(prefix="gputwin-fuzz-") as d:
    try:
      host = _host_outputs(progs, None, ins, d)
    except GputwinError as e:
      return [Outcome(t, seed, p.index, "host-error", str(e)[:500]) for t in targets for p in progs]
    for t in targets:
      try:
        emus = [_device(progs, None, t)] * len(progs)
      except GputwinError:  # a clang-22 / nvcc failure: find the program(s) it is about, run the others alone
        emus = []
        for p in progs:
          try:
            emus.append(_device([p], None, t))
          except GputwinError as e:
            emus.append(str(e)[:500])
      for p, x, h, emu in zip(progs, ins, host, emus):
        if isinstance(emu, str):
          out.append(Outcome(t, seed, p.index, "compile-error" if dialect(t) is CUDA else "clang-error", emu))
          continue
        g = _launch(emu, p, x)
        if isinstance(g, str):
          out.append(Outcome(t, seed, p.index, "emu-error", g[:500]))
        elif not np.array_equal(h, g):
          why = _explain(emu, p, x, h)
          out.append(Outcome(t, seed, p.index, "known-bug" if why else "mismatch",
                             f"{why}: {_describe(h, g)}" if why else _describe(h, g)))
        else:
          out.append(Outcome(t, seed, p.index, "ok"))
  return out


def verdict(p: Program, keep, arch: str, x: np.ndarray) -> str:
  """'ok' or a short description of how host and emulator differ for one (reduced) program on one target."""
  with tempfile.TemporaryDirectory(prefix="gputwin-fuzz-") as d:
    try:
      h = _host_outputs([p], [keep], [x], d)[0]
      g = _launch(_device([p], [keep], arch), p, x)
    except GputwinError as e:
      return f"tool: {e}"[:200]
  if isinstance(g, str):
    return "emu-error: " + g.split(":")[0]
  # the first differing variable (or accumulator) is part of the verdict, so reduction keeps *this* mismatch
  return "ok" if np.array_equal(h, g) else "mismatch " + _describe(h, g).split(" of ")[0].split(":")[0]


def reduce(p: Program, arch: str, x: np.ndarray, log=None) -> set:
  """ddmin over the program's statements (a removed compound statement takes its body with it): the smallest set
  of statement ids that still gives the same kind of failure."""
  want = verdict(p, None, arch, x)
  if want == "ok" or want.startswith("tool"):
    return {s.id for s in p.walk()}
  ids = [s.id for s in p.walk()]
  n = 2
  while len(ids) >= 2:
    chunk = -(-len(ids) // n)
    parts = [ids[i:i + chunk] for i in range(0, len(ids), chunk)]
    for part in parts:
      rest = [i for i in ids if i not in part]
      if verdict(p, set(rest), arch, x) == want:
        ids, n = rest, max(n - 1, 2)
        if log: log(f"reduced to {len(ids)} statements")
        break
    else:
      if n >= len(ids):
        break
      n = min(len(ids), 2 * n)
  return set(ids)


def save_regression(p: Program, keep, arch: str, x: np.ndarray, why: str, where: Path = REGRESSIONS) -> Path:
  where.mkdir(parents=True, exist_ok=True)
  stem, d = where / f"{arch}-s{p.seed}-p{p.index}", dialect(arch)
  stem.with_suffix(d.suffix).write_text(f"// gputwin fuzz: seed {p.seed} program {p.index} on {arch}: {why}\n"
                                        + device_source([p], [keep], d))
  stem.with_suffix(".c").write_text(host_source([p], [keep]))
  stem.with_suffix(".json").write_text(json.dumps(dict(arch=arch, seed=p.seed, index=p.index, why=why,
                                                       keep=sorted(keep), input=x.tolist()), indent=0))
  return stem


def replay(stem) -> tuple[np.ndarray, object, object]:
  """Re-run a saved regression case (stem.cl or stem.cu, stem.c, stem.json) from its sources — independent of the
  generator: (host outputs, emulator outputs or error text, the Emulator or PtxModule) on the case's target and
  input."""
  stem = Path(stem)
  meta = json.loads(stem.with_suffix(".json").read_text())
  from gputwin.emu.api import Emulator
  from gputwin.verify.runner import CLANG, ToolchainError, clang_cl, need
  need(CLANG)
  x = np.array(meta["input"], np.uint32)
  with tempfile.TemporaryDirectory(prefix="gputwin-replay-") as d:
    exe = Path(d, "host")
    r = subprocess.run([CLANG, "-x", "c", *HOST_FLAGS, str(stem.with_suffix(".c")), *HOST_LIBS, "-o", str(exe)],
                       capture_output=True, text=True)
    if r.returncode:
      raise ToolchainError(f"{CLANG} (host) failed on {stem}.c:\n{r.stderr[-1000:]}")
    h = np.frombuffer(subprocess.run([str(exe)], input=x.tobytes(), capture_output=True, check=True).stdout, np.uint32)
  arch = meta["arch"]
  src = stem.with_suffix(dialect(arch).suffix).read_text()
  emu = nvcc_ptx(src, arch) if dialect(arch) is CUDA else Emulator(clang_cl(src, arch, flags=DEVICE_FLAGS, name="case"))
  return h, _launch(emu, Program(meta["seed"], meta["index"], [], []), x), emu


def fuzz(seed: int, count: int, targets=TARGETS, *, batch: int = 25, jobs: int | None = None, progress=None,
         reduce_mismatches: bool = True, save_to: Path | None = REGRESSIONS, log=None,
         max_reduce: int = 5) -> list[Outcome]:
  """`count` programs per target, batched `batch` per code object, over `jobs` worker processes. The first
  `max_reduce` unexplained mismatches are reduced (and saved to `save_to`); the rest are reported as found."""
  from gputwin.emu.ptx.launch import ARCHES
  from gputwin.verify.runner import CLANG, LLD, need
  nv = [t for t in targets if dialect(t) is CUDA]
  if set(nv) - set(ARCHES):
    raise GputwinError(f"unknown NVIDIA target(s) {', '.join(sorted(set(nv) - set(ARCHES)))}; the PTX emulator runs "
                       f"{', '.join(ARCHES)}")
  need(CLANG)
  if nv: _need_nvcc()
  if len(nv) < len(targets): need(LLD)
  work = [(seed, s, min(batch, count - s), tuple(targets)) for s in range(0, count, batch)]
  jobs = jobs or os.cpu_count() or 1
  results = []
  if jobs == 1 or len(work) == 1:
    for w in work:
      results += run_batch(w)
      if progress: progress(len(results))
  else:
    import multiprocessing as mp
    with mp.get_context("fork").Pool(jobs) as pool:
      for r in pool.imap_unordered(run_batch, work):
        results += r
        if progress: progress(len(results))
  bad = [o for o in results if o.status in ("mismatch", "emu-error")]
  for o in bad[:max_reduce if reduce_mismatches else 0]:
    p, x = generate(o.seed, o.index, dialect(o.target) is CUDA), inputs(o.seed, o.index)
    keep = reduce(p, o.target, x, log)
    o.detail += f" (reduced to {len(keep)} of {sum(1 for _ in p.walk())} statements)"
    if save_to is not None:
      o.detail += f" -> {save_regression(p, keep, o.target, x, o.detail, save_to)}"
  return sorted(results, key=lambda o: (o.target, o.index))


# ------------------------------------------------------------------------------------------ command line
def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="gputwin fuzz", description=__doc__.split("\n\n")[0])
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--count", type=int, default=100, help="programs per target")
  p.add_argument("--arch", "--target", dest="arch", action="append", default=None,
                 help=f"target (repeatable; default {' '.join(TARGETS)}; NVIDIA: {' '.join(NV_TARGETS)})")
  p.add_argument("--batch", type=int, default=25, help="programs per code object or PTX module / host binary")
  p.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: all cores)")
  p.add_argument("--no-reduce", action="store_true", help="report mismatches without delta debugging them")
  p.add_argument("--save", default=str(REGRESSIONS), help="where reduced mismatches go ('' to not save)")
  p.add_argument("--show", type=int, default=None, metavar="INDEX", help="print program INDEX (device and host)")
  p.add_argument("--reliability", nargs="*", metavar="CATEGORY", default=None,
                 help="hostile inputs into every entry point instead (categories or prefixes: decode asm codeobj exec "
                 "fault ioctl cmd; none: all); see gputwin/verify/reliability.py")
  p.add_argument("--cases", default="1000", help="--reliability: cases per category: N, or counts per category or "
                 "prefix and a default, e.g. decode=1000000,exec=2000,10000")
  p.add_argument("--out", default=None, help="--reliability: where minimised reproducers go")
  p.add_argument("--cluster", default=None, metavar="ADDRESS",
                 help="run the batches / seed ranges on this Ray cluster (pip install 'gputwin[cluster]')")
  p.add_argument("--ir", action="store_true", help="random IR programs through gputwin's compiler backends instead "
                 f"(default targets: {' '.join(IR_TARGETS)}; the host CPUs run under unicorn)")
  a = p.parse_args(argv)
  if a.reliability is not None or a.cluster:
    from gputwin.verify import reliability
    return guarded("gputwin fuzz", lambda: reliability.main(a) if a.reliability is not None else cluster_diff(a))
  if a.show is not None and a.ir:
    return guarded("gputwin fuzz", lambda: print(ir_programs(a.seed, a.show + 1)[a.show]) or 0)
  if a.show is not None:
    d = dialect((a.arch or TARGETS)[0])
    prog = generate(a.seed, a.show, d is CUDA)
    print(device_source([prog], d=d), "\n// ---- host\n", host_source([prog]), sep="")
    return 0
  return guarded("gputwin fuzz", lambda: _cli(a))


def diff_task(task: dict) -> dict:
  """A batch of this fuzzer as a cluster task (reliability.cluster_run's `run`)."""
  import dataclasses
  from gputwin.verify.reliability import task_key
  t = time.perf_counter()
  outs = run_batch((task["seed"], task["start"], task["n"], tuple(task["targets"])))
  return {"task": task_key(task), **task, "outcomes": [dataclasses.asdict(o) for o in outs],
          "secs": time.perf_counter() - t}


def cluster_diff(a) -> int:
  """`gputwin fuzz --cluster ADDRESS` (no --reliability): this fuzzer's batches as tasks on a Ray cluster."""
  from collections import Counter
  from gputwin.verify.reliability import cluster_run, digest
  targets = list(a.arch or TARGETS)
  todo = [{"kind": "diff", "cat": "diff", "seed": a.seed, "start": s, "n": min(a.batch, a.count - s),
           "targets": targets} for s in range(0, a.count, a.batch)]
  store = Path(a.out or ".") / f"fuzz-{a.seed}-{digest(json.dumps(todo))}.jsonl"
  t0 = time.perf_counter()
  outs = [o for r in cluster_run(todo, a.cluster, store, run=diff_task) for o in r["outcomes"]]
  n = Counter((o["target"], o["status"]) for o in outs)
  for tg in targets:
    print(f"{tg}: " + ", ".join(f"{st} {c}" for (t, st), c in sorted(n.items()) if t == tg))
  bad = [o for o in outs if o["status"] not in ("ok", "known-bug")]
  for o in bad:
    print(f"{o['status']}: {o['target']} seed {o['seed']} program {o['index']}: {o['detail']}  [source: gputwin fuzz "
          f"--seed {o['seed']} --show {o['index']}; reduce it with a local run]")
  print(f"{len(outs)} programs in {time.perf_counter() - t0:.1f} s on {a.cluster}; results in {store}")
  return 1 if bad else 0


def _cli(a) -> int:
  from rich.console import Console
  from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
  from rich.table import Table
  targets = a.arch or list(IR_TARGETS if a.ir else TARGETS)
  con, t0 = Console(highlight=False, stderr=True), time.perf_counter()
  what = "IR programs (reference vs each backend)" if a.ir else "OpenCL C / CUDA C programs"
  with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=con, transient=not con.is_terminal) as pr:
    task = pr.add_task(f"fuzz seed {a.seed}", total=a.count * (sum(map(len, map(ir_backends, targets))) if a.ir
                                                                else len(targets)))
    tick = lambda n: pr.update(task, completed=n)  # noqa: E731
    res = ir_fuzz(a.seed, a.count, targets, jobs=a.jobs, progress=tick) if a.ir else \
      fuzz(a.seed, a.count, targets, batch=a.batch, jobs=a.jobs, progress=tick, reduce_mismatches=not a.no_reduce,
           save_to=Path(a.save) if a.save else None)
  t = Table(title=f"gputwin fuzz: seed {a.seed}, {a.count} {what} per target, {time.perf_counter() - t0:.1f} s")
  cols = ("ok", "known-bug", "mismatch", "emu-error", "clang-error", "host-error", "compile-error")
  cols = [c for c in cols if c in ("ok", "known-bug", "mismatch") or any(o.status == c for o in res)]
  for col in ("target", *cols):
    t.add_column(col, justify="right" if col != "target" else "left")
  for tg in sorted({o.target for o in res}):
    mine = [o for o in res if o.target == tg]
    t.add_row(tg, *(str(sum(o.status == c for o in mine)) for c in cols))
  Console(highlight=False).print(t)
  from collections import Counter
  known = Counter(o.detail.split(":")[0] for o in res if o.status == "known-bug")
  if known:
    print("explained by known emulator bugs (gputwin/verify/FINDINGS.md): "
          + ", ".join(f"{k} x{n}" for k, n in known.most_common()))
  shown = [o for o in res if o.status not in ("ok", "known-bug")] + [o for o in res if o.status == "known-bug"][:10]
  for o in shown:
    print(f"{o.status}: {o.target} seed {o.seed} program {o.index}: {o.detail}  [source: gputwin fuzz "
          f"{'--ir ' if a.ir else ''}--seed {o.seed} --show {o.index}]")
  if sum(known.values()) > 10:
    print(f"... and {sum(known.values()) - 10} more known-bug lines")
  return 1 if any(o.status not in ("ok", "known-bug") for o in res) else 0




# ------------------------------------------------------------------------------------------ IR programs
IR_TARGETS = TARGETS + NV_TARGETS + ("x86_64", "aarch64")   # every target the generator's types compile for


def ir_backends(target: str, backends=("direct", "llvm")) -> tuple:
  """The backends of `backends` that compile for `target` (host CPUs: llvm only; Adreno ir3: direct only)."""
  from gputwin.compiler import HOST_TARGETS, IR3_TARGETS
  only = "llvm" if target in HOST_TARGETS else "direct" if target in IR3_TARGETS else None
  return tuple(b for b in backends if only in (None, b))


IR_GENERATOR = Path(__file__).resolve().parents[2] / "tests" / "compiler" / "test_fuzz.py"


def _ir_generator():
  """The compiler tests' hypothesis IR generator (tests/compiler/test_fuzz.py: Gen, inputs, same), reused as is."""
  import importlib.util
  if not IR_GENERATOR.exists():
    raise GputwinError(f"the IR program generator lives in the source tree ({IR_GENERATOR}); run from a checkout")
  sys.path.insert(0, str(IR_GENERATOR.parent))
  try:
    spec = importlib.util.spec_from_file_location("gputwin_ir_fuzz_gen", IR_GENERATOR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
  finally:
    sys.path.remove(str(IR_GENERATOR.parent))
  return mod


def ir_programs(seed: int, count: int) -> list[str]:
  """`count` random IR programs (text) drawn by the compiler tests' generator from a fixed hypothesis seed."""
  from hypothesis import HealthCheck, Phase, given, settings
  from hypothesis import seed as hseed
  from hypothesis import strategies as st
  from gputwin.compiler import ir
  gen, out = _ir_generator(), []

  @hseed(seed)
  @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck))
  @given(st.data())
  def draw(data):
    out.append(ir.print_kernel(gen.Gen(data).kernel()))
  draw()
  return out[:count]


def run_ir_batch(job) -> list[Outcome]:
  """(seed, [(index, IR text)], target, backends) -> Outcomes: host reference vs each backend on the emulator."""
  seed, items, target, backends = job
  from gputwin.compiler import compile as compile_kernel, ir
  gen = _ir_generator()
  sys.path.insert(0, str(IR_GENERATOR.parent))
  from _compiler_helpers import known_emu_bug, run_both  # noqa: E402  (the compiler tests' reference runner)
  sys.path.remove(str(IR_GENERATOR.parent))
  out = []
  for i, text in items:
    for be in ir_backends(target, backends):
      tag = f"{target}/{be}"
      try:
        c = compile_kernel(ir.parse(text), target, backend=be)
      except GputwinError as e:
        out.append(Outcome(tag, seed, i, "clang-error" if be == "llvm" else "compile-error", str(e)[:300]))
        continue
      try:
        ref, got = run_both(c, gen.inputs(seed), 1, gen.N)
        gen.same(ref, got, f"{be} {target}")
        out.append(Outcome(tag, seed, i, "ok"))
      except (AssertionError, GputwinError) as e:
        why = known_emu_bug(c.asm)
        out.append(Outcome(tag, seed, i, "known-bug" if why else "mismatch", f"{why or ''} {e}"[:400]))
  return out


def ir_fuzz(seed: int, count: int, targets=IR_TARGETS, backends=("direct", "llvm"), *, jobs: int | None = None,
            progress=None) -> list[Outcome]:
  progs = list(enumerate(ir_programs(seed, count)))
  work = [(seed, progs[k::2], t, tuple(backends)) for t in targets for k in range(2)]
  results = []
  import multiprocessing as mp
  with mp.get_context("fork").Pool(jobs or os.cpu_count() or 1) as pool:
    for r in pool.imap_unordered(run_ir_batch, work):
      results += r
      if progress: progress(len(results))
  return sorted(results, key=lambda o: (o.target, o.index))


if __name__ == "__main__":
  sys.exit(main())
