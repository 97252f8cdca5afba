"""The race checker's host code (emu/native/race.ll) against the lane-by-lane walk its header states, on random
logs and tables: waves whose lanes access consecutive dwords (the vector path), with lanes off, crossing into the
next workgroup's window, scattered, idle; stores, loads and queued loads; one, two and four dwords per lane. The
first racing lane must be the walk's, and an access without a race must leave the walk's table."""
import numpy as np
import pytest

pytest.importorskip("llvmlite")

from gputwin.emu.checks import _host_fn  # noqa: E402

OFF = 0xFFFFFFFF
SHIFT, ND = 10, 260  # a workgroup's window: 1 KiB of offsets; rows per workgroup: 256 dwords + a b128's 3


def walk(log, site, waves, L, dwords, mode, tab, epoch):
  """Each dword k, each wave in order, each of its lanes in order, seeing the table as the lanes before left it."""
  for k in range(dwords):
    for j, w in enumerate(waves):
      for lane in range(L):
        a = int(log[w, site, lane])
        if a == OFF:
          continue
        g = a >> SHIFT
        f, ep = g * ND + ((a & ((1 << SHIFT) - 1)) >> 2) + k, int(epoch[g])
        ww, we, rw, re = (int(x) for x in tab[f])
        by_writer = we == ep and ww != w and ww >= 0
        by_reader = re == ep and rw != w and rw != -1
        if (mode == 1 and (by_writer or by_reader)) or (mode == 0 and by_writer):
          return (j * L + lane) * 64 + k
        if mode == 1:
          tab[f, 0], tab[f, 1] = w, ep
        else:
          tab[f, 2], tab[f, 3] = -2 if by_reader else w, ep
  return -1


def _lanes(rng, L, wg, dwords):
  """One wave's addresses: consecutive from a base (some lanes off, maybe lane 0), scattered, or none."""
  kind = rng.integers(5)
  lane = np.arange(L)
  if kind == 4:
    return np.full(L, OFF, np.uint32)
  if kind == 3:  # scattered dwords (two lanes may share one)
    off = rng.integers(0, 256 - dwords + 1, L) * 4
  else:
    base = rng.integers(0, 256 + 8) * 4  # (from the top: the last lanes run into the next workgroup's window)
    off = base + 4 * dwords * lane
  a = (np.uint64(wg) << np.uint64(SHIFT)) + off.astype(np.uint64)
  a = np.where(a < (np.uint64(3) << np.uint64(SHIFT)), a, np.uint64(OFF)).astype(np.uint32)
  if kind == 1:  # some lanes off
    a[rng.random(L) < 0.3] = OFF
  if kind == 2:
    a[0] = OFF
  return a


@pytest.mark.parametrize("L", [32, 64])
@pytest.mark.parametrize("dwords", [1, 2, 4])
def test_host_walk_equals_lane_walk(L, dwords):
  fn, rng = _host_fn("lds_access"), np.random.default_rng(L * 10 + dwords)
  W, nwg, races = 12, 3, 0
  for trial in range(150):
    log = np.stack([np.stack([_lanes(rng, L, w % nwg, dwords) for _ in range(2)]) for w in range(W)])
    epoch = rng.integers(1, 4, nwg).astype(np.int64)
    tab = np.zeros((nwg * ND, 4), np.int32)
    used = rng.random(len(tab)) < 0.05 * (trial % 4)  # (no other entry in a quarter of the trials)
    tab[used, 0] = rng.integers(-1, W, used.sum())
    tab[used, 2] = rng.integers(-2, W, used.sum())
    tab[used, 1] = tab[used, 3] = rng.integers(0, 4, used.sum())
    waves = rng.permutation(W)[:rng.integers(1, W + 1)].astype(np.int64)
    site, mode = int(rng.integers(2)), int(rng.integers(3))
    want_tab = tab.copy()
    want = walk(log, site, waves, L, dwords, mode, want_tab, epoch)
    got = fn(log.ctypes.data, 2, site, waves.ctypes.data, len(waves), L, dwords, mode, tab.ctypes.data,
             epoch.ctypes.data, ND, SHIFT, (1 << SHIFT) - 1)
    assert got == want, (trial, mode)
    if want < 0:
      np.testing.assert_array_equal(tab, want_tab)
    races += want >= 0
  assert 20 < races < 130  # both outcomes well represented
