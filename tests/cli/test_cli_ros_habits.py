"""What ROS users type works: ``pub -r/-t/--once``, ``hz -w``, ``bw -w``,
``echo --field PATH`` and ``a0py topic list|echo|pub|hz|bw|info``, each run as
the ``a0py`` script in subprocesses."""

import json
import re

import pytest
from helpers.cli import Running, a0, assert_fails_cleanly, python
from helpers.procs import wait_until

import a0py
from a0py.proto import topic as tp

# A publisher in another process: argv[1] topic, argv[2] rate (Hz); runs until killed.
PUBLISHER = """
import sys, time, a0py
pub = a0py.Publisher(sys.argv[1])
while True:
    pub.pub(b"x" * 16)
    time.sleep(1 / float(sys.argv[2]))
"""

POSE = {"pose": {"position": {"x": 1.5, "y": -2}}, "name": "r1", "points": [{"x": 1}, {"x": 2}],
        "tags": ["a", "b"], "ok": True}


def payloads(topic):
    with a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST) as sub:
        out = []
        while (pkt := sub.read()) is not None:
            out.append(bytes(pkt.payload))
    return out


# -- pub


def test_pub_short_rate_and_times_options(root):
    result = a0("pub", "chatter", "tick", "-r", "50", "-t", "3", "-v")
    assert result.returncode == 0, result.err
    assert result.out.splitlines() == ["1", "2", "3"]
    assert payloads("chatter") == [b"tick"] * 3


def test_pub_once_publishes_one_packet_even_with_a_rate(root):
    assert a0("pub", "chatter", "one", "--once").returncode == 0
    assert a0("pub", "chatter", "two", "--once", "-r", "10").returncode == 0  # ends on its own
    assert payloads("chatter") == [b"one", b"two"]


@pytest.mark.parametrize("args, needle", [
    (["--once", "--times", "3"], "--once is --times 1"),
    (["--once", "--lines"], "leave out --lines"),
])
def test_pub_once_with_conflicting_options_is_a_usage_error(root, args, needle):
    data = "-" if "--lines" in args else "x"
    assert_fails_cleanly(a0("pub", "t", data, *args), 2, needle)
    assert tp.list_topics(root) == {}


# -- hz and bw


def test_hz_and_bw_take_w_for_the_window(root):
    with python(PUBLISHER, "imu", "100"):
        wait_until(lambda: tp.Topic("imu").exists("pubsub"), what="topic imu")
        hz = a0("hz", "imu", "-w", "5", "--duration", "2.5")
        bw = a0("bw", "imu", "-w", "3", "--duration", "2.5")
    assert hz.returncode == 0, hz.err
    windows = re.findall(r"window (\d+)$", hz.out, re.M)
    assert windows and windows[-1] == "5", hz.out  # the last 5 packets, not the default 10000
    assert bw.returncode == 0, bw.err
    assert re.search(r"from 3 packets  mean 16 B", bw.out), bw.out
    assert_fails_cleanly(a0("hz", "imu", "-w", "1"), 2, "'-w' / '--window'")


# -- echo --field


def publish_pose(times=1):
    assert a0("pub", "robot/pose", json.dumps(POSE), "--json", "-t", str(times)).returncode == 0


@pytest.mark.parametrize("path, shown", [
    ("pose.position.x", "1.5"),
    ("pose.position", '{"x": 1.5, "y": -2}'),
    ("points[1].x", "2"),
    ("points.0.x", "1"),
    ("tags[-1]", "b"),
    ("name", "r1"),
    ("ok", "true"),
])
def test_echo_field_prints_one_field_of_each_json_payload(root, path, shown):
    publish_pose()
    result = a0("echo", "robot/pose", "--init", "oldest", "--once", "--field", path)
    assert (result.returncode, result.out, result.err) == (0, shown + "\n", "")


def test_echo_field_with_json_prints_strings_as_json_and_verbose_shows_the_packet(root):
    publish_pose()
    assert a0("echo", "robot/pose", "--init", "oldest", "--once", "--field", "name", "--json").out == '"r1"\n'
    verbose = a0("echo", "robot/pose", "--init", "oldest", "--once", "--field", "pose.position.x", "-v")
    assert verbose.out.startswith("seq: 1\n") and "payload: 1.5\n---\n" in verbose.out


def test_echo_field_reports_packets_without_the_field_or_not_json_and_goes_on(root):
    publish_pose()
    a0("pub", "robot/pose", "not json")
    a0("pub", "robot/pose", '{"pose": 3}', "--json")
    publish_pose()
    result = a0("echo", "robot/pose", "--init", "oldest", "-n", "4", "--field", "pose.position.x")
    assert result.returncode == 0, result.err
    assert result.out.splitlines() == ["1.5", "1.5"]
    assert "topic 'robot/pose': packet seq 2 is not JSON" in result.err
    assert ("topic 'robot/pose': packet seq 3 has no field 'pose.position.x': member 'position' "
            "asked of a number at 'pose'") in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("args, needle", [
    (["--field", "a..b"], "is not a field path"),
    (["--field", "a[x]"], "is not a field path"),
    (["--field", ""], "give a field path"),
    (["--field", "a", "--hex"], "leave out --hex and --raw"),
])
def test_echo_bad_field_is_a_usage_error(root, args, needle):
    assert_fails_cleanly(a0("echo", "t", *args), 2, needle)
    assert tp.list_topics(root) == {}


# -- a0py topic ...


def test_topic_group_runs_the_commands_under_ros_names(root):
    assert a0("topic", "pub", "chatter", "hi", "--once").returncode == 0
    assert a0("topic", "list", "-q").out == "chatter\n"
    assert a0("topic", "echo", "chatter", "--init", "oldest", "--once").out == "hi\n"
    info = a0("topic", "info", "chatter")
    assert info.returncode == 0 and re.search(r"^pubsub .*1 packet", info.out, re.M), info.out
    hz = a0("topic", "hz", "chatter", "--duration", "1.2")
    assert hz.returncode == 0 and "no packets yet" in hz.out, (hz.out, hz.err)
    bw = a0("topic", "bw", "chatter", "--duration", "1.2")
    assert bw.returncode == 0, bw.err
    helped = a0("topic", "--help")
    for name in ("list", "echo", "pub", "hz", "bw", "info"):
        assert re.search(rf"^  {name} ", helped.out, re.M), helped.out
    assert_fails_cleanly(a0("topic", "nosuch"), 2, "No such command 'nosuch'")


def test_topic_echo_waits_for_the_topic_like_echo(root):
    with Running.a0py("topic", "echo", "later", "--once") as echo:
        assert "waiting for" in echo.stderr_line()
        assert not tp.Topic("later").exists("pubsub")
        with Running.a0py("topic", "pub", "later", "now", "-r", "20"):
            status, out, err = echo.finish()
    assert (status, out) == (0, "now\n"), err
