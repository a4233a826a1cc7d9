"""The ``a0`` source's read options: what a read returns (gap rows, the
record time, the headers column, JSON payloads) and how (CRC checks,
partition size, where live topics are), parsed once from Spark's string
options for the batch and the stream readers."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..recording.errors import RecordingOptionError
from .batches import frame_schema

DEFAULT_PARTITION_BYTES = 32 << 20


@dataclass(frozen=True)
class ReadOptions:
    gaps: bool = False
    validate_crc: bool = True
    payload_type: pa.DataType | None = None  # a struct: parse payloads as JSON into it
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    root: str | None = None  # where shm://TOPIC lives (A0PY_ROOT syntax); None: A0PY_ROOT
    record_time: bool = False  # add time_record: when the recorder read the frame (MCAP log_time)
    headers: bool = True  # the headers column (a map Spark spends a third of a small row's time on)
    mcap_columns: bool = False  # the MCAP columns (log_time, publish_time, sequence, schema_name, message_encoding)
    message_type: pa.DataType | None = None  # decode=true: the type of the message column


def lower_keys(options):
    """Spark's options with their names in lower case (they are case-insensitive)."""
    return {k.lower(): v for k, v in options.items()}


def bool_option(options, name, default):
    """Option ``name`` (lower case) of ``options`` as a bool: true/1/yes or
    false/0/no. Raises :class:`RecordingOptionError` for anything else."""
    v = options.get(name)
    if v is None:
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise RecordingOptionError(f"option {name}={v!r}: use true or false")


def int_option(options, name, default, minimum=1):
    """Option ``name`` of ``options`` as an integer of at least ``minimum``.
    Raises :class:`RecordingOptionError` for anything else."""
    v = options.get(name)
    if v is None:
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise RecordingOptionError(f"option {name}={v!r}: use an integer") from None
    if n < minimum:
        raise RecordingOptionError(f"option {name}={n}: use at least {minimum}")
    return n


def mcap_columns_option(options):
    """Option ``mcapColumns`` of ``options`` (lower-case names): True, False,
    or None for ``auto`` (the default: decided from what the read selects).
    Raises :class:`RecordingOptionError` for anything else."""
    v = options.get("mcapcolumns")
    if v is None or str(v).strip().lower() == "auto":
        return None
    try:
        return bool_option({"mcapcolumns": v}, "mcapcolumns", None)
    except RecordingOptionError:
        raise RecordingOptionError(f"option mcapColumns={v!r}: use auto, true or false") from None


def read_options(options, schema=None):
    """The :class:`ReadOptions` of the source's options (and of the schema
    the source was given: whether it has the MCAP columns, which
    ``schema()`` decided, and a payload column that may be a struct)."""
    low = lower_keys(options)
    gaps = bool_option(low, "gaps", False)
    record_time = bool_option(low, "recordtime", False)
    headers = bool_option(low, "headers", True)
    mcap = bool(mcap_columns_option(low))
    decode = bool_option(low, "decode", False)
    payload_type = None
    message_type = None
    if schema is not None:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import BinaryType, StructType

        names = [f.name for f in schema.fields]
        if mcap_columns_option(low) is None:
            mcap = "log_time" in names
        if decode:
            if "message" not in names:
                raise RecordingOptionError("decode=true: the schema given has no message column")
            message_type = to_arrow_schema(schema, timezone="UTC").field("message").type
        expected = list(frame_schema(gaps, record_time=record_time, headers=headers, mcap=mcap,
                                     message_type=message_type).names)
        if names != expected:
            raise RecordingOptionError(f"the a0 source's columns are {', '.join(expected)}; the schema given has "
                                       f"{', '.join(names)}")
        ptype = schema["payload"].dataType
        if isinstance(ptype, StructType):
            payload_type = to_arrow_schema(schema, timezone="UTC").field("payload").type
        elif not isinstance(ptype, BinaryType):
            raise RecordingOptionError(f"the payload column is binary, or a struct to parse JSON into, not {ptype}")
    return ReadOptions(
        gaps=gaps,
        validate_crc=bool_option(low, "validatecrc", True),
        payload_type=payload_type,
        partition_bytes=int_option(low, "maxpartitionbytes", DEFAULT_PARTITION_BYTES),
        root=low.get("root") or None,
        record_time=record_time,
        headers=headers,
        mcap_columns=mcap,
        message_type=message_type,
    )
