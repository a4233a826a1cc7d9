"""Decoding foreign MCAP messages into Arrow (a0py.recording.decode), with
the third-party decoders it could be built on, in one process.

    python -m bench.decode               # 20 000 messages per workload, 3 repeats
    python -m bench.decode --n 5000 --repeats 1

Workloads (msgs/s, median of --repeats; every figure of one run is from the
same machine and moment, so compare within a run only):

  ros2 Imu (sensor_msgs/msg/Imu, 324 B CDR, written by mcap-ros2-support):
    rosbags             Typestore.deserialize_cdr per message (objects only)
    mcap-ros2-support   its dynamic decoder per message (objects only)
    rosbags+arrow       rosbags objects, then a0py's column builders to Arrow
    mcap-ros2+arrow     mcap-ros2 objects to dicts, then pa.array(dicts, type)
    a0py decode         Decoder.decode: bytes to the Arrow struct array
    read_ros2_messages  mcap-ros2-support iterating the file (read + decode)
  protobuf foxglove.Log (mcap-protobuf-support) and JSON with a jsonschema
  (the official mcap writer): a0py decode.

Before timing, the rosbags and mcap-ros2-support values of every Imu message
are checked equal (the correctness half of "the faster correct one"). This is
a script: it asserts nothing else.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

import pyarrow as pa  # noqa: E402
from helpers.foreign import write_mcap_json, write_protobuf_mcap, write_ros2_mcap  # noqa: E402
from mcap.reader import make_reader  # noqa: E402

from a0py.recording.decode import decoder_for  # noqa: E402


def messages(path, topic):
    with open(path, "rb") as f:
        got = [(s, c, m.data) for s, c, m in make_reader(f).iter_messages(log_time_order=False) if c.topic == topic]
    s, c, _ = got[0]
    return s, c, [d for *_, d in got]


def rate(fn, n, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return n / statistics.median(times)


def to_plain(obj):
    """An mcap-ros2-support message object as plain dicts and lists."""
    if hasattr(obj, "__slots__") or hasattr(obj, "__dict__"):
        return {k: to_plain(v) for k, v in vars(obj).items()}
    if isinstance(obj, list):
        return [to_plain(v) for v in obj]
    return obj


def ros_values_equal(a, b):
    """A rosbags object and an mcap-ros2-support object hold the same values."""
    if hasattr(a, "__msgtype__"):
        return all(ros_values_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__
                   if f != "__msgtype__")
    if hasattr(a, "tolist"):
        return list(a.tolist()) == list(b)
    return a == b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, rep = args.n, args.repeats
    tmp = tempfile.mkdtemp(prefix="a0py-bench-decode-")
    path = os.path.join(tmp, "imu.mcap")
    write_ros2_mcap(path, n=n, extra_string_topic=False)
    schema, channel, datas = messages(path, "/imu")

    from mcap.records import Schema
    from mcap_ros2.decoder import DecoderFactory
    from mcap_ros2.reader import read_ros2_messages

    dec = decoder_for(channel.topic, schema.name, schema.encoding, schema.data, channel.message_encoding)
    store, name = dec._store, dec._name  # the rosbags typestore a0py built from the schema text
    m2 = DecoderFactory().decoder_for("cdr", Schema(id=1, name=schema.name, encoding=schema.encoding, data=schema.data))

    bad = sum(not ros_values_equal(store.deserialize_cdr(d, name), m2(d)) for d in datas)
    print(f"check: rosbags and mcap-ros2-support disagree on {bad} of {len(datas)} Imu messages")

    def rb_arrow():
        dec._columns.build([store.deserialize_cdr(d, name) for d in datas])

    def m2_arrow():
        pa.array([to_plain(m2(d)) for d in datas])

    def iterate():
        for _ in read_ros2_messages(path, topics=["/imu"]):
            pass

    rows = [
        ("ros2 Imu", "rosbags", rate(lambda: [store.deserialize_cdr(d, name) for d in datas], n, rep)),
        ("ros2 Imu", "mcap-ros2-support", rate(lambda: [m2(d) for d in datas], n, rep)),
        ("ros2 Imu", "rosbags+arrow", rate(rb_arrow, n, rep)),
        ("ros2 Imu", "mcap-ros2+arrow", rate(m2_arrow, n, rep)),
        ("ros2 Imu", "a0py decode", rate(lambda: dec.decode(datas), n, rep)),
        ("ros2 Imu", "read_ros2_messages", rate(iterate, n, rep)),
    ]
    p = os.path.join(tmp, "pb.mcap")
    write_protobuf_mcap(p, n=n)
    s, c, d = messages(p, "/pb/log")
    pdec = decoder_for(c.topic, s.name, s.encoding, s.data, c.message_encoding)
    rows.append(("protobuf foxglove.Log", "a0py decode", rate(lambda: pdec.decode(d), n, rep)))
    j = os.path.join(tmp, "j.mcap")
    write_mcap_json(j, n=n)
    s, c, d = messages(j, "/ev/json")
    jdec = decoder_for(c.topic, s.name, s.encoding, s.data, c.message_encoding)
    rows.append(("json ev.Event", "a0py decode", rate(lambda: jdec.decode(d), n, rep)))
    print(f"{n} messages, median of {rep}")
    print(f"{'workload':24} {'decoder':22} {'msgs/s':>10}")
    for w, k, r in rows:
        print(f"{w:24} {k:22} {r:10,.0f}")


if __name__ == "__main__":
    main()
