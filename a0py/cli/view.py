"""``a0py view``: the live web view (the command lives in :mod:`a0py.view.cli`)."""

from a0py.view.cli import view

__all__ = ["view"]
