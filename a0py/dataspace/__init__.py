"""Dataspaces: values, patterns, the skeleton index and an in-process dataspace.

The model (docs/dataspace.md): participants *assert* values into a shared
space and *retract* them; observers register *patterns* and hear ``+`` when a
matching capture tuple appears, ``-`` when it disappears, and ``!`` for each
matching message. The :class:`Index` is the skeleton index of Garnock-Jones'
"Efficient, Imperative Dataspaces for Conversational Concurrency", compiled
with Cython (``a0py.dataspace._compiled``).

>>> from a0py.dataspace import Index, Record, capture, parse
>>> idx = Index()
>>> h = idx.add_handler(parse('present($who)'), lambda ev, caps: print(ev, caps))
>>> idx.add_assertion(Record("present", "Alice"))
+ ('Alice',)
"""

from a0py.dataspace._build_choice import COMPILED, build
from a0py.dataspace._dataspace import AssertionHandle, Dataspace, Facet, Observer
from a0py.dataspace._errors import (
    DataspaceError,
    DataspaceTypeError,
    DecodeError,
    FacetStoppedError,
    InvalidValueError,
    NotAssertedError,
    ParseError,
    UnknownHandlerError,
)
from a0py.dataspace._format import format_term
from a0py.dataspace._patterns import DISCARD, Capture, Discard, capture
from a0py.dataspace._syntax import parse
from a0py.dataspace._values import MAX_DEPTH

Record = build.Record
Index = build.Index
Skeleton = build.Skeleton
HandlerHandle = build.HandlerHandle
analyse = build.analyse
canonical_equal = build.canonical_equal
canonical_hash = build.canonical_hash
value_key = build.value_key
format_shape = build.format_shape
float_bits = build.float_bits
TUPLE_LABEL = build.TUPLE_LABEL
encode = build.encode
decode = build.decode

_ = DISCARD

__all__ = [
    "COMPILED",
    "DISCARD",
    "MAX_DEPTH",
    "TUPLE_LABEL",
    "AssertionHandle",
    "Capture",
    "Dataspace",
    "DataspaceError",
    "DataspaceTypeError",
    "DecodeError",
    "Discard",
    "Facet",
    "FacetStoppedError",
    "HandlerHandle",
    "Index",
    "InvalidValueError",
    "NotAssertedError",
    "Observer",
    "ParseError",
    "Record",
    "Skeleton",
    "UnknownHandlerError",
    "_",
    "analyse",
    "canonical_equal",
    "canonical_hash",
    "capture",
    "decode",
    "encode",
    "float_bits",
    "format_shape",
    "format_term",
    "parse",
    "value_key",
]
