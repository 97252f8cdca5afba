"""Header facts of ../shared/vendor/nv computed by a C compiler (the oracle for gputwin.abi.nv): struct sizes, field
offsets and macro values, printed by a small C program built against the vendor headers. Two bundled headers include
files the bundle lacks (nvCpuUuid.h, nv_uvm_user_types.h, cl9010.h, ctrl0073system.h, ctrla081.h); the program gets
minimal stand-ins holding only what the included headers use (NvProcessorUuid is nv_uuid {NvU8 uuid[16]})."""
from __future__ import annotations
import functools, os, pathlib, re, shutil, subprocess, tempfile

ROOT = pathlib.Path("/work/shared/vendor/nv/open-gpu-kernel-modules")
INCLUDES = [ROOT / "src/common/sdk/nvidia/inc", ROOT / "src/common/sdk/nvidia/inc/ctrl",
            ROOT / "kernel-open/nvidia-uvm",
            ROOT / "src/nvidia/arch/nvalloc/unix/include"]
HEADERS = ["nvtypes.h", "nvos.h", "nvgputypes.h", "nv-ioctl.h", "nv-ioctl-numbers.h", "nv-unix-nvos-params-wrappers.h",
           "nv_escape.h", "alloc/alloc_channel.h", "class/cl0000.h", "class/cl0005.h", "class/cl0080.h",
           "class/cl2080.h",
           "class/cl2080_notification.h", "class/cl83de.h", "class/cl0070.h", "class/cl906f.h", "class/cla06f.h",
           "class/clc361.h", "ctrl/ctrl0000/ctrl0000gpu.h", "ctrl/ctrl0000/ctrl0000system.h", "ctrl/ctrl0080.h",
           "ctrl/ctrl2080/ctrl2080gpu.h", "ctrl/ctrl2080/ctrl2080gr.h", "ctrl/ctrl2080/ctrl2080perf.h",
           "ctrl/ctrl2080/ctrl2080fb.h", "ctrl/ctrl2080/ctrl2080bus.h", "ctrl/ctrl2080/ctrl2080mc.h", "ctrl/ctrla06c.h",
           "ctrl/ctrla06f.h", "ctrl/ctrlc36f.h", "ctrl/ctrl83de.h", "ctrl/ctrl906f.h", "nvstatuscodes.h",
           "uvm_linux_ioctl.h", "hwref/ampere/ga100/dev_fault.h"]
STUBS = {"nvCpuUuid.h": "#pragma once\ntypedef struct nv_uuid { NvU8 uuid[16]; } NvUuid;\n"
                        "typedef NvUuid NvProcessorUuid;\n",
         "nv_uvm_user_types.h": "", "class/cl9010.h": "typedef void (*OSVBLANKCALLBACKPROC)(void *, NvU32);\n",
         "ctrl/ctrl0073/ctrl0073system.h": "#define NV0073_CTRL_SYSTEM_ACPI_ID_MAP_MAX_DISPLAYS 16\n",
         "ctrl/ctrla081.h": ""}


def compiler() -> str | None:
  return next((c for c in ("gcc", "clang-22", "clang", "cc") if shutil.which(c)), None)


def available() -> bool: return compiler() is not None and ROOT.exists()


@functools.lru_cache(maxsize=None)
def facts(structs: tuple[tuple[str, tuple[str, ...]], ...], consts: tuple[str, ...],
          fields: tuple[str, ...] = ()) -> dict:
  """{'sizeof': {struct: n}, 'offsetof': {(struct, field): n}, 'value': {macro: int | None (undefined)},
  'field': {macro: (hi, lo)}} for the given (struct, fields), value macros and hi:lo field macros (DRF ranges)."""
  lines = ["#include <stdio.h>", "#include <stddef.h>"] + [f'#include "{h}"' for h in HEADERS] + ["int main(void) {"]
  for s, flds in structs:
    lines.append(f'printf("S %s %zu\\n", "{s}", sizeof({s}));')
    lines += [f'printf("O %s %s %zu\\n", "{s}", "{f}", offsetof({s}, {f}));' for f in flds]
  for c in consts:
    lines += [f"#ifdef {c}", f'printf("V {c} %llu\\n", (unsigned long long)({c}));', "#else",
              f'printf("U {c}\\n");', "#endif"]
  for c in fields:
    lines += [f"#ifdef {c}", f'printf("F {c} %d %d\\n", (int)(1 ? {c}), (int)(0 ? {c}));', "#else",
              f'printf("U {c}\\n");', "#endif"]
  lines.append("return 0; }")
  with tempfile.TemporaryDirectory() as d:
    for name, text in STUBS.items():
      p = pathlib.Path(d, "stub", name)
      p.parent.mkdir(parents=True, exist_ok=True)
      p.write_text(text)
    src, exe = os.path.join(d, "facts.c"), os.path.join(d, "facts")
    pathlib.Path(src).write_text("\n".join(lines))
    inc = [f"-I{p}" for p in INCLUDES] + [f"-I{d}/stub"]
    r = subprocess.run([compiler(), "-w", *inc, src, "-o", exe], capture_output=True, text=True)
    if r.returncode: raise AssertionError(f"header fact program does not compile:\n{r.stderr[-3000:]}")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
  res = {"sizeof": {}, "offsetof": {}, "value": {}, "field": {}}
  for line in out.splitlines():
    tag, *rest = line.split()
    if tag == "S": res["sizeof"][rest[0]] = int(rest[1])
    elif tag == "O": res["offsetof"][rest[0], rest[1]] = int(rest[2])
    elif tag == "U": res["value"][rest[0]] = None
    elif tag == "V": res["value"][rest[0]] = int(rest[1])
    else: res["field"][rest[0]] = (int(rest[1]), int(rest[2]))
  return res


def defines(path: pathlib.Path, prefix: str = "") -> dict[str, int]:
  """#define NAME (0x...) rows of a header (for g_allclasses.h, whose full include closure is not bundled)."""
  text = path.read_text()
  return {n: int(v, 0) for n, v in re.findall(rf"#define\s+({prefix}\w+)\s+\(?(0x[0-9a-fA-F]+|\d+)U?\)?", text)}
