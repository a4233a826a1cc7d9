"""A fleet's ROS 2 recordings for ``bench/spark.py fleet``, written by the
tools ROS 2 users have (not by a0py), and the fleet summary computed without
Spark to check the Spark job against.

Each robot records ``sensor_msgs/msg/Imu`` on ``/imu/data`` at 200 Hz and
``sensor_msgs/msg/CompressedImage`` on ``/camera/image_raw/compressed`` at
10 Hz (JPEG-sized, 30-50 KB of bytes zstd cannot shrink), CDR with the
``ros2msg`` schemas of rosbags' ROS 2 Humble type store, until its recording
holds about ``mb`` MB. The frame ids name the robot (``robot3/imu``,
``robot3/camera``): ROS 2 messages carry no file name, and the a0 source
gives none either (``input_file_name()`` is empty for its rows). Even
robots write a rosbag2 directory (``rosbags``' writer, MCAP storage, chunks
uncompressed as ``ros2 bag record`` leaves them by default), odd robots a
plain MCAP file (the official ``mcap`` writer with ``mcap-ros2-support``'s
defaults: profile ``ros2``, zstd, 1 MiB chunks).

Fast: each message type is serialized once by rosbags; per message only
the header stamp and the six IMU vector fields are patched into a copy of
those bytes (numpy, a second of messages at a time), so the writers'
per-message work is what the generation costs.
"""

from __future__ import annotations

import json
import math
import os
import struct
from concurrent.futures import ProcessPoolExecutor

IMU_TOPIC = "/imu/data"
IMAGE_TOPIC = "/camera/image_raw/compressed"
IMU_TYPE = "sensor_msgs/msg/Imu"
IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"
IMU_HZ = 200
IMAGE_HZ = 10
T0_NS = 1_790_000_000 * 1_000_000_000  # 2026-09-21 14:13:20 UTC
MANIFEST = "fleet.json"
VERSION = 2  # of the data written: a manifest of another version is not reused
FIELDS = ("angular_velocity.x", "angular_velocity.y", "angular_velocity.z",
          "linear_acceleration.x", "linear_acceleration.y", "linear_acceleration.z")


def robot_start(robot):
    """When ``robot`` starts recording (ns): 1.5 s before a minute ends (so even
    a tiny recording spans two minutes), robots 7 minutes apart."""
    return T0_NS // 60_000_000_000 * 60_000_000_000 + robot * 420_000_000_000 + 58_500_000_000


def robot_path(directory, robot):
    """Where ``robot``'s recording goes: a rosbag2 directory (even robots) or an MCAP file."""
    return os.path.join(directory, f"robot{robot}" if robot % 2 == 0 else f"robot{robot}.mcap")


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


def _templates(ts, robot, image_pool):
    """(Imu CDR bytes, {field: byte offset}, [CompressedImage CDR bytes]):
    one serialization each by rosbags; the offsets found from sentinel values."""
    import numpy as np

    T = ts.types
    sentinels = [1.0 + (k + 1) / 1024 for k in range(6)]  # exact in binary, found once each
    zeros = np.zeros(9)
    vec = T["geometry_msgs/msg/Vector3"]
    imu = T[IMU_TYPE](
        header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=0x5A5A5A5A, nanosec=0x3C3C3C3C),
                                        frame_id=f"robot{robot}/imu"),
        orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=zeros, angular_velocity=vec(*sentinels[:3]),
        angular_velocity_covariance=zeros + 0.01, linear_acceleration=vec(*sentinels[3:]),
        linear_acceleration_covariance=zeros + 0.02)
    data = bytes(ts.serialize_cdr(imu, IMU_TYPE))
    offsets = {}
    for name, v in zip(FIELDS, sentinels):
        at = data.find(struct.pack("<d", v))
        if at < 0 or data.find(struct.pack("<d", v), at + 1) >= 0:
            raise RuntimeError(f"{name}: sentinel not found once in the Imu CDR bytes")
        offsets[name] = at
    if data[4:12] != struct.pack("<iI", 0x5A5A5A5A, 0x3C3C3C3C):
        raise RuntimeError("the Imu CDR bytes do not start with the stamp after the encapsulation header")
    images = []
    rng = np.random.default_rng(1000 + robot)
    for _ in range(image_pool):
        jpeg = b"\xff\xd8\xff\xe0" + rng.integers(0, 256, int(rng.integers(30_000, 50_000)), dtype=np.uint8).tobytes()
        img = T[IMAGE_TYPE](
            header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=0x5A5A5A5A,
                                                                                   nanosec=0x3C3C3C3C),
                                            frame_id=f"robot{robot}/camera"),
            format="jpeg", data=np.frombuffer(jpeg, dtype=np.uint8))
        images.append(bytes(ts.serialize_cdr(img, IMAGE_TYPE)))
    return data, offsets, images


def imu_values(robot, i):
    """The six IMU fields (FIELDS order) of messages ``i`` (a numpy index
    array) of ``robot``: a turn rate that swings, gravity, a bump per robot."""
    import numpy as np

    t = i / IMU_HZ
    r = robot + 1
    return (0.01 * np.sin(t / 3.0 + r), -0.02 * np.cos(t / 5.0), 0.3 * r * np.sin(t / 17.0),
            0.5 * np.sin(t / 2.0 + r), 0.1 * np.cos(t / 11.0), 9.81 + 0.01 * r + 0.05 * np.sin(t))


def _second(template, offsets, robot, sec):
    """The Imu messages of second ``sec`` of ``robot``: an (IMU_HZ, len) uint8
    array, and their stamps (ns)."""
    import numpy as np

    i = np.arange(sec * IMU_HZ, (sec + 1) * IMU_HZ, dtype=np.int64)
    stamps = robot_start(robot) + i * (1_000_000_000 // IMU_HZ)
    a = np.tile(np.frombuffer(template, dtype=np.uint8), (len(i), 1))
    a[:, 4:8].view("<i4")[:, 0] = stamps // 1_000_000_000
    a[:, 8:12].view("<u4")[:, 0] = stamps % 1_000_000_000
    for name, v in zip(FIELDS, imu_values(robot, i)):
        a[:, offsets[name]:offsets[name] + 8].view("<f8")[:, 0] = v
    return a, stamps


def _image(images, robot, k):
    """Image ``k`` of ``robot``: a pool image with its stamp patched; and the stamp."""
    stamp = robot_start(robot) + k * (1_000_000_000 // IMAGE_HZ) + 2_500_000  # between two Imu messages
    data = bytearray(images[k % len(images)])
    struct.pack_into("<iI", data, 4, stamp // 1_000_000_000, stamp % 1_000_000_000)
    return data, stamp


def _messages(robot, target_bytes, image_pool=64, size=None):
    """Yields (topic index 0 imu / 1 image, stamp, bytes) in time order, a
    second at a time, until about ``target_bytes``: of message data (40 B a
    record and index entry added), or as ``size()`` says (the bytes of a
    compressed file so far) when given."""
    ts = _typestore()
    template, offsets, images = _templates(ts, robot, image_pool)
    written = 0
    sec = 0
    per_image = IMU_HZ // IMAGE_HZ
    while (size() if size else written) < target_bytes:
        a, stamps = _second(template, offsets, robot, sec)
        rows = a.tobytes()
        n = len(template)
        for j in range(IMU_HZ):
            if j % per_image == 0:
                data, stamp = _image(images, robot, sec * IMAGE_HZ + j // per_image)
                yield 1, stamp, data
                written += len(data) + 40
            yield 0, int(stamps[j]), rows[j * n:(j + 1) * n]
            written += n + 40
        sec += 1


def msgdefs():
    ts = _typestore()
    return {t: ts.generate_msgdef(t, ros_version=2)[0] for t in (IMU_TYPE, IMAGE_TYPE)}


def write_rosbag2(path, robot, target_bytes):
    """A rosbag2 directory (metadata.yaml + one MCAP file) by rosbags' writer."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    ts = _typestore()
    counts = [0, 0]
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conns = [w.add_connection(IMU_TOPIC, IMU_TYPE, typestore=ts),
                 w.add_connection(IMAGE_TOPIC, IMAGE_TYPE, typestore=ts)]
        for k, stamp, data in _messages(robot, target_bytes):
            w.write(conns[k], stamp, data)
            counts[k] += 1
    return counts


def write_mcap(path, robot, target_bytes):
    """One MCAP file by the official ``mcap`` writer, as ``mcap-ros2-support``'s
    writer makes them (profile ros2, ros2msg schemas, cdr, zstd, 1 MiB chunks)."""
    from mcap.writer import CompressionType, Writer

    defs = msgdefs()
    counts = [0, 0]
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=1024 * 1024, compression=CompressionType.ZSTD)
        w.start(profile="ros2", library="mcap-python (a0py bench fleet)")
        chans = []
        for topic, t in ((IMU_TOPIC, IMU_TYPE), (IMAGE_TOPIC, IMAGE_TYPE)):
            sid = w.register_schema(t, "ros2msg", defs[t].encode())
            chans.append(w.register_channel(topic, "cdr", sid))
        seq = [0, 0]
        for k, stamp, data in _messages(robot, target_bytes, size=f.tell):
            w.add_message(chans[k], log_time=stamp, publish_time=stamp, sequence=seq[k], data=data)
            seq[k] += 1
        counts = seq
        w.finish()
    return counts


def _write_robot(directory, robot, target_bytes):
    """Writes ``robot``'s recording in ``ROBOT.partial/`` (a rosbag2 writer
    names the bag's file after its directory, so the name is kept), then moves
    it up; returns its manifest entry."""
    final = robot_path(directory, robot)
    staging = os.path.join(directory, f"robot{robot}.partial")
    os.makedirs(staging)
    tmp = os.path.join(staging, os.path.basename(final))
    counts = (write_rosbag2 if robot % 2 == 0 else write_mcap)(tmp, robot, target_bytes)
    os.rename(tmp, final)
    os.rmdir(staging)
    return {"robot": robot, "path": os.path.basename(final), "bytes": disk_bytes(final), "imu": counts[0],
            "images": counts[1]}


def disk_bytes(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return os.path.getsize(path)


def manifest_ok(directory, robots, mb):
    """The manifest of a complete fleet of these sizes at ``directory`` whose
    files are all there with their sizes, or None."""
    try:
        with open(os.path.join(directory, MANIFEST)) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return None
    if (m.get("version"), m.get("robots"), m.get("mb")) != (VERSION, robots, mb):
        return None
    for r in m["recordings"]:
        p = os.path.join(directory, r["path"])
        if not os.path.exists(p) or disk_bytes(p) != r["bytes"]:
            return None
    return m


def generate(directory, robots, mb, jobs=2):
    """The fleet at ``directory``: reused when its manifest says it holds
    these sizes, else written (in ``jobs`` processes). Raises RuntimeError
    when ``directory`` holds anything else: nothing is removed."""
    import time

    m = manifest_ok(directory, robots, mb)
    if m is not None:
        return m, True
    os.makedirs(directory, exist_ok=True)
    if os.listdir(directory):
        raise RuntimeError(f"{directory} is not empty and holds no fleet of {robots} x {mb} MB (no {MANIFEST} of "
                           "those sizes, or its files changed): give another --dir, or remove it yourself")
    t = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
        entries = list(ex.map(_write_robot, [directory] * robots, range(robots), [mb * 1_000_000] * robots))
    m = {"version": VERSION, "robots": robots, "mb": mb, "generate_s": time.perf_counter() - t, "jobs": jobs,
         "recordings": entries, "bytes": sum(e["bytes"] for e in entries)}
    with open(os.path.join(directory, MANIFEST), "w") as f:
        json.dump(m, f, indent=2)
    return m, False


def mcap_file(directory, robot):
    p = robot_path(directory, robot)
    return os.path.join(p, f"robot{robot}.mcap") if os.path.isdir(p) else p  # rosbags names it after the bag


def summary_without_spark(directory, robot):
    """The Spark job's two summaries for one robot, from
    ``mcap_ros2.reader.read_ros2_messages`` (IMU, decoded by mcap-ros2-support)
    and the official ``mcap`` reader (images, by log time):
    ({minute_s: [n, sums..., maxes...]}, {minute_s: image count})."""
    from mcap.reader import make_reader
    from mcap_ros2.reader import read_ros2_messages

    path = mcap_file(directory, robot)
    imu = {}
    with open(path, "rb") as f:
        for m in read_ros2_messages(f, topics=[IMU_TOPIC]):
            msg = m.ros_msg
            if msg.header.frame_id.split("/")[0] != f"robot{robot}":
                raise RuntimeError(f"{path}: frame id {msg.header.frame_id!r}")
            minute = msg.header.stamp.sec // 60 * 60
            vals = (msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z,
                    msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z)
            a = imu.get(minute)
            if a is None:
                imu[minute] = [1, *vals, *vals]
            else:
                a[0] += 1
                for k, v in enumerate(vals):
                    a[1 + k] += v
                    if v > a[7 + k]:
                        a[7 + k] = v
    images = {}
    with open(path, "rb") as f:
        for _, _, m in make_reader(f).iter_messages(topics=[IMAGE_TOPIC]):
            minute = m.log_time // 1_000_000_000 // 60 * 60
            images[minute] = images.get(minute, 0) + 1
    return imu, images


def compare(spark_imu, spark_images, robot, imu, images):
    """Differences between the Spark rows of ``robot`` and the summary
    computed without Spark: a list of strings, empty when they agree (means
    to 1e-9 relative, maxima exactly, counts exactly)."""
    out = []
    got = {int(r["minute"].timestamp()): r for r in spark_imu if r["robot"] == f"robot{robot}"}
    if set(got) != set(imu):
        out.append(f"robot{robot}: IMU minutes {sorted(got)} != {sorted(imu)}")
    for minute, a in imu.items():
        r = got.get(minute)
        if r is None:
            continue
        if r["n"] != a[0]:
            out.append(f"robot{robot} {minute}: n {r['n']} != {a[0]}")
        for k, f in enumerate(FIELDS):
            col = f.replace(".", "_")
            mean = a[1 + k] / a[0]
            if not math.isclose(r[f"mean_{col}"], mean, rel_tol=1e-9, abs_tol=1e-12):
                out.append(f"robot{robot} {minute}: mean {f} {r[f'mean_{col}']} != {mean}")
            if r[f"max_{col}"] != a[7 + k]:
                out.append(f"robot{robot} {minute}: max {f} {r[f'max_{col}']} != {a[7 + k]}")
    got_img = {int(r["minute"].timestamp()): r["images"] for r in spark_images if r["robot"] == f"robot{robot}"}
    if got_img != images:
        out.append(f"robot{robot}: images per minute {got_img} != {images}")
    return out


def imu_summary(spark, directory, fmt="a0"):
    """The fleet's IMU messages decoded (``decode=true``, topic ``/imu/data``)
    and grouped by robot (the frame id's first part) and minute (of the
    header stamp): n, and mean and max of each of the six vector fields."""
    from pyspark.sql import functions as F

    df = (spark.read.format(fmt).option("decode", "true").option("topics", IMU_TOPIC).option("headers", "false")
          .load(directory))
    m = F.col("message")
    aggs = [F.count("*").alias("n")]
    for f in FIELDS:
        part, axis = f.split(".")
        col = m[part][axis]
        name = f.replace(".", "_")
        aggs += [F.avg(col).alias(f"mean_{name}"), F.max(col).alias(f"max_{name}")]
    return (df.where(F.col("decode_error").isNull())
            .groupBy(F.substring_index(m["header"]["frame_id"], "/", 1).alias("robot"),
                     F.date_trunc("minute", m["header"]["stamp"]).alias("minute"))
            .agg(*aggs))


def image_counts(spark, directory, fmt="a0"):
    """The fleet's images counted by robot and minute (of the log time)
    without decoding them (``decode=false``): the robot is read from the CDR
    bytes, the frame id's first part (after the 4-byte encapsulation, the
    8-byte stamp and the string's 4-byte length)."""
    from pyspark.sql import functions as F

    df = spark.read.format(fmt).option("topics", IMAGE_TOPIC).option("headers", "false").load(directory)
    frame_id = F.substring(F.col("payload"), 17, 16).cast("string")
    return (df.groupBy(F.substring_index(frame_id, "/", 1).alias("robot"),
                       F.date_trunc("minute", F.col("log_time")).alias("minute"))
            .agg(F.count("*").alias("images")))


def remove(directory):
    """Removes what :func:`generate` wrote at ``directory`` (the recordings its
    manifest lists, the manifest, then the directory if that leaves it
    empty), nothing else."""
    import shutil

    try:
        with open(os.path.join(directory, MANIFEST)) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return
    for r in m.get("recordings", ()):
        p = os.path.join(directory, os.path.basename(r["path"]))
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    os.remove(os.path.join(directory, MANIFEST))
    if not os.listdir(directory):
        os.rmdir(directory)
