"""Compute launches on the virtual NVIDIA GPU: nvcc-compiled PTX in a ptxas-built program image, launched through a
QMD (V03 by SEND_PCAS, V04 inline, V05 by SEND_PCAS + SEND_SIGNALING_PCAS_B), parameters in constant bank 0 at the
offsets ptxas recorded; results against numpy and byte-for-byte against gputwin.emu.launch. Faults of a kernel or
a QMD stop only that channel."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from nvfake import Chan, FakeNV

from gputwin.abi import nvpush as NP
from gputwin.emu import launch as emu_launch
from gputwin.errors import GPUPageFault
from gputwin.isa.ptx.cubin import build, read_program
from gputwin.mock.nvgpu import attach

NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not installed")

SRC = r"""
extern "C" __global__ void saxpy(float *out, const float *x, const float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
extern "C" __global__ void reverse_dyn(unsigned *out, int n) {
  extern __shared__ unsigned s[];
  s[threadIdx.x] = threadIdx.x * 3 + blockIdx.x * 1000 + blockIdx.y * 100000;
  __syncthreads();
  unsigned i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s[blockDim.x - 1 - threadIdx.x] + gridDim.x;
}
"""
_CACHE: dict = {}


def compiled(arch: str) -> tuple[str, bytes]:
  """(PTX from nvcc, program image with ptxas's cubin) for `arch`."""
  if arch not in _CACHE:
    with tempfile.TemporaryDirectory() as t:
      (Path(t) / "k.cu").write_text(SRC)
      subprocess.run([NVCC, "-ptx", f"-arch={arch}", "k.cu", "-o", "k.ptx"], cwd=t, check=True, capture_output=True)
      ptx = (Path(t) / "k.ptx").read_text()
    _CACHE[arch] = (ptx, build(ptx, arch))
  return _CACHE[arch]


COMPUTE = {"sm_90": NP.HOPPER_COMPUTE_A, "sm_80": NP.AMPERE_COMPUTE_B}


class Launcher:
  """What a runtime does for one launch: image in its own mapping, constant bank 0 with the parameters, a QMD."""

  def __init__(self, k, arch="sm_90", **kw):
    self.c = Chan(k, gpu=[g.arch for g in k.gpus].index(arch), compute=COMPUTE[arch], **kw)
    self.arch, self.cid = arch, COMPUTE[arch]
    self.ptx, image = compiled(arch)
    self.prog = read_program(image)
    self.image_va = self.c.mapping(image)

  def array(self, a: np.ndarray) -> int:
    va = self.c.alloc(max(a.nbytes, 4), 256)
    self.c.vm.write(va, a.tobytes())
    return va

  def qmd(self, version, kernel, grid, block, args, dyn=0, releases=None, **over) -> bytes:
    kern = self.prog.kernels[kernel]
    cb = self.c.alloc(0x1000, 256)
    for (off, size), v in zip(kern.params, args):
      self.c.vm.write(cb + kern.param_offset + off,
                      v.tobytes() if isinstance(v, np.generic) else int(v).to_bytes(size, "little"))
    f = dict(program=self.image_va + kern.text_offset, grid=grid, block=block, shared=kern.shared_static + dyn,
             cbufs={0: (cb, 0x1000)}, releases=releases, registers=kern.regs)
    f.update(over)
    return NP.qmd_build(version, **f)

  def send_pcas(self, raw: bytes, action="INVALIDATE_COPY_SCHEDULE") -> list[int]:
    va = self.c.alloc(len(raw), 256)
    self.c.vm.write(va, raw)
    C = NP.nvclass(self.cid)
    sig = "SEND_SIGNALING_PCAS2_B" if action else "SEND_SIGNALING_PCAS_B"
    tail = NP.pb_method(1, sig, C.pack(sig, **(dict(PCAS_ACTION=action) if action else dict(INVALIDATE=1, SCHEDULE=1))),
                        cls=self.cid)
    return (NP.pb_method(1, "SET_OBJECT", self.cid, cls=self.cid) +
            NP.pb_method(1, "SEND_PCAS_A", va >> 8, cls=self.cid) + tail)

  def inline(self, raw: bytes) -> list[int]:
    va = self.c.alloc(len(raw), 256)
    C = NP.nvclass(self.cid)
    a = (va >> 8 >> 32) | (C.pack("SET_INLINE_QMD_ADDRESS_A", INLINE_SIZE="INLINE_384") if len(raw) == 384 else 0)
    return (NP.pb_method(1, "SET_OBJECT", self.cid, cls=self.cid) +
            NP.pb_method(1, "SET_INLINE_QMD_ADDRESS_A", a, (va >> 8) & 0xFFFFFFFF, cls=self.cid) +
            NP.pb_method(1, C.method("LOAD_INLINE_QMD_DATA", 0), *np.frombuffer(raw, np.uint32).tolist()))


def machine(archs=("sm_90",)):
  k = FakeNV(archs, sync=True)
  return k, attach(k)


@pytest.mark.parametrize("version,how", [("V03_00", "pcas2"), ("V04_00", "inline"), ("V05_00", "pcas"),
                                         ("V03_00", "inline")])
def test_saxpy_matches_numpy_and_the_emulator(version, how):
  k, g = machine()
  L = Launcher(k)
  n = 1000
  rng = np.random.default_rng(7)
  x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
  out, sem = L.array(np.zeros(n, np.float32)), L.c.alloc(16, 16)
  raw = L.qmd(version, "saxpy", (4, 1, 1), (256, 1, 1), [out, L.array(x), L.array(y), np.float32(1.5), np.int32(n)],
              releases=[dict(va=sem, payload=0xC0FFEE)])
  L.c.submit(L.inline(raw) if how == "inline" else
             L.send_pcas(raw, None if how == "pcas" else "INVALIDATE_COPY_SCHEDULE"))
  g.poll()
  assert not k.faults, k.faults
  got = np.frombuffer(L.c.vm.read(out, 4 * n), np.float32)
  # nvcc contracts a*x+y to fma.rn.f32: the f64 result rounded once more is within 1 ulp of it
  np.testing.assert_array_max_ulp(got, (1.5 * x.astype(np.float64) + y).astype(np.float32), maxulp=1)
  ref = np.zeros(n, np.float32)
  emu_launch(L.ptx, "saxpy", grid=(4, 1, 1), block=(256, 1, 1), args=[ref, x, y, np.float32(1.5), np.int32(n)],
             arch="sm_90")
  assert got.tobytes() == ref.tobytes()
  assert L.c.u32(sem) == 0xC0FFEE and L.c.gp_get == 1


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_dynamic_shared_2d_grid_and_four_word_release(arch):
  k, g = machine((arch,))
  L = Launcher(k, arch)
  gx, gy, bx, n = 3, 2, 64, 3 * 2 * 64 - 5
  out, sem = L.array(np.zeros(n, np.uint32)), L.c.alloc(16, 16)
  t0 = k.timestamp()
  raw = L.qmd("V03_00", "reverse_dyn", (gx, gy, 1), (bx, 1, 1), [out, np.int32(n)], dyn=4 * bx,
              releases=[dict(va=sem, payload=77, structure_size=0)])
  L.c.submit(L.send_pcas(raw))
  g.poll()
  assert not k.faults, k.faults
  got = np.frombuffer(L.c.vm.read(out, 4 * n), np.uint32)
  i = np.arange(n)
  cta, t = i // bx, i % bx
  want = (bx - 1 - t) * 3 + (cta % gx) * 1000 + (cta // gx) * 100000 + gx
  assert np.array_equal(got, want.astype(np.uint32))
  ref = np.zeros(n, np.uint32)
  emu_launch(L.ptx, "reverse_dyn", grid=(gx, gy, 1), block=(bx, 1, 1), args=[ref, np.int32(n)], arch=arch,
             shared_bytes=4 * bx)
  assert got.tobytes() == ref.tobytes()
  assert L.c.u32(sem) == 77 and t0 <= L.c.u64(sem + 8) <= k.timestamp()


def test_many_launches_reuse_the_loaded_program():
  k, g = machine()
  L = Launcher(k)
  n, words, outs = 64, [], []
  for j in range(6):
    o = L.array(np.zeros(n, np.float32))
    outs.append(o)
    x = np.full(n, j, np.float32)
    words += L.send_pcas(L.qmd("V03_00", "saxpy", (1, 1, 1), (64, 1, 1), [o, L.array(x), L.array(x), np.float32(2),
                                                                            np.int32(n)]))
  L.c.submit(words)
  g.poll()
  assert not k.faults
  for j, o in enumerate(outs): assert (np.frombuffer(L.c.vm.read(o, 4 * n), np.float32) == 3 * j).all()
  assert len(g.programs.items) == 1


def test_kernel_page_fault_stops_only_that_channel_and_a_new_channel_works():
  k, g = machine()
  L = Launcher(k)
  n = 256
  x = L.array(np.ones(n, np.float32))
  L.c.submit(L.send_pcas(L.qmd("V03_00", "saxpy", (1, 1, 1), (256, 1, 1),
                               [0x9000_0000, x, x, np.float32(1), np.int32(n)])))
  s = L.c.alloc(4, 4)
  L.c.submit(NP.pb_method(0, "SEM_ADDR_LO", s, 0, 1, 0, NP.nvclass(0xC86F).pack("SEM_EXECUTE", OPERATION="RELEASE"),
                          cls=0xC86F))
  g.poll()
  (ch, reason, va, err), = k.faults
  assert ch is L.c.ch and "kernel saxpy" in reason and "QMD V03_00" in reason and "GPFIFO entry 0" in reason
  assert isinstance(err, GPUPageFault) and va == 0x9000_0000 and k.gpu_error(0) is err
  assert L.c.u32(s) == 0                      # the channel stopped at the failing launch
  M = Launcher(k)                             # a later channel on the same GPU runs
  o = M.array(np.zeros(n, np.float32))
  M.c.submit(M.send_pcas(M.qmd("V03_00", "saxpy", (1, 1, 1), (256, 1, 1), [o, M.array(np.ones(n, np.float32)),
                                                                          M.array(np.ones(n, np.float32)),
                                                                          np.float32(3), np.int32(n)])))
  g.poll()
  assert len(k.faults) == 1 and (np.frombuffer(M.c.vm.read(o, 4 * n), np.float32) == 4).all()


@pytest.mark.parametrize("break_it,why", [
  (lambda L, raw: raw[:72] + b"\x00" * 2 + raw[74:], "unknown version"),
  (lambda L, raw: NP.qmd_build("V03_00", program=L.image_va + 4, grid=(1, 1, 1), block=(1, 1, 1),
                               cbufs={0: (0x1000_0000, 0x1000)}), "at no kernel's code"),
  (lambda L, raw: NP.qmd_build("V03_00", program=0x8000_0000, grid=(1, 1, 1), block=(1, 1, 1),
                               cbufs={0: (0x1000_0000, 0x1000)}), "points at no mapping"),
  (lambda L, raw: NP.qmd_build("V03_00", program=L.image_va + L.prog.kernels["saxpy"].text_offset, grid=(1, 1, 1),
                               block=(1, 1, 1)), "constant bank 0 is not valid"),
  (lambda L, raw: NP.qmd_build("V03_00", program=L.image_va + L.prog.kernels["saxpy"].text_offset, grid=(1, 1, 1),
                               block=(0, 1, 1), cbufs={0: (0x1000_0000, 0x1000)}), "CTA_THREAD_DIMENSION"),
  (lambda L, raw: NP.qmd_build("V03_00", program=L.image_va + L.prog.kernels["saxpy"].text_offset, grid=(1, 1, 1),
                               block=(2048, 1, 1), cbufs={0: (0x1000_0000, 0x1000)}), "1024"),
])
def test_bad_qmds_fault_the_channel(break_it, why):
  k, g = machine()
  L = Launcher(k)
  raw = L.qmd("V03_00", "saxpy", (1, 1, 1), (32, 1, 1), [0, 0, 0, np.float32(0), np.int32(0)])
  L.c.submit(L.send_pcas(break_it(L, raw)))
  g.poll()
  assert len(k.faults) == 1 and why in k.faults[0][1], k.faults


@pytest.mark.parametrize("version", ["V03_00", "V04_00"])
def test_qmd_releases_after_the_grid(version):
  """Every enabled release of the QMD, after the kernel's stores: payload (one word, 64-bit) and a RED_ADD
  reduction run by two launches."""
  k, g = machine()
  L = Launcher(k)
  n = 32
  out, s64, sadd = L.array(np.zeros(n, np.float32)), L.c.alloc(8, 8), L.c.alloc(4, 4)
  L.c.vm.write_u32(sadd, 100)
  one = L.array(np.ones(n, np.float32))
  rel = [dict(va=s64, payload=0xAABBCCDD_00112233, payload64=True), dict(va=sadd, payload=7, reduction="RED_ADD")]
  raw = L.qmd(version, "saxpy", (1, 1, 1), (32, 1, 1), [out, one, one, np.float32(1), np.int32(n)], releases=rel)
  L.c.submit(L.send_pcas(raw) + L.send_pcas(raw))
  g.poll()
  assert not k.faults and L.c.u64(s64) == 0xAABBCCDD_00112233 and L.c.u32(sadd) == 114
  assert (np.frombuffer(L.c.vm.read(out, 4 * n), np.float32) == 2).all()
