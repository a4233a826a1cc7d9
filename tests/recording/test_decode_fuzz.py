"""Fuzzing the decoders' entry points: mutated CDR, protobuf and JSON
messages (bytes flipped, cut, inserted, lengths set to extremes) give only
:class:`DecodeError` from ``decode_one`` and error strings from ``decode``:
never another exception, a crash or a hang. Each example decodes a batch of
mutations, so the ``ci`` profile still runs thousands of messages."""

import struct

import pytest
from helpers.foreign import (
    write_foxglove_mcap,
    write_mcap_json,
    write_ros2_all_types,
    write_ros2_mcap,
)
from hypothesis import given
from hypothesis import strategies as st
from mcap.reader import make_reader

from a0py.recording.decode import DecodeError, Decoder, decoder_for, ros


@pytest.fixture(autouse=True, scope="module")
def columnar_for_every_layout():
    """Every layout through the columnar CDR path, however few messages share
    it (by default small groups go to rosbags), so the fuzz reaches it."""
    old, ros.MIN_GROUP = ros.MIN_GROUP, 1
    yield
    ros.MIN_GROUP = old

BATCH = 50


def _channels(path):
    out = {}
    with open(path, "rb") as f:
        for schema, ch, m in make_reader(f).iter_messages(log_time_order=False):
            if ch.topic not in out:
                out[ch.topic] = (decoder_for(ch.topic, schema.name if schema else "", schema.encoding if schema else "",
                                             schema.data if schema else b"", ch.message_encoding), [])
            if len(out[ch.topic][1]) < 20:
                out[ch.topic][1].append(m.data)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(decoder, sample messages) per channel of each encoding."""
    d = tmp_path_factory.mktemp("fuzz")
    got = {}
    got.update(_channels(write_ros2_mcap(str(d / "imu.mcap"), n=30).path))
    got.update(_channels(write_ros2_all_types(str(d / "all.mcap"), n=20).path))
    got["/flat"] = _channels(write_ros2_all_types(str(d / "flat.mcap"), n=20, flat=True).path)["/all"]
    got.update(_channels(write_foxglove_mcap(str(d / "fox.mcap"), n=20).path))
    got.update({"/ev/json": _channels(write_mcap_json(str(d / "j.mcap"), n=20).path)["/ev/json"]})
    got.update({"/ev/text": _channels(write_mcap_json(str(d / "t.mcap"), n=20, with_schema=False).path)["/ev/json"]})
    return got


_EXTREMES = [0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("u32"), st.integers(0, 10_000), st.sampled_from(_EXTREMES)),
)


def mutate(data, edits):
    b = bytearray(data)
    for kind, at, val in edits:
        at = at % (len(b) + 1)
        if kind == "flip" and at < len(b):
            b[at] = val
        elif kind == "cut":
            del b[at:]
        elif kind == "insert":
            b[at:at] = bytes([val])
        elif kind == "u32" and at + 4 <= len(b):
            b[at:at + 4] = struct.pack("<I", val)
    return bytes(b)


def check(dec, messages):
    values, errors = dec.decode(messages)
    assert len(values) == len(errors) == len(messages)
    assert values.type == dec.arrow_type
    for ok, err in zip(values.is_valid().to_pylist(), errors.to_pylist()):
        assert ok == (err is None)
        assert err is None or (isinstance(err, str) and err)
    if getattr(dec, "_plan", None) is not None:
        # the columnar CDR path and rosbags' per-message path agree on every row
        want, want_errors = Decoder.decode(dec, messages)
        assert repr(values.to_pylist()) == repr(want.to_pylist())  # repr: NaN equals NaN, -0.0 is not 0.0
        assert errors.to_pylist() == want_errors.to_pylist()
    for m, ok in list(zip(messages, values.is_valid().to_pylist()))[:5]:
        try:
            dec.decode_one(m)
        except DecodeError:
            assert not ok
        else:
            assert ok


@pytest.mark.parametrize("topic", ["/imu", "/chatter", "/all", "/flat", "/log", "/tf", "/ev/json", "/ev/text"])
@given(st.data())
def test_mutated_messages_give_only_decode_errors(corpus, topic, data):
    dec, samples = corpus[topic]
    batch = []
    for _ in range(BATCH):
        base = data.draw(st.sampled_from(samples)) if len(batch) % 5 else samples[0]
        edits = data.draw(st.lists(mutation, min_size=1, max_size=4))
        batch.append(mutate(base, edits))
    check(dec, batch)


@pytest.mark.parametrize("topic", ["/imu", "/all", "/flat", "/log", "/ev/json"])
@given(st.lists(st.binary(max_size=400), min_size=1, max_size=BATCH))
def test_random_bytes_give_only_decode_errors(corpus, topic, blobs):
    check(corpus[topic][0], blobs)


def test_every_prefix_of_a_message_is_an_error_or_the_same_value(corpus):
    """A message cut at every length: an error, never a crash or a value
    that differs from the whole message's (CDR keeps up to 3 bytes of padding)."""
    for topic in ("/imu", "/all", "/flat", "/tf", "/ev/json"):
        dec, samples = corpus[topic]
        whole = samples[3]
        values, errors = dec.decode([whole[:k] for k in range(len(whole))])
        full = dec.decode_one(whole)
        for k, (v, e) in enumerate(zip(values.to_pylist(), errors.to_pylist())):
            assert (v is None) != (e is None)
            if v is not None and topic not in ("/tf",):
                assert v == full, (topic, k, len(whole))


def test_fuzz_corpus_has_every_encoding(corpus):
    encodings = {type(dec).__name__ for dec, _ in corpus.values()}
    assert encodings == {"RosDecoder", "ProtobufDecoder", "JsonDecoder", "JsonTextDecoder"}
