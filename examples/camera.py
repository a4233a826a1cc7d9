"""A camera, end to end: numpy RGB frames published as a typed topic
(``foxglove.RawImage``), read in place by a subscriber, shown by ``a0py view``,
recorded by ``a0py record``, opened with the ``mcap`` command line tool and
decoded with ``mcap-protobuf-support``, then read as columns by Spark.
docs/camera.md walks through it.

    python examples/camera.py publish [--hz 15] [--seconds 0]   # 0: until Ctrl-C
    python examples/camera.py subscribe [--frames 30]          # zero-copy Packet.array()
    python examples/camera.py view                             # = a0py view camera
    python examples/camera.py record --out rec/ --seconds 5    # = a0py record camera -o rec/
    python examples/camera.py inspect rec/                     # mcap CLI + mcap-protobuf-support
    python examples/camera.py spark rec/                       # width/height/encoding columns
    python examples/camera.py all [--seconds 3]                # every step but Spark, in one go

Every frame says which it is: its top-left pixel holds its number (red: the
low byte, green: the high byte), and the rest is drawn from that number
(:func:`make_frame`), so a reader can check each frame it gets. Needs
``pip install 'a0py[typed,view,record]'``; ``inspect`` also
``mcap-protobuf-support`` and the ``mcap`` CLI (``databeam-mcap-reader`` ships
one), ``spark`` also ``a0py[spark]`` and the ``decode`` option of the ``a0``
source.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import a0py

TOPIC = "camera"
BARS = [(255, 255, 255), (255, 255, 0), (0, 255, 255), (0, 255, 0), (255, 0, 255), (255, 0, 0), (0, 0, 255),
        (0, 0, 0)]


def make_frame(k, width=640, height=480):
    """Frame number ``k``: colour bars, a grey square moving across them, and
    ``k`` in the top-left pixel (an HxWx3 uint8 RGB array)."""
    import numpy as np

    frame = np.empty((height, width, 3), np.uint8)
    edges = np.linspace(0, width, len(BARS) + 1).astype(int)
    for colour, a, b in zip(BARS, edges[:-1], edges[1:], strict=True):
        frame[:, a:b] = colour
    side = max(4, height // 6)
    x = (k * 7) % max(1, width - side)
    frame[height // 2 - side // 2:height // 2 + side // 2, x:x + side] = 128
    frame[0, 0] = (k & 0xFF, (k >> 8) & 0xFF, 0)
    return frame


def frame_number(image):
    """The number :func:`make_frame` wrote into ``image`` (HxWx3)."""
    return int(image[0, 0, 0]) | (int(image[0, 0, 1]) << 8)


def topic_size(width, height):
    """An arena holding four frames (at least 4 MiB), as ``like=`` would size it."""
    frame = width * height * 3 + 4096
    size = 4 << 20
    while size < 4 * frame:
        size *= 2
    return size


# ---------------------------------------------------------------- the steps


def publish(topic=TOPIC, hz=15.0, seconds=0.0, width=640, height=480, root=None, out=print):
    """Publishes frames at ``hz`` for ``seconds`` (0: until interrupted);
    returns how many."""
    pub = a0py.Publisher(a0py.Topic(topic, root=root, size=topic_size(width, height)))
    period = 1.0 / hz
    start = time.monotonic()
    k = 0
    try:
        while not seconds or time.monotonic() - start < seconds:
            # A typed topic: the first frame declares its schema, foxglove.RawImage (rgb8).
            pub.pub_image(make_frame(k, width, height), frame_id="camera", timestamp=time.time_ns())
            k += 1
            delay = start + k * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    except KeyboardInterrupt:
        pass
    finally:
        pub.close()
    out(f"published {k} frames of {width}x{height} rgb8 on {topic!r} at {hz:g} Hz")
    return k


def subscribe(topic=TOPIC, frames=30, timeout=10.0, root=None, out=print):
    """Reads ``frames`` frames as read-only numpy views into the topic's
    shared memory (no copy); checks each against :func:`make_frame`.
    Returns (frames read, frames written over while read)."""
    from a0py.proto import topic_schema

    deadline = time.monotonic() + timeout
    while topic_schema(a0py.Topic(topic, root=root)) is None:  # its publisher has not made it yet
        if time.monotonic() > deadline:
            raise TimeoutError(f"no topic {topic!r} with a schema after {timeout} s: is the publisher running?")
        time.sleep(0.05)
    sub = a0py.SubscriberSync(a0py.Topic(topic, root=root), init=a0py.INIT_MOST_RECENT)
    read = evicted = 0
    try:
        while read < frames:
            try:
                with sub.read_view(timeout=timeout) as pkt:  # A0TimeoutError if no frame comes in time
                    image = pkt.array()  # HxWx3 uint8, read-only, in the arena
                    k = frame_number(image)
                    h, w, _ = image.shape
                    same = bool((image == make_frame(k, w, h)).all())
                    mean = image.reshape(-1, 3).mean(axis=0)
            except a0py.FrameEvictedError:
                evicted += 1  # the publisher wrote over it while it was read: what we read may be torn
                continue
            read += 1
            if read == 1 or read == frames:
                out(f"frame {k}: {w}x{h} {pkt.schema.name}, mean RGB ({mean[0]:.0f}, {mean[1]:.0f}, "
                    f"{mean[2]:.0f}), {'as published' if same else 'NOT as published'}")
            if not same:
                raise RuntimeError(f"frame {k} is not what was published")
    finally:
        sub.close()
    out(f"read {read} frames in place (zero-copy), {evicted} written over while read")
    return read, evicted


def view(topic=TOPIC, port=8765, root=None):
    """Serves the live view of the topic (``a0py view camera``) until Ctrl-C."""
    import a0py.view

    a0py.view.serve([topic], port=port, root=root, ready=lambda url: print(f"open {url} and click {topic!r}"))


def check_view(topic=TOPIC, root=None, out=print, timeout=20.0):
    """Starts the view in this process and checks, as a Foxglove client, that
    the topic is advertised as ``foxglove.RawImage`` in protobuf and that a
    frame arrives as the Foxglove app would get it."""
    import base64
    import struct

    from websockets.sync.client import connect

    import a0py.view

    with a0py.view.start([topic], port=0, root=root) as v:
        with connect(v.ws_url, subprotocols=["foxglove.sdk.v1"], max_size=None, open_timeout=timeout) as ws:
            channel = None
            deadline = time.monotonic() + timeout
            while channel is None:
                m = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
                if m["op"] == "advertise":
                    channel = next((c for c in m["channels"] if c["topic"] == topic), None)
            ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": channel["id"]}]}))
            while True:
                m = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
                if isinstance(m, bytes) and m[0] == 1 and struct.unpack_from("<I", m, 1)[0] == 1:
                    break
        from foxglove_schemas_protobuf.RawImage_pb2 import RawImage

        img = RawImage.FromString(m[13:])
        out(f"view: {v.url} advertises {topic!r} as {channel['schemaName']} ({channel['encoding']}, "
            f"schema {len(base64.b64decode(channel['schema']))} B); a frame arrived: "
            f"{img.width}x{img.height} {img.encoding}")
    return channel


def record(out_dir, topic=TOPIC, seconds=5.0, root=None, out=print):
    """Records the topic for ``seconds`` (``a0py record camera -o OUT``);
    returns the segment files."""
    from a0py.recording import Recorder

    rec = Recorder([topic], out=out_dir, root=root).start()
    try:
        if not rec.wait_ready(30):
            raise RuntimeError("the recorder did not start")
        time.sleep(seconds)
    finally:
        stats = rec.stop()
    st = stats.get(topic)
    out(f"recorded {st.frames if st else 0} frames of {topic!r} into {', '.join(rec.segments)}")
    return list(rec.segments)


def mcap_cli():
    """The path of the ``mcap`` command line tool (Go): on PATH, or the one
    the ``databeam-mcap-reader`` package ships. None if neither is there."""
    found = shutil.which("mcap")
    if found:
        return found
    try:
        import databeam_mcap_reader
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(databeam_mcap_reader.__file__), "mcap_cli")
    return path if os.access(path, os.X_OK) else None


def inspect(path, topic=TOPIC, out=print):
    """Opens the recording with tools that are not a0py: the ``mcap`` CLI
    (``mcap info``, ``mcap cat --json``), then the official ``mcap`` reader
    with ``mcap-protobuf-support``'s decoder, checking every frame. Returns
    the number of frames decoded."""
    import numpy as np
    from mcap.reader import make_reader
    from mcap_protobuf.decoder import DecoderFactory

    files = sorted(glob.glob(os.path.join(path, "*.mcap"))) if os.path.isdir(path) else [path]
    if not files:
        raise FileNotFoundError(f"{path}: no .mcap file")
    cli = mcap_cli()
    if cli is None:
        out("mcap CLI not found (pip install databeam-mcap-reader, or the mcap release binary): skipped")
    else:
        info = subprocess.run([cli, "info", files[0]], capture_output=True, text=True, timeout=60, check=True)
        lines = [line for line in info.stdout.splitlines() if topic in line or "messages" in line]
        out("mcap info:\n  " + "\n  ".join(line.strip() for line in lines))
        cat = subprocess.run([cli, "cat", files[0], "--topics", topic, "--json"], capture_output=True, text=True,
                             timeout=120, check=True)
        first = json.loads(cat.stdout.splitlines()[0])
        msg = first["data"]  # the message, decoded by the CLI from its schema
        out(f"mcap cat --json: {len(cat.stdout.splitlines())} messages; the first is {msg['width']}x"
            f"{msg['height']} {msg['encoding']} (step {msg['step']})")
    decoded = 0
    for f in files:
        with open(f, "rb") as fh:
            reader = make_reader(fh, decoder_factories=[DecoderFactory()])
            for _schema, _channel, _message, img in reader.iter_decoded_messages(topics=[topic]):
                rows = np.frombuffer(img.data, np.uint8).reshape(img.height, img.step)
                image = rows[:, :img.width * 3].reshape(img.height, img.width, 3)
                k = frame_number(image)
                if not (image == make_frame(k, img.width, img.height)).all():
                    raise RuntimeError(f"{f}: frame {k} does not decode to what was published")
                decoded += 1
    out(f"mcap-protobuf-support decoded {decoded} frames ({type(img).__name__}), each as published")
    return decoded


def spark(path, topic=TOPIC, out=print):
    """Reads the recording with Spark: the frames' width, height and encoding
    as columns (``option("decode", "true")`` gives each message's fields as
    the struct column ``message``)."""
    from pyspark.sql import functions as F

    import a0py.spark

    # The JVM reader's jar and the Python source both registered; a decode=true
    # read is the Python source's (docs/spark.md, "Two readers").
    spark = a0py.spark.session(master="local[2]", app_name="camera", **{
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    frames = (spark.read.format("a0").option("decode", "true").option("topics", topic).load(path)
              .select("topic", "seq", "time_wall", F.col("message.width").alias("width"),
                      F.col("message.height").alias("height"), F.col("message.encoding").alias("encoding"),
                      F.length("message.data").alias("bytes"), "decode_error"))
    frames.show(5, truncate=False)
    summary = frames.groupBy("width", "height", "encoding").agg(F.count("*").alias("frames")).collect()
    for row in summary:
        out(f"spark: {row.frames} frames of {row.width}x{row.height} {row.encoding}")
    return summary


def run_all(seconds=3.0, hz=15.0, width=320, height=240, out_dir=None, root=None, out=print):
    """Every step but Spark, with real processes: a publisher process; in
    this one, a zero-copy subscriber, the view (checked as a Foxglove client),
    a recording of ``seconds``, and the recording read by the ``mcap`` CLI and
    ``mcap-protobuf-support``. Returns the recording's directory."""
    import tempfile

    out_dir = out_dir or tempfile.mkdtemp(prefix="camera-")
    env = dict(os.environ)
    if root:
        env["A0PY_ROOT"] = root
    pub = subprocess.Popen([sys.executable, os.path.abspath(__file__), "publish", "--hz", str(hz), "--seconds",
                            str(seconds + 6.0), "--width", str(width), "--height", str(height)], env=env)
    try:
        subscribe(frames=min(10, int(hz)), root=root, out=out)
        check_view(root=root, out=out)
        record(out_dir, seconds=seconds, root=root, out=out)
        inspect(out_dir, out=out)
    finally:
        pub.terminate()
        pub.wait(10)
    out(f"done: the recording is in {out_dir}; `python examples/camera.py spark {out_dir}` reads it with Spark")
    return out_dir


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("publish", help="publish frames")
    p.add_argument("--hz", type=float, default=15.0)
    p.add_argument("--seconds", type=float, default=0.0, help="0: until Ctrl-C")
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p = sub.add_parser("subscribe", help="read frames in place")
    p.add_argument("--frames", type=int, default=30)
    p = sub.add_parser("view", help="serve the live view of the camera")
    p.add_argument("--port", type=int, default=8765)
    p = sub.add_parser("record", help="record the camera")
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=5.0)
    p = sub.add_parser("inspect", help="read a recording with the mcap CLI and mcap-protobuf-support")
    p.add_argument("path")
    p = sub.add_parser("spark", help="read a recording's frames as Spark columns")
    p.add_argument("path")
    p = sub.add_parser("all", help="every step but Spark")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--hz", type=float, default=15.0)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--out")
    args = ap.parse_args(argv)
    if args.step == "publish":
        publish(hz=args.hz, seconds=args.seconds, width=args.width, height=args.height)
    elif args.step == "subscribe":
        subscribe(frames=args.frames)
    elif args.step == "view":
        view(port=args.port)
    elif args.step == "record":
        record(args.out, seconds=args.seconds)
    elif args.step == "inspect":
        inspect(args.path)
    elif args.step == "spark":
        spark(args.path)
    else:
        run_all(seconds=args.seconds, hz=args.hz, width=args.width, height=args.height, out_dir=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
