"""A ROS 2 node on real rclpy for the tests, run as its own process:

    python ros2_node.py talk TYPE TOPIC COUNT [--hz N] [--transient] [--best-effort]
    python ros2_node.py camera TOPIC COUNT [--hz 30] [--width 640] [--height 480]
    python ros2_node.py listen TYPE TOPIC COUNT OUT

``talk`` publishes COUNT messages of TYPE, message i the CDR of ``sample(TYPE, seed=i)``
(published as those bytes), once a subscriber has matched (or at once with
``--transient``), then waits until they are acknowledged. ``camera`` publishes rclpy
Image messages (rgb8, pixel values from the frame number). ``listen`` writes each
message's bytes to OUT (a 4-byte little-endian length, then the bytes) until COUNT came.
Each prints ``ready`` once its endpoint exists, and ``done`` at the end. Discovery stays
on the host: ROS_AUTOMATIC_DISCOVERY_RANGE and ROS_DOMAIN_ID come from the test.
"""

import argparse
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


def wait_matched(node, pub, timeout=20.0):
    deadline = time.monotonic() + timeout
    while pub.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            sys.exit("no subscriber matched")
        rclpy.spin_once(node, timeout_sec=0.01)


def talk(node, args):
    from ros2_samples import codec, rclpy_class, sample

    c = codec(args.type)
    pub = node.create_publisher(rclpy_class(c.type_name), args.topic, qos(args))
    payloads = [c.encode(sample(c.type_name, seed=i)) for i in range(args.count)]
    say("ready")
    if not args.transient:
        wait_matched(node, pub)
    for data in payloads:
        pub.publish(data)
        if args.hz:
            time.sleep(1 / args.hz)
    pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10)) if not args.best_effort else None
    say("done")
    if args.transient:
        time.sleep(args.linger)


def camera(node, args):
    import numpy as np
    from sensor_msgs.msg import Image

    pub = node.create_publisher(Image, args.topic, qos(args, depth=10))
    say("ready")
    wait_matched(node, pub)
    for i in range(args.count):
        msg = Image(height=args.height, width=args.width, encoding="rgb8", step=args.width * 3)
        msg.header.frame_id = "camera"
        msg.header.stamp.sec, msg.header.stamp.nanosec = i, 1000 * i
        msg.data = np.full(args.height * args.width * 3, i % 256, np.uint8).tobytes()
        pub.publish(msg)
        time.sleep(1 / args.hz)
    pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10))
    say("done")


def listen(node, args):
    from ros2_samples import rclpy_class

    got = []
    node.create_subscription(rclpy_class(args.type), args.topic, got.append, qos(args), raw=True)
    say("ready")
    deadline = time.monotonic() + args.timeout
    while len(got) < args.count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    with open(args.out, "wb") as f:
        for data in got:
            f.write(struct.pack("<I", len(data)) + data)
    say("done")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("talk")
    p.add_argument("type")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("--hz", type=float, default=0)
    p.add_argument("--transient", action="store_true")
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
