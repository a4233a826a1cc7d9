"""a0py demo: pub/sub, an RPC service and a config watcher across processes.

    python examples/demo.py                 # about 15 s
    python examples/demo.py --seconds 3     # shorter stages

Stages (each in its own processes, under a private topic root, removed at the end):

  1. Pub/sub. A sensor process publishes JSON readings at 500 Hz on ``demo/imu``;
     a callback ``Subscriber`` in another process prints its rate and the
     publish-to-callback latency read from the packets' standard headers; this
     process joins late with a "latest only" ``SubscriberSync``
     (``INIT_MOST_RECENT`` + ``ITER_NEWEST``).
  2. RPC. A server process answers ``{"op": "add", "args": [...]}`` on
     ``demo/calc``; the first request is sent *before* the server starts and is
     served when it comes up. Round trips are timed.
  3. Config. A watcher process prints every change of ``demo/robot``'s config;
     this process writes it, then two merge-patches.
  4. Live view: ``a0py view`` serves its page for the whole demo; open the
     printed address in a browser while the demo runs.
  5. Recording: the pub/sub stage is recorded into MCAP (``a0py.recording.Recorder``),
     then summarised with Spark (frames, bytes and rate per topic, latency
     percentiles from the packets' headers) and a chart PNG is saved
     (``examples/spark_summary.py``, matplotlib).
  6. The fact broker: ``examples/room.py`` (sensors claim readings, a rule
     joins them and claims alerts, a display prints them).
"""

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py

CTX = mp.get_context("spawn")


def say(stage, text):
    print(f"[{stage:>6}] {text}", flush=True)


# -- 1. pub/sub --------------------------------------------------------------------------

def sensor(seconds, rate):
    pub = a0py.Publisher("demo/imu")
    period = 1.0 / rate
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        # JSON text as plain bytes, parsed by the Spark stage with payload=json
        # (pub_json would make a typed topic: its decode=true columns, docs/spark.md).
        pub.pub(json.dumps({"n": n, "ax": 0.01 * (n % 100), "gz": -0.5 + (n % 7) / 7}))
        n += 1
        time.sleep(max(0.0, t0 + n * period - time.monotonic()))
    pub.pub(json.dumps({"end": True, "sent": n}))


def listener(ready):
    state = {"got": 0, "lat": [], "t": time.monotonic(), "end": None}

    def on_packet(pkt):
        msg = pkt.json()
        if "end" in msg:
            state["end"] = msg
            return
        state["got"] += 1
        sent = int(pkt.headers["a0_time_mono"])
        state["lat"].append((time.monotonic_ns() - sent) / 1e3)

    sub = a0py.Subscriber("demo/imu", on_packet, init=a0py.INIT_AWAIT_NEW)
    ready.set()
    last = 0
    while state["end"] is None:
        time.sleep(1.0)
        lat = sorted(state["lat"][last:]) or [0.0]
        say("pubsub", f"callback subscriber: {state['got'] - last:5d} msgs/s, "
                      f"p50 {lat[len(lat) // 2]:6.1f} µs, p99 {lat[int(0.99 * (len(lat) - 1))]:7.1f} µs")
        last = state["got"]
    sub.close()
    say("pubsub", f"callback subscriber: {state['got']} of {state['end']['sent']} received, "
                  f"{sub.missed} missed")


def stage_pubsub(seconds):
    ready = CTX.Event()
    lp = CTX.Process(target=listener, args=(ready,))
    lp.start()
    ready.wait(30)
    sp = CTX.Process(target=sensor, args=(seconds, 500))
    sp.start()
    time.sleep(min(1.5, seconds / 2))
    latest = a0py.SubscriberSync("demo/imu", init=a0py.INIT_MOST_RECENT, iter=a0py.ITER_NEWEST)
    for _ in range(3):
        pkt = latest.read_blocking(timeout=5)
        say("pubsub", f"late 'latest only' reader: seq {pkt.seq} {pkt.json()}")
        time.sleep(0.3)
    sp.join()
    lp.join()


# -- 2. RPC ------------------------------------------------------------------------------

def calc_server(stop):
    def on_request(req):
        msg = req.pkt.json()
        req.reply(json.dumps({"result": sum(msg["args"])}))

    server = a0py.RpcServer("demo/calc", on_request)
    stop.wait(60)
    server.close()


def stage_rpc():
    client = a0py.RpcClient("demo/calc")
    early = client.send(json.dumps({"op": "add", "args": [1, 2, 3]}))  # no server yet
    say("rpc", "request sent before the server exists; starting the server...")
    stop = CTX.Event()
    server = CTX.Process(target=calc_server, args=(stop,))
    server.start()
    say("rpc", f"early request answered: {early.result(timeout=30).json()}")
    times = []
    for i in range(200):
        t = time.perf_counter()
        reply = client.send_blocking(json.dumps({"op": "add", "args": [i, i]}), timeout=10)
        times.append((time.perf_counter() - t) * 1e6)
        assert reply.json()["result"] == 2 * i
    times.sort()
    say("rpc", f"200 calls: p50 {statistics.median(times):.0f} µs, "
               f"p99 {times[int(0.99 * (len(times) - 1))]:.0f} µs")
    stop.set()
    server.join()


# -- 3. cfg ------------------------------------------------------------------------------

def cfg_watcher(ready, changes):
    seen = []

    def on_change(pkt):
        seen.append(pkt.json())
        say("cfg", f"watcher saw: {json.dumps(seen[-1], sort_keys=True)}")

    watcher = a0py.CfgWatcher("demo/robot", on_change)
    ready.set()
    deadline = time.monotonic() + 30
    while len(seen) < changes and time.monotonic() < deadline:
        time.sleep(0.05)
    watcher.close()


def stage_cfg():
    ready = CTX.Event()
    wp = CTX.Process(target=cfg_watcher, args=(ready, 3))
    wp.start()
    ready.wait(30)
    cfg = a0py.Cfg("demo/robot")
    cfg.write({"max_speed": 1.0, "gains": {"kp": 2.0, "ki": 0.1}})
    time.sleep(0.2)
    cfg.mergepatch({"gains": {"kp": 2.5}})
    time.sleep(0.2)
    cfg.mergepatch({"max_speed": 0.5, "gains": {"ki": None}})
    wp.join()
    say("cfg", f"final: {json.dumps(cfg.read().json(), sort_keys=True)}")


# -- 4. the live view -------------------------------------------------------------------

def view_server(port, url_queue):
    import a0py.view

    a0py.view.serve(None, host="127.0.0.1", port=port, ready=url_queue.put)


def start_view(port):
    urls = CTX.Queue()
    proc = CTX.Process(target=view_server, args=(port, urls), daemon=True)
    proc.start()
    try:
        say("view", f"live view of the demo's topics: {urls.get(timeout=30)} (open it now)")
    except Exception as e:  # noqa: BLE001 - the demo goes on without its view
        say("view", f"the view did not start ({e}); the demo goes on without it")
    return proc


# -- 5. recording and Spark ---------------------------------------------------------------

def summarize_recording(out_dir, chart):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from spark_summary import summarize

    summarize(out_dir, chart=chart)
    say("spark", f"chart of the rates saved to {chart}")


# -- 6. the fact broker --------------------------------------------------------------------

def stage_room(seconds):
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "room.py"), "--seconds", str(seconds)],
                   check=True, timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of the pub/sub stage")
    ap.add_argument("--port", type=int, default=8765, help="port of the live view")
    ap.add_argument("--out", default="build/demo",
                    help="where the recording and the chart go (default build/demo)")
    args = ap.parse_args()
    root = os.environ.get("A0PY_ROOT") or f"shm:a0py-demo-{os.getpid()}"
    os.environ["A0PY_ROOT"] = root  # inherited by every process started below
    say("demo", f"topics under A0PY_ROOT={root}")
    recording = os.path.join(args.out, f"recording-{os.getpid()}")
    view = start_view(args.port)
    try:
        from a0py.recording import Recorder

        with Recorder(["demo/imu"], out=recording):
            stage_pubsub(args.seconds)
        say("record", f"recorded demo/imu into {recording}")
        stage_rpc()
        stage_cfg()
        summarize_recording(recording, os.path.join(args.out, "demo-rates.png"))
        stage_room(max(3.0, args.seconds / 2))
    finally:
        view.terminate()
        view.join(10)
        removed = _remove_topics(root)
        say("demo", f"removed {removed} arenas; done")


def _remove_topics(root):
    prefix = root.split(":", 1)[1] if root.startswith("shm:") else None
    n = 0
    if prefix is None:
        return n
    for name in os.listdir("/dev/shm"):
        if name.startswith(prefix):
            a0py.Arena.unlink_shm(name)
            n += 1
    return n


if __name__ == "__main__":
    main()
