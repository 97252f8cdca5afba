"""The native tier: hot straight-line blocks compiled to host code through LLVM (llvmlite) from the pcode IR; what it
runs, how and when: gputwin/emu/README.md, "Native tier". `plan` picks a block's instructions and their layout,
`codegen` writes its LLVM IR, `runtime` loads it and runs it over waves, `tier` decides when a block compiles, `cache`
keeps compiled blocks on disk for other processes."""
from gputwin.emu.native.codegen import Compiler, Mode
from gputwin.emu.native.plan import collect, supported
from gputwin.emu.native.runtime import STATS, Block, Native
from gputwin.emu.native.tier import FAILED, WORKER, Tier, compile_block, lookup, mode, threshold
from gputwin.pcode.llvm import Unsupported

__all__ = ["Block", "Compiler", "FAILED", "Mode", "Native", "STATS", "Tier", "Unsupported", "WORKER", "collect",
           "compile_block", "lookup", "mode", "supported", "threshold"]
