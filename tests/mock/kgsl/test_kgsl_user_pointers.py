"""The kgsl mock returns EFAULT, never crashes the host, for an ioctl argument in PROT_NONE memory (copy_from_user
fails) or in read-only memory (copy_to_user fails after the handler ran, as kgsl_ioctl_helper does)."""
import ctypes
import errno
import mmap

import pytest

from gputwin.abi import kgsl as K
from gputwin.mock.kgsl import MockKGSL

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _page(prot: int, fill: bytes = b"") -> int:
  p = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
  ctypes.memmove(p, fill, len(fill))
  assert libc.mprotect(p, 4096, prot) == 0
  return p


def test_unreadable_and_unwritable_arguments_are_efault():
  k = MockKGSL("a630")
  fd = k.open("/dev/kgsl-3d0")
  for p in (_page(0), _page(mmap.PROT_READ, bytes(K.kgsl_gpuobj_alloc(size=4096)))):  # PROT_NONE, read-only
    with pytest.raises(OSError) as e:
      k.ioctl(fd, K.IOCTL_KGSL_GPUOBJ_ALLOC, p)
    assert e.value.errno == errno.EFAULT
  o = K.kgsl_gpuobj_alloc(size=4096)
  k.ioctl(fd, K.IOCTL_KGSL_GPUOBJ_ALLOC, o)   # the device still works
  assert o.id > 0
