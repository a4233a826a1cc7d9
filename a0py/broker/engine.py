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
"""

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
from .terms import has_pattern, match, pattern_text

__all__ = ["CLAIM", "RETRACT", "SUBSCRIBE", "UNSUBSCRIBE", "Change", "Engine"]

# Batch item kinds (the first field of each item tuple given to Engine.apply).
CLAIM = "claim"            # ("claim", encoding, value)
RETRACT = "retract"        # ("retract", pattern_or_value): every match among own claims
SUBSCRIBE = "subscribe"    # ("subscribe", sub_id, patterns)
UNSUBSCRIBE = "unsubscribe"  # ("unsubscribe", sub_id)

SUBSCRIPTION_LABEL = "subscription"


class Change:
    """One notification: subscription ``sub_id`` of ``client`` changed.

    ``variables`` is the sorted tuple of the subscription's variable names; each row is a
    tuple of values in that order. ``full`` means ``added`` is the whole current result
    (the first notification, or after a resync) and ``removed`` is empty."""

    __slots__ = ("added", "client", "full", "removed", "sub_id", "variables")

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


class _Part:
    """One pattern of a subscription: its index handler and its table of bindings."""

    __slots__ = ("equal", "gidx", "handle", "identity", "indexes", "number", "positions",
                 "rows", "single", "sub")

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
        self.positions = tuple(first[n] for n in own)        # capture index of each own var
        # The captures tuple is already the binding when every capture is named once and
        # they come in name order (`temp($room, $t)`): no tuple to build per event.
        self.identity = self.positions == tuple(range(len(names)))
        self.gidx = tuple(variables.index(n) for n in own)   # its index among the sub's vars
        self.equal = tuple(equal)
        self.single = single   # the subscription's only part: its table is the result
        self.rows = {}      # binding key (tuple of value keys) -> [values, count]
        self.indexes = {}   # tuple of local var positions -> {subkey: {row key: values}}
        self.handle = None

    def index_on(self, local):
        """A hash index of the table on the local variable positions ``local`` (made once)."""
        index = self.indexes.get(local)
        if index is None:
            index = {}
            for key, entry in self.rows.items():
                index.setdefault(tuple([key[i] for i in local]), {})[key] = entry[0]
            self.indexes[local] = index
        return index

    def on_event(self, event, caps):
        if self.equal:
            for i, j in self.equal:
                if not canonical_equal(caps[i], caps[j]):
                    return
        values = caps if self.identity else tuple([caps[i] for i in self.positions])
        key = tuple(map(value_key, values))
        rows = self.rows
        if event == "+":
            entry = rows.get(key)
            if entry is not None:
                entry[1] += 1
                return
            rows[key] = [values, 1]
            if self.single:
                self.sub.row_added(key, values)
                return
            for local, index in self.indexes.items():
                index.setdefault(tuple([key[i] for i in local]), {})[key] = values
            self.sub.part_changed(self, key, values, True)
        elif event == "-":
            entry = rows[key]
            entry[1] -= 1
            if entry[1]:
                return
            del rows[key]
            if self.single:
                self.sub.row_removed(key, values)
                return
            for local, index in self.indexes.items():
                subkey = tuple([key[i] for i in local])
                bucket = index[subkey]
                del bucket[key]
                if not bucket:
                    del index[subkey]
            self.sub.part_changed(self, key, values, False)


class _Subscription:
    """A subscription's parts, join plans, result and pending delta."""

    __slots__ = ("added", "alive", "client", "dirty", "engine", "fact", "full", "parts",
                 "patterns", "plans", "removed", "result", "sub_id", "variables")

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
        self.result = {}    # full key -> values (one per variable, in self.variables order)
        self.added = {}
        self.removed = {}
        self.full = True
        self.dirty = False
        self.alive = True
        self.fact = Record(SUBSCRIPTION_LABEL, client, sub_id,
                           tuple(pattern_text(p) for p in patterns))

    def _plan(self, delta):
        """The order in which a delta of part ``delta`` visits the other parts: greedily
        the part sharing the most already-bound variables (so lookups are selective),
        with the index each step looks up and the variables it binds."""
        bound = set(delta.gidx)
        rest = [p for p in self.parts if p is not delta]
        steps = []
        while rest:
            best = max(rest, key=lambda p: (sum(g in bound for g in p.gidx), -p.number))
            rest.remove(best)
            local = tuple(i for i, g in enumerate(best.gidx) if g in bound)
            key_g = tuple(best.gidx[i] for i in local)
            new = tuple((i, g) for i, g in enumerate(best.gidx) if g not in bound)
            whole = len(local) == len(best.gidx)
            steps.append((best, local, key_g, new, whole))
            bound.update(best.gidx)
        return tuple(steps)

    def attach(self, index):
        # Indexes first (empty tables), then the handlers: each handler's initial "+"
        # events are joined with the parts attached before it, which is exact.
        for steps in self.plans:
            for part, local, _key_g, _new, whole in steps:
                if local and not whole:
                    part.index_on(local)
        for part in self.parts:
            part.handle = index.add_handler(self.patterns[part.number], part.on_event)

    def detach(self, index):
        for part in self.parts:
            if part.handle is not None:
                index.remove_handler(part.handle)
                part.handle = None

    def mark(self):
        if not self.dirty:
            self.dirty = True
            self.engine._dirty.append(self)

    def row_added(self, k, v):
        self.result[k] = v
        if self.removed.pop(k, None) is None:
            self.added[k] = v
        if not self.dirty:
            self.dirty = True
            self.engine._dirty.append(self)

    def row_removed(self, k, v):
        del self.result[k]
        if self.added.pop(k, None) is None:
            self.removed[k] = v
        if not self.dirty:
            self.dirty = True
            self.engine._dirty.append(self)

    def part_changed(self, part, key, values, added):
        rows = self._join(part, key, values)
        if added:
            for k, v in rows:
                self.result[k] = v
                if self.removed.pop(k, None) is None:
                    self.added[k] = v
        else:
            for k, v in rows:
                del self.result[k]
                if self.added.pop(k, None) is None:
                    self.removed[k] = v
        if rows:
            self.mark()

    def _join(self, part, key, values):
        n = len(self.variables)
        bkeys = [None] * n
        bvals = [None] * n
        for i, g in enumerate(part.gidx):
            bkeys[g] = key[i]
            bvals[g] = values[i]
        out = []
        self._extend(self.plans[part.number], 0, bkeys, bvals, out)
        return out

    def _extend(self, steps, depth, bkeys, bvals, out):
        if depth == len(steps):
            out.append((tuple(bkeys), tuple(bvals)))
            return
        part, local, key_g, new, whole = steps[depth]
        subkey = tuple([bkeys[g] for g in key_g])
        if whole:
            entry = part.rows.get(subkey)
            if entry is not None:
                self._extend(steps, depth + 1, bkeys, bvals, out)
            return
        if local:
            bucket = part.indexes[local].get(subkey)
            if not bucket:
                return
            items = bucket.items()
        else:
            items = [(k, e[0]) for k, e in part.rows.items()]
        for rkey, rvals in items:
            for i, g in new:
                bkeys[g] = rkey[i]
                bvals[g] = rvals[i]
            self._extend(steps, depth + 1, bkeys, bvals, out)
        for _i, g in new:
            bkeys[g] = None
            bvals[g] = None

    def take(self):
        """The pending notification (a :class:`Change`) or None; resets the delta."""
        if self.full:
            self.full = False
            self.added.clear()
            self.removed.clear()
            return Change(self.client, self.sub_id, self.variables, True,
                          list(self.result.values()), [])
        if not self.added and not self.removed:
            return None
        change = Change(self.client, self.sub_id, self.variables, False,
                        list(self.added.values()), list(self.removed.values()))
        self.added = {}
        self.removed = {}
        return change

    def rows(self):
        """The current result as dicts, in the deterministic order (by the canonical
        encoding of each row's tuple of values)."""
        rows = sorted(self.result.values(), key=encode)
        return [dict(zip(self.variables, r)) for r in rows]


class _Client:
    __slots__ = ("claims", "name", "subs")

    def __init__(self, name):
        self.name = name
        self.claims = {}   # canonical encoding -> value
        self.subs = {}     # sub id -> _Subscription


class Engine:
    """A fact table shared by named clients, with incremental join subscriptions.

    Not thread-safe: one thread drives it (the broker's). Changes to subscriptions are
    collected and handed out by :meth:`take_changes`.
    """

    def __init__(self):
        self.index = Index()
        self.clients = {}
        self._dirty = []   # the subscriptions changed since take_changes, in that order

    # ------------------------------------------------------------------ clients

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
        return [] if c is None else list(c.claims.values())

    def subscriptions_of(self, name):
        """``{sub_id: patterns}`` of client ``name``."""
        c = self.clients.get(name)
        return {} if c is None else {i: s.patterns for i, s in c.subs.items()}

    # ------------------------------------------------------------------ batches

    def apply(self, name, items):
        """Apply one atomic batch of client ``name``: a sequence of item tuples
        (``(CLAIM, encoding, value)``, ``(RETRACT, pattern_or_value)``,
        ``(SUBSCRIBE, sub_id, patterns)``, ``(UNSUBSCRIBE, sub_id)``), in order.

        Raises :class:`BatchRejectedError` (with ``.item``) and changes nothing when an
        item is malformed: an unknown kind, a claim of a pattern or non-value, a retract
        or subscription pattern that is not a pattern, a subscription id in use or an
        empty subscription, an unsubscribe of an unknown id."""
        self.check(name, items)
        c = self.client(name)
        for item in items:
            kind = item[0]
            if kind == CLAIM:
                self._claim(c, item[1], item[2])
            elif kind == RETRACT:
                self._retract(c, item[1])
            elif kind == SUBSCRIBE:
                self._subscribe(c, item[1], item[2])
            else:
                self._unsubscribe(c, item[1])

    def check(self, name, items):
        """Raise :class:`BatchRejectedError` if :meth:`apply` would refuse ``items``."""
        c = self.clients.get(name)
        subs = set() if c is None else set(c.subs)
        for n, item in enumerate(items):
            try:
                kind = item[0]
                if kind == CLAIM:
                    if len(item) != 3 or type(item[1]) is not bytes:
                        raise ValueError("a claim is (CLAIM, encoding, value)")
                    if has_pattern(item[2]):
                        raise ValueError("a claim must be a value, not a pattern")
                elif kind == RETRACT:
                    if len(item) != 2:
                        raise ValueError("a retract is (RETRACT, pattern)")
                    analyse(item[1])
                elif kind == SUBSCRIBE:
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
                    if item[1] not in subs:
                        raise ValueError(f"no subscription {item[1]!r} to unsubscribe")
                    subs.discard(item[1])
                else:
                    raise ValueError(f"unknown item kind {kind!r}")
            except (ValueError, TypeError, IndexError, InvalidValueError) as exc:
                raise BatchRejectedError(f"item {n} ({_describe(item)}): {exc}", n) from None

    def _claim(self, c, key, value):
        if key in c.claims:
            return
        c.claims[key] = value
        self.index.add_assertion(value)

    def _retract(self, c, pattern):
        if not has_pattern(pattern):
            key = encode(pattern)
            value = c.claims.pop(key, _MISSING)
            if value is not _MISSING:
                self.index.remove_assertion(value)
            return
        gone = [k for k, v in c.claims.items() if match(pattern, v)]
        if gone:
            values = [c.claims.pop(k) for k in gone]
            self.index.patch(removals=values)

    def _subscribe(self, c, sub_id, patterns):
        sub = _Subscription(self, c.name, sub_id, tuple(patterns))
        c.subs[sub_id] = sub
        sub.mark()
        sub.attach(self.index)
        self.index.add_assertion(sub.fact)

    def _unsubscribe(self, c, sub_id):
        sub = c.subs.pop(sub_id, None)
        if sub is None:
            raise UnknownSubscriptionError(f"client {c.name!r} has no subscription {sub_id}")
        sub.detach(self.index)
        sub.alive = False
        self.index.remove_assertion(sub.fact)

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
        c = self.client(name)
        keep = {i for i, s in c.subs.items()
                if i in subscriptions and _same_patterns(s.patterns, tuple(subscriptions[i]))}
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
        c = self.clients.pop(name, None)
        if c is None:
            return
        for sub in c.subs.values():
            sub.detach(self.index)
            sub.alive = False
        removals = list(c.claims.values()) + [s.fact for s in c.subs.values()]
        c.subs.clear()
        c.claims.clear()
        if removals:
            self.index.patch(removals=removals)

    def resync(self, name):
        """Make every subscription of ``name`` send its whole result next."""
        c = self.clients.get(name)
        if c is not None:
            for sub in c.subs.values():
                sub.full = True
                sub.mark()

    def revoke(self, patterns, owner=None):
        """Retract, on behalf of their owners, the claims matching any of ``patterns``
        (all clients', or only client ``owner``'s). Returns ``{client: [values]}``."""
        out = {}
        clients = self.clients.values() if owner is None else (
            [self.clients[owner]] if owner in self.clients else [])
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
        return sorted(c.name for c in self.clients.values() if key in c.claims)

    def result(self, name, sub_id):
        """The current result of a subscription: a list of dicts, deterministic order."""
        return self.clients[name].subs[sub_id].rows()

    def take_changes(self):
        """The pending notifications (:class:`Change`), in the order the subscriptions
        changed; each subscription at most once."""
        dirty, self._dirty = self._dirty, []
        out = []
        for sub in dirty:
            sub.dirty = False
            if sub.alive:
                change = sub.take()
                if change is not None:
                    out.append(change)
        return out

    def has_changes(self):
        return bool(self._dirty)


_MISSING = object()


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
    elif kind in (RETRACT, UNSUBSCRIBE) and len(item) == 2:
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
