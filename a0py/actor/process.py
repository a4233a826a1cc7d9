"""Actors in other processes: a child process that runs arena actors, addressable by name.

:func:`spawn_process` starts one child process (a *node*) running one or more actors, each
with its own arena mailbox ``a0py.actor.<name>``. The parent creates the arenas first, so
messages can be sent at once, then waits until every actor's thread holds its liveness
lock. Any process can then reach an actor with ``ArenaRef(name)``, and sees it dead the
instant it stops or its process exits or is killed.
"""

import multiprocessing
import os
import signal
import time

from .arena import DEFAULT_ARENA_SIZE, ArenaMailbox, ArenaRef, close_cached_arenas
from .errors import ActorConfigError, ActorError
from .system import STOP, ActorSystem

__all__ = ["ProcessActors", "spawn_process"]


def _node_main(specs, arena_size, supervisor_name):
    supervisor = ArenaRef(supervisor_name) if supervisor_name else None
    system = ActorSystem(f"node-{os.getpid()}", supervisor=supervisor)
    actors = []
    try:
        for name, factory, args, kwargs in specs:
            behaviour = factory(*args, **kwargs)
            mailbox = ArenaMailbox(name, size=arena_size, create=True)
            ref = system.spawn(behaviour, name=name, mailbox=mailbox)
            actors.append(ref._actor)
        for actor in actors:
            actor.done.wait()
    finally:
        system.shutdown(timeout=1.0)
        # Let the actor threads end before the interpreter does: a daemon thread still
        # unwinding during finalization makes noise on stderr.
        for actor in actors:
            actor.thread.join(1.0)
        del actors, system
        close_cached_arenas()


def _normalise(actors):
    specs = []
    if not isinstance(actors, dict) or not actors:
        raise ActorConfigError(f"actors must be a non-empty dict name -> factory, got {actors!r}")
    for name, spec in actors.items():
        args, kwargs = (), {}
        if isinstance(spec, tuple):
            if not spec:
                raise ActorConfigError(f"actor {name!r}: empty spec")
            factory, *rest = spec
            if rest:
                args = tuple(rest[0])
            if len(rest) > 1:
                kwargs = dict(rest[1])
            if len(rest) > 2:
                raise ActorConfigError(f"actor {name!r}: a spec is (factory, args, kwargs)")
        else:
            factory = spec
        if not callable(factory):
            raise ActorConfigError(f"actor {name!r}: the factory must be callable, got {factory!r}")
        ArenaRef(name)  # validates the name
        specs.append((name, factory, args, kwargs))
    return specs


class ProcessActors:
    """The handle of a node process spawned by :func:`spawn_process`: its ``process``,
    ``pid``, and ``refs`` (name -> :class:`ArenaRef`). Use as a context manager: leaving it
    stops the node (or kills it if it does not stop) and unlinks the mailboxes."""

    def __init__(self, process, refs, mailboxes):
        self.process = process
        self.refs = refs
        self._mailboxes = mailboxes
        self._closed = False

    @property
    def pid(self):
        """The node's pid."""
        return self.process.pid

    def __getitem__(self, name):
        return self.refs[name]

    def is_alive(self):
        """Whether the node process is running."""
        return self.process.is_alive()

    def kill(self, sig=signal.SIGKILL):
        """Send ``sig`` (default SIGKILL) to the node and reap it."""
        if self.process.is_alive():
            os.kill(self.process.pid, sig)
        self.process.join(5)

    def stop(self, timeout=5.0):
        """Send :data:`STOP` to every actor of the node and wait for it to exit; kill it if
        it has not exited after ``timeout`` seconds. Returns the exit code."""
        if self.process.is_alive():
            for ref in self.refs.values():
                try:
                    ref.send(STOP, timeout=min(timeout, 1.0))
                except ActorError:
                    pass
            self.process.join(timeout)
            if self.process.is_alive():
                self.kill()
        return self.process.exitcode

    def join(self, timeout=None):
        """Wait for the node to exit; return its exit code (None if still running)."""
        self.process.join(timeout)
        return self.process.exitcode

    def close(self, timeout=5.0):
        """Stop the node (see :meth:`stop`) and unlink its mailboxes. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stop(timeout)
        finally:
            for mailbox in self._mailboxes:
                mailbox.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<ProcessActors pid={self.pid} actors={sorted(self.refs)}>"


def spawn_process(actors, *, start_method="spawn", arena_size=DEFAULT_ARENA_SIZE,
                  start_timeout=30.0, supervisor=None):
    """Start a process running the given actors; return a :class:`ProcessActors`.

    ``actors``: a dict ``name -> factory`` or ``name -> (factory, args[, kwargs])``; the
    child calls ``factory(*args, **kwargs)`` to make each behaviour, so with the ``spawn``
    start method (the default; ``fork`` and ``forkserver`` work too) factories and
    arguments must pickle (module-level functions or classes). Each actor gets the arena
    mailbox ``a0py.actor.<name>`` of ``arena_size`` bytes. ``supervisor``: the name of an
    arena actor that receives the node's :class:`Failure` messages (by default the node
    logs them).

    Raises :class:`ActorConfigError` (bad spec, name or start method), and
    :class:`ActorError` if the node died or did not bring every actor up within
    ``start_timeout`` seconds (it is then killed and the mailboxes unlinked), or an actor
    of that name is already alive elsewhere.
    """
    specs = _normalise(actors)
    try:
        context = multiprocessing.get_context(start_method)
    except ValueError:
        raise ActorConfigError(f"unknown start method {start_method!r}") from None
    if supervisor is not None and not isinstance(supervisor, str):
        supervisor = getattr(supervisor, "name", None)
        if supervisor is None:
            raise ActorConfigError("supervisor must be an arena actor's name or ArenaRef")
    mailboxes = []
    refs = {}
    try:
        for name, *_ in specs:
            ref = ArenaRef(name)
            if ref.is_alive():
                raise ActorError(f"actor {name!r} is already alive (pid {ref.owner_pid})")
            mailboxes.append(ArenaMailbox(name, size=arena_size, create=True))
            refs[name] = ref
        process = context.Process(target=_node_main, args=(specs, arena_size, supervisor),
                                  name=f"a0py-node-{next(iter(refs))}", daemon=True)
        process.start()
    except BaseException:
        for mailbox in mailboxes:
            mailbox.release()
        raise
    node = ProcessActors(process, refs, mailboxes)
    deadline = time.monotonic() + start_timeout
    try:
        for name, ref in refs.items():
            while True:
                if not process.is_alive():
                    raise ActorError(f"the node process for {name!r} exited with code "
                                     f"{process.exitcode} before its actors started")
                if ref.wait_alive(min(0.2, max(deadline - time.monotonic(), 0.0))):
                    break
                if time.monotonic() >= deadline:
                    raise ActorError(f"actor {name!r} did not start within {start_timeout}s")
    except BaseException:
        node.kill()
        for mailbox in mailboxes:
            mailbox.release()
        node._closed = True
        raise
    return node

