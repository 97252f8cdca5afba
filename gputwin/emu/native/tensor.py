"""PTX warp-level tensor instructions in the native tier (gputwin/emu/README.md, "Native tier"): wmma.load.{a,b,c},
wmma.store.d, wmma.mma and mma.sync, ldmatrix/stmatrix, and cp.async (checkers off), one warp at a time, bit for bit
as gputwin/emu/ptx/tensor.py runs them. The
fragment layouts are that module's (`frag`, `wmma_frag`, `_slots`), turned into constant tables here; nothing
about a layout is derived twice. The scheduler runs a block holding one only for warps whose 32 threads all stand at
it (core.run_simt, runtime.Block.whole): the interpreter's rendezvous and its partial-warp error stay its own.

Memory (wmma.load/store, .global or .shared): every element's address is the lane's base plus (row * ld + col)
elements (col-major: col * ld + row), in 64-bit arithmetic as the interpreter's uint64 arrays; all of a warp's
addresses are checked (alignment, mapping or shared window) before anything is written, and a fault returns to the
tier, which runs the instruction again on the interpreter for its error (core._refault).

Arithmetic (the accumulation model of ptx/tensor.py: the exact sum of the K products and C, rounded once to nearest
even; NaN results the canonical NaN; integers exact, wrapped or `.satfinite`-clamped to s32): elements are decoded
exactly into doubles, products are exact in double for every type taken here, and each D row is summed left to
right in doubles. A row whose terms all fit one double's window (`_window`: every term a multiple of 2**lo, every
partial sum below 2**(lo + 53)) is summed plainly, its sums exact; in any other row each step's exactness is checked
(two subtractions). A finite sum with no inexact step is the exact sum; a non-finite one is IEEE's, as the
interpreter keeps it. Otherwise (terms far apart in magnitude) the element is summed again in a fixed-point integer
wide enough for every term of the types (`_width`), then rounded with integer code. f64 operands (whose products are
not exact in double) stay interpreted."""
from __future__ import annotations

import re

import numpy as np

from gputwin.emu.native.matrix import broadcast, k_step, loop, table  # (one of each for both)
from gputwin.emu.native.runtime import (C_LDS, C_LDSZ, C_REGS, C_V, C_VSTR, C_VSTW, C_WG, F_GLOBAL, F_LDSOFF,
                                        HINT_REGION, HINTS)
from gputwin.emu.program import Src
from gputwin.emu.ptx import tensor as ref
from gputwin.pcode.llvm import Fn, Unsupported

L = 32
SHIFT = 5  # a fragment table entry: (register * 32 + lane) << SHIFT | bit offset
# element formats: (exponent bits, mantissa bits, bias, has infinities); tf32 is f32 with its low 13 bits dropped
FMT = {"f16": (5, 10, 15, True), "bf16": (8, 7, 127, True), "tf32": (8, 23, 127, True), "f32": (8, 23, 127, True),
       "e5m2": (5, 2, 15, True), "e4m3": (4, 3, 7, False)}
OUT = {"f32": (24, -149, 0x7f800000, 1 << 31, 0x7fffffff), "f16": (11, -24, 0x7c00, 1 << 15, 0x7fff)}  # (precision,
# exponent of the smallest subnormal, infinity, sign bit, the canonical NaN) of a D type


def supported(op, arch: str = "") -> None:
  """plan.supported for a tensor op: raise Unsupported unless this module runs it as the interpreter does."""
  info = op.info
  do = info.get("do")
  copy = info.get("async_copy")  # cp.async and its group bookkeeping (ptx/tensor.py _bind_cp)
  if do not in ("wmma_load", "wmma_store", "wmma_mma", "mma", "ldmatrix", "stmatrix") and not copy:
    raise Unsupported(f"tensor {do}")
  if info.get("guard") is not None:
    raise Unsupported("guarded tensor op")
  sm = int(re.sub(r"\D", "", arch) or 0)
  if info.get("sm", 0) > sm:  # (the interpreter stops: needs a later target)
    raise Unsupported("target")
  if copy:
    if do == "cp_async":
      spaces = [x.info["address"] for x in (info["dst"], info["src"])]
      if [a.space if a is not None else None for a in spaces] != ["lds", "mem"] or \
         any(t.file != "v" for a in spaces for t in a.terms):
        raise Unsupported("cp.async address space")
      if any(n is not None and not (n.file == "k" or n.file == "v" and n.dwords == 1 and not n.hi)
             for n in (info["src_size"], info["ignore"])):
        raise Unsupported("cp.async src-size or ignore-src operand")
    return
  regs = [s for rs in info["regs"] for s in rs] if do in ("mma", "wmma_mma") else list(info["regs"])
  if any(s.file != "v" or s.dwords != 1 or s.hi or s.pk or s.neg or s.abs for s in regs):
    raise Unsupported("fragment registers")
  if do in ("mma", "wmma_mma"):
    _gemm_tables(op)
    return
  if do.startswith("wmma") and ref.BITS[info["type"]] > 32:
    raise Unsupported("f64 fragment")
  a = info["at"].info["address"]
  if a is None or a.space not in ("mem", "lds") or any(t.file != "v" for t in a.terms):
    raise Unsupported("tensor address space")
  s = info.get("stride")
  if s is not None and not (isinstance(s, Src) and (s.file == "k" or s.file == "v" and s.dwords == 1 and not s.hi)):
    raise Unsupported("stride operand")


# ------------------------------------------------------------------------------------------------ tables
def _slot_regs(regs, bits: int) -> list[tuple[int, int]]:
  """(register, bit offset) of each fragment slot, in ptx/tensor.py's `_elements` order."""
  return [(k, j * bits) for k, s in enumerate(regs) for j in range(max(1, 32 * s.dwords // bits))]


def _gemm_tables(op):
  """Per matrix A, B, C: for each element (row-major) its table entry (SHIFT layout; the zero word for an element
  no slot gives, as the interpreter's zeros), and for D each (register, lane) slot's element. Unsupported for f64
  and for layouts where two slots name one element (never a form the manual defines)."""
  (R, N, K), types, regs = op.info["shape"], op.info["types"], op.info["regs"]
  if "f64" in types:
    raise Unsupported("f64 mma")
  wmma = op.info["do"] == "wmma_mma"
  coords = (lambda which, h, w, bits, n: ref.wmma_frag(h, w, n)) if wmma else \
      (lambda which, h, w, bits, n: ref.frag(which, bits, n))
  out = []
  for which, t, rs, (h, w) in zip("abc", types[1:], regs[1:], ((R, K), (K, N), (R, N))):
    bits, slots = ref.BITS[t], _slot_regs(rs, ref.BITS[t])
    n = h * w // 32
    rows, cols = (np.broadcast_to(x, (32, len(slots)))[:, :n] for x in coords(which, h, w, bits, len(slots)))
    if rows.min() < 0 or rows.max() >= h or cols.min() < 0 or cols.max() >= w or \
       np.bincount((rows * w + cols).ravel()).max() > 1:  # (every element once; np.unique imports numpy.ma, ~10 ms)
      raise Unsupported("fragment layout")
    tab = np.full(h * w, len(rs) * L << SHIFT, np.int64)  # (the zero word after the registers)
    lane = np.arange(32)[:, None]
    reg = np.array([k for k, _ in slots[:n]])[None, :]
    off = np.array([o for _, o in slots[:n]])[None, :]
    tab[(rows * w + cols).reshape(-1)] = ((reg * L + lane) << SHIFT | off).reshape(-1)
    out.append(tab)
  bits, slots = ref.BITS[types[0]], _slot_regs(regs[0], ref.BITS[types[0]])
  nd = len(slots)
  rows, cols = (np.broadcast_to(x, (32, nd)) for x in coords("c", R, N, bits, nd))
  if rows.min() < 0 or rows.max() >= R or cols.min() < 0 or cols.max() >= N:
    raise Unsupported("fragment layout")
  out.append(((rows * N + cols), slots))
  return out


def _row(comp, f, idx: int, write: bool = False) -> str:
  """Pointer to register row `idx` of warp %w."""
  comp.nv = max(comp.nv, idx + 1)
  if write:
    comp.wrote["v"] = comp.wrote.get("v", 0) | 1 << idx
  off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_VSTW)}')}, {f.op(f'mul i64 {idx}, {f.ctx(C_VSTR)}')}")
  return f.gep(f.ctxp(C_V), off)


def _copy_rows(comp, f, regs, extra: int = 0) -> str:
  """The registers' rows, whole, into a local [regs * 32 (+ extra zero words) x i32] buffer."""
  buf = f.alloca(f"[{len(regs) * L + extra} x i32], align 64")
  for k, s in enumerate(regs):
    v = f.ld(f"<{L} x i32>", _row(comp, f, s.index), ("v", s.index), ", align 4")
    f.st(f"<{L} x i32>", v, f.gep(buf, str(4 * L * k)), "tx", ", align 64")
  for k in range(extra):
    f.st("i32", "0", f.gep(buf, str(4 * (len(regs) * L + k))), "tx")
  return buf


def lower(comp, i: int, op, f) -> str:
  """@inst{i} (and its tables and helpers) for tensor op `op` on one warp. `comp`: the block's codegen.Compiler;
  `f`: a fresh codegen.Fn."""
  f.globals = []
  if op.info["do"] in ("mma", "wmma_mma"):
    _gemm(comp, i, op, f)
  elif op.info["do"] == "cp_async":
    _copy(comp, i, op, f)
  elif not op.info.get("async_copy"):  # (commit_group, wait_group, wait_all: what they keep is the checkers' alone;
    _memory(comp, i, op, f)  # with the checkers on they run interpreted, checks.Checks.interpreted)
  comp.bump_pc(f, op)
  text = comp.finish(f, i, str(L))
  return "\n".join(f.globals) + "\n" + text


# ------------------------------------------------------------------------------------------------ memory
def _copy(comp, i: int, op, f) -> None:
  """cp.async (ptx/tensor.py `_cp_async`: the copy happens at issue) for warp %w's 32 threads: each thread's first
  src-size bytes (at most cp-size; the rest zero) from global memory to its shared-memory destination. First every
  thread's addresses are checked as the interpreter checks them (both cp-size-aligned, the bytes read mapped, the
  destination in the CTA's window), then the copies are made: a fault leaves before anything is written."""
  if comp.log:
    raise Unsupported("cp.async in a logging block")  # (with the checkers on it runs interpreted)
  info, size = op.info, op.info["size"]
  dst, src = (_bases(comp, f, info[k].info["address"], "b" + k) for k in ("dst", "src"))
  ptrs, counts = f.alloca("[64 x ptr], align 64"), f.alloca("[32 x i64], align 64")
  close = loop(f, 32, "ck")
  d, s = (f.ld("i64", f.gep(b, f.op("mul i64 %ck, 8")), "tx") for b in (dst, src))
  for a in (d, s):  # (the interpreter names the misaligned one; any fault has it run the instruction again)
    _fault_if(f, f.op(f"icmp ne i64 {f.op(f'and i64 {a}, {size - 1}')}, 0"), F_GLOBAL, a, size, a is d)
  lane = lambda k: str(k.value & 0xffffffff) if k.file == "k" else \
      f.ld("i32", f.gep(_row(comp, f, k.index), f.op("mul i64 %ck, 4")), ("v", k.index))
  n = str(size)
  if info["src_size"] is not None:
    given = f.op(f"zext i32 {lane(info['src_size'])} to i64")
    n = f.op(f"call i64 @llvm.umin.i64(i64 {given}, i64 {size})")
  if info["ignore"] is not None:  # ignore-src true: no byte read, all zero
    skip = f.op(f"icmp ne i32 {lane(info['ignore'])}, 0")
    n = f.op(f"select i1 {skip}, i64 0, i64 {n}")
  f.st("i64", n, f.gep(counts, f.op("mul i64 %ck, 8")), "tx")
  slot = f.gep(ptrs, f.op("mul i64 %ck, 16"))
  f.st("ptr", "null", slot, "tx")
  some, have = f.label("cread"), f.label("chave")
  f.emit(f"br i1 {f.op(f'icmp ne i64 {n}, 0')}, label %{some}, label %{have}")
  f.put(some)  # the bytes read lie in one aligned cp-size chunk: one mapping holds them all, or the read faults
  p = f.or_fault(f.op(f"call ptr @gm_ptr(ptr %ctx, i64 {s}, i64 {n}, i64 0, i64 %w, ptr {_hint(f, i)})"))
  f.st("ptr", p, slot, "tx")
  f.emit(f"br label %{have}")
  f.put(have)
  o = f.op(f"and i64 {d}, {0xffffffff}")  # shared: the low 32 bits, in the CTA's window
  _fault_if(f, f.op(f"icmp ugt i64 {f.op(f'add i64 {o}, {size}')}, {f.ctx(C_LDSZ)}"), F_LDSOFF, o, size, True)
  f.st("ptr", _shared(f, o), f.gep(ptrs, f.op("add i64 8, " + f.op("mul i64 %ck, 16"))), "tx")
  close()
  close = loop(f, 32, "cw")
  at = f.op("mul i64 %cw, 16")
  sp, dp = (f.ld("ptr", f.gep(ptrs, x), "tx") for x in (at, f.op(f"add i64 8, {at}")))
  n = f.ld("i64", f.gep(counts, f.op("mul i64 %cw, 8")), "tx")
  for b in range(size):  # byte b: read when below src-size, else zero
    yes, join = f.label("cb"), f.label("cj")
    here = f.label("cz")
    f.emit(f"br i1 {f.op(f'icmp ult i64 {b}, {n}')}, label %{yes}, label %{here}")
    f.put(yes)
    v = f.ld("i8", f.gep(sp, str(b)), "guest")
    f.emit(f"br label %{join}")
    f.put(here)
    f.emit(f"br label %{join}")
    f.put(join)
    f.st("i8", f.op(f"phi i8 [{v}, %{yes}], [0, %{here}]"), f.gep(dp, str(b)), "lds")
  close()


def _memory(comp, i: int, op, f) -> None:
  """wmma.load / wmma.store (ptx/tensor.py `_wmma_mem`) and ldmatrix / stmatrix (`_ldmatrix`) for warp %w: each
  element's address, all checked, then the elements moved between memory and their register slots. An element is
  one table entry: (register * 32 + lane) << SHIFT | bit offset, in the interpreter's access order."""
  info = op.info
  a = info["at"].info["address"]
  if a.space == "lds" and comp.log:
    raise Unsupported("tensor LDS access in a logging block")  # (the race checker interprets it)
  regs, do = info["regs"], info["do"]
  store = do in ("wmma_store", "stmatrix")
  base = _bases(comp, f, a)
  if do in ("ldmatrix", "stmatrix"):  # rows of 8 b16 from the addresses threads 8k..8k+7 give
    bits, num, lane = 16, info["num"], np.arange(32)
    r, c = np.broadcast_arrays(lane[:, None] // 4, 2 * (lane[:, None] % 4) + np.arange(2)[None, :])
    if info["trans"]:
      r, c = c, r
    k = np.arange(num)[:, None, None]
    src, col = (np.broadcast_to(x, (num, 32, 2)).reshape(-1) for x in (8 * k + r, c))
    tab = ((k * L + lane[None, :, None]) << SHIFT | 16 * np.arange(2)[None, None, :]).reshape(-1)
    close = loop(f, 8 * num, "al")  # every row address 16-aligned first
    b = f.ld("i64", f.gep(base, f.op("mul i64 %al, 8")), "tx")
    _fault_if(f, f.op(f"icmp ne i64 {f.op(f'and i64 {b}, 15')}, 0"), F_GLOBAL, b, 16, store)
    close()
    st, ct = table(f, f"tx{i}.l", "i32", src), table(f, f"tx{i}.c", "i32", col)

    def addr(e):
      b = f.ld("i64", f.gep(base, f.op(f"mul i64 {_entry(f, st, e)}, 8")), "tx")
      return f.op(f"add i64 {b}, {f.op(f'mul i64 {_entry(f, ct, e)}, 2')}")
  else:
    t, (h, w) = info["type"], info["dims"]
    bits = ref.BITS[t]
    slots = _slot_regs(regs, bits)
    n = h * w // 32 if store else len(slots)
    rows, cols = (np.broadcast_to(x, (32, n)) for x in ref.wmma_frag(h, w, n))
    first, second = (rows, cols) if info["layout"] == "row" else (cols, rows)  # offset: first * ld + second
    ft, sc = table(f, f"tx{i}.r", "i32", first.reshape(-1)), table(f, f"tx{i}.c", "i32", second.reshape(-1))
    tab = np.array([(k * L + ln) << SHIFT | o for ln in range(32) for k, o in slots[:n]])
    ldv = _strides(comp, f, info)
    offset = lambda e, ld: f.op(f"add i64 {f.op(f'mul i64 {_entry(f, ft, e)}, {ld}')}, {_entry(f, sc, e)}")

    def addr(e):
      lane = f.op(f"udiv i64 {e}, {n}")
      b = f.ld("i64", f.gep(base, f.op(f"mul i64 {lane}, 8")), "tx")
      ld = f.ld("i64", f.gep(ldv, f.op(f"mul i64 {lane}, 8")), "tx")
      return f.op(f"add i64 {b}, {f.op(f'mul i64 {offset(e, ld)}, {bits // 8}')}")
    direct = _direct(f, i, a.space, bits // 8, base, ldv, int(first.max()), int(second.max()), offset)
  space, ity, nb = ("guest" if a.space == "mem" else "lds"), f"i{bits}", bits // 8
  direct = direct if do.startswith("wmma") else None
  if store:  # each element from its register slot, written in order
    tg = table(f, f"tx{i}.s", "i32", tab)
    ptrs = _pointers(f, i, a.space, len(tab), nb, True, addr, direct)
    buf = _copy_rows(comp, f, regs)
    close = loop(f, len(tab), "wr")
    e = f.ld("i32", f.gep(tg, f.op("mul i64 %wr, 4")), "txtab")
    word = f.ld("i32", f.gep(buf, _word(f, e)), "tx")
    v = f.op(f"lshr i32 {word}, {f.op(f'and i32 {e}, {(1 << SHIFT) - 1}')}")
    f.st(ity, f.conv(v, 32, bits), f.ld("ptr", f.gep(ptrs, f.op("mul i64 %wr, 8")), "tx"), space, ", align 1")
    close()
    return
  # a load: each register word gathers its elements (_pack), unchecked when `direct` holds, else through checked
  # pointers
  words = len(regs) * L
  it = _word_table(f, f"tx{i}.w", tab, np.arange(len(tab)), words, bits)
  out = f.alloca(f"[{words} x i32], align 64")
  gather = lambda tag, at: _pack(f, tag, it, out, words, bits,
                                 lambda e: f.conv(f.ld(ity, at(e), space, ", align 1"), bits, 32), vector=False)
  through = lambda ptrs: lambda e: f.ld("ptr", f.gep(ptrs, f.op(f"mul i64 {e}, 8")), "tx")
  if direct is None:
    gather("rd", through(_pointers(f, i, a.space, len(tab), nb, False, addr)))
  else:
    ok, p, off = direct
    fast, slow, join = f.label("dfast"), f.label("dslow"), f.label("djoin")
    f.emit(f"br i1 {ok}, label %{fast}, label %{slow}")
    f.put(fast)
    gather("rf", lambda e: f.op(f"getelementptr i8, ptr {p}, i64 {f.op(f'mul i64 {off(e)}, {nb}')}"))
    f.emit(f"br label %{join}")
    f.put(slow)
    gather("rd", through(_pointers(f, i, a.space, len(tab), nb, False, addr)))
    f.emit(f"br label %{join}")
    f.put(join)
  for k, s in enumerate(regs):
    v = f.ld(f"<{L} x i32>", f.gep(out, str(4 * L * k)), "tx", ", align 64")
    f.st(f"<{L} x i32>", v, _row(comp, f, s.index, True), ("v", s.index), ", align 4")


def _word_table(f, name: str, slots, values, words: int, bits: int) -> str:
  """A table, word by word (register * 32 + lane) and in each word slot by slot (32 / bits slots, slot j at bit
  j * bits), of `values` (element numbers), each placed by its slot entry in `slots` ((register * 32 + lane) << SHIFT
  | bit offset). Unsupported when a slot is left without one (in every layout taken here each slot has one)."""
  per = 32 // bits
  inv = np.full(words * per, -1, np.int64)
  inv[(slots >> SHIFT) * per + (slots & ((1 << SHIFT) - 1)) // bits] = values
  if (inv < 0).any():
    raise Unsupported("fragment layout")
  return table(f, name, "i32", inv)


def _pack(f, tag: str, tab: str, out: str, words: int, bits: int, element, vector: bool = True) -> None:
  """out[w] (i32) for each of `words` register words: the elements `_word_table` `tab` names for its slots, slot j's
  at bit j * bits; element(e): element e as an i32, zero above its `bits`. `vector`: matrix.loop's."""
  per = 32 // bits
  close = loop(f, words, tag, vector)
  word = "0"
  for j in range(per):
    v = element(_entry(f, tab, f.op(f"add i64 {f.op(f'mul i64 %{tag}, {per}')}, {j}")))
    word = f.op(f"or i32 {word}, {f.op(f'shl i32 {v}, {j * bits}')}")
  f.st("i32", word, f.gep(out, f.op(f"mul i64 %{tag}, 4")), "tx")
  close()


def _word(f, e: str) -> str:
  """The byte offset (i64) of a table entry's register word in a copied-rows buffer."""
  k = f.op(f"lshr i32 {e}, {SHIFT}")
  return f.op(f"zext i32 {f.op(f'shl i32 {k}, 2')} to i64")


def _entry(f, table: str, e: str) -> str:
  """Entry `e` of an i32 table, as i64."""
  return f.op(f"zext i32 {f.ld('i32', f.gep(table, f.op(f'mul i64 {e}, 4')), 'txtab')} to i64")


def _bases(comp, f, a, tag: str = "bl") -> str:
  """[32 x i64]: each lane's `[...]` address (binding.Address, as core.Engine.address evaluates it); `tag`: its lane
  loop's."""
  base = f.alloca("[32 x i64], align 64")
  close = loop(f, 32, tag)
  acc = None
  for x in a.terms:
    v = None
    for d in range(x.dwords):
      p = f.gep(_row(comp, f, x.index + d), f.op(f"mul i64 %{tag}, 4"))
      e = f.op(f"zext i32 {f.ld('i32', p, ('v', x.index + d))} to i64")
      v = e if v is None else f.op(f"or i64 {v}, {f.op(f'shl i64 {e}, {32 * d}')}")
    acc = v if acc is None else f.op(f"add i64 {acc}, {v}")
  acc = acc or "0"
  if a.offset:
    acc = f.op(f"add i64 {acc}, {a.offset & ((1 << 64) - 1)}")
  if a.width == 32:  # (its sum wraps at 32 bits; the element offsets are then added in 64)
    acc = f.op(f"and i64 {acc}, {0xffffffff}")
  if a.align > 1:
    acc = f.op(f"and i64 {acc}, {-a.align}")
  f.st("i64", acc, f.gep(base, f.op(f"mul i64 %{tag}, 8")), "tx")
  close()
  return base


def _strides(comp, f, info) -> str:
  """[32 x i64]: each lane's leading dimension (elements) of a wmma.load/store, zero-extended as the interpreter's."""
  ldv = f.alloca("[32 x i64], align 64")
  close = loop(f, 32, "sl")
  s = info["stride"]
  if s is None:
    ld = str(info["dims"][1] if info["layout"] == "row" else info["dims"][0])
  elif s.file == "k":  # (core.Engine.fetch: a u32, or a u64 when it does not fit)
    ld = str((s.value if s.dwords == 2 or s.value > 0xffffffff else s.value & 0xffffffff) & ((1 << 64) - 1))
  else:
    p = f.gep(_row(comp, f, s.index), f.op("mul i64 %sl, 4"))
    ld = f.op(f"zext i32 {f.ld('i32', p, ('v', s.index))} to i64")
  f.st("i64", ld, f.gep(ldv, f.op("mul i64 %sl, 8")), "tx")
  close()
  return ldv


def _hint(f, i: int) -> str:
  """Pointer to instruction i's region hint (runtime HINT_REGION: the region its last access hit)."""
  return f.op(f"getelementptr i64, ptr %hints, i64 {HINT_REGION + HINTS * i}")


def _shared(f, o: str) -> str:
  """The host pointer of byte `o` (i64, below C_LDSZ) of warp %w's CTA's shared window."""
  wg = f.ld("i64", f.gep(f.ctxp(C_WG), f.op("mul i64 %w, 8")), "wg")
  return f.gep(f.ctxp(C_LDS), f.op(f"add i64 {f.op(f'mul i64 {wg}, {f.ctx(C_LDSZ)}')}, {o}"))


def _direct(f, i: int, space: str, nb: int, base: str, ldv: str, fmax: int, smax: int, offset):
  """A wmma.load/store's unchecked path: (cond, the host pointer p of lane 0's base b, offset(e, ld)); when cond
  holds, element e lies at p + offset(e, ld) * nb. cond: every lane has lane 0's base and leading dimension (PTX
  asks for it), b is nb-aligned, and [b, b + ((fmax * ld + smax) + 1) * nb), which holds every element, lies in
  the global region this instruction's hint names (or within the CTA's shared window): no element can fault."""
  b0, ld0 = f.ld("i64", base, "tx"), f.ld("i64", ldv, "tx")
  both = lambda x, y: f.op(f"and i1 {x}, {y}")
  same = f.alloca("i1")
  f.emit(f"store i1 true, ptr {same}")
  close = loop(f, 32, "un")
  at = f.op("mul i64 %un, 8")
  eq_b = f.op(f"icmp eq i64 {f.ld('i64', f.gep(base, at), 'tx')}, {b0}")
  eq_ld = f.op(f"icmp eq i64 {f.ld('i64', f.gep(ldv, at), 'tx')}, {ld0}")
  f.emit(f"store i1 {both(f.op(f'load i1, ptr {same}'), both(eq_b, eq_ld))}, ptr {same}")
  close()
  small = f.op(f"icmp ult i64 {ld0}, {1 << 32}")  # (the span then fits in 64 bits)
  last = f.op(f"add i64 {f.op(f'mul i64 {ld0}, {fmax}')}, {smax + 1}")
  span = f.op(f"mul i64 {last}, {nb}")
  aligned = f.op(f"icmp eq i64 {f.op(f'and i64 {b0}, {nb - 1}')}, 0")
  ok = both(both(f.op(f"load i1, ptr {same}"), small), aligned)
  if space == "mem":
    h = f.op(f"load i64, ptr {_hint(f, i)}")
    row = f.op(f"getelementptr i64, ptr {f.ctxp(C_REGS)}, i64 {f.op(f'mul i64 {h}, 3')}")
    s0, e0, host = (f.ld("i64", f.op(f"getelementptr i64, ptr {row}, i64 {k}"), "tbl") for k in range(3))
    hi = f.op(f"add i64 {b0}, {span}")
    ge, le, nowrap = (f.op(f"icmp uge i64 {b0}, {s0}"), f.op(f"icmp ule i64 {hi}, {e0}"),
                      f.op(f"icmp uge i64 {hi}, {b0}"))
    ok = both(ok, both(both(ge, le), nowrap))
    d = f.op(f"sub i64 {host}, {s0}")
    p = f.op(f"inttoptr i64 {f.op(f'add i64 {d}, {b0}')} to ptr")
  else:  # shared: the low 32 bits, in the CTA's window
    o = f.op(f"and i64 {b0}, {0xffffffff}")
    ok = both(ok, f.op(f"icmp ule i64 {f.op(f'add i64 {o}, {span}')}, {f.ctx(C_LDSZ)}"))
    p = _shared(f, o)
  return ok, p, lambda e: offset(e, ld0)


def _pointers(f, i: int, space: str, count: int, nb: int, write: bool, addr, direct=None) -> str:
  """[count x ptr]: the host pointer of each element's `nb` bytes at addr(f, e), checked as ptx/tensor.py `_mem`
  checks them (alignment, then the global mapping or the CTA's shared window); a fault leaves the function.
  `direct` (`_direct`): when its condition holds, the pointers without checks."""
  ptrs = f.alloca(f"[{count} x ptr], align 64")
  join = None
  if direct is not None:
    ok, p, offset = direct
    fast, slow, join = f.label("dfast"), f.label("dslow"), f.label("djoin")
    f.emit(f"br i1 {ok}, label %{fast}, label %{slow}")
    f.put(fast)
    close = loop(f, count, "de")
    off = offset("%de")
    q = f.op(f"getelementptr i8, ptr {p}, i64 {f.op(f'mul i64 {off}, {nb}')}")
    f.st("ptr", q, f.gep(ptrs, f.op("mul i64 %de, 8")), "tx")
    close()
    f.emit(f"br label %{join}")
    f.put(slow)
  hint = _hint(f, i)
  close = loop(f, count, "el")
  a = addr("%el")
  if nb > 1:
    _fault_if(f, f.op(f"icmp ne i64 {f.op(f'and i64 {a}, {nb - 1}')}, 0"), F_GLOBAL, a, nb, write)
  if space == "mem":
    p = f.or_fault(f.op(f"call ptr @gm_ptr(ptr %ctx, i64 {a}, i64 {nb}, i64 {int(write)}, i64 %w, ptr {hint})"))
  else:  # shared: the low 32 bits, in the CTA's window
    o = f.op(f"and i64 {a}, {0xffffffff}")
    _fault_if(f, f.op(f"icmp ugt i64 {f.op(f'add i64 {o}, {nb}')}, {f.ctx(C_LDSZ)}"), F_LDSOFF, o, nb, write)
    p = _shared(f, o)
  f.st("ptr", p, f.gep(ptrs, f.op("mul i64 %el, 8")), "tx")
  close()
  if join is not None:
    f.emit(f"br label %{join}")
    f.put(join)
  return ptrs


def _at(g, base: str, a: str, b: str) -> str:
  """Pointer to i32 element [a + b] of `base`."""
  return g.op(f"getelementptr i32, ptr {base}, i64 {g.op(f'add i64 {a}, {b}')}")


def _fault_if(f, cond: str, kind: int, addr: str, nb: int, write: bool) -> None:
  yes, no = f.label("flt"), f.label("nof")
  f.emit(f"br i1 {cond}, label %{yes}, label %{no}")
  f.put(yes)
  f.emit(f"call void @fault(ptr %ctx, i64 {kind}, i64 {addr}, i64 {nb}, i64 {int(write)}, i64 %w)")
  f.emit("br label %fault")
  f.put(no)


# ------------------------------------------------------------------------------------------------ mma
def _decode(f, raw: str, t: str) -> dict:
  """An element's raw bits (i32) of float type t, exactly: sign (i1), significand m (i64), exponent e (i64; the
  value is m * 2**e), inf, nan (i1)."""
  eb, mb, bias, has_inf = FMT[t]
  if t == "tf32":
    raw = f.op(f"and i32 {raw}, {0xffffe000 - (1 << 32)}")
  E = f.op(f"and i32 {f.op(f'lshr i32 {raw}, {mb}')}, {(1 << eb) - 1}")
  F = f.op(f"and i32 {raw}, {(1 << mb) - 1}")
  neg = f.op(f"icmp ne i32 {f.op(f'and i32 {raw}, {1 << (eb + mb)}')}, 0")
  sub = f.op(f"icmp eq i32 {E}, 0")
  top = f.op(f"icmp eq i32 {E}, {(1 << eb) - 1}")
  if has_inf:
    fz = f.op(f"icmp eq i32 {F}, 0")
    inf = f.op(f"and i1 {top}, {fz}")
    nan = f.op(f"and i1 {top}, {f.op(f'xor i1 {fz}, true')}")
  else:  # e4m3: S.1111.111 is NaN, no infinities
    inf, nan = "false", f.op(f"and i1 {top}, {f.op(f'icmp eq i32 {F}, {(1 << mb) - 1}')}")
  full = f.op(f"or i32 {F}, {1 << mb}")
  m = f.op(f"zext i32 {f.op(f'select i1 {sub}, i32 {F}, i32 {full}')} to i64")
  e1 = f.op(f"select i1 {sub}, i32 1, i32 {E}")
  e = f.op(f"sub i64 {f.op(f'zext i32 {e1} to i64')}, {bias + mb}")
  return dict(neg=neg, m=m, e=e, inf=inf, nan=nan)


def _exp_range(t: str) -> tuple[int, int, int]:
  """(smallest exponent, largest exponent, significand bits) of a finite element's m * 2**e."""
  eb, mb, bias, has_inf = FMT[t]
  return 1 - bias - mb, (1 << eb) - 1 - (1 if has_inf else 0) - bias - mb, mb + 1


HOST = {"f16": ("i16", "half"), "bf16": ("i16", "bfloat"), "f32": ("i32", "float"), "tf32": ("i32", "float")}  # types
# whose values the host's own conversion widens to double exactly (what `_decode` then `_double` give, NaNs aside)


def _value(f, raw: str, t: str) -> str:
  """An element's raw bits (i32) of float type t as a double, exactly (a NaN as some NaN: D's is canonical)."""
  if t not in HOST:
    return _double(f, _decode(f, raw, t))
  it, ft = HOST[t]
  if t == "tf32":
    raw = f.op(f"and i32 {raw}, {0xffffe000 - (1 << 32)}")
  if it != "i32":
    raw = f.op(f"trunc i32 {raw} to {it}")
  return f.op(f"fpext {ft} {f.op(f'bitcast {it} {raw} to {ft}')} to double")


def _double(f, d: dict) -> str:
  """The decoded element as a double (exact: at most 24 significand bits, exponents within double's normal range)."""
  biased = f.op(f"add i64 {d['e']}, 1023")
  scale = f.op(f"bitcast i64 {f.op(f'shl i64 {biased}, 52')} to double")
  m = f.op(f"uitofp i64 {d['m']} to double")
  x = f.op(f"fmul double {m}, {scale}")
  x = f.op(f"select i1 {d['inf']}, double 0x7FF0000000000000, double {x}")
  x = f.op(f"select i1 {d['nan']}, double 0x7FF8000000000000, double {x}")
  return f.op(f"select i1 {d['neg']}, double {f.op(f'fneg double {x}')}, double {x}")


def _decode_int(f, raw: str, t: str) -> str:
  if t == "s32":
    return f.op(f"sext i32 {raw} to i64")
  b = f.op(f"trunc i32 {raw} to i8")
  return f.op(f"{'sext' if t == 's8' else 'zext'} i8 {b} to i64")


def _smax(f, a: str, b: str) -> str:
  return f.op(f"select i1 {f.op(f'icmp sgt i64 {a}, {b}')}, i64 {a}, i64 {b}")


def _round(f, neg: str, sig: str, exp: str, dt: str) -> str:
  """sig * 2**exp (sig an i64 != 0, exp i64) with sign `neg`, rounded to nearest even into D type dt: its bits
  (i32). Bits below the format's precision may be folded into sig's lowest bit (sticky)."""
  P, qmin, inf, sign, _ = OUT[dt]
  lz = f.op(f"call i64 @llvm.ctlz.i64(i64 {sig}, i1 true)")
  E = f.op(f"add i64 {exp}, {f.op(f'sub i64 63, {lz}')}")
  qe = _smax(f, f.op(f"sub i64 {E}, {P - 1}"), str(qmin))
  sh = f.op(f"sub i64 {qe}, {exp}")
  s = f.op(f"zext i64 {sig} to i128")
  left = f.op(f"icmp slt i64 {sh}, 0")
  nsh = f.op(f"sub i64 0, {sh}")
  lsh = f.op(f"zext i64 {f.op(f'select i1 {left}, i64 {nsh}, i64 0')} to i128")
  r1 = f.op(f"select i1 {left}, i64 1, i64 {sh}")
  rsh = f.op(f"zext i64 {f.op(f'call i64 @llvm.umin.i64(i64 {r1}, i64 66)')} to i128")
  kept = f.op(f"lshr i128 {s}, {rsh}")
  unit = f.op(f"shl i128 1, {rsh}")
  rem = f.op(f"and i128 {s}, {f.op(f'sub i128 {unit}, 1')}")
  half = f.op(f"shl i128 1, {f.op(f'sub i128 {rsh}, 1')}")
  odd = f.op(f"icmp ne i128 {f.op(f'and i128 {kept}, 1')}, 0")
  tie = f.op(f"and i1 {odd}, {f.op(f'icmp eq i128 {rem}, {half}')}")
  up = f.op(f"or i1 {f.op(f'icmp ugt i128 {rem}, {half}')}, {tie}")
  kept = f.op(f"add i128 {kept}, {f.op(f'zext i1 {up} to i128')}")
  kept = f.op(f"select i1 {left}, i128 {f.op(f'shl i128 {s}, {lsh}')}, i128 {kept}")
  q = f.op(f"zext i64 {f.op(f'sub i64 {qe}, {qmin}')} to i128")
  bits = f.op(f"add i128 {f.op(f'shl i128 {q}, {P - 1}')}, {kept}")
  big = f.op(f"icmp ugt i128 {bits}, {inf}")
  b32 = f.op(f"trunc i128 {f.op(f'select i1 {big}, i128 {inf}, i128 {bits}')} to i32")
  return f.op(f"or i32 {b32}, {f.op(f'select i1 {neg}, i32 {sign - (1 << 32) if sign >> 31 else sign}, i32 0')}")


def _width(types, K: int) -> tuple[int, int]:
  """(bits, exponent of the lowest bit) of a two's-complement fixed-point integer holding every sum of K products
  and C of these types exactly."""
  _, at, bt, ct = types
  (la, ha, ma), (lb, hb, mb), (lc, hc, mc) = (_exp_range(t) for t in (at, bt, ct))
  lo = min(la + lb, lc)
  top = max(ha + hb + ma + mb, hc + mc)
  bits = top - lo + (K + 1).bit_length() + 2
  return -(-bits // 64) * 64, lo


def _slow(f, name: str, types, shape) -> str:
  """@{name}(A bits, B bits, C bits, m, n): D[m, n]'s bits from the exact fixed-point sum (all terms finite)."""
  (_, N, K), (dt, at, bt, ct) = shape, types
  W, lo = _width(types, K)
  g = Fn(f.tags)
  g.emit("br label %head")
  g.put("head")
  g.emit("%k = phi i64 [0, %entry], [%k.n, %body]")
  g.emit(f"%acc = phi i{W} [0, %entry], [%acc.n, %body]")
  g.emit(f"br i1 {g.op(f'icmp slt i64 %k, {K}')}, label %body, label %tail")
  g.put("body")

  def term(acc, neg, m, e):
    by = g.op(f"zext i64 {g.op(f'sub i64 {e}, {lo}')} to i{W}")
    t = g.op(f"shl i{W} {g.op(f'zext i64 {m} to i{W}')}, {by}")
    return g.op(f"select i1 {neg}, i{W} {g.op(f'sub i{W} {acc}, {t}')}, i{W} {g.op(f'add i{W} {acc}, {t}')}")

  ra = g.op(f"load i32, ptr {_at(g, '%ar', g.op(f'mul i64 %m, {K}'), '%k')}")
  rb = g.op(f"load i32, ptr {_at(g, '%br', g.op(f'mul i64 %k, {N}'), '%n')}")
  da, db = _decode(g, ra, at), _decode(g, rb, bt)
  acc = term("%acc", g.op(f"xor i1 {da['neg']}, {db['neg']}"), g.op(f"mul i64 {da['m']}, {db['m']}"),
             g.op(f"add i64 {da['e']}, {db['e']}"))
  g.emit(f"%acc.n = add i{W} {acc}, 0")
  g.emit("%k.n = add i64 %k, 1")
  g.emit("br label %head")
  g.put("tail")
  rc = g.op(f"load i32, ptr {_at(g, '%cr', g.op(f'mul i64 %m, {N}'), '%n')}")
  dc = _decode(g, rc, ct)
  acc = term("%acc", dc["neg"], dc["m"], dc["e"])
  neg = g.op(f"icmp slt i{W} {acc}, 0")
  mag = g.op(f"select i1 {neg}, i{W} {g.op(f'sub i{W} 0, {acc}')}, i{W} {acc}")
  g.emit(f"br i1 {g.op(f'icmp eq i{W} {mag}, 0')}, label %zero, label %some")
  g.put("zero")
  g.emit("ret i32 0")  # (an exact zero sum of terms not all -0: +0)
  g.put("some")
  lz = str(W)  # leading zeros of mag, limb by limb from the low one (the highest nonzero limb decides)
  for j in range(W // 64):
    limb = g.op(f"trunc i{W} {g.op(f'lshr i{W} {mag}, {64 * j}') if j else mag} to i64")
    c = g.op(f"add i64 {g.op(f'call i64 @llvm.ctlz.i64(i64 {limb}, i1 false)')}, {W - 64 * (j + 1)}")
    lz = g.op(f"select i1 {g.op(f'icmp ne i64 {limb}, 0')}, i64 {c}, i64 {lz}")
  top = g.op(f"sub i64 {W - 1}, {lz}")
  sh = g.op(f"sub i64 {top}, 63")  # keep the top 64 bits, the rest folded into the lowest (sticky)
  right = g.op(f"icmp sgt i64 {sh}, 0")
  rs = g.op(f"zext i64 {g.op(f'select i1 {right}, i64 {sh}, i64 0')} to i{W}")
  neg_sh = g.op(f"sub i64 0, {sh}")
  ls = g.op(f"zext i64 {g.op(f'select i1 {right}, i64 0, i64 {neg_sh}')} to i{W}")
  down = g.op(f"lshr i{W} {mag}, {rs}")
  hi = g.op(f"trunc i{W} {g.op(f'shl i{W} {down}, {ls}')} to i64")
  unit = g.op(f"shl i{W} 1, {rs}")
  lost = g.op(f"and i{W} {mag}, {g.op(f'sub i{W} {unit}, 1')}")
  sticky = g.op(f"icmp ne i{W} {lost}, 0")
  sig = g.op(f"or i64 {hi}, {g.op(f'zext i1 {sticky} to i64')}")
  g.emit(f"ret i32 {_round(g, neg, sig, g.op(f'add i64 {lo}, {sh}'), dt)}")
  head = [f"define internal i32 @{name}(ptr %ar, ptr %br, ptr %cr, i64 %m, i64 %n) noinline {{", "entry:"]
  return "\n".join(head + g.allocas + g.pro + g.lines + ["}", ""])


NONFINITE, ZERO = -(1 << 40), 1 << 20  # `_low` of a non-finite element (beyond any sum of lows) and of a zero


def _low(f, v: str, n: int) -> str:
  """<n x i64>: for each double of <n x double> v (a normal double or zero, as every `_value` is) the exponent of its
  lowest set bit (v = odd * 2**low); ZERO for a zero, NONFINITE for an infinity or NaN."""
  vt = f"<{n} x i64>"
  b = f.op(f"bitcast <{n} x double> {v} to {vt}")
  mag = f.op(f"and {vt} {b}, splat (i64 {(1 << 63) - 1})")
  e = f.op(f"lshr {vt} {mag}, splat (i64 52)")
  tz = f.op(f"call {vt} @llvm.cttz.v{n}i64({vt} {f.op(f'or {vt} {b}, splat (i64 {1 << 52})')}, i1 true)")
  low = f.op(f"add {vt} {f.op(f'sub {vt} {e}, splat (i64 1075)')}, {tz}")
  low = f.op(f"select <{n} x i1> {f.op(f'icmp eq {vt} {mag}, zeroinitializer')}, {vt} splat (i64 {ZERO}), {vt} {low}")
  return f.op(f"select <{n} x i1> {f.op(f'icmp eq {vt} {e}, splat (i64 2047)')}, {vt} splat (i64 {NONFINITE}), "
              f"{vt} {low}")


def _columns(f, b: str, K: int, N: int) -> tuple[str, str]:
  """For the (K x N) doubles at b, per column n: (<N x double> the largest |B[k, n]|, <N x i64> the smallest
  `_low`)."""
  big, low = "zeroinitializer", f"splat (i64 {ZERO})"
  for k in range(K):
    row = f.ld(f"<{N} x double>", f.gep(b, str(8 * N * k)), "tx", ", align 8")
    mag = f.op(f"call <{N} x double> @llvm.fabs.v{N}f64(<{N} x double> {row})")
    big = f.op(f"call <{N} x double> @llvm.maxnum.v{N}f64(<{N} x double> {big}, <{N} x double> {mag})")
    low = f.op(f"call <{N} x i64> @llvm.smin.v{N}i64(<{N} x i64> {low}, <{N} x i64> {_low(f, row, N)})")
  return big, low


def _window(f, a: str, cols, crow: str, K: int, N: int) -> str:
  """i1, in the m loop (%mm): every partial sum of row m (K products A[m, k] * B[k, n] and C[m, n], in any order) is
  exact in a double, for every n. Each term is a multiple of 2**lo (lo: A's row's smallest `_low` plus B's column's,
  or C's element's) and every partial sum is at most K * max|A[m, :]| * max|B[:, n]| + |C[m, n]| (hi) in magnitude:
  an integer multiple of 2**lo below 2**(lo + 53) is a double. hi is computed rounded (relative error below 2**-51),
  so it is required below 2**(lo + 52). Infinities and NaNs (NONFINITE) and zeros (ZERO) fail and pass as they must."""
  big, low = cols
  row = f.ld(f"<{K} x double>", f.gep(a, f.op(f"mul i64 %mm, {8 * K}")), "tx", ", align 8")
  amax = f.op(f"call double @llvm.vector.reduce.fmax.v{K}f64(<{K} x double> "
              f"{f.op(f'call <{K} x double> @llvm.fabs.v{K}f64(<{K} x double> {row})')})")
  alow = f.op(f"call i64 @llvm.vector.reduce.smin.v{K}i64(<{K} x i64> {_low(f, row, K)})")
  vt, dt = f"<{N} x i64>", f"<{N} x double>"
  terms = f.op(f"add {vt} {low}, {broadcast(f, 'i64', alow, N)}")
  lo = f.op(f"call {vt} @llvm.smin.v{N}i64({vt} {terms}, {vt} {_low(f, crow, N)})")
  hi = f.op(f"fmul {dt} {big}, {broadcast(f, 'double', f.op(f'fmul double {amax}, {float(K)!r}'), N)}")
  hi = f.op(f"fadd {dt} {hi}, {f.op(f'call {dt} @llvm.fabs.v{N}f64({dt} {crow})')}")
  t = f.op(f"call {vt} @llvm.smin.v{N}i64({vt} {f.op(f'add {vt} {lo}, splat (i64 1075)')}, {vt} splat (i64 2046))")
  limit = f.op(f"bitcast {vt} {f.op(f'shl {vt} {t}, splat (i64 52)')} to {dt}")  # 2**(lo + 52), at most 2**1023
  ok = f.op(f"and <{N} x i1> {f.op(f'icmp sge {vt} {t}, splat (i64 1)')}, {f.op(f'fcmp olt {dt} {hi}, {limit}')}")
  return f.op(f"call i1 @llvm.vector.reduce.and.v{N}i1(<{N} x i1> {ok})")


def _wrapped(f, s: str, sat: bool) -> str:
  """An integer D element's bits from its exact i64 sum: wrapped to s32, or clamped (`.satfinite`)."""
  if sat:
    s = _smax(f, s, str(-(1 << 31)))
    s = f.op(f"select i1 {f.op(f'icmp sgt i64 {s}, {(1 << 31) - 1}')}, i64 {(1 << 31) - 1}, i64 {s}")
  return f.op(f"trunc i64 {s} to i32")


def _rounded(f, s: str, dt: str) -> str:
  """A float D element's bits from its double sum, exact or non-finite: rounded to nearest even (f16 by integer
  code: zero keeps its sign, infinity is the format's), a NaN the canonical NaN."""
  P, qmin, inf, sign, canon = OUT[dt]
  if dt == "f32":
    r = f.op(f"bitcast float {f.op(f'fptrunc double {s} to float')} to i32")
  else:
    fin = f.op(f"fcmp one double {f.op(f'call double @llvm.fabs.f64(double {s})')}, 0x7FF0000000000000")
    b = f.op(f"bitcast double {s} to i64")
    neg = f.op(f"icmp slt i64 {b}, 0")
    E = f.op(f"and i64 {f.op(f'lshr i64 {b}, 52')}, 2047")
    F = f.op(f"and i64 {b}, {(1 << 52) - 1}")
    sub = f.op(f"icmp eq i64 {E}, 0")
    sig = f.op(f"select i1 {sub}, i64 {F}, i64 {f.op(f'or i64 {F}, {1 << 52}')}")
    ex_ = f.op(f"sub i64 {f.op(f'select i1 {sub}, i64 1, i64 {E}')}, 1075")
    sg = f.op(f"select i1 {neg}, i32 {sign}, i32 0")
    nz = f.op(f"icmp eq i64 {sig}, 0")
    r = _round(f, neg, f.op(f"select i1 {nz}, i64 1, i64 {sig}"), ex_, dt)
    r = f.op(f"select i1 {nz}, i32 {sg}, i32 {r}")
    r = f.op(f"select i1 {fin}, i32 {r}, i32 {f.op(f'or i32 {sg}, {inf}')}")
  return f.op(f"select i1 {f.op(f'fcmp uno double {s}, 0.0')}, i32 {canon}, i32 {r}")


def _gemm(comp, i: int, op, f) -> None:
  """mma.sync / wmma.mma (ptx/tensor.py `_gemm`) for warp %w: D = A x B + C."""
  info = op.info
  (R, N, K), types, regs = info["shape"], info["types"], info["regs"]
  dt, at, bt, ct = types
  ta, tb, tc, (dsel, dslots) = _gemm_tables(op)
  integer = at in ref.INT
  # 1. the A, B and C registers, whole, into local buffers (C read before any D row is written)
  bufs = [_copy_rows(comp, f, rs, 1) for rs in regs[1:]]
  # 2. A (R x K), B (K x N), C (R x N): raw element bits, then values (double, or i64 for integers)
  raws, vals = [], []
  ety = "i64" if integer else "double"
  for k, (tab, t, (h, w)) in enumerate(zip((ta, tb, tc), (at, bt, ct), ((R, K), (K, N), (R, N)))):
    g = table(f, f"tx{i}.{'abc'[k]}", "i32", tab)
    raw, val = f.alloca(f"[{h * w} x i32], align 64"), f.alloca(f"[{h * w} x {ety}], align 64")
    close = loop(f, h * w, f"u{k}")
    e = f.ld("i32", f.gep(g, f.op(f"mul i64 %u{k}, 4")), "txtab")
    bits = ref.BITS[t]
    x = f.op(f"lshr i32 {f.ld('i32', f.gep(bufs[k], _word(f, e)), 'tx')}, {f.op(f'and i32 {e}, {(1 << SHIFT) - 1}')}")
    if bits < 32:
      x = f.op(f"and i32 {x}, {(1 << bits) - 1}")
    f.st("i32", x, f.gep(raw, f.op(f"mul i64 %u{k}, 4")), "tx")
    v = _decode_int(f, x, t) if integer else _value(f, x, t)
    f.st(ety, v, f.gep(val, f.op(f"mul i64 %u{k}, 8")), "tx")
    close()
    raws.append(raw)
    vals.append(val)
  av, bv, cv = vals
  # 3. per row m: the sums over k in order (then C), as the interpreter's float64 pass: in a row whose terms all fit
  # one double's window (`_window`) plainly, else each step's exactness checked
  vty = f"<{N} x {ety}>"
  sums = f.alloca(f"[{R * N} x {ety}], align 64")
  exact = f.alloca(f"[{R * N} x i8], align 64")
  rows_exact = f.alloca(f"[{R} x i8], align 64")
  cols = None if integer else _columns(f, bv, K, N)
  close_m = loop(f, R, "mm")
  run, ex = f.alloca(vty), f.alloca(f"<{N} x i1>")
  zero = "zeroinitializer" if integer else "splat (double -0.0)"
  f.emit(f"store {vty} {zero}, ptr {run}")
  f.emit(f"store <{N} x i1> splat (i1 true), ptr {ex}")
  crow = f.ld(vty, f.gep(cv, f.op(f"mul i64 %mm, {8 * N}")), "tx", ", align 8")

  def add(t: str, checked: bool) -> None:
    s = f.op(f"load {vty}, ptr {run}")
    new = f.op(f"{'add' if integer else 'fadd'} {vty} {s}, {t}")
    if checked:  # s + t was exact iff new - s == t and new - t == s: the one whose subtrahend is the larger of s, t
      # is exact (Sterbenz, as in Fast2Sum), so it equals the other exactly when the rounding error was zero
      same = lambda x, y: f.op(f"fcmp oeq {vty} {f.op(f'fsub {vty} {new}, {x}')}, {y}")
      ok = f.op(f"and <{N} x i1> {same(s, t)}, {same(t, s)}")
      was = f.op(f"load <{N} x i1>, ptr {ex}")
      f.emit(f"store <{N} x i1> {f.op(f'and <{N} x i1> {was}, {ok}')}, ptr {ex}")
    f.emit(f"store {vty} {new}, ptr {run}")

  done = f.label("summed")
  if integer:  # (exact in i64)
    f.emit("br label %plain")
  else:
    f.emit(f"br i1 {_window(f, av, cols, crow, K, N)}, label %plain, label %checked")
  for tag, checked in [("plain", False)] + [("checked", True)] * (not integer):
    f.put(tag)
    close_k = loop(f, K, f"k{tag}")
    xs, brow = k_step(f, ety, N, K, av, bv, 8, "tx", f"%k{tag}")
    add(f.op(f"{'mul' if integer else 'fmul'} {vty} {xs}, {brow}"), checked)
    close_k()
    add(crow, checked)
    f.emit(f"br label %{done}")
  f.put(done)
  f.st(vty, f.op(f"load {vty}, ptr {run}"), f.gep(sums, f.op(f"mul i64 %mm, {8 * N}")), "tx", ", align 8")
  exn = f.op(f"load <{N} x i1>, ptr {ex}")
  f.st(f"<{N} x i8>", f.op(f"zext <{N} x i1> {exn} to <{N} x i8>"), f.gep(exact, f.op(f"mul i64 %mm, {N}")), "tx",
       ", align 1")
  every = f.op(f"zext i1 {f.op(f'call i1 @llvm.vector.reduce.and.v{N}i1(<{N} x i1> {exn})')} to i8")
  f.st("i8", every, f.gep(rows_exact, "%mm"), "tx")
  close_m()
  # 4. each D element's bits: rounded from its double sum (exact or non-finite: every element of a row that was all
  # exact), then the others from the exact fixed-point sum
  res = f.alloca(f"[{R * N} x i32], align 64")
  close = loop(f, R * N, "dd")
  s = f.ld(ety, f.gep(sums, f.op("mul i64 %dd, 8")), "tx")
  f.st("i32", _rounded(f, s, dt) if not integer else _wrapped(f, s, info["sat"]),
       f.gep(res, f.op("mul i64 %dd, 4")), "tx")
  close()
  if not integer:
    close_m = loop(f, R, "rm")
    some, next_ = f.label("inexact"), f.label("rowdone")
    whole = f.ld("i8", f.gep(rows_exact, "%rm"), "tx")
    f.emit(f"br i1 {f.op(f'icmp eq i8 {whole}, 0')}, label %{some}, label %{next_}")
    f.put(some)
    close_n = loop(f, N, "rn")
    dd = f.op(f"add i64 {f.op(f'mul i64 %rm, {N}')}, %rn")
    s = f.ld(ety, f.gep(sums, f.op(f"mul i64 {dd}, 8")), "tx")
    fin = f.op(f"fcmp one double {f.op(f'call double @llvm.fabs.f64(double {s})')}, 0x7FF0000000000000")
    ok = f.op(f"icmp ne i8 {f.ld('i8', f.gep(exact, dd), 'tx')}, 0")
    slow, kept = f.label("slow"), f.label("kept")
    inf_ = f.op(f"xor i1 {fin}, true")
    f.emit(f"br i1 {f.op(f'or i1 {ok}, {inf_}')}, label %{kept}, label %{slow}")
    f.put(slow)
    slow_fn = f"tx.slow.{'.'.join(types)}.{N}.{K}"  # (one per module and form: Compiler.tensor_fns)
    r_slow = f.op(f"call i32 @{slow_fn}(ptr {raws[0]}, ptr {raws[1]}, ptr {raws[2]}, i64 %rm, i64 %rn)")
    f.st("i32", r_slow, f.gep(res, f.op(f"mul i64 {dd}, 4")), "tx")
    f.emit(f"br label %{kept}")
    f.put(kept)
    close_n()
    f.emit(f"br label %{next_}")
    f.put(next_)
    close_m()
    made = comp.__dict__.setdefault("tensor_fns", set())
    if slow_fn not in made:
      made.add(slow_fn)
      f.globals.append(_slow(f, slow_fn, types, (R, N, K)))
  # 5. the D registers: each slot's element, packed as ptx/tensor.py `_put` does, rows stored whole
  bits, words = ref.BITS[dt], len(regs[0]) * L
  slots = np.array([(k * L + ln) << SHIFT | o for ln in range(L) for k, o in dslots])  # (dsel's order: lane, slot)
  pk = f.alloca(f"[{words} x i32], align 64")
  element = lambda e: f.ld("i32", f.gep(res, f.op(f"mul i64 {e}, 4")), "tx")
  _pack(f, "pd", _word_table(f, f"tx{i}.d", slots, dsel.reshape(-1), words, bits), pk, words, bits,
        element if bits == 32 else lambda e: f.op(f"and i32 {element(e)}, {(1 << bits) - 1}"))
  for k, s in enumerate(regs[0]):
    v = f.ld(f"<{L} x i32>", f.gep(pk, str(4 * L * k)), "tx", ", align 64")
    f.st(f"<{L} x i32>", v, _row(comp, f, s.index, True), ("v", s.index), ", align 4")
