"""The broker engine's two builds (compiled ``a0py.broker._compiled`` and interpreted
``a0py.broker.engine``, one source) agree step by step on random claim, retract,
subscribe, unsubscribe, replace and drop sequences from several clients: the same
notifications in the same order, the same rejections, the same facts. (The differential
test in test_broker_engine.py holds the compiled build to a brute-force join.)"""

import re
from pathlib import Path

import pytest
from helpers.broker_ops import CLIENTS, RETRACT_PATTERNS, SUBSCRIPTIONS
from hypothesis import example, given
from hypothesis import strategies as st

import a0py.broker as broker
from a0py.broker import BatchRejectedError, engine
from a0py.dataspace import Record, encode, parse

compiled = pytest.importorskip("a0py.broker._compiled")
BUILDS = [compiled, engine]

BAD_ITEMS = [
    ("claim", b"x"),                              # too short
    ("claim", b"x", parse("temp($a, 1)")),        # a pattern
    ("retract",),                                 # too short
    ("retract", parse("temp(1, 2)"), "not bytes"),
    ("subscribe", -1, (parse("x($a)"),)),
    ("subscribe", 5, ()),
    ("unsubscribe", 99),
    ("frobnicate", 1),
    17,
]

# Few atoms, so that the same facts come back often (claimed, retracted, claimed again
# before the changes are taken).
ATOMS = [1, 1.0, "k"]
FACTS = st.builds(lambda label, a, b: Record(label, a, b),
                  st.sampled_from(["temp", "setpoint", "edge"]),
                  st.sampled_from(ATOMS), st.sampled_from(ATOMS))

OPS = st.one_of(
    st.tuples(st.just("claim"), st.sampled_from(CLIENTS), st.lists(FACTS, min_size=1, max_size=4)),
    st.tuples(st.just("retract"), st.sampled_from(CLIENTS), FACTS),
    st.tuples(st.just("retract_encoded"), st.sampled_from(CLIENTS), FACTS),
    st.tuples(st.just("retract_pattern"), st.sampled_from(CLIENTS), st.sampled_from(RETRACT_PATTERNS)),
    st.tuples(st.just("subscribe"), st.sampled_from(CLIENTS), st.integers(0, len(SUBSCRIPTIONS) - 1)),
    st.tuples(st.just("unsubscribe"), st.sampled_from(CLIENTS), st.integers(0, 3)),
    st.tuples(st.just("replace"), st.sampled_from(CLIENTS), st.lists(FACTS, max_size=3)),
    st.tuples(st.just("drop"), st.sampled_from(CLIENTS), st.just(None)),
    st.tuples(st.just("bad"), st.sampled_from(CLIENTS), st.sampled_from(BAD_ITEMS)),
)


def changes(e):
    return [(c.client, c.sub_id, c.variables, c.full, sorted(map(encode, c.added)),
             sorted(map(encode, c.removed))) for c in e.take_changes()]


def step(e, op, client, arg, sub_ids):
    try:
        if op == "claim":
            e.apply(client, [("claim", encode(v), v) for v in arg])
        elif op == "retract":
            e.apply(client, [("retract", arg)])
        elif op == "retract_encoded":
            e.apply(client, [("retract", arg, encode(arg))])
        elif op == "retract_pattern":
            e.apply(client, [("retract", arg)])
        elif op == "subscribe":
            e.apply(client, [("subscribe", sub_ids[0], tuple(parse(t) for t in SUBSCRIPTIONS[arg]))])
        elif op == "unsubscribe":
            e.apply(client, [("unsubscribe", arg)])
        elif op == "replace":
            e.replace(client, {encode(v): v for v in arg}, e.subscriptions_of(client))
        elif op == "drop":
            e.drop(client)
        else:
            e.apply(client, [("claim", encode(1), 1), arg])
    except BatchRejectedError as exc:
        return ("rejected", str(exc), exc.item)
    return ("ok",)


T = parse('temp(1, 1)')


@given(st.lists(st.tuples(OPS, st.booleans()), max_size=40))
@example([(("subscribe", "a", 0), True), (("claim", "b", [T]), True),
          (("retract", "b", T), False), (("claim", "b", [T]), True)])
def test_both_builds_agree_step_by_step(ops):
    """Notifications are taken after some steps only, so that changes undone before
    they are taken (in one batch or one drain of the broker) are compared too."""
    engines = [mod.Engine() for mod in BUILDS]
    for n, ((op, client, arg), take) in enumerate(ops):
        outcomes = [step(e, op, client, arg, [n]) for e in engines]
        assert outcomes[0] == outcomes[1], (op, arg)
        if take:
            assert changes(engines[0]) == changes(engines[1]), (op, arg)
    assert changes(engines[0]) == changes(engines[1])
    facts = [list(map(encode, e.facts())) for e in engines]
    assert facts[0] == facts[1]
    for c in CLIENTS:
        assert sorted(map(encode, engines[0].claims_of(c))) == \
            sorted(map(encode, engines[1].claims_of(c)))


def test_the_package_uses_the_compiled_engine():
    assert broker.COMPILED and broker.Engine is compiled.Engine
    assert broker.Change is compiled.Change


def test_the_compiled_module_includes_the_engine_its_term_helpers_and_the_framing():
    here = Path(engine.__file__).parent
    included = re.findall(r'^include "(\w+)\.py"$', (here / "_compiled.pyx").read_text(), re.M)
    assert included == ["terms", "engine", "framing"]
    for name in engine.__all__:
        assert hasattr(compiled, name)
