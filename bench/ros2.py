"""a0py against rclpy (Fast DDS), two processes on one machine, in the same run; and a
ROS 2 node talking to an a0py process through the ROS 2 bridge.

    python bench/ros2.py [--quick] [--sizes 64,4096,1048576]

Workloads (each side by side, same sizes; messages are std_msgs/msg/UInt8MultiArray
CDR of the size, published and taken as serialized bytes, as a bridge does):

  pingpong  a ping process sends one message and waits for the echo, N times: p50 and
            p99 round trip. rclpy ping <-> rclpy pong (reliable, keep last 100, a
            spinning executor); a0py ping <-> a0py pong (SubscriberSync, Publisher);
            rclpy ping <-> a0py pong through the bridge (the bridge imports /bench/ping
            and exports bench/pong, in the pong process).
  rate      a sender publishes N messages as fast as it can, a receiver counts them:
            messages/s from the first to the last received (and how many arrived).

ROS 2 discovery stays on the host (LOCALHOST, a private domain). Runs are short: on
the shared 2-core machines quote medians of several runs, and only as ratios.
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 101 + 1))
os.environ.setdefault("A0PY_ROOT", f"shm:benchros2{os.getpid()}")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TYPE = "std_msgs/msg/UInt8MultiArray"


def payload(size):
    from a0py import Schema
    from a0py.proto import ros2_types
    schema = Schema.ros2(TYPE)
    codec = ros2_types.codec_for(schema.name, schema.data.decode())
    return codec.encode({"data": bytes(max(0, size - 32))})


def _rclpy_node(name):
    import rclpy
    from rclpy.qos import QoSProfile

    rclpy.init()
    return rclpy, rclpy.create_node(name), QoSProfile(depth=100)


def role_rclpy_pong():
    from std_msgs.msg import UInt8MultiArray

    rclpy, node, qos = _rclpy_node("pong")
    pub = node.create_publisher(UInt8MultiArray, "/bench/pong", qos)
    node.create_subscription(UInt8MultiArray, "/bench/ping", pub.publish, qos, raw=True)
    print("ready", flush=True)
    rclpy.spin(node)


def role_a0py_pong(bridge):
    import a0py
    from a0py import Schema
    br = None
    if bridge:
        from a0py.ros2 import Ros2Bridge
        br = Ros2Bridge(imports=["/bench/ping"], exports=["bench/pong"], scan_interval=0.05).start()
    with a0py.Publisher("bench/pong", schema=Schema.ros2(TYPE)) as pub, \
            a0py.SubscriberSync(a0py.Topic("bench/ping", size="8M")) as sub:
        print("ready", flush=True)
        for pkt in sub:
            pub.pub(pkt.payload)
    if br:
        br.stop()


def role_rclpy_ping(size, count):
    from std_msgs.msg import UInt8MultiArray

    rclpy, node, qos = _rclpy_node("ping")
    data = payload(size)
    got = []
    pub = node.create_publisher(UInt8MultiArray, "/bench/ping", qos)
    node.create_subscription(UInt8MultiArray, "/bench/pong", got.append, qos, raw=True)
    deadline = time.monotonic() + 30
    while (pub.get_subscription_count() == 0 or node.count_publishers("/bench/pong") == 0) \
            and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.01)
    # the far side's publisher may be made at the first message (the bridge): warm up
    while not got and time.monotonic() < deadline:
        pub.publish(data)
        rclpy.spin_once(node, timeout_sec=0.2)
    rtts = []
    for _ in range(count):
        n = len(got)
        t0 = time.perf_counter_ns()
        pub.publish(data)
        while len(got) == n:
            rclpy.spin_once(node, timeout_sec=1.0)
        rtts.append(time.perf_counter_ns() - t0)
    print(json.dumps(rtts), flush=True)


def role_a0py_ping(size, count):
    import a0py

    data = payload(size)
    with a0py.Publisher(a0py.Topic("bench/ping", size="8M")) as pub, \
            a0py.SubscriberSync(a0py.Topic("bench/pong", size="8M")) as sub:
        deadline = time.monotonic() + 30
        pub.pub(data)
        while sub.read(timeout=0.2) is None and time.monotonic() < deadline:
            pub.pub(data)
        rtts = []
        for _ in range(count):
            t0 = time.perf_counter_ns()
            pub.pub(data)
            sub.read(timeout=5.0)
            rtts.append(time.perf_counter_ns() - t0)
    print(json.dumps(rtts), flush=True)


def role_rclpy_send(size, count):
    from std_msgs.msg import UInt8MultiArray

    rclpy, node, qos = _rclpy_node("send")
    pub = node.create_publisher(UInt8MultiArray, "/bench/rate", qos)
    while pub.get_subscription_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.01)
    data = payload(size)
    for _ in range(count):
        pub.publish(data)
    time.sleep(3)


def role_rclpy_recv(count):
    from std_msgs.msg import UInt8MultiArray

    rclpy, node, qos = _rclpy_node("recv")
    stamps = []
    node.create_subscription(UInt8MultiArray, "/bench/rate", lambda _: stamps.append(time.perf_counter()),
                             qos, raw=True)
    print("ready", flush=True)
    end = time.monotonic() + 30
    last = 0
    while len(stamps) < count and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.5)
        if stamps and len(stamps) == last and time.perf_counter() - stamps[-1] > 1.0:
            break  # nothing more comes
        last = len(stamps)
    print(json.dumps([len(stamps), (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0]), flush=True)


def role_a0py_send(size, count):
    import a0py

    data = payload(size)
    with a0py.Publisher(a0py.Topic("bench/rate", size="64M")) as pub:
        for _ in range(count):
            pub.pub(data)


def role_a0py_recv(count):
    import a0py

    stamps = 0
    first = last = None
    with a0py.SubscriberSync(a0py.Topic("bench/rate", size="64M")) as sub:
        print("ready", flush=True)
        while stamps < count:
            pkt = sub.read(timeout=2.0)
            if pkt is None:
                break
            last = time.perf_counter()
            first = first or last
            stamps += 1 + pkt.missed
    print(json.dumps([stamps, (last - first) if first else 0]), flush=True)


def _spawn(*args):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", *map(str, args)],
                            stdout=subprocess.PIPE, text=True)


def pingpong(kind, size, count):
    pong = _spawn({"rclpy": "rclpy_pong", "a0py": "a0py_pong", "bridge": "bridge_pong"}[kind])
    pong.stdout.readline()
    ping = _spawn("rclpy_ping" if kind != "a0py" else "a0py_ping", size, count)
    rtts = json.loads(ping.communicate(timeout=120)[0].strip().splitlines()[-1])
    pong.kill()
    pong.wait()
    rtts.sort()
    return rtts[len(rtts) // 2] / 1000, rtts[int(len(rtts) * 0.99)] / 1000


def rate(kind, size, count):
    recv = _spawn(f"{kind}_recv", count)
    recv.stdout.readline()
    send = _spawn(f"{kind}_send", size, count)
    got, span = json.loads(recv.communicate(timeout=120)[0].strip().splitlines()[-1])
    send.kill()
    send.wait()
    return got, (got - 1) / span if span else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", nargs="+")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default="64,4096,1048576")
    args = parser.parse_args()
    if args.role:
        name, rest = args.role[0], [int(a) for a in args.role[1:]]
        if name in ("a0py_pong", "bridge_pong"):
            return role_a0py_pong(name == "bridge_pong")
        return globals()[f"role_{name}"](*rest)
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| size | workload | rclpy | a0py | rclpy <-> a0py via bridge | ratio rclpy/a0py |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        n = (200 if args.quick else 1000) if size < 1 << 20 else (30 if args.quick else 100)
        r = pingpong("rclpy", size, n)
        a = pingpong("a0py", size, n * 10 if size < 1 << 20 else n)
        b = pingpong("bridge", size, n)
        print(f"| {size} | ping-pong p50/p99 µs | {r[0]:.0f} / {r[1]:.0f} | {a[0]:.1f} / {a[1]:.1f} | "
              f"{b[0]:.0f} / {b[1]:.0f} | {r[0] / a[0]:.0f}× |", flush=True)
        m = (5000 if args.quick else 20000) if size < 1 << 20 else 100
        rg, rr = rate("rclpy", size, m)
        ag, ar = rate("a0py", size, m * 10 if size < 1 << 20 else m)
        print(f"| {size} | rate msgs/s (received) | {rr:,.0f} ({rg}) | {ar:,.0f} ({ag}) | | "
              f"{ar / rr if rr else 0:.0f}× |", flush=True)
    from a0py.proto import list_topics, unlink_topic

    for name in list_topics():
        unlink_topic(name)


if __name__ == "__main__":
    main()
