"""a0py configurations as the protocol's parameters (``parameters`` and
``parametersSubscribe``).

Every cfg topic the view watches (``T.cfg``, a JSON document) gives
parameters named ``T.path.to.field``: an object is flattened, one parameter a
field, down to the values that are not objects (numbers, booleans, strings,
arrays) and to the objects that cannot be flattened (empty ones, ones with a
key that is empty or holds a ``.``), which are parameters of their own. A
document that is not an object is one parameter named ``T``. A ``null`` is no
value: such a parameter is left out.

* ``getParameters`` reads them as the view last saw them (the cfg watcher
  tells each new version); no name: all of them.
* ``setParameters`` needs ``--allow-set`` for the cfg topic: the values of one
  request are written to each cfg topic as one RFC 7386 merge patch, atomically
  with every other writer (:meth:`a0py.Cfg.mergepatch`); a parameter sent
  without a value is removed (its patch is ``null``); an object value is merged
  into the object there. The reply holds the new values.
* ``subscribeParameterUpdates``: each new version of a configuration sends the
  subscribed parameters that changed (a removed one without a value).

Types survive: JSON keeps integers, floats (a float is sent with the
``float64`` hint, so ``1.0`` stays a float), booleans, strings, arrays and
objects; a ``float64`` value set as ``2`` is written as ``2.0``. JSON has no
bytes: a ``byte_array`` is written as its base64 text, and reported as a
byte array by this view while it runs (a configuration holds no type of its
own).

Names resolve to the cfg topic with the longest name that is a prefix of
them followed by ``.`` (topic names may hold dots).
"""

import asyncio
import base64
import binascii
import json
import logging

from ..errors import A0Error
from ..proto.cfg import Cfg
from ..proto.topic import Topic
from . import _capabilities as C
from . import _protocol as P

__all__ = ["Parameters", "flatten"]

_log = logging.getLogger("a0py.view")


def flatten(topic, doc):
    """{parameter name: value} of configuration ``doc`` of cfg ``topic``
    (``None`` values left out)."""
    out = {}
    _flatten(topic, doc, out)
    return out


def _flattens(value):
    return isinstance(value, dict) and value and all(isinstance(k, str) and k and "." not in k for k in value)


def _flatten(prefix, value, out):
    if _flattens(value):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif value is not None:
        out[prefix] = value


class Parameters:
    """The parameters of the cfg topics under ``root`` that the live source
    watches; ``access`` says which may be set. The source tells
    :meth:`changed` and :meth:`removed`; :meth:`install` offers the
    capability on ``hub``."""

    def __init__(self, hub, access, root):
        self.hub = hub
        self.access = access
        self.root = root
        self.params = {}  # cfg topic -> {name: value}
        self.byte_arrays = set()  # names this view wrote as byte arrays (base64 text in the document)
        self.subscribed = {}  # client -> set of names
        self._writers = {}  # cfg topic -> Cfg, made on the first set

    def install(self):
        self.hub.offer("parameters", {C.GetParameters: self.get, C.SetParameters: self.set})
        self.hub.offer("parametersSubscribe", {C.ParameterSubscription: self.subscription})
        self.hub.detach_hooks.append(lambda client: self.subscribed.pop(client, None))

    # -- what the source tells

    def changed(self, topic, pkt):
        """A new version (a packet) of cfg ``topic``."""
        try:
            doc = json.loads(bytes(pkt.payload))
        except (ValueError, RecursionError):
            _log.info("view: the configuration of %r is not JSON: it has no parameters", topic)
            doc = None
        self._update(topic, flatten(topic, doc) if doc is not None else {})

    def removed(self, topic):
        """Cfg ``topic`` is gone: so are its parameters."""
        self._update(topic, {})
        self.params.pop(topic, None)
        writer = self._writers.pop(topic, None)
        if writer is not None:
            writer.close()

    def _update(self, topic, new):
        old = self.params.get(topic, {})
        self.params[topic] = new
        changes = [(n, v, self._type(n, v)) for n, v in new.items() if n not in old or not _same(old[n], v)]
        changes += [(n, C.UNSET, None) for n in old if n not in new]
        if not changes or not self.subscribed:
            return
        for client, names in self.subscribed.items():
            mine = [p for p in changes if p[0] in names]
            if mine:
                client.put_control(C.parameter_values(mine))

    # -- values

    def _type(self, name, value):
        if name in self.byte_arrays and isinstance(value, str):
            return C.BYTE_ARRAY
        return C.type_of(value)

    def _value(self, name, value):
        """The (name, value, type) triple to send for a stored value."""
        kind = self._type(name, value)
        if kind == C.BYTE_ARRAY:
            try:
                value = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):  # rewritten since as text: a string again
                self.byte_arrays.discard(name)
                kind = C.type_of(value)
        return name, value, kind

    def all(self):
        return [self._value(n, v) for params in self.params.values() for n, v in params.items()]

    def lookup(self, name):
        """(cfg topic, [keys]) of parameter ``name``, or None if no watched cfg topic holds it."""
        best = None
        for topic in self.params:
            if (name == topic or name.startswith(topic + ".")) and (best is None or len(topic) > len(best)):
                best = topic
        if best is None:
            return None
        rest = name[len(best) + 1:]
        return best, rest.split(".") if rest else []

    # -- requests

    def get(self, client, req):
        if not req.names:
            found = self.all()
        else:
            found = []
            for name in req.names:
                where = self.lookup(name)
                if where is not None and name in self.params[where[0]]:
                    found.append(self._value(name, self.params[where[0]][name]))
        client.put_control(C.parameter_values(found, req.request_id))

    def set(self, client, req):
        patches = {}
        errors = []
        for name, value, kind in req.parameters:
            where = self.lookup(name)
            if where is None:
                errors.append(f"{name!r}: no configuration of this view holds it (a parameter is "
                              "CFG_TOPIC.path.to.field)")
                continue
            topic, keys = where
            if not self.access.allows("set", topic):
                errors.append(self.access.refusal("set", topic))
                continue
            if value is not C.UNSET and not C.finite(value):
                errors.append(f"{name!r}: JSON holds no NaN or infinity")
                continue
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii")
            if not keys:
                if value is C.UNSET or topic in patches:
                    errors.append(f"{name!r}: the whole configuration of {topic!r} can be replaced, not "
                                  "removed, and not together with its fields")
                else:
                    patches[topic] = value
                continue
            patch = patches.setdefault(topic, {})
            if not isinstance(patch, dict):
                errors.append(f"{name!r}: set with the whole configuration of {topic!r} in one request")
                continue
            node = patch
            for k in keys[:-1]:
                node = node.setdefault(k, {})
                if not isinstance(node, dict):
                    break
            else:
                node[keys[-1]] = None if value is C.UNSET else value
                if kind == C.BYTE_ARRAY:
                    self.byte_arrays.add(name)
                elif name in self.byte_arrays:
                    self.byte_arrays.discard(name)
                continue
            errors.append(f"{name!r}: set together with a parameter that holds it")
        if errors:
            raise P.ProtocolError("setParameters: nothing was set: " + "; ".join(errors))
        names = [name for name, _v, _k in req.parameters]
        self.hub.loop.create_task(self._write(client, patches, names, req.request_id))

    async def _write(self, client, patches, names, request_id):
        # The cfg's writers' lock may be held by another process for a while: not on the loop.
        try:
            for topic, patch in patches.items():
                writer = self._writers.get(topic)
                if writer is None:
                    writer = self._writers[topic] = Cfg(Topic(topic, root=self.root))
                if isinstance(patch, dict):
                    doc = await asyncio.to_thread(writer.mergepatch, patch)
                else:
                    await asyncio.to_thread(writer.write, patch)
                    doc = patch
                self._update(topic, flatten(topic, doc))
        except (A0Error, ValueError) as e:
            client.put_control(P.status(P.STATUS_ERROR, f"setParameters: {e}"))
            return
        replies = []
        for name in names:
            where = self.lookup(name)
            if where is not None and name in self.params[where[0]]:
                replies.append(self._value(name, self.params[where[0]][name]))
        client.put_control(C.parameter_values(replies, request_id))

    def subscription(self, client, req):
        names = self.subscribed.setdefault(client, set())
        if req.subscribe:
            names.update(req.names)
        else:
            names.difference_update(req.names)
            if not names:
                self.subscribed.pop(client, None)


def _same(a, b):
    # 1 and 1.0 and True are different values here: the type is part of a parameter.
    return type(a) is type(b) and a == b
