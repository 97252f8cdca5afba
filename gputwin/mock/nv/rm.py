"""The resource manager (RM) half of the mock NVIDIA driver: clients and their object trees, RmAlloc / RmFree /
RmAllocMemory / RmMapMemory / RmMapMemoryDma, and the controls a runtime uses.

Each handler writes an NV_STATUS into the parameters' status field (the ioctl itself succeeds, as RmIoctl does once the
escape's size is right). The order of the checks and the status each one returns follow the RM functions named in the
comments (src/nvidia/src/libraries/resserv/src/rs_server.c, rs_client.c, rs_resource.c and the class constructors of
open-gpu-kernel-modules); where the mock has to choose, the comment says "mock:".
"""
from __future__ import annotations
import ctypes, itertools, time
from gputwin.abi import nv
from gputwin.abi.hostmem import (PAGE_SIZE, HostBuffer, UserPages, copy_from_user, copy_to_user, host_range_accessible,
                                  page_align)
from gputwin.mock.vm import BufferObject, GPUAddressSpace
from gputwin.mock.nv.machine import NVChannel, RMClient, RMObject

CLIENT_HANDLE_BASE = 0xC1D00000          # RS_CLIENT_HANDLE_BASE: RM-generated client handles
BUCKET_MASK = 0x3FF                      # RS_CLIENT_HANDLE_BUCKET_MASK: the server's client lists are hashed by it
USERD_SIZE = 512                         # NV_RAMUSERD: one channel's USERD (the C36F..C86F control area)
NOTIFIER_SIZE = ctypes.sizeof(nv.NvNotification)
BIG_PAGE, HUGE_PAGE = 64 << 10, 2 << 20

# class -> (kind, parent kinds, alloc params struct or None, NULL params allowed)
_MEMORY_PARENTS = ("device", "subdevice")
CLASS_RULES: dict[int, tuple[str, tuple[str, ...], type | None, bool]] = {
  nv.NV01_DEVICE_0: ("device", ("client",), nv.NV0080_ALLOC_PARAMETERS, True),
  nv.NV20_SUBDEVICE_0: ("subdevice", ("device",), nv.NV2080_ALLOC_PARAMETERS, True),
  nv.FERMI_VASPACE_A: ("vaspace", _MEMORY_PARENTS, nv.NV_VASPACE_ALLOCATION_PARAMETERS, True),
  nv.NV01_MEMORY_LOCAL_USER: ("memory", _MEMORY_PARENTS, nv.NV_MEMORY_ALLOCATION_PARAMS, False),
  nv.NV01_MEMORY_SYSTEM: ("memory", _MEMORY_PARENTS, nv.NV_MEMORY_ALLOCATION_PARAMS, False),
  nv.NV01_MEMORY_VIRTUAL: ("virtual", _MEMORY_PARENTS, nv.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS, True),
  nv.KEPLER_CHANNEL_GROUP_A: ("tsg", _MEMORY_PARENTS, nv.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS, True),
  nv.FERMI_CONTEXT_SHARE_A: ("ctxshare", ("tsg",), nv.NV_CTXSHARE_ALLOCATION_PARAMETERS, True),
  nv.GT200_DEBUGGER: ("debugger", ("device",), nv.NV83DE_ALLOC_PARAMETERS, False),
  nv.NV01_EVENT_OS_EVENT: ("event", ("device", "subdevice", "channel", "tsg", "client"), nv.NV0005_ALLOC_PARAMETERS,
                           False),
  **{c: ("usermode", ("subdevice",), nv.NV_HOPPER_USERMODE_A_PARAMS if c == nv.HOPPER_USERMODE_A else None, True)
     for c in (nv.VOLTA_USERMODE_A, nv.TURING_USERMODE_A, nv.AMPERE_USERMODE_A, nv.HOPPER_USERMODE_A)},
  **{c: ("channel", ("device", "tsg"), nv.NV_CHANNEL_ALLOC_PARAMS, False)
     for c in (nv.VOLTA_CHANNEL_GPFIFO_A, nv.TURING_CHANNEL_GPFIFO_A, nv.AMPERE_CHANNEL_GPFIFO_A,
               nv.HOPPER_CHANNEL_GPFIFO_A)},
  **{c: ("engine", ("channel",), nv.NV_GR_ALLOCATION_PARAMETERS, True)
     for c in (nv.AMPERE_COMPUTE_A, nv.AMPERE_COMPUTE_B, nv.ADA_COMPUTE_A, nv.HOPPER_COMPUTE_A)},
  **{c: ("engine", ("channel",), nv.NVB0B5_ALLOCATION_PARAMETERS, True)
     for c in (nv.AMPERE_DMA_COPY_A, nv.AMPERE_DMA_COPY_B, nv.HOPPER_DMA_COPY_A)},
}
_ROOT_CLASSES = (nv.NV01_ROOT, nv.NV01_ROOT_NON_PRIV, nv.NV01_ROOT_CLIENT)
_GPU_CLASSES = {c for c, (k, *_) in CLASS_RULES.items() if k in ("usermode", "channel", "engine")}


def read_user(addr: int, T: type):
  """copy_from_user of a struct: None when the user range cannot be read (unmapped, PROT_NONE: EFAULT; a copy by
  process_vm_readv, so never a SIGSEGV even when another thread unmaps it meanwhile)."""
  raw = copy_from_user(addr, ctypes.sizeof(T))
  return None if raw is None else T.from_buffer_copy(raw)


def write_user(addr: int, obj) -> bool:
  """copy_to_user of a struct: False when the user range cannot be written (read-only too)."""
  return copy_to_user(addr, bytes(obj))


def _align(v: int, a: int) -> int: return (v + a - 1) // a * a


class RM:
  """Mixin of MockNV: the RM escapes. Needs self.gpus, self._clients, self._fds, self._channels, self._lock."""

  # ================================================================ clients and lookups
  def _rm_init(self):
    self._clients: dict[int, RMClient] = {}
    self._client_ids = itertools.count()
    self._channels: list[NVChannel] = []
    self._chids: dict[int, set] = {g.index: set() for g in self.gpus}
    self._cpu_maps: dict[tuple[int, int, int], tuple[RMObject, int]] = {}   # (client, hMemory, pLinear) -> (obj, fd)
    self._retired: list[tuple[float, HostBuffer]] = []
    self._phys = {g.index: 0 for g in self.gpus}

  @staticmethod
  def _os_info(f):
    """secInfo.clientOSInfo (RmIoctl): the nvidiactl file a device file was registered to, else the file itself."""
    return f.ctl if getattr(f, "ctl", None) is not None else f

  def _client(self, f, h: int) -> RMClient | int:
    """_serverLockClient + clientValidate. An unknown handle: _serverFindClientEntry walks the handle's bucket
    (h & RS_CLIENT_HANDLE_BUCKET_MASK, sorted by handle) and answers INVALID_OBJECT when it meets a larger handle,
    INVALID_OBJECT_HANDLE when it runs off the end. A client of another file: rmclientValidate -> INVALID_CLIENT
    (strict validation: the client's file must be the caller's, or the control file the caller registered to)."""
    c = self._clients.get(h)
    if c is None:
      larger = any(x & BUCKET_MASK == h & BUCKET_MASK and x > h for x in self._clients)
      return nv.NV_ERR_INVALID_OBJECT if larger else nv.NV_ERR_INVALID_OBJECT_HANDLE
    if c.owner is not self._os_info(f): return nv.NV_ERR_INVALID_CLIENT
    return c

  def _lookup(self, f, hclient: int, h: int, kinds: tuple[str, ...] | None = None) -> RMObject | int:
    """clientGetResourceRef: no such handle -> OBJECT_NOT_FOUND. mock: a handle of the wrong resource type where the
    call needs a specific one -> INVALID_OBJECT_HANDLE."""
    c = self._client(f, hclient)
    if isinstance(c, int): return c
    o = c.objects.get(h)
    if o is None: return nv.NV_ERR_OBJECT_NOT_FOUND
    if kinds is not None and o.kind not in kinds: return nv.NV_ERR_INVALID_OBJECT_HANDLE
    return o

  # ================================================================ NV_ESC_RM_ALLOC (Nv04Alloc -> serverAllocResource)
  def _rm_alloc(self, f, p) -> None:
    p.status = self._alloc(f, p)

  def _alloc(self, f, p) -> int:
    """serverAllocResource: the client (lock + clientValidate), then serverAllocResourceUnderLock (alloc_free.c): the
    class (INVALID_CLASS), the parent handle (clientGetResourceRef: OBJECT_NOT_FOUND), the parent's class against the
    class's parent list (INVALID_OBJECT_PARENT), the new handle (INSERT_DUPLICATE_NAME), then the constructor (a class
    this GPU does not have: INVALID_CLASS; its parameter checks)."""
    cls = p.hClass
    if cls in _ROOT_CLASSES: return self._alloc_client(f, p)
    client = self._client(f, p.hRoot)
    if isinstance(client, int): return client
    rule = CLASS_RULES.get(cls)
    if rule is None: return nv.NV_ERR_INVALID_CLASS                    # RsResInfoByExternalClassId
    kind, parents, T, null_ok = rule
    parent = client.objects.get(p.hObjectParent)
    if parent is None: return nv.NV_ERR_OBJECT_NOT_FOUND               # clientGetResourceRef(hParent)
    if parent.kind not in parents: return nv.NV_ERR_INVALID_OBJECT_PARENT   # pResDesc->pParentList
    if p.hObjectNew and p.hObjectNew in client.objects:
      return nv.NV_ERR_INSERT_DUPLICATE_NAME                          # clientAssignResourceHandle
    gpu = parent.gpu
    if cls in _GPU_CLASSES and (gpu is None or cls not in gpu.spec.classes):
      return nv.NV_ERR_INVALID_CLASS                                  # the GPU's class list (resservResourceFactory)
    params = None
    if T is not None:
      if not p.pAllocParms:
        if not null_ok: return nv.NV_ERR_INVALID_ARGUMENT               # rmapiGetClassAllocParamSize: NULL not allowed
        params = T()
      else:
        if p.paramsSize and p.paramsSize != ctypes.sizeof(T): return nv.NV_ERR_INVALID_ARGUMENT   # mock
        params = read_user(p.pAllocParms, T)
        if params is None: return nv.NV_ERR_INVALID_ADDRESS            # rmapiParamsAcquire: copy_from_user failed
    h = p.hObjectNew or self._gen_handle(client)
    obj = RMObject(client, h, cls, kind, parent, gpu)
    status = getattr(self, "_new_" + kind)(f, obj, params)
    if status: return status
    if params is not None and p.pAllocParms and not write_user(p.pAllocParms, params): return nv.NV_ERR_INVALID_ADDRESS
    client.objects[h] = obj
    parent.children[h] = obj
    p.hObjectNew = h
    return nv.NV_OK

  @staticmethod
  def _gen_handle(client: RMClient) -> int:
    while client.next_handle in client.objects: client.next_handle += 1
    h, client.next_handle = client.next_handle, client.next_handle + 1
    return h

  def _alloc_client(self, f, p) -> int:
    """RmIoctl forces userspace root allocations to NV01_ROOT_CLIENT (nvidiactl only); serverAllocClient generates a
    handle for 0 and rejects one in use."""
    p.hClass = nv.NV01_ROOT_CLIENT
    h = p.hObjectNew
    if h and h in self._clients: return nv.NV_ERR_INSERT_DUPLICATE_NAME
    while not h or h in self._clients: h = CLIENT_HANDLE_BASE + next(self._client_ids)
    c = self._clients[h] = RMClient(h, f)
    c.objects[h] = RMObject(c, h, nv.NV01_ROOT_CLIENT, "client", None)
    p.hObjectNew = h
    return nv.NV_OK

  # ---- class constructors: return an NV_STATUS; may fill `obj` and write outputs into `a`
  def _new_device(self, f, obj, a) -> int:
    """deviceConstruct: deviceId is the device instance (the index in the attached GPU list)."""
    if a.deviceId >= len(self.gpus): return nv.NV_ERR_INVALID_ARGUMENT
    obj.gpu = self.gpus[a.deviceId]
    obj.info["vaMode"] = a.vaMode
    return nv.NV_OK

  def _new_subdevice(self, f, obj, a) -> int:
    """subdeviceConstruct: one GPU per device here (no SLI), so subDeviceId must be 0."""
    if a.subDeviceId != 0: return nv.NV_ERR_INVALID_ARGUMENT
    return nv.NV_OK

  def _new_usermode(self, f, obj, a) -> int:
    """The usermode region: a 64 KiB page per GPU whose NOTIFY_CHANNEL_PENDING register is the doorbell."""
    g = obj.gpu
    if g.usermode is None: g.usermode = HostBuffer(nv.NVC361_NV_USERMODE__SIZE, f"nv{g.index}-usermode")
    return nv.NV_OK

  def _new_vaspace(self, f, obj, a) -> int:
    """vaspaceConstruct (FERMI_VASPACE_A): [vaBase, vaBase + vaSize) inside the GPU's VA bits; 0 size = all of it.
    mock: the first 64 KiB stay unmapped (no NULL page) unless ALLOW_ZERO_ADDRESS."""
    top = 1 << obj.gpu.spec.va_bits
    base = a.vaBase or (0 if a.flags & nv.NV_VASPACE_ALLOCATION_FLAGS_ALLOW_ZERO_ADDRESS else BIG_PAGE)
    size = a.vaSize or top - base
    if a.index not in (nv.NV_VASPACE_ALLOCATION_INDEX_GPU_NEW,) or base % PAGE_SIZE or base + size > top:
      return nv.NV_ERR_INVALID_ARGUMENT
    a.vaBase, a.vaSize = base, size
    obj.va_range = (base, base + size)
    obj.vm = GPUAddressSpace(f"{obj.gpu.arch}:{obj.gpu.index}/vaspace{obj.handle:#x}")
    return nv.NV_OK

  def _device_vaspace(self, dev: RMObject) -> RMObject:
    """The device's default VA space, created on first use (mock: for every vaMode)."""
    vas = dev.info.get("vaspace")
    if vas is None:
      vas = dev.info["vaspace"] = RMObject(dev.client, 0, nv.FERMI_VASPACE_A, "vaspace", dev, dev.gpu)
      self._new_vaspace(None, vas, nv.NV_VASPACE_ALLOCATION_PARAMETERS())
    return vas

  def _vaspace(self, obj: RMObject, h: int) -> RMObject | int:
    """A FERMI_VASPACE_A handle of the object's client on the same GPU; 0 = the device default."""
    if h == 0: return self._device_vaspace(obj.ancestor("device"))
    vas = obj.client.objects.get(h)
    if vas is None or vas.kind != "vaspace" or vas.gpu is not obj.gpu: return nv.NV_ERR_INVALID_OBJECT_HANDLE
    return vas

  def _new_memory(self, f, obj, a) -> int:
    """Memory classes (NV01_MEMORY_LOCAL_USER / NV01_MEMORY_SYSTEM via heap allocation): size rounded to the page size
    the attributes ask for; vidmem beyond the FB -> NO_MEMORY. Outputs size/offset/limit like the heap does."""
    if a.size == 0: return nv.NV_ERR_INVALID_ARGUMENT
    if a.flags & nv.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE and a.alignment & (a.alignment - 1):
      return nv.NV_ERR_INVALID_ARGUMENT
    ps = {nv.NVOS32_ATTR_PAGE_SIZE_HUGE: HUGE_PAGE, nv.NVOS32_ATTR_PAGE_SIZE_BIG: BIG_PAGE}.get(
      nv.DRF_VAL(nv.NVOS32_ATTR_PAGE_SIZE, a.attr), PAGE_SIZE)
    vid = obj.cls == nv.NV01_MEMORY_LOCAL_USER and \
          nv.DRF_VAL(nv.NVOS32_ATTR_LOCATION, a.attr) != nv.NVOS32_ATTR_LOCATION_PCI
    return self._make_memory(obj, a.size, ps, vid, a)

  def _make_memory(self, obj: RMObject, size: int, ps: int, vid: bool, a=None) -> int:
    g, size = obj.gpu, _align(size, ps)
    if vid and g.fb_used + size > g.spec.fb_size: return nv.NV_ERR_NO_MEMORY
    try: host = HostBuffer(size, f"nv{g.index}-{'vid' if vid else 'sys'}mem-{obj.handle:#x}")
    except OSError: return nv.NV_ERR_NO_MEMORY
    obj.bo = BufferObject(obj.handle, g.index, 0, size, obj.cls, 0, host)
    obj.vidmem, obj.page_size = vid, ps
    if vid:
      g.fb_used += size
      obj.phys = self._phys[g.index] = _align(self._phys[g.index], max(ps, BIG_PAGE))
      self._phys[g.index] += size
    if a is not None: a.size, a.offset, a.limit = size, obj.phys, obj.phys + size - 1
    return nv.NV_OK

  def _new_virtual(self, f, obj, a) -> int:
    """NV01_MEMORY_VIRTUAL: a VA reservation [offset, limit] of a VA space (limit 0: the whole VA space)."""
    vas = self._vaspace(obj, a.hVASpace)
    if isinstance(vas, int): return vas
    lo, hi = (a.offset, a.limit + 1) if a.limit else vas.va_range
    if lo >= hi or lo < vas.va_range[0] or hi > vas.va_range[1] or lo % PAGE_SIZE: return nv.NV_ERR_INVALID_ARGUMENT
    obj.vm, obj.va_range, obj.info["vaspace"] = vas.vm, (lo, hi), vas
    a.offset, a.limit = lo, hi - 1
    return nv.NV_OK

  def _new_tsg(self, f, obj, a) -> int:
    """kchangrpConstruct: engineType 0 means graphics; the TSG's VA space is hVASpace or the device default."""
    vas = self._vaspace(obj, a.hVASpace)
    if isinstance(vas, int): return vas
    obj.info.update(vaspace=vas, engine=a.engineType or nv.NV2080_ENGINE_TYPE_GRAPHICS, timeslice=1024,
                    scheduled=False, subctx=set())
    return nv.NV_OK

  def _new_ctxshare(self, f, obj, a) -> int:
    """kctxshareConstruct: a subcontext of the TSG with its VA space (hVASpace, else the TSG's); SPECIFIED takes
    subctxId, the others the lowest free id (mock: 64 subcontexts per TSG)."""
    tsg = obj.parent
    vas = tsg.info["vaspace"] if a.hVASpace == 0 else self._vaspace(obj, a.hVASpace)
    if isinstance(vas, int): return vas
    used = tsg.info["subctx"]
    mode = nv.DRF_VAL(nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT, a.flags)
    if mode == nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED:
      if a.subctxId >= 64 or a.subctxId in used: return nv.NV_ERR_INVALID_ARGUMENT
      sid = a.subctxId
    else:
      sid = next((i for i in range(64) if i not in used), None)
      if sid is None: return nv.NV_ERR_INSUFFICIENT_RESOURCES
    used.add(sid)
    a.subctxId = sid
    obj.info.update(vaspace=vas, subctx=sid)
    return nv.NV_OK

  def _memory_of(self, obj: RMObject, h: int) -> RMObject | None:
    m = obj.client.objects.get(h)
    return m if m is not None and m.kind == "memory" else None

  def _new_channel(self, f, obj, a) -> int:
    """kchannelConstruct for the GPFIFO classes: the VA space comes from the context share, else hVASpace, else the
    TSG's, else the device default; USERD is hUserdMemory[0] + userdOffset[0] (512-byte aligned, inside the memory);
    the error notifier is hObjectError's memory; gpFifoEntries a power of two, gpFifoOffset 8-byte aligned.
    mock: the ring itself is not checked at allocation (the GPU faults the channel when it reads an unmapped GPFIFO)."""
    tsg = obj.parent if obj.parent.kind == "tsg" else None
    ctx = None
    if a.hContextShare:
      ctx = obj.client.objects.get(a.hContextShare)
      if ctx is None or ctx.kind != "ctxshare": return nv.NV_ERR_INVALID_OBJECT_HANDLE
      if ctx.parent is not tsg: return nv.NV_ERR_INVALID_ARGUMENT
    if ctx: vas = ctx.info["vaspace"]
    else: vas = self._vaspace(obj, a.hVASpace) if a.hVASpace or not tsg else tsg.info["vaspace"]
    if isinstance(vas, int): return vas
    n = a.gpFifoEntries
    if n < 2 or n & (n - 1) or a.gpFifoOffset % 8: return nv.NV_ERR_INVALID_ARGUMENT
    if a.hObjectBuffer and self._memory_of(obj, a.hObjectBuffer) is None: return nv.NV_ERR_INVALID_OBJECT_HANDLE
    notifier = userd_mem = None
    if a.hObjectError:
      notifier = self._memory_of(obj, a.hObjectError)
      if notifier is None: return nv.NV_ERR_INVALID_OBJECT_HANDLE
      if notifier.bo.size < NOTIFIER_SIZE * nv.NV_CHANNELGPFIFO_NOTIFICATION_TYPE__SIZE_1:
        return nv.NV_ERR_INVALID_LIMIT
    if a.hUserdMemory[0]:
      userd_mem, off = self._memory_of(obj, a.hUserdMemory[0]), a.userdOffset[0]
      if userd_mem is None: return nv.NV_ERR_INVALID_OBJECT_HANDLE
      if off % USERD_SIZE or off + USERD_SIZE > userd_mem.bo.size: return nv.NV_ERR_INVALID_ARGUMENT
      userd = userd_mem.bo.view[off:off + USERD_SIZE]
    else:                                      # mock: RM-internal USERD, readable only by the GPU model
      obj.info["userd_host"] = HostBuffer(PAGE_SIZE, "nv-userd")
      userd = obj.info["userd_host"].view[:USERD_SIZE]
    g = obj.gpu
    chid = next(i for i in itertools.count() if i not in self._chids[g.index])
    self._chids[g.index].add(chid)
    ch = NVChannel(g, obj.handle, obj.cls, chid, vas.vm, a.gpFifoOffset, n, userd, id=chid, client=obj.client.handle,
                   notifier=notifier.bo.view[:NOTIFIER_SIZE * 3] if notifier else None,
                   scheduled=bool(tsg and tsg.info["scheduled"]))
    for m in (notifier, userd_mem):
      if m is not None: m.refs += 1
    obj.info.update(vaspace=vas, uses=[m for m in (notifier, userd_mem) if m is not None], tsg=tsg)
    obj.channel = ch
    a.cid = chid
    self._channels.append(ch)
    self._notify_channel(ch)
    return nv.NV_OK

  def _new_engine(self, f, obj, a) -> int:
    """A compute or copy object on a channel: the channel's engines map gets class -> handle."""
    obj.parent.channel.engines[obj.cls] = obj.handle
    return nv.NV_OK

  def _new_debugger(self, f, obj, a) -> int:
    """ksmdbgssnConstruct (GT200_DEBUGGER): hAppClient must be a client, hClass3dObject a compute object of it; the
    session debugs that object's channel. mock: any client of this process may be debugged."""
    app = self._clients.get(a.hAppClient)
    if app is None: return nv.NV_ERR_INVALID_CLIENT
    tgt = app.objects.get(a.hClass3dObject)
    if tgt is None or tgt.kind != "engine" or tgt.gpu is not obj.gpu: return nv.NV_ERR_INVALID_OBJECT_HANDLE
    obj.info["target"] = tgt.parent
    return nv.NV_OK

  def _new_event(self, f, obj, a) -> int:
    obj.info.update(notify=a.notifyIndex, data=a.data)
    return nv.NV_OK

  # ================================================================ NV_ESC_RM_FREE (Nv01Free -> serverFreeResourceTree)
  def _rm_free(self, f, p) -> None:
    """serverFreeResourceTree: the client as for every call; an unknown handle is a no-op returning NV_OK (Linux builds
    the resource server with RS_COMPATABILITY_MODE); the object goes with its descendants; hObjectOld == hRoot frees
    the client."""
    c = self._client(f, p.hRoot)
    if isinstance(c, int): p.status = c; return
    if p.hObjectOld == p.hRoot: self._free_client(c)
    elif (o := c.objects.get(p.hObjectOld)) is not None: self._free_tree(o)
    p.status = nv.NV_OK

  def _free_client(self, c: RMClient):
    root = c.objects[c.handle]
    for child in reversed(list(root.children.values())): self._free_tree(child)
    self._clients.pop(c.handle, None)
    for key in [k for k in self._cpu_maps if k[0] == c.handle]: del self._cpu_maps[key]

  def _free_tree(self, o: RMObject):
    """Children first (last allocated first), then the object's own teardown."""
    for child in reversed(list(o.children.values())): self._free_tree(child)
    getattr(self, "_del_" + o.kind, lambda o: None)(o)
    o.freed = True
    o.client.objects.pop(o.handle, None)
    if o.parent is not None: o.parent.children.pop(o.handle, None)
    vas = o.info.get("vaspace") if o.kind == "device" else None
    if vas is not None: self._del_vaspace(vas)

  def _del_memory(self, o: RMObject):
    """memDestruct: its DMA mappings go with it; GPU mappings made through UVM and channels keep the pages (the
    UVM dup / channel reference) until they let go."""
    for vas in self._dma_spaces(o.client):
      for off, (m, _) in list(vas.dma.items()):
        if m is o: self._dma_unmap(vas, off)
    if o.vidmem: o.gpu.fb_used -= o.bo.size
    o.freed = True
    self._unref(o, 0)

  def _unref(self, o: RMObject, n: int = 1):
    o.refs -= n
    if o.freed and o.refs <= 0 and o.bo is not None and o.bo.host is not None:
      self._retire(o.bo.host)
      o.bo.host = None

  def _retire(self, host: HostBuffer | UserPages):
    """mock: freed pages are unmapped a second later, so a GPU thread still finishing with them never touches an
    unmapped page (the real GPU is stopped by the channel teardown first); their memfd is closed now (a client that
    opens and frees devices in a loop would otherwise run out of file descriptors within that second)."""
    if isinstance(host, HostBuffer): host.close_fd()   # (user pages have no fd of ours)
    self._retired.append((time.monotonic(), host))

  def _reap(self, force: bool = False):
    now = time.monotonic()
    keep = []
    for t, h in self._retired:
      if force or now - t > 1.0: h.close()
      else: keep.append((t, h))
    self._retired = keep

  def _del_vaspace(self, o: RMObject):
    for off in list(o.dma): self._dma_unmap(o, off)

  def _del_virtual(self, o: RMObject):
    """The mappings made through a VA reservation go with it."""
    vas = o.info["vaspace"]
    for off in [va for va in vas.dma if o.va_range[0] <= va < o.va_range[1]]: self._dma_unmap(vas, off)

  def _del_ctxshare(self, o: RMObject): o.parent.info["subctx"].discard(o.info.get("subctx"))

  def _del_channel(self, o: RMObject):
    ch = o.channel
    ch.freed = True
    if ch in self._channels: self._channels.remove(ch)
    self._chids[ch.gpu.index].discard(ch.id)
    self._notify_channel(ch)
    for m in o.info.get("uses", ()): self._unref(m)
    if "userd_host" in o.info: self._retire(o.info.pop("userd_host"))

  def _del_engine(self, o: RMObject):
    ch = o.parent.channel
    if ch.engines.get(o.cls) == o.handle: del ch.engines[o.cls]

  # ================================================================ NV_ESC_RM_ALLOC_MEMORY (Nv01AllocMemory)
  def _rm_alloc_memory(self, f, w) -> None:
    """RmIoctl: NV01_MEMORY_SYSTEM_OS_DESCRIPTOR goes through RmAllocOsDescriptor (flags must say LOCATION_PCI and
    MAPPING_NO_MAP, coherency cached/write-back/uncached -> else INVALID_FLAGS; the address page aligned -> else
    NOT_SUPPORTED; limit + 1 != 0 -> else INVALID_LIMIT; the pages must be the user's -> else INVALID_ADDRESS);
    NV01_MEMORY_SYSTEM allocates limit + 1 bytes of system memory. Other classes: INVALID_CLASS."""
    p = w.params
    p.status = self._alloc_memory(f, p)

  def _alloc_memory(self, f, p) -> int:
    if p.hClass not in (nv.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, nv.NV01_MEMORY_SYSTEM): return nv.NV_ERR_INVALID_CLASS
    c = self._client(f, p.hRoot)
    if isinstance(c, int): return c
    if p.hObjectNew and p.hObjectNew in c.objects: return nv.NV_ERR_INSERT_DUPLICATE_NAME
    parent = c.objects.get(p.hObjectParent)
    if parent is None or parent.kind not in _MEMORY_PARENTS: return nv.NV_ERR_INVALID_OBJECT_PARENT
    h = p.hObjectNew or self._gen_handle(c)
    obj = RMObject(c, h, p.hClass, "memory", parent, parent.gpu)
    if p.hClass == nv.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
      fl = p.flags
      if nv.DRF_VAL(nv.NVOS02_FLAGS_LOCATION, fl) != nv.NVOS02_FLAGS_LOCATION_PCI or \
         nv.DRF_VAL(nv.NVOS02_FLAGS_MAPPING, fl) != nv.NVOS02_FLAGS_MAPPING_NO_MAP or \
         nv.DRF_VAL(nv.NVOS02_FLAGS_COHERENCY, fl) not in (nv.NVOS02_FLAGS_COHERENCY_CACHED,
                                                         nv.NVOS02_FLAGS_COHERENCY_WRITE_BACK,
                                                         nv.NVOS02_FLAGS_COHERENCY_UNCACHED):
        return nv.NV_ERR_INVALID_FLAGS
      if p.pMemory % PAGE_SIZE: return nv.NV_ERR_NOT_SUPPORTED
      if p.limit + 1 >= 1 << 64: return nv.NV_ERR_INVALID_LIMIT
      size = page_align(p.limit + 1)
      if not host_range_accessible(p.pMemory, size): return nv.NV_ERR_INVALID_ADDRESS   # os_lock_user_pages failed
      try: pages = UserPages(p.pMemory, size)                              # locked until the memory is freed
      except OSError: return nv.NV_ERR_INVALID_ADDRESS
      obj.bo = BufferObject(h, parent.gpu.index, 0, size, p.hClass, 0, pages=pages)
    else:
      st = self._make_memory(obj, p.limit + 1, PAGE_SIZE, False)
      if st: return st
    c.objects[h] = obj
    parent.children[h] = obj
    p.hObjectNew = h
    return nv.NV_OK

  # ================================================================ NV_ESC_RM_MAP_MEMORY (Nv04MapMemory + mmap context)
  def _rm_map_memory(self, f, w) -> None:
    """rmapiMapToCpu, then RmIoctl's rm_create_mmap_context on w.fd (nv_add_mapping_context_to_file): the fd must be
    an nvidia file (nvidiactl for system memory, /dev/nvidiaN of the memory's GPU otherwise) -> else
    INVALID_ARGUMENT, and must not hold a mapping context yet -> else STATE_IN_USE (the RM mapping is undone)."""
    p = w.params
    p.status = self._map_memory(f, p, w.fd)

  def _map_memory(self, f, p, fd: int) -> int:
    dev = self._lookup(f, p.hClient, p.hDevice, ("device", "subdevice"))
    if isinstance(dev, int): return dev
    o = self._lookup(f, p.hClient, p.hMemory)
    if isinstance(o, int): return o
    if o.kind not in ("memory", "usermode") or o.gpu is not dev.gpu: return nv.NV_ERR_INVALID_OBJECT_HANDLE
    if o.kind == "memory" and (o.bo.host is None or o.cls == nv.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR):
      return nv.NV_ERR_NOT_SUPPORTED                                         # mock: OS-descriptor memory
    host, size = (o.gpu.usermode, nv.NVC361_NV_USERMODE__SIZE) if o.kind == "usermode" else (o.bo.host, o.bo.size)
    if p.length == 0 or p.offset + p.length > size: return nv.NV_ERR_INVALID_LIMIT
    if p.offset % PAGE_SIZE: return nv.NV_ERR_INVALID_OFFSET      # mock: mmap offsets are whole pages
    sysmem = o.kind == "memory" and not o.vidmem
    tf = self._fds.get(fd)
    if tf is None or tf.kind not in ("ctl", "dev") or (tf.kind == "ctl") != sysmem or \
       (tf.kind == "dev" and tf.gpu is not o.gpu): return nv.NV_ERR_INVALID_ARGUMENT
    if tf.mmap_ctx is not None: return nv.NV_ERR_STATE_IN_USE
    p.flags = (p.flags & ~nv.DRF_NUM(nv.NVOS33_FLAGS_CACHING_TYPE, 7)) | \
              nv.DRF_NUM(nv.NVOS33_FLAGS_CACHING_TYPE, nv.NVOS33_FLAGS_CACHING_TYPE_DEFAULT)
    if o.kind == "usermode": addr = o.gpu.reg_address + nv.NVC361_BAR0_OFFSET + p.offset
    elif o.vidmem: addr = o.gpu.fb_address + o.phys + p.offset
    else: addr = host.addr + p.offset                    # mock: system memory is named by the driver's own mapping
    tf.mmap_ctx = (host, p.offset, p.length, o)
    p.pLinearAddress = addr
    self._cpu_maps[p.hClient, p.hMemory, addr] = (o, fd)
    return nv.NV_OK

  def _rm_unmap_memory(self, f, p) -> None:
    """Nv04UnmapMemory: the (client, memory, linear address) of an earlier RM_MAP_MEMORY -> else INVALID_ARGUMENT.
    The user's mmap stays until munmap, as a VMA does."""
    c = self._client(f, p.hClient)
    if isinstance(c, int): p.status = c; return
    p.status = nv.NV_OK if self._cpu_maps.pop((p.hClient, p.hMemory, p.pLinearAddress), None) else \
      nv.NV_ERR_INVALID_ARGUMENT

  # ================================================================ NV_ESC_RM_MAP_MEMORY_DMA (Nv04MapMemoryDma)
  def _dma_spaces(self, client: RMClient):
    for o in list(client.objects.values()):
      if o.kind in ("vaspace", "virtual"): yield o
      if o.kind == "device" and "vaspace" in o.info: yield o.info["vaspace"]

  def _dma_target(self, f, p) -> RMObject | int:
    dev = self._lookup(f, p.hClient, p.hDevice, ("device", "subdevice"))
    if isinstance(dev, int): return dev
    if p.hDma == 0: return self._device_vaspace(dev.ancestor("device"))
    t = self._lookup(f, p.hClient, p.hDma, ("vaspace", "virtual"))
    if isinstance(t, int): return t
    return t if t.gpu is dev.gpu else nv.NV_ERR_INVALID_OBJECT_HANDLE

  def _rm_map_memory_dma(self, f, p) -> None:
    """dmaMapBuffer: map [offset, offset + length) of hMemory (length 0: all of it) into the VA space hDma (a
    FERMI_VASPACE_A, or an NV01_MEMORY_VIRTUAL reservation) at a VA the RM picks, or at dmaOffset with
    DMA_OFFSET_FIXED. Range outside the memory -> INVALID_LIMIT; a fixed VA unaligned, outside the VA space or over
    an existing mapping -> INVALID_OFFSET (mock: RM reports its VA allocator's failure); no free VA -> NO_MEMORY."""
    t = self._dma_target(f, p)
    if isinstance(t, int): p.status = t; return
    m = self._lookup(f, p.hClient, p.hMemory, ("memory",))
    if isinstance(m, int): p.status = m; return
    length = p.length or m.bo.size - p.offset
    if p.offset % PAGE_SIZE or length <= 0 or p.offset + length > m.bo.size: p.status = nv.NV_ERR_INVALID_LIMIT; return
    length = page_align(length)
    lo, hi = t.va_range
    if nv.DRF_VAL(nv.NVOS46_FLAGS_DMA_OFFSET_FIXED, p.flags):
      va = p.dmaOffset
      if va % PAGE_SIZE or va < lo or va + length > hi: p.status = nv.NV_ERR_INVALID_OFFSET; return
    else:
      va = self._va_alloc(t.vm, length, HUGE_PAGE if length >= HUGE_PAGE else BIG_PAGE, lo, hi)
      if va is None: p.status = nv.NV_ERR_NO_MEMORY; return
    bo = m.bo if p.offset == 0 and length == m.bo.size else m.bo.window(m.handle, m.gpu.index, va, p.offset, length,
                                                                          m.cls)
    if not t.vm.map(va, length, bo): p.status = nv.NV_ERR_INVALID_OFFSET; return
    vas = t.info.get("vaspace", t) if t.kind == "virtual" else t
    vas.dma[va] = (m, length)
    m.refs += 1
    p.dmaOffset, p.status = va, nv.NV_OK

  @staticmethod
  def _va_alloc(vm: GPUAddressSpace, size: int, align: int, lo: int, hi: int) -> int | None:
    """First fit: the lowest `align`-aligned gap of `size` bytes in [lo, hi) between the VA space's mappings."""
    va = _align(lo, align)
    for m in vm.mappings():
      if m.end <= va: continue
      if m.va >= va + size: break
      va = _align(m.end, align)
    return va if va + size <= hi else None

  def _dma_unmap(self, vas: RMObject, va: int) -> bool:
    ent = vas.dma.pop(va, None)
    if ent is None: return False
    vas.vm.unmap(va)
    self._unref(ent[0])
    return True

  def _rm_unmap_memory_dma(self, f, p) -> None:
    """dmaUnmapBuffer: dmaOffset must start a mapping of hMemory in hDma -> else INVALID_ARGUMENT."""
    t = self._dma_target(f, p)
    if isinstance(t, int): p.status = t; return
    vas = t.info.get("vaspace", t) if t.kind == "virtual" else t
    ent = vas.dma.get(p.dmaOffset)
    if ent is None or ent[0].handle != p.hMemory or ent[0].client.handle != p.hClient:
      p.status = nv.NV_ERR_INVALID_ARGUMENT; return
    self._dma_unmap(vas, p.dmaOffset)
    p.status = nv.NV_OK
