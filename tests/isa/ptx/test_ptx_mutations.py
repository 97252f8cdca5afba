"""Accept/reject agreement with ptxas on mutated nvcc output: a dropped token, a swapped opcode/modifier/type, a wrong
operand count, an undefined register or label. Where ptxas rejects, the parser rejects on the line ptxas names;
where ptxas accepts, the parser accepts. Seeds are fixed; the CI campaign is small, the slow one large."""
from __future__ import annotations

import itertools
import random

import pytest
from ptx_oracle import needs_cuda, ptxas, ptxas_line
from ptxmut import KINDS, mutate

from gputwin.isa.ptx import PtxError, parse


def campaign(ptx_modules, tmp_path, arches: tuple[str, ...], per_kind: int, seed: int) -> tuple[int, list[str]]:
  """Run the mutants; (count, disagreements described)."""
  bad, n = [], 0
  for v, path in sorted(ptx_modules.items()):
    if v[1] not in arches or v[2] != "-O3": continue
    text = path.read_text()
    for kind in KINDS:
      for k in range(per_kind):
        mt = mutate(text, kind, random.Random(f"{v[0]}:{v[1]}:{kind}:{k}:{seed}"))
        if mt is None: continue
        n += 1
        p = tmp_path / "mutant.ptx"
        p.write_text(mt)
        ok, err = ptxas(p, v[1])
        if ok is None: continue  # ptxas crashed: no verdict to agree with
        try:
          parse(mt, str(p)); ours, line = True, None
        except PtxError as e: ours, line = False, e.line
        where = f"{v[0]} {v[1]} {kind} #{k}"
        if ok != ours: bad.append(f"{where}: ptxas {'accepts' if ok else 'rejects: ' + err}; we do not")
        elif not ok and ptxas_line(err) not in (None, line):
          bad.append(f"{where}: ptxas says line {ptxas_line(err)}, we {line}")
  return n, bad


@needs_cuda
def test_mutants_agree_with_ptxas(ptx_modules, tmp_path):
  n, bad = campaign(ptx_modules, tmp_path, ("sm_90",), 2, seed=0)
  assert n > 200 and not bad, "\n".join(bad)


@needs_cuda
@pytest.mark.slow
def test_mutants_agree_with_ptxas_large(ptx_modules, tmp_path):
  n, bad = campaign(ptx_modules, tmp_path, ("sm_80", "sm_90"), 25, seed=1)
  assert n > 5000 and not bad, "\n".join(bad[:50])


def fragment_cases() -> list[str]:
  """wmma.load and mma.sync lines with fragments of 1, 2, 4 or 8 registers: ptxas accepts exactly the right length."""
  vec = lambda p, n: "{" + ", ".join(f"%{p}{i + 1}" for i in range(n)) + "}"
  reg = lambda t: "fd" if t == "f64" else "f" if t == "f32" else "r"
  out = []
  for k, (role, shape, t) in enumerate(itertools.product("abc", ("m16n16k16", "m32n8k16", "m8n32k16"),
                                                          ("f16", "bf16", "s8", "f32", "tf32"))):
    if k % 2: continue
    out += [f"wmma.load.{role}.sync.aligned.{'col' if role == 'b' else 'row'}.{shape}.global.{t} {vec(reg(t), n)}, "
            "[%rd1], %r30;" for n in (1, 2, 4, 8)]
  for shape, d, a, b, c in (("m16n8k16", "f32", "f16", "f16", "f32"), ("m16n8k8", "f32", "tf32", "tf32", "f32"),
                            ("m16n8k16", "f32", "bf16", "bf16", "f32"), ("m16n8k32", "s32", "s8", "u8", "s32"),
                            ("m8n8k4", "f64", "f64", "f64", "f64"), ("m16n8k32", "f32", "e4m3", "e5m2", "f32")):
    for k, (nd, na, nb, nc) in enumerate(itertools.product((1, 2, 4), repeat=4)):
      if k % 9 == 0:
        out.append(f"mma.sync.aligned.{shape}.row.col.{d}.{a}.{b}.{c} {vec(reg(d), nd)}, {vec(reg(a), na)}, "
                   f"{vec(reg(b), nb)}, {vec(reg(c), nc)};")
  return out


@needs_cuda
def test_matrix_fragment_lengths_agree_with_ptxas(tmp_path):
  bad = []
  for line in fragment_cases():
    text = (".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n  .reg .b32 %r<40>;\n"
            f"  .reg .f32 %f<40>;\n  .reg .f64 %fd<40>;\n  .reg .b64 %rd<4>;\n  {line}\n  ret;\n}}\n")
    (tmp_path / "frag.ptx").write_text(text)
    ok = ptxas(tmp_path / "frag.ptx", "sm_90")[0]
    try: parse(text); ours = True
    except PtxError: ours = False
    if ok != ours: bad.append(f"ptxas {'accepts' if ok else 'rejects'}: {line}")
  assert not bad, "\n".join(bad)
