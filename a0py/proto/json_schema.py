"""JSON Schemas for JSON topics: the one ``Publisher.pub_json`` infers from a message,
and the rules a schema must follow for third-party readers to use it.

**The rules** (:func:`foxglove_problems`) are those of Foxglove's open-source JSON
Schema parser, the strictest of the readers a0py is tested against (the Rust and C++
MCAP readers only need the first):

1. every object schema — the root, a property's, an array's items' — has
   ``"type": "object"`` and a ``properties`` object;
2. a property's schema has one ``type`` (a string, not a list), one of ``boolean``,
   ``string`` (with no ``contentEncoding``, or ``base64``), ``number``, ``integer``,
   ``object`` or ``array`` — never ``null``, never absent — unless it is a ``oneOf``
   whose every alternative is a numeric ``const`` (an enumeration);
3. an array's schema has ``items``, one schema whose ``type`` is ``boolean``,
   ``string`` (no ``contentEncoding``), ``number``, ``integer`` or ``object``: no
   arrays of arrays, no items of several types, no ``items`` left out.

**Inference** (:func:`infer_json_schema`) keeps to them, and the schema it gives
accepts (as JSON Schema) the message it was inferred from:

* an object gives ``{"type": "object", "properties": {...}}``, one property per key
  whose value has a schema; a property whose value has none is left out, which JSON
  Schema reads as "any value" and Foxglove as a field it shows but does not type;
* ``true``/``false`` give ``boolean``, numbers ``number`` (not ``integer``: the next
  message may carry 2.5 where this one has 2), strings ``string``;
* ``null`` has none (no schema names null without breaking rule 2);
* a list whose items are all booleans, all numbers or all strings gives an array of
  that type; all objects gives an array of objects whose properties are those the
  items agree on (a key whose values disagree in type, or are null, is left out);
  an empty list, a list holding a null, a list, or items of several types has none.
"""

from ..errors import ArgumentError

__all__ = ["foxglove_problems", "infer_json_schema"]

def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return None


def infer_json_schema(message):
    """The JSON Schema of `message` (a dict, as ``json.loads`` gives it), by the rules
    of this module. Raises ArgumentError if `message` is not a dict."""
    if not isinstance(message, dict):
        raise ArgumentError(f"a JSON topic's messages are objects (dicts), not "
                            f"{type(message).__name__}")
    return _finish(_infer(message))


# Inference works on schemas in which ANY stands for "no schema describes this value"
# (a null, an empty or mixed list...), so that merging the items of a list knows a key
# that some item holds as null from a key that item lacks; _finish then leaves every
# ANY out, with the arrays whose items are ANY.
ANY = "any"


def _infer(value):
    kind = _kind(value)
    if kind in ("boolean", "number", "string"):
        return {"type": kind}
    if kind == "object":
        return {"type": "object", "properties": {str(k): _infer(v) for k, v in value.items()}}
    if kind == "array":
        kinds = {_kind(item) for item in value}
        if len(kinds) != 1 or kinds & {"null", "array", None}:
            return ANY  # empty, several types, nulls, lists of lists
        items = ANY
        for item in value:
            schema = _infer(item)
            items = schema if items is ANY else _merge(items, schema)
            if items is ANY:
                return ANY
        return {"type": "array", "items": items}
    return ANY


def _merge(a, b):
    """One schema that both `a`'s values and `b`'s satisfy (ANY if no other does)."""
    if a is ANY or b is ANY:
        return ANY
    if a == b:
        return a
    kind = a["type"]
    if kind != b["type"]:
        return ANY
    if kind == "object":
        left, right = a["properties"], b["properties"]
        merged = {}
        for key in sorted(left.keys() | right.keys()):
            if key not in left or key not in right:  # absent from one: the other's holds
                merged[key] = left.get(key, right.get(key))
            else:
                merged[key] = _merge(left[key], right[key])
        return {"type": "object", "properties": merged}
    if kind == "array":
        items = _merge(a["items"], b["items"])
        return ANY if items is ANY else {"type": "array", "items": items}
    return ANY


def _finish(schema):
    """`schema` without its ANYs (None if it is ANY itself)."""
    if schema is ANY:
        return None
    if schema["type"] == "object":
        properties = {}
        for key, value in schema["properties"].items():
            done = _finish(value)
            if done is not None:
                properties[key] = done
        return {"type": "object", "properties": properties}
    if schema["type"] == "array":
        items = _finish(schema["items"])
        return None if items is None else {"type": "array", "items": items}
    return schema


_PROPERTY_TYPES = ("boolean", "string", "number", "integer", "object", "array")
_ITEM_TYPES = ("boolean", "string", "number", "integer", "object")


def foxglove_problems(schema):
    """What breaks the rules of this module's docstring in `schema` (a dict), as a list
    of messages naming the path (``root.pose.x``); empty when it follows them all."""
    problems = []
    _check_object(schema, "root", problems)
    return problems


def _check_object(schema, path, problems):
    if not isinstance(schema, dict) or schema.get("type") != "object":
        got = schema.get("type") if isinstance(schema, dict) else schema
        problems.append(f"{path}: expected \"type\": \"object\", got {got!r}")
        return
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        problems.append(f"{path}: an object schema needs \"properties\" (an object)")
        return
    for name, field in properties.items():
        _check_property(field, f"{path}.{name}", problems)


def _check_property(field, path, problems):
    if not isinstance(field, dict):
        problems.append(f"{path}: a property's schema must be an object, not {field!r}")
        return
    if isinstance(field.get("oneOf"), list):
        if not all(isinstance(alt, dict) and isinstance(alt.get("const"), (int, float))
                   and not isinstance(alt.get("const"), bool) for alt in field["oneOf"]):
            problems.append(f"{path}: oneOf alternatives must all be numeric consts")
        return
    kind = field.get("type")
    if kind not in _PROPERTY_TYPES:
        problems.append(f"{path}: type {kind!r} is not one of {', '.join(_PROPERTY_TYPES)}")
    elif kind == "string":
        if field.get("contentEncoding") not in (None, "base64"):
            problems.append(f"{path}: contentEncoding {field['contentEncoding']!r} is not base64")
    elif kind == "object":
        _check_object(field, path, problems)
    elif kind == "array":
        items = field.get("items")
        item_kind = items.get("type") if isinstance(items, dict) else None
        if item_kind not in _ITEM_TYPES:
            problems.append(f"{path}: array items need one type of {', '.join(_ITEM_TYPES)}, "
                            f"got items {items!r}")
        elif item_kind == "string" and items.get("contentEncoding") is not None:
            problems.append(f"{path}: array items of type string may not have a contentEncoding")
        elif item_kind == "object":
            _check_object(items, f"{path}[]", problems)
