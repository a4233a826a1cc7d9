"""The fact broker across real processes: a broker process, client processes driven
line by line, subscribers in this process; SIGKILLed clients and brokers."""

import gc
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from helpers.procs import CTX, REPO, join_ok, recv

import a0py
from a0py.broker import (
    BatchRejectedError,
    Broker,
    BrokerClient,
    BrokerError,
    BrokerNameError,
    BrokerRunningError,
    BrokerTimeoutError,
    BrokerTypeError,
    ResultTooLargeError,
    UnknownSubscriptionError,
    wire,
)
from a0py.dataspace import (
    DISCARD,
    InvalidValueError,
    ParseError,
    Record,
    capture,
    encode,
    format_term,
    parse,
)

WAIT = 20.0   # liveness bound for cross-process waits (not a speed assertion)

pytestmark = pytest.mark.slow


def env():
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


BROKER = """
import sys
from a0py.broker import Broker
try:
    Broker(sys.argv[1]).run()
except KeyboardInterrupt:
    pass
"""

DRIVER = """
import json, sys
from a0py.broker import BrokerClient
from a0py.dataspace import parse

c = BrokerClient(sys.argv[1])
print("ready", c.name, flush=True)
for line in sys.stdin:
    cmd, *args = json.loads(line)
    if cmd == "claim":
        c.claim(*map(parse, args))
    elif cmd == "retract":
        c.retract(*map(parse, args))
    elif cmd == "batch":
        with c.batch():
            for kind, text in args:
                getattr(c, kind)(parse(text))
    elif cmd == "subscribe":
        c.subscribe(*map(parse, args), callback=lambda r: print("result", json.dumps(r, default=repr), flush=True))
    elif cmd == "ping":
        c.ping(20)
    print("ok", flush=True)
"""


class Proc:
    """A Python child; its stdout lines go to a queue."""

    def __init__(self, code, *args):
        self.p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.backlog = []      # lines read while looking for another prefix
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix, timeout=WAIT):
        for i, line in enumerate(self.backlog):
            if line.startswith(prefix):
                del self.backlog[i]
                return line[len(prefix):].strip()
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"child exited (rc {self.p.poll()}) before {prefix!r}"
            if line.startswith(prefix):
                return line[len(prefix):].strip()
            self.backlog.append(line)

    def do(self, *cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        self.expect("ok")

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


def start_broker(name):
    proc = Proc(BROKER, name)
    dm = a0py.Deadman(a0py.Arena.shm(wire.request_arena_name(name), wire.REQUEST_ARENA_SIZE))
    dm.wait_taken(WAIT)
    return proc


@pytest.fixture
def broker(name):
    proc = start_broker(name)
    yield proc
    proc.stop()


@pytest.fixture
def clients(name):
    made = []

    def make(kind="driver"):
        if kind == "local":
            c = BrokerClient(name)
        else:
            c = Proc(DRIVER, name)
            c.name = c.expect("ready")
        made.append(c)
        return c

    yield make
    for c in made:
        if isinstance(c, Proc):
            c.kill()
            # The broker removes a dead client's arena, unless it stops first.
            a0py.Arena.unlink_shm(wire.client_arena_name(name, c.name))
        else:
            c.close()


class Results:
    """A subscription callback that keeps every result it is given."""

    def __init__(self):
        self.calls = []
        self.cond = threading.Condition()

    def __call__(self, result):
        with self.cond:
            self.calls.append([dict(r) for r in result])
            self.cond.notify_all()

    def wait_for(self, predicate, timeout=WAIT):
        with self.cond:
            assert self.cond.wait_for(lambda: self.calls and predicate(self.calls[-1]), timeout), \
                f"no result satisfied the predicate; results: {self.calls}"
            return self.calls[-1]


ROOM_JOIN = (parse('temp($room, $t)'), parse('setpoint($room, $s)'))


# ------------------------------------------------------------------ claims and joins


def test_batches_from_several_client_processes_are_all_applied(broker, clients):
    a, b = clients(), clients()
    a.do("batch", ["claim", 'temp("kitchen", 21.5)'], ["claim", 'temp("hall", 19.0)'],
         ["retract", 'temp("hall", 19.0)'], ["claim", 'setpoint("hall", 18)'])
    b.do("claim", 'temp("attic", 30.0)', 'setpoint("kitchen", 20)')
    a.do("ping")
    b.do("ping")
    me = clients("local")
    facts = {repr(f) for f in me.facts()}
    assert {'temp("kitchen", 21.5)', 'setpoint("hall", 18)', 'temp("attic", 30.0)',
            'setpoint("kitchen", 20)'} <= facts
    assert 'temp("hall", 19.0)' not in facts
    owners = dict((repr(f), o) for f, o in me.facts(parse('temp(_, _)'), owners=True))
    assert owners == {'temp("kitchen", 21.5)': [a.name], 'temp("attic", 30.0)': [b.name]}


def test_join_notifies_initially_and_after_relevant_claims_only(broker, clients):
    claimer = clients()
    claimer.do("claim", 'temp("kitchen", 21.5)', 'setpoint("kitchen", 20)')
    claimer.do("ping")
    me = clients("local")
    results = Results()
    sub = me.subscribe(*ROOM_JOIN, callback=results)
    assert sub.wait() == [{"room": "kitchen", "s": 20, "t": 21.5}]
    assert len(results.calls) == 1

    claimer.do("claim", 'temp("hall", 19.0)')             # joins with nothing yet
    claimer.do("claim", 'humidity("hall", 40)')           # irrelevant
    claimer.do("claim", 'temp("kitchen", 21.5)')          # repeated
    claimer.do("ping")
    me.ping()            # every notification due to me before this has been delivered
    assert len(results.calls) == 1

    claimer.do("claim", 'setpoint("hall", 18)')           # relevant
    last = results.wait_for(lambda r: len(r) == 2)
    assert last == [{"room": "hall", "s": 18, "t": 19.0}, {"room": "kitchen", "s": 20, "t": 21.5}]
    assert len(results.calls) == 2

    claimer.do("retract", 'temp(_, $t)')                  # retract by pattern
    assert results.wait_for(lambda r: r == []) == []
    claimer.do("ping")
    me.ping()
    assert len(results.calls) == 3


def test_a_fact_claimed_by_two_processes_stays_until_both_retract(broker, clients):
    a, b = clients(), clients()
    me = clients("local")
    results = Results()
    assert me.subscribe(parse('alarm($what)'), callback=results).wait() == []
    a.do("claim", 'alarm("smoke")')
    b.do("claim", 'alarm("smoke")')
    results.wait_for(lambda r: r == [{"what": "smoke"}])
    a.do("retract", 'alarm("smoke")')
    a.do("ping")
    b.do("ping")
    me.ping()
    assert me.facts(parse('alarm(_)')) == [Record("alarm", "smoke")]
    assert results.calls[-1] == [{"what": "smoke"}] and len(results.calls) == 2
    b.do("retract", 'alarm(_)')
    results.wait_for(lambda r: r == [])


def test_a_subscription_is_visible_as_a_fact(broker, clients):
    other = clients()
    other.do("subscribe", 'temp($room, $t)', 'setpoint($room, $s)')
    other.do("ping")
    me = clients("local")
    facts = me.facts(parse('subscription($client, $id, $patterns)'))
    assert facts == [Record("subscription", other.name, 1, ("temp($room, $t)", "setpoint($room, $s)"))]
    assert json.loads(other.expect("result")) == []        # its first notification


def test_ping_answers_and_times_out_without_a_broker(name, clients):
    me = clients("local")
    t0 = time.monotonic()
    with pytest.raises(BrokerTimeoutError, match=name):
        me.ping(timeout=0.3)
    assert time.monotonic() - t0 >= 0.3
    proc = start_broker(name)
    try:
        assert me.ping(timeout=WAIT) > 0
    finally:
        proc.stop()


# ------------------------------------------------------------------ deaths and restarts


def _close_the_inherited_client(conn, client):
    with client:           # leaving the block closes the child's copy
        pass
    conn.send("closed")


def test_a_forked_child_closing_its_copy_of_a_client_leaves_the_parents_session(name, broker, clients, spawn):
    me = clients("local")
    me.claim('alarm("smoke")')
    watcher = clients("local")
    results = Results()
    watcher.subscribe(parse('alarm($what)'), callback=results)
    results.wait_for(lambda r: r == [{"what": "smoke"}])
    parent, child = CTX.Pipe()
    p = spawn(_close_the_inherited_client, child, me)
    assert recv(parent) == "closed"
    join_ok(p)
    me.ping()              # answered: the broker still knows this client, its arena is there
    assert me.facts(parse('alarm(_)')) == [Record("alarm", "smoke")]
    me.claim('alarm("fire")')
    results.wait_for(lambda r: r == [{"what": "fire"}, {"what": "smoke"}])
    assert all(r != [] for r in results.calls)   # the claims were never retracted meanwhile


def test_a_killed_client_loses_its_claims_and_subscriptions_and_others_are_told(name, broker, clients):
    victim = clients()
    victim.do("claim", 'obstacle(1, 2)', 'battery("low")')
    victim.do("subscribe", 'obstacle($x, $y)')
    victim.do("ping")
    me = clients("local")
    results = Results()
    me.subscribe(parse('obstacle($x, $y)'), callback=results)
    watchers = Results()
    me.subscribe(parse('subscription($who, _, _)'), callback=watchers)
    results.wait_for(lambda r: r == [{"x": 1, "y": 2}])
    watchers.wait_for(lambda r: {"who": victim.name} in r)
    shm = "/dev/shm/" + wire.client_arena_name(name, victim.name)
    assert os.path.exists(shm)
    t0 = time.monotonic()
    victim.kill()
    results.wait_for(lambda r: r == [])
    elapsed = time.monotonic() - t0
    watchers.wait_for(lambda r: {"who": victim.name} not in r)
    assert me.facts(parse('battery(_)')) == []
    me.ping()
    assert not os.path.exists(shm)     # the broker removed the dead client's arena
    print(f"death to notification: {elapsed * 1e3:.2f} ms")


def test_broker_killed_and_restarted_gets_the_clients_state_back(name, clients):
    proc = start_broker(name)
    holder = clients()
    holder.do("claim", 'obstacle(3, 4)')
    holder.do("ping")
    me = clients("local")
    results = Results()
    me.subscribe(parse('obstacle($x, $y)'), callback=results)
    results.wait_for(lambda r: r == [{"x": 3, "y": 4}])
    proc.kill()
    me.claim(parse('obstacle(5, 6)'))           # made while no broker runs
    proc = start_broker(name)
    try:
        last = results.wait_for(lambda r: len(r) == 2)
        assert last == [{"x": 3, "y": 4}, {"x": 5, "y": 6}]
        assert {repr(f) for f in me.facts(parse('obstacle(_, _)'))} == {"obstacle(3, 4)", "obstacle(5, 6)"}
        holder.do("retract", 'obstacle(_, _)')  # the holder talks to the new broker
        results.wait_for(lambda r: r == [{"x": 5, "y": 6}])
        assert me.resyncs >= 2
    finally:
        proc.stop()


def test_a_second_broker_of_the_same_name_is_refused(name, broker):
    with pytest.raises(BrokerRunningError, match="already running"):
        Broker(name).run()


# ------------------------------------------------------------------ the garbage collector


@pytest.fixture
def gc_thresholds():
    """Known thresholds for the test, and the interpreter's own put back after it."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*saved)


def test_the_gc_threshold_is_raised_while_serving_and_restored_after(name, gc_thresholds):
    b = Broker(name, gc_threshold=12345)
    with b:
        assert gc.get_threshold() == (12345, 10, 10)
        with BrokerClient(name) as c:          # serving really goes on meanwhile
            c.claim('x(1)')
            assert c.facts('x(_)') == [parse('x(1)')]
    assert not b._thread.is_alive()
    assert gc.get_threshold() == gc_thresholds


def test_the_default_gc_threshold_is_the_module_constant_and_none_leaves_it_alone(name, gc_thresholds):
    from a0py.broker.server import GC_THRESHOLD

    assert Broker(name).gc_threshold == GC_THRESHOLD > 700
    with Broker(name, gc_threshold=None):
        assert gc.get_threshold() == gc_thresholds
    assert gc.get_threshold() == gc_thresholds


def test_the_gc_threshold_is_restored_when_run_fails_to_start(name, broker, gc_thresholds):
    with pytest.raises(BrokerRunningError):
        Broker(name, gc_threshold=99999).run()
    assert gc.get_threshold() == gc_thresholds


@pytest.mark.parametrize("bad", ["1000", 1.5, True, [700]])
def test_a_gc_threshold_that_is_not_an_int_is_refused(name, bad):
    with pytest.raises(BrokerTypeError, match="gc_threshold must be an int or None"):
        Broker(name, gc_threshold=bad)


@pytest.mark.parametrize("bad", [0, -1])
def test_a_gc_threshold_below_1_is_refused(name, bad):
    with pytest.raises(ValueError, match=f"gc_threshold must be at least 1.*got {bad}"):
        Broker(name, gc_threshold=bad)


# ------------------------------------------------------------------ bad input


def test_malformed_batches_are_rejected_whole(broker, clients):
    me = clients("local")
    me.claim(parse('x(0)'))
    # Refused before sending, naming the argument: nothing of the call is sent.
    with pytest.raises(ParseError) as parse_error:
        me.claim(parse('x(1)'), 'x(2')
    assert "claim argument 1: BrokerClient.claim reads a str as the text syntax" in \
        "".join(parse_error.value.__notes__)
    with pytest.raises(ParseError, match="bare word"):
        me.claim("hello")           # never the string "hello" silently
    with pytest.raises(BrokerTypeError, match="claim argument 0 is a pattern"):
        me.claim(Record("x", capture()))
    with pytest.raises(InvalidValueError, match="claim argument 1"):
        me.claim(parse('x(1)'), {"a": 1})
    with pytest.raises(BrokerTypeError, match="claim argument 0 is a pattern"):
        me.claim('x($a)')
    with pytest.raises(RuntimeError), me.batch():   # an exception in the block: nothing sent
        me.claim(parse('x(3)'))
        raise RuntimeError
    with pytest.raises(UnknownSubscriptionError):
        me.unsubscribe(99)
    # Refused by the broker: a raw batch with a good claim and an undecodable value.
    good = wire.item(wire.IT_CLAIM, encode(parse('x(4)')))
    bad = wire.item(wire.IT_CLAIM, b"\x07\x01")
    me._write(wire.request_frames(wire.REQ_BATCH, me._take_id(), me.name, [good, bad]))
    with pytest.raises(BatchRejectedError, match="item 1") as info:
        me.ping()
    assert info.value.item == 1
    unsub = wire.item(wire.IT_UNSUBSCRIBE, wire.varint(42))
    me._write(wire.request_frames(wire.REQ_BATCH, me._take_id(), me.name, [good, unsub]))
    with pytest.raises(BatchRejectedError, match=r"item 1 \(unsubscribe 42\)"):
        me.ping()
    assert me.facts(parse('x(_)')) == [parse('x(0)')]


def test_names_are_checked(name, broker, clients):
    with pytest.raises(BrokerNameError):
        BrokerClient("bad/name")
    with pytest.raises(BrokerNameError):
        Broker("")
    me = clients("local")
    with pytest.raises(BrokerNameError, match="in use"):
        BrokerClient(name, client=me.name)


def test_text_is_parsed_and_python_values_work_in_every_argument(broker, clients):
    me = clients("local")
    results = Results()
    me.subscribe('temp($room, $t)', parse('setpoint($room, $s)'), callback=results)
    me.claim('temp("kitchen", 21.5)', Record("setpoint", "kitchen", 20), '"a string fact"')
    results.wait_for(lambda r: r == [{"room": "kitchen", "s": 20, "t": 21.5}])
    assert "a string fact" in me.facts(DISCARD)
    me.retract('temp(_, _)', '"a string fact"')
    results.wait_for(lambda r: r == [])
    assert me.facts('setpoint($r, _)') == [Record("setpoint", "kitchen", 20)]


def test_retract_with_patterns_and_values_in_python(broker, clients):
    me = clients("local")
    me.claim(Record("p", 1, 1), Record("p", 1, 2), Record("p", 2, 2), ("tuple", 1), None)
    me.retract(Record("p", capture(name="x"), capture(name="x")))
    assert sorted(map(format_term, me.claims())) == ["None", '["tuple", 1]', "p(1, 2)"]
    me.retract(DISCARD)
    me.ping()
    assert me.facts(parse('p(_, _)')) == [] and me.claims() == []


# ------------------------------------------------------------------ overruns and big results


def test_a_slow_subscriber_overrun_resyncs_and_ends_with_the_right_result(broker, name, clients):
    slow = BrokerClient(name, arena_size=64 << 10)
    try:
        results = Results()
        gate = threading.Event()

        def callback(result):
            gate.wait(WAIT)
            results(result)

        slow.subscribe(parse('n($i, $pad)'), callback=callback)
        writer = clients("local")
        pad = "x" * 400
        for i in range(200):       # 400 notifications of ~450 bytes: 3x the slow one's arena
            writer.claim(Record("n", i, pad))
            writer.ping()
            writer.retract(Record("n", i, pad))
            writer.ping()
        writer.claim(*[Record("n", i, pad) for i in range(10)])
        gate.set()
        last = results.wait_for(lambda r: len(r) == 10)
        assert last == [{"i": i, "pad": pad} for i in range(10)]
        assert slow.gaps >= 1 and slow.resyncs >= 2
        # A whole result that cannot fit the arena is reported, not retried for ever.
        writer.claim(*[Record("n", i, pad) for i in range(10, 200)])
        big = slow.subscribe(parse('n($i, $pad)'), callback=lambda r: None)
        with pytest.raises(BrokerError, match="bigger arena_size"):
            big.wait()
    finally:
        slow.close()


def test_a_value_too_large_for_a_frame_is_refused_and_changes_nothing(name, clients):
    c = clients("local")          # no broker needed: the client checks before sending
    c.claim('small(1)')
    big = Record("big", b"x" * (wire.MAX_FRAME + 1))
    with pytest.raises(BrokerError, match="does not fit"):
        c.claim(big)
    with pytest.raises(BrokerError, match="does not fit"), c.batch():
        c.retract('small(1)')
        c.claim(big)
    assert c.claims() == [parse('small(1)')]


def test_a_batch_on_one_thread_holds_back_only_that_threads_claims(broker, clients):
    c = clients("local")
    inside, release = threading.Event(), threading.Event()

    def batcher():
        with c.batch():
            c.claim('b(1)')
            inside.set()
            release.wait(WAIT)
            c.claim('b(2)')

    t = threading.Thread(target=batcher)
    t.start()
    try:
        assert inside.wait(WAIT)
        c.claim('a(1)')                 # this thread is in no batch: sent at once
        c.retract('a(1)')
        c.claim('a(2)')
        assert c.facts('a(_)') == [parse('a(2)')]
        assert c.facts('b(_)') == []    # the other thread's batch is still open
    finally:
        release.set()
        t.join(WAIT)
    assert c.facts('b(_)') == [parse('b(1)'), parse('b(2)')]


def test_big_batches_and_results_span_several_frames(broker, clients):
    me = clients("local")
    n = 10000      # ~ 0.6 MiB of claims and of rows: several frames each way
    pad = "v" * 40
    results = Results()
    me.claim(*[Record("big", i, pad) for i in range(n)])
    sub = me.subscribe(parse('big($i, $v)'), callback=results)
    assert len(sub.wait(WAIT)) == n
    assert len(me.facts(parse('big(_, _)'), timeout=WAIT)) == n
    me.retract(parse('big(_, _)'))
    results.wait_for(lambda r: r == [])


# ------------------------------------------------------------------ backpressure and bounds

STUCK_BROKER = """
import sys, time
import a0py
from a0py.broker import wire
deadman = a0py.Deadman(wire.open_request_arena(sys.argv[1]))
assert deadman.try_take()
print("ready", flush=True)
time.sleep(600)
"""

BLOB = b"x" * 180_000


def test_many_large_claims_to_a_fresh_broker_all_arrive_and_never_wedge_the_client():
    # 120 claims of 180 KB fill the 8 MiB request arena 2.6 times over, so the client
    # waits for room again and again, also right after the broker's last read of a
    # round: the writer the broker used to leave asleep. Every call is bounded, so a
    # wedge fails here with BrokerTimeoutError instead of hanging.
    for _attempt in range(3):
        n = f"t{os.getpid()}-{uuid.uuid4().hex[:8]}"
        proc = start_broker(n)
        try:
            with BrokerClient(n, timeout=WAIT) as c:
                for i in range(120):
                    c.claim(Record("blob", i, BLOB))
                c.ping(WAIT)
                results = Results()
                c.subscribe(parse("blob($i, _)"), callback=results)
                results.wait_for(lambda rows: len(rows) == 120)
        finally:
            proc.stop()
            a0py.Arena.unlink_shm(wire.request_arena_name(n))


def test_a_broker_that_does_not_drain_is_an_error_naming_it_and_the_state_follows_later(name):
    stuck = Proc(STUCK_BROKER, name)      # holds the broker's deadman, never reads
    stuck.expect("ready")
    c = BrokerClient(name, timeout=0.5)
    try:
        with pytest.raises(BrokerTimeoutError,
                           match=rf"broker '{name}' \(pid {stuck.p.pid}\) did not take a request"):
            for i in range(100):          # 18 MB: more than the request arena holds
                c.claim(Record("blob", i, BLOB))
        assert len(c.claims()) == i + 1   # the one that timed out is kept in the state
        stuck.kill()
        broker = start_broker(name)
        try:
            c.ping(WAIT)                  # the whole state went to the new broker first
            results = Results()
            c.subscribe(parse("blob($i, _)"), callback=results)
            results.wait_for(lambda rows: sorted(r["i"] for r in rows) == list(range(i + 1)))
        finally:
            broker.stop()
    finally:
        c.close()
        stuck.kill()


def test_facts_larger_than_the_client_arena_is_an_error_that_says_how_to_ask_for_less(broker, name):
    with BrokerClient(name, arena_size=64 << 10) as small:
        small.claim(*[Record("big", i, "y" * 1000) for i in range(100)])    # ~100 KB of facts
        small.claim(Record("small", 1))
        small.ping(WAIT)
        with pytest.raises(ResultTooLargeError, match=r"narrower pattern.*arena_size=\d+") as info:
            small.facts(timeout=WAIT)     # an answer, not a timeout
        assert info.value.size > info.value.limit
        assert small.facts(parse("small(_)"), timeout=WAIT) == [Record("small", 1)]
        with pytest.raises(ResultTooLargeError, match="they were revoked"):
            small.revoke(parse("big(_, _)"), timeout=WAIT)
        assert small.facts(parse("big(_, _)"), timeout=WAIT) == []


def test_a_client_timeout_that_is_not_a_positive_number_is_refused(name):
    for bad in (0, -1, None, "5", True):
        with pytest.raises(BrokerTypeError, match="timeout"):
            BrokerClient(name, timeout=bad)
