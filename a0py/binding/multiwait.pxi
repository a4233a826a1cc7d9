# binding/multiwait.pxi — one thread sleeping on many arenas at once
# (csrc/a0_multiwait.h). Included by a0py/_core.pyx. a0py.proto's dispatcher
# runs one MultiWait per thread for every subscriber of the process.
#
# Invariants:
#  - An arena's words are read only while it is open: closed ones are
#    dropped (under the GIL) before any word is touched, and each arena is
#    counted busy for the length of a sleep, so close() from another thread
#    defers its unmap until the sleeper is awake.
#  - changed() records the value it saw of every word; wait() sleeps only
#    while every word still has that value. Whatever was committed after the
#    caller's last changed() therefore ends the next wait at once.

_MULTIWAIT_MODES = {"waitv": A0_MULTIWAIT_WAITV, "poll": A0_MULTIWAIT_POLL}
_multiwait_default = None


def multiwait_mode():
    """How a MultiWait made now sleeps: 'waitv' (Linux futex_waitv, one sleep
    on every arena) or 'poll' (the fallback where the kernel or a seccomp
    filter lacks it: sleeps on its control word and checks the arenas at
    least every 8 ms). Environment: A0PY_MULTIWAIT=poll forces the fallback,
    =waitv refuses to fall back (A0OSError where missing), =auto (default)."""
    global _multiwait_default
    if _multiwait_default is None:
        wanted = os.environ.get("A0PY_MULTIWAIT", "auto").strip().lower() or "auto"
        if wanted not in ("auto", "waitv", "poll"):
            raise ArgumentError(f"A0PY_MULTIWAIT must be auto, waitv or poll, not {wanted!r}")
        if wanted == "auto":
            wanted = "waitv" if a0_multiwait_waitv_available() else "poll"
        elif wanted == "waitv" and not a0_multiwait_waitv_available():
            raise A0OSError(_errno.ENOSYS, "A0PY_MULTIWAIT=waitv but futex_waitv is not available here "
                            "(Linux 5.16+ without a seccomp filter that blocks it)")
        _multiwait_default = wanted
    return _multiwait_default


cdef class MultiWait:
    """Sleeps until any of up to 127 arenas changes (a commit, an eviction,
    a clear), or :meth:`wake` is called from another thread.

    ``local=True`` watches each arena's ``notify_local`` word instead of its
    notify word: it moves on the same events except those of relayed
    writers (:attr:`Transport.relayed`), so a process that forwards a ring's
    frames and writes relayed ones into it itself (a bridge) is not woken by
    its own writes. Only for a caller that waits for frames of non-relayed
    writers: a relayed commit alone does not end its wait.

    ``set_arenas(list)`` says which to watch; ``changed()`` returns those
    whose notify word moved since the previous call (and newly added ones),
    remembering what it saw; ``wait(timeout)`` sleeps while nothing moved
    since. One thread drives a MultiWait; ``wake()`` is safe from any."""

    cdef a0_multiwait_entry_t entries[128]
    cdef uint32_t ctl
    cdef uint32_t n
    cdef list _arenas
    cdef set _fresh
    cdef a0_multiwait_mode_t _mode
    cdef bint _local

    def __cinit__(self, mode=None, local=False):
        if mode is None:
            mode = multiwait_mode()
        if mode not in _MULTIWAIT_MODES:
            raise ArgumentError(f"MultiWait mode must be 'waitv' or 'poll', not {mode!r}")
        if not isinstance(local, bool):
            raise ArgumentError(f"MultiWait local must be True or False, not {local!r}")
        self._mode = _MULTIWAIT_MODES[mode]
        self._local = local
        self.ctl = 0
        self.entries[0].word = &self.ctl
        self.entries[0].arm = 0
        self.entries[0].expected = 0
        self.entries[0].shared = 0
        self.n = 1
        self._arenas = []
        self._fresh = set()

    @property
    def mode(self):
        """'waitv' or 'poll'."""
        return "poll" if self._mode == A0_MULTIWAIT_POLL else "waitv"

    @property
    def local(self):
        """True if it watches the arenas' notify_local words (see the class doc)."""
        return self._local

    @property
    def capacity(self):
        """How many arenas one MultiWait watches at most."""
        return A0_MULTIWAIT_MAX - 1

    @property
    def arenas(self):
        return list(self._arenas)

    def set_arenas(self, arenas):
        """Watches exactly `arenas` (open Arena objects, at most `capacity`).
        Arenas not watched before are reported by the next changed()."""
        cdef Arena arena
        cdef a0_multiwait_entry_t saved[128]
        arenas = list(arenas)
        if len(arenas) > A0_MULTIWAIT_MAX - 1:
            raise ArgumentError(
                f"a MultiWait watches at most {A0_MULTIWAIT_MAX - 1} arenas, got {len(arenas)}")
        old = {id(a): i for i, a in enumerate(self._arenas)}
        memcpy(saved, self.entries, sizeof(saved))
        fresh = set()
        for a in arenas:
            if not isinstance(a, Arena):
                raise ArgumentError(f"MultiWait watches a0py.Arena objects, not {type(a).__name__}")
            if (<Arena>a).closed:
                raise ClosedError(f"{a._describe()} is closed")
        for i, a in enumerate(arenas):
            arena = <Arena>a
            j = old.get(id(a))
            if j is None:
                if self._local:
                    a0_multiwait_arena_local_entry(arena.base, &self.entries[i + 1])
                else:
                    a0_multiwait_arena_entry(arena.base, &self.entries[i + 1])
                fresh.add(id(a))
            else:
                self.entries[i + 1] = saved[<Py_ssize_t>j + 1]
                if id(a) in self._fresh:
                    fresh.add(id(a))
        self._arenas = arenas
        self._fresh = fresh
        self.n = <uint32_t>len(arenas) + 1

    cdef int _prune_closed(self) except -1:
        if any((<Arena>a).closed for a in self._arenas):
            self.set_arenas([a for a in self._arenas if not (<Arena>a).closed])
        return 0

    def changed(self):
        """The arenas whose notify word moved since the previous call (or
        that were added since), in watch order; records what it saw for the
        next wait(). Closed arenas are dropped from the watch."""
        cdef uint32_t i, now
        self._prune_closed()
        out = []
        self.entries[0].expected = a0_multiwait_load(&self.entries[0])
        for i in range(1, self.n):
            now = a0_multiwait_load(&self.entries[i])
            arena = self._arenas[i - 1]
            if now != self.entries[i].expected or id(arena) in self._fresh:
                self.entries[i].expected = now
                out.append(arena)
        self._fresh.clear()
        return out

    def wait(self, timeout=None):
        """Sleeps until a watched arena changes (since the last changed()),
        wake() is called, a signal arrives, or `timeout` seconds pass (None:
        no limit). Returns False on timeout, else True (which may be
        spurious: call changed() to see). Falls back to polling for good if
        futex_waitv turns out to be unavailable."""
        global _multiwait_default
        cdef timespec ts
        cdef a0_err_t err
        cdef int has_deadline = _make_deadline(timeout, &ts)
        cdef int saved_errno
        for a in self._arenas:
            if (<Arena>a).closed:
                return True  # changed() will drop it
        for a in self._arenas:
            (<Arena>a).busy += 1
        try:
            while True:
                with nogil:
                    err = a0_multiwait(self.entries, self.n, self._mode, &ts if has_deadline else NULL, NULL)
                    saved_errno = errno
                if err == A0_ERR_SYS and saved_errno in (_errno.ENOSYS, _errno.EPERM) \
                        and self._mode == A0_MULTIWAIT_WAITV:
                    self._mode = A0_MULTIWAIT_POLL
                    _multiwait_default = "poll"
                    continue
                break
        finally:
            for a in self._arenas:
                (<Arena>a).busy -= 1
                (<Arena>a)._maybe_unmap()
        if err == A0_ERR_TIMEOUT:
            return False
        if err == A0_ERR_INTERRUPTED:
            PyErr_CheckSignals()
            return True
        if err:
            raise A0OSError(saved_errno, f"waiting on {len(self._arenas)} arenas: {os.strerror(saved_errno)}")
        return True

    def wake(self):
        """Ends the current (or the next) wait() at once. Any thread."""
        a0_multiwait_wake_private(&self.ctl)

    def __repr__(self):
        words = " local words of" if self._local else ""
        return f"<a0py.MultiWait {self.mode} watching{words} {len(self._arenas)} arenas>"
