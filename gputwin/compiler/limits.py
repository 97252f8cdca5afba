"""Per-target resource limits both backends check before code generation (LLVM aborts the process on some of
them, so they must be caught here as CompileErrors that name the Python line)."""
from __future__ import annotations


from gputwin.compiler.ir import Kernel
from gputwin.errors import CompileError

# LDS per workgroup: AMD ISA guides / LLVM AMDGPUUsage ("Memory Spaces"): 64 KiB, CDNA4 (gfx950) 160 KiB.
LDS_BYTES = {"gfx950": 160 * 1024}
SCRATCH_BYTES = 128 * 1024      # private memory per work-item we accept (LLVM's limit is larger; keep tests sane)


def lds_bytes(arch: str) -> int: return LDS_BYTES.get(arch, 64 * 1024)


def check(k: Kernel, arch: str) -> None:
  """Raise CompileError at the `shared`/`alloca` that takes the kernel over the target's LDS or scratch size."""
  lds = priv = 0
  for op in k.walk():
    if op.opcode not in ("shared", "alloca"): continue
    size = op.attrs["count"] * op.result.type.elem.nbytes
    if op.opcode == "shared":
      lds += -(-size // 16) * 16
      if lds > lds_bytes(arch):
        raise CompileError(f"shared memory of kernel @{k.name} reaches {lds} bytes here; {arch} has "
                           f"{lds_bytes(arch)} bytes of LDS per workgroup", loc=op.loc, arch=arch)
    else:
      priv += size
      if priv > SCRATCH_BYTES:
        raise CompileError(f"private memory of kernel @{k.name} reaches {priv} bytes per work-item here (limit "
                           f"{SCRATCH_BYTES})", loc=op.loc, arch=arch)


__all__ = ["check", "lds_bytes", "LDS_BYTES", "SCRATCH_BYTES"]
