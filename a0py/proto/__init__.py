"""Protocols on topics: topic naming (:mod:`a0py.proto.topic`), the per-process arena
cache (:mod:`a0py.proto.arena_cache`), the backpressured queue on an arena
(:mod:`a0py.proto.queue`), the names of packets (:mod:`a0py.proto.packets`), pub/sub
(:mod:`a0py.proto.pubsub`), RPC and PRPC
(:mod:`a0py.proto.rpc`, :mod:`a0py.proto.prpc`), logs (:mod:`a0py.proto.log`),
configuration (:mod:`a0py.proto.cfg`), deadmen (:mod:`a0py.proto.deadman`) and
discovery (:mod:`a0py.proto.discovery`).

The "sugar" over the compiled binding, as pyzmq's ``sugar`` is over its backend; the
public names are re-exported from :mod:`a0py`.
"""

from .cfg import Cfg, CfgError, CfgView, CfgWatcher
from .deadman import Deadman, DeadmanState, DeadmanToken
from .discovery import Discovery
from .log import Logger, LogHandler, LogLevel, LogListener
from .prpc import PrpcClient, PrpcConnection, PrpcServer
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
from .rpc import (
    RpcCancelledError,
    RpcClient,
    RpcError,
    RpcRemoteError,
    RpcRequest,
    RpcServer,
    RpcServerDiedError,
)
from .topic import PROTOCOLS, Root, Topic, close_arenas, list_topics, unlink_topic

__all__ = [
    "Cfg", "CfgError", "CfgView", "CfgWatcher", "Deadman", "DeadmanState", "DeadmanToken", "Discovery",
    "LogHandler", "LogLevel", "LogListener", "Logger", "PrpcClient", "PrpcConnection",
    "PrpcServer", "RpcCancelledError", "RpcClient", "RpcError", "RpcRemoteError", "RpcRequest",
    "RpcServer", "RpcServerDiedError",
    "INIT_AWAIT_NEW", "INIT_MOST_RECENT", "INIT_OLDEST", "ITER_NEWEST", "ITER_NEXT",
    "PROTOCOLS", "Publisher", "Root", "Subscriber", "SubscriberSync", "Topic", "aio_sub",
    "close_arenas", "list_topics", "unlink_topic",
]
