"""Recordings that a0py did not write: small MCAP files and rosbag2
directories made during the test run by the tools users have (the official
``mcap`` writer, ``mcap-ros2-support``, ``rosbags``, ``foxglove-sdk``,
``mcap-protobuf-support``), with the values each message holds, so a test
compares what a0py reads against what the tool wrote.

Every writer returns a :class:`Written`: the path, and per topic the list
of messages as ``(log_time, publish_time, sequence, data, value)`` where
``data`` is the message's bytes as recorded and ``value`` what it decodes
to (a dict, or None for raw bytes)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

T0 = 1_790_000_000_000_000_000  # ns since the epoch (2026)
IMU_TYPE = "sensor_msgs/msg/Imu"


@dataclass
class Written:
    path: str
    messages: dict = field(default_factory=dict)  # topic -> [(log_time, publish_time, sequence, data, value)]
    schema_names: dict = field(default_factory=dict)  # topic -> schema name ("" when none)
    message_encodings: dict = field(default_factory=dict)  # topic -> message encoding

    def count(self, topic=None):
        if topic is None:
            return sum(len(v) for v in self.messages.values())
        return len(self.messages.get(topic, ()))

    def add(self, topic, schema_name, encoding, item):
        self.messages.setdefault(topic, []).append(item)
        self.schema_names[topic] = schema_name
        self.message_encodings[topic] = encoding


def json_value(i):
    """The ``i``-th JSON message of :func:`write_mcap_json`: nested, a list, a null."""
    return {"i": i, "x": i * 0.5, "name": f"ev{i}", "tags": ["a", "b"][: i % 3],
            "pos": {"x": float(i), "y": -float(i)}, "note": None if i % 2 else "even"}


JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "i": {"type": "integer"},
        "x": {"type": "number"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "pos": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}},
        "note": {"type": ["string", "null"]},
    },
}


def write_mcap_json(path, n=2000, topic="/ev/json", with_schema=True, chunk_size=64 * 1024,
                    compression="zstd", summary=True, bad=(), schema_data=None):
    """A JSON channel written by the official ``mcap`` writer: ``jsonschema``
    schema ``ev.Event`` (``with_schema``; its data ``schema_data`` when
    given) or no schema at all (schema id 0). The messages numbered in
    ``bad`` are text that is not JSON (their value None)."""
    from mcap.writer import CompressionType, Writer

    comp = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}[compression]
    out = Written(path)
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=chunk_size, compression=comp, use_summary_offsets=summary,
                   use_chunking=True)
        w.start(profile="", library="mcap-python-test")
        sid = 0
        if with_schema:
            data = json.dumps(JSON_SCHEMA).encode() if schema_data is None else schema_data
            sid = w.register_schema("ev.Event", "jsonschema", data)
        cid = w.register_channel(topic, "json", sid, metadata={"origin": "mcap-writer"})
        for i in range(n):
            value = None if i in bad else json_value(i)
            data = b"{not json %d" % i if i in bad else json.dumps(value).encode()
            log, pub = T0 + i * 1_000_000, T0 + i * 1_000_000 - 500
            w.add_message(cid, log_time=log, data=data, publish_time=pub, sequence=i)
            out.add(topic, "ev.Event" if with_schema else "", "json", (log, pub, i, data, value))
        w.finish()
    if not summary:
        cut_summary(path)
    return out


def write_mcap_raw(path, n=500, topic="/raw/blob", encoding="application/octet-stream", size=100):
    """A channel of raw bytes with no schema (schema id 0), from the official writer."""
    from mcap.writer import Writer

    out = Written(path)
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=16 * 1024)
        w.start(profile="", library="mcap-python-test")
        cid = w.register_channel(topic, encoding, 0)
        for i in range(n):
            data = bytes((i + k) % 256 for k in range(size))
            log = T0 + i * 2_000_000
            w.add_message(cid, log_time=log, data=data, publish_time=log, sequence=i + 1)
            out.add(topic, "", encoding, (log, log, i + 1, data, None))
        w.finish()
    return out


def imu_value(i, robot=0):
    """The ``i``-th Imu message as a dict (mcap-ros2-support's writer takes dicts)."""
    stamp_ns = T0 + i * 10_000_000
    return {
        "header": {"stamp": {"sec": stamp_ns // 1_000_000_000, "nanosec": stamp_ns % 1_000_000_000},
                   "frame_id": f"imu{robot}"},
        "orientation": {"x": 0.0, "y": 0.0, "z": 0.1 * robot, "w": 1.0},
        "orientation_covariance": [0.0] * 9,
        "angular_velocity": {"x": 0.01 * i, "y": 0.0, "z": -0.01 * i},
        "angular_velocity_covariance": [float(k) for k in range(9)],
        "linear_acceleration": {"x": 9.81 + robot, "y": 0.001 * i, "z": 0.5},
        "linear_acceleration_covariance": [0.0] * 9,
    }


# sensor_msgs/msg/Imu as a ROS 2 recorder stores it (``ros2msg``: the type's
# fields, then each dependency after a line of ``=``), as ROS 2 defines the types.
_SEP = "=" * 80
IMU_MSGDEF = "\n".join([
    "std_msgs/Header header",
    "geometry_msgs/Quaternion orientation",
    "float64[9] orientation_covariance",
    "geometry_msgs/Vector3 angular_velocity",
    "float64[9] angular_velocity_covariance",
    "geometry_msgs/Vector3 linear_acceleration",
    "float64[9] linear_acceleration_covariance",
    _SEP, "MSG: std_msgs/Header", "builtin_interfaces/Time stamp", "string frame_id",
    _SEP, "MSG: builtin_interfaces/Time", "int32 sec", "uint32 nanosec",
    _SEP, "MSG: geometry_msgs/Quaternion", "float64 x", "float64 y", "float64 z", "float64 w",
    _SEP, "MSG: geometry_msgs/Vector3", "float64 x", "float64 y", "float64 z",
]) + "\n"


def write_ros2_mcap(path, n=1000, topic="/imu", robot=0, extra_string_topic=True):
    """ROS 2 messages in CDR written by ``mcap-ros2-support`` (profile
    ``ros2``): ``sensor_msgs/msg/Imu`` on ``topic`` and, with
    ``extra_string_topic``, ``std_msgs/msg/String`` on ``/chatter``."""
    from mcap_ros2.writer import Writer

    out = Written(path)
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=64 * 1024)
        imu = w.register_msgdef(IMU_TYPE, IMU_MSGDEF)
        chatter = w.register_msgdef("std_msgs/msg/String", "string data\n") if extra_string_topic else None
        for i in range(n):
            log = T0 + i * 10_000_000
            value = imu_value(i, robot)
            w.write_message(topic, imu, value, log_time=log, publish_time=log, sequence=i)
            out.add(topic, IMU_TYPE, "cdr", (log, log, i, None, value))
            if chatter is not None and i % 10 == 0:
                s = {"data": f"hello {i}"}
                w.write_message("/chatter", chatter, s, log_time=log + 1, publish_time=log + 1, sequence=i // 10)
                out.add("/chatter", "std_msgs/msg/String", "cdr", (log + 1, log + 1, i // 10, None, s))
        w.finish()
    _fill_data(out)
    return out


def write_rosbag2(directory, n=300, robot=0, topics=("/imu",), version=9, t0=T0, start=0):
    """A rosbag2 directory (``metadata.yaml`` + one MCAP file) written by
    ``rosbags`` with CDR ``sensor_msgs/msg/Imu`` messages on each of ``topics``
    (message ``start + i`` at ``t0 + i * 10 ms``). ``directory`` must not exist yet."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    Imu = ts.types[IMU_TYPE]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    Quaternion = ts.types["geometry_msgs/msg/Quaternion"]
    Vector3 = ts.types["geometry_msgs/msg/Vector3"]
    import numpy as np

    out = Written(str(directory))
    with Writer(directory, version=version, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {t: w.add_connection(t, IMU_TYPE, typestore=ts) for t in topics}
        for i in range(n):
            for t, conn in conns.items():
                v = imu_value(start + i, robot)
                st = v["header"]["stamp"]
                msg = Imu(
                    header=Header(stamp=Time(sec=st["sec"], nanosec=st["nanosec"]), frame_id=v["header"]["frame_id"]),
                    orientation=Quaternion(**v["orientation"]),
                    orientation_covariance=np.array(v["orientation_covariance"], dtype=np.float64),
                    angular_velocity=Vector3(**v["angular_velocity"]),
                    angular_velocity_covariance=np.array(v["angular_velocity_covariance"], dtype=np.float64),
                    linear_acceleration=Vector3(**v["linear_acceleration"]),
                    linear_acceleration_covariance=np.array(v["linear_acceleration_covariance"], dtype=np.float64),
                )
                data = bytes(ts.serialize_cdr(msg, IMU_TYPE))
                log = t0 + i * 10_000_000
                w.write(conn, log, data)
                out.add(t, IMU_TYPE, "cdr", (log, log, None, data, v))
    return out


def write_foxglove_mcap(path, n=50):
    """Foxglove's well-known schemas written by ``foxglove-sdk``'s MCAP
    writer: ``foxglove.Log`` on ``/log`` and ``foxglove.FrameTransform`` on
    ``/tf`` (the SDK encodes them as protobuf)."""
    import foxglove
    from foxglove.messages import FrameTransform, Log, LogLevel, Quaternion, Timestamp, Vector3

    out = Written(path)
    ctx = foxglove.Context()
    log_ch = foxglove.channels.LogChannel("/log", context=ctx)
    tf_ch = foxglove.channels.FrameTransformChannel("/tf", context=ctx)
    with foxglove.open_mcap(path, allow_overwrite=True, context=ctx):
        for i in range(n):
            t = T0 + i * 1_000_000
            ts = Timestamp(sec=t // 1_000_000_000, nsec=t % 1_000_000_000)
            log_ch.log(Log(timestamp=ts, level=LogLevel.Info, message=f"line {i}", name="node", file="f.py", line=i),
                       log_time=t)
            tf_ch.log(FrameTransform(timestamp=ts, parent_frame_id="world", child_frame_id="base",
                                     translation=Vector3(x=float(i), y=0.0, z=0.0),
                                     rotation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)), log_time=t)
            out.add("/log", "foxglove.Log", "protobuf", (t, None, None, None, {"message": f"line {i}", "line": i}))
            out.add("/tf", "foxglove.FrameTransform", "protobuf",
                    (t, None, None, None, {"parent_frame_id": "world", "translation": {"x": float(i)}}))
    _fill_data(out)
    return out


def write_protobuf_mcap(path, n=200, topic="/pb/log"):
    """Protobuf messages (``foxglove.Log`` from ``foxglove-schemas-protobuf``)
    written by ``mcap-protobuf-support``'s writer."""
    from foxglove_schemas_protobuf.Log_pb2 import Log
    from mcap_protobuf.writer import Writer

    out = Written(path)
    with open(path, "wb") as f, Writer(f) as w:
        for i in range(n):
            msg = Log(message=f"pb {i}", name="n", file="f", line=i, level=2)
            t = T0 + i * 1_000_000
            msg.timestamp.FromNanoseconds(t)
            w.write_message(topic, msg, log_time=t, publish_time=t, sequence=i)
            out.add(topic, "foxglove.Log", "protobuf", (t, t, i, msg.SerializeToString(), {"message": f"pb {i}", "line": i}))
    return out


def _fill_data(out):
    """Fill in each message's recorded bytes (and times) from the file, read
    with the official reader, for writers that do not hand them back."""
    from mcap.reader import make_reader

    by_topic = {}
    with open(out.path, "rb") as f:
        for _, ch, m in make_reader(f).iter_messages(log_time_order=False):
            by_topic.setdefault(ch.topic, []).append(m)
    for topic, items in out.messages.items():
        got = by_topic.get(topic, [])
        assert len(got) == len(items), (topic, len(got), len(items))
        out.messages[topic] = [(m.log_time, m.publish_time, m.sequence, m.data, it[4])
                               for m, it in zip(got, items, strict=True)]


def cut_summary(path):
    """Cut a file just before its summary (as a writer that crashed would
    leave it: no summary, no footer): readers must plan it by a scan."""
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        footer = make_reader(f).get_summary()  # noqa: F841 - proves it had one
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(size - 8 - 29)
        body = f.read(29)
    summary_start = int.from_bytes(body[9:17], "little")
    with open(path, "r+b") as f:
        f.truncate(summary_start or size - 8 - 29)


def write_rosbag2_split(directory, names=("run_9.mcap", "run_10.mcap"), n=50, topic="/imu"):
    """A rosbag2 bag split into several MCAP files, as ``ros2 bag record
    --max-bag-size`` leaves one: each file written by ``rosbags`` (``n``
    Imu messages each, later files later in time), one ``metadata.yaml``
    listing them in ``names``' order (by default not their name order:
    ``run_10`` sorts before ``run_9``). Returns a :class:`Written` whose
    messages are in play order, and ``files`` (the paths in metadata order)."""
    import shutil

    from ruamel.yaml import YAML

    directory = str(directory)
    os.makedirs(directory)
    out = Written(directory)
    out.files = []
    metas = []
    for k, name in enumerate(names):
        part = os.path.join(directory, f".part{k}")
        w = write_rosbag2(part, n=n, topics=(topic,), t0=T0 + k * n * 10_000_000, start=k * n)
        for t, items in w.messages.items():
            for item in items:
                out.add(t, IMU_TYPE, "cdr", item)
        src = os.path.join(part, os.path.basename(part) + ".mcap")
        dst = os.path.join(directory, name)
        shutil.move(src, dst)
        out.files.append(dst)
        yaml = YAML(typ="safe", pure=True)
        with open(os.path.join(part, "metadata.yaml")) as f:
            metas.append(yaml.load(f))
        shutil.rmtree(part)
    info = metas[0]["rosbag2_bagfile_information"]
    info["relative_file_paths"] = list(names)
    info["message_count"] = sum(m["rosbag2_bagfile_information"]["message_count"] for m in metas)
    info["files"] = [dict(m["rosbag2_bagfile_information"]["files"][0], path=name) for m, name in zip(metas, names)]
    for entry in info["topics_with_message_count"]:
        entry["message_count"] = len(out.messages[entry["topic_metadata"]["name"]])
    yaml = YAML()
    with open(os.path.join(directory, "metadata.yaml"), "w") as f:
        yaml.dump(metas[0], f)
    return out


def write_rosbag2_sqlite(directory, n=5):
    """A rosbag2 bag in ``rosbags``' default storage (sqlite3, a ``.db3`` file)."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    String = ts.types["std_msgs/msg/String"]
    with Writer(directory, version=9) as w:
        conn = w.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        for i in range(n):
            w.write(conn, T0 + i, bytes(ts.serialize_cdr(String(data=f"s{i}"), "std_msgs/msg/String")))
    return str(directory)


def write_rosbag2_compressed(directory, mode="file", n=5):
    """A rosbag2 bag stored as MCAP with rosbag2's zstd compression, ``mode``
    ``file`` (``NAME.mcap.zstd``) or ``message`` (each message compressed)."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    String = ts.types["std_msgs/msg/String"]
    w = Writer(directory, version=9, storage_plugin=StoragePlugin.MCAP)
    w.set_compression({"file": CompressionMode.FILE, "message": CompressionMode.MESSAGE}[mode], CompressionFormat.ZSTD)
    with w:
        conn = w.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        for i in range(n):
            w.write(conn, T0 + i, bytes(ts.serialize_cdr(String(data=f"s{i}"), "std_msgs/msg/String")))
    return str(directory)


def write_mcap_channels(path, channels, profile=""):
    """Channels of one's choosing from the official ``mcap`` writer:
    ``channels`` is [(topic, message encoding, (schema name, schema encoding,
    schema data) or None, [message bytes...])]; message k of every channel
    is logged at ``T0 + k ms`` with sequence k."""
    from mcap.writer import Writer

    out = Written(path)
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=16 * 1024)
        w.start(profile=profile, library="mcap-python-test")
        for topic, encoding, schema, datas in channels:
            sid = w.register_schema(*schema) if schema is not None else 0
            cid = w.register_channel(topic, encoding, sid)
            for k, data in enumerate(datas):
                log = T0 + k * 1_000_000
                w.add_message(cid, log_time=log, data=data, publish_time=log + 1, sequence=k)
                out.add(topic, schema[0] if schema else "", encoding, (log, log + 1, k, data, None))
        w.finish()
    return out


# A ROS 2 message with a field of every kind the decoders map (docs/spark.md
# "Decoded columns"), as ``ros2msg`` text with its dependencies.
ALL_TYPES_TYPE = "test_msgs/msg/AllTypes"
ALL_TYPES_MSGDEF = "\n".join([
    "int8 i8", "uint8 u8", "int16 i16", "uint16 u16", "int32 i32", "uint32 u32", "int64 i64", "uint64 u64",
    "float32 f32", "float64 f64", "bool flag", "string text", "byte one_byte", "char one_char",
    "uint8[] blob", "byte[] octets", "int32[] ints", "string[] names", "float32[3] vec", "bool[] flags",
    "uint64[] big", "builtin_interfaces/Duration dur", "builtin_interfaces/Time when",
    "test_msgs/Point[] points", "test_msgs/Point[<=2] few", "string<=8 short",
    _SEP, "MSG: builtin_interfaces/Duration", "int32 sec", "uint32 nanosec",
    _SEP, "MSG: builtin_interfaces/Time", "int32 sec", "uint32 nanosec",
    _SEP, "MSG: test_msgs/Point", "float64 x", "float64 y",
]) + "\n"


# The same without arrays of strings or messages (the decoders' columnar CDR path covers it whole).
FLAT_TYPES_TYPE = "test_msgs/msg/FlatTypes"
_NOT_FLAT = ("string[] names", "test_msgs/Point[] points", "test_msgs/Point[<=2] few")
FLAT_TYPES_MSGDEF = "\n".join(line for line in ALL_TYPES_MSGDEF.split("\n") if line not in _NOT_FLAT)


def all_types_value(i, flat=False):
    """The ``i``-th :data:`ALL_TYPES_TYPE` message (``flat``: :data:`FLAT_TYPES_TYPE`):
    extremes of each integer type, empty and full lists."""
    value = {
        "i8": -128 + i % 256, "u8": 255 - i % 256, "i16": -32768 + i, "u16": 65535 - i,
        "i32": -(2 ** 31) + i, "u32": 2 ** 32 - 1 - i, "i64": -(2 ** 63) + i, "u64": 2 ** 64 - 1 - i,
        "f32": 0.5 * i, "f64": -1.25 * i, "flag": bool(i % 2), "text": f"t{i}" * (i % 4), "one_byte": i % 256,
        "one_char": 65 + i % 26,
        "blob": bytes(range(i % 7)), "octets": bytes([i % 256] * (i % 3)), "ints": list(range(-i % 5)),
        "names": [f"n{k}" for k in range(i % 3)], "vec": [float(i), 1.5, -2.0], "flags": [True, False][: i % 3],
        "big": [2 ** 64 - 1, i], "dur": {"sec": -i, "nanosec": 999_999_999 - i},
        "when": {"sec": 1_790_000_000 + i, "nanosec": 123_456_789},
        "points": [{"x": float(k), "y": -float(k)} for k in range(i % 4)],
        "few": [{"x": 1.0, "y": 2.0}][: i % 2], "short": "abc",
    }
    if flat:
        for name in ("names", "points", "few"):
            del value[name]
    return value


def write_ros2_all_types(path, n=40, topic="/all", flat=False):
    """:data:`ALL_TYPES_TYPE` (``flat``: :data:`FLAT_TYPES_TYPE`) messages in CDR,
    written by ``mcap-ros2-support``."""
    from mcap_ros2.writer import Writer

    out = Written(path)
    with open(path, "wb") as f:
        w = Writer(f)
        name = FLAT_TYPES_TYPE if flat else ALL_TYPES_TYPE
        schema = w.register_msgdef(name, FLAT_TYPES_MSGDEF if flat else ALL_TYPES_MSGDEF)
        for i in range(n):
            value = all_types_value(i, flat)
            log = T0 + i * 1_000
            w.write_message(topic, schema, value, log_time=log, publish_time=log, sequence=i)
            out.add(topic, name, "cdr", (log, log, i, None, value))
        w.finish()
    _fill_data(out)
    return out
