"""The topic commands (``ls``, ``echo``, ``pub``, ``hz``, ``bw``, ``info``,
``rm``) driven as a user drives them: the installed ``a0py`` script in
subprocesses, publishers and subscribers in other processes, checking what
the commands print and their exit status."""

import os
import re
import signal
import time

import pytest
from helpers.cli import Running, a0, assert_fails_cleanly, on_terminal, python
from helpers.procs import wait_until

import a0py
from a0py.proto import topic as tp

# A publisher in another process: argv[1] topic, argv[2] rate (Hz), argv[3]
# payload size; runs until killed.
PUBLISHER = """
import sys, time, a0py
pub = a0py.Publisher(sys.argv[1])
period, payload = 1 / float(sys.argv[2]), b"x" * int(sys.argv[3])
start = time.monotonic()
n = 0
while True:
    pub.pub(payload)
    n += 1
    time.sleep(max(0.0, start + n * period - time.monotonic()))
"""

# A subscriber in another process that keeps the topic open and says so.
HOLDER = """
import sys, a0py
sub = a0py.SubscriberSync(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
"""


def payloads(topic):
    """The payloads of a topic's packets, oldest first (read with the library)."""
    with a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST) as sub:
        out = []
        while (pkt := sub.read()) is not None:
            out.append(bytes(pkt.payload))
    return out


def waiters(topic):
    """How many processes sleep on the topic's pubsub arena now."""
    with a0py.Arena.shm(tp.Topic(topic).location("pubsub")) as arena:
        return arena.header()["waiters"]


def wait_for_waiting_message(proc):
    line = proc.stderr_line()
    assert "waiting for" in line, line
    return line


# -- pub and echo


def test_pub_then_echo_oldest_prints_each_payload_on_a_line(root):
    assert a0("pub", "chatter", "hello").returncode == 0
    assert a0("pub", "chatter", "wörld\nwith a newline").returncode == 0
    result = a0("echo", "chatter", "--init", "oldest", "-n", "2")
    assert result.returncode == 0, result.err
    assert result.out.splitlines() == ["hello", r"wörld\nwith a newline"]


def test_echo_started_first_waits_without_creating_the_topic_then_prints_n_packets(root):
    with Running.a0py("echo", "chatter", "-n", "3") as echo:
        wait_for_waiting_message(echo)
        assert not tp.Topic("chatter").exists("pubsub")  # a reader never creates
        with Running.a0py("pub", "chatter", "tick", "--rate", "50") as publisher:
            status, out, err = echo.finish()
            assert publisher.proc.poll() is None  # still publishing: echo stopped on its own
    assert status == 0, err
    assert out.splitlines() == ["tick"] * 3
    assert "Traceback" not in err


def test_echo_default_shows_only_packets_published_after_it_started(root):
    a0("pub", "chatter", "old")
    with Running.a0py("echo", "chatter", "--once") as echo:
        wait_until(lambda: waiters("chatter") > 0, what="echo waiting on the topic")
        assert a0("pub", "chatter", "new").returncode == 0
        status, out, err = echo.finish()
    assert (status, out) == (0, "new\n"), err


def test_echo_init_recent_starts_with_the_newest_packet(root):
    for word in ("a", "b", "c"):
        a0("pub", "chatter", word)
    assert a0("echo", "chatter", "--init", "recent", "--once").out == "c\n"


def test_echo_verbose_shows_seq_id_and_headers(root):
    assert a0("pub", "chatter", "payload", "-H", "unit=mm", "-H", "frame=base").returncode == 0
    result = a0("echo", "chatter", "--init", "oldest", "--once", "-v")
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "seq: 1"
    assert re.fullmatch(r"id: [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", lines[1])
    assert lines[2] == "headers:"
    for header in ("a0_time_mono", "a0_time_wall", "a0_writer_id", "a0_writer_seq", "a0_transport_seq"):
        assert any(line.startswith(f"  {header}: ") for line in lines), header
    assert "  unit: mm" in lines and "  frame: base" in lines
    assert "  a0_transport_seq: 1" in lines
    assert lines[-2:] == ["payload: payload", "---"]


def test_echo_json_decodes_payloads_and_reports_those_that_are_not_json(root):
    assert a0("pub", "chatter", '{"speed": 1.5,  "name": "ü"}', "--json").returncode == 0
    a0("pub", "chatter", "not json")
    result = a0("echo", "chatter", "--init", "oldest", "-n", "2", "--json")
    assert result.returncode == 0, result.err
    assert result.out.splitlines() == ['{"speed": 1.5, "name": "ü"}']
    assert "topic 'chatter'" in result.err and "seq 2 is not JSON" in result.err


def test_pub_json_sends_the_content_type_header(root):
    a0("pub", "chatter", "[1, 2]", "--json")
    with a0py.SubscriberSync("chatter", init=a0py.INIT_OLDEST) as sub:
        pkt = sub.read()
    assert pkt.json() == [1, 2]
    assert pkt.headers["content-type"] == "application/json"


def test_binary_payloads_round_trip_through_stdin_and_raw(root):
    data = bytes(range(256)) * 4
    assert a0("pub", "blob", "-", input=data).returncode == 0
    result = a0("echo", "blob", "--init", "oldest", "--once", "--raw")
    assert result.returncode == 0
    assert result.stdout == data
    hexed = a0("echo", "blob", "--init", "oldest", "--once", "--hex").out
    assert hexed.startswith("00 01 02 03") and bytes.fromhex(hexed) == data


def test_pub_hex_lines_and_times(root):
    assert a0("pub", "t", "00ff", "--hex", "--times", "3").returncode == 0
    assert payloads("t") == [b"\x00\xff"] * 3
    assert a0("pub", "t", "-", "--lines", input=b"one\ntwo\r\n\nthree").returncode == 0
    assert payloads("t")[3:] == [b"one", b"two", b"", b"three"]


def test_pub_rate_with_times_prints_each_seq_with_verbose(root):
    result = a0("pub", "t", "x", "--rate", "200", "--times", "5", "-v")
    assert result.returncode == 0, result.err
    assert result.out.split() == ["1", "2", "3", "4", "5"]


def test_pub_rate_runs_until_ctrl_c_and_exits_0(root):
    with Running.a0py("pub", "t", "x", "--rate", "100") as publisher:
        wait_until(lambda: tp.Topic("t").exists("pubsub") and len(payloads("t")) >= 3,
                   what="a few packets")
        status, out, err = publisher.interrupt()
    assert out == ""
    assert status == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize("args, needle", [
    (["{nope", "--json"], "'{nope' is not JSON"),
    (["0g", "--hex"], "'0g' is not hex"),
    (["x", "-H", "novalue"], "give KEY=VALUE"),
    (["x", "-H", "a0_writer_id=me"], "headers starting with 'a0_' are a0py's own"),
    (["x", "--lines"], "give DATA as -"),
    (["x", "--rate", "0"], "--rate"),
])
def test_pub_bad_arguments_are_usage_errors_and_create_nothing(root, args, needle):
    assert_fails_cleanly(a0("pub", "t", *args), 2, needle)
    assert tp.list_topics(root) == {}


def test_pub_of_a_packet_larger_than_the_topic_says_what_to_do(root):
    assert a0("pub", "big", "small", "--size", "64K").returncode == 0
    result = a0("pub", "big", "-", input=b"z" * 100_000)
    assert_fails_cleanly(result, 1, "topic 'big'", "does not fit", "a0py rm big", "--size")


def test_bad_topic_names_are_usage_errors(root):
    for command in (["echo", "bad name"], ["pub", "a//b", "x"], ["hz", "ok", "a b"], ["info", ".hidden"]):
        result = a0(*command)
        assert_fails_cleanly(result, 2, "topic name")


def test_echo_timeout_ends_quietly_but_is_an_error_when_n_packets_were_wanted(root):
    a0("pub", "t", "old")
    quiet = a0("echo", "t", "--timeout", "0.3")
    assert (quiet.returncode, quiet.out) == (0, ""), quiet.err
    assert_fails_cleanly(a0("echo", "t", "-n", "2", "--timeout", "0.3"), 1,
                         "topic 't'", "no packet within 0.3 s (got 0 of 2)", "a0py info t")
    assert_fails_cleanly(a0("echo", "never", "--once", "--timeout", "0.2"), 1,
                         "topic 'never'", "did not appear within 0.2 s", "a0py ls")
    assert not tp.Topic("never").exists("pubsub")


def test_echo_ctrl_c_exits_0_without_a_traceback(root):
    a0("pub", "t", "x")
    with Running.a0py("echo", "t") as echo:
        wait_until(lambda: waiters("t") > 0, what="echo waiting on the topic")
        status, out, err = echo.interrupt()
    assert status == 0 and out == ""
    assert "Traceback" not in err


def test_echo_reports_packets_evicted_before_it_read_them(root):
    a0("pub", "fast", "first", "--size", "64K")
    with Running.a0py("echo", "fast", "--timeout", "2") as echo:
        wait_until(lambda: waiters("fast") > 0, what="echo waiting on the topic")
        echo.proc.send_signal(signal.SIGSTOP)  # a slow reader
        try:
            with a0py.Publisher("fast") as pub:
                for i in range(400):  # ~400 KiB through a 64 KiB arena
                    pub.pub(b"%04d" % i + b"." * 1000)
        finally:
            echo.proc.send_signal(signal.SIGCONT)
        status, out, err = echo.finish()
    assert status == 0, err
    shown = out.splitlines()
    assert 0 < len(shown) < 400
    assert shown[-1].startswith("0399")
    missed = re.findall(r"topic 'fast'.*: (\d+) packets missed before seq \d+", err)
    assert missed, err
    assert sum(map(int, missed)) + len(shown) == 400  # every packet shown or counted


# -- hz and bw


def test_hz_reports_a_plausible_rate_for_a_100_hz_publisher(root):
    with python(PUBLISHER, "imu", "100", "16"):
        result = a0("hz", "imu", "--duration", "3.5")
    assert result.returncode == 0, result.err
    rates = [float(r) for r in re.findall(r"^([\d.]+) Hz  min ", result.out, re.MULTILINE)]
    assert rates, result.out
    assert 50 < rates[-1] < 200, result.out
    assert re.search(r"window \d+$", result.out.splitlines()[-1])


def test_hz_of_several_topics_names_each_and_waits_for_missing_ones(root):
    with python(PUBLISHER, "a", "50", "8"):
        wait_until(lambda: tp.Topic("a").exists("pubsub"), what="topic a")
        result = a0("hz", "a", "later", "--duration", "2.5")
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert any(re.fullmatch(r"a      [\d.]+ Hz  min .*", line) for line in lines), lines
    assert "later  waiting for the topic to be created" in lines
    assert "topic 'later' does not exist yet" in result.err
    assert not tp.Topic("later").exists("pubsub")


def test_hz_says_when_no_new_packets_came(root):
    a0("pub", "quiet", "x", "--times", "3")
    result = a0("hz", "quiet", "--duration", "1.5")
    assert result.returncode == 0, result.err
    assert result.out.splitlines()[0] == "no packets yet"


def test_bw_reports_payload_sizes_and_a_plausible_bandwidth(root):
    with python(PUBLISHER, "cam", "100", "1000"):
        result = a0("bw", "cam", "--duration", "3.5")
    assert result.returncode == 0, result.err
    last = result.out.splitlines()[-1]
    match = re.fullmatch(r"([\d.]+) KiB/s from (\d+) packets  mean 1000 B  min 1000 B  max 1000 B", last)
    assert match, result.out
    assert 40 < float(match.group(1)) < 250  # 100 Hz x 1000 B is about 98 KiB/s


# -- ls, info, rm


def test_ls_lists_topics_with_protocols_packets_and_processes(root):
    a0("pub", "cam/left", "x", "--times", "3")
    a0py.Cfg("arm").write({"speed": 1})
    with python(HOLDER, "cam/left") as holder:
        assert holder.readline() == "ready\n"
        result = a0("ls")
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["TOPIC", "PROTOCOLS", "SIZE", "PACKETS", "NEWEST", "PROCESSES"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"arm", "cam/left"}
    assert rows["cam/left"][1] == "pubsub" and rows["cam/left"][4] == "3"
    assert rows["cam/left"][-1] == "1"  # the holder; this test's own mapping is not another process
    assert rows["arm"][1] == "cfg" and rows["arm"][4] == "-"
    assert a0("ls", "-q").out.splitlines() == ["arm", "cam/left"]


def test_ls_with_no_topics_says_so(root):
    result = a0("ls")
    assert (result.returncode, result.out) == (0, "")
    assert f"no topics under {root}" in result.err


def test_root_option_and_directory_roots(tmp_path):
    where = str(tmp_path / "topics")
    assert a0("pub", "--root", where, "a/b", "on disk").returncode == 0
    assert (tmp_path / "topics" / "a" / "b.pubsub.a0").exists()
    assert a0("ls", "--root", where, "-q").out == "a/b\n"
    assert a0("echo", "--root", where, "a/b", "--init", "oldest", "--once").out == "on disk\n"
    assert a0("rm", "--root", where, "a/b").returncode == 0
    assert not (tmp_path / "topics" / "a" / "b.pubsub.a0").exists()
    assert_fails_cleanly(a0("ls", "--root", "shm:bad/prefix"), 2, "bad shared-memory root")


def test_info_shows_arenas_packets_writers_and_processes(root):
    a0("pub", "cam", "one")
    a0("pub", "cam", "two")
    a0py.Cfg("cam").write({})
    with python(HOLDER, "cam") as holder:
        assert holder.readline() == "ready\n"
        result = a0("info", "cam")
        pid = holder.proc.pid
    assert result.returncode == 0, result.err
    fields = {}
    for line in result.out.splitlines():
        name, _, value = line.partition("  ")
        fields.setdefault(name.strip() or "+", []).append(value.strip())
    assert fields["topic"] == ["cam"] and fields["root"] == [root]
    assert "2 packets (seq 1..2)" in fields["pubsub"][0]
    assert fields["newest"][0].startswith("seq 2 at ")
    assert fields["writers"] == ["2 in the ring"]  # two `a0py pub` runs, one writer id each
    assert "1 frame (seq 1..1)" in fields["cfg"][0]
    processes = fields["processes"] + fields.get("+", [])
    assert any(p.startswith(f"{pid} python") and p.endswith("(pubsub)") for p in processes), processes
    assert any(p.startswith(f"{os.getpid()} ") and p.endswith("(cfg)") for p in processes), processes


def test_info_topic_or_arena(root):
    assert_fails_cleanly(a0("info", "nosuch"), 1, "topic 'nosuch' does not exist", "a0py ls")
    assert_fails_cleanly(a0("info"), 2, "name a topic", "--shm NAME or --file PATH")
    assert_fails_cleanly(a0("info", "t", "--shm", "x"), 2, "not both")
    a0("pub", "t", "x")
    arena = tp.Topic("t").location("pubsub")
    result = a0("info", "--shm", arena)  # the raw arena view of the same arena
    assert result.returncode == 0, result.err
    assert dict(line.split(None, 1) for line in result.out.splitlines())["frames"] == "seq 1..1 (1 live)"


def test_rm_removes_every_protocol_of_a_topic(root):
    a0("pub", "t", "x")
    a0py.Cfg("t").write({})
    a0("pub", "other", "y")
    result = a0("rm", "t", "-v")
    assert result.returncode == 0, result.err
    assert result.out == "t (pubsub, cfg)\n"
    assert tp.list_topics(root) == {"other": ["pubsub"]}
    assert_fails_cleanly(a0("rm", "t"), 1, "topic 't' does not exist", "a0py ls")
    assert a0("rm", "-f", "t").returncode == 0


def test_rm_all_removes_every_topic_of_the_root_only(root):
    for name in ("a", "b/c"):
        a0("pub", name, "x")
    assert a0("rm", "--all").returncode == 0
    assert tp.list_topics(root) == {}
    assert_fails_cleanly(a0("rm"), 2, "name the topics to remove, or --all")
    assert_fails_cleanly(a0("rm", "a", "--all"), 2, "name the topics to remove, or --all")


def test_rm_of_a_topic_in_use_warns_that_its_processes_keep_it(root):
    a0("pub", "t", "x")
    with python(HOLDER, "t") as holder:
        assert holder.readline() == "ready\n"
        result = a0("rm", "t")
        pid = holder.proc.pid
    assert result.returncode == 0
    assert f"topic 't' is still open in process {pid}" in result.err
    assert not tp.Topic("t").exists("pubsub")


def test_rm_of_a_raw_arena_still_works(root):
    name = f"a0py-clit-raw-{time.monotonic_ns()}"
    with a0py.Arena.shm(name, size=1 << 16):
        pass
    assert a0("rm", "--shm", name).returncode == 0
    with pytest.raises(a0py.ArenaNotFoundError):
        a0py.Arena.shm(name)
    assert_fails_cleanly(a0("rm", "t", "--shm", name), 2, "not both")


# An arena actor in another process: argv[1] its name; runs until killed.
ACTOR = """
import sys
from a0py.actor import ActorSystem
system = ActorSystem()
system.spawn(lambda message: None, name=sys.argv[1], arena=True)
print("ready", flush=True)
sys.stdin.read()
"""


def mailbox_rows(out):
    """``ls --all``'s mailbox table as {mailbox: row}."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["MAILBOX"])
    assert lines[start].split() == ["MAILBOX", "SIZE", "QUEUED", "ACTOR", "PROCESSES"]
    return {line.split()[0]: line.split() for line in lines[start + 1:]}


def test_actor_mailboxes_are_no_topics_and_ls_all_shows_them_apart(root):
    from a0py.actor import ArenaRef, list_mailboxes, unlink_mailbox
    from a0py.actor.arena import arena_name

    # Lowercase letters and digits: a name that, under the default root's prefix, would
    # parse as a protocol of a topic (the mailboxes' name must keep them out of it).
    name = f"lsactor{os.getpid()}{time.monotonic_ns() % 10**6}"
    try:
        a0("pub", "imu", "x")
        with python(ACTOR, name) as actor:
            assert actor.readline() == "ready\n"
            pid = actor.proc.pid
            assert name in list_mailboxes()
            for spec in ("shm:a0py", root, "shm:a0py-actor"):
                assert not any(name in t or name in ps for t, ps in tp.list_topics(spec).items()), spec
            plain = a0("ls")
            assert plain.returncode == 0, plain.err
            assert name not in plain.out and "MAILBOX" not in plain.out
            assert name not in a0("ls", "--root", "shm:a0py").out
            assert a0("ls", "--all", "-q").out == "imu\n"

            every = a0("ls", "--all")
            assert every.returncode == 0, every.err
            assert every.out.splitlines()[0].split()[0] == "TOPIC" and "imu" in every.out
            row = mailbox_rows(every.out)[name]
            assert row[1:4] == ["1", "MiB", "0"] and row[4:6] == ["pid", str(pid)]
            assert int(row[6]) >= 1   # the actor's process has it mapped

            assert a0("rm", "--all").returncode == 0      # the root's topics, not the mailbox
            assert tp.list_topics(root) == {}
            assert ArenaRef(name).is_alive()
            actor.proc.kill()
            actor.proc.wait()
        wait_until(lambda: not ArenaRef(name).is_alive(), "the killed actor's deadman to be free")
        left = a0("ls", "--all")
        assert left.returncode == 0, left.err
        assert f"no topics under {root}" in left.err
        assert mailbox_rows(left.out)[name][4:6] == ["not", "running"]
        assert a0("rm", "--shm", arena_name(name)).returncode == 0
        assert name not in list_mailboxes()
        assert name not in a0("ls", "--all").out
    finally:
        unlink_mailbox(name)   # whatever failed above, leave nothing in /dev/shm


# -- the command table


def test_help_lists_every_command_of_the_table(root):
    from a0py.cli import COMMANDS

    result = a0("--help")
    assert result.returncode == 0, result.err
    listed = [line.split()[0] for line in result.out.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    assert listed == list(COMMANDS)
    for command in COMMANDS:  # each command's module loads and has help
        assert a0(command, "--help").returncode == 0, command


def test_ls_on_a_terminal_is_a_table_with_the_same_columns(root):
    a0("pub", "cam", "x")
    text = on_terminal("ls")
    for column in ("TOPIC", "PROTOCOLS", "SIZE", "PACKETS", "NEWEST", "PROCESSES", "cam", "pubsub", "4 MiB"):
        assert column in text, text


def test_echo_into_a_closed_pipe_stops_quietly(root):
    with a0py.Publisher("t") as pub:
        for i in range(2000):
            pub.pub(b"packet %d" % i)
    with Running.a0py("echo", "t", "--init", "oldest") as echo:
        assert echo.readline() == "packet 0\n"
        echo.proc.stdout.close()  # as `| head -1` does
        status = echo.wait()
        err = echo.proc.stderr.read().decode()
    assert status == 1
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_command_whose_module_cannot_load_leaves_the_others_working(monkeypatch, capsys):
    from a0py.cli import COMMANDS, main

    monkeypatch.setitem(COMMANDS, "replay", ("no_such_group_module", "replay", None))
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert re.search(r"replay\s+\(unavailable: No module named 'a0py\.cli\.no_such_group_module'\)", listed)
    assert "  echo " in listed
    assert main(["replay", "a", "--flag"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("a0py: error: `a0py replay` is unavailable: it cannot load (No module named")
