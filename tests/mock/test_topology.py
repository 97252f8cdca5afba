"""The mock sysfs topology reads like a real Linux 6.12 KFD tree; the oracle is the example dumps in
../shared/vendor/kfd/kfd_topology_properties.txt (RX 7900 XTX, MI300X, a CPU node)."""
import os, re
import pytest
from gputwin.errors import KernelDriverError
from gputwin.mock.kfd.driver import MockKernel
from gputwin.mock.kfd.topology import TARGETS, TOPOLOGY, Topology, parse_properties

EXAMPLES = "/work/shared/vendor/kfd/kfd_topology_properties.txt"
# Values that belong to one machine rather than to the ASIC: the dumps come from multi-GPU systems (io/p2p links,
# the XGMI hive) and simd_id_base is an enumeration artefact. MI300X's cache count depends on the CRAT of that board.
MACHINE_SPECIFIC = {"simd_id_base", "hive_id", "io_links_count", "p2p_links_count"}


def _example(marker: str) -> list[tuple[str, int]]:
  text = open(EXAMPLES).read()
  block = text.split(marker, 1)[1].split("--- end ---", 1)[0] if "---" in marker else \
    text.split(marker, 1)[1].split("(nodes/0/gpu_id", 1)[0]
  return [(m[0], int(m[1])) for m in re.findall(r"^(\w+) (\d+)$", block, flags=re.M)]


def _walk(k: MockKernel, path: str):
  for name in k.listdir(path):
    p = f"{path}/{name}"
    yield from (_walk(k, p) if k.topology.listdir(p) is not None else [p])


@pytest.fixture(scope="module")
def machine():
  return MockKernel(["gfx1100", "gfx942", "gfx1200", "gfx950"])


def test_every_file_has_the_sysfs_format(machine):
  files = list(_walk(machine, TOPOLOGY))
  assert f"{TOPOLOGY}/generation_id" in files and f"{TOPOLOGY}/nodes/4/caches/0/properties" in files
  for path in files:
    text = machine.read_text(path)
    assert text.endswith("\n"), path
    if path.endswith("/properties") or path.endswith("system_properties"):
      for line in text.splitlines():   # "%s %u\n" / "%s %llu\n", sibling_map "%d,%d,...,%d\n"
        assert re.fullmatch(r"[a-z_0-9]+ \d+", line) or re.fullmatch(r"sibling_map [01](,[01])*", line), (path, line)
    elif path.endswith("gpu_id") or path.endswith("generation_id"):
      assert re.fullmatch(r"\d+\n", text)


@pytest.mark.skipif(not os.path.exists(EXAMPLES), reason="vendor topology examples not present")
@pytest.mark.parametrize("target,marker", [("gfx1100", "--- nodes/1/properties ---"),
                                           ("gfx942", "--- nodes/2/properties ---")])
def test_node_properties_match_the_published_dump(target, marker):
  k = MockKernel(target)
  ours = [tuple(l.split(" ")) for l in k.read_text(f"{TOPOLOGY}/nodes/1/properties").splitlines()]
  ref = _example(marker)
  assert [n for n, _ in ours] == [n for n, _ in ref]                     # same lines, same order as node_show()
  skip = MACHINE_SPECIFIC | ({"caches_count"} if target == "gfx942" else set())
  assert {n: int(v) for n, v in ours if n not in skip} == {n: v for n, v in ref if n not in skip}


@pytest.mark.skipif(not os.path.exists(EXAMPLES), reason="vendor topology examples not present")
def test_cpu_node_has_the_cpu_line_set(machine):
  ref = _example("EXAMPLE 0: a CPU node")
  ours = parse_properties(machine.read_text(f"{TOPOLOGY}/nodes/0/properties"))
  assert list(ours) == [n for n, _ in ref]
  assert ours["simd_count"] == 0 and ours["io_links_count"] == 4
  assert machine.read_text(f"{TOPOLOGY}/nodes/0/gpu_id") == "0\n"


def test_targets_and_counts(machine):
  want = {"gfx1100": 110000, "gfx942": 90402, "gfx1200": 120000, "gfx950": 90500}
  ids = set()
  for n, name in enumerate(["gfx1100", "gfx942", "gfx1200", "gfx950"], start=1):
    base = f"/sys/class/kfd/kfd/topology/nodes/{n}"                        # the class symlink path works too
    p = parse_properties(machine.read_text(f"{base}/properties"))
    assert machine.read_text(f"{base}/name") == f"{name}\n" and p["gfx_target_version"] == want[name]
    assert p["drm_render_minor"] == 127 + n and p["vendor_id"] == 0x1002
    for kind in ("mem_banks", "caches", "io_links", "p2p_links"):
      assert p[f"{kind}_count"] == len(machine.listdir(f"{base}/{kind}")), (name, kind)
    assert p["simd_count"] <= p["array_count"] * p["cu_per_simd_array"] * p["simd_per_cu"]   # some CUs fused off
    assert p["wave_front_size"] == (32 if want[name] >= 100000 else 64)
    assert p["array_count"] % p["num_xcc"] == 0 and p["cwsr_size"] > p["ctl_stack_size"] > 0
    mem = parse_properties(machine.read_text(f"{base}/mem_banks/0/properties"))
    assert mem["heap_type"] == 1 and mem["size_in_bytes"] == TARGETS[name].vram
    link = parse_properties(machine.read_text(f"{base}/io_links/0/properties"))
    assert (link["type"], link["node_from"], link["node_to"]) == (2, n, 0)   # PCIe to the CPU node
    gid = int(machine.read_text(f"{base}/gpu_id"))
    assert 0 < gid < 1 << 16 and gid not in ids
    ids.add(gid)
  assert parse_properties(machine.read_text(f"{TOPOLOGY}/nodes/1/properties"))["caches_count"] == 206


def test_xgmi_hive_between_instinct_gpus():
  k = MockKernel(["gfx942", "gfx942"])
  p1, p2 = (parse_properties(k.read_text(f"{TOPOLOGY}/nodes/{n}/properties")) for n in (1, 2))
  assert p1["hive_id"] == p2["hive_id"] != 0 and p1["p2p_links_count"] == 1
  assert parse_properties(k.read_text(f"{TOPOLOGY}/nodes/1/p2p_links/0/properties"))["type"] == 11   # XGMI
  assert p1["location_id"] != p2["location_id"]


def test_unknown_paths_and_targets():
  k = MockKernel("gfx1100")
  with pytest.raises(FileNotFoundError): k.read_text(f"{TOPOLOGY}/nodes/9/properties")
  with pytest.raises(FileNotFoundError): k.listdir("/sys/bus/pci")
  assert k.exists("/dev/kfd") and k.exists("/dev/dri/renderD128") and not k.exists("/dev/dri/renderD129")
  with pytest.raises(KernelDriverError, match="gfx9999"): Topology(["gfx9999"])
