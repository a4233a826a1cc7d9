"""The recorder, replay and the recording commands, with real processes:
several publishers recorded losslessly, eviction recorded as gaps, a
SIGKILLed recorder's segment read up to its last chunk and resumed,
rotation, compression, JSON copies, replay into live topics, and the CLI
driven as a user would."""

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers.mcap_data import table_frames, table_gaps
from helpers.procs import REPO, maps, wait_until
from mcap.reader import make_reader

import a0py
from a0py.recording import Player, Recorder, RecordingFormatError, RecordingOptionError, bag_info
from a0py.recording.reader import read_layout
from a0py.spark import read_table

pytestmark = pytest.mark.slow


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


PUBLISH = textwrap.dedent("""
    import sys, time, a0py
    topic, start, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    pub = a0py.Publisher(topic)
    for i in range(start, start + n):
        pub.pub(f"{topic}:{i}".encode(), headers={"i": str(i)})
        if gap:
            time.sleep(gap)
""")


def publish(topic, n, start=0, gap=0.0, env=None, wait=True):
    p = subprocess.Popen([sys.executable, "-c", PUBLISH, topic, str(start), str(n), str(gap)], env=env or _env())
    if wait:
        assert p.wait(timeout=120) == 0
    return p


def cli(*args, env=None, timeout=120, check=None):
    r = subprocess.run([sys.executable, "-m", "a0py.cli.recordings", *args], env=env or _env(), capture_output=True,
                       text=True, timeout=timeout)
    if check is not None:
        assert r.returncode == check, r.stderr
    return r


def start_cli_recorder(*args, env=None):
    p = subprocess.Popen([sys.executable, "-m", "a0py.cli.recordings", "record", *args], env=env or _env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()  # printed once the topics are open
    assert "recording to" in line, line + p.stderr.read()
    return p


def opened(rec):
    """Waits until the recorder `rec` (in this process) has opened every topic it names."""
    wait_until(lambda: not rec.waiting_for(), "the recorder to open its topics", state=rec.waiting_for)


def cli_opened(rec, *names):
    """Waits until the recorder process `rec` has opened the topics `names`: it drains
    them when it stops."""
    for name in names:
        wait_until(lambda n=name: maps(rec.pid, a0py.Topic(n)), f"the recorder to open {name}", every=0.01)


def frames_by_topic(table):
    out = {}
    for (topic, seq), (headers, payload, _w, _m) in table_frames(table).items():
        out.setdefault(topic, {})[seq] = (dict(headers), payload)
    return out


def test_frames_of_several_publishing_processes_are_recorded_whole(root, tmp_path):
    out = tmp_path / "rec"
    rec = Recorder(["p/a", "p/b", "p/c"], out=str(out)).start()
    assert rec.wait_ready(30)
    procs = [publish(t, 3000, wait=False) for t in ("p/a", "p/b", "p/c")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    opened(rec)  # stop() drains what they hold
    stats = rec.stop()
    assert {t: s.frames for t, s in stats.items()} == {"p/a": 3000, "p/b": 3000, "p/c": 3000}
    assert all(s.gaps == 0 for s in stats.values())
    t = read_table(str(out), gaps=True)
    assert table_gaps(t) == {}
    got = frames_by_topic(t)
    writers = set()
    for topic in ("p/a", "p/b", "p/c"):
        assert sorted(got[topic]) == list(range(1, 3001))
        for seq, (headers, payload) in got[topic].items():
            assert payload == f"{topic}:{seq - 1}".encode() and headers["i"] == str(seq - 1)
            assert headers["a0_transport_seq"] == str(seq)
        writers |= {h["a0_writer_id"] for h, _ in got[topic].values()}
    assert len(writers) == 3
    with open(rec.segments[0], "rb") as f:  # the file is complete and its CRCs hold
        assert sum(1 for _ in make_reader(f, validate_crcs=True).iter_messages()) == 9000


def test_frames_evicted_while_the_recorder_is_stopped_become_a_gap(root, tmp_path):
    out = tmp_path / "rec"
    env = _env(A0PY_ARENA_SIZE="64k")
    rec = start_cli_recorder("ev", "--out", str(out), env=env)
    try:
        os.kill(rec.pid, signal.SIGSTOP)
        publish("ev", 3000, env=env)  # a 64 KiB arena holds a few hundred of these
        os.kill(rec.pid, signal.SIGCONT)
        publish("ev", 20, start=3000, env=env)
        cli_opened(rec, "ev")
    finally:
        os.kill(rec.pid, signal.SIGCONT)
        rec.send_signal(signal.SIGINT)
        stdout, stderr = rec.communicate(timeout=60)
    assert rec.returncode == 0, stderr
    assert "gaps" in stdout
    t = read_table(str(out), gaps=True)
    frames = sorted(s for (_, s) in table_frames(t))
    gaps = table_gaps(t)
    assert gaps, "eviction must be recorded as a gap"
    covered = sorted(frames + [s for (_, first), last in gaps.items() for s in range(first, last + 1)])
    assert covered == list(range(1, 3021))  # every seq exactly once: a frame or a gap
    assert frames[-20:] == list(range(3001, 3021))
    info = bag_info(str(out))
    assert info["topics"]["ev"]["lost_frames"] == 3020 - len(frames)


def test_a_sigkilled_recorder_leaves_a_readable_segment_and_resume_continues_it(root, tmp_path):
    out = tmp_path / "rec"
    rec = start_cli_recorder("k", "--out", str(out))
    publish("k", 400, gap=0.004)
    # a chunk closes after a second: killed once one is on disk
    wait_until(lambda: frames_by_topic(read_table(str(out))).get("k"), "a chunk on disk", every=0.1)
    rec.kill()
    rec.wait(timeout=30)
    seg = out / "a0py_00000.mcap"
    layout = read_layout(str(seg))
    assert not layout.has_summary
    got = frames_by_topic(read_table(str(out)))["k"]
    assert got and sorted(got) == list(range(1, len(got) + 1))  # a prefix, no frame invented
    assert all(p == f"k:{s - 1}".encode() for s, (_, p) in got.items())
    assert not bag_info(str(out))["files"][0]["complete"]
    publish("k", 300, start=400)
    r = cli("record", "k", "--out", str(out), "--resume", "--duration", "2", check=0)
    assert "a0py_00001.mcap" in r.stdout
    t = read_table(str(out), gaps=True)
    assert table_gaps(t) == {}
    assert sorted(frames_by_topic(t)["k"]) == list(range(1, 701))


def test_segments_rotate_by_size_and_each_is_complete(root, tmp_path):
    out = tmp_path / "rec"
    rec = Recorder(["rot"], out=str(out), max_bytes=48 << 10, chunk_bytes=8 << 10, compression="lz4").start()
    rec.wait_ready(30)
    publish("rot", 3000)
    opened(rec)
    rec.stop()
    assert len(rec.segments) >= 3
    spans = []
    for path in rec.segments:
        layout = read_layout(path)
        assert layout.has_summary and {c.compression for c in layout.chunks} <= {"lz4"}
        meta = json.loads(layout.metadata_named("a0py.segment")["topic.rot"])
        if meta["frames"]:
            spans.append((meta["first_seq"], meta["last_seq"]))
    assert spans[0][0] == 1 and spans[-1][1] == 3000
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))  # contiguous across segments
    assert sorted(frames_by_topic(read_table(str(out)))["rot"]) == list(range(1, 3001))


def test_uncompressed_segments_and_the_json_copy_for_foxglove(root, tmp_path):
    out = tmp_path / "rec"
    rec = Recorder(["j"], out=str(out), compression="none", json=True).start()
    rec.wait_ready(30)
    pub = a0py.Publisher("j")
    # Schemaless JSON, which the copy is for (pub_json would make "j" a typed topic:
    # a json channel of its own, tests/recording/test_record_typed.py).
    pub.pub(b'{"x": 1.5, "y": [1, 2]}')
    pub.pub(b"not json")
    pub.pub(b'{"x": 2}')
    pub.pub(b"[1, 2]")  # JSON, but not an object: Foxglove plots objects
    opened(rec)
    rec.stop()
    pub.close()
    with open(rec.segments[0], "rb") as f:
        reader = make_reader(f, validate_crcs=True)
        assert {c.compression for c in reader.get_summary().chunk_indexes} == {""}
        seen = [(ch.topic, ch.message_encoding, sc.encoding, json.loads(m.data))
                for sc, ch, m in reader.iter_messages() if ch.message_encoding == "json"]
    assert seen == [("/a0py/json/j", "json", "jsonschema", {"x": 1.5, "y": [1, 2]}),
                    ("/a0py/json/j", "json", "jsonschema", {"x": 2})]
    assert read_table(str(out)).num_rows == 4  # the JSON copies are not frames


def test_replay_publishes_the_same_packets_at_the_original_timing(root, tmp_path):
    out = tmp_path / "rec"
    rec = Recorder(["r/a", "r/b"], out=str(out)).start()
    rec.wait_ready(30)
    procs = [publish("r/a", 20, gap=0.05, wait=False), publish("r/b", 200, wait=False)]
    for p in procs:
        assert p.wait(timeout=60) == 0
    opened(rec)
    rec.stop()
    recorded = frames_by_topic(read_table(str(out)))
    subs = {t: a0py.SubscriberSync(t, init=a0py.INIT_OLDEST) for t in ("live/a", "live/b")}
    begin = time.monotonic()
    with Player(str(out), remap=["r/a:live/a", "r/b:live/b"]) as player:
        stats = player.run()
    elapsed = time.monotonic() - begin
    assert stats.frames == 220
    span = (max(int(h["a0_time_wall"]) for h, _ in recorded["r/a"].values())
            - min(int(h["a0_time_wall"]) for h, _ in recorded["r/a"].values())) / 1e9
    assert elapsed >= 0.8 * span  # original timing: it cannot finish before the recording's span
    for live, orig in (("live/a", "r/a"), ("live/b", "r/b")):
        got = []
        while (pkt := subs[live].read()) is not None:
            got.append(pkt)
        assert len(got) == len(recorded[orig])
        for pkt, seq in zip(got, sorted(recorded[orig])):
            headers, payload = recorded[orig][seq]
            assert pkt.payload == payload and pkt.headers["i"] == headers["i"]
            assert pkt.headers["a0_replay_source"] == "a0py_00000.mcap"
            for k in ("time_mono", "time_wall", "writer_id", "writer_seq", "transport_seq"):
                assert pkt.headers[f"a0_replay_{k}"] == headers[f"a0_{k}"]
    # Only some topics, faster, from an offset into the recording.
    sub = a0py.SubscriberSync("again/a", init=a0py.INIT_OLDEST)
    with Player(str(out), topics=["r/a"], remap={"r/a": "again/a"}, rate=0, start_offset=span / 2) as player:
        stats = player.run()
    got = []
    while (pkt := sub.read()) is not None:
        got.append(int(pkt.headers["i"]))
    assert 0 < len(got) < 20 and got == list(range(20 - len(got), 20))


def test_player_and_recorder_refuse_bad_options(root, tmp_path):
    with pytest.raises(RecordingOptionError, match="nothing to record"):
        Recorder([], out=str(tmp_path / "x"))
    with pytest.raises(a0py.ArgumentError, match="bad topic name"):
        Recorder(["bad name"], out=str(tmp_path / "x"))
    with pytest.raises(RecordingOptionError, match="compression 'gzip'"):
        Recorder(["t"], out=str(tmp_path / "x"), compression="gzip")
    with pytest.raises(RecordingOptionError, match="no such file"):
        Player(str(tmp_path / "nothing"))
    with pytest.raises(RecordingOptionError, match="remap 'a-b'"):
        Player(str(tmp_path), remap=["a-b"])
    with pytest.raises(RecordingOptionError, match="rate -1"):
        Player(str(tmp_path), rate=-1)


def test_the_commands_as_a_user_runs_them(root, tmp_path):
    out = tmp_path / "rec"
    r = cli("record", "--out", str(out))
    assert r.returncode == 2 and "nothing to record" in r.stderr and "Traceback" not in r.stderr
    rec = start_cli_recorder("c/one", "c/two", "--out", str(out))
    publish("c/one", 50)
    publish("c/two", 30)
    cli_opened(rec, "c/one", "c/two")
    rec.send_signal(signal.SIGINT)
    stdout, stderr = rec.communicate(timeout=60)
    assert rec.returncode == 0, stderr
    assert "c/one: 50 frames" in stdout and "c/two: 30 frames" in stdout
    assert read_layout(str(out / "a0py_00000.mcap")).has_summary  # Ctrl-C closed it cleanly
    r = cli("record", "c/one", "--out", str(out))
    assert r.returncode == 1 and "already holds recordings" in r.stderr and "--resume" in r.stderr
    r = cli("bag", "info", str(out), check=0)
    assert "Topic: c/one | Type: a0py.Packet | Count: 50 | Serialization Format: a0py/packet | Seq: 1..50" in r.stdout
    assert "Topic: c/two | Type: a0py.Packet | Count: 30 | Serialization Format: a0py/packet | Seq: 1..30" in r.stdout
    facts = json.loads(cli("bag", "info", str(out), "--json", check=0).stdout)
    assert facts["frames"] == 80 and facts["gaps"] == 0
    sub = a0py.SubscriberSync("played/one", init=a0py.INIT_OLDEST)
    r = cli("play", str(out), "--rate", "0", "--topics", "c/one", "--remap", "c/one:played/one", check=0)
    assert "published 50 frames" in r.stdout
    got = []
    while (pkt := sub.read()) is not None:
        got.append(pkt.payload)
    assert got == [f"c/one:{i}".encode() for i in range(50)]
    bad = tmp_path / "bad.mcap"
    data = bytearray((out / "a0py_00000.mcap").read_bytes())
    data[-60] ^= 0x40  # in the summary: its CRC no longer holds
    bad.write_bytes(bytes(data))
    r = cli("bag", "info", str(bad))
    assert r.returncode == 1 and "bad.mcap" in r.stderr and "Traceback" not in r.stderr
    r = cli("play", str(tmp_path / "missing"))
    assert r.returncode == 1 and "no such file" in r.stderr
    with pytest.raises(RecordingFormatError):
        read_table(str(bad))
