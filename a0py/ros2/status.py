"""The ROS 2 bridge's status, kept in its root for ``a0py ls``/``info``/``echo``: the
newest packet of :data:`STATUS_TOPIC` holds :meth:`a0py.ros2.Ros2Bridge.status` as JSON
plus ``running``, ``pid`` and ``time_wall`` (ns), written at start, every report
interval when it changed, and at stop. :func:`read_status` reads it back; nothing read
is trusted. Also the formatting those commands use (:func:`topic_marks`,
:func:`format_message`), so they need no rclpy.
"""

import json
import re

__all__ = ["STATUS_TOPIC", "TRUNCATE_LENGTH", "format_message", "info_rows", "ls_cell", "read_status",
           "running_status", "topic_marks"]

#: The topic, in the bridge's root, whose newest packet is the ROS 2 bridge's status.
STATUS_TOPIC = "a0py/ros2/status"


def read_status(root):
    """The status the ROS 2 bridge of `root` last wrote (a dict, see the module doc), or
    None when there is none or it is not one. Creates nothing."""
    from ..bridge.status_topic import read_document

    doc = read_document(STATUS_TOPIC, root)
    if doc is None or not all(isinstance(doc.get(k), dict) for k in ("imports", "exports", "refused")):
        return None
    if not isinstance(doc.setdefault("services", {}), dict):
        return None
    return doc


def running_status(root):
    """The status of the ROS 2 bridge serving `root` now (:func:`read_status`), or None
    when none runs (what ``ls`` marks topics by)."""
    status = read_status(root)
    return status if status is not None and status.get("running", True) else None


def topic_marks(status, name):
    """``[("import", "/ros/name sensor_msgs/msg/Imu", counts)...]`` for topic `name` in
    a status (empty for None, or a stopped bridge): what the bridge does with it (topic
    ``import``/``export``, ``service import``/``service export`` while offered), and
    its counts that are not zero."""
    if status is None or not status.get("running", True):
        return []
    out = []
    for direction in ("imports", "exports"):
        entry = status[direction].get(name)
        if isinstance(entry, dict):
            counts = {k: v for k, v in entry.items() if k not in ("ros", "type") and v}
            out.append((direction[:-1], f"{entry.get('ros')} {entry.get('type')}", counts))
    service = status.get("services", {}).get(name)
    if isinstance(service, dict) and service.get("offered"):
        counts = {k: service.get(k) for k in ("calls", "failed", "corrupt") if service.get(k)}
        out.append((f"service {service.get('direction')}", f"{service.get('ros')} {service.get('type')}",
                    counts))
    return out


def _undelivered(counts):
    return sum(v for k, v in counts.items() if k in _LOSSES and isinstance(v, int))


def ls_cell(status, name):
    """``ls``'s ROS2 cell of topic `name`: what the bridge does with it (``import``,
    ``export``, ``service import``...; ``-`` for nothing), and what it could not
    deliver, if anything (``import (3 undelivered)``)."""
    marks = topic_marks(status, name)
    if not marks:
        return "-"
    lost = sum(_undelivered(counts) for _, _, counts in marks)
    return ",".join(m for m, _, _ in marks) + (f" ({lost} undelivered)" if lost else "")


def info_rows(status, name):
    """``info``'s rows of topic `name`: the bridge, then one row per mark with its
    counts (empty when the root's ROS 2 bridge does not carry it)."""
    marks = topic_marks(status, name)
    if not marks:
        return []
    rows = [("ros2", f"bridge {status.get('id')}, node {status.get('node')}, domain "
                     f"{status.get('domain_id')}, pid {status.get('pid')}")]
    for mark, what, counts in marks:
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing yet"
        rows.append(("", f"{mark} {what}: {shown}"))
    return rows


def format_message(value, indent=""):
    """A decoded ROS 2 message (a rosbags message, or its dict) as ``ros2 topic echo``
    prints it: YAML in block style, ``field: value`` lines, nested messages indented by
    two spaces, sequences as ``- item`` lines (longer ones cut at
    :data:`TRUNCATE_LENGTH` items, then ``- '...'``), strings quoted as YAML needs;
    then ``---`` after the message at the top level."""
    from ..proto.ros2_types import message_to_dict

    if not isinstance(value, dict):
        value = message_to_dict(value)
    lines = _lines(value, indent)
    return "\n".join(lines + (["---"] if not indent else []))


#: Sequences and strings longer than this are cut, as ``ros2 topic echo`` cuts them.
TRUNCATE_LENGTH = 128
_LOSSES = ("lost", "too_large", "write_errors", "missed_local", "corrupt", "failed")
# Plain scalars YAML (1.1, PyYAML's resolver: what ros2 topic echo prints with) would
# read as something else than a string.
_NOT_PLAIN = re.compile(
    r"^(?:[-+]?0b[01_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
    r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+"
    r"|[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|~|null|Null|NULL|=|<<"
    r"|yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
_INDICATORS = tuple(",[]{}#&*!|>'\"%@`")


def _string(v):
    if len(v) > TRUNCATE_LENGTH:
        v = v[:TRUNCATE_LENGTH] + "..."
    if not v.isprintable():
        return json.dumps(v, ensure_ascii=False)  # escaped, in YAML's double-quoted style
    if (not v or v[0] in _INDICATORS or v[0] == " " or v[-1] == " " or ": " in v or " #" in v
            or v.endswith(":") or (v[0] in "-?:" and (len(v) == 1 or v[1] == " "))
            or _NOT_PLAIN.match(v)):
        return "'" + v.replace("'", "''") + "'"
    return v


def _float(v):
    if v != v:
        return ".nan"
    if v in (float("inf"), float("-inf")):
        return ".inf" if v > 0 else "-.inf"
    text = repr(v)
    if "e" in text and "." not in text:  # as PyYAML writes 1e-05: 1.0e-05
        text = text.replace("e", ".0e")
    return text


def _scalar(v):
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _float(v)
    return str(v)


def _lines(fields, indent):
    out = []
    for key, v in fields.items():
        if isinstance(v, dict):
            out.append(f"{indent}{key}:" if v else f"{indent}{key}: {{}}")
            out.extend(_lines(v, indent + "  "))
        elif isinstance(v, list) and not v:
            out.append(f"{indent}{key}: []")
        elif isinstance(v, list):
            out.append(f"{indent}{key}:")
            for item in v[:TRUNCATE_LENGTH]:
                if isinstance(item, dict):
                    sub = _lines(item, indent + "  ") or [f"{indent}  {{}}"]
                    sub[0] = f"{indent}- {sub[0].lstrip()}"
                    out.extend(sub)
                else:
                    out.append(f"{indent}- {_scalar(item)}")
            if len(v) > TRUNCATE_LENGTH:
                out.append(f"{indent}- '...'")
        else:
            out.append(f"{indent}{key}: {_scalar(v)}")
    return out
