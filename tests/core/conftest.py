"""Fixtures of the core tests: ``tr``, a Transport on a heap arena of
``heap_size`` bytes (4 KiB unless a module overrides ``heap_size``).
``shm_name`` and ``spawn`` are in tests/conftest.py."""

import pytest


@pytest.fixture
def heap_size():
    """The size of the heap arena under ``tr``."""
    return 4096


@pytest.fixture
def tr(heap_size):
    """A Transport on a fresh heap arena of ``heap_size`` bytes, closed afterwards."""
    import a0py

    arena = a0py.Arena.heap(heap_size)
    yield a0py.Transport(arena)
    arena.close()
