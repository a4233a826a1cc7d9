"""What every command group shares: the error a user can act on, the arena
options (``--shm NAME | --file PATH``), sizes with units, and the mapping of
a0py's exceptions to messages that name the arena and say what to do.

Invariant: a command never lets an :class:`a0py.A0Error` reach the user as a
traceback; it leaves through :func:`errors_about`, which turns it into a
:class:`CliError` (one line on stderr, exit status 1).
"""

import contextlib
import functools
import re
import shlex
from dataclasses import dataclass

import click

from a0py.errors import (
    A0Error,
    ArenaCorruptError,
    ArenaExistsError,
    ArenaFormatError,
    ArenaNotFoundError,
    FrameTooLargeError,
)


class CliError(click.ClickException):
    """An error the user can act on: ``a0py: error: MESSAGE`` on stderr, exit 1."""

    def show(self, file=None):
        click.echo(f"a0py: error: {self.format_message()}", err=True)


@dataclass(frozen=True)
class ArenaTarget:
    """The arena a command works on: a shared memory name or a file path."""

    shm: str | None = None
    path: str | None = None

    @property
    def label(self):
        """How messages name it: ``shared memory arena 'x'``, ``file arena 'p'``."""
        if self.shm is not None:
            return f"shared memory arena '{self.shm.lstrip('/')}'"
        return f"file arena '{self.path}'"

    @property
    def flag(self):
        """The option that names it again on a command line, shell-quoted."""
        if self.shm is not None:
            return f"--shm {shlex.quote(self.shm)}"
        return f"--file {shlex.quote(self.path)}"

    def open(self, size=None):
        """Attach to the arena (creating it with ``size`` bytes when given and
        missing). Raises what :meth:`a0py.Arena.shm` / ``Arena.file`` raise."""
        from a0py import Arena

        if self.shm is not None:
            return Arena.shm(self.shm, size)
        return Arena.file(self.path, size)


def arena_options(command):
    """Add ``--shm NAME`` and ``--file PATH`` (exactly one required) to a
    command; it receives them as one ``target`` (:class:`ArenaTarget`)."""

    @click.option("--file", "path", metavar="PATH", help="A file arena, by path.")
    @click.option("--shm", metavar="NAME", help="A shared memory arena, by name (as in /dev/shm).")
    @functools.wraps(command)
    def with_target(*args, shm, path, **kwargs):
        if (shm is None) == (path is None):
            raise click.UsageError("name one arena: --shm NAME or --file PATH")
        return command(*args, target=ArenaTarget(shm=shm, path=path), **kwargs)

    return with_target


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class ByteSize(click.ParamType):
    """A size in bytes: ``65536``, or with a binary unit ``64K``, ``16M``, ``1G``."""

    name = "BYTES"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", str(value), re.IGNORECASE)
        if match is None:
            self.fail(f"{value!r} is not a size: give bytes, or a number with K, M or G (64K, 16M)", param, ctx)
        return int(match.group(1)) * _UNITS[match.group(2).upper()]


def create_hint(target):
    return f"create it with `a0py write {target.flag} --size BYTES DATA`"


def _hint(error, target):
    """What to do about an a0py error met on ``target``."""
    if isinstance(error, ArenaExistsError):
        return f"leave out --size to use it as it is, or remove it first with `a0py rm {target.flag}`"
    if isinstance(error, FrameTooLargeError):
        return f"use a larger arena: remove it with `a0py rm {target.flag}` and create it again with a larger --size"
    if isinstance(error, ArenaFormatError):
        return "check the name; an arena of another a0py version, or another program's file, cannot be read"
    if isinstance(error, ArenaCorruptError):
        return f"the arena is damaged; remove it with `a0py rm {target.flag}` and create it again"
    return None


@contextlib.contextmanager
def errors_about(target, *, missing_hint=None):
    """Turn the a0py errors raised inside the block into :class:`CliError`
    naming ``target``, with a hint of what to do. ``missing_hint`` replaces
    the default hint for a missing arena (creating it with ``a0py write``)."""
    try:
        yield
    except ArenaNotFoundError:
        raise CliError(f"{target.label} does not exist: {missing_hint or create_hint(target)}") from None
    except A0Error as error:
        message = str(error)
        name = target.shm.lstrip("/") if target.shm is not None else target.path
        if name not in message:
            message = f"{target.label}: {message}"
        hint = _hint(error, target)
        raise CliError(f"{message}; {hint}" if hint else message) from None
