"""Reading the ``a0`` source's partitions: one planned :class:`Part` (its
MCAP file slices chunk by chunk, its arenas by :mod:`.arenas`) into Arrow
record batches, and :func:`read_table`, the same rows without Spark."""

from __future__ import annotations

import os

import pyarrow as pa
from mcap.opcode import Opcode

from ..recording.reader import (
    ChunkRef,
    message_offsets,
    parse_channel,
    parse_schema,
    read_chunk_records,
    read_message_index,
)
from .arenas import read_arena
from .batches import Chan, frame_schema, records_to_batches
from .options import ReadOptions
from .planning import ArenaSlice, channel_info, decoder, message_type, plan, selects_mcap_channels
from .predicate import Predicate


def read_part(part, predicate=Predicate(), options=ReadOptions()):  # noqa: B008 - frozen
    """Yields the record batches of ``part``'s rows that pass ``predicate``."""
    schema = frame_schema(options.gaps, options.payload_type, options.record_time, options.headers,
                          options.mcap_columns, options.message_type)
    for item in part.items:
        if isinstance(item, ArenaSlice):
            yield from read_arena(item, predicate, options, schema)
        else:
            yield from read_file_slice(item, predicate, options, schema)


def read_file_slice(fs, predicate, options, schema):
    """Yields the batches of a :class:`FileSlice`'s chunks, rows passing ``predicate``."""
    fd = os.open(fs.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        channels = {c[0]: Chan(*c[1:]) for c in fs.channels}
        schemas = {}
        stash = {}  # typed topics' headers messages waiting for their payload chunk
        decoders = None
        if options.message_type is not None:
            decoders = {cid: decoder(channels[cid].topic, name, enc, data, channels[cid].message_encoding)
                        for cid, name, enc, data in fs.schemas}
        for ref in fs.refs:
            records = read_chunk_records(fd, ref, fs.path, options.validate_crc)
            idx = read_message_index(fd, ref, fs.path) if isinstance(ref, ChunkRef) else None
            offs, others = message_offsets(records, idx, fs.path, ref.offset)
            for op, body_at, body in others:
                # Records the plan did not see (a file still being written): read as found.
                if op == Opcode.SCHEMA:
                    sch = parse_schema(body, fs.path, body_at)
                    schemas.setdefault(sch.id, sch)
                elif op == Opcode.CHANNEL:
                    ch = parse_channel(body, fs.path, body_at)
                    if ch.id not in channels:
                        info = channel_info(ch, schemas)
                        if info is not None:
                            channels[ch.id] = info
            what = "chunk" if isinstance(ref, ChunkRef) else "message region"
            yield from records_to_batches(records, offs, channels, predicate, options, schema,
                                          f"{fs.path}: {what} at byte {ref.offset}", stash, decoders)
    finally:
        os.close(fd)


def read_table(spec, *, gaps=False, topics=None, validate_crc=True, record_time=False, headers=True,
               mcap_columns=None, decode=False):
    """Every row of the recordings (or arenas) ``spec`` as one
    ``pyarrow.Table``, in file and chunk order, read in this process: the
    Spark source's rows without Spark. ``record_time`` adds the column
    ``time_record`` (when the recorder read each frame); ``mcap_columns``
    True or False forces the MCAP columns on or off, None (the default)
    adds them when the read selects a channel a0py did not write or a typed
    topic, as the source's ``mcapColumns=auto`` does; ``decode`` adds
    ``message`` and ``decode_error`` as the source's ``decode=true`` does.

    Raises :class:`RecordingFormatError` for a damaged file,
    :class:`RecordingOptionError` for a path that names nothing."""
    predicate = Predicate() if topics is None else Predicate().and_topics(topics)
    if mcap_columns is None:
        mcap_columns = selects_mcap_channels(spec, predicate)
    mtype = message_type(spec, predicate) if decode else None
    options = ReadOptions(gaps=gaps, validate_crc=validate_crc, record_time=record_time, headers=headers,
                          mcap_columns=bool(mcap_columns), message_type=mtype)
    schema = frame_schema(gaps, record_time=record_time, headers=headers, mcap=bool(mcap_columns), message_type=mtype)
    batches = [b for part in plan(spec, predicate, options) for b in read_part(part, predicate, options)]
    return pa.Table.from_batches(batches, schema=schema)
