"""_core.read_packets_into: a bulk read (Transport.read_into, default prefix) that
leaves out, in place, the packets carrying a given header, for a relay that must not
forward what came from elsewhere (the bridge's exporter). Frames are parsed here with
the prefix's documented layout (seq u64, size u64), independently of the code."""

import struct

import pytest

import a0py
from a0py import ArgumentError, BufferTooSmallError, _core

PREFIX = struct.Struct("<QQ")


def frames_of(buf, nbytes):
    """[(seq, bytes)] of a read_into result."""
    out, off = [], 0
    while off < nbytes:
        seq, size = PREFIX.unpack_from(buf, off)
        out.append((seq, bytes(buf[off + 16:off + 16 + size])))
        off += 16 + size
    assert off == nbytes
    return out


@pytest.fixture
def tr():
    return _core.Transport(_core.Arena.heap(1 << 20))


def packet(i, marked=False):
    headers = [("i", str(i))] + ([("x.origin", "far")] if marked else [])
    return a0py.Packet(headers, b"p" * (i % 5)).to_bytes()


def test_marked_packets_are_left_out_and_the_rest_kept_in_ring_order(tr):
    marks = [False, True, True, False, True, False, False, True]
    sent = [packet(i, m) for i, m in enumerate(marks)]
    tr.write_many(sent)
    buf = bytearray(4096)
    read, kept, nbytes, more = _core.read_packets_into(tr, buf, "x.origin")
    assert (read, kept, more) == (8, 4, False)
    got = frames_of(buf, nbytes)
    assert [data for _, data in got] == [sent[i] for i, m in enumerate(marks) if not m]
    assert [seq for seq, _ in got] == [i + 1 for i, m in enumerate(marks) if not m]
    # the cursor moved past all of them, the marked ones included
    assert _core.read_packets_into(tr, buf, "x.origin") == (0, 0, 0, False)


def test_more_says_a_frame_is_left_after_a_limited_read(tr):
    tr.write_many([packet(i) for i in range(5)])
    buf = bytearray(4096)
    assert _core.read_packets_into(tr, buf, "x.origin", max_frames=3)[::3] == (3, True)
    assert _core.read_packets_into(tr, buf, "x.origin", max_frames=3)[::3] == (2, False)


def test_bytes_that_are_not_packets_are_kept_as_they_are(tr):
    junk = b"not a packet at all"
    broken = bytearray(packet(1, marked=True))
    struct.pack_into("<I", broken, 96, 1 << 30)  # a header offset far out of the packet
    tr.write_many([junk, bytes(broken), packet(2, marked=True)])
    buf = bytearray(4096)
    read, kept, nbytes, _ = _core.read_packets_into(tr, buf, "x.origin")
    assert (read, kept) == (3, 2)
    assert [data for _, data in frames_of(buf, nbytes)] == [junk, bytes(broken)]


def test_a_frame_larger_than_the_buffer_is_too_small_and_nothing_is_read(tr):
    tr.write(packet(1) + b"x" * 200)
    with pytest.raises(BufferTooSmallError) as e:
        _core.read_packets_into(tr, bytearray(64), "x.origin")
    assert _core.read_packets_into(tr, bytearray(e.value.needed), "x.origin")[:2] == (1, 1)


def test_bad_arguments_are_clear_errors(tr):
    with pytest.raises(ArgumentError, match="Transport"):
        _core.read_packets_into(object(), bytearray(16), "k")
    with pytest.raises(ArgumentError, match="without_header"):
        _core.read_packets_into(tr, bytearray(16), b"k")
    with pytest.raises(ArgumentError, match="writable"):
        _core.read_packets_into(tr, b"read only", "k")
