"""NV_ESC_RM_CONTROL (Nv04Control): the control commands of the mock RM, one row per command: the object kinds that
export it, its parameter struct and the handler. Dispatch follows _rmapiRmControl + serverControl + resControlLookup
(rmapi/control.c, resserv/rs_server.c, rs_resource.c): a NULL command is NV_OK at once; a params pointer and size that
disagree, or a size other than the command's struct -> INVALID_ARGUMENT; then the client, the object
(clientGetResourceRef: OBJECT_NOT_FOUND), a command the object's class does not export (NOT_SUPPORTED), an
unreadable params pointer (INVALID_ADDRESS), and the handler's status. Parameters are copied back whenever the handler
ran (mock: also on error)."""
from __future__ import annotations
import ctypes
from gputwin.abi import nv
from gputwin.mock.nv.rm import read_user, write_user

CONTROLS: dict[int, tuple[tuple[str, ...], type, object]] = {}
DRIVER_BRANCH, CTX_BUFFER_SIZE, PCI_REVISION = "r595_00", 0x380000, 0xA1   # mock: reported build/hw facts


def control(cmd: int, kinds: tuple[str, ...], T: type):
  def deco(fn):
    CONTROLS[cmd] = (kinds, T, fn)
    return fn
  return deco


def _put(arr, data: bytes):
  ctypes.memmove(arr, data, min(len(data), ctypes.sizeof(arr)))


class Controls:
  """Mixin of MockNV: RM controls (needs the RM mixin)."""

  def _rm_control(self, f, p) -> None:
    p.status = self._control(f, p)

  def _control(self, f, p) -> int:
    if p.cmd & 0xFFFF == 0: return nv.NV_OK     # NVXXXX_CTRL_CMD_NULL / a class's NULL command (_CATEGORY, _INDEX 0)
    row = CONTROLS.get(p.cmd)
    if bool(p.params) != bool(p.paramsSize) or (row is not None and p.paramsSize != ctypes.sizeof(row[1])):
      return nv.NV_ERR_INVALID_ARGUMENT                   # _rmapiRmControl: "bad params" (size from the control table)
    o = self._lookup(f, p.hClient, p.hObject)
    if isinstance(o, int): return o
    if row is None or o.kind not in row[0]: return nv.NV_ERR_NOT_SUPPORTED     # resControlLookup: not exported
    _, T, fn = row
    a = read_user(p.params, T)
    if a is None: return nv.NV_ERR_INVALID_ADDRESS
    status = fn(self, o, a)
    if not write_user(p.params, a): return nv.NV_ERR_INVALID_ADDRESS
    return status

  def _gpu_by_id(self, gpu_id: int):
    return next((g for g in self.gpus if g.gpu_id == gpu_id), None)

  # ---------------------------------------------------------------- NV01_ROOT_CLIENT (ctrl0000)
  @control(nv.NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS, ("client",), nv.NV0000_CTRL_GPU_GET_ATTACHED_IDS_PARAMS)
  def _c_attached_ids(self, o, a):
    ids = [g.gpu_id for g in self.gpus]
    a.gpuIds[:] = ids + [nv.NV0000_CTRL_GPU_INVALID_ID] * (len(a.gpuIds) - len(ids))
    return nv.NV_OK

  @control(nv.NV0000_CTRL_CMD_GPU_GET_PROBED_IDS, ("client",), nv.NV0000_CTRL_GPU_GET_PROBED_IDS_PARAMS)
  def _c_probed_ids(self, o, a):
    ids = [g.gpu_id for g in self.gpus]
    a.gpuIds[:] = ids + [nv.NV0000_CTRL_GPU_INVALID_ID] * (len(a.gpuIds) - len(ids))
    a.excludedGpuIds[:] = [nv.NV0000_CTRL_GPU_INVALID_ID] * len(a.excludedGpuIds)
    return nv.NV_OK

  @control(nv.NV0000_CTRL_CMD_GPU_ATTACH_IDS, ("client",), nv.NV0000_CTRL_GPU_ATTACH_IDS_PARAMS)
  def _c_attach_ids(self, o, a):
    """The list ends at INVALID_ID; an id no GPU has -> failedId and INVALID_ARGUMENT (mock: all GPUs are attached,
    as with persistence mode)."""
    for i in a.gpuIds:
      if i == nv.NV0000_CTRL_GPU_INVALID_ID: break
      if i != 0xFFFF and self._gpu_by_id(i) is None:   # 0xFFFF: NV0000_CTRL_GPU_ATTACH_ALL_PROBED_IDS
        a.failedId = i
        return nv.NV_ERR_INVALID_ARGUMENT
    return nv.NV_OK

  @control(nv.NV0000_CTRL_CMD_GPU_DETACH_IDS, ("client",), nv.NV0000_CTRL_GPU_DETACH_IDS_PARAMS)
  def _c_detach_ids(self, o, a): return nv.NV_OK

  def _id_info(self, a) -> int:
    g = self._gpu_by_id(a.gpuId)
    if g is None: return nv.NV_ERR_INVALID_ARGUMENT
    a.gpuFlags, a.deviceInstance, a.subDeviceInstance, a.sliStatus = 0, g.index, 0, 0
    a.boardId, a.gpuInstance, a.numaId = g.gpu_id, g.index, -1
    return nv.NV_OK

  @control(nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO, ("client",), nv.NV0000_CTRL_GPU_GET_ID_INFO_PARAMS)
  def _c_id_info(self, o, a):
    st = self._id_info(a)
    if st == nv.NV_OK and a.szName:
      name = ctypes.create_string_buffer(self._gpu_by_id(a.gpuId).name.encode(), nv.NV2080_GPU_MAX_NAME_STRING_LENGTH)
      if not write_user(a.szName, name): return nv.NV_ERR_INVALID_ADDRESS
    return st

  @control(nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, ("client",), nv.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS)
  def _c_id_info_v2(self, o, a): return self._id_info(a)

  @control(nv.NV0000_CTRL_CMD_GPU_GET_UUID_FROM_GPU_ID, ("client",), nv.NV0000_CTRL_GPU_GET_UUID_FROM_GPU_ID_PARAMS)
  def _c_uuid_from_id(self, o, a):
    g = self._gpu_by_id(a.gpuId)
    if g is None: return nv.NV_ERR_OBJECT_NOT_FOUND
    data = g.uuid if a.flags & 3 == nv.NV0000_CTRL_CMD_GPU_GET_UUID_FROM_GPU_ID_FLAGS_FORMAT_BINARY \
      else g.uuid_str.encode() + b"\0"
    _put(a.gpuUuid, data)
    a.uuidStrLen = len(data)
    return nv.NV_OK

  @control(nv.NV0000_CTRL_CMD_GPU_GET_UUID_INFO, ("client",), nv.NV0000_CTRL_GPU_GET_UUID_INFO_PARAMS)
  def _c_uuid_info(self, o, a):
    raw = bytes(a.gpuUuid)
    g = next((g for g in self.gpus if raw[:16] == g.uuid or raw.split(b"\0")[0] == g.uuid_str.encode()), None)
    if g is None: return nv.NV_ERR_OBJECT_NOT_FOUND
    a.gpuId, a.deviceInstance, a.subdeviceInstance = g.gpu_id, g.index, 0
    return nv.NV_OK

  def _version_strings(self) -> tuple[bytes, bytes, bytes]:
    v = nv.NV_VERSION_STRING.encode()
    return v, v, b"NVIDIA UNIX Open Kernel Module  " + v + b"  (gputwin mock)"

  @control(nv.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION, ("client",), nv.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS)
  def _c_build_version(self, o, a):
    """Any NULL buffer: only sizeOfStrings (the longest string + NUL) comes back; a smaller size -> BUFFER_TOO_SMALL."""
    strs = self._version_strings()
    need = max(len(s) for s in strs) + 1
    if not (a.pDriverVersionBuffer and a.pVersionBuffer and a.pTitleBuffer):
      a.sizeOfStrings = need
      return nv.NV_OK
    if a.sizeOfStrings < need: return nv.NV_ERR_BUFFER_TOO_SMALL
    for ptr, s in zip((a.pDriverVersionBuffer, a.pVersionBuffer, a.pTitleBuffer), strs):
      if not write_user(ptr, ctypes.create_string_buffer(s, len(s) + 1)): return nv.NV_ERR_INVALID_ADDRESS
    a.changelistNumber = a.officialChangelistNumber = 0
    return nv.NV_OK

  @control(nv.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, ("client",),
           nv.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS)
  def _c_build_version_v2(self, o, a):
    drv, ver, title = self._version_strings()
    a.driverVersionBuffer, a.versionBuffer, a.driverBranch, a.titleBuffer = drv, ver, DRIVER_BRANCH.encode(), title
    a.changelistNumber = a.officialChangelistNumber = 0
    return nv.NV_OK

  # ---------------------------------------------------------------- NV01_DEVICE_0 (ctrl0080)
  @control(nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, ("device",), nv.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS)
  def _c_classlist(self, o, a):
    """NULL classList: numClasses = the count; else numClasses must hold them all -> else INVALID_PARAM_STRUCT."""
    cls = o.gpu.spec.classes
    if a.classList:
      if a.numClasses < len(cls): return nv.NV_ERR_INVALID_PARAM_STRUCT
      if not write_user(a.classList, (ctypes.c_uint32 * len(cls))(*cls)): return nv.NV_ERR_INVALID_ADDRESS
    a.numClasses = len(cls)
    return nv.NV_OK

  @control(nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ("device",), nv.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS)
  def _c_classlist_v2(self, o, a):
    cls = o.gpu.spec.classes
    a.numClasses = len(cls)
    a.classList[:len(cls)] = cls
    return nv.NV_OK

  @control(nv.NV0080_CTRL_CMD_GPU_GET_NUM_SUBDEVICES, ("device",), nv.NV0080_CTRL_GPU_GET_NUM_SUBDEVICES_PARAMS)
  def _c_num_subdevices(self, o, a):
    a.numSubDevices = 1
    return nv.NV_OK

  # ---------------------------------------------------------------- NV20_SUBDEVICE_0 (ctrl2080)
  @control(nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO, ("subdevice",), nv.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS)
  def _c_gid_info(self, o, a):
    """FORMAT_BINARY: the 16 raw bytes; ASCII: "GPU-xxxxxxxx-..." with its NUL. Only SHA-1 GIDs of index 0."""
    if a.index != 0: return nv.NV_ERR_INVALID_ARGUMENT
    fmt = nv.DRF_VAL(nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT, a.flags)
    data = o.gpu.uuid if fmt == nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY else o.gpu.uuid_str.encode() + b"\0"
    a.data[:] = [0] * len(a.data)
    _put(a.data, data)
    a.length = len(data)
    return nv.NV_OK

  @control(nv.NV2080_CTRL_CMD_GPU_GET_NAME_STRING, ("subdevice",), nv.NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS)
  def _c_name_string(self, o, a):
    if a.gpuNameStringFlags != nv.NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII: return nv.NV_ERR_INVALID_ARGUMENT
    _put(a.gpuNameString, o.gpu.name.encode() + b"\0")
    return nv.NV_OK

  @control(nv.NV2080_CTRL_CMD_GPU_GET_ENGINES_V2, ("subdevice",), nv.NV2080_CTRL_GPU_GET_ENGINES_V2_PARAMS)
  def _c_engines(self, o, a):
    engines = [nv.NV2080_ENGINE_TYPE_GRAPHICS] + [nv.NV2080_ENGINE_TYPE_COPY(i) for i in range(o.gpu.spec.copy_engines)]
    a.engineCount = len(engines)
    a.engineList[:len(engines)] = engines
    return nv.NV_OK

  def _gr_info(self, g) -> dict[int, int]:
    s = g.spec
    return {nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: s.sm_version, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: s.gpcs,
            nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: s.tpc_per_gpc,
            nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: s.sm_per_tpc,
            nv.NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT: s.gpcs * s.tpc_per_gpc,
            nv.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: s.max_warps_per_sm,
            nv.NV2080_CTRL_GR_INFO_INDEX_MAX_THREADS_PER_WARP: 32, nv.NV2080_CTRL_GR_INFO_INDEX_MAX_SP_PER_SM: 128,
            nv.NV2080_CTRL_GR_INFO_INDEX_GPU_CORE_COUNT: s.num_sms * 128,
            nv.NV2080_CTRL_GR_INFO_INDEX_TENSOR_CORE_COUNT: s.num_sms * 4,
            nv.NV2080_CTRL_GR_INFO_INDEX_MAX_SUBCONTEXT_COUNT: 64, nv.NV2080_CTRL_GR_INFO_INDEX_SM_REG_BANK_COUNT: 4,
            nv.NV2080_CTRL_GR_INFO_INDEX_SM_REG_BANK_REG_COUNT: 16384}

  @control(nv.NV2080_CTRL_CMD_GR_GET_INFO, ("subdevice",), nv.NV2080_CTRL_GR_GET_INFO_PARAMS)
  def _c_gr_info(self, o, a):
    """grInfoList: grInfoListSize {index, data} pairs; a size of 0 or over NV2080_CTRL_GR_INFO_MAX_SIZE, or an index
    past the table -> INVALID_ARGUMENT. Indices the mock does not model read 0."""
    n = a.grInfoListSize
    if n == 0 or n > nv.NV2080_CTRL_GR_INFO_MAX_SIZE or not a.grInfoList: return nv.NV_ERR_INVALID_ARGUMENT
    T = nv.NVXXXX_CTRL_XXX_INFO * n
    lst = read_user(a.grInfoList, T)
    if lst is None: return nv.NV_ERR_INVALID_ADDRESS
    info = self._gr_info(o.gpu)
    for e in lst:
      if e.index >= nv.NV2080_CTRL_GR_INFO_MAX_SIZE: return nv.NV_ERR_INVALID_ARGUMENT
      e.data = info.get(e.index, 0)
    return nv.NV_OK if write_user(a.grInfoList, lst) else nv.NV_ERR_INVALID_ADDRESS

  @control(nv.NV2080_CTRL_CMD_GR_GET_CTX_BUFFER_SIZE, ("subdevice",), nv.NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS)
  def _c_ctx_buffer_size(self, o, a):
    ch = o.client.objects.get(a.hChannel)
    if ch is None or ch.kind != "channel" or ch.gpu is not o.gpu: return nv.NV_ERR_INVALID_OBJECT_HANDLE
    a.totalBufferSize = CTX_BUFFER_SIZE
    return nv.NV_OK

  @control(nv.NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE, ("subdevice",), nv.NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS)
  def _c_fb_flush(self, o, a):
    """mock: GPU and CPU see the same pages, so a flush has nothing to write back."""
    if a.addressArraySize > nv.NV2080_CTRL_FB_FLUSH_GPU_CACHE_MAX_ADDRESSES: return nv.NV_ERR_INVALID_ARGUMENT
    return nv.NV_OK

  @control(nv.NV2080_CTRL_CMD_MC_GET_ARCH_INFO, ("subdevice",), nv.NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS)
  def _c_arch_info(self, o, a):
    a.architecture, a.implementation, a.revision, a.subRevision = \
      o.gpu.spec.architecture, o.gpu.spec.implementation, PCI_REVISION, 0
    return nv.NV_OK

  @control(nv.NV2080_CTRL_CMD_BUS_GET_PCI_INFO, ("subdevice",), nv.NV2080_CTRL_BUS_GET_PCI_INFO_PARAMS)
  def _c_pci_info(self, o, a):
    dev = o.gpu.spec.pci_device_id
    a.pciDeviceId, a.pciSubSystemId = dev << 16 | 0x10DE, 0x1_0000 << 4 | 0x10DE
    a.pciRevisionId, a.pciExtDeviceId = PCI_REVISION, dev
    return nv.NV_OK

  @control(nv.NV2080_CTRL_CMD_PERF_BOOST, ("subdevice",), nv.NV2080_CTRL_PERF_BOOST_PARAMS)
  def _c_perf_boost(self, o, a):
    """CMD must be CLEAR/BOOST_1LEVEL/BOOST_TO_MAX; a duration over DURATION_MAX that is not INFINITE -> INVALID."""
    forever = a.duration == nv.NV2080_CTRL_PERF_BOOST_DURATION_INFINITE
    if nv.DRF_VAL(nv.NV2080_CTRL_PERF_BOOST_FLAGS_CMD, a.flags) > nv.NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX or \
       (a.duration > nv.NV2080_CTRL_PERF_BOOST_DURATION_MAX and not forever):
      return nv.NV_ERR_INVALID_ARGUMENT
    o.info["boost"] = (a.flags, a.duration)
    return nv.NV_OK

  # ---------------------------------------------------------------- KEPLER_CHANNEL_GROUP_A (ctrla06c)
  def _tsg_channels(self, tsg):
    return [c.channel for c in tsg.children.values() if c.kind == "channel"]

  @control(nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, ("tsg",), nv.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS)
  def _c_tsg_schedule(self, o, a):
    """Enable (or disable) the TSG's channels on the runlist; the GPU is told there may be work."""
    o.info["scheduled"] = bool(a.bEnable)
    for ch in self._tsg_channels(o): ch.scheduled = bool(a.bEnable)
    self.kick()
    return nv.NV_OK

  @control(nv.NVA06C_CTRL_CMD_SET_TIMESLICE, ("tsg",), nv.NVA06C_CTRL_TIMESLICE_PARAMS)
  def _c_set_timeslice(self, o, a):
    """mock: the runlist's minimum timeslice is 1000 us (smaller -> INVALID_ARGUMENT)."""
    if a.timesliceUs < 1000: return nv.NV_ERR_INVALID_ARGUMENT
    o.info["timeslice"] = a.timesliceUs
    return nv.NV_OK

  @control(nv.NVA06C_CTRL_CMD_GET_TIMESLICE, ("tsg",), nv.NVA06C_CTRL_TIMESLICE_PARAMS)
  def _c_get_timeslice(self, o, a):
    a.timesliceUs = o.info["timeslice"]
    return nv.NV_OK

  # ---------------------------------------------------------------- GPFIFO channels (ctrla06f, ctrlc36f, ctrl906f)
  @control(nv.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE, ("channel",), nv.NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS)
  def _c_channel_schedule(self, o, a):
    o.channel.scheduled = bool(a.bEnable)
    self.kick()
    return nv.NV_OK

  @control(nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, ("channel",),
           nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS)
  def _c_work_submit_token(self, o, a):
    """The value userspace writes to the usermode NOTIFY_CHANNEL_PENDING doorbell (mock: the channel id)."""
    a.workSubmitToken = o.channel.token
    return nv.NV_OK

  @control(nv.NV906F_CTRL_CMD_RESET_CHANNEL, ("channel",), nv.NV906F_CTRL_CMD_RESET_CHANNEL_PARAMS)
  def _c_reset_channel(self, o, a):
    """mock: a reset clears the RC error; the channel resumes at its current GPGet."""
    o.channel.error = None
    self.kick()
    return nv.NV_OK

  # ---------------------------------------------------------------- GT200_DEBUGGER (ctrl83de)
  def _dbg_channel(self, o, h: int):
    tgt = o.info["target"]
    if h == 0 or h == tgt.handle: return tgt.channel
    c = tgt.client.objects.get(h)
    return c.channel if c is not None and c.kind == "channel" else None

  @control(nv.NV83DE_CTRL_CMD_DEBUG_SET_EXCEPTION_MASK, ("debugger",), nv.NV83DE_CTRL_DEBUG_SET_EXCEPTION_MASK_PARAMS)
  def _c_exception_mask(self, o, a):
    o.info["exception_mask"] = a.exceptionMask
    return nv.NV_OK

  @control(nv.NV83DE_CTRL_CMD_DEBUG_READ_SINGLE_SM_ERROR_STATE, ("debugger",),
           nv.NV83DE_CTRL_DEBUG_READ_SINGLE_SM_ERROR_STATE_PARAMS)
  def _c_read_sm_error(self, o, a):
    ch = self._dbg_channel(o, a.hTargetChannel)
    if ch is None or a.smID >= o.gpu.spec.num_sms: return nv.NV_ERR_INVALID_ARGUMENT
    a.smErrorState = ch.sm_errors.get(a.smID, nv.NV83DE_SM_ERROR_STATE_REGISTERS())
    return nv.NV_OK

  @control(nv.NV83DE_CTRL_CMD_DEBUG_CLEAR_SINGLE_SM_ERROR_STATE, ("debugger",),
           nv.NV83DE_CTRL_DEBUG_CLEAR_SINGLE_SM_ERROR_STATE_PARAMS)
  def _c_clear_sm_error(self, o, a):
    ch = self._dbg_channel(o, a.hTargetChannel)
    if ch is None or a.smID >= o.gpu.spec.num_sms: return nv.NV_ERR_INVALID_ARGUMENT
    ch.sm_errors.pop(a.smID, None)
    return nv.NV_OK

  @control(nv.NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES, ("debugger",),
           nv.NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS)
  def _c_read_all_sm_errors(self, o, a):
    ch = self._dbg_channel(o, a.hTargetChannel)
    if ch is None or a.numSMsToRead > nv.NV83DE_CTRL_DEBUG_MAX_SMS_PER_CALL or \
       a.startingSM + a.numSMsToRead > o.gpu.spec.num_sms: return nv.NV_ERR_INVALID_ARGUMENT
    for i in range(a.numSMsToRead):
      a.smErrorStateArray[i] = ch.sm_errors.get(a.startingSM + i, nv.NV83DE_SM_ERROR_STATE_REGISTERS())
    first = ch.mmu_faults[0] if ch.mmu_faults else None
    a.mmuFault.valid = first is not None
    a.mmuFault.faultInfo = a.mmuFaultInfo = (first.faultType | first.accessType << 8) if first else 0  # mock encoding
    return nv.NV_OK

  @control(nv.NV83DE_CTRL_CMD_DEBUG_CLEAR_ALL_SM_ERROR_STATES, ("debugger",),
           nv.NV83DE_CTRL_DEBUG_CLEAR_ALL_SM_ERROR_STATES_PARAMS)
  def _c_clear_all_sm_errors(self, o, a):
    ch = self._dbg_channel(o, a.hTargetChannel)
    if ch is None: return nv.NV_ERR_INVALID_ARGUMENT
    ch.sm_errors.clear()
    return nv.NV_OK

  @control(nv.NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO, ("debugger",), nv.NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_PARAMS)
  def _c_read_mmu_faults(self, o, a):
    """The MMU faults of the debugged channel, oldest first (at most MAX_ENTRIES); reading consumes them."""
    ch = o.info["target"].channel
    got, ch.mmu_faults = ch.mmu_faults[:nv.NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_MAX_ENTRIES], \
      ch.mmu_faults[nv.NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_MAX_ENTRIES:]
    for i, e in enumerate(got): a.mmuFaultInfoList[i] = e
    a.count = len(got)
    return nv.NV_OK
