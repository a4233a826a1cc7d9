"""The broker's engine (no IPC): claims per client, retract by pattern, incremental joins,
change-only notifications, atomic batches; and a differential test of join results
against a brute-force evaluation over random claim/retract sequences."""

import itertools

import pytest
from helpers.broker_ops import CLIENTS, RETRACT_PATTERNS, SUBSCRIPTIONS
from hypothesis import given
from hypothesis import strategies as st

from a0py.broker import BatchRejectedError, Engine
from a0py.broker.engine import CLAIM, RETRACT, SUBSCRIBE, UNSUBSCRIBE
from a0py.dataspace import DISCARD, Capture, Record, capture, encode, parse


def claim(text_or_value):
    v = parse(text_or_value) if isinstance(text_or_value, str) else text_or_value
    return (CLAIM, encode(v), v)


def sub(sub_id, *texts):
    return (SUBSCRIBE, sub_id, tuple(parse(t) for t in texts))


def rows(change):
    return sorted(change.added, key=encode), sorted(change.removed, key=encode)


ROOMS = ('temp($room, $t)', 'setpoint($room, $s)')


def test_first_notification_carries_the_current_result_even_when_empty():
    e = Engine()
    e.apply("a", [claim('temp("kitchen", 21.5)')])
    e.apply("s", [sub(1, *ROOMS)])
    (change,) = e.take_changes()
    assert change.full and change.added == [] and change.variables == ("room", "s", "t")
    e.apply("a", [claim('setpoint("kitchen", 20)')])
    (change,) = e.take_changes()
    assert not change.full and rows(change) == ([("kitchen", 20, 21.5)], [])


def test_irrelevant_repeated_and_undone_claims_notify_nobody():
    e = Engine()
    e.apply("a", [claim('temp("kitchen", 21.5)'), claim('setpoint("kitchen", 20)')])
    e.apply("s", [sub(1, *ROOMS)])
    assert len(e.take_changes()) == 1
    e.apply("a", [claim('humidity("kitchen", 40)')])          # irrelevant
    e.apply("a", [claim('temp("kitchen", 21.5)')])            # repeated by the same client
    e.apply("b", [claim('temp("kitchen", 21.5)')])            # the same fact by another client
    e.apply("a", [claim('temp("hall", 1.0)'), (RETRACT, parse('temp("hall", 1.0)'))])  # undone
    e.apply("a", [claim('temp("cellar", 1)')])                # joins with nothing
    assert e.take_changes() == []


def test_a_fact_claimed_by_two_clients_stays_until_both_retract():
    e = Engine()
    e.apply("s", [sub(1, 'temp($room, $t)')])
    e.take_changes()
    e.apply("a", [claim('temp("kitchen", 21.5)')])
    e.apply("b", [claim('temp("kitchen", 21.5)')])
    assert rows(e.take_changes()[0]) == ([("kitchen", 21.5)], [])
    e.apply("a", [(RETRACT, parse('temp("kitchen", 21.5)'))])
    assert e.take_changes() == [] and e.facts(parse('temp(_, _)')) == [parse('temp("kitchen", 21.5)')]
    e.apply("b", [(RETRACT, parse('temp(_, $)'))])
    assert rows(e.take_changes()[0]) == ([], [("kitchen", 21.5)])
    assert e.owners(parse('temp("kitchen", 21.5)')) == []


def test_retract_by_pattern_removes_every_match_among_own_claims_only():
    e = Engine()
    e.apply("a", [claim('temp("kitchen", 1)'), claim('temp("hall", 2)'), claim('pair(1, 1)'),
                  claim('pair(1, 2)'), claim('other(1)')])
    e.apply("b", [claim('temp("attic", 3)')])
    e.apply("a", [(RETRACT, parse('temp($room, _)')), (RETRACT, parse('pair($x, $x)'))])
    assert sorted(map(repr, e.claims_of("a"))) == ['other(1)', 'pair(1, 2)']
    assert e.claims_of("b") == [parse('temp("attic", 3)')]
    e.apply("a", [(RETRACT, DISCARD)])
    assert e.claims_of("a") == []


def test_canonical_values_join_only_with_equal_types():
    e = Engine()
    e.apply("s", [sub(1, 'a($x)', 'b($x)')])
    e.take_changes()
    e.apply("c", [claim(Record("a", 1)), claim(Record("b", 1.0)), claim(Record("b", True))])
    assert e.take_changes() == []
    e.apply("c", [claim(Record("b", 1))])
    assert rows(e.take_changes()[0]) == ([(1,)], [])


def test_self_join_on_one_fact():
    e = Engine()
    e.apply("s", [sub(1, 'edge($a, $b)', 'edge($b, $c)')])
    e.apply("c", [claim('edge(1, 1)')])
    changes = e.take_changes()
    assert changes[0].full and changes[0].added == [(1, 1, 1)]
    e.apply("c", [(RETRACT, parse('edge(1, 1)'))])
    assert rows(e.take_changes()[0]) == ([], [(1, 1, 1)])


def test_malformed_batch_is_rejected_whole_naming_the_item():
    e = Engine()
    e.apply("a", [claim('x(1)'), sub(1, 'x($v)')])
    e.take_changes()
    bad = [claim('x(2)'), (UNSUBSCRIBE, 7), claim('x(3)')]
    with pytest.raises(BatchRejectedError, match=r"item 1 \(unsubscribe 7\)") as info:
        e.apply("a", bad)
    assert info.value.item == 1
    with pytest.raises(BatchRejectedError, match=r"item 0 .*pattern"):
        e.apply("a", [(CLAIM, b"\x07", Record("x", capture()))])
    with pytest.raises(BatchRejectedError, match="already in use"):
        e.apply("a", [sub(1, 'y($v)')])
    with pytest.raises(BatchRejectedError, match="unknown item kind"):
        e.apply("a", [("frobnicate", 1)])
    assert e.claims_of("a") == [parse('x(1)')] and e.take_changes() == []


def test_subscription_is_a_fact_and_goes_with_its_client():
    e = Engine()
    e.apply("tool", [sub(9, 'subscription($who, $id, $patterns)')])
    e.take_changes()
    e.apply("alice", [sub(1, *ROOMS)])
    changes = {c.client: c for c in e.take_changes()}
    assert rows(changes["tool"])[0] == [(1, ("temp($room, $t)", "setpoint($room, $s)"), "alice")]
    e.apply("alice", [(RETRACT, DISCARD)])   # a retract never removes a subscription fact
    assert [c.client for c in e.take_changes()] == []
    e.drop("alice")
    (change,) = e.take_changes()
    assert change.client == "tool" and len(change.removed) == 1


def test_drop_retracts_all_claims_at_once():
    e = Engine()
    e.apply("s", [sub(1, 'temp($r, $t)')])
    e.take_changes()
    e.apply("a", [claim('temp("a", 1)'), claim('temp("b", 2)')])
    e.take_changes()
    e.drop("a")
    (change,) = e.take_changes()
    assert sorted(change.removed) == [("a", 1), ("b", 2)]


def test_replace_changes_only_what_differs():
    e = Engine()
    e.apply("s", [sub(1, 'temp($r, $t)')])
    e.apply("a", [claim('temp("a", 1)'), claim('temp("b", 2)')])
    e.take_changes()
    keep = parse('temp("b", 2)')
    new = parse('temp("c", 3)')
    e.replace("a", {encode(keep): keep, encode(new): new}, {})
    (change,) = e.take_changes()
    assert rows(change) == ([("c", 3)], [("a", 1)])
    e.replace("s", {}, {1: (parse('temp($r, $t)'),)})    # same subscription: kept, resent
    (change,) = e.take_changes()
    assert change.full and sorted(change.added) == [("b", 2), ("c", 3)]


def test_revoke_retracts_other_clients_claims_and_reports_them():
    e = Engine()
    e.apply("a", [claim('x(1)'), claim('y(1)')])
    e.apply("b", [claim('x(2)')])
    assert e.revoke([parse('x(_)')], owner="a") == {"a": [parse('x(1)')]}
    assert e.revoke([parse('x(_)')]) == {"b": [parse('x(2)')]}
    assert e.facts(parse('x(_)')) == []


# ---------------------------------------------------------------- differential test

ATOMS = [1, 2, 1.0, True, "k", "h"]
FACTS = st.one_of(
    st.builds(lambda a, b: Record("temp", a, b), st.sampled_from(ATOMS), st.sampled_from(ATOMS)),
    st.builds(lambda a, b: Record("setpoint", a, b), st.sampled_from(ATOMS), st.sampled_from(ATOMS)),
    st.builds(lambda a, b: Record("edge", a, b), st.sampled_from(ATOMS), st.sampled_from(ATOMS)),
)

OPS = st.one_of(
    st.tuples(st.just("claim"), st.sampled_from(CLIENTS), st.lists(FACTS, min_size=1, max_size=4)),
    st.tuples(st.just("retract"), st.sampled_from(CLIENTS), FACTS),
    st.tuples(st.just("retract_pattern"), st.sampled_from(CLIENTS), st.sampled_from(RETRACT_PATTERNS)),
    st.tuples(st.just("subscribe"), st.sampled_from(CLIENTS), st.integers(0, len(SUBSCRIPTIONS) - 1)),
    st.tuples(st.just("unsubscribe"), st.sampled_from(CLIENTS), st.integers(0, 3)),
    st.tuples(st.just("drop"), st.sampled_from(CLIENTS), st.just(None)),
)


def brute_match(p, v, env):
    if p is DISCARD:
        return True
    if type(p) is Capture:
        if p.name is not None:
            if p.name in env:
                if encode(env[p.name]) != encode(v):
                    return False
            else:
                env[p.name] = v
        return brute_match(p.pattern, v, env)
    if type(p) is Record:
        return (type(v) is Record and v.label == p.label and len(v.fields) == len(p.fields)
                and all(brute_match(a, b, env) for a, b in zip(p.fields, v.fields)))
    return type(v) is not Record and encode(p) == encode(v)


def brute_join(patterns, facts):
    """Every combination of facts, one per pattern, matched with one shared environment."""
    names = sorted({n for p in patterns for n in _names(p)})
    out = set()
    for combo in itertools.product(facts, repeat=len(patterns)):
        env = {}
        if all(brute_match(p, f, env) for p, f in zip(patterns, combo)):
            out.add(encode(tuple(env[n] for n in names)))
    return out


def _names(p):
    if type(p) is Capture:
        return ([p.name] if p.name else []) + _names(p.pattern)
    if type(p) is Record:
        return [n for f in p.fields for n in _names(f)]
    return []


@given(st.lists(OPS, max_size=40))
def test_join_results_equal_a_brute_force_evaluation(ops):
    e = Engine()
    claims = {c: {} for c in CLIENTS}     # the model: client -> {encoding: value}
    subs = {}                             # (client, sub_id) -> patterns
    seen = {}                             # (client, sub_id) -> rows as the notifications tell
    next_id = 0
    for op, client, arg in ops:
        if op == "claim":
            e.apply(client, [claim(v) for v in arg])
            for v in arg:
                claims[client][encode(v)] = v
        elif op == "retract":
            e.apply(client, [(RETRACT, arg)])
            claims[client].pop(encode(arg), None)
        elif op == "retract_pattern":
            e.apply(client, [(RETRACT, arg)])
            claims[client] = {k: v for k, v in claims[client].items()
                              if not brute_match(arg, v, {})}
        elif op == "subscribe":
            patterns = tuple(parse(t) for t in SUBSCRIPTIONS[arg])
            e.apply(client, [(SUBSCRIBE, next_id, patterns)])
            subs[(client, next_id)] = patterns
            next_id += 1
        elif op == "unsubscribe":
            mine = sorted(i for c, i in subs if c == client)
            if mine:
                sub_id = mine[arg % len(mine)]
                e.apply(client, [(UNSUBSCRIBE, sub_id)])
                del subs[(client, sub_id)]
                seen.pop((client, sub_id), None)
        else:
            e.drop(client)
            claims[client] = {}
            for key in [k for k in subs if k[0] == client]:
                del subs[key]
                seen.pop(key, None)
        # Apply the notifications to what each subscriber knows; each must be a real change.
        for change in e.take_changes():
            key = (change.client, change.sub_id)
            assert key in subs
            added = {encode(r) for r in change.added}
            removed = {encode(r) for r in change.removed}
            if change.full:
                assert key not in seen and not removed
                seen[key] = added
            else:
                assert added or removed, "a notification without a change"
                assert not (added & seen[key]) and removed <= seen[key]
                seen[key] = (seen[key] - removed) | added
        facts = [v for c in CLIENTS for v in claims[c].values()]
        facts += [Record("subscription", c, i, tuple(repr(p) for p in ps)) for (c, i), ps in subs.items()]
        distinct = list({encode(f): f for f in facts}.values())
        for key, patterns in subs.items():
            expected = brute_join(patterns, distinct)
            assert seen[key] == expected, (key, [repr(p) for p in patterns])
            assert {encode(tuple(r.values())) for r in e.result(*key)} == expected
        assert {encode(f) for f in e.facts()} == {encode(f) for f in distinct}
