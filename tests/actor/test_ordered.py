"""The ordered channel: Labeller and OrderedProxy (seed "In-Order Message Delivery")."""

import os
import random
import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a0py import A0Error
from a0py.actor import (
    ActorConfigError,
    ActorSystem,
    Labeller,
    OrderedProxy,
    OrderingWindowError,
    cyclic,
)


def collect(**kwargs):
    out = []
    return out, OrderedProxy(out.append, **kwargs)


# -- the seed's fixture and the basic cases ---------------------------------------------

def test_seed_fixture_delivers_z_y_x_w():
    out = []
    proxy = OrderedProxy(out.append, label=0, next=lambda n: n + 1)
    for labelled in [(3, "w"), (1, "y"), (2, "x"), (0, "z")]:
        proxy.handle(labelled)
    assert out == ["z", "y", "x", "w"]
    assert proxy.held == 0 and proxy.expected == 4


def test_in_order_messages_pass_straight_through():
    out, proxy = collect()
    for i in range(100):
        proxy.handle((i, f"m{i}"))
        assert out[-1] == f"m{i}"  # delivered at once, nothing held
        assert proxy.held == 0
    assert out == [f"m{i}" for i in range(100)]


def test_reversed_messages_are_held_then_delivered_in_order():
    out, proxy = collect()
    for i in reversed(range(50)):
        proxy.handle((i, i))
        if i:
            assert out == [] and proxy.held == 50 - i
    assert out == list(range(50))
    assert proxy.held == 0


def test_duplicate_labels_are_dropped_whether_held_or_delivered():
    out, proxy = collect()
    proxy.handle((2, "c"))
    proxy.handle((2, "c-again"))   # duplicate of a held message
    proxy.handle((0, "a"))
    proxy.handle((0, "a-again"))   # duplicate of a delivered message
    proxy.handle((1, "b"))
    proxy.handle((1, "b-again"))
    assert out == ["a", "b", "c"]
    assert proxy.dropped == 3


def test_labeller_attaches_consecutive_labels_and_composes_with_proxy():
    sent = []
    labeller = Labeller(sent.append, label=5, next=lambda n: n + 2)
    for m in "abc":
        labeller.handle(m)
    assert sent == [(5, "a"), (7, "b"), (9, "c")]
    out = []
    proxy = OrderedProxy(out.append, label=5, next=lambda n: n + 2)
    for labelled in reversed(sent):
        proxy(labelled)
    assert out == ["a", "b", "c"]
    # A labeller can feed a proxy directly (both are callables).
    out2 = []
    chain = Labeller(OrderedProxy(out2.append))
    for m in range(10):
        chain(m)
    assert out2 == list(range(10))


def test_wrap_around_of_a_small_cycle():
    out, proxy = collect(cycle=8, window=4)
    labeller_out = []
    labeller = Labeller(labeller_out.append, cycle=8)
    for m in range(40):
        labeller.handle(m)
    assert [label for label, _ in labeller_out[:10]] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
    # Reorder inside blocks of 3 (less than the window) across many wraps.
    rng = random.Random(7)
    for start in range(0, 40, 3):
        block = labeller_out[start:start + 3]
        rng.shuffle(block)
        for labelled in block:
            proxy.handle(labelled)
    assert out == list(range(40))
    # A duplicate of a just-delivered label is still recognised after the wrap.
    proxy.handle(labeller_out[-1])
    assert out == list(range(40)) and proxy.dropped == 1


def test_cycle_shorter_than_two_windows_is_refused():
    with pytest.raises(ActorConfigError, match="repeats"):
        OrderedProxy(print, cycle=8, window=5)
    with pytest.raises(ActorConfigError):
        OrderedProxy(print, next=lambda n: (n + 1) % 3, window=2)
    with pytest.raises(ActorConfigError):
        OrderedProxy(print, cycle=8, window=4, history=5)
    OrderedProxy(print, cycle=8, window=4)  # exactly window + history is enough


def test_bad_arguments_raise_clear_a0_errors():
    with pytest.raises(ActorConfigError, match="delegate"):
        OrderedProxy(42)
    with pytest.raises(ActorConfigError, match="window"):
        OrderedProxy(print, window=0)
    with pytest.raises(ActorConfigError, match="on_overflow"):
        OrderedProxy(print, on_overflow="explode")
    with pytest.raises(ActorConfigError, match="next or cycle"):
        OrderedProxy(print, next=lambda n: n, cycle=4)
    with pytest.raises(ActorConfigError, match="target"):
        Labeller(None)
    with pytest.raises(ActorConfigError, match="cycle"):
        cyclic(1)
    proxy = OrderedProxy(print)
    with pytest.raises(ActorConfigError, match=r"\(label, message\)"):
        proxy.handle("not a pair")
    assert issubclass(ActorConfigError, A0Error)


# -- a gap that never fills: the bounded hold and its documented outcomes ----------------

def test_gap_never_filling_raises_past_the_window_and_changes_nothing():
    out, proxy = collect(window=8)
    for label in range(1, 8):          # label 0 never arrives; 7 messages held
        proxy.handle((label, label))
    assert out == [] and proxy.held == 7
    with pytest.raises(OrderingWindowError) as info:
        proxy.handle((8, 8))           # 8 labels ahead of the gap: outside the window
    assert info.value.label == 8 and info.value.expected == 0 and info.value.held == 7
    assert "window=" in str(info.value) and "on_overflow='drop'" in str(info.value)
    assert "on_overflow='reset'" in str(info.value)
    assert proxy.held == 7 and out == []
    # The caller may give up on the gap explicitly.
    assert proxy.skip_gap() == 1
    assert out == list(range(1, 8)) and proxy.expected == 8
    proxy.handle((8, 8))
    assert out == list(range(1, 9))


def test_gap_never_filling_under_drop_policy_drops_out_of_window_messages():
    out, proxy = collect(window=4, on_overflow="drop")
    for label in (1, 2, 3, 4, 5):
        proxy.handle((label, label))
    assert out == [] and proxy.held == 3 and proxy.overflowed == 2


def test_gap_never_filling_under_reset_policy_skips_the_gap_and_goes_on():
    out, proxy = collect(window=4, history=16, on_overflow="reset")
    for label in (1, 2, 3):
        proxy.handle((label, label))
    proxy.handle((4, 4))               # outside the window: give up on label 0
    assert out == [1, 2, 3, 4]
    assert proxy.skipped == 1 and proxy.resets == 1 and proxy.expected == 5
    proxy.handle((0, "late"))          # the lost message arriving late is a duplicate
    assert out == [1, 2, 3, 4] and proxy.dropped == 1
    proxy.handle((5, 5))
    assert out == [1, 2, 3, 4, 5]


def test_reset_policy_restarts_at_a_label_far_beyond_the_window():
    out, proxy = collect(window=4, on_overflow="reset")
    proxy.handle((2, 2))
    proxy.handle((100, 100))
    assert out == [2, 100] and proxy.expected == 101


def test_delegate_error_does_not_strand_held_messages():
    out = []

    def delegate(m):
        if m == "boom":
            raise RuntimeError("delegate failed")
        out.append(m)

    proxy = OrderedProxy(delegate)
    proxy.handle((1, "b"))
    proxy.handle((2, "c"))
    with pytest.raises(RuntimeError, match="delegate failed"):
        proxy.handle((0, "boom"))
    assert out == ["b", "c"] and proxy.held == 0 and proxy.expected == 3


# -- property: any permutation with any duplicates is delivered exactly once, in order ----

@given(st.data())
def test_any_permutation_with_duplicates_is_delivered_exactly_once_in_order(data):
    n = data.draw(st.integers(0, 60), label="n")
    cycle = data.draw(st.sampled_from([None, 2 * 64, 2 * 64 + 13]), label="cycle")
    labelled = []
    labeller = Labeller(labelled.append, cycle=cycle)
    for i in range(n):
        labeller.handle(i)
    arrivals = list(labelled)
    extra = data.draw(st.lists(st.sampled_from(labelled), max_size=30) if labelled else st.just([]),
                      label="duplicates")
    arrivals.extend(extra)
    arrivals = data.draw(st.permutations(arrivals), label="arrival order")
    out, proxy = collect(cycle=cycle, window=64)
    for item in arrivals:
        proxy.handle(item)
    assert out == list(range(n))
    assert proxy.dropped == len(extra) and proxy.held == 0


# -- labeller + network + reorderer as actors ------------------------------------------

def _network(system, target, rng, max_delay):
    """The network actor: forwards each message after a random (seeded) delay."""
    def deliver(message):
        system.send_after(rng.uniform(0, max_delay), target, message)
    return deliver


def test_labeller_network_reorderer_actors_deliver_thousands_in_source_order():
    n = 4000
    received = []
    done = threading.Event()

    def delegate(m):
        received.append(m)
        if len(received) == n:
            done.set()

    with ActorSystem() as system:
        proxy = system.spawn(OrderedProxy(delegate, window=n))
        network = system.spawn(_network(system, proxy, random.Random(1234), 0.004))
        labeller = system.spawn(Labeller(network))
        for i in range(n):
            labeller.send(i)
        assert done.wait(30), f"only {len(received)} of {n} delivered"
        assert not system.failures
    assert received == list(range(n))


def test_small_cycle_wraps_many_times_through_a_reordering_network():
    """In-flight messages bounded by credits (< window), labels from a cycle of 64."""
    n, credit = 3000, 24
    received = []
    done = threading.Event()
    with ActorSystem() as system:
        source_state = {"next": 0}

        def source(_ack):
            i = source_state["next"]
            if i < n:
                source_state["next"] = i + 1
                labeller.send(i)

        def delegate(m):
            received.append(m)
            source_ref.send("ack")
            if len(received) == n:
                done.set()

        proxy = system.spawn(OrderedProxy(delegate, cycle=64, window=32))
        network = system.spawn(_network(system, proxy, random.Random(99), 0.002))
        labeller = system.spawn(Labeller(network, cycle=64))
        source_ref = system.spawn(source)
        for _ in range(credit):
            source_ref.send("start")
        assert done.wait(60), f"only {len(received)} of {n} delivered"
        assert not system.failures
    assert received == list(range(n))


# -- across processes ------------------------------------------------------------------

class Verifier:
    """Child-process delegate: counts deliveries, checks the order, reports once at n."""

    def __init__(self, n, report_to):
        from a0py.actor import ArenaRef

        self.n = n
        self.report_to = ArenaRef(report_to)
        self.received = []

    def __call__(self, message):
        self.received.append(message)
        if len(self.received) == self.n:
            self.report_to.send(("done", os.getpid(), self.received))


def ordered_sink(n, report_to, window):
    return OrderedProxy(Verifier(n, report_to), window=window)


@pytest.mark.slow
def test_labeller_network_reorderer_across_processes():
    from a0py.actor import spawn_process

    n = 3000
    tag = f"t{os.getpid()}-{uuid.uuid4().hex[:8]}"
    reports = []
    got = threading.Event()

    def on_report(message):
        reports.append(message)
        got.set()

    with ActorSystem() as system:
        system.spawn(on_report, name=f"{tag}-report", arena=True)
        with spawn_process({f"{tag}-sink": (ordered_sink, (n, f"{tag}-report", n))}) as node:
            sink = node[f"{tag}-sink"]
            network = system.spawn(_network(system, sink, random.Random(5), 0.003))
            labeller = system.spawn(Labeller(network))
            for i in range(n):
                labeller.send(i)
            assert got.wait(60), "the child never reported"
            _tag, pid, received = reports[0]
            assert pid == node.pid != os.getpid()
            assert received == list(range(n))
            assert not system.failures
