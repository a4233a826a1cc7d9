"""JSON messages: with a ``jsonschema`` schema, a struct built from the
schema; without one, the JSON text itself (checked to be JSON).

The schema to Arrow rules (docs/spark.md "Decoded columns"):

* ``object`` with ``properties`` -> struct of those properties, in the
  schema's order (other keys of a message are ignored; a missing one is null);
* ``integer`` -> bigint, ``number`` -> double, ``string`` -> string,
  ``boolean`` -> boolean; ``"type": [T, "null"]`` (or ``anyOf``/``oneOf`` of
  T and ``{"type": "null"}``) -> T;
* ``array`` with an ``items`` schema -> array of that type;
* ``$ref`` to ``#/definitions/...`` or ``#/$defs/...`` -> what it names;
* anything else (an object without ``properties``, a union of two types, an
  array without ``items``, a tuple, a ``$ref`` it cannot follow, a type
  that refers to itself) -> string holding that part's JSON text.

A message must be a JSON object in UTF-8; a value of another type than its
schema says (a string where a number is expected, a fraction where an
integer is) is a decode error naming the field's path. ``NaN`` and
``Infinity`` (not JSON, but Python writes them) are read as numbers."""

from __future__ import annotations

import json

import pyarrow as pa

from ..errors import RecordingFormatError
from .base import Decoder, clip
from .errors import DecodeError

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _dump(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Node:
    """One schema part: its Arrow type and a converter of a parsed JSON value."""

    def __init__(self, schema, root, path, refs=()):
        self.type = pa.string()
        self.convert = self._as_json
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            target = self._follow(schema["$ref"], root)
            if target is None or schema["$ref"] in refs:
                return
            self.__init__(target, root, path, (*refs, schema["$ref"]))
            return
        kinds = schema.get("type")
        if kinds is None:
            for key in ("anyOf", "oneOf"):
                options = schema.get(key)
                if isinstance(options, list):
                    real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
                    if len(real) == 1 and len(options) == 2:
                        self.__init__(real[0], root, path, refs)
                    return
            if "properties" in schema:
                kinds = "object"
            elif "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
                kinds = "string"
            else:
                return
        if isinstance(kinds, list):
            real = [k for k in kinds if k != "null"]
            if len(real) != 1:
                return
            kinds = real[0]
        self.path = path
        if kinds == "object":
            props = schema.get("properties")
            if not isinstance(props, dict) or not props:
                return
            self.children = [(name, _Node(sub, root, f"{path}.{name}", refs)) for name, sub in props.items()]
            self.type = pa.struct([pa.field(name, n.type) for name, n in self.children])
            self.convert = self._object
        elif kinds == "array":
            items = schema.get("items")
            if not isinstance(items, dict):
                return
            self.item = _Node(items, root, f"{path}[]", refs)
            self.type = pa.list_(self.item.type)
            self.convert = self._array
        elif kinds == "integer":
            self.type, self.convert = pa.int64(), self._integer
        elif kinds == "number":
            self.type, self.convert = pa.float64(), self._number
        elif kinds == "string":
            self.type, self.convert = pa.string(), self._string
        elif kinds == "boolean":
            self.type, self.convert = pa.bool_(), self._boolean

    @staticmethod
    def _follow(ref, root):
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return None
        node = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node if isinstance(node, dict) else None

    def _wrong(self, value, want):
        raise DecodeError(clip(f"{self.path or 'message'}: expected {want}, got {type(value).__name__} {_dump(value)}"))

    @staticmethod
    def _as_json(value):
        return None if value is None else _dump(value)

    def _object(self, value):
        if value is None:
            return None
        if not isinstance(value, dict):
            self._wrong(value, "an object")
        return {name: node.convert(value.get(name)) for name, node in self.children}

    def _array(self, value):
        if value is None:
            return None
        if not isinstance(value, list):
            self._wrong(value, "an array")
        conv = self.item.convert
        return [conv(v) for v in value]

    def _integer(self, value):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self._wrong(value, "an integer")
        if isinstance(value, float):
            if not value.is_integer():
                self._wrong(value, "an integer")
            value = int(value)
        if not _INT64[0] <= value <= _INT64[1]:
            self._wrong(value, "an integer of 64 bits")
        return value

    def _number(self, value):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self._wrong(value, "a number")
        return float(value)

    def _string(self, value):
        if value is None or isinstance(value, str):
            return value
        self._wrong(value, "a string")

    def _boolean(self, value):
        if value is None or isinstance(value, bool):
            return value
        self._wrong(value, "a boolean")


def _text(data):
    return bytes(data).decode("utf-8")


class JsonDecoder(Decoder):
    """``json`` messages checked against and shaped by a JSON Schema."""

    def __init__(self, topic, schema_name, schema_data):
        try:
            schema = json.loads(_text(schema_data))
            if not isinstance(schema, dict):
                raise ValueError("the schema is not a JSON object")
        except Exception as e:
            raise RecordingFormatError(
                f"channel {topic!r}: schema {schema_name!r} (jsonschema) does not parse: "
                f"{type(e).__name__}: {e}") from e
        root = _Node(schema, schema, "")
        if not pa.types.is_struct(root.type):
            # not an object with properties: the whole message as JSON text, in one field
            root = type("_Wrapped", (), {})()
            root.type = pa.struct([pa.field("json", pa.string())])
            root.convert = lambda v: {"json": _dump(v)}
            self._whole = True
        else:
            self._whole = False
        self._root = root
        super().__init__(topic, schema_name, root.type)

    def _parse(self, data):
        value = json.loads(_text(data))
        if not self._whole and not isinstance(value, dict):
            raise DecodeError(clip(f"{self.schema_name}: the message is not a JSON object: {_dump(value)}"))
        return self._root.convert(value)

    def _build(self, objects):
        return pa.array(objects, type=self.arrow_type)


class JsonTextDecoder(Decoder):
    """``json`` messages without a schema: the text, checked to be JSON."""

    def __init__(self, topic):
        super().__init__(topic, "", pa.string())

    def _parse(self, data):
        text = _text(data)
        json.loads(text)
        return text

    def _build(self, objects):
        return pa.array(objects, type=pa.string())
