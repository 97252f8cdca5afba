"""gputwin.runtime: the HCQ runtimes over the kernel seam (kernel.py): AMD (hcq.py, /dev/kfd) and NVIDIA (nv.py,
RM/UVM). `open("mock:gfx1100")`, `open("mock:sm_90")`, `open("amd:1")`, `open("nv")` -> the vendor's Device."""
from gputwin.runtime.hcq import Buffer, Device, LaunchResult, Program, Queue, QueueFault, devices
from gputwin.runtime.kernel import parse_device


def open(device: str | None = None):   # noqa: A001 - the runtime's entry point, like os.open for a GPU
  """A GPU by device string (default $GPUTWIN_DEVICE): the AMD Device for "amd[:N]" / "mock:gfx*", the NVIDIA one
  (gputwin.runtime.nv, imported on first use) for "nv[:N]" / "mock:sm_*"."""
  if parse_device(device).vendor == "nv":
    from gputwin.runtime import nv
    return nv.Device(device)
  return Device(device)


__all__ = ["open", "Device", "Buffer", "Program", "Queue", "QueueFault", "LaunchResult", "devices"]
