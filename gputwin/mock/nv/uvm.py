"""/dev/nvidia-uvm of the mock driver: per-file VA spaces, GPU and GPU-VA-space registration, external ranges and the
mapping of RM memory into a GPU's VA space at the user's address (UvmMapExternalAllocation).

uvm_ioctl() copies the command's fixed struct in (EFAULT), runs the handler, stores its NV_STATUS in rmStatus and copies
the struct back; the ioctl returns 0. Unknown commands -> EINVAL (uvm_test_ioctl). Every command but INITIALIZE and
MM_INITIALIZE needs an initialized file, else rmStatus NV_ERR_ILLEGAL_ACTION. The checks follow
kernel-open/nvidia-uvm/uvm.c, uvm_va_space.c, uvm_map_external.c (595.45); "mock:" marks choices.
"""
from __future__ import annotations
import ctypes, dataclasses, errno
from gputwin.abi import nv
from gputwin.abi.hostmem import copy_from_user, copy_to_user, user_buffer
from gputwin.mock.nv.machine import NVGpu, RMObject

PAGE_4K = 4096


@dataclasses.dataclass(eq=False)
class UvmMapping:
  gpu: NVGpu
  va: int
  length: int
  mem: RMObject
  vm: object


@dataclasses.dataclass(eq=False)
class UvmVaSpace:
  """uvm_va_space_t: what one initialized /dev/nvidia-uvm file holds."""
  flags: int
  gpus: dict = dataclasses.field(default_factory=dict)        # gpu index -> RM vaspace object or None (registered)
  peers: set = dataclasses.field(default_factory=set)         # frozenset({i, j}) with peer access enabled
  ranges: dict = dataclasses.field(default_factory=dict)      # base -> (end, type: "external" | "channel")
  maps: list = dataclasses.field(default_factory=list)        # UvmMapping, in external ranges
  channels: dict = dataclasses.field(default_factory=dict)    # (hClient, hChannel) -> range base
  mm_file: object = None                                      # the file MM_INITIALIZE bound to this VA space


def _range_invalid_4k(base: int, length: int) -> bool:
  """uvm_api_range_invalid_4k: unaligned, empty, at 0, or wrapping."""
  return base % PAGE_4K or length % PAGE_4K or base == 0 or length == 0 or base + length >= 1 << 64


class UVM:
  """Mixin of MockNV: the UVM ioctls (needs the RM mixin for the objects behind rmCtrlFd/hClient handles)."""

  def _uvm_ioctl(self, f, request: int, arg) -> int:
    if request == nv.UVM_DEINITIALIZE: return 0
    row = nv.UVM_IOCTLS.get(request)
    if row is None: raise OSError(errno.EINVAL, f"nvidia-uvm: unknown ioctl {request:#x}")
    name, T = row
    addr, avail = user_buffer(arg, ctypes.sizeof(T))
    raw = copy_from_user(addr, ctypes.sizeof(T)) if avail >= ctypes.sizeof(T) else None
    if raw is None: raise OSError(errno.EFAULT, f"UVM_{name}: argument shorter than its struct")
    p = T.from_buffer_copy(raw)
    with self._lock:
      if name in ("INITIALIZE", "MM_INITIALIZE"): p.rmStatus = getattr(self, "_uvm_" + name.lower())(f, p)
      elif not isinstance(f.uvm, UvmVaSpace): p.rmStatus = nv.NV_ERR_ILLEGAL_ACTION
      else: p.rmStatus = getattr(self, "_uvm_" + name.lower())(f.uvm, p)
    if not copy_to_user(addr, bytes(p)):                             # copy_to_user fails (read-only memory)
      raise OSError(errno.EFAULT, f"UVM_{name}: argument not writable")
    self._announce()
    return 0

  # uvm_api_initialize: a new VA space (flags outside UVM_INIT_FLAGS_MASK -> INVALID_ARGUMENT); again with the same
  # flags -> OK, other flags -> INVALID_ARGUMENT; on an MM file -> INVALID_ARGUMENT.
  def _uvm_initialize(self, f, p) -> int:
    if f.uvm == "mm": return nv.NV_ERR_INVALID_ARGUMENT
    if isinstance(f.uvm, UvmVaSpace): return nv.NV_OK if p.flags == f.uvm.flags else nv.NV_ERR_INVALID_ARGUMENT
    if p.flags & ~nv.UVM_INIT_FLAGS_MASK: return nv.NV_ERR_INVALID_ARGUMENT
    f.uvm = UvmVaSpace(p.flags)
    return nv.NV_OK

  # uvm_api_mm_initialize: uvmFd must be an initialized UVM file (INVALID_ARGUMENT); this file must be uninitialized
  # (IN_USE); the VA space must not have an MM file yet (INVALID_STATE).
  def _uvm_mm_initialize(self, f, p) -> int:
    src = self._fds.get(p.uvmFd)
    if src is None or src.kind != "uvm" or not isinstance(src.uvm, UvmVaSpace): return nv.NV_ERR_INVALID_ARGUMENT
    if f.uvm is not None: return nv.NV_ERR_IN_USE
    if src.uvm.mm_file is not None: return nv.NV_ERR_INVALID_STATE
    src.uvm.mm_file, f.uvm = f, "mm"
    return nv.NV_OK

  def _uvm_pageable_mem_access(self, vas: UvmVaSpace, p) -> int:
    p.pageableMemAccess = 0          # mock: no HMM/ATS, pageable memory is not GPU-accessible
    return nv.NV_OK

  def _uvm_gpu(self, uuid) -> NVGpu | None:
    raw = bytes(uuid.uuid)
    return next((g for g in self.gpus if g.uuid == raw), None)

  # uvm_va_space_register_gpu: unknown UUID -> GPU_UUID_NOT_FOUND; registered twice -> INVALID_DEVICE. rmCtrlFd -1:
  # no SMC partition reference. mock: no NUMA-onlined GPU memory.
  def _uvm_register_gpu(self, vas: UvmVaSpace, p) -> int:
    g = self._uvm_gpu(p.gpu_uuid)
    if g is None: return nv.NV_ERR_GPU_UUID_NOT_FOUND
    if g.index in vas.gpus: return nv.NV_ERR_INVALID_DEVICE
    vas.gpus[g.index] = None
    p.numaEnabled, p.numaNodeId = 0, -1
    return nv.NV_OK

  def _uvm_unregister_gpu(self, vas: UvmVaSpace, p) -> int:
    g = self._uvm_gpu(p.gpu_uuid)
    if g is None or g.index not in vas.gpus: return nv.NV_ERR_INVALID_DEVICE
    self._uvm_drop_gpu(vas, g)
    del vas.gpus[g.index]
    vas.peers = {pr for pr in vas.peers if g.index not in pr}
    return nv.NV_OK

  def _uvm_rm_object(self, fd: int, hclient: int, h: int, kinds: tuple[str, ...]) -> RMObject | int:
    """An RM object named through an nvidiactl file (the dup UVM does through rmCtrlFd): not an nvidiactl fd ->
    INVALID_ARGUMENT, a client of another file -> INVALID_CLIENT, no such object -> OBJECT_NOT_FOUND."""
    cf = self._fds.get(fd)
    if cf is None or cf.kind != "ctl": return nv.NV_ERR_INVALID_ARGUMENT
    c = self._client(cf, hclient)
    if isinstance(c, int): return c
    o = c.objects.get(h)
    return o if o is not None and o.kind in kinds else nv.NV_ERR_OBJECT_NOT_FOUND

  # uvm_va_space_register_gpu_va_space: the GPU must be registered and have no GPU VA space yet (INVALID_DEVICE); the
  # RM VA space is duped through rmCtrlFd and must belong to that GPU.
  def _uvm_register_gpu_vaspace(self, vas: UvmVaSpace, p) -> int:
    g = self._uvm_gpu(p.gpuUuid)
    if g is None or g.index not in vas.gpus or vas.gpus[g.index] is not None: return nv.NV_ERR_INVALID_DEVICE
    o = self._uvm_rm_object(p.rmCtrlFd, p.hClient, p.hVaSpace, ("vaspace",))
    if isinstance(o, int): return o
    if o.gpu is not g: return nv.NV_ERR_INVALID_DEVICE
    vas.gpus[g.index] = o
    return nv.NV_OK

  def _uvm_unregister_gpu_vaspace(self, vas: UvmVaSpace, p) -> int:
    g = self._uvm_gpu(p.gpuUuid)
    if g is None or vas.gpus.get(g.index) is None: return nv.NV_ERR_INVALID_DEVICE
    self._uvm_drop_gpu(vas, g)
    vas.gpus[g.index] = None
    return nv.NV_OK

  # uvm_api_register_channel: the GPU needs a GPU VA space (INVALID_DEVICE); the channel is retained through RM (not a
  # channel, or one on another VA space -> INVALID_CHANNEL); [base, base+length) becomes a channel range of the VA
  # space (4K aligned -> else INVALID_ADDRESS; overlapping -> UVM_ADDRESS_IN_USE). mock: nothing is mapped there.
  def _uvm_register_channel(self, vas: UvmVaSpace, p) -> int:
    g = self._uvm_gpu(p.gpuUuid)
    if g is None or vas.gpus.get(g.index) is None: return nv.NV_ERR_INVALID_DEVICE
    o = self._uvm_rm_object(p.rmCtrlFd, p.hClient, p.hChannel, ("channel",))
    if isinstance(o, int): return nv.NV_ERR_INVALID_CHANNEL if o == nv.NV_ERR_OBJECT_NOT_FOUND else o
    if o.gpu is not g or o.channel.vm is not vas.gpus[g.index].vm: return nv.NV_ERR_INVALID_CHANNEL
    if (p.hClient, p.hChannel) in vas.channels: return nv.NV_ERR_INVALID_CHANNEL
    if _range_invalid_4k(p.base, p.length): return nv.NV_ERR_INVALID_ADDRESS
    if self._uvm_overlaps(vas, p.base, p.length): return nv.NV_ERR_UVM_ADDRESS_IN_USE
    vas.ranges[p.base] = (p.base + p.length, "channel")
    vas.channels[p.hClient, p.hChannel] = p.base
    return nv.NV_OK

  def _uvm_unregister_channel(self, vas: UvmVaSpace, p) -> int:
    base = vas.channels.pop((p.hClient, p.hChannel), None)
    if base is None: return nv.NV_ERR_INVALID_CHANNEL
    vas.ranges.pop(base, None)
    return nv.NV_OK

  # uvm_api_enable_peer_access: both GPUs registered and distinct (retain_pcie_peers_from_uuids: INVALID_DEVICE), the
  # pair not enabled yet (INVALID_DEVICE). mock: every GPU pair is P2P capable.
  def _uvm_enable_peer_access(self, vas: UvmVaSpace, p) -> int:
    a, b = self._uvm_gpu(p.gpuUuidA), self._uvm_gpu(p.gpuUuidB)
    if a is None or b is None or a is b or a.index not in vas.gpus or b.index not in vas.gpus or \
       frozenset((a.index, b.index)) in vas.peers:
      return nv.NV_ERR_INVALID_DEVICE
    vas.peers.add(frozenset((a.index, b.index)))
    return nv.NV_OK

  def _uvm_disable_peer_access(self, vas: UvmVaSpace, p) -> int:
    a, b = self._uvm_gpu(p.gpuUuidA), self._uvm_gpu(p.gpuUuidB)
    pair = frozenset((a.index, b.index)) if a and b else None
    if pair not in vas.peers: return nv.NV_ERR_INVALID_DEVICE
    vas.peers.discard(pair)
    for m in [m for m in vas.maps if m.mem.vidmem and {m.gpu.index, m.mem.gpu.index} == set(pair)]:
      self._uvm_unmap(vas, m)
    return nv.NV_OK

  @staticmethod
  def _uvm_overlaps(vas: UvmVaSpace, base: int, length: int) -> bool:
    return any(b < base + length and base < end for b, (end, _) in vas.ranges.items())

  # uvm_create_external_range: 4K-aligned non-empty range (INVALID_ADDRESS); a collision with any VA range ->
  # UVM_ADDRESS_IN_USE (uvm_va_range_create_external).
  def _uvm_create_external_range(self, vas: UvmVaSpace, p) -> int:
    if _range_invalid_4k(p.base, p.length): return nv.NV_ERR_INVALID_ADDRESS
    if self._uvm_overlaps(vas, p.base, p.length): return nv.NV_ERR_UVM_ADDRESS_IN_USE
    vas.ranges[p.base] = (p.base + p.length, "external")
    return nv.NV_OK

  # uvm_map_external_allocation: 4K-aligned range (INVALID_ADDRESS); gpuAttributesCount in 1..UVM_MAX_GPUS
  # (INVALID_ARGUMENT); inside one external range (INVALID_ADDRESS); per GPU: attributes valid (INVALID_ARGUMENT), a GPU
  # with a GPU VA space (INVALID_DEVICE), the range addressable by it (OUT_OF_RANGE), existing mappings in the range
  # replaced, the memory duped through rmCtrlFd, its owning GPU registered and, for another GPU's vidmem, peer access
  # enabled (INVALID_DEVICE, set_ext_gpu_map_location), offset + length inside it (INVALID_OFFSET,
  # uvm_va_range_map_rm_allocation). A failure unmaps what this call mapped.
  def _uvm_map_external_allocation(self, vas: UvmVaSpace, p) -> int:
    if _range_invalid_4k(p.base, p.length): return nv.NV_ERR_INVALID_ADDRESS
    if p.gpuAttributesCount == 0 or p.gpuAttributesCount > nv.UVM_MAX_GPUS: return nv.NV_ERR_INVALID_ARGUMENT
    rng = next(((b, e) for b, (e, t) in vas.ranges.items() if t == "external" and b <= p.base < e), None)
    if rng is None or rng[1] < p.base + p.length: return nv.NV_ERR_INVALID_ADDRESS
    done: list[UvmMapping] = []
    for i in range(p.gpuAttributesCount):
      st = self._uvm_map_on_gpu(vas, p, p.perGpuAttributes[i], done)
      if st:
        for m in done: self._uvm_unmap(vas, m)
        return st
    return nv.NV_OK

  def _uvm_map_on_gpu(self, vas: UvmVaSpace, p, attr, done: list) -> int:
    if attr.gpuMappingType > nv.UvmGpuMappingTypeReadOnly or attr.gpuCachingType > 2 or attr.gpuFormatType > 1 or \
       attr.gpuCompressionType > 1 or (attr.gpuFormatType != 0) != (attr.gpuElementBits != 0):
      return nv.NV_ERR_INVALID_ARGUMENT
    g = self._uvm_gpu(attr.gpuUuid)
    if g is None or vas.gpus.get(g.index) is None: return nv.NV_ERR_INVALID_DEVICE
    if p.base + p.length > 1 << g.spec.va_bits: return nv.NV_ERR_OUT_OF_RANGE
    vm = vas.gpus[g.index].vm
    for m in [m for m in vas.maps if m.gpu is g and m.va < p.base + p.length and p.base < m.va + m.length]:
      self._uvm_unmap(vas, m)      # mock: a partly overlapped mapping goes whole (UVM splits it)
    mem = self._uvm_rm_object(p.rmCtrlFd, p.hClient, p.hMemory, ("memory",))
    if isinstance(mem, int): return mem
    if mem.gpu.index not in vas.gpus: return nv.NV_ERR_INVALID_DEVICE
    if mem.gpu is not g and mem.vidmem and frozenset((g.index, mem.gpu.index)) not in vas.peers:
      return nv.NV_ERR_INVALID_DEVICE
    if p.offset + p.length > mem.bo.size: return nv.NV_ERR_INVALID_OFFSET
    bo = mem.bo if p.offset == 0 and p.length == mem.bo.size else \
      mem.bo.window(mem.handle, g.index, p.base, p.offset, p.length, mem.cls)
    if not vm.map(p.base, p.length, bo): return nv.NV_ERR_UVM_ADDRESS_IN_USE   # mock: an RM mapping is in the way
    mem.refs += 1
    m = UvmMapping(g, p.base, p.length, mem, vm)
    vas.maps.append(m)
    done.append(m)
    return nv.NV_OK

  def _uvm_unmap(self, vas: UvmVaSpace, m: UvmMapping):
    if m in vas.maps: vas.maps.remove(m)
    m.vm.unmap(m.va)
    self._unref(m.mem)

  def _uvm_drop_gpu(self, vas: UvmVaSpace, g: NVGpu):
    for m in [m for m in vas.maps if m.gpu is g]: self._uvm_unmap(vas, m)

  # uvm_api_unmap_external: [base, base+length) must be covered by this GPU's mappings in one external range.
  def _uvm_unmap_external(self, vas: UvmVaSpace, p) -> int:
    if _range_invalid_4k(p.base, p.length): return nv.NV_ERR_INVALID_ADDRESS
    g = self._uvm_gpu(p.gpuUuid)
    if g is None or vas.gpus.get(g.index) is None: return nv.NV_ERR_INVALID_DEVICE
    for m in [m for m in vas.maps if m.gpu is g and p.base <= m.va and m.va + m.length <= p.base + p.length]:
      self._uvm_unmap(vas, m)
    return nv.NV_OK

  # uvm_api_free: base must start a VA range this file created (INVALID_ADDRESS); its mappings on every GPU go.
  def _uvm_free(self, vas: UvmVaSpace, p) -> int:
    ent = vas.ranges.get(p.base)
    if ent is None or ent[1] != "external": return nv.NV_ERR_INVALID_ADDRESS
    end = ent[0]
    for m in [m for m in vas.maps if p.base <= m.va < end]: self._uvm_unmap(vas, m)
    del vas.ranges[p.base]
    return nv.NV_OK

  def _uvm_release(self, f):
    """uvm_release: closing the VA space's file tears it down (its MM file only drops the reference)."""
    vas = f.uvm
    if isinstance(vas, UvmVaSpace):
      for m in list(vas.maps): self._uvm_unmap(vas, m)
      if vas.mm_file is not None: vas.mm_file.uvm = None
    f.uvm = None
