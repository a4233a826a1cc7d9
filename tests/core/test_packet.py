"""Packets: a0py.Packet, the headers multimap, the byte format, the standard headers
every writer adds, zero-copy writes, and corrupt bytes giving clear errors.

Most tests use a heap arena and the binding's PacketWriter/PacketReader directly (the
topic-free layer under Publisher/SubscriberSync); the fork test uses a real child.
"""

import json
import os
import struct
import time
import uuid

import pytest

import a0py
from a0py import ArgumentError, FrameTooLargeError, LockError, PacketCorruptError, _core

STD = ("a0_time_mono", "a0_time_wall", "a0_writer_id", "a0_writer_seq", "a0_transport_seq")


@pytest.fixture
def arena():
    a = a0py.Arena.heap(1 << 20)
    yield a
    a.close()


def writer_reader(arena, init=0, iter=0):
    return _core.PacketWriter(arena), _core.PacketReader(arena, init, iter)


# ------------------------------------------------------------ Packet objects


def test_packet_holds_headers_payload_and_a_fresh_uuid():
    p = a0py.Packet({"k": "v"}, b"data")
    q = a0py.Packet([("a", "1"), ("a", "2")], "text é")
    assert p.headers == [("k", "v")]
    assert p.payload == b"data"
    assert str(uuid.UUID(p.id)) == p.id and uuid.UUID(p.id).version == 4
    assert p.id != q.id
    assert q.payload == "text é".encode()
    assert q.headers.getall("a") == ["1", "2"] and q.headers["a"] == "1"
    assert p.seq is None and p.missed == 0


def test_packet_of_a_payload_alone_and_an_empty_packet():
    assert a0py.Packet(b"x").payload == b"x" and len(a0py.Packet(b"x").headers) == 0
    assert a0py.Packet("s").payload == b"s"
    empty = a0py.Packet()
    assert empty.payload == b"" and list(empty.headers) == []


def test_packet_keeps_a_bytes_like_payload_without_copying():
    buf = bytearray(b"abc")
    p = a0py.Packet(None, buf)
    buf[0] = ord("z")
    assert bytes(p.payload) == b"zbc"


def test_packet_id_can_be_given():
    fixed = "12345678-9abc-4def-8123-456789abcdef"
    assert a0py.Packet(b"", id=fixed).id == fixed
    assert a0py.Packet(b"", id=uuid.UUID(fixed).bytes).id == fixed
    with pytest.raises(ArgumentError, match="UUID"):
        a0py.Packet(b"", id="not-a-uuid")


def test_headers_multimap_api():
    h = a0py.Headers([("a", "1"), ("b", "2"), ("a", "3")])
    assert len(h) == 3 and list(h) == [("a", "1"), ("b", "2"), ("a", "3")]
    assert h["a"] == "1" and h.get("a") == "1" and h.get("zz", "d") == "d"
    assert h.getall("a") == ["1", "3"] and h.getall("zz") == []
    assert "b" in h and "zz" not in h
    assert h.keys() == ["a", "b", "a"]
    assert h == a0py.Headers(h.items()) and h != [("a", "1")]
    with pytest.raises(KeyError):
        h["zz"]


@pytest.mark.parametrize("headers, match", [
    ({"k": 1}, "value must be str"),
    ({1: "v"}, "key must be str"),
    ({"": "v"}, "may not be empty"),
    ({"a\0b": "v"}, "NUL"),
    ([("a", "b", "c")], r"\(key, value\) pair"),
    ("k=v", "mapping or an iterable"),
    (42, "mapping or an iterable"),
    ({"k": "\ud800"}, "UTF-8"),
])
def test_bad_headers_are_argument_errors_naming_the_problem(headers, match):
    with pytest.raises(ArgumentError, match=match):
        a0py.Packet(headers, b"")


def test_bad_payload_is_an_argument_error():
    with pytest.raises(ArgumentError, match="payload must be bytes"):
        a0py.Packet({}, 12)
    with pytest.raises(ArgumentError, match="UTF-8"):
        a0py.Packet({}, "\udfff")


def test_json_helper():
    assert a0py.Packet(b'{"a": [1, 2]}').json() == {"a": [1, 2]}
    with pytest.raises(ValueError):
        a0py.Packet(b"not json").json()


# ------------------------------------------------------------ the byte format


def test_to_bytes_has_the_documented_layout_and_round_trips():
    p = a0py.Packet([("key", "value"), ("k2", "")], b"payload")
    raw = p.to_bytes()
    _magic, version, flags = struct.unpack_from("<IHH", raw, 0)
    assert raw[:4] == b"A0PK" and version == 1 and flags == 0
    assert raw[8:24] == uuid.UUID(p.id).bytes
    count, reserved, payload_off, payload_size = struct.unpack_from("<IIQQ", raw, 24)
    assert (count, reserved, payload_size) == (2, 0, 7)
    assert payload_off % 16 == 0 and raw[payload_off:] == b"payload"
    assert raw[48:96] == bytes(48)  # no standard block in a packet made here (flags 0)
    key_off, key_len, val_off, val_len = struct.unpack_from("<IIII", raw, 96)
    assert raw[key_off:key_off + key_len] == b"key" and raw[key_off + key_len] == 0
    assert raw[val_off:val_off + val_len] == b"value"
    q = a0py.Packet.from_bytes(raw)
    assert (q.id, q.headers, q.payload) == (p.id, p.headers, p.payload)
    assert q.to_bytes() == raw


def _corruptions(raw):
    payload_off = struct.unpack_from("<Q", raw, 32)[0]
    yield "magic", b"XXXX" + raw[4:]
    yield "version", raw[:4] + struct.pack("<H", 9) + raw[6:]
    yield "flags", raw[:6] + struct.pack("<H", 2) + raw[8:]
    yield "payload_off", raw[:24] + struct.pack("<I", 10**6) + raw[28:]
    yield "payload_off", raw[:32] + struct.pack("<Q", payload_off + 16) + raw[40:]
    yield "payload_size", raw[:40] + struct.pack("<Q", 10**9) + raw[48:]
    yield "payload_size", raw[:-1]
    yield "size", raw[:20]


def test_corrupt_bytes_are_refused_naming_the_field():
    raw = a0py.Packet([("key", "value")], b"payload").to_bytes()
    for field, bad in _corruptions(raw):
        with pytest.raises(PacketCorruptError, match=f"field {field}"):
            a0py.Packet.from_bytes(bad)


def test_header_entry_pointing_outside_and_non_utf8_headers_are_corrupt():
    raw = bytearray(a0py.Packet([("key", "value")], b"p").to_bytes())
    bad = bytearray(raw)
    struct.pack_into("<I", bad, 96, 0xFFFFFF00)  # key offset far past the metadata
    with pytest.raises(PacketCorruptError, match=r"header 0.*header key"):
        a0py.Packet.from_bytes(bytes(bad))
    bad = bytearray(raw)
    key_off = struct.unpack_from("<I", bad, 96)[0]
    bad[key_off] = 0xFF  # not UTF-8
    with pytest.raises(PacketCorruptError, match="not UTF-8"):
        a0py.Packet.from_bytes(bytes(bad))


def test_from_bytes_never_crashes_on_random_bytes():
    rng = __import__("random").Random(7)
    good = a0py.Packet([("a", "b"), ("c", "d")], b"xyz").to_bytes()
    for _ in range(3000):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        try:
            a0py.Packet.from_bytes(bytes(bad))
        except PacketCorruptError:
            pass
    with pytest.raises(ArgumentError):
        a0py.Packet.from_bytes("a str")


# ------------------------------------------------------------ writers


def test_every_writer_adds_the_standard_headers(arena):
    w, r = writer_reader(arena)
    mono0, wall0 = time.monotonic_ns(), time.time_ns()
    seqs = [w.pub(b"a", headers={"user": "1"}), w.pub(b"b")]
    mono1, wall1 = time.monotonic_ns(), time.time_ns()
    other = _core.PacketWriter(arena)
    seqs.append(other.pub(b"c"))
    pkts = [r.read() for _ in range(3)]
    assert r.read() is None
    for pkt, seq in zip(pkts, seqs):
        assert pkt.headers.keys()[:5] == list(STD)
        assert pkt.seq == seq == int(pkt.headers["a0_transport_seq"])
    assert pkts[0].headers.getall("user") == ["1"]
    for pkt in pkts[:2]:
        assert mono0 <= int(pkt.headers["a0_time_mono"]) <= mono1
        assert wall0 - 10**9 <= int(pkt.headers["a0_time_wall"]) <= wall1 + 10**9
        assert pkt.headers["a0_writer_id"] == w.writer_id
    assert [p.headers["a0_writer_seq"] for p in pkts] == ["1", "2", "1"]
    assert pkts[2].headers["a0_writer_id"] == other.writer_id != w.writer_id
    assert w.writer_seq == 2
    assert len({p.id for p in pkts}) == 3


def test_standard_headers_are_a_fixed_binary_block_in_the_frame(arena):
    w = _core.PacketWriter(arena)
    seq = w.pub(b"pl", headers={"k": "v"})
    with a0py.Transport(arena).lock() as t:
        t.jump_tail()
        raw = t.frame().tobytes()
    flags, = struct.unpack_from("<H", raw, 6)
    mono, wall = struct.unpack_from("<QQ", raw, 48)
    writer_seq, transport_seq = struct.unpack_from("<QQ", raw, 80)
    assert flags == 1 and transport_seq == seq and writer_seq == 1
    assert str(uuid.UUID(bytes=raw[64:80])) == w.writer_id
    assert struct.unpack_from("<I", raw, 24)[0] == 1  # the index holds only the user's header
    pkt = a0py.Packet.from_bytes(raw)
    assert pkt.headers["a0_time_mono"] == str(mono) and pkt.headers["a0_time_wall"] == str(wall)
    assert pkt.to_bytes() == raw


def test_standard_headers_cannot_be_set_by_the_caller(arena):
    w = _core.PacketWriter(arena)
    for key in STD:
        with pytest.raises(ArgumentError, match="written by every writer"):
            w.pub(b"x", headers={key: "1"})
    with pytest.raises(ArgumentError, match="written by every writer"):
        w.alloc(4, headers={"a0_time_wall": "0"})


def test_publishing_a_packet_keeps_its_id_and_headers_and_renews_the_standard_ones(arena):
    w, r = writer_reader(arena)
    w.pub(b"first", headers={"h": "1"})
    got = r.read()
    w2 = _core.PacketWriter(arena)
    w2.pub(got, headers={"extra": "y"})  # republish a packet read from an arena
    again = r.read()
    assert again.id == got.id and again.payload == b"first"
    assert again.headers.getall("h") == ["1"] and again.headers["extra"] == "y"
    assert again.headers.getall("a0_writer_id") == [w2.writer_id]
    assert again.headers["a0_transport_seq"] == str(again.seq) != got.headers["a0_transport_seq"]
    mine = a0py.Packet({"a0_writer_id": "forged", "x": "1"}, b"p")
    w.pub(mine)
    third = r.read()
    assert third.id == mine.id and third.headers.getall("a0_writer_id") == [w.writer_id]


def test_pub_takes_str_bytes_like_and_refuses_other_types(arena):
    w, r = writer_reader(arena)
    w.pub("é")
    w.pub(memoryview(b"mv"))
    w.pub(bytearray(b"ba"))
    assert [r.read().payload for _ in range(3)] == ["é".encode(), b"mv", b"ba"]
    with pytest.raises(ArgumentError, match="pub\\(\\) takes"):
        w.pub(12)
    with pytest.raises(ArgumentError, match="pub\\(\\) takes"):
        w.pub(None)


def test_a_packet_too_large_for_the_arena_names_the_limit():
    small = a0py.Arena.heap(8192)
    w = _core.PacketWriter(small, label="topic 'tiny'")
    with pytest.raises(FrameTooLargeError, match=r"does not fit topic 'tiny'.*at most \d+ bytes"):
        w.pub(bytes(9000))
    assert w.writer_seq == 0


def test_zero_copy_alloc_publishes_on_success_and_discards_on_error(arena):
    w, r = writer_reader(arena)
    with w.alloc(5, headers={"h": "v"}) as buf:
        assert isinstance(buf, memoryview) and not buf.readonly and len(buf) == 5
        buf[:] = b"hello"
    pkt = r.read()
    assert pkt.payload == b"hello" and pkt.headers["h"] == "v"
    with pytest.raises(RuntimeError), w.alloc(3) as buf:
        buf[:] = b"bad"
        raise RuntimeError("changed my mind")
    assert r.read() is None
    assert w.pub(b"after") == pkt.seq + 1  # the discarded frame took no seq
    assert r.read().headers["a0_writer_seq"] == "2"
    with pytest.raises(ValueError):
        buf[0]  # the view is released with the lock


def test_publishing_inside_an_alloc_block_of_the_same_arena_is_a_lock_error(arena):
    w = _core.PacketWriter(arena)
    with w.alloc(1) as buf:
        buf[0] = 1
        with pytest.raises(LockError, match="already holds its lock"):
            w.pub(b"nested")


def test_closed_writer_and_reader_raise_closed_error(arena):
    w, r = writer_reader(arena)
    w.close()
    r.close()
    with pytest.raises(a0py.ClosedError):
        w.pub(b"x")
    with pytest.raises(a0py.ClosedError):
        r.read()


def test_a_forked_child_writes_with_a_new_writer_id(arena):
    shm = f"a0py-test-pkt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    shared = a0py.Arena.shm(shm, 1 << 16)
    try:
        w = _core.PacketWriter(shared)
        w.pub(b"parent")
        pid = os.fork()
        if pid == 0:  # the child: same writer object, must not reuse the parent's identity
            code = 0
            try:
                w.pub(b"child")
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        r = _core.PacketReader(shared, 0, 0)
        a, b = r.read(), r.read()
        assert a.payload == b"parent" and b.payload == b"child"
        assert a.headers["a0_writer_id"] != b.headers["a0_writer_id"]
        assert b.headers["a0_writer_seq"] == "1"
    finally:
        shared.close()
        a0py.Arena.unlink_shm(shm)


# ------------------------------------------------------------ readers


def test_a_corrupt_frame_is_a_clear_error_and_the_reader_goes_on(arena):
    w, r = writer_reader(arena)
    w.pub(b"good1")
    a0py.Transport(arena).write(b"definitely not a packet, just some bytes here" * 3)
    w.pub(b"good2")
    assert r.read().payload == b"good1"
    with pytest.raises(PacketCorruptError, match=r"frame seq 2 \(135 bytes\) is not an a0py packet: field magic"):
        r.read()
    assert r.read().payload == b"good2"
    batch = _core.PacketReader(arena, 0, 0).read_batch(10)
    assert [type(x) for x in batch] == [a0py.Packet, PacketCorruptError, a0py.Packet]


def test_read_batch_stops_at_max_bytes_but_always_returns_one(arena):
    w, _ = writer_reader(arena)
    for i in range(5):
        w.pub(bytes([i]) * 1000)
    r = _core.PacketReader(arena, 0, 0)
    assert [p.payload[0] for p in r.read_batch(64, max_bytes=1500)] == [0, 1]  # 1000 < 1500: one more
    assert [p.payload[0] for p in r.read_batch(64, max_bytes=1)] == [2]
    assert [p.payload[0] for p in r.read_batch(1, max_bytes=10**9)] == [3]
    assert [p.payload[0] for p in r.read_batch(64)] == [4]
    assert r.read_batch(64, max_bytes=1) == []
    with pytest.raises(ArgumentError, match="max_bytes"):
        r.read_batch(64, max_bytes=-1)


def test_reader_arguments_are_checked(arena):
    with pytest.raises(ArgumentError, match="init must be"):
        _core.PacketReader(arena, 5, 0)
    with pytest.raises(ArgumentError, match="iter must be"):
        _core.PacketReader(arena, 0, True)
    with pytest.raises(ArgumentError, match=r"needs an a0py\.Arena"):
        _core.PacketReader("arena", 0, 0)
    r = _core.PacketReader(arena, 0, 0)
    with pytest.raises(ArgumentError, match="timeout"):
        r.read_blocking(timeout=-1)
    with pytest.raises(ArgumentError):
        _core.PacketWriter(arena).alloc(-1)


def test_payload_of_a_read_packet_is_bytes_and_headers_decode_lazily(arena):
    w, r = writer_reader(arena)
    w.pub(json.dumps({"x": 1}).encode(), headers=[("a", "1"), ("a", "2")])
    pkt = r.read()
    assert type(pkt.payload) is bytes and pkt.json() == {"x": 1}
    assert pkt.headers.getall("a") == ["1", "2"]
    assert uuid.UUID(pkt.id).version == 4
    assert a0py.Packet.from_bytes(pkt.to_bytes()).headers == pkt.headers


# ------------------------------------------------------------ appending headers to encoded packets


def test_packet_append_headers_keeps_everything_byte_for_byte(arena):
    w, r = writer_reader(arena, init=0)
    w.pub(b"p" * 1000, [("k", "v"), ("k", "vé")])
    w.pub(b"", [])
    for pkt in (r.read(), r.read()):
        data = pkt.to_bytes()
        out = _core.packet_append_headers(data, [("x.origin", "o"), ("x.seq", "7")], "x.origin")
        got = a0py.Packet.from_bytes(out)
        assert got.id == pkt.id and got.payload == pkt.payload
        # the writer's headers, standard block included, then the new ones
        assert list(got.headers) == list(pkt.headers) + [("x.origin", "o"), ("x.seq", "7")]
        assert out[48:96] == data[48:96] and out[6:8] == data[6:8]
        # the same bytes as decoding and encoding anew would give, with the block kept
        assert _core.packet_has_header(out, "x.origin") and not _core.packet_has_header(data, "x.origin")


def test_packet_append_headers_refuses_a_packet_that_has_the_key_and_bad_input():
    marked = a0py.Packet([("a", "1"), ("x.origin", "o")], b"z").to_bytes()
    assert _core.packet_append_headers(marked, [("b", "2")], "x.origin") is None
    assert _core.packet_append_headers(marked, [("b", "2")]) is not None
    with pytest.raises(PacketCorruptError, match="magic"):
        _core.packet_append_headers(b"x" * 200, [])
    with pytest.raises(PacketCorruptError, match="magic"):
        _core.packet_has_header(b"x" * 200, "k")
    broken = bytearray(marked)
    struct.pack_into("<I", broken, 96, 1 << 30)  # header 0's key offset far out of the packet
    with pytest.raises(PacketCorruptError, match="header 0"):
        _core.packet_append_headers(bytes(broken), [])
    with pytest.raises(ArgumentError):
        _core.packet_append_headers(marked, [("k", 1)])
    with pytest.raises(ArgumentError):
        _core.packet_append_headers(marked, [], refuse_key=b"x")
    with pytest.raises(ArgumentError):
        _core.packet_append_headers(12, [])
