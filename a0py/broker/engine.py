"""The broker's fact table and incremental joins, in one process, with no IPC.

:class:`Engine` is what :class:`a0py.broker.Broker` runs for its clients; it can be used
on its own (and is, by the differential test). Clients are names; each owns a set of
claims and of subscriptions. All facts live in one skeleton :class:`a0py.dataspace.Index`.

Invariants (what must always hold, written once here):

* **Claims are per client and counted in the index.** A client's claims are a set keyed by
  the value's canonical encoding: claiming a value twice is idempotent. Each (client,
  value) claim is one assertion in the index, whose bag counts them, so a value claimed by
  two clients is a fact until both retract it, and the index's ``+``/``-`` fire only on
  the fact's 0→1 and 1→0 transitions.
* **A subscription is a conjunctive query.** Its patterns ("parts") are joined on their
  shared capture names; ``$`` (anonymous) captures and ``_`` bind nothing. Each part has
  a handler in the index and a table: the bag of its distinct bindings (projected on its
  named variables; a name repeated inside one pattern must bind equal values). The
  result is the set of full bindings (one value per variable of the subscription) such
  that each part's projection is in its table.
* **Joins are incremental.** A binding entering (leaving) a part's table on its 0→1 (1→0)
  transition is joined with the *current* tables of the other parts, through hash
  indexes on the variables they share, to give exactly the result rows it adds (removes).
  Applying the deltas of several parts one after the other is exact (semi-naive
  evaluation: ΔA⋈B then A'⋈ΔB), so a fact that touches two parts of a self-join is
  right too. No change ever re-evaluates a whole join.
* **Notifications carry net changes only.** Each subscription keeps the rows added and
  removed since its last notification, a removal cancelling an addition of the same row
  and vice versa; it is notified only when one of them is non-empty. So a change undone
  within one batch (or one drain of the broker's queue), a reordering, a repeated claim
  and an irrelevant claim notify nobody. The first notification of a subscription
  (``full``) carries its whole result, even when empty.
* **Batches are atomic.** :meth:`Engine.apply` checks every item before it changes
  anything; a bad item raises :class:`BatchRejectedError` naming it, and the table is
  untouched.
* **A subscription is a fact** ``subscription(client, id, patterns)`` (the patterns as a
  tuple of their texts), asserted while it lives. It belongs to no client's claims, so a
  client's retract never removes it.

Written in Cython's pure-Python mode and built twice, as the dataspace's index is
(docs/dataspace.md, "Two builds of one source"): ``a0py/broker/_compiled.pyx`` includes
this file (and ``terms.py``) into one extension module, the build the broker uses;
imported as it is, this module is the interpreted build, the reference the tests hold the
compiled one to. ``a0py.broker._build_choice`` says which one is loaded.
"""

import cython

from a0py.dataspace import (
    Index,
    InvalidValueError,
    Record,
    analyse,
    canonical_equal,
    capture,
    encode,
    value_key,
)

from .errors import BatchRejectedError, UnknownSubscriptionError

if not cython.compiled:
    # Compiled, terms.py is included into the same module (_compiled.pyx).
    from .terms import has_pattern, match, pattern_text

__all__ = ["CLAIM", "RETRACT", "SUBSCRIBE", "UNSUBSCRIBE", "Change", "Engine"]

# Batch item kinds (the first field of each item tuple given to Engine.apply).
CLAIM = "claim"            # ("claim", encoding, value)
RETRACT = "retract"        # ("retract", pattern_or_value): every match among own claims;
#                            ("retract", value, encoding): the claim of value, by its encoding
SUBSCRIBE = "subscribe"    # ("subscribe", sub_id, patterns)
UNSUBSCRIBE = "unsubscribe"  # ("unsubscribe", sub_id)

SUBSCRIPTION_LABEL = "subscription"


@cython.cclass
class Change:
    """One notification: subscription ``sub_id`` of ``client`` changed.

    ``variables`` is the sorted tuple of the subscription's variable names; each row is a
    tuple of values in that order. ``full`` means ``added`` is the whole current result
    (the first notification, or after a resync) and ``removed`` is empty."""

    client = cython.declare(object, visibility="public")
    sub_id = cython.declare(object, visibility="public")
    variables = cython.declare(object, visibility="public")
    full = cython.declare(object, visibility="public")
    added = cython.declare(object, visibility="public")
    removed = cython.declare(object, visibility="public")

    def __init__(self, client, sub_id, variables, full, added, removed):
        self.client = client
        self.sub_id = sub_id
        self.variables = variables
        self.full = full
        self.added = added
        self.removed = removed

    def __repr__(self):
        return (f"Change({self.client!r}, {self.sub_id}, full={self.full}, "
                f"added={self.added!r}, removed={self.removed!r})")


@cython.cfunc
@cython.inline
def _key_of(v: object) -> object:
    # value_key(v), without the call where the value is its own key (a captured part of
    # an asserted value is never a pattern).
    t = type(v)
    if t is str or t is int or t is Record or t is bytes or v is None:
        return v
    return value_key(v)


@cython.cfunc
def _keys(values: tuple) -> tuple:
    n: cython.Py_ssize_t = len(values)
    if n == 1:
        return (_key_of(values[0]),)
    if n == 2:
        return (_key_of(values[0]), _key_of(values[1]))
    return tuple([_key_of(v) for v in values])


@cython.cfunc
@cython.inline
def _project(key: tuple, positions: tuple) -> tuple:
    return tuple([key[i] for i in positions])


@cython.final
@cython.cclass
class _Part:
    """One pattern of a subscription: its index handler and its table of bindings."""

    sub = cython.declare(object)        # the _Subscription
    number = cython.declare(cython.Py_ssize_t)
    positions = cython.declare(tuple)   # capture index of each own variable
    identity = cython.declare(cython.bint)
    gidx = cython.declare(tuple)        # each own variable's index among the sub's
    equal = cython.declare(tuple)       # (i, j): captures i and j must be equal
    single = cython.declare(cython.bint)
    rows = cython.declare(dict)         # binding key (tuple of value keys) -> [values, count]
    indexes = cython.declare(dict)      # tuple of local var positions -> {subkey: {row key: values}}
    handle = cython.declare(object)

    def __init__(self, sub, number, pattern, variables, single):
        self.sub = sub
        self.number = number
        names = analyse(pattern).names
        first = {}
        equal = []
        for i, name in enumerate(names):
            if name is None:
                continue
            if name in first:
                equal.append((first[name], i))
            else:
                first[name] = i
        own = sorted(first)
        self.positions = tuple(first[n] for n in own)
        # The captures tuple is already the binding when every capture is named once and
        # they come in name order (`temp($room, $t)`): no tuple to build per event.
        self.identity = self.positions == tuple(range(len(names)))
        self.gidx = tuple(variables.index(n) for n in own)
        self.equal = tuple(equal)
        self.single = single   # the subscription's only part: its table is the result
        self.rows = {}
        self.indexes = {}
        self.handle = None

    def index_on(self, local):
        """A hash index of the table on the local variable positions ``local`` (made once)."""
        index = self.indexes.get(local)
        if index is None:
            index = {}
            for key, entry in self.rows.items():
                index.setdefault(_project(key, local), {})[key] = entry[0]
            self.indexes[local] = index
        return index

    def on_event(self, event, caps):
        """The index's callback: ``caps`` entered (``+``) or left (``-``) the pattern."""
        self._event(event == "+", caps)

    @cython.cfunc
    def _event(self, added: cython.bint, caps: tuple) -> cython.int:
        i: cython.Py_ssize_t
        j: cython.Py_ssize_t
        if self.equal:
            for i, j in self.equal:
                if not canonical_equal(caps[i], caps[j]):
                    return 0
        values: tuple = caps if self.identity else tuple([caps[i] for i in self.positions])
        key: tuple = _keys(values)
        rows: dict = self.rows
        sub: _Subscription = self.sub
        entry: list
        local: tuple
        if added:
            found = rows.get(key)
            if found is not None:
                entry = found
                entry[1] += 1
                return 0
            rows[key] = [values, 1]
            if self.single:
                sub.row_added(key, values)
                return 0
            for local_, index in self.indexes.items():
                local = local_
                cython.cast(dict, index).setdefault(_project(key, local), {})[key] = values
            sub.part_changed(self, key, values, True)
        else:
            entry = rows[key]
            entry[1] -= 1
            if entry[1]:
                return 0
            del rows[key]
            if self.single:
                sub.row_removed(key, values)
                return 0
            for local_, index in self.indexes.items():
                local = local_
                subkey = _project(key, local)
                bucket: dict = cython.cast(dict, index)[subkey]
                del bucket[key]
                if not bucket:
                    del cython.cast(dict, index)[subkey]
            sub.part_changed(self, key, values, False)
        return 0


@cython.final
@cython.cclass
class _Step:
    """One step of a join plan: look ``part`` up on the bound variables ``key_g`` (through
    its index on its positions ``local``), binding its other variables ``new``
    (``(position, variable)`` pairs). ``whole``: every variable of the part is bound, so
    the step is one membership test."""

    part = cython.declare(_Part)
    local = cython.declare(tuple)
    key_g = cython.declare(tuple)
    new = cython.declare(tuple)
    whole = cython.declare(cython.bint)

    def __init__(self, part, local, key_g, new, whole):
        self.part = part
        self.local = local
        self.key_g = key_g
        self.new = new
        self.whole = whole


@cython.final
@cython.cclass
class _Subscription:
    """A subscription's parts, join plans, result and pending delta."""

    engine = cython.declare(object)     # the Engine
    client = cython.declare(str)
    sub_id = cython.declare(object)
    patterns = cython.declare(tuple)
    variables = cython.declare(tuple)
    parts = cython.declare(list)
    plans = cython.declare(list)        # per part: the tuple of _Steps its deltas take
    result = cython.declare(dict)       # full key -> values (one per variable, in order)
    added = cython.declare(dict)
    removed = cython.declare(dict)
    full = cython.declare(cython.bint)
    dirty = cython.declare(cython.bint)
    alive = cython.declare(cython.bint)
    fact = cython.declare(object)

    def __init__(self, engine, client, sub_id, patterns):
        self.engine = engine
        self.client = client
        self.sub_id = sub_id
        self.patterns = patterns
        names = set()
        for p in patterns:
            names.update(n for n in analyse(p).names if n is not None)
        self.variables = tuple(sorted(names))
        single = len(patterns) == 1
        self.parts = [_Part(self, i, p, self.variables, single) for i, p in enumerate(patterns)]
        self.plans = [self._plan(part) for part in self.parts]
        self.result = {}
        self.added = {}
        self.removed = {}
        self.full = True
        self.dirty = False
        self.alive = True
        self.fact = Record(SUBSCRIPTION_LABEL, client, sub_id,
                           tuple(pattern_text(p) for p in patterns))

    @cython.cfunc
    def _plan(self, delta: _Part) -> tuple:
        """The order in which a delta of part ``delta`` visits the other parts: greedily
        the part sharing the most already-bound variables (so lookups are selective; the
        first such part on a tie), with the index each step looks up and the variables it
        binds."""
        bound = set(delta.gidx)
        rest = [p for p in self.parts if p is not delta]
        steps = []
        p: _Part
        best: _Part
        while rest:
            best = None
            best_shared = -1
            for p in rest:
                shared = sum([g in bound for g in p.gidx])
                if shared > best_shared:
                    best, best_shared = p, shared
            rest.remove(best)
            local = tuple([i for i, g in enumerate(best.gidx) if g in bound])
            key_g = tuple([best.gidx[i] for i in local])
            new = tuple([(i, g) for i, g in enumerate(best.gidx) if g not in bound])
            whole = len(local) == len(best.gidx)
            steps.append(_Step(best, local, key_g, new, whole))
            bound.update(best.gidx)
        return tuple(steps)

    def attach(self, index):
        # Indexes first (empty tables), then the handlers: each handler's initial "+"
        # events are joined with the parts attached before it, which is exact.
        step: _Step
        part: _Part
        for steps in self.plans:
            for step in steps:
                if step.local and not step.whole:
                    step.part.index_on(step.local)
        for part in self.parts:
            part.handle = index.add_handler(self.patterns[part.number], part.on_event)

    def detach(self, index):
        part: _Part
        for part in self.parts:
            if part.handle is not None:
                index.remove_handler(part.handle)
                part.handle = None

    @cython.ccall
    def mark(self):
        if not self.dirty:
            self.dirty = True
            cython.cast(Engine, self.engine)._dirty.append(self)

    @cython.cfunc
    def row_added(self, k: tuple, v: tuple) -> cython.int:
        self.result[k] = v
        if self.removed.pop(k, None) is None:
            self.added[k] = v
        self.mark()
        return 0

    @cython.cfunc
    def row_removed(self, k: tuple, v: tuple) -> cython.int:
        del self.result[k]
        if self.added.pop(k, None) is None:
            self.removed[k] = v
        self.mark()
        return 0

    @cython.cfunc
    def part_changed(self, part: _Part, key: tuple, values: tuple, added: cython.bint) -> cython.int:
        rows: list = self._join(part, key, values)
        if added:
            for k, v in rows:
                self.row_added(k, v)
        else:
            for k, v in rows:
                self.row_removed(k, v)
        return 0

    @cython.cfunc
    def _join(self, part: _Part, key: tuple, values: tuple) -> list:
        n: cython.Py_ssize_t = len(self.variables)
        bkeys: list = [None] * n
        bvals: list = [None] * n
        i: cython.Py_ssize_t
        g: cython.Py_ssize_t
        for i in range(len(part.gidx)):
            g = part.gidx[i]
            bkeys[g] = key[i]
            bvals[g] = values[i]
        out: list = []
        self._extend(self.plans[part.number], 0, bkeys, bvals, out)
        return out

    @cython.cfunc
    def _extend(self, steps: tuple, depth: cython.Py_ssize_t, bkeys: list, bvals: list,
                out: list) -> cython.int:
        if depth == len(steps):
            out.append((tuple(bkeys), tuple(bvals)))
            return 0
        step: _Step = steps[depth]
        part: _Part = step.part
        subkey = tuple([bkeys[g] for g in step.key_g])
        if step.whole:
            if subkey in part.rows:
                self._extend(steps, depth + 1, bkeys, bvals, out)
            return 0
        # Nothing changes the tables while a join runs, so they are iterated in place.
        rkey: tuple
        rvals: tuple
        if step.local:
            bucket = cython.cast(dict, part.indexes[step.local]).get(subkey)
            if not bucket:
                return 0
            for rkey_, rvals_ in cython.cast(dict, bucket).items():
                rkey = rkey_
                rvals = rvals_
                self._bind(step.new, rkey, rvals, bkeys, bvals)
                self._extend(steps, depth + 1, bkeys, bvals, out)
        else:
            for rkey_, entry in part.rows.items():
                rkey = rkey_
                rvals = cython.cast(list, entry)[0]
                self._bind(step.new, rkey, rvals, bkeys, bvals)
                self._extend(steps, depth + 1, bkeys, bvals, out)
        for _i, g in step.new:
            bkeys[g] = None
            bvals[g] = None
        return 0

    @cython.cfunc
    @cython.inline
    def _bind(self, new: tuple, rkey: tuple, rvals: tuple, bkeys: list, bvals: list) -> cython.int:
        i: cython.Py_ssize_t
        g: cython.Py_ssize_t
        for i, g in new:
            bkeys[g] = rkey[i]
            bvals[g] = rvals[i]
        return 0

    @cython.ccall
    def take(self):
        """The pending notification (a :class:`Change`) or None; resets the delta."""
        if self.full:
            self.full = False
            self.added.clear()
            self.removed.clear()
            return Change(self.client, self.sub_id, self.variables, True,
                          [v for v in self.result.values()], [])
        if not self.added and not self.removed:
            return None
        change = Change(self.client, self.sub_id, self.variables, False,
                        [v for v in self.added.values()], [v for v in self.removed.values()])
        self.added = {}
        self.removed = {}
        return change

    def rows(self):
        """The current result as dicts, in the deterministic order (by the canonical
        encoding of each row's tuple of values)."""
        rows = sorted(self.result.values(), key=encode)
        return [dict(zip(self.variables, r)) for r in rows]


@cython.final
@cython.cclass
class _Client:
    name = cython.declare(str)
    claims = cython.declare(dict)   # canonical encoding -> value
    subs = cython.declare(dict)     # sub id -> _Subscription

    def __init__(self, name):
        self.name = name
        self.claims = {}
        self.subs = {}


@cython.cfunc
@cython.inline
def _is_pattern(term: object) -> cython.bint:
    # has_pattern, without the call for the values claims usually are.
    t = type(term)
    if t is str or t is int or t is float or t is bytes or term is None or t is bool:
        return False
    if t is Record:
        return term.is_pattern
    return has_pattern(term)


@cython.final
@cython.cclass
class Engine:
    """A fact table shared by named clients, with incremental join subscriptions.

    Not thread-safe: one thread drives it (the broker's). Changes to subscriptions are
    collected and handed out by :meth:`take_changes`.
    """

    index = cython.declare(object, visibility="readonly")
    clients = cython.declare(dict, visibility="readonly")
    _dirty = cython.declare(list)   # the subscriptions changed since take_changes, in that order

    def __init__(self):
        self.index = Index()
        self.clients = {}
        self._dirty = []

    # ------------------------------------------------------------------ clients

    @cython.ccall
    def client(self, name):
        """The state of client ``name``, made on first use."""
        c = self.clients.get(name)
        if c is None:
            c = self.clients[name] = _Client(name)
        return c

    def has_client(self, name):
        return name in self.clients

    def claims_of(self, name):
        """The values client ``name`` claims (a list, in no particular order)."""
        c = self.clients.get(name)
        return [] if c is None else list(cython.cast(_Client, c).claims.values())

    def subscriptions_of(self, name):
        """``{sub_id: patterns}`` of client ``name``."""
        c = self.clients.get(name)
        if c is None:
            return {}
        return {i: cython.cast(_Subscription, s).patterns
                for i, s in cython.cast(_Client, c).subs.items()}

    # ------------------------------------------------------------------ batches

    def apply(self, name, items):
        """Apply one atomic batch of client ``name``: a sequence of item tuples
        (``(CLAIM, encoding, value)``, ``(RETRACT, pattern_or_value)``, ``(RETRACT, value,
        encoding)``, ``(SUBSCRIBE, sub_id, patterns)``, ``(UNSUBSCRIBE, sub_id)``), in order.

        Raises :class:`BatchRejectedError` (with ``.item``) and changes nothing when an
        item is malformed: an unknown kind, a claim of a pattern or non-value, a retract
        or subscription pattern that is not a pattern, a subscription id in use or an
        empty subscription, an unsubscribe of an unknown id."""
        self.check(name, items)
        c: _Client = self.client(name)
        for item in items:
            kind = item[0]
            if kind == CLAIM:
                self._claim(c, item[1], item[2])
            elif kind == RETRACT:
                self._retract(c, item[1], item[2] if len(item) == 3 else None)
            elif kind == SUBSCRIBE:
                self._subscribe(c, item[1], item[2])
            else:
                self._unsubscribe(c, item[1])

    @cython.ccall
    def check(self, name, items):
        """Raise :class:`BatchRejectedError` if :meth:`apply` would refuse ``items``."""
        c = self.clients.get(name)
        subs = None     # the subscription ids as the batch goes, made at its first (un)subscribe
        n: cython.Py_ssize_t
        for n, item in enumerate(items):
            try:
                kind = item[0]
                if kind == CLAIM:
                    if len(item) != 3 or type(item[1]) is not bytes:
                        raise ValueError("a claim is (CLAIM, encoding, value)")
                    if _is_pattern(item[2]):
                        raise ValueError("a claim must be a value, not a pattern")
                elif kind == RETRACT:
                    if len(item) == 3:
                        if type(item[2]) is not bytes or _is_pattern(item[1]):
                            raise ValueError("a retract of a value with its encoding is "
                                             "(RETRACT, value, encoding)")
                    elif len(item) != 2:
                        raise ValueError("a retract is (RETRACT, pattern)")
                    analyse(item[1])
                elif kind == SUBSCRIBE:
                    if subs is None:
                        subs = set() if c is None else set(cython.cast(_Client, c).subs)
                    sub_id, patterns = item[1], item[2]
                    if type(sub_id) is not int or sub_id < 0:
                        raise ValueError(f"a subscription id is an int >= 0, got {sub_id!r}")
                    if sub_id in subs:
                        raise ValueError(f"subscription id {sub_id} is already in use")
                    if not patterns:
                        raise ValueError("a subscription needs at least one pattern")
                    for p in patterns:
                        analyse(p)
                    subs.add(sub_id)
                elif kind == UNSUBSCRIBE:
                    if subs is None:
                        subs = set() if c is None else set(cython.cast(_Client, c).subs)
                    if item[1] not in subs:
                        raise ValueError(f"no subscription {item[1]!r} to unsubscribe")
                    subs.discard(item[1])
                else:
                    raise ValueError(f"unknown item kind {kind!r}")
            except (ValueError, TypeError, IndexError, InvalidValueError) as exc:
                raise BatchRejectedError(f"item {n} ({_describe(item)}): {exc}", n) from None

    @cython.cfunc
    def _claim(self, c: _Client, key: object, value: object) -> cython.int:
        if key in c.claims:
            return 0
        c.claims[key] = value
        self.index.add_assertion(value)
        return 0

    @cython.cfunc
    def _retract(self, c: _Client, pattern: object, key: object) -> cython.int:
        if key is not None or not has_pattern(pattern):
            if key is None:
                key = encode(pattern)
            value = c.claims.pop(key, _MISSING)
            if value is not _MISSING:
                self.index.remove_assertion(value)
            return 0
        gone = [k for k, v in c.claims.items() if match(pattern, v)]
        if gone:
            values = [c.claims.pop(k) for k in gone]
            self.index.patch(removals=values)
        return 0

    @cython.cfunc
    def _subscribe(self, c: _Client, sub_id: object, patterns: object) -> cython.int:
        sub = _Subscription(self, c.name, sub_id, tuple(patterns))
        c.subs[sub_id] = sub
        sub.mark()
        sub.attach(self.index)
        self.index.add_assertion(sub.fact)
        return 0

    @cython.cfunc
    def _unsubscribe(self, c: _Client, sub_id: object) -> cython.int:
        found = c.subs.pop(sub_id, None)
        if found is None:
            raise UnknownSubscriptionError(f"client {c.name!r} has no subscription {sub_id}")
        sub: _Subscription = found
        sub.detach(self.index)
        sub.alive = False
        self.index.remove_assertion(sub.fact)
        return 0

    # ------------------------------------------------------------------ whole-client changes

    def replace(self, name, claims, subscriptions):
        """Make client ``name``'s claims exactly ``claims`` (``{encoding: value}``) and its
        subscriptions exactly ``subscriptions`` (``{sub_id: patterns}``), changing only
        what differs: a resync after a broker restart or lost notifications. Every
        subscription of the client gets a ``full`` notification next. Raises
        :class:`BatchRejectedError` (nothing changed) for a bad pattern or claim."""
        items = [(SUBSCRIBE, i, tuple(p)) for i, p in subscriptions.items()]
        for n, (k, v) in enumerate(claims.items()):
            if type(k) is not bytes or has_pattern(v):
                raise BatchRejectedError(f"claim {n} ({_describe((CLAIM, k, v))}) is not a value", n)
        c: _Client = self.client(name)
        sub: _Subscription
        keep = {i for i, s in c.subs.items()
                if i in subscriptions
                and _same_patterns(cython.cast(_Subscription, s).patterns, tuple(subscriptions[i]))}
        self.check(name, [(UNSUBSCRIBE, i) for i in c.subs if i not in keep]
                   + [it for it in items if it[1] not in keep])
        for i in [i for i in c.subs if i not in keep]:
            self._unsubscribe(c, i)
        additions = [v for k, v in claims.items() if k not in c.claims]
        removals = [v for k, v in c.claims.items() if k not in claims]
        c.claims = dict(claims)
        if additions or removals:
            self.index.patch(additions, removals)
        for i in keep:
            sub = c.subs[i]
            sub.full = True
            sub.mark()
        for it in items:
            if it[1] not in keep:
                self._subscribe(c, it[1], it[2])

    def drop(self, name):
        """Forget client ``name``: its subscriptions end (no more notifications to it) and
        all its claims are retracted at once (others see them go in one change)."""
        found = self.clients.pop(name, None)
        if found is None:
            return
        c: _Client = found
        sub: _Subscription
        for sub in c.subs.values():
            sub.detach(self.index)
            sub.alive = False
        removals = list(c.claims.values()) + [cython.cast(_Subscription, s).fact
                                              for s in c.subs.values()]
        c.subs.clear()
        c.claims.clear()
        if removals:
            self.index.patch(removals=removals)

    def resync(self, name):
        """Make every subscription of ``name`` send its whole result next."""
        found = self.clients.get(name)
        sub: _Subscription
        if found is not None:
            for sub in cython.cast(_Client, found).subs.values():
                sub.full = True
                sub.mark()

    def revoke(self, patterns, owner=None):
        """Retract, on behalf of their owners, the claims matching any of ``patterns``
        (all clients', or only client ``owner``'s). Returns ``{client: [values]}``."""
        out = {}
        clients = self.clients.values() if owner is None else (
            [self.clients[owner]] if owner in self.clients else [])
        c: _Client
        for c in list(clients):
            gone = [k for k, v in c.claims.items() if any(match(p, v) for p in patterns)]
            if gone:
                values = [c.claims.pop(k) for k in gone]
                out[c.name] = values
                self.index.patch(removals=values)
        return out

    # ------------------------------------------------------------------ reading

    def facts(self, pattern=None):
        """The facts matching ``pattern`` (all when None), sorted by their encoding."""
        if pattern is None:
            found = self.index.assertions()
        else:
            found = []
            handle = self.index.add_handler(capture(pattern), lambda ev, caps: found.append(caps[0]))
            self.index.remove_handler(handle)
            if _repeats_names(pattern):
                found = [v for v in found if match(pattern, v)]
        return sorted(found, key=encode)

    def owners(self, value):
        """The clients claiming ``value`` (sorted names)."""
        key = encode(value)
        return sorted(cython.cast(_Client, c).name for c in self.clients.values()
                      if key in cython.cast(_Client, c).claims)

    def result(self, name, sub_id):
        """The current result of a subscription: a list of dicts, deterministic order."""
        return cython.cast(_Client, self.clients[name]).subs[sub_id].rows()

    def take_changes(self):
        """The pending notifications (:class:`Change`), in the order the subscriptions
        changed; each subscription at most once."""
        dirty = self._dirty
        self._dirty = []
        out = []
        sub: _Subscription
        for sub in dirty:
            sub.dirty = False
            if sub.alive:
                change = sub.take()
                if change is not None:
                    out.append(change)
        return out

    def has_changes(self):
        return bool(self._dirty)


_MISSING = cython.declare(object, object())


def _same_patterns(a, b):
    return len(a) == len(b) and all(pattern_text(x) == pattern_text(y) for x, y in zip(a, b))


def _repeats_names(pattern):
    names = [n for n in analyse(pattern).names if n is not None]
    return len(names) != len(set(names))


def _describe(item):
    try:
        kind = item[0]
    except Exception:
        return repr(item)[:80]
    if kind == CLAIM and len(item) == 3:
        text = _text(item[2])
    elif (kind in (RETRACT, UNSUBSCRIBE) and len(item) == 2) or (kind == RETRACT and len(item) == 3):
        text = _text(item[1])
    elif kind == SUBSCRIBE and len(item) == 3:
        try:
            text = f"{item[1]!r}, " + ", ".join(_text(p) for p in item[2])
        except TypeError:
            text = repr(item[2])
    else:
        return repr(item)[:80]
    return f"{kind} {text}"[:200]


def _text(term):
    try:
        return pattern_text(term)
    except Exception:
        return repr(term)
