"""Host (NV_UDMA) methods of a GPFIFO channel class and the semaphore operations the engines share.

Semantics from dev_pbdma.ref (GA100) "Host Semaphore Methods": SEM_ADDR_LO/HI + SEM_PAYLOAD_LO/HI set up, SEM_EXECUTE
runs an acquire (ACQUIRE ==, ACQ_STRICT_GEQ unsigned >=, ACQ_CIRC_GEQ (sv - pv) as signed >= 0, ACQ_AND (sv & pv) != 0,
ACQ_NOR ~(sv | pv) != 0; a failed acquire leaves the channel at the method, to be retried while other channels run),
a release (32/64-bit payload; with RELEASE_TIMESTAMP the 16-byte structure: payload (32-bit zero-extended) at +0,
the timer at +8, written first) or a reduction (IMIN IMAX IXOR IAND IOR IADD INC DEC, signed/unsigned as the table
there allows). Misaligned addresses and unsupported reductions raise the SEMAPHORE interrupt: a channel error here.
The older SEMAPHOREA..D methods are handled the same way. Memory is coherent, so WFI, MEM_OP_*, FB_FLUSH, YIELD,
NON_STALL_INTERRUPT are no-ops; ILLEGAL and unknown host methods are errors.
"""
from __future__ import annotations

from gputwin.abi import nvpush as NP
from gputwin.errors import GPUFault


class Blocked(Exception):
  """A semaphore acquire whose condition does not hold yet: the channel stays at this method."""


class ChannelFault(GPUFault):
  """An error of the channel (a bad GP entry, PB entry, method, QMD, semaphore; `error`: the emulator's exception of
  a kernel). The GPU reports faults without an emulator exception to the driver as a ChannelFault with the whole
  reason, so gpu_error() accounts for every fault."""

  def __init__(self, msg: str, va: int | None = None, error: Exception | None = None):
    super().__init__(msg)
    self.va, self.error = va, error


M64 = (1 << 64) - 1

# reduction names of the host/copy classes (IMIN ...) and of the compute classes (RED_MIN ...) -> (op, allowed):
# allowed = (32-bit signed, 32-bit unsigned, 64-bit signed, 64-bit unsigned) per the dev_pbdma.ref table
REDUCTIONS = {
  "MIN": (lambda v, p, w: min(v, p), (1, 1, 1, 1)), "MAX": (lambda v, p, w: max(v, p), (1, 1, 1, 1)),
  "XOR": (lambda v, p, w: v ^ p, (1, 1, 1, 1)), "AND": (lambda v, p, w: v & p, (1, 1, 1, 1)),
  "OR": (lambda v, p, w: v | p, (1, 1, 1, 1)), "ADD": (lambda v, p, w: v + p, (1, 1, 0, 1)),
  "INC": (lambda v, p, w: 0 if v >= p else v + 1, (0, 1, 0, 0)),
  "DEC": (lambda v, p, w: p if v == 0 or v > p else v - 1, (0, 1, 0, 0)),
}
ALIAS = {"IMIN": "MIN", "IMAX": "MAX", "IXOR": "XOR", "IAND": "AND", "IOR": "OR", "IADD": "ADD"}


def reduce(name: str, v: int, p: int, bits: int, signed: bool) -> int:
  """The reduction `name` (IMIN.., RED_MIN.., or MIN..) of memory value v with payload p, `bits` wide."""
  key = ALIAS.get(name, name.removeprefix("RED_"))
  if key not in REDUCTIONS: raise ChannelFault(f"semaphore reduction {name} is not supported")
  fn, ok = REDUCTIONS[key]
  if not ok[(bits == 64) * 2 + (not signed)]:
    raise ChannelFault(f"semaphore reduction {name} is not supported for {'signed' if signed else 'unsigned'} "
                       f"{bits}-bit payloads")
  mask = (1 << bits) - 1
  if signed and key in ("MIN", "MAX", "ADD"):
    sx = lambda x: x - (1 << bits) if x >> (bits - 1) else x
    return fn(sx(v), sx(p), bits) & mask
  return fn(v, p, bits) & mask


def release(vm, va: int, payload: int, *, bits: int = 32, timestamp: int | None = None,
            reduction: str | None = None, signed: bool = False) -> None:
  """Write a semaphore: the payload (or the reduction of the memory value with it); with a timestamp, the 16-byte
  structure (timestamp at +8 written before the payload at +0, a 32-bit payload zero-extended)."""
  size = bits // 8
  if va % (16 if timestamp is not None else size):
    raise ChannelFault(f"semaphore address {va:#x} is not {16 if timestamp is not None else size}-byte aligned "
                       f"(SEMAPHORE interrupt)", va)
  payload &= (1 << bits) - 1
  if reduction is not None:
    payload = reduce(reduction, vm.read_u64(va) if bits == 64 else vm.read_u32(va), payload, bits, signed)
  if timestamp is not None:
    vm.write_u64(va + 8, timestamp)
    vm.write_u64(va, payload)
  elif bits == 64: vm.write_u64(va, payload)
  else: vm.write_u32(va, payload)


ACQUIRE = {"ACQUIRE": lambda s, p, b: s == p, "ACQ_STRICT_GEQ": lambda s, p, b: s >= p,
           "ACQ_CIRC_GEQ": lambda s, p, b: ((s - p) & ((1 << b) - 1)) >> (b - 1) == 0,
           "ACQ_AND": lambda s, p, b: (s & p) != 0, "ACQ_NOR": lambda s, p, b: (~(s | p) & ((1 << b) - 1)) != 0}


def acquire(vm, va: int, payload: int, op: str, bits: int) -> None:
  if va % (bits // 8): raise ChannelFault(f"semaphore address {va:#x} is not {bits // 8}-byte aligned", va)
  sv = vm.read_u64(va) if bits == 64 else vm.read_u32(va)
  if not ACQUIRE[op](sv, payload & ((1 << bits) - 1), bits): raise Blocked()


NOOPS = {"NOP", "WFI", "FB_FLUSH", "MEM_OP_A", "MEM_OP_B", "MEM_OP_C", "MEM_OP_D", "YIELD", "NON_STALL_INTERRUPT",
         "CLEAR_FAULTED", "SET_REFERENCE", "SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI",
         "SEMAPHOREA", "SEMAPHOREB", "SEMAPHOREC"}


def host_method(cls: NP.NVClass, regs: dict, name: str, data: int, vm, timestamp) -> None:
  """One host method (not SET_OBJECT) of class `cls`; `regs` keeps the channel's host method state by name."""
  regs[name] = data
  if name in NOOPS: return
  if name == "ILLEGAL": raise ChannelFault(f"ILLEGAL method (handle {data:#x})")
  if name == "SEM_EXECUTE":
    f = cls.unpack("SEM_EXECUTE", data)
    ops = {v: k for k, v in cls.fields["SEM_EXECUTE"]["OPERATION"][2].items()}
    op = ops.get(f["OPERATION"])
    hi = cls.unpack("SEM_ADDR_HI", regs.get("SEM_ADDR_HI", 0))["OFFSET"]
    va = (hi << 32) | (regs.get("SEM_ADDR_LO", 0) & 0xFFFFFFFC)
    bits = 64 if f["PAYLOAD_SIZE"] else 32
    payload = (regs.get("SEM_PAYLOAD_HI", 0) << 32) | regs.get("SEM_PAYLOAD_LO", 0)
    if op in ACQUIRE: return acquire(vm, va, payload, op, bits)
    if op in ("RELEASE", "REDUCTION"):
      red = None
      if op == "REDUCTION":
        names = {v: k for k, v in cls.fields["SEM_EXECUTE"]["REDUCTION"][2].items()}
        red = names.get(f["REDUCTION"], f"reduction {f['REDUCTION']}")
      return release(vm, va, payload, bits=bits, timestamp=timestamp() if f["RELEASE_TIMESTAMP"] else None,
                     reduction=red, signed=f["REDUCTION_FORMAT"] == 0)
    raise ChannelFault(f"SEM_EXECUTE operation {f['OPERATION']} is not defined")
  if name == "SEMAPHORED":
    f = cls.unpack("SEMAPHORED", data)
    va = ((regs.get("SEMAPHOREA", 0) & 0xFF) << 32) | (regs.get("SEMAPHOREB", 0) & 0xFFFFFFFC)
    payload = regs.get("SEMAPHOREC", 0)
    op = {v: k for k, v in cls.fields["SEMAPHORED"]["OPERATION"][2].items()}.get(f["OPERATION"])
    if op in ("ACQUIRE", "ACQ_GEQ", "ACQ_AND"):
      return acquire(vm, va, payload, {"ACQUIRE": "ACQUIRE", "ACQ_GEQ": "ACQ_CIRC_GEQ", "ACQ_AND": "ACQ_AND"}[op], 32)
    if op in ("RELEASE", "REDUCTION"):
      red = {v: k for k, v in cls.fields["SEMAPHORED"]["REDUCTION"][2].items()}.get(f["REDUCTION"]) \
        if op == "REDUCTION" else None
      return release(vm, va, payload, timestamp=None if f["RELEASE_SIZE"] else timestamp(), reduction=red,
                     signed=f["FORMAT"] == 0)
    raise ChannelFault(f"SEMAPHORED operation {f['OPERATION']:#x} is not defined")
  raise ChannelFault(f"host method {name} is not modelled")
