"""Canonical values, skeletons and the skeleton index.

The index is the structure of Garnock-Jones, "Efficient, Imperative
Dataspaces for Conversational Concurrency" (2018): the bag of assertions; a
trie whose edges are (pop-count, index) *selectors* and (label, arity)
*classes*; at each trie node a *continuation* with its cached assertions and
its *constant tables*; in each table, *leaves* keyed by constant values, each
with its cached assertions and its *handlers*; each handler with its bag of
capture tuples and its callbacks. The names below are the paper's.

This one source file is built twice (see docs/dataspace.md, "Two builds"):

* compiled: ``a0py/dataspace/_compiled.pyx`` ``include``\\ s it, so Cython
  turns every ``@cython.cclass`` into an extension type with C fields and
  every annotation into a C type; this is ``a0py.dataspace._compiled``, the
  build the package uses;
* interpreted: imported as ``a0py.dataspace._skeleton``, CPython runs it as
  ordinary Python (Cython's shadow module makes the ``cython.*`` decorators
  no-ops). The benchmark runs both on the same workload.

Each build has its own classes; values of one build are not values of the
other.

Invariants (I1-I5 are the paper's; I6 and I7 are ours):

I1. ``bag[k]`` is how many times the value with canonical key ``k`` is
    asserted; keys with count 0 are absent.
I2. The cache of the continuation at the trie node reached by a shape prefix
    holds the key of every asserted value that has that prefix.
I3. A leaf's cache holds the keys in its continuation's cache whose values
    carry the leaf's constants at the table's constant paths.
I4. A handler's bag counts, for each capture tuple, the values in its leaf's
    cache that project to it; ``+`` fires on its 0->1 and ``-`` on its 1->0
    transitions, and on nothing else. Messages touch no cache and no bag.
I5. Empty leaves and empty constant tables are pruned. A leaf is empty when
    it has no handlers: unlike the paper's code we never create a leaf for
    constants nobody observes (a new handler builds its leaf from the
    continuation's cache), so each leaf lives exactly as long as its handlers.
I6. A trie node other than the root is pruned when it has no constant table
    and no edge: the trie follows the live patterns instead of growing forever.
I7. Callbacks never run while the structure is being changed: an operation
    collects its events and delivers them once every invariant holds again,
    so a callback may call back into the index.
"""

import struct

import cython
from cython.cimports.libc.math import floor

from a0py.dataspace._errors import (
    DataspaceTypeError,
    InvalidValueError,
    NotAssertedError,
    UnknownHandlerError,
)
from a0py.dataspace._format import format_term
from a0py.dataspace._patterns import Capture, Discard
from a0py.dataspace._values import MAX_DEPTH, TUPLE_LABEL

_ADD = cython.declare(cython.int, 1)
_REMOVE = cython.declare(cython.int, 2)
_MESSAGE = cython.declare(cython.int, 3)

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_SALT_BOOL = cython.declare(cython.Py_hash_t, 0x5BD1E995)
_SALT_FLOAT = cython.declare(cython.Py_hash_t, 0x1B873593)
_SALT_TUPLE = cython.declare(cython.Py_hash_t, 0x2545F491)
_INF = cython.declare(cython.double, float("inf"))

# How deep a value or pattern may nest (MAX_DEPTH, the codec's limit): each
# record, tuple, list and capture is one level, an atom none. Every recursion below
# over a value's parts is bounded by it, so none can exhaust the C stack.
_MAX_DEPTH = cython.declare(cython.int, MAX_DEPTH)

# (label, arity) -> the class key "label/arity". Interned, so a record's class
# is one shared str whose hash is cached and whose comparisons are identity.
_CLASSES = cython.declare(dict, {})


def class_key(label: str, arity: cython.Py_ssize_t) -> str:
    """The trie's class of records with this label and arity (``"label/arity"``).

    Tuples are records of the reserved label ``""``: a 2-tuple has class ``"/2"``.
    """
    k = (label, arity)
    c = _CLASSES.get(k)
    if c is None:
        c = f"{label}/{arity}"
        _CLASSES[k] = c
    return c


_TUPLE_CLASSES = cython.declare(tuple, tuple([class_key(TUPLE_LABEL, n) for n in range(64)]))


def float_bits(x: float) -> int:
    """The IEEE-754 binary64 bit pattern of ``x`` as a signed 64-bit int.

    Floats are compared by it: -0.0 != 0.0, and NaN == NaN when the bits match.
    """
    return _float_bits(x)


@cython.cfunc
@cython.inline
def _float_bits(x: cython.double) -> cython.longlong:
    # The same bits either way: compiled, read straight from the double;
    # interpreted, through struct.
    bits: cython.longlong
    if cython.compiled:
        bits = _double_bits(x)  # noqa: F821 - declared in _compiled.pxd
    else:
        bits = _INT64.unpack(_DOUBLE.pack(x))[0]
    return bits


# ---------------------------------------------------------------- values


@cython.cfunc
def _value_error(v: object) -> Exception:
    t = type(v)
    if isinstance(v, (bool, int, float, str, bytes, tuple)):
        return InvalidValueError(
            f"{t.__name__} (a subclass of {t.__mro__[1].__name__}) is not a dataspace value;"
            " convert it to the exact built-in type"
        )
    return InvalidValueError(
        f"{t.__name__} is not a dataspace value (values are None, bool, int, float, str,"
        " bytes, Record and tuples of values)"
    )


@cython.cfunc
def _too_deep() -> Exception:
    return InvalidValueError(
        f"value nested deeper than MAX_DEPTH ({MAX_DEPTH}) levels (each record, tuple,"
        " list and capture is one level)"
    )


_IS_PATTERN = cython.declare(cython.int, 1)
_HAS_LIST = cython.declare(cython.int, 2)
_FLAGS = cython.declare(cython.int, 3)
_DEPTH_SHIFT = cython.declare(cython.int, 2)  # _classify's depth: the bits above _FLAGS


@cython.cfunc
def _classify(v: object, level: cython.int) -> cython.int:
    """``_IS_PATTERN`` when ``v`` holds ``_`` or a capture, plus ``_HAS_LIST``
    when it holds a list (to become a tuple); 0 for a value ready as it is.
    The bits above ``_FLAGS`` hold ``v``'s depth (levels of records, tuples,
    lists and captures; 0 for an atom).

    ``level`` is the number of levels around ``v``. Raises InvalidValueError
    for anything that is neither value nor pattern, and before going deeper
    than ``MAX_DEPTH`` levels in all (a record knows its own depth, so it is
    never walked)."""
    t = type(v)
    if t is str or t is int or t is bytes or t is float or t is bool or v is None:
        return 0
    r: cython.int
    if t is Record:
        r = cython.cast(Record, v)._depth
        if level + r > _MAX_DEPTH:
            raise _too_deep()
        return (r << _DEPTH_SHIFT) | (_IS_PATTERN if cython.cast(Record, v)._pattern else 0)
    if t is tuple or t is list:
        if level >= _MAX_DEPTH:
            raise _too_deep()
        flags: cython.int = _HAS_LIST if t is list else 0
        depth: cython.int = 0
        for x in v:
            r = _classify(x, level + 1)
            flags |= r & _FLAGS
            r >>= _DEPTH_SHIFT
            if r > depth:
                depth = r
        return flags | ((depth + 1) << _DEPTH_SHIFT)
    if t is Capture:
        if level >= _MAX_DEPTH:
            raise _too_deep()
        r = _classify(cython.cast(object, v).pattern, level + 1)
        return (r & _FLAGS) | _IS_PATTERN | (((r >> _DEPTH_SHIFT) + 1) << _DEPTH_SHIFT)
    if t is Discard:
        return _IS_PATTERN
    raise _value_error(v)


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


@cython.cfunc
def _normalize(v: object) -> object:
    """``v`` with every list (at any depth outside records) made a tuple.
    A list is accepted wherever a tuple is, as the same value."""
    t = type(v)
    if t is list or t is tuple:
        return tuple([_normalize(x) for x in v])
    if t is Capture:
        c = cython.cast(object, v)
        return Capture(_normalize(c.pattern), c.name)
    return v


@cython.cfunc
@cython.inline
def _value(v: object) -> object:
    """``v`` ready for the index: lists made tuples. Records are ready."""
    t = type(v)
    if (t is tuple or t is list) and _classify(v, 0) & _HAS_LIST:
        return _normalize(v)
    return v


@cython.cfunc
def _chash(v: object, level: cython.int) -> cython.Py_hash_t:
    """Canonical hash: consistent with _ceq, and 1, 1.0 and True hash apart.
    ``level``: the tuples around ``v``; no deeper than ``MAX_DEPTH`` (records
    are hashed when built, so only tuples are walked)."""
    t = type(v)
    if t is Record:
        return cython.cast(Record, v)._hash
    if t is str or t is int or t is bytes or v is None:
        return hash(v)
    if t is bool:
        return _SALT_BOOL + (1 if v else 0)
    if t is float:
        return hash(_float_bits(v)) ^ _SALT_FLOAT
    if t is tuple:
        if level >= _MAX_DEPTH:
            raise _too_deep()
        return hash(tuple([_chash(x, level + 1) for x in cython.cast(tuple, v)])) ^ _SALT_TUPLE
    if t is Canon:
        return cython.cast(Canon, v)._hash
    return hash(v)  # Capture, Discard: only inside patterns


@cython.cfunc
def _ceq(a: object, b: object, level: cython.int) -> cython.bint:
    """Canonical equality: same type, then same value; floats by bit pattern.
    ``level``: the records and tuples around ``a`` and ``b``; no deeper than
    ``MAX_DEPTH`` (records are no deeper than that when built)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is Record:
        ra: Record = cython.cast(Record, a)
        rb: Record = cython.cast(Record, b)
        if ra._hash != rb._hash or ra._cls != rb._cls:
            return False
        if level + ra._depth > _MAX_DEPTH:  # only inside a tuple already too deep
            raise _too_deep()
        return _ceq_items(ra.fields, rb.fields, level + 1)
    if t is float:
        return _float_bits(a) == _float_bits(b)
    if t is tuple:
        if level >= _MAX_DEPTH:
            raise _too_deep()
        return _ceq_items(cython.cast(tuple, a), cython.cast(tuple, b), level + 1)
    if t is Canon:
        return _ceq(cython.cast(Canon, a).value, cython.cast(Canon, b).value, level)
    return a == b


@cython.cfunc
def _ceq_items(fa: tuple, fb: tuple, level: cython.int) -> cython.bint:
    n: cython.Py_ssize_t = len(fa)
    i: cython.Py_ssize_t
    if n != len(fb):
        return False
    for i in range(n):
        if not _ceq(fa[i], fb[i], level):
            return False
    return True


def canonical_equal(a, b) -> bool:
    """Canonical equality of two values: ``canonical_equal(1, True)`` is False,
    ``canonical_equal(-0.0, 0.0)`` is False, ``canonical_equal(nan, nan)`` is
    True for NaNs with the same bits. Raises nothing for values; may raise
    :class:`InvalidValueError` for tuples nested deeper than ``MAX_DEPTH``
    (which are not values) rather than recurse that deep."""
    return _ceq(a, b, 0)


def canonical_hash(v) -> int:
    """A hash consistent with :func:`canonical_equal`. Raises nothing for
    values; for tuples nested deeper than ``MAX_DEPTH``,
    :class:`InvalidValueError`; for other objects it falls back to ``hash``
    (which may raise ``TypeError``)."""
    return _chash(v, 0)


# Records and Canon keys are immutable and hold only values built before
# them, so they cannot be part of a reference cycle: keeping them out of the
# cyclic GC saves traversing every asserted value on each full collection.
@cython.no_gc
@cython.final
@cython.cclass
class Record:
    """A record: a label and fields, ``Record("speak", "Alice", "hi")``.

    ``label`` is a non-empty ``str``; fields are values (None, bool, int,
    float, str, bytes, Record, tuple) or, in a pattern, patterns (``_``,
    captures). A list is taken as the tuple of its items. The empty label is reserved: a tuple is the record of label
    ``""``, so there is one way to write it, a Python tuple.

    Equality and hashing are canonical: ``Record("a", 1) != Record("a", True)
    != Record("a", 1.0)``. Records are immutable.

    Raises :class:`InvalidValueError` for a label that is not a non-empty
    ``str``, a field that is neither a value nor a pattern, or fields nested
    so deep that the record would be deeper than ``MAX_DEPTH`` levels (the
    record is one level; each record, tuple, list and capture in it another).
    """

    label = cython.declare(str, visibility="readonly")
    fields = cython.declare(tuple, visibility="readonly")
    _cls = cython.declare(str)
    _hash = cython.declare(cython.Py_hash_t)
    _pattern = cython.declare(cython.bint)
    _depth = cython.declare(cython.int)  # 1 + its deepest field's depth: at most MAX_DEPTH

    def __init__(self, label, *fields):
        if type(label) is not str:
            raise InvalidValueError(
                f"a record label must be a str, got {type(label).__name__} {label!r}"
            )
        if not label:
            raise InvalidValueError(
                "the empty label is reserved for tuples; write a tuple instead of Record('', ...)"
            )
        flags: cython.int = 0
        depth: cython.int = 0
        r: cython.int
        for f in fields:
            r = _classify(f, 1)
            flags |= r & _FLAGS
            r >>= _DEPTH_SHIFT
            if r > depth:
                depth = r
        if flags & _HAS_LIST:
            fields = tuple([_normalize(f) for f in fields])
        pattern: cython.bint = (flags & _IS_PATTERN) != 0
        self.label = label
        self.fields = fields
        self._cls = class_key(label, len(fields))
        self._pattern = pattern
        self._depth = depth + 1
        self._hash = hash(tuple([hash(label)] + [_chash(f, 1) for f in fields]))

    @property
    def is_pattern(self) -> bool:
        """True when some field is (or holds) ``_`` or a capture."""
        return self._pattern

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if type(other) is not Record:
            return NotImplemented
        return _ceq(self, other, 0)

    def __ne__(self, other):
        if type(other) is not Record:
            return NotImplemented
        return not _ceq(self, other, 0)

    def __repr__(self):
        return format_term(self)

    def __reduce__(self):
        return (Record, (self.label,) + self.fields)


@cython.no_gc
@cython.final
@cython.cclass
class Canon:
    """The canonical key of a value whose Python equality is not canonical,
    used inside the index's sets and dicts (see :func:`value_key`)."""

    value = cython.declare(object, visibility="readonly")
    _hash = cython.declare(cython.Py_hash_t)

    def __init__(self, value):
        self.value = value
        self._hash = _chash(value, 0)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if type(other) is not Canon:
            return NotImplemented
        return _ceq(self.value, cython.cast(Canon, other).value, 0)

    def __ne__(self, other):
        if type(other) is not Canon:
            return NotImplemented
        return not _ceq(self.value, cython.cast(Canon, other).value, 0)

    def __repr__(self):
        return f"Canon({self.value!r})"


_CANON_TRUE = cython.declare(object, Canon(True))
_CANON_FALSE = cython.declare(object, Canon(False))


@cython.cfunc
def _self_keyed(v: object) -> cython.bint:
    """True when Python's == and hash already agree with canonical equality
    for ``v`` against every other self-keyed value: str, bytes, None, int,
    Record, a finite float with a fraction (no int, bool or other float
    equals it), and tuples of such values. Bools, integral or infinite or NaN
    floats, and -0.0/0.0 are not (1 == 1.0 == True; -0.0 == 0.0; nan != nan).
    """
    t = type(v)
    if t is str or t is int or t is Record or t is bytes or v is None:
        return True
    if t is float:
        x: cython.double = v
        return x == x and x != _INF and x != -_INF and x != floor(x)  # noqa: PLR0124 (NaN)
    if t is tuple:
        for y in cython.cast(tuple, v):
            if not _self_keyed(y):
                return False
        return True
    return False


@cython.cfunc
@cython.inline
def _subkey(v: object) -> object:
    """The canonical key of a part of a value already checked: the value
    itself when it is self-keyed, else a Canon wrapper (bools are shared)."""
    t = type(v)
    if t is str or t is int or t is Record or t is bytes or v is None:
        return v
    if t is bool:
        return _CANON_TRUE if v else _CANON_FALSE
    if _self_keyed(v):
        return v
    return Canon(v)


@cython.cfunc
def _key(v: object) -> object:
    """The canonical key of ``v``; raises InvalidValueError unless ``v`` is a value."""
    t = type(v)
    if t is Record:
        if cython.cast(Record, v)._pattern:
            raise InvalidValueError(f"{v!r} is a pattern (it holds _ or $), not a value")
        return v
    if t is str or t is int or t is bytes or v is None:
        return v
    if t is bool or t is float:
        return _subkey(v)
    if t is tuple:
        if _classify(v, 0) & _FLAGS:  # lists were made tuples by _value
            raise InvalidValueError(f"{v!r} is a pattern (it holds _ or $), not a value")
        return _subkey(v)
    raise _value_error(v)


@cython.cfunc
@cython.inline
def _unkey(k: object) -> object:
    if type(k) is Canon:
        return cython.cast(Canon, k).value
    return k


def value_key(v):
    """The canonical key the index files ``v`` under: ``v`` itself when
    Python's equality is already canonical for it (str, bytes, None, int,
    Record, a finite float with a fraction, tuples of those), else a
    :class:`Canon` wrapper (bools, integral/infinite/NaN floats, 0.0, -0.0,
    tuples holding one of those). Raises :class:`InvalidValueError` unless
    ``v`` is a value."""
    return _key(_value(v))


@cython.cfunc
@cython.inline
def _untrack(o: object):
    """Keep one of the index's big sets or dicts (or a bag key tuple) out of
    the cyclic GC, in the compiled build. They hold only keys (values and
    Canon wrappers) and counts, which cannot refer back to any container, so
    no reference cycle passes through them; untracked, a full collection
    does not walk every asserted value in every cache. (The interpreted build
    has no such hook; the algorithm is the same.)"""
    if cython.compiled:
        PyObject_GC_UnTrack(o)  # noqa: F821 - declared in _compiled.pxd


@cython.cfunc
@cython.inline
def _step(v: object, i: cython.Py_ssize_t) -> object:
    if type(v) is Record:
        return cython.cast(Record, v).fields[i]
    return cython.cast(tuple, v)[i]


@cython.cfunc
@cython.inline
def _class_of(v: object) -> object:
    t = type(v)
    if t is Record:
        return cython.cast(Record, v)._cls
    if t is tuple:
        n: cython.Py_ssize_t = len(cython.cast(tuple, v))
        if n < 64:
            return _TUPLE_CLASSES[n]
        return class_key(TUPLE_LABEL, n)
    return None


@cython.cfunc
def _project(v: object, path: tuple) -> object:
    n: cython.Py_ssize_t = len(path)
    if n == 1:  # most paths are one step
        return _step(v, path[0])
    i: cython.Py_ssize_t
    for i in range(n):
        v = _step(v, path[i])
    return v


# ---------------------------------------------------------------- skeletons


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


# ---------------------------------------------------------------- the index


@cython.final
@cython.cclass
class Handler:
    """The handlers of a leaf for one capture map: the bag of capture tuples
    of the leaf's cached assertions, and the callbacks (by handle).

    The bag is keyed by the canonical key of the capture tuple; with one
    capture, by the key of the captured value alone (no 1-tuple is kept per
    entry). With no capture the bag has one possible entry, ``()``, so it is
    a plain count, ``empty_count``, and ``captures`` stays empty.

    An *exact* handler (its pattern's constants and captures cover every hole
    of its shape, as in ``speak($, $)`` or ``present("Alice", $)``) keeps no
    bag at all: distinct values in its leaf have distinct capture tuples, so
    each count is 0 or 1 and follows the leaf's cache, which already records
    it. Its ``+`` and ``-`` are exactly the leaf's additions and removals."""

    paths = cython.declare(tuple)
    arity = cython.declare(cython.Py_ssize_t)
    exact = cython.declare(cython.bint)
    first = cython.declare(tuple)
    _i0 = cython.declare(cython.Py_ssize_t)  # first's one field index, or -1
    captures = cython.declare(dict)
    empty_count = cython.declare(cython.Py_ssize_t)
    callbacks = cython.declare(dict)
    callback_list = cython.declare(list)

    def __init__(self, paths: tuple, exact: cython.bint):
        self.paths = paths
        self.exact = exact
        self.arity = len(paths)
        self.first = paths[0] if self.arity else ()
        self._i0 = self.first[0] if len(self.first) == 1 else -1
        self.captures = {}
        self.empty_count = 0
        self.callbacks = {}
        self.callback_list = []

    @cython.cfunc
    def set_callbacks(self):
        self.callback_list = list(self.callbacks.values())

    @cython.cfunc
    def captures_of_key(self, ck: object) -> tuple:
        if self.arity == 1:
            return (_unkey(ck),)
        for x in cython.cast(tuple, ck):
            if type(x) is Canon:
                return tuple([_unkey(y) for y in cython.cast(tuple, ck)])
        return ck


@cython.final
@cython.cclass
class Leaf:
    """The assertions of a continuation that carry given constants, and the
    handlers interested in them, keyed by capture map.

    A leaf of a table without constants holds exactly its continuation's
    assertions (I3 with nothing to filter), so it shares that cache:
    ``cache`` is None there instead of a second set kept equal to the first.
    """

    cache = cython.declare(set)
    handlers = cython.declare(dict)
    handler_list = cython.declare(list)

    def __init__(self, shared: cython.bint):
        if shared:
            self.cache = None
        else:
            self.cache = set()
            _untrack(self.cache)
        self.handlers = {}
        self.handler_list = []

    @cython.cfunc
    def set_handlers(self):
        self.handler_list = list(self.handlers.values())


@cython.final
@cython.cclass
class ConstantTable:
    """For one constant map's paths: leaves keyed by the constants' values."""

    paths = cython.declare(tuple)
    leaves = cython.declare(dict)
    sole = cython.declare(Leaf)  # without constants: the one leaf, or None
    _n = cython.declare(cython.Py_ssize_t)
    _first = cython.declare(tuple)
    _i0 = cython.declare(cython.Py_ssize_t)  # one one-step path: its index; else -1

    def __init__(self, paths: tuple):
        self.paths = paths
        self.leaves = {}
        self.sole = None
        self._n = len(paths)
        self._first = paths[0] if self._n else ()
        self._i0 = self._first[0] if self._n == 1 and len(self._first) == 1 else -1

    @cython.cfunc
    def key_of(self, v: object) -> object:
        if self._n == 1:
            return _subkey(_project(v, self._first))
        if self._n == 0:
            return ()
        return tuple([_subkey(_project(v, p)) for p in self.paths])


@cython.final
@cython.cclass
class Continuation:
    """What the index knows at a trie node: every asserted value with the
    node's shape prefix (``cache``) and the constant tables of the patterns
    whose shape ends here.

    At the root every asserted value has the (empty) prefix, so the root's
    cache is the bag's key set itself: ``cache`` is None there."""

    cache = cython.declare(set)
    tables = cython.declare(dict)
    table_list = cython.declare(list)

    def __init__(self, cache):
        self.cache = cache
        if cache is not None:
            _untrack(cache)
        self.tables = {}
        self.table_list = []

    @cython.cfunc
    def set_tables(self):
        self.table_list = list(self.tables.values())


@cython.final
@cython.cclass
class Selector:
    """A trie edge set: pop ``pop_count`` levels, take field ``index``, then
    branch on the class of what is there (``table``: class -> Node)."""

    pop_count = cython.declare(cython.Py_ssize_t)
    index = cython.declare(cython.Py_ssize_t)
    table = cython.declare(dict)

    def __init__(self, pop_count: cython.Py_ssize_t, index: cython.Py_ssize_t):
        self.pop_count = pop_count
        self.index = index
        self.table = {}


@cython.final
@cython.cclass
class Node:
    """A trie node: a continuation and the outgoing selectors."""

    continuation = cython.declare(Continuation)
    edges = cython.declare(dict)
    selectors = cython.declare(list)

    def __init__(self, continuation: Continuation):
        self.continuation = continuation
        self.edges = {}
        self.selectors = []

    @cython.cfunc
    def is_empty(self) -> cython.bint:
        return not self.continuation.tables and not self.selectors


@cython.final
@cython.cclass
class HandlerHandle:
    """What :meth:`Index.add_handler` returns; pass it to
    :meth:`Index.remove_handler`. ``pattern``, ``callback`` and ``skeleton``
    are readable; ``active`` is False once removed."""

    pattern = cython.declare(object, visibility="readonly")
    callback = cython.declare(object, visibility="readonly")
    skeleton = cython.declare(Skeleton, visibility="readonly")
    active = cython.declare(cython.bint, visibility="readonly")
    _index = cython.declare(object)
    _trail = cython.declare(list)
    _continuation = cython.declare(Continuation)
    _table = cython.declare(ConstantTable)
    _leaf = cython.declare(Leaf)
    _handler = cython.declare(Handler)
    _const_key = cython.declare(object)

    def __repr__(self):
        state = "active" if self.active else "removed"
        return f"<HandlerHandle {self.pattern!r} {state}>"


@cython.cfunc
def _deliver(events: list):
    """Run the callbacks of collected events; a callback that raises does not
    stop the others. One error is re-raised as is; several as an
    ExceptionGroup."""
    errors: list = None
    n: cython.Py_ssize_t = len(events)
    i: cython.Py_ssize_t = 0
    while i < n:
        try:
            events[i](events[i + 1], events[i + 2])
        except Exception as e:  # noqa: BLE001 - re-raised below
            if errors is None:
                errors = []
            errors.append(e)
        i += 3
    if errors is not None:
        if len(errors) == 1:
            raise errors[0]
        raise ExceptionGroup("several dataspace callbacks raised", errors)


@cython.cfunc
@cython.inline
def _emptied(events: list) -> list:
    """An empty event list for the next operation, once ``events`` is
    delivered. Compiled: ``events`` itself, emptied in place with its storage
    kept, so the next operation appends without growing a list from nothing
    (a list that grew large is let go instead). Interpreted: a fresh list
    (``clear()`` frees the storage too, and costs more than letting the list
    go). Nobody else holds ``events``: no callback is given it."""
    if cython.compiled and len(events) <= 96:
        _truncate_list(events)  # noqa: F821 - declared in _compiled.pxd
        return events
    return []


@cython.final
@cython.cclass
class Index:
    """The skeleton index: assertions, handlers, and the events between them.

    ``add_handler(pattern, callback)`` registers ``callback(event, captures)``;
    ``event`` is ``"+"`` when a capture tuple appears among the asserted
    values matching ``pattern`` (count 0->1), ``"-"`` when it disappears
    (1->0), ``"!"`` for each matching message. Assertions are counted (a bag):
    asserting a value twice needs two retractions.

    Callbacks run after the operation that caused them has finished, so they
    may call the index again; events of one operation are delivered in the
    order they arose. If callbacks raise, the others still run, and then the
    error (or an ``ExceptionGroup`` of several) propagates; the index is
    consistent either way. Not thread-safe: guard it with a lock if threads
    share it.
    """

    _bag = cython.declare(dict)
    _root = cython.declare(Node)
    _token = cython.declare(object)
    _spare = cython.declare(list)

    def __init__(self):
        self._bag = {}
        self._root = Node(Continuation(None))
        # Handles point at this token, not at the index, so an index and its
        # handles form no reference cycle and are freed as soon as unused.
        self._token = object()
        self._spare = []

    @cython.cfunc
    def _take_events(self) -> list:
        # The list of an operation that had no events is reused by the
        # next; an operation started by a callback (while a list is being
        # delivered) gets a fresh one.
        events: list = self._spare
        if events is None:
            return []
        self._spare = None
        return events

    @cython.cfunc
    def _finish(self, events: list):
        if not events:
            self._spare = events
            return
        try:
            _deliver(events)
        finally:
            self._spare = _emptied(events)

    # ------------------------------------------------------------ queries

    def __len__(self):
        """The number of distinct values asserted."""
        return len(self._bag)

    def __contains__(self, v):
        """True when ``v`` is asserted (at least once)."""
        return _key(_value(v)) in self._bag

    def count(self, v) -> int:
        """How many times ``v`` is asserted (0 when it is not). Raises
        :class:`InvalidValueError` unless ``v`` is a value."""
        return self._bag.get(_key(_value(v)), 0)

    def assertions(self) -> list:
        """The distinct asserted values, in no particular order."""
        return [_unkey(k) for k in self._bag]

    def stats(self) -> dict:
        """Sizes of the structure (trie nodes, constant tables, leaves,
        handlers, callbacks), for tests and tuning."""
        counts = {"assertions": len(self._bag), "nodes": 0, "tables": 0, "leaves": 0,
                  "handlers": 0, "callbacks": 0}
        todo = [self._root]
        while todo:
            node: Node = todo.pop()
            counts["nodes"] += 1
            for table in node.continuation.tables.values():
                counts["tables"] += 1
                for leaf in cython.cast(ConstantTable, table).leaves.values():
                    counts["leaves"] += 1
                    for handler in cython.cast(Leaf, leaf).handlers.values():
                        counts["handlers"] += 1
                        counts["callbacks"] += len(cython.cast(Handler, handler).callbacks)
            for sel in node.selectors:
                todo.extend(cython.cast(Selector, sel).table.values())
        return counts

    # ------------------------------------------------------------ assertions

    def add_assertion(self, v):
        """Assert ``v`` once more. Handlers see ``+`` for capture tuples that
        were not present before. Raises :class:`InvalidValueError` unless
        ``v`` is a value (a pattern is not)."""
        v = _value(v)
        key = _key(v)
        events: list = self._take_events()
        self._add(v, key, events)
        self._finish(events)

    def remove_assertion(self, v):
        """Retract one assertion of ``v``. When its count drops to 0, handlers
        see ``-`` for capture tuples no longer present. Raises
        :class:`NotAssertedError` (and changes nothing) when ``v`` is not
        asserted, :class:`InvalidValueError` unless ``v`` is a value."""
        v = _value(v)
        key = _key(v)
        events: list = self._take_events()
        self._remove(v, key, events)
        self._finish(events)

    def send_message(self, v):
        """Deliver ``v`` as a message: every handler whose pattern matches it
        sees ``!`` with its captures. Nothing is stored. Raises
        :class:`InvalidValueError` unless ``v`` is a value."""
        v = _value(v)
        key = _key(v)
        events: list = self._take_events()
        self._walk(self._root, None, v, key, _MESSAGE, events)
        self._finish(events)

    def patch(self, additions=(), removals=()):
        """Apply several changes as one step: every addition first, then every
        removal, then deliver the events. Retracting ``[3]`` and asserting
        ``[4]`` in one patch never shows a ``[_]`` observer an empty set.

        Checks everything before changing anything: raises
        :class:`InvalidValueError` for a non-value and
        :class:`NotAssertedError` for a removal not covered by the current
        assertions plus this patch's additions.
        """
        adds: list = [_value(v) for v in additions]
        add_keys: list = [_key(v) for v in adds]
        rem_vals: list = [_value(v) for v in removals]
        rem_keys: list = [_key(v) for v in rem_vals]
        need: dict = {}
        for k in rem_keys:
            need[k] = need.get(k, 0) + 1
        if need:
            have: dict = {}
            for k in add_keys:
                if k in need:
                    have[k] = have.get(k, 0) + 1
            for k, n in need.items():
                if self._bag.get(k, 0) + have.get(k, 0) < n:
                    raise NotAssertedError(
                        f"patch retracts {_unkey(k)!r} more times than it is asserted"
                    )
        events: list = []
        i: cython.Py_ssize_t
        for i in range(len(add_keys)):
            self._add(adds[i], add_keys[i], events)
        for i in range(len(rem_keys)):
            self._remove(rem_vals[i], rem_keys[i], events)
        if events:
            _deliver(events)

    @cython.cfunc
    def _add(self, v: object, key: object, events: list):
        bag: dict = self._bag
        size: cython.Py_ssize_t = len(bag)
        n = bag.setdefault(key, 1)  # one probe when the key is new
        if len(bag) != size:
            self._walk(self._root, None, v, key, _ADD, events)
        else:
            bag[key] = n + 1

    @cython.cfunc
    def _remove(self, v: object, key: object, events: list):
        bag: dict = self._bag
        n = bag.pop(key, None)  # one probe when the count drops to 0
        if n is None:
            raise NotAssertedError(f"{v!r} is not asserted")
        if n == 1:
            self._walk(self._root, None, v, key, _REMOVE, events)
        else:
            bag[key] = n - 1

    @cython.cfunc
    def _walk(self, node: Node, stack: tuple | None, v: object, key: object, op: cython.int,
              events: list):
        """The paper's modify: update (or, for messages, just visit) the
        continuation, its leaves and handlers, then follow every selector
        whose class matches ``v``. ``stack`` is a cons list (value, rest) of
        the values on the path from the root; None at the root (standing for
        the paper's wrapper ``[v]``) and at nodes without selectors."""
        cont: Continuation = node.continuation
        if cont.cache is not None:
            if op == _ADD:
                cont.cache.add(key)
            elif op == _REMOVE:
                cont.cache.discard(key)
        table: ConstantTable
        leaf: Leaf
        if cont.table_list:
            for table in cont.table_list:
                if table._n == 0:
                    leaf = table.sole
                elif table._i0 >= 0:
                    leaf = table.leaves.get(_subkey(_step(v, table._i0)))
                else:
                    leaf = table.leaves.get(table.key_of(v))
                if leaf is None:
                    continue
                if leaf.cache is not None:
                    if op == _ADD:
                        leaf.cache.add(key)
                    elif op == _REMOVE:
                        leaf.cache.discard(key)
                for h in leaf.handler_list:
                    _visit_handler(cython.cast(Handler, h), v, op, events)
        s: tuple
        sel: Selector
        nxt: Node
        _j: cython.Py_ssize_t
        for sel in node.selectors:
            if stack is None:
                # At the root: its one selector, (0, 0), picks the value itself
                # out of the wrapper the paper puts around it.
                s = None
                child = v
            else:
                s = stack
                for _j in range(sel.pop_count):
                    s = s[1]
                child = _step(s[0], sel.index)
            cls = _class_of(child)
            if cls is None:
                continue
            nxt = sel.table.get(cls)
            if nxt is not None:
                # Only a node with selectors of its own reads the stack.
                self._walk(nxt, (child, s) if nxt.selectors else None, v, key, op, events)

    # ------------------------------------------------------------ handlers

    def add_handler(self, pattern, callback) -> HandlerHandle:
        """Register ``callback(event, captures)`` for values matching
        ``pattern``; returns the handle for :meth:`remove_handler`.

        Before returning, ``callback`` sees ``+`` once for each capture tuple
        of the matching values already asserted. The same callback may be
        registered several times; each registration gets its own events.

        If ``callback`` raises while being told of what is present, the
        handler is removed again and the exception propagates.

        Raises :class:`DataspaceTypeError` when ``callback`` is not callable,
        :class:`InvalidValueError` when ``pattern`` holds something that is
        neither a value nor a pattern.
        """
        if not callable(callback):
            raise DataspaceTypeError(
                f"callback must be callable, got {type(callback).__name__}"
            )
        skel: Skeleton = Skeleton(_value(pattern))
        handle: HandlerHandle = HandlerHandle()
        handle.pattern = pattern
        handle.callback = callback
        handle.skeleton = skel
        handle._index = self._token
        handle._trail = []
        node: Node = self._extend(skel.shape, handle._trail)
        cont: Continuation = node.continuation
        table: ConstantTable = cont.tables.get(skel._const_paths)
        if table is None:
            table = ConstantTable(skel._const_paths)
            cont.tables[skel._const_paths] = table
            cont.set_tables()
        leaf: Leaf = table.leaves.get(skel._const_key)
        if leaf is None:
            leaf = Leaf(not skel._const_paths)
            if leaf.cache is not None:
                _fill_leaf(table, skel._const_key, self._members(cont), leaf.cache)
            table.leaves[skel._const_key] = leaf
            if not skel._const_paths:
                table.sole = leaf
        handler: Handler = leaf.handlers.get(skel.captures)
        if handler is None:
            handler = Handler(skel.captures, skel.exact)
            bag: dict = handler.captures
            members = leaf.cache if leaf.cache is not None else self._members(cont)
            if handler.exact:
                pass  # the leaf's cache is the bag
            elif handler.arity == 0:
                handler.empty_count = len(members)
            else:
                for k in members:
                    ck = _capture_key(handler, _unkey(k))
                    bag[ck] = bag.get(ck, 0) + 1
            leaf.handlers[skel.captures] = handler
            leaf.set_handlers()
        handler.callbacks[handle] = callback
        handler.set_callbacks()
        handle._continuation = cont
        handle._table = table
        handle._leaf = leaf
        handle._handler = handler
        handle._const_key = skel._const_key
        handle.active = True
        events: list = []
        if handler.exact:
            for k in (leaf.cache if leaf.cache is not None else self._members(cont)):
                events.append(callback)
                events.append("+")
                events.append(_captures_of(handler, _unkey(k)))
        if handler.empty_count:
            events.append(callback)
            events.append("+")
            events.append(())
        for ck in handler.captures:
            events.append(callback)
            events.append("+")
            events.append(handler.captures_of_key(ck))
        if events:
            try:
                _deliver(events)
            except BaseException:
                # Nobody holds the handle yet: undo, so nothing is left
                # installed that the caller cannot remove.
                self.remove_handler(handle)
                raise
        return handle

    def remove_handler(self, handle):
        """Unregister a handler. Its callback gets no further events (and no
        ``-`` for what it was told of). Empty leaves, constant tables and trie
        nodes are pruned. Raises :class:`UnknownHandlerError` when ``handle``
        was already removed or comes from another index,
        :class:`DataspaceTypeError` when it is not a handle."""
        if type(handle) is not HandlerHandle:
            raise DataspaceTypeError(
                f"remove_handler takes what add_handler returned, got {type(handle).__name__}"
            )
        h: HandlerHandle = cython.cast(HandlerHandle, handle)
        if h._index is not self._token:
            raise UnknownHandlerError("this handler belongs to another index")
        if not h.active:
            raise UnknownHandlerError(f"handler for {h.pattern!r} was already removed")
        h.active = False
        handler: Handler = h._handler
        del handler.callbacks[h]
        handler.set_callbacks()
        if handler.callbacks:
            return
        leaf: Leaf = h._leaf
        del leaf.handlers[handler.paths]
        leaf.set_handlers()
        if leaf.handlers:
            return
        table: ConstantTable = h._table
        del table.leaves[h._const_key]
        table.sole = None
        if table.leaves:
            return
        del h._continuation.tables[table.paths]
        h._continuation.set_tables()
        # Prune the trie back towards the root (invariant I6).
        i: cython.Py_ssize_t = len(h._trail) - 4
        while i >= 0:
            parent: Node = h._trail[i]
            sel: Selector = h._trail[i + 1]
            child: Node = h._trail[i + 3]
            if not child.is_empty():
                break
            del sel.table[h._trail[i + 2]]
            if not sel.table:
                del parent.edges[(sel.pop_count, sel.index)]
                parent.selectors.remove(sel)
            i -= 4

    @cython.cfunc
    def _members(self, cont: Continuation) -> object:
        """The keys cached at ``cont`` (the bag's keys at the root)."""
        if cont.cache is None:
            return self._bag
        return cont.cache

    @cython.cfunc
    def _extend(self, shape: object, trail: list) -> Node:
        """The node whose continuation serves ``shape``, creating the missing
        nodes (each with the cache its shape prefix calls for). ``trail`` gets
        (parent, selector, class, child) for each edge, root first."""
        if shape is None:
            return self._root
        result = self._extend_walk(self._root, 0, 0, shape, (), trail)
        return cython.cast(Node, result[1])

    @cython.cfunc
    def _extend_walk(self, node: Node, pop_count: cython.Py_ssize_t,
                     index: cython.Py_ssize_t, shape: object, path: tuple,
                     trail: list) -> tuple:
        if shape is None:
            return (pop_count, node)
        cls = class_key(shape[0], shape[1])
        selkey = (pop_count, index)
        sel: Selector = node.edges.get(selkey)
        if sel is None:
            sel = Selector(pop_count, index)
            node.edges[selkey] = sel
            node.selectors.append(sel)
        nxt: Node = sel.table.get(cls)
        if nxt is None:
            cache: set = set()
            # Class keys are interned (class_key), so identity is equality.
            for k in self._members(node.continuation):
                if _class_of(_project(_unkey(k), path)) is cls:
                    cache.add(k)
            nxt = Node(Continuation(cache))
            sel.table[cls] = nxt
        trail.append(node)
        trail.append(sel)
        trail.append(cls)
        trail.append(nxt)
        pop: cython.Py_ssize_t = 0
        cur: Node = nxt
        i: cython.Py_ssize_t
        kids: tuple = shape[2:]
        for i in range(len(kids)):
            r = self._extend_walk(cur, pop, i, kids[i], path + (i,), trail)
            pop = r[0]
            cur = r[1]
        return (pop + 1, cur)


@cython.cfunc
def _fill_leaf(table: ConstantTable, const_key: object, members: object, out: set):
    """Add to ``out`` the keys in ``members`` whose values carry ``const_key``
    at ``table``'s constant paths (a new leaf's cache, invariant I3)."""
    i0: cython.Py_ssize_t = table._i0
    if i0 < 0:
        for k in members:
            if table.key_of(_unkey(k)) == const_key:
                out.add(k)
    elif cython.compiled:
        # The same test, with hashes compared first (str and Record keys
        # carry theirs): most keys differ, and a rich comparison per key
        # costs more than the loop around it.
        h: cython.Py_hash_t = hash(const_key)
        for k in members:
            ck = _subkey(_step(_unkey(k), i0))
            if ck is const_key or (hash(ck) == h and ck == const_key):
                out.add(k)
    else:
        for k in members:
            if _subkey(_step(_unkey(k), i0)) == const_key:
                out.add(k)


@cython.cfunc
def _capture_key(handler: Handler, v: object) -> object:
    """The bag key of ``v``'s captures (see Handler)."""
    n: cython.Py_ssize_t = handler.arity
    if n == 1:
        return _subkey(_first_capture(handler, v))
    if n == 0:
        return ()
    return _capture_tuple_key(_captures(handler, v))


@cython.cfunc
@cython.inline
def _first_capture(handler: Handler, v: object) -> object:
    if handler._i0 >= 0:
        return _step(v, handler._i0)
    return _project(v, handler.first)


@cython.cfunc
def _captures(handler: Handler, v: object) -> tuple:
    """The capture tuple of ``v`` (arity 2 or more)."""
    paths: tuple = handler.paths
    if handler.arity == 2:
        return (_project(v, paths[0]), _project(v, paths[1]))
    if handler.arity == 3:
        return (_project(v, paths[0]), _project(v, paths[1]), _project(v, paths[2]))
    return tuple([_project(v, p) for p in paths])


@cython.cfunc
def _capture_tuple_key(caps: tuple) -> tuple:
    for y in caps:
        if not _self_keyed(y):
            return tuple([_subkey(z) for z in caps])
    return caps


@cython.cfunc
def _captures_of(handler: Handler, v: object) -> tuple:
    n: cython.Py_ssize_t = handler.arity
    if n == 1:
        return (_first_capture(handler, v),)
    if n == 0:
        return ()
    return _captures(handler, v)


@cython.cfunc
def _visit_handler(handler: Handler, v: object, op: cython.int, events: list):
    n: cython.Py_ssize_t = handler.arity
    caps: tuple
    if op == _MESSAGE or handler.exact:
        caps = _captures_of(handler, v)
        event = "!" if op == _MESSAGE else ("+" if op == _ADD else "-")
        for cb in handler.callback_list:
            events.append(cb)
            events.append(event)
            events.append(caps)
        return
    if n == 0:
        if op == _ADD:
            handler.empty_count += 1
            if handler.empty_count != 1:
                return
            event = "+"
        else:
            handler.empty_count -= 1
            if handler.empty_count != 0:
                return
            event = "-"
        for cb in handler.callback_list:
            events.append(cb)
            events.append(event)
            events.append(())
        return
    bag: dict = handler.captures
    x = None
    ck: object
    if n == 1:
        x = _first_capture(handler, v)
        ck = _subkey(x)
    else:
        caps = _captures(handler, v)
        ck = _capture_tuple_key(caps)
    if op == _ADD:
        size: cython.Py_ssize_t = len(bag)
        count = bag.setdefault(ck, 1)  # one probe when the tuple is new
        if len(bag) != size:
            event = "+"
            if n > 1:
                _untrack(ck)
        else:
            bag[ck] = count + 1
            return
    else:
        count = bag.pop(ck)  # one probe when the count drops to 0
        if count == 1:
            event = "-"
        else:
            bag[ck] = count - 1
            return
    if n == 1:
        caps = (x,)
    for cb in handler.callback_list:
        events.append(cb)
        events.append(event)
        events.append(caps)
