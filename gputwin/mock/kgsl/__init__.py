"""Mock kgsl: /dev/kgsl-3d0 of Qualcomm's downstream driver over the ABI of gputwin.abi.kgsl (see README.md)."""
from gputwin.mock.kgsl.driver import TARGETS, Adreno, CommandProcessor, Context, MockKGSL, RetireCP, Submission

__all__ = ["MockKGSL", "TARGETS", "Adreno", "CommandProcessor", "RetireCP", "Submission", "Context"]
