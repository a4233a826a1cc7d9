"""The JVM reader joins a typed topic's payloads with headers channels in
their payloads' family (protobuf, CDR) as with ``a0py/packet`` ones (the
format recordings had before): the same rows as the Python source, for
both."""

import re

import pytest
from helpers.typed_segments import new_and_old_segments
from test_spark_jvm import both

from a0py.recording import headers
from a0py.spark import register

JAVA = "jvm/src/a0py/spark/jvm/HeadersMessage.java"


@pytest.fixture(scope="module")
def python_source(spark):
    register(spark)
    return "a0.python"


@pytest.mark.parametrize("options", [(), (("headers", "false"),), (("topics", "s/ros"),)],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o) or "default")
def test_jvm_rows_of_new_and_old_headers_channels_equal_the_python_sources(spark, python_source, tmp_path,
                                                                           monkeypatch, options):
    new, old = new_and_old_segments(tmp_path, monkeypatch, frames=40)
    (jr, new_jvm), (pr, new_py) = both(spark, python_source, str(new), options)
    (_, old_jvm), (_, old_py) = both(spark, python_source, str(old), options)
    assert (jr, pr) == ("jvm", "python")
    assert new_jvm and new_jvm == new_py == old_jvm == old_py


def test_jvm_filters_by_seq_and_prunes_columns_on_new_headers_channels(spark, python_source, tmp_path, monkeypatch):
    new, old = new_and_old_segments(tmp_path, monkeypatch, frames=40)
    query = lambda df: df.select("topic", "seq", "headers").filter("seq % 3 = 0")  # noqa: E731
    got = [both(spark, python_source, str(p), query=query) for p in (new, old)]
    assert got[0][0][1] and got[0][0][1] == got[0][1][1] == got[1][0][1] == got[1][1][1]


def test_the_jvm_reads_headers_messages_at_the_offsets_headers_py_writes_them():
    from helpers.procs import REPO

    with open(f"{REPO}/{JAVA}") as f:
        java = f.read()

    def ints(name):
        m = re.search(rf"static final int(?:\[\])? {name} = \{{?([^;}}]*)\}}?;", java)
        return [int(x) for x in m.group(1).split(",")]

    names = [n for n, _, _ in headers.FIELDS]
    assert ints("PB_AT") == [headers.PB_AT[n] for n in names]
    assert ints("CDR_AT") == [headers.CDR_AT[n] for n in names]
    assert ints("SIZE") == [s for _, s, _ in headers.FIELDS]
    assert ints("PB_BLOCK_KEY_AT") == [headers.PB_FIXED] and headers.PB_BLOCK_KEY == bytes([0x4A])
    assert ints("CDR_BLOCK_AT") == [headers.CDR_BLOCK_AT]
