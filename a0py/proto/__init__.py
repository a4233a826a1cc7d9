"""Protocols on topics: topic naming (:mod:`a0py.proto.topic`), the per-process arena
cache (:mod:`a0py.proto.arena_cache`), the backpressured queue on an arena
(:mod:`a0py.proto.queue`), the names of packets (:mod:`a0py.proto.packets`), pub/sub
(:mod:`a0py.proto.pubsub`), RPC and PRPC
(:mod:`a0py.proto.rpc`, :mod:`a0py.proto.prpc`, both made of the request/reply modules
:mod:`~a0py.proto.reqrep_wire`, :mod:`~a0py.proto.reqrep_server` and
:mod:`~a0py.proto.reqrep_client`), logs (:mod:`a0py.proto.log`), configuration
(:mod:`a0py.proto.cfg`), deadmen (:mod:`a0py.proto.deadman`) and discovery
(:mod:`a0py.proto.discovery`); their errors are in :mod:`a0py.proto.errors`, the
lifetime their objects share (``with`` closes; fork) in :mod:`a0py.proto.lifetime`. Typed
topics: schemas (:mod:`a0py.proto.schema`: :class:`Schema`, :func:`topic_schema`), the
values publishers take and subscribers decode (:mod:`a0py.proto.typed`, with
:mod:`~a0py.proto.arrays`, :mod:`~a0py.proto.json_schema`,
:mod:`~a0py.proto.protobuf_wire` and :mod:`~a0py.proto.protobuf_types`).

The "sugar" over the compiled binding, as pyzmq's ``sugar`` is over its backend; the
public names are re-exported from :mod:`a0py`.
"""

from .cfg import Cfg, CfgView, CfgWatcher
from .deadman import Deadman, DeadmanState, DeadmanToken
from .discovery import Discovery
from .errors import (
    CfgError,
    DecodeError,
    ExtraNotInstalledError,
    RpcCancelledError,
    RpcError,
    RpcRemoteError,
    RpcServerDiedError,
    SchemaConflictError,
    SchemaError,
)
from .log import Logger, LogHandler, LogLevel, LogListener
from .prpc import PrpcClient, PrpcConnection, PrpcServer
from .pubsub import (
    INIT_AWAIT_NEW,
    INIT_FIRST,
    INIT_MOST_RECENT,
    INIT_OLDEST,
    ITER_NEWEST,
    ITER_NEXT,
    Publisher,
    Subscriber,
    SubscriberSync,
    TopicSizeWarning,
    aio_sub,
)
from .rpc import RpcClient, RpcRequest, RpcServer
from .schema import Schema, declare_schema, topic_schema
from .topic import PROTOCOLS, Root, Topic, close_arenas, list_topics, unlink_topic

__all__ = [
    "Cfg", "CfgError", "CfgView", "CfgWatcher", "Deadman", "DeadmanState", "DeadmanToken", "Discovery",
    "LogHandler", "LogLevel", "LogListener", "Logger", "PrpcClient", "PrpcConnection",
    "PrpcServer", "RpcCancelledError", "RpcClient", "RpcError", "RpcRemoteError", "RpcRequest",
    "RpcServer", "RpcServerDiedError",
    "INIT_AWAIT_NEW", "INIT_FIRST", "INIT_MOST_RECENT", "INIT_OLDEST", "ITER_NEWEST", "ITER_NEXT",
    "PROTOCOLS", "Publisher", "Root", "Subscriber", "SubscriberSync", "Topic", "TopicSizeWarning",
    "aio_sub",
    "close_arenas", "list_topics", "unlink_topic",
    "DecodeError", "ExtraNotInstalledError", "Schema", "SchemaConflictError", "SchemaError",
    "declare_schema", "topic_schema",
]
