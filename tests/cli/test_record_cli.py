"""``a0py record``, ``play`` and ``bag`` as a user runs them, in real
processes: ``record`` never creates a topic (it says it waits, picks the
topic up from its first packet, leaves nothing behind for a mistyped name,
and a publisher's size request made after it started is honoured); bad
values are usage errors (exit 2) with no traceback; ``play --topics`` of a
topic the recording lacks is an error; ``--root`` works for both;
``--max-duration`` leaves no empty segment while the topics are idle."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from helpers.procs import REPO, maps, wait_until
from mcap.reader import make_reader

import a0py
from a0py.proto.topic import PUBSUB, close_arenas, list_topics, unlink_topic
from a0py.recording import Recorder
from a0py.recording.writer import SegmentWriter

RUN_S = 60
pytestmark = pytest.mark.slow


def _root_spec():
    return f"shm:a0pyrc{uuid.uuid4().hex[:10]}"


@pytest.fixture
def root(monkeypatch):
    """A root of the test's own, given with --root; A0PY_ROOT points at
    another one, so a command that ignored --root would be seen."""
    spec, decoy = _root_spec(), _root_spec()
    monkeypatch.setenv("A0PY_ROOT", decoy)
    monkeypatch.delenv("A0PY_ARENA_SIZE", raising=False)
    monkeypatch.delenv("A0PY_TOPIC_SIZES", raising=False)
    yield spec
    close_arenas()
    for where in (spec, decoy):
        for name in list_topics(where):
            unlink_topic(a0py.Topic(name, root=where))
    assert list_topics(decoy) == {}, "a command used A0PY_ROOT, not --root"


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def a0(*args, timeout=RUN_S):
    return subprocess.run([sys.executable, "-m", "a0py", *args], env=_env(), capture_output=True, text=True,
                          timeout=timeout)


class Recording:
    """``a0py record ARGS`` running; :meth:`stderr_until` reads its stderr."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "a0py", "record", *args], env=_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.seen = ""

    def stderr_until(self, word):
        deadline = time.monotonic() + RUN_S
        while word not in self.seen:
            assert time.monotonic() < deadline and self.proc.poll() is None, self.seen
            self.seen += self.proc.stderr.readline()
        return self.seen

    def opened(self, topic):
        """Waits until the recorder has opened `topic`: it records all it holds from then
        on, the frames still in the ring when it stops included."""
        wait_until(lambda: maps(self.proc.pid, topic), f"the recorder to open {topic.name}", every=0.01)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=RUN_S)
        assert self.proc.returncode == 0, self.seen + err
        return out


PUBLISH = textwrap.dedent("""
    import sys, a0py
    root, name, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    pub = a0py.Publisher(a0py.Topic(name, root=root, size=size or None))
    for i in range(n):
        pub.pub(f"{i}:".encode() + bytes(int(sys.argv[5])))
""")


def publish(root, name, n, size="", payload=0):
    """Creates ``name`` (at ``size``, if given) and publishes ``n`` packets at
    once, in another process."""
    r = subprocess.run([sys.executable, "-c", PUBLISH, root, name, str(n), size, str(payload)], env=_env(),
                       capture_output=True, text=True, timeout=RUN_S)
    assert r.returncode == 0, r.stderr


def messages(path):
    """(topic, sequence, data) of every message of the MCAP file ``path``."""
    with open(path, "rb") as f:
        return [(ch.topic, m.sequence, m.data) for _s, ch, m in make_reader(f).iter_messages()]


def segments(out):
    return sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".mcap"))


def test_record_says_it_waits_and_records_a_late_topic_from_its_first_packet(root, tmp_path):
    out = str(tmp_path / "rec")
    rec = Recording("late/t", "-o", out, "--root", root)
    line = rec.stderr_until("waiting")
    assert "late/t" in line
    assert list_topics(root) == {}  # waiting created nothing
    publish(root, "late/t", 5)  # created and written at once: nothing for the recorder to miss
    rec.opened(a0py.Topic("late/t", root=root))
    stdout = rec.stop()
    assert "late/t: 5 frames" in stdout and "0 gaps" in stdout
    got = [(t, seq, data[-8:]) for path in segments(out) for t, seq, data in messages(path) if t == "late/t"]
    assert [seq for _t, seq, _d in got] == [1, 2, 3, 4, 5]


def test_record_of_a_mistyped_topic_creates_nothing(root, tmp_path):
    out = str(tmp_path / "rec")
    r = a0("record", "chatterrr", "-o", out, "--root", root, "--duration", "0.5")
    assert r.returncode == 0, r.stderr
    assert "waiting" in r.stderr and "chatterrr" in r.stderr
    assert "chatterrr: never appeared" in r.stdout
    assert list_topics(root) == {}
    assert not a0py.Topic("chatterrr", root=root).exists(PUBSUB)


def test_a_publishers_size_request_is_honoured_after_record_started(root, tmp_path):
    out = str(tmp_path / "rec")
    rec = Recording("nu/bigcam", "-o", out, "--root", root)
    rec.stderr_until("waiting")
    # 5 MB images: more than the default 4 MiB arena holds, so a topic the
    # recorder had created would refuse them (FrameTooLargeError).
    publish(root, "nu/bigcam", 3, size="64M", payload=5_000_000)
    assert os.path.getsize("/dev/shm/" + a0py.Topic("nu/bigcam", root=root).location(PUBSUB).lstrip("/")) \
        == 64 << 20
    rec.opened(a0py.Topic("nu/bigcam", root=root))
    assert "nu/bigcam: 3 frames" in rec.stop()


def _fake_recording(out):
    os.makedirs(out)
    with open(os.path.join(out, "a0py_00000.mcap"), "wb"):
        pass


@pytest.mark.parametrize("args", [
    ["record", "bad topic", "-o", "{out}"],
    ["record", "t", "-o", "{out}", "--max-bytes", "inf"],
    ["record", "t", "-o", "{out}", "--max-bytes", "100"],
    ["record", "t", "-o", "{out}", "--max-duration", "nan"],
    ["record", "t", "-o", "{out}", "--duration", "inf"],
    ["record", "-e", "(", "-o", "{out}"],
    ["record", "-o", "{out}"],
    ["record", "t", "-o", "{out}", "--root", "shm:a/b"],
    ["play", "{out}", "--rate", "-1"],
    ["play", "{out}", "--rate", "nan"],
    ["play", "{out}", "--remap", "chatter"],
    ["play", "{out}", "--remap", "a:bad*name"],
    ["play", "{out}", "--start-offset", "nan"],
    ["play", "{out}", "--start-offset", "inf"],
    ["play", "{out}", "--topics", "bad*name"],
], ids=lambda a: " ".join(a[:1] + a[2:] if a[1] == "{out}" else a[:2] + a[3:]))
def test_bad_values_are_usage_errors(root, tmp_path, args):
    out = str(tmp_path / "rec")
    r = a0(*[a.replace("{out}", out) for a in args])
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "Error:" in r.stderr
    assert list_topics(root) == {}


def test_messages_name_the_options_not_python_parameters(root, tmp_path):
    out = str(tmp_path / "rec")
    _fake_recording(out)
    r = a0("record", "t", "-o", out, "--root", root)
    assert r.returncode == 1 and "--resume" in r.stderr and "resume=True" not in r.stderr
    r = a0("record", "-o", str(tmp_path / "other"), "--root", root)
    assert r.returncode == 2 and "--all" in r.stderr and "all=True" not in r.stderr


@pytest.fixture
def recording(root, tmp_path):
    """A recording of topic ``rec/a`` (3 packets) under ``root``."""
    out = str(tmp_path / "rec")
    rec = Recorder(["rec/a"], out=out, root=root).start()
    assert rec.wait_ready(RUN_S)
    with a0py.Publisher(a0py.Topic("rec/a", root=root)) as pub:
        for i in range(3):
            pub.pub(f"a{i}".encode())
        deadline = time.monotonic() + RUN_S
        while getattr(rec.stats().get("rec/a"), "frames", 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    rec.stop()
    unlink_topic(a0py.Topic("rec/a", root=root))
    return out


def test_play_of_topics_the_recording_lacks_is_an_error(root, recording):
    r = a0("play", recording, "--rate", "0", "--topics", "nosuch,rec/a", "--root", root)
    assert r.returncode == 1, r.stderr
    assert "'nosuch'" in r.stderr and "rec/a" not in r.stderr.split("in the recording")[0].split("nosuch")[1]
    assert "published" not in r.stdout and list_topics(root) == {}


def test_play_publishes_under_its_root(root, recording):
    r = a0("play", recording, "--rate", "0", "--root", root)
    assert r.returncode == 0, r.stderr
    assert "published 3 frames" in r.stdout
    assert list(list_topics(root)) == ["rec/a"]
    with a0py.SubscriberSync(a0py.Topic("rec/a", root=root), init=a0py.INIT_OLDEST) as sub:
        assert [bytes(sub.read().payload) for _ in range(3)] == [b"a0", b"a1", b"a2"]


def test_play_of_a_frame_that_is_not_a_packet_is_a_format_error(root, tmp_path):
    path = str(tmp_path / "odd.mcap")
    with SegmentWriter(path) as w:
        w.write_frames("odd/t", [(1, b"not a packet at all")], time.time_ns())
    r = a0("play", path, "--rate", "0", "--root", root)
    assert r.returncode == 1, r.stderr
    assert "odd.mcap" in r.stderr and "not an a0py packet" in r.stderr and "Traceback" not in r.stderr


def test_max_duration_leaves_no_empty_segment_while_idle(root, tmp_path):
    out = str(tmp_path / "rec")
    publish(root, "idle/t", 1)
    rec = Recording("idle/t", "-o", out, "--root", root, "--max-duration", "0.2")
    rec.stderr_until("recording to")
    publish(root, "idle/t", 1)
    time.sleep(1.5)  # several max-durations with nothing published
    publish(root, "idle/t", 1)
    time.sleep(0.5)  # and more max-durations after a packet: the behaviour under test
    rec.stop()
    found = segments(out)
    assert found
    for path in found:
        assert messages(path), f"{os.path.basename(path)} of {len(found)} segments is empty"


def test_play_creates_a_topic_large_enough_for_its_recorded_packets(root, tmp_path):
    out = str(tmp_path / "rec")
    rec = Recorder(["cam/big"], out=out, root=root).start()
    assert rec.wait_ready(RUN_S)
    publish(root, "cam/big", 2, size="64M", payload=5_000_000)
    deadline = time.monotonic() + RUN_S
    while getattr(rec.stats().get("cam/big"), "frames", 0) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    rec.stop()
    close_arenas()
    unlink_topic(a0py.Topic("cam/big", root=root))
    # The default 4 MiB arena would refuse these 5 MB packets (FrameTooLargeError).
    r = a0("play", out, "--rate", "0", "--root", root)
    assert r.returncode == 0, r.stderr
    assert "published 2 frames" in r.stdout and "Traceback" not in r.stderr
