"""The bridge: one Zenoh session, the exporters of the local topics matching its globs,
the importer of the remote ones, and its report of what it could not deliver.

Invariants:

* One exporter per local topic and bridged protocol (pub/sub, log, cfg), however many globs
  match it, made when discovery (:mod:`a0py.proto.discovery`) first announces the
  topic's arena of that protocol; pub/sub exporters are driven in batches by export
  loops (one thread per 127 topics, :class:`~a0py.bridge.exporting.ExportLoop`). RPC and
  PRPC topics are watched and stood in for by :mod:`a0py.bridge.reqrep`.
* The bridge's status is kept in its root (:data:`~a0py.bridge.counts.STATUS_TOPIC`) for
  ``a0py ls`` and ``a0py info``; that topic is never bridged.
* One running bridge per root: a started bridge holds the deadman of its status topic
  (on the deadman keeper thread, so it is held as long as the process lives and
  released at once if it dies). A second bridge on the same root would export what the
  first imports, and every remote packet would arrive twice: it refuses to start.
* Losses are counted per topic (:class:`~a0py.bridge.counts.TopicCounts`) as they
  happen and reported every `report_interval` seconds, when they changed, as a
  ``WARN`` message on the log topic; :meth:`ZenohBridge.status` reads them at any time.
* Each running bridge declares a liveliness token and follows the other bridges'
  (:class:`~a0py.bridge.peers.PeerWatch`); a peer that goes or comes back is in the
  status at once (the reporter is woken) and logged on the log topic.
* Every wait is bounded: stopping closes discovery, subscribers, the Zenoh session
  and the reporter, each with a timeout.
"""

import importlib
import json
import logging
import os
import socket
import threading
import time
import uuid

from ..errors import ArgumentError
from ..proto.deadman import Deadman, keeper_call
from ..proto.discovery import Discovery, compile_glob
from ..proto.log import Logger
from ..proto.pubsub import Publisher
from ..proto.topic import (
    CFG,
    LOG,
    PRPC,
    PUBSUB,
    RPC,
    Root,
    Topic,
    check_topic_name,
    current_root,
    list_topics,
)
from .config import zenoh_config
from .counts import STATUS_TOPIC, TopicCounts
from .errors import BridgeConfigError, BridgeError, BridgeStartError
from .exporting import (
    MAX_LINGER,
    BundleWriter,
    ExportLoop,
    LogCfgExporter,
    PubsubExporter,
    init_for,
)
from .importing import Importer, compile_sizes
from .peers import PeerWatch
from .reqrep import RpcForwarder
from .wire import BRIDGED, REQREP, check_prefix

__all__ = ["ZenohBridge"]

_log = logging.getLogger("a0py.bridge")


def _import_zenoh():
    try:
        return importlib.import_module("zenoh")
    except ImportError:
        raise BridgeError("the bridge needs eclipse-zenoh: pip install 'a0py[bridge]'") from None


class ZenohBridge:
    """Bridges the local topics matching `globs` (topic globs, as
    :class:`a0py.Discovery` takes) to and from other machines over Zenoh.

    Local pub/sub packets of matching topics are published to Zenoh under
    ``<prefix>/pubsub/<topic>``; remote ones of matching topics are written into local
    topics (created at a size that fits: `sizes` maps globs to arena sizes, first match
    wins, else four frames of the first packet or the default size, whichever is
    larger). Bridged packets keep their id, headers, payload and standard headers and
    gain ``a0py.bridge.origin`` (the exporting bridge's id), ``a0py.bridge.host`` and
    ``a0py.bridge.seq``. See docs/bridge.md.

    Zenoh: `listen` and `connect` are endpoints (``tcp/127.0.0.1:7447``,
    ``unixsock-stream//tmp/s``...), `config` a Zenoh JSON5 file used as the base,
    `mode` ``peer`` (default), ``client`` or ``router``, `multicast` turns multicast
    scouting on (off by default). `reliable=True`: Zenoh's block policy (a slow link
    slows the bridge, whose topic rings then overrun, counted as ``missed_local``);
    default: the drop policy (Zenoh drops under congestion; the far side counts the gap
    as ``lost``). `linger` (seconds, default 0, at most 0.01): after the first local
    packet wakes the bridge, how long it waits for packets of other topics before it
    sends (fewer wake-ups and Zenoh writes when many topics are written at once, at
    that much added latency). `lease` (seconds, 0.1 to 3600): how long the link to
    another bridge may stay silent before Zenoh declares it down and the peer is
    reported ``gone`` (Zenoh's ``transport/link/tx/lease``; None: the config file's,
    else 10 s, Zenoh's default); ``lease``: the lease the session opens with.
    `bundle=True`: the pub/sub packets of all the topics
    read in one wake-up go in one sample on ``<prefix>/bundle/<id>`` instead of one
    sample per topic (much less CPU with many small topics; Zenoh then routes every
    bundle to every bridge, whatever its globs, and a Zenoh subscriber of one's own sees
    no per-topic keys for them: docs/bridge.md, "Bundles"). Every bridge imports
    bundles, whatever its own mode.

    ``start()``, ``stop()``, context manager; ``status()``: a dict of counts per topic;
    ``id``: this bridge's id (32 hex digits, new at each start). Losses are also logged
    to `log_topic` (``None``: not logged).

    Raises BridgeConfigError (a bad glob, endpoint, prefix, size, lease or config file) here,
    BridgeStartError from :meth:`start` (Zenoh could not open the session, or another
    bridge serves the same root), BridgeError when eclipse-zenoh is not installed."""

    def __init__(self, globs, listen=(), connect=(), config=None, prefix="a0py", *, mode=None,
                 multicast=None, reliable=False, sizes=None, root=None, log_topic="a0py/bridge",
                 report_interval=1.0, linger=0.0, lease=None, bundle=False):
        if isinstance(globs, str):
            globs = (globs,)
        try:
            self.globs = tuple(globs)
            if not self.globs:
                raise ArgumentError("give at least one topic glob ('**' bridges every topic)")
            self._matchers = [compile_glob(g).match for g in self.globs]
            self.prefix = check_prefix(prefix)
            self._sizes = compile_sizes(sizes or {})
            self.root = current_root() if root is None else Root.parse(root)
            self.log_topic = None if log_topic is None else check_topic_name(log_topic)
            if isinstance(report_interval, bool) or not isinstance(report_interval, (int, float)) \
                    or not report_interval > 0:
                raise ArgumentError(f"report_interval must be seconds > 0, not {report_interval!r}")
            if isinstance(linger, bool) or not isinstance(linger, (int, float)) \
                    or not 0 <= linger <= MAX_LINGER:
                raise ArgumentError(f"linger must be seconds from 0 to {MAX_LINGER}, not {linger!r}")
        except BridgeConfigError:
            raise
        except ArgumentError as e:
            raise BridgeConfigError(str(e)) from None
        self.zenoh = _import_zenoh()
        self._config = zenoh_config(self.zenoh, listen=listen, connect=connect, config=config,
                                    mode=mode, multicast=multicast, lease=lease)
        self.lease = json.loads(self._config.get_json("transport/link/tx/lease")) / 1000
        self.reliable = bool(reliable)
        self.congestion_control = (self.zenoh.CongestionControl.BLOCK if self.reliable
                                   else self.zenoh.CongestionControl.DROP)
        self.report_interval = float(report_interval)
        self.linger = float(linger)
        self.bundle = bool(bundle)
        self.host = socket.gethostname()
        self.id = None
        self.id_bytes = None
        self.session = None
        self._lock = threading.Lock()
        self._counts = {}
        self.bad_samples = 0
        self._exporters = {}
        self._existing = set()
        self._discoveries = []
        self._importer = None
        self._reqrep = None
        self._export_loops = []
        self._stopping = threading.Event()
        self._poke = threading.Event()  # the reporter reports at once
        self._peers = None
        self._reporter = None
        self._reported = {}
        self._published = None
        self._root_deadman = None

    # --- what the parts share

    def matches(self, name):
        """Whether topic `name` matches one of the bridge's globs (the bridge's own
        status topic never does: each machine's bridge keeps its own)."""
        return name != STATUS_TOPIC and any(m(name) for m in self._matchers)

    def counts_of(self, protocol, name):
        """The counters of topic `name`'s `protocol` packets (made on first use)."""
        with self._lock:
            counts = self._counts.get((protocol, name))
            if counts is None:
                counts = self._counts[protocol, name] = TopicCounts()
            return counts

    # --- life

    def start(self):
        """Opens the Zenoh session and starts bridging; returns self. Raises
        BridgeStartError if Zenoh cannot open the session or another bridge serves the
        same root (one bridge per root), BridgeError if started already."""
        if self.session is not None:
            raise BridgeError("this bridge is started already")
        ident = uuid.uuid4()
        self.id, self.id_bytes = ident.hex, ident.bytes
        self._hold_root()
        try:
            self.session = self.zenoh.open(self._config)
        except Exception as e:  # zenoh's ZError names the endpoint and the reason
            self._release_root()
            raise BridgeStartError(f"Zenoh could not open a session: {e}") from None
        self._stopping.clear()
        try:
            self._peers = PeerWatch(self, on_change=self._poke.set)
            self._importer = Importer(self, self._sizes)
            self._reqrep = RpcForwarder(self)
            self._existing = {(p, t) for t, protos in list_topics(self.root).items()
                              if self.matches(t) for p in protos if p in BRIDGED}
            for glob in self.globs:
                for protocol in BRIDGED:
                    self._discoveries.append(Discovery(
                        glob, lambda name, p=protocol: self._on_topic(p, name), root=self.root,
                        protocols=(protocol,)))
                for protocol in REQREP:
                    self._discoveries.append(Discovery(
                        glob, lambda name, p=protocol: self._reqrep.on_local(p, name), root=self.root,
                        protocols=(protocol,)))
        except BaseException:
            self.stop()
            raise
        self._published = None
        self._publish_status()
        self._reporter = threading.Thread(target=self._report_loop, name="a0py-bridge-report",
                                          daemon=True)
        self._reporter.start()
        _log.info("bridge %s started (prefix %r, globs %s)", self.id, self.prefix, self.globs)
        return self

    def _hold_root(self):
        """Takes the root's bridge deadman, or raises BridgeStartError naming the bridge
        that holds it."""
        deadman = Deadman(Topic(STATUS_TOPIC, root=self.root))
        if not keeper_call(deadman.try_take):
            pid = deadman.owner_pid
            raise BridgeStartError(
                f"another bridge (pid {pid}) already serves root {self.root.spec()}: run one bridge "
                "per root (a second one would send back what the first brings in, and every remote "
                "packet would arrive twice). To try two machines on one host, give each bridge a "
                "root of its own: A0PY_ROOT=shm:robot a0py bridge --listen ... on one side, "
                "A0PY_ROOT=shm:laptop a0py bridge --connect ... on the other")
        self._root_deadman = deadman

    def _release_root(self):
        deadman, self._root_deadman = self._root_deadman, None
        if deadman is not None:
            keeper_call(deadman.release)

    def reach(self):
        """How other bridges can meet this one, from the Zenoh configuration it opened
        with (its config file's included): ``{"listen": [endpoints], "connect":
        [endpoints], "multicast": bool}``."""
        def get(key, default):
            try:
                value = json.loads(self._config.get_json(key))
            except Exception:  # a key the config does not hold
                return default
            return default if value is None else value

        def endpoints(key):
            value = get(key, [])
            if isinstance(value, dict):  # Zenoh's per-mode form: {"peer": [...], "router": [...]}
                value = [ep for eps in value.values() for ep in (eps or [])]
            return [str(ep) for ep in value]

        return {"listen": endpoints("listen/endpoints"), "connect": endpoints("connect/endpoints"),
                "multicast": bool(get("scouting/multicast/enabled", False))}

    def zenoh_sessions(self):
        """How many Zenoh sessions (peers and routers, bridges or not) this bridge's
        session is connected to now; 0 when stopped."""
        session = self.session
        if session is None:
            return 0
        try:
            return len(list(session.info.peers_zid())) + len(list(session.info.routers_zid()))
        except Exception:  # closed meanwhile
            return 0

    def _on_topic(self, protocol, name):
        # On a discovery thread.
        key = (protocol, name)
        with self._lock:
            if key in self._exporters or self.session is None or self._stopping.is_set():
                return
            self._exporters[key] = None  # claimed: a second glob's discovery skips it
        try:
            init = init_for(key in self._existing)
            if protocol == PUBSUB:
                exporter = PubsubExporter(self, name, init)
            else:
                exporter = LogCfgExporter(self, protocol, name, init)
        except Exception:
            with self._lock:
                del self._exporters[key]
            raise
        with self._lock:
            self._exporters[key] = exporter
            if protocol == PUBSUB and not self._stopping.is_set():
                loop = next((lp for lp in self._export_loops if len(lp) < lp.capacity), None)
                if loop is None:
                    loop = ExportLoop(self.linger, BundleWriter(self) if self.bundle else None)
                    self._export_loops.append(loop)
                loop.add(exporter)
        if self._stopping.is_set():
            exporter.close()

    def stop(self, timeout=5.0):
        """Stops bridging and closes the Zenoh session (each part waited for at most
        `timeout` seconds). Idempotent."""
        self._stopping.set()
        self._poke.set()
        for d in self._discoveries:
            d.close(timeout)
        self._discoveries = []
        with self._lock:
            exporters = [e for e in self._exporters.values() if e is not None]
            self._exporters = {}
            loops, self._export_loops = self._export_loops, []
        for loop in loops:
            loop.close(timeout)
        for e in exporters:
            e.close()
        if self._reqrep is not None:
            self._reqrep.close()
            self._reqrep = None
        if self._importer is not None:
            self._importer.close()
            self._importer = None
        if self._peers is not None:
            self._peers.close()  # status() still lists the peers as last seen
        session, self.session = self.session, None
        if session is not None:
            try:
                session.close()
            except Exception as e:
                _log.debug("bridge: closing the Zenoh session: %s", e)
        reporter, self._reporter = self._reporter, None
        if reporter is not None:
            reporter.join(timeout)
            self._report()
            self._publish_status(running=False)
        self._release_root()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # --- what it reports

    @property
    def export_wakeups(self):
        """How many times this bridge's pub/sub export loops were woken before their
        idle timeout: by local packets (a loop sleeps on the rings' ``notify_local``
        words, which the importer's relayed writes leave alone), by topics added or
        removed. For tests and diagnostics."""
        with self._lock:
            loops = list(self._export_loops)
        return sum(loop.wakeups for loop in loops)

    def status(self):
        """``{"id", "host", "prefix", "reliable", "bad_samples", "peers": [...],
        "topics": {name: counts}, "logs": {name: counts}, "cfgs": {name: counts},
        "rpcs": ..., "prpcs": ...}`` (pub/sub packets, log messages, configuration
        versions, requests and replies of each topic) where counts is a dict of
        :class:`~a0py.bridge.counts.TopicCounts` (exported, imported, missed_local, lost,
        duplicates, too_large, corrupt, write_errors), and each peer (another bridge
        under the same prefix, seen since this one started) ``{"id", "host", "root",
        "pid", "state": "up" | "gone" | "stopped", "since": wall time ns}``."""
        with self._lock:
            counts = sorted(self._counts.items())
        peers = self._peers.peers() if self._peers is not None else []
        return {"id": self.id, "host": self.host, "prefix": self.prefix, "reliable": self.reliable,
                "bad_samples": self.bad_samples, "peers": peers,
                "topics": {name: c.as_dict() for (p, name), c in counts if p == PUBSUB},
                "logs": {name: c.as_dict() for (p, name), c in counts if p == LOG},
                "cfgs": {name: c.as_dict() for (p, name), c in counts if p == CFG},
                "rpcs": {name: c.as_dict() for (p, name), c in counts if p == RPC},
                "prpcs": {name: c.as_dict() for (p, name), c in counts if p == PRPC}}

    def _report_loop(self):
        while True:
            self._poke.wait(self.report_interval)
            self._poke.clear()
            if self._stopping.is_set():
                return
            try:
                self._report_peers()
                self._report()
                self._publish_status()
            except Exception:
                _log.exception("bridge: reporting losses failed")

    def _report_peers(self):
        """Logs each change of a peer's state (INFO when it comes or says it stops, WARN
        when it goes without a word: a link down or a killed bridge)."""
        events = self._peers.take_events() if self._peers is not None else []
        if not events:
            return
        logger = None if self.log_topic is None else Logger(Topic(self.log_topic, root=self.root))
        try:
            for e in events:
                who = f"peer bridge {e['id']} on {e['host']} (root {e['root']}, pid {e['pid']})"
                if e["event"] == "gone":
                    text = (f"{who} gone: the link is down or that bridge stopped; nothing "
                            "crosses between the two machines until it is back")
                elif e["event"] == "stopped":
                    text = (f"{who} stopped (it said so); nothing crosses between the two "
                            "machines until a bridge serves that root again")
                elif e["event"] == "back":
                    text = f"{who} back after {e['gone_s']:.1f} s"
                elif e["event"] == "restarted":
                    text = f"{who} restarted"
                else:
                    text = f"{who} up"
                _log.log(logging.WARNING if e["event"] == "gone" else logging.INFO, "bridge: %s", text)
                if logger is not None:
                    (logger.warn if e["event"] == "gone" else logger.info)(
                        f"bridge {self.id}: {text}",
                        headers=[("peer", e["id"]), ("peer_host", e["host"]), ("peer_root", e["root"]),
                                 ("peer_pid", str(e["pid"])), ("event", e["event"]),
                                 ("since", str(e["since"]))])
        finally:
            if logger is not None:
                logger.close()

    def _publish_status(self, running=True):
        """Writes the status into the status topic (for ``a0py ls`` and ``info``) if it
        changed since it was last written."""
        status = self.status()
        status["running"] = running
        if status == self._published:
            return
        doc = dict(status, pid=os.getpid(), time_wall=time.time_ns())
        try:
            with Publisher(Topic(STATUS_TOPIC, root=self.root)) as pub:
                pub.pub(json.dumps(doc, sort_keys=True))
        except Exception as e:  # a full disk, a topic of another kind: the bridge goes on
            _log.warning("bridge: cannot write its status to %r: %s", STATUS_TOPIC, e)
            return
        self._published = status

    def _report(self):
        if self.log_topic is None:
            return
        with self._lock:
            losses = {key: c.losses() for key, c in self._counts.items()}
        changed = {key: loss for key, loss in losses.items()
                   if loss and loss != self._reported.get(key)}
        if not changed:
            return
        with Logger(Topic(self.log_topic, root=self.root)) as logger:
            for (protocol, name), loss in sorted(changed.items()):
                text = ", ".join(f"{k} {v}" for k, v in sorted(loss.items()))
                logger.warn(f"bridge {self.id}: topic {name!r} ({protocol}) undelivered: {text}",
                            headers=[("topic", name), ("protocol", protocol)]
                            + [(k, str(v)) for k, v in sorted(loss.items())])
                self._reported[protocol, name] = loss

    def __repr__(self):
        state = "started" if self.session is not None else "stopped"
        return f"<a0py.bridge.ZenohBridge {self.prefix!r} {list(self.globs)} {state}>"
