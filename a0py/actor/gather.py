"""Scatter-gather (seed "Reactive Programming Patterns: Scatter Gather").

A *gather* sends one request to every actor of a *recipient list* and collects their
replies into one :class:`GatherResult`. The pieces carry the seed's names:

* **correlation id**: every gather has a fresh ``uuid4`` hex id; requests carry it and
  replies must echo it (:meth:`Request.reply` does), so concurrent gathers never mix.
* **recipient list**: a static list of refs, or a callable computed at scatter time from
  the request (:meth:`Registrar.recipients <a0py.actor.registry.Registrar.recipients>`
  in :mod:`a0py.actor.registry`, content-based routing with
  :meth:`ContentRouter.recipients_for <a0py.actor.router.ContentRouter.recipients_for>`).
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
from .ref import ActorRef
from .scheduler import _check_delay
from .watch import DeathWatch

__all__ = [
    "Gather", "GatherResult", "Reply", "Request", "new_correlation_id", "scatter_gather",
    "start_gather",
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
                self.system._report_scheduler(_GatherCallback(on_progress, "progress"), exc)

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
                self.system._report_scheduler(_GatherCallback(start.on_complete, result), exc)

    def close(self):
        self.death_watch.close()
        for agg in list(self.gathers.values()):
            if not agg.start.gather.done():
                agg.start.gather._future.set_exception(
                    GatherError(f"gather {agg.start.gather.correlation_id}: the actor system shut down"))
        self.gathers.clear()


@dataclass
class _GatherCallback:
    """A gather's user callback (``on_progress``, ``on_complete``) and what it was given,
    reported to the system's supervisor when it raises, in the shape of a scheduler
    :class:`~a0py.actor.scheduler.Timer` (``target``, ``message``)."""

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
