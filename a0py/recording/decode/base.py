"""What every decoder shares: the batch loop that keeps a failed message as
a null row with its error, and the conversions of times.

A decoder is built once per channel from its schema; ``decode`` then turns a
batch of message bytes into one Arrow array. Subclasses give two steps:
``_parse(data)`` (one message to an intermediate object, raising anything on
bad input) and ``_build(objects)`` (the parsed objects of a batch to an
Arrow array of ``arrow_type``). Column-wise building is what makes the batch
path fast: one Arrow call per leaf field for the whole batch instead of a
dict per message."""

from __future__ import annotations

import pyarrow as pa

from .errors import DecodeError

TIMESTAMP = pa.timestamp("us", tz="UTC")
UINT64 = pa.decimal128(20, 0)  # Spark has no unsigned 64-bit type
_MAX_ERROR_CHARS = 300


class Decoder:
    """Decodes the messages of one channel.

    ``arrow_type`` is the type of every decoded value (a struct; ``string``
    for JSON without a schema). ``decode(payloads)`` returns ``(values,
    errors)``: two Arrow arrays as long as ``payloads``; a message that does
    not decode is null in ``values`` and its reason is in ``errors`` (null
    where the message decoded). ``decode_one(data)`` returns one value as
    Arrow's ``to_pylist`` gives it (dicts, ``datetime`` for timestamps,
    ``Decimal`` for uint64), or raises :class:`DecodeError`."""

    arrow_type: pa.DataType

    def __init__(self, channel, schema_name, arrow_type):
        self.channel = channel
        self.schema_name = schema_name
        self.arrow_type = arrow_type

    def __repr__(self):
        return f"<{type(self).__name__} {self.channel!r} {self.schema_name!r} {self.arrow_type}>"

    # -- subclasses ---------------------------------------------------------
    def _parse(self, data):  # pragma: no cover - abstract
        raise NotImplementedError

    def _build(self, objects):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- public -------------------------------------------------------------
    def decode_one(self, data):
        """One message's bytes to its value; raises :class:`DecodeError`."""
        obj = self._parse_checked(data)
        try:
            return self._build([obj]).to_pylist()[0]
        except DecodeError:
            raise
        except Exception as e:
            raise DecodeError(self._why(e)) from e

    def decode(self, payloads):
        """A batch of message bytes (bytes-likes, or an Arrow binary array) to
        ``(values, errors)`` Arrow arrays; never raises for a bad message (see
        the class)."""
        payloads = as_list(payloads)
        objects, rows, errors = [], [], []
        failed = False
        for data in payloads:
            try:
                obj = self._parse_checked(data)
            except DecodeError as e:
                rows.append(None)
                errors.append(str(e))
                failed = True
                continue
            rows.append(len(objects))
            objects.append(obj)
            errors.append(None)
        try:
            built = self._build(objects)
        except Exception:
            # a value that parsed but does not fit the type: find it alone
            built, rows, errors = self._build_each(objects, rows, errors)
            failed = True
        if failed:
            built = built.take(pa.array(rows, type=pa.int64()))
        return built, pa.array(errors, type=pa.string())

    # -- helpers ------------------------------------------------------------
    def _parse_checked(self, data):
        try:
            return self._parse(data)
        except DecodeError:
            raise
        except Exception as e:  # the libraries raise many kinds on bad bytes
            raise DecodeError(self._why(e)) from e

    def _why(self, exc):
        text = f"{self.schema_name or 'message'}: {type(exc).__name__}: {exc}"
        return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."

    def _build_each(self, objects, rows, errors):
        good, remap = [], {}
        for i, obj in enumerate(objects):
            try:
                self._build([obj])
            except Exception as e:
                remap[i] = self._why(e)
                continue
            remap[i] = len(good)
            good.append(obj)
        new_rows = []
        for k, r in enumerate(rows):
            if r is None:
                new_rows.append(None)
            elif isinstance(remap[r], str):
                new_rows.append(None)
                errors[k] = remap[r]
            else:
                new_rows.append(remap[r])
        return self._build(good), new_rows, errors


def as_list(payloads):
    """A batch as a list (an Arrow binary array's values as bytes)."""
    if isinstance(payloads, pa.Array | pa.ChunkedArray):
        return payloads.to_pylist()
    return payloads if isinstance(payloads, list) else list(payloads)


def clip(text, limit=_MAX_ERROR_CHARS):
    return text if len(text) <= limit else text[: limit - 3] + "..."
