"""What an exported a0py topic becomes in ROS 2, by its schema:

=================================  =====================================  ==========
a0py schema                        ROS 2 type                             payload
=================================  =====================================  ==========
``ros2msg`` (message encoding      the schema's name                      unchanged
``cdr``)
``foxglove.RawImage`` (protobuf)   ``sensor_msgs/msg/Image``              rebuilt
``foxglove.CompressedImage``       ``sensor_msgs/msg/CompressedImage``    rebuilt
anything else, or no schema        refused, one line naming the topic
=================================  =====================================  ==========

A rebuilt image keeps its timestamp (``header.stamp``), frame id, size, encoding, step
and bytes; the pixels are copied once. Every payload is checked before it is
published (a ROS 2 subscriber that gets bytes that are not its type fails): a
``ros2msg`` payload must deserialize as its type, an image's fields must parse; one that
does not is dropped and counted as ``corrupt``.
"""

import struct

from ..proto import protobuf_wire as wire
from ..proto import ros2_types

__all__ = ["Refused", "exporter_for"]

_RAW_IMAGE, _COMPRESSED_IMAGE = "foxglove.RawImage", "foxglove.CompressedImage"


class Refused(Exception):
    """A topic the bridge does not export; the message says why."""


def _stamp(buf, span):
    seconds = nanos = 0
    for number, wire_type, value, _ in wire.fields(buf, span[0], span[1]):
        if number == 1 and wire_type == wire.VARINT:
            seconds = value
        elif number == 2 and wire_type == wire.VARINT:
            nanos = value
    return seconds * 1_000_000_000 + nanos


def raw_image_to_cdr(payload):
    """The CDR ``sensor_msgs/msg/Image`` of a ``foxglove.RawImage`` payload; ValueError
    if it is not one."""
    buf = memoryview(payload).cast("B")
    stamp, frame, width, height, encoding, step, data = 0, "", 0, 0, "", 0, (0, 0)
    for number, wire_type, value, _ in wire.fields(buf):
        if number == 1 and wire_type == wire.LENGTH:
            stamp = _stamp(buf, value)
        elif number == 7 and wire_type == wire.LENGTH:
            frame = bytes(buf[value[0]:value[1]]).decode("utf-8")
        elif number == 2 and wire_type == wire.FIXED32:
            width = value
        elif number == 3 and wire_type == wire.FIXED32:
            height = value
        elif number == 4 and wire_type == wire.LENGTH:
            encoding = bytes(buf[value[0]:value[1]]).decode("utf-8")
        elif number == 5 and wire_type == wire.FIXED32:
            step = value
        elif number == 6 and wire_type == wire.LENGTH:
            data = value
    prefix, pixels = ros2_types.image_cdr(stamp, frame, height, width, encoding, step,
                                          buf[data[0]:data[1]])
    return prefix + pixels


def compressed_image_to_cdr(payload):
    """The CDR ``sensor_msgs/msg/CompressedImage`` of a ``foxglove.CompressedImage``
    payload; ValueError if it is not one."""
    buf = memoryview(payload).cast("B")
    stamp, frame, fmt, data = 0, "", "", (0, 0)
    for number, wire_type, value, _ in wire.fields(buf):
        if number == 1 and wire_type == wire.LENGTH:
            stamp = _stamp(buf, value)
        elif number == 4 and wire_type == wire.LENGTH:
            frame = bytes(buf[value[0]:value[1]]).decode("utf-8")
        elif number == 3 and wire_type == wire.LENGTH:
            fmt = bytes(buf[value[0]:value[1]]).decode("utf-8")
        elif number == 2 and wire_type == wire.LENGTH:
            data = value
    prefix, body = ros2_types.compressed_image_cdr(stamp, frame, fmt, buf[data[0]:data[1]])
    return prefix + body


def _checked_cdr(type_name):
    """A converter that returns a ``ros2msg`` payload as bytes once it deserializes as
    `type_name` (rclpy's own deserializer, in C; an Image's layout is parsed instead,
    which costs no copy of its pixels)."""
    if type_name == ros2_types.IMAGE:
        def check_image(payload):
            try:
                ros2_types.parse_image(payload, "")
            except Exception as e:
                raise ValueError(str(e)) from None
            return bytes(payload)
        return check_image
    from rclpy.serialization import deserialize_message

    cls = message_class(type_name)

    def check(payload):
        data = bytes(payload)
        try:
            deserialize_message(data, cls)
        except Exception as e:  # rclpy raises RCLError, or its C++ exceptions
            raise ValueError(f"not a CDR {type_name} ({e})") from None
        return data
    return check


def message_class(type_name):
    """rclpy's class of a ``pkg/msg/Name`` or ``pkg/srv/Name`` type; Refused naming the
    pip package when its package is not installed."""
    import importlib

    pkg, kind, name = type_name.split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ImportError, AttributeError):
        raise Refused(f"ROS 2 type {type_name} is not installed for rclpy: pip install "
                      f"{ros2_types.pip_package(pkg)}") from None


def exporter_for(schema):
    """``(ROS 2 type name, converter)`` for an a0py topic of `schema` (an a0py Schema
    or None): the converter turns a packet's payload into the CDR bytes to publish
    (ValueError for one that is not what its schema says). Raises Refused for a
    topic the bridge does not export."""
    if schema is None or not schema.encoding:
        raise Refused("it has no schema (raw bytes): publish ROS 2 messages (Schema.ros2) or "
                      "images (pub_image) on it")
    if schema.encoding == "ros2msg" and schema.message_encoding == "cdr":
        message_class(schema.name)  # refused here when rclpy lacks the type
        return schema.name, _checked_cdr(schema.name)
    if schema.encoding == "protobuf" and schema.name == _RAW_IMAGE:
        return ros2_types.IMAGE, _guarded(raw_image_to_cdr)
    if schema.encoding == "protobuf" and schema.name == _COMPRESSED_IMAGE:
        return ros2_types.COMPRESSED_IMAGE, _guarded(compressed_image_to_cdr)
    raise Refused(f"it carries {schema.describe()}, which has no ROS 2 type (the bridge exports "
                  "ros2msg topics and foxglove.RawImage/CompressedImage)")


def _guarded(convert):
    def run(payload):
        try:
            return convert(payload)
        except (ValueError, UnicodeDecodeError, struct.error) as e:
            raise ValueError(f"not a valid image message ({e})") from None
    return run
