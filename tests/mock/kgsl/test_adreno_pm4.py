"""gputwin.abi.adreno: PM4 type-4/type-7 headers and their parity bits, the generated table against the register
database it comes from (regenerated, and spot facts read from the XML text), and the packet builders."""
import pathlib, random, re
import pytest
from gputwin.abi import adreno as A, gen_adreno

VENDOR = pathlib.Path("/work/shared/vendor/kgsl")
XML = VENDOR / gen_adreno.REGDIR
needs_vendor = pytest.mark.skipif(not XML.exists(), reason="no ../shared/vendor/kgsl register database")


@needs_vendor
def test_committed_json_is_what_the_generator_makes():
  assert gen_adreno.dump(gen_adreno.build(VENDOR)) == (pathlib.Path(A.__file__).parent / "adreno.json").read_text()


@needs_vendor
def test_register_offsets_match_the_xml_text():
  text = re.sub(r"<!--.*?-->", "", (XML / "a6xx.xml").read_text(), flags=re.S)
  rows = re.findall(r'<(?:reg32|reg64|array) offset="(0x[0-9a-fA-F]+)" name="(\w+)"(?:[^>]*?variants="([^"]+)")?', text)
  seen = 0
  for off, name, variants in rows:
    for gen in A.GENS:
      gens = gen_adreno._gens(variants) if variants else set(A.GENS)
      if gen in gens and name in A.REGISTERS[gen]:
        assert A.REGISTERS[gen][name]["offset"] == int(off, 16), (gen, name)
        seen += 1
  assert seen > 100
  assert (A.reg("a630", "HLSQ_CS_NDRANGE_0"), A.reg("a730", "HLSQ_CS_NDRANGE_0")) == (0xB990, 0xA9D4)
  assert (A.reg("a660", "HLSQ_CS_CNTL"), A.reg("a740", "HLSQ_CS_CNTL")) == (0xB987, 0xA9CD)
  assert A.reg("a630", "SP_CS_CONFIG") == A.reg("a730", "SP_CS_CONFIG") == 0xA9BB
  assert (A.reg("a630", "SP_CS_INSTRLEN"), A.reg("a630", "SP_CS_OBJ_START"), A.reg("a630", "SP_CS_CTRL_REG0")) == \
         (0xA9BC, 0xA9B4, 0xA9B0)
  assert A.reg("a630", "HLSQ_CS_KERNEL_GROUP_X") == 0xB999 and "HLSQ_CS_CNTL_0" not in A.REGISTERS["A7XX"]
  assert A.reg("a730", "SP_CS_BINDLESS_BASE", 3) == 0xA9E8 + 3 * 2


@needs_vendor
def test_opcodes_match_the_xml_text():
  text = re.sub(r"<!--.*?-->", "", (XML / "adreno_pm4.xml").read_text(), flags=re.S)
  body = text[text.index('<enum name="adreno_pm4_type3_packets"'):]
  body = body[:body.index("</enum>")]
  for name, val, rest in re.findall(r'<value name="(\w+)" value="(0x[0-9a-fA-F]+)"([^>]*)>', body):
    variants = re.search(r'variants="([^"]+)"', rest)
    variants = variants.group(1) if variants else None
    for gen in A.GENS:
      if gen in (gen_adreno._gens(variants) if variants else set(A.GENS)):
        assert A.OPCODES[gen][name] == int(val, 16), (gen, name)
  assert A.opcode("a630", "CP_EVENT_WRITE") == A.opcode("a730", "CP_EVENT_WRITE7") == 0x46
  assert "CP_WAIT_MEM_GTE" in A.OPCODES["A6XX"] and "CP_WAIT_MEM_GTE" not in A.OPCODES["A7XX"]
  assert (A.opcode("a630", "CP_LOAD_STATE6_FRAG"), A.opcode("a630", "CP_EXEC_CS")) == (0x34, 0x33)


def test_header_parity_and_round_trip():
  assert A.pkt7_header(A.opcode("a630", "CP_NOP"), 0) == 0x70108000     # the familiar NOP of every a6xx dump
  rng = random.Random(7)
  for _ in range(2000):
    reg, n4, op, n7 = rng.randrange(1 << 18), rng.randrange(128), rng.randrange(128), rng.randrange(1 << 14)
    h4, h7 = A.pkt4_header(reg, n4), A.pkt7_header(op, n7)
    assert A.decode_header(h4) == (4, reg, n4) and A.decode_header(h7) == (7, op, n7)
    assert (bin(reg).count("1") + (h4 >> 27 & 1)) % 2 == 1 and (bin(n4).count("1") + (h4 >> 7 & 1)) % 2 == 1
    assert (bin(op).count("1") + (h7 >> 23 & 1)) % 2 == 1 and (bin(n7).count("1") + (h7 >> 15 & 1)) % 2 == 1
    bit = rng.choice([b for b in range(24) if b not in (14,)])             # any flip inside a checked field is seen
    assert A.decode_header(h7 ^ (1 << bit)) is None
    assert A.decode_header(h4 ^ (1 << rng.choice([*range(26), 27]))) is None              # [25:8], [6:0], parities
  assert A.decode_header(0xC0001000) is None and A.decode_header(0) is None
  with pytest.raises(ValueError): A.pkt4_header(0x100, 128)
  with pytest.raises(ValueError): A.pkt7_header(0x80, 0)


def test_builders_decode_back_to_their_fields():
  for gen in ("a630", "a730"):
    va = 0x5_0000_1000
    stream = (A.pkt4(A.reg(gen, "SP_CS_CONFIG"), A.reg_pack(gen, "SP_CS_CONFIG", ENABLED=1, NIBO=2), 64)
              + A.cp_load_state6(gen, "SB6_CS_SHADER", "ST6_SHADER", "SS6_INDIRECT", 0, 4, va, stage="FRAG")
              + A.cp_exec_cs(gen, 4, 2, 1) + A.cp_event_write(gen, "CACHE_FLUSH_TS", va, 7)
              + A.cp_wait_reg_mem(gen, va, 7) + A.cp_mem_write(gen, va, 1, 2) + A.cp_reg_to_mem(gen, 0xA9BB, va)
              + A.cp_mem_to_mem(gen, va, va + 8, va + 16, neg=(False, True)) + A.cp_indirect_buffer(gen, va, 12)
              + A.cp_wait_for_idle(gen) + A.cp_nop(gen, 3) + A.cp_set_mode(gen, 1)
              + A.cp_skip_ib2_enable_global(gen, 0) + A.cp_exec_cs_indirect(gen, va, (64, 1, 1)))
    pk = A.decode(gen, stream)
    assert [p[0] for p in pk] == ["PKT4", "CP_LOAD_STATE6_FRAG", "CP_EXEC_CS",
                                  "CP_EVENT_WRITE" if gen == "a630" else "CP_EVENT_WRITE7", "CP_WAIT_REG_MEM",
                                  "CP_MEM_WRITE", "CP_REG_TO_MEM", "CP_MEM_TO_MEM", "CP_INDIRECT_BUFFER",
                                  "CP_WAIT_FOR_IDLE", "CP_NOP", "CP_SET_MODE", "CP_SKIP_IB2_ENABLE_GLOBAL",
                                  "CP_EXEC_CS_INDIRECT"]
    assert pk[0][1] == 0xA9BB and A.unpack(A.reg_fields(gen, "SP_CS_CONFIG"), pk[0][2][0])["NIBO"] == 2
    ls = A.unpack(A.packet_fields(gen, "CP_LOAD_STATE6", 0), pk[1][2][0])
    g = A.gen_of(gen)
    assert (ls["STATE_BLOCK"], ls["STATE_SRC"], ls["NUM_UNIT"]) == (A.ENUMS[g]["a6xx_state_block"]["SB6_CS_SHADER"],
                                                                  A.ENUMS[g]["a6xx_state_src"]["SS6_INDIRECT"], 4)
    assert pk[1][2][1:3] == [0x1000, 5] and pk[2][2] == [0, 4, 2, 1] and pk[3][2][1:] == [0x1000, 5, 7]
    assert A.unpack(A.packet_fields(gen, "CP_MEM_TO_MEM", 0), pk[7][2][0])["NEG_B"] == 1
    assert A.unpack(A.packet_fields(gen, "CP_EXEC_CS_INDIRECT", 3), pk[13][2][3])["LOCALSIZEX"] == 63
  assert A.cp_wait_mem_gte("a630", 0x1000, 3)[1:] == [0, 0x1000, 0, 3]
  with pytest.raises(KeyError): A.cp_wait_mem_gte("a730", 0x1000, 3)                   # A6XX only
  with pytest.raises(ValueError): A.decode("a630", A.cp_exec_cs("a630", 1, 1, 1)[:3])
  assert A.reg_names("a630")[0xB990] == "HLSQ_CS_NDRANGE_0"
