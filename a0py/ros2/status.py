"""The ROS 2 bridge's status, kept in its root for ``a0py ls``/``info``/``echo``: the
newest packet of :data:`STATUS_TOPIC` holds :meth:`a0py.ros2.Ros2Bridge.status` as JSON
plus ``running``, ``pid`` and ``time_wall`` (ns), written at start, every report
interval when it changed, and at stop. :func:`read_status` reads it back; nothing read
is trusted. Also the formatting those commands use (:func:`topic_marks`,
:func:`format_message`), so they need no rclpy.
"""

import json

__all__ = ["STATUS_TOPIC", "format_message", "read_status", "topic_marks"]

#: The topic, in the bridge's root, whose newest packet is the ROS 2 bridge's status.
STATUS_TOPIC = "a0py/ros2/status"


def read_status(root):
    """The status the ROS 2 bridge of `root` last wrote (a dict, see the module doc), or
    None when there is none or it is not one. Creates nothing."""
    from ..errors import A0Error
    from ..proto.pubsub import INIT_MOST_RECENT, SubscriberSync
    from ..proto.topic import PUBSUB, Topic

    topic = Topic(STATUS_TOPIC, root=root)
    if not topic.exists(PUBSUB):
        return None
    try:
        with SubscriberSync(topic, init=INIT_MOST_RECENT) as sub:
            pkt = sub.read()
            doc = None if pkt is None else json.loads(bytes(pkt.payload))
    except (A0Error, ValueError):
        return None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), dict) for k in
                                            ("imports", "exports", "refused")):
        return None
    return doc


def topic_marks(status, name):
    """``[("ros2 import", "/ros/name sensor_msgs/msg/Imu", counts)...]`` for topic `name`
    in a status (empty for None): how ``a0py ls``/``info`` mark a bridged topic."""
    if status is None or not status.get("running", True):
        return []
    out = []
    for direction in ("imports", "exports"):
        entry = status[direction].get(name)
        if isinstance(entry, dict):
            counts = {k: v for k, v in entry.items() if k not in ("ros", "type") and v}
            out.append((f"ros2 {direction[:-1]}", f"{entry.get('ros')} {entry.get('type')}", counts))
    return out


def format_message(value, indent=""):
    """A decoded ROS 2 message (a rosbags message, or its dict) as ``ros2 topic echo``
    prints it: ``field: value`` lines, nested messages indented by two spaces, arrays
    as ``- item`` lines (primitive arrays on one line, ``[1, 2, 3]``), then ``---``
    after the message at the top level."""
    from ..proto.ros2_types import message_to_dict

    if not isinstance(value, dict):
        value = message_to_dict(value)
    lines = _lines(value, indent)
    return "\n".join(lines + (["---"] if not indent else []))


def _scalar(v):
    if isinstance(v, str):
        return repr(v) if v == "" or v.strip() != v or ":" in v else v
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _lines(fields, indent):
    out = []
    for key, v in fields.items():
        if isinstance(v, dict):
            out.append(f"{indent}{key}:")
            out.extend(_lines(v, indent + "  "))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out.append(f"{indent}{key}:")
            for item in v:
                sub = _lines(item, indent + "  ")
                if sub:
                    sub[0] = f"{indent}- {sub[0].lstrip()}"
                out.extend(sub)
        elif isinstance(v, list):
            if len(v) > 32:
                out.append(f"{indent}{key}: '<sequence of {len(v)} values>'")
            elif v:
                out.append(f"{indent}{key}:")
                out.extend(f"{indent}- {_scalar(x)}" for x in v)
            else:
                out.append(f"{indent}{key}: []")
        else:
            out.append(f"{indent}{key}: {_scalar(v)}")
    return out
