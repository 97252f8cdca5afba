"""tinygrad's own tests as the acceptance suite of `gputwin exec`: an unmodified tinygrad 0.14.0 (DEV=AMD, its raw
KFD backend) runs `test/test_tiny.py` and `test/device/test_hcq.py` from ../shared/external/tinygrad-tests on the mock
machine. The oracle is tinygrad's: every test passes, or tinygrad skips it for a reason that also holds on a real
single/dual-GPU KFD machine (the allowlist below); a skip the mock would cause (no copy queue, no AMD) fails here."""
import json, os, shutil, subprocess, sys, xml.etree.ElementTree as ET
from pathlib import Path
import numpy as np
import pytest
from gputwin.mock import exec as gexec

SUITE = Path(__file__).resolve().parents[3] / "shared" / "external" / "tinygrad-tests"
HCQ = "test/device/test_hcq.py"
# Deselected: assertions on real hardware's wall-clock speed. The emulator runs a kernel in ms, not the < 100 us
# test_speed_exec_time asks of a GPU, and SDMA copies of 200 MB run at host memcpy speed with first-touch page faults
# (~1 GB/s), below the 10 GB/s / 2 GB/s the bandwidth tests ask of a GPU's copy engine.
SPEED = [f"{HCQ}::TestHCQ::{t}" for t in ("test_speed_exec_time", "test_speed_copy_bandwidth",
                                          "test_speed_cross_device_copy_bandwidth")]
# tinygrad's skips that hold on real AMD hardware too
SKIPS = {"slow test, set RUN_SLOW=1 to run",                 # RUN_SLOW unset
         "no NV device, test skipped",                       # AMD+NV tests
         "no AMD device, test skipped",                      # test_multidevice_p2p: the device is KFD, not a PCI iface
         "Emulate this on MOCKGPU to check the path in CI",  # tinygrad's own mock only
         "image only supported on CL",                       # test_tiny image tests
         "no multidevice, test skipped"}                     # single GPU (or < 8 GPUs for the :7 RDMA test)


def _env(**kw) -> dict:
  e = {k: v for k, v in os.environ.items() if k not in ("GPUTWIN_EXEC", "DEV", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
  return dict(e, PYTHONDONTWRITEBYTECODE="1", **kw)


def _exec(args: list[str], cwd, timeout: int) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "gputwin.cli", "exec", *args], cwd=cwd, capture_output=True, text=True,
                        timeout=timeout, env=_env(DEV="AMD"))


@pytest.fixture(scope="module")
def tinygrad():
  pytest.importorskip("tinygrad", reason="tinygrad 0.14.0 (a test dependency) not installed")
  if gexec.find_llvm(22) is None:
    pytest.skip("llvm-22's libLLVM not found (tinygrad compiles AMD kernels with it; CI installs llvm-22)")


@pytest.fixture(scope="module")
def suite(tinygrad, tmp_path_factory):
  if not SUITE.is_dir():
    pytest.skip(f"{SUITE} absent (tinygrad's tests live in ../shared/external)")
  d = tmp_path_factory.mktemp("tinygrad") / "tests"
  shutil.copytree(SUITE, d)  # a copy: the run writes nothing under ../shared
  return d


@pytest.mark.parametrize("device,devices,path", [(t, 1, p) for t in ("gfx1100", "gfx1200", "gfx942", "gfx950")
                                                 for p in ("test/test_tiny.py", HCQ)] + [("gfx1100", 2, HCQ)])
def test_tinygrad_suite(suite, device, devices, path):
  xml = suite / f"{device}-{devices}-{Path(path).stem}.xml"
  r = _exec(["--device", f"mock:{device}", "--devices", str(devices), "--", sys.executable, "-m", "pytest", "-q",
             "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=", f"--junitxml={xml}", path,
             *[a for t in SPEED for a in ("--deselect", t)]], suite, timeout=600)
  assert xml.exists(), r.stdout[-3000:] + r.stderr[-3000:]
  cases = list(ET.parse(xml).getroot().iter("testcase"))
  bad = [f"{c.get('name')}: {(c.find('failure') if c.find('failure') is not None else c.find('error')).get('message')}"
         for c in cases if c.find("failure") is not None or c.find("error") is not None]
  assert not bad and r.returncode == 0, "\n".join(bad) + r.stdout[-3000:]
  skips = {c.get("name"): c.find("skipped").get("message", "") for c in cases if c.find("skipped") is not None}
  odd = {n: m for n, m in skips.items() if not any(s in m for s in SKIPS)}
  assert not odd, f"skips the mock causes: {odd}"
  assert len(cases) - len(skips) >= (15 if "tiny" in path else 20)  # the suite really ran on the mock


@pytest.mark.parametrize("device", ["gfx1100", "gfx1200"])
def test_half_sin(tinygrad, tmp_path, device):
  """issue 19's known bug: LLVM-22's f16 sin reduces its argument with V_FMA_MIX (tests/emu/test_tinygrad_repro.py)."""
  prog = ("import numpy as np; from tinygrad import Tensor, dtypes; x = np.linspace(-20, 20, 81).astype(np.float16); "
          "print(float(Tensor([1.0], dtype=dtypes.half).sin().numpy()[0]), "
          "float(np.abs(Tensor(x).sin().numpy().astype(np.float32) - np.sin(x.astype(np.float32))).max()))")
  r = _exec(["--device", f"mock:{device}", "--", sys.executable, "-c", prog], tmp_path, timeout=300)
  one, err = map(float, r.stdout.split()[-2:]) if r.returncode == 0 else (None, None)
  assert one is not None and abs(one - np.sin(1.0)) < 1e-3 and err < 2e-3, r.stderr[-3000:]


@pytest.mark.parametrize("device,unit", [("gfx1100", "wmma"), ("gfx1200", "wmma"), ("gfx942", "mfma")])
def test_tensor_core_matmul(tinygrad, tmp_path, device, unit):
  """tinygrad's tensor cores (its LLVM renderer's llvm.amdgcn.wmma/mfma calls, DEBUG=4 shows them) on a half
  matmul accumulated in half and in float: exact on small integers. The half accumulator is v_wmma_f16 on RDNA,
  which stopped the launch before it was modelled."""
  prog = ("import numpy as np; from tinygrad import Tensor, dtypes; r = np.random.default_rng(0); "
          "a, b = (r.integers(-3, 4, (64, 64)).astype(np.float16) for _ in range(2)); "
          "want = a.astype(np.float32) @ b.astype(np.float32); "
          "print('ERR', *(float(np.abs(Tensor(a).matmul(Tensor(b), dtype=acc).numpy().astype(np.float32) - want).max())"
          " for acc in (dtypes.half, dtypes.float)))")
  r = subprocess.run([sys.executable, "-m", "gputwin.cli", "exec", "--device", f"mock:{device}", "--", sys.executable,
                      "-c", prog], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                     env=_env(DEV="AMD", DEBUG="4"))
  assert r.returncode == 0 and r.stdout.split()[-3:] == ["ERR", "0.0", "0.0"], (r.stdout + r.stderr)[-3000:]
  assert f"@llvm.amdgcn.{unit}." in r.stdout + r.stderr


def test_trace_replays_with_gputwin_run(tinygrad, tmp_path):
  """`gputwin exec --trace DIR` records each dispatch; its `command` (gputwin run) gives the buffers the client got."""
  prog = ("import numpy as np; from tinygrad import Tensor; "
          "a = Tensor(np.arange(96, dtype=np.float32).reshape(8, 12)); "
          "print((a @ a.T).relu().sum(axis=1).numpy()[0], (a.reshape(-1)[:90] * 0.5).exp().numpy()[1])")
  r = _exec(["--trace", str(tmp_path / "tr"), "--", sys.executable, "-c", prog], tmp_path, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  recs = sorted((tmp_path / "tr").iterdir())
  assert len(recs) >= 2  # at least the matmul and the elementwise kernel
  for d in recs:
    info = json.loads((d / "dispatch.json").read_text())
    cmd = info["command"].split()
    assert cmd[:2] == ["gputwin", "run"] and any(a["kind"] == "global_buffer" for a in info["args"])
    rr = subprocess.run([sys.executable, "-m", "gputwin.cli", *cmd[1:]], capture_output=True, text=True, timeout=300,
                        env=_env())
    assert rr.returncode == 0, rr.stderr[-3000:]
    after = sorted((d / "after").glob("*.npy"))
    assert any(not np.array_equal(np.load(f), np.load(d / "before" / f.name)) for f in after)  # the kernel wrote
    for f in after:
      np.testing.assert_array_equal(np.load(d / "replay" / f.name), np.load(f), err_msg=f"{d.name}/{f.name}")
