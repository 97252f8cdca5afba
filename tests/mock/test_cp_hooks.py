"""How a command processor plugs into the mock driver: a thread polls doorbells, consumes the ring up to the write
pointer, reports progress through the read pointer and completes work with an end-of-pipe interrupt. The "runtime"
side uses only the kernel seam (open/ioctl/mmap/read_text) and the mapped memory, as it would on a real /dev/kfd."""
import ctypes, threading, time
from gputwin.abi.hostmem import MAP_SHARED, PROT_READ, PROT_WRITE
from gputwin.abi import kfd as abi
from gputwin.mock.kfd.topology import TOPOLOGY, parse_properties
from kfdclient import Client


class ToyCP(threading.Thread):
  """Not PM4: each rung doorbell means "everything up to wptr is done"; it then signals the event in dword 0 of the
  ring. Enough to exercise every hook a real command processor uses."""

  def __init__(self, k, signal_va: int):
    super().__init__(daemon=True)
    self.k, self.signal_va, self.stop, self.done = k, signal_va, threading.Event(), 0

  def run(self):
    while not self.stop.is_set():
      for q, _ in self.k.poll_doorbells():
        vm = self.k.address_space(q.gpu.gpu_id)
        wptr = self.k.read_wptr(q)
        event_id = vm.read_u32(q.ring_base)                   # the "packet": which event to signal
        self.k.write_rptr(q, wptr)                            # consumed everything
        vm.write_u64(self.signal_va + 8 * event_id, event_id)  # RELEASE_MEM data write to the event mailbox
        self.k.interrupt(q.gpu.gpu_id, context_id=event_id)   # ... followed by the interrupt
        self.done += 1
      time.sleep(0.0005)


def test_doorbell_to_interrupt_round_trip():
  c = Client(["gfx1100", "gfx942"])
  k = c.k
  nodes = sorted(k.listdir(f"{TOPOLOGY}/nodes"), key=int)
  gpu = next(int(k.read_text(f"{TOPOLOGY}/nodes/{n}/gpu_id")) for n in nodes
             if parse_properties(k.read_text(f"{TOPOLOGY}/nodes/{n}/properties"))["simd_count"])
  assert gpu == c.gpu
  c.acquire()
  page, page_cpu = c.buffer(abi.KFD_SIGNAL_EVENT_LIMIT * 8)
  ev = c.call("CREATE_EVENT", event_page_offset=page.handle, event_type=abi.KFD_IOC_EVENT_SIGNAL,
              auto_reset=1).event_id
  args = c.queue_args()
  ring_cpu = k.mmap(c.renders[c.gpu], k.address_space(c.gpu).find(args["ring_base_address"]).bo.mmap_offset,
                    0x1000, PROT_READ | PROT_WRITE, MAP_SHARED)
  ptr_cpu = k.mmap(c.renders[c.gpu], k.address_space(c.gpu).find(args["read_pointer_address"]).bo.mmap_offset,
                   0x1000, PROT_READ | PROT_WRITE, MAP_SHARED)
  q = c.call("CREATE_QUEUE", **args)
  bells = k.mmap(c.kfd, q.doorbell_offset & ~0x1FFF, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED)
  cp = ToyCP(k, page.va_addr)                                 # RELEASE_MEM would carry this address
  cp.start()
  try:
    for n in range(1, 6):                                       # five submissions, each waited for
      ctypes.c_uint32.from_address(ring_cpu).value = ev         # the "packet"
      ctypes.c_uint64.from_address(ptr_cpu + 8).value = 4 * n   # wptr (dwords), then the doorbell
      ctypes.c_uint64.from_address(bells + (q.doorbell_offset & 0x1FFF)).value = 4 * n
      evs = (abi.kfd_event_data * 1)()
      evs[0].event_id = ev
      w = c.call("WAIT_EVENTS", events_ptr=ctypes.addressof(evs), num_events=1, timeout=5000)
      assert w.wait_result == abi.KFD_IOC_WAIT_RESULT_COMPLETE
      assert ctypes.c_uint64.from_address(ptr_cpu).value == 4 * n                      # rptr caught up
      assert ctypes.c_uint64.from_address(page_cpu + 8 * ev).value == abi.UNSIGNALED_EVENT_SLOT   # acknowledged
  finally:
    cp.stop.set()
    cp.join()
  assert cp.done == 5
  for addr, n in ((ring_cpu, 0x1000), (ptr_cpu, 0x1000), (bells, 0x2000)): k.munmap(addr, n)
  c.close()


def test_synchronous_mode_runs_the_command_processor_inside_wait_events():
  c = Client("gfx1200")
  c.k.sync = True
  c.acquire()
  page, _ = c.buffer(abi.KFD_SIGNAL_EVENT_LIMIT * 8)
  ev = c.call("CREATE_EVENT", event_page_offset=page.handle, event_type=abi.KFD_IOC_EVENT_SIGNAL).event_id
  cp = ToyCP(c.k, page.va_addr)                                   # not started: no thread

  def on_bell(q, value):
    vm = c.k.address_space(q.gpu.gpu_id)
    c.k.write_rptr(q, c.k.read_wptr(q))
    vm.write_u64(cp.signal_va + 8 * ev, ev)
    c.k.interrupt(q.gpu.gpu_id, ev)

  c.k.on_doorbell.append(on_bell)
  q = c.call("CREATE_QUEUE", **c.queue_args())
  bells = c.k.mmap(c.kfd, q.doorbell_offset & ~0x1FFF, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED)
  mq, = c.k.queues()
  c.k.address_space(c.gpu).write_u64(mq.wptr_va, 8)
  ctypes.c_uint64.from_address(bells + (q.doorbell_offset & 0x1FFF)).value = 8
  evs = (abi.kfd_event_data * 1)()
  evs[0].event_id = ev
  w = c.call("WAIT_EVENTS", events_ptr=ctypes.addressof(evs), num_events=1, timeout=0)   # even a zero timeout
  assert w.wait_result == abi.KFD_IOC_WAIT_RESULT_COMPLETE and c.k.address_space(c.gpu).read_u64(mq.rptr_va) == 8
  c.k.munmap(bells, 0x2000)
  c.close()
