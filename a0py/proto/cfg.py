"""Configuration on topics: a JSON document per topic, in its ``cfg`` arena (``T.cfg``).

Every write is a whole document, one packet (payload: UTF-8 JSON, header
``content-type: application/json``); the newest packet is the configuration. Readers
never wait for writers (they copy the newest packet); :class:`CfgWatcher` calls back with
each new version.

Invariants:

* **No lost update.** Every write through :class:`Cfg` (``write``, ``write_if_empty``,
  ``mergepatch``, ``CfgView.set``) holds the topic's *writers' lock* from reading the
  current document to committing the next: the robust lock in the ``cfg`` arena's
  header (its deadman, used for nothing else), so two writers in any processes never
  merge into the same old version, and a writer killed while holding it frees it at
  once. Only our JSON code runs under it, never a user callback.
* A document that is not JSON (written by something else than :class:`Cfg`) is an
  error naming the topic when it must be parsed, never silently replaced.
"""

import builtins
import dataclasses
import json
import re

from .. import _core
from ..errors import A0TimeoutError, ArgumentError, EmptyError
from ._subscriber import ProtocolSubscriber
from .errors import CfgError
from .lifetime import Closeable
from .topic import CFG, Topic

__all__ = ["Cfg", "CfgError", "CfgView", "CfgWatcher", "merge_patch", "resolve_pointer"]

_MISSING = object()
_JSON_HEADERS = (("content-type", "application/json"),)
_INDEX_RE = re.compile(r"0|[1-9][0-9]*")


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch: `target` with `patch` applied (a new object; neither
    argument is changed). An object patch merges member by member (``None`` removes a
    member); any other patch replaces the target."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer_tokens(pointer):
    if not isinstance(pointer, str):
        raise ArgumentError(f"a JSON pointer must be a str like '/a/b/0', not {type(pointer).__name__}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ArgumentError(f"bad JSON pointer {pointer!r}: it must be empty (the whole document) or "
                            "start with '/', e.g. '/motor/speed'")
    tokens = pointer[1:].split("/")
    for t in tokens:
        if re.search(r"~[^01]|~$", t):
            raise ArgumentError(f"bad JSON pointer {pointer!r}: '~' must be followed by 0 or 1 "
                                "('~0' is '~', '~1' is '/')")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _step(node, token, pointer, where):
    if isinstance(node, dict):
        if token not in node:
            raise CfgError(f"{where}: no value at {pointer!r} (no member {token!r})")
        return node[token]
    if isinstance(node, list):
        if not _INDEX_RE.fullmatch(token) or int(token) >= len(node):
            raise CfgError(f"{where}: no value at {pointer!r} ({token!r} is not an index of a "
                           f"list of {len(node)})")
        return node[int(token)]
    raise CfgError(f"{where}: no value at {pointer!r} (reached a {type(node).__name__}, not an "
                   "object or a list)")


def resolve_pointer(doc, pointer, where="document"):
    """The value at RFC 6901 JSON `pointer` in `doc`. Raises CfgError if there is none,
    ArgumentError for a malformed pointer."""
    node = doc
    for token in _pointer_tokens(pointer):
        node = _step(node, token, pointer, where)
    return node


def _set_pointer(doc, pointer, value, where):
    """`doc` with `value` at `pointer` (missing object members on the way are
    created; '-' appends to a list)."""
    tokens = _pointer_tokens(pointer)
    if not tokens:
        return value
    root = doc if isinstance(doc, (dict, list)) else {}
    node = root
    for i, token in enumerate(tokens):
        last = i == len(tokens) - 1
        if isinstance(node, dict):
            if last:
                node[token] = value
            else:
                child = node.get(token)
                if not isinstance(child, (dict, list)):
                    child = node[token] = {}
                node = child
        elif isinstance(node, list):
            if token == "-":
                if not last:
                    raise CfgError(f"{where}: cannot go through '-' (the end of a list) in {pointer!r}")
                node.append(value)
            elif _INDEX_RE.fullmatch(token) and int(token) < len(node):
                if last:
                    node[int(token)] = value
                else:
                    node = node[int(token)]
            else:
                raise CfgError(f"{where}: cannot set {pointer!r}: {token!r} is not an index of a list "
                               f"of {len(node)} (use '-' to append)")
        else:
            raise CfgError(f"{where}: cannot set {pointer!r}: reached a {type(node).__name__}")
    return root


def _encode(obj, what):
    """UTF-8 JSON of `obj`: str/bytes/Packet are JSON text (checked), anything else is
    serialized."""
    if isinstance(obj, _core.Packet):
        obj = obj.payload
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        try:
            json.loads(data)
        except ValueError as e:
            raise ArgumentError(f"{what}: bytes given are not JSON text ({e}); pass the object "
                                "itself to have it serialized") from None
        return data
    if isinstance(obj, str):
        try:
            json.loads(obj)
        except ValueError as e:
            raise ArgumentError(f"{what}: a str is taken as JSON text and this one is not JSON ({e}); "
                                f"to store the string itself pass json.dumps(s)") from None
        return obj.encode("utf-8")
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"{what}: cannot serialize {type(obj).__name__} as JSON ({e})") from None


def _decode(obj, what):
    if isinstance(obj, (str, bytes, bytearray, memoryview, _core.Packet)):
        return json.loads(_encode(obj, what))
    _encode(obj, what)  # the same check as a write, before taking the lock
    return obj


class Cfg(Closeable):
    """The configuration of `topic`.

    ``read()`` gives the newest version (an :class:`a0py.Packet`; ``.json()`` parses it),
    ``read_blocking(timeout=None)`` waits for one if there is none yet, ``write(obj)``
    stores a new version, ``write_if_empty(obj)`` only if there is none,
    ``mergepatch(patch)`` applies an RFC 7386 merge patch to the newest version,
    ``view(pointer, type)`` is a typed view of one value. Writers never lose each other's
    updates (see the module doc). Thread-safe. Raises ArgumentError for a bad topic."""

    def __init__(self, topic):
        self.topic = Topic.of(topic)
        self._label = f"cfg topic {self.topic.name!r}"
        self.arena = self.topic.arena(CFG)
        self._writer = _core.PacketWriter(self.arena, self._label)
        self._writers_lock = _core.Deadman(self.arena)

    def _newest(self):
        return _core.PacketReader(self.arena, 1, 1, self._label).read()

    def read(self):
        """The newest configuration packet. EmptyError if none was written yet."""
        pkt = self._newest()
        if pkt is None:
            raise EmptyError(f"{self._label} has no configuration yet: write one (Cfg.write / "
                             "write_if_empty) or wait for one (Cfg.read_blocking)")
        return pkt

    def read_blocking(self, timeout=None):
        """The newest configuration packet, waiting up to `timeout` seconds (None: no
        limit) for a first one. A0TimeoutError at the timeout; Ctrl-C interrupts."""
        reader = _core.PacketReader(self.arena, 1, 1, self._label)
        try:
            return reader.read_blocking(timeout)
        except A0TimeoutError:
            raise A0TimeoutError(f"{self._label}: no configuration written within {timeout} s") from None

    def value(self, pointer="", default=_MISSING):
        """The newest configuration parsed, or the value at JSON `pointer` in it;
        `default` if there is no configuration or no such value (else EmptyError or
        CfgError)."""
        pkt = self._newest()
        if pkt is None:
            if default is not _MISSING:
                return default
            self.read()
        try:
            return resolve_pointer(self._parse(pkt), pointer, self._label)
        except CfgError:
            if default is _MISSING:
                raise
            return default

    def _parse(self, pkt):
        try:
            return pkt.json()
        except ValueError as e:
            raise CfgError(f"{self._label}: the configuration (seq {pkt.seq}) is not JSON ({e}); "
                           "write a JSON document over it with Cfg.write") from None

    def _locked(self):
        return _WritersLock(self._writers_lock)

    def write(self, obj):
        """Stores `obj` as the new configuration: a JSON-serializable object, or JSON
        text (str, bytes, or an :class:`a0py.Packet`'s payload). Returns its seq.
        ArgumentError if it is not JSON."""
        data = _encode(obj, f"writing {self._label}")
        with self._locked():
            return self._writer.pub(data, _JSON_HEADERS)

    def write_if_empty(self, obj):
        """Stores `obj` (as :meth:`write`) only if the topic has no configuration yet;
        returns whether it did. Atomic: of two processes racing, exactly one writes."""
        data = _encode(obj, f"writing {self._label}")
        with self._locked():
            if self._newest() is not None:
                return False
            self._writer.pub(data, _JSON_HEADERS)
            return True

    def mergepatch(self, patch):
        """Applies RFC 7386 merge patch `patch` (an object, or JSON text) to the newest
        configuration (none counts as ``{}``) and stores the result, atomically with
        respect to every other writer; returns the new document.

        Raises CfgError if the current configuration is not JSON, ArgumentError if the
        patch is not JSON."""
        patch = _decode(patch, f"merge patch for {self._label}")
        with self._locked():
            pkt = self._newest()
            doc = merge_patch(None if pkt is None else self._parse(pkt), patch)
            self._writer.pub(_encode(doc, f"writing {self._label}"), _JSON_HEADERS)
        return doc

    def _set(self, pointer, value):
        _pointer_tokens(pointer)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ArgumentError(f"value for {pointer!r} of {self._label}: cannot serialize "
                                f"{type(value).__name__} as JSON ({e})") from None
        with self._locked():
            pkt = self._newest()
            doc = _set_pointer(None if pkt is None else self._parse(pkt), pointer, value, self._label)
            self._writer.pub(_encode(doc, f"writing {self._label}"), _JSON_HEADERS)
        return doc

    def view(self, pointer="", type=None, default=_MISSING):
        """A :class:`CfgView` of the value at JSON `pointer` (RFC 6901, e.g.
        ``"/motor/max_speed"``), checked against `type` when given. ArgumentError for a
        malformed pointer or a `type` that is not a class."""
        return CfgView(self, pointer, type, default)

    def close(self):
        """Later writes raise ClosedError. Idempotent."""
        self._writer.close()

    def __repr__(self):
        return f"<a0py.Cfg {self.topic.name!r}>"


class _WritersLock:
    __slots__ = ("_dm",)

    def __init__(self, dm):
        self._dm = dm

    def __enter__(self):
        self._dm.take()

    def __exit__(self, *exc):
        self._dm.release()
        return False


def _check_type(value, typ, pointer, where):
    if typ is None:
        return value
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if dataclasses.is_dataclass(typ) and isinstance(value, dict):
        try:
            return typ(**value)
        except TypeError as e:
            raise CfgError(f"{where}: the value at {pointer!r} does not make a {typ.__name__}: {e}") from None
    if typ is int and isinstance(value, bool):
        ok = False
    else:
        ok = isinstance(value, typ)
    if not ok:
        raise CfgError(f"{where}: the value at {pointer!r} is {type(value).__name__} {value!r}, "
                       f"not {typ.__name__}")
    return value


class CfgView:
    """One value of a configuration, by JSON pointer, optionally typed.

    ``get()`` reads it from the newest version (a dataclass `type` is built from an
    object; an int is accepted for float; otherwise the value must be an instance of
    `type`); ``set(value)`` stores a new version with it changed (missing object
    members on the way are created; ``"-"`` appends to a list), atomically as
    :meth:`Cfg.mergepatch`."""

    __slots__ = ("_cache", "cfg", "default", "pointer", "type")

    def __init__(self, cfg, pointer, type=None, default=_MISSING):
        _pointer_tokens(pointer)
        if type is not None and not isinstance(type, builtins.type):
            raise ArgumentError(f"type must be a class (int, float, str, list, dict, a dataclass...), "
                                f"not {type!r}")
        self.cfg = cfg
        self.pointer = pointer
        self.type = type
        self.default = default
        self._cache = (None, None)  # (seq, parsed document)

    def get(self):
        """The value now. EmptyError (no configuration), CfgError (no value there, or
        of the wrong type), unless a default was given for a missing value."""
        cfg = self.cfg
        pkt = cfg._newest()
        if pkt is None:
            if self.default is not _MISSING:
                return self.default
            cfg.read()
        seq, doc = self._cache
        if seq != pkt.seq:
            doc = cfg._parse(pkt)
            self._cache = (pkt.seq, doc)
        try:
            value = resolve_pointer(doc, self.pointer, cfg._label)
        except CfgError:
            if self.default is _MISSING:
                raise
            return self.default
        return _check_type(value, self.type, self.pointer, cfg._label)

    def set(self, value):
        """Stores a new configuration with `value` at this pointer; returns the new
        document. CfgError if the value is of the wrong type or the path cannot hold it."""
        if self.type is not None and not dataclasses.is_dataclass(self.type):
            _check_type(value, self.type, self.pointer, f"setting {self.cfg._label}")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        return self.cfg._set(self.pointer, value)

    def __repr__(self):
        typ = "" if self.type is None else f" {self.type.__name__}"
        return f"<a0py.CfgView {self.cfg.topic.name!r} {self.pointer!r}{typ}>"


class CfgWatcher(ProtocolSubscriber):
    """Calls ``callback(pkt)`` with `topic`'s configuration: the newest version at once
    if there is one, then each newer version (straight to the newest when several came
    at once), on the process's dispatcher thread, until :meth:`close`. ``pkt.json()``
    parses it. Raises ArgumentError for a bad topic or callback."""

    def __init__(self, topic, callback):
        super().__init__(topic, CFG, callback, "most_recent", iter_newest=True, what="cfg watcher")

    def __repr__(self):
        return f"<a0py.CfgWatcher {self.topic.name!r}>"
