"""Build `nvpush.json` (NVIDIA host/compute/copy class methods, pushbuffer and GPFIFO encodings, QMD layouts) from the
vendor headers.

    python -m gputwin.abi.gen_nvpush [VENDOR_DIR]     # default ../shared/vendor/nv

Only facts are written: method byte offsets (`#define NVC8B5_LAUNCH_DMA (0x00000300)`), field bit ranges (`hi:lo`)
with their named values, QMD field ranges (`MW(hi:lo)`, indexed ones `MW((a+(i)*s):(b+(i)*s))` as base + stride),
the USERD control-struct offsets (from the NvU32 members of `Nv..6fControl_struct`), and the NV_FIFO_DMA_* /
NV_PPBDMA_GP_ENTRY* encodings of the GA100 manuals. No prose or code of the headers is copied.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "nvpush.json"
DOC, KERN = "open-gpu-doc", "open-gpu-kernel-modules/src/common/sdk/nvidia/inc/class"
# class id -> header files, merged in order (a later header's defines win: the kernel-tree clc86f.h holds only the
# host methods whose fields changed for Hopper, on top of Ampere's complete clc56f.h)
CLASSES = {
  0xc36f: [f"{KERN}/clc36f.h"], 0xc56f: [f"{DOC}/classes/host/clc56f.h"],
  0xc86f: [f"{DOC}/classes/host/clc56f.h", f"{KERN}/clc86f.h"],
  **{c: [f"{DOC}/classes/compute/cl{c:04x}.h"] for c in (0xc6c0, 0xc7c0, 0xc9c0, 0xcbc0, 0xcdc0, 0xcec0)},
  **{c: [f"{DOC}/classes/dma-copy/cl{c:04x}.h"] for c in (0xc6b5, 0xc7b5, 0xc8b5, 0xc9b5, 0xcab5)},
}
# QMD version -> the header whose layout we take (V03_00/V04_00: Hopper's; V05_00: Blackwell B's)
QMDS = {"V03_00": f"{DOC}/classes/compute/clcbc0qmd.h", "V04_00": f"{DOC}/classes/compute/clcbc0qmd.h",
        "V05_00": f"{DOC}/classes/compute/clcec0qmd.h"}
FAMILY_COUNT = {"CONSTANT_BUFFER_": 8, "RELEASE_": 3, "DEPENDENT_QMD_": 2}
QMD_BITS = {"V03_00": 2048, "V04_00": 3072, "V05_00": 3072}   # the last field of each layout ends there

DEFINE = re.compile(r"^#define\s+(\w+(?:\(\w\))?)\s+(.+?)\s*(?://.*|/\*.*)?$")
RANGE = re.compile(r"^(\d+):(\d+)$")
HEX = re.compile(r"^\(?\s*(0x[0-9a-fA-F]+|\d+)\s*\)?$")
ARRAY = re.compile(r"^\(\s*(0x[0-9a-fA-F]+)\s*\+\s*\(i\)\s*\*\s*(\d+)\s*\)$")
MW = re.compile(r"^MW\((\d+):(\d+)\)$")
MWI = re.compile(r"^MW\(\((\d+)\+\(i\)\*(\d+)\):\((\d+)\+\(i\)\*(\d+)\)\)$")


def defines(path: Path, prefix: str):
  for line in path.read_text().splitlines():
    m = DEFINE.match(line.strip())
    if m and m.group(1).startswith(prefix): yield m.group(1)[len(prefix):], m.group(2).strip()


def parse_class(paths: list[Path], cid: int) -> dict:
  """methods {NAME: byte offset}, arrays {NAME: [base, stride]}, fields {METHOD: {FIELD: [hi, lo, {VALUE: v}]}}."""
  methods, arrays, fields = {}, {}, {}
  for path in paths:
    cur = None   # (method, field) of the last field define: its values follow it
    for name, val in defines(path, f"NV{path.stem[2:].upper()}_"):
      if "__" in name or name.startswith(("DMA_", "GP_ENTRY")): continue   # encodings, read from the manuals
      if name.endswith("(i)") and (a := ARRAY.match(val)):
        arrays[name[:-3]] = [int(a.group(1), 16), int(a.group(2))]
        methods.pop(name[:-3], None)
        continue
      owner = max((m for m in list(methods) + list(arrays) if name.startswith(m + "_")), key=len, default=None)
      if r := RANGE.match(val):
        if owner is None: continue
        f = name[len(owner) + 1:]
        old = fields.get(owner, {}).get(f, [0, 0, {}])[2]   # values a merged header gave already
        fields.setdefault(owner, {})[f] = [int(r.group(1)), int(r.group(2)), old]
        cur = (owner, f)
      elif h := HEX.match(val):
        v = int(h.group(1), 0)
        if cur and name.startswith(f"{cur[0]}_{cur[1]}_"):
          fields[cur[0]][cur[1]][2][name[len(cur[0]) + len(cur[1]) + 2:]] = v
        elif owner is not None and (fs := fields.get(owner)) and \
            (f := max((f for f in fs if name.startswith(f"{owner}_{f}_")), key=len, default=None)):
          fs[f][2][name[len(owner) + len(f) + 2:]] = v      # a value of an earlier field (kernel-tree headers)
        elif v % 4 == 0 and v < 0x8000 and val.startswith(("(0x", "0x")) and (owner is None or v not in (0,)):
          methods[name] = v
          cur = None
  return {"methods": methods, "arrays": arrays, "fields": fields}


def parse_qmd(path: Path, version: str) -> dict:
  """{FIELD: [hi, lo, stride, count, {VALUE: v}]}: count instances of an indexed field, stride in bits."""
  prefix = re.search(r"cl(\w{4})qmd", path.name).group(1).upper()
  out: dict = {}
  for name, val in defines(path, f"NV{prefix}_QMD{version}_"):
    if m := MW.match(val.replace(" ", "")): out[name] = [int(m.group(1)), int(m.group(2)), 0, 1, {}]
    elif m := MWI.match(val.replace(" ", "")):
      out[name[:-3]] = [int(m.group(1)), int(m.group(3)), int(m.group(2)), 0, {}]
    elif (h := HEX.match(val)) and (f := max((f for f in out if name.startswith(f + "_")), key=len, default=None)):
      out[f][4][name[len(f) + 1:]] = int(h.group(1), 0)
  # instances of an indexed field: the headers give base and stride only. Families with a count the layouts imply
  # (8 constant banks: V03's CONSTANT_BUFFER_VALID(i) at bits 640+i ends at REGISTER_COUNT_V (648); 3 releases:
  # RELEASE_SEMAPHORE0..2; 2 dependent QMDs: DEPENDENT_QMD0/1_POINTER) take it; others run up to the first instance
  # that overlaps a plain field or leaves the QMD.
  plain = [(hi, lo) for hi, lo, s, _, _ in out.values() if not s]
  for name, f in out.items():
    if not f[2]: continue
    n = next((c for p, c in FAMILY_COUNT.items() if name.startswith(p)), None)
    if n is None:
      n = 0
      while f[0] + n * f[2] < QMD_BITS[version] and \
          not any(lo <= f[0] + n * f[2] and f[1] + n * f[2] <= hi for hi, lo in plain): n += 1
    f[3] = n
  return out


def parse_manual(path: Path, prefix: str) -> dict:
  """{FIELD: [hi, lo, {VALUE: v}]} of one register/format group of a dev_*.ref manual."""
  out: dict = {}
  for name, val in defines(path, prefix):
    val = val.split("/*")[0].strip()
    if r := RANGE.match(val): out[name] = [int(r.group(1)), int(r.group(2)), {}]
    elif r := re.match(r"^\(0\*32\+(\d+)\):\(0\*32\+(\d+)\)$", val):   # (0*32+hi):(0*32+lo), word 0
      out[name] = [int(r.group(1)), int(r.group(2)), {}]
    elif (h := HEX.match(val)) and (f := max((f for f in out if name.startswith(f + "_")), key=len, default=None)):
      out[f][2][name[len(f) + 1:]] = int(h.group(1), 0)
    elif h and name == "NOP": out["NOP"] = [31, 0, {"VALUE": int(h.group(1), 0)}]
  return out


def set_object(cls: dict, man: Path) -> dict:
  """SET_OBJECT (NV_UDMA_OBJECT, a Host method that names the subchannel's class) on every class: the copy-class
  headers leave it out, but a pushbuffer sends it on the copy subchannel too."""
  d = dict(defines(man / "dev_pbdma.ref.txt", "NV_UDMA_OBJECT"))
  cls["methods"].setdefault("SET_OBJECT", int(d[""].split()[0], 16))
  hi, lo = RANGE.match(d["_NVCLASS"].split()[0]).groups()
  cls["fields"].setdefault("SET_OBJECT", {"NVCLASS": [int(hi), int(lo), {}]})
  return cls


def userd(path: Path) -> dict:
  """Byte offsets of the NvU32 members of the channel's control struct (USERD)."""
  body = path.read_text().split("Control_struct {", 1)[1].split("}", 1)[0]
  out, off = {}, 0
  for m in re.finditer(r"NvU32\s+(\w+)(?:\[(0x[0-9a-fA-F]+|\d+)\])?;", body):
    if not m.group(1).startswith("Ignored"): out[m.group(1)] = off
    off += 4 * (int(m.group(2), 0) if m.group(2) else 1)
  out["SIZE"] = off
  return out


def build(vendor: Path) -> dict:
  man = vendor / DOC / "manuals/ampere/ga100"
  gp = parse_manual(man / "dev_pbdma.ref.txt", "NV_PPBDMA_GP_ENTRY")
  for k, v in parse_manual(vendor / KERN / "clc86f.h", "NVC86F_GP_ENTRY").items():   # Hopper adds an opcode/operand
    gp.setdefault(k, v)[2].update(v[2])
    gp[k][:2] = v[:2]
  return {
    "source": "gputwin.abi.gen_nvpush from ../shared/vendor/nv (open-gpu-doc c8607fe, "
              "open-gpu-kernel-modules 595.45.04)",
    "userd": userd(vendor / KERN / "clc36f.h"),
    "pb_header": parse_manual(man / "dev_ram.ref.txt", "NV_FIFO_DMA_"),
    "gp_entry": {"0": {k[2:]: v for k, v in gp.items() if k.startswith("0_")},
                 "1": {k[2:]: v for k, v in gp.items() if k.startswith("1_")}},
    "classes": {f"{c:04x}": set_object(parse_class([vendor / p for p in ps], c), man) for c, ps in CLASSES.items()},
    "qmd": {v: {"bits": QMD_BITS[v], "fields": parse_qmd(vendor / p, v)} for v, p in QMDS.items()},
  }


def main(argv: list[str]) -> None:
  vendor = Path(argv[0]) if argv else HERE.parents[2] / ".." / "shared" / "vendor" / "nv"
  data = build(vendor.resolve())
  OUT.write_text(json.dumps(data, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
  print(f"wrote {OUT}: {len(data['classes'])} classes, QMD {', '.join(data['qmd'])}")


if __name__ == "__main__":
  main(sys.argv[1:])
