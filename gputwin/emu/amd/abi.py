"""The AMDGPU ABI's initial wave state (AMDGPUUsage "Initial Kernel Execution State"): user SGPRs in the kernel
descriptor's order, workgroup ids, packed work-item ids in v0, EXEC for partial waves, MODE from RSRC1."""
from __future__ import annotations

import functools

import numpy as np

from gputwin.emu.amd.decode import MODE, PRIVATE_HI, SHARED_HI

APERTURES = (SHARED_HI, PRIVATE_HI)  # hidden_shared_base / hidden_private_base: the emulator's flat apertures
USER_SGPRS = (("enable_sgpr_private_segment_buffer", 4), ("enable_sgpr_dispatch_ptr", 2), ("enable_sgpr_queue_ptr", 2),
              ("enable_sgpr_kernarg_segment_ptr", 2), ("enable_sgpr_dispatch_id", 2),
              ("enable_sgpr_flat_scratch_init", 2), ("enable_sgpr_private_segment_size", 1))  # ABI order


def user_sgprs(kd, values: dict) -> list[int]:
  """The user SGPR values the kernel descriptor enables, in ABI order (`values`: enable name -> 64-bit value)."""
  user = []
  for en, n in USER_SGPRS:
    if getattr(kd, en, 0):
      user += [(values.get(en, 0) >> (32 * k)) & 0xffffffff for k in range(n)]
  return user


def init_waves(eng, kd, grid, block, g0: int, nw: int, user: list[int], pc: int) -> int:
  """The initial state the hardware gives every wave of a batch (AMDGPUUsage "Initial Kernel Execution State"):
  user SGPRs (`user`: the values of s0.., e.g. from the KD enables or COMPUTE_USER_DATA), then workgroup ids as
  the KD enables them (gfx12 also in TTMP9/TTMP7), packed work-item ids in v0, EXEC for partial waves, MODE from
  RSRC1, PC. The batch holds workgroups g0.. with `nw` waves each. Returns the number of initialised SGPRs."""
  L, (gx, gy, _) = eng.L, grid
  arch = eng.prog.arch
  eng.ieee = kd.enable_ieee_mode if not arch.startswith("gfx12") else 1
  eng.HW[:, MODE] = (kd.float_round_mode_32 | kd.float_round_mode_16_64 << 2 | kd.float_denorm_mode_32 << 4
                     | kd.float_denorm_mode_16_64 << 6 | kd.enable_dx10_clamp << 8 | eng.ieee << 9)
  S = eng.S
  if user:  # rows 0.. of the register-major file: one broadcast over contiguous rows
    eng.files["s"][:len(user), :eng.W] = np.array([u & 0xffffffff for u in user], np.uint32)[:, None]
  s = max(kd.user_sgpr_count, len(user))
  ng = eng.W // nw
  wgid = np.arange(g0, g0 + ng, dtype=np.uint64)  # per workgroup (64-bit: X*Y*Z may pass 2^32; each id fits 32)
  none = np.zeros_like(wgid)
  ids = tuple(i.astype(np.uint32) for i in (wgid % np.uint64(gx), (wgid // np.uint64(gx)) % np.uint64(gy) if gy > 1
                                            else none, wgid // np.uint64(gx * gy) if grid[2] > 1 else none))
  per_wave = lambda row: S[:, row].reshape(ng, nw)  # (a contiguous row of the register-major file)
  whole = (1 << len(user)) - 1  # SGPR rows written here for every wave (restart(keep_s=...) need not clear them)
  for d in range(3):
    if getattr(kd, f"enable_sgpr_workgroup_id_{'xyz'[d]}"):
      per_wave(s)[...], whole, s = ids[d][:, None], whole | 1 << s, s + 1
  s += kd.enable_sgpr_workgroup_info + kd.enable_private_segment  # both read as 0 (one wave per workgroup slot)
  if arch.startswith("gfx12"):  # architected workgroup ids: TTMP9 = x, TTMP7 = y | z << 16
    per_wave(117)[...], per_wave(115)[...] = ids[0][:, None], (ids[1] | (ids[2] << 16))[:, None]
    whole |= 1 << 117 | 1 << 115
  v0, ex = _workitems(nw, L, tuple(block))  # the same for every workgroup: one copy per workgroup of the batch
  if getattr(eng, "v0_of", None) != (nw, tuple(block)) or getattr(eng, "v0_stale", True):  # (a restarted engine's v0
    if eng.pending is not None:  # is still in place unless the last batch wrote it; deferred: see Engine.restart)
      eng.pending = (eng.pending[0], (v0, nw))
    else:
      eng.V[:, 0].reshape(eng.W // nw, nw, L)[...] = v0
    eng.v0_of, eng.v0_stale = (nw, tuple(block)), False
  for k in range(L // 32):
    per_wave(eng.sp["exec"] + k)[...] = ex[:, k]
    whole |= 1 << (eng.sp["exec"] + k)
  eng.init_rows = whole
  eng._exec = None
  eng.pc[:] = pc
  eng.mark("s", 0, s)
  eng.mark("s", eng.sp["exec"], L // 32)
  if arch.startswith("gfx12"):
    eng.mark("s", 115, 3)
  if eng.checks is not None:
    eng.checks.initial(eng, s)
  return s


@functools.lru_cache(maxsize=64)
def _workitems(nw: int, L: int, block: tuple) -> tuple[np.ndarray, np.ndarray]:
  """One workgroup's packed work-item ids (v0: x | y << 10 | z << 20, gfx90a+ / gfx11+) and EXEC words."""
  bx, by, bz = block
  t = np.arange(nw, dtype=np.uint32)[:, None] * np.uint32(L) + np.arange(L, dtype=np.uint32)
  v0 = t % bx | ((t // bx) % by) << 10 | (t // (bx * by)) << 20
  ex = np.packbits(t < bx * by * bz, axis=1, bitorder="little").view(np.uint32)
  v0.flags.writeable = ex.flags.writeable = False
  return v0, ex
