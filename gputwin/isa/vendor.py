"""AMD vendor tables, read as *data* from the pinned tinygrad wheel.

tinygrad==0.14.0 ships `runtime/autogen/amd/{rdna3,rdna4,cdna}/{enum,ins,operands,str_pcode}.py`, machine
generated from AMD's machine-readable ISA XML and the ISA manuals' pseudocode. We never import those modules:
we locate them with importlib, parse them with `ast` and keep only the facts (bit fields, opcodes, operand
types, pcode text) in gputwin's own frozen tables. The result is pickled in the user cache keyed by the wheel
version and file stamps, so a warm load is a single unpickle.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import pickle
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gputwin.errors import VendorDataError

FAMILIES = ("rdna3", "rdna4", "cdna")
_FILES = ("enum", "ins", "operands", "str_pcode")
_SCHEMA = 8  # bump when the table layout or the way it is stored changes

# Field classes in ins.py -> our field kinds. Register kinds decide how an operand value is printed/parsed.
_KINDS = {"BitField": "bits", "FixedBitField": "fixed", "EnumBitField": "op", "VGPRField": "vgpr",
          "SGPRField": "sgpr", "SrcField": "src", "SSrcField": "ssrc", "SBaseField": "sbase",
          "SRsrcField": "srsrc", "VDSTYField": "vdsty"}


@dataclass(frozen=True, slots=True)
class Field:
  name: str
  hi: int
  lo: int
  kind: str  # one of _KINDS values
  default: int | str | None = None  # an int, or a symbolic register name such as "NULL"
  value: int | None = None  # fixed bits only

  @property
  def width(self) -> int: return self.hi - self.lo + 1

  @property
  def mask(self) -> int: return (1 << self.width) - 1

  def __reduce__(self):  # the constructor, not dataclasses' per-object __setstate__ (most of a cold unpickle)
    return Field, (self.name, self.hi, self.lo, self.kind, self.default, self.value)


@dataclass(frozen=True)
class Encoding:
  name: str  # "VOP3_LIT"
  base: str  # "VOP3" (== name for base encodings)
  fields: tuple[Field, ...]
  opcode_enum: str | None  # "VOP3Op"
  opcodes: frozenset[str] | None  # canonical names allowed in this encoding; None = all of the enum

  # derived once per encoding object (the decoder asks for them for every instruction)
  @functools.cached_property
  def size(self) -> int:
    """Size in bytes, literal dword included."""
    return (max(f.hi for f in self.fields) // 32 + 1) * 4

  @functools.cached_property
  def by_name(self) -> dict[str, Field]: return {f.name: f for f in self.fields}

  @functools.cached_property
  def fixed(self) -> tuple[Field, ...]: return tuple(f for f in self.fields if f.kind == "fixed")

  @functools.cached_property
  def variant(self) -> str: return self.name[len(self.base) + 1:] if self.name != self.base else ""


@dataclass(frozen=True, slots=True)
class Operand:
  fmt: str  # vendor data format, e.g. "FMT_NUM_F32"
  bits: int  # operand width in bits
  type: str  # vendor operand type, e.g. "OPR_SRC"

  def __reduce__(self):
    return Operand, (self.fmt, self.bits, self.type)


@dataclass
class Tables:
  family: str
  encodings: dict[str, Encoding]
  enums: dict[str, dict[int, str]]  # opcode enum ("VOP1Op") -> value -> canonical name
  aliases: dict[str, dict[str, str]]  # opcode enum -> any spelling (e.g. "V_NOP_E32") -> canonical name
  operands: dict[tuple[str, str], dict[str, Operand]]  # (enum, canonical name) -> field -> operand
  pcode: dict[str, str]  # canonical instruction name -> vendor pseudocode text
  hwreg: dict[str, int] = field(default_factory=dict)
  msg: dict[str, int] = field(default_factory=dict)

  def opcode(self, enum: str, name: str) -> int:
    canon = self.aliases[enum].get(name, name)
    return self.values[enum][canon]

  @functools.cached_property
  def values(self) -> dict[str, dict[str, int]]:
    return {e: {n: v for v, n in d.items()} for e, d in self.enums.items()}

  @functools.cached_property
  def operand_enums(self) -> tuple[str, ...]:
    """The opcode enums `operands` has records for: an instruction's records are at (enum, name) for these."""
    return tuple(dict.fromkeys(e for e, _ in self.operands))

  def widths(self, name: str) -> dict[str, int]:
    """Upper-case field name -> the widest operand over every record of instruction `name` (a fresh dict)."""
    out: dict[str, int] = {}
    for e in self.operand_enums:
      for f, o in self.operands.get((e, name), {}).items():
        f = f.upper()
        out[f] = max(out.get(f, 0), o.bits)
    return out


def source_dir() -> Path:
  spec = importlib.util.find_spec("tinygrad")
  if spec is None or not spec.origin:
    raise VendorDataError("AMD ISA tables not found: install the pinned wheel with `pip install tinygrad==0.14.0` "
                          "(gputwin reads its runtime/autogen/amd/*.py files as data)")
  d = Path(spec.origin).parent / "runtime" / "autogen" / "amd"
  for fam in FAMILIES:
    for f in _FILES:
      if not (d / fam / f"{f}.py").is_file():
        raise VendorDataError(f"AMD ISA table {d / fam / f'{f}.py'} is missing: gputwin needs tinygrad==0.14.0 "
                              "(`pip install tinygrad==0.14.0`)")
  return d


@functools.cache
def _version() -> str:
  """The wheel's version from its dist-info folder name (importlib.metadata costs ~30 ms of cold start)."""
  site = source_dir().parents[3]
  try:  # a plain listing: pathlib's glob costs ~0.5 ms more on a big site-packages
    found = sorted(n for n in os.listdir(site) if n.startswith("tinygrad-") and n.endswith(".dist-info"))
  except OSError:
    found = []
  return found[-1][len("tinygrad-"):-len(".dist-info")] if found else "unknown"


def _cache_path(src: Path, family: str) -> Path:
  stamp = "|".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in (src / family / f"{f}.py" for f in _FILES))
  key = hashlib.sha256(f"{_SCHEMA}|{_version()}|{stamp}".encode()).hexdigest()[:16]
  return cache_root() / f"amd-tables-{family}-{_version()}-{key}.pkl"


def cache_root() -> Path:
  """gputwin's on-disk cache: $GPUTWIN_CACHE, else $XDG_CACHE_HOME/gputwin, else ~/.cache/gputwin."""
  xdg = os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")
  return Path(os.environ.get("GPUTWIN_CACHE") or Path(xdg) / "gputwin")


def pickled(path: Path, build):
  """`build()`'s result, cached as a pickle at `path`: loaded when present and readable, else built and stored
  atomically (a temp file renamed into place, so concurrent processes never read half a file). A read-only cache
  directory only costs the rebuild."""
  try:
    with open(path, "rb") as f:
      return pickle.load(f)
  except Exception:
    pass
  value = build()
  store(path, value)
  return value


def store(path: Path, value) -> bool:
  """Pickle `value` to `path` atomically (a temp file of this process and thread renamed into place); False when the
  cache folder is not writable."""
  try:
    tmp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
    try:
      f = open(tmp, "wb")
    except FileNotFoundError:  # the first store into this folder
      path.parent.mkdir(parents=True, exist_ok=True)
      f = open(tmp, "wb")
    with f:
      pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
    return True
  except OSError:
    return False


@functools.cache
def tables(family: str) -> Tables:
  """One family's tables (one pickle per family, so a process touching one ISA loads only that one)."""
  if family not in FAMILIES:
    raise VendorDataError(f"unknown AMD ISA family {family!r}; expected one of {', '.join(FAMILIES)}")
  src = source_dir()
  return pickled(_cache_path(src, family), lambda: _parse_family(src / family, family))


def all_tables() -> dict[str, Tables]:
  """Every family's tables; each from the on-disk cache when it is warm."""
  return {fam: tables(fam) for fam in FAMILIES}


# ---------------------------------------------------------------------------------------------- parsing


def _module(path: Path) -> ast.Module:
  try:
    return ast.parse(path.read_text(), filename=str(path))
  except (OSError, SyntaxError) as e:
    raise VendorDataError(f"cannot read AMD ISA table {path}: {e}; reinstall tinygrad==0.14.0") from e


def _bad(path: Path, node: ast.AST, what: str) -> VendorDataError:
  return VendorDataError(f"{path}:{getattr(node, 'lineno', 0)}: unexpected layout ({what}); gputwin expects the "
                         "tables of tinygrad==0.14.0")


def _parse_enums(path: Path) -> tuple[dict[str, dict[int, str]], dict[str, dict[str, str]]]:
  """Enum classes -> value->canonical name, plus every spelling -> canonical name.

  The generator emits LLVM-style `_E32`/`_E64` members and then aliases without the suffix; the plain
  spelling is canonical (it is the manual's name and the pcode key)."""
  enums: dict[str, dict[int, str]] = {}
  aliases: dict[str, dict[str, str]] = {}
  for cls in _module(path).body:
    if not isinstance(cls, ast.ClassDef):
      continue
    vals: dict[str, int] = {}
    for st in cls.body:
      if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name)):
        continue
      name, v = st.targets[0].id, st.value
      if isinstance(v, ast.Constant) and isinstance(v.value, int):
        vals[name] = v.value
      elif isinstance(v, ast.Name) and v.id in vals:
        vals[name] = vals[v.id]
      else:
        raise _bad(path, st, f"enum member {cls.name}.{name}")
    canon: dict[int, str] = {}
    for name, v in vals.items():  # the shortest spelling of a value is canonical (V_NOP over V_NOP_E32)
      if v not in canon or len(name) < len(canon[v]):
        canon[v] = name
    enums[cls.name] = canon
    aliases[cls.name] = {n: canon[v] for n, v in vals.items()}
  return enums, aliases


def _const(node: ast.AST) -> int | str:
  if isinstance(node, ast.Constant) and isinstance(node.value, int):
    return node.value
  if isinstance(node, ast.Name):
    return node.id
  raise ValueError(ast.dump(node))


def _parse_ins(path: Path, aliases: dict[str, dict[str, str]]) -> dict[str, Encoding]:
  encs: dict[str, Encoding] = {}
  for cls in _module(path).body:
    if not isinstance(cls, ast.ClassDef):
      continue
    base = cls.bases[0].id if isinstance(cls.bases[0], ast.Name) else ""
    inherited = encs[base].fields if base in encs else ()
    opcode_enum = encs[base].opcode_enum if base in encs else None
    opcodes = encs[base].opcodes if base in encs else None
    mine: dict[str, Field] = {}
    for st in cls.body:
      if not isinstance(st, ast.Assign):
        continue
      name, call = st.targets[0].id, st.value
      if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in _KINDS):
        raise _bad(path, st, f"field {cls.name}.{name}")
      kind = _KINDS[call.func.id]
      a = call.args
      hi, lo = a[0].value, a[1].value
      kw = {k.arg: _const(k.value) for k in call.keywords}
      if kind == "fixed":
        mine[name] = Field(name, hi, lo, kind, value=a[2].value)
      elif kind == "op":
        opcode_enum = a[2].id
        opcodes = frozenset(aliases[opcode_enum][e.attr] for e in a[3].elts) if len(a) > 3 else None
        mine[name] = Field(name, hi, lo, kind)
      else:
        mine[name] = Field(name, hi, lo, kind, default=kw.get("default"))
    fields = [mine.pop(f.name, f) for f in inherited] + list(mine.values())
    root = encs[base].base if base in encs else cls.name
    encs[cls.name] = Encoding(cls.name, root, tuple(fields), opcode_enum, opcodes)
  return encs


def _parse_dict(path: Path, var: str) -> ast.Dict:
  for st in _module(path).body:
    if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and st.targets[0].id == var:
      if isinstance(st.value, ast.Dict):
        return st.value
  raise VendorDataError(f"{path}: no dict {var}; gputwin expects the tables of tinygrad==0.14.0")


def _key(node: ast.AST, aliases: dict[str, dict[str, str]]) -> tuple[str, str]:
  assert isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
  enum = node.value.id
  return enum, aliases[enum].get(node.attr, node.attr)


def _parse_family(d: Path, fam: str) -> Tables:
  enums, aliases = _parse_enums(d / "enum.py")
  encs = _parse_ins(d / "ins.py", aliases)
  # Equal values become one object (pickle then stores each once: ~140 distinct Operands of ~4200, ~150 Fields of ~500)
  one: dict = {}
  same = lambda v: one.setdefault(v, v)
  encs = {n: Encoding(e.name, e.base, tuple(map(same, e.fields)), e.opcode_enum, e.opcodes) for n, e in encs.items()}
  operands: dict[tuple[str, str], dict[str, Operand]] = {}
  for k, v in zip(*(lambda n: (n.keys, n.values))(_parse_dict(d / "operands.py", "OPERANDS"))):
    ops = {}
    for fk, fv in zip(v.keys, v.values):
      fmt, bits, typ = fv.elts
      ops[same(fk.value)] = same(Operand(same(fmt.attr), bits.value, same(typ.attr)))
    operands[_key(k, aliases)] = ops
  pcode: dict[str, str] = {}
  for k, v in zip(*(lambda n: (n.keys, n.values))(_parse_dict(d / "str_pcode.py", "PCODE"))):
    pcode[_key(k, aliases)[1]] = v.value
  def named(e: str) -> dict[str, int]:  # every spelling of a non-opcode enum, by value
    vals = {n: v for v, n in enums.pop(e, {}).items()}
    return {n: vals[c] for n, c in aliases.pop(e, {}).items()}
  hwreg, msg = named("HWREG"), named("MSG")
  return Tables(fam, encs, enums, aliases, operands, pcode, hwreg, msg)
