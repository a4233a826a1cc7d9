"""Actors over a0py: mailboxes over arenas, labelled in-order channels, scatter-gather.

* :class:`ActorSystem` spawns actors on threads (:meth:`~ActorSystem.spawn`), on an
  asyncio loop (:meth:`~ActorSystem.spawn_async`), or with an arena mailbox addressable
  from other processes (``spawn(..., arena=True)``, :func:`spawn_process`,
  :class:`ArenaRef`); schedules messages (``send_after``, ``send_at``); supervises
  failures. Inside a handler, :func:`current` and :func:`become`.
* The ordered channel: :class:`Labeller` and :class:`OrderedProxy` (the reordering proxy).
* Scatter-gather: :func:`scatter_gather`, :func:`start_gather`, :class:`Registrar`,
  :class:`ContentRouter`.

The cross-process parts import the compiled core on first use only, so everything
in-process works without it. See ``docs/actors.md``.

Modules, bottom up (each imports only those above it in this list): ``errors``; ``ref``
(:class:`ActorRef`, :class:`LocalRef`, :data:`STOP`); ``mailbox``; ``watch`` (the death
watch); ``arena`` (arena mailboxes and :class:`ArenaRef`); ``context``; ``message_loop``
(thread and asyncio actors); ``scheduler``; ``system``; ``ordered``; ``gather``;
``registry``; ``router``; ``process`` (:func:`spawn_process`).
"""

import importlib

from .arena import ArenaMailbox, ArenaRef, list_mailboxes, unlink_mailbox
from .context import ActorContext, become, current
from .errors import (
    ActorConfigError,
    ActorError,
    ActorNameTakenError,
    ActorNotFoundError,
    ActorStoppedError,
    GatherError,
    MailboxFullError,
    MessageTooLargeError,
    NotInActorError,
    NotPicklableRefError,
    OrderingWindowError,
    RemoteFailureError,
)
from .gather import (
    Gather,
    GatherResult,
    Reply,
    Request,
    new_correlation_id,
    scatter_gather,
    start_gather,
)
from .mailbox import Mailbox, QueueMailbox
from .ordered import Labeller, OrderedProxy, cyclic
from .ref import STOP, ActorRef, LocalRef, Stop
from .registry import Register, Registrar, Unregister
from .router import ContentRouter
from .scheduler import Timer
from .system import ActorSystem, Failure

__all__ = [
    "STOP", "ActorConfigError", "ActorContext", "ActorError", "ActorNameTakenError",
    "ActorNotFoundError", "ActorRef", "ActorStoppedError", "ActorSystem", "ArenaMailbox",
    "ArenaRef", "ContentRouter", "Failure", "Gather", "GatherError", "GatherResult",
    "Labeller", "LocalRef", "Mailbox", "MailboxFullError", "MessageTooLargeError",
    "NotInActorError", "NotPicklableRefError", "OrderedProxy", "OrderingWindowError",
    "ProcessActors", "QueueMailbox", "Register", "Registrar", "RemoteFailureError", "Reply",
    "Request", "Stop",
    "Timer", "Unregister", "become", "current", "cyclic", "new_correlation_id",
    "list_mailboxes", "scatter_gather", "spawn_process", "start_gather", "unlink_mailbox",
]

# Loaded on first use: it imports multiprocessing, which in-process users do not need.
_LAZY = {"ProcessActors": ".process", "spawn_process": ".process"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'a0py.actor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
