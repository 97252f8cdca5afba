"""Packed register rows (gputwin/emu/ptx/regs.py): every launch lets registers whose live ranges never overlap share
rows. Values live across a loop, short-lived temporaries, a guarded (partial) write and 64-bit registers must come
out as numpy computes them, in both tiers, with the checkers on and off; the uninit checker still reports a read of a
register nothing wrote."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuCheckError
from gputwin.emu.ptx.launch import Loaded

K = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  add.u32 %r3, %r2, 7;
  mul.lo.u32 %r4, %r2, 3;
  mov.u32 %r5, 0; mov.u32 %r6, 0; mov.u32 %r7, 1;
  setp.lt.u32 %p1, %r2, 16;
  @%p1 mov.u32 %r7, 100;
loop:
  add.u32 %r8, %r6, %r3;
  xor.b32 %r9, %r8, %r4;
  mul.wide.u32 %rd4, %r9, 3;
  cvt.u32.u64 %r11, %rd4;
  add.u32 %r5, %r5, %r11;
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, %r1;
  @%p2 bra loop;
  add.u32 %r10, %r5, %r7;
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r10;
  ret;
}
"""


def reference(n: int, threads: int) -> np.ndarray:
  t = np.arange(threads, dtype=np.uint64)
  acc = np.zeros(threads, np.uint64)
  for i in range(n):
    acc += (((i + t + 7) ^ (3 * t)) * 3) & 0xffffffff
  return ((acc + np.where(t < 16, np.uint64(100), np.uint64(1))) & 0xffffffff).astype(np.uint32)


def _rows(lm) -> set[int]:
  """The rows a loaded module's instructions write."""
  return {s.index for pc in range(len(lm.image.code)) for s in lm.prog.op(pc).outs.values() if s.file == "v"}


def test_packed_layout_shares_rows():
  flat, packed = Loaded(K, "<k>", "sm_90", packed=False), Loaded(K, "<k>", "sm_90")
  assert len(_rows(packed)) < len(_rows(flat))


@pytest.mark.parametrize("mode", ["0", "force"])
def test_packed_registers_keep_their_values(mode, monkeypatch):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  want = reference(5, 64)
  for checks in (False, True):
    out = np.zeros(64, np.uint32)
    launch(K, "k", grid=1, block=64, args=[out, np.uint32(5)], arch="sm_90", checks=checks)
    np.testing.assert_array_equal(out, want)


def test_each_kernel_of_a_module_has_rows_of_its_own_size(monkeypatch):
  """Kernels never run in one launch: their rows start at the same base (Image.local_rows), so a launch's register
  file holds its kernel's rows, not every kernel's of the module; both kernels still compute what numpy does, in
  both tiers, packed (checkers off) or not."""
  two = K + K.split(".version 9.0\n.target sm_90\n.address_size 64\n")[1].replace(".entry k(", ".entry k2(")
  lm = Loaded(two, "<k>", "sm_90")
  k, k2 = lm.image.functions["k"], lm.image.functions["k2"]
  one = Loaded(K, "<k>", "sm_90").image
  assert k.rows == k2.rows and lm.image.rows_for(k) == lm.image.rows_for(k2) == one.rows_for(one.functions["k"])
  want = reference(5, 64)
  for mode in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", mode)
    for name in ("k", "k2"):
      for checks in (False, True):
        out = np.zeros(64, np.uint32)
        launch(two, name, grid=1, block=64, args=[out, np.uint32(5)], arch="sm_90", checks=checks)
        np.testing.assert_array_equal(out, want)


def _regs(p: str, n: int) -> str:
  return "{" + ", ".join(f"%{p}{k}" for k in range(n)) + "}"


# C (16 x 16 f32) = A (16 x K f16, row-major) @ B (K x 16 f16, stored column-major: B^T row-major), K / 16 wmma steps;
# the accumulator copied back each step so D, A, B and the address temporaries die inside the loop
GEMM = f""".version 9.0
.target sm_90
.address_size 64
.visible .entry g(.param .u64 A, .param .u64 B, .param .u64 C, .param .u32 K)
{{
  .reg .pred %p<2>; .reg .b32 %a<8>; .reg .b32 %b<8>; .reg .f32 %c<8>; .reg .f32 %d<8>; .reg .b32 %r<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [A]; ld.param.u64 %rd2, [B]; ld.param.u64 %rd3, [C]; ld.param.u32 %r1, [K];
  {" ".join(f"mov.f32 %c{k}, 0f00000000;" for k in range(8))}
  mov.u32 %r2, 0;
loop:
  mul.wide.u32 %rd4, %r2, 2;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {_regs("a", 8)}, [%rd5], %r1;
  wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {_regs("b", 8)}, [%rd6], %r1;
  wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {_regs("d", 8)}, {_regs("a", 8)}, {_regs("b", 8)}, {_regs("c", 8)};
  {" ".join(f"mov.f32 %c{k}, %d{k};" for k in range(8))}
  add.u32 %r2, %r2, 16;
  setp.lt.u32 %p1, %r2, %r1;
  @%p1 bra loop;
  wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd3], {_regs("c", 8)}, 16;
  ret;
}}
"""


def test_tensor_kernels_pack():
  """Warp-level tensor instructions run with the whole warp at them, so their fragments' rows follow the same
  liveness as any register's: a wmma loop packs (the fragments of one step share rows with the next step's
  temporaries) and computes numpy's product in both tiers, with the checkers on and off."""
  assert len(_rows(Loaded(GEMM, "<g>", "sm_90"))) < len(_rows(Loaded(GEMM, "<g>", "sm_90", packed=False)))
  K = 64
  rng = np.random.default_rng(5)
  A, B = (rng.integers(-8, 8, (16, K)) / 4).astype(np.float16), (rng.integers(-8, 8, (16, K)) / 4).astype(np.float16)
  want = A.astype(np.float64) @ B.astype(np.float64).T  # (small dyadic values: every sum exact)
  for mode in ("0", "force"):
    for checks in (False, True):
      with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTWIN_JIT", mode)
        out = np.zeros((16, 16), np.float32)
        st = launch(GEMM, "g", grid=1, block=32, args=[A, B, out, np.uint32(K)], arch="sm_90", checks=checks)
      np.testing.assert_array_equal(out, want.astype(np.float32))
      assert out.any() and (mode == "0" or checks or st.native_instructions > 0)


UNINIT = K.replace("  add.u32 %r10, %r5, %r7;", "  add.u32 %r10, %r5, %r0;")  # %r0: never written


@pytest.mark.parametrize("mode", ["0", "force"])
def test_a_read_of_a_register_nothing_wrote_is_still_reported(mode, monkeypatch):
  """%r0 is live from the entry to its read (nothing writes it), so no register written on the way shares its row:
  the uninit checker, which tracks rows, reports the read in the packed layout as in the one with a row each."""
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  assert len(_rows(Loaded(UNINIT, "<k>", "sm_90"))) < len(_rows(Loaded(UNINIT, "<k>", "sm_90", packed=False)))
  with pytest.raises(EmuCheckError, match=r"add.u32 %r10, %r5, %r0: reads v\d+ \(S1\), which was never written"):
    launch(UNINIT, "k", grid=1, block=64, args=[np.zeros(64, np.uint32), np.uint32(5)], arch="sm_90")


def test_a_module_packs_the_kernels_it_runs():
  """launch() packs the kernel it runs, not the module's others (their analysis was most of a cold start of a module
  of several kernels); launching another later packs every kernel and leaves the first one's rows as they were: the
  layout is then the one packing all at once gives."""
  two = K + K.split(".version 9.0\n.target sm_90\n.address_size 64\n")[1].replace(".entry k(", ".entry k2(")
  lm = Loaded(two, "<k>", "sm_90", kernels=("k",))
  names = lambda lm, f: [loc.names for loc in lm.image.code if loc.func == f]
  flat = Loaded(two, "<k>", "sm_90", packed=False)
  assert lm.packed_for == {"k"} and names(lm, "k2") == names(flat, "k2") and names(lm, "k") != names(flat, "k")
  first = names(lm, "k")
  lm.want("k2")
  eager = Loaded(two, "<k>", "sm_90")
  assert lm.packed_for == {"k", "k2"} and names(lm, "k") == first
  assert [loc.names for loc in lm.image.code] == [loc.names for loc in eager.image.code]
