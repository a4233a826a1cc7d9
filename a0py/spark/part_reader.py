"""Reading the ``a0`` source's partitions: one planned :class:`Part` (its
MCAP file slices chunk by chunk, its arenas by :mod:`.arenas`) into Arrow
record batches, and :func:`read_table`, the same rows without Spark."""

from __future__ import annotations

import os

import pyarrow as pa
from mcap.opcode import Opcode

from ..recording.format import channel_kind
from ..recording.reader import (
    ChunkRef,
    message_offsets,
    parse_channel,
    read_chunk_records,
    read_message_index,
)
from .arenas import read_arena
from .batches import frame_schema, records_to_batches
from .options import ReadOptions
from .planning import ArenaSlice, plan
from .predicate import Predicate


def read_part(part, predicate=Predicate(), options=ReadOptions()):  # noqa: B008 - frozen
    """Yields the record batches of ``part``'s rows that pass ``predicate``."""
    schema = frame_schema(options.gaps, options.payload_type, options.record_time, options.headers)
    for item in part.items:
        if isinstance(item, ArenaSlice):
            yield from read_arena(item, predicate, options, schema)
        else:
            yield from read_file_slice(item, predicate, options, schema)


def read_file_slice(fs, predicate, options, schema):
    """Yields the batches of a :class:`FileSlice`'s chunks, rows passing ``predicate``."""
    fd = os.open(fs.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        channels = {cid: (topic, kind) for cid, topic, kind in fs.channels}
        for ref in fs.refs:
            records = read_chunk_records(fd, ref, fs.path, options.validate_crc)
            idx = read_message_index(fd, ref, fs.path) if isinstance(ref, ChunkRef) else None
            offs, others = message_offsets(records, idx, fs.path, ref.offset)
            for op, body_at, body in others:
                if op == Opcode.CHANNEL:
                    ch = parse_channel(body, fs.path, body_at)
                    kind = channel_kind(ch)
                    if kind is not None and ch.id not in channels:
                        channels[ch.id] = (ch.topic, kind)
            what = "chunk" if isinstance(ref, ChunkRef) else "message region"
            yield from records_to_batches(records, offs, channels, predicate, options, schema,
                                          f"{fs.path}: {what} at byte {ref.offset}")
    finally:
        os.close(fd)


def read_table(spec, *, gaps=False, topics=None, validate_crc=True, record_time=False, headers=True):
    """Every row of the recordings (or arenas) ``spec`` as one
    ``pyarrow.Table``, in file and chunk order, read in this process: the
    Spark source's rows without Spark. ``record_time`` adds the column
    ``time_record`` (when the recorder read each frame).

    Raises :class:`RecordingFormatError` for a damaged file,
    :class:`RecordingOptionError` for a path that names nothing."""
    predicate = Predicate() if topics is None else Predicate().and_topics(topics)
    options = ReadOptions(gaps=gaps, validate_crc=validate_crc, record_time=record_time, headers=headers)
    schema = frame_schema(gaps, record_time=record_time, headers=headers)
    batches = [b for part in plan(spec, predicate, options) for b in read_part(part, predicate, options)]
    return pa.Table.from_batches(batches, schema=schema)
