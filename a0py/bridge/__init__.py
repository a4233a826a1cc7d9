"""Topics across machines over Zenoh (docs/bridge.md).

:class:`ZenohBridge` publishes the local topics matching its globs to Zenoh and writes
the remote ones into local topics, loop-free (a bridge exports only packets published
on its own machine) and counting what it could not deliver. Modules: the wire format
(:mod:`~a0py.bridge.wire`: key expressions, attachments, bridged packets and their
headers), the Zenoh configuration (:mod:`~a0py.bridge.config`), export of pub/sub
packets (in batches, or several topics' batches in one bundle), log messages and
configurations (:mod:`~a0py.bridge.exporting`) and their import
(:mod:`~a0py.bridge.importing`),
RPC and PRPC (:mod:`~a0py.bridge.reqrep`), the other bridges it reaches or lost
(:mod:`~a0py.bridge.peers`), the counters and the status kept for ``a0py
ls``/``info`` (:mod:`~a0py.bridge.counts`), the
bridge (:mod:`~a0py.bridge.bridge`), errors (:mod:`~a0py.bridge.errors`).
"""

from .bridge import ZenohBridge
from .counts import TopicCounts
from .errors import BridgeConfigError, BridgeError, BridgeStartError
from .wire import HOST, ORIGIN, SEQ, was_bridged

__all__ = ["HOST", "ORIGIN", "SEQ", "BridgeConfigError", "BridgeError", "BridgeStartError",
           "TopicCounts", "ZenohBridge", "was_bridged"]
