"""The ``a0py`` command line, driven as a user drives it: real processes
running the installed ``a0py`` script and ``python -m a0py``, checking what
they print and their exit status. The arenas they touch are checked with
the library."""

import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers.cli import SCRIPT, assert_fails_cleanly, on_terminal

import a0py

ENTRY_POINTS = {"script": [str(SCRIPT)], "module": [sys.executable, "-m", "a0py"]}


@pytest.fixture(params=sorted(ENTRY_POINTS))
def entry(request):
    """Each way to start the command line: the console script and ``-m``."""
    if request.param == "script" and not SCRIPT.exists():
        pytest.fail(f"console script {SCRIPT} is not installed: install a0py (`make test` does)")
    return ENTRY_POINTS[request.param]


def a0(*args, entry=ENTRY_POINTS["script"], input=None, cwd=None):
    """Run the command line to completion (bounded); returns the result with
    text stdout/stderr."""
    if entry is ENTRY_POINTS["script"] and not SCRIPT.exists():
        pytest.fail(f"console script {SCRIPT} is not installed: install a0py (`make test` does)")
    done = subprocess.run([*entry, *args], input=input, capture_output=True, timeout=120, cwd=cwd)
    done.out = done.stdout.decode()
    done.err = done.stderr.decode()
    return done


def frames_in(name):
    with a0py.Arena.shm(name) as arena:
        return a0py.Transport(arena).read_many()


def make_arena(name, *frames, size=1 << 16):
    with a0py.Arena.shm(name, size=size) as arena:
        transport = a0py.Transport(arena)
        for frame in frames:
            transport.write(frame)


# -- both entry points


def test_help_lists_every_command(entry):
    result = a0("--help", entry=entry)
    assert result.returncode == 0, result.err
    for command in ("info", "dump", "write", "tail", "rm"):
        assert f"  {command} " in result.out
    prog = "python -m a0py" if "-m" in entry else "a0py"
    assert result.out.startswith(f"Usage: {prog} ")


def test_version_is_the_package_version(entry):
    result = a0("--version", entry=entry)
    assert result.returncode == 0
    assert result.out.strip() == f"a0py, version {a0py.__version__}"


def test_write_dump_info_round_trip_on_shared_memory(entry, shm_name):
    wrote = a0("write", "--shm", shm_name, "--size", "64K", "hello", "wörld", entry=entry)
    assert wrote.returncode == 0, wrote.err
    assert wrote.out.split() == ["1", "2"]
    assert frames_in(shm_name) == [(1, b"hello"), (2, "wörld".encode())]

    dumped = a0("dump", "--shm", shm_name, entry=entry)
    assert dumped.returncode == 0, dumped.err
    lines = dumped.out.splitlines()
    assert [line.split(None, 3) for line in lines] == [["1", "5", "B", "hello"], ["2", "6", "B", "wörld"]]

    info = a0("info", "--shm", shm_name, entry=entry)
    assert info.returncode == 0, info.err
    fields = dict(line.split(None, 1) for line in info.out.splitlines())
    assert fields["arena"] == f"shm /{shm_name}"
    assert fields["size"].startswith("65536 bytes")
    assert fields["frames"] == "seq 1..2 (2 live)"


def test_missing_arena_names_it_and_says_how_to_create_it(entry, shm_name):
    for command in ("info", "dump", "tail"):
        result = a0(command, "--shm", shm_name, entry=entry)
        assert_fails_cleanly(result, 1, f"'{shm_name}' does not exist", f"a0py write --shm {shm_name} --size")


# -- write


def test_write_hex_stores_the_bytes(shm_name):
    result = a0("write", "--shm", shm_name, "--size", "64K", "--hex", "00ff10", "de ad")
    assert result.returncode == 0, result.err
    assert frames_in(shm_name) == [(1, b"\x00\xff\x10"), (2, b"\xde\xad")]
    assert a0("dump", "--shm", shm_name, "--hex").out.splitlines()[0].split(None, 3)[3] == "00 ff 10"


@pytest.mark.parametrize("bad", ["zz", "0", "00f", "0x00"])
def test_write_hex_rejects_what_is_not_hex_and_writes_nothing(shm_name, bad):
    result = a0("write", "--shm", shm_name, "--size", "64K", "--hex", "00", bad)
    assert_fails_cleanly(result, 2, f"'{bad}' is not hex", "pairs of hex digits")
    with pytest.raises(a0py.ArenaNotFoundError):  # checked before anything was created
        a0py.Arena.shm(shm_name)


def test_write_dash_reads_standard_input_as_one_frame(shm_name):
    data = b"\x00binary\nwith newlines\n\xff"
    result = a0("write", "--shm", shm_name, "--size", "64K", "first", "-", input=data)
    assert result.returncode == 0, result.err
    assert frames_in(shm_name) == [(1, b"first"), (2, data)]


def test_write_dash_with_hex_decodes_standard_input(shm_name):
    result = a0("write", "--shm", shm_name, "--size", "64K", "--hex", "-", input=b"00 ff\n10\n")
    assert result.returncode == 0, result.err
    assert frames_in(shm_name) == [(1, b"\x00\xff\x10")]


def test_write_dash_twice_is_a_usage_error(shm_name):
    result = a0("write", "--shm", shm_name, "--size", "64K", "-", "-", input=b"x")
    assert_fails_cleanly(result, 2, "'-' (standard input) can be given once")


def test_write_to_missing_arena_says_to_pass_size(shm_name):
    result = a0("write", "--shm", shm_name, "hello")
    assert_fails_cleanly(result, 1, f"shared memory arena '{shm_name}' does not exist", "--size")


def test_write_accepts_sizes_with_units(shm_name):
    assert a0("write", "--shm", shm_name, "--size", "1M", "x").returncode == 0
    with a0py.Arena.shm(shm_name) as arena:
        assert arena.size == 1 << 20


def test_write_rejects_a_size_it_cannot_read(shm_name):
    assert_fails_cleanly(a0("write", "--shm", shm_name, "--size", "12Q", "x"), 2, "'12Q' is not a size")


def test_write_too_small_size_names_the_arena(shm_name):
    assert_fails_cleanly(a0("write", "--shm", shm_name, "--size", "10", "x"), 1, f"'{shm_name}'", "at least")


def test_frame_larger_than_the_arena_says_to_use_a_larger_one(shm_name):
    make_arena(shm_name, size=4096)
    result = a0("write", "--shm", shm_name, "y" * 5000)
    assert_fails_cleanly(result, 1, shm_name, "larger arena", f"a0py rm --shm {shm_name}")
    assert frames_in(shm_name) == []


# -- dump and info


def test_dump_negative_count_is_a_clear_usage_error(shm_name):
    make_arena(shm_name, b"a")
    result = a0("dump", "--shm", shm_name, "-n", "-1")
    assert_fails_cleanly(result, 2, "'-n'", "-1")
    assert "max_frames" not in result.err


def test_dump_n_prints_the_oldest_n(shm_name):
    make_arena(shm_name, b"a", b"b", b"c")
    assert [line.split()[0] for line in a0("dump", "--shm", shm_name, "-n", "2").out.splitlines()] == ["1", "2"]
    assert a0("dump", "--shm", shm_name, "-n", "0").out == ""


def test_dump_keeps_one_line_per_frame_whatever_the_bytes(shm_name):
    make_arena(shm_name, b"a\nb\x1b[31m\tc", b"\xff\xfe" + b"z" * 100)
    lines = a0("dump", "--shm", shm_name).out.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(r"a\nb\x1b[31m\tc")
    assert lines[1].split(None, 3)[3].startswith(r"\xff\xfezzz") and lines[1].endswith(" …")


def test_dump_of_an_empty_arena_prints_no_frames_and_says_so(shm_name):
    make_arena(shm_name)
    result = a0("dump", "--shm", shm_name)
    assert result.returncode == 0
    assert result.out == ""
    assert f"'{shm_name}' is empty" in result.err


def test_info_on_an_empty_arena_says_it_is_empty(shm_name):
    make_arena(shm_name)
    result = a0("info", "--shm", shm_name)
    assert result.returncode == 0, result.err
    assert "1..0" not in result.out
    fields = dict(line.split(None, 1) for line in result.out.splitlines())
    assert fields["frames"] == "none (empty; the next frame gets seq 1)"


def test_info_on_a_terminal_prints_the_same_fields(shm_name):
    make_arena(shm_name, b"a")
    text = on_terminal("info", "--shm", shm_name)
    for field in ("arena", "size", "format", "frames", "used", "notify", "deadman"):
        assert field in text
    assert "seq 1..1 (1 live)" in text


def test_file_arena_commands_and_not_an_arena(tmp_path):
    path = tmp_path / "frames.a0"
    assert a0("write", "--file", str(path), "--size", "64K", "on disk").out.split() == ["1"]
    assert a0("dump", "--file", str(path)).out.split(None, 3)[3].strip() == "on disk"
    stray = tmp_path / "notes.txt"
    stray.write_text("just text, not an arena\n" * 100)
    assert_fails_cleanly(a0("info", "--file", str(stray)), 1, str(stray))


def test_creating_a_file_arena_in_a_missing_directory_says_so(tmp_path):
    path = tmp_path / "no such dir" / "frames.a0"
    result = a0("write", "--file", str(path), "--size", "4K", "x")
    assert_fails_cleanly(result, 1, str(path), f"is there a directory '{path.parent}'")


def test_an_empty_frame_is_a_line_without_trailing_blanks(shm_name):
    make_arena(shm_name, b"", b"b")
    assert a0("dump", "--shm", shm_name).out.splitlines() == ["         1         0 B", "         2         1 B  b"]


def test_an_arena_must_be_named_once(shm_name, tmp_path):
    assert_fails_cleanly(a0("info"), 2, "--shm NAME or --file PATH")
    assert_fails_cleanly(a0("info", "--shm", shm_name, "--file", str(tmp_path / "x")), 2, "--shm NAME or --file PATH")


def test_output_into_a_closed_pipe_stops_quietly(shm_name):
    with a0py.Arena.shm(shm_name, size=4 << 20) as arena:
        a0py.Transport(arena).write_many(b"frame number %d" % i for i in range(20_000))
    with subprocess.Popen([str(SCRIPT), "dump", "--shm", shm_name], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout.readline().split()[0] == b"1"
        proc.stdout.close()  # as `| head -1` does
        status = proc.wait(timeout=60)
        err = proc.stderr.read().decode()
    assert status == 1
    assert "Traceback" not in err and "Exception ignored" not in err


# -- tail


def _wait_for_waiter(name, deadline_s=60):
    with a0py.Arena.shm(name) as arena:
        deadline = time.monotonic() + deadline_s
        while arena.header()["waiters"] == 0:
            assert time.monotonic() < deadline, "tail never started waiting"
            time.sleep(0.01)


def test_tail_prints_only_new_frames_and_ctrl_c_ends_it_cleanly(shm_name):
    make_arena(shm_name, b"old")
    proc = subprocess.Popen([str(SCRIPT), "tail", "--shm", shm_name], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    guard = threading.Timer(120, proc.kill)  # bounds the blocking reads below
    guard.start()
    try:
        _wait_for_waiter(shm_name)
        with a0py.Arena.shm(shm_name) as arena:
            a0py.Transport(arena).write(b"new one")
            a0py.Transport(arena).write(b"\x00\x01")
        first, second = proc.stdout.readline().decode(), proc.stdout.readline().decode()
        assert first.split(None, 3) == ["2", "7", "B", "new one\n"]
        assert second.split()[:3] == ["3", "2", "B"] and second.rstrip().endswith(r"\x00\x01")
        _wait_for_waiter(shm_name)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == b""
        assert b"Traceback" not in proc.stderr.read()
    finally:
        guard.cancel()
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_tail_timeout_ends_after_idle_seconds(shm_name):
    make_arena(shm_name, b"old")
    started = time.monotonic()
    result = a0("tail", "--shm", shm_name, "--timeout", "0.3", "--hex")
    assert result.returncode == 0, result.err
    assert result.out == ""
    assert time.monotonic() - started >= 0.3


# -- rm


def test_rm_removes_an_arena_and_says_when_there_is_none(shm_name):
    make_arena(shm_name, b"a")
    assert a0("rm", "--shm", shm_name).returncode == 0
    with pytest.raises(a0py.ArenaNotFoundError):
        a0py.Arena.shm(shm_name)
    assert_fails_cleanly(a0("rm", "--shm", shm_name), 1, f"'{shm_name}' does not exist")
    assert a0("rm", "--force", "--shm", shm_name).returncode == 0


def test_rm_refuses_what_is_not_an_arena_unless_forced(tmp_path):
    stray = tmp_path / "notes.txt"
    stray.write_text("not an arena\n" * 100)
    assert_fails_cleanly(a0("rm", "--file", str(stray)), 1, str(stray), "not removed", "--force")
    assert stray.exists()
    assert a0("rm", "-f", "--file", str(stray)).returncode == 0
    assert not stray.exists()


def test_rm_file_arena(tmp_path):
    path = tmp_path / "frames.a0"
    assert a0("write", "--file", str(path), "--size", "4K", "x").returncode == 0
    assert a0("rm", "--file", str(path)).returncode == 0
    assert not path.exists()

