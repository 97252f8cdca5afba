"""Decoder robustness at scale: feed millions of random 32/64/96/128-bit words to `gputwin.isa.decode`.

Issue 2's contract: decoding any word either yields an instruction or raises gputwin's own DecodeError; nothing
else may escape. The CI test (tests/isa/test_llvm_fuzz.py::test_random_words_raise_only_decode_error) runs a few
hundred words per target; this runs as many as you like and prints every escape (type, message, word) once per
exception type and location, plus throughput.

  python bench/decode_fuzz.py                       # 1M words per target, all targets
  python bench/decode_fuzz.py -n 5000000 --arch gfx942 --seed 7
  python bench/decode_fuzz.py --valid-prefix        # words whose first dword has a real encoding's fixed bits
"""
from __future__ import annotations

import argparse
import collections
import random
import sys
import time
import traceback

from gputwin.errors import DecodeError


def _decode():
  try:
    from gputwin.isa import decode
  except ImportError:
    from gputwin.isa.encoding import decode
  return decode


def _prefixes(arch: str) -> list[tuple[int, int]]:
  """(mask, value) of every encoding's fixed bits in the first dword: steers words into real formats."""
  from gputwin.isa.targets import target
  from gputwin.isa.vendor import tables
  out = []
  for e in tables(target(arch).family).encodings.values():
    mask = val = 0
    for f in e.fixed:
      if f.hi < 32:
        mask |= f.mask << f.lo
        val |= f.value << f.lo
    out.append((mask, val))
  return out


def fuzz(arch: str, n: int, seed: int, valid_prefix: bool) -> int:
  decode, rng = _decode(), random.Random(f"{arch}:{seed}")
  prefixes = _prefixes(arch) if valid_prefix else []
  stats, escapes = collections.Counter(), {}
  t0 = time.perf_counter()
  for _ in range(n):
    size = rng.choice((4, 8, 12, 16))
    word = rng.getrandbits(size * 8)
    if prefixes:
      mask, val = rng.choice(prefixes)
      word = word & ~mask | val
    data = word.to_bytes(size, "little")
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


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("-n", type=int, default=1_000_000, help="words per target")
  ap.add_argument("--arch", nargs="*", default=["gfx1100", "gfx1200", "gfx942", "gfx950"])
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--valid-prefix", action="store_true", help="force real fixed bits into the first dword")
  a = ap.parse_args()
  return 1 if sum(fuzz(t, a.n, a.seed, a.valid_prefix) for t in a.arch) else 0


if __name__ == "__main__":
  sys.exit(main())
