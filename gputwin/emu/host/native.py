"""The native tier's code shown with capstone, read and never changed (`gputwin run --show-native`): a compiled
block's host machine code with the guest instruction each address range implements.

The block's IR is generated again by its own code generator (codegen.Compiler: deterministic in the block's ops),
every instruction given a DWARF location (line i + 1 inside @inst{i}..., the code of the block's instruction i;
line 0 in the wave loop and the prelude's helpers) and run through the tier's own pipeline (runtime.emit). Debug
info does not change LLVM's code generation: when the code equals the block's own object code (Block.obj, what the
tier linked), the line table maps each address to the guest instruction it implements; otherwise the block's own
code is shown without that map."""
from __future__ import annotations

import platform
import re

from gputwin.emu.native.codegen import Compiler
from gputwin.emu.native.runtime import emit, parse
from gputwin.emu.native.tier import WORKER, Tier

_DEFINE = re.compile(r"define [^@]*@([\w.$]+)\(")


def compiled() -> list[tuple[object, int, object]]:
  """(program, lanes, Block) of every native block this process has, by program and PC."""
  WORKER.wait()   # background compiles land first
  out = []
  for prog, st in list(Tier.programs.items()):
    out += [(prog, key[1], blk) for key, blk in sorted(st.blocks.items(), key=lambda kb: kb[0][:3]) if blk]
  return out


def annotate(text: str) -> str:
  """A block module's LLVM IR with a DWARF location on every instruction (see the module docstring)."""
  base = max((int(m) for m in re.findall(r"!(\d+)", text)), default=0) + 1
  subs, out, fn = {}, [], None
  for ln in text.splitlines():
    m = _DEFINE.match(ln)
    if m:
      idx = re.match(r"inst(\d+)", m.group(1))
      fn = subs.setdefault(m.group(1), (base + 2 + 2 * len(subs), int(idx.group(1)) + 1 if idx else 0))
      ln = ln[:ln.rindex("{")] + f"!dbg !{fn[0]} {{"
    elif ln.startswith("}"):
      fn = None
    elif fn and ln.startswith(" ") and ln.strip() and not ln.lstrip().startswith(";"):
      ln += f", !dbg !{fn[0] + 1}"
    out.append(ln)
  meta = ["!llvm.dbg.cu = !{!%d}" % base, "!llvm.module.flags = !{!%d}" % (base + 1),
          f'!{base} = distinct !DICompileUnit(language: DW_LANG_C99, file: !{base + 2 + 2 * len(subs)}, '
          'producer: "gputwin native tier", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly)',
          f'!{base + 1} = !{{i32 2, !"Debug Info Version", i32 3}}',
          f'!{base + 2 + 2 * len(subs)} = !DIFile(filename: "block", directory: ".")']
  f = base + 2 + 2 * len(subs)
  for name, (sp, line) in subs.items():
    meta += [f'!{sp} = distinct !DISubprogram(name: "{name}", scope: !{f}, file: !{f}, line: {line}, type: !{f + 1}, '
             f"spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !{base})",
             f"!{sp + 1} = !DILocation(line: {line}, scope: !{sp})"]
  meta.append(f"!{f + 1} = !DISubroutineType(types: !{{}})")
  return "\n".join(out + meta) + "\n"


def machine_code(prog, lanes: int, blk, name: str = "block") -> bytes:
  """The block's host object code, with DWARF lines naming its instructions (line i + 1: blk.ops[i])."""
  return emit(parse(annotate(Compiler(blk.ops, lanes, prog.family, prog.frontend, blk.lean).module(name))), blk.lean)


def code(obj: bytes) -> bytes:
  """The executable sections' bytes of an object."""
  import io
  from elftools.elf.elffile import ELFFile
  return b"".join(s.data() for s in ELFFile(io.BytesIO(obj)).iter_sections() if s["sh_flags"] & 4)


def show(prog, lanes: int, blk) -> str:
  """capstone's listing of a block's host code, each range under the guest instruction (PC, text) it implements."""
  from gputwin.emu.host.disasm import listing
  arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
  head = f"native block at PC {blk.pc:#x} ({prog.arch}, wave{lanes}): {len(blk.ops)} instructions"
  mapped = machine_code(prog, lanes, blk)
  if code(mapped) != code(blk.obj):
    return (f"{head}\n; (its code differs from the block generated again with line info: no guest map)\n"
            + listing(blk.obj, arch))
  lines = {i + 1: f"{op.pc:#x}  {op.text}" for i, op in enumerate(blk.ops)}
  return head + "\n" + listing(mapped, arch, lines, what="guest")
