"""A small MessagePack codec for AMDGPU metadata notes (NT_AMDGPU_METADATA), so gputwin needs no extra dependency.

Covers the whole format except extension types (decoded as ``(type, bytes)`` tuples, encoded back the same way).
The encoder picks the shortest form for every value, the same choice LLVM's msgpack writer makes, so a note
decoded and re-encoded comes back byte-identical.
"""
from __future__ import annotations

import struct

from gputwin.errors import GputwinError


class MsgpackError(GputwinError):
  """Bytes that are not valid MessagePack, or a value that has no MessagePack form."""


# first byte -> (kind, length-field format or fixed payload format)
_FIXED = {0xc0: None, 0xc2: False, 0xc3: True}
_NUM = {0xca: ">f", 0xcb: ">d", 0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h", 0xd2: ">i",
        0xd3: ">q"}
_LEN = {0xc4: ("bin", ">B"), 0xc5: ("bin", ">H"), 0xc6: ("bin", ">I"), 0xd9: ("str", ">B"), 0xda: ("str", ">H"),
        0xdb: ("str", ">I"), 0xdc: ("arr", ">H"), 0xdd: ("arr", ">I"), 0xde: ("map", ">H"), 0xdf: ("map", ">I"),
        0xc7: ("ext", ">B"), 0xc8: ("ext", ">H"), 0xc9: ("ext", ">I")}
_FIXEXT = {0xd4: 1, 0xd5: 2, 0xd6: 4, 0xd7: 8, 0xd8: 16}


def unpackb(data: bytes) -> object:
  """Decode exactly one MessagePack value filling ``data``; maps become dicts, arrays lists, str str, bin bytes."""
  data = bytes(data)
  pos, depth = 0, 0

  def take(n: int) -> bytes:
    nonlocal pos
    if n < 0 or pos + n > len(data): raise MsgpackError(f"truncated at byte {pos}: need {n} more")
    pos += n
    return data[pos - n:pos]

  def value() -> object:
    nonlocal depth
    b = take(1)[0]
    if b <= 0x7f: return b
    if b >= 0xe0: return b - 0x100
    if b in _FIXED: return _FIXED[b]
    if b in _NUM: fmt = _NUM[b]; return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
    if b in _FIXEXT: n = _FIXEXT[b]; return (struct.unpack(">b", take(1))[0], take(n))
    if 0xa0 <= b <= 0xbf: kind, n = "str", b & 0x1f
    elif 0x90 <= b <= 0x9f: kind, n = "arr", b & 0x0f
    elif 0x80 <= b <= 0x8f: kind, n = "map", b & 0x0f
    elif b in _LEN: kind, fmt = _LEN[b]; n = struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
    else: raise MsgpackError(f"byte {pos - 1}: {b:#04x} is not a MessagePack type")
    if kind == "str":
      try: return take(n).decode()
      except UnicodeDecodeError as e: raise MsgpackError(f"byte {pos - n}: string is not UTF-8 ({e.reason})") from None
    if kind == "bin": return take(n)
    if kind == "ext": t = struct.unpack(">b", take(1))[0]; return (t, take(n))
    if n > len(data) - pos: raise MsgpackError(f"byte {pos}: {kind} of {n} items cannot fit in {len(data) - pos} bytes")
    depth += 1
    if depth > 64: raise MsgpackError(f"byte {pos}: nesting deeper than 64")
    if kind == "arr": out: object = [value() for _ in range(n)]
    else:
      out = {}
      for _ in range(n):
        k = value()
        if isinstance(k, (list, dict)): raise MsgpackError(f"byte {pos}: map key must be a scalar")
        out[k] = value()
    depth -= 1
    return out

  v = value()
  if pos != len(data): raise MsgpackError(f"{len(data) - pos} trailing bytes after the value")
  return v


def _head(small: int, n: int, fix: int | None, codes: tuple[int, int, int]) -> bytes:
  if fix is not None and n < small: return bytes([fix | n])
  for code, fmt, lim in zip(codes, (">B", ">H", ">I"), (1 << 8, 1 << 16, 1 << 32)):
    if code and n < lim: return bytes([code]) + struct.pack(fmt, n)
  raise MsgpackError(f"length {n} too large")


def packb(v: object) -> bytes:
  """Encode ``v`` (None, bool, int, float, str, bytes, list/tuple, dict, or (ext_type, bytes)) in the shortest form."""
  out = bytearray()

  def put(v: object) -> None:
    if v is None or isinstance(v, bool): out.append({None: 0xc0, False: 0xc2, True: 0xc3}[v])
    elif isinstance(v, int):
      if 0 <= v <= 0x7f or -32 <= v < 0: out.append(v & 0xff)
      elif v >= 0:
        for code, fmt, lim in ((0xcc, ">B", 8), (0xcd, ">H", 16), (0xce, ">I", 32), (0xcf, ">Q", 64)):
          if v < 1 << lim: out.extend(bytes([code]) + struct.pack(fmt, v)); break
        else: raise MsgpackError(f"integer {v} does not fit in 64 bits")
      else:
        for code, fmt, lim in ((0xd0, ">b", 7), (0xd1, ">h", 15), (0xd2, ">i", 31), (0xd3, ">q", 63)):
          if v >= -(1 << lim): out.extend(bytes([code]) + struct.pack(fmt, v)); break
        else: raise MsgpackError(f"integer {v} does not fit in 64 bits")
    elif isinstance(v, float): out.extend(b"\xcb" + struct.pack(">d", v))
    elif isinstance(v, str): b = v.encode(); out.extend(_head(32, len(b), 0xa0, (0xd9, 0xda, 0xdb)) + b)
    elif isinstance(v, (bytes, bytearray)): out.extend(_head(0, len(v), None, (0xc4, 0xc5, 0xc6)) + bytes(v))
    elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], int) and isinstance(v[1], (bytes, bytearray)):
      t, d = v
      fix = {1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8}.get(len(d))
      out.extend((bytes([fix]) if fix else _head(0, len(d), None, (0xc7, 0xc8, 0xc9))) + struct.pack(">b", t) + d)
    elif isinstance(v, (list, tuple)):
      out.extend(_head(16, len(v), 0x90, (0, 0xdc, 0xdd)))
      for x in v: put(x)
    elif isinstance(v, dict):
      out.extend(_head(16, len(v), 0x80, (0, 0xde, 0xdf)))
      for k, x in v.items(): put(k); put(x)
    else: raise MsgpackError(f"cannot encode {type(v).__name__} as MessagePack")

  put(v)
  return bytes(out)
