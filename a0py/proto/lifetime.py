"""The lifetime the protocols' objects share: opened by their constructor, closed by
``close()`` or by leaving a ``with`` block, and owned by the process that opened them.

Invariants:

* **``with`` closes.** Leaving the block calls ``close()`` whatever ended it, and never
  swallows the exception that did.
* **A forked child's copy closes nothing of its parent's.** A child made by ``fork``
  holds copies of its parent's objects. What a copy may let go of is the child's own
  (its mappings, its copies of futures and file descriptors); what the parent holds
  through it (a server's deadman and the requests it has accepted, a broker client's
  session and arena, the threads that only the parent runs) stays the parent's. A
  ``close()`` that would touch such things asks :meth:`Closeable._forked_copy` first.
  The owner is recorded when the object is made, so a subclass cannot forget it.
"""

import os

__all__ = ["Closeable"]


class Closeable:
    """Base of an object that holds something until ``close()``: a context manager
    whose exit closes it, which knows the process that opened it. A subclass defines
    ``close()`` (idempotent)."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._opened_by_pid = os.getpid()
        return self

    def _forked_copy(self):
        """Whether this is a forked child's copy of an object its parent opened (its
        ``close()`` must then leave the parent's share alone)."""
        return os.getpid() != self._opened_by_pid

    def close(self):
        raise NotImplementedError(f"{type(self).__name__} must define close()")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
