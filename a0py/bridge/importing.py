"""Remote packets into local topics: :class:`Importer` writes the samples of other
bridges (:mod:`a0py.bridge.exporting` on their machines: pub/sub batches and bundles,
log messages, configuration versions) into the local topics matching the bridge's
globs.

Invariants:

* The importer ignores samples its own session sent, and writes a packet of a given
  (exporting bridge, topic) only if its number is above the last one written: a packet
  seen twice is written once (``duplicates``, a batch partly seen included), a gap is
  counted as ``lost``. A batch's packets are written with one lock, in order.
* It hands each sample to one compiled call (:mod:`a0py.bridge._ingest`) that checks
  the attachment and each packet's layout, counts duplicates and gaps, and writes each
  packet with the bridge headers straight into its frame (no copy between the sample
  and the ring). Nothing received is trusted: what fails a check is counted, never
  written past a bound.
* It writes as a relayed writer (:attr:`a0py._core.Transport.relayed`): what it imports
  wakes every local reader but not this bridge's own export loops.
* Configurations: it writes a version holding the topic's writers' lock, as
  :class:`a0py.Cfg` does, so a local merge patch never merges into a version the bridge
  has just replaced.
* Every importer takes bundles (:class:`~a0py.bridge._ingest.BundleIngest`, one call per
  bundle), whatever its own mode, with the same per-topic numbers, duplicates, gaps and
  counts as batch samples; sections of topics its globs do not take are skipped
  uncounted.
"""

import logging
import threading

from .. import _core
from ..proto.discovery import compile_glob
from ..proto.topic import CFG, PUBSUB, Topic, parse_size, topic_arena
from ._ingest import BAD_SAMPLE, INGESTED, OWN, WRITE_FAILED, BundleIngest, TopicIngest
from .wire import BRIDGED, BUNDLE_CHUNK, WireError, bundle_topic, key_of, topic_of_key

__all__ = ["Importer", "compile_sizes"]

_log = logging.getLogger("a0py.bridge")

# A topic the importer creates holds at least this many frames of its first packet's size.
_FRAMES_PER_TOPIC = 4
# Keys remembered by the importer (what it learns from a key expression), forgotten all at
# once past this many.
_MAX_CACHED = 4096


class Importer:
    """Writes remote topics matching the bridge's globs into local ones (see the module
    doc). `sizes`: ``[(compiled glob, bytes)]``, the first match sizing a topic this
    importer creates.

    Per sample, Python looks up the topic's :class:`~a0py.bridge._ingest.TopicIngest` by
    its key expression; one compiled call does the rest (attachment, duplicates and
    gaps, each packet's check, the bridge headers spliced into the ring's frames, one
    lock and one commit)."""

    def __init__(self, bridge, sizes):
        self._bridge = bridge
        self._sizes = sizes
        self._lock = threading.Lock()
        self._topics = {}   # (protocol, topic) -> TopicIngest
        self._keys = {}     # key expression -> (TopicIngest, topic), or None: not ours
        self._subscribers = [bridge.session.declare_subscriber(
            key_of(bridge.prefix, protocol, "**"), self._on_sample,
            allowed_origin=bridge.zenoh.Locality.REMOTE) for protocol in BRIDGED]
        # bundles of every bundling bridge, whatever this bridge's own mode
        self._bundles = BundleIngest(bridge.id_bytes, self._bundled_topic)
        self._subscribers.append(bridge.session.declare_subscriber(
            f"{bridge.prefix}/{BUNDLE_CHUNK}/*", self._on_bundle,
            allowed_origin=bridge.zenoh.Locality.REMOTE))

    def _refuse(self, why):
        self._bridge.bad_samples += 1
        _log.debug("bridge: refused a sample: %s", why)

    def _topic_of(self, key):
        """``(TopicIngest, topic)`` of a key expression, None if the bridge does not
        import it; WireError if it names no topic. Remembered per key."""
        found = self._keys.get(key, False)
        if found is False:
            protocol, name = topic_of_key(self._bridge.prefix, key)
            found = None
            if self._bridge.matches(name):
                with self._lock:
                    state = self._topics.get((protocol, name))
                    if state is None:
                        state = self._topics[protocol, name] = self._new_state(protocol, name)
                found = (state, name)
            if len(self._keys) >= _MAX_CACHED:
                self._keys.clear()
            self._keys[key] = found
        return found

    def _new_state(self, protocol, name):
        bridge = self._bridge

        def opener(frame_size):
            transport = self._open(protocol, name, frame_size)
            return transport, (_core.Deadman(transport.arena) if protocol == CFG else None)

        return TopicIngest(bridge.id_bytes, lambda: bridge.counts_of(protocol, name), opener)

    def _on_sample(self, sample):
        # On a Zenoh thread; nothing in the sample is trusted (TopicIngest checks it).
        key = str(sample.key_expr)
        found = self._keys.get(key, False)  # _topic_of's lookup, without its call when known
        if found is False:
            try:
                found = self._topic_of(key)
            except WireError as e:
                self._refuse(e)
                return
        if found is None:
            return
        state, name = found
        att = sample.attachment
        with self._lock:
            done = state.ingest(sample.payload.to_bytes(), None if att is None else att.to_bytes())
        if done in (INGESTED, OWN):
            return
        if done == BAD_SAMPLE:
            self._refuse(state.error)
        elif done == WRITE_FAILED:
            _log.warning("bridge: cannot write topic %r: %s", name, state.error)
        else:
            _log.debug("bridge: topic %r: refused packets: %s", name, state.error)

    def _bundled_topic(self, raw):
        """The TopicIngest of a bundle section's topic (`raw`: its name's bytes), None if
        the bridge does not import it; WireError if it names none. Called by
        :class:`~a0py.bridge._ingest.BundleIngest` under ``self._lock``."""
        name = bundle_topic(raw)
        if not self._bridge.matches(name):
            return None
        state = self._topics.get((PUBSUB, name))
        if state is None:
            state = self._topics[PUBSUB, name] = self._new_state(PUBSUB, name)
        return state

    def _on_bundle(self, sample):
        # On a Zenoh thread; nothing in the sample is trusted (BundleIngest checks it).
        att = sample.attachment
        bundles = self._bundles
        with self._lock:
            done = bundles.ingest(sample.payload.to_bytes(), None if att is None else att.to_bytes())
            failures, error = bundles.failures, bundles.error
        if done == BAD_SAMPLE:
            self._refuse(error)
        for name, code, why in failures:
            if code == WRITE_FAILED:
                _log.warning("bridge: cannot write topic %r: %s", name, why)
            else:
                _log.debug("bridge: topic %r: refused packets: %s", name, why)

    def _open(self, protocol, name, frame_size):
        size = next((s for match, s in self._sizes if match(name)), None) if protocol == PUBSUB else None
        topic = Topic(name, root=self._bridge.root)
        if size is None:
            need = _core.arena_size_for(frame_size, _FRAMES_PER_TOPIC)
            size = max(topic.size_for(protocol), need)
        return _core.Transport(topic_arena(Topic(name, root=topic.root, size={protocol: size}), protocol))

    def close(self):
        for sub in self._subscribers:
            try:
                sub.undeclare()
            except Exception:  # the session closed first
                pass


def compile_sizes(sizes):
    """``[(match, bytes)]`` from ``{glob: size}`` or ``[(glob, size)]``."""
    items = sizes.items() if hasattr(sizes, "items") else sizes
    return [(compile_glob(g).match, parse_size(s, f"bridge size for {g!r}")) for g, s in items]
