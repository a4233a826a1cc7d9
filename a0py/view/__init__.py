"""The live web view (``a0py view``): a page listing the topics with their
rates, their latest messages (typed ones field by field, images drawn) and
plots of their numeric fields, served with the Foxglove WebSocket protocol on
the same port (so the Foxglove app can connect too; typed topics and other
tools' channels are advertised with their real schemas). Clients may also
publish, set configuration values and call RPC servers, each only on the
topics the view's ``allow_*`` globs name, and see the connection graph. See
docs/view.md.

* :func:`serve` runs a view until interrupted (live topics, or a recording);
* :func:`start` runs one in a background thread and returns it (``.url``,
  ``.close()``), for programs and tests;
* :func:`declare_service` declares an RPC server's request and reply schemas,
  which the view advertises with its service.
"""

import os

from ._protocol import SUBPROTOCOL
from ._server import DEFAULT_ORIGINS, is_loopback
from .errors import ProtocolError, ViewError

__all__ = ["DEFAULT_ORIGINS", "SUBPROTOCOL", "ProtocolError", "ViewError", "declare_service", "foxglove_bridge",
           "is_loopback", "is_recording", "make_server", "serve", "start"]


def is_recording(spec):
    """Whether ``spec`` names a recording rather than topic globs: an
    ``.mcap`` file, an existing file or directory, or anything written as a
    path (ending in ``/``, or starting with ``./``, ``../`` or ``~``), which
    no topic glob is. A path that does not exist is then an error of
    :func:`make_server`, not a topic to wait for."""
    if spec is None or isinstance(spec, (list, tuple)):
        return False
    spec = os.fspath(spec)
    if isinstance(spec, bytes):
        spec = os.fsdecode(spec)
    return (spec.endswith((".mcap", "/", os.sep)) or spec.startswith(("./", "../", "~"))
            or os.path.isdir(spec) or (os.path.isfile(spec) and not any(c in spec for c in "*?[")))


def make_server(topics=None, host="127.0.0.1", port=8765, *, recording=None, root=None, allow_remote=False,
                token=None, allowed_origins=DEFAULT_ORIGINS, queue_messages=10_000, queue_bytes=8 << 20,
                control_bytes=16 << 20, name="a0py view", allow_publish=(), allow_set=(), allow_call=(),
                call_timeout=5.0):
    """The :class:`a0py.view._server.ViewServer` for live ``topics`` (globs;
    None: every topic under ``root``) or for ``recording`` (an MCAP file or a
    directory of them). Not started. Errors as for :func:`serve`."""
    from ._access import Access
    from ._hub import Hub
    from ._server import MAX_CLIENT_MESSAGE, ViewServer

    if isinstance(topics, (str, os.PathLike)):
        if recording is None and is_recording(topics):
            recording, topics = topics, None
        else:
            topics = [os.fspath(topics)]
    access = Access(allow_publish, allow_set, allow_call)
    if recording is not None:
        if access.on("publish") or access.on("set") or access.on("call"):
            from ..errors import ArgumentError

            raise ArgumentError("allow_publish, allow_set and allow_call apply to live topics, not to a "
                                "recording")
        from ._recording import RecordingSource

        source = RecordingSource.open(recording)
        hub = Hub(name, queue_messages=queue_messages, queue_bytes=queue_bytes, control_bytes=control_bytes,
                  capabilities=source.capabilities, data_range=source.data_range,
                  metadata={"source": "recording", "files": str(len(source.files))}, controller=source)
        source.attach(hub)
    else:
        from ..proto.topic import Root, current_root
        from ._graph import ConnectionGraph
        from ._live import LiveSource
        from ._params import Parameters
        from ._publish import ClientPublishing
        from ._services import Services

        # Checked now, not in the source's task: a bad root is an error of this call.
        root = current_root() if root is None else Root.parse(root)
        hub = Hub(name, queue_messages=queue_messages, queue_bytes=queue_bytes, control_bytes=control_bytes,
                  metadata={"source": "live", **access.metadata()})
        source = LiveSource(hub, topics, root)
        publishing = ClientPublishing(hub, access, root)
        publishing.install()
        source.parameters = Parameters(hub, access, root)
        source.parameters.install()
        source.services = Services(hub, access, root, call_timeout)
        source.services.install()
        source.graph = ConnectionGraph(hub, root, publishing, source.services)
        source.graph.install()
    big = access.on("publish") or access.on("call")
    return ViewServer(hub, source, host=host, port=port, allow_remote=allow_remote, token=token,
                      allowed_origins=allowed_origins, max_message=MAX_CLIENT_MESSAGE if big else None)


def serve(topics=None, host="127.0.0.1", port=8765, *, ready=None, **options):
    """Serves the view until interrupted (Ctrl-C): the page at ``GET /`` and
    the Foxglove WebSocket protocol (subprotocol ``foxglove.sdk.v1``) on the
    same port.

    ``topics``: globs of live topics to show (None: all), or the path of a
    recording (an ``.mcap`` file or a directory of them). ``host``: loopback
    by default; another address needs ``allow_remote=True`` and then every
    connection needs the access token printed in the URL. ``ready(url)`` is
    called once listening. Options: ``recording``, ``root`` (``A0PY_ROOT``
    syntax), ``allow_remote``, ``token``, ``allowed_origins`` (besides the
    page itself; default the Foxglove app), ``queue_messages`` and
    ``queue_bytes`` (each client's send budget), ``control_bytes`` (the control
    messages a client may leave unread before it is disconnected);
    ``allow_publish``, ``allow_set``, ``allow_call`` (topic globs on which
    clients may publish, set configuration values, call RPC servers; none by
    default: the view only shows), ``call_timeout`` (seconds a service call
    waits for its reply).

    Raises :class:`ViewError` (an address it may not or cannot bind, a
    recording it cannot read), :class:`a0py.ArgumentError` (bad options, a bad
    glob, an ``allow_*`` flag with a recording)."""
    import asyncio

    server = make_server(topics, host, port, **options)

    async def main():
        await server.start()
        if ready is not None:
            ready(server.url)
        try:
            await server.serve_forever()
        finally:
            await server.aclose()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def start(topics=None, host="127.0.0.1", port=0, **options):
    """Starts a view in a background thread (port 0: any free port) and
    returns it: ``.url`` (the page), ``.ws_url``, ``.server``, ``.close()``;
    also a context manager. Errors as for :func:`serve`."""
    from ._server import BackgroundServer

    bg = BackgroundServer(lambda: make_server(topics, host, port, **options))
    bg.start()
    return bg


def declare_service(topic, request=None, response=None):
    """Declares the schemas (:class:`a0py.Schema`) of RPC ``topic``'s requests
    and replies, so that a view advertises its service with them (the
    Foxglove app's Service Call panel then knows what to send) and checks
    requests against ``request``. Errors: :class:`a0py.SchemaConflictError`
    (other schemas were declared), :class:`a0py.SchemaError`,
    :class:`a0py.ArgumentError`."""
    from ._services import declare_service as declare

    declare(topic, request, response)


def foxglove_bridge(**options):
    """A bridge that logs live topics to the Foxglove SDK's own WebSocket
    server (not started; ``options`` as :class:`a0py.view._foxglove_sdk.FoxgloveBridge`
    takes them: ``host``, ``port``, ``root``, ``globs``, ``allow_remote``).
    Needs ``pip install 'a0py[foxglove]'``."""
    from ._foxglove_sdk import FoxgloveBridge

    return FoxgloveBridge(**options)
