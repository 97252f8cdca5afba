"""Hand-written ir3 assembly (Mesa's disassembly syntax, assembled by gputwin.isa.ir3) run on the emulator over the
interpreter (every checker on) and the native tier (GPUTWIN_JIT=1, compiling from the first lane), on a630 (gen 6) and
a730 (gen 7), checked against numpy: const-file operands, shared memory with barriers, divergent loops with (jp) joins,
IBO and shared atomics, a tiled f32 matmul, merged half registers, (rptN)/(r) repetition, predt/predf/prede. Bad
programs (an undecodable word, a branch out of the shader, out-of-bounds IBO/global accesses, a runaway loop) raise
gputwin.errors naming target, PC and instruction, and the next launch still works."""
import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.errors import DecodeError, EmuCheckError, EmuError, EmuFault, GputwinError
from gputwin.isa.ir3 import assemble, listing

GPUS = ("a630", "a730")
M32 = 0xffffffff
GID = "shl.b r0.w, r48.x, 6\nadd.u r0.w, r0.w, r0.x\n"  # r0.w = global id (local size 64: wg << 6 | local id)
LD = "ldib.b.untyped.1d.u32.{n}.imm.base0 {d}, {c}, {b}\n"  # n dwords at dword index c of binding b
ST = "stib.b.untyped.1d.u32.{n}.imm.base0 {s}, {c}, {b}\n"


def _run(text: str, arch: str, grid, args: dict, checks: bool, **facts):
  code = assemble(text, arch)
  sh = listing.Shader.explicit(arch, code, **facts)
  return launch(code, "main", grid=grid, args=args, arch=arch, shader=sh, checks=checks)


def _rng(seed=1):
  return np.random.default_rng(seed)


def _f32(v) -> int:
  return int(np.float32(v).view(np.uint32))


# ------------------------------------------------------------------------------------------------ kernels
def saxpy(arch):
  """y[i] = a*x[i] + y[i] for i < n, a = c0.x (f32 bits) and n = c0.y from the const file; mad.f32 rounds the
  product, then the sum. Fibers past n are switched off by predt."""
  n, a = 200, np.float32(1.75)
  x = _rng().standard_normal(256).astype(np.float32)
  y = _rng(2).standard_normal(256).astype(np.float32)
  ref = y.copy()
  ref[:n] = (a * x[:n]).astype(np.float32) + y[:n]
  text = (GID + "cmps.u.lt p0.x, r0.w, c0.y\npredt\n" + LD.format(n=1, d="r1.x", c="r0.w", b=0) +
          LD.format(n=1, d="r1.y", c="r0.w", b=1) + "(sy)mad.f32 r1.x, c0.x, r1.x, r1.y\n" +
          ST.format(n=1, s="r1.x", c="r0.w", b=1) + "prede\nend\n")
  facts = dict(consts=((0, (_f32(a), n, 0, 0)),))
  return text, (4,), {0: x, 1: y}, facts, lambda: np.testing.assert_array_equal(y, ref)


def _reduce(wave):
  def reduce(arch):
    """o[g] = tree sum over 128 floats in shared memory: s[l] += s[l + stride] for l < stride, stride 64..1, a
    uniform loop with `bar` between steps (2 waves of a workgroup on wave64, one on wave128)."""
    g = 3
    v = _rng(3).standard_normal(128 * g).astype(np.float32)
    o = np.zeros(g, np.float32)
    s = v.reshape(g, 128).copy()
    stride = 64
    while stride:
      s[:, :stride] = s[:, :stride] + s[:, stride:2 * stride]
      stride //= 2
    text = ("shl.b r0.w, r0.x, 2\nshl.b r1.x, r48.x, 7\nadd.u r1.x, r1.x, r0.x\n" +
            LD.format(n=1, d="r1.y", c="r1.x", b=0) + "(sy)stl.u32 l[r0.w], r1.y, 1\n(ss)bar\n"
            "mov.u32u32 r3.x, 64\n"
            "loop:\n"
            "cmps.u.lt p0.x, r0.x, r3.x\nshl.b r3.y, r3.x, 2\nadd.u r3.y, r3.y, r0.w\n"
            "predt\nldl.u32 r2.x, l[r3.y], 1\nldl.u32 r2.y, l[r0.w], 1\n(ss)add.f r2.x, r2.y, r2.x\n"
            "stl.u32 l[r0.w], r2.x, 1\nprede\n(ss)bar\n"
            "shr.b r3.x, r3.x, 1\ncmps.u.gt p0.x, r3.x, 0\nbr p0.x, #loop\n"
            "cmps.u.eq p0.x, r0.x, 0\npredt\nldl.u32 r2.z, l[r0.w], 1\n(ss)mov.u32u32 r2.w, r48.x\n" +
            ST.format(n=1, s="r2.z", c="r2.w", b=1) + "prede\nend\n")
    facts = dict(local_size=(128, 1, 1), wave_size=wave, shared_size=512)
    return text, (g,), {0: v, 1: o}, facts, lambda: np.testing.assert_array_equal(o, s[:, 0])
  reduce.__name__ = f"reduce_w{wave}"
  return reduce


# after r1.x is loaded: a loop whose trip count is per fiber (r1.x & 15) with a data-dependent if/else inside
# (br / jump, (jp) at both joins), acc in r2.y, iterations in r2.x; the caller's code follows at `done:` (a join)
LOOP = ("(sy)and.b r1.y, r1.x, 15\nmov.u32u32 r2.x, 0\nmov.u32u32 r2.y, r1.x\n"
        "top:\n"
        "cmps.u.ge p0.x, r2.x, r1.y\nbr p0.x, #done\n"
        "and.b r2.z, r2.y, 1\ncmps.u.eq p0.x, r2.z, 0\nbr p0.x, #even\n"
        "shl.b r2.w, r2.y, 1\nadd.u r2.y, r2.y, r2.w\nadd.u r2.y, r2.y, r2.x\njump #next\n"
        "even:\n(jp)shr.b r2.y, r2.y, 1\nxor.b r2.y, r2.y, r2.x\n"
        "next:\n(jp)add.u r2.x, r2.x, 1\njump #top\n")


def divergent_loop(arch):
  """A loop whose trip count is per fiber (x & 15) with a data-dependent if/else inside (br / jump, (jp) at both
  joins): odd acc -> 3*acc + k, even acc -> (acc >> 1) ^ k. o[2i] = acc, o[2i+1] = iterations run."""
  n = 128
  x = _rng(4).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
  o = np.zeros(2 * n, np.uint32)
  ref = []
  for v in x.tolist():
    acc = v
    for k in range(v & 15):
      acc = (3 * acc + k) & M32 if acc & 1 else (acc >> 1) ^ k
    ref += [acc, v & 15]
  text = (GID + LD.format(n=1, d="r1.x", c="r0.w", b=0) + LOOP +
          "done:\n(jp)shl.b r0.w, r0.w, 1\nmov.u32u32 r3.x, r2.y\nmov.u32u32 r3.y, r2.x\n" +
          ST.format(n=2, s="r3.x", c="r0.w", b=1) + "end\n")
  return text, (n // 64,), {0: x, 1: o}, {}, lambda: np.testing.assert_array_equal(o, np.array(ref, np.uint32))


def atomics(arch):
  """Every fiber adds 1 to an IBO counter (atomic.b.add: old value to r1.x, the data tied in r1.y) and x[i] > 0 to a
  second one; and 1 to a shared counter of its workgroup (atomic.add.l; 128 fibers, 2 wave64 waves), which fiber 0
  zeroes before and reads after barriers. The totals are exact; the old values returned are a permutation of
  0..N-1 (per workgroup 0..127), and for the x[i] counter they chain: sorted, each is the previous plus its x."""
  g = 2
  N = 128 * g
  x = _rng(5).integers(1, 1 << 20, N).astype(np.uint32)
  cnt = np.array([0, 7, 0, 0], np.uint32)
  old, old2, lold = np.zeros(N, np.uint32), np.zeros(N, np.uint32), np.zeros(N, np.uint32)
  tot = np.zeros(g, np.uint32)
  text = ("shl.b r0.w, r48.x, 7\nadd.u r0.w, r0.w, r0.x\n" + LD.format(n=1, d="r3.y", c="r0.w", b=0) +
          "mov.u32u32 r2.x, 0\nmov.u32u32 r2.y, 1\nmov.u32u32 r2.z, 1\nmov.u32u32 r2.w, 0\n"
          "mov.u32u32 r1.y, 1\natomic.b.add.untyped.1d.u32.1.imm.base0 r1.x, r2.x, 1\n"
          "(sy)mov.u32u32 r3.x, r3.y\natomic.b.add.untyped.1d.u32.1.imm.base0 r3.x, r2.y, 1\n"
          "cmps.u.eq p0.x, r0.x, 0\npredt\nstl.u32 l[r2.w], r2.w, 1\nprede\n(ss)bar\n"
          "atomic.add.untyped.1d.u32.1.l r4.x, l[r2.w], r2.z\n(sy)(ss)bar\n"
          "cmps.u.eq p0.x, r0.x, 0\npredt\nldl.u32 r4.y, l[r2.w], 1\n(ss)mov.u32u32 r4.z, r48.x\n" +
          ST.format(n=1, s="r4.y", c="r4.z", b=4) + "prede\n(sy)nop\n" + ST.format(n=1, s="r1.x", c="r0.w", b=2) +
          ST.format(n=1, s="r4.x", c="r0.w", b=3) + ST.format(n=1, s="r3.x", c="r0.w", b=5) + "end\n")
  def check():
    total = 7 + int(x.astype(np.uint64).sum())
    assert cnt[0] == N and cnt[1] == total & M32 and cnt[2] == cnt[3] == 0, cnt
    np.testing.assert_array_equal(np.sort(old), np.arange(N, dtype=np.uint32))
    np.testing.assert_array_equal(np.sort(lold.reshape(g, 128), axis=1), np.tile(np.arange(128, dtype=np.uint32),
                                                                                   (g, 1)))
    np.testing.assert_array_equal(tot, np.full(g, 128, np.uint32))
    k = np.argsort(old2, kind="stable")
    chain = np.concatenate([[7], 7 + np.cumsum(x[k].astype(np.uint64))]).astype(np.uint32)
    np.testing.assert_array_equal(old2[k], chain[:-1])
  args = {0: x, 1: cnt, 2: old, 3: lold, 4: tot, 5: old2}
  return text, (g,), args, dict(local_size=(128, 1, 1), shared_size=16), check


def matmul(arch):
  """C = A @ B (32x64 @ 64x32, f32) in 16x16 tiles: 256 fibers (4 wave64 waves) stage a tile of A and of B in shared
  memory, `bar`, accumulate 16 mad.f32 each, `bar`, next tile. mad.f32 is not fused: the reference rounds the
  product, then the sum, in the same k order."""
  M, K, N = 32, 64, 32
  A = _rng(6).standard_normal((M, K)).astype(np.float32)
  B = _rng(7).standard_normal((K, N)).astype(np.float32)
  C = np.zeros((M, N), np.float32)
  ref = np.zeros((M, N), np.float32)
  for k in range(K):
    ref = A[:, k:k + 1] * B[k:k + 1, :] + ref  # f32 * f32 rounds to f32, then the f32 sum rounds
  inner = "".join(f"ldl.u32 r5.x, l[r1.w{f'+{4 * k}' if k else ''}], 1\nldl.u32 r5.y, l[r2.x+{1024 + 64 * k}], 1\n"
                  f"(ss)mad.f32 r3.x, r5.x, r5.y, r3.x\n" for k in range(16))
  text = ("shl.b r1.x, r48.y, 4\nadd.u r1.x, r1.x, r0.y\nshl.b r1.y, r48.x, 4\nadd.u r1.y, r1.y, r0.x\n"
          "shl.b r1.z, r0.y, 4\nadd.u r1.z, r1.z, r0.x\nshl.b r1.z, r1.z, 2\nshl.b r1.w, r0.y, 6\n"
          "shl.b r2.x, r0.x, 2\nmov.u32u32 r2.y, 0\nmov.u32u32 r3.x, 0\n"
          "tile:\n"
          "shl.b r2.z, r1.x, 6\nadd.u r2.z, r2.z, r2.y\nadd.u r2.z, r2.z, r0.x\n"
          "add.u r2.w, r2.y, r0.y\nshl.b r2.w, r2.w, 5\nadd.u r2.w, r2.w, r1.y\n" +
          LD.format(n=1, d="r4.x", c="r2.z", b=0) + LD.format(n=1, d="r4.y", c="r2.w", b=1) +
          "(sy)stl.u32 l[r1.z], r4.x, 1\nstl.u32 l[r1.z+1024], r4.y, 1\n(ss)bar\n" + inner +
          "bar\nadd.u r2.y, r2.y, 16\ncmps.u.lt p0.x, r2.y, 64\nbr p0.x, #tile\n"
          "shl.b r2.z, r1.x, 5\nadd.u r2.z, r2.z, r1.y\n" + ST.format(n=1, s="r3.x", c="r2.z", b=2) + "end\n")
  facts = dict(local_size=(16, 16, 1), shared_size=2048)
  return text, (N // 16, M // 16), {0: A, 1: B, 2: C}, facts, lambda: np.testing.assert_array_equal(C, ref)


def _f16_rz(x: np.ndarray) -> np.ndarray:
  """f32 -> f16 bits rounded toward zero: numpy's nearest-even result, one step toward zero where it grew."""
  h = x.astype(np.float16)
  return h.view(np.uint16) - (np.abs(h.astype(np.float32)) > np.abs(x)).astype(np.uint16)


def half_merged(arch):
  """Merged registers: hr4.x / hr4.y are the low / high halves of r2.x, hr4.z / hr4.w those of r2.y. f16(a) (cov
  (even): nearest even) and f16(b) (plain cov: ROUND=0, toward zero) written to hr4.x/.y are read back as r2.x; the
  f16 add/mul land in r2.y; hr6.y reads the high half of r3.x. (rpt1) on half registers steps by halves: hr6.z/.w
  (r3.y) = hr4.x + hr4.z, hr4.y + hr4.w; cov.f16f32 widens the sum (exact) into r3.z."""
  n = 64
  ab = (_rng(8).standard_normal((n, 2)) * 8).astype(np.float32)
  o = np.zeros((n, 8), np.uint32)
  ha, hb = ab[:, 0].astype(np.float16), _f16_rz(ab[:, 1]).view(np.float16)
  bits = lambda h: h.view(np.uint16).astype(np.uint32)
  hs, hp = ha + hb, ha * hb
  ref = np.stack([bits(ha) | bits(hb) << 16, bits(hs) | bits(hp) << 16, ab[:, 0].view(np.uint32) >> 16, bits(hb),
                  ab[:, 0].view(np.uint32), bits(ha + hs) | bits(hb + hp) << 16, hs.astype(np.float32).view(np.uint32),
                  np.zeros(n, np.uint32)], axis=1)
  text = (GID + "shl.b r1.w, r0.w, 1\n" + LD.format(n=2, d="r1.x", c="r1.w", b=0) +
          "(sy)cov.f32f16 (even)hr4.x, r1.x\ncov.f32f16 hr4.y, r1.y\nadd.f hr4.z, hr4.x, hr4.y\n"
          "mul.f hr4.w, hr4.x, hr4.y\nmov.u32u32 r3.x, r1.x\ncov.u16u32 r2.z, hr6.y\ncov.u16u32 r2.w, hr4.y\n"
          "(rpt1)add.f hr6.z, (r)hr4.x, (r)hr4.z\ncov.f16f32 r3.z, hr4.z\nmov.u32u32 r3.w, r48.x\n"
          "shl.b r0.w, r0.w, 3\nadd.u r1.z, r0.w, 4\n" + ST.format(n=4, s="r2.x", c="r0.w", b=1) +
          ST.format(n=4, s="r3.x", c="r1.z", b=1) + "end\n")
  return text, (1,), {0: ab, 1: o}, {}, lambda: np.testing.assert_array_equal(o, ref)


def repeat(arch):
  """(rptN): N+1 repetitions, each stepping the destination and the (r)-marked sources by one register; unmarked
  sources stay. (rpt3)add.f a+b, (rpt3)mul.f a*b.x, (rpt1)mov of c0.x/c0.y, (rpt1)mov of r0.x/r0.y (local id)."""
  n = 64
  a = _rng(9).standard_normal((n, 4)).astype(np.float32)
  b = _rng(10).standard_normal((n, 4)).astype(np.float32)
  o = np.zeros((n, 12), np.uint32)
  k = np.array([_f32(2.5), 0xdeadbeef], np.uint32)
  ref = np.concatenate([(a + b).view(np.uint32), (a * b[:, :1]).view(np.uint32), np.tile(k, (n, 1)),
                        np.stack([np.arange(n), np.zeros(n)], axis=1).astype(np.uint32)], axis=1)
  text = (GID + "shl.b r7.x, r0.w, 2\n" + LD.format(n=4, d="r1.x", c="r7.x", b=0) +
          LD.format(n=4, d="r2.x", c="r7.x", b=1) +
          "(sy)(rpt3)add.f r3.x, (r)r1.x, (r)r2.x\n(rpt3)mul.f r4.x, (r)r1.x, r2.x\n"
          "(rpt1)mov.f32f32 r5.x, (r)c0.x\n(rpt1)mov.u32u32 r5.z, (r)r0.x\n"
          "mov.u32u32 r6.x, 12\nmul.u24 r6.y, r0.w, r6.x\nadd.u r6.z, r6.y, 4\nadd.u r6.w, r6.y, 8\n" +
          ST.format(n=4, s="r3.x", c="r6.y", b=2) + ST.format(n=4, s="r4.x", c="r6.z", b=2) +
          ST.format(n=4, s="r5.x", c="r6.w", b=2) + "end\n")
  return text, (1,), {0: a, 1: b, 2: o}, dict(consts=((0, tuple(int(w) for w in k)),)), \
      lambda: np.testing.assert_array_equal(o, ref)


def predication(arch):
  """predt / predf / prede: o[i] = x < 100 ? x + 1000 : 2x (then and else regions); fibers with x < 100 also store
  x to t[i] inside the predt region (the others leave t[i] untouched); a predf-only region sets bit 31 of u[i] where
  x is odd, and after prede every fiber writes its u[i]."""
  n = 128
  x = _rng(11).integers(0, 200, n).astype(np.uint32)
  o, t, u = np.zeros(n, np.uint32), np.full(n, 0x5555, np.uint32), np.zeros(n, np.uint32)
  ref_o = np.where(x < 100, x + 1000, 2 * x).astype(np.uint32)
  ref_t = np.where(x < 100, x, 0x5555).astype(np.uint32)
  ref_u = (x | np.where(x & 1, 0x80000000, 0)).astype(np.uint32)
  text = (GID + LD.format(n=1, d="r1.x", c="r0.w", b=0) +
          "(sy)cmps.u.lt p0.x, r1.x, 100\nmov.u32u32 r2.x, 7\n"
          "predt\nadd.u r2.x, r1.x, 1000\n" + ST.format(n=1, s="r1.x", c="r0.w", b=2) +
          "predf\nshl.b r2.x, r1.x, 1\nprede\n" + ST.format(n=1, s="r2.x", c="r0.w", b=1) +
          "and.b r3.x, r1.x, 1\nmov.u32u32 r3.y, r1.x\ncmps.u.eq p0.x, r3.x, 0\n"
          "mov.u32u32 r3.z, 0x80000000\npredf\nor.b r3.y, r3.y, r3.z\nprede\n" +
          ST.format(n=1, s="r3.y", c="r0.w", b=3) + "end\n")
  def check():
    np.testing.assert_array_equal(o, ref_o)
    np.testing.assert_array_equal(t, ref_t)
    np.testing.assert_array_equal(u, ref_u)
  return text, (n // 64,), {0: x, 1: o, 2: t, 3: u}, {}, check


CASES = {f.__name__: f for f in (saxpy, _reduce(64), _reduce(128), divergent_loop, atomics, matmul, half_merged,
                                 repeat, predication)}


@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("tier", ["interp", "native"])
def test_asm_kernel(name, arch, tier, checks):
  text, grid, args, facts, check = CASES[name](arch)
  stats = _run(text, arch, grid, args, checks, **facts)
  check()
  assert stats.workgroups == int(np.prod(grid)) and stats.instructions > 0
  if tier == "native":  # (wave64 and wave128 alike)
    assert stats.native_instructions > 0, stats
  elif tier == "interp":
    assert stats.native_instructions == 0, stats


# ------------------------------------------------------------------------------------------------ bad programs
def _good(arch):
  """A saxpy launch after a failed one: the process and the emulator are fine."""
  text, grid, args, facts, check = saxpy(arch)
  _run(text, arch, grid, args, True, **facts)
  check()


def _where(e, arch, pc, inst):
  """The message names the target, the PC and the instruction; so do the exception's fields."""
  s = str(e)
  assert f"[{arch}]" in s and f"PC {pc:#x}" in s and inst in s, s
  assert e.arch == arch and e.pc == pc and (e.inst == inst or inst in s), (e.arch, e.pc, e.inst)


@pytest.mark.parametrize("arch", GPUS)
def test_undecodable_word(arch):
  """A word that decodes to nothing (`raw 0x...` in the text, or the same word in the bytes) stops the launch at its
  PC; the message names the word."""
  text = "mov.u32u32 r1.x, 0\nraw 0xffffffffffffffff\nend\n"
  code = assemble(text, arch)
  assert code[8:16] == b"\xff" * 8
  for c in (text, code):
    with pytest.raises(GputwinError) as ei:
      launch(c, "main", grid=(1,), args={}, arch=arch, shader=listing.Shader.explicit(arch, code), checks=True)
    assert isinstance(ei.value, (EmuError, DecodeError)), type(ei.value)
    _where(ei.value, arch, 8, "0xffffffffffffffff")
  _good(arch)


BRANCH_OUT = "mov.u32u32 r1.x, 0\njump #1000\nend\n"  # jump at PC 0x8 to 0x8 + 1000 * 8 = 0x1f48; code is 0x18 bytes


@pytest.mark.parametrize("arch", GPUS)
def test_branch_outside(arch):
  with pytest.raises(EmuError) as ei:
    _run(BRANCH_OUT, arch, (1,), {}, True)
  s = str(ei.value)  # the branch that would leave the shader is named, at its own PC
  assert f"[{arch}]" in s and "PC 0x8: jump #1000" in s and "branch target 0x1f48 is outside the shader [0x0, 0x18)" \
      in s, s
  _good(arch)


@pytest.mark.parametrize("arch", GPUS)
def test_stib_out_of_bounds(arch):
  """Fiber 0 of workgroup 1 stores to dword 64 of a 64-dword IBO."""
  o = np.zeros(64, np.uint32)
  text = GID + ST.format(n=1, s="r0.w", c="r0.w", b=1) + "end\n"
  with pytest.raises(EmuFault) as ei:
    _run(text, arch, (2,), {1: o}, True)
  _where(ei.value, arch, 16, "stib.b.untyped.1d.u32.1.imm.base0 r0.w, r0.w, 1")
  s = str(ei.value)
  assert "workgroup (1,0,0)" in s and "fiber 0" in s and "IBO 1 byte offset 256 is past its 256 bytes" in s, s
  assert ei.value.access == "write" and ei.value.size == 4
  _good(arch)


@pytest.mark.parametrize("arch", GPUS)
def test_ldg_unmapped(arch):
  """ldg from the 64-bit address r2.x (low) / r2.y (high) = 0x7_0000_1000, where nothing is mapped."""
  text = "mov.u32u32 r2.x, 4096\nmov.u32u32 r2.y, 7\nldg.u32 r1.x, g[r2.x], 1\n(sy)mov.u32u32 r1.y, r1.x\nend\n"
  with pytest.raises(EmuFault) as ei:
    _run(text, arch, (1,), {}, True)
  _where(ei.value, arch, 16, "ldg.u32 r1.x, g[r2.x], 1")
  assert ei.value.va == 0x700001000 and ei.value.access == "read" and "0x700001000" in str(ei.value)
  _good(arch)


@pytest.mark.parametrize("arch", GPUS)
def test_missing_sy_is_reported(arch):
  """saxpy without the (sy) that waits for its ldib results: the interpreter's checker names the reader."""
  text, grid, args, facts, _ = saxpy(arch)
  with pytest.raises(EmuCheckError) as ei:
    _run(text.replace("(sy)mad.f32", "mad.f32"), arch, grid, args, True, **facts)
  _where(ei.value, arch, 0x30, "mad.f32 r1.x, c0.x, r1.x, r1.y")
  assert "without the (sy)" in str(ei.value), str(ei.value)
  _good(arch)


@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("tier", ["interp", "native"])
def test_runaway_loop(arch, tier, checks):
  text = "mov.u32u32 r1.x, 0\nspin:\nadd.u r1.x, r1.x, 1\njump #spin\nend\n"
  code = assemble(text, arch)
  with pytest.raises(EmuError) as ei:
    launch(code, "main", grid=(1,), arch=arch, shader=listing.Shader.explicit(arch, code), checks=checks,
           max_instructions=5000)
  s = str(ei.value)
  assert f"[{arch}]" in s and "more than 5000" in s and "max-instructions" in s, s
  assert ei.value.pc in (8, 16) and ei.value.inst in ("add.u r1.x, r1.x, 1", "jump #-1"), (ei.value.pc, ei.value.inst)
  assert f"PC {ei.value.pc:#x}: {ei.value.inst}" in s, s
  _good(arch)


@pytest.mark.parametrize("arch", GPUS)
def test_sync_checker_same_text_on_both_tiers(arch, monkeypatch, tmp_path):
  """With the checkers on (the default), ir3 blocks run natively too: the (ss)/(sy) checker's state moves over a
  whole block (checks._Summary._sync); a missing (sy) reads as the interpreter reports it, and saxpy with its flags
  runs natively and as numpy says."""
  from gputwin.emu.native import STATS
  monkeypatch.setenv("GPUTWIN_NATIVE_CACHE", str(tmp_path))
  text, grid, args, facts, check = saxpy(arch)
  texts = []
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    with pytest.raises(EmuCheckError) as ei:
      _run(text.replace("(sy)mad.f32", "mad.f32"), arch, grid, saxpy(arch)[2], True, **facts)
    texts.append(str(ei.value))
  assert texts[0] == texts[1]
  runs = STATS["runs"]
  _run(text, arch, grid, args, True, **facts)
  assert STATS["runs"] > runs
  check()


@pytest.mark.parametrize("arch", GPUS)
def test_next_launch_reuses_register_files(arch, monkeypatch):
  """A launch of the same code and shape starts on the previous one's register files (launch._Code.spare), which
  must then hold nothing of it: a const word the first launch set and the second does not (c0.z) reads 0, the second
  launch's own buffers and constants are used. Checked against numpy on the interpreter and the native tier."""
  text = (GID + "cmps.u.lt p0.x, r0.w, c0.y\npredt\n" + LD.format(n=1, d="r1.x", c="r0.w", b=0) +
          LD.format(n=1, d="r1.y", c="r0.w", b=1) + "(sy)mad.f32 r1.x, c0.x, r1.x, r1.y\n(nop3) add.f r1.x, r1.x, c0.z\n"
          + ST.format(n=1, s="r1.x", c="r0.w", b=1) + "prede\nend\n")
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    for k, (a, n, c) in enumerate([(1.5, 256, 3.0), (-0.5, 200, 0.0), (2.0, 256, 0.0)]):
      x, y = _rng(k).standard_normal(256).astype(np.float32), _rng(k + 7).standard_normal(256).astype(np.float32)
      ref = y.copy()
      ref[:n] = (np.float32(a) * x[:n]).astype(np.float32) + y[:n] + np.float32(c)
      consts = (_f32(a), n, _f32(c), 0) if c else (_f32(a), n)
      stats = _run(text, arch, (4,), {0: x, 1: y}, False, consts=((0, consts),))
      np.testing.assert_array_equal(y, ref)
      assert (stats.native_instructions > 0) == (jit == "force"), stats
