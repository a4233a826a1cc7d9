"""Scheduled messages: the only timers of an actor system.

One thread per system keeps a heap of ``(deadline, seq, timer)`` on the monotonic clock and
sends each due message to its target (a ref or any callable). The thread starts with the
first scheduled message. A target that raises is reported and the scheduler goes on.
"""

import heapq
import itertools
import math
import threading
import time

from .errors import ActorConfigError, ActorStoppedError

__all__ = ["Timer"]


class Timer:
    """A scheduled send. :meth:`cancel` prevents it if it has not fired yet."""

    __slots__ = ("cancelled", "deadline", "fired", "message", "target")

    def __init__(self, deadline, target, message):
        self.deadline = deadline
        self.target = target
        self.message = message
        self.cancelled = False
        self.fired = False

    def cancel(self):
        """Cancel the send; True if it had not fired yet."""
        if self.fired:
            return False
        self.cancelled = True
        return True

    def __repr__(self):
        state = "fired" if self.fired else "cancelled" if self.cancelled else "pending"
        return f"<Timer {state} in {self.deadline - time.monotonic():.3f}s to {self.target!r}>"


class _Scheduler:
    """One thread, one heap of (deadline, seq, timer) on the monotonic clock.
    ``report(timer, error)`` is called (on the scheduler's thread) when a target raises."""

    def __init__(self, report):
        self._report = report
        self._heap = []
        self._seq = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._thread = None

    def schedule(self, deadline, target, message):
        timer = Timer(deadline, target, message)
        with self._cond:
            if self._stopped:
                raise ActorStoppedError("the actor system is shut down; nothing can be scheduled")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="a0py-actor-scheduler",
                                                daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (deadline, next(self._seq), timer))
            if self._heap[0][2] is timer:
                self._cond.notify()
        return timer

    def _run(self):
        heap = self._heap
        cond = self._cond
        while True:
            with cond:
                while True:
                    if self._stopped:
                        return
                    if heap:
                        delay = heap[0][0] - time.monotonic()
                        if delay <= 0:
                            break
                        cond.wait(delay)
                    else:
                        cond.wait()
                due = []
                now = time.monotonic()
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap)[2])
            for timer in due:
                if timer.cancelled:
                    continue
                timer.fired = True
                try:
                    timer.target(timer.message)
                except Exception as exc:
                    self._report(timer, exc)

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def pending(self):
        with self._cond:
            return sum(1 for _, _, t in self._heap if not t.cancelled)


def _check_delay(value, what):
    """``value`` as a float of seconds; :class:`ActorConfigError` naming ``what`` if it is
    not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ActorConfigError(f"{what} must be a number of seconds, got {value!r}")
    return float(value)
