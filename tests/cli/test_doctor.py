"""``a0py doctor``: one line a check, ok/warn/fail, --json, exit 1 on a failure;
each finding made real here (an arena left behind, one of another format, a
root that is a file, an endpoint nobody listens on, a private /dev/shm)."""

import json
import os
import shutil
import socket
import struct
import subprocess

import pytest
from helpers.cli import SCRIPT, _env, a0


def _findings(result):
    return {f["check"]: f for f in json.loads(result.out)}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_doctor_on_a_clean_root_passes_every_check_with_one_line_each(root):
    result = a0("doctor")
    assert result.returncode == 0, result.out + result.err
    lines = result.out.splitlines()
    checks = [line for line in lines if line[:4] in ("ok  ", "warn", "FAIL")]
    assert {line.split()[1] for line in checks} >= {"shm", "shm-shared", "root", "arenas", "formats",
                                                    "java", "chromium", "extra:record"}
    assert "FAIL" not in result.out
    assert lines[-1].endswith("0 failed, " + lines[-1].split("0 failed, ")[1])


def test_doctor_json_gives_the_same_findings(root):
    text = a0("doctor")
    data = json.loads(a0("doctor", "--json").out)
    assert all(set(f) == {"check", "status", "detail", "todo"} for f in data)
    assert all(f["status"] in ("ok", "warn", "fail") for f in data)
    assert [f["check"] for f in data] == [line.split()[1] for line in text.out.splitlines()
                                          if line[:4] in ("ok  ", "warn", "FAIL")]


def test_doctor_names_a_topic_no_running_process_has_open_and_suggests_rm(root):
    import a0py
    from a0py.proto.topic import close_arenas

    a0py.Publisher("left/behind").pub(b"x")
    close_arenas()
    found = _findings(a0("doctor", "--json"))["arenas"]
    assert found["status"] == "warn"
    assert "left/behind" in found["detail"]
    assert "a0py rm left/behind" in found["todo"]


def test_doctor_does_not_flag_a_topic_a_running_process_has_open(root):
    code = ("import a0py, sys, time; a0py.Publisher('held').pub(b'x'); print('up', flush=True); "
            "sys.stdin.read()")
    proc = subprocess.Popen([os.sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=_env())
    try:
        assert proc.stdout.readline() == b"up\n"
        found = _findings(a0("doctor", "--json"))["arenas"]
        assert found["status"] == "ok", found
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_doctor_fails_on_an_arena_of_another_format_and_names_it(root):
    prefix = root.split(":", 1)[1]
    path = f"/dev/shm/{prefix}.old.pubsub"
    from a0py import _core

    with open(path, "wb") as f:
        f.write(struct.pack("<QI", _core.MAGIC, _core.FORMAT_VERSION - 1) + bytes(4096))
    try:
        result = a0("doctor", "--json")
        assert result.returncode == 1
        found = _findings(result)["formats"]
        assert found["status"] == "fail"
        assert f"old.pubsub (format {_core.FORMAT_VERSION - 1})" in found["detail"]
        assert "a0py rm old" in found["todo"]
    finally:
        os.unlink(path)


def test_doctor_fails_on_a_root_that_is_a_file(tmp_path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("")
    monkeypatch.setenv("A0PY_ROOT", str(f))
    result = a0("doctor")
    assert result.returncode == 1
    line = next(line for line in result.out.splitlines() if line.split()[1:2] == ["root"])
    assert line.startswith("FAIL") and "not a directory" in line


def test_doctor_checks_a_zenoh_endpoint_only_when_asked(root):
    assert "zenoh" not in _findings(a0("doctor", "--json"))
    port = _free_port()
    result = a0("doctor", "--json", "--zenoh", f"tcp/127.0.0.1:{port}")
    assert result.returncode == 1
    assert "cannot connect" in _findings(result)["zenoh"]["detail"]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        ok = a0("doctor", "--json", "--zenoh", f"tcp/127.0.0.1:{server.getsockname()[1]}")
        assert _findings(ok)["zenoh"]["status"] == "ok"
    bad = _findings(a0("doctor", "--json", "--zenoh", "nonsense"))["zenoh"]
    assert bad["status"] == "fail" and "tcp/HOST:PORT" in bad["todo"]


def test_doctor_warns_when_ros2_discovery_leaves_the_host(root, monkeypatch):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
    found = _findings(a0("doctor", "--json", "--ros2"))["ros2"]
    assert found["status"] == "warn" and "LOCALHOST" in found["todo"]
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    assert _findings(a0("doctor", "--json", "--ros2"))["ros2"]["status"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare for a mount namespace")
def test_doctor_warns_when_this_process_has_a_private_dev_shm(root):
    # A container without --ipc=host: its own tmpfs on /dev/shm, in its own mount namespace;
    # this test's process, outside it, holds an arena: a process that sees other objects.
    import a0py

    a0py.Publisher("outside").pub(b"x")
    script = f"mount -t tmpfs -o size=8m tmpfs /dev/shm && exec {SCRIPT} doctor --json"
    result = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                            capture_output=True, text=True, timeout=60, env=_env())
    assert result.returncode in (0, 1), result.stderr
    found = {f["check"]: f for f in json.loads(result.stdout)}["shm-shared"]
    assert found["status"] == "warn", found
    assert "--ipc" in found["todo"]
    assert "use shared memory from another /dev/shm" in found["detail"]
