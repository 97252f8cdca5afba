"""The ir3 binding (gputwin/emu/ir3/decode.py + the machine) instruction by instruction: every cat2, cat3 and cat4 key
of gputwin.pcode.ir3 (the ALU rows) assembled from Mesa's text and run on the emulator, one fiber per operand
combination, its sources being full registers loaded from an SSBO of edge operands, both halves of merged rows (hr2k
low / hr2k+1 high of r k), consts (a half const in a float op is an f32 the hardware converts to f16, to nearest
even), integer immediates and the float lookup table (#mulitsrc-immed-flut), (neg)/(abs) (float: sign bit; integer:
two's complement; bitwise: not), (sat) and DST_CONV (the key's own forms), (rptN) with (r), r<a0.x + n> / c<a0.x + n>
sources and a relative destination, and cat1 mov/cov for every type pair and rounding mode. The expected bits per
fiber come from what the text says each source is: numpy IEEE float32/float16 and the Python-integer oracle of
tests/pcode/test_ir3_semantics.py where they exist, otherwise the (oracle-checked) pcode body evaluated on the operand
values computed here. The interpreter (every checker on) and the native tier (GPUTWIN_JIT=1 from the first lane) must
give identical bits; the untouched half of a merged row and the neighbours of a repeated destination keep their
sentinel."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.errors import GputwinError
from gputwin.isa.ir3 import assemble, listing
from gputwin.pcode import ir3 as P
from gputwin.pcode import semantics
from tests.pcode.test_ir3_semantics import _int_oracle

GPUS = ("a630", "a730")
NW = 2  # workgroups of 64 fibers
NF = 64 * NW  # fibers: one operand combination each
SENT = 0x5a5ac3c3  # what a destination row holds before the instruction
GID = "shl.b r0.w, r48.x, 6\nadd.u r0.w, r0.w, r0.x\n"
LD = "ldib.b.untyped.1d.u32.4.imm.base0 {d}, {c}, 0\n"
FLUT = ("0.0", "0.5", "1.0", "2.0", "e", "pi", "1/pi", "1/log2(e)", "log2(e)", "1/log2(10)", "log2(10)", "4.0")
FLUT_V = (0.0, 0.5, 1.0, 2.0, math.e, math.pi, 1 / math.pi, 1 / math.log2(math.e), math.log2(math.e),
          1 / math.log2(10), math.log2(10), 4.0)  # the <doc>'s values, as numbers
U32 = np.uint32


# ------------------------------------------------------------------------------------------------ operands
def _fpool(w: int, rng, n: int = NF) -> np.ndarray:
  """Float bit patterns: zeros, +-1, +-inf, NaNs (quiet/signalling, both signs), the largest and smallest normal and
  denormal values, halfway cases, then random finite values."""
  if w == 32:
    edge = [0, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001,
            0x7f7fffff, 0xff7fffff, 0x00800000, 0x80800000, 0x00000001, 0x807fffff, 0x3f000000, 0x3fc00000,
            0xc0200000, 0x4b000001, 0x3effffff, 0x40490fdb, 0x33800000, 0x477fe000, 0x477ff000]
    r = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
    v = r.astype(np.float32).view(U32)
  else:
    edge = [0, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x7bff, 0xfbff, 0x0400, 0x8400,
            0x0001, 0x83ff, 0x3800, 0x3e00, 0xc100, 0x6401, 0x37ff, 0x4248, 0x1400]
    r = rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))
    v = r.astype(np.float16).view(np.uint16).astype(U32)
  v = v.copy()
  v[:len(edge)] = edge
  return v


def _ipool(w: int, rng, n: int = NF) -> np.ndarray:
  m = (1 << w) - 1
  edge = [0, 1, m, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1, 2, m - 1, w - 1, w, w + 1, 15, 16, 17,
          0x00ffffff & m, 0x00800000 & m, 0x7fff, 0x8000, 0xffff, 0x10000 & m, 0x12345678 & m]
  v = rng.integers(0, 1 << w, n, dtype=np.uint64).astype(U32)
  v[:len(edge)] = edge
  return v


def _shuffle(v: np.ndarray, k: int) -> np.ndarray:
  """Another column of the same pool: edge values meet other edge values (combinations across fibers)."""
  return np.roll(v, 7 * k + 3) if k % 2 else np.roll(v[::-1], k)


class Operands:
  """Per fiber, 16 dwords loaded into r1.x..r4.w: f32 a, b, c (r1.xyz), i32 a, b, c (r2.xyz), f16 in both halves of
  r3.x (hr6.x, hr6.y) and r3.y (hr6.z, hr6.w), i16 likewise in r3.z/r3.w (hr7.x..hr7.w), and spare rows."""

  def __init__(self, seed: int):
    rng = np.random.default_rng(seed)
    f32, i32 = _fpool(32, rng), _ipool(32, rng)
    f16, i16 = _fpool(16, rng), _ipool(16, rng)
    self.words = np.zeros((NF, 16), U32)
    self.words[:, 0:3] = np.stack([_shuffle(f32, k) for k in range(3)], 1)
    self.words[:, 3] = rng.integers(0, 1 << 32, NF, dtype=np.uint64).astype(U32)
    self.words[:, 4:7] = np.stack([_shuffle(i32, k) for k in range(3)], 1)
    self.words[:, 7] = rng.integers(0, 1 << 32, NF, dtype=np.uint64).astype(U32)
    h = np.stack([_shuffle(f16, k) for k in range(4)], 1)
    g = np.stack([_shuffle(i16, k) for k in range(4)], 1)
    self.words[:, 8] = h[:, 0] | h[:, 1] << 16
    self.words[:, 9] = h[:, 2] | h[:, 3] << 16
    self.words[:, 10] = g[:, 0] | g[:, 1] << 16
    self.words[:, 11] = g[:, 2] | g[:, 3] << 16
    self.words[:, 12:16] = rng.integers(0, 1 << 32, (NF, 4), dtype=np.uint64).astype(U32)

  def full(self, row: int) -> np.ndarray:
    return self.words[:, row - 4]  # r1.x is row 4

  def half(self, h: int) -> np.ndarray:
    w = self.full(h // 2)
    return (w >> U32(16)) if h & 1 else (w & U32(0xffff))


def rname(n: int) -> str:
  return f"r{n // 4}.{'xyzw'[n % 4]}"


def hname(n: int) -> str:
  return f"hr{n // 4}.{'xyzw'[n % 4]}"


def _f16_of_f32(bits) -> np.ndarray:
  with np.errstate(all="ignore"):
    return np.asarray(bits, U32).view(np.float32).astype(np.float16).view(np.uint16).astype(U32)


def _flut_bits(i: int, w: int) -> int:
  return int(np.array(FLUT_V[i], np.float32 if w == 32 else np.float16).view(U32 if w == 32 else np.uint16))


def _mod(v: np.ndarray, kind: str | None, neg: bool, ab: bool, w: int) -> np.ndarray:
  """What (neg)/(abs) make of the value (the text's meaning): float sign bit, two's complement, bitwise not."""
  m = (1 << w) - 1
  v = v.astype(np.int64) & m
  if kind == "f":
    s = 1 << (w - 1)
    v = v & ~s if ab else v
    v = v ^ s if neg else v
  elif kind == "i":
    x = np.where(v >> (w - 1) & 1, v - (1 << w), v)
    x = np.abs(x) if ab else x
    v = (-x if neg else x) & m
  elif kind == "b" and neg:
    v = ~v & m
  return v.astype(U32)


class Src:
  """One source as the text names it, and its value per fiber as the instruction sees it."""

  def __init__(self, text: str, value: np.ndarray):
    self.text, self.value = text, value


# ------------------------------------------------------------------------------------------------ expectations
def pcode(key: str, srcs: list[np.ndarray]) -> np.ndarray:
  """The key's body (oracle-checked in tests/pcode/test_ir3_semantics.py) on these operand values: D0's 32 bits."""
  sem = semantics("ir3", key)
  st = {f"S{i}": np.asarray(v, U32)[None, :] for i, v in enumerate(srcs) if f"S{i}" in sem.inputs}
  for nm in sem.inputs:
    st.setdefault(nm, np.zeros((1, NF), U32))
  out = sem(st, exec=np.ones((1, NF), bool))["D0"]
  return np.broadcast_to(np.asarray(out).astype(np.uint64), (1, NF))[0].astype(U32)


NP = {16: np.float16, 32: np.float32}
DEFNAN = {16: 0x7e00, 32: 0x7fc00000}


def _fbits(x: np.ndarray, w: int) -> np.ndarray:
  with np.errstate(all="ignore"):
    b = x.astype(NP[w]).view(np.uint16 if w == 16 else U32).astype(U32)
  return np.where(np.isnan(x.astype(np.float64)), U32(DEFNAN[w]), b)


def oracle(key: str, srcs: list[np.ndarray]) -> np.ndarray | None:
  """An independent reference where one exists: numpy IEEE add/mul/mad (product rounded, then the sum) with the
  default NaN and the (sat) clamp; Python integers (_int_oracle) for the plain integer ops. None: use the pcode."""
  r, g = P.row(key)
  op, half, sat = g["op"], bool(g.get("prec")), bool(g.get("sat"))
  if g.get("conv"):
    return None
  if op in ("add.f", "mul.f", "mad.f32", "mad.f16"):
    w = 16 if half or op == "mad.f16" else 32
    T = NP[w]
    x = [np.asarray(s, U32).astype(np.uint16 if w == 16 else U32).view(T) for s in srcs]
    with np.errstate(all="ignore"):
      v = x[0] + x[1] if op == "add.f" else x[0] * x[1] if op == "mul.f" else (x[0] * x[1]).astype(T) + x[2]
      v = v.astype(T)
      if sat:
        v = np.where(np.isnan(v) | (v <= 0), T(0), np.minimum(v, T(1))).astype(T)
    return _fbits(v, w)
  if not sat and op in ("add.u", "add.s", "sub.u", "sub.s", "min.u", "max.u", "min.s", "max.s", "and.b", "or.b",
                        "xor.b", "not.b", "shl.b", "shr.b", "ashr.b", "getbit.b", "absneg.s", "bfrev.b", "cbits.b",
                        "clz.b", "clz.s"):
    w = 16 if half else 32
    m = (1 << w) - 1
    b = srcs[1] if len(srcs) > 1 else np.zeros(NF, U32)
    return np.array([_int_oracle(op, w, int(p) & m, int(q) & m) for p, q in zip(srcs[0], b)], U32)
  return None


# ------------------------------------------------------------------------------------------------ kernels
class Kernel:
  """Cases run one after another by every fiber, four to a group: the group's rows r5.x..r5.w are loaded with SENT
  (binding 2), each case writes its slot (`{D}`: r5.<slot>; `{H}`: hr10.<2 slot + hi>, the low or high half of that
  row), and the four rows are stored to out[fiber, case]. `raw` cases run their own text and store the rows they
  name."""

  def __init__(self, ops: Operands, arch: str):
    self.ops, self.arch, self.consts = ops, arch, {}
    self.groups: list[list] = []  # [(text, slot)] groups, or ("raw", text, rows)
    self.want, self.names = [], []
    self.rejected: list[str] = []  # forms the assembler does not accept

  def accepts(self, text: str) -> bool:
    try:
      assemble(text.format(D="r5.x", H="hr10.x") + "\nend\n", self.arch)
      return True
    except GputwinError:
      self.rejected.append(text)
      return False

  def const(self, word: int) -> str:
    """A const dword of its own (from c4.x on) holding `word`."""
    idx = 16 + len(self.consts)
    self.consts[idx] = int(word) & 0xffffffff
    return f"c{idx // 4}.{'xyzw'[idx % 4]}"

  def add(self, name: str, text: str, res: np.ndarray, hi: int | None = None) -> None:
    """One case: `text` with {D} (a full destination) or {H} (a half one, `hi` the half) and its 32/16-bit result."""
    if not self.groups or self.groups[-1] and self.groups[-1][0] == "raw" or len(self.groups[-1]) == 4:
      self.groups.append([])
    slot = len(self.groups[-1])
    if hi is None:
      want, text = res, text.replace("{D}", rname(20 + slot))
    else:
      res = np.asarray(res, U32) & U32(0xffff)
      want = (U32(SENT) & U32(0xffff)) | res << U32(16) if hi else (U32(SENT) & U32(0xffff0000)) | res
      text = text.replace("{H}", hname(40 + 2 * slot + hi))
    self.groups[-1].append(text)
    self.want.append(np.asarray(want, U32))
    self.names.append(f"{name}: {text}")

  def raw(self, name: str, text: str, rows: list[int], want: list[np.ndarray]) -> None:
    """A case with its own text (run after r5.x..r5.w and r6.x..r6.w hold SENT); stores `rows`."""
    self.groups.append(("raw", text, rows))
    self.want += [np.asarray(w, U32) for w in want]
    self.names += [f"{name} [{rname(r)}]: {text}" for r in rows]

  def text(self) -> str:
    out = [GID, "mul.u24 r0.y, r0.w, c0.x\nsub.u r0.y, r0.y, 4\nshl.b r0.z, r0.w, 4\nmov.u32u32 r0.x, 0\n"]
    for i in range(4):
      out.append("add.u r0.z, r0.z, 4\n" if i else "")
      out.append(LD.format(d=rname(4 + 4 * i), c="r0.z"))
    for g in self.groups:
      out.append(LD.format(d="r5.x", c="r0.x").replace(", 0\n", ", 2\n"))
      out.append(LD.format(d="r6.x", c="r0.x").replace(", 0\n", ", 2\n"))
      out.append("(sy)nop\n")
      if g and g[0] == "raw":
        out.append(g[1] + "\n")
        for r in g[2]:
          out.append(f"(ss)add.u r0.y, r0.y, 4\nstib.b.untyped.1d.u32.1.imm.base0 {rname(r)}, r0.y, 1\n"
                     "sub.u r0.y, r0.y, 3\n")
        continue
      out += [t + "\n" for t in g]
      out.append(f"(ss)add.u r0.y, r0.y, 4\nstib.b.untyped.1d.u32.{len(g)}.imm.base0 r5.x, r0.y, 1\n")
      if len(g) < 4:
        out.append(f"sub.u r0.y, r0.y, {4 - len(g)}\n")
    return "".join(out) + "end\n"

  def run(self, arch: str, checks: bool) -> np.ndarray:
    nc = len(self.names)
    o = np.zeros((NF, nc), U32)
    words = [nc, 0, 0, 0] + [0] * 12 + [0] * (-(-len(self.consts) // 4) * 4)
    for i, v in self.consts.items():
      words[i] = v
    consts = tuple((j, tuple(words[j:j + 4])) for j in range(0, len(words), 4))
    code = assemble(self.text(), arch)
    sh = listing.Shader.explicit(arch, code, local_size=(64, 1, 1), wave_size=64, consts=consts)
    launch(code, "main", grid=(NW,), args={0: self.ops.words.copy(), 1: o, 2: np.full(8, SENT, U32)}, arch=arch,
           shader=sh, checks=checks)
    return o.T

  def check(self, arch: str, monkeypatch) -> int:
    """Both tiers agree bit for bit and with the expected values; returns the number of cases checked."""
    monkeypatch.setenv("GPUTWIN_JIT", "0")
    got = self.run(arch, True)
    monkeypatch.setenv("GPUTWIN_JIT", "1")
    monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1")
    nat = self.run(arch, False)
    diff = [self.names[i] for i in range(len(self.names)) if not np.array_equal(got[i], nat[i])]
    assert not diff, f"interpreter and native tier differ on {len(diff)} cases: {diff[:8]}"
    bad = []
    for i, nm in enumerate(self.names):
      if not np.array_equal(got[i], self.want[i]):
        j = int(np.argmax(got[i] != self.want[i]))
        bad.append(f"{nm}: fiber {j} got {int(got[i][j]):#x} want {int(self.want[i][j]):#x} "
                   f"(operands {' '.join(hex(int(x)) for x in self.ops.words[j, :12])})")
    assert not bad, f"{len(bad)} of {len(self.names)} cases wrong:\n" + "\n".join(bad[:20])
    return len(self.names)


# ------------------------------------------------------------------------------------------------ ALU keys
def alu_keys() -> list[str]:
  out = []
  for k in P.keys():
    r, g = P.row(k)
    if not r.cite.startswith((P.C2, P.C3, P.C4)):
      continue
    sem = semantics("ir3", k)
    if sem.mem or sem.calls or "PC" in sem.outputs:
      continue
    out.append(k)
  return out


def _shape(key: str):
  """(mnemonic, number of sources, half sources, half destination, float operands, cat)."""
  r, g = P.row(key)
  op = g["op"]
  cat = 2 if r.cite.startswith(P.C2) else 3 if r.cite.startswith(P.C3) else 4
  n = len([s for s in ("S0", "S1", "S2") if s in semantics("ir3", key).inputs])
  half = bool(g.get("prec")) or cat == 3 and op.endswith("16") and not op.startswith("madsh")
  flt = op.endswith(".f") or op in P._SFU or op.startswith(("mad.f", "sel.f"))
  mn = op + (f".{g['cond']}" if g.get("cond") else "")
  if op in ("dp2acc", "dp4acc"):
    mn = f"{op}.{g['sign']}.{g.get('pack', 'low')}"
  return mn, n, half, half != bool(g.get("conv")), flt, cat


def _reg_src(ops: Operands, half: bool, flt: bool, i: int) -> Src:
  """Source i from the operand rows: full f32 r1.x.. / i32 r2.x..; half f16 hr6.x, hr6.y, hr6.z (both halves of
  r3.x, then r3.y) / i16 hr7.x...; a 1-source op reads the high half (hr6.y) when `i` is odd."""
  if half:
    h = (24 if flt else 28) + i
    return Src(hname(h), ops.half(h))
  n = (4 if flt else 8) + i
  return Src(rname(n), ops.full(n))


def _alu_cases(kern: Kernel, key: str, j: int) -> None:
  """The forms of one key: registers; a const source; an immediate (integer, or the float lookup table); (neg)/(abs)
  (cat3: (neg)); the destination in the low or the high half of r5.x / in r5.x."""
  ops = kern.ops
  mn, n, half, hdst, flt, cat = _shape(key)
  g = P.row(key)[1]
  kind = P.modifier(key)
  w = 16 if half else 32
  m = (1 << w) - 1
  sat = "(sat)" if g.get("sat") else ""
  forms = [("regs", [_reg_src(ops, half, flt, i + (j & 1 if n == 1 else 0)) for i in range(n)])]
  # a const source: cat2/cat4 the last one, cat3 src1 (cat3's src2 is always a register)
  ci = 0 if cat == 3 else n - 1
  cw = int(ops.words[(j * 5) % 24, ci % 3 if flt else 4 + ci % 3]) if not half else \
      int(_fpool(32, np.random.default_rng(j))[j % 24]) if flt else (0x1234_0000 | (j * 0x1111) & 0xffff)
  cname = kern.const(cw)
  cval = np.full(NF, cw, U32)
  cval = _f16_of_f32(cval) if half and flt else cval & U32(m)
  srcs = list(forms[0][1])
  srcs[ci] = Src(("h" if half else "") + cname, cval)
  forms.append(("const", srcs))
  if cat != 3:  # immediates (cat3 takes them only in its shift/and-group forms)
    srcs = list(forms[0][1])
    if flt:
      fi = j % 12
      srcs[n - 1] = Src(("h" if half else "") + f"({FLUT[fi]})", np.full(NF, _flut_bits(fi, w), U32))
    else:
      iv = (j * 37 % 61) - 30
      srcs[n - 1] = Src(f"h({iv})" if half else str(iv), np.full(NF, iv & m, U32))
    forms.append(("immed", srcs))
  elif g["op"] in P._ALT:
    srcs = list(forms[0][1])
    srcs[0] = Src(str(j % w), np.full(NF, j % w, U32))
    srcs[2] = Src(str(0x3f0 + j), np.full(NF, 0x3f0 + j, U32))
    forms.append(("immed", srcs))
  if kind is not None:  # modifiers on register sources (and on the const form's)
    for fname, base in (("mod-regs", forms[0][1]), ("mod-const", forms[1][1])):
      srcs = []
      for i, s in enumerate(base):
        neg = i % 2 == 0 if cat != 3 else i != 1
        ab = i % 2 == 1 and cat != 3 and kind != "b"
        if cat == 3 and i == 1:
          neg = False
        pre = ("(neg)" if neg else "") + ("(abs)" if ab else "")
        srcs.append(Src(pre + s.text, _mod(s.value, kind, neg, ab, w)))
      forms.append((fname, srcs))
  for fi, (fname, srcs) in enumerate(forms):
    hi = (j + fi) & 1
    text = f"{sat}{mn} {'{H}' if hdst else '{D}'}, " + ", ".join(s.text for s in srcs)
    if not kern.accepts(text) or not flt and fname == "immed" and _flut_encoded(text, kern.arch):
      continue
    vals = [s.value for s in srcs]
    ref = oracle(key, vals)
    kern.add(f"{key} {fname}", text, pcode(key, vals) if ref is None else ref, hi if hdst else None)


def _flut_encoded(text: str, arch: str) -> bool:
  """Whether the assembler encoded an integer immediate as a float-table index (see test_integer_immediate_...)."""
  from gputwin.isa.ir3 import Operand, decode
  i = decode(assemble(text.format(D="r5.x", H="hr10.x") + "\nend\n", arch), arch)
  return any(isinstance(o, Operand) and "flut" in o.bitset for o in i.fields.values())


@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("part", range(4))
def test_alu_keys(arch, part, monkeypatch):
  """Every cat2/cat3/cat4 key in full and half precision, (sat) and DST_CONV forms, all source kinds."""
  keys = [k for k in alu_keys() if not k.startswith(("dp2acc", "dp4acc"))]  # (the assembler rejects their text)
  keys = keys[part::4]
  kern = Kernel(Operands(11 + part), arch)
  for j, k in enumerate(keys):
    _alu_cases(kern, k, j * 4 + part)
  assert len(kern.rejected) < len(kern.names) // 8, kern.rejected
  assert kern.check(arch, monkeypatch) > 100


@pytest.mark.parametrize("arch", GPUS)
def test_integer_immediate_encoded_as_flut(arch, monkeypatch):
  """absneg.s with a full immediate source and a half destination (DST_CONV): the low 16 bits of 20 (the integer
  immediate: the assembler no longer picks a float-table index past the table, and the binding rejects one)."""
  assert not _flut_encoded("absneg.s {H}, 20", arch)
  kern = Kernel(Operands(5), arch)
  kern.add("absneg.s.conv immed", "absneg.s {H}, 20", np.full(NF, 20, U32), 1)
  kern.check(arch, monkeypatch)


# ------------------------------------------------------------------------------------------------ cat1
TYPES = P.TYPES
ROUNDS = (None, "even", "pos_infinity", "neg_infinity")


def _cov_src(ops: Operands, t: str, j: int) -> Src:
  """A register holding a value of type t: f32 r1.x/r1.y, 32-bit integers r2.x/r2.y, f16 hr6.x/hr6.y, 16-bit
  integers hr7.x/hr7.y (j picks the register, the low or the high half)."""
  if t == "f32":
    return Src(rname(4 + j % 2), ops.full(4 + j % 2))
  if t in ("u32", "s32"):
    return Src(rname(8 + j % 2), ops.full(8 + j % 2))
  h = (24 if t == "f16" else 28) + j % 2
  return Src(hname(h), ops.half(h))


def _cov_oracle(st: str, dt: str, rnd, v: np.ndarray) -> np.ndarray | None:
  """numpy / Python integers: copies, integer extension and narrowing, float widening, nearest-even float narrowing
  and integer -> float, toward-zero float -> integer (saturating, NaN -> 0). None: the pcode body."""
  ws, wd = int(st[1:]), int(dt[1:])
  v = np.asarray(v, np.uint64) & np.uint64((1 << ws) - 1)
  if st == dt:
    return v.astype(U32)
  if st[0] != "f" and dt[0] != "f":
    x = np.where(v >> np.uint64(ws - 1) & np.uint64(1), v.astype(np.int64) - (1 << ws), v.astype(np.int64)) \
        if st[0] == "s" else v.astype(np.int64)
    return (x & ((1 << wd) - 1)).astype(U32)
  if st[0] != "f":  # integer -> float: exact in f64, one rounding to nearest even
    if rnd != "even":
      return None
    x = v.astype(np.int64)
    x = np.where(x >> (ws - 1) & 1, x - (1 << ws), x) if st[0] == "s" else x
    with np.errstate(over="ignore"):
      return _fbits(x.astype(np.float64).astype(NP[wd]), wd)
  f = v.astype(np.uint16 if ws == 16 else U32).view(NP[ws])
  if dt[0] == "f":
    if wd > ws:
      return _fbits(f.astype(np.float32), 32)
    with np.errstate(all="ignore"):
      return _fbits(np.asarray(f, np.float32).astype(np.float16), 16) if rnd == "even" else None
  if rnd is not None:
    return None
  lo, hi = (0, (1 << wd) - 1) if dt[0] == "u" else (-(1 << (wd - 1)), (1 << (wd - 1)) - 1)
  with np.errstate(all="ignore"):
    x = np.trunc(f.astype(np.float64))
  r = np.where(np.isnan(x), 0, np.clip(np.nan_to_num(x, posinf=hi, neginf=lo), lo, hi)).astype(np.int64)
  return (r & ((1 << wd) - 1)).astype(U32)


@pytest.mark.parametrize("arch", GPUS)
def test_cat1_mov_cov_every_type_pair_and_rounding(arch, monkeypatch):
  """mov.<t><t> and cov.<src><dst> for the six #type values and the four #round modes, from registers (both halves
  of a merged row), consts and immediates, into full registers or either half of a row."""
  kern = Kernel(Operands(21), arch)
  j = 0
  for st in TYPES:
    for dt in TYPES:
      for rnd in (ROUNDS if st != dt else (None,)):
        for form in ("reg", "const") if rnd is None else ("reg",):
          j += 1
          if form == "const":
            w = int(kern.ops.words[j % NF, 0 if st == "f32" else 4]) if st[1:] == "32" else \
                int(kern.ops.half(24 if st == "f16" else 28)[j % NF]) | 0xabcd0000
            src = Src(("h" if st[1:] == "16" else "") + kern.const(w), np.full(NF, w & ((1 << int(st[1:])) - 1), U32))
          else:
            src = _cov_src(kern.ops, st, j)
          hd = dt[1:] == "16"
          mn = f"mov.{st}{dt}" if st == dt else f"cov.{st}{dt}"
          text = f"{mn} {f'({rnd})' if rnd else ''}{'{H}' if hd else '{D}'}, {src.text}"
          if not kern.accepts(text):
            continue
          k = P.cov_key(st, dt, f"({rnd})" if rnd else "")
          ref = _cov_oracle(st, dt, rnd, src.value)
          kern.add(k, text, pcode(k, [src.value]) if ref is None else ref, j & 1 if hd else None)
  for t, v in (("u32u32", 0xdeadbeef), ("s32s32", -7), ("f16f16", "h(0.500000)"), ("s16s16", -1),
               ("f32f32", "(2.000000)"), ("u16u16", "4660")):
    want = {"h(0.500000)": 0x3800, "(2.000000)": 0x40000000, "4660": 0x1234}.get(v, v)
    hd = t.endswith("16")
    text = f"mov.{t} {'{H}' if hd else '{D}'}, {v if isinstance(v, str) else hex(v) if v > 0 else v}"
    if kern.accepts(text):
      kern.add(f"mov.{t} immed", text, np.full(NF, int(want) & (0xffff if hd else 0xffffffff), U32), 1 if hd else None)
  assert len(kern.rejected) == 0, kern.rejected
  assert kern.check(arch, monkeypatch) > 150


# ------------------------------------------------------------------------------------------------ (rptN), a0.x
def _f32add(a, b) -> np.ndarray:
  with np.errstate(all="ignore"):
    return _fbits(np.asarray(a, U32).view(np.float32) + np.asarray(b, U32).view(np.float32), 32)


def _f16add(a, b) -> np.ndarray:
  x, y = (np.asarray(v, U32).astype(np.uint16).view(np.float16) for v in (a, b))
  with np.errstate(all="ignore"):
    return _fbits(x + y, 16)


@pytest.mark.parametrize("arch", GPUS)
def test_repeat_and_relative_addressing(arch, monkeypatch):
  """(rptN) steps the destination and the (r) sources by one register (half registers by halves), the rest stay;
  r<a0.x + n>, hr<a0.x + n> and c<a0.x + n> read the register / half / const dword a0.x + n of each fiber (a0.x set by
  `mova` from gid & 3); `mov r<a0.x + n>, src` writes only that register. Rows past the destination keep SENT."""
  ops = Operands(31)
  kern = Kernel(ops, arch)
  f, S = ops.full, np.full(NF, SENT, U32)
  lo, hi16 = U32(0xffff), U32(0xffff0000)
  kern.raw("rpt3 add.f", "(rpt3)add.f r5.x, (r)r1.x, r1.y", [20, 21, 22, 23, 24],
           [_f32add(f(4 + i), f(5)) for i in range(4)] + [S])
  with np.errstate(all="ignore"):
    kern.raw("rpt1 mul.f both (r)", "(rpt1)mul.f r5.y, (r)r1.x, (r)r1.z", [20, 21, 22, 23], [S] + [
        _fbits(f(4 + i).view(np.float32) * f(6 + i).view(np.float32), 32) for i in range(2)] + [S])
  h = ops.half
  kern.raw("rpt2 add.f half", "(rpt2)add.f hr10.y, (r)hr6.x, hr6.z", [20, 21, 22], [
      (S & lo) | _f16add(h(24), h(26)) << U32(16), _f16add(h(25), h(26)) | _f16add(h(26), h(26)) << U32(16),
      S])
  c = [kern.const(0x11110000 + 0x1111 * i) for i in range(6)]
  cw = [kern.consts[16 + i] for i in range(6)]
  kern.raw("rpt1 mov (r)const", f"(rpt1)mov.u32u32 r5.z, (r){c[0]}", [21, 22, 23, 24],
           [S, np.full(NF, cw[0], U32), np.full(NF, cw[1], U32), S])
  kern.raw("rpt3 mov.u32u32 immed", "(rpt3)mov.u32u32 r5.x, 7", [20, 21, 22, 23, 24], [np.full(NF, 7, U32)] * 4 + [S])
  gid = np.arange(NF)
  a0 = gid & 3
  seta0 = "and.b r7.x, r0.w, 3\nmova a0.x, hr14.x\n"
  rows = np.stack([f(4 + i) for i in range(12)], 0)
  kern.raw("mov r<a0.x + 4>", seta0 + "mov.u32u32 r5.x, r<a0.x + 4>", [20], [rows[a0, gid]])
  kern.raw("add.f r<a0.x + 8>", seta0 + "add.f r5.y, r1.x, r<a0.x + 8>", [21], [_f32add(f(4), rows[4 + a0, gid])])
  base = int(c[0][1:].split(".")[0]) * 4
  kern.raw("mov c<a0.x + n>", seta0 + f"mov.u32u32 r5.z, c<a0.x + {base}>", [22],
           [np.array(cw, U32)[a0]])
  halves = np.stack([h(24 + i) for i in range(4)], 0)
  kern.raw("mov hr<a0.x + 24>", seta0 + "mov.u16u16 hr10.y, hr<a0.x + 24>", [20],
           [(S & lo) | halves[a0, gid] << U32(16)])
  want = [np.where(a0 == i, f(4), S) for i in range(4)] + [S]
  kern.raw("mov r<a0.x + 20> (destination)", seta0 + "mov.u32u32 r<a0.x + 20>, r1.x", [20, 21, 22, 23, 24], want)
  wantf = [np.where(a0 == i, _f32add(f(4), f(5)), S) for i in range(4)]
  kern.raw("(rpt0) add.f into r<a0.x + 20>", seta0 + "add.f r7.y, r1.x, r1.y\nmov.f32f32 r<a0.x + 20>, r7.y",
           [20, 21, 22, 23], wantf)
  hw = [np.where(a0 == 0, (S & hi16) | h(25), np.where(a0 == 1, (S & lo) | h(25) << U32(16), S)),
        np.where(a0 == 2, (S & hi16) | h(25), np.where(a0 == 3, (S & lo) | h(25) << U32(16), S))]
  kern.raw("mov hr<a0.x + 40> (destination)", seta0 + "mov.u16u16 hr<a0.x + 40>, hr6.y", [20, 21], hw)
  assert not kern.rejected, kern.rejected
  kern.check(arch, monkeypatch)
