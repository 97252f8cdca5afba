"""Pushbuffer fuzz (seeded): random words, random method headers, and bit-flipped / spliced / truncated versions of
valid pushbuffers (semaphores, copies, inline uploads, QMD launches), plus random GP entries. The host never sees an
exception, a fault names only the fuzzed channel and is one the model classifies (never an internal error), and a
healthy channel next to it, and a fresh channel after it, still work."""
from __future__ import annotations

import random
import time

import numpy as np
import pytest
from nvfake import Chan, FakeNV

from gputwin.abi import nvpush as NP
from gputwin.isa.ptx.cubin import build, read_program
from gputwin.mock.nvgpu import attach
from gputwin.mock.vm import GPUAddressSpace

HC, CC, DC = NP.HOPPER_CHANNEL_GPFIFO_A, NP.HOPPER_COMPUTE_A, NP.HOPPER_DMA_COPY_A
H, C, D = NP.nvclass(HC), NP.nvclass(CC), NP.nvclass(DC)
SEEDS = 300
IMAGE_VA = 0x3000_0000
PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry store(.param .u64 out, .param .u32 v) {
  .reg .u64 %rd<3>;
  .reg .u32 %r<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [v];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd2, %r2, 4;
  add.u64 %rd1, %rd1, %rd2;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def launch_qmd(c: Chan, out: int, value: int) -> int:
  """A QMD running `store` (out[tid] = value, 32 threads) from the image at IMAGE_VA; its VA."""
  k = read_program(c.vm.read(IMAGE_VA, c.vm.find(IMAGE_VA).size)).kernels["store"]
  cb, q = c.alloc(1024, 256), c.alloc(256, 256)
  c.vm.write(cb + k.param_offset, out.to_bytes(8, "little") + value.to_bytes(4, "little"))
  c.vm.write(q, NP.qmd_build("V03_00", program=IMAGE_VA + k.text_offset, grid=(1, 1, 1), block=(32, 1, 1),
                             shared=k.shared_static, cbufs={0: (cb, 1024)}))
  return q


def valid_pushbuffers(c: Chan) -> list[list[int]]:
  """Well-formed pushbuffers over the channel's scratch memory, the material mutations start from."""
  a, b, s = c.alloc(4096), c.alloc(4096), c.alloc(16, 16)
  sem = NP.pb_method(0, "SEM_ADDR_LO", s & 0xFFFFFFFF, s >> 32, 7, 0,
                     H.pack("SEM_EXECUTE", OPERATION="RELEASE", RELEASE_TIMESTAMP="EN"), cls=HC)
  acq = NP.pb_method(0, "SEM_ADDR_LO", s & 0xFFFFFFFF, s >> 32, 0, 0, H.pack("SEM_EXECUTE", OPERATION="ACQ_STRICT_GEQ"),
                     cls=HC)
  copy = (NP.pb_method(4, "SET_OBJECT", DC, cls=HC) +
          NP.pb_method(4, "OFFSET_IN_UPPER", a >> 32, a & 0xFFFFFFFF, b >> 32, b & 0xFFFFFFFF, 64, 64, 64, 4, cls=DC) +
          NP.pb_method(4, "LAUNCH_DMA", D.pack("LAUNCH_DMA", DATA_TRANSFER_TYPE="PIPELINED", SRC_MEMORY_LAYOUT="PITCH",
                                               DST_MEMORY_LAYOUT="PITCH", MULTI_LINE_ENABLE=1,
                                               SEMAPHORE_TYPE="RELEASE_ONE_WORD_SEMAPHORE"), cls=DC))
  upload = (NP.pb_method(1, "SET_OBJECT", CC, cls=CC) +
            NP.pb_method(1, "LINE_LENGTH_IN", 16, 1, a >> 32, a & 0xFFFFFFFF, cls=CC) +
            NP.pb_method(1, "LAUNCH_DMA", C.pack("LAUNCH_DMA", DST_MEMORY_LAYOUT="PITCH"), cls=CC) +
            NP.pb_method(1, "LOAD_INLINE_DATA", 1, 2, 3, 4, cls=CC, sec_op="NON_INC_METHOD"))
  q = launch_qmd(c, b, 5)
  qmd = (NP.pb_method(1, "SEND_PCAS_A", q >> 8, cls=CC) +
         NP.pb_method(1, "SEND_SIGNALING_PCAS2_B",
                      C.pack("SEND_SIGNALING_PCAS2_B", PCAS_ACTION="INVALIDATE_COPY_SCHEDULE"), cls=CC))
  imm = NP.pb_immd(0, "SEM_PAYLOAD_LO", 3, cls=HC) + [7 << 29]
  return [sem, acq + sem, copy + sem, upload + sem, qmd + sem, imm + sem]


def mutate(rng: random.Random, words: list[int], c: Chan) -> list[int]:
  w = list(words)
  for _ in range(rng.randint(1, 4)):
    op = rng.randrange(6)
    if op == 0 and w: w[rng.randrange(len(w))] ^= 1 << rng.randrange(32)                       # bit flip
    elif op == 1: w.insert(rng.randrange(len(w) + 1), rng.getrandbits(32))                   # random word
    elif op == 2 and w: del w[rng.randrange(len(w)):]                                        # truncation
    elif op == 3:                                                                            # a random method
      cls = rng.choice([HC, CC, DC])
      names = list(NP.nvclass(cls).methods)
      m = NP.nvclass(cls).method(rng.choice(names))
      data = [rng.choice([0, 1, rng.getrandbits(32), c.base + rng.randrange(c.size) & ~3])
              for _ in range(rng.randint(1, 4))]
      w[rng.randrange(len(w) + 1):0] = [NP.method_header(rng.choice(["INC_METHOD", "NON_INC_METHOD", "ONE_INC"]),
                                                         rng.randrange(8), m, len(data))] + data
    elif op == 4: w[rng.randrange(len(w) + 1):0] = [rng.getrandbits(32) for _ in range(rng.randint(1, 8))]
    elif op == 5 and w:
      i = rng.randrange(len(w))
      w[i] = (w[i] & 0x1FFFFFFF) | (rng.randrange(8) << 29)                                  # another SEC_OP
  return w


@pytest.fixture(scope="module")
def rig():
  k = FakeNV(("sm_90",), sync=True)
  g = attach(k)
  vm = GPUAddressSpace("sm_90")
  good = Chan(k, vm=vm, base=0x4000_0000)
  good.mapping(build(PTX, "sm_90"), IMAGE_VA)
  return k, g, vm, good


@pytest.mark.parametrize("chunk", range(6))
def test_pushbuffer_fuzz(rig, chunk):
  k, g, vm, good = rig
  per = SEEDS // 6
  s = good.alloc(4, 4)
  kinds: dict[str, int] = {}
  launched = 0
  t0 = time.monotonic()
  for seed in range(chunk * per, (chunk + 1) * per):
    rng = random.Random(seed)
    c = Chan(k, vm=vm, base=0x1000_0000 + (seed % 4) * 0x40_0000, entries=16)
    bases = valid_pushbuffers(c)
    nfaults = len(k.faults)
    for _ in range(rng.randint(1, 3)):
      r = rng.random()
      if r < 0.15: words = [rng.getrandbits(32) for _ in range(rng.randint(1, 24))]
      else: words = mutate(rng, rng.choice(bases), c)
      entry = None
      if rng.random() < 0.08:
        entry = rng.choice([rng.getrandbits(64), NP.gp_control(rng.randrange(8), rng.getrandbits(32)),
                            NP.gp_entry(rng.randrange(1 << 38) * 4, rng.randint(1, 64))])
      c.submit(words, entry=entry)
    g.poll()
    new = k.faults[nfaults:]
    assert all(f[0] is c.ch for f in new), [f[1] for f in new]
    for f in new:
      assert "internal error" not in f[1], f[1]
      assert f"channel {c.ch.id}" in f[1] and "GPFIFO entry" in f[1]
      kinds[f[1].split(": ", 2)[-1][:40]] = kinds.get(f[1].split(": ", 2)[-1][:40], 0) + 1
    good.submit(NP.pb_method(0, "SEM_ADDR_LO", s, 0, seed, 0, H.pack("SEM_EXECUTE", OPERATION="RELEASE"), cls=HC))
    g.poll()
    assert good.u32(s) == seed and good.ch.error is None
    launched += c.ch.state["pbdma"].engines.get(CC, None) is not None and c.ch.state["pbdma"].engines[CC].launches
    c.close()
  # a fresh channel after the storm: a copy and a semaphore still work
  f = Chan(k, vm=vm, base=0x2000_0000)
  src, dst, fs, out = f.alloc(256), f.alloc(256), f.alloc(4, 4), f.alloc(128)
  f.vm.write(src, bytes(range(256)))
  f.submit(NP.pb_method(4, "OFFSET_IN_UPPER", 0, src, 0, dst, 0, 0, 256, 1, cls=DC) +
           NP.pb_method(4, "LAUNCH_DMA", D.pack("LAUNCH_DMA", DATA_TRANSFER_TYPE="PIPELINED", SRC_MEMORY_LAYOUT="PITCH",
                                                DST_MEMORY_LAYOUT="PITCH"), cls=DC) +
           NP.pb_method(1, "SEND_PCAS_A", launch_qmd(f, out, 0xABC) >> 8, cls=CC) +
           NP.pb_method(1, "SEND_SIGNALING_PCAS2_B", C.pack("SEND_SIGNALING_PCAS2_B", PCAS_ACTION="SCHEDULE"), cls=CC) +
           NP.pb_method(0, "SEM_ADDR_LO", fs, 0, 99, 0, H.pack("SEM_EXECUTE", OPERATION="RELEASE"), cls=HC))
  g.poll()
  assert f.vm.read(dst, 256) == bytes(range(256)) and f.u32(fs) == 99 and f.ch.error is None
  assert (np.frombuffer(f.vm.read(out, 128), np.uint32) == 0xABC).all()
  f.close()
  assert sum(kinds.values()) > per // 4, kinds          # the fuzz does reach the error paths
  assert launched > 0                                    # and launches kernels from mutated pushbuffers
  assert time.monotonic() - t0 < 60
