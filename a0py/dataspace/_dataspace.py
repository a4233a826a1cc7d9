"""The in-process dataspace: facets assert, retract, observe and send.

A :class:`Dataspace` wraps one :class:`Index`. Each actor is a root
:class:`Facet`; a facet may start child facets. A facet owns what it asserted
and what it observes: stopping it (and its children, first) retracts the one
and removes the other, in one patch, so observers see the facet's
assertions vanish together.

Turns: actions taken inside ``with ds.turn():`` (or ``with facet.turn():``)
are applied together when the outermost block exits, as one patch (additions
before removals, so replacing ``[3]`` by ``[4]`` never shows a ``[_]``
observer an empty set); messages sent in the turn go out after the patch.
Outside a turn each action is its own turn.

Everything runs on the caller's thread; callbacks run after the index has
settled (see :class:`Index`), so they may act on the dataspace themselves.

Text: wherever a facet takes a value or a pattern (``assert_``, ``send``,
``observe``), a ``str`` is read as the text syntax of :func:`parse`, never
taken as a string fact: ``assert_('present("Alice")')`` asserts the record.
The string value itself is written as its text, quoted: ``assert_('"hi"')``
(``format_term(s)`` gives the text of any ``s``). A ``str`` inside a record
or tuple is a string as always; :class:`Index` itself takes Python values
only, so there a ``str`` is a string.
"""

from a0py.dataspace._build_choice import build
from a0py.dataspace._errors import (
    DataspaceTypeError,
    FacetStoppedError,
    ParseError,
    UnknownHandlerError,
)
from a0py.dataspace._format import format_term
from a0py.dataspace._syntax import parse


def _read(term, method):
    """``term`` as a value or pattern: a ``str`` is text, parsed; anything
    else is taken as it is. A ParseError gets a note that says how to write
    the string itself, in case that was meant."""
    if type(term) is not str:
        return term
    try:
        return parse(term)
    except ParseError as e:
        verb = {"assert_": "assert", "observe": "match"}.get(method, method)
        e.add_note(
            f"Facet.{method} reads a str as the text syntax of parse(); to {verb}"
            f" the string itself, write it quoted: {method}({format_term(term)!r})"
        )
        raise


class AssertionHandle:
    """One assertion made by a facet; pass it to :meth:`Facet.retract`."""

    __slots__ = ("facet", "live", "value")

    def __init__(self, facet, value):
        self.facet = facet
        self.value = value
        self.live = True

    def __repr__(self):
        return f"<AssertionHandle {self.value!r}{'' if self.live else ' retracted'}>"


class Observer:
    """One pattern observed by a facet; pass it to :meth:`Facet.unobserve`."""

    __slots__ = ("_handle", "facet", "pattern")

    def __init__(self, facet, pattern, handle):
        self.facet = facet
        self.pattern = pattern
        self._handle = handle

    @property
    def live(self):
        """False once the observer was removed or its facet stopped."""
        return self._handle.active

    def __repr__(self):
        return f"<Observer {self.pattern!r}{'' if self.live else ' removed'}>"


class _Turn:
    __slots__ = ("additions", "depth", "messages", "removals")

    def __init__(self):
        self.additions = []
        self.removals = []
        self.messages = []
        self.depth = 0


class Dataspace:
    """An in-process dataspace over one skeleton :class:`Index`.

    ``ds.actor(name)`` starts an actor and returns its root facet.
    ``ds.index`` is the index itself, for inspection.
    """

    def __init__(self, index=None):
        self.index = build.Index() if index is None else index
        self._turn = None

    def actor(self, name=None):
        """Start an actor; returns its root :class:`Facet`."""
        return Facet(self, None, name)

    def turn(self):
        """A context manager that gathers every action taken inside it into
        one patch, applied when the outermost ``with`` exits (also when it
        exits by an exception: what was done stays done)."""
        return _TurnContext(self)

    def _apply(self, additions=(), removals=(), messages=()):
        t = self._turn
        if t is not None:
            t.additions.extend(additions)
            t.removals.extend(removals)
            t.messages.extend(messages)
            return
        if additions or removals:
            self.index.patch(additions, removals)
        for m in messages:
            self.index.send_message(m)

    def __repr__(self):
        return f"<Dataspace {len(self.index)} assertions>"


class _TurnContext:
    __slots__ = ("ds",)

    def __init__(self, ds):
        self.ds = ds

    def __enter__(self):
        if self.ds._turn is None:
            self.ds._turn = _Turn()
        self.ds._turn.depth += 1
        return self.ds

    def __exit__(self, *exc):
        t = self.ds._turn
        t.depth -= 1
        if t.depth == 0:
            self.ds._turn = None
            self.ds._apply(t.additions, t.removals, t.messages)
        return False


class Facet:
    """A facet of an actor: the owner of assertions and observers.

    Raises :class:`FacetStoppedError` for any action after :meth:`stop`.
    Usable as a context manager that stops the facet on exit.
    """

    def __init__(self, ds, parent, name):
        self.dataspace = ds
        self.parent = parent
        self.name = name
        self.children = []
        self._assertions = {}  # AssertionHandle -> None (insertion order)
        self._observers = {}  # Observer -> None
        self.running = True

    def _check(self):
        if not self.running:
            raise FacetStoppedError(f"facet {self.name or ''} has stopped".replace("  ", " "))

    def facet(self, name=None):
        """Start a child facet; it stops when this facet stops."""
        self._check()
        child = Facet(self.dataspace, self, name)
        self.children.append(child)
        return child

    def turn(self):
        """Same as ``self.dataspace.turn()``."""
        return self.dataspace.turn()

    def assert_(self, value):
        """Assert ``value`` for as long as this facet runs (or until
        :meth:`retract`). Returns an :class:`AssertionHandle`. A ``str`` is
        text, parsed (``'present("Alice")'``; the string ``hi`` itself is
        ``'"hi"'``). Raises :class:`ParseError` for bad text,
        :class:`InvalidValueError` unless ``value`` is a value (a pattern is
        not)."""
        self._check()
        value = _read(value, "assert_")
        build.value_key(value)  # reject non-values now, not at the end of a turn
        h = AssertionHandle(self, value)
        self._assertions[h] = None
        self.dataspace._apply(additions=(value,))
        return h

    def retract(self, handle):
        """Withdraw one assertion made by this facet. Raises
        :class:`UnknownHandlerError` when ``handle`` is not a live assertion
        of this facet."""
        self._check()
        if type(handle) is not AssertionHandle or handle.facet is not self or not handle.live:
            raise UnknownHandlerError(f"{handle!r} is not a live assertion of this facet")
        handle.live = False
        del self._assertions[handle]
        self.dataspace._apply(removals=(handle.value,))

    def observe(self, pattern, callback=None, *, added=None, removed=None, message=None):
        """Observe ``pattern``. ``callback(event, captures)`` gets every
        event; ``added(*captures)``, ``removed(*captures)`` and
        ``message(*captures)`` get ``+``, ``-`` and ``!`` events with the
        captures spread out. A ``str`` is text, parsed (``'present($who)'``).
        Returns an :class:`Observer`.

        Observers are registered at once, even inside a turn, and are told
        of matching assertions already present.

        Raises :class:`DataspaceTypeError` when no callback is given or one
        is not callable, :class:`ParseError` for bad text.
        """
        self._check()
        pattern = _read(pattern, "observe")
        cb = callback
        if cb is None:
            if added is None and removed is None and message is None:
                raise DataspaceTypeError("observe needs a callback or added/removed/message")
            table = {"+": added, "-": removed, "!": message}

            def cb(event, captures):
                f = table[event]
                if f is not None:
                    f(*captures)

        elif added is not None or removed is not None or message is not None:
            raise DataspaceTypeError("give either callback or added/removed/message, not both")
        handle = self.dataspace.index.add_handler(pattern, cb)
        obs = Observer(self, pattern, handle)
        self._observers[obs] = None
        return obs

    def unobserve(self, observer):
        """Stop observing. Raises :class:`UnknownHandlerError` when
        ``observer`` is not a live observer of this facet."""
        self._check()
        if type(observer) is not Observer or observer.facet is not self or not observer.live:
            raise UnknownHandlerError(f"{observer!r} is not a live observer of this facet")
        del self._observers[observer]
        self.dataspace.index.remove_handler(observer._handle)

    def send(self, message):
        """Send ``message`` to every matching observer (``!``); nothing is
        kept. A ``str`` is text, parsed, as for :meth:`assert_`. Raises
        :class:`ParseError` for bad text, :class:`InvalidValueError` unless
        ``message`` is a value."""
        self._check()
        message = _read(message, "send")
        build.value_key(message)
        self.dataspace._apply(messages=(message,))

    def stop(self):
        """Stop this facet and its children: remove their observers (they get
        no more events), then retract their assertions in one patch. Stopping
        a stopped facet does nothing."""
        if not self.running:
            return
        removals = []
        self._stop_into(removals)
        if self.parent is not None and self in self.parent.children:
            self.parent.children.remove(self)
        self.dataspace._apply(removals=removals)

    def _stop_into(self, removals):
        for child in self.children:
            if child.running:
                child._stop_into(removals)
        self.children = []
        self.running = False
        for obs in self._observers:
            self.dataspace.index.remove_handler(obs._handle)
        self._observers.clear()
        for h in self._assertions:
            h.live = False
            removals.append(h.value)
        self._assertions.clear()

    @property
    def assertions(self):
        """The values this facet asserts now (with repeats)."""
        return [h.value for h in self._assertions]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __repr__(self):
        state = "running" if self.running else "stopped"
        return f"<Facet {self.name or ''} {state}>".replace("  ", " ")
