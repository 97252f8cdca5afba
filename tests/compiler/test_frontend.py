"""Bad input never crashes: ill-typed kernels, unsupported Python, target limits -> CompileError at the Python line
(marked `# ERR` below). Good input: the frontend's IR matches an independent numpy oracle on the host reference."""
import inspect

import numpy as np
import pytest

from gputwin.compiler import (Ptr, compile, exp, f32, f64, global_id, i32, kernel, reference, shared, u32,
                              workitem_id)
from gputwin.compiler.examples import EXAMPLES
from gputwin.errors import CompileError


@kernel
def mixed_types(x: Ptr[f32], n: i32):
  i = global_id(0)
  x[i] = x[i] + i  # ERR


@kernel
def while_loop(x: Ptr[f32], n: i32):
  i = global_id(0)
  while i < n:  # ERR
    i += 1


@kernel
def early_return(x: Ptr[f32], n: i32):
  i = global_id(0)
  if i >= n:
    return  # ERR
  x[i] = 0.0


@kernel
def undefined_name(x: Ptr[f32]):
  x[0] = y  # ERR  # noqa: F821


@kernel
def branch_types(x: Ptr[f32], n: i32):
  i = global_id(0)
  if i < n:  # ERR
    v = 1.5
  else:
    v = 2
  x[i] = v


@kernel
def literal_type(x: Ptr[f32], n: i32):
  v = 0
  v = 1.5  # ERR
  x[0] = f32(v)


@kernel
def int_true_div(x: Ptr[i32], n: i32):
  x[0] = n / 2  # ERR


@kernel
def int_condition(x: Ptr[i32], n: i32):
  if n:  # ERR
    x[0] = 1


@kernel
def list_comp(x: Ptr[i32], n: i32):
  x[0] = [n for _ in range(3)]  # ERR


@kernel
def unknown_call(x: Ptr[f32], n: i32):
  x[0] = print(n)  # ERR


@kernel
def no_annotation(x, n: i32):  # ERR
  x[0] = n


@kernel
def float_index(x: Ptr[f32], a: f32):
  x[a] = 1.0  # ERR


@kernel
def break_stmt(x: Ptr[f32], n: i32):
  for i in range(n):
    break  # ERR


@kernel
def chained_compare(x: Ptr[f32], n: i32):
  i = global_id(0)
  if 0 < i < n:  # ERR
    x[i] = 1.0


@kernel
def shared_dynamic(x: Ptr[f32], n: i32):
  s = shared(f32, n)  # ERR
  s[0] = 1.0


@kernel
def pointer_under_condition(x: Ptr[f32], y: Ptr[f32], n: i32):
  p = x
  if n > 0:  # ERR
    p = y
  p[0] = 1.0


@kernel
def pointer_in_loop(x: Ptr[f32], y: Ptr[f32], n: i32):
  p = x
  for i in range(n):  # ERR
    p[i] = 1.0
    p = y


@kernel
def loop_type_change(x: Ptr[f32], n: i32):
  acc = 0
  for i in range(n):
    acc = f32(i)  # ERR
  x[0] = acc


def _err_line(kf) -> int:
  lines, first = inspect.getsourcelines(kf.fn)
  return first + next(i for i, l in enumerate(lines) if "# ERR" in l)


BAD = [(mixed_types, "cast one explicitly"), (while_loop, "`while` loops are not supported"),
       (early_return, "early `return`"), (undefined_name, "name `y` is not defined"),
       (branch_types, "`v` is f32 in one branch and i32 in the other"),
       (literal_type, "float literal 1.5 used where i32 is expected"), (int_true_div, "use `//`"),
       (int_condition, "condition must be bool, got i32"), (list_comp, "unsupported expression: ListComp"),
       (unknown_call, "unsupported function `print`"), (no_annotation, "needs a type annotation"),
       (float_index, "index must be an integer, got f32"), (break_stmt, "`break` is not supported"),
       (chained_compare, "chained comparisons"), (shared_dynamic, "compile-time integer"),
       (loop_type_change, "`acc` was i32, cannot assign a f32"),
       (pointer_under_condition, "buffer variable `p` is reassigned under a condition"),
       (pointer_in_loop, "buffer variable `p` is reassigned in a loop")]


@pytest.mark.parametrize("kf,msg", BAD, ids=[k.name for k, _ in BAD])
def test_bad_kernel_points_at_python_line(kf, msg):
  with pytest.raises(CompileError) as e:
    compile(kf, "gfx1100")
  s = str(e.value)
  assert msg in s, s
  assert e.value.loc.line == _err_line(kf), s
  assert s.startswith(f"{__file__}:{_err_line(kf)}:"), s


@kernel
def wide_sum(x: Ptr[f32], y: Ptr[f32]):
  i = global_id(0)
  a = x[i]
  b = x[i + 1]
  c = x[i + 2]
  d = x[i + 3]
  e = x[i + 4] * a
  y[i] = a + b + c + d + e


def test_register_pressure_is_a_located_error():
  with pytest.raises(CompileError) as e:
    compile(wide_sum, "gfx1100", max_vgprs=14)
  lines, first = inspect.getsourcelines(wide_sum.fn)
  assert "register pressure" in str(e.value) and first < e.value.loc.line < first + len(lines), str(e.value)
  compile(wide_sum, "gfx1100")  # the real budget is plenty


def test_register_pressure_from_ir():
  """300 values live at once cannot fit 256 VGPRs: the error names the IR location of the value that did not fit."""
  n = 300
  body = [f"  %c{j}: i32 = const {j}\n  %v{j}: f32 = load %x, %c{j}  # big.py:{j + 1}:1" for j in range(n)]
  acc = "%v0"
  for j in range(1, n):
    body.append(f"  %s{j}: f32 = add {acc}, %v{j}")
    acc = f"%s{j}"
  text = "kernel @big(%x: global<f32>) {\n" + "\n".join(body) + f"\n  store %x, %c0, {acc}\n}}\n"
  with pytest.raises(CompileError, match=r"big\.py:\d+:1: error: register pressure"):
    compile(text, "gfx942", optimize=False)
  compile(text, "gfx942", backend="llvm", optimize=False)   # LLVM spills or reorders: it compiles


@kernel
def f64_kernel(x: Ptr[f64], n: i32):
  i = global_id(0)
  if i < n:
    x[i] = exp(x[i])  # ERR


def test_unsupported_op_is_a_located_error_on_both_backends():
  """f64 exp: no AMD instruction (LLVM's AMDGPU target would abort the process on it)."""
  for backend in ("direct", "llvm"):
    with pytest.raises(CompileError) as e:
      compile(f64_kernel, "gfx1100", backend=backend)
    assert e.value.loc.line == _err_line(f64_kernel), str(e.value)


def test_kernel_is_not_callable_from_python():
  with pytest.raises(CompileError, match="cannot be called from Python"):
    EXAMPLES["saxpy"].kernel(1.0)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_reference_matches_numpy_oracle(name):
  """The frontend + host reference against numpy code written independently of the IR."""
  ex = EXAMPLES[name]
  args, grid, block = ex.inputs(np.random.default_rng(7))
  want = ex.oracle([a.copy() if isinstance(a, np.ndarray) else a for a in args])
  reference.launch(ex.kernel.ir, grid=grid, block=block, args=args)
  for o, w in zip(ex.outputs, want):
    if w.dtype.kind == "f": np.testing.assert_allclose(args[o], w, rtol=2e-5, atol=1e-6)
    else: np.testing.assert_array_equal(args[o], w)


@kernel
def scan_tuple_and_closure(x: Ptr[u32], y: Ptr[u32]):
  t = workitem_id(0)
  a, b = u32(t), u32(1)
  for k in range(3):
    a, b = b, a + b
  y[t] = a * SCALE if t % 2 == 0 else b


SCALE = 3


def test_tuple_assignment_swaps_and_module_constants():
  x, y = np.zeros(8, np.uint32), np.zeros(8, np.uint32)
  reference.launch(scan_tuple_and_closure.ir, grid=1, block=8, args=[x, y])
  def fib(t):
    a, b = t, 1
    for _ in range(3): a, b = b, a + b
    return a * 3 if t % 2 == 0 else b
  assert y.tolist() == [fib(t) for t in range(8)]


@kernel
def too_much_lds(x: Ptr[f32]):
  a = shared(f32, 10000)
  b = shared(f32, 10000)  # ERR
  a[0] = 1.0
  b[0] = 2.0
  x[0] = a[0] + b[0]


@pytest.mark.parametrize("backend", ["direct", "llvm"])
def test_lds_limit_is_a_located_error_not_an_llvm_abort(backend):
  """LLVM exits the process on an LDS overflow; we must stop first, at the line that crossed the limit."""
  with pytest.raises(CompileError, match="65536 bytes of LDS") as e:
    compile(too_much_lds, "gfx942", backend=backend)
  assert e.value.loc.line == _err_line(too_much_lds)
  compile(too_much_lds, "gfx950", backend=backend)     # CDNA4 has 160 KiB


@kernel
def lds_beyond_offset_field(x: Ptr[f32], y: Ptr[f32]):
  a = shared(f32, 20000)
  b = shared(f32, 64)
  t = workitem_id(0)
  a[19999 - t] = x[t]
  b[t] = x[t] * 2.0
  barrier()
  y[t] = a[19936 + t] + b[63 - t]


@pytest.mark.parametrize("backend", ["direct", "llvm"])
def test_gfx950_large_lds(backend):
  from _compiler_helpers import run_both
  c = compile(lds_beyond_offset_field, "gfx950", backend=backend)
  ref, emu = run_both(c, [np.arange(64, dtype=np.float32), np.zeros(64, np.float32)], 1, 64)
  np.testing.assert_array_equal(emu[1], ref[1])
  assert ref[1][0] == 63 + 126


@kernel
def short_circuit(x: Ptr[f32], y: Ptr[f32], n: i32):
  i = global_id(0)
  ok = i < n and x[i] > 0.0
  v = x[i] * 2.0 if i < n else 0.5
  w = i >= n or x[i] < -1.0
  if i < n and (x[i] > 1.0 or i % 2 == 0):
    y[i] = v + f32(ok) + f32(w)


@pytest.mark.parametrize("backend", ["direct", "llvm"])
def test_and_or_ifexp_short_circuit(backend):
  """`i < n and x[i] > 0` must not read x[n..]: x has 50 elements, 64 work-items run (the reference raises on any
  out-of-bounds read, the emulator faults)."""
  from _compiler_helpers import run_both
  args = [np.random.default_rng(0).standard_normal(50).astype(np.float32), np.zeros(64, np.float32), 50]
  for arch in ("gfx1100", "gfx942"):
    ref, emu = run_both(compile(short_circuit, arch, backend=backend), args, 1, 64)
    np.testing.assert_array_equal(emu[1], ref[1])
  x = args[0]
  want = np.where((x > 1) | (np.arange(50) % 2 == 0), 2 * x + (x > 0) + (x < -1), 0)
  np.testing.assert_array_equal(ref[1][:50], want.astype(np.float32))
