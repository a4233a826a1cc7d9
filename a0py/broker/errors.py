"""The exceptions of the fact broker. Every one is a subclass of :class:`a0py.A0Error`
(its commands, in :mod:`a0py.cli.broker`, report them as the CLI's ``CliError``)."""


from a0py.errors import A0Error, A0TimeoutError


class BrokerError(A0Error):
    """Base class of the broker's errors."""


class BrokerTypeError(BrokerError, TypeError):
    """An argument is not what the call takes: a pattern where a value was meant, no
    pattern, a callback that is not callable. The message names the argument."""


class BrokerNameError(BrokerError, ValueError):
    """A broker or client name is not a valid name (``[A-Za-z0-9_.-]``, at most 100
    characters, not starting with a dot)."""


class BatchRejectedError(BrokerError, ValueError):
    """A request was refused and nothing of it was applied. ``item`` is the index of the
    bad item in its batch (None when the request as a whole was bad); the message names
    the item and what was wrong."""

    def __init__(self, message, item=None):
        super().__init__(message)
        self.item = item


class BrokerTimeoutError(BrokerError, A0TimeoutError):
    """No broker answered in time (none is running, or it is overloaded), or a running
    broker did not take a request within the client's timeout (its request arena stayed
    full). The message names the broker."""


class ResultTooLargeError(BrokerError):
    """An answer (the facts asked for, the claims a revoke retracted) is larger than the
    client's arena takes at once. ``size`` is its size in bytes, ``limit`` the most the
    client takes; the message says how to ask for less (a narrower pattern) or take more
    (a client with a larger ``arena_size``)."""

    def __init__(self, message, size=None, limit=None):
        super().__init__(message)
        self.size = size
        self.limit = limit


class BrokerRunningError(BrokerError):
    """A broker of this name is already running (its pid is in the message)."""


class BrokerClosedError(BrokerError):
    """The client (or broker) was closed."""


class WireError(BrokerError, ValueError):
    """A frame does not follow the layout (names the offset and what was wrong)."""


class UnknownSubscriptionError(BrokerError, KeyError):
    """Unsubscribing a subscription that is not (or no longer) this client's."""


__all__ = [
    "BatchRejectedError",
    "BrokerClosedError",
    "BrokerError",
    "BrokerNameError",
    "BrokerRunningError",
    "BrokerTimeoutError",
    "BrokerTypeError",
    "ResultTooLargeError",
    "UnknownSubscriptionError",
    "WireError",
]
