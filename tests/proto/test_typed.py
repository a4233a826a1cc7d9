"""Typed topics across real processes: schemas declared once and learnt by readers,
conflicts refused, numpy arrays and images read in place (zero-copy, read-only,
checked against eviction), protobuf and Foxglove messages decoded, JSON schemas
inferred to Foxglove's parser rules, every bad input refused with nothing published,
and the core usable without numpy or protobuf installed.

Publishers run in forked children (or fresh interpreters where the point is what a
process has imported); the subscriber is the test. Waits are bounded; nothing is
timed.
"""

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from foxglove_schemas_protobuf.Log_pb2 import Log as LogPb
from foxglove_schemas_protobuf.RawImage_pb2 import RawImage as RawImagePb
from helpers.procs import CTX, REPO, child_env, join_ok, recv, wait_until
from hypothesis import given
from hypothesis import strategies as st

import a0py
from a0py import ArgumentError, FrameEvictedError, FrameTooLargeError
from a0py.proto import Schema, SchemaConflictError, SchemaError, protobuf_types, topic_schema
from a0py.proto import topic as tp
from a0py.proto.errors import DecodeError
from a0py.proto.json_schema import foxglove_problems, infer_json_schema

pytestmark = pytest.mark.slow


def _published(topic):
    """How many packets the topic's pubsub arena holds (0 if it does not exist)."""
    t = tp.Topic(topic)
    if not t.exists("pubsub"):
        return 0
    with a0py.Transport(t.arena("pubsub")).lock() as locked:
        return 0 if locked.empty else locked.seq_high - locked.seq_low + 1


def _frame_view_of(topic):
    """A numpy view of the newest frame's bytes in the topic's arena, and the lock
    block it is valid in (the caller closes it)."""
    locked = a0py.Transport(tp.Topic(topic).arena("pubsub")).lock()
    t = locked.__enter__()
    t.jump_tail()
    return locked, np.frombuffer(t.frame().data, np.uint8)


def _publish_in_child(spawn, fn, *args):
    """Runs fn(*args) in a forked child that waits for 'go' on a pipe and answers
    what fn returns; returns (process, connection)."""
    parent, child = CTX.Pipe()

    def main(conn):
        while True:
            msg = conn.recv()
            if msg == "exit":
                return
            conn.send(fn(*args, msg))

    p = spawn(main, child)
    return p, parent


# ------------------------------------------------------------------ arrays


def _array_publisher(topic, kind):
    state = {}

    def publish(msg):
        pub = state.setdefault("pub", a0py.Publisher(topic))
        op, *rest = msg
        if op == "array":
            return pub.pub(rest[0])
        if op == "flood":
            for k in range(rest[0]):
                pub.pub(np.full(rest[1], k % 250, np.uint8))
            return "flooded"
        raise AssertionError(op)

    return publish


def test_array_from_another_process_is_read_in_place_read_only_and_aligned(root, spawn):
    p, conn = _publish_in_child(spawn, _array_publisher("cam", None))
    sub = a0py.SubscriberSync("cam")
    sent = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 1.5
    conn.send(("array", sent))
    recv(conn)
    with sub.read_view(timeout=10) as pkt:
        arr = pkt.array()
        assert arr.dtype == np.float64 and arr.shape == (2, 3, 4)
        np.testing.assert_array_equal(arr, sent)
        assert pkt.zero_copy and pkt.schema.name == "a0py.NDArray"
        # Zero-copy: the array's bytes are the arena's, inside the frame holding the packet.
        locked, frame = _frame_view_of("cam")
        try:
            assert np.shares_memory(arr, frame)
        finally:
            locked.__exit__(None, None, None)
        assert arr.ctypes.data % 16 == 0 and arr.flags.aligned
        # Read-only: writes are refused, and the flag cannot be turned back on.
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0, 0, 0] = 1.0
        with pytest.raises(ValueError):
            arr.setflags(write=True)
        pkt.check_intact()
    with pytest.raises(a0py.ClosedError, match="valid only inside its read_view block"):
        pkt.payload
    conn.send("exit")
    join_ok(p)


@pytest.mark.parametrize("array", [
    np.arange(10, dtype=np.int8),
    np.arange(12, dtype=">i4").reshape(3, 4),
    np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
    np.array(3.5),
    np.zeros((0, 5), np.uint16),
    np.array([True, False, True]),
    (np.arange(6) + 1j).astype(np.complex128).reshape(2, 3),
    np.arange(6, dtype=np.float16)[:, None],  # contiguous, with a length-1 dimension
], ids=["int8", "big-endian", "fortran", "0-d", "empty", "bool", "complex", "length-1"])
def test_arrays_keep_dtype_shape_and_order(root, array):
    pub = a0py.Publisher("arrays")
    sub = a0py.SubscriberSync("arrays", init=a0py.INIT_OLDEST)
    pub.pub(array)
    pkt = sub.read()
    got = pkt.array()
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.flags.f_contiguous == array.flags.f_contiguous
    np.testing.assert_array_equal(got, array)
    assert not got.flags.writeable
    copy = pkt.decode()
    np.testing.assert_array_equal(copy, array)
    assert copy.flags.writeable and not np.shares_memory(copy, got)


def test_callback_subscriber_lends_the_array_for_the_callbacks_duration(root, spawn):
    p, conn = _publish_in_child(spawn, _array_publisher("cb", None))
    seen, done = [], threading.Event()

    def callback(pkt):
        arr = pkt.array()
        seen.append((pkt.zero_copy, arr.flags.writeable, arr.copy(), pkt))
        done.set()

    sub = a0py.Subscriber("cb", callback, zero_copy=True)
    conn.send(("array", np.arange(5, dtype=np.int32)))
    recv(conn)
    assert done.wait(10)
    sub.close()
    zero_copy, writeable, values, pkt = seen[0]
    assert zero_copy and not writeable
    np.testing.assert_array_equal(values, np.arange(5))
    with pytest.raises(a0py.ClosedError):
        pkt.array()  # the lease ended with the callback
    assert sub.evicted == 0
    conn.send("exit")
    join_ok(p)


def test_eviction_during_an_array_read_raises_instead_of_giving_torn_data(root, spawn, monkeypatch):
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    p, conn = _publish_in_child(spawn, _array_publisher("evict", None))
    sub = a0py.SubscriberSync("evict")
    conn.send(("array", np.full(4096, 7, np.uint8)))
    recv(conn)
    with pytest.raises(FrameEvictedError, match=r"topic 'evict'.*evicted while its zero-copy payload"):
        with sub.read_view(timeout=10) as pkt:
            arr = pkt.array()
            assert (arr == 7).all()
            conn.send(("flood", 64, 4096))  # the publisher writes over the ring meanwhile
            assert recv(conn) == "flooded"
            with pytest.raises(FrameEvictedError):
                pkt.check_intact()
            # what the view shows now is someone else's bytes: never handed out as valid
    # The packet counts as missed; the reader goes on from the oldest survivor.
    nxt = sub.read()
    assert nxt.seq > pkt.seq + 1 and sub.missed == nxt.seq - pkt.seq
    conn.send("exit")
    join_ok(p)


def test_callback_whose_packet_is_evicted_meanwhile_is_counted(root, spawn, monkeypatch, caplog):
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    p, conn = _publish_in_child(spawn, _array_publisher("cbevict", None))
    calls = []

    def callback(pkt):
        calls.append(pkt.seq)
        if len(calls) == 1:
            conn.send(("flood", 64, 4096))
            while recv(conn) != "flooded":  # the answer to "array" may come first
                pass

    sub = a0py.Subscriber("cbevict", callback, zero_copy=True)
    conn.send(("array", np.zeros(4096, np.uint8)))  # answered to the callback's recv
    wait_until(lambda: sub.evicted >= 1, "the evicted callback to be counted")
    sub.close()
    assert any("evicted while its zero-copy payload" in r.message for r in caplog.records)
    conn.send("exit")
    join_ok(p)


def test_newest_mode_zero_copy_reads_the_newest(root):
    pub = a0py.Publisher("newest")
    sub = a0py.SubscriberSync("newest", iter=a0py.ITER_NEWEST)
    for k in range(5):
        pub.pub(np.full(3, k, np.int64))
    with sub.read_view(0) as pkt:
        assert (pkt.array() == 4).all()
    pub.pub(np.full(3, 9, np.int64))
    with sub.read_view(0) as pkt:
        assert (pkt.array() == 9).all()
    with pytest.raises(a0py.A0TimeoutError):
        with sub.read_view(0):
            pass


def test_read_view_moves_past_a_frame_that_is_not_a_packet(root):
    pub = a0py.Publisher("corrupt")
    sub = a0py.SubscriberSync("corrupt", init=a0py.INIT_OLDEST)
    a0py.Transport(tp.Topic("corrupt").arena("pubsub")).write(b"not a packet at all")
    pub.pub(np.arange(3))
    with pytest.raises(a0py.PacketCorruptError):
        with sub.read_view(0):
            pass
    with sub.read_view(0) as pkt:
        np.testing.assert_array_equal(pkt.array(), np.arange(3))


# ------------------------------------------------------------------ bad arrays


@pytest.mark.parametrize("bad, message", [
    (np.array(["a", "b"]), "dtype <U1 cannot be published"),
    (np.array([object(), 1]), "dtype object cannot be published"),
    (np.zeros(2, dtype=[("x", "f4"), ("y", "i2")]), "cannot be published"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "cannot be published"),
    (np.arange(10)[::2], "not contiguous"),
    (np.arange(12).reshape(3, 4)[:, 1:3], "not contiguous"),
], ids=["str", "object", "record", "datetime", "step", "slice"])
def test_unsupported_or_strided_arrays_are_refused_and_nothing_is_published(root, bad, message):
    pub = a0py.Publisher("bad")
    with pytest.raises(ArgumentError, match=f"topic 'bad': .*{message}"):
        pub.pub(bad)
    assert _published("bad") == 0
    assert topic_schema("bad") is None  # a refused first value declares nothing


def test_a_default_topic_too_small_says_so_when_the_publisher_is_made(root):
    frame = np.zeros((1080, 1920, 3), np.uint8)
    a0py.SubscriberSync("small")  # a subscriber made the topic first, at the default size
    with pytest.raises(FrameTooLargeError, match=r"topic 'small'.*size='32M'"):
        a0py.Publisher("small", like=frame)
    assert topic_schema("small") is None
    # Without an example, the first publish says the same, and publishes nothing.
    pub = a0py.Publisher("small")
    with pytest.raises(FrameTooLargeError, match=r"A0PY_TOPIC_SIZES=small=32M"):
        pub.pub(frame)
    assert _published("small") == 0


def test_a_publisher_that_creates_the_topic_makes_room_for_four_frames(root):
    frame = np.zeros((1080, 1920, 3), np.uint8)
    pub = a0py.Publisher("big", like=frame)
    assert tp.Topic("big").arena("pubsub").size == 32 << 20
    assert pub.schema.name == "a0py.NDArray"
    sub = a0py.SubscriberSync("big", init=a0py.INIT_OLDEST)
    frame[100, 200] = (1, 2, 3)
    pub.pub(frame)
    with sub.read_view(0) as pkt:
        assert tuple(pkt.array()[100, 200]) == (1, 2, 3)


# ------------------------------------------------------------------ images


def test_raw_image_pixels_are_viewed_in_place(root):
    pub = a0py.Publisher("image")
    sub = a0py.SubscriberSync("image", init=a0py.INIT_OLDEST)
    image = np.random.default_rng(1).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    pub.pub_image(image, frame_id="camera", timestamp=1_700_000_000_123_456_789)
    with sub.read_view(0) as pkt:
        assert pkt.schema.name == "foxglove.RawImage" and pkt.schema.encoding == "protobuf"
        pixels = pkt.array()
        np.testing.assert_array_equal(pixels, image)
        assert not pixels.flags.writeable
        locked, frame = _frame_view_of("image")
        try:
            assert np.shares_memory(pixels, frame)
        finally:
            locked.__exit__(None, None, None)
        msg = pkt.decode()
        assert isinstance(msg, RawImagePb)  # the process has Foxglove's class: it is used
        assert (msg.width, msg.height, msg.encoding, msg.step, msg.frame_id) == (64, 48, "rgb8", 192, "camera")
        assert (msg.timestamp.seconds, msg.timestamp.nanos) == (1_700_000_000, 123_456_789)
    # An array published to an image topic goes as a RawImage too.
    pub.pub(np.zeros((2, 3), np.uint16))
    mono = sub.read()
    assert mono.decode().encoding == "mono16" and mono.array().shape == (2, 3)


def test_foxglove_sdk_messages_and_compressed_images(root):
    import foxglove.messages as fm

    pub = a0py.Publisher("sdkimage")
    sub = a0py.SubscriberSync("sdkimage", init=a0py.INIT_OLDEST)
    pub.pub(fm.RawImage(width=2, height=1, encoding="rgb8", step=6, data=b"\x01\x02\x03\x04\x05\x06"))
    assert sub.read().array().tolist() == [[[1, 2, 3], [4, 5, 6]]]
    jpeg = b"\xff\xd8\xff\xe0fake-jpeg-bytes\xff\xd9"
    cpub = a0py.Publisher("jpeg")
    cpub.pub_image(jpeg, format="jpeg", frame_id="cam")
    msg = a0py.SubscriberSync("jpeg", init=a0py.INIT_OLDEST).read().decode()
    assert (msg.format, msg.data, msg.frame_id) == ("jpeg", jpeg, "cam")
    with pytest.raises(ArgumentError, match="format='jpeg'"):
        cpub.pub_image(jpeg)


# ------------------------------------------------------------------ protobuf, schemas


def test_protobuf_messages_round_trip_and_a_fresh_process_decodes_them_from_the_schema(root):
    pub = a0py.Publisher("log")
    pub.pub(LogPb(message="motor hot", name="arm", level=LogPb.WARNING))
    got = a0py.SubscriberSync("log", init=a0py.INIT_OLDEST).read().decode()
    assert isinstance(got, LogPb) and got.message == "motor hot" and got.level == LogPb.WARNING
    # A process that never imported Foxglove's classes builds them from the schema alone.
    code = textwrap.dedent("""
        import sys, a0py
        pkt = a0py.SubscriberSync("log", init=a0py.INIT_OLDEST).read()
        msg = pkt.decode()
        print(pkt.schema.name, type(msg).DESCRIPTOR.full_name, msg.message, msg.name, msg.level)
        print(any(m.startswith("foxglove") for m in sys.modules))
    """)
    r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                       text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["foxglove.Log foxglove.Log motor hot arm 3", "False"]


def test_ndarray_messages_are_real_protobuf(root):
    pub = a0py.Publisher("ndpb")
    pub.pub(np.arange(6, dtype="<i2").reshape(2, 3))
    pkt = a0py.SubscriberSync("ndpb", init=a0py.INIT_OLDEST).read()
    cls = protobuf_types.message_class(pkt.schema)
    msg = cls.FromString(pkt.payload)  # the official decoder, padding field skipped
    assert (msg.dtype, list(msg.shape), list(msg.strides)) == ("<i2", [2, 3], [6, 2])
    assert msg.data == np.arange(6, dtype="<i2").tobytes()


def _declare_log(topic, msg):
    a0py.Publisher(topic).pub(LogPb(message=msg))
    return "declared"


def test_a_second_publisher_declaring_another_schema_is_refused(root, spawn):
    p, conn = _publish_in_child(spawn, _declare_log, "conflict")
    conn.send("first")
    assert recv(conn) == "declared"
    with pytest.raises(SchemaConflictError, match=r"topic 'conflict' already carries foxglove.Log "
                                                 r"\(protobuf\).*declares foxglove.RawImage"):
        a0py.Publisher("conflict", schema=Schema("foxglove.RawImage", "protobuf",
                                                 protobuf_types.descriptor_set_of(RawImagePb.DESCRIPTOR)))
    # A value of another type on a publisher of that topic: refused, nothing published.
    pub = a0py.Publisher("conflict")
    with pytest.raises(SchemaError, match=r"topic 'conflict' carries foxglove.Log"):
        pub.pub(np.zeros(3))
    with pytest.raises(SchemaError, match=r"carries foxglove.Log"):
        pub.pub_json({"a": 1})
    assert _published("conflict") == 1
    # The same type from Foxglove's other package (the SDK's descriptor set differs in
    # bytes, not in the wire format) is the same schema.
    import foxglove.messages as fm

    sdk = fm.Log.get_schema()
    a0py.Publisher("conflict", schema=Schema(sdk.name, sdk.encoding, bytes(sdk.data)))
    pub.pub(fm.Log(message="from the sdk"))
    assert _published("conflict") == 2
    conn.send("exit")
    join_ok(p)


@pytest.mark.parametrize("schema, message", [
    (Schema("x.Y", "protobuf", b"\x0a\x05garbage"), "not a FileDescriptorSet"),
    (Schema("x.Missing", "protobuf", protobuf_types.descriptor_set_of(LogPb.DESCRIPTOR)),
     "does not define a message of that name"),
    (Schema("j", "jsonschema", "{not json"), "is not JSON"),
    (Schema("j", "jsonschema", '{"type": "array"}'), "must describe an object"),
    (Schema("j", "jsonschema", '{"type": "object"}'), "must describe an object"),
    (Schema("m", "ros2msg", b"\xff\xfe"), "is not UTF-8"),
], ids=["protobuf-garbage", "protobuf-no-type", "json-garbage", "json-array", "json-no-properties",
        "ros2msg-binary"])
def test_a_schema_that_does_not_parse_is_refused_before_anything_is_made(root, schema, message):
    with pytest.raises(SchemaError, match=f"topic 'unparsed': .*{message}"):
        a0py.Publisher("unparsed", schema=schema)
    assert "unparsed" not in tp.list_topics()


def test_schema_arguments_are_checked():
    with pytest.raises(ArgumentError, match="not one of"):
        Schema("x", "avro", b"")
    with pytest.raises(ArgumentError, match="needs a name"):
        Schema("", "protobuf", b"")
    with pytest.raises(ArgumentError, match="bytes or str"):
        Schema("x", "jsonschema", 3)
    assert Schema("x", "ros2msg", "int32 a").message_encoding == "cdr"
    assert Schema("x", "jsonschema", "{}").message_encoding == "json"


def test_declared_schema_is_what_every_reader_sees(root):
    declared = Schema.json_schema("Odom", {"type": "object", "properties": {"x": {"type": "number"}}})
    sub = a0py.SubscriberSync("odom")  # made before the schema was declared
    pub = a0py.Publisher("odom", schema=declared)
    pub.pub_json({"x": 1.5, "extra": None})
    pkt = sub.read_blocking(timeout=10)
    assert pkt.schema == declared and topic_schema("odom") == declared
    assert pkt.decode() == {"x": 1.5, "extra": None}
    with pytest.raises(SchemaError, match="carries Odom"):
        pkt.array()
    with pytest.raises(ArgumentError, match="a JSON topic's messages are objects"):
        pub.pub_json([1, 2])
    assert _published("odom") == 1


def test_untyped_topics_decode_to_their_bytes(root):
    a0py.Publisher("plain").pub(b"\x00raw")
    pkt = a0py.SubscriberSync("plain", init=a0py.INIT_OLDEST).read()
    assert pkt.schema is None and pkt.decode() == b"\x00raw"
    with pytest.raises(SchemaError, match="has no schema"):
        pkt.array()
    with pytest.raises(ArgumentError, match="pub\\(\\) takes bytes"):
        a0py.Publisher("plain").pub(3.5)


def test_a_payload_that_does_not_decode_is_a_decode_error(root):
    pub = a0py.Publisher("liar", schema=Schema("foxglove.Log", "protobuf",
                                               protobuf_types.descriptor_set_of(LogPb.DESCRIPTOR)))
    pub.pub(b"\xff\xff\xff")  # raw bytes are taken as they are: the reader finds out
    pub2 = a0py.Publisher("liar-array")
    pub2.pub(np.zeros(4))
    pub2.pub(b"\x0a\x03<f8\x22\x05abc")  # says 5 bytes of data, holds 3
    sub = a0py.SubscriberSync("liar", init=a0py.INIT_OLDEST)
    with pytest.raises(DecodeError, match=r"topic 'liar' seq 1: not a foxglove.Log message"):
        sub.read().decode()
    sub2 = a0py.SubscriberSync("liar-array", init=a0py.INIT_OLDEST)
    sub2.read().array()
    with pytest.raises(DecodeError, match=r"topic 'liar-array' seq 2: not an a0py.NDArray"):
        sub2.read().array()


@pytest.mark.parametrize("payload", [
    b"\x0a\x03<f8\x12\x01\x04\x22\x10" + bytes(16),              # shape 4 of f8 needs 32 bytes
    b"\x0a\x02|O\x22\x08" + bytes(8),                            # object dtype
    b"\x0a\x03<f8\x12\x01\x02\x1a\x02\x08\x10\x22\x10" + bytes(16),  # strides (8, 16) for shape (2,)
    b"\x0a\x03<f8\x12\x02\xff\xff",                               # a varint past the end
], ids=["size", "object", "strides", "truncated"])
def test_hostile_array_headers_never_reach_numpy(root, payload):
    pub = a0py.Publisher("hostile")
    pub.pub(np.zeros(1))
    pub.pub(payload)
    sub = a0py.SubscriberSync("hostile", init=a0py.INIT_OLDEST)
    sub.read().array()
    with pytest.raises(DecodeError):
        sub.read().array()


# ------------------------------------------------------------------ JSON schemas


def test_inferred_schemas_follow_foxglove_rules_for_nulls_empty_nested_and_mixed_lists():
    message = {
        "null": None, "empty": [], "nested": [[1, 2], [3]], "mixed": [1, "a"], "with_null": [1, None],
        "objs": [{"a": 1, "b": "x", "c": None}, {"a": 2.5, "b": 3, "d": [True]}],
        "deep": {"p": {"q": [{"r": None}, {"r": {"s": 1}}]}}, "n": 3, "s": "t", "t": False,
    }
    schema = infer_json_schema(message)
    assert foxglove_problems(schema) == []
    assert schema["properties"].keys() == {"objs", "deep", "n", "s", "t"}
    assert schema["properties"]["objs"]["items"]["properties"] == {
        "a": {"type": "number"}, "d": {"type": "array", "items": {"type": "boolean"}}}
    assert schema["properties"]["deep"]["properties"]["p"]["properties"]["q"]["items"] == {
        "type": "object", "properties": {}}
    assert _validates(schema, message)


@pytest.mark.parametrize("schema, problem", [
    ({"type": "object"}, 'needs "properties"'),
    ({"type": "object", "properties": {"a": {"type": "null"}}}, "type 'null'"),
    ({"type": "object", "properties": {"a": {"type": ["number", "null"]}}}, "is not one of"),
    ({"type": "object", "properties": {"a": {}}}, "type None"),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "array items need one type"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "array"}}}}, "array items"),
    ({"type": "object", "properties": {"a": {"type": "object"}}}, 'root.a: an object schema needs'),
    ({"type": "object", "properties": {"a": {"oneOf": [{"const": "x"}]}}}, "numeric consts"),
], ids=["no-properties", "null", "type-list", "no-type", "no-items", "nested-array", "nested-object",
        "oneOf"])
def test_foxglove_rules_find_what_its_parser_rejects(schema, problem):
    problems = foxglove_problems(schema)
    assert problems and problem in problems[0]


def _validates(schema, value):
    """JSON Schema validation of the subset a0py emits (type, properties, items)."""
    kind = schema.get("type")
    if kind == "object":
        return isinstance(value, dict) and all(
            _validates(sub, value[key]) for key, sub in schema["properties"].items() if key in value)
    if kind == "array":
        return isinstance(value, list) and all(_validates(schema["items"], v) for v in value)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    return False


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=25)


@given(st.dictionaries(st.text(max_size=4), _json, max_size=6))
def test_every_inferred_schema_follows_the_rules_and_accepts_its_message(message):
    schema = infer_json_schema(message)
    assert foxglove_problems(schema) == []
    assert _validates(schema, json.loads(json.dumps(message)))


def test_pub_json_declares_an_inferred_schema_and_later_publishers_share_it(root, spawn):
    def publish_json(topic, obj, _msg):
        a0py.Publisher(topic).pub_json(obj)
        return "done"

    p, conn = _publish_in_child(spawn, publish_json, "telemetry", {"x": 1, "gone": None, "l": []})
    conn.send("go")
    recv(conn)
    schema = topic_schema("telemetry")
    assert (schema.encoding, schema.message_encoding) == ("jsonschema", "json")
    assert schema.json() == {"type": "object", "properties": {"x": {"type": "number"}}}
    # Another publisher whose first message differs adopts the topic's schema.
    a0py.Publisher("telemetry").pub_json({"y": "other"})
    assert topic_schema("telemetry") == schema
    assert [pkt.decode() for pkt in _read_all("telemetry")] == [{"x": 1, "gone": None, "l": []},
                                                               {"y": "other"}]
    conn.send("exit")
    join_ok(p)


def _read_all(topic):
    sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST)
    out = []
    while (pkt := sub.read()) is not None:
        out.append(pkt)
    return out


# ------------------------------------------------------------------ CLI


def _a0py(*args):
    return subprocess.run([sys.executable, "-m", "a0py", *args], env=child_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_info_shows_the_schema_and_echo_decodes(root):
    a0py.Publisher("cli/log").pub(LogPb(message="hello", name="n"))
    a0py.Publisher("cli/arr").pub(np.arange(4, dtype=np.uint8))
    info = _a0py("info", "cli/log")
    assert info.returncode == 0, info.stderr
    assert "foxglove.Log, encoding protobuf" in info.stdout and "messages protobuf" in info.stdout
    echo = _a0py("echo", "cli/log", "--init", "oldest", "--once")
    assert echo.returncode == 0, echo.stderr
    assert json.loads(echo.stdout) == {"message": "hello", "name": "n"}
    echo = _a0py("echo", "cli/arr", "--init", "oldest", "--once")
    assert echo.stdout.strip() == "uint8 (4,) [0 1 2 3]"


# ------------------------------------------------------------------ without the extras


_BLOCKER = textwrap.dedent("""
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("numpy", "google", "foxglove", "foxglove_schemas_protobuf"):
                raise ImportError(f"{name} is blocked for this test")
    sys.meta_path.insert(0, _Block())
""")


def test_the_core_works_without_numpy_or_protobuf(root):
    a0py.Publisher("extras/arr").pub(np.arange(3))
    a0py.Publisher("extras/log").pub(LogPb(message="m"))
    code = _BLOCKER + textwrap.dedent("""
        import a0py
        from a0py.proto import ExtraNotInstalledError
        pub = a0py.Publisher("extras/json")
        pub.pub_json({"a": [1, None]})
        pub.pub(b'{"b": 2}')  # raw bytes: already JSON
        sub = a0py.SubscriberSync("extras/json", init=a0py.INIT_OLDEST)
        print(sub.read().decode(), sub.read().decode(), sub.read())
        for topic in ("extras/arr", "extras/log"):
            pkt = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST).read()
            try:
                pkt.array() if topic.endswith("arr") else pkt.decode()
            except ExtraNotInstalledError as e:
                print(pkt.schema.name, "|", e)
        assert "numpy" not in sys.modules and "google.protobuf" not in sys.modules
    """)
    r = subprocess.run([sys.executable, "-c", "import sys\n" + code], env=child_env(), cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "{'a': [1, None]} {'b': 2} None"
    assert lines[1].startswith("a0py.NDArray | ") and "numpy" in lines[1] and "a0py[typed]" in lines[1]
    assert lines[2].startswith("foxglove.Log | ") and "protobuf" in lines[2] and "a0py[typed]" in lines[2]
