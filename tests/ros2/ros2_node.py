"""A ROS 2 node on real rclpy for the tests, run as its own process:

    python ros2_node.py talk TYPE TOPIC COUNT [--hz N] [--transient] [--best-effort]
    python ros2_node.py camera TOPIC COUNT [--hz 30] [--width 640] [--height 480]
    python ros2_node.py listen TYPE TOPIC COUNT OUT

TYPE may be comma-separated types, TOPIC then a prefix: each type on PREFIX/<Name>.

``talk`` publishes COUNT messages of TYPE, message i the CDR of ``sample(TYPE, seed=i)``
(published as those bytes), once a subscriber has matched (or at once with
``--transient``), then stays (reliable QoS resends what was not received) until killed. ``camera`` publishes rclpy
Image messages (rgb8, pixel values from the frame number). ``listen`` writes each
message's bytes to OUT (:func:`read_listened` reads it) once COUNT came on every topic
(then it waits ``--settle`` seconds more: a duplicate would show).
Each prints ``ready`` once its endpoint exists, and ``done`` at the end. Discovery stays
on the host: ROS_AUTOMATIC_DISCOVERY_RANGE and ROS_DOMAIN_ID come from the test.
"""

import argparse
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST", "discovery must stay on the host"
    assert os.environ.get("ROS_DOMAIN_ID"), "a private ROS_DOMAIN_ID is needed"

import rclpy  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402


def qos(args, depth=1000):
    return QoSProfile(depth=depth,
                      reliability=ReliabilityPolicy.BEST_EFFORT if getattr(args, "best_effort", False)
                      else ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if getattr(args, "transient", False)
                      else DurabilityPolicy.VOLATILE)


def say(word):
    print(word, flush=True)


def wait_matched(node, pub, timeout=20.0, count=1):
    deadline = time.monotonic() + timeout
    while pub.get_subscription_count() < count:
        if time.monotonic() > deadline:
            sys.exit("no subscriber matched")
        rclpy.spin_once(node, timeout_sec=0.01)


def talk(node, args):
    from rclpy.serialization import serialize_message
    from ros2_samples import codec, rclpy_class, sample

    from a0py import SchemaError

    pubs = []
    for type_name, topic in _pairs(args.type, args.topic):
        cls = rclpy_class(type_name)
        try:
            c = codec(type_name)
            payloads = [c.encode(sample(c.type_name, seed=i)) for i in range(args.count)]
        except SchemaError:  # wstring types: rclpy's default message, as rclpy serializes it
            payloads = [serialize_message(cls())] * args.count
        pubs.append((node.create_publisher(cls, topic, qos(args)), payloads))
    say("ready")
    if not args.transient:
        for pub, _ in pubs:
            wait_matched(node, pub, count=args.subscribers)
    for i in range(args.count):
        for pub, payloads in pubs:
            pub.publish(payloads[i])
        if args.hz:
            time.sleep(1 / args.hz)
    say("done")
    time.sleep(args.linger)  # until the test has what it waits for, and kills it


def _pairs(types, topics):
    """(type, topic) pairs: TYPE TOPIC, or comma-separated TYPES and a topic prefix
    (each type on PREFIX/<Name>)."""
    types = types.split(",")
    if len(types) == 1:
        return [(types[0], topics)]
    return [(t, f"{topics}/{t.split('/')[-1]}") for t in types]


def camera(node, args):
    import numpy as np
    from sensor_msgs.msg import Image

    pub = node.create_publisher(Image, args.topic, qos(args, depth=args.count))  # keeps all: reliable loses none
    say("ready")
    wait_matched(node, pub)
    for i in range(args.count):
        msg = Image(height=args.height, width=args.width, encoding="rgb8", step=args.width * 3)
        msg.header.frame_id = "camera"
        msg.header.stamp.sec, msg.header.stamp.nanosec = i, 1000 * i
        msg.data = np.full(args.height * args.width * 3, i % 256, np.uint8).tobytes()
        pub.publish(msg)
        time.sleep(1 / args.hz)
    say("done")
    time.sleep(30)  # until the test has every image, and kills it


def listen(node, args):
    from ros2_samples import rclpy_class

    got = {}
    for type_name, topic in _pairs(args.type, args.topic):
        got[topic] = []
        node.create_subscription(rclpy_class(type_name), topic, got[topic].append, qos(args), raw=True)
    say("ready")
    deadline = time.monotonic() + args.timeout
    while any(len(g) < args.count for g in got.values()) and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    end = time.monotonic() + args.settle  # a duplicate would come now
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    with open(args.out, "wb") as f:
        for topic, messages in got.items():
            name = topic.encode()
            f.write(struct.pack("<II", len(name), len(messages)) + name)
            for data in messages:
                f.write(struct.pack("<I", len(data)) + data)
    say("done")


def read_listened(path):
    """``{topic: [bytes...]}`` that ``listen`` wrote to `path`."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        n, count = struct.unpack_from("<II", data, pos)
        topic = data[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        out[topic] = []
        for _ in range(count):
            (size,) = struct.unpack_from("<I", data, pos)
            out[topic].append(data[pos + 4:pos + 4 + size])
            pos += 4 + size
    return out


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("talk")
    p.add_argument("type")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("--hz", type=float, default=0)
    p.add_argument("--transient", action="store_true")
    p.add_argument("--subscribers", type=int, default=1, help="how many to wait for")
    p.add_argument("--best-effort", action="store_true")
    p.add_argument("--linger", type=float, default=30)
    p = sub.add_parser("camera")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("--hz", type=float, default=30)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p = sub.add_parser("listen")
    p.add_argument("type")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("out")
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--settle", type=float, default=0.3)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node(f"a0py_test_{args.mode}_{os.getpid()}")
    try:
        {"talk": talk, "camera": camera, "listen": listen}[args.mode](node, args)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
