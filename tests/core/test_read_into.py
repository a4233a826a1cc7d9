"""Transport.read_into (the recorder's hot path), the binding's generic bulk
read: the frames after the cursor copied into a caller's buffer, each after
a prefix of fixed layout (a FramePrefix: template bytes with the frame's
seq and size stored at chosen offsets); limits, offsets and the too-small
error; gaps reported exactly; and, with writer processes evicting while
this one reads, no torn frame ever counted. (The MCAP framing the recorder
builds on it is tests/recording/test_message_records.py's.)

Most tests lay frames out as MCAP Message records, as the recorder does,
with a prefix made here and records parsed here by the MCAP spec,
independently of the code. Multi-process tests use real processes (fork);
they assert outcomes, never timings.
"""

import itertools
import multiprocessing as mp
import os
import signal
import struct
import uuid
import zlib

import numpy as np
import pytest
from helpers.mcap_data import T0, packet

import a0py
from a0py import ArgumentError, BufferTooSmallError, ClosedError, FramePrefix, LockError

CTX = mp.get_context("fork")
JOIN_S = 60.0
FIXED = 31  # opcode, length, channel, sequence, log_time, publish_time
DEFAULT = 16  # the default prefix: seq u64, size u64
LOG = T0 + 123_456


def record_prefix(channel=0, log_time=0):
    """An MCAP Message record's fixed fields: opcode 5, length (the frame's
    size + 22), channel, sequence (seq mod 2**32), log and publish time."""
    return FramePrefix(struct.pack("<BQHIQQ", 5, 0, channel, 0, log_time, log_time), seq_at=11, seq_bytes=4,
                       size_at=1, size_add=FIXED - 9)


RECORD = record_prefix()


@pytest.fixture
def heap_size():
    """The heap arena under the ``tr`` fixture (tests/core/conftest.py)."""
    return 1 << 20


def parse_records(buf, nbytes):
    """[(channel, seq32, log_time, publish_time, data)] of the records in
    buf[:nbytes], parsed here by the MCAP spec, independently of the code."""
    out, pos = [], 0
    view = bytes(buf[:nbytes])
    while pos < nbytes:
        op, length, channel, seq32, log, pub = struct.unpack_from("<BQHIQQ", view, pos)
        assert op == 0x05
        assert length >= FIXED - 9 and pos + 9 + length <= nbytes
        out.append((channel, seq32, log, pub, view[pos + FIXED:pos + 9 + length]))
        pos += 9 + length
    assert pos == nbytes
    return out


def parse_default(buf, nbytes):
    """[(seq, data)] of frames laid out with the default prefix."""
    out, pos = [], 0
    view = bytes(buf[:nbytes])
    while pos < nbytes:
        seq, size = struct.unpack_from("<QQ", view, pos)
        out.append((seq, view[pos + DEFAULT:pos + DEFAULT + size]))
        pos += DEFAULT + size
    assert pos == nbytes
    return out


MIXED = [
    *(packet("a", s)[0] for s in range(1, 40)),
    b"not a packet at all",
    b"",
    bytes(300),
    packet("a", 99, payload=os.urandom(5000))[0],
]


def test_by_default_each_frame_follows_its_seq_and_size(tr):
    seqs = [tr.write(f) for f in MIXED]
    buf = bytearray(1 << 20)
    frames, nbytes, first, last, gap_first, gap_last = tr.read_into(buf)
    assert (frames, first, last, gap_first, gap_last) == (len(MIXED), seqs[0], seqs[-1], 0, 0)
    assert nbytes == sum(DEFAULT + len(f) for f in MIXED)
    assert parse_default(buf, nbytes) == list(zip(seqs, MIXED, strict=True))
    assert tr.cursor_seq == seqs[-1]
    assert tr.read_into(buf) == (0, 0, 0, 0, 0, 0)


def test_records_are_the_frames_written_with_their_seq_and_the_prefix_fields(tr):
    seqs = [tr.write(f) for f in MIXED]
    buf = bytearray(1 << 20)
    frames, nbytes, first, last, gap_first, gap_last = tr.read_into(buf, prefix=record_prefix(7, LOG))
    assert (frames, first, last, gap_first, gap_last) == (len(MIXED), seqs[0], seqs[-1], 0, 0)
    assert nbytes == sum(FIXED + len(f) for f in MIXED)
    got = parse_records(buf, nbytes)
    for (channel, seq32, log, pub, data), seq, frame in zip(got, seqs, MIXED, strict=True):
        # The binding reads nothing of a frame: the publish time is the template's.
        assert (channel, seq32, log, pub, data) == (7, seq, LOG, LOG, frame)
    assert tr.cursor_seq == seqs[-1]
    assert tr.read_into(buf, prefix=RECORD) == (0, 0, 0, 0, 0, 0)


def test_a_prefix_stores_only_the_fields_it_names(tr):
    seq = tr.write(b"abc")
    tr.write(b"defgh")
    buf = bytearray(b"\xee" * 64)
    template = bytes(range(1, 11))
    n, nbytes, *_ = tr.read_into(buf, prefix=FramePrefix(template, seq_at=None, size_at=None))
    assert (n, nbytes) == (2, 10 + 3 + 10 + 5)
    assert bytes(buf[:nbytes]) == template + b"abc" + template + b"defgh"  # the template verbatim
    tr.write(b"xy")
    p = FramePrefix(bytes(12), seq_at=8, seq_bytes=4, size_at=0, size_add=1000)
    n, nbytes, *_ = tr.read_into(buf, prefix=p)
    assert struct.unpack_from("<QI", buf) == (1002, seq + 2) and bytes(buf[12:14]) == b"xy"
    assert (p.template, p.size, p.seq_at, p.seq_bytes, p.size_at, p.size_add) == (bytes(12), 12, 8, 4, 0, 1000)
    assert "seq_at=8" in repr(p)
    d = FramePrefix()
    assert (d.template, d.seq_at, d.seq_bytes, d.size_at, d.size_add) == (bytes(16), 0, 8, 8, 0)


def test_a_bad_prefix_layout_is_a_clear_error():
    with pytest.raises(ArgumentError, match="at most 256 bytes, not 257"):
        FramePrefix(bytes(257))
    with pytest.raises(ArgumentError, match="template must be bytes-like, not str"):
        FramePrefix("text")
    with pytest.raises(ArgumentError, match="seq_at=13: a field of 4 bytes there passes the end of the 16-byte"):
        FramePrefix(bytes(16), seq_at=13, seq_bytes=4, size_at=None)
    with pytest.raises(ArgumentError, match="size_at=9: a field of 8 bytes"):
        FramePrefix(bytes(16), seq_at=None, size_at=9)
    with pytest.raises(ArgumentError, match="fields overlap"):
        FramePrefix(bytes(16), seq_at=4, size_at=8)
    for bad in (2, 16, 4.0, True):
        with pytest.raises(ArgumentError, match="seq_bytes must be 4 or 8"):
            FramePrefix(bytes(16), seq_bytes=bad)
    with pytest.raises(ArgumentError, match="size_add must be >= 0"):
        FramePrefix(size_add=-1)
    with pytest.raises(ArgumentError, match="seq_at must be >= 0"):
        FramePrefix(seq_at=-1)
    FramePrefix(b"", seq_at=None, size_at=None)  # no prefix at all: frames back to back


def test_limits_offset_and_buffer_kinds(tr):
    frames = [bytes([i]) * (10 + i) for i in range(20)]
    seqs = [tr.write(f) for f in frames]
    buf = bytearray(b"\xaa" * 4096)
    n, nbytes, first, last, *_ = tr.read_into(buf, offset=100, max_frames=3, prefix=RECORD)
    assert (n, first, last) == (3, seqs[0], seqs[2])
    assert buf[:100] == b"\xaa" * 100  # nothing before the offset is touched
    assert [r[4] for r in parse_records(memoryview(buf)[100:], nbytes)] == frames[:3]
    # max_bytes: exactly two records fit, the third would pass it by one byte.
    room = 2 * FIXED + len(frames[3]) + len(frames[4])
    n, nbytes, first, *_ = tr.read_into(buf, max_bytes=room + FIXED + len(frames[5]) - 1, prefix=RECORD)
    assert (n, nbytes, first) == (2, room, seqs[3])
    # The end of the buffer bounds the same way (a writable memoryview here).
    arr = np.zeros(FIXED + len(frames[5]), np.uint8)
    n, nbytes, first, *_ = tr.read_into(memoryview(arr), prefix=RECORD)
    assert (n, nbytes, first) == (1, arr.size, seqs[5])
    assert parse_records(arr.tobytes(), nbytes)[0][4] == frames[5]
    # The rest, into a numpy array directly.
    big = np.zeros(4096, np.uint8)
    n, nbytes, first, last, *_ = tr.read_into(big, prefix=RECORD)
    assert (n, first, last) == (14, seqs[6], seqs[-1])
    assert [r[4] for r in parse_records(big.tobytes(), nbytes)] == frames[6:]
    assert tr.read_into(big, max_frames=0) == (0, 0, 0, 0, 0, 0)


def test_a_buffer_too_small_for_the_next_frame_names_it_and_reads_nothing(tr):
    tr.write(b"x" * 10)
    seq = tr.write(b"y" * 100)
    buf = bytearray(150)
    assert tr.read_into(buf, prefix=RECORD)[0] == 1  # the second does not fit after the first
    with pytest.raises(BufferTooSmallError, match=rf"frame {seq} of 100 bytes needs 131 bytes with its 31-byte "
                                                  r"prefix.*50 bytes from offset 100 of a 150-byte buffer") as e:
        tr.read_into(buf, offset=100, prefix=RECORD)
    assert (e.value.needed, e.value.seq) == (131, seq)
    with pytest.raises(BufferTooSmallError, match=r"given max_bytes 130: give it at least 131 bytes"):
        tr.read_into(buf, max_bytes=130, prefix=RECORD)
    with pytest.raises(BufferTooSmallError):
        tr.read_into(bytearray())
    with pytest.raises(BufferTooSmallError, match=r"needs 116 bytes with its 16-byte prefix"):
        tr.read_into(buf, max_bytes=115)  # the default prefix
    assert tr.read_into(buf, max_bytes=131, prefix=RECORD)[:4] == (1, 131, seq, seq)  # nothing was lost


def test_bad_arguments_are_clear_errors(tr):
    tr.write(b"frame")
    buf = bytearray(64)
    for out in (b"read-only bytes", memoryview(b"read-only view"), "text", 12, None):
        with pytest.raises(ArgumentError, match="writable, contiguous buffer"):
            tr.read_into(out)
    with pytest.raises(ArgumentError, match="writable, contiguous buffer"):
        tr.read_into(memoryview(bytearray(128))[::2])
    with pytest.raises(ArgumentError, match="offset 65 is past the end of the buffer"):
        tr.read_into(buf, offset=65)
    with pytest.raises(ArgumentError, match="max_frames must be >= 0"):
        tr.read_into(buf, max_frames=-1)
    with pytest.raises(ArgumentError, match="max_bytes must be an integer"):
        tr.read_into(buf, max_bytes=1.5)
    for prefix in ((1, 0), 5, b"template", RECORD.template):
        with pytest.raises(ArgumentError, match=r"prefix must be an a0py.FramePrefix"):
            tr.read_into(buf, prefix=prefix)
    with pytest.raises(TypeError):
        tr.read_into(buf, 0)  # the limits are keywords
    assert tr.read_into(buf)[0] == 1  # none of the above moved the cursor
    tr.arena.close()
    with pytest.raises(ClosedError):
        tr.read_into(buf)


def test_frames_evicted_before_reading_are_reported_as_the_gap_before_the_first():
    arena = a0py.Arena.heap(8192)
    try:
        tr = a0py.Transport(arena)
        w = a0py.Transport(arena)
        w.write(b"one")
        buf = bytearray(1 << 16)
        assert tr.read_into(buf)[:4] == (1, DEFAULT + 3, 1, 1)
        seq = 1
        while True:  # until frame 2 and more are gone
            seq = w.write(b"z" * 200)
            with w.lock() as t:
                if t.seq_low > 5:
                    low = t.seq_low
                    break
        n, nbytes, first, last, gap_first, gap_last = tr.read_into(buf, prefix=RECORD)
        assert (first, last, n, gap_first, gap_last) == (low, seq, seq - low + 1, 2, low - 1)
        assert tr.missed == low - 2
        assert [r[4] for r in parse_records(buf, nbytes)] == [b"z" * 200] * n
    finally:
        arena.close()


def test_an_unplaced_cursor_reads_from_the_oldest_without_a_gap():
    arena = a0py.Arena.heap(4096)
    try:
        w = a0py.Transport(arena)
        for i in range(100):
            w.write(bytes([i]) * 100)
        with w.lock() as t:
            low, high = t.seq_low, t.seq_high
        n, _, first, last, gap_first, gap_last = a0py.Transport(arena).read_into(bytearray(1 << 16))
        assert (first, last, n, gap_first, gap_last) == (low, high, high - low + 1, 0, 0)
    finally:
        arena.close()


# ------------------------------------------------- evicting writers, torn copies


def body(wid, i, size):
    head = struct.pack("<III", wid, i, size) + bytes((wid * 31 + i + k) & 0xFF for k in range(size))
    return head + struct.pack("<I", zlib.crc32(head))


def check(data):
    if len(data) < 16 or zlib.crc32(data[:-4]) != struct.unpack("<I", data[-4:])[0]:
        return None
    wid, i, size = struct.unpack_from("<III", data)
    return (wid, i) if len(data) == 16 + size else None


def evicting_writer(name, wid, count, go):
    try:
        tr = a0py.Transport(a0py.Arena.shm(name))
        big = tr.max_frame_size - 16
        go.wait(JOIN_S)
        for i in range(count):
            r = (i * 2654435761 + wid * 40503) & 0xFFFF
            size = big - 16 - (r % 64) if r % 40 == 0 else (800 + r % 2000 if r % 4 == 0 else r % 150)
            tr.write(body(wid, i, size))
    except BaseException:
        import traceback

        traceback.print_exc()
        os._exit(1)


@pytest.mark.slow
def test_writers_evicting_while_reading_never_get_a_torn_frame_counted():
    """Two writer processes evict with mixed sizes (some nearly the whole
    arena) while this process reads with read_into into a small buffer.
    Every frame carries a checksum: none of the records returned is torn;
    seqs only grow, consecutive within a call; every gap a call reports
    joins it exactly to the previous call; missed is the sum of the gaps."""
    name = f"a0py-read-into-{os.getpid()}-{uuid.uuid4().hex[:10]}"
    arena = a0py.Arena.shm(name, 64 * 1024)
    procs = []
    try:
        go = CTX.Event()
        procs = [CTX.Process(target=evicting_writer, args=(name, wid, 8000, go), daemon=True) for wid in range(2)]
        for p in procs:
            p.start()
        tr = a0py.Transport(arena)
        buf = bytearray(24 * 1024)
        torn = got = gaps = busy = 0
        prev_last = None
        seen = {}
        go.set()
        while True:
            writing = any(p.is_alive() for p in procs)
            try:
                n, nbytes, first, last, gap_first, gap_last = tr.read_into(buf, prefix=record_prefix(1, 0))
            except BufferTooSmallError as e:
                buf = bytearray(e.needed)
                continue
            except LockError:
                busy += 1  # overtaken 1024 times in a row: allowed, read again
                continue
            if not n:
                if not writing:
                    break
                continue
            records = parse_records(buf, nbytes)
            assert len(records) == n
            assert [r[1] for r in records] == list(range(first, last + 1))  # consecutive in a call
            if prev_last is not None:
                if gap_first:
                    assert (gap_first, gap_last) == (prev_last + 1, first - 1)
                    gaps += gap_last - gap_first + 1
                else:
                    assert first == prev_last + 1
            prev_last = last
            for r in records:
                ident = check(r[4])
                if ident is None:
                    torn += 1
                    continue
                got += 1
                wid, i = ident
                assert i > seen.get(wid, -1)
                seen[wid] = i
        for p in procs:
            p.join(JOIN_S)
            assert p.exitcode == 0
        with tr.lock() as t:
            assert t.seq_high == 16000
        assert torn == 0
        assert got > 0 and prev_last == 16000
        assert tr.missed == gaps
    finally:
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        arena.close()
        a0py.Arena.unlink_shm(name)


def test_seqs_of_one_call_are_consecutive_and_pairwise_increasing(tr):
    seqs = [tr.write(b"%d" % i) for i in range(500)]
    buf = bytearray(1 << 16)
    calls = []
    while True:
        n, nbytes, first, last, *_ = tr.read_into(buf, max_frames=37, prefix=RECORD)
        if not n:
            break
        calls.append((first, last))
        assert [r[1] for r in parse_records(buf, nbytes)] == list(range(first, last + 1))
    assert calls[0][0] == seqs[0] and calls[-1][1] == seqs[-1]
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(calls))
