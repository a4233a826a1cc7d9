"""a0py: shared-memory IPC for Python on Linux.

The transport names (:class:`Arena`, :class:`Transport`, :class:`Frame`) come
from the compiled core ``a0py._core`` and the protocol names (:class:`Publisher`,
:class:`RpcServer`, :class:`Cfg`, :class:`Deadman`...) from ``a0py.proto``; both are
loaded on first use, so pure-Python subpackages (``a0py.dataspace``,
``a0py.actor``) import without touching them. :class:`Deadman` takes a topic name or
an :class:`Arena`.
"""

from . import errors as _errors
from .errors import *  # noqa: F403 - the errors are a0py's names (errors.__all__ lists them)

__version__ = "0.1.0"

_CORE_NAMES = ("Arena", "Transport", "LockedTransport", "Frame", "ReadView", "FramePrefix", "FORMAT_VERSION")
# Packets (compiled) and pub/sub (a0py.proto), also loaded on first use.
_PACKET_NAMES = ("Packet", "Headers", "STANDARD_HEADERS")
_PROTO_NAMES = ("Publisher", "Subscriber", "SubscriberSync", "aio_sub", "Topic", "TopicSizeWarning", "INIT_OLDEST",
                "INIT_MOST_RECENT", "INIT_AWAIT_NEW", "INIT_FIRST", "ITER_NEXT", "ITER_NEWEST",
                # RPC, PRPC, log, cfg, deadman, discovery
                "RpcServer", "RpcClient", "RpcRequest", "RpcError", "RpcCancelledError",
                "RpcServerDiedError", "RpcRemoteError", "PrpcServer", "PrpcClient",
                "PrpcConnection", "Logger", "LogLevel", "LogListener", "LogHandler", "Cfg",
                "CfgWatcher", "CfgView", "CfgError", "Deadman", "DeadmanState", "Discovery",
                # typed topics
                "Schema", "SchemaError", "SchemaConflictError", "DecodeError",
                "ExtraNotInstalledError")

__all__ = [*_errors.__all__, *_CORE_NAMES, *_PACKET_NAMES, *_PROTO_NAMES]


def __getattr__(name):
    if name in _CORE_NAMES or name in _PACKET_NAMES:
        from . import _core

        value = getattr(_core, name)
        globals()[name] = value
        return value
    if name in _PROTO_NAMES:
        from . import proto

        value = getattr(proto, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'a0py' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_CORE_NAMES) | set(_PACKET_NAMES) | set(_PROTO_NAMES))
