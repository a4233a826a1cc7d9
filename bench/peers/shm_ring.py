"""The baseline: a ring of slots in POSIX shared memory and two semaphores."""

from .harness import Peer, unique


class ShmRing(Peer):
    """The simplest shared-memory channel, written for this benchmark: per
    receiver, a ring of fixed-size slots in POSIX shared memory and two
    POSIX semaphores (free slots, filled slots), the classic bounded buffer.
    One reader, no headers, no history, lossless (the writer waits when the
    ring is full); glibc semaphores make no system call unless someone must
    sleep."""

    key = "shm-ring"
    label = "shm ring + semaphore"
    zero_copy = "struct.unpack_from on the mmap, in place"
    notes = ("one ring of fixed-size slots ({buffer} / receivers) and two POSIX semaphores per "
             "receiver; the reader copies a slot out with `mmap[a:b]` (zero-copy: reads in place)")
    needs = (("posix_ipc", "posix_ipc not installed ({e})"),)

    def setup(self, size, n_rx, buffer, pingpong=False):
        import posix_ipc

        state = super().setup(size, n_rx, buffer, pingpong)
        state["slots"] = slots = max(4, buffer // n_rx // size)
        state["rings"] = []
        for i in range(n_rx):
            base = "/" + unique(f"a0bench-ring{i}")
            mem = posix_ipc.SharedMemory(base, posix_ipc.O_CREX, size=slots * size)
            mem.close_fd()
            posix_ipc.Semaphore(base + "-free", posix_ipc.O_CREX, initial_value=slots).close()
            posix_ipc.Semaphore(base + "-full", posix_ipc.O_CREX, initial_value=0).close()
            state["rings"].append(base)
        return state

    @staticmethod
    def _open(base):
        import mmap

        import posix_ipc

        mem = posix_ipc.SharedMemory(base)
        mm = mmap.mmap(mem.fd, mem.size)
        mem.close_fd()
        return mm, posix_ipc.Semaphore(base + "-free"), posix_ipc.Semaphore(base + "-full")

    @staticmethod
    def _closer(rings):
        def close():
            for mm, free, full in rings:
                mm.close()
                free.close()
                full.close()
        return close

    def sender(self, state):
        size, total = state["size"], state["size"] * state["slots"]
        rings = [self._open(b) for b in state["rings"]]
        ends = [(mm, free.acquire, full.release) for mm, free, full in rings]
        pos = [0]

        def send(msg):
            off = pos[0]
            for mm, wait_free, post_full in ends:
                wait_free()
                mm[off:off + size] = msg
                post_full()
            off += size
            pos[0] = 0 if off == total else off
        return send, self._closer(rings)

    def _receiver(self, state, index, peek):
        size, total = state["size"], state["size"] * state["slots"]
        ring = self._open(state["rings"][index])
        mm, free, full = ring
        wait_full, post_free = full.acquire, free.release
        pos = [0]

        if peek is not None:
            def recv():
                off = pos[0]
                wait_full()
                got = peek(mm, off)
                post_free()
                off += size
                pos[0] = 0 if off == total else off
                return got
        else:
            def recv():
                off = pos[0]
                wait_full()
                data = mm[off:off + size]
                post_free()
                off += size
                pos[0] = 0 if off == total else off
                return data
        return recv, self._closer([ring])

    def receiver(self, state, index):
        return self._receiver(state, index, None)

    def zero_copy_receiver(self, state, index, peek):
        return self._receiver(state, index, peek)

    def teardown(self, state):
        import posix_ipc

        for base in state["rings"]:
            for unlink, name in ((posix_ipc.unlink_shared_memory, base),
                                 (posix_ipc.unlink_semaphore, base + "-free"),
                                 (posix_ipc.unlink_semaphore, base + "-full")):
                try:
                    unlink(name)
                except posix_ipc.ExistentialError:
                    pass
