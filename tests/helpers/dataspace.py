"""The two builds of the dataspace's one skeleton-index source, for tests that
hold them to each other: ``compiled`` (``a0py.dataspace._compiled``; None when it
is not built, which those tests fail on, never skip) and ``interpreted``
(``a0py.dataspace._interpreted``)."""

from a0py.dataspace import _interpreted as interpreted

try:
    from a0py.dataspace import _compiled as compiled
except ImportError:  # pragma: no cover - the build is part of `make test`
    compiled = None

__all__ = ["compiled", "interpreted"]
