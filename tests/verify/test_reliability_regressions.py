"""Findings of the reliability fuzz (gputwin/verify/reliability.py), each at its cause: shrunk reproducers turned into
tests with an independent oracle (llvm-mc-22's decoding, the real drivers' errnos, the runtime's error contract)."""
import errno
import shutil
import subprocess

import numpy as np
import pytest

from gputwin.errors import GPUFault
from gputwin.isa import assemble, disassemble, ptx
from gputwin.verify import reliability as R

LLVM_MC = shutil.which("llvm-mc-22")
PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k() {
  .reg .u32 %r<3>;
  mov.u32 %r1, OPERAND;
  ret;
}
"""


@pytest.mark.parametrize("operand", ["(" * 3000 + "1", "{" * 3000 + "%r1", "(" * 10 + "%r2" + ")" * 10])
def test_ptx_operands_nested_too_deeply_are_a_located_error(operand):
  """decode-ptx: a mutant with 3000 '(' raised RecursionError from the operand parser."""
  with pytest.raises(ptx.PtxError, match=r"k\.ptx:6:\d+: error: operand nested too deeply"):
    ptx.parse(PTX.replace("OPERAND", operand), "k.ptx")


def _smem_imm0(offset_field: int) -> bytes:
  """gfx942 s_load_dword s4, s[2:3] with IMM=0: the OFFSET field names the SGPR holding the byte offset."""
  base = bytearray(assemble("s_load_dword s4, s[2:3], s5", "gfx942"))
  hi = int.from_bytes(base[4:], "little") & ~0xFFFFF | offset_field
  return bytes(base[:4]) + hi.to_bytes(4, "little")


@pytest.mark.parametrize("field", [5, 0x40005, 0xFFF85])
def test_cdna_smem_offset_register_is_the_low_7_bits(field, monkeypatch):
  """exec-gfx942: IMM=0 with high OFFSET bits set indexed the SGPR file with the whole 20-bit field (IndexError).
  llvm-mc-22 decodes only the low 7 bits as the register (s5 for all three), so the load reads s5 bytes past s[2:3]."""
  word = _smem_imm0(field)
  assert disassemble(word, "gfx942") == ["s_load_dword s4, s[2:3], s5"]
  if LLVM_MC:
    r = subprocess.run([LLVM_MC, "-disassemble", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx942"], capture_output=True,
                       text=True, input=" ".join(f"0x{b:02x}" for b in word))
    assert r.stdout.split() == ["s_load_dword", "s4,", "s[2:3],", "s5"]
  body = "\n".join(["  s_load_dwordx2 s[2:3], s[0:1], 0x0", "  s_mov_b32 s5, 12", "  s_waitcnt lgkmcnt(0)",
                    *(f"  .long {int.from_bytes(word[i:i + 4], 'little'):#x}" for i in (0, 4)),
                    "  v_lshlrev_b32 v1, 2, v0", "  s_waitcnt lgkmcnt(0)", "  v_mov_b32 v2, s4",
                    "  global_store_dword v1, v2, s[2:3] offset:256"])
  co = R.kernel("gfx942", body, wave32=False)
  from gputwin.emu import launch
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    out = np.arange(128, dtype=np.uint32)
    launch(co, "k", grid=1, block=64, args=[out], checks=False)
    np.testing.assert_array_equal(out[64:], 3)          # out[12 / 4]


@pytest.mark.parametrize("device", ["mock:sm_90", "mock:a630"])
def test_runtime_wait_timeout_is_a_queue_error(device):
  """cmd-gpfifo: a pushbuffer word that ends the segment (SEC_OP 7, END_PB_SEGMENT) before the timeline release
  left the wait to raise a bare TimeoutError; like the AMD runtime's, the NVIDIA and Qualcomm waits raise
  QueueTimeout (a QueueFault, hence a gputwin GPUFault, and still a TimeoutError)."""
  from gputwin.runtime import QueueTimeout
  dev = R._device(device)
  try:
    if device == "mock:sm_90":
      q = dev.compute
      v = q.submit([0xF16A9CBE], "end of segment")
    else:
      from gputwin.abi import adreno as A
      q, b = R._QcomQueue(dev), dev.alloc(4096, host=True)
      v = q.submit(A.cp_wait_reg_mem("a630", b.va, 5, function="WRITE_EQ"), "never satisfied")
    with pytest.raises(QueueTimeout) as e:
      q.wait(v, timeout=0.3)
    assert isinstance(e.value, GPUFault) and isinstance(e.value, TimeoutError) and "waited 0.3 s" in str(e.value)
  finally:
    dev.close()


def test_nv_ioctl_with_an_empty_buffer_is_efault():
  """ioctl-nv: an empty bytearray as the argument raised ValueError from ctypes; nvidia.ko copies _IOC_SIZE bytes
  from the user pointer (copy_from_user) and fails with EFAULT."""
  from gputwin.mock.nv.driver import MockNV
  m = MockNV("sm_90", sync=True)
  fd = m.open("/dev/nvidiactl")
  with pytest.raises(OSError) as e:
    m.ioctl(fd, 3440309087, bytearray())
  assert e.value.errno == errno.EFAULT


def test_ptx_blocks_nested_too_deeply_are_a_located_error():
  """decode-ptx: 3000 nested `{` scopes in a function body raised RecursionError."""
  src = PTX.replace("  mov.u32 %r1, OPERAND;", "{" * 3000 + "}" * 3000)
  with pytest.raises(ptx.PtxError, match=r"k\.ptx:6:\d+: error: blocks nested too deeply"):
    ptx.parse(src, "k.ptx")
  ptx.parse(PTX.replace("  mov.u32 %r1, OPERAND;", "{" * 50 + "mov.u32 %r1, 1;" + "}" * 50), "k.ptx")


@pytest.mark.parametrize("arch,word", [("gfx1100", "000040cc00000000"), ("gfx1200", "004040cc0000001800000000")])
def test_wmma_with_scalar_matrix_operands_stops_with_a_location(arch, word, monkeypatch):
  """exec-gfx1100/gfx1200: V_WMMA with SGPR codes in its matrix fields (llvm-mc-22 prints "Invalid register, operand
  has 'VReg_256' register class") read the SGPR number as an AGPR slice (IndexError); now a located EmuError on
  both tiers. (gfx1200: op_sel_hi all ones, the only value llvm-mc-22 decodes gfx12 WMMA with.)"""
  from gputwin.emu import launch
  from gputwin.errors import EmuError
  raw = bytes.fromhex(word)
  body = "\n".join(f"  .long {int.from_bytes(raw[i:i + 4], 'little'):#x}" for i in range(0, len(raw), 4))
  co = R.kernel(arch, body, vgprs=64)
  msgs = set()
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    with pytest.raises(EmuError, match=r"V_WMMA_F32_16X16X16_F16: the A matrix must be in VGPRs, not 's'") as e:
      launch(co, "k", grid=1, block=32, args=[np.zeros(64, np.uint32)], checks=False)
    assert e.value.arch == arch and e.value.pc == 0x1400 and "v_wmma_f32_16x16x16_f16" in e.value.inst
    msgs.add(str(e.value))
  assert len(msgs) == 1


def test_access_wrapping_past_2_64_is_a_page_fault(monkeypatch):
  """fault-gfx950: a global load at 0xfffffffffffffffc (+4 wraps to 0) passed the region check and indexed a buffer
  with a negative offset (IndexError); it is a GPU page fault at that VA, on both tiers."""
  from gputwin.emu import launch
  from gputwin.errors import EmuFault
  co = R.kernel("gfx950", "  v_mov_b32 v2, 0xfffffffc\n  v_mov_b32 v3, 0xffffffff\n"
                "  global_load_dword v2, v[2:3], off\n  s_waitcnt vmcnt(0)", wave32=False)
  for jit in ("0", "force"):
    monkeypatch.setenv("GPUTWIN_JIT", jit)
    with pytest.raises(EmuFault, match=r"GPU page fault: read of 4 bytes at VA 0xfffffffffffffffc"):
      launch(co, "k", grid=1, block=64, args=[np.zeros(64, np.uint32)], checks=False)


def test_ptx_parameterized_registers_are_ranges():
  """decode-ptx: `.reg .pred %p<2147483648>` expanded 2^31 names (the parse never ended); ptxas accepts it at once.
  The declaration is a range now: the last register exists, the next does not, duplicates are still found."""
  import time
  body = "  .reg .pred %p<2147483648>;\n  .reg .u32 %r<4>;\n  @%p2147483647 mov.u32 %r3, 1;"
  t = time.perf_counter()
  ptx.parse(PTX.replace("  .reg .u32 %r<3>;\n  mov.u32 %r1, OPERAND;", body), "k.ptx")
  assert time.perf_counter() - t < 1.0
  with pytest.raises(ptx.PtxError, match="undefined register '%p2147483648'"):
    ptx.parse(PTX.replace("  .reg .u32 %r<3>;\n  mov.u32 %r1, OPERAND;", body.replace("2147483647 ", "2147483648 ")),
              "k.ptx")
  for dup, name in (("  .reg .u32 %r2;", "%r2"), ("  .reg .u32 %r<2>;", "%r0")):
    with pytest.raises(ptx.PtxError, match=f"duplicate register '{name}'"):
      ptx.parse(PTX.replace("  mov.u32 %r1, OPERAND;", dup), "k.ptx")


def _run_stream(device: str, queue: str, words: list[int]) -> bytes:
  """A generated stream (BUF addresses) through the cmd-* path on a fresh synchronous machine: the buffer after."""
  dev = R._device(device, sync=True)
  try:
    buf, q = dev.alloc(0x10000, host=True), getattr(dev, queue)
    R.case_clock(dev)
    q.submit(R._relocate(words, buf.va), "test")
    assert R._drive(dev, q) is None
    q.wait(timeout=5.0)
    return bytes(buf.view())
  finally:
    dev.close()


def test_generated_streams_address_the_buffer():
  """cmd-*: the high-dword marker of a BUF address (0xB0F0CAFE) lies inside BUF_VA's low-dword range and was
  relocated as a low dword, so every valid write the generators aimed at the buffer page-faulted instead. A PM4
  WRITE_DATA to BUF+16 (the packet: control, address lo/hi, data) writes its three dwords there."""
  from gputwin.abi import pm4 as P
  assert R._relocate([R.BUF_VA + 8, R.BUF_HI, 7], 0x7f12_3456_0000) == [0x3456_0008, 0x7f12, 7]
  out = np.frombuffer(_run_stream("mock:gfx1100", "compute",
                                  P.pkt(P.WRITE_DATA, P.WRITE_DATA_DST_MEM, R.BUF_VA + 16, R.BUF_HI, 5, 6, 7)), "<u4")
  assert list(out[3:8]) == [0, 5, 6, 7, 0]


def test_semaphore_timestamps_are_case_time():
  """cmd-gpfifo (seed 2026, cases 6384 and 6878: nondet): a host-class semaphore release with RELEASE_TIMESTAMP writes
  the 16-byte structure (payload zero-extended at +0, the GPU timer at +8) into the buffer whose digest is the
  outcome, so the outcome held wall time. A case's GPU clocks now count reads (`case_clock`): the same stream gives the
  same bytes on two fresh machines, and the structure is there."""
  from gputwin.abi import nvpush as NP
  HC = NP.HOPPER_CHANNEL_GPFIFO_A
  words = NP.pb_method(0, "SEM_ADDR_LO", R.BUF_VA + 0x40, R.BUF_HI, 0x1234, 0,
                       NP.nvclass(HC).pack("SEM_EXECUTE", OPERATION="RELEASE", RELEASE_TIMESTAMP="EN"), cls=HC)
  a, b = (_run_stream("mock:sm_90", "compute", words) for _ in range(2))
  assert a == b
  payload, ts = np.frombuffer(a[0x40:0x50], "<u8")
  assert payload == 0x1234 and ts != 0
  c = R.CATEGORIES["cmd-gpfifo"]
  for i in (6384, 6878):
    assert R.check(c, c.make(R.case_rng("cmd-gpfifo", 2026, i)))[0] == "ok"


def test_gpu_timestamps_are_the_machines_clock():
  """A case's counted GPU time used to be installed by patching the AMD GPU module's globals (`gpu_clock`, `time`)
  for the length of the case; the mock machines now take a clock (MockKernel.clock, MockNV.clock) that
  `case_clock` sets on the case's own machine. PM4 RELEASE_MEM of the GPU and system clocks and an SDMA timestamp
  give the same bytes on two fresh machines, read from the case's clock (not wall time), and a new machine still
  has the real clock."""
  import time
  from gputwin.abi import pm4 as P
  from gputwin.mock.kfd.driver import MockKernel
  at = lambda off: (R.BUF_HI << 32) | (R.BUF_VA + off)  # noqa: E731
  case = range(1 << 40, (1 << 40) + 10**6)         # case_clock: 2^40 + 1000 ns per read
  for queue, words, scale in (("compute", P.release_mem(at(0x40), data_sel=P.DATA_SEL_GPU_CLOCK) +
                               P.release_mem(at(0x48), data_sel=P.DATA_SEL_SYS_CLOCK), (10, 1)),
                              ("sdma", P.sdma_timestamp(at(0x40)) + P.sdma_timestamp(at(0x48)), (10, 10))):
    a, b = (_run_stream("mock:gfx1100", queue, words) for _ in range(2))
    assert a == b, queue
    stamps = [int(v) * k for v, k in zip(np.frombuffer(a[0x40:0x50], "<u8"), scale)]   # GPU clock: 100 MHz
    assert all(t in case for t in stamps) and stamps[0] < stamps[1], (queue, stamps)
  now = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
  assert abs(MockKernel("gfx1100").clock() - now) < 10**9
