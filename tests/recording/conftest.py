"""Settings of the recording tests: ``root`` (tests/conftest.py) makes 16 MiB
arenas (recorders read many packets behind a fast publisher). The packets and
segments with known contents are in helpers/mcap_data.py."""

import pytest


@pytest.fixture
def arena_size():
    return "16M"
