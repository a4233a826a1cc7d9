"""a0py against rclpy (Fast DDS), two processes on one machine, in the same run; and ROS 2
nodes talking to a0py processes through the ROS 2 bridge (``a0py ros2``, a process of
its own as a user runs it).

    python bench/ros2.py [--sizes 64,4096,1048576] [--repeats 3] [--images] [--json FILE]

Workloads (side by side, same sizes; messages are std_msgs/msg/UInt8MultiArray CDR of
the size, published and taken as serialized bytes, as a bridge does):

  pingpong   a ping process sends one message and waits for the echo, N times: p50 and
             p99 round trip. rclpy <-> rclpy (reliable, keep last 100, a spinning
             executor); a0py <-> a0py (SubscriberSync, Publisher); rclpy ping <-> a0py
             pong through the bridge (one leg each way through it: compare with
             rclpy <-> rclpy).
  rate       a sender publishes N messages as fast as it can, a receiver counts them:
             messages/s from the first to the last received, and how many arrived.
             rclpy -> rclpy, a0py -> a0py, rclpy talker -> bridge -> a0py subscriber,
             a0py publisher -> bridge -> rclpy listener.
  images     (--images) 1920x1080 rgb8 at 30 Hz for a few seconds, each way through
             the bridge: an rclpy camera -> bridge -> a0py subscriber, a0py pub_image
             -> bridge -> rclpy listener; the bridge process's CPU (user + system over
             wall time, 1.0 = one core) and the frames that arrived.

Each workload runs --repeats times, round robin (every case once, then again), and the
figure is the median. ROS 2 discovery stays on the host (LOCALHOST, a private domain).
Runs are short: on the shared 2-core machines quote medians, and only as ratios.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 101 + 1))
os.environ.setdefault("A0PY_ROOT", f"shm:benchros2{os.getpid()}")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TYPE = "std_msgs/msg/UInt8MultiArray"
IMAGE = "sensor_msgs/msg/Image"
WIDTH, HEIGHT, HZ = 1920, 1080, 30


def payload(size):
    from a0py import Schema
    from a0py.proto import ros2_types

    schema = Schema.ros2(TYPE)
    codec = ros2_types.codec_for(schema.name, schema.data.decode())
    return codec.encode({"data": bytes(max(0, size - 32))})


def image_payload():
    from a0py import Schema
    from a0py.proto import ros2_types

    schema = Schema.ros2(IMAGE)
    codec = ros2_types.codec_for(schema.name, schema.data.decode())
    return codec.encode({"header": {"frame_id": "camera"}, "height": HEIGHT, "width": WIDTH,
                         "encoding": "rgb8", "step": WIDTH * 3, "data": bytes(WIDTH * HEIGHT * 3)})


def _rclpy_node(name):
    import rclpy
    from rclpy.qos import QoSProfile

    rclpy.init()
    return rclpy, rclpy.create_node(name), QoSProfile(depth=100)


def _message_class(type_name):
    import importlib

    pkg, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


# -- roles: each a process of its own


def role_bridge(imports, exports):
    """The ROS 2 bridge; each "mark" line on stdin prints its CPU seconds, wall time and
    status; it ends when stdin closes."""
    from a0py.ros2 import Ros2Bridge

    br = Ros2Bridge(imports=[g for g in imports.split(",") if g != "-"],
                    exports=[g for g in exports.split(",") if g != "-"], scan_interval=0.05).start()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "mark":
            t = os.times()
            print(json.dumps([t.user + t.system, time.monotonic(), br.status()]), flush=True)
    br.stop()


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
    with a0py.Publisher(a0py.Topic("bench/pong", size="16M"), schema=Schema.ros2(TYPE)) as pub, \
            a0py.SubscriberSync(a0py.Topic("bench/ping", size="16M")) as sub:
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


def _read(sub, timeout):
    """The next packet of `sub` within `timeout` seconds (None: wait as long as it takes),
    or None."""
    import a0py

    try:
        return sub.read_blocking(timeout=timeout)
    except a0py.A0TimeoutError:
        return None


def role_a0py_ping(size, count):
    import a0py

    data = payload(size)
    with a0py.Publisher(a0py.Topic("bench/ping", size="16M")) as pub, \
            a0py.SubscriberSync(a0py.Topic("bench/pong", size="16M")) as sub:
        deadline = time.monotonic() + 30
        pub.pub(data)
        while _read(sub, 0.2) is None and time.monotonic() < deadline:
            pub.pub(data)
        rtts = []
        for _ in range(count):
            t0 = time.perf_counter_ns()
            pub.pub(data)
            _read(sub, 5.0)
            rtts.append(time.perf_counter_ns() - t0)
    print(json.dumps(rtts), flush=True)


def role_rclpy_send(topic, type_name, size, count, hz):
    """Publishes `count` messages (serialized CDR) once a subscriber matched, as fast as
    it can (`hz` 0) or at `hz`."""
    rclpy, node, qos = _rclpy_node("send")
    pub = node.create_publisher(_message_class(type_name), topic, qos)
    while pub.get_subscription_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.01)
    data = image_payload() if type_name == IMAGE else payload(size)
    start = time.monotonic()
    refused = 0
    for i in range(count):
        if hz:
            time.sleep(max(0.0, start + i / hz - time.monotonic()))
        try:
            pub.publish(data)
        except Exception:  # RCLError "cannot publish data": Fast DDS's history is full
            refused += 1
    if refused:
        print(f"rclpy refused {refused} of {count} publishes", file=sys.stderr, flush=True)
    time.sleep(3)  # reliable QoS resends what was not taken yet


def role_rclpy_recv(topic, type_name, count):
    """Counts `count` messages (or what came until none came for 2 s); prints
    ``matched`` once it knows a publisher, then [received, seconds first to last]."""
    rclpy, node, qos = _rclpy_node("recv")
    stamps = []
    sub = node.create_subscription(_message_class(type_name), topic,
                                   lambda _: stamps.append(time.perf_counter()), qos, raw=True)
    print("ready", flush=True)
    while sub.get_publisher_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.01)
    print("matched", flush=True)
    while len(stamps) < count:
        rclpy.spin_once(node, timeout_sec=0.5)
        if stamps and time.perf_counter() - stamps[-1] > 2.0:
            break  # nothing more comes
    print(json.dumps([len(stamps), (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0]), flush=True)


def role_a0py_send(topic, size, count, hz, typed):
    """Publishes `count` messages as fast as it can (`hz` 0) or at `hz`; `typed`: with
    the ROS 2 schema (for the bridge), declared first, then it waits for a "go" line."""
    import numpy as np

    import a0py
    from a0py import Schema

    image = size < 0
    data = np.zeros((HEIGHT, WIDTH, 3), np.uint8) if image else payload(size)
    with a0py.Publisher(a0py.Topic(topic, size="64M"),
                        schema=Schema.ros2(TYPE) if typed and not image else None) as pub:
        if image:
            pub.pub_image(data, "rgb8")
        if typed:
            print("ready", flush=True)
            sys.stdin.readline()
        start = time.monotonic()
        for i in range(count):
            if hz:
                time.sleep(max(0.0, start + i / hz - time.monotonic()))
            if image:
                pub.pub_image(data, "rgb8")
            else:
                pub.pub(data)


def role_a0py_recv(topic, count):
    import a0py

    stamps = 0
    first = last = None
    with a0py.SubscriberSync(a0py.Topic(topic, size="64M")) as sub:
        print("ready", flush=True)
        while stamps < count:
            pkt = _read(sub, first and 2.0)  # the first message may take a while
            if pkt is None:
                break
            last = time.perf_counter()
            first = first or last
            stamps += 1 + pkt.missed
    print(json.dumps([stamps, (last - first) if first else 0]), flush=True)


# -- the parent


def _spawn(*args, stdin=None):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", *map(str, args)],
                            stdout=subprocess.PIPE, stdin=stdin, text=True)


def _last_json(proc, timeout=120):
    return json.loads(proc.communicate(timeout=timeout)[0].strip().splitlines()[-1])


def _stop(*procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    from a0py.proto import list_topics, unlink_topic

    for name in list_topics():  # the next case starts afresh (another schema, another size)
        unlink_topic(name)


def pingpong(kind, size, count):
    pong = _spawn({"rclpy": "rclpy_pong", "a0py": "a0py_pong", "bridge": "bridge_pong"}[kind])
    pong.stdout.readline()
    ping = _spawn("rclpy_ping" if kind != "a0py" else "a0py_ping", size, count)
    rtts = sorted(_last_json(ping))
    _stop(pong)
    return {"p50_us": rtts[len(rtts) // 2] / 1000, "p99_us": rtts[int(len(rtts) * 0.99)] / 1000}


class Bridge:
    """A bridge process; `mark()` is (CPU seconds, wall seconds, status)."""

    def __init__(self, imports, exports):
        self.proc = _spawn("bridge", imports, exports, stdin=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == "ready"

    def mark(self):
        self.proc.stdin.write("mark\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            _stop(self.proc)


def flow(kind, size, count, hz=0):
    """One sender, one receiver (and the bridge between for ``import``/``export``):
    messages/s received, how many, and the bridge's CPU (cores) while it ran."""
    topic, ros_type = ("bench/cam", IMAGE) if size < 0 else ("bench/rate", TYPE)
    bridge = None
    if kind == "import":
        bridge = Bridge(f"/{topic}", "-")
    elif kind == "export":
        bridge = Bridge("-", topic)
    if kind in ("rclpy", "export"):
        recv = _spawn("rclpy_recv", f"/{topic}", ros_type, count)
    else:
        recv = _spawn("a0py_recv", topic, count)
    recv.stdout.readline()
    if kind in ("rclpy", "import"):
        send = _spawn("rclpy_send", f"/{topic}", ros_type, size, count, hz)
    else:
        send = _spawn("a0py_send", topic, size, count, hz, int(kind == "export"), stdin=subprocess.PIPE)
        if kind == "export":
            send.stdout.readline()  # its schema is declared: the bridge makes its ROS 2 publisher
            assert recv.stdout.readline().strip() == "matched"
            send.stdin.write("go\n")
            send.stdin.flush()
    before = bridge.mark() if bridge else None
    got, span = _last_json(recv)
    cpu = None
    if bridge:
        after = bridge.mark()
        # paced: the CPU it took over the time frames flowed (it idles before and after)
        cpu = (after[0] - before[0]) / ((span + 1 / hz) if hz and span else (after[1] - before[1]))
        bridge.close()
    _stop(send, recv)
    return {"received": got, "sent": count, "rate": (got - 1) / span if span else 0.0, "bridge_cores": cpu}


def _median(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def bench_size(size, repeats, quick):
    small = size < 1 << 20
    n = (200 if quick else 1000) if small else (30 if quick else 100)
    m = (2000 if quick else 10000) if small else 100
    cases = {
        "pingpong rclpy": lambda: pingpong("rclpy", size, n),
        "pingpong a0py": lambda: pingpong("a0py", size, n * 10 if small else n),
        "pingpong bridge": lambda: pingpong("bridge", size, n),
        "rate rclpy": lambda: flow("rclpy", size, m),
        "rate a0py": lambda: flow("a0py", size, m * 10 if small else m),
        "rate import": lambda: flow("import", size, m),
        "rate export": lambda: flow("export", size, m),
    }
    return _round_robin(cases, repeats)


def bench_images(repeats, seconds):
    count = HZ * seconds
    cases = {"images import": lambda: flow("import", -1, count, HZ),
             "images export": lambda: flow("export", -1, count, HZ)}
    return _round_robin(cases, repeats)


def _round_robin(cases, repeats):
    """``{name: [run...]}``: every case once, then again, `repeats` times."""
    runs = {name: [] for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            runs[name].append(case())
    return runs


def report(size, runs):
    med = {name: {k: _median(rs, k) for k in rs[0]} for name, rs in runs.items()}
    pp = {k.split()[1]: med[k] for k in med if k.startswith("pingpong")}
    rt = {k.split()[1]: med[k] for k in med if k.startswith("rate")}
    print(f"| {size} | ping-pong p50 / p99 µs | {pp['rclpy']['p50_us']:.0f} / {pp['rclpy']['p99_us']:.0f} | "
          f"{pp['a0py']['p50_us']:.1f} / {pp['a0py']['p99_us']:.1f} | "
          f"{pp['bridge']['p50_us']:.0f} / {pp['bridge']['p99_us']:.0f} (rclpy ping, a0py pong) | | "
          f"{pp['rclpy']['p50_us'] / pp['a0py']['p50_us']:.0f}× |")

    def cell(r):
        return f"{r['rate']:,.0f} ({r['received']:.0f}/{r['sent']:.0f})"
    print(f"| {size} | rate msgs/s (received/sent) | {cell(rt['rclpy'])} | {cell(rt['a0py'])} | "
          f"{cell(rt['import'])} | {cell(rt['export'])} | {rt['a0py']['rate'] / rt['rclpy']['rate']:.0f}× |",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", nargs="+")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default="64,4096,1048576", help="comma-separated; '' for none")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", action="store_true", help="the 1080p camera both ways")
    parser.add_argument("--seconds", type=int, default=5, help="of camera, each run")
    parser.add_argument("--json", default=None, help="write every run here")
    args = parser.parse_args()
    if args.role:
        name, rest = args.role[0], [int(a) if a.lstrip("-").isdigit() else a for a in args.role[1:]]
        if name in ("a0py_pong", "bridge_pong"):
            return role_a0py_pong(name == "bridge_pong")
        return globals()[f"role_{name}"](*rest)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    every = {}
    print("| size | workload | rclpy → rclpy | a0py → a0py | rclpy talker → bridge → a0py | "
          "a0py → bridge → rclpy listener | a0py / rclpy |")
    print("|---|---|---|---|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",") if s]:
        runs = bench_size(size, args.repeats, args.quick)
        every[str(size)] = runs
        report(size, runs)
    if args.images:
        runs = bench_images(args.repeats, args.seconds)
        every["images"] = runs
        for name, rs in runs.items():
            each = ", ".join(f"{r['bridge_cores']:.2f}" for r in rs)
            print(f"| {WIDTH}x{HEIGHT} rgb8 at {HZ} Hz | {name}: bridge CPU (cores), frames received | "
                  f"{_median(rs, 'bridge_cores'):.2f} ({each}), {_median(rs, 'received'):.0f}/{rs[0]['sent']} |",
                  flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(every, f, indent=1)


if __name__ == "__main__":
    main()
