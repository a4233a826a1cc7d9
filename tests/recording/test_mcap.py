"""MCAP segments without Spark: the writer's files open in the mcap package
with CRC validation, the reader gives back exactly the frames and gaps
written (several topics, segments, compressions, writers), files cut short
are read up to their last whole chunk, damage is a clear error naming the
file, and planning and predicates never change the rows."""

import datetime
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.mcap_data import (
    EPOCH,
    T0,
    Expected,
    cut,
    encode_std_packet,
    flip_byte,
    packet,
    table_frames,
    table_gaps,
    write_segment,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader
from mcap.writer import CompressionType, IndexType, Writer

import a0py
from a0py.recording import (
    EmptyRecordingError,
    RecordingFormatError,
    RecordingOptionError,
    SegmentWriter,
    bag_info,
)
from a0py.recording.format import GAP_TOPIC, PACKET_ENCODING
from a0py.recording.packets import wall_times
from a0py.recording.reader import (
    message_offsets,
    read_chunk_records,
    read_layout,
    read_message_index,
    walk_records,
)
from a0py.spark import read_table
from a0py.spark.batches import decode
from a0py.spark.options import ReadOptions
from a0py.spark.part_reader import read_part
from a0py.spark.planning import plan
from a0py.spark.predicate import Predicate


@pytest.fixture(scope="module")
def segs(tmp_path_factory):
    """Two segments of three topics (zstd and lz4), gaps in both."""
    d = tmp_path_factory.mktemp("segs")
    exp = write_segment(str(d / "a0py_00000.mcap"), {"cam/left": 400, "imu": 700, "odom": 50},
                        gaps=[("imu", 701, 720)], extra=lambda t, s: [("frame", f"{t}-{s}")] if s % 3 else [])
    exp.add(write_segment(str(d / "a0py_00001.mcap"), {"cam/left": 300, "imu": 200}, compression="lz4",
                          gaps=[("cam/left", 700, 700), ("odom", 51, 60)],
                          seq_start={"cam/left": 401, "imu": 721}))
    return d, exp


def test_segments_open_in_the_mcap_package_with_crc_validation(segs):
    d, exp = segs
    seen = {}
    for name in sorted(os.listdir(d)):
        with open(d / name, "rb") as f:
            reader = make_reader(f, validate_crcs=True)
            summary = reader.get_summary()
            assert summary.chunk_indexes and summary.statistics.message_count > 0
            for schema, channel, message in reader.iter_messages():
                if channel.message_encoding == PACKET_ENCODING:
                    assert schema.name == "a0py.Packet"
                    pkt = a0py.Packet.from_bytes(message.data)
                    seq = int(pkt.headers["a0_transport_seq"])
                    assert message.sequence == seq
                    assert message.publish_time == int(pkt.headers["a0_time_wall"])
                    seen[(channel.topic, seq)] = bytes(pkt.payload)
                else:
                    assert channel.topic == GAP_TOPIC and channel.message_encoding == "json"
                    assert schema.encoding == "jsonschema"
    assert seen == {k: v[1] for k, v in exp.frames.items()}


def test_rows_equal_the_frames_and_gaps_written(segs):
    d, exp = segs
    t = read_table(str(d), gaps=True)
    assert table_frames(t) == exp.frames
    assert table_gaps(t) == exp.gaps
    plain = read_table(str(d))
    assert plain.schema.names == ["topic", "seq", "time_mono", "time_wall", "headers", "payload"]
    assert plain.num_rows == len(exp.frames)


def test_paths_as_file_list_and_glob_give_the_same_rows(segs):
    d, exp = segs
    files = sorted(str(d / n) for n in os.listdir(d))
    assert table_frames(read_table(files)) == exp.frames
    assert table_frames(read_table(str(d / "*.mcap"))) == exp.frames
    one = table_frames(read_table(files[1]))
    assert one and all(exp.frames[k] == v for k, v in one.items())


def test_a_file_split_into_many_parts_gives_each_chunk_once(segs):
    d, exp = segs
    opts = ReadOptions(gaps=True, partition_bytes=20_000)
    parts = plan(str(d), Predicate(), opts)
    assert len(parts) > 10
    refs = [(item.path, r.offset) for p in parts for item in p.items for r in item.refs]
    assert len(refs) == len(set(refs))
    batches = [b for p in parts for b in read_part(p, Predicate(), opts)]
    t = pa.Table.from_batches(batches)
    assert table_frames(t) == exp.frames and table_gaps(t) == exp.gaps


@settings(max_examples=40, deadline=None)
@given(topics=st.none() | st.sets(st.sampled_from(["cam/left", "imu", "odom", "none"]), max_size=3),
       lo=st.none() | st.integers(0, 800), hi=st.none() | st.integers(0, 800),
       seq_in=st.none() | st.sets(st.integers(0, 800), max_size=20),
       wall_lo=st.none() | st.integers(0, 800), wall_hi=st.none() | st.integers(0, 800))
def test_predicates_return_exactly_the_rows_that_pass(segs, topics, lo, hi, seq_in, wall_lo, wall_hi):
    d, exp = segs
    p = Predicate()
    if topics is not None:
        p = p.and_topics(topics)
    p = p.and_seq(lo=lo, hi=hi, values=seq_in)
    us = lambda s: None if s is None else (T0 + s * 1_000_000) // 1000  # noqa: E731
    p = p.and_wall(lo=us(wall_lo), hi=us(wall_hi))
    opts = ReadOptions(gaps=True, partition_bytes=30_000)
    batches = [b for part in plan(str(d), p, opts) for b in read_part(part, p, opts)]
    got = pa.Table.from_batches(batches, schema=read_table(str(d), gaps=True).schema)

    def passes(topic, seq, wall_us):
        return ((topics is None or topic in topics) and (lo is None or seq >= lo) and (hi is None or seq <= hi)
                and (seq_in is None or seq in seq_in) and (wall_lo is None or wall_us >= us(wall_lo))
                and (wall_hi is None or wall_us <= us(wall_hi)))

    assert table_frames(got) == {k: v for k, v in exp.frames.items() if passes(k[0], k[1], v[2])}
    full = read_table(str(d), gaps=True).to_pydict()
    want_gaps = {(t, f): la for t, g, f, la, w in zip(full["topic"], full["is_gap"], full["gap_first"],
                                                       full["gap_last"], full["time_wall"])
                 if g and passes(t, f, (w - EPOCH) // datetime.timedelta(microseconds=1))}
    assert table_gaps(got) == want_gaps


def test_chunks_of_other_topics_are_never_read(tmp_path):
    path = str(tmp_path / "s.mcap")
    write_segment(path, {"a": 300, "b": 300})
    lay = read_layout(path)
    b_id = next(c.id for c in lay.channels.values() if c.topic == "b")
    b_chunk = next(r for r in lay.chunks if r.channel_ids == {b_id})
    flip_byte(path, b_chunk.offset + b_chunk.length - 5)  # damage b's data only
    t = read_table(path, topics=["a"])
    assert t.num_rows == 300 and set(t.column("topic").to_pylist()) == {"a"}
    with pytest.raises(RecordingFormatError, match=path):
        read_table(path)


def test_writers_other_than_ours_are_read_too(tmp_path):
    """The mcap package's writer: channels inside chunks, mixed channels per
    chunk, every compression, with and without message indexes, unchunked;
    a foreign channel's messages are rows of their own (no seq, their bytes
    as payload)."""
    for comp in (CompressionType.ZSTD, CompressionType.LZ4, CompressionType.NONE):
        for index, chunking in ((IndexType.ALL, True), (IndexType.NONE, True), (IndexType.ALL, False)):
            path = tmp_path / f"f-{comp.name}-{index.name}-{chunking}.mcap"
            exp = Expected()
            with open(path, "wb") as f:
                w = Writer(f, compression=comp, index_types=index, use_chunking=chunking, chunk_size=4000)
                w.start()
                sid = w.register_schema("a0py.Packet", "a0py/packet-layout", b"")
                cids = {t: w.register_channel(t, PACKET_ENCODING, sid) for t in ("x", "y")}
                other = w.register_channel("/ros/thing", "cdr", 0)
                for s in range(1, 120):
                    for t in ("x", "y"):
                        raw, headers, pay = packet(t, s)
                        w.add_message(cids[t], T0 + s, raw, T0 + s * 1_000_000, s)
                        exp.frames[(t, s)] = (tuple(headers), pay, (T0 + s * 1_000_000) // 1000, 5_000_000 + s * 1000)
                    w.add_message(other, T0 + s, b"\x00\x01", T0 + s, s)
                w.finish()
            table = read_table(str(path))
            foreign = table.filter(pc.equal(table.column("topic"), "/ros/thing"))
            assert foreign.column("sequence").to_pylist() == list(range(1, 120)), path.name
            assert set(foreign.column("payload").to_pylist()) == {b"\x00\x01"}
            assert foreign.column("seq").null_count == 119
            assert table_frames(read_table(str(path), topics=["x", "y"])) == exp.frames, path.name
            if chunking:
                short = cut(str(path), str(tmp_path / "short.mcap"), os.path.getsize(path) * 2 // 3)
                got = table_frames(read_table(short, topics=["x", "y"]))
                assert got and all(exp.frames[k] == v for k, v in got.items()), path.name


def test_a_file_cut_anywhere_reads_the_frames_of_its_whole_chunks(tmp_path):
    path = str(tmp_path / "full.mcap")
    exp = write_segment(path, {"a": 200, "b": 100}, chunk_bytes=4096, gaps=[("a", 300, 310)])
    lay = read_layout(path)
    gap_ids = {c.id for c in lay.channels.values() if c.topic == GAP_TOPIC}
    data_end = max(r.offset + r.length + r.index_length for r in lay.chunks)
    sizes = sorted({*range(8, data_end + 200, 997), data_end - 1, data_end, os.path.getsize(path) - 1})
    previous = 0
    for size in sizes:
        short = cut(path, str(tmp_path / "cut.mcap"), size)
        try:
            t = read_table(short, gaps=True)
        except RecordingFormatError:
            pytest.fail(f"a file cut at {size} bytes must be readable up to its last whole chunk")
        got = table_frames(t)
        whole = [r for r in lay.chunks if r.offset + r.length <= size and not (r.channel_ids & gap_ids)]
        assert len(got) == sum(r.message_count for r in whole), size
        assert all(exp.frames[k] == v for k, v in got.items())
        assert len(got) >= previous
        previous = len(got)
    assert previous == len(exp.frames)


def test_damage_is_a_clear_error_naming_the_file(tmp_path):
    path = str(tmp_path / "ok.mcap")
    write_segment(path, {"a": 300}, compression="none")
    bad = str(tmp_path / "flipped.mcap")
    cut(path, bad, os.path.getsize(path))
    with open(bad, "rb") as f:
        flip_byte(bad, f.read().index(b"a:150") + 2)  # a payload byte
    with pytest.raises(RecordingFormatError, match=r"flipped\.mcap.*CRC mismatch"):
        read_table(bad)
    with open(bad, "rb") as f:  # the mcap package agrees
        with pytest.raises(Exception, match=r"(?i)crc"):
            list(make_reader(f, validate_crcs=True).iter_messages())
    unchecked = table_frames(read_table(bad, validate_crc=False))
    assert len(unchecked) == 300 and unchecked[("a", 150)][1] != b"a:150"
    summary = str(tmp_path / "summary.mcap")
    cut(path, summary, os.path.getsize(path))
    flip_byte(summary, os.path.getsize(path) - 60)
    with pytest.raises(RecordingFormatError, match=r"summary\.mcap.*summary"):
        read_table(summary)
    empty = tmp_path / "empty.mcap"
    empty.write_bytes(b"")
    with pytest.raises(EmptyRecordingError, match=r"empty\.mcap.*empty"):
        read_layout(str(empty))
    assert read_table(str(empty)).num_rows == 0  # a file with no record yet is skipped (and logged)
    other = tmp_path / "notes.mcap"
    other.write_bytes(b"just some text, not a recording\n" * 10)
    with pytest.raises(RecordingFormatError, match=r"notes\.mcap.*not an MCAP"):
        read_table(str(other))
    with pytest.raises(RecordingOptionError, match="no such file"):
        read_table(str(tmp_path / "missing"))


def test_a_corrupt_packet_is_an_error_naming_the_message(tmp_path):
    path = str(tmp_path / "p.mcap")
    w = SegmentWriter(path, compression="none")
    good = [packet("a", s)[0] for s in range(1, 6)]
    broken = bytearray(good[2])
    broken[0:4] = b"XXXX"
    w.write_packets("a", np.arange(1, 6), [*good[:2], bytes(broken), *good[3:]], T0)
    w.close()
    with pytest.raises(RecordingFormatError, match=r"p\.mcap: chunk at byte \d+, message 2: corrupt a0py packet: "
                                                   r"field magic"):
        read_table(path)


def test_an_incomplete_message_index_falls_back_to_a_walk(tmp_path):
    path = str(tmp_path / "i.mcap")
    exp = write_segment(path, {"a": 100}, chunk_bytes=1 << 20)
    lay = read_layout(path)
    ref = lay.chunks[0]
    with open(path, "rb") as f:
        records = read_chunk_records(f.fileno(), ref, path)
        offs = read_message_index(f.fileno(), ref, path)
    walked, _ = walk_records(records, path, 0)
    assert (offs == walked).all() and len(offs) == 100
    got, _ = message_offsets(records, np.delete(offs, [0, 50, 99]), path, 0)
    assert (got == walked).all()
    assert table_frames(read_table(path)) == exp.frames


def _decode_all(raws):
    buf = b"".join(raws)
    lengths = np.array([len(r) for r in raws], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return decode(buf, starts, lengths, lambda i: f"packet {i}")


def _oracle(raw):
    """What a0py's own reader (the C decoder) makes of a packet, or None."""
    try:
        pkt = a0py.Packet.from_bytes(raw)
        return list(pkt.headers.items()), bytes(pkt.payload)
    except a0py.PacketCorruptError:
        return None


text = st.text(max_size=12).filter(lambda s: "\0" not in s)
key = st.text(min_size=1, max_size=12).filter(lambda s: "\0" not in s)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.tuples(key, text), max_size=5), st.binary(max_size=40),
                          st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), min_size=1, max_size=10))
def test_rows_decode_as_a0py_reads_the_packets(packets):
    """Packets with and without the standard block (from the C encoder and a
    publisher's layout): headers, payloads, seqs and times as a0py.Packet
    decodes them."""
    raws = []
    for std, headers, payload, seq, wall in packets:
        if std:
            raws.append(encode_std_packet(seq, wall, 7, 3, b"\x01" * 16, headers, payload))
        else:
            hs = list(headers) + ([("a0_transport_seq", str(seq))] if seq % 2 else [])
            raws.append(a0py.Packet(hs, payload).to_bytes())
    dec = _decode_all(raws)
    for i, raw in enumerate(raws):
        headers, payload = _oracle(raw)
        assert dec.headers[i].as_py() == headers
        assert dec.payload[i].as_py() == payload
        d = dict(headers)
        want = d.get("a0_transport_seq")
        ok = want is not None and want.isdigit() and len(want) <= 19 and int(want) < 2**63
        assert (bool(dec.seq_have[i]), int(dec.seq[i]) if ok else 0) == (ok, int(want) if ok else 0)
        if "a0_time_wall" in d and int(d["a0_time_wall"]) < 2**63:
            assert dec.wall_have[i] and dec.wall[i] == int(d["a0_time_wall"])


def test_every_damaged_byte_is_refused_exactly_when_a0py_refuses_it():
    raw = packet("a", 3, payload=b"p" * 20, extra=[("key", "välue"), ("k2", "")])[0]
    plain = a0py.Packet([("x", "y"), ("a0_time_wall", "12")], b"q" * 9).to_bytes()
    for original in (raw, plain):
        for i in range(len(original)):
            for flip in (0x01, 0x80):
                bad = bytearray(original)
                bad[i] ^= flip
                oracle = _oracle(bytes(bad))
                try:
                    dec = _decode_all([bytes(bad)])
                except RecordingFormatError:
                    assert oracle is None, (i, flip)
                    continue
                assert oracle is not None, (i, flip)
                assert dec.headers[0].as_py() == oracle[0] and dec.payload[0].as_py() == oracle[1]
                # The recorder's scan never raises, whatever the bytes.
                wall_times(bytes(bad), np.array([0]), np.array([len(bad)]))


def test_json_payloads_parse_into_a_struct(tmp_path):
    from a0py.spark.batches import parse_json_payloads

    typ = pa.struct([("x", pa.float64()), ("tag", pa.string())])
    payloads = pa.array([b'{"x": 1.5, "tag": "a"}', b'{\n "x": 2,\n "tag": "b"\n}', b"not json", b"[1]", b"",
                         b'{"x": "oops"}', b'{"other": 1}'], pa.binary())
    got = parse_json_payloads(payloads, typ).to_pylist()
    assert got == [{"x": 1.5, "tag": "a"}, {"x": 2.0, "tag": "b"}, None, None, None, None, {"x": None, "tag": None}]
    good = pa.array([b'{"x": 1, "tag": "q"}', b'{"x": 3.25}'], pa.binary())
    assert parse_json_payloads(good, typ).to_pylist() == [{"x": 1.0, "tag": "q"}, {"x": 3.25, "tag": None}]


def test_bag_info_counts_topics_seqs_and_gaps(segs, tmp_path):
    d, exp = segs
    info = bag_info(str(d))
    assert info["topics"]["imu"]["frames"] == 900 and info["topics"]["imu"]["gaps"] == 1
    assert (info["topics"]["imu"]["first_seq"], info["topics"]["imu"]["last_seq"]) == (1, 920)
    assert info["topics"]["imu"]["lost_frames"] == 20
    assert info["topics"]["cam/left"]["first_seq"] == 1 and info["topics"]["cam/left"]["last_seq"] == 700
    assert info["topics"]["odom"]["gaps"] == 1 and info["topics"]["odom"]["lost_frames"] == 10
    assert info["frames"] == len(exp.frames) and all(f["complete"] for f in info["files"])
    first = sorted(os.listdir(d))[0]
    short = cut(str(d / first), str(tmp_path / "short.mcap"), os.path.getsize(d / first) // 2)
    si = bag_info(short)
    assert not si["files"][0]["complete"] and si["files"][0]["cut_short_at"] is not None
    rows = table_frames(read_table(short))
    for t in ("cam/left", "imu", "odom"):
        got = sorted(s for tt, s in rows if tt == t)
        if got:
            assert si["topics"][t]["frames"] == len(got)
            assert (si["topics"][t]["first_seq"], si["topics"][t]["last_seq"]) == (got[0], got[-1])
    from a0py.recording.baginfo import format_bag_info

    text = format_bag_info(info)
    assert "Topic: imu | Type: a0py.Packet | Count: 900 | Serialization Format: a0py/packet | Seq: 1..920" in text
    assert "Gaps:              3 (31 frames lost)" in text


def test_recorded_seqs_agree_with_the_rows_and_the_segment_metadata(segs):
    """a0py.recording.frames (bag info of a cut-short segment, --resume)
    counts without Arrow what the Spark rows and the writer's metadata say."""
    import json

    from a0py.recording.frames import recorded_seqs

    d, _ = segs
    for name in sorted(os.listdir(d)):
        path = str(d / name)
        seen = recorded_seqs(path)
        t = read_table(path, gaps=True).to_pydict()
        meta = read_layout(path).metadata_named("a0py.segment")
        for topic in set(t["topic"]):
            frames = [s for tt, s, g in zip(t["topic"], t["seq"], t["is_gap"]) if tt == topic and not g]
            gaps = [(f, la) for tt, f, la, g in zip(t["topic"], t["gap_first"], t["gap_last"], t["is_gap"])
                    if tt == topic and g]
            s = seen[topic]
            assert (s.frames, s.first, s.last) == (len(frames), min(frames, default=None), max(frames, default=None))
            assert (s.gaps, s.lost) == (len(gaps), sum(la - f + 1 for f, la in gaps))
            assert s.gap_last == max((la for _, la in gaps), default=None)
            assert s.last_recorded == max([*frames, *(la for _, la in gaps)])
            m = json.loads(meta[f"topic.{topic}"])
            assert (s.frames, s.bytes if s.frames else 0) == (m["frames"], m["bytes"])
        assert set(seen) == set(t["topic"])


def test_writer_rejects_bad_options(tmp_path):
    with pytest.raises(RecordingOptionError, match="compression 'gzip'"):
        SegmentWriter(str(tmp_path / "x.mcap"), compression="gzip")
    with SegmentWriter(str(tmp_path / "y.mcap")):
        pass
    with pytest.raises(FileExistsError):
        SegmentWriter(str(tmp_path / "y.mcap"))
    assert read_table(str(tmp_path / "y.mcap")).num_rows == 0


def test_corrupt_packets_are_errors_naming_the_message_and_the_field(tmp_path):
    path = str(tmp_path / "bad.mcap")
    w = SegmentWriter(path, compression="none")
    raws = [packet("a", s, extra=[("k", "välue")])[0] for s in range(1, 9)]
    broken = {3: (lambda b: b.__setitem__(slice(4, 6), b"\x02\x00"), "field version"),
              5: (lambda b: b.__setitem__(slice(40, 48), (10**6).to_bytes(8, "little")), "field payload_size"),
              6: (lambda b: b.__setitem__(slice(96, 100), (4000).to_bytes(4, "little")), "a header key outside")}
    for i, (damage, why) in broken.items():
        frames = list(raws)
        b = bytearray(frames[i])
        damage(b)
        frames[i] = bytes(b)
        if os.path.exists(path):
            os.unlink(path)
        w = SegmentWriter(path, compression="none")
        w.write_packets("a", np.arange(1, 9), frames, T0)
        w.close()
        with pytest.raises(RecordingFormatError, match=rf"message {i}: corrupt a0py packet: {why}"):
            read_table(path)
    bad_utf8 = bytearray(raws[2])
    pos = bad_utf8.index("välue".encode())
    bad_utf8[pos + 1] = 0xFF  # half of the two-byte 'ä'
    os.unlink(path)
    w = SegmentWriter(path, compression="none")
    w.write_packets("a", np.arange(1, 4), [raws[0], raws[1], bytes(bad_utf8)], T0)
    w.close()
    with pytest.raises(RecordingFormatError, match=r"message 2: corrupt a0py packet: header 5 value is not UTF-8"):
        read_table(path)


def test_segments_without_message_indexes_read_the_same(tmp_path):
    path = str(tmp_path / "noindex.mcap")
    exp = write_segment(path, {"a": 150, "b": 80}, chunk_bytes=4096, message_index=False, gaps=[("a", 151, 152)])
    lay = read_layout(path)
    assert lay.chunks and all(r.channel_ids is None for r in lay.chunks)
    t = read_table(path, gaps=True)
    assert table_frames(t) == exp.frames and table_gaps(t) == exp.gaps
    assert table_frames(read_table(path, topics=["b"])) == {k: v for k, v in exp.frames.items() if k[0] == "b"}
    short = cut(path, str(tmp_path / "short.mcap"), os.path.getsize(path) // 2)
    got = table_frames(read_table(short))
    assert got and all(exp.frames[k] == v for k, v in got.items())
