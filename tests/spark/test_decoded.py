"""a0py.spark.decoded: the Spark type of decoded messages and the
``message`` / ``decode_error`` columns appended to a record batch (no
SparkSession needed)."""

import pyarrow as pa
import pytest
from helpers.foreign import write_ros2_mcap
from mcap.reader import make_reader

from a0py.recording.decode import decoder_for
from a0py.recording.errors import RecordingOptionError
from a0py.spark.decoded import append_decoded, decoded_fields, decoded_type


@pytest.fixture(scope="module")
def imu(tmp_path_factory):
    w = write_ros2_mcap(str(tmp_path_factory.mktemp("d") / "imu.mcap"), n=30)
    chans = {}
    with open(w.path, "rb") as f:
        for schema, ch, m in make_reader(f).iter_messages(log_time_order=False):
            if ch.topic not in chans:
                chans[ch.topic] = (decoder_for(ch.topic, schema.name, schema.encoding, schema.data,
                                               ch.message_encoding), [])
            chans[ch.topic][1].append(m.data)
    return chans


def test_decoded_type_is_sparks_view_of_the_arrow_type(imu):
    from pyspark.sql.types import DecimalType, StructType, TimestampType

    dec, _ = imu["/imu"]
    t = decoded_type(dec)
    assert isinstance(t, StructType)
    assert isinstance(t["header"].dataType["stamp"].dataType, TimestampType)
    assert t.simpleString().startswith("struct<header:struct<stamp:timestamp,frame_id:string>,")
    assert "linear_acceleration_covariance:array<double>" in t.simpleString()
    u64 = decoder_for("/u", "x/msg/U", "ros2msg", b"uint64 v\n", "cdr")
    assert decoded_type(u64)["v"].dataType == DecimalType(20, 0)
    names = [f.name for f in decoded_fields(dec)]
    assert names == ["message", "decode_error"]
    text = decoder_for("/j", "", "", b"", "json")
    assert decoded_type(text).simpleString() == "string"


def test_append_decoded_decodes_each_row_with_its_channel_and_leaves_others_null(imu):
    dec, datas = imu["/imu"]
    rows = [datas[0], b"packet", datas[1], b"\x00\x01bad", datas[2]]
    decoders = [dec, None, dec, dec, dec]
    batch = pa.record_batch({"topic": ["/imu", "a0", "/imu", "/imu", "/imu"], "payload": pa.array(rows, pa.binary())})
    out = append_decoded(batch, decoders)
    assert out.schema.names == ["topic", "payload", "message", "decode_error"]
    assert out.column("message").type == dec.arrow_type
    msgs = out.column("message").to_pylist()
    errs = out.column("decode_error").to_pylist()
    assert msgs[0] == dec.decode_one(datas[0]) and msgs[2] == dec.decode_one(datas[1])
    assert msgs[4] == dec.decode_one(datas[2])
    assert msgs[1] is None and errs[1] is None  # not decoded: both null
    assert msgs[3] is None and "sensor_msgs/msg/Imu" in errs[3]
    assert errs[0] is None and errs[4] is None


def test_append_decoded_refuses_two_message_types_in_one_batch(imu):
    dec, datas = imu["/imu"]
    sdec, strings = imu["/chatter"]
    batch = pa.record_batch({"payload": pa.array([datas[0], strings[0]], pa.binary())})
    with pytest.raises(RecordingOptionError, match="topics"):
        append_decoded(batch, [dec, sdec])
    with pytest.raises(ValueError, match="2 rows"):
        append_decoded(batch, [dec])


def test_append_decoded_of_a_batch_with_no_decoded_rows_has_null_columns(imu):
    dec, _ = imu["/imu"]
    batch = pa.record_batch({"payload": pa.array([b"x", b"y"], pa.binary())})
    out = append_decoded(batch, [None, None], arrow_type=dec.arrow_type)
    assert out.column("message").type == dec.arrow_type
    assert out.column("message").null_count == 2 and out.column("decode_error").null_count == 2


def test_spark_takes_the_decoded_arrow_columns_as_the_announced_type(spark, tmp_path):
    """Every kind of decoded field (timestamp, decimal, binary, lists of
    structs, maps) goes into Spark through Arrow with the type decoded_type
    announces, and comes back with the same values."""
    import datetime
    from decimal import Decimal

    from helpers.foreign import write_ros2_all_types
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    w = write_ros2_all_types(str(tmp_path / "all.mcap"), n=5)
    with open(w.path, "rb") as f:
        items = list(make_reader(f).iter_messages())
    schema, ch, _ = items[0]
    dec = decoder_for(ch.topic, schema.name, schema.encoding, schema.data, ch.message_encoding)
    batch = pa.record_batch({"payload": pa.array([m.data for *_, m in items] + [b"bad"], pa.binary())})
    table = pa.Table.from_batches([append_decoded(batch, [dec] * 6)])
    want = StructType([StructField("payload", BinaryType()),
                       *decoded_fields(dec)])
    df = spark.createDataFrame(table, schema=want)
    assert df.schema["message"].dataType == decoded_type(dec)
    assert isinstance(df.schema["decode_error"].dataType, StringType)
    rows = df.orderBy("payload").collect()
    got = {r["message"]["i8"]: r["message"] for r in rows if r["message"] is not None}
    first = got[-128].asDict(recursive=True)
    assert first["u64"] == Decimal(2**64 - 1) and first["blob"] == bytearray()
    assert first["when"].astimezone(datetime.UTC) == datetime.datetime(
        2026, 9, 21, 14, 13, 20, 123456, tzinfo=datetime.UTC)
    assert first["dur"] == 999_999_999
    assert got[-125].asDict(recursive=True)["points"] == [{"x": 0.0, "y": -0.0}, {"x": 1.0, "y": -1.0},
                                                          {"x": 2.0, "y": -2.0}]
    assert [r["decode_error"] is None for r in rows].count(False) == 1
