"""What the mock NVIDIA driver knows about its GPUs and keeps per RM object: the per-architecture facts (`ArchSpec`
rows: PCI id, MC arch/implementation, SM version, GR litter values, supported classes), a GPU of the machine (`NVGpu`),
a GPFIFO channel as the virtual GPU sees it (`NVChannel`), and the RM object tree node (`RMObject`, `RMClient`)."""
from __future__ import annotations
import dataclasses, hashlib
from gputwin.abi import nv
from gputwin.abi.hostmem import HostBuffer
from gputwin.mock.vm import BufferObject, GPUAddressSpace

GiB = 1 << 30
# classes every GPU of the mock has (the device-independent RM classes a runtime allocates)
COMMON_CLASSES = (nv.NV01_ROOT_CLIENT, nv.NV01_DEVICE_0, nv.NV20_SUBDEVICE_0, nv.NV01_MEMORY_SYSTEM,
                  nv.NV01_MEMORY_LOCAL_USER, nv.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, nv.NV01_MEMORY_VIRTUAL,
                  nv.FERMI_VASPACE_A, nv.KEPLER_CHANNEL_GROUP_A, nv.FERMI_CONTEXT_SHARE_A,
                  nv.GT200_DEBUGGER, nv.NV01_EVENT_OS_EVENT)


@dataclasses.dataclass(frozen=True)
class ArchSpec:
  """One GPU model. Litter values are the chip's (full-die) counts, as GR_GET_INFO's LITTER_* indices report them."""
  arch: str
  name: str
  pci_device_id: int
  architecture: int            # NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_*
  implementation: int
  sm_version: int              # NV2080_CTRL_GR_INFO_SM_VERSION_* (major << 8 | minor)
  gpcs: int
  tpc_per_gpc: int
  sm_per_tpc: int
  fb_size: int
  usermode: tuple[int, ...]
  channels: tuple[int, ...]
  compute: tuple[int, ...]
  copy: tuple[int, ...]
  copy_engines: int = 4
  max_warps_per_sm: int = 64
  va_bits: int = 49            # FERMI_VASPACE_A: 49-bit GPU VA (GMMU format of GA100/GH100 user VA spaces)

  @property
  def num_sms(self) -> int: return self.gpcs * self.tpc_per_gpc * self.sm_per_tpc
  @property
  def classes(self) -> tuple[int, ...]: return COMMON_CLASSES + self.usermode + self.channels + self.compute + self.copy


# mock: the GA10x compute/copy classes (AMPERE_COMPUTE_B, AMPERE_DMA_COPY_B) and ADA_COMPUTE_A are listed beside each
# GPU's own class so runtimes that probe for them (e.g. tinygrad picks the first known compute class) work; the
# virtual GPU runs their methods with the same engine.
ARCHS = {
  "sm_90": ArchSpec("sm_90", "NVIDIA H100 80GB HBM3", 0x2330, nv.NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GH100,
                    nv.NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GH100, nv.NV2080_CTRL_GR_INFO_SM_VERSION_9_0, 8, 9, 2,
                    80 * GiB,
                    (nv.VOLTA_USERMODE_A, nv.TURING_USERMODE_A, nv.AMPERE_USERMODE_A, nv.HOPPER_USERMODE_A),
                    (nv.VOLTA_CHANNEL_GPFIFO_A, nv.TURING_CHANNEL_GPFIFO_A, nv.AMPERE_CHANNEL_GPFIFO_A,
                     nv.HOPPER_CHANNEL_GPFIFO_A),
                    (nv.AMPERE_COMPUTE_B, nv.ADA_COMPUTE_A, nv.HOPPER_COMPUTE_A),
                    (nv.AMPERE_DMA_COPY_B, nv.HOPPER_DMA_COPY_A)),
  "sm_80": ArchSpec("sm_80", "NVIDIA A100-SXM4-80GB", 0x20B2, nv.NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GA100,
                    nv.NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GA100, nv.NV2080_CTRL_GR_INFO_SM_VERSION(8, 0), 8, 8, 2,
                    80 * GiB,
                    (nv.VOLTA_USERMODE_A, nv.TURING_USERMODE_A, nv.AMPERE_USERMODE_A),
                    (nv.VOLTA_CHANNEL_GPFIFO_A, nv.TURING_CHANNEL_GPFIFO_A, nv.AMPERE_CHANNEL_GPFIFO_A),
                    (nv.AMPERE_COMPUTE_A, nv.AMPERE_COMPUTE_B), (nv.AMPERE_DMA_COPY_A, nv.AMPERE_DMA_COPY_B)),
}
BAR0_SIZE, BAR1_BASE = 16 << 20, 0xD000_0000_00   # mock BAR addresses reported by CARD_INFO


@dataclasses.dataclass(eq=False)
class NVGpu:
  """One GPU of the machine: /dev/nvidia<index>."""
  index: int
  spec: ArchSpec
  usermode: HostBuffer | None = None      # the usermode (doorbell) page, created by the first usermode object
  fb_used: int = 0

  @property
  def arch(self) -> str: return self.spec.arch
  @property
  def name(self) -> str: return self.spec.name
  @property
  def minor(self) -> int: return self.index
  @property
  def pci_bus(self) -> int: return 0x18 + 0x10 * self.index
  @property
  def gpu_id(self) -> int: return self.pci_bus << 8          # RM gpuId: PCI domain/bus/device packed (domain 0)
  @property
  def reg_address(self) -> int: return 0xA000_0000 + self.index * BAR0_SIZE
  @property
  def fb_address(self) -> int: return BAR1_BASE + self.index * (1 << 40)
  @property
  def uuid(self) -> bytes:
    """16 stable bytes per (machine slot, arch): the GPU's GID (SHA-1 type, as RM reports it)."""
    return hashlib.sha1(f"gputwin-{self.spec.arch}-{self.index}".encode()).digest()[:16]
  @property
  def uuid_str(self) -> str:
    h = self.uuid.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclasses.dataclass(eq=False)
class NVChannel:
  """A live GPFIFO channel: everything the virtual GPU's host interface needs (the driver -> GPU contract)."""
  gpu: NVGpu
  handle: int
  class_id: int
  token: int
  vm: GPUAddressSpace
  gpfifo_va: int
  gpfifo_entries: int
  userd: memoryview
  engines: dict = dataclasses.field(default_factory=dict)    # class id -> object handle (compute/copy objects)
  error: str | None = None
  state: dict = dataclasses.field(default_factory=dict)      # owned by the GPU model
  id: int = 0
  client: int = 0
  notifier: memoryview | None = None                         # NvNotification[] of hObjectError (RC error notifier)
  scheduled: bool = False                                    # GPFIFO_SCHEDULE enabled its TSG (or the channel)
  freed: bool = False
  sm_errors: dict = dataclasses.field(default_factory=dict)  # smID -> NV83DE_SM_ERROR_STATE_REGISTERS
  mmu_faults: list = dataclasses.field(default_factory=list)  # NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_ENTRY

  def __repr__(self):
    return (f"NVChannel({self.gpu.arch}:{self.gpu.index}, ch{self.id}, class={self.class_id:#x}, "
            f"gpfifo={self.gpfifo_va:#x}x{self.gpfifo_entries}, token={self.token:#x}"
            + (f", error={self.error!r}" if self.error else "") + ")")


@dataclasses.dataclass(eq=False)
class RMObject:
  """A node of a client's RM object tree. `kind` names the resource type the class belongs to; the kind-specific
  state lives in the typed optional fields."""
  client: RMClient
  handle: int
  cls: int
  kind: str
  parent: RMObject | None
  gpu: NVGpu | None = None
  children: dict = dataclasses.field(default_factory=dict)   # handle -> RMObject, in allocation order
  bo: BufferObject | None = None          # memory: its pages
  vidmem: bool = False
  phys: int = 0                           # memory: mock physical (FB) offset
  page_size: int = 4096
  refs: int = 0                           # memory: users that keep the pages alive (channels, GPU mappings)
  freed: bool = False
  vm: GPUAddressSpace | None = None       # vaspace: the GPU VA space; virtual memory: its VA space
  va_range: tuple[int, int] = (0, 0)      # vaspace: [base, limit); virtual memory: reserved [base, end)
  dma: dict = dataclasses.field(default_factory=dict)        # vaspace/virtual: dmaOffset -> (memory, size)
  channel: NVChannel | None = None
  info: dict = dataclasses.field(default_factory=dict)       # misc per-kind settings (TSG schedule/timeslice ...)

  def ancestor(self, kind: str) -> RMObject | None:
    o = self
    while o is not None and o.kind != kind: o = o.parent
    return o

  def __repr__(self): return f"RMObject({self.kind}, {self.handle:#x}, class={self.cls:#x})"


@dataclasses.dataclass(eq=False)
class RMClient:
  """An RM client (NV01_ROOT_CLIENT): its handle space. `owner` is the nvidiactl file that allocated it; only calls
  through that file (or a device file registered to it) may use the client."""
  handle: int
  owner: object
  objects: dict = dataclasses.field(default_factory=dict)    # handle -> RMObject (the client itself included)
  next_handle: int = 0xCAF00000                              # RM-generated resource handles
