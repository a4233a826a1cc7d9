"""a0py example: drain an arena in bulk with ``Transport.read_into``.

    python examples/read_into.py                    # 100 000 frames flat out into a 4 MiB arena
    python examples/read_into.py --arena-kib 64     # a 64 KiB arena: most frames evicted unread

A writer process writes numbered frames into a small shared-memory arena as
fast as it can; this process drains it with ``read_into``: each call copies
the frames after its cursor into one ``bytearray``, each after a prefix of
fixed layout (here the default: the frame's seq and size, u64 each), with
no Python object per frame, without the arena's lock and with the GIL
released. ``a0py record`` fills an MCAP chunk the same way, with an
``a0py.FramePrefix`` laid out as an MCAP Message record's fixed fields.
Frames the writer evicted before the reader got to them come back as a gap
``(gap_first, gap_last)``, never silently: the example checks that every
seq from the reader's first frame on was either read or reported missing
(like ``Transport.missed``, gaps count from a reader's first read: it
starts at the oldest frame the arena holds then). Reading is cheap (about
80 ns a frame); this example then walks every frame in Python, which is
slower than the writer, so it falls behind now and then and the gaps show.
"""

import argparse
import multiprocessing as mp
import os
import struct
import sys
import time

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py

# What read_into writes before each frame by default: its seq and its size.
PREFIX = struct.Struct("<QQ")
CTX = mp.get_context("fork")


def writer(name, frames):
    tr = a0py.Transport(a0py.Arena.shm(name))
    for i in range(frames):
        tr.write(struct.pack("<Q", i) + b"x" * 56)


def frames(buf, nbytes):
    """(seq, data) of each frame in buf[:nbytes]."""
    view = memoryview(buf)
    off = 0
    while off < nbytes:
        seq, size = PREFIX.unpack_from(buf, off)
        start = off + PREFIX.size
        off = start + size
        yield seq, view[start:off]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--arena-kib", type=int, default=4096)
    args = ap.parse_args()

    name = f"a0py-read-into-{os.getpid()}"
    arena = a0py.Arena.shm(name, args.arena_kib * 1024)
    reader = a0py.Transport(arena)
    out = bytearray(64 * 1024)
    p = CTX.Process(target=writer, args=(name, args.frames))
    p.start()
    got = missed = calls = 0
    start = last = None
    try:
        while True:
            n, nbytes, first, last_seq, gap_first, gap_last = reader.read_into(out)
            if n and start is None:
                start = last = first - 1  # the reader's first read: it starts at the oldest frame held
            if gap_first:  # it lies just before this call's first frame
                assert gap_first == last + 1 and first == gap_last + 1
                missed += gap_last - gap_first + 1
                print(f"gap: seqs {gap_first}..{gap_last} were evicted before this reader read them")
            if n:
                calls += 1
                for seq, data in frames(out, nbytes):
                    assert seq == last + 1 or (seq == first and gap_first), "one call's seqs are consecutive"
                    assert struct.unpack_from("<Q", data)[0] == seq - 1, "frame i holds the number i"
                    last = seq
                assert last == last_seq
                got += n
            elif not p.is_alive():
                break
            else:
                time.sleep(0.0005)
    finally:
        p.join()
        arena.close()
        a0py.Arena.unlink_shm(name)
    start = start or 0
    print(f"read {got} frames in {calls} read_into calls, {missed} reported missing; "
          f"seqs {start + 1}..{args.frames}: {got + missed} of {args.frames - start} accounted for")
    return 0 if got + missed == args.frames - start else 1


if __name__ == "__main__":
    sys.exit(main())
