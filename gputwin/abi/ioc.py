"""What every Linux driver ABI here shares: the asm-generic/ioctl.h request encoding and C structs declared as one-line
field specs.

A spec is `"u64 a b; u32 c[4]; other_struct d"`, read left to right exactly as the C struct lays out (natural
alignment, as x86-64 gcc does); a type is a scalar name of `SCALARS` or a struct an ABI module declared before.
`declarer(namespace)` returns that module's `struct(name, spec, anon=(), union=False)`, which defines the ctypes class
in the module's namespace, so later specs and users name it like the header does.
"""
from __future__ import annotations
import ctypes
from typing import Callable

# asm-generic/ioctl.h: dir[31:30] size[29:16] type[15:8] nr[7:0]
IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2
def ioc(d: int, t: int, nr: int, size: int) -> int: return (d << 30) | (size << 16) | (t << 8) | nr
def IOC_DIR(cmd: int) -> int: return (cmd >> 30) & 3
def IOC_SIZE(cmd: int) -> int: return (cmd >> 16) & 0x3FFF
def IOC_TYPE(cmd: int) -> int: return (cmd >> 8) & 0xFF
def IOC_NR(cmd: int) -> int: return cmd & 0xFF


SCALARS = {"u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
           "s32": ctypes.c_int32, "int": ctypes.c_int32, "bool": ctypes.c_uint8, "char": ctypes.c_char,
           "handle": ctypes.c_uint32, "ptr": ctypes.c_uint64}


def fields(spec: str, namespace: dict) -> list[tuple[str, type]]:
  """'u64 a b; u32 c[4]' -> ctypes _fields_; other types are looked up in `namespace`."""
  out = []
  for group in filter(None, (g.strip() for g in spec.split(";"))):
    tname, *names = group.split()
    t = SCALARS.get(tname) or namespace[tname]
    for n in names:
      n, _, cnt = n.partition("[")
      out.append((n, t * int(cnt[:-1], 0) if cnt else t))
  return out


def declarer(namespace: dict) -> Callable[..., type]:
  """The `struct(name, spec, anon=(), union=False)` of an ABI module whose globals are `namespace`."""
  def struct(name: str, spec: str, anon: tuple[str, ...] = (), union: bool = False) -> type:
    cls = type(name, (ctypes.Union if union else ctypes.Structure,),
               {"_fields_": fields(spec, namespace), "_anonymous_": anon})
    cls.__repr__ = lambda s: f"{name}({', '.join(f'{f}={getattr(s, f)!r}' for f, _ in s._fields_ if f not in anon)})"
    namespace[name] = cls
    return cls
  return struct
