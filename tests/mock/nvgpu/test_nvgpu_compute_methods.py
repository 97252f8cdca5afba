"""Compute-class methods other than launches: inline-to-memory uploads (pitch lines, I2M semaphore), report
semaphores (SET_REPORT_SEMAPHORE_A..D, REPORT_SEMAPHORE_EXECUTE), stored state (shader memory windows)."""
from __future__ import annotations

import numpy as np
import pytest
from nvfake import Chan, FakeNV

from gputwin.abi import nvpush as NP
from gputwin.mock.nvgpu import attach


def setup(cid=NP.HOPPER_COMPUTE_A):
  k = FakeNV(sync=True)
  g = attach(k)
  c = Chan(k, compute=cid)
  return k, g, c, NP.nvclass(cid), lambda name, *d: NP.pb_method(1, name, *d, cls=cid)


@pytest.mark.parametrize("cid", [NP.HOPPER_COMPUTE_A, NP.AMPERE_COMPUTE_A])
def test_inline_upload_pitch_lines_and_i2m_semaphore(cid):
  k, g, c, C, m = setup(cid)
  line, lines, pitch = 12, 5, 40
  dst, s = c.alloc(pitch * lines), c.alloc(16, 16)
  data = np.arange(line * lines, dtype=np.uint8) + 1
  words = np.frombuffer(data.tobytes(), np.uint32).tolist()
  t0 = k.timestamp()
  c.submit(m("SET_OBJECT", cid) + m("LINE_LENGTH_IN", line, lines, dst >> 32, dst & 0xFFFFFFFF, pitch) +
           m("SET_I2M_SEMAPHORE_A", s >> 32, s & 0xFFFFFFFF, 0x5151) +
           m("LAUNCH_DMA", C.pack("LAUNCH_DMA", DST_MEMORY_LAYOUT="PITCH", COMPLETION_TYPE="RELEASE_SEMAPHORE",
                                  SEMAPHORE_STRUCT_SIZE="FOUR_WORDS")) +
           NP.pb_method(1, "LOAD_INLINE_DATA", *words, cls=cid, sec_op="NON_INC_METHOD"))
  g.poll()
  assert not k.faults, k.faults
  out = np.frombuffer(c.vm.read(dst, pitch * lines), np.uint8).reshape(lines, pitch)
  assert np.array_equal(out[:, :line], data.reshape(lines, line)) and (out[:, line:] == 0).all()
  assert c.u32(s) == 0x5151 and t0 <= c.u64(s + 8) <= k.timestamp()


def test_report_semaphore_d_one_and_four_words_and_reduction():
  k, g, c, C, m = setup()
  a, b = c.alloc(16, 16), c.alloc(16, 16)
  c.vm.write_u32(b, 40)
  d = lambda **f: C.pack("SET_REPORT_SEMAPHORE_D", **f)
  c.submit(m("SET_REPORT_SEMAPHORE_A", a >> 32, a & 0xFFFFFFFF, 9,
             d(OPERATION="RELEASE", STRUCTURE_SIZE="FOUR_WORDS")) +
           m("SET_REPORT_SEMAPHORE_A", b >> 32, b & 0xFFFFFFFF, 2, d(OPERATION="RELEASE", STRUCTURE_SIZE="ONE_WORD",
                                                                   REDUCTION_ENABLE="TRUE", REDUCTION_OP="RED_ADD")))
  g.poll()
  assert not k.faults and c.u32(a) == 9 and c.u64(a + 8) > 0 and c.u32(b) == 42 and c.u32(b + 4) == 0


def test_report_semaphore_execute_64bit_and_trap():
  k, g, c, C, m = setup()
  a = c.alloc(16, 16)
  ex = lambda **f: C.pack("REPORT_SEMAPHORE_EXECUTE", **f)
  c.submit(m("SET_REPORT_SEMAPHORE_PAYLOAD_LOWER", 0x89ABCDEF, 0x01234567, a & 0xFFFFFFFF, a >> 32,
             ex(OPERATION="RELEASE", PAYLOAD_SIZE64="TRUE", STRUCTURE_SIZE="SEMAPHORE_ONE_WORD")))
  g.poll()
  assert not k.faults and c.u64(a) == 0x01234567_89ABCDEF
  c.submit(m("REPORT_SEMAPHORE_EXECUTE", ex(OPERATION="TRAP")))
  g.poll()
  assert "TRAP" in k.faults[0][1]


def test_shader_windows_and_unmodelled_state_are_stored():
  k, g, c, C, m = setup()
  c.submit(m("SET_OBJECT", NP.HOPPER_COMPUTE_A) + m("SET_SHADER_SHARED_MEMORY_WINDOW_A", 1, 0x2000) +
           m("SET_SHADER_LOCAL_MEMORY_WINDOW_A", 2, 0) + m("SET_SHADER_LOCAL_MEMORY_A", 0, 0x7000_0000) +
           m("SET_QMD_VERSION", 0x3_0003))
  g.poll()
  regs = c.ch.state["pbdma"].engines[NP.HOPPER_COMPUTE_A].regs
  assert not k.faults and regs["SET_SHADER_SHARED_MEMORY_WINDOW_B"] == 0x2000 and regs["SET_SHADER_LOCAL_MEMORY_B"] == \
    0x7000_0000 and regs["SET_QMD_VERSION"] == 0x3_0003


def test_inline_qmd_errors():
  k, g, c, C, m = setup()
  c.submit(m("SET_OBJECT", NP.HOPPER_COMPUTE_A) +
           NP.pb_method(1, C.method("LOAD_INLINE_QMD_DATA", 3), 1))
  g.poll()
  assert "without SET_INLINE_QMD_ADDRESS" in k.faults[0][1]
