"""The KFD sysfs topology tree (/sys/devices/virtual/kfd/kfd/topology) of a mock machine: CPU node 0 plus one node per
mock GPU, in the exact text format of Linux 6.12 kfd_topology.c ("name value" lines, property order of node_show()).

Every GPU is one row of TARGETS: the values a real kernel reports for that ASIC. gfx1100 (RX 7900 XTX) and gfx942
(MI300X, SPX) come from the published dumps in ../shared/vendor/kfd/kfd_topology_properties.txt; gfx1200 (RX 9060 XT,
Navi 44) and gfx950 (MI355X) are derived from public specs the same way (CU/SE layout, memory) and are marked
illustrative where no dump backs them. Machine-specific values (location_id, unique_id, simd_id_base, firmware
versions) are examples. cwsr_size/ctl_stack_size follow kfd_queue_ctx_save_restore_size() from the table's inputs.
Each GPU also gets amdgpu's IP discovery tree (/sys/class/drm/renderD<minor>/device/ip_discovery) for GC, SDMA0 and
NBIF: the versions amdgpu_discovery.c dispatches on for that ASIC (Navi31 GC 11.0.0/SDMA 6.0.0/NBIO 4.3.0, Navi44
12.0.0/7.0.0/NBIF 6.3.1, MI300X 9.4.3/4.4.2/7.9.0, MI355X 9.5.0/4.4.5/7.9.1).
"""
from __future__ import annotations
import dataclasses, zlib
from gputwin.errors import KernelDriverError

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"
ALIASES = ("/sys/class/kfd/kfd/topology",)   # /sys/class/kfd/kfd is a symlink to the virtual device
DRM_CLASS = "/sys/class/drm"                  # renderD<minor>/device/ip_discovery: amdgpu's IP discovery table
# Hardware ids of the IP blocks clients look up in ip_discovery/die/0 (soc15_hw_ip.h: GC_HWID 11, SDMA0_HWID 42,
# NBIF_HWID 108; amdgpu names the NBIF block's version "NBIO" before GFX12).
IP_HWIDS = dict(GC=11, SDMA0=42, NBIF=108)

# node_show() order; the GPU_ONLY block is printed only for GPU nodes, max_engine_clk_ccompute always last.
NODE_PROPS = ("cpu_cores_count simd_count mem_banks_count caches_count io_links_count p2p_links_count cpu_core_id_base "
              "simd_id_base max_waves_per_simd lds_size_in_kb gds_size_in_kb num_gws wave_front_size array_count "
              "simd_arrays_per_engine cu_per_simd_array simd_per_cu max_slots_scratch_cu gfx_target_version vendor_id "
              "device_id location_id domain drm_render_minor hive_id num_sdma_engines num_sdma_xgmi_engines "
              "num_sdma_queues_per_engine num_cp_queues cwsr_size ctl_stack_size").split()
GPU_ONLY_PROPS = ("max_engine_clk_fcompute local_mem_size fw_version capability debug_prop sdma_fw_version unique_id "
                  "num_xcc").split()
LAST_PROPS = ["max_engine_clk_ccompute"]
MEM_PROPS = "heap_type size_in_bytes flags width mem_clk_max".split()
CACHE_PROPS = "processor_id_low level size cache_line_size cache_lines_per_tag association latency type".split()
IOLINK_PROPS = ("type version_major version_minor node_from node_to weight min_latency max_latency min_bandwidth "
                "max_bandwidth recommended_transfer_size recommended_sdma_engine_id_mask flags").split()

HSA_MEM_HEAP_TYPE_SYSTEM, HSA_MEM_HEAP_TYPE_FB_PUBLIC = 0, 1
HSA_CACHE_TYPE_DATA, HSA_CACHE_TYPE_INSTRUCTION, HSA_CACHE_TYPE_CPU, HSA_CACHE_TYPE_HSACU = 1, 2, 4, 8
HSA_IOLINK_TYPE_PCIEXPRESS, HSA_IOLINK_TYPE_XGMI = 2, 11
HSA_IOLINK_FLAGS_ENABLED = 1
D, I, CU = HSA_CACHE_TYPE_DATA, HSA_CACHE_TYPE_INSTRUCTION, HSA_CACHE_TYPE_HSACU


@dataclasses.dataclass(frozen=True)
class Target:
  """One ASIC as KFD describes it. `props` are node properties (per-device totals, like sysfs); `caches` rows are
  (level, size_kb, line_bytes, type, CUs sharing one instance); `cwsr` = (VGPR bytes/CU, LDS bytes/CU, waves/XCC for
  the control stack, control-stack bytes/wave) as kfd_queue.c uses them."""
  name: str
  marketing: str
  props: dict
  vram: int             # bytes, mem_banks/0 size_in_bytes
  mem_width: int
  mem_clk_max: int
  caches: tuple
  cwsr: tuple
  xgmi: bool = False    # boards sit in an XGMI hive (p2p links are XGMI, hive_id non-zero)
  ips: tuple = ()       # (IP_HWIDS name, (major, minor, revision)) as amdgpu's IP discovery reports them

  @property
  def cu_count(self) -> int: return self.props["simd_count"] // self.props["simd_per_cu"]
  @property
  def wave64(self) -> bool: return self.props["wave_front_size"] == 64


def cwsr_sizes(t: Target) -> tuple[int, int]:
  """(cwsr_size, ctl_stack_size) per XCC, kfd_queue_ctx_save_restore_size(): a 40-byte header, per-wave control stack,
  8 bytes of tail, page aligned; then per-CU VGPR + SGPR(16K) + LDS + HWREG(4K) work-group state."""
  vgpr, lds, waves, per_wave = t.cwsr
  cus = t.cu_count // t.props["num_xcc"]
  ctl = (40 + waves * per_wave + 8 + 4095) & ~4095
  return ctl + cus * (vgpr + 0x4000 + lds + 0x1000), ctl


_RDNA_CAPS = 0x2807A280   # WATCH_POINTS | totalbits 2 | DOORBELL 2.0 | TRAP_DEBUG(+override, mode, precise mem) | SVM
_CDNA_CAPS = 0x2C37A280   # the RDNA set + MEM_EDC | RASEVENTNOTIFY | SRAM_EDC (ASIC_REVISION added per target)
_GFX_COMMON = dict(cpu_cores_count=0, cpu_core_id_base=0, gds_size_in_kb=0, num_gws=64, max_slots_scratch_cu=32,
                   vendor_id=0x1002, domain=0, local_mem_size=0, max_engine_clk_ccompute=2400)

TARGETS: dict[str, Target] = {t.name: t for t in [
  Target("gfx1100", "AMD Radeon RX 7900 XTX", dict(_GFX_COMMON,
    simd_count=192, max_waves_per_simd=16, lds_size_in_kb=64, wave_front_size=32, array_count=12,
    simd_arrays_per_engine=2, cu_per_simd_array=8, simd_per_cu=2, gfx_target_version=110000, device_id=0x744C,
    location_id=0x8600, num_sdma_engines=2, num_sdma_xgmi_engines=0, num_sdma_queues_per_engine=6, num_cp_queues=8,
    max_engine_clk_fcompute=2482, fw_version=2140, capability=_RDNA_CAPS, debug_prop=1495, sdma_fw_version=20,
    unique_id=11673270660693242239, num_xcc=1),
    vram=25753026560, mem_width=384, mem_clk_max=1249,
    caches=((1, 32, 128, D | CU, 1), (1, 32, 64, I | CU, 2), (1, 16, 64, D | CU, 2), (2, 256, 128, D | CU, 8),
            (2, 6144, 128, D | CU, 96), (3, 98304, 64, D | CU, 96)),
    cwsr=(0x60000, 0x10000, 96 * 32, 12), ips=(("GC", (11, 0, 0)), ("SDMA0", (6, 0, 0)), ("NBIF", (4, 3, 0)))),
  Target("gfx1200", "AMD Radeon RX 9060 XT (illustrative)", dict(_GFX_COMMON,
    simd_count=64, max_waves_per_simd=16, lds_size_in_kb=64, wave_front_size=32, array_count=4,
    simd_arrays_per_engine=2, cu_per_simd_array=8, simd_per_cu=2, gfx_target_version=120000, device_id=0x7590,
    location_id=0x0300, num_sdma_engines=2, num_sdma_xgmi_engines=0, num_sdma_queues_per_engine=6, num_cp_queues=8,
    max_engine_clk_fcompute=3130, fw_version=2560, capability=_RDNA_CAPS | 0x40000000, debug_prop=1495,
    sdma_fw_version=14, unique_id=0x3F2A7C51D0E49B86, num_xcc=1),
    vram=17095983104, mem_width=128, mem_clk_max=2518,
    caches=((1, 32, 128, D | CU, 1), (1, 32, 64, I | CU, 2), (1, 16, 64, D | CU, 2), (2, 4096, 128, D | CU, 32),
            (3, 32768, 64, D | CU, 32)),
    cwsr=(0x60000, 0x10000, 32 * 32, 12), ips=(("GC", (12, 0, 0)), ("SDMA0", (7, 0, 0)), ("NBIF", (6, 3, 1)))),
  Target("gfx942", "AMD Instinct MI300X", dict(_GFX_COMMON,
    simd_count=1216, max_waves_per_simd=8, lds_size_in_kb=64, wave_front_size=64, array_count=32,
    simd_arrays_per_engine=1, cu_per_simd_array=10, simd_per_cu=4, gfx_target_version=90402, device_id=0x74A1,
    location_id=0x4700, num_sdma_engines=2, num_sdma_xgmi_engines=14, num_sdma_queues_per_engine=8, num_cp_queues=24,
    max_engine_clk_fcompute=2100, fw_version=166, capability=_CDNA_CAPS | 1 << 22, debug_prop=1511,
    sdma_fw_version=22, unique_id=4376936076086227261, num_xcc=8),
    vram=206141652992, mem_width=8192, mem_clk_max=1300,
    caches=((1, 32, 128, D | CU, 1), (1, 64, 64, I | CU, 2), (1, 16, 64, D | CU, 2), (2, 4096, 128, D | CU, 38),
            (3, 262144, 64, D | CU, 304)),
    cwsr=(0x80000, 0x10000, min(38 * 40, 4 * 512), 8), xgmi=True,
    ips=(("GC", (9, 4, 3)), ("SDMA0", (4, 4, 2)), ("NBIF", (7, 9, 0)))),
  Target("gfx950", "AMD Instinct MI355X (illustrative)", dict(_GFX_COMMON,
    simd_count=1024, max_waves_per_simd=8, lds_size_in_kb=160, wave_front_size=64, array_count=32,
    simd_arrays_per_engine=1, cu_per_simd_array=8, simd_per_cu=4, gfx_target_version=90500, device_id=0x75A3,
    location_id=0x0500, num_sdma_engines=2, num_sdma_xgmi_engines=14, num_sdma_queues_per_engine=8, num_cp_queues=24,
    max_engine_clk_fcompute=2400, fw_version=177, capability=_CDNA_CAPS, debug_prop=1511, sdma_fw_version=24,
    unique_id=0x5C0E91A2B3D4F601, num_xcc=8),
    vram=309237645312, mem_width=8192, mem_clk_max=2000,
    caches=((1, 32, 128, D | CU, 1), (1, 64, 64, I | CU, 2), (1, 16, 64, D | CU, 2), (2, 4096, 128, D | CU, 32),
            (3, 262144, 64, D | CU, 256)),
    cwsr=(0x80000, 0x28000, min(32 * 40, 4 * 512), 8), xgmi=True,
    ips=(("GC", (9, 5, 0)), ("SDMA0", (4, 4, 5)), ("NBIF", (7, 9, 1)))),
]}

CPU_NODE = dict(cpu_cores_count=16, max_engine_clk_ccompute=2400)
CPU_MEM = dict(heap_type=HSA_MEM_HEAP_TYPE_SYSTEM, size_in_bytes=64 << 30, flags=0, width=64, mem_clk_max=3200)
HIVE_ID = 10631624818852212319   # shared by all XGMI-capable mock GPUs of one machine


@dataclasses.dataclass
class GPUNode:
  """One GPU of a mock machine: topology node index, gpu_id, render minor and its full property dict."""
  node: int
  gpu_id: int
  target: Target = dataclasses.field(repr=False)
  props: dict = dataclasses.field(repr=False)

  def __repr__(self): return f"GPUNode({self.name}, node={self.node}, gpu_id={self.gpu_id:#x})"

  @property
  def render_minor(self) -> int: return self.props["drm_render_minor"]
  @property
  def name(self) -> str: return self.target.name
  @property
  def num_xcc(self) -> int: return self.props["num_xcc"]

  # Queue-buffer sizes KFD checks at CREATE_QUEUE (node_props, not exported to sysfs; kfd_queue.c).
  eop_buffer_size = 4096
  @property
  def debug_memory_size(self) -> int: return (self.target.cwsr[2] * 32 + 63) & ~63   # DEBUGGER_BYTES_PER_WAVE 32
  def cwsr_total(self, ctx_save_restore_size: int) -> int:
    """Bytes the ctx_save_restore BO must span: (size + debug area) per XCC, page aligned."""
    return ((ctx_save_restore_size + self.debug_memory_size) * self.num_xcc + 4095) & ~4095


def _lines(order, values: dict) -> str: return "".join(f"{k} {values[k]}\n" for k in order)


def parse_properties(text: str) -> dict[str, int]:
  """Parse a sysfs properties file the way libhsakmt does: one 'name value' pair per line (sibling_map excepted)."""
  out = {}
  for line in text.splitlines():
    name, _, val = line.partition(" ")
    if name != "sibling_map": out[name] = int(val)
  return out


class Topology:
  """The sysfs files of one mock machine, generated once: `files` maps absolute path -> text, `dirs` path -> entries."""

  def __init__(self, targets: list[str], generation_id: int = 1):
    unknown = [t for t in targets if t not in TARGETS]
    if unknown or not targets:
      raise KernelDriverError(f"mock KFD: unknown target(s) {unknown or targets}; known: {', '.join(TARGETS)}")
    self.gpus: list[GPUNode] = []
    used: set[int] = set()
    for i, name in enumerate(targets):
      t = TARGETS[name]
      p = dict(t.props, location_id=t.props["location_id"] + 0x100 * i, drm_render_minor=128 + i,
               unique_id=(t.props["unique_id"] + i) & (2**64 - 1), simd_id_base=0x80001000 + 0x100 * (i + 1),
               hive_id=HIVE_ID if t.xgmi and sum(TARGETS[n].xgmi for n in targets) > 1 else 0)
      p["cwsr_size"], p["ctl_stack_size"] = cwsr_sizes(t)
      gpu_id = zlib.crc32(f"{name}:{p['location_id']}:{p['unique_id']}".encode()) & 0xFFFF
      while gpu_id == 0 or gpu_id in used: gpu_id = (gpu_id + 1) & 0xFFFF   # kfd_generate_gpu_id keeps ids unique
      used.add(gpu_id)
      self.gpus.append(GPUNode(i + 1, gpu_id, t, p))
    self.files: dict[str, str] = {}
    self.dirs: dict[str, list[str]] = {}
    self._build(generation_id)

  def _add(self, path: str, text: str | None = None):
    """Add a file (text) or an empty directory (text None) and enter it in every ancestor directory."""
    if text is None: self.dirs.setdefault(path, [])
    else: self.files[path] = text
    parts = path.split("/")
    for k in range(len(parts) - 1, 1, -1):   # register every ancestor directory down to /sys
      d, leaf = "/".join(parts[:k]), parts[k]
      entries = self.dirs.setdefault(d, [])
      if leaf in entries: break
      entries.append(leaf)

  def _build(self, generation_id: int):
    self._add(f"{TOPOLOGY}/generation_id", f"{generation_id}\n")
    self._add(f"{TOPOLOGY}/system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
    n_gpu = len(self.gpus)
    cpu = dict.fromkeys(NODE_PROPS, 0) | CPU_NODE | dict(mem_banks_count=1, io_links_count=n_gpu)
    self._node(0, 0, "", cpu, [CPU_MEM], [], [self._link(0, g.node, HSA_IOLINK_TYPE_PCIEXPRESS) for g in self.gpus], [])
    for g in self.gpus:
      caches = self._caches(g)
      peers = [self._link(g.node, o.node, HSA_IOLINK_TYPE_XGMI if g.props["hive_id"] and o.props["hive_id"]
                          else HSA_IOLINK_TYPE_PCIEXPRESS) for o in self.gpus if o is not g]
      g.props.update(mem_banks_count=1, caches_count=len(caches), io_links_count=1, p2p_links_count=len(peers))
      mem = dict(heap_type=HSA_MEM_HEAP_TYPE_FB_PUBLIC, size_in_bytes=g.target.vram, flags=0, width=g.target.mem_width,
                 mem_clk_max=g.target.mem_clk_max)
      self._node(g.node, g.gpu_id, g.name, g.props, [mem], caches, [self._link(g.node, 0, HSA_IOLINK_TYPE_PCIEXPRESS)],
                 peers)
      self._ip_discovery(g)

  def _ip_discovery(self, g: GPUNode):
    """renderD<minor>/device/ip_discovery/die/0/<hw id>/<instance>/{major,minor,revision,hw_id,num_instance} as
    amdgpu_discovery_sysfs_ips() lays them out (one instance per listed IP; the other IPs are not modelled)."""
    for ip, (major, minor, rev) in g.target.ips:
      hwid = IP_HWIDS[ip]
      base = f"{DRM_CLASS}/renderD{g.render_minor}/device/ip_discovery/die/0/{hwid}"
      for name, v in dict(major=major, minor=minor, revision=rev, hw_id=hwid, num_instance=1).items():
        self._add(f"{base}/0/{name}", f"{v}\n")

  def _node(self, n: int, gpu_id: int, name: str, props: dict, mems, caches, links, p2p):
    base = f"{TOPOLOGY}/nodes/{n}"
    self._add(f"{base}/gpu_id", f"{gpu_id}\n")
    self._add(f"{base}/name", f"{name}\n")
    self._add(f"{base}/properties", _lines(NODE_PROPS + (GPU_ONLY_PROPS if gpu_id else []) + LAST_PROPS, props))
    for kind, rows, order in (("mem_banks", mems, MEM_PROPS), ("io_links", links, IOLINK_PROPS),
                              ("p2p_links", p2p, IOLINK_PROPS)):
      self._add(f"{base}/{kind}")
      for i, r in enumerate(rows): self._add(f"{base}/{kind}/{i}/properties", _lines(order, r))
    self._add(f"{base}/caches")
    for i, text in enumerate(caches): self._add(f"{base}/caches/{i}/properties", text)

  @staticmethod
  def _link(a: int, b: int, kind: int) -> dict:
    xgmi = kind == HSA_IOLINK_TYPE_XGMI
    return dict(type=kind, version_major=0, version_minor=0, node_from=a, node_to=b, weight=15 if xgmi else 20,
                min_latency=0, max_latency=0, min_bandwidth=312 if xgmi else 0, max_bandwidth=64000 if xgmi else 0,
                recommended_transfer_size=0, recommended_sdma_engine_id_mask=0, flags=HSA_IOLINK_FLAGS_ENABLED)

  @staticmethod
  def _caches(g: GPUNode) -> list[str]:
    """One properties text per cache instance; sibling_map marks the CUs sharing it (kfd_cache_show prints one
    '0,'/'1,' per CU bit and ends the line in place of the last comma)."""
    cus, out = g.target.cu_count, []
    for level, size_kb, line, kind, share in g.target.caches:
      for inst in range(cus // share):
        bits = ("0," * (inst * share) + "1," * share + "0," * (cus - (inst + 1) * share))[:-1]
        vals = dict(processor_id_low=g.props["simd_id_base"] + inst * share, level=level, size=size_kb,
                    cache_line_size=line, cache_lines_per_tag=1, association=16, latency=1, type=kind)
        out.append(_lines(CACHE_PROPS, vals) + f"sibling_map {bits}\n")
    return out

  # ---- sysfs access (the MockKernel routes reads here)
  @staticmethod
  def normalize(path: str) -> str:
    path = "/" + "/".join(p for p in path.split("/") if p)
    for a in ALIASES:
      if path == a or path.startswith(a + "/"): return TOPOLOGY + path[len(a):]
    return path

  def read(self, path: str) -> str | None: return self.files.get(self.normalize(path))
  def listdir(self, path: str) -> list[str] | None:
    d = self.dirs.get(self.normalize(path))
    return None if d is None else list(d)
