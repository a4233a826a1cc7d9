"""Fuzz targets, one per decoder of untrusted bytes, with the budget of the
Hypothesis profile (``ci`` keeps each well under 20 s; run with
``HYPOTHESIS_PROFILE=thorough`` for a longer campaign):

* an MCAP recording with bytes flipped, inserted or cut: a reader gives
  :class:`RecordingFormatError` or frames identical to the ones written;
* a packet in a topic with bytes flipped, inserted or cut: a reader gives
  :class:`PacketCorruptError` (or a packet) for it and still every intact
  packet around it;
* a broker frame: only :class:`WireError`;
* a view client message (JSON text or binary): only :class:`ProtocolError`.

Anything else (another exception class, a crash, a hang) fails the test."""

import json
import os
import struct
import tempfile
import uuid

import pytest
from helpers.mcap_data import table_frames, write_segment
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import a0py
from a0py.broker import wire
from a0py.proto import topic as tp
from a0py.recording import RecordingFormatError, bag_info
from a0py.spark import read_table
from a0py.view import _protocol as P
from a0py.view.errors import ProtocolError

_FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _mutations(size):
    """(kind, offset, bytes) edits of a buffer of ``size`` bytes."""
    at = st.integers(0, max(size - 1, 0))
    return st.lists(st.one_of(
        st.tuples(st.just("flip"), at, st.integers(1, 255)),
        st.tuples(st.just("set"), at, st.sampled_from([0, 0xFF, 0x7F, 0x80])),
        st.tuples(st.just("insert"), at, st.binary(min_size=1, max_size=16)),
        st.tuples(st.just("cut"), at, st.integers(0, 64)),
        st.tuples(st.just("u64"), at, st.sampled_from([0, 1 << 31, 1 << 32, 1 << 41, 1 << 63, (1 << 64) - 1])),
    ), min_size=1, max_size=4)


def _mutate(data, edits):
    b = bytearray(data)
    for kind, at, arg in edits:
        at = min(at, max(len(b) - 1, 0))
        if kind == "flip" and b:
            b[at] ^= arg
        elif kind == "set" and b:
            b[at] = arg
        elif kind == "insert":
            b[at:at] = arg
        elif kind == "cut":
            del b[at:at + arg if arg else len(b)]  # 0: cut the rest
        elif kind == "u64":
            b[at:at + 8] = struct.pack("<Q", arg)
    return bytes(b)


# -- MCAP chunks ----------------------------------------------------------------


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    out = {}
    for comp in ("zstd", "lz4", "none"):
        path = str(d / f"{comp}.mcap")
        exp = write_segment(path, {"a": 60, "b": 40}, gaps=[("a", 100, 104)], compression=comp, chunk_bytes=2048)
        with open(path, "rb") as f:
            out[comp] = (f.read(), exp)
    return out


@_FIXTURE_OK
@given(comp=st.sampled_from(["zstd", "lz4", "none"]), data=st.data())
def test_a_mutated_recording_reads_as_format_error_or_as_written(recordings, comp, data):
    original, exp = recordings[comp]
    edits = data.draw(_mutations(len(original)))
    bad = _mutate(original, edits)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.mcap")
        with open(path, "wb") as f:
            f.write(bad)
        try:
            got = table_frames(read_table(path))
        except RecordingFormatError:
            got = None
            event("RecordingFormatError")
        if got is not None:
            for key, value in got.items():  # nothing invented or altered
                assert key in exp.frames and value == exp.frames[key], key
            event("read: every frame" if len(got) == len(exp.frames) else "read: fewer frames (a cut or a skipped chunk)")
        try:
            bag_info(path)
        except RecordingFormatError:
            pass


# -- a packet in a topic ----------------------------------------------------


@pytest.fixture
def fuzz_root(monkeypatch):
    prefix = f"a0pyfz-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("A0PY_ROOT", f"shm:{prefix}")
    monkeypatch.setenv("A0PY_ARENA_SIZE", "1M")
    yield prefix
    for name in tp.list_topics(f"shm:{prefix}"):
        tp.unlink_topic(tp.Topic(name, root=f"shm:{prefix}"))
    tp.close_arenas()


_PACKET = a0py.Packet({"k": "v", "content-type": "text/plain"}, b"payload " * 8).to_bytes()


@_FIXTURE_OK
@given(edits=_mutations(len(_PACKET)))
def test_a_mutated_packet_in_a_topic_is_reported_and_intact_ones_delivered(fuzz_root, edits):
    pub = a0py.Publisher("fz")
    sync = a0py.SubscriberSync("fz")
    pub.pub(b"before")
    a0py.Transport(pub.arena).write(_mutate(_PACKET, edits))
    pub.pub(b"after")
    got = []
    for _ in range(3):
        try:
            got.append(bytes(sync.read().payload))
        except a0py.PacketCorruptError:
            got.append(None)
    event("PacketCorruptError" if got[1] is None else "a packet")
    assert got[0] == b"before" and got[2] == b"after"
    assert not sync.can_read()


# -- a broker frame -----------------------------------------------------------------

_REQUEST = wire.request_frames(wire.REQ_BATCH, 7, "client-1", [
    wire.item(wire.IT_TEXT, b"abc"), wire.item(wire.IT_SUBSCRIBE, wire.subscribe_payload(3, ["x(_)", "y"]))])[0]
_REPLY = wire.reply_frames(wire.REP_NOTIFY, 300, [wire.item(wire.IT_ADD, b"\x00\x01")], wire.FLAG_FULL)[0]


@given(which=st.booleans(), data=st.data())
def test_a_mutated_broker_frame_is_a_wire_error_or_parses(which, data):
    frame = _REQUEST if which else _REPLY
    bad = _mutate(frame, data.draw(_mutations(len(frame))))
    try:
        if which:
            _, _, _, _, items = wire.parse_request(bad)
            for op, payload in items:
                if op == wire.IT_SUBSCRIBE:
                    wire.parse_subscribe(payload)
        else:
            wire.parse_reply(bad)
        event("parsed")
    except wire.WireError:
        event("WireError")


# -- a view client message --------------------------------------------------------

_TEXTS = [
    json.dumps({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": 2}]}),
    json.dumps({"op": "unsubscribe", "subscriptionIds": [1, 2]}),
    json.dumps({"op": "a0py.fetchSeries", "requestId": 1, "channelId": 2, "path": "pose.x",
                "start": 0, "end": 10}),
]
_JSON_ATOMS = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(),
                        st.text(max_size=20))
_JSON = st.recursive(_JSON_ATOMS, lambda c: st.one_of(st.lists(c, max_size=4),
                                                      st.dictionaries(st.text(max_size=12), c, max_size=4)),
                     max_leaves=12)


@given(base=st.sampled_from(_TEXTS), data=st.data())
def test_a_mutated_view_text_message_is_a_protocol_error_or_parses(base, data):
    msg = json.loads(base)
    how = data.draw(st.sampled_from(["bytes", "field", "value"]))
    if how == "bytes":
        raw = _mutate(base.encode(), data.draw(_mutations(len(base))))
        text = raw.decode("utf-8", "replace")
    elif how == "field":
        msg[data.draw(st.sampled_from(sorted(msg)))] = data.draw(_JSON)
        text = json.dumps(msg)
    else:
        msg[data.draw(st.text(max_size=12))] = data.draw(_JSON)
        text = json.dumps(msg)
    try:
        P.parse_client_text(text)
        event("parsed")
    except ProtocolError:
        event("ProtocolError")


_BINARY = bytes([P.CLIENT_OP_PLAYBACK_CONTROL]) + struct.pack("<BfBQI", 0, 1.0, 1, 5, 3) + b"abc"


@given(data=st.data())
def test_a_mutated_view_binary_message_is_a_protocol_error_or_parses(data):
    bad = _mutate(_BINARY, data.draw(_mutations(len(_BINARY))))
    try:
        P.parse_client_binary(bad)
        event("parsed")
    except ProtocolError:
        event("ProtocolError")
