"""Build `adreno.json` (PM4 type-7 opcodes, packet payload layouts, enums and the compute registers of a6xx/a7xx) from
the Adreno register database (rules-ng XML).

  python -m gputwin.abi.gen_adreno [VENDOR_DIR]     # default ../shared/vendor/kgsl

Only facts are written, per generation (A6XX, A7XX): every value of the `adreno_pm4_type3_packets` enum that applies to
the generation; every enum of adreno_pm4.xml; the dwords of the CP packet domains in PACKETS (offset, reg32/reg64,
bitfields as [low, high, shr, type], with a stripe's non-chip variant as a tag); the registers of the A6XX domain whose
names match REGISTERS (offset, kind, array stride/length, bitfields, including those of the bitset a register's type
names); and the a6xx.xml/adreno_common.xml enums those bitfields use. `variants` ranges (A6XX, A5XX-, A2XX-A6XX,
comma lists) are resolved here, so the table holds one answer per generation.
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "adreno.json"
REGDIR = "mesa-25.0.7/src/freedreno/registers/adreno"
GENS = ["A2XX", "A3XX", "A4XX", "A5XX", "A6XX", "A7XX"]
TARGET_GENS = ["A6XX", "A7XX"]
PACKETS = ["CP_LOAD_STATE6", "CP_EXEC_CS", "CP_EXEC_CS_INDIRECT", "CP_EVENT_WRITE", "CP_EVENT_WRITE7",
       "CP_WAIT_REG_MEM", "CP_WAIT_MEM_GTE", "CP_MEM_WRITE", "CP_MEM_TO_MEM", "CP_REG_TO_MEM", "CP_SET_MARKER",
       "CP_COND_WRITE5", "CP_REG_RMW", "CP_MEM_TO_REG", "CP_SET_PSEUDO_REG", "CP_REG_TO_MEM_OFFSET_MEM",
       "CP_REG_TO_MEM_OFFSET_REG", "CP_MEMCPY", "CP_COND_REG_EXEC", "CP_WAIT_TIMESTAMP"]
# compute state and what a CP reads back: name prefixes (a trailing "_" or a full name) of the A6XX domain
REGISTERS = re.compile(r"^(SP_CS_|HLSQ_CS_|SP_CS$|SP_MODE_CONTROL$|SP_PERFCTR_ENABLE$|SP_FLOAT_CNTL$|SP_UPDATE_CNTL$|"
                       r"HLSQ_UPDATE_CNTL$|HLSQ_INVALIDATE_CMD$|HLSQ_SHARED_CONSTS$|SP_CHICKEN_BITS$|SP_IBO|"
                       r"HLSQ_CONTROL_|SP_PS_TP_BORDER_COLOR_BASE_ADDR$|SP_TP_WINDOW_OFFSET$|"
                       r"CP_SCRATCH_REG$|CP_ALWAYS_ON_COUNTER$|CP_ALWAYS_ON_CONTEXT$|RBBM_PERFCTR_CP$|"
                       r"SP_CS_CONST_CONFIG|UCHE_)")


def _tag(e: ET.Element) -> str: return e.tag.rpartition("}")[2]


def _gens(spec: str) -> set[str] | None:
  """'A6XX' / 'A5XX-' / 'A2XX-A6XX' / 'A6XX,A7XX' -> the set of generations; None when not a chip variant."""
  out = set()
  for part in spec.replace(" ", "").split(","):
    m = re.fullmatch(r"(A\dXX)(-(A\dXX)?)?", part)
    if m is None: return None
    lo = GENS.index(m.group(1))
    hi = lo if not m.group(2) else (GENS.index(m.group(3)) if m.group(3) else len(GENS) - 1)
    out |= set(GENS[lo:hi + 1])
  return out


def _applies(e: ET.Element, gen: str) -> tuple[bool, str | None]:
  """(does element e exist on gen, a non-chip variant tag such as 'event_write_dst=EV_DST_RAM')."""
  v = e.get("variants")
  if v is None: return True, None
  g = _gens(v)
  if g is not None: return gen in g, None
  return True, f"{e.get('varset')}={v}"


def _num(s: str) -> int: return int(s, 0)


def _field(b: ET.Element) -> tuple[str, list]:
  lo = _num(b.get("pos", b.get("low", "0")))
  hi = _num(b.get("pos", b.get("high", b.get("low", "0"))))
  return b.get("name"), [lo, hi, _num(b.get("shr", "0")), b.get("type", "")]


def _fields(e: ET.Element, gen: str, bitsets: dict) -> dict:
  out = {}
  t = e.get("type", "")
  if t in bitsets: out.update(_fields(bitsets[t], gen, bitsets))
  for b in e:
    if _tag(b) == "bitfield" and _applies(b, gen)[0]:
      name, f = _field(b)
      out[name] = f
  if not out and e.get("low") is not None: out[""] = _field(e)[1]   # a register that is one field
  return out


def _enum(e: ET.Element, gen: str) -> dict:
  return {v.get("name"): _num(v.get("value")) for v in e
          if _tag(v) == "value" and v.get("value") is not None and _applies(v, gen)[0]}


def _load(path: Path) -> ET.Element: return ET.parse(path).getroot()


def _walk(e: ET.Element, gen: str, tag: str | None = None):
  """(element, variant tag) of e's children that exist on gen, stripes flattened."""
  for c in e:
    ok, t = _applies(c, gen)
    if not ok: continue
    t = t or tag
    if _tag(c) == "stripe": yield from _walk(c, gen, t)
    else: yield c, t


def _reg(e: ET.Element, gen: str, bitsets: dict) -> dict:
  k = _tag(e)
  r = {"offset": _num(e.get("offset")), "kind": k}
  if k == "array":
    r.update(stride=_num(e.get("stride")), length=_num(e.get("length")),
             regs={c.get("name"): _reg(c, gen, bitsets) for c, _ in _walk(e, gen) if _tag(c) in ("reg32", "reg64")})
  else:
    r["fields"] = _fields(e, gen, bitsets)
    if e.get("type") and e.get("type") not in bitsets: r["type"] = e.get("type")
  return r


def _all_fields(r: dict) -> list:
  return [*r.get("fields", {}).values(), *(f for s in r.get("regs", {}).values() for f in s["fields"].values())]


def build(vendor: Path) -> dict:
  d = vendor / REGDIR
  pm4, a6xx, common = _load(d / "adreno_pm4.xml"), _load(d / "a6xx.xml"), _load(d / "adreno_common.xml")
  bitsets = {b.get("name"): b for root in (a6xx, common, pm4) for b in root.iter() if _tag(b) == "bitset"}
  enums_xml = {e.get("name"): e for root in (a6xx, common, pm4) for e in root.iter() if _tag(e) == "enum"}
  domains = {e.get("name"): e for e in pm4 if _tag(e) == "domain"}
  regdom = next(e for e in a6xx if _tag(e) == "domain" and e.get("name") == "A6XX")
  out = {"gens": TARGET_GENS, "opcodes": {}, "enums": {}, "packets": {}, "registers": {}}
  for gen in TARGET_GENS:
    out["opcodes"][gen] = _enum(enums_xml["adreno_pm4_type3_packets"], gen)
    enums = {e.get("name"): _enum(e, gen) for e in pm4.iter() if _tag(e) == "enum"}
    pk = {}
    for name in PACKETS:
      dom = domains[name]
      if not _applies(dom, gen)[0]: continue
      rows = []
      for c, t in _walk(dom, gen):
        if _tag(c) in ("reg32", "reg64"):
          rows.append({"offset": _num(c.get("offset")), "kind": _tag(c), "name": c.get("name"),
                       "fields": _fields(c, gen, bitsets), **({"variant": t} if t else {})})
      pk[name] = rows
    regs = {}
    for c, _ in _walk(regdom, gen):
      if _tag(c) in ("reg32", "reg64", "array") and REGISTERS.match(c.get("name", "")):
        regs[c.get("name")] = _reg(c, gen, bitsets)
    used = {f[3] for r in regs.values() for f in _all_fields(r)}
    enums.update({n: _enum(enums_xml[n], gen) for n in sorted(used) if n in enums_xml})
    out["enums"][gen], out["packets"][gen], out["registers"][gen] = enums, pk, regs
  return out


def dump(table: dict) -> str: return json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
  vendor = Path(argv[1]) if len(argv) > 1 else HERE.parents[2] / "shared/vendor/kgsl"
  if not vendor.exists(): vendor = Path("/work/shared/vendor/kgsl")
  OUT.write_text(dump(build(vendor)))
  print(f"wrote {OUT}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
