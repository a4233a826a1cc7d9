"""The importer's compiled hot path (a0py.bridge._ingest.TopicIngest) against the wire
format's Python reference (a0py.bridge.wire: decode_attachment, batch_frames,
bridged_packet) and the importer's rules as the bridge had them in Python: the same
answer, the same counts and the same bytes in the ring for hostile attachments and
payloads (cut, lying sizes and counts, flipped bytes, packets bridged already, numbers at
the edge of 64 bits), and nothing read or written past a bound."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import a0py
from a0py import A0Error, Packet, _core
from a0py.bridge._ingest import (
    BAD_SAMPLE,
    INGESTED,
    MAX_ORIGINS,
    OWN,
    REFUSED,
    WRITE_FAILED,
    BundleIngest,
    TopicIngest,
)
from a0py.bridge.counts import COUNT_FIELDS, TopicCounts
from a0py.bridge.wire import (
    BUNDLE_SECTION,
    FRAME_PREFIX,
    HOST,
    ORIGIN,
    SEQ,
    Attachment,
    BatchAttachment,
    BundleAttachment,
    WireError,
    batch_frames,
    bridged_packet,
    bundle_payload,
    bundle_sections,
    bundle_topic,
    decode_attachment,
)
from a0py.errors import ArenaNotFoundError, LockError

OWN_ID = uuid.UUID(int=1).bytes
ORIGINS = [uuid.UUID(int=2).bytes, uuid.UUID(int=3).bytes, OWN_ID]
U64 = (1 << 64) - 1


class Reference:
    """The importer's rules, in Python, on wire.py's decoders (what the bridge did
    before the compiled path): returns what TopicIngest.ingest returns, counts the same,
    and keeps the packets it would write."""

    def __init__(self, max_frame):
        self.max_frame = max_frame
        self.last = {}
        self.counts = None
        self.written = []

    def ingest(self, payload, raw_att):
        try:
            att = decode_attachment(raw_att)
        except WireError:
            return BAD_SAMPLE
        if att.origin == OWN_ID:
            return OWN
        if self.counts is None:
            self.counts = dict.fromkeys(COUNT_FIELDS, 0)
        counts = self.counts
        batch = isinstance(att, BatchAttachment)
        try:
            frames = batch_frames(payload, att.count) if batch else [bytes(payload)]
        except WireError:
            counts["corrupt"] += att.count
            return REFUSED
        first = att.seq
        last = self.last.get(att.origin)
        if last is not None:
            if first + len(frames) - 1 <= last:
                counts["duplicates"] += len(frames)
                return INGESTED
            if first <= last:
                counts["duplicates"] += last - first + 1
                frames = frames[last - first + 1:]
                first = last + 1
            elif first > last + 1:
                counts["lost"] += first - last - 1
        elif len(self.last) >= MAX_ORIGINS:
            del self.last[next(iter(self.last))]
        self.last[att.origin] = first + len(frames) - 1
        refused = False
        out = []
        for i, frame in enumerate(frames):
            try:
                out.append(bridged_packet(frame, att, first + i))
            except WireError:
                counts["corrupt"] += 1
                refused = True
        fits = [p for p in out if len(p) <= self.max_frame]
        if len(fits) < len(out):
            counts["too_large"] += len(out) - len(fits)
            refused = True
        self.written.extend(fits)
        counts["imported"] += len(fits)
        return REFUSED if refused or not fits else INGESTED


class Ring:
    """A heap arena as the topic, read back after each sample."""

    def __init__(self, size=1 << 20):
        self.arena = a0py.Arena.heap(size)
        self.reader = _core.Transport(self.arena)
        self.opened = []

    def opener(self, frame_size):
        self.opened.append(frame_size)
        return _core.Transport(self.arena), None

    def read(self):
        return [data for _seq, data in self.reader.read_many()]


def new_ingest(ring, counts=None):
    counts = TopicCounts() if counts is None else counts
    return TopicIngest(OWN_ID, lambda: counts, ring.opener)


def framed(packets):
    return b"".join(FRAME_PREFIX.pack(i + 1, len(p)) + p for i, p in enumerate(packets))


# --- hostile samples

def _packet(draw):
    headers = draw(st.lists(st.tuples(st.sampled_from(["k", "a.b", "", "x" * 40]),
                                      st.text(max_size=12)), max_size=3))
    headers = [(k, v) for k, v in headers if k]
    payload = draw(st.binary(max_size=300))
    kind = draw(st.sampled_from(["good", "good", "good", "bridged", "junk", "cut", "flip", "std", "huge"]))
    if kind == "huge":  # larger than the test's arena takes
        return Packet(headers, b"h" * 20000).to_bytes()
    if kind == "std":  # a packet as a publisher writes it, standard block included
        arena = a0py.Arena.heap(1 << 16)
        writer = _core.PacketWriter(arena)
        writer.pub(payload, headers=headers)
        data = _core.Transport(arena).read_many()[0][1]
        arena.close()
        return data
    if kind == "bridged":
        headers = headers + [(ORIGIN, "f" * 32)]
    data = Packet(headers, payload).to_bytes()
    if kind == "junk":
        return draw(st.binary(max_size=200))
    if kind == "cut":
        return data[:draw(st.integers(0, len(data) - 1))]
    if kind == "flip":
        pos = draw(st.integers(0, len(data) - 1))
        return data[:pos] + bytes([data[pos] ^ (1 << draw(st.integers(0, 7)))]) + data[pos + 1:]
    return data


@st.composite
def samples(draw):
    origin = draw(st.sampled_from([ORIGINS[0]] * 4 + ORIGINS))
    edge = draw(st.integers(0, 9)) == 0
    seq = draw(st.sampled_from([0, U64, U64 - 1, U64 - 3]) if edge else st.integers(1, 16))
    host = draw(st.sampled_from(["h" * 255, "é" * 128]) if draw(st.integers(0, 9)) == 0 else st.text(max_size=8))
    raw_host = draw(st.binary(max_size=6)) if draw(st.integers(0, 5)) == 0 else host.encode()
    packets = [_packet(draw) for _ in range(draw(st.integers(1, 5)))]
    if draw(st.booleans()):  # a batch
        payload = framed(packets)
        count = draw(st.integers(0, 7)) if draw(st.integers(0, 4)) == 0 else len(packets)
        shape = draw(st.sampled_from(["as is"] * 6 + ["cut", "lying size", "extra"]))
        if shape == "cut":
            payload = payload[:draw(st.integers(0, len(payload)))]
        elif shape == "lying size":
            payload = FRAME_PREFIX.pack(1, draw(st.integers(0, 1 << 62))) + payload[FRAME_PREFIX.size:]
        elif shape == "extra":
            payload += draw(st.binary(min_size=1, max_size=20))
        att = BatchAttachment(origin, seq, 0, "").encode()[:28]
        att += (count & 0xFFFFFFFF).to_bytes(4, "little") + raw_host
    else:
        payload = packets[0]
        att = Attachment(origin, seq, "").encode() + raw_host
    mangle = draw(st.sampled_from(["none"] * 12 + ["none-att", "cut", "junk", "long"]))
    if mangle == "none-att":
        att = None
    elif mangle == "cut":
        att = att[:draw(st.integers(0, len(att)))]
    elif mangle == "junk":
        att = draw(st.binary(max_size=40))
    elif mangle == "long":
        att = att + b"h" * 300
    return payload, att


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(samples(), min_size=1, max_size=12))
def test_hostile_samples_are_handled_exactly_as_the_python_reference(sequence):
    ring = Ring(16 << 10)  # a sample's other packets fit; a "huge" one does not
    counts = TopicCounts()
    ingest = new_ingest(ring, counts)
    ref = Reference(_core.Transport(ring.arena).max_frame_size)
    for payload, att in sequence:
        assert ingest.ingest(payload, att) == ref.ingest(payload, att)
        assert ring.read() == ref.written
        ref.written.clear()
        if ref.counts is None:
            assert ingest.counts is None  # nothing counted for a topic before a valid sample
        else:
            assert counts.as_dict() == ref.counts
    for origin in ORIGINS:
        assert ingest.last_of(origin) == ref.last.get(origin)


def test_a_batch_is_written_in_order_with_the_bridge_headers_byte_for_byte():
    ring = Ring()
    ingest = new_ingest(ring)
    origin = ORIGINS[0]
    packets = [Packet([("i", str(i))], b"p" * i).to_bytes() for i in range(5)]
    assert ingest.ingest(framed(packets), BatchAttachment(origin, 7, 5, "robot").encode()) == INGESTED
    got = ring.read()
    att = BatchAttachment(origin, 7, 5, "robot")
    assert got == [bridged_packet(p, att, 7 + i) for i, p in enumerate(packets)]
    last = Packet.from_bytes(got[-1])
    assert last.headers[ORIGIN] == uuid.UUID(bytes=origin).hex
    assert last.headers[HOST] == "robot" and last.headers[SEQ] == "11"
    assert ingest.counts.imported == 5 and ring.opened == [max(map(len, got))]


def test_duplicates_gaps_and_a_batch_partly_seen():
    ring = Ring()
    ingest = new_ingest(ring)
    origin = ORIGINS[0]
    pk = Packet("x").to_bytes()

    def batch(first, n):
        return ingest.ingest(framed([pk] * n), BatchAttachment(origin, first, n, "h").encode())

    assert batch(1, 3) == INGESTED            # 1..3
    assert batch(2, 2) == INGESTED            # 2..3 again
    assert batch(3, 3) == INGESTED            # 3 again, 4..5 new
    assert batch(9, 1) == INGESTED            # 6..8 lost
    c = ingest.counts
    assert (c.imported, c.duplicates, c.lost) == (6, 3, 3)
    assert [Packet.from_bytes(p).headers[SEQ] for p in ring.read()] == ["1", "2", "3", "4", "5", "9"]
    assert ingest.last_of(origin) == 9


def test_the_oldest_of_more_than_max_origins_bridges_is_forgotten():
    ring = Ring()
    ingest = new_ingest(ring)
    pk = Packet("x").to_bytes()
    origins = [uuid.UUID(int=100 + i).bytes for i in range(MAX_ORIGINS + 1)]
    for o in origins:
        ingest.ingest(pk, Attachment(o, 5, "h").encode())
    assert ingest.last_of(origins[0]) is None
    assert all(ingest.last_of(o) == 5 for o in origins[1:])
    # the forgotten one starts afresh: its old number is written again, not a duplicate
    assert ingest.ingest(pk, Attachment(origins[0], 5, "h").encode()) == INGESTED
    assert ingest.counts.imported == MAX_ORIGINS + 2 and ingest.counts.duplicates == 0
    assert ingest.last_of(origins[1]) is None  # now the oldest went


def test_own_samples_and_bad_attachments_count_nothing_on_the_topic():
    ring = Ring()
    ingest = new_ingest(ring)
    pk = Packet("x").to_bytes()
    assert ingest.ingest(pk, Attachment(OWN_ID, 1, "h").encode()) == OWN
    assert ingest.ingest(pk, None) == BAD_SAMPLE and "without attachment" in ingest.error
    assert ingest.ingest(pk, b"A0BR" + b"\0" * 10) == BAD_SAMPLE and "attachment of 14 bytes" in ingest.error
    assert ingest.ingest(pk, Attachment(ORIGINS[0], 1, "").encode() + b"\xff") == BAD_SAMPLE
    assert "UTF-8" in ingest.error
    over = BatchAttachment(ORIGINS[0], U64, 2, "h").encode()
    assert ingest.ingest(framed([pk, pk]), over) == BAD_SAMPLE and "2**64" in ingest.error
    assert ingest.counts is None and ring.opened == [] and ring.read() == []
    with pytest.raises(a0py.ArgumentError, match="attachment must be bytes"):
        ingest.ingest(pk, bytearray(Attachment(ORIGINS[0], 1, "h").encode()))


def test_nothing_past_the_payload_is_read():
    # The payload is a view of the first bytes of a larger buffer whose rest would
    # complete the packet or the frame: what lies past the view is never used.
    ring = Ring()
    ingest = new_ingest(ring)
    pk = Packet([("k", "v")], b"payload").to_bytes()
    whole = bytearray(pk + b"\0" * 64)
    assert ingest.ingest(memoryview(whole)[:len(pk) - 1], Attachment(ORIGINS[0], 1, "h").encode()) == REFUSED
    batch = bytearray(framed([pk]) + b"\0" * 64)
    cut = memoryview(batch)[:len(batch) - 64 - 1]
    assert ingest.ingest(cut, BatchAttachment(ORIGINS[0], 2, 1, "h").encode()) == REFUSED
    assert "past the end" in ingest.error
    assert ingest.counts.corrupt == 2 and ring.read() == []
    # and the same bytes, whole, are taken
    assert ingest.ingest(memoryview(batch)[:len(batch) - 64], BatchAttachment(ORIGINS[0], 3, 1, "h").encode()) \
        == INGESTED
    assert len(ring.read()) == 1


def test_a_packet_exactly_as_large_as_the_arena_takes_fits_one_byte_more_does_not():
    ring = Ring(1 << 16)
    max_frame = _core.Transport(ring.arena).max_frame_size
    att = Attachment(ORIGINS[0], 1, "h")
    extra = len(bridged_packet(Packet(b"").to_bytes(), att, 1)) - len(Packet(b"").to_bytes())
    # payload sizes are padded to 16 in the packet: aim the spliced size at max_frame exactly
    base = len(bridged_packet(Packet(b"").to_bytes(), att, 1))
    payload = b"z" * (max_frame - base)
    assert len(bridged_packet(Packet(payload).to_bytes(), att, 1)) == max_frame and extra > 0
    ingest = new_ingest(ring)
    assert ingest.ingest(Packet(payload).to_bytes(), att.encode()) == INGESTED
    assert ring.read()[0][-len(payload):] == payload
    big = Packet(payload + b"z").to_bytes()
    assert ingest.ingest(big, Attachment(ORIGINS[0], 2, "h").encode()) == REFUSED
    assert "larger than the topic's arena" in ingest.error
    assert ingest.counts.too_large == 1 and ingest.counts.imported == 1 and ring.read() == []


def test_a_big_batch_is_written_with_the_gil_released_and_read_back_whole():
    ring = Ring(16 << 20)
    ingest = new_ingest(ring)
    packets = [Packet([("i", str(i))], bytes([i]) * (1 << 20)).to_bytes() for i in range(3)]
    assert ingest.ingest(framed(packets), BatchAttachment(ORIGINS[1], 1, 3, "h").encode()) == INGESTED
    got = ring.read()
    assert [Packet.from_bytes(p).payload for p in got] == [bytes([i]) * (1 << 20) for i in range(3)]


def test_write_failures_are_counted_and_nothing_is_committed():
    counts = TopicCounts()

    def no_topic(frame_size):
        raise ArenaNotFoundError("the topic cannot be made here")

    ingest = TopicIngest(OWN_ID, lambda: counts, no_topic)
    pk = Packet("x").to_bytes()
    assert ingest.ingest(framed([pk, pk]), BatchAttachment(ORIGINS[0], 1, 2, "h").encode()) == WRITE_FAILED
    assert "cannot be made" in ingest.error and counts.write_errors == 2 and counts.imported == 0

    ring = Ring()
    ingest = new_ingest(ring, counts)
    assert ingest.ingest(pk, Attachment(ORIGINS[0], 1, "h").encode()) == INGESTED
    ring.read()
    ring.arena.close()  # the topic's arena closed under the importer
    assert ingest.ingest(pk, Attachment(ORIGINS[0], 2, "h").encode()) == WRITE_FAILED
    assert counts.write_errors == 3


def test_a_configuration_is_written_holding_its_writers_lock():
    ring = Ring()
    events = []

    class WritersLock:  # records when the lock is held against what the ring holds
        def take(self, timeout):
            events.append(("take", len(ring.read())))

        def release(self):
            events.append(("release", len(ring.read())))

    class Refusing(WritersLock):
        def take(self, timeout):
            raise a0py.A0TimeoutError("a local writer holds it")

    lock = WritersLock()
    ingest = TopicIngest(OWN_ID, TopicCounts, lambda size: (_core.Transport(ring.arena), lock))
    assert ingest.ingest(Packet("{}").to_bytes(), Attachment(ORIGINS[0], 1, "h").encode()) == INGESTED
    assert events == [("take", 0), ("release", 1)]
    lock.__class__ = Refusing
    assert ingest.ingest(Packet("{}").to_bytes(), Attachment(ORIGINS[0], 2, "h").encode()) == WRITE_FAILED
    assert ingest.counts.write_errors == 1 and ring.read() == []


def test_bad_arguments_are_clear_errors():
    with pytest.raises(a0py.ArgumentError, match="16 bytes"):
        TopicIngest(b"short", TopicCounts, lambda size: None)
    with pytest.raises(a0py.ArgumentError, match="callables"):
        TopicIngest(OWN_ID, None, None)
    ingest = TopicIngest(OWN_ID, TopicCounts, lambda size: ("not a transport", None))
    with pytest.raises(a0py.ArgumentError, match="opener must return"):
        ingest.ingest(Packet("x").to_bytes(), Attachment(ORIGINS[0], 1, "h").encode())
    assert issubclass(LockError, A0Error)


# --- bundles: several topics' batches in one sample

IMPORTED = ("a/x", "a/y")          # what the importer's globs take in these tests
SKIPPED = "b/z"                    # a topic it does not import
BAD_NAMES = ["", "bad name", "/a/x", "a//x", "é/x"]


class BundleReference:
    """The importer's rules for bundles, in Python, on wire.py's decoders: the bundle's
    attachment and sections, then each section of an imported topic as a batch sample
    of that topic (:class:`Reference`)."""

    def __init__(self, max_frame):
        self.topics = {name: Reference(max_frame) for name in IMPORTED}

    def ingest(self, payload, raw_att):
        """``(code, [(topic, code) of each section not INGESTED])``."""
        try:
            att = BundleAttachment.decode(raw_att)
        except WireError:
            return BAD_SAMPLE, []
        if att.origin == OWN_ID:
            return OWN, []
        try:
            sections = bundle_sections(payload, att.count)
        except WireError:
            return BAD_SAMPLE, []
        failures = []
        for s in sections:
            ref = self.topics.get(s.topic)
            if ref is None:
                continue
            # the host as the bundle carried it, whole (a batch attachment's host is the same bytes)
            batch_att = BatchAttachment(att.origin, s.first, s.count, "").encode() + raw_att[24:]
            code = ref.ingest(bytes(s.batch), batch_att)
            if code != INGESTED:
                failures.append((s.topic, code))
        return INGESTED, failures


def new_bundle_ingest(rings, counts):
    ingests = {name: TopicIngest(OWN_ID, lambda c=counts[name]: c, rings[name].opener) for name in IMPORTED}

    def resolve(raw):
        name = bundle_topic(raw)  # WireError for a name that is not a topic's
        return ingests.get(name)

    return BundleIngest(OWN_ID, resolve), ingests


@st.composite
def bundles(draw):
    origin = draw(st.sampled_from([ORIGINS[0]] * 4 + ORIGINS))
    host = draw(st.sampled_from(["h" * 255, "é" * 128]) if draw(st.integers(0, 9)) == 0 else st.text(max_size=8))
    raw_host = draw(st.binary(max_size=6)) if draw(st.integers(0, 7)) == 0 else host.encode()
    payload = b""
    n = draw(st.integers(1, 4))
    for _ in range(n):
        name = draw(st.sampled_from(list(IMPORTED) * 3 + [SKIPPED] * 2 + BAD_NAMES)).encode()
        if draw(st.integers(0, 19)) == 0:
            name = b"\xff\xfe"
        packets = [_packet(draw) for _ in range(draw(st.integers(1, 4)))]
        batch = framed(packets)
        count = len(packets)
        shape = draw(st.sampled_from(["as is"] * 8 + ["cut batch", "lying size", "lying count", "first 0",
                                                      "past 2**64", "lying batch size"]))
        first = draw(st.integers(1, 12))
        batch_len = len(batch)
        if shape == "cut batch":
            batch = batch[:draw(st.integers(0, len(batch)))]
            batch_len = len(batch)
        elif shape == "lying size":
            batch = FRAME_PREFIX.pack(1, draw(st.integers(0, 1 << 62))) + batch[FRAME_PREFIX.size:]
        elif shape == "lying count":
            count = draw(st.integers(0, 7))
        elif shape == "first 0":
            first = 0
        elif shape == "past 2**64":
            first = U64 - draw(st.integers(0, 2))
        elif shape == "lying batch size":
            batch_len = draw(st.sampled_from([0, batch_len - 1, batch_len + 1, 1 << 40]))
        payload += BUNDLE_SECTION.pack(first, max(0, batch_len), count, len(name)) + name + batch
    sections = n
    mangle = draw(st.sampled_from(["none"] * 10 + ["cut", "extra", "count", "att none", "att cut", "att junk"]))
    if mangle == "cut":
        payload = payload[:draw(st.integers(0, len(payload)))]
    elif mangle == "extra":
        payload += draw(st.binary(min_size=1, max_size=30))
    elif mangle == "count":
        sections = draw(st.integers(0, 6))
    att = BundleAttachment(origin, 1, "").encode()[:20] + sections.to_bytes(4, "little") + raw_host
    if mangle == "att none":
        att = None
    elif mangle == "att cut":
        att = att[:draw(st.integers(0, len(att)))]
    elif mangle == "att junk":
        att = draw(st.binary(max_size=40))
    return payload, att


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bundles(), min_size=1, max_size=10))
def test_hostile_bundles_are_handled_exactly_as_the_python_reference(sequence):
    rings = {name: Ring(16 << 10) for name in IMPORTED}
    counts = {name: TopicCounts() for name in IMPORTED}
    bundle, ingests = new_bundle_ingest(rings, counts)
    ref = BundleReference(_core.Transport(rings["a/x"].arena).max_frame_size)
    for payload, att in sequence:
        code, failures = ref.ingest(payload, att)
        assert bundle.ingest(payload, att) == code
        assert [(name, c) for name, c, _why in bundle.failures] == failures
        if code == BAD_SAMPLE:
            assert bundle.error
        for name in IMPORTED:
            assert rings[name].read() == ref.topics[name].written
            ref.topics[name].written.clear()
            if ref.topics[name].counts is None:
                assert ingests[name].counts is None
            else:
                assert counts[name].as_dict() == ref.topics[name].counts
    for name in IMPORTED:
        for origin in ORIGINS:
            assert ingests[name].last_of(origin) == ref.topics[name].last.get(origin)


def test_a_bundle_is_split_per_topic_in_order_and_numbered_as_batch_samples():
    rings = {name: Ring() for name in IMPORTED}
    counts = {name: TopicCounts() for name in IMPORTED}
    bundle, ingests = new_bundle_ingest(rings, counts)
    origin = ORIGINS[0]
    px = [Packet([("i", str(i))], b"x" * i).to_bytes() for i in range(3)]
    py = [Packet([("j", str(i))], b"y").to_bytes() for i in range(2)]
    pz = [Packet("z").to_bytes()]
    payload = bundle_payload([("a/x", 4, px), ("b/z", 1, pz), ("a/y", 1, py)])
    assert bundle.ingest(payload, BundleAttachment(origin, 3, "robot").encode()) == INGESTED
    assert bundle.failures == ()
    assert rings["a/x"].read() == [bridged_packet(p, Attachment(origin, 0, "robot"), 4 + i) for i, p in enumerate(px)]
    assert rings["a/y"].read() == [bridged_packet(p, Attachment(origin, 0, "robot"), 1 + i) for i, p in enumerate(py)]
    # the same topic's batch sample continues the numbers: nothing lost, nothing twice
    assert ingests["a/x"].ingest(framed(px[:1]), BatchAttachment(origin, 7, 1, "robot").encode()) == INGESTED
    # a bundle partly seen: 6 again, 7 again, 8 new
    again = bundle_payload([("a/x", 6, px)])
    assert bundle.ingest(again, BundleAttachment(origin, 1, "robot").encode()) == INGESTED
    assert [Packet.from_bytes(p).headers[SEQ] for p in rings["a/x"].read()] == ["7", "8"]
    assert (counts["a/x"].imported, counts["a/x"].duplicates, counts["a/x"].lost) == (5, 2, 0)
    assert (counts["a/y"].imported, counts["a/y"].lost) == (2, 0)


def test_bundles_of_this_bridge_and_bad_bundles_write_nothing():
    rings = {name: Ring() for name in IMPORTED}
    counts = {name: TopicCounts() for name in IMPORTED}
    bundle, ingests = new_bundle_ingest(rings, counts)
    payload = bundle_payload([("a/x", 1, [Packet("x").to_bytes()])])
    assert bundle.ingest(payload, BundleAttachment(OWN_ID, 1, "h").encode()) == OWN
    assert bundle.ingest(payload, None) == BAD_SAMPLE and "without attachment" in bundle.error
    assert bundle.ingest(payload, BatchAttachment(ORIGINS[0], 1, 1, "h").encode()) == BAD_SAMPLE
    assert "magic" in bundle.error
    assert bundle.ingest(payload, BundleAttachment(ORIGINS[0], 2, "h").encode()) == BAD_SAMPLE
    assert "1 sections, its attachment says 2" in bundle.error
    bad_name = bundle_payload([("a/x", 1, [Packet("x").to_bytes()]), ("a x", 2, [Packet("y").to_bytes()])])
    assert bundle.ingest(bad_name, BundleAttachment(ORIGINS[0], 2, "h").encode()) == BAD_SAMPLE
    assert "not a topic name" in bundle.error  # the first section's good name wrote nothing either
    assert all(ingests[n].counts is None for n in IMPORTED) and all(rings[n].read() == [] for n in IMPORTED)
    with pytest.raises(a0py.ArgumentError, match="attachment must be bytes"):
        bundle.ingest(payload, bytearray(BundleAttachment(ORIGINS[0], 1, "h").encode()))
    with pytest.raises(a0py.ArgumentError, match="resolve must be a callable"):
        BundleIngest(OWN_ID, None)
    odd = BundleIngest(OWN_ID, lambda raw: "not a TopicIngest")
    with pytest.raises(a0py.ArgumentError, match="resolve must return a TopicIngest"):
        odd.ingest(payload, BundleAttachment(ORIGINS[0], 1, "h").encode())
