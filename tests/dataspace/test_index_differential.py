"""Differential test: the skeleton index against a brute-force oracle.

The oracle keeps the multiset of assertions and, after every step, matches
every handler's pattern against every live assertion; the events of a step
are the differences between the sets of capture tuples before and after
(``+``/``-``), and for a message, one ``!`` per matching handler. It shares
no code with the index: values are compared by their canonical byte
encoding (a separate implementation), patterns are matched by a plain
recursive function.

Random sequences of add/remove handler, add/remove assertion, messages and
patches must give the same events, per step, as a multiset, on both builds.
"""

from collections import Counter

import pytest
from helpers.dataspace import compiled, interpreted
from hypothesis import given, settings
from hypothesis import strategies as st

from a0py.dataspace import DISCARD, Capture, NotAssertedError, encode

BUILDS = [m for m in (compiled, interpreted) if m is not None]

# ---------------------------------------------------------------- the oracle


def _is_record(x):
    return type(x).__name__ == "Record"


def match(pattern, value, captures):
    """Append the captures of ``pattern`` against ``value``; False if no match."""
    if pattern is DISCARD:
        return True
    if type(pattern) is Capture:
        captures.append(value)
        return match(pattern.pattern, value, captures)
    if _is_record(pattern):
        return (_is_record(value) and value.label == pattern.label
                and len(value.fields) == len(pattern.fields)
                and all(match(p, v, captures) for p, v in zip(pattern.fields, value.fields)))
    if type(pattern) is tuple:
        return (type(value) is tuple and len(value) == len(pattern)
                and all(match(p, v, captures) for p, v in zip(pattern, value)))
    # A constant: atoms only, compared canonically through the encoding.
    return not _is_record(value) and type(value) is not tuple and encode(pattern) == encode(value)


def capture_set(pattern, live):
    out = set()
    for value in live:
        caps = []
        if match(pattern, value, caps):
            out.add(encode(tuple(caps)))
    return out


class Oracle:
    def __init__(self):
        self.bag = Counter()  # encoding -> count
        self.values = {}  # encoding -> value
        self.handlers = {}  # id -> pattern

    def live(self):
        return [self.values[k] for k, n in self.bag.items() if n > 0]

    def snapshot(self):
        live = self.live()
        return {h: capture_set(p, live) for h, p in self.handlers.items()}

    def diff(self, before, after):
        events = Counter()
        for h in after:
            for t in after[h] - before.get(h, set()):
                events[(h, "+", t)] += 1
            for t in before.get(h, set()) - after[h]:
                events[(h, "-", t)] += 1
        return events

    def add_handler(self, h, pattern):
        self.handlers[h] = pattern
        return Counter((h, "+", t) for t in capture_set(pattern, self.live()))

    def remove_handler(self, h):
        del self.handlers[h]
        return Counter()

    def can_remove(self, removals, additions=()):
        need = Counter(encode(v) for v in removals)
        have = Counter(encode(v) for v in additions)
        return all(self.bag[k] + have[k] >= n for k, n in need.items())

    def patch(self, additions, removals):
        before = self.snapshot()
        for v in additions:
            self.bag[encode(v)] += 1
            self.values[encode(v)] = v
        for v in removals:
            self.bag[encode(v)] -= 1
        mid = self.snapshot()
        return self.diff(before, mid)

    def message(self, v):
        events = Counter()
        for h, p in self.handlers.items():
            caps = []
            if match(p, v, caps):
                events[(h, "!", encode(tuple(caps)))] += 1
        return events


# ---------------------------------------------------------------- generators

# Small universes so that handlers and assertions collide often, with the
# values that canonical equality must keep apart (1, 1.0, True; 0.0, -0.0).
ATOMS = [0, 1, True, False, 1.0, 0.0, -0.0, "x", "y", b"x", None, float("nan")]
LABELS = ["a", "b"]


def _nested(leaf, depth, more=lambda sub: ()):
    """``leaf``, or records and tuples of what this gives at ``depth - 1`` (and what
    ``more(sub)`` adds), down to ``depth`` levels."""
    if depth == 0:
        return leaf
    sub = _nested(leaf, depth - 1, more)
    return st.one_of(
        leaf,
        st.tuples(st.just("rec"), st.sampled_from(LABELS), st.lists(sub, max_size=2)),
        st.tuples(st.just("tup"), st.lists(sub, max_size=2)),
        *more(sub),
    )


def value_specs(depth=2):
    return _nested(st.sampled_from(ATOMS).map(lambda a: ("atom", a)), depth)


def pattern_specs(depth=2):
    leaf = st.one_of(
        st.sampled_from(ATOMS[:9]).map(lambda a: ("atom", a)),
        st.just(("_",)),
        st.just(("$",)),
    )
    return _nested(leaf, depth, lambda sub: [st.tuples(st.just("$:"), sub)])


def build(spec, R):
    kind = spec[0]
    if kind == "atom":
        return spec[1]
    if kind == "_":
        return DISCARD
    if kind == "$":
        return Capture(DISCARD)
    if kind == "$:":
        return Capture(build(spec[1], R))
    if kind == "rec":
        return R(spec[1], *[build(s, R) for s in spec[2]])
    return tuple(build(s, R) for s in spec[1])


op = st.one_of(
    st.tuples(st.just("add_h"), pattern_specs()),
    st.tuples(st.just("rem_h"), st.integers(0, 20)),
    st.tuples(st.just("add"), value_specs()),
    st.tuples(st.just("rem"), value_specs()),
    st.tuples(st.just("rem_live"), st.integers(0, 50)),
    st.tuples(st.just("msg"), value_specs()),
    st.tuples(st.just("patch"), st.lists(value_specs(), max_size=3), st.integers(0, 50),
              st.integers(0, 2)),
)


def run_differential(mod, ops):
    R = mod.Record
    idx = mod.Index()
    oracle = Oracle()
    got = Counter()
    handles = {}
    next_id = 0

    def recorder(h):
        return lambda ev, caps: got.update([(h, ev, encode(caps))])

    for step in ops:
        got.clear()
        kind = step[0]
        if kind == "add_h":
            pattern = build(step[1], R)
            h = next_id
            next_id += 1
            handles[h] = idx.add_handler(pattern, recorder(h))
            want = oracle.add_handler(h, pattern)
        elif kind == "rem_h":
            if not handles:
                continue
            h = sorted(handles)[step[1] % len(handles)]
            idx.remove_handler(handles.pop(h))
            want = oracle.remove_handler(h)
        elif kind in ("add", "rem", "rem_live", "patch"):
            live = oracle.live()
            if kind == "add":
                adds, rems = [build(step[1], R)], []
            elif kind == "rem":
                adds, rems = [], [build(step[1], R)]
            elif kind == "rem_live":
                if not live:
                    continue
                adds, rems = [], [live[step[1] % len(live)]]
            else:
                adds = [build(s, R) for s in step[1]]
                rems = [live[(step[2] + i) % len(live)] for i in range(step[3])] if live else []
            if not oracle.can_remove(rems, adds):
                before = len(idx)
                with pytest.raises(NotAssertedError):
                    if kind == "patch":
                        idx.patch(adds, rems)
                    else:
                        idx.remove_assertion(rems[0])
                assert not got and len(idx) == before
                continue
            if kind == "patch":
                idx.patch(adds, rems)
            elif adds:
                idx.add_assertion(adds[0])
            else:
                idx.remove_assertion(rems[0])
            want = oracle.patch(adds, rems)
        else:
            v = build(step[1], R)
            idx.send_message(v)
            want = oracle.message(v)
        assert got == want, (step, got, want)
        assert len(idx) == sum(1 for n in oracle.bag.values() if n > 0)
    for h in list(handles):
        idx.remove_handler(handles.pop(h))
    s = idx.stats()
    assert (s["nodes"], s["tables"], s["leaves"], s["handlers"]) == (1, 0, 0, 0)


@pytest.mark.parametrize("mod", BUILDS, ids=lambda m: m.__name__)
@settings(deadline=None)
@given(ops=st.lists(op, max_size=40))
def test_index_matches_brute_force_oracle(mod, ops):
    run_differential(mod, ops)


@settings(deadline=None)
@given(ops=st.lists(op, max_size=40))
def test_both_builds_give_the_same_events(ops):
    """The compiled and interpreted builds of the one source agree event for event."""
    if compiled is None:
        pytest.fail("a0py.dataspace._compiled is not built")
    traces = []
    for mod in (compiled, interpreted):
        R = mod.Record
        idx = mod.Index()
        trace = []
        for i, step in enumerate(ops):
            if step[0] == "add_h":
                idx.add_handler(build(step[1], R),
                                lambda ev, caps, i=i, t=trace: t.append((i, ev, encode(caps))))
            elif step[0] == "add":
                idx.add_assertion(build(step[1], R))
            elif step[0] == "msg":
                idx.send_message(build(step[1], R))
            elif step[0] == "rem":
                try:
                    idx.remove_assertion(build(step[1], R))
                except NotAssertedError:
                    trace.append((i, "not asserted"))
        traces.append(sorted(trace))
    assert traces[0] == traces[1]
