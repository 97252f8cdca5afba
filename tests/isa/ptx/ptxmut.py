"""Deterministic mutations of nvcc PTX for the accept/reject agreement test against ptxas (a helper, not a test)."""
from __future__ import annotations

import random
import re

KINDS = ("drop_token", "swap_opcode", "swap_modifier", "swap_type", "operand_count", "undefined_register",
         "undefined_label")
OPCODES = ("add", "sub", "mul", "mad", "fma", "min", "max", "and", "or", "xor", "shl", "shr", "mov", "ld", "st",
           "cvt", "setp", "selp", "neg", "abs", "div", "rem", "not", "popc", "clz", "brev", "bfe", "atom", "red",
           "shfl", "vote", "bar", "sqrt", "rcp", "ex2", "addx", "lod", "mux")
TYPES = ("u8", "s8", "b8", "u16", "s16", "b16", "f16", "bf16", "u32", "s32", "b32", "f32", "u64", "s64", "b64",
         "f64", "pred", "f16x2", "b128")
_LINE = re.compile(r"^(\s*(?:@!?%\w+\s+)?)([a-z][\w.:]*)(\s*)(.*?;)(.*)$")


def instruction_lines(text: str) -> list[int]:
  """Indexes of lines that hold one instruction (what nvcc writes one per line; not `name: .callprototype ...`)."""
  return [i for i, l in enumerate(text.split("\n")) if _LINE.match(l) and not l.lstrip().startswith(".")
          and ": ." not in l and " : ." not in l]


def mutate(text: str, kind: str, rng: random.Random) -> str | None:
  """One mutant of `text` of the given kind, or None when this module offers no site for it."""
  lines = text.split("\n")
  sites = instruction_lines(text)
  if kind == "undefined_label":
    sites = [i for i in sites if re.search(r"\b(bra|brx)\b", lines[i])]
  if not sites: return None
  i = rng.choice(sites)
  m = _LINE.match(lines[i])
  pre, mnem, sp, ops, post = m.groups()
  parts = mnem.split(".")
  ops_body = ops[:-1]
  if kind == "drop_token":  # one modifier, operand token or punctuation of the line
    body = mnem + " " + ops_body
    a, b = rng.choice([(t.start(), t.end()) for t in re.finditer(r"\.[\w:]+|[^\s,{}\[\]().]+|[,{}\[\]()]", body)])
    lines[i] = pre + body[:a] + body[b:] + ";" + post
  elif kind == "swap_opcode":
    parts[0] = rng.choice(OPCODES)
    lines[i] = pre + ".".join(parts) + sp + ops + post
  elif kind in ("swap_modifier", "swap_type"):
    idx = [k for k in range(1, len(parts)) if (parts[k] in TYPES) == (kind == "swap_type")]
    if not idx: return None
    k = rng.choice(idx)
    if kind == "swap_type": parts[k] = rng.choice(TYPES)
    else:
      seen = {p for l in lines if (mm := _LINE.match(l)) for p in mm.group(2).split(".")[1:]} - set(TYPES)
      parts[k] = rng.choice(sorted(seen) + ["rn", "ftz", "sat", "wide", "lo", "hi", "global", "shared", "sync", "uni"])
    lines[i] = pre + ".".join(parts) + sp + ops + post
  elif kind == "operand_count":
    opl = _split_ops(ops_body)
    if rng.random() < 0.5 and opl: opl.pop(rng.randrange(len(opl)))
    elif opl: opl.insert(rng.randrange(len(opl) + 1), rng.choice(opl))
    else: opl = ["%r1"]
    lines[i] = pre + mnem + sp + ", ".join(opl) + ";" + post
  elif kind == "undefined_register":
    regs = re.findall(r"%[a-z]+\d+", ops_body)
    if not regs: return None
    r = rng.choice(regs)
    lines[i] = pre + mnem + sp + re.sub(re.escape(r) + r"\b", r + "999", ops_body, count=1) + ";" + post
  elif kind == "undefined_label":
    lines[i] = re.sub(r"(\$L__\w+)", r"\1_nowhere", lines[i], count=1)
  return "\n".join(lines)


def _split_ops(s: str) -> list[str]:
  out, depth, cur = [], 0, ""
  for ch in s:
    if ch in "{[(": depth += 1
    if ch in "}])": depth -= 1
    if ch == "," and depth == 0: out.append(cur.strip()); cur = ""
    else: cur += ch
  if cur.strip(): out.append(cur.strip())
  return out
