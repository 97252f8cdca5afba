"""NVIDIA GPFIFO / pushbuffer / class-method / QMD encodings as data, with one encoder and decoder for each.

The facts live in `nvpush.json`, generated from the vendor headers by `gputwin.abi.gen_nvpush` (open-gpu-doc class
headers and GA100 manuals dev_ram.ref / dev_pbdma.ref, open-gpu-kernel-modules clc36f.h / clc86f.h): method byte
offsets and `hi:lo` fields with named values per class, the NV_FIFO_DMA_* method-header and NV_PPBDMA_GP_ENTRY*
formats, the USERD control-struct offsets, and the QMD V03_00 / V04_00 / V05_00 layouts (MW(hi:lo) bit ranges).

Both sides use this module: the runtime builds pushbuffers and QMDs with it, the mock GPU (gputwin.mock.nvgpu) decodes
them with it. It imports nothing of gputwin but errors.

    hdr = method_header("INC_METHOD", subc=1, method=nvclass(HOPPER_COMPUTE_A).method("SEND_PCAS_A"), count=2)
    words = pb_method(1, "SEND_PCAS_A", qmd_va >> 8, cls=HOPPER_COMPUTE_A) + ...
    entry = gp_entry(pb_va, len(words))                 # one 64-bit GPFIFO entry
    raw = qmd_build("V03_00", program=va, grid=(4, 1, 1), block=(128, 1, 1), cbufs={0: (cb_va, 0x300)})
    qmd_launch(raw).grid                                # (4, 1, 1)
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

from gputwin.errors import GputwinError

DATA = json.loads((Path(__file__).parent / "nvpush.json").read_text())

# class ids (g_allclasses.h)
VOLTA_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A = 0xC36F, 0xC56F, 0xC86F
AMPERE_COMPUTE_A, AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A = 0xC6C0, 0xC7C0, 0xC9C0, 0xCBC0
BLACKWELL_COMPUTE_A, BLACKWELL_COMPUTE_B = 0xCDC0, 0xCEC0
AMPERE_DMA_COPY_A, AMPERE_DMA_COPY_B, HOPPER_DMA_COPY_A = 0xC6B5, 0xC7B5, 0xC8B5
BLACKWELL_DMA_COPY_A, BLACKWELL_DMA_COPY_B = 0xC9B5, 0xCAB5
HOST_CLASSES = (VOLTA_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (AMPERE_COMPUTE_A, AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A, BLACKWELL_COMPUTE_A,
                   BLACKWELL_COMPUTE_B)
COPY_CLASSES = (AMPERE_DMA_COPY_A, AMPERE_DMA_COPY_B, HOPPER_DMA_COPY_A, BLACKWELL_DMA_COPY_A, BLACKWELL_DMA_COPY_B)

NUM_SUBCHANNELS = 8
HOST_METHOD_END = 0x100          # byte addresses below this are Host (NV_UDMA) methods (dev_pbdma.ref)
# USERD (the channel's control page): byte offsets of GPGet / GPPut ... (Nvc36fControl_struct, same in c56f/c86f)
USERD = DATA["userd"]
USERD_GP_GET, USERD_GP_PUT, USERD_SIZE = USERD["GPGet"], USERD["GPPut"], USERD["SIZE"]
GP_ENTRY_SIZE = 8


class NVPushError(GputwinError):
  """A pushbuffer word, GPFIFO entry, method or QMD that cannot be encoded or decoded."""


def _get(word: int, f) -> int: return (word >> f[1]) & ((1 << (f[0] - f[1] + 1)) - 1)


def _put(f, v: int, what: str) -> int:
  width = f[0] - f[1] + 1
  if not 0 <= v < (1 << width): raise NVPushError(f"{what}: {v:#x} does not fit {width} bits ({f[0]}:{f[1]})")
  return v << f[1]


def _value(f, v, what: str) -> int:
  if isinstance(v, str):
    if v not in f[-1]: raise NVPushError(f"{what}: no value {v!r}; it has {', '.join(sorted(f[-1])) or 'none'}")
    return f[-1][v]
  return int(v)


# ---------------------------------------------------------------- classes (methods, fields, values)
class NVClass:
  """One class's methods: byte offsets, their fields (hi, lo, values) and the indexed method arrays."""

  def __init__(self, cid: int, d: dict):
    self.id, self.methods, self.arrays, self.fields = cid, d["methods"], d["arrays"], d["fields"]
    self._names = {v: k for k, v in self.methods.items()}

  def __repr__(self): return f"NVClass({self.id:#06x})"

  def method(self, name: str, i: int | None = None) -> int:
    """Byte address of a method (`i`: element of an indexed method such as LOAD_INLINE_QMD_DATA(i))."""
    if i is not None and name in self.arrays: return self.arrays[name][0] + i * self.arrays[name][1]
    if name not in self.methods: raise NVPushError(f"class {self.id:#06x} has no method {name}")
    return self.methods[name]

  def name_of(self, method: int) -> str | None:
    """The method name at a byte address (`NAME(i)` for an element of an indexed method), or None."""
    if method in self._names: return self._names[method]
    for n, (base, stride) in self.arrays.items():
      if base <= method and (method - base) % stride == 0 and (method - base) // stride < 256:
        return f"{n}({(method - base) // stride})"
    return None

  def pack(self, method: str, **fields) -> int:
    """A method's data word from field values (ints or value names): pack("SEM_EXECUTE", OPERATION="RELEASE")."""
    fs = self.fields.get(method, {})
    word = 0
    for k, v in fields.items():
      if k not in fs: raise NVPushError(f"class {self.id:#06x} method {method} has no field {k}")
      word |= _put(fs[k], _value(fs[k], v, f"{method}.{k}"), f"{method}.{k}")
    return word

  def unpack(self, method: str, word: int) -> dict[str, int]:
    return {k: _get(word, f) for k, f in self.fields.get(method, {}).items()}

  def field(self, method: str, name: str) -> tuple[int, int]:
    return tuple(self.fields[method][name][:2])

  def value(self, method: str, name: str, value: str) -> int:
    return self.fields[method][name][2][value]


CLASSES: dict[int, NVClass] = {int(k, 16): NVClass(int(k, 16), v) for k, v in DATA["classes"].items()}


def nvclass(cid: int) -> NVClass:
  if cid not in CLASSES: raise NVPushError(f"no method table for class {cid:#06x}")
  return CLASSES[cid]


# ---------------------------------------------------------------- pushbuffer method headers (NV_FIFO_DMA_*)
PB = DATA["pb_header"]
SEC_OP = PB["SEC_OP"][2]        # GRP0_USE_TERT 0, INC_METHOD 1, GRP2_USE_TERT 2, NON_INC_METHOD 3, IMMD_DATA_METHOD 4,
TERT_OP = PB["TERT_OP"][2]      # ONE_INC 5, RESERVED6 6, END_PB_SEGMENT 7; tertiary (with SEC_OP 0): subdevice masks
SEC_OP_NAME = {v: k for k, v in SEC_OP.items()}
TERT_OP_NAME = {v: k for k, v in TERT_OP.items()}


class PbHeader(NamedTuple):
  kind: str          # SEC_OP name, or for SEC_OP 0: NOP / a TERT_OP name / GRP0_USE_TERT (reserved)
  subc: int
  method: int        # byte address
  count: int         # method data dwords following the header (0 for IMMD and control entries)
  data: int          # the immediate data (IMMD_DATA_METHOD) or the subdevice mask (SET/STORE_SUB_DEV_MASK)


def method_header(sec_op: int | str, subc: int, method: int, count: int) -> int:
  """A PB method header: sec_op (name or value), subchannel, method byte address, data count (for
  IMMD_DATA_METHOD: the 13-bit immediate data)."""
  op = _value(PB["SEC_OP"], sec_op, "SEC_OP")
  if method & 3: raise NVPushError(f"method address {method:#x} is not dword aligned")
  field = PB["IMMD_DATA"] if op == SEC_OP["IMMD_DATA_METHOD"] else PB["METHOD_COUNT"]
  return (_put(PB["SEC_OP"], op, "SEC_OP") | _put(field, count, "count/immediate data") |
          _put(PB["METHOD_SUBCHANNEL"], subc, "subchannel") | _put(PB["METHOD_ADDRESS"], method >> 2, "method"))


def decode_header(word: int) -> PbHeader:
  """The PB instruction at a header position (dev_ram.ref 'Types of PB Entries')."""
  op = _get(word, PB["SEC_OP"])
  subc, method = _get(word, PB["METHOD_SUBCHANNEL"]), _get(word, PB["METHOD_ADDRESS"]) << 2
  if op == SEC_OP["GRP0_USE_TERT"]:
    if word == PB["NOP"][2]["VALUE"]: return PbHeader("NOP", 0, 0, 0, 0)
    tert = _get(word, PB["TERT_OP"])
    return PbHeader(TERT_OP_NAME.get(tert, "GRP0_USE_TERT"), 0, 0, 0, _get(word, PB["SUBDEVICE_MASK"]))
  if op == SEC_OP["IMMD_DATA_METHOD"]: return PbHeader("IMMD_DATA_METHOD", subc, method, 0, _get(word, PB["IMMD_DATA"]))
  counted = (SEC_OP["INC_METHOD"], SEC_OP["NON_INC_METHOD"], SEC_OP["ONE_INC"])
  count = _get(word, PB["METHOD_COUNT"]) if op in counted else 0
  return PbHeader(SEC_OP_NAME.get(op, f"SEC_OP_{op}"), subc, method, count, 0)


def method_addresses(h: PbHeader) -> list[int]:
  """The byte address of each method a header generates, in order (INC: +4 each, NON_INC: same, ONE_INC: the first,
  then +4 for the rest; IMMD: one)."""
  if h.kind == "IMMD_DATA_METHOD": return [h.method]
  step = {"INC_METHOD": lambda i: 4 * i, "NON_INC_METHOD": lambda i: 0, "ONE_INC": lambda i: 4 * min(i, 1)}[h.kind]
  return [h.method + step(i) for i in range(h.count)]


def pb_method(subc: int, method: int | str, *data: int, cls: int | None = None,
              sec_op: str = "INC_METHOD") -> list[int]:
  """Header + data words. `method`: byte address, or a name looked up in class `cls`."""
  if isinstance(method, str): method = nvclass(cls).method(method)
  return [method_header(sec_op, subc, method, len(data)), *(d & 0xFFFFFFFF for d in data)]


def pb_immd(subc: int, method: int | str, value: int, cls: int | None = None) -> list[int]:
  if isinstance(method, str): method = nvclass(cls).method(method)
  return [method_header("IMMD_DATA_METHOD", subc, method, value)]


# ---------------------------------------------------------------- GPFIFO entries (NV_PPBDMA_GP_ENTRY0/1)
GP0, GP1 = DATA["gp_entry"]["0"], DATA["gp_entry"]["1"]
GP_OPCODE = GP1["OPCODE"][2]
GP_MAX_LENGTH = (1 << (GP1["LENGTH"][0] - GP1["LENGTH"][1] + 1)) - 1


class GpEntry(NamedTuple):
  va: int            # pushbuffer segment address (GET << 2 | GET_HI << 32)
  length: int        # dwords; 0 = a control entry (see opcode)
  sync: bool         # SYNC_WAIT: wait for the previous segment's methods to finish before fetching
  level: int         # 0 main, 1 subroutine
  fetch: int         # 0 unconditional, 1 conditional
  opcode: int        # control entries: NOP / ILLEGAL / GP_CRC / PB_CRC / SET_PB_SEGMENT_EXTENDED_BASE
  operand: int       # control entries: ENTRY0 as a whole


def gp_entry(va: int, length: int, *, sync: bool = False, level: int = 0, fetch: int = 0) -> int:
  """One 64-bit GPFIFO entry (ENTRY0 in the low word) for a pushbuffer segment of `length` dwords at `va`."""
  if va & 3: raise NVPushError(f"pushbuffer segment address {va:#x} is not dword aligned")
  if va >> 40: raise NVPushError(f"pushbuffer segment address {va:#x} needs more than 40 bits "
                                 "(SET_PB_SEGMENT_EXTENDED_BASE is not generated)")
  if not 0 < length <= GP_MAX_LENGTH: raise NVPushError(f"pushbuffer segment of {length} dwords")
  e0 = _put(GP0["GET"], (va & 0xFFFFFFFF) >> 2, "GET") | _put(GP0["FETCH"], fetch, "FETCH")
  e1 = (_put(GP1["GET_HI"], va >> 32, "GET_HI") | _put(GP1["LENGTH"], length, "LENGTH") |
        _put(GP1["SYNC"], int(sync), "SYNC") | _put(GP1["LEVEL"], level, "LEVEL"))
  return e0 | (e1 << 32)


def gp_control(opcode: int | str, operand: int = 0) -> int:
  """A control GPFIFO entry (LENGTH 0): NOP, ILLEGAL, GP_CRC, PB_CRC, SET_PB_SEGMENT_EXTENDED_BASE."""
  return (operand & 0xFFFFFFFF) | (_put(GP1["OPCODE"], _value(GP1["OPCODE"], opcode, "GP opcode"), "OPCODE") << 32)


def decode_gp_entry(entry: int) -> GpEntry:
  e0, e1 = entry & 0xFFFFFFFF, entry >> 32
  return GpEntry((_get(e1, GP1["GET_HI"]) << 32) | (_get(e0, GP0["GET"]) << 2), _get(e1, GP1["LENGTH"]),
                 bool(_get(e1, GP1["SYNC"])), _get(e1, GP1["LEVEL"]), _get(e0, GP0["FETCH"]),
                 _get(e1, GP1["OPCODE"]), e0)


def extended_base(entry: int) -> int:
  """Address bits 40 and up that a SET_PB_SEGMENT_EXTENDED_BASE control entry sets for the following segments."""
  return _get(entry & 0xFFFFFFFF, GP0["PB_EXTENDED_BASE_OPERAND"]) << 40


# ---------------------------------------------------------------- QMD layouts
@dataclasses.dataclass(frozen=True)
class QmdLayout:
  version: str                     # "V03_00"
  bits: int
  fields: dict                     # NAME -> [hi, lo, stride (bits; 0 = plain), count, {VALUE: v}]

  @property
  def size(self) -> int: return self.bits // 8
  @property
  def major(self) -> int: return int(self.version[1:3])
  @property
  def minor(self) -> int: return int(self.version[4:6])

  def bits_of(self, name: str, i: int | None = None) -> tuple[int, int]:
    """(hi, lo) of a field (instance i of an indexed one) in the QMD as one little-endian bit string."""
    if name not in self.fields: raise NVPushError(f"QMD {self.version} has no field {name}")
    hi, lo, stride, count, _ = self.fields[name]
    if stride:
      if i is None or not 0 <= i < count:
        raise NVPushError(f"QMD {self.version} {name}({i}): index out of 0..{count - 1}")
      return hi + i * stride, lo + i * stride
    if i is not None: raise NVPushError(f"QMD {self.version} field {name} is not indexed")
    return hi, lo


QMD = {v: QmdLayout(v, q["bits"], q["fields"]) for v, q in DATA["qmd"].items()}
QMD_VERSIONS = tuple(QMD)
_MINOR = {"V03_00": "QMD_VERSION", "V04_00": "QMD_MINOR_VERSION", "V05_00": "QMD_MINOR_VERSION"}


def qmd_layout(version: str) -> QmdLayout:
  if version not in QMD: raise NVPushError(f"unknown QMD version {version!r}; known: {', '.join(QMD)}")
  return QMD[version]


def qmd_encode(version: str, **fields) -> bytes:
  """A QMD of `version` with the major/minor version fields set and the given fields (ints or value names; an indexed
  field takes a list or {index: value})."""
  lay = qmd_layout(version)
  v = 0
  items = {"QMD_MAJOR_VERSION": lay.major, _MINOR[version]: lay.minor, **fields}
  for name, val in items.items():
    if name not in lay.fields: raise NVPushError(f"QMD {version} has no field {name}")
    f = lay.fields[name]
    inst = (val.items() if isinstance(val, dict) else enumerate(val)) if f[2] else [(None, val)]
    for i, x in inst:
      hi, lo = lay.bits_of(name, i)
      x = _value(f, x, f"QMD {version} {name}")
      v = (v & ~(((1 << (hi - lo + 1)) - 1) << lo)) | _put((hi, lo), x, f"QMD {version} {name}")
  return v.to_bytes(lay.size, "little")


def qmd_version(raw: bytes) -> str:
  """The version a QMD says it is (V03/V04 keep major/minor at bits 583:576, V05 at 471:464)."""
  v = int.from_bytes(bytes(raw[:256]), "little")
  for ver in QMD_VERSIONS:
    lay = QMD[ver]
    hi, lo = lay.bits_of("QMD_MAJOR_VERSION")
    mhi, mlo = lay.bits_of(_MINOR[ver])
    if _get(v, (hi, lo)) == lay.major and _get(v, (mhi, mlo)) == lay.minor: return ver
  raise NVPushError(f"QMD with an unknown version (bits 583:576 = {_get(v, (583, 576)):#x}, "
                    f"bits 471:464 = {_get(v, (471, 464)):#x})")


def qmd_decode(raw: bytes, version: str | None = None) -> dict:
  """Every field of a QMD by name (indexed fields as lists); "version" holds the version string."""
  version = version or qmd_version(raw)
  lay = qmd_layout(version)
  if len(raw) < lay.size: raise NVPushError(f"QMD {version} needs {lay.size} bytes, got {len(raw)}")
  v = int.from_bytes(bytes(raw[:lay.size]), "little")
  out: dict = {"version": version}
  for name, f in lay.fields.items():
    out[name] = [_get(v, lay.bits_of(name, i)) for i in range(f[3])] if f[2] else _get(v, f[:2])
  return out


# -------- the launch a QMD describes, one row of field names per version (encode and decode share it)
QMD_LAUNCH = {
  "V03_00": dict(grid=("CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT", "CTA_RASTER_DEPTH"),
                 program=("PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER", 0), shared=("SHARED_MEMORY_SIZE", 0),
                 cb=("CONSTANT_BUFFER_ADDR_LOWER", "CONSTANT_BUFFER_ADDR_UPPER", 0), regs="REGISTER_COUNT_V",
                 local=("SHADER_LOCAL_MEMORY_LOW_SIZE", "SHADER_LOCAL_MEMORY_HIGH_SIZE", 0)),
  "V04_00": dict(grid=("GRID_WIDTH", "GRID_HEIGHT", "GRID_DEPTH"),
                 program=("PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER", 0), shared=("SHARED_MEMORY_SIZE", 0),
                 cb=("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 6),
                 regs="REGISTER_COUNT", local=("SHADER_LOCAL_MEMORY_LOW_SIZE", "SHADER_LOCAL_MEMORY_HIGH_SIZE", 0)),
  "V05_00": dict(grid=("GRID_WIDTH", "GRID_HEIGHT", "GRID_DEPTH"),
                 program=("PROGRAM_ADDRESS_LOWER_SHIFTED4", "PROGRAM_ADDRESS_UPPER_SHIFTED4", 4),
                 shared=("SHARED_MEMORY_SIZE_SHIFTED7", 7),
                 cb=("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 6),
                 regs="REGISTER_COUNT",
                 local=("SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4", "SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", 4)),
}


@dataclasses.dataclass
class QmdRelease:
  va: int
  payload: int
  structure_size: int    # 0 four words (payload + timestamp), 1 one word, 2 two words
  payload64: bool
  reduction: int | None  # REDUCTION_OP when REDUCTION_ENABLE
  signed: bool


@dataclasses.dataclass
class QmdLaunch:
  version: str
  program: int
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  shared: int
  registers: int
  local: tuple[int, int]
  cbufs: dict[int, tuple[int, int]]   # valid constant banks: index -> (va, size in bytes)
  releases: list[QmdRelease]
  fields: dict


def _release_name(version: str, i: int, f: str) -> tuple[str, int | None]:
  if version == "V03_00": return f"RELEASE{i}_{f}", None
  return f"RELEASE_{f}", i


def _release_words(version: str, i: int) -> tuple[tuple[str, str], tuple[str, str]]:
  if version == "V03_00": return (f"RELEASE{i}_ADDRESS_LOWER", f"RELEASE{i}_ADDRESS_UPPER"), \
                                 (f"RELEASE{i}_PAYLOAD_LOWER", f"RELEASE{i}_PAYLOAD_UPPER")
  return (f"RELEASE_SEMAPHORE{i}_ADDR_LOWER", f"RELEASE_SEMAPHORE{i}_ADDR_UPPER"), \
         (f"RELEASE_SEMAPHORE{i}_PAYLOAD_LOWER", f"RELEASE_SEMAPHORE{i}_PAYLOAD_UPPER")


def qmd_launch(raw: bytes, version: str | None = None) -> QmdLaunch:
  """What a QMD asks for: program address, grid, CTA shape, shared memory, valid constant banks, enabled releases."""
  d = qmd_decode(raw, version)
  ver, row = d["version"], QMD_LAUNCH[d["version"]]
  lo, hi, sh = row["program"]
  cbl, cbh, cbs = row["cb"]
  cbufs = {i: (((d[cbh][i] << 32) | d[cbl][i]) << cbs, d["CONSTANT_BUFFER_SIZE_SHIFTED4"][i] << 4)
           for i in range(8) if d["CONSTANT_BUFFER_VALID"][i]}
  rel = []
  for i in range(3):
    g = lambda f: (lambda n, j: d[n] if j is None else d[n][j])(*_release_name(ver, i, f))
    if not g("ENABLE"): continue
    (al, ah), (pl, ph) = _release_words(ver, i)
    rel.append(QmdRelease((d[ah] << 32) | d[al], (d[ph] << 32) | d[pl], g("STRUCTURE_SIZE"), bool(g("PAYLOAD64B")),
                          g("REDUCTION_OP") if g("REDUCTION_ENABLE") else None, g("REDUCTION_FORMAT") == 1))
  llo, lhi, lsh = row["local"]
  return QmdLaunch(ver, ((d[hi] << 32) | d[lo]) << sh, tuple(d[n] for n in row["grid"]),
                   tuple(d[f"CTA_THREAD_DIMENSION{i}"] for i in range(3)), d[row["shared"][0]] << row["shared"][1],
                   d[row["regs"]], (d[llo] << lsh, d[lhi] << lsh), cbufs, rel, d)


def qmd_build(version: str, *, program: int, grid, block, shared: int = 0, registers: int = 0,
              cbufs: dict[int, tuple[int, int]] | None = None, releases: list[dict] | None = None,
              local: tuple[int, int] = (0, 0), **extra) -> bytes:
  """A QMD from the launch: the inverse of qmd_launch. `releases`: up to 3 dicts with va, payload and
  optional structure_size (default ONE_WORD=1 ... name or int), payload64, reduction (REDUCTION_OP name/int), signed."""
  row = QMD_LAUNCH[version]
  f: dict = dict(extra)
  lo, hi, sh = row["program"]
  if program & ((1 << sh) - 1): raise NVPushError(f"QMD {version}: program address {program:#x} not {1 << sh}-aligned")
  f[lo], f[hi] = (program >> sh) & 0xFFFFFFFF, program >> sh >> 32
  for n, v in zip(row["grid"], grid): f[n] = v
  for i, v in enumerate(block): f[f"CTA_THREAD_DIMENSION{i}"] = v
  sn, ss = row["shared"]
  f[sn] = -(-shared >> ss) if ss else shared
  f[row["regs"]] = registers
  llo, lhi, lsh = row["local"]
  f[llo], f[lhi] = local[0] >> lsh, local[1] >> lsh
  cbl, cbh, cbs = row["cb"]
  for i, (va, size) in (cbufs or {}).items():
    if va & ((1 << cbs) - 1) or size & 15: raise NVPushError(f"QMD {version}: constant bank {i} at {va:#x}+{size:#x} "
                                                             "misaligned")
    for n, x in ((cbl, (va >> cbs) & 0xFFFFFFFF), (cbh, va >> cbs >> 32), ("CONSTANT_BUFFER_SIZE_SHIFTED4", size >> 4),
                 ("CONSTANT_BUFFER_VALID", 1)):
      f.setdefault(n, {})[i] = x
  for i, r in enumerate(releases or []):
    (al, ah), (pl, ph) = _release_words(version, i)
    f[al], f[ah] = r["va"] & 0xFFFFFFFF, r["va"] >> 32
    f[pl], f[ph] = r["payload"] & 0xFFFFFFFF, r["payload"] >> 32 & 0xFFFFFFFF
    vals = {"ENABLE": 1, "STRUCTURE_SIZE": r.get("structure_size", 1), "PAYLOAD64B": int(r.get("payload64", False)),
            "REDUCTION_ENABLE": int(r.get("reduction") is not None), "REDUCTION_OP": r.get("reduction") or 0,
            "REDUCTION_FORMAT": int(r.get("signed", False))}
    for k, v in vals.items():
      n, j = _release_name(version, i, k)
      if isinstance(v, str): v = _value(QMD[version].fields[n], v, n)
      if j is None: f[n] = v
      else: f.setdefault(n, {})[j] = v
  return qmd_encode(version, **f)
