"""a0py packets in bulk: many packets lying in one buffer (a decompressed
MCAP chunk, or frames copied out of an arena) decoded into Arrow columns, no
Python code running per packet or per header.

The work is done by the compiled :mod:`a0py.spark._bulk` (checks as strict
as the C decoder's, see its invariants); this module turns its buffers into
Arrow arrays and its failures into :class:`RecordingFormatError` naming
where the packet lies.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import _bulk
from .errors import RecordingFormatError

H_TIME_MONO = "a0_time_mono"
H_TIME_WALL = "a0_time_wall"
H_WRITER_ID = "a0_writer_id"
H_WRITER_SEQ = "a0_writer_seq"
H_TRANSPORT_SEQ = "a0_transport_seq"
STANDARD_HEADERS = (H_TIME_MONO, H_TIME_WALL, H_WRITER_ID, H_WRITER_SEQ, H_TRANSPORT_SEQ)


class Decoded:
    """Decoded packets: ``rows`` (indices of the packets kept), their ``seq``,
    ``mono`` and ``wall`` (int64 arrays, ns) with ``*_have`` flags (bool
    arrays: from the standard block, or the first header of that name parsed
    as a decimal), ``headers`` (a ``map<string, string>`` array, standard
    headers first) and ``payload`` (a binary array)."""

    __slots__ = ("headers", "mono", "mono_have", "payload", "rows", "seq", "seq_have", "wall", "wall_have")


def _corrupt(where, i, what):
    raise RecordingFormatError(f"{where(i)}: corrupt a0py packet: {what}")


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
    err, _valid, count, seq, seqh, mono, monoh, wall, wallh = _bulk.scan(buf, starts, lengths, True, True)
    if err is not None:
        _corrupt(where, err[0], err[1])
    seqh, monoh, wallh = seqh.view(bool), monoh.view(bool), wallh.view(bool)
    mask = keep(seq, seqh, wall, wallh) if keep is not None else None
    rows = np.nonzero(mask)[0] if mask is not None else None
    if rows is not None:
        starts, lengths, count = starts[rows], lengths[rows], count[rows]
        seq, seqh, mono, monoh, wall, wallh = (a[rows] for a in (seq, seqh, mono, monoh, wall, wallh))
    mo, ko, kd, vo, vd, po, pd = _bulk.gather(buf, starts, lengths)
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
            _corrupt(where, int(rows[i]) if rows is not None else i,
                     f"header {j - int(mo[i])} {what} is not UTF-8")
    out = Decoded()
    out.headers = pa.MapArray.from_arrays(pa.array(mo), keys, values)
    out.payload = pa.Array.from_buffers(pa.binary(), len(starts), [None, pa.py_buffer(po), pa.py_buffer(pd)])
    out.rows = rows if rows is not None else np.arange(len(starts))
    out.seq, out.seq_have, out.mono, out.mono_have, out.wall, out.wall_have = seq, seqh, mono, monoh, wall, wallh
    return out


def wall_times(buf, starts, lengths):
    """The ``a0_time_wall`` of each frame that is a valid packet: (int64,
    bool) arrays; a frame that is not a packet simply has none."""
    _err, _valid, _c, _s, _sh, _m, _mh, wall, wallh = _bulk.scan(
        buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64), False, False)
    return wall, wallh.view(bool)
