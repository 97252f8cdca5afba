"""Runtime reliability (issue 22): a GPU fault is reported on the queue that caused it and on no other (a queue that
merely waits is not marked dead), and a wait that runs out of time raises the runtime's queue error type."""
import numpy as np
import pytest
import gputwin.runtime as rt
from gputwin.abi import pm4 as P
from gputwin.runtime.hcq import QueueTimeout


def test_fault_of_one_queue_is_not_claimed_by_a_waiting_queue():
  with rt.open("mock:gfx1100") as dev:
    a, b = dev.queue("compute"), dev.queue("compute")
    m = dev.alloc(4096, host=True)
    vb = b.submit(P.wait_reg_mem(m.va, 1, func=3) + P.write_data(m.va + 8, 2), "B waits for a flag")
    va = a.submit(P.write_data(0x7800_0000, 1), "A writes to no mapping")
    with pytest.raises(QueueTimeout) as e: b.wait(vb, timeout=0.5)   # B is blocked, not faulted
    assert isinstance(e.value, rt.QueueFault) and isinstance(e.value, TimeoutError) and e.value.queue == b.queue_id
    assert b.error is None and f"queue {b.queue_id}:" in str(e.value)
    m.view(np.uint32, 1)[0] = 1                                          # release B: it still works
    b.wait(vb, timeout=10)
    assert m.view(np.uint32, 1, 8)[0] == 2
    with pytest.raises(rt.QueueFault, match=rf"compute queue {a.queue_id} .*A writes to no mapping"):
      a.wait(va, timeout=10)
    assert a.error is not None and a.error.va == 0x7800_0000 and not isinstance(a.error, QueueTimeout)


def test_each_queue_claims_its_own_fault_not_the_newest():
  """Faults of A then C are delivered while B waits (B claims neither); A, waiting next, gets A's fault although C's
  is the newer one, and C gets C's. (KFD's MEMORY event keeps only the last fault's data: faults of two queues that
  no wait saw in between reach the runtime as one, the later; the other queue's wait then ends in QueueTimeout.)"""
  with rt.open("mock:gfx1100") as dev:
    a, b, c = dev.queue("compute"), dev.queue("compute"), dev.queue("compute")
    m = dev.alloc(4096, host=True)
    vb = b.submit(P.wait_reg_mem(m.va, 1, func=3), "B waits for a flag")
    va = a.submit(P.write_data(0x7800_0000, 1), "A's bad write")
    with pytest.raises(QueueTimeout): b.wait(vb, timeout=0.3)
    vc = c.submit(P.write_data(0x7900_0000, 1), "C's bad write")
    with pytest.raises(QueueTimeout): b.wait(vb, timeout=0.3)
    with pytest.raises(rt.QueueFault, match=rf"queue {a.queue_id} .*A's bad write") as ea: a.wait(va, timeout=10)
    with pytest.raises(rt.QueueFault, match=rf"queue {c.queue_id} .*C's bad write") as ec: c.wait(vc, timeout=10)
    assert (ea.value.va, ec.value.va) == (0x7800_0000, 0x7900_0000) and b.error is None
    m.view(np.uint32, 1)[0] = 1
    b.wait(vb, timeout=10)
