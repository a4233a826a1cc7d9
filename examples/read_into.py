"""a0py example: drain an arena in bulk with ``Transport.read_into``.

    python examples/read_into.py                    # 100 000 frames flat out into a 4 MiB arena
    python examples/read_into.py --arena-kib 64     # a 64 KiB arena: most frames evicted unread

A writer process writes numbered frames into a small shared-memory arena as
fast as it can; this process drains it with ``read_into``: each call copies
the frames after its cursor into one ``bytearray`` as MCAP Message records
(opcode 0x05, length, channel id, sequence = the frame's seq, log time,
publish time, the frame's bytes), with no Python object per frame, without
the arena's lock and with the GIL released. This is how ``a0py record``
fills an MCAP chunk. Frames the writer evicted before the reader got to
them come back as a gap ``(gap_first, gap_last)``, never silently: the
example checks that every seq from the reader's first frame on was either
read or reported missing (like ``Transport.missed``, gaps count from a
reader's first read: it starts at the oldest frame the arena holds then).
Reading is cheap (about 80 ns a frame); this example then walks every
record in Python, which is slower than the writer, so it falls behind now
and then and the gaps show.
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

# An MCAP Message record: opcode, record length, then its fields and the data.
RECORD = struct.Struct("<BQHIQQ")
CHANNEL = 1
CTX = mp.get_context("fork")


def writer(name, frames):
    tr = a0py.Transport(a0py.Arena.shm(name))
    for i in range(frames):
        tr.write(struct.pack("<Q", i) + b"x" * 56)


def records(buf, nbytes):
    """(seq, log_time, data) of each record in buf[:nbytes]."""
    view = memoryview(buf)
    off = 0
    while off < nbytes:
        op, length, channel, seq, log_time, _publish = RECORD.unpack_from(buf, off)
        assert op == 0x05 and channel == CHANNEL
        start = off + RECORD.size
        off += 9 + length  # opcode and length are not counted in length
        yield seq, log_time, view[start:off]


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
            log_time = time.time_ns()
            n, nbytes, first, last_seq, gap_first, gap_last = reader.read_into(out, prefix=(CHANNEL, log_time))
            if n and start is None:
                start = last = first - 1  # the reader's first read: it starts at the oldest frame held
            if gap_first:  # it lies just before this call's first frame
                assert gap_first == last + 1 and first == gap_last + 1
                missed += gap_last - gap_first + 1
                print(f"gap: seqs {gap_first}..{gap_last} were evicted before this reader read them")
            if n:
                calls += 1
                for seq, _t, data in records(out, nbytes):
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
