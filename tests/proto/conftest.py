"""Settings of the protocol tests: each test is bounded (tests/conftest.py's
``bounded``), and ``root`` (tests/conftest.py) makes 256 KiB arenas."""

import pytest


@pytest.fixture
def time_limit_s():
    return 90
