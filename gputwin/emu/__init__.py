"""gputwin.emu: the AMD wave executor (gfx1100, gfx1200, gfx942, gfx950) that runs real kernels on numpy.

    stats = gputwin.emu.launch("k.co", "saxpy", grid=64, block=256, args=[out, x, y, 2.0, n])

See README.md: launch() for the common case, Emulator/Dispatch for memory, registers, single-step and hooks.
"""
from gputwin.emu.api import Dispatch, Emulator, LaunchStats, launch
from gputwin.emu.memory import AddressSpace, GuestMemory

__all__ = ["launch", "LaunchStats", "Emulator", "Dispatch", "GuestMemory", "AddressSpace"]
