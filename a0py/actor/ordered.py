"""The ordered channel: a labeller and a reordering proxy (seed "In-Order Message Delivery").

Both ends agree on a label sequence: a first ``label`` and a successor function ``next``.
The :class:`Labeller` attaches the current label to each message and steps to the next.
The :class:`OrderedProxy` (the reordering proxy) delivers messages to its delegate in
label order, holding early ones until the gap before them fills, and drops duplicates.

Telling "early" from "old" with only a successor function
--------------------------------------------------------
A cyclic sequence has no order relation, so the proxy keeps two windows of labels, both
computed by iterating ``next``:

* the *ahead* window: the ``window`` labels starting at the expected one. A label there is
  delivered (the expected one) or held (an early one). At most ``window - 1`` messages are
  ever held: that is the bound on memory.
* the *past* window: the last ``history`` (default: ``window``) labels delivered or
  skipped. A label there is a duplicate and is dropped.

A label in neither is *out of window*: it is more than ``window - 1`` labels early (a gap
that never filled) or a stale duplicate older than ``window`` labels; the two look the
same. The ``on_overflow`` policy decides:

* ``"error"`` (default): raise :class:`OrderingWindowError`, change nothing;
* ``"drop"``: drop the message, count it in :attr:`OrderedProxy.overflowed`;
* ``"reset"``: give up on the gap: step through the whole ahead window, delivering the
  held messages in label order (the missing labels are skipped and counted in
  :attr:`OrderedProxy.skipped`), then handle the message against the new window; if it is
  still out of window, restart the sequence at its label. A skipped message that arrives
  later is dropped as a duplicate while it is in the past window (make ``history`` longer
  than ``window`` to keep recognising it after a reset). A "reset" trusts that no stale
  duplicate older than the past window arrives.

Invariant: the past and ahead windows are ``window + history`` consecutive labels of the
sequence, so they are disjoint only if the cycle is at least that long; the constructor
checks this by iterating ``next``. Pick a cycle far longer than the number of
messages in flight, and a window at least as large as that number.
"""

from collections import deque

from .errors import ActorConfigError, OrderingWindowError

__all__ = ["Labeller", "OrderedProxy", "cyclic"]

_OVERFLOW_POLICIES = ("error", "drop", "reset")


def cyclic(length):
    """Return the successor function of the cycle ``0, 1, ..., length - 1, 0, ...``.

    Raises :class:`ActorConfigError` if ``length`` is not an int of at least 2.
    """
    if not isinstance(length, int) or isinstance(length, bool) or length < 2:
        raise ActorConfigError(f"cycle length must be an int >= 2, got {length!r}")

    def successor(n):
        return (n + 1) % length

    successor.cycle = length
    return successor


def _increment(n):
    return n + 1


def _successor(next, cycle, who):
    if cycle is not None:
        if next is not None:
            raise ActorConfigError(f"{who}: give either next or cycle, not both")
        return cyclic(cycle)
    if next is None:
        return _increment
    if not callable(next):
        raise ActorConfigError(f"{who}: next must be callable, got {next!r}")
    return next


def _as_callable(target, what):
    """The function to call for ``target``: an actor ref, a callable, or an object with
    ``handle``."""
    if callable(target):
        return target
    handle = getattr(target, "handle", None)
    if callable(handle):
        return handle
    raise ActorConfigError(f"{what} must be callable or have a handle() method, got {target!r}")


class Labeller:
    """The labelling proxy: ``handle(message)`` calls ``target((label, message))`` and steps
    ``label`` to ``next(label)``.

    ``target`` is any callable (an :class:`~a0py.actor.ActorRef`, an :class:`OrderedProxy`,
    a function) or an object with ``handle``. ``next`` defaults to ``n + 1``; ``cycle=N``
    is shorthand for ``next=cyclic(N)``. Usable directly or as an actor behaviour (the
    label then lives in the actor, which handles one message at a time).

    Raises :class:`ActorConfigError` for a bad target, ``next`` or ``cycle``. Errors raised
    by ``target`` or ``next`` propagate; the label advances only after ``target`` returned.
    """

    __slots__ = ("_next", "_send", "label", "target")

    def __init__(self, target, label=0, next=None, *, cycle=None):
        self.target = target
        self._send = _as_callable(target, "Labeller target")
        self._next = _successor(next, cycle, "Labeller")
        self.label = label

    def handle(self, message):
        """Send ``(label, message)`` to the target, then advance the label."""
        label = self.label
        self._send((label, message))
        self.label = self._next(label)

    __call__ = handle

    def __repr__(self):
        return f"Labeller(target={self.target!r}, label={self.label!r})"


class OrderedProxy:
    """The reordering proxy: ``handle((label, message))`` calls ``delegate(message)`` in label
    order, starting at ``label`` and following ``next``.

    Early messages are held until the gap before them fills (at most ``window - 1`` of
    them), duplicates are dropped (counted in :attr:`dropped`), and the label sequence may
    wrap around (``cycle=N`` is shorthand for ``next=cyclic(N)``). See the module docstring
    for the windows and the ``on_overflow`` policies (``"error"``, ``"drop"``,
    ``"reset"``); ``history`` (default ``window``) is the length of the past window, i.e.
    how long a duplicate is recognised. Usable directly or as an actor behaviour.

    Raises :class:`ActorConfigError` for a bad delegate, ``next``, ``cycle``, ``window``,
    ``history`` or policy, or a cycle shorter than ``window + history``. :meth:`handle` raises
    :class:`ActorConfigError` for a message that is not a ``(label, message)`` pair,
    :class:`OrderingWindowError` under ``on_overflow="error"``, and the first error the
    delegate raised, after every message that was in order has been delivered (a message
    whose delivery raised counts as delivered).
    """

    def __init__(self, delegate, label=0, next=None, *, cycle=None, window=1024, history=None,
                 on_overflow="error"):
        self.delegate = delegate
        self._deliver = _as_callable(delegate, "OrderedProxy delegate")
        self._next = _successor(next, cycle, "OrderedProxy")
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ActorConfigError(f"OrderedProxy window must be an int >= 1, got {window!r}")
        if on_overflow not in _OVERFLOW_POLICIES:
            raise ActorConfigError(
                f"OrderedProxy on_overflow must be one of {_OVERFLOW_POLICIES}, got {on_overflow!r}")
        if history is None:
            history = window
        if not isinstance(history, int) or isinstance(history, bool) or history < 1:
            raise ActorConfigError(f"OrderedProxy history must be an int >= 1, got {history!r}")
        self.window = window
        self.history = history
        self.on_overflow = on_overflow
        self.delivered = 0    # messages passed to the delegate
        self.dropped = 0      # duplicates dropped
        self.overflowed = 0   # out-of-window messages dropped under "drop"
        self.skipped = 0      # labels given up on (skip_gap, "reset")
        self.resets = 0
        self._check_cycle(label)
        # The past window: label -> tick at which it was passed, and (label, tick) in order.
        # Ticks never restart, so evicting an old entry never forgets a label passed again
        # after a "reset" restart.
        self._past = {}
        self._past_order = deque()
        self._tick = 0
        self._restart(label)

    def _check_cycle(self, label):
        seen = {label}
        current = label
        span = self.window + self.history
        for _ in range(span - 1):
            current = self._next(current)
            if current in seen:
                raise ActorConfigError(
                    f"OrderedProxy: the label sequence repeats {current!r} within window + "
                    f"history = {span} labels; use a longer cycle or a smaller window")
            seen.add(current)

    def _restart(self, label):
        """Make ``label`` the expected one with a fresh ahead window (positions restart)."""
        self._base = 0                 # absolute position of the expected label
        self._ahead = {}               # label -> absolute position, `window` labels from base
        self._ahead_order = deque()
        self._held = {}                # absolute position -> message
        current = label
        for position in range(self.window):
            if position:
                current = self._next(current)
            self._ahead[current] = position
            self._ahead_order.append(current)
            self._past.pop(current, None)

    @property
    def expected(self):
        """The label the proxy will deliver next."""
        return self._ahead_order[0]

    @property
    def held(self):
        """How many early messages are held, waiting for a gap to fill."""
        return len(self._held)

    def _advance(self):
        """Move the expected label into the past window and extend the ahead window."""
        ahead_order = self._ahead_order
        done = ahead_order.popleft()
        del self._ahead[done]
        new = self._next(ahead_order[-1])
        self._ahead[new] = self._base + self.window
        ahead_order.append(new)
        self._base += 1
        tick = self._tick = self._tick + 1
        past = self._past
        past[done] = tick
        past_order = self._past_order
        past_order.append((done, tick))
        if len(past_order) > self.history:
            old, old_tick = past_order.popleft()
            if past.get(old) == old_tick:
                del past[old]

    def _release_held(self, error=None):
        """Deliver the held messages that are now in order. A delegate error does not stop
        the run (a stopped run would strand held messages); the first error is raised at
        the end, after ``error`` if one is given."""
        held = self._held
        while held:
            message = held.pop(self._base, _MISSING)
            if message is _MISSING:
                break
            self._advance()
            self.delivered += 1
            try:
                self._deliver(message)
            except Exception as exc:
                if error is None:
                    error = exc
        if error is not None:
            raise error

    def handle(self, labelled):
        """Take one ``(label, message)`` pair; deliver, hold or drop it (see the class)."""
        try:
            label, message = labelled
        except (TypeError, ValueError):
            raise ActorConfigError(
                f"OrderedProxy expects (label, message) pairs, got {labelled!r}") from None
        position = self._ahead.get(label)
        if position is None:
            if label in self._past:
                self.dropped += 1
                return
            self._out_of_window(label, message)
            return
        if position == self._base:
            self._advance()
            self.delivered += 1
            if not self._held:
                self._deliver(message)
                return
            try:
                self._deliver(message)
            except Exception as exc:
                self._release_held(exc)
            else:
                self._release_held()
        elif position in self._held:
            self.dropped += 1
        else:
            self._held[position] = message

    __call__ = handle

    def _out_of_window(self, label, message):
        if self.on_overflow == "drop":
            self.overflowed += 1
            return
        if self.on_overflow == "error":
            raise OrderingWindowError(
                f"OrderedProxy: label {label!r} is outside the window (expected {self.expected!r}, "
                f"window={self.window}, {len(self._held)} held): a gap that never filled or a "
                f"stale duplicate. If more than {self.window} messages can be in flight, pass a "
                f"larger window=; to go on past such labels, pass on_overflow='drop' (drop them) "
                f"or on_overflow='reset' (give up on the gap); or call skip_gap() and resend",
                label=label, expected=self.expected, held=len(self._held))
        self.resets += 1
        error = None
        for _ in range(self.window):
            held = self._held.pop(self._base, _MISSING)
            self._advance()
            if held is _MISSING:
                self.skipped += 1
                continue
            self.delivered += 1
            try:
                self._deliver(held)
            except Exception as exc:
                if error is None:
                    error = exc
        if label not in self._ahead and label not in self._past:
            self._restart(label)
        try:
            self.handle((label, message))
        finally:
            if error is not None:
                raise error

    def skip_gap(self):
        """Give up on the missing expected label(s): step to the first held message and
        deliver every message held from there on that is in order.

        Returns the number of labels skipped (0 if the expected message is not missing,
        i.e. nothing is held). Errors raised by the delegate propagate.
        """
        if not self._held:
            return 0
        skipped = 0
        while self._base not in self._held:
            self._advance()
            self.skipped += 1
            skipped += 1
        self._release_held()
        return skipped

    def __repr__(self):
        return (f"OrderedProxy(expected={self.expected!r}, held={len(self._held)}, "
                f"window={self.window}, delivered={self.delivered}, dropped={self.dropped})")


_MISSING = object()
