"""The recording layer's MCAP message records (a0py.recording._bulk, linked
with the C core's packet codec): ``Transport.read_into`` with
``message_prefix`` and ``append_records`` write the same bytes; indexing a
chunk gives each packet with a standard block its ``a0_time_wall`` as
publish time (exactly the frames the core's decoder accepts), leaves the
others for the header lookup, and refuses records that do not walk."""

import os
import struct

import numpy as np
import pytest
from helpers.mcap_data import T0, packet

import a0py
from a0py.recording import _bulk
from a0py.recording.format import MESSAGE_FIXED, MESSAGE_PUBLISH_TIME_AT

LOG = T0 + 123_456


def plain_packet(payload, headers=()):
    """A packet without its standard block (flags 0), as old writers made it."""
    raw = bytearray(packet("x", 1, payload=payload, extra=list(headers))[0])
    raw[6:8] = b"\0\0"
    raw[48:96] = bytes(48)
    return bytes(raw)


def torn_packet():
    """A packet with a standard block whose payload size does not match: not a packet."""
    raw = bytearray(packet("a", 7)[0])
    raw[40:48] = (10**6).to_bytes(8, "little")
    return bytes(raw)


MIXED = [
    *(packet("a", s)[0] for s in range(1, 40)),  # standard block: publish time = a0_time_wall
    plain_packet(b"no standard block", [("a0_time_wall", "5")]),  # looked up later, not here
    b"not a packet at all",
    b"",
    bytes(300),
    torn_packet(),
    packet("a", 99, payload=os.urandom(5000))[0],
]


def wall_of(frame):
    """The packet's a0_time_wall from its standard block, as a0py's reader sees it, or None."""
    try:
        pkt = a0py.Packet.from_bytes(frame)
    except a0py.PacketCorruptError:
        return None
    if len(frame) < 96 or not frame[6] & 1:
        return None
    return int(pkt.headers["a0_time_wall"])


def fields(buf, nbytes):
    """[(channel, seq32, log, publish, data)] of the records in buf[:nbytes], by the MCAP spec."""
    out, pos = [], 0
    view = bytes(buf[:nbytes])
    while pos < nbytes:
        op, length, channel, seq32, log, pub = struct.unpack_from("<BQHIQQ", view, pos)
        assert op == 0x05
        out.append((channel, seq32, log, pub, view[pos + MESSAGE_FIXED:pos + 9 + length]))
        pos += 9 + length
    assert pos == nbytes
    return out


@pytest.fixture
def written():
    arena = a0py.Arena.heap(1 << 20)
    tr = a0py.Transport(arena)
    seqs = [tr.write(f) for f in MIXED]
    yield tr, seqs
    arena.close()


def test_read_into_with_the_message_prefix_writes_what_append_records_writes(written):
    tr, seqs = written
    buf = bytearray(1 << 20)
    n, nbytes, *_ = tr.read_into(buf, prefix=_bulk.message_prefix(3, LOG))
    assert n == len(MIXED)
    ref = bytearray()
    taken, got_seqs, offs, frame_bytes = _bulk.append_records(ref, list(MIXED), np.array(seqs, np.int64), 3, LOG,
                                                              1 << 40)
    assert bytes(buf[:nbytes]) == bytes(ref)
    assert (taken, got_seqs.tolist(), frame_bytes) == (len(MIXED), seqs, sum(map(len, MIXED)))
    assert [r[:4] for r in fields(ref, len(ref))] == [(3, s, LOG, LOG) for s in seqs]
    assert offs.tolist() == [sum(MESSAGE_FIXED + len(f) for f in MIXED[:i]) for i in range(len(MIXED))]


def test_indexing_fills_in_the_publish_time_of_packets_with_a_standard_block(written):
    tr, seqs = written
    buf = bytearray(1 << 20)
    n, nbytes, *_ = tr.read_into(buf, prefix=_bulk.message_prefix(3, LOG))
    offs, logs, pubs, plain = _bulk.index_records(memoryview(buf)[:nbytes], n, True)
    got = fields(buf, nbytes)
    want = [wall_of(f) or LOG for f in MIXED]
    assert [r[3] for r in got] == want == pubs.tolist()  # in the buffer and in the result
    assert [r[4] for r in got] == MIXED and logs.tolist() == [LOG] * n
    assert [wall_of(f) for f in MIXED].count(None) == 5  # the plain packet, three non-packets, the torn one
    assert plain.tolist() == [int(offs[i]) for i, f in enumerate(MIXED) if wall_of(f) is None]
    # Indexing the same bytes appended by append_records gives the same chunk.
    ref = bytearray()
    _bulk.append_records(ref, list(MIXED), np.array(seqs, np.int64), 3, LOG, 1 << 40)
    _bulk.index_records(ref, n, True)
    assert bytes(ref) == bytes(buf[:nbytes])


def test_a_channel_that_is_not_of_packets_keeps_its_publish_times():
    frames = [packet("a", 1)[0], b'{"x": 1}']
    out = bytearray()
    _, _, offs, _ = _bulk.append_records(out, frames, np.array([1, 2], np.int64), 9, LOG, 1 << 40)
    u64 = np.ndarray(shape=(len(out) - 7,), dtype="<u8", buffer=out, strides=(1,))
    u64[offs + MESSAGE_PUBLISH_TIME_AT] = [11, 2**63 + 5]
    before = bytes(out)
    _, _, pubs, plain = _bulk.index_records(out, 2, False)
    assert bytes(out) == before and pubs.tolist() == [11, LOG] and len(plain) == 0  # 2**63+: the log time


def test_records_that_do_not_walk_are_refused_with_where():
    out = bytearray()
    _bulk.append_records(out, [b"a" * 10, b"b" * 20], np.array([1, 2], np.int64), 1, LOG, 1 << 40)
    with pytest.raises(ValueError, match="fewer records than counted"):
        _bulk.index_records(bytearray(out), 3, True)
    with pytest.raises(ValueError, match="more records than counted"):
        _bulk.index_records(bytearray(out), 1, True)
    bad = bytearray(out)
    bad[1:9] = (10**6).to_bytes(8, "little")
    with pytest.raises(ValueError, match=r"at byte 0 \(record 0 of 2\): a record length past the end"):
        _bulk.index_records(bad, 2, True)
    bad = bytearray(out)
    bad[MESSAGE_FIXED + 10] = 0x06
    with pytest.raises(ValueError, match="not a message record"):
        _bulk.index_records(bad, 2, True)
    assert _bulk.record_frames(out, 0, len(out), 2) == [b"a" * 10, b"b" * 20]
    with pytest.raises(ValueError, match="runs past the end"):
        _bulk.record_frames(out, 0, len(out) - 1, 2)


def test_the_message_prefix_refuses_a_channel_or_time_mcap_cannot_hold():
    with pytest.raises(OverflowError, match=r"channel id 65536 outside 0\.\.65535"):
        _bulk.message_prefix(65536, 0)
    with pytest.raises(OverflowError, match="negative"):
        _bulk.message_prefix(1, -1)
    p = _bulk.message_prefix(65535, 2**63 - 1)
    assert (p.size, p.seq_at, p.seq_bytes, p.size_at, p.size_add) == (MESSAGE_FIXED, 11, 4, 1, MESSAGE_FIXED - 9)
