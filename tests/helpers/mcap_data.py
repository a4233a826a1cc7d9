"""Recordings built for the tests of a0py.recording and a0py.spark: packets with known
headers and payloads written into MCAP segments, and the rows a reader must
give back for them."""

import datetime
import os
import struct
import uuid

import numpy as np

from a0py.recording.writer import SegmentWriter

T0 = 1_790_000_000_000_000_000  # ns since the epoch (2026)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def encode_std_packet(seq, wall, mono, writer_seq, writer_id, headers, payload, packet_id=None):
    """The bytes of an a0py packet with its standard block filled in, as a
    publisher writes it (csrc/a0_packet.h), laid out here independently of
    the C encoder so the tests choose every time and seq."""
    n = len(headers)
    pos = 96 + 16 * n
    entries, strings = [], []
    for k, v in headers:
        kb, vb = k.encode(), v.encode()
        entries.append(struct.pack("<IIII", pos, len(kb), pos + len(kb) + 1, len(vb)))
        strings += [kb, b"\0", vb, b"\0"]
        pos += len(kb) + len(vb) + 2
    meta = (pos + 15) & ~15
    head = struct.pack("<IHH16sIIQQ", 0x4B503041, 1, 1, packet_id or uuid.uuid4().bytes, n, 0, meta, len(payload))
    std = struct.pack("<QQ16sQQ", mono, wall, writer_id, writer_seq, seq)
    return b"".join([head, std, *entries, *strings, b"\0" * (meta - pos), payload])


def packet(topic, seq, payload=None, extra=(), wall=None, mono=None, writer="w"):
    """(bytes of a published a0py packet, the headers a reader shows, payload)."""
    wall = T0 + seq * 1_000_000 if wall is None else wall
    mono = 5_000_000 + seq * 1_000 if mono is None else mono
    payload = payload if payload is not None else f"{topic}:{seq}".encode()
    wid = uuid.uuid5(uuid.NAMESPACE_DNS, writer)
    raw = encode_std_packet(seq, wall, mono, seq, wid.bytes, list(extra), payload)
    headers = [("a0_time_mono", str(mono)), ("a0_time_wall", str(wall)), ("a0_writer_id", str(wid)),
               ("a0_writer_seq", str(seq)), ("a0_transport_seq", str(seq)), *extra]
    return raw, headers, payload


class Expected:
    """The rows a read must give: frames and gaps, comparable as sets."""

    def __init__(self):
        self.frames = {}  # (topic, seq) -> (headers tuple, payload, wall_us, mono)
        self.gaps = {}  # (topic, first) -> last

    def frame_rows(self):
        return sorted(self.frames)

    def add(self, other):
        self.frames.update(other.frames)
        self.gaps.update(other.gaps)


def write_segment(path, topics, *, gaps=(), chunk_bytes=8192, compression="zstd", batch=50,
                  message_index=True, extra=lambda topic, seq: (), payload=lambda topic, seq: None,
                  seq_start=1):
    """Writes ``topics`` ({topic: n frames}) interleaved in batches, plus
    ``gaps`` [(topic, first, last)]; seqs start at ``seq_start`` (an int, or
    {topic: first seq}); returns :class:`Expected`."""
    exp = Expected()
    w = SegmentWriter(path, chunk_bytes=chunk_bytes, compression=compression, message_index=message_index)
    starts = seq_start if isinstance(seq_start, dict) else dict.fromkeys(topics, seq_start)
    pending = {t: list(range(starts[t], starts[t] + n)) for t, n in topics.items()}
    clock = T0
    while any(pending.values()):
        for t, seqs in pending.items():
            take, pending[t] = seqs[:batch], seqs[batch:]
            if not take:
                continue
            frames = []
            for s in take:
                raw, headers, pay = packet(t, s, payload(t, s), extra(t, s))
                frames.append(raw)
                exp.frames[(t, s)] = (tuple(headers), pay, (T0 + s * 1_000_000) // 1000, 5_000_000 + s * 1_000)
            clock += 1_000_000
            w.write_packets(t, np.array(take), frames, clock + take[-1] * 1_000_000)
    for t, first, last in gaps:
        w.write_gap(t, first, last, clock)
        exp.gaps[(t, first)] = last
    w.close()
    return exp


def table_frames(table):
    """{(topic, seq): (headers, payload, wall_us, mono)} of a table's frame rows."""
    d = table.to_pydict()
    out = {}
    is_gap = d.get("is_gap", [False] * len(d["topic"]))
    for i, t in enumerate(d["topic"]):
        if is_gap[i]:
            continue
        wall = d["time_wall"][i]
        wall_us = None if wall is None else (wall - EPOCH) // datetime.timedelta(microseconds=1)
        out[(t, d["seq"][i])] = (tuple(d["headers"][i]), d["payload"][i], wall_us, d["time_mono"][i])
    return out


def table_gaps(table):
    d = table.to_pydict()
    return {(t, f): last for t, g, f, last in zip(d["topic"], d["is_gap"], d["gap_first"], d["gap_last"]) if g}


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def cut(path, out, size):
    with open(path, "rb") as f:
        data = f.read(size)
    with open(out, "wb") as f:
        f.write(data)
    return out


def unique_root(tag):
    """A shared-memory topic root of its own, so tests never meet other runs."""
    return f"shm:a0pyt{tag}{os.getpid()}"
