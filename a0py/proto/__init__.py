"""Protocols on topics: topic naming and the per-process arena cache
(:mod:`a0py.proto.topic`), pub/sub (:mod:`a0py.proto.pubsub`).

The "sugar" over the compiled binding, as pyzmq's ``sugar`` is over its backend; the
public names are re-exported from :mod:`a0py`.
"""

from .pubsub import (
    INIT_AWAIT_NEW,
    INIT_MOST_RECENT,
    INIT_OLDEST,
    ITER_NEWEST,
    ITER_NEXT,
    Publisher,
    Subscriber,
    SubscriberSync,
    aio_sub,
)
from .topic import PROTOCOLS, Root, Topic, close_arenas, list_topics, unlink_topic

__all__ = [
    "INIT_AWAIT_NEW", "INIT_MOST_RECENT", "INIT_OLDEST", "ITER_NEWEST", "ITER_NEXT",
    "PROTOCOLS", "Publisher", "Root", "Subscriber", "SubscriberSync", "Topic", "aio_sub",
    "close_arenas", "list_topics", "unlink_topic",
]
