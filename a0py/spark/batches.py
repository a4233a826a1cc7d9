"""Arrow record batches of frames: the rows of the ``a0`` source built from
a decompressed chunk's message records (or frames copied out of an arena),
with no Python code per row.

A packet's columns come from its bytes in place: the chunk's record offsets
give each packet's start and length, the compiled scan checks and indexes
them (:mod:`a0py.recording.packets`), and its gather copies headers and
payloads straight into the buffers of Arrow arrays.

Invariants:

* A row is a frame: ``topic``, ``seq`` (the packet's ``a0_transport_seq``;
  the record's 32-bit sequence when the packet has none), ``time_mono`` (ns,
  the packet's ``a0_time_mono``, null when absent), ``time_wall`` (the
  record's publish time, to the microsecond), ``headers`` (as a0py's
  readers show them: the standard ones first, then the packet's own, in
  order), ``payload``. Gap rows (only when the schema has the gap columns)
  have ``is_gap`` true, ``seq`` = ``gap_first``, ``time_wall`` = when the
  recorder saw the gap, null ``time_mono``, ``headers`` and ``payload``.
* Only channels of a0py packets give frame rows; the JSON copies and
  foreign channels are skipped.
* The batch schema is Spark's (``to_arrow_schema`` of the source's DDL):
  timestamps in µs UTC, ``map<string, string>``, every field nullable.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..recording.errors import RecordingFormatError
from ..recording.format import (
    KIND_GAP,
    KIND_PACKET,
    MESSAGE_CHANNEL_AT,
    MESSAGE_FIXED,
    MESSAGE_LOG_TIME_AT,
    MESSAGE_PUBLISH_TIME_AT,
    MESSAGE_SEQUENCE_AT,
    RECORD_HEADER,
    parse_gap,
)
from ..recording.packets import check_and_index, gather
from ..recording.reader import u_views

FRAME_COLUMNS = ("topic", "seq", "time_mono", "time_wall", "headers", "payload")
GAP_COLUMNS = ("is_gap", "gap_first", "gap_last")
TIME_TYPE = pa.timestamp("us", tz="UTC")
HEADERS_TYPE = pa.map_(pa.string(), pa.string())
_INT64_MAX = (1 << 63) - 1


def frame_schema(gaps=False, payload_type=None, record_time=False, headers=True):
    """The Arrow schema of the rows (Spark's, as ``to_arrow_schema`` gives it:
    every field nullable, timestamps in µs UTC, ``map<string, string>``);
    ``headers=False`` leaves out the ``headers`` column."""
    fields = [
        pa.field("topic", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("time_mono", pa.int64()),
        pa.field("time_wall", TIME_TYPE),
    ]
    if headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    fields.append(pa.field("payload", payload_type if payload_type is not None else pa.binary()))
    if gaps:
        fields += [pa.field("is_gap", pa.bool_()), pa.field("gap_first", pa.int64()),
                   pa.field("gap_last", pa.int64())]
    if record_time:
        fields.append(pa.field("time_record", TIME_TYPE))
    return pa.schema(fields)


# -- packets into columns ----------------------------------------------------


class Decoded:
    """Decoded packets: ``rows`` (indices of the packets kept), their ``seq``,
    ``mono`` and ``wall`` (int64 arrays, ns) with ``*_have`` flags (bool
    arrays: from the standard block, or the first header of that name parsed
    as a decimal), ``headers`` (a ``map<string, string>`` array, standard
    headers first) and ``payload`` (a binary array)."""

    __slots__ = ("headers", "mono", "mono_have", "payload", "rows", "seq", "seq_have", "wall", "wall_have")


def _first_bad_utf8(data, offsets):
    for j in range(len(offsets) - 1):
        try:
            bytes(data[offsets[j]:offsets[j + 1]]).decode("utf-8")
        except UnicodeDecodeError:
            return j
    return 0


def decode(buf, starts, lengths, where, keep=None):
    """Checks and decodes the packets at ``buf[starts[i] : starts[i] +
    lengths[i]]``. ``keep(seq, seq_have, wall, wall_have)`` may return a
    boolean mask of the packets to keep, or None for all (asked before
    anything is copied). ``where(i)`` describes packet i for errors.

    Raises :class:`RecordingFormatError` for the first corrupt packet (a
    failed check, or a header that is not UTF-8)."""
    starts = np.ascontiguousarray(starts, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    count, seq, seqh, mono, monoh, wall, wallh = check_and_index(buf, starts, lengths, where)
    mask = keep(seq, seqh, wall, wallh) if keep is not None else None
    rows = np.nonzero(mask)[0] if mask is not None else None
    if rows is not None:
        starts, lengths, count = starts[rows], lengths[rows], count[rows]
        seq, seqh, mono, monoh, wall, wallh = (a[rows] for a in (seq, seqh, mono, monoh, wall, wallh))
    mo, ko, kd, vo, vd, po, pd = gather(buf, starts, lengths)
    total = len(ko) - 1
    keys = pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(ko), pa.py_buffer(kd)])
    values = pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(vo), pa.py_buffer(vd)])
    for arr, data, offsets, what in ((keys, kd, ko, "key"), (values, vd, vo, "value")):
        if not len(data) or np.frombuffer(data, np.uint8).max() < 0x80:
            continue  # ASCII, the common case, is UTF-8
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            j = _first_bad_utf8(data, offsets)
            i = int(np.searchsorted(mo, j, "right")) - 1
            packet = int(rows[i]) if rows is not None else i
            raise RecordingFormatError(f"{where(packet)}: corrupt a0py packet: header {j - int(mo[i])} {what} "
                                       "is not UTF-8") from None
    out = Decoded()
    out.headers = pa.MapArray.from_arrays(pa.array(mo), keys, values)
    out.payload = pa.Array.from_buffers(pa.binary(), len(starts), [None, pa.py_buffer(po), pa.py_buffer(pd)])
    out.rows = rows if rows is not None else np.arange(len(starts))
    out.seq, out.seq_have, out.mono, out.mono_have, out.wall, out.wall_have = seq, seqh, mono, monoh, wall, wallh
    return out


# -- chunks into batches ------------------------------------------------------


def records_to_batches(records, offs, channels, predicate, options, schema, where):
    """The batches of the message records at ``offs`` in ``records`` (a
    decompressed chunk): frame rows, then gap rows."""
    if not len(offs):
        return
    u16, u32, u64 = u_views(records)
    length = u64[offs + 1].astype(np.int64)
    short = np.nonzero(length < MESSAGE_FIXED - RECORD_HEADER)[0]
    if len(short):
        raise RecordingFormatError(f"{where}: message {short[0]}: record of {length[short[0]]} bytes, "
                                   f"shorter than a message's fixed fields")
    chan = u16[offs + MESSAGE_CHANNEL_AT]
    seq32 = u32[offs + MESSAGE_SEQUENCE_AT].astype(np.int64)
    pub = np.minimum(u64[offs + MESSAGE_PUBLISH_TIME_AT], np.uint64(_INT64_MAX)).astype(np.int64)
    log_us = (np.minimum(u64[offs + MESSAGE_LOG_TIME_AT], np.uint64(_INT64_MAX)).astype(np.int64) // 1000
              if options.record_time else None)
    ids = np.array([chan[0]]) if (chan == chan[0]).all() else np.unique(chan)
    packet_ids = [int(c) for c in ids if channels.get(int(c), (None, None))[1] == KIND_PACKET
                  and predicate.topic_ok(channels[int(c)][0])]
    gap_ids = [int(c) for c in ids if channels.get(int(c), (None, None))[1] == KIND_GAP]
    if packet_ids:
        sel = np.isin(chan, packet_ids) if len(packet_ids) < len(ids) else np.ones(len(offs), bool)
        wall_us = pub // 1000
        sel &= predicate.wall_mask(wall_us)
        rows = np.nonzero(sel)[0]
        if len(rows):
            batch = _frame_batch(records, offs, rows, chan, seq32, wall_us, length, channels, predicate,
                                 options, schema, where, log_us)
            if batch is not None:
                yield batch
    if gap_ids and options.gaps:
        rows = np.nonzero(np.isin(chan, gap_ids))[0]
        batch = _gap_batch(records, offs[rows], length[rows], pub[rows], predicate, schema, where,
                           None if log_us is None else log_us[rows])
        if batch is not None:
            yield batch


def _frame_batch(records, offs, rows, chan, seq32, wall_us, length, channels, predicate, options,
                 schema, where, log_us=None):
    starts = offs[rows] + MESSAGE_FIXED
    lengths = length[rows] - (MESSAGE_FIXED - RECORD_HEADER)
    fallback = seq32[rows]

    def where_row(i):
        return f"{where}, message {int(rows[i])}"

    def keep(seq, seq_have, wall, wall_have):
        seq[~seq_have] = fallback[~seq_have]  # no a0_transport_seq: the record's sequence
        return None if predicate.seq_lo is None and predicate.seq_hi is None and predicate.seq_in is None \
            else predicate.seq_mask(seq)

    dec = decode(records, starts, lengths, where_row, keep)
    if not len(dec.rows):
        return None
    topics = _topic_column(chan[rows][dec.rows], channels)
    return assemble(schema, topics, dec.seq, (dec.mono, dec.mono_have), wall_us[rows][dec.rows], None,
                     dec.headers, dec.payload, gaps=None,
                     record_us=None if log_us is None else log_us[rows][dec.rows])


def _topic_column(chan, channels):
    if len(chan) and (chan == chan[0]).all():  # one channel per chunk, as a0py writes them
        return pa.array([channels[int(chan[0])][0]], pa.string()).take(pa.array(np.zeros(len(chan), np.int32)))
    ids, inverse = np.unique(chan, return_inverse=True)
    names = pa.array([channels[int(c)][0] for c in ids], pa.string())
    return names.take(pa.array(inverse.astype(np.int32)))


def assemble(schema, topics, seq, mono, wall_us, wall_valid, headers, payload, gaps, record_us=None):
    """The record batch of ``schema`` from columns: ``mono`` is (values,
    present), ``wall_us`` µs with ``wall_valid`` (None: all valid), ``gaps``
    None for frame rows or (firsts, lasts) for gap rows, ``record_us`` the
    recorder's read times (None: null). A struct payload column gets the
    payloads parsed as JSON objects; the gap columns are filled when
    ``schema`` has them."""
    n = len(seq)
    mono_vals, mono_have = mono
    cols = {
        "topic": topics,
        "seq": pa.array(seq, pa.int64()),
        "time_mono": pa.array(mono_vals, pa.int64(), mask=~mono_have),
        "time_wall": pa.array(wall_us, pa.int64(), mask=None if wall_valid is None else ~wall_valid).cast(TIME_TYPE),
        "headers": headers,
        "payload": payload,
    }
    payload_type = schema.field("payload").type
    if pa.types.is_struct(payload_type) and gaps is None:
        cols["payload"] = parse_json_payloads(payload, payload_type)
    if "is_gap" in schema.names:
        if gaps is None:
            cols["is_gap"] = pa.array(np.zeros(n, bool))
            cols["gap_first"] = pa.nulls(n, pa.int64())
            cols["gap_last"] = pa.nulls(n, pa.int64())
        else:
            cols["is_gap"] = pa.array(np.ones(n, bool))
            cols["gap_first"] = pa.array(gaps[0], pa.int64())
            cols["gap_last"] = pa.array(gaps[1], pa.int64())
    if "time_record" in schema.names:
        cols["time_record"] = (pa.nulls(n, TIME_TYPE) if record_us is None
                               else pa.array(record_us, pa.int64()).cast(TIME_TYPE))
    arrays = []
    for f in schema:
        arr = cols[f.name]
        if arr.type != f.type:
            arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _gap_batch(records, offs, length, pub, predicate, schema, where, log_us=None):
    topics, firsts, lasts, walls, records_us = [], [], [], [], []
    mv = memoryview(records)
    logs = log_us.tolist() if log_us is not None else [None] * len(offs)
    for i, (o, ln, t, lg) in enumerate(zip(offs.tolist(), length.tolist(), pub.tolist(), logs)):
        try:
            topic, first, last = parse_gap(mv[o + MESSAGE_FIXED:o + RECORD_HEADER + ln])
        except ValueError as e:
            raise RecordingFormatError(f"{where}, gap message {i}: {e}") from None
        wall = t // 1000
        if (predicate.topic_ok(topic) and predicate.seq_mask(np.array([first]))[0]
                and predicate.wall_mask(np.array([wall]))[0]):
            topics.append(topic)
            firsts.append(first)
            lasts.append(last)
            walls.append(wall)
            records_us.append(lg)
    if not topics:
        return None
    n = len(topics)
    return assemble(schema, pa.array(topics, pa.string()), np.array(firsts, np.int64),
                     (np.zeros(n, np.int64), np.zeros(n, bool)), np.array(walls, np.int64), None,
                     pa.nulls(n, HEADERS_TYPE), pa.nulls(n, schema.field("payload").type),
                     gaps=(firsts, lasts), record_us=None if log_us is None else np.array(records_us, np.int64))


def parse_json_payloads(payload, struct_type):
    """Payloads (binary) parsed as JSON objects into ``struct_type``; a payload
    that is not a JSON object, or does not fit the type, gives null."""
    import pyarrow.json as pajson

    n = len(payload)
    if n == 0:
        return pa.array([], struct_type)
    try:
        # A raw CR or LF can only be whitespace in JSON text, so blanking them
        # keeps every payload on its own line.
        flat = pc.replace_substring(pc.replace_substring(payload, b"\n", b" "), b"\r", b" ")
        if pc.any(pc.equal(pc.binary_length(flat), 0)).as_py():
            raise ValueError("empty payload")
        lines = pc.binary_join_element_wise(flat, pa.scalar(b"", pa.binary()), b"\n")
        buf = lines.buffers()[2].to_pybytes()[: pc.sum(pc.binary_length(lines)).as_py()]
        table = pajson.read_json(pa.BufferReader(buf), parse_options=pajson.ParseOptions(
            explicit_schema=pa.schema(list(struct_type)), unexpected_field_behavior="ignore"))
        if table.num_rows != n:
            raise ValueError("row count")
        return pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in struct_type],
                                          fields=list(struct_type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return _parse_json_rows(payload, struct_type)


def _parse_json_rows(payload, struct_type):
    out = []
    for p in payload.to_pylist():
        try:
            v = json.loads(p) if p is not None else None
        except ValueError:
            v = None
        if v is not None and not isinstance(v, dict):
            v = None
        if v is not None:
            try:
                pa.array([v], struct_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                v = None
        out.append(v)
    return pa.array(out, struct_type)
