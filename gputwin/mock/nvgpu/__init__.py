"""The virtual NVIDIA GPU behind gputwin.mock.nv.MockNV (see README.md)."""
from gputwin.mock.nvgpu.gpu import VirtualNVGPU, attach

__all__ = ["VirtualNVGPU", "attach"]
