"""The native tier's code cache on disk (gputwin/emu/README.md, "Native tier"): a compiled block's host object code,
keyed by everything that decides it, so that another process (a CI re-run, a pytest-xdist worker) loads it instead
of compiling. Files live in `cache_root()/native` (`GPUTWIN_NATIVE_CACHE`: another folder, or 0 for none), are
written atomically (vendor.store), kept under `GPUTWIN_NATIVE_CACHE_MB` (oldest out) and checked on reading: an
unreadable, truncated or foreign file is a miss, rewritten by the next compile."""
from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import os
import pickle
from pathlib import Path

import numpy as np

from gputwin.isa.vendor import cache_root, store
from gputwin.pcode import Semantics

FORMAT = 1  # of the files; part of every key
LIMIT_MB = 256


def folder() -> Path | None:
  """Where blocks are cached, or None when the cache is off."""
  v = os.environ.get("GPUTWIN_NATIVE_CACHE", "")
  if v.lower() in ("0", "off", "no", "false"):
    return None
  return Path(v) if v else cache_root() / "native"


# what decides a block's code from its ops, under gputwin/: this tier and its prelude, the register/operand model,
# AMD's computed operand codes, pcode (bodies and their LLVM lowering); with the frontend's package (its special inputs)
SOURCES = ("emu/native", "emu/binding.py", "emu/program.py", "emu/amd/decode.py", "pcode")


@functools.cache
def _sources(frontend: str) -> str:
  """Hash of SOURCES and of the frontend's package (a module name, e.g. gputwin.emu.amd)."""
  root = Path(__file__).resolve().parents[2]
  h = hashlib.sha256(str(FORMAT).encode())
  for sub in SOURCES + (str(Path(*frontend.split(".")[1:])),):
    p = root / sub
    for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
      if f.suffix in (".py", ".ll"):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
  return h.hexdigest()


@functools.cache
def _host() -> str:
  """LLVM, the host target and its CPU features: what decides the machine code beyond the IR."""
  import llvmlite
  import llvmlite.binding as llvm
  return "|".join([llvmlite.__version__, ".".join(map(str, llvm.llvm_version_info)), llvm.get_default_triple(),
                   llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()])


class _Unstable(Exception):
  """A value without a text that is the same in every process (the block is then compiled, never cached)."""


def _text(x, out: list) -> None:
  """A canonical text of an op's fields: the same in every process for equal values (dicts and sets sorted)."""
  if x is None or isinstance(x, (bool, int, float, str, bytes)):
    out.append(repr(x))
  elif isinstance(x, np.generic):
    out.append(f"{type(x).__name__}({x.item()!r})")
  elif isinstance(x, np.ndarray):
    out.append(f"ndarray({x.dtype.str},{x.shape},{x.tobytes().hex()})")
  elif isinstance(x, enum.Enum):
    out.append(f"{type(x).__name__}.{x.name}")
  elif isinstance(x, (list, tuple, slice)):
    if isinstance(x, slice):
      out.append("slice")
      x = (x.start, x.stop, x.step)
    out.append("(")
    for y in x:
      _text(y, out)
      out.append(",")
    out.append(")")
  elif isinstance(x, dict):
    items = []
    for k, v in x.items():
      if isinstance(k, str) and k.startswith("_"):  # Op.info memos (binding.va_bits, the checkers' plans ...):
        continue  # computed from the op on first use, by whichever tier ran it first: never part of a key
      part = []
      _text(k, part)
      part.append(":")
      _text(v, part)
      items.append("".join(part))
    out.append("{" + ",".join(sorted(items)) + "}")
  elif isinstance(x, (set, frozenset)):
    out.append("{" + ",".join(sorted(_join(y) for y in x)) + "}")
  elif isinstance(x, Semantics):  # its pcode program is parsed from these (the parser's sources: _sources)
    out.append(f"sem({x.family},{x.name},")
    _text(x.text, out)
    out.append(")")
  elif dataclasses.is_dataclass(x) and not isinstance(x, type):
    out.append(type(x).__name__ + "(")
    for f in dataclasses.fields(x):
      if f.repr:  # (an Op's decoded AMD instruction by its encoding's fields: a lowering may read a modifier, as
        out.append(f.name + "=")  # the matrix ops' neg_lo and CBSZ/ABID/BLGP, that no binding carries; the other
        v = getattr(x, f.name)    # frontends' instructions are their bindings)
        _text(getattr(v, "fields", None) if f.name == "inst" else v, out)
        out.append(",")
    out.append(")")
  else:
    raise _Unstable(type(x).__name__)


def _join(x) -> str:
  out = []
  _text(x, out)
  return "".join(out)


def _op_text(op) -> str:
  """An op's canonical text, kept in its Op.info memo (an op's facts are fixed once bound; a block's key is asked at
  first sight and again when it compiles, and the ops recur in the blocks of several PCs)."""
  info = op.info
  t = info.get("_key")
  if t is None:
    t = info["_key"] = _join(op)
  return t


def key(ops: list, lanes: int, family: str, arch: str, frontend, variant: str) -> str | None:
  """The cache key of a block compiled from `ops` (its PCs, operands, semantics, the wave size, target and
  frontend, the compile `variant`), this gputwin's sources and the host's LLVM; None when an op has no stable text."""
  try:
    ops_text = "\n".join(map(_op_text, ops))
  except _Unstable:
    return None
  mod = type(frontend).__module__
  h = hashlib.sha256("\n".join([str(FORMAT), _sources(mod), _host(), variant, arch, family, str(lanes),
                                f"{mod}.{type(frontend).__qualname__}", ops_text]).encode())
  return h.hexdigest()[:32]


def text_key(name: str, text: str) -> str:
  """The cache key of a hand-written module (this gputwin's IR text `text`) on this host's LLVM."""
  return hashlib.sha256("\n".join([str(FORMAT), _host(), name, text]).encode()).hexdigest()[:32]


def empty() -> bool:
  """Whether the cache holds nothing (off, or its folder missing or empty): a lookup then needs no key, whose first
  computation (LLVM's host description, the sources' hash) is most of a fresh process's first block sighting."""
  d = folder()
  if d is None:
    return True
  try:
    with os.scandir(d) as it:
      return next(it, None) is None
  except OSError:
    return True


def get(k: str):
  """(meta, object code) stored under key `k`, or None (missing, unreadable, truncated or not this key's)."""
  d = folder()
  if d is None:
    return None
  p = d / f"{k}.pkl"
  try:
    with open(p, "rb") as f:
      e = pickle.load(f)
    if not (isinstance(e, dict) and e.get("format") == FORMAT and e.get("key") == k and e["sha"] == _sha(e["meta"],
                                                                                                e["obj"])):
      return None
  except Exception:
    return None
  try:
    os.utime(p)  # recently used: kept when the folder is trimmed
  except OSError:  # (a read-only cache serves all the same)
    pass
  return e["meta"], e["obj"]


def _sha(meta, obj: bytes) -> str:
  return hashlib.sha256(repr(meta).encode() + obj).hexdigest()


_SIZE: list = [None]  # bytes this process believes the folder holds (scanned at its first store)


def put(k: str, meta, obj: bytes) -> None:
  """Store a block's object code under `k` (a read-only or full folder only costs the next process a compile)."""
  d = folder()
  if d is None:
    return
  if store(d / f"{k}.pkl", dict(format=FORMAT, key=k, meta=meta, sha=_sha(meta, obj), obj=obj)):
    if _SIZE[0] is None:
      _SIZE[0] = sum(s for _, s, _ in _files(d))
    else:
      _SIZE[0] += len(obj)
    limit = int(float(os.environ.get("GPUTWIN_NATIVE_CACHE_MB", LIMIT_MB)) * (1 << 20))
    if _SIZE[0] > limit:
      _SIZE[0] = trim(d, limit * 3 // 4)


def _files(d: Path):
  out = []
  try:
    with os.scandir(d) as it:
      for e in it:
        try:
          st = e.stat()
          out.append((e.path, st.st_size, st.st_mtime))
        except OSError:
          pass
  except OSError:
    pass
  return out


def trim(d: Path, keep: int) -> int:
  """Remove the least recently used files of `d` until at most `keep` bytes remain; returns the bytes left."""
  files = sorted(_files(d), key=lambda f: f[2])
  total = sum(s for _, s, _ in files)
  for path, size, _ in files:
    if total <= keep:
      break
    try:
      os.unlink(path)
      total -= size
    except OSError:
      pass
  return total
