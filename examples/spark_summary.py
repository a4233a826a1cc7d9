"""A Spark summary of a recording: frames and bytes per topic, the rate over
time, and the latency from publish to record, with a chart of the rates
drawn by matplotlib (what ``make demo`` prints at its end; ``pip install
'a0py[demo]'`` brings matplotlib).

    python examples/spark_summary.py rec/ --chart rates.png

    from spark_summary import summarize                # with examples/ on sys.path
    facts = summarize("rec/", chart="rates.png")       # a local[2] session if none is active

Latency is ``time_record - time_wall``: from the moment a publisher wrote a
frame (its ``a0_time_wall``) to the moment the recorder copied it out of the
arena (the frame's MCAP log time), both on the same host's clock.
"""

from __future__ import annotations

import argparse
import os
import sys

# matplotlib's default colour cycle (tab10), by name: the printed legend.
COLOUR_NAMES = ["blue", "orange", "green", "red", "purple", "brown", "pink", "grey", "olive", "cyan"]


def local_session(app="a0py-summary"):
    """A ``local[2]`` SparkSession on loopback whose workers import a0py from
    this checkout (the settings docs/spark.md and the tests use)."""
    from pyspark.sql import SparkSession

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def summarize(path, spark=None, *, chart=None, out=None):
    """Computes, with Spark, per topic: frames, payload bytes, seconds
    covered, mean rate, latency percentiles (p50, p90, p99, max, in µs); and
    frames per second over time. Prints a table to ``out`` (stdout) and,
    with ``chart``, writes the rates as a PNG there. Returns the facts as a
    dict ``{"topics": {...}, "rates": {topic: [(second, frames), ...]},
    "chart": path or None}``."""
    from pyspark.sql import functions as F

    out = out or sys.stdout
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or local_session()
    df = (spark.read.format("a0").option("recordTime", "true").option("gaps", "true").load(path)
          .withColumn("latency_us", F.unix_micros("time_record") - F.unix_micros("time_wall")))
    frames = df.where(~F.col("is_gap"))
    per_topic = (frames.groupBy("topic").agg(
        F.count("*").alias("frames"), F.sum(F.length("payload")).alias("bytes"),
        F.min("time_wall").alias("first"), F.max("time_wall").alias("last"),
        F.percentile_approx("latency_us", [0.5, 0.9, 0.99], 10000).alias("p"), F.max("latency_us").alias("max"))
        .orderBy("topic").collect())
    gaps = {r.topic: (r.gaps, r.lost) for r in df.where(F.col("is_gap")).groupBy("topic").agg(
        F.count("*").alias("gaps"), F.sum(F.col("gap_last") - F.col("gap_first") + 1).alias("lost")).collect()}
    start_us = frames.agg(F.min(F.unix_micros("time_wall"))).first()[0]
    rates = {}
    if start_us is not None:
        per_second = (frames.withColumn("second", F.floor((F.unix_micros("time_wall") - F.lit(start_us)) / 1e6))
                      .groupBy("topic", "second").count().orderBy("topic", "second").collect())
        for r in per_second:
            rates.setdefault(r.topic, []).append((int(r.second), int(r["count"])))
    topics = {}
    print(f"{'topic':<24} {'frames':>9} {'bytes':>11} {'seconds':>8} {'rate/s':>9} "
          f"{'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8} {'max µs':>8} {'gaps':>5}", file=out)
    for i, r in enumerate(per_topic):
        span = (r["last"] - r["first"]).total_seconds() if r["first"] else 0.0
        p50, p90, p99 = (r.p or [None] * 3)
        t = topics[r.topic] = {
            "frames": r.frames, "bytes": int(r["bytes"] or 0), "seconds": span,
            "rate": r.frames / span if span > 0 else float(r.frames),
            "latency_us": {"p50": p50, "p90": p90, "p99": p99, "max": r["max"]},
            "gaps": gaps.get(r.topic, (0, 0))[0], "lost": int(gaps.get(r.topic, (0, 0))[1] or 0),
            "colour": COLOUR_NAMES[i % len(COLOUR_NAMES)],
        }
        print(f"{r.topic:<24} {r.frames:>9} {t['bytes']:>11} {span:>8.2f} {t['rate']:>9.1f} "
              f"{p50 if p50 is not None else '-':>8} {p90 if p90 is not None else '-':>8} "
              f"{p99 if p99 is not None else '-':>8} {r['max'] if r['max'] is not None else '-':>8} "
              f"{t['gaps']:>5}", file=out)
    written = None
    if chart and rates:
        names = [r.topic for r in per_topic]
        written = line_chart({t: whole_seconds(rates.get(t, [])) for t in names}, chart)
        legend = ", ".join(f"{topics[t]['colour']}: {t}" for t in names)
        print(f"rates over time (frames/s per topic): {written} ({legend})", file=out)
    return {"topics": topics, "rates": rates, "chart": written}


def whole_seconds(points):
    """``points`` ([(second, frames), ...], in order) without the last second when
    there are others: the topic's last frame falls inside it, so it holds only a
    part of a second's frames, and drawn as a rate it reads as a fall towards 0
    that a reader would take for lost messages."""
    return points[:-1] if len(points) > 1 else points


def line_chart(series, path):
    """Draws ``series`` ({name: [(second, frames), ...]}) as lines in
    matplotlib's default colours, in order, and saves the figure to
    ``path`` (PNG). Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5), dpi=100)
    for name, points in series.items():
        ax.plot([s for s, _ in points], [n for _, n in points], label=name)
    ax.set_xlabel("seconds from the first frame")
    ax.set_ylabel("frames/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", help="a recording, a directory of them, or a glob")
    ap.add_argument("--chart", help="write the chart of the rates here (PNG)")
    args = ap.parse_args()
    summarize(args.path, chart=args.chart)


if __name__ == "__main__":
    main()
