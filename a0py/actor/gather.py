"""Scatter-gather (seed "Reactive Programming Patterns: Scatter Gather").

A *gather* sends one request to every actor of a *recipient list* and collects their
replies into one :class:`GatherResult`. The pieces carry the seed's names:

* **correlation id**: every gather has a fresh ``uuid4`` hex id; requests carry it and
  replies must echo it (:meth:`Request.reply` does), so concurrent gathers never mix.
* **recipient list**: a static list of refs, or a callable computed at scatter time from
  the request (content-based routing: :meth:`Registrar.recipients`,
  :meth:`ContentRouter.recipients_for`).
* **registrar**: a registry of actors by topic that drops actors found dead. Liveness is
  the actor's own (:meth:`ActorRef.is_alive`): for an actor in another process it is the
  robust lock (:class:`a0py.Deadman`) its process holds on its mailbox for its life, which
  the kernel releases the instant the process exits or is killed.
* **aggregator**: the per-gather state kept by the gather service (one actor per
  :class:`~a0py.actor.ActorSystem`). It completes when every recipient answered, or when
  its scheduled timeout fires with recipients still missing after ``retries`` rounds that
  resend the request to the missing recipients only. A recipient seen dead is missing at
  once and never retried; when every recipient has answered or is dead the gather
  completes without waiting for the timeout.
* **death watch**: a running gather learns of a recipient's death at once, not at the
  next poll, through the service's :class:`~a0py.actor.watch.DeathWatch` (one watch per
  actor, shared by every running gather that waits for it; see that module). Refs it
  cannot follow, and arena actors past its cap on threads, are left to the
  ``liveness_interval`` poll.

Replies that arrive after completion (*late*) and second replies from one recipient
(*duplicates*) are ignored: each recipient counts once. A gather over an empty recipient
list completes at once with no replies; a gather nobody answers completes after its last
timeout with ``replies == {}`` and every recipient in ``missing``.

Timers and death notices are messages to the gather service, so all aggregator state is touched
by that one actor: no locks.
"""

import asyncio
import concurrent.futures
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from .arena import ArenaRef
from .errors import ActorConfigError, ActorNotFoundError, GatherError
from .ordered import _as_callable
from .ref import ActorRef
from .system import _check_delay
from .watch import DeathWatch

__all__ = [
    "ContentRouter", "Gather", "GatherResult", "Register", "Registrar", "Reply", "Request",
    "Unregister", "new_correlation_id", "scatter_gather", "start_gather",
]


def new_correlation_id():
    """A fresh correlation id: 32 hex digits of ``uuid4`` (random, not time-based)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Request:
    """What a recipient receives: the request ``body``, the gather's ``correlation_id``, the
    ``recipient`` name the gather knows it by, the ``attempt`` (0 first, then 1.. on
    retries), and ``reply_to``. Answer with :meth:`reply`."""

    correlation_id: str
    body: object
    reply_to: ActorRef
    recipient: str
    attempt: int = 0

    def reply(self, value=None):
        """Send ``value`` back to the gather as this recipient's answer. Errors are those of
        ``reply_to.send`` (a cross-process ref may raise
        :class:`~a0py.actor.MailboxFullError`)."""
        self.reply_to.send(Reply(self.correlation_id, self.recipient, value))


@dataclass(frozen=True)
class Reply:
    """A recipient's answer to the gather ``correlation_id``."""

    correlation_id: str
    recipient: str
    value: object = None


@dataclass
class GatherResult:
    """The outcome of a gather.

    ``replies``: recipient name -> value, in the order the answers arrived.
    ``missing``: names that never answered (dead ones included), in recipient-list order.
    ``dead``: the missing recipients that were seen dead (not retried, not waited for).
    ``attempts``: request rounds sent (1 + retries used). ``duplicates``: replies ignored
    because the recipient had already answered. ``timed_out``: the last timeout fired with
    live recipients still missing. ``value``: ``aggregate(replies)`` if an aggregate
    function was given. ``elapsed``: seconds from scatter to completion.
    """

    correlation_id: str
    replies: dict
    missing: list
    dead: list
    recipients: list
    attempts: int
    duplicates: int = 0
    timed_out: bool = False
    elapsed: float = 0.0
    value: object = None

    @property
    def complete(self):
        """True if every recipient answered."""
        return not self.missing


class Gather:
    """A running gather: a future of its :class:`GatherResult`, plus its progress."""

    def __init__(self, correlation_id, total=None):
        self.correlation_id = correlation_id
        self._future = concurrent.futures.Future()
        self.answered = 0
        self.total = total

    def done(self):
        """True once the gather completed (or failed)."""
        return self._future.done()

    def result(self, timeout=None):
        """Wait for and return the :class:`GatherResult`.

        Raises :class:`GatherError` if it did not complete within ``timeout`` seconds (the
        gather goes on) or if it failed (computing the recipient list raised; the cause is
        chained)."""
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise GatherError(
                f"gather {self.correlation_id} not complete after {timeout}s "
                f"({self.answered}/{self.total} answered)") from None

    async def result_async(self):
        """Await the :class:`GatherResult` from asyncio code (errors as :meth:`result`)."""
        return await asyncio.wrap_future(self._future)

    def add_done_callback(self, fn):
        """Call ``fn(gather)`` on completion (at once if already complete)."""
        self._future.add_done_callback(lambda _f: fn(self))

    def __repr__(self):
        state = "done" if self.done() else f"{self.answered}/{self.total}"
        return f"<Gather {self.correlation_id} {state}>"


# -- the gather service ------------------------------------------------------------------

@dataclass
class _Start:
    gather: Gather
    body: object
    recipients: object
    timeout: float
    retries: int
    liveness_interval: object
    aggregate: object
    on_progress: object
    on_complete: object
    send_timeout: float


@dataclass(frozen=True)
class _Deadline:
    correlation_id: str
    attempt: int


@dataclass(frozen=True)
class _LivenessTick:
    correlation_id: str


@dataclass(frozen=True)
class _RecipientDied:
    """From the death watch: the actor watched under ``key`` (known to gathers as ``name``)
    died; ``correlation_ids``: the gathers that were waiting for it."""

    key: object
    name: str
    correlation_ids: tuple


@dataclass
class _Aggregation:
    start: _Start
    recipients: "OrderedDict[str, ActorRef]"
    replies: dict = field(default_factory=dict)
    dead: set = field(default_factory=set)
    attempt: int = 0
    duplicates: int = 0
    started: float = field(default_factory=time.monotonic)
    deadline_timer: object = None
    liveness_timer: object = None
    watched: dict = field(default_factory=dict)   # name -> death-watch key

    def outstanding(self):
        return [n for n in self.recipients if n not in self.replies and n not in self.dead]


class _ReplyRef(ActorRef):
    """The reply-to of requests sent in-process: delivers straight to the gather service,
    and pickles as the service's arena inbox, so a recipient may forward the request to
    an actor in another process and the reply still comes back."""

    __slots__ = ("_service",)

    def __init__(self, service):
        self._service = service

    @property
    def name(self):
        return self._service.self_ref.name

    def send(self, message):
        self._service.self_ref.send(message)

    def __call__(self, message):
        self._service.self_ref.send(message)

    def is_alive(self):
        return self._service.self_ref.is_alive()

    def wait_dead(self, timeout=None):
        return self._service.self_ref.wait_dead(timeout)

    def __reduce__(self):
        return self._service.inbox().__reduce__()


def _is_remote(ref):
    return isinstance(ref, ArenaRef)


class _GatherService:
    """The behaviour of the gather service actor: every aggregator of one system."""

    def __init__(self, system):
        self.system = system
        self.self_ref = None
        self.inbox_ref = None  # arena-mailbox forwarder, for replies from other processes
        self.inbox_lock = threading.Lock()
        self.local_reply_ref = _ReplyRef(self)
        self.gathers = {}
        self.finished = deque(maxlen=10000)
        self.finished_set = set()
        self.late = 0
        self.unknown = 0
        self.send_errors = 0
        self.duplicates = 0
        self.deaths_seen = 0      # recipients the death watch reported dead mid-gather
        self.death_watch = DeathWatch(self._notify_death)

    def _notify_death(self, key, name, cids):
        self.self_ref.send(_RecipientDied(key, name, cids))

    def reply_to(self, ref):
        if not _is_remote(ref):
            return self.local_reply_ref
        return self.inbox()

    def inbox(self):
        """The arena-mailbox forwarder that replies from other processes go to (started on
        first need; any thread may ask)."""
        with self.inbox_lock:
            if self.inbox_ref is None:
                self.inbox_ref = self.system.spawn(self.self_ref, arena=True)
            return self.inbox_ref

    def handle(self, message):
        if isinstance(message, Reply):
            self._reply(message)
        elif isinstance(message, _Deadline):
            self._deadline(message)
        elif isinstance(message, _RecipientDied):
            self._died(message)
        elif isinstance(message, _LivenessTick):
            self._liveness(message.correlation_id)
        elif isinstance(message, _Start):
            self._start(message)
        else:
            self.unknown += 1

    def _start(self, start):
        gather = start.gather
        cid = gather.correlation_id
        if cid in self.gathers or cid in self.finished_set:
            gather._future.set_exception(
                ActorConfigError(f"correlation id {cid!r} is already in use"))
            return
        try:
            recipients = start.recipients
            if callable(recipients) and not isinstance(recipients, ActorRef):
                recipients = recipients(start.body)
            named = OrderedDict()
            for ref in recipients:
                if not isinstance(ref, ActorRef):
                    raise ActorConfigError(f"a recipient must be an ActorRef, got {ref!r}")
                named.setdefault(ref.name, ref)
        except Exception as exc:
            error = GatherError(f"computing the recipient list of gather {cid} failed: {exc!r}")
            error.__cause__ = exc
            gather._future.set_exception(error)
            return
        agg = _Aggregation(start, named)
        gather.total = len(named)
        self.gathers[cid] = agg
        for name, ref in named.items():
            if not ref.is_alive():
                agg.dead.add(name)
        self._send_round(agg)
        if not agg.outstanding():
            self._complete(agg, timed_out=False)
            return
        agg.deadline_timer = self.system.send_after(start.timeout, self.self_ref,
                                                    _Deadline(cid, agg.attempt))
        if start.liveness_interval:
            agg.liveness_timer = self.system.send_after(start.liveness_interval, self.self_ref,
                                                        _LivenessTick(cid))
        watch = self.death_watch.watch
        for name in agg.outstanding():
            key = watch(agg.recipients[name], cid)
            if key is not None:
                agg.watched[name] = key

    def _died(self, message):
        name = message.name
        for cid in message.correlation_ids:
            agg = self.gathers.get(cid)
            if agg is None or agg.watched.get(name) != message.key:
                continue
            del agg.watched[name]
            if name in agg.replies or name in agg.dead:
                continue
            agg.dead.add(name)
            self.deaths_seen += 1
            if not agg.outstanding():
                self._complete(agg, timed_out=False)

    def _send_round(self, agg):
        start = agg.start
        cid = start.gather.correlation_id
        for name in agg.outstanding():
            ref = agg.recipients[name]
            request = Request(cid, start.body, self.reply_to(ref), name, agg.attempt)
            try:
                if _is_remote(ref):
                    ref.send(request, timeout=start.send_timeout)
                else:
                    ref.send(request)
            except ActorNotFoundError:
                agg.dead.add(name)
            except Exception:
                self.send_errors += 1

    def _reply(self, reply):
        agg = self.gathers.get(reply.correlation_id)
        if agg is None:
            if reply.correlation_id in self.finished_set:
                self.late += 1
            else:
                self.unknown += 1
            return
        name = reply.recipient
        if name not in agg.recipients:
            self.unknown += 1
            return
        if name in agg.replies:
            agg.duplicates += 1
            self.duplicates += 1
            return
        agg.replies[name] = reply.value
        agg.dead.discard(name)  # it answered before it died: its answer counts
        key = agg.watched.pop(name, None)
        if key is not None:
            self.death_watch.unwatch(key, reply.correlation_id)
        gather = agg.start.gather
        gather.answered = len(agg.replies)
        self._progress(agg)
        if not agg.outstanding():
            self._complete(agg, timed_out=False)

    def _progress(self, agg):
        on_progress = agg.start.on_progress
        if on_progress is not None:
            try:
                on_progress(len(agg.replies), len(agg.recipients), agg.attempt)
            except Exception as exc:
                self.system._report_scheduler(_Note(on_progress, "progress"), exc)

    def _deadline(self, deadline):
        agg = self.gathers.get(deadline.correlation_id)
        if agg is None or deadline.attempt != agg.attempt:
            return  # a stale timer of a finished gather or an earlier round
        self._check_liveness(agg)
        if agg.outstanding() and agg.attempt < agg.start.retries:
            agg.attempt += 1
            self._send_round(agg)
            self._progress(agg)
            if agg.outstanding():
                agg.deadline_timer = self.system.send_after(
                    agg.start.timeout, self.self_ref, _Deadline(deadline.correlation_id, agg.attempt))
                return
        self._complete(agg, timed_out=bool(agg.outstanding()))

    def _check_liveness(self, agg):
        for name in agg.outstanding():
            try:
                alive = agg.recipients[name].is_alive()
            except Exception:
                alive = True
            if not alive:
                agg.dead.add(name)

    def _liveness(self, cid):
        agg = self.gathers.get(cid)
        if agg is None:
            return
        self._check_liveness(agg)
        if not agg.outstanding():
            self._complete(agg, timed_out=False)
            return
        agg.liveness_timer = self.system.send_after(agg.start.liveness_interval, self.self_ref,
                                                    _LivenessTick(cid))

    def _complete(self, agg, timed_out):
        start = agg.start
        gather = start.gather
        cid = gather.correlation_id
        for timer in (agg.deadline_timer, agg.liveness_timer):
            if timer is not None:
                timer.cancel()
        for key in agg.watched.values():
            self.death_watch.unwatch(key, cid)
        agg.watched.clear()
        del self.gathers[cid]
        if len(self.finished) == self.finished.maxlen:
            self.finished_set.discard(self.finished[0])
        self.finished.append(cid)
        self.finished_set.add(cid)
        missing = [n for n in agg.recipients if n not in agg.replies]
        result = GatherResult(
            correlation_id=cid, replies=dict(agg.replies), missing=missing,
            dead=[n for n in missing if n in agg.dead], recipients=list(agg.recipients),
            attempts=agg.attempt + 1 if agg.recipients else 0, duplicates=agg.duplicates,
            timed_out=timed_out, elapsed=time.monotonic() - agg.started)
        if start.aggregate is not None:
            try:
                result.value = start.aggregate(result.replies)
            except Exception as exc:
                error = GatherError(f"the aggregate function of gather {cid} raised {exc!r}")
                error.__cause__ = exc
                gather._future.set_exception(error)
                return
        gather._future.set_result(result)
        if start.on_complete is not None:
            try:
                start.on_complete(result)
            except Exception as exc:
                self.system._report_scheduler(_Note(start.on_complete, result), exc)

    def close(self):
        self.death_watch.close()
        for agg in list(self.gathers.values()):
            if not agg.start.gather.done():
                agg.start.gather._future.set_exception(
                    GatherError(f"gather {agg.start.gather.correlation_id}: the actor system shut down"))
        self.gathers.clear()


@dataclass
class _Note:
    target: object
    message: object


_service_lock = threading.Lock()


def _service(system):
    with _service_lock:
        service = system._services.get("gather")
        if service is None:
            service = _GatherService(system)
            service.self_ref = system.spawn(service, name=f"gather-service-{id(system):x}")
            system._services["gather"] = service
    return service


def start_gather(system, request, recipients, *, timeout=1.0, retries=0, aggregate=None,
                 on_progress=None, on_complete=None, liveness_interval=1.0, send_timeout=0.5,
                 correlation_id=None):
    """Scatter ``request`` to ``recipients`` and return a :class:`Gather` at once.

    ``recipients``: an iterable of :class:`ActorRef` (deduplicated by name), or a callable
    ``recipients(request) -> iterable`` evaluated at scatter time. Each live recipient gets a
    :class:`Request`; it answers with ``request.reply(value)``. After ``timeout`` seconds
    the request is sent again to the live recipients still missing, up to ``retries``
    times; after the last timeout the gather completes with what it has. A recipient that
    dies while the gather waits for it is missing at once and not waited for: arena actors
    are watched on their robust lock, actors of this process by their end (see the module
    docstring). ``liveness_interval`` (seconds; None: never) is the fallback poll of the
    missing recipients' liveness, for refs that cannot be watched (other
    :class:`ActorRef` kinds, or past the cap on watcher threads). ``aggregate(replies)`` fills
    :attr:`GatherResult.value`; ``on_progress(answered, total, attempt)`` runs on each new
    answer and retry; ``on_complete(result)`` (a ref or callable) gets the result. Sends to
    a cross-process mailbox wait at most ``send_timeout`` seconds for room. Callbacks run on
    the gather service's thread and must not block.

    Raises :class:`ActorConfigError` for a bad timeout, retries, interval or callback, or a
    static recipient list holding something that is not an :class:`ActorRef`, and
    :class:`~a0py.actor.ActorStoppedError` after shutdown. A recipient-list function that
    raises or returns a non-ref, and an aggregate function that raises, surface as
    :class:`GatherError` from :meth:`Gather.result`.
    """
    timeout = _check_delay(timeout, "timeout")
    if timeout <= 0:
        raise ActorConfigError(f"timeout must be > 0 seconds, got {timeout!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ActorConfigError(f"retries must be an int >= 0, got {retries!r}")
    if liveness_interval is not None:
        liveness_interval = _check_delay(liveness_interval, "liveness_interval")
        if liveness_interval <= 0:
            raise ActorConfigError(f"liveness_interval must be > 0 or None, got {liveness_interval!r}")
    send_timeout = _check_delay(send_timeout, "send_timeout")
    for name, fn in (("aggregate", aggregate), ("on_progress", on_progress),
                     ("on_complete", on_complete)):
        if fn is not None and not callable(fn):
            raise ActorConfigError(f"{name} must be callable, got {fn!r}")
    if not callable(recipients):
        try:
            recipients = list(recipients)
        except TypeError:
            raise ActorConfigError(
                f"recipients must be an iterable of refs or a callable, got {recipients!r}") from None
        for ref in recipients:
            if not isinstance(ref, ActorRef):
                raise ActorConfigError(f"a recipient must be an ActorRef, got {ref!r}")
    if correlation_id is None:
        correlation_id = new_correlation_id()
    gather = Gather(correlation_id)
    service = _service(system)
    service.self_ref.send(_Start(gather, request, recipients, timeout, retries, liveness_interval,
                                 aggregate, on_progress, on_complete, send_timeout))
    return gather


def scatter_gather(system, request, recipients, *, timeout=1.0, retries=0, aggregate=None,
                   on_progress=None, on_complete=None, liveness_interval=1.0, send_timeout=0.5,
                   correlation_id=None):
    """Scatter ``request`` to ``recipients``, wait, and return the :class:`GatherResult`.

    The arguments are those of :func:`start_gather`. It returns after at most about
    ``timeout * (retries + 1)`` seconds (plus the send timeouts of full mailboxes). Do not
    call it from an asyncio actor (use ``await start_gather(...).result_async()``).

    Raises what :func:`start_gather` and :meth:`Gather.result` raise.
    """
    return start_gather(
        system, request, recipients, timeout=timeout, retries=retries, aggregate=aggregate,
        on_progress=on_progress, on_complete=on_complete, liveness_interval=liveness_interval,
        send_timeout=send_timeout, correlation_id=correlation_id).result()


# -- registration and content-based routing ----------------------------------------------

@dataclass(frozen=True)
class Register:
    """Message to a :class:`Registrar` actor: register ``ref`` under ``topic``."""

    topic: object
    ref: ActorRef


@dataclass(frozen=True)
class Unregister:
    """Message to a :class:`Registrar` actor: remove ``ref`` from ``topic`` (all topics if
    ``topic`` is None)."""

    topic: object
    ref: ActorRef


class Registrar:
    """A registry of actors by topic that drops the actors it finds dead.

    Every :meth:`lookup` checks the liveness of what it returns, so an actor whose process
    exited or was killed is never handed out (for cross-process actors the check is the
    robust lock held by the actor's process: the kernel releases it at once).
    :meth:`watch` also starts one thread per registered actor that blocks until the actor
    dies and then drops it and calls ``on_drop(topic, ref)`` for each of its topics.
    Thread-safe; also usable as an actor behaviour taking :class:`Register` and
    :class:`Unregister` messages.

    Raises :class:`ActorConfigError` for a bad ``on_drop``.
    """

    def __init__(self, *, on_drop=None):
        if on_drop is not None and not callable(on_drop):
            raise ActorConfigError(f"on_drop must be callable, got {on_drop!r}")
        self.on_drop = on_drop
        self._topics = {}        # topic -> OrderedDict name -> ref
        self._lock = threading.RLock()
        self._watching = False
        self._watchers = {}      # name -> thread
        self._closed = threading.Event()
        self.dropped = 0

    def register(self, topic, ref):
        """Register ``ref`` under ``topic``. Returns False (and registers nothing) if the
        actor is already dead. Raises :class:`ActorConfigError` if ``ref`` is not an
        :class:`ActorRef` or ``topic`` is not hashable."""
        if not isinstance(ref, ActorRef):
            raise ActorConfigError(f"Registrar.register needs an ActorRef, got {ref!r}")
        try:
            hash(topic)
        except TypeError:
            raise ActorConfigError(f"a topic must be hashable, got {topic!r}") from None
        if not ref.is_alive():
            return False
        with self._lock:
            self._topics.setdefault(topic, OrderedDict())[ref.name] = ref
            if self._watching:
                self._watch_one(ref)
        return True

    def unregister(self, topic, ref):
        """Remove ``ref`` from ``topic`` (from every topic if ``topic`` is None). Returns
        True if it was registered."""
        found = False
        with self._lock:
            topics = list(self._topics) if topic is None else [topic]
            for t in topics:
                members = self._topics.get(t)
                if members and members.pop(ref.name, None) is not None:
                    found = True
                    if not members:
                        del self._topics[t]
        return found

    def handle(self, message):
        """Actor behaviour: apply a :class:`Register` or :class:`Unregister` message.
        Raises :class:`ActorConfigError` for any other message."""
        if isinstance(message, Register):
            self.register(message.topic, message.ref)
        elif isinstance(message, Unregister):
            self.unregister(message.topic, message.ref)
        else:
            raise ActorConfigError(f"a Registrar takes Register/Unregister messages, got {message!r}")

    def _drop(self, name, only_topic=None):
        dropped = []
        with self._lock:
            for topic in list(self._topics):
                if only_topic is not None and topic != only_topic:
                    continue
                members = self._topics[topic]
                ref = members.pop(name, None)
                if ref is not None:
                    dropped.append((topic, ref))
                    if not members:
                        del self._topics[topic]
            self.dropped += len(dropped)
            # Under the (reentrant) lock: once a lookup has returned, on_drop has been told
            # of every drop, whichever thread found the actor dead.
            if self.on_drop is not None:
                for topic, ref in dropped:
                    self.on_drop(topic, ref)
        return dropped

    def lookup(self, topic):
        """The live actors registered under ``topic``, in registration order; the dead ones
        found are dropped (and reported to ``on_drop``)."""
        with self._lock:
            members = list(self._topics.get(topic, {}).values())
        live = []
        for ref in members:
            if ref.is_alive():
                live.append(ref)
            else:
                self._drop(ref.name)
        return live

    def topics(self):
        """The topics with at least one registered actor (dead ones not yet dropped
        included; :meth:`sweep` first for an exact answer)."""
        with self._lock:
            return list(self._topics)

    def sweep(self):
        """Drop every registered actor found dead; return the (topic, ref) pairs dropped."""
        with self._lock:
            refs = {ref.name: ref for members in self._topics.values() for ref in members.values()}
        dropped = []
        for name, ref in refs.items():
            if not ref.is_alive():
                dropped.extend(self._drop(name))
        return dropped

    def recipients(self, topic_of):
        """A recipient-list function for :func:`start_gather`: ``request -> lookup(topic_of(
        request))``. ``topic_of`` may also be a plain topic (used for every request)."""
        if callable(topic_of):
            return lambda request: self.lookup(topic_of(request))
        return lambda request: self.lookup(topic_of)

    def watch(self):
        """Start watching: each registered actor gets a thread that waits for its death
        (for cross-process actors, on its robust lock) and then drops it at once.
        Idempotent; :meth:`close` stops the threads."""
        with self._lock:
            self._watching = True
            for members in self._topics.values():
                for ref in members.values():
                    self._watch_one(ref)

    def _watch_one(self, ref):
        if ref.name in self._watchers:
            return

        def watcher():
            try:
                while not self._closed.is_set():
                    if ref.wait_dead(0.25):
                        self._drop(ref.name)
                        return
            finally:
                with self._lock:
                    self._watchers.pop(ref.name, None)

        thread = threading.Thread(target=watcher, name=f"a0py-registrar-{ref.name}", daemon=True)
        self._watchers[ref.name] = thread
        thread.start()

    def close(self):
        """Stop the watcher threads (registrations are kept)."""
        self._closed.set()
        with self._lock:
            self._watching = False
            threads = list(self._watchers.values())
        for thread in threads:
            thread.join(1)


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
