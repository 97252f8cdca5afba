"""The reliability harness's worker process is replaced after Worker.RECYCLE requests: native code linked into a
process is never unloaded, so a long campaign's worker would otherwise grow without bound."""
from gputwin.verify import reliability as R


def test_worker_is_replaced_after_recycle_requests(monkeypatch):
  monkeypatch.setattr(R.Worker, "RECYCLE", 2)
  w = R.Worker()
  pids = []
  try:
    for start in range(5):  # (selftest case 0..4 of seed 4: no crash, hang or exception among them)
      st, rep, _ = w.ask({"cat": "selftest", "seed": 4, "start": start, "n": 1}, 5.0, 10.0)
      assert st == "reply", (st, rep)
      pids.append(w.p.pid)
  finally:
    w.stop()
  assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
