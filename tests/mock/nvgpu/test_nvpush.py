"""gputwin.abi.nvpush against the vendor headers: every field we use is re-read here from the header text (a regex
over `#define`s, independent of gen_nvpush), and the encoders are checked against those bit ranges."""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from gputwin.abi import nvpush as NP

VENDOR = Path(__file__).resolve().parents[3].parent / "shared" / "vendor" / "nv"
DOC = VENDOR / "open-gpu-doc"
KERN = VENDOR / "open-gpu-kernel-modules/src/common/sdk/nvidia/inc/class"
pytestmark = pytest.mark.skipif(not VENDOR.exists(), reason="vendor headers (../shared/vendor/nv) not present")


def defs(path: Path) -> dict[str, str]:
  return {m.group(1): m.group(2).strip() for m in re.finditer(r"^#define\s+(\S+)\s+(.*?)\s*(?:/\*.*)?$",
                                                              path.read_text(), re.M)}


def bits(s: str) -> tuple[int, int]:
  m = re.fullmatch(r"(?:MW\()?(\d+):(\d+)\)?", s.replace(" ", ""))
  return int(m.group(1)), int(m.group(2))


# ---------------------------------------------------------------- method headers (dev_ram.ref NV_FIFO_DMA_*)
RAM = defs(DOC / "manuals/ampere/ga100/dev_ram.ref.txt") if VENDOR.exists() else {}  # (module skipped without it)


def test_sec_op_values_and_fields_match_dev_ram():
  for name, v in NP.SEC_OP.items(): assert int(RAM[f"NV_FIFO_DMA_SEC_OP_{name}"].split()[0], 16) == v
  assert bits(RAM["NV_FIFO_DMA_SEC_OP"]) == (31, 29)
  assert bits(RAM["NV_FIFO_DMA_METHOD_COUNT"]) == (28, 16)
  assert bits(RAM["NV_FIFO_DMA_METHOD_SUBCHANNEL"]) == (15, 13)
  assert bits(RAM["NV_FIFO_DMA_METHOD_ADDRESS"]) == (11, 0)
  assert bits(RAM["NV_FIFO_DMA_IMMD_DATA"]) == (28, 16)


@pytest.mark.parametrize("op", ["INC_METHOD", "NON_INC_METHOD", "ONE_INC", "IMMD_DATA_METHOD"])
def test_method_header_encodes_at_the_manual_bit_ranges(op):
  rng = random.Random(op)
  hi_op, lo_op = bits(RAM["NV_FIFO_DMA_SEC_OP"])
  for _ in range(200):
    subc, dw, n = rng.randrange(8), rng.randrange(1 << 12), rng.randrange(1 << 13)
    w = NP.method_header(op, subc, dw * 4, n)
    get = lambda f: (w >> bits(RAM[f])[1]) & ((1 << (bits(RAM[f])[0] - bits(RAM[f])[1] + 1)) - 1)
    assert (w >> lo_op) & ((1 << (hi_op - lo_op + 1)) - 1) == int(RAM[f"NV_FIFO_DMA_SEC_OP_{op}"].split()[0], 16)
    assert get("NV_FIFO_DMA_METHOD_SUBCHANNEL") == subc and get("NV_FIFO_DMA_METHOD_ADDRESS") == dw
    assert get("NV_FIFO_DMA_IMMD_DATA" if op == "IMMD_DATA_METHOD" else "NV_FIFO_DMA_METHOD_COUNT") == n
    h = NP.decode_header(w)
    assert (h.kind, h.subc, h.method) == (op, subc, dw * 4)
    assert (h.data if op == "IMMD_DATA_METHOD" else h.count) == n


def test_method_address_sequences_per_sec_op():
  # dev_ram.ref examples: incrementing addr, addr+1, ...; increment-once addr, addr+1, addr+1, ...; non-incrementing
  h = lambda op: NP.decode_header(NP.method_header(op, 1, 0x100, 4))
  assert NP.method_addresses(h("INC_METHOD")) == [0x100, 0x104, 0x108, 0x10C]
  assert NP.method_addresses(h("ONE_INC")) == [0x100, 0x104, 0x104, 0x104]
  assert NP.method_addresses(h("NON_INC_METHOD")) == [0x100] * 4


def test_control_entries_decode():
  assert NP.decode_header(int(RAM["NV_FIFO_DMA_NOP"].split()[0], 16)).kind == "NOP"
  endseg = int(RAM["NV_FIFO_DMA_ENDSEG_OPCODE_VALUE"].split()[0], 16) << 29
  assert NP.decode_header(endseg).kind == "END_PB_SEGMENT"
  for name, tert in (("SET_SUBDEVICE_MASK", "GRP0_SET_SUB_DEV_MASK"),
                     ("STORE_SUBDEVICE_MASK", "GRP0_STORE_SUB_DEV_MASK")):
    w = (int(RAM[f"NV_FIFO_DMA_{name}_OPCODE_VALUE"].split()[0], 16) << 16) | (0x5A5 << 4)
    assert NP.decode_header(w) == NP.PbHeader(tert, 0, 0, 0, 0x5A5)
  use = int(RAM["NV_FIFO_DMA_USE_SUBDEVICE_MASK_OPCODE_VALUE"].split()[0], 16) << 16
  assert NP.decode_header(use).kind == "GRP0_USE_SUB_DEV_MASK"
  assert NP.decode_header(6 << 29).kind == "RESERVED6"


# ---------------------------------------------------------------- GPFIFO entries and USERD
def test_gp_entry_against_dev_pbdma():
  P = defs(DOC / "manuals/ampere/ga100/dev_pbdma.ref.txt")
  rng = random.Random(1)
  for _ in range(200):
    va, n, sync = rng.randrange(1 << 38) * 4, rng.randrange(1, 1 << 21), rng.random() < 0.5
    e = NP.gp_entry(va, n, sync=sync)
    e0, e1 = e & 0xFFFFFFFF, e >> 32
    f = lambda w, name: (w >> bits(P[name])[1]) & ((1 << (bits(P[name])[0] - bits(P[name])[1] + 1)) - 1)
    # dev_pbdma.ref: the segment starts at (GET_HI << 32) + (GET << 2)
    assert (f(e1, "NV_PPBDMA_GP_ENTRY1_GET_HI") << 32) + (f(e0, "NV_PPBDMA_GP_ENTRY0_GET") << 2) == va
    assert f(e1, "NV_PPBDMA_GP_ENTRY1_LENGTH") == n and f(e1, "NV_PPBDMA_GP_ENTRY1_SYNC") == sync
    assert NP.decode_gp_entry(e)[:3] == (va, n, sync)
  with pytest.raises(NP.NVPushError): NP.gp_entry(1 << 40, 4)
  with pytest.raises(NP.NVPushError): NP.gp_entry(0x1002, 4)


def test_userd_offsets_from_the_control_struct_comments():
  for path in (KERN / "clc36f.h", KERN / "clc86f.h", DOC / "classes/host/clc56f.h"):
    text = path.read_text()
    for name, key in (("GPGet", "GPGet"), ("GPPut", "GPPut"), ("Put", "Put"), ("Get", "Get")):
      m = re.search(rf"NvU32 {name};\s*/\*.*?([0-9a-f]{{4}})-[0-9a-f]{{4}}\s*\*/", text)
      assert int(m.group(1), 16) == NP.USERD[key], (path.name, name)


# ---------------------------------------------------------------- classes
@pytest.mark.parametrize("cid,path", [(0xC56F, DOC / "classes/host/clc56f.h"), (0xC86F, KERN / "clc86f.h")] +
                         [(c, DOC / f"classes/compute/cl{c:04x}.h") for c in (0xC6C0, 0xC7C0, 0xC9C0, 0xCBC0)] +
                         [(c, DOC / f"classes/dma-copy/cl{c:04x}.h") for c in (0xC6B5, 0xC7B5, 0xC8B5)])
def test_class_methods_and_fields_match_header(cid, path):
  d, cls, pre = defs(path), NP.nvclass(cid), f"NV{cid:04X}_"
  want = ["SET_OBJECT", "SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI", "SEM_EXECUTE", "WFI",
          "LAUNCH_DMA", "LINE_LENGTH_IN", "LINE_COUNT", "OFFSET_OUT_UPPER", "OFFSET_OUT", "LOAD_INLINE_DATA",
          "SEND_PCAS_A", "SEND_PCAS_B", "SEND_SIGNALING_PCAS_B", "SEND_SIGNALING_PCAS2_B", "SET_INLINE_QMD_ADDRESS_A",
          "SET_INLINE_QMD_ADDRESS_B", "SET_REPORT_SEMAPHORE_A", "SET_REPORT_SEMAPHORE_D", "SET_SHADER_LOCAL_MEMORY_A",
          "SET_SHADER_LOCAL_MEMORY_WINDOW_B", "SET_SHADER_SHARED_MEMORY_WINDOW_A", "INVALIDATE_SHADER_CACHES",
          "OFFSET_IN_UPPER", "OFFSET_IN_LOWER", "OFFSET_OUT_LOWER", "PITCH_IN", "PITCH_OUT", "SET_SEMAPHORE_A",
          "SET_SEMAPHORE_B", "SET_SEMAPHORE_PAYLOAD", "SET_REMAP_CONST_A", "SET_REMAP_COMPONENTS"]
  methods = [k[len(pre):] for k, v in d.items() if k.startswith(pre) and re.fullmatch(r"\(?0x[0-9a-fA-F]+\)?", v)]
  seen = 0
  for m in want:
    if pre + m not in d: continue
    seen += 1
    assert cls.method(m) == int(d[pre + m].strip("()"), 16), m
    for k, v in d.items():   # every hi:lo field of that method (not of a longer-named method)
      if not (k.startswith(f"{pre}{m}_") and re.fullmatch(r"\d+:\d+", v)): continue
      if max((x for x in methods if k.startswith(f"{pre}{x}_")), key=len) != m: continue
      assert cls.field(m, k[len(pre) + len(m) + 1:]) == bits(v), k
  assert seen >= 5
  if f"{pre}LOAD_INLINE_QMD_DATA(i)" in d:
    assert cls.method("LOAD_INLINE_QMD_DATA", 5) == 0x320 + 5 * 4
    assert cls.name_of(0x320 + 4 * 63) == "LOAD_INLINE_QMD_DATA(63)"


def test_hopper_host_sem_addr_hi_is_wider_than_amperes():
  assert NP.nvclass(0xC56F).field("SEM_ADDR_HI", "OFFSET") == (7, 0)
  assert NP.nvclass(0xC86F).field("SEM_ADDR_HI", "OFFSET") == (24, 0)
  sem = NP.nvclass(0xC86F).pack("SEM_EXECUTE", OPERATION="RELEASE", PAYLOAD_SIZE="64BIT", RELEASE_TIMESTAMP="EN")
  assert sem == 1 | (1 << 24) | (1 << 25)


# ---------------------------------------------------------------- QMD layouts
QMD_HEADERS = {"V03_00": [DOC / "classes/compute/clcbc0qmd.h", DOC / "classes/compute/clc6c0qmd.h",
                          DOC / "classes/compute/clc9c0qmd.h"],
               "V04_00": [DOC / "classes/compute/clcbc0qmd.h"], "V05_00": [DOC / "classes/compute/clcec0qmd.h"]}


def header_fields(path: Path, version: str) -> dict[str, tuple]:
  """NAME -> (hi, lo) or, for NAME(i), (hi0, lo0, stride) from the MW() macros."""
  out = {}
  pre = f"NV{path.name[2:6].upper()}_QMD{version}_"
  for k, v in defs(path).items():
    if not k.startswith(pre) or not v.startswith("MW("): continue
    v = v.replace(" ", "")
    if m := re.fullmatch(r"MW\(\((\d+)\+\(i\)\*(\d+)\):\((\d+)\+\(i\)\*(\d+)\)\)", v):
      out[k[len(pre):-3]] = (int(m.group(1)), int(m.group(3)), int(m.group(2)))
    else: out[k[len(pre):]] = bits(v)
  return out


@pytest.mark.parametrize("version", NP.QMD_VERSIONS)
def test_qmd_table_matches_header_bit_ranges(version):
  lay = NP.qmd_layout(version)
  hdr = header_fields(QMD_HEADERS[version][0], version)
  assert set(hdr) == set(lay.fields)
  for name, f in hdr.items():
    assert tuple(lay.fields[name][:len(f)]) == f, name


def test_qmd_v03_launch_fields_agree_across_ampere_ada_hopper_headers():
  used = ["CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT", "CTA_RASTER_DEPTH", "CTA_THREAD_DIMENSION0", "SHARED_MEMORY_SIZE",
          "PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER", "CONSTANT_BUFFER_VALID", "CONSTANT_BUFFER_ADDR_LOWER",
          "CONSTANT_BUFFER_SIZE_SHIFTED4", "RELEASE0_ENABLE", "RELEASE0_STRUCTURE_SIZE", "RELEASE0_PAYLOAD_LOWER",
          "QMD_MAJOR_VERSION", "QMD_VERSION", "REGISTER_COUNT_V"]
  tabs = [header_fields(p, "V03_00") for p in QMD_HEADERS["V03_00"]]
  for name in used: assert len({t[name] for t in tabs}) == 1, name


@pytest.mark.parametrize("version", NP.QMD_VERSIONS)
def test_qmd_encode_puts_each_field_at_its_header_bits(version):
  """Every field, set alone to a random value, lands exactly at the header's MW(hi:lo) (the raw QMD read as a
  little-endian bit string, as DRF_VAL_MW reads 32-bit words), and decode gives it back."""
  rng = random.Random(version)
  hdr = header_fields(QMD_HEADERS[version][0], version)
  lay = NP.qmd_layout(version)
  base = int.from_bytes(NP.qmd_encode(version), "little")
  for name, f in hdr.items():
    if "VERSION" in name: continue
    idx = rng.randrange(lay.fields[name][3]) if len(f) == 3 else None
    hi, lo = (f[0] + idx * f[2], f[1] + idx * f[2]) if idx is not None else f
    v = rng.randrange(1, 1 << (hi - lo + 1))
    raw = NP.qmd_encode(version, **{name: {idx: v} if idx is not None else v})
    x = int.from_bytes(raw, "little")
    assert (x >> lo) & ((1 << (hi - lo + 1)) - 1) == v, name
    assert x & ~(((1 << (hi - lo + 1)) - 1) << lo) == base & ~(((1 << (hi - lo + 1)) - 1) << lo), name
    d = NP.qmd_decode(raw)
    assert (d[name][idx] if idx is not None else d[name]) == v


@pytest.mark.parametrize("version", NP.QMD_VERSIONS)
def test_qmd_build_and_launch_round_trip(version):
  raw = NP.qmd_build(version, program=0x7F12_3456_7800, grid=(70000, 3, 2), block=(128, 4, 2), shared=2048,
                     registers=40, cbufs={0: (0x20_0000_0040, 0x400), 3: (0x1000, 0x100)},
                     releases=[dict(va=0x5000, payload=0x1_2345_6789, payload64=True, structure_size=0),
                               dict(va=0x6000, payload=9, reduction="RED_ADD"), dict(va=0x7000, payload=1)])
  assert len(raw) == NP.qmd_layout(version).size and NP.qmd_version(raw) == version
  q = NP.qmd_launch(raw)
  assert (q.program, q.grid, q.block, q.shared, q.registers) == (0x7F12_3456_7800, (70000, 3, 2), (128, 4, 2), 2048, 40)
  assert q.cbufs == {0: (0x20_0000_0040, 0x400), 3: (0x1000, 0x100)}
  assert [(r.va, r.payload, r.payload64, r.structure_size, r.reduction) for r in q.releases] == \
         [(0x5000, 0x1_2345_6789, True, 0, None), (0x6000, 9, False, 1, 0), (0x7000, 1, False, 1, None)]


def test_qmd_errors_are_clear():
  with pytest.raises(NP.NVPushError, match="no field"): NP.qmd_encode("V03_00", NOT_A_FIELD=1)
  with pytest.raises(NP.NVPushError, match="does not fit"): NP.qmd_encode("V03_00", CTA_THREAD_DIMENSION0=1 << 16)
  with pytest.raises(NP.NVPushError, match="unknown version"): NP.qmd_version(bytes(256))


def test_every_class_has_set_object_at_the_udma_object_address():
  udma = int(defs(DOC / "manuals/ampere/ga100/dev_pbdma.ref.txt")["NV_UDMA_OBJECT"].split()[0], 16)
  for cid, cls in NP.CLASSES.items(): assert cls.method("SET_OBJECT") == udma, hex(cid)


def test_committed_table_is_what_the_generator_makes():
  from gputwin.abi import gen_nvpush
  assert gen_nvpush.build(VENDOR.resolve()) == NP.DATA
