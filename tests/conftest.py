"""Suite-wide pytest setup."""
pytest_plugins = ["pytester"]  # tests/verify drives the gputwin pytest plugin through pytester
