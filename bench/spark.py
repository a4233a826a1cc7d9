"""Benchmark recordings and the ``a0`` Spark source, with Parquet in the same run.

    python bench/spark.py                 # everything (several minutes on 2 cores)
    python bench/spark.py --quick         # small sizes, one repeat
    python bench/spark.py read            # only the Spark reads
    python bench/spark.py record capacity # only the recorder
    python bench/spark.py decode          # only the decoder, in this process
    python bench/spark.py decode-ros2     # decoded ROS 2 Imu rows: Spark, mcap-ros2-support, Parquet
    python bench/spark.py fleet           # 8 robots x 500 MB of ROS 2 recordings on a 2-worker cluster
    python bench/spark.py parquet         # the JVM reader against Parquet: sum(length(payload)), max(seq); full rows

Workloads (medians of --repeats runs):

  read     rows/s through the ``a0`` source's two readers, the JVM one
           (``format("a0")`` with the jar; ``--jar`` names another build of
           it) and the Python one (``format("a0.python")``), each with and
           without the headers column, for 1 M frames of 64 B and 10 k frames
           of 64 KiB (local[2], consumed by the ``noop`` sink), against Spark
           reading the same rows exported to Parquet, and against Spark's
           floor for a Python source (one yielding prebuilt Arrow batches);
           runs alternating, same Spark session; with each, the CPU seconds
           of the driver's JVM (all of a JVM read on local[2], steadier than
           wall time on a loaded machine); the JVM reader's chunk bytes
           read with a filter on one topic of four and on the first quarter
           of the recording's time (chunks skipped); then the same rows on a
           standalone cluster started here (a master and two workers of one
           core, tests/helpers/spark_cluster.py; this process the driver):
           the JVM reader, the Python source and Parquet, alternating
           (``--cluster-repeats`` runs, 3 by default: about 16 minutes in
           all on 2 shared cores); ``--on local|cluster`` runs one of the
           two; a closing table of the three and their paired ratios;
  parquet  the JVM reader against Parquet on 1 M rows of 64 B (--rows
           with a number; the recording as bench ``read`` writes it, 4
           topics, zstd 4 MiB chunks, and its Parquet copy written by Spark,
           both kept in --dir when given): the query
           ``agg(sum(length(payload)), max(seq))`` (``collect``) and the full
           rows (``noop`` sink), a0 and Parquet alternating, --repeats rounds
           (7); wall-time medians and ranges, the paired ratio of each round
           (Parquet's time over a0's: above 1 is a0 faster), and the driver
           JVM's CPU seconds; --jar names another build of the reader (run
           the command once with each, alternately, for a before/after).
           Targets (issue 33): >= 1.2x Parquet on the query, >= 1x on full rows;
  read-foreign
           rows/s of the JVM reader (``format("a0")``) on an MCAP file of
           raw 64 B messages on 4 channels written by the official ``mcap``
           writer (zstd, 4 MiB chunks) against an a0py recording of as many
           64 B payloads (with and without the headers column), the Python
           source on both, and Parquet copies of each; one run of each
           unless --repeats says more;
  decode   rows/s of the same files decoded into Arrow in one process
           (``a0py.spark.read_table``): the part of a read that is a0py's;
  decode-ros2
           decoded ROS 2 ``sensor_msgs/msg/Imu`` rows (about 300 B of CDR
           each; --rows of them, one topic, written by ``mcap-ros2-support``
           with its defaults): rows/s of (a) Spark ``local[2]`` reading
           ``format("a0").option("decode", "true")`` (a0py.spark.session():
           decoded in the JVM reader), ``select("message.*")`` into the
           ``noop`` sink; (a') the same through the Python source
           (``format("a0.python")``, decoded by a0py.recording.decode);
           (b) ``mcap_ros2.reader.read_ros2_messages`` iterating the file in
           this process (one field of each message read); (c) Spark reading
           the same decoded rows from a Parquet copy, same select and sink;
           alternating, medians of --repeats. Targets: (a) >= 2x (b), (a)
           within 2x of (c);
  fleet    a fleet's ROS 2 recordings (bench/fleet.py): --robots robots
           (8) of about --mb MB (500) each, ``sensor_msgs/msg/Imu`` at 200 Hz
           and ``CompressedImage`` (30-50 KB) at 10 Hz, even robots a rosbag2
           directory (rosbags), odd ones an MCAP file (official writer, as
           mcap-ros2-support writes them), generated under --dir (default
           $TMPDIR/a0py-fleet-<robots>x<mb>MB) in --jobs processes, or
           reused when its fleet.json says it holds those sizes (nothing is
           removed unless --remove-after); then, on a standalone cluster of
           two one-core workers started here: the Imu messages decoded
           (``decode=true``: decoded in the JVM reader) grouped by robot (frame id) and minute with count, mean and
           max of the six vector fields; the images counted by robot and
           minute without decoding (``decode=false``), by the JVM reader and
           by the Python one. Wall time, rows/s, MB/s of recordings,
           partitions and the scan's tasks on each worker's executor (from
           Spark's status store), --repeats rounds (1); then the rows of two
           robots (one of each writer) checked against
           ``mcap_ros2.reader.read_ros2_messages`` and the ``mcap`` reader;
  record   sustained frames/s the recorder writes for 64 B and 4 KiB frames
           from a publisher in another process publishing as fast as it can
           (or paced to --rate frames/s) for --seconds, the topic's arena
           holding about a second of traffic (640 MiB and 1 GiB; with
           --rate, a second at that rate where that is less); and the gaps
           (frames evicted before the recorder read them);
  latency  how late the recorder reads each frame (log_time minus the
           packet's a0_time_wall, µs) with a publisher publishing 64 B
           one at a time at 100, 1 000 and 10 000 frames/s;
  capacity the recorder draining a topic that already holds 1 M frames
           (64 B) or 125 k (4 KiB): what it can write, apart from any
           publisher, per wall and per CPU second;
  jsoncap  the same for 500 k JSON objects (about 80 B): schemaless (bytes,
           recorded as whole packets) beside a typed JSON topic
           (``pub_json``: a ``json`` channel and its headers channel), the
           two alternating.

Targets: >= 1.5 M rows/s on small frames through local[2], within
2x of the Parquet reader on the same rows; the recorder sustains >= 1 M
frames/s of 64 B with no gap. This is a script: it asserts nothing.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if __package__ in (None, ""):
    sys.path.insert(0, REPO)


from a0py.recording import SegmentWriter
from a0py.spark import jar_path, read_table, register
from a0py.spark._jvm import read_metrics

KiB = 1024


def make_recording(directory, frames, payload_size, topics=4, batch=4096):
    """``frames`` packets as publishers write them (a0py's writer into a heap
    arena, standard block included), spread over ``topics`` topics, written
    as the recorder writes them. Returns bytes on disk."""
    from a0py import _core

    os.makedirs(directory, exist_ok=True)
    w = SegmentWriter(os.path.join(directory, "a0py_00000.mcap"), chunk_bytes=4 << 20)
    # Distinct payloads (a pool larger than zstd's window for big frames), as sensors give.
    pool = [os.urandom(payload_size) for _ in range(64 if payload_size > 4096 else 4096)]
    per_topic = frames // topics
    for t in range(topics):
        arena = _core.Arena.heap(max(64 << 20, 4 * batch * (payload_size + 256)))
        writer = _core.PacketWriter(arena)
        reader = _core.Transport(arena)
        done = 0
        while done < per_topic:
            n = min(batch, per_topic - done)
            for i in range(n):
                writer.pub(pool[(done + i) * 7 % len(pool)])
            w.write_frames(f"bench/t{t}", reader.read_many(n), time.time_ns())
            done += n
        writer.close()
        arena.close()
    w.close()
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


def spark_session(master="local[2]", jar=None, **conf):
    """The session of the reads: the JVM reader's jar on its classpath (it
    takes the name ``a0``), the Python source registered as ``a0.python``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("a0py-bench")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g").config("spark.jars", jar or jar_path()))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def floor_source():
    """A source that yields, already decoded, the batches of one chunk of
    the recording over and over (as many rows, in as many partitions, as
    the a0 read): what Spark itself costs for these rows, a0py's work aside."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from a0py.spark.datasource import FRAME_DDL

    class FloorReader(DataSourceReader):
        def __init__(self, options):
            self.path = options["path"]
            self.rows = int(options["rows"])
            self.parts = int(options["parts"])
            self.headers = options.get("headers", "true") == "true"

        def partitions(self):
            return [InputPartition(i) for i in range(self.parts)]

        def read(self, partition):
            from a0py.spark.options import ReadOptions
            from a0py.spark.part_reader import read_part
            from a0py.spark.planning import plan
            from a0py.spark.predicate import Predicate

            part = plan(self.path, Predicate(), ReadOptions(partition_bytes=1))[0]
            batch = next(iter(read_part(part)))
            if not self.headers:
                batch = batch.drop_columns(["headers"])
            want = self.rows // self.parts
            while want > 0:
                b = batch.slice(0, min(want, batch.num_rows))
                want -= b.num_rows
                yield b

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "a0floor"

        def schema(self):
            ddl = FRAME_DDL.format(payload="binary")
            if self.options.get("headers", "true") != "true":
                ddl = ddl.replace("headers map<string,string>, ", "")
            return ddl

        def reader(self, schema):
            return FloorReader(self.options)

    return FloorSource


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def noop(df):
    """Reads ``df`` to the end in Spark (the ``noop`` sink): no row leaves the JVM."""
    df.write.format("noop").mode("overwrite").save()


def jvm_cpu(spark):
    """A function giving the CPU seconds (user + system) the driver's JVM has
    used: on local[2] all of a read but a Python source's Python workers."""
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    tick = os.sysconf("SC_CLK_TCK")

    def cpu():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    return cpu


def alternate(readers, repeats, cpu=None):
    """Each reader once to warm up, then ``repeats`` rounds of all of them in
    turn (the machine's load drifts: each round sees about the same
    conditions). Returns the seconds of each run by reader, and with
    ``cpu`` (a clock) the CPU seconds of each run by reader."""
    for fn in readers.values():
        fn()
    runs = {k: [] for k in readers}
    cpus = {k: [] for k in readers}
    for _ in range(repeats):
        for k, fn in readers.items():
            c = cpu() if cpu else 0.0
            runs[k].append(timed(fn, 1)[0])
            cpus[k].append(cpu() - c if cpu else 0.0)
    return runs, cpus


def figures(runs, frames, size):
    """rows/s and MB/s of payload (medians), each reader's runs, and the JVM
    reader's paired ratios (median over rounds of the other's time over the
    JVM reader's)."""
    row = {}
    for k, v in runs.items():
        med = statistics.median(v)
        row[f"{k}_rows_per_s"] = frames / med
        row[f"{k}_MB_per_s"] = frames * size / med / 1e6
        row[f"{k}_runs_s"] = v
    for other in ("parquet", "python"):
        row[f"jvm_over_{other}_paired"] = statistics.median(o / j for j, o in zip(runs["jvm"], runs[other]))
    return row


def print_figures(title, row, readers):
    print(title, flush=True)
    for k in readers:
        cpu = f"  {row[f'{k}_jvm_cpu_s']:6.2f} s of the JVM's CPU" if f"{k}_jvm_cpu_s" in row else ""
        print(f"    {k:>18}: {row[f'{k}_rows_per_s'] / 1e6:6.2f} M rows/s  {row[f'{k}_MB_per_s']:8.1f} MB/s "
              f"of payload{cpu}", flush=True)
    print(f"    JVM reader / Parquet (rows/s, paired runs): {row['jvm_over_parquet_paired']:.2f}x; "
          f"JVM / Python source: {row['jvm_over_python_paired']:.2f}x", flush=True)


def read_fn(spark, fmt, path, **opts):
    def run():
        r = spark.read.format(fmt)
        for k, v in opts.items():
            r = r.option(k, v)
        noop(r.load(path))
    return run


def read_local(args, results, recs):
    """local[2]: the two readers, with and without headers, Parquet and the
    floor; then the JVM reader's chunk bytes with a selective filter."""
    from pyspark.sql import functions as F

    spark = spark_session(jar=args.jar)
    spark.dataSource.register(floor_source())
    try:
        for name, frames, size, rec, pq, disk in recs:
            if not os.path.exists(pq):
                spark.read.format("a0").load(rec).write.parquet(pq)
            parts = spark.read.format("a0").load(rec).rdd.getNumPartitions()

            def floor(rec=rec, parts=parts, frames=frames, headers="true"):
                noop(spark.read.format("a0floor").option("rows", frames).option("parts", parts)
                     .option("headers", headers).load(rec))

            readers = {
                "jvm": read_fn(spark, "a0", rec), "python": read_fn(spark, "a0.python", rec),
                "parquet": lambda pq=pq: noop(spark.read.parquet(pq)),
                "jvm_no_headers": read_fn(spark, "a0", rec, headers="false"),
                "python_no_headers": read_fn(spark, "a0.python", rec, headers="false"),
                "floor": floor, "floor_no_headers": lambda floor=floor: floor(headers="false"),
            }
            runs, cpus = alternate(readers, args.repeats, jvm_cpu(spark))
            row = {"frames": frames, "payload": size, "mcap_bytes": disk, "partitions": parts, **figures(runs, frames,
                                                                                                        size)}
            for k, v in cpus.items():
                row[f"{k}_jvm_cpu_s"] = statistics.median(v)
            # Selective filters: one topic of four, and the first quarter of the
            # recording's time (the chunks of the rest are not read).
            whole = spark.read.format("a0").load(rec)
            lo, hi = whole.agg(F.min("time_wall"), F.max("time_wall")).first()
            cut = lo + (hi - lo) / 4
            filters = {"none": lambda df: df, "topic": lambda df: df.filter("topic = 'bench/t0'"),
                       "time": lambda df, cut=cut: df.filter(F.col("time_wall") < F.lit(cut))}
            for k, f in filters.items():
                df = f(spark.read.format("a0").load(rec))
                row[f"filter_{k}_rows"] = df.count()
                row[f"filter_{k}_chunk_bytes"] = read_metrics(f(spark.read.format("a0").load(rec)))["chunkBytesRead"]
                row[f"filter_{k}_s"] = statistics.median(
                    timed(lambda f=f, rec=rec: noop(f(spark.read.format("a0").load(rec))), 1)[0]
                    for _ in range(args.repeats))
            results[f"read {name}"] = row
            print_figures(f"read {name:>7}, local[2] ({frames} frames, {disk / 1e6:.1f} MB MCAP, {parts} partitions; "
                          f"medians of {args.repeats}):", row, readers)
            for k, what in (("topic", "one topic of four"), ("time", "the first quarter of the time")):
                print(f"    filter on {what} ({row[f'filter_{k}_rows']} rows): {row[f'filter_{k}_s']:.2f} s against "
                      f"{row['filter_none_s']:.2f} s, chunk bytes read {row[f'filter_{k}_chunk_bytes'] / 1e6:.1f} MB "
                      f"against {row['filter_none_chunk_bytes'] / 1e6:.1f} MB", flush=True)
            d_s, _ = timed(lambda rec=rec: read_table(rec), args.repeats)
            results[f"decode {name}"] = {"rows_per_s": frames / d_s}
            print(f"decode {name:>5}: {frames / d_s / 1e6:6.2f} M rows/s in one process (read_table)", flush=True)
    finally:
        spark.stop()


def cluster_session(master, env, work, jar=None, **conf):
    """A session on the two one-core workers of ``standalone_cluster`` (its
    ``master`` and ``env``), once both executors have registered; ``conf``:
    more Spark settings."""
    spark = spark_session(master, jar=jar, **{
        "spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "1g",
        "spark.executorEnv.PYTHONPATH": env["PYTHONPATH"], "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        **conf})
    end = time.monotonic() + 180
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:
        if time.monotonic() > end:
            spark.stop()
            raise RuntimeError(f"the cluster's two executors did not register in 180 s (logs in {work})")
        time.sleep(0.5)
    return spark


def read_cluster(args, results, recs, work):
    """A standalone cluster on this machine: a master and two workers of one
    core each (the suite's cluster, tests/helpers/spark_cluster.py), this
    process the driver; the JVM reader (its jar shipped by spark.jars), the
    Python source and Parquet, alternating."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from helpers.spark_cluster import standalone_cluster

    with standalone_cluster(os.path.join(work, "cluster"), workers=2, cores=1, memory="2g") as (master, env):
        spark = cluster_session(master, env, work, jar=args.jar)
        try:
            for name, frames, size, rec, pq, disk in recs:
                if not os.path.exists(pq):
                    spark.read.format("a0").load(rec).write.parquet(pq)
                readers = {"jvm": read_fn(spark, "a0", rec), "python": read_fn(spark, "a0.python", rec),
                           "parquet": lambda pq=pq: noop(spark.read.parquet(pq))}
                runs, _ = alternate(readers, args.cluster_repeats)
                row = {"frames": frames, "payload": size, "mcap_bytes": disk, **figures(runs, frames, size)}
                results[f"read {name} cluster"] = row
                print_figures(f"read {name:>7}, standalone cluster, 2 workers x 1 core ({frames} frames; medians of "
                              f"{args.cluster_repeats}):", row, readers)
        finally:
            spark.stop()


def bench_read(args, results):
    work = tempfile.mkdtemp(prefix="a0py-bench-")
    try:
        recs = []
        for name, frames, size in (("64 B", args.small, 64), ("64 KiB", args.large, 64 * KiB)):
            rec = os.path.join(work, f"rec-{size}")
            disk = make_recording(rec, frames, size)
            recs.append((name, frames, size, rec, os.path.join(work, f"pq-{size}"), disk))
        if args.on in ("local", "both"):
            read_local(args, results, recs)
        if args.on in ("cluster", "both"):
            read_cluster(args, results, recs, work)
        # The closing table: rows/s (MB/s of payload at 64 KiB), paired ratios.
        print("\n| rows | Spark | JVM reader | Python source | Parquet | JVM / Python | JVM / Parquet |\n"
              "|---|---|---:|---:|---:|---:|---:|")
        for name, frames, size, *_ in recs:
            for where, key in (("local[2]", f"read {name}"), ("cluster, 2 workers", f"read {name} cluster")):
                row = results.get(key)
                if row is None:
                    continue
                unit = ("M rows/s", 1e6, "rows_per_s") if size < KiB else ("MB/s", 1, "MB_per_s")
                cells = " | ".join(f"{row[f'{k}_{unit[2]}'] / unit[1]:,.2f} {unit[0]}" for k in
                                   ("jvm", "python", "parquet"))
                print(f"| {frames:,} x {name} | {where} | {cells} | {row['jvm_over_python_paired']:.2f}x | "
                      f"{row['jvm_over_parquet_paired']:.2f}x |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_vs_parquet(args, results):
    """a0 (JVM reader) against Parquet: the pruned aggregate and the full rows, alternating."""
    from pyspark.sql import functions as F

    rows = args.rows_parquet
    work = args.dir or tempfile.mkdtemp(prefix="a0py-bench-")
    rec, pq = os.path.join(work, f"rec-{rows}x64"), os.path.join(work, f"pq-{rows}x64")
    try:
        if not os.path.exists(rec):
            make_recording(rec, rows, 64)
        spark = spark_session(jar=args.jar)
        try:
            if not os.path.exists(pq):
                spark.read.format("a0").load(rec).write.parquet(pq)

            def agg(df):
                return df.agg(F.sum(F.length("payload")), F.max("seq")).collect()

            readers = {"a0_query": lambda: agg(spark.read.format("a0").load(rec)),
                       "parquet_query": lambda: agg(spark.read.parquet(pq)),
                       "a0_rows": lambda: noop(spark.read.format("a0").load(rec)),
                       "parquet_rows": lambda: noop(spark.read.parquet(pq))}
            same = agg(spark.read.format("a0").load(rec)) == agg(spark.read.parquet(pq))
            parts = (spark.read.format("a0").load(rec).rdd.getNumPartitions(),
                     spark.read.parquet(pq).rdd.getNumPartitions())
            runs, cpus = alternate(readers, args.repeats_parquet, jvm_cpu(spark))
        finally:
            spark.stop()
        load = os.getloadavg()[0]
        row = {"rows": rows, "same_result": same, "partitions_a0_parquet": parts, "load1": load,
               "jar": args.jar or jar_path()}
        print(f"a0 (JVM reader) against Parquet, {rows} rows of 64 B, local[2], {args.repeats_parquet} alternating "
              f"rounds (partitions a0 {parts[0]}, Parquet {parts[1]}; results equal: {same}; load {load:.1f}):")
        for what in ("query", "rows"):
            a, p = runs[f"a0_{what}"], runs[f"parquet_{what}"]
            ratios = [q / t for t, q in zip(a, p)]
            row[what] = {"a0_s": a, "parquet_s": p, "ratios": ratios, "a0_cpu_s": cpus[f"a0_{what}"],
                         "parquet_cpu_s": cpus[f"parquet_{what}"]}
            label = "sum(length(payload)), max(seq)" if what == "query" else "full rows (noop)"
            print(f"  {label}: a0 {statistics.median(a):.2f} s ({min(a):.2f}-{max(a):.2f}), Parquet "
                  f"{statistics.median(p):.2f} s ({min(p):.2f}-{max(p):.2f}); Parquet / a0 paired "
                  f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); JVM CPU a0 "
                  f"{statistics.median(cpus[f'a0_{what}']):.2f} s, Parquet "
                  f"{statistics.median(cpus[f'parquet_{what}']):.2f} s", flush=True)
        results["parquet"] = row
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


def make_foreign(path, frames, payload_size, topics=4):
    """``frames`` raw messages of ``payload_size`` bytes over ``topics``
    channels, written by the official ``mcap`` writer (zstd, 4 MiB chunks),
    from the same kind of payload pool as :func:`make_recording`. Returns
    bytes on disk."""
    from mcap.writer import CompressionType, Writer

    pool = [os.urandom(payload_size) for _ in range(64 if payload_size > 4096 else 4096)]
    t0 = time.time_ns()
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=4 << 20, compression=CompressionType.ZSTD)
        w.start(profile="", library="a0py-bench")
        chans = [w.register_channel(f"bench/f{t}", "application/octet-stream", 0) for t in range(topics)]
        for i in range(frames):
            t = t0 + i * 1000
            w.add_message(chans[i % topics], log_time=t, publish_time=t, sequence=i, data=pool[i * 7 % len(pool)])
        w.finish()
    return os.path.getsize(path)


def bench_read_foreign(args, results):
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="a0py-bench-")
    try:
        frames, size = args.small, 64
        foreign = os.path.join(work, "foreign.mcap")
        own = os.path.join(work, "own")
        disk_f = make_foreign(foreign, frames, size)
        disk_o = make_recording(own, frames, size)
        pq_f, pq_o = os.path.join(work, "pq-foreign"), os.path.join(work, "pq-own")
        spark.read.format("a0").load(foreign).write.parquet(pq_f)
        spark.read.format("a0").load(own).write.parquet(pq_o)

        def read(fmt, path, **opts):
            def run():
                r = spark.read.format(fmt)
                for k, v in opts.items():
                    r = r.option(k, v)
                r.load(path).write.format("noop").mode("overwrite").save()
            return run

        readers = {
            "jvm_foreign": read("a0", foreign), "jvm_a0py": read("a0", own),
            "jvm_a0py_no_headers": read("a0", own, headers="false"),
            "python_foreign": read("a0.python", foreign), "python_a0py": read("a0.python", own),
            "parquet_foreign": lambda: spark.read.parquet(pq_f).write.format("noop").mode("overwrite").save(),
            "parquet_a0py": lambda: spark.read.parquet(pq_o).write.format("noop").mode("overwrite").save(),
        }
        rows = {"foreign": spark.read.format("a0").load(foreign).count(), "a0py": frames,
                "python_foreign": spark.read.format("a0.python").load(foreign).count()}
        for fn in readers.values():
            fn()  # warm up
        runs = {k: [] for k in readers}
        for _ in range(args.repeats):  # alternating, as in bench_read
            for k, fn in readers.items():
                runs[k].append(timed(fn, 1)[0])
        med = {k: statistics.median(v) for k, v in runs.items()}
        row = {"frames": frames, "payload": size, "foreign_mcap_bytes": disk_f, "a0py_mcap_bytes": disk_o,
               "rows": rows}
        for k in readers:
            n = rows["python_foreign"] if k == "python_foreign" else frames
            row[f"{k}_rows_per_s"] = n / med[k]
            row[f"{k}_runs_s"] = runs[k]
        row["jvm_foreign_over_a0py"] = med["jvm_a0py"] / med["jvm_foreign"]
        row["jvm_foreign_over_a0py_no_headers"] = med["jvm_a0py_no_headers"] / med["jvm_foreign"]
        results["read-foreign"] = row
        print(f"read-foreign ({frames} raw 64 B messages: official mcap writer {disk_f / 1e6:.1f} MB, a0py "
              f"{disk_o / 1e6:.1f} MB; medians of {args.repeats}):", flush=True)
        for k in readers:
            print(f"    {k:>20}: {row[f'{k}_rows_per_s'] / 1e6:6.2f} M rows/s", flush=True)
        print(f"    JVM foreign / JVM a0py (rows/s): {row['jvm_foreign_over_a0py']:.2f}x, against a0py without "
              f"headers {row['jvm_foreign_over_a0py_no_headers']:.2f}x; the Python source read "
              f"{rows['python_foreign']} rows of the foreign file", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def bench_decode(args, results):
    work = tempfile.mkdtemp(prefix="a0py-bench-")
    try:
        for name, frames, size in (("64 B", args.small, 64), ("64 KiB", args.large, 64 * KiB)):
            rec = os.path.join(work, f"rec-{size}")
            make_recording(rec, frames, size)
            d_s, all_s = timed(lambda rec=rec: read_table(rec), args.repeats)
            results[f"decode {name}"] = {"rows_per_s": frames / d_s, "runs_s": all_s}
            print(f"decode {name:>5}: {frames / d_s / 1e6:6.2f} M rows/s in one process (read_table)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def make_ros2_imu(path, rows):
    """``rows`` ``sensor_msgs/msg/Imu`` messages on ``/imu`` written by
    ``mcap-ros2-support`` with its defaults (zstd, 1 MiB chunks), as
    tests/helpers/foreign.py writes them. Returns bytes on disk."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from helpers.foreign import IMU_MSGDEF, IMU_TYPE, T0, imu_value
    from mcap_ros2.writer import Writer

    with open(path, "wb") as f:
        w = Writer(f)
        imu = w.register_msgdef(IMU_TYPE, IMU_MSGDEF)
        for i in range(rows):
            log = T0 + i * 10_000_000
            w.write_message("/imu", imu, imu_value(i, i % 8), log_time=log, publish_time=log, sequence=i)
        w.finish()
    return os.path.getsize(path)


def bench_decode_ros2(args, results):
    """Decoded Imu rows: Spark's a0 source with decode=true, against the
    official ROS 2 reader in one process and Spark reading Parquet."""
    from mcap_ros2.reader import read_ros2_messages
    from pyspark.sql import functions as F

    from a0py.spark import reader_in_use, register, session

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    work = tempfile.mkdtemp(prefix="a0py-bench-")
    spark = None
    try:
        rows = args.rows
        path = os.path.join(work, "imu.mcap")
        t = time.perf_counter()
        disk = make_ros2_imu(path, rows)
        made = time.perf_counter() - t
        spark = session("local[2]", "a0py-bench", **{
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g"})
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)  # the Python source as a0.python

        def decoded(fmt="a0"):
            return spark.read.format(fmt).option("decode", "true").load(path)

        pq = os.path.join(work, "imu.parquet")
        decoded().write.parquet(pq)
        df = decoded()
        reader = reader_in_use(df)
        parts = df.rdd.getNumPartitions()
        # The decode runs: every row has a message, and its fields are the values written.
        check = df.agg(F.count("message").alias("n"), F.count("decode_error").alias("errors"),
                       F.sum("message.linear_acceleration.y").alias("ay")).first()
        py_reader = reader_in_use(decoded("a0.python"))
        py_check = decoded("a0.python").agg(F.count("message").alias("n"),
                                            F.sum("message.linear_acceleration.y").alias("ay")).first()
        pq_check = spark.read.parquet(pq).agg(F.count("message").alias("n"),
                                              F.sum("message.linear_acceleration.y").alias("ay")).first()
        want_ay = sum(0.001 * i for i in range(rows))

        def spark_decode():
            decoded().select("message.*").write.format("noop").mode("overwrite").save()

        def spark_decode_python():
            decoded("a0.python").select("message.*").write.format("noop").mode("overwrite").save()

        def parquet():
            spark.read.parquet(pq).select("message.*").write.format("noop").mode("overwrite").save()

        def official():
            n, ay = 0, 0.0
            with open(path, "rb") as f:
                for m in read_ros2_messages(f):
                    ay += m.ros_msg.linear_acceleration.y
                    n += 1
            return n, ay

        got_official = official()  # warm up, and the check of (b)
        readers = {"spark_decode": spark_decode, "spark_decode_python": spark_decode_python,
                   "read_ros2_messages": official, "parquet": parquet}
        spark_decode()
        spark_decode_python()
        parquet()  # warm up
        runs = {k: [] for k in readers}
        for _ in range(args.ros2_repeats):  # alternating, as in bench_read
            for k, fn in readers.items():
                runs[k].append(timed(fn, 1)[0])
        med = {k: statistics.median(v) for k, v in runs.items()}
        row = {"rows": rows, "mcap_bytes": disk, "write_s": made, "partitions": parts, "reader": reader,
               "python_reader": py_reader, "python_message_rows": py_check["n"], "python_sum_ay": py_check["ay"],
               "load_avg_end": os.getloadavg(),
               "spark_message_rows": check["n"], "spark_decode_errors": check["errors"],
               "spark_sum_ay": check["ay"], "parquet_message_rows": pq_check["n"], "parquet_sum_ay": pq_check["ay"],
               "official_rows": got_official[0], "official_sum_ay": got_official[1], "want_sum_ay": want_ay}
        for k in readers:
            row[f"{k}_rows_per_s"] = rows / med[k]
            row[f"{k}_runs_s"] = runs[k]
        row["spark_over_official"] = med["read_ros2_messages"] / med["spark_decode"]
        row["spark_over_parquet"] = med["parquet"] / med["spark_decode"]
        row["python_over_official"] = med["read_ros2_messages"] / med["spark_decode_python"]
        row["python_over_parquet"] = med["parquet"] / med["spark_decode_python"]
        row["spark_over_official_paired"] = statistics.median(
            o / s for s, o in zip(runs["spark_decode"], runs["read_ros2_messages"]))
        row["spark_over_parquet_paired"] = statistics.median(
            p / s for s, p in zip(runs["spark_decode"], runs["parquet"]))
        results["decode-ros2"] = row
        print(f"decode-ros2 ({rows} Imu messages, mcap-ros2-support writer, {disk / 1e6:.1f} MB MCAP, written in "
              f"{made:.1f} s; {parts} partitions; spark_decode: {reader} reader, spark_decode_python: {py_reader} "
              f"reader; medians of {args.ros2_repeats}; load average at the end "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}):", flush=True)
        for k in readers:
            print(f"    {k:>20}: {row[f'{k}_rows_per_s'] / 1e3:8.1f} k rows/s  runs "
                  f"{', '.join(f'{x:.2f}' for x in runs[k])} s", flush=True)
        print(f"    (a)/(b) Spark decode / read_ros2_messages: {row['spark_over_official']:.2f}x (paired "
              f"{row['spark_over_official_paired']:.2f}x); (a)/(c) Spark decode / Parquet: "
              f"{row['spark_over_parquet']:.2f}x (paired {row['spark_over_parquet_paired']:.2f}x)\n"
              f"    (a')/(b) Python source / read_ros2_messages: {row['python_over_official']:.2f}x; (a')/(c) Python "
              f"source / Parquet: {row['python_over_parquet']:.2f}x\n"
              f"    check: Spark {check['n']} messages, {check['errors']} decode errors, sum of "
              f"linear_acceleration.y {check['ay']:.3f}; Python source {py_check['n']}, {py_check['ay']:.3f}; Parquet {pq_check['n']}, {pq_check['ay']:.3f}; "
              f"read_ros2_messages {got_official[0]}, {got_official[1]:.3f}; written {want_ay:.3f}", flush=True)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def scan_tasks(spark, group):
    """The tasks of the jobs of job group ``group`` (done): [(stage id,
    tasks, {executor id: tasks that ran there})], first stage first; the first
    is the scan (one task a partition)."""
    sc = spark.sparkContext
    st = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    out = []
    for sid in sorted(s for j in st.getJobIdsForGroup(group) for s in st.getJobInfo(j).stageIds):
        info = st.getStageInfo(sid)
        if info is None or info.numCompletedTasks == 0:
            continue  # skipped (its shuffle output reused)
        end = time.monotonic() + 10
        while True:  # the listener bus records tasks a little after the job ends
            tasks = store.taskList(sid, info.currentAttemptId, 1 << 20)
            if tasks.size() >= info.numCompletedTasks or time.monotonic() > end:
                break
            time.sleep(0.1)
        by = {}
        for i in range(tasks.size()):
            e = tasks.apply(i).executorId()
            by[e] = by.get(e, 0) + 1
        out.append((sid, info.numTasks, by))
    return out


def executor_workers(spark):
    """{executor id: the worker it runs in (host:port of the worker's web UI,
    from the executor's log address)}."""
    ex = spark.sparkContext._jsc.sc().statusStore().executorList(True)
    out = {}
    for i in range(ex.size()):
        e = ex.apply(i)
        log = e.executorLogs().get("stdout")
        out[e.id()] = log.get().split("/")[2] if log.isDefined() else e.hostPort()
    return out


def bench_fleet(args, results):
    """8 robots' ROS 2 recordings (bench/fleet.py: rosbag2 directories by
    rosbags, MCAP files by the official writer) read and aggregated on a
    standalone cluster of two workers; checked against mcap-ros2-support."""
    from bench import fleet

    directory = args.dir or os.path.join(tempfile.gettempdir(), f"a0py-fleet-{args.robots}x{args.mb}MB")
    t = time.perf_counter()
    manifest, reused = fleet.generate(directory, args.robots, args.mb, jobs=args.jobs)
    fleet_bytes = manifest["bytes"]
    print(f"fleet: {args.robots} robots x {args.mb} MB under {directory}: "
          + (f"reused (written in {manifest['generate_s']:.1f} s before)" if reused else
             f"written in {manifest['generate_s']:.1f} s ({args.jobs} processes)")
          + f"; {fleet_bytes / 1e6:.0f} MB, {sum(r['imu'] for r in manifest['recordings'])} Imu and "
          f"{sum(r['images'] for r in manifest['recordings'])} CompressedImage messages; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    row = {"dir": directory, "robots": args.robots, "mb": args.mb, "bytes": fleet_bytes, "reused": reused,
           "generate_s": manifest["generate_s"], "generate_jobs": manifest["jobs"],
           "recordings": manifest["recordings"], "load_before": os.getloadavg(), "runs": {}}
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from helpers.spark_cluster import standalone_cluster

    work = tempfile.mkdtemp(prefix="a0py-bench-fleet-")
    try:
        with standalone_cluster(os.path.join(work, "cluster"), workers=2, cores=1, memory="2g") as (master, env):
            spark = cluster_session(master, env, work, **{
                "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "4"})
            try:
                from a0py.spark import reader_in_use

                readers = {
                    "imu_decoded": (lambda: fleet.imu_summary(spark, directory, "a0"), "imu"),
                    "images_jvm": (lambda: fleet.image_counts(spark, directory, "a0"), "images"),
                    "images_python": (lambda: fleet.image_counts(spark, directory, "a0.python"), "images"),
                }
                row["reader"] = {k: reader_in_use(fn()) for k, (fn, _) in readers.items()}
                # Warm up: each reader's Python workers and JIT on one robot.
                one = fleet.robot_path(directory, 0)
                for fmt, decode, topic in (("a0", "true", fleet.IMU_TOPIC), ("a0", "false", fleet.IMAGE_TOPIC),
                                           ("a0.python", "false", fleet.IMAGE_TOPIC)):
                    spark.read.format(fmt).option("decode", decode).option("topics", topic).load(one).count()
                workers = executor_workers(spark)
                got = {}
                for rep in range(args.fleet_repeats):
                    for k, (fn, what) in readers.items():
                        group = f"fleet-{k}-{rep}"
                        spark.sparkContext.setJobGroup(group, group)
                        t = time.perf_counter()
                        rows = fn().collect()
                        s = time.perf_counter() - t
                        stages = scan_tasks(spark, group)
                        n = sum(r["n"] if what == "imu" else r["images"] for r in rows)
                        run = {"s": s, "rows": n, "rows_per_s": n / s, "MB_per_s": fleet_bytes / s / 1e6,
                               "partitions": stages[0][1], "scan_tasks_by_executor": stages[0][2],
                               "stages": stages, "groups": len(rows), "load": os.getloadavg()[0]}
                        row["runs"].setdefault(k, []).append(run)
                        got[k] = rows
                        spread = ", ".join(f"executor {e} ({workers.get(e, '?')}): {c}"
                                           for e, c in sorted(stages[0][2].items()))
                        print(f"    {k:>14} ({row['reader'][k]} reader): {s:6.1f} s, {n} rows, "
                              f"{n / s / 1e3:7.1f} k rows/s, {fleet_bytes / s / 1e6:6.1f} MB/s of recordings; "
                              f"{stages[0][1]} partitions; scan tasks {spread}; load {run['load']:.1f}", flush=True)
                row["workers"] = workers
            finally:
                spark.stop()
        # The check: one rosbag2 robot and one MCAP robot, without Spark.
        checked = {}
        for robot in sorted({0, min(1, args.robots - 1)}):
            t = time.perf_counter()
            imu, images = fleet.summary_without_spark(directory, robot)
            diffs = (fleet.compare(got["imu_decoded"], got["images_jvm"], robot, imu, images)
                     + fleet.compare(got["imu_decoded"], got["images_python"], robot, imu, images))
            checked[f"robot{robot}"] = {"minutes": len(imu), "imu": sum(a[0] for a in imu.values()),
                                        "images": sum(images.values()), "diffs": diffs[:20],
                                        "s": time.perf_counter() - t}
            print(f"    check robot{robot} ({fleet.robot_path(directory, robot)}): read_ros2_messages "
                  f"{checked[f'robot{robot}']['imu']} Imu messages in {len(imu)} minutes, "
                  f"{checked[f'robot{robot}']['images']} images: "
                  + ("the Spark rows agree" if not diffs else f"{len(diffs)} DIFFERENCES: {diffs[:3]}"), flush=True)
        row["check"] = checked
        row["robots_seen"] = sorted({r["robot"] for r in got["imu_decoded"]})
        results["fleet"] = row
        for k, runs in row["runs"].items():
            med = statistics.median(r["s"] for r in runs)
            row[f"{k}_median_s"] = med
        if any(c["diffs"] for c in checked.values()) or len(row["robots_seen"]) != args.robots:
            print(f"fleet: CHECK FAILED (robots seen {row['robots_seen']})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.remove_after:
            fleet.remove(directory)
            print(f"fleet: removed the fleet's recordings and manifest under {directory} (--remove-after)", flush=True)


PUBLISHER = """
import os, sys, time, a0py
topic, size, seconds, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
pub = a0py.Publisher(topic)
pool = [os.urandom(size) for _ in range(64)]
n = 0
start = time.monotonic()
end = start + seconds
while time.monotonic() < end:
    for data in pool * 16:
        pub.pub(data)
    n += 1024
    if rate:  # paced: never ahead of n / rate
        ahead = start + n / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
print(n)
"""

CAPACITY = """
import os, sys, time, tempfile, a0py
from a0py.recording import Recorder
topic, size, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pub = a0py.Publisher(topic)
pool = [os.urandom(size) for _ in range(64)]
for i in range(frames):
    pub.pub(pool[i % 64])
out = tempfile.mkdtemp()
rec = Recorder([topic], out=out, init="oldest")
wall, cpu = time.perf_counter(), time.process_time()
rec.run(duration=0.2)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
s = rec.stats()[topic]
print(s.frames, wall, cpu, os.path.getsize(rec.segments[0]))
"""


CAPACITY_JSON = """
import json, os, sys, time, tempfile, a0py
from a0py.recording import Recorder
topic, mode, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
pub = a0py.Publisher(topic)
objs = [{"i": i, "x": i / 3, "name": "pose", "ok": True, "v": [i, i + 1, i + 2]} for i in range(64)]
for i in range(frames):
    if mode == "typed":
        pub.pub_json(objs[i % 64])  # a typed topic: message encoding json, an inferred jsonschema
    else:
        pub.pub(json.dumps(objs[i % 64]).encode(), headers={"content-type": "application/json"})
out = tempfile.mkdtemp()
rec = Recorder([topic], out=out, init="oldest")
wall, cpu = time.perf_counter(), time.process_time()
rec.run(duration=0.2)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
s = rec.stats()[topic]
print(s.frames, wall, cpu, os.path.getsize(rec.segments[0]))
"""


def bench_json_capacity(args, results):
    """The recorder draining a topic of JSON objects that already holds the
    frames: schemaless JSON (whole packets, channel ``a0py/packet``) beside a
    typed JSON topic (``pub_json``: channels ``json`` + headers), alternating."""
    root = f"shm:a0pybench{os.getpid()}"
    env = dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO, A0PY_TOPIC_SIZES="bench/jcap=400M")
    frames = args.small // 2
    runs = {"schemaless": [], "typed": []}
    for _ in range(args.repeats):
        for mode in runs:
            r = subprocess.run([sys.executable, "-c", CAPACITY_JSON, "bench/jcap", mode, str(frames)], env=env,
                               capture_output=True, text=True, check=True)
            got, wall, cpu, disk = r.stdout.split()
            runs[mode].append({"frames": int(got), "wall_s": float(wall), "cpu_s": float(cpu),
                               "mcap_bytes": int(disk)})
            unlink_topic("bench/jcap", env)
    for mode, rs in runs.items():
        wall = statistics.median(r["frames"] / r["wall_s"] for r in rs)
        cpu = statistics.median(r["frames"] / r["cpu_s"] for r in rs)
        results[f"record capacity json {mode}"] = {"runs": rs, "frames_per_s_wall": wall, "frames_per_s_cpu": cpu}
        print(f"capacity json {mode:>10}: the recorder drains {wall / 1e6:5.2f} M frames/s ({cpu / 1e6:5.2f} M per "
              f"CPU second) of {rs[0]['frames']} frames already in the arena; "
              f"{statistics.median(r['mcap_bytes'] / r['frames'] for r in rs):.0f} B/frame on disk", flush=True)


def start_recorder(topic, out, env):
    """``a0py record TOPIC --out OUT`` in its own process, once it records."""
    rec = subprocess.Popen([sys.executable, "-m", "a0py.cli.recordings", "record", topic, "--out", out],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "recording to" in rec.stderr.readline()
    return rec


def stop_recorder(rec, timeout):
    """Ctrl-C, as a user ends it; its standard output."""
    rec.send_signal(2)
    return rec.communicate(timeout=timeout)[0]


def unlink_topic(topic, env):
    subprocess.run([sys.executable, "-c", f"import a0py; a0py.Topic({topic!r}).unlink()"], env=env)


def bench_record(args, results):
    root = f"shm:a0pybench{os.getpid()}"
    env = dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO)
    for name, size, arena in (("64 B", 64, 640 << 20), ("4 KiB", 4 * KiB, 1 << 30)):
        if args.rate:
            # A second of traffic at that rate: packet (96 B of header and standard
            # block, then the payload, 16-aligned) plus the 32 B frame header.
            arena = min(arena, int(args.rate * ((96 + size + 15) // 16 * 16 + 32)))
        runs = []
        for _ in range(args.repeats):
            out = tempfile.mkdtemp(prefix="a0py-bench-rec-")
            env["A0PY_TOPIC_SIZES"] = f"bench/rec={arena}"
            topic = "bench/rec"
            rec = start_recorder(topic, out, env)
            pub = subprocess.run([sys.executable, "-c", PUBLISHER, topic, str(size), str(args.seconds),
                                  str(args.rate or 0)], env=env,
                                 capture_output=True, text=True, check=True)
            published = int(pub.stdout.strip())
            time.sleep(1.5)
            stdout = stop_recorder(rec, 300)
            line = next(ln for ln in stdout.splitlines() if ln.startswith(topic + ":"))
            frames = int(line.split(": ")[1].split()[0])
            gaps = int(line.split(", ")[2].split()[0])
            lost = int(line.split("(")[1].split()[0])
            disk = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
            runs.append({"published": published, "recorded": frames, "gaps": gaps, "lost": lost, "arena": arena,
                         "publish_rate": published / args.seconds, "mcap_bytes": disk})
            shutil.rmtree(out, ignore_errors=True)
            unlink_topic(topic, env)
        rate = statistics.median(r["publish_rate"] for r in runs)
        lost = max(r["lost"] for r in runs)
        results[f"record {name}"] = {"runs": runs, "sustained_frames_per_s": rate, "max_lost": lost}
        print(f"record {name:>5}: publisher {rate / 1e6:5.2f} M frames/s for {args.seconds:.0f} s; recorder kept "
              f"{min(r['recorded'] / r['published'] for r in runs) * 100:.1f} % (lost {lost} frames, "
              f"{max(r['gaps'] for r in runs)} gaps); "
              f"{statistics.median(r['mcap_bytes'] / r['recorded'] for r in runs):.0f} B/frame on disk", flush=True)


def bench_capacity(args, results):
    """The recorder draining a topic that already holds the frames: what one
    recorder process can write, apart from any publisher (CPU time too)."""
    root = f"shm:a0pybench{os.getpid()}"
    for name, size, frames, arena in (("64 B", 64, args.small, "400M"), ("4 KiB", 4 * KiB, args.small // 8, "1G")):
        env = dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO, A0PY_TOPIC_SIZES=f"bench/cap={arena}")
        runs = []
        for _ in range(args.repeats):
            r = subprocess.run([sys.executable, "-c", CAPACITY, "bench/cap", str(size), str(frames)], env=env,
                               capture_output=True, text=True, check=True)
            got, wall, cpu, disk = r.stdout.split()
            runs.append({"frames": int(got), "wall_s": float(wall), "cpu_s": float(cpu), "mcap_bytes": int(disk)})
            unlink_topic("bench/cap", env)
        wall = statistics.median(r["frames"] / r["wall_s"] for r in runs)
        cpu = statistics.median(r["frames"] / r["cpu_s"] for r in runs)
        results[f"record capacity {name}"] = {"runs": runs, "frames_per_s_wall": wall, "frames_per_s_cpu": cpu}
        print(f"capacity {name:>5}: the recorder drains {wall / 1e6:5.2f} M frames/s ({cpu / 1e6:5.2f} M per CPU "
              f"second) of {runs[0]['frames']} frames already in the arena; "
              f"{statistics.median(r['mcap_bytes'] / r['frames'] for r in runs):.0f} B/frame on disk", flush=True)


PACED = """
import sys, time, a0py
topic, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
pub = a0py.Publisher(topic)
data = bytes(64)
start = time.monotonic()
n = 0
while n < rate * seconds:
    ahead = start + n / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
    pub.pub(data)
    n += 1
print(n)
"""


def bench_latency(args, results):
    """How late the recorder reads a frame (its ``log_time`` minus the
    packet's ``a0_time_wall``) when a publisher in another process publishes
    64 B one at a time at a steady rate: light traffic, where the recorder
    should wake for each frame."""
    import pyarrow.compute as pc

    root = f"shm:a0pybench{os.getpid()}"
    env = dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO)
    topic = "bench/lat"
    for rate in (100, 1000, 10000):
        p50s, p99s = [], []
        for _ in range(args.repeats):
            out = tempfile.mkdtemp(prefix="a0py-bench-lat-")
            rec = start_recorder(topic, out, env)
            subprocess.run([sys.executable, "-c", PACED, topic, str(rate), str(min(args.seconds, 2.0))], env=env,
                           capture_output=True, text=True, check=True)
            time.sleep(0.5)
            stop_recorder(rec, 120)
            t = read_table(out, record_time=True)
            late = pc.subtract(t.column("time_record").cast("int64"), t.column("time_wall").cast("int64"))
            late = sorted(late.to_pylist())
            p50s.append(late[len(late) // 2])
            p99s.append(late[min(len(late) - 1, len(late) * 99 // 100)])
            shutil.rmtree(out, ignore_errors=True)
            unlink_topic(topic, env)
        p50, p99 = statistics.median(p50s), statistics.median(p99s)
        results[f"record latency {rate}/s"] = {"p50_us": p50, "p99_us": p99, "p50_runs_us": p50s, "p99_runs_us": p99s}
        print(f"latency {rate:>6}/s: the recorder reads a frame p50 {p50:7.0f} µs, p99 {p99:7.0f} µs after its "
              f"a0_time_wall", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", metavar="WHAT",
                    help="read, read-foreign, record, capacity, jsoncap, decode, decode-ros2, latency, fleet, parquet (default: "
                    "read record capacity)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each reader (default 5; 3 for decode-ros2)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=None,
                    help="record: the publisher paces itself to this many frames/s (default: as fast as it can)")
    ap.add_argument("--rows", type=int, default=None,
                    help="decode-ros2: Imu messages in the file (default 200000; 20000 with --quick); parquet: rows (1 M; 100 k)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--on", choices=("local", "cluster", "both"), default="both",
                    help="read: on local[2], on a standalone cluster of two workers started here, or both (default)")
    ap.add_argument("--cluster-repeats", type=int, default=3,
                    help="read: runs of each reader on the cluster (default 3: the Python source takes about a "
                         "minute a run there for 1 M rows)")
    ap.add_argument("--jar", help="read, parquet: the JVM reader's jar (default: the package's, a0py.spark.jar_path())")
    ap.add_argument("--robots", type=int, default=8, help="fleet: robots (default 8)")
    ap.add_argument("--mb", type=int, default=500, help="fleet: MB of recording per robot (default 500)")
    ap.add_argument("--dir", help="fleet, parquet: where the recordings are written or reused (default "
                    "$TMPDIR/a0py-fleet-<robots>x<mb>MB; parquet: a temporary directory, removed)")
    ap.add_argument("--jobs", type=int, default=2, help="fleet: processes writing the recordings (default 2)")
    ap.add_argument("--remove-after", action="store_true",
                    help="fleet: remove the recordings and their fleet.json at the end (else they are kept)")
    args = ap.parse_args()
    unknown = sorted(set(args.what) - {"read", "read-foreign", "record", "capacity", "jsoncap", "decode", "decode-ros2",
                                          "latency", "fleet", "parquet"})
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}: choose from read, read-foreign, record, capacity, "
                 "jsoncap, decode, decode-ros2, latency, fleet, parquet")
    args.small, args.large = (1_000_000, 10_000) if not args.quick else (100_000, 1_000)
    if args.quick:
        args.repeats, args.cluster_repeats, args.seconds = 1, 1, 2.0
    args.ros2_repeats = args.repeats or 3
    args.repeats_parquet = args.repeats or 7
    args.rows_parquet = args.rows or (100_000 if args.quick else 1_000_000)
    args.fleet_repeats = args.repeats or 1
    args.repeats = args.repeats or 5
    if args.rows is None:
        args.rows = 20_000 if args.quick else 200_000
    results = {"args": vars(args), "cpus": os.cpu_count()}
    for what in args.what or ["read", "record", "capacity"]:
        {"read": bench_read, "record": bench_record, "capacity": bench_capacity, "jsoncap": bench_json_capacity,
         "decode": bench_decode, "latency": bench_latency, "read-foreign": bench_read_foreign,
         "decode-ros2": bench_decode_ros2, "fleet": bench_fleet, "parquet": bench_vs_parquet}[what](args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
