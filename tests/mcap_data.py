"""Recordings built for the tests of a0py.spark: packets with known
headers and payloads written into MCAP segments, and the rows a reader must
give back for them."""

import datetime
import os
import uuid

import numpy as np

import a0py
from a0py.spark._writer import SegmentWriter

T0 = 1_790_000_000_000_000_000  # ns since the epoch (2026)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def packet(topic, seq, payload=None, extra=(), wall=None, mono=None, writer="w"):
    """(bytes of an a0py packet with the standard headers, headers, payload)."""
    wall = T0 + seq * 1_000_000 if wall is None else wall
    mono = 5_000_000 + seq * 1_000 if mono is None else mono
    payload = payload if payload is not None else f"{topic}:{seq}".encode()
    headers = [("a0_time_mono", str(mono)), ("a0_time_wall", str(wall)),
               ("a0_writer_id", str(uuid.uuid5(uuid.NAMESPACE_DNS, writer))),
               ("a0_writer_seq", str(seq)), ("a0_transport_seq", str(seq)), *extra]
    return a0py.Packet(headers, payload).to_bytes(), headers, payload


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
