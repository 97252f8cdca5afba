"""Hand-written PTX on the machine: forms nvcc rarely emits (brx.idx, vector moves with immediates, .extern .shared,
initialised globals) and bad input (malformed text, unknown kernels, misaligned and unmapped accesses), each with a
located error. References are plain Python."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu import launch
from gputwin.errors import EmuError, EmuFault, LaunchError
from gputwin.isa.ptx import PtxError

HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n"


def ptx(body: str, params: str = ".param .u64 out", name: str = "k", pre: str = "") -> str:
  return f"{HEAD}{pre}\n.visible .entry {name}({params})\n{{\n{body}\n}}\n"


BRX = ptx("""
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 3;
  ts: .branchtargets L0, L1, L2, L3;
  brx.idx %r2, ts;
L0: mov.u32 %r3, 100; bra.uni done;
L1: mov.u32 %r3, 200; bra.uni done;
L2: mov.u32 %r3, 300; bra.uni done;
L3: mov.u32 %r3, 400;
done:
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;""")


def test_brx_idx_branches_through_its_table():
  out = np.zeros(32, np.int32)
  launch(BRX, "k", grid=1, block=32, args=[out], arch="sm_90")
  assert out.tolist() == [100 * (t % 4 + 1) for t in range(32)]


GLOBALS = ptx("""
  .reg .b32 %r<6>; .reg .b64 %rd<6>; .reg .b16 %rs<3>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  mov.u64 %rd3, tab;
  add.s64 %rd4, %rd3, %rd2;
  ld.global.u32 %r2, [%rd4];
  mov.b32 {%rs1, %rs2}, %r2;
  mov.b32 %r3, {%rs2, %rs1};
  mov.u32 %r4, dyn;
  shl.b32 %r5, %r1, 2;
  add.u32 %r4, %r4, %r5;
  st.shared.u32 [%r4], %r3;
  bar.sync 0;
  xor.b32 %r5, %r5, 4;
  mov.u32 %r4, dyn;
  add.u32 %r4, %r4, %r5;
  ld.shared.u32 %r3, [%r4];
  add.s64 %rd5, %rd1, %rd2;
  st.global.u32 [%rd5], %r3;
  ret;""", pre=".global .align 4 .u32 tab[4] = {0x00010002, 0x00030004, 0x00050006, 0x00070008};\n"
             ".extern .shared .align 16 .b8 dyn[];\n")


def test_initialised_globals_vector_moves_and_dynamic_shared():
  out = np.zeros(4, np.uint32)
  launch(GLOBALS, "k", grid=1, block=4, args=[out], arch="sm_90", shared_bytes=64)
  tab = [0x00010002, 0x00030004, 0x00050006, 0x00070008]
  swapped = [((v & 0xffff) << 16) | (v >> 16) for v in tab]
  assert out.tolist() == [swapped[t ^ 1] for t in range(4)]


def test_dynamic_shared_memory_is_bounded_by_shared_bytes():
  with pytest.raises(EmuFault, match="shared"):
    launch(GLOBALS, "k", grid=1, block=4, args=[np.zeros(4, np.uint32)], arch="sm_90", shared_bytes=8)


def test_malformed_ptx_is_a_located_error():
  bad = ptx("  .reg .b32 %r<2>;\n  add.s32 %r1, %r1;\n  ret;")
  with pytest.raises(PtxError, match=r"<ptx>:\d+:\d+"):
    launch(bad, "k", grid=1, block=32, args=[np.zeros(1, np.int32)], arch="sm_90")


def test_undefined_label_is_a_located_error():
  bad = ptx("  bra.uni nowhere;\n  ret;")
  with pytest.raises(PtxError, match="nowhere"):
    launch(bad, "k", grid=1, block=32, args=[np.zeros(1, np.int32)], arch="sm_90")


def test_unmapped_and_misaligned_accesses_fault_with_the_thread():
  unmapped = ptx("""
  .reg .b32 %r<3>; .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd1, %r1, 4096;
  add.s64 %rd2, %rd1, 0x40000000;
  ld.global.u32 %r2, [%rd2];
  ret;""", params=".param .u64 unused")
  with pytest.raises(EmuFault) as e:
    launch(unmapped, "k", grid=1, block=32, args=[np.zeros(1, np.int32)], arch="sm_90")
  assert "thread (0,0,0)" in str(e.value) and e.value.access == "read"


def test_unknown_target_and_kernel():
  with pytest.raises(LaunchError, match="sm_75"):
    launch(BRX, "k", grid=1, block=32, args=[np.zeros(32, np.int32)], arch="sm_75")
  with pytest.raises(LaunchError, match="it has: k"):
    launch(BRX, "main", grid=1, block=32, args=[np.zeros(32, np.int32)], arch="sm_90")


def test_scalar_arguments_pass_by_bit_pattern():
  k = ptx("""
  .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  ld.param.f32 %r2, [f];
  st.global.u32 [%rd1], %r1;
  st.global.u32 [%rd1+4], %r2;
  ret;""", params=".param .u64 out, .param .u32 n, .param .f32 f")
  out = np.zeros(2, np.uint32)
  launch(k, "k", grid=1, block=1, args=[out, np.int32(-3), np.float32(1.5)], arch="sm_90")
  assert out.tolist() == [0xfffffffd, 0x3fc00000]
  with pytest.raises(LaunchError, match="does not fit"):
    launch(k, "k", grid=1, block=1, args=[out, np.int64(1 << 40), 1.5], arch="sm_90")


def test_a_module_file_rewritten_at_once_runs_its_new_text(tmp_path):
  """launch(path) keeps a file's text only when read well after its last write: a module rewritten right after a
  launch, same size (so, on a coarse file-system clock, the same modification time too), runs as rewritten; an old
  file's text is reused, and runs again after a rewrite."""
  import os
  body = "  .reg .b32 %r<2>; .reg .b64 %rd<2>;\n  ld.param.u64 %rd1, [out];\n  mov.u32 %r1, {};\n" \
         "  st.global.u32 [%rd1], %r1;\n  ret;"
  path = tmp_path / "k.ptx"
  out = np.zeros(1, np.int32)
  stamp = None
  for value in (111, 222, 333):  # (three digits each: the same size)
    path.write_text(ptx(body.format(value)))
    if stamp is not None:  # a coarse clock: the rewrite keeps the first write's modification time
      os.utime(path, ns=stamp)
    stamp = stamp or (path.stat().st_atime_ns, path.stat().st_mtime_ns)
    launch(str(path), "k", grid=1, block=1, args=[out], arch="sm_90")
    assert out[0] == value
  st = path.stat()
  os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10_000_000_000))  # written long ago: kept after this read
  launch(str(path), "k", grid=1, block=1, args=[out], arch="sm_90")
  assert out[0] == 333
  path.write_text(ptx(body.format(444)))
  launch(str(path), "k", grid=1, block=1, args=[out], arch="sm_90")
  assert out[0] == 444


TIMERS = ptx("""
  .reg .b32 %r<8>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  mov.u64 %rd4, %clock64;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %clock;
  mul.wide.u32 %rd2, %r1, 24;
  add.s64 %rd3, %rd1, %rd2;
  mov.u32 %r3, %clock_hi;
  mov.u64 %rd5, %globaltimer;
  mov.u32 %r4, %globaltimer_lo;
  st.global.v2.u32 [%rd3], {%r2, %r3};
  st.global.v2.u64 [%rd3+8], {%rd4, %rd5};
  ret;""")


@pytest.mark.parametrize("jit", ["0", "force"])
@pytest.mark.parametrize("checks", [False, True])
def test_time_registers_read_the_warps_instruction_count(monkeypatch, jit, checks):
  """%clock, %clock64, %globaltimer(_lo) read the warp's own instruction count when they run (deterministic: the
  kernel's 0-based instruction index here), %clock_hi the upper 32 bits of %clock64 (0 this early). The interpreter
  used to read them as 0; the native tier runs them (every instruction native under force)."""
  monkeypatch.setenv("GPUTWIN_JIT", jit)
  out = np.zeros((64, 3), np.uint64)
  st = launch(TIMERS, "k", grid=1, block=64, args=[out], arch="sm_90", checks=checks)
  words = out.view(np.uint32).reshape(64, 6)[:, :2]
  assert (words[:, 0] == 3).all() and (words[:, 1] == 0).all()  # %clock at index 3, %clock_hi
  assert (out[:, 1] == 1).all() and (out[:, 2] == 7).all()  # %clock64 at index 1, %globaltimer at 7
  assert st.native_instructions == (st.instructions if jit == "force" else 0)
