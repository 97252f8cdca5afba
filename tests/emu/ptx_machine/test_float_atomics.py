"""atom/red .add.f32 per resolved state space (PTX ISA 9.0 atom.md, red.md): on global memory subnormal inputs and
results flush to zero of their sign, on shared memory they do not; a generic address gets the meaning of the space
it resolves to. Both tiers; the reference is numpy's IEEE binary32 add."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu import launch

HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n"
K = HEAD + """
.visible .entry k(.param .u64 sh, .param .u64 gl, .param .u64 gsh, .param .u64 ggl, .param .u64 old, .param .u64 px,
                  .param .u64 py)
{
  .shared .align 4 .b8 s1[128];
  .shared .align 4 .b8 s2[128];
  .reg .b32 %r<4>; .reg .f32 %f<8>; .reg .b64 %rd<32>;
  ld.param.u64 %rd1, [sh]; ld.param.u64 %rd2, [gl]; ld.param.u64 %rd3, [gsh]; ld.param.u64 %rd4, [ggl];
  ld.param.u64 %rd5, [px]; ld.param.u64 %rd6, [py]; ld.param.u64 %rd21, [old];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd7, %r1, 4;
  add.s64 %rd8, %rd5, %rd7; ld.global.f32 %f1, [%rd8];
  add.s64 %rd9, %rd6, %rd7; ld.global.f32 %f2, [%rd9];
  mov.u64 %rd10, s1; add.s64 %rd11, %rd10, %rd7;
  st.shared.f32 [%rd11], %f1;
  atom.shared.add.f32 %f3, [%rd11], %f2;
  ld.shared.f32 %f4, [%rd11];
  add.s64 %rd12, %rd1, %rd7; st.global.f32 [%rd12], %f4;
  add.s64 %rd22, %rd21, %rd7; st.global.f32 [%rd22], %f3;
  add.s64 %rd13, %rd2, %rd7; red.global.add.f32 [%rd13], %f2;
  mov.u64 %rd14, s2; add.s64 %rd15, %rd14, %rd7; st.shared.f32 [%rd15], %f1;
  cvta.shared.u64 %rd16, %rd15;
  atom.add.f32 %f5, [%rd16], %f2;
  ld.shared.f32 %f6, [%rd15];
  add.s64 %rd17, %rd3, %rd7; st.global.f32 [%rd17], %f6;
  add.s64 %rd18, %rd4, %rd7; red.add.f32 [%rd18], %f2;
  ret;
}
"""


def ieee_add(x, y, flush: bool):
  ftz = lambda v: np.where((v != 0) & (np.abs(v) < np.float32(2.0 ** -126)), np.copysign(np.float32(0), v), v)
  return (ftz(ftz(x) + ftz(y)) if flush else x + y).astype(np.float32)


@pytest.mark.parametrize("mode", ["0", "force"])
def test_float_atomic_add_flushes_on_global_not_shared(mode, monkeypatch):
  monkeypatch.setenv("GPUTWIN_JIT", mode)
  tiny = 2.0 ** -140
  x = np.array([tiny, -tiny, 1.5e-38, 3.0, -1e-45, 2.0 ** -126, 1.0, -tiny] * 4, np.float32)
  y = np.array([tiny, -tiny, -1.2e-38, 1e-45, 0.0, -(2.0 ** -127), tiny, 1e-44] * 4, np.float32)
  sh, gsh, old = (np.zeros(32, np.float32) for _ in range(3))
  gl, ggl = x.copy(), x.copy()
  from gputwin.emu import native
  failed = len(native.FAILED)
  launch(K, "k", grid=1, block=32, args=[sh, gl, gsh, ggl, old, x, y], arch="sm_90", checks=mode == "0")
  assert native.FAILED[failed:] == []  # every block the code generator takes compiles (64-bit shared addresses too)
  bits = lambda a: a.view(np.uint32).tolist()
  assert bits(sh) == bits(ieee_add(x, y, False)) == bits(gsh)  # shared, explicit and generic: no flush
  assert bits(gl) == bits(ieee_add(x, y, True)) == bits(ggl)  # global, explicit and generic: flushed
  assert bits(old) == bits(x)
  assert bits(ieee_add(x, y, False)) != bits(ieee_add(x, y, True))  # (the inputs tell the two apart)
