"""a0py packets in bulk: many packets lying in one buffer (a decompressed
MCAP chunk, or frames copied out of an arena) checked and indexed at once,
no Python code running per packet or per header.

The work is done by the compiled :mod:`a0py.recording._bulk`, with the C
core's own packet decoder (see its invariants): :func:`scan` checks and
indexes, :func:`gather` copies headers and payloads into the buffers of
Arrow arrays (the Spark source builds its columns from them), and
:func:`gather_slices` any byte ranges (the data of messages a0py did not
write); :func:`cut_packet_records` turns a typed topic's headers messages
back into the packets they were cut from. This module turns a failed check into a :class:`RecordingFormatError` naming where the
packet lies.
"""

from __future__ import annotations

import numpy as np

from ._bulk import gather, gather_slices, headers_records, scan
from .errors import RecordingFormatError

__all__ = ["check_and_index", "cut_packet_records", "gather", "gather_slices", "scan", "transport_seqs",
           "wall_times"]


def check_and_index(buf, starts, lengths, where):
    """:func:`scan` in strict mode over ``buf[starts[i] : starts[i] +
    lengths[i]]``: ``(count, seq, seq_have, mono, mono_have, wall,
    wall_have)`` with boolean flags. ``where(i)`` describes packet i for
    errors. Raises :class:`RecordingFormatError` for the first corrupt packet."""
    starts = np.ascontiguousarray(starts, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    err, _valid, count, seq, seqh, mono, monoh, wall, wallh = scan(buf, starts, lengths, True, True)
    if err is not None:
        raise RecordingFormatError(f"{where(err[0])}: corrupt a0py packet: {err[1]}")
    return count, seq, seqh.view(bool), mono, monoh.view(bool), wall, wallh.view(bool)


def transport_seqs(buf, starts, lengths, fallback, where):
    """Each packet's ``a0_transport_seq`` (standard block or header), else
    ``fallback[i]`` (an MCAP record's 32-bit sequence): an int64 array.
    Raises :class:`RecordingFormatError` for the first corrupt packet."""
    _count, seq, seq_have, *_ = check_and_index(buf, starts, lengths, where)
    seq[~seq_have] = np.asarray(fallback, np.int64)[~seq_have]
    return seq


def wall_times(buf, starts, lengths):
    """The ``a0_time_wall`` of each frame that is a valid packet: (int64,
    bool) arrays; a frame that is not a packet simply has none."""
    _err, _valid, _c, _s, _sh, _m, _mh, wall, wallh = scan(
        buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64), False, False)
    return wall, wallh.view(bool)


def cut_packet_records(records, offsets, fmt, where):
    """The message records at ``offsets`` in ``records`` (a typed topic's
    headers channel, format ``fmt``: ``headers.FORMAT_*``) with their data
    the packets cut at the payload that they hold, every other field kept:
    ``(records, offsets, lengths)`` (a bytearray, the int64 offsets of its
    records, their body lengths), as :func:`reader.message_offsets` and
    the record's length field give them. Raises
    :class:`RecordingFormatError` (after ``where``) for a message a0py did
    not write."""
    try:
        return headers_records(records, np.ascontiguousarray(offsets, np.int64), fmt)
    except ValueError as e:
        raise RecordingFormatError(f"{where}: {e}") from None
