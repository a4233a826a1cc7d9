"""What clients of a view may change: the ``--allow-publish``, ``--allow-set``
and ``--allow-call`` globs.

A view only shows by default. Each power that writes to a0py is off unless its
flag names the topics it applies to, because a browser tab (or the Foxglove
app) writing to a robot's topics is a decision its user makes on purpose:

* ``publish``: a client may advertise channels on topics matching these globs
  and publish on them (Foxglove's ``clientPublish``);
* ``set``: a client may set parameters of the cfg topics matching these globs
  (``setParameters``; reading parameters needs no flag);
* ``call``: a client may call the RPC servers of the topics matching these
  globs (``serviceCallRequest``; seeing the services needs no flag).

Globs are discovery's (:func:`a0py.proto.discovery.compile_glob`): ``*`` within
one segment, ``**`` across segments, ``?``, ``[abc]``.
"""

import json

from ..errors import ArgumentError
from ..proto.discovery import compile_glob

__all__ = ["POWERS", "Access"]

#: Each power: (its command-line flag, what it lets a client do, in words).
POWERS = {
    "publish": ("--allow-publish", "publishing to"),
    "set": ("--allow-set", "setting parameters of"),
    "call": ("--allow-call", "calling the RPC server of"),
}
# serverInfo metadata keys, so a page can say what is allowed before it tries.
_METADATA_KEYS = {"publish": "a0py.allowPublish", "set": "a0py.allowSet", "call": "a0py.allowCall"}


class Access:
    """The globs each power is allowed on (``publish``, ``set``, ``call``:
    iterables of globs; empty: the power is off). Raises
    :class:`a0py.ArgumentError` for a glob that is not a non-empty str."""

    def __init__(self, publish=(), set=(), call=()):
        self.globs = {}
        self._matchers = {}
        for power, globs in (("publish", publish), ("set", set), ("call", call)):
            if isinstance(globs, str):
                raise ArgumentError(f"allow_{power} takes a list of globs, not the str {globs!r}")
            globs = tuple(globs or ())
            self.globs[power] = globs
            self._matchers[power] = [compile_glob(g).match for g in globs]

    def on(self, power):
        """Whether ``power`` is allowed on any topic."""
        return bool(self.globs[power])

    def allows(self, power, topic):
        """Whether ``power`` is allowed on ``topic`` (a topic name)."""
        name = topic[1:] if topic.startswith("/") else topic
        return any(m(name) for m in self._matchers[power])

    def refusal(self, power, topic):
        """Why ``power`` on ``topic`` is refused, with the flag that would allow it."""
        flag, doing = POWERS[power]
        if not self.globs[power]:
            return (f"{doing} {topic!r} is not allowed: this view allows it on no topic (start it with "
                    f"{flag} GLOB to allow it on the topics matching GLOB)")
        return (f"{doing} {topic!r} is not allowed: this view allows it only on topics matching "
                f"{' '.join(self.globs[power])} ({flag})")

    def metadata(self):
        """The serverInfo metadata telling each power's globs (a JSON list each)."""
        return {key: json.dumps(list(self.globs[power])) for power, key in _METADATA_KEYS.items()}
