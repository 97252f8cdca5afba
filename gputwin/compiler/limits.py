"""Per-target resource limits both backends check before code generation (LLVM aborts the process on some of
them, so they must be caught here as CompileErrors that name the Python line)."""
from __future__ import annotations


from gputwin.compiler.ir import Kernel, op_class
from gputwin.errors import CompileError

# LDS per workgroup: AMD ISA guides / LLVM AMDGPUUsage ("Memory Spaces"): 64 KiB, CDNA4 (gfx950) 160 KiB.
LDS_BYTES = {"gfx950": 160 * 1024}
SCRATCH_BYTES = 128 * 1024      # private memory per work-item we accept (LLVM's limit is larger; keep tests sane)
SHARED_BYTES = 48 * 1024        # NVIDIA: static .shared per CTA (larger needs dynamic shared memory and an opt-in)


IR3_SHARED_BYTES = 32 * 1024    # Adreno a6xx/a7xx: shared memory per workgroup (Mesa's compute limit)


def lds_bytes(arch: str) -> int:
  return IR3_SHARED_BYTES if arch.startswith("a") and arch[1:].isdigit() else LDS_BYTES.get(arch, 64 * 1024)


def check(k: Kernel, arch: str) -> None:
  """Raise CompileError at the `shared`/`alloca` that takes the kernel over the target's shared (LDS) or private
  (scratch, .local) size; on NVIDIA targets also at an 8/16-bit atomic (PTX has 32/64-bit ones; a CAS loop on the
  enclosing word would touch bytes outside the buffer). PTX .local blocks are 16-byte aligned, AMD scratch packed."""
  nv = arch.startswith("sm_")
  shared = SHARED_BYTES if nv else lds_bytes(arch)
  sh = priv = 0
  for op in k.walk():
    if nv and op_class(op) == "atomic" and op.result.type.bits < 32:
      raise CompileError(f"{op.opcode} on {op.result.type} is not supported on PTX (32/64-bit atomics only)",
                         loc=op.loc, arch=arch, kernel=k.name)
    if op.opcode not in ("shared", "alloca"): continue
    size = op.attrs["count"] * op.result.type.elem.nbytes
    if op.opcode == "shared":
      sh += -(-size // 16) * 16
      if sh > shared:
        raise CompileError(f"shared memory of kernel @{k.name} reaches {sh} bytes here; {arch} " +
                           (f"allows {shared} bytes of static shared memory per CTA" if nv else
                            f"has {shared} bytes of shared memory per workgroup" if arch.startswith("a") else
                            f"has {shared} bytes of LDS per workgroup"), loc=op.loc, arch=arch)
    else:
      priv += -(-size // 16) * 16 if nv else size
      if priv > SCRATCH_BYTES:
        raise CompileError(f"private memory of kernel @{k.name} reaches {priv} bytes per "
                           f"{'thread' if nv else 'work-item'} here (limit {SCRATCH_BYTES})", loc=op.loc, arch=arch)


__all__ = ["check", "lds_bytes", "LDS_BYTES", "SCRATCH_BYTES", "SHARED_BYTES", "IR3_SHARED_BYTES"]
