"""The skeleton index: the bag of assertions, the trie, and the events between them.

:class:`Index` is the index of Garnock-Jones, "Efficient, Imperative
Dataspaces for Conversational Concurrency" (2018): ``all_assertions``, the
bag of every asserted value, and the root of the trie (``_trie.py``) that
files each value under its shape, its constants and its captures so that an
assertion, a retraction or a message visits only the handlers it concerns.
Patterns come in compiled into skeletons (``_skeleton.py``), values as
canonical keys (``_canonical.py``). The names are the paper's.

Invariants (I1-I5 are the paper's; I6 and I7 are ours):

I1. ``all_assertions[k]`` is how many times the value with canonical key
    ``k`` is asserted; keys with count 0 are absent.
I2. The ``cached_assertions`` of the continuation at the trie node reached
    by a shape prefix hold the key of every asserted value that has that
    prefix.
I3. A leaf's ``cached_assertions`` hold the keys in its continuation's cache
    whose values carry the leaf's constants at its table's constant paths.
I4. A handler's ``cached_captures`` count, for each capture tuple, the
    values in its leaf's cache that project to it; ``+`` fires on its 0->1
    and ``-`` on its 1->0 transitions, and on nothing else. Messages touch no
    cache and no bag.
I5. Empty leaves and empty constant tables are pruned. A leaf is empty when
    it has no handlers: unlike the paper's code we never create a leaf for
    constants nobody observes (a new handler builds its leaf from the
    continuation's cache), so each leaf lives exactly as long as its handlers.
I6. A trie node other than the root is pruned when it has no constant table
    and no edge: the trie follows the live patterns instead of growing forever.
I7. Callbacks never run while the structure is being changed: an operation
    collects its events and delivers them once every invariant holds again,
    so a callback may call back into the index.

Part of the one source of the index, built twice (see ``_compiled.pyx``).
"""

import cython

from a0py.dataspace._errors import DataspaceTypeError, NotAssertedError, UnknownHandlerError

if not cython.compiled:
    # Compiled, every file of the index is included into one module
    # (_compiled.pyx), where these names are already defined.
    from a0py.dataspace._canonical import (
        _class_of,
        _key,
        _project,
        _step,
        _subkey,
        _unkey,
        _value,
        class_key,
    )
    from a0py.dataspace._skeleton import Skeleton
    from a0py.dataspace._trie import (
        _ADD,
        _MESSAGE,
        _REMOVE,
        ConstantTable,
        Continuation,
        Handler,
        Leaf,
        Node,
        Selector,
        _capture_key,
        _captures_of,
        _visit_handler,
    )


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
    # Where remove_handler finds what to undo: the owning index's token, the
    # trie edges walked from the root (to prune, I6), and the continuation,
    # constant table, leaf and handler the pattern was filed under.
    _owner = cython.declare(object)
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

    _all_assertions = cython.declare(dict)
    _root = cython.declare(Node)
    _token = cython.declare(object)
    _spare = cython.declare(list)

    def __init__(self):
        self._all_assertions = {}
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
        return len(self._all_assertions)

    def __contains__(self, v):
        """True when ``v`` is asserted (at least once)."""
        return _key(_value(v)) in self._all_assertions

    def count(self, v) -> int:
        """How many times ``v`` is asserted (0 when it is not). Raises
        :class:`InvalidValueError` unless ``v`` is a value."""
        return self._all_assertions.get(_key(_value(v)), 0)

    def assertions(self) -> list:
        """The distinct asserted values, in no particular order."""
        return [_unkey(k) for k in self._all_assertions]

    def stats(self) -> dict:
        """Sizes of the structure (trie nodes, constant tables, leaves,
        handlers, callbacks), for tests and tuning."""
        counts = {"assertions": len(self._all_assertions), "nodes": 0, "tables": 0, "leaves": 0,
                  "handlers": 0, "callbacks": 0}
        todo = [self._root]
        while todo:
            node: Node = todo.pop()
            counts["nodes"] += 1
            for table in node.continuation.leaf_map.values():
                counts["tables"] += 1
                for leaf in cython.cast(ConstantTable, table).leaves.values():
                    counts["leaves"] += 1
                    for handler in cython.cast(Leaf, leaf).handler_map.values():
                        counts["handlers"] += 1
                        counts["callbacks"] += len(cython.cast(Handler, handler).callbacks)
            for sel in node.selectors:
                todo.extend(cython.cast(Selector, sel).by_class.values())
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
                if self._all_assertions.get(k, 0) + have.get(k, 0) < n:
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
        bag: dict = self._all_assertions
        size: cython.Py_ssize_t = len(bag)
        n = bag.setdefault(key, 1)  # one probe when the key is new
        if len(bag) != size:
            self._walk(self._root, None, v, key, _ADD, events)
        else:
            bag[key] = n + 1

    @cython.cfunc
    def _remove(self, v: object, key: object, events: list):
        bag: dict = self._all_assertions
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
        if cont.cached_assertions is not None:
            if op == _ADD:
                cont.cached_assertions.add(key)
            elif op == _REMOVE:
                cont.cached_assertions.discard(key)
        table: ConstantTable
        leaf: Leaf
        if cont.table_list:
            for table in cont.table_list:
                if table._n_paths == 0:
                    leaf = table.sole
                elif table._first_index >= 0:
                    leaf = table.leaves.get(_subkey(_step(v, table._first_index)))
                else:
                    leaf = table.leaves.get(table.key_of(v))
                if leaf is None:
                    continue
                if leaf.cached_assertions is not None:
                    if op == _ADD:
                        leaf.cached_assertions.add(key)
                    elif op == _REMOVE:
                        leaf.cached_assertions.discard(key)
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
            nxt = sel.by_class.get(cls)
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
        handle._owner = self._token
        handle._trail = []
        node: Node = self._extend(skel.shape, handle._trail)
        cont: Continuation = node.continuation
        table: ConstantTable = cont.leaf_map.get(skel._const_paths)
        if table is None:
            table = ConstantTable(skel._const_paths)
            cont.leaf_map[skel._const_paths] = table
            cont.set_tables()
        leaf: Leaf = table.leaves.get(skel._const_key)
        if leaf is None:
            leaf = Leaf(not skel._const_paths)
            if leaf.cached_assertions is not None:
                _fill_leaf(table, skel._const_key, self._cached_assertions(cont),
                           leaf.cached_assertions)
            table.leaves[skel._const_key] = leaf
            if not skel._const_paths:
                table.sole = leaf
        members = leaf.cached_assertions
        if members is None:
            members = self._cached_assertions(cont)
        handler: Handler = leaf.handler_map.get(skel.captures)
        if handler is None:
            handler = Handler(skel.captures, skel.exact)
            bag: dict = handler.cached_captures
            if handler.exact:
                pass  # the leaf's cache is the bag
            elif handler.arity == 0:
                handler.empty_count = len(members)
            else:
                for k in members:
                    ck = _capture_key(handler, _unkey(k))
                    bag[ck] = bag.get(ck, 0) + 1
            leaf.handler_map[skel.captures] = handler
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
            for k in members:
                events.append(callback)
                events.append("+")
                events.append(_captures_of(handler, _unkey(k)))
        if handler.empty_count:
            events.append(callback)
            events.append("+")
            events.append(())
        for ck in handler.cached_captures:
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
        if h._owner is not self._token:
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
        del leaf.handler_map[handler.capture_paths]
        leaf.set_handlers()
        if leaf.handler_map:
            return
        table: ConstantTable = h._table
        del table.leaves[h._const_key]
        table.sole = None
        if table.leaves:
            return
        del h._continuation.leaf_map[table.const_paths]
        h._continuation.set_tables()
        # Prune the trie back towards the root (invariant I6).
        i: cython.Py_ssize_t = len(h._trail) - 4
        while i >= 0:
            parent: Node = h._trail[i]
            sel: Selector = h._trail[i + 1]
            child: Node = h._trail[i + 3]
            if not child.is_empty():
                break
            del sel.by_class[h._trail[i + 2]]
            if not sel.by_class:
                del parent.edges[(sel.pop_count, sel.index)]
                parent.selectors.remove(sel)
            i -= 4

    @cython.cfunc
    def _cached_assertions(self, cont: Continuation) -> object:
        """The keys cached at ``cont`` (at the root, all_assertions' keys)."""
        if cont.cached_assertions is None:
            return self._all_assertions
        return cont.cached_assertions

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
        nxt: Node = sel.by_class.get(cls)
        if nxt is None:
            cache: set = set()
            # Class keys are interned (class_key), so identity is equality.
            for k in self._cached_assertions(node.continuation):
                if _class_of(_project(_unkey(k), path)) is cls:
                    cache.add(k)
            nxt = Node(Continuation(cache))
            sel.by_class[cls] = nxt
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
    i0: cython.Py_ssize_t = table._first_index
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
