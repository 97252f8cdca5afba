"""The runtime reaches a driver only through kernel_for(device): the real OS for amd[:N], the mock for mock:..."""
import ctypes, os
import pytest
from gputwin.errors import KernelDriverError
from gputwin.abi import kfd as abi
from gputwin.runtime.kernel import Kernel, OSKernel, kernel_for, parse_device


def test_amd_selects_the_os_kernel():
  for dev in ("amd", "amd:0", "amd:3"):
    assert isinstance(kernel_for(dev), OSKernel) and isinstance(kernel_for(dev), Kernel)
  assert parse_device("amd:3").index == 3


@pytest.mark.skipif(not os.path.exists("/dev/kfd"), reason="no /dev/kfd on this machine")
def test_os_kernel_talks_to_the_real_kfd():
  k = kernel_for("amd")
  fd = k.open("/dev/kfd")
  try:
    v = abi.kfd_ioctl_get_version_args()
    k.ioctl(fd, abi.AMDKFD_IOC_GET_VERSION, v)
    assert v.major_version == 1
    assert k.listdir("/sys/devices/virtual/kfd/kfd/topology/nodes")
  finally:
    k.close(fd)


def test_mock_devices_share_one_machine_per_target_list(monkeypatch):
  a, b = kernel_for("mock:gfx1100,gfx942:0"), kernel_for("mock:gfx1100,gfx942:1")
  assert a is b and isinstance(a, Kernel) and type(a).__name__ == "MockKernel"
  assert kernel_for("mock:gfx942") is not a
  monkeypatch.setenv("GPUTWIN_DEVICE", "mock:gfx950")
  assert kernel_for().targets == ["gfx950"] and parse_device().targets == ("gfx950",)
  monkeypatch.delenv("GPUTWIN_DEVICE")
  assert parse_device().kind == "mock"


def test_the_same_calls_work_on_the_mock():
  k = kernel_for("mock:gfx1200")
  fd = k.open("/dev/kfd")
  v = abi.kfd_ioctl_get_version_args()
  assert k.ioctl(fd, abi.AMDKFD_IOC_GET_VERSION, v) == 0 and (v.major_version, v.minor_version) == (1, 17)
  assert "gfx_target_version 120000" in k.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
  assert k.poll([fd])[0][0] == fd
  k.close(fd)


@pytest.mark.parametrize("bad", ["nv:x", "mock:", "mock:gfx1100,sm_90", "amd:x", "mock:gfx1100:4", "mock:a:b"])
def test_bad_device_strings_say_what_is_expected(bad):
  with pytest.raises(KernelDriverError, match="expected|no GPU|all AMD"): kernel_for(bad)


def test_unknown_mock_target_names_the_known_ones():
  with pytest.raises(KernelDriverError, match="gfx1100"): kernel_for("mock:gfx9999")


def test_os_kernel_mmap_anonymous():
  k = OSKernel()
  addr = k.mmap(-1, 0, 4096, 3, 0x22)   # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
  ctypes.memmove(addr, b"ok", 2)
  assert ctypes.string_at(addr, 2) == b"ok"
  k.munmap(addr, 4096)
