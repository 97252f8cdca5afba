"""The `gputwin` command. Thin: parses arguments, calls the packages' public APIs, prints with rich."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from gputwin.errors import GputwinError

_TOKENS = re.compile(r"(?P<reg>\b(?:[vsa]\[\d+:\d+\]|[vsa]\d+(?:\.[lh])?|ttmp\[?\d+(?::\d+\])?|vcc(?:_lo|_hi)?|exec(?:_lo|_hi)?|"
                     r"m0|null|scc)\b)|(?P<num>-?\b(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)\b)")


def _highlight(line: str) -> str:
  """Rich markup for one instruction: mnemonic bold, registers cyan, numbers magenta."""
  from rich.markup import escape
  mnem, _, rest = line.partition(" ")
  out, pos = [f"[bold yellow]{escape(mnem)}[/]", " " if rest else ""], 0
  for m in _TOKENS.finditer(rest):
    out.append(escape(rest[pos:m.start()]))
    out.append(f"[{'cyan' if m.lastgroup == 'reg' else 'magenta'}]{escape(m.group())}[/]")
    pos = m.end()
  out.append(escape(rest[pos:]))
  return "".join(out)


def _parse_hex(text: str) -> bytes:
  """llvm-mc style "0x01 0x05,0x0a" byte lists, or a plain hex string "01050a06" (memory order)."""
  toks = text.replace(",", " ").split()
  try:
    if any(t.lower().startswith("0x") for t in toks):
      return bytes(int(t, 16) for t in toks)
    return bytes.fromhex("".join(toks))
  except ValueError as e:
    raise GputwinError(f"--hex: not a byte list: {text!r} ({e})") from None


def _console():
  from rich.console import Console
  return Console(highlight=False)


def cmd_demo(ns: argparse.Namespace) -> int:
  from gputwin.demo import run_demo
  return run_demo(_console())


def cmd_asm(ns: argparse.Namespace) -> int:
  from gputwin.isa import assemble, disassemble
  text = Path(ns.file).read_text() if ns.file != "-" else sys.stdin.read()
  code = assemble(text, ns.arch, wave=ns.wave)
  if ns.output:
    Path(ns.output).write_bytes(code)
  con = _console()
  if ns.show_encoding or not ns.output:
    from gputwin.isa import ADRENO, decode
    off = 0
    for line in disassemble(code, ns.arch, wave=ns.wave):
      n = 8 if ns.arch in ADRENO else decode(code, ns.arch, offset=off, wave=ns.wave).size   # ir3: 64-bit words
      enc = ",".join(f"0x{b:02x}" for b in code[off:off + n])
      con.print(f"  {_highlight(line):<60} [dim]; encoding: [{enc}][/]" if ns.show_encoding else f"  {_highlight(line)}")
      off += n
  return 0


def cmd_disasm(ns: argparse.Namespace) -> int:
  from gputwin.isa import disassemble
  if ns.hex is not None:
    data = _parse_hex(ns.hex)
  elif ns.file:
    data = Path(ns.file).read_bytes()
  else:
    raise GputwinError("disasm: give a FILE or --hex")
  con = _console()
  for line in disassemble(data, ns.arch, wave=ns.wave):
    con.print(f"  {_highlight(line)}")
  return 0


def cmd_pcode(ns: argparse.Namespace) -> int:
  from gputwin.pcode import tool
  if ns.show:
    print(tool.show(ns.show, ns.arch or "rdna3"))
    return 0
  cov = tool.coverage(json=ns.json)
  if ns.json:
    print(json.dumps(cov))
  return 0


def _tool(module: str, fn: str):
  """Subcommands whose argument parser lives with their package (run, compile, devices)."""
  def call(argv: list[str]) -> int:
    import importlib
    return getattr(importlib.import_module(module), fn)(argv)
  return call


# name -> (help, entry point taking argv)
_TOOLS = {
  "run": ("run a kernel (.s/.co/.o) on the emulator", _tool("gputwin.emu.tool", "run_main")),
  "compile": ("compile @gputwin.kernel Python functions for an AMD target", _tool("gputwin.compiler.tool", "compile_main")),
  "devices": ("list real and mock GPUs with their properties", _tool("gputwin.runtime.tool", "devices_main")),
  "trace": ("run a launch and write its per-wave instruction trace", _tool("gputwin.verify.tool", "trace_main")),
  "diff": ("first differing output and executed instruction of two runs", _tool("gputwin.verify.tool", "diff_main")),
  "bisect": ("find the first bad pass, instruction or git commit", _tool("gputwin.verify.bisect", "main")),
  "fuzz": ("differential fuzzing: random OpenCL/IR programs vs host; --reliability: hostile inputs, every entry point",
           _tool("gputwin.verify.fuzz", "main")),
  "exec": ("run a Python program (tinygrad, any KFD client) on mock GPUs", _tool("gputwin.mock.exec", "exec_main")),
}


_RUNS_KERNELS = ("demo", "run", "trace", "diff", "bisect", "fuzz")


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="gputwin", description="Emulator-first GPU simulation and verification suite.")
  sub = p.add_subparsers(dest="cmd", required=True)
  sub.add_parser("demo", help="run the main job on an embedded default").set_defaults(fn=cmd_demo)
  a = sub.add_parser("asm", help="assemble AMD (llvm-mc-22 syntax) or Adreno ir3 (Mesa syntax) assembly")
  a.add_argument("file", help="assembly file (- for stdin)")
  a.add_argument("--arch", required=True, help="target: gfx1100, gfx1200, gfx1201, gfx942, gfx950; a540, a630, a660, "
                 "a730, a740")
  a.add_argument("--wave", type=int, choices=(32, 64), default=None)
  a.add_argument("-o", "--output", help="write raw instruction bytes here")
  a.add_argument("--show-encoding", action="store_true", help="print each instruction with its bytes")
  a.set_defaults(fn=cmd_asm)
  d = sub.add_parser("disasm", help="disassemble AMD or Adreno ir3 GPU machine code")
  d.add_argument("file", nargs="?", help="raw instruction bytes")
  d.add_argument("--hex", help='bytes as hex, e.g. "0x01 0x05 0x0a 0x06" or "01050a06"')
  d.add_argument("--arch", required=True)
  d.add_argument("--wave", type=int, choices=(32, 64), default=None)
  d.set_defaults(fn=cmd_disasm)
  c = sub.add_parser("pcode", help="vendor pseudocode: coverage and per-instruction view")
  c.add_argument("--coverage", action="store_true", help="parse/compile/test coverage per family")
  c.add_argument("--json", action="store_true", help="machine-readable coverage")
  c.add_argument("--show", metavar="INSTRUCTION", help="source, IR and generated code of one instruction")
  c.add_argument("--arch", help="family (rdna3, rdna4, cdna) or target (gfx1100, ...)")
  c.set_defaults(fn=cmd_pcode)
  for name, (hlp, _) in _TOOLS.items():
    sub.add_parser(name, help=hlp, add_help=False)  # parsed by the package's own tool (see _TOOLS)
  return p


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  try:
    if argv and argv[0] in _RUNS_KERNELS:  # a command owns its process: let glibc keep the emulator's temporaries
      from gputwin.emu.core import keep_heap
      keep_heap()
    if argv and argv[0] in _TOOLS:
      return _TOOLS[argv[0]][1](argv[1:])
    ns = build_parser().parse_args(argv)
    return ns.fn(ns)
  except GputwinError as e:
    print(f"gputwin: {e}", file=sys.stderr)
    return 1
  except OSError as e:
    print(f"gputwin: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(main())
