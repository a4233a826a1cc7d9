"""A fleet's ROS 2 bags in Spark: three robots record IMU data, Spark groups
the decoded fields by robot and minute.

Robots 0 and 1 record rosbag2 directories (``metadata.yaml`` + MCAP, written
by ``rosbags``); robot 2 records one MCAP file with ``mcap-ros2-support``,
as a ROS 2 node logging straight to MCAP would. Every message is a
``sensor_msgs/msg/Imu`` in CDR with its ``ros2msg`` schema; the frame id
names the robot.

    python examples/fleet_bags.py [--dir DIR] [--minutes 3] [--hz 20]
    python examples/fleet_bags.py --no-spark   # write the bags, summarize with the decoders alone

The Spark job reads the directory with ``format("a0")`` and
``decode=true`` (docs/spark.md "Decoded columns"): ``message`` is the Imu
struct, ``message.header.stamp`` a timestamp. It needs the ``a0`` source's
foreign-channel reading (docs/spark.md); ``--no-spark`` needs only
``a0py.recording.decode``. Needs the ``ros`` extra (rosbags,
mcap-ros2-support).
"""

import argparse
import math
import os
import shutil
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

IMU = "sensor_msgs/msg/Imu"
T0_NS = 1_790_000_000 * 1_000_000_000  # 2026-09-21 14:13:20 UTC


def reading(robot, i, hz):
    """The ``i``-th IMU reading of ``robot``: a slow yaw, gravity plus a bump per robot."""
    t = i / hz
    return {
        "stamp_ns": T0_NS + round(t * 1e9),
        "frame_id": f"robot{robot}/imu",
        "angular_velocity": (0.0, 0.0, 0.1 * (robot + 1) * math.sin(t / 10)),
        "linear_acceleration": (0.2 * math.cos(t), 0.0, 9.81 + 0.05 * robot),
    }


def write_rosbag2(path, robot, n, hz):
    """A rosbag2 directory written by rosbags."""
    import numpy as np
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    T = ts.types
    zeros = np.zeros(9)
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/imu", IMU, typestore=ts)
        for i in range(n):
            r = reading(robot, i, hz)
            sec, nsec = divmod(r["stamp_ns"], 1_000_000_000)
            msg = T[IMU](
                header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec),
                                                frame_id=r["frame_id"]),
                orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
                orientation_covariance=zeros,
                angular_velocity=T["geometry_msgs/msg/Vector3"](*r["angular_velocity"]),
                angular_velocity_covariance=zeros,
                linear_acceleration=T["geometry_msgs/msg/Vector3"](*r["linear_acceleration"]),
                linear_acceleration_covariance=zeros,
            )
            w.write(conn, r["stamp_ns"], bytes(ts.serialize_cdr(msg, IMU)))


def write_mcap(path, robot, n, hz):
    """One MCAP file written by mcap-ros2-support (the schema text from rosbags' type store)."""
    from mcap_ros2.writer import Writer
    from rosbags.typesys import Stores, get_typestore

    msgdef, _ = get_typestore(Stores.ROS2_HUMBLE).generate_msgdef(IMU, ros_version=2)
    vec = ("x", "y", "z")
    with open(path, "wb") as f:
        w = Writer(f)
        schema = w.register_msgdef(IMU, msgdef)
        for i in range(n):
            r = reading(robot, i, hz)
            sec, nsec = divmod(r["stamp_ns"], 1_000_000_000)
            w.write_message("/imu", schema, {
                "header": {"stamp": {"sec": sec, "nanosec": nsec}, "frame_id": r["frame_id"]},
                "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
                "orientation_covariance": [0.0] * 9,
                "angular_velocity": dict(zip(vec, r["angular_velocity"])),
                "angular_velocity_covariance": [0.0] * 9,
                "linear_acceleration": dict(zip(vec, r["linear_acceleration"])),
                "linear_acceleration_covariance": [0.0] * 9,
            }, log_time=r["stamp_ns"], publish_time=r["stamp_ns"])
        w.finish()


def write_fleet(directory, minutes, hz):
    n = int(minutes * 60 * hz)
    write_rosbag2(os.path.join(directory, "robot0"), 0, n, hz)
    write_rosbag2(os.path.join(directory, "robot1"), 1, n, hz)
    write_mcap(os.path.join(directory, "robot2.mcap"), 2, n, hz)
    return 3 * n


def summarize_with_spark(directory, spark=None):
    """Rows (robot, minute, n, mean_az, max_yaw_rate) of the fleet's IMU
    messages, decoded and grouped by Spark; shown, and returned. Uses (and
    leaves running) ``spark`` when given, else starts a session and stops it."""
    from pyspark.sql import functions as F

    import a0py.spark

    own = spark is None
    if own:
        spark = a0py.spark.session()
    df = spark.read.format("a0").option("decode", "true").option("topics", "/imu").load(directory)
    m = F.col("message")
    summary = (df.where(F.col("decode_error").isNull())
               .select(F.split(m["header"]["frame_id"], "/")[0].alias("robot"),
                       F.date_trunc("minute", m["header"]["stamp"]).alias("minute"),
                       m["linear_acceleration"]["z"].alias("az"),
                       F.abs(m["angular_velocity"]["z"]).alias("yaw_rate"))
               .groupBy("robot", "minute")
               .agg(F.count("*").alias("n"), F.round(F.avg("az"), 3).alias("mean_az"),
                    F.round(F.max("yaw_rate"), 3).alias("max_yaw_rate"))
               .orderBy("robot", "minute"))
    summary.show(truncate=False)
    rows = summary.collect()
    if own:
        spark.stop()
    return rows


def summarize_with_decoders(directory):
    """The same summary in this process, from the decoders alone (no Spark):
    {(robot, minute): (n, mean_az, max_yaw_rate)}, printed."""
    import glob
    from collections import defaultdict

    from mcap.reader import make_reader

    from a0py.recording.decode import decoder_for

    acc = defaultdict(lambda: [0, 0.0, 0.0])
    for path in sorted(glob.glob(os.path.join(directory, "**", "*.mcap"), recursive=True)):
        with open(path, "rb") as f:
            items = list(make_reader(f).iter_messages(topics=["/imu"]))
        schema, channel, _ = items[0]
        dec = decoder_for(channel.topic, schema.name, schema.encoding, schema.data, channel.message_encoding)
        values, _ = dec.decode([m.data for _, _, m in items])
        for v in values.to_pylist():
            key = (v["header"]["frame_id"].split("/")[0], v["header"]["stamp"].replace(second=0, microsecond=0))
            a = acc[key]
            a[0] += 1
            a[1] += v["linear_acceleration"]["z"]
            a[2] = max(a[2], abs(v["angular_velocity"]["z"]))
    out = {k: (n, round(az / n, 3), round(yaw, 3)) for k, (n, az, yaw) in sorted(acc.items())}
    print(f"{'robot':8} {'minute':26} {'n':>6} {'mean_az':>8} {'max_yaw_rate':>12}")
    for (robot, minute), (n, az, yaw) in out.items():
        print(f"{robot:8} {minute.isoformat():26} {n:6} {az:8.3f} {yaw:12.3f}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="where to write the bags (default: a temporary directory, removed after)")
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--hz", type=float, default=20)
    ap.add_argument("--no-spark", action="store_true", help="summarize with the decoders alone")
    args = ap.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="a0py-fleet-")
    try:
        if args.dir and os.path.exists(directory) and os.listdir(directory):
            sys.exit(f"{directory} is not empty")
        os.makedirs(directory, exist_ok=True)
        total = write_fleet(directory, args.minutes, args.hz)
        print(f"wrote {total} Imu messages from 3 robots under {directory}")
        if args.no_spark:
            summarize_with_decoders(directory)
        else:
            summarize_with_spark(directory)
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
