"""The compute class (AMPERE_COMPUTE_A/B, ADA_COMPUTE_A, HOPPER_COMPUTE_A, BLACKWELL_COMPUTE_A/B) on the PTX emulator.

Methods are kept by name in the engine's state (`regs`), so every SET_* a runtime sends is stored (shader local and
shared memory windows, QMD version ...); these act:
- LAUNCH_DMA starts an inline-to-memory upload of LINE_LENGTH_IN x LINE_COUNT bytes to OFFSET_OUT (pitch layout,
  PITCH_OUT between lines) fed by LOAD_INLINE_DATA words (the lines packed back to back); when the last byte arrived
  the I2M semaphore (SET_I2M_SEMAPHORE_A..C) is released if COMPLETION_TYPE asks for it.
- SEND_PCAS_A holds a QMD address (>> 8); SEND_SIGNALING_PCAS_B with SCHEDULE, or SEND_SIGNALING_PCAS2_B with a
  PCAS_ACTION naming SCHEDULE, launches that QMD.
- SET_INLINE_QMD_ADDRESS_A/B then LOAD_INLINE_QMD_DATA(0..n-1) (n = 64 words, or 96 with INLINE_SIZE_384) write the
  QMD to that address and launch it after its last word.
- SET_REPORT_SEMAPHORE_A..D and (Ampere B and later) SET_REPORT_SEMAPHORE_PAYLOAD/ADDRESS + REPORT_SEMAPHORE_EXECUTE
  release a semaphore (one word, two words, or four words = payload + timestamp), optionally as a reduction.

A QMD launch (any version nvpush knows, read from its version fields): the program address points into the mapping
that holds the program image (gputwin.isa.ptx.cubin) from its start; the kernel is the one whose code is at that
address; its parameters are the bytes of constant bank 0 at the offset the image records; shared memory beyond the
kernel's static size is the dynamic part. The PTX is loaded into the channel's address space (its variables in BOs at
a GPU-internal VA window, see `ChannelMemory`) once per (address space, image) and run with `launch.run`. After the
grid: the QMD's releases.
"""
from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict

from gputwin.abi import nvpush as NP
from gputwin.abi.hostmem import HostBuffer, page_align
from gputwin.emu.ptx.launch import Loaded, run
from gputwin.errors import GPUPageFault, GputwinError
from gputwin.isa.ptx.cubin import read_program
from gputwin.mock.nvgpu.host import ChannelFault, release
from gputwin.mock.vm import BufferObject, GPUAddressSpace, GPUMemory

# GPU-internal VA window (the emulator addresses global memory below 4 GiB): where a loaded module's .param buffer and
# .global/.const variables live in the channel's address space; first fit around whatever the driver mapped there
INTERNAL_VA = (0xE000_0000, 0x1_0000_0000)


class ChannelMemory(GPUMemory):
  """emu's GuestMemory protocol over a channel's GPUAddressSpace: `alloc` maps a GPU-internal BO in INTERNAL_VA."""

  def __init__(self, vm: GPUAddressSpace):
    super().__init__(vm)
    self.bos: dict[int, BufferObject] = {}

  def alloc(self, size: int, align: int = 4096, guard: int = 4096, buf=None) -> int:
    size = max(int(size), 1)
    bo = BufferObject(0, 0, 0, size, 0, 0, host=HostBuffer(page_align(size), "gputwin-nvgpu-internal"))
    va = INTERNAL_VA[0]
    while va + size <= INTERNAL_VA[1]:
      va = -(-va // align) * align
      bo.va = va
      if self.vm.map(va, size, bo):
        self.bos[va] = bo
        if buf is not None: self.vm.write(va, bytes(buf))
        return va
      m = self.vm.find(va) or next((m for m in self.vm.mappings() if va < m.va < va + size), None)
      va = (m.end if m is not None else va) + guard
    bo.release()
    raise ChannelFault(f"GPU-internal VA window {INTERNAL_VA[0]:#x}-{INTERNAL_VA[1]:#x} is full ({size} bytes)")

  def unmap(self, va: int) -> None:
    bo = self.bos.pop(va, None)
    if bo is not None:
      self.vm.unmap(va)
      bo.release()

  def release(self) -> None:
    for va in list(self.bos): self.unmap(va)


class Programs:
  """Loaded modules by (address space, image bytes), least recently used out (their internal BOs unmapped); an entry
  holds its address space, so the id in the key stays unique while it lives."""

  def __init__(self, limit: int = 32):
    self.limit, self.items = limit, OrderedDict()

  def get(self, vm: GPUAddressSpace, image: bytes, arch: str):
    key = (id(vm), hashlib.sha1(image).digest(), arch)
    hit = self.items.pop(key, None)
    if hit is None:
      prog = read_program(image)
      mem = ChannelMemory(vm)
      try: hit = (vm, prog, Loaded(prog.ptx, "<program image>", arch, mem=mem))
      except Exception:
        mem.release()
        raise
    self.items[key] = hit
    while len(self.items) > self.limit: self.items.popitem(last=False)[1][2].mem.release()
    return hit[1], hit[2]

  def drop(self, vm: GPUAddressSpace) -> None:
    for key in [k for k, v in self.items.items() if v[0] is vm]: self.items.pop(key)[2].mem.release()


def program_image(vm: GPUAddressSpace, va: int) -> tuple[int, bytes]:
  """(mapping VA, the ELF image at the start of the mapping holding va) (only the ELF's extent is read)."""
  m = vm.find(va)
  if m is None: raise GPUPageFault(va, 4, "execute", vm.device, "the QMD program address points at no mapping")
  head = vm.read(m.va, min(64, m.size))
  if head[:4] != b"\x7fELF" or len(head) < 64:
    raise ChannelFault(f"the mapping {m.va:#x} holding program address {va:#x} does not start with a program image", va)
  shoff, = struct.unpack_from("<Q", head, 0x28)
  shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
  end = shoff + shentsize * shnum
  if not 64 <= end <= m.size:
    raise ChannelFault(f"program image at {m.va:#x}: section headers end at {end:#x}, outside its mapping of "
                       f"{m.size:#x} bytes", m.va)
  return m.va, vm.read(m.va, end)


class Compute:
  """One compute object's engine state on a channel."""

  def __init__(self, gpu, ch, cls: NP.NVClass):
    self.gpu, self.ch, self.cls, self.regs = gpu, ch, cls, {}
    self.upload: list | None = None      # [dst, line_length, lines, pitch, bytearray, launch word]
    self.inline_qmd: dict | None = None  # {"va": int, "words": [..]}
    self.launches = 0

  def a64(self, hi: str, lo: str) -> int: return (self.regs.get(hi, 0) << 32) | self.regs.get(lo, 0)

  def method(self, name: str, data: int) -> None:
    base = name.split("(")[0]
    self.regs[name] = data
    if base == "LAUNCH_DMA": return self._launch_dma(data)
    if base == "LOAD_INLINE_DATA": return self._inline_data(data)
    if base == "SET_INLINE_QMD_ADDRESS_B":
      f = self.cls.unpack("SET_INLINE_QMD_ADDRESS_A", self.regs.get("SET_INLINE_QMD_ADDRESS_A", 0))
      self.inline_qmd = {"va": ((f["QMD_ADDRESS_SHIFTED8_UPPER"] << 32) | data) << 8,
                         "words": [None] * (96 if f.get("INLINE_SIZE") else 64)}
      return None
    if base == "LOAD_INLINE_QMD_DATA": return self._inline_qmd(int(name[len(base) + 1:-1]), data)
    if base == "SEND_SIGNALING_PCAS_B":
      if self.cls.unpack(base, data)["SCHEDULE"]: self.launch(self.regs.get("SEND_PCAS_A", 0) << 8)
      return None
    if base == "SEND_SIGNALING_PCAS2_B":
      act = self.cls.unpack(base, data)["PCAS_ACTION"]
      names = {v: k for k, v in self.cls.fields[base]["PCAS_ACTION"][2].items()}
      if act not in names: raise ChannelFault(f"SEND_SIGNALING_PCAS2_B: PCAS_ACTION {act} is not defined")
      if "SCHEDULE" in names[act]: self.launch(self.regs.get("SEND_PCAS_A", 0) << 8)
      elif names[act] not in ("NOP", "INVALIDATE", "PREFETCH"):
        raise ChannelFault(f"SEND_SIGNALING_PCAS2_B: PCAS_ACTION {names[act]} is not modelled")
      return None
    if base == "SET_REPORT_SEMAPHORE_D": return self._report_d(data)
    if base == "REPORT_SEMAPHORE_EXECUTE": return self._report_execute(data)
    return None

  # ---- inline uploads (I2M)
  def _launch_dma(self, data: int) -> None:
    f = self.cls.unpack("LAUNCH_DMA", data)
    if f["DST_MEMORY_LAYOUT"] != self.cls.value("LAUNCH_DMA", "DST_MEMORY_LAYOUT", "PITCH"):
      raise ChannelFault("LAUNCH_DMA to block-linear memory is not modelled")
    dst = self.a64("OFFSET_OUT_UPPER", "OFFSET_OUT")
    n, lines = self.regs.get("LINE_LENGTH_IN", 0), max(self.regs.get("LINE_COUNT", 1), 1)
    self.upload = [dst, n, lines, self.regs.get("PITCH_OUT", n), bytearray(), data]
    if n == 0: self._upload_done()

  def _inline_data(self, word: int) -> None:
    if self.upload is None: raise ChannelFault("LOAD_INLINE_DATA without a LAUNCH_DMA in progress")
    buf = self.upload[4]
    buf += word.to_bytes(4, "little")
    if len(buf) >= self.upload[1] * self.upload[2]: self._upload_done()

  def _upload_done(self) -> None:
    dst, n, lines, pitch, buf, launch = self.upload
    self.upload = None
    vm = self.ch.vm
    for i in range(lines if n else 0): vm.write(dst + i * pitch, bytes(buf[i * n:(i + 1) * n]))
    f = self.cls.unpack("LAUNCH_DMA", launch)
    if f["COMPLETION_TYPE"] == self.cls.value("LAUNCH_DMA", "COMPLETION_TYPE", "RELEASE_SEMAPHORE"):
      four = f["SEMAPHORE_STRUCT_SIZE"] == self.cls.value("LAUNCH_DMA", "SEMAPHORE_STRUCT_SIZE", "FOUR_WORDS")
      red = self._red("LAUNCH_DMA", f) if f["REDUCTION_ENABLE"] else None
      release(vm, self.a64("SET_I2M_SEMAPHORE_A", "SET_I2M_SEMAPHORE_B"), self.regs.get("SET_I2M_SEMAPHORE_C", 0),
              timestamp=self.gpu.k.timestamp() if four else None, reduction=red, signed=f["REDUCTION_FORMAT"] == 1)

  def _red(self, method: str, f: dict) -> str:
    names = {v: k for k, v in self.cls.fields[method]["REDUCTION_OP"][2].items()}
    return names.get(f["REDUCTION_OP"], f"reduction {f['REDUCTION_OP']}")

  # ---- report semaphores
  def _report_d(self, data: int) -> None:
    f = self.cls.unpack("SET_REPORT_SEMAPHORE_D", data)
    if f["OPERATION"] != self.cls.value("SET_REPORT_SEMAPHORE_D", "OPERATION", "RELEASE"):
      raise ChannelFault(f"SET_REPORT_SEMAPHORE_D operation {f['OPERATION']} (trap) stops the channel")
    one = f["STRUCTURE_SIZE"] == self.cls.value("SET_REPORT_SEMAPHORE_D", "STRUCTURE_SIZE", "ONE_WORD")
    release(self.ch.vm, self.a64("SET_REPORT_SEMAPHORE_A", "SET_REPORT_SEMAPHORE_B"),
            self.regs.get("SET_REPORT_SEMAPHORE_C", 0), timestamp=None if one else self.gpu.k.timestamp(),
            reduction=self._red("SET_REPORT_SEMAPHORE_D", f) if f["REDUCTION_ENABLE"] else None,
            signed=f["REDUCTION_FORMAT"] == 1)

  def _report_execute(self, data: int) -> None:
    f = self.cls.unpack("REPORT_SEMAPHORE_EXECUTE", data)
    ops = {v: k for k, v in self.cls.fields["REPORT_SEMAPHORE_EXECUTE"]["OPERATION"][2].items()}
    if ops.get(f["OPERATION"]) != "RELEASE":
      op = ops.get(f["OPERATION"], f["OPERATION"])
      raise ChannelFault(f"REPORT_SEMAPHORE_EXECUTE operation {op} is not modelled")
    size = f["STRUCTURE_SIZE"]   # 0 four words (payload + timestamp), 1 one word, 2 two words
    release(self.ch.vm, self.a64("SET_REPORT_SEMAPHORE_ADDRESS_UPPER", "SET_REPORT_SEMAPHORE_ADDRESS_LOWER"),
            self.a64("SET_REPORT_SEMAPHORE_PAYLOAD_UPPER", "SET_REPORT_SEMAPHORE_PAYLOAD_LOWER"),
            bits=64 if f["PAYLOAD_SIZE64"] or size == 2 else 32,
            timestamp=self.gpu.k.timestamp() if size == 0 else None,
            reduction=self._red("REPORT_SEMAPHORE_EXECUTE", f) if f["REDUCTION_ENABLE"] else None,
            signed=f["REDUCTION_FORMAT"] == 1)

  # ---- QMD launches
  def _inline_qmd(self, i: int, word: int) -> None:
    q = self.inline_qmd
    if q is None: raise ChannelFault("LOAD_INLINE_QMD_DATA without SET_INLINE_QMD_ADDRESS_A/B")
    if i >= len(q["words"]): raise ChannelFault(f"LOAD_INLINE_QMD_DATA({i}) beyond the {len(q['words'])}-word QMD")
    q["words"][i] = word
    if i == len(q["words"]) - 1:
      self.inline_qmd = None
      raw = b"".join((w or 0).to_bytes(4, "little") for w in q["words"])
      self.ch.vm.write(q["va"], raw)
      self.launch(q["va"], raw)

  def launch(self, qmd_va: int, raw: bytes | None = None) -> None:
    vm = self.ch.vm
    if raw is None: raw = vm.read(qmd_va, 256)
    try: ver = NP.qmd_version(raw)
    except NP.NVPushError as e: raise ChannelFault(f"bad QMD at {qmd_va:#x}: {e}", qmd_va) from None
    if len(raw) < NP.QMD[ver].size: raw = vm.read(qmd_va, NP.QMD[ver].size)
    q = NP.qmd_launch(raw, ver)
    self.launches += 1
    where = f"QMD {ver} at {qmd_va:#x}"
    if 0 in q.block: raise ChannelFault(f"bad {where}: CTA_THREAD_DIMENSION {q.block}", qmd_va)
    if 0 not in q.cbufs: raise ChannelFault(f"bad {where}: constant bank 0 is not valid", qmd_va)
    base, image = program_image(vm, q.program)
    arch = self.ch.gpu.arch
    prog, lm = self.gpu.programs.get(vm, image, arch)
    if prog.arch != arch:
      raise ChannelFault(f"{where}: the program at {base:#x} is built for {prog.arch}, the GPU is {arch}", q.program)
    kern = next((k for k in prog.kernels.values() if base + k.text_offset == q.program), None)
    if kern is None:
      raise ChannelFault(f"bad {where}: program address {q.program:#x} is at no kernel's code (image at {base:#x}: "
                         + ", ".join(f"{n} +{k.text_offset:#x}" for n, k in prog.kernels.items()) + ")", q.program)
    cb_va, cb_size = q.cbufs[0]
    if kern.param_offset + kern.param_size > cb_size:
      raise ChannelFault(f"bad {where}: kernel {kern.name}'s parameters ({kern.param_offset:#x}+{kern.param_size:#x}) "
                         f"lie outside constant bank 0 ({cb_size:#x} bytes)", cb_va)
    params = vm.read(cb_va + kern.param_offset, kern.param_size)
    dynamic = max(0, q.shared - kern.shared_static)
    if all(q.grid):
      try:
        run(lm, kern.name, grid=q.grid, block=q.block, params=params, shared_bytes=dynamic, checks=False)
      except GputwinError as e:   # GPUPageFault / EmuFault / EmuError / LaunchError: the channel's error
        raise ChannelFault(f"{where}: kernel {kern.name} (program {q.program:#x}): {e}", getattr(e, "va", None),
                           e) from None
    for r in q.releases:
      red = {v: k for k, v in NP.QMD[ver].fields[("RELEASE0_REDUCTION_OP" if ver == "V03_00" else
                                                   "RELEASE_REDUCTION_OP")][4].items()}
      release(vm, r.va, r.payload, bits=64 if r.payload64 else 32,
              timestamp=self.gpu.k.timestamp() if r.structure_size == 0 else None,
              reduction=red.get(r.reduction, f"reduction {r.reduction}") if r.reduction is not None else None,
              signed=r.signed)
