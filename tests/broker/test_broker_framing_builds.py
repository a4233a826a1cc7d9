"""The broker framing's two builds (compiled ``a0py.broker._compiled`` and interpreted
``a0py.broker.framing``, one source) build the same bytes and read frames alike: the
same results for good frames, the same :class:`WireError` (same message) for damaged
ones, whatever the damage."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import a0py.broker as broker
from a0py.broker import framing, wire
from a0py.broker.errors import BrokerError, WireError

compiled = pytest.importorskip("a0py.broker._compiled")
BUILDS = [compiled, framing]

IDS = st.one_of(st.integers(0, 300), st.integers(0, framing.MAX_VARINT))
OPS = st.integers(1, 12)
PAYLOADS = st.one_of(st.binary(max_size=40), st.binary(min_size=120, max_size=300))
ITEMS = st.lists(st.tuples(OPS, PAYLOADS), max_size=12)
CLIENTS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
LIMITS = st.integers(64, 2048)


def outcome(fn, *args):
    """What a call gives: its result, or the class and message of what it raised."""
    try:
        return ("ok", fn(*args))
    except (BrokerError, TypeError) as exc:
        return ("raised", type(exc), str(exc))


def both(name, *args):
    results = [outcome(getattr(mod, name), *args) for mod in BUILDS]
    assert results[0] == results[1], (name, args)
    return results[0]


@given(st.integers(1, 8), IDS, CLIENTS, ITEMS, st.sampled_from([0, framing.FLAG_OWNERS]), LIMITS)
def test_requests_are_built_alike_and_parse_back(kind, req_id, client, items, flags, limit):
    raw = [framing.item(op, p) for op, p in items]
    got = both("request_frames", kind, req_id, client, raw, flags, limit)
    if got[0] != "ok":
        assert "does not fit" in got[2]
        return
    frames = got[1]
    assert all(len(f) <= limit for f in frames)
    parsed = []
    for n, frame in enumerate(frames):
        k, f, r, c, its = both("parse_request", frame)[1]
        assert (k, r, c) == (kind, req_id, client)
        assert f == flags | (framing.FLAG_MORE if n < len(frames) - 1 else 0)
        parsed += its
    assert parsed == items


@given(IDS, CLIENTS, OPS, st.lists(PAYLOADS, max_size=12), LIMITS)
def test_requests_of_one_op_are_the_requests_of_their_items(req_id, client, op, payloads, limit):
    expected = outcome(framing.request_frames, framing.REQ_BATCH, req_id, client,
                       [framing.item(op, p) for p in payloads], 0, limit)
    assert both("request_frames_of", framing.REQ_BATCH, req_id, client, op, payloads,
                limit) == expected


@given(IDS, st.booleans(), st.lists(PAYLOADS, max_size=12), LIMITS)
def test_notifications_are_built_alike_with_full_on_the_first_frame_only(sub_id, full, rows, limit):
    items = [framing.item(framing.IT_ADD, p) for p in rows]
    got = both("notify_frames", sub_id, full, items, limit)
    if got[0] != "ok":
        return
    parsed = []
    for n, frame in enumerate(got[1]):
        kind, flags, ident, its = both("parse_reply", frame)[1]
        assert (kind, ident) == (framing.REP_NOTIFY, sub_id)
        assert bool(flags & framing.FLAG_FULL) == (full and n == 0)
        assert bool(flags & framing.FLAG_MORE) == (n < len(got[1]) - 1)
        parsed += its
    assert parsed == [(framing.IT_ADD, p) for p in rows]


@given(st.sampled_from([framing.IT_ADD, framing.IT_DEL]),
       st.lists(st.tuples(st.integers(), st.text(max_size=5)), max_size=5))
def test_result_rows_are_encoded_alike(op, rows):
    assert both("row_items", op, rows)[0] == "ok"


@given(IDS, st.lists(st.text(max_size=30), max_size=4))
def test_subscribe_payloads_round_trip_alike(sub_id, texts):
    payload = both("subscribe_payload", sub_id, texts)[1]
    assert both("parse_subscribe", payload) == ("ok", (sub_id, texts))


def damaged(data, draw):
    raw = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "cut", "append"]))
        if op == "flip" and raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
        elif op == "cut" and raw:
            del raw[draw(st.integers(0, len(raw) - 1)):]
        else:
            raw += draw(st.binary(min_size=1, max_size=12))
    return bytes(raw)


@given(IDS, CLIENTS, ITEMS, st.data())
def test_damaged_frames_are_read_alike(ident, client, items, data):
    raw = [framing.item(op, p) for op, p in items]
    request = framing.request_frames(framing.REQ_BATCH, ident, client, raw, 0, 1 << 20)[0]
    reply = framing.reply_frames(framing.REP_FACTS, ident, raw, 0, 1 << 20)[0]
    sub = framing.subscribe_payload(ident, [client])
    for name, frame in (("parse_request", request), ("parse_reply", reply),
                        ("parse_subscribe", sub), ("parse_varint", framing.varint(ident)),
                        ("parse_items", b"".join(raw))):
        both(name, damaged(frame, data.draw))
        both(name, frame[:-1])


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 1 << 32, framing.MAX_VARINT])
def test_varints_up_to_2_63_round_trip_alike(n):
    encoded = both("varint", n)[1]
    assert len(encoded) <= 9
    assert both("parse_varint", encoded) == ("ok", n)


@pytest.mark.parametrize("bad", [-1, framing.MAX_VARINT + 1, True, 1.0, "1", None])
def test_numbers_a_varint_cannot_carry_are_refused_alike(bad):
    got = both("varint", bad)
    assert got[:2] == ("raised", WireError) and repr(bad) in got[2]
    got = both("reply_frames", framing.REP_ACK, bad, [])
    assert got[:2] == ("raised", WireError)


def test_a_varint_longer_than_9_bytes_and_cut_frames_are_wire_errors():
    for mod in BUILDS:
        with pytest.raises(WireError, match="varint too long"):
            mod.parse_varint(b"\xff" * 9 + b"\x01")
        with pytest.raises(WireError, match="claims 5 bytes, 2 left"):
            mod.parse_items(b"\x01\x05ab")
        with pytest.raises(WireError, match="truncated item"):
            mod.parse_items(b"\x01")


def test_wire_and_the_package_use_the_compiled_framing():
    assert broker.COMPILED
    for name in framing.__all__:
        assert getattr(wire, name) is getattr(compiled, name), name
