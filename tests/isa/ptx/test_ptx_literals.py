"""Hostile literals and names in PTX (issue 22), with ptxas 13 as the oracle: integer literals of any length and base
are accepted or refused ("Constant overflow") exactly as ptxas does, and an accepted one has the value ptxas gives it
(read back from the .nv.global.init section of ptxas's cubin); names of any length, control and non-ASCII characters
give short errors located at line:col, on the line ptxas names. Without ptxas the oracle half of each test is skipped
and the located-error half still runs."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
import time

import pytest
from ptx_oracle import HAVE_CUDA, ptxas, ptxas_line

from gputwin.isa.ptx import PtxError, VarDecl, parse

HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n"
DIGITS = {"0x": "0123456789abcdefABCDEF", "0b": "01", "0": "01234567", "": "0123456789"}


def literals(n: int, seed: int = 22) -> list[str]:
  """Seeded integer literals in every base, 1 to 120 digits, some biased to small digits (long values that may still
  fit): the boundary of 64 bits is where they land most."""
  rng, out = random.Random(seed), []
  for _ in range(n):
    prefix = rng.choice(list(DIGITS))
    digits, small = DIGITS[prefix], rng.random()
    k = rng.choice([1, 5, 15, 16, 17, 18, 19, 20, 21, 22, 23, 40, 63, 64, 65, 66, 120])
    s = "".join(rng.choice(digits[:2] if rng.random() < small else digits) for _ in range(k))
    out.append(prefix + s if prefix else s.lstrip("0") or "0")
  return out


def _kernel(body: str) -> str:
  return HEAD + ".visible .entry k()\n{\n  .reg .b64 %rd<2>;\n" + body + "\n  ret;\n}\n"


def _accepts(text: str) -> bool:
  try: parse(text)
  except PtxError: return False
  return True


needs_ptxas = pytest.mark.skipif(not HAVE_CUDA, reason="ptxas (CUDA 13) not installed")


@needs_ptxas
def test_integer_literals_overflow_where_ptxas_says_so(tmp_path):
  lits = literals(400)
  p = tmp_path / "lits.ptx"
  p.write_text(_kernel("\n".join(f"  mov.u64 %rd1, {t};" for t in lits)))
  r = subprocess.run(["ptxas", "-arch=sm_90", "-o", "/dev/null", str(p)], capture_output=True, text=True)
  refused = {int(m) - 7 for m in re.findall(r"line (\d+); error   : Constant overflow", r.stderr)}
  assert 50 < len(refused) < 350, "the seed should give both outcomes"
  ours = {i for i, t in enumerate(lits) if not _accepts(_kernel(f"  mov.u64 %rd1, {t};"))}
  assert ours == refused, [lits[i] for i in ours ^ refused][:5]


@needs_ptxas
def test_accepted_literals_have_ptxas_values(tmp_path):
  """Each accepted literal initialises a .u64 global; ptxas's cubin holds the value it gave it (modulo 2^64)."""
  lits = [t for t in literals(400) if _accepts(_kernel(f"  mov.u64 %rd1, {t};"))]
  lits += ["0x1" + "0" * 5000 + "5", "0b1" + "0" * 63, "18446744073709551617", "0x1ffffffffffffffff"]
  text = HEAD + "".join(f".visible .global .u64 g{i} = {t};\n" for i, t in enumerate(lits)) + \
    ".visible .entry k()\n{\n  ret;\n}\n"
  ours = {d.name: d.init.value for d in parse(text).items if isinstance(d, VarDecl)}
  (tmp_path / "g.ptx").write_text(text)
  cubin = tmp_path / "g.cubin"
  subprocess.run(["ptxas", "-arch=sm_90", "-o", str(cubin), str(tmp_path / "g.ptx")], check=True)
  if not shutil.which("readelf"): pytest.skip("readelf not installed")
  dump = subprocess.run(["readelf", "-x", ".nv.global.init", str(cubin)], capture_output=True, text=True).stdout
  data = bytes.fromhex("".join("".join(l.split()[1:5]) for l in dump.splitlines() if l.strip().startswith("0x")))
  syms = subprocess.run(["readelf", "-sW", str(cubin)], capture_output=True, text=True).stdout
  theirs = {name: int.from_bytes(data[int(off, 16):int(off, 16) + 8], "little")
            for off, name in re.findall(r"^\s*\d+:\s+([0-9a-f]+)\s+8\s+OBJECT\s+GLOBAL\s+\w+\s+\d+\s+(g\d+)$", syms, re.M)}
  assert len(theirs) == len(lits) and ours == theirs


LONG = "a" * 20_000
NAMES = {  # a hostile line -> the text the error must point at (line 7 of the kernel)
  "undefined label of 20k characters": (f"  bra $L{LONG};", f"$L{LONG[:8]}"),
  "undefined register of 20k characters": (f"  mov.u64 %rd1, %q{LONG};", "%qaaa"),
  "unknown instruction of 20k characters": (f"  x{LONG} %rd1;", "xaaa"),
  "4,000-digit hex immediate": ("  mov.u64 %rd1, 0x" + "f" * 4000 + ";", "0xfff"),
  "5,000-digit decimal immediate": ("  mov.u64 %rd1, " + "9" * 5000 + ";", "999"),
  "double overflow": ("  mov.b64 %rd1, 1e309;", "1e309"),
  "escape sequence after an instruction": ("  mov.u64 %rd1, 1;\x1b[2J", "\x1b"),
  "non-ASCII in a comment": ("  mov.u64 %rd1, 1; // \x1b[31m\u00e9", "\u00e9"),
  "bidi override in a name": ("  bra $L\u202e;", "\u202e"),
  "DEL": ("  mov.u64 %rd1, 1;\x7f", "\x7f"),
}


@pytest.mark.parametrize("case", sorted(NAMES))
def test_hostile_names_give_short_located_errors(case, tmp_path):
  line, at = NAMES[case]
  text = _kernel(line)
  col = text.split("\n")[6].index(at) + 1
  with pytest.raises(PtxError) as e: parse(text, "bad.ptx")
  msg = str(e.value)
  assert (e.value.line, e.value.col) == (7, col) and msg.startswith(f"bad.ptx:7:{col}: error: "), msg[:300]
  assert len(msg) < 500 and all(" " <= c <= "~" for c in msg.replace("\n", "")), msg   # short, printable, ASCII
  if not HAVE_CUDA: return
  p = tmp_path / "bad.ptx"
  p.write_bytes(text.encode())
  ok, err = ptxas(p, "sm_90")
  non_ascii = re.search(r"non-ASCII character encountered on line (\d+)", err)
  assert not ok and (ptxas_line(err) or int(non_ascii[1])) == 7, err[:300]


def test_bytes_that_are_not_utf8_are_a_located_error():
  with pytest.raises(PtxError, match=r"^<ptx>:2:1: error: unexpected non-ASCII character '\\xff'"):
    parse(HEAD.encode()[:13] + b"\xff\xfe")


@pytest.mark.parametrize("line", ["  mov.u64 %rd1,\f1;", "  mov.u64 %rd1, 0x1" + "0" * 100_000 + ";",
                                  "  mov.u64 %rd1, 0x1ffffffffffffffff;"])
def test_what_ptxas_accepts_is_accepted(line, tmp_path):
  """A form feed is white space, and a literal is 64 bits modulo 2^64 however long (0x1 then 100k zeros is 0)."""
  t = time.perf_counter()
  m = parse(_kernel(line))
  assert time.perf_counter() - t < 2
  v = m.kernels["k"].instructions()[0].operands[1].value
  assert v == (2**64 - 1 if "1ff" in line else 0 if "0x1" in line else 1)
  if HAVE_CUDA:
    (tmp_path / "ok.ptx").write_text(_kernel(line))
    assert ptxas(tmp_path / "ok.ptx", "sm_90")[0]


@pytest.mark.parametrize("line", ["  mov.u32 %r1, 0x100000000;", "  add.u32 %r1, %r1, 0x1ffffffffffffffff;",
                                  "  mov.u16 %h1, 65536;", "  and.b16 %h1, %h1, -0x8000000000000000;"])
def test_values_wider_than_the_type_are_accepted_like_ptxas(line, tmp_path):
  """ptxas takes an integer immediate wider than the instruction's type (it keeps the low bits): no error here either,
  and the value is the literal's 64-bit one."""
  text = HEAD + ".visible .entry k()\n{\n  .reg .b32 %r<2>;\n  .reg .b16 %h<2>;\n" + line + "\n  ret;\n}\n"
  v = parse(text).kernels["k"].instructions()[0].operands[-1].value
  assert abs(v) < 2**64
  if HAVE_CUDA:
    (tmp_path / "w.ptx").write_text(text)
    assert ptxas(tmp_path / "w.ptx", "sm_90")[0]


@pytest.mark.parametrize("name", ["%r" + "9" * 15_000 + "d6", "_ZZ8cp_asyncPK6fl" + "9" * 20_000 + "x", "%" + "9" * 5000])
def test_long_digit_runs_in_names_are_linear(name):
  """decode-ptx-lines, seed 2026 (cases 308600, 624921, 648752, 883033: hangs): a register name was split into prefix
  and number by the regex (.*?)(0|[1-9]\\d*), which backtracks quadratically on a long run of digits not at the end of
  the name (15,000 digits: 3-6 s). Now linear; the undefined name is still a short located error."""
  text = _kernel(f"  .reg .b32 %r<4>;\n  mov.b32 %r1, {name};")
  t = time.perf_counter()
  with pytest.raises(PtxError) as e: parse(text)
  assert time.perf_counter() - t < 0.5 and e.value.line == 8 and len(str(e.value)) < 500, str(e.value)[:300]
