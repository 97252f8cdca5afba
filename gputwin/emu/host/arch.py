"""The host ISAs as data: one row per architecture with what the compiler, the loader and the launcher need to know
about it (LLVM triple and CPU, unicorn and capstone engines, the C calling convention's registers, the ELF machine,
relocations). Nothing else in gputwin/emu/host names a register or a relocation."""
from __future__ import annotations

from dataclasses import dataclass, field

import capstone as cs
import unicorn as uc
from unicorn import arm64_const as A
from unicorn import x86_const as X


@dataclass(frozen=True)
class HostArch:
  name: str
  triple: str
  cpu: str                      # LLVM CPU: only what unicorn's CPU model executes (no AVX/FMA/F16C on x86)
  uc: tuple                     # (UC_ARCH, UC_MODE, UC_CPU model)
  cs: tuple                     # (CS_ARCH, CS_MODE)
  machine: str                  # ELF e_machine (pyelftools' name)
  pc: int
  sp: int
  args: tuple                   # integer/pointer argument registers, in order
  fargs: tuple                  # floating-point argument registers (128-bit vector registers)
  ret: int                      # integer return
  fret: int                     # floating-point return
  link: int | None              # return-address register (None: pushed on the stack by `call`)
  ret_insn: bytes               # one `ret`: each stub is one, so a serviced call returns to its caller
  relocs: dict = field(default_factory=dict)  # ELF relocation type -> (kind, bytes): how S + A (- P) is written
  enable: tuple = ()            # (system register, bits to set, bits to clear) an OS sets before user code runs


# Relocations (System V x86-64 psABI 4.4; ELF for the Arm 64-bit Architecture, 5.7): kind says what is stored where.
#   abs: S + A; pcrel: S + A - P (little-endian, `bytes` wide, range-checked); page21: ADRP's page delta;
#   lo12/N: the low 12 bits of S + A >> N in an add/ldr/str immediate; branch26: (S + A - P) >> 2 in b/bl
X86_RELOCS = {1: ("abs", 8), 2: ("pcrel", 4), 4: ("pcrel", 4), 10: ("abs", 4), 11: ("abs", 4), 24: ("pcrel", 8)}
A64_RELOCS = {257: ("abs", 8), 258: ("abs", 4), 261: ("pcrel", 4), 260: ("pcrel", 8), 275: ("page21", 4),
              277: ("lo12/0", 4), 278: ("lo12/0", 4), 284: ("lo12/1", 4), 285: ("lo12/2", 4), 286: ("lo12/3", 4),
              299: ("lo12/4", 4), 282: ("branch26", 4), 283: ("branch26", 4)}

ARCHES = {
  "x86_64": HostArch("x86_64", "x86_64-unknown-linux-gnu", "nehalem",
                     (uc.UC_ARCH_X86, uc.UC_MODE_64, X.UC_CPU_X86_NEHALEM), (cs.CS_ARCH_X86, cs.CS_MODE_64),
                     "EM_X86_64", X.UC_X86_REG_RIP, X.UC_X86_REG_RSP,
                     (X.UC_X86_REG_RDI, X.UC_X86_REG_RSI, X.UC_X86_REG_RDX, X.UC_X86_REG_RCX),
                     (X.UC_X86_REG_XMM0, X.UC_X86_REG_XMM1, X.UC_X86_REG_XMM2), X.UC_X86_REG_RAX,
                     X.UC_X86_REG_XMM0, None, b"\xc3", X86_RELOCS,
                     # SSE: CR0.MP set, CR0.EM clear; CR4.OSFXSR and OSXMMEXCPT (Intel SDM vol. 3A, 13.1.3)
                     ((X.UC_X86_REG_CR0, 1 << 1, 1 << 2), (X.UC_X86_REG_CR4, 3 << 9, 0))),
  "aarch64": HostArch("aarch64", "aarch64-unknown-linux-gnu", "cortex-a72",
                      (uc.UC_ARCH_ARM64, uc.UC_MODE_ARM, A.UC_CPU_ARM64_A72), (cs.CS_ARCH_ARM64, cs.CS_MODE_ARM),
                      "EM_AARCH64", A.UC_ARM64_REG_PC, A.UC_ARM64_REG_SP,
                      (A.UC_ARM64_REG_X0, A.UC_ARM64_REG_X1, A.UC_ARM64_REG_X2, A.UC_ARM64_REG_X3),
                      (A.UC_ARM64_REG_Q0, A.UC_ARM64_REG_Q1, A.UC_ARM64_REG_Q2), A.UC_ARM64_REG_X0,
                      A.UC_ARM64_REG_Q0, A.UC_ARM64_REG_X30, bytes.fromhex("c0035fd6"), A64_RELOCS,
                      ((A.UC_ARM64_REG_CPACR_EL1, 3 << 20, 0),)),   # CPACR_EL1.FPEN: FP/SIMD at EL0/EL1
}


def host_arch(name: str) -> HostArch:
  from gputwin.errors import GputwinError
  if name not in ARCHES:
    raise GputwinError(f"unknown host target {name!r} (known: {', '.join(ARCHES)})")
  return ARCHES[name]
