"""``a0py cfg TOPIC [get|set|patch|watch]`` driven as a user drives it; the
configuration is checked with a0py.Cfg and changed by other processes."""

import json

from helpers.cli import Running, a0, assert_fails_cleanly, python

import a0py
from a0py.proto import topic as tp


def test_set_then_get_prints_the_document_and_values_by_pointer(root):
    assert a0("cfg", "arm", "set", '{"motor": {"speed": 1.5, "name": "ü"}, "on": true}').returncode == 0
    assert a0py.Cfg("arm").read().json() == {"motor": {"speed": 1.5, "name": "ü"}, "on": True}
    shown = a0("cfg", "arm")  # no subcommand: get
    assert shown.returncode == 0, shown.err
    assert json.loads(shown.out) == {"motor": {"speed": 1.5, "name": "ü"}, "on": True}
    assert shown.out.startswith("{\n  ")  # indented for people
    assert a0("cfg", "arm", "get", "--compact").out == '{"motor":{"speed":1.5,"name":"ü"},"on":true}\n'
    assert a0("cfg", "arm", "get", "/motor/speed").out == "1.5\n"
    assert a0("cfg", "arm", "get", "/motor/name").out == '"ü"\n'


def test_set_at_a_pointer_and_patch_change_one_part(root):
    a0py.Cfg("arm").write({"motor": {"speed": 1, "limit": 5}, "old": 1})
    assert a0("cfg", "arm", "set", "/motor/speed", "2").returncode == 0
    assert a0("cfg", "arm", "set", "/gripper/open", "true").returncode == 0  # objects made on the way
    assert a0("cfg", "arm", "patch", '{"old": null, "motor": {"limit": 9}}').returncode == 0
    assert a0py.Cfg("arm").read().json() == {"motor": {"speed": 2, "limit": 9}, "gripper": {"open": True}}


def test_set_and_patch_read_standard_input(root):
    assert a0("cfg", "arm", "set", "-", input=b'{"a": 1}').returncode == 0
    assert a0("cfg", "arm", "patch", "-", input=b'{"b": 2}').returncode == 0
    assert a0py.Cfg("arm").read().json() == {"a": 1, "b": 2}


def test_set_if_empty_writes_only_the_first_time(root):
    assert a0("cfg", "arm", "set", "--if-empty", '{"v": 1}').returncode == 0
    second = a0("cfg", "arm", "set", "--if-empty", '{"v": 2}')
    assert second.returncode == 0
    assert "topic 'arm' has a configuration already: not written" in second.err
    assert a0py.Cfg("arm").read().json() == {"v": 1}


def test_get_of_a_topic_without_configuration_says_how_to_set_one_and_creates_nothing(root):
    assert_fails_cleanly(a0("cfg", "arm"), 1, "topic 'arm' has no configuration", "a0py cfg arm set JSON")
    assert_fails_cleanly(a0("cfg", "arm", "get", "/x"), 1, "topic 'arm'", "a0py cfg arm set")
    assert tp.list_topics(root) == {}
    a0py.Cfg("arm").write({"a": 1})
    assert_fails_cleanly(a0("cfg", "arm", "get", "/b"), 1, "topic 'arm'", "no value at '/b'")


def test_a_configuration_that_is_not_json_is_an_error_naming_the_topic(root):
    with a0py.Arena.shm(tp.Topic("arm").location("cfg"), size=1 << 16) as arena:
        a0py.Transport(arena).write(a0py.Packet({}, b"not json").to_bytes())
    assert_fails_cleanly(a0("cfg", "arm"), 1, "topic 'arm'", "not JSON")


def test_bad_json_and_pointers_are_usage_errors(root):
    assert_fails_cleanly(a0("cfg", "arm", "set", "nope"), 2, "'nope' is not JSON", "strings need quotes")
    assert_fails_cleanly(a0("cfg", "arm", "patch", "{"), 2, "'{' is not JSON")
    assert_fails_cleanly(a0("cfg", "arm", "get", "motor"), 2, "bad JSON pointer 'motor'")
    assert_fails_cleanly(a0("cfg", "arm", "set", "motor", "1"), 2, "bad JSON pointer 'motor'")
    assert_fails_cleanly(a0("cfg", "arm", "set", "/a", "1", "2"), 2, "give JSON, or a POINTER and JSON")
    assert_fails_cleanly(a0("cfg", "arm", "bogus"), 2, "No such command 'bogus'")
    assert tp.list_topics(root) == {}


def test_watch_prints_the_current_version_then_each_new_one(root):
    a0py.Cfg("arm").write({"speed": 1})
    with Running.a0py("cfg", "arm", "watch", "-n", "3") as watch:
        assert watch.readline() == '{"speed":1}\n'  # the watcher is subscribed now
        assert a0("cfg", "arm", "patch", '{"speed": 2}').returncode == 0
        assert watch.readline() == '{"speed":2}\n'
        a0py.Cfg("arm").mergepatch({"mode": "fast"})  # a program's write, seen the same way
        status, out, err = watch.finish()
    assert status == 0, err
    assert out == '{"speed":2,"mode":"fast"}\n'


def test_watch_of_a_pointer_and_a_topic_that_appears_later(root):
    with Running.a0py("cfg", "arm", "watch", "/speed", "-n", "1") as watch:
        line = watch.stderr_line()
        assert "topic 'arm' does not exist yet" in line and "waiting for a configuration" in line
        assert not tp.Topic("arm").exists("cfg")
        a0py.Cfg("arm").write({"speed": 7})
        status, out, err = watch.finish()
    assert (status, out) == (0, "7\n"), err


def test_watch_ctrl_c_exits_0_and_timeout_with_n_is_an_error(root):
    a0py.Cfg("arm").write({})
    with Running.a0py("cfg", "arm", "watch") as watch:
        assert watch.readline() == "{}\n"
        status, out, err = watch.interrupt()
    assert (status, out) == (0, "") and "Traceback" not in err
    short = a0("cfg", "arm", "watch", "-n", "2", "--timeout", "0.3")
    assert (short.returncode, short.out) == (1, "{}\n")  # the current version, then the error
    assert short.err == "a0py: error: topic 'arm': no new configuration within 0.3 s (got 1 of 2)\n"


def test_patches_from_many_processes_lose_no_update(root):
    a0py.Cfg("arm").write({})
    writers = [Running.a0py("cfg", "arm", "patch", json.dumps({f"k{i}": i})) for i in range(4)]
    writers.append(python("""
        import a0py
        for i in range(20):
            a0py.Cfg("arm").mergepatch({"program": i})
    """))
    for writer in writers:
        with writer:
            status, _out, err = writer.finish()
            assert status == 0, err
    assert a0py.Cfg("arm").read().json() == {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "program": 19}
