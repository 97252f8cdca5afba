"""Shared by the isa tests: the per-target summary of the llvm-mc-22 differential fuzz, shown after the run.

Tests in test_llvm_fuzz.py append one line per target to the `fuzz_report` fixture; pytest prints them in a
section of its terminal summary (so the numbers are visible without -s), and fuzz_failures/summary.txt keeps them.
"""
from __future__ import annotations

import pytest

_REPORT = pytest.StashKey[list]()


@pytest.fixture
def fuzz_report(request) -> list[str]:
  return request.config.stash.setdefault(_REPORT, [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
  lines = config.stash.get(_REPORT, [])
  if lines:
    terminalreporter.section("llvm-mc-22 differential fuzz (details: tests/isa/fuzz_failures/)")
    for line in lines:
      terminalreporter.write_line(line)
