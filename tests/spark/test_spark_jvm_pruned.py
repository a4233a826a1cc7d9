"""The JVM reader's pruned paths: the payload column given as slices of the
chunk's records (a query reading only payload lengths and seqs gets the
Python source's numbers), aggregates pushed into the reader (``count(*)``
and ``min``/``max`` of ``seq``, equal to Spark's own over the rows, with
filters and gap rows), and partitions cut evenly for the session's cores."""

import pytest
from helpers.mcap_data import write_segment
from pyspark.sql import functions as F

from a0py.spark import register


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    """Several topics and chunks, zstd, lz4 and none, gaps, payloads of many lengths."""
    d = tmp_path_factory.mktemp("pruned")
    write_segment(str(d / "a0py_00000.mcap"), {"cam": 700, "imu": 900, "odom": 40}, gaps=[("imu", 901, 950)],
                  payload=lambda t, s: bytes([s % 251]) * (s % 97))
    write_segment(str(d / "a0py_00001.mcap"), {"cam": 300, "imu": 100}, compression="lz4",
                  gaps=[("cam", 1001, 1003)], seq_start={"cam": 701, "imu": 951})
    write_segment(str(d / "a0py_00002.mcap"), {"raw": 120}, compression="none",
                  payload=lambda t, s: bytes(range(256)) * (s % 5))
    return str(d)


@pytest.fixture(scope="module")
def python_source(spark):
    register(spark)
    return "a0.python"


def _read(spark, fmt, path, **options):
    r = spark.read.format(fmt)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


QUERIES = {
    "lengths": lambda df: df.select(F.length("payload").alias("n"), "seq"),
    "sum_max": lambda df: df.agg(F.sum(F.length("payload")).alias("n"), F.max("seq").alias("m")),
    "by_topic": lambda df: df.groupBy("topic").agg(F.sum(F.length("payload")).alias("n"), F.count("*").alias("c")),
    "payload": lambda df: df.select("payload"),
    "filtered": lambda df: df.filter("topic = 'imu' and seq > 300").select(F.length("payload").alias("n")),
}


@pytest.mark.parametrize("gaps", ["false", "true"])
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_payload_lengths_and_seqs_alone_equal_the_python_sources(spark, python_source, rec, name, gaps):
    q = QUERIES[name]
    got = sorted(map(tuple, q(_read(spark, "a0", rec, gaps=gaps)).collect()), key=repr)
    want = sorted(map(tuple, q(_read(spark, python_source, rec, gaps=gaps)).collect()), key=repr)
    assert got == want
    assert len(got) > 0
    # and the same as from the full rows
    full = _read(spark, "a0", rec, gaps=gaps).collect()
    if name == "sum_max":
        frames = [r for r in full if r["payload"] is not None]
        assert got[0][0] == sum(len(r["payload"]) for r in frames)
        assert got[0][1] == max(r["seq"] for r in full if r["seq"] is not None)


AGGS = {
    "count": lambda df: df.agg(F.count("*")),
    "count_min_max": lambda df: df.agg(F.count("*"), F.min("seq"), F.max("seq")),
    "df_count": None,
    "topic_filter": lambda df: df.filter("topic = 'cam'").agg(F.max("seq"), F.count("*")),
    "seq_filter": lambda df: df.filter("seq >= 100 and seq < 700").agg(F.min("seq"), F.max("seq"), F.count("*")),
    "none_pass": lambda df: df.filter("seq > 1000000").agg(F.count("*"), F.min("seq"), F.max("seq")),
}


@pytest.mark.parametrize("gaps", ["false", "true"])
@pytest.mark.parametrize("name", sorted(AGGS))
def test_pushed_aggregates_equal_sparks_own_over_the_rows(spark, python_source, rec, name, gaps):
    q = AGGS[name]
    results = []
    for fmt, push in (("a0", "true"), ("a0", "false"), (python_source, "true")):
        df = _read(spark, fmt, rec, gaps=gaps, pushAggregates=push, maxPartitionBytes="20000")
        results.append(df.count() if q is None else [tuple(r) for r in q(df).collect()])
    assert results[0] == results[1] == results[2]
    if q is not None:
        pushed = q(_read(spark, "a0", rec, gaps=gaps))._jdf.queryExecution().executedPlan().toString()
        assert "aggregates [" in pushed
        not_pushed = q(_read(spark, "a0", rec, gaps=gaps, pushAggregates="false"))
        assert "aggregates [" not in not_pushed._jdf.queryExecution().executedPlan().toString()


def test_aggregates_the_reader_does_not_compute_are_sparks(spark, rec):
    df = _read(spark, "a0", rec)
    for q in (df.groupBy("topic").agg(F.max("seq")), df.agg(F.sum("seq")), df.agg(F.sum(F.length("payload")))):
        assert "aggregates [" not in q._jdf.queryExecution().executedPlan().toString()
    got = dict(map(tuple, df.groupBy("topic").agg(F.max("seq")).collect()))
    assert got == {"cam": 1000, "imu": 1050, "odom": 40, "raw": 120}


def test_partitions_are_even_and_a_multiple_of_the_cores(spark, rec):
    cores = spark.sparkContext.defaultParallelism
    for size in ("20000", "50000", "120000"):
        df = _read(spark, "a0", rec, maxPartitionBytes=size)
        n = df.rdd.getNumPartitions()
        assert n > 1 and n % cores == 0, (size, n)
        per = df.groupBy(F.spark_partition_id().alias("p")).count().collect()
        assert len(per) == n  # none empty
    one = _read(spark, "a0", rec, maxPartitionBytes=str(1 << 30))
    assert one.rdd.getNumPartitions() == 1
