"""`gputwin devices`: the GPUs the runtime can open, real (/dev/kfd, /dev/nvidiactl, /dev/kgsl-3d0) and mock, with
their properties.

    gputwin devices [--mock gfx1100,gfx942,sm_90,a630] [--no-real] [--no-mock]

Everything shown is read the way the runtime reads it: AMD GPUs from the sysfs topology, NVIDIA GPUs from RM
(CARD_INFO, GR info, the name string) through the kernel seam (real OS or a mock machine), so the table is also a
check that discovery works on this machine.
"""
from __future__ import annotations
import argparse, os
from gputwin.errors import GputwinError
from gputwin.runtime.hcq import TOPOLOGY, GPUInfo, devices, parse_properties
from gputwin.runtime.kernel import OSKernel, kernel_for, parse_device

MOCK_TARGETS = ("gfx1100", "gfx1200", "gfx942", "gfx950", "sm_80", "sm_90")
ADRENO_TARGETS = ("a630", "a660", "a730", "a740")     # `gputwin devices` lists them too (kgsl machines)


def _vram(k, g: GPUInfo) -> int:
  try:
    return sum(parse_properties(k.read_text(f"{TOPOLOGY}/nodes/{g.node}/mem_banks/{b}/properties"))["size_in_bytes"]
               for b in k.listdir(f"{TOPOLOGY}/nodes/{g.node}/mem_banks"))
  except (OSError, KeyError, ValueError): return 0


def device_rows(real: bool = True, mock_targets=MOCK_TARGETS) -> list[dict]:
  """One dict per GPU: device string, target, marketing name, gpu_id and the properties people compare."""
  rows, machines = [], []
  if real and os.path.exists("/dev/kfd") and os.path.isdir(TOPOLOGY):
    machines.append(("amd", OSKernel()))
  if real and os.path.exists("/dev/nvidiactl"):
    machines.append(("nv", OSKernel()))
  if real and os.path.exists("/dev/kgsl-3d0"):
    machines.append(("qcom", OSKernel()))
  machines += [(f"mock:{t}", kernel_for(f"mock:{t}")) for t in dict.fromkeys(mock_targets)]
  for prefix, k in machines:
    if prefix == "nv" or prefix.startswith("mock:sm_"):
      rows += _nv_rows(prefix, k)
      continue
    if prefix == "qcom" or parse_device(prefix).vendor == "qcom":
      rows += _qcom_rows(prefix, k)
      continue
    try: gpus = devices(k)
    except (OSError, ValueError, KeyError) as e:
      rows.append(dict(device=prefix, arch="?", name=f"topology unreadable: {e}"))
      continue
    for i, g in enumerate(gpus):
      p = g.props
      rows.append(dict(device=f"{prefix}:{i}" if prefix == "amd" or len(gpus) > 1 else prefix, arch=g.arch,
                       name=g.name, gpu_id=f"{g.gpu_id:#x}", cus=p["simd_count"] // max(p["simd_per_cu"], 1),
                       simds=p["simd_count"], wave=p["wave_front_size"], lds_kb=p["lds_size_in_kb"],
                       vram_gb=round(_vram(k, g) / 2**30, 1), xcc=p.get("num_xcc", 1),
                       sdma=p["num_sdma_engines"] + p["num_sdma_xgmi_engines"], clock=p["max_engine_clk_fcompute"],
                       node=g.node, kind="mock" if prefix.startswith("mock") else "real"))
  return rows


def _nv_rows(prefix: str, k) -> list[dict]:
  """NVIDIA GPUs of a machine (gputwin.runtime.nvrm.devices: CARD_INFO, GR info, name string)."""
  from gputwin.runtime.nvrm import devices as nv_devices
  try: gpus = nv_devices(k)
  except (OSError, GputwinError) as e: return [dict(device=prefix, arch="?", name=f"RM unreadable: {e}")]
  return [dict(device=f"{prefix}:{g.index}" if prefix == "nv" or len(gpus) > 1 else prefix, arch=g.arch, name=g.name,
               gpu_id=f"{g.gpu_id:#x}", cus=g.sms, wave=32, vram_gb=round(g.vram / 2**30, 1), node=g.minor,
               kind="mock" if prefix.startswith("mock") else "real") for g in gpus]


def _qcom_rows(prefix: str, k) -> list[dict]:
  """The Adreno of a kgsl machine: KGSL_PROP_DEVICE_INFO (gpu id, chip id, GMEM) through /dev/kgsl-3d0."""
  import ctypes
  from gputwin.abi import kgsl as K
  try:
    fd = k.open("/dev/kgsl-3d0")
    try:
      info = K.kgsl_devinfo()
      k.ioctl(fd, K.IOCTL_KGSL_DEVICE_GETPROPERTY, K.kgsl_device_getproperty(
        type=K.KGSL_PROP_DEVICE_INFO, value=ctypes.addressof(info), sizebytes=ctypes.sizeof(info)))
    finally: k.close(fd)
  except OSError as e: return [dict(device=prefix, arch="?", name=f"kgsl unreadable: {e}")]
  c = info.chip_id
  arch = f"a{info.gpu_id}" if info.gpu_id else f"a{c >> 24 & 0xFF}{c >> 16 & 0xFF}{c >> 8 & 0xFF}"
  return [dict(device=prefix, arch=arch, name=f"Adreno {arch[1:]} (GMEM {info.gmem_sizebytes >> 10} KiB)",
               gpu_id=f"{c:#010x}", wave=64, kind="mock" if prefix.startswith("mock") else "real")]


COLUMNS = [("device", "device"), ("arch", "target"), ("name", "name"), ("gpu_id", "gpu_id"), ("cus", "CUs/SMs"),
           ("simds", "SIMDs"), ("wave", "wave"), ("lds_kb", "LDS KiB"), ("vram_gb", "VRAM GiB"), ("xcc", "XCCs"),
           ("sdma", "SDMA"), ("clock", "MHz"), ("node", "node")]


def devices_main(argv=None) -> int:
  """Entry point of `gputwin devices`: prints the rich table; returns the exit status."""
  p = argparse.ArgumentParser(prog="gputwin devices", description=__doc__.split("\n")[0])
  p.add_argument("--mock", default=",".join(MOCK_TARGETS + ADRENO_TARGETS), help="mock targets to list (comma "
                 "separated)")
  p.add_argument("--no-real", action="store_true", help="do not look at /dev/kfd")
  p.add_argument("--no-mock", action="store_true", help="list real GPUs only")
  a = p.parse_args(argv)
  from rich.console import Console
  from rich.table import Table
  targets = () if a.no_mock else tuple(t for t in a.mock.split(",") if t)
  try: rows = device_rows(not a.no_real, targets)
  except GputwinError as e:
    Console(stderr=True).print(f"gputwin devices: {e}")
    return 1
  t = Table(title="GPUs (open with gputwin.runtime.open(device))")
  for _, head in COLUMNS: t.add_column(head, justify="right" if head in ("CUs/SMs", "SIMDs", "wave", "LDS KiB", "VRAM GiB",
                                                                           "XCCs", "SDMA", "MHz", "node") else "left")
  for r in rows:
    t.add_row(*(str(r.get(key, "")) for key, _ in COLUMNS), style="dim" if r.get("kind") == "mock" else None)
  Console().print(t)
  if not any(r.get("kind") == "real" for r in rows):
    Console().print("no real GPU on this machine (no /dev/kfd, no /dev/nvidiactl, no /dev/kgsl-3d0)")
  return 0
