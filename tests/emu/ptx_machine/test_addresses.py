"""Addresses on the PTX machine: 64-bit global addresses (guest memory mapped far above 4 GiB, as NVIDIA's UVM VAs
are), the generic windows (cvta, isspacep) and the address of a second `.local` array, on both tiers (GPUTWIN_JIT=0
interprets, `force` compiles every block at first sight), and addresses every thread shares (a global variable, a
shared one, a parameter: the native tier checks one lane's access for all). References are numpy."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.emu.memory import GuestMemory
from gputwin.emu.ptx.launch import Loaded, run
from gputwin.errors import EmuFault

HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n"
HIGH = 0x7f00_0000_0000  # a UVM-style VA, far above 4 GiB
TIERS = ("0", "force")


def ptx(body: str, params: str, name: str = "k") -> str:
  return f"{HEAD}\n.visible .entry {name}({params})\n{{\n{body}\n}}\n"


# out[i] = 2 * x[i] + 1 through global (.global) and generic accesses, threads past n idle
AXPY = ptx("""
  .reg .pred %p<2>; .reg .b32 %r<4>; .reg .f32 %f<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [x]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x;
  mad.lo.s32 %r2, %r3, 64, %r2;
  setp.ge.s32 %p1, %r2, %r1;
  @%p1 bra done;
  mul.wide.s32 %rd3, %r2, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  fma.rn.f32 %f2, %f1, 0f40000000, 0f3F800000;
  add.s64 %rd5, %rd1, %rd3;
  st.global.f32 [%rd5], %f2;
  ld.f32 %f3, [%rd4+4];
  st.f32 [%rd5+4096], %f3;
done:
  ret;""", ".param .u64 out, .param .u64 x, .param .u32 n")


def _high(mode, monkeypatch, base=HIGH, n=200):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  mem = GuestMemory("sm_90")
  x = np.random.default_rng(1).standard_normal(n + 1).astype(np.float32)
  out = np.zeros(2048, np.float32)
  mem.map(base, x)
  mem.map(base + 0x1_0000_0000, out)  # another region, 4 GiB further up
  lm = Loaded(AXPY, "<ptx>", "sm_90", mem)
  st = run(lm, "k", grid=4, block=64, args=[np.uint64(base + 0x1_0000_0000), np.uint64(base), np.uint32(n)],
           checks=False)
  return x, out, st


@pytest.mark.parametrize("mode", TIERS)
def test_global_memory_far_above_4gib(mode, monkeypatch):
  x, out, st = _high(mode, monkeypatch)
  assert (out[:200] == np.float32(2) * x[:200] + np.float32(1)).all()
  assert (out[1024:1224] == x[1:201]).all()
  assert (mode == "force") == (st.native_instructions > 0)


@pytest.mark.parametrize("mode", TIERS)
def test_global_memory_across_a_4gib_line(mode, monkeypatch):
  """x and out straddle a 4 GiB line: a warp's contiguous addresses carry from the low dword into the high one
  mid-warp (the native tier's dword probe then hands the warp to its 64-bit range probe)."""
  x, out, st = _high(mode, monkeypatch, base=HIGH + (1 << 32) - 100)
  assert (out[:200] == np.float32(2) * x[:200] + np.float32(1)).all()
  assert (out[1024:1224] == x[1:201]).all()
  assert (mode == "force") == (st.native_instructions > 0)


def test_both_tiers_agree_far_above_4gib(monkeypatch):
  a, b = (_high(m, monkeypatch)[1] for m in TIERS)
  assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("mode", TIERS)
def test_unmapped_high_address_faults(mode, monkeypatch):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  mem = GuestMemory("sm_90")
  x = np.ones(256, np.float32)
  mem.map(HIGH, x)
  lm = Loaded(AXPY, "<ptx>", "sm_90", mem)
  with pytest.raises(EmuFault) as e:
    run(lm, "k", grid=1, block=64, args=[np.uint64(HIGH + 0x1_0000_0000), np.uint64(HIGH), np.uint32(64)],
        checks=False)
  assert f"{HIGH + 0x1_0000_0000:#x}" in str(e.value)


# two .local arrays: the second's address (mov of its name), made generic with cvta.local, written and read back
# through it next to the first (out[tid] = b[tid % 16] + a[15 - tid % 16]); then out[64 + tid]: bits of cvta of the
# name == mov + cvta, and isspacep of local, global and shared generic addresses (PTX ISA 9.0 9.7.9.23)
LOCALS = ptx("""
  .shared .align 4 .b8 sm[16];
  .local .align 4 .b8 a[64];
  .local .align 4 .b8 b[64];
  .reg .pred %p<4>; .reg .b32 %r<12>; .reg .b64 %rd<14>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  mov.u64 %rd2, a;
  cvta.local.u64 %rd2, %rd2;
  mov.u64 %rd3, b;
  cvta.local.u64 %rd3, %rd3;
  mov.u32 %r2, 0;
fill:
  mul.wide.u32 %rd4, %r2, 4;
  add.s64 %rd5, %rd2, %rd4;
  mad.lo.s32 %r3, %r1, 100, %r2;
  st.u32 [%rd5], %r3;
  add.s64 %rd6, %rd3, %rd4;
  mad.lo.s32 %r4, %r1, 1000, %r2;
  st.u32 [%rd6], %r4;
  add.s32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, 16;
  @%p1 bra fill;
  and.b32 %r5, %r1, 15;
  mul.wide.u32 %rd7, %r5, 4;
  add.s64 %rd8, %rd3, %rd7;
  ld.u32 %r6, [%rd8];
  sub.s32 %r7, 15, %r5;
  mul.wide.u32 %rd9, %r7, 4;
  add.s64 %rd10, %rd2, %rd9;
  ld.u32 %r8, [%rd10];
  add.s32 %r9, %r6, %r8;
  mul.wide.u32 %rd11, %r1, 4;
  add.s64 %rd11, %rd1, %rd11;
  st.global.u32 [%rd11], %r9;
  cvta.local.u64 %rd12, b;
  setp.eq.s64 %p2, %rd12, %rd3;
  selp.u32 %r10, 1, 0, %p2;
  isspacep.local %p2, %rd3;
  selp.u32 %r11, 2, 0, %p2;
  add.s32 %r10, %r10, %r11;
  isspacep.global %p2, %rd3;
  selp.u32 %r11, 4, 0, %p2;
  add.s32 %r10, %r10, %r11;
  isspacep.shared %p2, %rd3;
  selp.u32 %r11, 8, 0, %p2;
  add.s32 %r10, %r10, %r11;
  isspacep.global %p2, %rd1;
  selp.u32 %r11, 16, 0, %p2;
  add.s32 %r10, %r10, %r11;
  isspacep.local %p2, %rd1;
  selp.u32 %r11, 32, 0, %p2;
  add.s32 %r10, %r10, %r11;
  mov.u64 %rd4, sm;
  cvta.shared.u64 %rd4, %rd4;
  isspacep.shared %p2, %rd4;
  selp.u32 %r11, 64, 0, %p2;
  add.s32 %r10, %r10, %r11;
  isspacep.global %p2, %rd4;
  selp.u32 %r11, 128, 0, %p2;
  add.s32 %r10, %r10, %r11;
  st.global.u32 [%rd11+256], %r10;
  ret;""", ".param .u64 out")


@pytest.mark.parametrize("mode", TIERS)
def test_address_of_a_second_local_array(mode, monkeypatch):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  from gputwin.emu import launch
  out = np.zeros(128, np.int32)
  launch(LOCALS, "k", grid=1, block=64, args=[out], arch="sm_90", checks=mode == "0")
  t = np.arange(64)
  j = t % 16
  assert (out[:64] == (t * 1000 + j) + (t * 100 + 15 - j)).all()
  assert (out[64:] == 1 + 2 + 16 + 64).all()


# every thread reads the same global and shared words: out[i] = 17 * n + 11 + i (tab[3] * n + tab[1] + tid)
SHARED_ADDRESS = """.global .align 4 .u32 tab[4] = {7, 11, 13, 17};
.visible .entry k(.param .u64 out, .param .u32 n)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>;
  .shared .align 4 .b8 sm[16];
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [n];
  ld.global.u32 %r2, [tab+4];
  ld.global.u32 %r3, [tab+OFFSET];
  mad.lo.s32 %r4, %r3, %r1, %r2;
  st.shared.u32 [sm+4], %r4;
  bar.sync 0;
  ld.shared.u32 %r5, [sm+4];
  mov.u32 %r6, %tid.x;
  add.s32 %r5, %r5, %r6;
  mul.wide.u32 %rd2, %r6, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r5;
  ret;
}
"""


def _shared_address(mode, monkeypatch, offset: int, block: int = 64):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  out = np.zeros(block, np.int32)
  st = launch(HEAD + SHARED_ADDRESS.replace("OFFSET", str(offset)), "k", grid=1, block=block,
              args=[out, np.uint32(5)], arch="sm_90", checks=False)
  return out, st


@pytest.mark.parametrize("mode", TIERS)
@pytest.mark.parametrize("block", (64, 40))  # (40: a partial second warp)
def test_addresses_every_thread_shares(mode, block, monkeypatch):
  out, st = _shared_address(mode, monkeypatch, 12, block)
  assert (out == 17 * 5 + 11 + np.arange(block)).all()
  assert (mode == "force") == (st.native_instructions == st.instructions)


def test_a_shared_address_out_of_range_faults_alike(monkeypatch):
  errs = []
  for mode in TIERS:
    with pytest.raises(EmuFault) as e:
      _shared_address(mode, monkeypatch, 1 << 24)
    errs.append(str(e.value))
  assert errs[0] == errs[1] and "ld.global.u32 %r3, [tab+16777216]" in errs[0], errs
