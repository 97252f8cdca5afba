"""The copy engine (AMPERE_DMA_COPY_A/B, HOPPER_DMA_COPY_A, BLACKWELL_DMA_COPY_A/B): LAUNCH_DMA over virtual addresses.

Methods are kept by name; LAUNCH_DMA acts on them:
- DATA_TRANSFER_TYPE other than NONE: copy LINE_LENGTH_IN bytes from OFFSET_IN to OFFSET_OUT, or with
  MULTI_LINE_ENABLE LINE_COUNT such lines, PITCH_IN / PITCH_OUT apart (both layouts PITCH; block-linear and physical
  addresses are not modelled). With REMAP_ENABLE, LINE_LENGTH_IN counts elements of NUM_SRC_COMPONENTS components
  of COMPONENT_SIZE bytes, and each of the NUM_DST_COMPONENTS destination components takes a source component,
  SET_REMAP_CONST_A/B, or is left unwritten (SET_REMAP_COMPONENTS): a fill when every one is a constant.
- then SEMAPHORE_TYPE: a one-word release (the payload; SEMAPHORE_PAYLOAD_SIZE TWO_WORD: 64 bits from
  SET_SEMAPHORE_PAYLOAD_UPPER) or a four-word release (payload + timestamp at +8), as a reduction with
  SEMAPHORE_REDUCTION_ENABLE (SEMAPHORE_REDUCTION_SIGN: SIGNED 0, UNSIGNED 1).
"""
from __future__ import annotations

import numpy as np

from gputwin.abi import nvpush as NP
from gputwin.mock.nvgpu.host import ChannelFault, release


MAX_BYTES = 1 << 30      # mock limits on one LAUNCH_DMA: bytes moved (LINE_LENGTH_IN x LINE_COUNT, remapped: x 16)
MAX_REMAP_LINES = 4096   # and lines of a remapped copy


class Copy:
  def __init__(self, gpu, ch, cls: NP.NVClass):
    self.gpu, self.ch, self.cls, self.regs = gpu, ch, cls, {}

  def a64(self, hi: str, lo: str) -> int: return (self.regs.get(hi, 0) << 32) | self.regs.get(lo, 0)

  def method(self, name: str, data: int) -> None:
    self.regs[name] = data
    if name == "LAUNCH_DMA": self._launch(data)

  def _is(self, f: dict, field: str, value: str) -> bool:
    return f[field] == self.cls.value("LAUNCH_DMA", field, value)

  def _launch(self, data: int) -> None:
    f, vm = self.cls.unpack("LAUNCH_DMA", data), self.ch.vm
    if not self._is(f, "DATA_TRANSFER_TYPE", "NONE"):
      for side in ("SRC", "DST"):
        if not self._is(f, f"{side}_MEMORY_LAYOUT", "PITCH"):
          raise ChannelFault(f"LAUNCH_DMA with a block-linear {side.lower()} is not modelled")
        if not self._is(f, f"{side}_TYPE", "VIRTUAL"):
          raise ChannelFault(f"LAUNCH_DMA with a physical {side.lower()} address is not modelled")
      src, dst = self.a64("OFFSET_IN_UPPER", "OFFSET_IN_LOWER"), self.a64("OFFSET_OUT_UPPER", "OFFSET_OUT_LOWER")
      n = self.regs.get("LINE_LENGTH_IN", 0)
      lines = self.regs.get("LINE_COUNT", 1) if f["MULTI_LINE_ENABLE"] else 1
      pin, pout = self.regs.get("PITCH_IN", 0), self.regs.get("PITCH_OUT", 0)
      remap = self._remap() if f["REMAP_ENABLE"] else None
      if n and lines:
        if n * lines * (16 if remap else 1) > MAX_BYTES or (remap is not None and lines > MAX_REMAP_LINES):
          raise ChannelFault(f"LAUNCH_DMA of {lines} lines x {n} bytes: more than the mock moves in one launch "
                             f"({MAX_BYTES} bytes)")
        if remap is None and lines > 1: self._lines(src, dst, n, lines, pin, pout)
        for i in range(lines if remap is not None or lines == 1 else 0):
          if remap is None: vm.write(dst + i * pout, vm.read(src + i * pin, n))
          else: remap(src + i * pin, dst + i * pout, n)
    sem = self.cls.fields["LAUNCH_DMA"]["SEMAPHORE_TYPE"][2]
    if f["SEMAPHORE_TYPE"] == sem["NONE"]: return
    if f["SEMAPHORE_TYPE"] not in (sem["RELEASE_ONE_WORD_SEMAPHORE"], sem["RELEASE_FOUR_WORD_SEMAPHORE"]):
      raise ChannelFault(f"LAUNCH_DMA semaphore type {f['SEMAPHORE_TYPE']} is not modelled")
    wide = bool(f.get("SEMAPHORE_PAYLOAD_SIZE", 0))
    red = None
    if f["SEMAPHORE_REDUCTION_ENABLE"]:
      red = {v: k for k, v in self.cls.fields["LAUNCH_DMA"]["SEMAPHORE_REDUCTION"][2].items()}[f["SEMAPHORE_REDUCTION"]]
    release(vm, self.a64("SET_SEMAPHORE_A", "SET_SEMAPHORE_B"),
            self.a64("SET_SEMAPHORE_PAYLOAD_UPPER", "SET_SEMAPHORE_PAYLOAD") if wide else self.regs.get(
              "SET_SEMAPHORE_PAYLOAD", 0), bits=64 if wide else 32,
            timestamp=self.gpu.k.timestamp() if f["SEMAPHORE_TYPE"] == sem["RELEASE_FOUR_WORD_SEMAPHORE"] else None,
            reduction=red, signed=f["SEMAPHORE_REDUCTION_SIGN"] == 0)

  def _lines(self, src: int, dst: int, n: int, lines: int, pin: int, pout: int) -> None:
    """A multi-line copy as one strided numpy copy (each side's lines must lie in one mapping, in order)."""
    vm = self.ch.vm
    span = lambda base, pitch: (base, (lines - 1) * pitch + n)
    views = []
    for (base, size), pitch, access in ((span(src, pin), pin, "read"), (span(dst, pout), pout, "write")):
      v = np.frombuffer(vm.view(base, size, access), np.uint8)
      views.append(np.lib.stride_tricks.as_strided(v, (lines, n), (pitch, 1), writeable=access == "write"))
    views[1][...] = views[0].copy() if src < dst + (lines - 1) * pout + n and dst < src + (lines - 1) * pin + n \
      else views[0]

  def _remap(self):
    c = self.cls.unpack("SET_REMAP_COMPONENTS", self.regs.get("SET_REMAP_COMPONENTS", 0))
    size, nsrc, ndst = c["COMPONENT_SIZE"] + 1, c["NUM_SRC_COMPONENTS"] + 1, c["NUM_DST_COMPONENTS"] + 1
    sel = self.cls.fields["SET_REMAP_COMPONENTS"]["DST_X"][2]
    consts = {sel[f"CONST_{x}"]: self.regs.get(f"SET_REMAP_CONST_{x}", 0) for x in "AB"}
    picks = [c[f"DST_{a}"] for a in "XYZW"[:ndst]]
    vm = self.ch.vm

    def one(src: int, dst: int, n: int) -> None:
      if n == 0: return
      need_src = any(p < 4 for p in picks)
      s = np.frombuffer(vm.read(src, n * nsrc * size), np.uint8).reshape(n, nsrc, size) if need_src else None
      d = np.frombuffer(vm.read(dst, n * ndst * size), np.uint8).reshape(n, ndst, size).copy()
      for j, p in enumerate(picks):
        if p < 4:
          if p >= nsrc: raise ChannelFault(f"SET_REMAP_COMPONENTS: DST_{'XYZW'[j]} takes source component {p} of "
                                           f"{nsrc}")
          d[:, j] = s[:, p]
        elif p in consts:
          d[:, j] = np.frombuffer((consts[p] & ((1 << 8 * size) - 1)).to_bytes(size, "little"), np.uint8)
        elif p != sel["NO_WRITE"]:
          raise ChannelFault(f"SET_REMAP_COMPONENTS: DST_{'XYZW'[j]} select {p} is not defined")
      vm.write(dst, d.tobytes())
    return one
