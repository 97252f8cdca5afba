"""Build `tables.json` (the Adreno ir3 encodings) from Mesa's isaspec XML.

    python -m gputwin.isa.ir3.gen_tables [ISA_DIR]     # default ../shared/vendor/ir3/mesa-25.0.7/src/freedreno/isa

Reads the isaspec format (docs/isaspec.rst): bitsets with their parent, `<gen min/max>`, `<pattern>` bits (0/1/x),
cases (`<override>` with its expression, then the default), each case's `<display>` template and its fields
(`<field>`, `<derived>`, `<assert>`, with `<param>` renames), `<enum>` value tables and `<expr>` expressions. Writes
facts only, resolved the way the format defines them: a bitset's match/mask/dontcare are its own patterns merged with
its ancestors', its gen range is the intersection with its ancestors', and each hierarchy root lists its leaves.
Expressions are parsed from their C-like text into prefix trees of ours (see spec.py for the node names). Docs,
comments and `<encode>` maps (C code of Mesa's compiler) are not copied.
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "tables.json"
DEFAULT_DIR = HERE.parents[2] / ".." / "shared" / "vendor" / "ir3" / "mesa-25.0.7" / "src" / "freedreno" / "isa"
GEN_MAX = (1 << 32) - 1
BUILTIN = {"branch", "absbranch", "int", "uint", "hex", "offset", "uoffset", "float", "bool", "bool_inv", "custom"}

# ---- C expression text -> prefix tree -------------------------------------------------------------------------
_TOK = re.compile(r"\s*(?:(0x[0-9a-fA-F]+|\d+)(?:ULL|UL|U|LL|L)?|\{(\w+)\}|(ISA_GPU_ID\(\))"
                  r"|(\|\||&&|==|!=|<=|>=|<<|>>|[-+*/%|&^!~<>()?:]))")
_BIN = [("?",), ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"),
        ("+", "-"), ("*", "/", "%")]


def parse_expr(text: str) -> list | int:
  text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).strip()
  toks, pos = [], 0
  while pos < len(text):
    m = _TOK.match(text, pos)
    if not m or m.end() == pos:
      if text[pos:].strip() == "":
        break
      raise ValueError(f"bad expression text at {text[pos:]!r}")
    pos = m.end()
    toks.append(("num", int(m[1], 0)) if m[1] else ("field", m[2]) if m[2] else ("gpu", 0) if m[3] else ("op", m[4]))
  i = 0

  def peek(): return toks[i] if i < len(toks) else ("end", None)

  def unary():
    nonlocal i
    k, v = peek()
    i += 1
    if k == "num": return v
    if k == "field": return ["field", v]
    if k == "gpu": return ["gpu"]
    if (k, v) == ("op", "("):
      e = binary(0)
      assert peek() == ("op", ")"), text
      i += 1
      return e
    if k == "op" and v in "!~-": return [v, unary()]
    raise ValueError(f"bad expression {text!r}")

  def binary(lvl):
    nonlocal i
    if lvl == len(_BIN): return unary()
    lhs = binary(lvl + 1)
    while peek()[0] == "op" and peek()[1] in _BIN[lvl]:
      op = peek()[1]
      i += 1
      if op == "?":
        a = binary(0)
        assert peek() == ("op", ":"), text
        i += 1
        lhs = ["?", lhs, a, binary(lvl)]
      else:
        lhs = [op, lhs, binary(lvl + 1)]
    return lhs

  e = binary(0)
  assert i == len(toks), text
  return e


# ---- XML -> tables ----------------------------------------------------------------------------------------------
def _range(x) -> tuple[int, int]:
  if "pos" in x.attrib: return int(x.get("pos")), int(x.get("pos"))
  return int(x.get("low")), int(x.get("high"))


def _pattern(x) -> tuple[int, int, int]:
  lo, hi = _range(x)
  s = x.text.strip()
  assert len(s) == hi - lo + 1, (x.attrib, s)
  match = int(s.replace("x", "0"), 2) << lo
  dc = int("".join("1" if c == "x" else "0" for c in s), 2) << lo
  return match, dc, ((1 << (hi - lo + 1)) - 1) << lo


class _Gen:
  def __init__(self, isa_dir: Path):
    self.dir, self.exprs, self.enums, self.bitsets, self.anon = isa_dir, {}, {}, [], 0

  def expr(self, x) -> str:
    name = x.get("name")
    if name is None:
      name, self.anon = f"anon_{self.anon}", self.anon + 1
    self.exprs[name] = parse_expr(x.text)
    return name

  def file(self, path: Path):
    root = ET.parse(path).getroot()
    for imp in root.findall("import"):
      self.file(self.dir / imp.get("file"))
    for e in root.findall("expr"):
      self.expr(e)
    assert not root.findall("template"), "display <template>s are not supported"
    for e in root.findall("enum"):
      self.enums[e.get("name")] = [[int(v.get("val"), 0), v.get("display")] for v in e.findall("value")]
    for b in root.findall("bitset"):
      self.bitset(b)

  def case(self, x, expr: str | None) -> dict:
    fields: dict[str, dict] = {}
    for d in x.findall("derived"):
      ex = d.get("expr") or self.expr(_one(d.findall("expr")))
      f = {"name": d.get("name"), "low": 0, "high": int(d.get("width", 1)) - 1, "type": d.get("type"), "expr": ex}
      fields[f["name"]] = self.typed(f, d)
    for n, a in enumerate(x.findall("assert")):
      m, dc, _ = _pattern(a)
      lo, hi = _range(a)
      assert dc == 0
      name = f"#assert{len(fields)}"
      fields[name] = {"name": name, "low": lo, "high": hi, "type": "assert", "val": m >> lo}
    for fx in x.findall("field"):
      lo, hi = _range(fx)
      f = {"name": fx.get("name"), "low": lo, "high": hi, "type": fx.get("type")}
      params = [[p.get("name"), p.get("as", p.get("name"))] for p in fx.findall("param")]
      if params: f["params"] = params
      fields[f["name"]] = self.typed(f, fx)
    disp = None
    for d in x.findall("display"):
      disp = (d.text or "").strip()
    return {"expr": expr, "display": disp, "fields": list(fields.values())}

  def typed(self, f: dict, x) -> dict:
    if x.get("display") is not None: f["display"] = x.get("display").strip()
    if x.get("call") == "true": f["call"] = True
    return f

  def bitset(self, x):
    gmin, gmax = 0, GEN_MAX
    for g in x.findall("gen"):
      gmin, gmax = int(g.get("min", gmin)), int(g.get("max", gmax))
    match = dc = mask = 0
    for p in x.findall("pattern"):
      m, d, k = _pattern(p)
      match, dc, mask = match | m, dc | d, mask | k
    cases = []
    for o in x.findall("override"):
      cases.append(self.case(o, o.get("expr") or self.expr(_one(o.findall("expr")))))
    cases.append(self.case(x, None))
    # constant values the encoder writes for fields that the text may not show (<encode><map>N</map>)
    defaults = {m.get("name"): int(m.text.strip(), 0) for e in x.findall("encode") for m in e.findall("map")
                if re.fullmatch(r"\s*(0x[0-9a-fA-F]+|\d+)\s*", m.text or "")}
    self.bitsets.append({"name": x.get("displayname", x.get("name")), "key": x.get("name"), "extends": x.get("extends"),
                         "size": int(x.get("size")) if x.get("size") else None, "gen": [gmin, gmax],
                         "match": match, "dontcare": dc, "mask": mask, "cases": cases,
                         "defaults": defaults})

  def resolve(self) -> dict:
    by_key = {}
    for i, b in enumerate(self.bitsets):
      by_key[b["key"]] = i   # a later definition of a name wins, as in Mesa's isa.py
    extended = {b["extends"] for b in self.bitsets if b["extends"]}
    out = []
    for i, b in enumerate(self.bitsets):
      p = by_key[b["extends"]] if b["extends"] else None
      out.append({"name": b["name"], "parent": p, "size": b["size"], "cases": b["cases"], "gen": list(b["gen"]),
                  "match": b["match"], "dontcare": b["dontcare"], "mask": b["mask"],
                  "leaf": b["key"] not in extended, **({"defaults": b["defaults"]} if b["defaults"] else {})})
    done: set[int] = set()

    def merge(i):   # a bitset's pattern and gen range include its ancestors' (parents may come later in the files)
      b = out[i]
      if i in done or b["parent"] is None: return b
      pb = merge(b["parent"])
      b["match"] |= pb["match"]; b["dontcare"] |= pb["dontcare"]; b["mask"] |= pb["mask"]
      b["gen"] = [max(b["gen"][0], pb["gen"][0]), min(b["gen"][1], pb["gen"][1])]
      b["size"] = pb["size"]
      done.add(i)
      return b
    for i in range(len(out)): merge(i)
    roots: dict[str, list[int]] = {}
    order: dict[str, list[int]] = {}
    for i, b in enumerate(self.bitsets):
      order.setdefault(b["key"], []).append(i)
    for key, idxs in order.items():
      for i in idxs:
        if not out[i]["leaf"]: continue
        r = i
        while out[r]["parent"] is not None: r = out[r]["parent"]
        roots.setdefault(self.bitsets[r]["key"], []).append(i)
    for b in out:
      for c in b["cases"]:
        for f in c["fields"]:
          t = f["type"]
          f["kind"] = ("assert" if t == "assert" else t if t in BUILTIN else "enum" if t in self.enums
                       else "bitset" if t in roots else None)
          assert f["kind"], f"{b['name']}.{f['name']}: unknown type {t}"
    for b in out:
      for k in ("match", "dontcare", "mask"): b[k] = f"{b[k]:x}"
    return {"roots": {k: v for k, v in roots.items()}, "bitsets": out, "enums": self.enums, "exprs": self.exprs}


def _one(xs):
  assert len(xs) == 1
  return xs[0]


def main(argv: list[str]) -> None:
  d = Path(argv[0]) if argv else DEFAULT_DIR
  g = _Gen(d)
  g.file(d / "ir3.xml")
  t = g.resolve()
  t = {"source": "Mesa 25.0.7 src/freedreno/isa/ir3*.xml (isaspec), via gputwin/isa/ir3/gen_tables.py", **t}
  text = json.dumps(t, separators=(",", ":"))
  OUT.write_text(text.replace('{"name"', '\n{"name"') + "\n")
  print(f"wrote {OUT}: {len(t['bitsets'])} bitsets, {sum(map(len, t['roots'].values()))} leaves, "
        f"{len(t['exprs'])} expressions, {len(t['enums'])} enums")


if __name__ == "__main__":
  main(sys.argv[1:])
