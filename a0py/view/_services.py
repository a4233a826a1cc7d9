"""a0py RPC servers as the protocol's services (``services``).

Every topic the view watches whose ``rpc`` arena has a live server (its
deadman is held: :func:`a0py.proto.rpc.server_pid`) is advertised as a service
named after the topic, and unadvertised when the server is gone; a new server
is a new service id (ids are never reused). The live source tells the
topics with an rpc arena at each scan (:meth:`Services.scan`).

A server may declare the schemas of its requests and replies
(:func:`declare_service`): then the service is advertised with them
(``request``/``response``: encoding, schema name and encoding, schema, as
``foxglove-sdk`` advertises a service), its requests must be in the request's
encoding and are checked against its schema (as client publish checks a
message); else it takes and gives raw bytes in any encoding the view supports
(``requestSchema`` and ``responseSchema`` empty), the reply in the request's
encoding.

``serviceCallRequest`` needs ``--allow-call`` for the topic: it becomes one
RPC request (JSON ones with ``content-type: application/json``) and its reply
the ``serviceCallResponse``; no reply within the call timeout, a server that
died or that answered with an error, a service that is not (or no longer)
advertised: a ``serviceCallFailure`` saying which. A refused call gets a
failure and an error status.
"""

import logging

from ..errors import A0Error, A0TimeoutError
from ..proto.errors import RpcServerDiedError
from ..proto.reqrep_wire import server_pid
from ..proto.rpc import RpcClient
from ..proto.schema import declare_schema, topic_schema
from ..proto.topic import Topic
from . import _capabilities as C
from . import _protocol as P
from ._publish import ENCODINGS
from ._schema import BYTES_ENCODING, JSON_ENCODING
from ._typed import schema_text

__all__ = ["REQUEST_SUFFIX", "RESPONSE_SUFFIX", "Services", "declare_service", "service_schemas"]

_log = logging.getLogger("a0py.view")

#: Where a service's schemas are declared: the schema arenas of these topics
#: beside the RPC topic (``T/_request``, ``T/_response``).
REQUEST_SUFFIX = "/_request"
RESPONSE_SUFFIX = "/_response"
#: The type of a service that declared no schemas.
RAW_TYPE = "a0py/rpc"
#: Calls a client may have in flight at once.
MAX_CALLS = 64


def declare_service(topic, request=None, response=None):
    """Declares the schemas (:class:`a0py.Schema`) of the requests and replies
    of RPC ``topic`` (a name or :class:`a0py.Topic`), so that ``a0py view``
    advertises its service with them and checks requests against ``request``.
    Call it where the :class:`a0py.RpcServer` is made. Each is declared once,
    as a topic's schema is (``T/_request`` and ``T/_response`` hold them).

    Raises :class:`a0py.SchemaConflictError` (another schema was declared),
    :class:`a0py.SchemaError` (one that does not parse), ArgumentError."""
    topic = Topic.of(topic)
    for suffix, schema in ((REQUEST_SUFFIX, request), (RESPONSE_SUFFIX, response)):
        if schema is not None:
            target = Topic(topic.name + suffix, root=topic.root)
            declare_schema(target, schema.check(target))


def service_schemas(topic):
    """(request, response) schemas declared for RPC ``topic`` (each None when
    not declared). Never creates anything."""
    topic = Topic.of(topic)
    return tuple(topic_schema(Topic(topic.name + s, root=topic.root)) for s in (REQUEST_SUFFIX, RESPONSE_SUFFIX))


def _message_schema(schema):
    return {"encoding": schema.message_encoding, "schemaName": schema.name, "schemaEncoding": schema.encoding,
            "schema": schema_text(schema.encoding, schema.data)}


class _Service:
    __slots__ = ("check", "client", "id", "pid", "request", "response", "topic")

    def __init__(self, id, topic, pid, request, response):
        self.id = id
        self.topic = topic
        self.pid = pid
        self.request = request
        self.response = response
        self.client = None  # the RpcClient, made on the first call
        self.check = None
        if request is not None and request.message_encoding in ENCODINGS:
            self.check = ENCODINGS[request.message_encoding].checker(request)

    def advert(self):
        out = {"id": self.id, "name": self.topic}
        if self.request is None and self.response is None:
            out.update(type=RAW_TYPE, requestSchema="", responseSchema="")
            return out
        out["type"] = (self.request or self.response).name
        if self.request is not None:
            out["request"] = _message_schema(self.request)
        if self.response is not None:
            out["response"] = _message_schema(self.response)
        return out


class Services:
    """The RPC servers of the topics the live source watches, as services on
    ``hub``; ``access`` says which may be called, ``timeout`` how long a call
    waits for its reply (seconds)."""

    def __init__(self, hub, access, root, timeout=5.0):
        self.hub = hub
        self.access = access
        self.root = root
        self.timeout = timeout
        self.by_topic = {}  # topic -> _Service
        self.by_id = {}
        self._next_id = 1
        self.in_flight = {}  # client -> calls in flight

    def install(self):
        self.hub.offer("services", {C.ServiceCall: self.call},
                       (JSON_ENCODING, BYTES_ENCODING) if self.access.on("call") else ())
        self.hub.detach_hooks.append(lambda client: self.in_flight.pop(client, None))
        self.hub.greeters.append(self._greet)

    def _greet(self, client):
        if self.by_id:
            client.put_control(C.advertise_services([s.advert() for s in self.by_id.values()]))

    def servers(self):
        """{topic: pid} of the services advertised."""
        return {s.topic: s.pid for s in self.by_topic.values()}

    # -- what the source tells

    def scan(self, topics):
        """``topics``: the watched topics that have an rpc arena now."""
        added, removed = [], []
        for name in topics:
            try:
                pid = server_pid(Topic(name, root=self.root))
            except A0Error as e:
                _log.debug("view: rpc topic %r unreadable: %s", name, e)
                pid = None
            old = self.by_topic.get(name)
            if old is not None and (pid != old.pid or (old.request is None and old.response is None
                                                       and pid is not None and self._schemas(name) != (None, None))):
                removed.append(self._drop(old))
                old = None
            if old is None and pid is not None:
                added.append(self._add(name, pid))
        for name in set(self.by_topic) - set(topics):
            removed.append(self._drop(self.by_topic[name]))
        if removed:
            self.hub.broadcast_control(C.unadvertise_services([s.id for s in removed]))
        if added:
            self.hub.broadcast_control(C.advertise_services([s.advert() for s in added]))

    def _schemas(self, name):
        try:
            return service_schemas(Topic(name, root=self.root))
        except A0Error as e:
            _log.info("view: the service schemas of %r do not read (%s): it is shown as raw", name, e)
            return None, None

    def _add(self, name, pid):
        request, response = self._schemas(name)
        try:
            service = _Service(self._next_id, name, pid, request, response)
        except (A0Error, ValueError) as e:
            _log.info("view: the request schema of %r cannot check requests (%s)", name, e)
            service = _Service(self._next_id, name, pid, None, None)
        self._next_id += 1
        self.by_topic[name] = self.by_id[service.id] = service
        return service

    def _drop(self, service):
        self.by_topic.pop(service.topic, None)
        self.by_id.pop(service.id, None)
        if service.client is not None:
            service.client.close()
        return service

    def close(self):
        for service in list(self.by_topic.values()):
            self._drop(service)

    # -- calls

    def call(self, client, req):
        if not self.access.on("call"):
            why = self.access.refusal("call", "any topic").replace("'any topic'", "any topic")
            client.put_control(C.service_call_failure(req.service_id, req.call_id, why))
            raise P.ProtocolError(f"service call {req.call_id}: {why}")
        service = self.by_id.get(req.service_id)
        if service is None:
            client.put_control(C.service_call_failure(req.service_id, req.call_id, (
                f"unknown service {req.service_id} (not advertised, or its server is gone)")))
            return
        if not self.access.allows("call", service.topic):
            why = self.access.refusal("call", service.topic)
            client.put_control(C.service_call_failure(req.service_id, req.call_id, why))
            raise P.ProtocolError(f"service call {req.call_id}: {why}")
        error = self._check(service, req)
        if error is not None:
            client.put_control(C.service_call_failure(req.service_id, req.call_id, error))
            raise P.ProtocolError(f"service call {req.call_id} to {service.topic}: {error}")
        if self.in_flight.get(client, 0) >= MAX_CALLS:
            raise P.ProtocolError(f"service call {req.call_id}: {MAX_CALLS} calls of this client are in "
                                  "flight already (wait for their replies)")
        self.in_flight[client] = self.in_flight.get(client, 0) + 1
        self.hub.loop.create_task(self._call(client, service, req, bytes(req.payload)))

    def _check(self, service, req):
        """Why ``req`` cannot go to ``service`` (None: it can)."""
        if service.request is not None:
            if req.encoding != service.request.message_encoding:
                return (f"this service takes {service.request.message_encoding!r} requests, not "
                        f"{req.encoding!r}")
        elif req.encoding not in self.hub.supported_encodings:
            return (f"unsupported encoding {req.encoding!r} (this view takes "
                    f"{', '.join(self.hub.supported_encodings)})")
        if service.check is not None:
            try:
                service.check(req.payload)
            except ValueError as e:
                return f"the request {e}"
        return None

    async def _call(self, client, service, req, payload):
        try:
            if service.client is None:
                service.client = RpcClient(Topic(service.topic, root=self.root),
                                           wait_for_server=min(self.timeout, 1.0))
            headers = [("content-type", "application/json")] if req.encoding == JSON_ENCODING else None
            reply = await service.client.send_async(payload, timeout=self.timeout, headers=headers)
        except A0TimeoutError:
            failure = f"no reply from the RPC server of {service.topic!r} within {self.timeout:g} s"
        except RpcServerDiedError as e:
            failure = f"the RPC server of {service.topic!r} died: {e}"
        except A0Error as e:
            failure = f"{type(e).__name__}: {e}"
        else:
            failure = None
            encoding = req.encoding if service.response is None else service.response.message_encoding
            client.put_control(C.service_call_response(req.service_id, req.call_id, encoding, reply.payload))
        finally:
            left = self.in_flight.get(client, 1) - 1
            if left > 0:
                self.in_flight[client] = left
            else:
                self.in_flight.pop(client, None)
        if failure is not None:
            client.put_control(C.service_call_failure(req.service_id, req.call_id, failure))
