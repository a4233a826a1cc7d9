"""The link state of a bridge: which other bridges it reaches now, which it reached and
lost, since when.

Every running bridge declares a Zenoh liveliness token
(:func:`~a0py.bridge.wire.peer_token_key`: its id, host, root and pid) and watches the
others'. Zenoh withdraws a token when its bridge stops, when its process dies (the
connection closes: at once) and when the link goes silent (after the link lease the
other bridge announced: its ``lease``, 10 s by default; see :mod:`~a0py.bridge.config`);
it declares it again when the link comes back.

Invariants:

* A peer is a (host, root) pair, the "machine" a bridge serves: a bridge restarted on
  the same root is the same peer coming back (with a new id), so a peer reported gone is
  reported back when either its token returns or a new bridge of its machine appears.
* A bridge that stops puts a notice (:func:`~a0py.bridge.wire.peer_bye_key`) before it
  withdraws its token: its peers report it ``stopped``, not ``gone`` (a link down or a
  killed process sends no notice). Should the withdrawal overtake the notice, the peer
  is reported gone, then stopped.
* A withdrawal counts only for the peer's current id: the late withdrawal of a bridge
  already replaced by a newer one of the same machine changes nothing.
* Nothing in a token is trusted: a key that does not parse is counted as a bad sample
  and ignored. At most ``_MAX_PEERS`` peers are remembered (the oldest gone ones are
  forgotten first), so a flood of made-up tokens costs bounded memory.
* The Zenoh callback only records; the bridge's reporter publishes the status and logs
  the events (:meth:`PeerWatch.take_events`), never under this module's lock.
"""

import logging
import os
import threading
import time

from .wire import (
    PEER_BYE_CHUNK,
    PEER_CHUNK,
    WireError,
    peer_bye_key,
    peer_of_bye_key,
    peer_of_token_key,
    peer_token_key,
)

__all__ = ["PeerWatch"]

_log = logging.getLogger("a0py.bridge")

_MAX_PEERS = 256
_MAX_EVENTS = 1024
_BYE_S = 0.05


class PeerWatch:
    """Declares this bridge's token and follows the other bridges' under the same
    prefix. ``peers()``: the status's list of peers; ``take_events()``: what changed
    since the last call, oldest first; `on_change` is called (on a Zenoh thread, no
    lock held) after each change."""

    def __init__(self, bridge, on_change=None):
        self._bridge = bridge
        self._on_change = on_change
        self._lock = threading.Lock()
        self._peers = {}   # (host, root) -> dict (the status's entry)
        self._events = []
        root = bridge.root.spec()
        session = bridge.session
        self._token = session.liveliness().declare_token(
            peer_token_key(bridge.prefix, bridge.id, bridge.host, root, os.getpid()))
        self._sub = session.liveliness().declare_subscriber(
            f"{bridge.prefix}/{PEER_CHUNK}/**", self._on_token, history=True)
        self._bye_sub = session.declare_subscriber(f"{bridge.prefix}/{PEER_BYE_CHUNK}/*", self._on_bye)

    def _on_token(self, sample):
        # On a Zenoh thread; nothing in the key is trusted.
        try:
            who, host, root, pid = peer_of_token_key(self._bridge.prefix, str(sample.key_expr))
        except WireError as e:
            self._bridge.bad_samples += 1
            _log.debug("bridge: refused a peer token: %s", e)
            return
        if who == self._bridge.id:
            return
        alive = sample.kind == self._bridge.zenoh.SampleKind.PUT
        now = time.time_ns()
        with self._lock:
            peer = self._peers.get((host, root))
            if alive:
                if peer is not None and peer["id"] == who and peer["state"] == "up":
                    return
                event = "up" if peer is None else "back" if peer["state"] != "up" else "restarted"
                self._peers[host, root] = {"id": who, "host": host, "root": root, "pid": pid,
                                           "state": "up", "since": now}
                self._forget_oldest()
            else:
                if peer is None or peer["id"] != who or peer["state"] != "up":
                    return
                peer.update(state="gone", since=now)
                event = "gone"
            entry = dict(self._peers[host, root], event=event)
            if event == "back":
                entry["gone_s"] = (now - peer["since"]) / 1e9
            if len(self._events) < _MAX_EVENTS:
                self._events.append(entry)
        if self._on_change is not None:
            self._on_change()

    def _on_bye(self, sample):
        # On a Zenoh thread: a peer says it is stopping; nothing in the key is trusted.
        try:
            who = peer_of_bye_key(self._bridge.prefix, str(sample.key_expr))
        except WireError as e:
            self._bridge.bad_samples += 1
            _log.debug("bridge: refused a stop notice: %s", e)
            return
        with self._lock:
            peer = next((p for p in self._peers.values() if p["id"] == who), None)
            if peer is None or peer["state"] == "stopped":
                return
            peer.update(state="stopped", since=time.time_ns())
            if len(self._events) < _MAX_EVENTS:
                self._events.append(dict(peer, event="stopped"))
        if self._on_change is not None:
            self._on_change()

    def _forget_oldest(self):
        while len(self._peers) > _MAX_PEERS:
            gone = [k for k, p in self._peers.items() if p["state"] != "up"]
            victims = gone or list(self._peers)
            del self._peers[min(victims, key=lambda k: self._peers[k]["since"])]

    def peers(self):
        """``[{"id", "host", "root", "pid", "state": "up" | "gone" | "stopped", "since": wall ns}]``,
        sorted by host and root."""
        with self._lock:
            return [dict(p) for _, p in sorted(self._peers.items())]

    def take_events(self):
        """The changes since the last call, oldest first: each a peer's entry plus
        ``event``: ``up`` (first seen), ``gone``, ``stopped`` (its bridge said it was
        stopping), ``back`` (after ``gone_s`` seconds gone or stopped, maybe with a new
        id: its bridge restarted) or ``restarted`` (a new id
        whose predecessor was not seen gone)."""
        with self._lock:
            events, self._events = self._events, []
        return events

    def close(self):
        """Tells the peers this bridge is stopping, then withdraws its token."""
        try:
            self._bridge.session.put(peer_bye_key(self._bridge.prefix, self._bridge.id), b"")
            time.sleep(_BYE_S)  # the notice ahead of the withdrawal (they travel apart)
        except Exception as e:  # the session closed first
            _log.debug("bridge: its stop notice: %s", e)
        for what in (self._bye_sub, self._sub, self._token):
            try:
                what.undeclare()
            except Exception as e:  # the session closed first
                _log.debug("bridge: withdrawing its peer token: %s", e)
