"""Mock amdkfd: the /dev/kfd ABI (abi), the sysfs topology (topology), GPU virtual memory (vm) and the driver that
ties them into a kernel seam (driver.MockKernel). See ../README.md."""
