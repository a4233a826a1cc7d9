"""The live view under load, measured through a real browser.

    python bench/view.py              # about two minutes on 2 cores
    python bench/view.py --quick      # about half a minute
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


def start_view(env):
    proc = subprocess.Popen([sys.executable, "-m", "a0py.cli.view", "--port", "0"], stdout=subprocess.PIPE,
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pages", type=int, default=10)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--hz", type=float, default=1000)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    if not os.path.exists(CHROMIUM):
        sys.exit(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set A0PY_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    env = dict(os.environ, A0PY_ROOT=f"shm:a0pybench-{uuid.uuid4().hex[:8]}",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
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
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
