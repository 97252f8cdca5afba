"""Host CPU targets (x86_64, aarch64): kernels compiled by backend_host run under unicorn (gputwin.emu.host) and
equal the numpy reference (integers exactly, floats within the stated bounds), the examples' own numpy oracles, and
on an x86_64 machine a native run of the same LLVM IR (llvmlite's MCJIT, libm from the C library); `-S` prints
capstone's disassembly with the IR op each instruction came from."""
import ctypes
import platform
import threading
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputwin.compiler import HOST_TARGETS, compile, ir, reference
from gputwin.compiler.examples import EXAMPLES, ulp_diff
from gputwin.emu import launch
from gputwin.errors import CompileError

from test_fuzz import PROFILE, Gen, N, inputs, same

NATIVE = platform.machine() in ("x86_64", "AMD64")


def copies(args):
  return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


_JIT = {}


def _service(types, rt, fn):
  """A ctypes callback for a libm/compiler-rt symbol: f16/bf16 travel as the low 16 bits of an xmm register, which
  ctypes sees as a float with those bits."""
  half = lambda x: np.array([x], np.float32).view(np.uint32)[0] & 0xffff  # noqa: E731
  conv = {"f32": np.float32, "f64": np.float64, "f16": lambda x: np.array([half(x)], np.uint16).view(np.float16)[0]}

  def call(*xs):
    v = fn(*(conv[t](x) for t, x in zip(types, xs) if t[0] != "*"))
    for p, t, r in zip([x for t, x in zip(types, xs) if t[0] == "*"], [t[1:] for t in types if t[0] == "*"],
                       v if rt is None else ()):
      ctypes.memmove(p, np.array([r], np.dtype(t.replace("f", "float"))).tobytes(), int(t[1:]) // 8)
    if rt in ("f16", "bf16"):
      v = int(v) if rt == "bf16" else int(np.array([v], np.float16).view(np.uint16)[0])
      return float(np.array([v], np.uint32).view(np.float32)[0])
    return None if rt is None else float(v)
  c = {"f64": ctypes.c_double, None: None}
  return ctypes.CFUNCTYPE(c.get(rt, ctypes.c_float),
                          *(ctypes.c_void_p if t[0] == "*" else c.get(t, ctypes.c_float) for t in types))(call)


def run_native(c, grid, block, args):
  """The kernel's LLVM IR through llvmlite's MCJIT on this x86_64 machine, work-items as the emulated launcher
  runs them: the kernel's own loop, or (with barriers) one thread per work-item meeting at a threading.Barrier.
  libm and compiler-rt symbols are bound to the functions the emulated launcher services them with, so the two
  runs differ only where unicorn or the loader would be wrong."""
  import llvmlite.binding as llvm
  from gputwin.emu.host.launch import pack_args, load
  from gputwin.emu.host.libm import SERVICES
  if not _JIT:
    llvm.initialize_native_target(); llvm.initialize_native_asmprinter()
    _JIT["barrier"] = None
    _JIT["cb"] = [ctypes.CFUNCTYPE(None)(lambda: _JIT["barrier"].wait())]
    llvm.add_symbol("__gputwin_barrier", ctypes.cast(_JIT["cb"][0], ctypes.c_void_p).value)
    for name, svc in SERVICES.items():
      _JIT["cb"].append(_service(*svc))
      llvm.add_symbol(name, ctypes.cast(_JIT["cb"][-1], ctypes.c_void_p).value)
  mod = llvm.parse_assembly(c.llvm_ir)
  tm = llvm.Target.from_triple("x86_64-unknown-linux-gnu").create_target_machine(cpu="nehalem", opt=2)
  ee = llvm.create_mcjit_compiler(mod, tm)
  ee.finalize_object()
  fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
    ee.get_function_address(c.name))
  meta = load(c.code_object, "x86_64").kernels[c.name]
  keep = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args]
  data, _ = pack_args(meta, keep, c.name, lambda a: a.ctypes.data)
  g3 = tuple(grid) + (1,) * (3 - len(grid)) if not isinstance(grid, int) else (grid, 1, 1)
  b3 = tuple(block) + (1,) * (3 - len(block)) if not isinstance(block, int) else (block, 1, 1)
  buf, dims = ctypes.create_string_buffer(data, max(len(data), 1)), (ctypes.c_int32 * 8)(*b3, *g3, -1, -1)
  n, items = int(np.prod(b3)), int(np.prod(b3) * np.prod(g3))
  if not meta["barrier"]:
    fn(ctypes.addressof(buf), ctypes.addressof(dims), 0, items)
  else:
    for g in range(items // n):
      _JIT["barrier"] = threading.Barrier(n)
      ts = [threading.Thread(target=fn, args=(ctypes.addressof(buf), ctypes.addressof(dims), g * n + i, 1))
            for i in range(n)]
      for t in ts: t.start()
      for t in ts: t.join()
  for a, k in zip(args, keep):
    if isinstance(a, np.ndarray) and k is not a: a[...] = k
  del ee


def check_close(got, want, ulps, what):
  if got.dtype.kind == "f":
    assert int(ulp_diff(got, want).max()) <= ulps, f"{what}: {got} vs {want}"
  else:
    np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("arch", HOST_TARGETS)
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_equal_reference_and_oracle(name, arch):
  ex = EXAMPLES[name]
  c = compile(ex.kernel, arch)
  args, grid, block = ex.inputs(np.random.default_rng(3))
  ref, emu = copies(args), copies(args)
  reference.launch(c.ir, grid=grid, block=block, args=ref)
  stats = launch(c.code_object, c.name, grid=grid, block=block, args=emu, arch=arch)
  assert stats.instructions > 0 and stats.lane_instructions == stats.instructions
  want = ex.oracle(copies(args))
  for o, w in zip(ex.outputs, want):
    check_close(emu[o], ref[o], ex.ulps, f"{name} on {arch} vs the reference")
    assert np.allclose(emu[o], w, rtol=1e-4, atol=1e-5) if w.dtype.kind == "f" else np.array_equal(emu[o], w)
  if NATIVE and arch == "x86_64":
    nat = copies(args)
    run_native(c, grid, block, nat)
    for o in ex.outputs:
      check_close(emu[o], nat[o], 0, f"{name}: unicorn vs native x86_64")


MATH = ("sqrt", "rsqrt", "exp", "exp2", "log", "log2", "sin", "cos", "floor", "ceil", "trunc", "abs")
# Bit-exact vs the reference: libm calls are serviced with the reference's own numpy functions, rsqrt is 1/sqrt in
# two correctly rounded steps as in the reference, every other op is one IEEE operation; except fma, which the host
# fuses (f32, f64: one rounding, checked against exact arithmetic; f16, bf16: an f32 fma rounded again) and the
# reference computes in f64 (the same for f32; two roundings for f64, f16, bf16: within 1 ulp)


def nearest(q: Fraction, dt) -> float:
  """q rounded to the nearest value of float type dt, ties to even (a search over the neighbours)."""
  dt = np.dtype(dt).type
  f = np.array([float(q)]).astype(dt)[0]
  cands = [f, np.nextafter(f, dt(np.inf)), np.nextafter(f, dt(-np.inf))]
  bits = lambda c: int(np.array([c], dt).view(f"u{np.dtype(dt).itemsize}")[0])  # noqa: E731
  return min(cands, key=lambda c: (abs(Fraction(float(c)) - q), bits(c) & 1))


@pytest.mark.parametrize("arch", HOST_TARGETS)
@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16"])
def test_math_and_casts_match_reference(arch, t):
  """Every math op, fma, division, rem and float<->int casts of one type: row j of %y holds op j's results."""
  ops = [f"{m} %a" for m in MATH] + ["fma %a, %b, %a", "div %a, %b", "rem %a, %b", "cast %c"]
  lines = [f"kernel @m(%x: global<{t}>, %y: global<{t}>, %z: global<{t}>, %w: global<i32>) {{",
           "  %i: i32 = workitem.id.x", f"  %a: {t} = load %x, %i", f"  %b: {t} = load %z, %i", "  %c: i32 = cast %a",
           "  store %w, %i, %c"]
  for j, o in enumerate(ops):
    lines += [f"  %r{j}: {t} = {o}", f"  %k{j}: i32 = const {64 * j}", f"  %o{j}: i32 = add %i, %k{j}",
              f"  store %y, %o{j}, %r{j}"]
  c = compile(ir.parse("\n".join(lines + ["}"]) + "\n"), arch)
  rng = np.random.default_rng(5)
  dt = np.float32 if t == "bf16" else np.dtype(t.replace("f", "float"))
  x = (rng.standard_normal(64) * 4).astype(dt)
  x[:6] = [0.0, -0.0, 1.0, 0.5, 10.0, -3.0]
  z = (rng.standard_normal(64) * 3).astype(dt)
  if t == "bf16":   # bf16 buffers hold bit patterns, as on a device (the reference reads them so too)
    x, z = ((ir.bf16_round(v).view(np.uint32) >> 16).astype(np.uint16) for v in (x, z))
  args = [x, np.zeros(64 * len(ops), x.dtype), z, np.zeros(64, np.int32)]
  ref, emu = copies(args), copies(args)
  reference.launch(c.ir, grid=1, block=64, args=ref)
  launch(c.code_object, "m", grid=1, block=64, args=emu, arch=arch)
  np.testing.assert_array_equal(emu[3], ref[3])
  got, want = (v.reshape(len(ops), 64) for v in (emu[1], ref[1]))
  if t == "bf16":
    got, want = ((v.astype(np.uint32) << 16).view(np.float32) for v in (got, want))
  for o, g, w in zip(ops, got, want):
    ok = (g == w) | (np.isnan(g) & np.isnan(w))
    if o.startswith("fma") and t in ("f32", "f64"):   # fused: x*z + x rounded once, exactly (fractions)
      ok = g == np.array([nearest(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(a)), dt)
                          for a, b in zip(x, z)], dt)
    elif o.startswith("fma"):   # f32 fma rounded to 16 bits (LLVM's promotion) vs the reference's two roundings
      xv, zv = ((v.astype(np.uint32) << 16).view(np.float32) if t == "bf16" else v for v in (x, z))
      size = np.abs(xv.astype(np.float64) * zv) + np.abs(xv.astype(np.float64))
      ok |= np.abs(g.astype(np.float64) - w) <= size * 2.0 ** -(7 if t == "bf16" else 10)
    assert ok.all(), f"{t} {o} on {arch}: {g[~ok]} vs {w[~ok]}"


@pytest.mark.parametrize("arch", HOST_TARGETS)
@PROFILE
@given(data=st.data())
def test_random_programs_equal_reference_and_native(arch, data):
  k = Gen(data).kernel()
  c = compile(k, arch)
  ref, emu = inputs(4), inputs(4)
  reference.launch(c.ir, grid=1, block=N, args=ref)
  launch(c.code_object, c.name, grid=1, block=N, args=emu, arch=arch)
  same(ref, emu, f"{arch}:\n{c.ir}")
  if NATIVE and arch == "x86_64":   # (the native comparison runs x86_64 code on this machine)
    nat = inputs(4)
    run_native(c, 1, N, nat)
    same(nat, emu, f"native vs unicorn:\n{c.ir}")


@pytest.mark.parametrize("arch", HOST_TARGETS)
def test_type_kernels_equal_reference(arch):
  """tests/compiler/test_types.py's kernels (8- to 64-bit integers, f16, bf16, f64, private arrays, saturating
  casts, LDS) on the host targets, bit-exact with the reference."""
  import test_types as T
  for kf in T.KERNELS:
    T.test_llvm_backend_types_bit_exact(kf, arch)
  for t in (T.test_narrow_integers, T.test_half, T.test_wide_integers, T.test_bfloat, T.test_double):
    t(arch, "llvm")


def test_listing_names_ir_ops():
  c = compile(EXAMPLES["reduce_sum"].kernel, "aarch64")
  assert "reduce_sum.body:" in c.asm and "; -> __gputwin_barrier" in c.asm
  assert any(ln.strip().startswith("; IR") and "barrier" in ln for ln in c.asm.splitlines())
  assert "ldr" in c.asm and "bl " in c.asm
  x = compile(EXAMPLES["saxpy"].kernel, "x86_64")
  assert "movss" in x.asm or "mulss" in x.asm


def test_host_targets_take_llvm_only():
  with pytest.raises(CompileError, match="backend='llvm'"):
    compile(EXAMPLES["saxpy"].kernel, "x86_64", backend="direct")


def test_compile_tool_writes_object_and_listing(tmp_path, capsys):
  from gputwin.compiler.tool import compile_main
  src = tmp_path / "k.py"
  src.write_text("from gputwin.compiler import *\n@kernel\ndef fill(y: Ptr[i32], v: i32):\n  y[global_id(0)] = v\n")
  assert compile_main([str(src), "--arch", "aarch64"]) == 0
  assert (tmp_path / "k.aarch64.o").read_bytes()[:4] == b"\x7fELF"
  assert compile_main([str(src), "--arch", "x86_64", "-S"]) == 0
  out = capsys.readouterr().out
  assert "fill:" in out and "; IR" in out and "y[global_id(0)] = v" not in out   # IR ops, with their locations
  y = np.zeros(70, np.int32)
  launch(str(tmp_path / "k.aarch64.o"), "fill", grid=2, block=35, args=[y, 9], arch="aarch64")
  assert (y == 9).all()
