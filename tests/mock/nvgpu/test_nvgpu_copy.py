"""The copy engine (HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B): pitch copies (one line, multi-line with pitches,
overlapping-free), remapped constant fills, semaphore releases; checked with numpy slicing."""
from __future__ import annotations

import numpy as np
import pytest
from nvfake import Chan, FakeNV

from gputwin.abi import nvpush as NP
from gputwin.mock.nvgpu import attach


def setup(cid=NP.HOPPER_DMA_COPY_A):
  k = FakeNV(sync=True)
  g = attach(k)
  c = Chan(k, copy=cid)
  return k, g, c, NP.nvclass(cid)


def copy_words(C, cid, src, dst, n, lines=1, pin=0, pout=0, **launch) -> list[int]:
  w = NP.pb_method(4, "SET_OBJECT", cid, cls=NP.HOPPER_CHANNEL_GPFIFO_A)   # a host method
  w += NP.pb_method(4, "OFFSET_IN_UPPER", src >> 32, src & 0xFFFFFFFF, dst >> 32, dst & 0xFFFFFFFF, pin, pout, n, lines,
                    cls=cid)
  f = dict(DATA_TRANSFER_TYPE="NON_PIPELINED", SRC_MEMORY_LAYOUT="PITCH", DST_MEMORY_LAYOUT="PITCH",
           MULTI_LINE_ENABLE=int(lines > 1), FLUSH_ENABLE=1)
  f.update(launch)
  return w + NP.pb_method(4, "LAUNCH_DMA", C.pack("LAUNCH_DMA", **f), cls=cid)


@pytest.mark.parametrize("cid", [NP.HOPPER_DMA_COPY_A, NP.AMPERE_DMA_COPY_B])
def test_linear_copy(cid):
  k, g, c, C = setup(cid)
  data = np.random.default_rng(1).integers(0, 256, 10007, np.uint8)
  src, dst = c.alloc(len(data)), c.alloc(len(data) + 16)
  c.vm.write(src, data.tobytes())
  c.vm.write(dst, b"\xee" * (len(data) + 16))
  c.submit(copy_words(C, cid, src, dst + 3, len(data)))
  g.poll()
  assert not k.faults
  out = np.frombuffer(c.vm.read(dst, len(data) + 16), np.uint8)
  assert (out[:3] == 0xEE).all() and np.array_equal(out[3:3 + len(data)], data) and (out[3 + len(data):] == 0xEE).all()


def test_multi_line_pitch_copy_is_a_2d_slice():
  k, g, c, C = setup()
  rows, pin, pout, w = 37, 128, 80, 60
  a = np.random.default_rng(2).integers(0, 256, (rows, pin), np.uint8)
  src, dst = c.alloc(a.nbytes), c.alloc(rows * pout)
  c.vm.write(src, a.tobytes())
  c.submit(copy_words(C, NP.HOPPER_DMA_COPY_A, src + 7, dst, w, lines=rows, pin=pin, pout=pout))
  g.poll()
  out = np.frombuffer(c.vm.read(dst, rows * pout), np.uint8).reshape(rows, pout)
  assert not k.faults and np.array_equal(out[:, :w], a[:, 7:7 + w]) and (out[:, w:] == 0).all()


def test_remap_const_fill_and_component_select():
  k, g, c, C = setup()
  cid = NP.HOPPER_DMA_COPY_A
  dst = c.alloc(4 * 1000)
  w = NP.pb_method(4, "SET_REMAP_CONST_A", 0xDEADBEEF, 0, C.pack("SET_REMAP_COMPONENTS", DST_X="CONST_A",
                                                                 COMPONENT_SIZE="FOUR", NUM_SRC_COMPONENTS="ONE",
                                                                 NUM_DST_COMPONENTS="ONE"), cls=cid)
  c.submit(w + copy_words(C, cid, 0, dst, 1000, REMAP_ENABLE=1))
  src, dst2 = c.alloc(8 * 50), c.alloc(8 * 50)
  pairs = np.arange(100, dtype=np.uint32).reshape(50, 2)
  c.vm.write(src, pairs.tobytes())
  c.vm.write(dst2, np.full(100, 7, np.uint32).tobytes())
  w = NP.pb_method(4, "SET_REMAP_COMPONENTS", C.pack("SET_REMAP_COMPONENTS", DST_X="SRC_Y", DST_Y="NO_WRITE",
                                                     COMPONENT_SIZE="FOUR", NUM_SRC_COMPONENTS="TWO",
                                                     NUM_DST_COMPONENTS="TWO"), cls=cid)
  c.submit(w + copy_words(C, cid, src, dst2, 50, REMAP_ENABLE=1))
  g.poll()
  assert not k.faults
  assert (np.frombuffer(c.vm.read(dst, 4000), np.uint32) == 0xDEADBEEF).all()
  out = np.frombuffer(c.vm.read(dst2, 400), np.uint32).reshape(50, 2)
  assert np.array_equal(out[:, 0], pairs[:, 1]) and (out[:, 1] == 7).all()


def test_semaphore_release_after_copy():
  k, g, c, C = setup()
  cid = NP.HOPPER_DMA_COPY_A
  src, dst, s1, s4 = c.alloc(64), c.alloc(64), c.alloc(8, 8), c.alloc(16, 16)
  c.vm.write(src, bytes(range(64)))
  c.vm.write_u32(s1 + 4, 0x55)
  sem = lambda va, p: NP.pb_method(4, "SET_SEMAPHORE_A", va >> 32, va & 0xFFFFFFFF, p & 0xFFFFFFFF, p >> 32, cls=cid)
  t0 = k.timestamp()
  c.submit(sem(s1, 5) + copy_words(C, cid, src, dst, 64, SEMAPHORE_TYPE="RELEASE_ONE_WORD_SEMAPHORE") +
           sem(s4, 0x1_0000_0009) +
           copy_words(C, cid, src, dst, 0, DATA_TRANSFER_TYPE="NONE", SEMAPHORE_TYPE="RELEASE_FOUR_WORD_SEMAPHORE",
                      SEMAPHORE_PAYLOAD_SIZE="TWO_WORD") +
           sem(s1, 3) +
           copy_words(C, cid, src, dst, 0, DATA_TRANSFER_TYPE="NONE", SEMAPHORE_TYPE="RELEASE_ONE_WORD_SEMAPHORE",
                      SEMAPHORE_REDUCTION_ENABLE=1, SEMAPHORE_REDUCTION="IADD", SEMAPHORE_REDUCTION_SIGN="UNSIGNED"))
  g.poll()
  assert not k.faults
  assert c.vm.read(dst, 64) == bytes(range(64))
  assert c.u32(s1) == 8 and c.u32(s1 + 4) == 0x55
  assert c.u64(s4) == 0x1_0000_0009 and t0 <= c.u64(s4 + 8) <= k.timestamp()


@pytest.mark.parametrize("launch,why", [(dict(SRC_MEMORY_LAYOUT="BLOCKLINEAR"), "block-linear"),
                                        (dict(DST_TYPE="PHYSICAL"), "physical")])
def test_unmodelled_copies_fault(launch, why):
  k, g, c, C = setup()
  a = c.alloc(64)
  c.submit(copy_words(C, NP.HOPPER_DMA_COPY_A, a, a + 32, 16, **launch))
  g.poll()
  assert why in k.faults[0][1]


def test_copy_from_unmapped_memory_faults_with_the_address():
  k, g, c, C = setup()
  c.submit(copy_words(C, NP.HOPPER_DMA_COPY_A, 0x7000_0000, c.alloc(64), 64))
  g.poll()
  (ch, reason, va, err), = k.faults
  assert va == 0x7000_0000 and "LAUNCH_DMA" in reason and "page fault" in reason
