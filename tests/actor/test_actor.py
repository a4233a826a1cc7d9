"""Actors: one message at a time, become, supervision, scheduled messages, asyncio actors,
arena mailboxes and actors in other processes."""

import asyncio
import datetime
import os
import pickle
import signal
import threading
import time
import uuid

import pytest

from a0py.actor import (
    ActorConfigError,
    ActorNameTakenError,
    ActorNotFoundError,
    ActorStoppedError,
    ActorSystem,
    Failure,
    MailboxFullError,
    MessageTooLargeError,
    NotInActorError,
    NotPicklableRefError,
    become,
    current,
)
from a0py.actor.arena import arena_name


def unique(prefix="t"):
    return f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return predicate()


# -- one message at a time, become, context ---------------------------------------------

def test_an_actor_handles_one_message_at_a_time_without_locks(system):
    state = {"inside": 0, "overlaps": 0, "count": 0}

    def behaviour(_m):
        state["inside"] += 1
        if state["inside"] > 1:
            state["overlaps"] += 1
        time.sleep(0)  # let other threads run while "inside"
        state["count"] += 1
        state["inside"] -= 1

    ref = system.spawn(behaviour)
    senders = [threading.Thread(target=lambda: [ref.send(i) for i in range(500)]) for _ in range(4)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    assert wait_for(lambda: state["count"] == 2000)
    assert state["overlaps"] == 0


def test_messages_from_one_sender_arrive_in_send_order(system):
    got = []
    ref = system.spawn(got.append)
    for i in range(1000):
        ref.send(i)
    assert wait_for(lambda: len(got) == 1000)
    assert got == list(range(1000))


def test_become_changes_the_behaviour_for_the_next_message(system):
    log = []

    def locked(m):
        log.append(("locked", m))
        if m == "unlock":
            become(unlocked)

    def unlocked(m):
        log.append(("unlocked", m))
        if m == "lock":
            current().become(locked)

    ref = system.spawn(locked)
    for m in ["a", "unlock", "b", "lock", "c"]:
        ref.send(m)
    assert wait_for(lambda: len(log) == 5)
    assert log == [("locked", "a"), ("locked", "unlock"), ("unlocked", "b"),
                   ("unlocked", "lock"), ("locked", "c")]


def test_current_outside_an_actor_raises():
    with pytest.raises(NotInActorError):
        current()
    with pytest.raises(NotInActorError):
        become(print)


def test_context_gives_self_and_name(system):
    seen = []
    ref = system.spawn(lambda m: seen.append((current().self, current().name)), name="ctx-actor")
    ref.send("x")
    assert wait_for(lambda: seen)
    assert seen == [(ref, "ctx-actor")]


def test_object_with_handle_is_a_behaviour(system):
    class Counter:
        def __init__(self):
            self.n = 0

        def handle(self, m):
            self.n += m

    counter = Counter()
    ref = system.spawn(counter)
    for _ in range(10):
        ref.send(2)
    assert wait_for(lambda: counter.n == 20)


def test_bad_spawn_arguments_raise_config_errors(system):
    with pytest.raises(ActorConfigError):
        system.spawn(42)
    with pytest.raises(ActorConfigError):
        system.spawn(print, on_failure="explode")
    system.spawn(print, name="dup")
    with pytest.raises(ActorConfigError, match="already running"):
        system.spawn(print, name="dup")
    with pytest.raises(ActorConfigError):
        system.send_after("soon", print, 1)


# -- supervision ------------------------------------------------------------------------

def test_a_raising_actor_is_reported_to_its_supervisor_and_goes_on():
    failures = []
    with ActorSystem(supervisor=failures.append) as system:
        handled = []

        def fragile(m):
            if m == "bad":
                raise ValueError("cannot handle bad")
            handled.append(m)

        ref = system.spawn(fragile, name="fragile")
        for m in ["a", "bad", "b"]:
            ref.send(m)
        assert wait_for(lambda: handled == ["a", "b"])
        assert ref.is_alive()
        assert len(failures) == 1
        failure = failures[0]
        assert isinstance(failure, Failure)
        assert failure.actor == "fragile" and failure.message == "bad"
        assert isinstance(failure.error, ValueError) and "cannot handle bad" in failure.traceback


def test_a_supervisor_can_be_an_actor_and_on_failure_stop_stops_the_actor():
    with ActorSystem() as system:
        reports = []
        supervisor = system.spawn(reports.append)
        system.supervisor = supervisor
        ref = system.spawn(lambda m: 1 / 0, on_failure="stop")
        ref.send("x")
        ref.send("y")
        assert wait_for(lambda: not ref.is_alive())
        assert wait_for(lambda: len(reports) == 1)
        assert isinstance(reports[0].error, ZeroDivisionError)


def test_a_failing_supervisor_does_not_kill_the_actor():
    def bad_supervisor(_failure):
        raise RuntimeError("supervisor broken")

    with ActorSystem(supervisor=bad_supervisor) as system:
        got = []

        def beh(m):
            if m == 0:
                raise KeyError(m)
            got.append(m)

        ref = system.spawn(beh)
        for m in range(3):
            ref.send(m)
        assert wait_for(lambda: got == [1, 2])
        assert len(system.failures) == 1


# -- stopping ----------------------------------------------------------------------------

def test_stop_processes_earlier_messages_then_drops_later_ones(system):
    got = []
    ref = system.spawn(got.append)
    for m in range(5):
        ref.send(m)
    assert system.stop(ref)
    ref.send("after")
    assert got == list(range(5))
    assert not ref.is_alive()


def test_shutdown_stops_everything_and_refuses_new_work():
    system = ActorSystem()
    ref = system.spawn(print)
    system.send_after(60, ref, "never")
    assert system.shutdown() == []
    assert not ref.is_alive()
    with pytest.raises(ActorStoppedError):
        system.spawn(print)
    with pytest.raises(ActorStoppedError):
        system.send_after(1, ref, "x")


# -- scheduled messages ----------------------------------------------------------------

def test_send_after_delivers_in_deadline_order_and_cancel_prevents(system):
    got = []
    ref = system.spawn(got.append)
    start = time.monotonic()
    system.send_after(0.06, ref, "third")
    system.send_after(0.02, ref, "first")
    system.send_after(0.04, ref, "second")
    cancelled = system.send_after(0.03, ref, "cancelled")
    assert cancelled.cancel()
    assert wait_for(lambda: len(got) == 3)
    assert got == ["first", "second", "third"]
    assert time.monotonic() - start >= 0.06
    # timers fire in deadline order and the actor takes its messages in order: once a
    # message due now has come, the cancelled one (due long before) would have come first
    system.send_after(0, ref, "now")
    assert wait_for(lambda: len(got) == 4)
    assert got[3] == "now" and not cancelled.fired


def test_send_at_accepts_a_datetime_and_a_timestamp(system):
    got = []
    ref = system.spawn(got.append)
    system.send_at(datetime.datetime.now() + datetime.timedelta(milliseconds=30), ref, "dt")
    system.send_at(time.time() + 0.01, ref, "ts")
    assert wait_for(lambda: len(got) == 2)
    assert got == ["ts", "dt"]


def test_an_actor_can_schedule_messages_to_itself(system):
    ticks = []

    def ticker(m):
        ticks.append(m)
        if m < 4:
            current().send_after(0.001, current().self, m + 1)

    system.spawn(ticker).send(0)
    assert wait_for(lambda: ticks == [0, 1, 2, 3, 4])


# -- asyncio actors ----------------------------------------------------------------------

def test_asyncio_actors_handle_sync_and_async_behaviours_in_order():
    async def main():
        system = ActorSystem()
        got = []
        inside = {"n": 0, "overlap": False}

        async def slow(m):
            inside["n"] += 1
            inside["overlap"] |= inside["n"] > 1
            await asyncio.sleep(0.001)
            got.append(m)
            inside["n"] -= 1

        ref = system.spawn_async(slow)
        sync_got = []
        sync_ref = system.spawn_async(sync_got.append)
        for i in range(20):
            ref.send(i)
        # sends from another thread and from the scheduler reach the loop too
        threading.Thread(target=lambda: [sync_ref.send(i) for i in range(10)]).start()
        system.send_after(0.01, sync_ref, "timer")
        for _ in range(500):
            if len(got) == 20 and len(sync_got) == 11:
                break
            await asyncio.sleep(0.005)
        system.shutdown()
        return got, sync_got, inside["overlap"]

    got, sync_got, overlap = asyncio.run(main())
    assert got == list(range(20))
    assert sync_got[:10] == list(range(10)) and sync_got[10] == "timer"
    assert not overlap


def _scripted(log, use_async):
    """A behaviour that logs, raises on "bad", becomes a second behaviour on "become" and
    stops itself on "stop"; async (awaiting between steps) or not."""

    def second(m):
        log.append(("second", m))
        if m == "stop":
            current().stop()

    def first(m):
        if m == "bad":
            raise ValueError("bad message")
        log.append(m)
        if m == "become":
            become(second)

    if not use_async:
        return first

    async def first_async(m):
        await asyncio.sleep(0)
        first(m)
    return first_async


def test_thread_and_asyncio_actors_handle_messages_through_the_same_path():
    script = ["a", "bad", "become", "b", "stop", "never"]
    expected = ["a", "become", ("second", "b"), ("second", "stop")]

    async def main():
        failures = []
        system = ActorSystem(supervisor=failures.append)
        cases = {"thread": (system.spawn, False), "asyncio": (system.spawn_async, False),
                 "asyncio, async def": (system.spawn_async, True)}
        logs, refs = {}, {}
        for kind, (spawn, use_async) in cases.items():
            logs[kind] = []
            refs[kind] = spawn(_scripted(logs[kind], use_async), name=kind)
            for m in script:
                refs[kind].send(m)
        for _ in range(1000):
            if not any(ref.is_alive() for ref in refs.values()):
                break
            await asyncio.sleep(0.005)
        stopping = system.spawn_async(_scripted([], True), name="stops", on_failure="stop")
        stopping.send("bad")
        stopping.send("a")
        for _ in range(1000):
            if not stopping.is_alive():
                break
            await asyncio.sleep(0.005)
        system.shutdown()
        return failures, logs, refs, stopping

    failures, logs, refs, stopping = asyncio.run(main())
    for kind, log in logs.items():
        assert log == expected, kind
        assert not refs[kind].is_alive() and refs[kind]._actor.handled == 5
    assert sorted(f.actor for f in failures) == ["asyncio", "asyncio, async def", "stops", "thread"]
    assert all(isinstance(f.error, ValueError) and "bad message" in f.traceback for f in failures)
    assert not stopping.is_alive() and stopping._actor.handled == 0


def test_spawn_async_without_a_loop_is_a_config_error(system):
    with pytest.raises(ActorConfigError, match="loop"):
        system.spawn_async(print)


# -- arena mailboxes in one process ------------------------------------------------------

def test_arena_actor_in_process_is_reachable_by_name_and_keeps_order(system):
    from a0py.actor import ArenaRef

    name = unique()
    got = []
    ref = system.spawn(got.append, name=name, arena=True)
    by_name = ArenaRef(name)
    assert by_name.is_alive() and by_name.owner_pid == os.getpid()
    assert by_name == ref
    for i in range(2000):
        by_name.send({"i": i})
    assert wait_for(lambda: len(got) == 2000)
    assert [m["i"] for m in got] == list(range(2000))
    assert system.stop(ref)
    assert not by_name.is_alive()


def test_local_ref_without_arena_does_not_pickle_but_arena_ref_does(system):
    from a0py.actor import ArenaRef

    local = system.spawn(print)
    with pytest.raises(NotPicklableRefError):
        pickle.dumps(local)
    name = unique()
    arena_actor = system.spawn(print, name=name, arena=True)
    assert pickle.loads(pickle.dumps(arena_actor)) == ArenaRef(name)


def test_sending_to_a_missing_mailbox_raises_not_found():
    from a0py.actor import ArenaRef

    ref = ArenaRef(unique("missing"))
    with pytest.raises(ActorNotFoundError):
        ref.send("x")
    assert not ref.is_alive()


def test_a_full_mailbox_blocks_the_sender_then_raises_and_never_evicts(system):
    from a0py.actor import ArenaRef

    name = unique()
    release = threading.Event()
    got = []

    def blocked(m):
        release.wait(10)
        got.append(m)

    system.spawn(blocked, name=name, arena=True, arena_size=16384)
    ref = ArenaRef(name, send_timeout=0.2)
    sent = 0
    with pytest.raises(MailboxFullError):
        for i in range(10_000):
            ref.send(i)
            sent += 1
    assert 0 < sent < 10_000
    release.set()
    # Every message accepted before the full mailbox is delivered: none was evicted.
    assert wait_for(lambda: len(got) == sent)
    assert got == list(range(sent))
    ref.send("after", timeout=5)
    assert wait_for(lambda: got[-1] == "after")


def test_a_message_larger_than_the_mailbox_is_refused(system):
    from a0py.actor import ArenaRef

    name = unique()
    system.spawn(print, name=name, arena=True, arena_size=8192)
    with pytest.raises(MessageTooLargeError):
        ArenaRef(name).send(b"x" * 100_000)


def test_mailbox_put_and_arena_ref_send_share_one_send_path(system):
    from a0py.actor import ArenaMailbox, ArenaRef

    name = unique()
    mailbox = ArenaMailbox(name, size=8192)
    try:
        assert mailbox.put("via put") is True
        assert ArenaRef(name).send("via send") is True
        for send in (mailbox.put, ArenaRef(name).send):
            with pytest.raises(MessageTooLargeError, match="arena_size"):
                send(b"x" * 100_000)
        mailbox.open_reader()
        assert mailbox.take(1) == ["via put", "via send"]
        mailbox.close_reader()
    finally:
        mailbox.release()


def test_take_drains_a_batch_and_gives_back_the_room_of_what_it_read():
    from a0py.actor import ArenaMailbox, ArenaRef

    name = unique()
    mailbox = ArenaMailbox(name, size=16384, batch=50)
    ref = ArenaRef(name, send_timeout=0)
    sent = 0
    while ref.send(sent):      # no reader yet: fill it (full and no reader: dropped, False)
        sent += 1
    try:
        assert sent > 100
        mailbox.open_reader()
        with pytest.raises(MailboxFullError):       # a live reader, nothing read: no room
            ref.send("no room")
        got = mailbox.take(1)
        assert got == list(range(50))               # one batch, in order
        ref.send("after")                           # the 50 frames read gave their room back
        while len(got) < sent + 1:
            got += mailbox.take(1)
        assert got == [*range(sent), "after"]       # nothing unread was dropped, order kept
        mailbox.close_reader()
    finally:
        mailbox.release()


def _send_before_and_after_closing_the_cached_arenas(name, result):
    from a0py.actor import ArenaRef
    from a0py.actor.arena import close_cached_arenas

    ref = ArenaRef(name)
    sends = []
    sent_once, closed = threading.Event(), threading.Event()

    def sender():   # one thread, so one cached transport, used before and after
        sends.append(ref.send("before"))
        sent_once.set()
        closed.wait(10)
        sends.append(ref.send("after"))

    thread = threading.Thread(target=sender)
    thread.start()
    sent_once.wait(10)
    close_cached_arenas()    # the sender's cached transport now maps a closed arena
    closed.set()
    thread.join(10)
    result.put(sends)


@pytest.mark.slow
def test_a_sender_whose_cached_mapping_was_closed_maps_the_mailbox_again(system):
    import multiprocessing

    name = unique()
    got = []
    system.spawn(got.append, name=name, arena=True)
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    child = context.Process(target=_send_before_and_after_closing_the_cached_arenas,
                            args=(name, result))
    child.start()
    assert result.get(timeout=30) == [True, True]
    child.join(10)
    assert wait_for(lambda: got == ["before", "after"])


def _write_raw_frame(name, data):
    import a0py

    arena = a0py.Arena.shm(arena_name(name))
    try:
        a0py.Transport(arena).write(data)
    finally:
        arena.close()


def test_an_undecodable_frame_is_reported_to_the_log_and_counted(system, caplog):
    from a0py.actor import ArenaMailbox
    from a0py.actor.mailbox import Undecodable

    name = unique()
    got = []
    mailbox = ArenaMailbox(name)
    try:
        ref = system.spawn(got.append, name=name, mailbox=mailbox)
        with caplog.at_level("ERROR", logger="a0py.actor"):
            _write_raw_frame(name, b"not a pickle")
            ref.send("after")
            assert wait_for(lambda: got == ["after"])
            assert wait_for(lambda: len(system.failures) == 1)
        failure = system.failures[0]
        assert isinstance(failure.message, Undecodable) and failure.message.size == 12
        assert failure.message.head == b"not a pickle" and failure.actor == name
        assert isinstance(failure.error, pickle.UnpicklingError) and "Traceback" in failure.traceback
        assert mailbox.undecodable == 1
        assert any("undecodable frame of 12 bytes" in r.getMessage() for r in caplog.records)
        assert ref.is_alive()
    finally:
        system.shutdown()
        mailbox.release()  # a mailbox made by the test is the test's to remove


def test_two_live_actors_cannot_share_a_name(system):
    name = unique()
    system.spawn(print, name=name, arena=True)
    other = ActorSystem()
    try:
        with pytest.raises(ActorNameTakenError):
            other.spawn(print, name=name, arena=True)
    finally:
        other.shutdown()


# -- actors in other processes -----------------------------------------------------------

class Echo:
    """Child-process behaviour: replies (pid, message) to the ref inside the message."""

    def __call__(self, message):
        reply_to, body = message
        if body == "crash":
            raise RuntimeError("asked to crash")
        reply_to.send((os.getpid(), body))


class Countdown:
    """Child-process behaviour that uses become and stops itself after n messages."""

    def __init__(self, n):
        self.n = n

    def __call__(self, message):
        reply_to, body = message
        self.n -= 1
        reply_to.send(("counted", body, self.n))
        if self.n == 0:
            current().stop()


@pytest.mark.slow
def test_process_actor_is_addressable_by_name_survives_a_failure_and_is_seen_dead_when_killed(system):
    from a0py.actor import ArenaRef, spawn_process

    tag = unique()
    replies = []
    failures = []
    inbox = system.spawn(replies.append, name=f"{tag}-inbox", arena=True)
    system.spawn(failures.append, name=f"{tag}-supervisor", arena=True)
    with spawn_process({f"{tag}-echo": Echo, f"{tag}-count": (Countdown, (2,))},
                       start_method="spawn", supervisor=f"{tag}-supervisor") as node:
        echo = ArenaRef(f"{tag}-echo")          # addressed by name, not through the handle
        assert echo.is_alive() and echo.owner_pid == node.pid
        echo.send((inbox, "hello"))
        echo.send((inbox, "crash"))             # reported in the child; the actor goes on
        echo.send((inbox, "again"))
        assert wait_for(lambda: len(replies) == 2)
        assert replies == [(node.pid, "hello"), (node.pid, "again")]
        assert wait_for(lambda: len(failures) == 1)   # the child's supervisor is ours
        failure = failures[0]
        assert isinstance(failure, Failure) and failure.actor == f"{tag}-echo"
        assert failure.pid == node.pid and "asked to crash" in str(failure.error)
        assert "RuntimeError" in failure.traceback
        count = node[f"{tag}-count"]
        count.send((inbox, 1))
        count.send((inbox, 2))
        assert wait_for(lambda: not count.is_alive())  # stopped itself: seen dead at once
        assert echo.is_alive()
        os.kill(node.pid, signal.SIGKILL)
        assert echo.wait_dead(5)
        assert not echo.is_alive() and echo.owner_pid is None
        # A send to a dead actor's mailbox is accepted and goes nowhere.
        echo.send((inbox, "into the void"))
    assert ("counted", 2, 0) in replies


def test_wait_alive_on_a_mailbox_never_created_returns_false_at_the_timeout():
    from a0py.actor import ArenaRef

    ref = ArenaRef(unique("never"))
    assert ref.wait_alive(0.1) is False      # no ActorNotFoundError: it waited
    assert ref.wait_alive(0) is False


@pytest.mark.slow
def test_wait_alive_waits_for_a_mailbox_that_another_process_creates_later():
    from a0py.actor import ArenaRef, spawn_process

    name = unique("later")
    outcome = []
    waiter = threading.Thread(target=lambda: outcome.append(ArenaRef(name).wait_alive(30)))
    waiter.start()
    # the waiter finds no mailbox yet and goes on waiting (nothing shows that it looked:
    # a while for a waiter that gave up at once to have returned)
    waiter.join(0.2)
    assert outcome == []
    with spawn_process({name: Echo}, start_method="fork") as node:
        waiter.join(30)
        assert outcome == [True]
        assert ArenaRef(name).owner_pid == node.pid


@pytest.mark.slow
def test_an_undecodable_frame_in_a_process_actor_reaches_its_supervisor(system):
    from a0py.actor import spawn_process

    tag = unique()
    replies, failures = [], []
    inbox = system.spawn(replies.append, name=f"{tag}-inbox", arena=True)
    system.spawn(failures.append, name=f"{tag}-supervisor", arena=True)
    with spawn_process({f"{tag}-echo": Echo}, supervisor=f"{tag}-supervisor") as node:
        _write_raw_frame(f"{tag}-echo", b"\x80\x05garbage")
        node[f"{tag}-echo"].send((inbox, "still here"))
        assert wait_for(lambda: replies == [(node.pid, "still here")])
        assert wait_for(lambda: len(failures) == 1)
    failure = failures[0]
    assert failure.actor == f"{tag}-echo" and failure.pid == node.pid
    assert "undecodable frame of 9 bytes" in failure.message     # its repr, across processes
    assert "UnpicklingError" in str(failure.error) and "Traceback" in failure.traceback


@pytest.mark.slow
def test_messages_sent_before_a_fork_started_node_is_up_are_delivered(system):
    from a0py.actor import ArenaRef, spawn_process
    from a0py.actor.arena import ArenaMailbox

    tag = unique()
    replies = []
    inbox = system.spawn(replies.append, name=f"{tag}-inbox", arena=True)
    early = ArenaMailbox(f"{tag}-echo")            # create the mailbox before the actor
    try:
        ArenaRef(f"{tag}-echo").send((inbox, "early"))
        with spawn_process({f"{tag}-echo": Echo}, start_method="fork") as node:
            node[f"{tag}-echo"].send((inbox, "late"))
            assert wait_for(lambda: len(replies) == 2)
            assert [body for _pid, body in replies] == ["early", "late"]
    finally:
        early.release()


# -- spawn_process and the main module ---------------------------------------------------

_NODE_SCRIPT = """\
import operator
from a0py.actor import spawn_process

{indent_if}node = spawn_process({{{name!r}: (operator.itemgetter, (0,))}}, start_method={method!r})
{indent}node[{name!r}].send(("x",))
{indent}node.close()
{indent}print("started")
"""


def _run_node_script(path, name, method="spawn", guarded=False):
    import subprocess
    import sys

    body = _NODE_SCRIPT.format(name=name, method=method,
                               indent_if='if __name__ == "__main__":\n    ' if guarded else "",
                               indent="    " if guarded else "")
    path.write_text(body)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=120, cwd=path.parent)


def _no_mailbox_left(name):
    return not os.path.exists("/dev/shm/" + arena_name(name))


@pytest.mark.slow
def test_spawn_process_from_unguarded_main_code_says_to_add_the_guard(tmp_path):
    name = unique("guard")
    script = tmp_path / "unguarded.py"
    run = _run_node_script(script, name)
    assert run.returncode != 0 and "started" not in run.stdout
    assert "ActorConfigError" in run.stderr
    assert 'if __name__ == "__main__":' in run.stderr and f"{script}, line 4" in run.stderr
    assert "bootstrapping phase" not in run.stderr     # not multiprocessing's error
    assert _no_mailbox_left(name)


@pytest.mark.slow
def test_spawn_process_under_the_guard_or_with_fork_starts(tmp_path):
    guarded = _run_node_script(tmp_path / "guarded.py", unique("guard"), guarded=True)
    assert guarded.returncode == 0, guarded.stderr
    assert guarded.stdout.strip() == "started"
    forked = _run_node_script(tmp_path / "forked.py", unique("guard"), method="fork")
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == "started"


@pytest.mark.slow
def test_a_child_that_reaches_spawn_process_while_starting_says_to_add_the_guard(tmp_path):
    import py_compile
    import subprocess
    import sys

    name = unique("guard")
    source = tmp_path / "gone.py"
    source.write_text(_NODE_SCRIPT.format(name=name, method="spawn", indent_if="", indent=""))
    compiled = tmp_path / "nosource.pyc"
    py_compile.compile(str(source), cfile=str(compiled))
    source.unlink()     # no source: the parent cannot tell, the child finds out
    run = subprocess.run([sys.executable, str(compiled)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert run.returncode != 0 and "started" not in run.stdout
    assert "while this process was starting as a child" in run.stderr
    assert 'if __name__ == "__main__":' in run.stderr
    assert "exited with code 1 before its actors started" in run.stderr
    assert "bootstrapping phase" not in run.stderr
    assert _no_mailbox_left(name)
