"""Benchmark the a0py transport from Python, with its peers in the same run.

    python bench/transport.py            # full run (about 2 minutes on 2 cores)
    python bench/transport.py --quick    # smoke run (seconds)
    python bench/transport.py --json out.json --pin cross

Measures, each repeated --repeats times (medians reported):

  throughput  frames/s and ns/frame written (Transport.write; the
              non-evicting write(evict=False); `with lock()`
              + alloc + copy + commit) and read (read_next; read_many;
              read_view; zero-copy next/frame under one lock) for 64 B, 4 KiB, 1 MiB
              frames, and GB/s for 1 MiB;
  syscalls    futex/total syscalls a writer makes with nobody waiting and
              with a sleeping waiter (strace -c when installed), plus the
              arena's waiter count;
  one-way     a writer process writing as fast as it can, a reader
              process blocking like a user would (read_next, read_many,
              read_view): msgs/s and MB/s received, fraction delivered;
  ping-pong   cross-process round trips of 64-byte messages: a0py (two
              arenas, read_next(timeout=None)) at the default spin
              (adaptive) and fixed Transport.spin settings, and the peers
              of bench/peers that are installed (the same harness as
              `python -m bench.peers`). p50/p99/mean over >= 20k round
              trips a run;
  floors      the same ping-pong in C (bench/pingpong_floor.c, built with
              cc if present): a raw futex pair, and the transport's C path;
  lapped      (only with --only lapped) a reader slower than its writer:
              a writer process writing 64 KiB-1 MiB frames flat out into
              an 8 or 64 MiB arena, a reader process copying frames out
              (read_next, read_many, read_into, SubscriberSync, a callback
              Subscriber, aio_sub); its rate as a fraction of its own
              rate on frames nobody overwrites, the writer meanwhile
              writing into another arena, in the same run:

    python bench/transport.py --only lapped --repeats 3 \
        --lapped-readers read_next,sub_sync --lapped-sizes 1M --lapped-arenas 64M

This is a script, not a test: it asserts nothing about speed. The
transport's targets are printed beside the figures.
"""

import argparse
import ctypes
import itertools
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    # Run as a script from a source checkout: make `import a0py` and
    # `import bench.peers` find it (a0py is found anyway after `pip install -e .`).
    sys.path.insert(0, os.path.dirname(HERE))

import a0py
from a0py.proto.topic import parse_size
from bench.peers import PEERS, Missing, Unsupported, machine, run_pingpong, summarize
from bench.peers.a0py_transport import A0pyTransport

KiB, MiB = 1024, 1024 * 1024
FORK = mp.get_context("fork")
# The peers timed beside a0py in the ping-pong (bench/peers/<peer>.py).
PINGPONG_PEERS = ("os-pipe", "mp-pipe", "mp-queue", "pyzmq", "faster-fifo", "posix-mq", "alephzero",
                  "iceoryx2", "zenoh-shm", "zenoh")
HAS_READ_VIEW = hasattr(a0py.Transport, "read_view")  # (to bench older builds too)
SIZES = (64, 4 * KiB, 1 * MiB)
SIZE_NAMES = {64: "64 B", 4 * KiB: "4 KiB", 1 * MiB: "1 MiB"}


def unique(prefix):
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:10]}"


def median(xs):
    return statistics.median(xs)


class ShmArena:
    """A fresh shm arena, closed and unlinked on exit."""

    def __init__(self, size):
        self.name = unique("a0bench")
        self.arena = a0py.Arena.shm(self.name, size)

    def __enter__(self):
        return self.arena

    def __exit__(self, *exc):
        self.arena.close()
        a0py.Arena.unlink_shm(self.name)


def frame_span(size):
    return (32 + size + 15) // 16 * 16


# ------------------------------------------------------------ throughput


def time_write(size, n, arena_size, path):
    """ns per frame written by `path` ('write', 'alloc' or 'noevict'), n frames."""
    data = os.urandom(size)
    with ShmArena(arena_size) as arena:
        tr = a0py.Transport(arena)
        # Touch every page of the arena once, so page faults are not timed.
        for _ in range(arena_size // frame_span(size) + 1):
            tr.write(data)
        rep = itertools.repeat(None, n)
        if path == "noevict":
            # The mailbox's send: never evict. A consumer frees the room
            # between rounds (untimed), as a reader keeping up would.
            per_round = (arena_size - 512) // frame_span(size)
            write, lock, done, elapsed = tr.write, tr.lock(), 0, 0
            while done < n:
                with lock as t:
                    t.clear()
                k = min(per_round, n - done)
                t0 = time.perf_counter_ns()
                for _ in itertools.repeat(None, k):
                    write(data, False)
                elapsed += time.perf_counter_ns() - t0
                done += k
            return elapsed / n
        if path == "write":
            write = tr.write
            t0 = time.perf_counter_ns()
            for _ in rep:
                write(data)
            t1 = time.perf_counter_ns()
        else:
            lock = tr.lock()
            t0 = time.perf_counter_ns()
            for _ in rep:
                with lock as t:
                    t.alloc(size)[:] = data
                    t.commit()
            t1 = time.perf_counter_ns()
    return (t1 - t0) / n


# Frames read per lock hold by read_many and the zero-copy loop, as a reader
# draining a backlog in chunks would (holding thousands of views or copies at
# once measures the allocator, not the transport).
BATCH = 100


def time_read(size, n, arena_size, path):
    """ns per frame read by `path` ('read_next', 'read_many', 'zero_copy').

    Rounds: clear the arena and fill it (untimed), then read every frame
    (timed), until n frames have been read."""
    data = os.urandom(size)
    per_round = (arena_size - 512) // frame_span(size)
    with ShmArena(arena_size) as arena:
        writer, reader = a0py.Transport(arena), a0py.Transport(arena)
        batch = [data] * min(per_round, 1000)
        read_next, read_many, lock = reader.read_next, reader.read_many, reader.lock()
        done, elapsed = 0, 0
        while done < n:
            with writer.lock() as t:
                t.clear()
            left = per_round
            while left:
                writer.write_many(batch[:left])
                left -= min(left, len(batch))
            if path == "read_next":
                t0 = time.perf_counter_ns()
                for _ in itertools.repeat(None, per_round):
                    read_next()
                t1 = time.perf_counter_ns()
            elif path == "read_many":
                got = 0
                t0 = time.perf_counter_ns()
                while got < per_round:
                    got += len(read_many(BATCH))
                t1 = time.perf_counter_ns()
            elif path == "read_view":
                read_view = reader.read_view
                t0 = time.perf_counter_ns()
                for _ in itertools.repeat(None, per_round):
                    with read_view(0) as frame:
                        frame.data  # noqa: B018 - the zero-copy view is what is timed
                t1 = time.perf_counter_ns()
            else:
                t0 = time.perf_counter_ns()
                more = True
                while more:
                    with lock as t:
                        for _ in range(BATCH):
                            if not t.has_next():
                                more = False
                                break
                            t.next()
                            _ = t.frame().data
                t1 = time.perf_counter_ns()
            elapsed += t1 - t0
            done += per_round
    return elapsed / done


def throughput(args):
    rows = []
    q = args.quick
    plan = {
        64: {"n": 20_000 if q else 500_000, "arena": 16 * MiB},
        4 * KiB: {"n": 5_000 if q else 100_000, "arena": 16 * MiB},
        1 * MiB: {"n": 100 if q else 2_000, "arena": 16 * MiB},
    }
    for size in SIZES:
        p = plan[size]
        cases = [("write", "Transport.write", time_write),
                 ("noevict", "write(evict=False)", time_write),
                 ("alloc", "lock+alloc+copy+commit", time_write),
                 ("read_next", "read_next (copy)", time_read),
                 ("read_many", f"read_many({BATCH}) (copy)", time_read),
                 ("read_view", "read_view (zero-copy)", time_read),
                 ("zero_copy", f"lock, {BATCH}x next+frame().data", time_read)]
        for path, label, fn in cases:
            if path == "read_view" and not HAS_READ_VIEW:
                continue
            runs = [fn(size, p["n"], p["arena"], path) for _ in range(args.repeats)]
            ns = median(runs)
            rows.append({
                "size": size, "op": label, "path": path, "ns_per_frame": ns,
                "ns_runs": runs, "frames_per_s": 1e9 / ns, "gb_per_s": size / ns,
                "arena_bytes": p["arena"], "frames": p["n"],
            })
            progress(f"  {SIZE_NAMES[size]:>6} {label:<24} {ns:10.1f} ns  {1e9 / ns:12,.0f} frames/s"
                     f"  {size / ns:7.2f} GB/s")
    # 1 MiB writes into an arena that fits the 32 MiB L3 vs one that does not.
    for arena_size in (4 * MiB, 128 * MiB) if not q else ():
        runs = [time_write(MiB, 1_000, arena_size, "write") for _ in range(args.repeats)]
        ns = median(runs)
        rows.append({"size": MiB, "op": f"Transport.write, {arena_size // MiB} MiB arena",
                     "path": "write", "ns_per_frame": ns, "ns_runs": runs,
                     "frames_per_s": 1e9 / ns, "gb_per_s": MiB / ns,
                     "arena_bytes": arena_size, "frames": 1_000})
        progress(f"  1 MiB write, {arena_size // MiB:>3} MiB arena {ns:10.1f} ns  {MiB / ns:7.2f} GB/s")
    return rows


def memcpy_floor(args):
    """bytearray slice assignment of 1 MiB (a memcpy), in cache and not."""
    out = {}
    src = os.urandom(MiB)
    for label, total in (("in cache", 4 * MiB), ("cold", 256 * MiB)):
        dst = bytearray(total)
        dst[:] = b"\x01" * total  # fault the pages in
        slots = total // MiB
        n = 200 if args.quick else 2_000
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter_ns()
            for i in range(n):
                off = (i % slots) * MiB
                dst[off:off + MiB] = src
            runs.append((time.perf_counter_ns() - t0) / n)
        out[label] = MiB / median(runs)
        progress(f"  memcpy 1 MiB {label:<9} {out[label]:6.2f} GB/s")
    return out


# -------------------------------------------------------------- syscalls


WRITE_LOOP = """
import sys
sys.path[:0] = {path!r}
import a0py
tr = a0py.Transport(a0py.Arena.shm({name!r}))
before = tr.notify_count
data = bytes(64)
for _ in range({n}):
    tr.write(data)
print("notify", (tr.notify_count - before) % 2**32, "waiters", tr.waiter_count)
"""


def strace_counts(name, n):
    """(futex calls, all syscalls, writer's stdout) for n writes under strace -c."""
    code = WRITE_LOOP.format(path=sys.path[:3], name=name, n=n)
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        proc = subprocess.run(["strace", "-f", "-c", "-o", out.name, sys.executable, "-c", code],
                              check=False, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"strace failed: {proc.stderr.strip()[-300:]}")
        report = out.read()
    futex = total = 0
    for line in report.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] == "futex":
            futex = int(fields[3])
        if len(fields) >= 5 and fields[-1] == "total":
            total = int(fields[3])
    return futex, total, proc.stdout.strip()


def _sleeping_reader(name, ready):
    tr = a0py.Transport(a0py.Arena.shm(name))
    tr.spin = 0
    ready.set()
    while tr.read_next(timeout=5.0) is not None:
        pass


def syscalls(args):
    """Counts a writer's syscalls with nobody waiting and with a sleeper."""
    n = 20_000 if args.quick else 100_000
    res = {"writes": n}
    with ShmArena(16 * MiB) as arena:
        tr = a0py.Transport(arena)
        before = tr.notify_count
        t0 = time.perf_counter_ns()
        for _ in range(n):
            tr.write(b"x" * 64)
        res["ns_per_write_no_waiter"] = (time.perf_counter_ns() - t0) / n
        res["notify_delta"] = (tr.notify_count - before) % 2**32
        res["waiter_count"] = tr.waiter_count
    if not shutil.which("strace"):
        res["strace"] = "strace not installed: argued from waiter_count (0 => no FUTEX_WAKE)"
        progress(f"  {res['strace']}")
        return res
    try:
        with ShmArena(16 * MiB) as arena:
            base_futex, base_total, _ = strace_counts(arena.name, 0)
            futex, total, out = strace_counts(arena.name, n)
            res["no_waiter"] = {"futex_per_write": (futex - base_futex) / n,
                                "syscalls_per_write": (total - base_total) / n, "writer": out}
            ready = FORK.Event()
            p = FORK.Process(target=_sleeping_reader, args=(arena.name, ready), daemon=True)
            p.start()
            ready.wait(10)
            while a0py.Transport(arena).waiter_count == 0:
                time.sleep(0.001)
            futex, total, out = strace_counts(arena.name, n)
            p.join(30)
            res["sleeping_reader"] = {"futex_per_write": (futex - base_futex) / n,
                                      "syscalls_per_write": (total - base_total) / n, "writer": out}
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        res["strace"] = f"strace unusable here ({e}); argued from waiter_count"
        progress(f"  {res['strace']}")
        return res
    for key in ("no_waiter", "sleeping_reader"):
        r = res[key]
        progress(f"  {key:<16} futex/write {r['futex_per_write']:.4f}  "
                 f"syscalls/write {r['syscalls_per_write']:.4f}  ({r['writer']})")
    return res


# --------------------------------------------------------------- one-way


def _oneway_reader(name, how, go, done, conn):
    """Reads like a normal user: blocks when there is nothing to read."""
    tr = a0py.Transport(a0py.Arena.shm(name))
    got = nbytes = 0
    first = last = None
    while True:
        if how == "read_next":
            frame = tr.read_next(timeout=0.05)
            n = 0 if frame is None else len(frame[1])
            k = frame is not None
        elif how == "read_many":
            frames = tr.read_many(256)
            if not frames:
                frame = tr.read_next(timeout=0.05)
                frames = [frame] if frame else []
            k, n = len(frames), sum(len(d) for _, d in frames)
        else:  # read_view: zero-copy receive; the data is not touched
            try:
                with tr.read_view(timeout=0.05) as view:
                    n = view.size
                k = 1
            except (a0py.A0TimeoutError, a0py.FrameEvictedError):
                k = n = 0
        if k:
            last = time.perf_counter()
            first = first or last
            got += k
            nbytes += n
        elif done.is_set():
            break
    conn.send((got, nbytes, (last - first) if got > 1 else 0.0, tr.missed if hasattr(tr, "missed") else None))


def oneway_run(size, how, duration, arena_size):
    """One writer (this process) writing as fast as it can for `duration` s,
    one reader process. Returns (written, received, recv_seconds, missed)."""
    with ShmArena(arena_size) as arena:
        tr = a0py.Transport(arena)
        go, done = FORK.Event(), FORK.Event()
        here, there = FORK.Pipe()
        p = FORK.Process(target=_oneway_reader, args=(arena.name, how, go, done, there), daemon=True)
        p.start()
        data = os.urandom(size)
        write = tr.write
        written = 0
        go.set()
        time.sleep(0.05)  # let the reader block first, as a subscriber would be
        end = time.perf_counter() + duration
        while time.perf_counter() < end:
            for _ in range(64):
                write(data)
            written += 64
        done.set()
        got, _nbytes, secs, missed = here.recv()
        p.join(30)
    return written, got, secs, missed


def oneway(args):
    """msgs/s and MB/s received by another process, and the fraction delivered."""
    rows = []
    duration = 0.5 if args.quick else 2.0
    plan = [(64, "read_next"), (64, "read_many"), (4 * KiB, "read_next"), (1 * MiB, "read_next"),
            (1 * MiB, "read_view")]
    for size, how in plan:
        if how == "read_view" and not HAS_READ_VIEW:
            continue
        runs = [oneway_run(size, how, duration, 64 * MiB) for _ in range(args.repeats)]
        rate = median([got / secs for _, got, secs, _ in runs if secs])
        delivered = median([got / written for written, got, _, _ in runs])
        row = {"size": size, "reader": how, "msgs_per_s": rate, "mb_per_s": rate * size / 1e6,
               "delivered": delivered, "runs": runs, "arena_bytes": 64 * MiB, "seconds": duration}
        rows.append(row)
        progress(f"  {SIZE_NAMES[size]:>6} {how:<10} {rate:12,.0f} msgs/s  {row['mb_per_s']:9,.0f} MB/s"
                 f"  delivered {100 * delivered:5.1f} %")
    return rows


# ------------------------------------------------------------- ping-pong


def pingpong(args):
    n = 2_000 if args.quick else args.round_trips
    warmup = 200 if args.quick else 2_000
    cpus = {"none": None, "cross": (0, 1), "same": (0, 0)}[args.pin]
    if cpus and max(cpus) >= os.cpu_count():
        cpus = None
    cases = [(f"a0py spin={'default' if s is None else s}", A0pyTransport(spin=s)) for s in args.spins]
    if not args.no_peers:
        cases += [(PEERS[k].label, PEERS[k]) for k in PINGPONG_PEERS]
    # Round-robin over the cases, one run of each per repeat: the machine's
    # phases (a noisy neighbour, where the scheduler puts the two processes)
    # then fall on every case alike instead of on whichever ran at the time.
    runs = {label: [] for label, _ in cases}
    skipped = {}
    for r in range(args.repeats):
        for label, peer in cases:
            if label in skipped:
                continue
            try:
                lat = run_pingpong(peer, n, warmup, args.msg_size, cpus)
            except (Missing, Unsupported) as e:
                skipped[label] = str(e)
                progress(f"  {label:<24} skipped: {e}")
                continue
            runs[label].append(lat)
            s = summarize([lat])
            progress(f"  run {r + 1} {label:<24} p50 {s['p50_us']:7.2f} µs  p99 {s['p99_us']:7.2f} µs")
    rows = []
    for label, _ in cases:
        if label in skipped:
            rows.append({"peer": label, "skipped": skipped[label]})
        else:
            rows.append({"peer": label, "round_trips": n, **summarize(runs[label])})
    return rows


# ----------------------------------------------------------------- floors


def c_floors(args):
    """Ping-pong in C (bench/pingpong_floor.c): raw futex, and the transport
    without Python, at the same spins and placement as the Python runs."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    root = os.path.dirname(HERE)
    if not cc or not os.path.isdir(os.path.join(root, "csrc")):
        progress("  skipped: needs a C compiler and the csrc/ sources")
        return {"skipped": "needs a C compiler and csrc/"}
    cpus = {"none": (-1, -1), "cross": (0, 1), "same": (0, 0)}[args.pin]
    n = 2_000 if args.quick else args.round_trips
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "pingpong_floor")
        srcs = [os.path.join(HERE, "pingpong_floor.c")] + sorted(
            os.path.join(root, "csrc", f) for f in os.listdir(os.path.join(root, "csrc"))
            if f.endswith(".c"))
        subprocess.run([cc, "-std=gnu11", "-O2", "-D_GNU_SOURCE", "-I", os.path.join(root, "csrc"),
                        "-o", exe, *srcs, "-lpthread"], check=True)
        cases = [("C raw futex", "futex", 0)] + [(f"C transport spin={s}", "transport", s)
                                                 for s in args.spins if s is not None]
        runs = {label: [] for label, _, _ in cases}
        for _ in range(args.repeats):
            for label, mode, spin in cases:
                out = subprocess.run([exe, mode, str(n), str(spin), *map(str, cpus)], check=True,
                                     capture_output=True, text=True, timeout=300).stdout.split()
                runs[label].append([float(x) for x in out])
        for label, _, _ in cases:
            r = runs[label]
            row = {"peer": label, "round_trips": n, "p50_us": median([x[0] for x in r]),
                   "p99_us": median([x[1] for x in r]), "mean_us": median([x[2] for x in r])}
            rows.append(row)
            progress(f"  {label:<22} p50 {row['p50_us']:7.2f} µs  p99 {row['p99_us']:7.2f} µs")
    return rows


# ---------------------------------------------------------------- lapped
#
# A reader slower than its writer (DESIGN.md, "Slow readers"): a writer
# process writes frames flat out while a reader process copies frames out.
# The reader's rate is compared with its own rate on frames nobody
# overwrites (an arena filled beforehand, read again and again), measured in
# the same run while the same writer writes flat out into another arena:
# the same load on the memory, so the fraction is what being lapped costs.

LAPPED_READERS = ("read_next", "read_many", "read_into", "sub_sync", "callback", "aio_sub")
PUBSUB_READERS = ("sub_sync", "callback", "aio_sub")
LAPPED_WAIT = 0.05  # s a lapped reader with nothing to read waits before it looks again


class LappedTarget:
    """Where a flat-out writer writes: a shm arena (Transport readers) or a
    topic in a shared-memory root of its own (pub/sub readers). Picklable:
    the processes open it by name."""

    def __init__(self, pubsub, arena_size):
        self.pubsub, self.arena_size = pubsub, arena_size
        self.name = unique("a0lap")

    def topic(self):
        return a0py.Topic("lapped", root=f"shm:{self.name}", size=self.arena_size)

    def arena(self):
        """The arena, created at arena_size if it does not exist yet."""
        if self.pubsub:
            return self.topic().arena("pubsub")
        return a0py.Arena.shm(self.name, self.arena_size)

    def writer(self):
        """A function writing one frame (the arena created if need be)."""
        if self.pubsub:
            return a0py.Publisher(self.topic()).pub
        return a0py.Transport(self.arena()).write

    def fill(self, size):
        """Writes frames until the ring has wrapped; returns how many are live."""
        write, data = self.writer(), os.urandom(size)
        for _ in range(self.arena_size // size + 2):
            write(data)
        with a0py.Transport(self.arena()).lock() as t:
            return t.seq_high - t.seq_low + 1

    def remove(self):
        if not self.pubsub:
            a0py.Arena.unlink_shm(self.name)
            return
        for f in os.listdir("/dev/shm"):
            if f.startswith(self.name + "."):
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except FileNotFoundError:
                    pass


def _steady_heap():
    """Keeps the memory this process frees in its heap (glibc: no mmap per
    big allocation, no trim). On a VM that hands freed pages back to its
    host, a fresh 1 MiB costs up to milliseconds of page faults, noise that
    would bury what is measured here; both phases of a run get the same."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 * MiB)  # M_MMAP_THRESHOLD (its maximum on 64-bit)
        libc.mallopt(-1, 1 << 30)   # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: as it is


def _flat_out_writer(target, size, ready, stop, conn):
    _steady_heap()
    write, data = target.writer(), os.urandom(size)
    written = 0
    t0 = time.perf_counter()
    while not stop.is_set():
        for _ in range(8):
            write(data)
        written += 8
        if written == 64:
            ready.set()
    conn.send((written, time.perf_counter() - t0))


def _transport_reads(target, how, size, seconds, alone, n_pass):
    """Transport.read_next / read_many / read_into. Alone, a reader that has
    read every frame starts again with a fresh cursor (the oldest)."""
    arena = a0py.Arena.shm(target.name)
    tr = a0py.Transport(arena)
    out = bytearray(4 * (size + 16))
    got = missed = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        if how == "read_next":
            k = tr.read_next(timeout=0 if alone else LAPPED_WAIT) is not None
        elif how == "read_many":
            k = len(tr.read_many(16))
        else:
            k = tr.read_into(out)[0]
        if k:
            got += k
        elif alone:
            missed += tr.missed
            tr = a0py.Transport(arena)
        elif how != "read_next":
            got += tr.read_next(timeout=LAPPED_WAIT) is not None
    return got, time.perf_counter() - t0, missed + tr.missed


def _sub_sync_reads(target, how, size, seconds, alone, n_pass):
    topic, got, missed = target.topic(), 0, 0
    sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST)
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        if alone:
            if sub.read() is None:
                missed += sub.missed
                sub.close()
                sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST)
                continue
        else:
            try:
                sub.read_blocking(timeout=LAPPED_WAIT)
            except a0py.A0TimeoutError:
                continue
        got += 1
    return got, time.perf_counter() - t0, missed + sub.missed


def _callback_reads(target, how, size, seconds, alone, n_pass):
    """Subscriber(callback). Alone, a subscriber that has had every frame is
    closed and a fresh one (INIT_OLDEST) takes over."""
    import threading

    topic, got, missed = target.topic(), 0, 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        seen, full = [0], threading.Event()

        def callback(pkt, seen=seen, full=full):
            seen[0] += 1
            if alone and seen[0] == n_pass:
                full.set()

        sub = a0py.Subscriber(topic, callback, init=a0py.INIT_OLDEST)
        full.wait(max(0.0, end - time.perf_counter()))
        sub.close()
        got += seen[0]
        missed += sub.missed
        if time.perf_counter() >= end:
            return got, time.perf_counter() - t0, missed


def _aio_reads(target, how, size, seconds, alone, n_pass):
    import asyncio

    topic = target.topic()

    async def run():
        got = missed = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            sub, n = a0py.aio_sub(topic, init=a0py.INIT_OLDEST), 0
            async for _ in sub:
                n += 1
                if (alone and n == n_pass) or time.perf_counter() >= end:
                    break
            got += n
            missed += sub.missed
            await sub.aclose()
        return got, time.perf_counter() - t0, missed

    return asyncio.run(run())


LAPPED_LOOPS = {"read_next": _transport_reads, "read_many": _transport_reads,
                "read_into": _transport_reads, "sub_sync": _sub_sync_reads,
                "callback": _callback_reads, "aio_sub": _aio_reads}


def _lapped_reader(target, how, size, seconds, alone, n_pass, go, conn):
    """Runs the loop of reader `how` once `go` is set; sends (frames, wall
    seconds, missed, CPU seconds of this process, its threads included)."""
    _steady_heap()
    go.wait(30)
    cpu = time.process_time()
    got, secs, missed = LAPPED_LOOPS[how](target, how, size, seconds, alone, n_pass)
    conn.send((got, secs, missed, time.process_time() - cpu))


def lapped_run(how, size, arena_size, seconds, alone):
    """One run: the reader `how` for `seconds` against a writer writing flat
    out into its arena (alone=False) or into another one, its own filled
    beforehand (alone=True). Returns a dict of the rates."""
    pubsub = how in PUBSUB_READERS
    target = LappedTarget(pubsub, arena_size)
    load = LappedTarget(pubsub, arena_size) if alone else target
    procs = []
    try:
        keep = [target.arena()]  # both exist until the end of the run
        n_pass = target.fill(size) if alone else 0
        if alone:
            keep.append(load.arena())
        ready, stop, go = FORK.Event(), FORK.Event(), FORK.Event()
        w_here, w_there = FORK.Pipe()
        r_here, r_there = FORK.Pipe()
        procs.append(FORK.Process(target=_flat_out_writer, args=(load, size, ready, stop, w_there),
                                  daemon=True))
        procs.append(FORK.Process(target=_lapped_reader,
                                  args=(target, how, size, seconds, alone, n_pass, go, r_there),
                                  daemon=True))
        for p in procs:
            p.start()
        if not ready.wait(30):
            raise RuntimeError("the flat-out writer did not start")
        go.set()
        if not r_here.poll(seconds + 60):
            raise RuntimeError(f"the {how} reader did not report")
        got, secs, missed, cpu = r_here.recv()
        stop.set()
        written, w_secs = w_here.recv()
        for p in procs:
            p.join(30)
        del keep
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        target.remove()
        if alone:
            load.remove()
    return {"frames": got, "seconds": secs, "rate": got / secs, "missed": missed,
            "cpu_seconds": cpu, "cpu_rate": got / cpu if cpu else 0.0,
            "writer_rate": written / w_secs}


def lapped(args):
    """Each reader's rate lapped, as a fraction of its rate alone (same run)."""
    readers = args.lapped_readers.split(",")
    for how in readers:
        if how not in LAPPED_LOOPS:
            raise SystemExit(f"--lapped-readers: unknown reader {how!r} (one of {', '.join(LAPPED_READERS)})")
    sizes = [parse_size(s, "--lapped-sizes") for s in args.lapped_sizes.split(",")]
    arenas = [parse_size(s, "--lapped-arenas") for s in args.lapped_arenas.split(",")]
    seconds = args.lapped_seconds
    rows = []
    for arena_size in arenas:
        for size in sizes:
            for how in readers:
                alone_runs, lapped_runs = [], []
                for _ in range(args.repeats):  # alternating, so drifts of the machine hit both
                    alone_runs.append(lapped_run(how, size, arena_size, seconds, True))
                    lapped_runs.append(lapped_run(how, size, arena_size, seconds, False))
                alone = median([r["rate"] for r in alone_runs])
                lap = median([r["rate"] for r in lapped_runs])
                cpu_alone = median([r["cpu_rate"] for r in alone_runs])
                cpu_lap = median([r["cpu_rate"] for r in lapped_runs])
                row = {"reader": how, "size": size, "arena_bytes": arena_size, "alone": alone,
                       "lapped": lap, "fraction": lap / alone if alone else 0.0,
                       "cpu_alone": cpu_alone, "cpu_lapped": cpu_lap,
                       "cpu_fraction": cpu_lap / cpu_alone if cpu_alone else 0.0,
                       "missed_share": median([r["missed"] / max(1, r["missed"] + r["frames"])
                                               for r in lapped_runs]),
                       "writer_rate": median([r["writer_rate"] for r in lapped_runs]),
                       "alone_runs": alone_runs, "lapped_runs": lapped_runs}
                rows.append(row)
                progress(f"  {how:<9} {size // KiB:>5} KiB in {arena_size // MiB:>3} MiB: alone "
                         f"{alone:9,.0f}/s  lapped {lap:9,.0f}/s  {100 * row['fraction']:5.1f} %  "
                         f"per CPU s {100 * row['cpu_fraction']:5.1f} %  "
                         f"(missed {100 * row['missed_share']:4.1f} %, writer {row['writer_rate']:,.0f}/s)")
    return rows


# ----------------------------------------------------------------- report


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def report(res, args):
    lines = []
    m = res["machine"]
    lines.append(f"a0py transport benchmark — {m['cpus']} CPUs ({m['cpu_model']}), Python "
                 f"{m['python']}, kernel {m['kernel']}; medians of {args.repeats} runs")
    if "throughput" in res:
        lines.append("")
        lines.append(f"{'frame':>6}  {'operation':<30} {'ns/frame':>10} {'frames/s':>12} {'GB/s':>7}")
        for r in res["throughput"]:
            lines.append(f"{SIZE_NAMES[r['size']]:>6}  {r['op']:<30} {r['ns_per_frame']:10.1f} "
                         f"{r['frames_per_s']:12,.0f} {r['gb_per_s']:7.2f}")
        if "memcpy" in res:
            lines.append("  floor: memcpy 1 MiB from Python " + ", ".join(
                f"{k} {v:.1f} GB/s" for k, v in res["memcpy"].items()))
    if "syscalls" in res:
        s = res["syscalls"]
        lines.append("")
        lines.append(f"syscalls: {s['writes']} writes of 64 B, nobody waiting: waiter_count "
                     f"{s['waiter_count']}, notify bumped {s['notify_delta']}x")
        for key, label in (("no_waiter", "nobody waiting"), ("sleeping_reader", "a reader asleep")):
            if key in s:
                lines.append(f"  {label:<16} futex calls/write {s[key]['futex_per_write']:.4f}, "
                             f"all syscalls/write {s[key]['syscalls_per_write']:.4f}  (strace -c)")
        if "strace" in s:
            lines.append(f"  {s['strace']}")
    if "oneway" in res:
        lines.append("")
        lines.append("one-way, writer and reader in two processes, 64 MiB arena, reader blocking")
        lines.append(f"  {'frame':>6} {'reader':<10} {'msgs/s':>12} {'MB/s':>9} {'delivered':>9}")
        for r in res["oneway"]:
            lines.append(f"  {SIZE_NAMES[r['size']]:>6} {r['reader']:<10} {r['msgs_per_s']:12,.0f} "
                         f"{r['mb_per_s']:9,.0f} {100 * r['delivered']:8.1f}%")
    if "lapped" in res:
        lines.append("")
        lines.append(f"lapped reader: a writer process writing flat out into the reader's arena; "
                     f"'alone': the same reader on frames nobody overwrites, the writer in another "
                     f"arena; {args.lapped_seconds} s a run; 'per CPU s': the same fraction of frames "
                     f"per second of the reader's CPU time (what the rule wastes, whatever the "
                     f"scheduler gave the reader)")
        lines.append(f"  {'reader':<10} {'frame':>8} {'arena':>7} {'alone/s':>10} {'lapped/s':>10} "
                     f"{'fraction':>8} {'per CPU s':>9} {'missed':>7} {'writer/s':>10}")
        for r in res["lapped"]:
            lines.append(f"  {r['reader']:<10} {r['size'] // KiB:>4} KiB {r['arena_bytes'] // MiB:>3} MiB "
                         f"{r['alone']:10,.0f} {r['lapped']:10,.0f} {100 * r['fraction']:7.1f}% "
                         f"{100 * r['cpu_fraction']:8.1f}% {100 * r['missed_share']:6.1f}% "
                         f"{r['writer_rate']:10,.0f}")
    if "pingpong" in res:
        lines.append("")
        lines.append(f"ping-pong, {args.msg_size}-byte messages, pin={args.pin}")
        first = "default" if args.spins[0] is None else args.spins[0]
        base = next((r for r in res["pingpong"] if r["peer"].startswith("a0py") and "p50_us" in r
                     and r["peer"] == f"a0py spin={first}"), None)
        lines.append(f"  {'peer':<24} {'p50 µs':>8} {'p99 µs':>8} {'mean µs':>8}  {'p50 vs a0py':>11}")
        for r in res["pingpong"]:
            if "skipped" in r:
                lines.append(f"  {r['peer']:<24} skipped: {r['skipped']}")
                continue
            ratio = f"{r['p50_us'] / base['p50_us']:10.2f}x" if base else ""
            lines.append(f"  {r['peer']:<24} {r['p50_us']:8.2f} {r['p99_us']:8.2f} "
                         f"{r['mean_us']:8.2f}  {ratio:>11}")
    if isinstance(res.get("floors"), list):
        lines.append("")
        lines.append(f"C floors (bench/pingpong_floor.c), 64-byte messages, pin={args.pin}")
        for r in res["floors"]:
            lines.append(f"  {r['peer']:<22} p50 {r['p50_us']:7.2f} µs  p99 {r['p99_us']:7.2f} µs  "
                         f"mean {r['mean_us']:7.2f} µs")
    lines.append("")
    lines.append("targets: 64 B write <= 300 ns and read <= 300 ns; no syscall "
                 "when nobody waits; ping-pong p50 <= 12 µs; 1 MiB write >= 10 GB/s")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: few frames, 2 repeats")
    ap.add_argument("--repeats", type=int, default=None, help="runs per measurement (default 5)")
    ap.add_argument("--round-trips", type=int, default=20_000, help="timed round trips per run")
    ap.add_argument("--msg-size", type=int, default=64, help="ping-pong message bytes")
    ap.add_argument("--spins", type=lambda s: [None if x == "default" else int(x) for x in s.split(",")],
                    default=[None, 0, 2_000],
                    help="Transport.spin values for a0py ping-pong, 'default' for the build's "
                         "default (adaptive); the first is the ratio base")
    ap.add_argument("--pin", choices=("none", "cross", "same"), default="none",
                    help="ping-pong placement: scheduler's choice, one core each, both on one")
    ap.add_argument("--no-peers", action="store_true", help="ping-pong: a0py only")
    ap.add_argument("--only", default="throughput,memcpy,syscalls,oneway,pingpong,floors",
                    help="comma-separated subset of throughput,memcpy,syscalls,oneway,pingpong,floors,"
                         "lapped (lapped runs only when named)")
    ap.add_argument("--lapped-readers", default=",".join(LAPPED_READERS),
                    help=f"lapped: readers, a subset of {','.join(LAPPED_READERS)}")
    ap.add_argument("--lapped-sizes", default="64K,256K,1M", help="lapped: frame sizes")
    ap.add_argument("--lapped-arenas", default="8M,64M", help="lapped: arena sizes")
    ap.add_argument("--lapped-seconds", type=float, default=1.0, help="lapped: seconds a run")
    ap.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    only = set(args.only.split(","))
    res = {"machine": machine(), "args": vars(args), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    for key, fn in (("throughput", throughput), ("memcpy", memcpy_floor), ("syscalls", syscalls),
                    ("oneway", oneway), ("pingpong", pingpong), ("floors", c_floors),
                    ("lapped", lapped)):
        if key in only:
            progress(f"{key}:")
            res[key] = fn(args)
    text = report(res, args)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
