"""MCAP, the writing side: one segment of a recording.

The structure (header, schemas, channels, chunk records, statistics, chunk
and metadata indexes, summary offsets, footer, summary CRC) is written with
the ``mcap`` package's record classes, so Foxglove and the MCAP tools read
the result. The hot path is not: the package's per-message writer adds
only about 0.29 M messages/s, and a recorder must keep up with a publisher.
Frames become message records in bulk, two ways:

* :meth:`SegmentWriter.read_frames` (the recorder's): ``Transport.read_into``
  copies the frames after a cursor straight into the open chunk's buffer,
  each after a prefix laid out as a Message record's fixed fields
  (``_bulk.message_prefix``), one call, no Python object per frame;
* :meth:`SegmentWriter.write_frames`: frames already copied out (bytes) are
  appended by ``_bulk.append_records``; both give the same bytes.

A closed chunk goes to the segment's background thread, which walks its
records once (message index; publish times: each packet's ``a0_time_wall``
from its standard block, or from its headers for the rare packet without
one), computes the CRC, compresses, and writes the chunk and its index;
every write to the file after the header goes through that thread, in
order, so the caller never waits for compression (unless it gets
``queue_bytes`` ahead). An error there is kept and raised by the caller's
next call that hands it work, by :meth:`SegmentWriter.flush` and by
:meth:`SegmentWriter.close`; it is never dropped.

Layout choices (docs/recording.md "File layout"):

* Each chunk holds the messages of one channel (one topic), so a reader
  skips a topic by skipping whole chunks, and a chunk decodes into columns
  of one topic.
* Schema and channel records are written outside chunks, before the first
  chunk that uses them, so a segment cut short is planned by a scan that
  never decompresses a chunk.
* A chunk is closed when it reaches ``chunk_bytes`` (``read_frames``: when
  the next frame would pass it; a frame bigger than that gets a chunk of its
  own) or has been open ``chunk_seconds``; each closed chunk is handed to
  the OS as soon as it is compressed, so a SIGKILLed recorder loses at most
  the chunks still open or queued.
* ``log_time`` is the receive time, ``publish_time`` the packet's
  ``a0_time_wall`` (the receive time when it has none), ``sequence`` the
  transport seq modulo 2**32 (the packet's ``a0_transport_seq`` header keeps
  it whole).
* A typed topic (:meth:`SegmentWriter.add_typed_topic`) is read into its
  chunk as whole packets like any other; when the chunk is written, each
  packet is split (``_bulk.split_records``) into its payload, a message of
  the topic's channel with its real schema and message encoding, and the
  packet cut at its payload, a message of ``/a0py/headers/TOPIC``: two
  chunks, same sequences and times, so ``format.join_packet`` rejoins them.
* At close, metadata ``a0py.segment`` describes the segment (topics, seq and
  time ranges, host, gaps) and ``a0py.chunks`` gives each chunk's seq and
  publish-time range per channel, which the Spark source uses to skip chunks.

Invariant: the bytes of the file up to the end of the last written chunk
(and its message index) always form a valid MCAP data section.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import threading
import time
import zlib

import numpy as np
from mcap.data_stream import RecordBuilder
from mcap.opcode import Opcode
from mcap.records import (
    Channel,
    ChunkIndex,
    DataEnd,
    Footer,
    Header,
    Metadata,
    MetadataIndex,
    Schema,
    Statistics,
    SummaryOffset,
)

from ..errors import BufferTooSmallError
from . import _bulk
from .errors import RecordingOptionError
from .format import (
    CHUNK_LAYOUT,
    CHUNKS_METADATA,
    COMPRESSIONS,
    FOOTER_BODY,
    FOOTER_LAYOUT,
    GAP_SCHEMA,
    GAP_SCHEMA_DATA,
    GAP_TOPIC,
    HEADERS_KEY,
    HEADERS_TOPIC_PREFIX,
    JSON_TOPIC_PREFIX,
    LIBRARY,
    MAGIC,
    MESSAGE_FIXED,
    MESSAGE_INDEX_FIXED,
    MESSAGE_INDEX_LAYOUT,
    MESSAGE_PUBLISH_TIME_AT,
    PACKET_ENCODING,
    PACKET_SCHEMA,
    PACKET_SCHEMA_DATA,
    PACKET_SCHEMA_ENCODING,
    PAYLOADS_KEY,
    RECORD_HEADER,
    RECORD_LENGTH_AT,
    SEGMENT_METADATA,
    TOPIC_KEY,
    chunk_range,
    gap_message,
)
from .headers import headers_channel_for
from .packets import wall_times

_FIRST_ROOM = 64 << 10  # a new chunk's buffer; doubled up to chunk_bytes as it fills
_POOL = 4  # chunk_bytes buffers kept for reuse
_NO_SEQS = np.zeros(0, np.int64)
_INDEX_ENTRY = np.dtype([("log_time", "<u8"), ("offset", "<u8")])  # a Message Index entry
_CHUNK_RECORDS_LENGTH = CHUNK_LAYOUT.length_prefix("records")


def _u64_field(records):
    """A writable view of ``records`` (a bytearray) whose element i is the u64 at byte i."""
    return np.ndarray(shape=(len(records) - 7,), dtype="<u8", buffer=records, strides=(1,))


def _compressor(compression, level):
    if compression == "zstd":
        import zstandard

        return "zstd", zstandard.ZstdCompressor(level=level if level is not None else -1).compress
    if compression == "lz4":
        import lz4.frame

        lvl = level if level is not None else 0
        return "lz4", lambda data: lz4.frame.compress(data, compression_level=lvl)
    if compression == "none":
        return "", None
    raise RecordingOptionError(f"compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")


class _OpenChunk:
    """The message records of one channel waiting to become a chunk:
    ``records[:used]`` (``records`` may be longer: room that
    ``Transport.read_into`` fills in place)."""

    __slots__ = ("count", "log_hi", "log_lo", "opened", "packets", "records", "seq_hi", "seq_lo", "used")

    def __init__(self, records, packets):
        self.records = records
        self.used = 0
        self.packets = packets  # a0py packets: publish times of plain frames are looked up at close
        self.count = 0
        self.opened = time.monotonic()
        self.log_lo = self.seq_lo = None
        self.log_hi = self.seq_hi = None

    def note(self, seq_lo, seq_hi, log_time):
        if self.count == 0:
            self.log_lo, self.log_hi, self.seq_lo, self.seq_hi = log_time, log_time, seq_lo, seq_hi
        else:
            self.log_lo, self.log_hi = min(self.log_lo, log_time), max(self.log_hi, log_time)
            self.seq_lo, self.seq_hi = min(self.seq_lo, seq_lo), max(self.seq_hi, seq_hi)


class _ChunkJob:
    """A closed chunk on its way to the file (the background thread's work)."""

    __slots__ = ("cid", "count", "headers", "log_hi", "log_lo", "packets", "records", "seq_hi", "seq_lo", "used")

    def __init__(self, cid, ch, headers=None):
        self.cid = cid
        self.headers = headers  # a typed topic's headers channel: the packets are split at write time
        self.records, self.used, self.count, self.packets = ch.records, ch.used, ch.count, ch.packets
        self.log_lo, self.log_hi, self.seq_lo, self.seq_hi = ch.log_lo, ch.log_hi, ch.seq_lo, ch.seq_hi


class SegmentWriter:
    """Writes one MCAP segment of a0py packets.

    ``compression`` is ``zstd`` (level -1 by default: a quarter of level 1's
    CPU for files about 5 % larger), ``lz4`` or ``none``. Channels are added
    with :meth:`add_topic` (a0py packets), :meth:`add_typed_topic` (a typed
    topic's payloads and headers), :meth:`add_json_topic` (a JSON
    copy of the payloads for Foxglove) and the gap channel on first use.
    Frames come in through :meth:`read_frames` (straight from a transport
    into the open chunk, the recorder's way) or :meth:`write_frames`.

    Closed chunks are indexed, compressed and written by a background
    thread, in order, so the caller never waits for compression (unless it
    runs ``queue_bytes`` ahead of it). An error on that thread (a full disk)
    is raised by the next call that hands it work, by :meth:`flush` and by
    :meth:`close`.

    Raises :class:`RecordingOptionError` for a bad option and ``OSError`` when
    the file cannot be created."""

    def __init__(self, path, *, compression="zstd", level=None, chunk_bytes=4 << 20,
                 chunk_seconds=1.0, message_index=True, metadata=None, queue_bytes=None):
        self.compression, self._compress = _compressor(compression, level)
        if chunk_bytes < 1024:
            raise RecordingOptionError(f"chunk_bytes {chunk_bytes}: use at least 1024")
        self.path = os.fspath(path)
        self.chunk_bytes = int(chunk_bytes)
        self.chunk_seconds = float(chunk_seconds)
        self.message_index = bool(message_index)
        self._queue_limit = int(queue_bytes) if queue_bytes is not None else max(64 << 20, 8 * self.chunk_bytes)
        # Mode 0600 (never more, whatever the umask); never through a link planted at the name.
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._f = open(fd, "wb")  # noqa: SIM115 - closed by the background thread
        self._pos = 0  # bytes in the file (the background thread's, once it runs)
        self._schemas = {}
        self._channels = {}  # id -> mcap Channel
        self._topic_channel = {}  # topic -> packet channel id
        self._json_channel = {}
        self._headers_channel = {}  # typed topic's payload channel id -> its headers channel id
        self._headers_format = {}  # headers channel id -> the format of its messages (headers.FORMAT_*)
        self._headers_schema = {}  # headers.FORMAT_* -> its schema id in this segment
        self._split_counts = {}  # messages written to a typed topic's two channels (background thread)
        self._open = {}  # channel id -> _OpenChunk
        self._chunk_indexes = []  # written by the background thread
        self._chunk_meta = {}  # chunk offset -> format.chunk_range (background thread)
        self._metadata_indexes = []
        self._counts = {}  # channel id -> messages
        self._bytes = {}  # channel id -> packet bytes
        self._log_lo = None
        self._log_hi = None
        self._topic_seq = {}  # topic -> [first, last]
        self._topic_time = {}  # topic -> [first log, last log]
        self._gaps = {}  # topic -> [count, frames]
        self._metadata_count = 0
        self.closed = False
        self._extra_metadata = dict(metadata or {})
        # The background thread's queue: (kind, payload, bytes) in file order.
        self._cv = threading.Condition()
        self._jobs = collections.deque()
        self._queued = 0  # bytes handed over and not yet written
        self._submitted = 0
        self._done = 0
        self._failure = None
        self._failure_raised = False
        self._pool = collections.deque()  # chunk_bytes buffers the thread has finished with
        self._split_out = (bytearray(), bytearray())  # the background thread's: typed chunks split into
        self._thread = None  # until it runs, records are written here
        try:
            self._write(MAGIC)
            rb = RecordBuilder()
            Header(profile="", library=LIBRARY).write(rb)
            self._write(rb.end())
            self._packet_schema = self._add_schema(PACKET_SCHEMA, PACKET_SCHEMA_ENCODING, PACKET_SCHEMA_DATA)
            self._f.flush()
        except BaseException:
            self._f.close()
            raise
        self._gap_channel = None
        self._thread = threading.Thread(target=self._run, name=f"a0py-mcap-{os.path.basename(self.path)}",
                                        daemon=True)
        self._thread.start()

    # -- the background thread -------------------------------------------

    def _submit(self, kind, payload, nbytes=0):
        """Hands work to the background thread (in file order); waits only
        while more than ``queue_bytes`` are queued. Raises what the thread
        failed with."""
        with self._cv:
            while self._failure is None and self._queued > self._queue_limit:
                self._cv.wait()
            self._raise_failure()
            self._jobs.append((kind, payload, nbytes))
            self._queued += nbytes
            self._submitted += 1
            self._cv.notify_all()

    def _raise_failure(self):
        if self._failure is not None:
            self._failure_raised = True
            raise self._failure

    def _run(self):
        try:
            while True:
                with self._cv:
                    while not self._jobs:
                        self._cv.wait()
                    kind, payload, nbytes = self._jobs.popleft()
                if kind == "stop":
                    return
                if kind == "bytes":
                    self._write(payload)
                elif kind == "chunk":
                    self._write_chunk(payload)
                elif kind == "finish":
                    self._finish(payload)
                if not self._jobs:
                    self._f.flush()
                with self._cv:
                    self._queued -= nbytes
                    self._done += 1
                    self._cv.notify_all()
        except BaseException as e:  # raised to the writer's user: _submit, flush, close
            with self._cv:
                self._failure = e
                self._jobs.clear()
                self._queued = 0
                self._cv.notify_all()
        finally:
            self._f.close()

    def _sync(self):
        """Waits until the background thread has written all it was given."""
        with self._cv:
            while self._failure is None and self._done < self._submitted:
                self._cv.wait()
            self._raise_failure()

    # -- structure -------------------------------------------------------

    def _write(self, data):
        self._f.write(data)
        self._pos += len(data)

    def _put(self, data):
        """Writes a record outside chunks (through the thread once it runs)."""
        if self._thread is None:
            self._write(data)
        else:
            self._submit("bytes", data, len(data))

    def _add_schema(self, name, encoding, data):
        sid = len(self._schemas) + 1
        s = Schema(id=sid, name=name, encoding=encoding, data=data)
        self._schemas[sid] = s
        rb = RecordBuilder()
        s.write(rb)
        self._put(rb.end())
        return sid

    def _add_channel(self, topic, encoding, schema_id, metadata):
        if len(self._channels) >= 0xFFFF:
            raise RecordingOptionError(f"{self.path}: more than 65535 channels in one segment")
        cid = len(self._channels) + 1
        c = Channel(id=cid, schema_id=schema_id, topic=topic, message_encoding=encoding,
                    metadata=dict(metadata))
        self._channels[cid] = c
        self._counts[cid] = 0
        self._bytes[cid] = 0
        rb = RecordBuilder()
        c.write(rb)
        self._put(rb.end())
        return cid

    def add_topic(self, topic):
        """The channel id of a0py topic ``topic`` (created on first use)."""
        cid = self._topic_channel.get(topic)
        if cid is None:
            self._check_open()
            cid = self._add_channel(topic, PACKET_ENCODING, self._packet_schema, {"a0py.topic": topic})
            self._topic_channel[topic] = cid
        return cid

    def add_typed_topic(self, topic, schema):
        """The channel id of typed topic ``topic`` (created on first use):
        channel ``topic`` with ``schema`` (an ``a0py.Schema``: its name,
        encoding and data, and its message encoding), whose messages are the
        packets' payloads, and beside it channel ``/a0py/headers/TOPIC`` of
        the rest of each packet, in the family of the payloads (protobuf or
        CDR messages of the packet's fields, else the packets cut at their
        payload: :mod:`.headers`). Frames read for ``topic`` from now
        on are split between the two (its open chunk of whole packets, if
        any, is closed first). Raises ValueError for a schema with no message
        encoding (raw bytes are recorded as whole packets)."""
        cid = self._topic_channel.get(topic)
        if cid is not None and cid in self._headers_channel:
            return cid
        if not schema.message_encoding:
            raise ValueError(f"topic {topic!r}: schema {schema.name!r} has no message encoding")
        self._check_open()
        if cid is not None and cid in self._open:
            self._close_chunk(cid)
        sid = self._add_schema(schema.name, schema.encoding, bytes(schema.data))
        cid = self._add_channel(topic, schema.message_encoding, sid,
                                {TOPIC_KEY: topic, HEADERS_KEY: HEADERS_TOPIC_PREFIX + topic})
        fmt, encoding, hname, hencoding, hdata = headers_channel_for(schema.message_encoding)
        hsid = self._headers_schema.get(fmt)
        if hsid is None:
            hsid = self._headers_schema[fmt] = (self._packet_schema if hname is None else
                                                self._add_schema(hname, hencoding, hdata))
        hid = self._add_channel(HEADERS_TOPIC_PREFIX + topic, encoding, hsid, {TOPIC_KEY: topic, PAYLOADS_KEY: topic})
        self._headers_format[hid] = fmt
        self._topic_channel[topic] = cid
        self._headers_channel[cid] = hid
        return cid

    def add_json_topic(self, topic, schema=None):
        """The channel id of the JSON copy of ``topic``'s payloads (topic
        ``/a0py/json/TOPIC``, encoding ``json``, a ``jsonschema`` schema,
        ``{"type": "object"}`` unless given)."""
        cid = self._json_channel.get(topic)
        if cid is None:
            self._check_open()
            data = json.dumps(schema or {"type": "object"}).encode()
            sid = self._add_schema(f"a0py.json.{topic}", "jsonschema", data)
            cid = self._add_channel(JSON_TOPIC_PREFIX + topic, "json", sid, {"a0py.topic": topic})
            self._json_channel[topic] = cid
        return cid

    def _check_open(self):
        if self.closed:
            raise RecordingOptionError(f"{self.path}: the segment is closed")

    # -- messages --------------------------------------------------------

    def _new_chunk(self, cid):
        """An open chunk for read_frames: a buffer the background thread is
        done with, else a small one that grows (a slow topic, or many of
        them, must not hold chunk_bytes each)."""
        try:
            records = self._pool.pop()
        except IndexError:
            records = bytearray(min(self.chunk_bytes, _FIRST_ROOM))
        ch = self._open[cid] = _OpenChunk(records, True)
        return ch

    def _count(self, topic, cid, frames, frame_bytes, seq_lo, seq_hi, log_time):
        self._counts[cid] += frames
        self._bytes[cid] += frame_bytes
        self._log_lo = log_time if self._log_lo is None else min(self._log_lo, log_time)
        self._log_hi = log_time if self._log_hi is None else max(self._log_hi, log_time)
        if topic is None:
            return
        span = self._topic_seq.get(topic)
        if span is None:
            self._topic_seq[topic] = [seq_lo, seq_hi]
        else:
            span[0], span[1] = min(span[0], seq_lo), max(span[1], seq_hi)
        tspan = self._topic_time.get(topic)
        if tspan is None:
            self._topic_time[topic] = [log_time, log_time]
        else:
            tspan[0], tspan[1] = min(tspan[0], log_time), max(tspan[1], log_time)

    def read_frames(self, topic, transport, log_time, max_frames=None, copy=False):
        """Reads the frames after ``transport``'s cursor (an
        ``a0py.Transport``) straight into ``topic``'s open chunk with
        ``Transport.read_into``: no Python object per frame. Each frame
        becomes one message, byte for byte, as with :meth:`write_frames`.
        Closes the chunk when the next frame does not fit it.

        Returns ``(frames, frame_bytes, first_seq, last_seq, gap_first,
        gap_last, copies)`` as ``read_into`` counts them (seqs of one call
        are consecutive; the gap is what the transport saw removed just
        before the first); ``copies`` is a list of the frames' bytes when
        ``copy`` is true, else None. Raises the transport's read errors."""
        cid = self.add_topic(topic)
        log_time = int(log_time)
        prefix = _bulk.message_prefix(cid, log_time)
        ch = self._open.get(cid)
        while True:
            if ch is None:
                ch = self._new_chunk(cid)
            try:
                n, nbytes, first, last, gap_first, gap_last = transport.read_into(
                    ch.records, offset=ch.used, max_frames=max_frames, prefix=prefix)
                break
            except BufferTooSmallError as e:
                size = len(ch.records)
                if ch.used + e.needed <= self.chunk_bytes and size < self.chunk_bytes:
                    ch.records += bytes(min(self.chunk_bytes, max(ch.used + e.needed, 2 * size)) - size)
                elif ch.count:
                    self._close_chunk(cid)
                    ch = None
                else:  # a frame bigger than a chunk: a chunk of its own
                    ch.records = bytearray(e.needed)
        copies = None
        if n:
            start = ch.used
            if copy:
                copies = _bulk.record_frames(ch.records, start, nbytes, n)
            ch.used += nbytes
            ch.note(first, last, log_time)
            ch.count += n
            self._count(topic, cid, n, nbytes - n * MESSAGE_FIXED, first, last, log_time)
        return n, nbytes - n * MESSAGE_FIXED, first, last, gap_first, gap_last, copies

    def write_frames(self, topic, frames, log_time, seqs=None):
        """Appends ``frames`` of ``topic`` received at ``log_time`` (ns): a
        list of ``(seq, bytes)`` as ``Transport.read_many`` gives them, or a
        list of bytes with their transport ``seqs``. Each frame becomes one
        message, byte for byte; its publish time is the packet's
        ``a0_time_wall`` (the receive time for a frame without one). Returns
        (seqs as an int64 array, total frame bytes)."""
        if not frames:
            return np.zeros(0, np.int64), 0
        cid = self.add_topic(topic)
        if not isinstance(frames, list):
            frames = list(frames)
        given = _NO_SEQS if seqs is None else np.ascontiguousarray(seqs, np.int64)
        out_seqs, total = self._append(cid, frames, given, int(log_time), None, topic)
        return out_seqs, total

    def write_packets(self, topic, seqs, frames, log_time):
        """:meth:`write_frames` with the seqs first (frames a list of bytes)."""
        return self.write_frames(topic, [bytes(f) for f in frames], log_time, seqs)

    def write_json(self, topic, seqs, payloads, log_time, publish_times):
        """Appends JSON payloads (bytes) to ``topic``'s JSON channel."""
        if not len(payloads):
            return
        cid = self.add_json_topic(topic)
        self._append(cid, list(payloads), np.ascontiguousarray(seqs, np.int64), int(log_time),
                     np.asarray(publish_times, np.int64), None)

    def write_gap(self, topic, first, last, log_time):
        """Records that frames ``first..last`` of ``topic`` were lost (evicted
        before they were read)."""
        if self._gap_channel is None:
            self._check_open()
            sid = self._add_schema(GAP_SCHEMA, "jsonschema", GAP_SCHEMA_DATA)
            self._gap_channel = self._add_channel(GAP_TOPIC, "json", sid, {})
        body = gap_message(topic, first, last)
        self._append(self._gap_channel, [body], np.array([first], np.int64), int(log_time),
                     np.array([log_time], np.int64), None)
        g = self._gaps.setdefault(topic, [0, 0])
        g[0] += 1
        g[1] += int(last) - int(first) + 1

    def _append(self, cid, frames, seqs, log_time, publish_times, topic):
        """Appends records to channel ``cid``'s open chunk, closing chunks as
        they reach ``chunk_bytes``; returns (seqs, frame bytes)."""
        self._check_open()
        all_seqs = []
        total = 0
        done = 0
        while done < len(frames):
            ch = self._open.get(cid)
            if ch is None:
                ch = self._open[cid] = _OpenChunk(bytearray(), publish_times is None)
            elif len(ch.records) != ch.used:
                del ch.records[ch.used:]  # room left by read_frames: append_records appends at the end
            rest = frames if done == 0 else frames[done:]
            rest_seqs = seqs if (done == 0 or not len(seqs)) else seqs[done:]
            taken, got_seqs, offs, nbytes = _bulk.append_records(
                ch.records, rest, rest_seqs, cid, log_time, self.chunk_bytes)
            if publish_times is not None:
                pubs = np.asarray(publish_times[done:done + taken], np.int64)
                _u64_field(ch.records)[offs + MESSAGE_PUBLISH_TIME_AT] = pubs
            ch.used = len(ch.records)
            lo, hi = int(got_seqs.min()), int(got_seqs.max())
            ch.note(lo, hi, log_time)
            ch.count += taken
            self._count(topic, cid, taken, nbytes, lo, hi, log_time)
            total += nbytes
            all_seqs.append(got_seqs)
            done += taken
            if ch.used >= self.chunk_bytes:
                self._close_chunk(cid)
        return (all_seqs[0] if len(all_seqs) == 1 else np.concatenate(all_seqs)), total

    def flush_due(self, now=None):
        """Closes the chunks open longer than ``chunk_seconds``; returns how many."""
        now = time.monotonic() if now is None else now
        due = [cid for cid, ch in self._open.items() if now - ch.opened >= self.chunk_seconds]
        for cid in due:
            self._close_chunk(cid)
        return len(due)

    def flush(self):
        """Closes every open chunk and waits until the file holds them (its
        bytes handed to the OS). Raises what the background thread failed with."""
        for cid in list(self._open):
            self._close_chunk(cid)
        self._sync()

    def _close_chunk(self, cid):
        """Hands channel ``cid``'s open chunk to the background thread."""
        ch = self._open.pop(cid)
        if not ch.count:
            return
        self._submit("chunk", _ChunkJob(cid, ch, self._headers_channel.get(cid)), ch.used)

    def _write_chunk(self, job):
        """Indexes, compresses and writes one chunk and its message index
        (the background thread)."""
        records = job.records
        used = job.used
        with memoryview(records) as whole, whole[:used] as view:
            offsets, log_times, pub, plain = _bulk.index_records(view, job.count, job.packets)
        if len(plain):
            # Packets without a standard block: their a0_time_wall header, if any.
            u64 = _u64_field(records)
            lengths = u64[plain + RECORD_LENGTH_AT].astype(np.int64) - (MESSAGE_FIXED - RECORD_HEADER)
            wall, have = wall_times(records, plain + MESSAGE_FIXED, lengths)
            found = plain[have]
            u64[found + MESSAGE_PUBLISH_TIME_AT] = wall[have]
            pub[np.searchsorted(offsets, found)] = wall[have]
            del u64
        if job.headers is not None:
            # Into the same two buffers every time (their pages stay mapped); the
            # split keeps each record's times, so the index of the chunk serves both
            # halves (the payload records are those of the frames that are packets).
            with memoryview(records) as whole, whole[:used] as view:
                pay, pay_used, pay_offs, pay_idx, hdr, hdr_used, hdr_offs = _bulk.split_records(
                    view, offsets, job.cid, job.headers, self._split_out[0], self._split_out[1],
                    self._headers_format[job.headers])
            if len(records) == self.chunk_bytes and len(self._pool) < _POOL:
                self._pool.append(records)
            if len(pay_idx) == len(offsets):
                pay_logs, pay_pubs = log_times, pub
            else:
                pay_logs, pay_pubs = log_times[pay_idx], pub[pay_idx]
            for cid, recs, rused, offs, logs, pubs in (
                    (job.headers, hdr, hdr_used, hdr_offs, log_times, pub),
                    (job.cid, pay, pay_used, pay_offs, pay_logs, pay_pubs)):
                if len(offs):
                    self._split_counts[cid] = self._split_counts.get(cid, 0) + len(offs)
                    self._emit_chunk(cid, recs, rused, offs, logs, pubs, job)
            return
        self._emit_chunk(job.cid, records, used, offsets, log_times, pub, job)
        if len(records) == self.chunk_bytes and len(self._pool) < _POOL:
            self._pool.append(records)

    def _emit_chunk(self, cid, records, used, offsets, log_times, pub, job):
        """Writes ``records[:used]`` (message records of channel ``cid`` at
        ``offsets``) as one chunk and its message index (the background thread)."""
        with memoryview(records) as whole, whole[:used] as view:
            crc = zlib.crc32(view)
            data = self._compress(view) if self._compress else view
            comp = self.compression.encode()
            offset = self._pos
            # The Chunk record, its records field written from `data` in place.
            records_len = _CHUNK_RECORDS_LENGTH.pack(len(data))
            body_len = CHUNK_LAYOUT.head.size - RECORD_HEADER + len(comp) + len(records_len) + len(data)
            head = CHUNK_LAYOUT.head.pack(CHUNK_LAYOUT.opcode, body_len, job.log_lo, job.log_hi, used, crc, len(comp))
            self._write(head + comp + records_len)
            self._write(data)
            chunk_len = self._pos - offset
            compressed = len(data)
            del data
        index_offsets = {}
        index_start = self._pos
        if self.message_index:
            entries = np.empty(len(offsets), _INDEX_ENTRY)
            entries["log_time"] = log_times
            entries["offset"] = offsets
            body = entries.tobytes()
            index_offsets[cid] = self._pos
            self._write(MESSAGE_INDEX_LAYOUT.head.pack(
                MESSAGE_INDEX_LAYOUT.opcode, MESSAGE_INDEX_FIXED - RECORD_HEADER + len(body), cid, len(body)))
            self._write(body)
        self._chunk_indexes.append(ChunkIndex(
            message_start_time=job.log_lo, message_end_time=job.log_hi, chunk_start_offset=offset,
            chunk_length=chunk_len, message_index_offsets=index_offsets,
            message_index_length=self._pos - index_start, compression=self.compression,
            compressed_size=compressed, uncompressed_size=used))
        self._chunk_meta[str(offset)] = chunk_range(cid, job.seq_lo, job.seq_hi, int(pub.min()),
                                                    int(pub.max()))
        self._f.flush()

    @property
    def size(self):
        """Bytes written so far (open chunks and chunks queued for the
        background thread not counted)."""
        return self._pos

    @property
    def pending_bytes(self):
        """Bytes of records in open chunks and in chunks not written yet."""
        return sum(ch.used for ch in self._open.values()) + self._queued

    def segment_metadata(self):
        topics = sorted(self._topic_channel)
        meta = {
            "format": "a0py recording 1",
            "host": socket.gethostname(),
            "topics": json.dumps(topics),
            "start_time": str(self._log_lo or 0),
            "end_time": str(self._log_hi or 0),
        }
        for t in topics:
            cid = self._topic_channel[t]
            first, last = self._topic_seq.get(t, (0, 0))
            meta[f"topic.{t}"] = json.dumps({
                "frames": self._counts[cid], "bytes": self._bytes[cid], "first_seq": first, "last_seq": last,
                "start_time": self._topic_time.get(t, (0, 0))[0], "end_time": self._topic_time.get(t, (0, 0))[1],
                "gaps": self._gaps.get(t, [0, 0])[0], "lost_frames": self._gaps.get(t, [0, 0])[1]})
        for t, (count, lost) in self._gaps.items():
            if t not in self._topic_channel:
                meta[f"topic.{t}"] = json.dumps({"frames": 0, "bytes": 0, "gaps": count, "lost_frames": lost})
        meta.update(self._extra_metadata)
        return meta

    def _write_metadata(self, name, entries):
        offset = self._pos
        rb = RecordBuilder()
        Metadata(name=name, metadata=entries).write(rb)
        data = rb.end()
        self._write(data)
        self._metadata_indexes.append(MetadataIndex(offset=offset, length=len(data), name=name))
        self._metadata_count += 1

    def _finish(self, segment_meta):
        """The end of the file: metadata, summary, footer (the background thread)."""
        self._write_metadata(SEGMENT_METADATA, segment_meta)
        self._write_metadata(CHUNKS_METADATA, self._chunk_meta)
        rb = RecordBuilder()
        DataEnd(data_section_crc=0).write(rb)
        self._write(rb.end())
        self._write_summary()

    def close(self, wait=True):
        """Closes the open chunks and has the background thread write them,
        the metadata, the summary and the footer, and close the file.
        ``wait=False`` returns at once (the file is complete once
        :attr:`done`); a later ``close()`` waits. Raises what the background
        thread failed with (once). Idempotent."""
        if not self.closed:
            self.closed = True
            try:
                if self._failure is None:  # else the file is given up on
                    for cid in list(self._open):
                        self._close_chunk(cid)
                    self._submit("finish", self.segment_metadata())
            finally:
                with self._cv:
                    self._jobs.append(("stop", None, 0))
                    self._cv.notify_all()
        if wait:
            self._thread.join()
            with self._cv:
                if not self._failure_raised:
                    self._raise_failure()

    @property
    def done(self):
        """True once the file is closed (complete, or given up on an error)."""
        return self.closed and not self._thread.is_alive()

    def _write_summary(self):
        summary_start = self._pos
        sb = RecordBuilder()
        offsets = []

        def group(opcode, records):
            start = sb.count
            for r in records:
                r.write(sb)
            if sb.count > start:
                offsets.append(SummaryOffset(group_opcode=opcode, group_start=summary_start + start,
                                             group_length=sb.count - start))

        group(Opcode.SCHEMA, self._schemas.values())
        group(Opcode.CHANNEL, self._channels.values())
        counts = dict(self._counts)
        for cid in self._headers_channel:  # split channels: what was written, not frames read
            counts[cid] = 0
        counts.update(self._split_counts)
        group(Opcode.STATISTICS, [Statistics(
            message_count=sum(counts.values()), schema_count=len(self._schemas),
            channel_count=len(self._channels), attachment_count=0, metadata_count=self._metadata_count,
            chunk_count=len(self._chunk_indexes), message_start_time=self._log_lo or 0,
            message_end_time=self._log_hi or 0,
            channel_message_counts={c: n for c, n in counts.items() if n})])
        group(Opcode.CHUNK_INDEX, self._chunk_indexes)
        group(Opcode.METADATA_INDEX, self._metadata_indexes)
        summary_offset_start = summary_start + sb.count
        for o in offsets:
            o.write(sb)
        summary = sb.end()
        crc = zlib.crc32(summary)
        # The summary CRC covers the footer up to its own field.
        footer_head = FOOTER_LAYOUT.head.pack(FOOTER_LAYOUT.opcode, FOOTER_BODY, summary_start, summary_offset_start, 0)
        crc = zlib.crc32(footer_head[:FOOTER_LAYOUT.offset("summary_crc")], crc)
        self._write(summary)
        rb = RecordBuilder()
        Footer(summary_start=summary_start, summary_offset_start=summary_offset_start, summary_crc=crc).write(rb)
        self._write(rb.end())
        self._write(MAGIC)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
