"""The exceptions the actor layer raises; each is a subclass of :class:`a0py.A0Error`."""

from ..errors import A0Error, A0TimeoutError


class ActorError(A0Error):
    """Base class of every error raised by :mod:`a0py.actor`."""


class ActorConfigError(ActorError, ValueError):
    """A constructor or function was given a bad argument (a window larger than the label
    cycle, a negative timeout, a behaviour that is not callable, ...). The message names
    the argument and the value."""


class OrderingWindowError(ActorError):
    """An :class:`~a0py.actor.OrderedProxy` received a label outside its window.

    The label is neither one of the next ``window - 1`` labels expected (so it cannot be
    held) nor one of the last ``window`` labels delivered (so it is not a known
    duplicate). Either a gap never filled and the sender ran more than ``window`` labels
    ahead, or a stale duplicate older than the window arrived: with only a successor
    function the two cannot be told apart. Raised under ``on_overflow="error"``; the
    proxy's state is unchanged, so the caller may call :meth:`OrderedProxy.skip_gap` and
    resend. The message says what to change: a larger ``window=`` if more messages can be
    in flight, or ``on_overflow="drop"`` / ``"reset"`` to go on past such labels.
    Attributes: ``label``, ``expected``, ``held``.
    """

    def __init__(self, message, *, label=None, expected=None, held=0):
        super().__init__(message)
        self.label = label
        self.expected = expected
        self.held = held


class NotInActorError(ActorError, RuntimeError):
    """:func:`~a0py.actor.current` or :func:`~a0py.actor.become` was called outside an
    actor's handling of a message."""


class ActorStoppedError(ActorError):
    """The actor system (or the scheduler) was shut down, so it takes no more work."""


class ActorNotFoundError(ActorError, LookupError):
    """No mailbox exists for the actor name (its arena was never created or was unlinked)."""


class ActorNameTakenError(ActorError):
    """An actor with this name is already alive (another thread or process holds the
    liveness lock of its mailbox arena)."""


class MailboxFullError(ActorError, A0TimeoutError):
    """A cross-process mailbox stayed full (its reader is slow, stopped or dead) for the
    whole send timeout. Nothing was written."""


class MessageTooLargeError(ActorError, ValueError):
    """A pickled message is larger than the mailbox arena can ever hold."""


class NotPicklableRefError(ActorError, TypeError):
    """A reference to an in-process actor was pickled to cross a process boundary. Spawn
    the actor with ``arena=True`` (a named arena mailbox) to make it addressable from
    other processes."""


class GatherError(ActorError):
    """A scatter-gather was misused: waiting on a result that did not come in time, or a
    gather cancelled before completion."""


class RemoteFailureError(ActorError):
    """What a supervisor in another process gets as :attr:`Failure.error`: the failed
    actor's exception may not pickle, so it crosses the process boundary as its type
    name and message (``"ValueError: bad input"``)."""

    def __init__(self, error):
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        super().__init__(text)

    def __reduce__(self):
        return (RemoteFailureError, (str(self),))
