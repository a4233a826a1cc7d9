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

__all__ = ["CfgError", "RpcCancelledError", "RpcError", "RpcRemoteError", "RpcServerDiedError"]


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
