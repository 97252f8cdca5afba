import shutil

import pytest



@pytest.fixture(scope="session")
def clang():
  if not (shutil.which("clang-22") and shutil.which("ld.lld-22")):
    pytest.skip("clang-22 / ld.lld-22 not installed (CI installs them: .ci/run)")
