"""One launch, recorded for comparison: the output buffers, the emulator's own per-wave trace (emu/api.py
`_trace_hook` records; we never re-trace), the launch geometry needed to name workgroup/wave/lane, and the error
when the kernel faulted (a fault is a result to compare, not a crash).

Also the external toolchains (clang-22, ld.lld-22) with one clear error when they are missing."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gputwin.errors import GputwinError

CLANG, LLD = "clang-22", "ld.lld-22"


class ToolchainError(GputwinError):
  """A required external tool (clang-22, ld.lld-22, git) is missing or failed."""


def need(tool: str) -> str:
  path = shutil.which(tool)
  if path is None:
    raise ToolchainError(f"{tool} not found on PATH (install LLVM 22; never the unsuffixed LLVM 14 tools)")
  return path


def clang_cl(source: str, arch: str, *, flags: tuple[str, ...] = ("-O2",), asm: bool = False, name: str = "k") -> bytes:
  """OpenCL C -> a linked AMD code object (or assembly text bytes with asm=True) via clang-22 and ld.lld-22."""
  need(CLANG)
  with tempfile.TemporaryDirectory(prefix="gputwin-cl-") as d:
    src, obj, co = Path(d, f"{name}.cl"), Path(d, f"{name}.o"), Path(d, f"{name}.co")
    src.write_text(source)
    base = [CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", *flags]
    out = obj.with_suffix(".s") if asm else obj
    r = subprocess.run([*base, "-S" if asm else "-c", str(src), "-o", str(out)], capture_output=True, text=True)
    if r.returncode:
      raise ToolchainError(f"{CLANG} failed for {arch} ({r.returncode}):\n{r.stderr.strip()[-2000:]}")
    if asm:
      return out.read_bytes()
    need(LLD)
    r = subprocess.run([LLD, "-shared", str(obj), "-o", str(co)], capture_output=True, text=True)
    if r.returncode:
      raise ToolchainError(f"{LLD} failed for {arch}:\n{r.stderr.strip()[-2000:]}")
    return co.read_bytes()


def nvcc_ptx(source: str, arch: str, *, flags: tuple[str, ...] = ("-O3",), name: str = "k") -> str:
  """CUDA C -> PTX text via nvcc (`nvcc -ptx -arch=sm_XX`)."""
  if shutil.which("nvcc") is None:
    raise ToolchainError("nvcc not found on PATH (CUDA 13)")
  with tempfile.TemporaryDirectory(prefix="gputwin-cu-") as d:
    src, out = Path(d, f"{name}.cu"), Path(d, f"{name}.ptx")
    src.write_text(source)
    r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", *flags, str(src), "-o", str(out)], capture_output=True,
                       text=True)
    if r.returncode:
      raise ToolchainError(f"nvcc failed for {arch} ({r.returncode}):\n{r.stderr.strip()[-2000:]}")
    return out.read_text()


def load_code(spec, arch: str | None = None):
  """A path (.co/.o/.s, .cl compiled for `arch` by clang-22, .ptx, or .cu compiled for `arch` by nvcc) or bytes ->
  what emu.launch accepts."""
  if isinstance(spec, (str, Path)) and str(spec).endswith(".cu"):
    return nvcc_ptx(Path(spec).read_text(), arch or "sm_90")
  if isinstance(spec, (str, Path)) and str(spec).endswith(".cl"):
    if not arch:
      raise GputwinError(f"{spec}: an OpenCL source needs --arch")
    return clang_cl(Path(spec).read_text(), arch)
  return spec


@dataclass
class Run:
  """What one launch produced. `trace` holds (wave, pc, instruction, 'reg=values') records; `error` is set when
  the launch stopped (fault, trap, checker, watchdog) — outputs and trace then hold what was done before."""
  label: str
  arch: str
  kernel: str
  outputs: list[tuple[str, np.ndarray]]
  trace: list | None
  wave_size: int = 32
  waves_per_group: int = 1
  instructions: int = 0
  error: GputwinError | None = None
  where: str = "emu"
  extra: dict = field(default_factory=dict)


def _copy(args):
  return [(n, v.copy() if isinstance(v, np.ndarray) else v) for n, v in args]


def run(code, kernel: str | None = None, *, grid, block, args, arch: str | None = None, device: str | None = None,
        trace: bool = True, label: str = "", checks=True, max_instructions: int | None = None) -> Run:
  """Launch on a copy of the named `args` [(name, value)] on the emulator, or through gputwin.runtime on `device`
  ("mock:gfx1100", "amd:0", "mock:sm_90", "nv:0", "mock:a630"; no trace there). Adreno ir3 (`.bin`, a6xx/a7xx
  targets): names are GLSL bindings. Arguments that cannot be launched at all raise; faults do not."""
  from gputwin.emu.api import Emulator, is_ptx
  from gputwin.isa.kernargs import three
  from gputwin.pcode import family_of
  args = _copy(args)
  if str(code).endswith(".bin") or family_of(arch or "gfx1100") == "ir3":
    return _run_ir3(code, kernel, grid, args, arch, device, trace, label, checks, max_instructions)
  if (arch or "").startswith("sm_") or is_ptx(code) or str(code).endswith(".cu"):
    return _run_ptx(load_code(code, arch), kernel, grid, block, args, arch or "sm_90", device, trace, label, checks,
                    max_instructions)
  emu = Emulator(load_code(code, arch), arch=arch)
  names = sorted(emu.co.kernels)
  if kernel is None:
    if len(names) != 1:
      raise GputwinError(f"give a kernel name; the code object has: {', '.join(names) or 'none'}")
    kernel = names[0]
  if kernel not in emu.co.kernels:
    raise GputwinError(f"[{emu.arch}] no kernel {kernel!r}; the code object has: {', '.join(names) or 'none'}")
  kd = emu.co.kernels[kernel].descriptor
  L = 32 if kd.enable_wavefront_size32 else 64
  b = three(block, "block")
  r = Run(label or emu.arch, emu.arch, kernel, [(n, v) for n, v in args if isinstance(v, np.ndarray)],
          [] if trace and not device else None, L, -(-(b[0] * b[1] * b[2]) // L), where=device or "emu")
  values = [v for _, v in args]
  if device:
    return _on_device(r, device, emu.co, kernel, grid, block, values)
  d = emu.prepare(kernel, grid=grid, block=block, args=values, checks=checks, trace=r.trace,
                  max_instructions=max_instructions)
  try:
    d.run()
  except GputwinError as e:
    r.error = e
  finally:
    d.finish()
  r.instructions = d.stats.instructions
  return r


def _run_ptx(code, kernel, grid, block, args, arch, device, trace, label, checks, max_instructions) -> Run:
  """`run` for a PTX module (a .ptx path or its text): warps of 32 threads, traced per warp."""
  from gputwin.emu import launch
  from gputwin.emu.ptx.launch import module_text
  from gputwin.isa.kernargs import three
  from gputwin.isa.ptx import parse
  text, path = module_text(code)
  names = sorted(parse(text, path).kernels)
  if kernel is None:
    if len(names) != 1:
      raise GputwinError(f"give a kernel name; the module has: {', '.join(names) or 'none'}")
    kernel = names[0]
  b = three(block, "block")
  r = Run(label or arch, arch, kernel, [(n, v) for n, v in args if isinstance(v, np.ndarray)],
          [] if trace and not device else None, 32, -(-(b[0] * b[1] * b[2]) // 32), where=device or "emu")
  values = [v for _, v in args]
  if device:
    return _on_device(r, device, text, kernel, grid, block, values)
  try:
    st = launch(text, kernel, grid=grid, block=block, args=values, arch=arch, checks=checks, trace=r.trace,
                max_instructions=max_instructions)
    r.instructions = st.instructions
  except GputwinError as e:
    r.error = e
  return r


def _run_ir3(code, kernel, grid, args, arch, device, trace, label, checks, max_instructions) -> Run:
  """`run` for Adreno ir3 code (a Mesa `.bin` with its listing, or bytes/assembly with the default Shader): the
  argument names are GLSL bindings; waves of the shader's size, traced per wave."""
  from gputwin.emu.ir3.launch import launch, load
  data, sh = load(code, arch, None)
  arch = arch or sh.gpu
  b = sh.local_size
  r = Run(label or arch, arch, kernel or "main", [(n, v) for n, v in args if isinstance(v, np.ndarray)],
          [] if trace and not device else None, sh.wave_size, -(-(b[0] * b[1] * b[2]) // sh.wave_size),
          where=device or "emu")
  values = {int(n, 0) if isinstance(n, str) else int(n): v for n, v in args}
  if device:
    return _on_device(r, device, code, r.kernel, grid, None, values)
  try:
    st = launch(data, r.kernel, grid=grid, args=values, arch=arch, shader=sh, checks=checks, trace=r.trace,
                max_instructions=max_instructions)
    r.instructions = st.instructions
  except GputwinError as e:
    r.error = e
  return r


def _on_device(r: Run, device: str, code, kernel: str, grid, block, values) -> Run:
  """The launch through gputwin.runtime on `device` (no trace there); a fault is the Run's error."""
  from gputwin.runtime import open as open_device
  dev = None
  try:
    dev = open_device(device)
    r.instructions = dev.launch(code, kernel, grid=grid, block=block, args=values).instructions
  except (GputwinError, OSError) as e:
    r.error = e if isinstance(e, GputwinError) else GputwinError(f"{device}: {e}")
  finally:
    if dev is not None:
      dev.close()
  return r


# ------------------------------------------------------------------------------------------ trace files
def read_jsonl(path, *, block: int = 64, label: str = "") -> Run:
  """A `gputwin trace --format jsonl` file as a Run without outputs (for diffing two saved traces). The wave size is
  the fewest values any VGPR write carries (one dword = one value per lane)."""
  recs = []
  with open(path) as f:
    for n, line in enumerate(f, 1):
      try:
        d = json.loads(line)
        recs.append((int(d["wave"]), int(d["pc"]), str(d["inst"]), str(d["wrote"])))
      except (ValueError, KeyError, TypeError) as e:
        raise GputwinError(f"{path}:{n}: not a gputwin trace record ({e})") from None
  sizes = [len(ch.split("=", 1)[1].split(",")) for *_, ch in recs if ch[:1] in "va" and "=" in ch]
  L = min(sizes) if sizes and min(sizes) in (32, 64) else 64
  return Run(label or str(path), "trace", "?", [], recs, L, max(1, -(-block // L)), where="file")


def write(trace: list, path, fmt: str = "text", waves_per_group: int = 1) -> None:
  """The emulator's trace as text (emu.api.write_trace: one line per wave-instruction, grouped by wave), JSON lines
  ({"wave", "pc", "inst", "wrote"} in the same order) or Perfetto/Chrome trace JSON (one track per wave, named by
  workgroup and wave; time = the wave's instruction count)."""
  if fmt == "text":
    from gputwin.emu.trace import write_trace
    write_trace(path, trace)
    return
  recs = sorted(trace, key=lambda t: t[0])
  if fmt == "jsonl":
    Path(path).write_text("".join(json.dumps(dict(wave=w, pc=pc, inst=text, wrote=ch)) + "\n"
                                  for w, pc, text, ch in recs))
  elif fmt == "perfetto":
    ev, step = [], {}
    for w, pc, text, ch in recs:
      step[w] = ts = step.get(w, -1) + 1
      ev.append(dict(name=text.split()[0] if text else "?", ph="X", ts=ts, dur=1, pid=0, tid=w,
                     args=dict(pc=hex(pc), inst=text, wrote=ch)))
    ev += [dict(name="thread_name", ph="M", pid=0, tid=w, args=dict(name=f"wg {w // waves_per_group} wave "
                                                                       f"{w % waves_per_group}")) for w in step]
    Path(path).write_text(json.dumps(dict(traceEvents=ev, displayTimeUnit="ns")))
  else:
    raise GputwinError(f"unknown trace format {fmt!r} (text, jsonl, perfetto)")
