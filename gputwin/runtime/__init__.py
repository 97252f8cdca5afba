"""gputwin.runtime: the HCQ runtimes over the kernel seam (kernel.py): AMD (hcq.py, /dev/kfd) and NVIDIA (nv.py,
RM/UVM) and Qualcomm Adreno (qcom.py, kgsl). `open("mock:gfx1100")`, `open("mock:sm_90")`, `open("mock:a630")`,
`open("amd:1")`, `open("nv")`, `open("qcom")` -> the vendor's Device."""
from gputwin.runtime.hcq import Buffer, Device, LaunchResult, Program, Queue, QueueFault, QueueTimeout, devices
from gputwin.runtime.kernel import parse_device


def open(device: str | None = None):   # noqa: A001 - the runtime's entry point, like os.open for a GPU
  """A GPU by device string (default $GPUTWIN_DEVICE): the AMD Device for "amd[:N]" / "mock:gfx*", the NVIDIA one
  (gputwin.runtime.nv, imported on first use) for "nv[:N]" / "mock:sm_*", the Adreno one (gputwin.runtime.qcom) for
  "qcom" / "mock:a630" (a660, a730, a740)."""
  vendor = parse_device(device).vendor
  if vendor == "nv":
    from gputwin.runtime import nv
    return nv.Device(device)
  if vendor == "qcom":
    from gputwin.runtime import qcom
    return qcom.Device(device)
  return Device(device)


__all__ = ["open", "Device", "Buffer", "Program", "Queue", "QueueFault", "QueueTimeout", "LaunchResult", "devices"]
