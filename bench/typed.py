"""Typed topics against the floors they are held to, in the same run.

    python bench/typed.py             # about a minute on 2 cores
    python bench/typed.py --quick     # seconds
    python bench/typed.py --json out.json
    python bench/typed.py --loop view --count 20000   # one small-array loop, for valgrind/perf

Workloads (medians of --repeats runs, the variants interleaved within a repeat):

  image    a 1920x1080x3 uint8 frame at 30 Hz from a publisher process to a subscriber
           process (this one) that reads it as a numpy view (``read_view`` +
           ``pkt.array()``, one pixel checked): CPU time per frame of the publisher's
           ``pub(ndarray)`` and of the subscriber's whole loop (waiting included),
           against one ``memcpy`` of the frame (``np.copyto``, CPU time) measured here
           in the same run, into the next slot of a shared 64 MiB ring as a
           publisher's copy is ("x memcpy"), and hot in cache between two private
           buffers ("x hot"); and iceoryx2 publish-subscribe of
           the same bytes (a loaned sample filled with one memmove, read in place
           through a numpy view), when it is installed (the ``bench`` extra). "x
           paced": against one memcpy made as the publisher makes its copy (a
           process of its own, paced at 30 Hz, alternating frames: the source no
           longer in cache). Means per frame, medians over the repeats; "p99":
           the 99th percentile of a frame's CPU time (publisher's pub, and the
           subscriber's wait and read), median over the repeats.
  small    a 4 KiB array, one process, CPU ns per message: raw ``pub(bytes)`` +
           ``read()`` (one copy out) vs ``pub(ndarray)`` + ``read_view`` +
           ``pkt.array()`` (no copy out) vs ``pub(ndarray)`` + ``read().array()``,
           in interleaved blocks; "x raw" is the median of each block's ratio to
           the raw block beside it.

``--loop MODE --count N`` runs only N iterations of one small-array loop (``raw``,
``view``, ``copy``, as in ``small``) and prints nothing: for counting instructions,
which a loaded machine does not change (``valgrind --tool=callgrind --trace-children=yes``,
the run with ``--count 0`` subtracted, divided by N; docs/performance.md).

A script, not a test: it asserts nothing about speed. The targets: image CPU per frame
(publisher + subscriber) at most 1.5x one memcpy of the frame; small typed at most 1.5x
raw.
"""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))

import numpy as np

import a0py
from a0py.proto import topic as tp

CTX = mp.get_context("fork")
SHAPE = (1080, 1920, 3)
RATE_HZ = 30.0
JOIN_S = 60.0


def fresh_topic(kind, size=None):
    return tp.Topic(f"bench/typed/{kind}/{uuid.uuid4().hex[:8]}", size=size)


def drop_topic(topic):
    tp.unlink_topic(topic)
    for protocol in tp.PROTOCOLS:
        tp.forget_arena(topic, protocol)


def frames():
    """Two frames to alternate (so no frame is sent twice in a row), made once."""
    rng = np.random.default_rng(7)
    return [rng.integers(0, 255, SHAPE, dtype=np.uint8) for _ in range(2)]


def paced(n, rate):
    start = time.monotonic()
    for k in range(n):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield k


# ------------------------------------------------------------ image: a0py


def _cpu(side, per_frame):
    """The mean and the 99th percentile of CPU ns per frame."""
    ordered = sorted(per_frame)
    return {f"{side}_ns": statistics.fmean(ordered),
            f"{side}_p99_ns": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]}


# Both publishers first write through their whole ring (or sample pool) untimed, so
# that neither pays first-touch page faults (≈1,500 a frame) in the timed part.
WARM_FRAMES = 16


def _a0py_image_publisher(topic, n, ready, conn):
    pub = a0py.Publisher(topic, like=np.zeros(SHAPE, np.uint8))
    images = frames()
    for k in range(WARM_FRAMES):
        pub.pub(images[k % 2])
    conn.send("warm")
    ready.wait(JOIN_S)
    cpu = []
    for k in paced(n, RATE_HZ):
        image = images[k % 2]
        image[540, 960, 0] = k % 256
        t0 = time.process_time_ns()
        pub.pub(image)
        cpu.append(time.process_time_ns() - t0)
    conn.send(cpu)


def image_a0py(n):
    topic = fresh_topic("image", size=64 << 20)
    parent, child = CTX.Pipe()
    ready = CTX.Event()
    a0py.SubscriberSync(topic)  # the topic exists at 64 MiB before the publisher opens it
    proc = CTX.Process(target=_a0py_image_publisher, args=(topic, n, ready, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(JOIN_S) or parent.recv() != "warm":
            raise RuntimeError("the a0py image publisher did not start")
        sub = a0py.SubscriberSync(topic)  # from the first timed frame on
        ready.set()
        wrong = 0
        sub_cpu = []
        for k in range(n):
            t0 = time.process_time_ns()
            with sub.read_view(timeout=JOIN_S) as pkt:
                image = pkt.array()
                wrong += int(image[540, 960, 0]) != k % 256
            sub_cpu.append(time.process_time_ns() - t0)
        pub_cpu = parent.recv() if parent.poll(JOIN_S) else [float("nan")]
        proc.join(JOIN_S)
        return {**_cpu("pub", pub_cpu), **_cpu("sub", sub_cpu), "missed": sub.missed, "wrong": wrong}
    finally:
        if proc.is_alive():
            proc.kill()
        drop_topic(topic)


# ------------------------------------------------------------ image: iceoryx2


def _iox2_node(iox2, space):
    iox2.set_log_level(iox2.LogLevel.Error)
    cfg = iox2.config.default()
    cfg.global_cfg.prefix = iox2.FileName.new(space["prefix"])
    cfg.global_cfg.root_path = iox2.Path.new(space["root"])
    return (iox2.NodeBuilder.new().config(cfg).signal_handling_mode(iox2.SignalHandlingMode.Disabled)
            .create(iox2.ServiceType.Ipc))


def _iox2_ports(iox2, space, name, nbytes, publisher):
    import ctypes

    node = _iox2_node(iox2, space)
    svc = node.service_builder
    ps = (svc(iox2.ServiceName.new(name)).publish_subscribe(iox2.Slice[ctypes.c_uint8])
          .subscriber_max_buffer_size(4).history_size(0).open_or_create())
    ev = svc(iox2.ServiceName.new(name)).event().open_or_create()
    if publisher:
        ports = (ps.publisher_builder().initial_max_slice_len(nbytes).max_loaned_samples(2).create(),
                 ev.notifier_builder().create())
    else:
        ports = (ps.subscriber_builder().buffer_size(4).create(), ev.listener_builder().create())
    return {"node": node, "services": (ps, ev), "ports": ports}


def _iox2_image_publisher(space, name, n, ready, conn):
    import ctypes

    import iceoryx2 as iox2

    side = _iox2_ports(iox2, space, name, int(np.prod(SHAPE)), publisher=True)
    pub, notifier = side["ports"]
    images = frames()
    nbytes = images[0].nbytes
    for k in range(WARM_FRAMES):
        sample = pub.loan_slice_uninit(nbytes)
        ctypes.memmove(sample.payload_ptr, images[k % 2].ctypes.data, nbytes)
        sample.assume_init().send()
    conn.send("warm")
    ready.wait(JOIN_S)
    cpu = []
    for k in paced(n, RATE_HZ):
        image = images[k % 2]
        image[540, 960, 0] = k % 256
        t0 = time.process_time_ns()
        sample = pub.loan_slice_uninit(nbytes)
        ctypes.memmove(sample.payload_ptr, image.ctypes.data, nbytes)
        sample.assume_init().send()
        notifier.notify()
        cpu.append(time.process_time_ns() - t0)
    conn.send(cpu)
    for port in side["ports"]:
        port.delete()


def image_iceoryx2(n):
    try:
        import ctypes

        import iceoryx2 as iox2
    except ImportError:
        return None
    tag = uuid.uuid4().hex[:10]
    space = {"prefix": f"iox2{tag}_", "root": f"/tmp/a0bench-iox2-{tag}/"}
    name = f"a0bench/typed/{tag}"
    parent, child = CTX.Pipe()
    ready = CTX.Event()
    side = _iox2_ports(iox2, space, name, int(np.prod(SHAPE)), publisher=False)
    sub, listener = side["ports"]
    proc = CTX.Process(target=_iox2_image_publisher, args=(space, name, n, ready, child), daemon=True)
    proc.start()
    cycle = iox2.Duration.from_millis(100)
    try:
        if not parent.poll(JOIN_S) or parent.recv() != "warm":
            raise RuntimeError("the iceoryx2 image publisher did not start")
        while (stale := sub.receive()) is not None:  # the warm-up samples
            stale.delete()
        ready.set()
        wrong = got = 0
        sub_cpu = []
        deadline = time.monotonic() + JOIN_S + n / RATE_HZ
        t0 = time.process_time_ns()
        while got < n and time.monotonic() < deadline:
            sample = sub.receive()
            if sample is None:
                listener.timed_wait(cycle)
                continue
            view = np.ctypeslib.as_array((ctypes.c_uint8 * int(np.prod(SHAPE))).from_address(
                sample.payload_ptr)).reshape(SHAPE)
            wrong += int(view[540, 960, 0]) != got % 256
            del view
            sample.delete()
            got += 1
            t1 = time.process_time_ns()
            sub_cpu.append(t1 - t0)  # this frame's wait (wakeups included) and read
            t0 = t1
        pub_cpu = parent.recv() if parent.poll(JOIN_S) else [float("nan")]
        proc.join(JOIN_S)
        return {**_cpu("pub", pub_cpu), **_cpu("sub", sub_cpu or [float("nan")]), "missed": n - got,
                "wrong": wrong}
    finally:
        if proc.is_alive():
            proc.kill()
        for port in side["ports"]:
            port.delete()
        side.clear()
        shutil.rmtree(space["root"], ignore_errors=True)
        for f in os.listdir("/dev/shm"):
            if f.startswith(space["prefix"]):
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except FileNotFoundError:
                    pass


def _paced_memcpy(n, ready, conn):
    import mmap

    images = frames()
    ring = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_SHARED)
    slots = [np.frombuffer(ring, np.uint8, images[0].nbytes, k * images[0].nbytes).reshape(SHAPE)
             for k in range((64 << 20) // images[0].nbytes)]
    for k, slot in enumerate(slots + slots):
        np.copyto(slot, images[k % 2])
    conn.send("warm")
    ready.wait(JOIN_S)
    cpu = []
    for k in paced(n, RATE_HZ):
        image = images[k % 2]
        image[540, 960, 0] = k % 256
        t0 = time.process_time_ns()
        np.copyto(slots[k % len(slots)], image)
        cpu.append(time.process_time_ns() - t0)
    conn.send(cpu)


def paced_memcpy_ns(n):
    """CPU ns of one memcpy of a frame made as the publisher makes its copy: in a
    forked process, at 30 Hz (sleeping between frames, so the source frame is no
    longer in cache and the core may have slowed), alternating two frames into the
    next slot of a 64 MiB shared ring written through first."""
    parent, child = CTX.Pipe()
    ready = CTX.Event()
    proc = CTX.Process(target=_paced_memcpy, args=(n, ready, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(JOIN_S) or parent.recv() != "warm":
            raise RuntimeError("the memcpy process did not start")
        ready.set()
        if not parent.poll(JOIN_S + n / RATE_HZ):
            raise RuntimeError("the memcpy process did not answer")
        cpu = parent.recv()
        proc.join(JOIN_S)
        return statistics.fmean(cpu)
    finally:
        if proc.is_alive():
            proc.kill()


def memcpy_ns(repeats=30):
    """CPU ns of one memcpy of a frame: (hot) between two private buffers, both in
    cache; (ring) into the next slot of a 64 MiB shared mapping written through
    before, as a publisher's ring is (the destination is not in cache, and shared
    memory has no transparent huge pages)."""
    import mmap

    src = frames()[0]
    dst = np.empty_like(src)
    np.copyto(dst, src)
    ring = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_SHARED)
    slots = [np.frombuffer(ring, np.uint8, src.nbytes, k * src.nbytes).reshape(SHAPE)
             for k in range((64 << 20) // src.nbytes)]
    for slot in slots:
        np.copyto(slot, src)
    hot, cold = [], []
    for k in range(repeats):
        t0 = time.process_time_ns()
        np.copyto(dst, src)
        t1 = time.process_time_ns()
        np.copyto(slots[k % len(slots)], src)
        cold.append(time.process_time_ns() - t1)
        hot.append(t1 - t0)
    del slots  # the mapping goes with the last view of it
    return {"hot": statistics.median(hot), "ring": statistics.median(cold)}


# ------------------------------------------------------------ small arrays, one process


SMALL_BLOCKS = 10


def small(n, blocks=SMALL_BLOCKS):
    """CPU ns per message of the three small-array loops, `n` messages each, run
    in `blocks` interleaved blocks (the order rotating): the median block of each,
    and ``<name>_x_raw``, the median of its ratios to the raw block next to it
    (on a loaded machine the blocks of one moment share its load)."""
    # 4 MiB rings (about 950 frames): the untimed first pass writes through them.
    topic_raw, topic_typed = fresh_topic("raw", size=4 << 20), fresh_topic("typed", size=4 << 20)
    try:
        raw_pub, typed_pub = a0py.Publisher(topic_raw), a0py.Publisher(topic_typed)
        raw_sub, typed_sub = a0py.SubscriberSync(topic_raw), a0py.SubscriberSync(topic_typed)
        array = np.arange(512, dtype=np.float64)  # 4 KiB
        data = array.tobytes()
        per = max(1, n // blocks)

        def raw(count):
            for _ in range(count):
                raw_pub.pub(data)
                _ = raw_sub.read().payload

        def typed_view(count):
            for _ in range(count):
                typed_pub.pub(array)
                with typed_sub.read_view(0) as pkt:
                    pkt.array()[0]

        def typed_copy(count):
            for _ in range(count):
                typed_pub.pub(array)
                typed_sub.read().array()[0]

        loops = (raw, typed_view, typed_copy)
        for fn in loops:
            fn(max(per, 2000))  # warm: the ring written through once, caches filled
        times = {fn.__name__: [] for fn in loops}
        ratios = {fn.__name__: [] for fn in loops[1:]}
        for b in range(blocks):
            block = {}
            for fn in loops[b % 3:] + loops[:b % 3]:
                t0 = time.process_time_ns()
                fn(per)
                block[fn.__name__] = (time.process_time_ns() - t0) / per
            for name, value in block.items():
                times[name].append(value)
                if name in ratios:
                    ratios[name].append(value / block["raw"])
        out = {name: statistics.median(values) for name, values in times.items()}
        out.update({f"{name}_x_raw": statistics.median(values) for name, values in ratios.items()})
        return out
    finally:
        drop_topic(topic_raw)
        drop_topic(topic_typed)


def loop(mode, n):
    """One small-array loop of `n` iterations (``--loop``), nothing timed."""
    topic = fresh_topic(mode, size=4 << 20)
    try:
        pub, sub = a0py.Publisher(topic), a0py.SubscriberSync(topic)
        array = np.arange(512, dtype=np.float64)
        data = array.tobytes()
        pub.pub(array)
        sub.read().array()  # the layout seen once (as after the warm-up of `small`)
        for _ in range(n):
            if mode == "raw":
                pub.pub(data)
                _ = sub.read().payload
            elif mode == "view":
                pub.pub(array)
                with sub.read_view(0) as pkt:
                    pkt.array()[0]
            else:
                pub.pub(array)
                sub.read().array()[0]
    finally:
        drop_topic(topic)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--loop", choices=("raw", "view", "copy"))
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if args.loop:
        os.environ.setdefault("A0PY_ROOT", f"shm:a0bench-typed-{os.getpid()}")
        loop(args.loop, args.count)
        return
    repeats = args.repeats or (1 if args.quick else 3)
    frames_n = 30 if args.quick else 90
    small_n = 2000 if args.quick else 20000
    os.environ.setdefault("A0PY_ROOT", f"shm:a0bench-typed-{os.getpid()}")

    runs = {"memcpy_ns": [], "a0py": [], "iceoryx2": [], "small": []}
    for _ in range(repeats):
        runs["memcpy_ns"].append(memcpy_ns() | {"paced": paced_memcpy_ns(frames_n)})
        runs["a0py"].append(image_a0py(frames_n))
        iox = image_iceoryx2(frames_n)
        if iox is not None:
            runs["iceoryx2"].append(iox)
        runs["small"].append(small(small_n))

    def med(rows, key):
        return statistics.median(r[key] for r in rows)

    memcpy = statistics.median(r["ring"] for r in runs["memcpy_ns"])
    hot = statistics.median(r["hot"] for r in runs["memcpy_ns"])
    paced_cp = statistics.median(r["paced"] for r in runs["memcpy_ns"])
    print(f"image {SHAPE[1]}x{SHAPE[0]}x{SHAPE[2]} uint8 at {RATE_HZ:.0f} Hz, {frames_n} frames, "
          f"medians of {repeats}; one memcpy of the frame, CPU: {paced_cp / 1e3:.0f} us paced at "
          f"{RATE_HZ:.0f} Hz in a process of its own as the publisher's (x paced), {memcpy / 1e3:.0f} us "
          f"back to back into a shared ring (x memcpy), {hot / 1e3:.0f} us hot in cache (x hot)")
    print(f"{'peer':10} {'pub us':>8} {'sub us':>8} {'total us':>9} {'x paced':>8} {'x memcpy':>9} "
          f"{'x hot':>6} {'missed':>7} {'wrong':>6} {'pub p99':>8} {'sub p99':>8}")
    summary = {"memcpy_ns": memcpy, "memcpy_hot_ns": hot, "memcpy_paced_ns": paced_cp}
    for peer in ("a0py", "iceoryx2"):
        rows = runs[peer]
        if not rows:
            print(f"{peer:10} (not installed: pip install 'a0py[bench]')")
            continue
        pub, sub = med(rows, "pub_ns"), med(rows, "sub_ns")
        summary[peer] = {"pub_ns": pub, "sub_ns": sub, "ratio": (pub + sub) / memcpy,
                         "ratio_paced": (pub + sub) / paced_cp,
                         "pub_p99_ns": med(rows, "pub_p99_ns"), "sub_p99_ns": med(rows, "sub_p99_ns"),
                         "missed": sum(r["missed"] for r in rows), "wrong": sum(r["wrong"] for r in rows)}
        print(f"{peer:10} {pub / 1e3:8.0f} {sub / 1e3:8.0f} {(pub + sub) / 1e3:9.0f} "
              f"{(pub + sub) / paced_cp:8.2f} {(pub + sub) / memcpy:9.2f} {(pub + sub) / hot:6.2f} "
              f"{summary[peer]['missed']:7d} {summary[peer]['wrong']:6d} "
              f"{summary[peer]['pub_p99_ns'] / 1e3:8.0f} {summary[peer]['sub_p99_ns'] / 1e3:8.0f}")
    print(f"\n4 KiB array, one process, CPU ns per message (pub + read), medians of {repeats} "
          f"(x raw: each block against the raw block beside it, {SMALL_BLOCKS} blocks a repeat):")
    for name in ("raw", "typed_view", "typed_copy"):
        value = med(runs["small"], name)
        ratio = med(runs["small"], f"{name}_x_raw") if name != "raw" else 1.0
        summary.setdefault("small", {})[name] = value
        summary["small"][f"{name}_x_raw"] = ratio
        print(f"  {name:11} {value:8.0f} ns  {ratio:5.2f}x raw")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
