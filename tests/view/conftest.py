"""Settings of the view tests: ``root`` (tests/conftest.py) makes 4 MiB arenas.
The view and publisher processes and the recordings are in helpers/view.py."""

import pytest


@pytest.fixture
def arena_size():
    return "4M"
