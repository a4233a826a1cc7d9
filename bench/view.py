"""The live view under load: through a real browser, and driving a0py.

    python bench/view.py              # about two minutes on 2 cores
    python bench/view.py --quick      # about half a minute
    python bench/view.py --only graph,service,fanout --quick   # no browser needed
    python bench/view.py --json out.json

Workloads (the view, the publishers and headless Chromium each in their own
processes; Debian's /usr/bin/chromium driven by Playwright):

  latency    one topic at 1 kHz (small JSON), one page with it selected and a
             field plotted. Per message the page records, on the same clock
             as the publisher (the machine's wall clock), how long after its
             a0_time_wall it arrived (``received``), and at each animation
             frame how old the newest message it drew was (``shown``).
             p50 and p99 in ms. Target: shown p50 < 50 ms.
  load       20 topics at 1 kHz each from one publisher process; the time of
             each Publisher.pub() call and the rate actually held, first with
             nothing watching, then with the view and 10 pages, each plotting
             one field of all 20 topics. Reports pub() p50/p99 in µs, the
             publisher's achieved rate, the slowdown (ratio of pub() p50 and of
             the rate), and what the pages got and the view dropped for them.
             Target: publishers slowed by less than 5 %.

  graph      a client subscribed to the connection graph; a publisher process
             started, then killed, five times: how long from its start (and
             from its kill) until the graph the client holds shows it (and
             no longer does). Target: within 1 s.
  service    an RPC server process answering JSON; 300 calls in turn, each a
             service call through the view (a websockets client, loopback),
             then each an RpcClient call straight to it. p50/p99 in ms.
             Target: through the view p50 <= 2 ms.
  fanout     50 IMU-like topics at 100 Hz (small JSON) and a 1080p camera
             (raw RGB, 6.2 MB a frame) at 30 Hz, 10 clients each subscribed to
             all 51 (five clients per client process, each a plain socket
             that counts frames); then the same with one more client that
             never reads. Reports the view's CPU (of one core), each client's
             IMU rate as a fraction of the rate published (as a local
             subscriber saw it: the lowest client's median over the topics,
             and the lowest topic), camera frames a second per client and what the
             view dropped; and, without and with the stalled client, a
             reading client's IMU rate and a local subscriber's latency
             (publish to read, p50): the slowdown the stalled one causes.
             Targets: IMU topics at full rate for every client; a client that
             never reads slows the others by less than 5 %.

A script, not a test: it asserts nothing about speed.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CHROMIUM = os.environ.get("A0PY_CHROMIUM", "/usr/bin/chromium")

PUBLISHER = r"""
import json, sys, time, math
import a0py
topics, hz, seconds = sys.argv[1].split(","), float(sys.argv[2]), float(sys.argv[3])
pubs = [a0py.Publisher(t) for t in topics]
period = 1.0 / hz
costs = []
start = time.monotonic()
k = 0
late = 0
while True:
    due = start + k * period
    now = time.monotonic()
    if now - start >= seconds:
        break
    if due > now:
        time.sleep(due - now)
    elif now - due > period:
        late += 1
    for i, p in enumerate(pubs):
        t0 = time.perf_counter_ns()
        p.pub_json({"i": k, "x": math.sin(k / 50.0 + i)})
        costs.append(time.perf_counter_ns() - t0)
    k += 1
elapsed = time.monotonic() - start
costs.sort()
print(json.dumps({"rounds": k, "rate": k / elapsed, "late": late,
                  "p50_us": costs[len(costs) // 2] / 1e3, "p99_us": costs[int(len(costs) * 0.99)] / 1e3}))
"""


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")


def start_view(env, *args):
    proc = subprocess.Popen([sys.executable, "-m", "a0py.cli.view", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("a0py view did not start")
        m = re.search(r"open (http://\S+)", line)
        if m:
            return proc, m.group(1)


def start_publisher(env, topics, hz, seconds):
    return subprocess.Popen([sys.executable, "-c", PUBLISHER, ",".join(topics), str(hz), str(seconds)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)


def publisher_result(proc):
    out, _ = proc.communicate(timeout=600)
    return json.loads(out.strip().splitlines()[-1])


def cleanup(prefix):
    from a0py.proto import topic as tp

    for name in tp.list_topics(f"shm:{prefix}"):
        tp.unlink_topic(tp.Topic(name, root=f"shm:{prefix}"))


def open_page(browser, url, topics, select=None, field="x"):
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.goto(url)
    for t in topics:
        page.wait_for_selector(f'#topics tr[data-topic="{t}"]', timeout=30_000)
    if select:
        page.evaluate("(t) => a0pyView.select(t)", select)
    for t in topics:
        page.evaluate("([t, f]) => a0pyView.addSeries(t, f)", [t, field])
    return page


def bench_latency(browser, env, seconds):
    prefix = env["A0PY_ROOT"][4:]
    pub = start_publisher(env, ["bench/fast"], 1000, seconds + 10)
    view, url = start_view(env)
    try:
        page = open_page(browser, url, ["bench/fast"], select="bench/fast")
        time.sleep(2.0)
        page.evaluate("() => { const s = a0pyView.state; s.latencyN = s.shownN = s.frames = s.frameJsMs = 0; }")
        t0 = time.monotonic()
        time.sleep(seconds)
        received = page.evaluate("() => a0pyView.latencies()")
        shown = page.evaluate("() => a0pyView.shownLatencies()")
        frames, js_ms = page.evaluate("() => [a0pyView.state.frames, a0pyView.state.frameJsMs]")
        fps = frames / (time.monotonic() - t0)
        page.close()
    finally:
        view.terminate()
        view.wait()
        pub.kill()
        pub.wait()
        cleanup(prefix)
    return {"received_p50_ms": percentile(received, 0.5), "received_p99_ms": percentile(received, 0.99),
            "shown_p50_ms": percentile(shown, 0.5), "shown_p99_ms": percentile(shown, 0.99),
            "samples": len(received), "frames": len(shown), "fps": fps, "js_ms_per_frame": js_ms / max(frames, 1)}


def bench_load(browser, env, seconds, pages_n, topics_n, hz):
    prefix = env["A0PY_ROOT"][4:]
    topics = [f"bench/t{i:02d}" for i in range(topics_n)]
    # nothing watching
    alone = publisher_result(start_publisher(env, topics, hz, seconds))
    cleanup(prefix)
    # the view and the pages
    view, url = start_view(env)
    pub = start_publisher(env, topics, hz, seconds + 25)
    pages = []
    try:
        warm = start_publisher(env, topics, 10, 2)  # every topic exists and has a message
        publisher_result(warm)
        for _ in range(pages_n):
            pages.append(open_page(browser, url, topics))
        time.sleep(3.0)
        got0 = [p.evaluate("() => a0pyView.state.series.reduce((a, s) => a + s.total, 0)") for p in pages]
        watched = publisher_result(pub)
        got = [p.evaluate("() => a0pyView.state.series.reduce((a, s) => a + s.total, 0)") for p in pages]
        dropped = [p.evaluate("() => a0pyView.state.dropped") for p in pages]
    finally:
        for p in pages:
            p.close()
        view.terminate()
        view.wait()
        pub.kill()
        pub.wait()
        cleanup(prefix)
    window = seconds + 25 - 3.0
    return {
        "alone": alone, "watched": watched,
        "pub_p50_ratio": watched["p50_us"] / alone["p50_us"],
        "rate_ratio": watched["rate"] / alone["rate"],
        "per_page_msgs_per_s": statistics.median((g - g0) / window for g, g0 in zip(got, got0)),
        "per_page_dropped": statistics.median(dropped),
        "offered_per_page_msgs_per_s": topics_n * hz,
    }


# -- driving a0py: the graph, service calls, many clients (no browser)

TALKER = r"""
import sys, time
import a0py
pub = a0py.Publisher(sys.argv[1])
while True:
    pub.pub(b"x")
    time.sleep(0.02)
"""

RPC_SERVER = r"""
import sys
import a0py
server = a0py.RpcServer(sys.argv[1], lambda req: req.reply_json({"sum": sum(req.pkt.json()["v"])}))
print("ok", flush=True)
sys.stdin.read()
"""

FANOUT_PUBLISHER = r"""
import json, sys, time
import a0py
kind, n, hz, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
if kind == "imu":
    pubs = [a0py.Publisher(f"bench/imu{i:02d}") for i in range(n)]
else:
    pubs = [a0py.Publisher("bench/camera")]
    frame = bytearray(1920 * 1080 * 3)
start = time.monotonic()
k = 0
while time.monotonic() - start < seconds:
    due = start + k / hz
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    for i, p in enumerate(pubs):
        if kind == "imu":
            p.pub_json({"k": k, "ax": 0.01 * i, "gz": -0.5})
        else:
            frame[:8] = k.to_bytes(8, "little")
            p.pub(frame)
    k += 1
print(json.dumps({"rounds": k, "rate": k / (time.monotonic() - start)}), flush=True)
"""

FANOUT_CLIENTS = r"""
# Clients that count messages per topic, each on a plain socket speaking just enough WebSocket
# (a library client costs ~30 us a message in Python: ten of them could not keep up with the view).
import asyncio, base64, json, os, sys, time, urllib.parse
url, n, stalled, warm, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", float(sys.argv[4]), float(sys.argv[5])
u = urllib.parse.urlsplit(url)

def masked_text(text):
    data, key = text.encode(), os.urandom(4)
    n = len(data)
    head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536
                            else bytes([0x80 | 127]) + n.to_bytes(8, "big"))
    body = (int.from_bytes(data, "big") ^ int.from_bytes((key * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
    return head + key + body

async def client(idx, counts):
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET {u.path or '/'} HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\n").encode())
    await reader.readuntil(b"\r\n\r\n")
    buf = bytearray()
    channels, ids, got, start, stats, stats_sub = {}, None, None, None, {}, None
    while True:
        if ids is not None and stalled:
            await asyncio.sleep(warm + seconds + 5)  # never reads
            return
        chunk = await reader.read(1 << 20)
        if not chunk:
            return
        buf += chunk
        pos = 0
        now = time.monotonic()
        while len(buf) - pos >= 2:
            length = buf[pos + 1] & 0x7F
            head = 2
            if length == 126:
                if len(buf) - pos < 4:
                    break
                length, head = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
            elif length == 127:
                if len(buf) - pos < 10:
                    break
                length, head = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            if len(buf) - pos < head + length:
                break
            op = buf[pos] & 0x0F
            body = pos + head
            if op == 1 and ids is None:
                msg = json.loads(bytes(buf[body:body + length]))
                if msg.get("op") == "advertise":
                    for ch in msg["channels"]:
                        if ch["topic"].startswith("bench/") or ch["topic"] == "/a0py/view/stats":
                            channels[ch["id"]] = ch["topic"]
                    if len(channels) >= 52:
                        ids = sorted(channels)
                        got = [0] * len(ids)
                        stats_sub = [channels[c] for c in ids].index("/a0py/view/stats")
                        writer.write(masked_text(json.dumps({"op": "subscribe", "subscriptions": [
                            {"id": i, "channelId": c} for i, c in enumerate(ids)]})))
                        start = now + warm
            elif op == 2 and got is not None and now >= start and buf[body] == 1:
                sub = int.from_bytes(buf[body + 1:body + 5], "little")
                got[sub] += 1
                if sub == stats_sub:
                    stats = json.loads(bytes(buf[body + 13:body + length]))
            pos = body + length
        del buf[:pos]
        if start is not None and now >= start + seconds:
            break
    counts[idx] = {channels[c]: g for c, g in zip(ids, got)}
    counts[idx]["dropped"] = stats.get("droppedByTopic", {})
    writer.close()

async def main():
    counts = {}
    await asyncio.gather(*(client(i, counts) for i in range(n)))
    print(json.dumps(list(counts.values())), flush=True)

asyncio.run(main())
"""

LOCAL_SUBSCRIBER = r"""
import json, sys, time
import a0py
sub = a0py.SubscriberSync(sys.argv[1], init=a0py.INIT_AWAIT_NEW)
warm, seconds = float(sys.argv[2]), float(sys.argv[3])
lat = []
start = time.monotonic() + warm
while time.monotonic() < start + seconds:
    pkt = sub.read_blocking(timeout=5)
    if time.monotonic() >= start:
        lat.append(time.time_ns() - int(pkt.headers["a0_time_wall"]))
lat.sort()
print(json.dumps({"n": len(lat), "p50_us": lat[len(lat) // 2] / 1e3 if lat else None}), flush=True)
"""


def ws_view(env, *args):
    """A view process (``a0py view ARGS``) and its WebSocket URL."""
    proc, url = start_view(env, *args)
    return proc, "ws" + url[4:]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _graph_client(url):
    from websockets.asyncio.client import connect

    ws = await connect(url, subprotocols=["foxglove.sdk.v1"], max_size=None)
    await ws.send(json.dumps({"op": "subscribeConnectionGraph"}))
    return ws


async def _graph_until(ws, graph, cond, timeout=10):
    import asyncio

    deadline = time.monotonic() + timeout
    while not cond(graph):
        m = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
        if isinstance(m, str):
            msg = json.loads(m)
            if msg.get("op") == "connectionGraphUpdate":
                for e in msg["publishedTopics"]:
                    graph[e["name"]] = set(e["publisherIds"])
                for t in msg["removedTopics"]:
                    graph.pop(t, None)
    return time.monotonic()


def bench_graph(env, rounds=5):
    import asyncio

    prefix = env["A0PY_ROOT"][4:]
    view, url = ws_view(env)

    async def main():
        ws = await _graph_client(url)
        graph = {}
        came, went = [], []
        for _ in range(rounds):
            t0 = time.monotonic()
            talker = subprocess.Popen([sys.executable, "-c", TALKER, "bench/talker"], env=env, cwd=REPO)
            mine = f"[{talker.pid}]"
            t1 = await _graph_until(ws, graph, lambda g, m=mine: any(i.endswith(m) for i in g.get("bench/talker", ())))
            came.append(t1 - t0)
            t0 = time.monotonic()
            talker.kill()
            talker.wait()
            t1 = await _graph_until(ws, graph,
                                    lambda g, m=mine: not any(i.endswith(m) for i in g.get("bench/talker", ())))
            went.append(t1 - t0)
        await ws.close()
        return came, went

    try:
        came, went = asyncio.run(main())
    finally:
        view.terminate()
        view.wait()
        cleanup(prefix)
    return {"start_to_graph_s": {"p50": percentile(came, 0.5), "max": max(came)},
            "kill_to_graph_s": {"p50": percentile(went, 0.5), "max": max(went)}}


def bench_service(env, calls=300):
    import asyncio
    import struct

    from websockets.asyncio.client import connect

    import a0py

    prefix = env["A0PY_ROOT"][4:]
    server = subprocess.Popen([sys.executable, "-c", RPC_SERVER, "bench/sum"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    server.stdout.readline()
    view, url = ws_view(env, "--allow-call", "bench/*")
    payload = json.dumps({"v": [1, 2, 3]}).encode()

    async def through_view():
        ws = await connect(url, subprotocols=["foxglove.sdk.v1"], max_size=None)
        sid = None
        while sid is None:
            m = await ws.recv()
            m = json.loads(m) if isinstance(m, str) else {}
            if m.get("op") == "advertiseServices":
                sid = next((s["id"] for s in m["services"] if s["name"] == "bench/sum"), None)
        times = []
        for k in range(calls + 20):
            t0 = time.perf_counter()
            await ws.send(struct.pack("<BIII", 2, sid, k, 4) + b"json" + payload)
            while True:
                m = await ws.recv()
                if isinstance(m, bytes) and m[0] == 3:
                    break
            if k >= 20:
                times.append((time.perf_counter() - t0) * 1e3)
        await ws.close()
        return times

    try:
        via = asyncio.run(through_view())
        client = a0py.RpcClient(a0py.Topic("bench/sum", root=env["A0PY_ROOT"]))
        direct = []
        for k in range(calls + 20):
            t0 = time.perf_counter()
            client.send_blocking(payload, timeout=5)
            if k >= 20:
                direct.append((time.perf_counter() - t0) * 1e3)
        client.close()
    finally:
        view.terminate()
        view.wait()
        server.stdin.close()
        server.wait()
        cleanup(prefix)
    return {"view_p50_ms": percentile(via, 0.5), "view_p99_ms": percentile(via, 0.99),
            "direct_p50_ms": percentile(direct, 0.5), "direct_p99_ms": percentile(direct, 0.99)}


def _fanout_run(env, url, view_pid, clients, stalled, warm, seconds):
    per = 5
    procs = [subprocess.Popen([sys.executable, "-c", FANOUT_CLIENTS, url, str(min(per, clients - i)), "0",
                               str(warm), str(seconds)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
             for i in range(0, clients, per)]
    if stalled:
        procs.append(subprocess.Popen([sys.executable, "-c", FANOUT_CLIENTS, url, "1", "1", str(warm),
                                       str(seconds)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO))
    local = subprocess.Popen([sys.executable, "-c", LOCAL_SUBSCRIBER, "bench/imu00", str(warm), str(seconds)],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    time.sleep(warm)
    c0, t0 = cpu_seconds(view_pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(view_pid) - c0) / (time.monotonic() - t0)
    counts = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        counts += json.loads(out.strip().splitlines()[-1])
    local_out, _ = local.communicate(timeout=60)
    return cpu, counts, json.loads(local_out)


def bench_fanout(env, clients=10, imu=50, seconds=8.0):
    prefix = env["A0PY_ROOT"][4:]
    env = dict(env, A0PY_TOPIC_SIZES="bench/camera=32M")
    warm = 4.0
    total = 2 * (warm + seconds) + 20
    pubs = [subprocess.Popen([sys.executable, "-c", FANOUT_PUBLISHER, "imu", str(imu), "100", str(total)],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=REPO),
            subprocess.Popen([sys.executable, "-c", FANOUT_PUBLISHER, "camera", "1", "30", str(total)],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)]
    time.sleep(1.0)
    view, url = ws_view(env)
    out = {}
    try:
        time.sleep(1.0)
        for stalled in (False, True):
            cpu, counts, local = _fanout_run(env, url, view.pid, clients, stalled, warm, seconds)
            # the rate the IMU topics were published at, as a local subscriber of one of them saw it
            published = local["n"] / seconds
            imu_rates = [[c[t] / seconds for t in c if t.startswith("bench/imu")] for c in counts]
            imu_dropped = sum(n for c in counts for t, n in c["dropped"].items() if t.startswith("bench/imu"))
            camera_dropped = sum(c["dropped"].get("bench/camera", 0) for c in counts)
            med = [statistics.median(r) / published for r in imu_rates]
            low = [min(r) / published for r in imu_rates]
            cam = [c.get("bench/camera", 0) / seconds for c in counts]
            out["stalled" if stalled else "readers"] = {
                "view_cpu": cpu, "imu_fraction_lowest_client_median": min(med), "imu_fraction_lowest_topic": min(low),
                "imu_fraction_median": statistics.median(med), "camera_fps_median": statistics.median(cam),
                "local_p50_us": local["p50_us"], "imu_published_hz": published, "clients": len(counts),
                "view_dropped_imu": imu_dropped, "view_dropped_camera": camera_dropped}
    finally:
        view.terminate()
        view.wait()
        for p in pubs:
            p.kill()
            p.wait()
        cleanup(prefix)
    a, b = out["readers"], out["stalled"]
    out["stalled_slowdown"] = {"imu_rate_ratio": b["imu_fraction_median"] / a["imu_fraction_median"],
                               "local_p50_ratio": b["local_p50_us"] / a["local_p50_us"]}
    return out


def main_control(args, env):
    results = {}
    only = set(args.only.split(",")) if args.only else {"graph", "service", "fanout"}
    if "graph" in only:
        results["graph"] = g = bench_graph(env, 3 if args.quick else 5)
        print(f"graph: a publisher process in the client's graph {g['start_to_graph_s']['p50']:.2f} s after it "
              f"started (max {g['start_to_graph_s']['max']:.2f}), gone {g['kill_to_graph_s']['p50']:.2f} s after "
              f"it was killed (max {g['kill_to_graph_s']['max']:.2f})")
    if "service" in only:
        results["service"] = sv = bench_service(env, 150 if args.quick else 300)
        print(f"service: a call through the view p50 {sv['view_p50_ms']:.2f} ms, p99 {sv['view_p99_ms']:.2f} ms; "
              f"straight to the server (RpcClient) p50 {sv['direct_p50_ms']:.2f} ms, p99 {sv['direct_p99_ms']:.2f} ms")
    if "fanout" in only:
        results["fanout"] = fo = bench_fanout(env, args.clients, 50, 5.0 if args.quick else 8.0)
        for key, what in (("readers", "10 clients"), ("stalled", "10 clients + 1 that never reads")):
            r = fo[key]
            print(f"fanout, 50 IMU topics x 100 Hz + 1080p camera x 30 Hz, {what}: view CPU {r['view_cpu']:.0%}; "
                  f"IMU rate per client {r['imu_fraction_median']:.1%} of published (lowest client "
                  f"{r['imu_fraction_lowest_client_median']:.1%}, lowest topic {r['imu_fraction_lowest_topic']:.1%}); "
                  f"camera {r['camera_fps_median']:.1f} frames/s per client; IMU published at "
                  f"{r['imu_published_hz']:.0f} Hz; the view dropped {r['view_dropped_imu']} IMU messages and "
                  f"{r['view_dropped_camera']} camera frames for the clients (in all, since they connected); "
                  f"local subscriber p50 {r['local_p50_us']:.0f} us")
        s = fo["stalled_slowdown"]
        print(f"fanout, the stalled client's cost: reading clients' IMU rate x{s['imu_rate_ratio']:.3f}, "
              f"local subscriber latency p50 x{s['local_p50_ratio']:.2f}")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pages", type=int, default=10)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--hz", type=float, default=1000)
    ap.add_argument("--clients", type=int, default=10, help="clients of the fanout workload")
    ap.add_argument("--only", help="comma-separated workloads: latency,load (browser), graph,service,fanout")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    env = dict(os.environ, A0PY_ROOT=f"shm:a0pybench-{uuid.uuid4().hex[:8]}",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    only = set(args.only.split(",")) if args.only else None
    if only is not None and not only & {"latency", "load"}:
        results = main_control(args, env)
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(results, f, indent=2)
        return
    if not os.path.exists(CHROMIUM):
        sys.exit(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set A0PY_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    seconds = 5 if args.quick else 15
    results = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        results["latency"] = lat = bench_latency(browser, env, seconds)
        print(f"latency, 1 kHz topic, 1 page: received p50 {lat['received_p50_ms']:.1f} ms, "
              f"p99 {lat['received_p99_ms']:.1f} ms; shown p50 {lat['shown_p50_ms']:.1f} ms, "
              f"p99 {lat['shown_p99_ms']:.1f} ms ({lat['samples']} messages; {lat['fps']:.0f} frames/s, "
              f"{lat['js_ms_per_frame']:.1f} ms of JavaScript a frame)")
        results["load"] = ld = bench_load(browser, env, seconds, args.pages, args.topics, args.hz)
        a, w = ld["alone"], ld["watched"]
        print(f"load, {args.topics} topics x {args.hz:g} Hz, {args.pages} pages: pub() p50 {a['p50_us']:.1f} -> "
              f"{w['p50_us']:.1f} us (x{ld['pub_p50_ratio']:.2f}), p99 {a['p99_us']:.1f} -> {w['p99_us']:.1f} us; "
              f"rate held {a['rate']:.1f} -> {w['rate']:.1f} rounds/s (x{ld['rate_ratio']:.3f}); "
              f"each page got {ld['per_page_msgs_per_s']:.0f} of {ld['offered_per_page_msgs_per_s']:.0f} msgs/s, "
              f"{ld['per_page_dropped']:.0f} dropped for it by the view")
        browser.close()
    if only is None or only & {"graph", "service", "fanout"}:
        results.update(main_control(args, env))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
