"""Hostile and damaged recordings: decompression bombs stay within the
memory their chunk declares (checked in a child under RLIMIT_AS), a file
with no record yet is skipped by every reader and by ``record --resume``,
and absurd lengths and times in a file are a RecordingFormatError naming
the file, the offset and the field."""

import os
import struct
import subprocess
import sys
import textwrap

import lz4.frame
import pytest
import zstandard
from helpers.mcap_data import cut, table_frames, write_segment
from helpers.procs import REPO

import a0py
from a0py.recording import EmptyRecordingError, Player, RecordingFormatError, bag_info
from a0py.recording.format import MAGIC
from a0py.recording.reader import read_layout
from a0py.spark import read_table
from a0py.view._recording import RecordingSource
from a0py.view.errors import ViewError

BOMB_CONTENT = 1 << 30  # what the bombs really decompress to
DECLARED = 4096  # what their chunk record says


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _string(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def _record(op, body):
    return struct.pack("<BQ", op, len(body)) + body


def _zeros_compressed(compression):
    """BOMB_CONTENT zero bytes compressed, without holding them in memory."""
    piece = bytes(16 << 20)
    if compression == "zstd":
        import io

        buf = io.BytesIO()
        w = zstandard.ZstdCompressor(level=3).stream_writer(buf, size=BOMB_CONTENT, closefd=False)
        for _ in range(BOMB_CONTENT // len(piece)):
            w.write(piece)
        w.close()
        return buf.getvalue()
    c = lz4.frame.LZ4FrameCompressor()
    out = [c.begin()]
    for _ in range(BOMB_CONTENT // len(piece)):
        out.append(c.compress(piece))
    out.append(c.flush())
    return b"".join(out)


def write_bomb(path, compression):
    """An MCAP file cut short after one chunk whose records declare
    DECLARED bytes but decompress to a gibibyte."""
    data = _zeros_compressed(compression)
    header = _record(0x01, _string("") + _string("a0py"))
    chunk = struct.pack("<QQQI", 1, 2, DECLARED, 0) + _string(compression) + struct.pack("<Q", len(data)) + data
    with open(path, "wb") as f:
        f.write(MAGIC + header + _record(0x06, chunk))
    return os.path.getsize(path)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    out = {}
    for comp in ("zstd", "lz4"):
        out[comp] = str(d / f"{comp}.mcap")
        write_bomb(out[comp], comp)
    return out


# Runs SURFACE on a file under an address-space limit of 512 MiB above what
# the child uses once the modules are imported; prints the exception's class.
CHILD = textwrap.dedent("""
    import resource, sys
    import a0py.recording, a0py.recording.reader, a0py.recording.frames, a0py.spark, a0py.view._recording
    import numpy, pyarrow, zstandard, lz4.frame
    path, surface = sys.argv[1], sys.argv[2]

    def vm():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024

    limit = vm() + (512 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        if surface == "bag":
            a0py.recording.bag_info(path)
        elif surface == "reader":
            lay = a0py.recording.reader.read_layout(path)
            a0py.recording.frames.recorded_seqs(path, layout=lay)
        elif surface == "spark":
            a0py.spark.read_table(path)
        elif surface == "play":
            a0py.recording.Player(path, rate=0).run()
        elif surface == "view":
            a0py.view._recording.RecordingSource.open(path)
        print("no error")
    except BaseException as e:
        print(type(e).__name__, str(e)[:300])
""")


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
@pytest.mark.parametrize("surface", ["bag", "reader", "spark", "play", "view"])
def test_a_decompression_bomb_is_a_format_error_within_bounded_memory(bombs, compression, surface):
    r = subprocess.run([sys.executable, "-c", CHILD, bombs[compression], surface], env=_env(A0PY_ROOT="shm:a0pybomb"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr  # not killed
    out = r.stdout.strip()
    want = "ViewError" if surface == "view" else "RecordingFormatError"
    assert out.startswith(want), out + r.stderr[-2000:]
    assert f"{compression}.mcap" in out and "at byte" in out and "uncompressed_size" in out


def test_a_bomb_read_through_spark_is_a_format_error(spark, bombs):
    with pytest.raises(Exception, match=r"RecordingFormat(Error|Exception)|uncompressed_size"):
        spark.read.format("a0").load(bombs["zstd"]).count()


def test_a_chunk_claiming_more_than_its_codec_can_give_is_refused_before_decompressing(tmp_path):
    path = str(tmp_path / "claim.mcap")
    data = lz4.frame.compress(b"x" * 1000)
    header = _record(0x01, _string("") + _string("a0py"))
    usize = len(data) * 256 + 1  # an lz4 byte gives at most 255 bytes
    chunk = struct.pack("<QQQI", 1, 2, usize, 0) + _string("lz4") + struct.pack("<Q", len(data)) + data
    with open(path, "wb") as f:
        f.write(MAGIC + header + _record(0x06, chunk))
    with pytest.raises(RecordingFormatError, match=r"claim\.mcap: at byte \d+: chunk record: uncompressed_size"):
        read_layout(path)


# -- files with no record yet ---------------------------------------------------


def _damaged_dir(tmp_path):
    """A directory: one good segment and three with no record yet."""
    d = tmp_path / "rec"
    d.mkdir()
    good = str(d / "a0py_00000.mcap")
    exp = write_segment(good, {"a": 120})
    with open(good, "rb") as f:
        full = f.read()
    (d / "a0py_00001.mcap").write_bytes(b"")
    (d / "a0py_00002.mcap").write_bytes(MAGIC[:5])
    (d / "a0py_00003.mcap").write_bytes(full[:len(MAGIC) + 12])  # inside the header record
    return d, exp


def test_an_empty_or_headerless_file_alone_is_an_empty_recording_error(tmp_path):
    d, _ = _damaged_dir(tmp_path)
    for name in ("a0py_00001.mcap", "a0py_00002.mcap", "a0py_00003.mcap"):
        with pytest.raises(EmptyRecordingError, match=name):
            read_layout(str(d / name))
    other = tmp_path / "x.mcap"
    other.write_bytes(b"\x89MCAQ")  # not a prefix of the magic: not MCAP, not skipped
    with pytest.raises(RecordingFormatError, match="not an MCAP") as e:
        read_layout(str(other))
    assert not isinstance(e.value, EmptyRecordingError)


def test_bag_info_skips_and_counts_files_with_no_record(tmp_path):
    d, exp = _damaged_dir(tmp_path)
    info = bag_info(str(d))
    assert [os.path.basename(f["path"]) for f in info["files"]] == ["a0py_00000.mcap"]
    assert sorted(os.path.basename(p) for p in info["empty_files"]) == [
        "a0py_00001.mcap", "a0py_00002.mcap", "a0py_00003.mcap"]
    assert info["frames"] == len(exp.frames)
    r = subprocess.run([sys.executable, "-m", "a0py", "bag", "info", str(d)], env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Skipped:" in r.stdout and "3 file(s)" in r.stdout
    assert "a0py_00001.mcap" in r.stderr  # the warning


def test_spark_and_the_arrow_reader_skip_files_with_no_record(tmp_path, spark):
    d, exp = _damaged_dir(tmp_path)
    assert table_frames(read_table(str(d))).keys() == exp.frames.keys()
    assert spark.read.format("a0").load(str(d)).count() == len(exp.frames)


def test_play_skips_and_counts_files_with_no_record(tmp_path, root):
    d, exp = _damaged_dir(tmp_path)
    sub = a0py.SubscriberSync("a", init="oldest")
    p = Player(str(d), rate=0)
    p.run()
    assert p.stats.frames == len(exp.frames) and p.stats.empty_files == 3
    got = 0
    while sub.can_read():
        sub.read()
        got += 1
    assert got == len(exp.frames)


def test_the_view_of_a_directory_skips_files_with_no_record(tmp_path):
    d, _ = _damaged_dir(tmp_path)
    src = RecordingSource.open(str(d))
    try:
        assert [os.path.basename(f) for f in src.files] == ["a0py_00000.mcap"]
    finally:
        src.close()


def test_record_resume_skips_a_segment_with_no_record(tmp_path, root):
    out = tmp_path / "rec"
    out.mkdir(mode=0o700)
    write_segment(str(out / "a0py_00000.mcap"), {"k": 50})
    (out / "a0py_00001.mcap").write_bytes(b"")  # killed before its header was flushed
    pub = a0py.Publisher("k")
    for i in range(1, 81):
        pub.pub(f"k:{i}".encode())
    r = subprocess.run([sys.executable, "-m", "a0py", "record", "k", "--out", str(out), "--resume",
                        "--duration", "1.5"], env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "a0py_00001.mcap" in r.stderr and "no record yet" in r.stderr
    assert os.path.exists(out / "a0py_00002.mcap")
    seqs = sorted(s for (t, s) in table_frames(read_table(str(out))) if t == "k")
    assert seqs == list(range(1, 81))  # 1..50 recorded before, 51..80 resumed: none twice


# -- absurd lengths and times -------------------------------------------------


@pytest.mark.parametrize("length", [(1 << 64) - 1, 1 << 41])
def test_an_absurd_header_length_is_a_format_error_everywhere(tmp_path, length, root):
    path = str(tmp_path / "h.mcap")
    write_segment(path, {"a": 30})
    with open(path, "r+b") as f:
        f.seek(len(MAGIC) + 1)
        f.write(struct.pack("<Q", length))
    pattern = r"h\.mcap: at byte 9: header record: body length"
    with pytest.raises(RecordingFormatError, match=pattern):
        read_layout(path)
    with pytest.raises(RecordingFormatError, match=pattern):
        bag_info(path)
    with pytest.raises(RecordingFormatError, match=pattern):
        read_table(path)
    with pytest.raises(RecordingFormatError, match=pattern):
        Player(path, rate=0).run()
    with pytest.raises(ViewError, match=pattern):
        RecordingSource.open(path)


def test_a_chunk_time_past_int64_is_a_format_error(tmp_path):
    full = str(tmp_path / "full.mcap")
    write_segment(full, {"a": 400}, compression="none", chunk_bytes=4096)
    lay = read_layout(full)
    short = cut(full, str(tmp_path / "t.mcap"), lay.chunks[-1].offset + 5)  # no summary: planned by a scan
    at = lay.chunks[1].offset + 9 + 8  # the end time of the second chunk
    with open(short, "r+b") as f:
        f.seek(at)
        f.write(struct.pack("<Q", 1 << 63))
    pattern = rf"t\.mcap: at byte {lay.chunks[1].offset + 9}: chunk record: time {1 << 63}"
    with pytest.raises(RecordingFormatError, match=pattern):
        read_layout(short)
    with pytest.raises(ViewError, match=pattern):
        RecordingSource.open(short)
    with pytest.raises(RecordingFormatError, match=pattern):
        bag_info(short)


def test_a_malformed_chunk_ranges_entry_is_ignored_not_a_crash():
    """The a0py.chunks metadata with items of the wrong arity: the chunk
    ranges are ignored (every chunk is read), as for unreadable ones."""
    from a0py.recording.format import chunk_ranges
    from a0py.recording.reader import Layout

    lay = Layout(path="x", size=0, metadata=[("a0py.chunks", {"100": "1:2", "200": "1:2:3:4:5"})])
    assert chunk_ranges(lay) == {}
    lay = Layout(path="x", size=0, metadata=[("a0py.chunks", {"x": "1:2:3:4:5"})])
    assert chunk_ranges(lay) == {}
    lay = Layout(path="x", size=0, metadata=[("a0py.chunks", {"100": "1:2:3:4:5;7:1:1:1:1"})])
    assert chunk_ranges(lay) == {100: [(1, 2, 3, 4, 5), (7, 1, 1, 1, 1)]}
