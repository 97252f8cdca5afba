"""The virtual NVIDIA GPU's PBDMA and host methods: every SEC_OP, GPFIFO handling, semaphores (acquire with retry,
release 32/64-bit with timestamps, reductions against the dev_pbdma.ref table computed with numpy), channel errors."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest
from nvfake import Chan, FakeNV

from gputwin.abi import nvpush as NP
from gputwin.mock.nvgpu import attach

H = NP.nvclass(NP.HOPPER_CHANNEL_GPFIFO_A)
HC = NP.HOPPER_CHANNEL_GPFIFO_A


def machine(**kw):
  k = FakeNV(sync=True, **kw)
  return k, attach(k)


def sem_exec(**f) -> int: return H.pack("SEM_EXECUTE", **f)


def sem(va: int, payload: int, **f) -> list[int]:
  """SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI, SEM_EXECUTE as one incrementing method."""
  return NP.pb_method(0, "SEM_ADDR_LO", va & 0xFFFFFFFF, va >> 32, payload & 0xFFFFFFFF, payload >> 32, sem_exec(**f),
                      cls=HC)


def test_release_32_64_and_timestamp():
  k, g = machine()
  c = Chan(k)
  a, b, t = c.alloc(8, 8), c.alloc(8, 8), c.alloc(16, 16)
  c.vm.write(a, b"\xff" * 8)
  t0 = k.timestamp()
  c.submit(sem(a, 0x1122_3344_5566_7788, OPERATION="RELEASE") +
           sem(b, 0x1122_3344_5566_7788, OPERATION="RELEASE", PAYLOAD_SIZE="64BIT") +
           sem(t, 0xABCD_0000_0042, OPERATION="RELEASE", RELEASE_TIMESTAMP="EN"))
  assert g.poll() and not k.faults
  assert c.u64(a) == 0xFFFFFFFF_55667788          # a 32-bit release writes 4 bytes
  assert c.u64(b) == 0x1122_3344_5566_7788
  assert c.u64(t) == 0x42 and t0 <= c.u64(t + 8) <= k.timestamp()   # 16-byte structure: payload zero-extended
  assert c.gp_get == 1


def test_acquire_blocks_only_its_channel_and_resumes():
  k, g = machine()
  a, b = Chan(k), Chan(k)
  s, out = a.alloc(4, 4), a.alloc(8, 8)
  a.submit(sem(s, 5, OPERATION="ACQ_STRICT_GEQ") + sem(out, 1, OPERATION="RELEASE"))
  marker = b.alloc(4, 4)
  b.submit(sem(marker, 7, OPERATION="RELEASE"))
  g.poll()
  assert b.u32(marker) == 7 and a.u32(out) == 0 and a.gp_get == 0 and not k.faults
  a.vm.write_u32(s, 4)
  g.poll()
  assert a.u32(out) == 0
  a.vm.write_u32(s, 6)
  g.poll()
  assert a.u32(out) == 1 and a.gp_get == 1 and not g.poll()


@pytest.mark.parametrize("op,sv,pv,bits,ok", [
  ("ACQUIRE", 5, 5, 32, True), ("ACQUIRE", 5, 6, 32, False), ("ACQ_STRICT_GEQ", 0xFFFFFFFF, 1, 32, True),
  ("ACQ_CIRC_GEQ", 0xFFFFFFFF, 1, 32, False), ("ACQ_CIRC_GEQ", 1, 0xFFFFFFFF, 32, True),
  ("ACQ_CIRC_GEQ", 0x8000_0000_0000_0000, 1, 64, True), ("ACQ_CIRC_GEQ", 0, 1, 64, False),
  ("ACQ_AND", 0b1010, 0b0100, 32, False),
  ("ACQ_AND", 0b1010, 0b0010, 32, True), ("ACQ_NOR", 0xFFFFFFFF, 0, 32, False), ("ACQ_NOR", 0xFFFF0000, 0xFF, 32, True),
  ("ACQUIRE", 1 << 40, 1 << 40, 64, True)])
def test_acquire_conditions(op, sv, pv, bits, ok):
  """dev_pbdma.ref SEM_EXECUTE: ACQUIRE ==, STRICT_GEQ unsigned >=, CIRC_GEQ (sv - pv) as signed >= 0, AND (sv & pv)
  != 0, NOR ~(sv | pv) != 0, in the PAYLOAD_SIZE width."""
  k, g = machine()
  c = Chan(k)
  s, out = c.alloc(8, 8), c.alloc(4, 4)
  c.vm.write_u64(s, sv) if bits == 64 else c.vm.write_u32(s, sv)
  c.submit(sem(s, pv, OPERATION=op, PAYLOAD_SIZE="64BIT" if bits == 64 else "32BIT") + sem(out, 1, OPERATION="RELEASE"))
  g.poll()
  assert (c.u32(out) == 1) == ok and not k.faults


def _oracle(red: str, v: int, p: int, bits: int, signed: bool) -> int:
  """The dev_pbdma.ref reduction table, computed with numpy integers of the payload width."""
  t = np.dtype(f"{'i' if signed else 'u'}{bits // 8}")
  nv, np_ = np.array([v], f"u{bits // 8}").view(t)[0], np.array([p], f"u{bits // 8}").view(t)[0]
  r = {"IMIN": lambda: np.minimum(nv, np_), "IMAX": lambda: np.maximum(nv, np_), "IXOR": lambda: nv ^ np_,
       "IAND": lambda: nv & np_, "IOR": lambda: nv | np_, "IADD": lambda: (np.array([nv], t) + np.array([np_], t))[0],
       "INC": lambda: t.type(0) if nv >= np_ else nv + t.type(1),
       "DEC": lambda: np_ if nv == 0 or nv > np_ else nv - t.type(1)}[red]()
  return int(np.array([r], t).view(f"u{bits // 8}")[0])


CASES = [(r, b, s) for r in ("IMIN", "IMAX", "IXOR", "IAND", "IOR", "IADD") for b in (32, 64) for s in (False, True)
         if not (r == "IADD" and b == 64 and s)] + [("INC", 32, False), ("DEC", 32, False)]


@pytest.mark.parametrize("red,bits,signed", CASES)
def test_reductions_match_the_manual_table(red, bits, signed):
  k, g = machine()
  c = Chan(k)
  rng = np.random.default_rng(hash((red, bits, signed)) & 0xFFFF)
  vals = [0, 1, 2, 5, (1 << bits) - 1, 1 << (bits - 1), *rng.integers(0, 1 << 62, 6).tolist()]
  words, slots = [], []
  for v in vals:
    for p in (0, 3, (1 << bits) - 2, 1 << (bits - 1), int(rng.integers(0, 1 << 31))):
      v, p = v & ((1 << bits) - 1), p & ((1 << bits) - 1)
      va = c.alloc(8, 8)
      c.vm.write_u64(va, v) if bits == 64 else c.vm.write_u32(va, v)
      words += sem(va, p, OPERATION="REDUCTION", REDUCTION=red, PAYLOAD_SIZE="64BIT" if bits == 64 else "32BIT",
                   REDUCTION_FORMAT="SIGNED" if signed else "UNSIGNED")
      slots.append((va, v, p))
  c.submit(words)
  g.poll()
  assert not k.faults
  for va, v, p in slots:
    got = c.u64(va) if bits == 64 else c.u32(va)
    assert got == _oracle(red, v, p, bits, signed), (red, hex(v), hex(p))


@pytest.mark.parametrize("f,why", [(dict(OPERATION="REDUCTION", REDUCTION="IADD", PAYLOAD_SIZE="64BIT",
                                         REDUCTION_FORMAT="SIGNED"), "not supported"),
                                   (dict(OPERATION="REDUCTION", REDUCTION="INC", PAYLOAD_SIZE="64BIT",
                                         REDUCTION_FORMAT="UNSIGNED"), "not supported"),
                                   (dict(OPERATION="RELEASE", RELEASE_TIMESTAMP="EN"), "16-byte aligned")])
def test_semaphore_interrupt_cases_fault_the_channel(f, why):
  k, g = machine()
  c = Chan(k)
  va = c.alloc(32, 16) + 8
  c.submit(sem(va, 1, **f))
  g.poll()
  assert len(k.faults) == 1 and why in k.faults[0][1] and c.ch.error


def test_every_sec_op():
  """INC / NON_INC / ONE_INC / IMMD through the copy engine's registers and LOAD_INLINE_DATA of compute, plus NOP,
  count-0 headers, END_PB_SEGMENT (the rest of the segment is not decoded) and method data continued in the next
  GPFIFO entry."""
  k, g = machine()
  c = Chan(k)
  C = NP.nvclass(NP.HOPPER_COMPUTE_A)
  dst = c.alloc(64, 16)
  data = list(range(0xA0, 0xA8))
  up = (NP.pb_method(1, "SET_OBJECT", NP.HOPPER_COMPUTE_A, cls=NP.HOPPER_COMPUTE_A) +
        NP.pb_method(1, "LINE_LENGTH_IN", 32, 1, dst >> 32, dst & 0xFFFFFFFF, cls=NP.HOPPER_COMPUTE_A) +   # INC
        [0] + [NP.method_header("INC_METHOD", 1, 0x200, 0)] +                                            # NOP, count 0
        NP.pb_method(1, "LAUNCH_DMA", C.pack("LAUNCH_DMA", DST_MEMORY_LAYOUT="PITCH"), cls=NP.HOPPER_COMPUTE_A))
  inline = NP.pb_method(1, "LOAD_INLINE_DATA", *data, cls=NP.HOPPER_COMPUTE_A, sec_op="NON_INC_METHOD")
  c.submit(up + inline[:4])        # header + 3 data words here, 5 in the next segment
  c.submit(inline[4:])
  g.poll()
  assert not k.faults, k.faults
  assert np.frombuffer(c.vm.read(dst, 32), np.uint32).tolist() == data
  # ONE_INC: SEM_ADDR_LO then SEM_ADDR_HI, SEM_ADDR_HI ... ; IMMD: a 13-bit payload
  s = c.alloc(8, 8)
  c.submit([NP.method_header("ONE_INC", 0, H.method("SEM_ADDR_LO"), 3), s & 0xFFFFFFFF, 0x77, s >> 32] +
           NP.pb_immd(0, "SEM_PAYLOAD_LO", 0x1ABC, cls=HC) + NP.pb_immd(0, "SEM_PAYLOAD_HI", 0, cls=HC) +
           NP.pb_method(0, "SEM_EXECUTE", sem_exec(OPERATION="RELEASE"), cls=HC))
  g.poll()
  assert c.u32(s) == 0x1ABC and not k.faults
  # END_PB_SEGMENT: the ILLEGAL method after it is never decoded
  c.submit(sem(s, 9, OPERATION="RELEASE") + [7 << 29] + NP.pb_method(0, "ILLEGAL", 0, cls=HC))
  g.poll()
  assert c.u32(s) == 9 and not k.faults and c.gp_get == c.put


def test_subdevice_mask_skips_methods():
  k, g = machine()
  c = Chan(k)
  s = c.alloc(4, 4)
  ssdm = lambda m: (1 << 16) | (m << 4)
  c.submit([ssdm(0x2)] + sem(s, 1, OPERATION="RELEASE") + [ssdm(0xFFF)] + sem(s + 0, 2, OPERATION="ACQ_STRICT_GEQ"))
  c.submit(sem(s, 3, OPERATION="RELEASE"))
  g.poll()
  assert not k.faults and c.u32(s) == 0   # masked release never ran, so the acquire of >= 2 waits
  c.vm.write_u32(s, 2)
  g.poll()
  assert c.u32(s) == 3


def test_gpfifo_wraps_and_control_entries():
  k, g = machine()
  c = Chan(k, entries=4)
  s = c.alloc(4, 4)
  for i in range(10):
    c.submit(sem(s, i, OPERATION="RELEASE"))
    if i % 3 == 0: c.submit([], entry=NP.gp_control("NOP"))
    g.poll()
    assert c.u32(s) == i and c.gp_get == c.put
  assert not k.faults


@pytest.mark.parametrize("words,entry,why", [
  ([6 << 29], None, "invalid PB entry"), ([2 << 29 | 0x10], None, "invalid PB entry"),
  ([], NP.gp_control("ILLEGAL"), "control opcode ILLEGAL"), ([0x2002_0FFF, 1, 2], None, "wrap"),
  (NP.pb_method(0, "ILLEGAL", 0x12, cls=HC), None, "ILLEGAL method"),
  (NP.pb_method(0, 0x9C, 0, cls=HC), None, "host method 0x9c is not defined"),
  (NP.pb_method(6, 0x400, 0), None, "software method"),
  (NP.pb_method(1, 0x3FFC, 0), None, "not defined for class 0xcbc0"),
  (NP.pb_method(1, "SET_OBJECT", 0xC3C0, cls=HC), None, "no such object"),
  (NP.pb_method(1, "LOAD_INLINE_DATA", 5, cls=NP.HOPPER_COMPUTE_A), None, "without a LAUNCH_DMA"),
  ([], NP.gp_entry(0x7000_0000, 8), "GPU page fault")])
def test_bad_pushbuffers_fault_only_their_channel(words, entry, why):
  k, g = machine()
  bad, good = Chan(k), Chan(k)
  va = bad.submit(words, entry=entry)
  s = good.alloc(4, 4)
  good.submit(sem(s, 11, OPERATION="RELEASE"))
  g.poll()
  assert len(k.faults) == 1 and k.faults[0][0] is bad.ch and why in k.faults[0][1], k.faults
  assert f"channel {bad.ch.id}" in bad.ch.error and "GPFIFO entry 0" in bad.ch.error
  assert good.u32(s) == 11 and good.ch.error is None
  if entry is None and words:   # names the pushbuffer word that failed
    at = int(re.search(r"pushbuffer (0x[0-9a-f]+)", bad.ch.error).group(1), 16)
    assert va <= at < va + 4 * len(words)


def test_gpput_outside_the_ring_faults():
  k, g = machine()
  c = Chan(k, entries=8)
  c.ch.userd[NP.USERD_GP_PUT:NP.USERD_GP_PUT + 4] = (9).to_bytes(4, "little")
  g.poll()
  assert "outside the 8-entry GPFIFO" in k.faults[0][1]


def test_thread_mode_runs_without_polling():
  k = FakeNV()
  g = attach(k)
  c = Chan(k)
  s = c.alloc(4, 4)
  c.submit(sem(s, 42, OPERATION="RELEASE"))
  t = time.monotonic()
  while c.u32(s) != 42 and time.monotonic() - t < 5: time.sleep(0.001)
  assert c.u32(s) == 42
  k.free(c.ch)
  t = time.monotonic()
  while g._thread is not None and time.monotonic() - t < 5: time.sleep(0.001)
  assert g._thread is None            # the thread ends with the last channel


def test_unscheduled_channel_waits_for_gpfifo_schedule():
  k, g = machine()
  c = Chan(k)
  c.ch.scheduled = False
  s = c.alloc(4, 4)
  c.submit(sem(s, 3, OPERATION="RELEASE"))
  assert not g.poll() and c.u32(s) == 0 and not g.idle()
  c.ch.scheduled = True
  assert g.poll() and c.u32(s) == 3 and g.idle()


def test_threaded_cross_channel_timeline_on_two_gpus():
  """Four channels (two GPUs x two) in thread mode: step s of a channel waits for its predecessor channel's timeline
  to reach s (ACQ_STRICT_GEQ), then releases its own timeline to s + 1: a ring of dependencies
  that only completes if blocked channels are retried while the others run; every timeline ends at N, and the
  values seen along the way never go backwards."""
  k = FakeNV(("sm_90", "sm_80"))
  attach(k)
  vm = None
  chans = []
  for i in range(4):
    c = Chan(k, gpu=i % 2, vm=vm, base=0x1000_0000 + i * 0x40_0000)
    vm = c.vm   # one address space: the timelines are visible to all channels
    chans.append(c)
  tl = chans[0].alloc(64, 16)
  N = 30
  for i, c in enumerate(chans):
    words = []
    for step in range(N):
      prev = tl + 8 * ((i - 1) % 4)
      words += sem(prev, step, OPERATION="ACQ_STRICT_GEQ", PAYLOAD_SIZE="64BIT")
      words += sem(tl + 8 * i, step + 1, OPERATION="RELEASE", PAYLOAD_SIZE="64BIT")
      if step % 7 == 6:
        c.submit(words)
        words = []
    if words: c.submit(words)
  seen, t = [0] * 4, time.monotonic()
  while time.monotonic() - t < 20:
    now = [chans[0].u64(tl + 8 * i) for i in range(4)]
    assert all(a >= b for a, b in zip(now, seen))
    seen = now
    if now == [N] * 4: break
    time.sleep(0.001)
  assert seen == [N] * 4 and not k.faults
  for c in chans: c.close()
