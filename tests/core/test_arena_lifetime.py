"""Arenas dropped by the cycle collector: the interpreter survives and
malloc's heap stays sound (the case runs in a child, whose death by a signal
fails the test)."""

import subprocess
import sys
import textwrap


def run_child(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


def test_heap_arenas_collected_with_their_transport_cycles_are_freed_not_unmapped():
    # A Transport and its LockedTransport form a cycle: the collector frees
    # them and the arena together. The arena's memory must be free()d as heap
    # memory (munmap of it corrupted malloc: a SIGSEGV within ~600 rounds at
    # these sizes).
    r = run_child("""
        import gc
        import a0py
        for size in (576, 704, 720, 1024, 2048):
            for i in range(1500):
                a = a0py.Arena.heap(size)
                tr = a0py.Transport(a)
                tr.write(b"x" * 16)
                del tr, a
            gc.collect()
        blobs = [bytes(4096) for _ in range(10000)]  # malloc still sound
        print("ok", len(blobs))
    """)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.split() == ["ok", "10000"]



def test_an_array_kept_over_a_lent_frame_keeps_the_mapping():
    # np.ndarray(buffer=view) keeps the object under a memoryview (the lent
    # frame's exporter) as the array's base but releases its buffer at once: the
    # exporter must hold the mapping for as long as it lives, not only while its
    # buffer is held, or the array reads unmapped memory once the lock ends and
    # the arena is closed (the child died of SIGSEGV before it did).
    r = run_child("""
        import os
        import numpy as np
        import a0py
        name = f"a0py-test-kept-view-{os.getpid()}"
        a = a0py.Arena.shm(name, 1 << 16)
        a0py.Arena.unlink_shm(name)
        tr = a0py.Transport(a)
        tr.write(bytes(range(64)))
        with tr.lock() as t:
            t.jump_tail()
            kept = np.ndarray((64,), np.uint8, buffer=t.frame().data)
        with tr.lock() as t:
            t.jump_tail()
            alloc_view = t.alloc(64)
            written = np.ndarray((64,), np.uint8, buffer=alloc_view)
            written[:] = 7
            t.commit()
        del tr
        a.close()
        assert a.closed
        print("ok", int(kept.sum()), int(written.sum()))
        del kept, written
    """)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.split() == ["ok", str(sum(range(64))), str(7 * 64)]
