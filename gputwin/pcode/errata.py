"""Our corrections to the vendor pseudocode, as data. The parser only ever sees `corrected(family, text, name)`.

Each entry matches bodies by family and by a regular expression over the *vendor text* (never by instruction name
in code; `only` narrows a text match to an encoding's opcodes where two encodings share a text) and says why, with
the evidence. Kinds:
  replace  - the vendor text is prose, an example listing or C, not pcode; `text` is the pcode we run instead.
  sub      - a local textual fix (regex -> replacement) for a PDF-extraction artefact or a wrong formula.
  add      - the vendor gives no pseudocode at all; `match` is a regex over the instruction *name* (there is no text
             to match) and `text` is pcode of ours. Program control uses calls the executor implements (EXECUTOR).
             HELPERS are `add` entries for names no instruction has: helpers other bodies call (`v_maximum_f32(...)`).
Graphics-only bodies are not corrected but excluded (see EXCLUDED), each with its reason.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Erratum:
  families: tuple[str, ...]
  match: str  # regex searched in the vendor text
  kind: str  # "replace" | "sub"
  text: object  # replacement pcode (replace), or replacement string / function of the match (sub)
  why: str
  evidence: str
  only: str = ""  # regex over the instruction name the text match is limited to ("" = any)


_ALL = ("rdna3", "rdna4", "cdna")
_MANUALS = "AMD RDNA3 / RDNA4 / CDNA3 Instruction Set Architecture reference guides"

ERRATA: tuple[Erratum, ...] = (
  Erratum(("cdna",), r"S([01])\.u32\[OPSEL\[([01])\]\.i32 \* 32 \+ 31 : OPSEL\[\2\]\.i32 \* 32\]|D0\.u32\[(63 : 32|31 : 0)\]",
          "sub", lambda m: f"S{m[1]}.u64[OPSEL[{m[2]}].i32 * 32 + 31 : OPSEL[{m[2]}].i32 * 32]" if m[1] else
          f"D0.u64[{m[3]}]",
          "V_PK_MOV_B32 picks 32-bit halves of 64-bit register pairs, but the text types the pairs `.u32`, which "
          "truncates them: bits [63:32] of S0/S1/D0 would read and write nothing (D.hi always 0).",
          "CDNA3 ISA guide, VOP3P V_PK_MOV_B32 (D.lo = src0 dword op_sel[0], D.hi = src1 dword op_sel[1]); "
          "llvm-mc-22 encodes its operands as v[N:N+1] pairs; clang-22 shuffles f32 pairs with it "
          "(gputwin/verify/FINDINGS.md #4, tests/emu/test_asm.py::test_pk_mov_b32_op_sel_gfx942)."),
  Erratum(_ALL, r"^D = [A-D] \((sparse )?\d+x\d+\) \* [A-D] \(\d+x\d+\) \+ [A-D] \(\d+x\d+\)\s*$", "replace",
          lambda m: '"matrix multiply-accumulate over the whole wave; operand layout is per-encoding";\n'
          f"D0 = MATRIX_MULTIPLY_ACCUMULATE(S0, S1, S2{', D0' if m[1] else ''})",
          "WMMA/SWMMAC/MFMA/SMFMAC bodies are a one-line matrix formula, not pcode. We run a call to the "
          "MATRIX_MULTIPLY_ACCUMULATE hook, which raises 'not supported' until the emulator provides the VGPR layout. "
          "A sparse one (SWMMAC/SMFMAC: `+ D`) also reads D, its accumulator (S2 holds the sparse indices).",
          f"{_MANUALS}: WMMA/MFMA chapters give the formula `D = A (MxK) * B (KxN) + C (MxN)` and describe the lane "
          "layout in tables, not pseudocode (vendor str_pcode text is the formula only)."),
  Erratum(_ALL, r"^(?:s_sleep (?:0|\{ duration)|SIMM16\[3:0\] = vmcount|expcnt <= |vmcnt <= |vscnt <= |lgkmcnt <= |"
          r"v_mov_b32 v3, v0|Priority = \{|SysUserPrio = )", "replace",
          '"scheduling only: waits, sleeps, delays, priority and code-end padding change no architectural '
          'register or memory state"',
          "The vendor text is an example listing or a counter description, not pcode; these instructions only "
          "affect timing (the emulator core handles waits), so the body is an explicit note.",
          f"{_MANUALS}, SOPP chapter: S_WAITCNT*, S_SLEEP, S_DELAY_ALU, S_SETPRIO descriptions."),
  Erratum(_ALL, r"^\.\.\.\ns_endpgm\s+// last real instruction", "replace",
          '"padding after the last instruction of a shader: executing it is an illegal instruction";\n'
          "ILLEGAL_INSTRUCTION()",
          "S_CODE_END's vendor text is an example listing (s_endpgm followed by s_code_end padding), not pcode.",
          f"{_MANUALS}, SOPP chapter, S_CODE_END: 'generate an illegal instruction interrupt; used to pad the end "
          "of a shader buffer'. llvm-mc-22 pads code objects with s_code_end after s_endpgm."),
  Erratum(("rdna4",), r"^;\n// barrierBit 0: reserved\n(?:.*\n)*?while !WAVE_BARRIER_COMPLETE\[barrierBit\] do", "replace",
          '"wait until the barrier this wave signalled completes (the other waves of the workgroup arrive)";\n'
          "BARRIER_WAIT(SIMM16.i32)",
          "S_BARRIER_WAIT loops on WAVE_BARRIER_COMPLETE, state that other waves' S_BARRIER_SIGNAL sets "
          "(CheckBarrierComplete): a wait on the workgroup that one wave's body cannot observe. BARRIER_WAIT names "
          "it for the scheduler.",
          "AMD RDNA4 ISA reference guide, SOPP chapter: S_BARRIER_SIGNAL / S_BARRIER_WAIT (split barrier); "
          "clang-22 emits the pair for __syncthreads on gfx1200."),
  Erratum(("rdna4",), r"^for i in 0 : 31 do\n// Algorithm can skip over \"holes\"[^\n]*\nif M0\[i\]\.u1 then\n"
          r"(VGPR\[laneId\]\[VDST|MEM\[VGPR\[laneId\]\[ADDR\]\.i32 \+ i \* 4\] = VGPR)", "replace",
          lambda m: "addr = CalcScratchAddr(v_addr_off.b64, s_saddr_off.b64);\nfor i in 0 : 31 do\nif M0[i].u1 then\n" +
          ("VDATA.b1024[i * 32 + 31 : i * 32] = MEM[addr + i.u64 * 4U].b32" if m[1].startswith("VGPR") else
           "MEM[addr + i.u64 * 4U].b32 = VDATA.b1024[i * 32 + 31 : i * 32]") + "\nendif\nendfor",
          "SCRATCH_LOAD_BLOCK / SCRATCH_STORE_BLOCK index VGPR by VDST/VDATA (register numbers) and read the address "
          "from VGPR[laneId][ADDR], a register number too, where every other SCRATCH_* body forms its address with "
          "CalcScratchAddr; the executor binds operands as values (the 32 registers of the vdst/vdata range), so the "
          "text read a 1024-bit value as a register number. The same transfer over those values, named VDATA as in "
          "the other SCRATCH_* bodies: dword i of the lane's scratch block at address + 4i <-> register i of the "
          "range, for the M0 bits set; a load keeps the registers whose bit is clear (a partial write).",
          "AMD RDNA4 ISA reference guide, FLAT/scratch chapter: SCRATCH_LOAD_BLOCK / SCRATCH_STORE_BLOCK ('load/store "
          "up to 32 VGPRs, M0 selects which'; the text's own loop over M0 bits and 4-byte steps); llvm-mc-22 encodes "
          "`scratch_store_block v[8:39], off, s0` with a 32-register range, as clang-22's gfx12 VGPR spills use it. "
          "Found by the reliability campaign (exec-gfx1200, seed 2026, case 4236: OverflowError)."),
  Erratum(_ALL, r'^(TrapID = SIMM16\.u16\[[^\n]*;\n"Wait for all instructions to complete";)', "sub",
          r"\1\nTRAP(TrapID.u32);",
          "S_TRAP: the text spells out the trap entry (TTMP0/1, PC = TBA, PRIV) but the jump into a handler is a "
          "machine event; the TRAP call names it so the executor (which installs no trap handler and stops the "
          "dispatch with the trap ID) can act on it.",
          f"{_MANUALS}, SOPP chapter, S_TRAP ('enter the trap handler'); the text's own comment that the handler "
          "receives the PC of the S_TRAP itself."),
  Erratum(_ALL, r"LDS\(addr\) = LDS\(addr\) ([+-]) countbits\(valid mask\)", "replace",
          lambda m: _counter(1 if m[1] == "+" else -1),
          "DS_APPEND/DS_CONSUME are described in C-like prose with `LDS(addr)` and `GPR[VDST]`. The update is "
          "per wave, which a per-lane body cannot say; it runs through the DS_APPEND_CONSUME_COUNTER built-in "
          "(the executor's: core._Mem), at the address the executor forms from M0 and the offset (RDNA4's text "
          "says `addr = offset`, but clang-22 sets M0 to the counter's address on every target).",
          f"{_MANUALS}, LDS chapter: DS_APPEND/DS_CONSUME (`countbits(valid mask)` added once per wave, the old "
          "value returned to all valid threads); clang-22's __builtin_amdgcn_ds_append/consume (s_mov_b32 m0, ptr); "
          "tests/emu/test_ds_append.py."),
  Erratum(_ALL, r"^mask = \(1 << size\) - 1;(?=\nmask = \(mask & 32'I\(writeableBitMask)", "sub",
          "mask = ((1 << size) - 1) << offset.u32;",
          "S_SETREG_B32 / S_SETREG_IMM32_B32 write the `size` bits of the hardware register from bit `offset` (the "
          "SIMM16 hwreg fields), but the text's mask is not shifted by the offset: S0 << offset is and-ed with the "
          "low `size` bits, so any offset > 0 writes zeros into the low bits and leaves the named field as it was.",
          f"{_MANUALS}, SOPK S_SETREG_B32 ('write some or all of the LSBs of S0 into a hardware register'; SIMM16 "
          "= {size - 1, offset, hwRegId}) and S_GETREG_B32, whose text reads the same field as value >> offset; "
          "LLVM's AMDGPU hwreg(id, offset, size) operand names bits [offset + size - 1 : offset]; clang-22 enables "
          "f32 denormals (MODE bits 4..5) around an f32 division on gfx942 (-cl-denorms-are-zero) with "
          "`s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3` and restores them with `..., 0` "
          "(tests/emu/test_native_coverage.py::test_hardware_registers_native_equal_interpreter)."),
  Erratum(_ALL, r"^offset = offset1:offset0;\nif \(offset >= 0xe000\) \{|^Offset\[4:0\]: Swizzle", "replace",
          '"DS_SWIZZLE: every lane reads DATA of the lane its OFFSET mode selects (0 from inactive lanes)";\n'
          "RETURN_DATA.b32 = ds_swizzle(OFFSET.u32, DATA.u32, EXEC.u64)",
          "The vendor text for DS_SWIZZLE_B32 is C (`for (i = 0; i < 64; i++) {`, truncated after the FFT mode) or a "
          "table, not pcode. The lane selection is the runtime built-in ds_swizzle: FFT mode (offset >= 0xe000, "
          "from the vendor C), quad-permute mode (offset[15]) and bit-mask mode (and/or/xor masks in "
          "offset[4:0]/[9:5]/[14:10]); RDNA's rotate mode raises 'not supported'.",
          f"{_MANUALS}, LDS chapter, DS_SWIZZLE_B32 offset modes; the vendor C text for the FFT mode."),
)

ERRATA += (
  Erratum(_ALL, r"^declare OFFSET0 : 8'U;\ndeclare OFFSET1 : 8'U;\n(RETURN_DATA\.u32 = )?MEM\[32'I\(\{ OFFSET1, OFFSET0 \} "
          r"\+ M0\[15 : 0\]\) \+ laneID\.i32 \* 4\]\.u32( = DATA0\.u32)?$", "replace",
          lambda m: f"{m[1] or ''}MEM[ADDR + 32'U(M0[15 : 0]) + laneID.u32 * 4U].u32{' = DATA.u32' if m[2] else ''}",
          "DS_*_ADDTID_B32 access LDS at {OFFSET1, OFFSET0} + M0[15:0] + laneID * 4, but the text declares the "
          "offset fields as locals (they read 0), names the data DATA0 where the other DS bodies' operand is DATA, "
          "and indexes MEM with a bare number where every other DS body's MEM index starts from ADDR (the "
          "executor's address of the lane in its workgroup's LDS, the instruction offset included). ADDTID has no "
          "address VGPR, so ADDR is the offset alone; the body adds M0[15:0] and laneID * 4.",
          f"{_MANUALS}, LDS chapter: DS_WRITE/READ_ADDTID_B32 (CDNA3), DS_STORE/LOAD_ADDTID_B32 (RDNA3/4), the "
          "text's own address formula; llvm-mc-22 encodes `ds_store_addtid_b32 v1 offset:16` with the data VGPR "
          "and the 16-bit offset in offset1:offset0, and no address operand "
          "(tests/emu/test_asm.py::test_ds_addtid)."),
)

ERRATA += (
  Erratum(_ALL, r"^D0\.(f16|f32|f64) = S0\.\1 \* (?:16'F\()?2\.0F? \*\* (32'I\(S1\.i16\)|S1\.i32)\)?$", "sub",
          r"D0.\1 = ldexp(S0.\1, \2)",
          "V_LDEXP_*: the text computes 2.0 ** n in the destination precision first, which overflows (or flushes) "
          "for exponents the result can still represent (e.g. a denormal times 2**200); the instruction is ldexp, "
          "one rounding of S0 * 2**n.",
          f"{_MANUALS}, VOP2/VOP3 V_LDEXP_F16/F32/F64 descriptions ('multiply by two to the power of S1'); "
          "LLVM lowers llvm.ldexp to V_LDEXP_*."),
)

ERRATA += (
  Erratum(_ALL, r"\((?:64'F\()?(S\d)\.(f16|f32|f64)\)? == ([+-])0\.0\)", "sub",
          lambda m: f"((64'F({m[1]}.{m[2]}) == 0.0) && {'!' if m[3] == '+' else ''}sign({m[1]}.{m[2]}))",
          "CDNA V_MIN/V_MAX_* order -0 below +0 by testing `x == +0.0 && y == -0.0`; under IEEE equality both "
          "tests are true for any pair of zeros, so the text would pick the wrong zero. The signed-zero literal "
          "means 'is this zero with this sign'.",
          "The same instructions in the RDNA3/RDNA4 manuals spell the test with sign() (GT_NEG_ZERO/LT_NEG_ZERO "
          "lambdas), and the CDNA comment 'NOTE: +0>-0 is TRUE in this comparison' states the intent."),
)

_FLT = {"f16": ("16'0.5", "16'1.0", "16'0.0"), "f32": ("0.5F", "1.0F", "0.0F"), "f64": ("0.5", "1.0", "0.0")}


def _counter(step: int) -> str:
  """Our body of DS_APPEND (step 1) / DS_CONSUME (-1)."""
  return ('"wave-level LDS counter update: one read-modify-write per wave, not per lane";\n'
          f"RETURN_DATA.u32 = DS_APPEND_CONSUME_COUNTER(CalcDsAddr(M0.u32, OFFSET.u32), EXEC.u64, {step})")


def _rndne(m) -> str:
  t = m[1]
  half, one, zero = _FLT[t]
  return (f"tmp = floor(S0.{t});\n"
          f"if ((S0.{t} - tmp > {half}) || ((S0.{t} - tmp == {half}) && !isEven(64'F(tmp)))) then\n"
          f"tmp += {one}\nendif;\n"
          f"D0.{t} = tmp == {zero} ? (sign(S0.{t}) ? -{zero} : {zero}) : tmp")


ERRATA += (
  Erratum(_ALL, r"^D0\.(f16|f32|f64) = floor\(S0\.\1 \+ (?:16'0\.5|0\.5F|0\.5)\);\n"
          r"if \(isEven\((?:64'F\()?floor\(S0\.\1\)\)?\) && \(fract\(S0\.\1\) == (?:16'0\.5|0\.5F|0\.5)\)\) then\n"
          r"D0\.\1 -= (?:16'1\.0|1\.0F|1\.0)\nendif\s*$", "replace", _rndne,
          "V_RNDNE_*/S_RNDNE_*: `floor(x + 0.5)` rounds the sum first, so odd integers in [2**23, 2**24) (f32; "
          "2**10..2**11 for f16, 2**52..2**53 for f64) come out one too high, and -0.3 gives +0. The instruction "
          "is IEEE roundToIntegralTiesToEven: we compare x - floor(x) (exact) with one half instead, and keep the "
          "sign of a zero result.",
          f"{_MANUALS}: 'Round-to-nearest-even' in the V_RNDNE_F32 description; LLVM selects V_RNDNE_* for "
          "llvm.roundeven / llvm.rint, which are IEEE roundToIntegralTiesToEven."),
)


ERRATA += (
  Erratum(_ALL, r"f32_to_i32\(floor\(S0\.f32 \+ 0\.5F\)\)", "sub",
          "f32_to_i32(floor(S0.f32) + (S0.f32 - floor(S0.f32) >= 0.5F ? 1.0F : 0.0F))",
          "V_CVT_NEAREST_I32_F32 / V_CVT_RPI_I32_F32 round half up, but `floor(x + 0.5F)` rounds the f32 sum "
          "first: odd integers in [2**23, 2**24) convert one too high. x - floor(x) is exact, so we test it.",
          f"{_MANUALS}: 'round to nearest integer, halfway cases up' in the instruction descriptions; same "
          "pre-rounding defect as V_RNDNE (see that erratum)."),
)


def _div_scale(m) -> str:
  t, body = m[1], m.string
  body = re.sub(r"^VCC = 0x0LL;", f"VCC.u64[laneId] = 1'0U;\nD0.{t} = S0.{t};", body, flags=re.M)
  return re.sub(r"^VCC = 0x1LL;", "VCC.u64[laneId] = 1'1U;", body, flags=re.M)


ERRATA += (
  Erratum(_ALL, r"^VCC = 0x0LL;\nif \(\((?:64'F\()?S2\.(f32|f64)\)? == 0\.0\) \|\| ", "replace", _div_scale,
          "V_DIV_SCALE_*: (1) `VCC = 0x1LL` in a per-lane body means this lane's VCC bit (the flag V_DIV_FMAS "
          "reads back with VCC.u64[laneId]), not the whole mask; (2) the text never writes D0 when no scaling is "
          "needed - the common case - where the result is S0 unchanged.",
          f"{_MANUALS}: V_DIV_SCALE description ('VCC is set per lane'; unscaled operands pass through) and "
          "V_DIV_FMAS reading VCC.u64[laneId]; LLVM's f32/f64 fdiv expansion relies on both."),
)


ERRATA += (
  Erratum(_ALL, r"^D0\.f32 = 2\.0F \*\* 32 \* fma\(S0\.f32, S1\.f32, S2\.f32\)$", "sub",
          "D0.f32 = 32'F(ldexp(fma(64'F(S0.f32), 64'F(S1.f32), 64'F(S2.f32)), exponent(S2.f32) >= 127 ? 64 : -64))",
          "V_DIV_FMAS_F32 with VCC set: the text scales by 2**32, but V_DIV_SCALE_F32 scales its operands by 2**64 "
          "(denominator, or a numerator that would give a denormal quotient) or 2**-64, and V_DIV_FMAS must undo "
          "it: by 2**64 when the numerator S2 is large (exponent >= 127, it was scaled down) and by 2**-64 "
          "otherwise, rounded once (the f32 fma is exact in f64; one rounding to f32 at the end).",
          f"{_MANUALS}: V_DIV_SCALE_F32 ('scale by 2**64 / 2**-64'); LLVM's f32 fdiv expansion (v_div_scale x2, "
          "v_rcp, v_fma, v_div_fmas, v_div_fixup) is correctly rounded only with this factor: "
          "tests/verify/test_findings.py::test_division_with_denormal_quotient (clang-22, gfx942; FINDINGS.md "
          "#2) and tests/pcode/test_wave.py::test_llvm_f32_division_sequence_rounds_correctly with rescaled "
          "operands, against exact Fraction division."),
)


ERRATA += (
  Erratum(("rdna3",), r"(\w+_lane = 32'I\(VGPR\[i\]\[ADDR\] \+ OFFSET\.b32\) / 4 % 32);", "sub", r"\1 + (i & 32);",
          "RDNA3 DS_PERMUTE_B32 / DS_BPERMUTE_B32 in wave64: the text takes the lane index modulo 32 for all 64 "
          "lanes, so lanes 32..63 would exchange data with lanes 0..31. RDNA runs a wave64 VALU/LDS-lane op as two "
          "32-lane halves, and the permute stays within its half: lane i reaches lane (i & 32) + index % 32.",
          "AMD RDNA3 ISA reference guide: the text's own note 'destination lane is MOD 32 regardless of wave "
          "size', and wave64 executed as two wave32 passes; RDNA4's text makes the index modulo the wave size "
          "instead. clang-22 `cross_lane` (tests/emu/kernels/suite.cl, __builtin_amdgcn_ds_bpermute with lane ^ 1) "
          "with -mwavefrontsize64 on gfx1100 reads the neighbour in the same half "
          "(tests/emu/test_clang.py::test_rdna_wave64)."),
  Erratum(("rdna3", "rdna4"), r"32'I\(VGPR\[i\]\[ADDR\] \+ OFFSET\.b32\) / 4 %", "sub",
          "32'U(VGPR[i][ADDR] + OFFSET.b32) / 4U %",
          "RDNA3/RDNA4 DS_PERMUTE_B32 / DS_BPERMUTE_B32 take the byte address as a signed integer, so an address "
          "with bit 31 set (0xfffffffc) gives a negative lane (-1 % 32 == -1 in C), which reaches no lane. The "
          "hardware keeps only the address bits that select a lane: the lane is the unsigned address / 4 modulo the "
          "lanes.",
          "The text's own note 'High-order bits are ignored'; the CDNA3 text of the same instruction computes "
          "`(VGPR[i][ADDR].u32 + OFFSET.u32) / 4U % 64U`, unsigned.",
          only=r"DS_B?PERMUTE_B32"),
)

ERRATA += (
  Erratum(("rdna3",), r"MEM\[ADDR\]", "sub", "MEM[ADDR + OFFSET.u32]",
          "RDNA3 DS bodies other than the plain B32/B64/B96/B128 loads and stores (the atomics, the 8/16-bit "
          "loads and stores, DS_WRAP...) address `MEM[ADDR]` without the instruction's OFFSET field, which the "
          "B32 forms add (`MEM[ADDR + OFFSET.u32]`). Every DS instruction of the format has the 16-bit offset.",
          "AMD RDNA3 ISA reference guide, LDS chapter (the DS address is ADDR plus the instruction offset, for "
          "every DS instruction); "
          "llvm-mc-22 encodes `ds_add_f32 v7, v6 offset:1024` with offset0/offset1; clang-22 folds constant "
          "offsets into DS atomics (tests/emu/test_clang.py local_atomics).",
          only=r"DS_\w+"),
)

_SOPK_IMM = r"S_MOVK_I32|S_CMOVK_I32|S_ADDK_I32|S_ADDK_CO_I32|S_MULK_I32|S_CMPK_\w+"

ERRATA += (
  Erratum(("cdna", "rdna4"), r"\b(?:S0\.i16|S1\.i16|S1\.u16)", "sub",
          lambda m: "SIMM16" + m[0][2:],
          "SOPK: the 16-bit immediate is the SIMM16 field, but the CDNA3 and RDNA4 texts call it S0 (S_MOVK_I32: "
          "`signext(S0.i16)`) or S1 with the register in S0 (S_CMPK_EQ_U32: `S0.u32 == 32'U(S1.u16)`), the same "
          "names SOP1/SOPC bodies use for registers. We name it SIMM16 as the RDNA3 text does, so every SOPK body "
          "binds S0 = the SDST register and SIMM16 = the immediate. Limited to SOPK opcodes: S_SEXT_I32_I16 has "
          "S_MOVK_I32's text.",
          f"{_MANUALS}, SOPK chapter ('SIMM16: signed immediate'); the RDNA3 texts of the same instructions "
          "(`signext(SIMM16.i16)`); llvm-mc-22 encodes `s_movk_i32 s0, 0x1234` with the constant in bits 15:0.",
          only=_SOPK_IMM),
)


def _two_over_pi(bits: int) -> int:
  """floor(2/pi * 2**bits), from Machin's formula in integer arithmetic (64 guard bits)."""
  one = 1 << (bits + 64)

  def atan_inv(x: int) -> int:  # atan(1/x) * one
    total, term, k, x2 = 0, one // x, 1, x * x
    while term:
      total += term // k if k % 4 == 1 else -(term // k)
      term //= x2
      k += 2
    return total
  pi = 16 * atan_inv(5) - 4 * atan_inv(239)
  return (2 * one * (1 << (bits + 64)) // pi) >> 64


ERRATA += (
  Erratum(("rdna3", "rdna4", "cdna"), r"result = 64'F\(\(1201'B\(2\.0 / PI\)\[1200 : 0\] << shift\.u32\) & "
          r"1201'0x1fffffffffffff\);", "sub",
          lambda m: f"result = 64'F(((2402'U(1201'0x{_two_over_pi(1201):x}) << shift.u32) >> 1148U) & "
                    "2402'0x1fffffffffffff);",
          "V_TRIG_PREOP_F64: `1201'B(2.0 / PI)` means the 1201 fraction bits of 2/pi (not a float conversion), and "
          "masking the low 53 bits of `bits << shift` keeps the *tail* of the constant; the comments say the shift "
          "brings bits into the whole part, and `scale = -53 - shift` needs bits [shift, shift + 53) of the "
          "fraction. We spell the constant out and keep those bits.",
          f"{_MANUALS}, V_TRIG_PREOP_F64 (comments in the pseudocode: '(2.0/PI) == 0.{{b_1200, ..., b_0}}', "
          "'Only whole part of result is kept'); LLVM's AMDGPU sin/cos lowering consumes it as successive 53-bit "
          "chunks of 2/pi."),
)

ERRATA += (
  Erratum(_ALL, r"^declare S : 32'B\[3\];$", "sub",
          "declare S : 32'B[3];\nS[0] = S0.b32;\nS[1] = S1.b32;\nS[2] = S2.b32;",
          "V_FMA_MIX*/V_MAD_MIX*: the text declares a local array S and reads S[i] as source i, but never fills it "
          "from the operands; run as written every source is 0 (fma(0, 0, 0) for any input). S[i] is the "
          "instruction's source i (S0, S1, S2), each taken as f32 or as the f16 half OPSEL picks.",
          "AMD RDNA3 / RDNA4 ISA guides, VOP3P V_FMA_MIX_F32/MIXLO/MIXHI (an fma of the three sources, each f32 or "
          "an f16 half as OPSEL_HI/OPSEL say; the CDNA4 guide's V_MAD_MIX_* have the same text); llvm-mc-22 encodes "
          "the three register/constant sources in src0..src2. "
          "tinygrad 0.14 `Tensor([1.0], dtype=half).sin()` (LLVM-22, gfx1100 true16) reduces its argument with "
          "`v_fma_mix_f32 v5, v3, s6, v1 op_sel_hi:[0,0,1]` (0 * -pi + f16 1.0 = 1.0) and printed -0.0 before "
          "this fix (tests/emu/test_tinygrad_repro.py)."),
  Erratum(("cdna",), r"in\[0\] \* in\[1\] \+ in\[2\]", "sub", "fma(in[0], in[1], in[2])",
          "CDNA V_MAD_MIX*: the CDNA4 text multiplies and adds with two roundings, but on gfx942/gfx950 the opcode "
          "is the fused V_FMA_MIX (one rounding), as on RDNA.",
          "llvm-mc-22 (gfx942, gfx950) names VOP3P opcodes 0x20-0x22 v_fma_mix_f32/v_fma_mixlo_f16/v_fma_mixhi_f16 "
          "(D3A0..D3A2); clang-22 selects v_fma_mix_f32 for OpenCL fma((float)h, f, -(float)h), which must round "
          "once (tests/emu/test_tinygrad_repro.py::test_clang_fma_mix, exact against numpy in f64)."),
)

ERRATA += (
  Erratum(_ALL, r"signext\(SIMM16\.i16 \* 16'4\)", "sub", "signext(SIMM16.i16) * 4LL",
          "S_BRANCH / S_CBRANCH_* / S_CALL_B64: the text scales the word offset in 16 bits (SIMM16.i16 * 16'4) "
          "before sign-extending, so offsets of 0x2000 words or more wrap: `s_branch 0x7fff` jumped to itself "
          "(0x7fff * 4 = -4 in 16 bits), `s_branch 0x8000` fell through. SIMM16 is a signed word offset: "
          "PC = PC + 4 + signext(SIMM16) * 4 in 64 bits.",
          f"{_MANUALS}, SOPP chapter (S_BRANCH: 'SIMM16 is a signed DWORD offset', range -32768..32767 words); "
          "llvm-mc-22 encodes a backward branch over 0x2000 s_nop words as simm16 0xdffe (-8194) and "
          "llvm-objdump-22 resolves that word back to the label 0x8008 bytes earlier; "
          "tests/isa/test_isa_reliability.py::test_far_branches runs such branches on both tiers."),
)

ERRATA += (
  Erratum(("cdna",), r"\b(fp8|bf8)_to_f32\(([^()]*)\)", "sub", r"(FP8_FNUZ ? \1fnuz_to_f32(\2) : \1_to_f32(\2))",
          "CDNA FP8/BF8 conversions: the family's text is CDNA4's (gfx950, OCP E4M3/E5M2), but gfx942 (CDNA3) "
          "defines FP8/BF8 as the FNUZ formats (bias 8/16, 0x80 the only NaN, no infinities, no -0). FP8_FNUZ is "
          "the target's choice (isa.targets: the fp8 column), a constant the binding gives the body.",
          "ROCm's HIP headers: amd_hip_fp8.h takes the hardware conversion path with the FNUZ types on "
          "gfx940/941/942 only, the OCP types (amd_hip_ocp) on gfx950 and gfx12; composable_kernel's "
          "amd_ck_fp8.hpp: CK_OCP_FP8_CVT_FAST_PATH for gfx950/gfx12, the FNUZ fast path for gfx942. "
          "Values: tests/emu/test_fp8.py against ml_dtypes' float8 types."),
  Erratum(("cdna",), r"\bf32_to_(fp8|bf8)\(([^()]*)\)", "sub", r"(FP8_FNUZ ? f32_to_\1fnuz(\2) : f32_to_\1(\2))",
          "CDNA F32 -> FP8/BF8 conversions: OCP on gfx950, FNUZ on gfx942 (see the erratum above).",
          "As above (amd_hip_fp8.h, amd_ck_fp8.hpp); tests/emu/test_fp8.py."),
  Erratum(("rdna4",), r"\b32'F\(([^()]*)\.(fp8|bf8)\)", "sub", r"\2_to_f32(\1.\2)",
          "RDNA4 V_DOT4_F32_{FP8,BF8}_{FP8,BF8}: `32'F(S0[7 : 0].fp8)` casts an 8-bit float to f32; run as a plain "
          "cast it read the byte as an integer (four 1.0 * 1.0 products summed to 12544, not 4). The value "
          "conversion is meant: FP8/BF8 values are exact in f32.",
          "RDNA4 ISA guide, V_DOT4_F32_FP8_FP8 ('dot product of packed FP8 values'); llvm-mc-22 (gfx1200) "
          "accepts v_dot4_f32_fp8_fp8; tests/emu/test_fp8.py::test_dot4_of_fp8_values against ml_dtypes' "
          "float8_e4m3fn/float8_e5m2 values summed in f32."),
  Erratum(("rdna4", "cdna"), r"VGPR\[laneId\]\[SRC0\.u32\]", "sub", "S0",
          "RDNA4/CDNA4 FP8/BF8 conversions read their source as VGPR[laneId][SRC0.u32], the VGPR numbered by the "
          "source field; the source may be an SGPR or a constant as well, whose value S0 is.",
          "llvm-mc-22 (gfx1200) encodes `v_cvt_f32_fp8_e32 v3, s2` with src0 = 2 (SGPR s2); "
          "tests/emu/test_fp8.py runs SGPR and VGPR sources."),
  Erratum(("rdna4", "cdna"), r"VGPR\[laneId\]\[VDST\.u32\]", "sub", "D0",
          "RDNA4/CDNA FP8/BF8 packing conversions write part of VGPR[laneId][VDST.u32], the lane's own destination "
          "register, keeping the rest: D0's bit range, so the binding passes the old value of D0 and the body "
          "stays per lane (an indexed VGPR access would make it a cross-lane body).",
          "llvm-mc-22 (gfx942, gfx950, gfx1200) encodes v_cvt_pk_fp8_f32's destination in the vdst field; "
          "tests/emu/test_fp8.py checks the preserved half."),
)

_SCHED = "changes no architectural register or memory state in gputwin's model"
_NOTE = '"{}: ' + _SCHED + '"'


def _load(calc: str, dwords: int) -> str:
  """Our body of a load of `dwords` dwords at the address `calc` forms (the vendor's plain loads' form)."""
  return f"addr = {calc}(ADDR.b32, SADDR.b32, OFFSET.b32);\n" + ";\n".join(
    f"VDATA[{32 * k + 31} : {32 * k}] = MEM[addr{f' + {4 * k}U' if k else ''}].b32" for k in range(dwords))


# Instructions the vendor gives no pseudocode for: our bodies (kind "add", `match` over the name).
ADDED: tuple[Erratum, ...] = (
  *(Erratum(("cdna",), name, "add", _counter(step),
            "No vendor pseudocode for DS_APPEND/DS_CONSUME in the CDNA guides: RDNA's (pcode errata above).",
            "CDNA3 ISA guide, LDS chapter (DS_APPEND: 'append one or more entries to a buffer'); clang-22's "
            "__builtin_amdgcn_ds_append/consume on gfx942; tests/emu/test_ds_append.py.")
    for name, step in (("DS_APPEND", 1), ("DS_CONSUME", -1))),
  *(Erratum(("cdna",), f"{seg}_LOAD_LDS_DWORD{x}", "add", _load(calc, n),
            "No vendor pseudocode for the loads into LDS. The body is the plain load's (same address, same data); "
            "the AMD frontend sends VDATA to LDS at M0 + the instruction offset + lane * bytes instead of a VGPR "
            "(emu/amd/decode.py TO_LDS). The byte and short forms stay without a body (where their bytes land in LDS "
            "is not documented).",
            "CDNA3/CDNA4 ISA guides, FLAT chapter: GLOBAL_LOAD_LDS_DWORD{,X3,X4}, SCRATCH_LOAD_LDS_DWORD; LLVM's "
            "llvm.amdgcn.global.load.lds (the immediate offset applies to both the global and the LDS address); "
            "tests/emu/test_lds_dma.py")
    for seg, calc, forms in (("GLOBAL", "CalcGlobalAddr", (("", 1), ("X3", 3), ("X4", 4))),
                             ("SCRATCH", "CalcScratchAddr", (("", 1),)))
    for x, n in forms),
  Erratum(("cdna",), r"V_MFMA_SCALE_F32_\w+_F8F6F4", "add",
          '"matrix multiply-accumulate over the whole wave, A and B scaled by E8M0 block scales";\n'
          "D0 = MATRIX_MULTIPLY_ACCUMULATE(S0, S1, S2, S3, S4)",
          "No vendor pseudocode for gfx950's scaled MFMA (a V_MFMA_LD_SCALE_B32 word fused with an F8F6F4 MFMA): the "
          "MATRIX_MULTIPLY_ACCUMULATE hook of the other MFMAs, which also reads the two scale VGPRs (S3: A's, S4: "
          "B's; emu/amd/matrix.py applies them).",
          "AMD CDNA4 ISA guide, 'Matrix fused multiply-add with block scaling' (V_MFMA_SCALE_F32_16X16X128_F8F6F4, "
          "32X32X64: one E8M0 scale per 32 k of A's rows and B's columns, the byte OP_SEL/OP_SEL_HI pick); "
          "llvm-mc-22 prints the scale VGPRs as the fifth and sixth operands (tests/emu/test_mfma_layouts.py)."),
  Erratum(_ALL, r"S_ENDPGM|S_ENDPGM_SAVED", "add", '"end of program: the wave terminates";\nENDPGM()',
          "No vendor pseudocode. The wave's end is a machine event: the ENDPGM call is implemented by the executor.",
          f"{_MANUALS}, SOPP chapter: S_ENDPGM ('end of program; terminate wavefront'), S_ENDPGM_SAVED."),
  Erratum(_ALL, r"S_BARRIER", "add", '"workgroup barrier: wait until every wave of the workgroup arrives";\nBARRIER()',
          "No vendor pseudocode. Synchronising the workgroup's waves is the scheduler's job: the BARRIER call.",
          f"{_MANUALS}, SOPP chapter: S_BARRIER ('synchronize waves within a threadgroup')."),
  Erratum(_ALL, r"S_SENDMSG|S_SENDMSGHALT", "add", "SENDMSG(SIMM16.u32)",
          "No vendor pseudocode. Messages go to the SPI/host interrupt logic, outside the wave; the executor models no "
          "receiver (S_SENDMSG_RTN_* return a value: left without a body, they stop as unsupported).",
          f"{_MANUALS}, SOPP chapter and 'Send Message' table: S_SENDMSG / S_SENDMSGHALT / S_SENDMSG_RTN."),
  *(Erratum(fams, f"V_DOT2ACC_F32_{t.upper()}", "add",
            f"tmp = D0.f32;\ntmp += {t}_to_f32(S0[15 : 0].{t}) * {t}_to_f32(S1[15 : 0].{t});\n"
            f"tmp += {t}_to_f32(S0[31 : 16].{t}) * {t}_to_f32(S1[31 : 16].{t});\nD0.f32 = tmp",
            f"No vendor pseudocode for V_DOT2ACC_F32_{t.upper()}, which VOPD's V_DUAL_DOT2ACC_F32_{t.upper()} names as "
            "its operation (the VOP2 opcode itself is gone); the body is the family's VOP3P "
            f"V_DOT2_F32_{t.upper()} with the destination as its accumulator (S2 -> D0), as RDNA3's "
            "V_DOT2ACC_F32_F16 text reads.",
            f"{_MANUALS}, VOPD opcode table (V_DUAL_DOT2ACC_F32_F16 / _BF16) and VOP3P V_DOT2_F32_F16 / _BF16; "
            "llvm-mc-22 accepts v_dual_dot2acc_f32_{f16,bf16} on gfx1100 and gfx1200 (tests/emu/test_asm.py).")
    for t, fams in (("f16", ("rdna4",)), ("bf16", ("rdna3", "rdna4")))),
  *(Erratum(("rdna3", "rdna4"), f"S_SENDMSG_RTN_B{n}", "add", f"D0.b{n} = CLOCK()",
            "No vendor pseudocode. The message's answer comes back in SDST; the one the executor gives is the time "
            "(MSG_RTN_GET_REALTIME: the wave's own instruction count, as S_MEMREALTIME's), the low dword for the B32 "
            "form; emu/amd/decode.py stops the others (RTN_MESSAGES) as unmodelled.",
            f"{_MANUALS}, SOP1 S_SENDMSG_RTN_B32/B64 and the 'Send Message' table (MSG_RTN_GET_REALTIME 131); "
            "clang-22 lowers __builtin_readsteadycounter() to `s_sendmsg_rtn_b64 s[0:1], "
            "sendmsg(MSG_RTN_GET_REALTIME)` on gfx1100 and gfx1200 (tests/emu/test_time_messages.py).")
    for n in (32, 64)),
  Erratum(_ALL, r"S_MEMTIME|S_MEMREALTIME", "add", "SDATA.b64 = CLOCK()",
          "No vendor pseudocode. A time source: the executor answers with the wave's own instruction count, so "
          "batched and serial runs agree.",
          f"{_MANUALS}, SMEM chapter: S_MEMTIME ('return current 64-bit timestamp'), S_MEMREALTIME."),
  Erratum(("cdna",), r"V_ACCVGPR_READ(?:_B32)?|V_ACCVGPR_WRITE(?:_B32)?|V_ACCVGPR_MOV_B32", "add", "D0.b32 = S0.b32",
          "No vendor pseudocode for the AccVGPR moves. Each copies one dword between the VGPR and AccVGPR files "
          "under EXEC; which file S0/D0 live in is the operand's (the isa operand model says v or a).",
          "CDNA3 ISA guide, VOP3P V_ACCVGPR_READ_B32 ('move accumulation VGPR to VGPR'), V_ACCVGPR_WRITE_B32 "
          "('move VGPR to accumulation VGPR'), VOP1 V_ACCVGPR_MOV_B32; llvm-mc-22 `v_accvgpr_read_b32 v4, a0`."),
  Erratum(_ALL, r"S_CLAUSE|S_WAITCNT(?:_DEPCTR)?|S_WAIT_\w+|S_SETPRIO|S_WAIT_IDLE|S_TTRACEDATA|S_SETHALT|"
          r"S_INST_PREFETCH|S_SET_INST_PREFETCH_DISTANCE|S_DELAY_ALU|S_SLEEP", "add",
          _NOTE.format("scheduling only: clauses, waits, priorities, prefetch and trace hints"),
          "No vendor pseudocode. These instructions order or pace execution; the executor runs each wave's "
          "instructions in order, and the waitcnt checker (emu/checks.py) reads the counters from the encoding.",
          f"{_MANUALS}, SOPP chapter (S_CLAUSE, S_WAIT_*, S_WAITCNT_DEPCTR, S_SETHALT, S_TTRACEDATA, prefetch)."),
  Erratum(_ALL, r"S_ICACHE_INV|S_DCACHE_INV|S_DCACHE_WB|BUFFER_WBINVL1(?:_VOL)?|BUFFER_GL[01]_INV|BUFFER_INV|"
          r"BUFFER_WBL2|GLOBAL_INV|GLOBAL_WB|GLOBAL_WBINV", "add",
          _NOTE.format("cache invalidate/write-back: gputwin's memory is coherent, caches are not modelled"),
          "No vendor pseudocode. Cache maintenance changes what a later access costs, not what it returns, in a "
          "model without caches.",
          f"{_MANUALS}, SMEM and MUBUF/global chapters: cache invalidate and write-back instructions."),
  *(Erratum(_ALL, name, "add", f'"MODE.{field} = SIMM16[3:0]";\nHW_REGISTERS[1] = ((HW_REGISTERS[1].u32 & '
                               f'{~(15 << sh) & 0xffffffff:#x}U) | ((SIMM16.u32 & 15U) << {sh}U)).b32',
            f"No vendor pseudocode. {name} sets MODE.{field} (MODE bits {sh + 3}:{sh}, hardware register 1, which "
            "S_GETREG/S_SETREG read and write) from the low 4 bits of its immediate.",
            f"{_MANUALS}, SOPP chapter: {name}; the MODE register's FP_ROUND [3:0] and FP_DENORM [7:4] fields; "
            "clang-22 brackets an f32 division with `s_denorm_mode 15` / `s_denorm_mode 12` on gfx1100 when f32 "
            "denormals are flushed (-cl-denorms-are-zero; tests/emu/test_denormals.py).")
    for name, field, sh in (("S_ROUND_MODE", "FP_ROUND", 0), ("S_DENORM_MODE", "FP_DENORM", 4))),
)


def _ieee_extreme(kind: str, t: str) -> str:
  """Our body of IEEE 754-2019 maximum / minimum (kind "MAXIMUM" / "MINIMUM") on float type t: a NaN operand wins,
  signalling ones first and quieted, S0 before S1; +0 is above -0."""
  w, cmp, zero = t[1:], ">" if kind == "MAXIMUM" else "<", "!sign(S0.{t}) && sign(S1.{t})" if kind == "MAXIMUM" \
      else "sign(S0.{t}) && !sign(S1.{t})"
  return (f"if isSignalNAN(64'F(S0.{t})) then\nD0.{t} = {w}'F(cvtToQuietNAN(64'F(S0.{t})))\n"
          f"elsif isSignalNAN(64'F(S1.{t})) then\nD0.{t} = {w}'F(cvtToQuietNAN(64'F(S1.{t})))\n"
          f"elsif isQuietNAN(64'F(S0.{t})) then\nD0.{t} = S0.{t}\nelsif isQuietNAN(64'F(S1.{t})) then\nD0.{t} = S1.{t}\n"
          f"elsif ((S0.{t} {cmp} S1.{t}) || ((S0.{t} == S1.{t}) && {zero.format(t=t)})) then\nD0.{t} = S0.{t}\n"
          f"else\nD0.{t} = S1.{t}\nendif")


_EXTREMES = ("CDNA4's V_MAXIMUM3_F32, V_MINIMUM3_F32, V_PK_MAXIMUM3_F16 and V_PK_MINIMUM3_F16 call v_maximum_f32, "
             "v_minimum_f32, v_maximum3_f16 and v_minimum3_f16, which the CDNA4 guide never defines (CDNA has no such "
             "instructions): without a body they stopped as unsupported. These are our helper bodies: IEEE 754-2019 "
             "maximum/minimum, the NaN and signed-zero order of the RDNA4 guide's instructions of the same names "
             "(its TRAPSTS.INVALID write left out: trap status is not modelled).")
_EXTREMES_EVIDENCE = ("AMD CDNA4 ISA guide, VOP3/VOP3P V_MAXIMUM3_F32, V_PK_MAXIMUM3_F16 (and MINIMUM); RDNA4 ISA "
                      "guide V_MAXIMUM_F32/F16, V_MAXIMUM3_F16; clang-22 lowers __builtin_elementwise_maximum/minimum "
                      "(llvm.maximum/minimum) on gfx950 to these instructions (tests/emu/test_ieee_extremes.py).")
HELPERS: tuple[Erratum, ...] = (
  *(Erratum(("cdna",), f"V_{k}_{t.upper()}", "add", _ieee_extreme(k, t), _EXTREMES, _EXTREMES_EVIDENCE)
    for k in ("MAXIMUM", "MINIMUM") for t in ("f32", "f16")),
  *(Erratum(("cdna",), f"V_{k}3_F16", "add", f"D0.f16 = v_{k.lower()}_f16(v_{k.lower()}_f16(S0.f16, S1.f16), S2.f16)",
            _EXTREMES, _EXTREMES_EVIDENCE) for k in ("MAXIMUM", "MINIMUM")),
)


def added(family: str, name: str) -> Erratum | None:
  """Our body for an instruction the vendor gives no pseudocode for, or for a helper its bodies call but never define
  (HELPERS: no instruction of the family has the name), or None."""
  return next((e for e in ADDED + HELPERS if family in e.families and re.fullmatch(e.match, name)), None)


# Graphics-only bodies: not part of the compute emulator. (family regex over names, reason)
EXCLUDED: tuple[tuple[str, str], ...] = (
  (r"IMAGE_.*", "image (MIMG/VIMAGE/VSAMPLE) instruction: texture units are graphics-only"),
  (r"V_INTERP_.*", "VINTERP parameter interpolation: graphics-only"),
  (r"LDS_DIRECT_LOAD|LDS_PARAM_LOAD", "LDSDIR attribute load: graphics-only"),
  (r"DS_.*_GS_REG_RTN", "geometry-shader register access: graphics-only"),
  (r"DS_BVH_STACK_.*", "ray-tracing BVH traversal stack: graphics-only"),
  (r"EXP|EXPORT", "export to the render back end: graphics-only"),
)


def excluded(name: str) -> str | None:
  """The reason a body is excluded, or None."""
  for pat, why in EXCLUDED:
    if re.fullmatch(pat, name):
      return why
  return None


def corrected(family: str, text: str, name: str = "") -> tuple[str, list[Erratum]]:
  """The vendor text of instruction `name` with every matching erratum applied, and the errata used."""
  used = []
  for e in ERRATA:
    m = re.search(e.match, text, re.M) if family in e.families and re.fullmatch(e.only or ".*", name) else None
    if m:
      text = (e.text(m) if callable(e.text) else e.text) if e.kind == "replace" else \
        re.sub(e.match, e.text, text, flags=re.M)
      used.append(e)
  return text, used
