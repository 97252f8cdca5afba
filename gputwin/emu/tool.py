"""`gputwin run`: run one kernel of a .s/.co/.o (AMD) or .ptx (NVIDIA) on the emulator from the command line.

    gputwin run K.co --arch gfx1100 --kernel saxpy --grid 4 --block 256 \\
        --arg out:f32:1024 --arg x:f32:x.npy --arg y:f32:=1.0 --arg a:f32=2.0 --arg n:i32=1024 --out DIR
    gputwin run k.ptx --arch sm_90 --kernel saxpy --grid 4 --block 256 --arg out:f32:1024 ... [--shared-bytes N]
    gputwin run saxpy.bin --arch a630 --grid 4 --arg 0:f32:x.npy --arg 1:f32:y.npy --arg 4:u32:ubo.npy
    gputwin run k.aarch64.o --arch aarch64 --kernel saxpy --grid 4 --block 64 ...   # host CPUs, under unicorn

Adreno (a Mesa ir3 `.bin` with its `.txt` listing beside it): NAME is the GLSL binding; the block is the shader's.

--arg NAME:TYPE:N        a zero-filled buffer of N elements     NAME:TYPE:FILE.npy  a buffer loaded from FILE
--arg NAME:TYPE=VALUE    a by-value number
Buffers are saved to DIR/NAME.npy after the run. --trace FILE writes one line per wave-instruction (wave, PC,
instruction, registers written); --perfetto FILE writes Chrome/Perfetto trace JSON (one track per wave).
--show-native prints, after the run, the host machine code of the native tier's blocks (capstone), each range under
the guest instruction it implements (the tier runs with --no-checks; GPUTWIN_JIT=force compiles every block).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from gputwin.errors import GputwinError

_TY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8, "i16": np.int16,
       "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64}


def dims(s: str) -> tuple[int, ...]:
  """'64' | '8,8' | '8x8' -> (64,) | (8, 8)."""
  return tuple(int(x) for x in s.replace("x", ",").split(","))


def parse_arg(spec: str):
  """'out:f32:1024' | 'x:f32:x.npy' | 'a:f32=2.0' -> (name, value)."""
  if "=" in spec:
    head, val = spec.split("=", 1)
    name, ty = head.split(":")
    return name, _TY[ty](float(val) if ty[0] == "f" else int(val, 0))
  name, ty, what = spec.split(":", 2)
  if what.endswith(".npy"):
    return name, np.ascontiguousarray(np.load(what).astype(_TY[ty]))
  return name, np.zeros(int(what), _TY[ty])


def run_main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="gputwin run", description=__doc__.split("\n")[0])
  p.add_argument("code", help="kernel source .s, code object .co/.o, PTX .ptx or Adreno ir3 .bin")
  p.add_argument("--arch", default=None)
  p.add_argument("--kernel", default=None, help="kernel name (default: the only kernel)")
  p.add_argument("--grid", default="1", help="workgroups per dimension: 64 or 8,8")
  p.add_argument("--block", default="64", help="work-items per workgroup: 256 or 16,16")
  p.add_argument("--arg", action="append", default=[], help="NAME:TYPE:N | NAME:TYPE:FILE.npy | NAME:TYPE=VALUE")
  p.add_argument("--out", default=None, help="directory for the buffers after the run")
  p.add_argument("--trace", default=None)
  p.add_argument("--perfetto", default=None)
  p.add_argument("--max-instructions", type=int, default=None)
  p.add_argument("--serial", action="store_true", help="run one wave at a time (the oracle schedule)")
  p.add_argument("--no-checks", action="store_true")
  p.add_argument("--shared-bytes", type=int, default=0, help="PTX: dynamic shared memory per CTA")
  p.add_argument("--show-native", action="store_true", help="print the native tier's blocks: host code by guest "
                 "instruction")
  a = p.parse_args(argv)
  from gputwin.emu.api import HOST_ARCHES, Emulator, is_ptx, launch, write_trace
  from gputwin.pcode import family_of
  try:
    args = [parse_arg(s) for s in a.arg]
  except (ValueError, KeyError, OSError) as e:
    print(f"gputwin run: bad --arg: {e}", file=sys.stderr)
    return 2
  try:
    trace = [] if (a.trace or a.perfetto) else None
    run = dict(grid=dims(a.grid), block=dims(a.block), args=[v for _, v in args], serial=a.serial,
               checks=not a.no_checks, trace=trace, max_instructions=a.max_instructions)
    ptx = is_ptx(a.code) or (a.arch or "").startswith("sm_")
    if a.arch in HOST_ARCHES:
      from gputwin.emu.host.launch import load
      names = list(load(a.code, a.arch).kernels)
    elif family_of(a.arch or "gfx1100") == "ir3" or a.code.endswith(".bin"):
      kernel = a.kernel or "main"
      st = launch(a.code, kernel, arch=a.arch, **dict(run, block=None, args={int(n, 0): v for n, v in args}))
      names = None
    elif ptx:
      from gputwin.isa.ptx import parse
      names = list(parse(Path(a.code).read_text(), a.code).kernels)
    else:
      emu = Emulator(a.code, arch=a.arch)
      names = list(emu.co.kernels)
    if names is not None:
      kernel = a.kernel or (names[0] if len(names) == 1 else None)
      if kernel is None:
        print(f"gputwin run: --kernel is required; kernels: {', '.join(names)}", file=sys.stderr)
        return 2
      st = launch(a.code, kernel, arch=a.arch or "sm_90", shared_bytes=a.shared_bytes, **run) if ptx else \
        launch(a.code, kernel, arch=a.arch, **run) if a.arch in HOST_ARCHES else emu.launch(kernel, **run)
  except GputwinError as e:
    print(f"gputwin run: {type(e).__name__}: {e}", file=sys.stderr)
    return 1
  except OSError as e:
    print(f"gputwin run: cannot read {a.code}: {e.strerror}", file=sys.stderr)
    return 1
  if a.out:
    d = Path(a.out)
    d.mkdir(parents=True, exist_ok=True)
    for name, v in args:
      if isinstance(v, np.ndarray):
        np.save(d / f"{name}.npy", v)
  if a.trace:
    write_trace(a.trace, trace)
  if a.perfetto:
    ev, t = [], {}
    for w, pc, text, ch in trace:
      ts = t.get(w, 0)
      ev.append(dict(name=text.split()[0] if text else "?", ph="X", ts=ts, dur=1, pid=0, tid=w,
                     args=dict(pc=hex(pc), inst=text, wrote=ch)))
      t[w] = ts + 1
    Path(a.perfetto).write_text(json.dumps(dict(traceEvents=ev, displayTimeUnit="ns")))
  rate = st.instructions / st.seconds if st.seconds else 0
  print(f"{kernel} on {st.arch} (wave{st.wave_size}): {st.workgroups} workgroups, {st.waves} waves\n"
        f"  {st.instructions} wave-instructions, {st.lane_instructions} lane-instructions "
        f"({st.lane_instructions / max(st.instructions * st.wave_size, 1):.0%} lanes active, "
        f"{st.native_instructions / max(st.instructions, 1):.0%} native)\n"
        f"  {st.seconds * 1e3:.1f} ms, {rate:,.0f} wave-instructions/s")
  for name, v in args:
    if isinstance(v, np.ndarray):
      print(f"  {name}: {v.dtype}[{v.size}] first {np.array2string(v.reshape(-1)[:6], precision=4)}"
            + (f" -> {a.out}/{name}.npy" if a.out else ""))
  if a.show_native:
    from gputwin.emu.host import native
    blocks = native.compiled()
    for prog, lanes, blk in blocks:
      print("\n" + native.show(prog, lanes, blk), end="")
    if not blocks:
      print("no native blocks: the tier runs with --no-checks and compiles a block once GPUTWIN_JIT_AFTER lanes have "
            "reached it (GPUTWIN_JIT=force: every block at first sight)")
  return 0


if __name__ == "__main__":
  sys.exit(run_main())
