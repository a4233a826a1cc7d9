"""The skeleton index's trie: nodes, selectors, continuations, leaves, handlers.

The structure of Garnock-Jones, "Efficient, Imperative Dataspaces for
Conversational Concurrency" (2018), in the paper's names, from the root down:

* a :class:`Node` has a :class:`Continuation` and its ``edges``: one
  :class:`Selector` (pop-count, index) per way out, each branching on the
  *class* (label, arity) of the record it selects (``by_class``);
* a continuation holds ``cached_assertions``, every asserted value with the
  node's shape prefix, and its ``leaf_map``: for each list of constant paths
  a :class:`ConstantTable` of leaves keyed by the constants' values;
* a :class:`Leaf` holds ``cached_assertions``, the continuation's values that
  carry its constants, and its ``handler_map``: one :class:`Handler` per
  capture map;
* a handler holds ``cached_captures``, the bag of the capture tuples of its
  leaf's values, and the ``callbacks`` of every pattern that shares it.

The invariants these fields keep are written at the top of ``_index.py``,
whose operations keep them. Caches hold canonical keys (``_canonical.py``),
not values. Part of the one source of the index, built twice (see
``_compiled.pyx``).
"""

import cython

if not cython.compiled:
    # Compiled, every file of the index is included into one module
    # (_compiled.pyx), where these names are already defined.
    from a0py.dataspace._canonical import (
        Canon,
        _project,
        _self_keyed,
        _step,
        _subkey,
        _unkey,
    )

# What an operation does to the caches and bags it visits.
_ADD = cython.declare(cython.int, 1)
_REMOVE = cython.declare(cython.int, 2)
_MESSAGE = cython.declare(cython.int, 3)


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


@cython.final
@cython.cclass
class Handler:
    """The handler of a leaf for one capture map (``capture_paths``): the bag
    of capture tuples of the leaf's cached assertions (``cached_captures``,
    invariant I4), and the callbacks (by handle) of the patterns sharing it.

    The bag is keyed by the canonical key of the capture tuple; with one
    capture, by the key of the captured value alone (no 1-tuple is kept per
    entry). With no capture the bag has one possible entry, ``()``, so it is
    a plain count, ``empty_count``, and ``cached_captures`` stays empty.

    An *exact* handler (its pattern's constants and captures cover every hole
    of its shape, as in ``speak($, $)`` or ``present("Alice", $)``) keeps no
    bag at all: distinct values in its leaf have distinct capture tuples, so
    each count is 0 or 1 and follows the leaf's cache, which already records
    it. Its ``+`` and ``-`` are exactly the leaf's additions and removals."""

    capture_paths = cython.declare(tuple)
    arity = cython.declare(cython.Py_ssize_t)
    exact = cython.declare(cython.bint)
    first_path = cython.declare(tuple)
    _first_index = cython.declare(cython.Py_ssize_t)  # first_path's one index, or -1
    cached_captures = cython.declare(dict)
    empty_count = cython.declare(cython.Py_ssize_t)
    callbacks = cython.declare(dict)
    callback_list = cython.declare(list)

    def __init__(self, capture_paths: tuple, exact: cython.bint):
        self.capture_paths = capture_paths
        self.exact = exact
        self.arity = len(capture_paths)
        self.first_path = capture_paths[0] if self.arity else ()
        self._first_index = self.first_path[0] if len(self.first_path) == 1 else -1
        self.cached_captures = {}
        self.empty_count = 0
        self.callbacks = {}
        self.callback_list = []

    @cython.cfunc
    def set_callbacks(self):
        self.callback_list = list(self.callbacks.values())

    @cython.cfunc
    def captures_of_key(self, ck: object) -> tuple:
        """The capture tuple whose bag key is ``ck``."""
        if self.arity == 1:
            return (_unkey(ck),)
        for x in cython.cast(tuple, ck):
            if type(x) is Canon:
                return tuple([_unkey(y) for y in cython.cast(tuple, ck)])
        return ck


@cython.final
@cython.cclass
class Leaf:
    """The assertions of a continuation that carry given constants
    (``cached_assertions``, invariant I3), and the handlers interested in
    them, by capture map (``handler_map``).

    A leaf of a table without constants holds exactly its continuation's
    assertions (I3 with nothing to filter), so it shares that cache:
    ``cached_assertions`` is None there instead of a second set kept equal to
    the first.
    """

    cached_assertions = cython.declare(set)
    handler_map = cython.declare(dict)
    handler_list = cython.declare(list)

    def __init__(self, shared: cython.bint):
        if shared:
            self.cached_assertions = None
        else:
            self.cached_assertions = set()
            _untrack(self.cached_assertions)
        self.handler_map = {}
        self.handler_list = []

    @cython.cfunc
    def set_handlers(self):
        self.handler_list = list(self.handler_map.values())


@cython.final
@cython.cclass
class ConstantTable:
    """For one list of constant paths (``const_paths``, a constant map's
    paths): the leaves keyed by the constants' values found there."""

    const_paths = cython.declare(tuple)
    leaves = cython.declare(dict)
    sole = cython.declare(Leaf)  # without constants: the one leaf, or None
    _n_paths = cython.declare(cython.Py_ssize_t)
    _first_path = cython.declare(tuple)
    _first_index = cython.declare(cython.Py_ssize_t)  # one one-step path: its index; else -1

    def __init__(self, const_paths: tuple):
        self.const_paths = const_paths
        self.leaves = {}
        self.sole = None
        self._n_paths = len(const_paths)
        self._first_path = const_paths[0] if self._n_paths else ()
        self._first_index = (
            self._first_path[0] if self._n_paths == 1 and len(self._first_path) == 1 else -1
        )

    @cython.cfunc
    def key_of(self, v: object) -> object:
        """The key of ``v``'s constants at ``const_paths`` (as a leaf is keyed)."""
        if self._n_paths == 1:
            return _subkey(_project(v, self._first_path))
        if self._n_paths == 0:
            return ()
        return tuple([_subkey(_project(v, p)) for p in self.const_paths])


@cython.final
@cython.cclass
class Continuation:
    """What the index knows at a trie node: every asserted value with the
    node's shape prefix (``cached_assertions``, invariant I2) and the
    constant tables of the patterns whose shape ends here (``leaf_map``:
    constant paths -> :class:`ConstantTable`).

    At the root every asserted value has the (empty) prefix, so the root's
    cache is the index's ``all_assertions`` key set itself:
    ``cached_assertions`` is None there."""

    cached_assertions = cython.declare(set)
    leaf_map = cython.declare(dict)
    table_list = cython.declare(list)

    def __init__(self, cached_assertions):
        self.cached_assertions = cached_assertions
        if cached_assertions is not None:
            _untrack(cached_assertions)
        self.leaf_map = {}
        self.table_list = []

    @cython.cfunc
    def set_tables(self):
        self.table_list = list(self.leaf_map.values())


@cython.final
@cython.cclass
class Selector:
    """A trie edge: pop ``pop_count`` levels, take field ``index``, then
    branch on the class of what is there (``by_class``: class -> Node)."""

    pop_count = cython.declare(cython.Py_ssize_t)
    index = cython.declare(cython.Py_ssize_t)
    by_class = cython.declare(dict)

    def __init__(self, pop_count: cython.Py_ssize_t, index: cython.Py_ssize_t):
        self.pop_count = pop_count
        self.index = index
        self.by_class = {}


@cython.final
@cython.cclass
class Node:
    """A trie node: its continuation and its edges (``edges``: (pop-count,
    index) -> Selector; ``selectors``, the same in creation order)."""

    continuation = cython.declare(Continuation)
    edges = cython.declare(dict)
    selectors = cython.declare(list)

    def __init__(self, continuation: Continuation):
        self.continuation = continuation
        self.edges = {}
        self.selectors = []

    @cython.cfunc
    def is_empty(self) -> cython.bint:
        return not self.continuation.leaf_map and not self.selectors


# ---------------------------------------------------------------- handlers at work


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
    if handler._first_index >= 0:
        return _step(v, handler._first_index)
    return _project(v, handler.first_path)


@cython.cfunc
def _captures(handler: Handler, v: object) -> tuple:
    """The capture tuple of ``v`` (arity 2 or more)."""
    paths: tuple = handler.capture_paths
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
    """Apply ``op`` (add, remove, message) of ``v``, a value in the handler's
    leaf, to the handler, and append the events it causes to ``events`` as
    (callback, event, captures) triples: ``+``/``-`` only on a capture
    tuple's 0->1/1->0 transition (I4), ``!`` for every message."""
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
    bag: dict = handler.cached_captures
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
