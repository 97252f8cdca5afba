"""The virtual Adreno: MockKGSL's command processor (PM4 type 4/7) and compute on gputwin.emu.ir3."""
from gputwin.mock.adreno.cp import CPFault, CPState, CommandProcessor
from gputwin.mock.adreno.gpu import VirtualAdreno


def machine(target: str, sync: bool = False, **kw):
  """A MockKGSL of `target` with a VirtualAdreno as its command processor (what kernel_for("mock:a630") makes)."""
  from gputwin.mock.kgsl import MockKGSL
  return MockKGSL(target, cp=VirtualAdreno(target, **kw), sync=sync)


__all__ = ["VirtualAdreno", "CommandProcessor", "CPState", "CPFault", "machine"]
