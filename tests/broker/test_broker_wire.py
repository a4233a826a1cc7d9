"""The broker's frame layout and its fast value reader (checked against the dataspace's
reference decoder)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a0py.broker import wire
from a0py.dataspace import DecodeError, Record, decode, encode

ATOMS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                  st.text(max_size=20), st.binary(max_size=20))
LABELS = st.text(min_size=1, max_size=8)
VALUES = st.recursive(
    ATOMS,
    lambda kids: st.one_of(st.lists(kids, max_size=4).map(tuple),
                           st.builds(lambda label, fields: Record(label, *fields), LABELS,
                                     st.lists(kids, max_size=4))),
    max_leaves=20)


@given(VALUES)
def test_fast_reader_gives_the_reference_value(value):
    data = encode(value)
    assert encode(wire.decode_value(data)) == data
    assert type(wire.decode_value(data)) is type(decode(data))


@given(VALUES, st.data())
def test_fast_reader_accepts_and_refuses_exactly_what_the_reference_does(value, data):
    raw = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["flip", "cut", "append"]))
        if op == "flip" and raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        elif op == "cut" and raw:
            del raw[data.draw(st.integers(0, len(raw) - 1)):]
        else:
            raw += bytes(data.draw(st.binary(min_size=1, max_size=3)))
    raw = bytes(raw)
    try:
        expected = encode(decode(raw))
    except DecodeError as exc:
        with pytest.raises(DecodeError) as got:
            wire.decode_value(raw)
        assert str(got.value) == str(exc)
    else:
        assert encode(wire.decode_value(raw)) == expected


def test_requests_and_replies_round_trip_and_are_cut_between_items():
    items = [wire.item(wire.IT_CLAIM, encode(Record("x", i, "y" * 100))) for i in range(50)]
    frames = wire.request_frames(wire.REQ_BATCH, 7, "client-1", items, limit=1024)
    assert len(frames) > 1 and all(len(f) <= 1024 for f in frames)
    got = []
    for n, frame in enumerate(frames):
        kind, flags, req_id, client, its = wire.parse_request(frame)
        assert (kind, req_id, client) == (wire.REQ_BATCH, 7, "client-1")
        assert bool(flags & wire.FLAG_MORE) == (n < len(frames) - 1)
        got += [wire.item(op, p) for op, p in its]
    assert got == items
    (reply,) = wire.reply_frames(wire.REP_NOTIFY, 300, [wire.item(wire.IT_ADD, b"\x00")], wire.FLAG_FULL)
    assert wire.parse_reply(reply) == (wire.REP_NOTIFY, wire.FLAG_FULL, 300, [(wire.IT_ADD, b"\x00")])


def test_malformed_frames_are_wire_errors():
    good = wire.request_frames(wire.REQ_PING, 1, "c", [wire.item(wire.IT_TEXT, b"abc")])[0]
    for bad in (b"", b"\x00\x01\x00", good[:-2], good[:3] + b"\xff" * 11,
                good[:4] + b"\x00", good + b"\x01\x7f"):
        with pytest.raises(wire.WireError):
            wire.parse_request(bad)
    with pytest.raises(wire.BrokerError, match="does not fit"):
        wire.request_frames(wire.REQ_BATCH, 1, "c", [b"x" * 2000], limit=1024)


def test_names_are_checked():
    for bad in ("", ".hidden", "-dash", "a/b", "a b", "x" * 101, None, "é"):
        with pytest.raises(wire.BrokerNameError):
            wire.check_name(bad)


def test_arenas_are_named_under_the_root_as_topic_arenas_with_protocols_of_their_own():
    assert wire.request_arena_name("room", root="shm:t") == "/t.room.broker"
    assert wire.client_arena_name("room", "c-1", root="shm:t") == "/t.room:c-1.broker_client"
    assert wire.request_arena_name("room", root="/r") == "/r/room.broker.a0"
    assert wire.client_arena_name("room", "c-1", root="/r") == "/r/room/c-1.broker_client.a0"
    assert wire.request_key("room", "shm:t") != wire.request_key("room", "shm:u")
