"""Mock amdkfd: the /dev/kfd ABI (abi), the sysfs topology (topology), GPU virtual memory (vm) and the driver that
ties them into a kernel seam (driver.MockKernel, also importable from here). See ../README.md."""


def __getattr__(name: str):
  if name in ("MockKernel", "MockQueue"):   # lazily, so `from gputwin.mock.kfd import abi` stays light
    from gputwin.mock.kfd import driver
    return getattr(driver, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
