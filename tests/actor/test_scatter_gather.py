"""Scatter-gather: correlation ids, recipient lists, retries of the missing only, partial
results, concurrent gathers, late and duplicate replies, dead recipients, the registrar."""

import os
import signal
import threading
import time
import uuid
from collections import Counter

import pytest

from a0py.actor import (
    ActorConfigError,
    ActorSystem,
    ContentRouter,
    GatherError,
    Register,
    Registrar,
    Request,
    new_correlation_id,
    scatter_gather,
    start_gather,
)


def unique(prefix="t"):
    return f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def answering(value, log=None):
    def behaviour(request):
        if log is not None:
            log.append((request.correlation_id, request.attempt))
        request.reply(value)
    return behaviour


def silent(log=None):
    def behaviour(request):
        if log is not None:
            log.append((request.correlation_id, request.attempt))
    return behaviour


def test_all_recipients_answer_gives_one_complete_result(system):
    refs = [system.spawn(answering(i), name=f"r{i}") for i in range(5)]
    result = scatter_gather(system, "report", refs, timeout=5, retries=2,
                            aggregate=lambda replies: sum(replies.values()))
    assert result.complete and not result.timed_out
    assert result.replies == {f"r{i}": i for i in range(5)}
    assert result.missing == [] and result.dead == []
    assert result.attempts == 1
    assert result.value == 10
    assert result.recipients == [f"r{i}" for i in range(5)]


def test_timeout_retries_only_the_missing_then_gives_a_partial_result_naming_them(system):
    logs = {name: [] for name in ("fast", "second-try", "never")}

    def second_try(request):
        logs["second-try"].append(request.attempt)
        if request.attempt >= 1:
            request.reply("late but there")

    fast = system.spawn(answering("quick", logs["fast"]), name="fast")
    slow = system.spawn(second_try, name="second-try")
    never = system.spawn(silent(logs["never"]), name="never")
    result = scatter_gather(system, "q", [fast, slow, never], timeout=0.3, retries=2)
    assert result.replies == {"fast": "quick", "second-try": "late but there"}
    assert result.missing == ["never"] and result.dead == []
    assert not result.complete and result.timed_out
    assert result.attempts == 3
    assert len(logs["fast"]) == 1                    # answered: never asked again
    assert logs["second-try"] == [0, 1]              # asked again once, then answered
    assert [a for _cid, a in logs["never"]] == [0, 1, 2]


def test_nobody_answers_gives_the_documented_empty_result(system):
    refs = [system.spawn(silent()) for _ in range(3)]
    result = scatter_gather(system, "q", refs, timeout=0.03, retries=1, aggregate=len)
    assert result.replies == {}
    assert result.missing == [r.name for r in refs]
    assert result.timed_out and not result.complete and result.value == 0
    assert result.attempts == 2


def test_an_empty_recipient_list_completes_at_once(system):
    result = scatter_gather(system, "q", [], timeout=60)
    assert result.complete and result.replies == {} and result.attempts == 0


def test_interleaved_gathers_stay_separate(system):
    def delayed_echo(request):
        # Answer gather "A" late, "B" early: the replies interleave.
        delay = 0.03 if request.body == "A" else 0.0
        current_system = system
        current_system.send_after(delay, request.reply_to,
                                  _reply(request, f"{request.body}:{request.recipient}"))

    refs = [system.spawn(delayed_echo, name=f"e{i}") for i in range(4)]
    gather_a = start_gather(system, "A", refs, timeout=5)
    gather_b = start_gather(system, "B", refs, timeout=5)
    assert gather_a.correlation_id != gather_b.correlation_id
    result_b = gather_b.result(5)
    result_a = gather_a.result(5)
    assert result_a.replies == {f"e{i}": f"A:e{i}" for i in range(4)}
    assert result_b.replies == {f"e{i}": f"B:e{i}" for i in range(4)}


def _reply(request, value):
    from a0py.actor import Reply

    return Reply(request.correlation_id, request.recipient, value)


def test_duplicate_and_late_replies_are_ignored_and_counted_once(system):
    def twice(request):
        request.reply("one")
        request.reply("two")           # duplicate: ignored

    def too_late(request):
        system.send_after(0.5, request.reply_to, _reply(request, "too late"))

    dup = system.spawn(twice, name="dup")
    late = system.spawn(too_late, name="late")
    result = scatter_gather(system, "q", [dup, late], timeout=0.3)
    assert result.replies == {"dup": "one"}
    assert result.duplicates == 1
    assert result.missing == ["late"]
    from a0py.actor.gather import _service

    service = _service(system)
    deadline = time.monotonic() + 5
    while service.late == 0 and time.monotonic() < deadline:   # arrives after completion
        time.sleep(0.01)
    assert service.late == 1
    assert result.replies == {"dup": "one"} and result.missing == ["late"]


def test_progress_is_reported_and_callbacks_get_the_result(system):
    progress = []
    done = []
    refs = [system.spawn(answering(i)) for i in range(3)]
    gather = start_gather(system, "q", refs, timeout=5,
                          on_progress=lambda answered, total, attempt: progress.append((answered, total)),
                          on_complete=done.append)
    result = gather.result(5)
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert done == [result] and gather.done()


def test_callbacks_that_raise_are_reported_to_the_supervisor_and_the_gather_still_completes(system):
    def on_progress(answered, total, attempt):
        raise KeyError("progress broke")

    def on_complete(result):
        raise ValueError("complete broke")

    refs = [system.spawn(answering(i)) for i in range(2)]
    gather = start_gather(system, "q", refs, timeout=5, on_progress=on_progress,
                          on_complete=on_complete)
    result = gather.result(5)
    assert result.complete and result.replies == {refs[0].name: 0, refs[1].name: 1}
    deadline = time.monotonic() + 5
    while len(system.failures) < 3 and time.monotonic() < deadline:  # on_complete runs after
        time.sleep(0.01)
    failures = list(system.failures)
    assert [type(f.error) for f in failures] == [KeyError, KeyError, ValueError]
    assert {f.actor for f in failures} == {"<scheduler>"}
    assert [f.message for f in failures] == ["progress", "progress", result]


def test_a_dead_local_recipient_is_missing_at_once_and_not_retried(system):
    log = []
    alive = system.spawn(answering("ok"))
    dead = system.spawn(silent(log))
    system.stop(dead)
    result = scatter_gather(system, "q", [alive, dead], timeout=30, retries=5)
    assert result.replies == {alive.name: "ok"}
    assert result.missing == [dead.name] and result.dead == [dead.name]
    assert not result.timed_out and log == []


def test_recipients_computed_at_scatter_time_from_the_registrar(system):
    registrar = Registrar()
    reg = system.spawn(registrar)
    reg.send(Register("fuel", system.spawn(answering(10), name="v1")))
    reg.send(Register("fuel", system.spawn(answering(20), name="v2")))
    reg.send(Register("trips", system.spawn(answering(99), name="v3")))
    recipients = registrar.recipients(lambda request: request["topic"])
    deadline = time.monotonic() + 5
    while len(registrar.lookup("fuel")) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    first = scatter_gather(system, {"topic": "fuel"}, recipients, timeout=5)
    assert first.replies == {"v1": 10, "v2": 20}
    registrar.register("fuel", system.spawn(answering(30), name="v4"))
    second = scatter_gather(system, {"topic": "fuel"}, recipients, timeout=5)
    assert second.replies == {"v1": 10, "v2": 20, "v4": 30}


def test_content_based_routing(system):
    got = {"big": [], "small": [], "other": []}
    big = system.spawn(got["big"].append)
    small = system.spawn(got["small"].append)
    other = system.spawn(got["other"].append)
    router = system.spawn(ContentRouter([(lambda m: m > 100, big), (lambda m: 0 <= m <= 100, small),
                                         (lambda m: m == 1000, small)], default=other))
    for m in [5, 500, -3, 7, 1000]:
        router.send(m)
    deadline = time.monotonic() + 5
    while (len(got["big"]) < 2 or len(got["small"]) < 3) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert got["big"] == [500, 1000]
    assert got["small"] == [5, 7, 1000]   # once, though two routes accept 1000
    assert got["other"] == [-3]           # no route: the default


def test_a_failing_recipient_list_surfaces_as_a_gather_error(system):
    def broken(_request):
        raise LookupError("no such topic")

    gather = start_gather(system, "q", broken, timeout=1)
    with pytest.raises(GatherError, match="recipient list"):
        gather.result(5)


def test_bad_arguments_are_config_errors(system):
    with pytest.raises(ActorConfigError):
        start_gather(system, "q", [], timeout=0)
    with pytest.raises(ActorConfigError):
        start_gather(system, "q", [], retries=-1)
    with pytest.raises(ActorConfigError):
        start_gather(system, "q", 42)
    with pytest.raises(ActorConfigError, match="ActorRef"):
        start_gather(system, "q", ["not a ref"])
    with pytest.raises(GatherError):
        start_gather(system, "q", lambda request: ["not a ref"]).result(5)


def test_correlation_ids_are_unique_random_uuids():
    ids = [new_correlation_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 4 for i in ids[:100])


def test_gathers_from_many_threads_never_mix(system):
    refs = [system.spawn(lambda r: r.reply((r.body, r.recipient)), name=f"m{i}") for i in range(5)]
    results = {}

    def run(k):
        results[k] = scatter_gather(system, k, refs, timeout=5)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, result in results.items():
        assert result.replies == {f"m{i}": (k, f"m{i}") for i in range(5)}


# -- across processes ---------------------------------------------------------------------

class Vehicle:
    """Child-process recipient: answers after ``delay`` seconds (blocking its actor)."""

    def __init__(self, value, delay=0.0):
        self.value = value
        self.delay = delay
        self.asked = Counter()

    def __call__(self, request):
        assert isinstance(request, Request)
        self.asked[request.correlation_id] += 1
        if self.delay:
            time.sleep(self.delay)
        request.reply((self.value, os.getpid(), self.asked[request.correlation_id]))


@pytest.mark.slow
def test_cross_process_gather_with_a_recipient_killed_mid_gather(system):
    from a0py.actor import spawn_process

    tag = unique()
    quick = {f"{tag}-q{i}": (Vehicle, (i,)) for i in range(3)}
    slow = {f"{tag}-s{i}": (Vehicle, (100 + i, 30.0)) for i in range(2)}
    with spawn_process(quick) as quick_node, spawn_process(slow) as slow_node:
        refs = list(quick_node.refs.values()) + list(slow_node.refs.values())
        first = scatter_gather(system, "warm-up", list(quick_node.refs.values()), timeout=10)
        assert sorted(v[0] for v in first.replies.values()) == [0, 1, 2]
        assert {v[1] for v in first.replies.values()} == {quick_node.pid}
        # No liveness poll at all: only the death watch on the robust locks can see them.
        gather = start_gather(system, "report", refs, timeout=10, retries=3,
                              liveness_interval=None)
        # the slow ones are now busy answering (a child taking its request leaves no sign
        # until its next wait: a while for the requests to be taken)
        time.sleep(0.2)
        killed = time.monotonic()
        os.kill(slow_node.pid, signal.SIGKILL)
        result = gather.result(10)
        # A liveness bound, not a benchmark: seen at once, not after the 10 s timeout.
        assert time.monotonic() - killed < 2.0
        assert set(result.replies) == set(quick)
        assert sorted(result.missing) == sorted(slow) == sorted(result.dead)
        assert not result.timed_out and result.attempts == 1


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_a_local_recipient_stopped_mid_gather_is_seen_dead_at_once(system):
    from a0py.actor.gather import _service

    log = []
    alive = system.spawn(answering("ok"))
    doomed = system.spawn(silent(log))
    gather = start_gather(system, "q", [alive, doomed], timeout=10, retries=2,
                          liveness_interval=None)   # no poll: the actor's end tells
    assert wait_until(lambda: log)
    stopped = time.monotonic()
    system.stop(doomed)
    result = gather.result(10)
    assert time.monotonic() - stopped < 2.0
    assert result.replies == {alive.name: "ok"} and result.dead == [doomed.name]
    assert not result.timed_out and len(log) == 1
    assert _service(system).deaths_seen == 1
    assert doomed._actor._end_callbacks == {}       # the watch was taken down
    quiet = system.spawn(silent())
    system.stop(quiet)
    done = scatter_gather(system, "q", [alive], timeout=5)   # unaffected afterwards
    assert done.complete


@pytest.mark.slow
def test_concurrent_gathers_share_the_death_watch_and_stay_independent(system):
    from a0py.actor import spawn_process
    from a0py.actor.gather import _service

    tag = unique()
    doomed = {f"{tag}-d{i}": (Vehicle, (i, 30.0)) for i in range(3)}
    steady = {f"{tag}-s{i}": (Vehicle, (10 + i, 0.5)) for i in range(2)}
    with spawn_process(doomed, start_method="fork") as doomed_node, \
            spawn_process(steady, start_method="fork") as steady_node:
        d_refs = list(doomed_node.refs.values())
        s_refs = list(steady_node.refs.values())
        service = _service(system)
        mixed = start_gather(system, "mixed", d_refs + s_refs, timeout=10, liveness_interval=None)
        only_doomed = start_gather(system, "doomed", d_refs, timeout=10, liveness_interval=None)
        only_steady = start_gather(system, "steady", s_refs, timeout=10, liveness_interval=None)
        other = start_gather(system, "doomed[:1]", d_refs[:1], timeout=10, liveness_interval=None)
        # One watcher per remote actor, however many gathers wait for it.
        assert wait_until(lambda: service.death_watch.threads == len(doomed) + len(steady))
        time.sleep(0.1)  # the requests taken (no sign of that: see the test above)
        killed = time.monotonic()
        os.kill(doomed_node.pid, signal.SIGKILL)
        r_doomed = only_doomed.result(10)
        r_other = other.result(10)
        assert time.monotonic() - killed < 2.0
        assert sorted(r_doomed.dead) == sorted(doomed) and r_doomed.replies == {}
        assert r_other.dead == [d_refs[0].name] and not r_other.timed_out
        r_mixed = mixed.result(10)
        r_steady = only_steady.result(10)
        # The steady ones are slow (0.5 s each, one after another) but alive: waited for.
        assert sorted(r_mixed.dead) == sorted(doomed)
        assert set(r_mixed.replies) == set(steady)
        assert r_mixed.missing == [r.name for r in d_refs] and not r_mixed.timed_out
        assert set(r_steady.replies) == set(steady) and r_steady.dead == [] and r_steady.complete
        assert time.monotonic() - killed < 5.0


@pytest.mark.slow
def test_many_gathers_leave_no_watcher_threads_behind(system):
    from a0py.actor import spawn_process
    from a0py.actor.gather import _service
    from a0py.actor.watch import WATCH_SLICE

    tag = unique()
    with spawn_process({f"{tag}-v{i}": (Vehicle, (i,)) for i in range(6)},
                       start_method="fork") as node:
        refs = list(node.refs.values())
        service = _service(system)
        assert scatter_gather(system, "warm-up", refs, timeout=10).complete  # starts the inbox
        assert wait_until(lambda: service.death_watch.threads == 0, 5 * WATCH_SLICE + 2)
        baseline = threading.active_count()
        peak = 0
        for k in range(40):
            gathers = [start_gather(system, (k, j), refs[j:], timeout=10) for j in range(3)]
            peak = max(peak, service.death_watch.threads)
            assert all(g.result(10).complete for g in gathers)
        assert peak <= len(refs)                         # bounded: one per remote actor
        assert wait_until(lambda: service.death_watch.threads == 0, 5 * WATCH_SLICE + 2)
        assert wait_until(lambda: threading.active_count() <= baseline, 2)
        assert service.death_watch._watches == {}

    # A gather still running at shutdown: its watcher ends too.
    with spawn_process({f"{tag}-busy": (Vehicle, (0, 30.0))}, start_method="fork") as busy:
        other = ActorSystem()
        pending = start_gather(other, "q", list(busy.refs.values()), timeout=10)
        other_service = _service(other)
        assert wait_until(lambda: other_service.death_watch.threads == 1)
        other.shutdown()
        with pytest.raises(GatherError, match="shut down"):
            pending.result(5)
        assert wait_until(lambda: other_service.death_watch.threads == 0, 3 * WATCH_SLICE + 2)
        busy.kill()
    assert wait_until(lambda: threading.active_count() <= baseline, 2)


@pytest.mark.slow
def test_past_the_watcher_cap_the_liveness_poll_still_finds_the_dead(system):
    from a0py.actor import spawn_process
    from a0py.actor.gather import _service

    tag = unique()
    with spawn_process({f"{tag}-x": (Vehicle, (1, 30.0))}, start_method="fork") as node:
        service = _service(system)
        service.death_watch._limit = 0               # no watcher threads: the poll only
        gather = start_gather(system, "q", list(node.refs.values()), timeout=10,
                              liveness_interval=0.05)
        time.sleep(0.2)  # the request taken and a few polls made (no sign of either)
        killed = time.monotonic()
        os.kill(node.pid, signal.SIGKILL)
        result = gather.result(10)
        assert time.monotonic() - killed < 2.0
        assert result.dead == [f"{tag}-x"] and service.deaths_seen == 0


@pytest.mark.slow
def test_registrar_drops_a_killed_process_at_once(system):
    from a0py.actor import spawn_process

    tag = unique()
    dropped = []
    registrar = Registrar(on_drop=lambda topic, ref: dropped.append((topic, ref.name)))
    survivor = system.spawn(answering("here"), name=f"{tag}-local")
    registrar.register("fleet", survivor)
    with spawn_process({f"{tag}-a": (Vehicle, (1,)), f"{tag}-b": (Vehicle, (2,))},
                       start_method="fork") as node:
        for ref in node.refs.values():
            assert registrar.register("fleet", ref)
        assert [r.name for r in registrar.lookup("fleet")] == [f"{tag}-local", f"{tag}-a", f"{tag}-b"]
        registrar.watch()
        os.kill(node.pid, signal.SIGKILL)
        node.join(5)
        # Seen at once: no sleep, no heartbeat; the kernel released the robust locks.
        assert [r.name for r in registrar.lookup("fleet")] == [f"{tag}-local"]
        assert sorted(dropped) == [("fleet", f"{tag}-a"), ("fleet", f"{tag}-b")]
        assert not registrar.register("fleet", node[f"{tag}-a"])   # dead: refused
    registrar.close()


def test_registrar_watches_local_actors_without_threads_and_drops_a_stopped_one_at_once(system):
    dropped = []
    registrar = Registrar(on_drop=lambda topic, ref: dropped.append((topic, ref.name)))
    refs = [system.spawn(silent(), name=f"w{i}") for i in range(50)]
    for ref in refs:
        assert registrar.register("fleet", ref)
    baseline = threading.active_count()
    registrar.watch()
    assert threading.active_count() == baseline        # a callback per actor, no thread
    system.stop(refs[3])
    assert wait_until(lambda: dropped == [("fleet", "w3")])   # found without a lookup
    assert registrar.dropped == 1
    assert len(registrar.lookup("fleet")) == 49
    registrar.close()
    assert all(ref._actor._end_callbacks == {} for ref in refs)   # the watch was taken down
    system.stop(refs[4])
    assert [r.name for r in registrar.lookup("fleet")][:4] == ["w0", "w1", "w2", "w5"]
    assert dropped == [("fleet", "w3"), ("fleet", "w4")]


@pytest.mark.slow
def test_registrar_watcher_threads_are_capped_and_lookup_drops_the_rest(system):
    from a0py.actor import spawn_process

    tag = unique()
    dropped = []
    registrar = Registrar(on_drop=lambda topic, ref: dropped.append(ref.name))
    registrar._death_watch._limit = 2
    with spawn_process({f"{tag}-v{i}": (Vehicle, (i,)) for i in range(4)},
                       start_method="fork") as node:
        for ref in node.refs.values():
            assert registrar.register("fleet", ref)
        registrar.watch()
        assert registrar._death_watch.threads == 2      # capped: not one per actor
        os.kill(node.pid, signal.SIGKILL)
        node.join(5)
        assert wait_until(lambda: len(dropped) == 2)    # the watched two, without a lookup
        assert registrar.lookup("fleet") == []          # the two past the cap: by the lookup
        assert sorted(dropped) == sorted(node.refs)
        assert wait_until(lambda: registrar._death_watch.threads == 0)
    registrar.close()


@pytest.mark.slow
def test_a_request_forwarded_to_another_process_is_answered_through_the_arena_inbox(system):
    from a0py.actor import spawn_process

    tag = unique()
    with spawn_process({f"{tag}-remote": (Vehicle, (7,))}, start_method="fork") as node:
        remote = node[f"{tag}-remote"]
        forwarder = system.spawn(remote.send, name=f"{tag}-router")  # content-based hop
        result = scatter_gather(system, "q", [forwarder], timeout=10)
        assert result.complete
        value, pid, asked = result.replies[f"{tag}-router"]
        assert (value, pid, asked) == (7, node.pid, 1)
