"""WMMA/MFMA in the native tier (gputwin/emu/README.md, "Native tier"): a matrix instruction is wave-level (a lane's
D depends on every lane's A and B), so its function works on the whole wave. It reads the register tables the
interpreter reads (gputwin/emu/amd/matrix.py `tables`: which register, lane and bits hold each element, which
element each D register of each lane gets) and computes with the interpreter's arithmetic, bit for bit: elements
converted exactly to double (i32 for integers), each D[m, n] summed in k order from -0.0, then C, one rounding to
f32, a NaN result the default NaN; f64 (V_MFMA_F64_*): from C, one llvm.fma per k in order, a NaN the default NaN.

The code for one wave: the operand rows copied whole (one vector per register row, tagged like every other access to
it) into local buffers; A and B unpacked into double (i32) matrices through constant tables (a sparse A's 2-bit
indices too: its column c multiplies B's row 4 * (c // 2) + its index; a scaled one's elements times their E8M0
scales); per row m a <N x double> accumulator over A's columns (the k order of every element kept; vectorised across
n); then per D register a gather of its lanes' elements, plus C, rounded and stored (f64: the accumulators start as
C, scattered to their elements through the same table, and a D slot is a register pair). Every C row is read before
any D row is written."""
from __future__ import annotations

from gputwin.emu.amd import matrix as layouts
from gputwin.emu.native.runtime import C_A, C_V, C_VSTR, C_VSTW
from gputwin.errors import GputwinError
from gputwin.pcode.llvm import SCALAR, Unsupported, fp8_decode, odd32, rbf, to_half
from gputwin.pcode.runtime import FP8

SHIFT = 5  # a table entry: (register * L + lane) << SHIFT | bit offset


def operands(op, fam: str, lanes: int):
  """amd/matrix.py's operands check: (tables, A's element kind, B's, modifiers), or Unsupported (the interpreter
  then raises)."""
  if fam not in ("rdna3", "rdna4", "cdna"):
    raise Unsupported("matrix family")
  try:
    return layouts.operands(fam, op, lanes)
  except GputwinError as e:
    raise Unsupported(f"matrix: {e}") from None


def supported(op, fam: str) -> None:
  """plan.supported for a matrix instruction (the wave size is checked again when compiled: WMMA is wave32)."""
  operands(op, fam, 64 if fam == "cdna" else 32)
  if any(s.file == "a" for s in (op.ins["S0"], op.ins["S1"], op.ins["S2"], op.outs["D0"])) and fam != "cdna":
    raise Unsupported("AccVGPRs")


def table(f, name: str, ty: str, values) -> str:
  """A module constant of `values` (emitted ahead of the function by `lower`)."""
  f.globals.append(f"@{name} = internal unnamed_addr constant [{len(values)} x {ty}] "
                   f"[{', '.join(f'{ty} {int(v)}' for v in values)}], align 64")
  return f"@{name}"


def _row(comp, f, file: str, idx: int) -> str:
  """Pointer to register row `idx` of `file` ("v", "a") of wave %w (the A file has the V file's strides)."""
  if file == "v":
    comp.nv = max(comp.nv, idx + 1)
  off = f.op(f"add i64 {f.op(f'mul i64 %w, {f.ctx(C_VSTW)}')}, {f.op(f'mul i64 {idx}, {f.ctx(C_VSTR)}')}")
  return f.gep(f.ctxp(C_V if file == "v" else C_A), off)


def loop(f, n: int, tag: str, vector: bool = True):
  """Open `for (%{tag} = 0; %{tag} < n; ...)`; returns the function closing it. `vector` False: LLVM must not
  vectorise it (a loop of table lookups would become gathers, slower than its scalar code on hosts whose gathers
  are microcoded)."""
  pre, head = f.label(f"{tag}pre"), f.label(f"{tag}head")
  f.emit(f"br label %{pre}")
  f.put(pre)
  f.emit(f"br label %{head}")
  f.put(head)
  nxt = f"%{tag}.n"
  f.emit(f"%{tag} = phi i64 [0, %{pre}], [{nxt}, %{tag}latch]")

  def close():
    f.emit(f"br label %{tag}latch")
    f.put(f"{tag}latch")
    f.emit(f"{nxt} = add i64 %{tag}, 1")
    end = f.label(f"{tag}end")
    f.emit(f"br i1 {f.op(f'icmp eq i64 {nxt}, {n}')}, label %{end}, label %{head}"
           + ("" if vector else f", !llvm.loop {SCALAR}"))
    f.put(end)
  return close


def lower(comp, i: int, op, f) -> str:
  """@inst{i} (and its tables) for matrix instruction `op`: D = A x B + C for one wave, as amd/matrix.py computes
  it. `comp`: the block's codegen.Compiler; `f`: a fresh codegen.Fn."""
  L = comp.L
  t, ka, kb, (neg, clamp) = operands(op, comp.fam, L)
  srcs = (*layouts.sources(op, t), op.outs["D0"])  # A, B, C (sparse: D), D
  if any(s.file == "a" for s in srcs) and comp.fam != "cdna":
    raise Unsupported("AccVGPRs")
  integer, f64 = t.acc == "I32", t.acc == "F64"
  ety, sz = ("i32", 4) if integer else ("double", 8)  # element type of the unpacked matrices
  f.globals = []
  # 1. the A, B and C rows, whole, into local buffers (in order: before anything is written)
  def rows(s, n, spill: bool = False):  # (spill: and a row of zeros, for elements reaching past the last register)
    buf = f.alloca(f"[{(n + spill) * L} x i32], align 64")
    for r in range(n):
      v = f.ld(f"<{L} x i32>", _row(comp, f, s.file, s.index + r), (s.file, s.index + r), ", align 4")
      f.st(f"<{L} x i32>", v, f.gep(buf, str(4 * L * r)), "mx", ", align 64")
    if spill:
      f.st(f"<{L} x i32>", "zeroinitializer", f.gep(buf, str(4 * L * n)), "mx", ", align 64")
    return buf
  straddle = [32 % b != 0 for b in t.bits] + [False]  # (6-bit elements: some go on in the next register)
  bufs = [rows(s, t.regs[k], straddle[k]) for k, s in enumerate(srcs[:2])]
  c, d = srcs[2], srcs[3]
  cbuf = None if c.file == "k" else rows(c, t.regs[2])  # (a constant C is 0: operands)
  # 2. A (M x K), B (K x N) and a sparse A's 2-bit indices (M x K // 2: kind U2, an i32 matrix) unpacked through
  # the tables (a sparse A's column c multiplies B's row 4 * (c // 2) + its index)
  unpack = [(t.a, ka, bufs[0], t.bits[0], neg[0]), (t.b, kb, bufs[1], t.bits[1], neg[1])]
  scales = [(tab, rows(op.ins[s], 1)) for tab, s in zip(t.scale, ("S3", "S4"))] if t.scale is not None else []
  if t.idx is not None:
    unpack.append((t.idx, "U2", rows(op.ins["S2"], 1), 2, (False, False)))
  mats = []
  for k, (tab, kind, buf, bits, (lo, hi)) in enumerate(unpack):
    ty, w = ("i32", 4) if kind == "U2" else (ety, sz)
    mat = f.alloca(f"[{tab[..., 0].size} x {ty}], align 64")
    close = loop(f, tab[..., 0].size, f"u{k}")
    at, sh = _place(f, _places(f, f"mx{i}.{'abi'[k]}", tab, L), f"%u{k}")
    if bits == 64:  # (the low register's row, then the next register's)
      x = _pair(f, f.ld("i32", f.gep(buf, at), "mx"), f.ld("i32", f.gep(buf, f.op(f"add i64 {at}, {4 * L}")), "mx"))
    elif straddle[k]:  # (the word and the next register's, shifted as one)
      lo64 = f.op(f"zext i32 {f.ld('i32', f.gep(buf, at), 'mx')} to i64")
      hi64 = f.op(f"zext i32 {f.ld('i32', f.gep(buf, f.op(f'add i64 {at}, {4 * L}')), 'mx')} to i64")
      both = f.op(f"or i64 {lo64}, {f.op(f'shl i64 {hi64}, 32')}")
      sh64 = f.op(f"zext i32 {sh} to i64")
      x = _element(f, f.op(f"trunc i64 {f.op(f'lshr i64 {both}, {sh64}')} to i32"), kind)
    else:
      x = _element(f, f.op(f"lshr i32 {f.ld('i32', f.gep(buf, at), 'mx')}, {sh}"), kind)
    if lo or hi:  # (negate the elements of a half: at bit offset 0 or not)
      x = f.op(f"fneg double {x}") if lo and hi else \
          f.op(f"select i1 {f.op(f'icmp eq i32 {sh}, 0')}, double {f.op(f'fneg double {x}')}, double {x}") if lo else \
          f.op(f"select i1 {f.op(f'icmp eq i32 {sh}, 0')}, double {x}, double {f.op(f'fneg double {x}')}")
    if k < len(scales):  # (times its E8M0 scale: 2**(code - 127) as a double's exponent, code 0xFF NaN)
      stab, sbuf = scales[k]
      sat, off = _place(f, _places(f, f"mx{i}.s{k}", stab, L), f"%u{k}")
      sw = f.ld("i32", f.gep(sbuf, sat), "mx")
      code = f.op(f"and i32 {f.op(f'lshr i32 {sw}, {off}')}, 255")
      biased = f.op(f"zext i32 {f.op(f'add i32 {code}, {1023 - 127}')} to i64")
      pow2 = f.op(f"bitcast i64 {f.op(f'shl i64 {biased}, 52')} to double")
      sc = f.op(f"select i1 {f.op(f'icmp eq i32 {code}, 255')}, double 0x7FF8000000000000, double {pow2}")
      x = f.op(f"fmul double {x}, {sc}")
    f.st(ty, x, f.gep(mat, f.op(f"mul i64 %u{k}, {w}")), "mx")
    close()
    mats.append(mat)
  am, bm, *im = mats
  # 3. per row m: a running <N x ety> row from -0.0 (0; f64: from C, scattered to the elements through the D table),
  # plus A[m, k] * B[k, :] for k in order (vectorised over n)
  N, K, n = t.n, t.a.shape[1], t.regs[2] * L  # (K: A's columns, the compressed ones of a sparse A)
  g = table(f, f"mx{i}.d", "i32", t.d.reshape(-1))
  vty, add, mul = f"<{N} x {ety}>", "add" if integer else "fadd", "mul" if integer else "fmul"
  acc, run = f.alloca(f"[{t.m * N} x {ety}], align 64"), f.alloca(vty)
  def slot(dd: str) -> str:  # D/C word `dd` (slot-major) -> its low register's word (slot v: rows 2v, 2v + 1)
    v = f.op(f"udiv i64 {dd}, {L}")
    return f.op(f"add i64 {dd}, {f.op(f'mul i64 {v}, {L}')}")
  if f64:
    f.emit(f"store [{t.m * N} x double] zeroinitializer, ptr {acc}")
    if cbuf is not None:
      close = loop(f, t.d.size, "cc")
      at = f.op(f"zext i32 {f.ld('i32', f.gep(g, f.op('mul i64 %cc, 4')), 'mxtab')} to i64")
      lo = f.op(f"mul i64 {slot('%cc')}, 4")
      x = _pair(f, f.ld("i32", f.gep(cbuf, lo), "mx"), f.ld("i32", f.gep(cbuf, f.op(f"add i64 {lo}, {4 * L}")), "mx"))
      f.st("double", _cmods(f, x, neg[2]), f.gep(acc, f.op(f"mul i64 {at}, 8")), "mx")
      close()
  close_m = loop(f, t.m, "mm")
  row = f.gep(acc, f.op(f"mul i64 %mm, {N * sz}"))
  start = f.ld(vty, row, "mx", ", align 8") if f64 else "zeroinitializer" if integer else _splat(N, "double", "-0.0")
  f.emit(f"store {vty} {start}, ptr {run}")
  close_k = loop(f, K, "kk")
  sel = None
  if t.idx is not None:  # (column c multiplies B's row 4 * (c // 2) + its index)
    mk = f.op(f"add i64 {f.op(f'mul i64 %mm, {K}')}, %kk")
    ix = f.op(f"zext i32 {f.ld('i32', f.gep(im[0], f.op(f'mul i64 {mk}, 4')), 'mx')} to i64")
    base = f.op("lshr i64 %kk, 1")
    sel = f.op(f"add i64 {f.op(f'shl i64 {base}, 2')}, {ix}")
  xs, brow = k_step(f, ety, N, K, am, bm, sz, "mx", row=sel)
  cur = f.op(f"load {vty}, ptr {run}")
  nxt = f.op(f"call {vty} @llvm.fma.v{N}f64({vty} {xs}, {vty} {brow}, {vty} {cur})") if f64 else \
      f.op(f"{add} {vty} {cur}, {f.op(f'{mul} {vty} {xs}, {brow}')}")
  f.emit(f"store {vty} {nxt}, ptr {run}")
  close_k()
  f.st(vty, f.op(f"load {vty}, ptr {run}"), row, "mx", f", align {sz}")
  close_m()
  # 4. D slot v of lane l = acc[d[v, l]] (+ C), rounded (a NaN: the default NaN), then the D rows stored
  out = rows(d, t.regs[2]) if t.half is not None else f.alloca(f"[{n} x i32], align 64")  # (16-bit: D's old rows)
  close = loop(f, t.d.size, "dd")
  at = f.op(f"zext i32 {f.ld('i32', f.gep(g, f.op('mul i64 %dd, 4')), 'mxtab')} to i64")
  y = f.ld(ety, f.gep(acc, f.op(f"mul i64 {at}, {sz}")), "mx")
  if f64:
    bits = f.op(f"select i1 {f.op(f'fcmp uno double {y}, 0.0')}, i64 {layouts.NAN64}, i64 "
                f"{f.op(f'bitcast double {y} to i64')}")
    lo = f.op(f"mul i64 {slot('%dd')}, 4")
    f.st("i32", f.op(f"trunc i64 {bits} to i32"), f.gep(out, lo), "mx")
    f.st("i32", f.op(f"trunc i64 {f.op(f'lshr i64 {bits}, 32')} to i32"), f.gep(out, f.op(f"add i64 {lo}, {4 * L}")),
         "mx")
  elif t.half is not None:  # 16-bit results into their halves of `out` (D's rows: the other halves stay)
    h = table(f, f"mx{i}.h", "i32", t.half)
    v = f.op(f"udiv i64 %dd, {L}")
    p = f.op(f"zext i32 {f.ld('i32', f.gep(h, f.op(f'mul i64 {v}, 4')), 'mxtab')} to i64")
    reg, hi, lane = f.op(f"lshr i64 {p}, 1"), f.op(f"and i64 {p}, 1"), f.op(f"urem i64 %dd, {L}")
    word = f.op(f"add i64 {f.op(f'mul i64 {reg}, {L}')}, {lane}")
    byte = f.op(f"add i64 {f.op(f'mul i64 {word}, 4')}, {f.op(f'mul i64 {hi}, 2')}")
    cv = "0.0" if cbuf is None else \
        _cmods(f, _element(f, f.op(f"zext i16 {f.ld('i16', f.gep(cbuf, byte), 'mx')} to i32"), t.acc), neg[2])
    f.st("i16", _round16(f, f.op(f"fadd double {y}, {cv}"), t.acc), f.gep(out, byte), "mx")
  else:
    cv = None if cbuf is None else f.ld("i32", f.gep(cbuf, f.op("mul i64 %dd, 4")), "mx")
    if integer:
      if clamp:  # (the exact sum in i64, saturated; the products' sum fits i32: |x| <= 64 * 2**14)
        wide = f.op(f"add i64 {f.op(f'sext i32 {y} to i64')}, {'0' if cv is None else f.op(f'sext i32 {cv} to i64')}")
        lo = f.op(f"call i64 @llvm.smax.i64(i64 {wide}, i64 -2147483648)")
        r = f.op(f"trunc i64 {f.op(f'call i64 @llvm.smin.i64(i64 {lo}, i64 2147483647)')} to i32")
      else:
        r = y if cv is None else f.op(f"add i32 {y}, {cv}")
    else:
      cd = "0.0" if cv is None else _cmods(f, f.op(f"fpext float {f.op(f'bitcast i32 {cv} to float')} to double"),
                                           neg[2])
      y = f.op(f"fadd double {y}, {cd}")
      r32 = f.op(f"bitcast float {f.op(f'fptrunc double {y} to float')} to i32")
      r = f.op(f"select i1 {f.op(f'fcmp uno double {y}, 0.0')}, i32 {layouts.NAN}, i32 {r32}")
    f.st("i32", r, f.gep(out, f.op("mul i64 %dd, 4")), "mx")
  close()
  for v in range(t.regs[2]):
    row = f.ld(f"<{L} x i32>", f.gep(out, str(4 * L * v)), "mx", ", align 64")
    f.st(f"<{L} x i32>", row, _row(comp, f, d.file, d.index + v), (d.file, d.index + v), ", align 4")
  comp.wrote[d.file] = comp.wrote.get(d.file, 0) | ((1 << t.regs[2]) - 1) << d.index
  comp.bump_pc(f, op)
  text = comp.finish(f, i, str(L))
  return "\n".join(f.globals) + "\n" + text


def _places(f, name: str, tab, L: int) -> str:
  """A module constant of table `tab`'s (register, lane, bit offset) rows (amd/matrix.py Tables), each entry
  (register * L + lane) << SHIFT | bit offset."""
  flat = tab.reshape(-1, 3)
  return table(f, name, "i32", (flat[:, 0] * L + flat[:, 1]) << SHIFT | flat[:, 2])


def _place(f, g: str, i: str) -> tuple[str, str]:
  """Entry `i` (an i64) of `_places` table `g`: (its word's byte offset in a buffer of rows (i64), its bit offset)."""
  e = f.ld("i32", f.gep(g, f.op(f"mul i64 {i}, 4")), "mxtab")
  word = f.op(f"shl i32 {f.op(f'lshr i32 {e}, {SHIFT}')}, 2")
  return f.op(f"zext i32 {word} to i64"), f.op(f"and i32 {e}, {(1 << SHIFT) - 1}")


def _cmods(f, c: str, flags) -> str:
  """C's double `c` with its modifiers (amd/matrix.py's Neg): the absolute value, then the negation."""
  c = f.op(f"call double @llvm.fabs.f64(double {c})") if flags[1] else c
  return f.op(f"fneg double {c}") if flags[0] else c


def _round16(f, y: str, kind: str) -> str:
  """Double `y` rounded to nearest even F16 or BF16 (an i16; a NaN: the default NaN): amd/matrix.py's round16."""
  if kind == "F16":
    r = f.op(f"bitcast half {to_half(f, y)} to i16")
  else:
    bits = f.op(f"bitcast float {rbf(f, odd32(f, y))} to i32")
    r = f.op(f"trunc i32 {f.op(f'lshr i32 {bits}, 16')} to i16")
  return f.op(f"select i1 {f.op(f'fcmp uno double {y}, 0.0')}, i16 {0x7e00 if kind == 'F16' else 0x7fc0}, i16 {r}")


def _pair(f, lo: str, hi: str) -> str:
  """The double whose low and high words are i32s `lo` and `hi`."""
  h = f.op(f"zext i32 {hi} to i64")
  w = f.op(f"or i64 {f.op(f'zext i32 {lo} to i64')}, {f.op(f'shl i64 {h}, 32')}")
  return f.op(f"bitcast i64 {w} to double")


def k_step(f, ety: str, N: int, K: int, a: str, b: str, sz: int, tag: str, k: str = "%kk",
           row: str | None = None) -> tuple[str, str]:
  """Inside the m and k loops (%mm, `k`): A[m, k] of the row-major (M x K) matrix at `a` splat over N lanes, and row
  `row` (default k) of the (rows x N) one at `b` (<N x ety>; elements `sz` bytes, TBAA tag `tag`)."""
  mk = f.op(f"add i64 {f.op(f'mul i64 %mm, {K}')}, {k}")
  x = f.ld(ety, f.gep(a, f.op(f"mul i64 {mk}, {sz}")), tag)
  at = f.op(f"mul i64 {row or k}, {N * sz}")
  return broadcast(f, ety, x, N), f.ld(f"<{N} x {ety}>", f.gep(b, at), tag, f", align {sz}")


def broadcast(f, ty: str, v: str, n: int) -> str:
  """Value `v` of type `ty` in every lane of an <n x ty> vector."""
  return f.op(f"shufflevector <1 x {ty}> {f.op(f'insertelement <1 x {ty}> poison, {ty} {v}, i64 0')}, "
              f"<1 x {ty}> poison, <{n} x i32> zeroinitializer")


def _splat(n: int, ty: str, v: str) -> str:
  return f"<{', '.join([f'{ty} {v}'] * n)}>"


def _element(f, raw: str, kind: str) -> str:
  """The element in the low bits of i32 `raw`, exactly as a double (i32 for integers): amd/matrix.py's _value."""
  if kind in FP8:
    return f.op(f"fpext float {fp8_decode(f, f.op(f'trunc i32 {raw} to i8'), kind)} to double")
  if kind == "F16":
    h = f.op(f"bitcast i16 {f.op(f'trunc i32 {raw} to i16')} to half")
    return f.op(f"fpext half {h} to double")
  if kind == "BF16":
    x = f.op(f"bitcast i32 {f.op(f'shl i32 {raw}, 16')} to float")
    return f.op(f"fpext float {x} to double")
  if kind == "F32":
    return f.op(f"fpext float {f.op(f'bitcast i32 {raw} to float')} to double")
  w = {"I4": 4, "U4": 4, "U2": 2}.get(kind, 8)  # (U2: a sparse index)
  return f.op(f"{'sext' if kind[0] == 'I' else 'zext'} i{w} {f.op(f'trunc i32 {raw} to i{w}')} to i32")
