"""Settings of the command-line tests: each test is bounded (tests/conftest.py's
``bounded``), and ``root`` (tests/conftest.py) leaves the arena sizes at their
defaults, as a user gets them. The command runners are in helpers/cli.py."""

import pytest


@pytest.fixture
def time_limit_s():
    return 120


@pytest.fixture
def arena_size():
    return None
