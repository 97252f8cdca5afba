"""Adreno a6xx/a7xx PM4 as data: type-4 (register write) and type-7 (opcode) packet headers with their parity bits,
the CP opcodes, packet payload fields, enums and the compute registers, with encode/decode and builders.

The table is `adreno.json`, generated from the Adreno register database (adreno_pm4.xml, a6xx.xml,
adreno_common.xml in ../shared/vendor/kgsl) by `python -m gputwin.abi.gen_adreno`; it holds one answer per
generation ("A6XX": a630/a660, "A7XX": a730/a740), so e.g. HLSQ_CS_NDRANGE_0 is 0xb990 on A6XX and 0xa9d4 on A7XX and
opcode 0x46 is CP_EVENT_WRITE on A6XX, CP_EVENT_WRITE7 on A7XX.

The header layouts are the CP's packet format (the database names only CP_TYPE4_PKT/CP_TYPE7_PKT; the layout is the
one kgsl's and Mesa's packet helpers encode and the CP checks):
  type 4: [31:28] 4, [27] odd parity of [26:8], [25:8] first register, [7] odd parity of [6:0], [6:0] dword count
  type 7: [31:28] 7, [23] odd parity of [22:16], [22:16] opcode, [15] odd parity of [14:0], [13:0] dword count
A parity bit makes the number of set bits of its field plus itself odd. Both sides use this module: a runtime encodes
with it and the mock CP decodes with it; it imports nothing of gputwin.
"""
from __future__ import annotations
import json
from pathlib import Path

TABLE = json.loads((Path(__file__).parent / "adreno.json").read_text())
GENS: list[str] = TABLE["gens"]
CP_TYPE4_PKT, CP_TYPE7_PKT = 0x40000000, 0x70000000
TYPE4_MAX_COUNT, TYPE7_MAX_COUNT = 0x7F, 0x3FFF
OPCODES: dict[str, dict[str, int]] = TABLE["opcodes"]
OPCODE_NAMES: dict[str, dict[int, str]] = {g: {v: n for n, v in sorted(o.items(), reverse=True)}
                                            for g, o in OPCODES.items()}
ENUMS: dict[str, dict[str, dict[str, int]]] = TABLE["enums"]
REGISTERS: dict[str, dict[str, dict]] = TABLE["registers"]
PACKETS: dict[str, dict[str, list]] = TABLE["packets"]


def gen_of(target: str) -> str:
  """'a630'/'a660' -> 'A6XX', 'a730'/'a740' -> 'A7XX' (also accepts a generation name)."""
  if target in GENS: return target
  g = f"A{target.lstrip('aA')[:1]}XX"
  if g not in GENS: raise KeyError(f"no Adreno generation for {target!r}; known: {GENS}")
  return g


def odd_parity(v: int) -> int:
  """The bit that makes the count of set bits of v, plus itself, odd."""
  return (bin(v).count("1") + 1) & 1


def pkt4_header(reg: int, count: int) -> int:
  if not 0 <= count <= TYPE4_MAX_COUNT or not 0 <= reg <= 0x3FFFF: raise ValueError(f"pkt4 reg {reg:#x} x{count}")
  return CP_TYPE4_PKT | count | (odd_parity(count) << 7) | (reg << 8) | (odd_parity(reg) << 27)


def pkt7_header(opcode: int, count: int) -> int:
  if not 0 <= count <= TYPE7_MAX_COUNT or not 0 <= opcode <= 0x7F: raise ValueError(f"pkt7 op {opcode:#x} x{count}")
  return CP_TYPE7_PKT | count | (odd_parity(count) << 15) | (opcode << 16) | (odd_parity(opcode) << 23)


def decode_header(h: int) -> tuple[int, int, int] | None:
  """(4, first register, count) or (7, opcode, count) for a well-formed header (the right type nibble and both parity
  bits), else None: what the CP accepts."""
  if h & 0xF0000000 == CP_TYPE4_PKT:
    reg, n = (h >> 8) & 0x3FFFF, h & TYPE4_MAX_COUNT
    ok = (h >> 27) & 1 == odd_parity(reg) and (h >> 7) & 1 == odd_parity(n)
    return (4, reg, n) if ok else None
  if h & 0xF0000000 == CP_TYPE7_PKT:
    op, n = (h >> 16) & 0x7F, h & TYPE7_MAX_COUNT
    ok = (h >> 23) & 1 == odd_parity(op) and (h >> 15) & 1 == odd_parity(n)
    return (7, op, n) if ok else None
  return None


def lo_hi(v: int) -> tuple[int, int]: return v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF


def pkt4(reg: int, *values: int) -> list[int]:
  """Write values to consecutive registers from `reg`."""
  return [pkt4_header(reg, len(values)), *(v & 0xFFFFFFFF for v in values)]


def pkt7(gen: str, op: str | int, *payload: int) -> list[int]:
  """Opcode packet: `op` a name of `gen`'s opcodes (KeyError when the generation has no such packet) or a number."""
  code = op if isinstance(op, int) else OPCODES[gen_of(gen)][op]
  return [pkt7_header(code, len(payload)), *(v & 0xFFFFFFFF for v in payload)]


# ---------------------------------------------------------------- registers and fields
def reg(gen: str, name: str, index: int = 0, member: str | None = None) -> int:
  """Dword offset of a register (or of element `index` of an array register, `member` its reg32/reg64 name)."""
  r = REGISTERS[gen_of(gen)][name]
  if r["kind"] != "array": return r["offset"]
  if not 0 <= index < r["length"]: raise IndexError(f"{name}[{index}]: array of {r['length']}")
  sub = r["regs"][member] if member else next(iter(r["regs"].values()), {"offset": 0})
  return r["offset"] + index * r["stride"] + sub["offset"]


def reg_names(gen: str) -> dict[int, str]:
  """Dword offset -> name of every register in the table (array elements as NAME[i], 64-bit halves as NAME+1)."""
  out = {}
  for n, r in REGISTERS[gen_of(gen)].items():
    if r["kind"] == "array":
      for i in range(r["length"]):
        for m, s in r["regs"].items():
          out[r["offset"] + i * r["stride"] + s["offset"]] = f"{n}[{i}].{m}"
    else:
      out[r["offset"]] = n
      if r["kind"] == "reg64": out.setdefault(r["offset"] + 1, n + "+1")
  return out


def _value(gen: str, f: list, v) -> int:
  lo, hi, shr, typ = f
  if isinstance(v, str): v = ENUMS[gen_of(gen)][typ][v]
  return ((int(v) >> shr) << lo) & ((1 << (hi + 1)) - 1)


def pack(gen: str, fields: dict, **values) -> int:
  """A register/dword value from named fields ({name: [low, high, shr, type]}); enum fields take names too."""
  out = 0
  for k, v in values.items():
    if k not in fields: raise KeyError(f"no field {k}; fields: {sorted(fields)}")
    out |= _value(gen, fields[k], v)
  return out


def unpack(fields: dict, value: int) -> dict[str, int]:
  return {k: ((value >> lo) & ((1 << (hi - lo + 1)) - 1)) << shr for k, (lo, hi, shr, _) in fields.items()}


def reg_fields(gen: str, name: str) -> dict: return REGISTERS[gen_of(gen)][name].get("fields", {})
def reg_pack(gen: str, name: str, **values) -> int: return pack(gen, reg_fields(gen, name), **values)


def packet_fields(gen: str, packet: str, dword: int, variant: str | None = None) -> dict:
  """The fields of payload dword `dword` of a packet (a reg64 row covers two dwords; `variant` picks a stripe such as
  'event_write_dst=EV_DST_RAM')."""
  out = {}
  for row in PACKETS[gen_of(gen)][packet]:
    if row.get("variant") not in (None, variant): continue
    if row["offset"] == dword: out.update(row["fields"])
  return out


def enum(gen: str, name: str) -> dict[str, int]: return ENUMS[gen_of(gen)][name]
def opcode(gen: str, name: str) -> int: return OPCODES[gen_of(gen)][name]


# ---------------------------------------------------------------- packet builders (compute and synchronisation)
def cp_nop(gen: str, n: int = 0) -> list[int]: return pkt7(gen, "CP_NOP", *[0] * n)
def cp_wait_for_idle(gen: str) -> list[int]: return pkt7(gen, "CP_WAIT_FOR_IDLE")
def cp_wait_for_me(gen: str) -> list[int]: return pkt7(gen, "CP_WAIT_FOR_ME")
def cp_set_mode(gen: str, mode: int) -> list[int]: return pkt7(gen, "CP_SET_MODE", mode)
def cp_skip_ib2_enable_global(gen: str, v: int) -> list[int]: return pkt7(gen, "CP_SKIP_IB2_ENABLE_GLOBAL", v)
def cp_skip_ib2_enable_local(gen: str, v: int) -> list[int]: return pkt7(gen, "CP_SKIP_IB2_ENABLE_LOCAL", v)
def cp_set_marker(gen: str, **fields) -> list[int]:
  return pkt7(gen, "CP_SET_MARKER", pack(gen, packet_fields(gen, "CP_SET_MARKER", 0), **fields))


def cp_indirect_buffer(gen: str, va: int, ndw: int, chain: bool = False) -> list[int]:
  """Call (or, chained, jump to) an IB of ndw dwords: address low, high, size in dwords."""
  return pkt7(gen, "CP_INDIRECT_BUFFER_CHAIN" if chain else "CP_INDIRECT_BUFFER", *lo_hi(va), ndw)


def cp_mem_write(gen: str, va: int, *dwords: int) -> list[int]: return pkt7(gen, "CP_MEM_WRITE", *lo_hi(va), *dwords)


def cp_event_write(gen: str, event: str | int, va: int | None = None, data: int | None = None,
                   irq: bool = False) -> list[int]:
  """An event (vgt_event_type name or number); with va, write `data` (32 bits) there once the event is done: A6XX's
  CP_EVENT_WRITE (event, address, value) or A7XX's CP_EVENT_WRITE7 (WRITE_ENABLED, WRITE_SRC EV_WRITE_USER_32B)."""
  g = gen_of(gen)
  if g == "A6XX":
    f0 = pack(g, packet_fields(g, "CP_EVENT_WRITE", 0), EVENT=event, IRQ=int(irq))
    return pkt7(g, "CP_EVENT_WRITE", f0) if va is None else pkt7(g, "CP_EVENT_WRITE", f0, *lo_hi(va), data or 0)
  if va is None: return pkt7(g, "CP_EVENT_WRITE7", pack(g, packet_fields(g, "CP_EVENT_WRITE7", 0), EVENT=event,
                                                        IRQ=int(irq)))
  f0 = pack(g, packet_fields(g, "CP_EVENT_WRITE7", 0), EVENT=event, IRQ=int(irq), WRITE_ENABLED=1,
            WRITE_SRC="EV_WRITE_USER_32B", WRITE_DST="EV_DST_RAM")
  return pkt7(g, "CP_EVENT_WRITE7", f0, *lo_hi(va), data or 0)


def cp_wait_reg_mem(gen: str, va: int, ref: int, mask: int = 0xFFFFFFFF, function: str = "WRITE_GE",
                    delay: int = 16) -> list[int]:
  """Wait until (*va & mask) <function> ref (cp_cond_function), polling memory."""
  f0 = pack(gen, packet_fields(gen, "CP_WAIT_REG_MEM", 0), FUNCTION=function, POLL="POLL_MEMORY")
  return pkt7(gen, "CP_WAIT_REG_MEM", f0, *lo_hi(va), ref, mask, delay)


def cp_wait_mem_gte(gen: str, va: int, ref: int) -> list[int]:
  """Wait until the 32-bit value at va >= ref, signed (A6XX only)."""
  return pkt7(gen, "CP_WAIT_MEM_GTE", 0, *lo_hi(va), ref)


def cp_mem_to_mem(gen: str, dst: int, *srcs: int, double: bool = False, neg: tuple[bool, ...] = ()) -> list[int]:
  """dst = src0 (+/-) src1 (+/-) src2 ... (the NEG_x bits negate source x; DOUBLE makes them 64-bit)."""
  f = {"DOUBLE": int(double), **{f"NEG_{'ABC'[i]}": int(n) for i, n in enumerate(neg)}}
  f0 = pack(gen, packet_fields(gen, "CP_MEM_TO_MEM", 0), **f)
  return pkt7(gen, "CP_MEM_TO_MEM", f0, *lo_hi(dst), *[w for s in srcs for w in lo_hi(s)])


def cp_reg_to_mem(gen: str, register: int, va: int, count: int = 1, b64: bool = False) -> list[int]:
  f0 = pack(gen, packet_fields(gen, "CP_REG_TO_MEM", 0), REG=register, CNT=count, **{"64B": int(b64)})
  return pkt7(gen, "CP_REG_TO_MEM", f0, *lo_hi(va))


def cp_load_state6(gen: str, block: str, state_type: str, src: str, dst_off: int, num_unit: int,
                   ext_src_addr: int = 0, payload: tuple[int, ...] = (), stage: str | None = None) -> list[int]:
  """CP_LOAD_STATE6_GEOM/FRAG (or CP_LOAD_STATE6): NUM_UNIT units of state (a6xx_state_type) into `block`
  (a6xx_state_block) at DST_OFF, from the payload (SS6_DIRECT) or memory at ext_src_addr (SS6_INDIRECT/BINDLESS/UBO).
  stage: "GEOM" or "FRAG" picks the packet (compute state goes through FRAG); None the plain CP_LOAD_STATE6."""
  f0 = pack(gen, packet_fields(gen, "CP_LOAD_STATE6", 0), DST_OFF=dst_off, STATE_TYPE=state_type, STATE_SRC=src,
            STATE_BLOCK=block, NUM_UNIT=num_unit)
  return pkt7(gen, f"CP_LOAD_STATE6_{stage}" if stage else "CP_LOAD_STATE6", f0, *lo_hi(ext_src_addr), *payload)


def cp_exec_cs(gen: str, x: int, y: int, z: int) -> list[int]: return pkt7(gen, "CP_EXEC_CS", 0, x, y, z)


def cp_exec_cs_indirect(gen: str, va: int, local: tuple[int, int, int]) -> list[int]:
  """Dispatch the group counts read from va; local size (x, y, z) encoded minus one."""
  f = pack(gen, packet_fields(gen, "CP_EXEC_CS_INDIRECT", 3), LOCALSIZEX=local[0] - 1, LOCALSIZEY=local[1] - 1,
           LOCALSIZEZ=local[2] - 1)
  return pkt7(gen, "CP_EXEC_CS_INDIRECT", 0, *lo_hi(va), f)


def decode(gen: str, words: list[int]) -> list[tuple[str, int, list[int]]]:
  """Split a PM4 stream into (name, register or opcode, payload) packets: 'PKT4' rows name the first register;
  raises ValueError at the first malformed header or a packet running past the end."""
  out, i, names = [], 0, OPCODE_NAMES[gen_of(gen)]
  while i < len(words):
    h = decode_header(words[i])
    if h is None: raise ValueError(f"bad PM4 header {words[i]:#010x} at dword {i}")
    t, what, n = h
    if i + 1 + n > len(words): raise ValueError(f"packet at dword {i} needs {n} dwords, {len(words) - i - 1} left")
    out.append(("PKT4" if t == 4 else names.get(what, f"CP_{what:#x}"), what, list(words[i + 1:i + 1 + n])))
    i += 1 + n
  return out
