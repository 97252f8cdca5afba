"""Decoder robustness at scale: feed millions of random 32/64/96/128-bit words to `gputwin.isa.decode`.

Issue 2's contract: decoding any word either yields an instruction or raises gputwin's own DecodeError; nothing
else may escape. The CI test (tests/isa/test_llvm_fuzz.py::test_random_words_raise_only_decode_error) runs a few
hundred words per target; this runs as many as you like and prints every escape (type, message, word) once per
exception type and location, plus throughput.

  python bench/decode_fuzz.py                       # 1M words per target, all targets
  python bench/decode_fuzz.py -n 5000000 --arch gfx942 --seed 7
  python bench/decode_fuzz.py --valid-prefix        # words whose first dword has a real encoding's fixed bits
  python bench/decode_fuzz.py --vs-llvm -n 20000    # also: where llvm-mc-22 decodes a random word, our
                                                    # disassembly must print the same text (raw-word differential)
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

from gputwin.errors import DecodeError
from gputwin.isa.strategies import random_words


def _decode():
  try:
    from gputwin.isa import decode
  except ImportError:
    from gputwin.isa.encoding import decode
  return decode


def fuzz(arch: str, n: int, seed: int, real_prefix: bool) -> int:
  decode = _decode()
  stats, escapes = collections.Counter(), {}
  t0 = time.perf_counter()
  for start in range(0, n, 100_000):
    for data in random_words(arch, min(100_000, n - start), seed * 1_000_003 + start, real_prefix):
      try:
        decode(data, arch)
        stats["decoded"] += 1
      except DecodeError:
        stats["DecodeError"] += 1
      except Exception as e:  # noqa: BLE001 - exactly what this bench looks for
        tb = traceback.extract_tb(e.__traceback__)[-1]
        key = (type(e).__name__, tb.filename, tb.lineno)
        stats["ESCAPED"] += 1
        if key not in escapes:
          escapes[key] = data
          print(f"  {arch}: {type(e).__name__} at {tb.filename}:{tb.lineno}: {e} -- bytes {data.hex(' ')}")
  dt = time.perf_counter() - t0
  print(f"{arch}: {n} words in {dt:.1f}s ({n / dt:,.0f}/s): {dict(stats)}; {len(escapes)} distinct escapes")
  return len(escapes)


def vs_llvm(arch: str, n: int, seed: int) -> int:
  """Raw random words (real fixed bits in the first dword) through llvm-mc-22 and gputwin.isa.disassemble: where
  llvm-mc decodes a word as exactly one instruction, our text must match. Reaches bit patterns the table-driven
  strategies never build (unused bits set, odd operand codes)."""
  sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "isa"))
  from test_llvm_fuzz import llvm_disassemble, norm  # the batched llvm-mc oracle of the differential tests
  from gputwin.isa import disassemble
  stats, shown = collections.Counter(), collections.Counter()
  for start in range(0, n, 5000):
    words = random_words(arch, min(5000, n - start), seed * 1_000_003 + start)
    for w, text in zip(words, llvm_disassemble(words, arch)):
      if text is None or text.startswith("<"):
        stats["llvm-mc rejects"] += 1
        continue
      try:
        ours = " | ".join(norm(x) for x in disassemble(w, arch))
      except Exception as e:  # noqa: BLE001
        ours = f"raised {type(e).__name__}: {e}"
      ok = ours == text
      stats["agree" if ok else "disagree"] += 1
      if not ok and shown[text.split()[0]] < 1 and sum(shown.values()) < 25:
        shown[text.split()[0]] += 1
        print(f"  {arch}: {w.hex(' ')}\n    llvm-mc: {text}\n    ours:    {ours}")
  print(f"{arch}: {n} raw words vs llvm-mc-22: {dict(stats)}")
  return stats["disagree"]


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("-n", type=int, default=1_000_000, help="words per target")
  ap.add_argument("--arch", nargs="*", default=["gfx1100", "gfx1200", "gfx942", "gfx950"])
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--valid-prefix", action="store_true", help="force real fixed bits into the first dword")
  ap.add_argument("--vs-llvm", action="store_true", help="also compare our text with llvm-mc-22 where it decodes")
  a = ap.parse_args()
  bad = sum(fuzz(t, a.n, a.seed, a.valid_prefix) for t in a.arch)
  if a.vs_llvm:
    bad += sum(vs_llvm(t, a.n, a.seed) for t in a.arch)
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
