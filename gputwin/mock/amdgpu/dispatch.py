"""DISPATCH_DIRECT on the emulator: compute registers in, waves run on gputwin.emu's wave executor.

A PM4 dispatch carries registers, not a code object: the program address (COMPUTE_PGM_LO/HI), RSRC1/2/3, the user
SGPRs (COMPUTE_USER_DATA_*), the workgroup size (COMPUTE_NUM_THREAD_*.NUM_THREAD_FULL), the grid (DISPATCH_DIRECT
x/y/z), LDS (RSRC2.LDS_SIZE) and scratch (COMPUTE_TMPRING_SIZE.WAVESIZE). With COMPUTE_DISPATCH_INITIATOR.PARTIAL_TG_EN
the last workgroup along each dimension has NUM_THREAD_PARTIAL work-items in it (what radeonsi programs for a grid
that is not a multiple of the block, and the CP for such an AQL packet): its waves, work-item ids and EXEC follow
that smaller shape. `run_dispatch` turns them into the initial state the
hardware's SPI gives each wave (user SGPRs from USER_DATA, then workgroup ids and the scratch wave offset as RSRC2
enables them, work-item ids in v0) and runs the emulator's Engine over the GPU's own address space.

The wave setup itself is the frontend's `init_waves` (gputwin/emu/amd/abi.py) (the same ABI state a code-object launch gets); this module
only adds what registers imply: the decoded program of the BO the PC points into (emu's one code cache,
`api.CODE`), `core.Engine` / `core.run` and `api.raise_stop` (errors naming target, PC and instruction).
`GPUMemory` (gputwin/mock/vm.py) adapts the mock's GPUAddressSpace to emu's AddressSpace.
"""
from __future__ import annotations
import time
import numpy as np
from gputwin.emu import core
from gputwin.emu.api import CODE, raise_stop
from gputwin.emu.program import Program
from gputwin.errors import EmuError, GPUPageFault, LaunchError
from gputwin.isa.kd import KD_SIZE, KernelDescriptor
from gputwin.isa.targets import target
from gputwin.mock.amdgpu import record
from gputwin.mock.vm import GPUAddressSpace, GPUMemory

LDS_GRANULE = {9: 512, 10: 512, 11: 512, 12: 512}   # RSRC2.LDS_SIZE unit in bytes (128 dwords)
SCRATCH_GRANULE = 1024                              # TMPRING_SIZE.WAVESIZE unit in bytes per wave (256 dwords)
MAX_WORKGROUP = 1024                                # work-items per workgroup on every AMD GPU
PARTIAL_TG_EN = 1 << 1                              # COMPUTE_DISPATCH_INITIATOR: NUM_THREAD_PARTIAL is in use
WAVE_BUDGET = 1 << 20         # watchdog: wave-instructions per wave launched (gputwin.emu.launch's default too)
LOCKUP_TIMEOUT = 60.0         # watchdog: wall seconds a dispatch may run (amdgpu's default compute lockup_timeout)
CHUNK = 1 << 16               # wave-instructions between two looks at the watchdog
WG_STATE_LIMIT = 4 << 30      # mock: the emulator's state for one workgroup (registers, scratch, LDS) at most
BATCH_STATE = 1 << 30         # mock: workgroups run together while their state fits this


def _program(vm: GPUAddressSpace, pc: int, arch: str, wave: int) -> Program:
  """The decoded program of the code around pc: the whole BO holding it (code objects are uploaded as one image),
  keyed by its bytes so a re-upload is decoded afresh."""
  m = vm.find(pc)
  if m is None: raise GPUPageFault(pc, 4, "execute", vm.device, "COMPUTE_PGM_LO/HI points at no mapping")
  return CODE.program(vm.read(m.va, m.size, "execute"), m.va, arch, wave)


def descriptor(arch: str, rsrc1: int, rsrc2: int, rsrc3: int, lds: int, scratch: int, w32: bool) -> KernelDescriptor:
  """A KernelDescriptor carrying what the registers say (raw RSRC words at their KD offsets), to read fields by name."""
  raw = bytearray(KD_SIZE)
  for off, v in ((0, lds), (4, scratch), (44, rsrc3), (48, rsrc1), (52, rsrc2), (56, w32 << 10)):
    raw[off:off + (2 if off == 56 else 4)] = int(v).to_bytes(2 if off == 56 else 4, "little")
  return KernelDescriptor.decode(bytes(raw), arch)


def run_dispatch(vm: GPUAddressSpace, arch: str, regs: dict[str, int], grid: tuple[int, int, int],
                 name: str = "dispatch", wave_budget: int | None = WAVE_BUDGET,
                 lockup_timeout: float | None = LOCKUP_TIMEOUT) -> int:
  """Run one DISPATCH_DIRECT; returns wave-instructions executed. Raises the emulator's errors (EmuFault ...),
  LaunchError for register values no workgroup can be launched with, and EmuError "watchdog" when the dispatch runs
  more than `wave_budget` wave-instructions per wave it launches (a runaway kernel) or longer than `lockup_timeout`
  seconds (a grid too large to finish); None turns either off."""
  t = target(arch)
  g = lambda r: regs.get(r, 0)
  w32 = bool(g("COMPUTE_DISPATCH_INITIATOR") & (1 << 15))
  L = 32 if w32 else 64
  if L not in t.waves: L = t.waves[0]
  rsrc2 = g("COMPUTE_PGM_RSRC2")
  lds = ((rsrc2 >> 15) & 0x1FF) * LDS_GRANULE[t.major]
  priv = ((g("COMPUTE_TMPRING_SIZE") >> 12) & 0x3FFFF) * SCRATCH_GRANULE // L
  kd = descriptor(arch, g("COMPUTE_PGM_RSRC1"), rsrc2, g("COMPUTE_PGM_RSRC3"), lds, priv, w32)
  block = tuple(max(1, g(f"COMPUTE_NUM_THREAD_{d}") & 0xFFFF) for d in "XYZ")   # NUM_THREAD_FULL: bits 15:0
  threads = block[0] * block[1] * block[2]
  if threads > MAX_WORKGROUP:
    raise LaunchError(f"[{arch}] {name}: COMPUTE_NUM_THREAD_X/Y/Z ask for {block[0]}x{block[1]}x{block[2]} = "
                      f"{threads} work-items per workgroup, more than the {MAX_WORKGROUP} a workgroup can have", arch)
  last = block   # the last workgroup along each dimension: NUM_THREAD_PARTIAL (bits 31:16) with PARTIAL_TG_EN
  if g("COMPUTE_DISPATCH_INITIATOR") & PARTIAL_TG_EN:
    last = tuple(g(f"COMPUTE_NUM_THREAD_{d}") >> 16 & 0xFFFF for d in "XYZ")
    if not all(1 <= p <= b for p, b in zip(last, block)):
      raise LaunchError(f"[{arch}] {name}: NUM_THREAD_PARTIAL {last[0]}x{last[1]}x{last[2]} is not within 1 to "
                        f"NUM_THREAD_FULL {block[0]}x{block[1]}x{block[2]} (COMPUTE_DISPATCH_INITIATOR.PARTIAL_TG_EN)",
                        arch)
  nw = -(-threads // L)
  cdna = t.major == 9
  nv = min(512, (kd.granulated_workitem_vgpr_count + 1) * 8 + 8)
  wg_bytes = nw * L * (4 * (nv + (nv if cdna else 1)) + priv) + lds   # VGPRs, AGPRs, scratch, LDS of a workgroup
  if wg_bytes > WG_STATE_LIMIT:
    raise LaunchError(f"[{arch}] {name}: a workgroup of {threads} work-items with {priv} bytes of scratch per lane "
                      f"(COMPUTE_TMPRING_SIZE {g('COMPUTE_TMPRING_SIZE'):#x}), {lds} bytes of LDS and {nv} VGPRs "
                      f"needs {wg_bytes / 2**30:.1f} GiB of wave state (the mock runs at most "
                      f"{WG_STATE_LIMIT >> 30} GiB)", arch)
  pc = ((g("COMPUTE_PGM_HI") << 32) | g("COMPUTE_PGM_LO")) << 8
  prog = _program(vm, pc, arch, L)
  mem = GPUMemory(vm)
  nwg = grid[0] * grid[1] * grid[2]
  per_batch = max(1, min(core.MAX_WAVES // nw, BATCH_STATE // max(wg_bytes, 1)))
  user = [g(f"COMPUTE_USER_DATA_{i}") for i in range(16)]
  rec = record.before(vm, arch, regs, grid, block, pc, user)  # `gputwin exec --trace DIR` (record.py)
  budget = None if wave_budget is None else wave_budget * nw * nwg
  deadline = None if lockup_timeout is None else time.monotonic() + lockup_timeout
  count = first = g1 = 0   # `first`: the dispatch's index of the batch's first wave
  while g1 < nwg:   # batches of consecutive workgroups of one shape (full, or partial along some dimension)
    g0, (g1, shape) = g1, _run(g1, min(nwg, g1 + per_batch), grid, block, last)
    bw = -(-shape[0] * shape[1] * shape[2] // L)   # waves per workgroup of this batch
    W = (g1 - g0) * bw
    if deadline is not None and time.monotonic() > deadline:
      raise EmuError(f"[{arch}] kernel {name}: watchdog: the dispatch ran longer than {lockup_timeout:g} s (lockup "
                     f"timeout) with {g0} of {nwg} workgroups finished", arch, name)
    try:
      eng = core.Engine(prog, mem, W, L, nv, nv if cdna else 1, lds, priv, np.repeat(np.arange(g1 - g0), bw), None,
                        arch)
    except MemoryError:
      raise LaunchError(f"[{arch}] {name}: no host memory for {g1 - g0} workgroups of wave state "
                        f"({(g1 - g0) * wg_bytes / 2**30:.1f} GiB)", arch) from None
    eng.user_sgprs = prog.frontend.init_waves(eng, kd, grid, shape, g0, bw, user[:kd.user_sgpr_count], pc)
    while True:   # the batch runs in chunks of CHUNK wave-instructions; between them the watchdog looks
      left = None if budget is None else budget - count - eng.count
      try:
        core.run(eng, max_instructions=CHUNK if left is None else max(0, min(CHUNK, left)))
        break
      except core.Stop as st:
        if st.kind == "watchdog":
          late = deadline is not None and time.monotonic() > deadline
          if not late and (budget is None or count + eng.count < budget): continue
          st.msg = (f"watchdog: the dispatch ran longer than {lockup_timeout:g} s (lockup timeout)" if late else
                    f"watchdog: the dispatch ran more than {budget} wave-instructions ({wave_budget} per wave of "
                    f"its {nw * nwg} waves): a runaway kernel")
        raise_stop(st, eng, name, arch, first)
    count, first = count + eng.count, first + W
  if rec is not None: rec.after(vm)
  return count


def _run(w: int, end: int, grid, block, last) -> tuple[int, tuple[int, int, int]]:
  """(end of the run of workgroups from linear index `w` (before `end`) that share w's shape, that shape): a
  workgroup's extent along a dimension is `last` there when it is the grid's last along it, else `block`."""
  gx, gy, gz = grid
  x, y, z = w % gx, w // gx % gy, w // (gx * gy)
  shape = tuple(l if i == n - 1 else b for i, n, b, l in zip((x, y, z), grid, block, last))
  # the next workgroup whose shape differs, per dimension with a partial extent (and more than one workgroup)
  if last[0] != block[0] and gx > 1: end = min(end, w + gx - 1 - x if x < gx - 1 else w + 1)
  if last[1] != block[1] and gy > 1: end = min(end, w + (gy - 1 - y) * gx - x if y < gy - 1 else w + gx - x)
  if last[2] != block[2] and gz > 1 and z < gz - 1: end = min(end, (gz - 1) * gx * gy)
  return end, shape
