"""The mock NVIDIA kernel driver (nvidia.ko RM escapes + nvidia-uvm.ko) behind gputwin's kernel seam."""
from gputwin.mock.nv.driver import MockNV
from gputwin.mock.nv.machine import ARCHS, NVChannel, NVGpu

__all__ = ["MockNV", "NVChannel", "NVGpu", "ARCHS"]
