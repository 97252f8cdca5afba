"""Instruction traces as text: what `launch(..., trace=path)`, `gputwin run --trace` and `gputwin trace` write."""
from __future__ import annotations


def write_trace(path, trace) -> None:
  """One line per wave-instruction (warp-instruction for PTX), grouped by wave: (wave, PC, instruction, what it
  wrote). Deterministic across batched and serial runs."""
  with open(path, "w") as f:
    for w, pc, text, ch in sorted(trace, key=lambda t: t[0]):
      f.write(f"wave {w:5d} pc {pc:#08x}  {text:<56} {ch}\n")
