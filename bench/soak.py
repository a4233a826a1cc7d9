"""Soak: everything a0py does, together, under load, for N minutes; does any
line grow, and is anything lost that is not counted as lost?

    python bench/soak.py --minutes 30 --json build/soak.json --markdown build/soak.md

Runs, each in processes of its own, on two shared-memory roots A and B:

- pub/sub: 20 topics at 1 kHz each (64 B, a seq in each), a subscriber on A;
- a camera: 640x480 rgb8 images at 30 Hz (``pub_image``), read on A;
- RPC: a server on A and a client calling it at 100 Hz;
- ``a0py record`` of every topic on A (segments rotated at 64 MiB; the
  finished ones are deleted as it goes, so the disk does not fill);
- ``a0py view`` on A with two WebSocket clients subscribed to every channel;
- ``a0py bridge`` joining A to B over Zenoh (reliable), a subscriber on B.

Once a second it samples every process's RSS and open descriptors and the
number of /dev/shm objects. At the end each consumer says what it got and
what it counted as lost (seq gaps, which include frames evicted before it
read them), and the report checks, per consumer, that published = received +
counted lost; the view's clients, whose sends are newest-wins by design,
report what they received. The result is the slope of each sampled line
after the first minute, its growth over that time, and the packets lost.
Target: no line grows after the first minute (RSS within 5 %).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOPICS = 20
IMU_HZ = 1000
CAMERA_HZ = 30
RPC_HZ = 100

# Each child prints one JSON line of its counts when it gets SIGINT (or ends).
PUBLISHER = r"""
import json, signal, struct, sys, time
import a0py
n, hz = int(sys.argv[1]), float(sys.argv[2])
pubs = [a0py.Publisher(f"soak/imu/{i}") for i in range(n)]
sent = [0] * n
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
print("up", flush=True)
period, t = 1.0 / hz, time.monotonic()
pad = bytes(56)
while not stop:
    for i, p in enumerate(pubs):
        sent[i] += 1
        p.pub(struct.pack("<Q", sent[i]) + pad)
    t += period
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    elif delay < -1.0:
        t = time.monotonic()  # fell a second behind: the rate is what the machine gives
print(json.dumps({"sent": {f"soak/imu/{i}": sent[i] for i in range(n)}}), flush=True)
"""

CAMERA = r"""
import json, signal, sys, time
import numpy as np
import a0py
hz = float(sys.argv[1])
pub = a0py.Publisher(a0py.Topic("soak/camera", size=32 << 20))
frame = np.zeros((480, 640, 3), np.uint8)
sent, stop = 0, []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
print("up", flush=True)
t = time.monotonic()
while not stop:
    sent += 1
    frame[:, :, 0] = sent % 251  # a different image each time, and a compressible one
    pub.pub_image(frame, headers={"soak_seq": str(sent)})
    t += 1.0 / hz
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)
print(json.dumps({"sent": {"soak/camera": sent}}), flush=True)
"""

# A subscriber on every soak topic: received and counted lost (seq gaps) per topic.
SUBSCRIBER = r"""
import json, signal, struct, threading, time
import a0py
got, lost, last = {}, {}, {}
lock = threading.Lock()

def on_packet(topic):
    def handle(pkt):
        if topic == "soak/camera":
            seq = int(pkt.headers.get("soak_seq"))
        else:
            seq = struct.unpack_from("<Q", pkt.payload)[0]
        with lock:
            got[topic] = got.get(topic, 0) + 1
            if seq > last.get(topic, 0) + 1:
                lost[topic] = lost.get(topic, 0) + seq - last.get(topic, 0) - 1
            last[topic] = seq
    return handle

names = [f"soak/imu/{i}" for i in range(int(__import__("sys").argv[1]))] + ["soak/camera"]
subs = [a0py.Subscriber(a0py.Topic(t, size=32 << 20) if t == "soak/camera" else t, on_packet(t),
                        a0py.INIT_OLDEST) for t in names]
stop = threading.Event()
signal.signal(signal.SIGINT, lambda *a: stop.set())
print("up", flush=True)
stop.wait()
time.sleep(0.2)
with lock:
    print(json.dumps({"received": got, "lost": lost, "last": last}), flush=True)
"""

RPC_SERVER = r"""
import signal, threading
import a0py
served = [0]
def handle(req):
    served[0] += 1
    req.reply(req.pkt.payload)
server = a0py.RpcServer("soak/rpc", handle)
stop = threading.Event()
signal.signal(signal.SIGINT, lambda *a: stop.set())
print("up", flush=True)
stop.wait()
print(__import__("json").dumps({"served": served[0]}), flush=True)
"""

RPC_CLIENT = r"""
import json, signal, sys, time
import a0py
hz = float(sys.argv[1])
client = a0py.RpcClient("soak/rpc")
calls = ok = errors = 0
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
print("up", flush=True)
t = time.monotonic()
while not stop:
    calls += 1
    try:
        reply = client.send_blocking(b"ping %d" % calls, timeout=5.0)
        ok += reply.payload == b"ping %d" % calls
    except a0py.A0Error:
        errors += 1
    t += 1.0 / hz
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)
print(json.dumps({"calls": calls, "ok": ok, "errors": errors}), flush=True)
"""

# A Foxglove WebSocket client of the view: subscribes to every channel, counts messages.
VIEW_CLIENT = r"""
import asyncio, json, signal, struct, sys
import websockets
url = sys.argv[1]
counts, names = {}, {}

async def main():
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    async with websockets.connect(url, subprotocols=["foxglove.sdk.v1"], max_size=None) as ws:
        print("up", flush=True)
        next_id = 1

        async def read():
            nonlocal next_id
            async for msg in ws:
                if isinstance(msg, str):
                    m = json.loads(msg)
                    if m.get("op") == "advertise":
                        subs = []
                        for ch in m["channels"]:
                            names[next_id] = ch["topic"]
                            subs.append({"id": next_id, "channelId": ch["id"]})
                            next_id += 1
                        await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
                elif msg[0] == 1:  # message data: opcode, subscription id, log time, payload
                    sub = struct.unpack_from("<I", msg, 1)[0]
                    counts[names.get(sub, "?")] = counts.get(names.get(sub, "?"), 0) + 1

        reader = asyncio.create_task(read())
        await stop.wait()
        reader.cancel()
    print(json.dumps({"received": counts}), flush=True)

asyncio.run(main())
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Fleet:
    """The soak's processes: started in order, each waited for ("up" or its
    first line), stopped with SIGINT in the reverse order, their last JSON
    line kept as their counts."""

    def __init__(self):
        self.procs = {}

    def start(self, name, argv, root, wait=True, **kw):
        env = dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, **kw)
        self.procs[name] = proc
        if wait:
            first = proc.stdout.readline()
            if not first:
                raise SystemExit(f"{name} did not start: {proc.stderr.read()[-2000:]}")
        return proc

    def python(self, name, code, root, *args):
        return self.start(name, [sys.executable, "-c", code, *map(str, args)], root)

    def stop(self, names, timeout=60):
        results = {}
        for name in names:
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            results[name] = {"out": out, "err": err[-3000:], "rc": proc.returncode}
        return results

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()


def sample(fleet, prefixes):
    """{process: (rss KiB, fds)} and the count of /dev/shm objects of the roots."""
    row = {}
    for name, proc in fleet.procs.items():
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            rss, anon = (int(status[k].split()[0]) for k in ("VmRSS", "RssAnon"))
            fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        except (OSError, KeyError, ValueError):
            continue
        row[name] = (rss, fds, anon)
    shm = sum(1 for n in os.listdir("/dev/shm") if n.startswith(prefixes))
    return row, shm


def slope(points):
    """Least-squares slope of [(t, y)] (y per second)."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / den if den else 0.0


def last_json(text):
    for line in reversed((text or "").strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def run(minutes, out_dir):
    tag = uuid.uuid4().hex[:6]
    root_a, root_b = f"shm:soak{tag}a", f"shm:soak{tag}b"
    prefixes = (f"soak{tag}a.", f"soak{tag}b.")
    rec_dir = os.path.join(out_dir, "rec")
    fleet = Fleet()
    a0 = [sys.executable, "-m", "a0py"]
    port, zport = free_port(), free_port()
    samples = []
    try:
        # the bridge, the recorder and the view first, so they see every topic from its start
        fleet.start("bridge-a", [*a0, "bridge", "--reliable", "--listen", f"tcp/127.0.0.1:{zport}",
                                 "soak/**"], root_a)
        fleet.start("bridge-b", [*a0, "bridge", "--reliable", "--connect", f"tcp/127.0.0.1:{zport}",
                                 "soak/**"], root_b)
        fleet.python("sub-a", SUBSCRIBER, root_a, TOPICS)
        fleet.python("sub-b", SUBSCRIBER, root_b, TOPICS)
        fleet.start("record", [*a0, "record", "-a", "-o", rec_dir, "--max-bytes", "64M"], root_a,
                    wait=False)
        fleet.start("view", [*a0, "view", "--port", str(port)], root_a, wait=False)
        fleet.python("rpc-server", RPC_SERVER, root_a)
        time.sleep(2)  # the view's port, the recorder's first scan
        fleet.python("view-client-1", VIEW_CLIENT, root_a, f"ws://127.0.0.1:{port}")
        fleet.python("view-client-2", VIEW_CLIENT, root_a, f"ws://127.0.0.1:{port}")
        fleet.python("rpc-client", RPC_CLIENT, root_a, RPC_HZ)
        fleet.python("camera", CAMERA, root_a, CAMERA_HZ)
        fleet.python("publisher", PUBLISHER, root_a, TOPICS, IMU_HZ)
        start = time.monotonic()
        end = start + minutes * 60
        while time.monotonic() < end:
            row, shm = sample(fleet, prefixes)
            samples.append({"t": round(time.monotonic() - start, 2), "procs": row, "shm": shm})
            for name, proc in fleet.procs.items():
                if proc.poll() is not None:
                    raise SystemExit(f"{name} ended early (rc {proc.returncode}): "
                                     f"{proc.stderr.read()[-2000:]}")
            _prune_segments(rec_dir)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - start) % 1.0))
        # stop the sources, let the consumers drain, then stop them
        stopped = fleet.stop(["publisher", "camera", "rpc-client"])
        time.sleep(5)
        stopped.update(fleet.stop(["sub-a", "sub-b", "view-client-1", "view-client-2", "rpc-server",
                                   "record", "view", "bridge-a", "bridge-b"]))
    finally:
        fleet.kill_all()
        for name in os.listdir("/dev/shm"):
            if name.startswith(prefixes):
                os.unlink(os.path.join("/dev/shm", name))
    return samples, stopped


def _prune_segments(rec_dir):
    """Deletes the finished segments (all but the newest), so a long soak does not fill the disk."""
    try:
        segments = sorted(n for n in os.listdir(rec_dir) if n.endswith(".mcap"))
    except OSError:
        return
    for name in segments[:-1]:
        try:
            os.unlink(os.path.join(rec_dir, name))
        except OSError:
            pass


def report(samples, stopped, minutes):
    """The lines' slopes and growth after the first minute, and the packets' accounting."""
    after = [s for s in samples if s["t"] >= 60] or samples
    lines = []
    names = sorted({n for s in samples for n in s["procs"]})
    for name in names:
        rss = [(s["t"], s["procs"][name][0]) for s in after if name in s["procs"]]
        fds = [(s["t"], s["procs"][name][1]) for s in after if name in s["procs"]]
        anon = [(s["t"], s["procs"][name][2]) for s in after if name in s["procs"]]
        if not rss:
            continue
        first, last = rss[0][1], rss[-1][1]
        lines.append({"process": name, "rss_first_kib": first, "rss_last_kib": last,
                      "anon_first_kib": anon[0][1], "anon_last_kib": anon[-1][1],
                      "anon_slope_kib_per_min": round(60 * slope(anon), 2),
                      "rss_growth_pct": round(100.0 * (last - first) / first, 2) if first else 0.0,
                      "rss_slope_kib_per_min": round(60 * slope(rss), 2),
                      "fds_first": fds[0][1], "fds_last": fds[-1][1],
                      "fds_slope_per_min": round(60 * slope(fds), 3),
                      "rss_max_kib": max(v for _, v in rss)})
    shm = [(s["t"], s["shm"]) for s in after]
    counts = {name: last_json(r["out"]) for name, r in stopped.items()}
    sent = {**counts.get("publisher", {}).get("sent", {}), **counts.get("camera", {}).get("sent", {})}
    accounting = []
    for consumer in ("sub-a", "sub-b"):
        got = counts.get(consumer, {})
        for topic, n in sorted(sent.items()):
            received = got.get("received", {}).get(topic, 0)
            lost = got.get("lost", {}).get(topic, 0)
            # what was sent after the consumer's last packet and never arrived is uncounted
            uncounted = n - received - lost
            accounting.append({"consumer": consumer, "topic": topic, "sent": n, "received": received,
                               "counted_lost": lost, "uncounted": uncounted})
    views = {name: counts.get(name, {}).get("received", {}) for name in ("view-client-1", "view-client-2")}
    rpc = {"client": counts.get("rpc-client", {}), "server": counts.get("rpc-server", {})}
    return {"minutes": minutes, "samples": len(samples), "lines": lines,
            "shm_first": shm[0][1] if shm else None, "shm_last": shm[-1][1] if shm else None,
            "shm_slope_per_min": round(60 * slope(shm), 3), "accounting": accounting,
            "view_clients": {k: sum(v.values()) for k, v in views.items()}, "rpc": rpc,
            "record": (stopped.get("record", {}).get("out") or "")[-2000:],
            "failed": {n: r["err"] for n, r in stopped.items() if r["rc"] not in (0, -2, 130)}}


def markdown(result):
    out = [f"Soak of {result['minutes']} min ({result['samples']} samples, one a second); "
           "lines after the first minute.", "",
           "RSS counts the arenas' shared pages a process has touched (they fill during the first",
           "lap of each ring); private memory (RssAnon) is where a leak would show.", "",
           "| process | RSS first → last (MiB) | growth | slope (KiB/min) | private first → last (MiB) "
           "| private slope (KiB/min) | fds first → last |",
           "|---|---|---|---|---|---|---|"]
    for line in result["lines"]:
        out.append(f"| {line['process']} | {line['rss_first_kib'] / 1024:.1f} → "
                   f"{line['rss_last_kib'] / 1024:.1f} | {line['rss_growth_pct']:+.1f} % | "
                   f"{line['rss_slope_kib_per_min']:+.1f} | {line['anon_first_kib'] / 1024:.1f} → "
                   f"{line['anon_last_kib'] / 1024:.1f} | {line['anon_slope_kib_per_min']:+.1f} | "
                   f"{line['fds_first']} → {line['fds_last']} |")
    out += ["", f"/dev/shm objects of the two roots: {result['shm_first']} → {result['shm_last']} "
            f"(slope {result['shm_slope_per_min']:+.3f}/min)", ""]
    totals = {}
    for row in result["accounting"]:
        t = totals.setdefault(row["consumer"], [0, 0, 0, 0])
        for i, k in enumerate(("sent", "received", "counted_lost", "uncounted")):
            t[i] += row[k]
    out += ["| consumer | sent | received | counted lost | lost uncounted |", "|---|---|---|---|---|"]
    for consumer, (s, r, lost, unc) in totals.items():
        out.append(f"| {consumer} | {s:,} | {r:,} | {lost:,} | {unc:,} |")
    rpc = result["rpc"]["client"]
    out += ["", f"RPC: {rpc.get('calls', 0):,} calls, {rpc.get('ok', 0):,} answered, "
            f"{rpc.get('errors', 0):,} errors. View clients received: "
            + ", ".join(f"{k} {v:,}" for k, v in result["view_clients"].items()) + "."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="a0py-soak-")
    try:
        samples, stopped = run(args.minutes, out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    result = report(samples, stopped, args.minutes)
    text = markdown(result)
    print(text)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"result": result, "samples": samples}, f)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
