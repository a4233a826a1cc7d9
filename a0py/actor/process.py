"""Actors in other processes: a child process that runs arena actors, addressable by name.

:func:`spawn_process` starts one child process (a *node*) running one or more actors, each
with its own arena mailbox ``a0py-actor:<name>``. The parent creates the arenas first, so
messages can be sent at once, then waits until every actor's thread holds its liveness
lock. Any process can then reach an actor with ``ArenaRef(name)``, and sees it dead the
instant it stops or its process exits or is killed.

With the ``spawn`` and ``forkserver`` start methods the child imports the parent's main
module again (as ``__mp_main__``), so a call at the top level of that module, outside
``if __name__ == "__main__":``, would run again in the child and fail during its start.
:func:`spawn_process` finds such a call before it starts anything (it reads the main
module's source) and raises :class:`ActorConfigError` saying so; a child that gets there
anyway (no source to read) raises the same error instead of multiprocessing's bootstrap
error.
"""

import ast
import linecache
import multiprocessing
import os
import signal
import sys
import time

from .arena import DEFAULT_ARENA_SIZE, ArenaMailbox, ArenaRef, close_cached_arenas
from .errors import ActorConfigError, ActorError
from .ref import STOP
from .system import ActorSystem

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


_GUARD_ADVICE = ('put the code that starts processes under `if __name__ == "__main__":` '
                 '(see "spawn_process and the main module" in docs/actors.md), or pass '
                 'start_method="fork"')


def _refuse_unguarded_main(start_method):
    """Raise :class:`ActorConfigError` if the child that ``start_method`` starts would run
    this call again: when this process is itself a child importing its parent's main
    module, or (not with ``fork``) when the call comes from the main module's top-level
    code outside an ``if __name__ == "__main__":`` block."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise ActorConfigError(
            "spawn_process() was called while this process was starting as a child of "
            "another: the main module it imports again starts processes at import time; "
            + _GUARD_ADVICE)
    if start_method == "fork":
        return
    where = _unguarded_main_call()
    if where is not None:
        filename, line = where
        raise ActorConfigError(
            f"spawn_process() runs under top-level code of the main module ({filename}, "
            f"line {line}) that is outside an `if __name__ == \"__main__\":` block; with "
            f"start_method={start_method!r} the child imports the main module again and "
            f"would run this call too. " + _GUARD_ADVICE[0].upper() + _GUARD_ADVICE[1:])


def _unguarded_main_call():
    """``(filename, line)`` of the main module's top-level statement that this call runs
    under, if a spawned child would import that module again and the statement is not
    under a test of ``__name__``; None if not, or if it cannot be told (no source)."""
    main = sys.modules.get("__main__")
    if main is None:
        return None
    # Which main modules a spawned child imports again: multiprocessing.spawn's rules.
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        if spec.name == "__main__" or spec.name.endswith(".__main__"):
            return None
    else:
        path = getattr(main, "__file__", None)
        if path is None or os.path.splitext(os.path.basename(path))[0] == "ipython":
            return None     # interactive, -c, or IPython: nothing is imported again
    main_globals = vars(main)
    frame = sys._getframe()
    while frame is not None and not (frame.f_globals is main_globals
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None         # not under the main module's top-level code
    filename, line = frame.f_code.co_filename, frame.f_lineno
    try:
        tree = ast.parse("".join(linecache.getlines(filename, main_globals)))
    except (SyntaxError, ValueError):
        return None
    if not tree.body:
        return None
    for node in tree.body:
        if (isinstance(node, ast.If) and node.lineno <= line <= node.end_lineno
                and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test))):
            return None
    return filename, line


def spawn_process(actors, *, start_method="spawn", arena_size=DEFAULT_ARENA_SIZE,
                  start_timeout=30.0, supervisor=None):
    """Start a process running the given actors; return a :class:`ProcessActors`.

    ``actors``: a dict ``name -> factory`` or ``name -> (factory, args[, kwargs])``; the
    child calls ``factory(*args, **kwargs)`` to make each behaviour, so with the ``spawn``
    start method (the default; ``fork`` and ``forkserver`` work too) factories and
    arguments must pickle (module-level functions or classes). Each actor gets the arena
    mailbox ``a0py-actor:<name>`` of ``arena_size`` bytes. ``supervisor``: the name of an
    arena actor that receives the node's :class:`Failure` messages (by default the node
    logs them).

    With ``spawn`` and ``forkserver`` the child imports the main module again: call
    this from code under ``if __name__ == "__main__":`` (or from functions called there),
    never from the main module's top level.

    Raises :class:`ActorConfigError` (bad spec, name or start method; a call from the main
    module's top level outside ``if __name__ == "__main__":`` with ``spawn`` or
    ``forkserver``), and :class:`ActorError` if the node died or did not bring every actor
    up within ``start_timeout`` seconds (it is then killed and the mailboxes unlinked), or
    an actor of that name is already alive elsewhere.
    """
    specs = _normalise(actors)
    try:
        context = multiprocessing.get_context(start_method)
    except ValueError:
        raise ActorConfigError(f"unknown start method {start_method!r}") from None
    _refuse_unguarded_main(context.get_start_method())
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
                                     f"{process.exitcode} before its actors started (its "
                                     f"error output, on stderr, says why)")
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

