"""The exceptions the protocol layer adds to those of the core (:mod:`a0py.errors`);
each is a subclass of :class:`a0py.A0Error`, and each is re-exported from
:mod:`a0py.proto` and :mod:`a0py`.

The protocols also raise the core's own errors where they mean the same thing:
:class:`a0py.ArgumentError` for a bad argument, :class:`a0py.A0TimeoutError` for a
wait that ran out, :class:`a0py.LockError` for a second RPC server on a topic,
:class:`a0py.EmptyError` for a configuration not yet written.
"""

import concurrent.futures

from ..errors import A0Error

__all__ = ["CfgError", "DecodeError", "ExtraNotInstalledError", "RpcCancelledError", "RpcError",
           "RpcRemoteError", "RpcServerDiedError", "SchemaConflictError", "SchemaError"]


class RpcError(A0Error):
    """Base class of the errors of an RPC or PRPC call."""


class RpcCancelledError(RpcError, concurrent.futures.CancelledError):
    """The request was cancelled (by :meth:`a0py.RpcClient.cancel`, from any thread or
    process) before its reply came."""


class RpcServerDiedError(RpcError):
    """The server died (or was replaced by a new one) after it accepted the request and
    before it replied. The request is not run again: it may have been partly done."""


class RpcRemoteError(RpcError):
    """The server could not answer: its handler raised, or it was closed while the
    request was in progress. The message carries the server's explanation."""


class CfgError(A0Error, ValueError):
    """A configuration is not what was asked of it: not JSON, no value at a JSON
    pointer, a value of the wrong type for a typed view."""


class SchemaError(A0Error, ValueError):
    """A typed topic's schema is not usable, or a value does not match it: a schema
    whose data does not parse as its encoding says (or lacks the type it names), a
    value of another type than the topic's schema (a protobuf message of another
    type, an array on a JSON topic...), an encoding a0py does not decode. The message
    names the topic."""


class SchemaConflictError(SchemaError):
    """A publisher declared a schema for a topic that already has another one (the
    first declaration stands until the topic is removed)."""


class DecodeError(A0Error, ValueError):
    """A packet's payload does not decode with its topic's schema (not the protobuf
    message, JSON or array its schema says). The message names the topic and seq."""


class ExtraNotInstalledError(A0Error, ImportError):
    """A typed value needs a library that is not installed (numpy for arrays,
    protobuf for protobuf messages...). The message names the package and the a0py
    extra that brings it (``pip install 'a0py[typed]'``)."""
