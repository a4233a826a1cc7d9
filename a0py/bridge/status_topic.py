"""The status topic of a root's bridge: how the one bridge of its kind that serves a root
(the Zenoh bridge, the ROS 2 bridge) holds the root, and keeps its status there for
``a0py ls``/``info``.

Invariants:

* **One holder a root.** A bridge holds the topic's deadman for its life (in the
  process's keeper thread, so it outlives the thread that started it); a second one
  fails to take it and learns the holder's pid.
* **The newest packet is the whole status**: a JSON object, the bridge's status plus
  ``running``, ``pid`` and ``time_wall`` (ns), written only when the status changed.
* **Nothing read is trusted**: :func:`read_document` gives a JSON object or None; what
  the object must hold is each bridge's reader's to check.
"""

import json
import os
import time

from ..errors import A0Error
from ..proto.deadman import Deadman, keeper_call
from ..proto.pubsub import INIT_MOST_RECENT, Publisher, SubscriberSync
from ..proto.topic import PUBSUB, Topic

__all__ = ["StatusTopic", "read_document"]


class StatusTopic:
    """Topic `name` of `root` as a bridge's status topic: :meth:`hold`,
    :meth:`release`, :meth:`publish`."""

    def __init__(self, name, root):
        self.topic = Topic(name, root=root)
        self.owner_pid = None  # the holder's, when hold() failed
        self._deadman = None
        self._published = None

    def hold(self):
        """Takes the topic's deadman: True, or False when another bridge holds it (its
        pid in ``owner_pid``)."""
        deadman = Deadman(self.topic)
        if not keeper_call(deadman.try_take):
            self.owner_pid = deadman.owner_pid
            return False
        self._deadman = deadman
        self._published = None
        return True

    def release(self):
        """Lets the deadman go (idempotent)."""
        deadman, self._deadman = self._deadman, None
        if deadman is not None:
            keeper_call(deadman.release)

    def publish(self, status, running=True):
        """Writes `status` (a dict of JSON values) with ``running``, ``pid`` and
        ``time_wall`` if it changed since it was last written. Raises A0Error (the topic
        cannot be written: a full disk, a topic of another kind)."""
        status = dict(status, running=running)
        if status == self._published:
            return
        doc = dict(status, pid=os.getpid(), time_wall=time.time_ns())
        with Publisher(self.topic) as pub:
            pub.pub(json.dumps(doc, sort_keys=True))
        self._published = status


def read_document(name, root):
    """The JSON object the newest packet of topic `name` of `root` holds, or None (no
    such topic, no packet, not a JSON object). Creates nothing."""
    topic = Topic(name, root=root)
    if not topic.exists(PUBSUB):
        return None
    try:
        with SubscriberSync(topic, init=INIT_MOST_RECENT) as sub:
            pkt = sub.read()
            doc = None if pkt is None else json.loads(bytes(pkt.payload))
    except (A0Error, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
