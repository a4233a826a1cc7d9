"""RPC on topics: :class:`RpcServer` answers requests, :class:`RpcClient` sends them.

A topic's requests, replies and control packets share its ``rpc`` arena (``T.rpc``).
The packets and the rules are those of request/reply, shared with PRPC (as AlephZero's
``protocol_util``): the wire in :mod:`a0py.proto.reqrep_wire`, the server side in
:mod:`a0py.proto.reqrep_server`, the client side in :mod:`a0py.proto.reqrep_client`.
In short: one live server per topic (held by the arena's deadman); start order does
not matter (waiting requests are served when a server starts, if younger than
``max_age``); a request a server accepted is never run twice (its client gets
:class:`RpcServerDiedError` if the server dies); a waiting client never hangs (it
watches the server's deadman, and gives up after ``wait_for_server`` seconds with no
server); no user code runs under a lock.
"""

import asyncio

from ..errors import ArgumentError
from .errors import RpcCancelledError, RpcError, RpcRemoteError, RpcServerDiedError
from .reqrep_client import RequestClient
from .reqrep_server import RequestServer, ServedRequest
from .reqrep_wire import DEFAULT_MAX_AGE_S, check_seconds, json_bytes, server_pid, user_headers
from .topic import RPC

__all__ = [
    "RpcCancelledError", "RpcClient", "RpcError", "RpcRemoteError", "RpcRequest", "RpcServer",
    "RpcServerDiedError", "server_pid",
]


class RpcRequest(ServedRequest):
    """A request as a server's handler gets it: ``pkt`` (the request
    :class:`a0py.Packet`), ``id``, ``cancelled`` (the client gave up), ``done``, and
    :meth:`reply`. Reply once, from any thread, now or later."""

    __slots__ = ()

    def reply(self, msg, headers=None):
        """Sends the reply: bytes, a bytes-like object, str or an :class:`a0py.Packet`
        (its headers are kept), plus `headers`. Returns the reply's seq, or None if the
        client cancelled the request or the server was closed (nothing is written then).

        Raises RpcError if the request was answered already, ArgumentError for a bad
        message or a reserved header (``a0_rpc_*``)."""
        return self._answer(msg, headers, True)

    def reply_json(self, obj, headers=None):
        """Replies with ``json.dumps(obj)`` (UTF-8); see :meth:`reply`."""
        return self.reply(json_bytes(obj), [("content-type", "application/json"),
                                            *user_headers(headers)])


class RpcServer(RequestServer):
    """Serves `topic`'s requests: ``on_request(req)`` is called for each, with
    ``req.pkt`` the request packet; it answers with ``req.reply(msg)``, then or later,
    from any thread.

    ``on_cancel(request_id)`` (optional) is told when a client gives up a request in
    progress (its reply is then dropped). Requests that were waiting when the server
    started are served, oldest first, if younger than `max_age` seconds (None: any age);
    older ones get an "expired" error reply. Handlers run on the process's dispatcher
    thread (keep them short, or reply later from a thread of yours), or in `executor`
    (a :class:`concurrent.futures.Executor`) if given. A handler that raises before
    replying sends the client an error (:class:`RpcRemoteError`).

    Only one live server per topic: LockError if another process or object serves it.
    Raises ArgumentError for a bad topic, handler, max_age or executor."""

    protocol = RPC
    kind = "RPC"
    request_class = RpcRequest
    streaming = False

    def __init__(self, topic, on_request, on_cancel=None, *, max_age=DEFAULT_MAX_AGE_S, executor=None):
        super().__init__(topic, on_request, on_cancel, max_age=max_age, executor=executor)


class RpcClient(RequestClient):
    """Sends requests to `topic`'s :class:`RpcServer` and gets the replies meant for
    it (each request has an id; replies name it).

    ``send_blocking(msg, timeout=None)`` waits for the reply; ``send(msg, callback=None,
    timeout=None)`` returns a :class:`concurrent.futures.Future` (``future.request_id``)
    and calls ``callback(reply)`` on the dispatcher thread; ``await
    send_async(msg, timeout=None)`` in asyncio; ``cancel(request_id)``.

    A request sent before the server starts waits for it: with no live server for
    `wait_for_server` seconds (None: no limit but the call's timeout) the call fails
    with A0TimeoutError naming the topic. Raises ArgumentError for a bad topic."""

    protocol = RPC
    streaming = False

    def send_blocking(self, msg, timeout=None, headers=None):
        """Sends `msg` (bytes, bytes-like, str or an :class:`a0py.Packet`, whose id then
        is the request id) and returns the reply packet.

        Raises A0TimeoutError (no reply within `timeout` seconds, or no live server for
        `wait_for_server` seconds), RpcServerDiedError (the server died handling it),
        RpcRemoteError (the handler raised; the server closed), RpcCancelledError
        (cancelled from elsewhere), LockError (called from a handler of a server of this
        process that runs on the dispatcher), ArgumentError (bad message, header or
        timeout). Ctrl-C interrupts it (and cancels the request)."""
        timeout = check_seconds(timeout, "timeout")
        for reply in self._iter_replies(msg, timeout, headers):
            return reply
        raise AssertionError("unreachable: the reply loop ended without a reply")

    def send_json(self, obj, timeout=None, headers=None):
        """``send_blocking`` of ``json.dumps(obj)``; returns the reply's payload parsed
        as JSON (ValueError if it is not JSON)."""
        hdrs = [("content-type", "application/json"), *user_headers(headers)]
        return self.send_blocking(json_bytes(obj), timeout, hdrs).json()

    def send(self, msg, callback=None, timeout=None, headers=None):
        """Sends `msg` and returns a Future of the reply packet at once. ``callback(reply)``
        (optional) is called on the dispatcher thread when it comes. The future fails as
        :meth:`send_blocking` would raise; cancelling it cancels the request."""
        timeout = check_seconds(timeout, "timeout")
        if callback is not None and not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        on_message = None if callback is None else (lambda pkt, done: callback(pkt))
        return self._submit(msg, timeout, headers, on_message)

    async def send_async(self, msg, timeout=None, headers=None):
        """``reply = await client.send_async(msg)``: as :meth:`send_blocking`, without
        blocking the event loop. Cancelling the awaiting task cancels the request."""
        return await asyncio.wrap_future(self.send(msg, timeout=timeout, headers=headers))
