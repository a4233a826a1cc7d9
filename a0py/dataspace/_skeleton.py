"""Skeletons: a pattern compiled once into its shape, constant map and capture map.

As the paper defines them (Garnock-Jones, "Efficient, Imperative Dataspaces
for Conversational Concurrency", 2018):

* the **shape** is the pattern's records with everything else erased:
  ``(label, arity, *kid_shapes)``, ``None`` for a hole;
* the **constant map** is the path and value of every atom of the pattern;
* the **capture map** is the path of every capture, in the order captures
  are reported (outside-in, left to right).

A path is a tuple of field indices from the root. The index (``_index.py``)
files a handler under its shape in the trie, under its constant values in a
leaf, and under its capture map in a handler. Part of the one source of the
index, built twice (see ``_compiled.pyx``).
"""

import cython

from a0py.dataspace._errors import InvalidValueError
from a0py.dataspace._patterns import Capture, Discard
from a0py.dataspace._values import TUPLE_LABEL

if not cython.compiled:
    # Compiled, every file of the index is included into one module
    # (_compiled.pyx), where these names are already defined.
    from a0py.dataspace._canonical import _MAX_DEPTH, Record, _subkey, _too_deep


@cython.final
@cython.cclass
class Skeleton:
    """A pattern compiled once, as the paper defines it.

    * ``shape``: ``None`` where the pattern does not look inside the value
      (``_``, a capture of ``_``, a constant), or ``(label, arity, *kid_shapes)``
      for a record (label ``""`` for a tuple);
    * ``constants``: the constant map, ``((path, value), ...)`` in
      left-to-right order;
    * ``captures``: the capture map, ``(path, ...)`` in the order captures
      are reported (outside-in, left to right).

    A path is a tuple of field indices from the root: ``(1, 0)`` is field 0
    of field 1.
    """

    pattern = cython.declare(object, visibility="readonly")
    shape = cython.declare(object, visibility="readonly")
    constants = cython.declare(tuple, visibility="readonly")
    captures = cython.declare(tuple, visibility="readonly")
    names = cython.declare(tuple, visibility="readonly")
    exact = cython.declare(cython.bint, visibility="readonly")
    _const_paths = cython.declare(tuple)
    _const_key = cython.declare(object)

    def __init__(self, pattern):
        _nesting(pattern, 0)  # bounds _analyse's recursion
        constants: list = []
        captures: list = []
        names: list = []
        self.pattern = pattern
        self.shape = _analyse(pattern, (), constants, captures, names)
        self.constants = tuple(constants)
        self.captures = tuple(captures)
        self.names = tuple(names)
        self._const_paths = tuple([c[0] for c in constants])
        self._const_key = _constant_key(tuple([c[1] for c in constants]))
        self.exact = _is_exact(self.shape, self._const_paths, self.captures)

    def __repr__(self):
        return (
            f"Skeleton(shape={format_shape(self.shape)}, constants={self.constants!r},"
            f" captures={self.captures!r})"
        )


@cython.cfunc
def _nesting(p: object, level: cython.int) -> cython.int:
    """The depth of ``p`` as ``_classify`` counts it, raising InvalidValueError
    before going deeper than ``MAX_DEPTH`` levels in all; anything that is not
    a record, tuple, list or capture counts 0, unchecked (for patterns, whose
    other errors ``_analyse`` reports)."""
    t = type(p)
    r: cython.int
    if t is Record:
        r = cython.cast(Record, p)._depth
        if level + r > _MAX_DEPTH:
            raise _too_deep()
        return r
    if t is not tuple and t is not list and t is not Capture:
        return 0
    if level >= _MAX_DEPTH:
        raise _too_deep()
    if t is Capture:
        return 1 + _nesting(cython.cast(object, p).pattern, level + 1)
    depth: cython.int = 0
    for x in p:
        r = _nesting(x, level + 1)
        if r > depth:
            depth = r
    return depth + 1


def _holes(shape, path: tuple, out: list):
    if shape is None:
        out.append(path)
        return
    for i, kid in enumerate(shape[2:]):
        _holes(kid, path + (i,), out)


def _is_exact(shape, const_paths: tuple, captures: tuple) -> bool:
    """True when the constants and captures pin down every hole of the shape:
    then two different values with this shape and these constants always
    have different capture tuples, so every capture tuple is counted at most
    once and the handler needs no bag (see Handler)."""
    holes: list = []
    _holes(shape, (), holes)
    for h in holes:
        if h in const_paths:
            continue
        if not any(h[:len(c)] == c for c in captures):
            return False
    return True


@cython.cfunc
def _constant_key(values: tuple) -> object:
    # One constant is keyed by its own key (no 1-tuple to build per lookup).
    if len(values) == 1:
        return _subkey(values[0])
    return tuple([_subkey(v) for v in values])


def _analyse(p, path: tuple, constants: list, captures: list, names: list):
    t = type(p)
    if t is Discard:
        return None
    if t is Capture:
        captures.append(path)
        names.append(p.name)
        return _analyse(p.pattern, path, constants, captures, names)
    if t is Record or t is tuple or t is list:
        fields = cython.cast(Record, p).fields if t is Record else p
        label = cython.cast(Record, p).label if t is Record else TUPLE_LABEL
        kids = [
            _analyse(f, path + (i,), constants, captures, names) for i, f in enumerate(fields)
        ]
        return (label, len(fields), *kids)
    if t is str or t is int or t is bytes or t is float or t is bool or p is None:
        constants.append((path, p))
        return None
    raise InvalidValueError(
        f"{t.__name__} is not a pattern (patterns are values, _, capture(...), and records"
        " and tuples of patterns)"
    )


def analyse(pattern) -> Skeleton:
    """Compile ``pattern`` into its :class:`Skeleton` (shape, constant map,
    capture map). Raises :class:`InvalidValueError` when ``pattern`` holds
    something that is neither a value nor a pattern."""
    return Skeleton(pattern)


def format_shape(shape) -> str:
    """A shape as text: ``A/2(B/1(_), _)``. A hole prints ``_``; a tuple's
    class has the empty label, so a pair prints ``/2(_, _)``."""
    if shape is None:
        return "_"
    label, arity, *kids = shape
    return f"{label}/{arity}(" + ", ".join(format_shape(k) for k in kids) + ")"
