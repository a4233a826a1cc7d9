"""A broker client's subscription: the join of its patterns, and the result it keeps
up to date from the broker's notifications (:class:`a0py.broker.BrokerClient` makes
them and feeds them on its reader thread).

Invariants:

* **A result is presented in a deterministic order**: rows sorted by the canonical
  encoding of their tuple of values (variables in name order), so two equal result sets
  always look the same, and a reordering is never a change.
* **A delta is applied only to a base the client trusts**: after a resync (the client
  sent its whole state) the deltas are dropped until the broker's full result comes.
* **A result handed to the callback is never mutated later**: each change publishes a
  new list (its row dicts are shared with later results and must not be mutated).
"""

import threading
from bisect import bisect_left

from a0py.dataspace import decode

from .client_requests import DEFAULT_TIMEOUT
from .errors import BrokerTimeoutError
from .terms import pattern_text, pattern_vars
from .wire import FLAG_FULL, FLAG_MORE, IT_ADD, IT_DEL

__all__ = ["Subscription"]


class Subscription:
    """A live subscription: ``patterns`` joined on their shared variables.

    ``variables`` (sorted names), ``result`` (the last result delivered: a list of dicts
    variable → value, in the deterministic order; do not mutate them), ``id``, ``error``
    (a :class:`BrokerError` when the broker could not deliver a result: one larger than
    half the client's arena).
    The callback gets the full current result each time it changes; the first call
    carries the result at subscription time (possibly empty).
    """

    def __init__(self, client, sub_id, patterns, callback):
        self.client = client
        self.id = sub_id
        self.patterns = patterns
        self.callback = callback
        self.variables = tuple(sorted({n for p in patterns for n in pattern_vars(p) if n}))
        self.result = []
        self.notifications = 0
        self._rows = {}          # encoded row -> dict
        self._keys = []          # sorted encoded rows
        self._ordered = []       # the row dicts in the order of _keys
        self._staged = None      # rows of a notification cut into frames
        self._awaiting_full = True
        self._reset = False
        self._delivered = threading.Event()
        self.active = True
        self.error = None        # a BrokerError when the broker cannot deliver the result

    def unsubscribe(self):
        """End the subscription (no callback after this returns, except one already
        running). Raises :class:`UnknownSubscriptionError` if it already ended."""
        self.client.unsubscribe(self)

    def wait(self, timeout=DEFAULT_TIMEOUT):
        """Block until the first result has been delivered; returns :attr:`result`.
        Raises :class:`BrokerTimeoutError`."""
        if not self._delivered.wait(timeout):
            raise BrokerTimeoutError(
                f"subscription {self.id} of broker {self.client.broker!r} got no result within "
                f"{timeout}s (is a broker running?)")
        if self.error is not None:
            raise self.error
        return self.result

    def __repr__(self):
        return (f"Subscription({self.id}, {', '.join(pattern_text(p) for p in self.patterns)}, "
                f"{len(self._keys)} rows)")

    # -- called on the reader thread

    def _apply(self, flags, items):
        if self._reset:
            # Set by a resync (maybe on another thread); acted on here, on the reader's.
            self._reset = False
            self._staged = None
            self._awaiting_full = True
        if flags & FLAG_FULL:
            self._staged = ({}, True)     # only the first frame of a full result has the flag
            self._awaiting_full = False
        elif self._awaiting_full:
            return None                 # a delta against a base we no longer trust
        elif self._staged is None:
            if not flags & FLAG_MORE:   # the usual case: a whole delta in one frame
                self._apply_delta(items)
                return self._publish()
            self._staged = ([], False)
        staged, full = self._staged
        for op, payload in items:
            if full:
                if op == IT_ADD:
                    staged[payload] = None
            else:
                staged.append((op, payload))
        if flags & FLAG_MORE:
            return None
        self._staged = None
        if full:
            first = not self._delivered.is_set()
            if not first and staged.keys() == self._rows.keys():
                return None             # a resync that changed nothing
            rows = {k: self._rows.get(k) or self._row(k) for k in staged}
            self._rows = rows
            self._keys = sorted(rows)
            self._ordered = [rows[k] for k in self._keys]
        else:
            self._apply_delta(staged)
        return self._publish()

    def _apply_delta(self, items):
        # The sorted keys and the rows in their order change in step: a change costs a
        # search and a move of pointers, not a rebuild of the whole result.
        rows, keys, ordered, variables = self._rows, self._keys, self._ordered, self.variables
        for op, payload in items:
            if op == IT_ADD:
                if payload not in rows:
                    row = rows[payload] = dict(zip(variables, decode(payload)))
                    i = bisect_left(keys, payload)
                    keys.insert(i, payload)
                    ordered.insert(i, row)
            elif op == IT_DEL and rows.pop(payload, None) is not None:
                i = bisect_left(keys, payload)
                del keys[i]
                del ordered[i]

    def _publish(self):
        self.result = self._ordered.copy()   # the callback may keep it: never mutated later
        self.notifications += 1
        return self.result

    def _row(self, payload):
        return dict(zip(self.variables, decode(payload)))

