"""Our corrections to the vendor pseudocode, as data. The parser only ever sees `corrected(family, name, text)`.

Each entry matches bodies by family and by a regular expression over the *vendor text* (never by instruction name
in code) and says why, with the evidence. Kinds:
  replace  - the vendor text is prose, an example listing or C, not pcode; `text` is the pcode we run instead.
  sub      - a local textual fix (regex -> replacement) for a PDF-extraction artefact.
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
  Erratum(_ALL, r"^D = [A-D] \((?:sparse )?\d+x\d+\) \* [A-D] \(\d+x\d+\) \+ [A-D] \(\d+x\d+\)\s*$", "replace",
          '"matrix multiply-accumulate over the whole wave; operand layout is per-encoding";\n'
          "D0 = MATRIX_MULTIPLY_ACCUMULATE(S0, S1, S2)",
          "WMMA/SWMMAC/MFMA/SMFMAC bodies are a one-line matrix formula, not pcode. We run a call to the "
          "MATRIX_MULTIPLY_ACCUMULATE hook, which raises 'not supported' until the emulator provides the VGPR layout.",
          f"{_MANUALS}: WMMA/MFMA chapters give the formula `D = A (MxK) * B (KxN) + C (MxN)` and describe the lane "
          "layout in tables, not pseudocode (vendor str_pcode text is the formula only)."),
  Erratum(_ALL, r"^(?:s_sleep (?:0|\{ duration)|SIMM16\[3:0\] = vmcount|expcnt <= |vmcnt <= |vscnt <= |lgkmcnt <= |"
          r"v_mov_b32 v3, v0|\.\.\.\ns_endpgm|Priority = \{|SysUserPrio = )", "replace",
          '"scheduling only: waits, sleeps, delays, priority and code-end padding change no architectural '
          'register or memory state"',
          "The vendor text is an example listing or a counter description, not pcode; these instructions only "
          "affect timing (the emulator core handles waits), so the body is an explicit note.",
          f"{_MANUALS}, SOPP chapter: S_WAITCNT*, S_SLEEP, S_DELAY_ALU, S_SETPRIO, S_CODE_END descriptions."),
  Erratum(_ALL, r"LDS\(addr\) = LDS\(addr\) [+-] countbits\(valid mask\)", "replace",
          '"wave-level LDS counter update: one read-modify-write per wave, not per lane";\n'
          "RETURN_DATA.u32 = DS_APPEND_CONSUME_COUNTER(M0.u32, OFFSET.u32, EXEC.u64)",
          "DS_APPEND/DS_CONSUME are described in C-like prose with `LDS(addr)` and `GPR[VDST]`. The update is "
          "per wave, which a per-lane body cannot say; it runs through the DS_APPEND_CONSUME_COUNTER hook.",
          f"{_MANUALS}, LDS chapter: DS_APPEND/DS_CONSUME (`countbits(valid mask)` added once per wave)."),
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


def corrected(family: str, text: str) -> tuple[str, list[Erratum]]:
  """The vendor text with every matching erratum applied, and the errata used."""
  used = []
  for e in ERRATA:
    m = re.search(e.match, text, re.M) if family in e.families else None
    if m:
      text = (e.text(m) if callable(e.text) else e.text) if e.kind == "replace" else \
        re.sub(e.match, e.text, text, flags=re.M)
      used.append(e)
  return text, used
