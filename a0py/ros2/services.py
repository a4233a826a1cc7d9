"""Services across the ROS 2 bridge (docs/ros2.md, "Services"): a ROS 2 service is
served to a0py RPC clients (an *import*), and an a0py RPC server whose topic carries a
ROS 2 service type is offered to ROS 2 clients (an *export*). Requests and responses
are CDR both ways; the topic's schema is the service type
(``Schema.ros2("pkg/srv/Name")``): the importer declares it, the exporter reads it.

Invariants:

* **Offered only while served.** An import's a0py server lives while the ROS 2 service
  has a server that is not an a0py bridge's; an export's ROS 2 service while the a0py
  topic has a live server. So each side's "is there a server?" (a0py's
  ``wait_for_server``, ROS 2's ``wait_for_service``) tells the truth across.
* **No hang.** An imported call ends with the ROS 2 response, or with an error reply
  to its a0py client (:class:`a0py.RpcRemoteError`): the ROS 2 server went away (DDS
  saw its participant leave, after its lease), no response within the bridge's
  ``service_timeout``, or the request is not a CDR request of the type. A client that
  gives up ends the ROS 2 call too. An exported call ends with the a0py reply, or, when
  the a0py server fails, dies or does not answer within ``service_timeout``, with no
  response: ROS 2 services have no error response, so its client sees what a dead
  server gives (its own timeout ends the wait); the failure is counted and logged.
* **Loop-free.** A ROS 2 service is imported only from servers that are not a0py
  bridges' (each bridge's DDS participant is known by its marker topic); an a0py topic
  is exported only while a server of its own is alive there: not this bridge's import,
  not a Zenoh bridge's stand-in for a server on another machine (whose ROS 2 bridge,
  if any, offers it there). So a request reaches its server through one bridge.
* **Threads.** Clients and services are made and destroyed on the executor thread (the
  graph scan); an import's requests are sent, and waited for, on the bridge's service
  workers; an export's responses are sent from the a0py dispatcher, once both the reply
  and the request's header are known (rclpy allows both).
"""

import concurrent.futures
import logging
import os
import threading
import time

from .. import _core
from ..errors import A0Error, PacketCorruptError
from ..proto.reqrep_wire import (
    READ_BATCH,
    READER_INIT_OLDEST,
    READER_ITER_NEXT,
    SERVER,
    T_START,
    TYPE,
    describe_topic,
)
from ..proto.rpc import RpcClient, RpcServer, server_pid
from ..proto.schema import Schema, declare_schema, topic_schema
from ..proto.topic import RPC, Topic, list_topics, topic_arena
from . import mapping
from .errors import Ros2Error

__all__ = ["ServiceCounts", "Services"]

_log = logging.getLogger("a0py.ros2")

# Services every ROS 2 node has (parameters, type descriptions): not bridged.
_NODE_SERVICE_PACKAGES = ("rcl_interfaces", "type_description_interfaces")
# How often a waiting import looks at its call's fate (seconds).
_POLL_S = 0.05
# How long a retired import waits for its calls to be failed before it closes.
_RETIRE_S = 1.0
_WORKERS = 8


class ServiceCounts:
    """Counters of one bridged service: ``calls`` (requests that came), ``failed``
    (calls that ended without a response: see the module doc), ``corrupt`` (a request
    or response that was not CDR of the type, dropped)."""

    __slots__ = ("_lock", "calls", "corrupt", "failed")

    def __init__(self):
        self._lock = threading.Lock()
        self.calls = self.failed = self.corrupt = 0

    def add(self, field):
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)

    def as_dict(self):
        return {"calls": self.calls, "corrupt": self.corrupt, "failed": self.failed}


def stood_in(topic, pid):
    """Whether the live server (process `pid`) of RPC topic `topic` is a Zenoh bridge
    standing in for a server on another machine. The newest start packet in the ring
    says (a stand-in's names its bridge: ``bridge <id> pid <pid>``, a server's its pid);
    if the ring no longer holds one, whether `pid` is the root's running Zenoh bridge in
    another process."""
    from ..bridge.counts import read_status as zenoh_status

    label = describe_topic(RPC, topic)
    reader = _core.PacketReader(topic.arena(RPC), READER_INIT_OLDEST, READER_ITER_NEXT, label)
    server = None
    try:
        while batch := reader.read_batch(READ_BATCH):
            for pkt in batch:
                if type(pkt) is not PacketCorruptError and pkt.headers.get(TYPE) == T_START:
                    server = pkt.headers.get(SERVER, "")
    finally:
        reader.close()
    if server is not None:
        return server.startswith("bridge ")
    status = zenoh_status(topic.root)
    return (pid != os.getpid() and status is not None and status.get("running", True)
            and status.get("pid") == pid)


def _destroy(destroy, entity, ros):
    try:
        destroy(entity)
    except Exception as e:  # the node is gone already
        _log.debug("ros2 bridge: destroying the client or service of %s: %s", ros, e)


def _serialization():
    from rclpy.serialization import deserialize_message, serialize_message

    return serialize_message, deserialize_message


class _Import:
    """One ROS 2 service served on one a0py RPC topic: an RpcServer whose handler (on a
    service worker) calls the ROS 2 service and waits for its response."""

    def __init__(self, services, name, ros, type_name, srv_class):
        bridge = services.bridge
        self.services, self.name, self.ros, self.type_name = services, name, ros, type_name
        self.srv_class = srv_class
        self.counts = services.counts_of("import", name, ros, type_name)
        self.server_gone = False
        self.retired_at = None
        self.active = 0
        self._lock = threading.Lock()
        topic = Topic(name, root=bridge.root)
        declare_schema(topic, Schema.ros2(type_name))
        self.client = bridge.node.create_client(srv_class, ros)
        try:
            self.server = RpcServer(topic, self.on_request, executor=services.workers())
        except BaseException:
            bridge.node.destroy_client(self.client)
            raise

    def on_request(self, req):
        # On a service worker. Raising sends the a0py client an error reply.
        serialize, deserialize = _serialization()
        self.counts.add("calls")
        try:
            request = deserialize(bytes(req.pkt.payload), self.srv_class.Request)
        except Exception as e:  # rclpy's RCLError or its C++ exceptions
            self.counts.add("corrupt")
            raise Ros2Error(f"{self.ros}: the request is not a CDR {self.type_name} request "
                            f"({e})") from None
        with self._lock:
            self.active += 1
        try:
            response = self._call(req, request)
        finally:
            with self._lock:
                self.active -= 1
        if response is not None:
            req.reply(serialize(response))

    def _call(self, req, request):
        """The ROS 2 response to `request`, or None if the a0py client gave up; raises
        Ros2Error when the call fails."""
        done = threading.Event()
        future = self.client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        timeout = self.services.bridge.service_timeout
        deadline = time.monotonic() + timeout
        while not done.wait(_POLL_S):
            if req.cancelled:
                self.client.remove_pending_request(future)
                return None
            why = None
            if self.server_gone or self.services.stopping:
                why = f"the ROS 2 server of {self.ros} went away while handling request {req.id}"
            elif time.monotonic() >= deadline:
                why = f"no response from ROS 2 service {self.ros} within {timeout} s to request {req.id}"
            if why:
                self.client.remove_pending_request(future)
                self.counts.add("failed")
                raise Ros2Error(why)
        return future.result()

    def retire(self, now):
        """Called on each scan once the ROS 2 service has no server: fails the calls in
        progress (their clients are told why), then closes. True once closed."""
        self.server_gone = True
        if self.retired_at is None:
            self.retired_at = now
        if self.active and now - self.retired_at < _RETIRE_S:
            return False
        self.close()
        return True

    def close(self):
        self.server_gone = True
        self.server.close()
        _destroy(self.services.bridge.node.destroy_client, self.client, self.ros)


class _PendingResponse:
    """A ROS 2 response still to come: sent once both the a0py reply and the request's
    header are known (rclpy hands the header to ``send_response`` after the callback
    returns; the reply may come first)."""

    __slots__ = ("export", "future", "header", "lock", "send")

    def __init__(self, export):
        self.export = export
        self.lock = threading.Lock()
        self.future = self.header = self.send = None

    def on_header(self, header, send):
        with self.lock:
            self.header, self.send = header, send
            ready = self.future is not None
        if ready:
            self.export.respond(self.future, header, send)

    def on_reply(self, future):
        with self.lock:
            self.future = future
            ready = self.header is not None
        if ready:
            self.export.respond(future, self.header, self.send)


class _Export:
    """One a0py RPC topic offered as one ROS 2 service: each ROS 2 request is sent by an
    RpcClient, and the reply is the ROS 2 response."""

    def __init__(self, services, name, ros, type_name, srv_class):
        bridge = services.bridge
        self.services, self.name, self.ros, self.type_name = services, name, ros, type_name
        self.srv_class = srv_class
        self.counts = services.counts_of("export", name, ros, type_name)
        self.client = RpcClient(Topic(name, root=bridge.root), wait_for_server=bridge.service_timeout)
        self.service = bridge.node.create_service(srv_class, ros, self.on_request)
        # The executor sends what the callback returns through the service's
        # send_response, with the request's header: a pending response waits there for
        # its reply instead of blocking the executor.
        send = self.service.send_response

        def send_response(response, header):
            if isinstance(response, _PendingResponse):
                response.on_header(header, send)
            else:
                send(response, header)
        self.service.send_response = send_response

    def on_request(self, request, _response):
        # On the executor thread: sends the request, returns at once.
        serialize, _ = _serialization()
        self.counts.add("calls")
        pending = _PendingResponse(self)
        try:
            future = self.client.send(serialize(request), timeout=self.services.bridge.service_timeout)
        except A0Error as e:
            self.failed(f"cannot send the request: {e}")
            return pending  # never answered: as a dead server
        future.add_done_callback(pending.on_reply)
        return pending

    def respond(self, future, header, send):
        """Sends the ROS 2 response of a finished a0py call (any thread)."""
        try:
            reply = future.result()
        except (A0Error, concurrent.futures.CancelledError) as e:
            self.failed(f"{type(e).__name__}: {e}")
            return
        try:
            response = _serialization()[1](bytes(reply.payload), self.srv_class.Response)
        except Exception as e:  # rclpy's RCLError or its C++ exceptions
            self.counts.add("corrupt")
            self.failed(f"the reply is not a CDR {self.type_name} response ({e})")
            return
        try:
            send(response, header)
        except Exception as e:  # the service was destroyed meanwhile
            _log.debug("ros2 bridge: responding on %s: %s", self.ros, e)

    def failed(self, why):
        self.counts.add("failed")
        _log.warning("ros2 bridge: a call of ROS 2 service %s (a0py rpc topic %r) got no "
                     "response: %s", self.ros, self.name, why)

    def close(self):
        self.client.close()
        _destroy(self.services.bridge.node.destroy_service, self.service, self.ros)


class Services:
    """The bridge's services, both ways; :meth:`scan` runs on the executor thread with
    the bridge's graph scan."""

    def __init__(self, bridge):
        self.bridge = bridge
        self.stopping = False
        self.imports = {}  # ROS 2 name -> _Import
        self.exports = {}  # a0py name -> _Export
        self._known = {}  # (direction, a0py name) -> [ros, type, ServiceCounts], kept when withdrawn
        self._stand_ins = {}  # a0py name -> pid of the Zenoh bridge standing in for its server
        self._workers = None
        self._lock = threading.Lock()

    def counts_of(self, direction, name, ros, type_name):
        """The counters of the service on a0py topic `name` in `direction`."""
        with self._lock:
            known = self._known.setdefault((direction, name), [ros, type_name, ServiceCounts()])
            known[:2] = ros, type_name
            return known[2]

    def workers(self):
        if self._workers is None:
            self._workers = concurrent.futures.ThreadPoolExecutor(
                _WORKERS, thread_name_prefix="a0py-ros2-service")
        return self._workers

    # --- imports

    def _servers(self, ros):
        """How many servers of ROS 2 service `ros` are not a0py bridges'."""
        # A service's server writes its replies on the DDS topic rr<name>Reply.
        infos = self.bridge.node.get_publishers_info_by_topic(f"rr{ros}Reply", no_mangle=True)
        return sum(1 for i in infos if self.bridge.is_foreign(bytes(i.endpoint_gid)))

    def scan_imports(self, graph):
        """Imports the ROS 2 services of `graph` (``get_service_names_and_types()``) that
        match the bridge's imports and have a server; retires those that lost theirs."""
        bridge, now = self.bridge, time.monotonic()
        offered = set()
        for ros, types in graph:
            name = bridge.import_name(ros)
            if name is None or len(types) != 1 or types[0].split("/")[0] in _NODE_SERVICE_PACKAGES:
                continue
            if self._servers(ros) == 0:
                continue
            offered.add(ros)
            if ros not in self.imports and ("service import", name) not in bridge.refused_keys():
                self._start_import(name, ros, types[0])
        for ros in [r for r, imp in self.imports.items() if r not in offered or imp.server_gone]:
            if self.imports[ros].retire(now):
                with self._lock:
                    del self.imports[ros]

    def _start_import(self, name, ros, type_name):
        try:
            srv_class = mapping.message_class(type_name)
            imp = _Import(self, name, ros, type_name, srv_class)
        except (A0Error, mapping.Refused) as e:
            self.bridge.refuse("service import", name, f"{ros}: {e}")
            return
        with self._lock:
            self.imports[ros] = imp
        _log.info("ros2 bridge: serving ROS 2 service %s (%s) on a0py rpc topic %r", ros, type_name, name)

    # --- exports

    def scan_exports(self):
        """Offers the a0py RPC topics matching the bridge's exports whose server is alive
        and whose schema is a ROS 2 service; withdraws those whose server is gone."""
        bridge = self.bridge
        imported = {imp.name for imp in self.imports.values()}
        for name, protocols in list_topics(bridge.root).items():
            if RPC not in protocols or name in imported or not bridge.exported(name):
                continue
            topic = Topic(name, root=bridge.root)
            try:
                topic_arena(topic, RPC, create=False)  # as its creator sized it, never sized here
            except A0Error:
                continue  # removed meanwhile, or not yet initialized: the next scan sees
            alive = server_pid(topic)
            export = self.exports.get(name)
            if export is not None and alive is None:
                with self._lock:
                    del self.exports[name]
                export.close()
                _log.info("ros2 bridge: ROS 2 service %s withdrawn (no a0py server)", export.ros)
            elif export is None and alive is not None and self._stand_ins.get(name) != alive:
                if stood_in(topic, alive):
                    self._stand_ins[name] = alive  # looked at again when another serves it
                    bridge.refuse("service export", name, "its server is on another machine (the "
                                  "Zenoh bridge stands in for it): that machine's ROS 2 bridge "
                                  "offers it", once=True, level=logging.INFO)
                else:
                    self._start_export(name, topic)

    def _start_export(self, name, topic):
        bridge = self.bridge
        try:
            schema = topic_schema(topic)
        except A0Error as e:
            bridge.refuse("service export", name, f"cannot read its schema: {e}", once=True)
            return
        if schema is None or schema.encoding != "ros2msg" or "/srv/" not in schema.name:
            what = "no schema" if schema is None else schema.describe()
            bridge.refuse("service export", name, f"its rpc topic carries {what}, not a ROS 2 "
                          "service type: declare one (declare_schema(topic, "
                          "Schema.ros2('pkg/srv/Name')))", once=True)
            return
        ros, why = bridge.ros_name(name)
        if ros is None:
            bridge.refuse("service export", name, why, once=True)
            return
        try:
            export = _Export(self, name, ros, schema.name, mapping.message_class(schema.name))
        except (A0Error, mapping.Refused) as e:
            bridge.refuse("service export", name, str(e), once=True)
            return
        with self._lock:
            self.exports[name] = export
        _log.info("ros2 bridge: offering a0py rpc topic %r as ROS 2 service %s (%s)", name, ros,
                  schema.name)

    # --- what it reports, life

    def status(self):
        """``{name: {"direction", "ros", "type", "offered", "calls", "failed",
        "corrupt"}}`` of every service bridged so far (``offered``: now)."""
        with self._lock:
            known = sorted(self._known.items())
            offered = {("import", i.name) for i in self.imports.values()} | \
                {("export", name) for name in self.exports}
        return {name: dict(counts.as_dict(), direction=direction, ros=ros, type=type_name,
                           offered=(direction, name) in offered)
                for (direction, name), (ros, type_name, counts) in known}

    def close(self):
        """Closes every service (on the executor thread, or once it has stopped)."""
        self.stopping = True
        with self._lock:
            parts = list(self.imports.values()) + list(self.exports.values())
            self.imports, self.exports = {}, {}
        for part in parts:
            part.close()
        workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=False, cancel_futures=True)
