"""gputwin.abi.kgsl against msm_kgsl.h: every struct's size and field offsets, every ioctl number and every constant,
computed by a C compiler from the vendor header (the oracle), plus the kgsl facts the mock relies on."""
import ctypes, os, pathlib, shutil, subprocess, tempfile
import pytest
from gputwin.abi import ioc, kgsl

HEADER = pathlib.Path("/work/shared/vendor/kgsl/mesa-25.0.7/src/freedreno/vulkan/msm_kgsl.h")
CC = next((c for c in ("gcc", "clang", "cc") if shutil.which(c)), None)
pytestmark = pytest.mark.skipif(CC is None or not HEADER.exists(), reason="no C compiler or no vendor msm_kgsl.h")
NOT_IN_HEADER = {"KGSL_MEMSTORE_GLOBAL", "KGSL_IOC_TYPE_"}   # kgsl_device.h facts, not UAPI macros


def _structs():
  return [(n, [f for f, _ in T._fields_]) for n, T in vars(kgsl).items()
          if isinstance(T, type) and issubclass(T, ctypes.Structure) and n.startswith("kgsl_") and T.__name__ == n]


def _consts():
  return [n for n, v in vars(kgsl).items() if isinstance(v, int) and n.isupper() and
          n.startswith(("KGSL_", "IOCTL_KGSL_")) and n not in NOT_IN_HEADER]


@pytest.fixture(scope="module")
def facts():
  lines = ["#include <stdio.h>", "#include <stddef.h>", "#define __user", f'#include "{HEADER}"', "int main(void) {"]
  for s, fields in _structs():
    lines.append(f'printf("S {s} %zu\\n", sizeof(struct {s}));')
    lines += [f'printf("O {s} {f} %zu\\n", offsetof(struct {s}, {f}));' for f in fields]
  lines += [f'printf("V {c} %llu\\n", (unsigned long long)({c}));' for c in _consts()]
  lines.append("return 0; }")
  with tempfile.TemporaryDirectory() as d:
    src, exe = os.path.join(d, "facts.c"), os.path.join(d, "facts")
    pathlib.Path(src).write_text("\n".join(lines))
    r = subprocess.run([CC, "-w", src, "-o", exe], capture_output=True, text=True)
    assert r.returncode == 0, f"header fact program does not compile:\n{r.stderr[-3000:]}"
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
  res = {"S": {}, "O": {}, "V": {}}
  for line in out.splitlines():
    tag, *rest = line.split()
    if tag == "O": res["O"][rest[0], rest[1]] = int(rest[2])
    else: res[tag][rest[0]] = int(rest[1])
  return res


def test_struct_sizes_and_offsets_match_the_header(facts):
  structs = _structs()
  assert len(structs) >= 90
  for name, fields in structs:
    T = getattr(kgsl, name)
    assert ctypes.sizeof(T) == facts["S"][name], name
    for f in fields: assert getattr(T, f).offset == facts["O"][name, f], (name, f)
  s = facts["S"]
  assert (s["kgsl_devinfo"], s["kgsl_gpu_command"], s["kgsl_command_object"], s["kgsl_gpuobj_alloc"]) == \
         (40, 64, 32, 48)


def test_ioctl_numbers_and_constants_match_the_header(facts):
  names = _consts()
  assert len(names) >= 250 and len(kgsl.IOCTL_NUMBERS) == 62
  for n in names:   # an `int` macro with bit 31 set (KGSL_GPUMEM_CACHE_RANGE, 1 << 31U) prints sign-extended
    v = facts["V"][n]
    assert getattr(kgsl, n) == (v & 0xFFFFFFFF if v >= 1 << 63 else v), n
  assert kgsl.IOCTL_KGSL_GPU_COMMAND == (3 << 30) | (64 << 16) | (9 << 8) | 0x4A == 0xC040094A
  assert kgsl.IOCTL_KGSL_DEVICE_GETPROPERTY == 0xC0180902


def test_table_is_indexed_by_number():
  assert len(kgsl.IOCTL_BY_NR) == len(kgsl.IOCTLS)   # one row per _IOC_NR: what the driver dispatches on
  for name, nr, d, T in kgsl.IOCTLS:
    req = kgsl.IOCTL_NUMBERS[name]
    assert (ioc.IOC_NR(req), ioc.IOC_DIR(req), ioc.IOC_SIZE(req), ioc.IOC_TYPE(req)) == (nr, d, ctypes.sizeof(T), 9)


def test_memstore_and_timestamp_helpers():
  assert ctypes.sizeof(kgsl.kgsl_devmemstore) == 40
  assert kgsl.KGSL_MEMSTORE_OFFSET(3, "eoptimestamp") == 3 * 40 + 8
  assert kgsl.timestamp_cmp(5, 4) == 1 and kgsl.timestamp_cmp(4, 5) == -1 and kgsl.timestamp_cmp(7, 7) == 0
  assert kgsl.timestamp_cmp(2, 0xFFFFFFF0) == 1      # wraps: 2 comes after 0xFFFFFFF0
  assert kgsl.KGSL_CONTEXT_PRIORITY(0x5000 | kgsl.KGSL_CONTEXT_PREAMBLE) == 5
