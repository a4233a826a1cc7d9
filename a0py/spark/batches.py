"""Arrow record batches of frames: the rows of the ``a0`` source built from
a decompressed chunk's message records (or frames copied out of an arena),
with no Python code per row.

A packet's columns come from its bytes in place: the chunk's record offsets
give each packet's start and length, the compiled scan checks and indexes
them (:mod:`a0py.recording.packets`), and its gather copies headers and
payloads straight into the buffers of Arrow arrays. Any other message's
columns come from its record's fixed fields (numpy over the offsets) and its
data copied out with numpy (:func:`binary_slices`).

Invariants:

* A packet row is a frame: ``topic``, ``seq`` (the packet's
  ``a0_transport_seq``; the record's 32-bit sequence when the packet has
  none), ``time_mono`` (ns, the packet's ``a0_time_mono``, null when
  absent), ``time_wall`` (the record's publish time, to the microsecond),
  ``headers`` (as a0py's readers show them: the standard ones first, then
  the packet's own, in order), ``payload``. Gap rows (only when the schema
  has the gap columns) have ``is_gap`` true, ``seq`` = ``gap_first``,
  ``time_wall`` = when the recorder saw the gap, null ``time_mono``,
  ``headers`` and ``payload``.
* A foreign row (a channel a0py did not write) is a message: ``topic`` its
  channel's, ``payload`` its data, ``time_wall`` its publish time, null
  ``seq``, ``time_mono`` and ``headers``. A seq filter passes none.
* A typed row is a typed topic's payload message joined with the message of
  the same sequence of its headers channel (from the chunk before, kept in
  the same part by the planner): ``seq``, ``time_mono``, ``headers`` as the
  whole packet gives them, ``payload`` the typed bytes; without its headers
  message it is a row like a foreign one. Headers-channel messages and
  a0py's JSON copies are never rows.
* With the MCAP columns (``log_time``, ``publish_time``, ``sequence``,
  ``schema_name``, ``message_encoding``) every row from a record carries
  the record's fields and its channel's schema name (null without a schema)
  and encoding; a packet row has ``a0py.Packet``, ``a0py/packet``.
* The batch schema is Spark's (``to_arrow_schema`` of the source's DDL):
  timestamps in µs UTC, ``map<string, string>``, every field nullable.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..proto.packets import PACKET_ENCODING
from ..recording.errors import RecordingFormatError, RecordingOptionError
from ..recording.format import (
    GAP_SCHEMA,
    KIND_FOREIGN,
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    PACKET_SCHEMA,
    parse_gap,
)
from ..recording.headers import FORMAT_PACKET
from ..recording.message_fields import DATA_AFTER_LENGTH, MessageFields
from ..recording.packets import check_and_index, cut_packet_records, gather, gather_slices

FRAME_COLUMNS = ("topic", "seq", "time_mono", "time_wall", "headers", "payload")
GAP_COLUMNS = ("is_gap", "gap_first", "gap_last")
MCAP_COLUMNS = ("log_time", "publish_time", "sequence", "schema_name", "message_encoding")
TIME_TYPE = pa.timestamp("us", tz="UTC")
HEADERS_TYPE = pa.map_(pa.string(), pa.string())
_INT64_MAX = (1 << 63) - 1


def frame_schema(gaps=False, payload_type=None, record_time=False, headers=True, mcap=False, message_type=None):
    """The Arrow schema of the rows (Spark's, as ``to_arrow_schema`` gives it:
    every field nullable, timestamps in µs UTC, ``map<string, string>``);
    ``headers=False`` leaves out the ``headers`` column, ``mcap=True`` adds
    the MCAP columns (:data:`MCAP_COLUMNS`) after ``payload``, a
    ``message_type`` (``decode=true``) the columns ``message`` of that type
    and ``decode_error`` after them."""
    fields = [
        pa.field("topic", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("time_mono", pa.int64()),
        pa.field("time_wall", TIME_TYPE),
    ]
    if headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    fields.append(pa.field("payload", payload_type if payload_type is not None else pa.binary()))
    if mcap:
        fields += [pa.field("log_time", TIME_TYPE), pa.field("publish_time", TIME_TYPE),
                   pa.field("sequence", pa.int64()), pa.field("schema_name", pa.string()),
                   pa.field("message_encoding", pa.string())]
    if message_type is not None:
        fields += [pa.field("message", message_type), pa.field("decode_error", pa.string())]
    if gaps:
        fields += [pa.field("is_gap", pa.bool_()), pa.field("gap_first", pa.int64()),
                   pa.field("gap_last", pa.int64())]
    if record_time:
        fields.append(pa.field("time_record", TIME_TYPE))
    return pa.schema(fields)


class Chan(NamedTuple):
    """What the reader needs of a channel: its row topic (a typed topic's
    headers channel: the a0py topic), kind (``format.KIND_*``), schema name
    (None: no schema), message encoding, and for a typed topic's payload
    channel the id of its headers channel (and the reverse); a headers
    channel's format (``recording.headers.FORMAT_*``)."""

    topic: str
    kind: str
    schema_name: str | None = None
    message_encoding: str = ""
    partner: int | None = None
    headers_format: int = FORMAT_PACKET


def binary_slices(buf, starts, lengths):
    """A binary array of ``buf[starts[i] : starts[i] + lengths[i]]``, copied
    out by the compiled :func:`~a0py.recording.packets.gather_slices` (no
    Python code per row)."""
    n = len(starts)
    offsets, data = gather_slices(buf, np.ascontiguousarray(starts, np.int64),
                                  np.ascontiguousarray(lengths, np.int64))
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


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


def _clip64(a):
    return np.minimum(a, np.uint64(_INT64_MAX)).astype(np.int64)


def records_to_batches(records, offs, channels, predicate, options, schema, where, stash=None, decoders=None):
    """The batches of the message records at ``offs`` in ``records`` (a
    decompressed chunk): packet rows, foreign rows, typed rows, then gap
    rows. ``channels``: id -> :class:`Chan`. ``stash`` (a dict kept over a
    file slice's chunks) holds the messages of typed topics' headers
    channels until the payload chunk that follows them joins them.
    ``decoders`` (``decode=true``): channel id -> its decoder, or None."""
    if not len(offs):
        return
    fields = MessageFields(records)
    length = fields.body_length(offs)
    short = np.nonzero(length < DATA_AFTER_LENGTH)[0]
    if len(short):
        raise RecordingFormatError(f"{where}: message {short[0]}: record of {length[short[0]]} bytes, "
                                   f"shorter than a message's fixed fields")
    chan = fields.channel_id(offs)
    seq32 = fields.sequence(offs).astype(np.int64)
    pub = _clip64(fields.publish_time(offs))
    log_us = _clip64(fields.log_time(offs)) // 1000
    wall_us = pub // 1000
    ids = np.array([chan[0]]) if (chan == chan[0]).all() else np.unique(chan)
    kinds = {}
    for c in ids.tolist():
        ch = channels.get(c)
        if ch is not None:
            kinds.setdefault(ch.kind, []).append(c)
    rec = _Records(records, offs, chan, seq32, wall_us, log_us, length, channels, where)
    rec.decoders = decoders

    def select(cids):
        sel = np.isin(chan, cids) if len(cids) < len(ids) else np.ones(len(offs), bool)
        return sel & predicate.wall_mask(wall_us)

    packet_ids = [c for c in kinds.get(KIND_PACKET, ()) if predicate.topic_ok(channels[c].topic)]
    if packet_ids:
        rows = np.nonzero(select(packet_ids))[0]
        if len(rows):
            batch = _frame_batch(rec, rows, predicate, schema)
            if batch is not None:
                yield batch
    # A foreign row has no seq: a seq filter (which null fails) passes none.
    if not _has_seq_bound(predicate):
        foreign_ids = [c for c in kinds.get(KIND_FOREIGN, ()) if predicate.topic_ok(channels[c].topic)]
        if foreign_ids:
            rows = np.nonzero(select(foreign_ids))[0]
            if len(rows):
                yield _foreign_batch(rec, rows, schema)
    if stash is not None:
        for c in kinds.get(KIND_HEADERS, ()):
            if predicate.topic_ok(channels[c].topic):
                rows = np.nonzero(chan == c)[0]
                recs, hoffs, hlen = records, offs[rows], length[rows]
                fmt = channels[c].headers_format
                if fmt != FORMAT_PACKET:  # in its payloads' family (protobuf, CDR): back to cut packets
                    recs, hoffs, hlen = cut_packet_records(records, hoffs, fmt, where)
                stash[c] = _stash_headers(stash.get(c), (recs, hoffs, hlen, seq32[rows], where))
    for c in kinds.get(KIND_TYPED, ()):
        ch = channels[c]
        headers = None
        if stash is not None and ch.partner is not None:
            headers = stash.pop(ch.partner, None)
            if headers is not None:
                # Headers messages of payloads still to come (in the next chunk,
                # from a writer that mixes the two channels) wait for them.
                left = ~np.isin(headers[3], seq32[chan == c])
                if left.any():
                    stash[ch.partner] = (headers[0], headers[1][left], headers[2][left], headers[3][left],
                                         headers[4])
        if not predicate.topic_ok(ch.topic):
            continue
        rows = np.nonzero(select([c]))[0]
        if len(rows):
            batch = _typed_batch(rec, rows, headers, predicate, schema)
            if batch is not None:
                yield batch
    gap_ids = kinds.get(KIND_GAP, ())
    if gap_ids and options.gaps:
        rows = np.nonzero(np.isin(chan, gap_ids))[0]
        batch = _gap_batch(records, offs[rows], length[rows], pub[rows], predicate, schema, where,
                           log_us[rows], seq32[rows])
        if batch is not None:
            yield batch


def _stash_headers(prev, cur):
    """The stash entry of a headers channel: ``cur`` (records, offsets,
    lengths, sequences, where) of this chunk, with the messages ``prev``
    left unjoined from the chunk before copied in front of them (those whose
    payloads were not in that chunk: a writer that mixes a typed topic's two
    channels ends a chunk with headers messages whose payloads begin the next)."""
    if prev is None or not len(prev[1]):
        return cur
    pbuf, poffs, plen, pseq, _ = prev
    buf, offs, length, seq, where = cur
    ends = MessageFields.data_end(poffs, plen)
    parts = [bytes(memoryview(pbuf)[int(a):int(b)]) for a, b in zip(poffs, ends, strict=True)]
    head = b"".join(parts)
    sizes = (ends - poffs).astype(np.int64)
    new_offs = np.concatenate([np.cumsum(sizes) - sizes, offs.astype(np.int64) + len(head)])
    return (head + bytes(buf), new_offs, np.concatenate([plen, length]),
            np.concatenate([pseq, seq]), where)


def _has_seq_bound(predicate):
    return predicate.seq_lo is not None or predicate.seq_hi is not None or predicate.seq_in is not None


class _Records:
    """A chunk's message records and their fixed fields (arrays over ``offs``)."""

    __slots__ = ("buf", "chan", "channels", "decoders", "length", "log_us", "offs", "seq32", "wall_us", "where")

    def __init__(self, buf, offs, chan, seq32, wall_us, log_us, length, channels, where):
        self.buf, self.offs, self.chan, self.seq32 = buf, offs, chan, seq32
        self.wall_us, self.log_us, self.length, self.channels, self.where = wall_us, log_us, length, channels, where
        self.decoders = None

    def decoded(self, rows, payload, schema):
        """(message, decode_error) of messages ``rows`` (``payload`` their
        bytes) when ``schema`` has them, else None."""
        if "message" not in schema.names:
            return None
        return decode_messages(self.chan[rows], payload, self.decoders, schema.field("message").type)

    def data(self, rows):
        """(starts, lengths) of the data of messages ``rows``."""
        return MessageFields.data_start(self.offs[rows]), self.length[rows] - DATA_AFTER_LENGTH

    def mcap(self, rows):
        """The MCAP columns of messages ``rows``, from their records and channels."""
        chan = self.chan[rows]
        return {"log_us": self.log_us[rows], "pub_us": self.wall_us[rows], "sequence": self.seq32[rows],
                "schema_name": _channel_column(chan, self.channels, "schema_name"),
                "message_encoding": _channel_column(chan, self.channels, "message_encoding")}


def _frame_batch(rec, rows, predicate, schema):
    starts, lengths = rec.data(rows)
    fallback = rec.seq32[rows]
    where = rec.where

    def where_row(i):
        return f"{where}, message {int(rows[i])}"

    def keep(seq, seq_have, wall, wall_have):
        seq[~seq_have] = fallback[~seq_have]  # no a0_transport_seq: the record's sequence
        return predicate.seq_mask(seq) if _has_seq_bound(predicate) else None

    dec = decode(rec.buf, starts, lengths, where_row, keep)
    if not len(dec.rows):
        return None
    rows = rows[dec.rows]
    return assemble(schema, _channel_column(rec.chan[rows], rec.channels), dec.seq, (dec.mono, dec.mono_have),
                    rec.wall_us[rows], None, dec.headers, dec.payload, gaps=None, record_us=rec.log_us[rows],
                    mcap=rec.mcap(rows) if "log_time" in schema.names else None)


def _foreign_batch(rec, rows, schema):
    """Rows of messages a0py did not write: the data as payload, the
    record's fields, no seq, time_mono or headers."""
    n = len(rows)
    starts, lengths = rec.data(rows)
    payload = binary_slices(rec.buf, starts, lengths)
    return assemble(schema, _channel_column(rec.chan[rows], rec.channels), pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.int64()), rec.wall_us[rows], None, pa.nulls(n, HEADERS_TYPE),
                    payload, gaps=None, record_us=rec.log_us[rows],
                    mcap=rec.mcap(rows) if "log_time" in schema.names else None,
                    decoded=rec.decoded(rows, payload, schema))


def _typed_batch(rec, rows, headers, predicate, schema):
    """Rows of a typed topic's payload messages ``rows``, each joined with the
    headers channel's message of the same sequence in ``headers`` (the
    stashed headers chunk, or None): seq, times and headers as the packet
    they were cut from gives them; a payload without its headers message is
    a row like a foreign one (a seq filter drops it)."""
    pseq = rec.seq32[rows]
    matched = np.zeros(len(rows), bool)
    hidx = np.zeros(0, np.int64)
    if headers is not None and len(headers[1]):
        hbuf, hoffs, hlen, hseq, hwhere = headers
        order = np.argsort(hseq, kind="stable")
        sorted_seq = hseq[order]
        pos = np.minimum(np.searchsorted(sorted_seq, pseq), len(sorted_seq) - 1)
        matched = sorted_seq[pos] == pseq
        hidx = order[pos[matched]]
    m_at = np.nonzero(matched)[0]  # positions in rows with a headers message
    seq_bound = _has_seq_bound(predicate)
    if len(m_at):
        fallback = pseq[m_at]

        def keep(seq, seq_have, wall, wall_have):
            seq[~seq_have] = fallback[~seq_have]
            return predicate.seq_mask(seq) if seq_bound else None

        dec = decode(hbuf, MessageFields.data_start(hoffs[hidx]), hlen[hidx] - DATA_AFTER_LENGTH,
                     lambda i: f"{hwhere}, headers message of sequence {int(fallback[i])}", keep)
        kept = m_at[dec.rows]
    else:
        dec, kept = None, m_at
    if seq_bound:
        final = kept  # the rows without headers have no seq, which fails a seq filter
        slot = np.arange(len(kept))
    else:
        final = np.arange(len(rows))
        slot = np.full(len(rows), -1, np.int64)
        slot[kept] = np.arange(len(kept))
    if not len(final):
        return None
    n = len(final)
    have = slot >= 0
    take = np.where(have, slot, 0)
    seq = np.zeros(n, np.int64)
    mono = np.zeros(n, np.int64)
    mono_have = np.zeros(n, bool)
    if dec is not None and len(dec.rows):
        seq = np.where(have, dec.seq[take], 0)
        mono = np.where(have, dec.mono[take], 0)
        mono_have = have & dec.mono_have[take]
        hdrs = dec.headers.take(pa.array(take, pa.int64(), mask=~have))
    else:
        hdrs = pa.nulls(n, HEADERS_TYPE)
    rows = rows[final]
    starts, lengths = rec.data(rows)
    payload = binary_slices(rec.buf, starts, lengths)
    return assemble(schema, _channel_column(rec.chan[rows], rec.channels), pa.array(seq, pa.int64(), mask=~have),
                    (mono, mono_have), rec.wall_us[rows], None, hdrs, payload,
                    gaps=None, record_us=rec.log_us[rows],
                    mcap=rec.mcap(rows) if "log_time" in schema.names else None,
                    decoded=rec.decoded(rows, payload, schema))


def decode_messages(chan, payload, decoders, message_type):
    """(message, decode_error) arrays of messages of channels ``chan`` with
    bytes ``payload``, each decoded by its channel's decoder
    (``decoders.get(id)``; a channel with none: both null). Raises
    :class:`RecordingOptionError` for a decoder of another type than
    ``message_type`` (the schema chosen when the read began)."""
    n = len(chan)
    ids = [int(chan[0])] if n and (chan == chan[0]).all() else np.unique(chan).tolist()
    values, errors, order = [], [], []
    for c in ids:
        dec = decoders.get(c) if decoders is not None else None
        if dec is None:
            continue
        rows = np.arange(n) if len(ids) == 1 else np.nonzero(chan == c)[0]
        if dec.arrow_type != message_type and not _same_type(dec.arrow_type, message_type):
            raise RecordingOptionError(
                f"decode=true: channel {dec.channel!r} ({dec.schema_name}) decodes to {dec.arrow_type}, the read "
                f"to {message_type} (chosen from the files when it began): read one message type at a time "
                "(option topics)")
        taken = payload if len(rows) == n else payload.take(pa.array(rows))
        v, e = dec.decode(taken.to_pylist())
        values.append(v if v.type == message_type else v.cast(message_type))
        errors.append(e)
        order.append(rows)
    if not values:
        return pa.nulls(n, message_type), pa.nulls(n, pa.string())
    message = pa.concat_arrays(values) if len(values) > 1 else values[0]
    error = pa.concat_arrays(errors) if len(errors) > 1 else errors[0]
    done = np.concatenate(order)
    if len(done) == n and (done == np.arange(n)).all():
        return message, error
    slot = np.full(n, -1, np.int64)
    slot[done] = np.arange(len(done))
    idx = pa.array(slot, pa.int64(), mask=slot < 0)  # rows of channels without a decoder: null
    return message.take(idx), error.take(idx)


def _same_type(a, b):
    """Do Arrow types ``a`` and ``b`` differ only where Spark's round trip
    changes them (a timestamp's zone, a list's field name)?"""
    try:
        return pa.nulls(0, a).cast(b).type == b
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


def _channel_column(chan, channels, field="topic"):
    """A string column of each message's channel's ``field``."""
    if len(chan) and (chan == chan[0]).all():  # one channel per chunk, as a0py writes them
        return pa.array([getattr(channels[int(chan[0])], field)], pa.string()).take(
            pa.array(np.zeros(len(chan), np.int32)))
    ids, inverse = np.unique(chan, return_inverse=True)
    names = pa.array([getattr(channels[int(c)], field) for c in ids], pa.string())
    return names.take(pa.array(inverse.astype(np.int32)))


def _time_column(us, n):
    return pa.nulls(n, TIME_TYPE) if us is None else pa.array(us, pa.int64()).cast(TIME_TYPE)


def _int_column(values, valid=None):
    """An int64 column of ``values`` (a numpy array, or an Arrow array as it is)."""
    if isinstance(values, pa.Array):
        return values
    return pa.array(values, pa.int64(), mask=None if valid is None else ~valid)


def _string_column(value, n):
    if isinstance(value, pa.Array):
        return value
    return pa.nulls(n, pa.string()) if value is None else pa.array([value], pa.string()).take(
        pa.array(np.zeros(n, np.int32)))


PACKET_MCAP = {"schema_name": PACKET_SCHEMA, "message_encoding": PACKET_ENCODING}


def assemble(schema, topics, seq, mono, wall_us, wall_valid, headers, payload, gaps, record_us=None, mcap=None,
             decoded=None):
    """The record batch of ``schema`` from columns: ``seq`` an int64 array
    (or an Arrow array, which may hold nulls), ``mono`` (values, present) or
    an Arrow array, ``wall_us`` µs with ``wall_valid`` (None: all valid),
    ``gaps`` None for frame rows or (firsts, lasts) for gap rows,
    ``record_us`` the recorder's read times (None: null), ``mcap`` the MCAP
    columns (``log_us``, ``pub_us``, ``sequence``, ``schema_name``,
    ``message_encoding``; missing ones null; None: those of an a0py packet
    with no record), ``decoded`` (message, decode_error) arrays (None:
    null). A struct payload column gets the payloads parsed as JSON
    objects; the gap, MCAP and decoded columns are filled when ``schema``
    has them."""
    n = len(seq)
    cols = {
        "topic": topics,
        "seq": _int_column(seq),
        "time_mono": mono if isinstance(mono, pa.Array) else _int_column(mono[0], mono[1]),
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
        cols["time_record"] = _time_column(record_us, n)
    if "log_time" in schema.names:
        m = PACKET_MCAP if mcap is None else mcap
        cols["log_time"] = _time_column(m.get("log_us"), n)
        cols["publish_time"] = _time_column(m.get("pub_us"), n)
        seq_rec = m.get("sequence")
        cols["sequence"] = pa.nulls(n, pa.int64()) if seq_rec is None else _int_column(seq_rec)
        cols["schema_name"] = _string_column(m.get("schema_name"), n)
        cols["message_encoding"] = _string_column(m.get("message_encoding"), n)
    if "message" in schema.names:
        if decoded is None:
            cols["message"] = pa.nulls(n, schema.field("message").type)
            cols["decode_error"] = pa.nulls(n, pa.string())
        else:
            cols["message"], cols["decode_error"] = decoded
    arrays = []
    for f in schema:
        arr = cols[f.name]
        if arr.type != f.type:
            arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _gap_batch(records, offs, length, pub, predicate, schema, where, log_us, seq32):
    topics, firsts, lasts, walls, keep = [], [], [], [], []
    fields = MessageFields(records)
    for i, (o, ln, t) in enumerate(zip(offs.tolist(), length.tolist(), pub.tolist())):
        try:
            topic, first, last = parse_gap(fields.data(o, ln))
        except ValueError as e:
            raise RecordingFormatError(f"{where}, gap message {i}: {e}") from None
        wall = t // 1000
        if (predicate.topic_ok(topic) and predicate.seq_mask(np.array([first]))[0]
                and predicate.wall_mask(np.array([wall]))[0]):
            topics.append(topic)
            firsts.append(first)
            lasts.append(last)
            walls.append(wall)
            keep.append(i)
    if not topics:
        return None
    n = len(topics)
    keep = np.array(keep, np.int64)
    mcap = {"log_us": log_us[keep], "pub_us": np.array(walls, np.int64), "sequence": seq32[keep],
            "schema_name": GAP_SCHEMA, "message_encoding": "json"}
    return assemble(schema, pa.array(topics, pa.string()), np.array(firsts, np.int64),
                    (np.zeros(n, np.int64), np.zeros(n, bool)), np.array(walls, np.int64), None,
                    pa.nulls(n, HEADERS_TYPE), pa.nulls(n, schema.field("payload").type),
                    gaps=(firsts, lasts), record_us=log_us[keep], mcap=mcap)


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
