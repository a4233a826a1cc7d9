"""The interpreted build of the dataspace skeleton index and byte codec.

The same five files that ``_compiled.pyx`` includes into one extension
module, imported here as modules and run by CPython (Cython's shadow module
makes the ``cython.*`` decorators no-ops), and their public names gathered
as the compiled module has them. There is no second copy of the algorithm
to keep in step: the tests run every index test on both builds, and the
benchmark checks they produce the same events. See docs/dataspace.md, "Two
builds".
"""

from a0py.dataspace._canonical import (
    Canon,
    Record,
    canonical_equal,
    canonical_hash,
    class_key,
    float_bits,
    value_key,
)
from a0py.dataspace._codec import decode, encode
from a0py.dataspace._index import HandlerHandle, Index
from a0py.dataspace._skeleton import Skeleton, analyse, format_shape
from a0py.dataspace._trie import ConstantTable, Continuation, Handler, Leaf, Node, Selector
from a0py.dataspace._values import MAX_DEPTH, TUPLE_LABEL

__all__ = [
    "MAX_DEPTH",
    "TUPLE_LABEL",
    "Canon",
    "ConstantTable",
    "Continuation",
    "Handler",
    "HandlerHandle",
    "Index",
    "Leaf",
    "Node",
    "Record",
    "Selector",
    "Skeleton",
    "analyse",
    "canonical_equal",
    "canonical_hash",
    "class_key",
    "decode",
    "encode",
    "float_bits",
    "format_shape",
    "value_key",
]
