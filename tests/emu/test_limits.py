"""Issue 22: sizes a code object claims are checked before a launch allocates for them. A kernel descriptor whose
kernarg_size says 0xffffffff made gputwin.emu.launch allocate and copy a 4 GiB kernarg segment (30 s, 12 GiB RSS);
now it, an argument the metadata places past the limit, and the same code object on a mock device are LaunchErrors
naming target, kernel, the field and the limit (gputwin.isa.kernargs.MAX_KERNARG_SIZE), raised before any guest
memory is mapped for the segment."""
import time

import numpy as np
import pytest

import gputwin.runtime as rt
from gputwin.emu import launch
from gputwin.errors import LaunchError
from gputwin.isa.kernargs import MAX_KERNARG_SIZE
from gputwin.verify.reliability import kernel, kernel_source

# out[lane] = lane, through the pointer at kernarg offset 0
STORE = """
  s_load_b64 s[2:3], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v1, v0, s[2:3]"""
META = """.amdgpu_metadata
---
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: 8
    .args:
      - .offset: {offset}
        .size: 8
        .value_kind: global_buffer
        .address_space: global
amdhsa.version: [1, 2]
...
.end_amdgpu_metadata
"""


def _co(size: int) -> bytes:
  return kernel("gfx1100", STORE, extra=f"  .amdhsa_kernarg_size {size:#x}\n")


@pytest.mark.parametrize("size", [0xffffffff, 0x80000000, MAX_KERNARG_SIZE + 1])
def test_absurd_descriptor_kernarg_size_is_refused(size):
  out = np.zeros(32, np.int32)
  t = time.perf_counter()
  with pytest.raises(LaunchError) as e:
    launch(_co(size), "k", grid=1, block=32, args=[out])
  assert time.perf_counter() - t < 5  # coarse: the refusal comes before any allocation (was 30 s for 0xffffffff)
  assert e.value.arch == "gfx1100" and e.value.kernel == "k"
  assert f"[gfx1100] kernel k: the kernel descriptor's kernarg_size asks for a {size:#x}-byte kernarg segment, " \
         f"past the {MAX_KERNARG_SIZE} bytes a launch accepts" in str(e.value)


def test_kernarg_size_at_the_limit_runs():
  """The limit itself is accepted and the kernel reads its arguments from the segment (oracle: numpy arange)."""
  out = np.zeros(32, np.int32)
  launch(_co(MAX_KERNARG_SIZE), "k", grid=1, block=32, args=[out])
  np.testing.assert_array_equal(out, np.arange(32))


def test_metadata_argument_past_the_limit_is_refused():
  src = kernel_source("gfx1100", STORE) + META.format(offset=0xfffffff0)
  from gputwin.isa.codeobj import assemble_code_object
  co = assemble_code_object(src, "gfx1100")
  with pytest.raises(LaunchError, match=r"kernel k: argument 0 \(global_buffer\) at offset 4294967280 \+ 8 bytes in "
                                        r"the metadata asks for a 0xfffffff8-byte kernarg segment, past the 65536"):
    launch(co, "k", grid=1, block=32, args=[np.zeros(32, np.int32)])
  ok = assemble_code_object(kernel_source("gfx1100", STORE) + META.format(offset=0), "gfx1100")
  out = np.zeros(32, np.int32)
  launch(ok, "k", grid=1, block=32, args=[out])
  np.testing.assert_array_equal(out, np.arange(32))


@pytest.mark.parametrize("raw", [False, True])
def test_mock_device_refuses_the_same_descriptor(raw):
  """The runtime sizes its kernarg arena by the same rule (gputwin.isa.kernargs.segment_size), raw segment or not."""
  with rt.open("mock:gfx1100") as dev:
    with pytest.raises(LaunchError, match=r"\[gfx1100\] kernel k: the kernel descriptor's kernarg_size asks for a "
                                          r"0xffffffff-byte kernarg segment"):
      if raw:
        dev.load(_co(0xffffffff))("k", grid=1, block=32, kernarg=bytes(8))
      else:
        dev.launch(_co(0xffffffff), "k", grid=1, block=32, args=[np.zeros(32, np.int32)])
