"""Sample values of ROS 2 message types for the tests: a dict of every field of a type,
each field a value other than its zero value (so a field dropped or misplaced by an
encoder shows), built from the type's definition as a0py reads it."""

import importlib

from a0py import Schema
from a0py.proto import ros2_types

#: test_msgs' types that cover every field type a .msg file has (not WStrings: a0py
#: carries those as bytes only, see docs/ros2.md).
TEST_MSGS = ("BasicTypes", "Arrays", "BoundedSequences", "UnboundedSequences", "Nested", "Strings",
             "MultiNested", "Builtins", "Constants", "Defaults")

_BASE = {"bool": lambda i: i % 2 == 1, "byte": lambda i: (7 * i + 3) % 256,
         "octet": lambda i: (7 * i + 3) % 256, "char": lambda i: (5 * i + 65) % 128,
         "uint8": lambda i: (11 * i + 200) % 256, "int8": lambda i: -100 + i,
         "uint16": lambda i: 60000 + i, "int16": lambda i: -30000 - i, "uint32": lambda i: 4_000_000_000 + i,
         "int32": lambda i: -2_000_000_000 + i, "uint64": lambda i: (1 << 63) + i,
         "int64": lambda i: -(1 << 62) - i, "float32": lambda i: 1.5 + i, "float64": lambda i: -2.25 - i,
         "string": lambda i: f"s{i}-é"}


def codec(type_name):
    """The a0py codec of an installed type."""
    schema = Schema.ros2(type_name)
    return ros2_types.codec_for(schema.name, schema.data.decode())


def sample(type_name, seed=1):
    """A dict of every field of `type_name` (installed), none at its zero value."""
    c = codec(type_name)
    return _fields(c, c.type_name, seed)


def _fields(c, type_name, seed):
    from rosbags.typesys.base import Nodetype

    out = {}
    for i, (name, (kind, spec)) in enumerate(c._store.fielddefs[type_name][1]):
        out[name] = 0 if name == "structure_needs_at_least_one_member" else \
            _value(c, Nodetype, kind, spec, seed + i)
    return out


def _value(c, nt, kind, spec, seed):
    if kind == nt.BASE:
        value = _BASE[spec[0]](seed)
        if spec[0] == "string" and spec[1]:
            value = value[:spec[1]]
        return value
    if kind == nt.NAME:
        return _fields(c, spec, seed)
    (elem_kind, elem_spec), size = spec
    n = size if kind == nt.ARRAY else (min(size, 2) if size else 3)
    return [_value(c, nt, elem_kind, elem_spec, seed + j) for j in range(n)]


def rclpy_class(type_name):
    """The rclpy class of `type_name` (``pkg/msg/Name``)."""
    pkg, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
