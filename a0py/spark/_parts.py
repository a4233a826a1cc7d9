"""Reading one planned part of an ``a0`` input: its MCAP file slices and its
arena slices, each by the module that knows it (``_read`` for files,
``_arena`` for arenas)."""

import pyarrow as pa

from ._arena import read_arena
from ._read import ArenaSlice, Predicate, ReadOptions, _read_file_slice, frame_schema, plan


def read_part(part, predicate=Predicate(), options=ReadOptions()):  # noqa: B008 - frozen
    """Yields the record batches of ``part``'s rows that pass ``predicate``."""
    schema = frame_schema(options.gaps, options.payload_type, options.record_time, options.headers)
    for item in part.items:
        if isinstance(item, ArenaSlice):
            yield from read_arena(item, predicate, options, schema)
        else:
            yield from _read_file_slice(item, predicate, options, schema)


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
