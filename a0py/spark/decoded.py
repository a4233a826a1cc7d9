"""The ``message`` and ``decode_error`` columns of ``decode=true`` reads,
for the ``a0`` source: the Spark type of a decoder's values, and a record
batch with the two columns appended.

    dec = decoder_for(topic, schema.name, schema.encoding, schema.data, channel.message_encoding)
    schema_fields += decoded_fields(dec)                 # at schema() time
    batch = append_decoded(batch, [dec or None per row])  # per batch

The Spark type comes from Arrow's through PySpark's own conversion
(``from_arrow_type``), so the struct Spark announces and the Arrow arrays
the batches carry are the same type by construction. pyspark is imported
only by :func:`decoded_type` and :func:`decoded_fields`."""

from __future__ import annotations

import pyarrow as pa

from ..recording.errors import RecordingOptionError

MESSAGE = "message"
DECODE_ERROR = "decode_error"


def decoded_type(decoder):
    """The pyspark ``DataType`` of ``decoder``'s values (its
    ``simpleString()`` is the DDL type, e.g. ``struct<x:double,...>``)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(decoder.arrow_type, prefer_timestamp_ntz=False)


def decoded_fields(decoder):
    """``[StructField("message", <decoded type>), StructField("decode_error", string)]``."""
    from pyspark.sql.types import StringType, StructField

    return [StructField(MESSAGE, decoded_type(decoder), True), StructField(DECODE_ERROR, StringType(), True)]


def append_decoded(batch, decoders, payload=None, arrow_type=None):
    """``batch`` (a ``pa.RecordBatch``) with ``message`` and ``decode_error``
    appended.

    ``decoders`` holds one entry per row: the row's channel decoder (the same
    object for every row of a channel), or None for a row that is not decoded
    (an a0py packet row: both columns null). ``payload`` is the message
    bytes column (default: the batch's ``payload`` column). ``arrow_type``
    is the ``message`` type (default: the first decoder's).

    Raises :class:`RecordingOptionError` when two decoders give different
    types (one message type per read: choose channels with option ``topics``),
    and ValueError when ``decoders`` is not as long as the batch."""
    n = batch.num_rows
    if len(decoders) != n:
        raise ValueError(f"append_decoded: {len(decoders)} decoders for {n} rows")
    payloads = batch.column(batch.schema.get_field_index("payload")) if payload is None else payload
    groups = {}
    for row, dec in enumerate(decoders):
        if dec is not None:
            groups.setdefault(id(dec), (dec, []))[1].append(row)
    if arrow_type is None:
        arrow_type = next(iter(groups.values()))[0].arrow_type if groups else pa.null()
    values, errors, order = [], [], []
    for dec, rows in groups.values():
        if dec.arrow_type != arrow_type:
            raise RecordingOptionError(
                f"decode=true: channel {dec.channel!r} decodes to {dec.arrow_type}, another channel of the "
                f"read to {arrow_type}; read one message type at a time (option topics)")
        taken = payloads.take(pa.array(rows, type=pa.int64())) if len(rows) != n else payloads
        v, e = dec.decode(taken.to_pylist())
        values.append(v)
        errors.append(e)
        order.extend(rows)
    if len(order) == n and order == list(range(n)):
        message, error = _one(values, arrow_type), _one(errors, pa.string())
    else:
        # scatter the groups back to row order; rows without a decoder are null
        where = [None] * n
        for k, row in enumerate(order):
            where[row] = k
        idx = pa.array(where, type=pa.int64())
        message = _one(values, arrow_type).take(idx)
        error = _one(errors, pa.string()).take(idx)
    fields = list(batch.schema) + [pa.field(MESSAGE, arrow_type), pa.field(DECODE_ERROR, pa.string())]
    return pa.RecordBatch.from_arrays([*batch.columns, message, error], schema=pa.schema(fields))


def _one(arrays, typ):
    if not arrays:
        return pa.array([], type=typ)
    return pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
