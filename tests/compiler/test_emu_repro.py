"""Reproducers for emulator bugs found by compiling with LLVM and comparing against the host reference.
All of them are fixed now; each stays as a regression test.
Fixed upstream since (kept as regression checks, FIXED): SDWA src1_sel:BYTE_0 on gfx9; v_div_scale_f32 writing 0
(LLVM's correctly rounded f32 division gave NaN)."""
import numpy as np
import pytest

from gputwin.compiler import Ptr, compile, f32, global_id, i8, i32, kernel
from gputwin.compiler.examples import ulp_diff

from _compiler_helpers import run_both


@kernel
def fdiv(x: Ptr[f32], y: Ptr[f32], z: Ptr[f32]):
  i = global_id(0)
  z[i] = x[i] / y[i]


@kernel
def select_neg(x: Ptr[f32], y: Ptr[f32], z: Ptr[f32]):
  i = global_id(0)
  z[i] = x[i] if y[i] < 0.0 else -x[i]


@kernel
def byte_add(x: Ptr[i32], y: Ptr[i32], z: Ptr[i32]):
  i = global_id(0)
  z[i] = x[i] + (y[i] & 255)


@kernel
def div_by_byte(x: Ptr[i32], y: Ptr[i32], z: Ptr[i32]):
  i = global_id(0)
  z[i] = x[i] // i32(i8(i))


# select_neg's v_cndmask_b32_e64 -x case was fixed in the emulator; LLVM now branches there, so
# tests/emu/test_asm.py::test_cndmask_takes_float_modifiers_bitwise holds its regression test.
FIXED = [(byte_add, "gfx942", "_sdwa"), (fdiv, "gfx1100", "v_div_scale_f32"), (fdiv, "gfx942", "v_div_scale_f32"),
         (div_by_byte, "gfx942", "v_cmp_eq_u32_sdwa s[")]


def _check(kf, arch, inst):
  c = compile(kf, arch, backend="llvm")
  assert inst in c.asm                                  # the instruction under suspicion is really there
  rng = np.random.default_rng(1)
  dt = np.float32 if kf not in (byte_add, div_by_byte) else np.int32
  args = [(rng.standard_normal(64) * 100).astype(dt) for _ in range(2)] + [np.zeros(64, dt)]
  ref, emu = run_both(c, args, 1, 64)
  assert (ulp_diff(emu[2], ref[2]).max() == 0) if dt is np.float32 else np.array_equal(emu[2], ref[2])


@pytest.mark.parametrize("kf,arch,inst", FIXED, ids=[f"{k.name}-{a}-{i}" for k, a, i in FIXED])
def test_fixed_emulator_bugs_stay_fixed(kf, arch, inst):
  _check(kf, arch, inst)


@pytest.mark.parametrize("kf", [fdiv, select_neg, byte_add, div_by_byte], ids=lambda k: k.name)
def test_same_kernels_on_direct_backend(kf):
  """The same computations through the direct backend (which avoids those instructions) agree with the reference,
  so the mismatches above are not in the IR or the reference."""
  for arch in ("gfx1100", "gfx942"):
    c = compile(kf, arch, backend="direct")
    rng = np.random.default_rng(1)
    dt = np.float32 if kf not in (byte_add, div_by_byte) else np.int32
    args = [(rng.standard_normal(64) * 100).astype(dt) for _ in range(2)] + [np.zeros(64, dt)]
    ref, emu = run_both(c, args, 1, 64)
    assert (ulp_diff(emu[2], ref[2]).max() <= 2) if dt is np.float32 else np.array_equal(emu[2], ref[2])


TRUE16_HI = """.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl t16
.p2align 8
t16:
  s_load_b64 s[2:3], s[0:1], 0x0
  v_mov_b32 v0, 0x3c003c00
  v_mov_b32 v1, 0x40004000
  v_sub_f16_e32 v0.h, v0.h, v1.h
  v_mov_b32 v2, 0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v2, v0, s[2:3]
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel t16
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 8
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_kernarg_size 8
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
"""


def test_true16_high_half_operands():
  """LLVM-22 emits f16 arithmetic on v*.h halves for gfx1100; 1.0 - 2.0 in the high halves must give -1.0 there."""
  from gputwin.emu import launch
  from gputwin.isa.codeobj import assemble_code_object
  co = assemble_code_object(TRUE16_HI, "gfx1100")
  out = np.zeros(1, np.uint32)
  launch(co, "t16", grid=1, block=1, args=[out], arch="gfx1100", checks=False)
  assert out[0] == 0xbc003c00
