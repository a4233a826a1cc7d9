"""The segment writer's fast path: frames read from a transport
straight into the open chunk (``SegmentWriter.read_frames``), chunks written
by a background thread in order, and that thread's errors raised by
``close()`` and ``Recorder.stop()``, never swallowed (a real file-size
limit in a real process, no mocks)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
from helpers.mcap_data import T0, packet
from helpers.procs import REPO
from mcap.reader import make_reader

import a0py
from a0py.recording.writer import SegmentWriter


def messages(path):
    with open(path, "rb") as f:
        return [(c.topic, m.sequence, m.log_time, m.publish_time, m.data)
                for _, c, m in make_reader(f, validate_crcs=True).iter_messages()]


def test_frames_read_into_chunks_give_the_same_file_contents_as_write_frames(tmp_path):
    frames = [packet("a", s, payload=os.urandom(s * 37 % 3000))[0] for s in range(1, 400)]
    frames += [b"plain", bytes(5000)]  # not packets: publish time = log time
    arena = a0py.Arena.heap(4 << 20)
    tr = a0py.Transport(arena)
    seqs = [tr.write(f) for f in frames]
    fast = str(tmp_path / "fast.mcap")
    w = SegmentWriter(fast, chunk_bytes=16 << 10, compression="zstd")
    got, total = 0, 0
    while True:
        n, nbytes, first, last, gap_first, _, copies = w.read_frames("a", tr, T0, max_frames=50, copy=True)
        if not n:
            break
        assert copies == frames[got:got + n] and (first, last) == (seqs[got], seqs[got + n - 1])
        assert gap_first == 0
        got += n
        total += nbytes
    w.close()
    assert got == len(frames) and total == sum(map(len, frames))
    ref = str(tmp_path / "ref.mcap")
    with SegmentWriter(ref, chunk_bytes=16 << 10, compression="zstd") as r:
        r.write_frames("a", frames, T0, seqs=np.array(seqs))
    assert messages(fast) == messages(ref)  # every field of every message, CRCs checked
    arena.close()


def test_a_frame_bigger_than_a_chunk_gets_a_chunk_of_its_own(tmp_path):
    arena = a0py.Arena.heap(1 << 20)
    tr = a0py.Transport(arena)
    frames = [b"s" * 100, b"B" * 5000, b"t" * 100]
    for f in frames:
        tr.write(f)
    path = str(tmp_path / "big.mcap")
    w = SegmentWriter(path, chunk_bytes=1024, compression="none")
    while w.read_frames("a", tr, T0)[0]:
        pass
    w.flush()  # the chunks are in the file now, the segment still open
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89MCAP0\r\n"
    w.close()
    assert [m[4] for m in messages(path)] == frames
    arena.close()


FAIL = textwrap.dedent("""
    import os, resource, signal, sys
    import a0py
    from a0py.recording import Recorder, SegmentWriter
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    out, what = sys.argv[1], sys.argv[2]
    limit = 256 << 10
    if what == "writer":
        w = SegmentWriter(os.path.join(out, "w.mcap"), chunk_bytes=16 << 10, compression="none")
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            for i in range(100):
                w.write_frames("t", [os.urandom(1000) for _ in range(20)], 1, seqs=range(i * 20 + 1, i * 20 + 21))
            w.close()
        except OSError as e:
            print("raised", e.errno, flush=True)
        w.close()  # raised once: closing again is quiet
        print("closed", flush=True)
    else:
        pub = a0py.Publisher("fail/t")
        rec = Recorder(["fail/t"], out=out, chunk_bytes=16 << 10, compression="none").start()
        assert rec.wait_ready(30)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        for i in range(3000):
            pub.pub(os.urandom(1000))
        try:
            rec.stop()
            print("no error", flush=True)
        except OSError as e:
            print("raised", e.errno, flush=True)
        print("running" if rec.running else "stopped", flush=True)
""")


def run_fail(tmp_path, what):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p),
               A0PY_ROOT=f"shm:a0pywfail{os.getpid()}", A0PY_ARENA_SIZE="16M")
    r = subprocess.run([sys.executable, "-c", FAIL, str(tmp_path), what], env=env, capture_output=True,
                       text=True, timeout=120)
    if what == "recorder":
        subprocess.run([sys.executable, "-c", "import a0py; a0py.Topic('fail/t').unlink()"], env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\n")


def test_an_error_of_the_background_thread_is_raised_by_the_writer(tmp_path):
    assert run_fail(tmp_path, "writer")[:2] == ["raised 27", "closed"]  # EFBIG


def test_an_error_of_the_background_thread_is_raised_by_recorder_stop(tmp_path):
    assert run_fail(tmp_path, "recorder")[:2] == ["raised 27", "stopped"]
