"""What a topic's payloads are, decided from a packet: JSON (with a JSON
schema inferred from the value, so the Foxglove app can plot its fields) or
plain bytes.

A payload counts as JSON when its packet says so (``content-type:
application/json``, as ``Publisher.pub_json`` writes) or when it parses as a
JSON object. Only objects are advertised as ``json`` channels: Foxglove wants
an object schema; any other JSON value (a bare number, an array) travels as
bytes, and the page still shows it parsed.
"""

import json

__all__ = ["BYTES_ENCODING", "JSON_ENCODING", "PayloadKind", "infer_schema", "kind_of"]

JSON_ENCODING = "json"
BYTES_ENCODING = "a0py/bytes"
# Payloads above this size are not parsed to sniff JSON (a camera frame is not).
_SNIFF_LIMIT = 1 << 20
# Arrays: the item schema is inferred from at most this many items.
_ARRAY_SAMPLE = 16
_MAX_DEPTH = 32


class PayloadKind:
    """How a channel's payloads are advertised: ``encoding``, ``schema_name``,
    ``schema`` (the advertised text: JSON, base64 of a binary schema, or ""
    for bytes), ``schema_encoding``; and how the page gets them (see
    :mod:`a0py.view._typed`): ``render`` (None, or a function of a payload
    giving the JSON the page is sent instead) and ``image`` (None, ``raw``,
    ``compressed``)."""

    __slots__ = ("encoding", "image", "render", "schema", "schema_encoding", "schema_name")

    def __init__(self, encoding, schema_name, schema, schema_encoding):
        self.encoding = encoding
        self.schema_name = schema_name
        self.schema = schema
        self.schema_encoding = schema_encoding
        self.render = None
        self.image = None

    def __repr__(self):
        return f"PayloadKind({self.encoding!r}, {self.schema_name!r})"


def _type_of(value, depth):
    if depth > _MAX_DEPTH:
        return {}
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        items = [_type_of(v, depth + 1) for v in value[:_ARRAY_SAMPLE]]
        out = {"type": "array"}
        if items:
            out["items"] = _merge(items)
        return out
    if isinstance(value, dict):
        return {"type": "object", "properties": {str(k): _type_of(v, depth + 1) for k, v in value.items()}}
    return {}


def _merge(schemas):
    """One schema for several (array items): equal ones collapse; integer and
    number become number; objects merge their properties; else ``anyOf``."""
    out = []
    for s in schemas:
        for i, o in enumerate(out):
            if o == s:
                break
            if {o.get("type"), s.get("type")} == {"integer", "number"}:
                out[i] = {"type": "number"}
                break
            if o.get("type") == "object" and s.get("type") == "object":
                props = dict(o["properties"])
                for k, v in s["properties"].items():
                    props[k] = v if k not in props else _merge([props[k], v])
                out[i] = {"type": "object", "properties": props}
                break
        else:
            out.append(s)
    return out[0] if len(out) == 1 else {"anyOf": out}


def infer_schema(value, title=None):
    """A JSON schema (a dict) describing ``value``."""
    schema = _type_of(value, 0)
    if title:
        schema = {"title": title, **schema}
    return schema


def kind_of(topic, payload, headers=None):
    """The :class:`PayloadKind` of ``topic`` judged from one packet's payload
    (bytes) and headers (pairs or a Headers multimap)."""
    declared = False
    if headers is not None:
        for key, value in headers:
            if key == "content-type" and value.split(";")[0].strip() == "application/json":
                declared = True
                break
    value = None
    if declared or (len(payload) <= _SNIFF_LIMIT and payload[:1] in (b"{", b" ", b"\n", b"\t", b"\r")):
        try:
            value = json.loads(bytes(payload))
        except (ValueError, RecursionError):
            value = None
    if isinstance(value, dict):
        name = f"a0py.{topic.replace('/', '.')}"
        return PayloadKind(JSON_ENCODING, name, json.dumps(infer_schema(value, name), separators=(",", ":")),
                           "jsonschema")
    return PayloadKind(BYTES_ENCODING, "a0py.Bytes", "", None)
