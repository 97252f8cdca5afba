"""Build `forms.json` (the PTX instruction-form table) from the `### Syntax` blocks of the PTX ISA 9.0 reference.

    python -m gputwin.isa.ptx.gen_forms [ISA_DIR]     # default ../shared/vendor/ptx/isa-9.0

Each syntax line `opcode{.opt}.group.literal  d, [a]{, b};` becomes one form: the modifier slots in order (required or
optional, each a set of allowed modifiers; a group such as `.type` is expanded from its `.type = { ... }` definition)
and the operand list (required/optional, kind). Only these facts are written, never the manual's prose. Where the
transcription lacks a form the manual has (it keeps only the first syntax section of some instructions), or has a
typo, `EXTRA` and `ERRATA` below add or fix it, citing the manual section.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from gputwin.isa.ptx.model import TYPES

HERE = Path(__file__).parent
OUT = HERE / "forms.json"

# Text fixes to the transcription, applied before parsing: (file stem, wrong, right, manual section).
ERRATA = [
  ("mma", ".m8n84,", ".m8n8k4,", "9.7.14.5.14 mma: f64 shape list"),
  ("redux", "{.abs.}", "{.abs}", "9.7.13.10 redux.sync"),
  ("cvt", "cvt.rn.{.relu}", "cvt.rn{.relu}", "9.7.9.21 cvt"),
  ("isspacep", "{ const,", "{ .const,", "9.7.9.23 isspacep"),
]

# Forms the manual has and the transcription lacks, in the same notation (our own transcription of the manual's
# syntax, section numbers of PTX ISA 9.0). Definitions after a group of forms apply to that group.
EXTRA = r"""
# 9.7.3.1-3 add/sub/mul (floating point), 9.7.4.1-3 (half precision)
add{.rnd}{.ftz}{.sat}.f32 d, a, b;
add{.rnd}{.ftz}.f32x2 d, a, b;
add{.rnd}.f64 d, a, b;
add{.rnd}{.ftz}{.sat}.htype d, a, b;
add{.rnd}.btype d, a, b;
add.cc.itype d, a, b;
sub{.rnd}{.ftz}{.sat}.f32 d, a, b;
sub{.rnd}{.ftz}.f32x2 d, a, b;
sub{.rnd}.f64 d, a, b;
sub{.rnd}{.ftz}{.sat}.htype d, a, b;
sub{.rnd}.btype d, a, b;
sub.cc.itype d, a, b;
mul{.rnd}{.ftz}{.sat}.f32 d, a, b;
mul{.rnd}{.ftz}.f32x2 d, a, b;
mul{.rnd}.f64 d, a, b;
mul{.rnd}{.ftz}{.sat}.htype d, a, b;
mul{.rnd}.btype d, a, b;
.rnd = { .rn, .rz, .rm, .rp };
.htype = { .f16, .f16x2 };
.btype = { .bf16, .bf16x2 };
.itype = { .u32, .s32, .u64, .s64 };
# 9.7.3.4-5 fma/mad (f32, f64), 9.7.4.4 fma (half precision), 9.7.1.4 mad.cc
fma.rnd{.ftz}{.sat}.htype d, a, b, c;
fma.rnd{.ftz}.relu.htype d, a, b, c;
fma.rnd{.relu}.btype d, a, b, c;
fma.rnd.oob{.relu}.otype d, a, b, c;
mad{.ftz}{.sat}.f32 d, a, b, c;
mad.rnd{.ftz}{.sat}.f32 d, a, b, c;
mad.rnd.f64 d, a, b, c;
mad.mode.cc.itype d, a, b, c;
.rnd = { .rn, .rz, .rm, .rp };
.htype = { .f16, .f16x2 };
.btype = { .bf16, .bf16x2 };
.otype = { .f16, .f16x2, .bf16, .bf16x2 };
.mode = { .hi, .lo };
.itype = { .u32, .s32, .u64, .s64 };
# 9.7.3.8 div (floating point)
div.approx{.ftz}.f32 d, a, b;
div.full{.ftz}.f32 d, a, b;
div.rnd{.ftz}.f32 d, a, b;
div.rnd.f64 d, a, b;
.rnd = { .rn, .rz, .rm, .rp };
# 9.7.3.9-10 abs/neg (f32, f64), 9.7.4.5-6 (half precision)
abs{.ftz}.f32 d, a;
abs.f64 d, a;
abs{.ftz}.htype d, a;
abs.btype d, a;
neg{.ftz}.f32 d, a;
neg.f64 d, a;
neg{.ftz}.htype d, a;
neg.btype d, a;
.htype = { .f16, .f16x2 };
.btype = { .bf16, .bf16x2 };
# 9.7.3.11-12 min/max (floating point), 9.7.4.7-8 (half precision)
min{.ftz}{.NaN}{.xorsign.abs}.f32 d, a, b;
min{.ftz}{.NaN}{.abs}.f32 d, a, b, c;
min.f64 d, a, b;
min{.ftz}{.NaN}{.xorsign.abs}.htype d, a, b;
min{.NaN}{.xorsign.abs}.btype d, a, b;
max{.ftz}{.NaN}{.xorsign.abs}.f32 d, a, b;
max{.ftz}{.NaN}{.abs}.f32 d, a, b, c;
max.f64 d, a, b;
max{.ftz}{.NaN}{.xorsign.abs}.htype d, a, b;
max{.NaN}{.xorsign.abs}.btype d, a, b;
.htype = { .f16, .f16x2 };
.btype = { .bf16, .bf16x2 };
# 9.7.1.10-11 min/max (integer, with .relu on signed)
max.atype d, a, b;
max{.relu}.btype d, a, b;
.atype = { .u16, .u32, .u64, .u16x2, .s16, .s64 };
.btype = { .s16x2, .s32 };
# 9.7.3.16-21 rsqrt.approx.ftz.f64, ex2/tanh on half types (9.7.4.9-10), lg2/sin/cos
rsqrt.approx.ftz.f64 d, a;
rcp.approx.ftz.f64 d, a;
ex2.approx.atype d, a;
ex2.approx.ftz.btype d, a;
tanh.approx.type d, a;
.atype = { .f16, .f16x2 };
.btype = { .bf16, .bf16x2 };
.type = { .f32, .f16, .f16x2, .bf16, .bf16x2 };
# 9.7.5.1 setp, 9.7.5.2 set (half precision comparisons)
setp.CmpOp{.ftz}.f16 p, a, b;
setp.CmpOp.BoolOp{.ftz}.f16 p, a, b, {!}c;
setp.CmpOp{.ftz}.f16x2 p|q, a, b;
setp.CmpOp.BoolOp{.ftz}.f16x2 p|q, a, b, {!}c;
setp.CmpOp.bf16 p, a, b;
setp.CmpOp.BoolOp.bf16 p, a, b, {!}c;
setp.CmpOp.bf16x2 p|q, a, b;
setp.CmpOp.BoolOp.bf16x2 p|q, a, b, {!}c;
.CmpOp = { eq, ne, lt, le, gt, ge, equ, neu, ltu, leu, gtu, geu, num, nan };
.BoolOp = { and, or, xor };
set.CmpOp{.ftz}.f16.stype d, a, b;
set.CmpOp.BoolOp{.ftz}.f16.stype d, a, b, {!}c;
set.CmpOp.bf16.stype d, a, b;
set.CmpOp.BoolOp.bf16.stype d, a, b, {!}c;
.stype = { .b16, .b32, .b64, .u16, .u32, .u64, .s16, .s32, .s64, .f16, .f32, .f64 };
set.CmpOp{.ftz}.dtype.f16 d, a, b;
set.CmpOp.BoolOp{.ftz}.dtype.f16 d, a, b, {!}c;
set.CmpOp.dtype.bf16 d, a, b;
set.CmpOp.BoolOp.dtype.bf16 d, a, b, {!}c;
.dtype = { .u16, .s16, .u32, .s32 };
set.CmpOp{.ftz}.dtype.f16x2 d, a, b;
set.CmpOp.BoolOp{.ftz}.dtype.f16x2 d, a, b, {!}c;
.dtype = { .f16x2, .u32, .s32 };
set.CmpOp.dtype.bf16x2 d, a, b;
set.CmpOp.BoolOp.dtype.bf16x2 d, a, b, {!}c;
.dtype = { .bf16x2, .u32, .s32 };
# 9.7.5.1 setp: the comparison operators each type class allows (the manual's prose, written as forms)
setp.ucmp.utype p[|q], a, b;
setp.ucmp.BoolOp.utype p[|q], a, b, {!}c;
setp.scmp.stype p[|q], a, b;
setp.scmp.BoolOp.stype p[|q], a, b, {!}c;
setp.bcmp.btype p[|q], a, b;
setp.bcmp.BoolOp.btype p[|q], a, b, {!}c;
setp.fcmp{.ftz}.f32 p[|q], a, b;
setp.fcmp.BoolOp{.ftz}.f32 p[|q], a, b, {!}c;
setp.fcmp.f64 p[|q], a, b;
setp.fcmp.BoolOp.f64 p[|q], a, b, {!}c;
.ucmp = { eq, ne, lt, le, gt, ge, lo, ls, hi, hs };
.scmp = { eq, ne, lt, le, gt, ge };
.bcmp = { eq, ne };
.fcmp = { eq, ne, lt, le, gt, ge, equ, neu, ltu, leu, gtu, geu, num, nan };
.BoolOp = { and, or, xor };
.utype = { .u16, .u32, .u64 };
.stype = { .s16, .s32, .s64 };
.btype = { .b16, .b32, .b64 };
# 9.7.9.21 cvt: which rounding each conversion class takes (the manual's rules for .irnd/.frnd, written as forms)
cvt{.sat}.itype.itype d, a;
cvt.irnd{.ftz}{.sat}.itype.ftype d, a;
cvt.frnd{.sat}.ftype.itype d, a;
cvt{.irnd}{.ftz}{.sat}.f16.f16 d, a;
cvt{.irnd}{.ftz}{.sat}.bf16.bf16 d, a;
cvt{.irnd}{.ftz}{.sat}.f32.f32 d, a;
cvt{.irnd}{.ftz}{.sat}.f64.f64 d, a;
.irnd = { .rni, .rzi, .rmi, .rpi };
.frnd = { .rn, .rz, .rm, .rp };
.itype = { .u8, .u16, .u32, .u64, .s8, .s16, .s32, .s64 };
.ftype = { .f16, .bf16, .f32, .f64 };
cvt.frnd{.ftz}{.sat}.f32.f64 d, a;
cvt.frnd{.ftz}{.sat}.narrow.wide d, a;
cvt.frnd{.ftz}{.sat}.half.half d, a;
cvt{.ftz}{.sat}.f64.f32 d, a;
cvt{.ftz}{.sat}.wide.narrow d, a;
.frnd = { .rn, .rz, .rm, .rp };
.narrow = { .f16, .bf16 };
.wide = { .f32, .f64 };
.half = { .f16, .bf16 };
# 9.7.1.3 mul, 9.7.1.4 mad (integer): .wide doubles the destination
mul.hilo.type d, a, b;
mul.wide.wtype d, a, b;
mad.hilo.type d, a, b, c;
mad.wide.wtype d, a, b, c;
.hilo = { .hi, .lo };
.type = { .u16, .u32, .u64, .s16, .s32, .s64 };
.wtype = { .u16, .u32, .s16, .s32 };
# 9.7.13.5 atom, 9.7.13.6 red: the types each operation takes (the manual's rules, written as forms). The manual's
# generic `atom.op.type d, [a], b, c` is kept for .b32 bitwise/exch (ptxas takes it; with .b64 a fourth operand
# reads as the cache policy)
atom{.sem}{.scope}{.space}.bop{.level::cache_hint}.btype d, [a], b{, cache-policy};
atom{.sem}{.scope}{.space}.cas.btype d, [a], b, c;
atom{.sem}{.scope}{.space}.bop.b32 d, [a], b, c;
atom{.sem}{.scope}{.space}.add{.level::cache_hint}.atype d, [a], b{, cache-policy};
atom{.sem}{.scope}{.space}.idop{.level::cache_hint}.u32 d, [a], b{, cache-policy};
atom{.sem}{.scope}{.space}.mop{.level::cache_hint}.mtype d, [a], b{, cache-policy};
.sem = { .relaxed, .acquire, .release, .acq_rel };
.bop = { .and, .or, .xor, .exch };
red{.rsem}{.scope}{.space}.rbop{.level::cache_hint}.btype [a], b{, cache-policy};
red{.rsem}{.scope}{.space}.add{.level::cache_hint}.atype [a], b{, cache-policy};
red{.rsem}{.scope}{.space}.idop{.level::cache_hint}.u32 [a], b{, cache-policy};
red{.rsem}{.scope}{.space}.mop{.level::cache_hint}.mtype [a], b{, cache-policy};
.rsem = { .relaxed, .release };
.rbop = { .and, .or, .xor };
.scope = { .cta, .cluster, .gpu, .sys };
.space = { .global, .shared{::cta, ::cluster} };
.level::cache_hint = { .L2::cache_hint };
.idop = { .inc, .dec };
.mop = { .min, .max };
.btype = { .b32, .b64 };
.atype = { .u32, .u64, .s32, .f32, .f64 };
.mtype = { .u32, .u64, .s32, .s64 };
# 9.7.9.8 ld.global.nc
ld.global{.cop}.nc{.level::cache_hint}{.level::prefetch_size}{.vec}.type d, [a]{, cache-policy};
ld.global.nc{.level1::eviction_priority}{.level2::eviction_priority}{.level::cache_hint}{.level::prefetch_size}
  {.vec}.type d, [a]{, cache-policy};
.cop = { .ca, .cg, .cs };
.level1::eviction_priority = { .L1::evict_normal, .L1::evict_unchanged, .L1::evict_first, .L1::evict_last,
  .L1::no_allocate };
.level2::eviction_priority = { .L2::evict_normal, .L2::evict_first, .L2::evict_last };
.level::cache_hint = { .L2::cache_hint };
.level::prefetch_size = { .L2::64B, .L2::128B, .L2::256B };
.vec = { .v2, .v4, .v8 };
.type = { .b8, .b16, .b32, .b64, .b128, .u8, .u16, .u32, .u64, .s8, .s16, .s32, .s64, .f32, .f64 };
# 9.7.9.1 mov (vector pack/unpack)
mov.type d, a;
.type = { .b16, .b32, .b64, .b128 };
# 9.7.9.7 shfl.sync, 9.7.13.4 bar.warp.sync, 9.7.13.8 vote.sync
shfl.sync.mode.b32 d[|p], a, b, c, membermask;
.mode = { .up, .down, .bfly, .idx };
bar.warp.sync membermask;
vote.sync.mode.pred d, {!}a, membermask;
vote.sync.ballot.b32 d, {!}a, membermask;
.mode = { .all, .any, .uni };
# 9.7.9.25 cp.async.commit_group / wait_group / wait_all, 9.7.9.26 cp.async.mbarrier.arrive
cp.async.commit_group;
cp.async.wait_group N;
cp.async.wait_all;
cp.async.mbarrier.arrive{.noinc}{.ss}.b64 [addr];
.ss = { .shared{::cta} };
# 9.7.13.15 mbarrier
mbarrier.init{.ss}.b64 [addr], count;
mbarrier.inval{.ss}.b64 [addr];
mbarrier.expect_tx{.sem}{.scope}{.space}.b64 [addr], txCount;
mbarrier.complete_tx{.sem}{.scope}{.space}.b64 [addr], txCount;
mbarrier.arrive{.sem}{.scope}{.ss}.b64 state, [addr]{, count};
mbarrier.arrive{.sem}{.scope}{.ss}.expect_tx.b64 state, [addr], txCount;
mbarrier.arrive{.sem}{.scope}{.shared::cluster}.b64 _, [addr]{, count};
mbarrier.arrive.noComplete{.sem}{.scope}{.ss}.b64 state, [addr], count;
mbarrier.arrive_drop{.sem}{.scope}{.ss}.b64 state, [addr]{, count};
mbarrier.arrive_drop.noComplete{.sem}{.scope}{.ss}.b64 state, [addr], count;
mbarrier.test_wait{.sem}{.scope}{.ss}.b64 waitComplete, [addr], state;
mbarrier.test_wait.parity{.sem}{.scope}{.ss}.b64 waitComplete, [addr], phaseParity;
mbarrier.try_wait{.sem}{.scope}{.ss}.b64 waitComplete, [addr], state{, suspendTimeHint};
mbarrier.try_wait.parity{.sem}{.scope}{.ss}.b64 waitComplete, [addr], phaseParity{, suspendTimeHint};
mbarrier.pending_count.b64 count, state;
.ss = { .shared{::cta} };
.space = { .shared{::cta, ::cluster} };
.sem = { .relaxed, .release, .acquire };
.scope = { .cta, .cluster };
# 9.7.14.4 wmma.store / wmma.mma (shapes per element type)
wmma.store.d.sync.aligned.layout.shape{.ss}.type [p], r{, stride};
wmma.store.d.sync.aligned.layout.m16n16k8{.ss}.f32 [p], r{, stride};
wmma.store.d.sync.aligned.layout.m8n8k4{.ss}.f64 [p], r{, stride};
wmma.mma.sync.aligned.alayout.blayout.shape.dtype.ctype d, a, b, c;
wmma.mma.sync.aligned.alayout.blayout.shape.f32.bf16.bf16.f32 d, a, b, c;
wmma.mma.sync.aligned.alayout.blayout.m16n16k8.f32.tf32.tf32.f32 d, a, b, c;
wmma.mma.sync.aligned.alayout.blayout.shape.s32.itype.itype.s32{.satfinite} d, a, b, c;
wmma.mma.sync.aligned.alayout.blayout.m8n8k4{.rnd}.f64.f64.f64.f64 d, a, b, c;
.layout = { .row, .col };
.alayout = { .row, .col };
.blayout = { .row, .col };
.shape = { .m16n16k16, .m8n32k16, .m32n8k16 };
.ss = { .global, .shared{::cta} };
.type = { .f16, .f32, .s32 };
.dtype = { .f16, .f32 };
.ctype = { .f16, .f32 };
.itype = { .s8, .u8 };
.rnd = { .rn, .rz, .rm, .rp };
# 9.7.12.3 call/ret variants nvcc writes, 9.7.12.1 bra with a guard
# 9.7.9.3 ld.param for call sequences is in ld.md; 9.7.13.1 bar (deprecated barrier forms) in bar.md
brkpt;
pmevent a;
"""

# Vendor forms our EXTRA forms refine (same facts, split by the rules the manual states in prose), by signature.
REPLACED = {"setp.CmpOp.ftz.type", "setp.CmpOp.BoolOp.ftz.type", "cvt.irnd.ftz.sat.dtype.atype",
            "cvt.frnd.ftz.sat.dtype.atype", "mul.mode.type", "mad.mode.type",
            "atom.sem.scope.space.op.level::cache_hint.type", "atom.sem.scope.space.op.type",
            "red.sem.scope.space.op.level::cache_hint.type"}

# Operand types the manual gives in prose, per opcode ('*' for all): operand -> rule. A rule is a type slot name or
# '#k' (the k-th type modifier), a type ('u32', 'pred'), 'wide' (twice the instruction type) or '' (unchecked); a
# leading '~' marks the relaxed rule of ld/st/cvt (a wider register is fine); ':lo..hi' bounds an immediate; 'frag'
# is a matrix fragment (forms.fragment_regs gives its length). Without a rule an operand takes the instruction's type when the form has exactly one type slot, and is unchecked otherwise.
OPERAND_TYPES = {
  "*": {"membermask": "b32", "cache-policy": "b64"},
  "ld": {"d": "~type"}, "ldu": {"d": "~type"}, "st": {"b": "~type"},
  "cvt": {"d": "~#0", "a": "~#1", "b": "~#1", "rbits": "b32"},
  "shl": {"b": "u32"}, "shr": {"b": "u32"}, "bfe": {"b": "u32", "c": "u32"}, "bfi": {"c": "u32", "d": "u32"},
  "bfind": {"d": "u32"}, "clz": {"d": "u32"}, "popc": {"d": "u32"}, "fns": {"d": "", "base": "", "offset": ""},
  "setp": {"p": "pred", "q": "pred", "pq": "pred", "c": "pred"}, "testp": {"p": "pred"}, "isspacep": {"p": "pred"},
  "selp": {"c": "pred"}, "slct": {"d": "#0", "a": "#0", "b": "#0", "c": "#1"},
  "set": {"d": "#0", "a": "#1", "b": "#1", "c": "pred"}, "match": {"d": "b32", "dp": "b32"}, "elect": {"dp": "b32"},
  "mbarrier": {"count": "u32", "txCount": "u32", "waitComplete": "pred", "phaseParity": "u32",
               "suspendTimeHint": "u32", "state": "b64"},
  "wmma": {"stride": "u32", "r": "frag", "d": "frag", "a": "frag", "b": "frag", "c": "frag"},
  "mma": {"d": "frag", "a": "frag", "b": "frag", "c": "frag"}, "ldmatrix": {"r": "frag"}, "stmatrix": {"r": "frag"},
  "bar": {"a": "u32:0..15"}, "barrier": {"a": "u32:0..15"},
  "createpolicy": {"cache-policy": "b64", "fraction": "", "a": "", "primary-size": "", "total-size": "",
                   "cache-policy-in": ""},
}

_DEF = re.compile(r"^\s*((?:[.\w:-]+\s*=\s*)+)\{(.*)\}\s*;?", re.S)
_FORM = re.compile(r"^([a-z][a-z0-9_]*)((?:\{(?:[^{} ]|\{[^{} ]*\})*\}|\.[\w:]+(?:\{::[^}]*\})?)*)\s*(.*?)\s*;?\s*$",
                   re.S)


def _alts(body: str) -> list[str]:
  """`.a, .b{::x, ::y}, c` -> ['a', 'b', 'b::x', 'b::y', 'c'] (dots dropped)."""
  out = []
  for m in re.finditer(r"\.?([\w:]+(?:\.[\w:]+)*)(?:\{([^}]*)\})?", body):
    base, suf = m.group(1), m.group(2)
    out.append(base)
    if suf: out += [base + s.strip() for s in suf.split(",") if s.strip()]
  return out


def _chunks(block: str) -> list[tuple[str, str]]:
  """Split a syntax block into ('form'|'def', text) items, joining continuation lines."""
  items: list[list[str]] = []
  for raw in block.splitlines():
    line = re.sub(r"//.*|^#.*", "", raw).rstrip()
    if not line.strip(): continue
    s = line.strip()
    if re.match(r"^\.?[\w:-]+\s*=", s): items.append(["def", s])
    elif re.match(r"^(@\w+\s+)?[a-z][a-z0-9_]*[.{ ;]", s) or re.match(r"^[a-z]+;?$", s):
      items.append(["form", re.sub(r"^@\w+\s+", "", s)])
    elif items: items[-1][1] += ("" if s.startswith((".", "{.")) else " ") + s  # a continued modifier list or operands
  return [tuple(x) for x in items]


def _defs(text: str) -> dict[str, list[str]]:
  m = _DEF.match(text)
  if not m: return {}
  names = [n.strip().lstrip(".") for n in m.group(1).split("=") if n.strip()]
  return {n: _alts(m.group(2)) for n in names}


def _slots(mods: str, defs: dict[str, list[str]]) -> list[list]:
  """`{.ftz}.rnd.f32` -> [[name, required, [alternatives]], ...]."""
  slots, i = [], 0
  while i < len(mods):
    if mods[i] == "{":
      depth, j = 0, i
      while True:
        depth += {"{": 1, "}": -1}.get(mods[j], 0)
        if depth == 0: break
        j += 1
      inner, req, i = mods[i + 1:j], False, j + 1
    else:
      m = re.match(r"\.[\w:]+(?:\{::[^}]*\})?", mods[i:])
      inner, req, i = m.group(0), True, i + m.end()
    if "," in inner and "{" not in inner:  # madc{.hi,.lo}: braces around a list mean "one of", not "optional"
      slots.append(["|".join(_alts(inner)), True, _alts(inner)]); continue
    for p in re.findall(r"\.[\w:]+(?:\{[^}]*\})?", inner):  # {.xorsign.abs}: each part optional on its own
      name = p[1:].split("{")[0]
      slots.append([name, req, defs.get(name) or _alts(p)])
  return slots


def _operands(text: str) -> list[list]:
  """`d[|p], [a]{, b}, {!}c` -> [[name, required, kind]] with kind addr|pair|pred|vec|any."""
  text = re.sub(r"\{\s*\.[\w:]+\s*\}", "", text)  # [a]{.unified}
  text = text.replace("{!}", "!")
  out, req = [], True
  toks = re.findall(r"\{\s*,|\{[^,{}]*(?:,[^,{}]*)+\}|\[[^\]]*\](?:\[[^\]]*\])?|[^,{}\s]+(?:\[\|\w+\])?|\}|,", text)
  for t in toks:
    if t.startswith("{") and t.rstrip().endswith(","): req = False; continue
    if t == "}": req = True; continue
    if t == ",": continue
    kind = "addr" if t.startswith("[") else "args" if t.startswith("(") else "vec" if t.startswith("{") else \
      "pair" if "|" in t else "pred" if t.startswith("!") else "any"
    out.append([re.sub(r"[\[\]|!{}\s]", "", t) if kind != "addr" else t, req, kind])
  return out


def _types(op: str, slots: list, ops: list) -> list:
  """Append each operand's type rule (see OPERAND_TYPES)."""
  rules = {**OPERAND_TYPES["*"], **OPERAND_TYPES.get(op, {})}
  tslots = [n for n, _, alts in slots if alts and all(a in TYPES for a in alts)]
  wide = any(n == "wide" for n, _, _ in slots)
  for o in ops:
    name, kind = o[0], o[2]
    if name in rules: rule = rules[name]
    elif kind in ("addr", "args", "vec") or name.startswith("("): rule = ""
    elif kind == "pred": rule = "pred"
    elif wide and name in ("d", "c"): rule = "wide"
    else: rule = tslots[0] if len(tslots) == 1 else ""
    if op == "mov" and kind == "any": o[2] = "pack"  # mov alone packs/unpacks brace vectors ({%r1, %r2} <-> %rd1)
    o += [rule, "L2::cache_hint" if name == "cache-policy" and op != "createpolicy" else ""]
  return ops


def build(isa_dir: Path) -> dict:
  """The form table: {opcode: [{'mods': [[name, required, alternatives]], 'ops': [[name, required, kind, type rule,
  needed modifier]], 'src': manual file or section}]}."""
  table: dict[str, list] = {}
  def add(src: str, block: str):
    chunks = _chunks(block)
    alldefs: dict[str, list[str]] = {}
    for k, t in chunks:
      if k == "def": alldefs.update(_defs(t))
    pending: list[str] = []
    def flush(defs):
      for f in pending:
        m = _FORM.match(f)
        if not m: continue
        op, mods, opnds = m.groups()
        if op in ("vop", "vop2", "vop4", "defaults"): continue
        slots = _slots(mods, {**alldefs, **defs})
        if op + "".join("." + n for n, _, _ in slots) in REPLACED and not src.startswith("manual"): continue
        table.setdefault(op, []).append({"mods": slots, "ops": _types(op, slots, _operands(opnds)), "src": src})
      pending.clear()
    local: dict[str, list[str]] = {}
    for k, t in chunks + [("form", "")]:
      if k == "def": local.update(_defs(t))
      else:
        if local or not t: flush(local); local = {}
        if t: pending.append(t)
  for f in sorted(isa_dir.glob("*.md")):
    text = f.read_text()
    for stem, wrong, right, _ in ERRATA:
      if stem == f.stem: text = text.replace(wrong, right)
    syn = re.search(r"^### Syntax\s*$(.*?)(?=^### |\Z)", text, re.S | re.M)
    if not syn: continue
    for blk in re.findall(r"```(.*?)```", syn.group(1), re.S): add(f.stem, blk)
  for part in re.split(r"\n(?=# )", EXTRA.strip()):
    add("manual " + part.splitlines()[0].lstrip("# ").split()[0], "\n".join(part.splitlines()[1:]))
  # drop exact duplicates (membar.md repeats fence.md), keep first
  for op, forms in table.items():
    seen, keep = set(), []
    for f in forms:
      key = json.dumps([f["mods"], f["ops"]])
      if key not in seen: seen.add(key); keep.append(f)
    table[op] = keep
  return dict(sorted(table.items()))


def main(argv: list[str]) -> None:
  isa = Path(argv[0]) if argv else HERE.parents[2].parent / "shared" / "vendor" / "ptx" / "isa-9.0"
  table = build(isa.resolve())
  OUT.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: [\n  " + ",\n  ".join(json.dumps(f, separators=(",", ":"))
                 for f in v) + "]" for k, v in table.items()) + "\n}\n")
  print(f"{OUT}: {len(table)} opcodes, {sum(map(len, table.values()))} forms")


if __name__ == "__main__":
  main(sys.argv[1:])
