"""Quality of service across the bridge, as rosbag2 chooses it.

* **Imports** take their publishers' QoS: reliable if every publisher of the topic is
  reliable (else best effort, which a reliable publisher also serves), transient local
  if every publisher is (so a latched message reaches the bridge, and through it an
  a0py reader that starts later), else volatile; keep last :data:`IMPORT_DEPTH`.
  Publishers that come later with another QoS do not change a subscription made.
* **Exports** are reliable, volatile, keep last :data:`EXPORT_DEPTH` (:data:`EXPORT_DEFAULT`)
  unless a rule says otherwise: ``{glob: "best_effort,transient_local,depth=1"}``, the
  first glob that matches a topic wins; a spec is comma-separated words among
  ``reliable``, ``best_effort``, ``volatile``, ``transient_local`` and ``depth=N``, each
  changing the default.
"""

from .errors import Ros2ConfigError
from .names import compile_globs

__all__ = ["EXPORT_DEFAULT", "EXPORT_DEPTH", "IMPORT_DEPTH", "QosRules", "import_qos", "parse_qos", "profile"]

#: The history depth of import subscriptions (room for a burst while the bridge writes).
IMPORT_DEPTH = 1000
#: The history depth of export publishers by default.
EXPORT_DEPTH = 100
#: The export QoS when no rule matches.
EXPORT_DEFAULT = "reliable,volatile,depth=100"


def parse_qos(spec):
    """``{"reliable": bool, "transient_local": bool, "depth": int}`` of a spec (see the
    module doc), starting from the export default. Raises Ros2ConfigError naming the
    word it does not know."""
    out = {"reliable": True, "transient_local": False, "depth": EXPORT_DEPTH}
    if not isinstance(spec, str):
        raise Ros2ConfigError(f"a QoS is a str like 'reliable,transient_local,depth=10', not "
                              f"{type(spec).__name__}")
    for word in (w.strip() for w in spec.split(",")):
        if word in ("reliable", "best_effort"):
            out["reliable"] = word == "reliable"
        elif word in ("volatile", "transient_local"):
            out["transient_local"] = word == "transient_local"
        elif word.startswith("depth=") and word[6:].isdigit() and int(word[6:]) > 0:
            out["depth"] = int(word[6:])
        elif word:
            raise Ros2ConfigError(f"QoS {spec!r}: {word!r} is not one of reliable, best_effort, "
                                  "volatile, transient_local, depth=N (N > 0)")
    return out


class QosRules:
    """The export QoS of each topic: `rules` maps globs to specs (a dict, or a list of
    pairs; first match wins). Raises Ros2ConfigError for a bad glob or spec."""

    def __init__(self, rules=None):
        items = list(rules.items() if hasattr(rules, "items") else (rules or ()))
        self._rules = []
        for glob, spec in items:
            ((_, match, _),) = compile_globs([glob], "export QoS glob")
            self._rules.append((match, parse_qos(spec)))
        self._default = parse_qos(EXPORT_DEFAULT)

    def for_topic(self, name):
        """The QoS dict of a0py topic `name`."""
        return next((q for match, q in self._rules if match(name)), self._default)


def profile(rclpy_qos, qos):
    """An rclpy QoSProfile of a QoS dict."""
    return rclpy_qos.QoSProfile(
        history=rclpy_qos.HistoryPolicy.KEEP_LAST, depth=qos["depth"],
        reliability=(rclpy_qos.ReliabilityPolicy.RELIABLE if qos["reliable"]
                     else rclpy_qos.ReliabilityPolicy.BEST_EFFORT),
        durability=(rclpy_qos.DurabilityPolicy.TRANSIENT_LOCAL if qos["transient_local"]
                    else rclpy_qos.DurabilityPolicy.VOLATILE))


def import_qos(publishers):
    """The QoS dict an import subscription takes from its topic's `publishers` (rclpy's
    TopicEndpointInfo list; none: reliable and volatile)."""
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

    profiles = [p.qos_profile for p in publishers]
    return {"reliable": all(q.reliability == ReliabilityPolicy.RELIABLE for q in profiles),
            "transient_local": bool(profiles) and all(
                q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in profiles),
            "depth": IMPORT_DEPTH}
