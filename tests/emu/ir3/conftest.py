import pytest


@pytest.fixture
def checks(tier: str, monkeypatch) -> bool:
  """Select the tier a test is parametrized with (`tier`: interp, or native compiling from the first lane); returns
  `checks` for launch (the native tier runs with the checkers off)."""
  monkeypatch.setenv("GPUTWIN_JIT", "0" if tier == "interp" else "1")
  monkeypatch.setenv("GPUTWIN_JIT_AFTER", "1")
  return tier == "interp"
