"""gputwin.emu.host: host CPU kernels (x86_64, aarch64 ELF objects) run sandboxed under unicorn, shown with
capstone (README.md)."""
from gputwin.emu.host.arch import ARCHES
from gputwin.emu.host.launch import launch

__all__ = ["ARCHES", "launch"]
