"""The ``a0`` source's options, read once for the batch and the stream readers."""

from ._read import DEFAULT_PARTITION_BYTES, ReadOptions, _bool_option, _int_option, frame_schema
from .errors import RecordingOptionError


def read_options(options, schema=None):
    """The :class:`ReadOptions` of the source's options (and of a user
    schema, whose payload column may be a struct)."""
    gaps = _bool_option(_lower(options), "gaps", False)
    record_time = _bool_option(_lower(options), "recordtime", False)
    headers = _bool_option(_lower(options), "headers", True)
    payload_type = None
    if schema is not None:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import BinaryType, StructType

        names = [f.name for f in schema.fields]
        expected = list(frame_schema(gaps, record_time=record_time, headers=headers).names)
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
        validate_crc=_bool_option(_lower(options), "validatecrc", True),
        payload_type=payload_type,
        partition_bytes=_int_option(_lower(options), "maxpartitionbytes", DEFAULT_PARTITION_BYTES),
        root=_lower(options).get("root") or None,
        record_time=record_time,
        headers=headers,
    )


def _lower(options):
    return {k.lower(): v for k, v in options.items()}
