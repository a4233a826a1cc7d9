"""Canonical values: Record, canonical equality and hashing, and the index's keys.

What must always hold here (docs/dataspace.md, "Values"):

* Equality is canonical: two values are equal when they have the same type
  and the same contents, so ``1``, ``1.0`` and ``True`` are three values,
  and floats compare by their IEEE-754 bits (``-0.0 != 0.0``; a NaN equals
  a NaN with the same bits). :func:`canonical_hash` agrees with it.
* Inside the index a value is filed under its canonical *key*
  (:func:`value_key`): the value itself where Python's ``==`` and ``hash``
  already agree with canonical equality, a :class:`Canon` wrapper elsewhere.
  So the index's sets and dicts compare keys with Python's own, fast
  equality and still never confuse ``1`` with ``True``.
* A :class:`Record` is immutable; it checks its fields, normalises lists to
  tuples, and caches its hash, its class (label/arity) and its depth when it
  is built.
* No recursion over a value's parts goes deeper than ``MAX_DEPTH`` levels:
  each refuses, with :class:`InvalidValueError`, before it would.

Part of the one source of the index, built twice (see ``_compiled.pyx``).
"""

import struct

import cython
from cython.cimports.libc.math import floor

from a0py.dataspace._errors import InvalidValueError
from a0py.dataspace._format import format_term
from a0py.dataspace._patterns import Capture, Discard
from a0py.dataspace._values import MAX_DEPTH, TUPLE_LABEL

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_SALT_BOOL = cython.declare(cython.Py_hash_t, 0x5BD1E995)
_SALT_FLOAT = cython.declare(cython.Py_hash_t, 0x1B873593)
_SALT_TUPLE = cython.declare(cython.Py_hash_t, 0x2545F491)
_INF = cython.declare(cython.double, float("inf"))

# How deep a value or pattern may nest (MAX_DEPTH, the codec's limit): each
# record, tuple, list and capture is one level, an atom none. Every recursion
# over a value's parts (here and in _skeleton.py) is bounded by it, so none
# can exhaust the C stack.
_MAX_DEPTH = cython.declare(cython.int, MAX_DEPTH)

# label -> {arity -> the class key "label/arity"}. Interned, so a record's class
# is one shared str whose hash is cached and whose comparisons are identity.
_CLASSES = cython.declare(dict, {})


def class_key(label: str, arity: cython.Py_ssize_t) -> str:
    """The trie's class of records with this label and arity (``"label/arity"``).

    Tuples are records of the reserved label ``""``: a 2-tuple has class ``"/2"``.
    """
    return _class_key(label, arity)


@cython.cfunc
def _class_key(label: str, arity: cython.Py_ssize_t) -> str:
    by_arity = _CLASSES.get(label)
    if by_arity is None:
        by_arity = _CLASSES[label] = {}
    c = cython.cast(dict, by_arity).get(arity)
    if c is None:
        c = f"{label}/{arity}"
        by_arity[arity] = c
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
        _fill_record(self, label, fields)

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


@cython.cfunc
def _fill_record(r: Record, label: str, fields: tuple) -> cython.int:
    """Set up record ``r`` of a ``label`` already checked (a non-empty str)."""
    flags: cython.int = 0
    depth: cython.int = 0
    d: cython.int
    for f in fields:
        d = _classify(f, 1)
        flags |= d & _FLAGS
        d >>= _DEPTH_SHIFT
        if d > depth:
            depth = d
    if flags & _HAS_LIST:
        fields = tuple([_normalize(f) for f in fields])
    pattern: cython.bint = (flags & _IS_PATTERN) != 0
    r.label = label
    r.fields = fields
    r._cls = _class_key(label, len(fields))
    r._pattern = pattern
    r._depth = depth + 1
    hashes: list = [hash(label)]
    for f in fields:
        hashes.append(_chash(f, 1))
    r._hash = hash(tuple(hashes))
    return 0


@cython.cfunc
def _new_record(label: str, fields: tuple) -> Record:
    """``Record(label, *fields)`` for a label already checked, without the call's
    argument tuple (the decoder builds records this way)."""
    r: Record = Record.__new__(Record)
    _fill_record(r, label, fields)
    return r


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


# ---------------------------------------------------------------- paths and classes
# How the trie looks into a value already checked: field ``i`` of a record
# or tuple, the part at a path, and the class (label/arity) of a part.


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
        return _class_key(TUPLE_LABEL, n)
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
