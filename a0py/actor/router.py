"""Content-based routing: send each message to the actors its content selects."""

from .errors import ActorConfigError
from .ordered import _as_callable

__all__ = ["ContentRouter"]


class ContentRouter:
    """Content-based routing: send each message to the actors its content selects.

    ``routes``: ``(predicate, target)`` pairs; every target whose predicate accepts the
    message gets it. ``key`` with ``registrar``: the message also goes to the live actors
    registered under ``key(message)``. Messages no route accepts go to ``default`` (a ref or
    callable) or are counted in :attr:`unrouted`. Usable directly or as an actor behaviour;
    :meth:`recipients_for` gives the same selection as a recipient list for a gather.

    Raises :class:`ActorConfigError` for a bad route, or ``key`` without ``registrar``.
    """

    def __init__(self, routes=(), *, key=None, registrar=None, default=None):
        self.routes = []
        for route in routes:
            try:
                predicate, target = route
            except (TypeError, ValueError):
                raise ActorConfigError(f"a route is a (predicate, target) pair, got {route!r}") from None
            if not callable(predicate):
                raise ActorConfigError(f"a route predicate must be callable, got {predicate!r}")
            self.routes.append((predicate, _as_callable(target, "route target"), target))
        if (key is None) != (registrar is None):
            raise ActorConfigError("ContentRouter: give key and registrar together")
        if key is not None and not callable(key):
            raise ActorConfigError(f"key must be callable, got {key!r}")
        self.key = key
        self.registrar = registrar
        self.default = default
        self.unrouted = 0

    def recipients_for(self, message):
        """The targets ``message`` would be routed to (route targets, then registered
        actors), without duplicates."""
        targets = []
        seen = set()
        for predicate, _send, target in self.routes:
            if predicate(message) and id(target) not in seen:
                seen.add(id(target))
                targets.append(target)
        if self.key is not None:
            names = {getattr(t, "name", None) for t in targets}
            for ref in self.registrar.lookup(self.key(message)):
                if ref.name not in names:
                    targets.append(ref)
        return targets

    def handle(self, message):
        """Route ``message``. Errors raised by a target's send propagate."""
        targets = self.recipients_for(message)
        if not targets:
            if self.default is None:
                self.unrouted += 1
            else:
                self.default(message)
            return
        for target in targets:
            _as_callable(target, "route target")(message)

    __call__ = handle
