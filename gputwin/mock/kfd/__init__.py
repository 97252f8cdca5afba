"""Mock amdkfd: the sysfs topology (topology), GPU virtual memory (vm) and the driver that ties them into a kernel
seam (driver.MockKernel, also importable from here) over the /dev/kfd ABI of gputwin.abi.kfd. See ../README.md."""


def __getattr__(name: str):
  if name in ("MockKernel", "MockQueue"):   # lazily, so `import gputwin.mock.kfd.topology` stays light
    from gputwin.mock.kfd import driver
    return getattr(driver, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
