"""DS_APPEND / DS_CONSUME (before: 'built-in DS_APPEND_CONSUME_COUNTER() is not supported' on RDNA, 'no executable
semantics' on CDNA): clang-22's __builtin_amdgcn_ds_append / ds_consume in a stream compaction (kernels/ds_append.cl)
on every AMD target, both tiers (the instruction itself is interpreted), checked as sets against numpy: each
workgroup keeps exactly its odd inputs, hands out exactly the tickets 1000 - (its even inputs) .. 999, and its
counters end at those counts."""
import numpy as np
import pytest

from gputwin.emu import launch


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942", "gfx950"])
def test_clang_stream_compaction(tier_runs, clang_co, arch):
  co = clang_co(arch, "ds_append").read_bytes()
  groups = 4
  x = np.random.default_rng(5).integers(0, 1 << 20, 256 * groups, dtype=np.uint32)
  x[256:512] |= 1  # a workgroup of only odd inputs (no lane consumes)

  def go():
    kept, tickets = np.zeros(256 * groups, np.uint32), np.zeros(256 * groups, np.uint32)
    counts = np.zeros(2 * groups, np.uint32)
    launch(co, "compact", grid=groups, block=256, args=[kept, tickets, counts, x])
    return kept, tickets, counts
  (interp, e0, _), (native, e1, runs) = tier_runs(go)
  assert e0 is None and e1 is None, (e0, e1)
  for kept, tickets, counts in (interp, native):
    for g in range(groups):
      mine = x[256 * g:256 * (g + 1)]
      odd, even = np.sort(mine[mine & 1 == 1]), int((mine & 1 == 0).sum())
      assert counts[2 * g] == len(odd) and counts[2 * g + 1] == 1000 - even
      np.testing.assert_array_equal(np.sort(kept[256 * g:256 * g + len(odd)]), odd)
      t = tickets[256 * g:256 * (g + 1)]
      np.testing.assert_array_equal(np.sort(t[mine & 1 == 0]), np.arange(1000 - even, 1000))
      assert (t[mine & 1 == 1] == 0xffffffff).all()
  for a, b in zip(interp, native):
    np.testing.assert_array_equal(a, b)
  assert runs > 0
