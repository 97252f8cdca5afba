"""Random ir3 programs (cleanly decoding random 64-bit words, then `end`) on the emulator: the host survives, only
gputwin errors escape (a located unsupported/fault/watchdog error, or success), the interpreter and the native tier
(every block compiled at first sight) end the same way with the same message, and a second run repeats it."""
import os
import random

import numpy as np
import pytest

from gputwin.emu.ir3.launch import launch
from gputwin.errors import GputwinError
from gputwin.isa import ir3


def _programs(gpu: str, n: int, seed: int, length: int = 6):
  r = random.Random(f"{gpu}/{seed}")
  end = ir3.assemble("end", gpu)
  for _ in range(n):
    words = []
    while len(words) < length:
      w = r.getrandbits(64)
      try:
        if ir3.decode(w.to_bytes(8, "little"), gpu).name == "end":
          continue
      except GputwinError:
        continue
      words.append(w)
    yield b"".join(w.to_bytes(8, "little") for w in words) + end


def _outcome(code: bytes, gpu: str, jit: str) -> str:
  os.environ["GPUTWIN_JIT"] = jit
  bufs = {0: np.arange(64, dtype=np.uint32), 1: np.zeros(64, np.uint32)}
  try:
    launch(code, grid=1, args=bufs, arch=gpu, checks=False, max_instructions=2000)
    return "ok " + bufs[1].tobytes().hex()
  except GputwinError as e:
    return f"{type(e).__name__}: {e}"


def _campaign(gpu: str, n: int, seed: int, monkeypatch) -> None:
  monkeypatch.setenv("GPUTWIN_JIT", "0")
  bad = []
  for code in _programs(gpu, n, seed):
    a, b, again = _outcome(code, gpu, "0"), _outcome(code, gpu, "force"), _outcome(code, gpu, "0")
    if not (a == b == again):
      bad.append((code.hex(), a, b, again))
  assert not bad, bad[:3]


@pytest.mark.parametrize("chip", ["a630", "a730"])
def test_random_programs_survive_and_agree(chip, monkeypatch):
  _campaign(chip, 150, 1, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("chip", ["a630", "a660", "a730", "a740"])
def test_random_programs_campaign(chip, monkeypatch):
  _campaign(chip, 5000, 2, monkeypatch)
