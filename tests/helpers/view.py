"""Helpers of the view tests (tests/view/): recordings to view, a
subprocess running ``a0py view``, a Foxglove-protocol client."""

import asyncio
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

import pytest
from websockets.asyncio.client import connect

from a0py.view import _protocol as P

MSG_S = 10.0
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T0_NS = 1_700_000_000_000_000_000
PERIOD_NS = 10_000_000  # 100 Hz
LATE_FROM = 600


def odom(k):
    return {"i": k, "x": math.sin(k / 20.0), "pose": {"theta": k * 0.01}}


def late_value(k):
    return {"late": k, "ok": k % 2 == 0}


def write_recording(path, topic_root, n=1000, chunk_size=4096, late=False):
    """An MCAP file like `a0py record` writes: topic ``robot/odom`` as whole
    a0py packets (JSON payloads ``odom(k)``, log time ``T0_NS + k *
    PERIOD_NS``), plus a foreign JSON channel ``/foreign/pose`` (value
    ``{"k": k}`` every 10th step). The packets are published to a topic under
    ``topic_root`` and read back, so they carry real standard headers.

    ``late``: also ``robot/late`` (packets ``late(k)``, from step
    ``LATE_FROM`` on: its first message is many chunks into the file) and a
    foreign channel ``/foreign/silent`` that has no message at all."""
    from mcap.writer import CompressionType, Writer

    import a0py

    topic = a0py.Topic("robot/odom", root=topic_root, size=1 << 22)
    pub = a0py.Publisher(topic)
    sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST)
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=chunk_size, compression=CompressionType.ZSTD)
        w.start(profile="", library="a0py-test")
        sid = w.register_schema("a0py.Packet", "a0py/packet-layout", b"a0py packet")
        odom_ch = w.register_channel("robot/odom", "a0py/packet", sid)
        jsid = w.register_schema("Pose", "jsonschema", json.dumps(
            {"type": "object", "properties": {"k": {"type": "integer"}}}).encode())
        pose_ch = w.register_channel("/foreign/pose", "json", jsid)
        if late:
            late_topic = a0py.Topic("robot/late", root=topic_root)
            late_pub = a0py.Publisher(late_topic)
            late_sub = a0py.SubscriberSync(late_topic, init=a0py.INIT_OLDEST)
            late_ch = w.register_channel("robot/late", "a0py/packet", sid)
            w.register_channel("/foreign/silent", "json", jsid)
        for k in range(n):
            pub.pub_json(odom(k))
            pkt = sub.read_blocking(timeout=5)
            t = T0_NS + k * PERIOD_NS
            w.add_message(odom_ch, log_time=t, data=pkt.to_bytes(), publish_time=t, sequence=k)
            if k % 10 == 0:
                w.add_message(pose_ch, log_time=t, data=json.dumps({"k": k}).encode(), publish_time=t)
            if late and k >= LATE_FROM:
                late_pub.pub_json(late_value(k))
                w.add_message(late_ch, log_time=t, data=late_sub.read_blocking(timeout=5).to_bytes(),
                              publish_time=t, sequence=k)
        w.finish()
    if late:
        late_sub.close()
        late_pub.close()
        late_topic.unlink()
    sub.close()
    pub.close()
    topic.unlink()


class ViewProcess:
    """``python -m a0py.cli.view ARGS --port 0`` in a subprocess; ``url`` is
    read from what it prints."""

    def __init__(self, *args, env=None, timeout=30):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "a0py.cli.view", *args, "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        self.lines = []
        deadline = time.monotonic() + timeout
        self.url = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"open (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise RuntimeError(f"a0py view did not start: {''.join(self.lines)}{out}{err}")
        self.ws_url = "ws" + self.url[4:]

    def rss(self, field="VmRSS"):
        """The view process's resident memory in bytes (``field="VmHWM"``: its peak)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def close(self):
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_PUBLISHER = r'''
import json, sys, time, math
sys.path.insert(0, sys.argv[1])  # tests/: helpers.view
import a0py
pubs = {}
def pub(t):
    if t not in pubs:
        pubs[t] = a0py.Publisher(t)
    return pubs[t]
for line in sys.stdin:
    cmd = json.loads(line)
    op = cmd["op"]
    if op == "json":
        for obj in cmd["objs"]:
            pub(cmd["topic"]).pub_json(obj)
    elif op == "bytes":
        pub(cmd["topic"]).pub(bytes.fromhex(cmd["hex"]))
    elif op == "flood":
        p = pub(cmd["topic"])
        start = time.monotonic()
        for k in range(cmd["n"]):
            p.pub(k.to_bytes(8, "little") * (cmd["size"] // 8))
            if cmd.get("period"):
                time.sleep(cmd["period"])
        print(json.dumps({"seconds": time.monotonic() - start}), flush=True)
        continue
    elif op == "rate":
        p = pub(cmd["topic"])
        period = 1.0 / cmd["hz"]
        start = time.monotonic()
        k = 0
        while time.monotonic() - start < cmd["seconds"]:
            p.pub_json({"i": k, "x": math.sin(k / 10.0), "pose": {"theta": k * 0.01}})
            k += 1
            delay = start + k * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    elif op == "camera_and_imu":
        # a large topic and a small fast one at once, for `seconds`: frames of `size` bytes
        # (their first 8 the frame's number) at cam_hz, {"i": k} at imu_hz
        cam, imu = pub(cmd["camera"]), pub(cmd["imu"])
        start = time.monotonic()
        frames = ticks = 0
        while time.monotonic() - start < cmd["seconds"]:
            now = time.monotonic() - start
            if frames <= now * cmd["cam_hz"]:
                cam.pub(frames.to_bytes(8, "little") + bytes(cmd["size"] - 8))
                frames += 1
            if ticks <= now * cmd["imu_hz"]:
                imu.pub_json({"i": ticks})
                ticks += 1
            time.sleep(min(1 / cmd["cam_hz"], 1 / cmd["imu_hz"]) / 2)
        print(json.dumps({"frames": frames, "ticks": ticks}), flush=True)
        continue
    elif op == "image":
        from helpers.view import image_payload
        t = cmd["topic"]
        if t not in pubs:
            pubs[t] = a0py.Publisher(t)
        how, value = image_payload(cmd["kind"], cmd["w"], cmd["h"])
        for k in range(cmd.get("n", 1)):
            if how == "image":
                pubs[t].pub_image(value, encoding=cmd["kind"], frame_id=f"f{k}")
            elif how == "png":
                pubs[t].pub_image(value, format="png", frame_id=f"f{k}")
            else:
                pubs[t].pub(value)
    elif op == "log_message":
        from foxglove_schemas_protobuf.Log_pb2 import Log
        pub(cmd["topic"]).pub(Log(message=cmd["text"], name="test", level=Log.WARNING, file="f.py", line=7))
    elif op == "typed_bytes":
        t = cmd["topic"]
        if t not in pubs:
            pubs[t] = a0py.Publisher(t, schema=a0py.Schema(cmd["name"], cmd["encoding"], cmd["schema"]))
        pubs[t].pub(bytes.fromhex(cmd["hex"]))
    elif op == "array":
        import numpy as np
        pub(cmd["topic"]).pub(np.arange(cmd["n"], dtype=np.float64).reshape(cmd["shape"]))
    elif op == "unlink":
        pubs.pop(cmd["topic"], None)
        a0py.Topic(cmd["topic"]).unlink()
    print("ok", flush=True)
'''


_RPC_SERVERS = r'''
import os, sys
sys.path.insert(0, sys.argv[1])  # tests/: helpers.view
import a0py
from a0py.view import declare_service
from helpers.view import ADD_REPLY, ADD_REQUEST
servers = []
for name in sys.argv[2:]:
    if name.endswith("add"):
        declare_service(name, a0py.Schema.json_schema("AddRequest", ADD_REQUEST),
                        a0py.Schema.json_schema("AddReply", ADD_REPLY))
        def on_add(req):
            q = req.pkt.json()
            req.reply_json({"sum": q["a"] + q["b"]})
        servers.append(a0py.RpcServer(name, on_add))
    elif name.endswith("slow"):
        servers.append(a0py.RpcServer(name, lambda req: None))  # never replies
    elif name.endswith("count"):
        calls = a0py.Publisher(name + "/calls")  # every request it gets, published
        servers.append(a0py.RpcServer(name, lambda req, calls=calls: (calls.pub(req.pkt.payload),
                                                                      req.reply(b"counted"))))
    else:
        servers.append(a0py.RpcServer(name, lambda req: req.reply(bytes(req.pkt.payload)[::-1])))
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "die":
        os._exit(3)
'''

#: The JSON Schemas the RPC server process declares for its ``*add`` services.
ADD_REQUEST = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
               "required": ["a", "b"]}
ADD_REPLY = {"type": "object", "properties": {"sum": {"type": "number"}}}


class RpcServerProcess:
    """RPC servers in another process, one per topic given: a topic ending in
    ``add`` answers ``{"a", "b"}`` with ``{"sum"}`` (schemas declared with
    :func:`a0py.view.declare_service`), one ending in ``slow`` never answers,
    one ending in ``count`` publishes each request to ``TOPIC/calls``, any
    other replies with its request's bytes reversed (no schemas).
    :meth:`kill` makes it exit at once (a dead server)."""

    def __init__(self, *topics, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-c", _RPC_SERVERS, _TESTS, *topics], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=e)
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.kill()
            raise RuntimeError(f"the RPC server process did not start (exit {self.proc.wait()})")

    @property
    def pid(self):
        return self.proc.pid

    def kill(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("die\n")
            self.proc.stdin.flush()
            self.proc.wait(10)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: The colours (RGB) of the quadrants of the test images: top left, top right,
#: bottom left, bottom right.
QUADRANTS = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255))
#: The two halves (left, right) of the mono8 test image.
MONO = (50, 200)


def image_rgb(w, h):
    """An h x w x 3 uint8 image (RGB) of :data:`QUADRANTS`."""
    import numpy as np

    img = np.empty((h, w, 3), np.uint8)
    img[:h // 2, :w // 2], img[:h // 2, w // 2:] = QUADRANTS[0], QUADRANTS[1]
    img[h // 2:, :w // 2], img[h // 2:, w // 2:] = QUADRANTS[2], QUADRANTS[3]
    return img


def expected_rgb(kind, x, y, w, h):
    """The RGB colour the page should draw at (x, y) of a test image of ``kind``."""
    if kind == "mono8":
        v = MONO[x >= w // 2]
        return (v, v, v)
    return QUADRANTS[(2 if y >= h // 2 else 0) + (x >= w // 2)]


def _png(rgb):
    """The bytes of a PNG of an h x w x 3 uint8 array (stored rows, zlib)."""
    import struct
    import zlib

    h, w, _ = rgb.shape

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image_payload(kind, w, h):
    """What a publisher publishes for a test image of ``kind``: ("image",
    array) for ``pub_image(array, encoding=kind)`` (rgb8, bgr8, mono8), ("png",
    bytes) for ``pub_image(bytes, format="png")``, ("message", RawImage) for
    ``pub(message)``: an rgba8 ``foxglove.RawImage`` whose rows are padded
    (``step`` = 4 w + 12 bytes of 0xEE)."""
    import numpy as np

    rgb = image_rgb(w, h)
    if kind == "rgb8":
        return "image", rgb
    if kind == "bgr8":
        return "image", np.ascontiguousarray(rgb[:, :, ::-1])
    if kind == "mono8":
        img = np.empty((h, w), np.uint8)
        img[:, :w // 2], img[:, w // 2:] = MONO
        return "image", img
    if kind == "png":
        return "png", _png(rgb)
    if kind == "rgba8_step":
        from foxglove_schemas_protobuf.RawImage_pb2 import RawImage

        rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2).reshape(h, w * 4)
        padded = np.concatenate([rgba, np.full((h, 12), 0xEE, np.uint8)], axis=1)
        return "message", RawImage(width=w, height=h, encoding="rgba8", step=w * 4 + 12, data=padded.tobytes(),
                                   frame_id="cam")
    raise ValueError(f"unknown test image kind {kind!r}")


class PublisherProcess:
    """Another process that publishes when told (one JSON command a line on
    its stdin; it answers each with a line)."""

    def __init__(self, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-c", _PUBLISHER, _TESTS], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=e)

    def call(self, timeout=60, **cmd):
        self.start(**cmd)
        return self.answer(timeout)

    def start(self, **cmd):
        """Sends a command without waiting for its answer (see :meth:`answer`)."""
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout=60):
        """The next line the publisher prints (RuntimeError after ``timeout`` s)."""
        import select

        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"no answer from the publisher process in {timeout} s (exit {self.proc.poll()})")
        return line.strip()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:  # still publishing at a rate: stop it
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """A Foxglove protocol client over `websockets` that sorts what it gets."""

    def __init__(self, ws):
        self.ws = ws
        self.channels = {}
        self.unadvertised = []
        self.statuses = []
        self.states = []
        self.times = []
        self.services = {}  # name -> service, as advertised (and not unadvertised since)
        self.server_info = None

    @classmethod
    async def open(cls, url, **kw):
        ws = await connect(url, subprotocols=[P.SUBPROTOCOL], max_size=None, **kw)
        c = cls(ws)
        c.server_info = await c.expect(lambda m: isinstance(m, dict) and m.get("op") == "serverInfo")
        return c

    def _sort(self, m):
        if isinstance(m, str):
            m = json.loads(m)
            if m["op"] == "advertise":
                for ch in m["channels"]:
                    self.channels[ch["id"]] = ch
            elif m["op"] == "unadvertise":
                self.unadvertised += m["channelIds"]
            elif m["op"] == "status":
                self.statuses.append(m)
            elif m["op"] == "advertiseServices":
                self.services.update({s["name"]: s for s in m["services"]})
            elif m["op"] == "unadvertiseServices":
                gone = set(m["serviceIds"])
                self.services = {n: s for n, s in self.services.items() if s["id"] not in gone}
            return m
        if m[0] == P.OP_PLAYBACK_STATE:
            self.states.append(struct.unpack_from("<BQfB", m, 1))
        elif m[0] == P.OP_TIME:
            self.times.append(struct.unpack_from("<Q", m, 1)[0])
        return m

    async def next(self, timeout=MSG_S):
        return self._sort(await asyncio.wait_for(self.ws.recv(), timeout))

    async def expect(self, pred, timeout=MSG_S, what="a message"):
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                pytest.fail(f"timed out waiting for {what}")
            try:
                m = await self.next(left)
            except TimeoutError:
                pytest.fail(f"timed out waiting for {what}")
            if pred(m):
                return m

    async def until(self, cond, what, timeout=MSG_S):
        """Reads messages until ``cond()`` holds (checked first)."""
        if not cond():
            await self.expect(lambda m: cond(), timeout, what)

    async def stats_until(self, sub_id, cond, what, timeout=MSG_S):
        """Subscribes ``sub_id`` to the stats channel and reads it until
        ``cond(topics)`` holds (``topics``: the stats of each topic)."""
        stats = await self.channel("/a0py/view/stats")
        await self.subscribe([(sub_id, stats["id"])])
        deadline = asyncio.get_running_loop().time() + timeout
        while not cond(json.loads((await self.data(sub_id))[2])["topics"]):
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail(f"timed out waiting for {what}")

    async def channel(self, topic):
        for ch in self.channels.values():
            if ch["topic"] == topic:
                return ch
        await self.expect(lambda m: any(c["topic"] == topic for c in self.channels.values()),
                          what=f"the advertisement of {topic}")
        return await self.channel(topic)

    async def subscribe(self, pairs):
        await self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": s, "channelId": c} for s, c in pairs]}))

    async def data(self, sub_id=None, timeout=MSG_S):
        m = await self.expect(lambda m: isinstance(m, bytes) and m[0] == P.OP_MESSAGE_DATA
                              and (sub_id is None or struct.unpack_from("<I", m, 1)[0] == sub_id),
                              timeout, "message data")
        sid, log = struct.unpack_from("<IQ", m, 1)
        return sid, log, m[13:]

    async def error(self):
        m = await self.expect(lambda m: isinstance(m, dict) and m.get("op") == "status", what="a status")
        return m

    async def send(self, op, **fields):
        await self.ws.send(json.dumps({"op": op, **fields}))

    async def reply(self, op, timeout=MSG_S, **match):
        """The next text message ``op`` whose fields include ``match``."""
        return await self.expect(lambda m: isinstance(m, dict) and m.get("op") == op
                                 and all(m.get(k) == v for k, v in match.items()), timeout, f"a {op}")

    async def close(self):
        await self.ws.close()


def run(coro):
    return asyncio.run(coro)


class GraphState:
    """The graph as a client rebuilds it from connectionGraphUpdate messages."""

    def __init__(self):
        self.published, self.subscribed, self.services = {}, {}, {}
        self.updates = 0
        self.fields = set()  # the fields of every update

    def apply(self, m):
        self.fields |= set(m)
        for e in m["publishedTopics"]:
            self.published[e["name"]] = set(e["publisherIds"])
        for e in m["subscribedTopics"]:
            self.subscribed[e["name"]] = set(e["subscriberIds"])
        for e in m["advertisedServices"]:
            self.services[e["name"]] = set(e["providerIds"])
        for t in m["removedTopics"]:
            self.published.pop(t, None)
            self.subscribed.pop(t, None)
        for s in m["removedServices"]:
            self.services.pop(s, None)
        self.updates += 1

    def snapshot(self):
        """(published, subscribed, services): {name: sorted ids}, without empty entries."""
        return tuple({k: sorted(v) for k, v in d.items() if v}
                     for d in (self.published, self.subscribed, self.services))

    async def until(self, c, cond, what):
        def check(m):
            if isinstance(m, dict) and m.get("op") == "connectionGraphUpdate":
                self.apply(m)
            return cond(self)
        if not cond(self):
            await c.expect(check, what=what)
