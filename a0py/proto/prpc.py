"""Progressive RPC on topics: a request answered by a stream of messages, the last one
marked done. :class:`PrpcServer` and :class:`PrpcClient` on the topic's ``prpc`` arena
(``T.prpc``), with the same packets, ids, start-order, restart, cancel and liveness
rules as RPC (:mod:`a0py.proto.rpc`, built of the same request/reply modules
:mod:`a0py.proto.reqrep_wire`, :mod:`~a0py.proto.reqrep_server` and
:mod:`~a0py.proto.reqrep_client`); each reply also carries ``a0_rpc_done``.

A client's timeout here is an idle timeout: the longest wait for the *next* message, so
a long job that reports progress never times out while it reports.
"""

import asyncio

from ..errors import ArgumentError
from .reqrep_client import RequestClient
from .reqrep_server import RequestServer, ServedRequest
from .reqrep_wire import DEFAULT_MAX_AGE_S, DEFAULT_WAIT_FOR_SERVER_S, DONE, check_seconds
from .topic import PRPC

__all__ = ["PrpcClient", "PrpcConnection", "PrpcServer", "is_done"]


def is_done(pkt):
    """Whether `pkt` is the last message of its PRPC stream."""
    return pkt.headers.get(DONE) == "1"


class PrpcConnection(ServedRequest):
    """A request as a PRPC server's handler gets it: ``pkt`` (the request), ``id``,
    ``cancelled``, ``done``, and :meth:`send` for each message of the answer. Send from
    any thread, now or later; the stream ends with ``done=True``."""

    __slots__ = ()

    def send(self, msg, done=False, headers=None):
        """Sends one message of the answer (bytes, bytes-like, str or an
        :class:`a0py.Packet`, plus `headers`); ``done=True`` for the last one. Returns
        its seq, or None if the client cancelled (nothing is written then).

        Raises RpcError after the last message, ArgumentError for a bad message or a
        reserved header (``a0_rpc_*``)."""
        if not isinstance(done, bool):
            raise ArgumentError(f"done must be True or False, not {done!r}")
        return self._answer(msg, headers, done)


class PrpcServer(RequestServer):
    """Serves `topic`'s PRPC requests: ``on_connect(conn)`` is called for each, with
    ``conn.pkt`` the request; it answers with ``conn.send(msg, done=False)`` as often
    as it likes and ``conn.send(msg, done=True)`` once at the end, then or later, from
    any thread.

    `on_cancel`, `max_age`, `executor`, the one-server-per-topic rule (LockError) and
    the errors are those of :class:`a0py.RpcServer`."""

    protocol = PRPC
    kind = "PRPC"
    request_class = PrpcConnection
    streaming = True

    def __init__(self, topic, on_connect, on_cancel=None, *, max_age=DEFAULT_MAX_AGE_S, executor=None):
        super().__init__(topic, on_connect, on_cancel, max_age=max_age, executor=executor)


class PrpcClient(RequestClient):
    """Sends PRPC requests to `topic`'s :class:`PrpcServer` and gets their streams.

    ``for pkt in client.stream(msg, timeout=None):`` yields each message, the done one
    last; ``connect(msg, callback, timeout=None)`` calls ``callback(pkt, done)`` on the
    dispatcher thread for each and returns a :class:`concurrent.futures.Future` of the
    last; ``async for pkt in client.stream_async(msg)``; ``cancel(request_id)``.
    `timeout` is the longest wait for the next message. `wait_for_server` and the
    errors are those of :class:`a0py.RpcClient`."""

    protocol = PRPC
    streaming = True

    def __init__(self, topic, *, wait_for_server=DEFAULT_WAIT_FOR_SERVER_S):
        super().__init__(topic, wait_for_server=wait_for_server)

    def stream(self, msg, timeout=None, headers=None):
        """Sends `msg` and yields the messages of the answer as they come, ending after
        the done one. Leaving the loop early (break, an exception) cancels the request.

        Raises as :meth:`a0py.RpcClient.send_blocking`; A0TimeoutError when no message
        comes for `timeout` seconds."""
        timeout = check_seconds(timeout, "timeout")
        return self._iter_replies(msg, timeout, headers)

    def connect(self, msg, callback, timeout=None, headers=None):
        """Sends `msg`; ``callback(pkt, done)`` is called on the dispatcher thread for
        each message. Returns a Future of the last message (failing as :meth:`stream`
        raises); cancelling it cancels the request."""
        timeout = check_seconds(timeout, "timeout")
        if not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        return self._submit(msg, timeout, headers, callback)

    async def stream_async(self, msg, timeout=None, headers=None):
        """``async for pkt in client.stream_async(msg)``: :meth:`stream` in an event
        loop, without blocking it. Leaving the loop early cancels the request."""
        loop = asyncio.get_running_loop()
        queue = asyncio.Queue()

        def put(item):
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                pass  # the loop is closed: nobody listens any more

        def on_message(pkt, done):
            put((pkt, None))

        future = self.connect(msg, on_message, timeout, headers)

        def on_done(f):
            if f.cancelled():
                return
            error = f.exception()
            if error is not None:
                put((None, error))

        future.add_done_callback(on_done)
        try:
            while True:
                pkt, error = await queue.get()
                if error is not None:
                    raise error
                yield pkt
                if is_done(pkt):
                    return
        finally:
            if not future.done():
                future.cancel()
