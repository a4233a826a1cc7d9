"""The ROS 2 bridge: one rclpy node, in a context of its own, that imports ROS 2 topics
into a0py topics and exports a0py topics to ROS 2 (docs/ros2.md).

Invariants:

* **Bytes unchanged.** An import subscription is serialized (``raw=True``): its CDR
  bytes are written into the a0py topic as they came, under a ``ros2msg`` schema holding
  the type's full definition, with the bridge headers (:data:`ORIGIN`, :data:`HOST`)
  and the ROS 2 ones (:data:`SOURCE_TIME`, :data:`PUBLICATION_SEQ`, :data:`PUBLISHER`).
  A ``ros2msg`` export publishes the payload's bytes as they are, once they deserialize
  as the type (:mod:`.mapping`).
* **Loop-free: every message crosses one bridge, the one beside its publisher.** The
  exporter sends only packets published in its root (a packet carrying
  :data:`~a0py.bridge.ORIGIN` came through a bridge, this one, another ROS 2 bridge or
  a Zenoh bridge, and is never sent again); the importer writes only messages of ROS 2
  publishers that are not a0py bridges (each bridge's node publishes the hidden marker
  topic :data:`MARKER_TOPIC`, and a message whose publisher is in the DDS participant
  of a marker's publisher is left out, counted as ``from_bridges``). Imported packets
  are written as a relayed writer's (:attr:`a0py.Publisher.relayed`), so they wake no
  exporter, this bridge's or a Zenoh bridge's.
* **Counted, never silent.** Per topic, as the Zenoh bridge counts
  (:class:`~a0py.bridge.TopicCounts`): ``imported``; ``lost`` (gaps in a ROS 2
  publisher's sequence numbers); ``too_large`` and ``write_errors`` (the a0py topic
  could not take the message); ``exported``; ``missed_local`` (local packets evicted
  before the bridge read them); ``corrupt`` (a payload that is not what its schema
  says, dropped). A topic the bridge will not carry is refused with one line (log
  ``a0py.ros2``, and the status's ``refused``).
* **One ROS 2 bridge per root** (it holds the deadman of its status topic): a second
  would import every message twice.
* Every ROS 2 call happens on the node's executor thread (the graph scan is a timer of
  the node) except publishing, service requests and responses, which rclpy allows from
  any thread (the a0py dispatcher's, the service workers': :mod:`.services`). Stopping
  is bounded.
"""

import json
import logging
import os
import socket
import threading
import uuid

from .. import _core
from ..bridge.counts import TopicCounts
from ..bridge.exporting import init_for
from ..bridge.status_topic import StatusTopic
from ..bridge.wire import HOST, ORIGIN
from ..errors import A0Error, ArgumentError, FrameTooLargeError
from ..proto.discovery import Discovery
from ..proto.pubsub import Publisher, Subscriber
from ..proto.schema import Schema
from ..proto.sizes import PACKET_OVERHEAD
from ..proto.topic import PUBSUB, Root, Topic, current_root, list_topics, topic_arena
from ..proto.typed import suggested_arena_size
from . import mapping, qos
from .errors import Ros2ConfigError, Ros2Error, Ros2StartError
from .names import (
    a0py_name,
    check_namespace,
    check_node_name,
    compile_globs,
    is_hidden,
    ros_name,
)
from .services import Services
from .status import STATUS_TOPIC

__all__ = ["MARKER_TOPIC", "PUBLICATION_SEQ", "PUBLISHER", "SOURCE_TIME", "Ros2Bridge"]

_log = logging.getLogger("a0py.ros2")

#: Header: the ROS 2 publisher's source timestamp of an imported message (ns, decimal).
SOURCE_TIME = "a0py.ros2.source_time"
#: Header: the message's publication sequence number at its ROS 2 publisher.
PUBLICATION_SEQ = "a0py.ros2.seq"
#: Header: the ROS 2 publisher's gid (hex).
PUBLISHER = "a0py.ros2.publisher"
#: The hidden ROS 2 topic every a0py bridge's node publishes (std_msgs/msg/String,
#: transient local: who it is, as JSON): how bridges know each other's publishers.
MARKER_TOPIC = "/_a0py/ros2_bridges"
_MARKER_TYPE = "std_msgs/msg/String"
# A Fast DDS gid: the participant's GUID prefix (12 bytes), then the entity id.
_PARTICIPANT = 12
# An imported topic the bridge creates holds at least this many of its first message,
# each with room for the bridge's headers.
_FRAMES = 4
_HEADER_ROOM = 256


def _rclpy():
    try:
        import rclpy
        import rclpy.executors
        import rclpy.node
        import rclpy.qos
        import rclpy.signals
    except ImportError:
        raise Ros2Error("the ROS 2 bridge needs rclpy: pip install 'a0py[ros2]' (ROS 2 Kilted's "
                        "wheels, no ROS installation needed)") from None
    return rclpy


class _Import:
    """One ROS 2 topic written into one a0py topic."""

    def __init__(self, bridge, name, ros, type_name, schema, counts):
        self.bridge, self.name, self.ros, self.type_name = bridge, name, ros, type_name
        self.schema, self.counts = schema, counts
        self.publisher = None
        self.subscription = None
        self.last_seq = {}  # publisher gid -> last publication sequence number

    def on_message(self, data, info):
        # On the executor thread.
        gid = bytes(info["publisher_gid"]["data"])
        bridge = self.bridge
        if not bridge.is_foreign(gid):
            bridge.from_bridges += 1
            return
        seq = info.get("publication_sequence_number")
        if seq is not None:
            last = self.last_seq.get(gid)
            if last is not None and seq > last + 1:
                self.counts.lost += seq - last - 1
            self.last_seq[gid] = seq
        headers = [(ORIGIN, bridge.id), (HOST, bridge.host),
                   (SOURCE_TIME, str(info["source_timestamp"])), (PUBLISHER, gid.hex())]
        if seq is not None:
            headers.append((PUBLICATION_SEQ, str(seq)))
        try:
            pub = self.publisher
            if pub is None:
                pub = self.publisher = Publisher(self._sized_topic(len(data)), self.schema)
                pub.relayed = True
            pub.pub(data, headers)
        except FrameTooLargeError:
            self.counts.too_large += 1
            return
        except A0Error as e:
            self.counts.write_errors += 1
            bridge.refuse("import", self.name, f"cannot write {self.ros} into it: {e}", once=True)
            return
        self.counts.imported += 1

    def _sized_topic(self, size):
        """The a0py topic, made (if it does not exist) with room for four frames of
        `size` bytes, or the default size, whichever is larger."""
        topic = Topic(self.name, root=self.bridge.root)
        need = _core.arena_size_for(PACKET_OVERHEAD + _HEADER_ROOM + size, _FRAMES)
        if topic.exists(PUBSUB) or topic.size_for(PUBSUB) >= need:
            return topic
        return Topic(self.name, root=self.bridge.root,
                     size={PUBSUB: suggested_arena_size(size + _HEADER_ROOM)})

    def close(self):
        pub, self.publisher = self.publisher, None
        if pub is not None:
            pub.close()


class _Export:
    """One a0py topic published to one ROS 2 topic; its ROS 2 publisher is made once the
    topic's schema is known (at once, or at its first packet)."""

    def __init__(self, bridge, name, ros, counts, init):
        self.bridge, self.name, self.ros, self.counts = bridge, name, ros, counts
        self.publisher = None
        self.convert = None
        self.refused = False
        self.type_name = None
        self._lock = threading.Lock()
        schema = bridge.topic_schema(name)
        if schema is not None:
            self.prepare(schema)
        self.subscriber = None if self.refused else Subscriber(
            Topic(name, root=bridge.root), self.on_packet, init=init)

    def prepare(self, schema):
        with self._lock:
            if self.publisher is not None or self.refused:
                return
            try:
                self.type_name, self.convert = mapping.exporter_for(schema)
                self.publisher = self.bridge.create_publisher(self.type_name, self.ros, self.name)
            except mapping.Refused as e:
                self.refused = True
                self.bridge.refuse("export", self.name, str(e))

    def on_packet(self, pkt):
        # On the a0py dispatcher thread.
        if pkt.missed:
            self.counts.missed_local += pkt.missed
        if ORIGIN in pkt.headers:
            return  # it came through a bridge: it has crossed one already
        if self.publisher is None:
            self.prepare(pkt.schema)
            if self.publisher is None:
                return
        try:
            data = self.convert(pkt.payload)
        except ValueError as e:
            self.counts.corrupt += 1
            self.bridge.refuse("export", self.name, f"seq {pkt.seq} dropped: {e}", once=True,
                               level=logging.WARNING, record=False)
            return
        try:
            self.publisher.publish(data)
        except Exception as e:  # rclpy's RCLError: the context is shutting down
            _log.debug("ros2 bridge: publishing %r: %s", self.ros, e)
            return
        self.counts.exported += 1

    def close(self):
        sub, self.subscriber = self.subscriber, None
        if sub is not None:
            sub.close()


class Ros2Bridge:
    """Joins a ROS 2 graph: imports the ROS 2 topics matching `imports` into a0py topics
    and exports the a0py topics matching `exports` to ROS 2 (globs, written ``a/*`` or
    ``/a/*``; the a0py topic ``a/b`` is the ROS 2 topic ``/a/b``, ``/<namespace>/a/b``
    under `namespace`). Topics that appear later on either side are found (the ROS 2
    graph is scanned every `scan_interval` seconds; a0py topics are announced by
    discovery).

    `domain_id`: the ROS 2 domain (None: ``ROS_DOMAIN_ID``, else 0). `node_name`: the
    node's name (in `namespace`). ROS 2 discovery stays on this host unless
    ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is set otherwise (the bridge sets it to
    ``LOCALHOST`` when it is unset). `export_qos`: ``{glob: "reliable,transient_local,
    depth=10"}`` rules for exports (:mod:`a0py.ros2.qos`); imports take their
    publishers' QoS, as rosbag2 does. `root`: the a0py root (default: the current one).

    ``start()``, ``stop()``, context manager; ``status()``: counts per topic, what was
    refused and why. Raises Ros2ConfigError (a bad glob, name, namespace, domain id or
    QoS) here, Ros2Error without rclpy, Ros2StartError from :meth:`start` (rclpy would
    not start, or another ROS 2 bridge serves the root)."""

    def __init__(self, imports=(), exports=(), domain_id=None, namespace="",
                 node_name="a0py_bridge", *, root=None, export_qos=None, scan_interval=0.2,
                 report_interval=1.0, service_timeout=30.0):
        self._imports = compile_globs(imports, "imports")
        self._exports = compile_globs(exports, "exports")
        if domain_id is not None and (isinstance(domain_id, bool) or not isinstance(domain_id, int)
                                      or not 0 <= domain_id <= 232):
            raise Ros2ConfigError(f"domain_id must be an int from 0 to 232 (ROS 2 domains), not "
                                  f"{domain_id!r}")
        self.domain_id = domain_id
        self.namespace = check_namespace(namespace)
        self.node_name = check_node_name(node_name)
        self._qos = qos.QosRules(export_qos)
        for what, value in (("scan_interval", scan_interval), ("report_interval", report_interval),
                            ("service_timeout", service_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise Ros2ConfigError(f"{what} must be seconds > 0, not {value!r}")
        self.scan_interval = float(scan_interval)
        self.report_interval = float(report_interval)
        self.service_timeout = float(service_timeout)
        try:
            self.root = current_root() if root is None else Root.parse(root)
        except ArgumentError as e:
            raise Ros2ConfigError(str(e)) from None
        self.host = socket.gethostname()
        self.id = None
        self.from_bridges = 0
        self.node = None
        self._rclpy = None
        self._context = None
        self._executor = None
        self._spinner = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counts = {}
        self._imports_by_ros = {}  # ROS 2 name -> _Import
        self._exports_by_name = {}  # a0py name -> _Export (None while being made)
        self._refused = {}  # (direction, name) -> why
        self._discoveries = []
        self._existing = set()
        self._bridge_participants = set()
        self._foreign = {}  # gid -> whether its messages are imported
        self._marker = None
        self._services = None
        self._status_topic = StatusTopic(STATUS_TOPIC, self.root)
        self._reporter = None

    # --- what the parts share

    def counts_of(self, direction, name):
        """The counters of topic `name` (a0py name) in `direction` (``import``/``export``)."""
        with self._lock:
            counts = self._counts.get((direction, name))
            if counts is None:
                counts = self._counts[direction, name] = TopicCounts()
            return counts

    def refuse(self, direction, name, why, *, once=False, level=logging.WARNING, record=True):
        """Says, in one line, why the bridge does not carry topic `name` (or one of its
        messages); `once`: only the first time for this topic and direction."""
        key = (direction, name)
        with self._lock:
            if once and key in self._refused:
                return
            if record or key not in self._refused:
                self._refused[key] = why
        _log.log(level, "ros2 bridge: %s of topic %r refused: %s", direction, name, why)

    def topic_schema(self, name):
        from ..proto.schema import topic_schema

        try:
            return topic_schema(Topic(name, root=self.root))
        except A0Error:
            return None

    def create_publisher(self, type_name, ros, name):
        """An rclpy publisher of `type_name` on ROS 2 topic `ros` with the export QoS of
        a0py topic `name`."""
        cls = mapping.message_class(type_name)
        profile = qos.profile(self._rclpy.qos, self._qos.for_topic(name))
        return self.node.create_publisher(cls, ros, profile)

    def import_name(self, ros):
        """The a0py name of ROS 2 topic or service `ros` if the bridge imports it, else None."""
        name = a0py_name(ros, self.namespace)
        return name if name is not None and self._imported(name) else None

    def exported(self, name):
        """Whether a0py topic `name` matches the bridge's exports."""
        return any(match(name) for _, match, _ in self._exports)

    def ros_name(self, name):
        """``(ROS 2 name, None)`` of a0py topic `name`, or ``(None, why)``."""
        return ros_name(name, self.namespace)

    def refused_keys(self):
        """The (direction, name) pairs refused so far."""
        with self._lock:
            return set(self._refused)

    def is_foreign(self, gid):
        """Whether messages of the ROS 2 publisher `gid` are imported (it is not an a0py
        bridge's)."""
        known = self._foreign.get(gid)
        if known is None:
            self._refresh_bridges()
            known = self._foreign[gid] = gid[:_PARTICIPANT] not in self._bridge_participants
        return known

    def _refresh_bridges(self):
        participants = set()
        for info in self.node.get_publishers_info_by_topic(MARKER_TOPIC):
            participants.add(bytes(info.endpoint_gid)[:_PARTICIPANT])
        if participants != self._bridge_participants:
            self._bridge_participants = participants
            self._foreign = {g: v for g, v in self._foreign.items() if not v or
                             g[:_PARTICIPANT] not in participants}

    # --- life

    def start(self):
        """Starts the node and bridging; returns self. Raises Ros2StartError (rclpy
        would not start; another ROS 2 bridge serves this root), Ros2Error (no rclpy;
        started already)."""
        if self.node is not None:
            raise Ros2Error("this ROS 2 bridge is started already")
        rclpy = self._rclpy = _rclpy()
        os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        self.id = uuid.uuid4().hex
        self._hold_root()
        self._stopping.clear()
        try:
            self._context = rclpy.Context()
            rclpy.init(context=self._context, domain_id=self.domain_id,
                       signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
            self.node = rclpy.node.Node(self.node_name, namespace=self.namespace or None,
                                        context=self._context)
        except Exception as e:
            self._shutdown_rclpy()
            self._release_root()
            raise Ros2StartError(f"rclpy could not start the bridge's node: {e}") from None
        try:
            self._start_marker()
            self._services = Services(self)
            self._executor = rclpy.executors.SingleThreadedExecutor(context=self._context)
            self._executor.add_node(self.node)
            self.node.create_timer(self.scan_interval, self._scan)
            self._existing = {t for t, protos in list_topics(self.root).items() if PUBSUB in protos}
            for glob, _, _ in self._exports:
                self._discoveries.append(Discovery(glob, self._on_local_topic, root=self.root,
                                                   protocols=(PUBSUB,)))
            self._spinner = threading.Thread(target=self._spin, name="a0py-ros2-spin", daemon=True)
            self._spinner.start()
        except BaseException:
            self.stop()
            raise
        self._publish_status()
        self._reporter = threading.Thread(target=self._report_loop, name="a0py-ros2-report",
                                          daemon=True)
        self._reporter.start()
        _log.info("ros2 bridge %s started (node %s%s, imports %s, exports %s)", self.id,
                  self.namespace + "/", self.node_name, [g for g, _, _ in self._imports],
                  [g for g, _, _ in self._exports])
        return self

    def _hold_root(self):
        if not self._status_topic.hold():
            raise Ros2StartError(
                f"another ROS 2 bridge (pid {self._status_topic.owner_pid}) already serves root "
                f"{self.root.spec()}: run one per root (a second one would import every message "
                "twice)")

    def _release_root(self):
        self._status_topic.release()

    def _start_marker(self):
        from std_msgs.msg import String

        profile = qos.profile(self._rclpy.qos, {"reliable": True, "transient_local": True, "depth": 1})
        self._marker = self.node.create_publisher(String, MARKER_TOPIC, profile)
        self._marker.publish(String(data=json.dumps(
            {"id": self.id, "host": self.host, "root": self.root.spec(), "pid": os.getpid()})))
        self._refresh_bridges()

    def _spin(self):
        executor = self._executor
        while not self._stopping.is_set():
            try:
                executor.spin_once(timeout_sec=0.1)
            except Exception as e:  # the context shut down under it, or a callback raised
                if self._stopping.is_set():
                    return
                _log.exception("ros2 bridge: executor: %s", e)

    def stop(self, timeout=5.0):
        """Stops bridging and shuts the node down (each part waited for at most
        `timeout` seconds). Idempotent."""
        self._stopping.set()
        for d in self._discoveries:
            d.close(timeout)
        self._discoveries = []
        with self._lock:
            exports = [e for e in self._exports_by_name.values() if e is not None]
            self._exports_by_name = {}
        for e in exports:
            e.close()
        spinner, self._spinner = self._spinner, None
        if spinner is not None:
            spinner.join(timeout)
        with self._lock:
            imports = list(self._imports_by_ros.values())
            self._imports_by_ros = {}
        for imp in imports:
            imp.close()
        services, self._services = self._services, None
        if services is not None:
            services.close()
        self._shutdown_rclpy()
        reporter, self._reporter = self._reporter, None
        if reporter is not None:
            reporter.join(timeout)
            self._publish_status(running=False)
        self._release_root()

    def _shutdown_rclpy(self):
        executor, self._executor = self._executor, None
        node, self.node = self.node, None
        context, self._context = self._context, None
        for what, call in (("executor", executor and executor.shutdown),
                           ("node", node and node.destroy_node),
                           ("context", context and context.try_shutdown)):
            if call:
                try:
                    call()
                except Exception as e:
                    _log.debug("ros2 bridge: closing the %s: %s", what, e)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # --- imports: the ROS 2 graph, scanned on the executor thread

    def _imported(self, name):
        return any(match(name) and (hidden or not is_hidden("/" + name))
                   for _, match, hidden in self._imports)

    def _scan(self):
        if self._stopping.is_set():
            return
        self._prepare_exports()
        try:
            if self._exports:
                self._services.scan_exports()
            if not self._imports:
                return
            topics = self.node.get_topic_names_and_types()
            self._services.scan_imports(self.node.get_service_names_and_types())
        except Exception as e:  # the context is going down
            if not self._stopping.is_set():
                _log.exception("ros2 bridge: scanning the graph: %s", e)
            return
        for ros, types in topics:
            if ros in self._imports_by_ros or ros == MARKER_TOPIC:
                continue
            name = a0py_name(ros, self.namespace)
            if name is None or not self._imported(name) or ("import", name) in self._refused:
                continue
            if len(types) != 1:
                self.refuse("import", name, f"{ros} carries several types ({', '.join(types)})")
                continue
            self._start_import(name, ros, types[0])

    def _start_import(self, name, ros, type_name):
        try:
            schema = Schema.ros2(type_name)
            cls = mapping.message_class(type_name)
        except (A0Error, mapping.Refused) as e:
            self.refuse("import", name, f"{ros}: {e}")
            return
        publishers = self.node.get_publishers_info_by_topic(ros)
        profile = qos.profile(self._rclpy.qos, qos.import_qos(publishers))
        imp = _Import(self, name, ros, type_name, schema, self.counts_of("import", name))
        imp.subscription = self.node.create_subscription(cls, ros, imp.on_message, profile, raw=True)
        with self._lock:
            self._imports_by_ros[ros] = imp
        _log.info("ros2 bridge: importing %s (%s) into %r", ros, type_name, name)

    # --- exports: a0py topics, announced by discovery

    def _prepare_exports(self):
        """Makes the ROS 2 publishers of exports whose schema was declared after
        discovery announced them (a publisher creates the topic's ring first), so ROS 2
        subscribers can match before the first packet."""
        with self._lock:
            waiting = [e for e in self._exports_by_name.values()
                       if e is not None and e.publisher is None and not e.refused]
        for export in waiting:
            schema = self.topic_schema(export.name)
            if schema is not None:
                export.prepare(schema)

    def _on_local_topic(self, name):
        # On a discovery thread.
        if name == STATUS_TOPIC:
            return
        with self._lock:
            if name in self._exports_by_name or self._stopping.is_set():
                return
            self._exports_by_name[name] = None
        ros, why = ros_name(name, self.namespace)
        if ros is None:
            self.refuse("export", name, why)
            return
        try:
            # Attached as its creator sizes it: discovery announces a topic as soon as its
            # file exists, and an opener that asked for a size could initialize it first
            # (at the default size: a publisher's 64M camera ring got 4M).
            topic_arena(Topic(name, root=self.root), PUBSUB, create=False)
            export = _Export(self, name, ros, self.counts_of("export", name),
                             init_for(name in self._existing))
        except Exception as e:
            self.refuse("export", name, f"cannot read it: {e}")
            return
        with self._lock:
            self._exports_by_name[name] = export
        if self._stopping.is_set():
            export.close()

    # --- what it reports

    def subscribers(self, name):
        """How many ROS 2 subscriptions the export of a0py topic `name` has matched (0
        while it has no ROS 2 publisher yet): what to wait for before publishing when
        the first messages must not be missed."""
        with self._lock:
            export = self._exports_by_name.get(name)
        publisher = None if export is None else export.publisher
        try:
            return 0 if publisher is None else publisher.get_subscription_count()
        except Exception:  # destroyed meanwhile
            return 0

    def status(self):
        """``{"id", "node", "namespace", "domain_id", "host", "from_bridges", "imports":
        {name: {"ros", "type", counts...}}, "exports": {name: {...}}, "services": {name:
        {"direction", "ros", "type", "calls", "failed", "corrupt"}}, "refused": {"direction
        name": why}}``: topic counts as :class:`~a0py.bridge.TopicCounts` (imported, lost,
        too_large, write_errors for imports; exported, missed_local, corrupt for exports),
        service counts as :class:`~a0py.ros2.services.ServiceCounts`."""
        with self._lock:
            counts = dict(self._counts)
            imports = {i.name: i for i in self._imports_by_ros.values()}
            exports = {n: e for n, e in self._exports_by_name.items() if e is not None}
            refused = {f"{d} {n}": why for (d, n), why in sorted(self._refused.items())}
        services = self._services
        out = {"id": self.id, "node": f"{self.namespace}/{self.node_name}",
               "namespace": self.namespace, "domain_id": self.domain_id, "host": self.host,
               "from_bridges": self.from_bridges, "imports": {}, "exports": {}, "refused": refused,
               "services": {} if services is None else services.status()}
        for name, imp in sorted(imports.items()):
            out["imports"][name] = dict(counts[("import", name)].as_dict(), ros=imp.ros,
                                        type=imp.type_name)
        for name, exp in sorted(exports.items()):
            if exp.type_name is not None:
                out["exports"][name] = dict(counts[("export", name)].as_dict(), ros=exp.ros,
                                            type=exp.type_name)
        return out

    def _report_loop(self):
        while not self._stopping.wait(self.report_interval):
            try:
                self._publish_status()
            except Exception:
                _log.exception("ros2 bridge: writing its status failed")

    def _publish_status(self, running=True):
        try:
            self._status_topic.publish(self.status(), running)
        except Exception as e:  # a full disk, a topic of another kind: the bridge goes on
            _log.warning("ros2 bridge: cannot write its status to %r: %s", STATUS_TOPIC, e)

    def __repr__(self):
        state = "started" if self.node is not None else "stopped"
        return (f"<a0py.ros2.Ros2Bridge imports={[g for g, _, _ in self._imports]} "
                f"exports={[g for g, _, _ in self._exports]} {state}>")
