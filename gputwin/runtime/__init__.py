"""gputwin.runtime: the AMD HCQ runtime over the kernel seam (kernel.py). `open("mock:gfx1100")` -> Device."""
from gputwin.runtime.hcq import Buffer, Device, LaunchResult, Program, Queue, QueueFault, devices, open  # noqa: A004

__all__ = ["open", "Device", "Buffer", "Program", "Queue", "QueueFault", "LaunchResult", "devices"]
