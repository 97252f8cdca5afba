"""gputwin.abi.nv against the vendor headers: every struct's size and field offsets, every constant's value, computed
by a C compiler from ../shared/vendor/nv (nvoracle.py), class ids from g_allclasses.h, NV_STATUS from
nvstatuscodes.h; ioctl numbers from the _IOWR encoding the driver decodes."""
import ctypes, re
import pytest
from gputwin.abi import nv
import nvoracle

pytestmark = pytest.mark.skipif(not nvoracle.available(), reason="no C compiler or no vendor headers")

# names in gputwin.abi.nv that are not header macros (mock facts, other sources) or are only typedef aliases
NOT_MACROS = {"NV_IOCTL_MAGIC_", "NV_VERSION_STRING", "NV_NOTIFICATION_STATUS_ERROR", "NVC361_BAR0_OFFSET",
              "NV_RM_API_VERSION_CMD_RELAXED", "NV_RM_API_VERSION_CMD_QUERY", "IOC_NONE", "IOC_WRITE", "IOC_READ",
              "UvmGpuMappingTypeDefault", "UvmGpuMappingTypeReadWriteAtomic", "UvmGpuMappingTypeReadWrite",
              "UvmGpuMappingTypeReadOnly", "NV0000_CTRL_CMD_GPU_GET_UUID_FROM_GPU_ID_FLAGS_FORMAT_ASCII",
              "NV0000_CTRL_CMD_GPU_GET_UUID_FROM_GPU_ID_FLAGS_FORMAT_BINARY", "NV2080_CTRL_GR_INFO_MAX_SIZE"}
PREFIXES = ("NV", "UVM_", "CC_CHAN", "ROBUST_")


def _structs():
  out = []
  for name, v in vars(nv).items():
    if isinstance(v, type) and issubclass(v, ctypes.Structure) and v.__name__ == name and \
       name != "NVB0B5_ALLOCATION_PARAMETERS":   # clb0b5sw.h is not in the bundle
      out.append((name, tuple(f for f, _ in v._fields_)))
  return tuple(out)


def _consts():
  vals = tuple(n for n, v in vars(nv).items() if n.startswith(PREFIXES) and n.isupper() and isinstance(v, int)
               and not n.startswith(("NV_ERR_", "NV_WARN_", "NV_OK", "ROBUST_")) and n not in NOT_MACROS
               and not n.startswith(("NV01_", "NV1_", "NV20_", "NV50_")) and n not in CLASSES)
  fields = tuple(n for n, v in vars(nv).items() if n.startswith(PREFIXES) and isinstance(v, tuple) and len(v) == 2
                 and all(isinstance(x, int) for x in v))
  return vals, fields


CLASSES = nvoracle.defines(nvoracle.ROOT / "src/nvidia/generated/g_allclasses.h") if nvoracle.ROOT.exists() else {}


@pytest.fixture(scope="module")
def facts():
  vals, fields = _consts()
  return nvoracle.facts(_structs(), vals, fields)


def test_struct_sizes_and_offsets_match_the_headers(facts):
  structs = _structs()
  assert len(structs) >= 80
  for name, fields in structs:
    T = getattr(nv, name)
    assert ctypes.sizeof(T) == facts["sizeof"][name], name
    for f in fields:
      assert getattr(T, f).offset == facts["offsetof"][name, f], (name, f)
  # the headline sizes a runtime's ioctl numbers depend on
  sz = facts["sizeof"]
  assert (sz["NVOS21_PARAMETERS"], sz["NVOS54_PARAMETERS"], sz["NV_CHANNEL_ALLOC_PARAMS"]) == (32, 32, 368)
  assert sz["UVM_MAP_EXTERNAL_ALLOCATION_PARAMS"] == 9264 and sz["nv_ioctl_card_info_t"] == 72


def test_constants_match_the_headers(facts):
  vals, fields = _consts()
  assert len(vals) >= 200 and len(fields) >= 20
  missing = [n for n in vals + fields if facts["value"].get(n, 0) is None]
  assert not missing, f"not defined by the bundled headers: {missing}"
  for n in vals: assert getattr(nv, n) == facts["value"][n], n
  for n in fields: assert getattr(nv, n) == facts["field"][n], n


def test_class_ids_match_g_allclasses():
  ours = {n: v for n, v in vars(nv).items() if isinstance(v, int) and n in CLASSES}
  assert len(ours) >= 40
  assert {n: CLASSES[n] for n in ours} == ours
  assert (nv.HOPPER_COMPUTE_A, nv.HOPPER_CHANNEL_GPFIFO_A, nv.HOPPER_DMA_COPY_A) == (0xCBC0, 0xC86F, 0xC8B5)


def test_status_codes_match_nvstatuscodes():
  text = (nvoracle.ROOT / "src/common/sdk/nvidia/inc/nvstatuscodes.h").read_text()
  rows = {n: int(v, 16) for n, v in re.findall(r"NV_STATUS_CODE\((\w+),\s*(0x[0-9A-Fa-f]+)", text)}
  assert len(rows) == 151 and nv.NV_STATUS == rows
  assert nv.status_name(0x1F) == "NV_ERR_INVALID_ARGUMENT" and nv.status_name(0x12345) == "NV_STATUS(0x12345)"


def test_ioctl_numbers_use_the_drivers_encoding():
  # nvidia_ioctl(): arg_size = _IOC_SIZE(cmd), arg_cmd = _IOC_NR(cmd); the runtime uses _IOWR('F', esc, sizeof)
  req = nv.nv_iowr(nv.NV_ESC_RM_ALLOC, nv.NVOS21_PARAMETERS)
  assert req == (3 << 30) | (32 << 16) | (ord("F") << 8) | 0x2B == 0xC020462B
  assert nv.nv_iowr(nv.NV_ESC_CARD_INFO, nv.nv_ioctl_card_info_t * 32) == 0xC90046C8
  assert (nv.IOC_NR(req), nv.IOC_SIZE(req), nv.IOC_TYPE(req)) == (0x2B, 32, ord("F"))
  assert nv.UVM_MAP_EXTERNAL_ALLOCATION == 33 and nv.UVM_INITIALIZE == 0x30000001
