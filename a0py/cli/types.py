"""Click parameter types shared by every command of the ``a0py`` command line
(every command group lives in ``a0py/cli/``). It needs only click and
:mod:`a0py.errors` (:class:`ByteSize` and :class:`RootSpec` import the
protocol layer when they convert a value).

A bad value is a usage error (exit status 2, click's message naming the
option and what is wrong), never a traceback or a command that runs forever:

* :class:`FiniteFloat` — a number in a range, NaN and infinities refused
  (click's ``FloatRange`` lets NaN through every bound, and infinity through
  an open end: ``--timeout nan`` waited forever).
* :class:`BoundedInt` — an integer in a range with both ends given (an
  unbounded ``--window 99999999999999999999999`` overflowed a C size).
* :class:`Count` — how many of something: 1 (or 0 where 0 means something)
  to 2**63 - 1.
* :class:`ByteSize` — bytes, or a number with a binary unit K, M, G or T, read
  by :func:`a0py.proto.sizes.read_size` (the one size grammar, which
  ``Topic(size=)`` and ``A0PY_TOPIC_SIZES`` read too; imported when it
  converts a value).
* :class:`RootSpec` — where topics live, in ``A0PY_ROOT`` syntax, checked as
  :meth:`a0py.proto.topic.Root.parse` checks it (``shm:`` with no prefix and
  ``shm:a/b`` are refused).
* :class:`CheckedValue` — the base of the types whose values a function of a0py
  checks (its ArgumentError is the usage error).
* :class:`GlobValue` — ``GLOB=VALUE``, a setting for the topics a glob matches
  (``--size camera/*=64M``).

Ready-made: :data:`SECONDS` (a timeout or duration, 0 to
:data:`MAX_SECONDS`), :data:`RATE` (events a second, from one in
:data:`MAX_SECONDS` to :data:`MAX_RATE`).
"""

import math

import click

from a0py.errors import ArgumentError

__all__ = [
    "MAX_COUNT", "MAX_RATE", "MAX_SECONDS", "RATE", "SECONDS", "BoundedInt", "ByteSize", "CheckedValue", "Count",
    "FiniteFloat", "GlobValue", "RootSpec",
]

#: The longest timeout or duration (about 31 years): the core treats longer
#: waits as no limit anyway, and sleeps and queues refuse far longer ones.
MAX_SECONDS = 1e9
#: The highest rate (a nanosecond between events).
MAX_RATE = 1e9
#: The most of anything a count may ask for.
MAX_COUNT = 2**63 - 1


class FiniteFloat(click.FloatRange):
    """A finite number (not NaN, not an infinity) from ``min`` to ``max``
    (``min_open``/``max_open``: that end excluded; None: no bound there)."""

    name = "number"

    def _describe_range(self):
        low = "" if self.min is None else f"{self.min:g}{'<' if self.min_open else '<='}"
        high = "" if self.max is None else f"{'<' if self.max_open else '<='}{self.max:g}"
        return f"{low}x{high}"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


class BoundedInt(click.IntRange):
    """An integer from ``min`` to ``max``, both required (``min_open``,
    ``max_open`` as for click's IntRange)."""

    def __init__(self, min, max, *, min_open=False, max_open=False):
        if min is None or max is None:
            raise TypeError("BoundedInt needs both bounds: an unbounded integer can overflow what it sizes")
        super().__init__(min, max, min_open=min_open, max_open=max_open)


class Count(BoundedInt):
    """How many of something: from ``min`` (1 by default; 0 where zero means
    something) to :data:`MAX_COUNT`."""

    name = "count"

    def __init__(self, min=1, max=MAX_COUNT):
        super().__init__(min, max)

    def _describe_range(self):
        return f"x>={self.min}" if self.max == MAX_COUNT else super()._describe_range()


class CheckedValue(click.ParamType):
    """A value that a0py checks as it converts it (:meth:`check`, which raises
    :class:`a0py.errors.ArgumentError` naming what is wrong): that message is
    the usage error."""

    def check(self, value):
        """``value`` converted; ArgumentError when it is bad."""
        raise NotImplementedError

    def convert(self, value, param, ctx):
        try:
            return self.check(value)
        except ArgumentError as e:
            self.fail(str(e), param, ctx)


class ByteSize(CheckedValue):
    """A size in bytes: ``65536``, or with a binary unit ``64K``, ``16M``, ``1G``,
    ``2T`` (either case, an optional ``B``/``iB``: docs/cli.md)."""

    name = "BYTES"

    def check(self, value):
        if isinstance(value, int):
            return value
        from a0py.proto.sizes import read_size

        return read_size(str(value))


class RootSpec(CheckedValue):
    """Where topics live, in ``A0PY_ROOT`` syntax (``shm:PREFIX`` or a
    directory); converts to an :class:`a0py.proto.topic.Root`."""

    name = "ROOT"

    def check(self, value):
        from a0py.proto.topic import Root

        if isinstance(value, Root):
            return value
        root = Root.parse(value)
        if root.kind == "dir":
            problem = unusable_directory(root.location)
            if problem:
                raise ArgumentError(f"{value!r} {problem}: give a directory (it is made if missing) or "
                                    "shm:PREFIX")
        return root


# Pseudo file systems: a root there is a mistake (/proc/self, /sys, /dev/null), never topics
# (a directory in /dev/shm is a tmpfs like any other, and allowed).
_PSEUDO_FS = ("/proc", "/sys", "/dev")


class GlobValue(click.ParamType):
    """``GLOB=VALUE``: a topic glob and a setting for the topics it matches, converted
    to the pair ``(glob, value)`` (each part is checked by the command that uses it).
    `example` is shown when a value is not of that form."""

    name = "GLOB=VALUE"

    def __init__(self, example):
        self.example = example

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        glob, sep, setting = value.partition("=")
        if not sep or not glob or not setting:
            self.fail(f"{value!r}: write GLOB=VALUE, e.g. {self.example!r}", param, ctx)
        return glob, setting


def unusable_directory(path):
    """Why ``path`` cannot be a directory a0py writes in (a root of topics, a
    recording's directory), or None: it exists and is not a directory, or it
    lies in /proc, /sys or /dev (but for /dev/shm)."""
    import os

    real = os.path.realpath(path)
    for top in _PSEUDO_FS:
        if (real == top or real.startswith(top + "/")) and not real.startswith("/dev/shm/"):
            return f"lies in {top}, which holds no topics or files of a0py's"
    if os.path.exists(real) and not os.path.isdir(real):
        return "is not a directory"
    return None


#: A timeout or duration in seconds.
SECONDS = FiniteFloat(0, MAX_SECONDS)
#: A rate in events a second (at least one in MAX_SECONDS).
RATE = FiniteFloat(1 / MAX_SECONDS, MAX_RATE)
