"""The import graph of gputwin, read from the source with `ast`: layers import downward only, no module imports
itself back through others (no cycles), and no module reaches into another module's private names."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gputwin"
# bottom to top; a layer may import itself and anything before it (cli.py and demo.py sit on top of all)
LAYERS = ("errors", "abi", "isa", "pcode", "emu", "mock", "runtime", "compiler", "verify", "demo", "cli")


def _modules() -> dict[str, pathlib.Path]:
  out = {}
  for p in ROOT.rglob("*.py"):
    parts = p.relative_to(ROOT.parent).with_suffix("").parts
    out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
  return out


MODULES = _modules()


def _package(mod: str) -> str:
  return mod if MODULES[mod].name == "__init__.py" else mod.rpartition(".")[0]


def _base(mod: str, node: ast.ImportFrom) -> str:
  """The module a `from X import ...` in `mod` names (relative imports resolved)."""
  if not node.level:
    return node.module or ""
  pkg = _package(mod).split(".")
  return ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))


def _imports(mod: str) -> list[tuple[str, list[str], int]]:
  """(imported module, names taken from it, line) for each import statement of `mod`; a `from P import m` of a
  submodule m counts as importing P.m. Imports inside functions count too: a lazy import is still a dependency."""
  tree, out = ast.parse(MODULES[mod].read_text()), []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out += [(a.name, [], node.lineno) for a in node.names if a.name in MODULES]
    elif isinstance(node, ast.ImportFrom):
      base = _base(mod, node)
      for a in node.names:
        sub = f"{base}.{a.name}"
        if sub in MODULES:
          out.append((sub, [], node.lineno))
        elif base in MODULES:
          out.append((base, [a.name], node.lineno))
  return out


def _layer(mod: str) -> int:
  return LAYERS.index(mod.split(".")[1])


def _edges() -> dict[str, set[str]]:
  """Module -> modules it imports at load time, leaving out its own ancestor packages (importing a submodule
  always runs its package first, so those edges are no dependency of the code)."""
  return {m: {d for d, _, _ in _imports(m) if d != m and not m.startswith(d + ".")} for m in MODULES}


def test_layers_import_downward():
  bad = [f"{m} -> {d}" for m, ds in _edges().items() for d in ds if _layer(d) > _layer(m)]
  assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
  g, seen, stack, cycles = _edges(), {}, [], []

  def visit(v):  # iterative-enough DFS; the graph has ~100 nodes
    seen[v] = 1
    stack.append(v)
    for w in sorted(g[v]):
      if seen.get(w) == 1:
        cycles.append(" -> ".join(stack[stack.index(w):] + [w]))
      elif w not in seen:
        visit(w)
    stack.pop()
    seen[v] = 2

  for v in sorted(g):
    if v not in seen:
      visit(v)
  assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_names_across_modules():
  bad = []
  for m in MODULES:
    for d, names, line in _imports(m):
      bad += [f"{MODULES[m].relative_to(ROOT.parent)}:{line}: {n} from {d}" for n in names
              if n.startswith("_") and not n.startswith("__")]
    # `from gputwin.emu import core` (or `from . import core`, `import gputwin.emu.core as core`) then `core._x`
    tree, mods = ast.parse(MODULES[m].read_text()), {}
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        mods.update({a.asname: a.name for a in node.names if a.asname})
      elif isinstance(node, ast.ImportFrom):
        base = _base(m, node)
        mods.update({a.asname or a.name: f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES})
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_")
          and not node.attr.startswith("__") and mods.get(node.value.id, m) != m):
        bad.append(f"{MODULES[m].relative_to(ROOT.parent)}:{node.lineno}: {node.value.id}.{node.attr}")
  assert not bad, "private names used across modules:\n" + "\n".join(sorted(set(bad)))


def test_every_module_in_a_layer():
  stray = [m for m in MODULES if m != "gputwin" and m.split(".")[1] not in LAYERS]
  assert not stray, f"modules in no layer (add them to LAYERS): {stray}"
