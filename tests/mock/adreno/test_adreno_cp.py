"""The virtual Adreno's command processor behind MockKGSL, driven through the kgsl UAPI (GPU_COMMAND) with PM4 built
by gputwin.abi.adreno: memory and register packets, IB calls/chains and their limits, waits, compute dispatch from
directly loaded state and non-bindless descriptors, faults contained to their context, and a packet fuzz (random and
mutated type-4/type-7 streams) after which a new context still works."""
import ctypes, errno, sys
from pathlib import Path

import numpy as np
import pytest

from gputwin.abi import adreno as A, kgsl as K
from gputwin.mock.adreno import machine

sys.path.insert(0, str(Path(__file__).parents[2] / "emu" / "ir3"))
from test_ir3_mesa_run import KERNELS  # noqa: E402

DEV, CTX = "/dev/kgsl-3d0", K.KGSL_CONTEXT_PREAMBLE | K.KGSL_CONTEXT_NO_GMEM_ALLOC
PROT_RW, MAP_SHARED = 3, 1


class Rig:
  """A sync-mode kgsl machine with the virtual Adreno, one fd, helpers for memory and submissions."""

  def __init__(self, target, **kw):
    self.k = machine(target, sync=True, wait_timeout=0.02, max_packets=20_000, **kw)
    self.fd, self.gen, self.target = self.k.open(DEV), A.gen_of(target), target

  def io(self, name, **kw):
    a = getattr(K, next(r[3] for r in K.IOCTLS if r[0] == name).__name__)(**kw)
    self.k.ioctl(self.fd, K.IOCTL_NUMBERS[name], a)
    return a

  def ctx(self): return self.io("DRAWCTXT_CREATE", flags=CTX).drawctxt_id

  def alloc(self, n, dtype=np.uint32):
    o = self.io("GPUOBJ_ALLOC", size=n)
    va = self.io("GPUOBJ_INFO", id=o.id).gpuaddr
    cpu = self.k.mmap(self.fd, o.id << 12, o.mmapsize, PROT_RW, MAP_SHARED)
    return va, np.frombuffer((ctypes.c_char * n).from_address(cpu), dtype)

  def ib(self, words):
    va, m = self.alloc(max(len(words), 1) * 4 + 4096)
    m[:len(words)] = words
    return va

  def submit(self, c, words=None, ib=None, nbytes=None):
    """GPU_COMMAND of one IB (words written to a fresh buffer, or an address), then wait: 0 or the errno."""
    va = self.ib(words) if ib is None else ib
    obj = K.kgsl_command_object(gpuaddr=va, size=nbytes or len(words) * 4, flags=K.KGSL_CMDLIST_IB)
    try:
      ts = self.io("GPU_COMMAND", cmdlist=ctypes.addressof(obj), cmdsize=ctypes.sizeof(obj), numcmds=1,
                   context_id=c).timestamp
      self.io("DEVICE_WAITTIMESTAMP_CTXTID", context_id=c, timestamp=ts, timeout=20000)
    except OSError as e:
      return e.errno
    return 0

  def reason(self, c): return self.k.contexts[c].fault_reason

  def works(self):
    """A fresh context writes a dword with CP_MEM_WRITE and retires."""
    c = self.ctx()
    va, m = self.alloc(4096)
    assert self.submit(c, A.cp_mem_write(self.gen, va, 0xC0FFEE)) == 0 and m[0] == 0xC0FFEE
    self.io("DRAWCTXT_DESTROY", drawctxt_id=c)


@pytest.fixture(params=["a630", "a730"])
def rig(request): return Rig(request.param)


def test_memory_and_register_packets(rig):
  g, (va, m) = rig.gen, rig.alloc(4096)
  m[16:22] = [10, 3, 2, 0xFFFFFFFF, 1, 0]
  m[24:28] = [0xFFFFFFFF, 0, 5, 0]       # two 64-bit values: 2**32 - 1 and 5
  reg = A.reg(g, "SP_CS_INSTRLEN")
  w = A.cp_nop(g, 3) + A.cp_set_mode(g, 0) + A.cp_set_marker(g, MODE="RM6_COMPUTE") + A.cp_wait_for_idle(g)
  w += A.cp_skip_ib2_enable_global(g, 0) + A.cp_skip_ib2_enable_local(g, 0)
  w += A.cp_mem_write(g, va, 1, 2, 3)
  w += A.cp_mem_to_mem(g, va + 4 * 4, va + 16 * 4, va + 17 * 4, va + 18 * 4, neg=(False, False, True))   # 10 + 3 - 2
  w += A.cp_mem_to_mem(g, va + 5 * 4, va + 19 * 4, va + 20 * 4)                                      # wraps to 0
  w += A.cp_mem_to_mem(g, va + 8 * 4, va + 24 * 4, va + 26 * 4, double=True)                          # 2**32 + 4
  w += A.pkt4(reg, 0x1234) + A.cp_reg_to_mem(g, reg, va + 12 * 4)
  w += A.cp_reg_to_mem(g, A.reg(g, "CP_ALWAYS_ON_COUNTER"), va + 14 * 4, 2, b64=True)
  w += A.cp_event_write(g, "CACHE_FLUSH_TS", va + 6 * 4, 77) + A.cp_event_write(g, "CACHE_FLUSH_TS")
  c = rig.ctx()
  assert rig.submit(c, w) == 0
  assert list(m[:6]) == [1, 2, 3, 0, 11, 0] and m[6] == 77 and m[8:10].view(np.uint64)[0] == (1 << 32) + 4
  assert m[12] == 0x1234 and m[14:16].view(np.uint64)[0] > 0


def test_ib_calls_chains_and_the_nesting_limit(rig):
  g, (va, m) = rig.gen, rig.alloc(4096)
  ib3 = A.cp_mem_write(g, va + 8, 3)
  ib3va = rig.ib(ib3)
  ib2 = A.cp_mem_write(g, va + 4, 2) + A.cp_indirect_buffer(g, ib3va, len(ib3))
  ib2va = rig.ib(ib2)
  tail = A.cp_mem_write(g, va + 12, 4)
  tailva = rig.ib(tail)
  ib1 = A.cp_mem_write(g, va, 1) + A.cp_indirect_buffer(g, ib2va, len(ib2)) + \
    A.cp_indirect_buffer(g, tailva, len(tail), chain=True)
  assert rig.submit(rig.ctx(), ib1) == 0 and list(m[:4]) == [1, 2, 3, 4]
  ib4 = A.cp_indirect_buffer(g, ib3va, len(ib3))
  deep = A.cp_indirect_buffer(g, rig.ib(A.cp_indirect_buffer(g, rig.ib(ib4), len(ib4))), 4)   # IB1->IB2->IB3->IB4
  c = rig.ctx()
  assert rig.submit(c, deep) == errno.EDEADLK and "nest at most" in rig.reason(c)
  c = rig.ctx()
  loop, lm = rig.alloc(4096)
  lm[:4] = A.cp_indirect_buffer(g, loop, 4, chain=True)                        # an IB chaining to itself
  assert rig.submit(c, ib=loop, nbytes=16) == errno.EDEADLK and "long IB detection" in rig.reason(c)
  rig.works()


def test_waits_that_hold_and_one_that_hangs(rig):
  g, (va, m) = rig.gen, rig.alloc(4096)
  m[0] = 5
  w = A.cp_wait_reg_mem(g, va, 5) + A.cp_wait_reg_mem(g, va, 4, function="WRITE_GT") + \
    A.cp_wait_reg_mem(g, va, 0x4, mask=0x4, function="WRITE_EQ")
  if g == "A6XX": w += A.cp_wait_mem_gte(g, va, 5)
  assert rig.submit(rig.ctx(), w + A.cp_mem_write(g, va + 4, 9)) == 0 and m[1] == 9
  c = rig.ctx()
  assert rig.submit(c, A.cp_wait_reg_mem(g, va, 6)) == errno.EDEADLK and "GPU hang" in rig.reason(c)
  rig.works()


@pytest.mark.skipif(not KERNELS.is_dir(), reason="needs ../shared/vendor/ir3/kernels (Mesa ir3 output)")
def test_dispatch_from_direct_state_and_non_bindless_descriptors(rig):
  """saxpy with its code and const file in the CP_LOAD_STATE6 payloads, IBO/UBO descriptors in the ST6_IBO/ST6_UBO
  slots (SP_CS_CONFIG without BINDLESS_*), the grid read by CP_EXEC_CS_INDIRECT; y equals numpy."""
  from gputwin.isa.ir3 import listing
  from gputwin.runtime.qcom import ibo_descriptor, ubo_descriptor
  g, arch = rig.gen, rig.target
  code = (KERNELS / arch / "saxpy.bin").read_bytes()
  sh = listing.read(KERNELS / arch / "saxpy.bin")
  n, x = 200, np.arange(256, dtype=np.float32)
  (xva, xm), (yva, ym), (uva, um), (gva, gm) = (rig.alloc(4096, np.float32), rig.alloc(4096, np.float32),
                                                 rig.alloc(4096), rig.alloc(4096))
  xm[:256], ym[:256] = x, 1
  um[:2] = [np.float32(2).view(np.uint32), n]
  gm[:3] = [4, 1, 1]
  consts = sh.const_file((4, 1, 1), {4: um[:16]})
  units = -(-len(code) // 128)
  body = np.frombuffer(code.ljust(units * 128, b"\0"), np.uint32)
  f = lambda name, **kw: A.reg_pack(g, name, **kw)
  r = lambda name, *v: A.pkt4(A.reg(g, name), *v)
  ts = "THREAD128" if sh.wave_size == 128 else "THREAD64"
  w = r("HLSQ_INVALIDATE_CMD", f("HLSQ_INVALIDATE_CMD", CS_STATE=1, CS_IBO=1))
  w += r("SP_CS_CTRL_REG0", f("SP_CS_CTRL_REG0", THREADSIZE=ts)) + r("SP_CS_CTRL_REG1", f("SP_CS_CTRL_REG1",
                                                                                           SHARED_SIZE=1))
  w += r("SP_CS_CONFIG", f("SP_CS_CONFIG", ENABLED=1)) + r("SP_CS_INSTRLEN", units)
  w += r("SP_CS_CNTL_0", f("SP_CS_CNTL_0", LOCALIDREGID=0, WGIDCONSTID=48 * 4, WGSIZECONSTID=0xFC,
                           WGOFFSETCONSTID=0xFC)) + r("HLSQ_CS_CNTL_1", f("HLSQ_CS_CNTL_1", LINEARLOCALIDREGID=0xFC))
  ld = lambda typ, off, units, payload: A.cp_load_state6(g, "SB6_CS_SHADER", typ, "SS6_DIRECT", off, units,
                                                         payload=tuple(int(v) for v in payload), stage="FRAG")
  w += ld("ST6_SHADER", 0, units, body) + ld("ST6_CONSTANTS", 0, 512, consts)
  w += ld("ST6_IBO", 0, 2, ibo_descriptor(xva, 1024) + ibo_descriptor(yva, 1024)) + ld("ST6_UBO", 4, 1,
                                                                                         ubo_descriptor(uva, 64))
  w += A.cp_exec_cs_indirect(g, gva, (64, 1, 1))
  assert rig.submit(rig.ctx(), w) == 0
  ref = np.ones(256, np.float32)
  ref[:n] += np.float32(2) * x[:n]
  assert (ym[:256] == ref).all() and rig.k.cp.dispatches == 1


def test_faults_are_contained_to_their_context(rig):
  g, (va, m) = rig.gen, rig.alloc(4096)
  other = rig.ctx()
  cases = [
    (A.pkt7(g, "CP_DRAW_INDX", 0, 0, 0), "CP_DRAW_INDX"),                                # a packet no CP here runs
    ([A.pkt4_header(0x100, 1) ^ (1 << 27), 0], "bad PM4 header"),                        # register parity
    ([0x12345678], "bad PM4 header"),                                                    # no type-4/7 header
    (A.pkt4(0x100, 1)[:1], "needs 1 dwords"),                                             # runs past the IB
    (A.cp_indirect_buffer(g, 0x6_0000_0000, 16), "CP read"),                              # an unmapped IB2
    (A.cp_mem_write(g, 0x6_0000_0000, 1), "CP write"),                                   # an unmapped address
    (A.cp_exec_cs(g, 1, 1, 1), "SP_CS_INSTRLEN is 0"),                                   # no shader
    (A.cp_load_state6(g, "SB6_CS_SHADER", "ST6_CONSTANTS", "SS6_DIRECT", 0, 2, payload=(1,), stage="FRAG"),
     "need 8 payload dwords"),
  ]
  for words, why in cases:
    c = rig.ctx()
    assert rig.submit(c, words) == errno.EDEADLK, why
    assert why in rig.reason(c) and rig.target in rig.reason(c)
    assert rig.k.gpu_error(0, rig.k.memstore_addr(c, "eoptimestamp")) is not None
    rig.io("DRAWCTXT_DESTROY", drawctxt_id=c)
  assert rig.submit(other, A.cp_mem_write(g, va, 5)) in (0, errno.EPROTO) and m[0] == 5   # innocent: goes on
  rig.works()


def test_threaded_cp_runs_contexts_side_by_side():
  """Without sync mode each context has a CP thread: a context blocked in CP_WAIT_REG_MEM does not stop another,
  whose write releases it."""
  k = machine("a630", wait_timeout=5.0)
  r = Rig.__new__(Rig)
  r.k, r.fd, r.gen, r.target = k, k.open(DEV), "A6XX", "a630"
  va, m = r.alloc(4096)
  a, b = r.ctx(), r.ctx()
  wa = r.ib(A.cp_wait_reg_mem("A6XX", va, 1) + A.cp_mem_write("A6XX", va + 4, 2))
  obj = K.kgsl_command_object(gpuaddr=wa, size=4 * (7 + 4), flags=K.KGSL_CMDLIST_IB)
  ts = r.io("GPU_COMMAND", cmdlist=ctypes.addressof(obj), cmdsize=ctypes.sizeof(obj), numcmds=1, context_id=a).timestamp
  assert r.submit(b, A.cp_mem_write("A6XX", va, 1)) == 0
  r.io("DEVICE_WAITTIMESTAMP_CTXTID", context_id=a, timestamp=ts, timeout=10000)
  assert list(m[:2]) == [1, 2]


def _random_stream(rng, gen, va):
  """Type-4 writes to compute registers or anywhere, type-7 packets of the generation's opcodes with random or
  plausible payloads (addresses inside `va`'s page now and then), and raw garbage."""
  ops, regs = list(A.OPCODES[gen].values()), list(A.reg_names(gen))
  w = []
  for _ in range(rng.integers(1, 12)):
    k = rng.integers(0, 10)
    n = int(rng.integers(0, 8))
    pay = [int(v) for v in rng.integers(0, 1 << 32, n, dtype=np.uint64)]
    if n >= 2 and rng.random() < 0.5: pay[:2] = A.lo_hi(va + 4 * int(rng.integers(0, 1000)))
    if k < 4: w += A.pkt4(int(rng.choice(regs)) if rng.random() < 0.8 else int(rng.integers(0, 0x40000)), *pay)
    elif k < 9: w += A.pkt7(gen, int(rng.choice(ops)), *pay)
    else: w += [int(v) for v in rng.integers(0, 1 << 32, n + 1, dtype=np.uint64)]
  return w


@pytest.mark.parametrize("target", ["a630", "a730"])
def test_fuzz_random_packet_streams(target):
  rig = Rig(target, max_instructions=100_000)
  rng = np.random.default_rng(18)
  va, _ = rig.alloc(8192)
  outcomes = set()
  for _ in range(300):
    c = rig.ctx()
    outcomes.add(rig.submit(c, _random_stream(rng, rig.gen, va)))
    rig.io("DRAWCTXT_DESTROY", drawctxt_id=c)
  assert outcomes <= {0, errno.EDEADLK, errno.EPROTO} and errno.EDEADLK in outcomes and 0 in outcomes
  rig.works()


def _valid_stream(rig, va, code_va=None):
  g = rig.gen
  w = A.cp_mem_write(g, va, 1, 2) + A.cp_mem_to_mem(g, va + 8, va, va + 4) + A.cp_wait_reg_mem(g, va, 1)
  w += A.pkt4(A.reg(g, "SP_CS_INSTRLEN"), 1) + A.cp_reg_to_mem(g, A.reg(g, "SP_CS_INSTRLEN"), va + 12)
  w += A.pkt4(A.reg(g, "SP_CS_OBJ_START"), *A.lo_hi(code_va or va)) + \
    A.pkt4(A.reg(g, "HLSQ_CS_CNTL_1"), A.reg_pack(g, "HLSQ_CS_CNTL_1", LINEARLOCALIDREGID=0xFC)) + \
    A.pkt4(A.reg(g, "SP_CS_CNTL_0"), A.reg_pack(g, "SP_CS_CNTL_0", LOCALIDREGID=0, WGIDCONSTID=192, WGSIZECONSTID=0xFC,
                                                  WGOFFSETCONSTID=0xFC))
  w += A.cp_exec_cs(g, 2, 1, 1) + A.cp_event_write(g, "CACHE_FLUSH_TS", va + 16, 7)
  return w


@pytest.mark.parametrize("target", ["a630", "a730"])
def test_fuzz_mutated_valid_streams(target):
  """A valid stream (memory packets, a wait, registers, a dispatch of a tiny shader, an event write) with flipped
  bits, replaced, dropped or duplicated dwords."""
  from gputwin.isa.ir3 import assemble
  rig = Rig(target, max_instructions=100_000)
  rng = np.random.default_rng(7)
  va, m = rig.alloc(8192)
  code_va, cm = rig.alloc(4096, np.uint8)
  prog = np.frombuffer(assemble("(nop3) shl.b r0.w, r48.x, 6\n(nop3) add.u r0.w, r0.w, r0.x\nend\nnop\n", target),
                       np.uint8)
  cm[:len(prog)] = prog
  good = _valid_stream(rig, va, code_va)
  assert rig.submit(rig.ctx(), good) == 0 and list(m[:5]) == [1, 2, 3, 1, 7]
  outcomes = set()
  for _ in range(300):
    w = list(good)
    for _ in range(rng.integers(1, 4)):
      i, k = int(rng.integers(0, len(w))), rng.integers(0, 4)
      if k == 0: w[i] ^= 1 << int(rng.integers(0, 32))
      elif k == 1: w[i] = int(rng.integers(0, 1 << 32, dtype=np.uint64))
      elif k == 2 and len(w) > 1: del w[i]
      else: w.insert(i, w[i])
    c = rig.ctx()
    m[:5] = 0
    outcomes.add(rig.submit(c, w))
    rig.io("DRAWCTXT_DESTROY", drawctxt_id=c)
  assert outcomes <= {0, errno.EDEADLK, errno.EPROTO} and errno.EDEADLK in outcomes and 0 in outcomes
  rig.works()
