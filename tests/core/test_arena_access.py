"""Who may attach to an existing arena, and the modes of what a0py creates.

A name in /dev/shm, or in a shared directory root, can be taken by anyone
before a0py gets there. An object this process did not create itself
(exclusively) is attached only if it is a regular file of the caller's uid
(root included, unless it names another ``owner=``) with no permission bit
outside the mode asked for; a symbolic link at the name is never followed.
What a0py creates is private whatever the umask: arenas and recordings
0600, directories 0700.

The cases with another user run as root (as these test machines do) and
drop to uid/gid 65534 in a forked child that plants the object; the parent
then must get ArenaPermissionError naming the path, the owner and the mode,
and the planted object (or the victim a link points at) must be untouched.
"""

import multiprocessing as mp
import os
import signal
import stat
import subprocess
import sys
import time
import traceback
import uuid

import pytest
from helpers.procs import REPO

import a0py
from a0py import Arena, ArenaPermissionError, Transport
from a0py.proto import topic as tp

CTX = mp.get_context("fork")
OTHER = 65534  # nobody
JOIN_S = 30.0

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs root")


def as_other_user(action):
    """Runs ``action()`` in a forked child that is uid and gid 65534 with umask 0;
    fails the test if it raises."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setgroups([])
            os.setgid(OTHER)
            os.setuid(OTHER)
            os.umask(0)
            action()
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0, "the other user's child failed"


def facts(path):
    """(size, uid, permission bits, content) of `path`, not following a link."""
    st = os.lstat(path)
    content = None
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            content = f.read()
    return st.st_size, st.st_uid, stat.S_IMODE(st.st_mode), content


@pytest.fixture
def prefix():
    """A shared-memory root prefix of this test's own; its objects removed after."""
    name = f"a0pysec{os.getpid()}x{uuid.uuid4().hex[:8]}"
    yield name
    tp.close_arenas()
    for entry in os.listdir("/dev/shm"):
        if entry.startswith(name + "."):
            os.unlink(os.path.join("/dev/shm", entry))


@pytest.fixture
def shared_dir(tmp_path):
    """A directory anyone may write to, sticky like /tmp (its parents are not
    reachable by the other user: it works in it through a directory fd)."""
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


def in_dir(directory, fn):
    """An action for :func:`as_other_user` that calls ``fn(dir_fd)`` on a descriptor
    of `directory` opened before the uid is dropped."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)

    def action():
        fn(fd)

    return action


def plant_empty(path, mode=0o666):
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode))


# ---------------------------------------------------------------- shared memory


@needs_root
def test_an_empty_shm_object_planted_by_another_user_is_refused_and_left_alone(prefix):
    path = f"/dev/shm/{prefix}.t.pubsub"
    as_other_user(lambda: plant_empty(path))
    for attempt in (lambda: a0py.Publisher(a0py.Topic("t", root=f"shm:{prefix}")),
                    lambda: Arena.shm(f"{prefix}.t.pubsub", 1 << 20),
                    lambda: Arena.shm(f"{prefix}.t.pubsub")):
        with pytest.raises(ArenaPermissionError) as info:
            attempt()
        message = str(info.value)
        assert path in message and "uid 65534 (nobody)" in message and "0o666" in message
        assert f"rm {path}" in message and "uid 0 (root)" in message
        assert (info.value.path, info.value.uid, info.value.mode) == (path, OTHER, 0o666)
        assert isinstance(info.value, PermissionError)
    assert facts(path) == (0, OTHER, 0o666, b"")  # never initialized, grown or chmod-ed


@needs_root
def test_a_valid_arena_of_another_user_is_refused_to_root_unless_that_owner_is_named(shm_name):
    path = "/dev/shm/" + shm_name

    def make():
        with Arena.shm(shm_name, 8192) as a:  # 0600, owned by 65534
            Transport(a).write(b"theirs")

    as_other_user(make)
    before = facts(path)
    assert before[1:3] == (OTHER, 0o600)
    with pytest.raises(ArenaPermissionError, match=r"owned by uid 65534.*pass owner=65534"):
        Arena.shm(shm_name)
    with pytest.raises(ArenaPermissionError, match="owned by uid 65534"):
        Arena.shm(shm_name, 8192)
    assert facts(path) == before  # no lock repaired, nothing written
    with Arena.shm(shm_name, owner=OTHER) as a:  # trusted on purpose
        assert Transport(a).read_many() == [(1, b"theirs")]


def test_a_symbolic_link_in_dev_shm_is_not_followed(shm_name, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    victim.chmod(0o600)
    os.symlink(victim, "/dev/shm/" + shm_name)
    with pytest.raises(ArenaPermissionError, match="is a symbolic link") as info:
        Arena.shm(shm_name, 1 << 20)
    assert info.value.path == "/dev/shm/" + shm_name and info.value.mode is None
    assert victim.read_bytes() == b"precious"


@needs_root
def test_a_link_planted_in_dev_shm_by_another_user_is_not_followed(prefix, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    victim.chmod(0o600)
    path = f"/dev/shm/{prefix}.t.pubsub"
    as_other_user(lambda: os.symlink(victim, path))
    with pytest.raises(ArenaPermissionError, match=r"symbolic link \(uid 65534"):
        a0py.Publisher(a0py.Topic("t", root=f"shm:{prefix}"))
    assert facts(victim) == (8, 0, 0o600, b"precious")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o666, 0o700])
def test_an_own_arena_with_more_access_is_refused_unless_that_mode_is_asked(shm_name, mode):
    with Arena.shm(shm_name, 8192, mode=mode) as a:
        Transport(a).write(b"x")
    path = "/dev/shm/" + shm_name
    with pytest.raises(ArenaPermissionError, match=rf"mode {mode:#o} .*more than the 0o600") as info:
        Arena.shm(shm_name)
    assert path in str(info.value) and f"chmod go= {path}" in str(info.value)
    assert info.value.mode == mode and info.value.uid == os.geteuid()
    with pytest.raises(ArenaPermissionError):
        Arena.shm(shm_name, 8192)
    with pytest.raises(ArenaPermissionError):
        Arena.open(shm=shm_name)
    with Arena.shm(shm_name, mode=mode) as a:  # the documented mode, asked for
        assert Transport(a).read_many() == [(1, b"x")]
    with Arena.open(shm=shm_name, mode=0o777) as a:  # asked for more: it grants less
        assert a.mode == mode
    assert facts(path)[1:3] == (os.geteuid(), mode)


def test_a_topic_arena_made_group_readable_is_refused_to_publishers(prefix):
    name = f"{prefix}.cam.pubsub"
    Arena.shm(name, 1 << 16, mode=0o640).close()
    with pytest.raises(ArenaPermissionError, match=r"mode 0o640"):
        a0py.Publisher(a0py.Topic("cam", root=f"shm:{prefix}"))
    with pytest.raises(ArenaPermissionError, match=r"mode 0o640"):
        a0py.SubscriberSync(a0py.Topic("cam", root=f"shm:{prefix}"))


def _attach_and_write(name, conn):
    with Arena.shm(name) as a:
        conn.send((a.mode, Transport(a).write(b"from the child")))


def test_an_own_private_arena_is_attached_as_before(shm_name):
    with Arena.shm(shm_name, 8192) as a:
        tr = Transport(a)
        tr.write(b"first")
        parent, child = CTX.Pipe()
        p = CTX.Process(target=_attach_and_write, args=(shm_name, child))
        p.start()
        assert parent.poll(JOIN_S)
        assert parent.recv() == (0o600, 2)
        p.join(JOIN_S)
        assert p.exitcode == 0
        assert tr.read_many() == [(1, b"first"), (2, b"from the child")]
    assert facts("/dev/shm/" + shm_name)[2] == 0o600
    with Arena.shm(shm_name, mode=0o400 | 0o200) as a:  # exactly 0600 is within 0600 too
        assert a.size == 8192


def test_what_is_not_a_regular_file_is_refused(shm_name, tmp_path):
    os.mkfifo("/dev/shm/" + shm_name, 0o600)
    with pytest.raises(ArenaPermissionError, match="is a FIFO"):
        Arena.shm(shm_name, 8192)
    fifo = tmp_path / "f.a0"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ArenaPermissionError, match="is a FIFO"):
        Arena.file(fifo, 8192)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_bad_owner_arguments_are_argument_errors(shm_name):
    for owner in (-1, "root", 1.0, True, 2**32):
        with pytest.raises(a0py.ArgumentError, match="owner must be a uid"):
            Arena.shm(shm_name, 8192, owner=owner)
    assert not os.path.exists("/dev/shm/" + shm_name)


# ---------------------------------------------------------------- files and directory roots


def test_a_link_at_a_directory_root_topic_is_not_followed(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    victim.chmod(0o600)
    (root / "t.pubsub.a0").symlink_to(victim)
    with pytest.raises(ArenaPermissionError, match="is a symbolic link"):
        a0py.Publisher(a0py.Topic("t", root=str(root)))
    with pytest.raises(ArenaPermissionError, match="is a symbolic link"):
        Arena.file(root / "t.pubsub.a0")
    assert facts(victim) == (0, os.geteuid(), 0o600, b"")  # not grown to 4 MiB, not written


@needs_root
def test_a_link_planted_in_a_shared_root_by_another_user_is_not_followed(shared_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    victim.chmod(0o600)
    as_other_user(in_dir(shared_dir, lambda fd: os.symlink(victim, "t.pubsub.a0", dir_fd=fd)))
    with pytest.raises(ArenaPermissionError, match=r"symbolic link \(uid 65534") as info:
        a0py.Publisher(a0py.Topic("t", root=str(shared_dir)))
    assert str(shared_dir / "t.pubsub.a0") in str(info.value)
    assert facts(victim) == (0, 0, 0o600, b"")
    tp.close_arenas()


@needs_root
def test_a_file_planted_in_a_shared_root_by_another_user_is_refused(shared_dir):
    as_other_user(in_dir(shared_dir, lambda fd: os.close(
        os.open("t.pubsub.a0", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666, dir_fd=fd))))
    path = shared_dir / "t.pubsub.a0"
    with pytest.raises(ArenaPermissionError, match=r"owned by uid 65534 \(nobody\) with mode 0o666"):
        a0py.Publisher(a0py.Topic("t", root=str(shared_dir)))
    with pytest.raises(ArenaPermissionError, match=str(path)):
        Arena.file(path, 1 << 20)
    assert facts(path) == (0, OTHER, 0o666, b"")


def test_a_link_between_the_root_and_a_topic_is_refused(tmp_path):
    root = tmp_path / "root"
    elsewhere = tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "a").symlink_to(elsewhere)
    with pytest.raises(ArenaPermissionError, match=r"root/a is a symbolic link"):
        a0py.Publisher(a0py.Topic("a/b", root=str(root)))
    with pytest.raises(ArenaPermissionError, match=r"root/a is a symbolic link"):
        tp.topic_arena(tp.Topic("a/b", root=str(root)), "pubsub", create=False)
    assert os.listdir(elsewhere) == []


@needs_root
def test_another_users_directory_below_a_shared_root_is_refused(shared_dir):
    as_other_user(in_dir(shared_dir, lambda fd: os.mkdir("a", 0o777, dir_fd=fd)))
    with pytest.raises(ArenaPermissionError, match=r"shared/a is owned by uid 65534"):
        a0py.Publisher(a0py.Topic("a/b", root=str(shared_dir)))
    assert os.listdir(shared_dir / "a") == []


def test_an_own_file_arena_with_more_access_needs_that_mode(tmp_path):
    path = tmp_path / "f.a0"
    Arena.file(path, 8192, mode=0o644).close()
    with pytest.raises(ArenaPermissionError, match=r"mode 0o644 .*more than the 0o600"):
        Arena.file(path)
    with Arena.file(path, mode=0o644) as a:
        assert a.size == 8192


# ---------------------------------------------------------------- creating at once


def _race(kind, where, size, barrier, conn):
    try:
        barrier.wait(JOIN_S)
        arena = Arena.shm(where, size) if kind == "shm" else Arena.file(where, size)
        with arena:
            conn.send(("ok", Transport(arena).write(f"{os.getpid()}".encode()), arena.mode))
    except BaseException as e:
        conn.send(("error", repr(e), None))


@pytest.mark.parametrize("kind", ["shm", "file"])
def test_processes_creating_one_arena_at_once_end_with_one_initialized_arena(kind, tmp_path):
    old = os.umask(0)  # the creator's exact mode, not the umask, is what the others check
    try:
        for round_ in range(6):
            where = (f"a0pysec-race-{os.getpid()}-{uuid.uuid4().hex[:8]}" if kind == "shm"
                     else str(tmp_path / f"race{round_}.a0"))
            n = 5
            barrier = CTX.Barrier(n)
            pipes = [CTX.Pipe() for _ in range(n)]
            procs = [CTX.Process(target=_race, args=(kind, where, 1 << 16, barrier, child))
                     for _, child in pipes]
            try:
                for p in procs:
                    p.start()
                results = []
                for parent, _ in pipes:
                    assert parent.poll(JOIN_S), "a racing creator did not answer"
                    results.append(parent.recv())
                for p in procs:
                    p.join(JOIN_S)
                assert all(r[0] == "ok" for r in results), results
                assert sorted(r[1] for r in results) == list(range(1, n + 1))  # one ring
                assert {r[2] for r in results} == {0o600}
                arena = Arena.shm(where) if kind == "shm" else Arena.file(where)
                with arena:
                    assert len(Transport(arena).read_many()) == n
            finally:
                for p in procs:
                    if p.is_alive():
                        os.kill(p.pid, signal.SIGKILL)
                if kind == "shm":
                    Arena.unlink_shm(where)
    finally:
        os.umask(old)


# ---------------------------------------------------------------- modes under umask 000


def test_topic_directories_and_arenas_are_private_under_umask_0(tmp_path, prefix):
    root = tmp_path / "not" / "yet"
    old = os.umask(0)
    try:
        pub = a0py.Publisher(a0py.Topic("a/b/c", root=str(root)))
        pub.pub(b"x")
        shm_pub = a0py.Publisher(a0py.Topic("s", root=f"shm:{prefix}"))
        shm_pub.pub(b"y")
    finally:
        os.umask(old)
    for d in (tmp_path / "not", root, root / "a", root / "a" / "b"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert stat.S_IMODE(os.stat(root / "a" / "b" / "c.pubsub.a0").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(f"/dev/shm/{prefix}.s.pubsub").st_mode) == 0o600
    tp.close_arenas()


def test_make_private_dirs_leaves_existing_directories_alone(tmp_path):
    existing = tmp_path / "open"
    existing.mkdir()
    existing.chmod(0o755)
    old = os.umask(0)
    try:
        tp.make_private_dirs(existing / "x" / "y")
        tp.make_private_dirs(existing / "x" / "y")  # exists: nothing to do
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(existing).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(existing / "x").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(existing / "x" / "y").st_mode) == 0o700
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(FileExistsError):
        tp.make_private_dirs(tmp_path / "file")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def test_recordings_and_their_directories_are_private_under_umask_0(tmp_path, prefix):
    out = tmp_path / "rec" / "day1"
    env = dict(_env(), A0PY_ROOT=f"shm:{prefix}", A0PY_ARENA_SIZE="1M")
    rec = subprocess.Popen([sys.executable, "-m", "a0py", "record", "t", "--out", str(out),
                            "--max-bytes", "4096", "--compression", "none"],
                           env=env, umask=0, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pub = a0py.Publisher(a0py.Topic("t", root=f"shm:{prefix}"))
        deadline = time.monotonic() + JOIN_S
        while len([f for f in os.listdir(out) if f.endswith(".mcap")] if out.exists() else []) < 2:
            assert time.monotonic() < deadline, "the recorder wrote no second segment"
            assert rec.poll() is None, rec.stderr.read()
            pub.pub(b"z" * 2048)
            time.sleep(0.01)
    finally:
        rec.send_signal(signal.SIGINT)
        rec.communicate(timeout=JOIN_S)
    segments = [f for f in os.listdir(out) if f.endswith(".mcap")]
    assert len(segments) >= 2
    for f in segments:
        assert stat.S_IMODE(os.stat(out / f).st_mode) == 0o600, f
    for d in (tmp_path / "rec", out):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d


# ---------------------------------------------------------------- the command line


@needs_root
def test_a0py_pub_on_a_planted_object_prints_one_error_line(prefix):
    path = f"/dev/shm/{prefix}.t.pubsub"
    as_other_user(lambda: plant_empty(path))
    env = dict(_env(), A0PY_ROOT=f"shm:{prefix}")
    r = subprocess.run([sys.executable, "-m", "a0py", "pub", "t", "secret"], env=env,
                       capture_output=True, text=True, timeout=JOIN_S)
    assert r.returncode == 1
    assert r.stderr.startswith("a0py: error: ") and "Traceback" not in r.stderr
    assert path in r.stderr and "uid 65534 (nobody)" in r.stderr and "0o666" in r.stderr
    assert "a0py rm t" in r.stderr
    assert "owner=" not in r.stderr  # a Python argument: the command line has no such option
    assert facts(path) == (0, OTHER, 0o666, b"")
    r = subprocess.run([sys.executable, "-m", "a0py", "rm", "t"], env=env, capture_output=True,
                       text=True, timeout=JOIN_S)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(path)


@needs_root
def test_record_all_skips_a_planted_topic_and_records_the_others(prefix, tmp_path):
    as_other_user(lambda: plant_empty(f"/dev/shm/{prefix}.planted.pubsub"))
    pub = a0py.Publisher(a0py.Topic("real", root=f"shm:{prefix}"))
    for i in range(3):
        pub.pub(f"{i}".encode())
    env = dict(_env(), A0PY_ROOT=f"shm:{prefix}", A0PY_ARENA_SIZE="1M")
    r = subprocess.run([sys.executable, "-m", "a0py", "record", "--all", "--from-oldest",
                        "--out", str(tmp_path / "out"), "--duration", "1.5", "--no-progress"],
                       env=env, capture_output=True, text=True, timeout=JOIN_S)
    assert r.returncode == 0, r.stderr
    assert "real: 3 frames" in r.stdout
    assert "not recording topic 'planted'" in r.stderr and "uid 65534" in r.stderr
    assert facts(f"/dev/shm/{prefix}.planted.pubsub") == (0, OTHER, 0o666, b"")
