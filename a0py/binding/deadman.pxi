# deadman.pxi — Deadman: liveness by robust-lock ownership, with blocking
# calls run in interruptible slices. Included by _core.pyx.

cdef enum:
    _DM_TAKE = 0
    _DM_WAIT_TAKEN = 1
    _DM_WAIT_RELEASED = 2
    # Blocking deadman calls sleep in slices this long, so that signals
    # (Ctrl-C) are seen even in pthread lock waits, which glibc restarts.
    _DM_SLICE_NS = 50000000


cdef a0_err_t _deadman_blocking(Arena arena, int op, object timeout) except *:
    """Runs a blocking deadman operation in interruptible slices, with the
    arena counted busy so close() from another thread defers its unmap."""
    cdef timespec final, slice_end
    cdef a0_err_t err = A0_OK
    arena._check_open()
    cdef int has_deadline = _make_deadline(timeout, &final, arena)
    arena.busy += 1
    try:
        while True:
            slice_end = a0_deadline_after_ns(_DM_SLICE_NS)
            if has_deadline and a0_timespec_before(&final, &slice_end):
                slice_end = final
            with nogil:
                if op == _DM_TAKE:
                    err = a0_deadman_take(arena.base, &slice_end)
                elif op == _DM_WAIT_TAKEN:
                    err = a0_deadman_wait_taken(arena.base, &slice_end)
                else:
                    err = a0_deadman_wait_released(arena.base, &slice_end)
            if err == A0_OK and op == _DM_TAKE:
                arena.deadman_held = True
                if arena.closing:  # closed meanwhile: don't hold a lock in a mapping about to go
                    a0_deadman_release(arena.base)
                    arena.deadman_held = False
                    err = A0_ERR_NOT_LOCKED
                    raise ClosedError(f"{arena._describe()} was closed while taking its deadman")
            if err != A0_ERR_TIMEOUT and err != A0_ERR_INTERRUPTED:
                return err
            PyErr_CheckSignals()
            if err == A0_ERR_TIMEOUT and has_deadline and a0_deadline_passed(&final):
                return A0_ERR_TIMEOUT
    finally:
        arena.busy -= 1
        arena._maybe_unmap()


cdef class Deadman:
    """Liveness by lock ownership: a robust lock in the arena's header that
    one process holds for its life. When the holder exits or is killed, the
    lock is at once seen as free (no timeouts, no heartbeats).

    Take it from a thread that lives as long as the process (the main thread):
    a robust lock is released when its owning thread ends.
    """

    def __cinit__(self, arena):
        if not isinstance(arena, Arena):
            raise ArgumentError(f"Deadman needs an a0py.Arena, not {type(arena).__name__}")
        (<Arena>arena)._check_open()
        self.arena = arena

    def take(self, timeout=None):
        """Takes the deadman, waiting for its holder to release it or die.
        A0TimeoutError at the deadline; LockError if this thread holds it;
        interruptible (Ctrl-C raises KeyboardInterrupt)."""
        cdef a0_err_t err = _deadman_blocking(self.arena, _DM_TAKE, timeout)
        if err:
            _raise(err, f"taking the deadman of {self.arena._describe()}")

    def try_take(self):
        """Takes the deadman if free (or its holder died); returns whether it did."""
        self.arena._check_open()
        cdef a0_err_t err = a0_deadman_try_take(self.arena.base)
        if err == A0_ERR_BUSY or err == A0_ERR_DEADLOCK:
            return False
        if err:
            _raise(err, f"taking the deadman of {self.arena._describe()}")
        self.arena.deadman_held = True
        return True

    def release(self):
        """Releases the deadman. LockError if this thread does not hold it."""
        self.arena._check_open()
        cdef a0_err_t err = a0_deadman_release(self.arena.base)
        if err:
            _raise(err, f"releasing the deadman of {self.arena._describe()}")
        self.arena.deadman_held = False

    def _state(self):
        cdef c_bool taken = 0, mine = 0
        cdef uint32_t pid = 0
        self.arena._check_open()
        cdef a0_err_t err = a0_deadman_state(self.arena.base, &taken, &mine, &pid)
        if err:
            _raise(err, f"reading the deadman of {self.arena._describe()}")
        return bool(taken), bool(mine), pid

    def is_taken(self):
        """Whether a live thread (this one included) holds the deadman."""
        return self._state()[0]

    @property
    def is_mine(self):
        """Whether the calling thread holds the deadman."""
        return self._state()[1]

    @property
    def owner_pid(self):
        """Pid of the live holder, or None."""
        taken, _, pid = self._state()
        return pid if taken and pid else None

    def wait_taken(self, timeout=None):
        """Blocks until some process holds the deadman. A0TimeoutError at the
        deadline; interruptible."""
        cdef a0_err_t err = _deadman_blocking(self.arena, _DM_WAIT_TAKEN, timeout)
        if err:
            _raise(err, f"waiting for the deadman of {self.arena._describe()} to be taken")

    def wait_released(self, timeout=None):
        """Blocks until the holder releases the deadman or dies.
        A0TimeoutError at the deadline; LockError if this thread holds it;
        interruptible."""
        cdef a0_err_t err = _deadman_blocking(self.arena, _DM_WAIT_RELEASED, timeout)
        if err:
            if err == A0_ERR_DEADLOCK:
                raise LockError("this thread holds the deadman: it will not be released by waiting")
            _raise(err, f"waiting for the deadman of {self.arena._describe()} to be released")

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.release()
        return False
