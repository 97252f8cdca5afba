"""Work-item and workgroup ids, sizes and counts in all three dimensions (packed v0 ids, workgroup-id SGPRs,
COV5 hidden arguments) on both backends, against the reference."""
import numpy as np
import pytest

from gputwin.compiler import (Ptr, compile, i32, kernel, num_workgroups, workgroup_id, workgroup_size,
                              workitem_id)

from _compiler_helpers import TARGETS, run_both


@kernel
def ids(out: Ptr[i32]):
  tx = workitem_id(0)
  ty = workitem_id(1)
  tz = workitem_id(2)
  sx = workgroup_size(0)
  sy = workgroup_size(1)
  sz = workgroup_size(2)
  gx = workgroup_id(0)
  gy = workgroup_id(1)
  gz = workgroup_id(2)
  nx = num_workgroups(0)
  ny = num_workgroups(1)
  nz = num_workgroups(2)
  local = (tz * sy + ty) * sx + tx
  group = (gz * ny + gy) * nx + gx
  base = (group * sx * sy * sz + local) * 4
  out[base] = tx + 100 * ty + 10000 * tz
  out[base + 1] = gx + 100 * gy + 10000 * gz
  out[base + 2] = sx + 100 * sy + 10000 * sz
  out[base + 3] = nx + 100 * ny + 10000 * nz


@pytest.mark.parametrize("backend", ["direct", "llvm"])
@pytest.mark.parametrize("arch", TARGETS)
def test_ids_3d(arch, backend):
  grid, block = (3, 2, 2), (4, 3, 2)
  n = int(np.prod(grid) * np.prod(block)) * 4
  ref, emu = run_both(compile(ids, arch, backend=backend), [np.zeros(n, np.int32)], grid, block)
  np.testing.assert_array_equal(emu[0], ref[0])
  assert ref[0][-4:].tolist() == [3 + 200 + 10000, 2 + 100 + 10000, 4 + 300 + 20000, 3 + 200 + 20000]
