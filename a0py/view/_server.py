"""The view's server: one port that serves the page over HTTP and speaks the
Foxglove WebSocket protocol, on ``websockets``' asyncio server.

Access rules (checked before any WebSocket handshake or file is served):

* **Loopback by default.** Binding anything but a loopback address needs
  ``allow_remote=True``; the server then makes an access token that every
  WebSocket connection must present (``?token=...``, compared in constant
  time), and prints the page's URL with it.
* **Host header.** Bound to loopback, the server answers only requests whose
  ``Host`` is a loopback name, so a web page that rebinds its own domain name
  to 127.0.0.1 (DNS rebinding) gets nothing.
* **Origin.** A WebSocket request from a browser must come from the page
  itself (its ``Origin`` names the same host and port as ``Host``) or from an
  allowed origin (by default the Foxglove app, ``https://app.foxglove.dev``);
  requests without ``Origin`` (programs, not browsers) pass.

The page's static files (``a0py/view/static``) carry nothing secret and are
served without the token; the data flows only over the WebSocket.
"""

import asyncio
import contextlib
import functools
import hmac
import http
import ipaddress
import logging
import os
import secrets
import threading
import urllib.parse

from ..errors import ArgumentError
from . import _protocol as P
from ._outbox import SplitFrame
from .errors import ViewError

__all__ = ["DEFAULT_ORIGINS", "ViewError", "ViewServer"]

_log = logging.getLogger("a0py.view")

#: Origins allowed besides the page itself.
DEFAULT_ORIGINS = ("https://app.foxglove.dev",)
STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
# The page's files by their suffix, with their Content-Type. JavaScript must
# be text/javascript: browsers refuse a module of any other type (nosniff).
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                  ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


def _static_files():
    """URL path -> file name of the page's files: every file of STATIC_DIR of a
    type in _CONTENT_TYPES (the page's ES modules among them, served as they
    are), and ``/`` for the page. Listed once, at import: a path not listed is a
    404, whatever the disk holds."""
    try:
        names = sorted(os.listdir(STATIC_DIR))
    except OSError:
        names = []  # a broken install: "/" then says which file is missing
    files = {f"/{n}": n for n in names if os.path.splitext(n)[1] in _CONTENT_TYPES}
    files["/"] = "index.html"
    return files


_STATIC_FILES = _static_files()
# The transport's write buffer: above it a client's sender waits (and its
# outbox, not the buffer, absorbs or drops what comes meanwhile).
WRITE_LIMIT = 256 << 10
#: The largest message a client may send when it may publish or call services.
MAX_CLIENT_MESSAGE = 16 << 20
# Frames joined into one socket write (one system call for many small messages).
_BATCH_BYTES = 64 << 10
_BATCH_FRAMES = 256


def is_loopback(host):
    """Whether ``host`` (an address or name) is loopback only."""
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host_header):
    """The host part of a Host header value (``[::1]:8765`` -> ``::1``)."""
    h = host_header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


class ViewServer:
    """The view's server. ``source_factory(hub)`` makes the source (live
    topics or a recording) that feeds the hub; ``hub`` is made by the caller
    (its capabilities depend on the source).

    ``start()`` binds (``await``), ``url`` then tells where the page is,
    ``serve_forever()`` runs until ``close()``.

    Raises :class:`ViewError` when asked to bind a non-loopback address
    without ``allow_remote``, or when the port cannot be bound."""

    def __init__(self, hub, source, *, host="127.0.0.1", port=8765, allow_remote=False, token=None,
                 allowed_origins=DEFAULT_ORIGINS, max_message=None):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ArgumentError(f"port must be an integer from 0 to 65535 (0: any free port), got {port!r}")
        self.host = host
        self.port = port
        self.loopback = is_loopback(host)
        if not self.loopback and not allow_remote:
            raise ViewError(
                f"binding {host!r} would show your topics to other machines: bind a loopback address "
                "(127.0.0.1, the default), or pass allow_remote=True (a0py view --allow-remote), which "
                "prints an access token the page needs")
        self.token = token if token is not None else (secrets.token_urlsafe(18) if not self.loopback else None)
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.hub = hub
        self.source = source
        # The largest message a client may send (text is refused above
        # P.MAX_CLIENT_TEXT whatever this is): larger when clients may publish
        # or call services, whose messages can be images.
        self.max_message = max_message or P.MAX_CLIENT_TEXT
        self._server = None
        self._tasks = []
        self._closed = None

    # -- URLs --

    @property
    def url(self):
        """The page's URL (with the token when one is needed)."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1" if host != "::" else "::1"
        if ":" in host:
            host = f"[{host}]"
        query = f"?token={self.token}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"

    @property
    def ws_url(self):
        return "ws" + self.url[4:]

    # -- lifecycle --

    async def start(self):
        """Binds the port and starts the source and the stats. Raises
        :class:`ViewError` when the port cannot be bound."""
        from websockets.asyncio.server import serve

        loop = asyncio.get_running_loop()
        self.hub.loop = loop
        self._closed = loop.create_future()
        try:
            self._server = await serve(
                self._handler, self.host, self.port,
                subprotocols=list(P.SUBPROTOCOLS),
                process_request=self._process_request,
                compression=None,
                max_size=self.max_message,
                write_limit=WRITE_LIMIT,
                server_header=None,
            )
        except OSError as e:
            raise ViewError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e} (another "
                            "view already running? pick another --port)") from None
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]
        self._tasks.append(loop.create_task(self.hub.run_stats()))
        self._tasks.append(loop.create_task(self._run_source()))

    async def _run_source(self):
        # A source that fails ends the server with its error (serve_forever
        # raises it), rather than leaving a page with nothing behind it.
        try:
            await self.source.run()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            _log.exception("view: the source stopped")
            if self._closed is not None and not self._closed.done():
                self._closed.set_exception(ViewError(f"the view's source stopped: {e}"))

    async def serve_forever(self):
        """Runs until :meth:`aclose`; raises :class:`ViewError` if the source
        (live topics, a recording) fails."""
        await self._closed

    async def aclose(self):
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    # -- HTTP --

    def _check_host(self, request):
        hosts = request.headers.get_all("Host")
        if len(hosts) != 1:
            return False
        return not self.loopback or is_loopback(_host_name(hosts[0]))

    def _response(self, connection, status, body, content_type="text/plain; charset=utf-8", extra=()):
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        status = http.HTTPStatus(status)
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = Headers([
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Connection", "close"),
            *extra,
        ])
        return Response(status.value, status.phrase, headers, body)

    def _process_request(self, connection, request):
        if not self._check_host(request):
            return self._response(connection, 403, "a0py view: this server answers only requests with one "
                                  "Host header naming a loopback address (localhost, 127.0.0.1, [::1])\n")
        parsed = urllib.parse.urlsplit(request.path)
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        if not upgrade:
            return self._static(connection, parsed.path)
        if self.token is not None:
            given = urllib.parse.parse_qs(parsed.query).get("token", [""])[0]
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return self._response(connection, 401, "a0py view: this view needs its access token: open "
                                      "the URL that `a0py view` printed (it ends in ?token=...)\n")
        origins = request.headers.get_all("Origin")
        origin = origins[0] if len(origins) == 1 else (None if not origins else "(several)")
        if origin is not None and not self._origin_ok(origin, request.headers["Host"]):
            return self._response(connection, 403, f"a0py view: WebSocket connections from origin {origin!r} "
                                  "are not allowed (start the view with --allow-origin "
                                  f"{origin} to allow them)\n")
        return None

    def _origin_ok(self, origin, host):
        o = origin.rstrip("/").lower()
        if o in self.allowed_origins:
            return True
        parts = urllib.parse.urlsplit(o)
        return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()

    def _static(self, connection, path):
        name = _STATIC_FILES.get(path)
        if name is None:
            return self._response(connection, 404, f"a0py view: no page at {path}\n")
        try:
            with open(os.path.join(STATIC_DIR, name), "rb") as f:
                body = f.read()
        except OSError as e:
            return self._response(connection, 500, f"a0py view: the page's file {name} is missing from the "
                                  f"package ({e.strerror}): reinstall a0py\n")
        ctype = _CONTENT_TYPES[os.path.splitext(name)[1]]
        csp = ("default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
               "style-src 'self'; script-src 'self'; base-uri 'none'; frame-ancestors 'none'; "
               "form-action 'none'")
        return self._response(connection, 200, body, ctype, extra=[("Content-Security-Policy", csp)])

    # -- WebSocket --

    async def _handler(self, connection):
        from websockets.exceptions import ConnectionClosed

        query = urllib.parse.parse_qs(urllib.parse.urlsplit(connection.request.path).query)
        packets = query.get("packets", ["0"])[0] in ("1", "true", "yes")
        try:
            max_hz = float(query.get("max_hz", ["0"])[0])
        except ValueError:
            max_hz = 0.0
        max_hz = max_hz if 0 < max_hz < 1e6 else None
        name = "%s:%s" % (connection.remote_address[:2] if connection.remote_address else ("?", "?"))
        client = self.hub.attach(connection, packets, name, max_hz, functools.partial(_farewell, connection))
        sender = asyncio.get_running_loop().create_task(_send_loop(client))
        try:
            async for message in connection:
                self.hub.handle(client, message)
        except ConnectionClosed:
            pass
        finally:
            self.hub.detach(client)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender


async def _farewell(connection, status, reason):
    """Sends ``status`` (a text frame), then a close frame with code 1008 and
    ``reason``, in one write that does not wait for the client to read what
    was queued before: the close handshake's timeout (``close_timeout``) then
    bounds how long a client that never reads keeps the connection."""
    from websockets.exceptions import ConnectionClosed

    from ._hub import CLOSE_POLICY

    try:
        async with connection.send_context():
            connection.protocol.send_text(status.encode("utf-8"))
            connection.protocol.send_close(CLOSE_POLICY, reason)
    except (ConnectionClosed, TimeoutError):
        pass


async def _send_loop(client):
    """Writes ``client``'s outbox to its connection: control frames first,
    many frames per socket write, waiting (drain) while the transport's buffer
    is above its limit. Ends when the connection closes.

    Frames go through the connection's sans-I/O ``protocol`` inside its
    ``send_context()`` (websockets' asyncio connection has both since 13.0,
    the version pyproject.toml requires), so a batch costs one system call."""
    from websockets.exceptions import ConnectionClosed

    conn = client.connection
    protocol = conn.protocol
    control, data = client.control, client.data
    try:
        while not client.closed:
            await client.wake.wait()
            client.wake.clear()
            while (control or data) and not client.closed:
                client.before_batch()
                async with conn.send_context():
                    _send_batch(client, protocol)
                    chunks = protocol.data_to_send()
                    if len(chunks) > 1 and all(chunks):
                        conn.transport.write(b"".join(chunks))
                    else:
                        for c in chunks:
                            if c:
                                conn.transport.write(c)
            client.after_drain()
    except ConnectionClosed:
        pass


def _send_batch(client, protocol):
    """Hands ``protocol`` the next frames of ``client``'s outbox (control
    first), up to :data:`_BATCH_BYTES` or :data:`_BATCH_FRAMES`."""
    control, data = client.control, client.data
    size = 0
    n = 0
    while (control or data) and size < _BATCH_BYTES and n < _BATCH_FRAMES:
        frame = client.pop_control() if control else client.pop_data()
        if isinstance(frame, str):
            protocol.send_text(frame.encode("utf-8"))
        elif isinstance(frame, SplitFrame):
            protocol.send_binary(frame.join())
        else:
            protocol.send_binary(frame)
        size += len(frame)
        n += 1


class BackgroundServer:
    """A :class:`ViewServer` running on an event loop in a thread of its own
    (``with BackgroundServer(...) as s: s.url``), for programs and tests."""

    def __init__(self, make_server):
        self._make = make_server
        self._thread = None
        self._loop = None
        self.server = None
        self._ready = threading.Event()
        self._error = None

    def __enter__(self):
        # a0py.view.start() has started it already: a second start would run a
        # second server, and the first one's ready event would let `url` name
        # it before it listens
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def url(self):
        return self.server.url

    @property
    def ws_url(self):
        return self.server.ws_url

    def start(self):
        """Starts the server and returns once it listens (or raises its error).
        Once only: a second call raises RuntimeError."""
        if self._thread is not None:
            raise RuntimeError("this view is started already")
        self._thread = threading.Thread(target=self._run, name="a0py-view", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self):
        async def main():
            try:
                self.server = self._make()
                await self.server.start()
            except BaseException as e:
                self._error = e
                self._ready.set()
                return
            self._loop = asyncio.get_running_loop()
            self._ready.set()
            await self.server.serve_forever()
            await self.server.aclose()

        asyncio.run(main())

    def close(self):
        if self._loop is not None and self.server is not None:
            fut = asyncio.run_coroutine_threadsafe(self.server.aclose(), self._loop)
            with contextlib.suppress(Exception):
                fut.result(10)
        if self._thread is not None:
            self._thread.join(10)
